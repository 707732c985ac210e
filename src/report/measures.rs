//! A week's measures from its aggregates: pure functions, no I/O. Each measure is defined in
//! README.md ("Report"); the numbers here are what that section promises.

use std::collections::BTreeMap;

use chrono::{Datelike, NaiveDate};
use serde::Serialize;

use crate::store::{ReportAggregates, Role, SalesCounts, SalesKeys};

/// Above this deferred share a week is flagged: ADR-0016's trigger to revisit the inline
/// budget (too many replies miss the inline window and go through the outbox).
pub const DEFERRED_SHARE_FLAG: f64 = 0.20;

/// One ISO week's measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WeekMeasures {
    /// `2026-W49`.
    pub week: String,
    /// The week's Monday (UTC).
    pub starts: NaiveDate,
    /// Every turn recorded in the week (contact's and agent's).
    pub recorded_turns: i64,
    /// Contacts whose first turn falls in the week.
    pub contacts_with_first_turn: i64,
    /// Agent turns by outcome (SYSTEM 4).
    pub turns_by_outcome: BTreeMap<String, i64>,
    /// Escalations by reason (`turns.escalation_reason`; an abort is recorded on the contact's
    /// message, every other reason on the agent turn).
    pub escalations_by_reason: BTreeMap<String, i64>,
    /// Agent turns the model wrote (an answer, or the model's or a guardrail's escalation).
    pub model_written_turns: i64,
    /// Answers delivered through the outbox (outcome `deferred`).
    pub deferred_turns: i64,
    /// `deferred_turns` ÷ the model-written turns that answered a contact's message (a nudge
    /// turn, 025, answers none and has no race); `None` without such turns.
    pub deferred_share: Option<f64>,
    /// `deferred_share` above [`DEFERRED_SHARE_FLAG`].
    pub deferred_share_flagged: bool,
    /// Turns whose contact message others joined (`crate::burst`: answered once).
    pub merged_turns: i64,
    /// `merged_turns` ÷ the contact messages that started a turn (every contact message but a
    /// joined piece); `None` without such messages.
    pub merged_share: Option<f64>,
    /// Inline answer time (`answered_inline` turns' `latency_ms`), nearest-rank percentiles.
    pub inline_answer_ms_p50: Option<i64>,
    pub inline_answer_ms_p95: Option<i64>,
    /// Successful contact reads per model-written turn.
    pub reads_per_turn: Option<f64>,
    /// Recorded actions by tool and status: failed and dead-lettered first, then by count.
    pub actions: Vec<ActionMeasure>,
    /// Tokens and cost per UTC day with turns.
    pub days: Vec<DayMeasure>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
    /// (input + output tokens) per model-written turn.
    pub tokens_per_turn: Option<f64>,
    pub cost_usd_per_turn: Option<f64>,
    /// The sales measures (023, 025, 032, 034).
    pub sales: SalesMeasures,
    /// The handoff that holds: handoffs, releases, hours with a person, messages held (read
    /// beside the aggregates, `super::handoffs::read`).
    pub handoffs: super::handoffs::HandoffMeasures,
    /// What a conversation, a sale and a handoff cost, in US dollars, and the tokens behind it
    /// (`super::costs`, from the week's conversation sums).
    pub cost: super::costs::CostMeasures,
}

/// A week's sales measures, from performed `turns.actions` entries and `nudge_sent` turns. A
/// count is `None` when the tenant's config has no such field or flow; a rate is `None` when
/// that, or its denominator is zero.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SalesMeasures {
    /// Contacts with a performed `prospect` intent write this week (034).
    pub prospects: Option<i64>,
    /// `prospects / contacts_with_first_turn` (034).
    pub prospect_share: Option<f64>,
    /// Contacts with a performed funnel write at or past `offered`, and past `prepared`.
    pub offered: Option<i64>,
    pub prepared: Option<i64>,
    /// Contacts whose payment-link flow was performed this week.
    pub link_sent: Option<i64>,
    /// `link_sent / contacts_with_first_turn` (023).
    pub link_sent_rate: Option<f64>,
    /// `link_sent / prospects` (034).
    pub prospect_link_sent_rate: Option<f64>,
    /// Payment links performed, and those whose `contactAsked` opened the gate before
    /// `prepared`.
    pub links_sent: Option<i64>,
    pub links_contact_asked: Option<i64>,
    /// `links_contact_asked / links_sent` (032).
    pub bypass_rate: Option<f64>,
    /// `nudge_sent` turns this week, and those the contact answered within 24 h.
    pub nudges_sent: i64,
    pub nudges_replied: i64,
    /// `nudges_replied / nudges_sent` (025).
    pub nudge_reply_rate: Option<f64>,
    /// `window_closing_sent` turns this week, those answered within 24 h, and their rate (031).
    pub window_closings_sent: i64,
    pub window_closings_replied: i64,
    pub window_closing_reply_rate: Option<f64>,
}

impl SalesMeasures {
    /// The measures of `counts`, over the week's `contacts` with a first turn; what `keys` does
    /// not configure is `None`.
    pub fn of(counts: &SalesCounts, keys: &SalesKeys, contacts: i64) -> Self {
        let prospects = keys.intent_field.as_ref().map(|_| counts.prospects);
        let funnel = keys.funnel_field.is_some();
        let link = keys.payment_flow.is_some();
        let link_sent = link.then_some(counts.link_contacts);
        SalesMeasures {
            prospects,
            prospect_share: prospects.and_then(|p| per(p, contacts)),
            offered: funnel.then_some(counts.offered),
            prepared: funnel.then_some(counts.prepared),
            link_sent,
            link_sent_rate: link_sent.and_then(|l| per(l, contacts)),
            prospect_link_sent_rate: link_sent.zip(prospects).and_then(|(l, p)| per(l, p)),
            links_sent: link.then_some(counts.links_sent),
            links_contact_asked: link.then_some(counts.links_contact_asked),
            bypass_rate: link
                .then(|| per(counts.links_contact_asked, counts.links_sent))
                .flatten(),
            nudges_sent: counts.nudges_sent,
            nudges_replied: counts.nudges_replied,
            nudge_reply_rate: per(counts.nudges_replied, counts.nudges_sent),
            window_closings_sent: counts.window_closings_sent,
            window_closings_replied: counts.window_closings_replied,
            window_closing_reply_rate: per(
                counts.window_closings_replied,
                counts.window_closings_sent,
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActionMeasure {
    pub tool: String,
    pub status: String,
    pub count: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DayMeasure {
    pub day: NaiveDate,
    pub model_written_turns: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
    pub tokens_per_turn: Option<f64>,
    pub cost_usd_per_turn: Option<f64>,
}

/// A documented measure the store does not record the data for yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingMeasure {
    pub measure: &'static str,
    pub why: &'static str,
}

/// A measure that needs data not recorded yet: one function each, so computing one later
/// replaces its entry here with a field of [`WeekMeasures`].
type Pending = fn() -> PendingMeasure;

const PENDING: &[Pending] = &[model_steps_per_turn];

/// The measures not computed yet, with why; and the sales measures `keys` cannot compute (the
/// tenant's config has no such field or flow, or was not loaded).
pub fn pending(keys: Option<&SalesKeys>) -> Vec<PendingMeasure> {
    let mut out: Vec<PendingMeasure> = PENDING.iter().map(|measure| measure()).collect();
    let Some(keys) = keys else {
        out.push(PendingMeasure {
            measure: "sales measures",
            why: "the tenant config (CONFIG_DIR) did not load, so its intent field, funnel \
                  field and payment-link flow are unknown",
        });
        return out;
    };
    if keys.intent_field.is_none() {
        out.push(PendingMeasure {
            measure: "prospect share, prospect link-sent rate",
            why: "tools.json has no intent field",
        });
    }
    if keys.funnel_field.is_none() {
        out.push(PendingMeasure {
            measure: "funnel stages offered and prepared",
            why: "tools.json has no funnel field",
        });
        out.push(PendingMeasure {
            measure: "cost per sale",
            why: "tools.json has no funnel field, so no conversation reaches link_sent",
        });
    }
    if keys.payment_flow.is_none() {
        out.push(PendingMeasure {
            measure: "link-sent rate, bypass rate",
            why: "tools.json has no payment_link flow",
        });
    }
    if keys.funnel_field.is_none() || keys.payment_flow.is_none() {
        out.push(PendingMeasure {
            measure: "link sent per playbook version",
            why: "tools.json needs a funnel field and a payment_link flow",
        });
    }
    out
}

fn model_steps_per_turn() -> PendingMeasure {
    PendingMeasure {
        measure: "model steps per turn",
        why: "steps are logged per turn (`steps` on the `turn` line), not stored",
    }
}

impl WeekMeasures {
    /// The measures of the ISO week starting `starts`, from its aggregates and sales counts
    /// (`keys`: what the tenant configures).
    pub fn of(
        starts: NaiveDate,
        aggregates: &ReportAggregates,
        sales: &SalesCounts,
        keys: &SalesKeys,
    ) -> Self {
        let iso = starts.iso_week();
        let mut measures = WeekMeasures {
            week: format!("{}-W{:02}", iso.year(), iso.week()),
            starts,
            recorded_turns: 0,
            contacts_with_first_turn: aggregates.new_contacts,
            turns_by_outcome: BTreeMap::new(),
            escalations_by_reason: BTreeMap::new(),
            model_written_turns: 0,
            deferred_turns: 0,
            deferred_share: None,
            deferred_share_flagged: false,
            merged_turns: 0,
            merged_share: None,
            inline_answer_ms_p50: percentile(&aggregates.inline_latencies, 50),
            inline_answer_ms_p95: percentile(&aggregates.inline_latencies, 95),
            reads_per_turn: None,
            actions: ordered_actions(aggregates),
            days: Vec::new(),
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
            tokens_per_turn: None,
            cost_usd_per_turn: None,
            sales: SalesMeasures::of(sales, keys, aggregates.new_contacts),
            handoffs: super::handoffs::HandoffMeasures::default(),
            cost: super::costs::CostMeasures::default(),
        };
        let mut reads = 0;
        // Model-written turns that answered a message: the deferred share's denominator.
        let mut answering = 0;
        // Contact messages that started a turn: the merged share's denominator.
        let mut started = 0;
        let mut days: BTreeMap<NaiveDate, DayMeasure> = BTreeMap::new();
        for group in &aggregates.turn_groups {
            measures.recorded_turns += group.turns;
            if let Some(reason) = &group.escalation_reason {
                *measures
                    .escalations_by_reason
                    .entry(reason.clone())
                    .or_default() += group.turns;
            }
            let day = days.entry(group.day).or_insert_with(|| DayMeasure {
                day: group.day,
                model_written_turns: 0,
                input_tokens: 0,
                output_tokens: 0,
                cost_usd: 0.0,
                tokens_per_turn: None,
                cost_usd_per_turn: None,
            });
            day.input_tokens += group.input_tokens;
            day.output_tokens += group.output_tokens;
            day.cost_usd += group.cost_usd;
            if group.role == Role::User {
                match group.outcome.as_deref() {
                    Some(crate::burst::JOINED) => {}
                    Some(crate::burst::MERGED) => {
                        measures.merged_turns += group.turns;
                        started += group.turns;
                    }
                    _ => started += group.turns,
                }
            }
            if group.role != Role::Agent {
                continue;
            }
            let outcome = group.outcome.clone().unwrap_or_else(|| "unknown".into());
            if outcome == "deferred" {
                measures.deferred_turns += group.turns;
            }
            if group.model_written && !outcome.starts_with("nudge_") {
                answering += group.turns;
            }
            *measures.turns_by_outcome.entry(outcome).or_default() += group.turns;
            if group.model_written {
                measures.model_written_turns += group.turns;
                day.model_written_turns += group.turns;
                reads += group.reads;
            }
        }
        for day in days.values_mut() {
            day.tokens_per_turn = per(
                day.input_tokens + day.output_tokens,
                day.model_written_turns,
            );
            day.cost_usd_per_turn = per_f(day.cost_usd, day.model_written_turns);
            measures.input_tokens += day.input_tokens;
            measures.output_tokens += day.output_tokens;
            measures.cost_usd += day.cost_usd;
        }
        measures.days = days.into_values().collect();
        let turns = measures.model_written_turns;
        measures.deferred_share = per(measures.deferred_turns, answering);
        measures.deferred_share_flagged = measures
            .deferred_share
            .is_some_and(|share| share > DEFERRED_SHARE_FLAG);
        measures.merged_share = per(measures.merged_turns, started);
        measures.reads_per_turn = per(reads, turns);
        measures.tokens_per_turn = per(measures.input_tokens + measures.output_tokens, turns);
        measures.cost_usd_per_turn = per_f(measures.cost_usd, turns);
        measures
    }
}

fn per(total: i64, turns: i64) -> Option<f64> {
    (turns > 0).then(|| total as f64 / turns as f64)
}

fn per_f(total: f64, turns: i64) -> Option<f64> {
    (turns > 0).then(|| total / turns as f64)
}

/// Nearest-rank percentile of a distribution given as ascending `(value, count)`: the smallest
/// value with at least `pct`% of the observations at or below it.
pub fn percentile(distribution: &[(i64, i64)], pct: u32) -> Option<i64> {
    let total: i64 = distribution.iter().map(|(_, count)| count).sum();
    if total == 0 {
        return None;
    }
    // ceil(pct/100 × total), at least 1.
    let rank = ((i64::from(pct) * total + 99) / 100).max(1);
    let mut seen = 0;
    distribution.iter().find_map(|&(value, count)| {
        seen += count;
        (seen >= rank).then_some(value)
    })
}

/// Failed and dead-lettered actions first (what an operator acts on), then by count.
fn ordered_actions(aggregates: &ReportAggregates) -> Vec<ActionMeasure> {
    let mut actions: Vec<ActionMeasure> = aggregates
        .actions
        .iter()
        .map(|a| ActionMeasure {
            tool: a.tool.clone(),
            status: a.status.clone(),
            count: a.count,
        })
        .collect();
    let urgency = |status: &str| match status {
        "failed" => 0,
        "dead_lettered" => 1,
        _ => 2,
    };
    actions.sort_by(|a, b| {
        urgency(&a.status)
            .cmp(&urgency(&b.status))
            .then(b.count.cmp(&a.count))
            .then(a.tool.cmp(&b.tool))
            .then(a.status.cmp(&b.status))
    });
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ActionCount, TurnGroup};

    #[test]
    fn percentiles_are_nearest_rank() {
        // 20 observations: 10×100, 9×200, 1×5000. p50 = 10th = 100; p95 = 19th = 200.
        let d = [(100, 10), (200, 9), (5000, 1)];
        assert_eq!(percentile(&d, 50), Some(100));
        assert_eq!(percentile(&d, 95), Some(200));
        assert_eq!(percentile(&d, 100), Some(5000));
        assert_eq!(percentile(&[], 95), None);
    }

    #[test]
    fn merged_share_is_merged_turns_over_the_messages_that_started_a_turn() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
        let message = |outcome: Option<&str>, turns| {
            crate::report::turn_group(Role::User, outcome, None, turns)
        };
        let aggregates = ReportAggregates {
            turn_groups: vec![
                message(None, 6),
                message(Some(crate::burst::MERGED), 2),
                message(Some(crate::burst::JOINED), 5),
            ],
            ..ReportAggregates::default()
        };
        let week = WeekMeasures::of(
            day,
            &aggregates,
            &SalesCounts::default(),
            &SalesKeys::default(),
        );
        // 8 messages started a turn (the 5 joined pieces did not); 2 of them merged pieces.
        assert_eq!(week.merged_turns, 2);
        assert_eq!(week.merged_share, Some(0.25));
        // The page's weekly table shows it, under its plain name.
        let page = super::super::html::page(
            &super::super::Report {
                version: crate::VERSION,
                business: None,
                generated_at: chrono::Utc::now(),
                weeks: vec![week.clone()],
                playbooks: None,
                not_measured: Vec::new(),
            },
            crate::config::Language::En,
        );
        assert!(
            page.contains("<th>messages sent in pieces<small>"),
            "{page}"
        );
        assert!(page.contains("<td>25.0 %</td>"), "{page}");
        let none = WeekMeasures::of(
            day,
            &ReportAggregates::default(),
            &SalesCounts::default(),
            &SalesKeys::default(),
        );
        assert_eq!(none.merged_share, None);
    }

    #[test]
    fn deferred_share_above_20_percent_is_flagged() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
        let group = |outcome: &str, turns| TurnGroup {
            day,
            role: Role::Agent,
            outcome: Some(outcome.into()),
            escalation_reason: None,
            model_written: true,
            turns,
            reads: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
        };
        let week = |deferred| {
            WeekMeasures::of(
                day,
                &ReportAggregates {
                    turn_groups: vec![
                        group("answered_inline", 8),
                        group("deferred", deferred),
                        group("nudge_sent", 5),
                    ],
                    actions: vec![
                        ActionCount {
                            tool: "add_tag".into(),
                            status: "performed".into(),
                            count: 9,
                        },
                        ActionCount {
                            tool: "send_flow".into(),
                            status: "failed".into(),
                            count: 1,
                        },
                    ],
                    ..ReportAggregates::default()
                },
                &SalesCounts::default(),
                &SalesKeys::default(),
            )
        };
        // 2 of 10 is exactly 20 %: not above. 3 of 11 is. Nudge turns answer no message:
        // outside the denominator.
        assert_eq!(week(2).deferred_share, Some(0.2));
        assert!(!week(2).deferred_share_flagged);
        assert!(week(3).deferred_share_flagged);
        assert_eq!(week(2).actions[0].status, "failed");
        assert_eq!(week(2).week, "2026-W49");
    }

    fn demo_keys() -> SalesKeys {
        SalesKeys {
            intent_field: Some("intent".into()),
            funnel_field: Some("stage".into()),
            offered_or_later: vec!["offered".into(), "prepared".into(), "link_sent".into()],
            prepared_or_later: vec!["prepared".into(), "link_sent".into()],
            payment_flow: Some("payment_link".into()),
        }
    }

    #[test]
    fn sales_rates_divide_the_documented_counts() {
        let counts = SalesCounts {
            prospects: 4,
            offered: 3,
            prepared: 2,
            link_contacts: 2,
            links_sent: 4,
            links_contact_asked: 1,
            nudges_sent: 5,
            nudges_replied: 2,
            window_closings_sent: 4,
            window_closings_replied: 1,
        };
        let sales = SalesMeasures::of(&counts, &demo_keys(), 10);
        assert_eq!(
            sales.prospect_share,
            Some(0.4),
            "4 prospects of 10 contacts"
        );
        assert_eq!(sales.link_sent_rate, Some(0.2), "2 link contacts of 10");
        assert_eq!(sales.prospect_link_sent_rate, Some(0.5), "2 of 4 prospects");
        assert_eq!(
            sales.bypass_rate,
            Some(0.25),
            "1 of 4 links by contactAsked"
        );
        assert_eq!(sales.nudge_reply_rate, Some(0.4), "2 of 5 nudges answered");
        assert_eq!(
            sales.window_closing_reply_rate,
            Some(0.25),
            "1 of 4 window-closing flows answered"
        );
        assert_eq!((sales.offered, sales.prepared), (Some(3), Some(2)));
    }

    #[test]
    fn sales_measures_a_tenant_does_not_configure_are_none_and_listed() {
        let keys = SalesKeys {
            payment_flow: Some("payment_link".into()),
            ..SalesKeys::default()
        };
        let sales = SalesMeasures::of(&SalesCounts::default(), &keys, 0);
        assert_eq!(sales.prospects, None);
        assert_eq!(sales.prospect_share, None);
        assert_eq!(sales.offered, None);
        assert_eq!(sales.link_sent, Some(0));
        assert_eq!(sales.link_sent_rate, None, "no contacts: no rate");
        assert_eq!(sales.nudge_reply_rate, None);
        let listed = pending(Some(&keys));
        let names: Vec<&str> = listed.iter().map(|p| p.measure).collect();
        assert!(names.contains(&"prospect share, prospect link-sent rate"));
        assert!(names.contains(&"funnel stages offered and prepared"));
        assert!(
            names.contains(&"cost per sale"),
            "no funnel field: no conversation reaches link_sent"
        );
        assert!(!names.contains(&"link-sent rate, bypass rate"));
        assert!(pending(None).iter().any(|p| p.measure == "sales measures"));
    }
}
