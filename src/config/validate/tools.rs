//! The rules `tools.json` must satisfy beyond its types: flows, tags, fields, notes, the nudge
//! and events, and the cross-file checks against the catalog's offering ids and the server's
//! reply flow, reply field and token field.

use super::*;

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
        flow_ids.id(&mut r, format!("{at}.id"), &flow.id, "among flows");
        r.non_empty(format!("{at}.flowNs"), &flow.flow_ns);
        if reply_flow.is_some_and(|reply| reply == flow.flow_ns.trim()) {
            r.push(format!("{at}.flowNs"), REPLY_FLOW_RULE);
        }
        r.text(
            format!("{at}.description"),
            &flow.description,
            MAX_DESCRIPTION_CHARS,
        );
        match flow.role {
            Some(FlowRole::PaymentLink) => {
                let rule = "at most one flow may have role payment_link";
                at_most_one(&mut r, format!("{at}.role"), &mut payment_links, rule);
            }
            Some(FlowRole::Opening) => {
                let rule = "at most one flow may have role opening";
                at_most_one(&mut r, format!("{at}.role"), &mut openings, rule);
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
            tag_ids.id(
                &mut r,
                format!("{at}.id"),
                &tag.id,
                "across tags and readable.tags",
            );
            r.non_empty(format!("{at}.tag"), &tag.tag);
            r.text(
                format!("{at}.description"),
                &tag.description,
                MAX_DESCRIPTION_CHARS,
            );
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
            field_ids.id(&mut r, format!("{at}.id"), &field.id, id_scope);
            r.non_empty(format!("{at}.field"), &field.field);
            check_server_fields(&mut r, format!("{at}.field"), &field.field, ctx);
            r.text(
                format!("{at}.description"),
                &field.description,
                MAX_DESCRIPTION_CHARS,
            );
            // 028: the offering field may leave its values to the catalog.
            if !(field.offering && writable && field.values.is_empty()) {
                check_values(&mut r, &at, &field.values);
            }

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
                let rule = "at most one field may be the funnel";
                at_most_one(&mut r, format!("{at}.funnel"), &mut funnels, rule);
                values_exactly(&mut r, &at, &field.values, &FUNNEL_STAGES, |stages| {
                    format!("a funnel field's values must be exactly {stages} in that order")
                });
                if intent_field.is_none() {
                    r.push(
                        format!("{at}.funnel"),
                        "a funnel field requires an intent field in fields[]",
                    );
                }
            }
            if field.intent {
                let rule = "at most one field may be the intent field";
                at_most_one(&mut r, format!("{at}.intent"), &mut intents, rule);
                values_exactly(&mut r, &at, &field.values, &INTENT_VALUES, |values| {
                    format!("an intent field's values must be exactly {values}")
                });
            }
            if field.offering {
                let rule = "at most one field may be the offering field";
                at_most_one(&mut r, format!("{at}.offering"), &mut offerings, rule);
                if let Some(ids) = offering_ids.as_ref().filter(|_| !field.values.is_empty()) {
                    let values: HashSet<&str> = field.values.iter().map(String::as_str).collect();
                    let catalog_ids: HashSet<&str> = ids.iter().copied().collect();
                    if values != catalog_ids {
                        let listed = |ids: Vec<&str>| match ids.is_empty() {
                            true => None,
                            false => Some(ids.join(", ")),
                        };
                        let missing = listed(
                            ids.iter()
                                .copied()
                                .filter(|id| !values.contains(id))
                                .collect(),
                        );
                        let extra = listed(
                            field
                                .values
                                .iter()
                                .map(String::as_str)
                                .filter(|value| !catalog_ids.contains(value))
                                .collect(),
                        );
                        let which = [
                            missing.map(|ids| format!("missing {ids}")),
                            extra.map(|ids| format!("not in the catalog: {ids}")),
                        ];
                        let which: Vec<String> = which.into_iter().flatten().collect();
                        r.push(
                            format!("{at}.values"),
                            format!(
                                "an offering field's values must be exactly the catalog's offering \
                                 ids ({})",
                                which.join("; ")
                            ),
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
        field_ids.id(&mut r, format!("{at}.id"), &note.id, id_scope);
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
        r.text(
            format!("{at}.description"),
            &note.description,
            MAX_DESCRIPTION_CHARS,
        );
    }

    // nudge (025).
    if let Some(nudge) = &tools.nudge {
        let mut delay_ids = Unique::new();
        for (i, delay) in nudge.delays.iter().enumerate() {
            let at = format!("$.nudge.delays[{i}]");
            delay_ids.id(&mut r, format!("{at}.id"), &delay.id, "among nudge delays");
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
        event_ids.id(&mut r, format!("{at}.id"), &event.id, "among events");
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

    // 031: the window-closing flow is checked as a flow is, and is none of the model's flows.
    if let Some(closing) = &tools.window_closing {
        let at = "$.windowClosing.flowNs";
        r.non_empty(at, &closing.flow_ns);
        if reply_flow.is_some_and(|reply| reply == closing.flow_ns.trim()) {
            r.push(at, REPLY_FLOW_RULE);
        }
        if tools
            .flows
            .iter()
            .any(|f| f.flow_ns.trim() == closing.flow_ns.trim())
        {
            r.push(at, "must not equal any flows[].flowNs");
        }
    }

    r.issues
}

/// The collisions of 012 and 024 with the fields the server itself writes.
/// A role only one entry may have (a flow's payment_link or opening; a field's funnel, intent
/// or offering): `seen` counts the entries that had it so far, and the second and any later one
/// are refused at `path` with `rule`.
fn at_most_one(r: &mut Report<'_>, path: String, seen: &mut usize, rule: &str) {
    *seen += 1;
    if *seen > 1 {
        r.push(path, rule);
    }
}

/// A marked field's values are exactly `expected`, in its order; otherwise `rule`, given the
/// expected list, is refused at `{at}.values`.
fn values_exactly(
    r: &mut Report<'_>,
    at: &str,
    values: &[String],
    expected: &[&str],
    rule: impl FnOnce(String) -> String,
) {
    if values != expected {
        r.push(format!("{at}.values"), rule(expected.join(", ")));
    }
}

pub(super) fn check_server_fields(
    r: &mut Report<'_>,
    path: String,
    field: &str,
    ctx: &ConfigContext,
) {
    if same_name(field, &ctx.reply_field) {
        r.push(path.clone(), REPLY_FIELD_RULE);
    }
    if same_name(field, &ctx.token_field) {
        r.push(path.clone(), TOKEN_FIELD_RULE);
    }
    if ctx.handshake_fields.iter().any(|h| same_name(field, h)) {
        r.push(path, HANDSHAKE_FIELD_RULE);
    }
}

/// An enum field's values are ids: the model names them, and get_contact returns them outside
/// the fence (024), so each must be an identifier by construction.
pub(super) fn check_values(r: &mut Report<'_>, at: &str, values: &[String]) {
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
