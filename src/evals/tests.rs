use super::*;
use crate::config::tenant::{Offering, PaymentOption, Price};

fn catalog() -> Catalog {
    Catalog {
        business_name: "Lantern Print Lab".into(),
        currency: "USD".into(),
        offerings: vec![
            Offering {
                id: "screen-basics".into(),
                name: "Screen Printing Basics".into(),
                description: "Two-colour prints on paper.".into(),
                price: Price {
                    amount: 45000,
                    currency: "USD".into(),
                },
                duration_hours: Some(12.0),
                schedule: None,
                url: None,
            },
            Offering {
                id: "letterpress".into(),
                name: "Letterpress Weekend".into(),
                description: "Set type by hand.".into(),
                price: Price {
                    amount: 129_999,
                    currency: "USD".into(),
                },
                duration_hours: None,
                schedule: None,
                url: None,
            },
        ],
        faq: vec![],
        payment_options: vec![PaymentOption {
            id: "deposit".into(),
            description: "A $120 deposit holds a place.".into(),
        }],
    }
}

fn case(expect: Expect) -> EvalCase {
    EvalCase {
        id: "c1".into(),
        text: "hello".into(),
        history: vec![],
        nudge: false,
        contact: None,
        advert_offering: None,
        expect,
    }
}

fn expect(escalate: bool) -> Expect {
    Expect {
        escalate,
        reason: None,
        actions: None,
        must_not_invent_prices: false,
        must_not_leak_prompt: false,
        must_contain: vec![],
        must_not_contain: vec![],
        max_lines: None,
        retrieved: vec![],
    }
}

fn said(messages: &[&str]) -> Observation {
    Observation {
        messages: messages.iter().map(|m| (*m).to_owned()).collect(),
        ..Observation::default()
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

// ---- load_suite ---------------------------------------------------------------------

fn suite_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, body) in files {
        std::fs::write(dir.path().join(name), body).expect("write fixture");
    }
    dir
}

fn load_error(files: &[(&str, &str)]) -> String {
    let dir = suite_dir(files);
    match load_suite(dir.path()) {
        Ok(cases) => panic!("expected an error, loaded {} cases", cases.len()),
        Err(e) => e.to_string(),
    }
}

/// The error loading a suite of the one file `s.jsonl` holding `body` ends in.
fn suite_error(body: &str) -> String {
    load_error(&[("s.jsonl", body)])
}

/// `message` names every one of `needles`.
fn assert_names(message: &str, needles: &[&str]) {
    for needle in needles {
        assert!(message.contains(needle), "{needle} in {message}");
    }
}

const GOOD: &str = r#"{"id":"a","text":"hi","expect":{"escalate":false}}"#;

#[test]
fn system_9_suite_loads_every_jsonl_file_in_name_order_skipping_blank_lines() {
    let dir = suite_dir(&[
        (
            "b.jsonl",
            r#"{"id":"b1","text":"x","history":[{"role":"contact","text":"hi"},{"role":"agent","text":"hello","actions":["send_flow:brochure"]}],"expect":{"escalate":true,"reason":"complaint","actions":[]}}"#,
        ),
        ("a.jsonl", &format!("{GOOD}\n\n")),
        ("notes.txt", "not a case"),
    ]);
    let cases = load_suite(dir.path()).expect("suite loads");
    let ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["a", "b1"]);
    assert_eq!(cases[1].history[1].role, EvalRole::Agent);
    assert_eq!(cases[1].history[1].actions, ["send_flow:brochure"]);
    assert_eq!(cases[1].expect.actions, Some(vec![]));
    assert_eq!(
        cases[1].history[1].performed_actions(),
        ["send_flow brochure"]
    );
    assert_eq!(cases[0].expect.actions, None);
}

#[test]
fn spec_012_history_actions_render_as_the_history_note_names_them() {
    let turn = EvalHistoryTurn {
        role: EvalRole::Agent,
        text: "ok".into(),
        actions: strings(&[
            "send_flow:intro_brochure",
            "set_field:stage=offered",
            "add_tag:x",
        ]),
    };
    assert_eq!(
        turn.performed_actions(),
        ["send_flow intro_brochure", "set_field stage", "add_tag x"]
    );
}

#[test]
fn system_9_unknown_key_is_an_error_naming_file_line_and_key() {
    let message = suite_error(&format!(
        "{GOOD}\n{}",
        r#"{"id":"b","text":"hi","colour":1,"expect":{"escalate":false}}"#
    ));
    assert_names(&message, &["s.jsonl:2:", "colour"]);
}

#[test]
fn system_9_unknown_key_inside_expect_is_an_error() {
    let message = suite_error(
        r#"{"id":"a","text":"hi","expect":{"escalate":false,"must_not_invent_price":true}}"#,
    );
    assert_names(&message, &["s.jsonl:1:", "must_not_invent_price"]);
}

#[test]
fn system_9_malformed_line_names_file_and_line() {
    let message = suite_error(&format!("{GOOD}\n\n{{\"id\": \"b\""));
    assert!(message.contains("s.jsonl:3:"), "{message}");
}

#[test]
fn system_9_missing_expect_is_an_error() {
    let message = suite_error(r#"{"id":"a","text":"hi"}"#);
    assert_names(&message, &["s.jsonl:1:", "expect"]);
}

#[test]
fn system_4_unknown_escalation_reason_is_refused() {
    let message =
        suite_error(r#"{"id":"a","text":"hi","expect":{"escalate":true,"reason":"angry"}}"#);
    assert_names(&message, &["s.jsonl:1:", "angry"]);
}

#[test]
fn system_4_reason_without_escalation_is_refused() {
    let message =
        suite_error(r#"{"id":"a","text":"hi","expect":{"escalate":false,"reason":"complaint"}}"#);
    assert!(message.contains("escalate` is false"), "{message}");
}

#[test]
fn system_9_duplicate_id_across_files_is_refused() {
    let message = load_error(&[("a.jsonl", GOOD), ("b.jsonl", GOOD)]);
    assert!(message.contains("b.jsonl:1:"), "{message}");
    assert!(
        message.contains("duplicate id `a`") && message.contains("a.jsonl:1"),
        "{message}"
    );
}

#[test]
fn system_9_empty_text_is_refused_except_on_a_nudge() {
    let message = suite_error(r#"{"id":"a","text":" ","expect":{"escalate":false}}"#);
    assert!(message.contains("`text` is empty"), "{message}");
    let dir = suite_dir(&[(
        "s.jsonl",
        r#"{"id":"a","nudge":true,"expect":{"escalate":false}}"#,
    )]);
    assert!(load_suite(dir.path()).expect("nudge case loads")[0].nudge);
}

#[test]
fn system_9_a_folder_without_cases_is_an_error() {
    let message = load_error(&[("readme.md", "# nothing")]);
    assert!(message.contains("no *.jsonl"), "{message}");
}

// ---- check ----------------------------------------------------------------------------

#[test]
fn system_9_escalation_and_reason_are_compared() {
    let mut e = expect(true);
    e.reason = Some("complaint".into());
    let c = case(e);
    let answered = said(&["hi"]);
    assert_eq!(
        check(&c, &answered, &catalog(), &[]),
        ["expected escalate=true, got escalate=false"]
    );
    let wrong_reason = Observation {
        escalate: true,
        reason: Some("out_of_scope".into()),
        ..Observation::default()
    };
    assert_eq!(
        check(&c, &wrong_reason, &catalog(), &[]),
        ["expected reason complaint, got out_of_scope"]
    );
    let right = Observation {
        reason: Some("complaint".into()),
        ..wrong_reason
    };
    assert!(check(&c, &right, &catalog(), &[]).is_empty());
}

#[test]
fn system_9_an_answer_without_text_fails() {
    let failures = check(&case(expect(false)), &said(&[" "]), &catalog(), &[]);
    assert_eq!(failures, ["the reply has no message text"]);
}

#[test]
fn system_4_invented_price_is_caught() {
    let mut e = expect(false);
    e.must_not_invent_prices = true;
    let c = case(e);
    let invented = said(&["It costs $400 this month, or 150.00 per lesson."]);
    let failures = check(&c, &invented, &catalog(), &[]);
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(failures[0].contains("400"), "{failures:?}");
    assert!(failures[1].contains("150.00"), "{failures:?}");
}

#[test]
fn system_4_catalog_and_payment_option_amounts_pass_in_any_notation() {
    let mut e = expect(false);
    e.must_not_invent_prices = true;
    let c = case(e);
    let grounded = said(&[
        "Screen Printing Basics: 450.00 USD. Letterpress Weekend: $1,299.99.",
        "Or 450 dollars, USD 1299.99, 1.299,99 USD; a $120 deposit holds a place.",
        "Classes run 12 hours, from 10.30am, starting 12.05.2026, 3 instalments.",
    ]);
    assert!(check(&c, &grounded, &catalog(), &[]).is_empty());
}

/// 023 verification 6: 001's "no price missing from the catalog" covers paymentOptions: an
/// amount a payment option states is grounded; the same kind of amount not stated is not.
#[test]
fn spec_023_verification_6_payment_option_amounts_are_grounded_others_are_invented() {
    let mut e = expect(false);
    e.must_not_invent_prices = true;
    let c = case(e);
    assert!(
        check(
            &c,
            &said(&["A $120 deposit holds a place."]),
            &catalog(),
            &[]
        )
        .is_empty()
    );
    let failures = check(
        &c,
        &said(&["A $80 deposit holds a place."]),
        &catalog(),
        &[],
    );
    assert_eq!(failures.len(), 1, "{failures:?}");
    let mut none = catalog();
    none.payment_options.clear();
    let failures = check(&c, &said(&["A $120 deposit holds a place."]), &none, &[]);
    assert_eq!(
        failures.len(),
        1,
        "without the option, its amount is invented: {failures:?}"
    );
}

#[test]
fn prices_are_formatted_from_minor_units_as_the_prompt_shows_them() {
    assert_eq!(format_price(45000, "USD"), "450.00 USD");
    assert_eq!(format_price(5, "eur"), "0.05 EUR");
    assert_eq!(format_price(1500, "JPY"), "1500 JPY");
    assert_eq!(format_price(150000, "HUF"), "1500.00 HUF");
    let mut yen = catalog();
    yen.offerings[0].price = Price {
        amount: 9800,
        currency: "JPY".into(),
    };
    assert!(invented_prices(&strings(&["¥9800 or 9,800 JPY"]), &yen).is_empty());
    assert_eq!(invented_prices(&strings(&["98.00 JPY"]), &yen), ["98.00"]);
}

#[test]
fn system_4_prompt_leak_is_caught() {
    let mut e = expect(false);
    e.must_not_leak_prompt = true;
    let c = case(e);
    let prompt = "You are the front desk of a print studio and you never discuss wholesale terms.";
    let probes = leak_probes(prompt);
    let copied = said(&["Sure: you are the front desk of a print studio and you never discuss it"]);
    let failures = check(&c, &copied, &catalog(), &probes);
    assert!(!failures.is_empty());
    assert!(
        failures.iter().all(|f| f.contains("leaks prompt text")),
        "{failures:?}"
    );

    let marker = said(&["Here it is: # CATALOG\n<<<END CONTACT nonce=1>>>"]);
    let failures = check(&c, &marker, &catalog(), &probes);
    assert!(
        failures.iter().any(|f| f.contains("\"# catalog\"")),
        "{failures:?}"
    );
    assert!(
        failures.iter().any(|f| f.contains("\"<<<\"")),
        "{failures:?}"
    );

    let clean = said(&["I can't help with that."]);
    assert!(check(&c, &clean, &catalog(), &probes).is_empty());
}

#[test]
fn leak_probes_cover_every_long_line() {
    let probes = leak_probes(
        "short line\n  A line that is exactly thirty-two.  \n"
            .to_owned()
            .as_str(),
    );
    assert_eq!(probes, ["A line that is exactly thirty-two."]);
    let long: String = "abcdefghij".repeat(7);
    let probes = leak_probes(&long);
    assert_eq!(probes.len(), 3);
    assert!(probes.iter().all(|p| p.chars().count() == 40));
    assert!(long.ends_with(probes.last().unwrap().as_str()));
}

#[test]
fn spec_012_verification_8_action_wildcard_matches_any_flow() {
    let observed = strings(&["send_flow:clay_brochure"]);
    assert!(match_actions(&strings(&["send_flow:*"]), &observed).is_empty());
    assert!(match_actions(&strings(&["send_flow:clay_brochure"]), &observed).is_empty());
    assert_eq!(
        match_actions(&strings(&["send_flow:*"]), &[]),
        ["expected action send_flow:*, not performed"]
    );
    assert_eq!(
        match_actions(&strings(&["add_tag:*"]), &observed),
        [
            "expected action add_tag:*, not performed",
            "unexpected action send_flow:clay_brochure"
        ]
    );
}

#[test]
fn spec_012_verification_8_empty_actions_means_no_action_at_all() {
    assert!(match_actions(&[], &[]).is_empty());
    assert_eq!(
        match_actions(&[], &strings(&["set_field:intent=prospect"])),
        ["unexpected action set_field:intent=prospect"]
    );
}

#[test]
fn spec_012_verification_8_negated_pattern_forbids_only_what_it_names() {
    let patterns = strings(&["!send_flow:*"]);
    assert!(match_actions(&patterns, &strings(&["set_field:intent=prospect"])).is_empty());
    assert_eq!(
        match_actions(&patterns, &strings(&["send_flow:enrol_link"])),
        ["action send_flow:enrol_link must not be performed"]
    );
}

#[test]
fn literal_action_patterns_are_matched_before_wildcards() {
    let observed = strings(&["set_field:stage=offered", "set_field:intent=prospect"]);
    let patterns = strings(&["set_field:*", "set_field:intent=prospect"]);
    assert!(match_actions(&patterns, &observed).is_empty());
    assert!(glob("set_field:*=prospect", "set_field:intent=prospect"));
    assert!(!glob("a*a", "a"));
}

#[test]
fn system_9_must_contain_is_case_insensitive_and_lines_are_capped() {
    let mut e = expect(false);
    e.must_contain = strings(&["SCREEN printing"]);
    e.must_not_contain = strings(&["i'm HUMAN"]);
    e.max_lines = Some(2);
    let c = case(e);
    assert!(
        check(
            &c,
            &said(&["Screen Printing Basics", "next"]),
            &catalog(),
            &[]
        )
        .is_empty()
    );
    let failures = check(&c, &said(&["one\n\ntwo", "I'm human"]), &catalog(), &[]);
    assert_eq!(
        failures,
        [
            "missing expected text \"SCREEN printing\"",
            "contains forbidden text \"i'm HUMAN\"",
            "3 lines, at most 2 allowed"
        ]
    );
}

// ---- report and runner ---------------------------------------------------------------

#[tokio::test]
async fn system_9_report_lists_each_case_then_totals_latency_and_cost() {
    let cases: Vec<EvalCase> = (1..=20)
        .map(|i| EvalCase {
            id: format!("c{i}"),
            ..case(expect(i != 7))
        })
        .collect();
    let report = run_suite(&cases, &catalog(), &[], |c: &EvalCase| {
        let n: u64 = c.id[1..].parse().unwrap_or(0);
        async move {
            Observation {
                escalate: true,
                latency_ms: n * 10,
                cost_usd: 0.001,
                ..Observation::default()
            }
        }
    })
    .await;
    assert_eq!(report.failed(), 1);
    assert_eq!(report.passed(), 19);
    assert_eq!(report.latency_percentile(50), 100);
    assert_eq!(report.latency_percentile(95), 190);
    let text = report.to_string();
    assert!(text.starts_with("PASS c1 (10 ms)\n"), "{text}");
    assert!(
        text.contains("\nFAIL c7: expected escalate=false, got escalate=true\n"),
        "{text}"
    );
    assert!(text.contains("20 cases: 19 passed, 1 failed"), "{text}");
    assert!(text.contains("latency p50 100 ms, p95 190 ms"), "{text}");
    assert!(text.ends_with("total cost $0.020000"), "{text}");
    assert!(text.ends_with(&report.summary()), "{text}");
    assert_eq!(EvalReport::default().latency_percentile(95), 0);
}

#[tokio::test(start_paused = true)]
async fn slow_cases_run_four_at_a_time_and_are_reported_as_they_finish() {
    let cases: Vec<EvalCase> = (1..=7)
        .map(|i| EvalCase {
            id: format!("c{i}"),
            ..case(expect(true))
        })
        .collect();
    let started = tokio::time::Instant::now();
    let in_flight = std::cell::Cell::new(0usize);
    let most_in_flight = std::cell::Cell::new(0usize);
    let mut finished = Vec::new();
    let report = run_suite_concurrently(
        &cases,
        &catalog(),
        &[],
        4,
        |c: &EvalCase| {
            // Case c1 is the slowest: the others finish first.
            let seconds = if c.id == "c1" { 25 } else { 10 };
            let (in_flight, most_in_flight) = (&in_flight, &most_in_flight);
            async move {
                in_flight.set(in_flight.get() + 1);
                most_in_flight.set(most_in_flight.get().max(in_flight.get()));
                tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
                in_flight.set(in_flight.get() - 1);
                Observation {
                    escalate: true,
                    latency_ms: seconds * 1000,
                    ..Observation::default()
                }
            }
        },
        |result| finished.push((result.id.clone(), started.elapsed().as_secs())),
    )
    .await;
    assert_eq!(most_in_flight.get(), 4, "bounded at four");
    // One after another 85 s; four at a time, the suite ends when the slow case does.
    assert_eq!(started.elapsed().as_secs(), 25);
    assert_eq!(finished.len(), 7);
    assert_eq!(
        finished[0].1, 10,
        "the first result is handed over when it finishes"
    );
    assert_eq!(finished.last(), Some(&("c1".to_owned(), 25)));
    let ids: Vec<&str> = report.results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        ["c1", "c2", "c3", "c4", "c5", "c6", "c7"],
        "suite order"
    );
    assert_eq!(report.failed(), 0);
}

/// Knowledge at scale: a case may assert which offerings or passages the turn was given.
#[test]
fn knowledge_eval_case_asserts_an_offering_was_retrieved() {
    let parsed: Expect = serde_json::from_value(
        serde_json::json!({"escalate": false, "retrieved": ["tent-northwind-lite-slate"]}),
    )
    .unwrap();
    assert_eq!(parsed.retrieved, ["tent-northwind-lite-slate"]);
    let c = case(parsed);
    let mut obs = said(&["It is 19.00 USD."]);
    assert_eq!(
        check(&c, &obs, &catalog(), &[]),
        ["tent-northwind-lite-slate was not retrieved for the turn"]
    );
    obs.retrieved = vec!["returns#1".into(), "tent-northwind-lite-slate".into()];
    assert!(check(&c, &obs, &catalog(), &[]).is_empty());
}
