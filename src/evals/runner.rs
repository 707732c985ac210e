//! `manychat-agent eval`: runs a golden suite through the same agent a turn uses — the scripted
//! opening and escalation keywords first, then the prompt, the four-step loop with the tenant's
//! tools (staged, never performed), and the guardrails — and reports each case. With a playbook
//! version (031, `PLAYBOOK_VERSION`) the prompt carries its section as a turn's would.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::{CaseResult, EvalCase, EvalError, EvalReport, EvalRole, Observation};
use crate::actions::ActionStatus;
use crate::agent::playbook::ActivePlaybook;
use crate::agent::{self, HistoryTurn, ThinkInput};
use crate::config::{ConfigContext, TenantConfig};
use crate::model::{Model, ModelEnv};
use crate::store::Role;
use crate::tools::TurnTools;

/// How many cases run at once: a slow model's suite takes a fraction of the time, and four
/// calls at once stay within any provider's rate limits.
pub const CONCURRENCY: usize = 4;

/// Where the model of a run came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelSource {
    Flag,
    AgentModel,
}

/// A suite ready to run: the tenant config, the model and the cases, loaded and checked.
pub struct PreparedRun {
    /// `provider:model`.
    pub model_spec: String,
    pub model_source: ModelSource,
    pub suite: PathBuf,
    cases: Vec<EvalCase>,
    config: Arc<TenantConfig>,
    model: Arc<dyn Model>,
    model_env: ModelEnv,
    /// 031: the playbook version the prompt carries (`None`: the no-playbook prompt).
    playbook: Option<ActivePlaybook>,
}

/// Loads the tenant config (`CONFIG_DIR`, examples allowed), the model (`--model`, else
/// `AGENT_MODEL`; with neither the run is refused, never silently on the mock) and the cases.
pub async fn prepare(
    env: &HashMap<String, String>,
    suite: &Path,
    model: Option<&str>,
) -> Result<PreparedRun, EvalError> {
    let get = |name: &str| env.get(name).filter(|v| !v.trim().is_empty()).cloned();
    let (model_spec, model_source) = match (model, get("AGENT_MODEL")) {
        (Some(flag), _) => (flag.to_owned(), ModelSource::Flag),
        (None, Some(variable)) => (variable, ModelSource::AgentModel),
        (None, None) => {
            return Err(EvalError::Setup(
                "no model to evaluate: set AGENT_MODEL or pass --model provider:model \
                 (--model mock:demo runs the offline demo model, as CI does)"
                    .to_owned(),
            ));
        }
    };
    let dir = get("CONFIG_DIR").unwrap_or_else(|| "config".into());
    let context = ConfigContext {
        reply_flow_ns: get("MANYCHAT_REPLY_FLOW_NS"),
        allow_examples: true,
        ..ConfigContext::default()
    };
    let config = crate::config::load_dir(Path::new(&dir), &context)
        .map_err(|e| EvalError::Setup(format!("tenant config is invalid:\n{e}")))?;
    let model_env =
        ModelEnv::from_lookup(|name| get(name)).map_err(|e| EvalError::Setup(e.to_string()))?;
    let model = crate::model::resolve(&model_spec, &model_env)
        .map_err(|e| EvalError::Setup(e.to_string()))?;
    let cases = super::load_suite(suite)?;
    Ok(PreparedRun {
        model_spec,
        model_source,
        suite: suite.to_owned(),
        cases,
        config: Arc::new(config),
        model,
        model_env,
        playbook: None,
    })
}

impl PreparedRun {
    /// The line `eval` prints first: which model, from where, on which suite.
    pub fn announcement(&self) -> String {
        let source = match self.model_source {
            ModelSource::Flag => "--model",
            ModelSource::AgentModel => "AGENT_MODEL",
        };
        format!(
            "eval: model {} (from {source}), suite {}, {} cases, up to {CONCURRENCY} at a time",
            self.model_spec,
            self.suite.display(),
            self.cases.len()
        )
    }

    /// 031: the cases run with `playbook`'s section in the prompt, after the catalog.
    pub fn with_playbook(mut self, playbook: Option<ActivePlaybook>) -> Self {
        self.playbook = playbook;
        self
    }

    /// The model's id (`provider:model`) as its turns record it.
    pub fn model_id(&self) -> &str {
        self.model.id()
    }

    /// Runs every case, handing each result to `finished` as its case ends.
    pub async fn run(&self, finished: impl FnMut(&CaseResult)) -> EvalReport {
        let prompt = agent::SnapshotPrompt::with_playbook(&self.config, self.playbook.as_ref());
        run_prompted(
            &self.cases,
            self.config.clone(),
            self.model.clone(),
            &self.model_env,
            Arc::new(prompt),
            finished,
        )
        .await
    }
}

/// [`prepare`], then every case of `suite`.
pub async fn run(
    env: &HashMap<String, String>,
    suite: &Path,
    model: Option<&str>,
) -> Result<EvalReport, EvalError> {
    Ok(prepare(env, suite, model).await?.run(|_| {}).await)
}

/// Runs `cases` against `model` for the tenant `config`.
pub async fn run_cases(
    cases: &[EvalCase],
    config: Arc<TenantConfig>,
    model: Arc<dyn Model>,
    env: &ModelEnv,
) -> EvalReport {
    run_cases_reporting(cases, config, model, env, |_| {}).await
}

/// Runs `cases`, [`CONCURRENCY`] at a time, handing each result to `finished` as its case ends.
pub async fn run_cases_reporting(
    cases: &[EvalCase],
    config: Arc<TenantConfig>,
    model: Arc<dyn Model>,
    env: &ModelEnv,
    finished: impl FnMut(&CaseResult),
) -> EvalReport {
    let prompt = Arc::new(agent::SnapshotPrompt::new(&config));
    run_prompted(cases, config, model, env, prompt, finished).await
}

/// [`run_cases_reporting`] on `prompt` (the static prefix, or with a playbook's section).
async fn run_prompted(
    cases: &[EvalCase],
    config: Arc<TenantConfig>,
    model: Arc<dyn Model>,
    env: &ModelEnv,
    prompt: Arc<agent::SnapshotPrompt>,
    finished: impl FnMut(&CaseResult),
) -> EvalReport {
    let probes_source = prompt
        .prefix
        .split(agent::prompt::HEADER_CATALOG)
        .next()
        .unwrap_or_default()
        .to_owned();
    let probes = super::leak_probes(&probes_source);
    let catalog = config.catalog.clone();
    // Built once per suite, as the server builds it once per config snapshot.
    let knowledge = Arc::new(crate::knowledge::Knowledge::build(&config));
    let run = |case: &EvalCase| {
        let case = case.clone();
        let config = config.clone();
        let model = model.clone();
        let prompt = prompt.clone();
        let knowledge = knowledge.clone();
        let (max_output_tokens, temperature) =
            (env.max_output_tokens, env.temperature_or_default());
        async move {
            observe(
                &case,
                config,
                model.as_ref(),
                &prompt,
                knowledge,
                max_output_tokens,
                temperature,
            )
            .await
        }
    };
    super::run_suite_concurrently(cases, &catalog, &probes, CONCURRENCY, run, finished).await
}

async fn observe(
    case: &EvalCase,
    config: Arc<TenantConfig>,
    model: &dyn Model,
    prompt: &agent::SnapshotPrompt,
    knowledge: Arc<crate::knowledge::Knowledge>,
    max_output_tokens: u32,
    temperature: f32,
) -> Observation {
    let started = Instant::now();
    if let Some(opening) = config.rules.opening_reply(&case.text) {
        return Observation {
            messages: vec![opening.to_owned()],
            ..Observation::default()
        };
    }
    if config.rules.escalation_keyword_hit(&case.text) {
        // Handed to a person before the model runs, as the server does; the reason says so.
        return Observation {
            escalate: true,
            reason: Some(crate::escalation::Escalation::Keyword.as_str().to_owned()),
            ..Observation::default()
        };
    }
    let history: Vec<HistoryTurn> = case
        .history
        .iter()
        .map(|turn| HistoryTurn {
            role: match turn.role {
                EvalRole::Contact => Role::User,
                EvalRole::Agent => Role::Agent,
            },
            text: turn.text.clone(),
            actions_performed: turn.performed_actions(),
        })
        .collect();
    // The contact's sales position, as the server would read it from these turns' records.
    let now = chrono::Utc::now();
    let record = crate::store::SalesRecord {
        offering: None,
        actions: case
            .history
            .iter()
            .filter(|t| t.role == EvalRole::Agent && !t.actions.is_empty())
            .map(|t| crate::store::ActionRecord {
                at: now,
                actions: t.action_record(),
            })
            .collect(),
    };
    let request = crate::sales::known::Request {
        offering: case.advert_offering.as_deref(),
        bound: true,
        now,
    };
    let known = crate::sales::known::from_record(&config, &record, request);
    let notices = crate::sales::notices::notices(&config, &known);
    let retrieved = {
        let texts: Vec<&str> = history.iter().map(|t| t.text.as_str()).collect();
        knowledge.for_turn(&case.text, &texts, known.offering.as_deref())
    };
    let mut tools = TurnTools::without_reads_with(config.clone(), known, knowledge.clone());
    let thought = agent::think(
        model,
        ThinkInput {
            config: &config,
            prompt,
            notices: &notices,
            history: &history,
            contact_text: &case.text,
            max_output_tokens,
            temperature,
            max_messages: 3,
            images: &[],
            budget: None,
            retrieved: retrieved.as_ref(),
        },
        &mut tools,
    )
    .await;
    let retrieved = retrieved
        .map(|r| {
            let given = crate::knowledge::TurnKnowledge::of(&config, &r, tools.given()).ids;
            given.offerings.into_iter().chain(given.passages).collect()
        })
        .unwrap_or_default();
    // An escalated turn performs nothing: its staged actions would be discarded.
    let actions = if thought.reply.escalate {
        Vec::new()
    } else {
        tools
            .into_actions()
            .into_iter()
            // Follow-ons (link_sent, events) are the server's, not the model's choices.
            .filter(|a| a.entry.status == ActionStatus::Staged && !a.follows)
            .map(|a| match a.entry.value {
                Some(value) => format!("{}:{}={}", a.entry.tool, a.entry.id, value),
                None => format!("{}:{}", a.entry.tool, a.entry.id),
            })
            .collect()
    };
    Observation {
        escalate: thought.reply.escalate,
        reason: thought.reply.reason.map(|r| r.as_str().to_owned()),
        messages: thought.reply.messages.clone(),
        actions,
        latency_ms: started.elapsed().as_millis() as u64,
        cost_usd: crate::model::pricing::cost_usd(model.id(), &thought.usage),
        retrieved,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SYSTEM 4's leak check never mistakes an ordinary reply for a copy of the prompt: over every
    /// reply of the golden suites (the demo model's and the agent turns of their histories), on
    /// the tenant each suite is written for, the false-positive rate is 0.
    #[tokio::test]
    async fn system_4_leak_check_flags_no_reply_of_the_golden_suites() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        // The demo tenant is its shipped examples alone, never an operator's `config/*.json`.
        let demo = crate::config::examples::shipped_examples();
        let cycle = root.join("tests/fixtures/tenant-cycle");
        let suites = [
            (&demo, "evals/golden"),
            (&demo, "evals/sales-demo"),
            (&cycle, "evals/tenant-cycle"),
        ];
        let model_env = ModelEnv::from_lookup(|_| None).unwrap();
        let model = crate::model::resolve("mock:demo", &model_env).unwrap();
        let mut replies_checked = 0;
        for (config_dir, suite) in suites {
            let context = ConfigContext {
                allow_examples: true,
                ..ConfigContext::default()
            };
            let config = Arc::new(crate::config::load_dir(config_dir, &context).unwrap());
            let prompt = agent::SnapshotPrompt::new(&config);
            let cases = crate::evals::load_suite(&root.join(suite)).unwrap();
            for case in &cases {
                let obs = observe(
                    case,
                    config.clone(),
                    model.as_ref(),
                    &prompt,
                    Arc::new(crate::knowledge::Knowledge::build(&config)),
                    600,
                    0.0,
                )
                .await;
                assert_ne!(obs.reason.as_deref(), Some("leak"), "{suite} {}", case.id);
                let history = case.history.iter().filter(|t| t.role == EvalRole::Agent);
                let replies = obs.messages.iter().chain(history.map(|t| &t.text));
                for reply in replies {
                    replies_checked += 1;
                    assert!(
                        !prompt.protected.copied_in(reply),
                        "{suite} {}: an ordinary reply matched the prompt",
                        case.id
                    );
                }
            }
        }
        assert!(replies_checked >= 60, "{replies_checked} replies");
    }

    /// A case the tenant's escalation keywords hand to a person before the model runs fails
    /// saying so, not as a bare `got escalate=true`.
    #[tokio::test]
    async fn a_case_failed_by_the_escalation_keyword_pre_check_says_so() {
        let suite = tempfile::tempdir().unwrap();
        std::fs::write(
            suite.path().join("cases.jsonl"),
            r#"{"id": "asks_for_a_refund", "text": "Can I get a refund for the wheel course?", "expect": {"escalate": false}}"#,
        )
        .unwrap();
        let env: HashMap<String, String> = [(
            "CONFIG_DIR".to_owned(),
            crate::config::examples::shipped_examples()
                .display()
                .to_string(),
        )]
        .into();
        let report = run(&env, suite.path(), Some("mock:demo")).await.unwrap();
        assert_eq!(
            report.results[0].failures,
            [
                "expected escalate=false, got escalate=true (escalation_keyword: the message matched \
              rules.json escalationKeywords, so it was handed to a person before the model ran)"
            ]
        );
    }
}
