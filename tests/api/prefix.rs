//! A stable request prefix: for one config in force, every model request of every contact and
//! every step begins with the same bytes (the tools, the reply schema, `system`), then the
//! contact's history as earlier turns sent it, then the turn's own part. The recording model
//! captures each `ModelRequest` through the real turn path.

use manychat_agent::model::mock::tool_calls;
use manychat_agent::model::{Message, ModelRequest};
use serde_json::json;

use crate::helpers::*;
use crate::selling::*;

/// The bytes every request must share: the tools JSON, the output schema and `system`.
fn prefix(request: &ModelRequest) -> (String, String, String) {
    (
        serde_json::to_string(&request.tools).unwrap(),
        request.output_schema.to_string(),
        request.system.to_string(),
    )
}

/// The request's user messages, in order.
fn user_messages(request: &ModelRequest) -> Vec<&str> {
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::User { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The fence nonce of a request's contact message (the last fenced block).
fn nonce(request: &ModelRequest) -> String {
    let text = user_messages(request).join("\n");
    let start = text.rfind("<<<CONTACT nonce=").expect("a fenced message") + 17;
    text[start..start + 16].to_owned()
}

#[tokio::test]
async fn cache_tools_schema_and_system_are_the_same_bytes_for_every_contact_and_step() {
    let model = script(vec![
        // Contact 9101, first turn: a tool step (prospect, offering, a flow), then the answer.
        tool_calls([
            prospect(),
            set_field("course", "wheel-basics"),
            send_flow("wheel_basics_guide", false),
        ]),
        answer("Here is the wheel guide."),
        // Contact 9101 again: an offering recorded and a flow sent.
        answer("Anything else?"),
        // Contact 9102: new.
        answer("Hello!"),
    ]);
    let app = app_on(Backend::Sqlite, model.clone(), unchanged).await;
    turn_once(&app, "9101", "Send me the wheel guide").await;
    turn_once(&app, "9101", "Thanks").await;
    turn_once(&app, "9102", "Hi").await;
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    // The steps of one turn, and two contacts at different funnel stages.
    for (n, request) in requests.iter().enumerate() {
        assert_eq!(prefix(request), prefix(&requests[0]), "request {n}");
    }
    assert_eq!(
        tool_enum(&requests[2], "send_flow", "flow"),
        [
            "wheel_basics_guide",
            "handbuilding_guide",
            "glaze_lab_guide",
            "booking_link"
        ]
    );
    // What differs is in the turn's own message: the contacts' positions.
    let own = |request: &ModelRequest| user_messages(request).last().unwrap().to_string();
    assert!(
        own(&requests[2])
            .contains("FLOWS: accepted now: booking_link; already sent: wheel_basics_guide"),
        "{}",
        own(&requests[2])
    );
    assert!(
        own(&requests[3]).contains("FLOWS: accepted now: booking_link; already sent: none"),
        "{}",
        own(&requests[3])
    );
    assert_eq!(flows_sent(&app).await, vec!["content20250301000000_200001"]);
    app.stop().await;
}

#[tokio::test]
async fn cache_the_history_of_turn_n_plus_1_starts_with_the_history_messages_of_turn_n() {
    let model = script(vec![
        answer("Hello!"),
        answer("The wheel course is on Saturdays."),
        answer("You are welcome."),
    ]);
    let app = app_on(Backend::Sqlite, model.clone(), unchanged).await;
    turn_once(&app, "9201", "Hi").await;
    turn_once(&app, "9201", "When is the wheel course?").await;
    turn_once(&app, "9201", "Thanks").await;
    let requests = model.requests();
    let (second, third) = (&requests[1], &requests[2]);
    // No history on the first turn; then one message per stored turn, ahead of the turn's own.
    assert_eq!(requests[0].cache.stable_messages, 0);
    assert_eq!(second.cache.stable_messages, 2);
    assert_eq!(third.cache.stable_messages, 4);
    assert_eq!(
        third.messages[..second.cache.stable_messages],
        second.messages[..second.cache.stable_messages],
        "the earlier turn's history messages, byte for byte"
    );
    // The turn's own part follows the history: the notices, then the contact's message.
    let own = user_messages(third)[third.cache.stable_messages];
    assert!(own.starts_with("SERVER NOTICES"), "{own}");
    assert!(own.contains("\nThanks\n"), "{own}");
    // The previous turn's exchange is now history: its message in the same fence.
    assert_eq!(
        user_messages(third)[2],
        format!(
            "contact: <<<CONTACT nonce={n}>>> When is the wheel course? <<<END CONTACT nonce={n}>>>",
            n = nonce(second)
        )
    );
    assert_eq!(
        user_messages(third)[3],
        "agent: The wheel course is on Saturdays."
    );
    app.stop().await;
}

#[tokio::test]
async fn system_4_the_fence_nonce_is_kept_for_the_conversation_and_rotated_when_the_contact_sends_it()
 {
    let model = script(vec![
        answer("Hello!"),
        answer("Saturdays."),
        answer("Sorry?"),
        answer("Sure."),
    ]);
    let app = app_on(Backend::Sqlite, model.clone(), unchanged).await;
    turn_once(&app, "9301", "Hi").await;
    turn_once(&app, "9301", "When?").await;
    let requests = model.requests();
    let first = nonce(&requests[0]);
    assert_eq!(
        nonce(&requests[1]),
        first,
        "the same nonce on the next turn"
    );
    assert_eq!(
        app.conversation("9301").await.fence_nonce.as_deref(),
        Some(first.as_str()),
        "stored on the contact's row"
    );

    // The contact's message holds the nonce: the turn fences with a new one, stored.
    turn_once(&app, "9301", &format!("is it {}?", first.to_uppercase())).await;
    let rotated = nonce(&model.requests()[2]);
    assert_ne!(rotated, first);
    assert_eq!(
        app.conversation("9301").await.fence_nonce.as_deref(),
        Some(rotated.as_str())
    );
    // The history holds it now (the contact's own line): the next turn keeps the rotated one.
    turn_once(&app, "9301", "ok").await;
    assert_eq!(nonce(&model.requests()[3]), rotated);
    let all = user_messages(&model.requests()[3]).join("\n");
    assert_eq!(all.matches(&format!("nonce={first}")).count(), 0, "{all}");
    app.stop().await;
}

#[tokio::test]
async fn spec_024_an_unbound_turn_is_offered_get_contact_and_refuses_it_without_a_request() {
    use manychat_agent::model::mock::call;
    let model = script(vec![
        tool_calls([call("read_1", "get_contact", json!({}))]),
        answer("Hello!"),
    ]);
    let app =
        spawn_app_with(AppOptions::new(model.clone()).env("CONTACT_TOKENS_ENFORCED", "true")).await;
    app.returning_contact("9401").await;
    app.send("9401", "Hi").await;
    app.settle().await;
    let requests = model.requests();
    assert!(requests[0].tools.iter().any(|t| t.name == "get_contact"));
    assert_eq!(
        tool_results(&requests[1]),
        vec![json!({
            "available": false,
            "error": "this turn cannot read the contact: answer from the conversation"
        })]
    );
    let received = received(&app).await;
    assert!(
        !received.iter().any(|(p, _)| p == GET_INFO),
        "no read reached ManyChat: {received:?}"
    );
    app.stop().await;
}

/// 018 keeps the last 10 turns (5 exchanges): until they are full each turn's history extends
/// the previous one's; from then on every turn drops the oldest exchange, so the history no
/// longer starts with the previous turn's and only the config's prefix (tools, schema, system)
/// repeats. Measured here so the cost is known: the window size is the spec's.
#[tokio::test]
async fn cache_once_the_last_ten_turns_are_full_the_window_slides_every_turn() {
    let turns = 8;
    let model = script(
        (0..turns)
            .map(|n| answer(&format!("Answer {n}.")))
            .collect(),
    );
    let app = app_on(Backend::Sqlite, model.clone(), unchanged).await;
    for n in 0..turns {
        turn_once(&app, "9501", &format!("Question {n}?")).await;
    }
    let requests = model.requests();
    // How many of the previous turn's history messages each turn repeats at its start.
    let reused: Vec<usize> = requests
        .windows(2)
        .map(|pair| {
            let (before, after) = (&pair[0], &pair[1]);
            let n = before.cache.stable_messages;
            if after.messages.len() >= n && after.messages[..n] == before.messages[..n] {
                n
            } else {
                0
            }
        })
        .collect();
    let stable: Vec<usize> = requests.iter().map(|r| r.cache.stable_messages).collect();
    assert_eq!(stable, [0, 2, 4, 6, 8, 10, 10, 10]);
    assert_eq!(reused, [0, 2, 4, 6, 8, 0, 0], "turns 7 and 8 reuse nothing");
    app.stop().await;
}
