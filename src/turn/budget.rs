//! The daily budget under concurrency: a turn reserves what it may spend
//! before its model call and gives the reservation back once its charge is recorded, so turns
//! running at the same time see each other's spending before it is stored. Without this, every
//! turn that started while the day's spend was under the cap ran, and a burst passed the cap
//! many times over.
//!
//! The reservation is an estimate from above (every step of the loop, each with the whole
//! prompt and the longest reply): near the cap a turn may be refused that would have fitted,
//! which is C6's side to err on. The ledger is per process; replicas on one database each keep
//! their own, so the cap may be passed by what one turn per replica spends, not more.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::NaiveDate;

use crate::config::TenantConfig;
use crate::store::BudgetUsage;

/// What the turns in flight have reserved today.
#[derive(Debug, Default)]
pub struct BudgetLedger {
    reserved: Mutex<Reserved>,
}

#[derive(Debug, Default)]
struct Reserved {
    day: Option<NaiveDate>,
    tokens: i64,
    cost_usd: f64,
}

/// A turn's reservation; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    ledger: Arc<BudgetLedger>,
    day: NaiveDate,
    estimate: BudgetUsage,
}

impl BudgetLedger {
    /// Reserves `estimate` on `day` unless the day's spend (`spent`, as stored) plus what turns
    /// in flight reserved has reached either cap: `None` then (the budget denial).
    pub fn reserve(
        self: &Arc<Self>,
        config: &TenantConfig,
        day: NaiveDate,
        spent: BudgetUsage,
        estimate: BudgetUsage,
    ) -> Option<Reservation> {
        let budget = &config.rules.budget;
        let mut reserved = self.reserved.lock().unwrap_or_else(PoisonError::into_inner);
        if reserved.day != Some(day) {
            // A new day: yesterday's reservations count against yesterday.
            *reserved = Reserved {
                day: Some(day),
                ..Reserved::default()
            };
        }
        if spent.tokens + reserved.tokens >= budget.daily_token_cap as i64
            || spent.cost_usd + reserved.cost_usd >= budget.daily_cost_cap_usd
        {
            return None;
        }
        reserved.tokens += estimate.tokens;
        reserved.cost_usd += estimate.cost_usd;
        Some(Reservation {
            ledger: self.clone(),
            day,
            estimate,
        })
    }

    /// Tokens and dollars reserved today by turns in flight.
    #[cfg(test)]
    pub fn reserved(&self, day: NaiveDate) -> BudgetUsage {
        let reserved = self.reserved.lock().unwrap_or_else(PoisonError::into_inner);
        if reserved.day == Some(day) {
            BudgetUsage {
                tokens: reserved.tokens,
                cost_usd: reserved.cost_usd,
            }
        } else {
            BudgetUsage::default()
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut reserved = self
            .ledger
            .reserved
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if reserved.day == Some(self.day) {
            reserved.tokens = (reserved.tokens - self.estimate.tokens).max(0);
            reserved.cost_usd = (reserved.cost_usd - self.estimate.cost_usd).max(0.0);
        }
    }
}

/// What one turn may spend at most: every step of the loop with the whole prompt (about three
/// bytes a token, rounded up) and the longest reply, priced at the model's rate.
pub fn estimate(model_id: &str, prompt_bytes: usize, max_output_tokens: u32) -> BudgetUsage {
    let steps = u64::from(crate::agent::MAX_STEPS);
    let input = steps * (prompt_bytes as u64).div_ceil(3);
    let output = steps * u64::from(max_output_tokens);
    let usage = crate::model::Usage {
        input_tokens: input,
        output_tokens: output,
        cached_tokens: 0,
    };
    BudgetUsage {
        tokens: (input + output) as i64,
        cost_usd: crate::model::pricing::cost_usd(model_id, &usage),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(tokens: u64) -> TenantConfig {
        let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        let context = crate::config::ConfigContext {
            allow_examples: true,
            ..Default::default()
        };
        let mut config = crate::config::load_dir(&examples, &context).expect("demo tenant loads");
        config.rules.budget.daily_token_cap = tokens;
        config.rules.budget.daily_cost_cap_usd = 1_000.0;
        config
    }

    #[test]
    fn concurrent_turns_see_each_others_reservations() {
        let ledger = Arc::new(BudgetLedger::default());
        let config = config(10_000);
        let day = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        let estimate = BudgetUsage {
            tokens: 4_000,
            cost_usd: 0.0,
        };
        let spent = BudgetUsage::default();
        // As with turns one after another, a turn may start while the day is under its cap
        // (here with 8,000 reserved), and none once the cap is reached: 12,000 reserved.
        let held: Vec<_> = (0..4)
            .map(|_| ledger.reserve(&config, day, spent, estimate))
            .collect();
        let started = held.iter().filter(|r| r.is_some()).count();
        assert_eq!(started, 3, "the fourth concurrent turn is refused");
        drop(held);
        assert_eq!(
            ledger.reserved(day).tokens,
            0,
            "every reservation given back"
        );
        // What is stored counts with what is reserved.
        let stored = BudgetUsage {
            tokens: 9_000,
            cost_usd: 0.0,
        };
        let one = ledger.reserve(&config, day, stored, estimate);
        assert!(one.is_some());
        assert!(ledger.reserve(&config, day, stored, estimate).is_none());
    }

    #[test]
    fn a_new_day_starts_with_nothing_reserved() {
        let ledger = Arc::new(BudgetLedger::default());
        let config = config(10_000);
        let monday = NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
        let tuesday = monday.succ_opt().unwrap();
        let estimate = BudgetUsage {
            tokens: 12_000,
            cost_usd: 0.0,
        };
        let on_monday = ledger.reserve(&config, monday, BudgetUsage::default(), estimate);
        assert!(on_monday.is_some());
        let on_tuesday = ledger.reserve(&config, tuesday, BudgetUsage::default(), estimate);
        assert!(
            on_tuesday.is_some(),
            "Monday's reservation does not count on Tuesday"
        );
        // Monday's reservation given back on Tuesday does not lower Tuesday's.
        drop(on_monday);
        assert_eq!(ledger.reserved(tuesday).tokens, 12_000);
    }
}
