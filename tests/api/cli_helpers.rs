//! What the command-line suites (`cli_*.rs`) share: the binary in an empty environment, a folder
//! with the demo tenant, and what a command printed or, refused, wrote to stderr.

use std::process::Command;

use crate::helpers::*;

pub fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_manychat-agent"))
}

/// The binary with `args`, in an empty environment (the caller adds the variables it means).
pub fn command(args: &[&str]) -> Command {
    let mut command = binary();
    command.args(args).env_clear();
    command
}

/// A folder with the demo tenant in its `config/`: the folder's guard and the config path.
pub fn service_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    copy_demo_tenant(&config);
    (dir, config)
}

/// What a refused command (exit 1) wrote to stderr.
pub fn refusal(output: &std::process::Output) -> String {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    stderr(output)
}

pub fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
