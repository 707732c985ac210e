//! The console's login rules: the owner's password checked against `CONSOLE_PASSWORD_HASH`
//! (Argon2id), the session cookie, the CSRF token and the per-address login limit.
//!
//! The session is stateless: the cookie is `issued.expiry.mac`, an HMAC-SHA256 over both times
//! keyed by a key derived from the configured hash and a random secret made when the process
//! starts. No table is kept, so nothing grows with logins, and:
//! - a cookie past its expiry is refused;
//! - a cookie made under another hash is refused (changing the hash and restarting revokes every
//!   session), and so is every cookie after a restart (the secret is new): owners log in again;
//! - logging out refuses every cookie issued until then (one owner, one console: "log out"
//!   ends every session, so a copied cookie stops working too).
//!
//! The CSRF token is an HMAC of the session cookie under the same key, so it is valid exactly as
//! long as its session and is checked in constant time on every POST.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::time::Instant;

/// How long a session lasts after its login.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);
/// Login attempts one client address may make within [`LOGIN_WINDOW`].
pub const LOGIN_ATTEMPTS: usize = 5;
pub const LOGIN_WINDOW: Duration = Duration::from_secs(60);

type HmacSha256 = Hmac<Sha256>;

/// `CONSOLE_PASSWORD_HASH`: an Argon2id PHC string, checked when the settings are read. Its
/// `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHashSetting(String);

impl std::fmt::Debug for PasswordHashSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordHashSetting(..)")
    }
}

impl PasswordHashSetting {
    /// Accepts an Argon2id PHC string with valid parameters, a salt and a hash. The error names
    /// what is wrong, never the value.
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let raw = raw.trim();
        let parsed = PasswordHash::new(raw)
            .map_err(|_| "must be an Argon2id PHC string ($argon2id$v=19$m=…,t=…,p=…$salt$hash), as `manychat-agent console password` prints")?;
        if parsed.algorithm != Algorithm::Argon2id.ident() {
            return Err("must be an Argon2id hash (made by `manychat-agent console password`)");
        }
        if Params::try_from(&parsed).is_err() || parsed.hash.is_none() || parsed.salt.is_none() {
            return Err("is not a complete Argon2id hash (parameters, salt and hash)");
        }
        Ok(Self(raw.to_owned()))
    }

    /// Hashes `password` with Argon2id's default parameters and a random salt: what
    /// `console password` prints.
    pub fn make(password: &str) -> Self {
        let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
        let hash = Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .expect("Argon2id with default parameters hashes any password");
        Self(hash.to_string())
    }

    /// Whether `password` is the owner's. Slow by design (tens of milliseconds): call it on a
    /// blocking thread.
    pub fn verify(&self, password: &str) -> bool {
        let Ok(hash) = PasswordHash::new(&self.0) else {
            return false;
        };
        Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Issues and checks session cookies and CSRF tokens (see the module doc).
pub struct Sessions {
    key: [u8; 32],
    lifetime: Duration,
    /// Cookies issued at or before this (unix ms) are refused: the last logout.
    revoked_before: AtomicI64,
}

impl Sessions {
    /// Keys the sessions by the configured hash and this process's random secret.
    pub fn new(hash: &PasswordHashSetting, process_secret: [u8; 32], lifetime: Duration) -> Self {
        let mut digest = Sha256::new();
        digest.update(b"manychat-agent console session v1\0");
        digest.update(process_secret);
        digest.update(hash.as_str().as_bytes());
        Self {
            key: digest.finalize().into(),
            lifetime,
            revoked_before: AtomicI64::new(i64::MIN),
        }
    }

    /// A new process's sessions: a fresh random secret.
    pub fn for_process(hash: &PasswordHashSetting) -> Self {
        Self::new(hash, rand::random(), SESSION_LIFETIME)
    }

    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    fn mac(&self, purpose: &[u8], message: &[u8]) -> Vec<u8> {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(purpose);
        mac.update(b"\0");
        mac.update(message);
        mac.finalize().into_bytes().to_vec()
    }

    /// A cookie value for a login at `now`.
    pub fn issue(&self, now: DateTime<Utc>) -> String {
        let issued = now.timestamp_millis();
        let expiry =
            issued.saturating_add(i64::try_from(self.lifetime.as_millis()).unwrap_or(i64::MAX));
        let times = format!("{issued}.{expiry}");
        let mac = URL_SAFE_NO_PAD.encode(self.mac(b"session", times.as_bytes()));
        format!("{times}.{mac}")
    }

    /// Whether `cookie` is a session this process issued, not expired at `now` and not logged out.
    pub fn check(&self, cookie: &str, now: DateTime<Utc>) -> bool {
        let mut parts = cookie.splitn(3, '.');
        let (Some(issued), Some(expiry), Some(mac)) = (parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        let (Ok(issued_ms), Ok(expiry_ms)) = (issued.parse::<i64>(), expiry.parse::<i64>()) else {
            return false;
        };
        let Ok(mac) = URL_SAFE_NO_PAD.decode(mac) else {
            return false;
        };
        let expected = self.mac(b"session", format!("{issued}.{expiry}").as_bytes());
        if !bool::from(expected.ct_eq(&mac)) {
            return false;
        }
        let now_ms = now.timestamp_millis();
        issued_ms > self.revoked_before.load(Ordering::Acquire) && now_ms < expiry_ms
    }

    /// Ends every session issued until `now` (logout).
    pub fn revoke_all(&self, now: DateTime<Utc>) {
        self.revoked_before
            .fetch_max(now.timestamp_millis(), Ordering::AcqRel);
    }

    /// The CSRF token of the forms shown to the session `cookie`.
    pub fn csrf_token(&self, cookie: &str) -> String {
        URL_SAFE_NO_PAD.encode(self.mac(b"csrf", cookie.as_bytes()))
    }

    /// Whether `token` is the CSRF token of `cookie` (constant time).
    pub fn check_csrf(&self, cookie: &str, token: &str) -> bool {
        let expected = self.csrf_token(cookie);
        !token.is_empty() && bool::from(expected.as_bytes().ct_eq(token.as_bytes()))
    }
}

/// The login limit: at most [`LOGIN_ATTEMPTS`] attempts per client address in any sliding
/// [`LOGIN_WINDOW`], right or wrong, counted on the application's clock.
pub struct LoginLimiter {
    limit: usize,
    window: Duration,
    attempts: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

/// Addresses tracked before the ones with no attempt in the window are dropped.
const TRACKED_ADDRESSES: usize = 10_000;

impl LoginLimiter {
    pub fn new(limit: usize, window: Duration) -> Self {
        Self {
            limit,
            window,
            attempts: Mutex::new(HashMap::new()),
        }
    }

    /// Counts an attempt from `ip` at `now`, or refuses it with how long until one is allowed.
    pub fn attempt(&self, ip: IpAddr, now: Instant) -> Result<(), Duration> {
        let mut attempts = self
            .attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if attempts.len() >= TRACKED_ADDRESSES {
            let window = self.window;
            attempts.retain(|_, times| {
                times
                    .back()
                    .is_some_and(|last| now.saturating_duration_since(*last) < window)
            });
        }
        let times = attempts.entry(ip).or_default();
        while times
            .front()
            .is_some_and(|first| now.saturating_duration_since(*first) >= self.window)
        {
            times.pop_front();
        }
        if times.len() >= self.limit {
            let first = *times.front().expect("a full window has a first attempt");
            return Err(self.window - now.saturating_duration_since(first));
        }
        times.push_back(now);
        Ok(())
    }
}

impl Default for LoginLimiter {
    fn default() -> Self {
        Self::new(LOGIN_ATTEMPTS, LOGIN_WINDOW)
    }
}

#[cfg(test)]
mod tests;
