//! Gemini turns through the HTTP route, against a fake that refuses what the API refuses (the
//! rules of the parent module), and the model names that would break the request's URL.

use super::*;

/// The fake Gemini of the turns below: refuses what the API refuses, answers a call on the
/// first step and the reply once the call's response came back.
struct GeminiFake {
    model: &'static str,
    first: Value,
    after_results: Value,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl Respond for GeminiFake {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return ResponseTemplate::new(400).set_body_json(error_body(&["not JSON".into()]));
        };
        self.bodies.lock().unwrap().push(body.clone());
        let problems = request_problems_for(self.model, &body);
        if !problems.is_empty() {
            return ResponseTemplate::new(400).set_body_json(error_body(&problems));
        }
        let answered = body["contents"]
            .as_array()
            .and_then(|c| c.last())
            .is_some_and(|c| c["parts"][0].get("functionResponse").is_some());
        let answer = if answered {
            &self.after_results
        } else {
            &self.first
        };
        ResponseTemplate::new(200).set_body_json(answer.clone())
    }
}

const PATH_2_5: &str = "/v1beta/models/gemini-2.5-flash:generateContent";
const PATH_3: &str = "/v1beta/models/gemini-3-flash-preview:generateContent";

async fn fake(
    model: &'static str,
    first: Value,
    after_results: Value,
) -> (MockServer, Arc<Mutex<Vec<Value>>>) {
    let server = MockServer::start().await;
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let route = if model.starts_with("gemini-3") {
        PATH_3
    } else {
        PATH_2_5
    };
    Mock::given(method("POST"))
        .and(path(route))
        .and(header("x-goog-api-key", "google-test-key"))
        .respond_with(GeminiFake {
            model,
            first,
            after_results,
            bodies: Arc::clone(&bodies),
        })
        .mount(&server)
        .await;
    (server, bodies)
}

fn provider_for(server: &MockServer, name: &str) -> Arc<dyn Model> {
    Arc::new(model(name, &format!("{}/v1beta/", server.uri())))
}

#[tokio::test]
async fn google_plain_turn_through_the_http_route_passes_a_fake_that_refuses_what_gemini_refuses() {
    let reply = text_answer(&super::super::route::route_reply());
    let (server, bodies) = fake("gemini-2.5-flash", reply.clone(), reply).await;

    let (status, body) =
        super::super::route::answer_through_the_route(provider_for(&server, "gemini-2.5-flash"))
            .await;

    super::super::route::assert_the_route_reply(status, &body);
    let sent = bodies.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "one step");
    assert!(request_problems_for("gemini-2.5-flash", &sent[0]).is_empty());
    assert!(sent[0]["systemInstruction"]["parts"][0]["text"].is_string());
}

#[tokio::test]
async fn google_tool_turn_through_the_http_route_pairs_the_result_and_echoes_the_signature() {
    let (server, bodies) = fake(
        "gemini-3-flash-preview",
        call_answer("get_contact", json!({}), None),
        text_answer(&super::super::route::route_reply()),
    )
    .await;

    let (status, body) = super::super::route::answer_through_the_route(provider_for(
        &server,
        "gemini-3-flash-preview",
    ))
    .await;

    super::super::route::assert_the_route_reply(status, &body);
    let sent = bodies.lock().unwrap().clone();
    assert_eq!(sent.len(), 2, "a tool step, then the reply");
    let contents = sent[1]["contents"].as_array().unwrap();
    let model_turn = &contents[contents.len() - 2];
    assert_eq!(model_turn["parts"][0]["thoughtSignature"], json!(SIGNATURE));
    let last = &contents[contents.len() - 1];
    assert_eq!(
        last["parts"][0]["functionResponse"]["name"],
        json!("get_contact")
    );
    assert!(
        last["parts"][0]["functionResponse"]["response"]
            .get("output")
            .is_some()
    );
    assert_eq!(
        sent[0]["toolConfig"]["functionCallingConfig"]["mode"],
        json!("AUTO")
    );
}

#[tokio::test]
async fn google_media_turn_through_the_http_route_sends_the_image_inline() {
    let reply = text_answer(&super::super::route::route_reply());
    let (server, bodies) = fake("gemini-2.5-flash", reply.clone(), reply).await;
    let (_files, url) = super::super::route::image_host().await;
    let (status, body) = super::super::route::answer_text_through_the_route(
        provider_for(&server, "gemini-2.5-flash"),
        &url,
        &[("MANYCHAT_MEDIA_BASE", _files.uri())],
    )
    .await;

    super::super::route::assert_the_route_reply(status, &body);
    let sent = bodies.lock().unwrap().clone();
    let parts: Vec<Value> = sent[0]["contents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .collect();
    assert!(
        parts.contains(&json!({"inlineData": {"mimeType": "image/png", "data": image_base64()}})),
        "{parts:?}"
    );
}

#[tokio::test]
async fn google_blocked_answer_through_the_http_route_escalates_and_is_never_the_reply() {
    let blocked = official_answer(
        json!([{"text": super::super::route::route_reply()}]),
        "SAFETY",
    );
    let (server, _) = fake("gemini-2.5-flash", blocked.clone(), blocked).await;

    let (status, body) =
        super::super::route::answer_through_the_route(provider_for(&server, "gemini-2.5-flash"))
            .await;

    assert_eq!(status, 200);
    let texts = super::super::route::block_texts(&body);
    assert!(
        !texts
            .iter()
            .any(|t| t.contains(super::super::route::ROUTE_REPLY_TEXT)),
        "{texts:?}"
    );
    assert_eq!(texts, vec![super::super::route::escalation_copy()]);
}

#[tokio::test]
async fn google_errors_are_retried_like_the_other_providers_and_summarised_to_their_status() {
    let server = MockServer::start().await;
    let body = json!({"error": {"code": 503,
        "message": "The model is overloaded for: How much is the pottery course?",
        "status": "UNAVAILABLE"}});
    answer_every_post(
        &server,
        error_answer(503, Some(("retry-after-ms", "5")), body),
    )
    .await;
    let err = first_step_error(&model("gemini-2.5-flash", &server.uri())).await;
    assert_eq!(err, http_error(503, "UNAVAILABLE"));
    assert!(!err.to_string().contains("pottery"));
    assert_eq!(received_bodies(&server).await.len(), 2, "one retry");

    // The fake's refusal reads as Gemini's INVALID_ARGUMENT.
    let refusing = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(RefusesWhatTheApiRefuses {
            check: |body| request_problems_for("gemini-2.5-flash", body),
            error_body,
            ok: text_answer(VALID_REPLY),
        })
        .mount(&refusing)
        .await;
    let mut bad = first_step(ToolChoice::Auto);
    bad.messages.clear();
    let err = model("gemini-2.5-flash", &refusing.uri())
        .step(&bad)
        .await
        .expect_err("no contents");
    assert_eq!(err, http_error(400, "INVALID_ARGUMENT"));

    let too_many = MockServer::start().await;
    let body = json!({"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}});
    answer_every_post(&too_many, error_answer(429, None, body)).await;
    let err = first_step_error(&model("gemini-2.5-flash", &too_many.uri())).await;
    assert_eq!(err, crate::model::ModelError::RateLimited);
}

#[test]
fn google_model_names_that_would_break_the_url_are_refused() {
    for name in ["gemini/../x", "gemini 2.5", "gemini?key=x"] {
        assert!(
            GoogleModel::new(name, &Secret::new("k"), "https://example.test").is_err(),
            "{name}"
        );
    }
    let m = model("models/gemini-2.5-flash", "https://example.test/v1beta");
    assert_eq!(m.id(), "google:models/gemini-2.5-flash");
}
