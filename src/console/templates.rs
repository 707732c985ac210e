//! The console's HTML (maud: every interpolated value is escaped). Each page is one `main` with
//! labelled regions and plain forms; no script. Every logged-in page has the same header: the
//! nav (Running, Try it, Conversations, Held; the current one marked `aria-current="page"`) and
//! the logout button ([`shell`]).

use maud::{DOCTYPE, Markup, html};

use super::Running;
use crate::config::{ConfigErrors, ReloadOutcome, TenantConfig};

fn page(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · manychat-agent console" }
                link rel="stylesheet" href="/console/style.css";
            }
            body {
                a class="skip" href="#main" { "Skip to content" }
                (body)
            }
        }
    }
}

/// The logged-in pages, for the nav.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Nav {
    Running,
    Try,
    Conversations,
    Held,
    /// A page outside the four (the 404 page).
    None,
}

const NAV: [(Nav, &str, &str, &str); 4] = [
    (Nav::Running, "/console", "Running", "nav-running"),
    (Nav::Try, "/console/try", "Try it", "nav-try"),
    (
        Nav::Conversations,
        "/console/conversations",
        "Conversations",
        "nav-conversations",
    ),
    (Nav::Held, "/console/held", "Held", "nav-held"),
];

/// A logged-in page: the header (brand, nav, logout) and `body` as its `main`.
pub(super) fn shell(title: &str, current: Nav, csrf: &str, body: Markup) -> Markup {
    page(
        title,
        html! {
            header {
                p class="brand" { "manychat-agent console" }
                nav aria-label="Console" {
                    ul {
                        @for (nav, href, label, id) in NAV {
                            li {
                                @if nav == current {
                                    a id=(id) href=(href) aria-current="page" { (label) }
                                } @else {
                                    a id=(id) href=(href) { (label) }
                                }
                            }
                        }
                    }
                }
                form method="post" action="/console/logout" {
                    input type="hidden" name="csrf" value=(csrf);
                    button type="submit" class="quiet" id="logout" { "Log out" }
                }
            }
            main id="main" {
                (body)
            }
        },
    )
}

/// The 404 page of a logged-in owner: `what` was not found.
pub(super) fn not_found(csrf: &str, what: &str) -> Markup {
    shell(
        "Not found",
        Nav::None,
        csrf,
        html! {
            h1 { "Not found" }
            p id="not-found" role="alert" { (what) }
            p { a href="/console/conversations" { "Back to the conversations" } }
        },
    )
}

/// The login form; `error` says why the last attempt was refused.
pub(super) fn login(csrf: &str, error: Option<&str>) -> Markup {
    page(
        "Log in",
        html! {
            main id="main" {
                h1 { "Owner's console" }
                @if let Some(error) = error {
                    p class="error" role="alert" { (error) }
                }
                form method="post" action="/console/login" {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="password" { "Password" }
                    input id="password" name="password" type="password"
                        autocomplete="current-password" required autofocus;
                    button type="submit" { "Log in" }
                }
            }
        },
    )
}

/// What the "what is running" page shows.
pub(super) struct RunningView<'a> {
    pub running: &'a Running,
    pub dir: String,
    pub files: Vec<String>,
    pub snapshot: &'a TenantConfig,
    pub on_disk: &'a Result<(), ConfigErrors>,
    pub outcome: Option<&'a ReloadOutcome>,
    pub csrf: &'a str,
}

/// The loaded snapshot's counts: offerings, flows, tags, plugin tools.
pub(super) fn counts(config: &TenantConfig) -> [(&'static str, usize); 4] {
    let tools = config.tools.as_ref();
    [
        ("Offerings", config.catalog.offerings.len()),
        ("Flows", tools.map_or(0, |t| t.flows.len())),
        ("Tags", tools.map_or(0, |t| t.tags.len())),
        (
            "Plugin tools",
            config.plugins.as_ref().map_or(0, |p| p.tools.len()),
        ),
    ]
}

fn issues(errors: &ConfigErrors) -> Markup {
    html! {
        ul class="issues" {
            @for issue in errors.issues() {
                li {
                    code { (issue.file) } " at " code { (issue.path) } ": " (issue.rule)
                }
            }
        }
    }
}

pub(super) fn running(view: &RunningView<'_>) -> Markup {
    shell(
        "What is running",
        Nav::Running,
        view.csrf,
        html! {
                h1 { "What is running" }
                @if let Some(outcome) = view.outcome {
                    section aria-labelledby="reload-title" class=(if matches!(outcome, ReloadOutcome::Applied) { "ok" } else { "error" }) role="status" {
                        h2 id="reload-title" { "Reload" }
                        @match outcome {
                            ReloadOutcome::Applied => p { "Reloaded: the files on disk are now in force." },
                            ReloadOutcome::Rejected(errors) => {
                                p { "Refused: the config in force stays. What the files on disk break:" }
                                (issues(errors))
                            },
                            ReloadOutcome::TimedOut => p { "Not reloaded: reading the config folder took too long; the config in force stays." },
                            ReloadOutcome::StillReading => p { "Not reloaded: an earlier reload is still reading the folder; the config in force stays." },
                        }
                    }
                }
                section aria-labelledby="process-title" {
                    h2 id="process-title" { "Process" }
                    dl {
                        dt { "Version" } dd { (view.running.version) }
                        dt { "Model" } dd { code { (view.running.model_id) } }
                        dt { "Store" } dd { (view.running.store) }
                    }
                }
                section aria-labelledby="config-title" {
                    h2 id="config-title" { "Config in force" }
                    dl {
                        dt { "Folder" } dd { code { (view.dir) } }
                        dt { "Files" } dd { (view.files.join(", ")) }
                        @for (name, count) in counts(view.snapshot) {
                            dt { (name) } dd { (count) }
                        }
                    }
                }
                section aria-labelledby="disk-title" {
                    h2 id="disk-title" { "Files on disk now" }
                    @match view.on_disk {
                        Ok(()) => p class="ok" { "Valid: a reload would apply them." },
                        Err(errors) => {
                            p class="error" { "Invalid: a reload would be refused." }
                            (issues(errors))
                        },
                    }
                    form method="post" action="/console/reload" {
                        input type="hidden" name="csrf" value=(view.csrf);
                        button type="submit" id="reload" { "Reload the config" }
                    }
                    p class="hint" { "Does what SIGHUP does: the files are checked whole, and a refused set changes nothing." }
                }
        },
    )
}
