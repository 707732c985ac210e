//! The due-time rules of a nudge (025), pure: given what the server knows when a nudge falls
//! due, whether it is cancelled, and why. The worker asks them cheapest first and makes a
//! request (the `human_active` read) only when the cheaper ones let the nudge through.

use chrono::{DateTime, Utc};

use crate::config::MAX_NUDGE_MINUTES;

pub use crate::store::CancelReason;

/// What the server knows of a conversation when its nudge falls due, before any request.
#[derive(Debug, Clone, Copy)]
pub struct DueFacts {
    pub now: DateTime<Utc>,
    pub scheduled_at: DateTime<Utc>,
    /// `conversations.escalated_at`.
    pub escalated_at: Option<DateTime<Utc>>,
    /// The contact's last message this service recorded.
    pub last_inbound_at: Option<DateTime<Utc>>,
    /// A performed funnel write reached `link_sent` (from `turns.actions`).
    pub link_sent: bool,
    /// The turn cap or the day's budget would refuse a turn now.
    pub turn_cap_or_budget: bool,
}

/// The checks made before any request, in 025's order (cheapest first): a cancellation, or
/// `None` when the nudge may go on to the `human_active` read and the rate limit.
pub fn before_read(facts: &DueFacts) -> Option<CancelReason> {
    // An inbound message recorded after the nudge was scheduled (the turn-start cancel is the
    // usual path; this catches a cancel that failed).
    if facts
        .last_inbound_at
        .is_some_and(|at| at > facts.scheduled_at)
    {
        return Some(CancelReason::ContactReplied);
    }
    // SALES decision: cancel when the conversation escalated at or after the scheduling.
    if facts
        .escalated_at
        .is_some_and(|at| at >= facts.scheduled_at)
    {
        return Some(CancelReason::Escalated);
    }
    if facts.link_sent {
        return Some(CancelReason::LinkSent);
    }
    if window_closing(facts.now, facts.last_inbound_at) {
        return Some(CancelReason::WindowClosing);
    }
    if facts.turn_cap_or_budget {
        return Some(CancelReason::CapReached);
    }
    None
}

/// 025: past the last inbound message plus 1380 minutes the 24-hour window is closing. With no
/// recorded inbound message there is no window this service knows of: closing.
pub fn window_closing(now: DateTime<Utc>, last_inbound_at: Option<DateTime<Utc>>) -> bool {
    match last_inbound_at {
        Some(at) => now > at + chrono::Duration::minutes(i64::from(MAX_NUDGE_MINUTES)),
        None => true,
    }
}

/// The tenant's `humanActiveTag` (`tools.json` `nudge`), when it has one.
pub fn human_active_tag(config: &crate::config::TenantConfig) -> Option<&str> {
    config
        .tools
        .as_ref()
        .and_then(|t| t.nudge.as_ref())
        .and_then(|n| n.human_active_tag.as_deref())
}

/// The `human_active` check before anything unprompted is sent: without a `humanActiveTag`
/// nothing is read; otherwise the contact's tags are read (025: the client's 10 s, not
/// `get_contact`'s 1500 ms; only tag names are used) and [`after_read`] decides.
pub async fn human_active_check(
    manychat: &crate::manychat::ManyChatClient,
    config: &crate::config::TenantConfig,
    subscriber: &crate::ids::SubscriberId,
) -> Option<CancelReason> {
    let tag = human_active_tag(config)?;
    let read = manychat
        .get_contact(subscriber, crate::manychat::REQUEST_TIMEOUT)
        .await;
    after_read(
        read.as_ref().map(|r| r.tags.as_slice()).map_err(|_| ()),
        tag,
    )
}

/// The `human_active` read's verdict: the tag present cancels, a failed read cancels.
pub fn after_read(read: Result<&[String], ()>, human_active_tag: &str) -> Option<CancelReason> {
    match read {
        Ok(tags) if tags.iter().any(|t| t == human_active_tag) => Some(CancelReason::HumanActive),
        Ok(_) => None,
        Err(()) => Some(CancelReason::ReadFailed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(minutes: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 5, 4, 8, 0, 0).unwrap() + chrono::Duration::minutes(minutes)
    }

    fn facts() -> DueFacts {
        DueFacts {
            now: t(120),
            scheduled_at: t(0),
            escalated_at: None,
            last_inbound_at: Some(t(0)),
            link_sent: false,
            turn_cap_or_budget: false,
        }
    }

    #[test]
    fn spec_025_a_quiet_contact_inside_the_window_passes_the_cheap_checks() {
        assert_eq!(before_read(&facts()), None);
    }

    #[test]
    fn spec_025_escalated_at_or_after_scheduling_cancels_and_before_does_not() {
        let mut f = facts();
        f.escalated_at = Some(t(-1));
        assert_eq!(
            before_read(&f),
            None,
            "an older escalation was handled already"
        );
        f.escalated_at = Some(t(0));
        assert_eq!(before_read(&f), Some(CancelReason::Escalated));
    }

    #[test]
    fn spec_025_window_closes_after_1380_minutes_exactly() {
        assert!(!window_closing(t(1380), Some(t(0))));
        assert!(window_closing(t(1381), Some(t(0))));
        assert!(window_closing(t(1), None));
    }

    #[test]
    fn spec_025_checks_run_cheapest_first() {
        let mut f = facts();
        f.now = t(2000);
        f.link_sent = true;
        f.turn_cap_or_budget = true;
        f.escalated_at = Some(t(5));
        assert_eq!(before_read(&f), Some(CancelReason::Escalated));
        f.escalated_at = None;
        assert_eq!(before_read(&f), Some(CancelReason::LinkSent));
        f.link_sent = false;
        assert_eq!(before_read(&f), Some(CancelReason::WindowClosing));
        f.now = t(60);
        assert_eq!(before_read(&f), Some(CancelReason::CapReached));
        f.last_inbound_at = Some(t(1));
        assert_eq!(before_read(&f), Some(CancelReason::ContactReplied));
    }

    #[test]
    fn spec_025_human_active_tag_or_a_failed_read_cancels() {
        let tags = vec!["vip".to_owned(), "human-handling".to_owned()];
        assert_eq!(
            after_read(Ok(&tags), "human-handling"),
            Some(CancelReason::HumanActive)
        );
        assert_eq!(after_read(Ok(&tags[..1]), "human-handling"), None);
        assert_eq!(
            after_read(Err(()), "human-handling"),
            Some(CancelReason::ReadFailed)
        );
    }
}
