//! The pre-model checks (SYSTEM 4, 018), in order: escalation keywords, the turn cap with its
//! idle reset, the per-contact hourly rate (counted in the store), the daily token and cost
//! budget. Any denial escalates without calling the model (`escalated_precheck`).
//!
//! The checks are pure: the turn reads what they need from the store in one round, and counts
//! the message against the hourly rate only once the first two checks have passed (a message
//! stopped by a keyword or the cap is not counted). `admit` applies them in order and, last,
//! admits the turn to the day's budget beside the turns in flight (`budget.rs`), where each of
//! its model calls is then reserved before it is sent.

use chrono::{DateTime, Duration, Timelike, Utc};

use super::budget::TurnBudget;
use super::message::Message;
use super::shared::Derived;
use super::{Inbound, TurnEngine};
use crate::config::TenantConfig;
use crate::config::rules_match::EscalationKeywords;
use crate::store::{BudgetUsage, TurnContext};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    EscalationKeyword,
    TurnCap,
    RateLimit,
    Budget,
    /// The contact spent its share of the day (`budget.perContactDailyTokenCap`).
    BudgetContact,
}

impl Denial {
    /// The escalation reason this denial records.
    pub fn escalation(self) -> crate::escalation::Escalation {
        use crate::escalation::Escalation;
        match self {
            Denial::EscalationKeyword => Escalation::Keyword,
            Denial::TurnCap => Escalation::TurnCap,
            Denial::RateLimit => Escalation::RateLimit,
            Denial::Budget => Escalation::Budget,
            Denial::BudgetContact => Escalation::BudgetContact,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Denial::EscalationKeyword => "escalation_keyword",
            Denial::TurnCap => "turn_cap",
            Denial::RateLimit => "rate_limit",
            Denial::Budget => "budget",
            Denial::BudgetContact => "budget_contact",
        }
    }
}

impl TurnEngine {
    /// The checks in order, on what the turn read (`context`): `Err` is the first denial, `Ok`
    /// the turn's place in the day's budget, given back when its agent ends. The message counts against the hourly window (`message.rate_window`) once
    /// keywords and the cap have let it through; the rate check counts it now, the contact's
    /// earlier turns having settled (037).
    pub(super) fn admit(
        &self,
        derived: &Derived,
        inbound: &Inbound,
        context: &TurnContext,
        now: DateTime<Utc>,
        message: &mut Message,
    ) -> Result<TurnBudget, Denial> {
        let inner = &self.inner;
        let config = &derived.config;
        let bound = message.turn.bound;
        let earlier = &context.earlier_user_turns;
        if let Some(denial) = before_rate(config, &derived.keywords, inbound, bound, earlier, now) {
            return Err(denial);
        }
        message.rate_window = Some(hour_start(now));
        if let Some(denial) = after_rate(config, context.rate_count + 1, context.spent) {
            return Err(denial);
        }
        // What the turns in flight reserved and used counts too.
        inner
            .shared
            .budget
            .admit(
                config,
                now.date_naive(),
                context.spent,
                inner.model.id(),
                inner.settings.max_output_tokens,
            )
            .ok_or(Denial::Budget)
    }
}

/// The checks that come before the message counts against the hourly rate: escalation keywords,
/// then the turn cap (018). `earlier` holds the contact's earlier bound message times, newest
/// first (empty for an unbound turn: the cap neither counts nor stops it).
pub(super) fn before_rate(
    config: &TenantConfig,
    keywords: &EscalationKeywords,
    inbound: &Inbound,
    bound: bool,
    earlier: &[DateTime<Utc>],
    now: DateTime<Utc>,
) -> Option<Denial> {
    let rules = &config.rules;
    if keywords.hit(&inbound.text) {
        return Some(Denial::EscalationKeyword);
    }
    let idle = Duration::hours(i64::from(rules.idle_reset_hours));
    if bound
        && messages_since_idle_gap(now, earlier, idle) > i64::from(rules.max_turns_per_conversation)
    {
        return Some(Denial::TurnCap);
    }
    None
}

/// The checks after it: the per-contact hourly rate (`count`, this message included), then the
/// daily token and cost budget (`spent` so far today).
pub(super) fn after_rate(config: &TenantConfig, count: i64, spent: BudgetUsage) -> Option<Denial> {
    let rules = &config.rules;
    if count > i64::from(rules.rate_limit.turns_per_subscriber_per_hour) {
        return Some(Denial::RateLimit);
    }
    if spent.tokens >= rules.budget.daily_token_cap as i64
        || spent.cost_usd >= rules.budget.daily_cost_cap_usd
    {
        return Some(Denial::Budget);
    }
    None
}

/// 018: the contact's messages since the last gap of at least `idle`, counting the message now
/// arriving. `earlier` holds earlier message times, newest first.
pub fn messages_since_idle_gap(
    now: DateTime<Utc>,
    earlier: &[DateTime<Utc>],
    idle: Duration,
) -> i64 {
    let mut count = 1;
    let mut later = now;
    for &at in earlier {
        if later - at >= idle {
            break;
        }
        count += 1;
        later = at;
    }
    count
}

/// The hourly rate window `now` falls in.
pub(super) fn hour_start(now: DateTime<Utc>) -> DateTime<Utc> {
    now.with_minute(0)
        .and_then(|t| t.with_second(0))
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 10, h, m, 0).unwrap()
    }

    #[test]
    fn system_018_turn_cap_counts_messages_since_the_last_idle_gap() {
        let idle = Duration::hours(2);
        // 12:00 now; earlier messages at 11:30, 11:00, then a 3-hour gap, then 07:00.
        let earlier = [at(11, 30), at(11, 0), at(8, 0), at(7, 0)];
        assert_eq!(messages_since_idle_gap(at(12, 0), &earlier, idle), 3);
    }

    #[test]
    fn system_018_first_message_after_an_idle_gap_restarts_the_count() {
        let idle = Duration::hours(2);
        let earlier = [at(9, 0), at(8, 59)];
        assert_eq!(messages_since_idle_gap(at(12, 0), &earlier, idle), 1);
        assert_eq!(messages_since_idle_gap(at(12, 0), &[], idle), 1);
    }

    #[test]
    fn rate_window_starts_on_the_hour() {
        let t = Utc.with_ymd_and_hms(2026, 1, 10, 12, 34, 56).unwrap();
        assert_eq!(hour_start(t), at(12, 0));
    }
}
