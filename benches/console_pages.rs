//! How long the owner's console takes to render its pages over a large store (Performance: a
//! page in ≤ 50 ms with 100,000 turns stored), measured, not asserted.
//!
//! Seeds a store through the `Store` trait (so both backends get the same data) with
//! `BENCH_TURNS` turns (100,000 by default) over `BENCH_CONTACTS` contacts (5,000), a message
//! then an answer, one answer in three carrying a performed sales write (the stage the pages
//! show is computed from these records), one contact with `BENCH_LONG` turns (2,000), and one
//! contact in a hundred held for a person; then starts the real app on it with the console on,
//! logs in over HTTP and times each page as a browser gets it (the whole response): the
//! conversations' first page and its 20th, one conversation's first and last page of turns,
//! the held contacts, the try-out page of a test contact, the report (4 and 16 weeks) and the
//! learning review (without `learning` in the demo tenant: the page that says how). Each page: its first request,
//! then the median and the worst of `BENCH_ROUNDS` (20).
//!
//! Run: `cargo bench --bench console_pages` on SQLite; with
//! `TEST_DATABASE_URL=postgres://…` also on a fresh PostgreSQL schema.

use std::sync::Arc;
use std::time::Instant;

use chrono::{Duration, Utc};
use manychat_agent::console::auth::PasswordHashSetting;
use manychat_agent::ids::SubscriberId;
use manychat_agent::model::mock::ScriptedModel;
use manychat_agent::store::{NewTurn, Store};
use serde_json::json;
use tokio_util::sync::CancellationToken;

mod common;
use common::{demo_tenant, env_usize, run, start_app_on};

const PASSWORD: &str = "the bench owner's password";

/// Seeds `store`; returns the long conversation's id and the test contact.
async fn seed(
    store: Arc<dyn Store>,
    turns: usize,
    contacts: usize,
    long: usize,
) -> (uuid::Uuid, SubscriberId) {
    let now = Utc::now();
    let test = SubscriberId::new_test_contact();
    let subscribers: Vec<SubscriberId> = (0..contacts)
        .map(|i| SubscriberId::parse(&(4_400_000_000 + i as u64).to_string()).unwrap())
        .chain([test.clone()])
        .collect();
    let mut ids = Vec::with_capacity(subscribers.len());
    for (i, subscriber) in subscribers.iter().enumerate() {
        let first = now - Duration::days(30) + Duration::seconds(i as i64);
        let c = store
            .conversation_for(subscriber, "whatsapp", first)
            .await
            .unwrap();
        ids.push(c.id);
        if i % 100 == 0 && i < contacts {
            store
                .set_escalated(c.id, now - Duration::hours(1))
                .await
                .unwrap();
        }
    }
    let long_id = ids[0];
    // (conversation, exchange number) of every exchange: the long one first, the rest spread.
    let exchanges = (turns.saturating_sub(long) / 2).max(1);
    let mut work: Vec<(uuid::Uuid, usize)> = (0..long / 2).map(|n| (long_id, n)).collect();
    work.extend((0..exchanges).map(|n| (ids[1 + n % (ids.len() - 1)], n)));
    let started = Instant::now();
    let total = work.len();
    let chunks: Vec<Vec<(uuid::Uuid, usize)>> =
        work.chunks(total.div_ceil(64)).map(<[_]>::to_vec).collect();
    let mut tasks = Vec::new();
    for chunk in chunks {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for (conversation, n) in chunk {
                let at = now - Duration::days(29) + Duration::milliseconds((n as i64) * 20_000);
                store
                    .record_turn(&NewTurn::user(conversation, "How much is the wheel course?", true, at))
                    .await
                    .unwrap();
                let mut answer = NewTurn::agent(
                    conversation,
                    "Wheel Throwing Basics is 120 EUR for four evenings.",
                    "answered_inline",
                    true,
                    at + Duration::seconds(2),
                );
                answer.model = Some("mock:bench".into());
                answer.input_tokens = 3_500;
                answer.output_tokens = 60;
                answer.cost_usd = 0.0015;
                if n % 3 == 0 {
                    answer.actions = Some(json!([
                        {"tool": "set_field", "id": "intent", "value": "prospect", "status": "performed"},
                        {"tool": "set_field", "id": "funnel_stage", "value": "offered", "status": "performed"}
                    ]));
                }
                store.record_turn(&answer).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    println!(
        "seeded {} turns over {} contacts in {:.1} s",
        total * 2,
        ids.len(),
        started.elapsed().as_secs_f64()
    );
    (long_id, test)
}

/// `name=value` of the `Set-Cookie` named `name`.
fn cookie(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap().to_owned())
        .unwrap()
}

fn csrf(page: &str) -> String {
    let start = page.find(r#"name="csrf" value=""#).unwrap() + 19;
    page[start..].split('"').next().unwrap().to_owned()
}

async fn login(client: &reqwest::Client, base: &str) -> String {
    let form = client
        .get(format!("{base}/console/login"))
        .send()
        .await
        .unwrap();
    let pre = cookie(&form, "console_login");
    let token = csrf(&form.text().await.unwrap());
    let done = client
        .post(format!("{base}/console/login"))
        .header("cookie", pre)
        .form(&[("password", PASSWORD), ("csrf", &token)])
        .send()
        .await
        .unwrap();
    cookie(&done, "console_session")
}

/// The link `id="older"` points to, if the page has one.
fn older(page: &str) -> Option<String> {
    let at = page.find(r#"id="older""#)?;
    let start = page[..at].rfind("href=\"")? + 6;
    Some(page[start..].split('"').next()?.replace("&amp;", "&"))
}

async fn time_page(
    client: &reqwest::Client,
    base: &str,
    session: &str,
    route: &str,
    rounds: usize,
) -> String {
    let get = || async {
        let started = Instant::now();
        let response = client
            .get(format!("{base}{route}"))
            .header("cookie", session)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{route}");
        let body = response.text().await.unwrap();
        (started.elapsed().as_secs_f64() * 1000.0, body)
    };
    let (first, _) = get().await;
    let mut times = Vec::new();
    for _ in 0..rounds {
        times.push(get().await.0);
    }
    times.sort_by(f64::total_cmp);
    format!(
        "{first:.1} | {:.1} | {:.1}",
        times[times.len() / 2],
        times[times.len() - 1]
    )
}

async fn measure(backend: &str, url: String, store: Arc<dyn Store>) {
    let turns = env_usize("BENCH_TURNS", 100_000);
    let contacts = env_usize("BENCH_CONTACTS", 5_000);
    let long = env_usize("BENCH_LONG", 2_000);
    let rounds = env_usize("BENCH_ROUNDS", 20);
    let (long_id, test) = seed(store, turns, contacts, long).await;
    let dir = tempfile::tempdir().unwrap();
    let config = demo_tenant(dir.path(), "console");
    let shutdown = CancellationToken::new();
    let hash = PasswordHashSetting::make(PASSWORD).as_str().to_owned();
    let message = start_app_on(
        &config,
        url,
        "http://127.0.0.1:9",
        &[("CONSOLE_PASSWORD_HASH", hash)],
        Some(Arc::new(ScriptedModel::replies(Vec::<String>::new()))),
        &shutdown,
        |_| {},
    )
    .await;
    let base = message
        .trim_end_matches("/v1/channels/manychat/message")
        .to_owned();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let session = login(&client, &base).await;
    // The 20th page of conversations, and the long conversation's last page of turns.
    let mut deep = "/console/conversations".to_owned();
    for _ in 0..19 {
        let page = client
            .get(format!("{base}{deep}"))
            .header("cookie", &session)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        deep = older(&page).expect("a next page");
    }
    let mut last = format!("/console/conversations/{long_id}");
    loop {
        let page = client
            .get(format!("{base}{last}"))
            .header("cookie", &session)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        match older(&page) {
            Some(next) => last = next,
            None => break,
        }
    }
    let pages = [
        (
            "conversations, first page",
            "/console/conversations".to_owned(),
        ),
        ("conversations, 20th page", deep),
        (
            "a 2,000-turn conversation, newest turns",
            format!("/console/conversations/{long_id}"),
        ),
        ("the same, oldest turns", last),
        ("held for a person", "/console/held".to_owned()),
        (
            "try it, a test contact",
            format!("/console/try?contact={}", test.as_str()),
        ),
        ("the report, 4 weeks", "/console/report".to_owned()),
        (
            "the report, 16 weeks",
            "/console/report?weeks=16".to_owned(),
        ),
        ("the learning review", "/console/learning".to_owned()),
    ];
    for (name, route) in pages {
        let times = time_page(&client, &base, &session, &route, rounds).await;
        println!("| {backend} | {name} | {times} |");
    }
    shutdown.cancel();
}

fn main() {
    run(async {
        println!("| backend | page | first (ms) | median (ms) | worst (ms) |");
        println!("|---|---|---|---|---|");
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("console.db").display());
        let sqlite = manychat_agent::store::connect(&url).await.unwrap();
        measure("SQLite", url, sqlite).await;
        if let Ok(base) = std::env::var("TEST_DATABASE_URL") {
            let schema = manychat_agent::store::postgres::create_test_schema(&base)
                .await
                .unwrap();
            let separator = if base.contains('?') { '&' } else { '?' };
            let url = format!("{base}{separator}options[search_path]={schema}");
            let pg = manychat_agent::store::connect(&url).await.unwrap();
            measure("PostgreSQL", url, pg).await;
        }
    });
}
