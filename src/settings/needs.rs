//! Which of the variables without a default a command needs (`Needs`, which
//! `Settings::for_command` takes), so each command asks only for what it uses, and
//! `ModelRequired` when a model is needed but `AGENT_MODEL` is unset.

/// Which of the variables that have no default a command needs. Each command asks only for
/// what it uses, and every problem (missing or invalid) is reported in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// Answers ManyChat's requests: `MANYCHAT_SHARED_SECRET` and `PUBLIC_BASE_URL`.
    pub channel: bool,
    /// Calls a model: `AGENT_MODEL`, and the key of the provider it names.
    pub model: bool,
    /// Calls ManyChat's API: `MANYCHAT_API_TOKEN`.
    pub manychat_api: bool,
    /// Delivers deferred replies: `MANYCHAT_REPLY_FLOW_NS`.
    pub reply_flow: bool,
}

impl Needs {
    /// `serve`: everything.
    pub const SERVE: Self = Self {
        channel: true,
        model: true,
        ..Self::WORKER
    };
    /// `worker`: delivers the outbox; answers no request and calls no model.
    pub const WORKER: Self = Self {
        manychat_api: true,
        reply_flow: true,
        ..Self::DATABASE_ONLY
    };
    /// `tokens backfill`: writes tokens to ManyChat.
    pub const TOKENS_BACKFILL: Self = Self {
        manychat_api: true,
        ..Self::DATABASE_ONLY
    };
    /// `tokens backfill --check`: reads the database only.
    pub const DATABASE_ONLY: Self = Self {
        channel: false,
        model: false,
        manychat_api: false,
        reply_flow: false,
    };
    /// What [`Settings::from_vars`] requires: the channel's two (the tests' and the demo's
    /// apps supply the rest, or a model of their own).
    pub const CHANNEL: Self = Self {
        channel: true,
        ..Self::DATABASE_ONLY
    };
}

/// `AGENT_MODEL` is missing where a model is needed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("AGENT_MODEL: required (provider:model, e.g. mock:demo)")]
pub struct ModelRequired;
