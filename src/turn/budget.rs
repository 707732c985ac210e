//! The daily budget under concurrency: every model call reserves what it may spend before it
//! is sent (its input, known then, plus the output limit, priced at its worst case) and gives
//! the reservation back when it answers, its real usage counting from then until the turn's
//! charge is recorded. Real usage is priced as billed: cache reads at the cached rate, cache
//! writes at the cache-write rate (`pricing::cost_usd`); the token cap counts every input and
//! output token, cached or not. Turns
//! running at the same time so see each other's spending before it is stored.
//!
//! The check comes before each call, not once per turn: a turn is admitted while the day's
//! spend, plus what the calls in flight reserved, plus what turns in flight really used, is
//! under the cap, and a turn refused between steps escalates (reason `budget`). A call is
//! checked before its own reservation counts, so the cap can be passed by at most one call per
//! turn in flight. The ledger is per process; replicas on one database each keep their own,
//! so the cap may be passed by what the turns of each replica spend in flight, not more.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::NaiveDate;

use crate::agent::CallBudget;
use crate::config::TenantConfig;
use crate::model::{Message, ModelRequest, ToolArguments, ToolSpec, Usage};
use crate::store::BudgetUsage;

/// What the turns in flight have reserved and used today.
#[derive(Debug, Default)]
pub struct BudgetLedger {
    day: Mutex<Day>,
}

#[derive(Debug, Default)]
struct Day {
    day: Option<NaiveDate>,
    /// The worst case of the calls in flight.
    reserved: BudgetUsage,
    /// What finished calls of turns in flight really used, not yet recorded as their charge.
    used: BudgetUsage,
    /// What turns of this process charged today once they ended (they are in the store's
    /// spend from then, but a turn that read the spend earlier does not see them there).
    charged: BudgetUsage,
}

impl Day {
    /// `day`'s books, starting them afresh on a new day (yesterday's count against yesterday).
    fn on(&mut self, day: NaiveDate) -> &mut Self {
        if self.day != Some(day) {
            *self = Day {
                day: Some(day),
                ..Day::default()
            };
        }
        self
    }
}

/// The caps a turn checks against.
#[derive(Debug, Clone, Copy)]
struct Caps {
    tokens: i64,
    cost_usd: f64,
}

impl Caps {
    fn of(config: &TenantConfig) -> Self {
        let budget = &config.rules.budget;
        Self {
            tokens: i64::try_from(budget.daily_token_cap).unwrap_or(i64::MAX),
            cost_usd: budget.daily_cost_cap_usd,
        }
    }

    fn reached(self, total: BudgetUsage) -> bool {
        total.tokens >= self.tokens || total.cost_usd >= self.cost_usd
    }
}

fn plus(a: BudgetUsage, b: BudgetUsage) -> BudgetUsage {
    BudgetUsage {
        tokens: a.tokens + b.tokens,
        cost_usd: a.cost_usd + b.cost_usd,
    }
}

fn minus(a: BudgetUsage, b: BudgetUsage) -> BudgetUsage {
    BudgetUsage {
        tokens: (a.tokens - b.tokens).max(0),
        cost_usd: (a.cost_usd - b.cost_usd).max(0.0),
    }
}

/// A turn's place in the day's budget: its call in flight and what its calls used. Dropped
/// once the turn's charge is recorded (its use then counts as charged).
#[derive(Debug)]
pub struct TurnBudget {
    ledger: Arc<BudgetLedger>,
    day: NaiveDate,
    caps: Caps,
    /// The day's spend as stored when the turn read it.
    spent: BudgetUsage,
    /// The ledger's `charged` then: what ended since is added to `spent`.
    charged_before: BudgetUsage,
    model_id: Arc<str>,
    max_output_tokens: u32,
    turn: Mutex<TurnUse>,
}

#[derive(Debug, Default)]
struct TurnUse {
    /// The reservation of the call in flight.
    call: BudgetUsage,
    /// What the turn's finished calls used.
    used: BudgetUsage,
    /// The tool specs last measured, and their size: specs are shared per snapshot.
    specs: Option<(Arc<[ToolSpec]>, usize)>,
}

impl BudgetLedger {
    /// The day's books, whoever held them last (a panic elsewhere leaves them usable).
    fn books(&self) -> std::sync::MutexGuard<'_, Day> {
        self.day.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a turn on `day` unless the day's spend (`spent`, as stored) plus what the turns
    /// in flight reserved and used has reached either cap: `None` then (the budget denial).
    /// Nothing is reserved yet: each call reserves its own ([`TurnBudget::reserve`]).
    pub fn admit(
        self: &Arc<Self>,
        config: &TenantConfig,
        day: NaiveDate,
        spent: BudgetUsage,
        model_id: &str,
        max_output_tokens: u32,
    ) -> Option<TurnBudget> {
        let caps = Caps::of(config);
        let mut books = self.books();
        let books = books.on(day);
        if caps.reached(plus(spent, plus(books.reserved, books.used))) {
            return None;
        }
        Some(TurnBudget {
            ledger: self.clone(),
            day,
            caps,
            spent,
            charged_before: books.charged,
            model_id: Arc::from(model_id),
            max_output_tokens,
            turn: Mutex::new(TurnUse::default()),
        })
    }

    /// Tokens and dollars reserved by the calls in flight today.
    #[cfg(test)]
    pub fn reserved(&self, day: NaiveDate) -> BudgetUsage {
        let books = self.books();
        if books.day == Some(day) {
            books.reserved
        } else {
            BudgetUsage::default()
        }
    }
}

impl TurnBudget {
    /// A call's worst case: its input (estimated from above) and the output limit, every input
    /// token at the dearer of the input and cache-write rates (`pricing::worst_case_usd`: a cold
    /// Anthropic cache writes the whole prefix at 1.25× input), so a reservation never falls
    /// below what the call can be billed.
    fn worst_case(&self, input_tokens: u64, output_tokens: u64) -> BudgetUsage {
        BudgetUsage {
            tokens: i64::try_from(input_tokens + output_tokens).unwrap_or(i64::MAX),
            cost_usd: crate::model::pricing::worst_case_usd(
                &self.model_id,
                input_tokens,
                output_tokens,
            ),
        }
    }

    /// What a call that answered used, as billed: its input and output tokens (the token cap
    /// counts every one), and its cost with cache reads and writes at their own rates.
    fn billed(&self, usage: &Usage) -> BudgetUsage {
        BudgetUsage {
            tokens: i64::try_from(usage.total()).unwrap_or(i64::MAX),
            cost_usd: crate::model::pricing::cost_usd(&self.model_id, usage),
        }
    }

    /// Reserves a call of `input_tokens` and the output limit, unless the day's spend (as
    /// stored, plus what turns charged since it was read) and what is in flight has reached a
    /// cap: `false` then, and the call is not made.
    fn reserve_tokens(&self, input_tokens: u64) -> bool {
        let estimate = self.worst_case(input_tokens, u64::from(self.max_output_tokens));
        let mut turn = self.turn.lock().unwrap_or_else(PoisonError::into_inner);
        let mut books = self.ledger.books();
        let books = books.on(self.day);
        let spent = plus(self.spent, minus(books.charged, self.charged_before));
        if self
            .caps
            .reached(plus(spent, plus(books.reserved, books.used)))
        {
            return false;
        }
        // A call still reserved (one that never answered) is given back first.
        books.reserved = plus(minus(books.reserved, turn.call), estimate);
        turn.call = estimate;
        true
    }
}

impl CallBudget for TurnBudget {
    fn reserve(&self, request: &ModelRequest) -> bool {
        let specs = {
            let mut turn = self.turn.lock().unwrap_or_else(PoisonError::into_inner);
            match &turn.specs {
                Some((measured, bytes)) if Arc::ptr_eq(measured, &request.tools) => *bytes,
                _ => {
                    let bytes = specs_bytes(&request.tools);
                    turn.specs = Some((request.tools.clone(), bytes));
                    bytes
                }
            }
        };
        self.reserve_tokens(input_tokens(request, specs))
    }

    fn settle(&self, usage: Option<Usage>) {
        let used = usage.map_or_else(BudgetUsage::default, |u| self.billed(&u));
        let mut turn = self.turn.lock().unwrap_or_else(PoisonError::into_inner);
        let mut books = self.ledger.books();
        if books.day == Some(self.day) {
            books.reserved = minus(books.reserved, turn.call);
            books.used = plus(books.used, used);
        }
        turn.call = BudgetUsage::default();
        turn.used = plus(turn.used, used);
    }
}

impl Drop for TurnBudget {
    fn drop(&mut self) {
        let turn = self.turn.get_mut().unwrap_or_else(PoisonError::into_inner);
        let mut books = self.ledger.books();
        if books.day == Some(self.day) {
            books.reserved = minus(books.reserved, turn.call);
            books.used = minus(books.used, turn.used);
            books.charged = plus(books.charged, turn.used);
        }
    }
}

/// Tokens a request's input may take, known before it is sent: its text at about three bytes
/// a token, rounded up (an estimate from above for the languages tenants write in), and a
/// generous allowance per image.
fn input_tokens(request: &ModelRequest, specs_bytes: usize) -> u64 {
    const TOKENS_PER_IMAGE: u64 = 1_600;
    let mut bytes = request.system.len() + specs_bytes;
    let mut images = 0;
    for message in &request.messages {
        bytes += match message {
            Message::User { text } => text.len(),
            Message::Assistant {
                text,
                tool_calls,
                echo,
            } => {
                // The provider's thinking blocks or signatures go back with the step: input too.
                text.as_ref().map_or(0, String::len)
                    + tool_calls
                        .iter()
                        .map(|c| c.id.len() + c.name.len() + arguments_len(&c.arguments))
                        .sum::<usize>()
                    + echo.items().iter().map(json_len).sum::<usize>()
            }
            Message::ToolResults { results } => results
                .iter()
                .map(|r| r.call_id.len() + r.name.len() + json_len(&r.content))
                .sum(),
            Message::Images { images: list } => {
                images += list.len() as u64;
                0
            }
        };
    }
    (bytes as u64).div_ceil(3) + images * TOKENS_PER_IMAGE
}

fn arguments_len(arguments: &ToolArguments) -> usize {
    match arguments {
        ToolArguments::Valid(value) => json_len(value),
        ToolArguments::Invalid { length } => *length,
    }
}

fn specs_bytes(specs: &[ToolSpec]) -> usize {
    specs
        .iter()
        .map(|s| s.name.len() + s.description.len() + json_len(&s.parameters))
        .sum()
}

/// The length of `value` serialised (the wire carries it so).
fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(tokens: u64) -> TenantConfig {
        let mut config = crate::config::examples::demo_tenant();
        config.rules.budget.daily_token_cap = tokens;
        config.rules.budget.daily_cost_cap_usd = 1_000.0;
        config
    }

    fn day() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 12, 1).unwrap()
    }

    fn tokens(tokens: i64) -> BudgetUsage {
        BudgetUsage {
            tokens,
            cost_usd: 0.0,
        }
    }

    /// A turn admitted on `day` with `spent` stored, its calls limited to 1,000 output tokens.
    fn admit(ledger: &Arc<BudgetLedger>, config: &TenantConfig, spent: i64) -> Option<TurnBudget> {
        ledger.admit(config, day(), tokens(spent), "mock:scripted", 1_000)
    }

    fn used(input: u64, output: u64) -> Option<Usage> {
        Some(Usage {
            input_tokens: input,
            output_tokens: output,
            cached_tokens: 0,
            cache_write_tokens: 0,
        })
    }

    #[test]
    fn system_018_budget_reserves_each_call_and_refuses_only_when_spent_and_in_flight_reach_the_cap()
     {
        let ledger = Arc::new(BudgetLedger::default());
        let config = config(10_000);
        let a = admit(&ledger, &config, 0).unwrap();
        let b = admit(&ledger, &config, 0).unwrap();
        let c = admit(&ledger, &config, 0).unwrap();
        assert_eq!(
            ledger.reserved(day()),
            tokens(0),
            "admission reserves nothing"
        );
        // Each call reserves its input and the output limit: 4,000 tokens.
        assert!(a.reserve_tokens(3_000));
        assert!(b.reserve_tokens(3_000));
        assert_eq!(ledger.reserved(day()), tokens(8_000));
        // Under the cap before its own reservation: the cap is passed by this one call.
        assert!(c.reserve_tokens(3_000));
        assert!(admit(&ledger, &config, 0).is_none(), "12,000 in flight");
        // The calls answer with what they really used: 600 tokens each.
        for turn in [&a, &b, &c] {
            turn.settle(used(500, 100));
        }
        assert_eq!(ledger.reserved(day()), tokens(0));
        // 1,800 really used by turns in flight, 8,000 stored: a call still fits, then none.
        let d = admit(&ledger, &config, 8_000).unwrap();
        assert!(d.reserve_tokens(100));
        assert!(
            !d.reserve_tokens(100),
            "a second call while the first is in flight"
        );
        d.settle(used(100, 100));
        assert!(!d.reserve_tokens(100), "9,800 + 200 used");
    }

    #[test]
    fn system_018_budget_a_turn_sees_what_turns_charged_after_it_read_the_spend() {
        let ledger = Arc::new(BudgetLedger::default());
        let config = config(10_000);
        let early = admit(&ledger, &config, 0).unwrap();
        let other = admit(&ledger, &config, 0).unwrap();
        assert!(other.reserve_tokens(1_000));
        other.settle(used(8_000, 1_000));
        // The other turn's charge is recorded and its place given back: 9,000 charged, which
        // the early turn's stored spend (read as 0) does not hold.
        drop(other);
        assert!(early.reserve_tokens(500));
        early.settle(used(500, 600));
        assert!(!early.reserve_tokens(1), "9,000 charged + 1,100 used");
        drop(early);
        assert_eq!(
            ledger.reserved(day()),
            tokens(0),
            "every reservation given back"
        );
    }

    const CLAUDE: &str = "anthropic:claude-sonnet-4-5";

    /// A call of 10,000 input tokens (6,000 read from the cache, 3,000 written to it) and 500
    /// output tokens. On claude-sonnet-4-5 (input 3.00, reads 0.30, writes 3.75, output 15.00
    /// per million) it is billed 0.02355 USD; at the input rate alone it would be 0.0375.
    fn cached_call() -> Usage {
        Usage {
            input_tokens: 10_000,
            output_tokens: 500,
            cached_tokens: 6_000,
            cache_write_tokens: 3_000,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn cost_budget_a_call_with_cache_reads_and_writes_is_charged_exactly_as_billed() {
        let ledger = Arc::new(BudgetLedger::default());
        let turn = ledger
            .admit(&config(1_000_000), day(), tokens(0), CLAUDE, 1_000)
            .unwrap();
        assert!(turn.reserve_tokens(10_000));
        // Reserved at the worst case: every input token written (3.75), the output limit.
        let reserved = ledger.reserved(day()).cost_usd;
        assert!(
            close(reserved, (10_000.0 * 3.75 + 1_000.0 * 15.0) / 1e6),
            "{reserved}"
        );

        turn.settle(Some(cached_call()));

        let used = turn.turn.lock().unwrap().used;
        let billed = (1_000.0 * 3.00 + 6_000.0 * 0.30 + 3_000.0 * 3.75 + 500.0 * 15.00) / 1e6;
        assert!(
            close(used.cost_usd, billed),
            "{} != {billed}",
            used.cost_usd
        );
        assert_eq!(used.tokens, 10_500, "the token cap counts every token");
        // The turn's recorded charge is the same figure (`record::fill_usage`).
        assert!(close(
            crate::model::pricing::cost_usd(CLAUDE, &cached_call()),
            used.cost_usd
        ));
        assert_eq!(ledger.reserved(day()).cost_usd, 0.0);
    }

    #[test]
    fn cost_budget_the_daily_usd_cap_refuses_when_the_billed_cost_reaches_it() {
        let ledger = Arc::new(BudgetLedger::default());
        let mut config = config(1_000_000);
        config.rules.budget.daily_cost_cap_usd = 0.05;
        let turn = ledger
            .admit(&config, day(), tokens(0), CLAUDE, 1_000)
            .unwrap();
        assert!(turn.reserve_tokens(100));
        turn.settle(Some(cached_call()));
        // 0.02355 billed: at the input rate alone (0.0375) the next two checks would differ.
        assert!(turn.reserve_tokens(100));
        turn.settle(Some(cached_call()));
        assert!(
            turn.reserve_tokens(100),
            "0.0471 billed is under the 0.05 cap"
        );
        turn.settle(Some(cached_call()));
        assert!(!turn.reserve_tokens(100), "0.07065 billed reached the cap");
        assert!(
            ledger
                .admit(&config, day(), tokens(0), CLAUDE, 1_000)
                .is_none(),
            "nor is another turn admitted"
        );
    }

    #[test]
    fn system_018_budget_a_new_day_starts_with_nothing_reserved() {
        let ledger = Arc::new(BudgetLedger::default());
        let config = config(10_000);
        let monday = day();
        let tuesday = monday.succ_opt().unwrap();
        let on_monday = ledger
            .admit(&config, monday, tokens(0), "mock:scripted", 1_000)
            .unwrap();
        assert!(on_monday.reserve_tokens(11_000));
        let on_tuesday = ledger
            .admit(&config, tuesday, tokens(0), "mock:scripted", 1_000)
            .unwrap();
        assert!(
            on_tuesday.reserve_tokens(11_000),
            "Monday's reservation does not count on Tuesday"
        );
        // Monday's reservation given back on Tuesday does not lower Tuesday's.
        drop(on_monday);
        assert_eq!(ledger.reserved(tuesday).tokens, 12_000);
    }

    #[test]
    fn system_018_budget_a_calls_input_is_its_prompt_messages_and_tools() {
        use crate::model::ToolChoice;
        let spec = ToolSpec {
            name: "add_tag".into(),
            description: "Tag.".into(),
            parameters: serde_json::json!({"type": "object"}),
        };
        let request = ModelRequest {
            system: Arc::from("s".repeat(300)),
            messages: vec![Message::User {
                text: "u".repeat(30),
            }],
            tools: Arc::from([spec]),
            tool_choice: ToolChoice::Auto,
            output_schema: Arc::new(serde_json::json!({})),
            output_name: "agent_reply".into(),
            max_output_tokens: 1_000,
            temperature: 0.0,
            cache: Default::default(),
        };
        let specs = specs_bytes(&request.tools);
        assert_eq!(
            specs,
            "add_tag".len() + "Tag.".len() + r#"{"type":"object"}"#.len()
        );
        assert_eq!(
            input_tokens(&request, specs),
            (330 + specs as u64).div_ceil(3)
        );
        let ledger = Arc::new(BudgetLedger::default());
        let turn = admit(&ledger, &config(10_000), 0).unwrap();
        assert!(turn.reserve(&request));
        assert_eq!(
            ledger.reserved(day()).tokens,
            (330 + specs as i64 + 2) / 3 + 1_000
        );
    }
}
