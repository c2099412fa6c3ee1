//! A dump, a page at a time: each replica cuts its newest values after a
//! cursor to a byte budget, and the client connection merges the pages of
//! the node's replicas.

use bytes::Bytes;
use causeway_protocol::Key;

/// The entries of `sorted` after `after`, in order, up to `max_bytes` of keys
/// and values (at least one, so a dump always moves on); and whether more
/// entries follow.
pub fn page(sorted: Vec<(Key, Bytes)>, after: Option<Key>, max_bytes: usize) -> (Vec<(Key, Bytes)>, bool) {
    let mut out = Vec::new();
    let mut bytes = 0;
    let mut rest = sorted.into_iter().skip_while(|(k, _)| after.as_ref().is_some_and(|a| k <= a)).peekable();
    while let Some((k, v)) = rest.next_if(|(k, v)| out.is_empty() || bytes + k.len() + v.len() <= max_bytes) {
        bytes += k.len() + v.len();
        out.push((k, v));
    }
    (out, rest.peek().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(keys: &[&'static str]) -> Vec<(Key, Bytes)> {
        keys.iter().map(|k| (Key::from_static(k.as_bytes()), Bytes::from_static(b"vv"))).collect()
    }

    #[test]
    fn a_page_starts_after_the_cursor_and_stops_at_the_budget() {
        let all = entries(&["a", "b", "c", "d"]);
        assert_eq!(page(all.clone(), None, 100), (all.clone(), false));
        let (first, more) = page(all.clone(), None, 6);
        assert_eq!((first, more), (entries(&["a", "b"]), true));
        assert_eq!(page(all.clone(), Some(Key::from_static(b"b")), 6), (entries(&["c", "d"]), false));
        assert_eq!(page(all.clone(), None, 1), (entries(&["a"]), true), "at least one entry: the dump moves on");
        assert_eq!(page(all, Some(Key::from_static(b"d")), 6), (vec![], false));
    }
}
