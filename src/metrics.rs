//! The process's metrics, served as OpenMetrics text at `GET /metrics` through the
//! `prometheus-client` crate (beyond SYSTEM 3.1). Every series is listed in README.md
//! ("Metrics").
//!
//! Invariants:
//! - No label carries contact data: labels are outcomes, reasons, statuses, tool names, endpoint
//!   names, status classes and kinds, each from a closed list in the code or the config's own
//!   tool names.
//! - Recording a metric never touches the store. The store's gauges (outbox backlog, today's
//!   budget use) are read when `/metrics` is scraped (`crate::http`), with bounded
//!   queries under a timeout, never on a turn.
//! - Counters count what this process saw since it started; a fleet sums them across replicas.
//!   The store's gauges describe the shared store, the same on every replica (take `max`).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

/// Every series' name starts with this.
pub const PREFIX: &str = "manychat_agent";

/// The content type `/metrics` answers with (what `prometheus-client` encodes).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How long a scrape waits for the store's gauges before it serves the last values (and counts
/// the failure).
pub const STORE_SAMPLE_TIMEOUT: Duration = Duration::from_secs(2);

/// The most backlog rows a scrape counts: past it the gauge reads this number, and the count
/// costs the same however deep the backlog is.
pub const OUTBOX_BACKLOG_COUNT_CAP: i64 = 100_000;

/// Answer time: from the message's arrival to the reply being settled. The inline path ends by
/// `RACE_DEADLINE_MS` (8 s by default), the deferred one by the abort bound (38 s).
const ANSWER_BUCKETS: [f64; 13] = [
    0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 45.0,
];
/// One model call (one step of the agent loop).
const MODEL_CALL_BUCKETS: [f64; 10] = [0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 30.0];
/// One ManyChat request, from sending it to reading its body (the limiter's wait excluded).
const MANYCHAT_BUCKETS: [f64; 9] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0];

/// The store's gauges, read once per scrape: contacts held now, the open outbox rows (counted
/// up to [`OUTBOX_BACKLOG_COUNT_CAP`]), the age of the oldest row due, and today's budget use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoreGauges {
    pub contacts_held: i64,
    pub outbox_backlog: i64,
    pub oldest_due_age_secs: f64,
    pub spent_usd: f64,
    pub spent_tokens: i64,
}

/// How a reply reached the contact, for the answer-time histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerPath {
    /// In the Dynamic Block response, within the race.
    Inline,
    /// Inline, after waiting for a flow sent during the turn to settle (030).
    Held,
    /// Through the outbox: the race was lost, or a reply was queued ahead.
    Deferred,
}

impl AnswerPath {
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerPath::Inline => "inline",
            AnswerPath::Held => "held",
            AnswerPath::Deferred => "deferred",
        }
    }
}

/// A label set of fixed names and values.
type Labels<const N: usize> = [(&'static str, &'static str); N];
/// Counters by state and reason (see [`nudge_labels`]).
type StateFamily = Family<[(&'static str, String); 2], Counter>;
type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn histograms<L: Clone + std::hash::Hash + Eq>(make: fn() -> Histogram) -> HistogramFamily<L> {
    Family::new_with_constructor(make)
}

/// The process's metrics. Cloning a metric shares it, so each is registered once and kept here
/// for the call sites.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub outbox_delivered: Counter,
    pub outbox_retried: Counter,
    pub outbox_dead_lettered: Counter,
    /// Dead-lettered replies whose contact was handed to a person.
    pub outbox_dead_letter_handoffs: Counter,
    /// Contacts answered with the escalation copy while the store could not take their turn,
    /// handed to a person directly through ManyChat.
    pub handoffs_without_store: Counter,
    /// Turns whose race was lost (or that queued behind a reply, or whose request was gone):
    /// answered through the outbox.
    pub race_lost: Counter,
    pub model_aborted: Counter,
    pub load_shed: Counter,
    pub unauthorized: Counter,
    pub rate_limited: Counter,
    pub bad_requests: Counter,
    /// Connections closed on accept: their address was at `HTTP_MAX_CONNECTIONS_PER_ADDRESS`.
    pub connections_refused: Counter,
    /// Connections closed by the header or idle timeout.
    pub connections_timed_out: Counter,
    /// Connections closed at `HTTP_MAX_CONNECTIONS` to make room: the open one longest without a
    /// complete request gave way to a new one.
    pub connections_evicted: Counter,
    /// Connections accepted past the caps and served (refused ones are not counted).
    pub connections_accepted: Counter,
    /// Requests handed to the router whose response is not yet written (or dropped).
    pub requests_in_flight: Gauge,
    /// Handoffs (tag and/or flow) ManyChat refused for good.
    pub handoff_failed: Counter,
    /// Scrapes whose store read failed or timed out (the store's gauges kept their last values).
    pub store_sample_failures: Counter,
    /// Messages a held contact sent while a person had the conversation (`crate::handoff`).
    held_messages: Counter,
    /// Pieces of a contact's message that joined an earlier piece's turn (`crate::burst`).
    burst_pieces_merged: Counter,
    /// Knowledge at scale (`crate::knowledge`): offerings and passages given to turns above the
    /// threshold, by kind (`offering`, `passage`).
    knowledge_retrieved: Family<Labels<1>, Counter>,
    /// Turns above the threshold whose search found nothing above its floor.
    knowledge_misses: Counter,
    /// Semantic search (`KNOWLEDGE_EMBEDDINGS`): embedding calls that failed or timed out, by
    /// stage (`query`: a turn's message, answered by full text alone; `catalog`: a batch of
    /// offerings and passages, retried on the next load).
    knowledge_embedding_failures: Family<Labels<1>, Counter>,
    /// Offerings and passages sent to the embedding provider (each text once per content).
    knowledge_embedded: Counter,
    /// The config in force's indexed offerings and passages that have a vector.
    knowledge_embedding_vectors: Gauge,
    /// Holds released, by reason (`hold_expired`, `tag_removed`, `released`).
    hold_releases: Family<Labels<1>, Counter>,
    /// Contacts held for a person now (read at scrape time).
    contacts_held: Gauge,
    /// Turns waiting for their contact's earlier turn or room among its turns in flight
    /// (`crate::turn::place`): they hold no slot.
    turns_waiting: Gauge,
    /// Contacts whose burst is open in this process: a first piece waiting for more pieces
    /// (`crate::burst`).
    bursts_open: Gauge,
    /// Turns by outcome (SYSTEM 4's outcome names).
    turns: Family<Labels<1>, Counter>,
    /// Escalations by reason (`crate::escalation::Escalation`).
    escalations: Family<Labels<1>, Counter>,
    /// Requests carrying a ManyChat variable that was not substituted, by body key
    /// (`subscriber_id`, `user_id`, `ai_token`).
    not_substituted: Family<Labels<1>, Counter>,
    /// The wiring problems open on this replica: by body key, the requests that showed it since
    /// the last correctly wired one (`/ready`'s details).
    not_substituted_open: Mutex<BTreeMap<&'static str, u64>>,
    /// 025: nudges by state change and reason (empty when the state has none).
    nudges: StateFamily,
    /// Actions by tool and the status they settled in.
    actions: Family<[(&'static str, String); 2], Counter>,
    /// Replies a guardrail stopped, by kind.
    guardrail_violations: Family<Labels<1>, Counter>,
    /// 013: replies that repeated an earlier agent message, by kind (`replaced`, `detected`).
    duplicate_replies: Family<Labels<1>, Counter>,
    /// 031: window-closing flows by state (`sent`, `given_up`, `lost`, `retry`, `skipped`) and
    /// reason.
    window_closings: StateFamily,
    answer_time: HistogramFamily<Labels<1>>,
    model_call_time: HistogramFamily<Labels<1>>,
    manychat_request_time: HistogramFamily<Labels<2>>,
    outbox_backlog: Gauge,
    outbox_oldest_due_age: Gauge<f64, AtomicU64>,
    budget_spent_usd: Gauge<f64, AtomicU64>,
    budget_cap_usd: Gauge<f64, AtomicU64>,
    budget_spent_tokens: Gauge,
    budget_cap_tokens: Gauge,
    /// Tokens the model calls of this process were billed, by kind ([`TOKEN_KINDS`]).
    model_tokens: Family<Labels<1>, Counter>,
    /// What the model calls of this process cost, in US dollars, at the price table's rates.
    model_cost_usd: Counter<f64, AtomicU64>,
}

/// The kinds of billed tokens `model_tokens_total` counts: `input` (every input token, cached
/// and cache-written included), `cached` (input served from the provider's prompt cache),
/// `cache_write` (input written to it) and `output` (thinking included).
pub const TOKEN_KINDS: [&str; 4] = ["input", "cached", "cache_write", "output"];

/// One model call's billed usage, as `Metrics::model_usage` counts it (this module knows no
/// model type).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BilledUsage {
    pub input_tokens: u64,
    pub cached_tokens: u64,
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
}

/// Registers each metric as it is made, and hands it back (a clone shares it).
struct Registrar(Registry);

impl Registrar {
    fn add_with<M: Metric + Clone>(&mut self, name: &str, help: &str, metric: M) -> M {
        self.0.register(name, help, metric.clone());
        metric
    }

    fn add<M: Metric + Clone + Default>(&mut self, name: &str, help: &str) -> M {
        self.add_with(name, help, M::default())
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut r = Registrar(Registry::with_prefix(PREFIX));
        // Fields are made (and registered) in the order written: the order `/metrics` lists
        // the families in.
        let metrics = Metrics {
            outbox_delivered: r.add("outbox_delivered", "Outbox rows delivered"),
            outbox_retried: r.add(
                "outbox_retried",
                "Outbox deliveries (and handoffs) that failed and were scheduled again",
            ),
            outbox_dead_lettered: r.add(
                "outbox_dead_lettered",
                "Outbox rows dead-lettered after their last attempt",
            ),
            outbox_dead_letter_handoffs: r.add(
                "outbox_dead_letter_handoffs",
                "Dead-lettered replies whose contact was handed to a person",
            ),
            handoffs_without_store: r.add(
                "handoffs_without_store",
                "Contacts handed to a person directly through ManyChat: the store could not take their turn",
            ),
            race_lost: r.add(
                "race_lost",
                "Turns answered through the outbox: the race was lost, a reply was queued ahead, or the request was gone",
            ),
            model_aborted: r.add("model_aborted", "Model calls cut at MODEL_ABORT_MS"),
            load_shed: r.add(
                "load_shed",
                "Messages escalated without a model call: MAX_TURNS_IN_FLIGHT was reached",
            ),
            unauthorized: r.add("unauthorized", "Requests refused for a wrong secret"),
            rate_limited: r.add(
                "rate_limited",
                "Requests refused by the per-address rate limit",
            ),
            bad_requests: r.add("bad_requests", "Requests refused as malformed"),
            handoff_failed: r.add("handoff_failed", "Handoffs ManyChat refused for good"),
            connections_refused: r.add(
                "connections_refused",
                "Connections closed on accept: their address was at its connection cap",
            ),
            connections_timed_out: r.add(
                "connections_timed_out",
                "Connections closed by the header or idle timeout",
            ),
            connections_evicted: r.add(
                "connections_evicted",
                "Connections closed at the connection cap: the one longest without a complete request gave way to a new one",
            ),
            connections_accepted: r.add(
                "connections_accepted",
                "Connections accepted past the connection caps and served",
            ),
            requests_in_flight: r.add(
                "requests_in_flight",
                "Requests being served now: handed to the router, their response not yet written",
            ),
            store_sample_failures: r.add(
                "store_sample_failures",
                "Scrapes whose store read failed or timed out; the store's gauges kept their last values",
            ),
            held_messages: r.add(
                "held_messages",
                "Messages from contacts held for a person, recorded and not answered",
            ),
            burst_pieces_merged: r.add(
                "burst_pieces_merged",
                "Contact messages that joined the turn of an earlier piece of the same burst (answered once, with it)",
            ),
            knowledge_retrieved: r.add(
                "knowledge_retrieved",
                "Offerings and passages given to turns above the knowledge threshold, by kind",
            ),
            knowledge_misses: r.add(
                "knowledge_misses",
                "Turns above the knowledge threshold whose search found no offering or passage",
            ),
            knowledge_embedding_failures: r.add(
                "knowledge_embedding_failures",
                "Embedding calls that failed or timed out, by stage (query: the turn used full text alone; catalog: retried on the next load)",
            ),
            knowledge_embedded: r.add(
                "knowledge_embedded",
                "Offerings and passages sent to the embedding provider (once per content)",
            ),
            knowledge_embedding_vectors: r.add(
                "knowledge_embedding_vectors",
                "Indexed offerings and passages of the config in force that have a vector",
            ),
            hold_releases: r.add(
                "hold_releases",
                "Holds for a person released, by reason (a handoff starts one: see escalations)",
            ),
            contacts_held: r.add(
                "contacts_held",
                "Contacts held for a person now (read at scrape time)",
            ),
            turns_waiting: r.add(
                "turns_waiting",
                "Turns waiting for their contact's earlier turns, holding no MAX_TURNS_IN_FLIGHT slot",
            ),
            bursts_open: r.add(
                "bursts_open",
                "Contacts whose first piece is waiting for more pieces of the same message, this process",
            ),
            turns: r.add("turns", "Turns by outcome"),
            escalations: r.add("escalations", "Escalations to a person by reason"),
            not_substituted: r.add(
                "variables_not_substituted",
                "Requests carrying a ManyChat variable that was not substituted, by body key",
            ),
            not_substituted_open: Mutex::default(),
            nudges: r.add("nudges", "Nudge state changes by state and reason"),
            actions: r.add(
                "actions",
                "Actions by tool and the status they settled in",
            ),
            guardrail_violations: r.add(
                "guardrail_violations",
                "Replies a guardrail stopped, by kind",
            ),
            duplicate_replies: r.add(
                "duplicate_replies",
                "Replies that repeated an earlier agent message, by kind (replaced by the closer, or detected and sent)",
            ),
            window_closings: r.add("window_closings", "Window-closing flows by state and reason"),
            answer_time: r.add_with(
                "answer_duration_seconds",
                "Time from a message's arrival to its reply being settled, by path",
                histograms(|| Histogram::new(ANSWER_BUCKETS)),
            ),
            model_call_time: r.add_with(
                "model_call_duration_seconds",
                "Time of one model call (one agent step), by result",
                histograms(|| Histogram::new(MODEL_CALL_BUCKETS)),
            ),
            manychat_request_time: r.add_with(
                "manychat_request_duration_seconds",
                "Time of one ManyChat API request, by endpoint and HTTP status class",
                histograms(|| Histogram::new(MANYCHAT_BUCKETS)),
            ),
            outbox_backlog: r.add(
                "outbox_backlog",
                "Outbox rows not yet delivered or dead-lettered (counted up to 100000), read at scrape time",
            ),
            outbox_oldest_due_age: r.add(
                "outbox_oldest_due_age_seconds",
                "Age of the oldest outbox row due for delivery and not delivered (0 when none), read at scrape time",
            ),
            budget_spent_usd: r.add(
                "budget_spent_usd",
                "Model cost spent today (UTC), all replicas, read at scrape time",
            ),
            budget_cap_usd: r.add(
                "budget_cap_usd",
                "The daily model cost cap (rules.json budget.dailyCostCapUsd)",
            ),
            budget_spent_tokens: r.add(
                "budget_spent_tokens",
                "Model tokens spent today (UTC), all replicas, read at scrape time",
            ),
            budget_cap_tokens: r.add(
                "budget_cap_tokens",
                "The daily model token cap (rules.json budget.dailyTokenCap)",
            ),
            model_tokens: r.add(
                "model_tokens",
                "Tokens the model calls of this process were billed, by kind: input (all of it), cached (of the input, served from the prompt cache), cache_write, output",
            ),
            model_cost_usd: r.add(
                "model_cost_usd",
                "What the model calls of this process cost, in US dollars, at the price table's rates",
            ),
            registry: r.0,
        };
        metrics.zero_series();
        metrics
    }
}

/// The turn outcomes README's metrics table documents: their series exist from the start.
const DOCUMENTED_OUTCOMES: [&str; 8] = [
    "answered_inline",
    "deferred",
    "escalated_model",
    "escalated_precheck",
    "failed_validation",
    "error",
    "answered_scripted",
    "window_closing_sent",
];

/// The escalations the server decides (`crate::escalation::Escalation`'s labels; the model's
/// own reasons appear as it gives them).
const SERVER_ESCALATIONS: [&str; 16] = [
    "escalation_keyword",
    "turn_cap",
    "rate_limit",
    "budget",
    "model",
    "low_confidence",
    "leak",
    "schema",
    "field_echo_stripped",
    "error",
    "abort",
    "load_shed",
    "wait_expired",
    "interrupted",
    "dead_lettered",
    "media_failed",
];

/// The reasons a hold for a person ends (`crate::handoff::Release`'s labels).
const HOLD_RELEASES: [&str; 3] = ["hold_expired", "tag_removed", "released"];

/// The kinds of a repeated reply (`crate::agent::duplicate::Duplicate`'s labels).
const DUPLICATES: [&str; 2] = ["replaced", "detected"];

/// The statuses an action's ManyChat attempt (or a plugin call) settles in.
const ATTEMPT_STATUSES: [&str; 2] = ["performed", "failed"];

impl Metrics {
    /// Every documented family has series from the start, at 0, so a dashboard or an alert
    /// reads 0 (not "no data") before the first turn: the outcomes, the server's escalation
    /// reasons, ManyChat attempts of each built-in action, the guardrail kinds, the answer
    /// paths, the model call results and the reply flow's `sendFlow`.
    fn zero_series(&self) {
        for kind in TOKEN_KINDS {
            let _ = self.model_tokens.get_or_create(&[("kind", kind)]);
        }
        for why in HOLD_RELEASES {
            let _ = self.hold_releases.get_or_create(&[("reason", why)]);
        }
        for kind in ["offering", "passage"] {
            let _ = self.knowledge_retrieved.get_or_create(&[("kind", kind)]);
        }
        for stage in ["query", "catalog"] {
            let _ = self
                .knowledge_embedding_failures
                .get_or_create(&[("stage", stage)]);
        }
        for field in ["subscriber_id", "user_id", "ai_token"] {
            let _ = self.not_substituted.get_or_create(&[("field", field)]);
        }
        // The series an alert or a rate reads exist from the start, at 0.
        for state in ["scheduled", "sent"] {
            let _ = self.nudges.get_or_create(&nudge_labels(state, ""));
        }
        for state in ["sent", "given_up"] {
            let _ = self.window_closings.get_or_create(&nudge_labels(state, ""));
        }
        let _ = self
            .window_closings
            .get_or_create(&nudge_labels("lost", "process_died"));
        for outcome in DOCUMENTED_OUTCOMES {
            let _ = self.turns.get_or_create(&[("outcome", outcome)]);
        }
        for reason in SERVER_ESCALATIONS {
            let _ = self.escalations.get_or_create(&[("reason", reason)]);
        }
        for tool in [
            "send_flow",
            "set_field",
            "add_tag",
            "remove_tag",
            "write_note",
        ] {
            for status in ATTEMPT_STATUSES {
                let _ = self
                    .actions
                    .get_or_create(&[("tool", tool.to_owned()), ("status", status.to_owned())]);
            }
        }
        for kind in ["schema", "field_echo", "leak", "low_confidence"] {
            let _ = self.guardrail_violations.get_or_create(&[("kind", kind)]);
        }
        for kind in DUPLICATES {
            let _ = self.duplicate_replies.get_or_create(&[("kind", kind)]);
        }
        for path in [AnswerPath::Inline, AnswerPath::Held, AnswerPath::Deferred] {
            let _ = self.answer_time.get_or_create(&[("path", path.as_str())]);
        }
        for result in ["ok", "error"] {
            let _ = self.model_call_time.get_or_create(&[("result", result)]);
        }
        let _ = self
            .manychat_request_time
            .get_or_create(&[("endpoint", "sendFlow"), ("status_class", "2xx")]);
    }

    /// Gives every `plugins.json` tool (reads and writes, by name) its `actions_total` series
    /// at 0, `performed` and `failed`, as the built-in actions have from the start. Called at
    /// each scrape with the config in force, so a tool a reload added has them too.
    pub fn plugin_tools<'a>(&self, tools: impl IntoIterator<Item = &'a str>) {
        for tool in tools {
            for status in ATTEMPT_STATUSES {
                let _ = self
                    .actions
                    .get_or_create(&[("tool", tool.to_owned()), ("status", status.to_owned())]);
            }
        }
    }

    pub fn turn(&self, outcome: &'static str) {
        self.turns.get_or_create(&[("outcome", outcome)]).inc();
    }

    /// The waiting turns' gauge, which `crate::turn::place` keeps.
    pub fn turns_waiting(&self) -> Gauge {
        self.turns_waiting.clone()
    }

    /// The open bursts' gauge, which `crate::burst::Bursts` keeps.
    pub fn bursts_open(&self) -> Gauge {
        self.bursts_open.clone()
    }

    /// A message recorded while its contact was held for a person.
    pub fn held_message(&self) {
        self.held_messages.inc();
    }

    /// A piece that joined a burst's turn (`crate::burst`).
    pub fn burst_piece_merged(&self) {
        self.burst_pieces_merged.inc();
    }

    /// A turn above the knowledge threshold: how many offerings and passages it was given, and
    /// whether its search missed.
    pub fn knowledge(&self, offerings: usize, passages: usize, miss: bool) {
        for (kind, n) in [("offering", offerings), ("passage", passages)] {
            self.knowledge_retrieved
                .get_or_create(&[("kind", kind)])
                .inc_by(n as u64);
        }
        if miss {
            self.knowledge_misses.inc();
        }
    }

    /// An embedding call that failed or timed out: `query` (a turn's message) or `catalog`.
    pub fn knowledge_embedding_failed(&self, stage: &'static str) {
        self.knowledge_embedding_failures
            .get_or_create(&[("stage", stage)])
            .inc();
    }

    /// `texts` offerings and passages embedded, and the config's documents with a vector now.
    pub fn knowledge_embedded(&self, texts: usize, ready: usize) {
        self.knowledge_embedded.inc_by(texts as u64);
        self.knowledge_embedding_vectors.set(ready as i64);
    }

    /// The embedding failures by stage: `(query, catalog)`.
    pub fn knowledge_embedding_failures(&self) -> (u64, u64) {
        let stage = |s: &'static str| {
            self.knowledge_embedding_failures
                .get_or_create(&[("stage", s)])
                .get()
        };
        (stage("query"), stage("catalog"))
    }

    /// The counts of [`Metrics::knowledge`]: offerings, passages, misses.
    pub fn knowledge_counts(&self) -> (u64, u64, u64) {
        let kind = |k: &'static str| self.knowledge_retrieved.get_or_create(&[("kind", k)]).get();
        (
            kind("offering"),
            kind("passage"),
            self.knowledge_misses.get(),
        )
    }

    pub fn hold_release(&self, why: &'static str) {
        self.hold_releases.get_or_create(&[("reason", why)]).inc();
    }

    pub fn escalation(&self, reason: &'static str) {
        self.escalations.get_or_create(&[("reason", reason)]).inc();
    }

    /// 013: a reply that repeated an earlier agent message.
    pub fn duplicate(&self, kind: &'static str) {
        self.duplicate_replies
            .get_or_create(&[("kind", kind)])
            .inc();
    }

    /// 031: a window-closing flow's state change, with its reason (`""` for none).
    pub fn window_closing(&self, state: &'static str, reason: &'static str) {
        self.window_closings
            .get_or_create(&nudge_labels(state, reason))
            .inc();
    }

    /// The count [`Metrics::window_closing`] kept for `state` and `reason`.
    pub fn window_closing_count(&self, state: &str, reason: &str) -> u64 {
        state_count(&self.window_closings, state, reason)
    }

    /// Counts a nudge's state change (025): `state` with its `reason` (`""` for none).
    pub fn nudge(&self, state: &'static str, reason: &'static str) {
        self.nudge_n(state, reason, 1);
    }

    /// Counts `n` nudges changing to `state` at once (rows marked `lost` in one statement).
    pub fn nudge_n(&self, state: &'static str, reason: &'static str, n: u64) {
        self.nudges
            .get_or_create(&nudge_labels(state, reason))
            .inc_by(n);
    }

    /// The count [`Metrics::nudge`] kept for `state` and `reason`.
    pub fn nudge_count(&self, state: &str, reason: &str) -> u64 {
        state_count(&self.nudges, state, reason)
    }

    /// Counts a request whose `field` held a literal ManyChat variable, and opens (or keeps
    /// open) that wiring problem.
    pub fn not_substituted(&self, field: &'static str) {
        self.not_substituted
            .get_or_create(&[("field", field)])
            .inc();
        if let Ok(mut open) = self.not_substituted_open.lock() {
            *open.entry(field).or_default() += 1;
        }
    }

    /// A request arrived with `field` substituted: its wiring problem, if open, is fixed (the
    /// counter keeps its history).
    pub fn substituted(&self, field: &'static str) {
        if let Ok(mut open) = self.not_substituted_open.lock() {
            open.remove(field);
        }
    }

    /// The open wiring problems, by body key, with the requests that showed each since the
    /// last correctly wired one.
    pub fn not_substituted_counts(&self) -> Vec<(&'static str, u64)> {
        self.not_substituted_open
            .lock()
            .map(|open| open.iter().map(|(f, n)| (*f, *n)).collect())
            .unwrap_or_default()
    }

    /// Counts an action that settled in `status`, where its status is decided: `performed` and
    /// `failed` per ManyChat attempt (`crate::actions::perform_one`; a retried handoff counts
    /// each attempt), the others when the turn's record is written; a plugin tool's call
    /// likewise (`crate::plugins::perform_write`, and a read's `crate::plugins::read`:
    /// `performed` when the model got its answer). `tool` is a built-in tool, a record kind or
    /// a `plugins.json` tool's name.
    /// `status` is the action's status as `turns.actions` records it.
    pub fn action(&self, tool: &str, status: &str) {
        self.actions
            .get_or_create(&[("tool", tool.to_owned()), ("status", status.to_owned())])
            .inc();
    }

    /// Counts a reply a guardrail stopped, by the guardrail's kind
    /// (`crate::escalation::EscalationCause::guardrail_kind`); a model's own escalation, a failed
    /// call or a passing reply is no violation (`None`).
    pub fn guardrail(&self, kind: Option<&'static str>) {
        if let Some(kind) = kind {
            self.guardrail_violations
                .get_or_create(&[("kind", kind)])
                .inc();
        }
    }

    /// Observes a reply's answer time on `path`.
    pub fn answered(&self, path: AnswerPath, elapsed: Duration) {
        self.answer_time
            .get_or_create(&[("path", path.as_str())])
            .observe(elapsed.as_secs_f64());
    }

    /// Observes one model call: `result` is `ok` (a response), `refused` (a response the
    /// provider refused or blocked, e.g. a Gemini safety block) or `error`.
    pub fn model_call(&self, result: &'static str, elapsed: Duration) {
        self.model_call_time
            .get_or_create(&[("result", result)])
            .observe(elapsed.as_secs_f64());
    }

    /// Counts one model call's billed tokens and cost (`crate::model::timed`, every call).
    pub fn model_usage(&self, usage: BilledUsage) {
        let [input, cached, cache_write, output] = TOKEN_KINDS;
        for (kind, tokens) in [
            (input, usage.input_tokens),
            (cached, usage.cached_tokens),
            (cache_write, usage.cache_write_tokens),
            (output, usage.output_tokens),
        ] {
            self.model_tokens
                .get_or_create(&[("kind", kind)])
                .inc_by(tokens);
        }
        if usage.cost_usd.is_finite() && usage.cost_usd > 0.0 {
            self.model_cost_usd.inc_by(usage.cost_usd);
        }
    }

    /// Observes one ManyChat request to `endpoint` (ManyChat's name for it) that got the HTTP
    /// `status`, or none (a timeout or a connection error).
    pub fn manychat_request(&self, endpoint: &'static str, status: Option<u16>, elapsed: Duration) {
        self.manychat_request_time
            .get_or_create(&[
                ("endpoint", endpoint),
                ("status_class", status_class(status)),
            ])
            .observe(elapsed.as_secs_f64());
    }

    /// Sets today's budget caps beside what was spent.
    pub fn budget_caps(&self, cost_usd: f64, tokens: u64) {
        self.budget_cap_usd.set(cost_usd);
        self.budget_cap_tokens
            .set(i64::try_from(tokens).unwrap_or(i64::MAX));
    }

    /// Sets the store's gauges as one scrape read them (`crate::http`, never on a turn).
    pub fn store_gauges(&self, gauges: StoreGauges) {
        self.contacts_held.set(gauges.contacts_held);
        self.outbox_backlog.set(gauges.outbox_backlog);
        self.outbox_oldest_due_age.set(gauges.oldest_due_age_secs);
        self.budget_spent_usd.set(gauges.spent_usd);
        self.budget_spent_tokens.set(gauges.spent_tokens);
    }

    /// The OpenMetrics text of every series.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail; a metric that could not encode would be a bug.
        if let Err(error) = encode(&mut out, &self.registry) {
            tracing::error!(error = %error, "metrics could not be encoded");
        }
        out
    }
}

/// A nudge's labels: `reason` is empty when the state has none (Prometheus reads an empty
/// label as an absent one; every series of the family keeps the same label names).
/// The count a family labelled by [`nudge_labels`] kept for `state` and `reason`.
fn state_count(family: &StateFamily, state: &str, reason: &str) -> u64 {
    family
        .get(&nudge_labels(state, reason))
        .map(|c| c.get())
        .unwrap_or_default()
}

fn nudge_labels(state: &str, reason: &str) -> [(&'static str, String); 2] {
    [("state", state.to_owned()), ("reason", reason.to_owned())]
}

/// `2xx`, `4xx`, `5xx`, … or `none` when no response came.
fn status_class(status: Option<u16>) -> &'static str {
    match status {
        Some(100..=199) => "1xx",
        Some(200..=299) => "2xx",
        Some(300..=399) => "3xx",
        Some(400..=499) => "4xx",
        Some(500..=599) => "5xx",
        Some(_) => "other",
        None => "none",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_keep_the_documented_names() {
        let metrics = Metrics::default();
        metrics.outbox_delivered.inc();
        metrics.nudge("scheduled", "");
        metrics.nudge("cancelled", "contact_replied");
        metrics.action("send_flow", "failed");
        metrics.manychat_request("sendFlow", Some(503), Duration::from_millis(120));
        metrics.model_usage(BilledUsage {
            input_tokens: 1200,
            cached_tokens: 1000,
            cache_write_tokens: 0,
            output_tokens: 40,
            cost_usd: 0.25,
        });
        let text = metrics.render();
        for line in [
            "manychat_agent_outbox_delivered_total 1",
            "manychat_agent_nudges_total{state=\"scheduled\",reason=\"\"} 1",
            "manychat_agent_nudges_total{state=\"cancelled\",reason=\"contact_replied\"} 1",
            "manychat_agent_actions_total{tool=\"send_flow\",status=\"failed\"} 1",
            "manychat_agent_manychat_request_duration_seconds_count{endpoint=\"sendFlow\",status_class=\"5xx\"} 1",
            "manychat_agent_variables_not_substituted_total{field=\"ai_token\"} 0",
            "manychat_agent_model_tokens_total{kind=\"input\"} 1200",
            "manychat_agent_model_tokens_total{kind=\"cached\"} 1000",
            "manychat_agent_model_tokens_total{kind=\"cache_write\"} 0",
            "manychat_agent_model_tokens_total{kind=\"output\"} 40",
            "manychat_agent_model_cost_usd_total 0.25",
            "# EOF",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        // Strict OpenMetrics, a family's series with and without `reason` included.
        openmetrics_parser::openmetrics::parse_openmetrics(&text)
            .unwrap_or_else(|e| panic!("not OpenMetrics ({e:?}):\n{text}"));
        assert_eq!(metrics.nudge_count("cancelled", "contact_replied"), 1);
        assert_eq!(metrics.nudge_count("scheduled", ""), 1);
        assert_eq!(metrics.nudge_count("sent", ""), 0);
    }

    /// The label lists the zero series start from are the domain's own labels (this module
    /// knows none of the domain's types; the test does).
    #[test]
    fn zero_series_carry_the_labels_the_domain_counts_under() {
        use crate::actions::ActionStatus;
        use crate::agent::duplicate::Duplicate;
        use crate::escalation::Escalation;
        use crate::handoff::Release;

        let server = [
            Escalation::Keyword,
            Escalation::TurnCap,
            Escalation::RateLimit,
            Escalation::Budget,
            Escalation::Model(None),
            Escalation::LowConfidence,
            Escalation::Leak,
            Escalation::Schema,
            Escalation::FieldEcho,
            Escalation::Error,
            Escalation::Aborted,
            Escalation::LoadShed,
            Escalation::WaitExpired,
            Escalation::Interrupted,
            Escalation::DeadLettered,
            Escalation::MediaFailed,
        ];
        assert_eq!(server.map(Escalation::as_str), SERVER_ESCALATIONS);
        assert_eq!(Release::ALL.map(Release::as_str), HOLD_RELEASES);
        assert_eq!(
            [Duplicate::Replaced, Duplicate::Detected].map(Duplicate::kind),
            DUPLICATES
        );
        assert_eq!(
            [ActionStatus::Performed, ActionStatus::Failed].map(ActionStatus::label),
            ATTEMPT_STATUSES
        );
    }
}
