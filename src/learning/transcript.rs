//! A cohort member as the analyst reads it: each bound turn's text with the names said in the
//! conversation removed (`names`) and cleaned as a note's is (its first two steps: control
//! characters and whitespace runs collapsed, identifier shapes replaced by `[removed]`), labelled with its turn id, inside the run's fence (untrusted text);
//! and the worst-case price of a request (031 § Analyst).

use super::cohort::Member;
use crate::actions::NoteText;
use crate::fence::Fence;
use crate::model::Usage;
use crate::store::{Role, Turn};

/// A member's turns as lines inside the fence; a turn whose text is empty (retention emptied
/// it) is left out. `None` when nothing is left.
pub fn render(member: &Member, fence: &Fence) -> Option<String> {
    let mut lines = Vec::new();
    // Names said anywhere in the conversation go from every line of it (`names`).
    let names = names_of(&member.turns);
    for turn in &member.turns {
        let Some(clean) = cleaned(turn, &names) else {
            continue;
        };
        let who = match turn.role {
            Role::User => "contact",
            Role::Agent => "agent",
        };
        lines.push(format!("[turn {}] {who}: {clean}", turn.id));
    }
    (!lines.is_empty()).then(|| fence.wrap(&lines.join("\n")))
}

/// The names said anywhere in a conversation's turns (`names`).
pub fn names_of(turns: &[Turn]) -> Vec<String> {
    super::names::names_in(turns.iter().map(|t| t.text.as_str()))
}

/// One turn's text as the analyst reads it: `names` removed, cleaned as a note is. `None`
/// when nothing is left. The console's review quotes a proposal's cited turns through it.
pub fn cleaned(turn: &Turn, names: &[String]) -> Option<String> {
    let text = super::names::remove(&turn.text, names);
    NoteText::clean(&text, usize::MAX).map(|clean| clean.as_str().to_owned())
}

/// The turn ids a member's transcript shows, as the analyst cites them.
pub fn turn_ids(member: &Member) -> impl Iterator<Item = String> + '_ {
    member.turns.iter().map(|t| t.id.to_string())
}

/// The worst case of a request: its input at one token per three characters, and the whole
/// output limit.
pub fn worst_case_usage(characters: usize, output_limit: u32) -> Usage {
    Usage {
        input_tokens: characters.div_ceil(3) as u64,
        output_tokens: u64::from(output_limit),
        cached_tokens: 0,
        cache_write_tokens: 0,
    }
}
