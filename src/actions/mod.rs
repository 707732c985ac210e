//! Performing staged actions, and the per-turn action record (012 § Every staged action is
//! recorded on its turn).
//!
//! An action has two halves. Its `ActionEntry` is what `turns.actions` records: configured ids
//! and values only, never a flow namespace, a ManyChat tag or field name, or note text (024:
//! a note is recorded by its length). Its `Operation` is what the server sends to ManyChat,
//! resolved from the tenant config when the action was staged; it travels in the outbox payload of
//! a deferred turn (server-side only) and is never recorded on the turn.
//!
//! Invariants: each action gets exactly one attempt, in staged order, through the shared
//! ManyChat client and its limiter; a failure is logged at warn with the tool, the configured id
//! and the ManyChat error kind, never retried (012 § A failed action is logged, never retried).
//! A note's text is never in an entry, a log line or an error (an error quoting it has it
//! replaced by `[note]`), and an action settled without being performed forgets its request
//! ([`Operation::Cleared`]), so a discarded note's text does not outlive its turn in an outbox row.
//! On an escalation only an `onEscalation` note of a model or confidence escalation stays
//! staged ([`settle_on_escalation`], 024 § A handoff summary survives).
//!
//! A note's text is a [`NoteText`] (`note.rs`), cleaned and bounded, whether the model wrote it
//! through a tool or a plugin argument carries it.

mod note;

pub use note::NoteText;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::escalation::EscalationCause;
use crate::ids::{ConversationId, SubscriberId};
use crate::manychat::ManyChatClient;
use crate::metrics::Metrics;

/// The tools that write (everything but `get_contact`): a refused call of one is recorded under
/// its name; any other name is recorded as `unknown`.
pub const WRITE_TOOLS: [&str; 6] = [
    "send_flow",
    "add_tag",
    "remove_tag",
    "set_field",
    "write_note",
    "schedule_nudge",
];

/// What replaces a note's text in an error message (024).
pub const NOTE_PLACEHOLDER: &str = "[note]";

/// What became of an action (012's status table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionStatus {
    /// Not yet performed; waiting for the response or the outbox.
    Staged,
    /// ManyChat accepted the request.
    Performed,
    /// ManyChat rejected it; `error` holds the reason.
    Failed,
    /// The turn escalated.
    Discarded,
    /// Staged past the per-turn limit and never sent.
    DroppedOverCap,
    /// Its outbox row was dead-lettered, so it was never sent.
    DeadLettered,
    /// The server refused the call before any request (a sales rule, an id or value the
    /// tenant did not configure): `reason` says which. Takes no slot of the per-turn limit, is
    /// never performed, and is not an action the contact saw (beyond 012's six statuses: none
    /// of them says "refused by the server").
    Refused,
}

impl ActionStatus {
    /// The status as `turns.actions` records it (its serde name), the `status` label of
    /// `actions_total`: a status added here is labelled without another change.
    pub fn label(self) -> String {
        match serde_json::to_value(self) {
            Ok(Value::String(name)) => name,
            _ => "unknown".to_owned(),
        }
    }
}

/// One entry of `turns.actions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionEntry {
    /// `send_flow`, `add_tag`, `remove_tag`, `set_field`, `write_note`, or a record kind such as
    /// `send_event`.
    pub tool: String,
    /// The configured id (flow, tag, field or note id), never the ManyChat name. Empty (and left
    /// out) only on a `refused` entry whose id the tenant did not configure: the model's own
    /// string is never recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// set_field: the configured value id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// write_note: the length written (the text itself is never recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<usize>,
    pub status: ActionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `refused`: why. A sales rule's code (`crate::sales::Refusal::code`: `not_prospect`,
    /// `not_prepared`, `backward_stage`, `prospect_final`, `already_sent`, `other_offering`,
    /// `offering_locked`) or the tool's (`unknown_tool`, `invalid_arguments`,
    /// `missing_argument`, `unknown_id`, `unknown_value`, `empty_note`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Set on actions the server performed without the model calling a tool: `handoff`
    /// (escalation), `opening`, `stage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// 032 C: the model's `contactAsked` opened the payment gate (only then recorded).
    #[serde(
        rename = "contactAsked",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub contact_asked: Option<bool>,
    /// A plugin write: its enum, number and boolean arguments, and each note as
    /// `{"length": n}` (never its text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Map<String, Value>>,
}

/// The ManyChat request an action resolves to. Holds tenant-account names, so it is never
/// written to `turns.actions` or a log line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Operation {
    SendFlow {
        flow_ns: String,
    },
    AddTag {
        tag: String,
    },
    RemoveTag {
        tag: String,
    },
    SetField {
        field: String,
        value: Value,
    },
    /// write_note (024): a setCustomFieldByName of cleaned text on the note's field; the write
    /// replaces the field's value.
    WriteNote {
        field: String,
        text: NoteText,
        /// The note is `onEscalation`: it survives a model or confidence escalation.
        #[serde(default)]
        on_escalation: bool,
    },
    /// schedule_nudge (025): no ManyChat request; performing it upserts the conversation's one
    /// pending nudge, due `minutes` after it is performed ([`perform_nudges`]).
    ScheduleNudge {
        minutes: u32,
    },
    /// A write tool of `plugins.json`: no ManyChat request; performed by
    /// `crate::plugins::perform_writes` as a signed call to the tool's endpoint, looked up by name
    /// in the config in force then. `arguments` are what the endpoint receives (a note cleaned).
    Plugin {
        tool: String,
        arguments: serde_json::Map<String, Value>,
    },
    /// An action that will never be performed (discarded, dropped over the cap, dead-lettered):
    /// its request is forgotten.
    Cleared,
}

/// An action as staged: its record entry and the request that performs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagedAction {
    pub entry: ActionEntry,
    pub operation: Operation,
    /// A follow-on (023 `link_sent`, 027 `send_event`): performed only when the action before
    /// it in the list was performed, never counted against the cap, and left out of the record
    /// when it never ran (a failed, discarded or dead-lettered write sends nothing after it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub follows: bool,
}

impl StagedAction {
    pub fn new(tool: &str, id: &str, operation: Operation) -> Self {
        Self {
            entry: ActionEntry {
                tool: tool.to_owned(),
                id: id.to_owned(),
                value: None,
                length: None,
                status: ActionStatus::Staged,
                error: None,
                reason: None,
                origin: None,
                contact_asked: None,
                arguments: None,
            },
            operation,
            follows: false,
        }
    }

    /// This action as a follow-on of the one staged before it.
    pub fn following(mut self) -> Self {
        self.follows = true;
        self
    }

    /// Whether the record lists it: a follow-on only once it ran (performed or failed) or while
    /// it may still run (staged).
    fn recorded(&self) -> bool {
        !self.follows
            || matches!(
                self.entry.status,
                ActionStatus::Staged | ActionStatus::Performed | ActionStatus::Failed
            )
    }

    pub fn with_origin(mut self, origin: &str) -> Self {
        self.entry.origin = Some(origin.to_owned());
        self
    }

    /// This action as refused by the server with `reason` (see [`ActionEntry::reason`]): never
    /// performed, its request forgotten.
    pub fn refused(mut self, reason: &str) -> Self {
        self.entry.reason = Some(reason.to_owned());
        self.settle_unperformed(ActionStatus::Refused);
        self
    }

    /// Whether this action holds (or held) a place among the turn's actions: not dropped over the
    /// cap, not refused. Only these take a cap slot or make an identical later call a repeat.
    pub fn live(&self) -> bool {
        !matches!(
            self.entry.status,
            ActionStatus::DroppedOverCap | ActionStatus::Refused
        )
    }

    /// Settles an action that will not be performed with `status`, forgetting its request.
    pub fn settle_unperformed(&mut self, status: ActionStatus) {
        self.entry.status = status;
        self.operation = Operation::Cleared;
    }

    fn survives_escalation(&self) -> bool {
        matches!(
            self.operation,
            Operation::WriteNote {
                on_escalation: true,
                ..
            }
        )
    }
}

/// The server's escalation actions (`rules.handoff`, SYSTEM 4 beyond): a tag and/or a flow,
/// recorded with `origin: "handoff"`.
pub fn handoff_actions(handoff: Option<&crate::config::Handoff>) -> Vec<StagedAction> {
    let Some(handoff) = handoff else {
        return Vec::new();
    };
    let mut actions = Vec::new();
    if let Some(tag) = &handoff.tag {
        actions.push(
            StagedAction::new("add_tag", "handoff", Operation::AddTag { tag: tag.clone() })
                .with_origin("handoff"),
        );
    }
    if let Some(flow_ns) = &handoff.flow_ns {
        actions.push(
            StagedAction::new(
                "send_flow",
                "handoff",
                Operation::SendFlow {
                    flow_ns: flow_ns.clone(),
                },
            )
            .with_origin("handoff"),
        );
    }
    actions
}

/// Performs every `staged` action once, in order, and updates its status. Actions in any other
/// status are left alone (a retried outbox row must not perform them again).
pub async fn perform_all(
    client: &ManyChatClient,
    subscriber: &SubscriberId,
    conversation: ConversationId,
    actions: &mut [StagedAction],
) {
    for index in 0..actions.len() {
        perform_at(client, subscriber, conversation, actions, index).await;
    }
}

/// Whether the action at `index` is still to be performed through ManyChat: staged, and neither
/// a nudge (the store's, performed by `perform_nudges`) nor a plugin write (the business's
/// endpoint's, performed by `crate::plugins::perform_writes`).
pub fn pending_at(actions: &[StagedAction], index: usize) -> bool {
    actions.get(index).is_some_and(|a| {
        a.entry.status == ActionStatus::Staged
            && !matches!(
                a.operation,
                Operation::ScheduleNudge { .. } | Operation::Plugin { .. }
            )
    })
}

/// Performs the action at `index` if it is still pending ([`pending_at`]) and settles it. A
/// follow-on goes only after its write was performed (023, 027): a failed flow sends neither
/// `link_sent` nor the event after it.
pub async fn perform_at(
    client: &ManyChatClient,
    subscriber: &SubscriberId,
    conversation: ConversationId,
    actions: &mut [StagedAction],
    index: usize,
) {
    if !pending_at(actions, index) {
        return;
    }
    if actions[index].follows
        && (index == 0 || actions[index - 1].entry.status != ActionStatus::Performed)
    {
        actions[index].settle_unperformed(ActionStatus::Discarded);
        count(client, &actions[index]);
        return;
    }
    let action = &mut actions[index];
    if let Err(error) = perform_one(client, subscriber, conversation, action).await {
        tracing::warn!(
            conversation = %conversation,
            tool = %action.entry.tool,
            id = %action.entry.id,
            error_kind = error.kind(),
            error = %action.entry.error.as_deref().unwrap_or_default(),
            "action failed; not retried"
        );
    }
}

/// Performs one action and settles its status: `performed`, or `failed` with the error (a
/// note's text replaced by `[note]`). The ManyChat error is returned so that a caller that
/// retries (the handoff) can tell a passing failure from a refusal.
pub async fn perform_one(
    client: &ManyChatClient,
    subscriber: &SubscriberId,
    conversation: ConversationId,
    action: &mut StagedAction,
) -> Result<(), crate::manychat::ManyChatError> {
    let result = match &action.operation {
        Operation::SendFlow { flow_ns } => client.send_flow(subscriber, flow_ns).await,
        Operation::AddTag { tag } => client.add_tag(subscriber, tag).await,
        Operation::RemoveTag { tag } => client.remove_tag(subscriber, tag).await,
        Operation::SetField { field, value } => client.set_field(subscriber, field, value).await,
        Operation::WriteNote { field, text, .. } => {
            let value = Value::String(text.as_str().to_owned());
            client.set_field(subscriber, field, &value).await
        }
        Operation::ScheduleNudge { .. } => {
            // Performed by `perform_nudges`, never through ManyChat.
            action.entry.status = ActionStatus::Failed;
            action.entry.error = Some("a nudge is not a ManyChat request".to_owned());
            return Ok(());
        }
        Operation::Plugin { .. } => {
            // Performed by `crate::plugins::perform_writes`, never through ManyChat.
            action.entry.status = ActionStatus::Failed;
            action.entry.error = Some("a plugin write is not a ManyChat request".to_owned());
            return Ok(());
        }
        Operation::Cleared => {
            // Only a corrupt record can hold a staged action without a request.
            tracing::warn!(conversation = %conversation, tool = %action.entry.tool, "staged action has no request; skipped");
            action.entry.status = ActionStatus::Failed;
            action.entry.error = Some("no request was staged".to_owned());
            return Ok(());
        }
    };
    let settled = match result {
        Ok(()) => {
            action.entry.status = ActionStatus::Performed;
            action.entry.error = None;
            Ok(())
        }
        Err(error) => {
            let message = match &action.operation {
                Operation::WriteNote { text, .. } => without_note(&error.to_string(), text),
                _ => error.to_string(),
            };
            action.entry.status = ActionStatus::Failed;
            action.entry.error = Some(message);
            Err(error)
        }
    };
    count(client, action);
    settled
}

/// Counts the actions of a record being written that settled without a ManyChat attempt
/// (discarded, dropped over the cap, refused, …): attempts are counted where they are made.
pub fn count_unattempted(metrics: &Metrics, actions: &[StagedAction]) {
    for action in actions {
        if !matches!(
            action.entry.status,
            ActionStatus::Staged | ActionStatus::Performed | ActionStatus::Failed
        ) {
            metrics.action(&action.entry.tool, &action.entry.status.label());
        }
    }
}

/// Counts the actions in `status` (an outbox row's staged actions, dead-lettered with it).
pub fn count_in(metrics: &Metrics, actions: &[StagedAction], status: ActionStatus) {
    for action in actions.iter().filter(|a| a.entry.status == status) {
        metrics.action(&action.entry.tool, &status.label());
    }
}

/// Counts an action's settled status into the client's metrics, where a ManyChat
/// attempt decided it.
fn count(client: &ManyChatClient, action: &StagedAction) {
    if let Some(metrics) = client.metrics() {
        metrics.action(&action.entry.tool, &action.entry.status.label());
    }
}

/// Performs every staged schedule_nudge (025) after the text, like any write: the store's
/// upsert of the conversation's one pending nudge, due its delay after `now`. No ManyChat
/// request, so each is counted here: in `nudges_total{state="scheduled"}`, and like any other
/// action by tool and status (`performed`, or `failed` when the store refused it).
pub async fn perform_nudges(
    store: &dyn crate::store::Store,
    metrics: &Metrics,
    conversation: ConversationId,
    now: chrono::DateTime<chrono::Utc>,
    actions: &mut [StagedAction],
) {
    let mut scheduled = 0;
    for action in actions
        .iter_mut()
        .filter(|a| a.entry.status == ActionStatus::Staged)
    {
        let Operation::ScheduleNudge { minutes } = action.operation else {
            continue;
        };
        let due_at = now + chrono::Duration::minutes(i64::from(minutes));
        match store
            .schedule_nudge(conversation, &action.entry.id, due_at, now)
            .await
        {
            Ok(()) => {
                action.entry.status = ActionStatus::Performed;
                scheduled += 1;
                tracing::info!(
                    conversation = %conversation,
                    delay = %action.entry.id,
                    due_at = %due_at,
                    "nudge scheduled"
                );
            }
            Err(error) => {
                action.entry.status = ActionStatus::Failed;
                action.entry.error = Some("the nudge could not be stored".to_owned());
                tracing::warn!(conversation = %conversation, error = %error, "nudge not scheduled");
            }
        }
        metrics.action(&action.entry.tool, &action.entry.status.label());
    }
    if scheduled > 0 {
        metrics.nudge_n("scheduled", "", scheduled as u64);
    }
}

/// `message` with every quote of the note's text (raw or JSON-escaped) replaced by `[note]`.
pub fn without_note(message: &str, text: &NoteText) -> String {
    let raw = text.as_str();
    let escaped = serde_json::to_string(raw).unwrap_or_default();
    let escaped = escaped
        .strip_prefix('"')
        .and_then(|e| e.strip_suffix('"'))
        .unwrap_or_default();
    let mut out = message.to_owned();
    for quoted in [raw, escaped] {
        if !quoted.is_empty() {
            out = out.replace(quoted, NOTE_PLACEHOLDER);
        }
    }
    out
}

/// Marks every still-staged action with `status` (discarded on escalation, dead_lettered with
/// its outbox row), forgetting its request. Returns how many changed.
pub fn settle_staged(actions: &mut [StagedAction], status: ActionStatus) -> usize {
    let mut changed = 0;
    for action in actions
        .iter_mut()
        .filter(|a| a.entry.status == ActionStatus::Staged)
    {
        action.settle_unperformed(status);
        changed += 1;
    }
    changed
}

/// Settles a turn's staged actions when it escalates (012 § Guardrails run before any action is
/// performed, 024 § A handoff summary survives): a `write_note` on an `onEscalation` note stays
/// `staged`, to be performed after the escalation message, when the model or the confidence
/// threshold escalated; every other staged action is `discarded`, and on any other cause (leak,
/// schema, field echo, error) so is the note. Returns how many were discarded. An abort records
/// no agent turn, so it never reaches here; it is treated like an error all the same.
pub fn settle_on_escalation(actions: &mut [StagedAction], cause: EscalationCause) -> usize {
    let handoff_cause = matches!(
        cause,
        EscalationCause::Model | EscalationCause::LowConfidence
    );
    let mut discarded = 0;
    for action in actions
        .iter_mut()
        .filter(|a| a.entry.status == ActionStatus::Staged)
    {
        if handoff_cause && action.survives_escalation() {
            continue;
        }
        action.settle_unperformed(ActionStatus::Discarded);
        discarded += 1;
    }
    discarded
}

/// The `turns.actions` JSON for a list of actions (a follow-on that never ran is left out).
pub fn record(actions: &[StagedAction]) -> Value {
    Value::Array(
        actions
            .iter()
            .filter(|a| a.recorded())
            .map(|a| serde_json::to_value(&a.entry).unwrap_or(Value::Null))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_012_record_holds_configured_ids_never_manychat_names() {
        let actions = vec![
            StagedAction::new(
                "send_flow",
                "intro_brochure",
                Operation::SendFlow {
                    flow_ns: "content20240101_000001".into(),
                },
            ),
            StagedAction::new(
                "add_tag",
                "interested",
                Operation::AddTag {
                    tag: "Interested In Course".into(),
                },
            ),
        ];
        let recorded = record(&actions).to_string();
        assert!(recorded.contains("intro_brochure"));
        assert!(!recorded.contains("content20240101_000001"));
        assert!(!recorded.contains("Interested In Course"));
        assert_eq!(
            record(&actions)[0],
            serde_json::json!({"tool":"send_flow","id":"intro_brochure","status":"staged"})
        );
    }

    fn follow_on_chain() -> Vec<StagedAction> {
        vec![
            StagedAction::new(
                "send_flow",
                "booking_link",
                Operation::SendFlow {
                    flow_ns: "ns_link".into(),
                },
            ),
            StagedAction::new(
                "set_field",
                "funnel_stage",
                Operation::SetField {
                    field: "stage".into(),
                    value: Value::String("link_sent".into()),
                },
            )
            .following(),
            StagedAction::new(
                "send_event",
                "checkout_started",
                Operation::SendFlow {
                    flow_ns: "ns_event".into(),
                },
            )
            .following(),
        ]
    }

    #[test]
    fn spec_027_verification_6_a_dead_lettered_rows_follow_ons_leave_no_entry() {
        let mut actions = follow_on_chain();
        assert_eq!(
            record(&actions).as_array().unwrap().len(),
            3,
            "staged: listed"
        );
        settle_staged(&mut actions, ActionStatus::DeadLettered);
        assert_eq!(
            record(&actions),
            serde_json::json!([{"tool": "send_flow", "id": "booking_link", "status": "dead_lettered"}])
        );
        let mut actions = follow_on_chain();
        settle_on_escalation(&mut actions, EscalationCause::Model);
        assert_eq!(
            record(&actions).as_array().unwrap().len(),
            1,
            "discarded with the turn"
        );
    }

    #[test]
    fn spec_023_a_follow_on_is_serialised_with_its_row_and_old_rows_read_without_it() {
        let chain = follow_on_chain();
        let json = serde_json::to_value(&chain).unwrap();
        assert_eq!(json[1]["follows"], true);
        assert!(json[0].get("follows").is_none());
        let back: Vec<StagedAction> = serde_json::from_value(json).unwrap();
        assert_eq!(back, chain);
    }

    #[test]
    fn settle_staged_changes_only_staged_entries() {
        let mut actions = vec![
            StagedAction::new("add_tag", "a", Operation::AddTag { tag: "a".into() }),
            StagedAction::new("add_tag", "b", Operation::AddTag { tag: "b".into() }),
        ];
        actions[0].entry.status = ActionStatus::Performed;
        assert_eq!(settle_staged(&mut actions, ActionStatus::Discarded), 1);
        assert_eq!(actions[0].entry.status, ActionStatus::Performed);
        assert_eq!(actions[1].entry.status, ActionStatus::Discarded);
    }

    fn note(id: &str, on_escalation: bool) -> StagedAction {
        StagedAction::new(
            "write_note",
            id,
            Operation::WriteNote {
                field: format!("note_{id}"),
                text: NoteText::clean("Wants a person to call back.", 100).unwrap(),
                on_escalation,
            },
        )
    }

    fn turn_actions() -> Vec<StagedAction> {
        vec![
            StagedAction::new("add_tag", "a", Operation::AddTag { tag: "a".into() }),
            note("goal", false),
            note("handoff_summary", true),
        ]
    }

    #[test]
    fn spec_024_on_escalation_note_survives_model_and_confidence_escalations_only() {
        use EscalationCause::*;
        for (cause, kept) in [
            (Model, true),
            (LowConfidence, true),
            (Leak, false),
            (Schema, false),
            (FieldEcho, false),
            (Error, false),
            (Abort, false),
        ] {
            let mut actions = turn_actions();
            let discarded = settle_on_escalation(&mut actions, cause);
            let statuses: Vec<ActionStatus> = actions.iter().map(|a| a.entry.status).collect();
            let summary = if kept {
                ActionStatus::Staged
            } else {
                ActionStatus::Discarded
            };
            assert_eq!(
                statuses,
                vec![ActionStatus::Discarded, ActionStatus::Discarded, summary],
                "{cause:?}"
            );
            assert_eq!(discarded, if kept { 2 } else { 3 }, "{cause:?}");
            assert_eq!(actions[1].operation, Operation::Cleared, "{cause:?}");
            assert_eq!(
                matches!(actions[2].operation, Operation::WriteNote { .. }),
                kept,
                "{cause:?}"
            );
        }
    }

    #[test]
    fn spec_024_a_note_quoted_in_an_error_becomes_note() {
        let text = NoteText::clean("She said \"bowls\" twice", 100).unwrap();
        let message = format!(
            "value {} rejected; raw: {}",
            serde_json::to_string(text.as_str()).unwrap(),
            text.as_str()
        );
        assert_eq!(
            without_note(&message, &text),
            "value \"[note]\" rejected; raw: [note]"
        );
    }

    #[test]
    fn spec_029_verification_2_the_record_keeps_sent_flows_in_call_order_and_never_discards_them() {
        use crate::escalation::EscalationCause;
        let flow = |id: &str, status: ActionStatus| {
            let mut action = StagedAction::new(
                "send_flow",
                id,
                Operation::SendFlow {
                    flow_ns: format!("ns_{id}"),
                },
            );
            action.entry.status = status;
            action
        };
        let tag = |id: &str| {
            StagedAction::new(
                "add_tag",
                id,
                Operation::AddTag {
                    tag: format!("tag {id}"),
                },
            )
        };
        for cause in [
            EscalationCause::Model,
            EscalationCause::LowConfidence,
            EscalationCause::Leak,
            EscalationCause::Schema,
            EscalationCause::Error,
            EscalationCause::Abort,
        ] {
            // A staged write, a flow sent during the call, another write, a flow refused.
            let mut actions = vec![
                tag("gift_buyer"),
                flow("guide", ActionStatus::Performed),
                tag("interested"),
                flow("booking_link", ActionStatus::Failed),
            ];
            let discarded = settle_on_escalation(&mut actions, cause);
            assert_eq!(discarded, 2, "{cause:?}");
            let recorded: Vec<(String, String)> = record(&actions)
                .as_array()
                .unwrap()
                .iter()
                .map(|e| (e["id"].to_string(), e["status"].to_string()))
                .collect();
            let expected: Vec<(String, String)> = [
                ("gift_buyer", "discarded"),
                ("guide", "performed"),
                ("interested", "discarded"),
                ("booking_link", "failed"),
            ]
            .iter()
            .map(|(id, status)| (format!("\"{id}\""), format!("\"{status}\"")))
            .collect();
            assert_eq!(recorded, expected, "{cause:?}");
        }
    }
}
