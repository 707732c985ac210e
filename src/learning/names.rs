//! Names in a transcript, removed before the analyst reads it (031 § Analyst): a contact's
//! messages are cleaned of identifier shapes (phones, emails, links) like a note; a name has no
//! shape, so it is found where people say it (an introduction: "my name is Ana", "soy Ana",
//! "I'm Ana Ruiz"; a greeting: "thanks, Ana") and then removed everywhere in that contact's
//! transcript, the agent's lines included, as `[name]`.
//!
//! A heuristic, erring towards removing: a capitalised word after one of the phrases is taken
//! for a name unless it is a common word of those positions. What it misses a person may still
//! see in a proposal before approving it (`docs/LEARNING.md`).

use std::sync::LazyLock;

use regex::Regex;

/// What a removed name becomes.
pub const REMOVED_NAME: &str = "[name]";

/// Introductions in the languages the examples and tests use, then one or two capitalised
/// words: the name.
static INTRODUCED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i:\b(?:my name is|my name's|name's|i am|i'm|im|this is|call me|it's|me llamo|mi nombre es|soy|je m'appelle|je suis|ich bin|ich heiße|ich heisse|meu nome é|me chamo|sou))\s+(\p{Lu}\p{Ll}+(?:[ -]\p{Lu}\p{Ll}+)?)",
    )
    .expect("the introduction pattern compiles")
});

/// Greetings and thanks, then a capitalised word: the name of whoever is greeted.
static GREETED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i:\b(?:hi|hello|hey|dear|thanks|thank you|hola|gracias|bonjour|merci|hallo|danke|olá|ola|obrigado|obrigada))[,!]?\s+(\p{Lu}\p{Ll}+)",
    )
    .expect("the greeting pattern compiles")
});

/// Capitalised words those phrases are often followed by that are not names.
const NOT_NAMES: &[&str] = &[
    "A",
    "About",
    "Also",
    "An",
    "And",
    "Are",
    "But",
    "Can",
    "Could",
    "De",
    "Do",
    "El",
    "Fine",
    "For",
    "From",
    "Glad",
    "Good",
    "Happy",
    "Here",
    "How",
    "In",
    "Interested",
    "Interesada",
    "Interesado",
    "Is",
    "It",
    "Just",
    "La",
    "Looking",
    "Maybe",
    "Muy",
    "My",
    "No",
    "Not",
    "Now",
    "Of",
    "Ok",
    "Okay",
    "On",
    "Please",
    "Ready",
    "Really",
    "So",
    "Sorry",
    "Still",
    "Sure",
    "That",
    "The",
    "There",
    "This",
    "To",
    "Very",
    "We",
    "What",
    "When",
    "Where",
    "Which",
    "Who",
    "Why",
    "With",
    "Yes",
    "You",
    "Your",
];

/// The names said in `texts` (each word of a two-word name on its own), without repeats.
pub fn names_in<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for text in texts {
        let found = INTRODUCED
            .captures_iter(text)
            .chain(GREETED.captures_iter(text));
        for found in found {
            for word in found[1].split([' ', '-']) {
                if word.chars().count() >= 2
                    && !NOT_NAMES.contains(&word)
                    && !names.iter().any(|n| n == word)
                {
                    names.push(word.to_owned());
                }
            }
        }
    }
    names
}

/// `text` with every whole-word occurrence of `names` replaced by [`REMOVED_NAME`].
pub fn remove(text: &str, names: &[String]) -> String {
    if names.is_empty() {
        return text.to_owned();
    }
    let alternatives: Vec<String> = names.iter().map(|n| regex::escape(n)).collect();
    let pattern = format!(r"\b(?:{})\b", alternatives.join("|"));
    match Regex::new(&pattern) {
        Ok(names) => names.replace_all(text, REMOVED_NAME).into_owned(),
        // Names are escaped letters; should one ever fail to compile, nothing is shown.
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use crate::fence::Fence;
    use crate::learning::cohort::Member;
    use crate::store::{Role, Turn};

    fn turn(id: i64, role: Role, text: &str) -> Turn {
        Turn {
            id,
            seq: id,
            conversation_id: uuid::Uuid::nil(),
            role,
            text: text.to_owned(),
            outcome: None,
            model: None,
            bound: true,
            actions: None,
            reads: 0,
            input_tokens: 0,
            output_tokens: 0,
            cached_tokens: 0,
            cache_write_tokens: 0,
            cost_usd: 0.0,
            latency_ms: 0,
            created_at: chrono::Utc::now(),
            escalation_reason: None,
            media_kind: None,
            duplicate: None,
            playbook_version: None,
        }
    }

    #[test]
    fn names_in_a_transcript_are_removed_before_the_analyst_reads_it() {
        let member = Member {
            conversation_id: uuid::Uuid::nil(),
            last_bound_at: chrono::Utc::now(),
            turns: vec![
                turn(
                    1,
                    Role::User,
                    "Hi! My name is Maria Lopez, call me at +1 555 010 4477",
                ),
                turn(
                    2,
                    Role::Agent,
                    "Thanks, Maria! The wheel course starts Monday.",
                ),
                turn(
                    3,
                    Role::User,
                    "Great. Lopez is my surname and soy Ana's sister",
                ),
                turn(4, Role::User, "I'm interested in the Glaze Lab"),
            ],
        };
        let fence = Fence::from_nonce("0123456789abcdef").unwrap();
        let text = crate::learning::transcript::render(&member, &fence).unwrap();
        for name in ["Maria", "Lopez", "Ana"] {
            assert!(!text.contains(name), "{name} in {text}");
        }
        assert!(!text.contains("555 010"), "{text}");
        assert!(text.contains("[name]"), "{text}");
        assert!(text.contains("Glaze Lab"), "not a name: {text}");
        assert!(text.contains("wheel course starts Monday"), "{text}");
    }
}
