//! Raft on a small deterministic network of its own: messages delayed,
//! reordered and lost to crashes and cuts, members crashing with what they
//! had not synced, logs compacted and snapshots installed. Every step checks
//! election safety (one leader per term) and state machine safety (no two
//! members apply different entries at one index); every run ends with a
//! leader that commits. The simulator runs the same code under the
//! protocols that use it; this is the proof of the log alone.

use super::*;
use crate::ids::ReplicaId;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// SplitMix64: enough randomness for a test, drawn from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Debug)]
enum Ev {
    Deliver { to: usize, from: usize, msg: RaftMsg<u64> },
    Tick(usize),
    Sync(usize, u32),
    Crash(usize),
    Restart(usize),
    Propose,
    Snapshot { to: usize, from: usize, term: u64, index: u64, snap_term: u64, state: Vec<u64> },
}

struct Node {
    raft: Raft<u64>,
    records: Vec<RaftRecord<u64>>,
    synced: usize,
    /// Messages that wait for records: how many must be synced first.
    held: Vec<(usize, usize, RaftMsg<u64>)>,
    up: bool,
    incarnation: u32,
    /// The state machine: every payload applied, in order, and up to where.
    applied: u64,
    state: Vec<u64>,
    /// The snapshot it keeps: the state at its base (for recovery).
    snapshot: (u64, Vec<u64>),
}

struct Net {
    ids: Vec<ReplicaId>,
    cfg: RaftConfig,
    nodes: Vec<Node>,
    queue: BinaryHeap<Reverse<(u64, u64, usize)>>,
    events: Vec<Option<Ev>>,
    seq: u64,
    now: u64,
    rng: Rng,
    /// Members cut off from everyone.
    isolated: BTreeSet<usize>,
    /// What was applied at each index, first by whoever applied it.
    applied: BTreeMap<u64, u64>,
    leaders: BTreeMap<u64, ReplicaId>,
    proposed: u64,
    reorder: bool,
    compact_every: Option<u64>,
    /// Percent of messages between members lost.
    loss: u64,
    /// The most a sync takes, in microseconds.
    sync_us: u64,
}

impl Net {
    fn new(seed: u64, n: usize, cfg: RaftConfig) -> Net {
        let ids: Vec<ReplicaId> = (0..n).map(|i| ReplicaId::new(i as u16, 0)).collect();
        let nodes = ids
            .iter()
            .map(|&id| Node {
                raft: Raft::new(id, ids.clone(), cfg.clone()),
                records: Vec::new(),
                synced: 0,
                held: Vec::new(),
                up: true,
                incarnation: 0,
                applied: 0,
                state: Vec::new(),
                snapshot: (0, Vec::new()),
            })
            .collect();
        Net {
            ids,
            cfg,
            nodes,
            queue: BinaryHeap::new(),
            events: Vec::new(),
            seq: 0,
            now: 1_000_000,
            rng: Rng(seed),
            isolated: BTreeSet::new(),
            applied: BTreeMap::new(),
            leaders: BTreeMap::new(),
            proposed: 0,
            reorder: true,
            compact_every: None,
            loss: 0,
            sync_us: 1_000,
        }
    }

    fn at(&mut self, when: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Some(ev));
        self.queue.push(Reverse((when, self.seq, self.events.len() - 1)));
    }

    fn ix(&self, id: ReplicaId) -> usize {
        self.ids.iter().position(|&i| i == id).expect("a member")
    }

    fn start(&mut self) {
        for i in 0..self.nodes.len() {
            let mut out = RaftOut::default();
            self.nodes[i].raft.start(self.now, &mut out);
            self.carry_out(i, out);
            let t = self.now + self.rng.below(10_000);
            self.at(t, Ev::Tick(i));
        }
    }

    /// Carries out one step's effects, then applies what it committed.
    fn carry_out(&mut self, i: usize, out: RaftOut<u64>) {
        let node = &mut self.nodes[i];
        let had = node.records.len();
        node.records.extend(out.records);
        let needs = node.records.len();
        let mut now_msgs = Vec::new();
        for (to, msg, when) in out.messages {
            let to = self.ids.iter().position(|&id| id == to).expect("a member");
            let behind = node.held.iter().any(|(_, t, _)| *t == to);
            match when {
                Send::AfterDurable if needs > node.synced => node.held.push((needs, to, msg)),
                _ if behind => node.held.push((0, to, msg)),
                _ => now_msgs.push((to, msg)),
            }
        }
        for (to, msg) in now_msgs {
            self.send(i, to, msg);
        }
        if self.nodes[i].records.len() > had {
            let inc = self.nodes[i].incarnation;
            let t = self.now + 100 + self.rng.below(self.sync_us);
            self.at(t, Ev::Sync(i, inc));
        }
        for peer in out.need_snapshot {
            let to = self.ix(peer);
            let node = &self.nodes[i];
            let (index, state) = (node.applied, node.state.clone());
            let snap_term = node.raft.log().term_at(index).unwrap_or(node.raft.log().base_term());
            let term = node.raft.term();
            let t = self.now + 2_000 + self.rng.below(3_000);
            self.at(t, Ev::Snapshot { to, from: i, term, index, snap_term, state });
        }
        self.apply(i);
    }

    fn send(&mut self, from: usize, to: usize, msg: RaftMsg<u64>) {
        if from == to {
            let t = self.now + 1;
            self.at(t, Ev::Deliver { to, from, msg });
            return;
        }
        if self.isolated.contains(&from) || self.isolated.contains(&to) || self.rng.chance(self.loss) {
            return;
        }
        let delay = if self.reorder { 500 + self.rng.below(4_000) } else { 1_000 };
        let t = self.now + delay;
        self.at(t, Ev::Deliver { to, from, msg });
    }

    fn apply(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        while node.applied < node.raft.commit_index() {
            let index = node.applied + 1;
            let Some(entry) = node.raft.log().get(index) else { break };
            let value = match entry.payload {
                Payload::Data(v) => v,
                Payload::Noop => u64::MAX,
            };
            match self.applied.get(&index) {
                Some(&seen) => {
                    assert_eq!(seen, value, "{} applied {value} at {index}, another member {seen}", self.ids[i])
                }
                None => {
                    self.applied.insert(index, value);
                }
            }
            node.state.push(value);
            node.applied = index;
        }
        if let Some(every) = self.compact_every {
            let node = &mut self.nodes[i];
            let floor = node.raft.compaction_floor(self.now).min(node.applied);
            if floor >= node.raft.log().base_index() + every {
                node.raft.compact(floor);
                node.snapshot = (floor, node.state[..floor as usize].to_vec());
                // As a checkpoint would: the log begins after the base, and
                // everything it holds is durable.
                node.records = node.raft.checkpoint();
                node.synced = node.records.len();
                node.held.iter_mut().for_each(|(needs, _, _)| *needs = (*needs).min(node.synced));
                let inc = node.incarnation;
                let t = self.now + 1;
                self.at(t, Ev::Sync(i, inc));
            }
        }
    }

    fn check_leaders(&mut self) {
        for node in self.nodes.iter().filter(|n| n.up) {
            if node.raft.is_leader() {
                let term = node.raft.term();
                let me = node.raft.id();
                let prior = *self.leaders.entry(term).or_insert(me);
                assert_eq!(prior, me, "two leaders in term {term}");
            }
        }
    }

    fn step(&mut self) -> bool {
        let Some(Reverse((t, _, ix))) = self.queue.pop() else { return false };
        self.now = t;
        let ev = self.events[ix].take().expect("each event once");
        match ev {
            Ev::Deliver { to, from, msg } => {
                if self.nodes[to].up && (self.nodes[from].up || to == from) {
                    let mut out = RaftOut::default();
                    let from_id = self.ids[from];
                    self.nodes[to].raft.on_message(self.now, from_id, msg, &mut out);
                    self.carry_out(to, out);
                }
            }
            Ev::Tick(i) => {
                if self.nodes[i].up {
                    let mut out = RaftOut::default();
                    self.nodes[i].raft.tick(self.now, &mut out);
                    self.carry_out(i, out);
                }
                let next = self.now + self.cfg.heartbeat_us / 2;
                self.at(next, Ev::Tick(i));
            }
            Ev::Sync(i, inc) => {
                let node = &mut self.nodes[i];
                if node.up && node.incarnation == inc {
                    node.synced = node.records.len();
                    let synced = node.synced;
                    let (ready, held): (Vec<_>, Vec<_>) = node.held.drain(..).partition(|(n, _, _)| *n <= synced);
                    node.held = held;
                    for (_, to, msg) in ready {
                        self.send(i, to, msg);
                    }
                }
            }
            Ev::Crash(i) => {
                // Half the crashes take whoever leads now.
                let i = match self.leader() {
                    Some(l) if self.rng.chance(50) => l,
                    _ => i,
                };
                let node = &mut self.nodes[i];
                if !node.up {
                    return true;
                }
                node.up = false;
                node.incarnation += 1;
                node.records.truncate(node.synced);
                node.held.clear();
            }
            Ev::Restart(i) => {
                let Some(i) = (0..self.nodes.len()).map(|k| (i + k) % self.nodes.len()).find(|&k| !self.nodes[k].up)
                else {
                    return true;
                };
                let node = &mut self.nodes[i];
                node.up = true;
                let id = self.ids[i];
                node.raft = Raft::recover(id, self.ids.clone(), self.cfg.clone(), node.records.clone());
                let base = node.raft.log().base_index();
                assert!(base >= node.snapshot.0, "a restart never goes below its snapshot");
                node.applied = node.snapshot.0;
                node.state = node.snapshot.1.clone();
                let mut out = RaftOut::default();
                node.raft.start(self.now, &mut out);
                self.carry_out(i, out);
            }
            Ev::Propose => {
                let leader = (0..self.nodes.len()).find(|&i| self.nodes[i].up && self.nodes[i].raft.is_leader());
                if let Some(i) = leader {
                    let mut out = RaftOut::default();
                    for _ in 0..1 + self.rng.below(4) {
                        self.proposed += 1;
                        let value = self.proposed;
                        self.nodes[i].raft.propose(self.now, value, &mut out).expect("a leader");
                    }
                    self.nodes[i].raft.flush(self.now, &mut out);
                    self.carry_out(i, out);
                }
            }
            Ev::Snapshot { to, from, term, index, snap_term, state } => {
                if self.nodes[to].up && !self.isolated.contains(&to) && !self.isolated.contains(&from) {
                    let mut out = RaftOut::default();
                    let from_id = self.ids[from];
                    let node = &mut self.nodes[to];
                    if node.raft.install_snapshot(self.now, from_id, term, index, snap_term, &mut out) {
                        // The owner makes its snapshot and the new base
                        // durable together.
                        node.records.append(&mut out.records);
                        node.synced = node.records.len();
                        node.applied = index;
                        node.state = state.clone();
                        node.snapshot = (index, state);
                    }
                    self.carry_out(to, out);
                }
            }
        }
        self.check_leaders();
        true
    }

    fn run_until(&mut self, until: u64) {
        while self.queue.peek().is_some_and(|Reverse((t, _, _))| *t <= until) {
            self.step();
        }
        self.now = until;
    }

    fn leader(&self) -> Option<usize> {
        (0..self.nodes.len()).find(|&i| self.nodes[i].up && self.nodes[i].raft.is_leader())
    }
}

fn fast() -> RaftConfig {
    RaftConfig { heartbeat_us: 10_000, election_us: 100_000, ..RaftConfig::default() }
}

#[test]
fn a_group_elects_one_leader_and_commits_on_every_member() {
    let mut net = Net::new(1, 3, fast());
    net.start();
    net.run_until(net.now + 500_000);
    let leader = net.leader().expect("a leader within a few election timeouts");
    for k in 0..20 {
        let t = net.now + k * 5_000;
        net.at(t, Ev::Propose);
    }
    net.run_until(net.now + 500_000);
    let commit = net.nodes[leader].raft.commit_index();
    assert!(commit > 20, "{commit}");
    for node in &net.nodes {
        assert_eq!(node.applied, commit, "{} applied everything", node.raft.id());
    }
}

#[test]
fn a_single_member_leads_alone_and_commits_once_durable() {
    let mut net = Net::new(2, 1, fast());
    net.start();
    assert!(net.nodes[0].raft.is_leader());
    net.at(net.now + 10, Ev::Propose);
    net.run_until(net.now + 50_000);
    assert!(net.nodes[0].raft.commit_index() >= 2);
}

#[test]
fn the_preferred_member_ends_up_leading() {
    let mut cfg = fast();
    cfg.preferred = Some(ReplicaId::new(2, 0));
    for seed in 0..10 {
        let mut net = Net::new(seed, 3, cfg.clone());
        net.start();
        net.run_until(net.now + 2_000_000);
        assert_eq!(net.leader(), Some(2), "seed {seed}");
    }
}

#[test]
fn a_cut_off_leader_steps_down_and_the_majority_goes_on() {
    let mut net = Net::new(3, 5, fast());
    net.start();
    net.run_until(net.now + 1_000_000);
    let old = net.leader().expect("a leader");
    net.isolated.insert(old);
    net.run_until(net.now + 1_000_000);
    assert!(!net.nodes[old].raft.is_leader(), "a leader that hears no majority steps down");
    let new = net.leader().expect("the majority elects another");
    assert_ne!(new, old);
    for k in 0..10 {
        net.at(net.now + k * 1_000, Ev::Propose);
    }
    net.run_until(net.now + 300_000);
    let commit = net.nodes[new].raft.commit_index();
    assert!(net.nodes[old].raft.commit_index() < commit);
    // Healed: the old leader does not depose the new one (pre-vote), and
    // catches up.
    let term = net.nodes[new].raft.term();
    net.isolated.clear();
    net.run_until(net.now + 1_000_000);
    assert_eq!(net.leader(), Some(new));
    assert_eq!(net.nodes[new].raft.term(), term, "no election was forced by the returning member");
    assert_eq!(net.nodes[old].applied, net.nodes[new].raft.commit_index());
}

#[test]
fn a_minority_commits_nothing() {
    let mut net = Net::new(4, 3, fast());
    net.start();
    net.run_until(net.now + 1_000_000);
    let commit_before: Vec<u64> = net.nodes.iter().map(|n| n.raft.commit_index()).collect();
    net.isolated.extend([0, 1, 2]);
    for k in 0..10 {
        net.at(net.now + k * 1_000, Ev::Propose);
    }
    net.run_until(net.now + 2_000_000);
    assert!(net.leader().is_none(), "nobody leads without a majority");
    let after: Vec<u64> = net.nodes.iter().map(|n| n.raft.commit_index()).collect();
    assert_eq!(commit_before, after);
}

#[test]
fn a_follower_far_behind_a_compacted_log_gets_a_snapshot() {
    let mut net = Net::new(5, 3, fast());
    net.compact_every = Some(8);
    net.start();
    net.run_until(net.now + 1_000_000);
    let leader = net.leader().expect("a leader");
    let lagging = (leader + 1) % 3;
    net.isolated.insert(lagging);
    for k in 0..60 {
        net.at(net.now + k * 2_000, Ev::Propose);
    }
    net.run_until(net.now + 400_000);
    let base = net.nodes[leader].raft.log().base_index();
    assert!(base > net.nodes[lagging].applied + 1, "the leader compacted past the lagging member");
    net.isolated.clear();
    net.run_until(net.now + 2_000_000);
    let commit = net.nodes[net.leader().expect("a leader")].raft.commit_index();
    assert_eq!(net.nodes[lagging].applied, commit, "caught up through a snapshot");
    assert_eq!(net.nodes[lagging].state, net.nodes[leader].state);
}

/// Random runs: crashes that lose unsynced records, cuts, reordering,
/// compaction on half the seeds. Safety is checked at every step; at the
/// end, healed, every member applies the same log.
#[test]
fn random_faults_never_break_safety_and_healed_groups_converge() {
    let seeds: u64 = std::env::var("CAUSEWAY_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    let (mut total_crashes, mut terms, mut commits) = (0, 0, 0);
    for seed in 0..seeds {
        let mut rng = Rng(seed ^ 0xfeed);
        let n = [1, 3, 3, 5][rng.below(4) as usize];
        let mut net = Net::new(seed, n, fast());
        if seed % 2 == 0 {
            net.compact_every = Some(4 + rng.below(16));
        }
        net.loss = rng.below(8);
        net.sync_us = [1_000, 10_000, 40_000][rng.below(3) as usize];
        net.start();
        let start = net.now;
        for k in 0..200 {
            net.at(start + k * 5_000, Ev::Propose);
        }
        let crashes = rng.below(16);
        for _ in 0..crashes {
            let i = rng.below(n as u64) as usize;
            let t = start + rng.below(1_000_000);
            net.at(t, Ev::Crash(i));
            net.at(t + 1_000 + rng.below(200_000), Ev::Restart(i));
        }
        total_crashes += crashes;
        let mut t = start;
        while t < start + 1_000_000 {
            t += 10_000;
            net.run_until(t);
            if rng.chance(3) {
                net.isolated.clear();
                if rng.chance(70) {
                    net.isolated.insert(rng.below(n as u64) as usize);
                }
            }
        }
        net.isolated.clear();
        net.run_until(start + 4_000_000);
        let leader = net.leader().unwrap_or_else(|| panic!("seed {seed}: no leader after healing"));
        let commit = net.nodes[leader].raft.commit_index();
        assert!(commit > 0, "seed {seed}");
        for node in &net.nodes {
            assert!(node.up, "seed {seed}: every crash restarts");
            assert_eq!(node.applied, commit, "seed {seed}: {} caught up", node.raft.id());
        }
        terms += net.leaders.len();
        commits += commit;
    }
    // The runs did what they are for: members crashed, leaders changed.
    assert!(total_crashes > seeds, "{seeds} seeds, only {total_crashes} crashes");
    assert!(terms as u64 > 2 * seeds, "{seeds} seeds, only {terms} terms with a leader");
    assert!(commits > 100 * seeds, "{seeds} seeds, only {commits} entries committed");
}

/// Raft's Figure 8: an entry of an earlier term on a majority is not yet
/// safe to commit — a member that never saw it could still win an election
/// and overwrite it. Only an entry of the leader's own term commits by
/// counting, and the earlier ones with it.
#[test]
fn a_leader_commits_no_entry_of_an_earlier_term_by_counting() {
    let ids: Vec<ReplicaId> = (0..3).map(|i| ReplicaId::new(i, 0)).collect();
    let (a, b) = (ids[0], ids[1]);
    let entry = |term: u64| Entry { term, time: crate::hlc::Timestamp(term), payload: Payload::Data(term) };
    let records = vec![
        RaftRecord::Hard { term: 2, vote: None },
        RaftRecord::Append { from: 1, entries: vec![entry(1), entry(2)] },
    ];
    let cfg = fast();
    let mut leader = Raft::recover(a, ids.clone(), cfg.clone(), records);
    let mut out = RaftOut::default();
    let mut now = 1_000_000;
    leader.start(now, &mut out);
    now += 3 * cfg.election_us;
    leader.tick(now, &mut out);
    assert_eq!(leader.role(), Role::PreCandidate);
    leader.on_message(now, b, RaftMsg::PreVoteResp { term: 3, granted: true }, &mut out);
    assert_eq!((leader.role(), leader.term()), (Role::Candidate, 3));
    leader.on_message(now, b, RaftMsg::VoteResp { term: 3, granted: true }, &mut out);
    assert!(leader.is_leader());
    assert_eq!(leader.log().last_index(), 3, "a new leader appends an entry of its own term");
    // The follower holds the first two entries: a majority has index 2.
    leader.on_message(now, b, RaftMsg::AppendResp { term: 3, success: true, index: 2 }, &mut out);
    assert_eq!(leader.commit_index(), 0, "index 2 is of term 2: not committed by counting");
    leader.on_message(now, a, RaftMsg::Persisted { index: 3, term: 3 }, &mut out);
    assert_eq!(leader.commit_index(), 0, "its own entry is not on a majority yet");
    leader.on_message(now, b, RaftMsg::AppendResp { term: 3, success: true, index: 3 }, &mut out);
    assert_eq!(leader.commit_index(), 3, "its own entry commits, and the earlier ones with it");
}

/// A member votes once per term, and the vote is durable before it is
/// sent: a restart cannot vote again in the same term.
#[test]
fn a_vote_is_made_durable_before_it_is_given_and_holds_across_a_restart() {
    let ids: Vec<ReplicaId> = (0..3).map(|i| ReplicaId::new(i, 0)).collect();
    let cfg = fast();
    let mut voter = Raft::<u64>::new(ids[0], ids.clone(), cfg.clone());
    let mut out = RaftOut::default();
    voter.start(0, &mut out);
    let ask = |from_last: u64| RaftMsg::Vote { term: 5, last_index: from_last, last_term: 0, transfer: false };
    voter.on_message(10, ids[1], ask(0), &mut out);
    let answer = out.messages.iter().find(|(to, _, _)| *to == ids[1]).expect("an answer");
    assert_eq!(answer.1, RaftMsg::VoteResp { term: 5, granted: true });
    assert_eq!(answer.2, Send::AfterDurable);
    assert!(out.records.contains(&RaftRecord::Hard { term: 5, vote: Some(ids[1]) }));
    let mut again = Raft::<u64>::recover(ids[0], ids.clone(), cfg, out.records.drain(..).collect::<Vec<_>>());
    let mut out = RaftOut::default();
    again.start(20, &mut out);
    again.on_message(30, ids[2], ask(0), &mut out);
    let answer = out.messages.iter().find(|(to, _, _)| *to == ids[2]).expect("an answer");
    assert_eq!(answer.1, RaftMsg::VoteResp { term: 5, granted: false }, "one vote per term, restart or not");
}
