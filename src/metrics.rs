//! Process counters, rendered as Prometheus text at `GET /metrics` (SYSTEM 3.1, beyond).
//! Counters carry no labels derived from contacts: only outcomes, statuses and kinds.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Debug, Default)]
pub struct Metrics {
    pub outbox_delivered: Counter,
    pub outbox_retried: Counter,
    pub outbox_dead_lettered: Counter,
    /// Dead-lettered replies whose contact was handed to a person (issue 13).
    pub outbox_dead_letter_handoffs: Counter,
    /// Of those, handoffs ManyChat refused too (a tag or flow not performed).
    pub race_lost: Counter,
    pub model_aborted: Counter,
    pub load_shed: Counter,
    pub unauthorized: Counter,
    pub rate_limited: Counter,
    pub bad_requests: Counter,
    /// Connections closed on accept: their address was at `HTTP_MAX_CONNECTIONS_PER_ADDRESS`.
    pub connections_refused: Counter,
    /// Connections closed by the header or idle timeout.
    pub connections_timed_out: Counter,
    /// Turns by outcome (SYSTEM 4's outcome names).
    turns: Mutex<BTreeMap<&'static str, u64>>,
    /// Escalations by reason (`crate::escalation::Escalation`).
    escalations: Mutex<BTreeMap<&'static str, u64>>,
    /// Handoffs (tag and/or flow) ManyChat refused for good.
    pub handoff_failed: Counter,
    /// Issue 21: requests carrying a ManyChat variable that was not substituted, by body key
    /// (`subscriber_id`, `user_id`, `ai_token`).
    not_substituted: Mutex<BTreeMap<&'static str, u64>>,
    /// 025: nudges by state change (`scheduled`, `sent`, `skipped`, `cancelled`, `lost`) and
    /// reason (empty when the state has none).
    nudges: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
}

impl Metrics {
    pub fn turn(&self, outcome: &'static str) {
        if let Ok(mut turns) = self.turns.lock() {
            *turns.entry(outcome).or_default() += 1;
        }
    }

    pub fn escalation(&self, reason: crate::escalation::Escalation) {
        if let Ok(mut escalations) = self.escalations.lock() {
            *escalations.entry(reason.as_str()).or_default() += 1;
        }
    }

    /// Counts a nudge's state change (025): `state` with its `reason` (`""` for none).
    pub fn nudge(&self, state: &'static str, reason: &'static str) {
        self.nudge_n(state, reason, 1);
    }

    /// Counts `n` nudges changing to `state` at once (rows marked `lost` in one statement).
    pub fn nudge_n(&self, state: &'static str, reason: &'static str, n: u64) {
        if let Ok(mut nudges) = self.nudges.lock() {
            *nudges.entry((state, reason)).or_default() += n;
        }
    }

    /// The count [`Metrics::nudge`] kept for `state` and `reason`.
    pub fn nudge_count(&self, state: &str, reason: &str) -> u64 {
        self.nudges
            .lock()
            .map(|n| {
                n.iter()
                    .filter(|((s, r), _)| *s == state && *r == reason)
                    .map(|(_, c)| *c)
                    .sum()
            })
            .unwrap_or_default()
    }

    /// Counts a request whose `field` held a literal ManyChat variable (issue 21).
    pub fn not_substituted(&self, field: &'static str) {
        if let Ok(mut counts) = self.not_substituted.lock() {
            *counts.entry(field).or_default() += 1;
        }
    }

    /// The counts [`Metrics::not_substituted`] kept, by body key.
    pub fn not_substituted_counts(&self) -> Vec<(&'static str, u64)> {
        self.not_substituted
            .lock()
            .map(|counts| counts.iter().map(|(k, v)| (*k, *v)).collect())
            .unwrap_or_default()
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let counters = [
            ("outbox_delivered_total", &self.outbox_delivered),
            ("outbox_retried_total", &self.outbox_retried),
            ("outbox_dead_lettered_total", &self.outbox_dead_lettered),
            (
                "outbox_dead_letter_handoffs_total",
                &self.outbox_dead_letter_handoffs,
            ),
            ("race_lost_total", &self.race_lost),
            ("model_aborted_total", &self.model_aborted),
            ("load_shed_total", &self.load_shed),
            ("unauthorized_total", &self.unauthorized),
            ("rate_limited_total", &self.rate_limited),
            ("bad_requests_total", &self.bad_requests),
            ("handoff_failed_total", &self.handoff_failed),
            ("connections_refused_total", &self.connections_refused),
            ("connections_timed_out_total", &self.connections_timed_out),
        ];
        for (name, counter) in counters {
            let _ = writeln!(out, "# TYPE manychat_agent_{name} counter");
            let _ = writeln!(out, "manychat_agent_{name} {}", counter.get());
        }
        let _ = writeln!(out, "# TYPE manychat_agent_turns_total counter");
        if let Ok(turns) = self.turns.lock() {
            for (outcome, count) in turns.iter() {
                let _ = writeln!(
                    out,
                    "manychat_agent_turns_total{{outcome=\"{outcome}\"}} {count}"
                );
            }
        }
        let _ = writeln!(
            out,
            "# TYPE manychat_agent_variables_not_substituted_total counter"
        );
        for (field, count) in self.not_substituted_counts() {
            let _ = writeln!(
                out,
                "manychat_agent_variables_not_substituted_total{{field=\"{field}\"}} {count}"
            );
        }
        let _ = writeln!(out, "# TYPE manychat_agent_escalations_total counter");
        if let Ok(escalations) = self.escalations.lock() {
            for (reason, count) in escalations.iter() {
                let _ = writeln!(
                    out,
                    "manychat_agent_escalations_total{{reason=\"{reason}\"}} {count}"
                );
            }
        }
        let _ = writeln!(out, "# TYPE manychat_agent_nudges_total counter");
        if let Ok(nudges) = self.nudges.lock() {
            for ((state, reason), count) in nudges.iter() {
                let _ = match *reason {
                    "" => writeln!(
                        out,
                        "manychat_agent_nudges_total{{state=\"{state}\"}} {count}"
                    ),
                    reason => writeln!(
                        out,
                        "manychat_agent_nudges_total{{state=\"{state}\",reason=\"{reason}\"}} \
                         {count}"
                    ),
                };
            }
        }
        out
    }
}
