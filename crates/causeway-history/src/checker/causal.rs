//! The causal order hb = (so ∪ wr)+ and everything judged against it: the
//! reads that miss a newer write in their causal past, cycles, and commit
//! timestamps that contradict causality.
//!
//! hb is never materialised. Each transaction gets a vector clock over
//! sessions — for every session, how long a prefix of it lies in the
//! transaction's causal past — computed in one pass in topological order
//! from its direct predecessors (its session predecessor and the
//! transactions it read from). A clock is freed as soon as its last
//! successor has merged it, so memory follows the width of the history
//! (how many transactions are still "open"), not its length.
//!
//! Aborted transactions are not part of hb: nothing follows them. Their
//! reads are still judged, as sinks: an aborted transaction must also have
//! read a causal snapshot.
//!
//! Transactions of unknown outcome are part of hb through reads-from only:
//! they follow their session predecessors, but precede only the
//! transactions that read one of their writes (which proves they
//! committed), never their session successors. Those that are read from
//! are laid, in topological order, on extra *chains*: a chain is extended
//! by an unknown transaction whose causal past holds the chain's last one,
//! so a chain is ordered by hb like a session and gets one clock entry the
//! same way. A new chain, and a wider clock, only when no chain fits; the
//! older unknown transactions are in everybody's past, so chains are few
//! (on generated histories, about one per hundred unknown transactions).
//!
//! They have no commit_ts, so they are ordered against other writers by
//! bounds that hb forces on any commit_ts they could have had: above the
//! greatest commit_ts in their causal past (their *floor*), below the
//! least one in their causal future (their *ceiling*). A write is
//! *provably newer* than another when those bounds order them; a read is
//! judged wrong only against writes provably newer than what it returned,
//! and a delete explains a null read whenever it may be newer, so a history
//! that some choice of outcomes and commit timestamps makes TCC is never
//! rejected on their account.

use super::index::{Index, Segment, Writers};
use super::reads::{ExtRead, Resolved};
use super::{Found, ViolationKind, NONE};
use crate::format::OpKind;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// How many violations get a causal path in their message. Finding one is
/// a breadth-first search over the causal past; a badly broken history can
/// have millions of violations, and the first few explain the rest.
const PATHS_EXPLAINED: usize = 64;

/// Direct predecessors of each transaction: its session predecessor (if
/// any) first, then the transactions it read from.
struct Graph {
    start: Vec<u32>,
    preds: Vec<u32>,
}

impl Graph {
    fn build(ix: &Index, res: &Resolved) -> Graph {
        let n = ix.history.txns.len();
        let mut g = Graph { start: Vec::with_capacity(n + 1), preds: Vec::with_capacity(n + res.wr.len()) };
        for t in 0..n as u32 {
            g.start.push(g.preds.len() as u32);
            let sp = ix.session_pred[t as usize];
            if sp != NONE {
                g.preds.push(sp);
            }
            g.preds.extend(res.read_from(t).iter().copied().filter(|&w| w != sp));
        }
        g.start.push(g.preds.len() as u32);
        g
    }

    fn preds(&self, t: u32) -> &[u32] {
        &self.preds[self.start[t as usize] as usize..self.start[t as usize + 1] as usize]
    }
}

/// A topological order of the condensation of hb, and which transactions
/// lie on a cycle.
struct Components {
    /// Every transaction, predecessors before successors (the members of a
    /// cycle in some arbitrary order among themselves).
    order: Vec<u32>,
    /// For transactions on a cycle, the id of their strongly connected
    /// component; NONE for all others.
    comp: Vec<u32>,
    /// The members of each such component.
    cycles: Vec<Vec<u32>>,
}

/// Tarjan's algorithm over the predecessor edges, iterative because a
/// session can be a chain of 100,000 transactions. It emits a component
/// only after every component it can reach — that is, after all its causal
/// predecessors — so its output is the topological order we need, and it
/// finds the cycles in the same pass. Roots are taken in history order so
/// the order stays close to the file's and few clocks are alive at once.
fn components(g: &Graph, n: usize) -> Components {
    let mut index = vec![NONE; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut call: Vec<(u32, u32)> = Vec::new(); // (node, next predecessor offset)
    let mut next_index = 0u32;
    let mut out = Components { order: Vec::with_capacity(n), comp: vec![NONE; n], cycles: Vec::new() };
    for root in 0..n as u32 {
        if index[root as usize] != NONE {
            continue;
        }
        macro_rules! visit {
            ($v:expr) => {{
                let v: u32 = $v;
                index[v as usize] = next_index;
                low[v as usize] = next_index;
                next_index += 1;
                stack.push(v);
                on_stack[v as usize] = true;
                call.push((v, g.start[v as usize]));
            }};
        }
        visit!(root);
        while let Some(&(v, next)) = call.last() {
            let vu = v as usize;
            if next < g.start[vu + 1] {
                call.last_mut().expect("non-empty").1 += 1;
                let w = g.preds[next as usize];
                if index[w as usize] == NONE {
                    visit!(w);
                } else if on_stack[w as usize] {
                    low[vu] = low[vu].min(index[w as usize]);
                }
                continue;
            }
            call.pop();
            if let Some(&(u, _)) = call.last() {
                low[u as usize] = low[u as usize].min(low[vu]);
            }
            if low[vu] != index[vu] {
                continue;
            }
            let at = stack.iter().rposition(|&x| x == v).expect("v is on the stack");
            let members = stack.split_off(at);
            for &m in &members {
                on_stack[m as usize] = false;
            }
            if members.len() > 1 {
                let id = out.cycles.len() as u32;
                for &m in &members {
                    out.comp[m as usize] = id;
                }
                let mut sorted = members;
                sorted.sort_unstable();
                out.order.extend_from_slice(&sorted);
                out.cycles.push(sorted);
            } else {
                out.order.push(v);
            }
        }
    }
    out
}

/// Vector clocks in one flat buffer, recycled through a free list.
struct Clocks {
    width: usize,
    data: Vec<u32>,
    free: Vec<u32>,
}

impl Clocks {
    fn alloc(&mut self) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.get_mut(slot).fill(0);
                slot
            }
            None => {
                let slot = (self.data.len() / self.width) as u32;
                self.data.resize(self.data.len() + self.width, 0);
                slot
            }
        }
    }

    fn get(&self, slot: u32) -> &[u32] {
        let at = slot as usize * self.width;
        &self.data[at..at + self.width]
    }

    fn get_mut(&mut self, slot: u32) -> &mut [u32] {
        let at = slot as usize * self.width;
        &mut self.data[at..at + self.width]
    }

    /// Makes every clock at least `width` entries wide, the new ones 0;
    /// sixteen at a time, as every merge pays for the width. Few clocks are
    /// alive at once, so copying them is cheap.
    fn grow(&mut self, width: usize) {
        if width <= self.width {
            return;
        }
        let wider = width.max(self.width + 16);
        let slots = self.data.len() / self.width;
        let mut data = vec![0; slots * wider];
        for (old, new) in self.data.chunks_exact(self.width).zip(data.chunks_exact_mut(wider)) {
            new[..self.width].copy_from_slice(old);
        }
        self.data = data;
        self.width = wider;
    }

    /// dst = max(dst, src), entry by entry.
    fn merge(&mut self, dst: u32, src: u32) {
        let w = self.width;
        let (d, s) = (dst as usize * w, src as usize * w);
        let (dst, src) = if d < s {
            let (lo, hi) = self.data.split_at_mut(s);
            (&mut lo[d..d + w], &hi[..w])
        } else {
            let (lo, hi) = self.data.split_at_mut(d);
            (&mut hi[..w], &lo[s..s + w])
        };
        for (a, b) in dst.iter_mut().zip(src) {
            *a = (*a).max(*b);
        }
    }
}

/// The first index in a segment whose writer is newer than `rank`; the
/// running maximum makes this a binary search.
fn first_newer(w: &Writers, seg: &Segment, rank: u32) -> usize {
    let (start, end) = (seg.start as usize, seg.end as usize);
    start + w.pmax_rank[start..end].partition_point(|&r| r <= rank)
}

/// For a written version, the first newer write of its key in each session,
/// as (session, position). A read of the version misses a newer write
/// exactly when one of these lies in the reader's causal past, which is one
/// comparison with the reader's clock per entry. The list depends only on
/// the version, and a version is typically read many times, so it is built
/// once, on first use, instead of binary-searching every session per read.
struct Overtakers {
    span: Vec<(u32, u32)>,
    firsts: Vec<(u32, u32)>,
}

/// Beyond this many stored entries (8 bytes each) new lists are not kept:
/// a pathological history (one hot key, thousands of sessions) falls back
/// to searching per read rather than exhausting memory.
const OVERTAKERS_BUDGET: usize = 1 << 24;

impl Overtakers {
    fn of(&mut self, w: &Writers, slot: u32, key: u32, rank: u32) -> Option<&[(u32, u32)]> {
        let (start, end) = self.span[slot as usize];
        if start != NONE {
            return Some(&self.firsts[start as usize..end as usize]);
        }
        if self.firsts.len() >= OVERTAKERS_BUDGET {
            return None;
        }
        let start = self.firsts.len();
        for seg in w.segments(key) {
            let i = first_newer(w, seg, rank);
            if i < seg.end as usize {
                self.firsts.push((seg.session, w.pos[i]));
            }
        }
        self.span[slot as usize] = (start as u32, self.firsts.len() as u32);
        Some(&self.firsts[start..])
    }
}

/// A read found wrong, to be reported: the newest write of its key it
/// missed, and the newest of those it saw directly through another key
/// (then it is a fractured read), or NONE.
struct Finding {
    t: u32,
    op: u32,
    key: u32,
    writer: u32,
    newest: u32,
    seen_directly: u32,
}

/// A read of null that only a delete newer than its causal past explains,
/// waiting for such a delete that does not follow it causally.
struct Pending {
    /// The rank of the newest write of the key in the reader's past (or the
    /// greatest floor of an unknown writer of it there): a delete explains
    /// the read when its rank, or an unknown delete's ceiling, is above.
    need: u32,
    finding: Finding,
}

/// What the causal pass learned about the transactions of unknown outcome,
/// for the final states.
pub(crate) struct Unknowns {
    /// Per transaction (empty when the history has no unknown ones): the
    /// (rank, txn) of the committed update with the least commit_ts in its
    /// strict causal future, or (`u32::MAX`, NONE) when there is none. An
    /// unknown transaction that committed did so below it.
    pub ceiling: Vec<(u32, u32)>,
}

impl Unknowns {
    /// The ceiling of unknown transaction `t`'s commit_ts, as a rank.
    pub fn ceiling(&self, t: u32) -> u32 {
        self.ceiling.get(t as usize).map_or(u32::MAX, |c| c.0)
    }
}

/// The least ranked update in the strict causal future of every
/// transaction: one pass backwards over the topological order.
fn ceilings(ix: &Index, g: &Graph, comps: &Components) -> Vec<(u32, u32)> {
    let n = ix.history.txns.len();
    let mut ceiling = vec![(u32::MAX, NONE); n];
    for &t in comps.order.iter().rev() {
        let tu = t as usize;
        let mut mine = ceiling[tu];
        if ix.rank[tu] > 0 {
            mine = mine.min((ix.rank[tu], t));
        }
        for &p in g.preds(t) {
            // Inside a cycle there is no "before"; as in the forward pass.
            if comps.comp[tu] != NONE && comps.comp[tu] == comps.comp[p as usize] {
                continue;
            }
            let c = &mut ceiling[p as usize];
            *c = (*c).min(mine);
        }
    }
    ceiling
}

struct Pass<'a, 'h> {
    ix: &'a Index<'h>,
    res: &'a Resolved,
    g: &'a Graph,
    found: &'a mut Found,
    overtakers: Overtakers,
    paths_left: usize,
    /// Scratch for path searches: the node each visited node was reached
    /// from, valid where `seen[x] == search`.
    seen: Vec<u32>,
    parent: Vec<u32>,
    search: u32,
    /// Per key, the rank of the newest delete whose transaction the pass
    /// has reached (so it does not follow any transaction judged later).
    deletes_reached: Vec<u32>,
    /// Per key, the null reads waiting for a delete.
    pending: FxHashMap<u32, Vec<Pending>>,
    /// Per transaction, (rank, txn) of the update with the greatest
    /// commit_ts in its strict causal past, rank 0 when there is none: the
    /// floor of an unknown transaction's commit_ts.
    newest_past: Vec<(u32, u32)>,
    /// Per transaction, the ceiling of an unknown one's commit_ts (empty
    /// when the history has no unknown transactions).
    ceiling: Vec<(u32, u32)>,
    /// Per transaction, for an unknown one someone read from, its chain's
    /// clock entry and its position on the chain (from 1); (NONE, 0) for
    /// all others. Empty when the history has no unknown transactions.
    chain_pos: Vec<(u32, u32)>,
    /// Per key, the greatest rank of a committed delete of it or ceiling
    /// of an unknown one: no delete above `need` means no delete can
    /// explain a null read.
    delete_ceiling: Vec<u32>,
    /// Scratch: the unknown writers of the key being judged that lie in the
    /// reader's causal past, (txn, is a delete).
    unknown_past: Vec<(u32, bool)>,
}

/// `judge_aborted`: whether the reads of aborted transactions are held to
/// causal snapshots too. A TCC store promises every transaction one; a
/// serializable store promises nothing of a transaction it aborted (an
/// optimistic one certifies reads at commit, and aborts what saw a
/// fractured state), so its aborted transactions' reads are not judged,
/// nor those of unknown outcome that nobody read from (they may have
/// aborted).
pub(crate) fn check(ix: &Index, res: &Resolved, judge_aborted: bool, found: &mut Found) -> Unknowns {
    let n = ix.history.txns.len();
    let g = Graph::build(ix, res);
    let comps = components(&g, n);
    let overtakers = Overtakers { span: vec![(NONE, 0); ix.writers.pos.len()], firsts: Vec::new() };
    // Unknown transactions someone read from go on chains (clock entries
    // after the sessions'); the others precede nothing and need none.
    let (mut observed, mut chain_pos, mut ceiling) = (Vec::new(), Vec::new(), Vec::new());
    let mut delete_ceiling = ix.writers.key_max_delete.clone();
    if ix.has_unknown() {
        observed = vec![false; n];
        for &p in &res.wr {
            observed[p as usize] = ix.unknown[p as usize];
        }
        chain_pos = vec![(NONE, 0); n];
        ceiling = ceilings(ix, &g, &comps);
        for (&key, writers) in &ix.unknown_writers {
            for &(u, delete) in writers {
                if delete {
                    let c = &mut delete_ceiling[key as usize];
                    *c = (*c).max(ceiling[u as usize].0);
                }
            }
        }
    }
    let mut pass = Pass {
        ix,
        res,
        g: &g,
        found,
        overtakers,
        paths_left: PATHS_EXPLAINED,
        seen: Vec::new(),
        parent: Vec::new(),
        search: 0,
        deletes_reached: vec![0; ix.key_names.len()],
        pending: FxHashMap::default(),
        newest_past: vec![(0u32, NONE); n],
        ceiling,
        chain_pos,
        delete_ceiling,
        unknown_past: Vec::new(),
    };
    for members in &comps.cycles {
        pass.report_cycle(members, &comps.comp);
    }

    // Inside a cycle there is no "before", so edges between members of one
    // component are dropped; the members' clocks under-approximate their
    // causal past, which can hide violations after the cycle but not invent
    // them. The members themselves are not judged.
    let internal = |t: u32, p: u32| comps.comp[t as usize] != NONE && comps.comp[t as usize] == comps.comp[p as usize];
    let mut refs = vec![0u32; n];
    for t in 0..n as u32 {
        for &p in g.preds(t) {
            if !internal(t, p) {
                refs[p as usize] += 1;
            }
        }
    }
    let mut clocks = Clocks { width: ix.sessions.max(1), data: Vec::new(), free: Vec::new() };
    // The length of each chain of unknown transactions.
    let mut chains: Vec<u32> = Vec::new();
    let mut clock_of = vec![NONE; n];
    for &t in &comps.order {
        let tu = t as usize;
        let slot = clocks.alloc();
        clock_of[tu] = slot;
        let mut past = (0u32, NONE);
        for &p in g.preds(t) {
            if internal(t, p) {
                continue;
            }
            let pu = p as usize;
            clocks.merge(slot, clock_of[pu]);
            past = past.max(pass.newest_past[pu]);
            if ix.rank[pu] > 0 {
                past = past.max((ix.rank[pu], p));
            }
            refs[pu] -= 1;
            if refs[pu] == 0 {
                clocks.free.push(clock_of[pu]);
            }
        }
        if ix.committed[tu] {
            clocks.get_mut(slot)[ix.session[tu] as usize] = ix.pos[tu];
        } else if observed.get(tu).copied().unwrap_or(false) {
            // Onto the first chain whose last transaction precedes it, or a
            // new one.
            let clock = clocks.get(slot);
            let chain = match (0..chains.len()).find(|&c| clock[ix.sessions + c] == chains[c]) {
                Some(c) => c,
                None => {
                    chains.push(0);
                    clocks.grow(ix.sessions + chains.len());
                    chains.len() - 1
                }
            };
            chains[chain] += 1;
            let column = ix.sessions + chain;
            pass.chain_pos[tu] = (column as u32, chains[chain]);
            clocks.get_mut(slot)[column] = chains[chain];
        }
        pass.newest_past[tu] = past;
        if comps.comp[tu] == NONE {
            let clock = clocks.get(slot);
            let own = ix.session[tu] as usize;
            if !ix.committed[tu] && clock[own] > ix.own_bound[tu] {
                // An aborted or unknown transaction does not precede its
                // session successors, so this is no cycle; but a session
                // runs one transaction at a time, and this one saw (directly
                // or through others) a later one of its own.
                let rec = &ix.history.txns[tu];
                let what = if ix.unknown[tu] { "of unknown outcome" } else { "aborted" };
                pass.found.txn(
                    ViolationKind::FutureRead,
                    t,
                    rec,
                    None,
                    format!("{what}, yet its reads depend on a later transaction of its own session {}", rec.session),
                );
            }
            // Under serializability an unknown transaction nobody read from
            // may have aborted, so its reads are judged only as the cycle
            // pass judges it: once a reader proves it committed.
            let proven = ix.committed[tu] || observed.get(tu).copied().unwrap_or(false);
            if judge_aborted || proven {
                for read in res.ext_reads(t) {
                    pass.judge_read(t, read, clock);
                }
            }
            pass.reach_deletes(t, clock);
            let rank = ix.rank[tu];
            if rank > 0 && past.0 > rank && !ix.session_inverted[tu] {
                pass.report_causal_arbitration(t, past.1);
            }
        }
        if refs[tu] == 0 {
            clocks.free.push(slot);
        }
    }
    // Null reads no delete explained: they missed a write.
    let mut left: Vec<Pending> = pass.pending.drain().flat_map(|(_, list)| list).collect();
    left.sort_by_key(|p| (p.finding.t, p.finding.op));
    for p in left {
        pass.report(p.finding);
    }
    Unknowns { ceiling: pass.ceiling }
}

impl Pass<'_, '_> {
    /// Whether unknown transaction `u` lies in the causal past of the
    /// transaction whose clock is `clock` (or is that transaction: callers
    /// exclude it). Only those someone read from can be anyone's past.
    fn reaches(&self, u: u32, clock: &[u32]) -> bool {
        let (column, pos) = self.chain_pos.get(u as usize).copied().unwrap_or((NONE, 0));
        column != NONE && clock[column as usize] >= pos
    }

    /// The floor of an unknown transaction's commit_ts, as a rank: the
    /// newest committed update in its causal past (0 when none). Had it
    /// committed, its commit_ts would be above that update's.
    fn floor(&self, u: u32) -> u32 {
        self.newest_past[u as usize].0
    }

    /// The ceiling of an unknown transaction's commit_ts, as a rank: the
    /// oldest committed update in its causal future (`u32::MAX` when none).
    /// Its commit_ts would be below that update's.
    fn ceiling(&self, u: u32) -> u32 {
        self.ceiling.get(u as usize).map_or(u32::MAX, |c| c.0)
    }

    /// Fills `unknown_past` with the unknown writers of `key` in `t`'s
    /// strict causal past (only those someone read from can be there).
    fn collect_unknown_past(&mut self, t: u32, key: u32, clock: &[u32]) {
        let ix = self.ix;
        self.unknown_past.clear();
        if self.chain_pos.is_empty() {
            return;
        }
        for &(u, delete) in ix.unknown_writers_of(key) {
            if u != t && self.reaches(u, clock) {
                self.unknown_past.push((u, delete));
            }
        }
    }

    /// The core rule: among the writes of the key in the reader's strict
    /// causal past, none may be newer (in commit_ts) than the one it read.
    /// Writes of unknown transactions count only where they are provably
    /// newer: an unknown writer `u` is newer than a committed write of rank
    /// `r` when floor(u) >= r, and a committed write of rank `r` is newer
    /// than `u`'s when r >= ceiling(u).
    fn judge_read(&mut self, t: u32, read: &ExtRead, clock: &[u32]) {
        let ix = self.ix;
        let w = &ix.writers;
        self.collect_unknown_past(t, read.key, clock);
        let own_session = ix.session[t as usize];
        // A committed reader's clock counts the reader itself in its own
        // session; its strict past there ends just before it. An aborted
        // or unknown reader's clock does not count itself, and may reach
        // further (a violation reported on its own): everything it reaches
        // is its past.
        let own_bound = if ix.committed[t as usize] {
            ix.own_bound[t as usize]
        } else {
            ix.own_bound[t as usize].max(clock[own_session as usize])
        };
        // How long a prefix of session `s` precedes the reader.
        let bound = |s: u32| if s == own_session { own_bound } else { clock[s as usize] };
        let search = |above: u32| {
            w.segments(read.key).iter().any(|seg| {
                let i = first_newer(w, seg, above);
                i < seg.end as usize && w.pos[i] <= bound(seg.session)
            })
        };
        if read.writer == NONE {
            // A read of null is the read of a delete, or of no write at all:
            // it misses a write of its past unless that write is a delete,
            // or a newer delete of the key does not follow the reader.
            let (rank, newest) = w
                .segments(read.key)
                .iter()
                .filter_map(|seg| {
                    let range = seg.start as usize..seg.end as usize;
                    let before = w.pos[range.clone()].partition_point(|&p| p <= bound(seg.session));
                    (before > 0).then(|| (w.pmax_rank[range.start + before - 1], w.pmax_txn[range.start + before - 1]))
                })
                .max()
                .unwrap_or((0, NONE));
            let newest_deletes = rank > 0 && ix.deleted(newest, read.key);
            // Unknown writers in the past: a delete must be newer than the
            // value writer with the greatest floor; an unknown delete there
            // may be, up to its ceiling.
            let mut unknown_value_floor: Option<u32> = None;
            let mut unknown_delete_ceiling = 0u32;
            for &(u, delete) in &self.unknown_past {
                if delete {
                    unknown_delete_ceiling = unknown_delete_ceiling.max(self.ceiling(u));
                } else {
                    unknown_value_floor = unknown_value_floor.max(Some(self.floor(u)));
                }
            }
            let committed_value = if newest_deletes { 0 } else { rank };
            if committed_value == 0 && unknown_value_floor.is_none() {
                // No write, or the newest committed one is a delete and no
                // unknown one wrote a value.
                return;
            }
            // What a delete must be above to explain the read: the newest
            // committed value writer's rank, or an unknown one's floor.
            let need = committed_value.max(unknown_value_floor.unwrap_or(0));
            if (newest_deletes && rank > need)
                || unknown_delete_ceiling > need
                || self.deletes_reached[read.key as usize] > need
            {
                // A delete of the past newer than its values, or a newer
                // delete the pass already reached, which cannot follow the
                // reader.
                return;
            }
            let finding = self.finding(t, read, 0, 0, &bound);
            if self.delete_ceiling[read.key as usize] > need {
                // A newer delete exists, not reached yet: it explains the
                // read unless it follows the reader causally.
                self.pending.entry(read.key).or_default().push(Pending { need, finding });
            } else {
                self.report(finding);
            }
            return;
        }
        // A committed write of rank `r` is newer than the one read when
        // r > `above`; an unknown one when its floor >= `floor_from`.
        let (above, floor_from) = if ix.unknown[read.writer as usize] {
            let ceiling = self.ceiling(read.writer);
            (ceiling - 1, ceiling)
        } else {
            let rank = ix.rank[read.writer as usize];
            (rank, rank)
        };
        let committed_newer = if read.slot != NONE {
            match self.overtakers.of(w, read.slot, read.key, above) {
                Some(firsts) => {
                    let misses = firsts.iter().any(|&(s, pos)| pos <= bound(s));
                    debug_assert_eq!(misses, search(above), "the cached lists and the search disagree");
                    misses
                }
                None => search(above),
            }
        } else {
            // An unknown transaction's write: nothing committed is provably
            // newer when nothing committed follows it.
            above < u32::MAX - 1 && search(above)
        };
        let unknown_newer =
            self.unknown_past.iter().any(|&(u, _)| u != read.writer && floor_from > 0 && self.floor(u) >= floor_from);
        if !committed_newer && !unknown_newer {
            return;
        }
        let finding = self.finding(t, read, above, floor_from, &bound);
        self.report(finding);
    }

    /// The pass reached `d`: its deletes explain the null reads waiting for
    /// a newer delete of their key, unless `d` follows the reader (`clock`
    /// is `d`'s; it counts the reader's session up to the reader). An
    /// unknown delete counts with its ceiling: it may be that new.
    fn reach_deletes(&mut self, d: u32, clock: &[u32]) {
        let ix = self.ix;
        let Some(keys) = ix.deletes_by_txn.get(&d) else { return };
        let rank = if ix.unknown[d as usize] { self.ceiling(d) } else { ix.rank[d as usize] };
        let chain_pos = &self.chain_pos;
        for &key in keys {
            let reached = &mut self.deletes_reached[key as usize];
            *reached = (*reached).max(rank);
            let Some(list) = self.pending.get_mut(&key) else { continue };
            list.retain(|p| {
                let reader = p.finding.t as usize;
                let follows = if ix.committed[reader] {
                    clock[ix.session[reader] as usize] >= ix.pos[reader]
                } else {
                    let (column, pos) = chain_pos.get(reader).copied().unwrap_or((NONE, 0));
                    column != NONE && clock[column as usize] >= pos
                };
                rank <= p.need || follows
            });
        }
    }

    /// What a wrong read missed: the newest write of its key in its past
    /// that is newer than what it read (committed writes above rank
    /// `above`, unknown ones with a floor of at least `floor_from`; for a
    /// read of null, the value writes), and the newest of those it saw
    /// directly through another key — then atomic visibility is the more
    /// precise diagnosis.
    fn finding(&self, t: u32, read: &ExtRead, above: u32, floor_from: u32, bound: &dyn Fn(u32) -> u32) -> Finding {
        let ix = self.ix;
        let w = &ix.writers;
        let mut newest = (0u32, NONE);
        let mut seen_directly = (0u32, NONE);
        let read_from = self.res.read_from(t);
        for seg in w.segments(read.key) {
            let bound = bound(seg.session);
            for i in seg.start as usize..seg.end as usize {
                if w.pos[i] > bound {
                    break;
                }
                if w.rank[i] > above {
                    newest = newest.max((w.rank[i], w.txn[i]));
                    if read_from.binary_search(&w.txn[i]).is_ok() {
                        seen_directly = seen_directly.max((w.rank[i], w.txn[i]));
                    }
                }
            }
        }
        let null = read.writer == NONE;
        let mut unknown_newest: Option<(u32, u32)> = None;
        let mut unknown_seen: Option<(u32, u32)> = None;
        for &(u, delete) in &self.unknown_past {
            let floor = self.floor(u);
            let newer = if null { !delete } else { u != read.writer && floor_from > 0 && floor >= floor_from };
            if newer {
                unknown_newest = unknown_newest.max(Some((floor, u)));
                if read_from.binary_search(&u).is_ok() {
                    unknown_seen = unknown_seen.max(Some((floor, u)));
                }
            }
        }
        // Committed writers first, as without unknown ones; but for a read
        // of null a delete explains nothing, so an unknown value writer is
        // the better witness.
        let pick = |committed: u32, unknown: Option<(u32, u32)>| match unknown {
            Some((_, u)) if committed == NONE || (null && ix.deleted(committed, read.key)) => u,
            _ => committed,
        };
        Finding {
            t,
            op: read.op,
            key: read.key,
            writer: read.writer,
            newest: pick(newest.1, unknown_newest),
            seen_directly: pick(seen_directly.1, unknown_seen),
        }
    }

    /// For messages: how the write read and the newer one it missed are
    /// ordered when one of them has no commit_ts (empty otherwise).
    fn why_newer(&self, f: &Finding, newer: u32) -> String {
        let ix = self.ix;
        let mut parts = Vec::new();
        if f.writer != NONE && ix.unknown[f.writer as usize] {
            let (_, later) = self.ceiling[f.writer as usize];
            if later != NONE {
                parts.push(format!("{} precedes {} causally", ix.txid(f.writer), ix.describe_writer(later)));
            }
        }
        if f.writer != NONE && ix.unknown[newer as usize] {
            let (_, earlier) = self.newest_past[newer as usize];
            if earlier != NONE {
                parts.push(format!("{} follows {} causally", ix.txid(newer), ix.describe_writer(earlier)));
            }
        }
        if parts.is_empty() {
            return String::new();
        }
        format!(" (no commit_ts to compare; ordered by causality: {})", parts.join(", "))
    }
    fn report(&mut self, f: Finding) {
        let ix = self.ix;
        let t = f.t;
        let rec = &ix.history.txns[t as usize];
        let op = &rec.ops[f.op as usize];
        let got = match &op.value {
            Some(v) => format!("{v:?} from {}", ix.describe_writer(f.writer)),
            None => "null".to_string(),
        };
        if f.seen_directly != NONE {
            let w2 = f.seen_directly;
            let other = self.key_read_from(t, w2, &op.key);
            let why = self.why_newer(&f, w2);
            let message = format!(
                "reads {got}, but it read {} from {}, which also wrote {} to this key: it saw only part of {}'s writes{why}",
                other.map_or_else(|| "another key".to_string(), |k| format!("key {k}")),
                ix.describe_writer(w2),
                ix.final_value(w2, f.key),
                ix.txid(w2),
            );
            self.found.txn(ViolationKind::FracturedRead, t, rec, Some(&op.key), message);
        } else {
            let w2 = f.newest;
            let path = self.explain_path(w2, t);
            let why = self.why_newer(&f, w2);
            let message = format!(
                "reads {got}, but {} wrote {} to this key, newer, and precedes it causally{path}{why}",
                ix.describe_writer(w2),
                ix.final_value(w2, f.key),
            );
            self.found.txn(ViolationKind::CausalViolation, t, rec, Some(&op.key), message);
        }
    }

    fn report_causal_arbitration(&mut self, t: u32, earlier: u32) {
        let ix = self.ix;
        let rec = &ix.history.txns[t as usize];
        let path = self.explain_path(earlier, t);
        let message = format!(
            "has commit_ts {} but {} precedes it causally{path}",
            rec.commit_ts.as_ref().expect("ranked"),
            ix.describe_writer(earlier),
        );
        self.found.txn(ViolationKind::CausalArbitration, t, rec, None, message);
    }

    fn report_cycle(&mut self, members: &[u32], comp: &[u32]) {
        let ix = self.ix;
        let start = members[0];
        let id = comp[start as usize];
        // Every member of a component has a predecessor inside it; the
        // shortest chain from `start` to that predecessor closes a cycle.
        let last = *self.g.preds(start).iter().find(|&&p| comp[p as usize] == id).expect("a cycle enters every member");
        let mut cycle = self.chain(start, last, Some((comp, id))).expect("members of a component reach each other");
        cycle.push(start);
        const SHOWN: usize = 16;
        let mut text = self.path_text(&cycle[..cycle.len().min(SHOWN)]);
        if cycle.len() > SHOWN {
            text.push_str(&format!(" ... ({} steps in all)", cycle.len() - 1));
        }
        let message = format!(
            "{text}; the {} transactions joined by cycles here were not judged against causality",
            members.len()
        );
        let rec = &ix.history.txns[start as usize];
        self.found.txn(ViolationKind::CausalCycle, start, rec, None, message);
    }

    /// A key `t` read from `w`, other than `not`.
    fn key_read_from(&self, t: u32, w: u32, not: &str) -> Option<&str> {
        self.ix.history.txns[t as usize]
            .ops
            .iter()
            .filter(|op| op.op == OpKind::Read && op.key != not)
            .find(|op| op.value.as_deref().and_then(|v| self.ix.values.get(v)).is_some_and(|r| r.txn == w))
            .map(|op| op.key.as_str())
    }

    /// ": a -so-> b -wr-> c", a shortest chain of direct predecessors from
    /// `from` to `to`, or "" once the budget for explanations is spent.
    fn explain_path(&mut self, from: u32, to: u32) -> String {
        if self.paths_left == 0 {
            return String::new();
        }
        self.paths_left -= 1;
        match self.chain(from, to, None) {
            Some(chain) => format!(": {}", self.path_text(&chain)),
            None => String::new(),
        }
    }

    /// A shortest chain `from` → ... → `to` along hb edges, found breadth
    /// first backwards from `to`; optionally only through one component.
    fn chain(&mut self, from: u32, to: u32, within: Option<(&[u32], u32)>) -> Option<Vec<u32>> {
        let n = self.ix.history.txns.len();
        if self.seen.len() != n {
            self.seen = vec![0; n];
            self.parent = vec![NONE; n];
        }
        self.search += 1;
        let search = self.search;
        self.seen[to as usize] = search;
        let mut queue = VecDeque::from([to]);
        let mut reached = from == to;
        'bfs: while let Some(x) = queue.pop_front() {
            for &p in self.g.preds(x) {
                if self.seen[p as usize] == search || within.is_some_and(|(comp, id)| comp[p as usize] != id) {
                    continue;
                }
                self.seen[p as usize] = search;
                self.parent[p as usize] = x;
                if p == from {
                    reached = true;
                    break 'bfs;
                }
                queue.push_back(p);
            }
        }
        if !reached {
            return None;
        }
        let mut chain = vec![from];
        let mut x = from;
        while x != to {
            x = self.parent[x as usize];
            chain.push(x);
        }
        Some(chain)
    }

    /// Txids joined by the kind of each step: `-so->` when the next one is
    /// the session successor, `-wr->` when it read from the previous one.
    fn path_text(&self, chain: &[u32]) -> String {
        let ix = self.ix;
        let mut text = ix.txid(chain[0]).to_string();
        for pair in chain.windows(2) {
            let step = if ix.session_pred[pair[1] as usize] == pair[0] { "-so->" } else { "-wr->" };
            text.push_str(&format!(" {step} {}", ix.txid(pair[1])));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_merge_either_way_and_recycle_zeroed() {
        let mut c = Clocks { width: 3, data: Vec::new(), free: Vec::new() };
        let (a, b) = (c.alloc(), c.alloc());
        c.get_mut(a).copy_from_slice(&[5, 0, 2]);
        c.get_mut(b).copy_from_slice(&[1, 4, 2]);
        c.merge(b, a);
        assert_eq!(c.get(b), &[5, 4, 2]);
        c.get_mut(a).copy_from_slice(&[0, 9, 0]);
        c.merge(a, b);
        assert_eq!(c.get(a), &[5, 9, 2]);
        c.free.push(a);
        assert_eq!(c.alloc(), a);
        assert_eq!(c.get(a), &[0, 0, 0]);
        c.grow(4);
        assert_eq!(c.width, 19);
        assert_eq!((&c.get(a)[..4], &c.get(b)[..4]), (&[0, 0, 0, 0][..], &[5, 4, 2, 0][..]));
        assert!(c.get(b)[3..].iter().all(|&x| x == 0));
    }

    #[test]
    fn components_order_predecessors_first_and_find_cycles() {
        // 0 -> 1 -> 2 -> 1 (a cycle of 1 and 2), 2 -> 3; 4 alone; 3 -> 5.
        let preds: Vec<Vec<u32>> = vec![vec![], vec![0, 2], vec![1], vec![2], vec![], vec![3]];
        let mut g = Graph { start: vec![0], preds: Vec::new() };
        for p in &preds {
            g.preds.extend(p);
            g.start.push(g.preds.len() as u32);
        }
        let c = components(&g, preds.len());
        assert_eq!(c.cycles, vec![vec![1, 2]]);
        assert_eq!((c.comp[1], c.comp[2], c.comp[0], c.comp[3]), (0, 0, NONE, NONE));
        let at = |x: u32| c.order.iter().position(|&y| y == x).unwrap();
        assert_eq!(c.order.len(), 6);
        assert!(at(0) < at(1) && at(0) < at(2) && at(2) < at(3) && at(3) < at(5));
    }
}
