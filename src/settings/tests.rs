use super::*;
use std::collections::HashMap;

const SECRET_A: &str = "fixture-secret-aaaaaaaa";
const SECRET_B: &str = "fixture-secret-bbbbbbbb";

fn base() -> HashMap<&'static str, String> {
    HashMap::from([
        ("MANYCHAT_SHARED_SECRET", SECRET_A.to_owned()),
        ("PUBLIC_BASE_URL", "https://agent.example.test".to_owned()),
    ])
}

fn load(vars: &HashMap<&'static str, String>) -> Result<Settings, SettingsError> {
    Settings::from_vars(|name| vars.get(name).cloned())
}

fn with(pairs: &[(&'static str, &str)]) -> HashMap<&'static str, String> {
    let mut vars = base();
    for (k, v) in pairs {
        vars.insert(k, (*v).to_owned());
    }
    vars
}

fn problem(pairs: &[(&'static str, &str)], variable: &str) -> SettingProblem {
    let err = load(&with(pairs)).expect_err("should be refused");
    err.problem(variable)
        .cloned()
        .unwrap_or_else(|| panic!("no problem for {variable}: {err}"))
}

/// The problem reported for `variable` set to `value` (over the base), which must be refused.
fn refused(variable: &'static str, value: &str) -> SettingProblem {
    problem(&[(variable, value)], variable)
}

#[test]
fn system_5_2_defaults_apply_when_unset() {
    let s = load(&base()).unwrap();
    assert_eq!(s.agent_model, None);
    assert_eq!(s.model.openai_base_url, "https://api.openai.com/v1");
    assert_eq!(s.model.anthropic_base_url, "https://api.anthropic.com");
    assert_eq!(s.model.ollama_base_url, "http://localhost:11434");
    assert_eq!(s.model.max_output_tokens, 400);
    assert_eq!(s.model.temperature, None);
    assert!((s.temperature_or_default() - 0.3).abs() < f32::EPSILON);
    assert_eq!(s.model.price, None);
    assert_eq!(s.manychat_shared_secrets, vec![Secret::new(SECRET_A)]);
    assert_eq!(s.manychat_api_token, None);
    assert_eq!(s.manychat_api_base, "https://api.manychat.com");
    assert_eq!(s.manychat_reply_field, "ai_message");
    assert_eq!(s.manychat_reply_flow_ns, None);
    assert_eq!(s.manychat_token_field, "ai_token");
    assert_eq!(s.manychat_delivery_handshake, None);
    assert!(s.contact_tokens_enforced);
    assert_eq!(s.manychat_reply_gap, Duration::from_millis(2000));
    assert_eq!(s.public_base_url, "https://agent.example.test");
    assert_eq!(s.channel, Channel::Whatsapp);
    assert_eq!(s.race_deadline, Duration::from_millis(8000));
    assert_eq!(s.model_abort, Duration::from_millis(30_000));
    assert_eq!(s.database_url.expose(), "sqlite://data/agent.db");
    assert_eq!(s.port, 3000);
    assert_eq!(s.bind_address.to_string(), "0.0.0.0");
    assert!(s.trust_proxy.is_empty());
    assert_eq!(s.config_dir, PathBuf::from("config"));
    assert_eq!(s.log_level, "info");
    assert_eq!(s.max_turns_in_flight, 64);
}

#[test]
fn system_5_2_every_variable_is_read() {
    let s = load(&with(&[
        ("AGENT_MODEL", "openai:gpt-4.1-mini"),
        ("OPENAI_API_KEY", "sk-fixture"),
        ("OPENAI_BASE_URL", "https://llm.example.test/v1/"),
        ("ANTHROPIC_API_KEY", "ak-fixture"),
        ("ANTHROPIC_BASE_URL", "https://anthropic.example.test"),
        ("OLLAMA_BASE_URL", "http://ollama.example.test:11434"),
        ("AGENT_MAX_OUTPUT_TOKENS", "800"),
        ("AGENT_TEMPERATURE", "0"),
        ("AGENT_PRICE_INPUT_PER_MTOK", "0.5"),
        ("AGENT_PRICE_OUTPUT_PER_MTOK", "2"),
        ("AGENT_PRICE_CACHED_INPUT_PER_MTOK", "0.05"),
        ("MANYCHAT_SHARED_SECRET", &format!("{SECRET_A}, {SECRET_B}")),
        ("MANYCHAT_API_TOKEN", "mc-fixture-token"),
        ("MANYCHAT_API_BASE", "https://manychat.example.test"),
        ("MANYCHAT_REPLY_FIELD", "reply_text"),
        ("MANYCHAT_REPLY_FLOW_NS", "content20250101000000_000001"),
        ("MANYCHAT_TOKEN_FIELD", "contact_key"),
        ("MANYCHAT_DELIVERED_FIELD", "reply_delivered"),
        ("MANYCHAT_DELIVERY_ID_FIELD", "reply_id"),
        ("CONTACT_TOKENS_ENFORCED", "0"),
        ("MANYCHAT_REPLY_GAP_MS", "10000"),
        ("PUBLIC_BASE_URL", "https://agent.example.test/"),
        ("CHANNEL", "telegram"),
        ("RACE_DEADLINE_MS", "7000"),
        ("MODEL_ABORT_MS", "7001"),
        ("DATABASE_URL", "postgres://agent@db.example.test/agent"),
        ("PORT", "8080"),
        ("TRUST_PROXY", "loopback,10.0.0.0/8"),
        ("CONFIG_DIR", "/etc/agent"),
        ("LOG_LEVEL", "info,manychat_agent=debug"),
        ("MAX_TURNS_IN_FLIGHT", "8"),
    ]))
    .unwrap();
    assert_eq!(s.require_model(), Ok("openai:gpt-4.1-mini"));
    assert_eq!(s.model.openai_api_key, Some(Secret::new("sk-fixture")));
    assert_eq!(s.model.openai_base_url, "https://llm.example.test/v1");
    assert_eq!(s.model.anthropic_api_key, Some(Secret::new("ak-fixture")));
    assert_eq!(s.model.anthropic_base_url, "https://anthropic.example.test");
    assert_eq!(s.model.ollama_base_url, "http://ollama.example.test:11434");
    assert_eq!(s.model.max_output_tokens, 800);
    assert_eq!(s.model.temperature, Some(0.0));
    assert_eq!(
        s.model.price,
        Some(Price {
            input: 0.5,
            cached_input: 0.05,
            cache_write: 0.5,
            output: 2.0
        })
    );
    assert_eq!(
        s.manychat_shared_secrets,
        vec![Secret::new(SECRET_A), Secret::new(SECRET_B)]
    );
    assert_eq!(s.manychat_api_token, Some(Secret::new("mc-fixture-token")));
    assert_eq!(s.manychat_api_base, "https://manychat.example.test");
    assert_eq!(s.manychat_reply_field, "reply_text");
    assert_eq!(
        s.manychat_reply_flow_ns.as_deref(),
        Some("content20250101000000_000001")
    );
    assert_eq!(s.manychat_token_field, "contact_key");
    assert_eq!(
        s.manychat_delivery_handshake,
        Some(crate::outbox::DeliveryHandshake {
            delivered_field: "reply_delivered".into(),
            delivery_id_field: "reply_id".into(),
        })
    );
    assert!(!s.contact_tokens_enforced);
    assert_eq!(s.manychat_reply_gap, Duration::from_secs(10));
    assert_eq!(s.public_base_url, "https://agent.example.test");
    assert_eq!(s.channel, Channel::Telegram);
    assert_eq!(s.race_deadline, Duration::from_millis(7000));
    assert_eq!(s.model_abort, Duration::from_millis(7001));
    assert_eq!(
        s.database_url.expose(),
        "postgres://agent@db.example.test/agent"
    );
    assert_eq!(s.port, 8080);
    assert!(s.trust_proxy.is_trusted("10.2.3.4".parse().unwrap()));
    assert_eq!(s.config_dir, PathBuf::from("/etc/agent"));
    assert_eq!(s.log_level, "info,manychat_agent=debug");
    assert_eq!(s.max_turns_in_flight, 8);
}

#[test]
fn system_5_2_empty_strings_count_as_unset() {
    let s = load(&with(&[
        ("AGENT_MODEL", ""),
        ("PORT", ""),
        ("CHANNEL", "  "),
        ("MANYCHAT_API_TOKEN", ""),
        ("LOG_LEVEL", ""),
        ("TRUST_PROXY", ""),
    ]))
    .unwrap();
    assert_eq!(s.agent_model, None);
    assert_eq!(s.port, 3000);
    assert_eq!(s.channel, Channel::Whatsapp);
    assert_eq!(s.manychat_api_token, None);
    assert_eq!(s.log_level, "info");

    let err = load(&with(&[
        ("MANYCHAT_SHARED_SECRET", ""),
        ("PUBLIC_BASE_URL", ""),
    ]))
    .unwrap_err();
    assert!(err.problem("MANYCHAT_SHARED_SECRET").is_some());
    assert!(err.problem("PUBLIC_BASE_URL").is_some());
}

#[test]
fn system_5_2_shared_secret_is_required() {
    let mut vars = base();
    vars.remove("MANYCHAT_SHARED_SECRET");
    let err = load(&vars).unwrap_err();
    assert_eq!(
        err.problem("MANYCHAT_SHARED_SECRET").unwrap().rule,
        "required, one or more comma-separated secrets"
    );
}

#[test]
fn system_5_2_each_shared_secret_has_at_least_16_characters() {
    let fifteen = "a".repeat(15);
    for value in [
        fifteen.clone(),
        format!("{SECRET_A},{fifteen}"),
        format!("{SECRET_A},"),
    ] {
        let p = problem(
            &[("MANYCHAT_SHARED_SECRET", &value)],
            "MANYCHAT_SHARED_SECRET",
        );
        assert!(p.rule.contains("at least 16 characters"), "{}", p.rule);
        assert!(!p.to_string().contains("aaaa"), "value leaked: {p}");
    }
    let sixteen = "b".repeat(16);
    let s = load(&with(&[("MANYCHAT_SHARED_SECRET", &sixteen)])).unwrap();
    assert_eq!(s.manychat_shared_secrets.len(), 1);
}

#[test]
fn system_5_2_public_base_url_is_required_and_https() {
    let mut vars = base();
    vars.remove("PUBLIC_BASE_URL");
    assert!(
        load(&vars)
            .unwrap_err()
            .problem("PUBLIC_BASE_URL")
            .is_some()
    );
    for bad in [
        "http://agent.example.test",
        "agent.example.test",
        "https://",
        "ftp://x",
    ] {
        let p = problem(&[("PUBLIC_BASE_URL", bad)], "PUBLIC_BASE_URL");
        assert!(p.rule.contains("https://"), "{bad}: {p}");
    }
    let s = load(&with(&[(
        "PUBLIC_BASE_URL",
        "https://agent.example.test/base//",
    )]))
    .unwrap();
    assert_eq!(s.public_base_url, "https://agent.example.test/base");
}

#[test]
fn system_5_2_model_abort_must_exceed_race_deadline() {
    for (deadline, abort) in [("8000", "8000"), ("8000", "7999")] {
        let p = problem(
            &[("RACE_DEADLINE_MS", deadline), ("MODEL_ABORT_MS", abort)],
            "MODEL_ABORT_MS",
        );
        assert_eq!(p.rule, "must be greater than RACE_DEADLINE_MS");
    }
    // The default abort (30000) against a custom deadline is checked too.
    assert!(load(&with(&[("RACE_DEADLINE_MS", "9000")])).is_ok());
    assert!(
        load(&with(&[("MODEL_ABORT_MS", "5000")]))
            .unwrap_err()
            .problem("MODEL_ABORT_MS")
            .is_some()
    );
}

#[test]
fn system_5_2_race_deadline_stays_under_manychats_ten_seconds() {
    refused("RACE_DEADLINE_MS", "10000");
    refused("RACE_DEADLINE_MS", "0");
}

#[test]
fn spec_025_nudge_poll_defaults_to_15_seconds_within_its_bounds() {
    let s = load(&with(&[])).unwrap();
    assert_eq!(s.nudge_poll, Duration::from_secs(15));
    let s = load(&with(&[("NUDGE_POLL_MS", "1000")])).unwrap();
    assert_eq!(s.nudge_poll, Duration::from_secs(1));
    refused("NUDGE_POLL_MS", "999");
    refused("NUDGE_POLL_MS", "600001");
}

#[test]
fn system_5_2_reply_gap_is_at_most_10000() {
    let p = refused("MANYCHAT_REPLY_GAP_MS", "10001");
    assert_eq!(p.rule, "must be a whole number from 0 to 10000");
    let s = load(&with(&[("MANYCHAT_REPLY_GAP_MS", "0")])).unwrap();
    assert_eq!(s.manychat_reply_gap, Duration::ZERO);
}

#[test]
fn fault_shutdown_drain_defaults_to_ten_seconds_and_is_bounded() {
    assert_eq!(
        load(&base()).unwrap().shutdown_drain,
        Duration::from_secs(10)
    );
    let s = load(&with(&[("SHUTDOWN_DRAIN_MS", "0")])).unwrap();
    assert_eq!(s.shutdown_drain, Duration::ZERO);
    refused("SHUTDOWN_DRAIN_MS", "120001");
}

#[test]
fn fault_outbox_give_up_after_defaults_to_six_hours_and_is_bounded() {
    assert_eq!(
        load(&base()).unwrap().outbox_give_up_after,
        Duration::from_secs(6 * 3600)
    );
    let s = load(&with(&[("OUTBOX_GIVE_UP_AFTER_MS", "600000")])).unwrap();
    assert_eq!(s.outbox_give_up_after, Duration::from_secs(600));
    refused("OUTBOX_GIVE_UP_AFTER_MS", "59999");
    refused("OUTBOX_GIVE_UP_AFTER_MS", "86400001");
}

#[test]
fn outbox_lease_is_seconds_and_bounded() {
    assert_eq!(load(&base()).unwrap().outbox_lease, Duration::from_secs(10));
    let s = load(&with(&[("OUTBOX_LEASE_MS", "3000")])).unwrap();
    assert_eq!(s.outbox_lease, Duration::from_secs(3));
    let p = refused("OUTBOX_LEASE_MS", "1999");
    assert_eq!(p.rule, "must be a whole number from 2000 to 300000");
    refused("OUTBOX_LEASE_MS", "300001");
}

#[test]
fn system_5_2_channel_is_one_of_four() {
    for (raw, channel) in [
        ("whatsapp", Channel::Whatsapp),
        ("instagram", Channel::Instagram),
        ("messenger", Channel::Messenger),
        ("telegram", Channel::Telegram),
    ] {
        assert_eq!(load(&with(&[("CHANNEL", raw)])).unwrap().channel, channel);
    }
    let p = refused("CHANNEL", "sms");
    assert_eq!(
        p.rule,
        "must be one of whatsapp, instagram, messenger, telegram"
    );
}

#[test]
fn system_5_2_numbers_must_parse() {
    for variable in [
        "AGENT_MAX_OUTPUT_TOKENS",
        "MANYCHAT_REPLY_GAP_MS",
        "RACE_DEADLINE_MS",
        "MODEL_ABORT_MS",
        "MAX_TURNS_IN_FLIGHT",
        "PORT",
    ] {
        for bad in ["abc", "-1", "1.5"] {
            problem(&[(variable, bad)], variable);
        }
    }
    refused("AGENT_TEMPERATURE", "warm");
    refused("AGENT_TEMPERATURE", "NaN");
}

#[test]
fn price_variables_are_validated_with_every_other_problem() {
    let err = load(&with(&[
        ("AGENT_PRICE_INPUT_PER_MTOK", "cheap"),
        ("AGENT_PRICE_CACHED_INPUT_PER_MTOK", "0.1"),
        ("PORT", "x"),
    ]))
    .unwrap_err();
    for variable in [
        "AGENT_PRICE_INPUT_PER_MTOK",
        "AGENT_PRICE_OUTPUT_PER_MTOK",
        "PORT",
    ] {
        assert!(err.problem(variable).is_some(), "{variable}: {err}");
    }
    assert!(
        err.problem("AGENT_PRICE_OUTPUT_PER_MTOK")
            .unwrap()
            .rule
            .contains("AGENT_PRICE_INPUT_PER_MTOK")
    );
    problem(
        &[
            ("AGENT_PRICE_INPUT_PER_MTOK", "1"),
            ("AGENT_PRICE_OUTPUT_PER_MTOK", "-2"),
        ],
        "AGENT_PRICE_OUTPUT_PER_MTOK",
    );
}

#[test]
fn unset_temperature_is_told_apart_from_one_set_to_the_default() {
    assert_eq!(load(&base()).unwrap().model.temperature, None);
    let s = load(&with(&[("AGENT_TEMPERATURE", "0.3")])).unwrap();
    assert_eq!(s.model.temperature, Some(0.3));
}

#[test]
fn system_5_2_port_is_a_u16() {
    refused("PORT", "65536");
    assert_eq!(load(&with(&[("PORT", "65535")])).unwrap().port, 65535);
    assert_eq!(load(&with(&[("PORT", "0")])).unwrap().port, 0);
}

#[test]
fn system_5_2_max_turns_in_flight_is_at_least_one() {
    let p = refused("MAX_TURNS_IN_FLIGHT", "0");
    assert_eq!(p.rule, "must be a whole number from 1 to 100000");
}

#[test]
fn system_5_2_durations_are_bounded_so_deadlines_cannot_overflow() {
    refused("MODEL_ABORT_MS", "3600001");
    refused("MODEL_ABORT_MS", "18446744073709551615");
}

#[test]
fn system_5_2_log_level_must_be_a_valid_filter() {
    refused("LOG_LEVEL", "loud=[");
    for ok in ["debug", "warn,manychat_agent=trace"] {
        assert!(load(&with(&[("LOG_LEVEL", ok)])).is_ok(), "{ok}");
    }
}

#[test]
fn system_5_2_trust_proxy_must_parse() {
    let p = refused("TRUST_PROXY", "loopback,anything");
    assert!(p.rule.contains("entry 2"), "{p}");
}

#[test]
fn delivery_handshake_is_off_unless_the_delivered_field_is_named_and_its_fields_stand_apart() {
    let on = load(&with(&[("MANYCHAT_DELIVERED_FIELD", "ai_delivered")])).unwrap();
    assert_eq!(
        on.manychat_delivery_handshake,
        Some(crate::outbox::DeliveryHandshake {
            delivered_field: "ai_delivered".into(),
            delivery_id_field: "ai_delivery_id".into(),
        }),
        "the id field defaults to ai_delivery_id"
    );
    let p = refused("MANYCHAT_DELIVERY_ID_FIELD", "reply_id");
    assert!(p.rule.contains("only with MANYCHAT_DELIVERED_FIELD"), "{p}");
    for (pairs, variable, other) in [
        (
            vec![("MANYCHAT_DELIVERED_FIELD", "AI_Message")],
            "MANYCHAT_DELIVERED_FIELD",
            "MANYCHAT_REPLY_FIELD",
        ),
        (
            vec![("MANYCHAT_DELIVERED_FIELD", "ai_token")],
            "MANYCHAT_DELIVERED_FIELD",
            "MANYCHAT_TOKEN_FIELD",
        ),
        (
            vec![
                ("MANYCHAT_DELIVERED_FIELD", "ai_delivered"),
                ("MANYCHAT_DELIVERY_ID_FIELD", "ai_message"),
            ],
            "MANYCHAT_DELIVERY_ID_FIELD",
            "MANYCHAT_REPLY_FIELD",
        ),
        (
            vec![
                ("MANYCHAT_DELIVERED_FIELD", "ai_delivered"),
                ("MANYCHAT_DELIVERY_ID_FIELD", "AI_DELIVERED"),
            ],
            "MANYCHAT_DELIVERED_FIELD",
            "MANYCHAT_DELIVERY_ID_FIELD",
        ),
    ] {
        let p = problem(&pairs, variable);
        assert!(p.rule.contains(other), "{pairs:?}: {p}");
        assert!(
            !p.rule.to_ascii_lowercase().contains("ai_"),
            "no value echoed: {p}"
        );
    }
}

#[test]
fn system_5_2_contact_tokens_enforced_is_boolean() {
    for (raw, expected) in [("true", true), ("1", true), ("false", false), ("0", false)] {
        let s = load(&with(&[("CONTACT_TOKENS_ENFORCED", raw)])).unwrap();
        assert_eq!(s.contact_tokens_enforced, expected, "{raw}");
    }
    refused("CONTACT_TOKENS_ENFORCED", "yes");
}

#[test]
fn system_5_2_agent_model_is_optional_until_required() {
    let s = load(&base()).unwrap();
    assert_eq!(s.require_model(), Err(ModelRequired));
    assert_eq!(
        ModelRequired.to_string(),
        "AGENT_MODEL: required (provider:model, e.g. mock:demo)"
    );
    let s = load(&with(&[("AGENT_MODEL", "ollama:llama3.1:8b")])).unwrap();
    assert_eq!(s.require_model(), Ok("ollama:llama3.1:8b"));
    refused("AGENT_MODEL", "gpt");
}

#[test]
fn system_5_2_base_urls_must_be_http() {
    refused("OPENAI_BASE_URL", "not a url");
    refused("MANYCHAT_API_BASE", "ftp://x.example.test");
}

#[test]
fn spec_020_media_base_and_transcription_model() {
    let s = load(&base()).unwrap();
    assert_eq!(s.manychat_media_base, crate::media::DEFAULT_MEDIA_BASE);
    assert_eq!(s.transcription_model, None);
    let s = load(&with(&[
        ("MANYCHAT_MEDIA_BASE", "http://127.0.0.1:4010"),
        ("TRANSCRIPTION_MODEL", "openai:gpt-4o-mini-transcribe"),
    ]))
    .unwrap();
    assert_eq!(s.manychat_media_base, "http://127.0.0.1:4010");
    assert_eq!(
        s.transcription_model.as_deref(),
        Some("openai:gpt-4o-mini-transcribe")
    );
    // Plain HTTP only on loopback, like a test's or the demo's file host.
    refused("MANYCHAT_MEDIA_BASE", "http://files.example.test");
    refused("TRANSCRIPTION_MODEL", "whisper");
}

#[test]
fn spec_031_insight_model_is_provider_and_model_and_unset_means_no_run() {
    assert_eq!(load(&base()).unwrap().insight_model, None);
    let s = load(&with(&[("INSIGHT_MODEL", "anthropic:claude-sonnet-4-5")])).unwrap();
    assert_eq!(
        s.insight_model.as_deref(),
        Some("anthropic:claude-sonnet-4-5")
    );
    refused("INSIGHT_MODEL", "claude");
}

#[test]
fn knowledge_embeddings_unset_is_off_and_each_provider_form_is_read() {
    assert_eq!(load(&base()).unwrap().knowledge_embeddings, None);
    let s = load(&with(&[
        ("KNOWLEDGE_EMBEDDINGS", "openai:text-embedding-3-small"),
        ("OPENAI_API_KEY", "sk-fixture"),
    ]))
    .unwrap();
    let spec = s.knowledge_embeddings.expect("a spec");
    assert_eq!(spec.id(), "openai:text-embedding-3-small");
    let s = load(&with(&[(
        "KNOWLEDGE_EMBEDDINGS",
        "ollama:nomic-embed-text",
    )]))
    .unwrap();
    assert_eq!(s.knowledge_embeddings.unwrap().provider, "ollama");
    let s = load(&with(&[
        ("KNOWLEDGE_EMBEDDINGS", "gemini:text-embedding-004"),
        ("GOOGLE_GENERATIVE_AI_API_KEY", "g-fixture"),
    ]))
    .unwrap();
    assert_eq!(s.knowledge_embeddings.unwrap().model, "text-embedding-004");
}

#[test]
fn knowledge_embeddings_a_bad_value_names_the_variable_and_the_allowed_forms() {
    for bad in [
        "text-embedding-3-small",
        "cohere:embed-v3",
        "openai:",
        "sk-pasted-key",
    ] {
        let refusal = refused("KNOWLEDGE_EMBEDDINGS", bad);
        assert_eq!(refusal.variable, "KNOWLEDGE_EMBEDDINGS");
        for form in ["openai:<model>", "gemini:<model>", "ollama:<model>"] {
            assert!(refusal.rule.contains(form), "{bad}: {}", refusal.rule);
        }
    }
    let pasted = refused("KNOWLEDGE_EMBEDDINGS", "sk-pasted:key here");
    assert!(
        !pasted.rule.contains("sk-pasted"),
        "the value is never echoed"
    );
    // The provider's key is required, reported with every other problem at once.
    let err = load(&with(&[
        ("KNOWLEDGE_EMBEDDINGS", "gemini:text-embedding-004"),
        ("PORT", "not-a-port"),
    ]))
    .expect_err("refused");
    assert!(
        err.problem("GOOGLE_GENERATIVE_AI_API_KEY").is_some(),
        "{err}"
    );
    assert!(err.problem("PORT").is_some(), "{err}");
    let rule = problem(
        &[("KNOWLEDGE_EMBEDDINGS", "openai:text-embedding-3-small")],
        "OPENAI_API_KEY",
    )
    .rule;
    assert!(rule.contains("KNOWLEDGE_EMBEDDINGS"), "{rule}");
}

#[test]
fn retention_days_defaults_to_90_and_accepts_off() {
    assert_eq!(load(&base()).unwrap().retention_days, Some(90));
    for (raw, expected) in [
        ("30", Some(30)),
        ("off", None),
        ("OFF", None),
        ("1", Some(1)),
    ] {
        let s = load(&with(&[("RETENTION_DAYS", raw)])).unwrap();
        assert_eq!(s.retention_days, expected, "{raw}");
    }
    for raw in ["0", "-1", "2.5", "forever", "36501"] {
        let p = problem(&[("RETENTION_DAYS", raw)], "RETENTION_DAYS");
        assert_eq!(
            p.rule, "must be a whole number of days from 1 to 36500, or off",
            "{raw}"
        );
    }
    // Reported with every other problem, and alone for the commands that need only it.
    let err = load(&HashMap::from([("RETENTION_DAYS", "0".to_owned())])).unwrap_err();
    assert!(err.problem("RETENTION_DAYS").is_some());
    assert!(err.problem("PUBLIC_BASE_URL").is_some());
    assert_eq!(retention_days_from_vars(|_| None), Ok(Some(90)));
    assert!(retention_days_from_vars(|_| Some("0".to_owned())).is_err());
}

#[test]
fn system_5_2_all_problems_are_reported_at_once() {
    let vars = HashMap::from([
        ("PORT", "x".to_owned()),
        ("CHANNEL", "sms".to_owned()),
        ("MODEL_ABORT_MS", "100".to_owned()),
    ]);
    let err = load(&vars).unwrap_err();
    let names: Vec<&str> = err.problems.iter().map(|p| p.variable).collect();
    for expected in [
        "MANYCHAT_SHARED_SECRET",
        "PUBLIC_BASE_URL",
        "CHANNEL",
        "MODEL_ABORT_MS",
        "PORT",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let text = err.to_string();
    assert!(text.starts_with("invalid environment:"), "{text}");
    assert!(text.contains("\n  PORT: "), "{text}");
}

#[test]
fn a_sqlite_folder_that_does_not_exist_is_reported_at_start() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let missing = dir.path().join("no-such-folder");
    let url = format!("sqlite://{}/agent.db", missing.display());
    let p = problem(&[("DATABASE_URL", &url)], "DATABASE_URL");
    assert!(p.rule.contains("does not exist"), "{p}");
    let url = format!("sqlite://{}/agent.db", dir.path().display());
    assert!(load(&with(&[("DATABASE_URL", &url)])).is_ok());
    // The default folder is created by the store, so it is no problem here.
    assert!(load(&with(&[("DATABASE_URL", "sqlite://data/agent.db")])).is_ok());
}

#[test]
fn connection_limits_have_defaults_and_are_read_and_checked() {
    let s = load(&base()).unwrap();
    assert_eq!(s.connections, ConnectionLimits::default());
    assert_eq!(s.connections.header_timeout, Duration::from_secs(10));
    assert_eq!(s.connections.idle_timeout, Duration::from_secs(75));
    assert_eq!(s.connections.body_timeout, Duration::from_secs(10));
    assert_eq!(s.connections.max_connections, 1024);
    assert_eq!(s.connections.max_connections_per_address, 256);
    let s = load(&with(&[
        ("HTTP_HEADER_TIMEOUT_MS", "2000"),
        ("HTTP_IDLE_TIMEOUT_MS", "90000"),
        ("HTTP_BODY_TIMEOUT_MS", "3000"),
        ("HTTP_MAX_CONNECTIONS", "50"),
        ("HTTP_MAX_CONNECTIONS_PER_ADDRESS", "50"),
    ]))
    .unwrap();
    assert_eq!(
        s.connections,
        ConnectionLimits {
            header_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(90),
            body_timeout: Duration::from_secs(3),
            max_connections: 50,
            max_connections_per_address: 50,
        }
    );
    // Every problem at once, each naming its variable.
    let err = load(&with(&[
        ("HTTP_HEADER_TIMEOUT_MS", "0"),
        ("HTTP_IDLE_TIMEOUT_MS", "soon"),
        ("HTTP_BODY_TIMEOUT_MS", "3600001"),
        ("HTTP_MAX_CONNECTIONS", "10"),
        ("HTTP_MAX_CONNECTIONS_PER_ADDRESS", "11"),
    ]))
    .unwrap_err();
    for variable in [
        "HTTP_HEADER_TIMEOUT_MS",
        "HTTP_IDLE_TIMEOUT_MS",
        "HTTP_BODY_TIMEOUT_MS",
        "HTTP_MAX_CONNECTIONS_PER_ADDRESS",
    ] {
        assert!(err.problem(variable).is_some(), "{variable}: {err}");
    }
    assert_eq!(
        err.problem("HTTP_MAX_CONNECTIONS_PER_ADDRESS")
            .unwrap()
            .rule,
        "must not exceed HTTP_MAX_CONNECTIONS"
    );
    refused("HTTP_MAX_CONNECTIONS", "0");
}

/// `variable` set to `{hidden}-0123456789` is taken into `field` and never shows in `Debug`;
/// a short value is refused without echoing it.
fn assert_token_taken_and_kept_out_of_sight(
    variable: &'static str,
    hidden: &str,
    field: fn(&Settings) -> &Option<Secret>,
) {
    let value = format!("{hidden}-0123456789");
    let s = load(&with(&[(variable, &value)])).unwrap();
    assert_eq!(*field(&s), Some(Secret::new(&value)));
    assert!(!format!("{s:?}").contains(hidden));
    let p = refused(variable, "short");
    assert!(!p.to_string().contains("short"), "value leaked: {p}");
}

#[test]
fn metrics_token_is_optional_and_long_enough() {
    assert_eq!(load(&base()).unwrap().metrics_token, None);
    assert_token_taken_and_kept_out_of_sight("METRICS_TOKEN", "metrics-token", |s| {
        &s.metrics_token
    });
}

#[test]
fn release_and_metrics_tokens_are_long_enough_and_never_the_shared_secret() {
    let s = load(&base()).unwrap();
    assert_eq!(s.release_token, None, "unset: the release route is off");
    assert!(!s.metrics_open);
    assert_token_taken_and_kept_out_of_sight("RELEASE_TOKEN", "release-token", |s| {
        &s.release_token
    });
    for variable in ["RELEASE_TOKEN", "METRICS_TOKEN"] {
        let p = refused(variable, SECRET_A);
        assert!(p.rule.contains("MANYCHAT_SHARED_SECRET"), "{p}");
        assert!(!p.to_string().contains(SECRET_A), "value leaked: {p}");
    }
    assert!(
        load(&with(&[("METRICS_OPEN", "true")]))
            .unwrap()
            .metrics_open
    );
    refused("METRICS_OPEN", "yes please");
}

#[test]
fn c5_settings_debug_redacts_secrets() {
    let s = load(&with(&[
        ("OPENAI_API_KEY", "sk-fixture-visible"),
        ("MANYCHAT_API_TOKEN", "mc-fixture-visible"),
        (
            "DATABASE_URL",
            "postgres://agent:pw-fixture-visible@db.example.test/agent",
        ),
    ]))
    .unwrap();
    let printed = format!("{s:?}");
    assert!(!printed.contains("fixture-visible"), "{printed}");
    assert!(!printed.contains(SECRET_A), "{printed}");
    assert!(printed.contains("[redacted]"));
}

#[test]
fn media_limits_have_defaults_and_are_read_and_checked() {
    use crate::media::MediaLimits;
    let s = load(&base()).unwrap();
    assert_eq!(s.media_limits, MediaLimits::default());
    assert_eq!(s.media_limits.max_duration, Duration::from_secs(300));
    assert_eq!(s.media_limits.max_audio, Duration::from_secs(300));
    assert_eq!(s.media_limits.max_dimension, 4096);
    assert_eq!(s.media_limits.process_memory, 512 * 1024 * 1024);
    assert_eq!(s.media_limits.process_time, Duration::from_secs(20));
    assert_eq!(s.media_limits.max_jobs, 1);
    // The media processes together, with the defaults: at most 512 MB.
    assert!(s.media_limits.process_memory * s.media_limits.max_jobs as u64 <= 512 * 1024 * 1024);
    let s = load(&with(&[
        ("MEDIA_MAX_DURATION_SECONDS", "120"),
        ("MEDIA_MAX_AUDIO_SECONDS", "60"),
        ("MEDIA_MAX_DIMENSION", "2048"),
        ("MEDIA_PROCESS_MEMORY_MB", "512"),
        ("MEDIA_PROCESS_TIMEOUT_MS", "5000"),
        ("MEDIA_MAX_JOBS", "4"),
    ]))
    .unwrap();
    assert_eq!(
        s.media_limits,
        MediaLimits {
            max_duration: Duration::from_secs(120),
            max_audio: Duration::from_secs(60),
            max_dimension: 2048,
            process_memory: 512 * 1024 * 1024,
            process_time: Duration::from_secs(5),
            max_jobs: 4,
        }
    );
    // Every problem at once, each naming its variable.
    let err = load(&with(&[
        ("MEDIA_MAX_DURATION_SECONDS", "0"),
        ("MEDIA_MAX_AUDIO_SECONDS", "3601"),
        ("MEDIA_MAX_DIMENSION", "wide"),
        ("MEDIA_PROCESS_MEMORY_MB", "64"),
        ("MEDIA_PROCESS_TIMEOUT_MS", "99"),
        ("MEDIA_MAX_JOBS", "0"),
    ]))
    .unwrap_err();
    for variable in [
        "MEDIA_MAX_DURATION_SECONDS",
        "MEDIA_MAX_AUDIO_SECONDS",
        "MEDIA_MAX_DIMENSION",
        "MEDIA_PROCESS_MEMORY_MB",
        "MEDIA_PROCESS_TIMEOUT_MS",
        "MEDIA_MAX_JOBS",
    ] {
        assert!(err.problem(variable).is_some(), "{variable}: {err}");
    }
    assert_eq!(err.problems.len(), 6, "{err}");
}

#[test]
fn console_password_hash_malformed_is_a_start_error_naming_the_variable_never_the_value() {
    let problem = refused("CONSOLE_PASSWORD_HASH", "$argon2i$v=19$secretvalue");
    assert!(!problem.rule.contains("secretvalue"), "{}", problem.rule);
    assert!(
        load(&base()).unwrap().console_password_hash.is_none(),
        "unset: the console is off"
    );
    let hash = crate::console::auth::PasswordHashSetting::make("twelve chars!");
    let set = load(&with(&[("CONSOLE_PASSWORD_HASH", hash.as_str())])).unwrap();
    assert_eq!(set.console_password_hash, Some(hash));
}
