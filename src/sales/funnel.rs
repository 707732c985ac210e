//! The funnel (023): forward only against the floor; the conversion event a write fires (027).

use super::{Refusal, Stage};
use crate::config::{EventConfig, FUNNEL_STAGES, ToolsConfig};

/// 023 § Forward only: a stage before the floor is refused; an equal one is accepted.
pub fn stage_write(floor: Option<Stage>, stage: Stage) -> Result<(), Refusal> {
    match floor {
        Some(floor) if stage < floor => Err(Refusal::Backward),
        _ => Ok(()),
    }
}

/// 027 § Firing rule: the event of `stage` when a write to it strictly advances past `floor`
/// (the same floor 023 uses); a jump fires only the stage written, an equal write nothing.
pub fn event_for(tools: &ToolsConfig, floor: Option<Stage>, stage: Stage) -> Option<&EventConfig> {
    if floor.is_some_and(|floor| stage <= floor) {
        return None;
    }
    let name = FUNNEL_STAGES.get(stage)?;
    tools.events.iter().find(|e| e.stage == *name)
}
