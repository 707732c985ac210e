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
