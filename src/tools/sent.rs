//! The flows a turn has sent so far (029, 030), shared between the turn's tools, which record
//! each flow as ManyChat answers it, and the request, which must know at the race deadline
//! whether a flow is still playing (030: the response is then silent).
//!
//! Whatever sends a flow during an inbound turn records it here (the model's `send_flow`, and
//! any flow the server sends on its own), so the reply waits for every one of them.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use super::SentFlow;

/// A turn's sent flows, in the order ManyChat answered them; clones share one list.
#[derive(Debug, Clone, Default)]
pub struct FlowSends(Arc<Mutex<Vec<SentFlow>>>);

impl FlowSends {
    fn list(&self) -> std::sync::MutexGuard<'_, Vec<SentFlow>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a flow ManyChat answered (accepted or refused).
    pub fn push(&self, flow: SentFlow) {
        self.list().push(flow);
    }

    /// The first send of flow `id` this turn, if any (029: a repeat gets its outcome).
    pub fn find(&self, id: &str) -> Option<SentFlow> {
        self.list().iter().find(|s| s.id == id).cloned()
    }

    /// The sends so far, in order (a copy: the list may grow meanwhile).
    pub fn iter(&self) -> std::vec::IntoIter<SentFlow> {
        self.snapshot().into_iter()
    }

    pub fn is_empty(&self) -> bool {
        self.list().is_empty()
    }

    /// The sends so far, in order.
    pub fn snapshot(&self) -> Vec<SentFlow> {
        self.list().clone()
    }

    /// 030: when the last accepted flow has played: the latest answer time plus that flow's
    /// `settleSeconds`. Refused flows and flows without a play time do not count; `None` when
    /// nothing is playing or was played.
    pub fn played_until(&self) -> Option<Instant> {
        self.list().iter().filter_map(SentFlow::plays_until).max()
    }

    /// 030: whether a flow ManyChat had answered by `deadline` was still playing then. A flow
    /// whose request was still in flight at the deadline has no answer time yet, so it does not
    /// count.
    pub fn playing_at(&self, deadline: Instant) -> bool {
        self.list()
            .iter()
            .filter(|s| s.answered_at <= deadline)
            .filter_map(SentFlow::plays_until)
            .any(|end| end > deadline)
    }
}

impl SentFlow {
    /// When this flow has played: its answer time plus `settleSeconds`; `None` for a refused
    /// flow or one without a play time.
    fn plays_until(&self) -> Option<Instant> {
        (self.accepted && !self.settle.is_zero()).then(|| self.answered_at + self.settle)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn sent(id: &str, accepted: bool, answered_at: Instant, settle_seconds: u64) -> SentFlow {
        SentFlow {
            id: id.to_owned(),
            accepted,
            answered_at,
            settle: Duration::from_secs(settle_seconds),
        }
    }

    #[test]
    fn spec_030_verification_2_flow_sends_track_when_the_last_accepted_flow_ends() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let sends = FlowSends::default();
        assert_eq!(sends.played_until(), None, "no flow: nothing to wait for");

        sends.push(sent("guide", true, at(1_000), 4));
        assert_eq!(
            sends.played_until(),
            Some(at(5_000)),
            "answer time + settleSeconds"
        );

        // Refused: never played; without settleSeconds: nothing declared to wait for.
        sends.push(sent("refused", false, at(2_000), 30));
        sends.push(sent("no_settle", true, at(6_000), 0));
        assert_eq!(sends.played_until(), Some(at(5_000)));

        // The latest end of several, not the last answered.
        sends.push(sent("long", true, at(1_500), 10));
        sends.push(sent("short", true, at(3_000), 1));
        assert_eq!(sends.played_until(), Some(at(11_500)));
    }

    #[test]
    fn spec_030_a_flow_counts_as_playing_at_the_deadline_only_once_answered() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let deadline = at(8_000);
        let sends = FlowSends::default();
        sends.push(sent("done", true, at(1_000), 5));
        assert!(!sends.playing_at(deadline), "it ended at 6 s");
        // Answered after the deadline: its request was in flight at the deadline.
        sends.push(sent("late", true, at(8_500), 10));
        assert!(!sends.playing_at(deadline));
        sends.push(sent("playing", true, at(7_000), 2));
        assert!(sends.playing_at(deadline), "it plays until 9 s");
        // Clones share the list: the request reads what the tools recorded.
        let seen_by_request = sends.clone();
        sends.push(sent("another", true, at(7_500), 30));
        assert_eq!(seen_by_request.snapshot().len(), 4);
    }

    /// 029: without a sender (a nudge turn, an eval) `send_flow` stages as before: nothing is
    /// sent during the call, so nothing is recorded here and no reply waits.
    #[tokio::test]
    async fn spec_029_verification_1_without_a_sender_send_flow_stages_and_nothing_waits() {
        use crate::agent::ToolHost;
        use crate::config::{FlowConfig, ToolsConfig};
        use crate::model::{ToolArguments, ToolCall};

        let mut config = crate::config::examples::demo_tenant();
        config.tools = Some(ToolsConfig {
            flows: vec![FlowConfig {
                id: "brochure".into(),
                flow_ns: "content_brochure_ns".into(),
                description: "The brochure.".into(),
                role: None,
                repeatable: false,
                settle_seconds: Some(10),
                on_stage: None,
                offering: None,
            }],
            ..ToolsConfig::default()
        });
        let mut tools = super::super::TurnTools::without_reads(std::sync::Arc::new(config));
        let result = tools
            .call(&ToolCall {
                id: "call_1".into(),
                name: "send_flow".into(),
                arguments: ToolArguments::Valid(serde_json::json!({"flow": "brochure"})),
            })
            .await;
        assert_eq!(result, serde_json::json!({"staged": true}));
        assert!(tools.sent_flows().is_empty(), "nothing was sent");
        let actions = tools.into_actions();
        assert_eq!(
            actions[0].entry.status,
            crate::actions::ActionStatus::Staged
        );
    }
}
