//! Note text (024 § Note text is cleaned before it is written): the only free text this service
//! writes to a contact's record.
//!
//! Invariants: a [`NoteText`] exists only through [`NoteText::clean`], so every value of the
//! type has no control characters, no run of whitespace, no URL, email, phone-number or
//! long-number shape (the one list in [`crate::observability::redact`], each replaced by
//! `[removed]`), is at most its note's `maxLength` characters, and is not empty. Deserializing
//! (an outbox row) cleans again, bounded by [`MAX_NOTE_LENGTH`]. `Debug` prints the length only:
//! the text is the contact's words (C5).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::MAX_NOTE_LENGTH;
use crate::observability::redact::redact;

/// Cleaned, bounded, non-empty note text.
#[derive(Clone, PartialEq, Eq)]
pub struct NoteText(String);

impl NoteText {
    /// Cleans `raw` for a note of `max_length` characters: control characters are dropped,
    /// whitespace runs become one space, identifier shapes become `[removed]`, and the result is
    /// cut at a word boundary. `None` when nothing is left.
    ///
    /// Whitespace is collapsed before the shapes are matched as well as after, so a control
    /// character or a line break cannot split a phone number into pieces that escape the list.
    pub fn clean(raw: &str, max_length: usize) -> Option<Self> {
        let normalized = collapse(raw);
        let redacted = redact(&normalized);
        let collapsed = collapse(&redacted);
        let cut = cut_at_word(&collapsed, max_length);
        (!cut.is_empty()).then(|| Self(cut.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The length recorded on the turn, in characters.
    pub fn chars(&self) -> usize {
        self.0.chars().count()
    }
}

impl fmt::Debug for NoteText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NoteText({} chars)", self.chars())
    }
}

impl Serialize for NoteText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for NoteText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::clean(&raw, MAX_NOTE_LENGTH as usize)
            .ok_or_else(|| serde::de::Error::custom("note text is empty after cleaning"))
    }
}

/// Drops control characters and turns every whitespace run into one space, trimmed.
fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            space = true;
        } else if c.is_control() || is_invisible_format(c) {
            // Dropped without a space: a control character is not a word break.
        } else {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    out
}

/// Zero-width and direction-override characters: invisible in a CRM, and a way to split a shape.
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}'
    )
}

/// The longest prefix of `text` of at most `max` characters that ends at a word boundary; a
/// single word longer than `max` is cut inside it.
fn cut_at_word(text: &str, max: usize) -> &str {
    let Some((end, next)) = text.char_indices().nth(max) else {
        return text;
    };
    let prefix = &text[..end];
    if next == ' ' {
        return prefix.trim_end();
    }
    match prefix.rfind(' ') {
        Some(space) => prefix[..space].trim_end(),
        None => prefix,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_024_verification_6_note_cleaning_removes_identifier_shapes() {
        let raw = "Wants a mug set for her mother; call +44 7700 900123 or mail \
                   rosalind.vantreck@example.test, photos at https://pics.example.test/r/42 \
                   order 88120045";
        let note = NoteText::clean(raw, 500).unwrap();
        assert_eq!(
            note.as_str(),
            "Wants a mug set for her mother; call [removed] or mail [removed], photos at \
             [removed] order [removed]"
        );
        for gone in ["7700", "900123", "rosalind", "example.test", "88120045"] {
            assert!(!note.as_str().contains(gone), "{gone} survived");
        }
    }

    #[test]
    fn spec_024_verification_6_note_cleaning_collapses_whitespace_and_strips_control_chars() {
        let note = NoteText::clean("  first\n\n line\t\tsecond\u{7}bell \u{200B}end  ", 500);
        assert_eq!(note.unwrap().as_str(), "first line secondbell end");
        // A control character cannot split a phone number out of the list's reach.
        let split = NoteText::clean("number 555\u{0}\u{0}0104\n477", 500).unwrap();
        assert_eq!(split.as_str(), "number [removed]");
    }

    #[test]
    fn spec_024_verification_6_note_over_max_length_is_cut_at_a_word_boundary() {
        let note = NoteText::clean("Wants evening classes because of work shifts", 22).unwrap();
        assert_eq!(note.as_str(), "Wants evening classes");
        assert!(note.chars() <= 22);
        // A cut that lands exactly on a space keeps the whole last word.
        assert_eq!(
            NoteText::clean("Wants evening classes now", 21)
                .unwrap()
                .as_str(),
            "Wants evening classes"
        );
        // One long word is cut inside it rather than dropped.
        assert_eq!(
            NoteText::clean("Supercalifragilistic", 5).unwrap().as_str(),
            "Super"
        );
        // Characters, not bytes.
        let accented = NoteText::clean("Olá ção ñandú", 8).unwrap();
        assert_eq!(accented.as_str(), "Olá ção");
        assert_eq!(accented.chars(), 7);
    }

    #[test]
    fn spec_024_verification_6_note_empty_after_cleaning_is_refused() {
        assert!(NoteText::clean("", 100).is_none());
        assert!(NoteText::clean(" \n\t\u{1} ", 100).is_none());
        assert!(NoteText::clean("anything", 0).is_none());
    }

    #[test]
    fn c5_note_text_debug_and_deserialize() {
        let note = NoteText::clean("wants a teapot", 100).unwrap();
        assert_eq!(format!("{note:?}"), "NoteText(14 chars)");
        let json = serde_json::to_string(&note).unwrap();
        assert_eq!(json, "\"wants a teapot\"");
        let back: NoteText = serde_json::from_str(&json).unwrap();
        assert_eq!(back, note);
        // An outbox row is cleaned again on the way in.
        let dirty: NoteText = serde_json::from_str("\"ring 5550104477\"").unwrap();
        assert_eq!(dirty.as_str(), "ring [removed]");
        assert!(serde_json::from_str::<NoteText>("\"  \"").is_err());
    }
}
