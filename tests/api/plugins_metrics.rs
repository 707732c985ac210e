//! The plugin tools' metrics: every configured tool has its `actions_total` series at zero from the
//! start and after a reload that adds one, and a read's call counts under its tool's name.

use manychat_agent::model::mock::tool_calls;
use serde_json::json;

use crate::helpers::*;
use crate::plugins_helpers::*;
use crate::selling::*;

/// `actions_total`'s series of `tool` in `status`, with its value.
fn series(tool: &str, status: &str, value: u64) -> String {
    format!("manychat_agent_actions_total{{tool=\"{tool}\",status=\"{status}\"}} {value}")
}

#[tokio::test]
async fn plugin_every_configured_tool_has_its_series_at_zero_from_start_and_after_a_reload_that_adds_one()
 {
    let server = endpoint(json!({"seats": 3})).await;
    let model = script(vec![
        tool_calls([seats("wheel_basics", 1)]),
        answer("There are three seats left."),
    ]);
    let app = reloading_app_with_plugins(model, &server).await;
    let text = app.metrics_text().await;
    for tool in ["seats_left", "create_lead"] {
        for status in ["performed", "failed"] {
            assert!(
                text.contains(&series(tool, status, 0)),
                "{tool} {status}:\n{text}"
            );
        }
    }

    // A reload adds a write tool: its series are there at 0 too.
    let mut more = plugins_json(&server.uri());
    let mut callback = more["tools"][1].clone();
    callback["name"] = json!("request_callback");
    more["tools"].as_array_mut().unwrap().push(callback);
    write_plugins(&app.config_dir, &more);
    crate::reload::send_sighup();
    until(async || {
        app.metrics_text()
            .await
            .contains(&series("request_callback", "failed", 0))
    })
    .await;
    assert!(
        app.metrics_text()
            .await
            .contains(&series("request_callback", "performed", 0))
    );

    // A read's call counts under its tool's name.
    app.returning_contact("8113").await;
    app.send("8113", "Is there room in the wheel class?").await;
    assert_eq!(signed_requests(&server, SEATS).await.len(), 1);
    let text = app.metrics_text().await;
    assert!(
        text.contains(&series("seats_left", "performed", 1)),
        "{text}"
    );
    assert!(text.contains(&series("seats_left", "failed", 0)), "{text}");
    app.stop().await;
}
