//! The owner's console as a person uses it, in headless chromium: the login, a wrong password,
//! a refused reload, a form posted without its CSRF token, a logged-out page, the keyboard, and
//! the phone's width. Each page is saved at 1280 and 375 px under `target/console-screenshots/`
//! (the other pages: `pages.rs`).

use std::sync::Arc;

use fantoccini::Locator;
use fantoccini::key::Key;
use manychat_agent::model::mock::ScriptedModel;
use serde_json::json;

use crate::driver::{Browser, PHONE};
use crate::helpers::console_login::{PASSWORD, hash};
use crate::helpers::*;

/// The reload button on the "what is running" page.
const RELOAD_BUTTON: &str = r#"form[action="/console/reload"] button[type="submit"]"#;
/// The reload form's CSRF token.
const RELOAD_CSRF: &str = r#"form[action="/console/reload"] input[name="csrf"]"#;
/// The logout button in the page's header.
const LOGOUT_BUTTON: &str = r#"form[action="/console/logout"] button[type="submit"]"#;
/// The reload's outcome, shown above the rest of the page.
const RELOAD_OUTCOME: &str = r#"section[aria-labelledby="reload-title"]"#;

async fn console_app() -> TestApp {
    let model = Arc::new(ScriptedModel::replies(vec![reply_json("Hello!")]));
    spawn_app_with(AppOptions::new(model).env("CONSOLE_PASSWORD_HASH", hash())).await
}

/// The text of the `dd` after the `dt` that reads `term` (e.g. "Version").
async fn definition(browser: &Browser, term: &str) -> String {
    let xpath = format!("//dt[normalize-space()='{term}']/following-sibling::dd[1]");
    browser
        .client()
        .find(Locator::XPath(&xpath))
        .await
        .unwrap_or_else(|e| panic!("no {term} on the page: {e}"))
        .text()
        .await
        .unwrap()
}

/// The HTTP status of the page shown now, as the browser received it.
async fn status(browser: &Browser) -> u64 {
    browser
        .script("return performance.getEntriesByType('navigation')[0].responseStatus;")
        .await
        .as_u64()
        .expect("the navigation's status")
}

#[tokio::test]
async fn console_login_in_the_browser_opens_the_running_page_with_the_version() {
    let app = console_app().await;
    let browser = Browser::open(&app).await;
    browser.log_in(PASSWORD).await;
    assert_eq!(browser.path().await, "/console");
    assert_eq!(browser.text("h1").await, "What is running");
    assert_eq!(
        definition(&browser, "Version").await,
        manychat_agent::VERSION
    );
    assert!(browser.cookie("console_session").await.is_some());
}

#[tokio::test]
async fn console_wrong_password_shows_the_error_and_gives_no_session() {
    let app = console_app().await;
    let browser = Browser::open(&app).await;
    browser.log_in("not the password").await;
    assert_eq!(browser.path().await, "/console/login");
    assert_eq!(status(&browser).await, 401);
    let alert = browser.find(r#"[role="alert"]"#).await;
    assert!(alert.is_displayed().await.unwrap());
    assert_eq!(alert.text().await.unwrap(), "That password is not right.");
    assert!(browser.cookie("console_session").await.is_none());
    browser.goto("/console").await;
    assert_eq!(browser.path().await, "/console/login", "no session");
}

#[tokio::test]
async fn console_refused_reload_shows_file_path_and_rule_and_keeps_the_config_in_force() {
    let app = console_app().await;
    let browser = Browser::open(&app).await;
    browser.log_in(PASSWORD).await;
    let in_force = app.config.snapshot();
    let offering = in_force.tools.as_ref().unwrap().flows[0].offering.clone();
    assert!(offering.is_some());
    edit_tools(&app.config_dir, |tools| {
        tools["flows"][0]["offering"] = json!("no-such-offering");
    });
    let settled = app.config.reloads_settled();

    browser.submit(RELOAD_BUTTON).await;
    let outcome = browser.find(RELOAD_OUTCOME).await;
    assert!(outcome.is_displayed().await.unwrap());
    let text = outcome.text().await.unwrap();
    assert!(
        text.contains("Refused: the config in force stays"),
        "{text}"
    );
    assert!(
        text.contains(
            "tools.json at $.flows[0].offering: `no-such-offering` is not an offering id in the \
             catalog"
        ),
        "{text}"
    );
    assert_eq!(app.config.reloads_settled(), settled + 1, "the reload ran");
    let now = app.config.snapshot();
    assert!(Arc::ptr_eq(&in_force, &now), "the same config in force");
    assert_eq!(now.tools.as_ref().unwrap().flows[0].offering, offering);
}

#[tokio::test]
async fn console_post_without_its_csrf_token_is_refused_403_and_reloads_nothing() {
    let app = console_app().await;
    let browser = Browser::open(&app).await;
    browser.log_in(PASSWORD).await;
    let left = browser
        .script(&format!(
            "document.querySelector('{RELOAD_CSRF}').remove(); \
             return document.querySelectorAll('{RELOAD_CSRF}').length;"
        ))
        .await;
    assert_eq!(left, json!(0), "the token is gone from the form");
    let settled = app.config.reloads_settled();

    browser.submit(RELOAD_BUTTON).await;
    assert_eq!(browser.path().await, "/console/reload");
    assert_eq!(status(&browser).await, 403);
    assert!(
        browser
            .body_text()
            .await
            .contains("This form is out of date: nothing was done.")
    );
    assert_eq!(app.config.reloads_settled(), settled, "nothing reloaded");
}

#[tokio::test]
async fn console_page_logged_out_redirects_to_the_login() {
    let app = console_app().await;
    let browser = Browser::open(&app).await;
    browser.goto("/console").await;
    assert_eq!(browser.path().await, "/console/login", "never logged in");
    assert!(browser.has("#password").await);

    browser.log_in(PASSWORD).await;
    assert_eq!(browser.path().await, "/console");
    browser.submit(LOGOUT_BUTTON).await;
    assert_eq!(browser.path().await, "/console/login");
    assert!(browser.cookie("console_session").await.is_none());
    browser.goto("/console").await;
    assert_eq!(browser.path().await, "/console/login", "after logging out");
}

#[tokio::test]
async fn console_login_form_works_with_tab_and_enter_only() {
    let app = console_app().await;
    let browser = Browser::open(&app).await;
    browser.goto("/console/login").await;
    assert_eq!(
        browser.focused().await,
        "password",
        "the password field has the focus"
    );
    // Before it, the skip link; after it, the button.
    browser.shift_tab().await;
    assert_eq!(
        browser
            .script("return document.activeElement.getAttribute('href');")
            .await,
        json!("#main"),
        "the skip link"
    );
    browser.press(Key::Tab).await;
    assert_eq!(browser.focused().await, "password");
    browser.press(Key::Tab).await;
    assert_eq!(
        browser
            .script("return document.activeElement.textContent;")
            .await,
        json!("Log in")
    );
    browser.shift_tab().await;
    browser.type_keys(PASSWORD).await;
    browser.mark_page().await;
    browser.press(Key::Enter).await;
    browser.until_new_page().await;
    assert_eq!(browser.path().await, "/console");
    assert_eq!(
        definition(&browser, "Version").await,
        manychat_agent::VERSION
    );
}

#[tokio::test]
async fn console_every_page_fits_375_px_without_horizontal_scroll() {
    let app = console_app().await;
    let browser = Browser::open(&app).await;
    // `screenshots` saves each page at 1280 and 375 px and fails on a sideways scroll at 375.
    browser.goto("/console/login").await;
    browser.screenshots("login").await;
    browser.log_in("not the password").await;
    browser.screenshots("login-refused").await;
    browser.log_in(PASSWORD).await;
    browser.screenshots("running").await;
    edit_tools(&app.config_dir, |tools| {
        tools["flows"][0]["offering"] = json!("no-such-offering");
    });
    browser.submit(RELOAD_BUTTON).await;
    assert!(browser.has(RELOAD_OUTCOME).await);
    browser.screenshots("reload-refused").await;

    // The same pages read at 375 px from the start (no layout left over from a wider window).
    browser.viewport(PHONE).await;
    for page in ["/console", "/console/login"] {
        browser.goto(page).await;
        let width = browser.scroll_width().await;
        assert!(width <= u64::from(PHONE.0), "{page}: {width} px wide");
    }
}
