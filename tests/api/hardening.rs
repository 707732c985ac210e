//! Slow and idle clients, the connection caps, the
//! per-contact limit, and the edges (a FIFO in `config/`, a lone surrogate, unknown keys in the
//! log, the metrics token).
//!
//! The connection tests speak raw HTTP/1.1 over a `TcpStream`, so they see exactly when the
//! server closes a socket. Timeouts run on tokio's frozen clock and are moved with `advance`;
//! the only real-time waits poll a socket for a moment (`real_pause`), as `settle` does.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::ScriptedModel;
use manychat_agent::store::Role;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::advance;

use crate::helpers::*;
use crate::reload::{escalation_copy_served, send_sighup, sighup_applies_a_new_escalation_copy};

const HEALTH: &[u8] = b"GET /health HTTP/1.1\r\nHost: agent.test\r\n\r\n";

fn quiet_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::replies(Vec::<String>::new()))
}

/// An app whose model is never asked, with the variable `name` set to `value`.
async fn quiet_app_with(name: &'static str, value: &str) -> TestApp {
    spawn_app_with(AppOptions::new(quiet_model()).env(name, value)).await
}

async fn connect(app: &TestApp) -> TcpStream {
    let address = app.address.trim_start_matches("http://");
    TcpStream::connect(address).await.expect("connects")
}

/// Reads one response (head and a `Content-Length` body) and returns its status and head.
async fn read_response(stream: &mut TcpStream) -> (u16, String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.expect("reads");
        assert!(n > 0, "connection closed before a response");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.expect("reads");
        assert!(n > 0, "connection closed inside a body");
        buf.extend_from_slice(&chunk[..n]);
    }
    let status = head[9..12].parse().unwrap();
    (status, head, buf[head_end..head_end + length].to_vec())
}

async fn get_health(stream: &mut TcpStream) -> u16 {
    stream.write_all(HEALTH).await.expect("writes");
    read_response(stream).await.0
}

/// Whether the server has closed `stream`, polled until it has or the suite's bound of real
/// time has passed.
async fn closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    let deadline = RealDeadline::start();
    while !deadline.passed() {
        match stream.try_read(&mut byte) {
            Ok(0) => return true,
            Ok(_) => panic!("unexpected bytes"),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return true,
        }
        let_tasks_run().await;
        real_pause().await;
    }
    false
}

/// Whether `stream` is still open with nothing to read, after the server had a moment.
async fn open_and_silent(stream: &mut TcpStream) -> bool {
    for _ in 0..10 {
        let_tasks_run().await;
        real_pause().await;
    }
    let mut byte = [0u8; 1];
    matches!(stream.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

#[tokio::test(start_paused = true)]
async fn idle_connection_is_closed_after_the_idle_timeout() {
    let _frozen = FrozenClock::freeze();
    let app = quiet_app_with("HTTP_IDLE_TIMEOUT_MS", "5000").await;
    let mut conn = connect(&app).await;
    assert_eq!(get_health(&mut conn).await, 200);

    // Just short of the idle timeout the kept-alive connection still serves, and its idle
    // clock starts again after that response.
    advance(Duration::from_millis(4999)).await;
    assert_eq!(get_health(&mut conn).await, 200);
    advance(Duration::from_millis(4999)).await;
    assert!(
        open_and_silent(&mut conn).await,
        "closed before the idle timeout"
    );

    advance(Duration::from_millis(1)).await;
    assert!(
        closed(&mut conn).await,
        "an idle connection outlived the idle timeout"
    );
    let metrics = metrics_text(&app).await;
    assert_metric(&metrics, "manychat_agent_connections_timed_out_total 1");
}

#[tokio::test(start_paused = true)]
async fn a_slow_or_missing_request_head_is_cut_off_at_the_header_timeout() {
    let _frozen = FrozenClock::freeze();
    let app = quiet_app_with("HTTP_HEADER_TIMEOUT_MS", "2000").await;
    let mut silent = connect(&app).await;
    let mut trickling = connect(&app).await;
    let mut kept = connect(&app).await;
    assert_eq!(get_health(&mut kept).await, 200);
    trickling
        .write_all(b"GET /health HTTP/1.1\r\nHost: agent.test\r\n")
        .await
        .unwrap();

    // A header line every second keeps bytes coming, but the head is never finished.
    advance(Duration::from_millis(1000)).await;
    trickling.write_all(b"X-Trickle: 1\r\n").await.unwrap();
    advance(Duration::from_millis(999)).await;
    assert!(open_and_silent(&mut silent).await);
    assert!(open_and_silent(&mut trickling).await);

    advance(Duration::from_millis(1)).await;
    assert!(closed(&mut silent).await, "a silent connection was kept");
    assert!(
        closed(&mut trickling).await,
        "a trickled head was waited on"
    );
    // A kept-alive connection between requests waits under the (longer) idle timeout.
    assert!(open_and_silent(&mut kept).await);
    assert_eq!(get_health(&mut kept).await, 200);
}

#[tokio::test(start_paused = true)]
async fn a_body_that_stops_arriving_is_answered_408_at_the_body_timeout() {
    let _frozen = FrozenClock::freeze();
    let model = quiet_model();
    let app =
        spawn_app_with(AppOptions::new(model.clone()).env("HTTP_BODY_TIMEOUT_MS", "3000")).await;
    let mut conn = connect(&app).await;
    let head = format!(
        "POST /v1/channels/manychat/message HTTP/1.1\r\nHost: agent.test\r\n\
         Authorization: Bearer {SECRET}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{{\"subscriber_id\":\"9301\","
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    // The handler starts (and its body clock with it) before the clock moves: the request is
    // in flight.
    until(async || app.metrics.requests_in_flight.get() == 1).await;
    advance(Duration::from_millis(2999)).await;
    assert!(
        open_and_silent(&mut conn).await,
        "answered before the body timeout"
    );

    advance(Duration::from_millis(1)).await;
    let (status, _, body) = read_response(&mut conn).await;
    assert_eq!(status, 408);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"], "request_timeout");
    assert_eq!(model.calls(), 0);
    assert!(app.outbox().await.is_empty());
    assert!(app.all_manychat_requests().await.is_empty());
}

#[tokio::test]
async fn connections_over_the_per_address_cap_are_closed_and_a_freed_slot_is_reused() {
    let app = quiet_app_with("HTTP_MAX_CONNECTIONS_PER_ADDRESS", "2").await;
    let mut first = connect(&app).await;
    let mut second = connect(&app).await;
    assert_eq!(get_health(&mut first).await, 200);
    assert_eq!(get_health(&mut second).await, 200);

    let mut third = connect(&app).await;
    assert!(
        closed(&mut third).await,
        "a third connection from one address"
    );

    let metrics = metrics_on(&mut second).await;
    assert_metric(&metrics, "manychat_agent_connections_refused_total 1");

    // Once a connection closes its slot is free again: a new connection is served as soon as
    // the server has seen the close (until then, each try is answered or refused, never both).
    drop(first);
    let deadline = RealDeadline::start();
    loop {
        let mut next = connect(&app).await;
        if let Some(status) = bounded("an answer or a close", health_or_closed(&mut next)).await {
            assert_eq!(status, 200);
            break;
        }
        assert!(
            !deadline.passed(),
            "the freed slot was never given to a new connection"
        );
    }
}

/// Asks `stream` for `/health`: the answer's status, or `None` when the server closed the
/// connection instead (refused at a cap).
async fn health_or_closed(stream: &mut TcpStream) -> Option<u16> {
    stream.write_all(HEALTH).await.ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&buf[9..12]).parse().ok()
}

/// At the cap, a new connection makes the open one longest without a complete request give
/// way; one that just finished a request stays.
#[tokio::test]
async fn connection_cap_a_new_connection_closes_the_one_longest_without_a_request() {
    let app = spawn_app_with(
        AppOptions::new(quiet_model())
            .env("HTTP_MAX_CONNECTIONS", "2")
            .env("HTTP_MAX_CONNECTIONS_PER_ADDRESS", "2")
            // Every test connection comes from loopback: as a trusted proxy it counts only
            // against the total cap.
            .env("TRUST_PROXY", "loopback"),
    )
    .await;
    let mut trickling = connect(&app).await;
    trickling
        .write_all(b"GET /health HTTP/1.1\r\n")
        .await
        .unwrap();
    let mut kept = connect(&app).await;
    assert_eq!(get_health(&mut kept).await, 200);

    let mut newcomer = connect(&app).await;
    assert_eq!(get_health(&mut newcomer).await, 200, "served at the cap");
    assert!(closed(&mut trickling).await, "the unfinished head gave way");
    assert!(open_and_silent(&mut kept).await);
    // Now the kept connection is the one longest without a request.
    let mut another = connect(&app).await;
    assert_eq!(get_health(&mut another).await, 200);
    assert!(closed(&mut kept).await);
    assert_eq!(get_health(&mut newcomer).await, 200);
}

/// A flood of connections trickling header bytes (more than the cap) cannot keep a real,
/// authenticated request out: it is answered at once, and the trickling heads are cut at the
/// header timeout however many bytes they send.
#[tokio::test(start_paused = true)]
async fn connection_cap_a_slow_header_flood_does_not_delay_a_real_request() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(ScriptedModel::replies(vec![reply_json("Here to help."); 2]));
    let app = spawn_app_with(
        AppOptions::new(model)
            .env("HTTP_MAX_CONNECTIONS", "8")
            .env("HTTP_MAX_CONNECTIONS_PER_ADDRESS", "8")
            .env("TRUST_PROXY", "loopback")
            .env("HTTP_HEADER_TIMEOUT_MS", "2000"),
    )
    .await;
    let mut flood = Vec::new();
    trickle_heads(&app, &mut flood, 24).await;
    // One byte each, for a while: bytes keep coming, no head is finished.
    for _ in 0..3 {
        advance(Duration::from_millis(500)).await;
        for stream in &mut flood {
            let _ = stream.write_all(b"X").await;
        }
        let_tasks_run().await;
    }
    // The real request is served inside the flood, with no wait on the clock.
    let served = tokio::time::timeout(Duration::from_secs(1), app.send("5552901", "Hello"));
    let (status, body) = served.await.expect("answered at once");
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec!["Here to help."]);
    // The flood keeps coming while the next one is answered too.
    trickle_heads(&app, &mut flood, 8).await;
    let served = tokio::time::timeout(Duration::from_secs(1), app.send("5552902", "Hello"));
    assert_eq!(served.await.expect("answered at once").0, 200);
    // No trickled head outlives the header timeout.
    advance(Duration::from_millis(2000)).await;
    for stream in &mut flood {
        assert!(closed(stream).await, "a trickled head was kept");
    }
    let metrics = app.metrics_text().await;
    assert_metric(&metrics, "manychat_agent_connections_evicted_total");
}

/// `n` more connections of the flood, each sending the start of a head it never finishes.
async fn trickle_heads(app: &TestApp, flood: &mut Vec<TcpStream>, n: usize) {
    let accepted = &app.metrics.connections_accepted;
    for _ in 0..n {
        let before = accepted.get();
        let mut stream = connect(app).await;
        stream.write_all(b"GET /health HTTP/1.1\r\n").await.unwrap();
        flood.push(stream);
        // The server accepts it (past the cap, once an older one gave way) before the next, and
        // before the clock moves: its header clock starts at the accept.
        until(async || accepted.get() > before).await;
    }
}

/// A whole request a smuggling test hides after a body; it must never be served.
const HIDDEN_REQUEST: &str = "POST /v1/channels/manychat/message HTTP/1.1\r\nHost: agent.test\r\n\
                              Content-Type: application/json\r\nContent-Length: 37\r\n\r\n\
                              {\"subscriber_id\":\"1\",\"text\":\"hidden\"}";

/// A response read from a connection: status, head, body.
type Response = (u16, String, Vec<u8>);

/// To a fresh app, sends `POST /health` with the `framing` header lines, an empty chunked body
/// and [`HIDDEN_REQUEST`] after it; the app, its model, the connection and the response.
async fn smuggle(framing: &str) -> (TestApp, Arc<ScriptedModel>, TcpStream, Response) {
    let model = Arc::new(ScriptedModel::replies(Vec::<String>::new()));
    let app = spawn_app(model.clone()).await;
    let smuggled = format!(
        "POST /health HTTP/1.1\r\nHost: agent.test\r\n{framing}\r\n0\r\n\r\n{HIDDEN_REQUEST}"
    );
    let mut stream = connect(&app).await;
    stream.write_all(smuggled.as_bytes()).await.unwrap();
    let response = read_response(&mut stream).await;
    (app, model, stream, response)
}

/// After [`smuggle`]: the connection is not reused and the hidden request was never served.
async fn assert_nothing_hidden_served(
    app: &TestApp,
    model: &ScriptedModel,
    stream: &mut TcpStream,
) {
    assert!(closed(stream).await, "the connection is not reused");
    app.settle().await;
    assert_eq!(model.calls(), 0, "the hidden request was not served");
}

/// Only `Transfer-Encoding: chunked` frames a body: `identity, chunked` is refused naming the
/// header, and a request hidden in its body is never served.
#[tokio::test]
async fn framing_a_transfer_encoding_other_than_chunked_is_refused_and_nothing_hidden_is_served() {
    let (app, model, mut stream, (status, head, body)) =
        smuggle("Transfer-Encoding: identity, chunked\r\n").await;
    assert_eq!(status, 400, "{head}");
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["field"], "transfer-encoding");
    assert_nothing_hidden_served(&app, &model, &mut stream).await;

    // Plain chunked is still accepted.
    let mut stream = connect(&app).await;
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: agent.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_response(&mut stream).await.0, 200);
}

/// `Content-Length` beside `Transfer-Encoding: chunked`: hyper frames the body by the chunks,
/// drops the length, answers that one request and closes the connection, so a request hidden
/// after the chunks (where a proxy trusting the length would see a body) is never served.
#[tokio::test]
async fn framing_content_length_beside_chunked_is_answered_once_and_the_connection_closed() {
    let (app, model, mut stream, (status, head, _)) =
        smuggle("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n").await;
    // The route's own answer (GET only here), on a connection marked to close.
    assert_eq!(status, 405, "{head}");
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    assert_nothing_hidden_served(&app, &model, &mut stream).await;
}

async fn metrics_on(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: agent.test\r\n\r\n")
        .await
        .unwrap();
    let (status, _, body) = read_response(stream).await;
    assert_eq!(status, 200);
    String::from_utf8(body).unwrap()
}

async fn metrics_text(app: &TestApp) -> String {
    let mut conn = connect(app).await;
    metrics_on(&mut conn).await
}

// On a frozen clock: in real time the budget would refill while the test sends its requests.
#[tokio::test(start_paused = true)]
async fn authenticated_traffic_is_limited_per_contact_not_per_address() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(ScriptedModel::replies(vec![reply_json("Noted."); 700]));
    // The hold off: the busy contact's messages past the hourly rate escalate, and each would
    // otherwise read the handoff tag through the ManyChat limiter, which a frozen clock never
    // refills.
    let app = spawn_app_with(AppOptions::new(model).edit(|dir| {
        crate::selling::edit_rules(dir, |rules| rules["handoff"]["holdHours"] = 0.into())
    }))
    .await;
    // More than the old per-address budget, all from 127.0.0.1, for different contacts.
    for i in 0..301 {
        let (status, _) = app.send(&format!("77{i:05}"), "Hello").await;
        assert_eq!(status, 200, "contact {i} was limited by its address");
    }
    // One contact has 300 a minute of its own.
    let busy = "7799999";
    for i in 0..300 {
        let (status, _) = app.send(busy, "Hello again").await;
        assert_eq!(status, 200, "message {i}");
    }
    let recorded = app.turns(busy).await;
    let response = app
        .post_json(&json!({"subscriber_id": busy, "text": "One more"}))
        .await;
    assert_eq!(response.status().as_u16(), 429);
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "Retry-After {retry_after}");
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"error": "rate_limited"})
    );
    assert_eq!(app.turns(busy).await, recorded, "nothing stored for it");
    // Another contact from the same address is still answered.
    assert_eq!(app.send("7788888", "Hi").await.0, 200);
    assert!(
        recorded.iter().filter(|t| t.role == Role::User).count() >= 300,
        "every allowed message was recorded"
    );
}

#[tokio::test(start_paused = true)]
async fn requests_without_a_valid_secret_are_still_limited_per_address() {
    let _frozen = FrozenClock::freeze();
    let app = spawn_app(quiet_model()).await;
    let wrong = |app: &TestApp| {
        app.http
            .post(app.message_url())
            .bearer_auth("not-the-secret-0123456789")
            .body("{}")
            .send()
    };
    for _ in 0..300 {
        assert_eq!(wrong(&app).await.unwrap().status().as_u16(), 401);
    }
    let refused = wrong(&app).await.unwrap();
    assert_eq!(refused.status().as_u16(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    // The address's bad guesses do not touch ManyChat's authenticated traffic from it (a
    // keyword escalation: answered without the model).
    let keyword = app.rules()["escalationKeywords"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = app.send("7700001", &keyword).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn fifo_in_config_is_refused_and_reload_does_not_wedge() {
    let logs = manychat_agent::observability::capture_global();
    let mut options = AppOptions::new(quiet_model());
    options.reload_on_sighup = true;
    let app = spawn_app_with(options).await;
    let original = app.escalation_copy();
    // Served once, so the app has installed its SIGHUP handler (without one, SIGHUP ends the
    // test process).
    assert_eq!(escalation_copy_served(&app, "9200").await, original);
    let mut rules: Value = app.rules();
    let keyword = rules["escalationKeywords"][0].as_str().unwrap().to_owned();
    let rules_path = app.config_dir.join("rules.json");

    // rules.json becomes a FIFO: before the fix, the reload waited on it forever, and so did
    // every later SIGHUP.
    std::fs::remove_file(&rules_path).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &rules_path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    send_sighup();
    let refused = |text: &str| {
        text.lines().any(|l| {
            l.contains("rules.json") && l.contains("is not a regular file") && l.contains("$")
        })
    };
    let deadline = RealDeadline::start();
    while !refused(&logs.text()) && !deadline.passed() {
        real_pause().await;
    }
    assert!(refused(&logs.text()), "the refusal names the file and rule");
    // (`escalation_copy_served` reads rules.json, which would now wait on the FIFO.)
    let (_, body) = app.send("9201", &format!("I want a {keyword}")).await;
    assert_eq!(block_texts(&body), vec![original.clone()]);

    // A valid rules.json and the next SIGHUP: applied.
    std::fs::remove_file(&rules_path).unwrap();
    let copy = "A colleague will write to you.";
    let edit = (&mut rules, rules_path.as_path());
    sighup_applies_a_new_escalation_copy(&app, edit, "9202", &original, copy).await;
}

#[tokio::test]
async fn a_lone_surrogate_in_text_is_answered_not_refused() {
    let model = Arc::new(ScriptedModel::replies([reply_json("Happy to help.")]));
    let app = spawn_app(model.clone()).await;
    // A message cut mid-emoji: the high half of U+1F600 without its low half.
    let response = app
        .post_raw(r#"{"subscriber_id":"9401","text":"I love it \ud83d"}"#)
        .await;
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(block_texts(&body), vec!["Happy to help."]);
    assert_eq!(model.calls(), 1);
    app.settle().await;
    let turns = app.turns("9401").await;
    let message = turns.iter().find(|t| t.role == Role::User).unwrap();
    assert_eq!(message.text, "I love it \u{FFFD}");
}

#[tokio::test]
async fn an_unknown_body_key_is_logged_without_its_name() {
    let logs = manychat_agent::observability::capture_global();
    let app = spawn_app(quiet_model()).await;
    let key = "zanzibar_quokka_preference";
    let response = app
        .post_json(&json!({"subscriber_id": "9501", "text": "hi", key: 1}))
        .await;
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await.unwrap();
    // The HTTP contract is unchanged: the caller is told which field.
    assert_eq!(body["field"], key);
    let text = logs.text();
    assert!(
        text.contains("(unknown key)"),
        "the refusal is logged: {text}"
    );
    assert!(!text.contains(key), "the key's name reached a log line");
}

#[tokio::test]
async fn metrics_requires_the_bearer_token_when_one_is_set() {
    let token = "metrics-token-0123456789";
    let app = quiet_app_with("METRICS_TOKEN", token).await;
    let url = format!("{}/metrics", app.address);
    let missing = app.http.get(&url).send().await.unwrap();
    assert_eq!(missing.status().as_u16(), 401);
    assert_eq!(missing.headers()["www-authenticate"], "Bearer");
    let wrong = app
        .http
        .get(&url)
        .bearer_auth("metrics-token-0123456780")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    let secret = app.http.get(&url).bearer_auth(SECRET).send().await.unwrap();
    assert_eq!(
        secret.status().as_u16(),
        401,
        "the ManyChat secret is not it"
    );
    let right = app.http.get(&url).bearer_auth(token).send().await.unwrap();
    assert_eq!(right.status().as_u16(), 200);
    assert!(right.text().await.unwrap().contains("manychat_agent_"));

    // Without METRICS_TOKEN the endpoint stays open, as before.
    let open = spawn_app(quiet_model()).await;
    assert_eq!(open.get("/metrics").await.status().as_u16(), 200);
}
