//! The family's side of a re-seed ([`crate::recovery::seed`]): what a
//! replica answers one of its partition or its DC that lost its state, and
//! how the answers become the lost replica's records.

use super::durable::FamilyRecord;
use super::replica::{FamilyEffects, FamilyReplica, RecordOf};
use super::Family;
use crate::hlc::Timestamp;
use crate::ids::{Addr, DcId};
use crate::recovery::seed::{self, Seed, SeedFacts, SeedGroup};
use crate::recovery::Reserved;
use std::collections::BTreeMap;

type Writes<R> = <<R as FamilyReplica>::Family as Family>::Writes;

/// A seed question from `from`, answered once what the answer says is
/// durable here. A peer (this partition, another DC) gets the versions held
/// here of its DC and of this one, grouped as the streams carried them —
/// this DC's only up to the newest position sent, the rest follows in the
/// stream — and where the streams between the two stand; a sibling (this
/// DC) gets the clock and how far the ids of its transactions prepared here
/// go. A replica that is re-seeding itself holds nothing to tell a peer
/// (the question is dropped; the asker asks again), and its clock alone to
/// a sibling. False if `from` is neither.
pub fn answer<R: FamilyReplica>(r: &R, from: Addr, attempt: u32, out: &mut FamilyEffects<R>) -> bool {
    let core = r.core();
    let me = core.id;
    let Addr::Replica(asker) = from else { return false };
    let clock = core.clock();
    if asker.dc == me.dc && asker.partition != me.partition {
        let txids_below = core
            .prepared
            .entries()
            .filter(|&(_, _, coordinator, _)| coordinator == from)
            .map(|(tx, ..)| tx.counter() + 1)
            .max()
            .unwrap_or(0);
        let facts = SeedFacts { clock, txids_below, ..SeedFacts::default() };
        seed::answer(from, attempt, std::iter::empty(), facts, out);
        return true;
    }
    let Some(peer_dc) = core.replication.streams.source_of(from) else { return false };
    if core.seeding.is_some() {
        return true;
    }
    let streams = &core.replication.streams;
    let newest = streams.newest();
    let mut txids_below = 0;
    // Per group (DC and commit time): its transactions, and their bytes.
    type Sized<W> = (Vec<W>, usize);
    let mut groups: BTreeMap<(DcId, Timestamp), Sized<Writes<R>>> = BTreeMap::new();
    for ((source, ct, txid), (meta, writes)) in core.store.by_transaction() {
        let wanted = (source == me.dc && ct <= newest) || source == peer_dc;
        if !wanted {
            continue;
        }
        if source == peer_dc && txid.coordinator() == asker.partition {
            txids_below = txids_below.max(txid.counter() + 1);
        }
        let bytes: usize = writes.iter().map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len())).sum();
        let group = groups.entry((source, ct)).or_default();
        group.0.push(R::stored_writes(txid, meta, writes));
        group.1 += bytes;
    }
    let facts = SeedFacts { newest, received: streams.received_from(peer_dc), clock, txids_below };
    let groups = groups.into_iter().map(|((source, at), (txs, bytes))| (SeedGroup { source, at, txs }, bytes));
    seed::answer(from, attempt, groups, facts, out);
    true
}

/// The records that rebuild a replica from its seed: the reservations
/// above everything of the lost replica's anyone has seen; each peer's
/// versions of its DC and its stream's position; this DC's versions from
/// the peer that received the most of them, and those of them some peer
/// lacks kept to be resent; then the mark that the re-seed is complete.
pub fn records<R: FamilyReplica>(seed: &Seed<Timestamp, Writes<R>>) -> Vec<RecordOf<R>> {
    let (clock, txids) = seed.resume_points(|t| t);
    let mut records: Vec<RecordOf<R>> = vec![Reserved::Clock(clock).into(), Reserved::TxIds(txids).into()];
    for (dc, newest, groups) in seed.peer_groups() {
        records.extend(groups.map(|g| FamilyRecord::Installed { source: dc, ct: g.at, txs: g.txs.clone() }));
        if newest > Timestamp::ZERO {
            records.push(FamilyRecord::Applied { source: dc, ct: newest, txs: Vec::new() });
        }
    }
    if let Some((best, least)) = seed.own_dc_source() {
        let mut own: Vec<&SeedGroup<_, _>> = seed.own_groups_from(best).collect();
        own.sort_by_key(|g| g.at);
        let me = seed.me().dc;
        records.extend(own.iter().map(|g| FamilyRecord::Installed { source: me, ct: g.at, txs: g.txs.clone() }));
        let lacking = own.iter().filter(|g| g.at > least);
        records.extend(lacking.map(|g| FamilyRecord::Kept { ct: g.at, txs: g.txs.clone() }));
    }
    records.push(FamilyRecord::Reseeded);
    records
}
