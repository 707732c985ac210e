//! An `AGENT_REASONING_EFFORT` level (`reasoning`), the leaf both the capability table (which
//! levels a model takes) and the setting's checks name.

/// An `AGENT_REASONING_EFFORT` level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effort {
    Minimal,
    Low,
    Medium,
    High,
}

impl Effort {
    /// Every level, in order.
    pub const ALL: &'static [Effort] =
        &[Effort::Minimal, Effort::Low, Effort::Medium, Effort::High];

    /// Reads a level (case-insensitive, trimmed); `None` for anything else.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "minimal" => Some(Self::Minimal),
            "low" => Some(Self::Low),
            "medium" => Some(Self::Medium),
            "high" => Some(Self::High),
            _ => None,
        }
    }

    /// The level as the variable spells it, which is also OpenAI's `reasoning_effort` value and
    /// Anthropic's `output_config.effort` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }

    /// The rule a bad value breaks, for the settings' error.
    pub const RULE: &'static str = "must be minimal, low, medium or high (unset sends nothing)";
}
