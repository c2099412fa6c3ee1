//! The read path: finding the version a Wren snapshot sees in a version
//! chain, as a cohort does for every key of a read slice (hot path).
//! Chains of 1 to 4,096 versions; the snapshot sees the newest version, or
//! only the one in the middle of the chain (a long-running reader), found
//! by a full scan from the newest end (`scan`, the read path before the
//! performance pass) and by Wren's bounded search (`upto`, the one it
//! uses: a binary search skips versions stamped after the snapshot).

use bytes::Bytes;
use causeway_protocol::mvstore::{Version, VersionChain};
use causeway_protocol::wren::snapshot::{visible, Snapshot};
use causeway_protocol::{CommitStamp, DcId, Timestamp, TxId};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;

fn chain(len: u64) -> VersionChain<Timestamp> {
    let mut c = VersionChain::default();
    for i in 1..=len {
        let dc = DcId((i % 3) as u16);
        let ts = Timestamp::from_physical(1_000_000 + i * 10);
        let rdt = Timestamp::from_physical(1_000_000 + i * 10 - 5);
        c.insert(Version {
            value: Some(Bytes::from_static(b"12345678")),
            stamp: CommitStamp { ts, dc, txid: TxId(i) },
            meta: rdt,
        });
    }
    c
}

fn read_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("read_path");
    for len in [1u64, 16, 256, 4096] {
        let chain = chain(len);
        let newest = Snapshot { lt: Timestamp::MAX, rt: Timestamp::MAX };
        let middle = Timestamp::from_physical(1_000_000 + (len / 2).max(1) * 10);
        let old = Snapshot { lt: middle, rt: middle };
        group.bench_with_input(BenchmarkId::new("newest/scan", len), &chain, |b, chain| {
            b.iter(|| chain.newest_visible(|v| visible(DcId(0), v, black_box(newest))).map(|v| v.stamp.txid))
        });
        group.bench_with_input(BenchmarkId::new("newest/upto", len), &chain, |b, chain| {
            b.iter(|| {
                let s = black_box(newest);
                chain.newest_visible_upto(s.lt.max(s.rt), |v| visible(DcId(0), v, s)).map(|v| v.stamp.txid)
            })
        });
        group.bench_with_input(BenchmarkId::new("middle/scan", len), &chain, |b, chain| {
            b.iter(|| chain.newest_visible(|v| visible(DcId(0), v, black_box(old))).map(|v| v.stamp.txid))
        });
        group.bench_with_input(BenchmarkId::new("middle/upto", len), &chain, |b, chain| {
            b.iter(|| {
                let s = black_box(old);
                chain.newest_visible_upto(s.lt.max(s.rt), |v| visible(DcId(0), v, s)).map(|v| v.stamp.txid)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, read_path);
criterion_main!(benches);
