//! The console's pages as the owner uses them, in headless chromium: a try-out exchange with
//! what the agent did beside the reply, continuing the same test contact, the release and hold
//! buttons (a double click releases once), hostile contact text shown inert, and every page
//! saved at 1280 and 375 px under `target/console-screenshots/` with no sideways scroll at 375.
//! `docs/console.png` (the README's picture) is `try-exchange-detail.png` from a run (the Try it
//! page at 1280 × 800, scrolled to the exchange), copied by hand. The pages are found by their elements' ids and data attributes, not by their words.

use std::sync::Arc;
use std::time::Duration;

use manychat_agent::ids::SubscriberId;
use manychat_agent::model::ToolCall;
use manychat_agent::model::mock::{ScriptStep, ScriptedModel, call, reply, tool_calls};
use manychat_agent::store::{BrowsedTurn, OutboxKind, TurnsPage};
use serde_json::{Value, json};

use crate::driver::{Browser, PHONE};
use crate::helpers::console_login::{PASSWORD, hash};
use crate::helpers::*;

/// The release button's form posts here.
const RELEASE: &str = "/console/held/release";
/// The demo tenant's handoff tag.
const HANDOFF_TAG: &str = "needs-studio-reply";

async fn console_app(model: ScriptedModel) -> TestApp {
    spawn_app_with(AppOptions::new(Arc::new(model)).env("CONSOLE_PASSWORD_HASH", hash())).await
}

fn answer(text: &str) -> ScriptStep {
    ScriptStep::ok(reply(reply_json(text)))
}

fn set_field(id: &str, value: &str) -> ToolCall {
    call(
        format!("set_{id}"),
        "set_field",
        json!({"field": id, "value": value}),
    )
}

/// A model that stages a prospect's field writes, a tag and the course's flow, then answers.
fn stages_a_tag_and_a_flow(text: &str) -> ScriptedModel {
    ScriptedModel::from_steps([
        ScriptStep::ok(tool_calls([
            set_field("intent", "prospect"),
            set_field("course", "wheel-basics"),
            call("add", "add_tag", json!({"tag": "interested_wheel"})),
            call(
                "flow",
                "send_flow",
                json!({"flow": "wheel_basics_guide", "contactAsked": true}),
            ),
        ])),
        answer(text),
    ])
}

/// Writes `text` in the try-out's box and sends it; the browser follows the redirect.
async fn try_message(browser: &Browser, text: &str) {
    browser.type_into("#try-message", text).await;
    browser.submit("#try-send").await;
    assert_eq!(browser.path().await, "/console/try");
}

/// Reloads the page shown now (what came after the reply: its actions, its calls).
async fn reload(browser: &Browser) {
    browser.mark_page().await;
    browser.client().refresh().await.unwrap();
    browser.until_new_page().await;
}

/// The texts of every element `css` selects, in page order.
async fn texts(browser: &Browser, css: &str) -> Vec<String> {
    let found = browser
        .client()
        .find_all(fantoccini::Locator::Css(css))
        .await
        .unwrap();
    let mut texts = Vec::with_capacity(found.len());
    for element in found {
        texts.push(element.text().await.unwrap());
    }
    texts
}

/// How many elements `css` selects.
async fn count(browser: &Browser, css: &str) -> usize {
    browser
        .client()
        .find_all(fantoccini::Locator::Css(css))
        .await
        .unwrap()
        .len()
}

/// The contact's turns as the console reads them, oldest first.
async fn browsed(app: &TestApp, contact: &str) -> Vec<BrowsedTurn> {
    let conversation = app.conversation(contact).await;
    let page = TurnsPage {
        after: None,
        limit: 100,
    };
    let mut turns = app
        .store
        .conversation_turns(conversation.id, page)
        .await
        .unwrap();
    turns.reverse();
    turns
}

#[tokio::test]
async fn console_try_it_shows_the_reply_its_actions_and_recorded_calls_and_manychat_receives_nothing()
 {
    let app = console_app(stages_a_tag_and_a_flow("Here is the wheel course guide.")).await;
    let browser = Browser::open(&app).await;
    browser.log_in(PASSWORD).await;
    browser.goto("/console/try").await;
    try_message(&browser, "How much is the wheel course?").await;
    let contact = browser.text("#try-contact").await;
    assert!(
        SubscriberId::parse(&contact).unwrap().is_test_contact(),
        "a new test contact: {contact}"
    );
    app.settle().await;
    reload(&browser).await;

    let said = texts(&browser, "#try-replies article.turn p.text").await;
    assert_eq!(
        said,
        [
            "How much is the wheel course?",
            "Here is the wheel course guide."
        ],
        "the message and the reply as the contact saw it"
    );
    assert!(
        browser
            .has("#try-replies article.turn[data-role=contact]")
            .await
    );
    let agent = "#try-replies article.turn[data-role=agent]";
    for (tool, status) in [
        ("set_field", "performed"),
        ("add_tag", "performed"),
        ("send_flow", "performed"),
    ] {
        let action = format!("{agent} li[data-action={tool}][data-status={status}]");
        assert!(browser.has(&action).await, "{action}");
        assert!(browser.find(&action).await.is_displayed().await.unwrap());
    }
    assert_eq!(
        browser.text(&format!("{agent} dd[data-part=steps]")).await,
        "2",
        "a tool step and the answer"
    );
    for endpoint in ["setCustomFieldByName", "addTagByName", "sendFlow"] {
        let recorded = format!("#try-calls li[data-call={endpoint}]");
        assert!(browser.has(&recorded).await, "{recorded}");
    }
    let tagged = browser.text("#try-calls li[data-call=addTagByName]").await;
    assert!(tagged.contains("interested-wheel-course"), "{tagged}");

    // What the store holds is what the page shows.
    let turns = browsed(&app, &contact).await;
    assert_eq!(turns.len(), 2);
    let actions = turns[1].turn.actions.clone().unwrap();
    let statuses: Vec<(&str, &str)> = actions
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["tool"].as_str().unwrap(), a["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("set_field", "performed"),
            ("set_field", "performed"),
            ("add_tag", "performed"),
            ("send_flow", "performed"),
        ]
    );
    assert_eq!(turns[1].steps, Some(2), "the turn's record keeps its steps");
    assert!(
        app.all_manychat_requests().await.is_empty(),
        "the fake ManyChat received nothing"
    );
    browser.screenshots("try-exchange").await;
    // The README's picture: the exchange and what the agent did, at 1280 × 800.
    browser
        .script("window.scrollTo(0, document.getElementById('try-title').offsetTop - 16);")
        .await;
    browser.screenshot("try-exchange-detail").await;
}

#[tokio::test]
async fn console_try_it_continues_the_same_test_contact_bound_to_its_first_message() {
    let model = ScriptedModel::from_steps([
        answer("The wheel course is 120 EUR."),
        answer("It starts on Monday."),
    ]);
    let app = console_app(model).await;
    let browser = Browser::open(&app).await;
    browser.log_in(PASSWORD).await;
    browser.goto("/console/try").await;
    try_message(&browser, "How much is the course?").await;
    let contact = browser.text("#try-contact").await;
    app.settle().await;
    try_message(&browser, "When does it start?").await;
    app.settle().await;
    reload(&browser).await;

    assert_eq!(
        browser.text("#try-contact").await,
        contact,
        "the same contact"
    );
    assert_eq!(
        texts(&browser, "#try-replies article.turn p.text").await,
        [
            "How much is the course?",
            "The wheel course is 120 EUR.",
            "When does it start?",
            "It starts on Monday.",
        ]
    );
    let turns = app.turns(&contact).await;
    let stored: Vec<(&str, bool)> = turns.iter().map(|t| (t.text.as_str(), t.bound)).collect();
    assert_eq!(
        stored,
        [
            ("How much is the course?", true),
            ("The wheel course is 120 EUR.", true),
            ("When does it start?", true),
            ("It starts on Monday.", true),
        ],
        "one conversation, the second message bound by the first reply's token"
    );
    assert_eq!(
        count(
            &browser,
            "#try-replies article.turn[data-role=contact]:not(:has(.warn))"
        )
        .await,
        2,
        "no turn shown unbound"
    );
    assert!(app.all_manychat_requests().await.is_empty());
    // A new contact starts empty.
    browser.submit("#try-new").await;
    assert!(!browser.has("#try-contact").await);
    assert_eq!(count(&browser, "#try-replies article.turn").await, 0);
}

/// A contact escalated by its message (the refund rule): held for a person now.
async fn held_contact(app: &TestApp, subscriber: &str) -> uuid::Uuid {
    let (status, _) = app.send(subscriber, "I want a refund").await;
    assert_eq!(status, 200);
    app.settle().await;
    let conversation = app.conversation(subscriber).await;
    assert!(conversation.escalated_at.is_some(), "held");
    conversation.id
}

/// The releases the store recorded for the contact.
async fn releases(app: &TestApp, subscriber: &str) -> usize {
    let conversation = app.conversation(subscriber).await;
    let from = conversation.escalated_at.unwrap() - chrono::Duration::seconds(1);
    let to = chrono::Utc::now() + chrono::Duration::seconds(1);
    app.store.hold_releases(from, to).await.unwrap().len()
}

#[tokio::test]
async fn console_release_on_the_held_page_hands_the_contact_back_and_it_leaves_the_list() {
    let app = console_app(ScriptedModel::from_steps([])).await;
    let id = held_contact(&app, "7001").await;
    let browser = Browser::open(&app).await;
    browser.log_in(PASSWORD).await;
    browser.goto("/console/held").await;
    let row = format!("#held li[data-conversation=\"{id}\"]");
    assert!(browser.has(&row).await);
    assert!(
        !browser.text(&row).await.contains("7001"),
        "named by its conversation, not its contact id"
    );
    let sent_before = app.all_manychat_requests().await.len();

    browser
        .submit(&format!("{row} button[data-action=release]"))
        .await;
    assert_eq!(browser.path().await, "/console/held");
    assert!(browser.has("#done").await);
    assert!(!browser.has(&row).await, "the contact left the list");
    assert!(browser.has("#none-held").await);
    let released = app.conversation("7001").await;
    assert_eq!(released.hold_release_reason.as_deref(), Some("released"));
    assert_eq!(releases(&app, "7001").await, 1);
    assert_eq!(
        app.all_manychat_requests().await.len(),
        sent_before,
        "a release sends nothing to ManyChat"
    );
}

#[tokio::test]
async fn console_double_click_on_release_releases_once() {
    let app = console_app(ScriptedModel::from_steps([])).await;
    let id = held_contact(&app, "7002").await;
    let browser = Browser::open(&app).await;
    browser.log_in(PASSWORD).await;
    browser.goto("/console/held").await;
    let button = format!("#held li[data-conversation=\"{id}\"] button[data-action=release]");
    assert_eq!(browser.posts_sent(RELEASE).await, 0);
    let sent_before = app.all_manychat_requests().await.len();

    // Two clicks, the second 200 ms after the first, once the first's request has left: the
    // emulated latency holds the first's answer back for 3 s, so the second click finds the
    // page still there however busy the machine is. The browser sends both and shows the
    // second's answer (the second navigation cancels the first's page load).
    browser.network_latency(Duration::from_secs(3)).await;
    browser.mark_page().await;
    browser
        .script(&format!(
            "const b = document.querySelector('{button}'); b.click(); \
             setTimeout(() => b.click(), 200);"
        ))
        .await;
    browser.until_new_page().await;
    let mut posts = 0;
    until(async || {
        posts += browser.posts_sent(RELEASE).await;
        posts >= 2
    })
    .await;
    assert_eq!(posts, 2, "the browser sent the form twice");
    browser.network_latency(Duration::ZERO).await;
    app.settle().await;
    assert_eq!(releases(&app, "7002").await, 1, "released once");
    let released = app.conversation("7002").await;
    assert_eq!(released.hold_release_reason.as_deref(), Some("released"));
    assert_eq!(app.all_manychat_requests().await.len(), sent_before);
    browser.goto("/console/held").await;
    assert!(browser.has("#none-held").await);
}

#[tokio::test]
async fn console_release_posted_twice_at_once_releases_once_and_the_second_is_told_so() {
    let app = console_app(ScriptedModel::from_steps([])).await;
    let id = held_contact(&app, "7007").await;
    let browser = Browser::open(&app).await;
    browser.log_in(PASSWORD).await;
    browser.goto("/console/held").await;
    let button = format!("#held li[data-conversation=\"{id}\"] button[data-action=release]");
    let sent_before = app.all_manychat_requests().await.len();
    let first = browser.client().window().await.unwrap();

    // The same form clicked twice, each answer in a window of its own, so neither request is
    // cancelled by the other's page load: both reach the service and are answered.
    browser
        .script(&format!(
            "const b = document.querySelector('{button}'); b.form.target = '_blank'; \
             b.click(); b.click();"
        ))
        .await;
    let mut answers = Vec::new();
    until(async || {
        answers.clear();
        for window in browser.client().windows().await.unwrap() {
            if window == first {
                continue;
            }
            browser.client().switch_to_window(window).await.unwrap();
            let url = browser.client().current_url().await.unwrap();
            if let Some((_, done)) = url.query_pairs().find(|(key, _)| key == "done") {
                answers.push(done.into_owned());
            }
        }
        answers.len() >= 2
    })
    .await;
    answers.sort();
    assert_eq!(
        answers,
        ["already_released", "released"],
        "one release; the second post finds it done"
    );
    app.settle().await;
    assert_eq!(releases(&app, "7007").await, 1, "released once");
    assert_eq!(
        app.all_manychat_requests().await.len(),
        sent_before,
        "nothing sent"
    );
}

#[tokio::test]
async fn console_hold_button_on_a_conversation_holds_the_contact_and_tags_it_once() {
    let app = console_app(ScriptedModel::from_steps([answer("Hello!")])).await;
    let (status, _) = app.send("7003", "Hi").await;
    assert_eq!(status, 200);
    app.settle().await;
    let conversation = app.conversation("7003").await;
    assert!(conversation.escalated_at.is_none());
    let browser = Browser::open(&app).await;
    browser.log_in(PASSWORD).await;
    let route = format!("/console/conversations/{}", conversation.id);
    browser.goto(&route).await;
    assert!(!browser.has("button#release").await);

    browser.submit("button#hold").await;
    assert_eq!(browser.path().await, route);
    assert!(browser.has("#done").await);
    assert!(browser.has("#hold-state.held").await);
    assert!(
        browser.has("button#release").await,
        "now it can be handed back"
    );
    assert!(!browser.has("button#hold").await);
    assert!(app.conversation("7003").await.escalated_at.is_some());
    let handoffs = app
        .outbox()
        .await
        .into_iter()
        .filter(|r| r.kind == OutboxKind::Handoff && r.conversation_id == conversation.id)
        .count();
    assert_eq!(handoffs, 1, "one handoff queued");
    app.worker.run_once().await.unwrap();
    app.settle().await;
    let tagged: Vec<Value> = app
        .all_manychat_requests()
        .await
        .into_iter()
        .filter(|r| r.path.ends_with("/addTagByName"))
        .map(|r| r.body)
        .collect();
    assert_eq!(tagged.len(), 1, "tagged once: {tagged:?}");
    assert_eq!(tagged[0]["tag_name"], HANDOFF_TAG);
    browser.goto("/console/held").await;
    assert!(
        browser
            .has(&format!(
                "#held li[data-conversation=\"{}\"]",
                conversation.id
            ))
            .await
    );
}

/// Hostile text a contact sent: it would retitle the page and set `window.pwned` if it ran,
/// and its right-to-left override (U+202E) would make `invoice…gpj.exe` read `invoiceexe.jpg`.
const HOSTILE: &str = "<script>document.title='pwned'; window.pwned = 1;</script> \
    <img src=x onerror=\"window.pwned = 2\"> <b>bold</b> invoice\u{202E}gpj.exe";
/// How the page shows it: as text, the override as a visible mark.
const SHOWN: &str = "<script>document.title='pwned'; window.pwned = 1;</script> \
    <img src=x onerror=\"window.pwned = 2\"> <b>bold</b> invoice[U+202E]gpj.exe";

#[tokio::test]
async fn console_a_stored_script_in_a_contacts_message_is_shown_as_text_and_never_runs() {
    let model = ScriptedModel::from_steps([
        answer("<script>window.pwned = 3;</script>Noted."),
        answer("<script>window.pwned = 3;</script>Noted."),
    ]);
    let app = console_app(model).await;
    // Stored through the webhook route, as ManyChat would send it: a real contact and a test
    // contact (shown on the try-out page).
    app.send("7004", HOSTILE).await;
    let test = SubscriberId::new_test_contact();
    app.send(test.as_str(), HOSTILE).await;
    app.settle().await;
    let stored = app.turns("7004").await;
    assert_eq!(stored[0].text, HOSTILE, "stored as sent");
    let browser = Browser::open(&app).await;
    browser.log_in(PASSWORD).await;

    let conversation = app.conversation("7004").await.id;
    for page in [
        format!("/console/conversations/{conversation}"),
        format!("/console/try?contact={}", test.as_str()),
    ] {
        browser.goto(&page).await;
        let title = browser.script("return document.title;").await;
        assert!(
            title.as_str().unwrap().ends_with("manychat-agent console"),
            "{page}: the title is the page's own: {title}"
        );
        assert_eq!(
            browser.script("return typeof window.pwned;").await,
            json!("undefined"),
            "{page}: nothing ran"
        );
        assert_eq!(
            browser
                .script("return document.querySelectorAll('main script, main img, main b').length;")
                .await,
            json!(0),
            "{page}: no element was made of the text"
        );
        let contact = "article.turn[data-role=contact] p.text";
        assert_eq!(
            browser.text(contact).await,
            SHOWN,
            "{page}: visible, escaped"
        );
        assert!(!browser.text(contact).await.contains('\u{202E}'));
        let agent = browser.text("article.turn[data-role=agent] p.text").await;
        assert!(
            agent.starts_with("<script>window.pwned = 3;</script>"),
            "{agent}"
        );
    }
}

#[tokio::test]
async fn console_every_page_is_saved_at_1280_and_375_px_and_fits_a_phone() {
    let model = ScriptedModel::from_steps([
        answer("Hello! How can I help?"),
        ScriptStep::ok(tool_calls([set_field("intent", "prospect")])),
        answer("The wheel course is 120 EUR for four Saturday mornings."),
    ]);
    let app = console_app(model).await;
    app.send("7005", "Hi there").await;
    let held = held_contact(&app, "7006").await;
    let browser = Browser::open(&app).await;
    browser.log_in(PASSWORD).await;

    // `screenshots` saves the page at 1280 and 375 px and fails on a sideways scroll at 375.
    browser.goto("/console/try").await;
    browser.screenshots("try").await;
    try_message(&browser, "How much is the wheel course?").await;
    app.settle().await;
    reload(&browser).await;
    assert!(browser.has("#try-calls li[data-call]").await);
    browser.screenshots("try-answered").await;
    browser.goto("/console/conversations").await;
    assert!(browser.has("#conversations li[data-conversation]").await);
    browser.screenshots("conversations").await;
    browser.submit("#show-tests").await;
    browser.screenshots("conversations-with-tests").await;
    let free = app.conversation("7005").await.id;
    browser
        .goto(&format!("/console/conversations/{free}"))
        .await;
    assert!(browser.has("button#hold").await);
    browser.screenshots("conversation").await;
    browser
        .goto(&format!("/console/conversations/{held}"))
        .await;
    assert!(browser.has("button#release").await);
    browser.screenshots("conversation-held").await;
    browser.goto("/console/held").await;
    assert!(browser.has("#held li[data-conversation]").await);
    browser.screenshots("held").await;
    browser.submit("#held button[data-action=release]").await;
    assert!(browser.has("#none-held").await);
    browser.screenshots("held-released").await;
    browser
        .goto(&format!("/console/conversations/{}", uuid::Uuid::new_v4()))
        .await;
    assert!(browser.has("#not-found").await);
    browser.screenshots("not-found").await;

    // The same pages read at 375 px from the start (no layout left over from a wider window).
    browser.viewport(PHONE).await;
    for page in [
        "/console/try".to_owned(),
        "/console/conversations?tests=1".to_owned(),
        format!("/console/conversations/{free}"),
        format!("/console/conversations/{held}"),
        "/console/held".to_owned(),
        "/console/conversations/not-an-id".to_owned(),
    ] {
        browser.goto(&page).await;
        let width = browser.scroll_width().await;
        assert!(width <= u64::from(PHONE.0), "{page}: {width} px wide");
    }
}
