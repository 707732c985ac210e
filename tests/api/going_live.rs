//! The production examples (`examples/systemd/`) as `docs/GOING-LIVE.md` and
//! `docs/DEPLOYMENT.md` show them: files the service creates are its user's alone, and the
//! environment file is one systemd reads as written.

use crate::helpers::repo_path;

fn read(relative: &str) -> String {
    std::fs::read_to_string(repo_path(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The `key=value` lines of `section` in a systemd unit.
fn section(unit: &str, name: &str) -> Vec<(String, String)> {
    let header = format!("[{name}]");
    unit.lines()
        .map(str::trim)
        .skip_while(|line| *line != header)
        .skip(1)
        .take_while(|line| !line.starts_with('['))
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[test]
fn the_systemd_unit_creates_files_readable_by_the_service_user_alone() {
    let unit = read("examples/systemd/manychat-agent.service");
    let service = section(&unit, "Service");
    assert!(
        service.contains(&("UMask".to_owned(), "0077".to_owned())),
        "the database holds contacts' messages: {service:?}"
    );
    assert!(service.contains(&(
        "EnvironmentFile".to_owned(),
        "/etc/manychat-agent/env".to_owned()
    )));
}

#[test]
fn the_environment_file_has_no_inline_comment_systemd_would_keep_in_a_value() {
    let env = read("examples/systemd/manychat-agent.env");
    let mut names = Vec::new();
    for line in env.lines().filter(|l| !l.trim().is_empty()) {
        if line.trim_start().starts_with('#') {
            continue;
        }
        let (name, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not NAME=value: {line}"));
        assert!(
            !value.contains('#'),
            "an inline comment would be part of {name}'s value"
        );
        assert_eq!(value, value.trim(), "{name}: no surrounding spaces");
        names.push(name.to_owned());
    }
    for required in [
        "AGENT_MODEL",
        "MANYCHAT_SHARED_SECRET",
        "MANYCHAT_API_TOKEN",
        "MANYCHAT_REPLY_FLOW_NS",
        "PUBLIC_BASE_URL",
        "DATABASE_URL",
    ] {
        assert!(names.iter().any(|n| n == required), "{required} missing");
    }
}

#[test]
fn the_deployment_guide_shows_the_example_unit_and_environment_file_as_they_are() {
    let guide = read("docs/DEPLOYMENT.md");
    for example in [
        "examples/systemd/manychat-agent.service",
        "examples/systemd/manychat-agent.env",
    ] {
        assert!(
            guide.contains(&read(example)),
            "docs/DEPLOYMENT.md no longer shows {example} as it is"
        );
    }
}

/// `## <version> — <YYYY-MM-DD>`: the version and date of a release heading of the changelog.
fn release_heading(line: &str) -> Option<(&str, &str)> {
    let (version, date) = line.strip_prefix("## ")?.split_once(" — ")?;
    let semver = version.split('.').count() == 3
        && version
            .split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()));
    let dated = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_ok();
    (semver && dated).then_some((version, date))
}

#[test]
fn the_changelog_newest_release_is_the_binarys_version_under_an_unreleased_section() {
    let changelog = read("CHANGELOG.md");
    let headings: Vec<&str> = changelog
        .lines()
        .filter(|line| line.starts_with("## "))
        .collect();
    assert_eq!(
        headings.first(),
        Some(&"## Unreleased"),
        "later changes land under Unreleased, on top"
    );
    let newest = headings
        .get(1)
        .and_then(|line| release_heading(line))
        .unwrap_or_else(|| panic!("a `## x.y.z — YYYY-MM-DD` release follows: {headings:?}"));
    assert_eq!(
        newest.0,
        env!("CARGO_PKG_VERSION"),
        "--version prints Cargo.toml's version, the changelog's newest release"
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
        .arg("--version")
        .output()
        .expect("the binary runs");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        format!("manychat-agent {}", env!("CARGO_PKG_VERSION"))
    );
}

/// The ```json block of `docs/PROVIDERS.md` that follows `marker`.
fn json_block_after(doc: &str, marker: &str) -> serde_json::Value {
    let after = doc
        .split(marker)
        .nth(1)
        .unwrap_or_else(|| panic!("{marker:?} in the document"));
    let block = after
        .split("```json\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .unwrap_or_else(|| panic!("a json block after {marker:?}"));
    serde_json::from_str(block).unwrap_or_else(|e| panic!("the block after {marker:?}: {e}"))
}

/// docs/PROVIDERS.md shows the AgentReply schema the service sends and checks, and an example
/// reply that passes it.
#[test]
fn the_providers_guide_shows_the_reply_schema_as_sent_and_a_reply_that_passes_it() {
    let doc = read("docs/PROVIDERS.md");
    let schema = json_block_after(&doc, "## The reply a model must return");
    assert_eq!(
        &schema,
        manychat_agent::model::reply::agent_reply_schema().as_ref(),
        "the documented schema is the one sent"
    );
    let example = json_block_after(&doc, "One reply, as the demo tenant's model would give it:");
    manychat_agent::model::reply::parse_reply(&example.to_string())
        .expect("the example is an AgentReply");
}
