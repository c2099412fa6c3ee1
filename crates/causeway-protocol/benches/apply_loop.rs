//! The apply loop (Wren, Alg. 4): a partition replica with a batch of
//! prepared-then-committed transactions applies them at its Δ_R timer,
//! installs the versions and replicates them to the other DCs' replicas.
//! Measured per batch of 1, 16 and 256 transactions.

use bytes::Bytes;
use causeway_protocol::twopc::FamilyEffects;
use causeway_protocol::wren::WrenReplica;
use causeway_protocol::wren::{Wren, WrenMsg, WrenTimer};
use causeway_protocol::{Addr, PartitionId, Protocol, Replica, ReplicaId, Timestamp, Topology, Tuning, TxId};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use std::sync::Arc;

const NOW: u64 = 1_700_000_000_000_000;

/// A replica of partition 0 in DC 0 of 3 DCs × 2 partitions, with `n`
/// committed transactions waiting for the apply loop.
fn replica_with_commits(n: u64) -> <Wren as Protocol>::Replica {
    let topology = Arc::new(Topology::full(3, 2).expect("valid topology"));
    let config = Wren::configure(&Tuning::default());
    let me = ReplicaId::new(0, 0);
    let mut r = Wren::replica(me, topology, &config);
    let mut out = FamilyEffects::<WrenReplica>::default();
    r.start(NOW, &mut out);
    let coordinator = Addr::Replica(ReplicaId::new(0, 1));
    for i in 0..n {
        out.messages.clear();
        out.after_durable.clear();
        let tx = TxId::new(PartitionId(1), i);
        let writes = vec![(Bytes::from(format!("k{i}")), Some(Bytes::from_static(b"12345678")))];
        let prepare =
            WrenMsg::PrepareReq { tx, snapshot: Default::default(), ht: Timestamp::ZERO, writes, alone: None };
        r.on_message(NOW, coordinator, prepare, &mut out);
        out.sync_at_once();
        let pt = out
            .messages
            .iter()
            .find_map(|(_, m)| match m {
                WrenMsg::PrepareResp { pt, .. } => Some(*pt),
                _ => None,
            })
            .expect("a prepare is answered");
        r.on_message(NOW, coordinator, WrenMsg::Commit { tx, ct: pt }, &mut out);
    }
    r
}

fn apply_loop(c: &mut Criterion) {
    let mut group = c.benchmark_group("apply_loop");
    for n in [1u64, 16, 256] {
        group.throughput(Throughput::Elements(n));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter_batched(
                || (replica_with_commits(n), FamilyEffects::<WrenReplica>::default()),
                |(mut r, mut out)| {
                    // Later than every proposal: everything committed applies.
                    r.on_timer(NOW + 10_000, WrenTimer::Apply, &mut out);
                    (r, out)
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, apply_loop);
criterion_main!(benches);
