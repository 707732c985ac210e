//! One signed call to a tool's endpoint: `POST <url>` with
//! `{"tool", "subscriber_id", "arguments"}`, the Standard Webhooks headers, a `User-Agent`
//! naming the service and its version, no redirect followed, the answer capped at
//! [`MAX_ANSWER_BYTES`], and the whole call (answer included) bounded by the caller's timeout.
//!
//! Invariant: an error names what went wrong (a status, a timeout, the secret's variable),
//! never the arguments, the subscriber or the secret (C5).

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::sign::{self, SecretLookup};
use crate::config::plugins::{PluginTool, PluginsConfig};
use crate::ids::SubscriberId;

/// The largest answer read from an endpoint.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The `User-Agent` every call carries.
pub const USER_AGENT: &str = concat!("manychat-agent/", env!("CARGO_PKG_VERSION"));

/// Why a call did not answer 2xx with a readable body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("the signing secret in {0} {1}")]
    Secret(String, &'static str),
    #[error("timed out after {0} ms")]
    Timeout(u128),
    #[error("answered HTTP {0}")]
    Status(u16),
    #[error("the answer is larger than 64 KiB")]
    TooLarge,
    #[error("could not connect to the endpoint")]
    Connect,
    #[error("the request failed")]
    Transport,
}

/// A 2xx answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// The client every tool call goes through; cheap to clone (shared).
#[derive(Clone)]
pub struct PluginClient {
    http: reqwest::Client,
    secrets: SecretLookup,
    /// Where a read's call is counted (`actions_total` under the tool's name).
    metrics: Option<std::sync::Arc<crate::metrics::Metrics>>,
}

impl Default for PluginClient {
    /// Secrets from the process environment.
    fn default() -> Self {
        Self::new(sign::process_env())
    }
}

impl PluginClient {
    pub fn new(secrets: SecretLookup) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(USER_AGENT)
            .build()
            .unwrap_or_default();
        Self {
            http,
            secrets,
            metrics: None,
        }
    }

    /// Counts each read's call into `metrics` (the service's).
    pub fn with_metrics(mut self, metrics: std::sync::Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Where a read's call is counted, if anywhere.
    pub fn metrics(&self) -> Option<&crate::metrics::Metrics> {
        self.metrics.as_deref()
    }

    /// Every tool whose secret is missing or malformed, as `VARIABLE rule` lines (`serve`
    /// refuses to start on any; a reload keeps the old config).
    pub fn secret_problems(&self, config: Option<&PluginsConfig>) -> Vec<String> {
        let mut problems: Vec<String> = Vec::new();
        for tool in config.map(|c| c.tools.as_slice()).unwrap_or_default() {
            if let Some(rule) = sign::secret_problem((self.secrets)(&tool.secret_env).as_deref()) {
                let line = format!(
                    "{} {rule} (plugins.json tool {})",
                    tool.secret_env, tool.name
                );
                if !problems.contains(&line) {
                    problems.push(line);
                }
            }
        }
        problems
    }

    /// The same problems as config issues (`plugins.json`, the tool's `secretEnv` path, the
    /// variable and its rule; never its value), for a reload to refuse the set on.
    pub fn secret_issues(&self, config: Option<&PluginsConfig>) -> Vec<crate::config::ConfigIssue> {
        let tools = config.map(|c| c.tools.as_slice()).unwrap_or_default();
        tools
            .iter()
            .enumerate()
            .filter_map(|(i, tool)| {
                let rule = sign::secret_problem((self.secrets)(&tool.secret_env).as_deref())?;
                Some(crate::config::ConfigIssue::new(
                    "plugins.json",
                    format!("$.tools[{i}].secretEnv"),
                    format!(
                        "the environment variable {} {rule}: tool {} could not sign its calls",
                        tool.secret_env, tool.name
                    ),
                ))
            })
            .collect()
    }

    /// The reload check (`ConfigHandle::check_with`): a set whose plugin tools cannot all sign
    /// is refused like a bad config, and the one in force stays.
    pub fn reload_check(&self) -> crate::config::handle::EnvCheck {
        let client = self.clone();
        Box::new(move |_, config| client.secret_issues(config.plugins.as_ref()))
    }

    /// Calls `tool` for `subscriber` with `arguments`, within `timeout`.
    pub async fn call(
        &self,
        tool: &PluginTool,
        subscriber: &SubscriberId,
        arguments: &Map<String, Value>,
        timeout: Duration,
    ) -> Result<Answer, CallError> {
        let body = request_body(tool, subscriber, arguments);
        let secret = (self.secrets)(&tool.secret_env);
        let problem = sign::secret_problem(secret.as_deref());
        let signed = match (secret, problem) {
            (Some(secret), None) => sign::sign(&secret, &body, chrono::Utc::now().timestamp()),
            _ => None,
        }
        .ok_or_else(|| {
            CallError::Secret(tool.secret_env.clone(), problem.unwrap_or("cannot sign"))
        })?;
        let request = self
            .http
            .post(&tool.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(sign::HEADER_WEBHOOK_ID, &signed.id)
            .header(sign::HEADER_WEBHOOK_TIMESTAMP, signed.timestamp.to_string())
            .header(sign::HEADER_WEBHOOK_SIGNATURE, &signed.signature)
            .body(body);
        match tokio::time::timeout(timeout, send(request)).await {
            Ok(answer) => answer,
            Err(_) => Err(CallError::Timeout(timeout.as_millis())),
        }
    }
}

/// The exact body a call sends: the tool, the turn's subscriber (never a model's argument, C4)
/// and the checked arguments.
pub fn request_body(
    tool: &PluginTool,
    subscriber: &SubscriberId,
    arguments: &Map<String, Value>,
) -> String {
    json!({
        "tool": tool.name,
        "subscriber_id": subscriber.as_str(),
        "arguments": arguments,
    })
    .to_string()
}

async fn send(request: reqwest::RequestBuilder) -> Result<Answer, CallError> {
    let mut response = request.send().await.map_err(|error| {
        if error.is_connect() {
            CallError::Connect
        } else {
            CallError::Transport
        }
    })?;
    let status = response.status().as_u16();
    if !response.status().is_success() {
        return Err(CallError::Status(status));
    }
    if response
        .content_length()
        .is_some_and(|length| length > MAX_ANSWER_BYTES as u64)
    {
        return Err(CallError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|_| CallError::Transport)? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(CallError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Answer { status, body })
}
