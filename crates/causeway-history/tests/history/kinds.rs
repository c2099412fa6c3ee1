//! One small history per kind of violation, each rejected with exactly that
//! kind, and valid histories that must be accepted. Values are named
//! `writer:key` so each read shows whom it read from.

use crate::common;

use causeway_history::ViolationKind::{self, *};
use causeway_history::{check, CommitTs, FinalState, History, StampElem, Status};
use common::*;

// ---------------------------------------------------------------- valid --

#[test]
fn an_empty_history_is_tcc() {
    let report = check_kinds(&History::default(), &[]);
    assert!(report.is_tcc());
    assert_eq!(report.stats.txns, 0);
}

#[test]
fn concurrent_conflicting_writes_are_read_in_lww_order() {
    let mut h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("b", "s2", 1, &[w("x", "b:x")], Some(2)),
        // c saw only a, d saw b: both fine, a and b are concurrent.
        txn("c", "s3", 1, &[r("x", "a:x")], None),
        txn("d", "s4", 1, &[r("x", "b:x")], None),
        // Moving from a to the newer b along a session is fine too.
        txn("c2", "s3", 2, &[r("x", "b:x")], None),
        // e saw both (a through s1, b by reading): it must read b, and does.
        txn("e", "s1", 2, &[r("x", "b:x"), w("y", "e:y")], Some(3)),
    ]);
    h.finals = vec![final_state(0, &[("x", "b:x"), ("y", "e:y")]), final_state(1, &[("x", "b:x"), ("y", "e:y")])];
    let report = check_kinds(&h, &[]);
    assert_eq!(report.stats.committed, 6);
    assert_eq!(report.stats.sessions, 4);
    assert_eq!(report.stats.reads, 4);
    assert_eq!(report.stats.writes, 3);
}

#[test]
fn read_only_transactions_carry_causality_without_commit_ts() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("ro1", "s2", 1, &[r("x", "a:x"), r0("y")], None),
        // A read-only transaction may carry a commit_ts; it is ignored.
        txn("ro2", "s2", 2, &[r("x", "a:x")], Some(1)),
        txn("b", "s2", 3, &[r("x", "a:x"), w("x", "b:x")], Some(2)),
    ]);
    check_kinds(&h, &[]);
}

#[test]
fn null_reads_without_a_causal_writer_are_fine() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(5)),
        txn("b", "s2", 1, &[r0("x"), r0("nobody-wrote-this")], None),
        txn("c", "s2", 2, &[r0("x"), w("z", "c:z")], Some(6)),
    ]);
    check_kinds(&h, &[]);
}

#[test]
fn aborted_transactions_nobody_read_are_fine() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        aborted("ab", "s2", 1, &[r("x", "a:x"), w("x", "ab:x")]),
        txn("b", "s2", 2, &[r("x", "a:x")], None),
        aborted("ab2", "s1", 2, &[w("y", "ab2:y")]),
        txn("c", "s1", 3, &[r0("y"), r("x", "a:x")], None),
    ]);
    let report = check_kinds(&h, &[]);
    assert_eq!(report.stats.aborted, 2);
}

#[test]
fn reads_of_own_writes_are_fine() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn(
            "t",
            "s2",
            1,
            &[
                r("x", "a:x"),
                w("x", "t:x#1"),
                r("x", "t:x#1"),
                w("x", "t:x"),
                r("x", "t:x"),
                r("x", "t:x"),
                w("y", "t:y"),
                r("y", "t:y"),
            ],
            Some(2),
        ),
        txn("u", "s1", 2, &[r("x", "t:x"), r("y", "t:y")], None),
    ]);
    check_kinds(&h, &[]);
}

#[test]
fn a_partial_dc_may_leave_keys_out() {
    let mut h = history(vec![txn("a", "s1", 1, &[w("x", "a:x"), w("y", "a:y")], Some(1))]);
    h.finals = vec![
        final_state(0, &[("x", "a:x"), ("y", "a:y")]),
        FinalState { partial: true, ..final_state(1, &[("y", "a:y")]) },
    ];
    check_kinds(&h, &[]);
}

#[test]
fn the_history_format_feeds_the_checker() {
    let text = r#"{"txid":"a","session":"s1","seq":1,"dc":0,"status":"committed","ops":[{"op":"w","key":"x","value":"a:x"}],"commit_ts":[10,0,"a"],"start_us":0,"end_us":1}
{"txid":"b","session":"s2","seq":1,"dc":1,"status":"committed","ops":[{"op":"r","key":"x","value":"a:x"},{"op":"w","key":"x","value":"b:x"}],"commit_ts":[11,1,"b"],"start_us":2,"end_us":3}
{"txid":"c","session":"s2","seq":2,"dc":1,"status":"committed","ops":[{"op":"r","key":"x","value":"a:x"}],"start_us":4,"end_us":5}
{"type":"final","dc":0,"state":{"x":"b:x"}}
{"type":"final","dc":1,"state":{"x":"b:x"}}
"#;
    let h = History::read_jsonl(text.as_bytes()).unwrap();
    // c follows b in its session, so it must see b's write of x.
    let report = check_kinds(&h, &[CausalViolation]);
    let v = &report.violations[0];
    assert_eq!((v.txid.as_deref(), v.key.as_deref()), (Some("c"), Some("x")));
    assert!(v.message.contains("b -so-> c"), "{}", v.message);
}

// -------------------------------------------------------- single reads --

#[test]
fn a_value_nobody_wrote_is_unknown() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("b", "s2", 1, &[r("x", "nobody:x")], None),
        // The value exists, but was written to another key.
        txn("c", "s3", 1, &[r("y", "a:x")], None),
    ]);
    let report = check_kinds(&h, &[UnknownValue]);
    assert_eq!(report.count(UnknownValue), 2);
}

#[test]
fn a_value_of_an_aborted_transaction_is_an_aborted_read() {
    let h = history(vec![aborted("a", "s1", 1, &[w("x", "a:x")]), txn("b", "s2", 1, &[r("x", "a:x")], None)]);
    let report = check_kinds(&h, &[AbortedRead]);
    assert_eq!(report.violations[0].txid.as_deref(), Some("b"));
}

#[test]
fn a_value_its_writer_overwrote_is_an_intermediate_read() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x#1"), w("x", "a:x")], Some(1)),
        txn("b", "s2", 1, &[r("x", "a:x#1")], None),
    ]);
    check_kinds(&h, &[IntermediateRead]);
}

#[test]
fn reading_your_own_write_before_making_it_is_a_future_read() {
    let h = history(vec![txn("t", "s1", 1, &[r("x", "t:x"), w("x", "t:x")], Some(1))]);
    check_kinds(&h, &[FutureRead]);
}

/// Found by review: an aborted transaction is a sink of hb, so reading
/// from a later transaction of its own session closes no cycle — but a
/// session runs one transaction at a time, so it is a read from the future.
#[test]
fn an_aborted_transaction_reading_a_later_one_of_its_session_is_a_future_read() {
    let h = history(vec![aborted("ab", "s1", 1, &[r("x", "b:x")]), txn("b", "s1", 2, &[w("x", "b:x")], Some(1))]);
    check_kinds(&h, &[FutureRead]);
}

/// Found by review: what such an aborted reader reaches through its
/// session's future is still its causal past, and its other reads are
/// judged against it.
#[test]
fn an_aborted_reader_is_judged_against_everything_it_reaches() {
    let h = history(vec![
        aborted("ab", "s1", 1, &[r("x", "b:x"), r("y", "a:y")]),
        txn("a", "s2", 1, &[w("y", "a:y")], Some(1)),
        txn("b", "s1", 2, &[w("x", "b:x"), w("y", "b:y")], Some(2)),
    ]);
    check_kinds(&h, &[FutureRead, FracturedRead]);
}

#[test]
fn a_read_that_ignores_an_own_write_is_an_internal_read() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("t", "s2", 1, &[w("x", "t:x"), r("x", "a:x")], Some(2)),
    ]);
    check_kinds(&h, &[InternalRead]);
}

#[test]
fn a_snapshot_that_changes_inside_a_transaction_is_an_internal_read() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("b", "s2", 1, &[w("x", "b:x")], Some(2)),
        txn("t", "s3", 1, &[r("x", "a:x"), r("x", "b:x")], None),
        txn("u", "s4", 1, &[r0("x"), r("x", "a:x")], None),
    ]);
    let report = check_kinds(&h, &[InternalRead]);
    assert_eq!(report.count(InternalRead), 2);
}

// ------------------------------------------------------------ causality --

#[test]
fn seeing_half_of_a_transaction_is_a_fractured_read() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x"), w("y", "a:y")], Some(1)),
        txn("b", "s2", 1, &[w("x", "b:x"), w("y", "b:y")], Some(2)),
        txn("t", "s3", 1, &[r("x", "b:x"), r("y", "a:y")], None),
        // Missing a write entirely (null) while seeing its sibling, too.
        txn("u", "s4", 1, &[r0("z"), r("x", "c:x")], None),
        txn("c", "s5", 1, &[w("x", "c:x"), w("z", "c:z")], Some(3)),
    ]);
    let report = check_kinds(&h, &[FracturedRead]);
    assert_eq!(report.count(FracturedRead), 2);
    let v = &report.violations[0];
    assert_eq!((v.txid.as_deref(), v.key.as_deref()), (Some("t"), Some("y")));
    assert!(v.message.contains("key x from b"), "{}", v.message);
}

#[test]
fn missing_a_write_seen_through_a_third_session_is_a_causal_violation() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("b", "s2", 1, &[r("x", "a:x"), w("y", "b:y")], Some(2)),
        // c saw b, b saw a: c must see a's x.
        txn("c", "s3", 1, &[r("y", "b:y"), r0("x")], None),
    ]);
    let report = check_kinds(&h, &[CausalViolation]);
    let v = &report.violations[0];
    assert_eq!((v.txid.as_deref(), v.key.as_deref()), (Some("c"), Some("x")));
    assert!(v.message.contains("a -wr-> b -wr-> c"), "{}", v.message);
}

#[test]
fn an_old_value_behind_a_causal_chain_is_a_causal_violation() {
    let h = history(vec![
        txn("a0", "s0", 1, &[w("x", "a0:x")], Some(1)),
        txn("a", "s1", 1, &[w("x", "a:x")], Some(2)),
        txn("b", "s2", 1, &[r("x", "a:x"), w("y", "b:y")], Some(3)),
        txn("ro", "s3", 1, &[r("y", "b:y")], None),
        // Through a read-only transaction and session order.
        txn("c", "s3", 2, &[r("x", "a0:x")], None),
    ]);
    let report = check_kinds(&h, &[CausalViolation]);
    assert!(report.violations[0].message.contains("a -wr-> b -wr-> ro -so-> c"), "{report}");
}

#[test]
fn not_reading_your_own_session_s_writes_is_a_causal_violation() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("b", "s1", 2, &[w("x", "b:x")], Some(2)),
        txn("c", "s1", 3, &[r("x", "a:x")], None),
        txn("d", "s2", 1, &[w("y", "d:y")], Some(3)),
        txn("e", "s2", 2, &[r0("y")], None),
    ]);
    let report = check_kinds(&h, &[CausalViolation]);
    assert_eq!(report.count(CausalViolation), 2);
}

#[test]
fn an_aborted_transaction_must_also_read_a_causal_snapshot() {
    let h =
        history(vec![txn("a", "s1", 1, &[w("x", "a:x")], Some(1)), aborted("b", "s1", 2, &[r0("x"), w("x", "b:x")])]);
    check_kinds(&h, &[CausalViolation]);
}

#[test]
fn reads_from_each_other_is_a_causal_cycle() {
    let h = history(vec![
        txn("a", "s1", 1, &[r("y", "b:y"), w("x", "a:x")], Some(1)),
        txn("b", "s2", 1, &[r("x", "a:x"), w("y", "b:y")], Some(2)),
        txn("c", "s3", 1, &[r("x", "a:x"), r("y", "b:y")], None),
    ]);
    let report = check_kinds(&h, &[CausalCycle]);
    let message = &report.violations[0].message;
    assert!(message.contains("a -wr-> b -wr-> a"), "{message}");
}

#[test]
fn reading_a_later_transaction_of_your_session_is_a_causal_cycle() {
    let h = history(vec![
        txn("t1", "s1", 1, &[r("x", "t3:x")], None),
        txn("t2", "s1", 2, &[], None),
        txn("t3", "s1", 3, &[w("x", "t3:x")], Some(1)),
    ]);
    let report = check_kinds(&h, &[CausalCycle]);
    assert!(report.violations[0].message.contains("t1 -so-> t2 -so-> t3 -wr-> t1"), "{report}");
}

// ---------------------------------------------------------- arbitration --

#[test]
fn two_updates_with_one_commit_ts_are_duplicates() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(5)),
        txn("b", "s2", 1, &[w("y", "b:y")], Some(5)),
        // Read-only transactions may share anything.
        txn("c", "s3", 1, &[], Some(5)),
    ]);
    check_kinds(&h, &[DuplicateCommitTs]);
}

#[test]
fn numbers_and_strings_at_one_position_contradict() {
    let mut h = history(vec![txn("a", "s1", 1, &[w("x", "a:x")], Some(1)), txn("b", "s2", 1, &[w("y", "b:y")], None)]);
    h.txns[1].commit_ts = Some(CommitTs(vec![StampElem::Str("b".into())]));
    check_kinds(&h, &[ArbitrationContradiction]);
}

#[test]
fn a_session_whose_commit_ts_goes_back_breaks_session_arbitration() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(5)),
        txn("ro", "s1", 2, &[r("x", "a:x")], None),
        txn("b", "s1", 3, &[w("y", "b:y")], Some(3)),
    ]);
    let report = check_kinds(&h, &[SessionArbitration]);
    assert_eq!(report.violations[0].txid.as_deref(), Some("b"));
}

#[test]
fn a_causally_later_write_with_a_smaller_commit_ts_breaks_causal_arbitration() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(5)),
        txn("b", "s2", 1, &[r("x", "a:x"), w("y", "b:y")], Some(3)),
        // Transitively, through a read-only transaction and session order.
        txn("ro", "s3", 1, &[r("x", "a:x")], None),
        txn("c", "s3", 2, &[w("z", "c:z")], Some(4)),
    ]);
    let report = check_kinds(&h, &[CausalArbitration]);
    assert_eq!(report.count(CausalArbitration), 2);
    assert!(report.violations[1].message.contains("a -wr-> ro -so-> c"), "{report}");
}

// --------------------------------------------------------- final states --

#[test]
fn dcs_that_end_with_different_values_diverge() {
    let mut h =
        history(vec![txn("a", "s1", 1, &[w("x", "a:x")], Some(1)), txn("b", "s2", 1, &[w("x", "b:x")], Some(2))]);
    h.finals = vec![final_state(0, &[("x", "b:x")]), final_state(1, &[("x", "a:x")])];
    // Two DCs cannot both hold the newest value if they differ: the one
    // holding the older value is also not last-writer-wins.
    let report = check_kinds(&h, &[Divergence, FinalNotLww]);
    assert_eq!(report.count(Divergence), 1);
    assert!(report.violations.iter().all(|v| v.key.as_deref() == Some("x")));
}

#[test]
fn a_dc_missing_a_key_diverges() {
    let mut h = history(vec![txn("a", "s1", 1, &[w("x", "a:x"), w("y", "a:y")], Some(1))]);
    h.finals = vec![final_state(0, &[("x", "a:x"), ("y", "a:y")]), final_state(1, &[("x", "a:x")])];
    let report = check_kinds(&h, &[Divergence]);
    assert_eq!(report.violations[0].key.as_deref(), Some("y"));
}

#[test]
fn a_committed_write_no_dc_holds_is_lost() {
    let mut h = history(vec![txn("a", "s1", 1, &[w("x", "a:x"), w("y", "a:y")], Some(1))]);
    h.finals = vec![final_state(0, &[("x", "a:x")]), final_state(1, &[("x", "a:x")])];
    let report = check_kinds(&h, &[Divergence]);
    assert!(report.violations[0].message.starts_with("lost write"), "{report}");
}

#[test]
fn a_final_value_that_is_not_the_newest_is_not_lww() {
    let mut h =
        history(vec![txn("a", "s1", 1, &[w("x", "a:x")], Some(2)), txn("b", "s2", 1, &[w("x", "b:x")], Some(1))]);
    h.finals = vec![final_state(0, &[("x", "b:x")]), final_state(1, &[("x", "b:x")])];
    let report = check_kinds(&h, &[FinalNotLww]);
    assert_eq!(report.count(FinalNotLww), 2);
}

#[test]
fn a_final_value_nobody_committed_is_reported_like_a_read() {
    let mut h = history(vec![txn("a", "s1", 1, &[w("x", "a:x")], Some(1)), aborted("b", "s2", 1, &[w("y", "b:y")])]);
    h.finals = vec![final_state(0, &[("x", "a:x"), ("y", "b:y")])];
    check_kinds(&h, &[AbortedRead]);
    h.finals = vec![final_state(0, &[("x", "zz")])];
    check_kinds(&h, &[UnknownValue]);
}

// -------------------------------------------------------------- deletes --

#[test]
fn a_null_read_after_a_delete_in_the_causal_past_is_fine() {
    let mut h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x"), w("y", "a:y")], Some(1)),
        txn("b", "s1", 2, &[d("x")], Some(2)),
        // s1's own next transaction must see the delete.
        txn("c", "s1", 3, &[r0("x"), r("y", "a:y")], None),
        // Others that saw a but not b may read a's x, or null (b's delete).
        txn("e", "s2", 1, &[r("y", "a:y"), r("x", "a:x")], None),
        txn("f", "s3", 1, &[r("y", "a:y"), r0("x")], None),
    ]);
    h.finals = vec![final_state(0, &[("y", "a:y")]), final_state(1, &[("y", "a:y")])];
    let report = check_kinds(&h, &[]);
    assert_eq!((report.stats.writes, report.stats.deletes), (2, 1));
    assert!(report.to_string().contains("2 writes, 1 delete"), "{report}");
}

#[test]
fn a_null_read_may_come_from_a_concurrent_delete_newer_than_its_past() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("b", "s2", 1, &[d("x")], Some(5)),
        // c saw a (same session); b is concurrent and newer: null is the
        // read of b's delete.
        txn("c", "s1", 2, &[r0("x")], None),
    ]);
    check_kinds(&h, &[]);
}

#[test]
fn a_null_read_that_misses_a_write_newer_than_every_delete_is_a_causal_violation() {
    let h = history(vec![
        txn("a", "s1", 1, &[d("x")], Some(1)),
        txn("b", "s1", 2, &[w("x", "b:x")], Some(2)),
        // c follows b in its session: x has a value newer than the delete.
        txn("c", "s1", 3, &[r0("x")], None),
    ]);
    let report = check_kinds(&h, &[CausalViolation]);
    assert!(report.violations[0].message.contains(r#"wrote "b:x""#), "{report}");
}

#[test]
fn a_delete_that_follows_the_reader_does_not_explain_its_null() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("k", "a:k")], Some(1)),
        // b saw a (same session) yet reads null; the only delete of k comes
        // after b in its own session: a stale read, not a read of it.
        txn("b", "s1", 2, &[r0("k")], None),
        txn("c", "s1", 3, &[d("k")], Some(3)),
    ]);
    let report = check_kinds(&h, &[CausalViolation]);
    assert!(report.violations[0].message.contains(r#"wrote "a:k""#), "{report}");
    // Through another session too: e read b's write of y, so e follows b.
    let h = history(vec![
        txn("a", "s1", 1, &[w("k", "a:k")], Some(1)),
        txn("b", "s1", 2, &[r0("k"), w("y", "b:y")], Some(2)),
        txn("e", "s2", 1, &[r("y", "b:y"), d("k")], Some(3)),
    ]);
    check_kinds(&h, &[CausalViolation]);
    // A concurrent delete, newer than the reader's past, explains it.
    let h = history(vec![
        txn("a", "s1", 1, &[w("k", "a:k")], Some(1)),
        txn("b", "s1", 2, &[r0("k")], None),
        txn("e", "s2", 1, &[d("k")], Some(3)),
    ]);
    check_kinds(&h, &[]);
}

#[test]
fn reading_a_value_over_a_newer_delete_in_the_past_is_a_causal_violation() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("b", "s1", 2, &[d("x")], Some(2)),
        txn("c", "s1", 3, &[r("x", "a:x")], None),
    ]);
    let report = check_kinds(&h, &[CausalViolation]);
    assert!(report.violations[0].message.contains("wrote a delete"), "{report}");
}

#[test]
fn a_transaction_reads_its_own_delete_as_null() {
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("b", "s1", 2, &[r("x", "a:x"), d("x"), r0("x")], Some(2)),
    ]);
    check_kinds(&h, &[]);
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("b", "s1", 2, &[d("x"), r("x", "a:x")], Some(2)),
    ]);
    let report = check_kinds(&h, &[InternalRead]);
    assert!(report.violations[0].message.contains("after deleting it"), "{report}");
}

#[test]
fn a_value_its_writer_deleted_before_committing_is_an_intermediate_read() {
    let h =
        history(vec![txn("a", "s1", 1, &[w("x", "a:x"), d("x")], Some(1)), txn("b", "s2", 1, &[r("x", "a:x")], None)]);
    let report = check_kinds(&h, &[IntermediateRead]);
    assert!(report.violations[0].message.contains("overwrote with a delete"), "{report}");
}

#[test]
fn final_states_leave_deleted_keys_out() {
    let mut h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x"), w("y", "a:y")], Some(1)),
        txn("b", "s2", 1, &[d("x")], Some(2)),
    ]);
    h.finals = vec![final_state(0, &[("y", "a:y")]), final_state(1, &[("y", "a:y")])];
    check_kinds(&h, &[]);
    // A DC that still holds the deleted value ends wrong.
    h.finals = vec![final_state(0, &[("y", "a:y")]), final_state(1, &[("x", "a:x"), ("y", "a:y")])];
    let report = check_kinds(&h, &[FinalNotLww, Divergence]);
    assert!(report.to_string().contains("wrote a delete with the greatest commit_ts"), "{report}");
    // A delete that lost to a newer write leaves the key in place.
    let mut h = history(vec![txn("b", "s2", 1, &[d("x")], Some(1)), txn("a", "s1", 1, &[w("x", "a:x")], Some(2))]);
    h.finals = vec![final_state(0, &[])];
    let report = check_kinds(&h, &[Divergence]);
    assert!(report.violations[0].message.starts_with("lost write"), "{report}");
}

#[test]
fn deletes_round_trip_through_the_format() {
    let line =
        r#"{"txid":"t","session":"s","seq":1,"status":"committed","ops":[{"op":"d","key":"k"}],"commit_ts":[1]}"#;
    let h = History::read_jsonl(line.as_bytes()).unwrap();
    assert_eq!(h.txns[0].ops[0], d("k"));
    assert_eq!(History::read_jsonl(h.to_jsonl_string().as_bytes()).unwrap(), h);
}

// ------------------------------------------------------ unknown outcome --

/// A read of an unknown transaction's write proves it committed: the read
/// is fine, the reader and everyone after it depend on it, and a DC may
/// end with its write.
#[test]
fn a_read_of_an_unknown_transaction_s_write_is_fine() {
    let mut h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x"), w("y", "a:y")], Some(1)),
        unknown("u", "s2", 1, &[r("x", "a:x"), w("x", "u:x"), w("y", "u:y")]),
        txn("t", "s3", 1, &[r("x", "u:x"), r("y", "u:y")], None),
        // After t, s3 still sees u's writes, or newer ones.
        txn("t2", "s3", 2, &[r("y", "u:y")], None),
        // b is concurrent with u: its commit_ts may be above or below the
        // one u had, so either may be last-writer-wins.
        txn("b", "s4", 1, &[w("x", "b:x")], Some(2)),
        txn("t3", "s3", 3, &[r("x", "b:x"), r("y", "u:y")], None),
        txn("t4", "s5", 1, &[r("x", "b:x"), r("y", "a:y")], None),
    ]);
    h.finals = vec![final_state(0, &[("x", "b:x"), ("y", "u:y")]), final_state(1, &[("x", "b:x"), ("y", "u:y")])];
    let report = check_kinds(&h, &[]);
    assert_eq!((report.stats.committed, report.stats.aborted, report.stats.unknown), (6, 0, 1));
    assert!(report.to_string().contains("7 transactions (6 committed, 0 aborted, 1 unknown)"), "{report}");
    // A DC may also end with the concurrent write the other way round.
    h.finals = vec![final_state(0, &[("x", "u:x"), ("y", "u:y")])];
    check_kinds(&h, &[]);
}

/// Nobody read it, so it may have aborted: its session goes on without
/// it, and the final states need not hold its writes.
#[test]
fn an_unknown_transaction_nobody_read_may_have_aborted() {
    let mut h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        unknown("u", "s1", 2, &[r("x", "a:x"), w("x", "u:x"), w("z", "u:z")]),
        // Not even its own session must see it (its client never learned
        // that it committed, and a coordinator may commit it late).
        txn("c", "s1", 3, &[r("x", "a:x"), r0("z")], None),
        txn("d", "s2", 1, &[r("x", "a:x"), w("q", "d:q")], Some(2)),
    ]);
    h.finals = vec![final_state(0, &[("x", "a:x"), ("q", "d:q")]), final_state(1, &[("x", "a:x"), ("q", "d:q")])];
    let report = check_kinds(&h, &[]);
    assert_eq!((report.stats.committed, report.stats.aborted, report.stats.unknown), (3, 0, 1));
    // Or it committed, and the DCs hold its writes.
    h.finals = vec![final_state(0, &[("x", "u:x"), ("q", "d:q"), ("z", "u:z")])];
    check_kinds(&h, &[]);
}

/// u's writes are newer than a's (a precedes u in its session, so u's
/// commit_ts, had it one, is above a's): whoever saw u must not see a's
/// value of a key u also wrote.
#[test]
fn seeing_part_of_an_unknown_transaction_is_a_fractured_read() {
    let prefix =
        || vec![txn("a", "s1", 1, &[w("y", "a:y")], Some(1)), unknown("u", "s1", 2, &[w("x", "u:x"), w("y", "u:y")])];
    let mut txns = prefix();
    txns.push(txn("t", "s2", 1, &[r("x", "u:x"), r("y", "a:y")], None));
    let report = check_kinds(&history(txns), &[FracturedRead]);
    let v = &report.violations[0];
    assert_eq!((v.txid.as_deref(), v.key.as_deref()), (Some("t"), Some("y")));
    assert!(v.message.contains("key x from u (outcome unknown)"), "{report}");
    assert!(v.message.contains("u follows a (commit_ts [1]) causally"), "{report}");

    // The same through session order: t2 follows t, which saw u.
    let mut txns = prefix();
    txns.push(txn("t", "s2", 1, &[r("x", "u:x")], None));
    txns.push(txn("t2", "s2", 2, &[r("y", "a:y")], None));
    let report = check_kinds(&history(txns), &[CausalViolation]);
    assert!(report.violations[0].message.contains("u -wr-> t -so-> t2"), "{report}");

    // Null for a key it wrote, with no delete anywhere, is as wrong.
    let mut txns = prefix();
    txns.push(txn("t", "s2", 1, &[r("x", "u:x"), r0("y")], None));
    check_kinds(&history(txns), &[FracturedRead]);

    // But a transaction that saw u may read a write concurrent with it:
    // its commit_ts may be the greater.
    let mut txns = prefix();
    txns.push(txn("b", "s3", 1, &[w("y", "b:y")], Some(2)));
    txns.push(txn("t", "s2", 1, &[r("x", "u:x"), r("y", "b:y")], None));
    check_kinds(&history(txns), &[]);
}

/// b read u's write and then overwrote it, so b's commit_ts is above the
/// one u had: a reader that saw b must not read u's older value.
#[test]
fn an_unknown_write_older_than_a_committed_one_is_stale_in_its_past() {
    let mut h = history(vec![
        unknown("u", "s1", 1, &[w("x", "u:x")]),
        txn("b", "s2", 1, &[r("x", "u:x"), w("x", "b:x")], Some(5)),
        txn("e", "s2", 2, &[r("x", "u:x")], None),
        // Concurrent readers may read either.
        txn("f", "s3", 1, &[r("x", "u:x")], None),
        txn("g", "s4", 1, &[r("x", "b:x")], None),
    ]);
    let report = check_kinds(&h, &[CausalViolation]);
    let v = &report.violations[0];
    assert_eq!(v.txid.as_deref(), Some("e"));
    assert!(v.message.contains("u precedes b (commit_ts [5]) causally"), "{report}");

    // A DC that ends with u's write ends wrong too under causal
    // arbitration: b's is newer by the causal order. A store whose commit
    // timestamps need not follow causality (eventual consistency) may have
    // given u the greater one, so this is no breach of convergence.
    h.txns.remove(2);
    h.finals = vec![final_state(0, &[("x", "u:x")])];
    let report = check_kinds(&h, &[CausalArbitration]);
    assert!(report.violations[0].message.contains("u precedes b (commit_ts [5]) causally"), "{report}");
    assert!(!report.upholds(causeway_history::Guarantee::Causal));
    assert!(report.upholds(causeway_history::Guarantee::Eventual), "{report}");
}

#[test]
fn an_unknown_delete_may_explain_a_null_read_and_a_missing_key() {
    // Nobody read u, but it may have committed with a commit_ts above a's:
    // then c's snapshot may hold its delete, and so may the final states.
    let mut h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        unknown("u", "s2", 1, &[d("x")]),
        txn("c", "s1", 2, &[r0("x")], None),
    ]);
    h.finals = vec![final_state(0, &[])];
    check_kinds(&h, &[]);

    // Unless it follows the reader: then its delete is not in its snapshot.
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("c", "s1", 2, &[r0("x"), w("y", "c:y")], Some(2)),
        unknown("u", "s2", 1, &[r("y", "c:y"), d("x")]),
    ]);
    check_kinds(&h, &[CausalViolation]);

    // Or it is older than the write: u precedes b, so b's write of x is
    // the newer, and no DC may lose it.
    let mut h = history(vec![
        unknown("u", "s2", 1, &[d("x"), w("y", "u:y")]),
        txn("b", "s3", 1, &[r("y", "u:y"), w("x", "b:x")], Some(3)),
    ]);
    h.finals = vec![final_state(0, &[("y", "u:y")])];
    let report = check_kinds(&h, &[Divergence]);
    assert!(report.violations[0].message.starts_with("lost write"), "{report}");
}

#[test]
fn a_null_read_behind_an_unknown_write_needs_a_delete_that_may_be_newer() {
    // d's delete is concurrent with u and may be newer: it explains t's null.
    let h = history(vec![
        unknown("u", "s1", 1, &[w("x", "u:x"), w("y", "u:y")]),
        txn("d", "s2", 1, &[d("x")], Some(5)),
        txn("t", "s3", 1, &[r("y", "u:y"), r0("x")], None),
    ]);
    check_kinds(&h, &[]);
    // a's delete precedes u, so u's write is the newer: t saw u, yet not
    // its write of x.
    let h = history(vec![
        txn("a", "s1", 1, &[d("x")], Some(1)),
        unknown("u", "s1", 2, &[w("x", "u:x"), w("y", "u:y")]),
        txn("t", "s2", 1, &[r("y", "u:y"), r0("x")], None),
    ]);
    let report = check_kinds(&h, &[FracturedRead]);
    assert!(report.violations[0].message.contains("key y from u (outcome unknown)"), "{report}");
    // An unknown reader of null, and a delete that follows it (e read u's
    // write): not its snapshot's.
    let h = history(vec![
        txn("a", "s1", 1, &[w("k", "a:k")], Some(1)),
        unknown("u", "s1", 2, &[r0("k"), w("y", "u:y")]),
        txn("e", "s2", 1, &[r("y", "u:y"), d("k")], Some(3)),
    ]);
    let report = check_kinds(&h, &[CausalViolation]);
    assert_eq!(report.violations[0].txid.as_deref(), Some("u"));
}

#[test]
fn what_no_transaction_wrote_is_still_unknown_and_future_reads_are_still_caught() {
    let h = history(vec![
        unknown("u", "s1", 1, &[w("x", "u:x")]),
        txn("t", "s2", 1, &[r("x", "u:x#1")], None),
        // An unknown transaction's reads come before its commit, so before
        // anything its session did after it.
        unknown("v", "s3", 1, &[r("y", "b:y")]),
        txn("b", "s3", 2, &[w("y", "b:y")], Some(1)),
    ]);
    check_kinds(&h, &[UnknownValue, FutureRead]);
}

#[test]
fn an_unknown_transaction_on_a_reads_from_cycle_is_caught() {
    let h = history(vec![
        unknown("u", "s1", 1, &[r("y", "b:y"), w("x", "u:x")]),
        txn("b", "s2", 1, &[r("x", "u:x"), w("y", "b:y")], Some(1)),
    ]);
    let report = check_kinds(&h, &[CausalCycle]);
    assert!(report.violations[0].message.contains("u -wr-> b -wr-> u"), "{report}");
}

#[test]
fn unknown_round_trips_through_the_format() {
    let line = r#"{"txid":"u","session":"s","seq":1,"status":"unknown","ops":[{"op":"r","key":"k","value":null},{"op":"w","key":"k","value":"u:k"}]}"#;
    let h = History::read_jsonl(line.as_bytes()).unwrap();
    assert_eq!(h.txns[0].status, Status::Unknown);
    assert_eq!(h.txns[0].commit_ts, None);
    let text = h.to_jsonl_string();
    assert!(text.contains(r#""status":"unknown""#) && !text.contains("commit_ts"), "{text}");
    assert_eq!(History::read_jsonl(text.as_bytes()).unwrap(), h);
    let mut expected = unknown("u", "s", 1, &[r0("k"), w("k", "u:k")]);
    (expected.start_us, expected.end_us) = (0, 0);
    assert_eq!(h.txns, vec![expected]);
    check_kinds(&h, &[]);
}

// ------------------------------------------------------------ malformed --

#[test]
fn format_rule_breaks_are_malformed() {
    let cases: Vec<(&str, History)> = vec![
        (
            "duplicate txid",
            history(vec![txn("a", "s1", 1, &[w("x", "a:x")], Some(1)), txn("a", "s2", 1, &[w("y", "a:y")], Some(2))]),
        ),
        (
            "duplicate (session, seq)",
            history(vec![txn("a", "s1", 1, &[w("x", "a:x")], Some(1)), txn("b", "s1", 1, &[w("y", "b:y")], Some(2))]),
        ),
        ("write of null", {
            let mut t = txn("a", "s1", 1, &[w("x", "a:x")], Some(1));
            t.ops[0].value = None;
            history(vec![t])
        }),
        ("committed update without commit_ts", history(vec![txn("a", "s1", 1, &[w("x", "a:x")], None)])),
        ("delete with a value", {
            let mut t = txn("a", "s1", 1, &[d("x")], Some(1));
            t.ops[0].value = Some("v".into());
            history(vec![t])
        }),
        (
            "value written twice",
            history(vec![txn("a", "s1", 1, &[w("x", "v")], Some(1)), txn("b", "s2", 1, &[w("x", "v")], Some(2))]),
        ),
        ("unknown transaction with a commit_ts", {
            let mut t = unknown("u", "s1", 1, &[w("x", "u:x")]);
            t.commit_ts = ts(1);
            history(vec![t])
        }),
        ("two final lines for one DC", {
            let mut h = history(vec![txn("a", "s1", 1, &[w("x", "a:x")], Some(1))]);
            h.finals = vec![final_state(0, &[("x", "a:x")]), final_state(0, &[("x", "a:x")])];
            h
        }),
    ];
    for (what, h) in cases {
        let report = check(&h);
        assert_eq!(report.kinds(), vec![Malformed], "{what}:\n{report}");
        assert_eq!(report.count(Malformed), 1, "{what}:\n{report}");
    }
}

// --------------------------------------------------------------- report --

#[test]
fn kinds_have_distinct_names_and_descriptions() {
    let mut names: Vec<&str> = ViolationKind::ALL.iter().map(|k| k.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), ViolationKind::ALL.len());
    assert_eq!(FracturedRead.as_str(), "fractured-read");
    assert!(ViolationKind::ALL.iter().all(|k| !k.describe().is_empty() && k.to_string() == k.as_str()));
}

#[test]
fn the_report_prints_a_verdict_counts_and_at_most_twenty_per_kind() {
    let mut txns = vec![txn("a", "s1", 1, &[w("x", "a:x")], Some(1))];
    for i in 0..25 {
        txns.push(txn(&format!("r{i}"), &format!("s{}", i + 2), 1, &[r("x", "nope")], None));
    }
    let report = check(&history(txns));
    let text = report.to_string();
    assert!(text.starts_with("NOT TCC: 25 violations in 26 transactions"), "{text}");
    assert!(text.contains("unknown-value              25"), "{text}");
    assert!(text.contains(UnknownValue.describe()), "{text}");
    assert!(text.contains("txn r19 key x"), "{text}");
    assert!(!text.contains("txn r20 key x"), "{text}");
    assert!(text.contains("... and 5 more"), "{text}");

    let clean = check(&history(vec![txn("a", "s1", 1, &[w("x", "a:x")], Some(1))]));
    assert!(
        clean
            .to_string()
            .starts_with("TCC: no violations in 1 transaction (1 committed, 0 aborted), 0 reads, 1 write, 1 session"),
        "{clean}"
    );
}
