//! The owner's console pages through the real router: try it as a test contact (the production
//! route in process, ManyChat's calls recorded and never sent), the conversations and one
//! conversation's turns, the held contacts with the release and hold buttons, the nav, and bad
//! input (unknown ids, hostile text, stale forms).

use std::sync::Arc;

use manychat_agent::ids::SubscriberId;
use manychat_agent::model::mock::{ScriptStep, ScriptedModel, tool_calls};
use manychat_agent::store::OutboxKind;
use reqwest::StatusCode;

use crate::console_helpers::*;
use crate::helpers::*;
use crate::selling::{answer, prospect};

/// The test contact a try-out redirect names.
fn tried_contact(location: &str) -> SubscriberId {
    let digits = location
        .strip_prefix("/console/try?contact=")
        .unwrap_or_else(|| panic!("a try-out redirect: {location}"));
    let digits = digits.split('&').next().unwrap();
    SubscriberId::parse(digits).expect("digits")
}

async fn send_as_test_contact(
    app: &TestApp,
    client: &reqwest::Client,
    session: &str,
    contact: &str,
    text: &str,
) -> reqwest::Response {
    let (_, page) = get_page(app, client, session, "/console/try").await;
    post_page(
        app,
        client,
        session,
        "/console/try",
        &[
            ("csrf", &csrf_in(&page)),
            ("contact", contact),
            ("text", text),
        ],
    )
    .await
}

#[tokio::test]
async fn console_try_it_drives_the_production_route_as_a_test_contact_and_manychat_receives_nothing()
 {
    let model = Arc::new(ScriptedModel::from_steps([
        ScriptStep::ok(tool_calls([prospect()])),
        ScriptStep::ok(answer("Wheel Throwing Basics is <b>120 EUR</b>.")),
        ScriptStep::ok(answer("It starts on Monday.")),
    ]));
    let app = console_app_with(AppOptions::new(model)).await;
    let client = browser();
    let session = logged_in(&app, &client).await;

    let sent = send_as_test_contact(&app, &client, &session, "", "How much is the course?").await;
    assert_eq!(sent.status(), StatusCode::SEE_OTHER);
    let contact = tried_contact(&location(&sent));
    assert!(contact.is_test_contact(), "a new test contact");
    app.settle().await;

    let (status, page) = get_page(&app, &client, &session, &location(&sent)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains("How much is the course?"),
        "the contact's message"
    );
    assert!(
        page.contains("Wheel Throwing Basics is &lt;b&gt;120 EUR&lt;/b&gt;."),
        "the reply as the contact saw it, escaped"
    );
    assert!(
        page.contains(r#"data-action="set_field" data-status="performed""#),
        "{page}"
    );
    assert!(
        page.contains(r#"data-call="setCustomFieldByName""#),
        "{page}"
    );
    assert!(
        !page.contains(SECRET),
        "the shared secret stays on the server"
    );
    assert!(
        page.contains(r#"aria-live="polite""#),
        "the reply area is announced"
    );

    // Continuing the contact: the token its first block set (as ManyChat keeps it) rides on the
    // next request, so the turn is bound and reads its history, as a real contact's would.
    let again = send_as_test_contact(
        &app,
        &client,
        &session,
        contact.as_str(),
        "When does it start?",
    )
    .await;
    assert_eq!(
        tried_contact(&location(&again)),
        contact,
        "the same contact"
    );
    app.settle().await;
    let turns = app.turns(contact.as_str()).await;
    let texts: Vec<(&str, bool)> = turns.iter().map(|t| (t.text.as_str(), t.bound)).collect();
    assert_eq!(
        texts,
        vec![
            ("How much is the course?", true),
            ("Wheel Throwing Basics is <b>120 EUR</b>.", true),
            ("When does it start?", true),
            ("It starts on Monday.", true),
        ],
        "the store holds the exchange, every turn bound"
    );
    let (_, page) = get_page(&app, &client, &session, &location(&again)).await;
    assert!(page.contains("It starts on Monday."));
    assert!(
        app.all_manychat_requests().await.is_empty(),
        "nothing reached ManyChat"
    );
}

#[tokio::test]
async fn console_try_it_writes_only_as_a_test_contact() {
    let app = console_app(&[]).await;
    let client = browser();
    let session = logged_in(&app, &client).await;
    let real = "5550001";
    let refused = send_as_test_contact(&app, &client, &session, real, "Hello").await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    assert!(
        refused.text().await.unwrap().contains("contact"),
        "names the field"
    );
    let (status, page) = get_page(
        &app,
        &client,
        &session,
        &format!("/console/try?contact={real}"),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(page.contains("not a test contact"), "{page}");
    assert!(
        app.store
            .conversation_by_subscriber(&SubscriberId::parse(real).unwrap())
            .await
            .unwrap()
            .is_none(),
        "nothing written as the real contact"
    );
    assert!(app.all_manychat_requests().await.is_empty());
}

#[tokio::test]
async fn console_a_webhook_request_with_a_test_contact_id_sends_nothing_to_manychat() {
    let model = Arc::new(ScriptedModel::from_steps([
        ScriptStep::ok(tool_calls([prospect()])),
        ScriptStep::ok(answer("Hello!")),
    ]));
    let app = console_app_with(AppOptions::new(model)).await;
    let contact = SubscriberId::new_test_contact();
    let (status, body) = app.send(contact.as_str(), "Hi").await;
    app.settle().await;
    assert_eq!(status, 200);
    assert_eq!(block_texts(&body), vec!["Hello!".to_owned()]);
    let turns = app.turns(contact.as_str()).await;
    assert!(
        turns[1]
            .actions
            .as_ref()
            .unwrap()
            .to_string()
            .contains("performed")
    );
    assert!(
        app.all_manychat_requests().await.is_empty(),
        "its writes went to the recorder"
    );
}

/// The demo tenant's handoff tag.
const TAG: &str = "needs-studio-reply";

/// The fake ManyChat shows every contact with the handoff tag (a person has the conversation).
async fn contacts_have_the_tag(app: &TestApp) {
    use wiremock::matchers::{method, path};
    wiremock::Mock::given(method("GET"))
        .and(path("/fb/subscriber/getInfo"))
        .respond_with(
            wiremock::ResponseTemplate::new(200).set_body_json(serde_json::json!({
                "status": "success",
                "data": {"id": "1", "tags": [{"id": 1, "name": TAG}], "custom_fields": []}
            })),
        )
        .with_priority(1)
        .mount(&app.manychat)
        .await;
}

fn paths_to(requests: &[Recorded], endpoint: &str) -> usize {
    requests
        .iter()
        .filter(|r| r.path.ends_with(endpoint))
        .count()
}

#[tokio::test]
async fn console_release_button_is_the_clis_release_once_and_a_second_owner_is_told_it_was_done() {
    let app = console_app_with(AppOptions::new(Arc::new(ScriptedModel::from_steps(vec![])))).await;
    app.send("7001", "I want a refund").await;
    app.settle().await;
    let conversation = app.conversation("7001").await;
    let reason = app.turns("7001").await[1]
        .escalation_reason
        .clone()
        .unwrap();
    let client = browser();
    let owner = logged_in(&app, &client).await;
    let other_owner = logged_in(&app, &client).await;

    let (status, held) = get_page(&app, &client, &owner, "/console/held").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        held.contains(&format!(r#"data-conversation="{}""#, conversation.id)),
        "{held}"
    );
    // Why, in the owner's words for the stored reason.
    let why = manychat_agent::words::reason(manychat_agent::config::Language::En, &reason);
    assert!(held.contains(&why), "why it is held: {held}");
    assert!(
        !held.contains("7001"),
        "the contact is named by its conversation, not its id"
    );

    let sent_before = app.all_manychat_requests().await.len();
    let id = conversation.id.to_string();
    let csrf = csrf_in(&held);
    let form = [("csrf", csrf.as_str()), ("conversation", id.as_str())];
    // A double click: two posts of the same form.
    let first = post_page(&app, &client, &owner, "/console/held/release", &form).await;
    let second = post_page(&app, &client, &owner, "/console/held/release", &form).await;
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&first), "/console/held?done=released");
    assert_eq!(location(&second), "/console/held?done=already_released");
    let (_, other_page) = get_page(&app, &client, &other_owner, "/console/held").await;
    let other_csrf = csrf_in(&other_page);
    let other = post_page(
        &app,
        &client,
        &other_owner,
        "/console/held/release",
        &[("csrf", other_csrf.as_str()), ("conversation", id.as_str())],
    )
    .await;
    assert_eq!(location(&other), "/console/held?done=already_released");

    let released = app.conversation("7001").await;
    assert_eq!(released.hold_release_reason.as_deref(), Some("released"));
    let history = app
        .store
        .hold_releases(
            conversation.escalated_at.unwrap(),
            released.hold_released_at.unwrap() + chrono::Duration::seconds(1),
        )
        .await
        .unwrap();
    assert_eq!(history.len(), 1, "released once");
    assert_eq!(
        app.all_manychat_requests().await.len(),
        sent_before,
        "a release sends nothing to ManyChat"
    );
    let (_, after) = get_page(&app, &client, &owner, &location(&first)).await;
    assert!(after.contains("Handed back"), "{after}");
    assert!(after.contains(r#"id="none-held""#), "{after}");
}

#[tokio::test]
async fn console_hold_button_holds_as_an_escalation_does_once_for_a_double_click() {
    let model = Arc::new(ScriptedModel::from_steps([ScriptStep::ok(answer(
        "Hello!",
    ))]));
    let app = console_app_with(AppOptions::new(model.clone())).await;
    app.send("7002", "Hi").await;
    app.settle().await;
    let conversation = app.conversation("7002").await;
    let client = browser();
    let session = logged_in(&app, &client).await;
    let route = format!("/console/conversations/{}", conversation.id);
    let (_, page) = get_page(&app, &client, &session, &route).await;
    assert!(page.contains(r#"id="hold""#), "{page}");
    let csrf = csrf_in(&page);
    let hold = format!("{route}/hold");
    let first = post_page(&app, &client, &session, &hold, &[("csrf", &csrf)]).await;
    let second = post_page(&app, &client, &session, &hold, &[("csrf", &csrf)]).await;
    assert_eq!(location(&first), format!("{route}?done=held"));
    assert_eq!(location(&second), format!("{route}?done=already_held"));

    let held = app.conversation("7002").await;
    assert!(
        held.escalated_at.is_some(),
        "the hold is on the conversation"
    );
    let handoffs = app
        .outbox()
        .await
        .into_iter()
        .filter(|r| r.kind == OutboxKind::Handoff && r.conversation_id == conversation.id)
        .count();
    assert_eq!(handoffs, 1, "one handoff queued");
    app.worker.run_once().await.unwrap();
    app.settle().await;
    let sent = app.all_manychat_requests().await;
    assert_eq!(paths_to(&sent, "/addTagByName"), 1, "tagged once: {sent:?}");
    assert!(
        sent.iter().any(|r| r.body["tag_name"] == TAG),
        "the tenant's handoff tag"
    );

    // The contact's next message is held for the person: no reply, no model call.
    contacts_have_the_tag(&app).await;
    let calls = model.calls();
    let (status, body) = app.send("7002", "Are you there?").await;
    app.settle().await;
    assert_eq!(status, 200);
    assert!(block_texts(&body).is_empty(), "held: {body}");
    assert_eq!(model.calls(), calls);
    let (_, page) = get_page(&app, &client, &session, &location(&first)).await;
    assert!(page.contains("Held for a person"), "{page}");
    assert!(page.contains(r#"id="release""#), "{page}");
}

#[tokio::test]
async fn console_conversations_are_listed_newest_first_and_hostile_text_is_shown_escaped_and_inert()
{
    let model = Arc::new(ScriptedModel::from_steps([
        ScriptStep::ok(answer("<img src=x onerror=alert(1)> fine")),
        ScriptStep::ok(answer("Second answer")),
        ScriptStep::ok(answer("Test answer")),
    ]));
    let app = console_app_with(AppOptions::new(model)).await;
    let hostile = "<script>alert('x')</script> <b>bold</b> invoice\u{202E}gpj.exe";
    app.send("7101", hostile).await;
    app.send("7102", "Second").await;
    let test = SubscriberId::new_test_contact();
    app.send(test.as_str(), "From a test contact").await;
    app.settle().await;
    let (a, b) = (
        app.conversation("7101").await,
        app.conversation("7102").await,
    );
    let mut expected = [&a, &b];
    expected.sort_by_key(|c| std::cmp::Reverse((c.last_message_at, c.id)));

    let client = browser();
    let session = logged_in(&app, &client).await;
    let (status, list) = get_page(&app, &client, &session, "/console/conversations").await;
    assert_eq!(status, StatusCode::OK);
    let positions: Vec<usize> = expected
        .iter()
        .map(|c| {
            list.find(&format!(r#"data-conversation="{}""#, c.id))
                .unwrap_or_else(|| panic!("listed: {list}"))
        })
        .collect();
    assert!(positions[0] < positions[1], "newest first");
    let tested = app.conversation(test.as_str()).await;
    assert!(
        !list.contains(&tested.id.to_string()),
        "test contacts are hidden by default"
    );
    let (_, with_tests) = get_page(&app, &client, &session, "/console/conversations?tests=1").await;
    assert!(with_tests.contains(&tested.id.to_string()));

    let (status, page) = get_page(
        &app,
        &client,
        &session,
        &format!("/console/conversations/{}", a.id),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    for inert in [
        "&lt;script&gt;alert('x')&lt;/script&gt; &lt;b&gt;bold&lt;/b&gt; invoice[U+202E]gpj.exe",
        "&lt;img src=x onerror=alert(1)&gt; fine",
    ] {
        assert!(page.contains(inert), "shown escaped: {inert}\n{page}");
    }
    for live in ["<script>alert", "<b>bold", "<img", "\u{202E}"] {
        assert!(!page.contains(live), "never live: {live:?}");
    }
}

#[tokio::test]
async fn console_unknown_contact_or_page_link_is_a_404_page() {
    let app = console_app(&[]).await;
    let client = browser();
    let session = logged_in(&app, &client).await;
    for route in [
        format!("/console/conversations/{}", uuid::Uuid::new_v4()),
        "/console/conversations/not-an-id".to_owned(),
        "/console/conversations?after=garbage".to_owned(),
        format!("/console/conversations/{}?after=1.x", uuid::Uuid::new_v4()),
    ] {
        let (status, page) = get_page(&app, &client, &session, &route).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{route}");
        assert!(page.contains(r#"id="not-found""#), "{route}: {page}");
        assert!(
            page.contains(r#"id="nav-conversations""#),
            "the nav stays: {route}"
        );
    }
    let (_, held) = get_page(&app, &client, &session, "/console/held").await;
    let unknown = post_page(
        &app,
        &client,
        &session,
        "/console/held/release",
        &[
            ("csrf", csrf_in(&held).as_str()),
            ("conversation", &uuid::Uuid::new_v4().to_string()),
        ],
    )
    .await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn console_a_stale_form_or_an_ended_session_changes_nothing_and_gets_a_defined_answer() {
    let app = console_app_with(AppOptions::new(Arc::new(ScriptedModel::from_steps(vec![])))).await;
    app.send("7003", "I want a refund").await;
    app.settle().await;
    let id = app.conversation("7003").await.id.to_string();
    let client = browser();
    let session = logged_in(&app, &client).await;
    let other = logged_in(&app, &client).await;
    let (_, other_page) = get_page(&app, &client, &other, "/console/held").await;
    let stale = csrf_in(&other_page);
    for csrf in ["", "forged", stale.as_str()] {
        let refused = post_page(
            &app,
            &client,
            &session,
            "/console/held/release",
            &[("csrf", csrf), ("conversation", id.as_str())],
        )
        .await;
        assert_eq!(refused.status(), StatusCode::FORBIDDEN, "{csrf:?}");
        let refused = post_page(
            &app,
            &client,
            &session,
            &format!("/console/conversations/{id}/hold"),
            &[("csrf", csrf)],
        )
        .await;
        assert_eq!(refused.status(), StatusCode::FORBIDDEN, "{csrf:?}");
    }
    let no_session = post_page(
        &app,
        &client,
        "console_session=1.2.AAAA",
        "/console/held/release",
        &[("csrf", stale.as_str()), ("conversation", id.as_str())],
    )
    .await;
    assert_eq!(no_session.status(), StatusCode::UNAUTHORIZED);
    for route in ["/console/try", "/console/conversations", "/console/held"] {
        let response = client
            .get(format!("{}{route}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{route}");
        assert_eq!(location(&response), "/console/login");
    }
    assert_eq!(
        app.conversation("7003").await.hold_released_at,
        None,
        "still held"
    );
}

#[tokio::test]
async fn console_every_page_has_the_nav_marked_for_screen_readers() {
    let app = console_app(&[]).await;
    let client = browser();
    let session = logged_in(&app, &client).await;
    let pages = [
        ("/console", "nav-running"),
        ("/console/try", "nav-try"),
        ("/console/conversations", "nav-conversations"),
        ("/console/held", "nav-held"),
    ];
    for (route, current) in pages {
        let (status, page) = get_page(&app, &client, &session, route).await;
        assert_eq!(status, StatusCode::OK, "{route}");
        assert!(page.contains(r#"<nav aria-label="Console">"#), "{route}");
        for (_, id) in pages {
            assert!(page.contains(&format!(r#"id="{id}""#)), "{route}: {id}");
        }
        assert!(
            page.contains(&format!(
                r#"id="{current}" href="{route}" aria-current="page""#
            )),
            "{route} is marked current: {page}"
        );
        assert_eq!(page.matches(r#"aria-current="page""#).count(), 1, "{route}");
    }
    let (_, try_page) = get_page(&app, &client, &session, "/console/try").await;
    assert!(try_page.contains(r#"<label for="try-message">"#));
    assert!(try_page.contains(r#"id="try-send""#));
}

#[tokio::test(start_paused = true)]
async fn console_an_expired_session_goes_to_the_login_and_its_form_is_refused_401() {
    let app = console_app_with(AppOptions::new(Arc::new(ScriptedModel::from_steps(vec![])))).await;
    app.send("7004", "I want a refund").await;
    app.settle().await;
    let id = app.conversation("7004").await.id.to_string();
    let client = browser();
    let session = logged_in(&app, &client).await;
    let (status, page) = get_page(&app, &client, &session, "/console/held").await;
    assert_eq!(status, StatusCode::OK);
    let csrf = csrf_in(&page);
    let _frozen = FrozenClock::freeze();
    tokio::time::advance(manychat_agent::console::auth::SESSION_LIFETIME).await;
    let response = client
        .get(format!("{}/console/held", app.address))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), "/console/login");
    let refused = post_page(
        &app,
        &client,
        &session,
        "/console/held/release",
        &[("csrf", csrf.as_str()), ("conversation", id.as_str())],
    )
    .await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(app.conversation("7004").await.hold_released_at, None);
}
