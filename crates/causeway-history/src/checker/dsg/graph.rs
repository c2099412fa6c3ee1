//! The direct serialization graph itself: its nodes, its three kinds of
//! edge, and how they are read off the index and the resolved reads.

use crate::checker::index::Index;
use crate::checker::reads::Resolved;
use crate::checker::NONE;

/// Why one transaction must precede another in every serial order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dep {
    /// Write dependency: the target wrote the version of the key right after
    /// the source's, in commit_ts order.
    Ww,
    /// Read dependency: the target read the source's write of the key.
    Wr,
    /// Anti-dependency: the source read a version of the key (or its initial
    /// state), and the target wrote the version right after it.
    Rw,
}

impl Dep {
    /// How the edge is printed in a cycle: `-ww(k)->`.
    pub fn name(self) -> &'static str {
        match self {
            Dep::Ww => "ww",
            Dep::Wr => "wr",
            Dep::Rw => "rw",
        }
    }
}

/// An edge out of a transaction: to whom, on which key, of which kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Edge {
    pub to: u32,
    pub key: u32,
    pub dep: Dep,
}

/// Out-edges of every transaction of the history (CSR layout); a
/// transaction that is not a node (aborted, or unknown and never read) has
/// none.
pub(crate) struct Dsg {
    start: Vec<u32>,
    edges: Vec<Edge>,
}

impl Dsg {
    /// The graph of `n` transactions with these edges, `(from, edge)`, in
    /// any order; edges out of one transaction keep their order.
    pub fn from_edges(n: usize, list: Vec<(u32, Edge)>) -> Dsg {
        assert!(list.len() < NONE as usize, "more than 2^32 - 1 edges");
        let mut start = vec![0u32; n + 1];
        for &(from, e) in &list {
            debug_assert!(from != e.to, "the graph has no edge from a transaction to itself");
            start[from as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut at = start.clone();
        let mut edges = vec![Edge { to: 0, key: 0, dep: Dep::Ww }; list.len()];
        for (from, e) in list {
            let slot = &mut at[from as usize];
            edges[*slot as usize] = e;
            *slot += 1;
        }
        Dsg { start, edges }
    }

    /// The number of transactions (nodes or not).
    pub fn len(&self) -> usize {
        self.start.len() - 1
    }

    /// The indices of `t`'s out-edges, for [`Dsg::edge`].
    pub fn span(&self, t: u32) -> (u32, u32) {
        (self.start[t as usize], self.start[t as usize + 1])
    }

    pub fn edge(&self, i: u32) -> &Edge {
        &self.edges[i as usize]
    }

    /// Builds the graph of a history from its index and its resolved reads
    /// (kept by `reads::resolve` for this purpose).
    ///
    /// Nodes are the committed transactions and the unknown ones someone
    /// read from, which proves they committed. An unknown transaction has
    /// no commit_ts, so no place in any key's version order: it gets only
    /// the edges that need none — reads-from edges in and out, and
    /// anti-dependencies out of it (to the committed writer of the version
    /// after the one it read). Leaving the rest out finds no false cycle:
    /// wherever its versions lie in the real order, the paths the graph
    /// keeps still exist (through them, a read of the version before the
    /// next committed one reaches that writer by rw then ww edges), so a
    /// cycle found here is one in the real graph too; cycles through the
    /// edges left out go unseen. An unknown transaction nobody read may
    /// have aborted and is not a node.
    pub fn build(ix: &Index, res: &Resolved) -> Dsg {
        let n = ix.history.txns.len();
        let w = &ix.writers;
        let keys = ix.key_names.len();
        let mut list: Vec<(u32, Edge)> = Vec::with_capacity(w.txn.len() + 2 * res.all.len());

        // Write dependencies: each key's versions in commit_ts order (ties,
        // which are reported as duplicate commit timestamps, broken by
        // position in the history so they cannot make a cycle).
        let mut next_of = vec![NONE; w.txn.len()];
        let mut first_of = vec![NONE; keys];
        let mut versions: Vec<u32> = Vec::new();
        for key in 0..keys as u32 {
            versions.clear();
            for seg in w.segments(key) {
                versions.extend(seg.start..seg.end);
            }
            versions.sort_unstable_by_key(|&s| (w.rank[s as usize], w.txn[s as usize]));
            if let Some(&s) = versions.first() {
                first_of[key as usize] = w.txn[s as usize];
            }
            for pair in versions.windows(2) {
                let (older, newer) = (pair[0] as usize, pair[1] as usize);
                next_of[older] = w.txn[newer];
                list.push((w.txn[older], Edge { to: w.txn[newer], key, dep: Dep::Ww }));
            }
        }

        let mut node = ix.committed.clone();
        for &p in &res.wr {
            node[p as usize] |= ix.unknown[p as usize];
        }
        for t in 0..n as u32 {
            if !node[t as usize] {
                continue;
            }
            for read in res.all_reads(t) {
                let key = read.key;
                let next = if read.writer == NONE {
                    // A read of null names no writer: nulls are not unique.
                    // With no delete of the key by anything that may have
                    // committed it can only be the initial state, before the
                    // first version; otherwise it may be any delete, and an
                    // edge could be false, so there is none.
                    if ix.key_deleted[key as usize] {
                        continue;
                    }
                    first_of[key as usize]
                } else {
                    debug_assert!(node[read.writer as usize], "a read names a committed or unknown writer");
                    list.push((read.writer, Edge { to: t, key, dep: Dep::Wr }));
                    // Only a ranked final write has a place in the order.
                    if read.slot == NONE {
                        continue;
                    }
                    next_of[read.slot as usize]
                };
                // The reader may be the next writer itself: a read-modify-write.
                if next != NONE && next != t {
                    list.push((t, Edge { to: next, key, dep: Dep::Rw }));
                }
            }
        }
        Dsg::from_edges(n, list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_are_grouped_by_source_in_their_order() {
        let e = |to, dep| Edge { to, key: 0, dep };
        let g = Dsg::from_edges(
            4,
            vec![(2, e(0, Dep::Rw)), (0, e(1, Dep::Ww)), (2, e(1, Dep::Wr)), (0, e(3, Dep::Rw)), (3, e(2, Dep::Ww))],
        );
        assert_eq!(g.len(), 4);
        let out = |t| {
            let (a, b) = g.span(t);
            (a..b).map(|i| (g.edge(i).to, g.edge(i).dep)).collect::<Vec<_>>()
        };
        assert_eq!(out(0), vec![(1, Dep::Ww), (3, Dep::Rw)]);
        assert_eq!(out(1), vec![]);
        assert_eq!(out(2), vec![(0, Dep::Rw), (1, Dep::Wr)]);
        assert_eq!(out(3), vec![(2, Dep::Ww)]);
    }
}
