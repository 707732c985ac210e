//! Shared-secret authentication of ManyChat's requests (SYSTEM 3.1).
//!
//! Owns the check of `Authorization: Bearer <secret>` against every configured secret
//! (`MANYCHAT_SHARED_SECRET`, several during a rotation).
//!
//! Invariants: secrets are held only as SHA-256 digests; the presented token is hashed and
//! compared with every digest in constant time, without an early exit, so neither the position of
//! the matching secret nor the length of any secret shows in the timing.

use axum::http::HeaderValue;
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

use crate::ids::Secret;

/// Checks presented bearer tokens against the configured shared secrets.
#[derive(Clone)]
pub struct Authenticator {
    /// SHA-256 of each configured secret: equal-length values, so the comparison leaks no length.
    digests: Vec<[u8; 32]>,
}

impl Authenticator {
    pub fn new(secrets: Vec<Secret>) -> Self {
        Self {
            digests: secrets.iter().map(|s| digest(s.expose())).collect(),
        }
    }

    /// True when `header` is `Bearer <token>` and the token equals one of the secrets. A missing,
    /// non-ASCII or malformed header is refused.
    pub fn check(&self, header: Option<&HeaderValue>) -> bool {
        let Some(token) = header.and_then(bearer_token) else {
            return false;
        };
        let presented = digest(token);
        let mut matched = Choice::from(0u8);
        for known in &self.digests {
            matched |= known.ct_eq(&presented);
        }
        bool::from(matched)
    }
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("secrets", &self.digests.len())
            .finish()
    }
}

/// The token of a `Bearer` header. The scheme is case-insensitive (RFC 9110); the token must be
/// non-empty and free of whitespace.
fn bearer_token(header: &HeaderValue) -> Option<&str> {
    let value = header.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_matches(' ');
    if token.is_empty() || token.contains(char::is_whitespace) {
        return None;
    }
    Some(token)
}

fn digest(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: &str = "fixture-secret-one-0123456789";
    const SECOND: &str = "fixture-secret-two-9876543210";

    fn auth() -> Authenticator {
        Authenticator::new(vec![Secret::new(FIRST), Secret::new(SECOND)])
    }

    fn header(value: &str) -> HeaderValue {
        HeaderValue::from_str(value).unwrap()
    }

    #[test]
    fn system_3_1_each_configured_secret_is_accepted() {
        let auth = auth();
        assert!(auth.check(Some(&header(&format!("Bearer {FIRST}")))));
        assert!(auth.check(Some(&header(&format!("Bearer {SECOND}")))));
        assert!(auth.check(Some(&header(&format!("bearer {SECOND}")))));
    }

    #[test]
    fn system_3_1_wrong_missing_or_malformed_authorization_is_refused() {
        let auth = auth();
        assert!(!auth.check(None));
        let refused = [
            "Bearer fixture-secret-three-000000".to_owned(),
            format!("Bearer {FIRST}x"),
            format!("Bearer {}", &FIRST[..FIRST.len() - 1]),
            FIRST.to_owned(),
            format!("Basic {FIRST}"),
            format!("Bearer{FIRST}"),
            format!("Bearer {FIRST} {SECOND}"),
            format!("Bearer {FIRST},{SECOND}"),
            "Bearer ".to_owned(),
            "Bearer".to_owned(),
            String::new(),
        ];
        for value in refused {
            assert!(!auth.check(Some(&header(&value))), "accepted {value:?}");
        }
        let not_ascii = HeaderValue::from_bytes(b"Bearer \xff\xfe").unwrap();
        assert!(!auth.check(Some(&not_ascii)));
    }

    #[test]
    fn system_3_1_no_secrets_refuses_everything() {
        let auth = Authenticator::new(Vec::new());
        assert!(!auth.check(Some(&header(&format!("Bearer {FIRST}")))));
    }

    #[test]
    fn c5_debug_never_prints_secrets_or_digests() {
        let printed = format!("{:?}", auth());
        assert_eq!(printed, "Authenticator { secrets: 2 }");
    }
}
