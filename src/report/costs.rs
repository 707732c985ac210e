//! What the assistant cost a business in a week: per conversation, per sale and per handoff, in
//! US dollars, with the tokens behind it. A conversation is one contact's turns in the week; a
//! sale is a conversation that reached the funnel stage `link_sent` in the week (the payment
//! link was sent); a handoff is a conversation handed to a person in the week. The store sums
//! each group's turns (`Store::report_week`, [`ConversationCosts`]); this module divides.
//!
//! Pure; its own section of the table and the HTML page ([`figures`]).

use serde::Serialize;

use crate::config::Language;
use crate::store::{ConversationCosts, SalesKeys};
use crate::words::{self, Measure};

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

/// The figures this section shows, in the order the page explains them.
pub const WORDS: [Measure; 7] = [
    words::CONVERSATIONS,
    words::SALES,
    words::COST_PER_CONVERSATION,
    words::COST_PER_SALE,
    words::SPEND_PER_SALE,
    words::COST_PER_HANDOFF,
    words::CACHED_SHARE,
];

/// The section's figures for one week, as printed: each figure and its value.
pub fn figures(language: Language, m: &CostMeasures) -> Vec<(Measure, String)> {
    let count = |v: Option<i64>| v.map_or("-".into(), |v| v.to_string());
    vec![
        (words::CONVERSATIONS, m.conversations.to_string()),
        (words::SALES, count(m.sales)),
        (
            words::COST_PER_CONVERSATION,
            words::usd(language, m.cost_per_conversation_usd),
        ),
        (
            words::COST_PER_SALE,
            words::usd(language, m.cost_per_sale_usd),
        ),
        (
            words::SPEND_PER_SALE,
            words::usd(language, m.spend_per_sale_usd),
        ),
        (
            words::COST_PER_HANDOFF,
            words::usd(language, m.cost_per_handoff_usd),
        ),
        (
            words::CACHED_SHARE,
            words::percent(language, m.cached_share),
        ),
    ]
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
        let printed = |language| -> Vec<String> {
            figures(language, &m)
                .into_iter()
                .map(|(figure, value)| format!("{}: {value}", figure.name(language)))
                .collect()
        };
        assert_eq!(
            printed(Language::En),
            [
                "conversations: 8",
                "sales (payment link sent): 2",
                "AI model cost per conversation: US$ 0.25",
                "AI model cost per sale: US$ 0.38",
                "AI model spend per sale: US$ 1.00",
                "AI model cost per handoff: US$ 0.13",
                "text read again: 25.0 %",
            ]
        );
        assert_eq!(
            printed(Language::Es)[2],
            "costo del modelo de IA por conversación: 0,25 US$"
        );
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
