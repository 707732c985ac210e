//! The owner's console: `/console`, server-rendered pages in the browser, served by `serve` only
//! when `CONSOLE_PASSWORD_HASH` is set (otherwise every `/console` path is an unknown route, 404).
//!
//! Rules (each page and form):
//! - Every page but the login form and the stylesheet needs a session (`auth::Sessions`): a
//!   logged-out `GET` is redirected to the login form, a logged-out `POST` answers 401.
//! - Every form carries a CSRF token; a `POST` without the right one answers 403 and changes
//!   nothing. The login form's token belongs to a random pre-login cookie.
//! - Login attempts are limited per client address (`auth::LoginLimiter`, the address as
//!   `http::client_ip` decides it) and answered 429 with `Retry-After` past the limit; the
//!   Argon2 check runs on a blocking thread, one at a time, so it never holds the runtime the
//!   webhook route runs on.
//! - Every response carries a strict `Content-Security-Policy` (no script at all), `nosniff`,
//!   `no-referrer` and `no-store`; the cookie is `HttpOnly`, `SameSite=Strict`, `Path=/console`,
//!   and `Secure` when the request came over HTTPS (a trusted proxy's `X-Forwarded-Proto`).
//! - The console shares nothing with the webhook routes: not their secret, limits or metrics.
//!
//! Files: `auth` (password, session, CSRF, login limit), `pages` (the handlers), `templates`
//! (the HTML, escaped by maud), `style.css` (the one stylesheet, built into the binary).

pub mod auth;
mod pages;
mod templates;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use axum::routing::{get, post};

use crate::clock::Clock;
use crate::config::ConfigHandle;
use crate::http::client_ip::TrustProxy;

/// Where the console lives.
pub const CONSOLE_PATH: &str = "/console";
/// The console's forms are a password or a token: a few hundred bytes.
const FORM_LIMIT: usize = 4 * 1024;

/// What the "what is running" page shows of the process, fixed at start.
#[derive(Debug, Clone)]
pub struct Running {
    pub version: &'static str,
    pub model_id: String,
    /// The store backend as `config check --env` names it (no password).
    pub store: String,
}

/// Everything the console's handlers share.
pub struct Console {
    pub(crate) hash: auth::PasswordHashSetting,
    pub(crate) sessions: auth::Sessions,
    pub(crate) limiter: auth::LoginLimiter,
    /// One Argon2 verification at a time: a burst of logins uses one core, never both.
    pub(crate) verifying: tokio::sync::Semaphore,
    pub(crate) config: Arc<ConfigHandle>,
    pub(crate) clock: Clock,
    pub(crate) trust_proxy: Arc<TrustProxy>,
    pub(crate) running: Running,
    /// How long the reload button may read the config folder (SIGHUP's bound).
    pub(crate) reload_bound: Duration,
}

impl Console {
    pub fn new(
        hash: auth::PasswordHashSetting,
        config: Arc<ConfigHandle>,
        clock: Clock,
        trust_proxy: Arc<TrustProxy>,
        running: Running,
        reload_bound: Duration,
    ) -> Self {
        Self {
            sessions: auth::Sessions::for_process(&hash),
            hash,
            limiter: auth::LoginLimiter::default(),
            verifying: tokio::sync::Semaphore::new(1),
            config,
            clock,
            trust_proxy,
            running,
            reload_bound,
        }
    }
}

/// The console's routes, to merge into the service's router.
pub fn router(console: Console) -> Router {
    Router::new()
        .route(CONSOLE_PATH, get(pages::running))
        .route("/console/", get(pages::running))
        .route("/console/login", get(pages::login_form).post(pages::login))
        .route("/console/logout", post(pages::logout))
        .route("/console/reload", post(pages::reload))
        .route("/console/style.css", get(pages::stylesheet))
        .layer(DefaultBodyLimit::max(FORM_LIMIT))
        .layer(axum::middleware::map_response(security_headers))
        .with_state(Arc::new(console))
}

/// The console's `Content-Security-Policy`: nothing but its own stylesheet and forms.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; \
     img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}
