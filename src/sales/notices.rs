//! What the model is told about the contact's sales position (034 § The intent field, 028,
//! 042): notices outside the fence, in the framework's words (offering, never a vertical's).

use super::Known;
use crate::config::{FUNNEL_STAGES, TenantConfig};

/// The notices of a turn: none for an unbound one (019: the sales position comes from the
/// contact's records, which a request without the contact's token is not told), else
/// [`notices`].
pub fn for_turn(config: &TenantConfig, known: &Known, bound: bool) -> Vec<String> {
    if bound {
        notices(config, known)
    } else {
        Vec::new()
    }
}

/// `INTENT:`, `FUNNEL:` and `OFFERING:` lines for a turn, each only when the tenant has the
/// field it describes (the offering also from the request alone).
pub fn notices(config: &TenantConfig, known: &Known) -> Vec<String> {
    let mut notices = Vec::new();
    let Some(tools) = config.tools.as_ref() else {
        return notices;
    };
    if super::intent_field(tools).is_some() {
        notices.push(format!("INTENT: {}", known.intent.as_str()));
    }
    if super::funnel_field(tools).is_some() {
        let stage = known
            .stage
            .and_then(|s| FUNNEL_STAGES.get(s))
            .copied()
            .unwrap_or("none recorded yet");
        notices.push(format!("FUNNEL: {stage}"));
    }
    if let Some(offering) = &known.offering {
        let mut line = format!("OFFERING: {offering}");
        if known.advert_offering {
            line.push_str(
                " (from the advert the contact came through; the agent did not record it)",
            );
        }
        if let Some(previous) = &known.offering_changed_from {
            line.push_str(&format!(
                " (it was {previous} before this message: confirm which offering the contact wants)"
            ));
        }
        notices.push(line);
    }
    notices
}
