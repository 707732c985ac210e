//! Conformance: conversations and their contact tokens (`ConversationStore`).

use super::*;

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
