//! Where a replica's spilled records go ([`causeway_protocol::contract::spill`]):
//! its spill directory under the node's data directory
//! (`spill/dc0-p1/`, [`causeway_storage::Spill`]), or — for a node without
//! one — memory, as everything else of such a node is.
//!
//! The replica task carries a replica's spill operations out in order: a
//! `Put` once the records the replica appended before it are durable (it
//! asks the log for that and waits), written and synced, then the replica
//! is told; a `Get` is read and handed back to the replica. Both block the
//! task while they run; a spill happens only while a peer in another DC is
//! far behind, and a batch is half the bound on what the replica keeps in
//! memory ([peers] max_kept_mb), so the pause is one write or read of that
//! size.

use super::replica_name;
use causeway_protocol::contract::{Done, MemorySpill, Spill};
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

impl<R: Serialize + DeserializeOwned + Clone> ReplicaSpill<R> {
    /// Replica `id`'s spill under `data_dir`, or in memory without one.
    pub fn open(data_dir: Option<&Path>, id: ReplicaId) -> Result<Self, causeway_storage::StorageError> {
        match data_dir {
            Some(dir) => Ok(ReplicaSpill::Disk(causeway_storage::Spill::open(&spill_dir(dir, id))?)),
            None => Ok(ReplicaSpill::Memory(MemorySpill::default())),
        }
    }

    /// Carries out `op` (a `Put` only once the records before it are
    /// durable: the caller waits for that); says what the replica is to
    /// hear of it. An error means the spill cannot keep its promises.
    pub fn carry_out(&mut self, op: Spill<R>) -> Result<Option<Done<R>>, String> {
        match self {
            ReplicaSpill::Memory(memory) => Ok(memory.carry_out(op)),
            ReplicaSpill::Disk(disk) => match op {
                Spill::Put(batch) => {
                    let put = batch.last().map(|(k, _)| *k);
                    let encoded = batch
                        .iter()
                        .map(|(k, r)| postcard::to_allocvec(r).map(|b| (*k, b)))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| format!("cannot encode a spilled record: {e}"))?;
                    disk.put(&encoded).map_err(|e| e.to_string())?;
                    Ok(put.map(Done::Spilled))
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
                    Ok(Some(Done::Unspilled(after, entries)))
                }
                Spill::Forget { upto } => {
                    disk.forget(upto).map_err(|e| e.to_string())?;
                    Ok(None)
                }
            },
        }
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
        let put = Spill::Put(vec![(3, "three".to_string()), (9, "nine".to_string())]);
        assert_eq!(spill.carry_out(put).unwrap(), Some(Done::Spilled(9)));
        assert!(spill.bytes() > 0);
        assert!(spill_dir(dir.path(), id).ends_with("spill/dc1-p2"));
        let mut spill = ReplicaSpill::<String>::open(Some(dir.path()), id).unwrap();
        let read = spill.carry_out(Spill::Get { after: 3 }).unwrap();
        assert_eq!(read, Some(Done::Unspilled(3, vec![(9, "nine".to_string())])));
        assert_eq!(spill.carry_out(Spill::Forget { upto: 9 }).unwrap(), None);
        assert_eq!(spill.carry_out(Spill::Get { after: 0 }).unwrap(), Some(Done::Unspilled(0, vec![])));
        assert_eq!(spill.bytes(), 0);
    }
}
