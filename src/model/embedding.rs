//! Text embeddings for the knowledge's optional semantic search (`KNOWLEDGE_EMBEDDINGS`,
//! `provider:model`), resolved here beside `AGENT_MODEL` so an embedding provider's wire format
//! stays inside the model registry (C2). One [`Embedder`] per wire format, each the provider's
//! own batch endpoint, with the keys and base URLs the model providers read:
//!
//! - `openai:<model>`: `POST {OPENAI_BASE_URL}/embeddings` with `OPENAI_API_KEY` as a bearer
//!   token, `{"model", "input": [..], "encoding_format": "float"}`, answered
//!   `{"data": [{"index", "embedding": [..]}, ..]}`.
//! - `gemini:<model>`: `POST {GOOGLE_BASE_URL}/models/{model}:batchEmbedContents` with
//!   `GOOGLE_GENERATIVE_AI_API_KEY` in `x-goog-api-key`, one `{"model", "content": {"parts":
//!   [{"text"}]}, "taskType"}` per text (`RETRIEVAL_DOCUMENT` for the catalog,
//!   `RETRIEVAL_QUERY` for a contact's message), answered `{"embeddings": [{"values": [..]}]}`.
//! - `ollama:<model>`: `POST {OLLAMA_BASE_URL}/api/embed`, `{"model", "input": [..]}`, answered
//!   `{"embeddings": [[..], ..]}`.
//!
//! Invariants: a batch is at most [`BATCH_SIZE`] texts (under every provider's own limit: Gemini
//! takes 100 a request), each cut to [`MAX_TEXT_CHARS`]; an answer holds one vector per text, in
//! order, all of one length, or it is `Malformed`. No error or log line carries a text or a
//! provider's body (`transport` summarises failures to a status and an error token).

use std::sync::Arc;

use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ModelEnv, ModelError, transport};

/// The providers `KNOWLEDGE_EMBEDDINGS` names.
pub const EMBEDDING_PROVIDERS: &[&str] = &["openai", "gemini", "ollama"];

/// The forms `KNOWLEDGE_EMBEDDINGS` takes, as its settings error says them.
pub const EMBEDDING_FORMS: &str = "openai:<model> (e.g. openai:text-embedding-3-small), \
     gemini:<model> (e.g. gemini:text-embedding-004) or ollama:<model> (e.g. \
     ollama:nomic-embed-text)";

/// Texts per request: under Gemini's 100 a batch and OpenAI's 2,048 inputs, and small enough
/// that one failed batch costs little.
pub const BATCH_SIZE: usize = 64;

/// A text is cut to this many characters before it is sent (about 2,000 tokens, under every
/// model's input limit); offerings and passages are far shorter.
pub const MAX_TEXT_CHARS: usize = 8_000;

/// What a text is embedded for: Gemini embeds a document and a query differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// An offering or a passage, stored.
    Document,
    /// A contact's message, searched with.
    Query,
}

/// Texts to vectors, as the knowledge's semantic search uses it. Cancellation is by dropping
/// the future (a turn's timeout).
#[async_trait]
pub trait Embedder: Send + Sync {
    /// `provider:model`: the key the stored vectors are kept under.
    fn id(&self) -> &str;
    /// One vector per text, in order (at most [`BATCH_SIZE`] texts).
    async fn embed(&self, texts: &[&str], purpose: Purpose) -> Result<Vec<Vec<f32>>, ModelError>;
}

/// A parsed `KNOWLEDGE_EMBEDDINGS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingSpec {
    pub provider: &'static str,
    pub model: String,
}

impl EmbeddingSpec {
    /// `provider:model` with a known provider and a model name; the rule broken otherwise
    /// (never echoing the value: a mistyped spec may hold a pasted key).
    pub fn parse(raw: &str) -> Result<Self, String> {
        let rule = || format!("must be {EMBEDDING_FORMS}");
        let (provider, model) = raw.trim().split_once(':').ok_or_else(rule)?;
        let provider = EMBEDDING_PROVIDERS
            .iter()
            .find(|p| **p == provider)
            .ok_or_else(rule)?;
        let model = model.trim();
        if model.is_empty() {
            return Err(format!("names no model after the provider; {}", rule()));
        }
        // The name goes into Gemini's URL path and every request body: the characters model
        // names use (an Ollama tag may hold a colon or a slash).
        if !model
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':' | b'/'))
        {
            return Err(
                "the model name may hold only letters, digits, '-', '.', '_', ':' and '/'".into(),
            );
        }
        Ok(Self {
            provider,
            model: model.to_owned(),
        })
    }

    /// `provider:model`.
    pub fn id(&self) -> String {
        format!("{}:{}", self.provider, self.model)
    }
}

/// The embedder `spec` names, built from the model providers' variables in `env`.
pub fn resolve_embedder(
    spec: &EmbeddingSpec,
    env: &ModelEnv,
) -> Result<Arc<dyn Embedder>, ModelError> {
    let missing = |variable: &str| {
        ModelError::Config(format!(
            "{variable} is required when KNOWLEDGE_EMBEDDINGS's provider is {}",
            spec.provider
        ))
    };
    let model = spec.model.as_str();
    Ok(match spec.provider {
        "openai" => {
            let key = env
                .openai_api_key
                .as_ref()
                .ok_or_else(|| missing("OPENAI_API_KEY"))?;
            let base = transport::normalise_base_url(&env.openai_base_url, "OPENAI_BASE_URL")?;
            let bearer = format!("Bearer {}", key.expose());
            let headers = transport::secret_headers(AUTHORIZATION, &bearer, "OPENAI_API_KEY")?;
            Arc::new(OpenAiEmbedder(Endpoint::new(
                spec,
                format!("{base}/embeddings"),
                headers,
            )?))
        }
        "gemini" => {
            let key = env
                .google_api_key
                .as_ref()
                .ok_or_else(|| missing(super::google::API_KEY_VAR))?;
            let base = transport::normalise_base_url(&env.google_base_url, "GOOGLE_BASE_URL")?;
            let name = model.strip_prefix("models/").unwrap_or(model);
            let headers = transport::secret_headers(
                HeaderName::from_static("x-goog-api-key"),
                key.expose(),
                super::google::API_KEY_VAR,
            )?;
            Arc::new(GeminiEmbedder(Endpoint::new(
                spec,
                format!("{base}/models/{name}:batchEmbedContents"),
                headers,
            )?))
        }
        "ollama" => {
            let base = transport::normalise_base_url(&env.ollama_base_url, "OLLAMA_BASE_URL")?;
            Arc::new(OllamaEmbedder(Endpoint::new(
                spec,
                format!("{base}/api/embed"),
                HeaderMap::new(),
            )?))
        }
        _ => {
            return Err(ModelError::Config(format!(
                "KNOWLEDGE_EMBEDDINGS must be {EMBEDDING_FORMS}"
            )));
        }
    })
}

/// Where one provider's embeddings are asked for.
struct Endpoint {
    id: String,
    /// `provider` for log lines.
    provider: &'static str,
    model: String,
    url: String,
    headers: HeaderMap,
    client: reqwest::Client,
}

impl Endpoint {
    fn new(spec: &EmbeddingSpec, url: String, headers: HeaderMap) -> Result<Self, ModelError> {
        Ok(Self {
            id: spec.id(),
            provider: spec.provider,
            model: spec.model.clone(),
            url,
            headers,
            client: transport::build_client()?,
        })
    }

    async fn post(&self, body: Value) -> Result<Vec<u8>, ModelError> {
        transport::post_json(&self.client, self.provider, &self.url, &self.headers, body).await
    }
}

/// A text as it is sent: cut to [`MAX_TEXT_CHARS`] characters.
fn bounded(text: &str) -> &str {
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// `vectors` when they are one per text and all of one non-zero length.
fn checked(vectors: Vec<Vec<f32>>, texts: usize) -> Result<Vec<Vec<f32>>, ModelError> {
    if vectors.len() != texts {
        return Err(ModelError::Malformed(format!(
            "{} embeddings for {texts} texts",
            vectors.len()
        )));
    }
    let len = vectors.first().map_or(0, Vec::len);
    if texts > 0 && (len == 0 || vectors.iter().any(|v| v.len() != len)) {
        return Err(ModelError::Malformed(
            "embeddings of different or zero lengths".into(),
        ));
    }
    Ok(vectors)
}

fn parse<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, ModelError> {
    serde_json::from_slice(bytes).map_err(|_| {
        ModelError::Malformed("the embeddings answer is not the documented JSON".into())
    })
}

/// OpenAI's `/embeddings` (and the servers compatible with it).
pub struct OpenAiEmbedder(Endpoint);

#[derive(Deserialize)]
struct OpenAiAnswer {
    data: Vec<OpenAiItem>,
}

#[derive(Deserialize)]
struct OpenAiItem {
    index: usize,
    embedding: Vec<f32>,
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn id(&self) -> &str {
        &self.0.id
    }

    async fn embed(&self, texts: &[&str], _: Purpose) -> Result<Vec<Vec<f32>>, ModelError> {
        let input: Vec<&str> = texts.iter().map(|t| bounded(t)).collect();
        let body = json!({"model": self.0.model, "input": input, "encoding_format": "float"});
        let mut answer: OpenAiAnswer = parse(&self.0.post(body).await?)?;
        // `data` is in input order; `index` says so, and is trusted over the position.
        answer.data.sort_by_key(|item| item.index);
        if answer
            .data
            .iter()
            .enumerate()
            .any(|(i, item)| item.index != i)
        {
            return Err(ModelError::Malformed(
                "embedding indexes out of range".into(),
            ));
        }
        checked(
            answer.data.into_iter().map(|item| item.embedding).collect(),
            texts.len(),
        )
    }
}

/// Gemini's `batchEmbedContents`.
pub struct GeminiEmbedder(Endpoint);

#[derive(Deserialize)]
struct GeminiAnswer {
    embeddings: Vec<GeminiValues>,
}

#[derive(Deserialize)]
struct GeminiValues {
    values: Vec<f32>,
}

#[async_trait]
impl Embedder for GeminiEmbedder {
    fn id(&self) -> &str {
        &self.0.id
    }

    async fn embed(&self, texts: &[&str], purpose: Purpose) -> Result<Vec<Vec<f32>>, ModelError> {
        let name = self
            .0
            .model
            .strip_prefix("models/")
            .unwrap_or(&self.0.model);
        let task = match purpose {
            Purpose::Document => "RETRIEVAL_DOCUMENT",
            Purpose::Query => "RETRIEVAL_QUERY",
        };
        let requests: Vec<Value> = texts
            .iter()
            .map(|text| {
                json!({
                    "model": format!("models/{name}"),
                    "content": {"parts": [{"text": bounded(text)}]},
                    "taskType": task,
                })
            })
            .collect();
        let answer: GeminiAnswer = parse(&self.0.post(json!({"requests": requests})).await?)?;
        checked(
            answer.embeddings.into_iter().map(|e| e.values).collect(),
            texts.len(),
        )
    }
}

/// Ollama's `/api/embed`.
pub struct OllamaEmbedder(Endpoint);

#[derive(Deserialize)]
struct OllamaAnswer {
    embeddings: Vec<Vec<f32>>,
}

#[async_trait]
impl Embedder for OllamaEmbedder {
    fn id(&self) -> &str {
        &self.0.id
    }

    async fn embed(&self, texts: &[&str], _: Purpose) -> Result<Vec<Vec<f32>>, ModelError> {
        let input: Vec<&str> = texts.iter().map(|t| bounded(t)).collect();
        let body = json!({"model": self.0.model, "input": input});
        let answer: OllamaAnswer = parse(&self.0.post(body).await?)?;
        checked(answer.embeddings, texts.len())
    }
}

/// A fake for tests: each text's vector is the first rule whose word it contains (the rules'
/// vectors chosen by the test), else a fixed pseudo-random one from the text, nearly orthogonal
/// to every other; it counts what it was asked.
#[doc(hidden)]
pub struct FakeEmbedder {
    pub rules: Vec<(String, Vec<f32>)>,
    pub dimensions: usize,
    /// Every call's texts, in order.
    pub asked: std::sync::Mutex<Vec<Vec<String>>>,
    /// Fails every call when set.
    pub down: std::sync::atomic::AtomicBool,
}

impl FakeEmbedder {
    pub fn new(rules: Vec<(&str, Vec<f32>)>, dimensions: usize) -> Self {
        Self {
            rules: rules.into_iter().map(|(w, v)| (w.to_owned(), v)).collect(),
            dimensions,
            asked: Default::default(),
            down: Default::default(),
        }
    }

    /// The vector the fake gives `text`.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let lower = text.to_lowercase();
        if let Some((_, v)) = self.rules.iter().find(|(w, _)| lower.contains(w.as_str())) {
            let mut v = v.clone();
            v.resize(self.dimensions, 0.0);
            return v;
        }
        pseudo_random(text, self.dimensions)
    }

    /// Every text it was asked to embed, in order.
    pub fn asked(&self) -> Vec<String> {
        self.calls().concat()
    }

    /// Each call's texts.
    pub fn calls(&self) -> Vec<Vec<String>> {
        self.asked.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A fixed vector in `[-1, 1]^dimensions` from `text` (FNV-1a seeding an LCG).
#[doc(hidden)]
pub fn pseudo_random(text: &str, dimensions: usize) -> Vec<f32> {
    let mut state = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (0..dimensions)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[async_trait]
impl Embedder for FakeEmbedder {
    fn id(&self) -> &str {
        "fake:embedder"
    }

    async fn embed(&self, texts: &[&str], _: Purpose) -> Result<Vec<Vec<f32>>, ModelError> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ModelError::Http {
                status: 503,
                kind: "unavailable".into(),
            });
        }
        let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        asked.push(texts.iter().map(|t| (*t).to_owned()).collect());
        Ok(texts.iter().map(|t| self.vector(t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use wiremock::matchers::{body_partial_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::ids::Secret;

    fn env(base: &str) -> ModelEnv {
        ModelEnv {
            openai_api_key: Some(Secret::new("sk-test")),
            openai_base_url: base.to_owned(),
            google_api_key: Some(Secret::new("g-test")),
            google_base_url: base.to_owned(),
            ollama_base_url: base.to_owned(),
            ..ModelEnv::default()
        }
    }

    fn spec(raw: &str) -> EmbeddingSpec {
        EmbeddingSpec::parse(raw).expect("a valid spec")
    }

    #[test]
    fn knowledge_embeddings_spec_takes_the_three_providers_and_names_the_forms_otherwise() {
        assert_eq!(
            spec("openai:text-embedding-3-small").id(),
            "openai:text-embedding-3-small"
        );
        assert_eq!(spec("gemini:text-embedding-004").provider, "gemini");
        assert_eq!(
            spec("ollama:nomic-embed-text:v1.5").model,
            "nomic-embed-text:v1.5"
        );
        for bad in ["openai", "cohere:embed-v3", "openai:", ":x", "sk-abc123"] {
            let rule = EmbeddingSpec::parse(bad).expect_err(bad);
            assert!(
                rule.contains("openai:<model>") && rule.contains("ollama:<model>"),
                "{rule}"
            );
            assert!(!rule.contains("sk-abc123"), "the value is never echoed");
        }
        assert!(EmbeddingSpec::parse("openai:a b").is_err());
    }

    #[tokio::test]
    async fn knowledge_embeddings_openai_posts_the_documented_body_and_reads_data_by_index() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/embeddings"))
            .and(header("authorization", "Bearer sk-test"))
            .and(body_partial_json(json!({
                "model": "text-embedding-3-small",
                "input": ["tent", "stove"],
                "encoding_format": "float"
            })))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "object": "list",
                "data": [
                    {"object": "embedding", "index": 1, "embedding": [0.0, 1.0]},
                    {"object": "embedding", "index": 0, "embedding": [1.0, 0.0]}
                ],
                "model": "text-embedding-3-small",
                "usage": {"prompt_tokens": 2, "total_tokens": 2}
            })))
            .expect(1)
            .mount(&server)
            .await;
        let embedder =
            resolve_embedder(&spec("openai:text-embedding-3-small"), &env(&server.uri())).unwrap();
        let vectors = embedder
            .embed(&["tent", "stove"], Purpose::Document)
            .await
            .unwrap();
        assert_eq!(vectors, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
    }

    #[tokio::test]
    async fn knowledge_embeddings_gemini_batches_with_the_task_type_and_reads_values() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/models/text-embedding-004:batchEmbedContents"))
            .and(header("x-goog-api-key", "g-test"))
            .and(body_partial_json(json!({"requests": [{
                "model": "models/text-embedding-004",
                "content": {"parts": [{"text": "rain"}]},
                "taskType": "RETRIEVAL_QUERY"
            }]})))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"embeddings": [{"values": [0.5, 0.5]}]})),
            )
            .expect(1)
            .mount(&server)
            .await;
        let embedder =
            resolve_embedder(&spec("gemini:text-embedding-004"), &env(&server.uri())).unwrap();
        let vectors = embedder.embed(&["rain"], Purpose::Query).await.unwrap();
        assert_eq!(vectors, vec![vec![0.5, 0.5]]);
    }

    #[tokio::test]
    async fn knowledge_embeddings_ollama_posts_api_embed_and_a_short_answer_is_malformed() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/api/embed"))
            .and(body_partial_json(
                json!({"model": "nomic-embed-text", "input": ["a", "b"]}),
            ))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(
                    json!({"model": "nomic-embed-text", "embeddings": [[0.1, 0.2]]}),
                ),
            )
            .mount(&server)
            .await;
        let embedder =
            resolve_embedder(&spec("ollama:nomic-embed-text"), &env(&server.uri())).unwrap();
        let error = embedder
            .embed(&["a", "b"], Purpose::Document)
            .await
            .unwrap_err();
        assert!(matches!(error, ModelError::Malformed(_)), "{error}");
    }

    #[test]
    fn knowledge_embeddings_a_provider_without_its_key_names_the_variable() {
        let mut env = env("http://127.0.0.1:1");
        env.openai_api_key = None;
        let Err(error) = resolve_embedder(&spec("openai:text-embedding-3-small"), &env) else {
            panic!("resolved without a key");
        };
        assert!(error.to_string().contains("OPENAI_API_KEY"), "{error}");
    }

    #[test]
    fn knowledge_embeddings_texts_are_cut_to_the_bound_on_a_character_boundary() {
        let long = "é".repeat(MAX_TEXT_CHARS + 5);
        assert_eq!(bounded(&long).chars().count(), MAX_TEXT_CHARS);
        assert_eq!(bounded("short"), "short");
    }
}
