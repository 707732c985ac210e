//! What a turn reads before it decides (SYSTEM 4, 018, 019, 037), in one round: the
//! contact's earlier message times (the turn cap), history (a bound turn only, 019), today's
//! spend, the replies already queued for the contact, the contact's count in this hour's window
//! and the sales record (a bound turn only: an unbound one knows only its own message, 019);
//! then the contact's sales position, from the server's own records.
//!
//! Invariant: the queued replies are counted after the turn cancelled the contact's nudge
//! (025), so a follow-up queued in between is counted, and never overtaken (037).

use chrono::{DateTime, Utc};

use super::replied::Replied;
use super::{Inbound, TurnEngine, gates};
use crate::agent::{self, HistoryTurn};
use crate::config::TenantConfig;
use crate::fence::Fence;
use crate::sales;
use crate::store::{
    Conversation, During, Role, SalesRecord, Store, StoreError, TurnContext, TurnContextQuery,
};

/// How many earlier turns the model sees (018).
pub const HISTORY_TURNS: i64 = 10;

/// What a turn at `now` reads before its checks: the cap's and history's reads only when it is
/// bound (019), today's spend, and the contact's count in this hour's window.
pub(super) fn context_query(
    config: &TenantConfig,
    bound: bool,
    now: DateTime<Utc>,
) -> TurnContextQuery {
    let history_since = now - chrono::Duration::days(i64::from(config.rules.history_days));
    TurnContextQuery {
        cap_limit: bound.then(|| i64::from(config.rules.max_turns_per_conversation) + 1),
        history: bound.then_some((history_since, HISTORY_TURNS)),
        day: now.date_naive(),
        rate_window: Some(gates::hour_start(now)),
        // The contact's sales record comes with the turn's one read; an unbound turn reads none
        // (019: it knows only its own message).
        sales: bound && sales::reads_records(config.tools.as_ref()),
    }
}

/// The model's view of stored history turns (018): text, role, and what an agent turn performed.
pub(crate) fn history_turns(turns: Vec<crate::store::Turn>) -> Vec<HistoryTurn> {
    turns
        .into_iter()
        .map(|turn| HistoryTurn {
            actions_performed: match (&turn.role, &turn.actions) {
                (Role::Agent, Some(actions)) => agent::history_actions_note(actions),
                _ => Vec::new(),
            },
            role: turn.role,
            text: turn.text,
        })
        .collect()
}

/// C4: the conversation's fence for a turn ([`Fence::for_conversation`]): its stored nonce, or
/// a new one stored on the row when it had none or `texts` (the contact's text, the history's)
/// hold it. A failed write is logged and the turn goes on with the new nonce (still a safe
/// fence; the next turn tries again).
pub(crate) async fn conversation_fence<'a>(
    store: &dyn Store,
    conversation: &Conversation,
    texts: impl IntoIterator<Item = &'a str> + Clone,
) -> Fence {
    let (fence, new) = Fence::for_conversation(conversation.fence_nonce.as_deref(), texts);
    if new && let Err(error) = store.set_fence_nonce(conversation.id, fence.nonce()).await {
        crate::store_failure!(
            store,
            error,
            conversation = %conversation.id,
            "the conversation's fence could not be stored; the next turn fences anew"
        );
    }
    fence
}

impl TurnEngine {
    /// The turn's one round of reads: `read` when the turn read it with its conversation (its
    /// queued replies counted again if the nudge cancel may have raced a follow-up), otherwise
    /// read now.
    pub(super) async fn read_context(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        bound: bool,
        now: DateTime<Utc>,
        read: Option<TurnContext>,
        replied: Replied,
    ) -> Result<TurnContext, StoreError> {
        let store = self.inner.store.as_ref();
        match read {
            Some(mut context) => {
                let counted = Some(context.queued_replies);
                context.queued_replies =
                    self.queued_replies(conversation, counted, replied).await?;
                Ok(context)
            }
            None => store
                .turn_context(conversation, context_query(config, bound, now))
                .await
                .during("reading the contact's history"),
        }
    }

    /// 037: the replies already queued for the contact, counted after the nudge cancel
    /// (`replied`): `counted` is the count the turn read with its conversation (taken again
    /// when the cancel may have raced a follow-up), `None` when it has read none yet.
    pub(super) async fn queued_replies(
        &self,
        conversation: &Conversation,
        counted: Option<i64>,
        replied: Replied,
    ) -> Result<i64, StoreError> {
        let store = self.inner.store.as_ref();
        match counted {
            Some(queued) => replied.queued_replies(store, conversation.id, queued).await,
            None => store.pending_replies(conversation.id).await,
        }
    }

    /// The contact's sales position the turn's tools decide against (034, 023, 028), from the
    /// sales record the turn read (`record`).
    pub(super) async fn sales_position(
        &self,
        config: &TenantConfig,
        conversation: &Conversation,
        inbound: &Inbound,
        bound: bool,
        now: DateTime<Utc>,
        record: Option<SalesRecord>,
    ) -> Result<sales::Known, StoreError> {
        let request = sales::known::Request {
            offering: inbound.offering.as_deref(),
            bound,
            now,
        };
        sales::known::read(
            self.inner.store.as_ref(),
            config,
            conversation,
            record,
            request,
        )
        .await
    }
}
