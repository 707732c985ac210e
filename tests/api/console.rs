//! The owner's console through the real router: off without `CONSOLE_PASSWORD_HASH`, the login
//! and its cookie, CSRF on every POST, the login limit, the security headers, the reload button,
//! and the webhook route untouched.

use std::sync::Arc;

use manychat_agent::console::CONTENT_SECURITY_POLICY;
use manychat_agent::model::mock::ScriptedModel;
use reqwest::{Response, StatusCode};
use serde_json::Value;

use crate::console_helpers::*;
use crate::helpers::*;

async fn post_reload(
    app: &TestApp,
    client: &reqwest::Client,
    session: &str,
    csrf: Option<&str>,
) -> Response {
    let form: Vec<(&str, &str)> = csrf.map(|t| ("csrf", t)).into_iter().collect();
    client
        .post(format!("{}/console/reload", app.address))
        .header("cookie", session)
        .form(&form)
        .send()
        .await
        .unwrap()
}

/// `<dt>{name}</dt><dd>{n}</dd>` on the page.
fn count_shown(page: &str, name: &str) -> usize {
    let marker = format!("<dt>{name}</dt><dd>");
    let start = page
        .find(&marker)
        .unwrap_or_else(|| panic!("{name} is shown"))
        + marker.len();
    page[start..].split('<').next().unwrap().parse().unwrap()
}

fn assert_console_headers(response: &Response, what: &str) {
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("{what}: no {name}"))
            .to_owned()
    };
    let csp = header("content-security-policy");
    assert_eq!(csp, CONTENT_SECURITY_POLICY, "{what}");
    for rule in [
        "default-src 'none'",
        "style-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ] {
        assert!(csp.contains(rule), "{what}: {rule}");
    }
    assert!(!csp.contains("script-src"), "{what}: no script may run");
    assert_eq!(header("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(header("referrer-policy"), "no-referrer", "{what}");
    assert_eq!(header("cache-control"), "no-store", "{what}");
}

#[tokio::test]
async fn console_without_the_hash_answers_404_like_an_unknown_route() {
    let app = spawn_app(Arc::new(ScriptedModel::replies(Vec::<String>::new()))).await;
    let unknown = app.get("/no-such-route").await;
    let (status, body) = (unknown.status(), unknown.bytes().await.unwrap());
    assert_eq!(status, StatusCode::NOT_FOUND);
    for route in ["/console", "/console/login", "/console/style.css"] {
        let response = app.get(route).await;
        assert_eq!(response.status(), status, "{route}");
        assert_eq!(response.bytes().await.unwrap(), body, "{route}");
    }
    let post = browser()
        .post(format!("{}/console/login", app.address))
        .form(&[("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn console_login_with_the_right_password_gives_a_strict_expiring_session_cookie() {
    let app = console_app(&[]).await;
    let client = browser();
    let form = login_form(&app, &client, &[]).await;
    let response = post_login(&app, &client, &form, PASSWORD, &[]).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()["location"], "/console");
    let cookie = set_cookie(&response, "console_session").expect("a session cookie");
    for attribute in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/console",
        "Max-Age=43200",
    ] {
        assert!(
            cookie.split("; ").any(|a| a == attribute),
            "{attribute} in {cookie}"
        );
    }
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP from an untrusted peer: {cookie}"
    );

    let (status, body) = page(&app, &client, &pair(&cookie)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("What is running"));
    assert!(body.contains(manychat_agent::VERSION));
    assert!(body.contains("the SQLite database"));
    assert!(!body.contains(PASSWORD) && !body.contains(hash()));
}

#[tokio::test]
async fn console_login_with_a_wrong_password_is_refused_and_gives_no_session() {
    let app = console_app(&[]).await;
    let client = browser();
    let form = login_form(&app, &client, &[]).await;
    let response = post_login(&app, &client, &form, "not the password", &[]).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(set_cookie(&response, "console_session").is_none());
    assert!(response.text().await.unwrap().contains("not right"));
    // A login form without its token changes nothing either.
    let stale = LoginForm {
        cookie: form.cookie.clone(),
        csrf: "forged".into(),
    };
    let response = post_login(&app, &client, &stale, PASSWORD, &[]).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(set_cookie(&response, "console_session").is_none());
}

#[tokio::test]
async fn console_cookie_is_secure_when_a_trusted_proxy_says_the_request_came_over_https() {
    let app = console_app(&[("TRUST_PROXY", "127.0.0.1/32")]).await;
    let client = browser();
    let https = [
        ("x-forwarded-proto", "https"),
        ("x-forwarded-for", "198.51.100.7"),
    ];
    let form = login_form(&app, &client, &https).await;
    let response = post_login(&app, &client, &form, PASSWORD, &https).await;
    let cookie = set_cookie(&response, "console_session").expect("a session cookie");
    assert!(cookie.split("; ").any(|a| a == "Secure"), "{cookie}");
}

#[tokio::test]
async fn console_page_logged_out_redirects_to_the_login_and_a_post_is_refused_401() {
    let app = console_app(&[]).await;
    let client = browser();
    let response = client
        .get(format!("{}/console", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()["location"], "/console/login");
    let forged = "console_session=1.99999999999999.AAAA";
    let (status, _) = page(&app, &client, forged).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let settled = app.config.reloads_settled();
    let response = post_reload(&app, &client, forged, Some("x")).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(app.config.reloads_settled(), settled, "nothing reloaded");
}

#[tokio::test]
async fn console_post_without_or_with_a_stale_csrf_token_is_refused_403_and_reloads_nothing() {
    let app = console_app(&[]).await;
    let client = browser();
    let session = logged_in(&app, &client).await;
    let other_session = logged_in(&app, &client).await;
    let (_, other_page) = page(&app, &client, &other_session).await;
    let settled = app.config.reloads_settled();
    for csrf in [None, Some(""), Some(csrf_in(&other_page).as_str())] {
        let response = post_reload(&app, &client, &session, csrf).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{csrf:?}");
    }
    assert_eq!(app.config.reloads_settled(), settled, "nothing reloaded");
}

#[tokio::test]
async fn console_reload_button_applies_the_files_and_the_page_shows_the_new_counts() {
    let app = console_app(&[]).await;
    let client = browser();
    let session = logged_in(&app, &client).await;
    let (_, before) = page(&app, &client, &session).await;
    let tags = count_shown(&before, "Tags");
    assert_eq!(
        tags,
        app.config.snapshot().tools.as_ref().unwrap().tags.len()
    );
    crate::selling::edit_tools(&app.config_dir, |tools| {
        tools["tags"].as_array_mut().unwrap().pop();
    });
    let settled = app.config.reloads_settled();
    let response = post_reload(&app, &client, &session, Some(&csrf_in(&before))).await;
    assert_eq!(response.status(), StatusCode::OK);
    let after = response.text().await.unwrap();
    assert!(after.contains("Reloaded"), "{after}");
    assert_eq!(count_shown(&after, "Tags"), tags - 1);
    assert_eq!(app.config.reloads_settled(), settled + 1);
    assert_eq!(
        app.config.snapshot().tools.as_ref().unwrap().tags.len(),
        tags - 1
    );
}

#[tokio::test]
async fn console_refused_reload_shows_file_path_and_rule_and_keeps_the_config_in_force() {
    let app = console_app(&[]).await;
    let client = browser();
    let session = logged_in(&app, &client).await;
    let original = app.escalation_copy();
    let mut rules: Value = app.rules();
    rules["messages"]["escalation"] = Value::String(String::new());
    std::fs::write(app.config_dir.join("rules.json"), rules.to_string()).unwrap();

    let (_, before) = page(&app, &client, &session).await;
    assert!(
        before.contains("Invalid: a reload would be refused"),
        "the check of the files on disk"
    );
    let response = post_reload(&app, &client, &session, Some(&csrf_in(&before))).await;
    let after = response.text().await.unwrap();
    assert!(
        after.contains("Refused: the config in force stays"),
        "{after}"
    );
    assert!(after.contains("<code>rules.json</code>"), "{after}");
    assert!(after.contains("$.messages.escalation"), "{after}");
    assert_eq!(app.config.snapshot().rules.messages.escalation, original);
    let (_, body) = app
        .send(
            "5001",
            &format!(
                "I want a {}",
                app.rules()["escalationKeywords"][0].as_str().unwrap()
            ),
        )
        .await;
    assert_eq!(block_texts(&body), vec![original]);
}

#[tokio::test]
async fn console_every_response_carries_the_strict_security_headers() {
    let app = console_app(&[]).await;
    let client = browser();
    let login = client
        .get(format!("{}/console/login", app.address))
        .send()
        .await
        .unwrap();
    assert_console_headers(&login, "login form");
    let redirect = client
        .get(format!("{}/console", app.address))
        .send()
        .await
        .unwrap();
    assert_console_headers(&redirect, "logged-out redirect");
    let css = client
        .get(format!("{}/console/style.css", app.address))
        .send()
        .await
        .unwrap();
    assert_console_headers(&css, "stylesheet");
    assert!(
        css.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/css")
    );
    let session = logged_in(&app, &client).await;
    let running = client
        .get(format!("{}/console", app.address))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_console_headers(&running, "what is running");
    let refused = post_reload(&app, &client, &session, None).await;
    assert_console_headers(&refused, "refused POST");
    // The webhook routes keep their own headers.
    assert!(
        app.get("/health")
            .await
            .headers()
            .get("content-security-policy")
            .is_none()
    );
}

#[tokio::test]
async fn console_sixth_login_attempt_in_a_minute_is_refused_429_and_the_webhook_still_answers() {
    let app = console_app(&[]).await;
    let client = browser();
    for _ in 0..5 {
        let form = login_form(&app, &client, &[]).await;
        let response = post_login(&app, &client, &form, "a wrong guess", &[]).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    }
    let form = login_form(&app, &client, &[]).await;
    let response = post_login(&app, &client, &form, PASSWORD, &[]).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(set_cookie(&response, "console_session").is_none());

    // The same address's webhook requests are limited and counted apart.
    let (status, body) = app.send("6001", "hello").await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec!["Hello!".to_owned()]);
    let metrics = app.metrics_text().await;
    assert!(
        !metrics.contains("console"),
        "no console series in /metrics"
    );
}

#[tokio::test]
async fn console_logout_ends_the_session() {
    let app = console_app(&[]).await;
    let client = browser();
    let session = logged_in(&app, &client).await;
    let (_, body) = page(&app, &client, &session).await;
    let response = client
        .post(format!("{}/console/logout", app.address))
        .header("cookie", &session)
        .form(&[("csrf", csrf_in(&body))])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()["location"], "/console/login");
    let cleared = set_cookie(&response, "console_session").unwrap();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    let (status, _) = page(&app, &client, &session).await;
    assert_eq!(
        status,
        StatusCode::SEE_OTHER,
        "the old cookie no longer opens the console"
    );
}

/// The demo turns the owner's console on for the loopback with a password made for the run,
/// printed with the link; the password is a valid login.
pub fn demo_console_is_on_with_the_password_its_banner_prints(port: u16, banner: &str) {
    use std::io::{Read, Write};
    let prefix =
        format!("Owner's console: http://127.0.0.1:{port}/console (password, new at each start: ");
    let password = piece_after(banner, &prefix, |rest| rest.split(')').next());
    assert!(password.len() >= 12, "{banner}");
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "GET /console/login HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("name=\"password\""), "{answer}");
}
