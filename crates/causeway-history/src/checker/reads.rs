//! The first pass over reads: each read on its own, in program order inside
//! its transaction. It names the writer of every read, reports the reads
//! that are wrong whatever the causal order (unknown values, aborted,
//! intermediate, future, internal), and leaves for the causal pass only the
//! external reads that *could* miss a newer write.
//!
//! This is the pass that hashes strings (one lookup per read), so it runs
//! on several threads; it needs nothing but the read-only [`Index`]. When
//! serializability is judged it also keeps every external read it resolved,
//! so that the serialization graph is built without hashing them again.

use super::index::Index;
use super::{Found, ViolationKind, NONE};
use crate::format::{OpKind, TxnRecord};
use rustc_hash::FxHashMap;
use std::ops::Range;

/// An external read the causal pass must judge: some committed write of
/// its key is newer than what it returned, or the key has writers of
/// unknown outcome, or the read returned one of their writes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExtRead {
    /// Index of the read in its transaction's ops, for messages.
    pub op: u32,
    pub key: u32,
    /// The writing transaction, or NONE for a read of null.
    pub writer: u32,
    /// The write's entry in the `Writers` arrays, or NONE for a read of null
    /// or of an unknown transaction's write (those are not in `Writers`).
    pub slot: u32,
}

/// Per transaction (CSR layout): the external reads left to judge, and the
/// committed or unknown transactions it read from directly (sorted,
/// distinct, never itself) — its reads-from predecessors. An unknown
/// transaction read from did commit.
///
/// When asked for, also every external read of a committed or unknown
/// transaction's final or intermediate write, or of null of a key someone
/// wrote (`all`); `slot` is NONE there unless the writer has a rank and the
/// write is final. Reads already found wrong on their own (unknown values,
/// aborted writes, future reads) are not among them.
pub(crate) struct Resolved {
    pub ext_start: Vec<u32>,
    pub ext: Vec<ExtRead>,
    pub wr_start: Vec<u32>,
    pub wr: Vec<u32>,
    /// Empty unless asked for.
    pub all_start: Vec<u32>,
    pub all: Vec<ExtRead>,
}

impl Resolved {
    /// Nothing resolved yet; `all` is kept only when `keep_all`.
    fn empty(keep_all: bool) -> Resolved {
        Resolved {
            ext_start: vec![0],
            ext: Vec::new(),
            wr_start: vec![0],
            wr: Vec::new(),
            all_start: if keep_all { vec![0] } else { Vec::new() },
            all: Vec::new(),
        }
    }

    pub fn ext_reads(&self, t: u32) -> &[ExtRead] {
        &self.ext[self.ext_start[t as usize] as usize..self.ext_start[t as usize + 1] as usize]
    }

    pub fn read_from(&self, t: u32) -> &[u32] {
        &self.wr[self.wr_start[t as usize] as usize..self.wr_start[t as usize + 1] as usize]
    }

    /// Every external read of `t` that names a writer or reads null (see
    /// above); empty when they were not kept.
    pub fn all_reads(&self, t: u32) -> &[ExtRead] {
        match self.all_start.get(t as usize + 1) {
            Some(&end) => &self.all[self.all_start[t as usize] as usize..end as usize],
            None => &[],
        }
    }
}

/// Below this many transactions threads cost more than they save.
const PARALLEL_FROM: usize = 20_000;

/// Resolves every read; `keep_all`: also keep every external read, for the
/// serialization graph.
pub(crate) fn resolve(ix: &Index, keep_all: bool, found: &mut Found) -> Resolved {
    let n = ix.history.txns.len();
    let threads =
        if n < PARALLEL_FROM { 1 } else { std::thread::available_parallelism().map_or(1, |p| p.get()).min(4) };
    let chunks: Vec<(Resolved, Found)> = if threads == 1 {
        vec![resolve_range(ix, 0..n, keep_all)]
    } else {
        let per = n.div_ceil(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|c| {
                    let range = (c * per).min(n)..((c + 1) * per).min(n);
                    scope.spawn(move || resolve_range(ix, range, keep_all))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("read resolution thread panicked")).collect()
        })
    };
    let mut out = Resolved::empty(keep_all);
    for (part, part_found) in chunks {
        let (ext_base, wr_base, all_base) = (out.ext.len() as u32, out.wr.len() as u32, out.all.len() as u32);
        out.ext_start.extend(part.ext_start[1..].iter().map(|s| s + ext_base));
        out.wr_start.extend(part.wr_start[1..].iter().map(|s| s + wr_base));
        out.all_start.extend(part.all_start.iter().skip(1).map(|s| s + all_base));
        out.ext.extend(part.ext);
        out.wr.extend(part.wr);
        out.all.extend(part.all);
        found.extend(part_found);
    }
    out
}

/// What a transaction already did to a key, which decides its next read.
#[derive(Clone, Copy)]
enum Seen<'h> {
    /// Wrote a value, or deleted the key (`None`).
    Wrote(Option<&'h str>),
    Read(Option<&'h str>),
}

fn shown(value: Option<&str>) -> String {
    match value {
        Some(v) => format!("{v:?}"),
        None => "null".to_string(),
    }
}

fn resolve_range(ix: &Index, range: Range<usize>, keep_all: bool) -> (Resolved, Found) {
    let mut out = Resolved::empty(keep_all);
    let mut found = Found::default();
    let mut seen: FxHashMap<&str, Seen> = FxHashMap::default();
    let mut read_from: Vec<u32> = Vec::new();
    for i in range {
        let t = i as u32;
        let rec = &ix.history.txns[i];
        seen.clear();
        read_from.clear();
        for (oi, op) in rec.ops.iter().enumerate() {
            let got = op.value.as_deref();
            match op.op {
                // A write of null or a delete with a value is malformed
                // (reported by the index); it changes nothing a later read
                // could see.
                OpKind::Write => {
                    if let Some(v) = got {
                        seen.insert(&op.key, Seen::Wrote(Some(v)));
                    }
                    continue;
                }
                OpKind::Delete => {
                    if got.is_none() {
                        seen.insert(&op.key, Seen::Wrote(None));
                    }
                    continue;
                }
                OpKind::Read => {}
            }
            match seen.get(op.key.as_str()) {
                Some(&Seen::Wrote(mine)) => {
                    if got != mine {
                        let did = match mine {
                            Some(v) => format!("writing {v:?}"),
                            None => "deleting it".to_string(),
                        };
                        found.txn(
                            ViolationKind::InternalRead,
                            t,
                            rec,
                            Some(&op.key),
                            format!("reads {} after {did} in the same transaction", shown(got)),
                        );
                    }
                }
                Some(&Seen::Read(before)) => {
                    if got != before {
                        found.txn(
                            ViolationKind::InternalRead,
                            t,
                            rec,
                            Some(&op.key),
                            format!(
                                "reads {} after reading {} in the same transaction: its snapshot changed",
                                shown(got),
                                shown(before)
                            ),
                        );
                    }
                }
                None => {
                    seen.insert(&op.key, Seen::Read(got));
                    let read = external(ix, t, rec, oi as u32, &mut out.ext, &mut read_from, &mut found);
                    if let Some(read) = read.filter(|_| keep_all) {
                        out.all.push(read);
                    }
                }
            }
        }
        read_from.sort_unstable();
        read_from.dedup();
        out.wr.extend_from_slice(&read_from);
        out.ext_start.push(out.ext.len() as u32);
        out.wr_start.push(out.wr.len() as u32);
        if keep_all {
            out.all_start.push(out.all.len() as u32);
        }
    }
    (out, found)
}

/// The first read of a key the transaction has not written: it must come
/// from a committed (or unknown, which then committed) final write of that
/// key by another transaction. Returns the read as the serialization graph
/// sees it; None for a read of a key nobody wrote, and for a read that is
/// wrong on its own (a value nobody wrote, an aborted write, its own write
/// before it made it).
fn external(
    ix: &Index,
    t: u32,
    rec: &TxnRecord,
    oi: u32,
    ext: &mut Vec<ExtRead>,
    read_from: &mut Vec<u32>,
    found: &mut Found,
) -> Option<ExtRead> {
    let op = &rec.ops[oi as usize];
    let key = ix.key_id(&op.key);
    let Some(value) = op.value.as_deref() else {
        // A read of null is judged by the causal pass, if anyone wrote the key.
        let read = ExtRead { op: oi, key: key?, writer: NONE, slot: NONE };
        if ix.writers.key_max[read.key as usize].0 > 0 || ix.unknown_writers.contains_key(&read.key) {
            ext.push(read);
        }
        return Some(read);
    };
    let Some(&w) = ix.values.get(value) else {
        found.txn(
            ViolationKind::UnknownValue,
            t,
            rec,
            Some(&op.key),
            format!("reads {value:?}, which no transaction wrote"),
        );
        return None;
    };
    if Some(w.key) != key {
        found.txn(
            ViolationKind::UnknownValue,
            t,
            rec,
            Some(&op.key),
            format!(
                "reads {value:?}, which {} wrote to key {}, not to this key",
                ix.txid(w.txn),
                ix.key_names[w.key as usize]
            ),
        );
        return None;
    }
    if w.txn == t {
        found.txn(
            ViolationKind::FutureRead,
            t,
            rec,
            Some(&op.key),
            format!("reads {value:?}, its own write, before writing it"),
        );
        return None;
    }
    if !ix.committed[w.txn as usize] && !ix.unknown[w.txn as usize] {
        found.txn(
            ViolationKind::AbortedRead,
            t,
            rec,
            Some(&op.key),
            format!("reads {value:?}, written by {}, which aborted", ix.txid(w.txn)),
        );
        return None;
    }
    // The writer committed (an unknown one too: this read proves it), so
    // this read is an observation of it whatever else is wrong with the
    // read: it orders the writer before the reader.
    read_from.push(w.txn);
    let unranked = ExtRead { op: oi, key: w.key, writer: w.txn, slot: NONE };
    if !w.is_final {
        found.txn(
            ViolationKind::IntermediateRead,
            t,
            rec,
            Some(&op.key),
            format!(
                "reads {value:?}, which {} overwrote with {} before committing",
                ix.txid(w.txn),
                ix.final_value(w.txn, w.key)
            ),
        );
        return Some(unranked);
    }
    let key_max = ix.writers.key_max[w.key as usize].0;
    let unknown_writers = ix.unknown_writers_of(w.key);
    if ix.unknown[w.txn as usize] {
        // No commit_ts: the causal pass orders it by bounds, against the
        // committed writers of the key and the other unknown ones.
        if key_max > 0 || unknown_writers.len() > 1 {
            ext.push(unranked);
        }
        return Some(unranked);
    }
    let rank = ix.rank[w.txn as usize];
    // A writer without a rank has no commit_ts (reported as malformed) and
    // cannot be compared; a writer that is the key's last-writer-wins winner
    // cannot be overtaken by anything committed in the causal past, only by
    // an unknown writer of the key.
    let read = ExtRead { slot: ix.write_slot[w.write as usize], ..unranked };
    if rank > 0 && (rank < key_max || !unknown_writers.is_empty()) {
        ext.push(read);
    }
    Some(read)
}
