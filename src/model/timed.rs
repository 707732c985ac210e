//! A [`Model`] that times each call into `/metrics`, and counts the tokens and US dollars it was
//! billed: the one place every model call of every turn (inbound, deferred, nudge) passes, so no
//! call site measures.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Model, ModelError, ModelRequest, ModelResponse, StopReason};
use crate::metrics::{BilledUsage, Metrics};

pub struct TimedModel {
    inner: Arc<dyn Model>,
    metrics: Arc<Metrics>,
}

impl TimedModel {
    /// `inner`, its calls timed into `metrics`.
    pub fn wrap(inner: Arc<dyn Model>, metrics: Arc<Metrics>) -> Arc<dyn Model> {
        Arc::new(Self { inner, metrics })
    }
}

#[async_trait]
impl Model for TimedModel {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn accepts_images(&self) -> bool {
        self.inner.accepts_images()
    }

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        // tokio's clock, so a paused test clock times calls as it runs them. A call dropped at
        // the abort is not observed: `model_aborted_total` counts it.
        let started = tokio::time::Instant::now();
        let result = self.inner.step(request).await;
        let outcome = match &result {
            Ok(response) if response.stop == StopReason::Refused => "refused",
            Ok(_) => "ok",
            Err(_) => "error",
        };
        self.metrics.model_call(outcome, started.elapsed());
        if let Ok(response) = &result {
            // What the provider bills for the call, whatever the turn makes of it.
            let usage = response.usage;
            self.metrics.model_usage(BilledUsage {
                input_tokens: usage.input_tokens,
                cached_tokens: usage.cached_tokens,
                cache_write_tokens: usage.cache_write_tokens,
                output_tokens: usage.output_tokens,
                cost_usd: super::pricing::cost_usd(self.inner.id(), &usage),
            });
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::ids::Secret;
    use crate::model::ToolChoice;
    use crate::model::google::GoogleModel;
    use crate::model::test_support::{VALID_REPLY, first_step};

    #[tokio::test]
    async fn model_call_series_counts_gemini_calls_and_its_safety_blocks_as_refused() {
        let server = MockServer::start().await;
        let answer = |finish: &str| {
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": VALID_REPLY}]},
                                   "finishReason": finish}]})
        };
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer("STOP")))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer("SAFETY")))
            .mount(&server)
            .await;
        let metrics = Arc::new(Metrics::default());
        let gemini =
            GoogleModel::new("gemini-2.5-flash", &Secret::new("k"), &server.uri()).expect("model");
        let model = TimedModel::wrap(Arc::new(gemini), metrics.clone());

        for _ in 0..2 {
            model
                .step(&first_step(ToolChoice::Auto))
                .await
                .expect("answered");
        }

        let text = metrics.render();
        for result in ["ok", "refused"] {
            let line = format!("model_call_duration_seconds_count{{result=\"{result}\"}} 1");
            assert!(text.contains(&line), "{line} missing:\n{text}");
        }
    }

    #[tokio::test]
    async fn model_usage_counters_add_each_calls_billed_tokens_and_its_cost_in_usd() {
        use crate::model::Usage;
        use crate::model::mock::{ScriptedModel, reply};
        let billed = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cached_tokens: 500_000,
            cache_write_tokens: 0,
        };
        let mut answer = reply(VALID_REPLY);
        answer.usage = billed;
        let metrics = Arc::new(Metrics::default());
        let model = TimedModel::wrap(
            Arc::new(
                ScriptedModel::new(vec![Ok(answer.clone()), Ok(answer)])
                    .with_id("openai:gpt-4.1-mini"),
            ),
            metrics.clone(),
        );
        for _ in 0..2 {
            model
                .step(&first_step(ToolChoice::Auto))
                .await
                .expect("answered");
        }
        let text = metrics.render();
        for line in [
            "manychat_agent_model_tokens_total{kind=\"input\"} 2000000",
            "manychat_agent_model_tokens_total{kind=\"cached\"} 1000000",
            "manychat_agent_model_tokens_total{kind=\"output\"} 200000",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        // gpt-4.1-mini: 0.5 M uncached at 0.40, 0.5 M cached at 0.10, 0.1 M out at 1.60 per
        // million = 0.20 + 0.05 + 0.16 = 0.41 USD a call, twice.
        let cost: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("manychat_agent_model_cost_usd_total "))
            .expect("the cost counter")
            .parse()
            .expect("a number");
        assert!((cost - 0.82).abs() < 1e-9, "{cost}");
    }
}
