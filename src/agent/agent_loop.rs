//! The bounded tool loop (012 § The loop is bounded at four steps, 024, ADR-0016).
//!
//! Invariants:
//! - At most [`MAX_STEPS`] model calls per turn.
//! - Steps 1–3 offer the host's tools with `tool_choice: auto`; a step may make several tool
//!   calls, each run by the host in call order under the turn's caps (a ninth write or a third
//!   read within one step is refused exactly as across steps), and is answered with one result
//!   per call, in call order, and the loop goes on; a step without tool calls ends the loop with
//!   its output.
//! - A step whose every call staged a write (`"staged": true`, with no news the reply depends
//!   on) and which already carries its reply (an output that is a JSON object) ends the loop
//!   with that reply: a staged write returns nothing the model needs, so another call would only
//!   repeat the answer. A read, a flow sent inline (`sent`), a refused or invalid call, a write
//!   whose result carries news (an opening queued, a stage flow sent, refused or dropped), or an
//!   output that is not a JSON object (a preamble beside the calls) sends the results back and
//!   the loop goes on.
//! - The final step (step 4, or any step on which the host offers no tool) carries the turn's
//!   original messages only, never tool calls or results (providers refuse tool history without
//!   tools), plus the host's server note; `tool_choice` is `none` and any tool call it makes is
//!   ignored.
//! - Before each step the call is offered to the turn's [`CallBudget`], which may refuse it:
//!   the loop then ends without output and says so (`budget_refused`).
//! - The loop never performs a write: that is the host's business (it stages). No IO here but
//!   the `Model`, `ToolHost` and `CallBudget` traits.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::model::{
    Message, Model, ModelError, ModelRequest, ToolArguments, ToolCall, ToolChoice, ToolResult,
    ToolSpec, Usage,
};

use super::prompt::final_step_note;

/// Model calls per turn (012, 024: read, act, read again, reply).
pub const MAX_STEPS: u32 = 4;

/// The tools of one turn, as the loop sees them. Implemented by the tools module (staging,
/// caps, the contact read) and by [`NoTools`].
#[async_trait]
pub trait ToolHost: Send {
    /// Tools offered on steps 1–3 (empty = none). Asked before every step, so a host may narrow
    /// the set as the turn goes on.
    fn specs(&self) -> Arc<[ToolSpec]>;
    /// Runs (stages, or for a read performs) one call and returns its result for the model.
    async fn call(&mut self, call: &ToolCall) -> Value;
    /// The final step's server note: what was staged, sent or refused this turn and the last
    /// successful read with its notes fenced. `None` when there is nothing to say.
    fn final_note(&self) -> Option<String>;
}

/// The day's budget as one turn's loop sees it: each call is reserved before it is sent and
/// settled when it answers (implemented by `turn::budget`).
pub trait CallBudget: Send + Sync {
    /// Reserves `request`'s worst case (its input and the output limit); `false` refuses the
    /// call: the day's budget is spent or in flight.
    fn reserve(&self, request: &ModelRequest) -> bool;
    /// The reserved call answered with `usage` (`None`: it failed).
    fn settle(&self, usage: Option<Usage>);
}

/// A turn without tools (no `tools.json`, or a turn that may not use them).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTools;

#[async_trait]
impl ToolHost for NoTools {
    fn specs(&self) -> Arc<[ToolSpec]> {
        Arc::from([])
    }
    async fn call(&mut self, _call: &ToolCall) -> Value {
        // Never offered, so only a misbehaving model gets here.
        json!({"error": "no tools are available"})
    }
    fn final_note(&self) -> Option<String> {
        None
    }
}

/// What the loop produced.
#[derive(Debug)]
pub struct LoopResult {
    /// The last step's output (`Ok(None)`: no output, which the caller fails closed on), or the
    /// model error that ended the loop.
    pub output: Result<Option<String>, ModelError>,
    /// Summed over every step, including a failed one's predecessors.
    pub usage: Usage,
    /// Model calls made, including one that failed.
    pub steps: u32,
    /// Whether any step offered tools (the turn's `actions` record is `null` otherwise).
    pub tools_offered: bool,
    /// The budget refused a step's call: the loop ended before it, without output.
    pub budget_refused: bool,
}

/// Runs the loop. `base` carries the system prompt, the turn's messages, the output schema and
/// the sampling settings; its `tools` and `tool_choice` are set here on every step.
pub async fn run_loop(
    model: &dyn Model,
    base: ModelRequest,
    tools: &mut dyn ToolHost,
) -> LoopResult {
    run_loop_within(model, base, tools, None).await
}

/// [`run_loop`], each call reserved in `budget` first (none: unbudgeted, as in an eval).
pub async fn run_loop_within(
    model: &dyn Model,
    base: ModelRequest,
    tools: &mut dyn ToolHost,
    budget: Option<&dyn CallBudget>,
) -> LoopResult {
    let mut usage = Usage::default();
    let mut tools_offered = false;
    // One request, changed in place from step to step: its messages grow by each step's tool
    // exchange, and the final step goes back to the turn's own messages plus the server's note.
    let turn_messages = base.messages.len();
    let mut request = base;

    for step in 1..=MAX_STEPS {
        let specs = tools.specs();
        let is_final = step == MAX_STEPS || specs.is_empty();
        request.tools = specs;

        if is_final {
            request.messages.truncate(turn_messages);
            if let Some(note) = tools.final_note() {
                request.messages.push(final_step_note(&note));
            }
            request.tool_choice = ToolChoice::None;
        } else {
            tools_offered = true;
            request.tool_choice = ToolChoice::Auto;
        }

        if let Some(budget) = budget
            && !budget.reserve(&request)
        {
            tracing::info!(step, "model step refused by the daily budget");
            return LoopResult {
                output: Ok(None),
                usage,
                steps: step - 1,
                tools_offered,
                budget_refused: true,
            };
        }
        let response = match model.step(&request).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(step, error = %e, "model step failed");
                if let Some(budget) = budget {
                    budget.settle(None);
                }
                return LoopResult {
                    output: Err(e),
                    usage,
                    steps: step,
                    tools_offered,
                    budget_refused: false,
                };
            }
        };
        if let Some(budget) = budget {
            budget.settle(Some(response.usage));
        }
        usage.add(response.usage);

        if is_final || response.tool_calls.is_empty() {
            if is_final && !response.tool_calls.is_empty() {
                tracing::info!(
                    step,
                    calls = response.tool_calls.len(),
                    "final step made tool calls; ignored"
                );
            }
            return LoopResult {
                output: Ok(response.output),
                usage,
                steps: step,
                tools_offered,
                budget_refused: false,
            };
        }

        let mut results = Vec::with_capacity(response.tool_calls.len());
        for call in &response.tool_calls {
            let result = match &call.arguments {
                ToolArguments::Invalid { .. } => ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: json!({"error": "invalid arguments"}),
                    is_error: true,
                },
                ToolArguments::Valid(_) => ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: tools.call(call).await,
                    is_error: false,
                },
            };
            results.push(result);
        }
        tracing::debug!(step, calls = results.len(), "tool step");
        if let Some(output) = response.output.as_deref()
            && is_reply(output)
            && results.iter().all(only_staged)
        {
            return LoopResult {
                output: Ok(response.output),
                usage,
                steps: step,
                tools_offered,
                budget_refused: false,
            };
        }
        request.messages.push(Message::Assistant {
            text: response.output,
            tool_calls: response.tool_calls,
            echo: response.echo,
        });
        request.messages.push(Message::ToolResults { results });
    }

    // The final step always returns above; this is reached only if MAX_STEPS were zero.
    LoopResult {
        output: Ok(None),
        usage,
        steps: MAX_STEPS,
        tools_offered,
        budget_refused: false,
    }
}

/// Whether a step's output is a reply rather than a preamble beside its calls: a JSON object.
fn is_reply(output: &str) -> bool {
    serde_json::from_str::<serde_json::Map<String, Value>>(output).is_ok()
}

/// What a staged write's result may carry beside `"staged": true` and still need no answer:
/// the flows an offering opens (for a later turn) and a stage flow that follows the reply. Any
/// other news (an opening sent before the reply, a stage flow sent, refused or dropped) changes
/// what the reply may say, so the model sees it first.
const NEWS_THE_REPLY_NEEDS_NOT: &[&str] = &["staged", "flowsAvailable", "flowStaged"];

/// Whether a call's result says its write was staged and nothing the reply beside it should
/// have known: the reply needs nothing back.
fn only_staged(result: &ToolResult) -> bool {
    !result.is_error
        && result.content.get("staged") == Some(&Value::Bool(true))
        && result.content.as_object().is_some_and(|fields| {
            fields
                .keys()
                .all(|key| NEWS_THE_REPLY_NEEDS_NOT.contains(&key.as_str()))
        })
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::model::{ModelResponse, StopReason};

    /// A scripted model: canned responses in order, every request recorded.
    pub(crate) struct ScriptedModel {
        responses: Mutex<Vec<Result<ModelResponse, ModelError>>>,
        pub(crate) requests: Mutex<Vec<ModelRequest>>,
    }

    impl ScriptedModel {
        pub(crate) fn new(mut responses: Vec<Result<ModelResponse, ModelError>>) -> Self {
            responses.reverse();
            Self {
                responses: Mutex::new(responses),
                requests: Mutex::new(Vec::new()),
            }
        }
        pub(crate) fn requests(&self) -> Vec<ModelRequest> {
            self.requests.lock().unwrap().clone()
        }
    }

    #[async_trait]
    impl Model for ScriptedModel {
        fn id(&self) -> &str {
            "mock:scripted"
        }
        async fn step(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
            self.requests.lock().unwrap().push(request.clone());
            self.responses
                .lock()
                .unwrap()
                .pop()
                .unwrap_or_else(|| Err(ModelError::Malformed("script exhausted".into())))
        }
    }

    pub(crate) fn usage(i: u64, o: u64) -> Usage {
        Usage {
            input_tokens: i,
            output_tokens: o,
            cached_tokens: 0,
            cache_write_tokens: 0,
        }
    }

    pub(crate) fn answer(text: &str) -> Result<ModelResponse, ModelError> {
        Ok(ModelResponse {
            tool_calls: vec![],
            output: Some(text.to_owned()),
            usage: usage(100, 10),
            stop: StopReason::Completed,
            echo: Default::default(),
        })
    }

    pub(crate) fn calls(calls: Vec<ToolCall>) -> Result<ModelResponse, ModelError> {
        Ok(ModelResponse {
            tool_calls: calls,
            output: None,
            usage: usage(100, 10),
            stop: StopReason::ToolCalls,
            echo: Default::default(),
        })
    }

    /// A model that asks for a tool on each of the turn's `MAX_STEPS` calls and never answers.
    pub(crate) fn a_tool_call_every_step() -> Vec<Result<ModelResponse, ModelError>> {
        (1..=MAX_STEPS)
            .map(|step| calls(vec![call(&format!("c{step}"), "add_tag", json!({}))]))
            .collect()
    }

    pub(crate) fn call(id: &str, name: &str, args: Value) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: ToolArguments::Valid(args),
        }
    }

    /// A host with one tool that records its calls and answers `{staged: true, n}`.
    #[derive(Default)]
    pub(crate) struct RecordingHost {
        pub(crate) called: Vec<String>,
        pub(crate) note: Option<String>,
    }

    #[async_trait]
    impl ToolHost for RecordingHost {
        fn specs(&self) -> Arc<[ToolSpec]> {
            Arc::from([ToolSpec {
                name: "add_tag".into(),
                description: "Tag the contact.".into(),
                parameters: json!({"type": "object", "properties": {"id": {"type": "string", "enum": ["interested_intro"]}},
                    "required": ["id"], "additionalProperties": false}),
            }])
        }
        async fn call(&mut self, call: &ToolCall) -> Value {
            self.called.push(call.id.clone());
            json!({"staged": true, "n": self.called.len()})
        }
        fn final_note(&self) -> Option<String> {
            self.note.clone()
        }
    }

    pub(crate) fn base() -> ModelRequest {
        ModelRequest {
            system: "SYSTEM".into(),
            messages: vec![Message::User {
                text: "turn".into(),
            }],
            tools: Arc::from([]),
            tool_choice: ToolChoice::Auto,
            output_schema: Arc::new(json!({"type": "object"})),
            output_name: "agent_reply".into(),
            max_output_tokens: 400,
            temperature: 0.3,
            cache: Default::default(),
        }
    }

    #[tokio::test]
    async fn spec_012_loop_answer_on_step_1() {
        let model = ScriptedModel::new(vec![answer("{}")]);
        let mut host = RecordingHost::default();
        let r = run_loop(&model, base(), &mut host).await;
        assert_eq!(r.output, Ok(Some("{}".to_owned())));
        assert_eq!(r.steps, 1);
        assert!(r.tools_offered);
        assert_eq!(r.usage, usage(100, 10));
        let reqs = model.requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].tool_choice, ToolChoice::Auto);
        assert_eq!(reqs[0].tools.len(), 1);
        assert_eq!(reqs[0].messages, base().messages);
        assert_eq!(&*reqs[0].system, "SYSTEM");
        assert_eq!(reqs[0].output_name, "agent_reply");
    }

    #[tokio::test]
    async fn spec_012_loop_tool_call_then_answer() {
        let model = ScriptedModel::new(vec![
            calls(vec![
                call("c1", "add_tag", json!({"id": "interested_intro"})),
                call("c2", "add_tag", json!({"id": "interested_intro"})),
            ]),
            answer("{\"ok\":1}"),
        ]);
        let mut host = RecordingHost::default();
        let r = run_loop(&model, base(), &mut host).await;
        assert_eq!(r.output, Ok(Some("{\"ok\":1}".to_owned())));
        assert_eq!(r.steps, 2);
        assert_eq!(r.usage, usage(200, 20));
        assert_eq!(host.called, vec!["c1", "c2"]);
        let reqs = model.requests();
        assert_eq!(reqs[1].tool_choice, ToolChoice::Auto);
        let m = &reqs[1].messages;
        assert_eq!(m.len(), 3);
        assert_eq!(m[0], base().messages[0]);
        assert!(matches!(&m[1], Message::Assistant { tool_calls, .. } if tool_calls.len() == 2));
        let Message::ToolResults { results } = &m[2] else {
            panic!("expected tool results, got {:?}", m[2]);
        };
        assert_eq!(results.len(), 2);
        assert_eq!(results[0].call_id, "c1");
        assert_eq!(results[0].content, json!({"staged": true, "n": 1}));
        assert!(!results[0].is_error);
        assert_eq!(results[1].call_id, "c2");
        assert_eq!(results[1].content, json!({"staged": true, "n": 2}));
    }

    #[tokio::test]
    async fn spec_012_loop_is_bounded_at_four_steps_final_has_no_tool_history() {
        let model = ScriptedModel::new(vec![
            calls(vec![call(
                "c1",
                "add_tag",
                json!({"id": "interested_intro"}),
            )]),
            calls(vec![call(
                "c2",
                "add_tag",
                json!({"id": "interested_intro"}),
            )]),
            calls(vec![call(
                "c3",
                "add_tag",
                json!({"id": "interested_intro"}),
            )]),
            // The final step tries yet another call, with an answer beside it.
            Ok(ModelResponse {
                tool_calls: vec![call("c4", "add_tag", json!({"id": "interested_intro"}))],
                output: Some("{\"final\":true}".into()),
                usage: usage(100, 10),
                stop: StopReason::ToolCalls,
                echo: Default::default(),
            }),
            answer("never requested"),
        ]);
        let mut host = RecordingHost {
            note: Some("staged: add_tag interested_intro".into()),
            ..Default::default()
        };
        let r = run_loop(&model, base(), &mut host).await;
        assert_eq!(r.steps, 4);
        assert_eq!(r.output, Ok(Some("{\"final\":true}".to_owned())));
        assert_eq!(r.usage, usage(400, 40));
        // The fourth step's call is ignored: the host saw three.
        assert_eq!(host.called, vec!["c1", "c2", "c3"]);
        let reqs = model.requests();
        assert_eq!(reqs.len(), 4);
        assert_eq!(reqs[2].messages.len(), 5); // base + 2 × (assistant, results)
        let last = &reqs[3];
        assert_eq!(last.tool_choice, ToolChoice::None);
        assert_eq!(last.tools, host.specs());
        assert_eq!(
            last.messages,
            vec![
                base().messages[0].clone(),
                Message::User {
                    text: "SERVER NOTE (final step, system-authored): staged: add_tag interested_intro"
                        .into()
                },
            ]
        );
    }

    #[tokio::test]
    async fn spec_012_loop_answer_at_every_step_count() {
        for tool_steps in 0..=3u32 {
            let mut script: Vec<_> = (0..tool_steps)
                .map(|i| calls(vec![call(&format!("c{i}"), "add_tag", json!({}))]))
                .collect();
            script.push(answer("{}"));
            let model = ScriptedModel::new(script);
            let mut host = RecordingHost::default();
            let r = run_loop(&model, base(), &mut host).await;
            assert_eq!(
                r.output,
                Ok(Some("{}".to_owned())),
                "{tool_steps} tool steps"
            );
            assert_eq!(r.steps, tool_steps + 1);
            assert_eq!(host.called.len() as u32, tool_steps);
            assert_eq!(r.usage.input_tokens, 100 * u64::from(tool_steps + 1));
            let reqs = model.requests();
            let last = reqs.last().unwrap();
            if tool_steps < 3 {
                // Answered while tools were still offered, with the tool history so far.
                assert_eq!(last.tool_choice, ToolChoice::Auto);
                assert_eq!(last.messages.len(), 1 + 2 * tool_steps as usize);
            } else {
                assert_eq!(last.tool_choice, ToolChoice::None);
                assert_eq!(last.messages, base().messages);
            }
        }
    }

    #[tokio::test]
    async fn spec_012_loop_step_4_without_output_is_none() {
        let model = ScriptedModel::new(a_tool_call_every_step());
        let mut host = RecordingHost::default();
        let r = run_loop(&model, base(), &mut host).await;
        assert_eq!(r.output, Ok(None));
        assert_eq!(r.steps, 4);
        // No note from the host: the final step carries the base messages alone.
        assert_eq!(model.requests()[3].messages, base().messages);
    }

    #[tokio::test]
    async fn spec_012_loop_step_without_tool_calls_or_output_is_none() {
        let model = ScriptedModel::new(vec![Ok(ModelResponse::default())]);
        let r = run_loop(&model, base(), &mut RecordingHost::default()).await;
        assert_eq!(r.output, Ok(None));
        assert_eq!(r.steps, 1);
    }

    #[tokio::test]
    async fn spec_012_invalid_tool_arguments_get_an_error_result_without_calling_the_host() {
        let model = ScriptedModel::new(vec![
            calls(vec![
                ToolCall {
                    id: "bad".into(),
                    name: "add_tag".into(),
                    arguments: ToolArguments::Invalid { length: 12 },
                },
                call("good", "add_tag", json!({"id": "interested_intro"})),
            ]),
            answer("{}"),
        ]);
        let mut host = RecordingHost::default();
        let r = run_loop(&model, base(), &mut host).await;
        assert_eq!(r.steps, 2);
        assert_eq!(host.called, vec!["good"]);
        let reqs = model.requests();
        let Message::ToolResults { results } = &reqs[1].messages[2] else {
            panic!("expected tool results");
        };
        assert_eq!(results[0].call_id, "bad");
        assert_eq!(results[0].content, json!({"error": "invalid arguments"}));
        assert!(results[0].is_error);
        assert_eq!(results[1].call_id, "good");
        assert!(!results[1].is_error);
    }

    #[tokio::test]
    async fn spec_012_model_error_ends_the_loop_with_err_and_usage_so_far() {
        let model = ScriptedModel::new(vec![
            calls(vec![call("c1", "add_tag", json!({}))]),
            Err(ModelError::RateLimited),
        ]);
        let r = run_loop(&model, base(), &mut RecordingHost::default()).await;
        assert_eq!(r.output, Err(ModelError::RateLimited));
        assert_eq!(r.steps, 2);
        assert_eq!(r.usage, usage(100, 10));
    }

    /// A host like the tools module's: a write answers `{"staged": true}` (with what a later
    /// step could use for the tag `flows`), the tag `refused` is refused, `get_contact` reads.
    #[derive(Default)]
    struct StagingHost {
        called: Vec<String>,
    }

    #[async_trait]
    impl ToolHost for StagingHost {
        fn specs(&self) -> Arc<[ToolSpec]> {
            RecordingHost::default().specs()
        }
        async fn call(&mut self, call: &ToolCall) -> Value {
            self.called.push(call.id.clone());
            let ToolArguments::Valid(args) = &call.arguments else {
                unreachable!("the loop answers invalid arguments itself");
            };
            match (call.name.as_str(), args["id"].as_str()) {
                ("get_contact", _) => json!({"available": true, "tags": []}),
                (_, Some("refused")) => json!({"staged": false, "reason": "action_limit"}),
                (_, Some("flows")) => json!({"staged": true, "flowsAvailable": ["brochure"]}),
                (_, Some("opening")) => {
                    json!({"staged": true, "openingQueued": {"flow": "welcome"}})
                }
                (_, Some("stage")) => json!({"staged": true, "flowSent": "gallery"}),
                _ => json!({"staged": true}),
            }
        }
        fn final_note(&self) -> Option<String> {
            None
        }
    }

    const REPLY: &str = r#"{"messages":["Noted."],"escalate":false}"#;

    /// Tool calls and an output in one answer.
    fn calls_beside(calls: Vec<ToolCall>, output: &str) -> Result<ModelResponse, ModelError> {
        Ok(ModelResponse {
            tool_calls: calls,
            output: Some(output.to_owned()),
            usage: usage(100, 10),
            stop: StopReason::ToolCalls,
            echo: Default::default(),
        })
    }

    #[tokio::test]
    async fn spec_012_a_step_with_several_calls_stages_each_in_order_with_one_result_per_call() {
        let model = ScriptedModel::new(vec![
            calls(vec![
                call("w1", "add_tag", json!({"id": "a"})),
                call("r1", "get_contact", json!({})),
                call("w2", "add_tag", json!({"id": "refused"})),
                call("w3", "add_tag", json!({"id": "b"})),
            ]),
            answer(REPLY),
        ]);
        let mut host = StagingHost::default();
        let r = run_loop(&model, base(), &mut host).await;
        assert_eq!(r.steps, 2);
        assert_eq!(host.called, vec!["w1", "r1", "w2", "w3"]);
        let Message::ToolResults { results } = &model.requests()[1].messages[2] else {
            panic!("expected tool results");
        };
        let ids: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
        assert_eq!(ids, vec!["w1", "r1", "w2", "w3"]);
        assert_eq!(results[1].content["available"], json!(true));
        assert_eq!(results[2].content["staged"], json!(false));
    }

    #[tokio::test]
    async fn spec_012_a_reply_beside_staged_writes_ends_the_loop_on_that_step() {
        let model = ScriptedModel::new(vec![
            calls_beside(
                vec![
                    call("w1", "add_tag", json!({"id": "a"})),
                    call("w2", "add_tag", json!({"id": "flows"})),
                ],
                REPLY,
            ),
            answer("never requested"),
        ]);
        let mut host = StagingHost::default();
        let r = run_loop(&model, base(), &mut host).await;
        assert_eq!(r.output, Ok(Some(REPLY.to_owned())));
        assert_eq!(r.steps, 1, "no second call for writes that only stage");
        assert_eq!(r.usage, usage(100, 10));
        assert_eq!(host.called, vec!["w1", "w2"], "both staged, in order");
        assert_eq!(model.requests().len(), 1);
    }

    #[tokio::test]
    async fn spec_012_a_reply_beside_a_read_a_refused_write_or_news_is_replaced_by_the_next_step() {
        for needs_result in [
            call("r1", "get_contact", json!({})),
            call("w2", "add_tag", json!({"id": "refused"})),
            call("w2", "set_field", json!({"id": "opening"})),
            call("w2", "set_field", json!({"id": "stage"})),
        ] {
            let model = ScriptedModel::new(vec![
                calls_beside(
                    vec![call("w1", "add_tag", json!({"id": "a"})), needs_result],
                    REPLY,
                ),
                answer("{\"after\":true}"),
            ]);
            let r = run_loop(&model, base(), &mut StagingHost::default()).await;
            assert_eq!(r.output, Ok(Some("{\"after\":true}".to_owned())));
            assert_eq!(r.steps, 2);
            // The first answer is replayed with its calls, then one result per call.
            let reqs = model.requests();
            assert!(matches!(
                &reqs[1].messages[1],
                Message::Assistant { text: Some(t), tool_calls, .. } if t == REPLY && tool_calls.len() == 2
            ));
            assert!(
                matches!(&reqs[1].messages[2], Message::ToolResults { results } if results.len() == 2)
            );
        }
    }

    #[tokio::test]
    async fn spec_012_a_preamble_beside_staged_writes_is_not_a_reply() {
        let model = ScriptedModel::new(vec![
            calls_beside(
                vec![call("w1", "add_tag", json!({"id": "a"}))],
                "Let me note that first.",
            ),
            answer(REPLY),
        ]);
        let r = run_loop(&model, base(), &mut StagingHost::default()).await;
        assert_eq!(r.output, Ok(Some(REPLY.to_owned())));
        assert_eq!(r.steps, 2);
    }

    /// A host whose tools run out after the first step (e.g. its only tool hit a cap).
    struct NarrowingHost {
        inner: RecordingHost,
    }

    #[async_trait]
    impl ToolHost for NarrowingHost {
        fn specs(&self) -> Arc<[ToolSpec]> {
            if self.inner.called.is_empty() {
                self.inner.specs()
            } else {
                Arc::from([])
            }
        }
        async fn call(&mut self, call: &ToolCall) -> Value {
            self.inner.call(call).await
        }
        fn final_note(&self) -> Option<String> {
            Some("staged: add_tag interested_intro".into())
        }
    }

    #[tokio::test]
    async fn spec_012_a_step_with_no_tools_left_is_a_final_step() {
        let model = ScriptedModel::new(vec![
            calls(vec![call("c1", "add_tag", json!({}))]),
            answer("{}"),
        ]);
        let mut host = NarrowingHost {
            inner: RecordingHost::default(),
        };
        let r = run_loop(&model, base(), &mut host).await;
        assert_eq!(r.steps, 2);
        assert!(r.tools_offered);
        let reqs = model.requests();
        assert_eq!(reqs[1].tool_choice, ToolChoice::None);
        assert!(reqs[1].tools.is_empty());
        // No tool history without tools: the base messages and the server note only.
        assert_eq!(reqs[1].messages.len(), 2);
        assert_eq!(reqs[1].messages[0], base().messages[0]);
        assert!(
            matches!(&reqs[1].messages[1], Message::User { text } if text.starts_with("SERVER NOTE (final step"))
        );
    }

    #[tokio::test]
    async fn spec_012_no_tools_is_a_single_final_step() {
        let model = ScriptedModel::new(vec![Ok(ModelResponse {
            // A model that calls a tool it was never offered is ignored.
            tool_calls: vec![call("x", "add_tag", json!({}))],
            output: Some("{}".into()),
            usage: usage(100, 10),
            stop: StopReason::Completed,
            echo: Default::default(),
        })]);
        let r = run_loop(&model, base(), &mut NoTools).await;
        assert_eq!(r.output, Ok(Some("{}".to_owned())));
        assert_eq!(r.steps, 1);
        assert!(!r.tools_offered);
        let reqs = model.requests();
        assert!(reqs[0].tools.is_empty());
        assert_eq!(reqs[0].tool_choice, ToolChoice::None);
        assert_eq!(reqs[0].messages, base().messages);
    }
}
