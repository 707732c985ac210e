//! The one decision on a flow the model names (023, 028, 032 C, 034), shared by staging (a
//! flow that follows the reply) and by a flow sent during the turn (029): both ask it, so the
//! two paths cannot drift apart.

use super::{Refusal, TurnSales, intent, offering, payment};
use crate::config::{FlowConfig, ToolsConfig};

/// What the server does with a flow the model named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowDecision {
    /// The flow may go. `contact_asked`: the model's `contactAsked` opened the payment gate
    /// (recorded on the entry).
    Allowed { contact_asked: bool },
    /// Refused before any request, taking no cap slot.
    Refused(Refusal),
}

/// The decision, in the order the rules apply: the intent gate, sent once, offering scoping,
/// the payment gate.
pub fn flow_decision(
    tools: &ToolsConfig,
    sales: &TurnSales,
    flow: &FlowConfig,
    contact_asked: bool,
) -> FlowDecision {
    let decided = intent::gate(tools, sales.intent(), intent::Gated::Other)
        .and_then(|()| {
            if !flow.repeatable && sales.known().sent_flows.contains(&flow.id) {
                Err(Refusal::AlreadySent)
            } else {
                Ok(())
            }
        })
        .and_then(|()| offering::flow_scope(flow, sales.offering()))
        .and_then(|()| payment::payment_gate(flow, sales.floor(), contact_asked));
    match decided {
        Ok(contact_asked) => FlowDecision::Allowed { contact_asked },
        Err(refusal) => FlowDecision::Refused(refusal),
    }
}
