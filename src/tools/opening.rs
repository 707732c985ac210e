//! The flows an inbound turn sends on its own, never the model's choice (032 A, B; 034's
//! timing). The rules (when the opening is queued, which flow a stage write ties to) are
//! `crate::sales::opening`'s; this module sends.
//!
//! - **The opening** goes on the prospect turn, once: just before the turn's first flow (a flow
//!   the model sends or a stage-tied one), and then it stays sent even if the turn escalates;
//!   otherwise just before a reply that does not escalate ([`TurnTools::send_opening_before_reply`]),
//!   which then waits for it like any flow the turn sent (`sent_flows`, 030). Before sending, the
//!   turn claims it on the conversation row (`Store::claim_opening`), so of turns racing for it
//!   one sends it. Recorded `origin: "opening"`, outside the per-turn action limit.
//! - **A stage-tied flow** goes when an accepted funnel write names exactly its stage: sent now
//!   on an inbound turn, staged on a nudge turn or an eval, inside the action limit, recorded
//!   `origin: "stage"`; the funnel write's result says which (`flowSent`, `flowRefused`,
//!   `flowStaged`, `flowDropped`).

use std::sync::Arc;

use serde_json::Value;

use super::{MAX_ACTIONS, TurnTools};
use crate::actions::{ActionStatus, Operation, StagedAction};
use crate::clock::Clock;
use crate::config::FlowConfig;
use crate::sales::opening::{self, TiedFlow};
use crate::store::Store;

/// Where a turn claims the contact's opening before sending it.
#[derive(Clone)]
pub(super) struct OpeningClaims {
    store: Arc<dyn Store>,
    clock: Clock,
}

/// A flow the server sends, as its action: recorded with `origin`.
fn server_flow(flow: &FlowConfig, origin: &str) -> StagedAction {
    StagedAction::new(
        "send_flow",
        &flow.id,
        Operation::SendFlow {
            flow_ns: flow.flow_ns.clone(),
        },
    )
    .with_origin(origin)
}

impl TurnTools {
    /// 032 A: this turn may send the contact's opening, claiming it in `store` first. Without
    /// it (a nudge turn, an eval) the opening is never sent.
    pub fn claiming_openings(mut self, store: Arc<dyn Store>, clock: Clock) -> Self {
        self.claims = Some(OpeningClaims { store, clock });
        self
    }

    /// 034: the reply settled; unless it escalates, a queued opening that no flow took ahead of
    /// it goes now, before the reply (which waits for it, 030). An escalated prospect turn that
    /// sent no flow forfeits the opening.
    pub async fn send_opening_before_reply(&mut self, escalates: bool) {
        if !escalates {
            self.send_opening().await;
        }
    }

    /// 034: this turn's intent write made the contact a prospect (it queued the opening). Such
    /// a turn is the contact's prospect turn whatever becomes of it, so its record must keep the
    /// write even when the turn ends without a reply: a cut-short call records it discarded,
    /// and the opening it did not send is forfeited for good.
    pub fn made_prospect_turn(&self) -> bool {
        self.sales.opening_queued()
    }

    /// Whether the opening is queued and still to go this turn (the final step's note says so).
    pub(super) fn opening_pending(&self) -> Option<&str> {
        if !self.sales.opening_queued() || self.opening_tried || self.claims.is_none() {
            return None;
        }
        self.tools()
            .and_then(opening::opening_flow)
            .map(|f| f.id.as_str())
    }

    /// Sends the queued opening, once per turn: claimed on the conversation row, then sent
    /// through the shared client like the model's flows (recorded in call order, its answer time
    /// kept for the reply's wait). A lost claim (another turn sent it) or a failed claim sends
    /// nothing: at most once is the promise.
    pub(super) async fn send_opening(&mut self) {
        if !self.sales.opening_queued() || self.opening_tried {
            return;
        }
        let (Some(sender), Some(claims)) = (self.sender.clone(), self.claims.clone()) else {
            return;
        };
        let config = self.config.clone();
        let Some(flow) = config.tools.as_ref().and_then(opening::opening_flow) else {
            return;
        };
        self.opening_tried = true;
        match claims
            .store
            .claim_opening(sender.conversation, claims.clock.now())
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!(
                    conversation = %sender.conversation,
                    "opening already claimed by another turn; not sent"
                );
                return;
            }
            Err(error) => {
                tracing::warn!(
                    conversation = %sender.conversation,
                    error = %error,
                    "opening could not be claimed; not sent"
                );
                return;
            }
        }
        if self.dispatch(server_flow(flow, "opening")).await {
            tracing::info!(conversation = %sender.conversation, id = %flow.id, "opening flow sent");
        }
    }

    /// 032 B: after a write was staged, the flow tied to the stage an accepted funnel write
    /// named, reported in that write's `result`. Nothing when the write named no tied stage, or
    /// the flow may not go (sent once, another offering's), or this turn sent or staged it.
    pub(super) async fn send_tied_flow(&mut self, result: &mut Value) {
        let Some(stage) = self.sales.take_stage_written() else {
            return;
        };
        let config = self.config.clone();
        let Some(flow) = config
            .tools
            .as_ref()
            .and_then(|tools| opening::tied_flow(tools, &self.sales, stage))
        else {
            return;
        };
        let this_turn = self.sent.find(&flow.id).is_some()
            || self
                .actions
                .iter()
                .any(|a| a.entry.tool == "send_flow" && a.entry.id == flow.id && a.live());
        if this_turn {
            return;
        }
        let mut action = server_flow(flow, "stage");
        let outcome = if self.counted() >= MAX_ACTIONS {
            action.settle_unperformed(ActionStatus::DroppedOverCap);
            self.refused.push(format!(
                "send_flow {} (tied to the stage; over the {MAX_ACTIONS}-action limit)",
                flow.id
            ));
            self.actions.push(action);
            TiedFlow::Dropped
        } else if self.sender.is_some() {
            // Nothing goes ahead of the opening (032 A).
            self.send_opening().await;
            if self.dispatch(action).await {
                TiedFlow::Sent
            } else {
                TiedFlow::Refused
            }
        } else {
            self.actions.push(action);
            TiedFlow::Staged
        };
        let (key, value) = outcome.result(&flow.id);
        if let Some(object) = result.as_object_mut() {
            object.insert(key.to_owned(), value);
        }
    }
}
