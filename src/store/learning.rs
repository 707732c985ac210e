//! Learning from what sold (031): the weekly analyst runs and their claim, the proposals a
//! person reviews, the immutable playbook versions (at most one active) and the eval records
//! the activation gate reads (`LearningStore`).
//!
//! Invariants: no row here holds transcript text, a subscriber id or a conversation id (a
//! proposal cites turn ids only), so forgetting a contact and retention have nothing to delete
//! here. A playbook version is written once and never changed but for going live; its content
//! hash names it.

use super::*;

/// A run's state: `running` while the analyst works, then one of the four ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Running,
    Completed,
    /// Fewer than the minimum contacts on a side: no model call.
    Insufficient,
    /// The worst-case price left fewer than the minimum on a side: no model call.
    SkippedBudget,
    Failed,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Insufficient => "insufficient",
            Self::SkippedBudget => "skipped_budget",
            Self::Failed => "failed",
        }
    }

    pub fn parse(raw: &str) -> Result<Self> {
        Ok(match raw {
            "running" => Self::Running,
            "completed" => Self::Completed,
            "insufficient" => Self::Insufficient,
            "skipped_budget" => Self::SkippedBudget,
            "failed" => Self::Failed,
            _ => {
                return Err(StoreError::Corrupt(
                    "unknown learning run status".to_owned(),
                ));
            }
        })
    }
}

/// One analyst run (`learning_runs`).
#[derive(Debug, Clone, PartialEq)]
pub struct LearningRun {
    pub id: i64,
    /// The ISO week it ran for (`2026-W49`).
    pub week: String,
    pub forced: bool,
    pub status: RunStatus,
    pub converted_count: i64,
    pub not_converted_count: i64,
    pub cost_usd: f64,
    /// Why it failed, in the service's words.
    pub reason: Option<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// How a run ended (`LearningStore::finish_learning_run`), written with its proposals at once.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    pub status: RunStatus,
    pub converted_count: i64,
    pub not_converted_count: i64,
    pub cost_usd: f64,
    pub reason: Option<String>,
    pub proposals: Vec<NewProposal>,
    pub at: DateTime<Utc>,
}

/// A validated proposal of the analyst.
#[derive(Debug, Clone, PartialEq)]
pub struct NewProposal {
    pub text: String,
    pub rationale: String,
    pub converted_count: i64,
    pub not_converted_count: i64,
    /// `turns.id` values, as strings, of turns in the transcripts the analyst was given.
    pub turn_ids: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProposalStatus {
    Pending,
    Approved,
    Rejected,
}

impl ProposalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
        }
    }

    pub fn parse(raw: &str) -> Result<Self> {
        Ok(match raw {
            "pending" => Self::Pending,
            "approved" => Self::Approved,
            "rejected" => Self::Rejected,
            _ => return Err(StoreError::Corrupt("unknown proposal status".to_owned())),
        })
    }
}

/// A stored proposal (`insight_proposals`).
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub id: i64,
    pub run_id: i64,
    pub text: String,
    pub rationale: String,
    pub converted_count: i64,
    pub not_converted_count: i64,
    pub turn_ids: Vec<String>,
    pub status: ProposalStatus,
    pub reviewed_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// A playbook version (`playbook_versions`): its insights in order, named by their hash.
#[derive(Debug, Clone, PartialEq)]
pub struct PlaybookVersion {
    pub id: i64,
    pub content_hash: String,
    pub insights: Vec<String>,
    pub active: bool,
    /// When it first went live; kept after, so a version active before is a rollback.
    pub activated_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// What one review decided, written at once (`LearningStore::record_review`), with a
/// [`LearningDecision`] row per decision.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Review {
    pub approved: Vec<i64>,
    pub rejected: Vec<i64>,
    /// The active insights it retired, by place (1 = first).
    pub retired: Vec<i64>,
    /// The reviewer's reason for a decided proposal, already cleaned.
    pub reasons: Vec<(i64, String)>,
    /// The version the review made (its hash and insights), when it changed the playbook.
    pub version: Option<(String, Vec<String>)>,
    /// Who decided: `cli` or `console` (`crate::learning::review::BY_*`).
    pub by: String,
    pub at: DateTime<Utc>,
}

/// What a recorded learning decision was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionKind {
    Approved,
    Rejected,
    Retired,
    /// A version taken live through the eval gate.
    Activated,
    /// A version that was live before taken live again, without the gate.
    RolledBack,
}

impl DecisionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Rejected => "rejected",
            Self::Retired => "retired",
            Self::Activated => "activated",
            Self::RolledBack => "rolled_back",
        }
    }

    pub fn parse(raw: &str) -> Result<Self> {
        Ok(match raw {
            "approved" => Self::Approved,
            "rejected" => Self::Rejected,
            "retired" => Self::Retired,
            "activated" => Self::Activated,
            "rolled_back" => Self::RolledBack,
            _ => return Err(StoreError::Corrupt("unknown learning decision".to_owned())),
        })
    }
}

/// One decision of the review or of activation, as recorded (`learning_decisions`): what, on
/// which proposal or version, why, who and when.
#[derive(Debug, Clone, PartialEq)]
pub struct LearningDecision {
    pub id: i64,
    pub kind: DecisionKind,
    pub proposal_id: Option<i64>,
    /// The version the review made (approved, retired) or the version taken live.
    pub version_hash: Option<String>,
    /// A retired insight's place (1 = first).
    pub place: Option<i64>,
    pub reason: Option<String>,
    pub by: String,
    pub at: DateTime<Utc>,
}

/// An eval run's outcome for one playbook (`eval_records`): `playbook_hash` is `""` for the
/// no-playbook baseline; `outcomes` maps each asserted case's id to whether it passed.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalRecord {
    pub playbook_hash: String,
    pub suite_hash: String,
    pub model: String,
    pub outcomes: Value,
    pub created_at: DateTime<Utc>,
}

/// An agent turn prompted with a playbook: its conversation, when, its version and its action
/// record (`LearningStore::playbook_turns`).
#[derive(Debug, Clone, PartialEq)]
pub struct PlaybookTurn {
    pub conversation_id: ConversationId,
    pub at: DateTime<Utc>,
    pub playbook_version: Option<String>,
    pub actions: Value,
}

#[async_trait]
pub trait LearningStore: Send + Sync + 'static {
    /// Claims `week`'s run at `at`: a new `running` row, or `None` when an unforced run of that
    /// week exists (a unique index, so of replicas racing exactly one gets the id). `forced`
    /// always inserts.
    async fn claim_learning_run(
        &self,
        week: &str,
        forced: bool,
        at: DateTime<Utc>,
    ) -> Result<Option<i64>>;

    /// Ends run `id` as `end` says, with its proposals, in one write.
    async fn finish_learning_run(&self, id: i64, end: &RunEnd) -> Result<()>;

    /// Marks `failed` every run still `running` that started before `started_before` (its
    /// process stopped mid-run): how many.
    async fn fail_running_learning_runs(
        &self,
        started_before: DateTime<Utc>,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<u64>;

    /// The last `limit` runs, newest first.
    async fn learning_runs(&self, limit: i64) -> Result<Vec<LearningRun>>;

    /// Proposals with `status`, the newest `limit`, oldest first.
    async fn proposals(&self, status: ProposalStatus, limit: i64) -> Result<Vec<Proposal>>;

    /// Writes one review: statuses of the proposals it decided and the version it made (an
    /// existing hash is kept as it is), with a decision row each (who, when, why), in one
    /// write. Only `pending` proposals change, and only a change is recorded as a decision.
    async fn record_review(&self, review: &Review) -> Result<()>;

    /// Every playbook version, oldest first.
    async fn playbook_versions(&self) -> Result<Vec<PlaybookVersion>>;

    /// The active version, if any.
    async fn active_playbook(&self) -> Result<Option<PlaybookVersion>>;

    /// Makes version `id` the only active one at `at` (its first `activated_at` is kept), and
    /// records the decision by `by`: `activated`, or `rolled_back` when it was live before.
    async fn activate_playbook(&self, id: i64, by: &str, at: DateTime<Utc>) -> Result<()>;

    /// The newest `limit` learning decisions, newest first.
    async fn learning_decisions(&self, limit: i64) -> Result<Vec<LearningDecision>>;

    async fn record_eval(&self, record: &EvalRecord) -> Result<()>;

    /// The newest eval record of `playbook_hash` against `suite_hash` made with a model that is
    /// not a mock (`mock:`), if any.
    async fn latest_eval(
        &self,
        playbook_hash: &str,
        suite_hash: &str,
    ) -> Result<Option<EvalRecord>>;

    /// The conversations with an agent turn holding an action record at or after `since`
    /// (the learning cohort's candidates; deduplicated, any order).
    async fn conversations_with_actions_since(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<ConversationId>>;

    /// Agent turns with an action record at or after `since`, oldest first, with the playbook
    /// version they were prompted with (the per-version measures).
    async fn playbook_turns(&self, since: DateTime<Utc>) -> Result<Vec<PlaybookTurn>>;

    /// Each conversation with a bound turn at or after `since`, and when its latest bound turn
    /// was written (the per-version measures' settle; any order). No text is read.
    async fn last_bound_turns(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(ConversationId, DateTime<Utc>)>>;
}
