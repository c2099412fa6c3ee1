//! The sizes a cluster accepts, and the one check of them that the client
//! library, the server and the protocols' sessions all use: a request over
//! a limit is refused the same way wherever it is caught first.

use super::session::SessionError;
use serde::{Deserialize, Serialize};

/// Sizes a cluster accepts; larger requests get [`SessionError::TooLarge`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub max_key_bytes: u32,
    pub max_value_bytes: u32,
    /// Keys in one read.
    pub max_keys_per_read: u32,
    /// Writes buffered in one transaction.
    pub max_writes_per_txn: u32,
    /// A session's own writes its snapshots do not include yet, kept in its
    /// cache (Wren, PaRiS): while the stable time does not move (a DC cut
    /// off, under PaRiS) the cache grows with every commit; past this, a
    /// commit is refused rather than the cache growing without bound.
    pub max_cached_writes: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_key_bytes: 1024,
            max_value_bytes: 64 << 10,
            max_keys_per_read: 128,
            max_writes_per_txn: 128,
            max_cached_writes: 100_000,
        }
    }
}

fn within(what: &str, size: usize, limit: u32) -> Result<(), SessionError> {
    if size as u64 > u64::from(limit) {
        return Err(SessionError::TooLarge { what: what.into(), size: size as u64, limit: limit.into() });
    }
    Ok(())
}

impl Limits {
    /// A commit after which the session would cache `cached` of its own
    /// writes its snapshot does not include yet.
    pub fn check_cached(&self, cached: usize) -> Result<(), SessionError> {
        within(
            "own writes not yet in the stable snapshot, kept in the session's cache (the stable time is not \
             advancing: a DC cut off?); try again once it does",
            cached,
            self.max_cached_writes,
        )
    }

    /// The most bytes of keys and values one read answer or one
    /// transaction's write set can hold under these limits. Servers keep it
    /// well under the frame size, so every message fits in one frame.
    pub fn max_batch_bytes(&self) -> u64 {
        let pair = u64::from(self.max_key_bytes) + u64::from(self.max_value_bytes);
        pair * u64::from(self.max_keys_per_read.max(self.max_writes_per_txn))
    }

    /// A key: not empty, and not over the key size.
    pub fn check_key(&self, key: &[u8]) -> Result<(), SessionError> {
        if key.is_empty() {
            return Err(SessionError::InvalidArgument("empty key".into()));
        }
        within("key (bytes)", key.len(), self.max_key_bytes)
    }

    /// The keys of one read: at least one, not too many, each a valid key.
    pub fn check_read<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<(), SessionError> {
        if keys.is_empty() {
            return Err(SessionError::InvalidArgument("a read needs at least one key".into()));
        }
        within("keys in one read", keys.len(), self.max_keys_per_read)?;
        keys.iter().try_for_each(|k| self.check_key(k.as_ref()))
    }

    /// A write (or, with `None`, a delete) of `key` in a transaction that
    /// holds writes of `keys` distinct keys already, `key` among them if
    /// `rewrite`: a key written again replaces its write and counts once.
    pub fn check_write(&self, key: &[u8], value: Option<&[u8]>, keys: u64, rewrite: bool) -> Result<(), SessionError> {
        self.check_pair(key, value.unwrap_or_default())?;
        self.check_writes(keys + u64::from(!rewrite))
    }

    /// A key and the value written under it, whatever else the transaction
    /// holds.
    pub fn check_pair(&self, key: &[u8], value: &[u8]) -> Result<(), SessionError> {
        self.check_key(key)?;
        within("value (bytes)", value.len(), self.max_value_bytes)
    }

    /// A transaction with `writes` writes in all.
    pub fn check_writes(&self, writes: u64) -> Result<(), SessionError> {
        if writes > u64::from(self.max_writes_per_txn) {
            return Err(SessionError::TooLarge {
                what: "writes in one transaction".into(),
                size: writes,
                limit: self.max_writes_per_txn.into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_is_checked_and_named() {
        let l = Limits {
            max_key_bytes: 3,
            max_value_bytes: 4,
            max_keys_per_read: 2,
            max_writes_per_txn: 2,
            max_cached_writes: 5,
        };
        assert!(l.check_key(b"abc").is_ok());
        assert!(matches!(l.check_key(b""), Err(SessionError::InvalidArgument(_))));
        assert!(matches!(l.check_key(b"abcd"), Err(SessionError::TooLarge { size: 4, limit: 3, .. })));
        assert!(l.check_read(&["a", "b"]).is_ok());
        assert!(matches!(l.check_read::<&str>(&[]), Err(SessionError::InvalidArgument(_))));
        assert!(matches!(l.check_read(&["a", "b", "c"]), Err(SessionError::TooLarge { size: 3, .. })));
        assert!(l.check_write(b"k", Some(b"1234"), 1, false).is_ok());
        assert!(l.check_write(b"k", None, 2, true).is_ok(), "a rewrite counts once");
        assert!(matches!(l.check_write(b"k", Some(b"12345"), 0, false), Err(SessionError::TooLarge { size: 5, .. })));
        let e = l.check_write(b"k", Some(b"v"), 2, false).unwrap_err();
        assert_eq!(e.to_string(), "writes in one transaction: 3, over the limit of 2");
    }
}
