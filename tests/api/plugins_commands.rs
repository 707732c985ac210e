//! The `plugin` commands, run as a user runs them: `plugin new` adds a checked skeleton all or
//! nothing, its keys in the documented order; `plugin try` makes one signed call, a write needs
//! `--yes`, and an endpoint that refuses exits non-zero; and `serve` refuses to start without a
//! tool's secret, naming the variable only.

use std::path::Path;

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::*;
use crate::plugins_helpers::*;

fn binary() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
}

/// A copy of the demo tenant whose plugin tools call `base`.
fn demo_with_plugins(base: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_demo_tenant(dir.path());
    write_plugins(dir.path(), &plugins_json(base));
    dir
}

/// `plugin try seats_left` for `subscriber`, about the handbuilding class.
fn try_seats_left(subscriber: &'static str) -> Vec<&'static str> {
    vec![
        "try",
        "seats_left",
        "--subscriber",
        subscriber,
        "--arg",
        "class=handbuilding",
    ]
}

/// `plugin try create_lead` for `subscriber` (wheel basics), without `--yes`.
fn try_create_lead(subscriber: &'static str) -> Vec<&'static str> {
    vec![
        "try",
        "create_lead",
        "--subscriber",
        subscriber,
        "--arg",
        "class=wheel_basics",
        "--arg",
        "summary=Wants wheel.",
    ]
}

/// `plugin_command` on a blocking thread, so the test's endpoint keeps answering meanwhile.
fn plugin_on_a_blocking_thread(
    dir: &Path,
    args: Vec<&'static str>,
) -> tokio::task::JoinHandle<std::process::Output> {
    let dir = dir.to_owned();
    tokio::task::spawn_blocking(move || plugin_command(&dir, &args))
}

fn plugin_command(dir: &Path, args: &[&str]) -> std::process::Output {
    binary()
        .arg("plugin")
        .args(args)
        .env_clear()
        .env("CONFIG_DIR", dir)
        .env(SECRET_ENV, PLUGIN_SECRET)
        .output()
        .unwrap()
}

/// A copy of the demo tenant and the path of its `plugins.json` (not there yet).
fn demo_tenant_without_plugins() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    copy_demo_tenant(dir.path());
    let file = dir.path().join("plugins.json");
    (dir, file)
}

/// `plugin new seats_left --read` in `dir`, which succeeds.
fn new_read_skeleton(dir: &Path) -> std::process::Output {
    let made = plugin_command(dir, &["new", "seats_left", "--read"]);
    assert_eq!(made.status.code(), Some(0), "{made:?}");
    made
}

/// Where each key first appears in `text`, after `from`.
fn key_positions(text: &str, from: usize, keys: &[&str]) -> Vec<usize> {
    keys.iter()
        .map(|k| from + text[from..].find(&format!("\"{k}\":")).expect(k))
        .collect()
}

#[test]
fn plugin_new_adds_a_checked_skeleton_all_or_nothing() {
    let (dir, file) = demo_tenant_without_plugins();

    for usage in [
        vec!["new", "seats_left"],
        vec!["new", "seats_left", "--read", "--write"],
    ] {
        assert_eq!(
            plugin_command(dir.path(), &usage).status.code(),
            Some(2),
            "{usage:?}"
        );
    }
    assert!(!file.exists());

    let made = new_read_skeleton(dir.path());
    let printed = String::from_utf8_lossy(&made.stdout);
    assert!(printed.contains("webhook-signature") && printed.contains("\"subscriber_id\""));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(written["tools"][0]["name"], "seats_left");
    assert_eq!(written["tools"][0]["kind"], "read");
    let check = || {
        binary()
            .args(["config", "check"])
            .env_clear()
            .env("CONFIG_DIR", dir.path())
            .output()
            .unwrap()
    };
    let checked = check();
    assert_eq!(checked.status.code(), Some(1), "{checked:?}");
    assert!(
        String::from_utf8_lossy(&checked.stderr).contains(
            "plugins.json: $.tools[0].description: is still the placeholder `plugin new` wrote"
        ),
        "the skeleton's description must be replaced: {checked:?}"
    );
    let described = std::fs::read_to_string(&file).unwrap().replace(
        "What this looks up, and when to use it.",
        "How many seats are left in a class. Use when the contact asks if there is room.",
    );
    std::fs::write(&file, described).unwrap();
    let checked = check();
    assert_eq!(
        checked.status.code(),
        Some(0),
        "the skeleton, described, passes config check: {checked:?}"
    );

    let before = std::fs::read(&file).unwrap();
    for refused in [
        vec!["new", "seats_left", "--write"],
        vec!["new", "get_contact", "--write"],
        vec!["new", "Bad-Name", "--write"],
        vec![
            "new",
            "create_lead",
            "--write",
            "--url",
            "http://example.test/",
        ],
    ] {
        let output = plugin_command(dir.path(), &refused);
        assert_eq!(output.status.code(), Some(1), "{refused:?}");
        assert_eq!(
            std::fs::read(&file).unwrap(),
            before,
            "{refused:?}: untouched"
        );
    }
    std::fs::write(&file, "{ not json").unwrap();
    let output = plugin_command(dir.path(), &["new", "create_lead", "--write"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{ not json");
}

#[test]
fn plugin_new_writes_keys_in_the_documented_order_and_keeps_the_files_own() {
    let (dir, file) = demo_tenant_without_plugins();
    let order = [
        "name",
        "kind",
        "url",
        "secretEnv",
        "description",
        "parameters",
    ];

    // A new file: the entry's keys as the documented example orders them.
    new_read_skeleton(dir.path());
    let text = std::fs::read_to_string(&file).unwrap();
    let at = key_positions(&text, 0, &[&order[..], &["result"]].concat());
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");

    // An existing file in an order of its own, with its spacing: kept byte for byte, and the
    // new entry follows in the documented order.
    let own = "{\"tools\": [ {\"url\": \"https://crm.example.test/[lead]\", \"name\": \"create_lead\", \
               \"kind\": \"write\", \"secretEnv\": \"PLUGIN_CRM_SECRET\", \
               \"description\": \"Record the lead.\", \
               \"parameters\": {\"summary\": {\"type\": \"note\", \"maxLength\": 300}}} ] }\n";
    std::fs::write(&file, own).unwrap();
    let made = plugin_command(dir.path(), &["new", "call_back", "--write"]);
    assert_eq!(made.status.code(), Some(0), "{made:?}");
    let text = std::fs::read_to_string(&file).unwrap();
    let kept = own
        .trim_end()
        .trim_end_matches('}')
        .trim_end()
        .trim_end_matches(']')
        .trim_end();
    assert!(
        text.starts_with(kept),
        "the file's own text is kept: {text}"
    );
    let entry = text.find("\"call_back\"").unwrap() - "\"name\": ".len();
    let at = key_positions(&text, entry, &order);
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
    let written: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(written["tools"][1]["name"], "call_back");
    assert_eq!(
        written["tools"][0]["url"],
        "https://crm.example.test/[lead]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_try_makes_one_signed_call_and_a_write_needs_yes() {
    let server = endpoint(json!({"seats": 5, "next_date": "Monday"})).await;
    let dir = demo_with_plugins(&server.uri());
    let run = |args| plugin_on_a_blocking_thread(dir.path(), args);

    let read = run(try_seats_left("8120")).await.unwrap();
    assert_eq!(read.status.code(), Some(0), "{read:?}");
    let printed = String::from_utf8_lossy(&read.stdout);
    assert!(
        printed.contains("\"seats\":5") && printed.contains("Monday"),
        "{printed}"
    );
    assert_eq!(
        signed_requests(&server, SEATS).await,
        vec![
            json!({"tool": "seats_left", "subscriber_id": "8120", "arguments": {"class": "handbuilding"}})
        ]
    );

    let args = try_create_lead("8120");
    let unconfirmed = run(args.clone()).await.unwrap();
    assert_eq!(unconfirmed.status.code(), Some(1));
    assert!(
        signed_requests(&server, LEAD).await.is_empty(),
        "nothing without --yes"
    );
    let mut confirmed = args;
    confirmed.push("--yes");
    let written = run(confirmed).await.unwrap();
    assert_eq!(written.status.code(), Some(0), "{written:?}");
    let printed = String::from_utf8_lossy(&written.stdout);
    assert!(printed.contains("\"status\":\"performed\""), "{printed}");
    assert_eq!(signed_requests(&server, LEAD).await.len(), 1);
}

/// `plugin try` against an endpoint that refuses (a wrong secret's 401, any non-2xx) prints
/// what it sent and what came of it, and exits 1: a script or a person sees the failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_try_exits_non_zero_when_the_endpoint_refuses() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401))
        .mount(&server)
        .await;
    let dir = demo_with_plugins(&server.uri());
    let run = |args| plugin_on_a_blocking_thread(dir.path(), args);
    let read = run(try_seats_left("8121")).await.unwrap();
    assert_eq!(read.status.code(), Some(1), "{read:?}");
    assert!(
        String::from_utf8_lossy(&read.stdout).contains("request: POST "),
        "{read:?}"
    );
    let mut confirmed = try_create_lead("8121");
    confirmed.push("--yes");
    let write = run(confirmed).await.unwrap();
    assert_eq!(write.status.code(), Some(1), "{write:?}");
    assert!(
        String::from_utf8_lossy(&write.stdout).contains("\"status\":\"failed\""),
        "{write:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[test]
fn plugin_serve_refuses_to_start_without_a_tools_secret_naming_the_variable_only() {
    let dir = demo_with_plugins("https://ops.example.test");
    let output = binary()
        .arg("serve")
        .env_clear()
        .env("CONFIG_DIR", dir.path())
        .env("MANYCHAT_SHARED_SECRET", "a-long-enough-shared-secret-0001")
        .env("PUBLIC_BASE_URL", "https://agent.example.test")
        .env("MANYCHAT_API_TOKEN", "123:token")
        .env("MANYCHAT_REPLY_FLOW_NS", "content_reply_flow_0001")
        .env("AGENT_MODEL", "mock:demo")
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", dir.path().join("a.db").display()),
        )
        .env("PORT", "0")
        .env(SECRET_ENV, "whsec_not-base64-value!")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(errors.contains(SECRET_ENV), "{errors}");
    assert!(!errors.contains("not-base64-value"), "{errors}");
}
