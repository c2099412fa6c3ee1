//! The simulated network: one FIFO queue per directed link, latency drawn
//! from the WAN model with jitter, and DC cuts that hold messages on every
//! link that crosses the cut until it heals.
//!
//! FIFO is by construction: a message never becomes ready before the one
//! sent before it on the same link, and only a link's head is delivered.

use crate::config::LatencySpikes;
use causeway_workload::WanModel;
use rand::Rng;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// Dense index of a node (replica or client) in a simulation.
pub type NodeIx = u32;

pub struct Link<M> {
    pub from: NodeIx,
    pub to: NodeIx,
    pub from_dc: u16,
    pub to_dc: u16,
    queue: VecDeque<(u64, M)>,
    last_ready: u64,
    /// A `LinkReady` event is pending for this link.
    pub scheduled: bool,
}

impl<M> Link<M> {
    pub fn head_ready(&self) -> Option<u64> {
        self.queue.front().map(|(t, _)| *t)
    }

    pub fn pop_ready(&mut self, now: u64) -> Option<M> {
        match self.queue.front() {
            Some((t, _)) if *t <= now => self.queue.pop_front().map(|(_, m)| m),
            _ => None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
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
    pub messages_sent: u64,
}

impl<M> Network<M> {
    pub fn new(wan: WanModel, spikes: Option<LatencySpikes>, dcs: u16) -> Self {
        Network {
            wan,
            spikes,
            links: Vec::new(),
            index: FxHashMap::default(),
            cut_depth: vec![0; dcs as usize],
            messages_sent: 0,
        }
    }

    fn link_id(&mut self, from: NodeIx, to: NodeIx, from_dc: u16, to_dc: u16) -> u32 {
        let links = &mut self.links;
        *self.index.entry((from, to)).or_insert_with(|| {
            links.push(Link { from, to, from_dc, to_dc, queue: VecDeque::new(), last_ready: 0, scheduled: false });
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

    /// Queues `msg`; returns the link to wake and when, if it was idle.
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
    ) -> Option<(u32, u64)> {
        let latency = self.sample_latency(rng, from, to, from_dc, to_dc);
        let id = self.link_id(from, to, from_dc, to_dc);
        let link = &mut self.links[id as usize];
        let ready = (now + latency).max(link.last_ready);
        link.last_ready = ready;
        link.queue.push_back((ready, msg));
        self.messages_sent += 1;
        if link.scheduled {
            return None;
        }
        link.scheduled = true;
        Some((id, ready))
    }

    pub fn link(&self, id: u32) -> &Link<M> {
        &self.links[id as usize]
    }

    pub fn link_mut(&mut self, id: u32) -> &mut Link<M> {
        &mut self.links[id as usize]
    }

    /// True if the link's messages are held by a cut.
    pub fn is_held(&self, id: u32) -> bool {
        let l = &self.links[id as usize];
        l.crosses_dcs() && (self.cut_depth[l.from_dc as usize] > 0 || self.cut_depth[l.to_dc as usize] > 0)
    }

    pub fn cut(&mut self, dc: u16) {
        self.cut_depth[dc as usize] += 1;
    }

    /// Heals one cut of `dc`; returns the held links to wake and when: their
    /// messages leave now and take one base latency to arrive.
    pub fn heal(&mut self, now: u64, dc: u16) -> Vec<(u32, u64)> {
        self.cut_depth[dc as usize] -= 1;
        let mut wake = Vec::new();
        for id in 0..self.links.len() as u32 {
            if self.is_held(id) {
                continue;
            }
            let l = &self.links[id as usize];
            if l.scheduled || !l.crosses_dcs() || (l.from_dc != dc && l.to_dc != dc) {
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

    pub fn any_cut(&self) -> bool {
        self.cut_depth.iter().any(|&d| d > 0)
    }

    pub fn in_flight(&self) -> bool {
        self.links.iter().any(|l| !l.is_empty())
    }
}
