//! Protocol messages as drivers see them: a class to count them by, read
//! tags to measure waiting, and whether they are background traffic.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;

/// What a message is for: drivers count messages and bytes per class. The
/// set is open: each protocol declares its classes ([`Message::CLASSES`]),
/// and drivers count whatever classes there are. The four of the Wren
/// paper's measurements are here for the protocols that share them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MsgClass {
    /// Its place in the protocol's [`Message::CLASSES`].
    index: u8,
    name: &'static str,
}

impl MsgClass {
    /// Between a client and its coordinator (or the partitions it reads).
    pub const CLIENT: MsgClass = MsgClass::new(0, "client");
    /// Coordinator to cohorts: read slices, prepare, commit.
    pub const TRANSACTION: MsgClass = MsgClass::new(1, "transaction");
    /// Between replicas of a partition in different DCs: updates and heartbeats.
    pub const REPLICATION: MsgClass = MsgClass::new(2, "replication");
    /// Inside a DC: stable-time gossip and garbage-collection bounds.
    pub const STABILIZATION: MsgClass = MsgClass::new(3, "stabilization");

    /// The class at `index` of a protocol's list, named `name` (lower case,
    /// one word: it labels metrics and report fields).
    pub const fn new(index: u8, name: &'static str) -> MsgClass {
        MsgClass { index, name }
    }

    pub fn index(self) -> usize {
        usize::from(self.index)
    }

    pub fn name(self) -> &'static str {
        self.name
    }
}

/// Whether a list of classes is well formed: each at its own index, names
/// distinct. Drivers assert it of a protocol's [`Message::CLASSES`].
pub fn classes_are_indexed(classes: &[MsgClass]) -> bool {
    classes.iter().enumerate().all(|(i, c)| c.index() == i && classes[..i].iter().all(|d| d.name != c.name))
}

/// Names one round of reads of one transaction: a request carries it and
/// its reply repeats it. `tx` is the transaction (or, for protocols whose
/// sessions read before a transaction has an id, a number the session
/// chose); `round` counts the transaction's read rounds from 0, so a second
/// round is never taken for the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ReadTag {
    pub tx: u64,
    pub round: u32,
}

pub trait Message: Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static {
    /// Every class this protocol's messages fall in, each at its index.
    const CLASSES: &'static [MsgClass];

    fn class(&self) -> MsgClass;

    /// A read that a replica must answer (a read slice), named by a tag
    /// that its reply repeats. Drivers use the pair to measure, from the
    /// outside, whether a replica answered a read at once or made it wait.
    fn read_request(&self) -> Option<ReadTag> {
        None
    }

    /// The tag of the read request this message answers.
    fn read_reply(&self) -> Option<ReadTag> {
        None
    }

    /// Periodic traffic that never stops on its own (heartbeats, stable-time
    /// gossip). Drivers wait for the other messages to drain before they
    /// call a cluster settled.
    fn is_background(&self) -> bool {
        self.class() == MsgClass::STABILIZATION
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_must_sit_at_their_index_with_distinct_names() {
        assert!(classes_are_indexed(&[MsgClass::CLIENT, MsgClass::TRANSACTION]));
        assert!(!classes_are_indexed(&[MsgClass::TRANSACTION]));
        assert!(!classes_are_indexed(&[MsgClass::CLIENT, MsgClass::new(1, "client")]));
    }
}
