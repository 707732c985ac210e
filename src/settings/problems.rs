//! The report of problems: one `SettingProblem` per variable that failed its rule, naming the
//! variable and the rule, never the value (values include secrets), all collected in one
//! `SettingsError`.

use super::*;

/// One variable that failed its rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingProblem {
    pub variable: &'static str,
    pub rule: String,
}

impl fmt::Display for SettingProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.variable, self.rule)
    }
}

/// Every problem found in the environment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SettingsError {
    pub problems: Vec<SettingProblem>,
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid environment:")?;
        for problem in &self.problems {
            write!(f, "\n  {problem}")?;
        }
        Ok(())
    }
}

impl SettingsError {
    /// The problem reported for `variable`, if any.
    pub fn problem(&self, variable: &str) -> Option<&SettingProblem> {
        self.problems.iter().find(|p| p.variable == variable)
    }
}
