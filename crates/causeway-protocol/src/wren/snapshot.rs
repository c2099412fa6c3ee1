//! Wren's snapshots and its visibility rule (BDT: two timestamps per version).

use crate::hlc::Timestamp;
use crate::ids::DcId;
use crate::mvstore::Version;
use serde::{Deserialize, Serialize};

/// A transaction snapshot: `lt` bounds local items, `rt` remote ones.
/// Wren keeps `rt < lt` (Alg. 2, line 5) so the client cache can be pruned
/// with `lt` alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Snapshot {
    pub lt: Timestamp,
    pub rt: Timestamp,
}

impl Snapshot {
    /// Component-wise maximum.
    pub fn join(self, other: Snapshot) -> Snapshot {
        Snapshot { lt: self.lt.max(other.lt), rt: self.rt.max(other.rt) }
    }
}

impl crate::twopc::Snapshot for Snapshot {
    fn ceiling(&self) -> Timestamp {
        self.lt.max(self.rt)
    }

    fn floor(&self) -> Timestamp {
        self.lt.min(self.rt)
    }

    fn meet(&self, other: &Snapshot) -> Snapshot {
        Snapshot { lt: self.lt.min(other.lt), rt: self.rt.min(other.rt) }
    }
}

/// Alg. 3, lines 8–9: a version created in this DC is visible when
/// `ut ≤ lt ∧ rdt ≤ rt`; one replicated from another DC when
/// `ut ≤ rt ∧ rdt ≤ lt`. `rdt` is the version's metadata.
pub fn visible(local_dc: DcId, version: &Version<Timestamp>, snapshot: Snapshot) -> bool {
    let (ut, rdt) = (version.stamp.ts, version.meta);
    if version.stamp.dc == local_dc {
        ut <= snapshot.lt && rdt <= snapshot.rt
    } else {
        ut <= snapshot.rt && rdt <= snapshot.lt
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{CommitStamp, Value};
    use crate::ids::TxId;
    use crate::twopc::Snapshot as _;

    fn v(dc: u16, ut: u64, rdt: u64) -> Version<Timestamp> {
        Version {
            value: Some(Value::new()),
            stamp: CommitStamp { ts: Timestamp(ut), dc: DcId(dc), txid: TxId(1) },
            meta: Timestamp(rdt),
        }
    }

    fn snap(lt: u64, rt: u64) -> Snapshot {
        Snapshot { lt: Timestamp(lt), rt: Timestamp(rt) }
    }

    #[test]
    fn local_versions_need_ut_within_lt_and_rdt_within_rt() {
        let here = DcId(0);
        assert!(visible(here, &v(0, 10, 4), snap(10, 5)));
        assert!(!visible(here, &v(0, 11, 4), snap(10, 5)), "ut beyond lt");
        assert!(!visible(here, &v(0, 10, 6), snap(10, 5)), "remote dependency beyond rt");
    }

    #[test]
    fn remote_versions_need_ut_within_rt_and_rdt_within_lt() {
        let here = DcId(0);
        assert!(visible(here, &v(1, 5, 9), snap(10, 5)));
        assert!(!visible(here, &v(1, 6, 1), snap(10, 5)), "ut beyond rt even though below lt");
        assert!(!visible(here, &v(2, 5, 11), snap(10, 5)), "dependency beyond lt");
    }

    #[test]
    fn meet_and_join_are_component_wise() {
        assert_eq!(snap(10, 3).meet(&snap(7, 5)), snap(7, 3));
        assert_eq!(snap(10, 3).join(snap(7, 5)), snap(10, 5));
    }
}
