//! Counting tokens as a provider bills them: OpenAI's `o200k_base` encoding (the GPT-4o, 4.1 and
//! 5 families), with its table compiled in, so no download is ever needed. The mock models report
//! their usage with it, so the demo's token and cost figures are what a real model would bill
//! for the same request; the benchmarks count request bodies with it.
//!
//! Other providers tokenize differently (Claude's and Gemini's encodings are not published);
//! `o200k_base` is the reference the figures are stated in.

use tiktoken_rs::o200k_base_singleton;

/// The number of `o200k_base` tokens in `text` (special-token syntax counted as plain text).
/// The table is built once per process, on first use.
pub fn count(text: &str) -> u64 {
    o200k_base_singleton().encode_ordinary(text).len() as u64
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
}
