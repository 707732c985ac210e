//! The example endpoint (`examples/plugin_endpoint`) with the real app: it serves the demo tenant
//! end to end, refuses a call its secret did not sign, and refuses a replayed call.

use manychat_agent::model::mock::tool_calls;
use serde_json::{Value, json};

use crate::helpers::*;
use crate::plugins_helpers::*;
use crate::selling::*;

#[path = "../../examples/plugin_endpoint/app.rs"]
mod example_endpoint;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_the_example_endpoint_serves_the_demo_tenant_end_to_end() {
    let (router, studio) = example_endpoint::router(PLUGIN_SECRET);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

    let text = std::fs::read_to_string(repo_path("examples/plugin_endpoint/plugins.json")).unwrap();
    let plugins: Value = serde_json::from_str(
        &text
            .replace("http://127.0.0.1:8787", &base)
            .replace("PLUGIN_STUDIO_SECRET", SECRET_ENV),
    )
    .unwrap();
    let model = script(vec![
        tool_calls([seats("wheel_basics", 1)]),
        tool_calls([lead("wheel_basics", "Wants the Wednesday wheel class.")]),
        answer("There are 3 seats left; I have noted your interest."),
    ]);
    let app = spawn_app_with(
        AppOptions::new(model.clone())
            .edit(move |dir| {
                without_sales(dir);
                write_plugins(dir, &plugins);
            })
            .env(SECRET_ENV, PLUGIN_SECRET),
    )
    .await;
    app.send("8130", "Is there room on Wednesday?").await;
    settled(&app).await;
    let read = &tool_results(&model.requests()[1])[0];
    assert_eq!(read["seats"], 3);
    assert!(read["fenced"].as_str().unwrap().contains("Wednesday 7pm"));
    let leads = studio.leads.lock().unwrap().clone();
    assert_eq!(leads.len(), 1);
    assert_eq!(leads[0]["subscriber_id"], "8130");
    assert_eq!(
        agent_turn(&app, "8130").await.actions.unwrap()[0]["status"],
        "performed"
    );

    // A call the secret did not sign is refused by the endpoint.
    let forged = reqwest::Client::new()
        .post(format!("{base}/create_lead"))
        .header("webhook-id", "msg_forged")
        .header(
            "webhook-timestamp",
            chrono::Utc::now().timestamp().to_string(),
        )
        .header("webhook-signature", "v1,AAAA")
        .body(r#"{"tool":"create_lead"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    assert_eq!(studio.leads.lock().unwrap().len(), 1);
    app.stop().await;
}

/// The example endpoint refuses a call whose `webhook-id` it already accepted: a captured,
/// correctly signed write sent again within the signature's 5 minutes is not made twice.
#[tokio::test]
async fn plugin_the_example_endpoint_refuses_a_replayed_call() {
    let (router, studio) = example_endpoint::router(PLUGIN_SECRET);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let body = json!({"tool": "create_lead", "subscriber_id": "8120",
        "arguments": {"class": "wheel_basics", "summary": "Wants the wheel class."}})
    .to_string();
    let now = chrono::Utc::now().timestamp();
    let signature = standardwebhooks::Webhook::new(PLUGIN_SECRET)
        .unwrap()
        .sign("msg_replayed", now, body.as_bytes())
        .unwrap();
    let send = || {
        reqwest::Client::new()
            .post(format!("{base}/create_lead"))
            .header("content-type", "application/json")
            .header("webhook-id", "msg_replayed")
            .header("webhook-timestamp", now.to_string())
            .header("webhook-signature", signature.clone())
            .body(body.clone())
            .send()
    };
    assert_eq!(send().await.unwrap().status().as_u16(), 204);
    assert_eq!(send().await.unwrap().status().as_u16(), 409, "the replay");
    assert_eq!(studio.leads.lock().unwrap().len(), 1, "one lead, not two");
}
