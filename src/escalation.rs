//! Why a contact was handed to a person (the escalation reason is recorded on the
//! turn, logged, and counted by reason in `/metrics`).
//!
//! One closed list, so the record, the log line and the metric use the same words (a model's
//! escalation is recorded under the reason it gave: `complaint`, `price_negotiation`, …). The turn's
//! `outcome` says how it ended (`escalated_precheck`, `escalated`, `error`, …); the reason says
//! why.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The escalation reasons of SYSTEM 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EscalationReason {
    PriceNegotiation,
    Complaint,
    OutOfScope,
    ExplicitRequest,
    LowConfidence,
    PaymentReported,
}

impl EscalationReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EscalationReason::PriceNegotiation => "price_negotiation",
            EscalationReason::Complaint => "complaint",
            EscalationReason::OutOfScope => "out_of_scope",
            EscalationReason::ExplicitRequest => "explicit_request",
            EscalationReason::LowConfidence => "low_confidence",
            EscalationReason::PaymentReported => "payment_reported",
        }
    }
}

/// Why a turn escalated, as far as the agent core knows. The caller uses it to pick the outcome
/// and to decide the fate of an `onEscalation` note (024: performed only for `Model` and
/// `LowConfidence`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EscalationCause {
    /// Not escalating.
    None,
    /// The model set `escalate: true`.
    Model,
    /// Confidence fell below the threshold.
    LowConfidence,
    /// The reply repeated fence markers, prompt structure or prompt text.
    Leak,
    /// The output was missing, not JSON, or failed the AgentReply schema.
    Schema,
    /// Stripping echoed field names left no message.
    FieldEcho,
    /// The model call failed (set by the caller).
    Error,
    /// The model call hit `MODEL_ABORT_MS` (set by the caller).
    Abort,
    /// The day's budget refused a step's model call (set by the loop's budget).
    Budget,
}

impl EscalationCause {
    pub fn as_str(self) -> &'static str {
        match self {
            EscalationCause::None => "none",
            EscalationCause::Model => "model",
            EscalationCause::LowConfidence => "low_confidence",
            EscalationCause::Leak => "leak",
            EscalationCause::Schema => "schema",
            EscalationCause::FieldEcho => "field_echo_stripped",
            EscalationCause::Error => "error",
            EscalationCause::Abort => "abort",
            EscalationCause::Budget => "budget",
        }
    }
    /// The guardrail that stopped a reply (the `kind` label of `guardrail_violations_total`);
    /// `None` for a model's own escalation, a failed call or a passing reply.
    pub fn guardrail_kind(self) -> Option<&'static str> {
        match self {
            EscalationCause::Schema => Some("schema"),
            EscalationCause::FieldEcho => Some("field_echo"),
            EscalationCause::Leak => Some("leak"),
            EscalationCause::LowConfidence => Some("low_confidence"),
            EscalationCause::None
            | EscalationCause::Model
            | EscalationCause::Error
            | EscalationCause::Abort
            | EscalationCause::Budget => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Escalation {
    /// The message matched one of `rules.escalationKeywords`.
    Keyword,
    /// The conversation reached `rules.maxTurnsPerConversation`.
    TurnCap,
    /// The contact passed its hourly rate.
    RateLimit,
    /// Today's token or cost budget is spent (or reserved by turns in flight).
    Budget,
    /// The contact spent its own share of today's budget (`budget.perContactDailyTokenCap`);
    /// the business's budget still serves other contacts.
    BudgetContact,
    /// The model asked for a person, for the reason it gave (SYSTEM 4's list), if any.
    Model(Option<EscalationReason>),
    /// The reply's confidence fell below the threshold.
    LowConfidence,
    /// The reply repeated the prompt or its fence.
    Leak,
    /// The model's output failed the AgentReply schema.
    Schema,
    /// Stripping echoed field names left nothing to send.
    FieldEcho,
    /// The model call (or the turn) failed.
    Error,
    /// The model call hit `MODEL_ABORT_MS`.
    Aborted,
    /// Too many turns were in flight (`MAX_TURNS_IN_FLIGHT`).
    LoadShed,
    /// The turn waited for the contact's earlier turns until its wait expired.
    WaitExpired,
    /// The process that owed the contact a reply stopped before giving it; the outbox
    /// delivered the fallback.
    Interrupted,
    /// The contact's reply could not be delivered (its outbox row was dead-lettered).
    DeadLettered,
    /// 020: the contact sent media the service cannot answer (an unsupported kind, a voice note
    /// without transcription, an image for a model without vision) and `mediaFallback` is unset.
    MediaUnanswerable,
    /// 020: the contact's media could not be fetched or read (download, Content-Type, redirect,
    /// size, transcription or ffmpeg failure).
    MediaFailed,
}

impl Escalation {
    pub fn as_str(self) -> &'static str {
        match self {
            Escalation::Keyword => "escalation_keyword",
            Escalation::TurnCap => "turn_cap",
            Escalation::RateLimit => "rate_limit",
            Escalation::Budget => "budget",
            Escalation::BudgetContact => "budget_contact",
            Escalation::Model(Some(reason)) => reason.as_str(),
            Escalation::Model(None) => "model",
            Escalation::LowConfidence => "low_confidence",
            Escalation::Leak => "leak",
            Escalation::Schema => "schema",
            Escalation::FieldEcho => "field_echo_stripped",
            Escalation::Error => "error",
            Escalation::Aborted => "abort",
            Escalation::LoadShed => "load_shed",
            Escalation::WaitExpired => "wait_expired",
            Escalation::Interrupted => "interrupted",
            Escalation::DeadLettered => "dead_lettered",
            Escalation::MediaUnanswerable => "media_unanswerable",
            Escalation::MediaFailed => "media_failed",
        }
    }

    /// The reason behind a guarded reply that escalates (`model`: the reason the model gave);
    /// `Error` for a cause that should not escalate (`None`), so a caller's mistake still
    /// records something true.
    pub fn of_reply(cause: EscalationCause, model: Option<EscalationReason>) -> Self {
        match cause {
            EscalationCause::Model => Escalation::Model(model),
            EscalationCause::LowConfidence => Escalation::LowConfidence,
            EscalationCause::Leak => Escalation::Leak,
            EscalationCause::Schema => Escalation::Schema,
            EscalationCause::FieldEcho => Escalation::FieldEcho,
            EscalationCause::Abort => Escalation::Aborted,
            EscalationCause::Budget => Escalation::Budget,
            EscalationCause::Error | EscalationCause::None => Escalation::Error,
        }
    }
}

impl std::fmt::Display for Escalation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
