//! A burst across PostgreSQL replicas, measured: two app instances on one schema, bursts of
//! three pieces (the second 0 ms and the third 300 ms after the first, all inside the demo's
//! 1.5 s window) sent round-robin or at random (a fixed seed) across them. A burst is merged
//! only in the replica that took its first piece, so a later piece splits off (its own turn,
//! its own model call, its own answer) exactly when it reaches the other replica: per later
//! piece, (N − 1)/N = 1/2 on two replicas. The measured rates are printed (`--nocapture`) and
//! `docs/DEPLOYMENT.md` reports them.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::mock::ScriptedModel;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::helpers::*;

const PIECES: [&str; 3] = ["hi", "I saw your ad", "how much is the wheel course?"];
const ANSWER: &str = "The wheel course is 120 euros.";
/// Bursts sent at once (distinct contacts).
const BATCH: usize = 10;

fn answers() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::replies((0..400).map(|_| reply_json(ANSWER))))
}

async fn replica(model: Arc<ScriptedModel>, url: &str) -> TestApp {
    spawn_app_with(
        AppOptions::new(model)
            .with_burst()
            .env("DATABASE_URL", url.to_owned()),
    )
    .await
}

/// Lets the apps' tasks reach their next wait (the clock is frozen) between two moves of it.
async fn pause() {
    for _ in 0..20 {
        real_pause().await;
    }
}

/// The replicas are alive while the test holds their clock: each renews its lease (in
/// PostgreSQL's time) only when its frozen clock is moved, so the test renews both as it waits
/// in real time. A lease lapsed while the machine was slow would let the other replica take
/// over a gathering turn's promise and run it a second time.
async fn keep_alive(apps: [&TestApp; 2]) {
    for app in apps {
        app.store.beat().await.unwrap();
    }
}

/// A sum of one series over both replicas.
async fn total(apps: [&TestApp; 2], name: &str) -> f64 {
    series(apps[0], name).await + series(apps[1], name).await
}

/// Waits until every piece just sent has reached its replica's burst: a batch's first pieces
/// have opened `bursts` bursts, and its later pieces so far (`later`) have each joined its
/// burst (`burst_pieces_merged`, counted from `merged_before`) or wait for their place on the
/// other replica, behind the gathering turn (`turns_waiting`). Not a moment: a piece processed
/// late would open the burst, or miss it, after the clock moved.
async fn pieces_arrived(apps: [&TestApp; 2], bursts: usize, later: usize, merged_before: f64) {
    until(async || {
        keep_alive(apps).await;
        let merged = total(apps, "burst_pieces_merged_total").await - merged_before;
        total(apps, "bursts_open").await == bursts as f64
            && merged + total(apps, "turns_waiting").await == later as f64
    })
    .await;
}

/// What one batch of bursts measured.
#[derive(Debug, Default)]
struct Measured {
    bursts: usize,
    later_pieces: usize,
    split: usize,
    whole: usize,
    model_calls: usize,
}

impl Measured {
    fn split_rate(&self) -> f64 {
        self.split as f64 / self.later_pieces as f64
    }
}

/// Sends the bursts (each piece's replica given), `BATCH` at a time, and checks each: one
/// model call, plus one per piece that reached the other replica; the first piece's response
/// carries the merged answer, a joined piece's is empty, a split piece's is its own answer.
async fn measure(
    apps: [&TestApp; 2],
    models: [&ScriptedModel; 2],
    routes: &[[usize; 3]],
    first_subscriber: u64,
) -> Measured {
    let mut measured = Measured::default();
    for (batch, chunk) in routes.chunks(BATCH).enumerate() {
        let calls_before = models[0].calls() + models[1].calls();
        let subscribers: Vec<String> = (0..chunk.len())
            .map(|n| (first_subscriber + (batch * BATCH + n) as u64).to_string())
            .collect();
        for subscriber in &subscribers {
            apps[0].returning_contact(subscriber).await;
        }
        let mut requests: Vec<Vec<Background<(u16, Value)>>> =
            subscribers.iter().map(|_| Vec::with_capacity(3)).collect();
        let merged_before = total(apps, "burst_pieces_merged_total").await;
        for (piece, text) in PIECES.iter().enumerate() {
            if piece == 2 {
                tokio::time::advance(Duration::from_millis(300)).await;
            }
            for (n, route) in chunk.iter().enumerate() {
                requests[n].push(send_in_background(
                    apps[route[piece]],
                    &subscribers[n],
                    text,
                ));
            }
            pieces_arrived(apps, chunk.len(), piece * chunk.len(), merged_before).await;
        }
        for _ in 0..80 {
            if requests.iter().flatten().all(|r| r.is_finished()) {
                break;
            }
            tokio::time::advance(Duration::from_millis(250)).await;
            keep_alive(apps).await;
            pause().await;
        }
        let mut expected_calls = 0;
        for (route, burst) in chunk.iter().zip(requests) {
            let mut splits = 0;
            for (piece, request) in burst.into_iter().enumerate() {
                let (status, body) = request.await.unwrap();
                assert_eq!(status, 200);
                let split = piece > 0 && route[piece] != route[0];
                let expected: Vec<String> = match piece == 0 || split {
                    true => vec![ANSWER.to_owned()],
                    false => Vec::new(),
                };
                assert_eq!(block_texts(&body), expected, "piece {piece} of {route:?}");
                splits += usize::from(split);
            }
            measured.bursts += 1;
            measured.later_pieces += 2;
            measured.split += splits;
            measured.whole += usize::from(splits == 0);
            expected_calls += 1 + splits;
        }
        let calls = models[0].calls() + models[1].calls() - calls_before;
        assert_eq!(
            calls, expected_calls,
            "one model call per burst, plus one per split piece"
        );
        measured.model_calls += calls;
    }
    measured
}

#[tokio::test(start_paused = true)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn burst_on_two_replicas_a_later_piece_splits_off_exactly_when_it_reaches_the_other_replica()
{
    let _frozen = FrozenClock::freeze();
    let url = fresh_postgres_url().await;
    let (one_model, two_model) = (answers(), answers());
    let one = replica(one_model.clone(), &url).await;
    let two = replica(two_model.clone(), &url).await;
    let apps = [&one, &two];
    let models = [one_model.as_ref(), two_model.as_ref()];

    // Round-robin over every piece: A B A, B A B, …
    let round_robin: Vec<[usize; 3]> = (0..20)
        .map(|b| [(3 * b) % 2, (3 * b + 1) % 2, (3 * b + 2) % 2])
        .collect();
    let even = measure(apps, models, &round_robin, 8_830_000).await;
    // At random, each piece to either replica (a fixed seed: the run is repeatable).
    let mut rng = rand::rngs::StdRng::seed_from_u64(20_260_504);
    let random: Vec<[usize; 3]> = (0..100)
        .map(|_| std::array::from_fn(|_| usize::from(rng.random_bool(0.5))))
        .collect();
    let spread = measure(apps, models, &random, 8_840_000).await;

    for (how, measured) in [("round-robin", &even), ("random", &spread)] {
        eprintln!(
            "{how}: {} bursts, {} later pieces, {} split off (rate {:.3}; computed 0.500), \
             {} bursts whole ({:.3}; computed at random 0.250), {} model calls",
            measured.bursts,
            measured.later_pieces,
            measured.split,
            measured.split_rate(),
            measured.whole,
            measured.whole as f64 / measured.bursts as f64,
            measured.model_calls
        );
    }
    assert_eq!(
        even.split_rate(),
        0.5,
        "round-robin splits every other later piece"
    );
}
