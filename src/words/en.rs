//! English: the words every other language translates. `{}` marks a slot [`super::fill`] fills.

use super::Key::{self, *};

pub(super) fn text(key: Key) -> &'static str {
    match key {
        TitleOf => "{}: how the sales assistant did",
        Title => "How the sales assistant did",
        Generated => "generated {} · {} week(s), Monday to Sunday (UTC) · manychat-agent {}",
        NoTurns => "No conversations yet: nothing was recorded in the last {} week(s).",
        WeekOf => "Week of {}",
        NoTurnsThisWeek => "No conversations this week.",
        Week => "week",
        None_ => "none",
        AboveFlag => "above {}: too slow",
        AtAGlance => "At a glance: the week of {}",
        WhatEachMeans => "What each figure means",
        NotMeasuredYet => "Not measured yet",
        NotSetUp => "not set up",

        Contacts => "new contacts",
        ContactsMeans => "People who wrote to you for the first time that week.",
        Answers => "answered by the assistant",
        AnswersMeans => "Messages the AI assistant answered, or handed to a person itself.",
        Late => "answered a moment later",
        LateMeans => {
            "Of the assistant's answers, the share that took longer than ManyChat waits and \
             arrived a moment later as a separate message; above 20 % the assistant is too slow \
             for your contacts."
        }
        Merged => "messages sent in pieces",
        MergedMeans => {
            "Of the messages that started an answer, the share that gathered more messages sent \
             in quick succession into that one answer."
        }
        WaitTypical => "typical wait",
        WaitTypicalMeans => {
            "How long half of your contacts waited at most for an answer given at once."
        }
        WaitSlowest => "longest usual wait",
        WaitSlowestMeans => {
            "How long 95 in 100 of your contacts waited at most for an answer given at once."
        }
        Lookups => "contact details checked, per answer",
        LookupsMeans => {
            "How often the assistant checked a contact's details in ManyChat, per answer."
        }
        Tokens => "AI reading and writing, per answer",
        TokensMeans => {
            "How much text the AI model read and wrote per answer, in tokens (about four \
             letters each); more text costs more."
        }
        CostPerAnswer => "AI model cost per answer",
        CostPerAnswerMeans => "What the AI model charged per answer, in US dollars.",
        Cost => "AI model cost",
        CostMeans => "What the AI model charged that week, in US dollars.",
        Interested => "interested in buying",
        InterestedMeans => "People the assistant recorded as interested in buying.",
        InterestedShare => "share interested",
        InterestedShareMeans => "Of the new contacts, the share who were interested in buying.",
        Offered => "shown an offer",
        OfferedMeans => {
            "People the assistant showed one of your offerings to, or who went further."
        }
        Prepared => "ready to pay",
        PreparedMeans => {
            "People who had chosen an offering and were ready to pay, or went further."
        }
        LinkSent => "sent the payment link",
        LinkSentMeans => {
            "People who received your payment link (payments themselves are confirmed in \
             ManyChat)."
        }
        LinkRate => "got the link, of new contacts",
        LinkRateMeans => "Of the new contacts, the share who received the payment link.",
        LinkRateInterested => "got the link, of the interested",
        LinkRateInterestedMeans => {
            "Of the people interested in buying, the share who received the payment link."
        }
        LinkOnRequest => "links sent early on request",
        LinkOnRequestMeans => {
            "Of the payment links sent, the share sent before the contact had chosen, because \
             they asked for it; near 100 % the assistant may be saying contacts asked when they \
             did not."
        }
        FollowUps => "follow-ups answered",
        FollowUpsMeans => {
            "Of the follow-up messages the assistant sent, the share the contact answered within \
             a day."
        }
        LastWords => "last words answered",
        LastWordsMeans => {
            "Of the messages sent as a contact's 24-hour window was about to close, the share \
             the contact answered within a day."
        }
        Conversations => "conversations",
        ConversationsMeans => {
            "People who wrote that week, new or not: each one's messages are one conversation."
        }
        Sales => "sales (payment link sent)",
        SalesMeans => {
            "Conversations that reached your payment link that week (payments themselves are \
             confirmed in ManyChat)."
        }
        CostPerConversation => "AI model cost per conversation",
        CostPerConversationMeans => {
            "What the AI model charged for a contact's messages that week, on average, in US \
             dollars."
        }
        CostPerSale => "AI model cost per sale",
        CostPerSaleMeans => {
            "What a conversation that reached your payment link cost, on average, in US dollars."
        }
        SpendPerSale => "AI model spend per sale",
        SpendPerSaleMeans => {
            "The week's whole AI model cost divided by the conversations that reached your \
             payment link: what each sale cost, counting the conversations that bought nothing."
        }
        CostPerHandoff => "AI model cost per handoff",
        CostPerHandoffMeans => {
            "What a conversation handed to your team cost, on average, in US dollars."
        }
        CachedShare => "text read again",
        CachedShareMeans => {
            "Of the text the AI model read, the share it had read before and charged less for."
        }
        Handoffs => "handed to a person",
        HandoffsMeans => {
            "Times the assistant handed a contact to your team (it then stays out of the \
             conversation while a person has it)."
        }
        Releases => "handed back",
        ReleasesMeans => {
            "Times a conversation went back to the assistant: the hold ran out, your team \
             removed the handoff tag, or someone released the contact."
        }
        HoursWithPerson => "hours with a person",
        HoursWithPersonMeans => {
            "How long a person typically had a conversation before it went back to the \
             assistant (the median)."
        }
        Held => "messages left to your team",
        HeldMeans => "Messages the assistant did not answer because a person had the conversation.",

        SectionFunnel => "From first message to payment link",
        SectionWeeks => "How the assistant answered",
        SectionSales => "Sales",
        SectionCost => "What the AI model cost (US dollars)",
        SectionHandoffs => "When a person took over",
        SectionPerDay => "Day by day",
        HowMessagesEnded => "how messages ended",
        MessagesColumn => "messages",
        WhyHandedOver => "why contacts were handed to a person",
        TimesColumn => "times",
        WhatItDid => "what the assistant did in ManyChat",
        HowItWent => "how it went",
        PerDayLine => "{}: {} answered, {}",
        Day => "day",

        PlaybookTitle => "Got the payment link, per playbook version",
        PlaybookReading => {
            "A before/after reading, not a controlled experiment: each version met other \
             contacts at another time, so a difference may come from them and not from the \
             playbook."
        }
        PlaybookCounted => {
            "Each conversation counts under the playbook (the tactics you approved) the \
             assistant used when it first showed the contact an offer, once two weeks have \
             passed since the conversation's last message; until then it is still settling. \
             \"Got the link\" means the assistant sent your payment link: payments themselves \
             are confirmed in ManyChat and not counted here."
        }
        PlaybookVersion => "version",
        PlaybookFirstLive => "first live",
        PlaybookGotLink => "got the link",
        PlaybookShare => "share",
        PlaybookSettling => "still settling",
        PlaybookNone => "no playbook",
        PlaybookActive => "{} (active)",

        ChartFunnelTitle => "From first message to payment link, week of {}",
        ChartFunnelAlt => "Bar chart, week of {}: {}.",
        ChartWeeklyTitle => "Conversations and sales, week by week",
        ChartWeeklyAlt => "Bar chart, week by week: {}.",
        ChartHandoffsTitle => "Why contacts were handed to a person, all weeks shown",
        ChartHandoffsAlt => "Bar chart of the handoffs by reason: {}.",
        ChartCostTitle => "AI model cost per conversation, week by week (US dollars)",
        ChartCostAlt => "Line chart of the AI model's cost per conversation: {}.",
        ChartPlaybooksTitle => "Got the payment link, per playbook version (before and after)",
        ChartPlaybooksAlt => {
            "Bar chart of the share of conversations that got the payment link, per playbook \
             version: {}."
        }
        ChartEmpty => "Nothing to draw yet: the chart fills in as contacts write.",
        ChartNoData => "no data",

        PendingSteps => "AI model steps per answer",
        PendingStepsWhy => "each answer's steps are written to the service's log, not stored",
        PendingSales => "sales figures",
        PendingSalesWhy => {
            "the business's files (CONFIG_DIR) did not load, so its sales setup is unknown"
        }
        PendingIntentWhy => "tools.json has no field for a contact's interest in buying",
        PendingFunnelWhy => "tools.json has no field for how far a sale has come",
        PendingCostPerSaleWhy => {
            "tools.json has no field for how far a sale has come, so no conversation reaches \
             the payment link"
        }
        PendingLinkWhy => "tools.json has no payment link flow",
        PendingPlaybooksWhy => {
            "tools.json needs a field for how far a sale has come and a payment link flow"
        }

        OutcomeAnsweredInline => "answered at once",
        OutcomeDeferred => "answered a moment later",
        OutcomeScripted => "answered with your fixed opening reply",
        OutcomeEscalatedModel => "handed to a person by the assistant",
        OutcomeEscalatedPrecheck => {
            "handed to a person before the assistant read it (a keyword, a limit or the budget)"
        }
        OutcomeFailedValidation => "handed to a person: the assistant's reply failed a check",
        OutcomeError => "handed to a person: the assistant could not answer",
        OutcomeNudge => "follow-up sent",
        OutcomeWindowClosing => "last word before the window closed",
        OutcomeMediaFallback => "a voice note or file that could not be read",
        OutcomeHeld => "left to your team: a person had the conversation",
        OutcomeContactBusy => "recorded, not answered: the contact sent many messages at once",

        ReasonPrice => "wanted to negotiate the price",
        ReasonComplaint => "made a complaint",
        ReasonOutOfScope => "asked what your catalog does not answer",
        ReasonExplicit => "asked for a person",
        ReasonLowConfidence => "the assistant was unsure",
        ReasonPaymentReported => "said they had paid (a person confirms)",
        ReasonKeyword => "wrote one of your handoff keywords",
        ReasonTurnCap => "reached the conversation's message limit",
        ReasonRateLimit => "wrote too many messages in an hour",
        ReasonBudget => "today's AI budget was spent",
        ReasonBudgetContact => "the contact's AI budget for today was spent",
        ReasonAbort => "the AI model took too long",
        ReasonCheckFailed => "the assistant's reply failed a check",
        ReasonError => "the assistant could not answer",
        ReasonLoadShed => "too many conversations at once",
        ReasonDeadLettered => "a reply ManyChat never delivered",
        ReasonWaitExpired => "waited too long behind their own earlier messages",
        ReasonInterrupted => "the service stopped before answering",
        ReasonMedia => "sent a voice note or file the assistant could not read",

        ToolSendFlow => "flow sent",
        ToolSetField => "contact field set",
        ToolAddTag => "tag added",
        ToolRemoveTag => "tag removed",
        ToolWriteNote => "note for your team",
        ToolScheduleNudge => "follow-up scheduled",
        ToolHandoff => "handed to a person",
        StatusPerformed => "done",
        StatusFailed => "failed",
        StatusDiscarded => "not done: the contact was handed to a person",
        StatusOverCap => "not done: over the limit per answer",
        StatusDeadLettered => "never delivered",
        StatusStaged => "still to be done",
        StatusRefused => "refused",

        ReleaseExpired => "the hold ran out",
        ReleaseTagRemoved => "your team removed the handoff tag",
        ReleaseReleased => "someone released the contact",

        SimReadFrom => "(what the agent did, read from {}:)",
        SimCannotRead => {
            "(what the agent did is in the service's database, and this command cannot read {}: \
             {}. Run simulate beside the service with its DATABASE_URL to see it.)"
        }
        SimNoTurn => "no turn recorded for this contact yet",
        SimNoAction => "no action in ManyChat",
        SimHandedOver => "handed to a person, reason stored: {} ({})",
        SimQueued => "a reply will follow through the outbox (ManyChat's reply flow), due {}",
        SimFieldSet => "field {} set to {}",
        SimFlowSent => "flow {} sent",
        SimTagAdded => "tag {} added",
        SimTagRemoved => "tag {} removed",
        SimNoteWritten => "note {} written ({} characters)",
        SimNudgeScheduled => "a follow-up scheduled",
        SimFailed => "failed: {}",
        SimRefused => "refused: {}",
        SimHandoffEnded => {
            "handed to a person: the turn ended {} (see the service's log line for this conversation, {})"
        }
        SimHandoffBeforeModel => "handed to a person before the model ran: {}",
        SimHandoffSomeCheck => "a keyword, the turn cap, the hourly rate or the daily budget",
        SimWhyKeyword => "the message holds one of rules.json's escalationKeywords",
        SimWhyTurnCap => {
            "the turn cap, more than {} messages without a {}-hour pause (rules.json maxTurnsPerConversation); write as a new contact (simulate without --subscriber), or reset the demo's data (README, The two commands)"
        }
        SimWhyRate => {
            "the hourly rate, {} messages this hour (rules.json rateLimit.turnsPerSubscriberPerHour is {})"
        }
        SimWhyBudget => "today's token or cost budget is spent (rules.json budget)",
        SimHeldSince => {
            "(held for a person: the contact was handed to a person at {}, so the assistant did not answer and sent nothing; the message is recorded)"
        }
        SimHoldEndsAt => "at {}",
        SimHoldEndsTag => "when the tag {} is removed from the contact in ManyChat",
        SimHoldEndsRelease => "when someone releases it",
        SimHoldEnds => "(the hold ends {})",
        SimHoldOr => "or",
        SimHandBack => {
            "(to hand the contact back to the assistant now: manychat-agent release {}, or POST {} with {\"subscriber_id\": \"{}\"} and the shared secret)"
        }

        ConBrand => "manychat-agent console",
        ConSkip => "Skip to content",
        ConNavLabel => "Console",
        ConNavRunning => "Running",
        ConNavTry => "Try it",
        ConNavConversations => "Conversations",
        ConNavHeld => "Held",
        ConNavReport => "Report",
        ConNavLearning => "Learning",
        ConLogout => "Log out",
        ConNotFound => "Not found",
        ConBackToConversations => "Back to the conversations",
        ConRefusedTitle => "Not done",
        ConLogInFirst => "Your session has ended: log in, then try again.",
        ConStaleForm => {
            "This form is out of date: nothing was done. Open the page again and retry."
        }
        ConBackToConsole => "Back to the console",
        ConStoreDown => "The database did not answer: nothing was done. Try again in a moment.",
        ConTooManyAttempts => "Too many login attempts: wait a minute, then try again.",
        ConBadPageLink => "That page link is not valid.",
        ConNoConversation => "No conversation has that id.",
        ConNotTestContact => {
            "That is not a test contact: the try-out writes only as a test contact."
        }
        ConLoginTitle => "Log in",
        ConLoginHeading => "Owner's console",
        ConPassword => "Password",
        ConWrongPassword => "That password is not right.",
        ConRunningTitle => "What is running",
        ConReload => "Reload",
        ConReloaded => "Reloaded: the files on disk are now in force.",
        ConReloadRefused => "Refused: the config in force stays. What the files on disk break:",
        ConReloadTimedOut => {
            "Not reloaded: reading the config folder took too long; the config in force \
             stays."
        }
        ConReloadStillReading => {
            "Not reloaded: an earlier reload is still reading the folder; the config in force \
             stays."
        }
        ConProcess => "Process",
        ConVersion => "Version",
        ConModel => "Model",
        ConStore => "Store",
        ConConfigInForce => "Config in force",
        ConFolder => "Folder",
        ConFiles => "Files",
        ConOfferings => "Offerings",
        ConFlows => "Flows",
        ConTags => "Tags",
        ConPluginTools => "Plugin tools",
        ConOnDisk => "Files on disk now",
        ConDiskValid => "Valid: a reload would apply them.",
        ConDiskInvalid => "Invalid: a reload would be refused.",
        ConReloadButton => "Reload the config",
        ConReloadHint => {
            "Does what SIGHUP does: the files are checked whole, and a refused set changes \
             nothing."
        }
        ConIssueAt => "at",
        ConHeldTitle => "Held for a person",
        ConDoneReleased => "Handed back: the assistant answers this contact's next message.",
        ConDoneAlreadyReleased => {
            "Nothing to do: this contact was not held (released already, by you, another \
             owner, or the end of its hold)."
        }
        ConDoneHeld => {
            "Held for a person: the assistant stays out of this conversation until it is \
             handed back."
        }
        ConDoneAlreadyHeld => "Nothing to do: this contact is held already.",
        ConDoneHoldOff => "Not held: the business's rules hold nobody (handoff.holdHours is 0).",
        ConHoldsNobody => "The business's rules hold nobody (handoff.holdHours is 0).",
        ConNoneHeld => "Nobody is held now: the assistant answers every contact.",
        ConHoldEnds => {
            "A hold ends by itself {} hours after the handoff, when the handoff tag is \
             removed in ManyChat, or here."
        }
        ConConversation => "Conversation",
        ConTestContactTag => "test contact",
        ConHeldTag => "held for a person",
        ConHeldSince => "Held since {} · why: {}",
        ConNoReasonRecorded => {
            "no turn recorded a reason (held from the console, or handed over while the \
             database did not answer)"
        }
        ConHandBack => "Hand back to the assistant",
        ConHideTests => "Hide test contacts",
        ConShowTests => "Show test contacts too",
        ConNewest => "Newest",
        ConNoConversations => "No conversations here yet.",
        ConRowLine => "Last message {} · stage {} · offering {}",
        ConOlderConversations => "Older conversations",
        ConTurnsNewestFirst => "Turns, newest first",
        ConNoTurnsOnPage => "No turns on this page.",
        ConOlderTurns => "Older turns",
        ConNewestTurns => "Newest turns",
        ConContact => "Contact",
        ConChannel => "Channel",
        ConFirstContact => "First contact",
        ConLastMessage => "Last message",
        ConStage => "Stage",
        ConOffering => "Offering",
        ConMessagesCounted => "Messages counted",
        ConTestContact => "Test contact",
        ConContinueTryout => "Continue the try-out",
        ConHeldSinceDot => "Held for a person since {}.",
        ConAssistantAnswers => "The assistant answers this contact.",
        ConHandToPerson => "Hand to a person",
        ConHoldHint => {
            "Does what an escalation does: the contact is held and the business's handoff \
             (its tag, its flow) goes to ManyChat."
        }
        ConRoleContact => "Contact",
        ConRoleAgent => "Assistant",
        ConUnbound => "unbound (no valid contact token)",
        ConTextRemoved => "(text removed after the retention period, or none)",
        ConMedia => "Media: {}",
        ConOutcome => "Outcome",
        ConHandedToPerson => "Handed to a person",
        ConGuardrails => "Guardrails",
        ConTokens => "Tokens",
        ConTokensLine => "{} in ({} cached, {} written to the cache), {} out",
        ConCost => "Cost",
        ConTime => "Time",
        ConContactReads => "Contact reads",
        ConSteps => "Steps (model calls)",
        ConPlaybook => "Playbook",
        ConToolsRead => "The business's tools read",
        ConToolAnswered => "answered",
        ConToolUnavailable => "unavailable",
        ConInMs => "in {}",
        ConKnowledgeGiven => "Knowledge given",
        ConKnowledgeNone => "nothing matched: none given",
        ConNotRecorded => "not recorded on this turn",
        ConNoToolOffered => "No tool was offered.",
        ConToolsNoneUsed => "Tools offered; none used.",
        ConWhatItDid => "What it did",
        ConCharacters => "({} characters)",
        ConByServer => "by the server: {}",
        ConTryTitle => "Try it",
        ConTryLive => {
            "This uses the live configuration and model ({}): each message costs real tokens."
        }
        ConTryMock => "The model in force ({}) calls no provider: nothing is billed.",
        ConTryHint => {
            "You write as a test contact. Its ManyChat calls are recorded below and never \
             sent; test contacts are left out of the report."
        }
        ConTryOff => {
            "The try-out is off: MANYCHAT_SHARED_SECRET is not set, so the route would refuse \
             it."
        }
        ConTryAnswered => "The route answered HTTP {}",
        ConTry429 => {
            "this contact sent too many messages in its window (the contact's rate limit)."
        }
        ConTry400 => "the message was refused (too long, or not valid).",
        ConTry401 => "the shared secret was refused.",
        ConTestContactHeading => "Test contact {}",
        ConNewTestContact => "A new test contact",
        ConSeeConversation => "See this conversation",
        ConStartNew => "Start a new test contact",
        ConTheConversation => "The conversation",
        ConNoMessagesYet => "No messages yet: write the first one.",
        ConMessageAsContact => "Message, as the contact",
        ConSend => "Send",
        ConCallsTitle => "ManyChat calls (recorded, not sent)",
        ConNoCallsYet => {
            "None yet. Calls made after the reply (its actions, a deferred reply) appear when \
             you reload."
        }
        ConTokenMasked => "[token, {} characters]",
        ConReportIntro => {
            "The weeks Monday to Sunday (UTC), as the report command shows them; test \
             contacts are left out."
        }
        ConReportWeeks => "Weeks shown",
        ConShow => "Show",
        ConLearningTitle => "Learning from what sold",
        ConLearningOff => {
            "Learning is off for this business. To turn it on, add a learning section to \
             rules.json (convertedTag, maxRunCostUsd) and set INSIGHT_MODEL; docs/LEARNING.md \
             says how."
        }
        ConLearningIntro => {
            "Once a week an analyst compares the conversations that paid with those that did \
             not and proposes tactics. Nothing reaches a customer until you approve it and \
             the new version passes the eval gate."
        }
        ConPendingTitle => "Waiting for your review",
        ConNoPending => "No proposal is waiting: the next weekly run may bring some.",
        ConProposal => "Proposal {}",
        ConWhyProposed => "Why the analyst proposes it",
        ConCohort => "Seen in {} conversations that paid and {} that did not.",
        ConRunOf => "From the run of {}, which compared {} contacts who paid with {} who did not.",
        ConQuotes => "The turns it cites, cleaned of personal data as the analyst read them",
        ConQuoteGone => "turn {}: no longer stored",
        ConReasonLabel => "Your reason (recorded with the decision)",
        ConEditLabel => "The tactic as it should read (leave empty to approve it as written)",
        ConApprove => "Approve",
        ConReject => "Reject",
        ConApproveHint => {
            "Approving makes a new playbook version; it goes live only once it passes the \
             eval gate below."
        }
        ConVersionsTitle => "Playbook versions",
        ConNoVersions => "No version yet.",
        ConNoneActive => "No version is live: the assistant uses no playbook.",
        ConVersionActive => "live now",
        ConVersionWasActive => "was live before",
        ConVersionNeverActive => "never live",
        ConVersionLine => "Version {} · {} tactic(s) · {}",
        ConActivate => "Take live (eval gate)",
        ConRollBack => "Roll back to this version",
        ConGateHint => {
            "Taking a version live needs an eval record of it against the golden suite ({}), \
             made with a real model, that fails no case the live version passes: the same \
             gate as the insights activate command. A version that was live before goes back \
             without the gate: the rollback."
        }
        ConDecisionsTitle => "Decisions, newest first",
        ConNoDecisions => "No decision yet.",
        ConDecApproved => "approved proposal {}",
        ConDecRejected => "rejected proposal {}",
        ConDecRetired => "retired tactic {}",
        ConDecActivated => "took version {} live",
        ConDecRolledBack => "rolled back to version {}",
        ConDecBy => "{} · {} · by {}",
        ConByConsole => "the console",
        ConByCli => "the command line",
        ConDoneApproved => {
            "Approved: playbook version {} was made. It is not live yet: evaluate it, then \
             take it live below."
        }
        ConDoneUnchanged => "Recorded: the playbook is unchanged.",
        ConDoneRejected => "Rejected: the proposal and your reason are recorded.",
        ConDoneActivated => "Version {} is live: the assistant uses it within a minute.",
        ConDoneRolledBack => "Rolled back to version {}: the assistant uses it within a minute.",
        ConDoneAlreadyActive => "Version {} is live already.",
        ConNotDone => "Not done, nothing changed:",
        ConReasonNeeded => {
            "Say why you reject it: the reason is recorded and helps the next review."
        }
    }
}
