//! The message codec: postcard encoding and decoding of the messages on
//! the hot path between servers — a read slice's answer with 5 values, a
//! replication batch of 16 transactions — and a client's read answer.

use bytes::Bytes;
use causeway_protocol::wren::messages::TxWrites;
use causeway_protocol::wren::WrenMsg;
use causeway_protocol::{Timestamp, TxId};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

fn value() -> Bytes {
    Bytes::from_static(b"12345678")
}

fn messages() -> Vec<(&'static str, WrenMsg)> {
    let ts = Timestamp::from_physical(1_700_000_000_000_000);
    let slice = WrenMsg::SliceResp {
        tx: TxId(42),
        round: 0,
        values: (0..5).map(|i| (Bytes::from(format!("k{}", 10_000 + i)), Some(value()))).collect(),
    };
    let replicate = WrenMsg::Replicate {
        ct: ts,
        txs: (0..16)
            .map(|i| TxWrites {
                txid: TxId(i),
                rdt: ts,
                writes: vec![(Bytes::from(format!("k{}", 20_000 + i)), Some(value()))],
            })
            .collect(),
    };
    let prepare = WrenMsg::PrepareReq {
        tx: TxId(7),
        snapshot: Default::default(),
        ht: ts,
        writes: vec![(Bytes::from_static(b"k31337"), Some(value()))],
        alone: None,
    };
    vec![("slice_resp_5", slice), ("replicate_16", replicate), ("prepare_1", prepare)]
}

fn codec(c: &mut Criterion) {
    let mut group = c.benchmark_group("codec");
    for (name, msg) in messages() {
        let bytes = postcard::to_allocvec(&msg).expect("encodes");
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::new("encode", name), &msg, |b, msg| {
            b.iter(|| postcard::to_allocvec(black_box(msg)).expect("encodes"))
        });
        group.bench_with_input(BenchmarkId::new("size", name), &msg, |b, msg| {
            b.iter(|| postcard::experimental::serialized_size(black_box(msg)).expect("sizes"))
        });
        group.bench_with_input(BenchmarkId::new("decode", name), &bytes, |b, bytes| {
            b.iter(|| postcard::from_bytes::<WrenMsg>(black_box(bytes)).expect("decodes"))
        });
    }
    group.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
