//! One contact cannot take every turn slot (`MAX_TURNS_IN_FLIGHT`): a turn waiting behind its
//! contact's earlier turns holds no slot, a contact has at most two turns in flight and four
//! waiting, and a message beyond them is recorded and answered silently while every other
//! contact is served.
//!
//! The model answers a call only when the test opens its gate (a channel, never the clock),
//! and tokio's clock is frozen: no deadline passes while the test waits, and every wait is
//! bounded in real time.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use manychat_agent::model::mock::{estimate_usage, reply};
use manychat_agent::model::{Message, Model, ModelError, ModelRequest, ModelResponse};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::binding::first_token;
use crate::helpers::*;

const FLOODER: &str = "5553101";
const OTHER: &str = "5553102";
/// Messages the flooding contact sends.
const FLOOD: usize = 80;
const WAITING_PER_CONTACT: usize = 4;

/// A model that answers "Answer to <key>." for the key the call's contact message carries,
/// once the test has opened that key's gate.
struct GatedModel {
    keys: Vec<String>,
    calls: Mutex<Vec<String>>,
    open: watch::Sender<HashSet<String>>,
}

impl GatedModel {
    fn new(keys: Vec<String>) -> Arc<Self> {
        Arc::new(Self {
            keys,
            calls: Mutex::new(Vec::new()),
            open: watch::Sender::new(HashSet::new()),
        })
    }

    fn open(&self, key: &str) {
        self.open.send_modify(|open| {
            open.insert(key.to_owned());
        });
    }

    /// The key of each call, in the order the calls started.
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    /// The key of the contact message: the one written last (history comes before it).
    fn key_of(&self, request: &ModelRequest) -> String {
        let text: String = request
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::User { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        self.keys
            .iter()
            .filter_map(|key| text.rfind(key.as_str()).map(|at| (at, key)))
            .max()
            .map(|(_, key)| key.clone())
            .unwrap_or_default()
    }
}

#[async_trait]
impl Model for GatedModel {
    fn id(&self) -> &str {
        "mock:gated"
    }

    async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let key = self.key_of(request);
        self.calls.lock().unwrap().push(key.clone());
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|open| open.contains(&key)).await;
        let mut response = reply(reply_json(&format!("Answer to {key}.")));
        response.usage = estimate_usage(request, &response);
        Ok(response)
    }
}

fn flood_key(i: usize) -> String {
    format!("Flood {i:02}")
}

/// `text` from `subscriber`, with `token` when given, from a task of its own.
fn send(
    app: &TestApp,
    subscriber: &str,
    text: &str,
    token: Option<&str>,
) -> Background<(u16, Value)> {
    let mut body = json!({"subscriber_id": subscriber, "text": text});
    if let Some(token) = token {
        body["ai_token"] = json!(token);
    }
    let request = app
        .http
        .post(app.message_url())
        .bearer_auth(SECRET)
        .json(&body);
    in_background(async move {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    })
}

/// The flooding contact (bound with its token, or unbound without it) sends 80 messages while
/// its first turns think: `in_flight` of them run, four wait holding no slot, the rest are
/// recorded and answered silently; another contact is answered meanwhile, and the admitted
/// turns are answered once their model calls end.
async fn one_contact_floods(with_token: bool, in_flight: usize) {
    let _frozen = FrozenClock::freeze();
    let mut keys: Vec<String> = (1..=FLOOD).map(flood_key).collect();
    keys.extend(["First words".to_owned(), "Hello".to_owned()]);
    let model = GatedModel::new(keys);
    let app = spawn_app_with(
        AppOptions::new(model.clone())
            .env("CONTACT_TOKENS_ENFORCED", "true")
            .env("MAX_TURNS_IN_FLIGHT", "3"),
    )
    .await;
    model.open("First words");
    let token = bounded(
        "the first message",
        first_token(&app, FLOODER, "First words"),
    )
    .await;
    let token = with_token.then_some(token.as_str());

    let admitted = in_flight + WAITING_PER_CONTACT;
    let mut requests = Vec::new();
    for i in 1..=admitted {
        requests.push(send(&app, FLOODER, &flood_key(i), token));
        if i <= in_flight {
            until(async || model.calls().len() == 1 + i).await;
        } else {
            until(async || series(&app, "turns_waiting").await == (i - in_flight) as f64).await;
        }
        // The waiting task (on this thread) takes its place in the contact's order, an
        // in-process queue on SQLite, before the next arrives.
        let_tasks_run().await;
    }
    let beyond: Vec<_> = (admitted + 1..=FLOOD)
        .map(|i| send(&app, FLOODER, &flood_key(i), token))
        .collect();
    for request in beyond {
        let (status, body) = request.await.unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(block_texts(&body).is_empty(), "answered silently: {body}");
    }
    assert_eq!(model.calls().len(), 1 + in_flight, "no model call beyond");
    assert_eq!(
        series(&app, "turns_waiting").await,
        WAITING_PER_CONTACT as f64
    );

    // Another contact takes the slot the flooding contact could not.
    let other = send(&app, OTHER, "Hello", None);
    until(async || model.calls().len() == 2 + in_flight).await;
    model.open("Hello");
    let (status, body) = other.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        block_texts(&body),
        vec!["Answer to Hello."],
        "served, not shed"
    );

    for i in 1..=admitted {
        model.open(&flood_key(i));
    }
    for (i, request) in requests.into_iter().enumerate() {
        let (status, body) = request.await.unwrap();
        assert_eq!(status, 200);
        let answer = format!("Answer to {}.", flood_key(i + 1));
        assert_eq!(block_texts(&body), vec![answer]);
    }
    let calls = model.calls();
    let flooder_calls: Vec<String> = calls
        .iter()
        .filter(|key| key.starts_with("Flood"))
        .cloned()
        .collect();
    let expected: Vec<String> = (1..=admitted).map(flood_key).collect();
    if with_token {
        assert_eq!(flooder_calls, expected, "its admitted turns run in order");
    } else {
        let mut sorted = flooder_calls.clone();
        sorted.sort();
        assert_eq!(sorted, expected, "each admitted turn runs once");
    }

    let turns = app.turns(FLOODER).await;
    for i in admitted + 1..=FLOOD {
        let at = turns
            .iter()
            .position(|t| t.text == flood_key(i))
            .unwrap_or_else(|| panic!("{} is recorded", flood_key(i)));
        assert!(!turns[at].bound, "outside history");
        assert_eq!(
            turns[at + 1].outcome.as_deref(),
            Some("contact_busy"),
            "with its silent turn"
        );
    }
    let metrics = app.metrics_text().await;
    assert!(
        metrics.contains(&format!(
            "manychat_agent_turns_total{{outcome=\"contact_busy\"}} {}",
            FLOOD - admitted
        )),
        "{metrics}"
    );
    assert_eq!(series(&app, "load_shed_total").await, 0.0);
    assert_eq!(series(&app, "turns_waiting").await, 0.0);
    app.settle().await;
}

#[tokio::test(start_paused = true)]
async fn one_contact_with_its_token_cannot_take_every_turn_slot() {
    // Its bound turns run one at a time (037): one in flight, four waiting.
    one_contact_floods(true, 1).await;
}

#[tokio::test(start_paused = true)]
async fn one_contact_without_its_token_cannot_take_every_turn_slot() {
    // Its unbound turns do not wait for each other: two in flight, four waiting.
    one_contact_floods(false, 2).await;
}
