//! The payment gate (032 C): the link waits for `prepared`, unless the contact asked for it.

use super::{PREPARED, Refusal, Stage};
use crate::config::{FlowConfig, FlowRole};

/// Whether the payment link may go: `Ok(true)` when `contactAsked` opened the gate (recorded
/// on the entry), `Ok(false)` when the gate was open anyway or the flow is not the link
/// (`contactAsked` on another flow is ignored and not recorded).
pub fn payment_gate(
    flow: &FlowConfig,
    floor: Option<Stage>,
    contact_asked: bool,
) -> Result<bool, Refusal> {
    if flow.role != Some(FlowRole::PaymentLink) || floor.is_some_and(|f| f >= PREPARED) {
        return Ok(false);
    }
    if contact_asked {
        Ok(true)
    } else {
        Err(Refusal::NotPrepared)
    }
}
