//! The business's documents (`config/knowledge/`) as `config check` shows them: each file with
//! its passages and estimated tokens, or refused with its file, line and reason.

use std::path::Path;
use std::process::{Command, Output};

use crate::helpers::*;

fn config_check(config: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
        .env_clear()
        .env("CONFIG_DIR", config)
        .args(["config", "check"])
        .output()
        .unwrap()
}

#[test]
fn knowledge_config_check_reports_each_document_with_its_passages_and_estimated_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_demo_tenant(&config);
    std::fs::write(
        config.join("knowledge/Opening Days.txt"),
        "Closed on the first Monday of every month.\n",
    )
    .unwrap();
    let output = config_check(&config);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let said = String::from_utf8_lossy(&output.stdout);

    let loaded = manychat_agent::config::load_dir(&config, &Default::default()).unwrap();
    let of = |file: &str| {
        let passages: Vec<_> = loaded.knowledge.iter().filter(|p| p.file == file).collect();
        let tokens: usize = passages.iter().map(|p| p.estimated_tokens()).sum();
        (passages.len(), tokens)
    };
    let (days, days_tokens) = of("Opening Days.txt");
    let (policies, policies_tokens) = of("studio-policies.md");
    assert_eq!(days, 1);
    assert!(policies >= 3, "one passage per section: {policies}");
    let total = days_tokens + policies_tokens;
    assert!(
        said.contains(&format!(
            "0 plugin tools, 2 documents: {} passages, ~{total} tokens)",
            days + policies
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "\n  knowledge/Opening Days.txt: 1 passage, ~{days_tokens} tokens\n  \
             knowledge/studio-policies.md: {policies} passages, ~{policies_tokens} tokens\n"
        )),
        "{said}"
    );
    assert_eq!(
        days_tokens,
        "Closed on the first Monday of every month."
            .len()
            .div_ceil(4),
        "characters over 4"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(", knowledge/: 2 documents)"), "{stderr}");
}

#[test]
fn knowledge_config_check_refuses_a_bad_document_naming_its_file_line_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_demo_tenant(&config);
    std::fs::write(
        config.join("knowledge/prices.md"),
        b"private-words\n\xff\xfe",
    )
    .unwrap();
    std::fs::write(config.join("knowledge/menu.pdf"), b"%PDF-1.4").unwrap();
    let output = config_check(&config);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(
        errors.contains("knowledge/menu.pdf: $: is a PDF, which is not read: export it as text"),
        "{errors}"
    );
    assert!(
        errors.contains("knowledge/prices.md: line 2: is not valid UTF-8 text: save it as UTF-8"),
        "{errors}"
    );
    assert!(!errors.contains("private-words"), "{errors}");
}
