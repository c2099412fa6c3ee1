//! Large histories from the sequential reference model in `synth`: accepted
//! as generated, rejected after one injected fault. A checker that accepts
//! everything would pass the first half; the second half proves it looks.

use crate::common;

use causeway_history::synth::{generate, SynthConfig};
use causeway_history::ViolationKind::{self, *};
use causeway_history::{check, History, Op, OpKind, Report, Status};
use common::check_kinds;
use std::collections::HashMap;

fn config(txns: usize) -> SynthConfig {
    SynthConfig { txns, sessions: 40, keys: 2_000, ..SynthConfig::default() }
}

/// The committed final writes: value → (txn index, key), and per key the
/// values with their commit timestamps, oldest first.
struct Writes {
    writer: HashMap<String, usize>,
    by_key: HashMap<String, Vec<(causeway_history::CommitTs, String)>>,
}

fn committed_writes(h: &History) -> Writes {
    let mut writer = HashMap::new();
    let mut by_key: HashMap<String, Vec<_>> = HashMap::new();
    for (i, t) in h.txns.iter().enumerate() {
        if t.status != Status::Committed {
            continue;
        }
        for (j, op) in t.ops.iter().enumerate() {
            let is_final = !t.ops[j + 1..].iter().any(|o| o.op == OpKind::Write && o.key == op.key);
            if op.op == OpKind::Write && is_final {
                let v = op.value.clone().unwrap();
                writer.insert(v.clone(), i);
                by_key.entry(op.key.clone()).or_default().push((t.commit_ts.clone().unwrap(), v));
            }
        }
    }
    for list in by_key.values_mut() {
        list.sort();
    }
    Writes { writer, by_key }
}

/// The only operation of `t` on its key (so changing it cannot make the
/// transaction contradict itself).
fn sole_access(ops: &[Op], j: usize) -> bool {
    ops.iter().filter(|o| o.key == ops[j].key).count() == 1
}

/// Replaces one read, late in the history, whose writer precedes the reader
/// in its session, with an older value of the same key: the reader then
/// misses a write in its causal past. Returns the reader's txid.
fn inject_stale_read(h: &mut History) -> String {
    let writes = committed_writes(h);
    let start = h.txns.len() / 2;
    for i in start..h.txns.len() {
        let t = &h.txns[i];
        for (j, op) in t.ops.iter().enumerate() {
            let Some(v) = &op.value else { continue };
            if op.op != OpKind::Read || !sole_access(&t.ops, j) {
                continue;
            }
            let Some(&wi) = writes.writer.get(v) else { continue };
            let w = &h.txns[wi];
            if w.session != t.session || w.seq >= t.seq {
                continue;
            }
            let wts = w.commit_ts.clone().unwrap();
            let Some((_, older)) = writes.by_key[&op.key].iter().find(|(ts, _)| *ts < wts) else { continue };
            let (older, txid) = (older.clone(), t.txid.clone());
            h.txns[i].ops[j].value = Some(older);
            return txid;
        }
    }
    panic!("no read to make stale");
}

/// Replaces the read of `y` in a transaction that read both `x` and `y`
/// from one writer with an older value of `y`. Returns the reader's txid.
fn inject_fractured_read(h: &mut History) -> String {
    let writes = committed_writes(h);
    for i in h.txns.len() / 2..h.txns.len() {
        let t = &h.txns[i];
        let mut first_from: HashMap<usize, usize> = HashMap::new();
        for (j, op) in t.ops.iter().enumerate() {
            let Some(v) = &op.value else { continue };
            if op.op != OpKind::Read || !sole_access(&t.ops, j) {
                continue;
            }
            let Some(&wi) = writes.writer.get(v) else { continue };
            if first_from.insert(wi, j).is_none() {
                continue;
            }
            let wts = h.txns[wi].commit_ts.clone().unwrap();
            let Some((_, older)) = writes.by_key[&op.key].iter().find(|(ts, _)| *ts < wts) else { continue };
            let (older, txid) = (older.clone(), t.txid.clone());
            h.txns[i].ops[j].value = Some(older);
            return txid;
        }
    }
    panic!("no transaction read two keys from one writer");
}

/// Replaces the read of `y` in a transaction that read both `x` and `y`
/// from one unknown transaction `u` with the value an earlier committed
/// transaction of `u`'s session wrote to `y`: older than `u`'s (`u` follows
/// it), yet the reader saw `u`. Returns the reader's txid.
fn inject_read_behind_unknown(h: &mut History) -> String {
    let writes = committed_writes(h);
    let mut unknown_writer: HashMap<&str, usize> = HashMap::new();
    for (i, t) in h.txns.iter().enumerate().filter(|(_, t)| t.status == Status::Unknown) {
        for op in t.ops.iter().filter(|o| o.op == OpKind::Write) {
            unknown_writer.insert(op.value.as_deref().unwrap(), i);
        }
    }
    for i in h.txns.len() / 2..h.txns.len() {
        let t = &h.txns[i];
        let mut first_from: HashMap<usize, usize> = HashMap::new();
        for (j, op) in t.ops.iter().enumerate() {
            let Some(v) = &op.value else { continue };
            if op.op != OpKind::Read || !sole_access(&t.ops, j) {
                continue;
            }
            let Some(&ui) = unknown_writer.get(v.as_str()) else { continue };
            if first_from.insert(ui, j).is_none() {
                continue;
            }
            let u = &h.txns[ui];
            let earlier = |v: &&String| {
                let p = &h.txns[writes.writer[v.as_str()]];
                p.session == u.session && p.seq < u.seq
            };
            let Some(older) = writes.by_key.get(&op.key).into_iter().flatten().map(|(_, v)| v).find(earlier) else {
                continue;
            };
            let (older, txid) = (older.clone(), t.txid.clone());
            h.txns[i].ops[j].value = Some(older);
            return txid;
        }
    }
    panic!("no transaction read two keys from one unknown transaction");
}

fn rejected_at(report: &Report, txid: &str, kinds: &[ViolationKind]) {
    assert!(!report.is_tcc());
    assert!(report.kinds().iter().all(|k| kinds.contains(k)), "unexpected kinds:\n{report}");
    assert!(
        report.violations.iter().any(|v| v.txid.as_deref() == Some(txid) && kinds.contains(&v.kind)),
        "nothing reported at {txid}:\n{report}"
    );
}

#[test]
fn a_generated_history_of_20000_transactions_is_tcc() {
    let h = generate(&config(20_000));
    assert_eq!(h.txns.len(), 20_000);
    assert_eq!(h.finals.len(), 3);
    assert!(h.finals.iter().all(|f| f.state == h.finals[0].state && !f.state.is_empty()));
    let report = check_kinds(&h, &[]);
    assert!(report.stats.aborted > 0 && report.stats.reads > 20 * 19_000);
}

#[test]
fn the_generator_makes_stale_reads_null_reads_and_intermediate_writes() {
    // The accepted histories must exercise the checker, not just pass it:
    // some reads return a value older than the newest committed one at the
    // time (replication lag: concurrent writes), some find nothing, and
    // some writes are intermediate.
    let h = generate(&config(5_000));
    let writes = committed_writes(&h);
    let mut newest: HashMap<&str, causeway_history::CommitTs> = HashMap::new();
    let (mut stale, mut null) = (0, 0);
    for t in &h.txns {
        for op in t.ops.iter().filter(|o| o.op == OpKind::Read) {
            match &op.value {
                None => null += 1,
                // Values missing from `writes` are the reader's own.
                Some(v) => {
                    let ts = writes.writer.get(v).and_then(|&w| h.txns[w].commit_ts.as_ref());
                    if ts.is_some() && newest.get(op.key.as_str()).is_some_and(|n| Some(n) > ts) {
                        stale += 1;
                    }
                }
            }
        }
        if t.status == Status::Committed {
            for op in t.ops.iter().filter(|o| o.op == OpKind::Write) {
                newest.insert(&op.key, t.commit_ts.clone().unwrap());
            }
        }
    }
    let intermediate =
        h.txns.iter().flat_map(|t| &t.ops).filter(|o| o.value.as_deref().is_some_and(|v| v.contains('#'))).count();
    assert!(stale > 1000 && null > 100 && intermediate > 10, "stale {stale}, null {null}, intermediate {intermediate}");
    println!("stale {stale}, null {null}, intermediate {intermediate}");
}

#[test]
fn a_stale_read_injected_into_a_generated_history_is_caught() {
    let mut h = generate(&config(20_000));
    let txid = inject_stale_read(&mut h);
    rejected_at(&check(&h), &txid, &[CausalViolation, FracturedRead]);
}

#[test]
fn a_fractured_read_injected_into_a_generated_history_is_caught() {
    let mut h = generate(&SynthConfig { txns: 5_000, sessions: 20, keys: 100, ..SynthConfig::default() });
    check_kinds(&h, &[]);
    let txid = inject_fractured_read(&mut h);
    let report = check(&h);
    rejected_at(&report, &txid, &[FracturedRead, CausalViolation]);
    assert!(report.violations.iter().any(|v| v.kind == FracturedRead && v.txid.as_deref() == Some(txid.as_str())));
}

#[test]
fn a_read_of_an_aborted_write_injected_into_a_generated_history_is_caught() {
    let mut h = generate(&config(5_000));
    let value = h
        .txns
        .iter()
        .filter(|t| t.status == Status::Aborted)
        .flat_map(|t| &t.ops)
        .find(|o| o.op == OpKind::Write)
        .map(|o| (o.key.clone(), o.value.clone()))
        .expect("some aborted update");
    let t = h.txns.len() - 1;
    h.txns[t].ops.push(Op::read(value.0, value.1));
    let report = check(&h);
    // The last transaction may already have accessed the key.
    rejected_at(&report, &h.txns[t].txid.clone(), &[AbortedRead, InternalRead]);
}

#[test]
fn a_dc_that_lost_a_replicated_write_is_caught() {
    let mut h = generate(&config(2_000));
    let key = h.finals[2].state.keys().nth(7).unwrap().clone();
    h.finals[2].state.remove(&key);
    let report = check_kinds(&h, &[Divergence]);
    assert_eq!(report.violations[0].key.as_deref(), Some(key.as_str()));
}

#[test]
fn one_long_session_is_checked_without_deep_recursion() {
    let h = generate(&SynthConfig { txns: 60_000, sessions: 1, dcs: 1, keys: 500, ..SynthConfig::default() });
    check_kinds(&h, &[]);
}

#[test]
fn a_generated_history_survives_the_jsonl_round_trip() {
    let h = generate(&config(1_000));
    let again = History::read_jsonl(h.to_jsonl_string().as_bytes()).unwrap();
    assert_eq!(again, h);
    check_kinds(&again, &[]);
}

fn with_unknown(seed: u64) -> SynthConfig {
    SynthConfig { txns: 5_000, sessions: 20, keys: 100, unknown_percent: 20, seed, ..SynthConfig::default() }
}

/// A fifth of the updates recorded as `unknown`, whether they committed or
/// aborted: for their real outcomes the history is TCC, so the checker must
/// accept it — and with hot keys, many of their writes are read, so it is
/// judging them, not skipping them.
#[test]
fn generated_histories_with_unknown_outcomes_are_tcc() {
    for seed in 1..=3 {
        let h = generate(&with_unknown(seed));
        let report = check_kinds(&h, &[]);
        assert!(report.stats.unknown > 500 && report.stats.aborted > 0, "{report}");
        let unknown_values: std::collections::HashSet<&str> = h
            .txns
            .iter()
            .filter(|t| t.status == Status::Unknown)
            .flat_map(|t| t.ops.iter().filter(|o| o.op == OpKind::Write).map(move |o| (t, o)))
            .map(|(_, o)| o.value.as_deref().unwrap())
            .collect();
        let reads_of_unknown = h
            .txns
            .iter()
            .flat_map(|t| t.ops.iter().filter(|o| o.op == OpKind::Read).map(move |o| (t, o)))
            .filter(|(t, o)| {
                o.value
                    .as_deref()
                    .is_some_and(|v| unknown_values.contains(v) && !v.starts_with(&format!("{}:", t.txid)))
            })
            .count();
        let in_finals = h.finals[0].state.values().filter(|v| unknown_values.contains(v.as_str())).count();
        assert!(
            reads_of_unknown > 1000 && in_finals > 5,
            "reads of unknown writes {reads_of_unknown}, in finals {in_finals}"
        );
    }
}

#[test]
fn a_read_behind_an_unknown_transaction_injected_into_a_generated_history_is_caught() {
    let mut h = generate(&with_unknown(7));
    check_kinds(&h, &[]);
    let txid = inject_read_behind_unknown(&mut h);
    let report = check(&h);
    rejected_at(&report, &txid, &[FracturedRead]);
    assert!(report.violations[0].message.contains("(outcome unknown)"), "{report}");
}
