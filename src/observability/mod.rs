//! Tracing setup and the one redaction list (C5).
//!
//! Owns the subscriber every process installs ([`init`]) and the test helpers that install the
//! same stack into memory ([`capture`], [`capture_global`]).
//!
//! Invariant: the formatting layer writes through [`RedactingMakeWriter`], which buffers one
//! event's formatted bytes and writes [`redact::redact`] of them. Redaction therefore happens in
//! the writer, after every field, span and message has been formatted, so no call site can forget
//! it. Call sites still log lengths and kinds rather than contact text: redaction catches
//! identifier shapes, not names or prose.
//!
//! JSON lines are redacted value by value, so a line stays valid JSON: a string keeps its quotes
//! around `[removed]`, and a number that looks like an identifier becomes the string
//! `"[removed]"`. A line that needed no change is written byte for byte; a changed one is
//! re-serialised (its keys then come out sorted).

pub mod redact;

pub use redact::redact;

use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde_json::Value;
use tracing::Subscriber;
use tracing_subscriber::fmt::{self, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// How log lines are formatted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One JSON object per line: production.
    #[default]
    Json,
    /// Human-readable single lines without colour codes: the demo and development.
    Pretty,
}

/// Why the subscriber could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("LOG_LEVEL: not a valid tracing filter")]
    Level,
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled,
}

/// The filter the capture helpers use: everything from this crate, `info` from dependencies.
const CAPTURE_FILTER: &str = "info,manychat_agent=trace";

/// Installs the process-wide subscriber: `level` is an `EnvFilter` directive (`LOG_LEVEL`), lines
/// go to standard output, redacted.
pub fn init(level: &str, format: LogFormat) -> Result<(), InitError> {
    let filter = EnvFilter::try_new(level).map_err(|_| InitError::Level)?;
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt_layer(format, io::stdout))
        .try_init()
        .map_err(|_| InitError::AlreadyInstalled)?;
    // From here a panic is a log line like any other, never raw text on stderr.
    std::panic::set_hook(Box::new(|info| {
        report_panic(info.location(), info.payload());
    }));
    Ok(())
}

/// A panic as one error event through the redacting writer: where it happened (the code's
/// place, never data) and its message only when the code wrote it as a literal. A formatted
/// message (`expect`, `unwrap` on an error, `panic!` with arguments) may hold whatever the
/// failing value held, a contact's text included, so it is left out.
fn report_panic(location: Option<&std::panic::Location<'_>>, payload: &(dyn std::any::Any + Send)) {
    let at = location
        .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
        .unwrap_or_else(|| "unknown".to_owned());
    let message = payload
        .downcast_ref::<&'static str>()
        .copied()
        .unwrap_or("(a formatted message, not logged)");
    let thread = std::thread::current();
    tracing::error!(
        location = %at,
        thread = thread.name().unwrap_or("unnamed"),
        panic_message = message,
        "panic"
    );
}

/// The formatting layer, writing through the redacting writer. Shared by [`init`] and the
/// capture helpers so tests observe exactly what production writes.
fn fmt_layer<S, W>(format: LogFormat, writer: W) -> Box<dyn Layer<S> + Send + Sync + 'static>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    match format {
        LogFormat::Json => fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(RedactingMakeWriter::json(writer))
            .boxed(),
        LogFormat::Pretty => fmt::layer()
            .with_ansi(false)
            .with_writer(RedactingMakeWriter::new(writer))
            .boxed(),
    }
}

/// A `MakeWriter` whose writers buffer one event and write it redacted when dropped.
#[derive(Debug, Clone)]
pub struct RedactingMakeWriter<M> {
    inner: M,
    json: bool,
}

impl<M> RedactingMakeWriter<M> {
    /// Redacts each event's text as a whole.
    pub fn new(inner: M) -> Self {
        Self { inner, json: false }
    }

    /// Redacts each event as a JSON object, value by value, keeping the line valid JSON.
    pub fn json(inner: M) -> Self {
        Self { inner, json: true }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for RedactingMakeWriter<M> {
    type Writer = RedactingWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingWriter::new(self.inner.make_writer(), self.json)
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        RedactingWriter::new(self.inner.make_writer_for(meta), self.json)
    }
}

/// Buffers everything written for one event; on drop writes the redacted text to `inner` in
/// one `write_all`, so a line is never split between redaction passes.
pub struct RedactingWriter<W: Write> {
    buf: Vec<u8>,
    inner: W,
    json: bool,
}

impl<W: Write> RedactingWriter<W> {
    fn new(inner: W, json: bool) -> Self {
        Self {
            buf: Vec::with_capacity(256),
            inner,
            json,
        }
    }
}

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    /// Nothing leaves before the event is complete; the drop writes it.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Drop for RedactingWriter<W> {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.buf);
        let clean = if self.json {
            redact_json_line(&text)
        } else {
            redact(&text)
        };
        // A log line that cannot be written has nowhere to be reported; dropping it is the only
        // option that cannot loop.
        let _ = self.inner.write_all(clean.as_bytes());
        let _ = self.inner.flush();
    }
}

/// Redacts one JSON log line value by value; falls back to whole-text redaction when the line is
/// not JSON (which the JSON formatter never produces, but a redaction must not depend on it).
fn redact_json_line(line: &str) -> Cow<'_, str> {
    let Ok(mut value) = serde_json::from_str::<Value>(line.trim_end()) else {
        return redact(line);
    };
    if !redact_value(&mut value) {
        return Cow::Borrowed(line);
    }
    match serde_json::to_string(&value) {
        Ok(mut out) => {
            out.push('\n');
            Cow::Owned(out)
        }
        Err(_) => redact(line),
    }
}

/// Redacts every string and number inside `value`; true when anything changed.
fn redact_value(value: &mut Value) -> bool {
    match value {
        Value::String(s) => match redact(s) {
            Cow::Owned(clean) => {
                *s = clean;
                true
            }
            Cow::Borrowed(_) => false,
        },
        Value::Number(n) => {
            if matches!(redact(&n.to_string()), Cow::Owned(_)) {
                *value = Value::String(redact::REPLACEMENT.to_owned());
                true
            } else {
                false
            }
        }
        // Every element is visited (no short-circuit): each one must be redacted.
        Value::Array(items) => {
            let mut changed = false;
            for item in items {
                changed |= redact_value(item);
            }
            changed
        }
        Value::Object(map) => {
            let mut changed = false;
            for item in map.values_mut() {
                changed |= redact_value(item);
            }
            changed
        }
        Value::Null | Value::Bool(_) => false,
    }
}

/// An in-memory log sink filled by the capture helpers. Cloning shares the buffer.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct CapturedLogs {
    buf: Arc<Mutex<Vec<u8>>>,
}

impl CapturedLogs {
    /// Everything captured so far.
    pub fn text(&self) -> String {
        let buf = self.buf.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// Captured lines, one per event in JSON format.
    pub fn lines(&self) -> Vec<String> {
        self.text().lines().map(str::to_owned).collect()
    }
}

/// The writer handed out for [`CapturedLogs`].
#[doc(hidden)]
pub struct CapturedWriter {
    buf: Arc<Mutex<Vec<u8>>>,
}

impl Write for CapturedWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut buf = self.buf.lock().unwrap_or_else(PoisonError::into_inner);
        buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for CapturedLogs {
    type Writer = CapturedWriter;

    fn make_writer(&'a self) -> Self::Writer {
        CapturedWriter {
            buf: Arc::clone(&self.buf),
        }
    }
}

/// Test helper: installs the production layer stack (JSON, redacting writer) as the current
/// thread's default subscriber, writing into memory. Events from other threads are not seen:
/// for a running app use [`capture_global`].
#[doc(hidden)]
pub fn capture() -> (CapturedLogs, tracing::subscriber::DefaultGuard) {
    capture_with_format(LogFormat::Json)
}

/// [`capture`] with a chosen format.
#[doc(hidden)]
pub fn capture_with_format(format: LogFormat) -> (CapturedLogs, tracing::subscriber::DefaultGuard) {
    keep_two_dispatchers();
    let logs = CapturedLogs::default();
    let subscriber = tracing_subscriber::registry()
        .with(EnvFilter::new(CAPTURE_FILTER))
        .with(fmt_layer(format, logs.clone()));
    let guard = tracing::subscriber::set_default(subscriber);
    (logs, guard)
}

/// Keeps a second dispatcher alive for the life of the process, so a capture's events are never
/// dropped by another thread's test. While exactly one dispatcher exists, tracing-core caches a
/// callsite's interest from the default of whichever thread reaches the callsite first
/// (tokio-rs/tracing#3611): a test thread without a subscriber that logs the same line first
/// (another app's "turn") caches "never", and the capturing thread's event is then discarded.
/// With two, the interest is taken from every dispatcher (here "sometimes") and each event asks
/// its own thread's subscriber.
pub(crate) fn keep_two_dispatchers() {
    static SECOND: OnceLock<tracing::Dispatch> = OnceLock::new();
    SECOND.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
}

/// Test helper: installs the production layer stack (JSON, redacting writer) as the
/// process-global subscriber on first call, writing into memory, and returns a handle to that
/// buffer; later calls return the same buffer. Sees events from every thread, so integration
/// tests that run the app on tokio worker threads use this. The buffer is shared by every test of
/// the process: assert on text your test invented, not on line counts.
///
/// If another global subscriber was installed first, nothing is captured; the returned buffer
/// then stays empty, which a test asserting on expected lines will notice.
#[doc(hidden)]
pub fn capture_global() -> CapturedLogs {
    static GLOBAL: OnceLock<CapturedLogs> = OnceLock::new();
    GLOBAL
        .get_or_init(|| {
            let logs = CapturedLogs::default();
            let _ = tracing_subscriber::registry()
                .with(EnvFilter::new(CAPTURE_FILTER))
                .with(fmt_layer(LogFormat::Json, logs.clone()))
                .try_init();
            logs
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_one_json_error_line_with_its_place_and_never_a_formatted_message() {
        let (logs, _guard) = capture();
        let here = std::panic::Location::caller();
        report_panic(Some(here), &"index out of bounds");
        let formatted: String = format!("called unwrap on jane.roe@example.test's {}", "text");
        report_panic(Some(here), &formatted);
        let lines = logs.lines();
        assert_eq!(lines.len(), 2, "{lines:?}");
        let first: Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!(first["level"], "ERROR");
        assert_eq!(first["message"], "panic");
        assert_eq!(first["panic_message"], "index out of bounds");
        assert!(
            first["location"]
                .as_str()
                .unwrap()
                .starts_with("src/observability/mod.rs:"),
            "{first}"
        );
        assert!(!lines[1].contains("jane.roe"), "{}", lines[1]);
        assert!(!lines[1].contains("called unwrap"), "{}", lines[1]);
    }

    #[test]
    fn c5_event_fields_and_message_are_redacted_in_json() {
        let (logs, _guard) = capture();
        let conversation = "0d2f4e6a-1b3c-4d5e-8f70-123456789012";
        tracing::info!(
            email = "jane.roe@example.test",
            phone = "+1 555 010 4477",
            link = "https://example.test/private",
            conversation_id = conversation,
            latency_ms = 1234,
            "contact wrote to jane.roe@example.test"
        );
        let text = logs.text();
        assert!(!text.contains("jane.roe"), "{text}");
        assert!(!text.contains("555 010 4477"), "{text}");
        assert!(!text.contains("example.test/private"), "{text}");
        assert!(text.contains(conversation), "{text}");
        assert!(text.contains("1234"), "{text}");
        assert!(text.contains("[removed]"), "{text}");

        let lines = logs.lines();
        assert_eq!(lines.len(), 1);
        let line: serde_json::Value = serde_json::from_str(&lines[0]).expect("one JSON object");
        assert_eq!(line["email"], "[removed]");
        assert_eq!(line["conversation_id"], conversation);
    }

    #[test]
    fn c5_json_lines_stay_valid_json_when_numbers_are_redacted() {
        let (logs, _guard) = capture();
        let span = tracing::info_span!("turn", reference = "ref 123456");
        let _entered = span.enter();
        tracing::info!(order = 5_550_104_477_u64, steps = 3, "noted");
        let lines = logs.lines();
        assert_eq!(lines.len(), 1);
        let line: serde_json::Value = serde_json::from_str(&lines[0]).expect("valid JSON");
        assert_eq!(line["order"], "[removed]");
        assert_eq!(line["steps"], 3);
        assert_eq!(line["message"], "noted");
        assert_eq!(line["span"]["reference"], "ref [removed]");
        assert!(!lines[0].contains("5550104477"));
    }

    #[test]
    fn c5_unchanged_json_lines_are_written_as_formatted() {
        let line = "{\"b\":1,\"a\":\"ok\"}\n";
        assert!(matches!(redact_json_line(line), Cow::Borrowed(l) if l == line));
        let not_json = "plain jane.roe@example.test\n";
        assert_eq!(redact_json_line(not_json), "plain [removed]\n");
    }

    #[test]
    fn c5_span_fields_are_redacted_too() {
        let (logs, _guard) = capture();
        let span = tracing::info_span!("turn", contact_mail = "a.b@example.test");
        let _entered = span.enter();
        tracing::info!("step");
        let text = logs.text();
        assert!(text.contains("step"), "{text}");
        assert!(!text.contains("a.b@example.test"), "{text}");
    }

    #[test]
    fn c5_pretty_format_is_redacted() {
        let (logs, _guard) = capture_with_format(LogFormat::Pretty);
        tracing::warn!(phone = "555-010-4477", "read failed");
        let text = logs.text();
        assert!(text.contains("read failed"), "{text}");
        assert!(!text.contains("555-010-4477"), "{text}");
    }

    #[test]
    fn init_refuses_an_invalid_level() {
        assert!(matches!(
            init("info,=[", LogFormat::Json),
            Err(InitError::Level)
        ));
    }
}
