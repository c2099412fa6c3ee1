//! Compact builders for hand-made histories, and the assertion every
//! checker test makes: exactly these kinds of violation, no more, no fewer.
#![allow(dead_code)]

use causeway_history::{
    check, check_for, CommitTs, FinalState, Guarantee, History, Op, Report, StampElem, Status, TxnRecord, ViolationKind,
};

pub fn r(key: &str, value: &str) -> Op {
    Op::read(key, Some(value.to_string()))
}

/// A read that found no version.
pub fn r0(key: &str) -> Op {
    Op::read(key, None)
}

pub fn w(key: &str, value: &str) -> Op {
    Op::write(key, value)
}

/// A delete of `key`.
pub fn d(key: &str) -> Op {
    Op::delete(key)
}

pub fn ts(n: u64) -> Option<CommitTs> {
    Some(CommitTs(vec![StampElem::Int(n)]))
}

/// A committed transaction; `commit_ts` is a one-element stamp.
pub fn txn(txid: &str, session: &str, seq: u64, ops: &[Op], commit_ts: Option<u64>) -> TxnRecord {
    TxnRecord {
        txid: txid.to_string(),
        session: session.to_string(),
        seq,
        dc: 0,
        status: Status::Committed,
        ops: ops.to_vec(),
        commit_ts: commit_ts.and_then(ts),
        start_us: seq * 10,
        end_us: seq * 10 + 5,
    }
}

pub fn aborted(txid: &str, session: &str, seq: u64, ops: &[Op]) -> TxnRecord {
    TxnRecord { status: Status::Aborted, commit_ts: None, ..txn(txid, session, seq, ops, None) }
}

/// A transaction whose client does not know whether it committed: no
/// commit_ts.
pub fn unknown(txid: &str, session: &str, seq: u64, ops: &[Op]) -> TxnRecord {
    TxnRecord { status: Status::Unknown, commit_ts: None, ..txn(txid, session, seq, ops, None) }
}

pub fn history(txns: Vec<TxnRecord>) -> History {
    History { txns, finals: Vec::new() }
}

pub fn final_state(dc: u16, state: &[(&str, &str)]) -> FinalState {
    FinalState { dc, state: state.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), partial: false }
}

/// Checks `h` and asserts that the set of kinds reported is exactly
/// `expected`; prints the whole report when it is not.
pub fn check_kinds(h: &History, expected: &[ViolationKind]) -> Report {
    assert_kinds(check(h), expected)
}

/// [`check_kinds`] against `guarantee`'s model.
pub fn check_kinds_for(h: &History, guarantee: Guarantee, expected: &[ViolationKind]) -> Report {
    assert_kinds(check_for(h, guarantee), expected)
}

fn assert_kinds(report: Report, expected: &[ViolationKind]) -> Report {
    let mut want = expected.to_vec();
    want.sort();
    want.dedup();
    assert_eq!(report.kinds(), want, "unexpected verdict:\n{report}");
    report
}
