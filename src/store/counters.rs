//! Counters: a contact's hourly rate windows, the day's token and cost budget, the flow sends per
//! contact, and the ManyChat request bucket the replicas share (`CounterStore`).

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BudgetUsage {
    pub tokens: i64,
    pub cost_usd: f64,
}

/// What an agent turn adds to its day's budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetCharge {
    pub day: NaiveDate,
    pub tokens: i64,
    pub cost_usd: f64,
}

impl BudgetCharge {
    /// What `turn` spent (its input and output tokens and their cost), on its own day (UTC).
    pub fn of(turn: &NewTurn) -> Self {
        Self {
            day: turn.created_at.date_naive(),
            tokens: turn.input_tokens + turn.output_tokens,
            cost_usd: turn.cost_usd,
        }
    }
}

/// The rate windows, the day's budget, the flow sends and the shared ManyChat bucket.
#[async_trait]
pub trait CounterStore: Send + Sync + 'static {
    /// Per-contact rate (4): adds one to the contact's counter for the window starting at
    /// `window_start` and returns the new count.
    async fn bump_rate(
        &self,
        subscriber_id: &SubscriberId,
        window_start: DateTime<Utc>,
    ) -> Result<i64>;

    /// Per-contact rate (4): the contact's count for the window starting at `window_start`
    /// (0 when nothing was counted in it).
    async fn rate_count(
        &self,
        subscriber_id: &SubscriberId,
        window_start: DateTime<Utc>,
    ) -> Result<i64>;

    async fn budget(&self, day: NaiveDate) -> Result<BudgetUsage>;

    async fn add_budget(&self, day: NaiveDate, tokens: i64, cost_usd: f64) -> Result<()>;

    /// The model tokens (input and output) the conversation's turns created in `[from, until)`
    /// spent: one contact's share of the day, against `budget.perContactDailyTokenCap`.
    async fn contact_tokens(
        &self,
        conversation: ConversationId,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<i64>;

    /// Whether this backend keeps the ManyChat request bucket every replica shares
    /// (Postgres). SQLite serves one process, whose in-process bucket is the whole budget.
    fn shares_manychat_budget(&self) -> bool {
        false
    }

    /// Whether the database existed before this process opened it (SQLite: the file was there):
    /// a process before this one may have spent ManyChat's quota moments ago, so a bucket of
    /// this process's own starts empty.
    fn reopened(&self) -> bool {
        false
    }

    /// Takes one slot of the shared ManyChat bucket (one request every `interval`, up
    /// to `burst` back to back), timed by the database's clock: `None` when taken, else how long
    /// until one is free (nothing taken). One round trip. Only where
    /// [`CounterStore::shares_manychat_budget`].
    async fn take_manychat_slot(&self, interval: Duration, burst: u32) -> Result<Option<Duration>> {
        let _ = (interval, burst);
        Err(StoreError::Database(
            "this backend keeps no shared ManyChat budget".to_owned(),
        ))
    }

    /// Holds every replica's ManyChat requests for `wait` from now by the database's clock
    /// (ManyChat's `Retry-After`): the shared bucket's next slot (one every `interval`, up to
    /// `burst` back to back) is pushed so that none is free before then. A hold never shortens a
    /// later one. Only where [`CounterStore::shares_manychat_budget`].
    async fn hold_manychat_requests(
        &self,
        interval: Duration,
        burst: u32,
        wait: Duration,
    ) -> Result<()> {
        let _ = (interval, burst, wait);
        Err(StoreError::Database(
            "this backend keeps no shared ManyChat budget".to_owned(),
        ))
    }

    /// Counts one sendFlow for the contact at `now`, unless `per_hour` were counted in
    /// the hour before `now` (then counts nothing): whether it was counted. Atomic across
    /// replicas; counts older than an hour are removed.
    async fn count_flow_send(
        &self,
        subscriber_id: &SubscriberId,
        now: DateTime<Utc>,
        per_hour: u32,
    ) -> Result<bool>;
}
