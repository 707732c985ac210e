//! The command line (SYSTEM 5.4): parse, load settings, call into the library.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use manychat_agent::cli;

#[derive(Parser)]
#[command(
    name = "manychat-agent",
    version,
    about = "An LLM sales agent behind ManyChat's Dynamic Block"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve HTTP and run the background workers (the default deployment).
    Serve,
    /// Run the outbox worker (and the nudge worker, for a tenant with follow-ups) alone, for a
    /// separate process.
    Worker,
    /// The embedded default: SQLite, the demo tenant, mock:demo, a local ManyChat sandbox.
    Demo,
    /// The owner's console (`/console`).
    Console {
        #[command(subcommand)]
        command: ConsoleCommand,
    },
    /// The catalog's commands.
    Catalog {
        #[command(subcommand)]
        command: CatalogCommand,
    },
    /// Tenant config commands.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Run a golden eval suite against a model.
    ///
    /// PLAYBOOK_VERSION=<hash, or a unique prefix of 8+ characters> runs it with that playbook
    /// version in the prompt (unset: no playbook, the baseline). With the service's database
    /// (DATABASE_URL, else data/agent.db when it exists) and a model that is not mock:, the run
    /// ends by writing the eval record `insights activate` needs; a mock model's run writes
    /// none.
    Eval {
        /// Folder of *.jsonl cases.
        #[arg(long, default_value = manychat_agent::learning::gate::DEFAULT_SUITE)]
        suite: PathBuf,
        /// provider:model (default: AGENT_MODEL; with neither, the run is refused: pass
        /// --model mock:demo for the offline demo model).
        #[arg(long)]
        model: Option<String>,
    },
    /// Send a message to a running service as ManyChat would, and print the reply (and, when
    /// the service's database is reachable, why a turn was handed off).
    Simulate {
        text: String,
        /// The service's base URL (default: http://127.0.0.1:$PORT).
        #[arg(long)]
        url: Option<String>,
        /// The contact id to send as (default: a new contact at each run).
        #[arg(long)]
        subscriber: Option<String>,
    },
    /// ManyChat account commands.
    Manychat {
        #[command(subcommand)]
        command: ManychatCommand,
    },
    /// Contact token commands (019).
    Tokens {
        #[command(subcommand)]
        command: TokensCommand,
    },
    /// Erase one contact: its conversation, turns, outbox, nudge and rate rows, at once.
    Forget {
        /// The contact's ManyChat subscriber id (digits).
        subscriber_id: String,
    },
    /// Hand a contact held for a person back to the assistant (the handoff hold).
    Release {
        /// The contact's ManyChat subscriber id (digits).
        subscriber_id: String,
    },
    /// Retention commands (RETENTION_DAYS).
    Retention {
        #[command(subcommand)]
        command: RetentionCommand,
    },
    /// The business's own tools (config/plugins.json).
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// Learning from what sold: the weekly analyst run, its review, activation behind the
    /// eval gate.
    Insights {
        #[command(subcommand)]
        command: InsightsCommand,
    },
    /// Print the weekly measures (ISO weeks, UTC) from the store: aggregates only.
    Report {
        /// ISO weeks to show, the current one included.
        #[arg(long, default_value_t = 4)]
        weeks: u32,
        #[arg(long, value_enum, default_value = "table")]
        format: manychat_agent::report::render::Format,
        /// Write the report to this file instead of printing it.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum InsightsCommand {
    /// Run this ISO week's analyst now (serve and worker run it weekly).
    Run {
        /// Run again although this week's run was made.
        #[arg(long)]
        force: bool,
    },
    /// Review pending proposals: a walk in the terminal, or one verb as flags.
    Review {
        /// List pending proposals and playbook versions.
        #[arg(long)]
        list: bool,
        /// Approve the proposal with this id.
        #[arg(long)]
        approve: Option<i64>,
        /// With --approve: the tactic as edited.
        #[arg(long)]
        text: Option<String>,
        /// Reject the proposal with this id.
        #[arg(long)]
        reject: Option<i64>,
        /// With --approve or --reject: why, recorded with the decision.
        #[arg(long)]
        reason: Option<String>,
        /// Retire the active playbook's insight at this place (from 1).
        #[arg(long)]
        retire: Option<usize>,
    },
    /// Make a playbook version live (its hash, or a unique prefix of 8+ characters).
    Activate {
        version: String,
        /// The golden suite the eval records were made against.
        #[arg(long, default_value = manychat_agent::learning::gate::DEFAULT_SUITE)]
        suite: PathBuf,
    },
    /// Link sent per playbook version: a before/after reading from the store, not a
    /// controlled experiment.
    Report {
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Add a skeleton tool to config/plugins.json (creating it) and print what its endpoint
    /// receives, must answer, and how it verifies the signature.
    #[command(group(clap::ArgGroup::new("kind").required(true).args(["read", "write"])))]
    New {
        name: String,
        /// A read tool: performed during the step, its answer given to the model.
        #[arg(long)]
        read: bool,
        /// A write tool: staged, performed after the reply unless it escalates.
        #[arg(long)]
        write: bool,
        /// The endpoint (default: http://127.0.0.1:8787/<name>).
        #[arg(long)]
        url: Option<String>,
    },
    /// Make one signed call now and print what the model would be given (a read) or what the
    /// record would say (a write, which needs --yes).
    Try {
        name: String,
        /// The ManyChat subscriber id the call is for.
        #[arg(long)]
        subscriber: String,
        /// An argument as key=value (repeatable).
        #[arg(long = "arg")]
        args: Vec<String>,
        /// Perform a write tool (it is real).
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Subcommand)]
enum RetentionCommand {
    /// Clear now the text of turns older than RETENTION_DAYS (serve and worker do it hourly).
    Run,
}

#[derive(Subcommand)]
enum TokensCommand {
    /// Issue tokens to recent contacts (last 30 days) that have none. Idempotent.
    Backfill {
        /// Write nothing: print how many recent contacts lack a token; exit 1 if any.
        #[arg(long)]
        check: bool,
    },
}

#[derive(Subcommand)]
enum ManychatCommand {
    /// Read the ManyChat account (read-only) and check every flow, tag and custom field the
    /// config and the environment name; one line per problem, exit 1 on any.
    Check,
}

#[derive(Subcommand)]
enum ConsoleCommand {
    /// Read the console password from stdin (hidden on a terminal, else the first line) and
    /// print its Argon2id hash: the value of CONSOLE_PASSWORD_HASH.
    Password,
}

#[derive(Subcommand)]
enum CatalogCommand {
    /// Build or update catalog.json's offerings from a shop's product CSV export (Shopify,
    /// WooCommerce or the generic layout of config/README.md). All or nothing: any refused row
    /// writes nothing, and every refused row is printed with its line and column.
    Import {
        /// The CSV file (UTF-8).
        file: PathBuf,
        /// The config folder (default: CONFIG_DIR, else config).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The layout (default: recognised from the header row).
        #[arg(long, value_parser = ["shopify", "woocommerce", "generic"])]
        format: Option<String>,
        /// Drop the offerings the file does not hold (default: keep them).
        #[arg(long)]
        replace: bool,
        /// For a new catalog.json: the business's name.
        #[arg(long)]
        business_name: Option<String>,
        /// For a new catalog.json: its ISO 4217 currency (EUR, USD, JPY…).
        #[arg(long)]
        currency: Option<String>,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate every config file and print every error at once.
    Check {
        /// Also check the environment exactly as `serve` does before it starts (every variable,
        /// the database's folder, the model and its price, the plugin tools' secrets), starting
        /// nothing: no database is opened, no port bound, no request made.
        #[arg(long)]
        env: bool,
    },
    /// Rename the keys of an older config (courses, enrollmentUrl, course, enrolledTag) in
    /// place, then check it. prompt.md is never touched; a second run changes nothing.
    Upgrade,
}

fn main() -> ExitCode {
    // Everything the process creates (the SQLite database and its `-wal` and `-shm` files, the
    // `data/` folder, a contact's media while it is processed) is its user's alone, whatever
    // umask it was started with. Set before any thread exists: the umask is process-wide.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    let cli = Cli::parse();
    let env: HashMap<String, String> = std::env::vars().collect();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve => cli::serve(&env).await,
            Command::Worker => cli::worker(&env).await,
            Command::Demo => cli::demo(&env).await,
            Command::Config {
                command: ConfigCommand::Check { env: with_env },
            } => match with_env {
                true => cli::config_check_env(&env),
                false => cli::config_check(&env),
            },
            Command::Config {
                command: ConfigCommand::Upgrade,
            } => cli::config_upgrade(&env),
            Command::Catalog {
                command:
                    CatalogCommand::Import {
                        file,
                        config,
                        format,
                        replace,
                        business_name,
                        currency,
                    },
            } => cli::catalog_import(
                &env,
                &cli::ImportArgs {
                    file,
                    config,
                    format,
                    replace,
                    business_name,
                    currency,
                },
            ),
            Command::Console {
                command: ConsoleCommand::Password,
            } => cli::console_password(),
            Command::Eval { suite, model } => cli::eval(&env, &suite, model.as_deref()).await,
            Command::Simulate {
                text,
                url,
                subscriber,
            } => cli::simulate(&env, &text, url.as_deref(), subscriber.as_deref()).await,
            Command::Manychat {
                command: ManychatCommand::Check,
            } => cli::manychat_check(&env).await,
            Command::Tokens {
                command: TokensCommand::Backfill { check },
            } => cli::tokens_backfill(&env, check).await,
            Command::Forget { subscriber_id } => cli::forget(&env, &subscriber_id).await,
            Command::Release { subscriber_id } => cli::release(&env, &subscriber_id).await,
            Command::Retention {
                command: RetentionCommand::Run,
            } => cli::retention_run(&env).await,
            Command::Plugin {
                command:
                    PluginCommand::New {
                        name,
                        read,
                        write: _,
                        url,
                    },
            } => {
                let kind = match read {
                    true => manychat_agent::plugins::ToolKind::Read,
                    false => manychat_agent::plugins::ToolKind::Write,
                };
                cli::plugin_new(&env, &name, kind, url.as_deref())
            }
            Command::Plugin {
                command:
                    PluginCommand::Try {
                        name,
                        subscriber,
                        args,
                        yes,
                    },
            } => cli::plugin_try(&env, &name, &subscriber, &args, yes).await,
            Command::Insights {
                command: InsightsCommand::Run { force },
            } => cli::insights::run(&env, force).await,
            Command::Insights {
                command:
                    InsightsCommand::Review {
                        list,
                        approve,
                        text,
                        reject,
                        reason,
                        retire,
                    },
            } => {
                let args = cli::insights::ReviewArgs {
                    list,
                    approve,
                    text,
                    reject,
                    reason,
                    retire,
                };
                cli::insights::review(&env, args).await
            }
            Command::Insights {
                command: InsightsCommand::Activate { version, suite },
            } => cli::insights::activate_version(&env, &version, &suite).await,
            Command::Insights {
                command: InsightsCommand::Report { json },
            } => cli::insights::report(&env, json).await,
            Command::Report { weeks, format, out } => {
                cli::report(&env, weeks, format, out.as_deref()).await
            }
        }
    });
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
