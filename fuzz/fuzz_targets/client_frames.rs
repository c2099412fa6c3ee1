//! What a client sends a server: bytes cut into frames by the server's
//! codec, each decoded as a request (and, for the client's side, as an
//! answer). Nothing may panic, and no frame above the limit may come out.
#![no_main]

use bytes::BytesMut;
use causeway_runtime::clients::frame_codec::FrameCodec;
use causeway_wire::{RequestFrame, ResponseFrame};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;

const MAX: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let mut codec = FrameCodec::new(MAX, std::time::Duration::from_secs(1));
    // The bytes as they might arrive: in two reads, split where the input says.
    let cut = data.first().map_or(0, |b| *b as usize).min(data.len());
    let mut buf = BytesMut::new();
    for part in [&data[..cut], &data[cut..]] {
        buf.extend_from_slice(part);
        while let Ok(Some(frame)) = codec.decode(&mut buf) {
            assert!(frame.len() <= MAX);
            let _ = postcard::from_bytes::<RequestFrame>(&frame);
            let _ = postcard::from_bytes::<ResponseFrame>(&frame);
        }
    }
});
