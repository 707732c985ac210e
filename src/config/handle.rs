//! The live tenant config and its reload (SYSTEM 5.3): SIGHUP → load → validate the whole set →
//! swap, or keep the old one and say why.
//!
//! Invariants:
//! - The config in force is always one that passed validation whole; a bad reload changes
//!   nothing.
//! - A turn holds the `Arc` it got from [`ConfigHandle::snapshot`] to its end, so a reload never
//!   mixes two configs within a turn.
//! - A rejected reload logs file, path and rule only, never a value (C5, C9).
//! - A reload that fails for any reason, a panic in the load or a check included, keeps the
//!   config in force; what a set may expand into is bounded before it is built
//!   (`load::MAX_PROMPT_BYTES`, the name and description limits), so no file set can make the
//!   process allocate without bound.
//! - A bounded reload ([`ConfigHandle::reload_bounded`]) swaps only what it read within its
//!   bound: a read that returns late is dropped, and while it is still stuck no other read
//!   starts, so a wedged file system costs one thread, not one per SIGHUP.
//! - A set that needs something of the process beyond its files (a plugin tool's signing secret
//!   in the environment) is checked by the [`EnvCheck`]s registered with
//!   [`ConfigHandle::check_with`] before it is swapped in; an issue they find refuses the reload
//!   like a file error (named by file, path and rule, never a value).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::context::ConfigContext;
use super::error::{ConfigErrors, ConfigIssue};
use super::load::load_dir;
use super::tenant::TenantConfig;

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The new set was valid and is now in force.
    Applied,
    /// The new set was invalid; the previous config stays in force.
    Rejected(ConfigErrors),
    /// Reading the folder outlasted the bound; the previous config stays in force.
    TimedOut,
    /// An earlier reload's read is still stuck; this one did not start.
    StillReading,
}

/// A check a loaded set must pass before a reload swaps it in, for what the files cannot say
/// alone (the environment): the issues it finds, none when the set may be applied.
pub type EnvCheck = Box<dyn Fn(&Path, &TenantConfig) -> Vec<ConfigIssue> + Send + Sync>;

/// The tenant config in force, swappable atomically.
pub struct ConfigHandle {
    current: ArcSwap<TenantConfig>,
    /// Where the files live; each reload reads them again from here.
    dir: PathBuf,
    /// The environment's names the cross-checks compare against; fixed for the process.
    ctx: ConfigContext,
    /// Set while a bounded reload's read runs, until that read returns (even after its bound).
    reading: AtomicBool,
    /// What a reloaded set must also pass ([`Self::check_with`]).
    checks: std::sync::RwLock<Vec<EnvCheck>>,
    /// How many reloads have ended, applied or refused: what a caller waiting for the outcome of
    /// a reload it asked for (a signal has no answer) watches.
    settled: AtomicU64,
}

impl ConfigHandle {
    /// Loads the folder once; a process must not start on an invalid config (SYSTEM 5.1).
    pub fn load(dir: impl Into<PathBuf>, ctx: ConfigContext) -> Result<Self, ConfigErrors> {
        let dir = dir.into();
        let config = load_dir(&dir, &ctx)?;
        Ok(Self::new(config, dir, ctx))
    }

    /// Wraps an already-loaded config (tests, or a caller that loaded it itself).
    pub fn new(config: TenantConfig, dir: impl Into<PathBuf>, ctx: ConfigContext) -> Self {
        Self {
            current: ArcSwap::from_pointee(config),
            dir: dir.into(),
            ctx,
            reading: AtomicBool::new(false),
            checks: std::sync::RwLock::new(Vec::new()),
            settled: AtomicU64::new(0),
        }
    }

    /// Registers a check every reloaded set must pass before it is swapped in (`serve` checks
    /// the plugin tools' secrets in its environment). The config in force is not checked again:
    /// the caller checked it at start.
    pub fn check_with(&self, check: EnvCheck) {
        self.checks
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(check);
    }

    /// The registered checks' issues for `config`.
    fn env_issues(&self, config: &TenantConfig) -> Vec<ConfigIssue> {
        let checks = self
            .checks
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        checks
            .iter()
            .flat_map(|check| check(&self.dir, config))
            .collect()
    }

    /// How many reloads have ended so far, applied or refused (a reload that outlasted its bound
    /// or did not start is not counted).
    pub fn reloads_settled(&self) -> u64 {
        self.settled.load(Ordering::Acquire)
    }

    /// The config in force, to hold for the whole of one turn.
    pub fn snapshot(&self) -> Arc<TenantConfig> {
        self.current.load_full()
    }

    /// Reads and validates the folder again, and swaps only if the whole set is valid. Blocking
    /// file IO on a few small files: call it from `spawn_blocking` on a busy runtime.
    pub fn reload(&self) -> ReloadOutcome {
        let loaded = std::panic::catch_unwind(|| load_dir(&self.dir, &self.ctx))
            .unwrap_or_else(|_| Err(self.failed_unexpectedly()));
        self.settle(loaded)
    }

    /// What a reload would do with the files on disk now, without swapping: the set as loaded
    /// and checked like a reload, or every issue found. Blocking file IO: call it from
    /// `spawn_blocking`.
    pub fn check_on_disk(&self) -> Result<TenantConfig, ConfigErrors> {
        let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            load_dir(&self.dir, &self.ctx).and_then(|config| {
                let issues = self.env_issues(&config);
                if issues.is_empty() {
                    Ok(config)
                } else {
                    Err(ConfigErrors(issues))
                }
            })
        }));
        loaded.unwrap_or_else(|_| Err(self.failed_unexpectedly()))
    }

    /// A reload that panicked: refused like an invalid set, naming the folder only.
    fn failed_unexpectedly(&self) -> ConfigErrors {
        ConfigErrors(vec![ConfigIssue::new(
            self.dir.display().to_string(),
            "$",
            "the reload failed unexpectedly",
        )])
    }

    /// [`reload`](Self::reload) on a blocking thread, bounded by `bound`: a read that takes
    /// longer (a hung mount) leaves the config in force and is logged, and its late result is
    /// dropped. While it is stuck, further reloads answer [`ReloadOutcome::StillReading`].
    pub async fn reload_bounded(self: &Arc<Self>, bound: Duration) -> ReloadOutcome {
        let this = self.clone();
        self.reload_with(bound, move || load_dir(&this.dir, &this.ctx))
            .await
    }

    async fn reload_with(
        self: &Arc<Self>,
        bound: Duration,
        load: impl FnOnce() -> Result<TenantConfig, ConfigErrors> + Send + 'static,
    ) -> ReloadOutcome {
        if self.reading.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                dir = %self.dir.display(),
                "tenant config reload skipped: the previous reload is still reading the folder"
            );
            return ReloadOutcome::StillReading;
        }
        let this = self.clone();
        let read = tokio::task::spawn_blocking(move || {
            let loaded = load();
            this.reading.store(false, Ordering::Release);
            loaded
        });
        match tokio::time::timeout(bound, read).await {
            Ok(Ok(loaded)) => self.settle(loaded),
            Ok(Err(panicked)) => {
                self.reading.store(false, Ordering::Release);
                tracing::error!(error = %panicked, "tenant config reload failed");
                self.settle(Err(self.failed_unexpectedly()))
            }
            Err(_) => {
                tracing::warn!(
                    dir = %self.dir.display(),
                    bound_ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX),
                    "tenant config reload did not finish in time; keeping the previous config"
                );
                ReloadOutcome::TimedOut
            }
        }
    }

    /// Swaps in a config that loaded and passes the registered checks, or logs why the set was
    /// refused.
    fn settle(&self, loaded: Result<TenantConfig, ConfigErrors>) -> ReloadOutcome {
        // A check that panics refuses the set: whatever fails, the config in force stays.
        let loaded = loaded.and_then(|config| {
            let checked =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.env_issues(&config)));
            match checked {
                Ok(issues) if issues.is_empty() => Ok(config),
                Ok(issues) => Err(ConfigErrors(issues)),
                Err(_) => Err(self.failed_unexpectedly()),
            }
        });
        let outcome = self.swap_or_refuse(loaded);
        self.settled.fetch_add(1, Ordering::AcqRel);
        outcome
    }

    fn swap_or_refuse(&self, loaded: Result<TenantConfig, ConfigErrors>) -> ReloadOutcome {
        match loaded {
            Ok(config) => {
                self.current.store(Arc::new(config));
                tracing::info!(dir = %self.dir.display(), "tenant config reloaded");
                ReloadOutcome::Applied
            }
            Err(errors) => {
                for issue in errors.issues() {
                    tracing::warn!(
                        file = %issue.file,
                        path = %issue.path,
                        rule = %issue.rule,
                        "tenant config reload rejected; keeping the previous config"
                    );
                }
                ReloadOutcome::Rejected(errors)
            }
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn context(&self) -> &ConfigContext {
        &self.ctx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn demo_copy() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        crate::config::examples::copy_demo_into(dir.path());
        dir
    }

    /// A copy of the demo config, a handle that loaded it, and the snapshot it loaded.
    fn demo_loaded() -> (tempfile::TempDir, ConfigHandle, Arc<TenantConfig>) {
        let dir = demo_copy();
        let handle = ConfigHandle::load(dir.path(), ConfigContext::default()).expect("loads");
        let loaded = handle.snapshot();
        (dir, handle, loaded)
    }

    /// A valid change: a new `prompt.md`.
    fn write_new_persona(dir: &std::path::Path) {
        fs::write(dir.join("prompt.md"), "A new persona for {{businessName}}.").expect("write");
    }

    /// Each file under its size limit, yet `prompt.md` repeats the placeholder 65,000 times and
    /// `businessName` is 200,000 characters: the set is refused, naming both files and rules,
    /// before anything is expanded, and the config in force stays.
    #[test]
    fn a_config_that_would_expand_without_bound_is_refused_and_the_old_one_kept() {
        let (dir, handle, before) = demo_loaded();
        let prompt = "{{businessName}}".repeat(65_000);
        assert!(prompt.len() < crate::config::MAX_FILE_BYTES as usize);
        fs::write(dir.path().join("prompt.md"), &prompt).expect("write");
        let catalog_path = dir.path().join("catalog.json");
        let mut catalog: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&catalog_path).unwrap()).unwrap();
        catalog["businessName"] = serde_json::Value::String("N".repeat(200_000));
        fs::write(&catalog_path, catalog.to_string()).expect("write");

        let outcome = handle.reload();
        let ReloadOutcome::Rejected(errors) = outcome else {
            panic!("the set must be refused, got {outcome:?}");
        };
        let named = |file: &str, path: &str| {
            errors
                .issues()
                .iter()
                .any(|i| i.file == file && i.path == path && i.rule.contains("at most"))
        };
        assert!(named("prompt.md", "$"), "{errors}");
        assert!(named("catalog.json", "$.businessName"), "{errors}");
        assert_eq!(*handle.snapshot(), *before);
    }

    #[test]
    fn a_reload_whose_check_panics_keeps_the_old_config() {
        let (dir, handle, before) = demo_loaded();
        write_new_persona(dir.path());
        handle.check_with(Box::new(|_, _| panic!("a check failed")));
        let outcome = handle.reload();
        assert!(matches!(outcome, ReloadOutcome::Rejected(_)), "{outcome:?}");
        assert_eq!(*handle.snapshot(), *before);
    }

    #[test]
    fn system_5_3_reload_keeps_old_config_on_invalid_set() {
        let (dir, handle, before) = demo_loaded();

        // A valid prompt change alongside an invalid tools file: nothing of the set applies.
        write_new_persona(dir.path());
        fs::write(dir.path().join("tools.json"), "{\"flows\": [{}]}").expect("write");

        let outcome = handle.reload();
        let ReloadOutcome::Rejected(errors) = outcome else {
            panic!("an invalid set must be rejected, got {outcome:?}");
        };
        assert_eq!(errors.issues()[0].file, "tools.json");
        assert_eq!(*handle.snapshot(), *before);
    }

    #[test]
    fn system_5_3_reload_swaps_on_valid_set_and_held_snapshots_stay_unchanged() {
        let (dir, handle, held) = demo_loaded();
        let old_prompt = held.prompt.clone();

        write_new_persona(dir.path());
        assert_eq!(handle.reload(), ReloadOutcome::Applied);

        let now = handle.snapshot();
        assert_eq!(
            now.prompt,
            format!("A new persona for {}.", now.catalog.business_name)
        );
        assert_eq!(held.prompt, old_prompt, "a turn's snapshot never changes");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stuck_reload_times_out_keeps_the_old_config_and_drops_its_late_result() {
        let (dir, handle, before) = demo_loaded();
        let handle = Arc::new(handle);
        write_new_persona(dir.path());

        // A read that blocks until released, as on a hung mount.
        let (release, stuck) = std::sync::mpsc::channel::<()>();
        let (path, ctx) = (dir.path().to_owned(), ConfigContext::default());
        let reloading = tokio::spawn({
            let handle = handle.clone();
            async move {
                handle
                    .reload_with(Duration::from_secs(10), move || {
                        let _ = stuck.recv();
                        load_dir(&path, &ctx)
                    })
                    .await
            }
        });
        tokio::task::yield_now().await;
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(reloading.await.unwrap(), ReloadOutcome::TimedOut);
        assert_eq!(*handle.snapshot(), *before);

        // While that read is stuck, another reload does not pile up behind it.
        assert_eq!(
            handle.reload_bounded(Duration::from_secs(10)).await,
            ReloadOutcome::StillReading
        );

        // The stuck read returns late: its result is not swapped in.
        release.send(()).unwrap();
        // Waits (at most a second, in 1 ms steps) for the blocking thread to finish its read:
        // a thread, not a timer, so tokio's clock cannot stand in for it.
        for _ in 0..1000 {
            if !handle.reading.load(Ordering::Acquire) {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(*handle.snapshot(), *before, "a late read changes nothing");

        // The next SIGHUP's reload applies.
        assert_eq!(
            handle.reload_bounded(Duration::from_secs(10)).await,
            ReloadOutcome::Applied
        );
        assert_ne!(handle.snapshot().prompt, before.prompt);
    }

    #[test]
    fn system_5_1_invalid_config_refuses_to_start() {
        let dir = demo_copy();
        fs::remove_file(dir.path().join("catalog.json")).expect("remove");
        let errors = ConfigHandle::load(dir.path(), ConfigContext::default())
            .err()
            .expect("load must fail");
        assert_eq!(errors.issues()[0].file, "catalog.json");
    }
}
