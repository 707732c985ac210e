//! Conformance: the sales record and the opening's claim (`SalesStore`).

use super::*;

/// `sales_record` holds the stored offering with its time and every bound agent turn's
/// action record that holds an entry, oldest first; user turns, turns that offered no tool,
/// `[]` records and unbound turns (019) are left out, as are other conversations'.
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
    let agent = |id, text, outcome, bound, at| NewTurn::agent(id, text, outcome, bound, at_s(at));
    let inline = "answered_inline";
    record(store, NewTurn::user(conversation.id, "q", true, at_s(1))).await;
    for turn in [
        with_actions(intent.clone(), agent(conversation.id, "a", inline, true, 2)),
        with_actions(json!([]), agent(conversation.id, "b", inline, true, 3)),
        agent(conversation.id, "c", inline, true, 4),
    ] {
        record(store, turn).await;
    }
    let staged = with_actions(
        stage.clone(),
        agent(conversation.id, "d", "deferred", true, 5),
    );
    let later = record(store, staged).await;
    // A turn whose token was wrong or missing: its own writes are not the contact's record.
    record(
        store,
        with_actions(
            intent.clone(),
            agent(conversation.id, "u", inline, false, 6),
        ),
    )
    .await;
    record(
        store,
        with_actions(intent.clone(), agent(other.id, "e", inline, true, 6)),
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
        "bound agent turns with entries only, oldest first, as updated"
    );
    assert_eq!(
        stored_conversation(store, conversation.id)
            .await
            .offering
            .as_deref(),
        Some("invented-offering")
    );
    assert!(
        store.set_offering(Uuid::new_v4(), "x", t0()).await.is_err(),
        "an unknown conversation is an error"
    );
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
    let read = stored_conversation(store, conversation.id).await;
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
