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
    Store, StoreError, TurnContext, TurnContextQuery, WindowClosing, WindowClosingClaim,
    WindowClosingStatus,
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
    NewOutboxRow::of(
        conversation,
        OutboxKind::Reply,
        json!({"messages": [format!("Invented reply {marker}")], "actions": [], "turnId": marker}),
        due,
    )
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

/// Releases the hold `held_since` began, at `at` for `reason` (`ConversationStore::release_hold`):
/// whether it was the one in force.
async fn release(
    store: &dyn Store,
    id: ConversationId,
    (held_since, at): (DateTime<Utc>, DateTime<Utc>),
    reason: &str,
) -> bool {
    store
        .release_hold(id, held_since, at, reason)
        .await
        .expect("release_hold")
}

/// The conversation as the store holds it now.
async fn stored_conversation(store: &dyn Store, id: ConversationId) -> Conversation {
    store.conversation(id).await.expect("read").expect("exists")
}

/// The conversation's turns as the store holds them now, oldest first.
async fn stored_turns(store: &dyn Store, id: ConversationId) -> Vec<super::Turn> {
    store.turns(id).await.expect("turns")
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
        record_bound_exchange(store, conversation, i, 10 * i).await;
    }
}

/// Bound exchange `i`: message `q{i}` at `at` s, its answer `a{i}` a second later; their ids.
async fn record_bound_exchange(
    store: &dyn Store,
    conversation: &Conversation,
    i: i64,
    at: i64,
) -> [i64; 2] {
    let user = record(
        store,
        NewTurn::user(conversation.id, format!("q{i}"), true, at_s(at)),
    )
    .await;
    let agent = NewTurn::agent(
        conversation.id,
        format!("a{i}"),
        "answered_inline",
        true,
        at_s(at + 1),
    );
    [user, record(store, agent).await]
}

/// `turn` with the actions record `actions`.
fn with_actions(actions: serde_json::Value, turn: NewTurn) -> NewTurn {
    NewTurn {
        actions: Some(actions),
        ..turn
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
    let row = NewOutboxRow::new(
        stranger,
        &subscriber,
        OutboxKind::Reply,
        json!({"messages": ["Invented reply to 5550009876"]}),
        t0(),
    );
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

/// A random day, so reruns on one store start from zero.
fn fresh_day() -> NaiveDate {
    let offset = (Uuid::new_v4().as_u128() % 100_000) as u64;
    NaiveDate::from_ymd_opt(2000, 1, 1)
        .and_then(|d| d.checked_add_days(chrono::Days::new(offset)))
        .expect("a valid day")
}

async fn row_status(store: &dyn Store, id: i64) -> OutboxStatus {
    row(store, id).await.status
}

mod browse;
mod conversations;
mod counters;
mod embeddings;
mod erasure;
mod learning;
mod nudges;
mod outbox;
mod report;
mod sales;
mod turns;

pub use browse::*;
pub use conversations::*;
pub use counters::*;
pub use embeddings::*;
pub use erasure::*;
pub use learning::*;
pub use nudges::*;
pub use outbox::*;
pub use report::*;
pub use sales::*;
pub use turns::*;

/// Every case on one store, in sequence. The two-worker case uses the store as both workers.
pub async fn run_all(store: &dyn Store) {
    ping_answers(store).await;
    unknown_ids_read_as_none_and_updates_fail(store).await;
    errors_carry_no_personal_data(store).await;
    timestamps_are_kept_to_the_millisecond(store).await;
    conversation_created_once_with_random_uuid(store).await;
    conversation_first_contacts_racing_create_one_row(store).await;
    escalation_time_is_recorded(store).await;
    handoff_release_is_recorded_once_per_hold(store).await;
    handoff_held_contacts_counts_unreleased_recent_handoffs(store).await;
    handoff_a_hold_from_outside_a_turn_happens_once(store).await;
    handoff_every_release_is_kept_in_the_history(store).await;
    console_recent_conversations_are_paged_newest_first_by_keyset(store).await;
    console_conversation_turns_are_paged_newest_first_by_keyset(store).await;
    console_turn_steps_are_stored_with_the_record_and_browsed(store).await;
    console_turn_knowledge_ids_are_browsed_with_the_record(store).await;
    console_held_now_lists_unreleased_handoffs_with_their_reason(store).await;
    console_report_leaves_test_contacts_out(store).await;
    system_4_the_conversations_fence_nonce_is_stored_and_replaced(store).await;
    sales_record_reads_offering_and_action_records(store).await;
    embeddings_are_kept_once_per_model_and_content_hash(store).await;
    embeddings_unused_since_the_cutoff_are_pruned(store).await;
    spec_032_the_opening_is_claimed_once_per_contact(store).await;
    spec_025_scheduling_twice_leaves_one_pending_row(store).await;
    spec_025_a_settled_nudge_stays_as_the_record_beside_the_next_pending_one(store).await;
    spec_025_claim_takes_due_rows_once(store).await;
    spec_025_a_nudge_turn_is_written_only_under_its_claim(store).await;
    spec_031_window_closing_is_claimed_once_per_contact_from_its_last_message(store).await;
    spec_031_a_window_closing_left_running_is_marked_lost_and_counts_as_sent(store).await;
    token_rotation_keeps_previous(store).await;
    conversations_without_token_lists_recent_contacts_only(store).await;
    user_turn_updates_last_message_and_bound_count(store).await;
    turn_round_trips_every_field(store).await;
    turn_seq_orders_turns_in_the_same_millisecond(store).await;
    turn_actions_null_vs_empty_vs_updated(store).await;
    turn_knowledge_ids_round_trip_and_default_to_null(store).await;
    history_is_bound_only_oldest_first_within_window_and_limit(store).await;
    turn_cap_times_newest_first(store).await;
    turns_lists_every_turn_oldest_first(store).await;
    rate_counter_counts_per_window(store).await;
    budget_accumulates_per_day(store).await;
    contact_tokens_sum_one_conversation_in_its_range(store).await;
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
    contact_token_rows_are_settled_when_a_request_proves_the_token(store).await;
    turn_context_matches_the_separate_reads(store).await;
    returning_contact_reads_conversation_and_context_together(store).await;
    rate_count_reads_the_window(store).await;
    record_exchange_writes_what_it_is_given(store).await;
    record_exchange_is_all_or_nothing(store).await;
    record_exchange_keeps_a_promise(store).await;
    record_exchange_keeps_an_answered_promise_by_removing_its_rows(store).await;
    turns_with_actions_containing_a_marker_are_found_since(store).await;
    spec_020_media_kind_round_trips_and_the_transcript_replaces_the_marker(store).await;
    outbox_handoff_waits_behind_an_open_reply(store).await;
    forget_deletes_every_row_of_the_contact(store).await;
    retention_clears_old_text_and_keeps_the_measures(store).await;
    learning_proposals_are_erased_with_the_turns_they_cite(store).await;
    flow_sends_are_capped_per_contact_per_hour(store).await;
    report_aggregates_group_a_period_by_hand(store).await;
    report_counts_refused_actions_under_their_own_status(store).await;
    sales_aggregates_count_a_period_by_hand(store).await;
    report_week_reads_what_the_two_calls_read(store).await;
    report_cost_per_sale_counts_conversations_that_reached_link_sent(store).await;
    spec_031_the_weekly_claim_is_taken_once(store).await;
    spec_031_a_run_ends_with_its_proposals(store).await;
    spec_031_a_run_left_running_is_failed(store).await;
    spec_031_a_review_makes_one_version_not_yet_active(store).await;
    spec_031_one_version_is_active_and_its_first_activation_is_kept(store).await;
    spec_031_eval_records_of_a_mock_model_never_count(store).await;
    spec_031_playbook_version_is_kept_on_the_turn(store).await;
    spec_031_the_latest_bound_turn_of_each_conversation(store).await;
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
        handoff_release_is_recorded_once_per_hold,
        handoff_held_contacts_counts_unreleased_recent_handoffs,
        handoff_a_hold_from_outside_a_turn_happens_once,
        handoff_every_release_is_kept_in_the_history,
        console_recent_conversations_are_paged_newest_first_by_keyset,
        console_conversation_turns_are_paged_newest_first_by_keyset,
        console_turn_steps_are_stored_with_the_record_and_browsed,
        console_turn_knowledge_ids_are_browsed_with_the_record,
        console_held_now_lists_unreleased_handoffs_with_their_reason,
        console_report_leaves_test_contacts_out,
        system_4_the_conversations_fence_nonce_is_stored_and_replaced,
        token_rotation_keeps_previous,
        conversations_without_token_lists_recent_contacts_only,
        user_turn_updates_last_message_and_bound_count,
        turn_round_trips_every_field,
        turn_seq_orders_turns_in_the_same_millisecond,
        turn_actions_null_vs_empty_vs_updated,
        turn_knowledge_ids_round_trip_and_default_to_null,
        history_is_bound_only_oldest_first_within_window_and_limit,
        turn_cap_times_newest_first,
        turns_lists_every_turn_oldest_first,
        rate_counter_counts_per_window,
        budget_accumulates_per_day,
        contact_tokens_sum_one_conversation_in_its_range,
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
        contact_token_rows_are_settled_when_a_request_proves_the_token,
        turn_context_matches_the_separate_reads,
        returning_contact_reads_conversation_and_context_together,
        rate_count_reads_the_window,
        record_exchange_writes_what_it_is_given,
        record_exchange_is_all_or_nothing,
        record_exchange_keeps_a_promise,
        record_exchange_keeps_an_answered_promise_by_removing_its_rows,
        turns_with_actions_containing_a_marker_are_found_since,
        outbox_handoff_waits_behind_an_open_reply,
        forget_deletes_every_row_of_the_contact,
        retention_clears_old_text_and_keeps_the_measures,
        learning_proposals_are_erased_with_the_turns_they_cite,
        flow_sends_are_capped_per_contact_per_hour,
        spec_020_media_kind_round_trips_and_the_transcript_replaces_the_marker,
        sales_record_reads_offering_and_action_records,
        embeddings_are_kept_once_per_model_and_content_hash,
        embeddings_unused_since_the_cutoff_are_pruned,
        spec_032_the_opening_is_claimed_once_per_contact,
        report_aggregates_group_a_period_by_hand,
        report_counts_refused_actions_under_their_own_status,
        sales_aggregates_count_a_period_by_hand,
        report_week_reads_what_the_two_calls_read,
        report_cost_per_sale_counts_conversations_that_reached_link_sent,
        spec_025_scheduling_twice_leaves_one_pending_row,
        spec_025_a_settled_nudge_stays_as_the_record_beside_the_next_pending_one,
        spec_025_claim_takes_due_rows_once,
        spec_025_a_nudge_turn_is_written_only_under_its_claim,
        spec_031_window_closing_is_claimed_once_per_contact_from_its_last_message,
        spec_031_a_window_closing_left_running_is_marked_lost_and_counts_as_sent,
        spec_031_the_weekly_claim_is_taken_once,
        spec_031_a_run_ends_with_its_proposals,
        spec_031_a_run_left_running_is_failed,
        spec_031_a_review_makes_one_version_not_yet_active,
        spec_031_one_version_is_active_and_its_first_activation_is_kept,
        spec_031_eval_records_of_a_mock_model_never_count,
        spec_031_playbook_version_is_kept_on_the_turn,
        spec_031_the_latest_bound_turn_of_each_conversation,
        run_all,
    );

    /// The cases of two workers, each under its two names: on two stores of one SQLite file
    /// (two processes, two pools) and on two stores of one Postgres schema (two replicas).
    macro_rules! two_workers {
        ($($sqlite:ident, $postgres:ident => $case:ident;)*) => {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $sqlite() {
                    let (dir, first) = sqlite_store().await;
                    let second = SqliteStore::connect(&sqlite_url(&dir))
                        .await
                        .expect("a second store on the same file");
                    super::$case(&first, &second).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
                async fn $postgres() {
                    let (first, second) = connect_isolated_pair(&postgres_url())
                        .await
                        .expect("two stores on one schema");
                    super::$case(&first, &second).await;
                }
            )*
        };
    }

    two_workers! {
        sqlite_outbox_two_workers_never_claim_one_row,
        postgres_outbox_two_workers_never_claim_one_row => outbox_two_workers_never_claim_one_row;
        sqlite_outbox_two_workers_keep_each_contacts_order,
        postgres_outbox_two_workers_keep_each_contacts_order => outbox_two_workers_keep_each_contacts_order;
        sqlite_spec_025_two_workers_claim_a_due_nudge_once,
        postgres_spec_025_two_workers_claim_a_due_nudge_once => spec_025_two_workers_claim_a_due_nudge_once;
        sqlite_spec_031_two_workers_claim_a_due_window_closing_once,
        postgres_spec_031_two_workers_claim_a_due_window_closing_once => spec_031_two_workers_claim_a_due_window_closing_once;
    }
}
