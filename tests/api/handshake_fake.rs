//! A fake ManyChat that keeps each contact's custom fields and runs the reply flow as a tenant
//! configured for the delivery handshake would: sendFlow "delivers" the reply field's text to
//! the contact (kept in order, so a message that reached them twice shows) and copies the
//! delivery id field into the delivered field. setCustomFields and setCustomFieldByName answer
//! as ManyChat does, its error envelope on a bad body; getInfo returns the fields.
//!
//! A trigger can be held (taken, never answered while a test runs), once per text or every time:
//! the moment a process is killed at. Whether the flow ran for a held trigger is the test's choice.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub const DELIVERED_FIELD: &str = "ai_delivered";
pub const ID_FIELD: &str = "ai_delivery_id";
pub const REPLY_FIELD: &str = "ai_message";

/// Whether the reply flow runs for the `n`th held trigger (from 1).
pub type RunsWhenHeld = fn(usize) -> bool;

#[derive(Default)]
struct State {
    /// Each contact's custom fields, by name.
    fields: HashMap<String, BTreeMap<String, Value>>,
    /// What each contact received, in order.
    inbox: HashMap<String, Vec<String>>,
    /// Triggers still to hold, and the texts already held once.
    to_hold: usize,
    held_texts: HashSet<String>,
    held: usize,
    /// Hold a text's later triggers too (by default only its first is held).
    hold_repeats: bool,
    runs_when_held: Option<RunsWhenHeld>,
    get_info_fails: bool,
    get_infos: usize,
}

#[derive(Clone, Default)]
pub struct FakeManyChat {
    state: Arc<Mutex<State>>,
}

fn error(message: &str) -> ResponseTemplate {
    ResponseTemplate::new(400).set_body_json(json!({
        "status": "error",
        "message": message,
        "details": {"messages": [{"message": message}]},
    }))
}

fn success() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"status": "success"}))
}

/// `subscriber_id` as ManyChat takes it: a number or a digit string.
fn subscriber(body: &Value) -> Option<String> {
    match body.get("subscriber_id")? {
        Value::Number(n) if n.is_u64() => Some(n.to_string()),
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            Some(s.clone())
        }
        _ => None,
    }
}

impl FakeManyChat {
    /// Serves this fake on `server`, above the suite's accept-everything answers.
    pub async fn mount(&self, server: &MockServer) {
        for (verb, route) in [
            ("POST", "/fb/subscriber/setCustomFields"),
            ("POST", "/fb/subscriber/setCustomFieldByName"),
            ("POST", "/fb/sending/sendFlow"),
            ("GET", "/fb/subscriber/getInfo"),
        ] {
            Mock::given(method(verb))
                .and(path(route))
                .respond_with(self.clone())
                .with_priority(1)
                .mount(server)
                .await;
        }
    }

    /// Holds the first trigger of each of the next `count` texts; the flow runs for the `n`th
    /// held one when `runs(n)`.
    pub fn hold(&self, count: usize, runs: RunsWhenHeld) {
        let mut state = self.state.lock().unwrap();
        state.to_hold = count;
        state.runs_when_held = Some(runs);
    }

    /// Holds each of the next `count` triggers, a text's repeats included.
    pub fn hold_every(&self, count: usize, runs: RunsWhenHeld) {
        self.hold(count, runs);
        self.state.lock().unwrap().hold_repeats = true;
    }

    pub fn fail_get_info(&self) {
        self.state.lock().unwrap().get_info_fails = true;
    }

    /// How many triggers were held so far.
    pub fn held(&self) -> usize {
        self.state.lock().unwrap().held
    }

    pub fn get_infos(&self) -> usize {
        self.state.lock().unwrap().get_infos
    }

    /// What the contact received, in order.
    pub fn inbox(&self, subscriber: &str) -> Vec<String> {
        let state = self.state.lock().unwrap();
        state.inbox.get(subscriber).cloned().unwrap_or_default()
    }

    pub fn field(&self, subscriber: &str, name: &str) -> Option<Value> {
        let state = self.state.lock().unwrap();
        state.fields.get(subscriber)?.get(name).cloned()
    }

    fn set_fields(&self, body: &Value) -> ResponseTemplate {
        let Some(key) = subscriber(body) else {
            return error("subscriber_id is required and must be an integer");
        };
        let items = match body.get("fields").and_then(Value::as_array) {
            Some(items) if items.len() > 20 => {
                return error("The number of custom fields is limited to 20");
            }
            Some(items) if !items.is_empty() => items,
            _ => return error("fields is required and must be a non-empty array"),
        };
        let mut written = Vec::new();
        for item in items {
            let (Some(Value::String(name)), None, Some(value)) = (
                item.get("field_name"),
                item.get("field_id"),
                item.get("field_value"),
            ) else {
                return error("each field needs field_name (or field_id) and field_value");
            };
            written.push((name.to_ascii_lowercase(), value.clone()));
        }
        let mut state = self.state.lock().unwrap();
        state.fields.entry(key).or_default().extend(written);
        success()
    }

    fn set_field(&self, body: &Value) -> ResponseTemplate {
        let (Some(key), Some(Value::String(name)), Some(value)) = (
            subscriber(body),
            body.get("field_name"),
            body.get("field_value"),
        ) else {
            return error("subscriber_id, field_name and field_value are required");
        };
        let mut state = self.state.lock().unwrap();
        let fields = state.fields.entry(key).or_default();
        fields.insert(name.to_ascii_lowercase(), value.clone());
        success()
    }

    /// Runs the reply flow (unless a held trigger's flow is not to run), then answers or holds.
    fn send_flow(&self, body: &Value) -> ResponseTemplate {
        let Some(key) = subscriber(body) else {
            return error("subscriber_id is required and must be an integer");
        };
        if body.get("flow_ns").and_then(Value::as_str).is_none() {
            return error("flow_ns is required");
        }
        let mut state = self.state.lock().unwrap();
        let text = state
            .fields
            .get(&key)
            .and_then(|f| f.get(REPLY_FIELD))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let hold = state.to_hold > 0 && (state.hold_repeats || !state.held_texts.contains(&text));
        let runs = if hold {
            state.to_hold -= 1;
            state.held += 1;
            state.held_texts.insert(text.clone());
            state.runs_when_held.is_some_and(|runs| runs(state.held))
        } else {
            true
        };
        if runs {
            state.inbox.entry(key.clone()).or_default().push(text);
            let fields = state.fields.entry(key).or_default();
            if let Some(id) = fields.get(ID_FIELD).cloned() {
                fields.insert(DELIVERED_FIELD.to_owned(), id);
            }
        }
        match hold {
            // Taken and never answered while a test runs: the process waiting on it is killed.
            true => success().set_delay(Duration::from_secs(3600)),
            false => success(),
        }
    }

    fn get_info(&self, request: &Request) -> ResponseTemplate {
        let mut state = self.state.lock().unwrap();
        state.get_infos += 1;
        if state.get_info_fails {
            return ResponseTemplate::new(503).set_body_json(json!({"status": "error"}));
        }
        let key = request
            .url
            .query_pairs()
            .find(|(k, _)| k == "subscriber_id")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        let custom_fields: Vec<Value> = state
            .fields
            .get(&key)
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, (name, value))| {
                json!({"id": i + 1, "name": name, "type": "text", "description": "", "value": value})
            })
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({
            "status": "success",
            "data": {"id": key, "tags": [], "custom_fields": custom_fields},
        }))
    }
}

impl Respond for FakeManyChat {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        if request.url.path() == "/fb/subscriber/getInfo" {
            return self.get_info(request);
        }
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return error("request body is not valid JSON");
        };
        match request.url.path() {
            "/fb/subscriber/setCustomFields" => self.set_fields(&body),
            "/fb/subscriber/setCustomFieldByName" => self.set_field(&body),
            _ => self.send_flow(&body),
        }
    }
}
