//! The integration suite: the real app on port 0 with its own SQLite file, a fake ManyChat that
//! records every request (wiremock), and the scripted or hanging model. Each test is named for
//! the clause it proves (C8).

mod bound;
mod helpers;

mod binding;
mod burst;
mod burst_replicas;
mod cache_cost;
mod cli;
mod console;
mod contact_turns;
mod crowd;
mod deferred_channel;
mod durable;
mod faults;
mod flows;
mod gates;
mod going_live;
mod handoff_hold;
mod handshake;
mod handshake_fake;
mod hardening;
mod hold;
mod hostile_media;
mod http_contract;
mod insights;
mod knowledge;
mod layers;
mod learning;
mod logs;
mod media;
mod metrics;
mod no_repeat;
mod nudges;
mod opening;
mod order;
mod outbox;
mod plugin_outbox;
mod plugins;
mod prefix;
mod race;
mod reload;
mod replicas;
mod report;
mod sales;
mod selling;
mod shutdown;
mod steps;
mod surfaces;
mod takeover;
mod token_response;
mod tokens;
mod tools;
mod window_closing;
mod wiring;
