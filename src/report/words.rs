//! The HTML report's words for a business owner: each measure's plain name and the one
//! sentence that explains it, and plain names for the stored outcome, reason, tool and status
//! names (the table and JSON formats keep the stored names, for operators).

/// A measure as the page names it, and what it means in one sentence.
pub struct Measure {
    pub name: &'static str,
    pub means: &'static str,
}

pub const fn measure(name: &'static str, means: &'static str) -> Measure {
    Measure { name, means }
}

pub const CONTACTS: Measure = measure(
    "new contacts",
    "People who wrote to you for the first time that week.",
);
pub const ANSWERS: Measure = measure(
    "assistant's answers",
    "Messages the AI assistant answered, or handed to a person itself.",
);
pub const LATE: Measure = measure(
    "answered a moment later",
    "Of the assistant's answers, the share that took longer than ManyChat waits and arrived a \
     moment later as a separate message; above 20 % the assistant is too slow for your contacts.",
);
pub const MERGED: Measure = measure(
    "messages sent in pieces",
    "Of the contacts' messages that started an answer, the share that gathered more messages sent \
     in quick succession (rules.json burst.windowMs) into that one answer.",
);
pub const WAIT_TYPICAL: Measure = measure(
    "typical wait",
    "How long half of your contacts waited at most for an answer given at once.",
);
pub const WAIT_SLOWEST: Measure = measure(
    "longest usual wait",
    "How long 95 in 100 of your contacts waited at most for an answer given at once.",
);
pub const LOOKUPS: Measure = measure(
    "look-ups per answer",
    "How often the assistant looked up a contact's details in ManyChat, per answer.",
);
pub const TOKENS: Measure = measure(
    "model text per answer",
    "How much text (in tokens, about four letters each) the AI model read and wrote per answer.",
);
pub const COST_PER: Measure = measure(
    "cost per answer",
    "What the AI model charged per answer, in US dollars.",
);
pub const COST: Measure = measure(
    "cost",
    "What the AI model charged that week, in US dollars.",
);
pub const INTERESTED: Measure = measure(
    "interested",
    "People the assistant recorded as interested in buying.",
);
pub const INTERESTED_SHARE: Measure = measure(
    "share interested",
    "Of the new contacts, the share who were interested in buying.",
);
pub const OFFERED: Measure = measure(
    "shown an offer",
    "People the assistant showed one of your offerings to, or who went further.",
);
pub const PREPARED: Measure = measure(
    "ready to pay",
    "People who had chosen an offering and were ready to pay, or went further.",
);
pub const LINK_SENT: Measure = measure(
    "sent the payment link",
    "People who received your payment link (payments themselves are confirmed in ManyChat).",
);
pub const LINK_RATE: Measure = measure(
    "got the link, of new contacts",
    "Of the new contacts, the share who received the payment link.",
);
pub const LINK_RATE_INTERESTED: Measure = measure(
    "got the link, of the interested",
    "Of the people interested in buying, the share who received the payment link.",
);
pub const LINK_ON_REQUEST: Measure = measure(
    "links sent early on request",
    "Of the payment links sent, the share sent before the contact had chosen, because they \
     asked for it; near 100 % the assistant may be saying contacts asked when they did not.",
);
pub const FOLLOW_UPS: Measure = measure(
    "follow-ups answered",
    "Of the follow-up messages the assistant sent, the share the contact answered within a day.",
);

pub const LAST_WORDS: Measure = measure(
    "last words answered",
    "Of the messages sent as a contact's 24-hour window was about to close, the share the contact answered within a day.",
);

/// Every measure the page shows, in the order it explains them.
pub const ALL: [&Measure; 20] = [
    &CONTACTS,
    &ANSWERS,
    &LATE,
    &MERGED,
    &WAIT_TYPICAL,
    &WAIT_SLOWEST,
    &LOOKUPS,
    &TOKENS,
    &COST_PER,
    &COST,
    &INTERESTED,
    &INTERESTED_SHARE,
    &OFFERED,
    &PREPARED,
    &LINK_SENT,
    &LINK_RATE,
    &LINK_RATE_INTERESTED,
    &LINK_ON_REQUEST,
    &FOLLOW_UPS,
    &LAST_WORDS,
];

/// A stored name with no plain name here, shown readably: `some_new_name` as "some new name".
fn readable(name: &str) -> String {
    name.replace('_', " ")
}

/// How a turn ended, in plain words.
pub fn outcome(name: &str) -> String {
    match name {
        "answered_inline" => "answered at once".into(),
        "deferred" => "answered a moment later".into(),
        "answered_scripted" => "answered with your fixed opening reply".into(),
        "escalated_model" => "handed to a person by the assistant".into(),
        "escalated_precheck" => {
            "handed to a person before the assistant read it (a keyword, a limit or the budget)"
                .into()
        }
        "failed_validation" => "handed to a person: the assistant's reply failed a check".into(),
        "error" => "handed to a person: the assistant could not answer".into(),
        "nudge_sent" => "follow-up sent".into(),
        "window_closing_sent" => "last word before the window closed".into(),
        "media_fallback" => "a voice note or file that could not be read".into(),
        "held" => "left to your team: a person had the conversation".into(),
        "contact_busy" => "recorded, not answered: the contact sent many messages at once".into(),
        other => readable(other),
    }
}

/// Why a contact was handed to a person, in plain words.
pub fn reason(name: &str) -> String {
    match name {
        "price_negotiation" => "wanted to negotiate the price".into(),
        "complaint" => "made a complaint".into(),
        "out_of_scope" => "asked what your catalog does not answer".into(),
        "explicit_request" => "asked for a person".into(),
        "low_confidence" => "the assistant was unsure".into(),
        "payment_reported" => "said they had paid (a person confirms)".into(),
        "escalation_keyword" => "wrote one of your handoff keywords".into(),
        "turn_cap" => "reached the conversation's message limit".into(),
        "rate_limit" => "wrote too many messages in an hour".into(),
        "budget" => "today's AI budget was spent".into(),
        "abort" => "the AI model took too long".into(),
        "leak" | "schema" | "field_echo_stripped" => "the assistant's reply failed a check".into(),
        "error" => "the assistant could not answer".into(),
        "load_shed" => "too many conversations at once".into(),
        "dead_lettered" => "a reply ManyChat never delivered".into(),
        other => readable(other),
    }
}

/// What an action did, in plain words.
pub fn tool(name: &str) -> String {
    match name {
        "send_flow" => "flow sent".into(),
        "set_field" => "contact field set".into(),
        "add_tag" => "tag added".into(),
        "remove_tag" => "tag removed".into(),
        "write_note" => "note for your team".into(),
        "schedule_nudge" => "follow-up scheduled".into(),
        "handoff" => "handed to a person".into(),
        other => readable(other),
    }
}

/// How an action ended, in plain words.
pub fn status(name: &str) -> String {
    match name {
        "performed" => "done".into(),
        "failed" => "failed".into(),
        "discarded" => "not done: the contact was handed to a person".into(),
        "dropped_over_cap" => "not done: over the limit per answer".into(),
        "dead_lettered" => "never delivered".into(),
        other => readable(other),
    }
}

/// A measure not computed yet, by the page's names.
pub fn pending(measure: &str) -> String {
    match measure {
        "prospect share, prospect link-sent rate" => {
            format!("{}, {}", INTERESTED_SHARE.name, LINK_RATE_INTERESTED.name)
        }
        "funnel stages offered and prepared" => format!("{}, {}", OFFERED.name, PREPARED.name),
        "link-sent rate, bypass rate" => format!(
            "{}, {}, {}",
            LINK_RATE.name, LINK_RATE_INTERESTED.name, LINK_ON_REQUEST.name
        ),
        "model steps per turn" => "model steps per answer".into(),
        other => readable(other),
    }
}
