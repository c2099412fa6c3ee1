//! What an Eiger partition refuses from the network: a timestamp that would
//! move its clock arbitrarily far, more dependencies than a client sends,
//! keys of another partition — counted, never a panic, the clock unmoved.

use super::messages::{EigerDeps, EigerMsg};
use super::replica::EigerReplica;
use super::{EigerConfig, MAX_DEPS};
use crate::contract::replica::ReplicaEffects;
use crate::contract::{Key, ReadTag, Replica, Value};
use crate::hlc::Timestamp;
use crate::ids::{Addr, ClientId, DcId, PartitionId, ReplicaId};
use crate::topology::Topology;
use crate::write_only::WtxId;
use std::sync::Arc;

type Out = ReplicaEffects<EigerReplica>;

const NOW: u64 = 10_000_000;

fn partition() -> (EigerReplica, Arc<Topology>) {
    let topology = Arc::new(Topology::full(1, 2).unwrap());
    let mut r = EigerReplica::new(ReplicaId::new(0, 0), topology.clone(), EigerConfig::default());
    r.start(NOW, &mut Out::default());
    (r, topology)
}

fn key_of(topology: &Topology, p: u32) -> Key {
    (0..).map(|i| Key::from(format!("k{i}"))).find(|k| topology.partition_of(k) == PartitionId(p)).unwrap()
}

fn client() -> Addr {
    Addr::Client(ClientId { dc: DcId(0), index: 7 })
}

#[test]
fn a_read_with_a_clock_far_ahead_is_refused_and_moves_nothing() {
    let (mut r, topology) = partition();
    let tag = ReadTag { tx: 1, round: 0 };
    let far = Timestamp::from_physical(NOW + 3_600_000_000);
    for (clock, at) in [(far, None), (Timestamp::ZERO, Some(far))] {
        let mut out = Out::default();
        r.on_message(NOW, client(), EigerMsg::Read { tag, keys: vec![key_of(&topology, 0)], clock, at }, &mut out);
        assert!(out.messages.is_empty(), "no answer: {:?}", out.messages);
    }
    assert_eq!(r.counters().inputs_refused, 2);
    // The next first round vouches for nothing beyond the clock.
    let mut out = Out::default();
    r.on_message(
        NOW,
        client(),
        EigerMsg::Read { tag, keys: vec![key_of(&topology, 0)], clock: Timestamp::ZERO, at: None },
        &mut out,
    );
    match &out.messages[..] {
        [(_, EigerMsg::Valid { values, .. })] => assert!(values[0].lvt < far, "{:?}", values[0]),
        other => panic!("a first round's answer, got {other:?}"),
    }
}

#[test]
fn a_write_with_too_many_dependencies_or_another_partitions_key_is_refused() {
    let (mut r, topology) = partition();
    let c = ClientId { dc: DcId(0), index: 7 };
    let write = |n: u64, key: Key, deps: usize| EigerMsg::Write {
        tx: WtxId { client: c, epoch: 1, n },
        writes: vec![(key.clone(), Some(Value::from("v")))],
        participants: vec![PartitionId(0)],
        coordinator: PartitionId(0),
        deps: EigerDeps { clock: Timestamp::ZERO, deps: vec![(key, Timestamp::ZERO); deps] },
    };
    for msg in [write(1, key_of(&topology, 0), MAX_DEPS + 1), write(2, key_of(&topology, 1), 0)] {
        let mut out = Out::default();
        r.on_message(NOW, Addr::Client(c), msg, &mut out);
        assert!(out.records.iter().all(|rec| !matches!(rec, super::EigerRecord::Prepared(_))), "nothing prepared");
    }
    assert_eq!(r.counters().inputs_refused, 2);
    let mut out = Out::default();
    r.on_message(NOW, Addr::Client(c), write(3, key_of(&topology, 0), MAX_DEPS), &mut out);
    assert!(
        out.records.iter().any(|rec| matches!(rec, super::EigerRecord::Prepared(_))),
        "a write within bounds is prepared"
    );
    assert_eq!(r.counters().inputs_refused, 2);
}
