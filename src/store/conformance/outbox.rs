//! Conformance: the outbox (`OutboxStore`): claims, leases, order, pacing, settling.

use super::*;

/// Row `id` failed and is due again at `at`, with `error`.
async fn retry_at(store: &dyn Store, id: i64, at: DateTime<Utc>, error: &str) {
    let marked = store.mark_retry(id, at, error).await;
    marked.expect("mark_retry");
}

/// Row `id` was delivered at `at`.
async fn delivered_at(store: &dyn Store, id: i64, at: DateTime<Utc>) {
    let marked = store.mark_delivered(id, at).await;
    marked.expect("mark_delivered");
}

/// A fresh conversation with one reply due at 0: the conversation and the row's id.
async fn fresh_reply(store: &dyn Store) -> (Conversation, i64) {
    let conversation = fresh_conversation(store).await;
    let id = enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    (conversation, id)
}

/// [`fresh_reply`], claimed at 0 (the only row that claim takes).
async fn claimed_reply(store: &dyn Store) -> (Conversation, i64) {
    let (conversation, id) = fresh_reply(store).await;
    assert_eq!(claim(store, rules(at_s(0), 10)).await, vec![id]);
    (conversation, id)
}

/// Claims under `rules`, which must take `id` alone (`why`) for its second attempt.
async fn claimed_again(store: &dyn Store, rules: ClaimRules, id: i64, why: &str) -> OutboxRow {
    let claimed = store.claim_outbox(rules).await.expect("claim");
    assert_eq!(
        claimed.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![id],
        "{why}"
    );
    assert_eq!(claimed[0].attempts, 2, "{why}: the second attempt");
    claimed.into_iter().next().expect("one row")
}

/// `count` fresh contacts with one reply each, due at 0, in that order: their conversations
/// and the rows' ids.
async fn replies_of_fresh_contacts(
    store: &dyn Store,
    count: i64,
) -> (Vec<ConversationId>, Vec<i64>) {
    let mut conversations = Vec::new();
    let mut ids = Vec::new();
    for i in 0..count {
        let conversation = fresh_conversation(store).await;
        ids.push(enqueue(store, reply_row(&conversation, at_s(0), i)).await);
        conversations.push(conversation.id);
    }
    (conversations, ids)
}

/// A handoff row waits behind an earlier open reply of its contact (its text comes
/// first), as a reply does.
pub async fn outbox_handoff_waits_behind_an_open_reply(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let row = |kind, payload| NewOutboxRow::of(&conversation, kind, payload, at_s(10));
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
    let (conversation, id) = fresh_reply(store).await;
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
    let (conversations, ids) = replies_of_fresh_contacts(store, 3).await;
    assert_eq!(claim(store, rules(at_s(1), 2)).await, ids[..2].to_vec());
    assert_eq!(claim(store, rules(at_s(1), 2)).await, ids[2..].to_vec());
    settle(store, &conversations).await;
}

/// The backlog counts open rows (pending and delivering, not delivered
/// or dead-lettered) up to the cap, and names the earliest due time only when it is due.
pub async fn outbox_backlog_counts_open_rows_up_to_the_cap(store: &dyn Store) {
    let backlog = |now, cap| async move { store.outbox_backlog(now, cap).await.expect("backlog") };
    assert_eq!(
        backlog(at_s(0), 100).await,
        crate::store::OutboxBacklog::default()
    );
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
        crate::store::OutboxBacklog {
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
        crate::store::OutboxBacklog {
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
    let (conversations, ids) = replies_of_fresh_contacts(a, 20).await;
    let expected: HashSet<i64> = ids.into_iter().collect();
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
    retry_at(store, first, at_s(30), "http 503").await;
    assert!(
        claim(store, rules(at_s(10), 10)).await.is_empty(),
        "the newer reply waits while the older is pending, even when the older is not due"
    );
    assert_eq!(claim(store, rules(at_s(30), 10)).await, vec![first]);
    delivered_at(store, first, at_s(31)).await;
    assert_eq!(claim(store, rules(at_s(40), 10)).await, vec![second]);
    settle(store, &[conversation.id]).await;
}

pub async fn outbox_contact_token_rows_are_not_held_behind_replies(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let reply = enqueue(store, reply_row(&conversation, at_s(0), 1)).await;
    assert_eq!(claim(store, rules(at_s(1), 10)).await, vec![reply]);
    let token = enqueue(store, token_row(&conversation, at_s(1))).await;
    assert_eq!(claim(store, rules(at_s(2), 10)).await, vec![token]);
    delivered_at(store, reply, at_s(3)).await;
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
    delivered_at(store, first, at_s(5)).await;
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
    let reclaimed = claimed_again(
        store,
        lease(at_s(30)),
        first,
        "the expired row is taken again, and still holds back the newer reply",
    )
    .await;
    assert_eq!(reclaimed.lease_until, Some(at_s(60)));
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
    delivered_at(store, second, at_s(4)).await;
    assert!(
        !claim(store, rules(at_s(86_400 * 365), 10))
            .await
            .contains(&first),
        "never claimed again, however late"
    );
    settle(store, &[conversation.id]).await;
}

pub async fn outbox_retry_due_later(store: &dyn Store) {
    let (conversation, id) = claimed_reply(store).await;
    retry_at(store, id, at_s(4), "http 503").await;
    let retried = row(store, id).await;
    assert_eq!(retried.status, OutboxStatus::Pending);
    assert_eq!(retried.next_attempt_at, at_s(4));
    assert_eq!(retried.last_error.as_deref(), Some("http 503"));
    assert_eq!(retried.lease_until, None);
    assert_eq!(retried.attempts, 1);

    assert!(claim(store, rules(at_ms(3_999), 10)).await.is_empty());
    claimed_again(store, rules(at_s(4), 10), id, "the retry is due").await;
    settle(store, &[conversation.id]).await;
}

pub async fn outbox_last_error_is_bounded(store: &dyn Store) {
    let (conversation, id) = fresh_reply(store).await;
    store
        .mark_retry(id, at_s(4), &"é".repeat(5000))
        .await
        .expect("mark_retry");
    let stored = row(store, id).await.last_error.expect("an error is kept");
    assert_eq!(
        stored.chars().count(),
        crate::store::common::MAX_ERROR_CHARS
    );
    settle(store, &[conversation.id]).await;
}

pub async fn outbox_delivered_row_is_done(store: &dyn Store) {
    let (conversation, id) = claimed_reply(store).await;
    delivered_at(store, id, at_s(3)).await;
    let delivered = row(store, id).await;
    assert_eq!(delivered.status, OutboxStatus::Delivered);
    assert_eq!(delivered.delivered_at, Some(at_s(3)));
    assert_eq!(delivered.lease_until, None);
    assert!(!claim(store, rules(at_s(86_400), 10)).await.contains(&id));
    settle(store, &[conversation.id]).await;
}

/// Under a backlog a reply is taken before a deferrable `contact_token` write,
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

/// The live worker renews the leases of the rows it holds, so a short lease
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
    delivered_at(store, done, at_s(1)).await;
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
    claimed_again(
        store,
        short(at_s(18)),
        held,
        "once renewals stop, the row is taken again when the lease lapses",
    )
    .await;
    settle(store, &[conversation.id, other.id]).await;
}

/// How far a delivery got (messages accepted, unanswered triggers) starts at
/// zero and is kept across a retry and a lapsed lease.
pub async fn outbox_delivery_progress_is_kept_across_retries(store: &dyn Store) {
    let (conversation, id) = fresh_reply(store).await;
    let fresh = row(store, id).await;
    assert_eq!((fresh.messages_delivered, fresh.trigger_timeouts), (0, 0));
    assert_eq!(claim(store, rules(at_s(0), 10)).await, vec![id]);
    store
        .record_outbox_progress(id, 1, 1)
        .await
        .expect("record_outbox_progress");
    retry_at(store, id, at_s(2), "timed out").await;
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
    delivered_at(store, delivered, at_s(2)).await;
    store
        .mark_failed(failed, "http 400", at_s(2))
        .await
        .expect("mark_failed");
    retry_at(store, retried, at_s(10), "http 503").await;
    delivered_at(store, reply, at_s(2)).await;

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

/// 019: a request carrying generation 2's token settles, without a request, the conversation's
/// pending `contact_token` rows of generation 2 and older (their plain tokens removed); a newer
/// generation's row, a row being delivered, another conversation's row and reply rows are left.
pub async fn contact_token_rows_are_settled_when_a_request_proves_the_token(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let other = fresh_conversation(store).await;
    let token_of = |conversation: &Conversation, generation: i64, due_s: i64| NewOutboxRow {
        payload: json!({"generation": generation, "token": format!("tok-{generation}-0000")}),
        ..token_row(conversation, at_s(0)).due_at(at_s(due_s))
    };
    let delivering = enqueue(store, token_of(&conversation, 1, 0)).await;
    assert_eq!(claim(store, rules(at_s(1), 10)).await, vec![delivering]);
    let older = enqueue(store, token_of(&conversation, 1, 60)).await;
    let proven = enqueue(store, token_of(&conversation, 2, 60)).await;
    let newer = enqueue(store, token_of(&conversation, 3, 60)).await;
    let others = enqueue(store, token_of(&other, 2, 60)).await;
    let reply = enqueue(store, reply_row(&conversation, at_s(0), 7)).await;

    let settled = store
        .settle_contact_tokens(conversation.id, 2, at_s(5))
        .await
        .expect("settle_contact_tokens");
    assert_eq!(settled, 2);
    for id in [older, proven] {
        let row = row(store, id).await;
        assert_eq!(row.status, OutboxStatus::Delivered);
        assert_eq!(row.delivered_at, Some(at_s(5)));
        assert!(row.payload.get("token").is_none(), "{:?}", row.payload);
    }
    for id in [newer, others, reply] {
        assert_eq!(row(store, id).await.status, OutboxStatus::Pending);
    }
    assert_eq!(
        row(store, delivering).await.status,
        OutboxStatus::Delivering
    );
    assert_eq!(
        row(store, newer).await.payload["token"],
        json!("tok-3-0000"),
        "a newer token still awaits its write"
    );
    settle(store, &[conversation.id, other.id]).await;
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
    delivered_at(store, first, at_s(2)).await;
    assert_eq!(count().await, 1);
    store
        .mark_failed(second, "http 400", at_s(2))
        .await
        .expect("mark_failed");
    assert_eq!(count().await, 0);
    settle(store, &[conversation.id, other.id]).await;
}
