//! `demo` and README's walk-throughs against it, run as a user runs them: the banner says what the
//! demo relaxes and a restart never wedges it, `simulate` shows what the agent did from the
//! service's database, README's sale ends held until `release`, and the whole walk-through runs on
//! a fresh clone without config files.

use std::process::Command;

use crate::cli_helpers::*;
use crate::helpers::*;

/// A running `demo` (stopped when dropped) and the banner it printed.
struct Demo {
    child: std::process::Child,
    banner: String,
    port: u16,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The demo started on the demo tenant and a fresh database in a folder of its own: the
/// folder's guard, the config path, the database URL and the demo.
fn started_demo() -> (tempfile::TempDir, std::path::PathBuf, String, Demo) {
    let (dir, config) = service_dir();
    let database = format!("sqlite://{}", dir.path().join("demo.db").display());
    let demo = start_demo(&config, &database);
    (dir, config, database, demo)
}

fn start_demo(config_dir: &std::path::Path, database: &str) -> Demo {
    let mut demo = command(&["demo"]);
    demo.env("CONFIG_DIR", config_dir)
        .env("DATABASE_URL", database);
    demo_from(demo)
}

/// `demo` run as `command` sets it up, on a port of its own, once its banner is printed.
fn demo_from(mut command: Command) -> Demo {
    use std::io::BufRead;
    let mut child = command
        .env("PORT", "0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (lines, banner_lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Drains the demo's stdout to its end (its `[sandbox]` lines come after the banner): a
        // closed pipe would fail the demo's next print.
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let _ = lines.send(line);
        }
    });
    let mut banner = String::new();
    let mut demo = Demo {
        child,
        banner: String::new(),
        port: 0,
    };
    loop {
        let line = banner_lines
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no banner: {banner}"));
        banner.push_str(&line);
        banner.push('\n');
        if line.starts_with("Its data lives in") {
            break;
        }
    }
    let port = piece_after(&banner, "running on http://127.0.0.1:", |rest| {
        rest.split_whitespace().next()
    })
    .parse()
    .unwrap_or_else(|_| panic!("a port in {banner}"));
    demo.banner = banner;
    demo.port = port;
    demo
}

/// The subscriber id in the banner's curl line.
fn banner_subscriber(banner: &str) -> String {
    let id = piece_after(banner, "\"subscriber_id\":\"", |rest| {
        rest.split('"').next()
    });
    assert!(
        id.len() == 15 && id.bytes().all(|b| b.is_ascii_digit()),
        "{id}"
    );
    assert!(banner.contains(&format!("subscriber {id}, a new one at each start")));
    id.to_owned()
}

fn secret_of(banner: &str) -> String {
    piece_after(banner, "Shared secret (new at each start): ", |rest| {
        rest.lines().next()
    })
    .to_owned()
}

/// A fresh clone as far as the commands can tell: the repo's shipped `config/` files (the
/// examples, their README and schemas) and none of an operator's `config/*.json`.
fn fresh_clone() -> tempfile::TempDir {
    let clone = tempfile::tempdir().unwrap();
    let shipped = repo_path("config");
    let config = clone.path().join("config");
    std::fs::create_dir_all(config.join("schema")).unwrap();
    for entry in std::fs::read_dir(&shipped).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_owned();
        let shipped_file = name
            .to_str()
            .is_some_and(|n| n.ends_with(".example") || n == "README.md");
        if path.is_file() && shipped_file {
            std::fs::copy(&path, config.join(&name)).unwrap();
        }
    }
    for folder in ["schema", "knowledge.example"] {
        std::fs::create_dir_all(config.join(folder)).unwrap();
        for entry in std::fs::read_dir(shipped.join(folder)).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, config.join(folder).join(path.file_name().unwrap())).unwrap();
        }
    }
    clone
}

#[test]
fn the_demo_says_what_it_relaxes_and_never_wedges() {
    let (dir, config) = service_dir();
    let rules_path = config.join("rules.json");
    let mut rules: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&rules_path).unwrap()).unwrap();
    rules["maxTurnsPerConversation"] = serde_json::json!(1);
    std::fs::write(&rules_path, rules.to_string()).unwrap();
    let database_path = dir.path().join("demo.db");
    let database = format!("sqlite://{}", database_path.display());

    let first = start_demo(&config, &database);
    let banner = &first.banner;
    for promise in [
        "contact tokens are not enforced",
        "the shared secret is generated anew at each start",
        "Shared secret (new at each start): ",
        "After 1 messages without a 24-hour pause a contact is handed to a person",
        &format!("Its data lives in {}", database_path.display()),
    ] {
        assert!(banner.contains(promise), "{promise:?} in {banner}");
    }
    assert!(!banner.contains("shown once"), "{banner}");
    crate::console::demo_console_is_on_with_the_password_its_banner_prints(first.port, banner);
    let subscriber = banner_subscriber(banner);
    assert_ne!(subscriber, "1000001");
    let secret = secret_of(banner);

    let simulate = |args: &[&str]| {
        binary()
            .arg("simulate")
            .args(args)
            .args(["--url", &format!("http://127.0.0.1:{}", first.port)])
            .env_clear()
            .env("MANYCHAT_SHARED_SECRET", &secret)
            .env("DATABASE_URL", &database)
            .env("CONFIG_DIR", &config)
            .output()
            .unwrap()
    };
    // Without --subscriber: a new contact each run, answered, and named so it can go on.
    for _ in 0..2 {
        let output = simulate(&["How much are your courses?"]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let printed = stdout(&output);
        assert!(
            printed.starts_with("(a new contact: pass --subscriber "),
            "{printed}"
        );
        assert!(!printed.contains("handed to a person"), "{printed}");
    }
    // One contact past the cap (1 here): the second reply is the handoff copy, and says why.
    let output = simulate(&["--subscriber", "5550201", "How much are your courses?"]);
    assert!(
        !stdout(&output).contains("handed to a person"),
        "{output:?}"
    );
    let output = simulate(&["--subscriber", "5550201", "And the schedule?"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed = stdout(&output);
    assert!(
        printed.contains("(handed to a person before the model ran: the turn cap"),
        "{printed}"
    );
    drop(first);

    // A restart: a new secret and a new subscriber in the banner.
    let second = start_demo(&config, &database);
    assert_ne!(secret_of(&second.banner), secret);
    assert_ne!(banner_subscriber(&second.banner), subscriber);
}

#[test]
fn simulate_shows_what_the_agent_did_from_the_services_database_or_says_it_cannot() {
    let (dir, config, database, demo) = started_demo();
    let secret = secret_of(&demo.banner);
    let simulate = |database: &str| {
        binary()
            .args(["simulate", "--subscriber", "5550301"])
            .arg("How much is Wheel Throwing Basics?")
            .args(["--url", &format!("http://127.0.0.1:{}", demo.port)])
            .env_clear()
            .env("MANYCHAT_SHARED_SECRET", &secret)
            .env("DATABASE_URL", database)
            .env("CONFIG_DIR", &config)
            .output()
            .unwrap()
    };
    let output = simulate(&database);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let printed = stdout(&output);
    assert!(
        printed.contains(&format!(
            "(what the agent did, read from the SQLite database {}:)",
            dir.path().join("demo.db").display()
        )),
        "{printed}"
    );
    for did in [
        "  field intent set to prospect (done)",
        "  field funnel_stage set to offered (done)",
    ] {
        assert!(printed.contains(did), "{did:?} in {printed}");
    }

    let elsewhere = format!("sqlite://{}", dir.path().join("absent.db").display());
    let output = simulate(&elsewhere);
    let printed = stdout(&output);
    assert!(
        printed.contains("this command cannot read the SQLite database")
            && printed.contains("with its DATABASE_URL"),
        "{printed}"
    );
}

/// README's sale walk-through against the demo: four messages end in the payment handoff, the
/// fifth is held for the person (and `simulate` says so and how to release it), and after
/// `release` the contact is answered again.
#[test]
fn handoff_the_readme_sale_ends_held_and_simulate_says_how_to_release_it() {
    let (_dir, config, database, demo) = started_demo();
    let secret = secret_of(&demo.banner);
    let run = |args: &[&str]| {
        let output = binary()
            .args(args)
            .args(if args[0] == "simulate" {
                vec![
                    "--url".to_owned(),
                    format!("http://127.0.0.1:{}", demo.port),
                ]
            } else {
                vec![]
            })
            .env_clear()
            .env("MANYCHAT_SHARED_SECRET", &secret)
            .env("DATABASE_URL", &database)
            .env("CONFIG_DIR", &config)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        stdout(&output)
    };
    let say = |text: &str| run(&["simulate", "--subscriber", "5550401", text]);
    for text in [
        "How much is Wheel Throwing Basics?",
        "Can you send me the details for the wheel course?",
        "Great, how do I book and pay?",
    ] {
        let printed = say(text);
        assert!(!printed.contains("handed to a person"), "{printed}");
    }
    let printed = say("I have paid, here is my receipt");
    assert!(
        printed.contains("handed to a person, reason stored: payment_reported"),
        "{printed}"
    );

    let printed = say("Did you get it?");
    assert!(
        printed.contains("(held for a person: the contact was handed to a person at "),
        "{printed}"
    );
    assert!(
        printed.contains("when the tag needs-studio-reply is removed from the contact"),
        "{printed}"
    );
    assert!(
        printed.contains("manychat-agent release 5550401, or POST /v1/channels/manychat/release"),
        "{printed}"
    );
    assert!(!printed.contains("through the outbox"), "{printed}");

    assert!(run(&["release", "5550401"]).starts_with("released"));
    let printed = say("Did you get it?");
    assert!(!printed.contains("held for a person"), "{printed}");
}

/// README "The two commands", on a fresh clone: `demo` with no `config/*.json`, a sale that ends
/// handed to a person and held, then `release`, `report`, `manychat check` against the demo's
/// sandbox and `forget`, each run as the README shows it (no variable but those it names), each
/// reading the tenant config the demo read (the examples) and saying so.
#[test]
fn the_readme_walk_through_runs_on_a_fresh_clone_without_config_files() {
    let clone = fresh_clone();
    let mut demo = command(&["demo"]);
    demo.current_dir(clone.path());
    let demo = demo_from(demo);
    let examples = "tenant config: config (prompt.md.example, catalog.json.example, \
                    rules.json.example, tools.json.example, knowledge.example/: 1 document; the \
                    demo tenant's examples";
    assert!(demo.banner.contains(examples), "{}", demo.banner);
    let question = "How much is Wheel Throwing Basics?";
    assert!(
        demo.banner.contains(&format!("\"text\":\"{question}\"")),
        "the example question is the loaded catalog's: {}",
        demo.banner
    );
    let secret = secret_of(&demo.banner);
    let sandbox = piece_after(&demo.banner, "a local sandbox at ", |rest| {
        rest.split_whitespace().next()
    })
    .to_owned();
    let url = format!("http://127.0.0.1:{}", demo.port);
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let output = command(args)
            .current_dir(clone.path())
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        output
    };
    let say = |text: &str| {
        let args = ["simulate", "--url", &url, "--subscriber", "5550501", text];
        stdout(&run(&args, &[("MANYCHAT_SHARED_SECRET", &secret)]))
    };
    let printed = say("I have paid, here is my receipt");
    assert!(printed.contains("handed to a person"), "{printed}");
    let printed = say("Did you get it?");
    assert!(printed.contains("(held for a person"), "{printed}");

    for (args, env, says) in [
        (
            &["release", "5550501"][..],
            &[][..],
            "released: the assistant answers this contact's next message",
        ),
        (&["report"], &[], "how the sales assistant did"),
        (
            &["manychat", "check"],
            &[
                ("MANYCHAT_API_BASE", sandbox.as_str()),
                ("MANYCHAT_API_TOKEN", "sandbox:demo"),
                ("MANYCHAT_REPLY_FLOW_NS", "demo_reply_flow"),
            ],
            "ManyChat account matches",
        ),
    ] {
        let output = run(args, env);
        assert!(stdout(&output).contains(says), "{args:?}: {output:?}");
        assert!(stderr(&output).contains(examples), "{args:?}: {output:?}");
    }
    let printed = say("Are you there?");
    assert!(
        !printed.contains("held for a person"),
        "released: {printed}"
    );

    let output = run(&["forget", "5550501"], &[]);
    assert!(
        stdout(&output).starts_with("forgot conversation"),
        "{output:?}"
    );
}
