//! Conformance: the report's aggregates (`ReportStore`), on invented weeks worked out by hand.

use super::*;

/// What [`seed_report_week`] stored that must never appear in a report.
pub struct SeededReportWeek {
    pub subscribers: Vec<SubscriberId>,
    /// Message text, a note's text and an action's error: all invented, all private.
    pub private_text: Vec<&'static str>,
}

/// A week of invented turns starting at `from` (a Monday, 00:00 UTC), with one turn the day
/// before and one the day after the week. Every expected number is worked out by hand where it
/// is asserted (`report_aggregates_group_a_period_by_hand`, tests/api/report.rs).
pub async fn seed_report_week(store: &dyn Store, from: DateTime<Utc>) -> SeededReportWeek {
    const TEXT: &str = "Invented private message text";
    const ERROR: &str = "Invented private action error";
    let day = |d: i64, hour: i64| from + chrono::Duration::days(d) + chrono::Duration::hours(hour);
    let mut subscribers = Vec::new();
    let contact = async |subscribers: &mut Vec<SubscriberId>| {
        let subscriber = fresh_subscriber();
        subscribers.push(subscriber.clone());
        store
            .conversation_for(&subscriber, "whatsapp", from - chrono::Duration::days(2))
            .await
            .expect("conversation_for")
            .id
    };
    let (a, b, c, d) = (
        contact(&mut subscribers).await,
        contact(&mut subscribers).await,
        contact(&mut subscribers).await,
        contact(&mut subscribers).await,
    );
    let agent = |id, outcome: &str, at, model: bool, reads, input, output, cost, latency| NewTurn {
        model: model.then(|| "mock:demo".to_owned()),
        reads,
        input_tokens: input,
        output_tokens: output,
        cost_usd: cost,
        latency_ms: latency,
        ..NewTurn::agent(id, TEXT, outcome, true, at)
    };
    let turns = vec![
        // A wrote the day before the week: not a new contact of the week.
        NewTurn::user(a, TEXT, true, day(-1, 12)),
        NewTurn::user(a, TEXT, true, day(0, 10)),
        NewTurn {
            actions: Some(json!([
                {"tool": "add_tag", "id": "lead", "status": "performed"},
                {"tool": "send_flow", "id": "brochure", "status": "failed", "error": ERROR},
                {"tool": "write_note", "id": "summary", "length": 42, "status": "performed"},
            ])),
            ..agent(
                a,
                "answered_inline",
                day(0, 10),
                true,
                2,
                100,
                10,
                0.5,
                1000,
            )
        },
        NewTurn::user(b, TEXT, true, day(1, 9)),
        NewTurn {
            actions: Some(
                json!([{"tool": "send_flow", "id": "brochure", "status": "dead_lettered"}]),
            ),
            ..agent(b, "deferred", day(1, 9), true, 0, 200, 20, 0.25, 5000)
        },
        NewTurn::user(b, TEXT, true, day(1, 11)),
        NewTurn {
            actions: Some(json!([])),
            escalation_reason: Some("low_confidence".into()),
            ..agent(
                b,
                "escalated_model",
                day(1, 11),
                true,
                1,
                300,
                30,
                0.125,
                3000,
            )
        },
        // C's first message was aborted: the reason is on the message, no agent turn.
        NewTurn {
            escalation_reason: Some("abort".into()),
            ..NewTurn::user(c, TEXT, true, day(1, 15))
        },
        NewTurn::user(c, TEXT, true, day(2, 8)),
        agent(
            c,
            "answered_inline",
            day(2, 8),
            true,
            1,
            100,
            10,
            0.125,
            2000,
        ),
        NewTurn::user(d, TEXT, true, day(2, 20)),
        NewTurn {
            escalation_reason: Some("escalation_keyword".into()),
            ..agent(d, "escalated_precheck", day(2, 20), false, 0, 0, 0, 0.0, 4)
        },
        // After the week.
        NewTurn::user(d, TEXT, true, day(7, 1)),
        agent(d, "answered_inline", day(7, 1), true, 9, 900, 90, 9.0, 9000),
    ];
    for turn in turns {
        record(store, turn).await;
    }
    SeededReportWeek {
        subscribers,
        private_text: vec![TEXT, ERROR],
    }
}

/// The demo tenant's sales ids (`config/tools.json.example`), as the report reads them.
pub fn demo_sales_keys() -> crate::store::SalesKeys {
    crate::store::SalesKeys {
        intent_field: Some("intent".into()),
        funnel_field: Some("funnel_stage".into()),
        offered_or_later: vec!["offered".into(), "prepared".into(), "link_sent".into()],
        prepared_or_later: vec!["prepared".into(), "link_sent".into()],
        payment_flow: Some("booking_link".into()),
    }
}

/// A week of invented sales turns starting at `from` (a Monday, 00:00 UTC) with the demo's ids,
/// one contact with history before it and one reply after it. Its week holds, by hand:
/// - contacts with a first turn: P, Q, S, T = 4 (R wrote three days before);
/// - prospects (a performed `prospect` write in the week): P, Q, R = 3 (R's first was before
///   the week and is written again in it; S's was discarded);
/// - at or past `offered`: P (offered, prepared, link_sent), Q (link_sent), R (offered) = 3;
///   at or past `prepared`: P, Q = 2;
/// - payment links performed: P once, Q twice (the first with `contactAsked`) = 3 links, 2
///   contacts, 1 by `contactAsked`; S's failed link is not sent;
/// - nudges sent: T (answered 10 h later), S (answered 25 h later: not counted), P (answered
///   11 h later, in the next week) = 3 sent, 2 answered.
pub async fn seed_sales_week(store: &dyn Store, from: DateTime<Utc>) -> Vec<SubscriberId> {
    const TEXT: &str = "Invented private message text";
    let at = |d: i64, hour: i64| from + chrono::Duration::days(d) + chrono::Duration::hours(hour);
    let mut subscribers = Vec::new();
    let mut contacts = Vec::new();
    for _ in 0..5 {
        let subscriber = fresh_subscriber();
        subscribers.push(subscriber.clone());
        let id = store
            .conversation_for(&subscriber, "whatsapp", from - chrono::Duration::days(5))
            .await
            .expect("conversation_for")
            .id;
        contacts.push(id);
    }
    let (p, q, r, s, t) = (
        contacts[0],
        contacts[1],
        contacts[2],
        contacts[3],
        contacts[4],
    );
    let user = |id, at| NewTurn::user(id, TEXT, true, at);
    let agent = |id, outcome: &str, at, actions: serde_json::Value| NewTurn {
        actions: Some(actions),
        ..NewTurn::agent(id, TEXT, outcome, true, at)
    };
    let field = |id: &str, value: &str, status: &str| json!({"tool": "set_field", "id": id, "value": value, "status": status});
    let link = |status: &str| json!({"tool": "send_flow", "id": "booking_link", "status": status});
    let asked = json!({"tool": "send_flow", "id": "booking_link", "status": "performed",
                       "contactAsked": true});
    let turns = vec![
        // R: a prospect since before the week.
        user(r, at(-3, 9)),
        agent(
            r,
            "answered_inline",
            at(-3, 9),
            json!([field("intent", "prospect", "performed")]),
        ),
        user(r, at(1, 9)),
        agent(
            r,
            "answered_inline",
            at(1, 9),
            json!([
                field("intent", "prospect", "performed"),
                field("funnel_stage", "offered", "performed")
            ]),
        ),
        // P: prospect, offered, prepared, then the link and its follow-on.
        user(p, at(0, 10)),
        agent(
            p,
            "answered_inline",
            at(0, 10),
            json!([
                field("intent", "prospect", "performed"),
                field("funnel_stage", "qualifying", "performed")
            ]),
        ),
        user(p, at(2, 10)),
        agent(
            p,
            "answered_inline",
            at(2, 10),
            json!([field("funnel_stage", "offered", "performed")]),
        ),
        user(p, at(3, 10)),
        agent(
            p,
            "deferred",
            at(3, 10),
            json!([
                field("funnel_stage", "prepared", "performed"),
                link("performed"),
                field("funnel_stage", "link_sent", "performed")
            ]),
        ),
        // Q: asks for the link at once (contactAsked), and gets it again later.
        user(q, at(1, 12)),
        agent(
            q,
            "answered_inline",
            at(1, 12),
            json!([
                field("intent", "prospect", "performed"),
                asked,
                field("funnel_stage", "link_sent", "performed")
            ]),
        ),
        user(q, at(4, 12)),
        agent(q, "answered_inline", at(4, 12), json!([link("performed")])),
        // S: not a prospect; an escalated turn discarded its prospect write; a link failed.
        user(s, at(2, 14)),
        agent(
            s,
            "answered_inline",
            at(2, 14),
            json!([field("intent", "not_prospect", "performed")]),
        ),
        user(s, at(3, 14)),
        agent(
            s,
            "escalated_model",
            at(3, 14),
            json!([field("intent", "prospect", "discarded"), link("failed")]),
        ),
        // T: writes once and answers a nudge.
        user(t, at(4, 8)),
        agent(t, "answered_inline", at(4, 8), json!([])),
        agent(t, "nudge_sent", at(4, 10), json!([])),
        agent(t, "window_closing_sent", at(4, 11), json!([])),
        user(t, at(4, 20)),
        // S answers its nudge 25 h later; P 11 h later, in the next week.
        agent(s, "nudge_sent", at(5, 10), json!([])),
        user(s, at(6, 11)),
        agent(p, "nudge_sent", at(6, 22), json!([])),
        user(p, at(7, 9)),
    ];
    for turn in turns {
        record(store, turn).await;
    }
    subscribers
}

/// A week of invented model turns starting at `from` (a Monday, 00:00 UTC) with the demo's
/// funnel field, costs in exact binary fractions. Per conversation, by hand (in / cached / out
/// tokens, USD):
/// - P, a sale: offered on Monday (1000 / 500 / 100, 0.25), then the link and `link_sent` on
///   Tuesday (1200 / 800 / 50, 0.125): 0.375. After the week, another `link_sent` turn costing
///   8.0 is not counted.
/// - Q, not a sale: its `link_sent` write failed (800 / 0 / 40, 0.5).
/// - R, handed off, not a sale this week: `link_sent` three days before the week, a complaint
///   escalated in it (600 / 200 / 20, 0.0625).
/// - S, a sale then a handoff: `link_sent` on Thursday (1000 / 400 / 60, 0.0625), a keyword
///   escalation without a model on Friday (0).
///
/// The week: 4 conversations costing 1.0 (0.25 each), 4600 / 1900 / 270 tokens; sales P and S
/// costing 0.4375; handed off R and S costing
/// 0.125.
pub async fn seed_cost_week(store: &dyn Store, from: DateTime<Utc>) -> Vec<SubscriberId> {
    const TEXT: &str = "Invented private message text";
    let at = |d: i64, hour: i64| from + chrono::Duration::days(d) + chrono::Duration::hours(hour);
    let mut subscribers = Vec::new();
    let mut contacts = Vec::new();
    for _ in 0..4 {
        let subscriber = fresh_subscriber();
        subscribers.push(subscriber.clone());
        let id = store
            .conversation_for(&subscriber, "whatsapp", from - chrono::Duration::days(5))
            .await
            .expect("conversation_for")
            .id;
        contacts.push(id);
    }
    let (p, q, r, s) = (contacts[0], contacts[1], contacts[2], contacts[3]);
    let user = |id, at| NewTurn::user(id, TEXT, true, at);
    let stage = |value: &str, status: &str| json!({"tool": "set_field", "id": "funnel_stage", "value": value, "status": status});
    let link = json!({"tool": "send_flow", "id": "booking_link", "status": "performed"});
    let model = |id, at, usage: (i64, i64, i64, f64), actions: serde_json::Value| NewTurn {
        model: Some("openai:gpt-4.1-mini".into()),
        actions: Some(actions),
        input_tokens: usage.0,
        cached_tokens: usage.1,
        output_tokens: usage.2,
        cost_usd: usage.3,
        ..NewTurn::agent(id, TEXT, "answered_inline", true, at)
    };
    let turns = vec![
        user(r, at(-3, 9)),
        model(
            r,
            at(-3, 9),
            (500, 0, 50, 4.0),
            json!([link.clone(), stage("link_sent", "performed")]),
        ),
        user(p, at(0, 10)),
        model(
            p,
            at(0, 10),
            (1000, 500, 100, 0.25),
            json!([stage("offered", "performed")]),
        ),
        user(p, at(1, 10)),
        model(
            p,
            at(1, 10),
            (1200, 800, 50, 0.125),
            json!([link.clone(), stage("link_sent", "performed")]),
        ),
        user(q, at(2, 9)),
        model(
            q,
            at(2, 9),
            (800, 0, 40, 0.5),
            json!([stage("link_sent", "failed")]),
        ),
        user(r, at(2, 15)),
        NewTurn {
            outcome: Some("escalated_model".into()),
            escalation_reason: Some("complaint".into()),
            ..model(r, at(2, 15), (600, 200, 20, 0.0625), json!([]))
        },
        user(s, at(3, 11)),
        model(
            s,
            at(3, 11),
            (1000, 400, 60, 0.0625),
            json!([link.clone(), stage("link_sent", "performed")]),
        ),
        user(s, at(4, 11)),
        NewTurn {
            escalation_reason: Some("escalation_keyword".into()),
            ..NewTurn::agent(s, TEXT, "escalated_precheck", true, at(4, 11))
        },
        user(p, at(7, 10)),
        model(
            p,
            at(7, 10),
            (9000, 0, 900, 8.0),
            json!([stage("link_sent", "performed")]),
        ),
    ];
    for turn in turns {
        record(store, turn).await;
    }
    subscribers
}

/// What a conversation, a sale and a handoff cost: the store sums each conversation's turns of
/// the period and groups them (`conversation_costs`, and `report_week` the same), by hand in
/// [`seed_cost_week`]'s comment. A sale is a performed `link_sent` write in the period.
pub async fn report_cost_per_sale_counts_conversations_that_reached_link_sent(store: &dyn Store) {
    use crate::store::{ConversationCosts, CostTotals};
    let from = Utc
        .with_ymd_and_hms(2032, 5, 3, 0, 0, 0)
        .single()
        .expect("a Monday");
    let until = from + chrono::Duration::weeks(1);
    seed_cost_week(store, from).await;
    let keys = demo_sales_keys();
    let costs = store
        .conversation_costs(from, until, &keys)
        .await
        .expect("conversation_costs");
    let totals = |conversations, input_tokens, cached_tokens, output_tokens, cost_usd| CostTotals {
        conversations,
        input_tokens,
        cached_tokens,
        output_tokens,
        cost_usd,
    };
    let expected = ConversationCosts {
        all: totals(4, 4600, 1900, 270, 1.0),
        sold: totals(2, 3200, 1700, 210, 0.4375),
        handed_off: totals(2, 1600, 600, 80, 0.125),
    };
    assert_eq!(costs, expected);
    assert_eq!(
        store
            .report_week(from, until, &keys)
            .await
            .expect("report_week")
            .costs,
        expected,
        "the report's week reads the same"
    );
    // Without a funnel field no conversation is a sale; the rest is the same.
    let bare = store
        .conversation_costs(from, until, &crate::store::SalesKeys::default())
        .await
        .expect("conversation_costs");
    assert_eq!(
        bare,
        ConversationCosts {
            sold: CostTotals::default(),
            ..expected
        }
    );
    // The week after holds P's last turn alone: a sale of its own week.
    let next = store
        .conversation_costs(until, until + chrono::Duration::weeks(1), &keys)
        .await
        .expect("conversation_costs");
    assert_eq!(next.all, totals(1, 9000, 0, 900, 8.0));
    assert_eq!(next.sold, next.all);
    assert_eq!(next.handed_off, CostTotals::default());
}

pub async fn sales_aggregates_count_a_period_by_hand(store: &dyn Store) {
    let from = Utc
        .with_ymd_and_hms(2031, 9, 1, 0, 0, 0)
        .single()
        .expect("a Monday");
    let until = from + chrono::Duration::weeks(1);
    seed_sales_week(store, from).await;
    let keys = demo_sales_keys();
    let week = store
        .sales_aggregates(from, until, &keys)
        .await
        .expect("sales_aggregates");
    // Worked out in `seed_sales_week`'s comment.
    assert_eq!(
        week,
        crate::store::SalesCounts {
            prospects: 3,
            offered: 3,
            prepared: 2,
            link_contacts: 2,
            links_sent: 3,
            links_contact_asked: 1,
            nudges_sent: 3,
            nudges_replied: 2,
            window_closings_sent: 1,
            window_closings_replied: 1,
        }
    );
    assert_eq!(
        store
            .report_aggregates(from, until)
            .await
            .expect("report_aggregates")
            .new_contacts,
        4,
        "P, Q, S and T"
    );
    // A tenant without sales fields or flows counts only nudges.
    let bare = store
        .sales_aggregates(from, until, &crate::store::SalesKeys::default())
        .await
        .expect("sales_aggregates");
    assert_eq!(
        bare,
        crate::store::SalesCounts {
            nudges_sent: 3,
            nudges_replied: 2,
            window_closings_sent: 1,
            window_closings_replied: 1,
            ..crate::store::SalesCounts::default()
        }
    );
    // The next week holds P's answer only.
    let next = store
        .sales_aggregates(until, until + chrono::Duration::weeks(1), &keys)
        .await
        .expect("sales_aggregates");
    assert_eq!(next, crate::store::SalesCounts::default());
}

/// `report_week` (what `manychat-agent report` reads per week; SQLite reads the
/// week's action records once) answers what `report_aggregates`, `sales_aggregates` and
/// `conversation_costs` answer apart, on the by-hand sales week, with and without sales ids.
pub async fn report_week_reads_what_the_two_calls_read(store: &dyn Store) {
    let from = Utc
        .with_ymd_and_hms(2031, 11, 3, 0, 0, 0)
        .single()
        .expect("a Monday");
    let until = from + chrono::Duration::weeks(1);
    seed_sales_week(store, from).await;
    for keys in [demo_sales_keys(), crate::store::SalesKeys::default()] {
        let week = store
            .report_week(from, until, &keys)
            .await
            .expect("report_week");
        let (aggregates, counts) = (week.aggregates, week.sales);
        assert_eq!(
            week.costs,
            store
                .conversation_costs(from, until, &keys)
                .await
                .expect("conversation_costs")
        );
        assert_eq!(
            aggregates,
            store
                .report_aggregates(from, until)
                .await
                .expect("report_aggregates")
        );
        assert_eq!(
            counts,
            store
                .sales_aggregates(from, until, &keys)
                .await
                .expect("sales_aggregates")
        );
    }
    let counts = store
        .report_week(from, until, &demo_sales_keys())
        .await
        .expect("report_week")
        .sales;
    assert_eq!(
        (counts.prospects, counts.links_sent),
        (3, 3),
        "the by-hand week"
    );
}

pub async fn report_aggregates_group_a_period_by_hand(store: &dyn Store) {
    // A Monday of its own, far from every other case's turns.
    let from = Utc
        .with_ymd_and_hms(2031, 6, 2, 0, 0, 0)
        .single()
        .expect("an instant");
    let until = from + chrono::Duration::weeks(1);
    seed_report_week(store, from).await;
    let week = store
        .report_aggregates(from, until)
        .await
        .expect("report_aggregates");

    assert_eq!(week.new_contacts, 3, "B, C and D; A wrote the day before");
    assert_eq!(week.inline_latencies, vec![(1000, 1), (2000, 1)]);
    let actions: Vec<(&str, &str, i64)> = week
        .actions
        .iter()
        .map(|a| (a.tool.as_str(), a.status.as_str(), a.count))
        .collect();
    let mut expected = vec![
        ("add_tag", "performed", 1),
        ("send_flow", "dead_lettered", 1),
        ("send_flow", "failed", 1),
        ("write_note", "performed", 1),
    ];
    let mut got = actions.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);

    let date = |d: u32| NaiveDate::from_ymd_opt(2031, 6, 2 + d).expect("a day");
    let mut groups: Vec<_> = week
        .turn_groups
        .iter()
        .map(|g| {
            (
                g.day,
                g.role.as_str(),
                g.outcome.clone(),
                g.escalation_reason.clone(),
                g.model_written,
                g.turns,
                g.reads,
                g.input_tokens,
                g.output_tokens,
                // Exact binary fractions, so any summation order gives these.
                (g.cost_usd * 1000.0).round() as i64,
            )
        })
        .collect();
    groups.sort();
    let s = |v: &str| Some(v.to_owned());
    let mut expected = vec![
        (date(0), "user", None, None, false, 1, 0, 0, 0, 0),
        (
            date(0),
            "agent",
            s("answered_inline"),
            None,
            true,
            1,
            2,
            100,
            10,
            500,
        ),
        (date(1), "user", None, None, false, 2, 0, 0, 0, 0),
        (date(1), "user", None, s("abort"), false, 1, 0, 0, 0, 0),
        (
            date(1),
            "agent",
            s("deferred"),
            None,
            true,
            1,
            0,
            200,
            20,
            250,
        ),
        (
            date(1),
            "agent",
            s("escalated_model"),
            s("low_confidence"),
            true,
            1,
            1,
            300,
            30,
            125,
        ),
        (date(2), "user", None, None, false, 2, 0, 0, 0, 0),
        (
            date(2),
            "agent",
            s("answered_inline"),
            None,
            true,
            1,
            1,
            100,
            10,
            125,
        ),
        (
            date(2),
            "agent",
            s("escalated_precheck"),
            s("escalation_keyword"),
            false,
            1,
            0,
            0,
            0,
            0,
        ),
    ];
    expected.sort();
    assert_eq!(groups, expected);

    // A period without turns is empty, not an error.
    let empty = store
        .report_aggregates(
            from + chrono::Duration::weeks(3),
            from + chrono::Duration::weeks(4),
        )
        .await
        .expect("report_aggregates");
    assert_eq!(empty, crate::store::ReportAggregates::default());
}

/// A write the server refused is recorded `refused` with its reason, and the report
/// counts it under that status of its own, never as `failed`.
pub async fn report_counts_refused_actions_under_their_own_status(store: &dyn Store) {
    // A Monday of its own, far from every other case's turns.
    let from = Utc
        .with_ymd_and_hms(2032, 3, 1, 0, 0, 0)
        .single()
        .expect("an instant");
    let conversation = store
        .conversation_for(&fresh_subscriber(), "whatsapp", from)
        .await
        .expect("conversation_for")
        .id;
    let at = from + chrono::Duration::hours(10);
    record(
        store,
        NewTurn::user(conversation, "Invented text", true, at),
    )
    .await;
    record(
        store,
        NewTurn {
            actions: Some(json!([
                {"tool": "send_flow", "id": "booking_link", "status": "refused", "reason": "not_prepared"},
                {"tool": "set_field", "id": "funnel_stage", "value": "new", "status": "refused", "reason": "backward_stage"},
                {"tool": "send_flow", "id": "brochure", "status": "failed", "error": "Invented error"},
            ])),
            ..NewTurn::agent(conversation, "Invented reply", "answered_inline", true, at)
        },
    )
    .await;
    let week = store
        .report_aggregates(from, from + chrono::Duration::weeks(1))
        .await
        .expect("report_aggregates");
    let mut actions: Vec<(&str, &str, i64)> = week
        .actions
        .iter()
        .map(|a| (a.tool.as_str(), a.status.as_str(), a.count))
        .collect();
    actions.sort();
    assert_eq!(
        actions,
        vec![
            ("send_flow", "failed", 1),
            ("send_flow", "refused", 1),
            ("set_field", "refused", 1),
        ]
    );
}

/// The console's test contacts (`SubscriberId::is_test_contact`) are left out of every report
/// statement: a week with a test contact doing what a real one did reads as the week without it.
pub async fn console_report_leaves_test_contacts_out(store: &dyn Store) {
    let from = Utc
        .with_ymd_and_hms(2033, 5, 2, 0, 0, 0)
        .single()
        .expect("a Monday");
    let until = from + chrono::Duration::weeks(1);
    let contact = |subscriber: SubscriberId| async move {
        let at = |s: i64| from + chrono::Duration::seconds(s);
        let c = store
            .conversation_for(&subscriber, "whatsapp", at(0))
            .await
            .expect("conversation_for");
        record(
            store,
            NewTurn::user(c.id, "Invented question", true, at(10)),
        )
        .await;
        let answer = NewTurn {
            input_tokens: 1000,
            output_tokens: 50,
            cost_usd: 0.25,
            latency_ms: 1234,
            model: Some("mock".into()),
            actions: Some(json!([
                {"tool": "set_field", "id": "intent", "value": "prospect", "status": "performed"},
                {"tool": "set_field", "id": "funnel_stage", "value": "link_sent", "status": "performed"}
            ])),
            ..NewTurn::agent(c.id, "Invented answer", "answered_inline", true, at(11))
        };
        record(store, answer).await;
        let nudge = NewTurn::agent(
            c.id,
            "Invented nudge",
            crate::store::NUDGE_SENT,
            true,
            at(60),
        );
        record(store, nudge).await;
        let handed = NewTurn {
            escalation_reason: Some("complaint".into()),
            ..NewTurn::agent(c.id, "Invented copy", "escalated", true, at(100))
        };
        record(store, handed).await;
        store
            .set_escalated(c.id, at(100))
            .await
            .expect("set_escalated");
        release(store, c.id, (at(100), at(200)), "released").await;
    };
    contact(fresh_subscriber()).await;
    let real_only = report_and_releases(store, from, until).await;
    assert_eq!(
        real_only.0.aggregates.new_contacts, 1,
        "the seeded week is read"
    );
    assert_eq!(real_only.1.len(), 1);
    contact(SubscriberId::new_test_contact()).await;
    assert_eq!(
        report_and_releases(store, from, until).await,
        real_only,
        "the test contact changes nothing"
    );
}

async fn report_and_releases(
    store: &dyn Store,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
) -> (crate::store::ReportWeek, Vec<crate::store::HoldRelease>) {
    let week = store
        .report_week(from, until, &demo_sales_keys())
        .await
        .expect("report_week");
    let releases = store
        .hold_releases(from, until)
        .await
        .expect("hold_releases");
    (week, releases)
}
