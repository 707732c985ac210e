//! The analyst's answer (031 § Proposals): `{"proposals": [{"text", "rationale",
//! "convertedCount", "notConvertedCount", "turnIds"}]}`, asked for as structured output and
//! checked again after parsing.
//!
//! - An answer that is not that JSON, or breaks a limit (text over [`MAX_TEXT`] characters or
//!   empty, rationale over [`MAX_RATIONALE`], a negative count): the whole run fails, nothing
//!   is kept.
//! - Past the [`MAX_PROPOSALS`]th, proposals are dropped.
//! - A proposal whose text or rationale holds a digit, a currency symbol or a shape the note
//!   cleaning removes (a URL, an email, a phone number), or that cites no turn or a turn id
//!   not in the transcripts it was given, is refused alone.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::store::learning::NewProposal;

pub const MAX_PROPOSALS: usize = 5;
pub const MAX_TEXT: usize = 280;
pub const MAX_RATIONALE: usize = 500;
/// The structured output's name on the wire.
pub const OUTPUT_NAME: &str = "insight_proposals";

/// The answer's JSON Schema, with its bounds (a provider that cannot send some keeps them
/// enforced here).
pub fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["proposals"],
        "properties": {
            "proposals": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["text", "rationale", "convertedCount", "notConvertedCount", "turnIds"],
                    "properties": {
                        "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
                        "rationale": {"type": "string", "maxLength": MAX_RATIONALE},
                        "convertedCount": {"type": "integer", "minimum": 0},
                        "notConvertedCount": {"type": "integer", "minimum": 0},
                        "turnIds": {"type": "array", "items": {"type": "string"}}
                    }
                }
            }
        }
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    proposals: Vec<Raw>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Raw {
    text: String,
    rationale: String,
    converted_count: u32,
    not_converted_count: u32,
    turn_ids: Vec<String>,
}

/// What survived the checks, and how many proposals were refused or dropped.
#[derive(Debug, Default, PartialEq)]
pub struct Checked {
    pub kept: Vec<NewProposal>,
    pub refused: Vec<Refusal>,
    pub dropped: usize,
}

/// Why a proposal was refused (no text of it is kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Digit,
    Currency,
    RemovedShape,
    NoTurnCited,
    UnknownTurn,
}

/// Parses and checks the analyst's answer against the turn ids it was given. `Err` is the
/// run's failure reason, in the service's words (never the answer's text).
pub fn check(output: &str, known_turns: &HashSet<String>) -> Result<Checked, String> {
    let answer: Answer = serde_json::from_str(output.trim()).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Data => "the analyst's answer does not have the proposals shape",
            _ => "the analyst's answer is not valid JSON",
        }
        .to_owned()
    })?;
    for (i, raw) in answer.proposals.iter().enumerate() {
        let text = raw.text.trim().chars().count();
        if text == 0 || text > MAX_TEXT {
            return Err(format!(
                "the analyst's proposal {} breaks a limit: text must be 1 to {MAX_TEXT} characters",
                i + 1
            ));
        }
        if raw.rationale.trim().chars().count() > MAX_RATIONALE {
            return Err(format!(
                "the analyst's proposal {} breaks a limit: rationale over {MAX_RATIONALE} characters",
                i + 1
            ));
        }
    }
    let mut checked = Checked {
        dropped: answer.proposals.len().saturating_sub(MAX_PROPOSALS),
        ..Checked::default()
    };
    for raw in answer.proposals.into_iter().take(MAX_PROPOSALS) {
        match refusal(&raw, known_turns) {
            Some(why) => checked.refused.push(why),
            None => checked.kept.push(NewProposal {
                text: raw.text.trim().to_owned(),
                rationale: raw.rationale.trim().to_owned(),
                converted_count: i64::from(raw.converted_count),
                not_converted_count: i64::from(raw.not_converted_count),
                turn_ids: raw.turn_ids.iter().map(|t| t.trim().to_owned()).collect(),
            }),
        }
    }
    Ok(checked)
}

fn refusal(raw: &Raw, known_turns: &HashSet<String>) -> Option<Refusal> {
    for text in [&raw.text, &raw.rationale] {
        if let Some(why) = text_refusal(text) {
            return Some(why);
        }
    }
    if raw.turn_ids.is_empty() {
        return Some(Refusal::NoTurnCited);
    }
    if raw.turn_ids.iter().any(|t| !known_turns.contains(t.trim())) {
        return Some(Refusal::UnknownTurn);
    }
    None
}

/// Why a tactic's text may not reach a prompt: a digit (a price, a date, a count the catalog
/// owns), a currency symbol, or a shape the cleaning removes. Also applied to an edited text.
pub fn text_refusal(text: &str) -> Option<Refusal> {
    if text.chars().any(char::is_numeric) {
        return Some(Refusal::Digit);
    }
    if text.chars().any(is_currency) {
        return Some(Refusal::Currency);
    }
    if crate::observability::redact::redact(text) != text {
        return Some(Refusal::RemovedShape);
    }
    None
}

impl Refusal {
    pub fn describe(self) -> &'static str {
        match self {
            Self::Digit => "holds a digit",
            Self::Currency => "holds a currency symbol",
            Self::RemovedShape => "holds a link, an email address or a phone number",
            Self::NoTurnCited => "cites no turn",
            Self::UnknownTurn => "cites a turn that was not in the transcripts",
        }
    }
}

/// Unicode's currency symbols (category Sc).
fn is_currency(c: char) -> bool {
    matches!(
        c,
        '$' | '¢'
            | '£'
            | '¤'
            | '¥'
            | '֏'
            | '؋'
            | '߾'
            | '߿'
            | '৲'
            | '৳'
            | '৻'
            | '૱'
            | '௹'
            | '฿'
            | '៛'
            | '\u{20A0}'..='\u{20C0}' | '꠸' | '﷼' | '﹩' | '＄' | '￠' | '￡' | '￥' | '￦'
    )
}
