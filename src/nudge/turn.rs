//! The nudge turn (025): the agent on the conversation's history and, where a contact's message
//! would be, the server's follow-up note, outside the fence.
//!
//! The turn has no race (nobody waits on a response): its model call is bounded by
//! `MODEL_ABORT_MS`, and its reply goes to the outbox like a deferred reply, its actions after
//! the text. Its tools are a contact turn's less `get_contact` (no request carried the
//! contact's token) and `schedule_nudge` (a nudge cannot chain); flows are staged, never sent
//! during the call (a stage-tied flow too, 032 B), and the opening (032 A) is never sent. A reply
//! that escalates, a failed call and an aborted one send nothing and perform nothing: the turn is
//! recorded `nudge_skipped`, unbound, so it never enters history, and no person is called (the
//! contact asked nothing).
//!
//! Like an inbound turn it draws on what the process's turns share (`crate::turn::TurnsShared`):
//! the snapshot's prompt and tool specs, built once per snapshot, and the budget ledger. It is
//! admitted to the day's budget beside the turns in flight, refused, the nudge is cancelled
//! `cap_reached` with no model call; each of its calls is then reserved before it is sent, and
//! a later call refused skips the nudge (`budget`).
//!
//! Invariant: the turn is written in one write with the nudge's settlement
//! (`Store::record_nudge_turn`), and only while the nudge is still running under this worker's
//! claim: an inbound message that cancelled it during the model call wins, and a lost row's
//! late turn is refused. Either way nothing reaches the outbox.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::rules::CancelReason;
use super::worker::{NudgeTurn, NudgeVerdict, SENT, SKIPPED};
use crate::actions::{self, ActionStatus, StagedAction};
use crate::agent::{self, ThinkInput, Thought};
use crate::channel::Channel;
use crate::clock::Clock;
use crate::config::TenantConfig;
use crate::escalation::EscalationCause;
use crate::manychat::ManyChatClient;
use crate::metrics::Metrics;
use crate::model::Model;
use crate::outbox::ReplyPayload;
use crate::sales;
use crate::store::{
    BudgetCharge, Conversation, NewOutboxRow, NewTurn, Nudge, NudgeExchange, NudgeStatus,
    OutboxKind, Store, TurnContext,
};
use crate::tools::{ToolContext, TurnTools};
use crate::turn::TurnsShared;

/// Why a nudge turn sent nothing (`nudges.reason`, the `/metrics` label).
pub mod skip {
    /// The reply escalated: the model declined to follow up (or a guardrail stopped it).
    pub const ESCALATED: &str = "escalated";
    /// The model call failed.
    pub const MODEL_ERROR: &str = "model_error";
    /// The model call ran past `MODEL_ABORT_MS`.
    pub const MODEL_ABORTED: &str = "model_aborted";
    /// The day's budget refused one of the turn's model calls after the first.
    pub const BUDGET: &str = "budget";
}

/// What a nudge turn reads from `Settings`.
#[derive(Debug, Clone, Copy)]
pub struct NudgeTurnSettings {
    /// `MODEL_ABORT_MS`: the model call's bound.
    pub model_abort: Duration,
    pub max_output_tokens: u32,
    pub temperature: f32,
    /// `CHANNEL`: how the reply's messages are shaped for the outbox.
    pub channel: Channel,
}

/// The nudge turn on the real agent.
pub struct AgentNudgeTurn {
    pub store: Arc<dyn Store>,
    pub model: Arc<dyn Model>,
    pub manychat: ManyChatClient,
    pub clock: Clock,
    pub settings: NudgeTurnSettings,
    /// The snapshot cache and budget ledger of the process's turns.
    pub shared: TurnsShared,
    /// The process's metrics: the turn's actions and guardrail violations count like an
    /// inbound turn's.
    pub metrics: Arc<Metrics>,
}

/// The server's note in place of a contact message (025): when the contact last wrote, and
/// that sending nothing is a choice (an escalating reply, which calls nobody on this turn).
pub fn follow_up_note(since: DateTime<Utc>) -> String {
    format!(
        "[no reply from the contact since {}; decide whether to follow up]\n\
         If a short follow-up would help the contact, write it as your reply, in the \
         conversation's language. If not, set escalate to true: nothing is sent and no person \
         is called.",
        since.format("%Y-%m-%d %H:%M UTC")
    )
}

#[async_trait]
impl NudgeTurn for AgentNudgeTurn {
    async fn run(
        &self,
        config: Arc<TenantConfig>,
        conversation: &Conversation,
        nudge: &Nudge,
        context: TurnContext,
    ) -> NudgeVerdict {
        let started = Instant::now();
        let now = self.clock.now();
        let derived = self.shared.derived(&config);
        let history = crate::turn::history_turns(context.history);
        let note = follow_up_note(conversation.last_message_at.unwrap_or(nudge.scheduled_at));
        // Admitted as an inbound turn is, against the day's spend and what the turns in flight
        // reserved and used; each model call is reserved before it is sent, and the place is
        // given back once the turn's charge is written.
        let day = now.date_naive();
        let Some(turn_budget) = self.shared.budget.admit(
            &config,
            day,
            context.spent,
            self.model.id(),
            self.settings.max_output_tokens,
        ) else {
            return NudgeVerdict::Cancelled(CancelReason::CapReached);
        };
        // The contact's sales position, from the server's records; the offering is the one
        // stored on the conversation (028).
        let request = sales::known::Request {
            offering: None,
            bound: true,
            now,
        };
        let known = match sales::known::read(
            self.store.as_ref(),
            &config,
            conversation,
            context.sales,
            request,
        )
        .await
        {
            Ok(known) => known,
            Err(error) => {
                tracing::error!(conversation = %conversation.id, error = %error, "could not read the nudge's sales record; it stays running and is marked lost");
                return NudgeVerdict::Failed;
            }
        };
        let notices = sales::notices::notices(&config, &known);
        let known_offering = known.offering.clone();
        // C4: the conversation's fence, so the history reads as on the contact's own turns.
        let texts = history.iter().map(|turn| turn.text.as_str());
        let fence = crate::turn::conversation_fence(self.store.as_ref(), conversation, texts).await;
        let mut tools = TurnTools::for_nudge(ToolContext {
            config: config.clone(),
            manychat: self.manychat.clone(),
            subscriber: conversation.subscriber_id.clone(),
            conversation: conversation.id,
            reads_history: false,
            fence: fence.clone(),
            specs: derived.tools.clone(),
            sales: known,
            knowledge: derived.knowledge.clone(),
        });
        // Above the knowledge threshold: the contact's offering and the history's matches.
        let retrieved = {
            let texts: Vec<&str> = history.iter().map(|t| t.text.as_str()).collect();
            derived
                .knowledge
                .for_turn("", &texts, known_offering.as_deref())
        };
        let input = ThinkInput {
            config: &config,
            prompt: &derived.prompt,
            notices: &notices,
            history: &history,
            contact_text: "",
            max_output_tokens: self.settings.max_output_tokens,
            temperature: self.settings.temperature,
            max_messages: 3,
            images: &[],
            budget: Some(&turn_budget),
            retrieved: retrieved.as_ref(),
        };
        let thinking =
            agent::think_follow_up(self.model.as_ref(), input, &note, &fence, &mut tools);
        let thought = tokio::time::timeout(self.settings.model_abort, thinking)
            .await
            .ok();
        let tools_offered = tools.offered();
        let staged = tools.into_actions();
        let latency = started.elapsed();
        match thought {
            Some(thought) if !thought.reply.escalate => {
                self.record_sent(conversation, nudge, thought, staged, latency)
                    .await
            }
            thought => {
                // A reply a guardrail stopped counts as an inbound turn's does.
                if let Some(thought) = &thought {
                    self.metrics.guardrail(thought.reply.cause.guardrail_kind());
                }
                let reason = match &thought {
                    None => skip::MODEL_ABORTED,
                    Some(t) if t.error.is_some() => skip::MODEL_ERROR,
                    Some(t) if t.reply.cause == EscalationCause::Budget => skip::BUDGET,
                    Some(_) => skip::ESCALATED,
                };
                let recorded = self
                    .record_skipped(
                        conversation,
                        nudge,
                        reason,
                        thought,
                        staged,
                        tools_offered,
                        latency,
                    )
                    .await;
                recorded.then_verdict(NudgeVerdict::Skipped(reason))
            }
        }
    }
}

/// What the one write answered.
enum Written {
    Yes,
    /// The nudge was no longer running under this claim: nothing was written.
    Withdrawn,
    Failed,
}

impl Written {
    fn then_verdict(self, verdict: NudgeVerdict) -> NudgeVerdict {
        match self {
            Written::Yes => verdict,
            Written::Withdrawn => NudgeVerdict::Withdrawn,
            Written::Failed => NudgeVerdict::Failed,
        }
    }
}

impl AgentNudgeTurn {
    /// `nudge_sent`: the reply and its staged actions go to the outbox (text first, then the
    /// actions), written with the turn, its count and its charge.
    async fn record_sent(
        &self,
        conversation: &Conversation,
        nudge: &Nudge,
        thought: Thought,
        staged: Vec<StagedAction>,
        latency: Duration,
    ) -> NudgeVerdict {
        let now = self.clock.now();
        let messages = thought.reply.messages.clone();
        let mut turn = NewTurn::agent(conversation.id, messages.join("\n\n"), SENT, true, now);
        crate::turn::fill_usage(&mut turn, self.model.id(), &thought, latency);
        let duplicate = thought.reply.duplicate;
        turn.duplicate = duplicate.map(|d| d.as_str().to_owned());
        turn.actions = thought.tools_offered.then(|| actions::record(&staged));
        // Counted once the turn is written: the staged ones are counted where the outbox
        // attempts them, the rest (refused, dropped over the cap, …) here.
        let unattempted: Vec<StagedAction> = staged
            .iter()
            .filter(|a| a.entry.status != ActionStatus::Staged)
            .cloned()
            .collect();
        let payload = ReplyPayload {
            actions: staged,
            ..ReplyPayload::of(crate::channel::deferred_messages(
                self.settings.channel,
                messages,
            ))
        };
        let payload = match serde_json::to_value(payload) {
            Ok(payload) => payload,
            Err(error) => {
                tracing::error!(conversation = %conversation.id, error = %error, "could not queue the nudge's reply");
                return NudgeVerdict::Failed;
            }
        };
        let row = NewOutboxRow::of(conversation, OutboxKind::Reply, payload, now);
        let written = self
            .write(conversation, nudge, NudgeStatus::Sent, None, &turn, &[row])
            .await;
        if matches!(written, Written::Yes) {
            actions::count_unattempted(&self.metrics, &unattempted);
            if let Some(duplicate) = duplicate {
                self.metrics.duplicate(duplicate.kind());
            }
        }
        written.then_verdict(NudgeVerdict::Sent)
    }

    /// `nudge_skipped`: nothing is sent or performed. The turn is recorded unbound (it never
    /// enters history), its staged actions `discarded`, its spend charged.
    #[allow(clippy::too_many_arguments)]
    async fn record_skipped(
        &self,
        conversation: &Conversation,
        nudge: &Nudge,
        reason: &'static str,
        thought: Option<Thought>,
        mut staged: Vec<StagedAction>,
        tools_offered: bool,
        latency: Duration,
    ) -> Written {
        let now = self.clock.now();
        for action in &mut staged {
            if action.entry.status == ActionStatus::Staged {
                action.settle_unperformed(ActionStatus::Discarded);
            }
        }
        let mut turn = NewTurn::agent(conversation.id, "", SKIPPED, false, now);
        if let Some(thought) = &thought {
            crate::turn::fill_usage(&mut turn, self.model.id(), thought, latency);
        }
        turn.actions = tools_offered.then(|| actions::record(&staged));
        let written = self
            .write(
                conversation,
                nudge,
                NudgeStatus::Skipped,
                Some(reason),
                &turn,
                &[],
            )
            .await;
        if matches!(written, Written::Yes) {
            actions::count_unattempted(&self.metrics, &staged);
        }
        written
    }

    /// The turn's one write, under the nudge's claim. The turn counts in the contact's hour
    /// and is charged to its day, like any turn (025: nudge turns count against the caps).
    async fn write(
        &self,
        conversation: &Conversation,
        nudge: &Nudge,
        status: NudgeStatus,
        reason: Option<&str>,
        turn: &NewTurn,
        outbox: &[NewOutboxRow],
    ) -> Written {
        let now = turn.created_at;
        let exchange = NudgeExchange {
            nudge,
            status,
            reason,
            turn,
            rate: Some((&conversation.subscriber_id, super::worker::hour_start(now))),
            charge: Some(BudgetCharge::of(turn)),
            outbox,
            now,
        };
        match self.store.record_nudge_turn(exchange).await {
            Ok(Some(_)) => Written::Yes,
            Ok(None) => Written::Withdrawn,
            Err(error) => {
                tracing::error!(conversation = %conversation.id, error = %error, "could not record the nudge turn; it stays running and is marked lost");
                Written::Failed
            }
        }
    }
}
