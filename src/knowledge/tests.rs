//! Knowledge at scale: the threshold, retrieval on the invented tenants, the prompt and tool
//! layout above the threshold, and the golden cases answered by the demo model.

use std::sync::Arc;

use serde_json::{Value, json};

use super::fixtures::{english_tenant, spanish_tenant};
use super::*;
use crate::agent::{self, SnapshotPrompt, ThinkInput, static_prefix};
use crate::config::knowledge::Passage;
use crate::model::Message;
use crate::model::demo::DemoModel;
use crate::model::mock::{RecordingModel, ScriptedModel, call, reply, tool_calls};
use crate::tools::{ToolSpecs, TurnTools};

/// Offering `i` of a tenant, by position.
fn offering(config: &TenantConfig, i: usize) -> &crate::config::Offering {
    &config.catalog.offerings[i]
}

fn retrieve(knowledge: &Knowledge, message: &str) -> Retrieved {
    knowledge.retrieve(Query {
        message,
        ..Query::default()
    })
}

/// A turn through the agent with `model`: the retrieved knowledge as the turn engine gives it,
/// tools that stage. Returns the thought, what was given (ids) and the first request.
async fn turn(
    config: &Arc<TenantConfig>,
    knowledge: &Arc<Knowledge>,
    model: Arc<dyn crate::model::Model>,
    text: &str,
) -> (agent::Thought, TurnKnowledge, crate::model::ModelRequest) {
    let recording = RecordingModel::new(model);
    let prompt = SnapshotPrompt::new(config);
    let retrieved = knowledge.for_turn(text, &[], None);
    let mut tools =
        TurnTools::without_reads_with(config.clone(), Default::default(), knowledge.clone());
    let thought = agent::think(
        &recording,
        ThinkInput {
            config,
            prompt: &prompt,
            notices: &[],
            history: &[],
            contact_text: text,
            max_output_tokens: 600,
            temperature: 0.0,
            max_messages: 3,
            images: &[],
            budget: None,
            retrieved: retrieved.as_ref(),
        },
        &mut tools,
    )
    .await;
    let given = TurnKnowledge::of(config, &retrieved.unwrap_or_default(), tools.given());
    (thought, given, recording.requests().remove(0))
}

fn last_user_text(request: &crate::model::ModelRequest) -> &str {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User { text } => Some(text.as_str()),
            _ => None,
        })
        .expect("a user message")
}

#[test]
fn knowledge_threshold_defaults_to_40_offerings_and_3000_document_tokens() {
    let demo = crate::config::examples::demo_tenant();
    assert_eq!(Layout::of(&demo), Layout::default(), "the demo is small");
    let at = fixtures::tenant(fixtures::english_catalog(40, 1), vec![]);
    assert!(
        !Layout::of(&at).catalog_retrieved,
        "40 offerings stay in the prompt"
    );
    let over = fixtures::tenant(fixtures::english_catalog(41, 1), vec![]);
    assert!(Layout::of(&over).catalog_retrieved, "41 are retrieved");

    let mut docs = fixtures::tenant(fixtures::english_catalog(3, 1), vec![]);
    docs.knowledge = vec![Passage {
        id: "long#1".into(),
        file: "long.md".into(),
        heading: String::new(),
        text: "x".repeat(3000 * 4),
    }];
    assert!(!Layout::of(&docs).documents_retrieved, "3,000 tokens stay");
    docs.knowledge[0].text.push_str("abcd");
    assert!(Layout::of(&docs).documents_retrieved, "3,001 are retrieved");
    docs.rules.knowledge.prompt_document_tokens = 5000;
    assert!(
        !Layout::of(&docs).documents_retrieved,
        "the rules.json key moves it"
    );
    assert_eq!(estimate_tokens("abcde"), 2);
}

#[test]
fn knowledge_small_tenant_builds_no_index_and_its_prefix_has_no_new_section() {
    // The demo's example document aside: a small tenant without documents.
    let mut demo = crate::config::examples::demo_tenant();
    demo.knowledge.clear();
    let knowledge = Knowledge::build(&demo);
    assert!(knowledge.index.is_none());
    assert_eq!(knowledge.for_turn("price?", &[], None), None);
    let prefix = static_prefix(&demo);
    assert!(!prefix.contains("# DOCUMENTS") && !prefix.contains("RETRIEVED"));
    assert!(
        prefix.contains("- offering "),
        "the catalog is listed as before"
    );
}

#[test]
fn knowledge_small_documents_are_in_the_prefix_fenced() {
    let config = spanish_tenant(30);
    let prefix = static_prefix(&config);
    let docs = prefix.find("\n# DOCUMENTS\n").expect("a documents section");
    let payment = prefix.find("\n# PAYMENT OPTIONS\n").unwrap();
    assert!(docs > prefix.find("\n# FAQ\n").unwrap() && docs < payment);
    let section = &prefix[docs..payment];
    assert!(section.contains("- passage devoluciones#1 (devoluciones.md > Devoluciones):"));
    assert_eq!(section.matches("<<<CONTACT nonce=").count(), 2, "{section}");
    assert!(section.contains("  Tienes 30 días"), "indented: {section}");
    assert_eq!(static_prefix(&config), prefix, "stable bytes");
}

#[test]
fn knowledge_large_catalog_prompt_lists_no_offering_ids() {
    let config = spanish_tenant(3000);
    let prefix = static_prefix(&config);
    assert!(
        !prefix.contains("- offering "),
        "no offering line in the prefix"
    );
    for i in [0, 1500, 2999] {
        assert!(!prefix.contains(&offering(&config, i).id), "offering {i}");
    }
    assert!(prefix.contains("business: Casa Armonía (inventada)\ncurrency: EUR\nofferings: 3000,"));
    assert!(
        prefix.contains("\n# PAYMENT OPTIONS\n- tres-plazos: "),
        "payment options stay"
    );
    assert!(
        crate::model::tokenizer::count(&prefix) < 4000,
        "the prefix stays small"
    );
}

#[test]
fn knowledge_large_catalog_tool_specs_list_no_offering_and_search_catalog_is_offered() {
    let config = spanish_tenant(3000);
    let specs = ToolSpecs::new(&config);
    let built = crate::tools::build_specs_for(&config, true);
    let json = serde_json::to_string(&built).unwrap();
    for i in [0, 1234, 2999] {
        assert!(
            !json.contains(&offering(&config, i).id),
            "offering {i} in a tool"
        );
    }
    assert!(
        json.len() < 12_000,
        "tool definitions do not grow with the catalog: {}",
        json.len()
    );
    let set_field = built.iter().find(|s| s.name == "set_field").unwrap();
    assert_eq!(
        set_field.parameters["properties"]["value"]["type"],
        "string"
    );
    assert!(
        set_field.parameters["properties"]["value"]
            .get("enum")
            .is_none()
    );
    assert!(
        set_field
            .description
            .contains("an offering id from this turn's catalog lines")
    );
    assert!(built.iter().any(|s| s.name == "search_catalog"));
    let small = ToolSpecs::new(&crate::config::examples::demo_tenant());
    assert!(
        format!("{small:?}").contains("wheel-basics"),
        "a small catalog keeps its enum"
    );
    assert!(
        !format!("{small:?}").contains("search_catalog"),
        "and no search tool"
    );
    drop(specs);
}

#[test]
fn knowledge_retrieves_an_offering_deep_in_the_list_by_name() {
    let config = spanish_tenant(3000);
    let knowledge = Knowledge::build(&config);
    let deep = offering(&config, 2718);
    let got = retrieve(&knowledge, &format!("¿Cuánto cuesta el {}?", deep.name));
    assert_eq!(got.offerings.first(), Some(&2718), "{:?}", got.ids(&config));
    assert!(!got.miss);
    assert!(got.offerings.len() <= TURN_OFFERINGS + 1);
}

#[test]
fn knowledge_retrieves_a_name_without_accents_or_with_one_typo() {
    let config = spanish_tenant(3000);
    let knowledge = Knowledge::build(&config);
    let deep = offering(&config, 2718);
    let folded = crate::search::fold(&deep.name);
    assert!(
        deep.name.contains('í'),
        "the name has an accent: {}",
        deep.name
    );
    let got = retrieve(&knowledge, &format!("precio {folded}"));
    assert_eq!(got.offerings.first(), Some(&2718), "without accents");
    // One letter dropped from the brand (the name's second word).
    let brand = deep.name.split_whitespace().nth(1).unwrap();
    let mut letters: Vec<char> = brand.chars().collect();
    letters.remove(2);
    let typo = deep
        .name
        .replacen(brand, &letters.iter().collect::<String>(), 1);
    assert_ne!(typo, deep.name);
    let got = retrieve(&knowledge, &format!("precio {typo}"));
    assert_eq!(got.offerings.first(), Some(&2718), "with a typo: {typo}");
}

#[test]
fn knowledge_two_offerings_compared_are_both_retrieved() {
    let config = english_tenant(2000);
    let knowledge = Knowledge::build(&config);
    let (a, b) = (offering(&config, 1777), offering(&config, 42));
    let got = retrieve(
        &knowledge,
        &format!("Which is lighter, the {} or the {}?", a.name, b.name),
    );
    assert!(
        got.offerings.contains(&1777) && got.offerings.contains(&42),
        "{:?}",
        got.ids(&config)
    );
}

#[test]
fn knowledge_recorded_offering_always_comes_first_and_history_fills_in() {
    let config = english_tenant(2000);
    let knowledge = Knowledge::build(&config);
    let recorded = offering(&config, 1999).id.clone();
    let got = knowledge.retrieve(Query {
        message: "ok thanks",
        history: &["hi", "tell me about your hammocks", "We have many."],
        recorded: Some(&recorded),
        ..Query::default()
    });
    assert_eq!(got.offerings[0], 1999);
    let names: Vec<&str> = got.offerings[1..]
        .iter()
        .map(|&i| config.catalog.offerings[i as usize].name.as_str())
        .collect();
    assert!(
        !names.is_empty() && names.iter().all(|n| n.contains("Hammock")),
        "{names:?}"
    );
}

#[test]
fn knowledge_a_question_only_a_passage_answers_retrieves_that_passage() {
    let config = english_tenant(2000);
    assert!(Layout::of(&config).documents_retrieved);
    let knowledge = Knowledge::build(&config);
    let got = retrieve(&knowledge, "Can I send back boots I already wore?");
    let ids = got.ids(&config);
    assert_eq!(
        ids.passages.first().map(String::as_str),
        Some("returns#1"),
        "{ids:?}"
    );
    let got = retrieve(&knowledge, "how do I wash my down sleeping bag");
    assert_eq!(
        got.ids(&config).passages.first().map(String::as_str),
        Some("care#1")
    );
}

#[test]
fn knowledge_a_question_nothing_answers_is_a_miss() {
    let config = spanish_tenant(3000);
    let knowledge = Knowledge::build(&config);
    let got = retrieve(&knowledge, "¿Reparan motocicletas?");
    assert!(
        got.miss && got.offerings.is_empty(),
        "{:?}",
        got.ids(&config)
    );
}

#[tokio::test]
async fn knowledge_golden_price_of_a_deep_offering_is_retrieved_and_sayable() {
    let config = Arc::new(english_tenant(2000));
    let knowledge = Arc::new(Knowledge::build(&config));
    let deep = offering(&config, 1888).clone();
    let price = format_price(deep.price.amount, &deep.price.currency);
    let text = format!("How much is the {}?", deep.name);
    let (thought, given, request) =
        turn(&config, &knowledge, Arc::new(DemoModel::new()), &text).await;
    assert!(given.ids.offerings.contains(&deep.id));
    let last = last_user_text(&request);
    let retrieved = last.find(LABEL_RETRIEVED).expect("a retrieved block");
    assert!(
        retrieved < last.find("CONTACT MESSAGE").unwrap(),
        "before the contact's message"
    );
    assert!(last.contains(&format!(
        "- offering {}: {} | price {price}",
        deep.id, deep.name
    )));
    assert!(!request.system.contains(&deep.id), "never in the prefix");
    assert!(!thought.reply.escalate, "{:?}", thought.reply);
    let said = thought.reply.messages.join(" ");
    assert!(said.contains(&price), "the demo model says {price}: {said}");
}

#[tokio::test]
async fn knowledge_golden_two_offerings_compared_get_both_prices() {
    let config = Arc::new(english_tenant(2000));
    let knowledge = Arc::new(Knowledge::build(&config));
    let (a, b) = (
        offering(&config, 1234).clone(),
        offering(&config, 321).clone(),
    );
    let text = format!("What do the {} and the {} cost?", a.name, b.name);
    let (thought, given, _) = turn(&config, &knowledge, Arc::new(DemoModel::new()), &text).await;
    assert!(given.ids.offerings.contains(&a.id) && given.ids.offerings.contains(&b.id));
    let said = thought.reply.messages.join(" ");
    for o in [&a, &b] {
        let price = format_price(o.price.amount, &o.price.currency);
        assert!(said.contains(&price), "{price} in {said}");
    }
}

#[tokio::test]
async fn knowledge_golden_a_typo_or_missing_accents_still_gets_the_price() {
    let config = Arc::new(spanish_tenant(3000));
    let knowledge = Arc::new(Knowledge::build(&config));
    let deep = offering(&config, 2718).clone();
    let text = format!("¿Cuánto cuesta el {}?", crate::search::fold(&deep.name));
    let (thought, given, _) = turn(&config, &knowledge, Arc::new(DemoModel::new()), &text).await;
    assert_eq!(given.ids.offerings.first(), Some(&deep.id));
    let price = format_price(deep.price.amount, &deep.price.currency);
    assert!(
        thought.reply.messages.join(" ").contains(&price),
        "{:?}",
        thought.reply
    );
}

#[tokio::test]
async fn knowledge_golden_a_passage_is_given_fenced_and_the_model_can_answer_from_it() {
    let config = Arc::new(english_tenant(2000));
    let knowledge = Arc::new(Knowledge::build(&config));
    let answer = json!({
        "messages": ["Unused gear can go back within 45 days; worn boots cannot."],
        "escalate": false, "escalation_reason": null, "confidence": 0.9, "closing_question": null
    })
    .to_string();
    let model = Arc::new(ScriptedModel::new(vec![Ok(reply(answer))]));
    let (thought, given, request) = turn(
        &config,
        &knowledge,
        model,
        "Can I return boots I already wore?",
    )
    .await;
    assert_eq!(
        given.ids.passages.first().map(String::as_str),
        Some("returns#1")
    );
    let last = last_user_text(&request);
    let open = last
        .find("- passage returns#1 (returns.md > Returns):\n<<<CONTACT nonce=")
        .unwrap();
    let close = last[open..].find("<<<END CONTACT nonce=").unwrap() + open;
    assert!(last[open..close].contains("Worn \n") || last[open..close].contains("Worn"));
    assert!(!thought.reply.escalate);
}

#[tokio::test]
async fn knowledge_golden_a_question_nothing_answers_escalates() {
    let config = Arc::new(spanish_tenant(3000));
    let knowledge = Arc::new(Knowledge::build(&config));
    let (thought, given, request) = turn(
        &config,
        &knowledge,
        Arc::new(DemoModel::new()),
        "¿Cuánto cuesta reparar una motocicleta?",
    )
    .await;
    assert!(given.miss && given.ids.offerings.is_empty());
    assert!(last_user_text(&request).contains("(no offering matched this turn)"));
    assert!(
        thought.reply.escalate,
        "the demo says it does not know: {:?}",
        thought.reply
    );
}

#[tokio::test]
async fn knowledge_search_catalog_counts_as_a_read_and_is_recorded() {
    let config = Arc::new(english_tenant(2000));
    let knowledge = Arc::new(Knowledge::build(&config));
    let target = offering(&config, 1500).clone();
    let search = |id: &str| call(id, "search_catalog", json!({"query": target.name}));
    let model = Arc::new(ScriptedModel::new(vec![
        Ok(tool_calls([search("1"), search("2"), search("3")])),
        Ok(reply(
            json!({"messages": ["Here it is."], "escalate": false, "escalation_reason": null,
                   "confidence": 0.9, "closing_question": null})
            .to_string(),
        )),
    ]));
    let recording = Arc::new(RecordingModel::new(model));
    let (_, given, _) = turn(&config, &knowledge, recording.clone(), "hello").await;
    assert!(given.ids.offerings.contains(&target.id), "{:?}", given.ids);
    let steps = recording.steps();
    let results: Vec<Value> = steps[1]
        .0
        .messages
        .iter()
        .flat_map(|m| match m {
            Message::ToolResults { results } => results.iter().map(|r| r.content.clone()).collect(),
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[0]["offerings"]
            .as_str()
            .unwrap()
            .contains(&target.id)
    );
    assert_eq!(results[2]["available"], false, "a third read is refused");
}

#[tokio::test]
async fn knowledge_an_unknown_offering_id_is_a_tool_error_naming_the_closest() {
    let config = Arc::new(english_tenant(2000));
    let knowledge = Arc::new(Knowledge::build(&config));
    let real = offering(&config, 777).id.clone();
    let wrong = real.replacen("-", "_", 1);
    let calls =
        |value: &str, id: &str| call(id, "set_field", json!({"field": "course", "value": value}));
    let model = Arc::new(ScriptedModel::new(vec![
        Ok(tool_calls([
            call(
                "0",
                "set_field",
                json!({"field": "intent", "value": "prospect"}),
            ),
            calls(&wrong, "1"),
            calls(&real, "2"),
        ])),
        Ok(reply(
            json!({"messages": ["Noted."], "escalate": false, "escalation_reason": null,
                   "confidence": 0.9, "closing_question": null})
            .to_string(),
        )),
    ]));
    let recording = Arc::new(RecordingModel::new(model));
    let (_, given, _) = turn(&config, &knowledge, recording.clone(), "hi").await;
    let steps = recording.steps();
    let results: Vec<Value> = steps[1]
        .0
        .messages
        .iter()
        .flat_map(|m| match m {
            Message::ToolResults { results } => results.iter().map(|r| r.content.clone()).collect(),
            _ => Vec::new(),
        })
        .collect();
    let error = results[1]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("closest ids") && error.contains(&real),
        "{results:?}"
    );
    assert!(!error.contains(&wrong), "the model's value is never quoted");
    assert_eq!(results[2]["staged"], true, "{results:?}");
    assert!(
        results[2]["offering"].as_str().unwrap().contains(&real),
        "its line is given"
    );
    assert!(given.ids.offerings.contains(&real), "and recorded");
}

/// Retrieval only chooses what the model is shown: the guardrails and the price check read the
/// whole catalog, so a reply quoting an offering the turn did not retrieve is judged by the
/// catalog, and the catalog's own text stays quotable (the leak check protects only what comes
/// before the CATALOG header, also above the threshold).
#[test]
fn knowledge_guardrails_and_price_checks_use_the_whole_catalog() {
    let config = english_tenant(2000);
    let prompt = SnapshotPrompt::new(&config);
    let deep = offering(&config, 1999);
    let price = format_price(deep.price.amount, &deep.price.currency);
    let message = format!("The {} is {price}. {}", deep.name, deep.description);
    let raw = json!({"messages": [message], "escalate": false, "escalation_reason": null,
                     "confidence": 0.9, "closing_question": null})
    .to_string();
    let fence = crate::fence::Fence::new();
    let guarded = agent::apply_guardrails(
        Some(&raw),
        &agent::GuardrailContext {
            rules: &config.rules,
            protected: &prompt.protected,
            fence: &fence,
            max_messages: 3,
            history: &[],
        },
    );
    assert!(!guarded.escalate, "{guarded:?}");
    assert!(crate::evals::invented_prices(&[message], &config.catalog).is_empty());
    let invented = crate::evals::invented_prices(&["It is 1.23 USD.".to_owned()], &config.catalog);
    assert_eq!(invented.len(), 1, "a price no offering has is caught");
}
