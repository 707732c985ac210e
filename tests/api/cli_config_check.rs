//! `config check` (SYSTEM 5.4), run as a user runs it: every error with its file path and rule, a
//! plugin tool's malformed secret refused and never printed, a folder's name escaped, the
//! reply-flow check said to be skipped, and `--env` refusing what `serve` refuses while starting
//! nothing.

use crate::cli_helpers::*;
use crate::helpers::*;
use crate::plugins_helpers::{PLUGIN_SECRET, SECRET_ENV, plugins_json, write_plugins};

/// `manychat-agent config check` on the tenant in `dir`, with `env` besides `CONFIG_DIR`.
fn config_check(dir: &std::path::Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut check = command(&["config", "check"]);
    check.env("CONFIG_DIR", dir);
    check.envs(env.iter().copied()).output().unwrap()
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

/// `config check` refuses a plugin tool's malformed secret as `serve` does, naming the
/// variable and never its value; and it never prints a control or bidirectional character of a
/// folder's name raw.
#[test]
fn config_check_refuses_a_malformed_plugin_secret_and_escapes_what_it_prints() {
    let dir = tempfile::tempdir().unwrap();
    copy_demo_tenant(dir.path());
    write_plugins(dir.path(), &plugins_json("http://127.0.0.1:9"));
    let output = config_check(dir.path(), &[(SECRET_ENV, "not-a-whsec-secret-value")]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let errors = stderr(&output);
    assert!(errors.contains(SECRET_ENV), "{errors}");
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

    write_plugins(&config, &plugins_json("https://tools.example.test"));
    for secret in [None, Some("whsec_not-base64-value!")] {
        let changes: Vec<(&str, &str)> = secret.map(|s| (SECRET_ENV, s)).into_iter().collect();
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
    let (output, _) = check(&[(SECRET_ENV, PLUGIN_SECRET)]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).contains("2 plugin tools"), "{output:?}");
}
