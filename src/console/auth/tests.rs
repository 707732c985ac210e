use std::net::IpAddr;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use tokio::time::Instant;

use super::*;

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + seconds, 0).unwrap()
}

fn sessions(hash: &PasswordHashSetting) -> Sessions {
    Sessions::new(hash, [7; 32], Duration::from_secs(3600))
}

#[test]
fn console_password_hash_verifies_the_right_password_only() {
    let hash = PasswordHashSetting::make("correct horse");
    assert!(hash.as_str().starts_with("$argon2id$"));
    let parsed = PasswordHashSetting::parse(hash.as_str()).expect("what `make` prints parses");
    assert!(parsed.verify("correct horse"));
    assert!(!parsed.verify("correct horse "));
    assert!(!parsed.verify(""));
}

#[test]
fn console_password_hash_refuses_a_malformed_or_other_algorithm_hash_without_its_value() {
    for raw in [
        "",
        "hunter2",
        "$argon2i$v=19$m=19456,t=2,p=1$c29tZXNhbHQ$aGFzaGhhc2hoYXNo",
        "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQ",
    ] {
        let error = PasswordHashSetting::parse(raw).expect_err("a malformed hash is refused");
        assert!(raw.is_empty() || !error.contains(raw), "{error}");
    }
    assert_eq!(
        format!("{:?}", PasswordHashSetting::make("x")),
        "PasswordHashSetting(..)"
    );
}

#[test]
fn console_session_cookie_is_accepted_until_its_expiry_only() {
    let hash = PasswordHashSetting::make("pw");
    let sessions = sessions(&hash);
    let cookie = sessions.issue(at(0));
    assert!(sessions.check(&cookie, at(0)));
    assert!(sessions.check(&cookie, at(3599)));
    assert!(!sessions.check(&cookie, at(3600)));
}

#[test]
fn console_session_cookie_with_a_changed_expiry_or_mac_is_refused() {
    let hash = PasswordHashSetting::make("pw");
    let sessions = sessions(&hash);
    let cookie = sessions.issue(at(0));
    let (times, mac) = cookie.rsplit_once('.').unwrap();
    let (issued, expiry) = times.split_once('.').unwrap();
    let later: i64 = expiry.parse::<i64>().unwrap() + 86_400_000;
    assert!(!sessions.check(&format!("{issued}.{later}.{mac}"), at(0)));
    assert!(!sessions.check(&format!("{times}.AAAA"), at(0)));
    assert!(!sessions.check("", at(0)));
    assert!(!sessions.check("garbage", at(0)));
}

#[test]
fn console_session_is_revoked_when_the_hash_or_the_process_secret_changes() {
    let old = PasswordHashSetting::make("pw");
    let cookie = sessions(&old).issue(at(0));
    let new = PasswordHashSetting::make("pw2");
    assert!(!sessions(&new).check(&cookie, at(1)));
    let restarted = Sessions::new(&old, [8; 32], Duration::from_secs(3600));
    assert!(!restarted.check(&cookie, at(1)));
    assert!(sessions(&old).check(&cookie, at(1)));
}

#[test]
fn console_logout_refuses_every_cookie_issued_until_then() {
    let hash = PasswordHashSetting::make("pw");
    let sessions = sessions(&hash);
    let before = sessions.issue(at(0));
    sessions.revoke_all(at(10));
    assert!(!sessions.check(&before, at(11)));
    let after = sessions.issue(at(12));
    assert!(sessions.check(&after, at(13)));
}

#[test]
fn console_csrf_token_belongs_to_its_session_only() {
    let hash = PasswordHashSetting::make("pw");
    let sessions = sessions(&hash);
    let one = sessions.issue(at(0));
    let two = sessions.issue(at(1));
    let token = sessions.csrf_token(&one);
    assert!(sessions.check_csrf(&one, &token));
    assert!(!sessions.check_csrf(&two, &token));
    assert!(!sessions.check_csrf(&one, ""));
    assert!(!sessions.check_csrf(&one, &token[1..]));
}

#[test]
fn console_login_limit_refuses_the_sixth_attempt_in_a_minute_then_frees_a_slot() {
    let limiter = LoginLimiter::default();
    let ip: IpAddr = "203.0.113.9".parse().unwrap();
    let other: IpAddr = "203.0.113.10".parse().unwrap();
    let start = Instant::now();
    for second in 0..5 {
        assert!(
            limiter
                .attempt(ip, start + Duration::from_secs(second))
                .is_ok()
        );
    }
    let retry = limiter
        .attempt(ip, start + Duration::from_secs(30))
        .expect_err("the sixth attempt within a minute");
    assert_eq!(retry, Duration::from_secs(30));
    assert!(
        limiter
            .attempt(other, start + Duration::from_secs(30))
            .is_ok()
    );
    assert!(
        limiter
            .attempt(ip, start + Duration::from_secs(59))
            .is_err()
    );
    assert!(limiter.attempt(ip, start + Duration::from_secs(60)).is_ok());
}
