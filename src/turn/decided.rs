//! A media turn decided without the model (020, `media`): what it answers with, carried on the
//! answer's channel beside a model's answer (`agent_job::Settled`).

use super::TurnGuard;
use super::message::Message;
use crate::escalation::Escalation;

/// A media turn decided without the model.
#[derive(Debug)]
pub(super) struct Decided {
    pub decision: Decision,
    pub message: Message,
    pub guard: Option<TurnGuard>,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Decision {
    /// `rules.messages.mediaFallback`, or the escalation copy without it.
    Fallback,
    /// An escalation: a keyword in the transcript (`escalated_precheck`), a media failure
    /// (`error`).
    Escalate {
        outcome: &'static str,
        reason: Escalation,
    },
}
