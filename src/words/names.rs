//! Stored names in the owner's words: how a turn ended, why a contact was handed to a person,
//! what an action did and how it ended, why a hold ended. A name with no entry here (one added
//! later) is shown readably: `some_new_name` as "some new name".

use super::{Key, text};
use crate::config::Language;

/// `name` with its underscores as spaces.
fn readable(name: &str) -> String {
    name.replace('_', " ")
}

fn named(language: Language, key: Option<Key>, name: &str) -> String {
    key.map_or_else(|| readable(name), |key| text(language, key).to_owned())
}

/// How a turn ended (`turns.outcome`).
pub fn outcome(language: Language, name: &str) -> String {
    let key = match name {
        "answered_inline" => Some(Key::OutcomeAnsweredInline),
        "deferred" => Some(Key::OutcomeDeferred),
        "answered_scripted" => Some(Key::OutcomeScripted),
        "escalated_model" => Some(Key::OutcomeEscalatedModel),
        "escalated_precheck" => Some(Key::OutcomeEscalatedPrecheck),
        "failed_validation" => Some(Key::OutcomeFailedValidation),
        "error" => Some(Key::OutcomeError),
        "nudge_sent" => Some(Key::OutcomeNudge),
        "window_closing_sent" => Some(Key::OutcomeWindowClosing),
        "media_fallback" => Some(Key::OutcomeMediaFallback),
        "held" => Some(Key::OutcomeHeld),
        "contact_busy" => Some(Key::OutcomeContactBusy),
        _ => None,
    };
    named(language, key, name)
}

/// Why a contact was handed to a person (`turns.escalation_reason`).
pub fn reason(language: Language, name: &str) -> String {
    let key = match name {
        "price_negotiation" => Some(Key::ReasonPrice),
        "complaint" => Some(Key::ReasonComplaint),
        "out_of_scope" => Some(Key::ReasonOutOfScope),
        "explicit_request" => Some(Key::ReasonExplicit),
        "low_confidence" => Some(Key::ReasonLowConfidence),
        "payment_reported" => Some(Key::ReasonPaymentReported),
        "escalation_keyword" => Some(Key::ReasonKeyword),
        "turn_cap" => Some(Key::ReasonTurnCap),
        "rate_limit" => Some(Key::ReasonRateLimit),
        "budget" => Some(Key::ReasonBudget),
        "budget_contact" => Some(Key::ReasonBudgetContact),
        "abort" => Some(Key::ReasonAbort),
        "leak" | "schema" | "field_echo_stripped" => Some(Key::ReasonCheckFailed),
        "error" => Some(Key::ReasonError),
        "load_shed" => Some(Key::ReasonLoadShed),
        "dead_lettered" => Some(Key::ReasonDeadLettered),
        "wait_expired" => Some(Key::ReasonWaitExpired),
        "interrupted" => Some(Key::ReasonInterrupted),
        "media_unanswerable" | "media_failed" => Some(Key::ReasonMedia),
        _ => None,
    };
    named(language, key, name)
}

/// What an action did (`tool`).
pub fn tool(language: Language, name: &str) -> String {
    let key = match name {
        "send_flow" => Some(Key::ToolSendFlow),
        "set_field" => Some(Key::ToolSetField),
        "add_tag" => Some(Key::ToolAddTag),
        "remove_tag" => Some(Key::ToolRemoveTag),
        "write_note" => Some(Key::ToolWriteNote),
        "schedule_nudge" => Some(Key::ToolScheduleNudge),
        "handoff" => Some(Key::ToolHandoff),
        _ => None,
    };
    named(language, key, name)
}

/// How an action ended (`status`).
pub fn status(language: Language, name: &str) -> String {
    let key = match name {
        "performed" => Some(Key::StatusPerformed),
        "failed" => Some(Key::StatusFailed),
        "discarded" => Some(Key::StatusDiscarded),
        "dropped_over_cap" => Some(Key::StatusOverCap),
        "dead_lettered" => Some(Key::StatusDeadLettered),
        "staged" => Some(Key::StatusStaged),
        "refused" => Some(Key::StatusRefused),
        _ => None,
    };
    named(language, key, name)
}

/// Why a conversation went back to the assistant (`crate::handoff::Release`).
pub fn release(language: Language, name: &str) -> String {
    let key = match name {
        "hold_expired" => Some(Key::ReleaseExpired),
        "tag_removed" => Some(Key::ReleaseTagRemoved),
        "released" => Some(Key::ReleaseReleased),
        _ => None,
    };
    named(language, key, name)
}
