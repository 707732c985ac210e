//! A message sent in pieces gets one answer (`rules.json` `burst.windowMs`, 1500 in the demo
//! tenant): the pieces that arrive within the window join the first piece's turn, each recorded
//! as its own contact message, answered silently, and the model reads them as one message; the
//! first piece's request carries the one reply. Pieces that never join: one after the model
//! started, an unbound one, media, the scripted opening's trigger, a message to a held contact.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::model::Message;
use manychat_agent::model::mock::ScriptedModel;
use manychat_agent::store::{Role, Turn};
use serde_json::{Value, json};

use crate::helpers::*;
use crate::selling::{Backend, edit_rules};

const PIECES: [&str; 3] = ["hi", "I saw your ad", "how much is the wheel course?"];

/// The demo tenant with its burst window kept; `database` replaces the SQLite file.
async fn burst_app(model: Arc<ScriptedModel>, database: Option<String>) -> TestApp {
    let mut options = AppOptions::new(model).with_burst();
    if let Some(url) = database {
        options = options.env("DATABASE_URL", url);
    }
    spawn_app_with(options).await
}

/// The demo's window (1500 ms).
fn window(app: &TestApp) -> Duration {
    let ms = app.rules()["burst"]["windowMs"].as_u64().unwrap();
    assert_eq!(ms, 1500, "the demo tenant waits 1.5 s for more pieces");
    Duration::from_millis(ms)
}

fn send(app: &TestApp, subscriber: &str, text: &str) -> Background<Value> {
    let request = send_in_background(app, subscriber, text);
    in_background(async move { request.await.unwrap().1 })
}

/// Waits until `n` bursts are open on `app`: a first piece waits for more pieces, its window
/// timed from now on the frozen clock.
async fn bursts_open(app: &TestApp, n: f64) {
    until(async || series(app, "bursts_open").await == n).await;
}

/// Waits until `n` turns wait for their place on `app` (behind the contact's open burst).
async fn turns_waiting(app: &TestApp, n: f64) {
    until(async || series(app, "turns_waiting").await == n).await;
}

/// Waits until `n` pieces have joined a burst on `app`.
async fn pieces_merged(app: &TestApp, n: f64) {
    until(async || series(app, "burst_pieces_merged_total").await == n).await;
}

/// Moves the frozen clock and lets the timers it woke run (the app's tasks share the thread).
async fn advance(by: Duration) {
    tokio::time::advance(by).await;
    let_tasks_run().await;
}

/// The fenced contact message of the model's `call`-th request (after the history).
fn contact_message(model: &ScriptedModel, call: usize) -> String {
    // The turn's own message comes after the history's messages.
    let request = &model.requests()[call];
    let Some(text) = request.messages.iter().rev().find_map(|m| match m {
        Message::User { text } if text.contains(manychat_agent::agent::prompt::LABEL_CONTACT) => {
            Some(text)
        }
        _ => None,
    }) else {
        return String::new();
    };
    let label = manychat_agent::agent::prompt::LABEL_CONTACT;
    text.split_once(label)
        .map(|(_, message)| message.to_owned())
        .unwrap_or_default()
}

/// The response of a joined piece: a valid v2 block, no messages, the callback registered.
fn assert_joined_response(body: &Value) {
    assert_eq!(body["version"], "v2", "{body}");
    assert_eq!(body["content"]["messages"], json!([]), "{body}");
    assert!(
        body["content"]["external_message_callback"]["url"].is_string(),
        "the callback is still registered: {body}"
    );
}

/// Three pieces, the third sent 1 s after the second, against `app`: one model call, after the
/// window restarted by the last piece; one reply, on the first piece's request.
async fn three_pieces_make_one_turn(app: TestApp, model: Arc<ScriptedModel>, subscriber: &str) {
    let window = window(&app);
    app.returning_contact(subscriber).await;
    let first = send(&app, subscriber, PIECES[0]);
    bursts_open(&app, 1.0).await;
    let (_, second) = app.send(subscriber, PIECES[1]).await;
    advance(Duration::from_millis(1000)).await;
    let (_, third) = app.send(subscriber, PIECES[2]).await;
    // 2 s after the first piece: past its own window, but the third piece restarted it.
    advance(Duration::from_millis(1000)).await;
    // Its timers ran: the window is still open, so the model cannot have been called.
    bursts_open(&app, 1.0).await;
    assert_eq!(
        model.calls(),
        0,
        "the turn waits for the window after the last piece"
    );
    advance(window - Duration::from_millis(1000)).await;
    let first = first.await.unwrap();

    assert_eq!(model.calls(), 1, "one model call for the three pieces");
    assert_eq!(block_texts(&first), vec!["The wheel course is 120 euros."]);
    assert_joined_response(&second);
    assert_joined_response(&third);
    assert!(
        contact_message(&model, 0).contains(&PIECES.join("\n")),
        "the model reads the pieces in order, inside the fence, as one message: {}",
        contact_message(&model, 0)
    );
    assert_one_turn_of_three_pieces(&app, subscriber, "answered_inline").await;
    assert!(
        app.outbox().await.is_empty(),
        "nothing is owed: the joined pieces promised no reply of their own"
    );
    let metrics = app.metrics_text().await;
    assert!(
        metrics.contains("manychat_agent_burst_pieces_merged_total 2"),
        "{metrics}"
    );
}

fn one_answer() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::replies([reply_json(
        "The wheel course is 120 euros.",
    )]))
}

/// Each turn's role, text and outcome, in order.
fn role_text_outcome(turns: &[Turn]) -> Vec<(Role, &str, Option<&str>)> {
    turns
        .iter()
        .map(|t| (t.role, t.text.as_str(), t.outcome.as_deref()))
        .collect()
}

/// The contact's record after a three-piece burst: the three pieces in order (the first
/// `burst_merged`, the others `burst_joined`) and one agent turn with `outcome`.
async fn assert_one_turn_of_three_pieces(app: &TestApp, subscriber: &str, outcome: &str) {
    let turns = app.turns(subscriber).await;
    let recorded = role_text_outcome(&turns);
    assert_eq!(
        recorded,
        [
            (Role::User, PIECES[0], Some("burst_merged")),
            (Role::User, PIECES[1], Some("burst_joined")),
            (Role::User, PIECES[2], Some("burst_joined")),
            (Role::Agent, "The wheel course is 120 euros.", Some(outcome)),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn burst_three_pieces_make_one_model_call_and_three_contact_messages() {
    let _frozen = FrozenClock::freeze();
    let model = one_answer();
    let app = burst_app(model.clone(), None).await;
    three_pieces_make_one_turn(app, model, "8101").await;
}

#[tokio::test(start_paused = true)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn burst_three_pieces_make_one_model_call_on_postgres() {
    let _frozen = FrozenClock::freeze();
    let url = fresh_postgres_url().await;
    let model = one_answer();
    let app = burst_app(model.clone(), Some(url)).await;
    three_pieces_make_one_turn(app, model, "8102").await;
}

/// The first piece's client goes during the window, after the second piece joined and before
/// the third: the merged turn still runs once, the deferred way, and its one reply reaches the
/// contact through the outbox (the reply field, then the reply flow), sent once.
#[tokio::test(start_paused = true)]
async fn burst_a_first_piece_whose_client_went_during_the_window_is_answered_through_the_outbox() {
    let _frozen = FrozenClock::freeze();
    let model = one_answer();
    let app = burst_app(model.clone(), None).await;
    let window = window(&app);
    app.returning_contact("8103").await;
    let http = app.http.clone();
    let url = app.message_url();
    let first = tokio::spawn(async move {
        http.post(url)
            .bearer_auth(SECRET)
            .json(&json!({"subscriber_id": "8103", "text": PIECES[0]}))
            .send()
            .await
    });
    bursts_open(&app, 1.0).await;
    let (_, second) = app.send("8103", PIECES[1]).await;
    assert_joined_response(&second);
    // The client gives up on the first piece: its connection closes.
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    bursts_open(&app, 1.0).await;
    advance(Duration::from_millis(500)).await;
    let third = send(&app, "8103", PIECES[2]);
    pieces_merged(&app, 2.0).await;
    advance(window).await;
    assert_joined_response(&third.await.unwrap());
    app.settle_advancing().await;

    assert_eq!(model.calls(), 1, "one model call for the three pieces");
    assert!(
        contact_message(&model, 0).contains(&PIECES.join("\n")),
        "{}",
        contact_message(&model, 0)
    );
    assert!(app.manychat_requests().await.is_empty(), "nothing sent yet");
    app.worker.run_once().await.unwrap();
    let sent: Vec<(String, Value)> = app
        .manychat_requests()
        .await
        .into_iter()
        .map(|r| {
            let what = match r.path.as_str() {
                "/fb/subscriber/setCustomFieldByName" => r.body["field_value"].clone(),
                _ => r.body["flow_ns"].clone(),
            };
            (r.path, what)
        })
        .collect();
    assert_eq!(
        sent,
        vec![
            (
                "/fb/subscriber/setCustomFieldByName".to_owned(),
                json!("The wheel course is 120 euros.")
            ),
            ("/fb/sending/sendFlow".to_owned(), json!(REPLY_FLOW)),
        ],
        "the one reply, once"
    );
    assert_eq!(
        app.worker.run_once().await.unwrap(),
        0,
        "nothing more is owed"
    );
    assert_one_turn_of_three_pieces(&app, "8103", "deferred").await;
}

#[tokio::test(start_paused = true)]
async fn burst_a_piece_after_the_model_started_is_a_new_turn() {
    let _frozen = FrozenClock::freeze();
    let model = slow_then("First answer.", Duration::from_secs(3), "Second answer.");
    let app = burst_app(model.clone(), None).await;
    let window = window(&app);
    app.returning_contact("8103").await;
    let first = send(&app, "8103", "First question");
    bursts_open(&app, 1.0).await;
    advance(window).await;
    until(async || model.calls() == 1).await;
    let second = send(&app, "8103", "Second question");
    turns_waiting(&app, 1.0).await;
    assert!(
        !second.is_finished(),
        "it waits for its place, not in the closed burst"
    );

    advance(Duration::from_secs(3)).await;
    assert_eq!(block_texts(&first.await.unwrap()), vec!["First answer."]);
    // The new turn waits for pieces of its own.
    bursts_open(&app, 1.0).await;
    assert_eq!(model.calls(), 1);
    advance(window).await;
    assert_eq!(block_texts(&second.await.unwrap()), vec!["Second answer."]);
    assert!(contact_message(&model, 0).contains("First question"));
    assert!(!contact_message(&model, 0).contains("Second question"));
    let turns = app.turns("8103").await;
    let texts: Vec<&str> = turns.iter().map(|t| t.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "First question",
            "First answer.",
            "Second question",
            "Second answer."
        ]
    );
    assert!(
        turns
            .iter()
            .all(|t| t.role == Role::Agent || t.outcome.is_none())
    );
}

#[tokio::test(start_paused = true)]
async fn burst_window_0_answers_every_message_at_once() {
    let _frozen = FrozenClock::freeze();
    let model = slow_then("First answer.", Duration::from_secs(2), "Second answer.");
    let app = spawn_app_with(
        AppOptions::new(model.clone())
            .with_burst()
            .edit(|dir| edit_rules(dir, |r| r["burst"]["windowMs"] = 0.into())),
    )
    .await;
    app.returning_contact("8104").await;
    let first = send(&app, "8104", "First question");
    until(async || model.calls() == 1).await;
    let second = send(&app, "8104", "Second question");
    turns_waiting(&app, 1.0).await;
    assert_eq!(
        model.calls(),
        1,
        "the second message waits for the first turn (037)"
    );
    advance(Duration::from_secs(2)).await;
    until(async || model.calls() == 2).await;
    assert_eq!(block_texts(&first.await.unwrap()), vec!["First answer."]);
    assert_eq!(block_texts(&second.await.unwrap()), vec!["Second answer."]);
    let turns = app.turns("8104").await;
    assert_eq!(turns.len(), 4);
    assert!(
        turns
            .iter()
            .all(|t| t.role == Role::Agent || t.outcome.is_none())
    );
}

#[tokio::test(start_paused = true)]
async fn burst_an_escalation_keyword_in_a_later_piece_escalates_the_merged_turn() {
    let _frozen = FrozenClock::freeze();
    let model = one_answer();
    let app = burst_app(model.clone(), None).await;
    let window = window(&app);
    app.returning_contact("8105").await;
    let first = send(&app, "8105", "hi");
    bursts_open(&app, 1.0).await;
    let (_, second) = app.send("8105", "I would like a refund please").await;
    advance(window).await;
    let first = first.await.unwrap();
    app.settle().await;

    assert_eq!(model.calls(), 0, "a keyword escalates before the model");
    assert_eq!(block_texts(&first), vec![app.escalation_copy()]);
    assert_joined_response(&second);
    let turns = app.turns("8105").await;
    assert_eq!(turns.len(), 3, "{turns:?}");
    assert_eq!(turns[2].outcome.as_deref(), Some("escalated_precheck"));
    assert_eq!(
        turns[2].escalation_reason.as_deref(),
        Some("escalation_keyword")
    );
    assert!(app.conversation("8105").await.escalated_at.is_some());
}

#[tokio::test(start_paused = true)]
async fn burst_never_waits_past_the_race_deadline_minus_2_seconds() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(ScriptedModel::replies([
        reply_json("One answer."),
        reply_json("Next answer."),
    ]));
    let app = burst_app(model.clone(), None).await;
    app.returning_contact("8106").await;
    let first = send(&app, "8106", "piece 0");
    bursts_open(&app, 1.0).await;
    // A piece every second, each inside the window: the race deadline is 8 s, so the model
    // starts 6 s after the first piece whatever comes next.
    for i in 1..6 {
        advance(Duration::from_secs(1)).await;
        let (_, body) = app.send("8106", &format!("piece {i}")).await;
        assert_joined_response(&body);
    }
    bursts_open(&app, 1.0).await;
    assert_eq!(model.calls(), 0);
    advance(Duration::from_secs(1)).await;
    until(async || model.calls() == 1).await;
    assert_eq!(block_texts(&first.await.unwrap()), vec!["One answer."]);
    let merged: Vec<String> = (0..6).map(|i| format!("piece {i}")).collect();
    assert!(contact_message(&model, 0).contains(&merged.join("\n")));

    // 7 s after the first piece: the burst has closed, this is a turn of its own.
    advance(Duration::from_secs(1)).await;
    let late = send(&app, "8106", "piece 7");
    bursts_open(&app, 1.0).await;
    advance(Duration::from_millis(1500)).await;
    assert_eq!(block_texts(&late.await.unwrap()), vec!["Next answer."]);
    assert_eq!(model.calls(), 2);
    assert!(!contact_message(&model, 1).contains("piece 5"));
}

/// After "hi" and a message that must not join it: the first model call read "hi", no contact
/// message carries a burst's mark, and no piece was counted as merged.
async fn assert_not_joined(app: &TestApp, model: &ScriptedModel, subscriber: &str) {
    let contact = contact_message(model, 0);
    assert!(contact.contains("hi"), "{contact}");
    let turns = app.turns(subscriber).await;
    assert!(
        turns
            .iter()
            .all(|t| t.role == Role::Agent || t.outcome.is_none()),
        "nothing merged: {turns:?}"
    );
    let metrics = app.metrics_text().await;
    assert!(
        metrics.contains("manychat_agent_burst_pieces_merged_total 0"),
        "{metrics}"
    );
}

#[tokio::test(start_paused = true)]
async fn burst_the_scripted_openings_trigger_never_joins() {
    let _frozen = FrozenClock::freeze();
    let model = one_answer();
    let app = burst_app(model.clone(), None).await;
    let window = window(&app);
    let rules = app.rules();
    let trigger = rules["openingTrigger"]["keywords"][0].as_str().unwrap();
    let opening = rules["openingTrigger"]["message"].as_str().unwrap();
    app.returning_contact("8107").await;
    let first = send(&app, "8107", "hi");
    bursts_open(&app, 1.0).await;
    let second = send(&app, "8107", trigger);
    turns_waiting(&app, 1.0).await;
    assert!(!second.is_finished(), "the trigger waits for its place");
    advance(window).await;
    assert_eq!(
        block_texts(&first.await.unwrap()),
        vec!["The wheel course is 120 euros."]
    );
    assert_eq!(block_texts(&second.await.unwrap()), vec![opening]);
    assert_eq!(model.calls(), 1);
    assert!(!contact_message(&model, 0).contains(trigger));
    assert_not_joined(&app, &model, "8107").await;
}

#[tokio::test(start_paused = true)]
async fn burst_an_unbound_message_never_joins() {
    let _frozen = FrozenClock::freeze();
    let model = Arc::new(ScriptedModel::replies([
        reply_json("Unbound answer."),
        reply_json("The wheel course is 120 euros."),
    ]));
    let app = spawn_app_with(
        AppOptions::new(model.clone())
            .with_burst()
            .env("CONTACT_TOKENS_ENFORCED", "true"),
    )
    .await;
    let window = window(&app);
    let token = "a-token-the-contact-holds";
    let conversation = app.conversation("8108").await;
    app.store
        .set_token(
            conversation.id,
            &manychat_agent::tokens::hash(token),
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let body = json!({"subscriber_id": "8108", "text": "hi", "ai_token": token});
    let http = app.http.clone();
    let url = app.message_url();
    let first = in_background(async move {
        let response = http.post(url).bearer_auth(SECRET).json(&body).send().await;
        response.unwrap().json::<Value>().await.unwrap()
    });
    bursts_open(&app, 1.0).await;
    // Without the token: unbound, answered on its own at once (it neither waits nor blocks).
    let (_, unbound) = app.send("8108", "what time is it").await;
    assert_eq!(block_texts(&unbound), vec!["Unbound answer."]);
    assert!(contact_message(&model, 0).contains("what time is it"));
    advance(window).await;
    assert_eq!(
        block_texts(&first.await.unwrap()),
        vec!["The wheel course is 120 euros."]
    );
    assert!(!contact_message(&model, 1).contains("what time is it"));
    // The bound turn's model call is the second one.
    assert_eq!(model.calls(), 2);
    assert!(contact_message(&model, 1).contains("hi"));
    let turns = app.turns("8108").await;
    assert!(
        turns
            .iter()
            .all(|t| t.role == Role::Agent || t.outcome.is_none()),
        "nothing merged: {turns:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn burst_a_media_message_never_joins() {
    let _frozen = FrozenClock::freeze();
    let files = wiremock::MockServer::start().await;
    let model = one_answer();
    let app = spawn_app_with(
        AppOptions::new(model.clone())
            .with_burst()
            .env("MANYCHAT_MEDIA_BASE", files.uri()),
    )
    .await;
    let window = window(&app);
    let media_fallback = app.rules()["messages"]["mediaFallback"]
        .as_str()
        .unwrap()
        .to_owned();
    app.returning_contact("8109").await;
    let first = send(&app, "8109", "hi");
    bursts_open(&app, 1.0).await;
    let pdf = format!(
        "{}/1234567/wa/2026/11/30/original_0a1b2c3d4e5f.pdf",
        files.uri()
    );
    let second = send(&app, "8109", &pdf);
    turns_waiting(&app, 1.0).await;
    assert!(
        !second.is_finished(),
        "the media message waits for its place"
    );
    advance(window).await;
    assert_eq!(
        block_texts(&first.await.unwrap()),
        vec!["The wheel course is 120 euros."]
    );
    assert_eq!(block_texts(&second.await.unwrap()), vec![media_fallback]);
    assert_eq!(model.calls(), 1);
    assert!(!contact_message(&model, 0).contains("[media]"));
    assert_not_joined(&app, &model, "8109").await;
}

#[tokio::test(start_paused = true)]
async fn burst_a_message_to_a_contact_held_for_a_person_never_joins() {
    let _frozen = FrozenClock::freeze();
    let model = one_answer();
    // Without a handoff tag the hold lasts its hours: no tag read can end it here.
    let app = spawn_app_with(AppOptions::new(model.clone()).with_burst().edit(|dir| {
        edit_rules(dir, |r| {
            r["handoff"].as_object_mut().unwrap().remove("tag");
        })
    }))
    .await;
    app.returning_contact("8110").await;
    // A keyword hands the contact to a person: the hold starts.
    let escalating = send(&app, "8110", "I want a refund");
    bursts_open(&app, 1.0).await;
    advance(window(&app)).await;
    escalating.await.unwrap();
    app.settle_advancing().await;
    let before = app.turns("8110").await.len();

    let (_, one) = app.send("8110", "hello?").await;
    app.settle_advancing().await;
    let (_, two) = app.send("8110", "anyone there?").await;
    app.settle_advancing().await;
    for body in [&one, &two] {
        assert!(block_texts(body).is_empty(), "held: {body}");
    }
    assert_eq!(model.calls(), 0);
    let turns = app.turns("8110").await;
    let after: Vec<(&str, Option<&str>)> = turns[before..]
        .iter()
        .map(|t| (t.text.as_str(), t.outcome.as_deref()))
        .collect();
    assert_eq!(
        after,
        [
            ("hello?", None),
            ("", Some("held")),
            ("anyone there?", None),
            ("", Some("held")),
        ],
        "each message is held on its own, none waits for more pieces"
    );
}

#[tokio::test(start_paused = true)]
#[ignore = "needs TEST_DATABASE_URL (PostgreSQL)"]
async fn burst_a_piece_that_reaches_another_replica_is_its_own_turn_behind_the_burst() {
    let _frozen = FrozenClock::freeze();
    let url = fresh_postgres_url().await;
    let one_model = one_answer();
    let two_model = Arc::new(ScriptedModel::replies([reply_json("Its own answer.")]));
    let one = burst_app(one_model.clone(), Some(url.clone())).await;
    let two = burst_app(two_model.clone(), Some(url)).await;
    let window = window(&one);
    one.returning_contact("8111").await;
    let first = send(&one, "8111", "hi");
    bursts_open(&one, 1.0).await;
    let (_, joined) = one.send("8111", "I saw your ad").await;
    assert_joined_response(&joined);
    // The other replica knows no burst: its piece waits for the contact's ticket.
    let elsewhere = send(&two, "8111", "how much is the wheel course?");
    turns_waiting(&two, 1.0).await;
    assert!(!elsewhere.is_finished());
    advance(window).await;
    assert_eq!(
        block_texts(&first.await.unwrap()),
        vec!["The wheel course is 120 euros."]
    );
    assert!(contact_message(&one_model, 0).contains("hi\nI saw your ad"));
    // Its own turn, once the burst's turn settled, after a window of its own.
    // The other replica polls the ticket on the store between its sleeps: the clock moves in
    // steps shorter than its first poll (20 ms), each with a moment of real time, until its turn
    // has answered. Longer steps let a busy machine's slow polls run out the turn's wait.
    advance_by_steps_until(
        Duration::from_millis(10),
        Duration::from_secs(60),
        async || elsewhere.is_finished(),
    )
    .await;
    assert_eq!(
        block_texts(&elsewhere.await.unwrap()),
        vec!["Its own answer."]
    );
    assert!(contact_message(&two_model, 0).contains("how much is the wheel course?"));
    assert_eq!(
        one.turns("8111").await.len(),
        5,
        "three messages, two answers"
    );
}

/// A burst killed in its window is answered: the silent response to a joined piece promises the
/// gathering turn's reply, so the first piece and its promise are on disk before that response
/// leaves. The process is killed before the window closes (its work never goes on: the clock
/// stays frozen and it is stopped); on SQLite the restarted process answers the pieces together,
/// once, through the outbox, and hands nobody over.
async fn burst_killed_in_its_window_is_answered(backend: Backend) {
    let _frozen = FrozenClock::freeze();
    let database = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some(fresh_postgres_url().await),
    };
    let killed_model = one_answer();
    let killed = burst_app(killed_model.clone(), database).await;
    killed.returning_contact("8131").await;
    let first = send(&killed, "8131", PIECES[0]);
    bursts_open(&killed, 1.0).await;
    let (_, second) = killed.send("8131", PIECES[1]).await;
    assert_joined_response(&second);
    let (_, third) = killed.send("8131", PIECES[2]).await;
    assert_joined_response(&third);

    // What a kill leaves now: the store as it is.
    let turns = killed.turns("8131").await;
    let recorded = role_text_outcome(&turns);
    assert_eq!(
        recorded,
        [
            (Role::User, PIECES[0], Some("burst_merged")),
            (Role::User, PIECES[1], Some("burst_joined")),
            (Role::User, PIECES[2], Some("burst_joined")),
        ],
        "the first piece is on disk before any piece is answered silently"
    );
    let owed: Vec<_> = killed
        .outbox()
        .await
        .into_iter()
        .map(|row| (row.kind, row.payload["promise"].is_object()))
        .collect();
    assert_eq!(
        owed,
        [
            (manychat_agent::store::OutboxKind::Reply, true),
            (manychat_agent::store::OutboxKind::Handoff, false),
        ],
        "the gathering turn's promise: one reply row (and its fallback handoff)"
    );
    drop(first);
    killed.server.abort();
    assert_eq!(killed_model.calls(), 0, "killed before the model started");
    if let Backend::Postgres = backend {
        // A survivor takes a dead replica's promise over (`takeover`, tests/api/takeover.rs).
        return;
    }

    let model = one_answer();
    let restarted = spawn_app_with(AppOptions::new(model.clone()).with_burst().env(
        "DATABASE_URL",
        format!("sqlite://{}", killed.database_path.display()),
    ))
    .await;
    until(async || {
        restarted
            .turns("8131")
            .await
            .iter()
            .any(|t| t.outcome.as_deref() == Some("deferred"))
    })
    .await;
    assert_eq!(model.calls(), 1);
    assert!(
        contact_message(&model, 0).contains(&PIECES.join("\n")),
        "the restart reads the pieces together: {}",
        contact_message(&model, 0)
    );
    restarted.settle_advancing().await;
    let worker = restarted.worker.clone();
    let delivery = tokio::spawn(async move { worker.run_once().await });
    advance_by_steps_until(
        Duration::from_millis(10),
        Duration::from_secs(30),
        async || delivery.is_finished(),
    )
    .await;
    assert_eq!(delivery.await.unwrap().unwrap(), 1, "one row to deliver");
    assert_eq!(
        restarted
            .manychat_texts("/fb/subscriber/setCustomFieldByName", "field_value")
            .await,
        ["The wheel course is 120 euros."],
        "the real answer, once"
    );
    assert!(
        restarted
            .manychat_requests_to("/fb/subscriber/addTagByName")
            .await
            .is_empty(),
        "nobody handed over: the turn was answered"
    );
    assert!(restarted.all_delivered().await, "nothing more is owed");
}

on_both_backends!(
    #[tokio::test(start_paused = true)]
    burst_killed_in_its_window_is_answered
);
