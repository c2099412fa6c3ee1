//! Serializability: each of Adya's phenomena in a small history, reported
//! with exactly its kind and the cycle that shows it; what TCC makes of the
//! same histories; histories both models accept; and a large serial one.
//!
//! Values are named `writer:key`, as in `kinds`. Every history that is
//! rejected here is rejected because of the edges named in its expected
//! cycle: without any one of them, the cycle would not close.
//!
//! G0 (a cycle of ww edges alone) is not here: ww edges follow commit_ts,
//! one total order of whole transactions, so two transactions that both
//! write x and y are ordered alike on both keys and a history cannot show
//! it. The graph's unit tests (`checker::dsg`) build one directly.

use crate::common;

use causeway_history::synth::{generate, SynthConfig};
use causeway_history::ViolationKind::{self, *};
use causeway_history::{check, check_for, Guarantee, History, Report};
use common::*;
use std::time::Instant;

const SER: Guarantee = Guarantee::Serializable;

/// The one violation of `kind`: where it was located, and its cycle.
fn the_cycle(report: &Report, kind: ViolationKind) -> (String, String) {
    let mut of_kind = report.violations.iter().filter(|v| v.kind == kind);
    let v = of_kind.next().unwrap_or_else(|| panic!("no {kind}:\n{report}"));
    assert!(of_kind.next().is_none(), "more than one {kind}:\n{report}");
    let cycle = v.message.split(": each would").next().unwrap().to_string();
    (v.txid.clone().expect("located at a transaction"), cycle)
}

// ------------------------------------------------------------------ G2 --

#[test]
fn a_lost_update_is_g2_and_tcc_allows_it() {
    // b and c both read a's x and both overwrote it: c's write (newer)
    // follows b's (ww), yet c read the version b overwrote (rw).
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("b", "s2", 1, &[r("x", "a:x"), w("x", "b:x")], Some(2)),
        txn("c", "s3", 1, &[r("x", "a:x"), w("x", "c:x")], Some(3)),
    ]);
    check_kinds(&h, &[]);
    let report = check_kinds_for(&h, SER, &[AntiDependencyCycle]);
    assert_eq!(the_cycle(&report, AntiDependencyCycle), ("b".into(), "b -ww(x)-> c -rw(x)-> b".into()));
    assert!(report.is_tcc() && !report.is_serializable() && !report.keeps_model(), "{report}");
    assert!(report.upholds(Guarantee::Causal) && !report.upholds(SER));
}

#[test]
fn write_skew_is_g2_whether_the_keys_were_written_before_or_not() {
    // a and b each read both keys and each wrote the one the other read.
    let skew = |x: Option<&str>, y: Option<&str>| {
        let read = |key, v: Option<&str>| v.map_or_else(|| r0(key), |v| r(key, v));
        vec![
            txn("a", "s1", 1, &[read("x", x), read("y", y), w("x", "a:x")], Some(2)),
            txn("b", "s2", 1, &[read("x", x), read("y", y), w("y", "b:y")], Some(3)),
        ]
    };
    // First from written values, then from the initial state (a read of
    // null, and no delete of either key: nothing else it could have read).
    let mut from_values = vec![txn("i", "s0", 1, &[w("x", "i:x"), w("y", "i:y")], Some(1))];
    from_values.extend(skew(Some("i:x"), Some("i:y")));
    for h in [history(from_values), history(skew(None, None))] {
        check_kinds(&h, &[]);
        let report = check_kinds_for(&h, SER, &[AntiDependencyCycle]);
        assert_eq!(the_cycle(&report, AntiDependencyCycle), ("a".into(), "a -rw(y)-> b -rw(x)-> a".into()));
    }
}

#[test]
fn read_skew_is_g2_and_a_fractured_read_to_tcc() {
    // r saw t1's y but t0's x, which t1 overwrote.
    let h = history(vec![
        txn("t0", "s1", 1, &[w("x", "t0:x"), w("y", "t0:y")], Some(1)),
        txn("t1", "s2", 1, &[w("x", "t1:x"), w("y", "t1:y")], Some(2)),
        txn("r", "s3", 1, &[r("x", "t0:x"), r("y", "t1:y")], None),
    ]);
    check_kinds(&h, &[FracturedRead]);
    let report = check_kinds_for(&h, SER, &[FracturedRead, AntiDependencyCycle]);
    assert_eq!(the_cycle(&report, AntiDependencyCycle), ("t1".into(), "t1 -wr(y)-> r -rw(x)-> t1".into()));
    assert!(!report.is_tcc());
}

#[test]
fn a_cycle_through_five_transactions_is_printed_whole() {
    // Each reads one key (nothing there yet, and no key is ever deleted)
    // and writes the next: t_i reads x_i, which t_(i-1) writes.
    let names = ["t1", "t2", "t3", "t4", "t5"];
    let txns = (0..5)
        .map(|i| {
            let (read, written) = (format!("x{}", i + 1), format!("x{}", (i + 1) % 5 + 1));
            txn(
                names[i],
                &format!("s{i}"),
                1,
                &[r0(&read), w(&written, &format!("{}:{written}", names[i]))],
                Some(i as u64 + 1),
            )
        })
        .collect();
    let h = history(txns);
    check_kinds(&h, &[]);
    let report = check_kinds_for(&h, SER, &[AntiDependencyCycle]);
    assert_eq!(
        the_cycle(&report, AntiDependencyCycle),
        ("t1".into(), "t1 -rw(x1)-> t5 -rw(x5)-> t4 -rw(x4)-> t3 -rw(x3)-> t2 -rw(x2)-> t1".into())
    );
}

// ----------------------------------------------------------------- G1c --

#[test]
fn reading_a_write_commit_ts_puts_later_is_g1c_and_breaks_causal_arbitration() {
    // b read a's x, so follows a; yet b's z is older than a's in commit_ts.
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x"), w("z", "a:z")], Some(2)),
        txn("b", "s2", 1, &[r("x", "a:x"), w("z", "b:z")], Some(1)),
    ]);
    check_kinds(&h, &[CausalArbitration]);
    let report = check_kinds_for(&h, SER, &[CausalArbitration, InformationCycle]);
    assert_eq!(the_cycle(&report, InformationCycle), ("a".into(), "a -wr(x)-> b -ww(z)-> a".into()));
}

#[test]
fn reading_from_each_other_is_g1c_and_a_causal_cycle() {
    let h = history(vec![
        txn("a", "s1", 1, &[r("y", "b:y"), w("x", "a:x")], Some(1)),
        txn("b", "s2", 1, &[r("x", "a:x"), w("y", "b:y")], Some(2)),
    ]);
    check_kinds(&h, &[CausalCycle]);
    let report = check_kinds_for(&h, SER, &[CausalCycle, InformationCycle]);
    assert_eq!(the_cycle(&report, InformationCycle), ("a".into(), "a -wr(x)-> b -wr(y)-> a".into()));
}

// ------------------------------------------------------------ G1a, G1b --

/// An optimistic serializable store certifies reads at commit and aborts a
/// transaction that saw a fractured state: it promises nothing of an
/// aborted transaction's reads. TCC promises every transaction a causal
/// snapshot, so the same history breaks TCC and not serializability; a
/// committed reader of the same state breaks both.
#[test]
fn an_aborted_transaction_may_read_a_fractured_state_under_serializability() {
    let writes = txn("a", "s1", 1, &[w("x", "a:x"), w("y", "a:y")], Some(1));
    let aborted_reader = aborted("b", "s2", 1, &[r("x", "a:x"), r0("y")]);
    let h = history(vec![writes.clone(), aborted_reader]);
    check_kinds(&h, &[FracturedRead]);
    check_kinds_for(&h, SER, &[]);
    let committed_reader = txn("b", "s2", 1, &[r("x", "a:x"), r0("y")], None);
    let h = history(vec![writes, committed_reader]);
    let report = check_for(&h, SER);
    assert!(report.violations.iter().any(|v| v.kind == FracturedRead), "{report}");
    assert!(!report.keeps_model());
}

#[test]
fn aborted_and_intermediate_reads_are_g1a_and_g1b_under_their_own_names() {
    let aborted_read = history(vec![
        aborted("ab", "s1", 1, &[w("x", "ab:x")]),
        txn("t", "s2", 1, &[r("x", "ab:x"), w("y", "t:y")], Some(1)),
    ]);
    check_kinds_for(&aborted_read, SER, &[AbortedRead]);
    let intermediate_read = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x#1"), w("x", "a:x")], Some(1)),
        txn("t", "s2", 1, &[r("x", "a:x#1"), w("y", "t:y")], Some(2)),
    ]);
    check_kinds_for(&intermediate_read, SER, &[IntermediateRead]);
}

// ------------------------------------------------------------- unknown --

#[test]
fn an_unknown_transaction_is_in_the_graph_once_someone_read_it() {
    // u saw t2's z but t1's x, which t2 overwrote: a read skew, if u
    // committed. Nobody read u, so it may have aborted — as an optimistic
    // store aborts what saw a fractured state, and a client that lost its
    // connection then never hears: TCC judges its reads (it promises
    // every transaction a causal snapshot), serializability does not.
    let mut txns = vec![
        txn("t1", "s1", 1, &[w("x", "t1:x")], Some(1)),
        txn("t2", "s2", 1, &[w("x", "t2:x"), w("z", "t2:z")], Some(2)),
        unknown("u", "s3", 1, &[r("z", "t2:z"), r("x", "t1:x"), w("y", "u:y")]),
    ];
    check_kinds(&history(txns.clone()), &[FracturedRead]);
    check_kinds_for(&history(txns.clone()), SER, &[]);
    // Now someone read u's write: u committed, and its read skew is a
    // cycle through its reads-from edge in and its anti-dependency out.
    txns.push(txn("v", "s4", 1, &[r("y", "u:y")], None));
    let report = check_kinds_for(&history(txns), SER, &[FracturedRead, AntiDependencyCycle]);
    assert_eq!(the_cycle(&report, AntiDependencyCycle), ("t2".into(), "t2 -wr(z)-> u -rw(x)-> t2".into()));
}

// -------------------------------------------------------- null reads --

#[test]
fn a_null_read_of_a_key_with_a_delete_adds_no_anti_dependency() {
    // r's null may be d's delete (then a, d, r is a serial order) or the
    // initial state (then r would precede a, which it read z from). Nulls
    // are not unique, so the checker cannot tell, and draws no rw edge:
    // no false alarm, at the price of missing the cycles such an edge
    // would close.
    let h = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x"), w("z", "a:z")], Some(1)),
        txn("d", "s2", 1, &[d("x")], Some(2)),
        txn("r", "s3", 1, &[r("z", "a:z"), r0("x")], None),
    ]);
    check_kinds(&h, &[]);
    check_kinds_for(&h, SER, &[]);
    // Without the delete, the null can only be the initial state: r saw
    // part of a (a fractured read, to TCC), so is on both sides of it.
    let without: Vec<_> = h.txns.iter().filter(|t| t.txid != "d").cloned().collect();
    let report = check_kinds_for(&history(without), SER, &[FracturedRead, AntiDependencyCycle]);
    assert_eq!(the_cycle(&report, AntiDependencyCycle), ("a".into(), "a -wr(z)-> r -rw(x)-> a".into()));
}

// -------------------------------------------------------------- serial --

/// Transactions one after the other over three sessions, each reading the
/// newest value (or null) of its keys, some writing what they read.
fn serial_history(deletes: bool) -> History {
    let del = |key| if deletes { d(key) } else { w(key, &format!("c:{key}")) };
    let x_after_c = if deletes { r0("x") } else { r("x", "c:x") };
    history(vec![
        txn("a", "s1", 1, &[r0("x"), r0("y"), w("x", "a:x"), w("y", "a:y")], Some(1)),
        txn("b", "s2", 1, &[r("x", "a:x"), w("x", "b:x")], Some(2)),
        txn("c", "s3", 1, &[r("x", "b:x"), r("y", "a:y"), del("x")], Some(3)),
        txn("e", "s1", 2, &[x_after_c.clone(), r("y", "a:y"), w("y", "e:y")], Some(4)),
        txn("f", "s2", 2, &[x_after_c, r("y", "e:y")], None),
        txn("g", "s3", 2, &[r("y", "e:y"), w("x", "g:x"), r("x", "g:x")], Some(5)),
        txn("h", "s1", 3, &[r("x", "g:x"), r("y", "e:y")], None),
    ])
}

#[test]
fn serial_histories_are_serializable_and_tcc_with_or_without_deletes() {
    for deletes in [false, true] {
        let h = serial_history(deletes);
        check_kinds(&h, &[]);
        let report = check_kinds_for(&h, SER, &[]);
        assert!(report.is_serializable() && report.keeps_model() && report.is_tcc(), "{report}");
        assert_eq!(report.stats.deletes, deletes as usize);
        assert!(report.to_string().starts_with("serializable: no violations in 7 transactions"), "{report}");
    }
    // The same transactions with one read made stale are not serializable:
    // g reads a's y, not e's, so precedes e — but e read the x that g
    // overwrote. (Still TCC: e is not in g's causal past.)
    let mut stale = serial_history(false);
    stale.txns[5].ops[0] = r("y", "a:y");
    check_kinds(&stale, &[]);
    let report = check_kinds_for(&stale, SER, &[AntiDependencyCycle]);
    assert_eq!(the_cycle(&report, AntiDependencyCycle), ("e".into(), "e -rw(x)-> g -rw(y)-> e".into()));
}

// -------------------------------------------------------------- report --

#[test]
fn the_report_names_the_model_it_judged() {
    let lost = history(vec![
        txn("a", "s1", 1, &[w("x", "a:x")], Some(1)),
        txn("b", "s2", 1, &[r("x", "a:x"), w("x", "b:x")], Some(2)),
        txn("c", "s3", 1, &[r("x", "a:x"), w("x", "c:x")], Some(3)),
    ]);
    let text = check_for(&lost, SER).to_string();
    assert!(text.starts_with("NOT SERIALIZABLE: 1 violation in 3 transactions"), "{text}");
    assert!(text.contains("g2-anti-dependency-cycle   1"), "{text}");
    assert!(text.contains(AntiDependencyCycle.describe()), "{text}");
    assert!(text.contains("  - txn b: b -ww(x)-> c -rw(x)-> b: each would have to come before the next"), "{text}");
    assert!(check(&lost).to_string().starts_with("TCC: no violations in 3 transactions"));
    // Eventual consistency is judged by the TCC passes, and allows a
    // fractured read.
    let fractured = history(vec![
        txn("t", "s1", 1, &[w("x", "t:x"), w("y", "t:y")], Some(1)),
        txn("r", "s2", 1, &[r("x", "t:x"), r0("y")], None),
    ]);
    let report = check_for(&fractured, Guarantee::Eventual);
    assert!(report.keeps_model() && !report.is_tcc(), "{report}");
    assert!(
        report.to_string().starts_with("eventually consistent, NOT TCC: 1 violation in 2 transactions"),
        "{report}"
    );
    assert!(check_for(&fractured, Guarantee::Causal).to_string().starts_with("NOT TCC: 1 violation"));
}

#[test]
#[should_panic(expected = "cannot say whether a history is serializable")]
fn a_tcc_report_refuses_to_answer_for_serializability() {
    check(&History::default()).upholds(SER);
}

// ----------------------------------------------------------- generated --

#[test]
fn a_generated_tcc_history_across_dcs_is_not_serializable_and_only_g2_says_so() {
    // Replication lag lets two DCs read the same version and both
    // overwrite it: lost updates and write skew, which TCC allows.
    let h = generate(&SynthConfig { txns: 5_000, sessions: 20, keys: 100, ..SynthConfig::default() });
    check_kinds(&h, &[]);
    let report = check_kinds_for(&h, SER, &[AntiDependencyCycle]);
    for v in &report.violations {
        let txid = v.txid.as_deref().unwrap();
        assert!(v.message.starts_with(&format!("{txid} -")), "a cycle starts where it is located: {v}");
        assert!(v.message.contains("-rw("), "a G2 cycle has an anti-dependency: {v}");
    }
}

#[test]
fn a_serial_history_of_100000_transactions_is_serializable() {
    // One DC: every transaction reads the state all earlier ones left, so
    // the generator's history is serial in commit_ts order.
    let config = SynthConfig {
        txns: 100_000,
        sessions: 100,
        dcs: 1,
        keys: 10_000,
        reads_per_txn: 4,
        max_writes_per_txn: 2,
        ..SynthConfig::default()
    };
    let h = generate(&config);
    let started = Instant::now();
    let report = check_for(&h, SER);
    let elapsed = started.elapsed();
    println!(
        "checked {} transactions ({} reads, {} writes) for serializability in {:.3} s",
        h.txns.len(),
        report.stats.reads,
        report.stats.writes,
        elapsed.as_secs_f64()
    );
    assert!(report.is_serializable(), "{report}");
    assert!(report.stats.committed > 90_000 && report.stats.reads > 400_000, "{report}");
}
