//! What `demo` prints once it listens: where it runs, what it relaxes, and how to try it, in
//! the command form the operator started it with (`cargo run -- …` from a checkout, the
//! installed `manychat-agent …` otherwise).

/// What `demo` prints once it listens: where it runs, what it relaxes, and how to try it.
pub(super) struct DemoBanner {
    pub(super) port: u16,
    pub(super) sandbox: Option<String>,
    /// The variables the demo set to its own defaults.
    pub(super) relaxed: Vec<&'static str>,
    pub(super) secret: String,
    pub(super) secret_generated: bool,
    /// A new contact at each start, so a restarted demo never inherits a handed-off contact.
    pub(super) subscriber: String,
    /// The SQLite file, when the demo keeps its data in one.
    pub(super) database: Option<String>,
    /// `rules.maxTurnsPerConversation` and `rules.idleResetHours`.
    pub(super) turn_cap: (u32, u32),
    /// Which tenant files the demo read (`config_used::line`).
    pub(super) config: String,
    /// The example question of the curl and simulate lines ([`question_about`]).
    pub(super) question: String,
    /// The owner's console password when the demo made it (`None`: the operator's own
    /// `CONSOLE_PASSWORD_HASH` is in force).
    pub(super) console_password: Option<String>,
    /// The language `mock:demo` answers in: `prompt.md`'s (`model::demo::prompt_language`).
    pub(super) offline_language: crate::config::Language,
}

/// The banner's example question: the price of the loaded catalog's first offering, which the
/// demo's model answers from the catalog. A name that would need quoting in the printed shell
/// lines (a quote, `\`, `$`, a backtick, a control character) gives the question without it.
pub(super) fn question_about(catalog: &crate::config::tenant::Catalog) -> String {
    let plain = |name: &str| {
        !name.trim().is_empty()
            && !name
                .chars()
                .any(|c| c.is_control() || matches!(c, '\'' | '"' | '\\' | '$' | '`' | '!'))
    };
    match catalog.offerings.first().map(|o| o.name.trim()) {
        Some(name) if plain(name) => format!("How much is {name}?"),
        _ => "How much does it cost?".to_owned(),
    }
}

/// How the operator runs a command: `cargo run --` when this binary is a build in a checkout's
/// `target/`, else the installed `manychat-agent`.
pub(super) fn command() -> &'static str {
    let built_here = std::env::current_exe().ok().is_some_and(|exe| {
        exe.components()
            .any(|part| part.as_os_str() == std::ffi::OsStr::new("target"))
    });
    if built_here {
        "cargo run --"
    } else {
        "manychat-agent"
    }
}

impl std::fmt::Display for DemoBanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let port = self.port;
        let cmd = command();
        writeln!(
            f,
            "manychat-agent demo is running on http://127.0.0.1:{port}"
        )?;
        writeln!(f, "{}", self.config)?;
        if let Some(sandbox) = &self.sandbox {
            writeln!(
                f,
                "ManyChat calls go to a local sandbox at {sandbox} (printed below as [sandbox] lines)."
            )?;
            writeln!(
                f,
                "Check the wiring against it (it reads the files the demo read):\n  \
                 MANYCHAT_API_BASE={sandbox} MANYCHAT_API_TOKEN=sandbox:demo \
                 MANYCHAT_REPLY_FLOW_NS=demo_reply_flow {cmd} manychat check\n  \
                 (the sandbox's account is made from the config the demo loaded, so this checks \
                 that your files name each other consistently, not your real ManyChat account)"
            )?;
        }
        let offline_model = format!(
            "the model is mock:demo, offline and scripted: no real model answers. It answers \
             greetings, prices, schedules and links from your catalog in {} ({}), the language \
             of your prompt.md, and hands anything else to a person (set AGENT_MODEL for a real \
             one)",
            self.offline_language.name(),
            self.offline_language.code()
        );
        let relaxations: Vec<&str> = self
            .relaxed
            .iter()
            .filter_map(|name| match *name {
                "CONTACT_TOKENS_ENFORCED" => Some(
                    "contact tokens are not enforced: a request without its contact's token \
                     still reads the contact's history (CONTACT_TOKENS_ENFORCED=false)",
                ),
                "MANYCHAT_SHARED_SECRET" => Some(
                    "the shared secret is generated anew at each start \
                     (set MANYCHAT_SHARED_SECRET to keep one)",
                ),
                "AGENT_MODEL" => Some(offline_model.as_str()),
                "TRANSCRIPTION_MODEL" => Some(
                    "voice notes are transcribed by mock:demo, offline, into one fixed sentence \
                     (set TRANSCRIPTION_MODEL for a real one)",
                ),
                "PUBLIC_BASE_URL" => {
                    Some("PUBLIC_BASE_URL is a placeholder (https://demo.invalid)")
                }
                _ => None,
            })
            .collect();
        if !relaxations.is_empty() {
            writeln!(f, "The demo relaxes what `serve` enforces:")?;
            for line in relaxations {
                writeln!(f, "  - {line}")?;
            }
        }
        let secret = &self.secret;
        if self.secret_generated {
            writeln!(f, "Shared secret (new at each start): {secret}")?;
        } else {
            writeln!(f, "Shared secret: the first of MANYCHAT_SHARED_SECRET")?;
        }
        match &self.console_password {
            Some(password) => writeln!(
                f,
                "Owner's console: http://127.0.0.1:{port}/console (password, new at each start: \
                 {password})"
            )?,
            None => writeln!(
                f,
                "Owner's console: http://127.0.0.1:{port}/console (your CONSOLE_PASSWORD_HASH's \
                 password)"
            )?,
        }
        let subscriber = &self.subscriber;
        writeln!(
            f,
            "Try it as a new contact (subscriber {subscriber}, a new one at each start):"
        )?;
        writeln!(
            f,
            "  curl -s http://127.0.0.1:{port}/v1/channels/manychat/message \\\n    \
             -H 'Authorization: Bearer {secret}' -H 'Content-Type: application/json' \\\n    \
             -d '{{\"subscriber_id\":\"{subscriber}\",\"text\":\"{question}\"}}'",
            question = self.question
        )?;
        if let Some(sandbox) = &self.sandbox {
            let note = crate::manychat::sandbox::DEMO_VOICE_NOTE_PATH;
            writeln!(
                f,
                "  a voice note, as ManyChat sends one (its file's URL as the text): \
                 \"text\":\"{sandbox}{note}\""
            )?;
        }
        let url = match port {
            3000 => String::new(),
            _ => format!(" --url http://127.0.0.1:{port}"),
        };
        writeln!(
            f,
            "  MANYCHAT_SHARED_SECRET={secret} {cmd} simulate{url} \"{}\"",
            self.question
        )?;
        let (cap, idle) = self.turn_cap;
        writeln!(
            f,
            "After {cap} messages without a {idle}-hour pause a contact is handed to a person \
             (the turn cap); simulate says why when a reply is the handoff copy."
        )?;
        match &self.database {
            Some(path) => writeln!(
                f,
                "Its data lives in {path}: stop the demo and delete that file (with its -wal and \
                 -shm files) to start afresh, or `{cmd} forget <subscriber_id>` one contact."
            ),
            None => writeln!(
                f,
                "Its data lives in DATABASE_URL: `{cmd} forget <subscriber_id>` erases one contact."
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_question_asks_the_price_of_the_loaded_catalogs_first_offering() {
        let mut catalog = crate::config::examples::demo_tenant().catalog;
        assert_eq!(
            question_about(&catalog),
            format!("How much is {}?", catalog.offerings[0].name)
        );
        catalog.offerings[0].name = "Limpeza dentária".into();
        assert_eq!(question_about(&catalog), "How much is Limpeza dentária?");
        // A name the printed shell lines would have to quote is left out.
        catalog.offerings[0].name = "Dr. O'Neill's check-up".into();
        assert_eq!(question_about(&catalog), "How much does it cost?");
    }
}
