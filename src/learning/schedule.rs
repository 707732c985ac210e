//! The weekly run (031 § Scheduling): `serve` and `worker` check every [`CHECK_EVERY`] whether
//! this ISO week's run is claimed, and claim and run it when not. The claim is a unique insert,
//! so of replicas checking together one runs it; the others find it claimed.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::cohort::TagReader;
use super::run::{Analyst, Outcome, run};
use crate::clock::Clock;
use crate::config::ConfigHandle;
use crate::model::Model;
use crate::store::Store;

pub const CHECK_EVERY: Duration = Duration::from_secs(3600);

/// What the weekly check runs with.
pub struct Weekly {
    pub store: Arc<dyn Store>,
    pub config: Arc<ConfigHandle>,
    pub model: Arc<dyn Model>,
    pub tags: Arc<dyn TagReader>,
    pub temperature: f32,
    pub clock: Clock,
}

impl Weekly {
    /// One check: runs the week's analyst when the week is not claimed yet.
    pub async fn check(&self) -> Option<Outcome> {
        let config = self.config.snapshot();
        config.rules.learning.as_ref()?;
        let analyst = Analyst {
            config: &config,
            model: self.model.as_ref(),
            tags: self.tags.as_ref(),
            temperature: self.temperature,
        };
        let clock = self.clock;
        match run(self.store.as_ref(), &analyst, false, || clock.now()).await {
            Ok(outcome) => Some(outcome),
            Err(error) => {
                tracing::warn!(error = %error, "learning run check failed");
                None
            }
        }
    }

    /// Checks now and every [`CHECK_EVERY`] until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = self.check() => {}
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(CHECK_EVERY) => {}
            }
        }
    }
}
