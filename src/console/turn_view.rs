//! What one turn did, as the console shows it: the text (inert), and for an agent turn its
//! outcome (the guardrails' verdict), the escalation reason, the actions with how each ended
//! (staged, performed, refused and why, …), the reads, tokens, cost and time. Everything comes
//! from the turn's record; nothing is recomputed.

use maud::{Markup, html};
use serde_json::Value;

use crate::store::{BrowsedTurn, Role, Turn};
use crate::words::{self, Key, Words};

/// Unicode's bidirectional controls: they can reorder what follows them on screen (a name
/// that reads as another, `…txt.exe` as `…exe.txt`). Shown as visible marks, never applied.
const BIDI_CONTROLS: [char; 12] = [
    '\u{061C}', '\u{200E}', '\u{200F}', '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}',
    '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
];

/// `text` with each bidirectional control replaced by a visible `[U+XXXX]`; maud escapes the
/// rest, so markup shows as text and no script runs.
pub(super) fn inert(text: &str) -> String {
    if !text.contains(BIDI_CONTROLS) {
        return text.to_owned();
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if BIDI_CONTROLS.contains(&c) {
            shown.push_str(&format!("[U+{:04X}]", u32::from(c)));
        } else {
            shown.push(c);
        }
    }
    shown
}

/// When, as the console shows times: the owner's date, UTC to the second.
pub(super) fn when(w: Words, at: chrono::DateTime<chrono::Utc>) -> String {
    words::moment(w.language, at)
}

/// The first 8 characters of a conversation's UUID: enough to tell rows apart on a page.
pub(super) fn short(id: uuid::Uuid) -> String {
    id.to_string()[..8].to_owned()
}

/// One turn: the message or the reply, and what the agent did.
pub(super) fn turn(w: Words, browsed: &BrowsedTurn) -> Markup {
    let turn = &browsed.turn;
    let role = match turn.role {
        Role::User => "contact",
        Role::Agent => "agent",
    };
    let t = |key| w.text(key);
    html! {
        article class={ "turn " (role) } data-role=(role) data-outcome=[turn.outcome.as_deref()] {
            p class="meta" {
                strong { @if turn.role == Role::User { (t(Key::ConRoleContact)) } @else { (t(Key::ConRoleAgent)) } }
                " · " (when(w, turn.created_at))
                @if !turn.bound { " · " span class="warn" { (t(Key::ConUnbound)) } }
            }
            @if turn.text.is_empty() {
                p class="hint" { (t(Key::ConTextRemoved)) }
            } @else {
                p class="text" { (inert(&turn.text)) }
            }
            @if turn.role == Role::Agent { (agent_details(w, turn, browsed.plugin_reads.as_ref(), browsed.steps, browsed.knowledge.as_ref())) }
            @if let Some(kind) = &turn.media_kind { p class="hint" { (w.fill(Key::ConMedia, &[kind])) } }
        }
    }
}

fn agent_details(
    w: Words,
    turn: &Turn,
    plugin_reads: Option<&Value>,
    steps: Option<i64>,
    knowledge: Option<&Value>,
) -> Markup {
    let t = |key| w.text(key);
    let lang = w.language;
    html! {
        dl class="did" {
            @if let Some(outcome) = &turn.outcome {
                dt { (t(Key::ConOutcome)) } dd data-part="outcome" { (words::outcome(lang, outcome)) }
            }
            @if let Some(reason) = &turn.escalation_reason {
                dt { (t(Key::ConHandedToPerson)) } dd data-part="escalation" { (words::reason(lang, reason)) }
            }
            @if let Some(duplicate) = &turn.duplicate {
                dt { (t(Key::ConGuardrails)) } dd { code { (duplicate) } }
            }
            @if let Some(model) = &turn.model {
                dt { (t(Key::ConModel)) } dd { code { (model) } }
                dt { (t(Key::ConTokens)) } dd data-part="tokens" {
                    (w.fill(Key::ConTokensLine, &[
                        &turn.input_tokens.to_string(),
                        &turn.cached_tokens.to_string(),
                        &turn.cache_write_tokens.to_string(),
                        &turn.output_tokens.to_string(),
                    ]))
                }
                dt { (t(Key::ConCost)) } dd data-part="cost" { (words::usd(lang, Some(turn.cost_usd))) }
                dt { (t(Key::ConTime)) } dd { (words::duration_ms(lang, Some(turn.latency_ms))) }
                dt { (t(Key::ConContactReads)) } dd { (turn.reads) }
            }
            @if let Some(steps) = steps { dt { (t(Key::ConSteps)) } dd data-part="steps" { (steps) } }
            @if let Some(version) = &turn.playbook_version {
                dt { (t(Key::ConPlaybook)) } dd { code { (version) } }
            }
            @if let Some(Value::Array(reads)) = plugin_reads {
                dt { (t(Key::ConToolsRead)) }
                dd data-part="plugin-reads" {
                    @for read in reads {
                        code { (field(read, "tool").unwrap_or("?")) } " "
                        @if read.get("available").and_then(Value::as_bool) == Some(true) {
                            (t(Key::ConToolAnswered))
                        } @else {
                            (t(Key::ConToolUnavailable))
                        }
                        @if let Some(ms) = read.get("ms").and_then(Value::as_u64) {
                            " " (w.fill(Key::ConInMs, &[&words::duration_ms(lang, Some(ms as i64))]))
                        }
                        "; "
                    }
                }
            }
            dt { (t(Key::ConKnowledgeGiven)) }
            @match knowledge.map(knowledge_ids) {
                Some(ids) if !ids.is_empty() => dd data-part="knowledge" {
                    @for id in ids { code { (id) } " " }
                },
                Some(_) => dd data-part="knowledge" class="hint" { (t(Key::ConKnowledgeNone)) },
                None => dd data-part="knowledge" class="hint" { (t(Key::ConNotRecorded)) },
            }
        }
        @match &turn.actions {
            None => p class="hint" { (t(Key::ConNoToolOffered)) },
            Some(Value::Array(entries)) if entries.is_empty() => p class="hint" { (t(Key::ConToolsNoneUsed)) },
            Some(Value::Array(entries)) => (actions(w, entries)),
            Some(other) => pre { (other.to_string()) },
        }
    }
}

/// The offering and passage ids of a turn's `knowledge` record, offerings first (ids only: the
/// record never holds their text).
fn knowledge_ids(record: &Value) -> Vec<&str> {
    ["offerings", "passages"]
        .iter()
        .filter_map(|kind| record.get(kind).and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// A record entry's string field.
fn field<'a>(entry: &'a Value, key: &str) -> Option<&'a str> {
    entry
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn actions(w: Words, entries: &[Value]) -> Markup {
    let lang = w.language;
    html! {
        h3 class="small" { (w.text(Key::ConWhatItDid)) }
        ul class="actions" {
            @for entry in entries {
                @let tool = field(entry, "tool").unwrap_or("?");
                @let status = field(entry, "status").unwrap_or("?");
                li data-action=(tool) data-status=(status) {
                    (words::tool(lang, tool))
                    @if let Some(id) = field(entry, "id") { " " code { (id) } }
                    @if let Some(value) = field(entry, "value") { " = " code { (value) } }
                    @if let Some(length) = entry.get("length").and_then(Value::as_u64) {
                        " " (w.fill(Key::ConCharacters, &[&length.to_string()]))
                    }
                    ": " strong class={ "status " (status) } { (words::status(lang, status)) }
                    @if let Some(reason) = field(entry, "reason") { " (" (reason) ")" }
                    @if let Some(error) = field(entry, "error") { " (" (error) ")" }
                    @if let Some(origin) = field(entry, "origin") { " · " (w.fill(Key::ConByServer, &[origin])) }
                    @if let Some(arguments) = entry.get("arguments") { " · " code { (arguments.to_string()) } }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_bidi_controls_are_shown_as_visible_marks_never_applied() {
        assert_eq!(inert("plain"), "plain");
        assert_eq!(
            inert("invoice\u{202E}txt.exe\u{2066}"),
            "invoice[U+202E]txt.exe[U+2066]"
        );
        assert!(!inert("a\u{200F}b").contains('\u{200F}'));
    }
}
