//! What the members of a group say to each other (Raft §5, with the
//! pre-vote and leadership transfer of Ongaro's thesis, §9.6 and §3.10).

use super::log::Entry;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RaftMsg<E> {
    /// Would the receiver vote for the sender at `term` (one above the
    /// sender's)? Nobody's term moves: a member cut off from its group asks
    /// this first, so that coming back it does not depose a working leader.
    PreVote {
        term: u64,
        last_index: u64,
        last_term: u64,
    },
    /// The answer: `term` is the one asked about when granted, the voter's
    /// own (higher) term when it refuses for that reason.
    PreVoteResp {
        term: u64,
        granted: bool,
    },
    /// A vote for the sender at `term`. `transfer`: the leader asked for
    /// this election (`TimeoutNow`), so a voter that hears from that leader
    /// still votes.
    Vote {
        term: u64,
        last_index: u64,
        last_term: u64,
        transfer: bool,
    },
    VoteResp {
        term: u64,
        granted: bool,
    },
    /// The leader's entries after `prev_index` (whose term is `prev_term`),
    /// and how far it knows the log is committed. `heartbeat`: sent because
    /// the interval came round, not for new entries or a new commit index.
    Append {
        term: u64,
        prev_index: u64,
        prev_term: u64,
        entries: Vec<Entry<E>>,
        commit: u64,
        heartbeat: bool,
    },
    /// `success`: the sender's log matches the leader's up to `index`, and
    /// holds it durably. Otherwise `index` is where the leader should try
    /// next (the sender's log is shorter, or disagrees from there).
    AppendResp {
        term: u64,
        success: bool,
        index: u64,
    },
    /// The leader asks the receiver, whose log is as long as its own, to
    /// stand for election now (handing leadership to the preferred member).
    TimeoutNow {
        term: u64,
    },
    /// To itself: the records that hold the entries up to `index` (whose
    /// term is `term`) are durable.
    Persisted {
        index: u64,
        term: u64,
    },
}

impl<E> RaftMsg<E> {
    /// The sender's term (`Persisted` names an entry's, not a sender's).
    pub fn term(&self) -> u64 {
        match *self {
            RaftMsg::PreVote { term, .. }
            | RaftMsg::PreVoteResp { term, .. }
            | RaftMsg::Vote { term, .. }
            | RaftMsg::VoteResp { term, .. }
            | RaftMsg::Append { term, .. }
            | RaftMsg::AppendResp { term, .. }
            | RaftMsg::TimeoutNow { term }
            | RaftMsg::Persisted { term, .. } => term,
        }
    }

    /// A heartbeat, or an answer to one: traffic that never stops while the
    /// group lives, which drivers do not wait for.
    pub fn is_background(&self) -> bool {
        match self {
            RaftMsg::Append { entries, heartbeat, .. } => *heartbeat && entries.is_empty(),
            RaftMsg::AppendResp { .. } | RaftMsg::Persisted { .. } => true,
            _ => false,
        }
    }
}
