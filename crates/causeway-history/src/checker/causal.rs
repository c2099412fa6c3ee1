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
    /// The rank of the newest write of the key in the reader's past.
    need: u32,
    finding: Finding,
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
}

pub(crate) fn check(ix: &Index, res: &Resolved, found: &mut Found) {
    let n = ix.history.txns.len();
    let g = Graph::build(ix, res);
    let comps = components(&g, n);
    let overtakers = Overtakers { span: vec![(NONE, 0); ix.writers.pos.len()], firsts: Vec::new() };
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
    let mut clock_of = vec![NONE; n];
    // (rank, txn) of the update with the greatest commit_ts in each
    // transaction's strict causal past; rank 0 when there is none.
    let mut newest_past = vec![(0u32, NONE); n];
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
            past = past.max(newest_past[pu]);
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
        }
        newest_past[tu] = past;
        if comps.comp[tu] == NONE {
            let clock = clocks.get(slot);
            let own = ix.session[tu] as usize;
            if !ix.committed[tu] && clock[own] > ix.own_bound[tu] {
                // An aborted transaction is a sink, so this is no cycle; but
                // a session runs one transaction at a time, and this one saw
                // (directly or through others) a later one of its own.
                let rec = &ix.history.txns[tu];
                pass.found.txn(
                    ViolationKind::FutureRead,
                    t,
                    rec,
                    None,
                    format!("aborted, yet its reads depend on a later transaction of its own session {}", rec.session),
                );
            }
            for read in res.ext_reads(t) {
                pass.judge_read(t, read, clock);
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
}

impl Pass<'_, '_> {
    /// The core rule: among the writes of the key in the reader's strict
    /// causal past, none may be newer (in commit_ts) than the one it read.
    fn judge_read(&mut self, t: u32, read: &ExtRead, clock: &[u32]) {
        let ix = self.ix;
        let w = &ix.writers;
        let read_rank = if read.writer == NONE { 0 } else { ix.rank[read.writer as usize] };
        let own_session = ix.session[t as usize];
        // A committed reader's clock counts the reader itself in its own
        // session; its strict past there ends just before it. An aborted
        // reader's clock does not count itself, and may reach further (a
        // violation reported on its own): everything it reaches is its past.
        let own_bound = if ix.committed[t as usize] {
            ix.own_bound[t as usize]
        } else {
            ix.own_bound[t as usize].max(clock[own_session as usize])
        };
        // How long a prefix of session `s` precedes the reader.
        let bound = |s: u32| if s == own_session { own_bound } else { clock[s as usize] };
        let misses = if read.slot == NONE {
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
            if rank == 0 || ix.deleted(newest, read.key) || self.deletes_reached[read.key as usize] > rank {
                // No write, the newest write is a delete, or a newer delete
                // the pass already reached, which cannot follow the reader.
                return;
            }
            if w.key_max_delete[read.key as usize] > rank {
                // A newer delete exists, not reached yet: it explains the
                // read unless it follows the reader causally.
                let finding = self.finding(t, read, 0, &bound);
                self.pending.entry(read.key).or_default().push(Pending { need: rank, finding });
                return;
            }
            true
        } else {
            let by_search = || {
                w.segments(read.key).iter().any(|seg| {
                    let i = first_newer(w, seg, read_rank);
                    i < seg.end as usize && w.pos[i] <= bound(seg.session)
                })
            };
            match self.overtakers.of(w, read.slot, read.key, read_rank) {
                Some(firsts) => {
                    let misses = firsts.iter().any(|&(s, pos)| pos <= bound(s));
                    debug_assert_eq!(misses, by_search(), "the cached lists and the search disagree");
                    misses
                }
                None => by_search(),
            }
        };
        if !misses {
            return;
        }
        let finding = self.finding(t, read, read_rank, &bound);
        self.report(finding);
    }

    /// The pass reached `d`: its deletes explain the null reads waiting for
    /// a newer delete of their key, unless `d` follows the reader (`clock`
    /// is `d`'s; it counts the reader's session up to the reader).
    fn reach_deletes(&mut self, d: u32, clock: &[u32]) {
        let ix = self.ix;
        let Some(keys) = ix.deletes_by_txn.get(&d) else { return };
        let rank = ix.rank[d as usize];
        for &key in keys {
            let reached = &mut self.deletes_reached[key as usize];
            *reached = (*reached).max(rank);
            let Some(list) = self.pending.get_mut(&key) else { continue };
            list.retain(|p| {
                let reader = p.finding.t as usize;
                let follows = ix.committed[reader] && clock[ix.session[reader] as usize] >= ix.pos[reader];
                rank <= p.need || follows
            });
        }
    }

    /// What a wrong read missed: the newest write of its key in its past
    /// above `read_rank`, and whether the reader saw one of them directly
    /// through another key — then atomic visibility is the more precise
    /// diagnosis.
    fn finding(&self, t: u32, read: &ExtRead, read_rank: u32, bound: &dyn Fn(u32) -> u32) -> Finding {
        let w = &self.ix.writers;
        let mut newest = (0u32, NONE);
        let mut seen_directly = (0u32, NONE);
        let read_from = self.res.read_from(t);
        for seg in w.segments(read.key) {
            let bound = bound(seg.session);
            for i in seg.start as usize..seg.end as usize {
                if w.pos[i] > bound {
                    break;
                }
                if w.rank[i] > read_rank {
                    newest = newest.max((w.rank[i], w.txn[i]));
                    if read_from.binary_search(&w.txn[i]).is_ok() {
                        seen_directly = seen_directly.max((w.rank[i], w.txn[i]));
                    }
                }
            }
        }
        Finding { t, op: read.op, key: read.key, writer: read.writer, newest: newest.1, seen_directly: seen_directly.1 }
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
            let message = format!(
                "reads {got}, but it read {} from {}, which also wrote {} to this key: it saw only part of {}'s writes",
                other.map_or_else(|| "another key".to_string(), |k| format!("key {k}")),
                ix.describe_writer(w2),
                ix.final_value(w2, f.key),
                ix.txid(w2),
            );
            self.found.txn(ViolationKind::FracturedRead, t, rec, Some(&op.key), message);
        } else {
            let w2 = f.newest;
            let path = self.explain_path(w2, t);
            let message = format!(
                "reads {got}, but {} wrote {} to this key, newer, and precedes it causally{path}",
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
