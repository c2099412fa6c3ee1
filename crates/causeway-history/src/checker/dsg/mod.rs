//! Serializability: Adya's direct serialization graph (DSG) of a history,
//! and its cycles.
//!
//! A history is serializable when some serial order of its committed
//! transactions explains every read. Each edge of the graph is an order
//! every such serial order must keep: a write dependency (ww: the next
//! version of a key comes after the one it replaced; the order of versions
//! is the commit_ts order, which the protocol's serialization order
//! extends), a read dependency (wr: a reader comes after the writer it read)
//! and an anti-dependency (rw: a reader comes before the writer of the
//! version after the one it read). A cycle is a contradiction; the graph
//! is built in `graph`.
//!
//! Each strongly connected group of more than one transaction (`scc`) is
//! reported once, with the most specific phenomenon it holds: G0 when its
//! ww edges alone make a cycle, else G1c when its ww and wr edges do, else
//! G2 (every cycle then has an rw edge), with a shortest cycle of that
//! phenomenon (`cycle`) as its explanation. G1a and G1b, reads of aborted
//! and intermediate writes, are the kinds `AbortedRead` and
//! `IntermediateRead` of the read pass.
//!
//! G0 cannot come from a history alone: ww edges follow the one commit_ts
//! order of whole transactions, so they never close a cycle. The kind is
//! kept for the graph's sake (and tested on it), as Adya's hierarchy has it.

mod cycle;
mod graph;
mod scc;

use super::index::Index;
use super::reads::Resolved;
use super::{Found, ViolationKind};
use cycle::{Cycle, CycleSearch};
use graph::{Dep, Dsg, Edge};
use scc::Tarjan;

/// How many transactions of a group a shortest cycle is searched through:
/// in a group this small or smaller the cycle is the shortest of all,
/// in a larger one the shortest through its first transactions.
const STARTS: usize = 32;

/// How many edges the searches of one group may look at before the best
/// cycle so far is taken: a history broken everywhere can be one group of
/// 100,000 transactions.
const SEARCH_BUDGET: usize = 1 << 22;

/// How many steps of a cycle a message shows.
const SHOWN: usize = 16;

/// One group of transactions no serial order can hold.
pub(crate) struct Phenomenon {
    pub kind: ViolationKind,
    /// A shortest cycle of the kind's edges.
    pub cycle: Cycle,
    /// How many transactions the group joins.
    pub joined: usize,
}

/// Judges serializability: reports each cycle group of the history's DSG.
pub(crate) fn check(ix: &Index, res: &Resolved, found: &mut Found) {
    let g = Dsg::build(ix, res);
    for p in phenomena(&g) {
        report(ix, &g, &p, found);
    }
}

/// The phenomena of a graph, one per strongly connected group of more
/// than one transaction.
pub(crate) fn phenomena(g: &Dsg) -> Vec<Phenomenon> {
    let n = g.len();
    let mut tarjan = Tarjan::new(n);
    let groups = tarjan.components(g, 0..n as u32, |_| true);
    let mut group_of = vec![u32::MAX; n];
    for (id, members) in groups.iter().enumerate() {
        for &t in members {
            group_of[t as usize] = id as u32;
        }
    }
    // The most specific phenomenon first: the edges each may use.
    const LEVELS: [(ViolationKind, &[Dep]); 3] = [
        (ViolationKind::WriteCycle, &[Dep::Ww]),
        (ViolationKind::InformationCycle, &[Dep::Ww, Dep::Wr]),
        (ViolationKind::AntiDependencyCycle, &[Dep::Ww, Dep::Wr, Dep::Rw]),
    ];
    let mut search = CycleSearch::new(n);
    let mut out = Vec::new();
    for (id, members) in groups.iter().enumerate() {
        let id = id as u32;
        for (kind, deps) in LEVELS {
            let keep = |e: &Edge| group_of[e.to as usize] == id && deps.contains(&e.dep);
            // With every edge the whole group is one component, each member
            // on a cycle; with fewer, only the members of the smaller
            // components they make are.
            let starts: Vec<u32> = if deps.len() == 3 {
                members.clone()
            } else {
                let mut on_cycles = tarjan.components(g, members.iter().copied(), keep).concat();
                on_cycles.sort_unstable();
                on_cycles
            };
            if starts.is_empty() {
                continue;
            }
            let starts = &starts[..starts.len().min(STARTS)];
            let cycle = search.shortest(g, starts, &keep, SEARCH_BUDGET).expect("each start lies on a cycle");
            debug_assert!(
                kind != ViolationKind::AntiDependencyCycle || cycle.iter().any(|&(_, e)| g.edge(e).dep == Dep::Rw),
                "a group without a cycle of ww and wr edges has an rw edge on every cycle"
            );
            out.push(Phenomenon { kind, cycle, joined: members.len() });
            break;
        }
    }
    out
}

/// Reports a phenomenon at the first transaction of its cycle in history
/// order, the cycle printed from there: `a -ww(k3)-> b -rw(k7)-> a`.
fn report(ix: &Index, g: &Dsg, p: &Phenomenon, found: &mut Found) {
    let at = (0..p.cycle.len()).min_by_key(|&i| p.cycle[i].0).expect("a cycle has steps");
    let steps: Vec<(u32, u32)> = p.cycle[at..].iter().chain(&p.cycle[..at]).copied().collect();
    let first = steps[0].0;
    let mut text = ix.txid(first).to_string();
    for &(_, e) in steps.iter().take(SHOWN) {
        let edge = g.edge(e);
        text.push_str(&format!(" -{}({})-> {}", edge.dep.name(), ix.key_names[edge.key as usize], ix.txid(edge.to)));
    }
    if steps.len() > SHOWN {
        text.push_str(&format!(" ... ({} steps in all)", steps.len()));
    }
    let joined = if p.joined > steps.len() {
        format!("; {} transactions are joined by such cycles here", p.joined)
    } else {
        String::new()
    };
    let message = format!(
        "{text}: each would have to come before the next in a serial order \
         (the next one -ww-> overwrites its write, -wr-> reads its write, -rw-> overwrites what it read){joined}"
    );
    found.txn(p.kind, first, &ix.history.txns[first as usize], None, message);
}

#[cfg(test)]
mod tests {
    use super::*;
    use Dep::*;
    use ViolationKind::*;

    fn graph(n: usize, edges: &[(u32, u32, Dep)]) -> Dsg {
        Dsg::from_edges(n, edges.iter().map(|&(a, b, dep)| (a, Edge { to: b, key: 0, dep })).collect())
    }

    /// Each group's kind and the transactions of its cycle, from the first.
    fn found(g: &Dsg) -> Vec<(ViolationKind, Vec<u32>)> {
        let mut out: Vec<_> = phenomena(g)
            .into_iter()
            .map(|p| {
                let mut nodes: Vec<u32> = p.cycle.iter().map(|&(from, _)| from).collect();
                let at = nodes.iter().enumerate().min_by_key(|&(_, &t)| t).unwrap().0;
                nodes.rotate_left(at);
                (p.kind, nodes)
            })
            .collect();
        out.sort();
        out
    }

    /// G0 cannot arise from a history (one commit_ts order per transaction
    /// orders every key's versions alike), so it is tested here, on a
    /// graph: two transactions that both wrote x and y, in opposite orders.
    #[test]
    fn a_cycle_of_ww_edges_is_g0_even_with_other_cycles_around_it() {
        assert_eq!(found(&graph(2, &[(0, 1, Ww), (1, 0, Ww)])), vec![(WriteCycle, vec![0, 1])]);
        // A shorter rw cycle in the same group does not hide the ww one:
        // the most specific phenomenon is reported, with its own cycle.
        let g = graph(4, &[(0, 1, Ww), (1, 2, Ww), (2, 0, Ww), (0, 3, Rw), (3, 0, Wr)]);
        assert_eq!(found(&g), vec![(WriteCycle, vec![0, 1, 2])]);
    }

    #[test]
    fn a_cycle_of_ww_and_wr_edges_is_g1c_and_one_with_rw_g2() {
        assert_eq!(found(&graph(2, &[(0, 1, Wr), (1, 0, Wr)])), vec![(InformationCycle, vec![0, 1])]);
        assert_eq!(found(&graph(3, &[(0, 1, Ww), (1, 2, Wr), (2, 0, Ww)])), vec![(InformationCycle, vec![0, 1, 2])]);
        // Lost update: 1 and 2 read 0's version, 2 overwrote 1's.
        let lost = graph(3, &[(0, 1, Ww), (1, 2, Ww), (0, 1, Wr), (0, 2, Wr), (2, 1, Rw)]);
        assert_eq!(found(&lost), vec![(AntiDependencyCycle, vec![1, 2])]);
        // Two groups, each reported once with its own kind.
        let g = graph(5, &[(0, 1, Rw), (1, 0, Rw), (2, 3, Wr), (3, 4, Ww), (4, 2, Wr), (3, 2, Rw)]);
        assert_eq!(found(&g), vec![(InformationCycle, vec![2, 3, 4]), (AntiDependencyCycle, vec![0, 1])]);
        assert!(found(&graph(3, &[(0, 1, Ww), (1, 2, Wr), (0, 2, Rw)])).is_empty());
    }
}
