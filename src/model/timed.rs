//! A [`Model`] that times each call into `/metrics`: the one place every model call
//! of every turn (inbound, deferred, nudge) passes, so no call site measures.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Model, ModelError, ModelRequest, ModelResponse};
use crate::metrics::Metrics;

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
        self.metrics.model_call(result.is_ok(), started.elapsed());
        result
    }
}
