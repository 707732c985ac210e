//! The agent's tools for one turn (spec 012, 024, ADR-0016).
//!
//! - [`specs`]: the tool specs built from `tools.json`.
//! - [`contact`]: the get_contact result, a whitelist of the contact's record.
//! - [`opening`]: the flows the server sends on its own during a turn: the opening (032 A, 034)
//!   and stage-tied flows (032 B).
//!
//! Each tool's parameters are enums of configured ids (strict JSON Schema), so the model can
//! only name what the tenant configured; a tool whose list is empty is not offered. The model
//! sees ids and descriptions, never a flow namespace, tag or field name. The specs depend on the
//! config alone (one set for inbound turns, one for nudge turns), never on the contact's
//! position, so every request opens with the same bytes; what the position forbids (a flow sent
//! already, another offering's flow, a read on a turn that does not read history, a third read)
//! is refused by the tool, with a result that says why. No tool takes a
//! subscriber: a `TurnTools` belongs to one turn and its actions land on that turn's contact.
//!
//! Invariants:
//! - Every write stages: `execute` records an action and answers `{"staged": true}`; no ManyChat
//!   request is made for a write during the model call. At most [`MAX_ACTIONS`] actions per
//!   turn (the next answers `{"staged": false}` and is recorded `dropped_over_cap`); identical
//!   actions are staged once; a second note for the same note id replaces the first in its
//!   slot (a write replaces, 024); actions keep the model's order.
//! - A write the server refuses (a sales rule, an unknown id or value, an empty note) is recorded
//!   `refused` with its reason, once per identical refusal: no request, no cap slot, and a later
//!   identical write is not a repeat of it. Only configured ids and values are recorded.
//! - get_contact is the one tool performed when called (ADR-0016), only on a turn that reads
//!   history (offered on every inbound turn, refused with an error on the others), at most [`MAX_READS`] requests per turn, each bounded by [`READ_TIMEOUT`]; a
//!   failure, a timeout or a third call answers `{"available": false}` and the turn goes on.
//!   Note values come back inside the turn's fence, the same one the prompt uses.
//! - Note text is cleaned when staged, so the outbox holds only what the field will; it is
//!   never in a result, the record, the final note or a log line.

mod contact;
mod host;
// Knowledge at scale: search_catalog and the offerings a call names.
mod knowledge;
mod opening;
mod specs;

// 030: the flows a turn sent, shared between its tools and the request.
mod sent;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::actions::{self, ActionStatus, NoteText, Operation, StagedAction, WRITE_TOOLS};
use crate::agent::ToolHost;
use crate::config::{FlowRole, TenantConfig, ToolsConfig};
use crate::fence::Fence;
use crate::ids::{ConversationId, SubscriberId};
use crate::knowledge::{Knowledge, Retrieved};
use crate::manychat::ManyChatClient;
use crate::model::{ToolArguments, ToolCall, ToolSpec};
use crate::plugins::{self, PluginClient, ToolKind};
use crate::sales::{Known, SalesCall, TurnSales, Verdict};

pub use contact::{OTHER_VALUE, contact_view};
pub use sent::FlowSends;
pub use specs::{SEARCH_TOOL, build_specs, build_specs_for};

/// 024 § The loop grows: at most eight actions per turn.
pub const MAX_ACTIONS: usize = 8;

/// 024: a turn reads the contact at most twice.
pub const MAX_READS: u32 = 2;

/// 024: one read's timeout, limiter wait included, so one slow read cannot consume the race.
pub const READ_TIMEOUT: Duration = Duration::from_millis(1500);

/// What a turn's tools need from the turn.
pub struct ToolContext {
    /// The turn's config snapshot.
    pub config: Arc<TenantConfig>,
    /// The shared client (and its limiter) a read goes through.
    pub manychat: ManyChatClient,
    /// The turn's contact: the only one its tools read or write (C4, C5).
    pub subscriber: SubscriberId,
    /// For log lines: the one contact identifier a log may carry.
    pub conversation: ConversationId,
    /// The turn reads history (019: bound, or tokens not enforced); only then is get_contact
    /// performed (it is offered on every inbound turn and refused on the others), since notes
    /// hold the contact's words.
    pub reads_history: bool,
    /// The turn's fence: the prompt and a read's note values must share it.
    pub fence: Fence,
    /// The snapshot's tool specs (`ToolSpecs::new(&config)`, built once per snapshot).
    pub specs: ToolSpecs,
    /// The contact's sales position from the server's records (`sales::known::read`).
    pub sales: Known,
    /// The snapshot's retrieval: `search_catalog` and the offering checks read it.
    pub knowledge: Arc<Knowledge>,
}

/// The contact a turn's requests go to, through the shared client: a read (only on a turn
/// that may read) and a flow sent during the turn (029: only on an inbound turn).
#[derive(Clone)]
struct Reader {
    manychat: ManyChatClient,
    subscriber: SubscriberId,
    conversation: ConversationId,
}

/// The specs of a config snapshot's tools, with and without the reads (`get_contact` and the
/// plugin reads). They depend on the snapshot alone, never on the contact, so the turn engine
/// builds them once per snapshot and every turn shares them: every inbound turn is offered the
/// set with the reads (a turn that does not read history refuses the call), a nudge turn and an
/// eval the set without them. The contact's position is told in the notices and enforced by
/// the tools' refusals, never by a narrower spec, so the request's prefix stays the same bytes.
#[derive(Debug, Clone)]
pub struct ToolSpecs {
    with_read: Arc<[ToolSpec]>,
    without_read: Arc<[ToolSpec]>,
}

impl ToolSpecs {
    pub fn new(config: &TenantConfig) -> Self {
        let build =
            |offer_read| with_plugins(build_specs_for(config, offer_read), config, offer_read);
        Self {
            with_read: build(true),
            without_read: build(false),
        }
    }

    fn offered(&self, offer_read: bool) -> Arc<[ToolSpec]> {
        match offer_read {
            true => self.with_read.clone(),
            false => self.without_read.clone(),
        }
    }
}

/// A turn's specs followed by the tenant's plugin tools (`crate::plugins`: the reads only on a
/// turn that reads history).
fn with_plugins(
    mut specs: Vec<ToolSpec>,
    config: &TenantConfig,
    offer_read: bool,
) -> Arc<[ToolSpec]> {
    specs.extend(plugins::specs(config.plugins.as_ref(), offer_read));
    Arc::from(specs)
}

/// The tools of one turn, and what they staged and read.
pub struct TurnTools {
    config: Arc<TenantConfig>,
    specs: Arc<[ToolSpec]>,
    actions: Vec<StagedAction>,
    refused: Vec<String>,
    reader: Option<Reader>,
    fence: Fence,
    /// Reads that made a request (the cap counts these).
    read_attempts: u32,
    /// Reads that succeeded (`turns.reads`).
    reads: u32,
    /// The last successful read's result, for the final step's note.
    last_read: Option<Value>,
    /// The turn's sales position: what the rules of `crate::sales` decide writes against.
    sales: TurnSales,
    /// 029: where this turn sends its flows during the call (`Some` only on an inbound turn
    /// that opted in with [`TurnTools::sending_flows`]); `None` stages them.
    sender: Option<Reader>,
    /// The client the turn's flows would go through, kept so that `sending_flows` can opt in.
    contact: Option<Reader>,
    /// The flows this turn sent, in call order (029, 030); shared with the turn, which holds
    /// the reply until they have played (030).
    sent: FlowSends,
    /// A flow request still in flight when the call was cut short (029: an abort waits for it).
    in_flight: Option<tokio::task::JoinHandle<StagedAction>>,
    /// 032 A: where the turn claims the contact's opening (`None`: it never sends one).
    claims: Option<opening::OpeningClaims>,
    /// 032 A: the turn tried to send its opening (claimed and sent, or lost the claim).
    opening_tried: bool,
    /// Where a plugin read goes (`None`: plugin reads answer `{"available": false}`).
    plugins: Option<PluginClient>,
    /// The turn's plugin reads, in call order (`turns.plugin_reads`).
    plugin_reads: Vec<plugins::ReadRecord>,
    /// The snapshot's retrieval (`search_catalog`, the closest ids of an unknown offering).
    knowledge: Arc<Knowledge>,
    /// What the turn's tools gave the model beyond the retrieved block: `search_catalog`'s
    /// results and an offering a call named (`turns.knowledge`).
    given: Retrieved,
}

/// A flow this turn asked ManyChat to send (029), and when ManyChat answered (030).
#[derive(Debug, Clone)]
pub struct SentFlow {
    /// The configured flow id.
    pub id: String,
    /// ManyChat accepted the request.
    pub accepted: bool,
    /// When ManyChat answered: the flow starts playing here (030).
    pub answered_at: tokio::time::Instant,
    /// The flow's declared play time (`settleSeconds`, absent: 0).
    pub settle: Duration,
}

/// The first of `entries` whose `id` is `id`.
macro_rules! by_id {
    ($entries:expr, $id:expr) => {{
        let id = $id;
        $entries.find(|entry| entry.id == id)
    }};
}

impl TurnTools {
    /// The tools of an agent turn.
    pub fn new(context: ToolContext) -> Self {
        let contact = Reader {
            manychat: context.manychat,
            subscriber: context.subscriber,
            conversation: context.conversation,
        };
        let reader = context.reads_history.then(|| contact.clone());
        // The same specs on every inbound turn, bound or not: a turn that does not read history
        // refuses the read instead (024), so the tools never depend on the contact.
        let specs = context.specs.offered(true);
        let mut tools = Self::build(context.config, specs, reader, context.fence);
        tools.sales = TurnSales::new(context.sales);
        tools.knowledge = context.knowledge;
        tools.contact = Some(contact);
        tools
    }

    /// 025: the tools of a nudge turn: no `get_contact` (no request carried the contact's
    /// token, 019), no `schedule_nudge` (a nudge cannot chain), and flows staged, to follow
    /// the text (never [`TurnTools::sending_flows`]), and never the opening (032 A).
    pub fn for_nudge(context: ToolContext) -> Self {
        let without_read = context.specs.offered(false);
        let mut tools = Self::new(ToolContext {
            reads_history: false,
            ..context
        });
        tools.specs = without_read
            .iter()
            .filter(|spec| spec.name != specs::NUDGE_TOOL)
            .cloned()
            .collect();
        tools.sales.without_opening();
        tools
    }

    /// 029: this turn answers the contact, so `send_flow` sends the flow during the call and
    /// answers `{"sent": …}`. Without it (a nudge turn, an eval) flows stay staged.
    pub fn sending_flows(mut self) -> Self {
        self.sender = self.contact.clone();
        self
    }

    /// 030: records this turn's sent flows in `sends`, which the turn reads to hold its reply
    /// (also at the race deadline, while the call still runs).
    pub fn recording_sends_in(mut self, sends: FlowSends) -> Self {
        self.sent = sends;
        self
    }

    /// Tools that stage and never make a request, so get_contact is not offered (the eval
    /// runner: tools are staged, never performed).
    pub fn without_reads(config: Arc<TenantConfig>) -> Self {
        Self::without_reads_for(config, Known::default())
    }

    /// [`TurnTools::without_reads`] for a contact at a known sales position (the eval runner:
    /// a case's contact).
    pub fn without_reads_for(config: Arc<TenantConfig>, sales: Known) -> Self {
        let knowledge = Arc::new(Knowledge::build(&config));
        Self::without_reads_with(config, sales, knowledge)
    }

    /// [`TurnTools::without_reads_for`] with the snapshot's retrieval already built (an eval
    /// suite builds it once).
    pub fn without_reads_with(
        config: Arc<TenantConfig>,
        sales: Known,
        knowledge: Arc<Knowledge>,
    ) -> Self {
        let specs = ToolSpecs::new(&config).offered(false);
        let mut tools = Self::build(config, specs, None, Fence::new());
        tools.sales = TurnSales::new(sales);
        tools.knowledge = knowledge;
        tools
    }

    /// What the turn's tools gave the model beyond its retrieved block (`search_catalog`'s
    /// results, an offering a call named), as catalog and passage positions.
    pub fn given(&self) -> &Retrieved {
        &self.given
    }

    fn build(
        config: Arc<TenantConfig>,
        specs: Arc<[ToolSpec]>,
        reader: Option<Reader>,
        fence: Fence,
    ) -> Self {
        Self {
            config,
            specs,
            actions: Vec::new(),
            refused: Vec::new(),
            reader,
            fence,
            read_attempts: 0,
            reads: 0,
            last_read: None,
            sales: TurnSales::default(),
            sender: None,
            contact: None,
            sent: FlowSends::default(),
            in_flight: None,
            claims: None,
            opening_tried: false,
            plugins: None,
            plugin_reads: Vec::new(),
            knowledge: Arc::default(),
            given: Retrieved::default(),
        }
    }

    /// The turn's plugin reads go through `client` (only on a turn that reads history).
    pub fn calling_plugins(mut self, client: PluginClient) -> Self {
        self.plugins = Some(client);
        self
    }

    /// The turn's plugin reads, in call order (`turns.plugin_reads`).
    pub fn plugin_reads(&self) -> &[plugins::ReadRecord] {
        &self.plugin_reads
    }

    /// The flows this turn sent, in call order (029), with ManyChat's answer times (030).
    pub fn sent_flows(&self) -> &FlowSends {
        &self.sent
    }

    /// Waits for a flow request still in flight when the model call was cut short (029: an
    /// abort records the flow's outcome, so it waits for ManyChat's answer first).
    pub async fn settle_in_flight(&mut self) {
        if self.in_flight.is_some() {
            self.await_flow().await;
        }
    }

    /// Whether any tool is offered this turn (012: `turns.actions` is null otherwise).
    pub fn offered(&self) -> bool {
        !self.specs.is_empty()
    }

    /// Successful contact reads this turn (`turns.reads`).
    pub fn reads(&self) -> u32 {
        self.reads
    }

    /// Every action the model staged, in its order, including those dropped over the cap and
    /// the writes the server refused (`refused`, with their reason).
    pub fn into_actions(self) -> Vec<StagedAction> {
        self.actions
    }

    fn tools(&self) -> Option<&ToolsConfig> {
        self.config.tools.as_ref()
    }

    /// Resolves a write to the action it stages, or a refusal: its record reason and what the
    /// model is told.
    fn resolve(&self, name: &str, args: &Value) -> Result<StagedAction, Rejected> {
        let tools = self
            .tools()
            .ok_or_else(|| Rejected::new("unknown_tool", "no tools are configured"))?;
        let arg = |key: &str| {
            args.get(key)
                .and_then(Value::as_str)
                .ok_or_else(|| Rejected::new("missing_argument", &format!("{key} is required")))
        };
        // The call named no configured `what`.
        let unknown = |what: &str| Rejected::new("unknown_id", &format!("unknown {what} id"));
        // The configured entry of `entries` with the id the call gave as its `what`.
        macro_rules! named {
            ($what:literal, $id:expr, $entries:expr) => {
                by_id!($entries, $id).ok_or_else(|| unknown($what))?
            };
        }
        match name {
            "send_flow" => {
                let flow = named!(
                    "flow",
                    arg("flow")?,
                    tools
                        .flows
                        .iter()
                        .filter(|f| f.role != Some(FlowRole::Opening))
                );
                Ok(StagedAction::new(
                    "send_flow",
                    &flow.id,
                    Operation::SendFlow {
                        flow_ns: flow.flow_ns.clone(),
                    },
                ))
            }
            "add_tag" | "remove_tag" => {
                let tag = named!("tag", arg("tag")?, tools.tags.iter());
                let operation = if name == "add_tag" {
                    Operation::AddTag {
                        tag: tag.tag.clone(),
                    }
                } else {
                    Operation::RemoveTag {
                        tag: tag.tag.clone(),
                    }
                };
                Ok(StagedAction::new(name, &tag.id, operation))
            }
            "set_field" => {
                let id = arg("field")?;
                let value = arg("value")?;
                let field = named!("field", id, tools.fields.iter());
                if field.offering {
                    // 028: an offering id, checked against the whole catalog (retrieval only
                    // chose what the model was shown).
                    if !self.config.catalog.offerings.iter().any(|o| o.id == value) {
                        let closest = self.knowledge.closest_offerings(&self.config, value);
                        let message = match closest.is_empty() {
                            true => "value is not an offering id in the catalog".to_owned(),
                            false => format!(
                                "value is not an offering id in the catalog; closest ids: {}",
                                closest.join(", ")
                            ),
                        };
                        return Err(Rejected::new("unknown_value", &message).on(&field.id));
                    }
                } else if !specs::model_values(field).any(|v| v == value) {
                    // An offering, stage or value the tenant did not configure: the field is
                    // named in the record, the model's value never is.
                    return Err(Rejected::new(
                        "unknown_value",
                        &format!("value is not one of {}'s values", field.id),
                    )
                    .on(&field.id));
                }
                let mut action = StagedAction::new(
                    "set_field",
                    &field.id,
                    Operation::SetField {
                        field: field.field.clone(),
                        value: Value::String(value.to_owned()),
                    },
                );
                action.entry.value = Some(value.to_owned());
                Ok(action)
            }
            "write_note" => {
                let id = arg("note")?;
                let raw = arg("text")?;
                let note = named!("note", id, tools.notes.iter());
                let Some(text) = NoteText::clean(raw, note.max_length as usize) else {
                    return Err(Rejected {
                        reason: "empty_note",
                        id: Some(note.id.clone()),
                        message: None,
                    });
                };
                let mut action = StagedAction::new(
                    "write_note",
                    &note.id,
                    Operation::WriteNote {
                        field: note.field.clone(),
                        text: text.clone(),
                        on_escalation: note.on_escalation,
                    },
                );
                action.entry.length = Some(text.chars());
                Ok(action)
            }
            "schedule_nudge" => {
                let delay = named!(
                    "delay",
                    arg("delay")?,
                    tools.nudge.iter().flat_map(|n| n.delays.iter())
                );
                Ok(StagedAction::new(
                    "schedule_nudge",
                    &delay.id,
                    Operation::ScheduleNudge {
                        minutes: delay.minutes,
                    },
                ))
            }
            _ => Err(Rejected::new("unknown_tool", "unknown tool")),
        }
    }

    /// Records a write the server refused (the record says what happened): `refused`
    /// with its reason, no request, no cap slot. A repeat of the same refusal is recorded once.
    fn record_refusal(&mut self, action: StagedAction, reason: &str) {
        let refused = action.refused(reason);
        let repeat = self.actions.iter().any(|a| {
            a.entry.status == ActionStatus::Refused
                && a.entry.tool == refused.entry.tool
                && a.entry.id == refused.entry.id
                && a.entry.value == refused.entry.value
                && a.entry.reason == refused.entry.reason
        });
        if !repeat {
            self.actions.push(refused);
        }
    }

    fn stage(&mut self, action: StagedAction) -> Value {
        // A write replaces (024): a later note for the same note takes the earlier one's slot.
        if action.entry.tool == "write_note"
            && let Some(earlier) = self
                .actions
                .iter_mut()
                .filter(|a| a.live())
                .find(|a| a.entry.tool == "write_note" && a.entry.id == action.entry.id)
        {
            *earlier = action;
            return json!({"staged": true});
        }
        let same = |a: &StagedAction| {
            a.entry.tool == action.entry.tool
                && a.entry.id == action.entry.id
                && a.entry.value == action.entry.value
                && a.live()
                // A plugin write is identical only with identical arguments.
                && (!matches!(action.operation, Operation::Plugin { .. })
                    || a.operation == action.operation)
        };
        if self.actions.iter().any(same) {
            return json!({"staged": true});
        }
        if self.counted() >= MAX_ACTIONS {
            let mut dropped = action;
            dropped.settle_unperformed(ActionStatus::DroppedOverCap);
            self.refused.push(format!(
                "{} {} (over the {MAX_ACTIONS}-action limit)",
                dropped.entry.tool, dropped.entry.id
            ));
            self.actions.push(dropped);
            return json!({"staged": false, "reason": "action_limit"});
        }
        self.actions.push(action);
        json!({"staged": true})
    }

    /// The actions that take a cap slot: follow-ons (link_sent, events), refusals and the
    /// opening never do (023, 027, 032 A, 034).
    fn counted(&self) -> usize {
        self.actions
            .iter()
            .filter(|a| a.live() && !a.follows)
            .filter(|a| a.entry.origin.as_deref() != Some("opening"))
            .count()
    }

    /// 029: `send_flow` on an inbound turn. The sales rules refuse before any request
    /// (`sales::flow_decision`, through `judge`); a repeat of a flow this turn already sent
    /// returns the first call's outcome; over the cap nothing is sent. Otherwise the flow is
    /// sent now and, accepted, its follow-ons go right after it: a payment link takes the
    /// turn's staged funnel writes with it, then `link_sent` and its event. Answers
    /// `{"sent": bool}`, with a reason where one is given.
    async fn send_flow_now(&mut self, args: &Value, mut action: StagedAction) -> Value {
        let config = self.config.clone();
        let Some(tools) = config.tools.as_ref() else {
            return json!({"sent": false});
        };
        let Some(call) = sales_call(tools, "send_flow", args) else {
            return json!({"sent": false});
        };
        // Once per turn: the first call's outcome (calls run one after another, so the first
        // request has been answered by now).
        if let Some(first) = self.sent.find(&action.entry.id) {
            return json!({"sent": first.accepted});
        }
        let contact_asked = match self.sales.judge(tools, call) {
            Verdict::Refused(refusal) => {
                self.refused.push(format!(
                    "send_flow {} ({})",
                    action.entry.id,
                    refusal.describe()
                ));
                self.record_refusal(action, refusal.code());
                return refused_result("sent", refusal);
            }
            Verdict::Allowed { contact_asked } => contact_asked,
        };
        if self.counted() >= MAX_ACTIONS {
            action.settle_unperformed(ActionStatus::DroppedOverCap);
            self.refused.push(format!(
                "send_flow {} (over the {MAX_ACTIONS}-action limit)",
                action.entry.id
            ));
            self.actions.push(action);
            return json!({"sent": false, "reason": "action_limit"});
        }
        if contact_asked {
            action.entry.contact_asked = Some(true);
        }
        // 032 A: nothing goes ahead of the opening.
        self.send_opening().await;
        let accepted = self.dispatch(action).await;
        let mut result = json!({"sent": accepted});
        if accepted {
            let commit = self.sales.commit(tools, call);
            if !commit.follow_ons.is_empty() {
                self.send_follow_ons(commit.follow_ons).await;
            }
            if let Some(object) = result.as_object_mut() {
                object.extend(commit.result);
            }
        }
        result
    }

    /// Sends a flow now, through the turn's sender (the model's, or one the server sends itself),
    /// and takes ManyChat's answer into the record and the turn's sends: whether it was
    /// accepted. Without a sender (flows stay staged: a nudge turn, an eval) nothing is sent.
    async fn dispatch(&mut self, mut action: StagedAction) -> bool {
        let Some(sender) = self.sender.clone() else {
            return false;
        };
        self.in_flight = Some(tokio::spawn(async move {
            // The outcome is on the entry; `await_flow` logs a refusal.
            let _ = actions::perform_one(
                &sender.manychat,
                &sender.subscriber,
                sender.conversation,
                &mut action,
            )
            .await;
            action
        }));
        self.await_flow().await
    }

    /// Takes the answer of the flow request in flight into the turn's record (call order) and
    /// its sends; returns whether ManyChat accepted it.
    async fn await_flow(&mut self) -> bool {
        let Some(handle) = self.in_flight.as_mut() else {
            return false;
        };
        let joined = handle.await;
        self.in_flight = None;
        let Ok(action) = joined else {
            return false;
        };
        let accepted = action.entry.status == ActionStatus::Performed;
        if let Some(sender) = &self.sender
            && !accepted
        {
            tracing::warn!(
                conversation = %sender.conversation,
                id = %action.entry.id,
                error = %action.entry.error.as_deref().unwrap_or_default(),
                "flow refused by ManyChat during the turn"
            );
        }
        let settle = self
            .tools()
            .and_then(|t| t.flows.iter().find(|f| f.id == action.entry.id))
            .and_then(|f| f.settle_seconds)
            .map_or(Duration::ZERO, |s| Duration::from_secs(u64::from(s)));
        self.sent.push(SentFlow {
            id: action.entry.id.clone(),
            accepted,
            answered_at: tokio::time::Instant::now(),
            settle,
        });
        self.actions.push(action);
        accepted
    }

    /// The payment link's chain, right after the flow (029, 023, 027): the intent and funnel
    /// writes staged earlier this turn (with their events), so `link_sent` is the last stage
    /// ManyChat receives, then `link_sent` and its event, each only after the one before was
    /// performed.
    async fn send_follow_ons(&mut self, follow_ons: Vec<StagedAction>) {
        let Some(sender) = self.sender.clone() else {
            return;
        };
        // The contact's position: its intent and funnel writes (034, 023).
        let position: Vec<String> = self
            .tools()
            .map(|t| {
                t.fields
                    .iter()
                    .filter(|f| f.funnel || f.intent)
                    .map(|f| f.id.clone())
                    .collect()
            })
            .unwrap_or_default();
        let mut index = 0;
        while index < self.actions.len() {
            let action = &self.actions[index];
            let stage_write = action.entry.status == ActionStatus::Staged
                && !action.follows
                && action.entry.tool == "set_field"
                && position.contains(&action.entry.id);
            let mut end = index + 1;
            while end < self.actions.len() && self.actions[end].follows {
                end += 1;
            }
            if stage_write {
                actions::perform_all(
                    &sender.manychat,
                    &sender.subscriber,
                    sender.conversation,
                    &mut self.actions[index..end],
                )
                .await;
            }
            index = end;
        }
        let start = self.actions.len() - 1;
        self.actions.extend(follow_ons);
        // The slice starts at the flow, so its follow-ons see it performed.
        actions::perform_all(
            &sender.manychat,
            &sender.subscriber,
            sender.conversation,
            &mut self.actions[start..],
        )
        .await;
    }

    /// What the sales rules make of a write (`crate::sales`): refused before any request and
    /// without a cap slot, or staged with the follow-ons and result keys it brings.
    fn stage_for_sale(&mut self, name: &str, args: &Value, mut action: StagedAction) -> Value {
        let config = self.config.clone();
        let Some(tools) = config.tools.as_ref() else {
            return self.stage(action);
        };
        let Some(call) = sales_call(tools, name, args) else {
            return self.stage(action);
        };
        match self.sales.judge(tools, call) {
            Verdict::Refused(refusal) => {
                self.refused.push(format!(
                    "{} {} ({})",
                    action.entry.tool,
                    action.entry.id,
                    refusal.describe()
                ));
                self.record_refusal(action, refusal.code());
                refused_result("staged", refusal)
            }
            Verdict::Allowed { contact_asked } => {
                if contact_asked {
                    action.entry.contact_asked = Some(true);
                }
                let before = self.actions.len();
                let mut result = self.stage(action);
                // Only a newly staged write commits (a duplicate or a dropped one does not).
                let staged = self.actions.len() > before
                    && self.actions[before].entry.status == ActionStatus::Staged;
                if staged {
                    let commit = self.sales.commit(tools, call);
                    self.actions.extend(commit.follow_ons);
                    if let Some(object) = result.as_object_mut() {
                        object.extend(commit.result);
                    }
                }
                result
            }
        }
    }

    /// A call of one of the tenant's plugin tools (`None`: not a plugin tool's name). A read is
    /// performed now within the turn's reads (shared with get_contact); a write is staged under
    /// the same rules as a built-in write (cap, de-duplication, the sales rules' refusals).
    async fn call_plugin(&mut self, call: &ToolCall) -> Option<Value> {
        let config = self.config.clone();
        let tool = config.plugins.as_ref()?.tool(&call.name)?;
        let ToolArguments::Valid(args) = &call.arguments else {
            return Some(json!({"staged": false, "error": "invalid arguments"}));
        };
        Some(match tool.kind {
            ToolKind::Read => self.plugin_read(tool, args).await,
            ToolKind::Write => match plugins::stage_write(tool, args) {
                Ok(action) => self.stage_for_sale(&call.name, args, action),
                Err(refused) => {
                    self.refused
                        .push(format!("{} ({})", call.name, refused.message));
                    self.record_refusal(
                        StagedAction::new(&tool.name, "", Operation::Cleared),
                        refused.reason,
                    );
                    json!({"staged": false, "error": refused.message})
                }
            },
        })
    }

    /// A plugin read: performed now, on a turn that reads history, within the turn's reads.
    async fn plugin_read(&mut self, tool: &plugins::PluginTool, args: &Value) -> Value {
        let unavailable = plugins::result::unavailable();
        let (Some(reader), Some(client)) = (&self.reader, &self.plugins) else {
            // Not offered on this turn: only a misbehaving model gets here.
            return unavailable;
        };
        if self.read_attempts >= MAX_READS {
            self.refused
                .push(format!("{} (over the {MAX_READS}-read limit)", tool.name));
            self.plugin_reads.push(plugins::over_budget(tool));
            return unavailable;
        }
        let read = plugins::read(
            client,
            tool,
            &reader.subscriber,
            reader.conversation,
            args,
            &self.fence,
        )
        .await;
        match read {
            Ok((view, record)) => {
                self.read_attempts += 1;
                self.plugin_reads.push(record);
                view
            }
            Err(refused) => {
                self.refused
                    .push(format!("{} ({})", tool.name, refused.message));
                json!({"available": false, "error": refused.message})
            }
        }
    }

    /// get_contact: performed now, through the shared client, within the read cap.
    async fn read(&mut self) -> Value {
        let unavailable = json!({"available": false});
        let Some(tools) = self.config.tools.as_ref() else {
            return unavailable;
        };
        let Some(reader) = &self.reader else {
            // 024: offered on every inbound turn (the specs are the config's), performed only
            // on a turn that reads history; this one answers without the contact's record.
            self.refused
                .push("get_contact (this turn does not read the contact)".to_owned());
            return json!({
                "available": false,
                "error": "this turn cannot read the contact: answer from the conversation"
            });
        };
        if self.read_attempts >= MAX_READS {
            self.refused
                .push(format!("get_contact (over the {MAX_READS}-read limit)"));
            return unavailable;
        }
        self.read_attempts += 1;
        match reader
            .manychat
            .get_contact(&reader.subscriber, READ_TIMEOUT)
            .await
        {
            Ok(record) => {
                let catalog = &self.config.catalog;
                let in_catalog = |id: &str| catalog.offerings.iter().any(|o| o.id == id);
                let view = contact::contact_view_with(tools, &in_catalog, &record, &self.fence);
                self.reads += 1;
                self.last_read = Some(view.clone());
                view
            }
            Err(error) => {
                tracing::warn!(
                    conversation = %reader.conversation,
                    error_kind = error.kind(),
                    "contact read failed; the turn goes on without it"
                );
                unavailable
            }
        }
    }
}

/// A call refused before it resolves to an action (an unknown tool, id or value, a missing
/// argument, a note empty after cleaning).
struct Rejected {
    /// The record's reason (`ActionEntry::reason`).
    reason: &'static str,
    /// The configured id the call named, when it named one.
    id: Option<String>,
    /// What the model is told as `error` (`None`: `{"staged": false}` alone).
    message: Option<String>,
}

impl Rejected {
    fn new(reason: &'static str, message: &str) -> Self {
        Self {
            reason,
            id: None,
            message: Some(message.to_owned()),
        }
    }

    fn on(mut self, id: &str) -> Self {
        self.id = Some(id.to_owned());
        self
    }
}

/// The result the model gets for a write the sales rules refused: `{key: false}`, with the
/// reason where there is one and, for a flow the contact's position excludes, what to do
/// instead.
fn refused_result(key: &str, refusal: crate::sales::Refusal) -> Value {
    let mut result = json!({key: false});
    if let Some(reason) = refusal.reason() {
        result["reason"] = json!(reason);
    }
    if let Some(advice) = refusal.advice() {
        result["error"] = json!(advice);
    }
    result
}

/// A write as the sales rules see it (`None`: a tool they do not know).
fn sales_call<'a>(tools: &'a ToolsConfig, name: &str, args: &'a Value) -> Option<SalesCall<'a>> {
    let arg = |key: &str| args.get(key).and_then(Value::as_str);
    match name {
        "send_flow" => {
            let flow = by_id!(tools.flows.iter(), arg("flow")?)?;
            Some(SalesCall::SendFlow {
                flow,
                contact_asked: args.get("contactAsked").and_then(Value::as_bool) == Some(true),
            })
        }
        "set_field" => {
            let field = by_id!(tools.fields.iter(), arg("field")?)?;
            Some(SalesCall::SetField {
                field,
                value: arg("value")?,
            })
        }
        "write_note" => Some(SalesCall::Note),
        _ => Some(SalesCall::Other),
    }
}

#[cfg(test)]
mod tests;
