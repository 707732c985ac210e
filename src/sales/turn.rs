//! One turn's sales view: the contact's known position plus what the turn staged, the verdict
//! on each write the model makes, and the follow-ons an accepted write brings (023, 027).

use serde_json::{Map, Value, json};

use super::flow::{FlowDecision, flow_decision};
use super::{Intent, Known, LINK_SENT, Refusal, Stage, funnel, intent, offering, stage_of};
use crate::actions::{Operation, StagedAction};
use crate::config::{FieldConfig, FlowConfig, FlowRole, ToolsConfig};

/// A write the model asked for, as the sales rules see it.
#[derive(Debug, Clone, Copy)]
pub enum SalesCall<'a> {
    SendFlow {
        flow: &'a FlowConfig,
        contact_asked: bool,
    },
    SetField {
        field: &'a FieldConfig,
        value: &'a str,
    },
    /// `write_note`: never gated.
    Note,
    /// `add_tag`, `remove_tag`, `schedule_nudge`: gated by intent only.
    Other,
}

/// The verdict on a write, before it is staged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Stage it; `contact_asked` is recorded on the entry (the bypass opened the gate).
    Allowed {
        contact_asked: bool,
    },
    Refused(Refusal),
}

/// What a staged write brings: follow-ons to stage right after it (not counted against the
/// cap, performed only when the write before them was), and keys added to the tool's result.
#[derive(Debug, Default)]
pub struct Commit {
    pub follow_ons: Vec<StagedAction>,
    pub result: Map<String, Value>,
}

/// The sales position during one turn.
#[derive(Debug, Clone, Default)]
pub struct TurnSales {
    known: Known,
    staged_intent: Option<Intent>,
    staged_stage: Option<Stage>,
    staged_offering: Option<String>,
    link_in_flight: bool,
    /// 034: this is the prospect turn, and the opening is due (sent before the model's first
    /// flow, or before a reply that does not escalate).
    opening_queued: bool,
    /// 025: this turn never sends the opening (a nudge turn), so no write of it queues one.
    no_opening: bool,
    /// 032 B: the stage of the funnel write committed last, until the tools take it to send
    /// the flow tied to it.
    stage_written: Option<Stage>,
}

impl TurnSales {
    pub fn new(known: Known) -> Self {
        Self {
            known,
            ..Self::default()
        }
    }

    pub fn known(&self) -> &Known {
        &self.known
    }

    /// Intent as the server knows it: performed, or staged earlier this turn (034).
    pub fn intent(&self) -> Intent {
        self.staged_intent
            .map_or(self.known.intent, |staged| staged.max(self.known.intent))
    }

    /// 023's floor: the last performed stage, or a later one staged earlier this turn.
    pub fn floor(&self) -> Option<Stage> {
        self.known.stage.max(self.staged_stage)
    }

    /// The turn's offering (028): staged earlier this turn, else the contact's.
    pub fn offering(&self) -> Option<&str> {
        self.staged_offering
            .as_deref()
            .or(self.known.offering.as_deref())
    }

    /// 025: this turn never sends the opening (032 A: a nudge turn), so its intent write neither
    /// queues it nor tells the model it goes (`openingQueued`).
    pub fn without_opening(&mut self) {
        self.no_opening = true;
    }

    /// 034: the opening is due on this turn (its intent write made the contact a prospect).
    pub fn opening_queued(&self) -> bool {
        self.opening_queued
    }

    /// 032 B: the stage an accepted funnel write just named, taken once.
    pub fn take_stage_written(&mut self) -> Option<Stage> {
        self.stage_written.take()
    }

    /// The verdict on a write the model asked for.
    pub fn judge(&self, tools: &ToolsConfig, call: SalesCall<'_>) -> Verdict {
        let decided = match call {
            SalesCall::SendFlow {
                flow,
                contact_asked,
            } => {
                return match flow_decision(tools, self, flow, contact_asked) {
                    FlowDecision::Allowed { contact_asked } => Verdict::Allowed { contact_asked },
                    FlowDecision::Refused(refusal) => Verdict::Refused(refusal),
                };
            }
            SalesCall::SetField { field, value } => {
                intent::gate(tools, self.intent(), intent::Gated::Field(field)).and_then(|()| {
                    if field.intent {
                        let value = Intent::from_value(value).unwrap_or_default();
                        intent::intent_write(self.intent(), value).map(drop)
                    } else if field.funnel {
                        match stage_of(value) {
                            Some(stage) => funnel::stage_write(self.floor(), stage),
                            None => Err(Refusal::Backward),
                        }
                    } else if field.offering {
                        offering::offering_lock(self.floor(), self.link_in_flight)
                    } else {
                        Ok(())
                    }
                })
            }
            SalesCall::Note => Ok(()),
            SalesCall::Other => intent::gate(tools, self.intent(), intent::Gated::Other),
        };
        match decided {
            Ok(()) => Verdict::Allowed {
                contact_asked: false,
            },
            Err(refusal) => Verdict::Refused(refusal),
        }
    }

    /// Takes a staged write into the turn's position and returns what it brings.
    pub fn commit(&mut self, tools: &ToolsConfig, call: SalesCall<'_>) -> Commit {
        let mut commit = Commit::default();
        match call {
            SalesCall::SendFlow { flow, .. } if flow.role == Some(FlowRole::PaymentLink) => {
                // 023 § The sale ends at the payment-link flow: link_sent follows the flow,
                // then the link_sent event (027), each only if the one before was performed.
                self.link_in_flight = true;
                if let Some(funnel) = super::funnel_field(tools) {
                    commit.follow_ons.push(link_sent_write(funnel));
                    if let Some(event) = funnel::event_for(tools, self.floor(), LINK_SENT) {
                        commit.follow_ons.push(event_flow(event));
                    }
                }
                // A payment link in flight counts at link_sent for later writes of the turn,
                // so link_sent stays the last stage ManyChat receives (029).
                self.staged_stage = self.staged_stage.max(Some(LINK_SENT));
            }
            SalesCall::SetField { field, value } if field.intent => {
                let value = Intent::from_value(value).unwrap_or_default();
                // 034: the write that makes the contact a prospect queues the opening.
                if !self.no_opening
                    && let Some(flow) = super::opening::opening_flow(tools)
                    && super::opening::queues_opening(tools, &self.known, self.intent(), value)
                {
                    self.opening_queued = true;
                    commit
                        .result
                        .insert("openingQueued".into(), super::opening::queued_result(flow));
                }
                self.staged_intent = Some(self.staged_intent.unwrap_or_default().max(value));
            }
            SalesCall::SetField { field, value } if field.funnel => {
                if let Some(stage) = stage_of(value) {
                    if let Some(event) = funnel::event_for(tools, self.floor(), stage) {
                        commit.follow_ons.push(event_flow(event));
                    }
                    self.staged_stage = self.staged_stage.max(Some(stage));
                    self.stage_written = Some(stage);
                }
            }
            SalesCall::SetField { field, value } if field.offering => {
                self.staged_offering = Some(value.to_owned());
                // 028: the flows this offering makes available, for the model to send next.
                let available: Vec<Value> =
                    offering::accepted_flows(tools, &self.known.sent_flows, Some(value))
                        .filter(|f| f.offering.as_deref() == Some(value))
                        .map(|f| json!(f.id))
                        .collect();
                commit
                    .result
                    .insert("flowsAvailable".into(), Value::Array(available));
            }
            _ => {}
        }
        commit
    }
}

/// The server's `link_sent` write (023): recorded like the model's writes, never staged by it.
fn link_sent_write(funnel: &FieldConfig) -> StagedAction {
    let mut action = StagedAction::new(
        "set_field",
        &funnel.id,
        Operation::SetField {
            field: funnel.field.clone(),
            value: Value::String("link_sent".into()),
        },
    )
    .following();
    action.entry.value = Some("link_sent".into());
    action
}

/// A conversion event (027): the tracking flow, recorded as `send_event` with its id only.
fn event_flow(event: &crate::config::EventConfig) -> StagedAction {
    StagedAction::new(
        "send_event",
        &event.id,
        Operation::SendFlow {
            flow_ns: event.flow_ns.clone(),
        },
    )
    .following()
}
