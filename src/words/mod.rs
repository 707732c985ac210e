//! Every word the server writes for a business owner, in the owner's language
//! (`rules.json` `ownerLanguage`, [`Language`]): the report (table and HTML page, its charts),
//! the console and `simulate`'s explanations. One file per language (`en`, `es`, `pt`), each an
//! exhaustive `match` over [`Key`], so a key without a translation does not compile; the tests
//! check that no translation is empty, that each keeps its template's `{}` slots, and that a
//! Spanish or Portuguese text is not the English one left untranslated.
//!
//! - [`text`] and [`fill`]: a key's words, and a template's `{}` slots filled in order.
//! - [`Measure`]: a figure's name and the one sentence under it.
//! - `format`: numbers, shares, durations, money (US dollars, named), dates and weeks as each
//!   language writes them (no locale data: three languages, their month names here).
//! - `names`: stored names (a turn's outcome, an escalation reason, a tool, a status) in words.
//!
//! Operator output (logs, `config check`, JSON) stays English; this module is for the owner.

use crate::config::Language;

mod en;
mod es;
mod format;
mod names;
mod pt;

pub use format::*;
pub use names::*;

/// Declares [`Key`] and [`Key::ALL`] from one list, so the list the tests walk is every key.
macro_rules! keys {
    ($($key:ident),* $(,)?) => {
        /// One owner-facing text. A variant is named for what it says; `…Means` is the
        /// one-line meaning under the figure of the same name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Key { $($key),* }

        impl Key {
            /// Every key, in declaration order.
            pub const ALL: &'static [Key] = &[$(Key::$key),*];
        }
    };
}

keys! {
    // The report's frame.
    TitleOf, Title, Generated, NoTurns, WeekOf, NoTurnsThisWeek, Week, None_, AboveFlag,
    AtAGlance, WhatEachMeans, NotMeasuredYet, NotSetUp,
    // The figures: a name and its meaning.
    Contacts, ContactsMeans, Answers, AnswersMeans, Late, LateMeans, Merged, MergedMeans,
    WaitTypical, WaitTypicalMeans, WaitSlowest, WaitSlowestMeans, Lookups, LookupsMeans,
    Tokens, TokensMeans, CostPerAnswer, CostPerAnswerMeans, Cost, CostMeans,
    Interested, InterestedMeans, InterestedShare, InterestedShareMeans, Offered, OfferedMeans,
    Prepared, PreparedMeans, LinkSent, LinkSentMeans, LinkRate, LinkRateMeans,
    LinkRateInterested, LinkRateInterestedMeans, LinkOnRequest, LinkOnRequestMeans,
    FollowUps, FollowUpsMeans, LastWords, LastWordsMeans,
    Conversations, ConversationsMeans, Sales, SalesMeans,
    CostPerConversation, CostPerConversationMeans, CostPerSale, CostPerSaleMeans,
    SpendPerSale, SpendPerSaleMeans, CostPerHandoff, CostPerHandoffMeans,
    CachedShare, CachedShareMeans,
    Handoffs, HandoffsMeans, Releases, ReleasesMeans, HoursWithPerson, HoursWithPersonMeans,
    Held, HeldMeans,
    // Sections of the page and the table.
    SectionFunnel, SectionWeeks, SectionSales, SectionCost, SectionHandoffs, SectionPerDay,
    HowMessagesEnded, MessagesColumn, WhyHandedOver, TimesColumn, WhatItDid, HowItWent,
    PerDayLine, Day,
    // The learning versions (031).
    PlaybookTitle, PlaybookReading, PlaybookCounted, PlaybookVersion, PlaybookFirstLive,
    PlaybookGotLink, PlaybookShare, PlaybookSettling, PlaybookNone, PlaybookActive,
    // The charts.
    ChartFunnelTitle, ChartFunnelAlt, ChartWeeklyTitle, ChartWeeklyAlt, ChartHandoffsTitle,
    ChartHandoffsAlt, ChartCostTitle, ChartCostAlt, ChartPlaybooksTitle, ChartPlaybooksAlt,
    ChartEmpty, ChartNoData,
    // Not measured yet: what, and why.
    PendingSteps, PendingStepsWhy, PendingSales, PendingSalesWhy, PendingIntentWhy,
    PendingFunnelWhy, PendingCostPerSaleWhy, PendingLinkWhy, PendingPlaybooksWhy,
    // How a turn ended.
    OutcomeAnsweredInline, OutcomeDeferred, OutcomeScripted, OutcomeEscalatedModel,
    OutcomeEscalatedPrecheck, OutcomeFailedValidation, OutcomeError, OutcomeNudge,
    OutcomeWindowClosing, OutcomeMediaFallback, OutcomeHeld, OutcomeContactBusy,
    // Why a contact was handed to a person.
    ReasonPrice, ReasonComplaint, ReasonOutOfScope, ReasonExplicit, ReasonLowConfidence,
    ReasonPaymentReported, ReasonKeyword, ReasonTurnCap, ReasonRateLimit, ReasonBudget,
    ReasonBudgetContact, ReasonAbort, ReasonCheckFailed, ReasonError, ReasonLoadShed,
    ReasonDeadLettered, ReasonWaitExpired, ReasonInterrupted, ReasonMedia,
    // What an action did, and how it ended.
    ToolSendFlow, ToolSetField, ToolAddTag, ToolRemoveTag, ToolWriteNote, ToolScheduleNudge,
    ToolHandoff, StatusPerformed, StatusFailed, StatusDiscarded, StatusOverCap,
    StatusDeadLettered, StatusStaged, StatusRefused,
    // Why a conversation went back to the assistant.
    ReleaseExpired, ReleaseTagRemoved, ReleaseReleased,
    // `simulate`'s explanations.
    SimReadFrom, SimCannotRead, SimNoTurn, SimNoAction, SimHandedOver, SimQueued,
    SimFieldSet, SimFlowSent, SimTagAdded, SimTagRemoved, SimNoteWritten, SimNudgeScheduled,
    SimFailed, SimRefused, SimHandoffEnded, SimHandoffBeforeModel, SimHandoffSomeCheck, SimWhyKeyword,
    SimWhyTurnCap, SimWhyRate, SimWhyBudget, SimHeldSince, SimHoldEndsAt,
    SimHoldEndsTag, SimHoldEndsRelease, SimHoldEnds, SimHoldOr, SimHandBack,
    // The owner's console.
    ConBrand, ConSkip, ConNavLabel, ConNavRunning, ConNavTry, ConNavConversations, ConNavHeld,
    ConNavReport, ConNavLearning, ConLogout, ConNotFound, ConBackToConversations,
    ConRefusedTitle, ConLogInFirst, ConStaleForm, ConBackToConsole, ConStoreDown,
    ConTooManyAttempts,
    ConBadPageLink, ConNoConversation, ConNotTestContact, ConLoginTitle, ConLoginHeading,
    ConPassword, ConWrongPassword, ConRunningTitle, ConReload, ConReloaded, ConReloadRefused,
    ConReloadTimedOut, ConReloadStillReading, ConProcess, ConVersion, ConModel, ConStore,
    ConConfigInForce, ConFolder, ConFiles, ConOfferings, ConFlows, ConTags, ConPluginTools,
    ConOnDisk, ConDiskValid, ConDiskInvalid, ConReloadButton, ConReloadHint, ConIssueAt,
    ConHeldTitle, ConDoneReleased, ConDoneAlreadyReleased, ConDoneHeld, ConDoneAlreadyHeld,
    ConDoneHoldOff, ConHoldsNobody, ConNoneHeld, ConHoldEnds, ConConversation,
    ConTestContactTag, ConHeldTag, ConHeldSince, ConNoReasonRecorded, ConHandBack, ConHideTests,
    ConShowTests, ConNewest, ConNoConversations, ConRowLine, ConOlderConversations,
    ConTurnsNewestFirst, ConNoTurnsOnPage, ConOlderTurns, ConNewestTurns, ConContact,
    ConChannel, ConFirstContact, ConLastMessage, ConStage, ConOffering, ConMessagesCounted,
    ConTestContact, ConContinueTryout, ConHeldSinceDot, ConAssistantAnswers, ConHandToPerson,
    ConHoldHint, ConRoleContact, ConRoleAgent, ConUnbound, ConTextRemoved, ConMedia, ConOutcome,
    ConHandedToPerson, ConGuardrails, ConTokens, ConTokensLine, ConCost, ConTime,
    ConContactReads, ConSteps, ConPlaybook, ConToolsRead, ConToolAnswered, ConToolUnavailable, ConInMs,
    ConKnowledgeGiven, ConKnowledgeNone, ConNotRecorded, ConNoToolOffered, ConToolsNoneUsed, ConWhatItDid,
    ConCharacters, ConByServer, ConTryTitle, ConTryLive, ConTryMock, ConTryHint, ConTryOff,
    ConTryAnswered, ConTry429, ConTry400, ConTry401, ConTestContactHeading, ConNewTestContact,
    ConSeeConversation, ConStartNew, ConTheConversation, ConNoMessagesYet, ConMessageAsContact,
    ConSend, ConCallsTitle, ConNoCallsYet, ConTokenMasked, ConReportIntro, ConReportWeeks,
    ConShow, ConLearningTitle, ConLearningOff, ConLearningIntro, ConPendingTitle, ConNoPending,
    ConProposal, ConWhyProposed, ConCohort, ConRunOf, ConQuotes, ConQuoteGone, ConReasonLabel,
    ConEditLabel, ConApprove, ConReject, ConApproveHint, ConVersionsTitle, ConNoVersions,
    ConNoneActive, ConVersionActive, ConVersionWasActive, ConVersionNeverActive, ConVersionLine,
    ConActivate, ConRollBack, ConGateHint, ConDecisionsTitle, ConNoDecisions, ConDecApproved,
    ConDecRejected, ConDecRetired, ConDecActivated, ConDecRolledBack, ConDecBy, ConByConsole,
    ConByCli, ConDoneApproved, ConDoneUnchanged, ConDoneRejected, ConDoneActivated,
    ConDoneRolledBack, ConDoneAlreadyActive, ConNotDone, ConReasonNeeded,
}

/// `key`'s words in `language`.
pub fn text(language: Language, key: Key) -> &'static str {
    match language {
        Language::En => en::text(key),
        Language::Es => es::text(key),
        Language::Pt => pt::text(key),
    }
}

/// `key`'s template in `language` with each `{}` replaced by the next of `args`, in order.
pub fn fill(language: Language, key: Key, args: &[&str]) -> String {
    let template = text(language, key);
    let mut out = String::with_capacity(template.len() + 16);
    let mut args = args.iter();
    let mut rest = template;
    while let Some(at) = rest.find("{}") {
        out.push_str(&rest[..at]);
        out.push_str(args.next().copied().unwrap_or_default());
        rest = &rest[at + 2..];
    }
    out.push_str(rest);
    out
}

/// A figure: its plain name and the one sentence that explains it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measure {
    pub name: Key,
    pub means: Key,
}

impl Measure {
    pub fn name(self, language: Language) -> &'static str {
        text(language, self.name)
    }

    pub fn means(self, language: Language) -> &'static str {
        text(language, self.means)
    }
}

const fn measure(name: Key, means: Key) -> Measure {
    Measure { name, means }
}

pub const CONTACTS: Measure = measure(Key::Contacts, Key::ContactsMeans);
pub const ANSWERS: Measure = measure(Key::Answers, Key::AnswersMeans);
pub const LATE: Measure = measure(Key::Late, Key::LateMeans);
pub const MERGED: Measure = measure(Key::Merged, Key::MergedMeans);
pub const WAIT_TYPICAL: Measure = measure(Key::WaitTypical, Key::WaitTypicalMeans);
pub const WAIT_SLOWEST: Measure = measure(Key::WaitSlowest, Key::WaitSlowestMeans);
pub const LOOKUPS: Measure = measure(Key::Lookups, Key::LookupsMeans);
pub const TOKENS: Measure = measure(Key::Tokens, Key::TokensMeans);
pub const COST_PER_ANSWER: Measure = measure(Key::CostPerAnswer, Key::CostPerAnswerMeans);
pub const COST: Measure = measure(Key::Cost, Key::CostMeans);
pub const INTERESTED: Measure = measure(Key::Interested, Key::InterestedMeans);
pub const INTERESTED_SHARE: Measure = measure(Key::InterestedShare, Key::InterestedShareMeans);
pub const OFFERED: Measure = measure(Key::Offered, Key::OfferedMeans);
pub const PREPARED: Measure = measure(Key::Prepared, Key::PreparedMeans);
pub const LINK_SENT: Measure = measure(Key::LinkSent, Key::LinkSentMeans);
pub const LINK_RATE: Measure = measure(Key::LinkRate, Key::LinkRateMeans);
pub const LINK_RATE_INTERESTED: Measure =
    measure(Key::LinkRateInterested, Key::LinkRateInterestedMeans);
pub const LINK_ON_REQUEST: Measure = measure(Key::LinkOnRequest, Key::LinkOnRequestMeans);
pub const FOLLOW_UPS: Measure = measure(Key::FollowUps, Key::FollowUpsMeans);
pub const LAST_WORDS: Measure = measure(Key::LastWords, Key::LastWordsMeans);
pub const CONVERSATIONS: Measure = measure(Key::Conversations, Key::ConversationsMeans);
pub const SALES: Measure = measure(Key::Sales, Key::SalesMeans);
pub const COST_PER_CONVERSATION: Measure =
    measure(Key::CostPerConversation, Key::CostPerConversationMeans);
pub const COST_PER_SALE: Measure = measure(Key::CostPerSale, Key::CostPerSaleMeans);
pub const SPEND_PER_SALE: Measure = measure(Key::SpendPerSale, Key::SpendPerSaleMeans);
pub const COST_PER_HANDOFF: Measure = measure(Key::CostPerHandoff, Key::CostPerHandoffMeans);
pub const CACHED_SHARE: Measure = measure(Key::CachedShare, Key::CachedShareMeans);
pub const HANDOFFS: Measure = measure(Key::Handoffs, Key::HandoffsMeans);
pub const RELEASES: Measure = measure(Key::Releases, Key::ReleasesMeans);
pub const HOURS_WITH_PERSON: Measure = measure(Key::HoursWithPerson, Key::HoursWithPersonMeans);
pub const HELD: Measure = measure(Key::Held, Key::HeldMeans);

/// Every figure the report shows, in the order its page explains them.
pub const ALL_MEASURES: [Measure; 31] = [
    CONTACTS,
    ANSWERS,
    LATE,
    MERGED,
    WAIT_TYPICAL,
    WAIT_SLOWEST,
    LOOKUPS,
    TOKENS,
    COST_PER_ANSWER,
    COST,
    INTERESTED,
    INTERESTED_SHARE,
    OFFERED,
    PREPARED,
    LINK_SENT,
    LINK_RATE,
    LINK_RATE_INTERESTED,
    LINK_ON_REQUEST,
    FOLLOW_UPS,
    LAST_WORDS,
    CONVERSATIONS,
    SALES,
    COST_PER_CONVERSATION,
    COST_PER_SALE,
    SPEND_PER_SALE,
    COST_PER_HANDOFF,
    CACHED_SHARE,
    HANDOFFS,
    RELEASES,
    HOURS_WITH_PERSON,
    HELD,
];

/// The owner's words for one language: what the console holds to render a page
/// (`Words::new(lang).text(Key::…)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Words {
    pub language: Language,
}

impl Words {
    pub fn new(language: Language) -> Self {
        Self { language }
    }

    pub fn text(self, key: Key) -> &'static str {
        text(self.language, key)
    }

    pub fn fill(self, key: Key, args: &[&str]) -> String {
        fill(self.language, key, args)
    }
}

#[cfg(test)]
mod tests;
