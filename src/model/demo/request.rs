//! Reading the request as the prompt format lays it out: the catalog block of the static
//! prefix (offerings, FAQ, payment options), the current contact message and the server
//! notices, and the character-based token estimate.

use super::*;

// ---------------------------------------------------------------------------------------------
// Reading the request

/// The catalog block of the static prefix, as the prompt format lays it out.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct CatalogView {
    pub(super) offerings: Vec<OfferingLine>,
    pub(super) faq: Vec<(String, String)>,
    pub(super) payment_options: Vec<(String, String)>,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct OfferingLine {
    pub(super) id: String,
    pub(super) name: String,
    /// Exactly as formatted in the prompt, e.g. `450.00 USD`.
    pub(super) price: Option<String>,
    pub(super) duration_hours: Option<String>,
    pub(super) schedule: Option<String>,
    pub(super) url: Option<String>,
    pub(super) description: String,
    /// Words of the name no other offering's name has, so "the wheel one" finds "Wheel Basics".
    pub(super) distinctive: Vec<String>,
}

impl OfferingLine {
    pub(super) fn is_named_in(&self, folded: &str) -> bool {
        has(folded, &[self.id.replace(['_', '-'], " ").as_str()])
            || has(folded, &[fold(&self.name).trim()])
            || self.distinctive.iter().any(|w| has(folded, &[w.as_str()]))
    }
}

#[derive(Clone, Copy)]
pub(super) enum Section {
    Catalog,
    Faq,
    Payment,
    Other,
}

impl CatalogView {
    pub(super) fn parse(system: &str) -> Self {
        let mut view = CatalogView::default();
        let lines: Vec<&str> = system.lines().collect();
        // The tenant prompt sits before the catalog, so the last header is the server's own.
        let Some(start) = lines.iter().rposition(|l| l.trim_end() == "# CATALOG") else {
            return view;
        };
        let mut section = Section::Catalog;
        for line in &lines[start + 1..] {
            let trimmed = line.trim();
            match trimmed {
                "# FAQ" => {
                    section = Section::Faq;
                    continue;
                }
                "# PAYMENT OPTIONS" => {
                    section = Section::Payment;
                    continue;
                }
                _ if line.starts_with("# ") => {
                    section = Section::Other;
                    continue;
                }
                _ => {}
            }
            match section {
                Section::Catalog => {
                    if let Some(rest) = trimmed.strip_prefix("- offering ") {
                        if let Some(o) = parse_offering(rest) {
                            view.offerings.push(o);
                        }
                    } else if line.starts_with([' ', '\t'])
                        && !trimmed.is_empty()
                        && let Some(o) = view.offerings.last_mut()
                    {
                        if !o.description.is_empty() {
                            o.description.push(' ');
                        }
                        o.description.push_str(trimmed);
                    }
                }
                // Multi-line answers and descriptions continue on indented lines.
                Section::Faq => {
                    let continues = line.starts_with([' ', '\t']) && !trimmed.is_empty();
                    if let Some(q) = trimmed.strip_prefix("Q:") {
                        view.faq.push((q.trim().to_owned(), String::new()));
                    } else if let Some(a) = trimmed.strip_prefix("A:")
                        && let Some(last) = view.faq.last_mut()
                    {
                        last.1 = a.trim().to_owned();
                    } else if continues && let Some(last) = view.faq.last_mut() {
                        let part = if last.1.is_empty() {
                            &mut last.0
                        } else {
                            &mut last.1
                        };
                        part.push(' ');
                        part.push_str(trimmed);
                    }
                }
                Section::Payment => {
                    if let Some((id, description)) =
                        trimmed.strip_prefix("- ").and_then(|r| r.split_once(':'))
                    {
                        view.payment_options
                            .push((id.trim().to_owned(), description.trim().to_owned()));
                    } else if line.starts_with([' ', '\t'])
                        && !trimmed.is_empty()
                        && let Some(last) = view.payment_options.last_mut()
                    {
                        last.1.push(' ');
                        last.1.push_str(trimmed);
                    }
                }
                Section::Other => {}
            }
        }
        view.mark_distinctive_words();
        view
    }

    /// The offering lines of the turn's `RETRIEVED CATALOG` block (above the knowledge
    /// threshold the prefix lists none), in the last user message that opens with the notices.
    pub(super) fn add_retrieved(&mut self, request: &ModelRequest) {
        let Some(own) = request.messages.iter().rev().find_map(|m| match m {
            Message::User { text } if text.starts_with("SERVER NOTICES") => Some(text.as_str()),
            _ => None,
        }) else {
            return;
        };
        let mut inside = false;
        let before = self.offerings.len();
        for line in own.lines() {
            if line.starts_with("RETRIEVED CATALOG") {
                inside = true;
                continue;
            }
            if !inside {
                continue;
            }
            if line.starts_with("CONTACT MESSAGE") || line.starts_with("Passages of") {
                break;
            }
            let trimmed = line.trim();
            if let Some(rest) = line.strip_prefix("- offering ") {
                if let Some(o) = parse_offering(rest)
                    && !self.offerings.iter().any(|known| known.id == o.id)
                {
                    self.offerings.push(o);
                }
            } else if line.starts_with("  ")
                && !trimmed.is_empty()
                && let Some(o) = self.offerings.last_mut()
            {
                if !o.description.is_empty() {
                    o.description.push(' ');
                }
                o.description.push_str(trimmed);
            }
        }
        if self.offerings.len() > before {
            self.mark_distinctive_words();
        }
    }

    pub(super) fn mark_distinctive_words(&mut self) {
        let names: Vec<Vec<String>> = self
            .offerings
            .iter()
            .map(|o| words(&fold(&o.name)))
            .collect();
        for (i, o) in self.offerings.iter_mut().enumerate() {
            o.distinctive = names[i]
                .iter()
                .filter(|w| w.chars().count() >= 4 && !GENERIC_NAME_WORDS.contains(&w.as_str()))
                .filter(|w| {
                    names
                        .iter()
                        .enumerate()
                        .all(|(j, other)| j == i || !other.contains(w))
                })
                .cloned()
                .collect();
        }
    }

    pub(super) fn mentioned(&self, folded: &str) -> Vec<&OfferingLine> {
        self.offerings
            .iter()
            .filter(|o| o.is_named_in(folded))
            .collect()
    }

    /// An FAQ answer when the message shares at least half of a question's content words.
    pub(super) fn faq_answer(&self, folded: &str) -> Option<&str> {
        let asked: Vec<String> = content_words(folded);
        self.faq
            .iter()
            .filter(|(_, a)| !a.is_empty())
            .filter_map(|(q, a)| {
                let wanted = content_words(&fold(q));
                let shared = wanted.iter().filter(|w| asked.contains(w)).count();
                (shared > 0 && shared * 2 >= wanted.len()).then_some((shared, a.as_str()))
            })
            .max_by_key(|(shared, _)| *shared)
            .map(|(_, a)| a)
    }
}

pub(super) fn parse_offering(rest: &str) -> Option<OfferingLine> {
    let (id, tail) = rest.split_once(':')?;
    let mut parts = tail.split(" | ");
    let mut o = OfferingLine {
        id: id.trim().to_owned(),
        name: parts.next()?.trim().to_owned(),
        ..OfferingLine::default()
    };
    for part in parts {
        let part = part.trim();
        if let Some(v) = part.strip_prefix("price ") {
            o.price = Some(v.trim().to_owned());
        } else if let Some(v) = part.strip_prefix("duration ") {
            o.duration_hours = Some(v.trim().trim_end_matches("hours").trim().to_owned());
        } else if let Some(v) = part.strip_prefix("schedule ") {
            o.schedule = Some(v.trim().to_owned());
        } else if let Some(v) = part.strip_prefix("url ") {
            o.url = Some(v.trim().to_owned());
        }
    }
    Some(o)
}

/// The per-turn part of the request: the current contact message and the server notices.
#[derive(Debug, Default)]
pub(super) struct TurnView {
    pub(super) contact: Option<String>,
    /// From an `OFFERING: <id>` notice.
    pub(super) offering: Option<String>,
    /// The offering notice says it came from an advert (034: a reason to record `prospect`).
    pub(super) advert_offering: bool,
    /// From an `INTENT: <value>` notice.
    pub(super) intent: Option<String>,
    /// From a `FUNNEL: <stage>` notice.
    pub(super) stage: Option<String>,
    /// From a `FLOWS: accepted now: …; already sent: …` notice (`None`: no such notice, as on
    /// an unbound turn).
    pub(super) flows: Option<FlowsNotice>,
}

/// What the `FLOWS:` notice says of the contact's flows this turn.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct FlowsNotice {
    pub(super) accepted: Vec<String>,
    pub(super) sent: Vec<String>,
}

impl FlowsNotice {
    /// `accepted now: a, b; already sent: c[; …]` (the notice after `FLOWS:`).
    fn parse(rest: &str) -> Self {
        let mut notice = Self::default();
        for part in rest.split(';') {
            let ids = |list: &str| -> Vec<String> {
                list.split(',')
                    .map(str::trim)
                    .filter(|id| !id.is_empty() && *id != "none")
                    .map(str::to_owned)
                    .collect()
            };
            if let Some(list) = part.trim().strip_prefix("accepted now:") {
                notice.accepted = ids(list);
            } else if let Some(list) = part.trim().strip_prefix("already sent:") {
                notice.sent = ids(list);
            }
        }
        notice
    }
}

impl TurnView {
    /// From the turn's own message: the last user message that opens with the notices (the
    /// history's messages come before it, the final step's note after it).
    pub(super) fn parse(request: &ModelRequest) -> Self {
        let Some(own) = request.messages.iter().rev().find_map(|m| match m {
            Message::User { text } if text.starts_with("SERVER NOTICES") => Some(text.as_str()),
            _ => None,
        }) else {
            return Self::default();
        };
        let lines: Vec<&str> = own.lines().collect();
        let contact = lines
            .iter()
            .rposition(|l| l.trim_start().starts_with("<<<CONTACT nonce="))
            .and_then(|open| {
                let close = lines[open + 1..]
                    .iter()
                    .position(|l| l.trim_start().starts_with("<<<END CONTACT"))?;
                Some(lines[open + 1..open + 1 + close].join("\n"))
            });
        let notice = |prefix: &str| {
            lines
                .iter()
                .skip_while(|l| !l.starts_with("SERVER NOTICES"))
                .skip(1)
                .take_while(|l| !l.trim().is_empty())
                .find_map(|l| l.trim().strip_prefix(prefix))
                .map(|rest| rest.trim().to_owned())
        };
        let first_word = |rest: String| rest.split_whitespace().next().map(str::to_owned);
        let offering_notice = notice("OFFERING:");
        Self {
            contact,
            advert_offering: offering_notice
                .as_deref()
                .is_some_and(|n| n.contains("advert")),
            offering: offering_notice.and_then(first_word),
            intent: notice("INTENT:").and_then(first_word),
            stage: notice("FUNNEL:").and_then(first_word),
            flows: notice("FLOWS:").map(|rest| FlowsNotice::parse(&rest)),
        }
    }
}

/// The request's input tokens as a provider roughly bills them, counted with the real
/// tokenizer (`o200k_base`): the system text, the tool definitions and the output schema as
/// JSON, and every message (`crate::model::tokenizer::request_tokens`).
pub(super) fn estimate_input_tokens(request: &ModelRequest) -> u64 {
    crate::model::tokenizer::request_tokens(request)
}

/// The output tokens of an answer's text (at least 1), counted with the real tokenizer.
pub(super) fn tokens_for(text: &str) -> u64 {
    crate::model::tokenizer::count(text).max(1)
}

/// The output tokens of a step's tool calls: each name and its arguments as JSON (at least 1).
pub(super) fn call_tokens(calls: &[ToolCall]) -> u64 {
    crate::model::tokenizer::calls_tokens(calls).max(1)
}
