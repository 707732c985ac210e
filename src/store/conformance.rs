//! The one conformance suite every `Store` backend passes (SYSTEM 8).
//!
//! Each case is a `pub async fn` over `&dyn Store` that proves one documented behaviour of the
//! trait and panics, naming what broke, when the backend disagrees. `run_all` runs every case on
//! one store; the `#[cfg(test)]` module below runs each case on a fresh SQLite file and, when
//! `TEST_DATABASE_URL` is set, on a fresh Postgres schema, one test per case per backend.
//!
//! Invariants: cases share nothing but the store, so they run in any order on one store. Each
//! case uses fresh contacts (random subscriber ids) and leaves no outbox row it created `pending`
//! or `delivering` (`settle`), so a later case's claims see only its own rows. Times are fixed
//! instants, never the wall clock. All data is invented.

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use serde_json::json;
use uuid::Uuid;

use super::{
    BudgetCharge, BudgetUsage, ClaimRules, Conversation, Exchange, KeepPromise, NewOutboxRow,
    NewTurn, NudgeExchange, NudgeStatus, OutboxKind, OutboxRow, OutboxStatus, PromiseRows, Role,
    Store, StoreError, TurnContext, TurnContextQuery,
};
use crate::ids::{ConversationId, SubscriberId};

const LEASE: Duration = Duration::from_secs(60);
const GAP: Duration = Duration::from_secs(2);

/// A fixed instant on a whole second, so every backend stores it exactly.
fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 9, 0, 0)
        .single()
        .expect("a valid fixed instant")
}

fn at_ms(offset_ms: i64) -> DateTime<Utc> {
    t0() + chrono::Duration::milliseconds(offset_ms)
}

fn at_s(offset_s: i64) -> DateTime<Utc> {
    at_ms(offset_s * 1000)
}

/// A random 15-digit contact id, so cases never meet each other's contacts.
fn fresh_subscriber() -> SubscriberId {
    let n = Uuid::new_v4().as_u128() % 900_000_000_000_000 + 100_000_000_000_000;
    SubscriberId::parse(&n.to_string()).expect("digits are a subscriber id")
}

async fn fresh_conversation(store: &dyn Store) -> Conversation {
    store
        .conversation_for(&fresh_subscriber(), "whatsapp", t0())
        .await
        .expect("conversation_for")
}

fn rules(now: DateTime<Utc>, limit: i64) -> ClaimRules {
    ClaimRules {
        now,
        limit,
        lease: LEASE,
        reply_gap: GAP,
    }
}

fn reply_row(conversation: &Conversation, due: DateTime<Utc>, marker: i64) -> NewOutboxRow {
    NewOutboxRow {
        conversation_id: conversation.id,
        subscriber_id: conversation.subscriber_id.clone(),
        kind: OutboxKind::Reply,
        payload: json!({"messages": [format!("Invented reply {marker}")], "actions": [], "turnId": marker}),
        next_attempt_at: due,
        created_at: due,
    }
}

fn token_row(conversation: &Conversation, due: DateTime<Utc>) -> NewOutboxRow {
    NewOutboxRow {
        kind: OutboxKind::ContactToken,
        payload: json!({"generation": 1}),
        ..reply_row(conversation, due, 0)
    }
}

async fn enqueue(store: &dyn Store, row: NewOutboxRow) -> i64 {
    store.enqueue(&row).await.expect("enqueue")
}

async fn claim(store: &dyn Store, rules: ClaimRules) -> Vec<i64> {
    store
        .claim_outbox(rules)
        .await
        .expect("claim_outbox")
        .iter()
        .map(|row| row.id)
        .collect()
}

async fn row(store: &dyn Store, id: i64) -> OutboxRow {
    store
        .outbox_row(id)
        .await
        .expect("outbox_row")
        .expect("the row exists")
}

/// Dead-letters every unfinished row of these conversations, so no later case claims them.
async fn settle(store: &dyn Store, conversations: &[ConversationId]) {
    for row in store.outbox_rows().await.expect("outbox_rows") {
        let unfinished = matches!(row.status, OutboxStatus::Pending | OutboxStatus::Delivering);
        if unfinished && conversations.contains(&row.conversation_id) {
            store
                .mark_failed(row.id, "settled by the conformance suite", t0())
                .await
                .expect("mark_failed");
        }
    }
}

/// `count` bound exchanges: message `q{i}` at 10·i s, its answer `a{i}` a second later.
async fn record_exchanges(store: &dyn Store, conversation: &Conversation, count: i64) {
    for i in 0..count {
        record(
            store,
            NewTurn::user(conversation.id, format!("q{i}"), true, at_s(10 * i)),
        )
        .await;
        record(
            store,
            NewTurn::agent(
                conversation.id,
                format!("a{i}"),
                "answered_inline",
                true,
                at_s(10 * i + 1),
            ),
        )
        .await;
    }
}

async fn record(store: &dyn Store, turn: NewTurn) -> i64 {
    store.record_turn(&turn).await.expect("record_turn")
}

// --- store --------------------------------------------------------------------------------------

pub async fn ping_answers(store: &dyn Store) {
    store.ping().await.expect("ping");
    assert!(["sqlite", "postgres"].contains(&store.backend()));
}

pub async fn unknown_ids_read_as_none_and_updates_fail(store: &dyn Store) {
    assert_eq!(
        store.conversation(Uuid::new_v4()).await.expect("read"),
        None
    );
    assert_eq!(store.turn(i64::MAX).await.expect("read"), None);
    assert_eq!(store.outbox_row(i64::MAX).await.expect("read"), None);
    assert!(store.set_escalated(Uuid::new_v4(), t0()).await.is_err());
    assert!(store.set_token(Uuid::new_v4(), "h", t0()).await.is_err());
    assert!(
        store
            .update_turn_actions(i64::MAX, &json!([]))
            .await
            .is_err()
    );
    assert!(store.mark_delivered(i64::MAX, t0()).await.is_err());
    assert!(store.mark_retry(i64::MAX, t0(), "e").await.is_err());
    assert!(store.mark_failed(i64::MAX, "e", t0()).await.is_err());
}

/// C5: a failing write's error names what failed, never the values it carried.
pub async fn errors_carry_no_personal_data(store: &dyn Store) {
    let stranger = Uuid::new_v4();
    let subscriber = SubscriberId::parse("5550009876").expect("digits");
    let turn = NewTurn::user(stranger, "Invented message from 5550009876", true, t0());
    let turn_error = store
        .record_turn(&turn)
        .await
        .expect_err("a turn of an unknown conversation is refused");
    let row = NewOutboxRow {
        conversation_id: stranger,
        subscriber_id: subscriber,
        kind: OutboxKind::Reply,
        payload: json!({"messages": ["Invented reply to 5550009876"]}),
        next_attempt_at: t0(),
        created_at: t0(),
    };
    let outbox_error = store
        .enqueue(&row)
        .await
        .expect_err("a row of an unknown conversation is refused");
    for error in [turn_error, outbox_error] {
        let text = format!("{error} {error:?}");
        assert!(!text.contains("5550009876"), "no id or text in: {text}");
        assert!(!text.contains("Invented"), "no message text in: {text}");
        assert!(
            !text.contains(&stranger.to_string()),
            "no bound uuid in: {text}"
        );
    }
}

pub async fn timestamps_are_kept_to_the_millisecond(store: &dyn Store) {
    let precise = t0() + chrono::Duration::nanoseconds(1_234_567_891);
    let conversation = store
        .conversation_for(&fresh_subscriber(), "whatsapp", precise)
        .await
        .expect("conversation_for");
    assert_eq!(conversation.created_at, at_ms(1234));
    let id = enqueue(store, reply_row(&conversation, precise, 1)).await;
    assert_eq!(row(store, id).await.next_attempt_at, at_ms(1234));
    settle(store, &[conversation.id]).await;
}

// --- conversations ----------------------------------------------------------------------------

pub async fn conversation_created_once_with_random_uuid(store: &dyn Store) {
    let subscriber = fresh_subscriber();
    let first = store
        .conversation_for(&subscriber, "whatsapp", t0())
        .await
        .expect("conversation_for");
    assert_eq!(first.id.get_version_num(), 4, "a random (v4) UUID");
    assert_eq!(first.subscriber_id, subscriber);
    assert_eq!(first.channel, "whatsapp");
    assert_eq!(first.turn_count, 0);
    assert_eq!(first.token_generation, 0);
    assert_eq!(first.token_hash, None);
    assert_eq!(first.previous_token_hash, None);
    assert_eq!(first.token_issued_at, None);
    assert_eq!(first.escalated_at, None);
    assert_eq!(first.last_message_at, None);
    assert_eq!(first.offering, None);
    assert_eq!(first.opening_sent_at, None);
    assert_eq!(first.created_at, t0());
    assert_eq!(first.updated_at, t0());

    let again = store
        .conversation_for(&subscriber, "instagram", at_s(60))
        .await
        .expect("conversation_for");
    assert_eq!(
        again, first,
        "the second contact finds the first row unchanged"
    );

    let other = fresh_conversation(store).await;
    assert_ne!(other.id, first.id);
    assert_eq!(
        store.conversation(first.id).await.expect("conversation"),
        Some(first)
    );
}

pub async fn conversation_first_contacts_racing_create_one_row(store: &dyn Store) {
    let subscriber = fresh_subscriber();
    let (a, b) = tokio::join!(
        store.conversation_for(&subscriber, "whatsapp", t0()),
        store.conversation_for(&subscriber, "whatsapp", t0()),
    );
    assert_eq!(a.expect("first").id, b.expect("second").id);
}

pub async fn escalation_time_is_recorded(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    store
        .set_escalated(conversation.id, at_s(30))
        .await
        .expect("set_escalated");
    let stored = store
        .conversation(conversation.id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(stored.escalated_at, Some(at_s(30)));
    assert_eq!(stored.updated_at, at_s(30));
}

pub async fn token_rotation_keeps_previous(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let first = store
        .set_token(conversation.id, "hash-one", at_s(10))
        .await
        .expect("set_token");
    assert_eq!(first, 1);
    let stored = store
        .conversation(conversation.id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(stored.token_hash.as_deref(), Some("hash-one"));
    assert_eq!(stored.previous_token_hash, None);
    assert_eq!(stored.token_issued_at, Some(at_s(10)));
    assert_eq!(stored.token_generation, 1);

    let second = store
        .set_token(conversation.id, "hash-two", at_s(20))
        .await
        .expect("set_token");
    assert_eq!(second, 2);
    let stored = store
        .conversation(conversation.id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(stored.token_hash.as_deref(), Some("hash-two"));
    assert_eq!(stored.previous_token_hash.as_deref(), Some("hash-one"));
    assert_eq!(stored.token_issued_at, Some(at_s(20)));
    assert_eq!(stored.token_generation, 2);
}

pub async fn conversations_without_token_lists_recent_contacts_only(store: &dyn Store) {
    let since = at_s(3600);
    let recent = fresh_conversation(store).await;
    record(store, NewTurn::user(recent.id, "Hello", true, at_s(3700))).await;
    let tokened = fresh_conversation(store).await;
    record(store, NewTurn::user(tokened.id, "Hello", true, at_s(3700))).await;
    store
        .set_token(tokened.id, "hash", at_s(3701))
        .await
        .expect("set_token");
    let old = fresh_conversation(store).await;
    record(store, NewTurn::user(old.id, "Hello", true, at_s(60))).await;

    let listed: Vec<ConversationId> = store
        .conversations_without_token(since)
        .await
        .expect("conversations_without_token")
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert!(
        listed.contains(&recent.id),
        "a recent contact without a token is listed"
    );
    assert!(
        !listed.contains(&tokened.id),
        "a contact with a token is not"
    );
    assert!(
        !listed.contains(&old.id),
        "a contact silent since before `since` is not"
    );
}

// --- turns ------------------------------------------------------------------------------------

pub async fn user_turn_updates_last_message_and_bound_count(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let read = || async {
        store
            .conversation(conversation.id)
            .await
            .expect("read")
            .expect("exists")
    };

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
    let turns = store.turns(conversation.id).await.expect("turns");
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

pub async fn history_is_bound_only_oldest_first_within_window_and_limit(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let other = fresh_conversation(store).await;
    let since = at_s(100);
    // Before the window: excluded even though bound.
    record(store, NewTurn::user(conversation.id, "old", true, at_s(99))).await;
    let mut inside = Vec::new();
    for i in 0..5 {
        let user = record(
            store,
            NewTurn::user(conversation.id, format!("q{i}"), true, at_s(100 + 10 * i)),
        )
        .await;
        let agent = record(
            store,
            NewTurn::agent(
                conversation.id,
                format!("a{i}"),
                "answered_inline",
                true,
                at_s(101 + 10 * i),
            ),
        )
        .await;
        inside.push(user);
        inside.push(agent);
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
    let turns = store.turns(conversation.id).await.expect("turns");
    assert_eq!(
        turns.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![a, b, c]
    );
}

// --- counters ---------------------------------------------------------------------------------

pub async fn rate_counter_counts_per_window(store: &dyn Store) {
    let contact = fresh_subscriber();
    let neighbour = fresh_subscriber();
    let window = at_s(3600);
    for expected in 1..=3 {
        assert_eq!(
            store.bump_rate(&contact, window).await.expect("bump"),
            expected
        );
    }
    assert_eq!(
        store.bump_rate(&neighbour, window).await.expect("bump"),
        1,
        "per contact"
    );
    assert_eq!(
        store.bump_rate(&contact, at_s(7200)).await.expect("bump"),
        1,
        "per window"
    );
    assert_eq!(
        store.bump_rate(&contact, at_s(7200)).await.expect("bump"),
        2
    );
}

pub async fn budget_accumulates_per_day(store: &dyn Store) {
    // A random day, so reruns on one store start from zero.
    let offset = (Uuid::new_v4().as_u128() % 100_000) as u64;
    let day = NaiveDate::from_ymd_opt(2000, 1, 1)
        .and_then(|d| d.checked_add_days(chrono::Days::new(offset)))
        .expect("a valid day");
    let next = day.succ_opt().expect("a next day");
    assert_eq!(
        store.budget(day).await.expect("budget"),
        BudgetUsage::default()
    );

    store.add_budget(day, 1000, 0.25).await.expect("add_budget");
    store.add_budget(day, 500, 0.5).await.expect("add_budget");
    let usage = store.budget(day).await.expect("budget");
    assert_eq!(usage.tokens, 1500);
    assert!((usage.cost_usd - 0.75).abs() < 1e-9);

    store.add_budget(next, 7, 0.01).await.expect("add_budget");
    assert_eq!(
        store.budget(day).await.expect("budget").tokens,
        1500,
        "days are separate"
    );
    assert_eq!(store.budget(next).await.expect("budget").tokens, 7);
}

/// A random day, so reruns on one store start from zero.
fn fresh_day() -> NaiveDate {
    let offset = (Uuid::new_v4().as_u128() % 100_000) as u64;
    NaiveDate::from_ymd_opt(2000, 1, 1)
        .and_then(|d| d.checked_add_days(chrono::Days::new(offset)))
        .expect("a valid day")
}

// --- a turn's units of work -------------------------------------------------------------------

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

/// `rate_count` reads a window's count without changing it: 0 before anything is counted.
pub async fn rate_count_reads_the_window(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let subscriber = &conversation.subscriber_id;
    let window = at_s(7200);
    assert_eq!(store.rate_count(subscriber, window).await.expect("rate"), 0);
    store.bump_rate(subscriber, window).await.expect("bump");
    store.bump_rate(subscriber, window).await.expect("bump");
    assert_eq!(store.rate_count(subscriber, window).await.expect("rate"), 2);
    assert_eq!(store.rate_count(subscriber, window).await.expect("rate"), 2);
    assert_eq!(
        store
            .rate_count(subscriber, at_s(3600))
            .await
            .expect("rate"),
        0,
        "another window"
    );
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
        .record_exchange(Exchange {
            message: &message,
            rate: Some((subscriber, window)),
            reply: Some(&reply),
            charge: Some(BudgetCharge {
                day,
                tokens: 120,
                cost_usd: 0.25,
            }),
            escalated_at: None,
            ..Exchange::of(&message)
        })
        .await
        .expect("record_exchange");
    let reply_id = answered.reply.expect("a reply id");
    assert!(reply_id > answered.message);
    assert_eq!(store.rate_count(subscriber, window).await.expect("rate"), 1);
    let usage = store.budget(day).await.expect("budget");
    assert_eq!(usage.tokens, 120);
    assert!((usage.cost_usd - 0.25).abs() < 1e-9);
    let after_answer = store
        .conversation(conversation.id)
        .await
        .expect("read")
        .expect("exists");
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
    let escalated = store
        .conversation(conversation.id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(escalated.escalated_at, Some(at_s(3602)));
    assert_eq!(escalated.turn_count, 2);

    // A message with no reply (an aborted model call): the message alone.
    let alone = NewTurn::user(conversation.id, "hello?", true, at_s(3603));
    let ids = store
        .record_exchange(Exchange {
            message: &alone,
            rate: Some((subscriber, window)),
            reply: None,
            charge: None,
            escalated_at: None,
            ..Exchange::of(&message)
        })
        .await
        .expect("record_exchange");
    assert_eq!(ids.reply, None);
    assert_eq!(store.rate_count(subscriber, window).await.expect("rate"), 2);

    let turns = store.turns(conversation.id).await.expect("turns");
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

/// Issue 13: a promise (the message and two pending rows, no reply) is kept by a later exchange
/// in one transaction: the message is not written again, the reply row gets the reply and its
/// turn's id and falls due, the fallback handoff goes; a handoff row written with an escalated
/// turn carries that turn's id.
pub async fn record_exchange_keeps_a_promise(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let message = NewTurn::user(conversation.id, "Any places left?", true, at_s(100));
    let fallback = |kind, payload| NewOutboxRow {
        conversation_id: conversation.id,
        subscriber_id: conversation.subscriber_id.clone(),
        kind,
        payload,
        next_attempt_at: at_s(200),
        created_at: at_s(100),
    };
    let rows = [
        fallback(
            OutboxKind::Reply,
            json!({"messages": ["A person will reply."], "actions": [], "turnId": null}),
        ),
        fallback(
            OutboxKind::Handoff,
            json!({"actions": [], "turnId": null, "fallback": true}),
        ),
    ];
    let promised = store
        .record_exchange(Exchange {
            outbox: &rows,
            ..Exchange::of(&message)
        })
        .await
        .expect("the promise is written");
    let [reply_row, handoff_row] = promised.outbox[..] else {
        panic!("two rows: {:?}", promised.outbox);
    };
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

/// Issue 13: a handoff row waits behind an earlier open reply of its contact (its text comes
/// first), as a reply does.
pub async fn outbox_handoff_waits_behind_an_open_reply(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let row = |kind, payload| NewOutboxRow {
        conversation_id: conversation.id,
        subscriber_id: conversation.subscriber_id.clone(),
        kind,
        payload,
        next_attempt_at: at_s(10),
        created_at: at_s(10),
    };
    let reply = store
        .enqueue(&row(
            OutboxKind::Reply,
            json!({"messages": ["hi"], "actions": [], "turnId": null}),
        ))
        .await
        .unwrap();
    let handoff = store
        .enqueue(&row(
            OutboxKind::Handoff,
            json!({"actions": [], "turnId": null}),
        ))
        .await
        .unwrap();
    let rules = ClaimRules {
        now: at_s(20),
        limit: 10,
        lease: Duration::from_secs(60),
        reply_gap: Duration::ZERO,
    };
    let first: Vec<i64> = store
        .claim_outbox(rules)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(first, vec![reply], "the handoff waits for the reply");
    store.mark_delivered(reply, at_s(21)).await.unwrap();
    let second: Vec<i64> = store
        .claim_outbox(ClaimRules {
            now: at_s(22),
            ..rules
        })
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(second, vec![handoff]);
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
        super::new_conversation_id(),
        "x",
        "answered_inline",
        true,
        at_s(3601),
    );
    let failed = store
        .record_exchange(Exchange {
            message: &message,
            rate: Some((subscriber, window)),
            reply: Some(&orphan),
            charge: Some(BudgetCharge {
                day,
                tokens: 5,
                cost_usd: 0.0,
            }),
            escalated_at: None,
            ..Exchange::of(&message)
        })
        .await;
    assert!(failed.is_err());
    assert!(
        store
            .turns(conversation.id)
            .await
            .expect("turns")
            .is_empty()
    );
    assert_eq!(store.rate_count(subscriber, window).await.expect("rate"), 0);
    assert_eq!(store.budget(day).await.expect("budget").tokens, 0);
}

// --- outbox -----------------------------------------------------------------------------------

pub async fn outbox_enqueue_stores_a_pending_row(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let new = reply_row(&conversation, at_s(5), 42);
    let id = enqueue(store, new.clone()).await;
    let stored = row(store, id).await;
    assert_eq!(stored.conversation_id, conversation.id);
    assert_eq!(stored.subscriber_id, conversation.subscriber_id);
    assert_eq!(stored.kind, OutboxKind::Reply);
    assert_eq!(stored.payload, new.payload);
    assert_eq!(stored.status, OutboxStatus::Pending);
    assert_eq!(stored.attempts, 0);
    assert_eq!(stored.next_attempt_at, at_s(5));
    assert_eq!(stored.last_error, None);
    assert_eq!(stored.lease_until, None);
    assert_eq!(stored.created_at, at_s(5));
    assert_eq!(stored.delivered_at, None);
    assert!(store.outbox_rows().await.expect("rows").contains(&stored));
    settle(store, &[conversation.id]).await;
}

pub async fn outbox_claim_leases_and_counts_the_attempt(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let id = enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    let claimed = store.claim_outbox(rules(at_s(1), 10)).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    let claimed = &claimed[0];
    assert_eq!(claimed.id, id);
    assert_eq!(claimed.status, OutboxStatus::Delivering);
    assert_eq!(claimed.attempts, 1);
    assert_eq!(claimed.lease_until, Some(at_s(61)));
    assert_eq!(
        &row(store, id).await,
        claimed,
        "the returned row is what is stored"
    );
    assert!(
        claim(store, rules(at_s(2), 10)).await.is_empty(),
        "a leased row is not due"
    );
    settle(store, &[conversation.id]).await;
}

pub async fn outbox_row_not_due_before_next_attempt_at(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let id = enqueue(store, reply_row(&conversation, at_s(10), 1)).await;
    assert!(claim(store, rules(at_ms(9_999), 10)).await.is_empty());
    assert_eq!(claim(store, rules(at_s(10), 10)).await, vec![id]);
    settle(store, &[conversation.id]).await;
}

pub async fn outbox_claims_at_most_limit_oldest_first(store: &dyn Store) {
    let mut conversations = Vec::new();
    let mut ids = Vec::new();
    for i in 0..3 {
        let conversation = fresh_conversation(store).await;
        ids.push(enqueue(store, reply_row(&conversation, at_s(0), i)).await);
        conversations.push(conversation.id);
    }
    assert_eq!(claim(store, rules(at_s(1), 2)).await, ids[..2].to_vec());
    assert_eq!(claim(store, rules(at_s(1), 2)).await, ids[2..].to_vec());
    settle(store, &conversations).await;
}

/// Issue 18 (`/metrics`): the backlog counts open rows (pending and delivering, not delivered
/// or dead-lettered) up to the cap, and names the earliest due time only when it is due.
pub async fn outbox_backlog_counts_open_rows_up_to_the_cap(store: &dyn Store) {
    let backlog = |now, cap| async move { store.outbox_backlog(now, cap).await.expect("backlog") };
    assert_eq!(backlog(at_s(0), 100).await, super::OutboxBacklog::default());
    let mut conversations = Vec::new();
    let mut ids = Vec::new();
    for (i, due) in [3, 5, 100, 200].into_iter().enumerate() {
        let conversation = fresh_conversation(store).await;
        ids.push(enqueue(store, reply_row(&conversation, at_s(due), i as i64)).await);
        conversations.push(conversation.id);
    }
    // Nothing due yet at 1 s: four open rows, no due time.
    assert_eq!(
        backlog(at_s(1), 100).await,
        super::OutboxBacklog {
            rows: 4,
            oldest_due_at: None
        }
    );
    // One is claimed (delivering), one delivered, one dead-lettered: two stay open, and the
    // oldest open one (due at 5 s) is what a scrape at 10 s reports.
    assert_eq!(claim(store, rules(at_s(4), 1)).await, vec![ids[0]]);
    store
        .mark_delivered(ids[0], at_s(4))
        .await
        .expect("delivered");
    assert_eq!(claim(store, rules(at_s(6), 1)).await, vec![ids[1]]);
    store
        .mark_failed(ids[2], "dead-lettered by the conformance suite", at_s(6))
        .await
        .expect("failed");
    assert_eq!(
        backlog(at_s(10), 100).await,
        super::OutboxBacklog {
            rows: 2,
            oldest_due_at: Some(at_s(5))
        },
        "the delivering row (due 5 s) and the pending one (due 200 s)"
    );
    // The count stops at the cap.
    assert_eq!(backlog(at_s(10), 1).await.rows, 1);
    settle(store, &conversations).await;
}

/// Two stores (two pools: two workers) claim concurrently over 20 due rows of 20 contacts,
/// each taking small batches until nothing is left. Every row is claimed exactly once.
pub async fn outbox_two_workers_never_claim_one_row(a: &dyn Store, b: &dyn Store) {
    let mut conversations = Vec::new();
    let mut expected = HashSet::new();
    for i in 0..20 {
        let conversation = fresh_conversation(a).await;
        expected.insert(enqueue(a, reply_row(&conversation, at_s(0), i)).await);
        conversations.push(conversation.id);
    }
    async fn drain(store: &dyn Store) -> Vec<i64> {
        let mut all = Vec::new();
        loop {
            let batch = claim(store, rules(at_s(1), 3)).await;
            if batch.is_empty() {
                return all;
            }
            all.extend(batch);
            tokio::task::yield_now().await;
        }
    }
    let (from_a, from_b) = tokio::join!(drain(a), drain(b));
    let mut seen = HashSet::new();
    for id in from_a.iter().chain(&from_b) {
        assert!(seen.insert(*id), "row {id} was claimed twice");
    }
    assert_eq!(seen, expected, "every due row was claimed");
    settle(a, &conversations).await;
}

/// Two workers (two stores) drain 6 contacts × 3 replies, delivering each row as soon as they
/// claim it. Every contact's replies are claimed in the order written, each only after the
/// previous one was delivered, whichever worker holds it (3.5: the order holds across replicas).
pub async fn outbox_two_workers_keep_each_contacts_order(a: &dyn Store, b: &dyn Store) {
    let mut conversations = Vec::new();
    let mut written: Vec<(ConversationId, i64)> = Vec::new();
    for c in 0..6 {
        let conversation = fresh_conversation(a).await;
        conversations.push(conversation.id);
        for r in 0..3 {
            let id = enqueue(a, reply_row(&conversation, at_s(0), c * 10 + r)).await;
            written.push((conversation.id, id));
        }
    }
    let total = written.len();
    let log = std::sync::Mutex::new(Vec::<(ConversationId, i64)>::new());
    async fn drain_in_order(
        store: &dyn Store,
        log: &std::sync::Mutex<Vec<(ConversationId, i64)>>,
        total: usize,
    ) {
        let no_gap = |now| ClaimRules {
            reply_gap: Duration::ZERO,
            ..rules(now, 2)
        };
        for _ in 0..10_000 {
            if log.lock().map(|l| l.len()).unwrap_or(total) >= total {
                return;
            }
            let batch = store.claim_outbox(no_gap(at_s(1))).await.expect("claim");
            for row in batch {
                log.lock()
                    .expect("the log lock")
                    .push((row.conversation_id, row.id));
                store
                    .mark_delivered(row.id, at_s(1))
                    .await
                    .expect("mark_delivered");
            }
            tokio::task::yield_now().await;
        }
        panic!("the outbox was not drained");
    }
    tokio::join!(
        drain_in_order(a, &log, total),
        drain_in_order(b, &log, total)
    );
    let log = log.into_inner().expect("the log");
    assert_eq!(log.len(), total, "every row claimed exactly once");
    for conversation in &conversations {
        let claimed: Vec<i64> = log
            .iter()
            .filter(|(c, _)| c == conversation)
            .map(|(_, id)| *id)
            .collect();
        let expected: Vec<i64> = written
            .iter()
            .filter(|(c, _)| c == conversation)
            .map(|(_, id)| *id)
            .collect();
        assert_eq!(
            claimed, expected,
            "a contact's replies in the order written"
        );
    }
    settle(a, &conversations).await;
}

pub async fn outbox_no_overtaking_within_a_conversation(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let first = enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    let second = enqueue(store, reply_row(&conversation, at_s(0), 2)).await;

    assert_eq!(
        claim(store, rules(at_s(1), 10)).await,
        vec![first],
        "one reply at a time"
    );
    assert!(
        claim(store, rules(at_s(2), 10)).await.is_empty(),
        "the newer reply waits while the older is delivering"
    );
    store
        .mark_retry(first, at_s(30), "http 503")
        .await
        .expect("mark_retry");
    assert!(
        claim(store, rules(at_s(10), 10)).await.is_empty(),
        "the newer reply waits while the older is pending, even when the older is not due"
    );
    assert_eq!(claim(store, rules(at_s(30), 10)).await, vec![first]);
    store
        .mark_delivered(first, at_s(31))
        .await
        .expect("mark_delivered");
    assert_eq!(claim(store, rules(at_s(40), 10)).await, vec![second]);
    settle(store, &[conversation.id]).await;
}

pub async fn outbox_contact_token_rows_are_not_held_behind_replies(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let reply = enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    assert_eq!(claim(store, rules(at_s(1), 10)).await, vec![reply]);
    let token = enqueue(store, token_row(&conversation, at_s(1))).await;
    assert_eq!(claim(store, rules(at_s(2), 10)).await, vec![token]);
    store
        .mark_delivered(reply, at_s(3))
        .await
        .expect("mark_delivered");
    let second_token = enqueue(store, token_row(&conversation, at_s(3))).await;
    assert_eq!(
        claim(store, rules(at_ms(3_001), 10)).await,
        vec![second_token],
        "pacing applies to replies only"
    );
    settle(store, &[conversation.id]).await;
}

pub async fn outbox_pacing_gap_after_delivery(store: &dyn Store) {
    let paced = fresh_conversation(store).await;
    let neighbour = fresh_conversation(store).await;
    let first = enqueue(store, reply_row(&paced, at_s(0), 1)).await;
    let second = enqueue(store, reply_row(&paced, at_s(0), 2)).await;
    assert_eq!(claim(store, rules(at_s(1), 10)).await, vec![first]);
    store
        .mark_delivered(first, at_s(5))
        .await
        .expect("mark_delivered");
    let other = enqueue(store, reply_row(&neighbour, at_s(5), 3)).await;

    let gap_ms = GAP.as_millis() as i64;
    assert_eq!(
        claim(store, rules(at_ms(5_000 + gap_ms - 1), 10)).await,
        vec![other],
        "within the gap only another contact's reply is due"
    );
    assert_eq!(
        claim(store, rules(at_ms(5_000 + gap_ms), 10)).await,
        vec![second],
        "the next reply is due exactly one gap after the delivery"
    );
    settle(store, &[paced.id, neighbour.id]).await;
}

pub async fn outbox_expired_lease_is_reclaimed(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let first = enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    enqueue(store, reply_row(&conversation, at_s(0), 2)).await;
    let lease = |now| ClaimRules {
        lease: Duration::from_secs(30),
        ..rules(now, 10)
    };
    assert_eq!(claim(store, lease(at_s(0))).await, vec![first]);
    assert!(
        claim(store, lease(at_ms(29_999))).await.is_empty(),
        "the lease holds"
    );
    let reclaimed = store.claim_outbox(lease(at_s(30))).await.expect("claim");
    assert_eq!(
        reclaimed.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![first],
        "the expired row is taken again, and still holds back the newer reply"
    );
    assert_eq!(reclaimed[0].attempts, 2);
    assert_eq!(reclaimed[0].lease_until, Some(at_s(60)));
    settle(store, &[conversation.id]).await;
}

pub async fn outbox_failed_row_is_never_claimed_again(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let first = enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    let second = enqueue(store, reply_row(&conversation, at_s(0), 2)).await;
    assert_eq!(claim(store, rules(at_s(1), 10)).await, vec![first]);
    store
        .mark_failed(first, "http 400", at_s(2))
        .await
        .expect("mark_failed");
    let failed = row(store, first).await;
    assert_eq!(failed.status, OutboxStatus::Failed);
    assert_eq!(failed.last_error.as_deref(), Some("http 400"));
    assert_eq!(failed.lease_until, None);
    assert_eq!(failed.delivered_at, None);

    assert_eq!(
        claim(store, rules(at_s(3), 10)).await,
        vec![second],
        "a dead letter does not hold back the contact's next reply"
    );
    store
        .mark_delivered(second, at_s(4))
        .await
        .expect("mark_delivered");
    assert!(
        !claim(store, rules(at_s(86_400 * 365), 10))
            .await
            .contains(&first),
        "never claimed again, however late"
    );
    settle(store, &[conversation.id]).await;
}

pub async fn outbox_retry_due_later(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let id = enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    assert_eq!(claim(store, rules(at_s(0), 10)).await, vec![id]);
    store
        .mark_retry(id, at_s(4), "http 503")
        .await
        .expect("mark_retry");
    let retried = row(store, id).await;
    assert_eq!(retried.status, OutboxStatus::Pending);
    assert_eq!(retried.next_attempt_at, at_s(4));
    assert_eq!(retried.last_error.as_deref(), Some("http 503"));
    assert_eq!(retried.lease_until, None);
    assert_eq!(retried.attempts, 1);

    assert!(claim(store, rules(at_ms(3_999), 10)).await.is_empty());
    let again = store.claim_outbox(rules(at_s(4), 10)).await.expect("claim");
    assert_eq!(again.iter().map(|r| r.id).collect::<Vec<_>>(), vec![id]);
    assert_eq!(again[0].attempts, 2);
    settle(store, &[conversation.id]).await;
}

pub async fn outbox_last_error_is_bounded(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let id = enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    store
        .mark_retry(id, at_s(4), &"é".repeat(5000))
        .await
        .expect("mark_retry");
    let stored = row(store, id).await.last_error.expect("an error is kept");
    assert_eq!(stored.chars().count(), super::common::MAX_ERROR_CHARS);
    settle(store, &[conversation.id]).await;
}

pub async fn outbox_delivered_row_is_done(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let id = enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    assert_eq!(claim(store, rules(at_s(0), 10)).await, vec![id]);
    store
        .mark_delivered(id, at_s(3))
        .await
        .expect("mark_delivered");
    let delivered = row(store, id).await;
    assert_eq!(delivered.status, OutboxStatus::Delivered);
    assert_eq!(delivered.delivered_at, Some(at_s(3)));
    assert_eq!(delivered.lease_until, None);
    assert!(!claim(store, rules(at_s(86_400), 10)).await.contains(&id));
    settle(store, &[conversation.id]).await;
}

/// Issue 13, item 4: under a backlog a reply is taken before a deferrable `contact_token` write,
/// even an older one.
pub async fn outbox_replies_are_claimed_ahead_of_contact_token_writes(store: &dyn Store) {
    let tokened = fresh_conversation(store).await;
    let replied = fresh_conversation(store).await;
    let token = enqueue(store, token_row(&tokened, at_s(0))).await;
    let reply = enqueue(store, reply_row(&replied, at_s(1), 1)).await;
    assert_eq!(
        claim(store, rules(at_s(2), 1)).await,
        vec![reply],
        "the newer reply comes first"
    );
    assert_eq!(claim(store, rules(at_s(2), 1)).await, vec![token]);
    settle(store, &[tokened.id, replied.id]).await;
}

/// Issue 13, item 4: the live worker renews the leases of the rows it holds, so a short lease
/// never lets another worker take them; a settled row is left as it is.
pub async fn outbox_renewed_lease_keeps_a_row_from_being_taken(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let other = fresh_conversation(store).await;
    let short = |now| ClaimRules {
        lease: Duration::from_secs(10),
        ..rules(now, 10)
    };
    let held = enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    let done = enqueue(store, reply_row(&other, at_s(0), 2)).await;
    assert_eq!(claim(store, short(at_s(0))).await, vec![held, done]);
    store
        .mark_delivered(done, at_s(1))
        .await
        .expect("mark_delivered");
    store
        .renew_outbox_leases(&[held, done], at_s(18))
        .await
        .expect("renew_outbox_leases");
    store
        .renew_outbox_leases(&[], at_s(18))
        .await
        .expect("renewing nothing is fine");
    assert_eq!(row(store, held).await.lease_until, Some(at_s(18)));
    assert!(
        claim(store, short(at_s(12))).await.is_empty(),
        "a renewed lease holds past the first one"
    );
    let delivered = row(store, done).await;
    assert_eq!(delivered.status, OutboxStatus::Delivered);
    assert_eq!(delivered.lease_until, None, "a settled row gets no lease");
    let retaken = store.claim_outbox(short(at_s(18))).await.expect("claim");
    assert_eq!(
        retaken.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![held],
        "once renewals stop, the row is taken again when the lease lapses"
    );
    assert_eq!(retaken[0].attempts, 2);
    settle(store, &[conversation.id, other.id]).await;
}

/// Issue 13, item 5: how far a delivery got (messages accepted, unanswered triggers) starts at
/// zero and is kept across a retry and a lapsed lease.
pub async fn outbox_delivery_progress_is_kept_across_retries(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let id = enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    let fresh = row(store, id).await;
    assert_eq!((fresh.messages_delivered, fresh.trigger_timeouts), (0, 0));
    assert_eq!(claim(store, rules(at_s(0), 10)).await, vec![id]);
    store
        .record_outbox_progress(id, 1, 1)
        .await
        .expect("record_outbox_progress");
    store
        .mark_retry(id, at_s(2), "timed out")
        .await
        .expect("mark_retry");
    let again = store.claim_outbox(rules(at_s(2), 10)).await.expect("claim");
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0].messages_delivered, again[0].trigger_timeouts),
        (1, 1)
    );
    store
        .record_outbox_progress(id, 2, 0)
        .await
        .expect("record_outbox_progress");
    let lapsed = store
        .claim_outbox(rules(at_s(2) + chrono::Duration::seconds(61), 10))
        .await
        .expect("claim");
    assert_eq!(
        (lapsed[0].messages_delivered, lapsed[0].trigger_timeouts),
        (2, 0)
    );
    assert!(
        store.record_outbox_progress(i64::MAX, 1, 0).await.is_err(),
        "an unknown row is an error"
    );
    settle(store, &[conversation.id]).await;
}

/// A delivered reply's actions are saved as they are performed (their outcomes and the
/// request in flight), and the rest of the payload is left as it was, so a restart resumes after
/// what ManyChat answered.
pub async fn outbox_action_progress_rewrites_only_the_actions(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let id = enqueue(store, reply_row(&conversation, at_s(0), 7)).await;
    let performed = json!([{"entry": {"tool": "add_tag", "id": "invented", "status": "performed"},
        "operation": {"op": "add_tag", "tag": "invented-tag"}}]);
    store
        .record_outbox_actions(id, &performed, 1)
        .await
        .expect("record_outbox_actions");
    let saved = row(store, id).await;
    assert_eq!(saved.payload["actions"], performed);
    assert_eq!(saved.payload["messages"], json!(["Invented reply 7"]));
    assert_eq!(saved.payload["turnId"], json!(7));
    assert_eq!(saved.trigger_timeouts, 1);
    assert!(
        store
            .record_outbox_actions(i64::MAX, &performed, 0)
            .await
            .is_err(),
        "an unknown row is an error"
    );
    settle(store, &[conversation.id]).await;
}

/// 019: a settled `contact_token` row keeps no plain token (delivered or dead-lettered); a row
/// waiting for its retry keeps it, and reply rows are left as they are.
pub async fn settled_contact_token_rows_keep_no_token(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let with_token = |token: &str| NewOutboxRow {
        payload: json!({"generation": 1, "token": token}),
        ..token_row(&conversation, at_s(0))
    };
    let delivered = enqueue(store, with_token("tok-delivered-0000")).await;
    let failed = enqueue(store, with_token("tok-failed-0000")).await;
    let retried = enqueue(store, with_token("tok-retried-0000")).await;
    let reply = enqueue(store, reply_row(&conversation, at_s(0), 7)).await;
    let claimed = claim(store, rules(at_s(1), 10)).await;
    assert!(
        [delivered, failed, retried, reply]
            .iter()
            .all(|id| claimed.contains(id))
    );
    store
        .mark_delivered(delivered, at_s(2))
        .await
        .expect("mark_delivered");
    store
        .mark_failed(failed, "http 400", at_s(2))
        .await
        .expect("mark_failed");
    store
        .mark_retry(retried, at_s(10), "http 503")
        .await
        .expect("mark_retry");
    store
        .mark_delivered(reply, at_s(2))
        .await
        .expect("mark_delivered");

    assert_eq!(
        row(store, delivered).await.payload,
        json!({"generation": 1})
    );
    assert_eq!(row(store, failed).await.payload, json!({"generation": 1}));
    assert_eq!(
        row(store, retried).await.payload["token"],
        json!("tok-retried-0000"),
        "a retry still needs its token"
    );
    assert_eq!(
        row(store, reply).await.payload,
        reply_row(&conversation, at_s(0), 7).payload
    );
    settle(store, &[conversation.id]).await;
}

pub async fn pending_replies_counts_replies_not_yet_delivered(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let other = fresh_conversation(store).await;
    let count = || async {
        store
            .pending_replies(conversation.id)
            .await
            .expect("pending_replies")
    };
    assert_eq!(count().await, 0);
    let first = enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    let second = enqueue(store, reply_row(&conversation, at_s(0), 2)).await;
    enqueue(store, token_row(&conversation, at_s(0))).await;
    enqueue(store, reply_row(&other, at_s(0), 3)).await;
    assert_eq!(count().await, 2, "replies only, this contact only");

    let claimed = claim(store, rules(at_s(1), 10)).await;
    assert!(claimed.contains(&first));
    assert_eq!(count().await, 2, "a delivering reply is still queued");
    store
        .mark_delivered(first, at_s(2))
        .await
        .expect("mark_delivered");
    assert_eq!(count().await, 1);
    store
        .mark_failed(second, "http 400", at_s(2))
        .await
        .expect("mark_failed");
    assert_eq!(count().await, 0);
    settle(store, &[conversation.id, other.id]).await;
}

// --- erasure and retention (issue 13 item 10) ------------------------------------------------

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
    (conversation, turns, vec![delivered, queued, token])
}

pub async fn issue_13_item_10_forget_deletes_every_row_of_the_contact(store: &dyn Store) {
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
            ("rate_counters", 1),
            ("manychat_flow_sends", 0),
            ("turn_tickets", 0),
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
    assert!(store.turns(contact.id).await.expect("turns").is_empty());
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
    assert_eq!(again.deleted.len(), super::CONTACT_TABLES.len());
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

pub async fn issue_13_item_10_retention_clears_old_text_and_keeps_the_measures(store: &dyn Store) {
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
    let before: Vec<_> = store.turns(conversation.id).await.expect("turns");

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

    let after = store.turns(conversation.id).await.expect("turns");
    assert_eq!(after.len(), before.len(), "no turn is deleted");
    for (was, now) in before.iter().zip(&after) {
        if old.contains(&was.id) {
            let expected = super::Turn {
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

async fn row_status(store: &dyn Store, id: i64) -> OutboxStatus {
    row(store, id).await.status
}

/// Every case on one store, in sequence. The two-worker case uses the store as both workers.
/// Issue 21: sendFlow is counted per contact over the past hour; past the limit nothing is
/// counted and the answer is no; a count an hour old no longer weighs; contacts are separate.
pub async fn flow_sends_are_capped_per_contact_per_hour(store: &dyn Store) {
    let contact = fresh_subscriber();
    let other = fresh_subscriber();
    for minutes in [0, 10, 20] {
        assert!(
            store
                .count_flow_send(&contact, at_s(minutes * 60), 3)
                .await
                .expect("count_flow_send"),
            "send at +{minutes} min is within the limit"
        );
    }
    let refused = store.count_flow_send(&contact, at_s(30 * 60), 3).await;
    assert!(!refused.expect("count_flow_send"), "the 4th in the hour");
    assert!(
        store
            .count_flow_send(&other, at_s(30 * 60), 3)
            .await
            .expect("count_flow_send"),
        "another contact has its own count"
    );
    // An hour after the first send, it no longer counts: one slot frees, and only one.
    let after_hour = at_ms(3_600_000 + 1);
    assert!(
        store
            .count_flow_send(&contact, after_hour, 3)
            .await
            .expect("count_flow_send")
    );
    assert!(
        !store
            .count_flow_send(&contact, after_hour, 3)
            .await
            .expect("count_flow_send")
    );
}

/// Issue 14: `sales_record` holds the stored offering with its time and every agent turn's
/// action record that holds an entry, oldest first; user turns, turns that offered no tool and
/// `[]` records are left out, as are other conversations'.
pub async fn sales_record_reads_offering_and_action_records(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let other = fresh_conversation(store).await;
    let empty = store
        .sales_record(conversation.id)
        .await
        .expect("sales_record");
    assert_eq!(empty.offering, None, "no offering stored yet");
    assert!(empty.actions.is_empty());

    let intent =
        json!([{"tool": "set_field", "id": "intent", "value": "prospect", "status": "performed"}]);
    let stage = json!([{"tool": "set_field", "id": "funnel_stage", "value": "qualifying", "status": "staged"}]);
    record(store, NewTurn::user(conversation.id, "q", true, at_s(1))).await;
    record(
        store,
        NewTurn {
            actions: Some(intent.clone()),
            ..NewTurn::agent(conversation.id, "a", "answered_inline", true, at_s(2))
        },
    )
    .await;
    record(
        store,
        NewTurn {
            actions: Some(json!([])),
            ..NewTurn::agent(conversation.id, "b", "answered_inline", true, at_s(3))
        },
    )
    .await;
    record(
        store,
        NewTurn::agent(conversation.id, "c", "answered_inline", true, at_s(4)),
    )
    .await;
    let later = record(
        store,
        NewTurn {
            actions: Some(stage.clone()),
            ..NewTurn::agent(conversation.id, "d", "deferred", false, at_s(5))
        },
    )
    .await;
    record(
        store,
        NewTurn {
            actions: Some(intent.clone()),
            ..NewTurn::agent(other.id, "e", "answered_inline", true, at_s(6))
        },
    )
    .await;
    let performed = json!([{"tool": "set_field", "id": "funnel_stage", "value": "qualifying", "status": "performed"}]);
    store
        .update_turn_actions(later, &performed)
        .await
        .expect("update_turn_actions");
    store
        .set_offering(conversation.id, "invented-offering", at_ms(7_250))
        .await
        .expect("set_offering");

    let read = store
        .sales_record(conversation.id)
        .await
        .expect("sales_record");
    assert_eq!(
        read.offering,
        Some(("invented-offering".to_owned(), at_ms(7_250)))
    );
    let listed: Vec<_> = read
        .actions
        .iter()
        .map(|r| (r.at, r.actions.clone()))
        .collect();
    assert_eq!(
        listed,
        vec![(at_s(2), intent), (at_s(5), performed)],
        "agent turns with entries only, oldest first, as updated"
    );
    assert_eq!(
        store
            .conversation(conversation.id)
            .await
            .expect("conversation")
            .expect("exists")
            .offering
            .as_deref(),
        Some("invented-offering")
    );
    assert!(
        store.set_offering(Uuid::new_v4(), "x", t0()).await.is_err(),
        "an unknown conversation is an error"
    );
}

// --- report (issue 18) --------------------------------------------------------------------------

/// What [`seed_report_week`] stored that must never appear in a report.
pub struct SeededReportWeek {
    pub subscribers: Vec<SubscriberId>,
    /// Message text, a note's text and an action's error: all invented, all private.
    pub private_text: Vec<&'static str>,
}

/// A week of invented turns starting at `from` (a Monday, 00:00 UTC), with one turn the day
/// before and one the day after the week. Every expected number is worked out by hand where it
/// is asserted (`report_aggregates_group_a_period_by_hand`, tests/api/report.rs).
pub async fn seed_report_week(store: &dyn Store, from: DateTime<Utc>) -> SeededReportWeek {
    const TEXT: &str = "Invented private message text";
    const ERROR: &str = "Invented private action error";
    let day = |d: i64, hour: i64| from + chrono::Duration::days(d) + chrono::Duration::hours(hour);
    let mut subscribers = Vec::new();
    let contact = async |subscribers: &mut Vec<SubscriberId>| {
        let subscriber = fresh_subscriber();
        subscribers.push(subscriber.clone());
        store
            .conversation_for(&subscriber, "whatsapp", from - chrono::Duration::days(2))
            .await
            .expect("conversation_for")
            .id
    };
    let (a, b, c, d) = (
        contact(&mut subscribers).await,
        contact(&mut subscribers).await,
        contact(&mut subscribers).await,
        contact(&mut subscribers).await,
    );
    let agent = |id, outcome: &str, at, model: bool, reads, input, output, cost, latency| NewTurn {
        model: model.then(|| "mock:demo".to_owned()),
        reads,
        input_tokens: input,
        output_tokens: output,
        cost_usd: cost,
        latency_ms: latency,
        ..NewTurn::agent(id, TEXT, outcome, true, at)
    };
    let turns = vec![
        // A wrote the day before the week: not a new contact of the week.
        NewTurn::user(a, TEXT, true, day(-1, 12)),
        NewTurn::user(a, TEXT, true, day(0, 10)),
        NewTurn {
            actions: Some(json!([
                {"tool": "add_tag", "id": "lead", "status": "performed"},
                {"tool": "send_flow", "id": "brochure", "status": "failed", "error": ERROR},
                {"tool": "write_note", "id": "summary", "length": 42, "status": "performed"},
            ])),
            ..agent(
                a,
                "answered_inline",
                day(0, 10),
                true,
                2,
                100,
                10,
                0.5,
                1000,
            )
        },
        NewTurn::user(b, TEXT, true, day(1, 9)),
        NewTurn {
            actions: Some(
                json!([{"tool": "send_flow", "id": "brochure", "status": "dead_lettered"}]),
            ),
            ..agent(b, "deferred", day(1, 9), true, 0, 200, 20, 0.25, 5000)
        },
        NewTurn::user(b, TEXT, true, day(1, 11)),
        NewTurn {
            actions: Some(json!([])),
            escalation_reason: Some("low_confidence".into()),
            ..agent(
                b,
                "escalated_model",
                day(1, 11),
                true,
                1,
                300,
                30,
                0.125,
                3000,
            )
        },
        // C's first message was aborted: the reason is on the message, no agent turn.
        NewTurn {
            escalation_reason: Some("abort".into()),
            ..NewTurn::user(c, TEXT, true, day(1, 15))
        },
        NewTurn::user(c, TEXT, true, day(2, 8)),
        agent(
            c,
            "answered_inline",
            day(2, 8),
            true,
            1,
            100,
            10,
            0.125,
            2000,
        ),
        NewTurn::user(d, TEXT, true, day(2, 20)),
        NewTurn {
            escalation_reason: Some("escalation_keyword".into()),
            ..agent(d, "escalated_precheck", day(2, 20), false, 0, 0, 0, 0.0, 4)
        },
        // After the week.
        NewTurn::user(d, TEXT, true, day(7, 1)),
        agent(d, "answered_inline", day(7, 1), true, 9, 900, 90, 9.0, 9000),
    ];
    for turn in turns {
        record(store, turn).await;
    }
    SeededReportWeek {
        subscribers,
        private_text: vec![TEXT, ERROR],
    }
}

/// The demo tenant's sales ids (`config/tools.json.example`), as the report reads them.
pub fn demo_sales_keys() -> super::SalesKeys {
    super::SalesKeys {
        intent_field: Some("intent".into()),
        funnel_field: Some("funnel_stage".into()),
        offered_or_later: vec!["offered".into(), "prepared".into(), "link_sent".into()],
        prepared_or_later: vec!["prepared".into(), "link_sent".into()],
        payment_flow: Some("booking_link".into()),
    }
}

/// A week of invented sales turns starting at `from` (a Monday, 00:00 UTC) with the demo's ids,
/// one contact with history before it and one reply after it. Its week holds, by hand:
/// - contacts with a first turn: P, Q, S, T = 4 (R wrote three days before);
/// - prospects (a performed `prospect` write in the week): P, Q, R = 3 (R's first was before
///   the week and is written again in it; S's was discarded);
/// - at or past `offered`: P (offered, prepared, link_sent), Q (link_sent), R (offered) = 3;
///   at or past `prepared`: P, Q = 2;
/// - payment links performed: P once, Q twice (the first with `contactAsked`) = 3 links, 2
///   contacts, 1 by `contactAsked`; S's failed link is not sent;
/// - nudges sent: T (answered 10 h later), S (answered 25 h later: not counted), P (answered
///   11 h later, in the next week) = 3 sent, 2 answered.
pub async fn seed_sales_week(store: &dyn Store, from: DateTime<Utc>) -> Vec<SubscriberId> {
    const TEXT: &str = "Invented private message text";
    let at = |d: i64, hour: i64| from + chrono::Duration::days(d) + chrono::Duration::hours(hour);
    let mut subscribers = Vec::new();
    let mut contacts = Vec::new();
    for _ in 0..5 {
        let subscriber = fresh_subscriber();
        subscribers.push(subscriber.clone());
        let id = store
            .conversation_for(&subscriber, "whatsapp", from - chrono::Duration::days(5))
            .await
            .expect("conversation_for")
            .id;
        contacts.push(id);
    }
    let (p, q, r, s, t) = (
        contacts[0],
        contacts[1],
        contacts[2],
        contacts[3],
        contacts[4],
    );
    let user = |id, at| NewTurn::user(id, TEXT, true, at);
    let agent = |id, outcome: &str, at, actions: serde_json::Value| NewTurn {
        actions: Some(actions),
        ..NewTurn::agent(id, TEXT, outcome, true, at)
    };
    let field = |id: &str, value: &str, status: &str| json!({"tool": "set_field", "id": id, "value": value, "status": status});
    let link = |status: &str| json!({"tool": "send_flow", "id": "booking_link", "status": status});
    let asked = json!({"tool": "send_flow", "id": "booking_link", "status": "performed",
                       "contactAsked": true});
    let turns = vec![
        // R: a prospect since before the week.
        user(r, at(-3, 9)),
        agent(
            r,
            "answered_inline",
            at(-3, 9),
            json!([field("intent", "prospect", "performed")]),
        ),
        user(r, at(1, 9)),
        agent(
            r,
            "answered_inline",
            at(1, 9),
            json!([
                field("intent", "prospect", "performed"),
                field("funnel_stage", "offered", "performed")
            ]),
        ),
        // P: prospect, offered, prepared, then the link and its follow-on.
        user(p, at(0, 10)),
        agent(
            p,
            "answered_inline",
            at(0, 10),
            json!([
                field("intent", "prospect", "performed"),
                field("funnel_stage", "qualifying", "performed")
            ]),
        ),
        user(p, at(2, 10)),
        agent(
            p,
            "answered_inline",
            at(2, 10),
            json!([field("funnel_stage", "offered", "performed")]),
        ),
        user(p, at(3, 10)),
        agent(
            p,
            "deferred",
            at(3, 10),
            json!([
                field("funnel_stage", "prepared", "performed"),
                link("performed"),
                field("funnel_stage", "link_sent", "performed")
            ]),
        ),
        // Q: asks for the link at once (contactAsked), and gets it again later.
        user(q, at(1, 12)),
        agent(
            q,
            "answered_inline",
            at(1, 12),
            json!([
                field("intent", "prospect", "performed"),
                asked,
                field("funnel_stage", "link_sent", "performed")
            ]),
        ),
        user(q, at(4, 12)),
        agent(q, "answered_inline", at(4, 12), json!([link("performed")])),
        // S: not a prospect; an escalated turn discarded its prospect write; a link failed.
        user(s, at(2, 14)),
        agent(
            s,
            "answered_inline",
            at(2, 14),
            json!([field("intent", "not_prospect", "performed")]),
        ),
        user(s, at(3, 14)),
        agent(
            s,
            "escalated_model",
            at(3, 14),
            json!([field("intent", "prospect", "discarded"), link("failed")]),
        ),
        // T: writes once and answers a nudge.
        user(t, at(4, 8)),
        agent(t, "answered_inline", at(4, 8), json!([])),
        agent(t, "nudge_sent", at(4, 10), json!([])),
        user(t, at(4, 20)),
        // S answers its nudge 25 h later; P 11 h later, in the next week.
        agent(s, "nudge_sent", at(5, 10), json!([])),
        user(s, at(6, 11)),
        agent(p, "nudge_sent", at(6, 22), json!([])),
        user(p, at(7, 9)),
    ];
    for turn in turns {
        record(store, turn).await;
    }
    subscribers
}

pub async fn sales_aggregates_count_a_period_by_hand(store: &dyn Store) {
    let from = Utc
        .with_ymd_and_hms(2031, 9, 1, 0, 0, 0)
        .single()
        .expect("a Monday");
    let until = from + chrono::Duration::weeks(1);
    seed_sales_week(store, from).await;
    let keys = demo_sales_keys();
    let week = store
        .sales_aggregates(from, until, &keys)
        .await
        .expect("sales_aggregates");
    // Worked out in `seed_sales_week`'s comment.
    assert_eq!(
        week,
        super::SalesCounts {
            prospects: 3,
            offered: 3,
            prepared: 2,
            link_contacts: 2,
            links_sent: 3,
            links_contact_asked: 1,
            nudges_sent: 3,
            nudges_replied: 2,
        }
    );
    assert_eq!(
        store
            .report_aggregates(from, until)
            .await
            .expect("report_aggregates")
            .new_contacts,
        4,
        "P, Q, S and T"
    );
    // A tenant without sales fields or flows counts only nudges.
    let bare = store
        .sales_aggregates(from, until, &super::SalesKeys::default())
        .await
        .expect("sales_aggregates");
    assert_eq!(
        bare,
        super::SalesCounts {
            nudges_sent: 3,
            nudges_replied: 2,
            ..super::SalesCounts::default()
        }
    );
    // The next week holds P's answer only.
    let next = store
        .sales_aggregates(until, until + chrono::Duration::weeks(1), &keys)
        .await
        .expect("sales_aggregates");
    assert_eq!(next, super::SalesCounts::default());
}

/// Issue 18: `report_week` (what `manychat-agent report` reads per week; SQLite reads the
/// week's action records once) answers what `report_aggregates` and `sales_aggregates` answer
/// apart, on the by-hand sales week, with and without sales ids.
pub async fn report_week_reads_what_the_two_calls_read(store: &dyn Store) {
    let from = Utc
        .with_ymd_and_hms(2031, 11, 3, 0, 0, 0)
        .single()
        .expect("a Monday");
    let until = from + chrono::Duration::weeks(1);
    seed_sales_week(store, from).await;
    for keys in [demo_sales_keys(), super::SalesKeys::default()] {
        let (aggregates, counts) = store
            .report_week(from, until, &keys)
            .await
            .expect("report_week");
        assert_eq!(
            aggregates,
            store
                .report_aggregates(from, until)
                .await
                .expect("report_aggregates")
        );
        assert_eq!(
            counts,
            store
                .sales_aggregates(from, until, &keys)
                .await
                .expect("sales_aggregates")
        );
    }
    let (_, counts) = store
        .report_week(from, until, &demo_sales_keys())
        .await
        .expect("report_week");
    assert_eq!(
        (counts.prospects, counts.links_sent),
        (3, 3),
        "the by-hand week"
    );
}

pub async fn report_aggregates_group_a_period_by_hand(store: &dyn Store) {
    // A Monday of its own, far from every other case's turns.
    let from = Utc
        .with_ymd_and_hms(2031, 6, 2, 0, 0, 0)
        .single()
        .expect("an instant");
    let until = from + chrono::Duration::weeks(1);
    seed_report_week(store, from).await;
    let week = store
        .report_aggregates(from, until)
        .await
        .expect("report_aggregates");

    assert_eq!(week.new_contacts, 3, "B, C and D; A wrote the day before");
    assert_eq!(week.inline_latencies, vec![(1000, 1), (2000, 1)]);
    let actions: Vec<(&str, &str, i64)> = week
        .actions
        .iter()
        .map(|a| (a.tool.as_str(), a.status.as_str(), a.count))
        .collect();
    let mut expected = vec![
        ("add_tag", "performed", 1),
        ("send_flow", "dead_lettered", 1),
        ("send_flow", "failed", 1),
        ("write_note", "performed", 1),
    ];
    let mut got = actions.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);

    let date = |d: u32| NaiveDate::from_ymd_opt(2031, 6, 2 + d).expect("a day");
    let mut groups: Vec<_> = week
        .turn_groups
        .iter()
        .map(|g| {
            (
                g.day,
                g.role.as_str(),
                g.outcome.clone(),
                g.escalation_reason.clone(),
                g.model_written,
                g.turns,
                g.reads,
                g.input_tokens,
                g.output_tokens,
                // Exact binary fractions, so any summation order gives these.
                (g.cost_usd * 1000.0).round() as i64,
            )
        })
        .collect();
    groups.sort();
    let s = |v: &str| Some(v.to_owned());
    let mut expected = vec![
        (date(0), "user", None, None, false, 1, 0, 0, 0, 0),
        (
            date(0),
            "agent",
            s("answered_inline"),
            None,
            true,
            1,
            2,
            100,
            10,
            500,
        ),
        (date(1), "user", None, None, false, 2, 0, 0, 0, 0),
        (date(1), "user", None, s("abort"), false, 1, 0, 0, 0, 0),
        (
            date(1),
            "agent",
            s("deferred"),
            None,
            true,
            1,
            0,
            200,
            20,
            250,
        ),
        (
            date(1),
            "agent",
            s("escalated_model"),
            s("low_confidence"),
            true,
            1,
            1,
            300,
            30,
            125,
        ),
        (date(2), "user", None, None, false, 2, 0, 0, 0, 0),
        (
            date(2),
            "agent",
            s("answered_inline"),
            None,
            true,
            1,
            1,
            100,
            10,
            125,
        ),
        (
            date(2),
            "agent",
            s("escalated_precheck"),
            s("escalation_keyword"),
            false,
            1,
            0,
            0,
            0,
            0,
        ),
    ];
    expected.sort();
    assert_eq!(groups, expected);

    // A period without turns is empty, not an error.
    let empty = store
        .report_aggregates(
            from + chrono::Duration::weeks(3),
            from + chrono::Duration::weeks(4),
        )
        .await
        .expect("report_aggregates");
    assert_eq!(empty, super::ReportAggregates::default());
}

/// 025 verification 2: scheduling twice leaves one pending row, the later one; scheduling after
/// a settled nudge makes it pending again (a new silence).
pub async fn spec_025_scheduling_twice_leaves_one_pending_row(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    store
        .schedule_nudge(conversation.id, "later_today", at_s(7200), at_s(0))
        .await
        .expect("schedule");
    store
        .schedule_nudge(conversation.id, "tomorrow", at_s(72_000), at_s(10))
        .await
        .expect("schedule again");
    let nudge = store
        .nudge(conversation.id)
        .await
        .expect("read")
        .expect("a row");
    assert_eq!(nudge.status, NudgeStatus::Pending);
    assert_eq!(
        nudge.delay_id, "tomorrow",
        "the later schedule replaced the first"
    );
    assert_eq!(nudge.due_at, at_s(72_000));
    assert_eq!(nudge.scheduled_at, at_s(10));
    assert_eq!(nudge.claimed_at, None);
    assert!(
        store
            .cancel_nudge(conversation.id, "contact_replied", at_s(20))
            .await
            .expect("cancel")
    );
    let nudge = store
        .nudge(conversation.id)
        .await
        .expect("read")
        .expect("a row");
    assert_eq!(nudge.status, NudgeStatus::Cancelled);
    assert_eq!(nudge.reason.as_deref(), Some("contact_replied"));
    assert!(
        !store
            .cancel_nudge(conversation.id, "contact_replied", at_s(21))
            .await
            .expect("cancel again"),
        "a settled nudge is not cancelled twice"
    );
    store
        .schedule_nudge(conversation.id, "later_today", at_s(9000), at_s(30))
        .await
        .expect("schedule after a settled one");
    let nudge = store
        .nudge(conversation.id)
        .await
        .expect("read")
        .expect("a row");
    assert_eq!((nudge.status, nudge.reason), (NudgeStatus::Pending, None));
    store
        .cancel_nudge(conversation.id, "contact_replied", at_s(31))
        .await
        .expect("settle");
}

/// 025: the claim takes due pending rows only, earliest first, at most `limit`, once; a claimed
/// row settles only under its own claim; a cancelled running row is not settled by its worker.
pub async fn spec_025_claim_takes_due_rows_once(store: &dyn Store) {
    let base = at_s(1_000_000);
    let mut mine = Vec::new();
    for offset in [30, 10, 20, 500] {
        let conversation = fresh_conversation(store).await;
        store
            .schedule_nudge(
                conversation.id,
                "later_today",
                base + chrono::Duration::seconds(offset),
                base,
            )
            .await
            .expect("schedule");
        mine.push(conversation.id);
    }
    let now = base + chrono::Duration::seconds(100);
    let first = store.claim_due_nudges(now, 2).await.expect("claim");
    let order: Vec<_> = first.iter().map(|n| n.conversation_id).collect();
    assert_eq!(
        order,
        vec![mine[1], mine[2]],
        "earliest due first, at most the limit"
    );
    assert!(
        first
            .iter()
            .all(|n| n.status == NudgeStatus::Running && n.claimed_at == Some(now))
    );
    let second = store.claim_due_nudges(now, 10).await.expect("claim again");
    let order: Vec<_> = second.iter().map(|n| n.conversation_id).collect();
    assert_eq!(
        order,
        vec![mine[0]],
        "a claimed row is not claimed again; a later one waits"
    );
    assert!(
        store
            .claim_due_nudges(now, 10)
            .await
            .expect("claim")
            .is_empty()
    );

    // Settled under its own claim.
    assert!(
        store
            .settle_nudge(&first[0], NudgeStatus::Sent, None, now)
            .await
            .expect("settle")
    );
    assert!(
        !store
            .settle_nudge(&first[0], NudgeStatus::Skipped, None, now)
            .await
            .expect("settle twice"),
        "a settled row is not settled again"
    );
    // An inbound message cancels a running nudge: its worker's settle then finds it gone.
    assert!(
        store
            .cancel_nudge(mine[2], "contact_replied", now)
            .await
            .expect("cancel running")
    );
    assert!(
        !store
            .settle_nudge(&first[1], NudgeStatus::Sent, None, now)
            .await
            .expect("settle cancelled")
    );
    let cancelled = store.nudge(mine[2]).await.expect("read").expect("row");
    assert_eq!(cancelled.status, NudgeStatus::Cancelled);
    assert_eq!(cancelled.reason.as_deref(), Some("contact_replied"));

    // Crash: a row left running is marked lost after the margin, never claimed again.
    let later = now + chrono::Duration::seconds(60);
    assert_eq!(
        store.mark_lost_nudges(now, later).await.expect("lost"),
        Vec::<ConversationId>::new(),
        "claimed at the cutoff: not yet lost"
    );
    assert_eq!(
        store
            .mark_lost_nudges(now + chrono::Duration::seconds(1), later)
            .await
            .expect("lost"),
        vec![mine[0]],
        "the lost row's conversation, for its log line"
    );
    let lost = store.nudge(mine[0]).await.expect("read").expect("row");
    assert_eq!(
        (lost.status, lost.reason.as_deref()),
        (NudgeStatus::Lost, Some("process_died"))
    );
    assert!(
        !store
            .settle_nudge(&second[0], NudgeStatus::Sent, None, later)
            .await
            .expect("settle lost"),
        "a lost nudge is never sent"
    );
    store
        .cancel_nudge(mine[3], "contact_replied", later)
        .await
        .expect("settle the last");
}

/// 025: a nudge turn is written whole (the nudge settled, the agent turn, its count and charge,
/// its reply row carrying the turn's id) only under its claim: a nudge cancelled during the
/// model call, or marked lost, leaves nothing written.
pub async fn spec_025_a_nudge_turn_is_written_only_under_its_claim(store: &dyn Store) {
    let base = at_s(3_000_000);
    let day = fresh_day();
    let window = at_s(3_000_000 + 3600);
    let mut conversations = Vec::new();
    for _ in 0..3 {
        let conversation = fresh_conversation(store).await;
        store
            .schedule_nudge(conversation.id, "later_today", base, base)
            .await
            .expect("schedule");
        conversations.push(conversation);
    }
    let now = base + chrono::Duration::seconds(1);
    let mut claimed = store.claim_due_nudges(now, 10).await.expect("claim");
    claimed.retain(|n| conversations.iter().any(|c| c.id == n.conversation_id));
    claimed.sort_by_key(|n| conversations.iter().position(|c| c.id == n.conversation_id));
    assert_eq!(claimed.len(), 3);
    let write = |conversation: &Conversation| {
        let mut turn = NewTurn::agent(conversation.id, "Any questions?", "nudge_sent", true, now);
        turn.input_tokens = 40;
        let mut row = reply_row(conversation, now, 0);
        row.payload = json!({"messages": ["Any questions?"], "actions": [], "turnId": null});
        (turn, row)
    };

    // Still running under its claim: everything is written.
    let (turn, row) = write(&conversations[0]);
    let sent = store
        .record_nudge_turn(NudgeExchange {
            nudge: &claimed[0],
            status: NudgeStatus::Sent,
            reason: None,
            turn: &turn,
            rate: Some((&conversations[0].subscriber_id, window)),
            charge: Some(BudgetCharge {
                day,
                tokens: 50,
                cost_usd: 0.5,
            }),
            outbox: std::slice::from_ref(&row),
            now,
        })
        .await
        .expect("record_nudge_turn")
        .expect("written under its claim");
    let nudge = store.nudge(conversations[0].id).await.expect("read");
    assert_eq!(nudge.map(|n| n.status), Some(NudgeStatus::Sent));
    let turns = store.turns(conversations[0].id).await.expect("turns");
    assert_eq!(turns.len(), 1);
    assert_eq!(
        (turns[0].id, turns[0].outcome.as_deref()),
        (sent, Some("nudge_sent"))
    );
    assert_eq!(
        store
            .rate_count(&conversations[0].subscriber_id, window)
            .await
            .expect("rate"),
        1,
        "a nudge turn counts in the contact's hour"
    );
    assert_eq!(store.budget(day).await.expect("budget").tokens, 50);
    let after = store
        .conversation(conversations[0].id)
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(
        (after.last_message_at, after.turn_count),
        (None, 0),
        "an agent turn is not an inbound message"
    );
    let rows: Vec<_> = store
        .outbox_rows()
        .await
        .expect("outbox")
        .into_iter()
        .filter(|r| r.conversation_id == conversations[0].id)
        .collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].payload["turnId"], json!(sent));
    assert!(
        store
            .record_nudge_turn(NudgeExchange {
                nudge: &claimed[0],
                status: NudgeStatus::Sent,
                reason: None,
                turn: &turn,
                rate: None,
                charge: None,
                outbox: std::slice::from_ref(&row),
                now,
            })
            .await
            .expect("record again")
            .is_none(),
        "a settled nudge is never written twice"
    );

    // Cancelled while its model call ran, or lost: nothing is written.
    store
        .cancel_nudge(conversations[1].id, "contact_replied", now)
        .await
        .expect("cancel");
    store
        .mark_lost_nudges(now + chrono::Duration::seconds(1), now)
        .await
        .expect("lost");
    for (nudge, conversation) in claimed[1..].iter().zip(&conversations[1..]) {
        let (turn, row) = write(conversation);
        let written = store
            .record_nudge_turn(NudgeExchange {
                nudge,
                status: NudgeStatus::Sent,
                reason: None,
                turn: &turn,
                rate: Some((&conversation.subscriber_id, window)),
                charge: Some(BudgetCharge {
                    day,
                    tokens: 50,
                    cost_usd: 0.5,
                }),
                outbox: std::slice::from_ref(&row),
                now,
            })
            .await
            .expect("record_nudge_turn");
        assert_eq!(written, None, "no claim, no write");
        assert!(
            store
                .turns(conversation.id)
                .await
                .expect("turns")
                .is_empty()
        );
        assert_eq!(
            store
                .rate_count(&conversation.subscriber_id, window)
                .await
                .expect("rate"),
            0
        );
    }
    assert_eq!(store.budget(day).await.expect("budget").tokens, 50);
    let ids: Vec<_> = conversations.iter().map(|c| c.id).collect();
    assert!(
        store
            .outbox_rows()
            .await
            .expect("outbox")
            .iter()
            .filter(|r| ids.contains(&r.conversation_id))
            .count()
            == 1
    );
    settle(store, &ids).await;
}

/// 025: two workers (two stores) claiming the same due rows take each exactly once.
pub async fn spec_025_two_workers_claim_a_due_nudge_once(a: &dyn Store, b: &dyn Store) {
    let base = at_s(2_000_000);
    let mut expected = HashSet::new();
    for _ in 0..20 {
        let conversation = fresh_conversation(a).await;
        a.schedule_nudge(conversation.id, "later_today", base, base)
            .await
            .expect("schedule");
        expected.insert(conversation.id);
    }
    async fn drain(store: &dyn Store, now: DateTime<Utc>) -> Vec<ConversationId> {
        let mut all = Vec::new();
        loop {
            let batch = store.claim_due_nudges(now, 3).await.expect("claim");
            if batch.is_empty() {
                return all;
            }
            all.extend(batch.into_iter().map(|n| n.conversation_id));
            tokio::task::yield_now().await;
        }
    }
    let now = base + chrono::Duration::seconds(1);
    let (from_a, from_b) = tokio::join!(drain(a, now), drain(b, now));
    let mut seen = HashSet::new();
    for id in from_a.iter().chain(&from_b) {
        assert!(seen.insert(*id), "nudge of {id} was claimed twice");
    }
    assert_eq!(seen, expected, "every due nudge was claimed");
}

/// 032 A / 034: three turns racing to claim one contact's opening: exactly one claims it, the
/// conversation keeps when, and no later claim succeeds; another contact's claim is its own.
pub async fn spec_032_the_opening_is_claimed_once_per_contact(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let other = fresh_conversation(store).await;
    let at = at_ms(9_001);
    let (a, b, c) = tokio::join!(
        store.claim_opening(conversation.id, at),
        store.claim_opening(conversation.id, at),
        store.claim_opening(conversation.id, at),
    );
    let claimed = [a, b, c].map(|r| r.expect("claim_opening"));
    assert_eq!(
        claimed.iter().filter(|c| **c).count(),
        1,
        "one claim wins: {claimed:?}"
    );
    assert!(
        !store
            .claim_opening(conversation.id, at_ms(10_000))
            .await
            .expect("claim_opening"),
        "never again"
    );
    let read = store
        .conversation(conversation.id)
        .await
        .expect("conversation")
        .expect("exists");
    assert_eq!(
        read.opening_sent_at,
        Some(at),
        "the first claim's time is kept"
    );
    assert!(
        store
            .claim_opening(other.id, at)
            .await
            .expect("claim_opening"),
        "another contact's opening is its own"
    );
}

/// Issue 14: a write the server refused is recorded `refused` with its reason, and the report
/// counts it under that status of its own, never as `failed`.
pub async fn issue_14_report_counts_refused_actions_under_their_own_status(store: &dyn Store) {
    // A Monday of its own, far from every other case's turns.
    let from = Utc
        .with_ymd_and_hms(2032, 3, 1, 0, 0, 0)
        .single()
        .expect("an instant");
    let conversation = store
        .conversation_for(&fresh_subscriber(), "whatsapp", from)
        .await
        .expect("conversation_for")
        .id;
    let at = from + chrono::Duration::hours(10);
    record(
        store,
        NewTurn::user(conversation, "Invented text", true, at),
    )
    .await;
    record(
        store,
        NewTurn {
            actions: Some(json!([
                {"tool": "send_flow", "id": "booking_link", "status": "refused", "reason": "not_prepared"},
                {"tool": "set_field", "id": "funnel_stage", "value": "new", "status": "refused", "reason": "backward_stage"},
                {"tool": "send_flow", "id": "brochure", "status": "failed", "error": "Invented error"},
            ])),
            ..NewTurn::agent(conversation, "Invented reply", "answered_inline", true, at)
        },
    )
    .await;
    let week = store
        .report_aggregates(from, from + chrono::Duration::weeks(1))
        .await
        .expect("report_aggregates");
    let mut actions: Vec<(&str, &str, i64)> = week
        .actions
        .iter()
        .map(|a| (a.tool.as_str(), a.status.as_str(), a.count))
        .collect();
    actions.sort();
    assert_eq!(
        actions,
        vec![
            ("send_flow", "failed", 1),
            ("send_flow", "refused", 1),
            ("set_field", "refused", 1),
        ]
    );
}

pub async fn run_all(store: &dyn Store) {
    ping_answers(store).await;
    unknown_ids_read_as_none_and_updates_fail(store).await;
    errors_carry_no_personal_data(store).await;
    timestamps_are_kept_to_the_millisecond(store).await;
    conversation_created_once_with_random_uuid(store).await;
    conversation_first_contacts_racing_create_one_row(store).await;
    escalation_time_is_recorded(store).await;
    sales_record_reads_offering_and_action_records(store).await;
    spec_032_the_opening_is_claimed_once_per_contact(store).await;
    spec_025_scheduling_twice_leaves_one_pending_row(store).await;
    spec_025_claim_takes_due_rows_once(store).await;
    spec_025_a_nudge_turn_is_written_only_under_its_claim(store).await;
    token_rotation_keeps_previous(store).await;
    conversations_without_token_lists_recent_contacts_only(store).await;
    user_turn_updates_last_message_and_bound_count(store).await;
    turn_round_trips_every_field(store).await;
    turn_seq_orders_turns_in_the_same_millisecond(store).await;
    turn_actions_null_vs_empty_vs_updated(store).await;
    history_is_bound_only_oldest_first_within_window_and_limit(store).await;
    turn_cap_times_newest_first(store).await;
    turns_lists_every_turn_oldest_first(store).await;
    rate_counter_counts_per_window(store).await;
    budget_accumulates_per_day(store).await;
    outbox_enqueue_stores_a_pending_row(store).await;
    outbox_claim_leases_and_counts_the_attempt(store).await;
    outbox_row_not_due_before_next_attempt_at(store).await;
    outbox_claims_at_most_limit_oldest_first(store).await;
    outbox_backlog_counts_open_rows_up_to_the_cap(store).await;
    outbox_two_workers_never_claim_one_row(store, store).await;
    outbox_two_workers_keep_each_contacts_order(store, store).await;
    outbox_no_overtaking_within_a_conversation(store).await;
    outbox_contact_token_rows_are_not_held_behind_replies(store).await;
    outbox_pacing_gap_after_delivery(store).await;
    outbox_expired_lease_is_reclaimed(store).await;
    outbox_failed_row_is_never_claimed_again(store).await;
    outbox_retry_due_later(store).await;
    outbox_last_error_is_bounded(store).await;
    outbox_delivered_row_is_done(store).await;
    outbox_replies_are_claimed_ahead_of_contact_token_writes(store).await;
    outbox_renewed_lease_keeps_a_row_from_being_taken(store).await;
    outbox_delivery_progress_is_kept_across_retries(store).await;
    outbox_action_progress_rewrites_only_the_actions(store).await;
    pending_replies_counts_replies_not_yet_delivered(store).await;
    settled_contact_token_rows_keep_no_token(store).await;
    turn_context_matches_the_separate_reads(store).await;
    returning_contact_reads_conversation_and_context_together(store).await;
    rate_count_reads_the_window(store).await;
    record_exchange_writes_what_it_is_given(store).await;
    record_exchange_is_all_or_nothing(store).await;
    record_exchange_keeps_a_promise(store).await;
    spec_020_media_kind_round_trips_and_the_transcript_replaces_the_marker(store).await;
    outbox_handoff_waits_behind_an_open_reply(store).await;
    issue_13_item_10_forget_deletes_every_row_of_the_contact(store).await;
    issue_13_item_10_retention_clears_old_text_and_keeps_the_measures(store).await;
    flow_sends_are_capped_per_contact_per_hour(store).await;
    report_aggregates_group_a_period_by_hand(store).await;
    issue_14_report_counts_refused_actions_under_their_own_status(store).await;
    sales_aggregates_count_a_period_by_hand(store).await;
    report_week_reads_what_the_two_calls_read(store).await;
}

#[cfg(test)]
mod tests {
    use super::super::postgres::{PgStore, connect_isolated, connect_isolated_pair};
    use super::super::sqlite::SqliteStore;

    /// A fresh SQLite file in its own folder (kept alive by the returned guard).
    async fn sqlite_store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let url = sqlite_url(&dir);
        let store = SqliteStore::connect(&url).await.expect("connect to SQLite");
        (dir, store)
    }

    fn sqlite_url(dir: &tempfile::TempDir) -> String {
        format!("sqlite://{}/agent.db", dir.path().display())
    }

    /// The Postgres tests are `#[ignore]`d, so a plain `cargo test` lists them as ignored
    /// instead of passing them untested; `cargo test -- --include-ignored` runs them, and then a
    /// missing `TEST_DATABASE_URL` fails them.
    fn postgres_url() -> String {
        match std::env::var("TEST_DATABASE_URL") {
            Ok(url) if !url.is_empty() => url,
            _ => panic!("TEST_DATABASE_URL is not set: this test needs PostgreSQL"),
        }
    }

    async fn postgres_store() -> PgStore {
        connect_isolated(&postgres_url())
            .await
            .expect("connect to Postgres")
    }

    macro_rules! conformance {
        ($($case:ident),* $(,)?) => {
            mod sqlite {
                $(
                    #[tokio::test]
                    async fn $case() {
                        let (_dir, store) = super::sqlite_store().await;
                        super::super::$case(&store).await;
                    }
                )*
            }
            mod postgres {
                $(
                    #[tokio::test]
                    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
                    async fn $case() {
                        let store = super::postgres_store().await;
                        super::super::$case(&store).await;
                    }
                )*
            }
        };
    }

    conformance!(
        ping_answers,
        unknown_ids_read_as_none_and_updates_fail,
        errors_carry_no_personal_data,
        timestamps_are_kept_to_the_millisecond,
        conversation_created_once_with_random_uuid,
        conversation_first_contacts_racing_create_one_row,
        escalation_time_is_recorded,
        token_rotation_keeps_previous,
        conversations_without_token_lists_recent_contacts_only,
        user_turn_updates_last_message_and_bound_count,
        turn_round_trips_every_field,
        turn_seq_orders_turns_in_the_same_millisecond,
        turn_actions_null_vs_empty_vs_updated,
        history_is_bound_only_oldest_first_within_window_and_limit,
        turn_cap_times_newest_first,
        turns_lists_every_turn_oldest_first,
        rate_counter_counts_per_window,
        budget_accumulates_per_day,
        outbox_enqueue_stores_a_pending_row,
        outbox_claim_leases_and_counts_the_attempt,
        outbox_row_not_due_before_next_attempt_at,
        outbox_claims_at_most_limit_oldest_first,
        outbox_backlog_counts_open_rows_up_to_the_cap,
        outbox_no_overtaking_within_a_conversation,
        outbox_contact_token_rows_are_not_held_behind_replies,
        outbox_pacing_gap_after_delivery,
        outbox_expired_lease_is_reclaimed,
        outbox_failed_row_is_never_claimed_again,
        outbox_retry_due_later,
        outbox_last_error_is_bounded,
        outbox_delivered_row_is_done,
        outbox_replies_are_claimed_ahead_of_contact_token_writes,
        outbox_renewed_lease_keeps_a_row_from_being_taken,
        outbox_delivery_progress_is_kept_across_retries,
        outbox_action_progress_rewrites_only_the_actions,
        pending_replies_counts_replies_not_yet_delivered,
        settled_contact_token_rows_keep_no_token,
        turn_context_matches_the_separate_reads,
        returning_contact_reads_conversation_and_context_together,
        rate_count_reads_the_window,
        record_exchange_writes_what_it_is_given,
        record_exchange_is_all_or_nothing,
        record_exchange_keeps_a_promise,
        outbox_handoff_waits_behind_an_open_reply,
        issue_13_item_10_forget_deletes_every_row_of_the_contact,
        issue_13_item_10_retention_clears_old_text_and_keeps_the_measures,
        flow_sends_are_capped_per_contact_per_hour,
        spec_020_media_kind_round_trips_and_the_transcript_replaces_the_marker,
        sales_record_reads_offering_and_action_records,
        spec_032_the_opening_is_claimed_once_per_contact,
        report_aggregates_group_a_period_by_hand,
        issue_14_report_counts_refused_actions_under_their_own_status,
        sales_aggregates_count_a_period_by_hand,
        report_week_reads_what_the_two_calls_read,
        spec_025_scheduling_twice_leaves_one_pending_row,
        spec_025_claim_takes_due_rows_once,
        spec_025_a_nudge_turn_is_written_only_under_its_claim,
        run_all,
    );

    /// Two processes on one SQLite file: two stores, two pools.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_outbox_two_workers_never_claim_one_row() {
        let (dir, first) = sqlite_store().await;
        let second = SqliteStore::connect(&sqlite_url(&dir))
            .await
            .expect("a second store on the same file");
        super::outbox_two_workers_never_claim_one_row(&first, &second).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_outbox_two_workers_keep_each_contacts_order() {
        let (dir, first) = sqlite_store().await;
        let second = SqliteStore::connect(&sqlite_url(&dir))
            .await
            .expect("a second store on the same file");
        super::outbox_two_workers_keep_each_contacts_order(&first, &second).await;
    }

    /// Two replicas on one Postgres schema: two stores, two pools.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn postgres_outbox_two_workers_never_claim_one_row() {
        let url = postgres_url();
        let (first, second) = connect_isolated_pair(&url)
            .await
            .expect("two stores on one schema");
        super::outbox_two_workers_never_claim_one_row(&first, &second).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn postgres_outbox_two_workers_keep_each_contacts_order() {
        let url = postgres_url();
        let (first, second) = connect_isolated_pair(&url)
            .await
            .expect("two stores on one schema");
        super::outbox_two_workers_keep_each_contacts_order(&first, &second).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_spec_025_two_workers_claim_a_due_nudge_once() {
        let (dir, first) = sqlite_store().await;
        let second = SqliteStore::connect(&sqlite_url(&dir))
            .await
            .expect("a second store on the same file");
        super::spec_025_two_workers_claim_a_due_nudge_once(&first, &second).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
    async fn postgres_spec_025_two_workers_claim_a_due_nudge_once() {
        let url = postgres_url();
        let (first, second) = connect_isolated_pair(&url)
            .await
            .expect("two stores on one schema");
        super::spec_025_two_workers_claim_a_due_nudge_once(&first, &second).await;
    }
}
