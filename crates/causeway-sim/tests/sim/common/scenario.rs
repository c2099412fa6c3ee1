//! What the hand-cranked scenario tests share.

use causeway_protocol::{ClientId, Protocol, SessionEvent, Topology};
use causeway_sim::harness::{Harness, InFlight};

/// A key name that the store hashes to `partition`.
pub fn key_in(topology: &Topology, partition: u32, prefix: &str) -> String {
    (0..).map(|i| format!("{prefix}{i}")).find(|k| topology.partition_of(k.as_bytes()).0 == partition).unwrap()
}

pub fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

/// Runs a transaction to completion, delivering everything: begin, writes,
/// commit. Returns how it ended.
pub fn run_txn<P: Protocol>(h: &mut Harness<P>, c: ClientId, writes: &[(&str, &str)]) -> SessionEvent {
    run_txn_where(h, c, writes, |_| true)
}

/// [`run_txn`], delivering only the messages `pick` lets through.
pub fn run_txn_where<P: Protocol>(
    h: &mut Harness<P>,
    c: ClientId,
    writes: &[(&str, &str)],
    pick: impl FnMut(&InFlight<P::Message>) -> bool + Copy,
) -> SessionEvent {
    let now = h.begin(c).unwrap();
    h.deliver_where(pick);
    // Some protocols start a transaction without asking the cluster.
    assert_eq!(now.or_else(|| h.take_event(c)), Some(SessionEvent::Started));
    for (k, v) in writes {
        h.write(c, k, v).unwrap();
    }
    let now = h.commit(c).unwrap();
    h.deliver_where(pick);
    now.or_else(|| h.take_event(c)).expect("the transaction finished")
}

/// Runs a transaction that writes `writes` and commits it, delivering only
/// the messages `pick` lets through; returns how the commit ended, if it has.
pub fn commit_where<P: Protocol>(
    h: &mut Harness<P>,
    c: ClientId,
    writes: &[(&str, &str)],
    pick: impl FnMut(&InFlight<P::Message>) -> bool,
) -> Option<SessionEvent> {
    h.begin(c).unwrap();
    h.deliver_all();
    h.take_event(c);
    for (k, v) in writes {
        h.write(c, k, v).unwrap();
    }
    let now = h.commit(c).unwrap();
    h.deliver_where(pick);
    now.or_else(|| h.take_event(c))
}

/// The values of a read's completion, as strings.
pub fn read_values(event: Option<SessionEvent>) -> Vec<Option<String>> {
    match event {
        Some(SessionEvent::Read(values)) => {
            values.into_iter().map(|(_, v)| v.map(|v| String::from_utf8(v.to_vec()).unwrap())).collect()
        }
        other => panic!("expected a read result, got {other:?}"),
    }
}

/// Reads `keys` in a fresh read-only transaction, delivering only what
/// `pick` allows; the values read.
pub fn read_txn<P: Protocol>(
    h: &mut Harness<P>,
    c: ClientId,
    keys: &[&str],
    pick: impl Fn(&InFlight<P::Message>) -> bool + Copy,
) -> Vec<Option<String>> {
    h.begin(c).unwrap();
    h.deliver_where(pick);
    assert_eq!(h.take_event(c), Some(SessionEvent::Started));
    let immediate = h.read(c, keys).unwrap();
    h.deliver_where(pick);
    let values = read_values(immediate.or_else(|| h.take_event(c)));
    assert_eq!(h.commit(c).unwrap(), Some(SessionEvent::Committed(None)), "read-only commits locally");
    h.deliver_where(pick);
    values
}
