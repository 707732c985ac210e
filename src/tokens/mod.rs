//! Contact tokens (SYSTEM 6, 019): issuing them, binding a request to a contact's history, and
//! deciding when to issue again. [`service`] writes them to ManyChat (inline or through the
//! outbox) and runs `tokens backfill`.
//!
//! A token is 32 random bytes from a CSPRNG (`rand`'s thread RNG, seeded by the operating system),
//! base64url without padding (43 characters). The contact's ManyChat custom field
//! (`MANYCHAT_TOKEN_FIELD`) holds it; ManyChat presents it back as `ai_token`.
//!
//! Invariants:
//! - Conversations store only the SHA-256 (lowercase hex) of the current and the previous token.
//! - A presented token is hashed and compared against both stored hashes in constant time, and
//!   both comparisons always run, so timing says neither whether nor which one matched.
//! - A token never appears in a log line or an error message, nor in any response but the one
//!   that sets it. [`IssuedToken`] keeps
//!   the plain token in a [`Secret`], whose `Debug` is redacted.
//! - A plain token leaves the process only in the response that answers the request it was
//!   issued on (the block sets the token field) and in ManyChat API writes. The only place it
//!   rests outside ManyChat is the payload of a `contact_token` outbox row (the API write kept
//!   as the fallback until a request proves the token arrived, or a failed write's retry); see
//!   [`service`] for why that is acceptable and how a stale row is superseded.
//!
//! This module does no IO: [`bind`], [`reads_history`] and [`should_issue`] are pure, so the turn
//! can decide before it touches the network.

pub mod service;

pub use service::{
    BACKFILL_WINDOW, BackfillReport, IssueOutcome, PROOF_WINDOW, RESPONSE_FALLBACK, TokenError,
    TokenPayload, TokenService, lacking,
};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use rand::Rng;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::ids::Secret;
use crate::store::Conversation;

/// How often a contact may be issued a new token after an unbound request (019).
pub const REISSUE_INTERVAL: chrono::TimeDelta = chrono::TimeDelta::hours(1);

/// Random bytes in a token.
const TOKEN_BYTES: usize = 32;

/// A freshly issued token: the plain value to write to ManyChat and the hash to store.
#[derive(Debug, Clone)]
pub struct IssuedToken {
    /// The plain token. Set in the contact's token field (by the response or the API) and kept
    /// in a `contact_token` outbox row only until it is known to be there. Never logged
    /// (`Secret`'s `Debug` is redacted).
    pub token: Secret,
    /// SHA-256 of `token`, lowercase hex: what the conversation stores.
    pub hash: String,
}

/// Issues a new token: 32 random bytes, base64url without padding.
pub fn issue() -> IssuedToken {
    let bytes: [u8; TOKEN_BYTES] = rand::rng().random();
    let token = URL_SAFE_NO_PAD.encode(bytes);
    let hash = hash(&token);
    IssuedToken {
        token: Secret::new(token),
        hash,
    }
}

/// SHA-256 of a token, lowercase hex (64 characters).
pub fn hash(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    let mut hex = String::with_capacity(digest.len() * 2);
    for byte in digest {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    hex
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Whether `token` hashes to `stored_hash`, compared in constant time.
pub fn matches(token: &str, stored_hash: &str) -> bool {
    bool::from(hash(token).as_bytes().ct_eq(stored_hash.as_bytes()))
}

/// How a request relates to its contact's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// The presented token matches the current or the previous hash.
    Bound,
    /// The contact has a token but the request did not prove it.
    Unbound(UnboundReason),
    /// The contact has never been issued a token: it starts a bound history (019).
    NoTokenYet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnboundReason {
    /// No token presented: absent, empty, blank, or ManyChat's unrendered `{{…}}` variable.
    Missing,
    /// A token was presented and matches neither the current nor the previous hash.
    Wrong,
}

impl Binding {
    /// A label for logs and metrics (no token, no hash).
    pub fn kind(self) -> &'static str {
        match self {
            Binding::Bound => "bound",
            Binding::Unbound(UnboundReason::Missing) => "unbound_missing",
            Binding::Unbound(UnboundReason::Wrong) => "unbound_wrong",
            Binding::NoTokenYet => "no_token_yet",
        }
    }
}

/// Classifies a request by the token it presented (`ai_token`). The rollout flag does not
/// change the classification; it only changes what a missing token may do ([`reads_history`]).
pub fn bind(conversation: &Conversation, presented: Option<&str>) -> Binding {
    let Some(current) = conversation.token_hash.as_deref() else {
        return Binding::NoTokenYet;
    };
    let presented = presented.map(str::trim).filter(|t| !is_absent(t));
    let Some(presented) = presented else {
        return Binding::Unbound(UnboundReason::Missing);
    };
    let digest = hash(presented);
    let digest = digest.as_bytes();
    // Both comparisons run whatever the first one found (`&`/`|` on `Choice`, not `&&`/`||`).
    let is_current = digest.ct_eq(current.as_bytes());
    let is_previous = match conversation.previous_token_hash.as_deref() {
        Some(previous) => digest.ct_eq(previous.as_bytes()),
        // Whether a previous token exists is not secret; only the hashes are.
        None => subtle::Choice::from(0),
    };
    if bool::from(is_current | is_previous) {
        Binding::Bound
    } else {
        Binding::Unbound(UnboundReason::Wrong)
    }
}

/// An empty value or a ManyChat variable that was not rendered (the field is empty).
fn is_absent(token: &str) -> bool {
    token.is_empty() || (token.starts_with("{{") && token.ends_with("}}"))
}

/// Whether the turn is bound: it reads history, extends it (its turns are stored with
/// `bound = true`) and counts towards the turn cap. Bound and no-token-yet requests are;
/// a wrong token never is; a missing token is only while `CONTACT_TOKENS_ENFORCED=false`
/// (rollout: "a missing token reads history as before").
pub fn reads_history(binding: &Binding, enforced: bool) -> bool {
    match binding {
        Binding::Bound | Binding::NoTokenYet => true,
        Binding::Unbound(UnboundReason::Missing) => !enforced,
        Binding::Unbound(UnboundReason::Wrong) => false,
    }
}

/// Whether to issue a token on this request: always when the contact has none; after an
/// unbound request (missing or wrong, whatever the rollout flag) when the last one was issued at
/// least [`REISSUE_INTERVAL`] ago; never after a bound request.
pub fn should_issue(conversation: &Conversation, binding: &Binding, now: DateTime<Utc>) -> bool {
    match binding {
        Binding::NoTokenYet => true,
        Binding::Bound => false,
        Binding::Unbound(_) => conversation
            .token_issued_at
            .is_none_or(|issued| now - issued >= REISSUE_INTERVAL),
    }
}

#[cfg(test)]
mod tests;
