//! The commands at start (SYSTEM 5.2), run as a user runs them: `serve` refuses to start naming
//! what is missing or wrong (every problem at once, an unpriced model under a USD cap, a reasoning
//! effort the model takes no setting for), each command asks only for the variables it uses, a busy
//! port is named, and the database files are private whatever the umask.

use std::process::Command;

use crate::cli_helpers::*;
use crate::helpers::*;

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
