//! THE redaction list (C5): the shapes of personal identifiers that never reach a log line, and
//! that 024 removes from note text before a note is written. One list, so a change to one is a
//! change to both.
//!
//! Shapes removed, each replaced by `[removed]`:
//! - URLs (`http://`, `https://`, `www.`): links carry tokens, media of the contact, tracking ids;
//! - email addresses;
//! - phone numbers: an optional `+`, then at least 7 digits in groups separated by spaces, dashes,
//!   dots or parentheses;
//! - long digit runs (6 digits or more): account, order and subscriber numbers;
//! - the contact's media on ManyChat's file host (020), also without its scheme or host:
//!   `<digits>/wa/<yyyy>/<mm>/<dd>/original_<hex>.<ext>`, or the file name `original_<hex>.<ext>`
//!   alone (whoever holds the URL can fetch the contact's voice note or photo).
//!
//! Invariant: hyphenated UUIDs (conversation ids, the only contact identifier a log line may carry)
//! and RFC 3339 timestamps (every JSON log line starts with one) are protected: they are masked
//! before matching, so their digits never look like a phone number, and text next to them is still
//! matched on its own. A URL that contains a UUID is still removed whole. Short numbers such as
//! `latency_ms=1234` survive; callers should log quantities in units that stay under 6 digits.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

/// What every removed shape is replaced with.
pub const REPLACEMENT: &str = "[removed]";

const URL: &str = r#"(?i)\b(?:https?://|www\.)[^\s"'<>\\]+"#;
const EMAIL: &str = r"(?i)[a-z0-9._%+\-]+@[a-z0-9\-]+(?:\.[a-z0-9\-]+)*\.[a-z]{2,}";
/// At least 7 digits; between two digits, up to 3 separator characters (space, tab, dash, dot,
/// parentheses), which covers `+1 (555) 010-4477`, `555.010.4477` and `0800 12 34 56`.
const PHONE: &str = r"(?:\+[ \t]*)?\(?\d(?:[ \t\-.()]{0,3}\d){6,}";
const LONG_DIGITS: &str = r"\d{6,}";
/// ManyChat's media file (020): the path from the account id on, with any host before it, or the
/// file name alone.
const MEDIA_FILE: &str = r"(?i)(?:[a-z0-9\-.]+/)?\d+/wa/\d{4}/\d{2}/\d{2}/original_[0-9a-f]+\.[a-z0-9]+|\boriginal_[0-9a-f]{4,}\.[a-z0-9]+";

const UUID: &str = r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b";
const TIMESTAMP: &str =
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?";

static PATTERNS: LazyLock<Vec<Regex>> =
    LazyLock::new(|| compile(&[URL, EMAIL, PHONE, LONG_DIGITS, MEDIA_FILE]));
static PROTECTED: LazyLock<Vec<Regex>> = LazyLock::new(|| compile(&[UUID, TIMESTAMP]));

fn compile(sources: &[&str]) -> Vec<Regex> {
    sources
        .iter()
        // The sources are constants covered by the tests below; a typo fails every test at once.
        .map(|source| Regex::new(source).expect("redaction pattern compiles"))
        .collect()
}

/// The redaction patterns, compiled once: URL, email, phone number, long digit run, media file.
pub fn patterns() -> &'static [Regex] {
    &PATTERNS
}

/// Replaces every URL, email, phone-number, long-number and media-file shape in `text` with
/// `[removed]`.
/// Borrows when nothing matched.
pub fn redact(text: &str) -> Cow<'_, str> {
    let masked = mask_protected(text);
    let haystack = masked.as_deref().unwrap_or(text);

    let mut spans: Vec<Range<usize>> = patterns()
        .iter()
        .flat_map(|re| re.find_iter(haystack).map(|m| m.range()))
        .collect();
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    spans.sort_by_key(|s| (s.start, s.end));

    let mut out = String::with_capacity(text.len());
    let mut cursor = 0;
    let mut current: Option<Range<usize>> = None;
    for span in spans {
        match current.as_mut() {
            Some(open) if span.start <= open.end => open.end = open.end.max(span.end),
            _ => {
                if let Some(done) = current.take() {
                    out.push_str(&text[cursor..done.start]);
                    out.push_str(REPLACEMENT);
                    cursor = done.end;
                }
                current = Some(span);
            }
        }
    }
    if let Some(done) = current {
        out.push_str(&text[cursor..done.start]);
        out.push_str(REPLACEMENT);
        cursor = done.end;
    }
    out.push_str(&text[cursor..]);
    Cow::Owned(out)
}

/// A copy of `text` with every protected span overwritten by `_` (same byte length, so offsets
/// map back to `text`; the spans are ASCII, so char boundaries are kept), or `None` if there is
/// nothing to protect.
fn mask_protected(text: &str) -> Option<String> {
    let mut masked: Option<Vec<u8>> = None;
    for re in PROTECTED.iter() {
        for m in re.find_iter(text) {
            let bytes = masked.get_or_insert_with(|| text.as_bytes().to_vec());
            bytes[m.range()].fill(b'_');
        }
    }
    // Only ASCII bytes inside ASCII spans were replaced, so the bytes are still UTF-8.
    masked.map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c5_identifier_shapes_are_removed() {
        let table = [
            ("see https://example.test/a?b=1 now", "see [removed] now"),
            ("plain http://example.test", "plain [removed]"),
            ("visit www.example.test/page.", "visit [removed]"),
            (
                "mail jane.roe+x@example.test please",
                "mail [removed] please",
            ),
            ("call +1 (555) 010-4477 today", "call [removed] today"),
            ("call 555.010.4477", "call [removed]"),
            ("call 0800 12 34 56", "call [removed]"),
            ("whatsapp +44 7700 900123", "whatsapp [removed]"),
            ("order 123456 shipped", "order [removed] shipped"),
            ("card 4111111111111111", "card [removed]"),
            (
                r#"{"text":"write to a.b@example.test or 555-010-4477"}"#,
                r#"{"text":"write to [removed] or [removed]"}"#,
            ),
        ];
        for (input, expected) in table {
            assert_eq!(redact(input), expected, "input: {input}");
        }
    }

    #[test]
    fn c5_harmless_text_is_kept_and_borrowed() {
        let table = [
            "latency_ms=1234 steps=3",
            "turn outcome answered_inline",
            "price is 12345 minor units",
            "room 12-34",
            "",
        ];
        for input in table {
            let out = redact(input);
            assert!(matches!(out, Cow::Borrowed(_)), "input: {input}");
            assert_eq!(out, input);
        }
    }

    #[test]
    fn c5_uuids_and_timestamps_survive() {
        let table = [
            "conversation_id=0d2f4e6a-1b3c-4d5e-8f70-123456789012",
            "conversation_id=12345678-1234-4234-8234-123456789012",
            "DEADBEEF-0000-4000-8000-000000000000 done",
            r#"{"timestamp":"2026-11-30T01:48:04.123456Z","level":"INFO"}"#,
            "at 2026-11-30 01:48:04+01:00",
        ];
        for input in table {
            assert_eq!(redact(input), input);
        }
    }

    #[test]
    fn c5_a_phone_next_to_a_uuid_is_still_removed() {
        let input = "0d2f4e6a-1b3c-4d5e-8f70-123456789012 5550104477";
        assert_eq!(
            redact(input),
            "0d2f4e6a-1b3c-4d5e-8f70-123456789012 [removed]"
        );
    }

    #[test]
    fn c5_a_url_carrying_a_uuid_is_removed_whole() {
        let input = "at https://example.test/c/0d2f4e6a-1b3c-4d5e-8f70-123456789012 end";
        assert_eq!(redact(input), "at [removed] end");
    }

    #[test]
    fn c5_non_ascii_text_around_matches_is_kept() {
        let input = "Olá, meu número é +55 11 91234-5678 — obrigado ☺";
        assert_eq!(redact(input), "Olá, meu número é [removed] — obrigado ☺");
    }

    #[test]
    fn spec_020_verification_9_the_media_url_shape_is_redacted_with_or_without_its_host() {
        let url = "https://manybot-files.s3.eu-central-1.amazonaws.com/1234567/wa/2026/11/30/original_0a1b2c3d4e5f.ogg";
        assert_eq!(redact(url), REPLACEMENT);
        let without_scheme = &url["https://".len()..];
        assert_eq!(
            redact(&format!("fetching {without_scheme} now")),
            "fetching [removed] now"
        );
        assert_eq!(
            redact("path=42/wa/2026/01/02/original_ab12.jpg"),
            "path=[removed]"
        );
        assert_eq!(
            redact("file original_0a1b2c3d.mp4 failed"),
            "file [removed] failed"
        );
        // Ordinary words are kept.
        assert_eq!(redact("the original plan"), "the original plan");
    }

    #[test]
    fn c5_patterns_list_holds_the_five_shapes() {
        let list = patterns();
        assert_eq!(list.len(), 5);
        assert!(list[0].is_match("https://example.test"));
        assert!(list[1].is_match("a@example.test"));
        assert!(list[2].is_match("+1 555 010 4477"));
        assert!(list[3].is_match("123456"));
        assert!(!list[3].is_match("12345"));
        assert!(list[4].is_match("original_0a1b2c.ogg"));
    }
}
