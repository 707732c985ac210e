//! (in progress)
pub mod fence;
pub mod prompt;
pub mod reply;
