//! Counting tokens as a provider bills them: OpenAI's `o200k_base` encoding (the GPT-4o, 4.1 and
//! 5 families), with its table compiled in, so no download is ever needed. The mock models report
//! their usage with it ([`request_tokens`], [`response_tokens`]), so the demo's token and cost
//! figures are what a real model would bill for the same request; the benchmarks count request
//! bodies with it.
//!
//! Other providers tokenize differently (Claude's and Gemini's encodings are not published);
//! `o200k_base` is the reference the figures are stated in. A provider also adds a few tokens of
//! its own per message and per tool (its wire framing); they are not counted.

use tiktoken_rs::o200k_base_singleton;

use super::{Message, ModelRequest, ModelResponse, ToolArguments, ToolCall};

/// What an image costs as input: about a thousand tokens, as providers bill a mid-sized one.
pub const IMAGE_TOKENS: u64 = 1_000;

/// The number of `o200k_base` tokens in `text` (special-token syntax counted as plain text).
/// The table is built once per process, on first use.
pub fn count(text: &str) -> u64 {
    o200k_base_singleton().encode_ordinary(text).len() as u64
}

/// The input tokens of `request` as a provider roughly bills them: its cacheable prefix
/// ([`prefix_tokens`]) and every message (text as it is, tool calls and results as JSON, an
/// image as [`IMAGE_TOKENS`]). At least 1.
pub fn request_tokens(request: &ModelRequest) -> u64 {
    let messages: u64 = request.messages.iter().map(message_tokens).sum();
    (prefix_tokens(request) + messages).max(1)
}

/// The part of [`request_tokens`] a prompt cache can serve on the next call: the tool
/// definitions as JSON (name, description, parameters), the output schema as JSON and the
/// system text, which the config alone decides.
pub fn prefix_tokens(request: &ModelRequest) -> u64 {
    let tools: u64 = request
        .tools
        .iter()
        .map(|t| {
            let definition = serde_json::json!({
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            });
            count(&definition.to_string())
        })
        .sum();
    let schema = if request.output_schema.is_null() {
        0
    } else {
        count(&request.output_schema.to_string())
    };
    count(&request.system) + tools + schema
}

/// The output tokens of `response`: its text, and each tool call's name and arguments as JSON.
/// At least 1.
pub fn response_tokens(response: &ModelResponse) -> u64 {
    let text = response.output.as_deref().map_or(0, count);
    (text + calls_tokens(&response.tool_calls)).max(1)
}

/// The tokens of tool calls as a model writes them: each name and its arguments as JSON (an
/// invalid argument text, not kept, as a quarter of its length).
pub fn calls_tokens(calls: &[ToolCall]) -> u64 {
    calls
        .iter()
        .map(|call| {
            count(&call.name)
                + match &call.arguments {
                    ToolArguments::Valid(value) => count(&value.to_string()),
                    ToolArguments::Invalid { length } => (*length as u64).div_ceil(4),
                }
        })
        .sum()
}

fn message_tokens(message: &Message) -> u64 {
    match message {
        Message::User { text } => count(text),
        Message::Assistant {
            text, tool_calls, ..
        } => text.as_deref().map_or(0, count) + calls_tokens(tool_calls),
        Message::ToolResults { results } => {
            results.iter().map(|r| count(&r.content.to_string())).sum()
        }
        Message::Images { images } => images.len() as u64 * IMAGE_TOKENS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_counts_o200k_tokens_as_openai_does() {
        // Reference counts from OpenAI's tokenizer for o200k_base.
        assert_eq!(count(""), 0);
        assert_eq!(count("hello world"), 2);
        assert!(count("Wheel Throwing Basics is 210.00 GBP.") < 15);
    }

    #[test]
    fn request_tokens_count_the_system_text_tools_schema_and_messages_as_a_provider_bills() {
        use crate::model::test_support::{first_step, image_step, tool_less_step};
        use crate::model::{Message, ToolChoice};
        let request = first_step(ToolChoice::Auto);
        let tool = &request.tools[0];
        let tool_json = serde_json::json!({
            "name": tool.name, "description": tool.description, "parameters": tool.parameters,
        });
        let Message::User { text } = &request.messages[0] else {
            panic!("a user message");
        };
        // Each part counted on its own text, summed: nothing estimated from a length.
        let expected = count(&request.system)
            + count(&tool_json.to_string())
            + count(&request.output_schema.to_string())
            + count(text);
        assert_eq!(request_tokens(&request), expected);
        assert_eq!(
            prefix_tokens(&request),
            expected - count(text),
            "the prefix a cache can serve is everything but the messages"
        );
        // No tool offered: its definition is not billed.
        assert_eq!(
            request_tokens(&tool_less_step(ToolChoice::Auto)),
            expected - count(&tool_json.to_string())
        );
        // An image is billed as about a thousand tokens, whatever its bytes.
        assert_eq!(request_tokens(&image_step()), expected + IMAGE_TOKENS);
    }

    #[test]
    fn response_tokens_count_the_text_and_each_tool_call_as_json() {
        use crate::model::{ModelResponse, StopReason, ToolArguments, ToolCall};
        let arguments = serde_json::json!({"flow": "booking_link"});
        let response = ModelResponse {
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "send_flow".into(),
                arguments: ToolArguments::Valid(arguments.clone()),
            }],
            output: Some("{\"messages\":[\"Here it is.\"]}".into()),
            usage: Default::default(),
            stop: StopReason::Completed,
            echo: Default::default(),
        };
        assert_eq!(
            response_tokens(&response),
            count("{\"messages\":[\"Here it is.\"]}")
                + count("send_flow")
                + count(&arguments.to_string())
        );
        let empty = ModelResponse {
            tool_calls: Vec::new(),
            output: None,
            ..response
        };
        assert_eq!(response_tokens(&empty), 1, "at least one token");
    }
}
