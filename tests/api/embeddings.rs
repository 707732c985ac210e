//! Semantic search (`KNOWLEDGE_EMBEDDINGS`) through the real app, against a fake OpenAI
//! embeddings endpoint that answers in the documented shape and records every request: the
//! catalog is embedded once (the database keeps it), a changed offering alone again, a message
//! near an offering in the fake's vector space retrieves it without a shared word, and a
//! provider down or slow leaves the turn its full-text retrieval.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use manychat_agent::config::TenantConfig;
use manychat_agent::knowledge::fixtures::english_catalog;
use manychat_agent::knowledge::{Knowledge, content_hash};
use manychat_agent::model::embedding::FakeEmbedder;
use manychat_agent::model::mock::{RecordingModel, ScriptedModel};
use manychat_agent::store::Role;
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::helpers::*;

const MODEL: &str = "openai:text-embedding-3-small";
/// Offerings in the tenant: over the default threshold (40), so the catalog is retrieved.
const OFFERINGS: usize = 50;
/// The offering the message is near to, and the message, which shares no word with it.
const NEAR: usize = 37;
const MESSAGE: &str = "anything for a downpour?";

/// The fake's vector space: offering [`NEAR`]'s text and the message side by side, everything
/// else a fixed pseudo-random vector, nearly orthogonal to the rest.
fn space() -> FakeEmbedder {
    let catalog = english_catalog(OFFERINGS, 7);
    let name = catalog.offerings[NEAR].name.to_lowercase();
    FakeEmbedder::new(
        vec![(&name, vec![0.0, 1.0]), ("downpour", vec![0.0, 0.95, 0.3])],
        64,
    )
}

/// OpenAI's `/embeddings` answer for the request's `input`, optionally late for one text.
struct Embeddings {
    space: FakeEmbedder,
    /// A request holding this text is answered only after a minute (a slow provider).
    slow_for: Option<&'static str>,
}

impl Respond for Embeddings {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).expect("a JSON body");
        let input: Vec<String> = body["input"]
            .as_array()
            .expect("input is an array")
            .iter()
            .map(|t| t.as_str().expect("a text").to_owned())
            .collect();
        let data: Vec<Value> = input
            .iter()
            .enumerate()
            .map(|(i, text)| {
                json!({"object": "embedding", "index": i, "embedding": self.space.vector(text)})
            })
            .collect();
        let answer = ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": input.len(), "total_tokens": input.len()},
        }));
        match self.slow_for {
            Some(text) if input.iter().any(|t| t == text) => {
                answer.set_delay(Duration::from_secs(60))
            }
            _ => answer,
        }
    }
}

async fn embedding_server(slow_for: Option<&'static str>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/v1/embeddings"))
        .respond_with(Embeddings {
            space: space(),
            slow_for,
        })
        .mount(&server)
        .await;
    server
}

/// The `input` of every request the embedding server received, in order.
async fn inputs(server: &MockServer) -> Vec<Vec<String>> {
    bodies_on(server, "/v1/embeddings")
        .await
        .into_iter()
        .map(|b| {
            b["input"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_owned())
                .collect()
        })
        .collect()
}

/// The demo tenant around the invented English catalog, its offering field's values left to
/// the catalog; `edit` changes the catalog first.
fn english_shop(dir: &Path, edit: impl FnOnce(&mut manychat_agent::config::Catalog)) {
    let mut catalog = english_catalog(OFFERINGS, 7);
    edit(&mut catalog);
    std::fs::write(
        dir.join("catalog.json"),
        serde_json::to_string(&catalog).unwrap(),
    )
    .unwrap();
    edit_tools(dir, |tools| {
        for field in tools["fields"].as_array_mut().unwrap() {
            if field["offering"] == true {
                field.as_object_mut().unwrap().remove("values");
            }
        }
        for flow in tools["flows"].as_array_mut().unwrap() {
            flow.as_object_mut().unwrap().remove("offering");
        }
    });
}

fn options(model: Arc<dyn manychat_agent::model::Model>, server: &MockServer) -> AppOptions {
    AppOptions::new(model)
        .env("KNOWLEDGE_EMBEDDINGS", MODEL)
        .env("OPENAI_API_KEY", "sk-invented")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
}

fn replies(n: usize) -> Arc<RecordingModel> {
    let replies = (0..n).map(|_| reply_json("Here is what we have."));
    Arc::new(RecordingModel::new(Arc::new(ScriptedModel::replies(
        replies,
    ))))
}

/// Waits until the config in force has a vector for each of its offerings.
async fn until_embedded(app: &TestApp) {
    until(async || series(app, "knowledge_embedding_vectors").await == OFFERINGS as f64).await;
}

/// The content hashes of the config in force's offerings, in catalog order.
fn hashes(config: &TenantConfig) -> Vec<String> {
    Knowledge::build(config)
        .embedding_texts(config)
        .iter()
        .map(|t| content_hash(t))
        .collect()
}

#[tokio::test]
async fn knowledge_embeddings_the_catalog_is_embedded_once_and_a_second_load_sends_nothing() {
    let server = embedding_server(None).await;
    let database = tempfile::tempdir().unwrap();
    let url = sqlite_file_url(database.path());

    let app = spawn_app_with(
        options(replies(0), &server)
            .env("DATABASE_URL", url.clone())
            .edit(|dir| english_shop(dir, |_| {})),
    )
    .await;
    until_embedded(&app).await;
    let sent = inputs(&server).await;
    assert_eq!(sent.len(), 1, "one batch for {OFFERINGS} offerings");
    assert_eq!(sent[0].len(), OFFERINGS);
    let config = app.config.snapshot();
    let name = &config.catalog.offerings[NEAR].name;
    assert!(sent[0].iter().any(|t| t.starts_with(name.as_str())));
    // The store holds one vector per offering, under the model and the text's hash.
    let stored = app.store.embeddings(MODEL, &hashes(&config)).await.unwrap();
    assert_eq!(stored.len(), OFFERINGS);
    assert_eq!(series(&app, "knowledge_embedded_total").await, 50.0);
    app.stop().await;

    // A second load of the same catalog on the same database: nothing is sent.
    let again = spawn_app_with(
        options(replies(0), &server)
            .env("DATABASE_URL", url)
            .edit(|dir| english_shop(dir, |_| {})),
    )
    .await;
    until_embedded(&again).await;
    assert_eq!(
        inputs(&server).await.len(),
        1,
        "the database had every vector"
    );
    assert_eq!(series(&again, "knowledge_embedded_total").await, 0.0);
    again.stop().await;
}

#[tokio::test]
async fn knowledge_embeddings_a_changed_offering_is_embedded_again_alone_on_a_reload() {
    let server = embedding_server(None).await;
    let app =
        spawn_app_with(options(replies(1), &server).edit(|dir| english_shop(dir, |_| {}))).await;
    until_embedded(&app).await;
    assert_eq!(inputs(&server).await.len(), 1);

    // One offering's description changes; the reload is applied, and the next turn runs on it.
    let changed = "A tent for storms, now with taped seams.";
    english_shop(&app.config_dir, |catalog| {
        catalog.offerings[3].description = changed.into();
    });
    let outcome = app.config.reload_bounded(Duration::from_secs(10)).await;
    assert!(
        matches!(outcome, manychat_agent::config::ReloadOutcome::Applied),
        "{outcome:?}"
    );
    let (status, _) = app.send("7401", "hello").await;
    assert_eq!(status, 200);
    until(async || series(&app, "knowledge_embedded_total").await == (OFFERINGS + 1) as f64).await;
    let sent = inputs(&server).await;
    let asked_for_catalog: Vec<&Vec<String>> = sent
        .iter()
        .filter(|input| input.as_slice() != ["hello"])
        .collect();
    assert_eq!(asked_for_catalog.len(), 2, "{sent:?}");
    assert_eq!(asked_for_catalog[1].len(), 1, "the changed offering alone");
    assert!(asked_for_catalog[1][0].contains(changed));
    let config = app.config.snapshot();
    let stored = app.store.embeddings(MODEL, &hashes(&config)).await.unwrap();
    assert_eq!(stored.len(), OFFERINGS, "the new text's vector is kept too");
    app.stop().await;
}

#[tokio::test]
async fn knowledge_embeddings_a_message_sharing_no_word_retrieves_the_offering_near_it() {
    let server = embedding_server(None).await;
    let model = replies(1);
    let app =
        spawn_app_with(options(model.clone(), &server).edit(|dir| english_shop(dir, |_| {}))).await;
    until_embedded(&app).await;
    let near = app.config.snapshot().catalog.offerings[NEAR].clone();

    let (status, _) = app.send("7402", MESSAGE).await;
    assert_eq!(status, 200);
    // The message went to the embedding provider, once, alone.
    let sent = inputs(&server).await;
    assert_eq!(sent.last().unwrap(), &vec![MESSAGE.to_owned()]);
    // The model was given the near offering, and the turn's record names it.
    let request = model.requests().remove(0);
    assert!(
        format!("{:?}", request.messages).contains(&near.name),
        "the retrieved block lists {}",
        near.name
    );
    app.settle().await;
    let agent = app
        .turns("7402")
        .await
        .into_iter()
        .rev()
        .find(|t| t.role == Role::Agent)
        .unwrap();
    let given = app.store.turn_knowledge(agent.id).await.unwrap().unwrap();
    assert_eq!(given["offerings"], json!([near.id]), "{given}");
    assert_eq!(given["miss"], false);
    app.stop().await;
}

#[tokio::test]
async fn knowledge_embeddings_provider_down_the_turn_answers_by_full_text_and_it_is_counted() {
    let logs = manychat_agent::observability::capture_global();
    let server = embedding_server(None).await;
    let model = replies(1);
    let app =
        spawn_app_with(options(model.clone(), &server).edit(|dir| english_shop(dir, |_| {}))).await;
    until_embedded(&app).await;
    server.reset().await;
    Mock::given(wiremock::matchers::method("POST"))
        .respond_with(
            ResponseTemplate::new(500)
                .set_body_json(json!({"error": {"type": "server_error", "message": MESSAGE}})),
        )
        .mount(&server)
        .await;
    let named = app.config.snapshot().catalog.offerings[5].clone();

    // The message carries an invented name, which no log line may hold (C5).
    let message = format!(
        "How much is the {}? Ask for Quentin Marlowe-Fairweather",
        named.name
    );
    let (status, body) = app.send("7403", &message).await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec!["Here is what we have."]);
    app.settle().await;
    let agent = app
        .turns("7403")
        .await
        .into_iter()
        .rev()
        .find(|t| t.role == Role::Agent)
        .unwrap();
    let given = app.store.turn_knowledge(agent.id).await.unwrap().unwrap();
    assert_eq!(
        given["offerings"][0],
        named.id.as_str(),
        "full text found it"
    );
    let metrics = app.metrics_text().await;
    assert_metric(
        &metrics,
        "manychat_agent_knowledge_embedding_failures_total{stage=\"query\"} 1",
    );
    app.stop().await;
    let text = logs.text();
    assert!(
        text.contains("the message could not be embedded"),
        "the failure is logged"
    );
    for secret in ["Marlowe-Fairweather", MESSAGE] {
        assert!(!text.contains(secret), "{secret} reached a log line");
    }
}

#[tokio::test(start_paused = true)]
async fn knowledge_embeddings_provider_slow_the_turn_waits_800_ms_then_answers_by_full_text() {
    let server = embedding_server(Some(MESSAGE)).await;
    let model = replies(1);
    let _frozen = FrozenClock::freeze();
    let app =
        spawn_app_with(options(model.clone(), &server).edit(|dir| english_shop(dir, |_| {}))).await;
    until_embedded(&app).await;

    let request = send_in_background(&app, "7404", MESSAGE);
    until(async || inputs(&server).await.len() == 2).await;
    // Short of the bound, the turn still waits for the vector.
    tokio::time::advance(Duration::from_millis(790)).await;
    let_tasks_run().await;
    assert_eq!(model.requests().len(), 0, "the model waits for retrieval");
    tokio::time::advance(Duration::from_millis(10)).await;
    let (status, body) = request.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec!["Here is what we have."]);
    let request = model.requests().remove(0);
    assert!(
        format!("{:?}", request.messages).contains("(no offering matched this turn)"),
        "full text alone finds nothing for the message"
    );
    let metrics = app.metrics_text().await;
    assert_metric(
        &metrics,
        "manychat_agent_knowledge_embedding_failures_total{stage=\"query\"} 1",
    );
    app.stop().await;
}

/// `config check --env` with `KNOWLEDGE_EMBEDDINGS` set to `value`, in an environment `serve`
/// would otherwise accept (no OpenAI key: the model is the demo's).
fn config_check(value: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_demo_tenant(&config);
    let env: Vec<(&str, String)> = vec![
        ("CONFIG_DIR", config.display().to_string()),
        (
            "DATABASE_URL",
            format!("sqlite://{}", dir.path().join("agent.db").display()),
        ),
        ("AGENT_MODEL", "mock:demo".into()),
        ("MANYCHAT_SHARED_SECRET", SECRET.into()),
        ("PUBLIC_BASE_URL", "https://agent.example.test".into()),
        ("MANYCHAT_API_TOKEN", "123:test-token".into()),
        ("MANYCHAT_REPLY_FLOW_NS", "content20250101_reply".into()),
        ("KNOWLEDGE_EMBEDDINGS", value.into()),
    ];
    std::process::Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
        .args(["config", "check", "--env"])
        .env_clear()
        .envs(env.iter().map(|(n, v)| (*n, v.as_str())))
        .output()
        .unwrap()
}

#[test]
fn knowledge_embeddings_a_bad_value_is_refused_naming_the_variable_and_the_allowed_forms() {
    for bad in [
        "text-embedding-3-small",
        "cohere:embed-v3",
        "sk-pasted:abc def",
    ] {
        let output = config_check(bad);
        assert_eq!(output.status.code(), Some(1), "{bad}: {output:?}");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let line = said
            .lines()
            .find(|l| l.contains("KNOWLEDGE_EMBEDDINGS"))
            .unwrap_or_else(|| panic!("{bad}: the variable is named: {said}"));
        for form in ["openai:<model>", "gemini:<model>", "ollama:<model>"] {
            assert!(line.contains(form), "{bad}: {line}");
        }
        assert!(
            !said.contains("sk-pasted"),
            "the value is never echoed: {said}"
        );
    }
    // A known provider without its key: the key's variable is named.
    let output = config_check("openai:text-embedding-3-small");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let said = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    assert!(
        said.lines()
            .any(|l| l.contains("OPENAI_API_KEY") && l.contains("KNOWLEDGE_EMBEDDINGS")),
        "{said}"
    );
    // A valid one passes.
    let output = config_check("ollama:nomic-embed-text");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}
