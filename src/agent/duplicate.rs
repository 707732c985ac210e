//! No reply is said twice (013): a reply message that, normalised, equals an earlier agent
//! message of the history the model was given is a repeat.
//!
//! Normalising lowercases, drops emoji (pictographs, their modifiers, joiners, variation
//! selectors, keycaps and flags), collapses every run of whitespace to one space and trims. A
//! message that normalises to nothing repeats nothing. An earlier agent turn's text holds its
//! messages joined by a blank line; each of them, and the whole text, is compared.
//!
//! On a repeat the reply becomes the tenant's `messages.closer` when it is set (not escalating,
//! the confidence kept, the closing question dropped): [`Duplicate::Replaced`]. Without a
//! closer the reply is sent as it is and the repeat only recorded: [`Duplicate::Detected`].
//! The guardrails ask this only of a reply that does not escalate. Pure, no IO.

use std::collections::HashSet;

use super::prompt::HistoryTurn;
use crate::store::Role;

/// What the rule found, recorded on the agent turn (`turns.duplicate`) and counted in
/// `/metrics` (`duplicate_replies_total{kind}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Duplicate {
    /// The reply repeated an earlier message and was replaced by `messages.closer`.
    Replaced,
    /// The reply repeated an earlier message and was sent: no closer is configured.
    Detected,
}

impl Duplicate {
    pub fn as_str(self) -> &'static str {
        match self {
            Duplicate::Replaced => "duplicate_replaced",
            Duplicate::Detected => "duplicate_detected",
        }
    }

    /// The `/metrics` label.
    pub fn kind(self) -> &'static str {
        match self {
            Duplicate::Replaced => "replaced",
            Duplicate::Detected => "detected",
        }
    }
}

/// Lowercase, emoji dropped, whitespace collapsed to single spaces, trimmed.
pub fn normalise(text: &str) -> String {
    let kept: String = text
        .chars()
        .filter(|c| !is_emoji(*c))
        .flat_map(char::to_lowercase)
        .collect();
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Pictographs and the code points that only shape them (skin tones, joiner, variation
/// selector, keycap, tags). Flags' regional indicators fall in the first range.
fn is_emoji(c: char) -> bool {
    matches!(
        u32::from(c),
        0x1F000..=0x1FAFF
            | 0x2600..=0x27BF
            | 0x2B00..=0x2BFF
            | 0x2300..=0x23FF
            | 0x200D
            | 0xFE0E..=0xFE0F
            | 0x20E3
            | 0xE0020..=0xE007F
    )
}

/// Whether any of `messages` repeats an agent message of `history`.
pub fn repeats(messages: &[String], history: &[HistoryTurn]) -> bool {
    let said: HashSet<String> = history
        .iter()
        .filter(|t| t.role == Role::Agent)
        .flat_map(|t| {
            t.text
                .split("\n\n")
                .map(normalise)
                .chain(std::iter::once(normalise(&t.text)))
                .collect::<Vec<_>>()
        })
        .filter(|m| !m.is_empty())
        .collect();
    messages
        .iter()
        .map(|m| normalise(m))
        .any(|m| !m.is_empty() && said.contains(&m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(text: &str) -> HistoryTurn {
        HistoryTurn {
            role: Role::Agent,
            text: text.to_owned(),
            actions_performed: Vec::new(),
        }
    }

    #[test]
    fn spec_013_normalising_drops_case_emoji_and_extra_whitespace() {
        assert_eq!(
            normalise("  The Foundation  Course 👍🏽\n is\t450 USD 🇪🇸 ❤️ "),
            "the foundation course is 450 usd"
        );
        assert_eq!(normalise("👋🏻 ✨"), "");
        assert_eq!(normalise("Ünïcode ÉTÉ"), "ünïcode été");
    }

    #[test]
    fn spec_013_a_message_equal_to_an_earlier_agent_message_repeats() {
        let history = vec![
            agent("Hello! 😊\n\nThe course is 450 USD."),
            HistoryTurn {
                role: Role::User,
                text: "how much?".to_owned(),
                actions_performed: Vec::new(),
            },
        ];
        assert!(repeats(
            &["the COURSE is   450 usd. 👍".to_owned()],
            &history
        ));
        assert!(repeats(
            &["Something new".to_owned(), "hello!".to_owned()],
            &history
        ));
        // The contact's words are not the agent's.
        assert!(!repeats(&["How much?".to_owned()], &history));
        assert!(!repeats(&["The course is 460 USD.".to_owned()], &history));
        // Nothing left after normalising repeats nothing.
        assert!(!repeats(&["🙂".to_owned()], &[agent("🙂")]));
    }
}
