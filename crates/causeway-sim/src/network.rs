//! The simulated network: one FIFO queue per directed link, latency drawn
//! from the WAN model with jitter, DC cuts that hold messages on every link
//! that crosses the cut until it heals, and nodes that are down losing what
//! was on its way to them, as a process that dies loses its connections.
//!
//! FIFO is by construction: a message never becomes ready before the one
//! sent before it on the same link, and only a link's head is delivered.
//!
//! With [`TransportFaults`] the network models the packets below the FIFO
//! link, as the transport sees them: each message is a packet with a
//! sequence number that may arrive twice, be overtaken, or be lost and
//! resent; the receiving side drops duplicates and holds a packet that
//! arrives early until the gap before it fills — as the real transport's
//! sequence numbers, resends and deduplication do — so what the protocols
//! see stays FIFO and exactly once.

use crate::config::LatencySpikes;
use crate::faults::TransportFaults;
use causeway_workload::WanModel;
use rand::Rng;
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

/// Dense index of a node (replica or client) in a simulation.
pub type NodeIx = u32;

/// What a link carries: a protocol's message, or the mark where its sender
/// dropped what it could not deliver (a shed backlog), which the receiver
/// learns of in its place — before anything sent after it.
#[derive(Clone, Debug)]
pub enum Carried<M> {
    Msg(M),
    Lost,
}

pub struct Link<M> {
    pub from: NodeIx,
    pub to: NodeIx,
    pub from_dc: u16,
    pub to_dc: u16,
    queue: VecDeque<(u64, M)>,
    last_ready: u64,
    /// A `LinkReady` event is pending for this link.
    pub scheduled: bool,
    /// The packets below the link, when the transport is faulty.
    packets: Option<Packets<M>>,
}

/// One link's packets under transport faults: sent and not delivered, and
/// the receiver's view.
struct Packets<M> {
    next_seq: u64,
    /// The next sequence number the receiver delivers.
    next_delivered: u64,
    in_flight: BTreeMap<u64, M>,
    /// Arrived ahead of a gap.
    early: BTreeSet<u64>,
    /// Arrivals still on the wire: (when, sequence number).
    arrivals: BinaryHeap<Reverse<(u64, u64)>>,
}

/// What the transport below the links did, for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransportCounts {
    pub packets: u64,
    /// Copies that arrived after their packet had and were dropped.
    pub duplicates_dropped: u64,
    /// Packets that arrived before one sent earlier and waited for it.
    pub arrived_early: u64,
    /// Packets lost and sent again.
    pub resent: u64,
}

impl<M> Link<M> {
    pub fn head_ready(&self) -> Option<u64> {
        match &self.packets {
            Some(p) => p.arrivals.peek().map(|Reverse((t, _))| *t),
            None => self.queue.front().map(|(t, _)| *t),
        }
    }

    pub fn is_empty(&self) -> bool {
        match &self.packets {
            Some(p) => p.in_flight.is_empty(),
            None => self.queue.is_empty(),
        }
    }

    /// Drops everything on its way into `lost`, as a connection that dies
    /// or a backlog shed does; what is sent next starts a fresh sequence.
    fn drop_all(&mut self, lost: &mut Vec<M>) {
        lost.extend(self.queue.drain(..).map(|(_, m)| m));
        if let Some(p) = self.packets.as_mut() {
            lost.extend(std::mem::take(&mut p.in_flight).into_values());
            p.early.clear();
            p.arrivals.clear();
            p.next_delivered = p.next_seq;
        }
    }

    pub fn crosses_dcs(&self) -> bool {
        self.from_dc != self.to_dc
    }
}

pub struct Network<M> {
    wan: WanModel,
    spikes: Option<LatencySpikes>,
    links: Vec<Link<M>>,
    index: FxHashMap<(NodeIx, NodeIx), u32>,
    /// How many cuts hold each DC right now.
    cut_depth: Vec<u32>,
    /// Nodes that are down: what was on its way to them is lost, and the
    /// simulation drops what is sent to them until they are up.
    down: BTreeSet<NodeIx>,
    transport: Option<TransportFaults>,
    pub counts: TransportCounts,
    pub messages_sent: u64,
}

impl<M> Network<M> {
    pub fn new(wan: WanModel, spikes: Option<LatencySpikes>, transport: Option<TransportFaults>, dcs: u16) -> Self {
        Network {
            wan,
            spikes,
            links: Vec::new(),
            index: FxHashMap::default(),
            cut_depth: vec![0; dcs as usize],
            down: BTreeSet::new(),
            transport,
            counts: TransportCounts::default(),
            messages_sent: 0,
        }
    }

    fn link_id(&mut self, from: NodeIx, to: NodeIx, from_dc: u16, to_dc: u16) -> u32 {
        let links = &mut self.links;
        let faulty = self.transport.is_some();
        *self.index.entry((from, to)).or_insert_with(|| {
            let packets = faulty.then(|| Packets {
                next_seq: 0,
                next_delivered: 0,
                in_flight: BTreeMap::new(),
                early: BTreeSet::new(),
                arrivals: BinaryHeap::new(),
            });
            links.push(Link {
                from,
                to,
                from_dc,
                to_dc,
                queue: VecDeque::new(),
                last_ready: 0,
                scheduled: false,
                packets,
            });
            (links.len() - 1) as u32
        })
    }

    /// Base one-way latency between two DCs (no jitter).
    pub fn base_one_way_us(&self, a: u16, b: u16) -> u64 {
        if a == b {
            self.wan.intra_dc_one_way_us.1
        } else {
            self.wan.rtt_us[a as usize][b as usize] / 2
        }
    }

    fn sample_latency(&self, rng: &mut impl Rng, from: NodeIx, to: NodeIx, a: u16, b: u16) -> u64 {
        if from == to {
            return 0;
        }
        let spike = match self.spikes {
            Some(s) if s.max_extra_us > 0 && rng.random_bool(s.probability) => rng.random_range(1..=s.max_extra_us),
            _ => 0,
        };
        spike + self.base_latency(rng, a, b)
    }

    fn base_latency(&self, rng: &mut impl Rng, a: u16, b: u16) -> u64 {
        if a == b {
            let (lo, hi) = self.wan.intra_dc_one_way_us;
            return rng.random_range(lo..=hi);
        }
        let base = self.base_one_way_us(a, b) as f64;
        let j = self.wan.jitter;
        let factor = if j > 0.0 { rng.random_range(1.0 - j..=1.0 + j) } else { 1.0 };
        (base * factor).round().max(1.0) as u64
    }

    /// Queues `msg`; returns the link to wake and when, if it was idle (or,
    /// under transport faults, whenever a packet arrives).
    #[allow(clippy::too_many_arguments)]
    pub fn send(
        &mut self,
        rng: &mut impl Rng,
        now: u64,
        from: NodeIx,
        to: NodeIx,
        from_dc: u16,
        to_dc: u16,
        msg: M,
    ) -> Vec<(u32, u64)> {
        let latency = self.sample_latency(rng, from, to, from_dc, to_dc);
        let id = self.link_id(from, to, from_dc, to_dc);
        if let Some(faults) = self.transport {
            return self.send_packet(rng, faults, now, id, latency, msg);
        }
        let link = &mut self.links[id as usize];
        let ready = (now + latency).max(link.last_ready);
        link.last_ready = ready;
        link.queue.push_back((ready, msg));
        self.messages_sent += 1;
        if link.scheduled {
            return Vec::new();
        }
        link.scheduled = true;
        vec![(id, ready)]
    }

    /// The packet of `msg`, and its copies: each arrival wakes the link.
    fn send_packet(
        &mut self,
        rng: &mut impl Rng,
        faults: TransportFaults,
        now: u64,
        id: u32,
        latency: u64,
        msg: M,
    ) -> Vec<(u32, u64)> {
        let (a, b) = {
            let l = &self.links[id as usize];
            (l.from_dc, l.to_dc)
        };
        let mut arrivals = vec![now + latency];
        if rng.random_bool(faults.loss) {
            // Lost; the sender resends it when no acknowledgement came.
            arrivals[0] = now + faults.resend_us + self.base_latency(rng, a, b);
            self.counts.resent += 1;
        }
        if rng.random_bool(faults.reorder) {
            // Held up in a queue somewhere long enough to be overtaken.
            arrivals[0] += rng.random_range(1..=2 * self.base_one_way_us(a, b).max(500));
        }
        if rng.random_bool(faults.duplicate) {
            arrivals.push(now + latency + rng.random_range(0..=self.base_one_way_us(a, b).max(500)));
        }
        self.messages_sent += 1;
        self.counts.packets += 1;
        let packets = self.links[id as usize].packets.as_mut().expect("a faulty transport has packets");
        let seq = packets.next_seq;
        packets.next_seq += 1;
        packets.in_flight.insert(seq, msg);
        for &at in &arrivals {
            packets.arrivals.push(Reverse((at, seq)));
        }
        arrivals.into_iter().map(|at| (id, at)).collect()
    }

    /// The next message the link delivers at `now`, if any: the head of a
    /// FIFO link, or under transport faults the next packet in sequence once
    /// it (and every one before it) has arrived.
    pub fn pop_ready(&mut self, id: u32, now: u64) -> Option<M> {
        let counts = &mut self.counts;
        let link = &mut self.links[id as usize];
        let Some(p) = link.packets.as_mut() else {
            return match link.queue.front() {
                Some((t, _)) if *t <= now => link.queue.pop_front().map(|(_, m)| m),
                _ => None,
            };
        };
        while let Some(&Reverse((at, seq))) = p.arrivals.peek() {
            if at > now {
                break;
            }
            p.arrivals.pop();
            if seq < p.next_delivered || p.early.contains(&seq) {
                counts.duplicates_dropped += 1;
            } else {
                if seq > p.next_delivered {
                    counts.arrived_early += 1;
                }
                p.early.insert(seq);
            }
        }
        if !p.early.remove(&p.next_delivered) {
            return None;
        }
        let msg = p.in_flight.remove(&p.next_delivered).expect("a packet that arrived was sent");
        p.next_delivered += 1;
        Some(msg)
    }

    pub fn link(&self, id: u32) -> &Link<M> {
        &self.links[id as usize]
    }

    pub fn link_mut(&mut self, id: u32) -> &mut Link<M> {
        &mut self.links[id as usize]
    }

    /// True if the link's messages are held by a cut. (A link to a node
    /// that is down holds nothing: its messages were lost, and new ones are
    /// dropped.)
    pub fn is_held(&self, id: u32) -> bool {
        let l = &self.links[id as usize];
        l.crosses_dcs() && (self.cut_depth[l.from_dc as usize] > 0 || self.cut_depth[l.to_dc as usize] > 0)
    }

    /// Everything on its way on link `id` is dropped and returned, as a
    /// sender that sheds its backlog to a peer drops it; the link stays
    /// FIFO for what is sent next.
    pub fn drain(&mut self, id: u32) -> Vec<M> {
        let mut lost = Vec::new();
        self.links[id as usize].drop_all(&mut lost);
        lost
    }

    /// The links that hold something on its way, with their ends.
    pub fn busy_links(&self) -> impl Iterator<Item = (u32, &Link<M>)> {
        self.links.iter().enumerate().filter(|(_, l)| !l.is_empty()).map(|(i, l)| (i as u32, l))
    }

    /// `node` is down. What was on its way to it dies with its connections
    /// and is returned; what is sent to it until it restarts is dropped by
    /// the caller ([`Network::is_down`]).
    pub fn node_down(&mut self, node: NodeIx) -> Vec<M> {
        self.down.insert(node);
        let mut lost = Vec::new();
        for link in self.links.iter_mut().filter(|l| l.to == node) {
            link.drop_all(&mut lost);
        }
        lost
    }

    /// Whether `node` is down.
    pub fn is_down(&self, node: NodeIx) -> bool {
        self.down.contains(&node)
    }

    /// `node` is up again: messages to it are carried again.
    pub fn node_up(&mut self, node: NodeIx) {
        self.down.remove(&node);
    }

    /// Wakes the links `pick` selects that hold messages and are no longer
    /// held: their messages leave now and take one base latency to arrive.
    fn wake_held(&mut self, now: u64, pick: impl Fn(&Link<M>) -> bool) -> Vec<(u32, u64)> {
        let mut wake = Vec::new();
        for id in 0..self.links.len() as u32 {
            if self.is_held(id) {
                continue;
            }
            let l = &self.links[id as usize];
            if l.scheduled || !pick(l) {
                continue;
            }
            if let Some(head) = l.head_ready() {
                let at = head.max(now + self.base_one_way_us(l.from_dc, l.to_dc));
                self.links[id as usize].scheduled = true;
                wake.push((id, at));
            }
        }
        wake
    }

    pub fn cut(&mut self, dc: u16) {
        self.cut_depth[dc as usize] += 1;
    }

    /// Heals one cut of `dc`; returns the held links to wake and when: their
    /// messages leave now and take one base latency to arrive.
    pub fn heal(&mut self, now: u64, dc: u16) -> Vec<(u32, u64)> {
        self.cut_depth[dc as usize] -= 1;
        self.wake_held(now, |l| l.crosses_dcs() && (l.from_dc == dc || l.to_dc == dc))
    }

    /// Whether links carry packets (under transport faults).
    pub fn has_packets(&self) -> bool {
        self.transport.is_some()
    }

    pub fn any_cut(&self) -> bool {
        self.cut_depth.iter().any(|&d| d > 0)
    }

    pub fn in_flight(&self) -> bool {
        self.links.iter().any(|l| !l.is_empty())
    }
}
