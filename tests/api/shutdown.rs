//! Shutdown (SYSTEM 3): stop accepting, let turns in flight finish.

use std::time::Duration;

use serde_json::json;

use crate::helpers::*;

#[tokio::test(start_paused = true)]
async fn shutdown_lets_a_turn_in_flight_finish_and_then_stops_accepting() {
    let _frozen = FrozenClock::freeze();
    let model = slow_reply("Still answered.", Duration::from_secs(2));
    let app = spawn_app(model.clone()).await;
    let http = app.http.clone();
    let url = app.message_url();
    let in_flight = in_background(async move {
        let response = http
            .post(url)
            .bearer_auth(SECRET)
            .json(&json!({"subscriber_id": "5001", "text": "Last question"}))
            .send()
            .await
            .unwrap();
        response.json::<serde_json::Value>().await.unwrap()
    });
    until(async || model.calls() == 1).await;
    let address = app.address.clone();
    app.shutdown.cancel();
    tokio::time::advance(Duration::from_secs(2)).await;
    until(async || in_flight.is_finished()).await;
    let body = in_flight.await.unwrap();
    assert_eq!(block_texts(&body), vec!["Still answered."]);
    app.stop().await;
    let refused = reqwest::Client::new()
        .get(format!("{address}/health"))
        .send()
        .await;
    assert!(refused.is_err(), "no longer accepting");
}

/// "stopped accepting" is logged when the listener stops, before the request still in flight
/// has been answered, not once every connection has closed.
#[tokio::test(start_paused = true)]
async fn stopped_accepting_is_logged_when_it_happens() {
    let _frozen = FrozenClock::freeze();
    let (logs, _guard) = manychat_agent::observability::capture_with_format(
        manychat_agent::observability::LogFormat::Json,
    );
    let model = slow_reply("Answered while stopping.", Duration::from_secs(2));
    let app = spawn_app(model.clone()).await;
    let http = app.http.clone();
    let url = app.message_url();
    let in_flight = in_background(async move {
        http.post(url)
            .bearer_auth(SECRET)
            .json(&json!({"subscriber_id": "5002", "text": "One more question"}))
            .send()
            .await
            .unwrap()
    });
    until(async || model.calls() == 1).await;
    app.shutdown.cancel();
    tokio::time::advance(Duration::from_secs(2)).await;
    until(async || in_flight.is_finished()).await;
    assert_eq!(in_flight.await.unwrap().status().as_u16(), 200);
    app.stop().await;

    let lines = logs.lines();
    let position = |needle: &str| {
        lines
            .iter()
            .position(|line| line.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in {lines:#?}"))
    };
    let stopped = position("stopped accepting");
    let answered = position("answered_inline");
    assert!(
        stopped < answered,
        "stopped accepting (line {stopped}) is logged before the turn in flight is answered (line {answered})"
    );
}
