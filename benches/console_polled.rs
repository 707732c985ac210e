//! Serving the owner's console costs the webhook route nothing measurable (issue: the owner's
//! console, Performance): the plain turn's throughput over a bare handler's is the same with a
//! logged-in owner fetching a console page every second as without. Measured, not asserted.
//!
//! One process: a bare axum handler returning the same Dynamic Block JSON (the baseline, as in
//! `benches/turn_throughput.rs`), and the real app (SQLite file, the demo tenant, an instant model,
//! a fake ManyChat) with the console on. Each round alternates, in slices, the bare handler, the
//! plain turn of returning contacts, and the same turns while a logged-in client fetches
//! `GET /console` (the "what is running" page: it checks the config files on disk each time)
//! every second; the ratios are each turn line's throughput over the bare handler's in that
//! round, and the figure is the median round. Then, alone, what one page costs in CPU time.
//!
//! Run: `cargo bench --bench console_polled` (defaults: `BENCH_REQUESTS=6000` per line per round,
//! `BENCH_CONCURRENCY=32`, `BENCH_ROUNDS=7`, `BENCH_SLICES=4`; `BENCH_POLL_MS=1000`; `BENCH_PAGES=500` pages alone).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::Router;
use axum::routing::post;
use manychat_agent::console::auth::PasswordHashSetting;
use manychat_agent::model::{Model, ModelError, ModelRequest, ModelResponse, Usage};
use serde_json::json;
use tokio_util::sync::CancellationToken;

mod common;
use common::{SECRET, address_of, env_usize, final_reply, listed_rounds, run, serve};

const PASSWORD: &str = "the bench owner's password";

/// A model that answers at once.
struct InstantModel;

#[async_trait]
impl Model for InstantModel {
    fn id(&self) -> &str {
        "mock:instant"
    }
    async fn step(&self, _: &ModelRequest) -> Result<ModelResponse, ModelError> {
        Ok(final_reply(Usage {
            input_tokens: 1200,
            output_tokens: 40,
            cached_tokens: 0,
            cache_write_tokens: 0,
        }))
    }
}

/// Contacts each client worker cycles over: each writes a few times in all, under the demo
/// tenant's turn cap (25) and hourly rate (60), so every measured turn reaches the model.
const CONTACTS_PER_WORKER: usize = 300;

fn subscriber(worker: usize, n: usize) -> usize {
    100_000 + worker * 1000 + n % CONTACTS_PER_WORKER
}

/// `requests` plain turns (or bare requests) from `concurrency` workers; worker `w`'s `i`-th is
/// its `first + i`-th message. Returns requests per second.
async fn drive(
    client: &reqwest::Client,
    url: &str,
    requests: usize,
    concurrency: usize,
    first: usize,
) -> (usize, Duration) {
    let started = Instant::now();
    let per_worker = requests / concurrency;
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..concurrency {
        let (client, url) = (client.clone(), url.to_owned());
        workers.spawn(async move {
            for n in first..first + per_worker {
                let subscriber = subscriber(worker, n);
                let response = client
                    .post(&url)
                    .bearer_auth(SECRET)
                    // Each contact from an address of its own, behind the trusted loopback
                    // proxy: no per-address limit is what is measured.
                    .header("x-forwarded-for", address_of(subscriber))
                    .json(&json!({"subscriber_id": subscriber.to_string(), "text": "When are classes?"}))
                    .send()
                    .await
                    .unwrap();
                assert!(response.status().is_success(), "{}", response.status());
                let _ = response.bytes().await.unwrap();
            }
            per_worker
        });
    }
    let mut answered = 0;
    while let Some(done) = workers.join_next().await {
        answered += done.unwrap();
    }
    (answered, started.elapsed())
}

/// Logs in to the console at `base` as a browser would; returns the session cookie.
async fn log_in(client: &reqwest::Client, base: &str) -> String {
    let form = client
        .get(format!("{base}/console/login"))
        .send()
        .await
        .unwrap();
    let cookie = form
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("console_login="))
        .and_then(|v| v.split(';').next())
        .map(|v| format!("console_login={v}"))
        .expect("a pre-login cookie");
    let page = form.text().await.unwrap();
    let csrf = page
        .split(r#"name="csrf" value=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the login form's token")
        .to_owned();
    let response = client
        .post(format!("{base}/console/login"))
        .header("cookie", cookie)
        .form(&[("password", PASSWORD), ("csrf", &csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303, "the bench logs in");
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("console_session="))
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .to_owned()
}

/// What the poller counts.
#[derive(Default)]
struct Polls {
    /// Whether the polled line is running: the poller fetches the page only then.
    on: AtomicBool,
    pages: AtomicUsize,
    page_micros: AtomicUsize,
}

/// Fetches `GET /console` every `period` while `polls.on` is set (a tick while it is not is
/// skipped, so the page comes once a second of the polled line's time, as from an open tab),
/// until `stop`.
fn poll_console(
    base: String,
    session: String,
    period: Duration,
    polls: Arc<Polls>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let mut every = tokio::time::interval(period);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            if !polls.on.load(Ordering::Acquire) {
                continue;
            }
            let sent = Instant::now();
            let response = client
                .get(format!("{base}/console"))
                .header("cookie", &session)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200, "the console page");
            let body = response.text().await.unwrap();
            assert!(body.contains("What is running"));
            polls.pages.fetch_add(1, Ordering::Relaxed);
            polls
                .page_micros
                .fetch_add(sent.elapsed().as_micros() as usize, Ordering::Relaxed);
        }
    })
}

/// CPU time (user + system) this process has used so far, from /proc/self/stat (Linux, 100
/// ticks a second).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime, the file's fields 14 and 15: 12 and 13 after the name.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn main() {
    run(async {
        let requests = env_usize("BENCH_REQUESTS", 6000);
        let c = env_usize("BENCH_CONCURRENCY", 32).max(1);
        let rounds = env_usize("BENCH_ROUNDS", 7).max(1);
        let slices = env_usize("BENCH_SLICES", 4).clamp(1, (requests / c).max(1));
        let period = Duration::from_millis(env_usize("BENCH_POLL_MS", 1000) as u64);

        // The same JSON as `benches/turn_throughput.rs`'s bare handler.
        let body = Arc::new(json!({"version": "v2", "content": {"type": "whatsapp",
            "messages": [{"type": "text", "text": "Classes run on weekday evenings."}],
            "actions": [], "external_message_callback": {"url": "https://bench.example.test/v1/channels/manychat/message",
            "method": "post", "headers": {"Authorization": format!("Bearer {SECRET}")},
            "payload": {"text": "{{last_input_text}}", "subscriber_id": "{{contact.id}}", "ai_token": "{{ai_token}}"},
            "timeout": 86400}}}));
        let bare = Router::new().route(
            "/v1/channels/manychat/message",
            post(move || {
                let body = body.clone();
                async move { axum::Json((*body).clone()) }
            }),
        );
        let bare_url = format!("{}/v1/channels/manychat/message", serve(bare).await);
        let fake_manychat = Router::new().fallback(|| async {
            axum::Json(json!({"status": "success", "data": {"id": "1", "tags": [],
                "custom_fields": []}}))
        });
        let manychat_base = serve(fake_manychat).await;

        let dir = tempfile::tempdir().unwrap();
        let config = common::demo_tenant(dir.path(), "console");
        common::edit_json(&config.join("rules.json"), common::lift_daily_budget);
        let shutdown = CancellationToken::new();
        let hash = PasswordHashSetting::make(PASSWORD).as_str().to_owned();
        let turn_url = common::start_app_on(
            &config,
            format!("sqlite://{}", dir.path().join("console.db").display()),
            &manychat_base,
            &[("CONSOLE_PASSWORD_HASH", hash)],
            Some(Arc::new(InstantModel)),
            &shutdown,
            |_| {},
        )
        .await;
        let base = turn_url
            .strip_suffix("/v1/channels/manychat/message")
            .unwrap()
            .to_owned();
        let no_redirects = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let session = log_in(&no_redirects, &base).await;

        let client = || {
            reqwest::Client::builder()
                .pool_max_idle_per_host(c)
                .build()
                .unwrap()
        };
        let (bare_client, turn_client) = (client(), client());
        // Warm-up: every contact's first message (a new contact's turn, with its token write),
        // then time for those writes to settle, so the measured turns are returning contacts'.
        drive(&bare_client, &bare_url, 2000, c, 0).await;
        drive(&turn_client, &turn_url, c * CONTACTS_PER_WORKER, c, 0).await;
        tokio::time::sleep(Duration::from_secs(9)).await;

        println!(
            "c={c}, {requests} requests per line per round in {slices} slices; the console \
             page polled every {period:?} during the polled line"
        );
        let polls = Arc::new(Polls::default());
        let stop = CancellationToken::new();
        let poller = poll_console(
            base.clone(),
            session.clone(),
            period,
            polls.clone(),
            stop.clone(),
        );
        let (mut quiet_ratios, mut polled_ratios, mut polled_over_quiet) =
            (Vec::new(), Vec::new(), Vec::new());
        let per_slice = requests / slices;
        let mut first = CONTACTS_PER_WORKER;
        let mut polled_time = Duration::ZERO;
        for round in 1..=rounds {
            let mut took = [Duration::ZERO; 3];
            let mut answered = [0usize; 3];
            for slice in 0..slices {
                let (n, t) = drive(&bare_client, &bare_url, per_slice, c, first).await;
                (answered[0], took[0]) = (answered[0] + n, took[0] + t);
                // The unpolled and the polled line take turns going first.
                let order = if slice % 2 == 0 {
                    [false, true]
                } else {
                    [true, false]
                };
                for polled in order {
                    polls.on.store(polled, Ordering::Release);
                    let (n, t) = drive(&turn_client, &turn_url, per_slice, c, first).await;
                    polls.on.store(false, Ordering::Release);
                    let line = 1 + usize::from(polled);
                    (answered[line], took[line]) = (answered[line] + n, took[line] + t);
                    first += per_slice / c;
                }
            }
            polled_time += took[2];
            let rps = |i: usize| answered[i] as f64 / took[i].as_secs_f64();
            let (bare, quiet, polled) = (rps(0), rps(1), rps(2));
            quiet_ratios.push(100.0 * quiet / bare);
            polled_ratios.push(100.0 * polled / bare);
            polled_over_quiet.push(100.0 * polled / quiet);
            println!(
                "round {round}: bare {bare:>7.0} req/s  turn {quiet:>6.0} req/s ({:.1} %)  turn \
                 with the console polled {polled:>6.0} req/s ({:.1} %)",
                100.0 * quiet / bare,
                100.0 * polled / bare
            );
        }
        stop.cancel();
        poller.await.unwrap();
        let pages = polls.pages.load(Ordering::Relaxed);
        println!(
            "median round: turn / bare {:.1} % (rounds {}); polled turn / bare {:.1} % (rounds \
             {}); polled / unpolled {:.1} % (rounds {})",
            median(&quiet_ratios),
            listed_rounds(&quiet_ratios, " %"),
            median(&polled_ratios),
            listed_rounds(&polled_ratios, " %"),
            median(&polled_over_quiet),
            listed_rounds(&polled_over_quiet, " %"),
        );
        println!(
            "console pages fetched during the polled lines: {pages} in {:.1} s ({:.2} a second), \
             mean {:.1} ms each (under the turns' load)",
            polled_time.as_secs_f64(),
            pages as f64 / polled_time.as_secs_f64(),
            polls.page_micros.load(Ordering::Relaxed) as f64 / pages.max(1) as f64 / 1000.0
        );
        assert!(pages > 0, "the console was polled");

        // What one page costs on its own: pages back to back, nothing else running; the
        // process's CPU time (server and client) per page.
        let back_to_back = env_usize("BENCH_PAGES", 500).max(1);
        let cpu_before = cpu_time();
        let started = Instant::now();
        for _ in 0..back_to_back {
            let response = no_redirects
                .get(format!("{base}/console"))
                .header("cookie", &session)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            let _ = response.bytes().await.unwrap();
        }
        let (elapsed, cpu) = (started.elapsed(), cpu_time() - cpu_before);
        println!(
            "alone: {back_to_back} console pages back to back, {:.2} ms each, {:.0} us of CPU \
             each (whole process): at one a second, {:.3} % of one core",
            elapsed.as_secs_f64() * 1e3 / back_to_back as f64,
            cpu.as_secs_f64() * 1e6 / back_to_back as f64,
            cpu.as_secs_f64() * 100.0 / back_to_back as f64,
        );
        shutdown.cancel();
    });
}
