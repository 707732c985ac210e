//! Shutdown (issue: the channel, item 10): stop accepting, let turns in flight finish.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::{ScriptStep, ScriptedModel, reply};
use serde_json::json;

use crate::helpers::*;

#[tokio::test(start_paused = true)]
async fn shutdown_lets_a_turn_in_flight_finish_and_then_stops_accepting() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(ScriptedModel::from_steps([ScriptStep::ok(reply(
        reply_json("Still answered."),
    ))
    .after(Duration::from_secs(2))]));
    let app = spawn_app(model.clone()).await;
    let http = app.http.clone();
    let url = app.message_url();
    let in_flight = tokio::spawn(async move {
        let response = http
            .post(url)
            .bearer_auth(SECRET)
            .json(&json!({"subscriber_id": "5001", "text": "Last question"}))
            .send()
            .await
            .unwrap();
        response.json::<serde_json::Value>().await.unwrap()
    });
    for _ in 0..400 {
        if model.calls() == 1 {
            break;
        }
        real_pause().await;
    }
    let address = app.address.clone();
    app.shutdown.cancel();
    tokio::time::advance(Duration::from_secs(2)).await;
    for _ in 0..400 {
        if in_flight.is_finished() {
            break;
        }
        real_pause().await;
    }
    let body = in_flight.await.unwrap();
    assert_eq!(block_texts(&body), vec!["Still answered."]);
    app.stop().await;
    let refused = reqwest::Client::new()
        .get(format!("{address}/health"))
        .send()
        .await;
    assert!(refused.is_err(), "no longer accepting");
}
