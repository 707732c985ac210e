//! The JSONL case format: a case, its history and expectations, what a turn is observed to do,
//! and `load_suite`, the one function that reads files. Parsing is strict: an unknown key, a bad
//! type, an unknown or misplaced escalation reason, or a duplicate id is an error naming
//! `file:line`.

use super::*;

/// The escalation reasons of SYSTEM 4, as they appear on the wire.
pub const ESCALATION_REASONS: [&str; 6] = [
    "price_negotiation",
    "complaint",
    "out_of_scope",
    "explicit_request",
    "low_confidence",
    "payment_reported",
];

/// One golden case: a contact message, optional history, and what the turn must do.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalCase {
    pub id: String,
    /// The contact's message. May be empty only on a nudge case.
    #[serde(default)]
    pub text: String,
    /// Earlier turns, oldest first.
    #[serde(default)]
    pub history: Vec<EvalHistoryTurn>,
    /// A nudge turn (025): the agent runs on the history with the server's follow-up note.
    #[serde(default)]
    pub nudge: bool,
    /// The contact record the ManyChat sandbox returns to `get_contact` (024), as getInfo JSON.
    #[serde(default)]
    pub contact: Option<Value>,
    /// 028/034: an offering stored from a token-bound request (the advert the contact came
    /// through), not written by the agent. A catalog offering id.
    #[serde(default)]
    pub advert_offering: Option<String>,
    pub expect: Expect,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalHistoryTurn {
    pub role: EvalRole,
    pub text: String,
    /// Actions recorded as performed on an agent turn, in observation form (`send_flow:<id>`);
    /// the runner renders them as the history note of 012.
    #[serde(default)]
    pub actions: Vec<String>,
}

impl EvalHistoryTurn {
    /// The turn's actions as `turns.actions` would hold them once performed (the sales rules
    /// read intent, stage, offering and sent flows from these).
    pub fn action_record(&self) -> Value {
        Value::Array(
            self.actions
                .iter()
                .map(|a| {
                    let (tool, rest) = a.split_once(':').unwrap_or((a.as_str(), ""));
                    let mut entry = serde_json::json!({"tool": tool, "status": "performed"});
                    match rest.split_once('=') {
                        Some((id, value)) => {
                            entry["id"] = Value::from(id);
                            entry["value"] = Value::from(value);
                        }
                        None => entry["id"] = Value::from(rest),
                    }
                    entry
                })
                .collect(),
        )
    }

    /// The turn's actions as the history note of 012 lists them, `<tool> <id>` (a `set_field`
    /// value is dropped: the note names ids only). This is what `agent::HistoryTurn`'s
    /// `actions_performed` holds.
    pub fn performed_actions(&self) -> Vec<String> {
        self.actions
            .iter()
            .map(|a| {
                let (tool, rest) = a.split_once(':').unwrap_or((a.as_str(), ""));
                let id = rest.split_once('=').map_or(rest, |(id, _)| id);
                format!("{tool} {id}").trim_end().to_owned()
            })
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EvalRole {
    #[serde(alias = "user")]
    Contact,
    Agent,
}

/// What the turn must do. Only `escalate` is required.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub escalate: bool,
    /// The escalation reason; only with `escalate: true`.
    #[serde(default)]
    pub reason: Option<String>,
    /// Patterns over the observed actions (see `match_actions`); absent means not checked.
    #[serde(default)]
    pub actions: Option<Vec<String>>,
    #[serde(default)]
    pub must_not_invent_prices: bool,
    #[serde(default)]
    pub must_not_leak_prompt: bool,
    /// Case-insensitive substrings the joined messages must contain.
    #[serde(default)]
    pub must_contain: Vec<String>,
    /// Case-insensitive substrings the joined messages must not contain.
    #[serde(default)]
    pub must_not_contain: Vec<String>,
    /// The most non-empty lines the messages may hold together.
    #[serde(default)]
    pub max_lines: Option<usize>,
    /// Knowledge at scale: offering or passage ids the turn must have been given (above the
    /// knowledge threshold: retrieved, or returned by `search_catalog`).
    #[serde(default)]
    pub retrieved: Vec<String>,
}

/// What one turn did, as the runner observed it after the guardrails.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observation {
    pub escalate: bool,
    pub reason: Option<String>,
    /// The messages the contact would receive (empty when escalating: the tenant's escalation
    /// copy is not the model's text).
    pub messages: Vec<String>,
    /// `send_flow:<id>`, `add_tag:<id>`, `remove_tag:<id>`, `set_field:<id>=<value>`,
    /// `write_note:<id>`, `schedule_nudge:<id>`: the actions the turn would perform.
    pub actions: Vec<String>,
    pub latency_ms: u64,
    pub cost_usd: f64,
    /// Above the knowledge threshold: the offering and passage ids the turn was given.
    pub retrieved: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}:{line}: {message}")]
    Case {
        file: String,
        line: usize,
        message: String,
    },
    /// The runner could not start: config, model or settings.
    #[error("{0}")]
    Setup(String),
    #[error("{0} holds no *.jsonl file")]
    Empty(PathBuf),
}

/// Loads every `*.jsonl` file of `dir` (in file-name order; `dir` may also be one file), one
/// case per non-blank line.
pub fn load_suite(dir: &Path) -> Result<Vec<EvalCase>, EvalError> {
    let io = |source| EvalError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut files: Vec<PathBuf> = if dir.is_file() {
        vec![dir.to_path_buf()]
    } else {
        std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "jsonl"))
            .collect()
    };
    files.sort();
    if files.is_empty() {
        return Err(EvalError::Empty(dir.to_path_buf()));
    }

    let mut cases = Vec::new();
    // Each id with the place it first appeared, to name both places of a duplicate.
    let mut seen: HashMap<String, (String, usize)> = HashMap::new();
    for path in files {
        let body = std::fs::read_to_string(&path).map_err(|source| EvalError::Io {
            path: path.clone(),
            source,
        })?;
        let file = path.display().to_string();
        for (index, raw) in body.lines().enumerate() {
            let line = index + 1;
            if raw.trim().is_empty() {
                continue;
            }
            let fail = |message: String| EvalError::Case {
                file: file.clone(),
                line,
                message,
            };
            let case: EvalCase = serde_json::from_str(raw).map_err(|e| fail(describe(&e)))?;
            validate(&case).map_err(fail)?;
            if let Some((first_file, first_line)) = seen.get(&case.id) {
                return Err(fail(format!(
                    "duplicate id `{}` (first at {first_file}:{first_line})",
                    case.id
                )));
            }
            seen.insert(case.id.clone(), (file.clone(), line));
            cases.push(case);
        }
    }
    Ok(cases)
}

/// serde_json's message without its "at line 1 column N" tail (each case is one line, so the
/// file line is what matters), keeping the column.
pub(super) fn describe(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let head = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(head, _)| head);
    format!("{head} (column {})", e.column())
}

pub(super) fn validate(case: &EvalCase) -> Result<(), String> {
    if case.id.trim().is_empty() {
        return Err("`id` is empty".into());
    }
    if case.text.trim().is_empty() && !case.nudge {
        return Err(format!(
            "case `{}`: `text` is empty (only a nudge case may omit it)",
            case.id
        ));
    }
    let expect = &case.expect;
    if let Some(reason) = &expect.reason {
        if !ESCALATION_REASONS.contains(&reason.as_str()) {
            return Err(format!(
                "case `{}`: unknown escalation reason `{reason}` (one of {})",
                case.id,
                ESCALATION_REASONS.join(", ")
            ));
        }
        if !expect.escalate {
            return Err(format!(
                "case `{}`: `reason` is set but `escalate` is false",
                case.id
            ));
        }
    }
    if let Some(patterns) = &expect.actions
        && let Some(bad) = patterns
            .iter()
            .find(|p| p.trim_start_matches('!').trim().is_empty())
    {
        return Err(format!("case `{}`: empty action pattern `{bad}`", case.id));
    }
    if expect.max_lines == Some(0) {
        return Err(format!(
            "case `{}`: `max_lines` must be at least 1",
            case.id
        ));
    }
    Ok(())
}
