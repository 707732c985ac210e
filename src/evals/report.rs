//! Running a suite and the report `manychat-agent eval` prints: one result per case in suite
//! order, run one after another or at most `concurrency` at a time.

use super::*;

// ---------------------------------------------------------------------------------------------
// Running and reporting

#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    pub id: String,
    pub failures: Vec<String>,
    pub latency_ms: u64,
    pub cost_usd: f64,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// The outcome of a suite: one result per case, in suite order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EvalReport {
    pub results: Vec<CaseResult>,
}

impl EvalReport {
    pub fn failed(&self) -> usize {
        self.results.iter().filter(|r| !r.passed()).count()
    }

    pub fn passed(&self) -> usize {
        self.results.len() - self.failed()
    }

    /// Nearest-rank percentile of the per-case latencies (0 for an empty report).
    pub fn latency_percentile(&self, percent: u32) -> u64 {
        let mut latencies: Vec<u64> = self.results.iter().map(|r| r.latency_ms).collect();
        if latencies.is_empty() {
            return 0;
        }
        latencies.sort_unstable();
        let rank = (u64::from(percent.min(100)) * latencies.len() as u64).div_ceil(100);
        let index = usize::try_from(rank).unwrap_or(usize::MAX).max(1) - 1;
        latencies[index.min(latencies.len() - 1)]
    }

    pub fn total_cost_usd(&self) -> f64 {
        self.results.iter().map(|r| r.cost_usd).sum()
    }
}

impl fmt::Display for CaseResult {
    /// The case's report line: `PASS id (ms)` or `FAIL id: failures`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.passed() {
            write!(f, "PASS {} ({} ms)", self.id, self.latency_ms)
        } else {
            write!(f, "FAIL {}: {}", self.id, self.failures.join("; "))
        }
    }
}

impl EvalReport {
    /// The totals, without the case lines (printed as each case finished).
    pub fn summary(&self) -> String {
        format!(
            "{} cases: {} passed, {} failed\nlatency p50 {} ms, p95 {} ms\ntotal cost ${:.6}",
            self.results.len(),
            self.passed(),
            self.failed(),
            self.latency_percentile(50),
            self.latency_percentile(95),
            self.total_cost_usd()
        )
    }
}

impl fmt::Display for EvalReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.results {
            writeln!(f, "{r}")?;
        }
        writeln!(
            f,
            "{} cases: {} passed, {} failed",
            self.results.len(),
            self.passed(),
            self.failed()
        )?;
        writeln!(
            f,
            "latency p50 {} ms, p95 {} ms",
            self.latency_percentile(50),
            self.latency_percentile(95)
        )?;
        write!(f, "total cost ${:.6}", self.total_cost_usd())
    }
}

/// Runs every case through `run`, one after another (so latencies are not skewed by the
/// cases competing with each other), and judges each observation.
pub async fn run_suite<F, Fut>(
    cases: &[EvalCase],
    catalog: &Catalog,
    leak_probes: &[String],
    run: F,
) -> EvalReport
where
    F: Fn(&EvalCase) -> Fut,
    Fut: Future<Output = Observation>,
{
    run_suite_concurrently(cases, catalog, leak_probes, 1, run, |_| {}).await
}

/// Runs the cases through `run`, at most `concurrency` at a time (a slow model's suite takes a
/// fraction of the time; each case's latency is its own call's), judges each observation, and
/// hands each result to `finished` as soon as its case is judged. The report keeps suite order.
pub async fn run_suite_concurrently<F, Fut>(
    cases: &[EvalCase],
    catalog: &Catalog,
    leak_probes: &[String],
    concurrency: usize,
    run: F,
    mut finished: impl FnMut(&CaseResult),
) -> EvalReport
where
    F: Fn(&EvalCase) -> Fut,
    Fut: Future<Output = Observation>,
{
    use std::pin::Pin;
    use std::task::Poll;

    let mut waiting = cases.iter().enumerate();
    let mut running: Vec<(usize, Pin<Box<Fut>>)> = Vec::new();
    let mut results: Vec<Option<CaseResult>> = vec![None; cases.len()];
    loop {
        while running.len() < concurrency.max(1) {
            let Some((index, case)) = waiting.next() else {
                break;
            };
            running.push((index, Box::pin(run(case))));
        }
        if running.is_empty() {
            break;
        }
        // The first of the running cases to finish (a handful: each is polled when woken).
        let (slot, obs) = std::future::poll_fn(|cx| {
            for (slot, (_, case)) in running.iter_mut().enumerate() {
                if let Poll::Ready(obs) = case.as_mut().poll(cx) {
                    return Poll::Ready((slot, obs));
                }
            }
            Poll::Pending
        })
        .await;
        let (index, _) = running.swap_remove(slot);
        let case = &cases[index];
        let result = CaseResult {
            id: case.id.clone(),
            failures: check(case, &obs, catalog, leak_probes),
            latency_ms: obs.latency_ms,
            cost_usd: obs.cost_usd,
        };
        finished(&result);
        results[index] = Some(result);
    }
    EvalReport {
        results: results.into_iter().flatten().collect(),
    }
}
