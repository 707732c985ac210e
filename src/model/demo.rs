//! Placeholder for `mock:demo`: the demo model is written by another helper and replaces this
//! file at merge. Until then it answers every step with one fixed, valid AgentReply.
//!
//! The text below is mock output for demos and tests, not tenant copy.

use async_trait::async_trait;

use super::mock::{estimate_usage, reply};
use super::{Model, ModelError, ModelRequest, ModelResponse};

/// The fixed answer of this placeholder.
const REPLY: &str = r#"{"messages":["(mock:demo) This is a placeholder demo answer."],"escalate":false,"escalation_reason":null,"confidence":0.9,"closing_question":null}"#;

pub struct DemoModel;

impl DemoModel {
    pub fn new() -> Self {
        DemoModel
    }
}

impl Default for DemoModel {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Model for DemoModel {
    fn id(&self) -> &str {
        "mock:demo"
    }

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let mut response = reply(REPLY);
        response.usage = estimate_usage(request, &response);
        Ok(response)
    }
}
