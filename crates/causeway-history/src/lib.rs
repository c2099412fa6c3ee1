//! Histories of what clients saw, and the checker that judges whether a
//! history is transactionally causally consistent (TCC) — or serializable.
//!
//! * [`format`](mod@format): the JSON Lines history format, part of Causeway's public
//!   interface (`docs/HISTORY.md`).
//! * [`checker`]: [`check`] turns a [`History`] into a [`Report`] of TCC;
//!   [`check_for`] judges it against any [`Guarantee`], serializability
//!   included.
//! * [`synth`]: histories that are TCC by construction, for testing and
//!   timing the checker.

pub mod checker;
pub mod format;
pub mod synth;

pub use checker::{check, check_for, CheckStats, Forbids, Guarantee, Report, Violation, ViolationKind};
pub use format::{
    guarantee_word, CommitTs, FinalState, History, HistoryFile, HistoryMeta, Op, OpKind, ParseError, StampElem, Status,
    TxnRecord,
};
