//! The queue between `send` and a link's writer.
//!
//! Messages are encoded once, by the caller of `send`, straight into one
//! shared buffer; the writer takes the whole buffer at once. That makes a
//! send one short critical section without an allocation, and gives the
//! writer everything queued since its last write in one piece to coalesce.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// Encoded messages numbered from `first`, back to back in `bytes`.
#[derive(Default)]
pub(crate) struct Chunk {
    pub first: u64,
    pub bytes: Vec<u8>,
    /// End offset of each message in `bytes`.
    pub ends: Vec<usize>,
}

impl Chunk {
    /// One past the sequence number of the last message.
    pub fn end(&self) -> u64 {
        self.first + self.ends.len() as u64
    }

    /// Offset in `bytes` where message `seq` starts.
    pub fn offset(&self, seq: u64) -> usize {
        match (seq - self.first) as usize {
            0 => 0,
            i => self.ends[i - 1],
        }
    }
}

#[derive(Default)]
pub(crate) struct Outbox {
    pending: Mutex<Chunk>,
    /// Signalled when the buffer goes from empty to non-empty.
    pub ready: Notify,
}

/// Why a message was not queued.
pub(crate) enum PushError {
    Encode(postcard::Error),
    TooLarge(usize),
}

impl Outbox {
    /// Appends one message, encoded by `encode` onto the buffer, and
    /// returns its length, added to `counted` (if given) before any taker
    /// can see the message — so that a count taken off when it is
    /// acknowledged never runs ahead. Refuses it, leaving the buffer as it
    /// was, if encoding fails or yields more than `max` bytes.
    pub fn push_with(
        &self,
        max: usize,
        counted: Option<&AtomicU64>,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<(), postcard::Error>,
    ) -> Result<usize, PushError> {
        let mut p = lock(&self.pending);
        let start = p.bytes.len();
        encode(&mut p.bytes).map_err(PushError::Encode)?;
        let len = p.bytes.len() - start;
        if len > max {
            p.bytes.truncate(start);
            return Err(PushError::TooLarge(len));
        }
        let was_empty = p.ends.is_empty();
        let end = p.bytes.len();
        p.ends.push(end);
        if let Some(c) = counted {
            c.fetch_add(len as u64, Ordering::Relaxed);
        }
        drop(p);
        if was_empty {
            self.ready.notify_one();
        }
        Ok(len)
    }

    /// Everything queued since the last take, if anything.
    pub fn take(&self) -> Option<Chunk> {
        let mut p = lock(&self.pending);
        if p.ends.is_empty() {
            return None;
        }
        let next = p.end();
        Some(std::mem::replace(&mut *p, Chunk { first: next, ..Chunk::default() }))
    }
}

/// What a writer holds: every message taken from the outbox and not yet acknowledged.
#[derive(Default)]
pub(crate) struct Retained {
    chunks: VecDeque<Chunk>,
    /// One past the last message taken.
    end: u64,
}

impl Retained {
    pub fn end(&self) -> u64 {
        self.end
    }

    pub fn push(&mut self, chunk: Chunk) {
        debug_assert_eq!(chunk.first, self.end);
        self.end = chunk.end();
        self.chunks.push_back(chunk);
    }

    /// Forgets whole chunks below `acked`; a partly acknowledged chunk
    /// stays. The bytes freed come off the backlog's count, `counted`:
    /// every way a message leaves the backlog goes through here.
    pub fn trim(&mut self, acked: u64, counted: &AtomicU64) {
        let mut freed = 0;
        while self.chunks.front().is_some_and(|c| c.end() <= acked) {
            freed += self.chunks.pop_front().map_or(0, |c| c.bytes.len());
        }
        uncount(counted, freed);
    }

    /// The chunks holding `from..`, the first one possibly partly before `from`.
    pub fn from(&self, from: u64) -> impl Iterator<Item = &Chunk> {
        let skip = self.chunks.partition_point(|c| c.end() <= from);
        self.chunks.range(skip..)
    }
}

/// Takes `n` off a count, never below zero.
fn uncount(c: &AtomicU64, n: usize) {
    let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| Some(v.saturating_sub(n as u64)));
}

/// A panic in a user callback must not wedge the transport: the data under
/// these locks is consistent between statements, so poisoning is ignored.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(o: &Outbox, v: u64) {
        assert!(o.push_with(100, None, |b| crate::frame::encode_into(b, &v)).is_ok());
    }

    #[test]
    fn take_numbers_consecutively_and_retained_trims() {
        let o = Outbox::default();
        assert!(o.take().is_none());
        push(&o, 1);
        push(&o, 1000);
        let a = o.take().unwrap();
        assert_eq!((a.first, a.end(), a.offset(1)), (0, 2, 1));
        push(&o, 5);
        assert!(matches!(
            o.push_with(2, None, |b| crate::frame::encode_into(b, &u64::MAX)),
            Err(PushError::TooLarge(10))
        ));
        let b = o.take().unwrap();
        assert_eq!((b.first, b.end(), b.bytes.as_slice()), (2, 3, &[5u8][..]));

        let (a_len, b_len) = (a.bytes.len() as u64, b.bytes.len() as u64);
        let counted = AtomicU64::new(a_len + b_len);
        let mut r = Retained::default();
        r.push(a);
        r.push(b);
        assert_eq!(r.from(1).next().unwrap().first, 0);
        assert_eq!(r.from(2).next().unwrap().first, 2);
        r.trim(1, &counted);
        assert_eq!(r.from(0).count(), 2, "partly acked chunk stays");
        assert_eq!(counted.load(Ordering::Relaxed), a_len + b_len, "nothing freed, nothing uncounted");
        r.trim(2, &counted);
        assert_eq!(r.from(0).count(), 1);
        assert_eq!(counted.load(Ordering::Relaxed), b_len, "the freed chunk's bytes come off the count");
        assert_eq!(r.end(), 3);
    }
}
