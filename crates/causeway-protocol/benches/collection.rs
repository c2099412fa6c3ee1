//! Collection by time on a hot key (PrompTCC's and Eiger's §VII rule): each
//! write appends a version and drops the oldest one the window no longer
//! needs, in a chain that holds `held` versions — what a key written
//! `held / timeout` times a second keeps. The cost of one write must not
//! grow with how many versions the key holds (it did while the chain was a
//! vector: dropping the oldest moved all the others).

use bytes::Bytes;
use causeway_protocol::mvstore::{MvStore, Version};
use causeway_protocol::{CommitStamp, DcId, Key, Timestamp, TxId};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn version(i: u64) -> Version<()> {
    let ts = Timestamp::from_physical(1_000_000 + i * 10);
    Version {
        value: Some(Bytes::from_static(b"12345678")),
        stamp: CommitStamp { ts, dc: DcId(0), txid: TxId(i) },
        meta: (),
    }
}

fn collection(c: &mut Criterion) {
    let mut group = c.benchmark_group("collection");
    let key = Key::from_static(b"hot");
    for held in [16u64, 1024, 8192] {
        group.bench_with_input(BenchmarkId::new("write_to_hot_key", held), &held, |b, &held| {
            let mut store = MvStore::default();
            let mut next = 0u64;
            // Versions at least `held` writes old are past the window.
            let mut write = |store: &mut MvStore<()>| {
                next += 1;
                let horizon = Timestamp::from_physical(1_000_000 + next.saturating_sub(held) * 10);
                store.insert_pruning_oldest(key.clone(), version(next), |v| v.stamp.ts < horizon)
            };
            for _ in 0..held + 2 {
                write(&mut store);
            }
            b.iter(|| write(&mut store))
        });
    }
    group.finish();
}

criterion_group!(benches, collection);
criterion_main!(benches);
