//! What the model turns of one process share: what a config snapshot derives for every turn
//! under it, built once per snapshot, and the ledger of what the turns in flight may still spend
//! today. Inbound turns and nudge turns (025) draw on the same ones, so a nudge
//! turn reuses the snapshot's prompt and tool specs (providers' prompt caches see identical
//! bytes) and reserves its spend beside the inbound turns running at the same time.

use std::sync::{Arc, Mutex, PoisonError};

use crate::agent::SnapshotPrompt;
use crate::config::TenantConfig;
use crate::config::rules_match::EscalationKeywords;
use crate::tools::ToolSpecs;

use super::budget::BudgetLedger;

/// What a config snapshot implies for every turn under it.
pub struct Derived {
    pub config: Arc<TenantConfig>,
    /// The prompt's prefix and leak-check text.
    pub prompt: SnapshotPrompt,
    pub tools: ToolSpecs,
    pub keywords: EscalationKeywords,
}

/// The process's share of the turns' state; cheap to clone (all shared). `serve` hands the turn
/// engine's to its nudge worker; the `worker` command, which runs no inbound turn, has its own.
#[derive(Clone, Default)]
pub struct TurnsShared {
    derived: Arc<Mutex<Option<Arc<Derived>>>>,
    pub(crate) budget: Arc<BudgetLedger>,
}

impl TurnsShared {
    /// What `config` derives, built once per snapshot: the snapshot in force is kept with it, so
    /// a pointer comparison cannot mistake a new snapshot for the old one.
    pub(crate) fn derived(&self, config: &Arc<TenantConfig>) -> Arc<Derived> {
        let mut cached = self.derived.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(derived) = cached.as_ref()
            && Arc::ptr_eq(&derived.config, config)
        {
            return derived.clone();
        }
        let derived = Arc::new(Derived {
            config: config.clone(),
            prompt: SnapshotPrompt::new(config),
            tools: ToolSpecs::new(config),
            keywords: EscalationKeywords::new(&config.rules),
        });
        *cached = Some(derived.clone());
        derived
    }
}
