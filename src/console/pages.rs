//! The console's handlers: login, logout, the "what is running" page and its reload button; and
//! what every page's handler shares (the session, the CSRF check, the HTML response).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Form;
use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{Console, templates};
use crate::config::ReloadOutcome;
use crate::words::{Key, Words};

const SESSION_COOKIE: &str = "console_session";
/// A random value set with the login form: its CSRF token is bound to it.
const LOGIN_COOKIE: &str = "console_login";

/// The value of cookie `name` in the request.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|list| list.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Whether the request came over HTTPS: only a trusted proxy's `X-Forwarded-Proto` says so
/// (the service itself speaks plain HTTP).
fn over_https(console: &Console, peer: SocketAddr, headers: &HeaderMap) -> bool {
    console.trust_proxy.is_trusted(peer.ip().to_canonical())
        && headers
            .get_all("x-forwarded-proto")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|list| list.split(','))
            .next_back()
            .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

fn set_cookie(name: &str, value: &str, max_age: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"
    ))
    .expect("cookie values are base64 and digits")
}

pub(super) fn redirect(to: &str) -> Response {
    match HeaderValue::from_str(to) {
        Ok(location) => (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

pub(super) fn html(status: StatusCode, markup: maud::Markup) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

/// The session cookie when it is valid now.
pub(super) fn session<'a>(console: &Console, headers: &'a HeaderMap) -> Option<&'a str> {
    cookie(headers, SESSION_COOKIE).filter(|c| console.sessions.check(c, console.clock.now()))
}

/// A GET without a valid session (logged out, expired): answered with the login form's redirect.
pub(super) struct LoggedOut;

impl IntoResponse for LoggedOut {
    fn into_response(self) -> Response {
        redirect("/console/login")
    }
}

/// A page's valid session cookie, extracted: a GET without one is answered [`LoggedOut`] before
/// the page reads anything. It comes last among a page's extractors, so a malformed path or
/// query is refused (400) before the session is looked at.
pub(super) struct LoggedIn(pub(super) String);

impl FromRequestParts<Arc<Console>> for LoggedIn {
    type Rejection = LoggedOut;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Self, LoggedOut> {
        session(console, &parts.headers)
            .map(|cookie| Self(cookie.to_owned()))
            .ok_or(LoggedOut)
    }
}

/// The 404 page for a logged-in owner: `what` names what was not found (fixed words).
pub(super) fn not_found(console: &Console, cookie: &str, what: Key) -> Response {
    html(
        StatusCode::NOT_FOUND,
        templates::not_found(console.words(), &console.sessions.csrf_token(cookie), what),
    )
}

/// A store failure on a page: logged without data, answered 503 in the owner's words.
pub(super) fn unavailable(console: &Console, error: &crate::store::StoreError) -> Response {
    crate::store_failure!(console.service.store, error, "console: the store failed");
    let w = console.words();
    let page = templates::refused(w, Key::ConStoreDown, ("/console", Key::ConBackToConsole));
    html(StatusCode::SERVICE_UNAVAILABLE, page)
}

/// Why a POST was refused before it did anything, answered in the owner's words.
pub(super) enum Refused {
    /// No valid session: 401.
    NoSession(Words),
    /// A missing or wrong CSRF token: 403.
    StaleForm(Words),
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let (status, w, why, link) = match self {
            Self::NoSession(w) => (
                StatusCode::UNAUTHORIZED,
                w,
                Key::ConLogInFirst,
                ("/console/login", Key::ConLoginTitle),
            ),
            Self::StaleForm(w) => (
                StatusCode::FORBIDDEN,
                w,
                Key::ConStaleForm,
                ("/console", Key::ConBackToConsole),
            ),
        };
        html(status, templates::refused(w, why, link))
    }
}

/// A POST's session and CSRF check: 401 without a session, 403 with a missing or wrong token.
pub(super) fn checked_post<'a>(
    console: &Console,
    headers: &'a HeaderMap,
    token: Option<&str>,
) -> Result<&'a str, Refused> {
    let Some(cookie) = session(console, headers) else {
        return Err(Refused::NoSession(console.words()));
    };
    if !token.is_some_and(|t| console.sessions.check_csrf(cookie, t)) {
        return Err(Refused::StaleForm(console.words()));
    }
    Ok(cookie)
}

pub(super) async fn login_form(
    State(console): State<Arc<Console>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    login_page(&console, peer, &headers, StatusCode::OK, None)
}

/// The login form with a fresh pre-login cookie and its token.
fn login_page(
    console: &Console,
    peer: SocketAddr,
    headers: &HeaderMap,
    status: StatusCode,
    error: Option<Key>,
) -> Response {
    use base64::Engine;
    let nonce = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 24]>());
    let token = console.sessions.csrf_token(&nonce);
    let mut response = html(status, templates::login(console.words(), &token, error));
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(
            LOGIN_COOKIE,
            &nonce,
            600,
            over_https(console, peer, headers),
        ),
    );
    response
}

#[derive(Deserialize)]
pub(super) struct LoginForm {
    #[serde(default)]
    password: String,
    #[serde(default)]
    csrf: String,
}

pub(super) async fn login(
    State(console): State<Arc<Console>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let ip = console.trust_proxy.client_ip(peer.ip(), &headers);
    if let Err(wait) = console.limiter.attempt(ip, console.clock.instant()) {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let page = templates::refused(
            console.words(),
            Key::ConTooManyAttempts,
            ("/console/login", Key::ConLoginTitle),
        );
        let mut response = html(StatusCode::TOO_MANY_REQUESTS, page);
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        return response;
    }
    let nonce = cookie(&headers, LOGIN_COOKIE).unwrap_or_default();
    if nonce.is_empty() || !console.sessions.check_csrf(nonce, &form.csrf) {
        return Refused::StaleForm(console.words()).into_response();
    }
    let right = {
        let Ok(_one_at_a_time) = console.verifying.acquire().await else {
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        };
        let hash = console.hash.clone();
        tokio::task::spawn_blocking(move || hash.verify(&form.password))
            .await
            .unwrap_or(false)
    };
    if !right {
        tracing::warn!(client = %ip, "console login refused: wrong password");
        return login_page(
            &console,
            peer,
            &headers,
            StatusCode::UNAUTHORIZED,
            Some(Key::ConWrongPassword),
        );
    }
    tracing::info!(client = %ip, "console login");
    let value = console.sessions.issue(console.clock.now());
    let secure = over_https(&console, peer, &headers);
    let mut response = redirect("/console");
    let cookies = response.headers_mut();
    cookies.append(
        header::SET_COOKIE,
        set_cookie(
            SESSION_COOKIE,
            &value,
            console.sessions.lifetime().as_secs(),
            secure,
        ),
    );
    cookies.append(header::SET_COOKIE, set_cookie(LOGIN_COOKIE, "", 0, secure));
    response
}

#[derive(Deserialize)]
pub(super) struct TokenForm {
    #[serde(default)]
    pub(super) csrf: Option<String>,
}

pub(super) async fn logout(
    State(console): State<Arc<Console>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Form(form): Form<TokenForm>,
) -> Response {
    if let Err(refused) = checked_post(&console, &headers, form.csrf.as_deref()) {
        return refused.into_response();
    }
    console.sessions.revoke_all(console.clock.now());
    let mut response = redirect("/console/login");
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(SESSION_COOKIE, "", 0, over_https(&console, peer, &headers)),
    );
    response
}

/// `GET /console`: what is running.
pub(super) async fn running(
    State(console): State<Arc<Console>>,
    LoggedIn(cookie): LoggedIn,
) -> Response {
    running_page(&console, &cookie, None).await
}

/// `POST /console/reload`: what SIGHUP does, then the page with its outcome.
pub(super) async fn reload(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<TokenForm>,
) -> Response {
    let cookie = match checked_post(&console, &headers, form.csrf.as_deref()) {
        Ok(cookie) => cookie,
        Err(refused) => return refused.into_response(),
    };
    let outcome = console.config.reload_bounded(console.reload_bound).await;
    tracing::info!(
        applied = outcome == ReloadOutcome::Applied,
        "console: tenant config reload"
    );
    running_page(&console, cookie, Some(outcome)).await
}

async fn running_page(console: &Console, cookie: &str, outcome: Option<ReloadOutcome>) -> Response {
    let config = console.config.clone();
    let on_disk = tokio::task::spawn_blocking(move || config.check_on_disk().map(|_| ()))
        .await
        .unwrap_or_else(|_| {
            Err(crate::config::ConfigErrors(vec![
                crate::config::ConfigIssue::new(
                    console.config.dir().display().to_string(),
                    "$",
                    "the check failed unexpectedly",
                ),
            ]))
        });
    let view = templates::RunningView {
        running: &console.running,
        dir: crate::config::printable(&console.config.dir().display().to_string()).into_owned(),
        files: crate::config::load::files_read(console.config.dir(), console.config.context()),
        snapshot: &console.config.snapshot(),
        on_disk: &on_disk,
        outcome: outcome.as_ref(),
        csrf: &console.sessions.csrf_token(cookie),
        words: console.words(),
    };
    html(StatusCode::OK, templates::running(&view))
}

pub(super) async fn stylesheet() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("style.css"),
    )
        .into_response()
}
