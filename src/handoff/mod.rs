//! The handoff that holds: once a turn hands its contact to a person (any path that answers with
//! the escalation copy sets `conversations.escalated_at`), the conversation is held for
//! `rules.handoff.holdHours` (default 24; 0 turns the hold off). While held the assistant stays
//! out of the conversation: the contact's message is recorded, answered with a silent Dynamic
//! Block that keeps the callback, and nothing else happens (no model, no tool, no media, no copy,
//! no handoff again, no nudge).
//!
//! The hold ends at the first of: `holdHours` after the last handoff (`hold_expired`), the
//! handoff tag gone from the contact (`tag_removed`, read once per held message when
//! `handoff.tag` is set, `tag`), an operator's release (`released`: the CLI or the release route,
//! `release`). The release lives on the conversation row (time and reason), so every replica
//! sees it; the first turn after it tells the model, in one server line, that a person had the
//! conversation (`release_note`).
//!
//! This file is pure: the state of a conversation's hold at an instant, and the note's line.

pub mod release;
pub mod tag;

use chrono::{DateTime, Duration, Utc};

use crate::config::TenantConfig;
use crate::store::Conversation;

/// The outcome of the agent turn recorded for a message answered while its contact is held.
pub const HELD_OUTCOME: &str = "held";

/// Why a hold ended, as recorded on the conversation and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// `holdHours` passed since the last handoff.
    HoldExpired,
    /// The handoff tag is no longer on the contact.
    TagRemoved,
    /// An operator released the contact (CLI or the release route).
    Released,
}

impl Release {
    pub const ALL: [Release; 3] = [Release::HoldExpired, Release::TagRemoved, Release::Released];

    pub fn as_str(self) -> &'static str {
        match self {
            Release::HoldExpired => "hold_expired",
            Release::TagRemoved => "tag_removed",
            Release::Released => "released",
        }
    }
}

/// A conversation's hold at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// No hold in force: never handed over, released since, or the hold is off (`holdHours` 0).
    Free,
    /// Held for a person since the last handoff, until `until` unless released sooner.
    Held {
        since: DateTime<Utc>,
        until: DateTime<Utc>,
    },
    /// The hold that began at `since` ran out at `at` and its release is not recorded yet.
    Expired {
        since: DateTime<Utc>,
        at: DateTime<Utc>,
    },
}

/// The copy a handoff answers with at `now`: `messages.escalationClosed` outside business hours,
/// `messages.escalation` otherwise (and always without `hours`).
pub fn escalation_copy(config: &TenantConfig, now: DateTime<Utc>) -> &str {
    let messages = &config.rules.messages;
    let closed = config
        .rules
        .hours
        .as_ref()
        .and_then(|h| crate::config::hours::Schedule::parse(h).ok())
        .is_some_and(|schedule| !schedule.is_open(now));
    match (&messages.escalation_closed, closed) {
        (Some(copy), true) => copy,
        _ => &messages.escalation,
    }
}

/// `rules.handoff.holdHours`, its default when the tenant has no `handoff` block.
pub fn hold_hours(config: &TenantConfig) -> u32 {
    config
        .rules
        .handoff
        .as_ref()
        .map_or_else(crate::config::defaults::hold_hours, |h| h.hold_hours)
}

/// The hold of `conversation` at `now` for a hold of `hours` (0: never held).
pub fn hold_at(conversation: &Conversation, hours: u32, now: DateTime<Utc>) -> Hold {
    let Some(since) = conversation.escalated_at else {
        return Hold::Free;
    };
    if hours == 0 || released_since(conversation, since) {
        return Hold::Free;
    }
    let until = since + Duration::hours(i64::from(hours));
    if now < until {
        Hold::Held { since, until }
    } else {
        Hold::Expired { since, at: until }
    }
}

/// Whether a release at or after the handoff at `since` is recorded: that hold is over.
pub fn released_since(conversation: &Conversation, since: DateTime<Utc>) -> bool {
    conversation
        .hold_released_at
        .is_some_and(|released| released >= since)
}

/// When a person had the conversation, for the first turn after its release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseNote {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// The note the next turn owes the model: a recorded release of the last handoff's hold that the
/// model was not told of yet.
pub fn release_note(conversation: &Conversation) -> Option<ReleaseNote> {
    let from = conversation.escalated_at?;
    let to = conversation.hold_released_at?;
    (conversation.hold_note_due && to >= from).then_some(ReleaseNote { from, to })
}

impl ReleaseNote {
    /// The one English server line outside the fence.
    pub fn line(&self) -> String {
        format!(
            "A person from the business handled this conversation from {} to {} UTC; their \
             replies to the contact are not in the history above.",
            self.from.format("%Y-%m-%d %H:%M"),
            self.to.format("%Y-%m-%d %H:%M"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 2, h, 0, 0).unwrap()
    }

    fn conversation(escalated: Option<u32>, released: Option<u32>) -> Conversation {
        let subscriber = crate::ids::SubscriberId::parse("4400100").unwrap();
        Conversation {
            escalated_at: escalated.map(at),
            hold_released_at: released.map(at),
            hold_release_reason: released.map(|_| "released".to_owned()),
            hold_note_due: released.is_some(),
            ..Conversation::first_contact(uuid::Uuid::nil(), subscriber, at(0))
        }
    }

    #[test]
    fn handoff_hold_lasts_hold_hours_from_the_last_handoff() {
        let c = conversation(Some(8), None);
        assert_eq!(
            hold_at(&c, 4, at(11)),
            Hold::Held {
                since: at(8),
                until: at(12)
            }
        );
        assert_eq!(
            hold_at(&c, 4, at(12)),
            Hold::Expired {
                since: at(8),
                at: at(12)
            }
        );
    }

    #[test]
    fn handoff_hold_of_zero_hours_never_holds() {
        assert_eq!(hold_at(&conversation(Some(8), None), 0, at(8)), Hold::Free);
    }

    #[test]
    fn handoff_never_handed_over_is_not_held() {
        assert_eq!(hold_at(&conversation(None, None), 24, at(8)), Hold::Free);
    }

    #[test]
    fn handoff_a_release_ends_the_hold_and_a_newer_handoff_starts_another() {
        assert_eq!(
            hold_at(&conversation(Some(8), Some(9)), 24, at(10)),
            Hold::Free
        );
        let again = conversation(Some(10), Some(9));
        assert!(matches!(hold_at(&again, 24, at(11)), Hold::Held { since, .. } if since == at(10)));
        assert_eq!(
            release_note(&again),
            None,
            "the old release's note is not owed"
        );
    }

    #[test]
    fn handoff_release_note_names_when_a_person_had_the_conversation() {
        let c = conversation(Some(8), Some(9));
        let note = release_note(&c).expect("a note is due");
        assert_eq!(
            note,
            ReleaseNote {
                from: at(8),
                to: at(9)
            }
        );
        assert_eq!(
            note.line(),
            "A person from the business handled this conversation from 2026-03-02 08:00 to \
             2026-03-02 09:00 UTC; their replies to the contact are not in the history above."
        );
        let noted = Conversation {
            hold_note_due: false,
            ..c
        };
        assert_eq!(release_note(&noted), None);
    }
}
