//! Shortest cycles, to show a person one concrete reason a group of
//! transactions has no serial order.

use super::graph::{Dsg, Edge};
use crate::checker::NONE;
use std::collections::VecDeque;

/// Breadth-first search for cycles; its scratch arrays cover the whole
/// graph and are told apart between searches by a stamp, so a search costs
/// what it visits.
pub(crate) struct CycleSearch {
    seen: Vec<u32>,
    /// The node and edge each visited node was first reached through, and
    /// its distance from the start.
    from: Vec<u32>,
    via: Vec<u32>,
    dist: Vec<u32>,
    stamp: u32,
    queue: VecDeque<u32>,
}

/// A cycle as its steps in order: (source, index of the edge) — the first
/// step leaves the start, the last returns to it.
pub(crate) type Cycle = Vec<(u32, u32)>;

impl CycleSearch {
    pub fn new(n: usize) -> CycleSearch {
        CycleSearch {
            seen: vec![0; n],
            from: vec![NONE; n],
            via: vec![NONE; n],
            dist: vec![0; n],
            stamp: 0,
            queue: VecDeque::new(),
        }
    }

    /// A shortest cycle through `start` along the edges `keep` accepts, of
    /// fewer than `shorter_than` steps; None if there is none. Adds the
    /// edges it looked at to `work`.
    pub fn through(
        &mut self,
        g: &Dsg,
        start: u32,
        keep: &impl Fn(&Edge) -> bool,
        shorter_than: usize,
        work: &mut usize,
    ) -> Option<Cycle> {
        self.stamp += 1;
        let stamp = self.stamp;
        self.seen[start as usize] = stamp;
        self.dist[start as usize] = 0;
        self.queue.clear();
        self.queue.push_back(start);
        while let Some(x) = self.queue.pop_front() {
            // Nodes come out in order of distance: from here on a cycle
            // closed would be no shorter than the one we may already have.
            let steps = self.dist[x as usize] as usize + 1;
            if steps >= shorter_than {
                return None;
            }
            let (a, b) = g.span(x);
            for i in a..b {
                *work += 1;
                let e = g.edge(i);
                if !keep(e) {
                    continue;
                }
                if e.to == start {
                    let mut cycle = vec![(x, i)];
                    let mut y = x;
                    while y != start {
                        cycle.push((self.from[y as usize], self.via[y as usize]));
                        y = self.from[y as usize];
                    }
                    cycle.reverse();
                    return Some(cycle);
                }
                let to = e.to as usize;
                if self.seen[to] != stamp {
                    self.seen[to] = stamp;
                    (self.from[to], self.via[to], self.dist[to]) = (x, i, steps as u32);
                    self.queue.push_back(e.to);
                }
            }
        }
        None
    }

    /// The shortest of the cycles through each of `starts`, searched in
    /// order until one of two steps (none is shorter) is found, `starts`
    /// are exhausted, or `budget` edges have been looked at and a cycle was
    /// found: the budget never leaves the answer empty. When every start
    /// lies on a cycle of the accepted edges, the first search finds one.
    pub fn shortest(&mut self, g: &Dsg, starts: &[u32], keep: &impl Fn(&Edge) -> bool, budget: usize) -> Option<Cycle> {
        let mut best: Option<Cycle> = None;
        let mut work = 0;
        for &s in starts {
            let bound = best.as_ref().map_or(usize::MAX, Vec::len);
            if bound <= 2 || (best.is_some() && work >= budget) {
                break;
            }
            if let Some(c) = self.through(g, s, keep, bound, &mut work) {
                best = Some(c);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::super::graph::Dep;
    use super::*;

    fn graph(n: usize, edges: &[(u32, u32, Dep)]) -> Dsg {
        Dsg::from_edges(n, edges.iter().map(|&(a, b, dep)| (a, Edge { to: b, key: 0, dep })).collect())
    }

    /// The nodes a cycle visits, from its start.
    fn nodes(g: &Dsg, c: &Cycle) -> Vec<u32> {
        let mut v: Vec<u32> = c.iter().map(|&(from, _)| from).collect();
        v.push(g.edge(c.last().unwrap().1).to);
        v
    }

    #[test]
    fn the_cycle_through_a_node_is_the_shortest_and_its_steps_join_up() {
        use Dep::*;
        // Through 0: 0 -> 1 -> 2 -> 3 -> 0 (4 steps) and 0 -> 4 -> 3 -> 0 (3).
        let g = graph(5, &[(0, 1, Ww), (1, 2, Ww), (2, 3, Rw), (3, 0, Wr), (0, 4, Rw), (4, 3, Ww)]);
        let mut s = CycleSearch::new(5);
        let mut work = 0;
        let c = s.through(&g, 0, &|_| true, usize::MAX, &mut work).unwrap();
        assert_eq!(nodes(&g, &c), vec![0, 4, 3, 0]);
        for pair in c.windows(2) {
            assert_eq!(g.edge(pair[0].1).to, pair[1].0, "each step starts where the last ended");
        }
        assert!(work > 0);
        // Without the rw edge 0 -> 4 the long one is left.
        let c = s.through(&g, 0, &|e| !(e.dep == Rw && e.to == 4), usize::MAX, &mut work).unwrap();
        assert_eq!(nodes(&g, &c), vec![0, 1, 2, 3, 0]);
        // No cycle of ww and wr edges passes through 0 at all: 2 -> 3 is rw.
        assert!(s.through(&g, 0, &|e| e.dep != Rw, usize::MAX, &mut work).is_none());
        // A bound of 3 steps leaves no cycle through 0.
        assert!(s.through(&g, 0, &|_| true, 3, &mut work).is_none());
    }

    #[test]
    fn the_shortest_over_several_starts_wins() {
        use Dep::*;
        // Through 0 the shortest cycle has 4 steps; 2 and 3 form one of 2.
        let g = graph(4, &[(0, 1, Ww), (1, 2, Ww), (2, 3, Rw), (3, 0, Wr), (3, 2, Rw)]);
        let mut s = CycleSearch::new(4);
        assert_eq!(nodes(&g, &s.shortest(&g, &[0], &|_| true, usize::MAX).unwrap()), vec![0, 1, 2, 3, 0]);
        assert_eq!(nodes(&g, &s.shortest(&g, &[0, 1, 2, 3], &|_| true, usize::MAX).unwrap()), vec![2, 3, 2]);
        // A spent budget stops after the first search that found one.
        assert_eq!(nodes(&g, &s.shortest(&g, &[0, 1, 2, 3], &|_| true, 1).unwrap()), vec![0, 1, 2, 3, 0]);
        // A start on no cycle finds none, but the search goes on.
        let g = graph(4, &[(0, 1, Ww), (1, 2, Ww), (2, 1, Rw)]);
        assert_eq!(nodes(&g, &s.shortest(&g, &[0, 1], &|_| true, usize::MAX).unwrap()), vec![1, 2, 1]);
    }
}
