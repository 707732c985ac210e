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
//! - Every response carries a strict `Content-Security-Policy` (no script at all: every page
//!   is plain HTML forms, POST then redirect to a GET), `nosniff`,
//!   `no-referrer` and `no-store`; the cookie is `HttpOnly`, `SameSite=Strict`, `Path=/console`,
//!   and `Secure` when the request came over HTTPS (a trusted proxy's `X-Forwarded-Proto`).
//! - The console shares nothing with the webhook routes: not their secret, limits or metrics.
//!
//! - Contact text is the business's data: shown escaped to the logged-in owner (maud escapes;
//!   bidirectional controls are shown as visible marks, `turn_view::inert`), never logged.
//!   Contacts are named in URLs by their conversation's UUID, never by their ManyChat id (a
//!   test contact's id excepted: it names no one).
//!
//! Files: `auth` (password, session, CSRF, login limit), `pages` (login, what is running, the
//! shared helpers), `tryout` (try it as a test contact), `conversations` (the list and one
//! conversation), `held` (held contacts, the release and hold buttons), `report` (the weekly
//! figures and charts), `learning` (the learning review: approve, reject, the eval gate, the
//! rollback), `turn_view` (what a turn did), `templates` (the layout and nav, escaped by
//! maud), `style.css` (the one stylesheet, built into the binary).
//!
//! Every word is the owner's (`crate::words`, `rules.json` `ownerLanguage`, read per request);
//! the plain-text refusals of a POST (401, 403, 400 naming the field) stay English, as the
//! HTTP routes' errors do.

pub mod auth;
mod conversations;
mod held;
mod learning;
mod pages;
mod report;
mod templates;
mod tryout;
mod turn_view;

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
use crate::ids::Secret;
use crate::manychat::Recorder;
use crate::metrics::Metrics;
use crate::store::Store;
use crate::turn::TurnEngine;

/// Where the console lives.
pub const CONSOLE_PATH: &str = "/console";
/// The console's forms are a password or a token: a few hundred bytes.
const FORM_LIMIT: usize = 4 * 1024;
/// The try-out's form carries a message of up to 4,096 characters, URL-encoded (up to 12 bytes
/// a character).
const TRY_FORM_LIMIT: usize = 64 * 1024;

/// What the "what is running" page shows of the process, fixed at start.
#[derive(Debug, Clone)]
pub struct Running {
    pub version: &'static str,
    pub model_id: String,
    /// The store backend as `config check --env` names it (no password).
    pub store: String,
}

/// What the console's pages reach of the running service. Nothing here is the webhook's limit,
/// metric or secret check: the try-out goes through the webhook's own router like any caller.
pub struct Service {
    pub store: Arc<dyn Store>,
    /// The service's webhook routes (`http::router`): the try-out sends them the request
    /// ManyChat would send, in process, so parsing, the secret check, the limits, the race, the
    /// turn and the rendering are the production ones.
    pub webhook: Router,
    /// A shared secret the try-out's requests carry (`MANYCHAT_SHARED_SECRET`'s first); never
    /// put in a page. `None`: the try-out is off.
    pub secret: Option<Secret>,
    /// `MANYCHAT_TOKEN_FIELD`: the field a block's token action sets, sent back as `ai_token`.
    pub token_field: String,
    /// Where the test contacts' ManyChat calls go (the ManyChat client's recorder).
    pub recorder: Recorder,
    /// The turn engine: the console's hold is the escalation's (`TurnEngine::hold_for_person`).
    pub turns: TurnEngine,
    /// The release counts as the CLI's and the route's do (`hold_release`).
    pub metrics: Arc<Metrics>,
    /// The model in force costs money (`serve`) or not (a mock): the try-out page says which.
    pub live_model: bool,
}

/// Everything the console's handlers share.
pub struct Console {
    pub(crate) service: Service,
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
    /// The report page's last report (`report::Cache`).
    pub(crate) report_cache: report::Cache,
}

impl Console {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        hash: auth::PasswordHashSetting,
        service: Service,
        config: Arc<ConfigHandle>,
        clock: Clock,
        trust_proxy: Arc<TrustProxy>,
        running: Running,
        reload_bound: Duration,
    ) -> Self {
        Self {
            service,
            sessions: auth::Sessions::for_process(&hash),
            hash,
            limiter: auth::LoginLimiter::default(),
            verifying: tokio::sync::Semaphore::new(1),
            config,
            clock,
            trust_proxy,
            running,
            reload_bound,
            report_cache: report::Cache::default(),
        }
    }
}

impl Console {
    /// The owner's words, in the language of the config in force (`rules.json`
    /// `ownerLanguage`), read per request: a reload switches it.
    pub(crate) fn words(&self) -> crate::words::Words {
        crate::words::Words::new(self.config.snapshot().rules.owner_language)
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
        .route(
            "/console/try",
            get(tryout::page)
                .post(tryout::send)
                .layer(DefaultBodyLimit::max(TRY_FORM_LIMIT)),
        )
        .route("/console/conversations", get(conversations::list))
        .route("/console/conversations/{id}", get(conversations::one))
        .route("/console/conversations/{id}/hold", post(held::hold))
        .route("/console/held", get(held::page))
        .route("/console/held/release", post(held::release))
        .route("/console/report", get(report::page))
        .route("/console/learning", get(learning::page))
        .route("/console/learning/approve", post(learning::approve))
        .route("/console/learning/reject", post(learning::reject))
        .route("/console/learning/activate", post(learning::activate))
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
