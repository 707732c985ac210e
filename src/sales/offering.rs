//! Offerings (028, 042): which flows a turn's offering accepts, and the offering lock.

use super::{OFFERED, Refusal, Stage};
use crate::config::{FlowConfig, FlowRole, ToolsConfig};

/// 028 § Flow availability: a flow with no offering serves every offering; one with an
/// offering only a turn whose offering it is. A turn with no offering accepts only the former.
pub fn flow_scope(flow: &FlowConfig, turn_offering: Option<&str>) -> Result<(), Refusal> {
    match &flow.offering {
        None => Ok(()),
        Some(offering) if Some(offering.as_str()) == turn_offering => Ok(()),
        Some(_) => Err(Refusal::OtherOffering),
    }
}

/// 028 § Lock: the offering field is refused from `offered` on, a payment link in flight this
/// turn counting as `link_sent`.
pub fn offering_lock(floor: Option<Stage>, link_in_flight: bool) -> Result<(), Refusal> {
    if link_in_flight || floor.is_some_and(|f| f >= OFFERED) {
        Err(Refusal::OfferingLocked)
    } else {
        Ok(())
    }
}

/// The flows the model may name (`send_flow`'s enum): every flow but the opening and those
/// sent once already (023: the refusal by offering happens in the tool, not the schema).
pub fn unsent_flows<'a>(
    tools: &'a ToolsConfig,
    sent: &'a std::collections::HashSet<String>,
) -> impl Iterator<Item = &'a FlowConfig> {
    tools
        .flows
        .iter()
        .filter(|f| f.role != Some(FlowRole::Opening))
        .filter(move |f| f.repeatable || !sent.contains(&f.id))
}

/// The unsent flows a turn with `offering` accepts (the description's list, `flowsAvailable`).
pub fn accepted_flows<'a>(
    tools: &'a ToolsConfig,
    sent: &'a std::collections::HashSet<String>,
    offering: Option<&'a str>,
) -> impl Iterator<Item = &'a FlowConfig> {
    unsent_flows(tools, sent).filter(move |f| flow_scope(f, offering).is_ok())
}
