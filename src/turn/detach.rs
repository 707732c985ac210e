//! Work a request polls itself while it waits for it, and that moves to a task of its own once
//! the request stops waiting (its deadline passed, or the request was dropped), so it outlives
//! the request. The common case, an answer well within the deadline, then costs no task: no
//! spawn, no hand-over between threads.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use tokio_util::task::TaskTracker;

type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

pub struct Detachable {
    work: Option<Work>,
    tasks: TaskTracker,
}

impl Detachable {
    /// Work that panics ends there, as it would in a task of its own: the panic reaches
    /// neither the request polling it nor the task it moves to.
    pub fn new(tasks: &TaskTracker, work: impl Future<Output = ()> + Send + 'static) -> Self {
        let work = async move {
            if caught(work).await.is_none() {
                tracing::error!("the agent panicked");
            }
        };
        Self {
            work: Some(Box::pin(work)),
            tasks: tasks.clone(),
        }
    }

    /// Polls the work while waiting for `until`, and answers `until`'s output. Work that ends
    /// first is done; work still running when `until` answers keeps its place here until the
    /// `Detachable` is dropped, and then runs on in the task tracker.
    pub async fn wait<T>(&mut self, until: impl Future<Output = T>) -> T {
        let mut until = std::pin::pin!(until);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(value) = until.as_mut().poll(cx) {
                return Poll::Ready(value);
            }
            if let Some(work) = self.work.as_mut()
                && work.as_mut().poll(cx).is_ready()
            {
                self.work = None;
                // The work may have settled what `until` waits for.
                return until.as_mut().poll(cx);
            }
            Poll::Pending
        })
        .await
    }
}

/// Runs `future` to its end, or to a panic inside it: `None` then, and the panic goes no
/// further (a bug in one turn answers that turn with the escalation copy; it does not drop the
/// request's connection).
pub(super) async fn caught<F: Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Ready(value)) => Poll::Ready(Some(value)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(None),
        }
    })
    .await
}

impl Drop for Detachable {
    fn drop(&mut self) {
        // Outside a runtime (it is shutting down) there is nowhere to run it: it is dropped.
        if let Some(work) = self.work.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            self.tasks.spawn(work);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;
    use tokio::sync::oneshot;

    #[tokio::test(start_paused = true)]
    async fn system_3_4_work_that_answers_in_time_runs_in_the_request() {
        let tasks = TaskTracker::new();
        let (tx, rx) = oneshot::channel();
        let mut work = Detachable::new(&tasks, async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            let _ = tx.send(7);
        });
        assert_eq!(work.wait(rx).await.ok(), Some(7));
        drop(work);
        assert!(tasks.is_empty(), "nothing was left to a task");
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_4_work_still_running_when_the_request_stops_waiting_runs_on() {
        let tasks = TaskTracker::new();
        let finished = Arc::new(AtomicBool::new(false));
        let done = finished.clone();
        let mut work = Detachable::new(&tasks, async move {
            tokio::time::sleep(Duration::from_secs(20)).await;
            done.store(true, Ordering::SeqCst);
        });
        let waited = work.wait(tokio::time::sleep(Duration::from_secs(8))).await;
        assert_eq!(waited, ());
        assert!(!finished.load(Ordering::SeqCst));
        drop(work);
        assert_eq!(tasks.len(), 1, "the work moved to a task of its own");
        tasks.close();
        tasks.wait().await;
        assert!(finished.load(Ordering::SeqCst), "and finished there");
    }

    #[tokio::test]
    async fn system_3_3_work_that_panics_does_not_take_the_request_with_it() {
        let tasks = TaskTracker::new();
        let (tx, rx) = oneshot::channel::<u8>();
        let mut work = Detachable::new(&tasks, async move {
            let _keep = tx;
            panic!("a bug in the agent");
        });
        // The sender went with the panic: the request sees a closed channel, not the panic.
        assert!(work.wait(rx).await.is_err());
        drop(work);
        assert!(tasks.is_empty(), "nothing is left to run");
    }

    #[tokio::test(start_paused = true)]
    async fn system_3_4_work_of_a_dropped_request_runs_on() {
        let tasks = TaskTracker::new();
        let finished = Arc::new(AtomicBool::new(false));
        let done = finished.clone();
        let (started_tx, started_rx) = oneshot::channel::<()>();
        let request = {
            let tasks = tasks.clone();
            tokio::spawn(async move {
                let mut work = Detachable::new(&tasks, async move {
                    let _ = started_tx.send(());
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    done.store(true, Ordering::SeqCst);
                });
                work.wait(std::future::pending::<()>()).await;
            })
        };
        started_rx
            .await
            .expect("the work started inside the request");
        request.abort();
        let _ = request.await;
        tasks.close();
        tasks.wait().await;
        assert!(finished.load(Ordering::SeqCst));
    }
}
