//! The rules `rules.json` must satisfy beyond its types, including what it may not share with
//! the server's own settings (the reply flow).

use super::*;

// ---------------------------------------------------------------------------------------------
// rules.json

pub fn rules(file: &str, rules: &Rules, ctx: &ConfigContext) -> Vec<ConfigIssue> {
    let mut r = Report::new(file);
    r.non_empty(
        "$.messages.acknowledgement",
        &rules.messages.acknowledgement,
    );
    r.non_empty("$.messages.escalation", &rules.messages.escalation);
    if let Some(closer) = &rules.messages.closer {
        r.non_empty("$.messages.closer", closer);
    }
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
    if rules.burst.window_ms > Burst::MAX_WINDOW_MS {
        r.push("$.burst.windowMs", "must be between 0 and 3000");
    }
    if let Some(language) = &rules.knowledge.language
        && !matches!(language.as_str(), "en" | "es" | "pt")
    {
        r.push("$.knowledge.language", "must be en, es or pt");
    }
    if rules.budget.daily_token_cap == 0 {
        r.push("$.budget.dailyTokenCap", "must be greater than zero");
    }
    match rules.budget.per_contact_daily_token_cap {
        Some(0) => r.push(
            "$.budget.perContactDailyTokenCap",
            "must be greater than zero",
        ),
        Some(cap) if cap > rules.budget.daily_token_cap => r.push(
            "$.budget.perContactDailyTokenCap",
            "must not exceed budget.dailyTokenCap",
        ),
        _ => {}
    }
    if !(rules.budget.daily_cost_cap_usd.is_finite() && rules.budget.daily_cost_cap_usd > 0.0) {
        r.push("$.budget.dailyCostCapUsd", "must be greater than zero");
    }

    for (i, keyword) in rules.escalation_keywords.iter().enumerate() {
        // An empty keyword is a substring of every message: every turn would escalate.
        if crate::config::rules_match::fold(keyword).trim().is_empty() {
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
        r.non_empty("$.learning.convertedTag", &learning.converted_tag);
        let cap = learning.max_run_cost_usd;
        if !(cap.is_finite() && cap > 0.0) {
            r.push("$.learning.maxRunCostUsd", "must be greater than zero");
        }
    }

    if let Some(closed) = &rules.messages.escalation_closed {
        r.non_empty("$.messages.escalationClosed", closed);
    }
    if let Some(hours) = &rules.hours {
        if let Err(problems) = crate::config::hours::Schedule::parse(hours) {
            for (path, rule) in problems {
                r.push(path, rule);
            }
        }
        if rules.messages.escalation_closed.is_none() {
            r.push(
                "$.messages.escalationClosed",
                "is required with hours: the copy a handoff sends while the business is closed",
            );
        }
    }

    if let Some(handoff) = &rules.handoff {
        if handoff.hold_hours > MAX_HOLD_HOURS {
            r.push(
                "$.handoff.holdHours",
                format!("must be between 0 and {MAX_HOLD_HOURS} hours"),
            );
        }
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

/// 031: learning reads the funnel (a performed write at `offered` or later picks the cohort),
/// so a `learning` section needs a funnel field in `tools.json`. `tools` is `None` when the
/// tenant has no `tools.json`.
pub fn learning_needs_funnel(
    file: &str,
    rules: &Rules,
    tools: Option<&ToolsConfig>,
) -> Vec<ConfigIssue> {
    let mut r = Report::new(file);
    let has_funnel = tools.is_some_and(|t| t.fields.iter().any(|f| f.funnel));
    if rules.learning.is_some() && !has_funnel {
        r.push(
            "$.learning",
            "requires a funnel field in tools.json (a field with \"funnel\": true): the \
             cohort is the contacts whose funnel reached offered",
        );
    }
    r.issues
}

/// The longest hold after a handoff: a week.
const MAX_HOLD_HOURS: u32 = 168;
