//! Identifiers that cross module boundaries, as newtypes whose constructor is the only way in.
//!
//! A `SubscriberId` is ManyChat's contact id. It is personal data in the sense of C5 (ids can be
//! enumerated), so its `Debug` and `Display` never print the digits: log lines identify a contact
//! by its conversation UUID instead.

use std::fmt;

/// ManyChat's contact id: a positive whole number that fits a signed 64-bit integer (1 to
/// 9223372036854775807, at most 19 digits) in canonical form (no leading zero), kept as a string
/// (ManyChat accepts both forms; we send it as a JSON number).
///
/// The range is the one ManyChat's API can hold: its `subscriber_id` is an integer, and an id
/// outside a signed 64-bit integer (or zero) names no contact there, so only a forged request
/// carries one (`docs/CONTRACT.md`).
///
/// Canonical because ManyChat reads the digits as a number: `088001` and `88001` are the same
/// contact there, so two spellings here would be two conversations (two histories, two tokens)
/// for one contact. A padded id is refused, never normalised: ManyChat renders its ids without
/// padding, so only a forged request carries one.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubscriberId(String);

/// The digits of `i64::MAX`.
const MAX_DIGITS: usize = 19;

/// The first test contact id: test contacts are the 19-digit ids from here to `i64::MAX`
/// (about 2.2e17 of them), compared as text by the store (`store::TEST_CONTACT_SQL`): equal
/// lengths of digits sort as their numbers.
pub const TEST_CONTACTS_FIRST: &str = "9000000000000000000";

/// Why a value is not a subscriber id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscriberIdError {
    #[error("subscriber_id is empty")]
    Empty,
    #[error("subscriber_id must be digits only")]
    NotDigits,
    #[error("subscriber_id is longer than 19 digits")]
    TooLong,
    #[error("subscriber_id is outside 1 to 9223372036854775807")]
    OutOfRange,
    #[error("subscriber_id must not start with a zero")]
    LeadingZero,
}

impl SubscriberId {
    /// Parses a contact id. Surrounding whitespace is ignored; anything but digits is refused,
    /// which also refuses an unrendered ManyChat variable such as `{{contact.id}}`.
    pub fn parse(raw: &str) -> Result<Self, SubscriberIdError> {
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return Err(SubscriberIdError::Empty);
        }
        if !trimmed.bytes().all(|b| b.is_ascii_digit()) {
            return Err(SubscriberIdError::NotDigits);
        }
        if trimmed.len() > MAX_DIGITS {
            return Err(SubscriberIdError::TooLong);
        }
        if trimmed.len() > 1 && trimmed.starts_with('0') {
            return Err(SubscriberIdError::LeadingZero);
        }
        if !trimmed.parse::<i64>().is_ok_and(|n| n > 0) {
            return Err(SubscriberIdError::OutOfRange);
        }
        Ok(Self(trimmed.to_owned()))
    }

    /// The digits, for the store and the ManyChat client only. Never log this.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A test contact of the owner's console: an id in [`TEST_CONTACTS`] (19 digits from
    /// 9000000000000000000 to 9223372036854775807). ManyChat's ids are far below this range
    /// (they grow from a few digits), so a real contact never has one; a test contact's
    /// ManyChat calls go to the in-process recorder (`manychat::recorder`), and `report` leaves
    /// it out.
    pub fn is_test_contact(&self) -> bool {
        self.0.len() == MAX_DIGITS && self.0.as_str() >= TEST_CONTACTS_FIRST
    }

    /// A fresh random test contact (see [`Self::is_test_contact`]).
    pub fn new_test_contact() -> Self {
        let first: i64 = TEST_CONTACTS_FIRST.parse().expect("a number");
        let id = rand::random_range(first..=i64::MAX);
        Self(id.to_string())
    }

    /// The id as the JSON number ManyChat's API declares (every id in range is one; a string
    /// is the fallback ManyChat also accepts).
    pub fn to_json(&self) -> serde_json::Value {
        match self.0.parse::<u64>() {
            Ok(n) => serde_json::Value::from(n),
            Err(_) => serde_json::Value::from(self.0.clone()),
        }
    }
}

impl fmt::Debug for SubscriberId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SubscriberId([redacted])")
    }
}

impl fmt::Display for SubscriberId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[subscriber]")
    }
}

/// A conversation's random UUID: the only contact identifier that may appear in a log line.
pub type ConversationId = uuid::Uuid;

/// A secret that must never be printed (`Debug` shows `[redacted]`).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each input is refused with its error.
    fn assert_refused(cases: &[(&str, SubscriberIdError)]) {
        for (input, error) in cases {
            assert_eq!(SubscriberId::parse(input), Err(error.clone()), "{input:?}");
        }
    }

    #[test]
    fn subscriber_id_accepts_digits_and_refuses_the_rest() {
        assert_eq!(SubscriberId::parse(" 12345 ").unwrap().as_str(), "12345");
        assert_refused(&[
            ("", SubscriberIdError::Empty),
            ("{{contact.id}}", SubscriberIdError::NotDigits),
            ("12a", SubscriberIdError::NotDigits),
            (&"9".repeat(21), SubscriberIdError::TooLong),
        ]);
    }

    #[test]
    fn subscriber_id_is_canonical_digits_without_leading_zeros() {
        for padded in ["088001", "0088001", " 088001", "00"] {
            assert_eq!(
                SubscriberId::parse(padded),
                Err(SubscriberIdError::LeadingZero),
                "{padded}"
            );
        }
        assert_eq!(SubscriberId::parse("88001").unwrap().as_str(), "88001");
    }

    #[test]
    fn subscriber_id_is_within_manychats_range_1_to_i64_max() {
        assert_refused(&[
            ("0", SubscriberIdError::OutOfRange),
            ("9223372036854775808", SubscriberIdError::OutOfRange),
            ("18446744073709551615", SubscriberIdError::TooLong),
        ]);
        let edge = SubscriberId::parse("9223372036854775807").unwrap();
        assert_eq!(edge.to_json(), serde_json::json!(9223372036854775807i64));
    }

    #[test]
    fn console_test_contacts_are_the_19_digit_ids_from_9e18_and_new_ones_are_in_range() {
        for id in [
            "9000000000000000000",
            "9223372036854775807",
            "9100000000000000123",
        ] {
            assert!(SubscriberId::parse(id).unwrap().is_test_contact(), "{id}");
        }
        for id in ["8999999999999999999", "900000000000000000", "1", "5550001"] {
            assert!(!SubscriberId::parse(id).unwrap().is_test_contact(), "{id}");
        }
        for _ in 0..100 {
            let id = SubscriberId::new_test_contact();
            assert!(id.is_test_contact());
            assert_eq!(SubscriberId::parse(id.as_str()).unwrap(), id);
        }
    }

    #[test]
    fn subscriber_id_never_prints_its_digits() {
        let id = SubscriberId::parse("5550001").unwrap();
        assert!(!format!("{id:?} {id}").contains("5550001"));
        assert_eq!(id.to_json(), serde_json::json!(5550001));
    }
}
