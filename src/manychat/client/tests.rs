use super::*;
use crate::manychat::contact::{INVENTED_IDENTIFIERS, full_get_info_fixture};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TOKEN: &str = "4400001:not-a-real-token";
const SUB: &str = "5550001";

fn sub() -> SubscriberId {
    SubscriberId::parse(SUB).expect("valid id")
}

fn client_for(base_url: &str) -> ManyChatClient {
    ManyChatClient::new(base_url, &Secret::new(TOKEN), ManyChatLimiter::new())
        .expect("client builds")
}

/// A fake ManyChat answering every request with `status` and `body`.
async fn server_answering(status: u16, body: Value) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(status).set_body_json(body))
        .mount(&server)
        .await;
    server
}

async fn success_server() -> MockServer {
    server_answering(200, json!({"status": "success", "data": {}})).await
}

/// The one request the server received, checked for the headers every call carries.
async fn only_request(server: &MockServer) -> wiremock::Request {
    let mut requests = server.received_requests().await.expect("recording is on");
    assert_eq!(requests.len(), 1, "exactly one request");
    let request = requests.remove(0);
    assert_eq!(
        request.headers.get("authorization").map(|v| v.as_bytes()),
        Some(format!("Bearer {TOKEN}").as_bytes())
    );
    request
}

/// One write call of the client, to run against a fake ManyChat.
enum Write {
    SendFlow(&'static str),
    AddTag(&'static str),
    RemoveTag(&'static str),
    SetField(&'static str, Value),
    SetFields(Vec<(&'static str, Value)>),
}

impl Write {
    async fn run(&self, client: &ManyChatClient) -> Result<(), ManyChatError> {
        match self {
            Write::SendFlow(flow_ns) => client.send_flow(&sub(), flow_ns).await,
            Write::AddTag(tag) => client.add_tag(&sub(), tag).await,
            Write::RemoveTag(tag) => client.remove_tag(&sub(), tag).await,
            Write::SetField(field, value) => client.set_field(&sub(), field, value).await,
            Write::SetFields(fields) => client.set_fields(&sub(), fields).await,
        }
    }
}

/// The error `write` ends in against a fake ManyChat answering every request with `status`
/// and `body`.
async fn refused(status: u16, body: Value, write: Write) -> ManyChatError {
    let server = server_answering(status, body).await;
    write
        .run(&client_for(&server.uri()))
        .await
        .expect_err("refused")
}

/// `write` succeeds, and is the one JSON POST to `expected_path` with `expected_body`.
async fn assert_write_posts(write: Write, expected_path: &str, expected_body: Value) {
    let server = success_server().await;
    write
        .run(&client_for(&server.uri()))
        .await
        .expect("written");
    let request = only_request(&server).await;
    assert_eq!(request.method.as_str(), "POST");
    assert_eq!(request.url.path(), expected_path);
    assert_eq!(request.url.query(), None);
    assert_eq!(
        request.headers.get("content-type").map(|v| v.as_bytes()),
        Some(&b"application/json"[..])
    );
    let body: Value = request.body_json().expect("JSON body");
    assert_eq!(body, expected_body);
}

/// Each write is the one JSON POST to its endpoint, its body carrying the subscriber and the
/// flow, tag or configured field value.
#[tokio::test]
async fn spec_012_verification_5_each_write_body_carries_subscriber_and_its_value() {
    let table = [
        (
            Write::SendFlow("content20260101000000_000001"),
            "/fb/sending/sendFlow",
            json!({"subscriber_id": 5550001, "flow_ns": "content20260101000000_000001"}),
        ),
        (
            Write::AddTag("interested-foundation"),
            "/fb/subscriber/addTagByName",
            json!({"subscriber_id": 5550001, "tag_name": "interested-foundation"}),
        ),
        (
            Write::RemoveTag("interested-foundation"),
            "/fb/subscriber/removeTagByName",
            json!({"subscriber_id": 5550001, "tag_name": "interested-foundation"}),
        ),
        (
            Write::SetField("sales_stage", json!("qualifying")),
            "/fb/subscriber/setCustomFieldByName",
            json!({
                "subscriber_id": 5550001,
                "field_name": "sales_stage",
                "field_value": "qualifying"
            }),
        ),
        (
            Write::SetFields(vec![
                ("ai_message", json!("Your seat is booked.")),
                ("ai_delivery_id", json!("17.0")),
            ]),
            "/fb/subscriber/setCustomFields",
            json!({
                "subscriber_id": 5550001,
                "fields": [
                    {"field_name": "ai_message", "field_value": "Your seat is booked."},
                    {"field_name": "ai_delivery_id", "field_value": "17.0"}
                ]
            }),
        ),
    ];
    for (write, expected_path, expected_body) in table {
        assert_write_posts(write, expected_path, expected_body).await;
    }
}

#[tokio::test]
async fn spec_012_verification_5_set_field_keeps_the_value_typed() {
    let server = success_server().await;
    let client = client_for(&server.uri());
    client
        .set_field(&sub(), "seats", &json!(3))
        .await
        .expect("set");
    client
        .set_field(&sub(), "opted_in", &json!(true))
        .await
        .expect("set");
    let requests = server.received_requests().await.expect("recording is on");
    let values: Vec<Value> = requests
        .iter()
        .map(|r| r.body_json::<Value>().expect("JSON")["field_value"].clone())
        .collect();
    assert_eq!(values, vec![json!(3), json!(true)]);
}

/// ManyChat's setCustomFields takes 1 to 20 fields: anything else is refused before a request.
#[tokio::test]
async fn set_fields_outside_one_to_twenty_fields_is_refused_without_a_request() {
    let server = success_server().await;
    let client = client_for(&server.uri());
    let many: Vec<(String, Value)> = (0..=MAX_FIELDS_PER_WRITE)
        .map(|i| (format!("field_{i}"), json!("x")))
        .collect();
    let many: Vec<(&str, Value)> = many.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    for fields in [Vec::new(), many] {
        let error = client
            .set_fields(&sub(), &fields)
            .await
            .expect_err("refused");
        assert_eq!(error.kind(), "config");
    }
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn spec_024_get_contact_sends_getinfo_with_the_subscriber_query() {
    let server = success_server().await;
    client_for(&server.uri())
        .get_contact(&sub(), Duration::from_millis(1500))
        .await
        .expect("read");
    let request = only_request(&server).await;
    assert_eq!(request.method.as_str(), "GET");
    assert_eq!(request.url.path(), "/fb/subscriber/getInfo");
    assert_eq!(request.url.query(), Some("subscriber_id=5550001"));
    assert!(request.body.is_empty());
}

#[tokio::test]
async fn spec_024_verification_1_getinfo_identifiers_never_leave_the_client() {
    let server = server_answering(200, full_get_info_fixture()).await;
    let record = client_for(&server.uri())
        .get_contact(&sub(), Duration::from_millis(1500))
        .await
        .expect("read");
    assert_eq!(record.tags, vec!["interested_foundation", "source-ad"]);
    assert_eq!(record.field("experience"), Some(&json!("none")));
    let everything = format!("{record:?} {:?} {:?}", record.tags, record.fields);
    for identifier in INVENTED_IDENTIFIERS {
        assert!(
            !everything.contains(identifier),
            "{identifier} left the client"
        );
    }
}

/// How each refusal ManyChat answers with is read: its error, its kind, and whether it is
/// retried (a 429 and a 5xx are; a 4xx and a 200 carrying `status: error` are not).
#[tokio::test]
async fn system_3_5_each_refusal_is_its_error_and_only_429_and_5xx_are_retryable() {
    let table = [
        (
            400,
            json!({"status": "error", "message": "Validation error",
                   "details": {"messages": [{"message": "Tag not found"}]}}),
            Write::AddTag("missing-tag"),
            ManyChatError::Http {
                status: 400,
                code: None,
                endpoint: "addTagByName",
            },
            "http_4xx",
            false,
        ),
        (
            429,
            json!({"status": "error"}),
            Write::SendFlow("content1"),
            ManyChatError::RateLimited,
            "rate_limited",
            true,
        ),
        (
            500,
            json!({}),
            Write::SendFlow("content1"),
            ManyChatError::Server { status: 500 },
            "http_5xx",
            true,
        ),
        (
            200,
            json!({"status": "error", "message": "Flow is not published", "code": 3011}),
            Write::SendFlow("content1"),
            ManyChatError::Api {
                status: 200,
                code: Some(3011),
                endpoint: "sendFlow",
            },
            "api_error",
            false,
        ),
    ];
    for (status, body, write, expected, kind, retryable) in table {
        let error = refused(status, body, write).await;
        assert_eq!(error, expected, "HTTP {status}");
        assert_eq!(error.kind(), kind, "HTTP {status}");
        assert_eq!(error.is_retryable(), retryable, "HTTP {status}");
    }
}

#[tokio::test]
async fn c5_a_manychat_refusal_keeps_its_code_and_never_its_text() {
    let error = refused(
        400,
        json!({"status": "error", "code": 2400,
               "message": "Invalid value for Jane Quokka (+1 555 014 2267, jane@quokka.test)",
               "details": {"messages": [{"message": "Jane Quokka already has this tag"}]}}),
        Write::AddTag("vip"),
    )
    .await;
    assert_eq!(
        error,
        ManyChatError::Http {
            status: 400,
            code: Some(2400),
            endpoint: "addTagByName"
        }
    );
    assert_eq!(
        error.to_string(),
        "ManyChat refused addTagByName (HTTP 400, code 2400)"
    );
}

#[tokio::test]
async fn system_3_5_http_200_without_success_envelope_is_undecodable() {
    let server = MockServer::start().await;
    Mock::given(path("/fb/sending/sendFlow"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>ok</html>"))
        .mount(&server)
        .await;
    let error = client_for(&server.uri())
        .send_flow(&sub(), "content1")
        .await
        .expect_err("not an envelope");
    assert_eq!(error.kind(), "decode");
    assert!(!error.is_retryable());
}

#[tokio::test]
async fn system_3_5_connection_refused_is_a_retryable_network_error() {
    // Bind to learn a free port, then close it so the connection is refused.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    let error = client_for(&format!("http://{address}"))
        .send_flow(&sub(), "content1")
        .await
        .expect_err("refused");
    assert_eq!(error, ManyChatError::Network("connect"));
    assert!(error.is_retryable());
}

#[tokio::test]
async fn c5_error_message_never_keeps_the_subscriber_id_or_the_field_text() {
    let error = refused(
        400,
        json!({"status": "error",
               "message": "Subscriber 5550001 rejected value 'Hello Alex, see you'"}),
        Write::SetField("ai_message", json!("Hello Alex, see you")),
    )
    .await;
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains(SUB), "{shown}");
    assert!(!shown.contains("Hello Alex"), "{shown}");
    assert!(!shown.contains("rejected value"), "{shown}");

    let error = refused(
        400,
        json!({"status": "error", "message": "bad value \"Line \\\"one\\\"\\nHello Alex\""}),
        Write::SetField("ai_message", json!("Line \"one\"\nHello Alex")),
    )
    .await;
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains("Hello Alex"), "{shown}");
    assert!(!shown.contains("bad value"), "{shown}");
}

#[tokio::test]
async fn spec_024_get_contact_timeout_is_honoured() {
    // Real time: reqwest's IO does not run under a paused tokio clock. Kept under 300 ms.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"status": "success", "data": {}}))
                .set_delay(Duration::from_millis(250)),
        )
        .mount(&server)
        .await;
    let started = std::time::Instant::now();
    let error = client_for(&server.uri())
        .get_contact(&sub(), Duration::from_millis(50))
        .await
        .expect_err("too slow");
    assert_eq!(error, ManyChatError::Timeout(Duration::from_millis(50)));
    assert!(error.is_retryable());
    assert!(
        started.elapsed() < Duration::from_millis(240),
        "gave up at the timeout, not at the server's answer: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn system_3_5_every_request_waits_for_the_shared_limiter() {
    let server = success_server().await;
    // A write, the delivery handshake's write of several fields and its read of the contact,
    // each after another user of the same bucket took the whole burst.
    for call in ["addTagByName", "setCustomFields", "getInfo"] {
        let limiter = ManyChatLimiter::new();
        let client = ManyChatClient::new(&server.uri(), &Secret::new(TOKEN), limiter.clone())
            .expect("client builds");
        for _ in 0..5 {
            limiter.acquire().await;
        }
        let started = std::time::Instant::now();
        match call {
            "addTagByName" => client.add_tag(&sub(), "vip").await.expect("tagged"),
            "setCustomFields" => client
                .set_fields(
                    &sub(),
                    &[
                        ("ai_message", json!("Hi.")),
                        ("ai_delivery_id", json!("1.0")),
                    ],
                )
                .await
                .expect("written"),
            _ => drop(
                client
                    .get_contact(&sub(), Duration::from_secs(5))
                    .await
                    .expect("read"),
            ),
        }
        assert!(
            started.elapsed() >= Duration::from_millis(90),
            "{call} waited for a slot: {:?}",
            started.elapsed()
        );
    }
}

/// Collects everything the fmt layer writes, without timestamps (digits in a timestamp could
/// match an identifier by chance).
#[derive(Clone, Default)]
struct CapturedLogs(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLogs {
    /// Captures this crate's events (a library's could match an identifier's digits by chance)
    /// until the guard drops.
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        crate::observability::keep_two_dispatchers();
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("manychat_agent=trace"))
            .without_time()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// Forgets what was captured so far, after rebuilding the callsite interest cache: a
    /// callsite first reached by a parallel test without a subscriber can cache "never" while
    /// this one is being installed; once every callsite is registered, rebuilding the cache
    /// makes the next pass deterministic.
    fn restart(&self) {
        tracing::callsite::rebuild_interest_cache();
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }
}

/// One success, one refusal quoting the id and the text, and one getInfo of the fixture.
async fn exercise_every_log_path() {
    let ok = success_server().await;
    client_for(&ok.uri())
        .set_field(&sub(), "ai_message", &json!("Hello Alex, see you"))
        .await
        .expect("set");
    refused(
        400,
        json!({"status": "error", "message": "Subscriber 5550001: 'Hello Alex, see you'"}),
        Write::SetField("ai_message", json!("Hello Alex, see you")),
    )
    .await;
    let info = server_answering(200, full_get_info_fixture()).await;
    client_for(&info.uri())
        .get_contact(&sub(), Duration::from_millis(1500))
        .await
        .expect("read");
}

#[tokio::test]
async fn c5_client_logs_carry_endpoint_sizes_status_and_kind_only() {
    let logs = CapturedLogs::default();
    // hyper prints the server's port: only this crate's events are captured.
    let guard = logs.install();
    exercise_every_log_path().await;
    logs.restart();
    exercise_every_log_path().await;
    drop(guard);

    let text = logs.text();
    assert!(text.contains("setCustomFieldByName"), "{text}");
    assert!(text.contains("http_4xx"), "{text}");
    assert!(text.contains("getInfo"), "{text}");
    assert!(text.contains("request_bytes"), "{text}");
    let forbidden = [
        SUB,
        "Hello Alex",
        TOKEN,
        "not-a-real-token",
        "subscriber_id=",
    ];
    for needle in forbidden.iter().chain(INVENTED_IDENTIFIERS.iter()) {
        assert!(!text.contains(needle), "{needle} in the logs: {text}");
    }
}

#[tokio::test]
async fn error_code_is_kept_in_the_error_its_text_and_the_log_line() {
    let server = server_answering(
        400,
        json!({"status": "error", "message": "Flow is not published", "code": 3011,
               "details": {"messages": [{"message": "Flow is not published"}]}}),
    )
    .await;
    let logs = CapturedLogs::default();
    let guard = logs.install();
    // Twice, as in the test above: the second pass runs with every callsite registered.
    let _ = client_for(&server.uri())
        .send_flow(&sub(), "content1")
        .await;
    logs.restart();
    let error = client_for(&server.uri())
        .send_flow(&sub(), "content1")
        .await
        .expect_err("refused");
    drop(guard);
    assert_eq!(error.code(), Some(3011));
    assert_eq!(
        error.to_string(),
        "ManyChat refused sendFlow (HTTP 400, code 3011)"
    );
    let text = logs.text();
    assert!(text.contains("code=3011"), "{text}");

    // A long number in `code` is the shape of an id, not a code: dropped.
    let error = refused(
        400,
        json!({"status": "error", "message": "x", "code": 5550001}),
        Write::SendFlow("content1"),
    )
    .await;
    assert_eq!(error.code(), None);
}

#[tokio::test]
async fn account_reads_flows_tags_and_fields_with_gets() {
    let server = MockServer::start().await;
    for (route, data) in [
        (
            "/fb/page/getFlows",
            json!({"flows": [{"ns": "content1", "name": "Guide", "folder_id": 3}], "folders": []}),
        ),
        ("/fb/page/getTags", json!([{"id": 1, "name": "vip"}])),
        (
            "/fb/page/getCustomFields",
            json!([{"id": 1, "name": "ai_message", "type": "text", "description": ""}]),
        ),
    ] {
        Mock::given(method("GET"))
            .and(path(route))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"status": "success", "data": data})),
            )
            .mount(&server)
            .await;
    }
    let account = client_for(&server.uri()).account().await.expect("read");
    assert_eq!(account.flows[0].ns, "content1");
    assert_eq!(account.tags, vec!["vip"]);
    assert_eq!(account.fields[0].kind, "text");
    let requests = server.received_requests().await.expect("recording is on");
    assert_eq!(requests.len(), 3);
    assert!(requests.iter().all(|r| r.method.as_str() == "GET"));
}

#[test]
fn client_refuses_a_bad_base_url_or_token_and_never_prints_the_token() {
    let limiter = ManyChatLimiter::new();
    let refused = |base: &str, token: &str| {
        ManyChatClient::new(base, &Secret::new(token), limiter.clone())
            .expect_err("refused")
            .kind()
    };
    assert_eq!(refused("api.manychat.com", TOKEN), "config");
    assert_eq!(refused("ftp://api.manychat.com", TOKEN), "config");
    assert_eq!(refused("https://api.manychat.com", "  "), "config");
    assert_eq!(refused("https://api.manychat.com", "bad\ntoken"), "config");

    let client = ManyChatClient::new("https://api.manychat.com/", &Secret::new(TOKEN), limiter)
        .expect("valid");
    let debug = format!("{client:?}");
    assert!(!debug.contains("not-a-real-token"), "{debug}");
    assert_eq!(
        client.url(Endpoint::SendFlow),
        "https://api.manychat.com/fb/sending/sendFlow"
    );
}

/// Every request of the process waits out the `Retry-After` ManyChat gave on a 429, whatever
/// sends it (here a tag after a refused trigger): nothing reaches ManyChat before it passes.
#[tokio::test(start_paused = true)]
async fn system_3_5_every_request_waits_out_a_retry_after_manychat_gave() {
    // Tokio's paused clock moves only by `advance` while this blocking task runs.
    let (release, held) = std::sync::mpsc::channel::<()>();
    tokio::task::spawn_blocking(move || {
        let _ = held.recv();
    });
    let real_pause =
        || tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(20)));
    let server = MockServer::start().await;
    Mock::given(path("/fb/sending/sendFlow"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("Retry-After", "20")
                .set_body_json(json!({"status": "error"})),
        )
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"status": "success"})))
        .mount(&server)
        .await;
    let client = client_for(&server.uri());
    let refused = client.send_flow(&sub(), "content1").await;
    assert_eq!(refused, Err(ManyChatError::RateLimited));

    let tagging = client.clone();
    let tag = tokio::spawn(async move { tagging.add_tag(&sub(), "vip").await });
    let received = async || server.received_requests().await.unwrap_or_default().len();
    for _ in 0..5 {
        real_pause().await.unwrap();
    }
    tokio::time::advance(Duration::from_secs(19)).await;
    for _ in 0..5 {
        real_pause().await.unwrap();
    }
    assert_eq!(received().await, 1, "nothing sent within the 20 s asked");
    tokio::time::advance(Duration::from_secs(2)).await;
    for _ in 0..50 {
        if tag.is_finished() {
            break;
        }
        real_pause().await.unwrap();
    }
    assert!(tag.await.unwrap().is_ok(), "sent once the 20 s passed");
    assert_eq!(received().await, 2);
    drop(release);
}
