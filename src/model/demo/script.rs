//! The demo model's scripted answers: the replies it builds from the catalog, the flow it
//! chooses and what it says once the flow is back, the sales moves it records, and the
//! AgentReply it returns. Every figure is copied from the catalog; the English sentences are
//! stand-in scaffolding, not tenant copy (C9).

use super::*;
// The funnel in order, as the `FUNNEL:` notice and the funnel field name its stages (023).
use crate::config::tenant::FUNNEL_STAGES as STAGES;

// ---------------------------------------------------------------------------------------------
// Replies built from the catalog

pub(super) fn price_line(o: &OfferingLine) -> Option<String> {
    o.price.as_ref().map(|p| format!("{}: {}", o.name, p))
}

pub(super) fn price_reply(scope: &[&OfferingLine], lang: Language) -> Option<Reply> {
    let lines: Vec<String> = scope.iter().filter_map(|o| price_line(o)).collect();
    match lines.as_slice() {
        [] => None,
        [one] => Some(Reply::answer(
            vec![format!("{one}.")],
            0.9,
            Some(say(lang, Phrase::OnePrice).into()),
        )),
        many => Some(Reply::answer(
            vec![format!(
                "{}\n- {}",
                say(lang, Phrase::Prices),
                many.join("\n- ")
            )],
            0.9,
            Some(say(lang, Phrase::WhichOne).into()),
        )),
    }
}

pub(super) fn schedule_reply(scope: &[&OfferingLine], lang: Language) -> Option<Reply> {
    let lines: Vec<String> = scope
        .iter()
        .filter_map(|o| {
            let mut parts = Vec::new();
            if let Some(s) = &o.schedule {
                parts.push(s.clone());
            }
            if let Some(h) = &o.duration_hours {
                parts.push(say_with(lang, Phrase::HoursInTotal, &[h]));
            }
            (!parts.is_empty()).then(|| format!("{}: {}", o.name, parts.join("; ")))
        })
        .collect();
    match lines.as_slice() {
        [] => None,
        [one] => Some(Reply::answer(vec![format!("{one}.")], 0.9, None)),
        many => Some(Reply::answer(
            vec![format!("- {}", many.join("\n- "))],
            0.9,
            None,
        )),
    }
}

pub(super) fn payment_options_reply(
    catalog: &CatalogView,
    about_price: bool,
    lang: Language,
) -> Reply {
    let options: Vec<&str> = catalog
        .payment_options
        .iter()
        .map(|(_, d)| d.as_str())
        .collect();
    let lead = say(
        lang,
        match about_price {
            true => Phrase::NoPriceChange,
            false => Phrase::PaymentOptions,
        },
    );
    Reply::answer(
        vec![format!("{lead}\n- {}", options.join("\n- "))],
        0.85,
        Some(say(lang, Phrase::WouldOneWork).into()),
    )
}

/// The offerings a question is about: the ones it names, or every offering when it names none.
pub(super) fn in_scope<'a>(
    catalog: &'a CatalogView,
    targets: &[&'a OfferingLine],
) -> Vec<&'a OfferingLine> {
    if targets.is_empty() {
        catalog.offerings.iter().collect()
    } else {
        targets.to_vec()
    }
}

pub(super) fn link_reply(
    catalog: &CatalogView,
    targets: &[&OfferingLine],
    lang: Language,
) -> Option<Reply> {
    let scope = in_scope(catalog, targets);
    let lines: Vec<String> = scope
        .iter()
        .filter_map(|o| o.url.as_ref().map(|u| format!("{}: {}", o.name, u)))
        .collect();
    if lines.is_empty() {
        return None;
    }
    Some(Reply::answer(
        vec![format!(
            "{}\n- {}",
            say(lang, Phrase::EnrolHere),
            lines.join("\n- ")
        )],
        0.85,
        None,
    ))
}

pub(super) fn offering_reply(o: &OfferingLine) -> Reply {
    let mut messages = Vec::new();
    if !o.description.is_empty() {
        messages.push(format!("{}: {}", o.name, o.description));
    }
    if let Some(line) = price_line(o) {
        messages.push(format!("{line}."));
    }
    if messages.is_empty() {
        return Reply::escalate(Reason::OutOfScope, 0.3);
    }
    Reply::answer(messages, 0.85, None)
}

// ---------------------------------------------------------------------------------------------
// send_flow: choose a flow, then say what is being sent

/// Picks the flow from the tool's own enum that best fits the request, or `None` when nothing
/// fits (the turn then answers in text). `flows`: the turn's `FLOWS:` notice, which says which
/// of the enum's flows the contact's position accepts now (the enum holds every flow).
pub(super) fn choose_flow(
    spec: &ToolSpec,
    targets: &[&OfferingLine],
    wants_link: bool,
    flows_notice: Option<&FlowsNotice>,
) -> Option<ToolCall> {
    let properties = spec.parameters.get("properties")?.as_object()?;
    let enum_properties: Vec<(&String, &Value)> = properties
        .iter()
        .filter(|(_, schema)| !string_enum(schema).is_empty())
        .collect();
    // The property named for the flow, else the first one holding a string enum.
    let (flow_key, flow_schema) = enum_properties
        .iter()
        .find(|(key, _)| key.to_ascii_lowercase().contains("flow"))
        .or_else(|| enum_properties.first())
        .copied()?;
    let flows = string_enum(flow_schema);
    let guidance = format!(
        "{}\n{}",
        spec.description,
        flow_schema
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
    );

    let mut best: Option<(i32, &str)> = None;
    for flow in &flows {
        let about: String = guidance
            .lines()
            .filter(|line| line.contains(flow))
            .collect::<Vec<_>>()
            .join(" ");
        // 023: a flow already sent is not sent again.
        if flows_notice.is_some_and(|n| n.sent.iter().any(|id| id == flow)) {
            continue;
        }
        // 028: a flow the notice does not accept (or the description does not list) is not
        // accepted this turn, unless it is the offering's own flow the sales moves record
        // before it.
        let unlisted = about.is_empty()
            || flows_notice.is_some_and(|n| !n.accepted.iter().any(|id| id == flow));
        if unlisted
            && !targets
                .iter()
                .any(|o| o.is_named_in(&fold(&flow.replace(['_', '-'], " "))))
        {
            continue;
        }
        let text = fold(&format!("{} {}", flow.replace(['_', '-'], " "), about));
        // A link request considers only link flows, and a request for material never sends
        // the payment link; among the candidates, the named offering's flow wins.
        if has(&text, FLOW_LINK_WORDS) != wants_link {
            continue;
        }
        let mut score = 0;
        if wants_link || has(&text, FLOW_MATERIAL_WORDS) {
            score += 2;
        }
        if targets.iter().any(|o| o.is_named_in(&text)) {
            score += 3;
        }
        if score > 0 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, flow));
        }
    }
    let (_, chosen) = best?;

    let mut arguments = Map::new();
    for (key, schema) in properties {
        if key == flow_key {
            arguments.insert(key.clone(), Value::from(chosen));
        } else if allows_type(schema, "boolean") {
            // 032: `contactAsked` is true because this message asked for it.
            let asked = key.to_ascii_lowercase().contains("ask");
            arguments.insert(key.clone(), Value::from(asked));
        } else if allows_type(schema, "null") {
            arguments.insert(key.clone(), Value::Null);
        }
    }
    Some(ToolCall {
        id: "demo_call_1".into(),
        name: spec.name.clone(),
        arguments: ToolArguments::Valid(Value::Object(arguments)),
    })
}

// ---------------------------------------------------------------------------------------------
// The sales moves (034, 028, 023): record intent, the offering and the stage before answering

/// The ids of the sales fields `set_field` offers, read from its description lines
/// (`- <id>: <description> Values: a, b.`): the field whose values are exactly the intent
/// values, the one holding the funnel stages, and the one holding the catalog's offering ids.
#[derive(Default)]
pub(super) struct SalesFields {
    pub(super) intent: Option<String>,
    pub(super) funnel: Option<String>,
    pub(super) offering: Option<String>,
}

pub(super) fn sales_fields(request: &ModelRequest, catalog: &CatalogView) -> SalesFields {
    let mut fields = SalesFields::default();
    let Some(spec) = request.tools.iter().find(|t| t.name == "set_field") else {
        return fields;
    };
    for line in spec.description.lines() {
        let Some((id, rest)) = line.strip_prefix("- ").and_then(|l| l.split_once(": ")) else {
            continue;
        };
        let Some(values) = rest
            .rsplit_once("Values: ")
            .map(|(_, v)| v.trim_end_matches('.'))
        else {
            continue;
        };
        let values: Vec<&str> = values.split(", ").collect();
        if values == ["not_prospect", "prospect"] {
            fields.intent = Some(id.to_owned());
        } else if values.contains(&"qualifying") && values.contains(&"offered") {
            fields.funnel = Some(id.to_owned());
        } else if !catalog.offerings.is_empty()
            && catalog
                .offerings
                .iter()
                .all(|o| values.contains(&o.id.as_str()))
        {
            fields.offering = Some(id.to_owned());
        }
    }
    fields
}

pub(super) fn set_field_call(field: &str, value: &str) -> ToolCall {
    ToolCall {
        id: String::new(),
        name: "set_field".into(),
        arguments: ToolArguments::Valid(json!({"field": field, "value": value})),
    }
}

/// What a careful agent records before it answers: `prospect` when the contact asks about
/// buying (034), `not_prospect` when they say they are something else; the offering they
/// name (028, before the offer only); and the stage the answer moves them to (023): the price
/// of one offering put to them is `offered`, any other buying question `qualifying`.
pub(super) fn sales_moves(
    request: &ModelRequest,
    catalog: &CatalogView,
    turn: &TurnView,
    folded: &str,
    targets: &[&OfferingLine],
    wants_link: bool,
) -> Vec<ToolCall> {
    let fields = sales_fields(request, catalog);
    let mut calls = Vec::new();
    let Some(intent_field) = fields.intent.as_deref() else {
        return calls;
    };
    let prospect = turn.intent.as_deref() == Some("prospect");
    let buying = wants_link
        || has(folded, MATERIAL_REQUEST)
        || has(folded, PRICE)
        || has(folded, SCHEDULE)
        || has(folded, PAYMENT_QUESTION)
        || has(folded, OVERVIEW)
        || !catalog.mentioned(folded).is_empty()
        || turn.advert_offering;
    if !prospect {
        if has(folded, NOT_A_PROSPECT) {
            if turn.intent.as_deref() != Some("not_prospect") {
                calls.push(set_field_call(intent_field, "not_prospect"));
            }
            return calls;
        }
        if !buying {
            return calls;
        }
        calls.push(set_field_call(intent_field, "prospect"));
    }
    let stage = turn
        .stage
        .as_deref()
        .and_then(|s| STAGES.iter().position(|x| *x == s));
    if let (Some(field), [one]) = (fields.offering.as_deref(), targets)
        && turn.offering.as_deref() != Some(one.id.as_str())
        && stage.is_none_or(|s| s < 3)
    {
        calls.push(set_field_call(field, &one.id));
    }
    if let Some(field) = fields.funnel.as_deref() {
        let wanted = if has(folded, PRICE) && targets.len() == 1 {
            3
        } else if buying {
            1
        } else {
            0
        };
        if wanted > 0 && stage.is_none_or(|s| wanted > s) {
            calls.push(set_field_call(field, STAGES[wanted]));
        }
    }
    calls
}

/// Whether this turn already asked to send a flow (its result is back).
pub(super) fn flow_was_called(request: &ModelRequest) -> bool {
    request.messages.iter().any(|m| {
        matches!(m, Message::Assistant { tool_calls, .. } if tool_calls.iter().any(|c| c.name == "send_flow"))
    })
}

pub(super) fn string_enum(schema: &Value) -> Vec<&str> {
    schema
        .get("enum")
        .and_then(Value::as_array)
        .map(|values| values.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

pub(super) fn allows_type(schema: &Value, wanted: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == wanted,
        Some(Value::Array(ts)) => ts.iter().any(|t| t.as_str() == Some(wanted)),
        _ => false,
    }
}

pub(super) fn last_tool_results(request: &ModelRequest) -> Option<&[crate::model::ToolResult]> {
    request.messages.iter().rev().find_map(|m| match m {
        Message::ToolResults { results } => Some(results.as_slice()),
        _ => None,
    })
}

/// The answer after the flow call came back: say what is being sent only if the server
/// accepted it (`sent: true` inline, `staged: true` when staged); otherwise answer from the
/// catalog without any claim.
pub(super) fn after_flow(
    request: &ModelRequest,
    results: &[crate::model::ToolResult],
    catalog: &CatalogView,
    targets: &[&OfferingLine],
    wants_link: bool,
    lang: Language,
) -> Reply {
    let flow_call_ids: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant { tool_calls, .. } => Some(tool_calls),
            _ => None,
        })
        .flatten()
        .filter(|c| c.name == "send_flow")
        .map(|c| c.id.as_str())
        .collect();
    let accepted = results.iter().any(|r| {
        flow_call_ids.contains(&r.call_id.as_str())
            && !r.is_error
            && (r.content.get("sent") == Some(&Value::Bool(true))
                || r.content.get("staged") == Some(&Value::Bool(true)))
    });

    // The offering the reply is about: the one the message named, else the one the chosen
    // flow belongs to (its id or the tool's guidance line for it names the offering).
    let one = match targets {
        [one] => Some(*one),
        _ => flow_offering(request, catalog),
    };
    if accepted {
        let what = match (wants_link, one) {
            (true, _) => say(lang, Phrase::TheLink).to_owned(),
            (false, Some(o)) => say_with(lang, Phrase::DetailsFor, &[&o.name]),
            (false, None) => say(lang, Phrase::TheDetails).to_owned(),
        };
        let mut messages = vec![say_with(lang, Phrase::Sending, &[&what])];
        if let Some(line) = one.and_then(price_line) {
            messages.push(format!("{line}."));
        }
        return Reply::answer(messages, 0.85, None);
    }
    let scope: Vec<&OfferingLine> = match one {
        Some(o) => vec![o],
        None => catalog.offerings.iter().collect(),
    };
    match price_reply(&scope, lang) {
        Some(mut reply) => {
            reply.confidence = 0.7;
            reply
        }
        None => Reply::escalate(Reason::LowConfidence, 0.3),
    }
}

/// The single offering named by the flow this turn asked to send, if exactly one is.
pub(super) fn flow_offering<'a>(
    request: &ModelRequest,
    catalog: &'a CatalogView,
) -> Option<&'a OfferingLine> {
    let flow = request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Assistant { tool_calls, .. } => {
                tool_calls.iter().find(|c| c.name == "send_flow")
            }
            _ => None,
        })
        .and_then(|call| match &call.arguments {
            ToolArguments::Valid(args) => args
                .as_object()?
                .values()
                .find_map(Value::as_str)
                .map(str::to_owned),
            ToolArguments::Invalid { .. } => None,
        })?;
    let guidance: Vec<&str> = request
        .tools
        .iter()
        .filter(|t| t.name == "send_flow")
        .flat_map(|t| t.description.lines())
        .filter(|line| line.contains(flow.as_str()))
        .collect();
    let text = fold(&format!(
        "{} {}",
        flow.replace(['_', '-'], " "),
        guidance.join(" ")
    ));
    match catalog.mentioned(&text).as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// The AgentReply

/// The demo escalates for the agent's own reasons (SYSTEM 4), spelled as the agent reads them.
pub(super) use crate::escalation::EscalationReason as Reason;

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Reply {
    pub(super) messages: Vec<String>,
    pub(super) reason: Option<Reason>,
    pub(super) confidence: f64,
    pub(super) closing_question: Option<String>,
}

/// AgentReply limits (SYSTEM 4): 1–3 messages of at most 1000 characters.
pub(super) const MAX_MESSAGES: usize = 3;
pub(super) const MAX_CHARS: usize = 1000;

impl Reply {
    pub(super) fn answer(
        messages: Vec<String>,
        confidence: f64,
        closing_question: Option<String>,
    ) -> Self {
        Self {
            messages,
            reason: None,
            confidence,
            closing_question,
        }
    }

    /// The text is a placeholder the guardrails replace with the tenant's escalation copy; the
    /// schema still wants one message.
    pub(super) fn escalate(reason: Reason, confidence: f64) -> Self {
        Self {
            messages: vec!["Passing this to a person.".into()],
            reason: Some(reason),
            confidence,
            closing_question: None,
        }
    }

    pub(super) fn to_json(&self) -> String {
        let messages: Vec<String> = self
            .messages
            .iter()
            .take(MAX_MESSAGES)
            .map(|m| clamp_chars(m, MAX_CHARS))
            .collect();
        json!({
            "messages": messages,
            "escalate": self.reason.is_some(),
            "escalation_reason": self.reason.map(Reason::as_str),
            "confidence": self.confidence,
            "closing_question": self.closing_question.as_deref().map(|q| clamp_chars(q, MAX_CHARS)),
        })
        .to_string()
    }
}

pub(super) fn clamp_chars(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}
