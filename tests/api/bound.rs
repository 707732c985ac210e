//! Every wait on a background task has a bound in real time, so a test that waits fails
//! instead of hanging. Real time, because tokio's clock may be paused or frozen
//! (`FrozenClock`): a tokio timeout would then never fire, or fire at once.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::Duration;

use tokio::task::{JoinError, JoinHandle};

/// How long (real time) a test waits for a background task before it fails. Far above what any
/// task here needs on a loaded machine, far below a hung CI run.
pub const BACKGROUND_BOUND: Duration = Duration::from_secs(60);

/// Awaits `task`, panicking if it has not finished within [`BACKGROUND_BOUND`] of real time.
pub async fn bounded<T>(what: &str, task: impl Future<Output = T>) -> T {
    bounded_by(BACKGROUND_BOUND, what, task).await
}

/// [`bounded`] with its own bound.
pub async fn bounded_by<T>(bound: Duration, what: &str, task: impl Future<Output = T>) -> T {
    let (expire, expired) = tokio::sync::oneshot::channel::<()>();
    // A plain thread (not `spawn_blocking`, which would stop a paused clock from advancing on
    // its own) counts real time; it ends as soon as `finished` is dropped.
    let (finished, watching) = channel::<()>();
    std::thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = watching.recv_timeout(bound) {
            let _ = expire.send(());
        }
    });
    let outcome = tokio::select! {
        biased;
        outcome = task => outcome,
        _ = expired => panic!("{what} did not finish within {bound:?} of real time"),
    };
    drop(finished);
    outcome
}

/// The end of a test's wait on an event it polls for (a service answering, tasks settling, a
/// log line): [`BACKGROUND_BOUND`] of real time from now. A wait bounded by a count of polls
/// instead fails on a busy machine, where each poll takes longer and the event comes later.
pub struct RealDeadline(std::time::Instant);

impl RealDeadline {
    /// [`BACKGROUND_BOUND`] of real time from now.
    pub fn start() -> Self {
        Self(std::time::Instant::now() + BACKGROUND_BOUND)
    }

    /// Whether the bound has passed: the event the test waits for is not coming.
    pub fn passed(&self) -> bool {
        std::time::Instant::now() >= self.0
    }
}

/// A task a test starts and later awaits: awaiting it is [`bounded`].
pub struct Background<T>(JoinHandle<T>);

/// Spawns `task`; awaiting the handle fails the test after [`BACKGROUND_BOUND`].
pub fn in_background<T: Send + 'static>(
    task: impl Future<Output = T> + Send + 'static,
) -> Background<T> {
    Background(tokio::spawn(task))
}

impl<T> Background<T> {
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

impl<T: Send + 'static> IntoFuture for Background<T> {
    type Output = Result<T, JoinError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(bounded("a background task", self.0))
    }
}

#[tokio::test(start_paused = true)]
async fn a_wait_on_a_background_task_that_never_finishes_fails_within_its_bound() {
    let _frozen = crate::helpers::FrozenClock::freeze();
    let never = in_background(std::future::pending::<()>());
    let waited = tokio::spawn(bounded_by(
        Duration::from_millis(50),
        "the pending task",
        never.into_future(),
    ));
    let panic = waited.await.expect_err("the wait fails").into_panic();
    let message = panic.downcast_ref::<String>().expect("a message");
    assert!(
        message.contains("the pending task did not finish within 50ms"),
        "{message}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_bounded_wait_on_a_finished_task_returns_its_output() {
    let _frozen = crate::helpers::FrozenClock::freeze();
    let task = in_background(async { 7 });
    assert_eq!(task.await.unwrap(), 7);
}
