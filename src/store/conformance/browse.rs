//! Conformance: the owner's console views (`BrowseStore`), paged by keyset.

use super::*;
use crate::store::{ConversationsPage, TurnsPage};

/// A stretch of time no other case writes in (about 463 days after `t0`).
const BASE: i64 = 40_000_000;

async fn contact_at(store: &dyn Store, subscriber: &SubscriberId, at: i64) -> Conversation {
    let conversation = store
        .conversation_for(subscriber, "whatsapp", at_s(at))
        .await
        .expect("conversation_for");
    record(
        store,
        NewTurn::user(conversation.id, "Invented message", true, at_s(at)),
    )
    .await;
    conversation
}

async fn page(
    store: &dyn Store,
    after: Option<&Conversation>,
    limit: u32,
    test_contacts: bool,
) -> Vec<ConversationId> {
    let after = after.map(|c| (last_message(c), c.id));
    store
        .recent_conversations(ConversationsPage {
            after: after.or(Some((at_s(BASE + 1_000), Uuid::max()))),
            limit,
            test_contacts,
        })
        .await
        .expect("recent_conversations")
        .iter()
        .map(|c| c.id)
        .collect()
}

fn last_message(c: &Conversation) -> DateTime<Utc> {
    c.last_message_at
        .expect("a listed conversation has a message")
}

/// The recent conversations: newest last message first, ties by id, the next page after the
/// last row of the one before; test contacts only when asked for.
pub async fn console_recent_conversations_are_paged_newest_first_by_keyset(store: &dyn Store) {
    let first = contact_at(store, &fresh_subscriber(), BASE).await;
    let tied_a = contact_at(store, &fresh_subscriber(), BASE + 10).await;
    let tied_b = contact_at(store, &fresh_subscriber(), BASE + 10).await;
    let test = contact_at(store, &SubscriberId::new_test_contact(), BASE + 20).await;
    let (high, low) = if tied_a.id > tied_b.id {
        (tied_a.id, tied_b.id)
    } else {
        (tied_b.id, tied_a.id)
    };

    let one = page(store, None, 2, false).await;
    assert_eq!(
        one,
        vec![high, low],
        "newest first, a tie by id; no test contact"
    );
    let last = stored_conversation(store, low).await;
    let two = page(store, Some(&last), 2, false).await;
    assert_eq!(
        two.first(),
        Some(&first.id),
        "the next page starts after the last row"
    );
    assert!(!two.contains(&high) && !two.contains(&low));

    let with_tests = page(store, None, 1, true).await;
    assert_eq!(with_tests, vec![test.id], "the test contact when asked for");
    let none = store
        .recent_conversations(ConversationsPage {
            after: Some((at_s(BASE + 1_000), Uuid::max())),
            limit: 0,
            test_contacts: true,
        })
        .await
        .expect("recent_conversations");
    assert_eq!(none.len(), 1, "a limit below one reads one row");
    let silent = fresh_conversation(store).await;
    let all = store
        .recent_conversations(ConversationsPage {
            after: None,
            limit: crate::store::MAX_PAGE,
            test_contacts: true,
        })
        .await
        .expect("recent_conversations");
    assert!(
        all.iter().all(|c| c.id != silent.id),
        "a conversation without a message is not listed"
    );
}

/// One conversation's turns: newest first (a tie in the same millisecond by `seq`), page after
/// page, every turn once.
pub async fn console_conversation_turns_are_paged_newest_first_by_keyset(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let mut ids = Vec::new();
    for (i, at) in [0, 1_000, 1_000, 2_000, 3_000].into_iter().enumerate() {
        ids.push(
            record(
                store,
                NewTurn::user(conversation.id, format!("q{i}"), true, at_ms(at)),
            )
            .await,
        );
    }
    let reads = json!([{"tool": "stock", "available": true, "ms": 12}]);
    store
        .update_turn_plugin_reads(ids[4], &reads)
        .await
        .expect("update_turn_plugin_reads");
    let mut seen = Vec::new();
    let mut plugin_reads = Vec::new();
    let mut after = None;
    loop {
        let turns = store
            .conversation_turns(conversation.id, TurnsPage { after, limit: 2 })
            .await
            .expect("conversation_turns");
        assert!(turns.len() <= 2);
        let Some(last) = turns.last() else { break };
        after = Some((last.turn.created_at, last.turn.seq));
        seen.extend(turns.iter().map(|t| t.turn.text.clone()));
        plugin_reads.extend(turns.iter().map(|t| t.plugin_reads.clone()));
    }
    assert_eq!(seen, ["q4", "q3", "q2", "q1", "q0"]);
    assert_eq!(
        plugin_reads,
        [Some(reads), None, None, None, None],
        "each turn with its plugin reads"
    );
    let other = store
        .conversation_turns(
            fresh_conversation(store).await.id,
            TurnsPage {
                after: None,
                limit: 5,
            },
        )
        .await
        .expect("conversation_turns");
    assert!(
        other.is_empty(),
        "another conversation's turns are not read"
    );
}

/// The contacts held now: handed over after `since` and not released, newest handoff first,
/// each with the escalation reason of its newest turn since that handoff.
pub async fn console_held_now_lists_unreleased_handoffs_with_their_reason(store: &dyn Store) {
    let base = BASE + 100_000;
    let reasoned = fresh_conversation(store).await;
    let unreasoned = fresh_conversation(store).await;
    let released = fresh_conversation(store).await;
    let old = fresh_conversation(store).await;
    for (c, at) in [
        (&reasoned, base + 10),
        (&unreasoned, base + 20),
        (&released, base + 30),
        (&old, base - 10),
    ] {
        store
            .set_escalated(c.id, at_s(at))
            .await
            .expect("set_escalated");
    }
    let escalated = |reason: &str, at: i64| NewTurn {
        escalation_reason: Some(reason.to_owned()),
        ..NewTurn::agent(reasoned.id, "Invented copy", "escalated", true, at_s(at))
    };
    record(store, escalated("out_of_scope", base + 5)).await;
    record(store, escalated("complaint", base + 10)).await;
    let before_the_handoff = NewTurn {
        conversation_id: unreasoned.id,
        ..escalated("low_confidence", base + 19)
    };
    record(store, before_the_handoff).await;
    release(
        store,
        released.id,
        (at_s(base + 30), at_s(base + 40)),
        "released",
    )
    .await;

    let held = store.held_now(at_s(base), 10).await.expect("held_now");
    let shown: Vec<(ConversationId, Option<&str>)> = held
        .iter()
        .map(|h| (h.conversation.id, h.reason.as_deref()))
        .collect();
    assert_eq!(
        shown,
        vec![(unreasoned.id, None), (reasoned.id, Some("complaint"))],
        "newest handoff first; a released or older hold is not listed; a reason from before \
         the handoff is not its reason"
    );
}

/// A model turn's steps (its model calls) are written with its record and read back with the
/// page's turns; a turn no model wrote, and one recorded without the count, read `None`.
pub async fn console_turn_steps_are_stored_with_the_record_and_browsed(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    record(
        store,
        NewTurn::user(conversation.id, "Invented question", true, at_ms(0)),
    )
    .await;
    let three = NewTurn {
        steps: Some(3),
        ..NewTurn::agent(
            conversation.id,
            "Invented answer",
            "replied",
            true,
            at_ms(1_000),
        )
    };
    record(store, three).await;
    let uncounted = NewTurn::agent(
        conversation.id,
        "Invented copy",
        "replied",
        true,
        at_ms(2_000),
    );
    record(store, uncounted).await;
    let turns = store
        .conversation_turns(
            conversation.id,
            TurnsPage {
                after: None,
                limit: 10,
            },
        )
        .await
        .expect("conversation_turns");
    let steps: Vec<(&str, Option<i64>)> = turns
        .iter()
        .map(|t| (t.turn.text.as_str(), t.steps))
        .collect();
    assert_eq!(
        steps,
        vec![
            ("Invented copy", None),
            ("Invented answer", Some(3)),
            ("Invented question", None),
        ],
        "each turn with the steps its record holds"
    );
}

/// The console shows what a turn was given above the knowledge threshold: a page of turns carries
/// each turn's `knowledge` ids as recorded, and none for a turn that recorded none.
pub async fn console_turn_knowledge_ids_are_browsed_with_the_record(store: &dyn Store) {
    let conversation = fresh_conversation(store).await;
    let given = record(
        store,
        NewTurn::agent(
            conversation.id,
            "Invented answer",
            "replied",
            true,
            at_ms(1_000),
        ),
    )
    .await;
    record(
        store,
        NewTurn::agent(
            conversation.id,
            "Invented copy",
            "replied",
            true,
            at_ms(2_000),
        ),
    )
    .await;
    let ids = json!({"offerings": ["invented-offering"], "passages": ["invented-policy#1"], "miss": false});
    store
        .update_turn_knowledge(given, &ids)
        .await
        .expect("update_turn_knowledge");
    let turns = store
        .conversation_turns(
            conversation.id,
            TurnsPage {
                after: None,
                limit: 10,
            },
        )
        .await
        .expect("conversation_turns");
    let knowledge: Vec<(&str, Option<&serde_json::Value>)> = turns
        .iter()
        .map(|t| (t.turn.text.as_str(), t.knowledge.as_ref()))
        .collect();
    assert_eq!(
        knowledge,
        vec![("Invented copy", None), ("Invented answer", Some(&ids))],
        "each turn with the ids its record holds"
    );
}
