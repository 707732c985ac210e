//! Conformance: nudges (`NudgeStore`, 025).

use super::*;
use crate::store::Nudge;

/// A charge of 50 tokens and 0.5 USD on `day`.
fn fifty_tokens(day: NaiveDate) -> BudgetCharge {
    BudgetCharge {
        day,
        tokens: 50,
        cost_usd: 0.5,
    }
}

/// Whether settling `nudge` as `status` at `now` took (it was still running under its claim).
async fn settled(
    store: &dyn Store,
    nudge: &Nudge,
    status: NudgeStatus,
    now: DateTime<Utc>,
) -> bool {
    let settled = store.settle_nudge(nudge, status, None, now).await;
    settled.expect("settle")
}

/// Whether settling the window closing `claimed` as `status` took.
async fn closing_settled(
    store: &dyn Store,
    claimed: &WindowClosing,
    status: WindowClosingStatus,
    reason: Option<&str>,
    attempts: i64,
    now: DateTime<Utc>,
) -> bool {
    let settled = store
        .settle_window_closing(claimed, status, reason, attempts, now)
        .await;
    settled.expect("settle")
}

/// Schedules `conversation`'s nudge `delay`, due at `due`, at `at`.
async fn schedule(
    store: &dyn Store,
    conversation: ConversationId,
    delay: &str,
    due: DateTime<Utc>,
    at: DateTime<Utc>,
) {
    store
        .schedule_nudge(conversation, delay, due, at)
        .await
        .expect("schedule");
}

/// `conversation`'s latest nudge row.
async fn nudge_of(store: &dyn Store, conversation: ConversationId) -> Nudge {
    let read = store.nudge(conversation).await.expect("read");
    read.expect("a row")
}

/// The status of `conversation`'s window-closing row, if it has one.
async fn closing_status(
    store: &dyn Store,
    conversation: ConversationId,
) -> Option<WindowClosingStatus> {
    let read = store.window_closing(conversation).await.expect("read");
    read.map(|r| r.status)
}

/// 025 verification 2: scheduling twice leaves one pending row, the later one; scheduling after
/// a settled nudge adds a pending one (a new silence) and keeps the settled one.
pub async fn spec_025_scheduling_twice_leaves_one_pending_row(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    schedule(store, conversation.id, "later_today", at_s(7200), at_s(0)).await;
    schedule(store, conversation.id, "tomorrow", at_s(72_000), at_s(10)).await;
    let nudge = nudge_of(store, conversation.id).await;
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
    let nudge = nudge_of(store, conversation.id).await;
    assert_eq!(nudge.status, NudgeStatus::Cancelled);
    assert_eq!(nudge.reason.as_deref(), Some("contact_replied"));
    assert!(
        !store
            .cancel_nudge(conversation.id, "contact_replied", at_s(21))
            .await
            .expect("cancel again"),
        "a settled nudge is not cancelled twice"
    );
    schedule(store, conversation.id, "later_today", at_s(9000), at_s(30)).await;
    let nudge = nudge_of(store, conversation.id).await;
    assert_eq!((nudge.status, nudge.reason), (NudgeStatus::Pending, None));
    assert_eq!(store.nudges(conversation.id).await.expect("read").len(), 2);
    store
        .cancel_nudge(conversation.id, "contact_replied", at_s(31))
        .await
        .expect("settle");
}

/// SALES 3 (025): one *pending* nudge per conversation, every other row kept as the record. A
/// nudge cancelled `contact_replied`, then one sent, stay beside the pending one the same
/// conversation schedules next; only the pending one is replaced by a later schedule.
pub async fn spec_025_a_settled_nudge_stays_as_the_record_beside_the_next_pending_one(
    store: &dyn Store,
) {
    let conversation = fresh_conversation(store).await;
    let states = |nudges: Vec<crate::store::Nudge>| -> Vec<(String, NudgeStatus, Option<String>)> {
        nudges
            .into_iter()
            .map(|n| (n.delay_id, n.status, n.reason))
            .collect()
    };
    schedule(store, conversation.id, "later_today", at_s(7200), at_s(0)).await;
    // The contact replies: the pending nudge is cancelled, and the same turn schedules the next.
    assert!(
        store
            .cancel_nudge(conversation.id, "contact_replied", at_s(100))
            .await
            .expect("cancel")
    );
    schedule(store, conversation.id, "tomorrow", at_s(90_000), at_s(100)).await;
    // That one is claimed when due and sent.
    let claimed = store
        .claim_due_nudges(at_s(90_000), 100)
        .await
        .expect("claim");
    let mine: Vec<&crate::store::Nudge> = claimed
        .iter()
        .filter(|n| n.conversation_id == conversation.id)
        .collect();
    assert_eq!(mine.len(), 1, "one pending row to claim");
    assert!(settled(store, mine[0], NudgeStatus::Sent, at_s(90_001)).await);
    // A new silence: scheduled, then rescheduled before it is due.
    schedule(
        store,
        conversation.id,
        "later_today",
        at_s(97_200),
        at_s(90_010),
    )
    .await;
    schedule(
        store,
        conversation.id,
        "tomorrow",
        at_s(180_000),
        at_s(90_020),
    )
    .await;
    assert_eq!(
        states(store.nudges(conversation.id).await.expect("read")),
        vec![
            (
                "later_today".to_owned(),
                NudgeStatus::Cancelled,
                Some("contact_replied".to_owned())
            ),
            ("tomorrow".to_owned(), NudgeStatus::Sent, None),
            ("tomorrow".to_owned(), NudgeStatus::Pending, None),
        ]
    );
    let latest = nudge_of(store, conversation.id).await;
    assert_eq!(
        (latest.status, latest.due_at, latest.scheduled_at),
        (NudgeStatus::Pending, at_s(180_000), at_s(90_020))
    );
    store
        .cancel_nudge(conversation.id, "contact_replied", at_s(90_030))
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
    assert!(settled(store, &first[0], NudgeStatus::Sent, now).await);
    assert!(
        !settled(store, &first[0], NudgeStatus::Skipped, now).await,
        "a settled row is not settled again"
    );
    // An inbound message cancels a running nudge: its worker's settle then finds it gone.
    assert!(
        store
            .cancel_nudge(mine[2], "contact_replied", now)
            .await
            .expect("cancel running")
    );
    assert!(!settled(store, &first[1], NudgeStatus::Sent, now).await);
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
        !settled(store, &second[0], NudgeStatus::Sent, later).await,
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
            charge: Some(fifty_tokens(day)),
            outbox: std::slice::from_ref(&row),
            now,
        })
        .await
        .expect("record_nudge_turn")
        .expect("written under its claim");
    let nudge = store.nudge(conversations[0].id).await.expect("read");
    assert_eq!(nudge.map(|n| n.status), Some(NudgeStatus::Sent));
    let turns = stored_turns(store, conversations[0].id).await;
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
    let after = stored_conversation(store, conversations[0].id).await;
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
                charge: Some(fifty_tokens(day)),
                outbox: std::slice::from_ref(&row),
                now,
            })
            .await
            .expect("record_nudge_turn");
        assert_eq!(written, None, "no claim, no write");
        assert!(stored_turns(store, conversation.id).await.is_empty());
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

// --- 031: the window-closing flow ---------------------------------------------------------------

/// A claim at `now` with 031's bounds: due at the last message plus 1380 minutes, the window
/// open until plus 1440, a failed send tried again after a minute.
fn closing_claim(now: DateTime<Utc>) -> WindowClosingClaim {
    WindowClosingClaim {
        now,
        due_before: now - chrono::Duration::minutes(1380),
        open_after: now - chrono::Duration::minutes(1440),
        retry_before: now - chrono::Duration::minutes(1),
        limit: 100,
    }
}

async fn claimed_for(
    store: &dyn Store,
    now: DateTime<Utc>,
    conversation: ConversationId,
) -> Option<WindowClosing> {
    store
        .claim_window_closings(closing_claim(now))
        .await
        .expect("claim")
        .into_iter()
        .find(|c| c.conversation_id == conversation)
}

/// The contact wrote at `at`; 1380 minutes later its row is not claimed again.
async fn assert_a_new_silence_is_not_claimed(
    store: &dyn Store,
    conversation: ConversationId,
    at: DateTime<Utc>,
) {
    wrote(store, conversation, at).await;
    let due = at + chrono::Duration::minutes(1380);
    assert_eq!(claimed_for(store, due, conversation).await, None);
}

/// Whether skipping the window closing `claimed` as `escalated` at `now` took.
async fn closing_skipped_as_escalated(
    store: &dyn Store,
    claimed: &WindowClosing,
    now: DateTime<Utc>,
) -> bool {
    let skipped = WindowClosingStatus::Skipped;
    closing_settled(store, claimed, skipped, Some("escalated"), 0, now).await
}

/// The window closings a worker claims at `now`.
async fn claim_closings(store: &dyn Store, now: DateTime<Utc>) -> Vec<WindowClosing> {
    let claimed = store.claim_window_closings(closing_claim(now)).await;
    claimed.expect("claim")
}

/// Fresh contacts, each last written at its time in `last`.
async fn silent_contacts<const N: usize>(
    store: &dyn Store,
    last: [DateTime<Utc>; N],
) -> [Conversation; N] {
    let mut contacts = Vec::new();
    for at in last {
        let contact = fresh_conversation(store).await;
        wrote(store, contact.id, at).await;
        contacts.push(contact);
    }
    contacts
        .try_into()
        .unwrap_or_else(|_| unreachable!("one contact per time"))
}

async fn wrote(store: &dyn Store, conversation: ConversationId, at: DateTime<Utc>) {
    store
        .record_turn(&NewTurn::user(conversation, "hello", false, at))
        .await
        .expect("record_turn");
}

/// 031: claimed at the last message plus 1380 minutes (not before, not once the window
/// closed), once; a failed send is claimed again after its wait; a `contact_replied` release
/// makes the contact due again from its new message; a sent row is never claimed again, nor a
/// skipped one.
pub async fn spec_031_window_closing_is_claimed_once_per_contact_from_its_last_message(
    store: &dyn Store,
) {
    // Far from the other cases' messages: their contacts are never due here.
    let base = at_s(90_000_000);
    let minutes = |n: i64| base + chrono::Duration::minutes(n);
    let [contact, stale, skipped] =
        silent_contacts(store, [base, base - chrono::Duration::days(2), base]).await;

    assert_eq!(claimed_for(store, minutes(1379), contact.id).await, None);
    let first = claim_closings(store, minutes(1380)).await;
    let of = |id: ConversationId| first.iter().find(|c| c.conversation_id == id).cloned();
    let claimed = of(contact.id).expect("due at +1380 min");
    let other = of(skipped.id).expect("due at +1380 min");
    assert_eq!(claimed.status, WindowClosingStatus::Running);
    assert_eq!(claimed.last_inbound_at, base);
    assert_eq!(claimed.attempts, 0);
    assert_eq!(claimed_for(store, minutes(1381), contact.id).await, None);
    assert_eq!(claimed_for(store, minutes(1381), stale.id).await, None);

    // A failed send: tried again a minute after it was settled.
    assert!(
        closing_settled(
            store,
            &claimed,
            WindowClosingStatus::Retry,
            None,
            1,
            minutes(1381)
        )
        .await
    );
    let retry = |now| claimed_for(store, now, contact.id);
    assert_eq!(retry(minutes(1381)).await, None);
    let again = retry(minutes(1382)).await.expect("claimed again");
    assert_eq!(
        (again.status, again.attempts),
        (WindowClosingStatus::Running, 1)
    );
    assert!(
        !closing_settled(
            store,
            &claimed,
            WindowClosingStatus::Retry,
            None,
            2,
            minutes(1382)
        )
        .await,
        "the first claim no longer holds"
    );

    // The contact wrote: released, due again from the new message.
    wrote(store, contact.id, minutes(1390)).await;
    assert!(store.release_window_closing(&again).await.expect("release"));
    assert_eq!(store.window_closing(contact.id).await.expect("read"), None);
    assert_eq!(
        claimed_for(store, minutes(1390 + 1379), contact.id).await,
        None
    );
    let due = claimed_for(store, minutes(1390 + 1380), contact.id)
        .await
        .expect("due again");
    assert_eq!(due.last_inbound_at, minutes(1390));

    // Sent, with its turn, in one write; never claimed again.
    let turn = NewTurn::agent(
        contact.id,
        "",
        "window_closing_sent",
        true,
        minutes(1390 + 1380),
    );
    let turn_id = store
        .record_window_closing(&due, &turn, 0)
        .await
        .expect("record")
        .expect("under its claim");
    assert!(
        store
            .record_window_closing(&due, &turn, 0)
            .await
            .expect("record again")
            .is_none(),
        "a sent row is not written twice"
    );
    let row = store
        .window_closing(contact.id)
        .await
        .expect("read")
        .unwrap();
    assert_eq!(row.status, WindowClosingStatus::Sent);
    let turns = store.turns(contact.id).await.expect("turns");
    let recorded = turns.iter().find(|t| t.id == turn_id).expect("the turn");
    assert_eq!(recorded.outcome.as_deref(), Some("window_closing_sent"));
    assert_a_new_silence_is_not_claimed(store, contact.id, minutes(5000)).await;

    // A skip other than contact_replied is final.
    assert!(closing_skipped_as_escalated(store, &other, minutes(1380)).await);
    let row = store
        .window_closing(skipped.id)
        .await
        .expect("read")
        .unwrap();
    assert_eq!(
        (row.status, row.reason.as_deref()),
        (WindowClosingStatus::Skipped, Some("escalated"))
    );
    assert_a_new_silence_is_not_claimed(store, skipped.id, minutes(3000)).await;
}

/// 031: a row left `running` by a process that died is marked `lost` once its claim is older
/// than the cutoff (not at it), with `process_died`; it is then settled by nobody, never claimed
/// again, also after a new silence (it counts as sent). A row claimed after the cutoff, and a
/// row waiting to retry, are left alone.
pub async fn spec_031_a_window_closing_left_running_is_marked_lost_and_counts_as_sent(
    store: &dyn Store,
) {
    // Far from the other cases' messages: their contacts are never due here.
    let base = at_s(100_000_000);
    let minutes = |n: i64| base + chrono::Duration::minutes(n);
    let [died, retrying, live] = silent_contacts(store, [base, base, minutes(5)]).await;

    let claimed = claim_closings(store, minutes(1380)).await;
    let of = |id: ConversationId| claimed.iter().find(|c| c.conversation_id == id).cloned();
    let dead = of(died.id).expect("due at +1380 min");
    let retry = of(retrying.id).expect("due at +1380 min");
    let alive = claimed_for(store, minutes(1385), live.id)
        .await
        .expect("due at +1380 min");
    assert!(
        closing_settled(
            store,
            &retry,
            WindowClosingStatus::Retry,
            None,
            1,
            minutes(1385)
        )
        .await
    );

    let lost = |cutoff| store.mark_lost_window_closings(cutoff, minutes(1383));
    assert!(
        !lost(minutes(1380)).await.expect("lost").contains(&died.id),
        "claimed at the cutoff: not yet lost"
    );
    let marked = lost(minutes(1381)).await.expect("lost");
    assert!(
        marked.contains(&died.id),
        "the lost row's conversation, for its log line"
    );
    assert!(!marked.contains(&retrying.id), "a retry is not running");
    assert!(!marked.contains(&live.id), "claimed after the cutoff");
    let row = store
        .window_closing(died.id)
        .await
        .expect("read")
        .expect("the row stays");
    assert_eq!(
        (row.status, row.reason.as_deref()),
        (WindowClosingStatus::Lost, Some("process_died"))
    );
    assert_eq!(
        closing_status(store, retrying.id).await,
        Some(WindowClosingStatus::Retry)
    );
    assert_eq!(
        closing_status(store, live.id).await,
        Some(WindowClosingStatus::Running)
    );
    assert!(
        !lost(minutes(1381)).await.expect("lost").contains(&died.id),
        "marked once"
    );

    // The dead claim no longer holds: nothing is written under it.
    let turn = NewTurn::agent(died.id, "", "window_closing_sent", false, minutes(1384));
    assert!(
        store
            .record_window_closing(&dead, &turn, 0)
            .await
            .expect("record")
            .is_none()
    );
    assert!(
        !closing_settled(
            store,
            &dead,
            WindowClosingStatus::Retry,
            None,
            1,
            minutes(1384)
        )
        .await
    );
    assert!(!store.release_window_closing(&dead).await.expect("release"));
    // Never claimed again, nor after a new silence: it counts as sent.
    let again = claim_closings(store, minutes(1400)).await;
    assert!(again.iter().all(|c| c.conversation_id != died.id));
    let retried = again
        .iter()
        .find(|c| c.conversation_id == retrying.id)
        .expect("the retry is claimed again");
    assert!(
        closing_settled(
            store,
            retried,
            WindowClosingStatus::GivenUp,
            None,
            2,
            minutes(1400)
        )
        .await
    );
    assert_a_new_silence_is_not_claimed(store, died.id, minutes(3000)).await;
    assert!(closing_skipped_as_escalated(store, &alive, minutes(1386)).await);
}

/// 031: two workers claiming at once take each due contact once.
pub async fn spec_031_two_workers_claim_a_due_window_closing_once(a: &dyn Store, b: &dyn Store) {
    let base = at_s(95_000_000);
    let mut expected = HashSet::new();
    for _ in 0..12 {
        let conversation = fresh_conversation(a).await;
        wrote(a, conversation.id, base).await;
        expected.insert(conversation.id);
    }
    let now = base + chrono::Duration::minutes(1400);
    let (from_a, from_b) = tokio::join!(
        a.claim_window_closings(closing_claim(now)),
        b.claim_window_closings(closing_claim(now))
    );
    let mut seen = HashSet::new();
    for claimed in from_a.expect("claim").iter().chain(&from_b.expect("claim")) {
        assert!(
            seen.insert(claimed.conversation_id),
            "{} was claimed twice",
            claimed.conversation_id
        );
    }
    assert_eq!(seen, expected, "every due contact was claimed");
}
