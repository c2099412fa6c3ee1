//! Frames after the handshake: batches (dialer → acceptor) and acks (back).
//!
//! A frame is a 4-byte big-endian length and a body. A batch body is the
//! varint sequence number of its first message, a varint reverse ack, then
//! postcard-encoded messages back to back (no per-message length: postcard
//! knows where each ends). An ack body is one varint. Public so tools and
//! tests can speak the protocol by hand.
//!
//! The reverse ack rides on batches for the other direction: the dialer
//! has delivered every message below it of the acceptor's own link to the
//! dialer (a connection the acceptor dialed), or 0 for nothing new. Both
//! nodes send most of the time, so most acks travel this way, in writes
//! that go anyway, and an ack frame of its own is left for a link whose
//! other direction is quiet.

use postcard::ser_flavors::Flavor;
use serde::Serialize;
use tokio_util::codec::LengthDelimitedCodec;

/// Bytes of the length prefix.
pub const LEN_BYTES: usize = 4;

/// The most bytes a varint u64 takes: each of the batch header's two
/// numbers at worst.
pub const MAX_VARINT_BYTES: usize = 10;

/// The codec both directions read with; frames above `max_frame_bytes` are an error.
pub(crate) fn codec(max_frame_bytes: usize) -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder().length_field_length(LEN_BYTES).max_frame_length(max_frame_bytes).new_codec()
}

/// Appends one batch frame: `msgs` are encoded messages back to back, the
/// first numbered `first`; `reverse` acknowledges the other direction (0:
/// nothing).
pub fn put_batch(out: &mut Vec<u8>, first: u64, reverse: u64, msgs: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&[0; LEN_BYTES]);
    encode_into(out, &first).expect("u64 encodes");
    encode_into(out, &reverse).expect("u64 encodes");
    out.extend_from_slice(msgs);
    patch_len(out, start);
}

/// Appends one ack frame.
pub fn put_ack(out: &mut Vec<u8>, next: u64) {
    let start = out.len();
    out.extend_from_slice(&[0; LEN_BYTES]);
    encode_into(out, &next).expect("u64 encodes");
    patch_len(out, start);
}

fn patch_len(out: &mut [u8], start: usize) {
    let len = (out.len() - start - LEN_BYTES) as u32;
    out[start..start + LEN_BYTES].copy_from_slice(&len.to_be_bytes());
}

/// Splits a batch body into its first sequence number, its reverse ack
/// and the encoded messages.
pub fn batch_head(body: &[u8]) -> Result<(u64, u64, &[u8]), postcard::Error> {
    let (first, rest) = postcard::take_from_bytes(body)?;
    let (reverse, rest) = postcard::take_from_bytes(rest)?;
    Ok((first, reverse, rest))
}

/// The ack in an ack body, if it is exactly one varint.
pub fn parse_ack(body: &[u8]) -> Option<u64> {
    match postcard::take_from_bytes::<u64>(body) {
        Ok((next, [])) => Some(next),
        _ => None,
    }
}

/// Encodes `value` onto the end of `out`; on error `out` is left as it was.
pub fn encode_into<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), postcard::Error> {
    let start = out.len();
    postcard::serialize_with_flavor(value, Append(out)).inspect_err(|_| out.truncate(start))
}

/// A postcard flavor that appends to a borrowed Vec, so one buffer holds many messages.
struct Append<'a>(&'a mut Vec<u8>);

impl Flavor for Append<'_> {
    type Output = ();

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_and_ack_round_trip() {
        let mut msgs = Vec::new();
        for m in [1u64, 300, u64::MAX] {
            encode_into(&mut msgs, &m).unwrap();
        }
        let mut out = Vec::new();
        put_batch(&mut out, 1 << 40, 77, &msgs);
        put_ack(&mut out, 12345);
        let len = u32::from_be_bytes(out[..4].try_into().unwrap()) as usize;
        let (first, reverse, mut rest) = batch_head(&out[4..4 + len]).unwrap();
        assert_eq!((first, reverse), (1 << 40, 77));
        let mut got = Vec::new();
        while !rest.is_empty() {
            let (m, r) = postcard::take_from_bytes::<u64>(rest).unwrap();
            got.push(m);
            rest = r;
        }
        assert_eq!(got, [1, 300, u64::MAX]);
        let ack = &out[4 + len..];
        assert_eq!(u32::from_be_bytes(ack[..4].try_into().unwrap()) as usize, ack.len() - 4);
        assert_eq!(parse_ack(&ack[4..]), Some(12345));
        assert_eq!(parse_ack(&[0x80]), None, "truncated varint");
        assert_eq!(parse_ack(&[1, 2]), None, "trailing bytes");
    }
}
