//! Signing a call with the Standard Webhooks scheme, through the scheme's own Rust
//! implementation (`standardwebhooks`): `webhook-id` (new for every call), `webhook-timestamp`
//! (Unix seconds) and `webhook-signature` (`v1,<base64 HMAC-SHA256 over id.timestamp.body>`).
//!
//! Invariant: a secret's value never appears in an error, a log line or a result; problems name
//! the environment variable only.

use std::sync::Arc;

use base64::Engine;

/// The prefix of a Standard Webhooks secret.
pub const SECRET_PREFIX: &str = "whsec_";

/// The Standard Webhooks header names.
pub use standardwebhooks::{HEADER_WEBHOOK_ID, HEADER_WEBHOOK_SIGNATURE, HEADER_WEBHOOK_TIMESTAMP};

/// Where the tools' secrets are read: the process environment in `serve`, a map in tests.
pub type SecretLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The process environment as a [`SecretLookup`].
pub fn process_env() -> SecretLookup {
    Arc::new(|name| std::env::var(name).ok())
}

/// A call's three signature headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub id: String,
    pub timestamp: i64,
    pub signature: String,
}

/// Why a secret cannot sign: the rule it breaks (never its value).
pub fn secret_problem(value: Option<&str>) -> Option<&'static str> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Some("is not set");
    };
    let Some(encoded) = value.strip_prefix(SECRET_PREFIX) else {
        return Some("must start with whsec_ (a Standard Webhooks secret)");
    };
    match base64::engine::general_purpose::STANDARD.decode(encoded) {
        Ok(key) if (24..=64).contains(&key.len()) => None,
        Ok(_) => Some("must hold 24 to 64 bytes of key after whsec_ (base64)"),
        Err(_) => Some("is not base64 after whsec_"),
    }
}

/// Signs `body` sent at `timestamp` (Unix seconds) with `secret` under a new message id; `None`
/// when the secret is malformed ([`secret_problem`] says why).
pub fn sign(secret: &str, body: &str, timestamp: i64) -> Option<Signed> {
    if secret_problem(Some(secret)).is_some() {
        return None;
    }
    let webhook = standardwebhooks::Webhook::new(secret.trim()).ok()?;
    let id = format!("msg_{}", uuid::Uuid::new_v4().simple());
    let signature = webhook.sign(&id, timestamp, body.as_bytes()).ok()?;
    Some(Signed {
        id,
        timestamp,
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn standard_webhooks_a_signature_verifies_with_the_same_secret_and_ids_are_new() {
        let body = r#"{"tool":"seats_left"}"#;
        let now = chrono::Utc::now().timestamp();
        let one = sign(SECRET, body, now).unwrap();
        let two = sign(SECRET, body, now).unwrap();
        assert_ne!(one.id, two.id, "webhook-id is new for every call");
        assert!(one.signature.starts_with("v1,"));
        let mut headers = axum::http::HeaderMap::new();
        headers.insert(HEADER_WEBHOOK_ID, one.id.parse().unwrap());
        headers.insert(HEADER_WEBHOOK_TIMESTAMP, now.to_string().parse().unwrap());
        headers.insert(HEADER_WEBHOOK_SIGNATURE, one.signature.parse().unwrap());
        let webhook = standardwebhooks::Webhook::new(SECRET).unwrap();
        webhook.verify(body.as_bytes(), &headers).unwrap();
        assert!(
            webhook.verify(b"{}", &headers).is_err(),
            "another body fails"
        );
    }

    #[test]
    fn standard_webhooks_a_malformed_secret_is_named_by_its_rule_never_its_value() {
        assert_eq!(secret_problem(None), Some("is not set"));
        assert_eq!(secret_problem(Some("  ")), Some("is not set"));
        assert!(secret_problem(Some("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")).is_some());
        assert!(secret_problem(Some("whsec_!!!")).is_some());
        assert!(
            secret_problem(Some("whsec_c2hvcnQ=")).is_some(),
            "too short"
        );
        assert_eq!(secret_problem(Some(SECRET)), None);
        for bad in ["whsec_!!!", "nope"] {
            assert!(!secret_problem(Some(bad)).unwrap().contains(bad));
        }
        assert!(sign("whsec_!!!", "{}", 0).is_none());
    }
}
