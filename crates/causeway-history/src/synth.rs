//! Synthetic histories that are TCC by construction, for testing and timing
//! the checker without running a protocol.
//!
//! The reference model is deliberately tiny and sequential. Every DC holds
//! one last-writer-wins value per key. A transaction runs atomically at its
//! session's DC: it reads that DC's current state (plus its own writes) and,
//! if it commits an update, gets a commit timestamp from the DC's Lamport
//! clock and applies at once locally. Other DCs apply it later, in its DC's
//! order, and only once they hold everything its DC held when it committed
//! (its dependency vector). So each DC always holds a causally closed set of
//! transactions, reads see the greatest commit_ts in it, and clocks only
//! grow along causality: the three things the checker asks for. Replication
//! lags randomly, so DCs see concurrent conflicting writes in different
//! orders before they converge. Optionally some updates are recorded as
//! `unknown`: their client "lost" the answer, and the history hides whether
//! they committed — it stays TCC for some outcome, the real one.
//!
//! With one DC nothing lags: every transaction reads the state all earlier
//! ones left, so the history is serial in commit_ts order, hence
//! serializable too — the serializability checker's large test case. With
//! several, concurrent transactions at two DCs may both overwrite what they
//! read (lost updates, write skew), which TCC allows and serializability
//! does not.
//!
//! Randomness is a 64-bit LCG so that histories are the same everywhere and
//! the crate needs no `rand`.

use crate::format::{CommitTs, FinalState, History, Op, StampElem, Status, TxnRecord};
use std::collections::BTreeMap;

/// The shape of a synthetic history.
#[derive(Clone, Debug)]
pub struct SynthConfig {
    pub txns: usize,
    /// Sessions are spread round-robin over the DCs.
    pub sessions: usize,
    pub dcs: usize,
    pub keys: usize,
    pub reads_per_txn: usize,
    /// Update transactions write 1..=this many keys.
    pub max_writes_per_txn: usize,
    pub read_only_percent: u32,
    pub abort_percent: u32,
    /// Share of update transactions whose client never learns the outcome:
    /// recorded with status `unknown` and no commit_ts, whether they
    /// committed or aborted (the model decides as usual, and replicates
    /// the committed ones). 0 draws no random numbers, so histories stay
    /// the same as without it.
    pub unknown_percent: u32,
    /// Share of update transactions that write one key twice, leaving an
    /// intermediate value nobody may read.
    pub rewrite_percent: u32,
    /// A share of accesses go to the first `hot_keys` keys, for conflicts.
    pub hot_keys: usize,
    pub hot_percent: u32,
    /// Per step and per ordered pair of DCs, the chance that a burst of up
    /// to `replication_burst` pending transactions is replicated; lower
    /// means more lag, so more concurrent writes and stale reads.
    pub replication_percent: u32,
    pub replication_burst: usize,
    pub seed: u64,
}

impl Default for SynthConfig {
    fn default() -> Self {
        SynthConfig {
            txns: 100_000,
            sessions: 100,
            dcs: 3,
            keys: 10_000,
            reads_per_txn: 20,
            max_writes_per_txn: 2,
            read_only_percent: 10,
            abort_percent: 2,
            unknown_percent: 0,
            rewrite_percent: 5,
            hot_keys: 100,
            hot_percent: 10,
            replication_percent: 10,
            replication_burst: 4,
            seed: 1,
        }
    }
}

/// Knuth's MMIX LCG; the high bits are the usable ones.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn percent(&mut self, p: u32) -> bool {
        self.below(100) < p as usize
    }
}

/// A version in a DC's store: its last-writer-wins order and its value.
#[derive(Clone, Copy)]
struct Version {
    ts: u64,
    dc: u16,
    value: u32,
}

/// A committed update in its DC's replication log.
struct Logged {
    ts: u64,
    dc: u16,
    /// How many transactions of each DC its own DC held when it committed.
    deps: Vec<usize>,
    writes: Vec<(u32, u32)>,
}

struct Dc {
    clock: u64,
    state: Vec<Option<Version>>,
    /// How many transactions of each DC's log this DC has applied.
    applied: Vec<usize>,
}

impl Dc {
    fn apply(&mut self, x: &Logged) {
        for &(key, value) in &x.writes {
            let slot = &mut self.state[key as usize];
            let newer = match slot {
                Some(v) => (v.ts, v.dc) < (x.ts, x.dc),
                None => true,
            };
            if newer {
                *slot = Some(Version { ts: x.ts, dc: x.dc, value });
            }
        }
        self.clock = self.clock.max(x.ts);
    }
}

/// Generates a history of `config.txns` transactions followed by one final
/// line per DC. The same configuration always gives the same history.
pub fn generate(config: &SynthConfig) -> History {
    let dcs = config.dcs.max(1);
    let sessions = config.sessions.max(1);
    let keys = config.keys.max(1);
    let mut rng = Lcg(config.seed ^ 0x9e37_79b9_7f4a_7c15);
    let key_names: Vec<String> = (0..keys).map(|k| format!("k{k}")).collect();
    let mut values: Vec<String> = Vec::new();
    let mut dc_state: Vec<Dc> =
        (0..dcs).map(|_| Dc { clock: 0, state: vec![None; keys], applied: vec![0; dcs] }).collect();
    let mut logs: Vec<Vec<Logged>> = (0..dcs).map(|_| Vec::new()).collect();
    let mut seqs = vec![0u64; sessions];
    let mut history = History::default();

    let pick_key = |rng: &mut Lcg| -> u32 {
        if config.hot_keys > 0 && rng.percent(config.hot_percent) {
            rng.below(config.hot_keys.min(keys)) as u32
        } else {
            rng.below(keys) as u32
        }
    };

    for step in 0..config.txns {
        let s = rng.below(sessions);
        let d = s % dcs;
        let seq = seqs[s];
        seqs[s] += 1;
        let txid = format!("dc{d}-s{s}-{seq}");

        // Plan: reads and writes interleaved, perhaps one key written twice.
        let update = !rng.percent(config.read_only_percent);
        let mut plan: Vec<(bool, u32)> = (0..config.reads_per_txn).map(|_| (false, pick_key(&mut rng))).collect();
        if update {
            let writes = 1 + rng.below(config.max_writes_per_txn.max(1));
            for _ in 0..writes {
                let at = rng.below(plan.len() + 1);
                plan.insert(at, (true, pick_key(&mut rng)));
            }
            if rng.percent(config.rewrite_percent) {
                let first = plan.iter().position(|&(w, _)| w).expect("an update writes");
                let at = first + 1 + rng.below(plan.len() - first);
                plan.insert(at, (true, plan[first].1));
            }
            // Sometimes read back a key just written.
            if let Some(&(_, key)) = plan.iter().find(|&&(w, _)| w) {
                if rng.percent(30) {
                    plan.push((false, key));
                }
            }
        }
        let aborted = update && rng.percent(config.abort_percent);
        let unknown = update && config.unknown_percent > 0 && rng.percent(config.unknown_percent);

        // Execute atomically against the DC's current state.
        let dc = &dc_state[d];
        let mut own: BTreeMap<u32, String> = BTreeMap::new();
        let mut ops = Vec::with_capacity(plan.len());
        for (i, &(is_write, key)) in plan.iter().enumerate() {
            let name = &key_names[key as usize];
            if is_write {
                let rewritten_later = plan[i + 1..].iter().any(|&(w, k)| w && k == key);
                let value = if rewritten_later { format!("{txid}:{name}#{i}") } else { format!("{txid}:{name}") };
                own.insert(key, value.clone());
                ops.push(Op::write(name.clone(), value));
            } else {
                let value = match own.get(&key) {
                    Some(v) => Some(v.clone()),
                    None => dc.state[key as usize].map(|v| values[v.value as usize].clone()),
                };
                ops.push(Op::read(name.clone(), value));
            }
        }

        let mut commit_ts = None;
        if update && !aborted {
            let dc = &mut dc_state[d];
            let ts = (dc.clock + 1).max(step as u64 * 10);
            dc.clock = ts;
            let writes: Vec<(u32, u32)> = own
                .into_iter()
                .map(|(key, value)| {
                    values.push(value);
                    (key, values.len() as u32 - 1)
                })
                .collect();
            let logged = Logged { ts, dc: d as u16, deps: dc.applied.clone(), writes };
            dc.apply(&logged);
            logs[d].push(logged);
            dc.applied[d] = logs[d].len();
            commit_ts =
                Some(CommitTs(vec![StampElem::Int(ts), StampElem::Int(d as u64), StampElem::Str(txid.clone())]));
        }
        history.txns.push(TxnRecord {
            txid,
            session: format!("dc{d}-s{s}"),
            seq,
            dc: d as u16,
            status: if unknown {
                Status::Unknown
            } else if aborted {
                Status::Aborted
            } else {
                Status::Committed
            },
            ops,
            commit_ts: if unknown { None } else { commit_ts },
            start_us: step as u64 * 10,
            end_us: step as u64 * 10 + 5,
        });

        for to in 0..dcs {
            for from in 0..dcs {
                if to != from && rng.percent(config.replication_percent) {
                    for _ in 0..config.replication_burst {
                        replicate_one(&mut dc_state, &logs, to, from);
                    }
                }
            }
        }
    }

    // Quiesce: replicate until every DC holds every transaction. Progress is
    // guaranteed because dependencies only name earlier log entries.
    loop {
        let mut progress = false;
        for to in 0..dcs {
            for from in 0..dcs {
                while to != from && replicate_one(&mut dc_state, &logs, to, from) {
                    progress = true;
                }
            }
        }
        if !progress {
            break;
        }
    }
    for (d, dc) in dc_state.iter().enumerate() {
        let state = dc
            .state
            .iter()
            .enumerate()
            .filter_map(|(k, v)| v.map(|v| (key_names[k].clone(), values[v.value as usize].clone())))
            .collect();
        history.finals.push(FinalState { dc: d as u16, state, partial: false });
    }
    history
}

/// Applies the next transaction of `from`'s log at `to` if `to` already holds
/// its causal past. Returns whether it did.
fn replicate_one(dc_state: &mut [Dc], logs: &[Vec<Logged>], to: usize, from: usize) -> bool {
    let next = dc_state[to].applied[from];
    let Some(x) = logs[from].get(next) else { return false };
    let ready = x.deps.iter().enumerate().all(|(f, &need)| f == from || f == to || need <= dc_state[to].applied[f]);
    if ready {
        dc_state[to].apply(x);
        dc_state[to].applied[from] += 1;
    }
    ready
}
