use super::*;
use std::fs;

fn example_dir() -> PathBuf {
    crate::config::examples::shipped_examples()
}

fn examples_ctx() -> ConfigContext {
    ConfigContext {
        allow_examples: true,
        ..ConfigContext::default()
    }
}

/// A temp folder holding the demo tenant's examples under their real names, so one file can
/// be replaced per test.
fn demo_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for name in [PROMPT_FILE, CATALOG_FILE, RULES_FILE, TOOLS_FILE] {
        let src = example_dir().join(format!("{name}.example"));
        fs::copy(&src, dir.path().join(name)).expect("copy example");
    }
    dir
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) {
    fs::write(dir.path().join(name), text).expect("write fixture");
}

#[test]
fn a_fifo_or_folder_in_config_is_refused_by_name_without_blocking() {
    let dir = demo_copy();
    let rules = dir.path().join(RULES_FILE);
    fs::remove_file(&rules).expect("remove");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &rules,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    fs::remove_file(dir.path().join(TOOLS_FILE)).expect("remove");
    fs::create_dir(dir.path().join(TOOLS_FILE)).expect("a folder named like a file");

    // Run on a thread: before the fix, opening the FIFO waited for a writer forever.
    let (done, loaded) = std::sync::mpsc::channel();
    let path = dir.path().to_owned();
    std::thread::spawn(move || {
        let _ = done.send(load_dir(&path, &ConfigContext::default()));
    });
    let errors = loaded
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the load returns instead of blocking on the FIFO")
        .expect_err("a FIFO is refused");
    let rule =
        "is not a regular file (a FIFO, socket, device or folder is refused; use a plain file)";
    for file in [RULES_FILE, TOOLS_FILE] {
        assert!(
            errors
                .issues()
                .iter()
                .any(|i| i.file == file && i.path == "$" && i.rule == rule),
            "{file}: {errors}"
        );
    }
}

/// Whether `errors` holds an issue at `path` of `file`.
fn has_issue_at(errors: &ConfigErrors, file: &str, path: &str) -> bool {
    errors
        .issues()
        .iter()
        .any(|i| i.file == file && i.path == path)
}

fn load_err(dir: &tempfile::TempDir) -> ConfigErrors {
    load_dir(dir.path(), &ConfigContext::default()).expect_err("config must be refused")
}

/// The errors of the demo tenant with file `name` holding `text`, which must be refused.
fn refused_with(name: &str, text: &str) -> ConfigErrors {
    let dir = demo_copy();
    write(&dir, name, text);
    load_err(&dir)
}

#[test]
fn system_5_1_compat_reference_config_is_accepted() {
    // A fictional tenant shaped exactly like the reference implementation's example.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compat-config");
    let config = match load_dir(&dir, &examples_ctx()) {
        Ok(config) => config,
        Err(errors) => panic!("reference config refused:\n{errors}"),
    };
    assert_eq!(config.catalog.offerings.len(), 3);
    assert!(!config.prompt.contains(BUSINESS_NAME_PLACEHOLDER));
    let tools = config.tools.expect("tools.json.example is read");
    assert_eq!(tools.notes.len(), 3);
}

#[test]
fn system_5_5_demo_examples_load_when_examples_are_allowed() {
    let config = match load_dir(&example_dir(), &examples_ctx()) {
        Ok(config) => config,
        Err(errors) => panic!("demo examples refused:\n{errors}"),
    };
    assert!(config.prompt.contains(&config.catalog.business_name));
    assert!(!config.prompt.contains(BUSINESS_NAME_PLACEHOLDER));
    assert!(config.tools.is_some());
}

#[test]
fn system_5_1_examples_are_not_read_unless_allowed() {
    let dir = tempfile::tempdir().expect("temp dir");
    for name in [PROMPT_FILE, CATALOG_FILE, RULES_FILE, TOOLS_FILE] {
        let example = format!("{name}.example");
        fs::copy(example_dir().join(&example), dir.path().join(&example)).expect("copy");
    }
    let errors = load_err(&dir);
    let missing: Vec<_> = errors.issues().iter().map(|i| i.file.as_str()).collect();
    assert_eq!(missing, [PROMPT_FILE, CATALOG_FILE, RULES_FILE]);
}

#[test]
fn system_5_6_spanish_tenant_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tenant-es");
    let config = match load_dir(&dir, &ConfigContext::default()) {
        Ok(config) => config,
        Err(errors) => panic!("Spanish tenant refused:\n{errors}"),
    };
    assert!(config.prompt.contains(&config.catalog.business_name));
    assert!(config.tools.is_some());
}

#[test]
fn system_5_1_prompt_business_name_is_filled_from_catalog() {
    let dir = demo_copy();
    write(
        &dir,
        PROMPT_FILE,
        "You work for {{businessName}}. {{businessName}} sells.",
    );
    let config = load_dir(dir.path(), &ConfigContext::default()).expect("loads");
    let name = &config.catalog.business_name;
    assert_eq!(config.prompt, format!("You work for {name}. {name} sells."));
}

#[test]
fn system_5_1_tools_json_absent_means_no_tools() {
    let dir = demo_copy();
    fs::remove_file(dir.path().join(TOOLS_FILE)).expect("remove");
    let config = load_dir(dir.path(), &ConfigContext::default()).expect("loads");
    assert_eq!(config.tools, None);
}

#[test]
fn system_9_missing_required_file_is_named() {
    let dir = demo_copy();
    fs::remove_file(dir.path().join(RULES_FILE)).expect("remove");
    let errors = load_err(&dir);
    assert_eq!(
        errors.issues(),
        [ConfigIssue::new(
            RULES_FILE,
            "$",
            "required file is missing"
        )]
    );
    assert_eq!(
        errors.to_string(),
        "rules.json: $: required file is missing"
    );
}

#[test]
fn system_5_2_missing_config_folder_is_one_clear_issue() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("no-such-folder");
    let errors = load_dir(&missing, &ConfigContext::default()).expect_err("must fail");
    assert_eq!(errors.len(), 1, "{errors}");
    assert_eq!(errors.issues()[0].file, missing.display().to_string());
}

#[test]
fn system_9_bad_json_names_file_line_and_column() {
    let errors = refused_with(
        CATALOG_FILE,
        "{\n  \"businessName\": \"X\",\n  \"currency\": \n}",
    );
    assert_eq!(errors.len(), 1, "{errors}");
    let issue = &errors.issues()[0];
    assert_eq!(issue.file, CATALOG_FILE);
    assert!(issue.rule.contains("line 4 column 1"), "{}", issue.rule);
}

#[test]
fn system_9_trailing_content_after_the_document_is_refused() {
    let errors = refused_with(TOOLS_FILE, "{} {}");
    assert_eq!(errors.len(), 1, "{errors}");
    assert_eq!(errors.issues()[0].file, TOOLS_FILE);
    assert!(errors.issues()[0].rule.contains("trailing"), "{errors}");
}

#[test]
fn system_5_1_unknown_key_is_refused_with_its_path() {
    let errors = refused_with(
        TOOLS_FILE,
        r#"{"flows":[{"id":"a","flowNs":"x","description":"d","colour":1}]}"#,
    );
    assert_eq!(errors.len(), 1, "{errors}");
    let line = errors.to_string();
    assert!(
        line.starts_with("tools.json: $.flows[0]: unknown key `colour`"),
        "{line}"
    );
}

#[test]
fn system_9_wrong_type_names_path_and_does_not_quote_the_value() {
    let errors = refused_with(
        RULES_FILE,
        r#"{"messages":{"acknowledgement":"One moment","escalation":"A person will reply"},
            "maxTurnsPerConversation":"Secret customer copy"}"#,
    );
    assert_eq!(errors.len(), 1, "{errors}");
    let issue = &errors.issues()[0];
    assert_eq!(issue.file, RULES_FILE);
    assert_eq!(issue.path, "$.maxTurnsPerConversation");
    assert_eq!(
        issue.rule,
        "must be a whole number, 0 or more, not a string"
    );
    assert!(!issue.rule.contains("Secret"), "{}", issue.rule);
}

#[test]
fn system_9_unknown_enum_variant_does_not_quote_the_value() {
    let errors = refused_with(
        TOOLS_FILE,
        r#"{"flows":[{"id":"a","flowNs":"x","description":"d","role":"Private words"}]}"#,
    );
    assert_eq!(errors.len(), 1, "{errors}");
    let issue = &errors.issues()[0];
    assert_eq!(issue.path, "$.flows[0].role");
    assert_eq!(issue.rule, "must be payment_link or opening");
    assert!(!issue.rule.contains("Private"), "{}", issue.rule);
}

#[test]
fn system_9_price_must_be_an_integer_of_minor_units() {
    let dir = demo_copy();
    let catalog = fs::read_to_string(dir.path().join(CATALOG_FILE)).expect("read");
    let mut value: serde_json::Value = serde_json::from_str(&catalog).expect("json");
    value["offerings"][1]["price"]["amount"] = serde_json::json!(123.45);
    write(&dir, CATALOG_FILE, &value.to_string());
    let errors = load_err(&dir);
    assert_eq!(errors.len(), 1, "{errors}");
    assert_eq!(errors.issues()[0].path, "$.offerings[1].price.amount");
    assert!(!errors.issues()[0].rule.contains("123"), "{errors}");
}

#[test]
fn system_9_huge_file_is_refused_with_a_clear_error() {
    let huge = format!(
        "{{\"flows\":[], \"pad\":\"{}\"}}",
        "x".repeat(2 * 1024 * 1024)
    );
    let errors = refused_with(TOOLS_FILE, &huge);
    assert_eq!(
        errors.issues(),
        [ConfigIssue::new(
            TOOLS_FILE,
            "$",
            "is larger than the 1 MiB limit for a config file"
        )]
    );
}

/// The demo's catalog with `offerings` generated offerings added, then padded with trailing
/// whitespace to `size` bytes when given.
fn big_catalog(offerings: usize, size: Option<u64>) -> Vec<u8> {
    let catalog = fs::read_to_string(example_dir().join("catalog.json.example")).expect("read");
    let mut value: serde_json::Value = serde_json::from_str(&catalog).expect("json");
    let currency = value["currency"].clone();
    let list = value["offerings"].as_array_mut().expect("offerings");
    for i in 0..offerings {
        list.push(serde_json::json!({
            "id": format!("generated-{i}"),
            "name": format!("Generated offering {i}"),
            "description": "An invented offering with a description of a few words. ".repeat(8),
            "price": {"amount": 1000 + i, "currency": currency}
        }));
    }
    let mut bytes = serde_json::to_vec(&value).expect("json");
    if let Some(size) = size {
        bytes.resize(size as usize, b' ');
    }
    bytes
}

#[test]
fn knowledge_catalog_json_larger_than_1_mib_loads_up_to_its_own_32_mib_limit() {
    let dir = demo_copy();
    // Without tools.json: its offering field lists the demo's offerings by id.
    fs::remove_file(dir.path().join(TOOLS_FILE)).expect("remove");
    let bytes = big_catalog(3000, None);
    assert!(bytes.len() as u64 > MAX_FILE_BYTES, "{}", bytes.len());
    fs::write(dir.path().join(CATALOG_FILE), &bytes).expect("write");
    let config = load_dir(dir.path(), &ConfigContext::default())
        .unwrap_or_else(|e| panic!("a 1.5 MiB catalog loads: {:?}", e.issues().first()));
    assert_eq!(config.catalog.offerings.len(), 3003);

    fs::write(
        dir.path().join(CATALOG_FILE),
        big_catalog(0, Some(MAX_CATALOG_BYTES)),
    )
    .expect("write");
    load_dir(dir.path(), &ConfigContext::default()).expect("exactly 32 MiB loads");
}

#[test]
fn knowledge_catalog_json_over_32_mib_is_refused_naming_its_limit_and_other_files_keep_1_mib() {
    let over = big_catalog(0, Some(MAX_CATALOG_BYTES + 1));
    let rule = "is larger than the 32 MiB limit for catalog.json";
    let dir = demo_copy();
    fs::write(dir.path().join(CATALOG_FILE), &over).expect("write");
    assert_eq!(
        load_err(&dir).issues(),
        [ConfigIssue::new(CATALOG_FILE, "$", rule)]
    );
    let dir = demo_copy();
    assert_eq!(
        load_dir_with_catalog(dir.path(), &ConfigContext::default(), &over)
            .expect_err("refused")
            .issues(),
        [ConfigIssue::new(CATALOG_FILE, "$", rule)]
    );
    let mut rules = fs::read(dir.path().join(RULES_FILE)).expect("read");
    rules.resize(MAX_FILE_BYTES as usize + 1, b' ');
    fs::write(dir.path().join(RULES_FILE), rules).expect("write");
    assert_eq!(
        load_err(&dir).issues(),
        [ConfigIssue::new(
            RULES_FILE,
            "$",
            "is larger than the 1 MiB limit for a config file"
        )]
    );
}

#[test]
fn system_5_1_empty_or_non_utf8_prompt_is_refused() {
    let dir = demo_copy();
    write(&dir, PROMPT_FILE, "  \n");
    assert_eq!(
        load_err(&dir).issues(),
        [ConfigIssue::new(PROMPT_FILE, "$", "must not be empty")]
    );
    fs::write(dir.path().join(PROMPT_FILE), [0xff, 0xfe, 0x00]).expect("write");
    assert_eq!(
        load_err(&dir).issues(),
        [ConfigIssue::new(
            PROMPT_FILE,
            "$",
            "is not valid UTF-8 text"
        )]
    );
}

#[test]
fn system_5_1_issues_from_every_file_are_reported_in_one_load() {
    let dir = demo_copy();
    fs::remove_file(dir.path().join(PROMPT_FILE)).expect("remove");
    write(&dir, CATALOG_FILE, "{");
    write(
        &dir,
        RULES_FILE,
        r#"{"messages":{"acknowledgement":"","escalation":"A person will reply"}}"#,
    );
    write(
        &dir,
        TOOLS_FILE,
        r#"{"flows":[{"id":"Bad Id","flowNs":"content1","description":"d"}]}"#,
    );
    let errors = load_err(&dir);
    let files: Vec<_> = errors.issues().iter().map(|i| i.file.as_str()).collect();
    assert_eq!(
        files,
        [PROMPT_FILE, CATALOG_FILE, RULES_FILE, TOOLS_FILE],
        "{errors}"
    );
}

#[test]
fn a_parse_error_does_not_hide_other_files() {
    let dir = demo_copy();
    // catalog.json: a wrong type in one offering, a bad currency elsewhere in the file.
    let catalog = fs::read_to_string(dir.path().join(CATALOG_FILE)).expect("read");
    let mut value: serde_json::Value = serde_json::from_str(&catalog).expect("json");
    value["offerings"][0]["price"]["amount"] = serde_json::json!("a lot");
    value["currency"] = serde_json::json!("dollars");
    let kept_id = value["offerings"][1]["id"].clone();
    write(&dir, CATALOG_FILE, &value.to_string());
    // rules.json: two type errors at once.
    write(
        &dir,
        RULES_FILE,
        r#"{"messages":{"acknowledgement":"One moment","escalation":"A person will reply"},
            "maxTurnsPerConversation":"many","historyDays":-3}"#,
    );
    // tools.json: a flow naming an offering the catalog does not have (a cross-file check
    // that needs the catalog, whose types failed).
    let tools = fs::read_to_string(dir.path().join(TOOLS_FILE)).expect("read");
    let mut tools: serde_json::Value = serde_json::from_str(&tools).expect("json");
    tools["flows"][0]["offering"] = serde_json::json!("no_such_offering");
    write(&dir, TOOLS_FILE, &tools.to_string());

    let errors = load_err(&dir);
    let found: Vec<(&str, &str)> = errors
        .issues()
        .iter()
        .map(|i| (i.file.as_str(), i.path.as_str()))
        .collect();
    for expected in [
        (CATALOG_FILE, "$.offerings[0].price.amount"),
        (CATALOG_FILE, "$.currency"),
        (RULES_FILE, "$.maxTurnsPerConversation"),
        (RULES_FILE, "$.historyDays"),
        (TOOLS_FILE, "$.flows[0].offering"),
    ] {
        assert!(
            found.contains(&expected),
            "{expected:?} missing from:\n{errors}"
        );
    }
    // The offering kept its place in the cross-check: no false alarm about its id.
    assert!(!errors.to_string().contains(kept_id.as_str().unwrap_or("?")));
    assert!(
        errors
            .issues()
            .iter()
            .all(|i| !i.rule.contains("invalid type") && !i.rule.contains("expected i64")),
        "{errors}"
    );
}

#[test]
fn messages_are_plain_words() {
    let dir = demo_copy();
    write(&dir, CATALOG_FILE, "[]");
    let errors = load_err(&dir);
    assert_eq!(
        errors.issues(),
        [ConfigIssue::new(
            CATALOG_FILE,
            "$",
            "must be an object ({…}), not a list"
        )]
    );
    write(
        &dir,
        CATALOG_FILE,
        &fs::read_to_string(example_dir().join("catalog.json.example"))
            .expect("read")
            .replace("\"currency\"", "\"curency\""),
    );
    let text = load_err(&dir).to_string();
    assert!(text.contains("unknown key `curency`"), "{text}");
    assert!(
        text.contains("the required key `currency` is missing"),
        "{text}"
    );
}

#[test]
fn a_byte_order_mark_is_accepted() {
    let dir = demo_copy();
    for name in [PROMPT_FILE, CATALOG_FILE, RULES_FILE, TOOLS_FILE] {
        let path = dir.path().join(name);
        let mut bytes = b"\xEF\xBB\xBF".to_vec();
        bytes.extend(fs::read(&path).expect("read"));
        fs::write(&path, bytes).expect("write");
    }
    let config = match load_dir(dir.path(), &ConfigContext::default()) {
        Ok(config) => config,
        Err(errors) => panic!("refused with a byte order mark:\n{errors}"),
    };
    assert!(!config.prompt.starts_with('\u{feff}'));
}

#[test]
fn no_spec_number_in_any_rule() {
    let dir = demo_copy();
    let tools = fs::read_to_string(dir.path().join(TOOLS_FILE)).expect("read");
    let mut tools: serde_json::Value = serde_json::from_str(&tools).expect("json");
    tools["notes"][0]["maxLength"] = serde_json::json!(900);
    tools["notes"][0]["neverRendered"] = serde_json::json!(false);
    tools["fields"][0]["values"] = serde_json::json!(["x"]);
    write(&dir, TOOLS_FILE, &tools.to_string());
    let errors = load_err(&dir);
    let spec_label = Regex::new(r"\(0\d\d\)").expect("regex");
    for issue in errors.issues() {
        assert!(!spec_label.is_match(&issue.rule), "{issue}");
    }
}

#[test]
fn a_type_error_in_an_entry_raises_no_false_alarm_about_it() {
    // The funnel field's values have the wrong type: the field keeps its place, so the
    // flows and events that refer to the funnel are not reported as lacking one.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compat-config");
    let dir = tempfile::tempdir().expect("temp dir");
    for name in [PROMPT_FILE, CATALOG_FILE, RULES_FILE, TOOLS_FILE] {
        fs::copy(
            fixture.join(format!("{name}.example")),
            dir.path().join(name),
        )
        .expect("copy");
    }
    let tools = fs::read_to_string(dir.path().join(TOOLS_FILE)).expect("read");
    let mut tools: serde_json::Value = serde_json::from_str(&tools).expect("json");
    let funnel = tools["fields"]
        .as_array()
        .and_then(|fields| fields.iter().position(|f| f["funnel"] == true))
        .expect("a funnel field");
    tools["fields"][funnel]["values"] = serde_json::json!("new");
    write(&dir, TOOLS_FILE, &tools.to_string());
    let errors = load_err(&dir);
    assert_eq!(
        errors.issues(),
        [ConfigIssue::new(
            TOOLS_FILE,
            format!("$.fields[{funnel}].values"),
            "must be a list ([…]), not a string"
        )]
    );
}

#[test]
fn spec_030_verification_1_settle_seconds_loads_from_0_to_30_and_fails_otherwise() {
    let with_settle = |value: serde_json::Value| {
        let dir = demo_copy();
        let path = dir.path().join(TOOLS_FILE);
        let mut tools: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).expect("read")).expect("json");
        tools["flows"][1]["settleSeconds"] = value;
        write(&dir, TOOLS_FILE, &tools.to_string());
        (load_dir(dir.path(), &ConfigContext::default()), dir)
    };
    for seconds in [0, 12, 30] {
        let (loaded, _dir) = with_settle(serde_json::json!(seconds));
        let config = loaded.unwrap_or_else(|errors| panic!("{seconds}: {errors}"));
        let flow = &config.tools.expect("tools").flows[1];
        assert_eq!(flow.settle_seconds, Some(seconds), "{seconds}");
    }
    for bad in [
        serde_json::json!(31),
        serde_json::json!(-1),
        serde_json::json!(2.5),
        serde_json::json!("5"),
    ] {
        let (loaded, _dir) = with_settle(bad.clone());
        let errors = loaded.expect_err("refused");
        assert!(
            has_issue_at(&errors, TOOLS_FILE, "$.flows[1].settleSeconds"),
            "{bad}: {errors}"
        );
    }
}

#[test]
fn a_decimal_price_is_refused_saying_prices_are_in_minor_units() {
    let dir = demo_copy();
    let path = dir.path().join(CATALOG_FILE);
    let mut catalog: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    catalog["offerings"][0]["price"]["amount"] = serde_json::json!(210.5);
    fs::write(&path, catalog.to_string()).unwrap();
    let errors = load_err(&dir);
    assert_eq!(errors.len(), 1, "{errors}");
    let issue = &errors.issues()[0];
    assert_eq!(issue.path, "$.offerings[0].price.amount");
    assert_eq!(
        issue.rule,
        "must be a whole number, not a decimal number (prices are in minor units, cents: 45000 \
         is 450.00)"
    );
}

#[test]
fn every_json_file_accepts_the_editors_schema_key_at_its_top_level_only() {
    let dir = demo_copy();
    for name in [CATALOG_FILE, RULES_FILE, TOOLS_FILE] {
        let path = dir.path().join(name);
        let mut file: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        file["$schema"] = serde_json::json!(format!("./schema/{name}"));
        fs::write(&path, file.to_string()).unwrap();
    }
    write(
        &dir,
        crate::plugins::PLUGINS_FILE,
        r#"{"$schema": "./schema/plugins.schema.json", "tools": []}"#,
    );
    load_dir(dir.path(), &ConfigContext::default()).expect("the $schema keys are accepted");

    write(&dir, RULES_FILE, r#"{"$schema": ["not", "a", "string"]}"#);
    let errors = load_err(&dir);
    assert!(has_issue_at(&errors, RULES_FILE, "$.$schema"), "{errors}");
    let errors = refused_with(
        TOOLS_FILE,
        r#"{"flows":[{"$schema":"x","id":"a","flowNs":"x","description":"d"}]}"#,
    );
    assert!(
        errors.to_string().contains("unknown key `$schema`"),
        "only at the top: {errors}"
    );
}

/// With the delivery handshake on, a tool writing (or reading) either of its fields is refused
/// at load, as the reply and token fields are; with it off, those names are the tenant's.
#[test]
fn a_tool_naming_a_delivery_handshake_field_is_refused_only_when_the_handshake_is_on() {
    let dir = demo_copy();
    let tools = std::fs::read_to_string(dir.path().join("tools.json")).unwrap();
    write(
        &dir,
        "tools.json",
        &tools.replace("\"studio_note_goal\"", "\"AI_Delivered\""),
    );
    assert!(load_dir(dir.path(), &ConfigContext::default()).is_ok());
    let on = ConfigContext {
        handshake_fields: vec!["ai_delivered".into(), "ai_delivery_id".into()],
        ..ConfigContext::default()
    };
    let errors = load_dir(dir.path(), &on).expect_err("refused");
    let issues: Vec<String> = errors.issues().iter().map(|i| i.to_string()).collect();
    assert_eq!(
        issues,
        vec![
            "tools.json: $.notes[0].field: must not equal MANYCHAT_DELIVERED_FIELD or \
             MANYCHAT_DELIVERY_ID_FIELD (a write would break the delivery handshake)"
        ]
    );
}

#[test]
fn owner_language_unknown_is_refused_naming_the_path_and_the_allowed_languages() {
    let rules = |language: &str| {
        format!(
            r#"{{"messages":{{"acknowledgement":"One moment","escalation":"A person will reply"}},
                "ownerLanguage":"{language}"}}"#
        )
    };
    let errors = refused_with(RULES_FILE, &rules("fr"));
    assert_eq!(errors.len(), 1, "{errors}");
    let issue = &errors.issues()[0];
    assert_eq!(
        (issue.file.as_str(), issue.path.as_str()),
        (RULES_FILE, "$.ownerLanguage")
    );
    assert_eq!(issue.rule, "must be one of: en, es, pt");

    let dir = demo_copy();
    write(&dir, RULES_FILE, &rules("pt"));
    let config = load_dir(dir.path(), &ConfigContext::default()).expect("pt is allowed");
    assert_eq!(config.rules.owner_language, crate::config::Language::Pt);
    // Without the key (every config of the existing implementation): English.
    let demo = load_dir(&example_dir(), &examples_ctx()).expect("the demo loads");
    assert_eq!(demo.rules.owner_language, crate::config::Language::En);
}
