//! 019's pure rules: the token's shape and hash, binding, and when to issue again.

use chrono::{TimeZone, Utc};

use super::*;
use crate::ids::SubscriberId;

fn at(hour: u32, minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, hour, minute, 0)
        .single()
        .expect("a valid fixture time")
}

fn conversation() -> Conversation {
    let subscriber = SubscriberId::parse("4400100").expect("fixture id");
    Conversation::first_contact(uuid::Uuid::new_v4(), subscriber, at(9, 0))
}

/// A conversation holding `current` (and `previous`), issued at `issued`.
fn with_tokens(current: &str, previous: Option<&str>, issued: DateTime<Utc>) -> Conversation {
    Conversation {
        token_hash: Some(hash(current)),
        previous_token_hash: previous.map(hash),
        token_issued_at: Some(issued),
        token_generation: if previous.is_some() { 2 } else { 1 },
        ..conversation()
    }
}

#[test]
fn system_019_token_is_32_random_bytes_base64url_unpadded() {
    let first = issue();
    let second = issue();
    let plain = first.token.expose();
    assert_eq!(plain.len(), 43, "32 bytes are 43 base64url characters");
    assert!(
        plain
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "base64url alphabet, no padding"
    );
    let decoded = URL_SAFE_NO_PAD.decode(plain).expect("valid base64url");
    assert_eq!(decoded.len(), 32);
    assert_ne!(first.token, second.token, "each token is fresh");
}

#[test]
fn system_019_stored_hash_is_sha256_hex_of_the_token() {
    // The SHA-256 test vector of "abc" (FIPS 180-2).
    assert_eq!(
        hash("abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    let issued = issue();
    assert_eq!(issued.hash, hash(issued.token.expose()));
    assert_ne!(issued.hash, issued.token.expose());
    assert!(matches(issued.token.expose(), &issued.hash));
    assert!(!matches("a-different-token", &issued.hash));
    assert!(!matches(issued.token.expose(), ""));
}

#[test]
fn system_019_issued_token_never_prints() {
    let issued = issue();
    let printed = format!("{issued:?}");
    assert!(!printed.contains(issued.token.expose()), "{printed}");
    let payload = TokenPayload {
        generation: 3,
        token: issued.token.expose().to_owned(),
    };
    assert!(!format!("{payload:?}").contains(issued.token.expose()));
}

#[test]
fn system_019_no_token() {
    let fresh = conversation();
    assert_eq!(bind(&fresh, None), Binding::NoTokenYet);
    assert_eq!(bind(&fresh, Some("anything")), Binding::NoTokenYet);
    assert!(reads_history(&Binding::NoTokenYet, true));
    assert!(should_issue(&fresh, &Binding::NoTokenYet, at(9, 0)));
}

#[test]
fn system_019_current() {
    let c = with_tokens("current-token-fixture", Some("old-token-fixture"), at(8, 0));
    let binding = bind(&c, Some("current-token-fixture"));
    assert_eq!(binding, Binding::Bound);
    assert_eq!(
        bind(&c, Some("  current-token-fixture ")),
        Binding::Bound,
        "surrounding blanks are not part of a token"
    );
    assert!(reads_history(&binding, true));
    assert!(
        !should_issue(&c, &binding, at(23, 0)),
        "a bound request is never issued a new token"
    );
}

#[test]
fn system_019_previous() {
    let c = with_tokens("current-token-fixture", Some("old-token-fixture"), at(8, 0));
    let binding = bind(&c, Some("old-token-fixture"));
    assert_eq!(binding, Binding::Bound);
    assert!(reads_history(&binding, true));
}

#[test]
fn system_019_wrong() {
    let c = with_tokens("current-token-fixture", Some("old-token-fixture"), at(8, 0));
    let binding = bind(&c, Some("guessed-token-fixture"));
    assert_eq!(binding, Binding::Unbound(UnboundReason::Wrong));
    assert!(!reads_history(&binding, true));
    assert!(
        !reads_history(&binding, false),
        "the rollout flag never lets a wrong token read history"
    );
    // A hash presented as a token is just another wrong token.
    let hash_as_token = c.token_hash.clone().expect("fixture has a hash");
    assert_eq!(
        bind(&c, Some(&hash_as_token)),
        Binding::Unbound(UnboundReason::Wrong)
    );
    // The token two generations back matches nothing.
    let rotated = with_tokens(
        "newest-token-fixture",
        Some("current-token-fixture"),
        at(8, 0),
    );
    assert_eq!(
        bind(&rotated, Some("old-token-fixture")),
        Binding::Unbound(UnboundReason::Wrong)
    );
    // With no previous hash, only the current token binds.
    let single = with_tokens("current-token-fixture", None, at(8, 0));
    assert_eq!(bind(&single, Some("current-token-fixture")), Binding::Bound);
    assert_eq!(
        bind(&single, Some("old-token-fixture")),
        Binding::Unbound(UnboundReason::Wrong)
    );
}

#[test]
fn system_019_missing() {
    let c = with_tokens("current-token-fixture", None, at(8, 0));
    for absent in [None, Some(""), Some("   "), Some("{{ai_token}}")] {
        let binding = bind(&c, absent);
        assert_eq!(
            binding,
            Binding::Unbound(UnboundReason::Missing),
            "{absent:?}"
        );
        assert!(!reads_history(&binding, true), "enforced: {absent:?}");
    }
}

#[test]
fn system_019_flag_off() {
    let c = with_tokens("current-token-fixture", None, at(8, 0));
    let missing = bind(&c, None);
    assert!(
        reads_history(&missing, false),
        "CONTACT_TOKENS_ENFORCED=false: a missing token reads history as before"
    );
    assert!(reads_history(&missing, true) != reads_history(&missing, false));
    assert!(!reads_history(
        &bind(&c, Some("guessed-token-fixture")),
        false
    ));
    assert!(reads_history(
        &bind(&c, Some("current-token-fixture")),
        false
    ));
}

#[test]
fn system_019_reissue_after_unbound_at_most_hourly() {
    let c = with_tokens("current-token-fixture", None, at(8, 0));
    for binding in [
        Binding::Unbound(UnboundReason::Missing),
        Binding::Unbound(UnboundReason::Wrong),
    ] {
        assert!(
            !should_issue(&c, &binding, at(8, 0)),
            "{binding:?}: just issued"
        );
        assert!(
            !should_issue(&c, &binding, at(8, 59)),
            "{binding:?}: within the hour"
        );
        assert!(
            should_issue(&c, &binding, at(9, 0)),
            "{binding:?}: an hour later"
        );
        assert!(should_issue(&c, &binding, at(15, 30)), "{binding:?}: later");
    }
    assert!(!should_issue(&c, &Binding::Bound, at(15, 30)));
}

#[test]
fn binding_kind_names_no_value() {
    let kinds = [
        Binding::Bound,
        Binding::Unbound(UnboundReason::Missing),
        Binding::Unbound(UnboundReason::Wrong),
        Binding::NoTokenYet,
    ]
    .map(Binding::kind);
    assert_eq!(
        kinds,
        ["bound", "unbound_missing", "unbound_wrong", "no_token_yet"]
    );
}
