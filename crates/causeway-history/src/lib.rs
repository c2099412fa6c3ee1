//! Histories of what clients saw, and the checker that judges whether a
//! history is transactionally causally consistent (TCC).

pub mod format;

pub use format::{CommitTs, FinalState, History, Op, OpKind, ParseError, StampElem, Status, TxnRecord};
