//! The pre-model checks (SYSTEM 4, 018), in order: escalation keywords, the turn cap with its
//! idle reset, the per-contact hourly rate (counted in the store), the daily token and cost
//! budget. Any denial escalates without calling the model (`escalated_precheck`).

use chrono::{DateTime, Duration, Timelike, Utc};

use super::Inbound;
use crate::config::TenantConfig;
use crate::store::{Conversation, Store, StoreError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    EscalationKeyword,
    TurnCap,
    RateLimit,
    Budget,
}

impl Denial {
    pub fn as_str(self) -> &'static str {
        match self {
            Denial::EscalationKeyword => "escalation_keyword",
            Denial::TurnCap => "turn_cap",
            Denial::RateLimit => "rate_limit",
            Denial::Budget => "budget",
        }
    }
}

pub(super) async fn precheck(
    store: &dyn Store,
    config: &TenantConfig,
    conversation: &Conversation,
    inbound: &Inbound,
    bound: bool,
    now: DateTime<Utc>,
) -> Result<Option<Denial>, StoreError> {
    let rules = &config.rules;
    if rules.escalation_keyword_hit(&inbound.text) {
        return Ok(Some(Denial::EscalationKeyword));
    }

    // 018: the cap counts bound messages; an unbound one is neither counted nor capped (the
    // per-contact rate below still applies to it).
    if bound {
        let max_turns = i64::from(rules.max_turns_per_conversation);
        let earlier = store
            .recent_user_turn_times(conversation.id, max_turns + 1)
            .await?;
        let idle = Duration::hours(i64::from(rules.idle_reset_hours));
        if messages_since_idle_gap(now, &earlier, idle) > max_turns {
            return Ok(Some(Denial::TurnCap));
        }
    }

    let window_start = hour_start(now);
    let count = store
        .bump_rate(&inbound.subscriber_id, window_start)
        .await?;
    if count > i64::from(rules.rate_limit.turns_per_subscriber_per_hour) {
        return Ok(Some(Denial::RateLimit));
    }

    let spent = store.budget(now.date_naive()).await?;
    if spent.tokens >= rules.budget.daily_token_cap as i64
        || spent.cost_usd >= rules.budget.daily_cost_cap_usd
    {
        return Ok(Some(Denial::Budget));
    }
    Ok(None)
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

fn hour_start(now: DateTime<Utc>) -> DateTime<Utc> {
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
