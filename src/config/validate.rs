//! The rules a parsed config must satisfy beyond its types (SYSTEM 5.1, 012 § "The flow set may
//! not include the reply flow or field", 024 § "Three free-text notes", 023–034).
//!
//! Invariants:
//! - Every check runs; nothing stops at the first issue, so a tenant sees all of them at once.
//! - Pure: no IO. Each function takes the file name it reports under, so an issue names the file
//!   actually read (`tools.json` or `tools.json.example`).
//! - Issues name paths, ids and rules, never values that could be customer copy (C5, C9). Ids
//!   are named freely: they are configured identifiers, not copy.

use std::collections::{HashMap, HashSet};

use super::error::ConfigIssue;
use super::load::ConfigContext;
use super::tenant::{
    Catalog, FUNNEL_STAGES, FieldConfig, FlowRole, INTENT_VALUES, MAX_NOTE_LENGTH,
    MAX_NUDGE_MINUTES, MAX_SETTLE_SECONDS, Rules, TagConfig, ToolsConfig,
};

const ID_RULE: &str = "must match ^[a-z0-9_-]+$ (lowercase letters, digits, _ and -)";
const NOT_EMPTY: &str = "must not be empty";
const REPLY_FLOW_RULE: &str =
    "must not equal MANYCHAT_REPLY_FLOW_NS (the reply flow renders the reply field)";
const REPLY_FIELD_RULE: &str =
    "must not equal MANYCHAT_REPLY_FIELD (a write would overwrite a reply in flight)";
const TOKEN_FIELD_RULE: &str =
    "must not equal MANYCHAT_TOKEN_FIELD (a write would replace the contact's token)";

/// Whether `id` is a configured identifier: `^[a-z0-9_-]+$`.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Collects issues for one file.
struct Report<'a> {
    file: &'a str,
    issues: Vec<ConfigIssue>,
}

impl<'a> Report<'a> {
    fn new(file: &'a str) -> Self {
        Self {
            file,
            issues: Vec::new(),
        }
    }

    fn push(&mut self, path: impl Into<String>, rule: impl Into<String>) {
        self.issues.push(ConfigIssue::new(self.file, path, rule));
    }

    fn non_empty(&mut self, path: impl Into<String>, value: &str) {
        if value.trim().is_empty() {
            self.push(path, NOT_EMPTY);
        }
    }

    fn id(&mut self, path: impl Into<String>, id: &str) {
        if !is_valid_id(id) {
            self.push(path, ID_RULE);
        }
    }
}

/// Tracks ids already seen in one namespace (which may span several lists), reporting a repeat
/// at the repeat's path.
struct Unique<'s> {
    seen: HashMap<&'s str, String>,
}

impl<'s> Unique<'s> {
    fn new() -> Self {
        Self {
            seen: HashMap::new(),
        }
    }

    fn check(&mut self, report: &mut Report<'_>, path: String, id: &'s str, scope: &str) {
        match self.seen.get(id) {
            Some(first) => report.push(
                path,
                format!("duplicate id `{id}`: ids must be unique {scope} (first at {first})"),
            ),
            None => {
                self.seen.insert(id, path);
            }
        }
    }
}

/// ManyChat names compared for collisions: trimmed and case-folded, since a near-identical name
/// is as likely to reach the same field and refusing it costs a tenant only a rename.
fn same_name(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
}

fn reply_flow(ctx: &ConfigContext) -> Option<&str> {
    ctx.reply_flow_ns
        .as_deref()
        .map(str::trim)
        .filter(|ns| !ns.is_empty())
}

// ---------------------------------------------------------------------------------------------
// catalog.json

pub fn catalog(file: &str, catalog: &Catalog) -> Vec<ConfigIssue> {
    let mut r = Report::new(file);
    r.non_empty("$.businessName", &catalog.business_name);
    let currency_ok =
        catalog.currency.len() == 3 && catalog.currency.bytes().all(|b| b.is_ascii_uppercase());
    if !currency_ok {
        r.push(
            "$.currency",
            "must be a three-letter ISO 4217 code in capitals, e.g. USD",
        );
    }

    if catalog.offerings.is_empty() {
        r.push("$.offerings", "must list at least one offering");
    }
    let mut ids = Unique::new();
    for (i, o) in catalog.offerings.iter().enumerate() {
        let at = format!("$.offerings[{i}]");
        r.id(format!("{at}.id"), &o.id);
        ids.check(&mut r, format!("{at}.id"), &o.id, "among offerings");
        r.non_empty(format!("{at}.name"), &o.name);
        r.non_empty(format!("{at}.description"), &o.description);
        if o.price.amount < 0 {
            r.push(
                format!("{at}.price.amount"),
                "must be zero or more (minor units)",
            );
        }
        if o.price.currency != catalog.currency {
            r.push(
                format!("{at}.price.currency"),
                "must equal the catalog's currency",
            );
        }
        if let Some(hours) = o.duration_hours
            && !(hours.is_finite() && hours > 0.0)
        {
            r.push(format!("{at}.durationHours"), "must be greater than zero");
        }
        if let Some(schedule) = &o.schedule {
            r.non_empty(format!("{at}.schedule"), schedule);
        }
        if let Some(url) = &o.url {
            let https = reqwest::Url::parse(url)
                .is_ok_and(|u| u.scheme() == "https" && u.host_str().is_some());
            if !https {
                r.push(format!("{at}.url"), "must be an https:// URL");
            }
        }
    }

    for (i, faq) in catalog.faq.iter().enumerate() {
        r.non_empty(format!("$.faq[{i}].question"), &faq.question);
        r.non_empty(format!("$.faq[{i}].answer"), &faq.answer);
    }

    let mut ids = Unique::new();
    for (i, p) in catalog.payment_options.iter().enumerate() {
        let at = format!("$.paymentOptions[{i}]");
        r.id(format!("{at}.id"), &p.id);
        ids.check(&mut r, format!("{at}.id"), &p.id, "among paymentOptions");
        r.non_empty(format!("{at}.description"), &p.description);
    }
    r.issues
}

// ---------------------------------------------------------------------------------------------
// rules.json

pub fn rules(file: &str, rules: &Rules, ctx: &ConfigContext) -> Vec<ConfigIssue> {
    let mut r = Report::new(file);
    r.non_empty(
        "$.messages.acknowledgement",
        &rules.messages.acknowledgement,
    );
    r.non_empty("$.messages.escalation", &rules.messages.escalation);
    if let Some(media) = &rules.messages.media_fallback {
        r.non_empty("$.messages.mediaFallback", media);
    }
    if !(0.0..=1.0).contains(&rules.confidence_threshold) {
        r.push("$.confidenceThreshold", "must be between 0 and 1");
    }
    let at_least_one = [
        (
            "$.maxTurnsPerConversation",
            rules.max_turns_per_conversation,
        ),
        ("$.idleResetHours", rules.idle_reset_hours),
        ("$.historyDays", rules.history_days),
        (
            "$.rateLimit.turnsPerSubscriberPerHour",
            rules.rate_limit.turns_per_subscriber_per_hour,
        ),
    ];
    for (path, value) in at_least_one {
        if value < 1 {
            r.push(path, "must be at least 1");
        }
    }
    if rules.budget.daily_token_cap == 0 {
        r.push("$.budget.dailyTokenCap", "must be greater than zero");
    }
    if !(rules.budget.daily_cost_cap_usd.is_finite() && rules.budget.daily_cost_cap_usd > 0.0) {
        r.push("$.budget.dailyCostCapUsd", "must be greater than zero");
    }

    for (i, keyword) in rules.escalation_keywords.iter().enumerate() {
        // An empty keyword is a substring of every message: every turn would escalate.
        if super::rules_match::fold(keyword).trim().is_empty() {
            r.push(
                format!("$.escalationKeywords[{i}]"),
                "must not be empty (an empty keyword would match every message)",
            );
        }
    }

    if let Some(trigger) = &rules.opening_trigger {
        if trigger.keywords.is_empty() {
            r.push(
                "$.openingTrigger.keywords",
                "must list at least one keyword",
            );
        }
        for (i, keyword) in trigger.keywords.iter().enumerate() {
            r.non_empty(format!("$.openingTrigger.keywords[{i}]"), keyword);
        }
        r.non_empty("$.openingTrigger.message", &trigger.message);
    }

    if let Some(learning) = &rules.learning {
        if let Some(language) = &learning.language {
            r.non_empty("$.learning.language", language);
        }
        if let Some(tag) = &learning.converted_tag {
            r.non_empty("$.learning.convertedTag", tag);
        }
        if let Some(cap) = learning.max_run_cost_usd
            && !(cap.is_finite() && cap > 0.0)
        {
            r.push("$.learning.maxRunCostUsd", "must be greater than zero");
        }
    }

    if let Some(handoff) = &rules.handoff {
        if let Some(tag) = &handoff.tag {
            r.non_empty("$.handoff.tag", tag);
        }
        if let Some(ns) = &handoff.flow_ns {
            r.non_empty("$.handoff.flowNs", ns);
            if reply_flow(ctx).is_some_and(|reply| reply == ns.trim()) {
                r.push("$.handoff.flowNs", REPLY_FLOW_RULE);
            }
        }
    }
    r.issues
}

// ---------------------------------------------------------------------------------------------
// tools.json

/// Validates `tools.json`. `catalog` is `None` when the catalog itself failed to parse; the
/// checks against its offering ids are then skipped (the catalog's own issue is reported).
pub fn tools(
    file: &str,
    tools: &ToolsConfig,
    catalog: Option<&Catalog>,
    ctx: &ConfigContext,
) -> Vec<ConfigIssue> {
    let mut r = Report::new(file);
    let reply_flow = reply_flow(ctx);
    let offering_ids: Option<Vec<&str>> =
        catalog.map(|c| c.offerings.iter().map(|o| o.id.as_str()).collect());
    let funnel_field = tools.fields.iter().find(|f| f.funnel);
    let intent_field = tools.fields.iter().find(|f| f.intent);

    // A stage reference (flows[].onStage, events[].stage) needs a funnel field to refer to.
    let check_stage = |r: &mut Report<'_>, path: String, stage: &str| {
        if funnel_field.is_none() {
            r.push(path, "requires a funnel field in fields[]");
        } else if !FUNNEL_STAGES.contains(&stage) {
            r.push(
                path,
                format!("must be a funnel stage: {}", FUNNEL_STAGES.join(", ")),
            );
        }
    };

    // flows[]
    let mut flow_ids = Unique::new();
    let (mut payment_links, mut openings) = (0, 0);
    for (i, flow) in tools.flows.iter().enumerate() {
        let at = format!("$.flows[{i}]");
        r.id(format!("{at}.id"), &flow.id);
        flow_ids.check(&mut r, format!("{at}.id"), &flow.id, "among flows");
        r.non_empty(format!("{at}.flowNs"), &flow.flow_ns);
        if reply_flow.is_some_and(|reply| reply == flow.flow_ns.trim()) {
            r.push(format!("{at}.flowNs"), REPLY_FLOW_RULE);
        }
        r.non_empty(format!("{at}.description"), &flow.description);
        match flow.role {
            Some(FlowRole::PaymentLink) => {
                payment_links += 1;
                if payment_links > 1 {
                    r.push(
                        format!("{at}.role"),
                        "at most one flow may have role payment_link",
                    );
                }
            }
            Some(FlowRole::Opening) => {
                openings += 1;
                if openings > 1 {
                    r.push(
                        format!("{at}.role"),
                        "at most one flow may have role opening",
                    );
                }
                if intent_field.is_none() {
                    r.push(
                        format!("{at}.role"),
                        "an opening flow requires an intent field in fields[]",
                    );
                }
            }
            None => {}
        }
        if let Some(seconds) = flow.settle_seconds
            && seconds > MAX_SETTLE_SECONDS
        {
            r.push(
                format!("{at}.settleSeconds"),
                format!("must be between 0 and {MAX_SETTLE_SECONDS}"),
            );
        }
        if let Some(stage) = &flow.on_stage {
            check_stage(&mut r, format!("{at}.onStage"), stage);
            // 032 B: the server writes `link_sent` and every contact starts at `new`, so
            // neither can tie a flow; one flow per stage; the opening and the link are sent
            // by rules of their own.
            if stage == "new" || stage == "link_sent" {
                r.push(
                    format!("{at}.onStage"),
                    "must not be new or link_sent (no model write reaches them)",
                );
            }
            if tools.flows[..i]
                .iter()
                .any(|f| f.on_stage.as_deref() == Some(stage.as_str()))
            {
                r.push(
                    format!("{at}.onStage"),
                    "at most one flow may be tied to a stage",
                );
            }
            if flow.role.is_some() {
                r.push(
                    format!("{at}.onStage"),
                    "the opening and payment_link flows cannot be tied to a stage",
                );
            }
        }
        if flow.role == Some(FlowRole::Opening) && flow.repeatable {
            r.push(
                format!("{at}.repeatable"),
                "the opening flow is sent once: it cannot be repeatable",
            );
        }
        if flow.offering.is_some() {
            // 028/042: one payment flow and one opening serve every offering.
            if flow.role.is_some() {
                r.push(
                    format!("{at}.offering"),
                    "the opening and payment_link flows serve every offering: no offering",
                );
            }
            if !tools.fields.iter().any(|f| f.offering) {
                r.push(
                    format!("{at}.offering"),
                    "requires an offering field in fields[]",
                );
            }
        }
        if let (Some(offering), Some(ids)) = (&flow.offering, &offering_ids)
            && !ids.contains(&offering.as_str())
        {
            r.push(
                format!("{at}.offering"),
                format!("`{offering}` is not an offering id in the catalog"),
            );
        }
    }

    // tags[] and readable.tags[]: one id namespace, since get_contact lists them side by side.
    let mut tag_ids = Unique::new();
    let tag_lists: [(&str, &[TagConfig]); 2] = [
        ("$.tags", &tools.tags),
        ("$.readable.tags", &tools.readable.tags),
    ];
    for (list, tags) in tag_lists {
        for (i, tag) in tags.iter().enumerate() {
            let at = format!("{list}[{i}]");
            r.id(format!("{at}.id"), &tag.id);
            tag_ids.check(
                &mut r,
                format!("{at}.id"),
                &tag.id,
                "across tags and readable.tags",
            );
            r.non_empty(format!("{at}.tag"), &tag.tag);
            r.non_empty(format!("{at}.description"), &tag.description);
        }
    }

    // fields[], readable.fields[] and notes[]: one id namespace (024).
    let mut field_ids = Unique::new();
    let id_scope = "across fields, readable.fields and notes";
    let field_lists: [(&str, &[FieldConfig], bool); 2] = [
        ("$.fields", &tools.fields, true),
        ("$.readable.fields", &tools.readable.fields, false),
    ];
    let (mut funnels, mut intents, mut offerings) = (0, 0, 0);
    for (list, fields, writable) in field_lists {
        for (i, field) in fields.iter().enumerate() {
            let at = format!("{list}[{i}]");
            r.id(format!("{at}.id"), &field.id);
            field_ids.check(&mut r, format!("{at}.id"), &field.id, id_scope);
            r.non_empty(format!("{at}.field"), &field.field);
            check_server_fields(&mut r, format!("{at}.field"), &field.field, ctx);
            r.non_empty(format!("{at}.description"), &field.description);
            check_values(&mut r, &at, &field.values);

            if !writable {
                if field.funnel || field.intent || field.offering {
                    r.push(
                        at,
                        "funnel, intent and offering apply only to fields[] (a readable field is never written)",
                    );
                }
                continue;
            }
            let markers = [field.funnel, field.intent, field.offering]
                .iter()
                .filter(|m| **m)
                .count();
            if markers > 1 {
                r.push(
                    at.clone(),
                    "a field can be only one of funnel, intent and offering",
                );
            }
            if field.funnel {
                funnels += 1;
                if funnels > 1 {
                    r.push(
                        format!("{at}.funnel"),
                        "at most one field may be the funnel",
                    );
                }
                if field.values != FUNNEL_STAGES {
                    r.push(
                        format!("{at}.values"),
                        format!(
                            "a funnel field's values must be exactly {} in that order",
                            FUNNEL_STAGES.join(", ")
                        ),
                    );
                }
                if intent_field.is_none() {
                    r.push(
                        format!("{at}.funnel"),
                        "a funnel field requires an intent field in fields[]",
                    );
                }
            }
            if field.intent {
                intents += 1;
                if intents > 1 {
                    r.push(
                        format!("{at}.intent"),
                        "at most one field may be the intent field",
                    );
                }
                if field.values != INTENT_VALUES {
                    r.push(
                        format!("{at}.values"),
                        format!(
                            "an intent field's values must be exactly {}",
                            INTENT_VALUES.join(", ")
                        ),
                    );
                }
            }
            if field.offering {
                offerings += 1;
                if offerings > 1 {
                    r.push(
                        format!("{at}.offering"),
                        "at most one field may be the offering field",
                    );
                }
                if let Some(ids) = &offering_ids {
                    let values: HashSet<&str> = field.values.iter().map(String::as_str).collect();
                    let catalog_ids: HashSet<&str> = ids.iter().copied().collect();
                    if values != catalog_ids {
                        r.push(
                            format!("{at}.values"),
                            "an offering field's values must be exactly the catalog's offering ids",
                        );
                    }
                }
            }
        }
    }

    // notes[] (024 § Three free-text notes).
    let enum_fields: Vec<&str> = tools
        .fields
        .iter()
        .chain(&tools.readable.fields)
        .map(|f| f.field.as_str())
        .collect();
    for (i, note) in tools.notes.iter().enumerate() {
        let at = format!("$.notes[{i}]");
        r.id(format!("{at}.id"), &note.id);
        field_ids.check(&mut r, format!("{at}.id"), &note.id, id_scope);
        r.non_empty(format!("{at}.field"), &note.field);
        check_server_fields(&mut r, format!("{at}.field"), &note.field, ctx);
        if enum_fields.iter().any(|f| same_name(f, &note.field)) {
            r.push(
                format!("{at}.field"),
                "must not equal any fields[].field or readable.fields[].field",
            );
        }
        if tools.notes[..i]
            .iter()
            .any(|n| same_name(&n.field, &note.field))
        {
            r.push(format!("{at}.field"), "must not equal another note's field");
        }
        if !note.never_rendered {
            r.push(
                format!("{at}.neverRendered"),
                "must be true: the tenant's statement that no flow renders this field",
            );
        }
        if !(1..=MAX_NOTE_LENGTH).contains(&note.max_length) {
            r.push(
                format!("{at}.maxLength"),
                format!("must be between 1 and {MAX_NOTE_LENGTH}"),
            );
        }
        r.non_empty(format!("{at}.description"), &note.description);
    }

    // nudge (025).
    if let Some(nudge) = &tools.nudge {
        let mut delay_ids = Unique::new();
        for (i, delay) in nudge.delays.iter().enumerate() {
            let at = format!("$.nudge.delays[{i}]");
            r.id(format!("{at}.id"), &delay.id);
            delay_ids.check(&mut r, format!("{at}.id"), &delay.id, "among nudge delays");
            if !(1..=MAX_NUDGE_MINUTES).contains(&delay.minutes) {
                r.push(
                    format!("{at}.minutes"),
                    format!("must be between 1 and {MAX_NUDGE_MINUTES}"),
                );
            }
        }
        if let Some(tag) = &nudge.human_active_tag {
            r.non_empty("$.nudge.humanActiveTag", tag);
            // 025: the agent must not be able to add or remove the tag that silences it.
            if tools.tags.iter().any(|t| same_name(&t.tag, tag)) {
                r.push(
                    "$.nudge.humanActiveTag",
                    "must not equal any tags[].tag (the agent could set or clear it)",
                );
            }
        }
    }

    // events[] (027).
    let mut event_ids = Unique::new();
    for (i, event) in tools.events.iter().enumerate() {
        let at = format!("$.events[{i}]");
        r.id(format!("{at}.id"), &event.id);
        event_ids.check(&mut r, format!("{at}.id"), &event.id, "among events");
        check_stage(&mut r, format!("{at}.stage"), &event.stage);
        if event.stage == "new" {
            r.push(
                format!("{at}.stage"),
                "must not be new (no write advances to it)",
            );
        }
        if tools.events[..i].iter().any(|e| e.stage == event.stage) {
            r.push(format!("{at}.stage"), "at most one event per stage");
        }
        r.non_empty(format!("{at}.flowNs"), &event.flow_ns);
        // 027: a tracking flow is not a flow the agent sends, nor another event's.
        if tools
            .flows
            .iter()
            .any(|f| f.flow_ns.trim() == event.flow_ns.trim())
        {
            r.push(format!("{at}.flowNs"), "must not equal any flows[].flowNs");
        }
        if tools.events[..i]
            .iter()
            .any(|e| e.flow_ns.trim() == event.flow_ns.trim())
        {
            r.push(
                format!("{at}.flowNs"),
                "must not equal another event's flowNs",
            );
        }
        // Sending the reply flow as an event would resend a stale reply, as for flows[] (012).
        if reply_flow.is_some_and(|reply| reply == event.flow_ns.trim()) {
            r.push(format!("{at}.flowNs"), REPLY_FLOW_RULE);
        }
    }

    r.issues
}

/// The collisions of 012 and 024 with the fields the server itself writes.
fn check_server_fields(r: &mut Report<'_>, path: String, field: &str, ctx: &ConfigContext) {
    if same_name(field, &ctx.reply_field) {
        r.push(path.clone(), REPLY_FIELD_RULE);
    }
    if same_name(field, &ctx.token_field) {
        r.push(path, TOKEN_FIELD_RULE);
    }
}

/// An enum field's values are ids: the model names them, and get_contact returns them outside
/// the fence (024), so each must be an identifier by construction.
fn check_values(r: &mut Report<'_>, at: &str, values: &[String]) {
    if values.is_empty() {
        r.push(format!("{at}.values"), "must list at least one value");
    }
    let mut seen = HashSet::new();
    for (j, value) in values.iter().enumerate() {
        let path = format!("{at}.values[{j}]");
        r.id(path.clone(), value);
        if !seen.insert(value.as_str()) {
            r.push(
                path,
                format!("duplicate value `{value}`: values must be unique"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load::load_dir;
    use crate::config::tenant::{NoteConfig, NudgeConfig, NudgeDelay};
    use std::path::Path;

    fn example<T: serde::de::DeserializeOwned>(name: &str) -> T {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("config")
            .join(format!("{name}.example"));
        let text = std::fs::read_to_string(path).expect("example exists");
        serde_json::from_str(&text).expect("example parses")
    }

    fn demo() -> (Catalog, Rules, ToolsConfig) {
        (
            example("catalog.json"),
            example("rules.json"),
            example("tools.json"),
        )
    }

    fn ctx() -> ConfigContext {
        ConfigContext {
            reply_flow_ns: Some("content20260101000000_000900".to_owned()),
            ..ConfigContext::default()
        }
    }

    /// Loads the demo folder with these three files through [`load_dir`], as the service does
    /// at start, and returns every issue (none when the set loads).
    fn load_issues(catalog: &Catalog, rules: &Rules, tools: &ToolsConfig) -> Vec<ConfigIssue> {
        let dir = tempfile::tempdir().expect("temp dir");
        let examples = crate::config::examples::shipped_examples();
        std::fs::copy(
            examples.join("prompt.md.example"),
            dir.path().join("prompt.md"),
        )
        .expect("copy prompt");
        let write = |name: &str, json: String| {
            std::fs::write(dir.path().join(name), json).expect("write fixture");
        };
        write(
            "catalog.json",
            serde_json::to_string_pretty(catalog).expect("json"),
        );
        write(
            "rules.json",
            serde_json::to_string_pretty(rules).expect("json"),
        );
        write(
            "tools.json",
            serde_json::to_string_pretty(tools).expect("json"),
        );
        match load_dir(dir.path(), &ctx()) {
            Ok(_) => Vec::new(),
            Err(errors) => errors.0,
        }
    }

    /// The issues a load reports for this `tools.json` beside the demo catalog and rules.
    fn tool_issues(tools: &ToolsConfig, catalog: &Catalog) -> Vec<(String, String)> {
        let (_, rules, _) = demo();
        load_issues(catalog, &rules, tools)
            .into_iter()
            .map(|i| {
                assert_eq!(i.file, "tools.json", "{i}");
                (i.path, i.rule)
            })
            .collect()
    }

    fn issue(path: &str, rule: &str) -> (String, String) {
        (path.to_owned(), rule.to_owned())
    }

    fn field(id: &str, name: &str, values: &[&str]) -> FieldConfig {
        FieldConfig {
            id: id.to_owned(),
            field: name.to_owned(),
            values: values.iter().map(|v| (*v).to_owned()).collect(),
            description: "Invented field for a test.".to_owned(),
            funnel: false,
            intent: false,
            offering: false,
        }
    }

    fn note(id: &str, name: &str) -> NoteConfig {
        NoteConfig {
            id: id.to_owned(),
            field: name.to_owned(),
            max_length: 200,
            never_rendered: true,
            on_escalation: false,
            description: "Invented note for a test.".to_owned(),
        }
    }

    #[test]
    fn system_5_1_demo_tenant_has_no_issues() {
        let (catalog, rules, tools) = demo();
        assert_eq!(super::catalog("catalog.json", &catalog), []);
        assert_eq!(super::rules("rules.json", &rules, &ctx()), []);
        assert_eq!(tool_issues(&tools, &catalog), []);
    }

    #[test]
    fn spec_012_verification_7_reply_flow_collision_fails_at_load() {
        let (catalog, _, mut tools) = demo();
        tools.flows[1].flow_ns = "content20260101000000_000900".to_owned();
        assert_eq!(
            tool_issues(&tools, &catalog),
            [issue("$.flows[1].flowNs", REPLY_FLOW_RULE)]
        );
    }

    #[test]
    fn spec_012_verification_7_reply_field_collision_fails_at_load() {
        let (catalog, _, mut tools) = demo();
        tools.fields[3].field = "ai_message".to_owned();
        assert_eq!(
            tool_issues(&tools, &catalog),
            [issue("$.fields[3].field", REPLY_FIELD_RULE)]
        );
    }

    #[test]
    fn spec_012_token_field_collision_fails_at_load() {
        let (catalog, _, mut tools) = demo();
        tools
            .readable
            .fields
            .push(field("came_via", "AI_Token", &["ad"]));
        assert_eq!(
            tool_issues(&tools, &catalog),
            [issue("$.readable.fields[0].field", TOKEN_FIELD_RULE)]
        );
    }

    #[test]
    fn spec_012_reply_collisions_follow_the_configured_env_names() {
        let (catalog, _, mut tools) = demo();
        tools.fields[3].field = "ai_message".to_owned();
        let ctx = ConfigContext {
            reply_field: "deferred_reply".to_owned(),
            ..ctx()
        };
        assert_eq!(super::tools("tools.json", &tools, Some(&catalog), &ctx), []);
        assert_eq!(
            super::tools("tools.json", &tools, Some(&catalog), &super::tests::ctx()).len(),
            1
        );
    }

    #[test]
    fn system_4_handoff_flow_equal_to_reply_flow_fails_at_load() {
        let (_, mut rules, _) = demo();
        let handoff = rules.handoff.get_or_insert_with(Default::default);
        handoff.flow_ns = Some("content20260101000000_000900".to_owned());
        let (catalog, _, tools) = demo();
        let issues = load_issues(&catalog, &rules, &tools);
        assert_eq!(
            issues,
            [ConfigIssue::new(
                "rules.json",
                "$.handoff.flowNs",
                REPLY_FLOW_RULE
            )]
        );
    }

    #[test]
    fn spec_024_verification_5_note_without_never_rendered_fails() {
        let (catalog, _, mut tools) = demo();
        tools.notes[0].never_rendered = false;
        let issues = tool_issues(&tools, &catalog);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].0, "$.notes[0].neverRendered");
    }

    #[test]
    fn spec_024_verification_5_max_length_over_500_fails() {
        let (catalog, _, mut tools) = demo();
        tools.notes[1].max_length = 501;
        assert_eq!(
            tool_issues(&tools, &catalog),
            [issue("$.notes[1].maxLength", "must be between 1 and 500")]
        );
        tools.notes[1].max_length = 500;
        assert_eq!(tool_issues(&tools, &catalog), []);
        tools.notes[1].max_length = 0;
        assert_eq!(tool_issues(&tools, &catalog).len(), 1);
    }

    #[test]
    fn spec_024_verification_5_colliding_note_field_fails() {
        let (catalog, _, tools) = demo();
        let enum_field = tools.fields[0].field.clone();

        let mut with_enum = tools.clone();
        with_enum.notes[0].field = enum_field;
        assert_eq!(
            tool_issues(&with_enum, &catalog),
            [issue(
                "$.notes[0].field",
                "must not equal any fields[].field or readable.fields[].field"
            )]
        );

        let mut with_note = tools.clone();
        with_note.notes[1].field = with_note.notes[0].field.clone();
        assert_eq!(
            tool_issues(&with_note, &catalog),
            [issue(
                "$.notes[1].field",
                "must not equal another note's field"
            )]
        );

        let mut with_readable = tools.clone();
        with_readable
            .readable
            .fields
            .push(field("source", "lead_source", &["ad"]));
        with_readable.notes[0].field = "lead_source".to_owned();
        assert_eq!(tool_issues(&with_readable, &catalog).len(), 1);

        let mut with_reply = tools;
        with_reply.notes[0].field = "ai_message".to_owned();
        assert_eq!(
            tool_issues(&with_reply, &catalog),
            [issue("$.notes[0].field", REPLY_FIELD_RULE)]
        );
    }

    #[test]
    fn system_5_1_ids_must_match_the_id_pattern() {
        let (catalog, _, mut tools) = demo();
        tools.flows[0].id = "Brochure One".to_owned();
        tools.fields[3].values[0] = "Beginner".to_owned();
        assert_eq!(
            tool_issues(&tools, &catalog),
            [
                issue("$.flows[0].id", ID_RULE),
                issue("$.fields[3].values[0]", ID_RULE)
            ]
        );
    }

    #[test]
    fn spec_024_duplicate_ids_across_lists_fail() {
        let (catalog, _, mut tools) = demo();
        tools.flows[1].id = tools.flows[0].id.clone();
        let tag_id = tools.tags[0].id.clone();
        tools.readable.tags[0].id = tag_id;
        tools.notes[0].id = tools.fields[0].id.clone();
        let paths: Vec<String> = tool_issues(&tools, &catalog)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(
            paths,
            ["$.flows[1].id", "$.readable.tags[0].id", "$.notes[0].id"]
        );
    }

    #[test]
    fn system_5_1_duplicate_offering_and_payment_option_ids_fail() {
        let (mut catalog, _, _) = demo();
        catalog.offerings[2].id = catalog.offerings[0].id.clone();
        catalog.payment_options[1].id = catalog.payment_options[0].id.clone();
        let paths: Vec<String> = super::catalog("catalog.json", &catalog)
            .into_iter()
            .map(|i| i.path)
            .collect();
        assert_eq!(paths, ["$.offerings[2].id", "$.paymentOptions[1].id"]);
    }

    #[test]
    fn system_5_1_duplicate_field_values_fail() {
        let (catalog, _, mut tools) = demo();
        let first = tools.fields[3].values[0].clone();
        tools.fields[3].values.push(first);
        let issues = tool_issues(&tools, &catalog);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert!(issues[0].0.starts_with("$.fields[3].values["));
    }

    #[test]
    fn spec_023_funnel_values_must_be_the_six_stages_in_order() {
        let (catalog, _, mut tools) = demo();
        let funnel = tools
            .fields
            .iter()
            .position(|f| f.funnel)
            .expect("demo funnel");
        tools.fields[funnel].values.swap(1, 2);
        assert_eq!(
            tool_issues(&tools, &catalog),
            [issue(
                &format!("$.fields[{funnel}].values"),
                "a funnel field's values must be exactly new, qualifying, nurturing, offered, prepared, link_sent in that order"
            )]
        );
    }

    #[test]
    fn spec_034_intent_values_are_exact_and_required_by_funnel_and_opening() {
        let (catalog, _, mut tools) = demo();
        let intent = tools
            .fields
            .iter()
            .position(|f| f.intent)
            .expect("demo intent");
        tools.fields[intent].values.reverse();
        let issues = tool_issues(&tools, &catalog);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].0, format!("$.fields[{intent}].values"));

        tools.fields.remove(intent);
        tools.flows[0].role = Some(FlowRole::Opening);
        tools.flows[0].offering = None;
        let paths: Vec<String> = tool_issues(&tools, &catalog)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        let funnel = tools
            .fields
            .iter()
            .position(|f| f.funnel)
            .expect("demo funnel");
        assert_eq!(
            paths,
            [
                "$.flows[0].role".to_owned(),
                format!("$.fields[{funnel}].funnel")
            ]
        );
    }

    #[test]
    fn system_5_1_at_most_one_of_each_role_and_flag() {
        let (catalog, _, mut tools) = demo();
        let link = tools
            .flows
            .iter()
            .position(|f| f.role == Some(FlowRole::PaymentLink))
            .expect("demo payment link");
        let mut second = tools.flows[link].clone();
        second.id = "second_link".to_owned();
        tools.flows.push(second);
        let mut intent = tools
            .fields
            .iter()
            .find(|f| f.intent)
            .cloned()
            .expect("intent");
        intent.id = "second_intent".to_owned();
        tools.fields.push(intent);
        let issues = tool_issues(&tools, &catalog);
        let last_flow = tools.flows.len() - 1;
        let last_field = tools.fields.len() - 1;
        assert_eq!(
            issues,
            [
                issue(
                    &format!("$.flows[{last_flow}].role"),
                    "at most one flow may have role payment_link"
                ),
                issue(
                    &format!("$.fields[{last_field}].intent"),
                    "at most one field may be the intent field"
                ),
            ]
        );
    }

    #[test]
    fn spec_028_offering_field_values_equal_catalog_ids() {
        let (catalog, _, mut tools) = demo();
        let at = tools
            .fields
            .iter()
            .position(|f| f.offering)
            .expect("demo offering");
        tools.fields[at].values.pop();
        assert_eq!(
            tool_issues(&tools, &catalog),
            [issue(
                &format!("$.fields[{at}].values"),
                "an offering field's values must be exactly the catalog's offering ids"
            )]
        );
        tools.fields[at].values = catalog
            .offerings
            .iter()
            .rev()
            .map(|o| o.id.clone())
            .collect();
        assert_eq!(tool_issues(&tools, &catalog), [], "order does not matter");
    }

    #[test]
    fn spec_028_flow_offering_must_be_a_catalog_offering() {
        let (catalog, _, mut tools) = demo();
        tools.flows[0].offering = Some("no-such-course".to_owned());
        assert_eq!(
            tool_issues(&tools, &catalog),
            [issue(
                "$.flows[0].offering",
                "`no-such-course` is not an offering id in the catalog"
            )]
        );
    }

    #[test]
    fn spec_032_on_stage_and_event_stage_must_be_funnel_stages() {
        let (catalog, _, mut tools) = demo();
        tools.flows[0].on_stage = Some("interested".to_owned());
        tools.events.push(crate::config::tenant::EventConfig {
            id: "lead".to_owned(),
            stage: "nurturing".to_owned(),
            flow_ns: "content20260101000000_000950".to_owned(),
        });
        let issues = tool_issues(&tools, &catalog);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].0, "$.flows[0].onStage");

        tools.fields.retain(|f| !f.funnel);
        let issues = tool_issues(&tools, &catalog);
        assert_eq!(
            issues,
            [
                issue("$.flows[0].onStage", "requires a funnel field in fields[]"),
                issue("$.events[0].stage", "requires a funnel field in fields[]"),
            ]
        );
    }

    /// 023 verification 2, 027 verification 1, 028 verification 1, 032 verification 1 and 034
    /// verification 1: each load rule of SALES 12a, one broken at a time on the demo tenant.
    #[test]
    fn spec_023_027_028_032_034_verification_1_each_sales_load_rule_fails_naming_its_path() {
        use crate::config::tenant::EventConfig;
        let event = |id: &str, stage: &str, ns: &str| EventConfig {
            id: id.to_owned(),
            stage: stage.to_owned(),
            flow_ns: ns.to_owned(),
        };
        type Edit = Box<dyn Fn(&mut ToolsConfig)>;
        let position = |tools: &ToolsConfig, f: fn(&FieldConfig) -> bool| {
            tools.fields.iter().position(f).expect("demo field")
        };
        let cases: Vec<(&str, Edit, &str, &str)> = vec![
            (
                "023: two funnel fields",
                Box::new(move |t: &mut ToolsConfig| {
                    let mut second = t.fields[position(t, |f| f.funnel)].clone();
                    second.id = "second_funnel".into();
                    second.field = "second_funnel".into();
                    t.fields.push(second);
                }),
                ".funnel",
                "at most one field may be the funnel",
            ),
            (
                "023: two payment links",
                Box::new(|t: &mut ToolsConfig| {
                    let mut second = t
                        .flows
                        .iter()
                        .find(|f| f.role == Some(FlowRole::PaymentLink))
                        .unwrap()
                        .clone();
                    second.id = "second_link".into();
                    second.flow_ns = "content20260101000000_000990".into();
                    t.flows.push(second);
                }),
                ".role",
                "at most one flow may have role payment_link",
            ),
            (
                "027: two events on one stage",
                Box::new(move |t: &mut ToolsConfig| {
                    t.events = vec![
                        event("a", "nurturing", "content20260101000000_000901"),
                        event("b", "nurturing", "content20260101000000_000902"),
                    ];
                }),
                "$.events[1].stage",
                "at most one event per stage",
            ),
            (
                "027: an event on new",
                Box::new(move |t: &mut ToolsConfig| {
                    t.events = vec![event("a", "new", "content20260101000000_000901")];
                }),
                "$.events[0].stage",
                "must not be new",
            ),
            (
                "027: an event flowNs equal to a flow's",
                Box::new(move |t: &mut ToolsConfig| {
                    let ns = t.flows[0].flow_ns.clone();
                    t.events = vec![event("a", "nurturing", &ns)];
                }),
                "$.events[0].flowNs",
                "must not equal any flows[].flowNs",
            ),
            (
                "027: an event flowNs equal to the reply flow",
                Box::new(move |t: &mut ToolsConfig| {
                    t.events = vec![event("a", "nurturing", "content20260101000000_000900")];
                }),
                "$.events[0].flowNs",
                "reply",
            ),
            (
                "027: two events on one flowNs",
                Box::new(move |t: &mut ToolsConfig| {
                    t.events = vec![
                        event("a", "nurturing", "content20260101000000_000901"),
                        event("b", "offered", "content20260101000000_000901"),
                    ];
                }),
                "$.events[1].flowNs",
                "another event's flowNs",
            ),
            (
                "027: events without a funnel field",
                Box::new(move |t: &mut ToolsConfig| {
                    t.fields.retain(|f| !f.funnel);
                    t.events = vec![event("a", "nurturing", "content20260101000000_000901")];
                }),
                "$.events[0].stage",
                "requires a funnel field",
            ),
            (
                "028: two offering fields",
                Box::new(move |t: &mut ToolsConfig| {
                    let mut second = t.fields[position(t, |f| f.offering)].clone();
                    second.id = "second_offering".into();
                    second.field = "second_offering".into();
                    t.fields.push(second);
                }),
                ".offering",
                "at most one field may be the offering field",
            ),
            (
                "028: a field both funnel and offering",
                Box::new(move |t: &mut ToolsConfig| {
                    let at = position(t, |f| f.offering);
                    t.fields[at].funnel = true;
                }),
                "$.fields",
                "only one of funnel, intent and offering",
            ),
            (
                "028: a flow offering with no offering field",
                Box::new(move |t: &mut ToolsConfig| {
                    for f in &mut t.fields {
                        f.offering = false;
                    }
                }),
                ".offering",
                "requires an offering field",
            ),
            (
                "028: an offering on the payment link",
                Box::new(|t: &mut ToolsConfig| {
                    let link = t
                        .flows
                        .iter_mut()
                        .find(|f| f.role == Some(FlowRole::PaymentLink))
                        .unwrap();
                    link.offering = Some("glaze-lab".into());
                }),
                ".offering",
                "serve every offering",
            ),
            (
                "032: an opening that is repeatable",
                Box::new(|t: &mut ToolsConfig| {
                    t.flows[0].role = Some(FlowRole::Opening);
                    t.flows[0].offering = None;
                    t.flows[0].repeatable = true;
                }),
                ".repeatable",
                "cannot be repeatable",
            ),
            (
                "032: an onStage of link_sent",
                Box::new(|t: &mut ToolsConfig| {
                    t.flows[0].on_stage = Some("link_sent".into());
                }),
                "$.flows[0].onStage",
                "must not be new or link_sent",
            ),
            (
                "032: two flows on one onStage",
                Box::new(|t: &mut ToolsConfig| {
                    t.flows[0].on_stage = Some("nurturing".into());
                    t.flows[1].on_stage = Some("nurturing".into());
                }),
                "$.flows[1].onStage",
                "at most one flow may be tied to a stage",
            ),
            (
                "032: a funnel without prepared",
                Box::new(move |t: &mut ToolsConfig| {
                    let at = position(t, |f| f.funnel);
                    t.fields[at].values.retain(|v| v != "prepared");
                }),
                ".values",
                "a funnel field's values must be exactly",
            ),
            (
                "034: a funnel field without an intent field",
                Box::new(|t: &mut ToolsConfig| {
                    t.fields.retain(|f| !f.intent);
                }),
                ".funnel",
                "requires an intent field",
            ),
            (
                "034: intent values out of order",
                Box::new(move |t: &mut ToolsConfig| {
                    let at = position(t, |f| f.intent);
                    t.fields[at].values.reverse();
                }),
                ".values",
                "an intent field's values must be exactly",
            ),
            (
                "034: a field both intent and funnel",
                Box::new(move |t: &mut ToolsConfig| {
                    let at = position(t, |f| f.intent);
                    t.fields[at].funnel = true;
                }),
                "$.fields",
                "only one of funnel, intent and offering",
            ),
            (
                "025: humanActiveTag equal to a tag",
                Box::new(|t: &mut ToolsConfig| {
                    t.nudge = Some(crate::config::tenant::NudgeConfig {
                        delays: vec![],
                        human_active_tag: Some(t.tags[0].tag.clone()),
                    });
                }),
                "$.nudge.humanActiveTag",
                "must not equal any tags[].tag",
            ),
        ];
        for (what, edit, path, rule) in cases {
            let (catalog, _, mut tools) = demo();
            edit(&mut tools);
            let issues = tool_issues(&tools, &catalog);
            assert!(
                issues
                    .iter()
                    .any(|(p, m)| p.contains(path) && m.contains(rule)),
                "{what}: {issues:?}"
            );
        }
    }

    #[test]
    fn spec_030_settle_seconds_over_30_fails() {
        let (catalog, _, mut tools) = demo();
        tools.flows[0].settle_seconds = Some(30);
        assert_eq!(tool_issues(&tools, &catalog), []);
        tools.flows[0].settle_seconds = Some(31);
        assert_eq!(
            tool_issues(&tools, &catalog),
            [issue(
                "$.flows[0].settleSeconds",
                "must be between 0 and 30"
            )]
        );
    }

    #[test]
    fn spec_025_nudge_delays_are_bounded_and_unique() {
        let (catalog, _, mut tools) = demo();
        let delay = |id: &str, minutes| NudgeDelay {
            id: id.to_owned(),
            minutes,
        };
        tools.nudge = Some(NudgeConfig {
            delays: vec![
                delay("soon", 60),
                delay("soon", 1380),
                delay("never", 0),
                delay("too_late", 1381),
            ],
            human_active_tag: None,
        });
        let paths: Vec<String> = tool_issues(&tools, &catalog)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(
            paths,
            [
                "$.nudge.delays[1].id",
                "$.nudge.delays[2].minutes",
                "$.nudge.delays[3].minutes"
            ]
        );
    }

    #[test]
    fn spec_027_duplicate_event_ids_fail() {
        let (catalog, _, mut tools) = demo();
        for (stage, flow_ns) in [
            ("offered", "content20260101000000_000951"),
            ("link_sent", "content20260101000000_000952"),
        ] {
            tools.events.push(crate::config::tenant::EventConfig {
                id: "checkout".to_owned(),
                stage: stage.to_owned(),
                flow_ns: flow_ns.to_owned(),
            });
        }
        let issues = tool_issues(&tools, &catalog);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].0, "$.events[1].id");
    }

    #[test]
    fn system_5_1_readable_fields_cannot_carry_write_flags() {
        let (catalog, _, mut tools) = demo();
        let mut readable = field("came_via", "came_via", &["ad", "referral"]);
        readable.funnel = true;
        tools.readable.fields.push(readable);
        let issues = tool_issues(&tools, &catalog);
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].0, "$.readable.fields[0]");
    }

    #[test]
    fn system_5_1_catalog_rules() {
        let (mut catalog, _, _) = demo();
        catalog.business_name = " ".to_owned();
        catalog.currency = "usd".to_owned();
        for offering in &mut catalog.offerings {
            offering.price.currency = "usd".to_owned();
        }
        catalog.offerings[0].price.amount = -1;
        catalog.offerings[1].duration_hours = Some(0.0);
        catalog.offerings[2].url = Some("http://example.com/x".to_owned());
        let paths: Vec<String> = super::catalog("catalog.json", &catalog)
            .into_iter()
            .map(|i| i.path)
            .collect();
        assert_eq!(
            paths,
            [
                "$.businessName",
                "$.currency",
                "$.offerings[0].price.amount",
                "$.offerings[1].durationHours",
                "$.offerings[2].url",
            ]
        );
    }

    #[test]
    fn system_5_1_catalog_needs_offerings_and_matching_price_currency() {
        let (mut catalog, _, _) = demo();
        catalog.offerings[1].price.currency = "EUR".to_owned();
        assert_eq!(
            super::catalog("catalog.json", &catalog),
            [ConfigIssue::new(
                "catalog.json",
                "$.offerings[1].price.currency",
                "must equal the catalog's currency"
            )]
        );
        catalog.offerings.clear();
        assert_eq!(
            super::catalog("catalog.json", &catalog),
            [ConfigIssue::new(
                "catalog.json",
                "$.offerings",
                "must list at least one offering"
            )]
        );
    }

    #[test]
    fn system_5_1_rules_bounds_are_checked() {
        let (_, mut rules, _) = demo();
        rules.messages.escalation = String::new();
        rules.confidence_threshold = 1.5;
        rules.max_turns_per_conversation = 0;
        rules.idle_reset_hours = 0;
        rules.history_days = 0;
        rules.budget.daily_token_cap = 0;
        rules.budget.daily_cost_cap_usd = 0.0;
        rules.rate_limit.turns_per_subscriber_per_hour = 0;
        rules.escalation_keywords.push("  ".to_owned());
        if let Some(trigger) = rules.opening_trigger.as_mut() {
            trigger.keywords.push(String::new());
            trigger.message = String::new();
        }
        let paths: Vec<String> = super::rules("rules.json", &rules, &ctx())
            .into_iter()
            .map(|i| i.path)
            .collect();
        let keyword = rules.escalation_keywords.len() - 1;
        let trigger_kw = rules
            .opening_trigger
            .as_ref()
            .map_or(0, |t| t.keywords.len() - 1);
        assert_eq!(
            paths,
            [
                "$.messages.escalation".to_owned(),
                "$.confidenceThreshold".to_owned(),
                "$.maxTurnsPerConversation".to_owned(),
                "$.idleResetHours".to_owned(),
                "$.historyDays".to_owned(),
                "$.rateLimit.turnsPerSubscriberPerHour".to_owned(),
                "$.budget.dailyTokenCap".to_owned(),
                "$.budget.dailyCostCapUsd".to_owned(),
                format!("$.escalationKeywords[{keyword}]"),
                format!("$.openingTrigger.keywords[{trigger_kw}]"),
                "$.openingTrigger.message".to_owned(),
            ]
        );
    }

    #[test]
    fn system_5_1_a_file_with_three_problems_gives_three_issues() {
        let (catalog, _, mut tools) = demo();
        tools.flows[0].id = "Not An Id".to_owned();
        tools.notes[0].never_rendered = false;
        tools.fields[0].field = "ai_token".to_owned();
        let (_, rules, _) = demo();
        let issues = load_issues(&catalog, &rules, &tools);
        let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "$.flows[0].id",
                "$.fields[0].field",
                "$.notes[0].neverRendered"
            ]
        );
        assert!(issues.iter().all(|i| i.file == "tools.json"));
    }

    #[test]
    fn system_5_1_note_with_a_fresh_field_is_accepted() {
        let (catalog, _, mut tools) = demo();
        tools
            .notes
            .push(note("objections", "agent_note_objections"));
        assert_eq!(tool_issues(&tools, &catalog), []);
    }
}
