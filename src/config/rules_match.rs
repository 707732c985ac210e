//! The two text matches that run before the model (SYSTEM 4): the scripted opening and the
//! escalation keywords. Pure functions over the tenant's rules; no IO, no allocation beyond the
//! folded strings.
//!
//! Invariants:
//! - The opening matches the **whole** message (trimmed, case-insensitive), so a keyword inside a
//!   longer message never triggers the scripted reply.
//! - Escalation keywords match **substrings**, case- and accent-insensitively, so "REEMBOLSÓ"
//!   still hits "reembolso": a contact who wants a person is never missed for an accent.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use super::tenant::Rules;

/// Folds text for keyword matching: canonical decomposition (NFD), combining marks dropped, then
/// lowercased. `"Reembolsó"` and `"REEMBOLSO"` fold to the same string.
pub fn fold(text: &str) -> String {
    text.nfd()
        .filter(|c| !is_combining_mark(*c))
        .collect::<String>()
        .to_lowercase()
}

impl Rules {
    /// The scripted opening message when the whole message, trimmed and case-insensitive, equals
    /// one of `openingTrigger.keywords`. Returned verbatim; no model runs.
    pub fn opening_reply(&self, text: &str) -> Option<&str> {
        let trigger = self.opening_trigger.as_ref()?;
        let message = text.trim().to_lowercase();
        trigger
            .keywords
            .iter()
            .any(|keyword| {
                let keyword = keyword.trim();
                !keyword.is_empty() && keyword.to_lowercase() == message
            })
            .then_some(trigger.message.as_str())
    }

    /// Whether any escalation keyword occurs in the message, case- and accent-insensitively.
    /// A turn uses the snapshot's [`EscalationKeywords`], folded once.
    pub fn escalation_keyword_hit(&self, text: &str) -> bool {
        EscalationKeywords::new(self).hit(text)
    }
}

/// A snapshot's escalation keywords, folded once (accents and case), ready to match messages.
#[derive(Debug, Clone, Default)]
pub struct EscalationKeywords {
    folded: Vec<String>,
}

impl EscalationKeywords {
    pub fn new(rules: &Rules) -> Self {
        Self {
            folded: rules
                .escalation_keywords
                .iter()
                .map(|keyword| fold(keyword).trim().to_owned())
                // An empty keyword would match everything; validation refuses it, and this
                // guard keeps a hand-built `Rules` from escalating every turn.
                .filter(|keyword| !keyword.is_empty())
                .collect(),
        }
    }

    /// Whether any keyword occurs in the message, case- and accent-insensitively.
    pub fn hit(&self, text: &str) -> bool {
        if self.folded.is_empty() {
            return false;
        }
        let message = fold(text);
        self.folded
            .iter()
            .any(|keyword| message.contains(keyword.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tenant::{Messages, OpeningTrigger};

    fn rules(escalation: &[&str], opening: &[&str]) -> Rules {
        let json = serde_json::json!({
            "messages": {"acknowledgement": "One moment.", "escalation": "A person will reply."},
        });
        let mut rules: Rules = serde_json::from_value(json).expect("minimal rules parse");
        rules.messages = Messages {
            acknowledgement: "One moment.".to_owned(),
            escalation: "A person will reply.".to_owned(),
            media_fallback: None,
            closer: None,
            escalation_closed: None,
        };
        rules.escalation_keywords = escalation.iter().map(|k| (*k).to_owned()).collect();
        if !opening.is_empty() {
            rules.opening_trigger = Some(OpeningTrigger {
                keywords: opening.iter().map(|k| (*k).to_owned()).collect(),
                message: "Welcome to the studio.".to_owned(),
            });
        }
        rules
    }

    #[test]
    fn system_4_escalation_keywords_match_substrings_ignoring_case_and_accents() {
        let cases: &[(&str, &str, bool)] = &[
            ("reembolso", "Quiero un REEMBOLSÓ", true),
            ("reembolsó", "quiero un reembolso ya", true),
            ("refund", "I want a Refund please", true),
            ("speak to a person", "Can I SPEAK TO A PERSON?", true),
            ("queja", "Tengo una QUEJA formal", true),
            ("crème", "la creme brulee", true),
            ("refund", "How much is the course?", false),
            ("complaint", "complain", false),
            ("reembolso", "reembolsar", false),
        ];
        for (keyword, text, expected) in cases {
            let rules = rules(&[keyword], &[]);
            assert_eq!(
                rules.escalation_keyword_hit(text),
                *expected,
                "keyword {keyword:?} in {text:?}"
            );
        }
    }

    #[test]
    fn system_4_no_escalation_keywords_never_hit() {
        assert!(!rules(&[], &[]).escalation_keyword_hit("refund"));
        assert!(!rules(&["   "], &[]).escalation_keyword_hit("anything"));
    }

    #[test]
    fn system_4_opening_trigger_matches_the_whole_trimmed_message_case_insensitively() {
        let rules = rules(&[], &["start course chat", "hello studio"]);
        let cases: &[(&str, bool)] = &[
            ("start course chat", true),
            ("  Start Course CHAT \n", true),
            ("HELLO STUDIO", true),
            ("start course chat please", false),
            ("hello", false),
            ("", false),
        ];
        for (text, expected) in cases {
            let reply = rules.opening_reply(text);
            assert_eq!(
                reply,
                expected.then_some("Welcome to the studio."),
                "message {text:?}"
            );
        }
    }

    #[test]
    fn system_4_no_opening_trigger_means_no_scripted_reply() {
        assert_eq!(rules(&[], &[]).opening_reply("start course chat"), None);
    }

    #[test]
    fn fold_drops_accents_and_case() {
        assert_eq!(fold("ÁÉÍÓÚ Ñ ü"), "aeiou n u");
    }
}
