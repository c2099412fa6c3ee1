//! The family's side of a re-seed ([`crate::recovery::seed`]): what a
//! replica answers one of its partition or its DC that lost its state, and
//! how the answers become the lost replica's records.

use super::durable::FamilyRecord;
use super::family_replica::{FamilyEffects, FamilyReplica, RecordOf};
use super::Family;
use crate::hlc::Timestamp;
use crate::ids::{Addr, DcId, TxId};
use crate::recovery::seed::{self, Seed, SeedFacts, SeedGroup};
use crate::recovery::Reserved;
use rustc_hash::FxHashSet;
use std::collections::{BTreeMap, BTreeSet};

type Writes<R> = <<R as FamilyReplica>::Family as Family>::Writes;

/// A seed question from `from`, answered once what the answer says is
/// durable here. A peer (this partition, another DC) gets the versions held
/// here of its DC and of this one, grouped as the streams carried them —
/// this DC's only up to the newest position sent, the rest follows in the
/// stream — and where the streams between the two stand. A sibling (this
/// DC) gets how far the ids of its transactions prepared here go, and the
/// commit times of those of its transactions committed here that another
/// partition may still hold prepared (above the DC's stable time): the
/// decisions it lost. Both get the clock. A replica that is re-seeding
/// itself holds nothing: it answers with its clock alone, so that two
/// replicas of a partition that lost their disks together do not wait for
/// each other (each gets the other DC's versions from the one that re-seeds
/// first, as groups kept for it). False if `from` is neither.
pub fn answer<R: FamilyReplica>(r: &R, from: Addr, attempt: u32, out: &mut FamilyEffects<R>) -> bool {
    let core = r.core();
    let me = core.id;
    let Addr::Replica(asker) = from else { return false };
    let sibling = asker.dc == me.dc && asker.partition != me.partition;
    if !sibling && core.replication.streams.source_of(from).is_none() {
        return false;
    }
    let mut facts = SeedFacts { clock: core.clock(), ..SeedFacts::default() };
    if core.seeding.is_some() {
        seed::answer(from, attempt, std::iter::empty(), facts, out);
        return true;
    }
    let theirs = |tx: TxId| tx.coordinator() == asker.partition;
    if sibling {
        // The stamps alone: a sibling gets no versions.
        let stable = r.dc_stable();
        let stamps = core.store.chains().flat_map(|(_, chain)| chain.iter().map(|v| v.stamp));
        let installed = stamps.filter(|s| s.dc == me.dc && s.ts >= stable && theirs(s.txid)).map(|s| (s.txid, s.ts));
        let queued = core.replication.queued().filter(|&(_, tx, _)| theirs(tx)).map(|(ct, tx, _)| (tx, ct));
        let decided: BTreeSet<(TxId, Timestamp)> = installed.chain(queued).collect();
        let prepared = core.prepared.entries().filter(|&(_, _, coordinator, _)| coordinator == from).map(|(tx, ..)| tx);
        let ids = prepared.chain(decided.iter().map(|&(tx, _)| tx));
        facts.txids_below = ids.map(|tx| tx.counter() + 1).max().unwrap_or(0);
        facts.decided = decided.into_iter().collect();
        seed::answer(from, attempt, std::iter::empty(), facts, out);
        return true;
    }
    let rejoining = !core.starts.is_open() && core.holes.is_empty() && core.horizon == Timestamp::ZERO;
    if rejoining {
        // Restarted from its disk, and not yet told its DC's oldest
        // snapshot again: its collection bound would say too little. The
        // asker asks again. (A re-seeded replica has collected little
        // itself; what its sources had is its horizon, below.)
        return true;
    }
    let peer_dc = asker.dc;
    // With the deletes collected here lately: where the answer's versions
    // go, a delete may not have arrived yet.
    let held = core.store.by_transaction();
    // The newest position of this replica's stream: what it sent, or —
    // after a restart, which forgets that once the peers acknowledged it —
    // the newest of its DC's commits held here that are not waiting to go.
    let streams = &core.replication.streams;
    let waiting: FxHashSet<Timestamp> = core.replication.queued().map(|(ct, ..)| ct).collect();
    let sent = held.keys().filter(|&&(source, ct, _)| source == me.dc && !waiting.contains(&ct));
    let newest = sent.map(|&(_, ct, _)| ct).max().unwrap_or(Timestamp::ZERO).max(streams.newest());
    // Per group (DC and commit time): its transactions, and their bytes.
    type Sized<W> = (Vec<W>, usize);
    let mut groups: BTreeMap<(DcId, Timestamp), Sized<Writes<R>>> = BTreeMap::new();
    for ((source, ct, txid), (meta, writes)) in held {
        let wanted = (source == me.dc && ct <= newest) || source == peer_dc;
        if !wanted {
            continue;
        }
        if source == peer_dc && theirs(txid) {
            facts.txids_below = facts.txids_below.max(txid.counter() + 1);
        }
        let bytes: usize = writes.iter().map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len())).sum();
        let group = groups.entry((source, ct)).or_default();
        group.0.push(R::stored_writes(source, txid, meta, writes));
        group.1 += bytes;
    }
    (facts.newest, facts.received) = (newest, streams.received_from(peer_dc));
    facts.collected_upto = r.collection_bound().max(core.horizon);
    let groups = groups.into_iter().map(|((source, at), (txs, bytes))| (SeedGroup { source, at, txs }, bytes));
    seed::answer(from, attempt, groups, facts, out);
    true
}

/// The records that rebuild a replica from its seed: the reservations
/// above everything of the lost replica's anyone has seen; each peer's
/// versions of its DC and its stream's position; the decisions of its
/// transactions the siblings hold; this DC's versions from the peer that
/// received the most of them, and those of them some peer lacks kept to be
/// resent; then the mark that the re-seed is complete.
pub fn records<R: FamilyReplica>(seed: &Seed<Timestamp, Writes<R>>) -> Vec<RecordOf<R>> {
    let (clock, txids) = seed.resume_points(|t| t);
    let mut records: Vec<RecordOf<R>> = vec![Reserved::Clock(clock).into(), Reserved::TxIds(txids).into()];
    for (dc, newest, groups) in seed.peer_groups() {
        records.extend(groups.map(|g| FamilyRecord::Installed { source: dc, ct: g.at, txs: g.txs.clone() }));
        if newest > Timestamp::ZERO {
            records.push(FamilyRecord::Applied { source: dc, ct: newest, txs: Vec::new() });
        }
    }
    records.extend(seed.decided().map(|(tx, ct)| FamilyRecord::Decided { tx, ct }));
    if let Some((best, least)) = seed.own_dc_source() {
        let mut own: Vec<&SeedGroup<_, _>> = seed.own_groups_from(best).collect();
        own.sort_by_key(|g| g.at);
        let me = seed.me().dc;
        records.extend(own.iter().map(|g| FamilyRecord::Installed { source: me, ct: g.at, txs: g.txs.clone() }));
        let lacking = own.iter().filter(|g| g.at > least);
        records.extend(lacking.map(|g| FamilyRecord::Kept { ct: g.at, txs: g.txs.clone() }));
    }
    // Caught up only once every peer's stream has passed the clocks of the
    // replicas that answered: everything the lost replica had received
    // from anyone is below them.
    let holes = seed.peer_groups().map(|(dc, ..)| (dc, clock)).collect();
    records.push(FamilyRecord::Reseeded { horizon: seed.horizon(), holes });
    records
}
