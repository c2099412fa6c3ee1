//! Strongly connected components of the serialization graph, or of part of
//! it: every cycle lies inside one.

use super::graph::{Dsg, Edge};
use crate::checker::NONE;

/// Tarjan's algorithm, iterative: a serial history is a chain of 100,000
/// dependencies, too deep for the call stack. Its scratch arrays cover the
/// whole graph and are reset after each run only where a run touched them,
/// so running it once per component costs the component, not the graph.
pub(crate) struct Tarjan {
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    stack: Vec<u32>,
    /// The depth-first path: (node, index of its next edge to follow).
    call: Vec<(u32, u32)>,
    touched: Vec<u32>,
}

impl Tarjan {
    pub fn new(n: usize) -> Tarjan {
        Tarjan {
            index: vec![NONE; n],
            low: vec![0; n],
            on_stack: vec![false; n],
            stack: Vec::new(),
            call: Vec::new(),
            touched: Vec::new(),
        }
    }

    /// The strongly connected components of more than one transaction of
    /// the subgraph reachable from `roots` through the edges `keep`
    /// accepts, each sorted by position in the history. A component of one
    /// transaction is left out: the graph has no edge from a transaction to
    /// itself, so it lies on no cycle.
    pub fn components(
        &mut self,
        g: &Dsg,
        roots: impl IntoIterator<Item = u32>,
        keep: impl Fn(&Edge) -> bool,
    ) -> Vec<Vec<u32>> {
        let mut next_index = 0u32;
        let mut out = Vec::new();
        for root in roots {
            if self.index[root as usize] != NONE {
                continue;
            }
            self.visit(g, root, &mut next_index);
            while let Some(&(v, at)) = self.call.last() {
                let vu = v as usize;
                if at < g.span(v).1 {
                    self.call.last_mut().expect("non-empty").1 += 1;
                    let e = g.edge(at);
                    if !keep(e) {
                        continue;
                    }
                    let w = e.to as usize;
                    if self.index[w] == NONE {
                        self.visit(g, e.to, &mut next_index);
                    } else if self.on_stack[w] {
                        self.low[vu] = self.low[vu].min(self.index[w]);
                    }
                    continue;
                }
                self.call.pop();
                if let Some(&(u, _)) = self.call.last() {
                    self.low[u as usize] = self.low[u as usize].min(self.low[vu]);
                }
                if self.low[vu] != self.index[vu] {
                    continue;
                }
                let at = self.stack.iter().rposition(|&x| x == v).expect("v is on the stack");
                let mut members = self.stack.split_off(at);
                for &m in &members {
                    self.on_stack[m as usize] = false;
                }
                if members.len() > 1 {
                    members.sort_unstable();
                    out.push(members);
                }
            }
        }
        for &v in &self.touched {
            self.index[v as usize] = NONE;
        }
        self.touched.clear();
        out
    }

    fn visit(&mut self, g: &Dsg, v: u32, next_index: &mut u32) {
        let vu = v as usize;
        self.index[vu] = *next_index;
        self.low[vu] = *next_index;
        *next_index += 1;
        self.stack.push(v);
        self.on_stack[vu] = true;
        self.touched.push(v);
        self.call.push((v, g.span(v).0));
    }
}

#[cfg(test)]
mod tests {
    use super::super::graph::Dep;
    use super::*;

    fn graph(n: usize, edges: &[(u32, u32, Dep)]) -> Dsg {
        Dsg::from_edges(n, edges.iter().map(|&(a, b, dep)| (a, Edge { to: b, key: 0, dep })).collect())
    }

    #[test]
    fn finds_every_cycle_group_and_nothing_acyclic() {
        use Dep::*;
        // 0 -> 1 -> 2 -> 0 and 2 -> 3 -> 4 -> 3; 5 -> 6 alone; 7 isolated.
        let g = graph(8, &[(0, 1, Ww), (1, 2, Wr), (2, 0, Rw), (2, 3, Ww), (3, 4, Ww), (4, 3, Rw), (5, 6, Wr)]);
        let mut t = Tarjan::new(8);
        let mut all = t.components(&g, 0..8, |_| true);
        all.sort();
        assert_eq!(all, vec![vec![0, 1, 2], vec![3, 4]]);
        // Only through ww and wr edges there is no cycle at all; the
        // scratch was reset, so a second run sees the graph afresh.
        assert!(t.components(&g, 0..8, |e| e.dep != Rw).is_empty());
        // From one root, only what it reaches.
        assert_eq!(t.components(&g, [3], |_| true), vec![vec![3, 4]]);
        assert_eq!(t.components(&g, [5, 6, 7], |_| true), Vec::<Vec<u32>>::new());
    }

    #[test]
    fn a_chain_of_a_million_needs_no_recursion() {
        let n = 1_000_000u32;
        let mut edges: Vec<(u32, u32, Dep)> = (0..n - 1).map(|i| (i, i + 1, Dep::Ww)).collect();
        let mut t = Tarjan::new(n as usize);
        assert!(t.components(&graph(n as usize, &edges), 0..n, |_| true).is_empty());
        // Closing the chain makes it one component.
        edges.push((n - 1, 0, Dep::Rw));
        let all = t.components(&graph(n as usize, &edges), 0..n, |_| true);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].len(), n as usize);
    }
}
