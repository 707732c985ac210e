//! A provider's usage report, read so that a bad one never fails a turn.
//!
//! Invariants:
//! - The prompt-cache counts (OpenAI's `prompt_tokens_details.cached_tokens`, Anthropic's
//!   `cache_read_input_tokens` and `cache_creation_input_tokens`, Gemini's
//!   `cachedContentTokenCount`) are read leniently: absent or `null` is 0; anything but a
//!   whole non-negative number is **malformed** and recorded as 0 (unknown).
//! - Cache reads and writes are parts of the input: a report of more than the input is clamped
//!   to it, reads first.
//! - An answer without a usage report is recorded with no usage (every count 0).
//! - Each of these is logged once per process, with the provider's name only (never a body or
//!   a contact's data): a provider that does it once usually does it on every call.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::Usage;

/// One count of a usage report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Count {
    /// Not reported (absent or `null`).
    #[default]
    Absent,
    Known(u64),
    /// Reported as something other than a whole non-negative number.
    Malformed,
}

impl Count {
    pub(crate) fn of(value: &Value) -> Self {
        match value {
            Value::Null => Count::Absent,
            other => other.as_u64().map_or(Count::Malformed, Count::Known),
        }
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Count::of(&Value::deserialize(deserializer)?))
    }
}

/// What a provider reported, as its parser read it: the whole input (cache reads and writes
/// included), the output, and the two cache counts.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Report {
    pub input: u64,
    pub output: u64,
    pub cached: Count,
    pub written: Count,
}

/// Something wrong with a report, each logged once per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Anomaly {
    NoUsage,
    MalformedCacheCount,
    CacheAboveInput,
}

static LOGGED: [AtomicBool; 3] = [
    AtomicBool::new(false),
    AtomicBool::new(false),
    AtomicBool::new(false),
];

impl Anomaly {
    fn what(self) -> &'static str {
        match self {
            Anomaly::NoUsage => "an answer carried no usage report: recorded as no usage",
            Anomaly::MalformedCacheCount => {
                "a prompt-cache count was not a whole number: recorded as 0"
            }
            Anomaly::CacheAboveInput => {
                "prompt-cache counts above the input were reported: held to the input"
            }
        }
    }

    /// Whether this is the first time in the process (the flag is set on the way).
    fn first_time(self) -> bool {
        !LOGGED[self as usize].swap(true, Ordering::Relaxed)
    }
}

fn note(provider: &'static str, anomaly: Anomaly) {
    if anomaly.first_time() {
        tracing::warn!(
            provider,
            "model usage: {} (logged once per process)",
            anomaly.what()
        );
    }
}

/// The usage to record from `provider`'s report (`None`: the answer had none).
pub(crate) fn usage(provider: &'static str, report: Option<Report>) -> Usage {
    let Some(report) = report else {
        note(provider, Anomaly::NoUsage);
        return Usage::default();
    };
    let (cached, written) = checked(report);
    for anomaly in [cached.1, written.1].into_iter().flatten() {
        note(provider, anomaly);
    }
    Usage {
        input_tokens: report.input,
        output_tokens: report.output,
        cached_tokens: cached.0,
        cache_write_tokens: written.0,
    }
}

/// The reads and the writes, each with what was wrong with it (if anything).
fn checked(report: Report) -> ((u64, Option<Anomaly>), (u64, Option<Anomaly>)) {
    let count = |count: Count| match count {
        Count::Absent => (0, None),
        Count::Known(n) => (n, None),
        Count::Malformed => (0, Some(Anomaly::MalformedCacheCount)),
    };
    let (read, read_bad) = count(report.cached);
    let (write, write_bad) = count(report.written);
    let held_read = read.min(report.input);
    let held_write = write.min(report.input - held_read);
    let above = (held_read < read || held_write < write).then_some(Anomaly::CacheAboveInput);
    (
        (held_read, read_bad.or(above)),
        (held_write, write_bad.or(above)),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn report(input: u64, cached: Count, written: Count) -> Report {
        Report {
            input,
            output: 7,
            cached,
            written,
        }
    }

    #[test]
    fn usage_malformed_cache_counts_are_read_as_unknown_never_as_an_error() {
        for (value, count) in [
            (json!(null), Count::Absent),
            (json!(12), Count::Known(12)),
            (json!(-3), Count::Malformed),
            (json!(1.5), Count::Malformed),
            (json!("12"), Count::Malformed),
            (json!({"n": 1}), Count::Malformed),
        ] {
            assert_eq!(
                serde_json::from_value::<Count>(value.clone()).unwrap(),
                count,
                "{value}"
            );
        }
        let usage = usage(
            "test",
            Some(report(100, Count::Malformed, Count::Known(40))),
        );
        assert_eq!(
            usage,
            Usage {
                input_tokens: 100,
                output_tokens: 7,
                cached_tokens: 0,
                cache_write_tokens: 40
            }
        );
    }

    #[test]
    fn usage_cache_counts_above_the_input_are_held_to_it_reads_first() {
        let usage = usage(
            "test",
            Some(report(100, Count::Known(80), Count::Known(50))),
        );
        assert_eq!((usage.cached_tokens, usage.cache_write_tokens), (80, 20));
        let usage = super::usage("test", Some(report(100, Count::Known(500), Count::Absent)));
        assert_eq!((usage.cached_tokens, usage.cache_write_tokens), (100, 0));
        let (read, write) = checked(report(100, Count::Known(80), Count::Known(50)));
        assert_eq!(write.1, Some(Anomaly::CacheAboveInput));
        assert_eq!(read.1, Some(Anomaly::CacheAboveInput));
        let (read, write) = checked(report(100, Count::Known(60), Count::Known(40)));
        assert_eq!((read.1, write.1), (None, None), "exactly the input is fine");
    }

    #[test]
    fn usage_an_answer_without_a_report_records_no_usage() {
        assert_eq!(usage("test", None), Usage::default());
    }

    #[test]
    fn usage_each_anomaly_is_logged_once_per_process() {
        // Whatever other tests logged before, the flag stays set from the first time on.
        let _ = Anomaly::NoUsage.first_time();
        assert!(!Anomaly::NoUsage.first_time());
        assert!(!Anomaly::NoUsage.first_time());
    }
}
