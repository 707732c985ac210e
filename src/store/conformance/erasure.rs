//! Conformance: erasure and retention (`ErasureStore`).

use super::*;
use crate::store::CONTACT_TABLES;

/// A contact with a bit of everything: two exchanges (counted in an hourly window), a queued
/// reply, a delivered reply and a contact-token row.
async fn busy_contact(store: &dyn Store) -> (Conversation, Vec<i64>, Vec<i64>) {
    let conversation = fresh_conversation(store).await;
    let mut turns = Vec::new();
    for i in 0..2 {
        let message = NewTurn::user(
            conversation.id,
            format!("Invented question {i}"),
            true,
            at_s(i),
        );
        let reply = NewTurn::agent(
            conversation.id,
            format!("Invented answer {i}"),
            "answered_inline",
            true,
            at_s(i),
        );
        let ids = store
            .record_exchange(Exchange {
                message: &message,
                rate: Some((&conversation.subscriber_id, at_s(0))),
                reply: Some(&reply),
                charge: None,
                escalated_at: None,
                ..Exchange::of(&message)
            })
            .await
            .expect("record_exchange");
        turns.extend([ids.message, ids.reply.expect("a reply id")]);
    }
    let delivered = enqueue(store, reply_row(&conversation, at_s(5), 1)).await;
    store
        .mark_delivered(delivered, at_s(6))
        .await
        .expect("mark_delivered");
    let queued = enqueue(store, reply_row(&conversation, at_s(7), 2)).await;
    let token = enqueue(store, token_row(&conversation, at_s(7))).await;
    // A hold a person had, released: a line in the release history.
    store
        .set_escalated(conversation.id, at_s(8))
        .await
        .expect("set_escalated");
    release(store, conversation.id, (at_s(8), at_s(9)), "released").await;
    (conversation, turns, vec![delivered, queued, token])
}

pub async fn forget_deletes_every_row_of_the_contact(store: &dyn Store) {
    let (contact, contact_turns, contact_rows) = busy_contact(store).await;
    let (neighbour, neighbour_turns, neighbour_rows) = busy_contact(store).await;

    let forgotten = store
        .forget_contact(&contact.subscriber_id)
        .await
        .expect("forget_contact");
    assert_eq!(forgotten.conversation_id, Some(contact.id));
    assert_eq!(
        forgotten.deleted,
        vec![
            ("turns", 4),
            ("outbox", 3),
            ("nudges", 0),
            ("window_closings", 0),
            ("rate_counters", 1),
            ("manychat_flow_sends", 0),
            ("turn_tickets", 0),
            ("hold_releases", 1),
            ("conversations", 1)
        ],
        "every table of CONTACT_TABLES, in its order, with what it lost"
    );
    assert!(forgotten.found());

    assert_eq!(
        store
            .conversation_by_subscriber(&contact.subscriber_id)
            .await
            .expect("read"),
        None
    );
    assert_eq!(store.conversation(contact.id).await.expect("read"), None);
    assert!(stored_turns(store, contact.id).await.is_empty());
    for id in &contact_turns {
        assert_eq!(store.turn(*id).await.expect("turn"), None, "turn {id}");
    }
    for id in &contact_rows {
        assert_eq!(store.outbox_row(*id).await.expect("row"), None, "row {id}");
    }
    assert_eq!(
        store
            .rate_count(&contact.subscriber_id, at_s(0))
            .await
            .expect("rate"),
        0
    );

    // The neighbour keeps everything.
    assert!(
        store
            .conversation(neighbour.id)
            .await
            .expect("read")
            .is_some()
    );
    assert_eq!(
        store
            .turns(neighbour.id)
            .await
            .expect("turns")
            .iter()
            .map(|t| t.id)
            .collect::<Vec<_>>(),
        neighbour_turns
    );
    for id in &neighbour_rows {
        assert!(store.outbox_row(*id).await.expect("row").is_some());
    }
    assert_eq!(
        store
            .rate_count(&neighbour.subscriber_id, at_s(0))
            .await
            .expect("rate"),
        2
    );

    // A second erasure, or one of a contact never seen, finds nothing and fails nothing.
    let again = store
        .forget_contact(&contact.subscriber_id)
        .await
        .expect("forget_contact again");
    assert!(!again.found(), "{again:?}");
    assert_eq!(again.deleted.len(), crate::store::CONTACT_TABLES.len());
    assert!(
        !store
            .forget_contact(&fresh_subscriber())
            .await
            .expect("forget a stranger")
            .found()
    );

    // The contact writing again starts afresh.
    let returning = store
        .conversation_for(&contact.subscriber_id, "whatsapp", at_s(100))
        .await
        .expect("conversation_for");
    assert_ne!(returning.id, contact.id);
    assert_eq!(returning.turn_count, 0);
    settle(store, &[neighbour.id]).await;
}

/// Far before every other case's instants, so on a shared store (`run_all`) retention meets only
/// this case's rows.
fn long_ago(days: i64) -> DateTime<Utc> {
    t0() - chrono::Duration::days(10_000 + days)
}

pub async fn retention_clears_old_text_and_keeps_the_measures(store: &dyn Store) {
    let cutoff = long_ago(0);
    let conversation = fresh_conversation(store).await;
    let mut old = Vec::new();
    for i in 0..3 {
        let mut reply = NewTurn::agent(
            conversation.id,
            format!("Invented old answer {i}"),
            "answered_deferred",
            true,
            long_ago(10 - i),
        );
        reply.model = Some("mock:demo".to_owned());
        reply.actions =
            Some(json!([{"tool": "send_flow", "id": "invented", "status": "performed"}]));
        reply.reads = 1;
        reply.input_tokens = 100 + i;
        reply.output_tokens = 20;
        reply.cached_tokens = 5;
        reply.cost_usd = 0.5;
        reply.latency_ms = 900;
        old.push(record(store, reply).await);
    }
    let kept = record(
        store,
        NewTurn::user(
            conversation.id,
            "Invented recent question",
            true,
            long_ago(-1),
        ),
    )
    .await;
    let before: Vec<_> = stored_turns(store, conversation.id).await;

    // At most `limit` a call; again until fewer come back.
    assert_eq!(
        store
            .clear_turn_text_before(cutoff, 2)
            .await
            .expect("clear"),
        2
    );
    assert_eq!(
        store
            .clear_turn_text_before(cutoff, 2)
            .await
            .expect("clear"),
        1
    );
    assert_eq!(
        store
            .clear_turn_text_before(cutoff, 2)
            .await
            .expect("clear"),
        0,
        "an emptied turn is not counted again"
    );

    let after = stored_turns(store, conversation.id).await;
    assert_eq!(after.len(), before.len(), "no turn is deleted");
    for (was, now) in before.iter().zip(&after) {
        if old.contains(&was.id) {
            let expected = crate::store::Turn {
                text: String::new(),
                ..was.clone()
            };
            assert_eq!(now, &expected, "only the text goes");
        } else {
            assert_eq!(now.id, kept);
            assert_eq!(now, was, "a turn within the period is untouched");
        }
    }
    let conversation_after = store
        .conversation(conversation.id)
        .await
        .expect("read")
        .expect("the conversation stays");
    assert_eq!(conversation_after.turn_count, 1);

    // Settled outbox rows older than the period go; open ones and recent ones stay.
    let row = |due, marker| reply_row(&conversation, due, marker);
    let delivered = enqueue(store, row(long_ago(5), 1)).await;
    store
        .mark_delivered(delivered, long_ago(5))
        .await
        .expect("mark_delivered");
    let failed = enqueue(store, row(long_ago(5), 2)).await;
    store
        .mark_failed(failed, "invented failure", long_ago(5))
        .await
        .expect("mark_failed");
    let open = enqueue(store, row(long_ago(4), 3)).await;
    let recent = enqueue(store, row(long_ago(-1), 4)).await;
    store
        .mark_delivered(recent, long_ago(-1))
        .await
        .expect("mark_delivered");
    assert_eq!(
        store
            .delete_settled_outbox_before(cutoff, 1)
            .await
            .expect("delete"),
        1
    );
    assert_eq!(
        store
            .delete_settled_outbox_before(cutoff, 10)
            .await
            .expect("delete"),
        1
    );
    assert_eq!(store.outbox_row(delivered).await.expect("read"), None);
    assert_eq!(store.outbox_row(failed).await.expect("read"), None);
    assert_eq!(row_status(store, open).await, OutboxStatus::Pending);
    assert_eq!(row_status(store, recent).await, OutboxStatus::Delivered);
    settle(store, &[conversation.id]).await;
}

// The backends' schema test ("forget covers every table that names a contact") reads its own
// schema and writes the rows no store call writes yet; these are the parts that are the same.

/// The schema's columns that name a contact, as `(table, column)`, and `CONTACT_TABLES` agree
/// both ways: a table added later with a `conversation_id` or `subscriber_id` column fails
/// until it is listed.
pub fn contact_tables_match_the_schema(schema: &[(String, String)]) {
    let listed: Vec<&str> = CONTACT_TABLES.iter().map(|(table, _)| *table).collect();
    for (table, column) in schema {
        assert!(
            listed.contains(&table.as_str()),
            "{table}.{column} names a contact, but forget_contact leaves it: \
             add {table} to store::CONTACT_TABLES"
        );
    }
    for (table, column) in CONTACT_TABLES {
        assert!(
            schema.contains(&((*table).to_owned(), (*column).to_owned())),
            "CONTACT_TABLES names {table}.{column}, which the schema lacks"
        );
    }
}

/// A contact (subscriber 5550010) with a row in every table a store call writes: the
/// conversation, a turn in its rate window, a queued reply, a counted flow send and a released
/// hold.
pub async fn contact_in_every_written_table(
    store: &dyn Store,
    at: DateTime<Utc>,
) -> (SubscriberId, Conversation) {
    let subscriber = SubscriberId::parse("5550010").expect("digits");
    let conversation = store
        .conversation_for(&subscriber, "whatsapp", at)
        .await
        .expect("conversation_for");
    let message = NewTurn::user(conversation.id, "Invented question", true, at);
    store
        .record_exchange(Exchange {
            rate: Some((&subscriber, at)),
            ..Exchange::of(&message)
        })
        .await
        .expect("record_exchange");
    // 031: its window-closing row, claimed once its last message is 1380 minutes old.
    let due = at + chrono::Duration::minutes(1381);
    store
        .claim_window_closings(crate::store::WindowClosingClaim {
            now: due,
            due_before: at,
            open_after: at - chrono::Duration::minutes(1),
            retry_before: due,
            limit: 10,
        })
        .await
        .expect("a window-closing row");
    store
        .enqueue(&NewOutboxRow::of(
            &conversation,
            OutboxKind::Reply,
            json!({"messages": ["Invented reply"]}),
            at,
        ))
        .await
        .expect("enqueue");
    assert!(
        store
            .count_flow_send(&subscriber, Utc::now(), 100)
            .await
            .expect("a flow send counted")
    );
    store
        .set_escalated(conversation.id, at)
        .await
        .expect("set_escalated");
    assert!(
        store
            .release_hold(conversation.id, at, at, "released")
            .await
            .expect("a released hold in the history")
    );
    (subscriber, conversation)
}

/// `forget_contact` of a contact with a row in every contact table deletes from each.
pub async fn forget_deletes_from_every_table(store: &dyn Store, subscriber: &SubscriberId) {
    let forgotten = store.forget_contact(subscriber).await.expect("forget");
    assert!(
        forgotten.deleted.iter().all(|(_, rows)| *rows > 0),
        "a row deleted from every contact table: {forgotten:?}"
    );
}

/// Learning proposals (031) go with the turns they cite: `forget_contact` deletes those citing
/// one of the contact's turns (another contact's stay), and retention deletes those citing a
/// turn older than the period. The analyst wrote them from that text.
pub async fn learning_proposals_are_erased_with_the_turns_they_cite(store: &dyn Store) {
    use crate::store::learning::{NewProposal, ProposalStatus, RunEnd, RunStatus};
    let forgotten = fresh_conversation(store).await;
    let kept = fresh_conversation(store).await;
    let turn = |conversation: &Conversation, at| {
        NewTurn::user(
            conversation.id,
            "Invented words of a contact",
            true,
            at_s(at),
        )
    };
    let theirs = record(store, turn(&forgotten, 10)).await;
    let others = record(store, turn(&kept, 20)).await;
    let proposal = |text: &str, ids: Vec<i64>| NewProposal {
        text: text.to_owned(),
        rationale: "Invented rationale.".to_owned(),
        converted_count: 1,
        not_converted_count: 1,
        turn_ids: ids.iter().map(i64::to_string).collect(),
    };
    let run = store
        .claim_learning_run("2026-W01", true, at_s(30))
        .await
        .expect("claim")
        .expect("a forced run is claimed");
    store
        .finish_learning_run(
            run,
            &RunEnd {
                status: RunStatus::Completed,
                converted_count: 1,
                not_converted_count: 1,
                cost_usd: 0.0,
                reason: None,
                proposals: vec![
                    proposal("Cites the forgotten contact.", vec![others, theirs]),
                    proposal("Cites another contact only.", vec![others]),
                ],
                at: at_s(31),
            },
        )
        .await
        .expect("finish");
    let texts = async || -> Vec<String> {
        store
            .proposals(ProposalStatus::Pending, 10)
            .await
            .expect("proposals")
            .into_iter()
            .map(|p| p.text)
            .collect()
    };

    let gone = store
        .forget_contact(&forgotten.subscriber_id)
        .await
        .expect("forget");
    assert_eq!(gone.proposals, 1);
    assert_eq!(texts().await, vec!["Cites another contact only."]);

    // The remaining proposal's turn is older than the period's end: it goes too.
    let deleted = store
        .delete_proposals_citing_turns_before(at_s(15), 10)
        .await
        .expect("retention");
    assert_eq!(deleted, 0, "its turn is younger than the period's end");
    let deleted = store
        .delete_proposals_citing_turns_before(at_s(25), 10)
        .await
        .expect("retention");
    assert_eq!(deleted, 1);
    assert!(texts().await.is_empty());
}
