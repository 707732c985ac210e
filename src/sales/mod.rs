//! The sales funnel (023, 027, 028, 032 C, 034, 042): the rules that decide which of the
//! model's sales moves the server accepts, and what it does after them.
//!
//! - [`known`]: what the server knows of a contact from its own records (`Known`): intent, the
//!   last performed stage, the flows performed within the history window, the offering.
//! - [`intent`]: the intent gate (034): before `prospect` every write but the intent field and
//!   notes is refused.
//! - [`funnel`]: forward only against the floor (023), and which conversion event a stage write
//!   fires (027).
//! - [`offering`]: offering scoping of flows and the offering lock (028).
//! - [`payment`]: the payment gate (032 C) and its `contactAsked` bypass.
//! - [`opening`]: the flows the server sends on its own (032 A, B; 034's timing): when the
//!   opening is queued and spent, and which stage-tied flow a funnel write sends.
//! - [`flow`]: [`flow::flow_decision`], the one decision on a flow, shared by staging and by a
//!   flow sent during the turn.
//! - [`turn`]: one turn's view ([`TurnSales`]): the known position plus what the turn staged,
//!   the verdict on each write and the follow-ons it attaches.
//! - [`notices`]: the `INTENT:`, `FUNNEL:` and `OFFERING:` notices.
//!
//! Everything here is a pure function of the config and the records, except [`known::read`],
//! which reads them. The server's truth for intent and stage is its own last performed write
//! (or one staged earlier in the turn), never the request or ManyChat (C4).

pub mod flow;
pub mod funnel;
pub mod intent;
pub mod known;
pub mod notices;
pub mod offering;
pub mod opening;
pub mod payment;
pub mod turn;

pub use flow::{FlowDecision, flow_decision};
pub use intent::Intent;
pub use known::Known;
pub use turn::{Commit, SalesCall, TurnSales, Verdict};

use crate::config::{FUNNEL_STAGES, FieldConfig, FlowConfig, FlowRole, TenantConfig, ToolsConfig};

/// A funnel stage, by its place in [`FUNNEL_STAGES`]: forward is a larger number.
pub type Stage = usize;

/// The stage the server writes after a performed payment link (023); never the model's.
pub const LINK_SENT: Stage = 5;
/// From here the offering is locked (028) and the readiness question is asked (032).
pub const OFFERED: Stage = 3;
/// From here the payment link goes without `contactAsked` (032 C).
pub const PREPARED: Stage = 4;

/// The place of a funnel value, or `None` when it is not one.
pub fn stage_of(value: &str) -> Option<Stage> {
    FUNNEL_STAGES.iter().position(|s| *s == value)
}

/// Why the server refused a write. Results follow 12b: only `not_prospect` and `not_prepared`
/// carry a reason; the others answer `{"staged": false}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 034: the contact is not a recorded prospect.
    NotProspect,
    /// 032 C: the payment link before `prepared`, without `contactAsked`.
    NotPrepared,
    /// 023: a stage before the floor.
    Backward,
    /// 034: `prospect` is final.
    ProspectFinal,
    /// 023: a flow performed within the history window that is not `repeatable`.
    AlreadySent,
    /// 028: a flow of another offering, or of any offering on a turn with none.
    OtherOffering,
    /// 028: the offering field from `offered` on.
    OfferingLocked,
}

impl Refusal {
    /// The reason string the model is told, when the spec gives one, and for the flows
    /// `send_flow`'s enum no longer leaves out (its spec is the config's, whatever the contact's
    /// position): a flow already sent or of another offering.
    pub fn reason(self) -> Option<&'static str> {
        match self {
            Refusal::NotProspect => Some("not_prospect"),
            Refusal::NotPrepared => Some("not_prepared"),
            Refusal::AlreadySent => Some("already_sent"),
            Refusal::OtherOffering => Some("other_offering"),
            _ => None,
        }
    }

    /// What the model is told it can do instead, for the refusals a narrowing enum used to
    /// prevent (`None`: the reason says enough).
    pub fn advice(self) -> Option<&'static str> {
        match self {
            Refusal::AlreadySent => Some(
                "this flow was already sent to this contact: do not send it again; send only a \
                 flow the FLOWS notice accepts now",
            ),
            Refusal::OtherOffering => Some(
                "this flow belongs to another offering than the contact's: send only a flow the \
                 FLOWS notice accepts now",
            ),
            _ => None,
        }
    }

    /// The refusal's code in the turn's record (`turns.actions`, status `refused`): every
    /// refusal has one, including those the model is told nothing more than `staged: false` of.
    pub fn code(self) -> &'static str {
        match self {
            Refusal::NotProspect => "not_prospect",
            Refusal::NotPrepared => "not_prepared",
            Refusal::Backward => "backward_stage",
            Refusal::ProspectFinal => "prospect_final",
            Refusal::AlreadySent => "already_sent",
            Refusal::OtherOffering => "other_offering",
            Refusal::OfferingLocked => "offering_locked",
        }
    }

    /// How the refusal reads in the turn's final note and log lines (configured ids only).
    pub fn describe(self) -> &'static str {
        match self {
            Refusal::NotProspect => "the contact is not a recorded prospect",
            Refusal::NotPrepared => "the payment link waits for the prepared stage",
            Refusal::Backward => "the funnel only moves forward",
            Refusal::ProspectFinal => "prospect is final",
            Refusal::AlreadySent => "already sent to this contact",
            Refusal::OtherOffering => "the flow belongs to another offering",
            Refusal::OfferingLocked => "the offering is locked from the offered stage",
        }
    }
}

/// The funnel field, if the tenant has one.
pub fn funnel_field(tools: &ToolsConfig) -> Option<&FieldConfig> {
    tools.fields.iter().find(|f| f.funnel)
}

/// The intent field, if the tenant has one.
pub fn intent_field(tools: &ToolsConfig) -> Option<&FieldConfig> {
    tools.fields.iter().find(|f| f.intent)
}

/// The offering field, if the tenant has one.
pub fn offering_field(tools: &ToolsConfig) -> Option<&FieldConfig> {
    tools.fields.iter().find(|f| f.offering)
}

/// The payment-link flow, if the tenant has one.
pub fn payment_link(tools: &ToolsConfig) -> Option<&FlowConfig> {
    tools
        .flows
        .iter()
        .find(|f| f.role == Some(FlowRole::PaymentLink))
}

/// Whether the sales rules need the contact's records this turn: a funnel, intent or offering
/// field, or any flow (sent once). A tenant with none of these reads nothing more per turn.
pub fn reads_records(tools: Option<&ToolsConfig>) -> bool {
    tools.is_some_and(|t| {
        !t.flows.is_empty() || t.fields.iter().any(|f| f.funnel || f.intent || f.offering)
    })
}

/// The sales ids the report and the learning cohort count by, from the tenant's `tools.json`: the intent and funnel
/// fields, the funnel's values from `offered` and from `prepared` on, and the payment-link flow.
pub fn sales_keys(config: &TenantConfig) -> crate::store::SalesKeys {
    let Some(tools) = config.tools.as_ref() else {
        return crate::store::SalesKeys::default();
    };
    let funnel = funnel_field(tools);
    let from = |stage: &str| -> Vec<String> {
        funnel
            .map(|f| {
                f.values
                    .iter()
                    .skip_while(|v| v.as_str() != stage)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    crate::store::SalesKeys {
        intent_field: intent_field(tools).map(|f| f.id.clone()),
        funnel_field: funnel.map(|f| f.id.clone()),
        offered_or_later: from("offered"),
        prepared_or_later: from("prepared"),
        payment_flow: payment_link(tools).map(|f| f.id.clone()),
    }
}
