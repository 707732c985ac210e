//! What the model turns of one process share: what a config snapshot derives for every turn
//! under it, built once per snapshot (and per playbook version, 031), the active playbook as the
//! process last read it, and the ledger of what the turns in flight may still spend today.
//! Inbound turns and nudge turns (025) draw on the same ones, so a nudge turn reuses the
//! snapshot's prompt and tool specs (providers' prompt caches see identical bytes) and reserves
//! its spend beside the inbound turns running at the same time.
//!
//! 031: a tenant with `learning` is prompted with the active playbook's section after the
//! catalog; without `learning` the prompt is the static prefix exactly, whatever is stored.

use std::sync::{Arc, Mutex, PoisonError};

use crate::agent::SnapshotPrompt;
use crate::config::TenantConfig;
use crate::config::rules_match::EscalationKeywords;
use crate::knowledge::Knowledge;
use crate::learning::playbook::PlaybookCache;
use crate::tools::ToolSpecs;

use super::budget::BudgetLedger;

/// What a config snapshot implies for every turn under it.
pub struct Derived {
    pub config: Arc<TenantConfig>,
    /// The prompt's prefix (with the playbook's section, 031), its leak-check text and the
    /// playbook version it carries.
    pub prompt: SnapshotPrompt,
    pub tools: ToolSpecs,
    pub keywords: EscalationKeywords,
    /// The snapshot's retrieval (`crate::knowledge`): its index when the catalog or documents
    /// are over the threshold, built once per snapshot (a new playbook version reuses it).
    pub knowledge: Arc<Knowledge>,
}

/// The process's share of the turns' state; cheap to clone (all shared). `serve` hands the turn
/// engine's to its nudge worker; the `worker` command, which runs no inbound turn, has its own.
#[derive(Clone, Default)]
pub struct TurnsShared {
    derived: Arc<Mutex<Option<Arc<Derived>>>>,
    pub(crate) budget: Arc<BudgetLedger>,
    /// 031: the active playbook, refreshed off the turns' path (`PlaybookCache::run`).
    playbook: PlaybookCache,
    /// `KNOWLEDGE_EMBEDDINGS`: fills each new snapshot's vectors, embeds the turns' messages.
    embeddings: Option<super::embeddings::Embeddings>,
}

impl TurnsShared {
    /// Prompts the turns with `playbook`'s active version (for a tenant with `learning`).
    pub fn with_playbook(mut self, playbook: PlaybookCache) -> Self {
        self.playbook = playbook;
        self
    }

    /// Semantic search: each snapshot's knowledge built from now on gets its vectors filled
    /// in the background, and the turns embed their message.
    pub fn with_embeddings(mut self, embeddings: super::embeddings::Embeddings) -> Self {
        self.embeddings = Some(embeddings);
        self
    }

    /// The semantic search, when `KNOWLEDGE_EMBEDDINGS` is set.
    pub(crate) fn embeddings(&self) -> Option<&super::embeddings::Embeddings> {
        self.embeddings.as_ref()
    }

    /// Builds what `config` derives now (after a load or a reload), so the first turn under it
    /// does not pay for the index and the tool specs.
    pub fn warm(&self, config: &Arc<TenantConfig>) {
        self.derived(config);
    }

    /// What `config` derives, built once per snapshot and playbook version: the snapshot in
    /// force is kept with it, so a pointer comparison cannot mistake a new snapshot for the old
    /// one, and the version's hash says whether the prompt carries the current playbook.
    pub(crate) fn derived(&self, config: &Arc<TenantConfig>) -> Arc<Derived> {
        let playbook = match config.rules.learning {
            Some(_) => self.playbook.current(),
            None => None,
        };
        let hash = playbook.as_ref().map(|p| p.hash.as_str());
        let mut cached = self.derived.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(derived) = cached.as_ref()
            && Arc::ptr_eq(&derived.config, config)
            && derived.prompt.playbook.as_deref() == hash
        {
            return derived.clone();
        }
        // Only the playbook changed: the snapshot's index and tools are kept.
        let same = cached
            .as_ref()
            .filter(|derived| Arc::ptr_eq(&derived.config, config));
        let knowledge = match same {
            Some(derived) => derived.knowledge.clone(),
            None => {
                let knowledge = Arc::new(Knowledge::build(config));
                // A new snapshot: its vectors are filled off the turns' path.
                if let Some(embeddings) = &self.embeddings {
                    embeddings.fill(config, &knowledge);
                }
                knowledge
            }
        };
        let tools = match same {
            Some(derived) => derived.tools.clone(),
            None => ToolSpecs::new(config),
        };
        let derived = Arc::new(Derived {
            config: config.clone(),
            prompt: SnapshotPrompt::with_playbook(config, playbook.as_deref()),
            tools,
            keywords: EscalationKeywords::new(&config.rules),
            knowledge,
        });
        *cached = Some(derived.clone());
        derived
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::static_prefix;
    use crate::config::Learning;
    use crate::learning::playbook::{ActivePlaybook, content_hash, section};

    fn tenant(learning: bool) -> Arc<TenantConfig> {
        let mut config = crate::config::examples::demo_tenant();
        config.rules.learning = learning.then(|| Learning {
            language: None,
            converted_tag: "paid".to_owned(),
            max_run_cost_usd: 5.0,
        });
        Arc::new(config)
    }

    fn version(insights: &[&str]) -> ActivePlaybook {
        let insights: Vec<String> = insights.iter().map(|i| (*i).to_owned()).collect();
        ActivePlaybook {
            hash: content_hash(&insights),
            section: Arc::from(section(&insights)),
        }
    }

    /// 031 § The prompt: without `learning` the system prompt is byte-identical to the static
    /// prefix, though a version is active, and the turns record no version.
    #[test]
    fn spec_031_without_learning_the_prompt_is_the_static_prefix_byte_for_byte() {
        let config = tenant(false);
        let shared = TurnsShared::default().with_playbook(PlaybookCache::holding(version(&[
            "Invented tactic: ask which day suits the contact",
        ])));
        let derived = shared.derived(&config);
        assert_eq!(
            derived.prompt.prefix.as_bytes(),
            static_prefix(&config).as_bytes()
        );
        assert_eq!(derived.prompt.playbook, None);
        assert!(!derived.prompt.prefix.contains("# PLAYBOOK"));
    }

    /// 031 § The prompt: with `learning`, the static prefix and then the active version's
    /// section, built once per snapshot and version (the next turn reuses it), rebuilt when the
    /// version changes.
    #[test]
    fn spec_031_the_prompt_is_the_prefix_then_the_section_cached_per_snapshot_and_version() {
        let config = tenant(true);
        let first = version(&["Invented tactic: ask which day suits the contact"]);
        let cache = PlaybookCache::holding(first.clone());
        let shared = TurnsShared::default().with_playbook(cache);
        let derived = shared.derived(&config);
        let expected = format!("{}{}", static_prefix(&config), first.section);
        assert_eq!(&*derived.prompt.prefix, expected.as_str());
        assert_eq!(
            derived.prompt.playbook.as_deref(),
            Some(first.hash.as_str())
        );
        let catalog = expected.rfind("\n# CATALOG\n").expect("a catalog");
        let playbook = expected
            .rfind("\n# PLAYBOOK\n")
            .expect("a playbook section");
        assert!(playbook > catalog, "the playbook comes after the catalog");
        assert!(
            expected[playbook..].contains("never facts")
                && expected[playbook..].contains("the rule wins"),
            "{}",
            &expected[playbook..]
        );
        assert!(
            Arc::ptr_eq(&derived, &shared.derived(&config)),
            "built once"
        );

        let second = version(&["Invented tactic: offer the weekend class first"]);
        let shared = shared.with_playbook(PlaybookCache::holding(second.clone()));
        let rebuilt = shared.derived(&config);
        assert!(!Arc::ptr_eq(&derived, &rebuilt));
        assert_eq!(
            rebuilt.prompt.playbook.as_deref(),
            Some(second.hash.as_str())
        );
        assert!(rebuilt.prompt.prefix.ends_with(&*second.section));
    }

    /// Knowledge at scale: the index is built once per snapshot (warmed after a load), kept when
    /// only the playbook version changes, and replaced with the snapshot on a reload; a reload
    /// that fails never swaps the snapshot, so the turns keep the old pair.
    #[test]
    fn knowledge_index_is_built_once_per_snapshot_and_kept_across_playbook_versions() {
        let mut large = crate::knowledge::fixtures::english_tenant(500);
        large.rules.learning = tenant(true).rules.learning.clone();
        let config = Arc::new(large);
        let cache = PlaybookCache::holding(version(&["Invented tactic: one"]));
        let shared = TurnsShared::default().with_playbook(cache);
        shared.warm(&config);
        let first = shared.derived(&config);
        assert!(first.knowledge.layout().catalog_retrieved);
        let shared =
            shared.with_playbook(PlaybookCache::holding(version(&["Invented tactic: two"])));
        let second = shared.derived(&config);
        assert!(
            !Arc::ptr_eq(&first, &second),
            "a new playbook, a new prompt"
        );
        assert!(
            Arc::ptr_eq(&first.knowledge, &second.knowledge),
            "the same index"
        );

        let reloaded = Arc::new((*config).clone());
        let third = shared.derived(&reloaded);
        assert!(
            !Arc::ptr_eq(&second.knowledge, &third.knowledge),
            "a reload rebuilds it"
        );
    }
}
