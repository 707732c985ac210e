//! What the model is told about the contact's sales position (034 § The intent field, 028,
//! 042): notices outside the fence, in the framework's words (offering, never a vertical's).

use super::{Known, offering};
use crate::config::{FUNNEL_STAGES, FlowRole, TenantConfig, ToolsConfig};

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
/// field it describes (the offering also from the request alone), then `FLOWS:` when the tenant
/// has flows the model may send ([`flows_notice`]).
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
    notices.extend(flows_notice(tools, known));
    notices
}

/// 023, 028: which flows the contact's position accepts now and which were already sent, as
/// one server line: `FLOWS: accepted now: a, b; already sent: c`. `send_flow`'s spec lists
/// every flow whatever the contact's position (its bytes depend on the config alone, so
/// providers can cache them), so this notice is where the turn learns what it may send; the
/// tool refuses the rest. `None` for a tenant without such flows.
pub fn flows_notice(tools: &ToolsConfig, known: &Known) -> Option<String> {
    let sendable = || {
        tools
            .flows
            .iter()
            .filter(|f| f.role != Some(FlowRole::Opening))
    };
    sendable().next()?;
    let list = |ids: Vec<&str>| {
        if ids.is_empty() {
            "none".to_owned()
        } else {
            ids.join(", ")
        }
    };
    let accepted: Vec<&str> =
        offering::accepted_flows(tools, &known.sent_flows, known.offering.as_deref())
            .map(|f| f.id.as_str())
            .collect();
    let sent: Vec<&str> = sendable()
        .filter(|f| !f.repeatable && known.sent_flows.contains(&f.id))
        .map(|f| f.id.as_str())
        .collect();
    let mut line = format!(
        "FLOWS: accepted now: {}; already sent: {}",
        list(accepted),
        list(sent)
    );
    // 028: a turn with no offering accepts only the shared flows; the offering's own follow.
    if known.offering.is_none() && sendable().any(|f| f.offering.is_some()) {
        line.push_str("; an offering's own flows are accepted once its offering is recorded");
    }
    Some(line)
}
