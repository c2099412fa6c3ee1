//! Everything the later passes look up, built once: strings interned to
//! dense ids, commit timestamps turned into ranks, sessions turned into
//! chains, and per key the committed writers grouped by session (and,
//! apart, the writers whose outcome is unknown).
//!
//! The point is that the hot loops (one step per read) compare `u32`s and
//! index arrays instead of hashing strings or comparing `CommitTs` vectors.
//! The format checks that fall out of building these tables (duplicate
//! txids, a value written twice, commit_ts problems, session order) are
//! reported here as they are found.

use super::{Found, ViolationKind, NONE};
use crate::format::{History, OpKind, StampElem, Status};
use rustc_hash::FxHashMap;

/// Where a written value came from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteRef {
    pub txn: u32,
    pub key: u32,
    /// The transaction's last write of the key: the only one others may see.
    pub is_final: bool,
    /// For final writes, an index into `Index::write_slot`; NONE otherwise.
    pub write: u32,
}

/// The committed writers of one key inside one session, a slice of the
/// `Writers` arrays sorted by session position.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Segment {
    pub session: u32,
    pub start: u32,
    pub end: u32,
}

/// Per key, per session, the committed writers sorted by session position,
/// with the running maximum of their ranks.
///
/// A transaction's causal past contains a *prefix* of every session (session
/// order is part of causality), so "the newest write of `k` in my causal
/// past" is, per session, a prefix maximum found by one binary search. The
/// running maximum (rather than the last element) keeps the answer exact
/// even when a session's commit timestamps go backwards, which is reported
/// separately as `SessionArbitration`.
#[derive(Default)]
pub(crate) struct Writers {
    /// `key_segs[k]..key_segs[k + 1]` are the segments of key `k`.
    pub key_segs: Vec<u32>,
    pub segs: Vec<Segment>,
    pub pos: Vec<u32>,
    pub rank: Vec<u32>,
    pub txn: Vec<u32>,
    pub pmax_rank: Vec<u32>,
    pub pmax_txn: Vec<u32>,
    /// The last-writer-wins winner of each key: (rank, txn), rank 0 if none.
    pub key_max: Vec<(u32, u32)>,
    /// The rank of each key's newest delete, 0 if none.
    pub key_max_delete: Vec<u32>,
}

impl Writers {
    pub fn segments(&self, key: u32) -> &[Segment] {
        let k = key as usize;
        &self.segs[self.key_segs[k] as usize..self.key_segs[k + 1] as usize]
    }
}

pub(crate) struct Index<'h> {
    pub history: &'h History,
    pub committed: Vec<bool>,
    /// Status `unknown`: possibly committed. Not committed, not aborted.
    pub unknown: Vec<bool>,
    /// Committed with at least one write: takes part in arbitration.
    pub update: Vec<bool>,
    /// Position in the commit_ts order, from 1; 0 when the transaction is
    /// not a committed update or has no usable commit_ts.
    pub rank: Vec<u32>,
    pub session: Vec<u32>,
    pub sessions: usize,
    /// 1-based position among the committed transactions of the session
    /// (0 for aborted and unknown ones). Those are left out so that
    /// positions index exactly the transactions that precede their session
    /// successors: an aborted one precedes nothing, and an unknown one does
    /// not precede the later transactions of its session (its client never
    /// learned that it committed, so could not carry it into them).
    pub pos: Vec<u32>,
    /// The position of the last committed transaction before this one in
    /// its session: the bound of its strict causal past in its own session.
    pub own_bound: Vec<u32>,
    /// That transaction itself, or NONE.
    pub session_pred: Vec<u32>,
    /// Update transactions already reported for `SessionArbitration`, so the
    /// causal pass does not report the same inversion a second time.
    pub session_inverted: Vec<bool>,
    pub keys: FxHashMap<&'h str, u32>,
    pub key_names: Vec<&'h str>,
    pub values: FxHashMap<&'h str, WriteRef>,
    /// Every final write or delete: (key, txn, is a delete), indexed by
    /// `WriteRef::write` for writes.
    final_writes: Vec<(u32, u32, bool)>,
    /// Where each final write sits in the `Writers` arrays; NONE when its
    /// transaction has no rank.
    pub write_slot: Vec<u32>,
    /// The keys each ranked or unknown transaction finally deleted.
    pub deletes_by_txn: FxHashMap<u32, Vec<u32>>,
    /// Per key, whether a committed or unknown transaction finally deletes
    /// it (with or without a commit_ts): then a read of null of it may
    /// have read a delete rather than the initial state.
    pub key_deleted: Vec<bool>,
    pub writers: Writers,
    /// Per key, the final writes of unknown transactions: (txn, is a
    /// delete). They have no commit_ts, so they are not in `writers`; the
    /// causal pass orders them by bounds instead. Only keys they wrote.
    pub unknown_writers: FxHashMap<u32, Vec<(u32, bool)>>,
}

impl<'h> Index<'h> {
    pub fn build(history: &'h History, found: &mut Found) -> Index<'h> {
        let n = history.txns.len();
        assert!(n < NONE as usize, "a history of more than 2^32 - 1 transactions");
        let mut ix = Index {
            history,
            committed: history.txns.iter().map(|t| t.status == Status::Committed).collect(),
            unknown: history.txns.iter().map(|t| t.status == Status::Unknown).collect(),
            update: vec![false; n],
            rank: vec![0; n],
            session: vec![0; n],
            sessions: 0,
            pos: vec![0; n],
            own_bound: vec![0; n],
            session_pred: vec![NONE; n],
            session_inverted: vec![false; n],
            keys: FxHashMap::default(),
            key_names: Vec::new(),
            values: FxHashMap::default(),
            final_writes: Vec::new(),
            write_slot: Vec::new(),
            deletes_by_txn: FxHashMap::default(),
            key_deleted: Vec::new(),
            writers: Writers::default(),
            unknown_writers: FxHashMap::default(),
        };
        ix.intern(found);
        ix.rank_commit_timestamps(found);
        ix.chain_sessions(found);
        ix.group_writers();
        ix
    }

    pub fn txid(&self, t: u32) -> &'h str {
        &self.history.txns[t as usize].txid
    }

    pub fn key_id(&self, key: &str) -> Option<u32> {
        self.keys.get(key).copied()
    }

    /// What `t` finally wrote to `key`, for messages: the value quoted, or
    /// "a delete".
    pub fn final_value(&self, t: u32, key: u32) -> String {
        let name = self.key_names[key as usize];
        let last = self.history.txns[t as usize]
            .ops
            .iter()
            .rev()
            .find(|op| matches!(op.op, OpKind::Write | OpKind::Delete) && op.key == name);
        match last {
            Some(op) if op.op == OpKind::Delete => "a delete".to_string(),
            Some(op) => format!("{:?}", op.value.as_deref().unwrap_or("?")),
            None => "?".to_string(),
        }
    }

    /// Whether `t`'s final write of `key` is a delete.
    pub fn deleted(&self, t: u32, key: u32) -> bool {
        self.deletes_by_txn.get(&t).is_some_and(|keys| keys.contains(&key))
    }

    /// Whether the last-writer-wins winner of `key` is a delete.
    pub fn winner_deletes(&self, key: u32) -> bool {
        let rank = self.writers.key_max[key as usize].0;
        rank > 0 && rank == self.writers.key_max_delete[key as usize]
    }

    /// Whether the history has transactions of unknown outcome at all; when
    /// it has none, every pass runs exactly as for committed and aborted.
    pub fn has_unknown(&self) -> bool {
        self.unknown.iter().any(|&u| u)
    }

    /// The unknown transactions' final writes of `key`: (txn, is a delete).
    pub fn unknown_writers_of(&self, key: u32) -> &[(u32, bool)] {
        self.unknown_writers.get(&key).map_or(&[], Vec::as_slice)
    }

    /// "txid (commit_ts [..])", or "txid (outcome unknown)", for messages.
    pub fn describe_writer(&self, t: u32) -> String {
        if self.unknown[t as usize] {
            return format!("{} (outcome unknown)", self.txid(t));
        }
        match &self.history.txns[t as usize].commit_ts {
            Some(ts) => format!("{} (commit_ts {ts})", self.txid(t)),
            None => self.txid(t).to_string(),
        }
    }

    /// Txids, sessions, keys and written values to dense ids; the format
    /// rules about uniqueness are checked on the way.
    fn intern(&mut self, found: &mut Found) {
        let history = self.history;
        let mut txids: FxHashMap<&str, u32> = FxHashMap::default();
        let mut sessions: FxHashMap<&str, u32> = FxHashMap::default();
        let mut written_keys: Vec<&str> = Vec::new();
        for (i, t) in history.txns.iter().enumerate() {
            let ti = i as u32;
            if let Some(&first) = txids.get(t.txid.as_str()) {
                let message = format!("txid already used by transaction #{} of the history", first + 1);
                found.txn(ViolationKind::Malformed, ti, t, None, message);
            } else {
                txids.insert(&t.txid, ti);
            }
            let next = sessions.len() as u32;
            self.session[i] = *sessions.entry(&t.session).or_insert(next);

            // A write is final when no later write of the same key follows
            // it; transactions write few keys, so a backwards scan with a
            // small list is cheaper than a map.
            written_keys.clear();
            for op in t.ops.iter().rev() {
                let value = match (op.op, op.value.as_deref()) {
                    (OpKind::Read, _) => continue,
                    (OpKind::Write, None) => {
                        found.txn(ViolationKind::Malformed, ti, t, Some(&op.key), "writes null".to_string());
                        continue;
                    }
                    (OpKind::Delete, Some(v)) => {
                        let message = format!("deletes the key yet carries the value {v:?}");
                        found.txn(ViolationKind::Malformed, ti, t, Some(&op.key), message);
                        continue;
                    }
                    (OpKind::Write, Some(v)) => Some(v),
                    (OpKind::Delete, None) => None,
                };
                self.update[i] = true;
                let is_final = !written_keys.contains(&op.key.as_str());
                if is_final {
                    written_keys.push(&op.key);
                }
                let next = self.key_names.len() as u32;
                let key = *self.keys.entry(&op.key).or_insert(next);
                if key == next {
                    self.key_names.push(&op.key);
                }
                let Some(value) = value else {
                    // A delete: a writer of the key with no value to read.
                    if is_final {
                        self.final_writes.push((key, ti, true));
                    }
                    continue;
                };
                match self.values.get(value) {
                    Some(prev) => found.txn(
                        ViolationKind::Malformed,
                        ti,
                        t,
                        Some(&op.key),
                        format!(
                            "writes {value:?}, a value {} already wrote; values must be unique",
                            history.txns[prev.txn as usize].txid
                        ),
                    ),
                    None => {
                        let write = if is_final { self.final_writes.len() as u32 } else { NONE };
                        if is_final {
                            self.final_writes.push((key, ti, false));
                        }
                        self.values.insert(value, WriteRef { txn: ti, key, is_final, write });
                    }
                }
            }
            self.update[i] &= self.committed[i];
            if self.unknown[i] && t.commit_ts.is_some() {
                found.txn(
                    ViolationKind::Malformed,
                    ti,
                    t,
                    None,
                    "an unknown transaction carries a commit_ts; its client cannot know one, so it is ignored".into(),
                );
            }
            if self.update[i] && t.commit_ts.is_none() {
                found.txn(
                    ViolationKind::Malformed,
                    ti,
                    t,
                    None,
                    "a committed transaction with writes has no commit_ts; its writes cannot be arbitrated".into(),
                );
            }
        }
        self.sessions = sessions.len();
    }

    /// Sorts the committed updates by commit_ts once, so that every later
    /// comparison is between two integers.
    fn rank_commit_timestamps(&mut self, found: &mut Found) {
        let txns = &self.history.txns;
        let mut stamped: Vec<u32> = (0..txns.len() as u32)
            .filter(|&t| self.update[t as usize] && txns[t as usize].commit_ts.is_some())
            .collect();

        // Mixed element types at one position: the order is still total
        // (numbers sort first) but means nothing, so say so once per position.
        let mut first_of_type: Vec<[Option<u32>; 2]> = Vec::new();
        for &t in &stamped {
            let ts = txns[t as usize].commit_ts.as_ref().expect("filtered");
            for (p, e) in ts.0.iter().enumerate() {
                if first_of_type.len() <= p {
                    first_of_type.resize(p + 1, [None, None]);
                }
                let slot = &mut first_of_type[p][matches!(e, StampElem::Str(_)) as usize];
                slot.get_or_insert(t);
            }
        }
        for (p, slots) in first_of_type.iter().enumerate() {
            if let [Some(a), Some(b)] = *slots {
                found.txn(
                    ViolationKind::ArbitrationContradiction,
                    b,
                    &txns[b as usize],
                    None,
                    format!(
                        "commit_ts {} has a string at position {p} where {} has a number",
                        txns[b as usize].commit_ts.as_ref().expect("stamped"),
                        self.describe_writer(a),
                    ),
                );
            }
        }

        stamped.sort_by(|&a, &b| txns[a as usize].commit_ts.cmp(&txns[b as usize].commit_ts).then(a.cmp(&b)));
        let mut rank = 0u32;
        for (i, &t) in stamped.iter().enumerate() {
            let ts = &txns[t as usize].commit_ts;
            if i > 0 && ts == &txns[stamped[i - 1] as usize].commit_ts {
                let first = stamped[i - 1];
                found.txn(
                    ViolationKind::DuplicateCommitTs,
                    t,
                    &txns[t as usize],
                    None,
                    format!(
                        "has commit_ts {}, the same as {}",
                        ts.as_ref().expect("stamped"),
                        txns[first as usize].txid
                    ),
                );
            } else {
                rank += 1;
            }
            self.rank[t as usize] = rank;
        }
    }

    /// Orders each session by `seq` and numbers its committed transactions.
    /// Also checks that commit timestamps grow along each session, which
    /// needs nothing but this order.
    fn chain_sessions(&mut self, found: &mut Found) {
        let txns = &self.history.txns;
        let mut order: Vec<u32> = (0..txns.len() as u32).collect();
        order.sort_unstable_by_key(|&t| (self.session[t as usize], txns[t as usize].seq, t));
        let mut i = 0;
        while i < order.len() {
            let session = self.session[order[i] as usize];
            let mut last = NONE;
            let mut last_pos = 0;
            let mut newest: (u32, u32) = (0, NONE); // (rank, txn) of the newest update so far
            let mut prev: Option<u32> = None;
            while i < order.len() && self.session[order[i] as usize] == session {
                let t = order[i];
                let tu = t as usize;
                let rec = &txns[tu];
                if let Some(p) = prev {
                    if txns[p as usize].seq == rec.seq {
                        found.txn(
                            ViolationKind::Malformed,
                            t,
                            rec,
                            None,
                            format!(
                                "seq {} of session {} is also used by {}",
                                rec.seq, rec.session, txns[p as usize].txid
                            ),
                        );
                    }
                }
                prev = Some(t);
                self.own_bound[tu] = last_pos;
                self.session_pred[tu] = last;
                if self.committed[tu] {
                    last_pos += 1;
                    self.pos[tu] = last_pos;
                    last = t;
                }
                let rank = self.rank[tu];
                if rank > 0 {
                    if newest.0 > rank {
                        self.session_inverted[tu] = true;
                        found.txn(
                            ViolationKind::SessionArbitration,
                            t,
                            rec,
                            None,
                            format!(
                                "has commit_ts {} but {}, earlier in session {}, has the larger {}",
                                rec.commit_ts.as_ref().expect("ranked"),
                                txns[newest.1 as usize].txid,
                                rec.session,
                                txns[newest.1 as usize].commit_ts.as_ref().expect("ranked"),
                            ),
                        );
                    }
                    newest = newest.max((rank, t));
                }
                i += 1;
            }
        }
    }

    /// Builds [`Writers`] from the final writes of ranked transactions, and
    /// the lists of unknown transactions' final writes.
    fn group_writers(&mut self) {
        let keys = self.key_names.len();
        let w = &mut self.writers;
        w.key_max_delete = vec![0; keys];
        self.key_deleted = vec![false; keys];
        // (key, session, pos, rank, txn, write)
        let mut all: Vec<(u32, u32, u32, u32, u32, u32)> = Vec::with_capacity(self.final_writes.len());
        for (write, &(key, txn, delete)) in self.final_writes.iter().enumerate() {
            let t = txn as usize;
            self.key_deleted[key as usize] |= delete && (self.committed[t] || self.unknown[t]);
            if self.unknown[t] {
                self.unknown_writers.entry(key).or_default().push((txn, delete));
                if delete {
                    self.deletes_by_txn.entry(txn).or_default().push(key);
                }
            } else if self.rank[t] > 0 {
                all.push((key, self.session[t], self.pos[t], self.rank[t], txn, write as u32));
                if delete {
                    let newest = &mut w.key_max_delete[key as usize];
                    *newest = (*newest).max(self.rank[t]);
                    self.deletes_by_txn.entry(txn).or_default().push(key);
                }
            }
        }
        self.write_slot = vec![NONE; self.final_writes.len()];
        all.sort_unstable();
        w.key_segs = Vec::with_capacity(keys + 1);
        w.key_max = vec![(0, NONE); keys];
        let mut j = 0;
        for key in 0..keys as u32 {
            w.key_segs.push(w.segs.len() as u32);
            while j < all.len() && all[j].0 == key {
                let session = all[j].1;
                let start = w.pos.len() as u32;
                let mut best = (0u32, NONE);
                while j < all.len() && all[j].0 == key && all[j].1 == session {
                    let (_, _, pos, rank, txn, write) = all[j];
                    best = best.max((rank, txn));
                    self.write_slot[write as usize] = w.pos.len() as u32;
                    w.pos.push(pos);
                    w.rank.push(rank);
                    w.txn.push(txn);
                    w.pmax_rank.push(best.0);
                    w.pmax_txn.push(best.1);
                    j += 1;
                }
                w.segs.push(Segment { session, start, end: w.pos.len() as u32 });
                w.key_max[key as usize] = w.key_max[key as usize].max(best);
            }
        }
        w.key_segs.push(w.segs.len() as u32);
    }
}
