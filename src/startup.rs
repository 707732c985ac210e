//! Assembles the application from `Settings`: store, tenant config, model, ManyChat client,
//! turn engine (with the active playbook, 031), router, outbox worker and nudge worker. Takes its listener and a shutdown token,
//! so tests run the same app on port 0 that production runs on its port (STYLE 1, 7).
//!
//! Shutdown order: stop accepting and let requests in flight finish (`http::server`, which also
//! holds every connection to its timeouts and caps), let the nudge worker finish the nudge in
//! hand, wait (bounded) for agent tasks that outlived their request and for post-response
//! actions, and last let the outbox worker drain: for `SHUTDOWN_DRAIN_MS` it still delivers the
//! rows that are or fall due (those the agent tasks just queued too), then finishes what it
//! holds.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::Clock;
use crate::config::{ConfigContext, ConfigErrors, ConfigHandle, ReloadOutcome};
use crate::http::{self, AppState};
use crate::learning::playbook::PlaybookCache;
use crate::manychat::limiter::{BucketQuota, FlowCounter, SharedBucket};
use crate::manychat::{ManyChatClient, ManyChatError, ManyChatLimiter};
use crate::metrics::Metrics;
use crate::model::{Model, ModelError};
use crate::nudge::{AgentNudgeTurn, NudgeSettings, NudgeTurnSettings, NudgeWorker};
use crate::outbox::{OutboxWorker, WorkerSettings};
use crate::settings::Settings;
use crate::store::{self, Store, StoreError};
use crate::turn::{TurnEngine, TurnSettings, TurnsShared};

#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("tenant config is invalid:\n{0}")]
    Config(#[from] ConfigErrors),
    /// The store names the database and what failed.
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("model: {0}")]
    Model(#[from] ModelError),
    #[error("ManyChat client: {0}")]
    ManyChat(#[from] ManyChatError),
    #[error("{0}")]
    Missing(String),
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot listen on {address}: {reason}")]
    Listen { address: SocketAddr, reason: String },
    /// More than one of the problems above, each on its own line.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Several(Vec<StartupError>),
}

/// Connections the kernel holds for `accept` before it drops new ones. ManyChat opens one per
/// contact message, so a broadcast's replies arrive as hundreds of connections at once: at
/// tokio's default of 1,024 a thousand simultaneous contacts overflowed the queue and their
/// connections were re-sent a second later, past the reply's deadline. The kernel lowers it to
/// `net.core.somaxconn` (4,096 on current kernels).
pub const LISTEN_BACKLOG: u32 = 4096;

/// Who may read `GET /metrics`: the holders of `METRICS_TOKEN`; without one, anyone on a
/// loopback listener or with `METRICS_OPEN`, and otherwise nobody (an authenticator with no
/// token refuses every request). The series tell an outsider the business's traffic, spend and
/// failures, so an operator opens them on purpose.
fn metrics_auth(
    settings: &Settings,
    listener: &TcpListener,
) -> Option<Arc<http::auth::Authenticator>> {
    if let Some(token) = &settings.metrics_token {
        return Some(Arc::new(http::auth::Authenticator::new(vec![
            token.clone(),
        ])));
    }
    let loopback = listener
        .local_addr()
        .is_ok_and(|address| address.ip().is_loopback());
    if loopback || settings.metrics_open {
        return None;
    }
    tracing::warn!(
        "GET /metrics is closed: set METRICS_TOKEN (or METRICS_OPEN=true on a private network) \
         to scrape it"
    );
    Some(Arc::new(http::auth::Authenticator::new(Vec::new())))
}

/// Binds the HTTP listener, naming the address and, for the common failures, the cause.
pub async fn bind(address: SocketAddr) -> Result<TcpListener, StartupError> {
    use std::io::ErrorKind;
    let listen = || {
        let socket = match address {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        // As `TcpListener::bind` does: a restart may bind while old connections linger.
        socket.set_reuseaddr(true)?;
        socket.bind(address)?;
        socket.listen(LISTEN_BACKLOG)
    };
    listen().map_err(|error| {
        let reason = match error.kind() {
            ErrorKind::AddrInUse => format!(
                "port {} is already in use by another process (stop it, or set PORT)",
                address.port()
            ),
            ErrorKind::PermissionDenied => "permission denied (ports below 1024 need privileges: \
                 use a higher PORT behind a reverse proxy)"
                .to_owned(),
            ErrorKind::AddrNotAvailable => {
                "the address is not one of this machine's (check BIND_ADDRESS)".to_owned()
            }
            other => other.to_string(),
        };
        StartupError::Listen { address, reason }
    })
}

/// The seams tests and the demo use. Production uses `Overrides::default()`.
#[derive(Default)]
pub struct Overrides {
    /// A model to use instead of resolving `AGENT_MODEL` (the scripted and hanging mocks).
    pub model: Option<Arc<dyn Model>>,
    /// A clock anchored elsewhere (tests).
    pub clock: Option<Clock>,
    /// Use `config/*.example` when the real file is absent (the demo).
    pub allow_example_config: bool,
    /// Run the outbox and nudge workers in the background. Tests drive them by hand instead.
    pub manual_worker: bool,
    /// Reload the tenant config on SIGHUP (the `serve` and `demo` commands, and the reload test).
    pub reload_on_sighup: bool,
    /// Where the plugin tools' signing secrets are read (default: the process environment).
    pub plugin_secrets: Option<crate::plugins::sign::SecretLookup>,
}

pub struct Application {
    listener: TcpListener,
    state: AppState,
    worker: OutboxWorker,
    /// 025: follow-ups that fall due.
    nudges: NudgeWorker,
    /// 031: the active playbook the turns are prompted with.
    playbook: PlaybookCache,
    tasks: TaskTracker,
    settings: Arc<Settings>,
    overrides_manual_worker: bool,
    reload_on_sighup: bool,
    /// The owner's console (`CONSOLE_PASSWORD_HASH`); `None`: `/console` is an unknown route.
    console: Option<crate::console::Console>,
}

/// How the tenant config is checked against the deployment's settings (012 collisions).
pub fn config_context(settings: &Settings, allow_examples: bool) -> ConfigContext {
    ConfigContext {
        reply_flow_ns: settings.manychat_reply_flow_ns.clone(),
        reply_field: settings.manychat_reply_field.clone(),
        token_field: settings.manychat_token_field.clone(),
        handshake_fields: settings
            .manychat_delivery_handshake
            .iter()
            .flat_map(|h| [h.delivered_field.clone(), h.delivery_id_field.clone()])
            .collect(),
        allow_examples,
    }
}

/// What `serve` checks before it starts anything (no database opened, no port bound, no
/// request made): the tenant config, every plugin tool's secret, the ManyChat variables the
/// service needs, the model (resolved, priced against the daily USD cap) and the media settings.
/// [`Application::build`] runs it first; `config check --env` runs it alone.
pub struct Checked {
    pub config: Arc<ConfigHandle>,
    pub plugins: crate::plugins::PluginClient,
    reply_flow_ns: String,
    api_token: crate::ids::Secret,
    pub model: Arc<dyn Model>,
    /// `KNOWLEDGE_EMBEDDINGS`'s embedder (`None`: unset, full-text retrieval alone).
    pub embedder: Option<Arc<dyn crate::model::embedding::Embedder>>,
    media: crate::media::MediaSettings,
    /// What the operator should know that does not stop `serve` (one line each): an operator
    /// price that charges cache reads at the full input rate (`pricing::price_note`).
    pub notes: Vec<String>,
}

impl Checked {
    /// Every problem found, each as `serve` names it (one problem alone as that error, several
    /// as [`StartupError::Several`]). A config that does not load is reported alone: the rest
    /// is checked against it.
    pub fn check(settings: &Settings, overrides: &mut Overrides) -> Result<Self, StartupError> {
        let context = config_context(settings, overrides.allow_example_config);
        let config = Arc::new(ConfigHandle::load(&settings.config_dir, context)?);
        let mut problems = Vec::new();

        // plugins.json: every tool's secret must sign before anything starts (named, never shown).
        let plugins = crate::plugins::PluginClient::new(
            overrides
                .plugin_secrets
                .clone()
                .unwrap_or_else(crate::plugins::sign::process_env),
        );
        let secrets = plugins.secret_problems(config.snapshot().plugins.as_ref());
        if !secrets.is_empty() {
            problems.push(StartupError::Missing(format!(
                "plugin secrets: {}",
                secrets.join("; ")
            )));
        }
        let reply_flow_ns = settings.manychat_reply_flow_ns.clone();
        if reply_flow_ns.is_none() {
            problems.push(StartupError::Missing(
                "MANYCHAT_REPLY_FLOW_NS is required: deferred replies are delivered through that flow"
                    .into(),
            ));
        }
        let api_token = settings.manychat_api_token.clone();
        if api_token.is_none() {
            problems.push(StartupError::Missing(
                "MANYCHAT_API_TOKEN is required (ManyChat API key)".into(),
            ));
        }
        let model = match overrides.model.take() {
            Some(model) => Some(model),
            None => match settings.agent_model.as_deref() {
                None => {
                    problems.push(StartupError::Missing(
                        "AGENT_MODEL is required (provider:model)".into(),
                    ));
                    None
                }
                Some(spec) => crate::model::resolve(spec, &settings.model)
                    .map_err(|e| problems.push(e.into()))
                    .ok(),
            },
        };
        // A USD cap the model's calls are never priced against would not cap.
        if let Some(model) = &model
            && let Err(e) = crate::model::pricing::require_price(
                model.id(),
                config.snapshot().rules.budget.daily_cost_cap_usd,
            )
        {
            problems.push(e.into());
        }
        let embedder = match &settings.knowledge_embeddings {
            None => None,
            Some(spec) => crate::model::embedding::resolve_embedder(spec, &settings.model)
                .map_err(|e| problems.push(e.into()))
                .ok(),
        };
        let media = media_settings(settings).map_err(|e| problems.push(e)).ok();
        match (reply_flow_ns, api_token, model, media) {
            (Some(reply_flow_ns), Some(api_token), Some(model), Some(media))
                if problems.is_empty() =>
            {
                let notes = crate::model::pricing::price_note(model.id())
                    .into_iter()
                    .collect();
                Ok(Self {
                    config,
                    plugins,
                    reply_flow_ns,
                    api_token,
                    model,
                    embedder,
                    media,
                    notes,
                })
            }
            _ if problems.len() == 1 => Err(problems.remove(0)),
            _ => Err(StartupError::Several(problems)),
        }
    }
}

impl Application {
    pub async fn build(
        settings: Settings,
        listener: TcpListener,
        mut overrides: Overrides,
    ) -> Result<Self, StartupError> {
        let settings = Arc::new(settings);
        let clock = overrides.clock.unwrap_or_default();
        let metrics = Arc::new(Metrics::default());

        let Checked {
            config,
            plugins,
            reply_flow_ns,
            api_token,
            model,
            embedder,
            media,
            notes,
        } = Checked::check(&settings, &mut overrides)?;
        for note in notes {
            tracing::info!("{note}");
        }
        let model_id = model.id().to_owned();
        let plugins = plugins.with_metrics(metrics.clone());
        // A reload that adds a tool without its secret is refused the same way.
        config.check_with(plugins.reload_check());

        let store =
            store::connect_sized(settings.database_url.expose(), settings.database_pool_size)
                .await?;
        let model = crate::model::timed::TimedModel::wrap(model, metrics.clone());
        let manychat = ManyChatClient::new(
            &settings.manychat_api_base,
            &api_token,
            manychat_limiter(&store, clock),
        )?
        .with_metrics(metrics.clone());
        let recorder = manychat.recorder().clone();
        // 031: the active playbook, read once now; `run` refreshes it every minute.
        let playbook = PlaybookCache::load(store.as_ref(), &config.snapshot()).await;
        let tasks = TaskTracker::new();
        let turns = TurnEngine::new(
            TurnSettings {
                race_deadline: settings.race_deadline,
                model_abort: settings.model_abort,
                max_output_tokens: settings.model.max_output_tokens,
                temperature: settings.temperature_or_default(),
                contact_tokens_enforced: settings.contact_tokens_enforced,
                channel: settings.channel,
                media,
                outbox_give_up_after: settings.outbox_give_up_after,
            },
            config.clone(),
            store.clone(),
            model.clone(),
            manychat.clone(),
            clock,
            tasks.clone(),
            metrics.clone(),
            settings.manychat_token_field.clone(),
        )
        .with_plugins(plugins.clone())
        .with_playbook(playbook.clone());
        // Semantic search: the catalog's vectors are filled once the config's knowledge is built.
        let turns = match embedder {
            Some(embedder) => {
                tracing::info!(embedder = embedder.id(), "knowledge embeddings on");
                turns.with_embeddings(crate::turn::embeddings::Embeddings::new(
                    embedder,
                    store.clone(),
                    metrics.clone(),
                    clock,
                ))
            }
            None => turns,
        };
        let nudges = nudge_worker(
            &settings,
            store.clone(),
            model,
            manychat.clone(),
            config.clone(),
            clock,
            metrics.clone(),
            turns.shared(),
        );
        let worker = outbox_worker(
            &settings,
            store.clone(),
            manychat,
            reply_flow_ns,
            clock,
            metrics.clone(),
            config.clone(),
        )
        .with_plugins(plugins.clone());
        let places =
            crate::turn::TurnPlaces::new(settings.max_turns_in_flight, metrics.turns_waiting());
        let state = AppState {
            turns,
            clock,
            store,
            config,
            metrics,
            auth: Arc::new(http::auth::Authenticator::new(
                settings.manychat_shared_secrets.clone(),
            )),
            trust_proxy: Arc::new(settings.trust_proxy.clone()),
            rate_limit: Arc::new(http::rate_limit::RateLimiter::default()),
            channel: settings.channel,
            callback_url: crate::channel::callback_url(&settings.public_base_url),
            token_field: settings.manychat_token_field.clone(),
            places,
            body_timeout: settings.connections.body_timeout,
            metrics_auth: metrics_auth(&settings, &listener),
            release_auth: settings
                .release_token
                .clone()
                .map(|token| Arc::new(http::auth::Authenticator::new(vec![token]))),
        };
        if settings.release_token.is_none() {
            tracing::info!(
                "the release route is off: RELEASE_TOKEN is not set (the release command works)"
            );
        }
        let console = settings.console_password_hash.clone().map(|hash| {
            let service = crate::console::Service {
                store: state.store.clone(),
                webhook: http::router(state.clone()),
                secret: settings.manychat_shared_secrets.first().cloned(),
                token_field: settings.manychat_token_field.clone(),
                recorder,
                turns: state.turns.clone(),
                metrics: state.metrics.clone(),
                // The mocks (`mock:…`) call no provider: nothing is billed.
                live_model: !model_id.starts_with("mock:"),
            };
            crate::console::Console::new(
                hash,
                service,
                state.config.clone(),
                clock,
                state.trust_proxy.clone(),
                crate::console::Running {
                    version: crate::VERSION,
                    model_id,
                    store: crate::store::describe_database(settings.database_url.expose()),
                },
                RELOAD_TIMEOUT,
            )
        });
        if console.is_none() {
            tracing::info!("the console is off: CONSOLE_PASSWORD_HASH is not set");
        }
        Ok(Self {
            console,
            listener,
            state,
            worker,
            nudges,
            playbook,
            tasks,
            settings,
            overrides_manual_worker: overrides.manual_worker,
            reload_on_sighup: overrides.reload_on_sighup,
        })
    }

    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    pub fn store(&self) -> Arc<dyn Store> {
        self.state.store.clone()
    }

    pub fn config(&self) -> Arc<ConfigHandle> {
        self.state.config.clone()
    }

    pub fn metrics(&self) -> Arc<Metrics> {
        self.state.metrics.clone()
    }

    /// The outbox worker, for tests that drive it by hand (`run_once`).
    pub fn worker(&self) -> OutboxWorker {
        self.worker.clone()
    }

    /// The nudge worker, for tests that drive it by hand (`run_once`).
    pub fn nudge_worker(&self) -> NudgeWorker {
        self.nudges.clone()
    }

    /// 031: the active playbook as the turns read it, for tests that wait on its refresh.
    pub fn playbook(&self) -> PlaybookCache {
        self.playbook.clone()
    }

    /// Agent tasks and post-response actions still running.
    pub fn tasks(&self) -> TaskTracker {
        self.tasks.clone()
    }

    /// Serves until `shutdown` fires, then drains (see the module doc).
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), std::io::Error> {
        // The outbox worker stops last: after the requests and the agent tasks, so the replies
        // they queue are still delivered while it drains (`SHUTDOWN_DRAIN_MS`).
        let worker_stop = CancellationToken::new();
        let worker = (!self.overrides_manual_worker).then(|| {
            let token = worker_stop.clone();
            tokio::spawn(self.worker.clone().run(token))
        });
        let nudges = (!self.overrides_manual_worker).then(|| {
            let token = shutdown.clone();
            tokio::spawn(self.nudges.clone().run(token))
        });
        // What the config derives (the knowledge index, the tool specs, the prompt) is built
        // now, so the first turn does not pay for it; likewise after every applied reload.
        let shared = self.state.turns.shared();
        warm(&shared, self.state.config.snapshot()).await;
        if self.reload_on_sighup {
            spawn_reload_on_sighup(self.state.config.clone(), shared, shutdown.clone())?;
        }
        // 031: off the inbound path; a failed refresh keeps the version the turns have.
        self.playbook.spawn(
            self.state.store.clone(),
            self.state.config.clone(),
            shutdown.clone(),
        );
        // Plugin writes a stopped process left under way (a store this process owns).
        if self.state.store.single_process()
            && let Err(error) = self.state.turns.settle_writes_under_way(None).await
        {
            tracing::error!(error = %error, "could not settle plugin writes left under way");
        }
        // Replies a stopped process promised and did not give.
        if let Err(error) = self.state.turns.recover_promises().await {
            tracing::error!(error = %error, "could not look for interrupted turns");
        }
        // Several replicas: this one's lease, and the turns of one that died (`turn::takeover`).
        // It keeps its lease until its own turns are drained.
        let takeover = {
            let turns = self.state.turns.clone();
            let (shutdown, stop) = (shutdown.clone(), worker_stop.clone());
            tokio::spawn(async move { turns.take_over_promises(shutdown, stop).await })
        };
        http::server::raise_fd_limit(&self.settings.connections);
        let mut router = http::router(self.state.clone());
        if let Some(console) = self.console.take() {
            router = router.merge(crate::console::router(console));
        }
        http::server::serve(
            self.listener,
            router,
            self.settings.connections,
            self.state.trust_proxy.clone(),
            self.state.metrics.clone(),
            shutdown.clone(),
        )
        .await?;
        tracing::info!("requests in flight finished; draining the agent tasks and the workers");
        if let Some(nudges) = nudges {
            let _ = nudges.await;
        }
        self.tasks.close();
        let bound = self.settings.model_abort + Duration::from_secs(5);
        if tokio::time::timeout(bound, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("drain bound reached; abandoning tasks still running");
        }
        worker_stop.cancel();
        if let Some(worker) = worker {
            let _ = worker.await;
        }
        let _ = takeover.await;
        tracing::info!("shutdown complete");
        Ok(())
    }
}

/// The nudge worker (025) of `serve` and `worker`: it polls every `NUDGE_POLL_MS` and runs the
/// nudge turn on `model`, bounded by `MODEL_ABORT_MS`, through the process's shared client, on
/// what the process's turns share (`serve`: the turn engine's snapshot cache and budget ledger).
#[allow(clippy::too_many_arguments)]
pub fn nudge_worker(
    settings: &Settings,
    store: Arc<dyn Store>,
    model: Arc<dyn Model>,
    manychat: ManyChatClient,
    config: Arc<ConfigHandle>,
    clock: Clock,
    metrics: Arc<Metrics>,
    shared: TurnsShared,
) -> NudgeWorker {
    let turn = AgentNudgeTurn {
        store: store.clone(),
        model,
        manychat: manychat.clone(),
        clock,
        settings: NudgeTurnSettings {
            model_abort: settings.model_abort,
            max_output_tokens: settings.model.max_output_tokens,
            temperature: settings.temperature_or_default(),
            channel: settings.channel,
        },
        shared,
        metrics: metrics.clone(),
    };
    NudgeWorker::new(
        store,
        manychat,
        config,
        clock,
        metrics,
        NudgeSettings {
            poll: settings.nudge_poll,
            model_abort: settings.model_abort,
        },
        Arc::new(turn),
    )
}

/// The outbox worker of `serve` and `worker`: replies go to `MANYCHAT_REPLY_FIELD` and
/// `reply_flow_ns`, `MANYCHAT_REPLY_GAP_MS` apart, claimed for `OUTBOX_LEASE_MS`, with the
/// delivery handshake when `MANYCHAT_DELIVERED_FIELD` is set; a dead-lettered reply hands its contact off per the tenant's `rules.handoff`.
pub fn outbox_worker(
    settings: &Settings,
    store: Arc<dyn Store>,
    manychat: ManyChatClient,
    reply_flow_ns: String,
    clock: Clock,
    metrics: Arc<Metrics>,
    config: Arc<ConfigHandle>,
) -> OutboxWorker {
    let worker_settings = WorkerSettings::new(
        settings.manychat_reply_field.clone(),
        reply_flow_ns,
        settings.manychat_reply_gap,
    )
    .with_token_field(settings.manychat_token_field.clone())
    .with_lease(settings.outbox_lease)
    .with_give_up_after(settings.outbox_give_up_after)
    .with_shutdown_drain(settings.shutdown_drain)
    .with_handshake(settings.manychat_delivery_handshake.clone());
    OutboxWorker::new(store, manychat, clock, worker_settings, metrics).with_tenant_config(config)
}

/// The ManyChat limiter for a process using `store`: on a store that keeps the
/// account-wide bucket (Postgres) every request draws from it, so all replicas together stay
/// under ManyChat's limit; otherwise (SQLite, one process) the in-process bucket is the budget.
/// Either way sendFlow is counted per contact in the store.
pub fn manychat_limiter(store: &Arc<dyn Store>, clock: Clock) -> ManyChatLimiter {
    let budget = Arc::new(StoreBudget {
        store: store.clone(),
        clock,
    });
    if store.shares_manychat_budget() {
        ManyChatLimiter::new()
            .with_flow_counter(budget.clone())
            .with_shared_bucket(budget)
    } else if store.reopened() {
        // One process, its own bucket, on a database another process used before it: the
        // bucket starts empty, so a restart right after a burst does not spend the account's
        // second twice.
        ManyChatLimiter::starting_empty().with_flow_counter(budget)
    } else {
        ManyChatLimiter::new().with_flow_counter(budget)
    }
}

/// The store as the limiter's shared bucket and flow counter.
struct StoreBudget {
    store: Arc<dyn Store>,
    clock: Clock,
}

#[async_trait::async_trait]
impl SharedBucket for StoreBudget {
    async fn take(&self, quota: BucketQuota) -> Result<Option<Duration>, String> {
        self.store
            .take_manychat_slot(quota.interval, quota.burst)
            .await
            .map_err(|e| e.to_string())
    }

    async fn hold(&self, quota: BucketQuota, wait: Duration) -> Result<(), String> {
        self.store
            .hold_manychat_requests(quota.interval, quota.burst, wait)
            .await
            .map_err(|e| e.to_string())
    }

    /// The database measured `wait` on its clock, which runs in real time even when tokio's is
    /// paused (a test's frozen clock): the wait is real time too, on a blocking thread so the
    /// runtime is never held (only the head waiter of a process asks the bucket, so at most one
    /// such thread waits per process).
    async fn wait(&self, wait: Duration) {
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(wait)).await;
    }
}

#[async_trait::async_trait]
impl FlowCounter for StoreBudget {
    async fn count(
        &self,
        subscriber: &crate::ids::SubscriberId,
        per_hour: u32,
    ) -> Result<bool, String> {
        self.store
            .count_flow_send(subscriber, self.clock.now(), per_hour)
            .await
            .map_err(|e| e.to_string())
    }
}

/// 020: the media host, `TRANSCRIPTION_MODEL` resolved by the model registry, and the system's
/// ffmpeg (absent: videos take the fallback, and the start says so once).
fn media_settings(settings: &Settings) -> Result<crate::media::MediaSettings, StartupError> {
    let host = crate::media::MediaHost::parse(&settings.manychat_media_base)
        .map_err(|e| StartupError::Missing(format!("MANYCHAT_MEDIA_BASE {e}")))?;
    let transcriber = settings
        .transcription_model
        .as_deref()
        .map(|spec| crate::model::transcription::resolve_transcriber(spec, &settings.model))
        .transpose()?;
    let ffmpeg = crate::media::video::Ffmpeg::find();
    if ffmpeg.is_none() {
        tracing::warn!(
            "ffmpeg or ffprobe not found on PATH: contacts' videos take the media fallback, voice notes go unprobed"
        );
    }
    Ok(crate::media::MediaSettings {
        host,
        transcriber,
        ffmpeg,
        limits: settings.media_limits,
    })
}

/// How long a SIGHUP reload may read the config folder. Its files are a few KiB; a read that
/// takes longer is stuck (a hung mount), and the old config stays in force.
pub const RELOAD_TIMEOUT: Duration = Duration::from_secs(10);

/// SIGHUP → load → validate → swap, or keep the old config and log why (SYSTEM 5.3). A reload
/// is bounded by [`RELOAD_TIMEOUT`], so a stuck read never stops later SIGHUPs from being heard.
fn spawn_reload_on_sighup(
    config: Arc<ConfigHandle>,
    shared: TurnsShared,
    shutdown: CancellationToken,
) -> Result<(), std::io::Error> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                received = hangups.recv() => {
                    if received.is_none() { break; }
                    match config.reload_bounded(RELOAD_TIMEOUT).await {
                        ReloadOutcome::Applied => {
                            warm(&shared, config.snapshot()).await;
                            tracing::info!("SIGHUP: tenant config reloaded");
                        }
                        ReloadOutcome::Rejected(errors) => tracing::warn!(
                            issues = errors.len(),
                            "SIGHUP: tenant config invalid; the old config stays in force"
                        ),
                        ReloadOutcome::TimedOut | ReloadOutcome::StillReading => tracing::warn!(
                            "SIGHUP: tenant config not reloaded; the old config stays in force"
                        ),
                    }
                }
            }
        }
    });
    Ok(())
}

/// Builds what `config` derives for the turns (`TurnsShared::warm`): off the async workers when
/// it has an index to build (a large catalog's takes a moment), in place otherwise (a small
/// tenant's prompt and tool specs take microseconds, and a test's paused clock sees no wait).
async fn warm(shared: &TurnsShared, config: Arc<crate::config::TenantConfig>) {
    if !crate::knowledge::Layout::of(&config).retrieves() {
        return shared.warm(&config);
    }
    let shared = shared.clone();
    if tokio::task::spawn_blocking(move || shared.warm(&config))
        .await
        .is_err()
    {
        tracing::error!("building the config's derived state failed; the first turn builds it");
    }
}

/// A future that resolves on SIGTERM or Ctrl-C.
pub async fn termination_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How long `requests` ManyChat requests wait on the limiter of a process on `store`.
    async fn time_for(store: &Arc<dyn Store>, requests: usize) -> Duration {
        let limiter = manychat_limiter(store, Clock::system());
        let start = tokio::time::Instant::now();
        for _ in 0..requests {
            limiter.acquire().await;
        }
        start.elapsed()
    }

    /// ManyChat allows 10 requests a second per account: a process restarted on its SQLite
    /// database (the one before it may have spent this second) starts its bucket empty, while a
    /// process on a new database may send its burst of 5 at once.
    #[tokio::test(start_paused = true)]
    async fn fault_a_restarted_sqlite_process_starts_with_an_empty_manychat_bucket() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("agent.db").display());
        let fresh = store::connect(&url).await.unwrap();
        assert_eq!(
            time_for(&fresh, 5).await,
            Duration::ZERO,
            "a burst on a new database"
        );
        drop(fresh);
        let restarted = store::connect(&url).await.unwrap();
        assert!(restarted.reopened());
        assert_eq!(
            time_for(&restarted, 5).await,
            Duration::from_millis(500),
            "no burst after a restart: one request every 100 ms from the start"
        );
    }
}
