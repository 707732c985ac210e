//! What the console's API tests share: the owner's password and its hash, an app with the
//! console on, a cookie-less client, the login, the pages' CSRF token.

use std::sync::Arc;

use manychat_agent::model::mock::ScriptedModel;
use reqwest::redirect::Policy;
use reqwest::{Response, StatusCode};

use crate::helpers::*;

pub use crate::helpers::console_login::{PASSWORD, hash};

/// An app with the console on, started with `options`.
pub async fn console_app_with(options: AppOptions) -> TestApp {
    spawn_app_with(options.env("CONSOLE_PASSWORD_HASH", hash())).await
}

/// A logged-in GET of `route`: its status, its `Location` if any, and its body.
pub async fn get_page(
    app: &TestApp,
    client: &reqwest::Client,
    session: &str,
    route: &str,
) -> (StatusCode, String) {
    let response = client
        .get(format!("{}{route}", app.address))
        .header("cookie", session)
        .send()
        .await
        .unwrap();
    (response.status(), response.text().await.unwrap())
}

/// A logged-in form POST to `route`.
pub async fn post_page(
    app: &TestApp,
    client: &reqwest::Client,
    session: &str,
    route: &str,
    form: &[(&str, &str)],
) -> Response {
    client
        .post(format!("{}{route}", app.address))
        .header("cookie", session)
        .form(form)
        .send()
        .await
        .unwrap()
}

/// Where a redirect points.
pub fn location(response: &Response) -> String {
    response.headers()["location"].to_str().unwrap().to_owned()
}

pub async fn console_app(extra: &[(&'static str, &str)]) -> TestApp {
    let model = Arc::new(ScriptedModel::replies(vec![reply_json("Hello!")]));
    let mut options = AppOptions::new(model).env("CONSOLE_PASSWORD_HASH", hash());
    for (name, value) in extra {
        options = options.env(name, *value);
    }
    spawn_app_with(options).await
}

/// A browser that keeps no cookies and follows no redirect: each test sends what it means to.
pub fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap()
}

/// `name=value` from the response's `Set-Cookie` headers, with the attributes.
pub fn set_cookie(response: &Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

/// The cookie's `name=value` pair, without attributes.
pub fn pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}

/// The first form's CSRF token in a page.
pub fn csrf_in(page: &str) -> String {
    let start = page
        .find(r#"name="csrf" value=""#)
        .expect("the form has a token")
        + 19;
    page[start..].split('"').next().unwrap().to_owned()
}

pub struct LoginForm {
    pub cookie: String,
    pub csrf: String,
}

pub async fn login_form(
    app: &TestApp,
    client: &reqwest::Client,
    headers: &[(&str, &str)],
) -> LoginForm {
    let mut request = client.get(format!("{}/console/login", app.address));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let cookie = pair(&set_cookie(&response, "console_login").expect("a pre-login cookie"));
    let csrf = csrf_in(&response.text().await.unwrap());
    LoginForm { cookie, csrf }
}

pub async fn post_login(
    app: &TestApp,
    client: &reqwest::Client,
    form: &LoginForm,
    password: &str,
    headers: &[(&str, &str)],
) -> Response {
    let mut request = client
        .post(format!("{}/console/login", app.address))
        .header("cookie", &form.cookie)
        .form(&[("password", password), ("csrf", &form.csrf)]);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// Logs in; the session cookie's `name=value`.
pub async fn logged_in(app: &TestApp, client: &reqwest::Client) -> String {
    let form = login_form(app, client, &[]).await;
    let response = post_login(app, client, &form, PASSWORD, &[]).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    pair(&set_cookie(&response, "console_session").expect("a session cookie"))
}

pub async fn page(app: &TestApp, client: &reqwest::Client, session: &str) -> (StatusCode, String) {
    let response = client
        .get(format!("{}/console", app.address))
        .header("cookie", session)
        .send()
        .await
        .unwrap();
    (response.status(), response.text().await.unwrap())
}
