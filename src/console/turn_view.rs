//! What one turn did, as the console shows it: the text (inert), and for an agent turn its
//! outcome (the guardrails' verdict), the escalation reason, the actions with how each ended
//! (staged, performed, refused and why, …), the reads, tokens, cost and time. Everything comes
//! from the turn's record; nothing is recomputed.

use maud::{Markup, html};
use serde_json::Value;

use crate::store::{BrowsedTurn, Role, Turn};

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

/// When, as the console shows times: UTC to the second.
pub(super) fn when(at: chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// The first 8 characters of a conversation's UUID: enough to tell rows apart on a page.
pub(super) fn short(id: uuid::Uuid) -> String {
    id.to_string()[..8].to_owned()
}

/// A cost in US dollars, to the hundredth of a cent.
pub(super) fn usd(cost: f64) -> String {
    format!("${cost:.4}")
}

/// One turn: the message or the reply, and what the agent did.
pub(super) fn turn(browsed: &BrowsedTurn) -> Markup {
    let turn = &browsed.turn;
    let role = match turn.role {
        Role::User => "contact",
        Role::Agent => "agent",
    };
    html! {
        article class={ "turn " (role) } data-role=(role) data-outcome=[turn.outcome.as_deref()] {
            p class="meta" {
                strong { @if turn.role == Role::User { "Contact" } @else { "Agent" } }
                " · " (when(turn.created_at))
                @if !turn.bound { " · " span class="warn" { "unbound (no valid contact token)" } }
            }
            @if turn.text.is_empty() {
                p class="hint" { "(text removed after the retention period, or none)" }
            } @else {
                p class="text" { (inert(&turn.text)) }
            }
            @if turn.role == Role::Agent { (agent_details(turn, browsed.plugin_reads.as_ref(), browsed.steps)) }
            @if let Some(kind) = &turn.media_kind { p class="hint" { "Media: " (kind) } }
        }
    }
}

fn agent_details(turn: &Turn, plugin_reads: Option<&Value>, steps: Option<i64>) -> Markup {
    html! {
        dl class="did" {
            @if let Some(outcome) = &turn.outcome {
                dt { "Outcome" } dd data-part="outcome" { code { (outcome) } }
            }
            @if let Some(reason) = &turn.escalation_reason {
                dt { "Handed to a person" } dd data-part="escalation" { code { (reason) } }
            }
            @if let Some(duplicate) = &turn.duplicate {
                dt { "Guardrails" } dd { code { (duplicate) } }
            }
            @if let Some(model) = &turn.model {
                dt { "Model" } dd { code { (model) } }
                dt { "Tokens" } dd data-part="tokens" {
                    (turn.input_tokens) " in (" (turn.cached_tokens) " cached, "
                    (turn.cache_write_tokens) " written to the cache), "
                    (turn.output_tokens) " out"
                }
                dt { "Cost" } dd data-part="cost" { (usd(turn.cost_usd)) }
                dt { "Time" } dd { (turn.latency_ms) " ms" }
                dt { "Contact reads" } dd { (turn.reads) }
            }
            @if let Some(steps) = steps { dt { "Steps (model calls)" } dd data-part="steps" { (steps) } }
            @if let Some(version) = &turn.playbook_version {
                dt { "Playbook" } dd { code { (version) } }
            }
            @if let Some(Value::Array(reads)) = plugin_reads {
                dt { "The business's tools read" }
                dd data-part="plugin-reads" {
                    @for read in reads {
                        code { (field(read, "tool").unwrap_or("?")) } " "
                        @if read.get("available").and_then(Value::as_bool) == Some(true) {
                            "answered"
                        } @else {
                            "unavailable"
                        }
                        @if let Some(ms) = read.get("ms").and_then(Value::as_u64) { " in " (ms) " ms" }
                        "; "
                    }
                }
            }
            dt { "Knowledge given" }
            dd data-part="knowledge" class="hint" { "not recorded on this turn" }
        }
        @match &turn.actions {
            None => p class="hint" { "No tool was offered." },
            Some(Value::Array(entries)) if entries.is_empty() => p class="hint" { "Tools offered; none used." },
            Some(Value::Array(entries)) => (actions(entries)),
            Some(other) => pre { (other.to_string()) },
        }
    }
}

/// A record entry's string field.
fn field<'a>(entry: &'a Value, key: &str) -> Option<&'a str> {
    entry
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn actions(entries: &[Value]) -> Markup {
    html! {
        h3 class="small" { "What it did" }
        ul class="actions" {
            @for entry in entries {
                @let tool = field(entry, "tool").unwrap_or("?");
                @let status = field(entry, "status").unwrap_or("?");
                li data-action=(tool) data-status=(status) {
                    code { (tool) }
                    @if let Some(id) = field(entry, "id") { " " code { (id) } }
                    @if let Some(value) = field(entry, "value") { " = " code { (value) } }
                    @if let Some(length) = entry.get("length").and_then(Value::as_u64) {
                        " (" (length) " characters)"
                    }
                    ": " strong class={ "status " (status) } { (status) }
                    @if let Some(reason) = field(entry, "reason") { " (" (reason) ")" }
                    @if let Some(error) = field(entry, "error") { " (" (error) ")" }
                    @if let Some(origin) = field(entry, "origin") { " · by the server: " (origin) }
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
