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

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(role: Option<FlowRole>) -> FlowConfig {
        FlowConfig {
            id: "f".into(),
            flow_ns: "ns".into(),
            description: "d".into(),
            role,
            repeatable: role.is_some(),
            settle_seconds: None,
            on_stage: None,
            offering: None,
        }
    }

    #[test]
    fn spec_032_verification_4_the_gate_and_its_bypass() {
        let link = flow(Some(FlowRole::PaymentLink));
        assert_eq!(payment_gate(&link, None, false), Err(Refusal::NotPrepared));
        assert_eq!(
            payment_gate(&link, Some(3), false),
            Err(Refusal::NotPrepared)
        );
        assert_eq!(
            payment_gate(&link, Some(3), true),
            Ok(true),
            "the bypass is recorded"
        );
        assert_eq!(
            payment_gate(&link, Some(PREPARED), true),
            Ok(false),
            "not needed: not recorded"
        );
        assert_eq!(payment_gate(&link, Some(5), false), Ok(false));
    }

    #[test]
    fn contact_asked_on_another_flow_is_ignored_and_not_recorded() {
        assert_eq!(payment_gate(&flow(None), None, true), Ok(false));
    }
}
