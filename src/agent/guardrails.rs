//! The guardrails (SYSTEM 4 `applyGuardrails`, C3, C4, C6): the model's final output becomes
//! either messages a contact may see or an escalation.
//!
//! Order, each step seeing only what the previous one let through:
//! 1. schema validation (`parse_reply`); a failure escalates, outcome `failed_validation`;
//! 2. field-echo stripping: lines that repeat a schema field name (`confidence: 0.9`) are removed;
//!    a reply left with no message escalates (`low_confidence`);
//! 3. leak detection ([`super::leak`]): fence markers, the prompt's section markers, or a run
//!    of 60 letters and digits copied from the framework rules or the tenant prompt escalate,
//!    whatever invisible characters, fullwidth letters or punctuation disguise them;
//! 4. the model's own escalation;
//! 5. confidence below `confidenceThreshold` escalates `low_confidence`;
//! 6. clamps: each message at most 1000 characters (cut at a word boundary), at most 3 messages;
//! 7. a reply repeating an earlier agent message of the history becomes `messages.closer`, or is
//!    only marked when no closer is set (013, [`super::duplicate`]);
//! 8. the closing question is appended as the last message (not after a closer).
//!
//! Invariants: an escalating `GuardedReply` has no messages (the caller sends the tenant's
//! escalation copy); a non-escalating one has at least one non-empty message. Nothing here logs
//! or returns model text in an error: only kinds, counts and schema paths (C5).

use std::fmt;
use std::sync::OnceLock;

use regex::Regex;

use crate::config::Rules;

use super::duplicate::{self, Duplicate};
use super::leak::leak_kind;
pub use super::leak::{LEAK_RUN_CHARS, ProtectedText};
use super::prompt::HistoryTurn;
use crate::escalation::{EscalationCause, EscalationReason};
use crate::fence::Fence;
use crate::model::reply::{AgentReply, MAX_MESSAGE_CHARS, MAX_REPLY_MESSAGES, parse_reply};

/// What the guardrails need from the turn.
#[derive(Debug, Clone, Copy)]
pub struct GuardrailContext<'a> {
    pub rules: &'a Rules,
    /// The framework rules and tenant prompt the model was given: text a reply must not copy.
    pub protected: &'a ProtectedText,
    /// This turn's fence, whose markers and nonce must not appear in a reply.
    pub fence: &'a Fence,
    /// The channel's message cap; the reply never exceeds it (nor 3 messages before the closing
    /// question).
    pub max_messages: usize,
    /// The history the model was given: a reply may not repeat its agent messages (013).
    pub history: &'a [HistoryTurn],
}

/// The guardrails' verdict.
#[derive(Clone, PartialEq)]
pub struct GuardedReply {
    /// What the contact receives; empty exactly when escalating.
    pub messages: Vec<String>,
    pub escalate: bool,
    pub reason: Option<EscalationReason>,
    pub cause: EscalationCause,
    /// The model's confidence, when its output passed the schema.
    pub confidence: Option<f64>,
    /// 013: the reply repeated an earlier agent message (never on an escalation).
    pub duplicate: Option<Duplicate>,
}

impl GuardedReply {
    /// An escalation with no messages.
    pub fn escalated(
        cause: EscalationCause,
        reason: Option<EscalationReason>,
        confidence: Option<f64>,
    ) -> Self {
        Self {
            messages: Vec::new(),
            escalate: true,
            reason,
            cause,
            confidence,
            duplicate: None,
        }
    }

    /// The turn outcome of SYSTEM 4 this verdict stands for.
    pub fn outcome(&self) -> &'static str {
        if !self.escalate {
            return "answered_inline";
        }
        match self.cause {
            EscalationCause::Schema => "failed_validation",
            EscalationCause::Error | EscalationCause::Abort => "error",
            // The budget check before a call, like the one before the first.
            EscalationCause::Budget => "escalated_precheck",
            _ => "escalated_model",
        }
    }
}

impl fmt::Debug for GuardedReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Message text is contact-facing model output: show only lengths (C5).
        let lengths: Vec<usize> = self.messages.iter().map(|m| m.chars().count()).collect();
        f.debug_struct("GuardedReply")
            .field("message_chars", &lengths)
            .field("escalate", &self.escalate)
            .field("reason", &self.reason)
            .field("cause", &self.cause)
            .field("confidence", &self.confidence)
            .field("duplicate", &self.duplicate)
            .finish()
    }
}

/// Runs every guardrail on the final step's raw output (`None`: the loop produced none, which
/// fails closed exactly like a schema failure).
pub fn apply_guardrails(raw: Option<&str>, ctx: &GuardrailContext<'_>) -> GuardedReply {
    // 1. Schema.
    let reply = match raw.map(parse_reply) {
        Some(Ok(reply)) => reply,
        Some(Err(e)) => {
            tracing::warn!(error = %e, "model output failed validation");
            return GuardedReply::escalated(EscalationCause::Schema, None, None);
        }
        None => {
            tracing::warn!("model produced no final output");
            return GuardedReply::escalated(EscalationCause::Schema, None, None);
        }
    };
    let AgentReply {
        messages,
        escalate,
        escalation_reason,
        confidence,
        closing_question,
    } = reply;

    // 2. Field echoes.
    let mut echoes = 0usize;
    let messages: Vec<String> = messages
        .iter()
        .map(|m| strip_field_echoes(m, &mut echoes))
        .filter(|m| !m.is_empty())
        .collect();
    let closing_question = closing_question
        .as_deref()
        .map(|q| strip_field_echoes(q, &mut echoes))
        .filter(|q| !q.is_empty());
    if echoes > 0 {
        tracing::info!(lines = echoes, "stripped field-name echoes from the reply");
    }
    if messages.is_empty() {
        return GuardedReply::escalated(
            EscalationCause::FieldEcho,
            Some(EscalationReason::LowConfidence),
            Some(confidence),
        );
    }

    // 3. Leaks.

    let leaked = messages
        .iter()
        .chain(closing_question.iter())
        .find_map(|m| leak_kind(m, ctx.fence, ctx.protected));
    if let Some(kind) = leaked {
        tracing::warn!(kind, "reply leaked prompt material");
        return GuardedReply::escalated(EscalationCause::Leak, None, Some(confidence));
    }

    // 4. The model's own escalation.
    if escalate {
        return GuardedReply::escalated(
            EscalationCause::Model,
            escalation_reason,
            Some(confidence),
        );
    }

    // 5. Confidence.
    if confidence < ctx.rules.confidence_threshold {
        return GuardedReply::escalated(
            EscalationCause::LowConfidence,
            Some(EscalationReason::LowConfidence),
            Some(confidence),
        );
    }

    // 6. Clamps.
    let cap = ctx.max_messages.max(1);
    let mut out: Vec<String> = messages
        .iter()
        .take(MAX_REPLY_MESSAGES.min(cap))
        .map(|m| clamp_at_word(m, MAX_MESSAGE_CHARS))
        .collect();
    // 7. A repeat (013): the closer replaces the reply and its closing question.
    let repeated = duplicate::repeats(&out, ctx.history);
    let closer = ctx.rules.messages.closer.as_deref().filter(|_| repeated);
    let duplicate = repeated.then_some(match closer {
        Some(_) => Duplicate::Replaced,
        None => Duplicate::Detected,
    });
    if let Some(closer) = closer {
        out = vec![clamp_at_word(closer, MAX_MESSAGE_CHARS)];
    } else if let Some(q) = closing_question
        && out.len() < cap
    {
        // 8. The closing question, when the channel has room for it: the answer itself matters
        // more than the question that follows it.
        out.push(clamp_at_word(&q, MAX_MESSAGE_CHARS));
    }
    if let Some(duplicate) = duplicate {
        tracing::info!(
            kind = duplicate.kind(),
            "reply repeated an earlier agent message"
        );
    }
    GuardedReply {
        messages: out,
        escalate: false,
        reason: None,
        cause: EscalationCause::None,
        confidence: Some(confidence),
        duplicate,
    }
}

/// Matches a line that starts with a schema field name followed by `:` or `=`, the name plain,
/// quoted or emphasised (`confidence: 0.9`, `"escalate": false`, `**messages**: …`).
fn echo_line() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r#"(?i)^\s*(?:[-•>]\s*)?[{\[]?\s*(?:\*\*|__|\*|_)?\s*["'`“”‘’]?\s*(?:messages|escalate|escalation_reason|confidence|closing_question)\s*["'`“”‘’]?\s*(?:\*\*|__|\*|_)?\s*[:=]"#,
        )
        .expect("a constant pattern, compiled by every guardrails unit test")
    })
}

/// Removes echo lines from one message and trims what is left.
fn strip_field_echoes(text: &str, removed: &mut usize) -> String {
    let re = echo_line();
    let kept: Vec<&str> = text
        .split('\n')
        .filter(|line| {
            let echo = re.is_match(line);
            if echo {
                *removed += 1;
            }
            !echo
        })
        .collect();
    kept.join("\n").trim().to_owned()
}

/// Cuts `text` to at most `max` characters, at the last whitespace before the limit when there
/// is one, so no word is split.
pub fn clamp_at_word(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut = text
        .char_indices()
        .nth(max)
        .map(|(i, _)| i)
        .unwrap_or(text.len());
    let head = &text[..cut];
    // If the character right after the cut is whitespace, the head already ends on a word.
    let next_is_space = text[cut..].starts_with(char::is_whitespace);
    let trimmed = if next_is_space {
        head
    } else {
        match head.rfind(char::is_whitespace) {
            Some(i) if i > 0 => &head[..i],
            _ => head,
        }
    };
    trimmed.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::agent::prompt::static_prefix;
    use crate::agent::prompt::tests::demo_config;
    use serde_json::{Value, json};

    const NONCE: &str = "00000000000000aa";

    fn reply(messages: Value, closing: Value, confidence: f64) -> Option<String> {
        Some(
            json!({
                "messages": messages,
                "escalate": false,
                "escalation_reason": null,
                "confidence": confidence,
                "closing_question": closing
            })
            .to_string(),
        )
    }

    fn escalating(messages: Value, reason: &str) -> Option<String> {
        Some(
            json!({
                "messages": messages,
                "escalate": true,
                "escalation_reason": reason,
                "confidence": 0.9,
                "closing_question": null
            })
            .to_string(),
        )
    }

    struct Case {
        name: &'static str,
        raw: Option<String>,
        max_messages: usize,
        messages: Vec<String>,
        cause: EscalationCause,
        reason: Option<EscalationReason>,
        outcome: &'static str,
    }

    fn answered(name: &'static str, raw: Option<String>, messages: &[&str]) -> Case {
        Case {
            name,
            raw,
            max_messages: 10,
            messages: messages.iter().map(|s| s.to_string()).collect(),
            cause: EscalationCause::None,
            reason: None,
            outcome: "answered_inline",
        }
    }

    fn escalated(
        name: &'static str,
        raw: Option<String>,
        cause: EscalationCause,
        reason: Option<EscalationReason>,
    ) -> Case {
        let outcome = match cause {
            EscalationCause::Schema => "failed_validation",
            _ => "escalated_model",
        };
        Case {
            name,
            raw,
            max_messages: 10,
            messages: vec![],
            cause,
            reason,
            outcome,
        }
    }

    /// One reply at 0.9 with no closing question.
    fn plain(messages: Value) -> Option<String> {
        reply(messages, Value::Null, 0.9)
    }

    fn leak(name: &'static str, raw: Option<String>) -> Case {
        escalated(name, raw, EscalationCause::Leak, None)
    }

    fn cases(prefix: &str) -> Vec<Case> {
        use EscalationCause as C;
        use EscalationReason as R;
        // A run of more than 60 letters from the framework rules and one from the tenant
        // prompt, with case, spacing and punctuation changed so only normalisation finds them.
        let rules_run =
            "EVERY price; date - duration, schedule,   availability or policy you state must come";
        assert!(prefix.contains(
            "Every price, date, duration, schedule, availability or policy you state must come"
        ));
        let prompt_run =
            "and never mention the secret internal pricing spreadsheet called Fern Ledger";
        assert!(prefix.contains(prompt_run));
        // The same run cut to one letter short of a leak.
        let short_run = {
            let mut letters = 0;
            let end = prompt_run
                .char_indices()
                .find(|(_, c)| {
                    letters += usize::from(c.is_alphanumeric());
                    letters == LEAK_RUN_CHARS
                })
                .map(|(i, _)| i)
                .unwrap();
            &prompt_run[..end]
        };
        let long_word = "word ".repeat(200);
        vec![
            answered(
                "valid reply",
                plain(json!(["The Foundation Course is 450.00 USD."])),
                &["The Foundation Course is 450.00 USD."],
            ),
            escalated("missing output", None, C::Schema, None),
            escalated("bad json", Some("{\"messages\": [".into()), C::Schema, None),
            escalated("empty output", Some("  ".into()), C::Schema, None),
            escalated(
                "schema violation: four messages",
                plain(json!(["a", "b", "c", "d"])),
                C::Schema,
                None,
            ),
            escalated(
                "reason without escalate",
                Some(
                    json!({"messages": ["hi"], "escalate": false, "escalation_reason": "complaint",
                        "confidence": 0.9, "closing_question": null})
                    .to_string(),
                ),
                C::Schema,
                None,
            ),
            answered(
                "echo line `messages: hi` is stripped",
                plain(json!(["messages: hi\nClasses are on Tuesdays."])),
                &["Classes are on Tuesdays."],
            ),
            escalated(
                "echo `\"confidence\": 0.9` leaves nothing",
                plain(json!(["\"confidence\": 0.9"])),
                C::FieldEcho,
                Some(R::LowConfidence),
            ),
            answered(
                "echo `**escalate**: false` dropped with its message",
                plain(json!(["It is 450.00 USD.", "**escalate**: false"])),
                &["It is 450.00 USD."],
            ),
            answered(
                "echo variants: bold colon, equals, quoted, bullet",
                plain(json!([
                    "**confidence:** high\nescalation_reason = null\n'closing_question': x\n- Messages: y\nOK."
                ])),
                &["OK."],
            ),
            answered(
                "a field name not followed by : or = is kept",
                plain(json!(["Confidence matters to us."])),
                &["Confidence matters to us."],
            ),
            answered(
                "echo in the closing question drops it",
                reply(
                    json!(["Hello."]),
                    json!("closing_question: Want the link?"),
                    0.9,
                ),
                &["Hello."],
            ),
            leak("leak: fence marker", plain(json!(["Sure <<<CONTACT"]))),
            leak(
                "leak: nonce",
                plain(json!([format!("the code is {NONCE}")])),
            ),
            leak(
                "leak: forged fence in reply",
                plain(json!([format!("END CONTACT nonce={NONCE}")])),
            ),
            leak(
                "leak: section header",
                plain(json!(["Here is my # CATALOG section"])),
            ),
            leak(
                "leak: server notices label",
                plain(json!(["SERVER NOTICES say hi"])),
            ),
            leak(
                "leak: framework rules text",
                plain(json!([format!("My rules: {rules_run}.")])),
            ),
            leak(
                "leak: tenant prompt text in the closing question",
                reply(json!(["Hi."]), json!(format!("I {prompt_run}?")), 0.9),
            ),
            answered(
                "59 copied letters are not a leak",
                plain(json!([short_run])),
                &[short_run],
            ),
            leak(
                "leak beats the model's own escalation",
                escalating(json!(["<<<"]), "complaint"),
            ),
            escalated(
                "model escalates",
                escalating(json!(["Let me get a person."]), "explicit_request"),
                C::Model,
                Some(R::ExplicitRequest),
            ),
            escalated(
                "low confidence",
                reply(json!(["Maybe Tuesdays?"]), Value::Null, 0.3),
                C::LowConfidence,
                Some(R::LowConfidence),
            ),
            answered(
                "confidence exactly at the threshold passes",
                reply(json!(["Tuesdays."]), Value::Null, 0.6),
                &["Tuesdays."],
            ),
            answered(
                "closing question appended",
                reply(
                    json!(["It is 450.00 USD.", "Classes are on Tuesdays."]),
                    json!("Shall I send the link?"),
                    0.8,
                ),
                &[
                    "It is 450.00 USD.",
                    "Classes are on Tuesdays.",
                    "Shall I send the link?",
                ],
            ),
            Case {
                max_messages: 2,
                ..answered(
                    "clamp: channel cap keeps the answer over the question",
                    reply(json!(["a", "b", "c"]), json!("q?"), 0.9),
                    &["a", "b"],
                )
            },
            Case {
                max_messages: 3,
                ..answered(
                    "clamp: three messages then no room for the question",
                    reply(json!(["a", "b", "c"]), json!("q?"), 0.9),
                    &["a", "b", "c"],
                )
            },
            answered(
                "a message within the limit is kept whole",
                plain(json!([long_word.trim_end()])),
                &[long_word.trim_end()],
            ),
        ]
    }

    /// The guardrails on `raw` under `cfg`'s rules and prompt, at `max_messages`, after
    /// `history`.
    fn guarded(
        cfg: &crate::config::TenantConfig,
        raw: Option<&str>,
        max_messages: usize,
        history: &[crate::agent::HistoryTurn],
    ) -> GuardedReply {
        let prefix = static_prefix(cfg);
        let fence = Fence::from_nonce(NONCE).unwrap();
        let ctx = GuardrailContext {
            rules: &cfg.rules,
            protected: &ProtectedText::new(&prefix),
            fence: &fence,
            max_messages,
            history,
        };
        apply_guardrails(raw, &ctx)
    }

    #[test]
    fn system_4_guardrails_table() {
        let cfg = demo_config();
        let prefix = static_prefix(&cfg);
        for case in cases(&prefix) {
            let got = guarded(&cfg, case.raw.as_deref(), case.max_messages, &[]);
            assert_eq!(got.messages, case.messages, "{}: messages", case.name);
            assert_eq!(
                got.escalate,
                case.cause != EscalationCause::None,
                "{}: escalate",
                case.name
            );
            assert_eq!(got.cause, case.cause, "{}: cause", case.name);
            assert_eq!(got.reason, case.reason, "{}: reason", case.name);
            assert_eq!(got.outcome(), case.outcome, "{}: outcome", case.name);
            if got.escalate {
                assert!(
                    got.messages.is_empty(),
                    "{}: escalation carries text",
                    case.name
                );
            }
        }
    }

    #[test]
    fn system_4_catalog_text_may_be_quoted() {
        let mut cfg = demo_config();
        let long =
            "The practice kit, the printed workbook and the graduation certificate are included.";
        cfg.catalog.offerings[0].description = long.to_owned();
        let got = guarded(
            &cfg,
            reply(json!([long]), Value::Null, 0.9).as_deref(),
            10,
            &[],
        );
        assert_eq!(got.cause, EscalationCause::None);
        assert_eq!(got.messages, vec![long]);
    }

    #[test]
    fn system_4_confidence_threshold_comes_from_rules() {
        let mut cfg = demo_config();
        cfg.rules.confidence_threshold = 0.95;
        let got = guarded(
            &cfg,
            reply(json!(["Tuesdays."]), Value::Null, 0.9).as_deref(),
            10,
            &[],
        );
        assert_eq!(got.cause, EscalationCause::LowConfidence);
        assert_eq!(got.confidence, Some(0.9));
    }

    /// One message at 0.8, closing with "Shall I book you?".
    fn booking_reply(message: &str) -> Option<String> {
        reply(json!([message]), json!("Shall I book you?"), 0.8)
    }

    /// The guardrails on `raw` with `history`, the demo rules and `closer`.
    fn against_history(raw: Option<String>, history: &str, closer: Option<&str>) -> GuardedReply {
        let mut cfg = demo_config();
        cfg.rules.messages.closer = closer.map(str::to_owned);
        let history = [crate::agent::HistoryTurn {
            role: crate::store::Role::Agent,
            text: history.to_owned(),
            actions_performed: Vec::new(),
        }];
        guarded(&cfg, raw.as_deref(), 10, &history)
    }

    #[test]
    fn spec_013_a_repeated_reply_becomes_the_closer_without_its_closing_question() {
        let got = against_history(
            booking_reply("It runs on  TUESDAYS. 📅"),
            "Hi!\n\nIt runs on Tuesdays.",
            Some("Glad to help. Write whenever you like."),
        );
        assert_eq!(got.messages, vec!["Glad to help. Write whenever you like."]);
        assert!(!got.escalate);
        assert_eq!(got.confidence, Some(0.8));
        assert_eq!(got.duplicate, Some(Duplicate::Replaced));
        assert_eq!(got.outcome(), "answered_inline");
    }

    #[test]
    fn spec_013_without_a_closer_the_repeat_is_sent_and_marked() {
        let got = against_history(
            booking_reply("It runs on tuesdays."),
            "It runs on Tuesdays.",
            None,
        );
        assert_eq!(
            got.messages,
            vec!["It runs on tuesdays.", "Shall I book you?"]
        );
        assert_eq!(got.duplicate, Some(Duplicate::Detected));
        let fresh = against_history(
            reply(json!(["It runs on Mondays."]), Value::Null, 0.8),
            "It runs on Tuesdays.",
            Some("Bye."),
        );
        assert_eq!(fresh.messages, vec!["It runs on Mondays."]);
        assert_eq!(fresh.duplicate, None);
    }

    #[test]
    fn spec_013_an_escalation_is_not_checked_for_repeats() {
        let got = against_history(
            escalating(json!(["It runs on Tuesdays."]), "complaint"),
            "It runs on Tuesdays.",
            Some("Bye."),
        );
        assert!(got.escalate);
        assert!(got.messages.is_empty());
        assert_eq!(got.duplicate, None);
    }

    #[test]
    fn system_4_clamp_cuts_at_a_word_boundary() {
        let text = format!("{} tail", "abcd ".repeat(200)); // 1005 characters
        let out = clamp_at_word(&text, 1000);
        assert!(out.chars().count() <= 1000);
        assert!(out.ends_with("abcd"));
        assert_eq!(out, "abcd ".repeat(200).trim_end());
        // A cut that falls right before a space keeps the whole last word.
        assert_eq!(clamp_at_word("hello world", 5), "hello");
        // A single long word has no boundary and is cut hard.
        assert_eq!(clamp_at_word(&"x".repeat(1200), 1000).len(), 1000);
        // Multi-byte characters are counted as characters and never split.
        let accented = "é".repeat(1001);
        assert_eq!(clamp_at_word(&accented, 1000).chars().count(), 1000);
        assert_eq!(clamp_at_word("short", 1000), "short");
    }

    #[test]
    fn system_4_outcome_for_caller_set_causes() {
        let error = GuardedReply::escalated(EscalationCause::Error, None, None);
        assert_eq!(error.outcome(), "error");
        assert!(error.messages.is_empty());
        let abort = GuardedReply::escalated(EscalationCause::Abort, None, None);
        assert_eq!(abort.outcome(), "error");
    }

    #[test]
    fn c5_guarded_reply_debug_shows_lengths_not_text() {
        let r = GuardedReply {
            messages: vec!["Invented Person, your phone +1 555 0100".to_owned()],
            escalate: false,
            reason: None,
            cause: EscalationCause::None,
            confidence: Some(0.9),
            duplicate: None,
        };
        let debug = format!("{r:?}");
        assert!(!debug.contains("Invented"));
        assert!(debug.contains("message_chars: [39]"));
    }
}
