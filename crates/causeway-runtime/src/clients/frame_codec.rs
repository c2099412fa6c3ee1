//! Client frames: a 4-byte big-endian length, then the body — the framing
//! of tokio-util's `LengthDelimitedCodec`, without its habit of reserving
//! room for the whole announced frame as soon as the length arrives. Here
//! a client that announces 16 MiB and sends nothing more costs nothing; the
//! buffer grows as bytes actually come.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::io;
use tokio_util::codec::{Decoder, Encoder};

const LEN: usize = 4;

/// Room reserved ahead of a partial frame's bytes: enough for the socket
/// reads of a large frame to be few, not the frame's announced size.
const READ_AHEAD: usize = 64 << 10;

/// The framing, and its limits: the largest frame, and how long one may
/// take to cross either way (`[connections] frame_timeout_s`).
#[derive(Clone, Debug)]
pub struct FrameCodec {
    max: usize,
    timeout: std::time::Duration,
}

impl FrameCodec {
    pub fn new(max: usize, timeout: std::time::Duration) -> Self {
        FrameCodec { max, timeout }
    }

    /// How long a frame may take to be read whole, or written.
    pub fn timeout(&self) -> std::time::Duration {
        self.timeout
    }

    pub fn max_frame_length(&self) -> usize {
        self.max
    }

    pub fn set_max_frame_length(&mut self, max: usize) {
        self.max = max;
    }
}

impl Decoder for FrameCodec {
    type Item = BytesMut;
    type Error = io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> io::Result<Option<BytesMut>> {
        if src.len() < LEN {
            return Ok(None);
        }
        let n = u32::from_be_bytes(src[..LEN].try_into().expect("4 bytes")) as usize;
        if n > self.max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a frame of {n} bytes, over the limit of {}", self.max),
            ));
        }
        if src.len() < LEN + n {
            src.reserve((LEN + n - src.len()).min(READ_AHEAD));
            return Ok(None);
        }
        src.advance(LEN);
        Ok(Some(src.split_to(n)))
    }
}

impl Encoder<Bytes> for FrameCodec {
    type Error = io::Error;

    fn encode(&mut self, body: Bytes, dst: &mut BytesMut) -> io::Result<()> {
        if body.len() > self.max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a frame of {} bytes, over the limit of {}", body.len(), self.max),
            ));
        }
        dst.reserve(LEN + body.len());
        dst.put_u32(body.len() as u32);
        dst.extend_from_slice(&body);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_a_long_announcement_reserves_little() {
        let mut codec = FrameCodec::new(16 << 20, std::time::Duration::from_secs(1));
        let mut buf = BytesMut::new();
        codec.encode(Bytes::from_static(b"hello"), &mut buf).unwrap();
        codec.encode(Bytes::from_static(b""), &mut buf).unwrap();
        assert_eq!(&codec.decode(&mut buf).unwrap().unwrap()[..], b"hello");
        assert_eq!(&codec.decode(&mut buf).unwrap().unwrap()[..], b"");
        assert!(codec.decode(&mut buf).unwrap().is_none());

        // 16 MiB announced, 3 bytes sent: the buffer stays small.
        let mut buf = BytesMut::new();
        buf.put_u32(16 << 20);
        buf.extend_from_slice(b"abc");
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(buf.capacity() < 2 * READ_AHEAD, "reserved {} bytes", buf.capacity());

        let mut buf = BytesMut::new();
        buf.put_u32((16 << 20) + 1);
        assert_eq!(codec.decode(&mut buf).unwrap_err().kind(), io::ErrorKind::InvalidData);
        assert!(codec.encode(Bytes::from(vec![0; 17]), &mut BytesMut::new()).is_ok());
        codec.set_max_frame_length(16);
        assert!(codec.encode(Bytes::from(vec![0; 17]), &mut BytesMut::new()).is_err());
    }
}
