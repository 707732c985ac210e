//! `mock:demo`: a deterministic, keyword-driven stand-in for a language model, so the demo and
//! the golden evals run with no provider, no key and no network (SYSTEM 5.5, 9).
//!
//! It behaves like a careful agent for any tenant whose prompt follows the shared prompt format
//! (the one `agent::prompt` renders): it reads the offerings, prices, FAQ and payment options from the
//! `# CATALOG`, `# FAQ` and `# PAYMENT OPTIONS` sections of `request.system`, finds the current
//! contact message as the last fenced `<<<CONTACT nonce=…>>>` block of the turn's own message
//! (the user message that opens with the server notices, after the history's messages), reads
//! the notices there (the `FLOWS:` notice says which flows it may send), and answers with an
//! AgentReply JSON string. No tenant text is written here.
//!
//! `mod.rs` holds the decision (`decide`: the first matching rule wins); `request` reads the
//! prompt's catalog and the turn's message, `matching` folds text and holds the phrase lists,
//! `script` builds the answers, the flow calls and the sales moves.
//!
//! Invariants:
//! - Deterministic: the same request always gives the same response (no randomness, no clock).
//! - Grounded: every price, schedule, duration, URL or FAQ answer it writes is copied verbatim
//!   from the catalog block; a question the catalog cannot answer escalates `out_of_scope` (C6).
//! - It never quotes the framework rules or the tenant prompt, so an injection attempt gets a
//!   short refusal that reveals nothing (C4).
//! - It calls `send_flow` only when that tool is offered and the contact asked for material or
//!   the link, picks a value from the tool's own enum that the `FLOWS:` notice accepts, and once tool results are present it
//!   answers saying what it is sending (spec 012 § the model is told an action was staged).
//! - Its calls of a turn go in one step, the sales moves first, then the flow. Without a flow it
//!   answers in that same step, beside the writes (their `staged` results tell it nothing the
//!   answer needs, so the loop ends there); with one, the answer follows the flow's result.
//! - Usage is counted with the real tokenizer (`model::tokenizer`, `o200k_base`) over the text the
//!   request carries, so token and cost budgets move as with a provider.
//! - Asked whether it is a bot, it says yes and offers a person without escalating (SYSTEM 4),
//!   so the honest answer reaches the contact instead of being replaced by the escalation copy.
//!
//! Its own sentences ("Our prices:", "I'm sending you…") are demo scaffolding for a stand-in
//! model, not tenant copy (C9), in English, Spanish and Portuguese (`phrases`): a real model
//! writes in the tenant's voice from `prompt.md`, and every escalation is replaced by the
//! tenant's `messages.escalation` in the guardrails.
//!
//! Language choice: the language of the tenant prompt (`prompt.md`, the `# TENANT PROMPT`
//! section of `request.system`), told by its most common function words
//! ([`prompt_language`]; English on a tie). Never `rules.json`'s `ownerLanguage`: that is the
//! business owner's language, not the contacts'. The phrase lists recognise the intents in the
//! three languages. An English prompt's contact writing in another language (a few common
//! Spanish/Portuguese/French words, or any non-ASCII letter) still gets the escalation intents
//! and the injection refusal; a bot question escalates `explicit_request`; a price question
//! naming an offering is answered with its catalog price line; anything else escalates
//! `out_of_scope`, so a person who speaks the language takes over.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{
    Message, Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolArguments, ToolCall,
    ToolSpec, Usage,
};

mod matching;
mod phrases;
mod request;
mod script;
use crate::config::Language;
use matching::*;
pub use phrases::prompt_language;
use phrases::{Phrase, say, say_with};
use request::*;
use script::*;
/// The id this model reports, as recorded on every turn.
pub const DEMO_MODEL_ID: &str = "mock:demo";

/// The `mock:demo` model. Stateless: everything it knows comes from the request.
#[derive(Debug, Clone, Copy, Default)]
pub struct DemoModel;

impl DemoModel {
    pub fn new() -> Self {
        DemoModel
    }
}

#[async_trait]
impl Model for DemoModel {
    fn id(&self) -> &str {
        DEMO_MODEL_ID
    }

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        Ok(respond(request))
    }
}

/// The whole decision, synchronous and pure.
fn respond(request: &ModelRequest) -> ModelResponse {
    let mut catalog = CatalogView::parse(&request.system);
    // Above the knowledge threshold the offerings come in the turn's own message.
    catalog.add_retrieved(request);
    let turn = TurnView::parse(request);
    let input_tokens = estimate_input_tokens(request);

    let language = prompt_language(phrases::tenant_prompt(&request.system));
    let decision = decide(request, &catalog, &turn, language);
    match decision {
        Decision::Call(calls) => ModelResponse {
            usage: Usage {
                input_tokens,
                output_tokens: call_tokens(&calls),
                cached_tokens: 0,
                cache_write_tokens: 0,
            },
            tool_calls: calls,
            output: None,
            stop: StopReason::ToolCalls,
            echo: Default::default(),
        },
        Decision::CallAndReply(calls, reply) => {
            let output = reply.to_json();
            ModelResponse {
                usage: Usage {
                    input_tokens,
                    output_tokens: call_tokens(&calls) + tokens_for(&output),
                    cached_tokens: 0,
                    cache_write_tokens: 0,
                },
                tool_calls: calls,
                output: Some(output),
                stop: StopReason::ToolCalls,
                echo: Default::default(),
            }
        }
        Decision::Reply(reply) => {
            let output = reply.to_json();
            ModelResponse {
                usage: Usage {
                    input_tokens,
                    output_tokens: tokens_for(&output),
                    cached_tokens: 0,
                    cache_write_tokens: 0,
                },
                tool_calls: Vec::new(),
                output: Some(output),
                stop: StopReason::Completed,
                echo: Default::default(),
            }
        }
    }
}

enum Decision {
    /// Tool calls of one step, run in order (the sales moves first, then a flow).
    Call(Vec<ToolCall>),
    /// Writes and the answer in one step: nothing the answer says depends on their results.
    CallAndReply(Vec<ToolCall>, Reply),
    Reply(Reply),
}

/// The first matching rule wins: unreadable message, injection, bot question, the escalation
/// intents (person, complaint, payment reported, haggling), the non-English fallback, discount,
/// flow (a call, or the answer once its result is back), price, schedule, payment options, FAQ,
/// overview, one named offering, greeting, and finally `out_of_scope`. The escalation intents
/// come before every answer, so "I paid 450 and want my money back" is escalated, not priced.
fn decide(
    request: &ModelRequest,
    catalog: &CatalogView,
    turn: &TurnView,
    lang: Language,
) -> Decision {
    let Some(raw) = turn.contact.as_deref() else {
        // No fenced message means the prompt is not in the shared format: do not guess.
        return Decision::Reply(Reply::escalate(Reason::LowConfidence, 0.2));
    };
    let text = raw.trim();
    let folded = fold(text);

    if !text.chars().any(char::is_alphanumeric) || is_lone_url(text) {
        // Punctuation, emoji only, or a bare media URL: nothing to ground an answer on.
        return Decision::Reply(Reply::escalate(Reason::LowConfidence, 0.2));
    }
    if has(&folded, INJECTION) {
        return Decision::Reply(Reply::answer(
            vec![say(lang, Phrase::Refusal).into()],
            0.9,
            None,
        ));
    }

    // A message in another language than the prompt's, to an English prompt: see the module doc.
    let non_english = lang == Language::En && looks_non_english(text, &folded);

    if has(&folded, BOT_QUESTION) {
        if non_english {
            return Decision::Reply(Reply::escalate(Reason::ExplicitRequest, 0.9));
        }
        // SYSTEM 4: asked if it is a bot, it says yes and offers a person.
        return Decision::Reply(Reply::answer(
            vec![say(lang, Phrase::BotYes).into()],
            0.9,
            Some(say(lang, Phrase::BotOffer).into()),
        ));
    }
    if has(&folded, PERSON_REQUEST) {
        return Decision::Reply(Reply::escalate(Reason::ExplicitRequest, 0.95));
    }
    if has(&folded, COMPLAINT) {
        return Decision::Reply(Reply::escalate(Reason::Complaint, 0.9));
    }
    if has(&folded, PAYMENT_REPORTED) {
        return Decision::Reply(Reply::escalate(Reason::PaymentReported, 0.9));
    }
    if has(&folded, HAGGLE) || is_counter_offer(text, &folded) {
        return Decision::Reply(Reply::escalate(Reason::PriceNegotiation, 0.9));
    }

    let named = catalog.mentioned(&folded);
    if non_english {
        if has(&folded, PRICE)
            && !named.is_empty()
            && let Some(reply) = price_reply(&named, lang)
        {
            return Decision::Reply(reply);
        }
        return Decision::Reply(Reply::escalate(Reason::OutOfScope, 0.3));
    }

    if has(&folded, DISCOUNT) {
        return Decision::Reply(if catalog.payment_options.is_empty() {
            Reply::escalate(Reason::PriceNegotiation, 0.85)
        } else {
            payment_options_reply(catalog, true, lang)
        });
    }

    // Targets: the offerings the message names, else the conversation's offering notice.
    let targets: Vec<&OfferingLine> = if named.is_empty() {
        turn.offering
            .as_deref()
            .and_then(|id| catalog.offerings.iter().find(|o| o.id == id))
            .into_iter()
            .collect()
    } else {
        named
    };
    // 028 § Lock: from `offered` on, a switch to another offering goes to a person.
    let offered_or_later = matches!(
        turn.stage.as_deref(),
        Some("offered" | "prepared" | "link_sent")
    );
    if offered_or_later
        && has(&folded, SWITCH)
        && targets
            .iter()
            .any(|o| Some(o.id.as_str()) != turn.offering.as_deref())
    {
        return Decision::Reply(Reply::escalate(Reason::ExplicitRequest, 0.8));
    }
    let wants_link = has(&folded, LINK_REQUEST);
    let wants_material = has(&folded, MATERIAL_REQUEST);

    let results = last_tool_results(request);
    if let Some(results) = results
        && flow_was_called(request)
    {
        return Decision::Reply(after_flow(
            request, results, catalog, &targets, wants_link, lang,
        ));
    }
    if results.is_none() {
        // The first step: the sales moves (034, 028, 023), then the flow asked for.
        let mut calls = sales_moves(request, catalog, turn, &folded, &targets, wants_link);
        if (wants_link || wants_material)
            && let Some(spec) = request.tools.iter().find(|t| t.name == "send_flow")
            && let Some(call) = choose_flow(spec, &targets, wants_link, turn.flows.as_ref())
        {
            calls.push(call);
        }
        if !calls.is_empty() {
            for (n, call) in calls.iter_mut().enumerate() {
                call.id = format!("demo_call_{}", n + 1);
            }
            // Writes alone return nothing the answer needs: they go in one step with the
            // answer (the loop ends there once each is staged). A flow's answer follows its
            // result (029), so it waits for the next step.
            if calls.iter().any(|c| c.name == "send_flow") {
                return Decision::Call(calls);
            }
            let reply = answer(catalog, &folded, &targets, wants_link, lang);
            return Decision::CallAndReply(calls, reply);
        }
    }
    Decision::Reply(answer(catalog, &folded, &targets, wants_link, lang))
}

/// The answer from the catalog once the moves are made: the link, material without an
/// offering, price, schedule, payment options, FAQ, overview, one named offering, greeting, and
/// finally `out_of_scope`.
fn answer(
    catalog: &CatalogView,
    folded: &str,
    targets: &[&OfferingLine],
    wants_link: bool,
    lang: Language,
) -> Reply {
    if wants_link && let Some(reply) = link_reply(catalog, targets, lang) {
        return reply;
    }
    if has(folded, MATERIAL_REQUEST) && targets.is_empty() && catalog.offerings.len() > 1 {
        // 028: material is per offering; with none known, ask which one first.
        let names: Vec<&str> = catalog.offerings.iter().map(|o| o.name.as_str()).collect();
        return Reply::answer(
            vec![say_with(lang, Phrase::SendDetails, &[&names.join(", ")])],
            0.85,
            Some(say(lang, Phrase::WhichDetails).into()),
        );
    }

    if has(folded, PRICE) {
        let scope = in_scope(catalog, targets);
        return price_reply(&scope, lang)
            .unwrap_or_else(|| Reply::escalate(Reason::OutOfScope, 0.3));
    }
    if has(folded, SCHEDULE) {
        let scope = in_scope(catalog, targets);
        return schedule_reply(&scope, lang)
            .unwrap_or_else(|| Reply::escalate(Reason::OutOfScope, 0.3));
    }
    if has(folded, PAYMENT_QUESTION) {
        return if catalog.payment_options.is_empty() {
            Reply::escalate(Reason::OutOfScope, 0.3)
        } else {
            payment_options_reply(catalog, false, lang)
        };
    }
    if let Some(answer) = catalog.faq_answer(folded) {
        return Reply::answer(vec![answer.to_owned()], 0.85, None);
    }
    if has(folded, OVERVIEW) && !catalog.offerings.is_empty() {
        let all: Vec<&OfferingLine> = catalog.offerings.iter().collect();
        if let Some(reply) = price_reply(&all, lang) {
            return reply;
        }
    }
    if let [one] = targets {
        return offering_reply(one);
    }
    if has(folded, GREETING) && !catalog.offerings.is_empty() {
        let names: Vec<&str> = catalog.offerings.iter().map(|o| o.name.as_str()).collect();
        return Reply::answer(
            vec![say_with(lang, Phrase::Greeting, &[&names.join(", ")])],
            0.9,
            Some(say(lang, Phrase::KnowMore).into()),
        );
    }
    Reply::escalate(Reason::OutOfScope, 0.3)
}

#[cfg(test)]
mod languages;
#[cfg(test)]
mod tests;
