//! Conformance: turns, the history, and a turn's units of work (`TurnStore`).

use super::*;

pub async fn user_turn_updates_last_message_and_bound_count(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let read = || async { stored_conversation(store, conversation.id).await };

    record(store, NewTurn::user(conversation.id, "Hi", true, at_s(10))).await;
    let after_bound = read().await;
    assert_eq!(after_bound.turn_count, 1);
    assert_eq!(after_bound.last_message_at, Some(at_s(10)));

    record(
        store,
        NewTurn::user(conversation.id, "Hi again", false, at_s(20)),
    )
    .await;
    let after_unbound = read().await;
    assert_eq!(
        after_unbound.turn_count, 1,
        "an unbound turn is not counted"
    );
    assert_eq!(after_unbound.last_message_at, Some(at_s(20)));

    record(
        store,
        NewTurn::agent(
            conversation.id,
            "Invented answer",
            "answered_inline",
            true,
            at_s(30),
        ),
    )
    .await;
    let after_agent = read().await;
    assert_eq!(
        after_agent.turn_count, 1,
        "an agent turn is not a contact message"
    );
    assert_eq!(after_agent.last_message_at, Some(at_s(20)));
}

pub async fn turn_round_trips_every_field(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let turn = NewTurn {
        model: Some("mock:demo".to_owned()),
        actions: Some(json!([{"tool": "add_tag", "id": "lead", "status": "staged"}])),
        reads: 1,
        input_tokens: 1200,
        output_tokens: 80,
        cached_tokens: 1024,
        cache_write_tokens: 96,
        cost_usd: 0.0125,
        latency_ms: 2345,
        ..NewTurn::agent(conversation.id, "Invented reply", "deferred", true, at_s(5))
    };
    let id = record(store, turn.clone()).await;
    let stored = store.turn(id).await.expect("turn").expect("exists");
    assert_eq!(stored.id, id);
    assert_eq!(stored.conversation_id, turn.conversation_id);
    assert_eq!(stored.role, Role::Agent);
    assert_eq!(stored.text, turn.text);
    assert_eq!(stored.outcome.as_deref(), Some("deferred"));
    assert_eq!(stored.model, turn.model);
    assert!(stored.bound);
    assert_eq!(stored.actions, turn.actions);
    assert_eq!(stored.reads, 1);
    assert_eq!(stored.input_tokens, 1200);
    assert_eq!(stored.output_tokens, 80);
    assert_eq!(stored.cached_tokens, 1024);
    assert_eq!(stored.cache_write_tokens, 96);
    assert_eq!(stored.cost_usd, 0.0125);
    assert_eq!(stored.latency_ms, 2345);
    assert_eq!(stored.created_at, at_s(5));

    let user_id = record(
        store,
        NewTurn::user(conversation.id, "Invented question", false, at_s(6)),
    )
    .await;
    let user = store.turn(user_id).await.expect("turn").expect("exists");
    assert_eq!(user.role, Role::User);
    assert_eq!(user.outcome, None);
    assert!(!user.bound);
    assert!(user.seq > stored.seq, "seq grows with every turn");
}

pub async fn turn_seq_orders_turns_in_the_same_millisecond(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let same = at_s(7);
    let first = record(store, NewTurn::user(conversation.id, "first", true, same)).await;
    let second = record(
        store,
        NewTurn::agent(conversation.id, "second", "answered_inline", true, same),
    )
    .await;
    let turns = stored_turns(store, conversation.id).await;
    assert_eq!(
        turns.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![first, second]
    );
    assert!(turns[0].seq < turns[1].seq);
    let history = store
        .history(conversation.id, t0(), 10)
        .await
        .expect("history");
    assert_eq!(
        history.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![first, second]
    );
}

pub async fn turn_actions_null_vs_empty_vs_updated(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let none_offered = record(
        store,
        NewTurn::agent(conversation.id, "a", "answered_inline", true, at_s(1)),
    )
    .await;
    let none_chosen = record(
        store,
        NewTurn {
            actions: Some(json!([])),
            ..NewTurn::agent(conversation.id, "b", "answered_inline", true, at_s(2))
        },
    )
    .await;
    let read = |id| async move { store.turn(id).await.expect("turn").expect("exists").actions };
    assert_eq!(read(none_offered).await, None, "no tool offered stays NULL");
    assert_eq!(
        read(none_chosen).await,
        Some(json!([])),
        "offered, none chosen is []"
    );

    let performed =
        json!([{"tool": "set_field", "id": "stage", "value": "qualifying", "status": "performed"}]);
    store
        .update_turn_actions(none_chosen, &performed)
        .await
        .expect("update_turn_actions");
    assert_eq!(read(none_chosen).await, Some(performed));
    assert_eq!(read(none_offered).await, None, "other turns are untouched");
}

/// Knowledge at scale: a turn's retrieved ids round-trip; a turn given none keeps NULL.
pub async fn turn_knowledge_ids_round_trip_and_default_to_null(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let given = record(
        store,
        NewTurn::agent(conversation.id, "a", "answered_inline", false, at_s(1)),
    )
    .await;
    let plain = record(
        store,
        NewTurn::agent(conversation.id, "b", "answered_inline", false, at_s(2)),
    )
    .await;
    let ids =
        json!({"offerings": ["violin-brisa-estudio-nogal", "tent-2"], "passages": ["returns#1"]});
    store
        .update_turn_knowledge(given, &ids)
        .await
        .expect("update_turn_knowledge");
    assert_eq!(store.turn_knowledge(given).await.expect("read"), Some(ids));
    assert_eq!(
        store.turn_knowledge(plain).await.expect("read"),
        None,
        "NULL by default"
    );
    assert_eq!(
        store.turn_knowledge(i64::MAX).await.expect("read"),
        None,
        "no such turn"
    );
    assert!(
        store
            .update_turn_knowledge(i64::MAX, &json!({}))
            .await
            .is_err(),
        "a turn that does not exist is an error"
    );
}

pub async fn history_is_bound_only_oldest_first_within_window_and_limit(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let other = fresh_conversation(store).await;
    let since = at_s(100);
    // Before the window: excluded even though bound.
    record(store, NewTurn::user(conversation.id, "old", true, at_s(99))).await;
    let mut inside = Vec::new();
    for i in 0..5 {
        inside.extend(record_bound_exchange(store, &conversation, i, 100 + 10 * i).await);
    }
    // Unbound and other contacts' turns never enter history.
    record(
        store,
        NewTurn::user(conversation.id, "unbound", false, at_s(200)),
    )
    .await;
    record(store, NewTurn::user(other.id, "elsewhere", true, at_s(150))).await;

    let history = store
        .history(conversation.id, since, 4)
        .await
        .expect("history");
    let ids: Vec<i64> = history.iter().map(|t| t.id).collect();
    assert_eq!(
        ids,
        inside[6..].to_vec(),
        "the last 4 bound turns, oldest first"
    );
    assert!(history.iter().all(|t| t.bound));

    let all = store
        .history(conversation.id, since, 100)
        .await
        .expect("history");
    assert_eq!(all.iter().map(|t| t.id).collect::<Vec<_>>(), inside);
    assert_eq!(
        all[0].created_at, since,
        "a turn exactly at `since` is inside"
    );
}

pub async fn turn_cap_times_newest_first(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    record_exchanges(store, &conversation, 4).await;
    record(
        store,
        NewTurn::user(conversation.id, "unbound", false, at_s(100)),
    )
    .await;

    let times = store
        .recent_user_turn_times(conversation.id, 3)
        .await
        .expect("recent_user_turn_times");
    assert_eq!(times, vec![at_s(30), at_s(20), at_s(10)]);
    let all = store
        .recent_user_turn_times(conversation.id, 50)
        .await
        .expect("recent_user_turn_times");
    assert_eq!(all, vec![at_s(30), at_s(20), at_s(10), at_s(0)]);
}

pub async fn turns_lists_every_turn_oldest_first(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let b = record(store, NewTurn::user(conversation.id, "b", false, at_s(20))).await;
    let a = record(store, NewTurn::user(conversation.id, "a", true, at_s(10))).await;
    let c = record(
        store,
        NewTurn::agent(conversation.id, "c", "escalated_precheck", false, at_s(30)),
    )
    .await;
    let turns = stored_turns(store, conversation.id).await;
    assert_eq!(
        turns.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![a, b, c]
    );
}

/// `turn_context` answers exactly what the four separate reads answer, and nothing it was not
/// asked for.
pub async fn turn_context_matches_the_separate_reads(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let day = fresh_day();
    record_exchanges(store, &conversation, 4).await;
    record(
        store,
        NewTurn::user(conversation.id, "unbound", false, at_s(50)),
    )
    .await;
    enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    store.add_budget(day, 42, 0.5).await.expect("add_budget");
    let window = at_s(3600);
    for _ in 0..2 {
        store
            .bump_rate(&conversation.subscriber_id, window)
            .await
            .expect("bump");
    }

    let query = TurnContextQuery {
        cap_limit: Some(3),
        history: Some((at_s(5), 4)),
        day,
        rate_window: Some(window),
        sales: true,
    };
    let context = store
        .turn_context(&conversation, query)
        .await
        .expect("turn_context");
    let expected = TurnContext {
        earlier_user_turns: store
            .recent_user_turn_times(conversation.id, 3)
            .await
            .expect("times"),
        history: store
            .history(conversation.id, at_s(5), 4)
            .await
            .expect("history"),
        spent: store.budget(day).await.expect("budget"),
        queued_replies: store
            .pending_replies(conversation.id)
            .await
            .expect("pending"),
        rate_count: store
            .rate_count(&conversation.subscriber_id, window)
            .await
            .expect("rate"),
        sales: Some(
            store
                .sales_record(conversation.id)
                .await
                .expect("sales_record"),
        ),
    };
    assert_eq!(context, expected);
    assert_eq!(context.earlier_user_turns.len(), 3);
    assert_eq!(context.history.len(), 4);
    assert_eq!(context.spent.tokens, 42);
    assert_eq!(context.queued_replies, 1);
    assert_eq!(context.rate_count, 2);

    let unasked = store
        .turn_context(
            &conversation,
            TurnContextQuery {
                cap_limit: None,
                history: None,
                rate_window: None,
                sales: false,
                ..query
            },
        )
        .await
        .expect("turn_context");
    assert!(unasked.earlier_user_turns.is_empty() && unasked.history.is_empty());
    assert_eq!(unasked.sales, None);
    assert_eq!(unasked.rate_count, 0);
    assert_eq!(unasked.spent, expected.spent);
    settle(store, &[conversation.id]).await;
}

/// `returning_contact` answers the contact's conversation with what `turn_context` answers for
/// it, and nothing (creating nothing) for a contact never seen.
pub async fn returning_contact_reads_conversation_and_context_together(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let day = fresh_day();
    record(
        store,
        NewTurn::user(conversation.id, "earlier", true, at_s(10)),
    )
    .await;
    store
        .bump_rate(&conversation.subscriber_id, at_s(0))
        .await
        .expect("bump");
    let query = TurnContextQuery {
        cap_limit: Some(5),
        history: Some((at_s(0), 10)),
        day,
        rate_window: Some(at_s(0)),
        sales: true,
    };
    let (found, context) = store
        .returning_contact(&conversation.subscriber_id, query)
        .await
        .expect("returning_contact")
        .expect("a returning contact");
    assert_eq!(
        Some(found),
        store.conversation(conversation.id).await.expect("read")
    );
    assert_eq!(
        context,
        store
            .turn_context(&conversation, query)
            .await
            .expect("turn_context")
    );
    assert_eq!(context.history.len(), 1);
    assert_eq!(context.rate_count, 1);

    let stranger = fresh_subscriber();
    assert!(
        store
            .returning_contact(&stranger, query)
            .await
            .expect("returning_contact")
            .is_none()
    );
    assert_eq!(
        store
            .conversation_by_subscriber(&stranger)
            .await
            .expect("lookup"),
        None,
        "nothing is created"
    );
    settle(store, &[conversation.id]).await;
}

/// `message` counted under `rate`, answered by `reply` and charged `tokens` and `cost_usd` on
/// `day`, with no escalation.
fn charged_exchange<'a>(
    message: &'a NewTurn,
    rate: (&'a SubscriberId, DateTime<Utc>),
    reply: &'a NewTurn,
    day: NaiveDate,
    tokens: i64,
    cost_usd: f64,
) -> Exchange<'a> {
    Exchange {
        rate: Some(rate),
        reply: Some(reply),
        charge: Some(BudgetCharge {
            day,
            tokens,
            cost_usd,
        }),
        escalated_at: None,
        ..Exchange::of(message)
    }
}

/// `record_exchange` writes the message, its count, the reply, the charge and the escalation,
/// each only when asked, in that order (the message before its reply).
pub async fn record_exchange_writes_what_it_is_given(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let subscriber = &conversation.subscriber_id;
    let day = fresh_day();
    let window = at_s(3600);

    let message = NewTurn::user(conversation.id, "When are classes?", true, at_s(3601));
    let mut reply = NewTurn::agent(
        conversation.id,
        "Classes run weekly.",
        "answered_inline",
        true,
        at_s(3601),
    );
    reply.input_tokens = 100;
    let answered = store
        .record_exchange(charged_exchange(
            &message,
            (subscriber, window),
            &reply,
            day,
            120,
            0.25,
        ))
        .await
        .expect("record_exchange");
    let reply_id = answered.reply.expect("a reply id");
    assert!(reply_id > answered.message);
    assert_eq!(store.rate_count(subscriber, window).await.expect("rate"), 1);
    let usage = store.budget(day).await.expect("budget");
    assert_eq!(usage.tokens, 120);
    assert!((usage.cost_usd - 0.25).abs() < 1e-9);
    let after_answer = stored_conversation(store, conversation.id).await;
    assert_eq!(after_answer.escalated_at, None);
    assert_eq!(after_answer.turn_count, 1);
    assert_eq!(after_answer.last_message_at, Some(at_s(3601)));

    // A message stopped before the rate check, with the escalation copy: not counted, not
    // charged, the conversation marked escalated.
    let stopped = NewTurn::user(conversation.id, "stop", true, at_s(3602));
    let copy = NewTurn::agent(
        conversation.id,
        "A person will reply.",
        "escalated_precheck",
        true,
        at_s(3602),
    );
    store
        .record_exchange(Exchange {
            message: &stopped,
            rate: None,
            reply: Some(&copy),
            charge: None,
            escalated_at: Some(at_s(3602)),
            ..Exchange::of(&stopped)
        })
        .await
        .expect("record_exchange");
    assert_eq!(store.rate_count(subscriber, window).await.expect("rate"), 1);
    assert_eq!(store.budget(day).await.expect("budget").tokens, 120);
    let escalated = stored_conversation(store, conversation.id).await;
    assert_eq!(escalated.escalated_at, Some(at_s(3602)));
    assert_eq!(escalated.turn_count, 2);

    // A message with no reply (an aborted model call): the message alone.
    let alone = NewTurn::user(conversation.id, "hello?", true, at_s(3603));
    let ids = store
        .record_exchange(Exchange {
            rate: Some((subscriber, window)),
            ..Exchange::of(&alone)
        })
        .await
        .expect("record_exchange");
    assert_eq!(ids.reply, None);
    assert_eq!(store.rate_count(subscriber, window).await.expect("rate"), 2);

    let turns = stored_turns(store, conversation.id).await;
    let stored: Vec<(Role, &str)> = turns.iter().map(|t| (t.role, t.text.as_str())).collect();
    assert_eq!(
        stored,
        vec![
            (Role::User, "When are classes?"),
            (Role::Agent, "Classes run weekly."),
            (Role::User, "stop"),
            (Role::Agent, "A person will reply."),
            (Role::User, "hello?"),
        ]
    );
    assert_eq!((turns[0].id, turns[1].id), (answered.message, reply_id));
    assert_eq!(turns[1].input_tokens, 100);
}

/// 020: a media message keeps its kind; the marker a promise recorded gives way to the
/// transcript when the turn is kept; typed text has no kind.
pub async fn spec_020_media_kind_round_trips_and_the_transcript_replaces_the_marker(
    store: &dyn Store,
) {
    let conversation = fresh_conversation(store).await;
    let typed = NewTurn::user(conversation.id, "hello", true, at_s(1));
    store.record_exchange(Exchange::of(&typed)).await.unwrap();
    let mut marker = NewTurn::user(conversation.id, "[voice note]", true, at_s(2));
    marker.media_kind = Some("audio".to_owned());
    let promised = store.record_exchange(Exchange::of(&marker)).await.unwrap();
    let mut transcript = marker.clone();
    transcript.text = "Is the Saturday class still open?".to_owned();
    let reply = NewTurn::agent(conversation.id, "It is.", "deferred", true, at_s(3));
    store
        .record_exchange(Exchange {
            recorded: Some(promised.message),
            reply: Some(&reply),
            ..Exchange::of(&transcript)
        })
        .await
        .unwrap();
    let turns = store.turns(conversation.id).await.unwrap();
    let kinds: Vec<_> = turns
        .iter()
        .map(|t| (t.text.as_str(), t.media_kind.as_deref()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("hello", None),
            ("Is the Saturday class still open?", Some("audio")),
            ("It is.", None),
        ]
    );
}

/// A promise's two rows for `conversation` (written at 100 s, due at 200 s): the holding reply
/// and the fallback handoff.
fn promise_rows(conversation: &Conversation) -> [NewOutboxRow; 2] {
    let fallback =
        |kind, payload| NewOutboxRow::of(conversation, kind, payload, at_s(100)).due_at(at_s(200));
    [
        fallback(
            OutboxKind::Reply,
            json!({"messages": ["A person will reply."], "actions": [], "turnId": null}),
        ),
        fallback(
            OutboxKind::Handoff,
            json!({"actions": [], "turnId": null, "fallback": true}),
        ),
    ]
}

/// Writes `message` with `rows` as a promise: the exchange's ids, then the reply row's and the
/// handoff row's.
async fn write_promise(
    store: &dyn Store,
    message: &NewTurn,
    rows: &[NewOutboxRow],
) -> (crate::store::ExchangeIds, i64, i64) {
    let promised = store
        .record_exchange(Exchange {
            outbox: rows,
            ..Exchange::of(message)
        })
        .await
        .expect("the promise is written");
    let [reply_row, handoff_row] = promised.outbox[..] else {
        panic!("two rows: {:?}", promised.outbox);
    };
    (promised, reply_row, handoff_row)
}

/// A promise (the message and two pending rows, no reply) is kept by a later exchange
/// in one transaction: the message is not written again, the reply row gets the reply and its
/// turn's id and falls due, the fallback handoff goes; a handoff row written with an escalated
/// turn carries that turn's id.
pub async fn record_exchange_keeps_a_promise(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let message = NewTurn::user(conversation.id, "Any places left?", true, at_s(100));
    let rows = promise_rows(&conversation);
    let (promised, reply_row, handoff_row) = write_promise(store, &message, &rows).await;
    let stored = store.outbox_row(reply_row).await.unwrap().unwrap();
    assert_eq!(
        stored.payload["turnId"],
        json!(promised.message),
        "the message's id"
    );
    assert_eq!(stored.next_attempt_at, at_s(200));

    let answer = NewTurn::agent(conversation.id, "Two places.", "deferred", true, at_s(105));
    let payload = json!({"messages": ["Two places."], "actions": [], "turnId": null});
    let kept = store
        .record_exchange(Exchange {
            recorded: Some(promised.message),
            reply: Some(&answer),
            keep: Some(KeepPromise {
                rows: PromiseRows {
                    reply: reply_row,
                    handoff: handoff_row,
                },
                payload: Some(&payload),
                due: at_s(105),
                handoff: false,
                answered: false,
            }),
            ..Exchange::of(&message)
        })
        .await
        .expect("the promise is kept");
    assert_eq!(kept.message, promised.message);
    let turns = store.turns(conversation.id).await.unwrap();
    assert_eq!(turns.len(), 2, "the message is not written twice");
    let stored = store.outbox_row(reply_row).await.unwrap().unwrap();
    assert_eq!(stored.payload["messages"], json!(["Two places."]));
    assert_eq!(stored.payload["turnId"], json!(kept.reply.unwrap()));
    assert_eq!(stored.next_attempt_at, at_s(105));
    assert_eq!(
        store.outbox_row(handoff_row).await.unwrap(),
        None,
        "removed"
    );

    // Kept twice: the row is no longer the promise's (here: claimed and delivered).
    store.mark_delivered(reply_row, at_s(106)).await.unwrap();
    let lapsed = store
        .record_exchange(Exchange {
            recorded: Some(promised.message),
            reply: Some(&answer),
            keep: Some(KeepPromise {
                rows: PromiseRows {
                    reply: reply_row,
                    handoff: handoff_row,
                },
                payload: None,
                due: at_s(107),
                handoff: true,
                answered: false,
            }),
            ..Exchange::of(&message)
        })
        .await;
    assert!(
        matches!(lapsed, Err(StoreError::PromiseLapsed)),
        "{lapsed:?}"
    );
    assert_eq!(
        store.turns(conversation.id).await.unwrap().len(),
        2,
        "a lapsed promise writes nothing"
    );

    // An escalated turn's handoff row names the turn.
    let stop = NewTurn::user(conversation.id, "stop", true, at_s(110));
    let mut copy = NewTurn::agent(
        conversation.id,
        "A person will reply.",
        "escalated",
        true,
        at_s(110),
    );
    copy.escalation_reason = Some("complaint".to_owned());
    let handoff = [NewOutboxRow {
        kind: OutboxKind::Handoff,
        payload: json!({"actions": [], "turnId": null}),
        ..rows[1].clone()
    }];
    let escalated = store
        .record_exchange(Exchange {
            reply: Some(&copy),
            escalated_at: Some(at_s(110)),
            outbox: &handoff,
            ..Exchange::of(&stop)
        })
        .await
        .unwrap();
    let row = store
        .outbox_row(escalated.outbox[0])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.kind, OutboxKind::Handoff);
    assert_eq!(row.payload["turnId"], json!(escalated.reply.unwrap()));
    let last = store.turns(conversation.id).await.unwrap().pop().unwrap();
    assert_eq!(last.escalation_reason.as_deref(), Some("complaint"));
    // And a claim by id takes a pending row once.
    let claimed = store
        .claim_outbox_row(row.id, at_s(111), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(claimed.map(|r| r.status), Some(OutboxStatus::Delivering));
    assert!(
        store
            .claim_outbox_row(row.id, at_s(111), Duration::from_secs(60))
            .await
            .unwrap()
            .is_none()
    );
}

/// A promise whose reply left in the response (a burst's first piece answered inline after a
/// joined piece was answered silently) is kept by removing both its rows: nothing is owed. A
/// row the outbox took already makes the exchange fail as lapsed, writing nothing.
pub async fn record_exchange_keeps_an_answered_promise_by_removing_its_rows(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let message = NewTurn::user(conversation.id, "Any places left?", true, at_s(100));
    let rows = promise_rows(&conversation);
    let (promised, reply_row, handoff_row) = write_promise(store, &message, &rows).await;
    let answer = NewTurn::agent(
        conversation.id,
        "Two places.",
        "answered_inline",
        true,
        at_s(105),
    );
    let keep = KeepPromise {
        rows: PromiseRows {
            reply: reply_row,
            handoff: handoff_row,
        },
        payload: None,
        due: at_s(105),
        handoff: false,
        answered: true,
    };
    store
        .record_exchange(Exchange {
            recorded: Some(promised.message),
            reply: Some(&answer),
            keep: Some(keep),
            ..Exchange::of(&message)
        })
        .await
        .expect("the promise is kept");
    assert_eq!(
        store.outbox_row(reply_row).await.unwrap(),
        None,
        "nothing owed"
    );
    assert_eq!(
        store.outbox_row(handoff_row).await.unwrap(),
        None,
        "no handoff"
    );
    assert_eq!(store.turns(conversation.id).await.unwrap().len(), 2);

    // Once the outbox took the fallback, the answered promise has lapsed.
    let again = store
        .record_exchange(Exchange {
            outbox: &rows,
            ..Exchange::of(&message)
        })
        .await
        .unwrap();
    store
        .mark_delivered(again.outbox[0], at_s(201))
        .await
        .unwrap();
    let lapsed = store
        .record_exchange(Exchange {
            recorded: Some(again.message),
            reply: Some(&answer),
            keep: Some(KeepPromise {
                rows: PromiseRows {
                    reply: again.outbox[0],
                    handoff: again.outbox[1],
                },
                ..keep
            }),
            ..Exchange::of(&message)
        })
        .await;
    assert!(
        matches!(lapsed, Err(StoreError::PromiseLapsed)),
        "{lapsed:?}"
    );
    assert!(
        store.outbox_row(again.outbox[1]).await.unwrap().is_some(),
        "a lapsed promise removes nothing"
    );
}

/// The exchange is one transaction: a reply that cannot be written takes its message, count and
/// charge with it.
pub async fn record_exchange_is_all_or_nothing(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let subscriber = &conversation.subscriber_id;
    let day = fresh_day();
    let window = at_s(3600);
    let message = NewTurn::user(conversation.id, "hi", true, at_s(3601));
    // A reply for a conversation that does not exist breaks the foreign key.
    let orphan = NewTurn::agent(
        crate::store::new_conversation_id(),
        "x",
        "answered_inline",
        true,
        at_s(3601),
    );
    let failed = store
        .record_exchange(charged_exchange(
            &message,
            (subscriber, window),
            &orphan,
            day,
            5,
            0.0,
        ))
        .await;
    assert!(failed.is_err());
    assert!(stored_turns(store, conversation.id).await.is_empty());
    assert_eq!(store.rate_count(subscriber, window).await.expect("rate"), 0);
    assert_eq!(store.budget(day).await.expect("budget").tokens, 0);
}

/// The turns whose action record contains a marker are found from `since` on, oldest first:
/// not a turn without it, without actions, or older.
pub async fn turns_with_actions_containing_a_marker_are_found_since(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let marked = |at, error: &str| {
        let mut turn = NewTurn::agent(conversation.id, "Noted.", "answered_inline", true, at);
        turn.actions = Some(json!([{"tool": "create_lead", "status": "staged", "error": error}]));
        turn
    };
    let old = marked(at_s(10), "under way");
    let found_a = marked(at_s(100), "under way");
    let other = marked(at_s(101), "timed out");
    let found_b = marked(at_s(102), "under way");
    let bare = NewTurn::agent(conversation.id, "Hi.", "answered_inline", true, at_s(103));
    let mut ids = Vec::new();
    for turn in [&old, &found_a, &other, &found_b, &bare] {
        ids.push(store.record_turn(turn).await.unwrap());
    }
    let found: Vec<i64> = store
        .turns_with_actions_containing("\"under way\"", at_s(50))
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(found, vec![ids[1], ids[3]]);
}
