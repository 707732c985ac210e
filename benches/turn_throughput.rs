//! The service's own cost per turn (issue: performance), measured, not asserted.
//!
//! Runs, in one process and one run: (1) a bare axum handler that returns the same Dynamic
//! Block JSON, and (2) the real app on SQLite with an instant model, every turn durably
//! recorded. Both are driven through real HTTP on loopback at each of a few fixed
//! concurrencies, in rounds (bare handler and turn alternating in slices). Prints requests per
//! second, p50/p99 latency and CPU per request for each, the ratio per round, and the median
//! round per concurrency, for docs/PERFORMANCE.md; then checks that the database holds every
//! answered turn's message and reply.
//!
//! The concurrencies say different things. The bare handler saturates the machine at 8 and
//! stays there; the turn does not: at 8 each client waits for its turn's commit (one fsync per
//! group of writes), so its throughput is 8 / latency, not the machine's capacity. From 32 the
//! turn saturates too, and the ratio there compares what each costs at full load.
//!
//! The new-contact phase runs beside them, on an app of its own: every request is a contact's
//! first message (a conversation created, a token issued and written to ManyChat).
//!
//! Every other contact has written once before anything is measured (and its first-contact token
//! write has settled), so the measured turns are those of returning contacts: the steady state
//! of a running service. The tenant's daily budget is lifted and contacts are many enough that
//! no turn stops at the turn cap or the hourly rate: every measured turn reaches the model.
//! CPU per request is the whole process's (client included); `db` is the SQLite thread's share.
//!
//! Then, at the first concurrency: the tool turn (three staged writes) against the plain turn;
//! the plain turn of the selling demo tenant against that of a tenant that does not sell and the
//! bare handler, in alternated rounds; and, paced under ManyChat's 10 requests per second on a
//! fake ManyChat that answers in 50 ms, the answer time (p50, p95) of a turn that sends one flow
//! during the turn and of the sales turn (intent, stage, one flow), each beside the plain turn
//! of the same app.
//!
//! Run: `cargo bench --bench turn_throughput` (optionally, with their defaults,
//! `BENCH_REQUESTS=8000 BENCH_CONCURRENCY=8,32,64 BENCH_ROUNDS=3 BENCH_SLICES=8
//! BENCH_PACED_PAIRS=120`; `BENCH_TOOLS=0` stops after the plain turns, e.g. for profiling;
//! `BENCH_DATABASE=memory` runs the apps on an in-memory database, the ceiling of the durable
//! file, for comparison only).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::Router;
use axum::routing::post;
use manychat_agent::model::{
    Message, Model, ModelError, ModelRequest, ModelResponse, StopReason, ToolArguments, ToolCall,
    Usage,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

mod common;
use common::{SECRET, address_of, env_usize, final_reply, listed_rounds, run, serve};

/// An instant model. `Tools`: its first step stages three writes (a tag, a field, a note),
/// performed after the response, and its second answers. `Read`: its first step reads the
/// contact, its second answers. `Sales`: to a message asking for the tour ([`TOUR_TEXT`]), its
/// first step records intent, moves the funnel stage and sends a flow (the intent gate,
/// the funnel floor and the flow decision, against the contact's records; 029: the flow goes
/// during the turn), its second answers; to any other message it answers at once. `Flow`: the
/// same, with the flow alone. The turns with tools are turns of two model steps.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Plain,
    Tools,
    Read,
    Sales,
    Flow,
}

/// The plain turn's message.
const PLAIN_TEXT: &str = "When are classes?";

/// The message that makes a `Sales` or `Flow` model send the tour flow.
const TOUR_TEXT: &str = "Can I see the studio first?";

/// Whether the contact's message is [`TOUR_TEXT`] (each paced contact writes once, so the
/// prompt holds no earlier message).
fn asks_for_the_tour(request: &ModelRequest) -> bool {
    request
        .messages
        .iter()
        .any(|m| matches!(m, Message::User { text } if text.contains(TOUR_TEXT)))
}

struct InstantModel {
    kind: Kind,
}

#[async_trait]
impl Model for InstantModel {
    fn id(&self) -> &str {
        "mock:instant"
    }
    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let first_step = !request
            .messages
            .iter()
            .any(|m| matches!(m, Message::ToolResults { .. }));
        if self.kind == Kind::Read && first_step {
            return Ok(tool_step(
                vec![ToolCall {
                    id: "1".into(),
                    name: "get_contact".into(),
                    arguments: ToolArguments::Valid(json!({})),
                }],
                20,
            ));
        }
        let call = |id: &str, name: &str, arguments: Value| ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: ToolArguments::Valid(arguments),
        };
        let set_field = |id: &str, field: &str, value: &str| {
            call(id, "set_field", json!({"field": field, "value": value}))
        };
        let tour = || {
            call(
                "3",
                "send_flow",
                json!({"flow": "studio_tour", "contactAsked": false}),
            )
        };
        if matches!(self.kind, Kind::Sales | Kind::Flow)
            && first_step
            && !request.tools.is_empty()
            && asks_for_the_tour(request)
        {
            let tool_calls = match self.kind {
                Kind::Sales => vec![
                    set_field("1", "intent", "prospect"),
                    set_field("2", "funnel_stage", "qualifying"),
                    tour(),
                ],
                _ => vec![tour()],
            };
            return Ok(tool_step(tool_calls, 60));
        }
        if self.kind == Kind::Tools && first_step && !request.tools.is_empty() {
            // No flow: since 029 a flow is sent during the turn, through the 10-per-second
            // limiter, which would pace this phase instead of measuring it (the flow's own
            // cost is the paced phase's).
            return Ok(tool_step(
                vec![
                    call("1", "add_tag", json!({"tag": "interested_wheel"})),
                    set_field("2", "clay_experience", "none"),
                    call(
                        "3",
                        "write_note",
                        json!({"note": "goal", "text": "Wants to try the wheel."}),
                    ),
                ],
                60,
            ));
        }
        Ok(final_reply(Usage {
            input_tokens: 1200,
            output_tokens: 40,
            cached_tokens: 1000,
            cache_write_tokens: 0,
        }))
    }
}

/// A step that asks for `tool_calls`, billed as the instant model's steps are.
fn tool_step(tool_calls: Vec<ToolCall>, output_tokens: u64) -> ModelResponse {
    ModelResponse {
        tool_calls,
        output: None,
        usage: Usage {
            input_tokens: 1200,
            output_tokens,
            cached_tokens: 1000,
            cache_write_tokens: 0,
        },
        stop: StopReason::ToolCalls,
        echo: Default::default(),
    }
}

fn block() -> Value {
    json!({"version": "v2", "content": {"type": "whatsapp",
        "messages": [{"type": "text", "text": "Classes run on weekday evenings."}],
        "actions": [], "external_message_callback": {"url": "https://bench.example.test/v1/channels/manychat/message",
        "method": "post", "headers": {"Authorization": format!("Bearer {SECRET}")},
        "payload": {"text": "{{last_input_text}}", "subscriber_id": "{{contact.id}}", "ai_token": "{{ai_token}}"},
        "timeout": 86400}}})
}

struct Measured {
    /// Requests answered.
    requests: usize,
    rps: f64,
    p50: Duration,
    p99: Duration,
    /// Process CPU time (user + system) per request, client included.
    cpu_per_request: Duration,
    /// CPU time of the SQLite database thread per request (zero for the bare handler).
    db_cpu_per_request: Duration,
    /// Bytes this process caused to be written to the disk, per request (`write_bytes` of
    /// /proc/self/io: what the kernel's writeback sent for this process's files).
    disk_bytes_per_request: u64,
}

/// Contacts each client worker cycles over: enough that, at 8000 requests per line and three
/// rounds at each of 8, 32 and 64, no contact reaches the demo tenant's turn cap (25) or
/// hourly rate (60) over the warm-up and every round it is measured in (about 18 messages for
/// the busiest contacts, those of the first eight workers).
const CONTACTS_PER_WORKER: usize = 300;

fn subscriber(worker: usize, n: usize) -> usize {
    100_000 + worker * 1000 + n % CONTACTS_PER_WORKER
}

/// A contact never seen before: worker `worker`'s `n`-th new contact (ids from 10 000 000, far
/// from every other phase's).
fn new_contact(worker: usize, n: usize) -> usize {
    10_000_000 + worker * 100_000 + n
}

/// CPU time (user + system) this process has used so far, from /proc/self/stat (Linux).
fn cpu_time() -> Duration {
    stat_cpu(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default())
}

/// CPU time used so far by this process's threads named `sqlite` (the store's database
/// thread; every app the benchmark starts has one).
fn db_cpu_time() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm")).is_ok_and(|c| c.trim() == "sqlite")
        })
        .map(|task| {
            stat_cpu(&std::fs::read_to_string(task.path().join("stat")).unwrap_or_default())
        })
        .sum()
}

/// Bytes this process has caused to be written to storage so far (Linux).
fn disk_written() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("write_bytes: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

fn stat_cpu(stat: &str) -> Duration {
    let after_name = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // Fields 14 and 15 of the file (utime, stime) are 12 and 13 after the name; 100 ticks/s.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// What one stretch of requests measured, before it is combined with others.
struct Slice {
    latencies: Vec<Duration>,
    elapsed: Duration,
    cpu: Duration,
    db_cpu: Duration,
    disk: u64,
}

impl Measured {
    /// Combines slices measured at different times into one line: requests over the slices'
    /// summed time, percentiles over all their latencies.
    fn of(slices: Vec<Slice>) -> Self {
        let mut latencies: Vec<Duration> = Vec::new();
        let (mut elapsed, mut cpu, mut db_cpu, mut disk) =
            (Duration::ZERO, Duration::ZERO, Duration::ZERO, 0);
        for slice in slices {
            latencies.extend(slice.latencies);
            elapsed += slice.elapsed;
            cpu += slice.cpu;
            db_cpu += slice.db_cpu;
            disk += slice.disk;
        }
        latencies.sort();
        let count = latencies.len().max(1);
        let pick = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(count - 1)];
        Measured {
            requests: latencies.len(),
            rps: latencies.len() as f64 / elapsed.as_secs_f64(),
            p50: pick(0.50),
            p99: pick(0.99),
            cpu_per_request: cpu / count as u32,
            db_cpu_per_request: db_cpu / count as u32,
            disk_bytes_per_request: disk / count as u64,
        }
    }
}

/// A client keeping up to `concurrency` connections open between requests (and slices).
fn client(concurrency: usize) -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()
        .unwrap()
}

async fn drive(url: String, requests: usize, concurrency: usize) -> Measured {
    let client = client(concurrency);
    Measured::of(vec![
        drive_slice(&client, &url, requests, concurrency, 0, subscriber).await,
    ])
}

/// `requests` requests from `concurrency` workers; worker `w`'s `i`-th request is its
/// `first + i`-th message, from contact `contact(w, first + i)` (which picks its client address
/// too).
async fn drive_slice(
    client: &reqwest::Client,
    url: &str,
    requests: usize,
    concurrency: usize,
    first: usize,
    contact: fn(usize, usize) -> usize,
) -> Slice {
    let cpu_before = cpu_time();
    let db_cpu_before = db_cpu_time();
    let disk_before = disk_written();
    let started = Instant::now();
    let per_worker = requests / concurrency;
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..concurrency {
        let client = client.clone();
        let url = url.to_owned();
        workers.spawn(async move {
            let mut latencies = Vec::with_capacity(per_worker);
            for n in first..first + per_worker {
                // Many contacts, each writing several times: realistic per-contact history.
                let subscriber = contact(worker, n);
                let sent = Instant::now();
                let response = client
                    .post(&url)
                    .bearer_auth(SECRET)
                    // Behind a trusted proxy, as in production: the per-address limit (300
                    // per minute) applies per client address, not to the benchmark's loopback.
                    // Each contact sends from an address of its own, so no run is long enough
                    // to meet the limit.
                    .header("x-forwarded-for", address_of(subscriber))
                    .json(&json!({"subscriber_id": subscriber.to_string(), "text": "When are classes?"}))
                    .send()
                    .await
                    .unwrap();
                assert!(
                    response.status().is_success(),
                    "the turn answered {}",
                    response.status()
                );
                let _ = response.bytes().await.unwrap();
                latencies.push(sent.elapsed());
            }
            latencies
        });
    }
    let mut latencies = Vec::with_capacity(requests);
    while let Some(result) = workers.join_next().await {
        latencies.extend(result.unwrap());
    }
    Slice {
        latencies,
        elapsed: started.elapsed(),
        cpu: cpu_time() - cpu_before,
        db_cpu: db_cpu_time() - db_cpu_before,
        disk: disk_written().saturating_sub(disk_before),
    }
}

/// One message from every contact the measured phases use, then a pause for their first-contact
/// token writes (019: inline until the deadline, then queued) to settle. Returns the requests
/// answered.
async fn warm_up(url: &str, concurrency: usize) -> usize {
    let answered = drive(
        url.to_owned(),
        concurrency * CONTACTS_PER_WORKER,
        concurrency,
    )
    .await
    .requests;
    tokio::time::sleep(Duration::from_secs(9)).await;
    answered
}

/// `BENCH_DATABASE=memory`: the apps run on `sqlite::memory:` (nothing durable, nothing to
/// count afterwards).
fn in_memory() -> bool {
    std::env::var("BENCH_DATABASE").is_ok_and(|v| v == "memory")
}

/// The contact messages and agent replies recorded in the app database at `path`.
fn recorded_turns(path: &std::path::Path) -> (i64, i64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let count = |role: &str| -> i64 {
        conn.query_row("SELECT COUNT(*) FROM turns WHERE role = ?", [role], |row| {
            row.get(0)
        })
        .unwrap()
    };
    (count("user"), count("agent"))
}

/// Starts the real app (SQLite file, demo tenant) with an instant model; returns its route URL.
async fn start_app(
    dir: &std::path::Path,
    name: &str,
    manychat_base: &str,
    kind: Kind,
    shutdown: &CancellationToken,
) -> String {
    let config = common::demo_tenant(dir, name);
    // The demo tenant's daily budget (1M tokens) would be spent after ~800 instant turns and
    // every later turn would escalate before the model: lift it so every turn is a real turn.
    // The tenant's turn cap (25 messages) and hourly rate (60) stay: with 8000 requests per
    // phase a contact writes about 21 times in all (see CONTACTS_PER_WORKER), under both, and the
    // cap's read is the size a real tenant's is.
    common::edit_json(&config.join("rules.json"), common::lift_daily_budget);
    common::edit_json(&config.join("tools.json"), |tools| {
        // `plain-unsold`: the plain turn on the demo tenant without its sales markers, the code
        // path of a tenant that does not sell (no sales record is read): the plain turn as it was
        // before the sales funnel, to compare with the selling demo tenant's in the same run. The tool turn stages
        // what it always staged and the flow turn sends its flow on the same unsold tenant, so no
        // write waits for a recorded prospect.
        let unsold = matches!(kind, Kind::Tools | Kind::Flow) || name == "plain-unsold";
        if unsold {
            if kind == Kind::Plain {
                // No flow either: nothing the sales rules would read records for.
                tools["flows"] = json!([]);
            }
            for field in tools["fields"].as_array_mut().unwrap() {
                for marker in ["intent", "funnel", "offering"] {
                    field.as_object_mut().unwrap().remove(marker);
                }
            }
            for flow in tools["flows"].as_array_mut().unwrap() {
                flow.as_object_mut().unwrap().remove("offering");
            }
        }
        if matches!(kind, Kind::Sales | Kind::Flow) {
            // The tour: a flow every offering shares and repeatable, not the payment link, so no
            // rule but the intent gate stands between the model and the flow.
            tools["flows"].as_array_mut().unwrap().push(json!({
                "id": "studio_tour",
                "flowNs": "content20250301000000_200009",
                "description": "A short video tour of the studio.",
                "repeatable": true
            }));
        }
    });
    // BENCH_DATABASE=memory: the ceiling of the durable file (no file, no WAL, no fsync,
    // nothing durable), for comparison only.
    let database_url = if in_memory() {
        "sqlite::memory:".to_owned()
    } else {
        format!("sqlite://{}", dir.join(format!("{name}.db")).display())
    };
    common::start_app(
        &config,
        database_url,
        manychat_base,
        Arc::new(InstantModel { kind }),
        shutdown,
    )
    .await
}

/// One request at a time, at least 120 ms apart (under ManyChat's 10 requests per second).
async fn drive_paced(url: String, requests: usize) -> Measured {
    let client = reqwest::Client::new();
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(requests);
    for n in 0..requests {
        let next = Instant::now() + Duration::from_millis(120);
        // A few returning contacts: their token was issued on their first turn, so no token
        // write competes with the read for the limiter afterwards.
        let subscriber = 900_000 + n % 4;
        let sent = Instant::now();
        let response = client
            .post(&url)
            .bearer_auth(SECRET)
            .header("x-forwarded-for", "198.51.100.250")
            .json(&json!({"subscriber_id": subscriber.to_string(), "text": "When are classes?"}))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success());
        let _ = response.bytes().await.unwrap();
        latencies.push(sent.elapsed());
        tokio::time::sleep_until(next.into()).await;
    }
    Measured::of(vec![Slice {
        latencies,
        elapsed: started.elapsed(),
        cpu: Duration::ZERO,
        db_cpu: Duration::ZERO,
        disk: 0,
    }])
}

/// How long the paced phases' fake ManyChat takes to answer any call.
const MANYCHAT_ANSWER: Duration = Duration::from_millis(50);

/// The `q` quantile of `latencies` (zero when there are none).
fn percentile(latencies: &[Duration], q: f64) -> Duration {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let index = ((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1));
    sorted.get(index).copied().unwrap_or_default()
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `pairs` pairs of turns, one at a time, a turn every `gap`, each from a new contact numbered
/// from `first`: the first lane's (url, message), then the second's. Returns each lane's answer
/// times.
async fn drive_paced_lanes(
    lanes: [(&str, &str); 2],
    pairs: usize,
    gap: Duration,
    first: usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let client = reqwest::Client::new();
    let (mut tour, mut plain) = (Vec::with_capacity(pairs), Vec::with_capacity(pairs));
    // `tour`: the first lane's; `plain`: the second's.
    let mut next = Instant::now();
    for n in 0..pairs * 2 {
        tokio::time::sleep_until(next.into()).await;
        next += gap;
        let subscriber = first + n;
        let (url, text) = lanes[n % 2];
        let sent = Instant::now();
        let response = client
            .post(url)
            .bearer_auth(SECRET)
            .header("x-forwarded-for", address_of(subscriber))
            .json(&json!({"subscriber_id": subscriber.to_string(), "text": text}))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success());
        let body: Value = response.json().await.unwrap();
        let elapsed = sent.elapsed();
        // An answered turn, not the holding line of a lost race.
        assert!(
            body.to_string()
                .contains("Classes run on weekday evenings."),
            "the turn was answered inline: {body}"
        );
        if n % 2 == 0 {
            tour.push(elapsed);
        } else {
            plain.push(elapsed);
        }
    }
    (tour, plain)
}

/// [`warm_up`] for several apps: one message from each contact, then one pause for all.
async fn warm_up_all(urls: &[&str], concurrency: usize) {
    for url in urls {
        drive(
            url.to_string(),
            concurrency * CONTACTS_PER_WORKER,
            concurrency,
        )
        .await;
    }
    tokio::time::sleep(Duration::from_secs(9)).await;
}

fn main() {
    run(async {
        let requests = env_usize("BENCH_REQUESTS", 8000);
        let concurrencies: Vec<usize> = std::env::var("BENCH_CONCURRENCY")
            .unwrap_or_else(|_| "8,32,64".to_owned())
            .split(',')
            .filter_map(|c| c.trim().parse().ok())
            .collect();
        let widest = concurrencies.iter().copied().max().unwrap_or(8);

        // Baseline: a bare handler returning the same JSON.
        let body = Arc::new(block());
        let bare = Router::new().route(
            "/v1/channels/manychat/message",
            post(move || {
                let body = body.clone();
                async move { axum::Json((*body).clone()) }
            }),
        );
        let bare_url = format!("{}/v1/channels/manychat/message", serve(bare).await);

        // A fake ManyChat that accepts every call (token writes, actions).
        // getInfo answers after 50 ms, like a real ManyChat read.
        let fake = Router::new()
            .route(
                "/fb/subscriber/getInfo",
                axum::routing::get(|| async {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    axum::Json(json!({"status": "success", "data": {"id": "1",
                        "tags": [{"id": 1, "name": "interested-wheel"}],
                        "custom_fields": [{"id": 1, "name": "clay_experience", "value": "some"}]}}))
                }),
            )
            .fallback(|| async { axum::Json(json!({"status": "success"})) });
        let manychat_base = serve(fake).await;
        // A second fake ManyChat that answers every call after 50 ms, for the paced phases where
        // a flow is sent during the turn (029: the flow request runs inside the race).
        let slow = Router::new().fallback(|| async {
            tokio::time::sleep(MANYCHAT_ANSWER).await;
            axum::Json(json!({"status": "success"}))
        });
        let slow_manychat_base = serve(slow).await;

        let dir = tempfile::tempdir().unwrap();
        let shutdown = CancellationToken::new();
        let app = async |name: &str, manychat: &str, kind: Kind| {
            start_app(dir.path(), name, manychat, kind, &shutdown).await
        };
        let plain_url = app("plain", &manychat_base, Kind::Plain).await;
        // The new-contact phase's app: every request is a contact's first message.
        let fresh_url = app("fresh", &manychat_base, Kind::Plain).await;
        let tool_url = app("tools", &manychat_base, Kind::Tools).await;
        let read_url = app("read", &manychat_base, Kind::Read).await;
        // The paced phases' apps, on the slow fake: a flow turn (unsold tenant) and a sales turn
        // (the selling demo tenant), each beside the plain turn of the same app.
        let flow_url = app("flow", &slow_manychat_base, Kind::Flow).await;
        let sales_url = app("sales", &slow_manychat_base, Kind::Sales).await;
        // Fresh apps for the sales comparisons, so no contact nears the turn cap.
        let sold_url = app("plain-sold", &manychat_base, Kind::Plain).await;
        let unsold_url = app("plain-unsold", &manychat_base, Kind::Plain).await;

        drive(bare_url.clone(), 2000, widest).await;
        // Every plain turn answered, warm-up included; checked against the database after.
        let mut plain_answered = warm_up(&plain_url, widest).await;

        println!(
            "requests={requests} per line; cpu is the whole process's per request, client \
             included; db is the SQLite thread's share of it"
        );
        let line = |what: &str, c: usize, m: &Measured| {
            println!(
                "{what:<12} c={c:<3} {:>8.0} req/s  p50 {:>6.2} ms  p99 {:>6.2} ms  cpu {:>4} us/req  db {:>4} us/req  disk {:>5.1} KiB/req",
                m.rps,
                m.p50.as_secs_f64() * 1e3,
                m.p99.as_secs_f64() * 1e3,
                m.cpu_per_request.as_micros(),
                m.db_cpu_per_request.as_micros(),
                m.disk_bytes_per_request as f64 / 1024.0
            );
        };
        // The machine is noisy (the bare handler alone moves by a third between runs): each
        // round measures the bare handler and the turn back to back, and the summary is the
        // median round.
        let rounds = env_usize("BENCH_ROUNDS", 3).max(1);
        let slices = env_usize("BENCH_SLICES", 8).max(1);
        let mut summary = Vec::new();
        for &c in &concurrencies {
            let (mut ratios, mut fresh_ratios) = (Vec::new(), Vec::new());
            for round in 1..=rounds {
                // The two alternate in slices, so that a change in the machine's speed during
                // the round falls on both rather than on one.
                // Each keeps its connections open from slice to slice.
                let (bare_client, plain_client, fresh_client) = (client(c), client(c), client(c));
                let (mut bare, mut plain, mut fresh) = (Vec::new(), Vec::new(), Vec::new());
                // At least one request per worker in every slice.
                let slices = slices.min(requests / c).max(1);
                for slice in 0..slices {
                    let (first, count) = (slice * (requests / slices / c), requests / slices);
                    bare.push(
                        drive_slice(&bare_client, &bare_url, count, c, first, subscriber).await,
                    );
                    plain.push(
                        drive_slice(&plain_client, &plain_url, count, c, first, subscriber).await,
                    );
                    // A contact's first message: a contact never seen before per request.
                    fresh.push(
                        drive_slice(
                            &fresh_client,
                            &fresh_url,
                            count,
                            c,
                            first + round * requests,
                            new_contact,
                        )
                        .await,
                    );
                }
                let (bare, plain, fresh) =
                    (Measured::of(bare), Measured::of(plain), Measured::of(fresh));
                plain_answered += plain.requests;
                println!("round {round}");
                line("bare handler", c, &bare);
                line("plain turn", c, &plain);
                line("new contact", c, &fresh);
                let ratio = 100.0 * plain.rps / bare.rps;
                let fresh_ratio = 100.0 * fresh.rps / bare.rps;
                println!(
                    "ratio        c={c:<3} plain turn {ratio:.1}%, new contact {fresh_ratio:.1}% of the bare handler's throughput; +{:.2} ms p50",
                    (plain.p50.as_secs_f64() - bare.p50.as_secs_f64()) * 1e3
                );
                ratios.push(ratio);
                fresh_ratios.push(fresh_ratio);
            }
            for (what, ratios) in [
                ("returning", &mut ratios),
                ("new contact", &mut fresh_ratios),
            ] {
                ratios.sort_by(f64::total_cmp);
                summary.push(format!(
                    "c={c:<3} {what:<11} median {:.1}% (rounds: {})",
                    ratios[ratios.len() / 2],
                    listed_rounds(ratios, "%")
                ));
            }
        }
        println!("summary: plain turn throughput as a share of the bare handler's, same round");
        for line in &summary {
            println!("  {line}");
        }
        // "Every turn durably recorded": each answered turn's message and reply are in the
        // database, read through a connection of the benchmark's own (an inline answer leaves
        // only after its write committed).
        if !in_memory() {
            let (messages, replies) = recorded_turns(&dir.path().join("plain.db"));
            let answered = plain_answered as i64;
            println!(
                "recorded: {messages} messages and {replies} replies in plain.db for {answered} plain turns answered"
            );
            assert_eq!(
                (messages, replies),
                (answered, answered),
                "every answered turn is recorded"
            );
        }

        if std::env::var("BENCH_TOOLS").is_ok_and(|v| v == "0") {
            shutdown.cancel();
            return;
        }

        // At the first concurrency, in rounds, alternated in slices (the three turns in a
        // rotating order, so that none always follows the bare handler): the bare handler; the
        // plain turn of a tenant that does not sell (nothing read: the plain turn's code path
        // before the sales funnel); the plain turn of the selling demo tenant (every
        // turn reads the contact's sales record and decides its tools against it); and the tool
        // turn (two model steps, three staged writes, on the tenant that does not sell). The tool
        // turn's writes run after each response through the shared limiter (10 ManyChat requests
        // per second), so they queue behind it; the turn itself does not wait for them. Each app
        // is fresh, so every database is the same size.
        let c = concurrencies.first().copied().unwrap_or(8);
        warm_up_all(&[&unsold_url, &sold_url, &tool_url], c).await;
        let apps = [
            ("plain unsold", &unsold_url),
            ("plain selling", &sold_url),
            ("tool turn", &tool_url),
        ];
        // Per round: [unsold, selling, tool] as a share of the bare handler, then selling and
        // tool as a share of unsold.
        let mut per_round: Vec<[f64; 5]> = Vec::new();
        for round in 1..=rounds {
            let bare_client = client(c);
            let clients: Vec<reqwest::Client> = apps.iter().map(|_| client(c)).collect();
            let mut bare = Vec::new();
            let mut turns: Vec<Vec<Slice>> = apps.iter().map(|_| Vec::new()).collect();
            let per_line = requests / 2;
            let slices = slices.min(per_line / c).max(1);
            for slice in 0..slices {
                // Past the warm-up's message: each round's contacts write again.
                let first = (round - 1) * (per_line / c) + slice * (per_line / slices / c);
                let count = per_line / slices;
                bare.push(drive_slice(&bare_client, &bare_url, count, c, first, subscriber).await);
                for k in 0..apps.len() {
                    let app = (slice + k) % apps.len();
                    turns[app].push(
                        drive_slice(&clients[app], apps[app].1, count, c, first, subscriber).await,
                    );
                }
            }
            let bare = Measured::of(bare);
            let turns: Vec<Measured> = turns.into_iter().map(Measured::of).collect();
            println!("round {round}");
            line("bare handler", c, &bare);
            for (app, measured) in apps.iter().zip(&turns) {
                line(app.0, c, measured);
            }
            let share = |m: &Measured| 100.0 * m.rps / bare.rps;
            let ratios = [
                share(&turns[0]),
                share(&turns[1]),
                share(&turns[2]),
                100.0 * turns[1].rps / turns[0].rps,
                100.0 * turns[2].rps / turns[0].rps,
            ];
            println!(
                "ratio        c={c:<3} of the bare handler's throughput: plain unsold {:.1}%, plain selling {:.1}%, tool turn {:.1}%; selling {:.1}% and tool {:.1}% of unsold; cpu selling {:+} us/turn, tool {:+} us/turn",
                ratios[0],
                ratios[1],
                ratios[2],
                ratios[3],
                ratios[4],
                turns[1].cpu_per_request.as_micros() as i64
                    - turns[0].cpu_per_request.as_micros() as i64,
                turns[2].cpu_per_request.as_micros() as i64
                    - turns[0].cpu_per_request.as_micros() as i64,
            );
            per_round.push(ratios);
        }
        let column = |k: usize| -> Vec<f64> { per_round.iter().map(|r| r[k]).collect() };
        let rounds_of = |k: usize| listed_rounds(&column(k), "%");
        println!(
            "summary: c={c} medians over rounds, as a share of the bare handler's throughput: plain unsold {:.1}%, plain selling {:.1}%, tool turn {:.1}%",
            median(&column(0)),
            median(&column(1)),
            median(&column(2)),
        );
        println!(
            "  plain selling as a share of plain unsold: median {:.1}% (rounds: {})",
            median(&column(3)),
            rounds_of(3)
        );
        println!(
            "  tool turn as a share of plain unsold: median {:.1}% (rounds: {})",
            median(&column(4)),
            rounds_of(4)
        );

        // Paced, on the fake ManyChat that answers in 50 ms: a turn that sends one flow during
        // the turn (029) beside a plain turn, and the sales turn (intent, stage, one flow)
        // beside the selling tenant's plain turn. Each turn is a contact of its own, one turn at
        // a time per app and the two apps side by side, spaced so that each app's requests (the
        // first-contact token write, the flow, the staged writes) stay under the limiter's 10
        // per second: the answer time is the turn's and the flow's own, never the limiter's.
        // The sales app's turns fall halfway between two of the flow app's, so that the two
        // apps' turns rarely overlap.
        let pairs = env_usize("BENCH_PACED_PAIRS", 120);
        let (flow, sales) = tokio::join!(
            drive_paced_lanes(
                [(&flow_url, TOUR_TEXT), (&flow_url, PLAIN_TEXT)],
                pairs,
                Duration::from_millis(200),
                700_000
            ),
            async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                drive_paced_lanes(
                    [(&sales_url, TOUR_TEXT), (&sales_url, PLAIN_TEXT)],
                    pairs / 2,
                    Duration::from_millis(400),
                    800_000,
                )
                .await
            },
        );
        let quantiles = |what: &str, latencies: &[Duration]| {
            println!(
                "paced        {what:<26} n={:<4} p50 {:>6.2} ms  p95 {:>6.2} ms",
                latencies.len(),
                percentile(latencies, 0.50).as_secs_f64() * 1e3,
                percentile(latencies, 0.95).as_secs_f64() * 1e3
            );
        };
        println!(
            "paced, ManyChat answering in {} ms:",
            MANYCHAT_ANSWER.as_millis()
        );
        quantiles("flow turn (one flow)", &flow.0);
        quantiles("plain turn, same app", &flow.1);
        quantiles("sales turn (intent+stage+flow)", &sales.0);
        quantiles("plain turn, selling tenant", &sales.1);
        let added = |a: &[Duration], b: &[Duration], q: f64| {
            (percentile(a, q).as_secs_f64() - percentile(b, q).as_secs_f64()) * 1e3
        };
        println!(
            "ratio        flow turn adds {:.2} ms at p50, {:.2} ms at p95; sales turn adds {:.2} ms at p50, {:.2} ms at p95",
            added(&flow.0, &flow.1, 0.5),
            added(&flow.0, &flow.1, 0.95),
            added(&sales.0, &sales.1, 0.5),
            added(&sales.0, &sales.1, 0.95)
        );

        // A contact's first plain turn, paced, on the selling tenant and on the one that does
        // not sell, alternated (each app's first-contact token write stays under its limiter).
        let (first_sold, first_unsold) = drive_paced_lanes(
            [(&sold_url, PLAIN_TEXT), (&unsold_url, PLAIN_TEXT)],
            pairs / 2,
            Duration::from_millis(100),
            600_000,
        )
        .await;
        quantiles("first turn, selling tenant", &first_sold);
        quantiles("first turn, not selling", &first_unsold);

        // ManyChat allows 10 getInfo per second per key, and every request goes through the
        // service's shared limiter: the read turns are paced under that limit (one at a time,
        // ≥ 120 ms apart) so that the comparison shows the read's own wait, not the limiter's.
        let tools_paced = drive_paced(tool_url.clone(), 40).await;
        let read = drive_paced(read_url, 40).await;
        println!(
            "paced, one at a time: tool turn p50 {:.2} ms; read turn p50 {:.2} ms (one getInfo answered in 50 ms): the read adds {:.2} ms",
            tools_paced.p50.as_secs_f64() * 1e3,
            read.p50.as_secs_f64() * 1e3,
            (read.p50.as_secs_f64() - tools_paced.p50.as_secs_f64()) * 1e3
        );
        shutdown.cancel();
    });
}
