//! The console's HTML (maud: every interpolated value is escaped). Each page is one `main` with
//! labelled regions and plain forms; no script. Every logged-in page has the same header: the
//! nav (Running, Try it, Conversations, Held, Report, Learning; the current one marked
//! `aria-current="page"`) and the logout button ([`shell`]). Every word is the owner's
//! (`crate::words`, the language of the config in force), and `<html lang>` says which.

use maud::{DOCTYPE, Markup, PreEscaped, html};

use super::Running;
use crate::config::{ConfigErrors, ReloadOutcome, TenantConfig};
use crate::words::{Key, Words};

fn page(w: Words, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang=(w.language.code()) {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · " (w.text(Key::ConBrand)) }
                link rel="stylesheet" href="/console/style.css";
            }
            body {
                a class="skip" href="#main" { (w.text(Key::ConSkip)) }
                (body)
            }
        }
    }
}

/// `template`'s words with each `{}` replaced by the next of `parts` (markup: a `code`, a
/// link), the words escaped.
pub(super) fn slots(template: &str, parts: &[Markup]) -> Markup {
    let mut out = String::with_capacity(template.len() + 32);
    let mut parts = parts.iter();
    let mut rest = template;
    while let Some(at) = rest.find("{}") {
        out.push_str(&html! { (rest[..at]) }.into_string());
        if let Some(part) = parts.next() {
            out.push_str(&part.0);
        }
        rest = &rest[at + 2..];
    }
    out.push_str(&html! { (rest) }.into_string());
    PreEscaped(out)
}

/// The logged-in pages, for the nav.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Nav {
    Running,
    Try,
    Conversations,
    Held,
    Report,
    Learning,
    /// A page outside the nav's (the 404 page).
    None,
}

const NAV: [(Nav, &str, Key, &str); 6] = [
    (Nav::Running, "/console", Key::ConNavRunning, "nav-running"),
    (Nav::Try, "/console/try", Key::ConNavTry, "nav-try"),
    (
        Nav::Conversations,
        "/console/conversations",
        Key::ConNavConversations,
        "nav-conversations",
    ),
    (Nav::Held, "/console/held", Key::ConNavHeld, "nav-held"),
    (
        Nav::Report,
        "/console/report",
        Key::ConNavReport,
        "nav-report",
    ),
    (
        Nav::Learning,
        "/console/learning",
        Key::ConNavLearning,
        "nav-learning",
    ),
];

/// A logged-in page: the header (brand, nav, logout) and `body` as its `main`.
pub(super) fn shell(w: Words, title: &str, current: Nav, csrf: &str, body: Markup) -> Markup {
    page(
        w,
        title,
        html! {
            header {
                p class="brand" { (w.text(Key::ConBrand)) }
                nav aria-label=(w.text(Key::ConNavLabel)) {
                    ul {
                        @for (nav, href, label, id) in NAV {
                            li {
                                @if nav == current {
                                    a id=(id) href=(href) aria-current="page" { (w.text(label)) }
                                } @else {
                                    a id=(id) href=(href) { (w.text(label)) }
                                }
                            }
                        }
                    }
                }
                form method="post" action="/console/logout" {
                    input type="hidden" name="csrf" value=(csrf);
                    button type="submit" class="quiet" id="logout" { (w.text(Key::ConLogout)) }
                }
            }
            main id="main" {
                (body)
            }
        },
    )
}

/// The 404 page of a logged-in owner: `what` was not found.
pub(super) fn not_found(w: Words, csrf: &str, what: Key) -> Markup {
    shell(
        w,
        w.text(Key::ConNotFound),
        Nav::None,
        csrf,
        html! {
            h1 { (w.text(Key::ConNotFound)) }
            p id="not-found" role="alert" { (w.text(what)) }
            p { a href="/console/conversations" { (w.text(Key::ConBackToConversations)) } }
        },
    )
}

/// A request refused before it did anything: `why` says so, and a link leads on.
pub(super) fn refused(w: Words, why: Key, (href, link): (&str, Key)) -> Markup {
    page(
        w,
        w.text(Key::ConRefusedTitle),
        html! {
            main id="main" {
                h1 { (w.text(Key::ConRefusedTitle)) }
                p id="refused" role="alert" { (w.text(why)) }
                p { a href=(href) { (w.text(link)) } }
            }
        },
    )
}

/// The login form; `error` says why the last attempt was refused.
pub(super) fn login(w: Words, csrf: &str, error: Option<Key>) -> Markup {
    page(
        w,
        w.text(Key::ConLoginTitle),
        html! {
            main id="main" {
                h1 { (w.text(Key::ConLoginHeading)) }
                @if let Some(error) = error {
                    p class="error" role="alert" { (w.text(error)) }
                }
                form method="post" action="/console/login" {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="password" { (w.text(Key::ConPassword)) }
                    input id="password" name="password" type="password"
                        autocomplete="current-password" required autofocus;
                    button type="submit" { (w.text(Key::ConLoginTitle)) }
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
    pub words: Words,
}

/// The loaded snapshot's counts: offerings, flows, tags, plugin tools.
pub(super) fn counts(config: &TenantConfig) -> [(Key, usize); 4] {
    let tools = config.tools.as_ref();
    [
        (Key::ConOfferings, config.catalog.offerings.len()),
        (Key::ConFlows, tools.map_or(0, |t| t.flows.len())),
        (Key::ConTags, tools.map_or(0, |t| t.tags.len())),
        (
            Key::ConPluginTools,
            config.plugins.as_ref().map_or(0, |p| p.tools.len()),
        ),
    ]
}

/// A config error as `config check` names it (file, path, rule: operator words, English).
fn issues(w: Words, errors: &ConfigErrors) -> Markup {
    html! {
        ul class="issues" {
            @for issue in errors.issues() {
                li {
                    code { (issue.file) } " " (w.text(Key::ConIssueAt)) " " code { (issue.path) } ": " (issue.rule)
                }
            }
        }
    }
}

pub(super) fn running(view: &RunningView<'_>) -> Markup {
    let w = view.words;
    let t = |key| w.text(key);
    shell(
        w,
        t(Key::ConRunningTitle),
        Nav::Running,
        view.csrf,
        html! {
                h1 { (t(Key::ConRunningTitle)) }
                @if let Some(outcome) = view.outcome {
                    section aria-labelledby="reload-title" class=(if matches!(outcome, ReloadOutcome::Applied) { "ok" } else { "error" }) role="status" {
                        h2 id="reload-title" { (t(Key::ConReload)) }
                        @match outcome {
                            ReloadOutcome::Applied => p { (t(Key::ConReloaded)) },
                            ReloadOutcome::Rejected(errors) => {
                                p { (t(Key::ConReloadRefused)) }
                                (issues(w, errors))
                            },
                            ReloadOutcome::TimedOut => p { (t(Key::ConReloadTimedOut)) },
                            ReloadOutcome::StillReading => p { (t(Key::ConReloadStillReading)) },
                        }
                    }
                }
                section aria-labelledby="process-title" {
                    h2 id="process-title" { (t(Key::ConProcess)) }
                    dl {
                        dt { (t(Key::ConVersion)) } dd { (view.running.version) }
                        dt { (t(Key::ConModel)) } dd { code { (view.running.model_id) } }
                        dt { (t(Key::ConStore)) } dd { (view.running.store) }
                    }
                }
                section aria-labelledby="config-title" {
                    h2 id="config-title" { (t(Key::ConConfigInForce)) }
                    dl {
                        dt { (t(Key::ConFolder)) } dd { code { (view.dir) } }
                        dt { (t(Key::ConFiles)) } dd { (view.files.join(", ")) }
                        @for (name, count) in counts(view.snapshot) {
                            dt { (t(name)) } dd { (count) }
                        }
                    }
                }
                section aria-labelledby="disk-title" {
                    h2 id="disk-title" { (t(Key::ConOnDisk)) }
                    @match view.on_disk {
                        Ok(()) => p class="ok" { (t(Key::ConDiskValid)) },
                        Err(errors) => {
                            p class="error" { (t(Key::ConDiskInvalid)) }
                            (issues(w, errors))
                        },
                    }
                    form method="post" action="/console/reload" {
                        input type="hidden" name="csrf" value=(view.csrf);
                        button type="submit" id="reload" { (t(Key::ConReloadButton)) }
                    }
                    p class="hint" { (t(Key::ConReloadHint)) }
                }
        },
    )
}
