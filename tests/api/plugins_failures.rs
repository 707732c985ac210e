//! A plugin endpoint that fails or hangs: the model is told `available: false` and the reply goes
//! out, a hanging read is cut at 1,500 ms, a hanging write fails at 10 s and is not retried, and a
//! write whose tool a reload removed fails without a request.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::{ScriptStep, ScriptedModel, tool_calls};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::*;
use crate::plugins_helpers::*;
use crate::selling::*;

/// An endpoint that never answers (the test's clock is paused, so no real time passes).
async fn hanging(at: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(at.to_owned()))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(3600)))
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn plugin_a_failing_endpoint_gives_the_model_available_false_and_the_reply_goes_out() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(SEATS))
        .respond_with(ResponseTemplate::new(500).set_body_string("boom"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(LEAD))
        .respond_with(
            ResponseTemplate::new(302).insert_header("location", "https://elsewhere.test/"),
        )
        .mount(&server)
        .await;
    let model = script(vec![
        tool_calls([
            seats("wheel_basics", 1),
            lead("wheel_basics", "Wants wheel."),
        ]),
        answer("I cannot check right now."),
    ]);
    let app = app_with_plugins(Backend::Sqlite, model.clone(), &server, false).await;
    app.returning_contact("8109").await;
    let (_, body) = app.send("8109", "Room?").await;
    assert_eq!(block_texts(&body), vec!["I cannot check right now."]);
    settled(&app).await;
    assert_eq!(
        tool_results(&model.requests()[1])[0],
        json!({"available": false})
    );
    let actions = agent_turn(&app, "8109").await.actions.unwrap();
    assert_eq!(actions[0]["status"], "failed");
    assert_eq!(
        actions[0]["error"], "answered HTTP 302",
        "no redirect is followed"
    );
    assert_eq!(
        signed_requests(&server, LEAD).await.len(),
        1,
        "never retried"
    );
    app.stop().await;
}

#[tokio::test(start_paused = true)]
async fn plugin_a_hanging_read_is_cut_at_1500_ms() {
    let server = hanging(SEATS).await;
    let model = script(vec![
        tool_calls([seats("wheel_basics", 1)]),
        answer("I cannot check right now."),
    ]);
    let app = app_with_plugins(Backend::Sqlite, model.clone(), &server, false).await;
    app.returning_contact("8110").await;
    let _frozen = FrozenClock::freeze();
    let request = send_in_background(&app, "8110", "Room?");
    advancing_until(async || request.is_finished()).await;
    let (_, body) = request.await.unwrap();
    assert_eq!(block_texts(&body), vec!["I cannot check right now."]);
    assert_eq!(
        tool_results(&model.requests()[1])[0],
        json!({"available": false})
    );
    let turn = agent_turn(&app, "8110").await;
    let reads = app.store.turn_plugin_reads(turn.id).await.unwrap().unwrap();
    assert_eq!(reads[0]["available"], false);
    assert_eq!(reads[0]["ms"], 1500);
    app.stop().await;
}

#[tokio::test(start_paused = true)]
async fn plugin_a_hanging_write_fails_at_10_s_and_is_not_retried() {
    let server = hanging(LEAD).await;
    let model = script(vec![
        tool_calls([lead("wheel_basics", "Wants wheel.")]),
        answer("Noted."),
    ]);
    let app = app_with_plugins(Backend::Sqlite, model, &server, false).await;
    let _frozen = FrozenClock::freeze();
    let started = tokio::time::Instant::now();
    let request = send_in_background(&app, "8111", "Wheel please");
    advancing_until(async || request.is_finished()).await;
    advancing_until(async || app.tasks.is_empty()).await;
    assert!(started.elapsed() >= Duration::from_secs(10));
    let actions = agent_turn(&app, "8111").await.actions.unwrap();
    assert_eq!(actions[0]["status"], "failed");
    assert_eq!(actions[0]["error"], "timed out after 10000 ms");
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    app.stop().await;
}

#[tokio::test(start_paused = true)]
async fn plugin_a_write_whose_tool_a_reload_removed_fails_without_a_request() {
    let _frozen = FrozenClock::freeze();
    let server = endpoint(json!({"seats": 1})).await;
    let model = Arc::new(ScriptedModel::from_steps([
        ScriptStep::ok(tool_calls([lead("wheel_basics", "Wants the wheel class.")])),
        ScriptStep::ok(answer("Noted, thank you.")).after(Duration::from_secs(9)),
    ]));
    let app = reloading_app_with_plugins(model, &server).await;
    let request = send_in_background(&app, "8112", "Wheel please");
    advancing_until(async || actions_queued(&app).await).await;
    let _ = request.await;
    app.settle_advancing().await;

    // The reload keeps only the read tool.
    let mut kept = plugins_json(&server.uri());
    kept["tools"].as_array_mut().unwrap().remove(1);
    write_plugins(&app.config_dir, &kept);
    crate::reload::send_sighup();
    until(async || {
        let config = app.config.snapshot();
        config.plugins.as_ref().is_some_and(|p| p.tools.len() == 1)
    })
    .await;
    app.worker.run_once().await.unwrap();
    assert!(signed_requests(&server, LEAD).await.is_empty());
    let actions = agent_turn(&app, "8112").await.actions.unwrap();
    assert_eq!(actions[0]["status"], "failed");
    assert_eq!(actions[0]["error"], "the tool is no longer configured");
    app.stop().await;
}
