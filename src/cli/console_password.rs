//! `manychat-agent console password`: reads the owner's console password from stdin (without
//! echo on a terminal, else its first line) and prints its Argon2id hash, the value of
//! `CONSOLE_PASSWORD_HASH`. The password itself is never printed or logged.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use super::CliResult;
use crate::console::auth::PasswordHashSetting;

/// The shortest password the command hashes.
pub const MIN_PASSWORD_CHARS: usize = 12;

pub fn console_password() -> CliResult {
    let stdin = std::io::stdin();
    let password = if stdin.is_terminal() {
        eprint!("Console password (not shown): ");
        std::io::stderr().flush()?;
        let line = read_line_without_echo(&stdin)?;
        eprintln!();
        line
    } else {
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
        line
    };
    let password = password.trim_end_matches(['\r', '\n']);
    match check(password) {
        Ok(()) => {
            println!("{}", PasswordHashSetting::make(password).as_str());
            Ok(ExitCode::SUCCESS)
        }
        Err(rule) => {
            eprintln!("console password: {rule}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// What a console password must be.
pub fn check(password: &str) -> Result<(), String> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(format!(
            "must be at least {MIN_PASSWORD_CHARS} characters (nothing was printed)"
        ));
    }
    Ok(())
}

/// One line from the terminal with its echo off, restored whatever happens.
fn read_line_without_echo(stdin: &std::io::Stdin) -> std::io::Result<String> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    let before = tcgetattr(stdin)?;
    let mut quiet = before.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    quiet.local_modes.insert(LocalModes::ECHONL);
    tcsetattr(stdin, OptionalActions::Now, &quiet)?;
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    tcsetattr(stdin, OptionalActions::Now, &before)?;
    read.map(|_| line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_password_shorter_than_twelve_characters_is_refused() {
        assert!(check("short").is_err());
        assert!(check("elevenchars").is_err());
        assert!(check("twelve chars").is_ok());
    }
}
