//! The cohort role's reads (Alg. 3, lines 1–8): a slice is served from the
//! snapshot at once, here or for a transaction of another DC — the UST is
//! installed at every replica by construction, so reads never wait.

use super::snapshot::visible;
use crate::contract::{Key, Value};
use crate::hlc::Timestamp;
use crate::ids::DcId;
use crate::mvstore::MvStore;
use serde::{Deserialize, Serialize};

/// What a cohort keeps of a prepared transaction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prepared {
    /// The DC of the coordinator: the stamp of the versions.
    pub origin: DcId,
    pub writes: Vec<(Key, Option<Value>)>,
}

/// The freshest version of each key visible at `ust` (Alg. 3, 4–7).
pub fn slice(store: &MvStore<()>, keys: Vec<Key>, ust: Timestamp) -> Vec<(Key, Option<Value>)> {
    keys.into_iter()
        .map(|key| {
            let value = store
                .chain(&key)
                .and_then(|chain| chain.newest_visible_upto(ust, |v| visible(v, ust)))
                .and_then(|v| v.value.clone());
            (key, value)
        })
        .collect()
}
