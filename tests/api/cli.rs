//! The command line (SYSTEM 5.4) and the golden evals (SYSTEM 9), run as a user runs them.

use std::collections::HashMap;
use std::process::Command;

use crate::helpers::*;

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
}

/// The binary with `args`, in an empty environment (the caller adds the variables it means).
fn command(args: &[&str]) -> Command {
    let mut command = binary();
    command.args(args).env_clear();
    command
}

/// A folder with the demo tenant in its `config/`: the folder's guard and the config path.
fn service_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_demo_tenant(&config);
    (dir, config)
}

/// What a refused command (exit 1) wrote to stderr.
fn refusal(output: &std::process::Output) -> String {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    stderr(output)
}

/// What `command`, refused (exit 1), wrote to stderr, which names every one of `variables`.
fn refusal_naming(command: &mut Command, variables: &[&str]) -> String {
    let errors = refusal(&command.output().unwrap());
    for variable in variables {
        assert!(
            errors.contains(variable),
            "{variable} not named in:\n{errors}"
        );
    }
    errors
}

/// The command was refused (exit 1), saying `says` on stderr.
fn assert_refused(output: &std::process::Output, says: &str) {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stderr(output).contains(says), "{output:?}");
}

/// `manychat-agent config check` on the tenant in `dir`, with `env` besides `CONFIG_DIR`.
fn config_check(dir: &std::path::Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut check = command(&["config", "check"]);
    check.env("CONFIG_DIR", dir);
    check.envs(env.iter().copied()).output().unwrap()
}

#[tokio::test]
async fn system_9_golden_evals_pass_with_the_mock_model() {
    let env: HashMap<String, String> = [(
        "CONFIG_DIR".to_owned(),
        manychat_agent::config::examples::shipped_examples()
            .display()
            .to_string(),
    )]
    .into();
    let report =
        manychat_agent::evals::runner::run(&env, &repo_path("evals/golden"), Some("mock:demo"))
            .await
            .expect("suite runs");
    assert!(report.results.len() >= 30);
    assert_eq!(report.failed(), 0, "{report}");
}

#[test]
fn system_5_4_config_check_prints_every_error_with_file_path_and_rule() {
    let dir = tempfile::tempdir().unwrap();
    copy_demo_tenant(dir.path());
    let tools = dir.path().join("tools.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&tools).unwrap()).unwrap();
    value["flows"][0]["flowNs"] = serde_json::json!("content_reply_flow_0001");
    value["notes"][0]["maxLength"] = serde_json::json!(900);
    std::fs::write(&tools, value.to_string()).unwrap();

    let output = config_check(
        dir.path(),
        &[("MANYCHAT_REPLY_FLOW_NS", "content_reply_flow_0001")],
    );
    let errors = refusal(&output);
    assert!(errors.contains("tools.json: $.flows[0].flowNs"), "{errors}");
    assert!(
        errors.contains("tools.json: $.notes[0].maxLength"),
        "{errors}"
    );

    copy_demo_tenant(dir.path());
    let output = config_check(dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}

#[test]
fn system_5_2_serve_refuses_to_start_naming_the_variable() {
    let errors = refusal_naming(
        command(&["serve"])
            .env("MANYCHAT_SHARED_SECRET", "zq9-tiny")
            .env("PUBLIC_BASE_URL", "http://insecure.example.test")
            .env("RACE_DEADLINE_MS", "9000")
            .env("MODEL_ABORT_MS", "8000"),
        &[
            "MANYCHAT_SHARED_SECRET",
            "PUBLIC_BASE_URL",
            "MODEL_ABORT_MS",
        ],
    );
    assert!(!errors.contains("zq9-tiny"), "a secret is never echoed");
}

/// Runs `serve` on the demo tenant with every required variable set and `vars` beside them,
/// expects it to refuse at start, and returns what it wrote to stderr.
fn serve_refusal(vars: &[(&str, &str)]) -> String {
    let (dir, config) = service_dir();
    let mut command = binary();
    command
        .arg("serve")
        .env_clear()
        .env("CONFIG_DIR", &config)
        .env("MANYCHAT_SHARED_SECRET", "fixture-secret-aaaaaaaa")
        .env("PUBLIC_BASE_URL", "https://agent.example.test")
        .env("MANYCHAT_API_TOKEN", "123:test-token")
        .env("MANYCHAT_REPLY_FLOW_NS", "content_reply_flow_9999")
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", dir.path().join("agent.db").display()),
        )
        .env("PORT", "0");
    for (name, value) in vars {
        command.env(name, value);
    }
    refusal(&command.output().unwrap())
}

/// A model with no known price under a USD cap would never be capped, so
/// `serve` refuses to start, naming the model and the price variables that fix it.
#[test]
fn serve_refuses_an_unpriced_model_under_a_usd_cap_naming_the_fix() {
    let errors = serve_refusal(&[
        ("AGENT_MODEL", "openai:gpt-unlisted-test"),
        ("OPENAI_API_KEY", "sk-fixture"),
    ]);
    for part in [
        "openai:gpt-unlisted-test",
        "budget.dailyCostCapUsd",
        "AGENT_PRICE_INPUT_PER_MTOK",
        "AGENT_PRICE_OUTPUT_PER_MTOK",
    ] {
        assert!(errors.contains(part), "{part} missing: {errors}");
    }
}

/// `serve` with `AGENT_REASONING_EFFORT` set and a model that takes no reasoning setting
/// refuses at start, naming the model and the variable; a Gemini model without its key names
/// `GOOGLE_GENERATIVE_AI_API_KEY`, and a level outside the four is named too.
#[test]
fn reasoning_effort_serve_refuses_at_start_a_model_that_takes_no_such_setting_naming_it() {
    let errors = serve_refusal(&[
        ("AGENT_MODEL", "openai:gpt-4.1-mini"),
        ("OPENAI_API_KEY", "sk-fixture"),
        ("AGENT_REASONING_EFFORT", "low"),
    ]);
    for part in ["openai:gpt-4.1-mini", "AGENT_REASONING_EFFORT"] {
        assert!(errors.contains(part), "{part} missing: {errors}");
    }
    let errors = serve_refusal(&[
        ("AGENT_MODEL", "google:gemini-2.0-flash"),
        ("GOOGLE_GENERATIVE_AI_API_KEY", "google-fixture"),
        ("AGENT_REASONING_EFFORT", "high"),
    ]);
    assert!(errors.contains("google:gemini-2.0-flash"), "{errors}");
    let errors = serve_refusal(&[
        ("AGENT_MODEL", "google:gemini-2.5-flash"),
        ("AGENT_REASONING_EFFORT", "low"),
    ]);
    assert!(errors.contains("GOOGLE_GENERATIVE_AI_API_KEY"), "{errors}");
    let errors = serve_refusal(&[
        ("AGENT_MODEL", "anthropic:claude-sonnet-4-5"),
        ("ANTHROPIC_API_KEY", "sk-ant-fixture"),
        ("AGENT_REASONING_EFFORT", "extreme"),
    ]);
    assert!(errors.contains("AGENT_REASONING_EFFORT"), "{errors}");
    assert!(errors.contains("minimal, low, medium or high"), "{errors}");
}

/// `serve` with nothing set names every missing variable in one run.
#[test]
fn serve_with_nothing_set_lists_every_problem_at_once() {
    let empty = tempfile::tempdir().unwrap();
    let errors = refusal_naming(
        command(&["serve"]).current_dir(empty.path()),
        &[
            "MANYCHAT_SHARED_SECRET",
            "PUBLIC_BASE_URL",
            "MANYCHAT_REPLY_FLOW_NS",
            "MANYCHAT_API_TOKEN",
            "AGENT_MODEL",
        ],
    );
    // The tenant config's problem is in the same run.
    assert!(errors.contains("CONFIG_DIR"), "{errors}");

    // A bad DATABASE_URL scheme and a provider without its key, in the same run too; the
    // password in the URL is not echoed.
    let output = command(&["serve"])
        .current_dir(empty.path())
        .env("AGENT_MODEL", "openai:gpt-4.1-mini")
        .env(
            "DATABASE_URL",
            "mysql://agent:pw-fixture-hidden@db.example.test/agent",
        )
        .output()
        .unwrap();
    let errors = refusal(&output);
    for variable in ["OPENAI_API_KEY", "DATABASE_URL", "MANYCHAT_SHARED_SECRET"] {
        assert!(
            errors.contains(variable),
            "{variable} missing from:\n{errors}"
        );
    }
    assert!(!errors.contains("pw-fixture-hidden"), "{errors}");
}

/// `worker` and `tokens backfill --check` ask only for what they use.
#[test]
fn commands_require_only_the_variables_they_use() {
    let (dir, config) = service_dir();
    let database = sqlite_file_url(dir.path());

    let output = command(&["worker"])
        .env("CONFIG_DIR", &config)
        .env("DATABASE_URL", &database)
        .output()
        .unwrap();
    let errors = refusal(&output);
    for needed in ["MANYCHAT_API_TOKEN", "MANYCHAT_REPLY_FLOW_NS"] {
        assert!(errors.contains(needed), "{needed} missing from:\n{errors}");
    }
    for unused in ["MANYCHAT_SHARED_SECRET", "PUBLIC_BASE_URL", "AGENT_MODEL"] {
        assert!(
            !errors.contains(unused),
            "worker asked for {unused}:\n{errors}"
        );
    }

    let output = command(&["tokens", "backfill", "--check"])
        .env("CONFIG_DIR", &config)
        .env("DATABASE_URL", &database)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("0 recent contacts have no token"),
        "{output:?}"
    );
}

/// A busy port is named, with what to do about it.
#[test]
fn a_busy_port_is_named() {
    let busy = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let (dir, config) = service_dir();
    let output = command(&["serve"])
        .env("CONFIG_DIR", &config)
        .env("DATABASE_URL", sqlite_file_url(dir.path()))
        .env("MANYCHAT_SHARED_SECRET", "fixture-secret-aaaaaaaa")
        .env("PUBLIC_BASE_URL", "https://agent.example.test")
        .env("MANYCHAT_API_TOKEN", "mc-fixture-token")
        .env("MANYCHAT_REPLY_FLOW_NS", "content20260101000000_000900")
        .env("AGENT_MODEL", "mock:demo")
        .env("PORT", port.to_string())
        .output()
        .unwrap();
    let errors = refusal(&output);
    assert!(
        errors.contains(&format!("port {port} is already in use")),
        "{errors}"
    );
}

/// The process makes its files private itself (umask 077 at start): the SQLite database it
/// creates is its user's alone even when started under a permissive umask, without systemd's
/// `UMask=0077`.
#[test]
fn the_database_files_are_private_whatever_the_umask_the_process_started_with() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, config) = service_dir();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    // A command that creates the database, under a permissive umask (a shell's usual 022).
    let output = Command::new("sh")
        .args(["-c", "umask 022 && exec \"$0\" tokens backfill --check"])
        .arg(env!("CARGO_BIN_EXE_manychat-agent"))
        .env_clear()
        .env("CONFIG_DIR", &config)
        .env("DATABASE_URL", sqlite_file_url(&data))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let files: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        files.iter().any(|f| f.ends_with("agent.db")),
        "the database was created: {files:?}"
    );
    for file in files {
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{} is mode {mode:o}", file.display());
    }
}

/// `config check` refuses a plugin tool's malformed secret as `serve` does, naming the
/// variable and never its value; and it never prints a control or bidirectional character of a
/// folder's name raw.
#[test]
fn config_check_refuses_a_malformed_plugin_secret_and_escapes_what_it_prints() {
    let dir = tempfile::tempdir().unwrap();
    copy_demo_tenant(dir.path());
    crate::plugins_helpers::write_plugins(
        dir.path(),
        &crate::plugins_helpers::plugins_json("http://127.0.0.1:9"),
    );
    let output = config_check(
        dir.path(),
        &[(
            crate::plugins_helpers::SECRET_ENV,
            "not-a-whsec-secret-value",
        )],
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let errors = stderr(&output);
    assert!(
        errors.contains(crate::plugins_helpers::SECRET_ENV),
        "{errors}"
    );
    assert!(!errors.contains("not-a-whsec-secret-value"), "{errors}");

    let odd = tempfile::tempdir().unwrap();
    let folder = odd.path().join("config\u{202e}txt.evil\u{1b}[2J");
    copy_demo_tenant(&folder);
    let output = config_check(&folder, &[]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed = format!(
        "{}{}",
        stderr(&output),
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(
        !printed.contains('\u{202e}') && !printed.contains('\u{1b}'),
        "{printed:?}"
    );
}

/// `config check` without MANYCHAT_REPLY_FLOW_NS says which check it could not make.
#[test]
fn config_check_says_the_reply_flow_check_was_skipped() {
    let dir = tempfile::tempdir().unwrap();
    copy_demo_tenant(dir.path());
    let output = config_check(dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("valid"), "{printed}");
    assert!(printed.contains("not checked"), "{printed}");
    assert!(printed.contains("MANYCHAT_REPLY_FLOW_NS"), "{printed}");

    let output = config_check(
        dir.path(),
        &[("MANYCHAT_REPLY_FLOW_NS", "content20260101000000_000900")],
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("not checked"));
}

/// A SQLite file holding two contacts, as a running service would have left it: returns the
/// `DATABASE_URL` and the first contact's conversation.
async fn database_with_two_contacts(
    dir: &std::path::Path,
) -> (String, manychat_agent::store::Conversation) {
    use manychat_agent::ids::SubscriberId;
    use manychat_agent::store::{NewOutboxRow, NewTurn, OutboxKind};
    let url = sqlite_file_url(dir);
    let store = manychat_agent::store::connect(&url).await.unwrap();
    let now = chrono::Utc::now();
    let mut first = None;
    for subscriber in ["5550101", "5550102"] {
        let subscriber = SubscriberId::parse(subscriber).unwrap();
        let conversation = store
            .conversation_for(&subscriber, "whatsapp", now)
            .await
            .unwrap();
        let old = now - chrono::Duration::days(100);
        store
            .record_turn(&NewTurn::user(
                conversation.id,
                "Invented private question",
                true,
                old,
            ))
            .await
            .unwrap();
        store
            .record_turn(&NewTurn::agent(
                conversation.id,
                "Invented private answer",
                "answered_inline",
                true,
                now,
            ))
            .await
            .unwrap();
        store.bump_rate(&subscriber, now).await.unwrap();
        store
            .enqueue(&NewOutboxRow::of(
                &conversation,
                OutboxKind::Reply,
                serde_json::json!({"messages": ["Invented private answer"]}),
                now,
            ))
            .await
            .unwrap();
        first.get_or_insert(conversation);
    }
    (url, first.unwrap())
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn forget_erases_one_contact_and_prints_counts_never_text() {
    let dir = tempfile::tempdir().unwrap();
    let (url, contact) = database_with_two_contacts(dir.path()).await;
    let forget = |id: &str| {
        command(&["forget", id])
            .env("DATABASE_URL", &url)
            .output()
            .unwrap()
    };

    let output = forget("5550101");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed = stdout(&output);
    assert_eq!(
        printed.trim(),
        format!(
            "forgot conversation {}; rows deleted: turns 2, outbox 1, nudges 0, \
             window_closings 0, rate_counters 1, manychat_flow_sends 0, turn_tickets 0, \
             hold_releases 0, conversations 1",
            contact.id
        )
    );
    assert!(!printed.contains("Invented"), "never the text");

    let store = manychat_agent::store::connect(&url).await.unwrap();
    assert_eq!(store.conversation(contact.id).await.unwrap(), None);
    assert!(store.turns(contact.id).await.unwrap().is_empty());
    let rows = store.outbox_rows().await.unwrap();
    assert_eq!(rows.len(), 1, "the other contact's row stays");
    assert_ne!(rows[0].conversation_id, contact.id);

    // Again: not found, said plainly, and not a failure (erasing twice is safe).
    let output = forget("5550101");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        stdout(&output).starts_with("contact not found"),
        "{output:?}"
    );

    // A bad id is refused, naming the rule.
    let output = forget("55501O1");
    assert_refused(&output, "digits");

    // A database that does not exist is not created empty.
    let missing = dir.path().join("elsewhere/agent.db");
    let output = command(&["forget", "5550102"])
        .env("DATABASE_URL", format!("sqlite://{}", missing.display()))
        .output()
        .unwrap();
    assert_refused(&output, "no SQLite database");
    assert!(!missing.exists());
}

#[tokio::test]
async fn one_contact_one_id_forget_and_simulate_refuse_a_padded_id() {
    let dir = tempfile::tempdir().unwrap();
    let (url, contact) = database_with_two_contacts(dir.path()).await;
    let output = command(&["forget", "05550101"])
        .env("DATABASE_URL", &url)
        .output()
        .unwrap();
    assert_refused(&output, "must not start with a zero");
    let store = manychat_agent::store::connect(&url).await.unwrap();
    assert!(store.conversation(contact.id).await.unwrap().is_some());

    // Refused before any request is made: nothing listens at this address.
    let output = binary()
        .args(["simulate", "--subscriber", "05550101", "hi"])
        .args(["--url", "http://127.0.0.1:9"])
        .env_clear()
        .env("MANYCHAT_SHARED_SECRET", "s".repeat(32))
        .output()
        .unwrap();
    assert_refused(&output, "must not start with a zero");
}

#[tokio::test]
async fn retention_run_clears_old_text_and_is_validated() {
    let dir = tempfile::tempdir().unwrap();
    let (url, contact) = database_with_two_contacts(dir.path()).await;
    let retention = |days: Option<&str>| {
        let mut command = binary();
        command
            .args(["retention", "run"])
            .env_clear()
            .env("DATABASE_URL", &url);
        if let Some(days) = days {
            command.env("RETENTION_DAYS", days);
        }
        command.output().unwrap()
    };

    let output = retention(Some("0"));
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stderr(&output).contains("RETENTION_DAYS: must be a whole number of days"));
    let output = retention(Some("off"));
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).contains("retention is off"), "{output:?}");

    // The default, 90 days: each contact's 100-day-old message loses its text.
    let output = retention(None);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        stdout(&output).trim(),
        "older than 90 days: text cleared from 2 turns, 0 settled outbox rows deleted"
    );
    let store = manychat_agent::store::connect(&url).await.unwrap();
    let turns = store.turns(contact.id).await.unwrap();
    assert_eq!(turns[0].text, "");
    assert_eq!(turns[0].role, manychat_agent::store::Role::User);
    assert_eq!(turns[1].text, "Invented private answer");
}

#[test]
fn eval_refuses_without_a_model_and_names_the_model_first() {
    let output = command(&["eval"])
        .env(
            "CONFIG_DIR",
            manychat_agent::config::examples::shipped_examples(),
        )
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(repo_path(""))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let errors = stderr(&output);
    assert!(
        errors.contains("AGENT_MODEL") && errors.contains("--model mock:demo"),
        "{errors}"
    );
    assert!(stdout(&output).is_empty(), "no case ran on a silent mock");

    let output = command(&["eval", "--model", "mock:demo"])
        .env(
            "CONFIG_DIR",
            manychat_agent::config::examples::shipped_examples(),
        )
        .current_dir(repo_path(""))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed = stdout(&output);
    let lines: Vec<&str> = printed.lines().collect();
    assert!(
        lines[0].starts_with("eval: model mock:demo (from --model), suite evals/golden, "),
        "{printed}"
    );
    assert_eq!(lines[1], "playbook: none (the no-playbook baseline)");
    assert!(
        lines[2].starts_with("eval record: none is written: a mock model's eval never counts"),
        "a mock's run says plainly that it records nothing: {printed}"
    );
    assert!(
        lines[3].starts_with("PASS "),
        "each case as it finishes: {printed}"
    );
    let cases = lines.iter().filter(|l| l.starts_with("PASS ")).count();
    assert!(
        printed.contains(&format!("{cases} cases: {cases} passed, 0 failed")),
        "{printed}"
    );
}

/// A running `demo` (stopped when dropped) and the banner it printed.
struct Demo {
    child: std::process::Child,
    banner: String,
    port: u16,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The demo started on the demo tenant and a fresh database in a folder of its own: the
/// folder's guard, the config path, the database URL and the demo.
fn started_demo() -> (tempfile::TempDir, std::path::PathBuf, String, Demo) {
    let (dir, config) = service_dir();
    let database = format!("sqlite://{}", dir.path().join("demo.db").display());
    let demo = start_demo(&config, &database);
    (dir, config, database, demo)
}

fn start_demo(config_dir: &std::path::Path, database: &str) -> Demo {
    let mut demo = command(&["demo"]);
    demo.env("CONFIG_DIR", config_dir)
        .env("DATABASE_URL", database);
    demo_from(demo)
}

/// `demo` run as `command` sets it up, on a port of its own, once its banner is printed.
fn demo_from(mut command: Command) -> Demo {
    use std::io::BufRead;
    let mut child = command
        .env("PORT", "0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (lines, banner_lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Drains the demo's stdout to its end (its `[sandbox]` lines come after the banner): a
        // closed pipe would fail the demo's next print.
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let _ = lines.send(line);
        }
    });
    let mut banner = String::new();
    let mut demo = Demo {
        child,
        banner: String::new(),
        port: 0,
    };
    loop {
        let line = banner_lines
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no banner: {banner}"));
        banner.push_str(&line);
        banner.push('\n');
        if line.starts_with("Its data lives in") {
            break;
        }
    }
    let port = piece_after(&banner, "running on http://127.0.0.1:", |rest| {
        rest.split_whitespace().next()
    })
    .parse()
    .unwrap_or_else(|_| panic!("a port in {banner}"));
    demo.banner = banner;
    demo.port = port;
    demo
}

/// The subscriber id in the banner's curl line.
fn banner_subscriber(banner: &str) -> String {
    let id = piece_after(banner, "\"subscriber_id\":\"", |rest| {
        rest.split('"').next()
    });
    assert!(
        id.len() == 15 && id.bytes().all(|b| b.is_ascii_digit()),
        "{id}"
    );
    assert!(banner.contains(&format!("subscriber {id}, a new one at each start")));
    id.to_owned()
}

fn secret_of(banner: &str) -> String {
    piece_after(banner, "Shared secret (new at each start): ", |rest| {
        rest.lines().next()
    })
    .to_owned()
}

#[test]
fn the_demo_says_what_it_relaxes_and_never_wedges() {
    let (dir, config) = service_dir();
    let rules_path = config.join("rules.json");
    let mut rules: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rules_path).unwrap()).unwrap();
    rules["maxTurnsPerConversation"] = serde_json::json!(1);
    std::fs::write(&rules_path, rules.to_string()).unwrap();
    let database_path = dir.path().join("demo.db");
    let database = format!("sqlite://{}", database_path.display());

    let first = start_demo(&config, &database);
    let banner = &first.banner;
    for promise in [
        "contact tokens are not enforced",
        "the shared secret is generated anew at each start",
        "Shared secret (new at each start): ",
        "After 1 messages without a 24-hour pause a contact is handed to a person",
        &format!("Its data lives in {}", database_path.display()),
    ] {
        assert!(banner.contains(promise), "{promise:?} in {banner}");
    }
    assert!(!banner.contains("shown once"), "{banner}");
    crate::console::demo_console_is_on_with_the_password_its_banner_prints(first.port, banner);
    let subscriber = banner_subscriber(banner);
    assert_ne!(subscriber, "1000001");
    let secret = secret_of(banner);

    let simulate = |args: &[&str]| {
        binary()
            .arg("simulate")
            .args(args)
            .args(["--url", &format!("http://127.0.0.1:{}", first.port)])
            .env_clear()
            .env("MANYCHAT_SHARED_SECRET", &secret)
            .env("DATABASE_URL", &database)
            .env("CONFIG_DIR", &config)
            .output()
            .unwrap()
    };
    // Without --subscriber: a new contact each run, answered, and named so it can go on.
    for _ in 0..2 {
        let output = simulate(&["How much are your courses?"]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let printed = stdout(&output);
        assert!(
            printed.starts_with("(a new contact: pass --subscriber "),
            "{printed}"
        );
        assert!(!printed.contains("handed to a person"), "{printed}");
    }
    // One contact past the cap (1 here): the second reply is the handoff copy, and says why.
    let output = simulate(&["--subscriber", "5550201", "How much are your courses?"]);
    assert!(
        !stdout(&output).contains("handed to a person"),
        "{output:?}"
    );
    let output = simulate(&["--subscriber", "5550201", "And the schedule?"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed = stdout(&output);
    assert!(
        printed.contains("(handed to a person before the model ran: the turn cap"),
        "{printed}"
    );
    drop(first);

    // A restart: a new secret and a new subscriber in the banner.
    let second = start_demo(&config, &database);
    assert_ne!(secret_of(&second.banner), secret);
    assert_ne!(banner_subscriber(&second.banner), subscriber);
}

/// SYSTEM 9: `eval` never falls back to the mock in silence, and its help says so rather than
/// promising a default model.
#[test]
fn system_9_eval_help_says_a_run_without_a_model_is_refused() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
        .args(["eval", "--help"])
        .output()
        .expect("the binary runs");
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(help.contains("refused"), "{help}");
    assert!(!help.contains("else mock:demo"), "{help}");
    // 031: the help says how a playbook version is evaluated and when a record is written.
    assert!(help.contains("PLAYBOOK_VERSION"), "{help}");
    assert!(help.contains("eval record"), "{help}");
}

#[test]
fn simulate_shows_what_the_agent_did_from_the_services_database_or_says_it_cannot() {
    let (dir, config, database, demo) = started_demo();
    let secret = secret_of(&demo.banner);
    let simulate = |database: &str| {
        binary()
            .args(["simulate", "--subscriber", "5550301"])
            .arg("How much is Wheel Throwing Basics?")
            .args(["--url", &format!("http://127.0.0.1:{}", demo.port)])
            .env_clear()
            .env("MANYCHAT_SHARED_SECRET", &secret)
            .env("DATABASE_URL", database)
            .env("CONFIG_DIR", &config)
            .output()
            .unwrap()
    };
    let output = simulate(&database);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed = stdout(&output);
    assert!(
        printed.contains(&format!(
            "(what the agent did, read from the SQLite database {}:)",
            dir.path().join("demo.db").display()
        )),
        "{printed}"
    );
    for did in [
        "  field intent set to prospect (done)",
        "  field funnel_stage set to offered (done)",
    ] {
        assert!(printed.contains(did), "{did:?} in {printed}");
    }

    let elsewhere = format!("sqlite://{}", dir.path().join("absent.db").display());
    let output = simulate(&elsewhere);
    let printed = stdout(&output);
    assert!(
        printed.contains("this command cannot read the SQLite database")
            && printed.contains("with its DATABASE_URL"),
        "{printed}"
    );
}

/// README's sale walk-through against the demo: four messages end in the payment handoff, the
/// fifth is held for the person (and `simulate` says so and how to release it), and after
/// `release` the contact is answered again.
#[test]
fn handoff_the_readme_sale_ends_held_and_simulate_says_how_to_release_it() {
    let (_dir, config, database, demo) = started_demo();
    let secret = secret_of(&demo.banner);
    let run = |args: &[&str]| {
        let output = binary()
            .args(args)
            .args(if args[0] == "simulate" {
                vec![
                    "--url".to_owned(),
                    format!("http://127.0.0.1:{}", demo.port),
                ]
            } else {
                vec![]
            })
            .env_clear()
            .env("MANYCHAT_SHARED_SECRET", &secret)
            .env("DATABASE_URL", &database)
            .env("CONFIG_DIR", &config)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        stdout(&output)
    };
    let say = |text: &str| run(&["simulate", "--subscriber", "5550401", text]);
    for text in [
        "How much is Wheel Throwing Basics?",
        "Can you send me the details for the wheel course?",
        "Great, how do I book and pay?",
    ] {
        let printed = say(text);
        assert!(!printed.contains("handed to a person"), "{printed}");
    }
    let printed = say("I have paid, here is my receipt");
    assert!(
        printed.contains("handed to a person, reason stored: payment_reported"),
        "{printed}"
    );

    let printed = say("Did you get it?");
    assert!(
        printed.contains("(held for a person: the contact was handed to a person at "),
        "{printed}"
    );
    assert!(
        printed.contains("when the tag needs-studio-reply is removed from the contact"),
        "{printed}"
    );
    assert!(
        printed.contains("manychat-agent release 5550401, or POST /v1/channels/manychat/release"),
        "{printed}"
    );
    assert!(!printed.contains("through the outbox"), "{printed}");

    assert!(run(&["release", "5550401"]).starts_with("released"));
    let printed = say("Did you get it?");
    assert!(!printed.contains("held for a person"), "{printed}");
}

#[tokio::test]
async fn handoff_release_command_hands_a_held_contact_back_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("agent.db").display());
    let config = dir.path().join("config");
    copy_demo_tenant(&config);
    let store = manychat_agent::store::connect(&url).await.unwrap();
    let subscriber = manychat_agent::ids::SubscriberId::parse("5550301").unwrap();
    let now = chrono::Utc::now();
    let conversation = store
        .conversation_for(&subscriber, "whatsapp", now)
        .await
        .unwrap();
    store.set_escalated(conversation.id, now).await.unwrap();
    let release = |id: &str| {
        command(&["release", id])
            .env("DATABASE_URL", &url)
            .env("CONFIG_DIR", &config)
            .output()
            .unwrap()
    };

    let output = release("5550301");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).starts_with("released"), "{output:?}");
    let stored = store.conversation(conversation.id).await.unwrap().unwrap();
    assert_eq!(stored.hold_release_reason.as_deref(), Some("released"));
    assert!(stored.hold_note_due);

    let output = release("5550301");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).starts_with("not held"), "{output:?}");
    let output = release("5550399");
    assert!(
        stdout(&output).starts_with("not held"),
        "an unknown contact: {output:?}"
    );
    let output = release("55503O1");
    assert_refused(&output, "digits");
}

/// A fresh clone as far as the commands can tell: the repo's shipped `config/` files (the
/// examples, their README and schemas) and none of an operator's `config/*.json`.
fn fresh_clone() -> tempfile::TempDir {
    let clone = tempfile::tempdir().unwrap();
    let shipped = repo_path("config");
    let config = clone.path().join("config");
    std::fs::create_dir_all(config.join("schema")).unwrap();
    for entry in std::fs::read_dir(&shipped).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_owned();
        let shipped_file = name
            .to_str()
            .is_some_and(|n| n.ends_with(".example") || n == "README.md");
        if path.is_file() && shipped_file {
            std::fs::copy(&path, config.join(&name)).unwrap();
        }
    }
    for folder in ["schema", "knowledge.example"] {
        std::fs::create_dir_all(config.join(folder)).unwrap();
        for entry in std::fs::read_dir(shipped.join(folder)).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, config.join(folder).join(path.file_name().unwrap())).unwrap();
        }
    }
    clone
}

/// README "The two commands", on a fresh clone: `demo` with no `config/*.json`, a sale that ends
/// handed to a person and held, then `release`, `report`, `manychat check` against the demo's
/// sandbox and `forget`, each run as the README shows it (no variable but those it names), each
/// reading the tenant config the demo read (the examples) and saying so.
#[test]
fn the_readme_walk_through_runs_on_a_fresh_clone_without_config_files() {
    let clone = fresh_clone();
    let mut demo = command(&["demo"]);
    demo.current_dir(clone.path());
    let demo = demo_from(demo);
    let examples = "tenant config: config (prompt.md.example, catalog.json.example, \
                    rules.json.example, tools.json.example, knowledge.example/: 1 document; the \
                    demo tenant's examples";
    assert!(demo.banner.contains(examples), "{}", demo.banner);
    let question = "How much is Wheel Throwing Basics?";
    assert!(
        demo.banner.contains(&format!("\"text\":\"{question}\"")),
        "the example question is the loaded catalog's: {}",
        demo.banner
    );
    let secret = secret_of(&demo.banner);
    let sandbox = piece_after(&demo.banner, "a local sandbox at ", |rest| {
        rest.split_whitespace().next()
    })
    .to_owned();
    let url = format!("http://127.0.0.1:{}", demo.port);
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let output = command(args)
            .current_dir(clone.path())
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        output
    };
    let say = |text: &str| {
        let args = ["simulate", "--url", &url, "--subscriber", "5550501", text];
        stdout(&run(&args, &[("MANYCHAT_SHARED_SECRET", &secret)]))
    };
    let printed = say("I have paid, here is my receipt");
    assert!(printed.contains("handed to a person"), "{printed}");
    let printed = say("Did you get it?");
    assert!(printed.contains("(held for a person"), "{printed}");

    for (args, env, says) in [
        (
            &["release", "5550501"][..],
            &[][..],
            "released: the assistant answers this contact's next message",
        ),
        (&["report"], &[], "how the sales assistant did"),
        (
            &["manychat", "check"],
            &[
                ("MANYCHAT_API_BASE", sandbox.as_str()),
                ("MANYCHAT_API_TOKEN", "sandbox:demo"),
                ("MANYCHAT_REPLY_FLOW_NS", "demo_reply_flow"),
            ],
            "ManyChat account matches",
        ),
    ] {
        let output = run(args, env);
        assert!(stdout(&output).contains(says), "{args:?}: {output:?}");
        assert!(stderr(&output).contains(examples), "{args:?}: {output:?}");
    }
    let printed = say("Are you there?");
    assert!(
        !printed.contains("held for a person"),
        "released: {printed}"
    );

    let output = run(&["forget", "5550501"], &[]);
    assert!(
        stdout(&output).starts_with("forgot conversation"),
        "{output:?}"
    );
}

/// `config check --env` checks the environment as `serve` does before it starts, and starts
/// nothing: a ready environment passes without creating the database; a bogus model, a plain
/// `http://` public URL, a short secret, a missing database folder and a plugin tool's missing
/// or malformed secret each fail it, named, as each refuses `serve`.
#[test]
fn config_check_env_refuses_what_serve_refuses_and_starts_nothing() {
    let (dir, config) = service_dir();
    let database = dir.path().join("agent.db");
    let ready: Vec<(&str, String)> = vec![
        ("CONFIG_DIR", config.display().to_string()),
        ("DATABASE_URL", format!("sqlite://{}", database.display())),
        ("AGENT_MODEL", "mock:demo".into()),
        ("MANYCHAT_SHARED_SECRET", SECRET.into()),
        ("PUBLIC_BASE_URL", "https://agent.example.test".into()),
        ("MANYCHAT_API_TOKEN", "123:test-token".into()),
        ("MANYCHAT_REPLY_FLOW_NS", "content20250101_reply".into()),
        ("PORT", "0".into()),
    ];
    let check = |changes: &[(&str, &str)]| {
        let mut env = ready.clone();
        for (name, value) in changes {
            env.retain(|(n, _)| n != name);
            env.push((name, (*value).to_owned()));
        }
        let checked = command(&["config", "check", "--env"])
            .envs(env.iter().map(|(n, v)| (*n, v.as_str())))
            .output()
            .unwrap();
        let mut serve = command(&["serve"]);
        serve.envs(env.iter().map(|(n, v)| (*n, v.as_str())));
        (checked, serve)
    };

    let (output, _) = check(&[]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        stdout(&output).contains("environment: ready for serve (model mock:demo"),
        "{output:?}"
    );
    assert!(!database.exists(), "the check opened no database");

    let missing_folder = format!("sqlite://{}", dir.path().join("absent/agent.db").display());
    for (changes, named) in [
        (
            vec![("AGENT_MODEL", "bogus:model")],
            "AGENT_MODEL: names an unknown provider",
        ),
        (
            vec![("PUBLIC_BASE_URL", "http://agent.example.test")],
            "PUBLIC_BASE_URL",
        ),
        (
            vec![("MANYCHAT_SHARED_SECRET", "short")],
            "MANYCHAT_SHARED_SECRET",
        ),
        (vec![("DATABASE_URL", missing_folder.as_str())], "absent"),
    ] {
        let (output, mut serve) = check(&changes);
        let refused = refusal(&output);
        assert!(refused.contains(named), "{changes:?}: {refused}");
        let serve_refused = refusal(&serve.output().unwrap());
        assert!(
            serve_refused.contains(named),
            "serve, {changes:?}: {serve_refused}"
        );
    }

    crate::plugins_helpers::write_plugins(
        &config,
        &crate::plugins_helpers::plugins_json("https://tools.example.test"),
    );
    for secret in [None, Some("whsec_not-base64-value!")] {
        let changes: Vec<(&str, &str)> = secret
            .map(|s| (crate::plugins_helpers::SECRET_ENV, s))
            .into_iter()
            .collect();
        let (output, mut serve) = check(&changes);
        let refused = refusal(&output);
        assert!(
            refused.contains("plugin secrets: PLUGIN_STUDIO_SECRET"),
            "{secret:?}: {refused}"
        );
        assert!(
            refusal(&serve.output().unwrap()).contains("plugin secrets: PLUGIN_STUDIO_SECRET"),
            "serve, {secret:?}"
        );
    }
    let (output, _) = check(&[(
        crate::plugins_helpers::SECRET_ENV,
        crate::plugins_helpers::PLUGIN_SECRET,
    )]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).contains("2 plugin tools"), "{output:?}");
}
