//! Conformance: conversations and their contact tokens (`ConversationStore`).

use super::*;
use crate::store::HoldRelease;

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
    let stored = stored_conversation(store, conversation.id).await;
    assert_eq!(stored.escalated_at, Some(at_s(30)));
    assert_eq!(stored.updated_at, at_s(30));
}

/// C4: a conversation starts with no fence nonce; the one stored is read back with the row, and
/// a rotation replaces it.
pub async fn system_4_the_conversations_fence_nonce_is_stored_and_replaced(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    assert_eq!(conversation.fence_nonce, None);
    store
        .set_fence_nonce(conversation.id, "0123456789abcdef")
        .await
        .expect("set_fence_nonce");
    let stored = stored_conversation(store, conversation.id).await;
    assert_eq!(stored.fence_nonce.as_deref(), Some("0123456789abcdef"));
    store
        .set_fence_nonce(conversation.id, "fedcba9876543210")
        .await
        .expect("set_fence_nonce");
    let by_subscriber = store
        .conversation_by_subscriber(&conversation.subscriber_id)
        .await
        .expect("conversation_by_subscriber")
        .expect("row");
    assert_eq!(
        by_subscriber.fence_nonce.as_deref(),
        Some("fedcba9876543210")
    );
}

pub async fn token_rotation_keeps_previous(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    // Each write: the generation it returns, and the token it makes previous.
    let writes = [
        ("hash-one", at_s(10), 1, None),
        ("hash-two", at_s(20), 2, Some("hash-one")),
    ];
    for (hash, issued_at, generation, previous) in writes {
        let written = store
            .set_token(conversation.id, hash, issued_at)
            .await
            .expect("set_token");
        assert_eq!(written, generation);
        let stored = stored_conversation(store, conversation.id).await;
        assert_eq!(stored.token_hash.as_deref(), Some(hash));
        assert_eq!(stored.previous_token_hash.as_deref(), previous);
        assert_eq!(stored.token_issued_at, Some(issued_at));
        assert_eq!(stored.token_generation, generation);
    }
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

/// The handoff that holds: a release is recorded on the row (time, reason, note due), once per
/// hold; a newer handoff is not released by a release meant for an older one.
pub async fn handoff_release_is_recorded_once_per_hold(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    assert!(
        !release(store, conversation.id, (at_s(30), at_s(40)), "released").await,
        "never handed over: nothing to release"
    );
    store
        .set_escalated(conversation.id, at_s(30))
        .await
        .expect("set_escalated");
    assert!(
        !release(store, conversation.id, (at_s(20), at_s(40)), "released").await,
        "a release for an older handoff does not release the newer hold"
    );
    assert!(release(store, conversation.id, (at_s(30), at_s(40)), "tag_removed").await);
    let stored = store
        .conversation(conversation.id)
        .await
        .expect("conversation")
        .expect("row");
    assert_eq!(stored.hold_released_at, Some(at_s(40)));
    assert_eq!(stored.hold_release_reason.as_deref(), Some("tag_removed"));
    assert!(stored.hold_note_due);
    assert!(
        !release(store, conversation.id, (at_s(30), at_s(50)), "released").await,
        "released already (another replica, the CLI)"
    );
    store.hold_noted(conversation.id).await.expect("hold_noted");
    let noted = store
        .conversation(conversation.id)
        .await
        .expect("conversation")
        .expect("row");
    assert!(!noted.hold_note_due);
    assert_eq!(noted.hold_released_at, Some(at_s(40)), "the release stays");

    // A new handoff starts a new hold, which can be released in its turn.
    store
        .set_escalated(conversation.id, at_s(60))
        .await
        .expect("set_escalated");
    assert!(release(store, conversation.id, (at_s(60), at_s(70)), "hold_expired").await);
}

/// A handoff from outside a turn happens once: of two holds that read the same conversation,
/// one sets the handoff time and queues its handoff row in the same write; the other writes
/// nothing. A hold that read an older handoff also loses to a newer one.
pub async fn handoff_a_hold_from_outside_a_turn_happens_once(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let handoff = NewOutboxRow {
        kind: OutboxKind::Handoff,
        payload: json!({"actions": [], "turnId": null, "fallback": false}),
        ..reply_row(&conversation, at_s(100), 0)
    };
    let first = store.hold_with_handoff(conversation.id, None, at_s(100), Some(&handoff));
    assert!(first.await.expect("the first hold"));
    let second = store.hold_with_handoff(conversation.id, None, at_s(101), Some(&handoff));
    assert!(
        !second.await.expect("the second hold"),
        "a second hold on the same read"
    );
    let read = store.conversation(conversation.id).await.expect("read");
    assert_eq!(read.expect("the row").escalated_at, Some(at_s(100)));
    let queued = |rows: Vec<OutboxRow>| {
        rows.iter()
            .filter(|r| r.conversation_id == conversation.id && r.kind == OutboxKind::Handoff)
            .count()
    };
    assert_eq!(queued(store.outbox_rows().await.expect("rows")), 1);

    // Released, then held again on what was read: one hold, then a stale one.
    release(store, conversation.id, (at_s(100), at_s(200)), "released").await;
    let again = store.hold_with_handoff(conversation.id, Some(at_s(100)), at_s(300), None);
    assert!(again.await.expect("a new hold"));
    let stale = store.hold_with_handoff(conversation.id, Some(at_s(100)), at_s(301), None);
    assert!(!stale.await.expect("a stale hold"));
    let read = store.conversation(conversation.id).await.expect("read");
    assert_eq!(read.expect("the row").escalated_at, Some(at_s(300)));
    assert_eq!(queued(store.outbox_rows().await.expect("rows")), 1);
    settle(store, &[conversation.id]).await;
}

/// Contacts held now: handed over after `since` and not released since; the console's test
/// contacts are not customers waiting for a person, and are not counted.
pub async fn handoff_held_contacts_counts_unreleased_recent_handoffs(store: &dyn Store) {
    let base = store
        .held_contacts(at_s(1_000))
        .await
        .expect("held_contacts");
    let held = fresh_conversation(store).await;
    let released = fresh_conversation(store).await;
    let old = fresh_conversation(store).await;
    let test_contact = store
        .conversation_for(&SubscriberId::new_test_contact(), "whatsapp", t0())
        .await
        .expect("conversation_for");
    for (c, at) in [
        (&held, 2_000),
        (&released, 2_000),
        (&old, 500),
        (&test_contact, 2_000),
    ] {
        store
            .set_escalated(c.id, at_s(at))
            .await
            .expect("set_escalated");
    }
    release(store, released.id, (at_s(2_000), at_s(2_100)), "released").await;
    assert_eq!(
        store
            .held_contacts(at_s(1_000))
            .await
            .expect("held_contacts")
            - base,
        1
    );
}

/// The release history: every released hold is a row (the conversation keeps only the latest),
/// read back by release time in `[from, until)`, oldest first; a refused release adds none.
pub async fn handoff_every_release_is_kept_in_the_history(store: &dyn Store) {
    // A stretch of time no other case releases in.
    let base = 500_000;
    let conversation = fresh_conversation(store).await;
    for (handoff, released, reason) in [
        (base, base + 3_600, "released"),
        (base + 7_200, base + 9_000, "tag_removed"),
    ] {
        store
            .set_escalated(conversation.id, at_s(handoff))
            .await
            .expect("set_escalated");
        let hold = (at_s(handoff), at_s(released));
        assert!(release(store, conversation.id, hold, reason).await);
    }
    assert!(
        !store
            .release_hold(
                conversation.id,
                at_s(base + 7_200),
                at_s(base + 9_500),
                "released"
            )
            .await
            .expect("release_hold"),
        "released already"
    );
    let history = store
        .hold_releases(at_s(base), at_s(base + 10_000))
        .await
        .expect("hold_releases");
    assert_eq!(
        history,
        vec![
            HoldRelease {
                held_since: at_s(base),
                released_at: at_s(base + 3_600),
                reason: "released".into(),
            },
            HoldRelease {
                held_since: at_s(base + 7_200),
                released_at: at_s(base + 9_000),
                reason: "tag_removed".into(),
            },
        ],
        "both holds, oldest first; the refused release is not there"
    );
    let later = store
        .hold_releases(at_s(base + 3_601), at_s(base + 9_000))
        .await
        .expect("hold_releases");
    assert!(later.is_empty(), "`until` is excluded: {later:?}");
}
