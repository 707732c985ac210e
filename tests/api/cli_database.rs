//! The commands that work on the service's database, run as a user runs them: `forget` erases one
//! contact and prints counts never text, a padded id is refused (one contact, one id), `retention
//! run` clears old text, and `release` hands a held contact back once.

use crate::cli_helpers::*;
use crate::helpers::*;

/// The command was refused (exit 1), saying `says` on stderr.
fn assert_refused(output: &std::process::Output, says: &str) {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stderr(output).contains(says), "{output:?}");
}

/// A SQLite file holding two contacts, as a running service would have left it: returns the
/// `DATABASE_URL` and the first contact's conversation.
async fn database_with_two_contacts(
    dir: &std::path::Path,
) -> (String, manychat_agent::store::Conversation) {
    use manychat_agent::ids::SubscriberId;
    use manychat_agent::store::{NewOutboxRow, NewTurn, OutboxKind};
    let url = sqlite_file_url(dir);
    let store = manychat_agent::store::connect(&url).await.unwrap();
    let now = chrono::Utc::now();
    let mut first = None;
    for subscriber in ["5550101", "5550102"] {
        let subscriber = SubscriberId::parse(subscriber).unwrap();
        let conversation = store
            .conversation_for(&subscriber, "whatsapp", now)
            .await
            .unwrap();
        let old = now - chrono::Duration::days(100);
        store
            .record_turn(&NewTurn::user(
                conversation.id,
                "Invented private question",
                true,
                old,
            ))
            .await
            .unwrap();
        store
            .record_turn(&NewTurn::agent(
                conversation.id,
                "Invented private answer",
                "answered_inline",
                true,
                now,
            ))
            .await
            .unwrap();
        store.bump_rate(&subscriber, now).await.unwrap();
        store
            .enqueue(&NewOutboxRow::of(
                &conversation,
                OutboxKind::Reply,
                serde_json::json!({"messages": ["Invented private answer"]}),
                now,
            ))
            .await
            .unwrap();
        first.get_or_insert(conversation);
    }
    (url, first.unwrap())
}

#[tokio::test]
async fn forget_erases_one_contact_and_prints_counts_never_text() {
    let dir = tempfile::tempdir().unwrap();
    let (url, contact) = database_with_two_contacts(dir.path()).await;
    let forget = |id: &str| {
        command(&["forget", id])
            .env("DATABASE_URL", &url)
            .output()
            .unwrap()
    };

    let output = forget("5550101");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed = stdout(&output);
    assert_eq!(
        printed.trim(),
        format!(
            "forgot conversation {}; rows deleted: turns 2, outbox 1, nudges 0, \
             window_closings 0, rate_counters 1, manychat_flow_sends 0, turn_tickets 0, \
             hold_releases 0, conversations 1",
            contact.id
        )
    );
    assert!(!printed.contains("Invented"), "never the text");

    let store = manychat_agent::store::connect(&url).await.unwrap();
    assert_eq!(store.conversation(contact.id).await.unwrap(), None);
    assert!(store.turns(contact.id).await.unwrap().is_empty());
    let rows = store.outbox_rows().await.unwrap();
    assert_eq!(rows.len(), 1, "the other contact's row stays");
    assert_ne!(rows[0].conversation_id, contact.id);

    // Again: not found, said plainly, and not a failure (erasing twice is safe).
    let output = forget("5550101");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(
        stdout(&output).starts_with("contact not found"),
        "{output:?}"
    );

    // A bad id is refused, naming the rule.
    let output = forget("55501O1");
    assert_refused(&output, "digits");

    // A database that does not exist is not created empty.
    let missing = dir.path().join("elsewhere/agent.db");
    let output = command(&["forget", "5550102"])
        .env("DATABASE_URL", format!("sqlite://{}", missing.display()))
        .output()
        .unwrap();
    assert_refused(&output, "no SQLite database");
    assert!(!missing.exists());
}

#[tokio::test]
async fn one_contact_one_id_forget_and_simulate_refuse_a_padded_id() {
    let dir = tempfile::tempdir().unwrap();
    let (url, contact) = database_with_two_contacts(dir.path()).await;
    let output = command(&["forget", "05550101"])
        .env("DATABASE_URL", &url)
        .output()
        .unwrap();
    assert_refused(&output, "must not start with a zero");
    let store = manychat_agent::store::connect(&url).await.unwrap();
    assert!(store.conversation(contact.id).await.unwrap().is_some());

    // Refused before any request is made: nothing listens at this address.
    let output = binary()
        .args(["simulate", "--subscriber", "05550101", "hi"])
        .args(["--url", "http://127.0.0.1:9"])
        .env_clear()
        .env("MANYCHAT_SHARED_SECRET", "s".repeat(32))
        .output()
        .unwrap();
    assert_refused(&output, "must not start with a zero");
}

#[tokio::test]
async fn retention_run_clears_old_text_and_is_validated() {
    let dir = tempfile::tempdir().unwrap();
    let (url, contact) = database_with_two_contacts(dir.path()).await;
    let retention = |days: Option<&str>| {
        let mut command = binary();
        command
            .args(["retention", "run"])
            .env_clear()
            .env("DATABASE_URL", &url);
        if let Some(days) = days {
            command.env("RETENTION_DAYS", days);
        }
        command.output().unwrap()
    };

    let output = retention(Some("0"));
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stderr(&output).contains("RETENTION_DAYS: must be a whole number of days"));
    let output = retention(Some("off"));
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).contains("retention is off"), "{output:?}");

    // The default, 90 days: each contact's 100-day-old message loses its text.
    let output = retention(None);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        stdout(&output).trim(),
        "older than 90 days: text cleared from 2 turns, 0 settled outbox rows deleted"
    );
    let store = manychat_agent::store::connect(&url).await.unwrap();
    let turns = store.turns(contact.id).await.unwrap();
    assert_eq!(turns[0].text, "");
    assert_eq!(turns[0].role, manychat_agent::store::Role::User);
    assert_eq!(turns[1].text, "Invented private answer");
}

#[tokio::test]
async fn handoff_release_command_hands_a_held_contact_back_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("agent.db").display());
    let config = dir.path().join("config");
    copy_demo_tenant(&config);
    let store = manychat_agent::store::connect(&url).await.unwrap();
    let subscriber = manychat_agent::ids::SubscriberId::parse("5550301").unwrap();
    let now = chrono::Utc::now();
    let conversation = store
        .conversation_for(&subscriber, "whatsapp", now)
        .await
        .unwrap();
    store.set_escalated(conversation.id, now).await.unwrap();
    let release = |id: &str| {
        command(&["release", id])
            .env("DATABASE_URL", &url)
            .env("CONFIG_DIR", &config)
            .output()
            .unwrap()
    };

    let output = release("5550301");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).starts_with("released"), "{output:?}");
    let stored = store.conversation(conversation.id).await.unwrap().unwrap();
    assert_eq!(stored.hold_release_reason.as_deref(), Some("released"));
    assert!(stored.hold_note_due);

    let output = release("5550301");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(stdout(&output).starts_with("not held"), "{output:?}");
    let output = release("5550399");
    assert!(
        stdout(&output).starts_with("not held"),
        "an unknown contact: {output:?}"
    );
    let output = release("55503O1");
    assert_refused(&output, "digits");
}
