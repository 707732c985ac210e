//! `manychat-agent release <subscriber_id>`: hands a contact held for a person back to the
//! assistant (`crate::handoff`). The release is written on the conversation row, so every
//! replica answers the contact's next message.

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;

use super::{
    CliError, CliResult, config_dir, config_used, context, existing_store, on_demo_database,
    parse_subscriber,
};
use crate::clock::Clock;

/// Releases the contact's hold; says whether it was held. A contact that is unknown or not held
/// is said so and is not an error (releasing twice is safe). On the demo's database the config is
/// read as the demo read it (examples allowed).
pub async fn release(env: &HashMap<String, String>, subscriber: &str) -> CliResult {
    let subscriber = parse_subscriber(subscriber)?;
    let dir = config_dir(env);
    let context = crate::config::ConfigContext {
        allow_examples: on_demo_database(env),
        ..context(env)
    };
    config_used::print(Path::new(&dir), &context);
    // The hold's length is the tenant's: a config that does not load is refused whole.
    let config = crate::config::load_dir(Path::new(&dir), &context).map_err(|errors| {
        CliError::new(format!(
            "the tenant config in {dir} did not load ({} problem(s); \
             `manychat-agent config check` lists them)",
            errors.issues().len()
        ))
    })?;
    let store = existing_store(env).await?;
    let now = Clock::system().now();
    match crate::handoff::release::release_contact(store.as_ref(), &config, &subscriber, now)
        .await?
    {
        Some(_) => println!(
            "released: the assistant answers this contact's next message (on every replica)"
        ),
        None => println!("not held: nothing to release (unknown contact, or no hold in force)"),
    }
    Ok(ExitCode::SUCCESS)
}
