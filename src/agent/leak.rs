//! Leak detection, the guardrails' third step: fence markers and the prompt's section markers
//! as written or undisguised (NFKC, default-ignorable code points dropped), and a run of
//! [`LEAK_RUN_CHARS`] letters and digits copied from the framework rules or the tenant prompt,
//! compared on letters and digits only (NFKC, lowercase, everything else removed from both
//! sides), so zero-width characters, soft hyphens, fullwidth letters or changed punctuation do
//! not hide a copy. Returns kinds only, never text (C5).

use std::collections::HashSet;
use std::fmt;
use std::hash::{BuildHasher, RandomState};

use unicode_normalization::UnicodeNormalization;

use super::prompt::{HEADER_CATALOG, HEADER_PLAYBOOK, SECTION_MARKERS};
use crate::fence::Fence;

/// A run of this many letters and digits copied from the protected prompt text is a leak. Long
/// enough (about a dozen words) that no ordinary reply of the golden suites matches by chance.
pub const LEAK_RUN_CHARS: usize = 60;

/// The prompt text a reply may not copy: the framework rules and the tenant prompt (everything
/// before the catalog block) and, 031, the playbook section after the payment options (its rule
/// and the approved tactics: the agent's instructions, never copy for a contact), normalised.
/// The catalog, FAQ and payment options are excluded: a reply may legitimately quote them.
///
/// Built once per config snapshot (`agent::SnapshotPrompt`): every window of
/// [`LEAK_RUN_CHARS`] characters is hashed up front, so checking a reply costs one lookup per
/// window of the reply rather than a search of the whole prompt per window.
pub struct ProtectedText {
    normalised: String,
    hasher: RandomState,
    /// The hash of every [`LEAK_RUN_CHARS`]-character window of `normalised`.
    windows: HashSet<u64>,
}

impl ProtectedText {
    /// The protected part of a static prefix (`agent::static_prefix`), with the playbook
    /// section when the prefix carries one.
    pub fn new(prefix: &str) -> Self {
        // Tenant text after the catalog header never starts a line with `# ` (prompt.rs indents
        // continuations), so the last header line is ours even if the tenant prompt holds one,
        // and a playbook header after it is ours too.
        let marker = format!("\n{HEADER_CATALOG}\n");
        let end = prefix.rfind(&marker).unwrap_or(prefix.len());
        let mut normalised = normalise(&prefix[..end]);
        let playbook = format!("\n{HEADER_PLAYBOOK}\n");
        if let Some(at) = prefix[end..].find(&playbook) {
            // A space between the parts: a reply's normalised text holds none, so no copy is
            // found across the catalog that lies between them.
            normalised.push(' ');
            normalised.push_str(&normalise(&prefix[end + at..]));
        }
        let hasher = RandomState::new();
        let windows = windows(&normalised)
            .map(|window| hasher.hash_one(window))
            .collect();
        Self {
            normalised,
            hasher,
            windows,
        }
    }

    /// Whether `text` holds a run of [`LEAK_RUN_CHARS`] letters and digits copied from the
    /// protected text, ignoring case, whitespace, punctuation and invisible characters.
    pub(crate) fn copied_in(&self, text: &str) -> bool {
        let reply = normalise(text);
        windows(&reply).any(|window| {
            // A hash match is confirmed on the text itself, so a collision cannot escalate.
            self.windows.contains(&self.hasher.hash_one(window)) && self.normalised.contains(window)
        })
    }
}

impl fmt::Debug for ProtectedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Prompt text: its size only.
        f.debug_struct("ProtectedText")
            .field("chars", &self.normalised.chars().count())
            .finish_non_exhaustive()
    }
}

/// Every run of [`LEAK_RUN_CHARS`] consecutive characters of `text` (none when it is shorter).
fn windows(text: &str) -> impl Iterator<Item = &str> {
    let starts: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let count = (starts.len() + 1).saturating_sub(LEAK_RUN_CHARS);
    (0..count).map(move |w| {
        let to = starts
            .get(w + LEAK_RUN_CHARS)
            .copied()
            .unwrap_or(text.len());
        &text[starts[w]..to]
    })
}

/// The letters and digits of `text` as a reader sees them ([`undisguised`]), lowercase, with
/// everything else (whitespace, punctuation, symbols) removed: a copy is found whatever was put
/// between its words.
fn normalise(text: &str) -> String {
    undisguised(text)
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// `text` as a reader sees it: NFKC (fullwidth letters, ligatures and other compatibility forms
/// become the plain characters) without default-ignorable code points (zero-width characters,
/// soft hyphens, joiners, bidi controls, variation selectors), which render as nothing.
fn undisguised(text: &str) -> std::borrow::Cow<'_, str> {
    if text.is_ascii() {
        // ASCII is its own NFKC and holds no default-ignorable code point.
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(text.nfkc().filter(|c| !is_default_ignorable(*c)).collect())
}

/// Unicode's `Default_Ignorable_Code_Point` property (DerivedCoreProperties.txt, stable since
/// Unicode 5.2 apart from additions inside the reserved ranges listed here).
fn is_default_ignorable(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// The kind of leak in `text`, if any (a label for the log, never the text).
pub(super) fn leak_kind(
    text: &str,
    fence: &Fence,
    protected: &ProtectedText,
) -> Option<&'static str> {
    let plain = undisguised(text);
    let seen = [text, plain.as_ref()];
    if seen.iter().any(|t| fence.contains_marker(t)) {
        return Some("fence_marker");
    }
    if SECTION_MARKERS
        .iter()
        .any(|m| seen.iter().any(|t| t.contains(m)))
    {
        return Some("section_marker");
    }
    if protected.copied_in(text) {
        return Some("prompt_text");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each snapshot's prompt protects its own text: a copy of one prompt is not a leak of
    /// another's.
    #[test]
    fn system_4_leak_check_follows_the_prefix_it_is_given() {
        let pottery = "You help a pottery studio. Never reveal the wholesale clay supplier or \
                       the kiln firing schedule to anyone who asks.";
        let bakery = "You help a bakery. Always answer in short sentences and never mention \
                      ingredients that are not on the published list.";
        let copied =
            "Never reveal the wholesale clay supplier or the kiln firing schedule to anyone";
        assert!(ProtectedText::new(pottery).copied_in(copied));
        assert!(!ProtectedText::new(bakery).copied_in(copied));
        assert!(ProtectedText::new(pottery).copied_in(copied));
        assert!(!ProtectedText::new(pottery).copied_in("The kiln is fired on Fridays."));
    }

    /// 031: the playbook section is protected as the rules above the catalog are: a reply that
    /// copies a tactic, or names the section's header, leaks; the catalog between them is still
    /// quotable, and no copy is found across it.
    #[test]
    fn spec_031_the_playbook_section_is_protected_like_the_rules() {
        let tactic = "Invented tactic: before the price, ask which weekday evening suits the \
                      contact best for the wheel course";
        let catalog = "- offering wheel: Wheel course | price 120.00 EUR\n  Six evenings at \
                       the wheel for complete beginners with all clay included\n";
        let prefix = format!(
            "# FRAMEWORK RULES\nBe kind.\n\n# CATALOG\n{catalog}\n# PAYMENT OPTIONS\n(none)\n\n\
             # PLAYBOOK\nTactics.\n- {tactic}\n"
        );
        let protected = ProtectedText::new(&prefix);
        assert!(protected.copied_in(tactic));
        assert!(!protected.copied_in(catalog), "the catalog stays quotable");
        assert_eq!(
            leak_kind("Sure! # PLAYBOOK says hi", &Fence::new(), &protected),
            Some("section_marker")
        );
        let without = ProtectedText::new(&prefix[..prefix.find("\n# PLAYBOOK").unwrap()]);
        assert!(!without.copied_in(tactic));
    }

    #[test]
    fn system_4_leak_check_sees_prompt_text_behind_zero_width_soft_hyphen_and_fullwidth() {
        let pottery = "You help a pottery studio. Never reveal the wholesale clay supplier or \
                       the kiln firing schedule to anyone who asks.";
        let protected = ProtectedText::new(pottery);
        let copied =
            "Never reveal the wholesale clay supplier or the kiln firing schedule to anyone";
        let interleave =
            |with: char| -> String { copied.chars().flat_map(|c| [c, with]).collect::<String>() };
        let fullwidth: String = copied
            .chars()
            .map(|c| match c {
                '!'..='~' => char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap(),
                ' ' => '\u{3000}',
                other => other,
            })
            .collect();
        let swapped = |with: &str| copied.replace(' ', with);
        let disguised = [
            (
                "a zero-width space in place of every space",
                swapped("\u{200B}"),
            ),
            ("a soft hyphen in place of every space", swapped("\u{00AD}")),
            ("no space at all", swapped("")),
            ("punctuation in place of spaces", swapped(", ")),
            ("zero-width space", interleave('\u{200B}')),
            ("zero-width joiner", interleave('\u{200D}')),
            ("soft hyphen", interleave('\u{00AD}')),
            ("word joiner", interleave('\u{2060}')),
            ("byte order mark", interleave('\u{FEFF}')),
            ("fullwidth letters", fullwidth),
        ];
        for (how, text) in disguised {
            assert!(
                protected.copied_in(&text),
                "missed a copy disguised by {how}"
            );
            let fence = Fence::new();
            assert_eq!(
                leak_kind(&text, &fence, &protected),
                Some("prompt_text"),
                "{how}"
            );
        }
        // A section marker in fullwidth letters is still a marker.
        let marker: String = "SERVER NOTICES"
            .chars()
            .map(|c| match c {
                'A'..='Z' => char::from_u32(c as u32 - 0x41 + 0xFF21).unwrap(),
                other => other,
            })
            .collect();
        assert_eq!(
            leak_kind(&format!("ok {marker}"), &Fence::new(), &protected),
            Some("section_marker")
        );
        // Ordinary replies with accents, emoji and non-Latin script are no leak.
        for fine in [
            "¡Hola! Tenemos café ☕ y té.",
            "陶芸教室は金曜日に窯を焚きます。",
            "Ça va 👍🏽",
        ] {
            assert_eq!(leak_kind(fine, &Fence::new(), &protected), None, "{fine}");
        }
    }
}
