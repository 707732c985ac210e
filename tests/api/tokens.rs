//! SYSTEM 6 (019) contact tokens through the real store, the outbox worker and the binary:
//! where an issued token is written, how a failed write is retried and superseded, `tokens
//! backfill`, and that a token never reaches a log line or a stored error.

use std::collections::HashMap;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use manychat_agent::clock::Clock;
use manychat_agent::ids::{Secret, SubscriberId};
use manychat_agent::manychat::{ManyChatClient, ManyChatLimiter};
use manychat_agent::model::mock::ScriptedModel;
use manychat_agent::store::{Conversation, OutboxKind, OutboxStatus, Store};
use manychat_agent::tokens::{self, IssueOutcome, TokenService};
use serde_json::{Value, json};
use tokio_util::task::TaskTracker;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::helpers::*;

const SET_FIELD: &str = "/fb/subscriber/setCustomFieldByName";

async fn app_with_field(field: &str) -> TestApp {
    let model = Arc::new(ScriptedModel::replies(Vec::<String>::new()));
    spawn_app_with(AppOptions::new(model).env("MANYCHAT_TOKEN_FIELD", field)).await
}

/// A token service beside `app`, on the app's clock: the rows it queues fall due on the clock
/// the app's worker claims by.
fn service(app: &TestApp, field: &str) -> TokenService {
    service_for(app.store.clone(), &app.manychat, field, app.clock)
}

fn service_for(
    store: Arc<dyn Store>,
    manychat: &MockServer,
    field: &str,
    clock: Clock,
) -> TokenService {
    let client = ManyChatClient::new(
        &manychat.uri(),
        &Secret::new("123:test-token"),
        ManyChatLimiter::new(),
    )
    .expect("client for the fake ManyChat");
    TokenService::new(store, client, field, clock)
}

/// The values written to `field`, in order.
async fn written_tokens(app: &TestApp, field: &str) -> Vec<String> {
    token_writes(&app.manychat, field).await
}

async fn token_writes(manychat: &MockServer, field: &str) -> Vec<String> {
    bodies_on(manychat, SET_FIELD)
        .await
        .into_iter()
        .filter(|body| body["field_name"] == field)
        .filter_map(|body| body["field_value"].as_str().map(str::to_owned))
        .collect()
}

/// Issues the contact a token again, on its conversation as the store now holds it.
async fn issue_again(
    app: &TestApp,
    service: &TokenService,
    conversation: &Conversation,
) -> IssueOutcome {
    let stored = reload(app.store.as_ref(), conversation).await;
    service.issue_and_write(&stored).await.unwrap()
}

async fn reload(store: &dyn Store, conversation: &Conversation) -> Conversation {
    store
        .conversation(conversation.id)
        .await
        .unwrap()
        .expect("the conversation exists")
}

/// setCustomFieldByName answers `status` with ManyChat's error envelope, quoting the value it
/// was sent (as ManyChat's validation messages do), `times` times.
async fn field_write_fails(app: &TestApp, status: u16, times: u64) {
    Mock::given(method("POST"))
        .and(path(SET_FIELD))
        .respond_with(EchoingError(status))
        .up_to_n_times(times)
        .with_priority(1)
        .mount(&app.manychat)
        .await;
}

struct EchoingError(u16);

impl Respond for EchoingError {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let value = body["field_value"].as_str().unwrap_or_default();
        ResponseTemplate::new(self.0).set_body_json(json!({
            "status": "error",
            "message": format!("Value {value} is not accepted for this field"),
        }))
    }
}

#[tokio::test]
async fn system_019_issued_token_is_written_to_the_token_field_and_only_its_hash_stored() {
    let app = app_with_field("contact_key").await;
    let conversation = app.conversation("7100001").await;
    assert_eq!(conversation.token_hash, None);

    let outcome = service(&app, "contact_key")
        .issue_and_write(&conversation)
        .await
        .unwrap();
    assert_eq!(outcome, IssueOutcome::Written { generation: 1 });

    let requests = app.all_manychat_requests().await;
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, SET_FIELD);
    assert_eq!(requests[0].body["subscriber_id"], json!(7100001));
    assert_eq!(requests[0].body["field_name"], "contact_key");
    let token = requests[0].body["field_value"].as_str().unwrap().to_owned();
    assert_eq!(token.len(), 43);

    let stored = reload(app.store.as_ref(), &conversation).await;
    assert_eq!(stored.token_hash, Some(tokens::hash(&token)));
    assert_eq!(stored.previous_token_hash, None);
    assert_eq!(stored.token_generation, 1);
    assert!(stored.token_issued_at.is_some());
    assert!(
        app.store.outbox_rows().await.unwrap().is_empty(),
        "a written token queues nothing"
    );
    assert!(
        !format!("{stored:?}").contains(&token),
        "the plain token is not stored on the conversation"
    );
    assert_eq!(
        tokens::bind(&stored, Some(&token)),
        tokens::Binding::Bound,
        "the written token binds the next request"
    );
}

#[tokio::test]
async fn system_019_failed_write_is_queued_and_the_worker_writes_it_to_the_token_field() {
    let app = app_with_field("contact_key").await;
    let conversation = app.conversation("7100002").await;
    field_write_fails(&app, 503, 1).await;

    let outcome = service(&app, "contact_key")
        .issue_and_write(&conversation)
        .await
        .unwrap();
    let IssueOutcome::Queued { generation, row } = outcome else {
        panic!("a failed write is queued, got {outcome:?}");
    };
    assert_eq!(generation, 1);
    let queued = app.store.outbox_row(row).await.unwrap().unwrap();
    assert_eq!(queued.kind, OutboxKind::ContactToken);
    assert_eq!(queued.status, OutboxStatus::Pending);
    assert_eq!(queued.payload["generation"], json!(1));

    assert_eq!(app.worker.run_once().await.unwrap(), 1);
    let delivered = app.store.outbox_row(row).await.unwrap().unwrap();
    assert_eq!(delivered.status, OutboxStatus::Delivered);
    assert_eq!(
        delivered.payload,
        json!({"generation": 1}),
        "the delivered row keeps no token"
    );

    let writes = written_tokens(&app, "contact_key").await;
    assert_eq!(
        writes.len(),
        2,
        "the failed inline write, then the worker's"
    );
    assert_eq!(writes[0], writes[1], "the worker writes the same token");
    let stored = reload(app.store.as_ref(), &conversation).await;
    assert_eq!(stored.token_hash, Some(tokens::hash(&writes[1])));
    let last = app.all_manychat_requests().await.pop().unwrap();
    assert_eq!(last.body["subscriber_id"], json!(7100002));
    assert_eq!(
        last.body["field_name"], "contact_key",
        "MANYCHAT_TOKEN_FIELD"
    );
}

#[tokio::test]
async fn system_019_superseded_generation_is_not_written() {
    let app = app_with_field("ai_token").await;
    let conversation = app.conversation("7100003").await;
    let tokens_service = service(&app, "ai_token");
    field_write_fails(&app, 503, 1).await;
    let IssueOutcome::Queued { row, .. } =
        tokens_service.issue_and_write(&conversation).await.unwrap()
    else {
        panic!("the first write fails and is queued");
    };
    // A later unbound request issues again, and that write lands.
    let newer = issue_again(&app, &tokens_service, &conversation).await;
    assert_eq!(newer, IssueOutcome::Written { generation: 2 });
    let before = written_tokens(&app, "ai_token").await;
    assert_eq!(before.len(), 2);
    let (old_token, new_token) = (&before[0], &before[1]);

    assert_eq!(app.worker.run_once().await.unwrap(), 1);
    let settled = app.store.outbox_row(row).await.unwrap().unwrap();
    assert_eq!(
        settled.status,
        OutboxStatus::Delivered,
        "settled as obsolete"
    );
    assert_eq!(
        written_tokens(&app, "ai_token").await,
        before,
        "the superseded token is not written over the newer one"
    );
    let stored = reload(app.store.as_ref(), &conversation).await;
    assert_eq!(stored.token_generation, 2);
    assert_eq!(stored.token_hash, Some(tokens::hash(new_token)));
    assert_eq!(stored.previous_token_hash, Some(tokens::hash(old_token)));
}

#[tokio::test(start_paused = true)]
async fn system_019_write_not_done_by_response_time_is_left_to_the_outbox() {
    let _frozen = FrozenClock::freeze();
    let app = app_with_field("ai_token").await;
    let conversation = app.conversation("7100004").await;
    // ManyChat takes far longer than the turn has left.
    Mock::given(method("POST"))
        .and(path(SET_FIELD))
        .respond_with(manychat_success_after(Duration::from_secs(10)))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&app.manychat)
        .await;
    let tasks = TaskTracker::new();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
    let handle = service(&app, "ai_token").start(&tasks, conversation.clone(), deadline);
    // The write has reached ManyChat and hangs there when the response is due.
    until(async || !written_tokens(&app, "ai_token").await.is_empty()).await;
    assert!(!handle.is_finished());
    tokio::time::advance(Duration::from_millis(500)).await;
    let outcome = handle.await.unwrap().unwrap();
    let IssueOutcome::Queued { generation, row } = outcome else {
        panic!("the slow write is left to the outbox, got {outcome:?}");
    };
    assert_eq!(generation, 1);
    assert!(tokio::time::Instant::now() >= deadline);

    // The row is due at once; the app's clock may be anchored a moment apart from the test's.
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(app.worker.run_once().await.unwrap(), 1);
    assert_eq!(
        app.store.outbox_row(row).await.unwrap().unwrap().status,
        OutboxStatus::Delivered
    );
    let stored = reload(app.store.as_ref(), &conversation).await;
    let writes = written_tokens(&app, "ai_token").await;
    let last = writes.last().expect("the worker wrote the token");
    assert_eq!(stored.token_hash, Some(tokens::hash(last)));

    // A bound request issues nothing.
    let bound = service(&app, "ai_token")
        .after_request(
            &tasks,
            &stored,
            &tokens::Binding::Bound,
            Some(last),
            tokio::time::Instant::now(),
        )
        .await;
    assert!(bound.is_none());
}

#[tokio::test]
async fn system_019_token_never_in_any_log_line_or_stored_error() {
    let logs = manychat_agent::observability::capture_global();
    let app = app_with_field("ai_token").await;
    let conversation = app.conversation("7100005").await;
    let tokens_service = service(&app, "ai_token");

    // Inline write fails (retryable), the worker's attempt is refused (dead letter); both
    // answers quote the value they were sent.
    field_write_fails(&app, 503, 1).await;
    field_write_fails(&app, 400, 1).await;
    let IssueOutcome::Queued { row, .. } =
        tokens_service.issue_and_write(&conversation).await.unwrap()
    else {
        panic!("the first write fails and is queued");
    };
    assert_eq!(app.worker.run_once().await.unwrap(), 1);
    let failed = app.store.outbox_row(row).await.unwrap().unwrap();
    assert_eq!(failed.status, OutboxStatus::Failed);
    // Then a token that is written at once.
    let written = issue_again(&app, &tokens_service, &conversation).await;
    assert_eq!(written, IssueOutcome::Written { generation: 2 });

    let issued = written_tokens(&app, "ai_token").await;
    assert_eq!(issued.len(), 3);
    let text = logs.text();
    assert!(
        text.contains(&conversation.id.to_string()),
        "the capture sees this test's lines"
    );
    let last_error = failed.last_error.unwrap_or_default();
    assert!(!last_error.is_empty());
    for token in &issued {
        assert!(!text.contains(token.as_str()), "a log line holds a token");
        assert!(
            !last_error.contains(token.as_str()),
            "the stored error holds a token"
        );
    }
}

// --- tokens backfill ---------------------------------------------------------------------------

/// A tenant folder and a SQLite store the binary and the test share.
struct BackfillFixture {
    dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    manychat: MockServer,
}

impl BackfillFixture {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        copy_demo_tenant(&dir.path().join("config"));
        let store = manychat_agent::store::connect(&Self::database_url(dir.path()))
            .await
            .unwrap();
        let manychat = MockServer::start().await;
        manychat_accepts_everything(&manychat).await;
        Self {
            dir,
            store,
            manychat,
        }
    }

    fn database_url(dir: &std::path::Path) -> String {
        format!("sqlite://{}", dir.join("agent.db").display())
    }

    async fn contact(&self, subscriber: &str, days_ago: i64) -> Conversation {
        let id = SubscriberId::parse(subscriber).unwrap();
        let at = chrono::Utc::now() - chrono::Duration::days(days_ago);
        self.store
            .conversation_for(&id, "whatsapp", at)
            .await
            .unwrap()
    }

    /// Runs `manychat-agent tokens backfill [args]` off the async runtime.
    async fn run(&self, args: &[&str]) -> Output {
        let env: HashMap<&str, String> = HashMap::from([
            (
                "CONFIG_DIR",
                self.dir.path().join("config").display().to_string(),
            ),
            ("DATABASE_URL", Self::database_url(self.dir.path())),
            ("MANYCHAT_SHARED_SECRET", SECRET.to_owned()),
            ("PUBLIC_BASE_URL", "https://agent.example.test".to_owned()),
            ("MANYCHAT_API_TOKEN", "123:test-token".to_owned()),
            ("MANYCHAT_API_BASE", self.manychat.uri()),
            ("MANYCHAT_REPLY_FLOW_NS", REPLY_FLOW.to_owned()),
        ]);
        let args: Vec<String> = ["tokens", "backfill"]
            .iter()
            .chain(args)
            .map(|a| (*a).to_owned())
            .collect();
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
                .args(args)
                .env_clear()
                .envs(env)
                .output()
                .expect("the binary runs")
        })
        .await
        .unwrap()
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

impl BackfillFixture {
    /// A contact for each `(subscriber, days_ago)`, as [`Self::contact`] makes it.
    async fn contacts(&self, wanted: &[(&str, i64)]) -> Vec<Conversation> {
        let mut contacts = Vec::new();
        for (subscriber, days_ago) in wanted {
            contacts.push(self.contact(subscriber, *days_ago).await);
        }
        contacts
    }

    /// Runs the backfill with `args`, which must exit with `code` and say `says`; its output.
    async fn expect(&self, args: &[&str], code: i32, says: &str) -> Output {
        let output = self.run(args).await;
        assert_eq!(output.status.code(), Some(code), "{output:?}");
        assert!(stdout(&output).contains(says), "{}", stdout(&output));
        output
    }
}

#[tokio::test]
async fn system_019_backfill_is_idempotent() {
    let fixture = BackfillFixture::new().await;
    let recent = fixture.contacts(&[("7200001", 1), ("7200002", 29)]).await;
    let stale = fixture.contact("7200003", 40).await;
    let holder = fixture.contact("7200004", 2).await;
    let holder_generation = fixture
        .store
        .set_token(
            holder.id,
            &tokens::hash("holder-token-fixture"),
            chrono::Utc::now(),
        )
        .await
        .unwrap();

    let first = fixture
        .expect(&[], 0, "issued 2 tokens: 2 written, 0 queued")
        .await;
    let writes = token_writes(&fixture.manychat, "ai_token").await;
    assert_eq!(writes.len(), 2);
    let mut after_first = Vec::new();
    for conversation in &recent {
        let stored = reload(fixture.store.as_ref(), conversation).await;
        assert_eq!(stored.token_generation, 1);
        let hash = stored
            .token_hash
            .clone()
            .expect("a recent contact got a token");
        assert!(
            writes.iter().any(|t| tokens::hash(t) == hash),
            "the token written to ManyChat is the one whose hash is stored"
        );
        after_first.push(stored);
    }
    let untouched = reload(fixture.store.as_ref(), &holder).await;
    assert_eq!(untouched.token_generation, holder_generation);
    assert_eq!(
        untouched.token_hash,
        Some(tokens::hash("holder-token-fixture"))
    );
    assert_eq!(
        reload(fixture.store.as_ref(), &stale).await.token_hash,
        None,
        "contacts inactive for over 30 days are left alone"
    );
    for token in &writes {
        assert!(
            !stdout(&first).contains(token.as_str()),
            "stdout holds a token"
        );
    }

    fixture.expect(&[], 0, "issued 0 tokens").await;
    assert_eq!(token_writes(&fixture.manychat, "ai_token").await.len(), 2);
    for stored in &after_first {
        assert_eq!(&reload(fixture.store.as_ref(), stored).await, stored);
    }
}

#[tokio::test]
async fn system_019_backfill_check_exit_code() {
    let fixture = BackfillFixture::new().await;
    let lacking = fixture.contacts(&[("7300001", 1), ("7300002", 3)]).await;

    fixture
        .expect(&["--check"], 1, "2 recent contacts have no token")
        .await;
    assert!(
        fixture
            .manychat
            .received_requests()
            .await
            .unwrap()
            .is_empty(),
        "--check writes nothing to ManyChat"
    );
    for conversation in &lacking {
        assert_eq!(
            reload(fixture.store.as_ref(), conversation)
                .await
                .token_hash,
            None,
            "--check issues nothing"
        );
    }

    let backfill = fixture.run(&[]).await;
    assert_eq!(backfill.status.code(), Some(0), "{backfill:?}");
    fixture
        .expect(&["--check"], 0, "0 recent contacts have no token")
        .await;
}
