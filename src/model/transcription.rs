//! Speech to text (020): `TRANSCRIPTION_MODEL` (`provider:model`) resolved here, beside
//! `AGENT_MODEL`, so a transcription provider's wire format stays inside the model registry (C2).
//!
//! - `openai:<model>` posts the clip as `multipart/form-data` (`file`, `model`,
//!   `response_format=json`) to `OPENAI_BASE_URL` + `/audio/transcriptions` and reads `text`, so
//!   OpenAI, Groq or a local Whisper server answer it alike.
//! - `mock:demo` is the demo's built-in fake: it answers every clip with one fixed, fictional
//!   sentence, offline.
//!
//! Cost: a response that reports `usage.type = "duration"` is priced by its seconds; otherwise
//! by the clip's known duration, or (a voice note) estimated from its size at 8 kbit/s, the
//! lowest bitrate WhatsApp records at, so the estimate never undercounts. A model without a
//! known price is priced at the dearest known rate (C4: the budget is never underestimated).
//!
//! Invariant: no error or log line carries the audio, the transcript or a provider's body.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;

use super::{ModelEnv, ModelError};
use crate::ids::Secret;

/// The transcription providers `resolve_transcriber` knows.
pub const TRANSCRIPTION_PROVIDERS: &[&str] = &["openai", "mock"];

/// What the demo transcriber hears in every clip (fictional).
pub const DEMO_TRANSCRIPT: &str = "Hi, this is a voice note: do you still have places in the Saturday morning class, and how much is it?";

/// One clip to transcribe: a file the media pipeline wrote. It is read once, straight into the
/// upload's body, so a clip is never held twice in memory.
#[derive(Clone)]
pub struct AudioClip {
    pub path: std::path::PathBuf,
    /// The file's size in bytes.
    pub len: u64,
    /// The file name sent with the upload; its extension tells the provider the format.
    pub file_name: &'static str,
    pub media_type: &'static str,
    /// The clip's length when known (a video's soundtrack); a voice note's is estimated.
    pub duration: Option<Duration>,
}

impl std::fmt::Debug for AudioClip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AudioClip")
            .field("len", &self.len)
            .field("file_name", &self.file_name)
            .finish()
    }
}

/// A transcript and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    pub text: String,
    pub cost_usd: f64,
}

/// Speech to text, as the media pipeline uses it. Cancellation is by dropping the future.
#[async_trait]
pub trait Transcriber: Send + Sync {
    /// `provider:model`.
    fn id(&self) -> &str;
    async fn transcribe(&self, clip: AudioClip) -> Result<Transcript, ModelError>;
}

/// The transcriber `spec` names (`TRANSCRIPTION_MODEL`), built from `env`.
pub fn resolve_transcriber(spec: &str, env: &ModelEnv) -> Result<Arc<dyn Transcriber>, ModelError> {
    let spec = spec.trim();
    let Some((provider, model)) = spec.split_once(':').filter(|(_, m)| !m.is_empty()) else {
        return Err(ModelError::Config(
            "TRANSCRIPTION_MODEL must be provider:model, e.g. openai:gpt-4o-mini-transcribe".into(),
        ));
    };
    match (provider, model) {
        ("openai", model) => Ok(Arc::new(OpenAiTranscriber::new(
            model,
            env.openai_api_key.clone(),
            &env.openai_base_url,
        )?)),
        ("mock", "demo") => Ok(Arc::new(DemoTranscriber)),
        ("mock", _) => Err(ModelError::Config(
            "TRANSCRIPTION_MODEL names an unknown mock; known: mock:demo".into(),
        )),
        // The unknown provider is not echoed: a mistyped spec may hold a pasted key.
        _ => Err(ModelError::Config(format!(
            "TRANSCRIPTION_MODEL names an unknown provider; known: {}",
            TRANSCRIPTION_PROVIDERS.join(", ")
        ))),
    }
}

/// An OpenAI-compatible `/audio/transcriptions` endpoint.
pub struct OpenAiTranscriber {
    id: String,
    model: String,
    key: Option<Secret>,
    url: String,
    http: reqwest::Client,
}

impl OpenAiTranscriber {
    pub fn new(model: &str, key: Option<Secret>, base_url: &str) -> Result<Self, ModelError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ModelError::Config(format!("transcription HTTP client: {e}")))?;
        Ok(Self {
            id: format!("openai:{model}"),
            model: model.to_owned(),
            key,
            url: format!("{}/audio/transcriptions", base_url.trim_end_matches('/')),
            http,
        })
    }
}

/// The JSON response (`response_format=json`): `text`, and `usage` on newer models.
#[derive(Deserialize)]
struct TranscriptionResponse {
    text: String,
    #[serde(default)]
    usage: Option<TranscriptionUsage>,
}

#[derive(Deserialize)]
struct TranscriptionUsage {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    seconds: Option<f64>,
}

#[async_trait]
impl Transcriber for OpenAiTranscriber {
    fn id(&self) -> &str {
        &self.id
    }

    async fn transcribe(&self, clip: AudioClip) -> Result<Transcript, ModelError> {
        let (content_type, body) = multipart(&self.model, &clip)
            .await
            .map_err(|_| ModelError::Transport("could not read the clip".into()))?;
        let mut request = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body);
        if let Some(key) = &self.key {
            request = request.bearer_auth(key.expose());
        }
        let response = request
            .send()
            .await
            .map_err(|e| ModelError::Transport(summarise(&e)))?;
        let status = response.status();
        if status.as_u16() == 429 {
            return Err(ModelError::RateLimited);
        }
        if !status.is_success() {
            return Err(ModelError::Http {
                status: status.as_u16(),
                kind: "transcription".into(),
            });
        }
        let parsed: TranscriptionResponse = response
            .json()
            .await
            .map_err(|_| ModelError::Malformed("transcription response has no text".into()))?;
        let reported = parsed
            .usage
            .filter(|u| u.kind == "duration")
            .and_then(|u| u.seconds)
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        let duration = reported.unwrap_or_else(|| clip_duration(&clip));
        Ok(Transcript {
            text: parsed.text.trim().to_owned(),
            cost_usd: cost_usd(&self.model, duration),
        })
    }
}

/// The demo's offline transcriber.
pub struct DemoTranscriber;

#[async_trait]
impl Transcriber for DemoTranscriber {
    fn id(&self) -> &str {
        "mock:demo"
    }

    async fn transcribe(&self, _clip: AudioClip) -> Result<Transcript, ModelError> {
        Ok(Transcript {
            text: DEMO_TRANSCRIPT.to_owned(),
            cost_usd: 0.0,
        })
    }
}

/// The multipart body: `model`, `response_format`, then `file` (the clip, with its name and
/// type), the clip read from its file into the body directly.
async fn multipart(model: &str, clip: &AudioClip) -> std::io::Result<(String, Vec<u8>)> {
    use tokio::io::AsyncReadExt as _;
    let boundary = format!("----manychat-agent-{}", uuid::Uuid::new_v4().simple());
    let mut body = Vec::with_capacity(usize::try_from(clip.len).unwrap_or(0) + 512);
    let field = |body: &mut Vec<u8>, name: &str, value: &str| {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    };
    field(&mut body, "model", model);
    field(&mut body, "response_format", "json");
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{}\"\r\n\
             Content-Type: {}\r\n\r\n",
            clip.file_name, clip.media_type
        )
        .as_bytes(),
    );
    tokio::fs::File::open(&clip.path)
        .await?
        .read_to_end(&mut body)
        .await?;
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    Ok((format!("multipart/form-data; boundary={boundary}"), body))
}

/// The clip's duration: known, or estimated from its size at 8 kbit/s (1000 bytes a second).
fn clip_duration(clip: &AudioClip) -> Duration {
    clip.duration
        .unwrap_or_else(|| Duration::from_secs_f64(clip.len as f64 / 1000.0))
}

/// USD per minute of audio, by model; the dearest for a model not listed.
fn price_per_minute(model: &str) -> f64 {
    match model {
        "gpt-4o-mini-transcribe" => 0.003,
        "whisper-1" | "gpt-4o-transcribe" => 0.006,
        _ => 0.006,
    }
}

/// What `duration` of audio costs on `model`.
pub fn cost_usd(model: &str, duration: Duration) -> f64 {
    price_per_minute(model) * duration.as_secs_f64() / 60.0
}

/// A transport error without its URL (which names the provider's host, nothing personal, but
/// the message stays short and uniform).
fn summarise(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "timed out".into()
    } else if error.is_connect() {
        "could not connect".into()
    } else {
        "request failed".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_020_transcription_model_resolves_openai_and_the_demo_only() {
        let env = ModelEnv::default();
        assert_eq!(
            resolve_transcriber("openai:whisper-1", &env).unwrap().id(),
            "openai:whisper-1"
        );
        assert_eq!(
            resolve_transcriber("mock:demo", &env).unwrap().id(),
            "mock:demo"
        );
        for bad in ["whisper", "openai:", "acme:x", "mock:other"] {
            assert!(
                matches!(resolve_transcriber(bad, &env), Err(ModelError::Config(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn spec_020_cost_is_estimated_from_size_at_8_kbits_when_no_duration_is_known() {
        let clip = AudioClip {
            path: "unused.ogg".into(),
            len: 60_000,
            file_name: "voice.ogg",
            media_type: "audio/ogg",
            duration: None,
        };
        // 60 000 bytes at 1000 bytes/s = one minute.
        assert!((cost_usd("gpt-4o-mini-transcribe", clip_duration(&clip)) - 0.003).abs() < 1e-9);
        assert!((cost_usd("some-new-model", clip_duration(&clip)) - 0.006).abs() < 1e-9);
    }
}
