//! Conformance: the rate windows, the day's budget and the flow sends (`CounterStore`).

use super::*;

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

/// A sendFlow is counted per contact over the past hour; past the limit nothing is
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
