//! Where a replica's spilled records go ([`causeway_protocol::contract::spill`]):
//! its spill directory under the node's data directory
//! (`spill/dc0-p1/`, [`causeway_storage::Spill`]), or — for a node without
//! one — memory, as everything else of such a node is.
//!
//! The replica task carries a step's spill operations out right after the
//! step, before any checkpoint is taken: a `Put` is written and synced (a
//! checkpoint then leaves out what it holds), a `Get` is read and handed
//! back to the replica at once. Both block the task while they run; a spill
//! happens only while a peer in another DC is far behind, and a batch is
//! half the bound on what the replica keeps in memory ([peers]
//! max_kept_mb), so the pause is one write or read of that size.

use super::replica_name;
use causeway_protocol::contract::{MemorySpill, Spill};
use causeway_protocol::ReplicaId;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The directory of replica `id`'s spill under a node's data directory.
pub fn spill_dir(data_dir: &Path, id: ReplicaId) -> PathBuf {
    data_dir.join("spill").join(replica_name(id))
}

/// A replica's spill: on disk, or in memory for a node without a data
/// directory.
pub enum ReplicaSpill<R> {
    Disk(causeway_storage::Spill),
    Memory(MemorySpill<R>),
}

/// The answer to a `Spill::Get { after }`: `after` and the entries.
pub type Unspilled<R> = (u64, Vec<(u64, R)>);

impl<R: Serialize + DeserializeOwned + Clone> ReplicaSpill<R> {
    /// Replica `id`'s spill under `data_dir`, or in memory without one.
    pub fn open(data_dir: Option<&Path>, id: ReplicaId) -> Result<Self, causeway_storage::StorageError> {
        match data_dir {
            Some(dir) => Ok(ReplicaSpill::Disk(causeway_storage::Spill::open(&spill_dir(dir, id))?)),
            None => Ok(ReplicaSpill::Memory(MemorySpill::default())),
        }
    }

    /// Carries out `ops` in order (draining them); returns the answers to
    /// their `Get`s. An error means the spill cannot keep its promises.
    pub fn apply(&mut self, ops: &mut Vec<Spill<R>>) -> Result<Vec<Unspilled<R>>, String> {
        let mut answers = Vec::new();
        for op in ops.drain(..) {
            match self {
                ReplicaSpill::Memory(memory) => {
                    if let Some(after) = memory.apply(op, |_| 0) {
                        answers.push((after, memory.get(after)));
                    }
                }
                ReplicaSpill::Disk(disk) => match op {
                    Spill::Put(batch) => {
                        let encoded = batch
                            .iter()
                            .map(|(k, r)| postcard::to_allocvec(r).map(|b| (*k, b)))
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|e| format!("cannot encode a spilled record: {e}"))?;
                        disk.put(&encoded).map_err(|e| e.to_string())?;
                    }
                    Spill::Get { after } => {
                        let entries = disk
                            .get(after)
                            .map_err(|e| e.to_string())?
                            .into_iter()
                            .map(|(k, bytes)| {
                                postcard::from_bytes(&bytes)
                                    .map(|r| (k, r))
                                    .map_err(|e| format!("spilled record {k} cannot be read: {e}"))
                            })
                            .collect::<Result<Vec<_>, _>>()?;
                        answers.push((after, entries));
                    }
                    Spill::Forget { upto } => disk.forget(upto).map_err(|e| e.to_string())?,
                },
            }
        }
        Ok(answers)
    }

    /// Bytes held on disk (none in memory: a node without a data directory
    /// keeps no account of them).
    pub fn bytes(&self) -> u64 {
        match self {
            ReplicaSpill::Disk(disk) => disk.bytes(),
            ReplicaSpill::Memory(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_spilled_to_disk_come_back_as_they_were_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let id = ReplicaId::new(1, 2);
        let mut spill = ReplicaSpill::<String>::open(Some(dir.path()), id).unwrap();
        let mut ops = vec![Spill::Put(vec![(3, "three".to_string()), (9, "nine".to_string())])];
        assert!(spill.apply(&mut ops).unwrap().is_empty() && ops.is_empty());
        assert!(spill.bytes() > 0);
        assert!(spill_dir(dir.path(), id).ends_with("spill/dc1-p2"));
        let mut spill = ReplicaSpill::<String>::open(Some(dir.path()), id).unwrap();
        let answers =
            spill.apply(&mut vec![Spill::Get { after: 3 }, Spill::Forget { upto: 9 }, Spill::Get { after: 0 }]);
        assert_eq!(answers.unwrap(), vec![(3, vec![(9, "nine".to_string())]), (0, vec![])]);
        assert_eq!(spill.bytes(), 0);
    }
}
