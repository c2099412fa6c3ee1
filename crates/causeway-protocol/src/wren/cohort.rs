//! The cohort role's reads (Alg. 3, lines 1–12): a slice is served from the
//! snapshot at once — the snapshot is installed here by construction
//! (`lt ≤ LST`, `rt ≤ RST`), so reads never wait.

use super::snapshot::{self, Snapshot};
use super::Fault;
use crate::contract::{Key, Value};
use crate::hlc::Timestamp;
use crate::ids::DcId;
use crate::mvstore::{MvStore, Version};
use serde::{Deserialize, Serialize};

/// What a cohort keeps of a prepared transaction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prepared {
    /// The snapshot's remote time: the remote dependency time of the
    /// versions the transaction creates.
    pub rdt: Timestamp,
    pub writes: Vec<(Key, Option<Value>)>,
}

/// Reads of one replica's store, under the visibility rule (and the
/// deliberate bug a test may switch on; GC always uses the true rule).
pub struct Reader<'a> {
    pub store: &'a MvStore<Timestamp>,
    pub here: DcId,
    pub fault: Fault,
}

impl Reader<'_> {
    fn visible(&self, version: &Version<Timestamp>, snapshot: Snapshot) -> bool {
        match self.fault {
            Fault::RemoteVisibleAtLocalTime if version.stamp.dc != self.here => version.stamp.ts <= snapshot.lt,
            _ => snapshot::visible(self.here, version, snapshot),
        }
    }

    /// The freshest version of `key` visible in `snapshot` (Alg. 3, 6–11).
    pub fn read(&self, key: &[u8], snapshot: Snapshot) -> Option<Value> {
        let chain = self.store.chain(key)?;
        // Local versions need ut ≤ lt, remote ones ut ≤ rt: none above both.
        chain
            .newest_visible_upto(snapshot.lt.max(snapshot.rt), |v| self.visible(v, snapshot))
            .and_then(|v| v.value.clone())
    }

    /// A slice: every key with its value in `snapshot`.
    pub fn slice(&self, keys: Vec<Key>, snapshot: Snapshot) -> Vec<(Key, Option<Value>)> {
        keys.into_iter()
            .map(|key| {
                let value = self.read(&key, snapshot);
                (key, value)
            })
            .collect()
    }
}
