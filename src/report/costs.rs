//! What the assistant cost a business in a week: per conversation, per sale and per handoff, in
//! US dollars, with the tokens behind it. A conversation is one contact's turns in the week; a
//! sale is a conversation that reached the funnel stage `link_sent` in the week (the payment
//! link was sent); a handoff is a conversation handed to a person in the week. The store sums
//! each group's turns (`Store::report_week`, [`ConversationCosts`]); this module divides.
//!
//! Pure; its own section of the table and the HTML page.

use std::fmt::Write as _;

use serde::Serialize;

use super::words::{Measure, measure};
use crate::store::{ConversationCosts, SalesKeys};

/// The currency every cost of the report is in: the price table's (`model::pricing`).
pub const CURRENCY: &str = "USD";

/// A week's cost measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostMeasures {
    /// Always [`CURRENCY`].
    pub currency: &'static str,
    /// Contacts with a turn in the week: the week's conversations.
    pub conversations: i64,
    /// What all their turns cost.
    pub cost_usd: f64,
    /// `cost_usd / conversations`.
    pub cost_per_conversation_usd: Option<f64>,
    /// Conversations that reached `link_sent` in the week; `None` when the tenant has no funnel
    /// field (or its config did not load).
    pub sales: Option<i64>,
    /// What the sales' own conversations cost, per sale.
    pub cost_per_sale_usd: Option<f64>,
    /// The week's whole cost per sale: every conversation's cost, the ones that bought nothing
    /// included, divided by the sales.
    pub spend_per_sale_usd: Option<f64>,
    /// Conversations handed to a person in the week.
    pub handed_off_conversations: i64,
    /// What those conversations cost, per conversation handed off.
    pub cost_per_handoff_usd: Option<f64>,
    /// The week's tokens: input (cached included), the part of it served from the provider's
    /// prompt cache, and output.
    pub input_tokens: i64,
    pub cached_tokens: i64,
    pub output_tokens: i64,
    /// `cached_tokens / input_tokens`.
    pub cached_share: Option<f64>,
}

impl CostMeasures {
    /// The measures of a week's `costs`; the sales are counted only when `keys` names a funnel
    /// field.
    pub fn of(costs: &ConversationCosts, keys: &SalesKeys) -> Self {
        let all = &costs.all;
        let sales = keys
            .funnel_field
            .is_some()
            .then_some(costs.sold.conversations);
        let per = |usd: f64, count: i64| (count > 0).then(|| usd / count as f64);
        CostMeasures {
            currency: CURRENCY,
            conversations: all.conversations,
            cost_usd: all.cost_usd,
            cost_per_conversation_usd: per(all.cost_usd, all.conversations),
            sales,
            cost_per_sale_usd: sales.and_then(|n| per(costs.sold.cost_usd, n)),
            spend_per_sale_usd: sales.and_then(|n| per(all.cost_usd, n)),
            handed_off_conversations: costs.handed_off.conversations,
            cost_per_handoff_usd: per(costs.handed_off.cost_usd, costs.handed_off.conversations),
            input_tokens: all.input_tokens,
            cached_tokens: all.cached_tokens,
            output_tokens: all.output_tokens,
            cached_share: (all.input_tokens > 0)
                .then(|| all.cached_tokens as f64 / all.input_tokens as f64),
        }
    }
}

impl Default for CostMeasures {
    fn default() -> Self {
        Self::of(&ConversationCosts::default(), &SalesKeys::default())
    }
}

pub const PER_CONVERSATION: Measure = measure(
    "cost per conversation",
    "What the AI model charged for a contact's messages that week, on average, in US dollars.",
);
pub const PER_SALE: Measure = measure(
    "cost per sale",
    "What a conversation that reached your payment link cost, on average, in US dollars.",
);
pub const SPEND_PER_SALE: Measure = measure(
    "spent per sale",
    "The week's whole AI cost divided by the conversations that reached your payment link: \
     what each sale cost, counting the conversations that bought nothing.",
);
pub const PER_HANDOFF: Measure = measure(
    "cost per handoff",
    "What a conversation handed to your team cost, on average, in US dollars.",
);
pub const CACHED_SHARE: Measure = measure(
    "text read again",
    "Of the text the AI model read, the share it had read before and charged less for (its \
     prompt cache).",
);

/// The measures this section shows, in the order the page explains them.
pub const WORDS: [&Measure; 5] = [
    &PER_CONVERSATION,
    &PER_SALE,
    &SPEND_PER_SALE,
    &PER_HANDOFF,
    &CACHED_SHARE,
];

fn usd(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| format!("{v:.4} {CURRENCY}"))
}

fn share(value: Option<f64>) -> String {
    value.map_or("-".into(), |s| format!("{:.1} %", s * 100.0))
}

fn count(value: Option<i64>) -> String {
    value.map_or("-".into(), |v| v.to_string())
}

/// The table's rows for one week.
pub fn table_rows(out: &mut String, m: &CostMeasures) {
    let row = |out: &mut String, name: &str, value: String| {
        let _ = writeln!(out, "  {name:<34} {value}");
    };
    let _ = writeln!(out, "  cost ({}):", m.currency);
    row(
        out,
        "  per conversation",
        format!(
            "{}  ({} conversations)",
            usd(m.cost_per_conversation_usd),
            m.conversations
        ),
    );
    row(
        out,
        "  per sale (link_sent)",
        format!("{}  ({} sales)", usd(m.cost_per_sale_usd), count(m.sales)),
    );
    row(
        out,
        "  spent per sale (whole week)",
        usd(m.spend_per_sale_usd),
    );
    row(
        out,
        "  per handoff",
        format!(
            "{}  ({} conversations)",
            usd(m.cost_per_handoff_usd),
            m.handed_off_conversations
        ),
    );
    row(
        out,
        "  tokens in / cached / out",
        format!(
            "{} / {} / {}",
            m.input_tokens, m.cached_tokens, m.output_tokens
        ),
    );
    row(out, "  cached share (cached / in)", share(m.cached_share));
}

/// The HTML page's table: one row per week.
pub fn html_table<'a>(
    weeks: impl Iterator<Item = (&'a str, &'a CostMeasures)>,
    esc: fn(&str) -> String,
) -> String {
    let mut out = String::from("<h2>What it cost (US dollars)</h2><table><tr><th>week</th>");
    for name in [
        "conversations",
        PER_CONVERSATION.name,
        "sales",
        PER_SALE.name,
        SPEND_PER_SALE.name,
        "handed to a person",
        PER_HANDOFF.name,
        CACHED_SHARE.name,
    ] {
        let _ = write!(out, "<th>{}</th>", esc(name));
    }
    out.push_str("</tr>");
    for (week, m) in weeks {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            esc(week),
            m.conversations,
            usd(m.cost_per_conversation_usd),
            count(m.sales),
            usd(m.cost_per_sale_usd),
            usd(m.spend_per_sale_usd),
            m.handed_off_conversations,
            usd(m.cost_per_handoff_usd),
            share(m.cached_share),
        );
    }
    out.push_str("</table>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::CostTotals;

    fn totals(conversations: i64, input: i64, cached: i64, cost_usd: f64) -> CostTotals {
        CostTotals {
            conversations,
            input_tokens: input,
            cached_tokens: cached,
            output_tokens: input / 10,
            cost_usd,
        }
    }

    fn funnel() -> SalesKeys {
        SalesKeys {
            funnel_field: Some("funnel_stage".into()),
            ..SalesKeys::default()
        }
    }

    #[test]
    fn cost_per_conversation_sale_and_handoff_divide_each_groups_cost_by_its_conversations() {
        let costs = ConversationCosts {
            all: totals(8, 4000, 1000, 2.0),
            sold: totals(2, 1000, 500, 0.75),
            handed_off: totals(4, 800, 0, 0.5),
        };
        let m = CostMeasures::of(&costs, &funnel());
        assert_eq!(m.currency, "USD");
        assert_eq!(m.cost_per_conversation_usd, Some(0.25), "2.0 over 8");
        assert_eq!(m.sales, Some(2));
        assert_eq!(
            m.cost_per_sale_usd,
            Some(0.375),
            "the sales' own 0.75 over 2"
        );
        assert_eq!(
            m.spend_per_sale_usd,
            Some(1.0),
            "the week's 2.0 over 2 sales"
        );
        assert_eq!(m.cost_per_handoff_usd, Some(0.125), "0.5 over 4");
        assert_eq!(m.cached_share, Some(0.25), "1000 of 4000 input tokens");
        let mut table = String::new();
        table_rows(&mut table, &m);
        for line in [
            "cost (USD):",
            "per conversation                 0.2500 USD  (8 conversations)",
            "per sale (link_sent)             0.3750 USD  (2 sales)",
            "spent per sale (whole week)      1.0000 USD",
            "per handoff                      0.1250 USD  (4 conversations)",
            "tokens in / cached / out         4000 / 1000 / 400",
            "cached share (cached / in)       25.0 %",
        ] {
            assert!(table.contains(line), "{line:?} in\n{table}");
        }
    }

    #[test]
    fn cost_per_sale_is_not_measured_without_a_funnel_field_nor_divided_by_no_sale() {
        let costs = ConversationCosts {
            all: totals(3, 300, 0, 0.5),
            ..ConversationCosts::default()
        };
        let bare = CostMeasures::of(&costs, &SalesKeys::default());
        assert_eq!(bare.sales, None);
        assert_eq!(bare.cost_per_sale_usd, None);
        assert_eq!(bare.spend_per_sale_usd, None);
        let no_sale = CostMeasures::of(&costs, &funnel());
        assert_eq!(no_sale.sales, Some(0));
        assert_eq!(
            no_sale.cost_per_sale_usd, None,
            "no sale: nothing to divide by"
        );
        assert_eq!(no_sale.cost_per_handoff_usd, None);
        assert_eq!(no_sale.cached_share, Some(0.0));
        assert_eq!(CostMeasures::default().cost_per_conversation_usd, None);
        assert_eq!(CostMeasures::default().cached_share, None);
    }
}
