//! The inbound message body (SYSTEM 3.2): strict parsing of what ManyChat's Dynamic Block sends.
//!
//! Owns `InboundMessage` and `InboundError`.
//!
//! Invariants:
//! - Strict: an unknown key, or a key given twice, is an error naming the key to the caller
//!   (shown only when it is a plain identifier); the log says only that a key was unknown, never
//!   which ([`InboundError::logged_field`]), since the sender chose its name.
//! - A lone UTF-16 surrogate escape (`"\ud83d"`, a message cut mid-emoji) becomes U+FFFD, so the
//!   contact is answered rather than refused.
//! - Errors name the field and the rule, never the value: `text: must be a string of at most
//!   4096 characters`.
//! - Names (`first_name`, `last_name`) and `locale` are accepted and dropped here; only `channel`
//!   is kept. Nothing in this type is ever logged except lengths.
//! - The contact id may come as `subscriber_id` or `user_id` (ManyChat's documented callback
//!   variable); the first that is a valid id wins. A value still reading `{{…}}` is a ManyChat
//!   variable that was not substituted: a wiring problem ([`InboundError::NotSubstituted`],
//!   answered by the caller, not refused), never a malformed request. An unsubstituted
//!   `ai_token` is read as no token and flagged ([`InboundMessage::token_not_substituted`]).

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};
use serde_json::Value;

use crate::ids::{SubscriberId, SubscriberIdError};

/// Largest accepted body (SYSTEM 3.2); the router answers 413 above it.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Characters (not bytes) allowed in `text`.
pub const MAX_TEXT_CHARS: usize = 4096;
/// Characters allowed in `ai_token`.
pub const MAX_TOKEN_CHARS: usize = 256;
/// Characters allowed in `offering` / `course`.
pub const MAX_OFFERING_CHARS: usize = 256;

const KNOWN_KEYS: [&str; 10] = [
    "subscriber_id",
    "user_id",
    "text",
    "ai_token",
    "first_name",
    "last_name",
    "locale",
    "channel",
    "offering",
    "course",
];

/// One parsed inbound message.
#[derive(Clone, PartialEq, Eq)]
pub struct InboundMessage {
    pub subscriber_id: SubscriberId,
    /// The contact's message, as sent (media arrives as a URL).
    pub text: String,
    /// The contact token (019); `None` when absent or empty.
    pub ai_token: Option<String>,
    /// ManyChat's channel name, when sent and non-empty.
    pub channel: Option<String>,
    /// The offering the flow named (028): `offering`, else legacy `course`; absent when empty or
    /// an unrendered `{{…}}`. Whether it names a catalog offering is the caller's check.
    pub offering: Option<String>,
    /// `ai_token` arrived as a literal `{{…}}`: ManyChat did not substitute the token field's
    /// variable (`ai_token` is then `None`). A wiring problem to report, not a wrong token.
    pub token_not_substituted: bool,
    /// 020: the media `text` named, once [`InboundMessage::detect_media`] found it (`text` then
    /// holds the kind's marker, never the URL).
    pub media: Option<crate::media::MediaRef>,
}

/// The body holds contact text and a token: `Debug` prints only sizes and presence.
impl std::fmt::Debug for InboundMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboundMessage")
            .field("subscriber_id", &self.subscriber_id)
            .field("text_chars", &self.text.chars().count())
            .field("ai_token", &self.ai_token.as_ref().map(|_| "[present]"))
            .field("channel", &self.channel)
            .field("offering", &self.offering.is_some())
            .field("token_not_substituted", &self.token_not_substituted)
            .field("media", &self.media.as_ref().map(|m| m.kind))
            .finish()
    }
}

/// Why a body was refused (a 400). Display names the field and the rule, never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InboundError {
    #[error("body: must be UTF-8")]
    NotUtf8,
    #[error("body: malformed JSON at line {line}, column {column}")]
    Malformed { line: usize, column: usize },
    #[error("body: must be a JSON object")]
    NotObject,
    #[error("{}: unknown key", shown(.0))]
    UnknownKey(String),
    #[error("{}: given more than once", shown(.0))]
    DuplicateKey(String),
    #[error("{field}: {rule}")]
    Invalid {
        field: &'static str,
        rule: &'static str,
    },
    /// No valid contact id, and at least one id key held a literal `{{…}}`: ManyChat did not
    /// substitute the variable. `field` is the first such key.
    #[error(
        "{field}: the ManyChat variable was not substituted (it arrived as a literal {{{{…}}}})"
    )]
    NotSubstituted { field: &'static str },
}

impl InboundError {
    /// The field the error is about, when it is about one.
    pub fn field(&self) -> Option<&str> {
        match self {
            InboundError::UnknownKey(key) | InboundError::DuplicateKey(key) => Some(shown(key)),
            InboundError::Invalid { field, .. } | InboundError::NotSubstituted { field } => {
                Some(field)
            }
            InboundError::NotUtf8 | InboundError::Malformed { .. } | InboundError::NotObject => {
                None
            }
        }
    }
}

impl InboundError {
    /// The field to name in a log line: a known field's name, `(unknown key)` for a key we do
    /// not know (its name is the sender's text), `body` otherwise.
    pub fn logged_field(&self) -> &str {
        match self {
            InboundError::UnknownKey(_) => "(unknown key)",
            // Keys are checked against the known ones first, so a repeated key is a known one.
            InboundError::DuplicateKey(key) => shown(key),
            InboundError::Invalid { field, .. } | InboundError::NotSubstituted { field } => field,
            InboundError::NotUtf8 | InboundError::Malformed { .. } | InboundError::NotObject => {
                "body"
            }
        }
    }
}

/// A key is repeated in an error only when it is a short plain identifier.
fn shown(key: &str) -> &str {
    let plain = !key.is_empty()
        && key.len() <= 64
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if plain { key } else { "(unprintable key)" }
}

const SUBSCRIBER_RULE: &str = "required, a string or number: a whole number from 1 to \
     9223372036854775807 (ManyChat's ids), without leading zeros";
const TEXT_RULE: &str = "must be a string of at most 4096 characters";
const TOKEN_RULE: &str = "must be a string of at most 256 characters";
const NULLABLE_STRING_RULE: &str = "must be a string or null";
const OFFERING_RULE: &str = "must be a string of at most 256 characters";

impl InboundMessage {
    /// Parses and validates a body (SYSTEM 3.2).
    pub fn parse(body: &[u8]) -> Result<Self, InboundError> {
        let entries = strict_object(body, &KNOWN_KEYS)?;
        let get = |name: &str| entries.iter().find(|(key, _)| key == name).map(|(_, v)| v);

        // A wiring problem is reported only for an otherwise valid body: a malformed one is
        // still a 400 naming its field.
        let subscriber_id = contact_id(get("subscriber_id"), get("user_id"));
        if let Err(e @ InboundError::Invalid { .. }) = &subscriber_id {
            return Err(e.clone());
        }
        let text = match get("text") {
            Some(Value::String(s)) if s.chars().count() <= MAX_TEXT_CHARS => s.clone(),
            _ => return Err(invalid("text", TEXT_RULE)),
        };
        let mut token_not_substituted = false;
        let ai_token = match get("ai_token") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if is_unsubstituted(s) => {
                token_not_substituted = true;
                None
            }
            Some(Value::String(s)) if s.chars().count() <= MAX_TOKEN_CHARS => {
                Some(s.clone()).filter(|s| !s.is_empty())
            }
            Some(_) => return Err(invalid("ai_token", TOKEN_RULE)),
        };
        for name in ["first_name", "last_name", "locale"] {
            nullable_string(name, get(name))?;
        }
        let channel = nullable_string("channel", get("channel"))?
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty());
        let offering = offering("offering", get("offering"))?;
        let course = offering_from_course(get("course"))?;

        Ok(Self {
            subscriber_id: subscriber_id?,
            text,
            ai_token,
            channel,
            offering: offering.or(course),
            token_not_substituted,
            media: None,
        })
    }

    /// 020: ManyChat sends a contact's voice note, image or video as its file's URL in `text`.
    /// When `text` is one (on `host`), the URL moves to `media` and `text` becomes the kind's
    /// marker, so nothing downstream (the record, a log, a shed turn) ever holds the URL. A near
    /// miss stays text and is logged as `media_url_unmatched`, without the URL.
    pub fn detect_media(&mut self, host: &crate::media::MediaHost) {
        use crate::media::Detected;
        match crate::media::detect(&self.text, host) {
            Detected::Text => {}
            Detected::NearMiss => tracing::info!("media_url_unmatched"),
            Detected::Media(media) => {
                self.text = media.kind.marker().to_owned();
                self.media = Some(media);
            }
        }
    }
}

/// Every route's body parser: UTF-8 (a lone surrogate escape replaced), one JSON object whose
/// keys are all in `known` and none given twice (a map would keep only the last of a repeated
/// key, so `{"subscriber_id":"1","subscriber_id":"77001"}` could name another contact than the
/// one a reader of the body sees). Its entries in document order.
pub(super) fn strict_object(
    body: &[u8],
    known: &[&str],
) -> Result<Vec<(String, Value)>, InboundError> {
    let text = std::str::from_utf8(body).map_err(|_| InboundError::NotUtf8)?;
    let text = replace_lone_surrogates(text);
    let text = text.as_ref();
    // One pass keeps every key in order, so a repeated key is seen. Only a body that is not an
    // object is parsed again, to tell a syntax error (with its position) from valid JSON of the
    // wrong shape.
    let malformed = |e: serde_json::Error| InboundError::Malformed {
        line: e.line(),
        column: e.column(),
    };
    let entries = match serde_json::from_str::<Entries>(text) {
        Ok(Entries(entries)) => entries,
        Err(e) if e.classify() == serde_json::error::Category::Data => {
            return Err(match serde_json::from_str::<Value>(text) {
                Ok(_) => InboundError::NotObject,
                Err(e) => malformed(e),
            });
        }
        Err(e) => return Err(malformed(e)),
    };
    let mut seen: Vec<&str> = Vec::with_capacity(entries.len());
    for (key, _) in &entries {
        if !known.contains(&key.as_str()) {
            return Err(InboundError::UnknownKey(key.clone()));
        }
        if seen.contains(&key.as_str()) {
            return Err(InboundError::DuplicateKey(key.clone()));
        }
        seen.push(key);
    }
    Ok(entries)
}

/// The contact id of a body with one id field (`field`), under the message route's rule.
pub(super) fn one_contact_id(
    field: &'static str,
    value: Option<&Value>,
) -> Result<SubscriberId, InboundError> {
    let Some(value) = value else {
        return Err(invalid(field, SUBSCRIBER_RULE));
    };
    match valid_id(value) {
        Ok(id) => Ok(id),
        Err(_) if value.as_str().is_some_and(is_unsubstituted) => {
            Err(InboundError::NotSubstituted { field })
        }
        Err(_) => Err(invalid(field, SUBSCRIBER_RULE)),
    }
}

fn invalid(field: &'static str, rule: &'static str) -> InboundError {
    InboundError::Invalid { field, rule }
}

/// A value ManyChat left as its variable, `{{…}}`, instead of substituting it.
pub fn is_unsubstituted(value: &str) -> bool {
    let value = value.trim();
    value.len() >= 4 && value.starts_with("{{") && value.ends_with("}}")
}

/// The contact id: the first of `subscriber_id` / `user_id` that is a valid id. With none, a
/// literal `{{…}}` in either is [`InboundError::NotSubstituted`]; otherwise the first key given
/// (`subscriber_id` when neither is) is invalid.
///
/// One contact, one id: a padded id (`"088001"`, which ManyChat reads as the number 88001) is
/// refused naming its key, even when the other key holds a valid id: it would let a request
/// speak as a contact under a second spelling of its id.
fn contact_id(
    subscriber_id: Option<&Value>,
    user_id: Option<&Value>,
) -> Result<SubscriberId, InboundError> {
    let candidates = [("subscriber_id", subscriber_id), ("user_id", user_id)];
    let mut not_substituted = None;
    let mut first_invalid = None;
    let mut found: Option<SubscriberId> = None;
    for (field, value) in candidates {
        let Some(value) = value else { continue };
        match valid_id(value) {
            Ok(id) => {
                found.get_or_insert(id);
            }
            // A padded id or one outside ManyChat's range names no contact there: only a
            // forged request carries one, so another field's valid id does not save it.
            Err(
                SubscriberIdError::LeadingZero
                | SubscriberIdError::OutOfRange
                | SubscriberIdError::TooLong,
            ) => return Err(invalid(field, SUBSCRIBER_RULE)),
            Err(_) if value.as_str().is_some_and(is_unsubstituted) => {
                not_substituted.get_or_insert(field);
            }
            Err(_) => {
                first_invalid.get_or_insert(field);
            }
        }
    }
    if let Some(id) = found {
        return Ok(id);
    }
    if let Some(field) = not_substituted {
        return Err(InboundError::NotSubstituted { field });
    }
    Err(invalid(
        first_invalid.unwrap_or("subscriber_id"),
        SUBSCRIBER_RULE,
    ))
}

fn valid_id(value: &Value) -> Result<SubscriberId, SubscriberIdError> {
    match value {
        Value::String(s) => SubscriberId::parse(s),
        Value::Number(n) => n
            .as_u64()
            .ok_or(SubscriberIdError::NotDigits)
            .and_then(|n| SubscriberId::parse(&n.to_string())),
        _ => Err(SubscriberIdError::NotDigits),
    }
}

fn nullable_string<'a>(
    field: &'static str,
    value: Option<&'a Value>,
) -> Result<Option<&'a str>, InboundError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(field, NULLABLE_STRING_RULE)),
    }
}

/// `offering` (or `course`): absent when missing, null, blank or an unrendered `{{…}}`.
fn offering(field: &'static str, value: Option<&Value>) -> Result<Option<String>, InboundError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() <= MAX_OFFERING_CHARS => {
            let s = s.trim();
            if s.is_empty() || s.contains("{{") {
                Ok(None)
            } else {
                Ok(Some(s.to_owned()))
            }
        }
        Some(_) => Err(invalid(field, OFFERING_RULE)),
    }
}

fn offering_from_course(value: Option<&Value>) -> Result<Option<String>, InboundError> {
    offering("course", value)
}

/// Rewrites every `\uXXXX` escape of a lone UTF-16 surrogate (a high one not followed by a low
/// one, or a low one alone) as `\ufffd`, which serde_json would otherwise refuse. The rewrite
/// keeps the length, so a later syntax error still reports its true line and column. Bodies
/// without a surrogate escape are returned as they are.
fn replace_lone_surrogates(json: &str) -> std::borrow::Cow<'_, str> {
    let bytes = json.as_bytes();
    let maybe = bytes
        .windows(3)
        .any(|w| w[0] == b'\\' && w[1] == b'u' && w[2].eq_ignore_ascii_case(&b'd'));
    if !maybe {
        return std::borrow::Cow::Borrowed(json);
    }
    let surrogate = |at: usize| -> Option<u16> {
        let hex = bytes.get(at..at + 4)?;
        let code = u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
        (0xD800..=0xDFFF).contains(&code).then_some(code)
    };
    let escape_at = |at: usize| bytes.get(at) == Some(&b'\\') && bytes.get(at + 1) == Some(&b'u');
    let mut out = bytes.to_vec();
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                in_string = !in_string;
                i += 1;
            }
            b'\\' if in_string => {
                if bytes.get(i + 1) != Some(&b'u') {
                    // `\"`, `\\` and the like: skip the escaped character with it.
                    i += 2;
                    continue;
                }
                match surrogate(i + 2) {
                    Some(0xD800..=0xDBFF)
                        if escape_at(i + 6)
                            && surrogate(i + 8).is_some_and(|low| low >= 0xDC00) =>
                    {
                        i += 12;
                    }
                    Some(_) => {
                        out[i..i + 6].copy_from_slice(b"\\ufffd");
                        i += 6;
                    }
                    None => i += 2,
                }
            }
            _ => i += 1,
        }
    }
    // ASCII replaced ASCII, so the bytes are still UTF-8.
    String::from_utf8(out).map_or(std::borrow::Cow::Borrowed(json), std::borrow::Cow::Owned)
}

/// A JSON object's entries in document order, duplicates kept.
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;

        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some((key, value)) = map.next_entry::<String, Value>()? {
                    entries.push((key, value));
                }
                Ok(Entries(entries))
            }
        }

        deserializer.deserialize_map(EntriesVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(body: &str) -> InboundMessage {
        InboundMessage::parse(body.as_bytes()).unwrap_or_else(|e| panic!("{body}: {e}"))
    }

    fn err(body: &[u8]) -> InboundError {
        match InboundMessage::parse(body) {
            Ok(_) => panic!("accepted {}", String::from_utf8_lossy(body)),
            Err(e) => e,
        }
    }

    #[test]
    fn system_3_2_minimal_body_parses() {
        let m = ok(r#"{"subscriber_id":"5550001","text":"How much is it?"}"#);
        assert_eq!(m.subscriber_id.as_str(), "5550001");
        assert_eq!(m.text, "How much is it?");
        assert_eq!(m.ai_token, None);
        assert_eq!(m.channel, None);
        assert_eq!(m.offering, None);
    }

    #[test]
    fn system_3_2_subscriber_id_as_string_or_number() {
        let table = [
            (r#"{"subscriber_id":5550001,"text":"hi"}"#, "5550001"),
            (r#"{"subscriber_id":" 42 ","text":"hi"}"#, "42"),
            (
                r#"{"subscriber_id":9223372036854775807,"text":"hi"}"#,
                "9223372036854775807",
            ),
        ];
        for (body, expected) in table {
            assert_eq!(ok(body).subscriber_id.as_str(), expected, "{body}");
        }
    }

    #[test]
    fn one_contact_one_id_a_padded_or_second_id_is_refused_naming_its_key() {
        let table = [
            (r#"{"subscriber_id":"088001","text":"hi"}"#, "subscriber_id"),
            (
                r#"{"subscriber_id":" 0088001 ","text":"hi"}"#,
                "subscriber_id",
            ),
            (r#"{"user_id":"088001","text":"hi"}"#, "user_id"),
            // A valid other key does not rescue the padded one.
            (
                r#"{"subscriber_id":"088001","user_id":"88001","text":"hi"}"#,
                "subscriber_id",
            ),
            (
                r#"{"subscriber_id":"88001","user_id":"088001","text":"hi"}"#,
                "user_id",
            ),
        ];
        for (body, field) in table {
            let e = err(body.as_bytes());
            assert_eq!(e.field(), Some(field), "{body}");
            assert!(matches!(e, InboundError::Invalid { .. }), "{body}: {e}");
        }
        // The same contact under both keys, and an unsubstituted second key, are one id.
        let both = ok(r#"{"subscriber_id":"88001","user_id":88001,"text":"hi"}"#);
        assert_eq!(both.subscriber_id.as_str(), "88001");
        let literal = ok(r#"{"subscriber_id":"88001","user_id":"{{user_id}}","text":"hi"}"#);
        assert_eq!(literal.subscriber_id.as_str(), "88001");
    }

    #[test]
    fn system_3_2_full_body_keeps_only_what_it_needs() {
        let m = ok(r#"{"subscriber_id":"7","text":"hello","ai_token":"tok_abc",
            "first_name":"Jane","last_name":null,"locale":"en_US","channel":"whatsapp",
            "offering":"course_a","course":"course_b"}"#);
        assert_eq!(m.ai_token.as_deref(), Some("tok_abc"));
        assert_eq!(m.channel.as_deref(), Some("whatsapp"));
        assert_eq!(m.offering.as_deref(), Some("course_a"));
        assert!(!format!("{m:?}").contains("Jane"));
        assert!(!format!("{m:?}").contains("tok_abc"));
        assert!(!format!("{m:?}").contains("hello"));
    }

    #[test]
    fn system_3_2_offering_rules() {
        let table = [
            (r#""offering":"course_a""#, Some("course_a")),
            (r#""course":"course_b""#, Some("course_b")),
            (
                r#""offering":"course_a","course":"course_b""#,
                Some("course_a"),
            ),
            (r#""offering":"","course":"course_b""#, Some("course_b")),
            (r#""offering":"{{offering}}""#, None),
            (r#""course":"{{cuf_123}}""#, None),
            (r#""offering":"  ""#, None),
            (r#""offering":null"#, None),
        ];
        for (fields, expected) in table {
            let body = format!(r#"{{"subscriber_id":"7","text":"hi",{fields}}}"#);
            assert_eq!(ok(&body).offering.as_deref(), expected, "{body}");
        }
    }

    #[test]
    fn system_3_2_empty_ai_token_means_none() {
        for token in [r#""""#, "null"] {
            let body = format!(r#"{{"subscriber_id":"7","text":"hi","ai_token":{token}}}"#);
            assert_eq!(ok(&body).ai_token, None, "{body}");
        }
    }

    #[test]
    fn system_3_2_text_length_counts_characters_not_bytes() {
        let at_limit = "é".repeat(MAX_TEXT_CHARS);
        let body = format!(r#"{{"subscriber_id":"7","text":"{at_limit}"}}"#);
        assert_eq!(ok(&body).text.chars().count(), MAX_TEXT_CHARS);
        let over = "a".repeat(MAX_TEXT_CHARS + 1);
        let body = format!(r#"{{"subscriber_id":"7","text":"{over}"}}"#);
        assert_eq!(
            err(body.as_bytes()).to_string(),
            "text: must be a string of at most 4096 characters"
        );
    }

    #[test]
    fn system_3_2_refusals_name_the_field_and_rule() {
        let long_token = "t".repeat(MAX_TOKEN_CHARS + 1);
        let long_offering = "o".repeat(MAX_OFFERING_CHARS + 1);
        let table: Vec<(String, Option<&str>, &str)> = vec![
            (
                r#"{"subscriber_id":"7","text":"hi","extra":1}"#.into(),
                Some("extra"),
                "extra: unknown key",
            ),
            (
                r#"{"subscriber_id":"7","text":"hi","text":"again"}"#.into(),
                Some("text"),
                "text: given more than once",
            ),
            (
                r#"{"subscriber_id":"7","text":"hi","jane@example.test":1}"#.into(),
                Some("(unprintable key)"),
                "(unprintable key): unknown key",
            ),
            (
                r#"{"text":"hi"}"#.into(),
                Some("subscriber_id"),
                "subscriber_id: required, a string or number: a whole number from 1 to 9223372036854775807 (ManyChat's ids), without leading zeros",
            ),
            (
                r#"{"subscriber_id":"{{contact.id}}","text":"hi"}"#.into(),
                Some("subscriber_id"),
                "subscriber_id: the ManyChat variable was not substituted (it arrived as a literal {{…}})",
            ),
            (
                r#"{"user_id":"abc","text":"hi"}"#.into(),
                Some("user_id"),
                "user_id: required, a string or number: a whole number from 1 to 9223372036854775807 (ManyChat's ids), without leading zeros",
            ),
            (
                r#"{"subscriber_id":"{{contact.id}}","user_id":"{{user_id}}"}"#.into(),
                Some("text"),
                "text: must be a string of at most 4096 characters",
            ),
            (
                r#"{"subscriber_id":-7,"text":"hi"}"#.into(),
                Some("subscriber_id"),
                "",
            ),
            (
                r#"{"subscriber_id":7.5,"text":"hi"}"#.into(),
                Some("subscriber_id"),
                "",
            ),
            (
                r#"{"subscriber_id":null,"text":"hi"}"#.into(),
                Some("subscriber_id"),
                "",
            ),
            (
                r#"{"subscriber_id":true,"text":"hi"}"#.into(),
                Some("subscriber_id"),
                "",
            ),
            (r#"{"subscriber_id":"7"}"#.into(), Some("text"), ""),
            (
                r#"{"subscriber_id":"7","text":null}"#.into(),
                Some("text"),
                "",
            ),
            (r#"{"subscriber_id":"7","text":5}"#.into(), Some("text"), ""),
            (
                r#"{"subscriber_id":"7","text":"hi","ai_token":5}"#.into(),
                Some("ai_token"),
                "ai_token: must be a string of at most 256 characters",
            ),
            (
                format!(r#"{{"subscriber_id":"7","text":"hi","ai_token":"{long_token}"}}"#),
                Some("ai_token"),
                "",
            ),
            (
                r#"{"subscriber_id":"7","text":"hi","first_name":3}"#.into(),
                Some("first_name"),
                "first_name: must be a string or null",
            ),
            (
                r#"{"subscriber_id":"7","text":"hi","channel":[]}"#.into(),
                Some("channel"),
                "",
            ),
            (
                format!(r#"{{"subscriber_id":"7","text":"hi","offering":"{long_offering}"}}"#),
                Some("offering"),
                "offering: must be a string of at most 256 characters",
            ),
            (
                r#"{"subscriber_id":"7","text":"hi","course":{}}"#.into(),
                Some("course"),
                "",
            ),
            (
                r#"[{"subscriber_id":"7","text":"hi"}]"#.into(),
                None,
                "body: must be a JSON object",
            ),
            (
                r#""just a string""#.into(),
                None,
                "body: must be a JSON object",
            ),
            // Not an object and not JSON either: the syntax error, with its position, is the
            // more useful answer.
            (
                "[1,\n 2".into(),
                None,
                "body: malformed JSON at line 2, column 2",
            ),
            (
                "{\n  \"subscriber_id\": \"7\",\n  \"text\": \"hi\"\n  \"x\"".into(),
                None,
                "body: malformed JSON at line 4, column 3",
            ),
            ("".into(), None, ""),
        ];
        for (body, field, display) in table {
            let e = err(body.as_bytes());
            assert_eq!(e.field(), field, "{body}");
            if !display.is_empty() {
                assert_eq!(e.to_string(), display, "{body}");
            }
            assert!(!e.to_string().contains("hi\""), "{body}: {e}");
        }
    }

    #[test]
    fn first_valid_id_of_subscriber_id_and_user_id_wins() {
        let table = [
            (
                r#""subscriber_id":"5550001","user_id":"5550002""#,
                "5550001",
            ),
            (
                r#""subscriber_id":"{{contact.id}}","user_id":"5550002""#,
                "5550002",
            ),
            (
                r#""subscriber_id":"{{contact.id}}","user_id":5550002"#,
                "5550002",
            ),
            (
                r#""subscriber_id":"5550001","user_id":"{{user_id}}""#,
                "5550001",
            ),
            (r#""user_id":"5550002""#, "5550002"),
            (r#""subscriber_id":null,"user_id":"5550002""#, "5550002"),
        ];
        for (ids, expected) in table {
            let body = format!(r#"{{{ids},"text":"hi"}}"#);
            assert_eq!(ok(&body).subscriber_id.as_str(), expected, "{body}");
        }
    }

    #[test]
    fn literal_variables_are_not_substituted_not_malformed() {
        for ids in [
            r#""subscriber_id":"{{contact.id}}","user_id":"{{user_id}}""#,
            r#""subscriber_id":" {{contact.id}} ""#,
            r#""user_id":"{{user_id}}""#,
            r#""subscriber_id":"","user_id":"{{user_id}}""#,
        ] {
            let body = format!(r#"{{{ids},"text":"hi"}}"#);
            assert!(
                matches!(err(body.as_bytes()), InboundError::NotSubstituted { .. }),
                "{body}"
            );
        }
        let m = ok(r#"{"subscriber_id":"7","text":"hi","ai_token":"{{ai_token}}"}"#);
        assert_eq!(m.ai_token, None);
        assert!(m.token_not_substituted);
        let m = ok(r#"{"subscriber_id":"7","text":"hi","ai_token":"tok_abc"}"#);
        assert!(!m.token_not_substituted);
    }

    #[test]
    fn system_3_2_non_utf8_body_is_refused() {
        let e = err(b"{\"subscriber_id\":\"7\",\"text\":\"\xff\"}");
        assert_eq!(e, InboundError::NotUtf8);
        assert_eq!(e.to_string(), "body: must be UTF-8");
    }

    #[test]
    fn a_lone_surrogate_in_text_becomes_the_replacement_character() {
        let table = [
            (r#"I love it \ud83d"#, "I love it \u{FFFD}"),
            (r#"\ud83d\ude00 pair kept"#, "\u{1F600} pair kept"),
            (r#"low alone \uDE00!"#, "low alone \u{FFFD}!"),
            (
                r#"two highs \ud83d\ud83d\ude00"#,
                "two highs \u{FFFD}\u{1F600}",
            ),
            (r#"high then text \ud83dabc"#, "high then text \u{FFFD}abc"),
            // An escaped backslash before `ud83d` is text, not an escape.
            (r#"path \\ud83d"#, r"path \ud83d"),
            (r#"quote \" then \ud83d"#, "quote \" then \u{FFFD}"),
        ];
        for (escaped, expected) in table {
            let body = format!(r#"{{"subscriber_id":"7","text":"{escaped}"}}"#);
            assert_eq!(ok(&body).text, expected, "{body}");
        }
        // The strict rules still hold around it.
        let e = err(br#"{"subscriber_id":"7","text":"\ud83d","extra\ud83d":1}"#);
        assert!(matches!(e, InboundError::UnknownKey(_)), "{e}");
        // A syntax error after it is reported where it is, as if the escape had been whole.
        let cut = err(b"{\"subscriber_id\":\"7\",\n\"text\":\"\\ud83d\" x}");
        let whole = err(b"{\"subscriber_id\":\"7\",\n\"text\":\"\\ufffd\" x}");
        assert_eq!(cut, whole);
        assert!(
            matches!(cut, InboundError::Malformed { line: 2, .. }),
            "{cut}"
        );
    }

    #[test]
    fn an_unknown_key_is_logged_without_its_name() {
        let e = err(br#"{"subscriber_id":"7","text":"hi","favourite_colour":1}"#);
        assert_eq!(e.field(), Some("favourite_colour"), "the caller is told");
        assert_eq!(e.logged_field(), "(unknown key)");
        let e = err(br#"{"subscriber_id":"7","text":"hi","text":"again"}"#);
        assert_eq!(e.logged_field(), "text");
        let e = err(br#"{"subscriber_id":"7","text":5}"#);
        assert_eq!(e.logged_field(), "text");
        assert_eq!(err(b"[]").logged_field(), "body");
    }

    #[test]
    fn c5_errors_never_quote_values() {
        let body = r#"{"subscriber_id":"7","text":5551234567}"#;
        let e = err(body.as_bytes());
        assert!(!e.to_string().contains("5551234567"));
    }
}
