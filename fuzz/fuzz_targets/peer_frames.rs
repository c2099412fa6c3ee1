//! What a peer sends after the handshake: batch frames of protocol
//! messages (decoded whole, as the transport does, and read for their
//! newest timestamp, as the clock guard does) and acks. Nothing may panic.
#![no_main]

use causeway_protocol::ec::EcMsg;
use causeway_protocol::eiger::EigerMsg;
use causeway_protocol::promptcc::PtccMsg;
use causeway_protocol::wren::WrenMsg;
use causeway_runtime::envelope::Envelope;
use causeway_transport::frame::{batch_head, parse_ack};
use libfuzzer_sys::fuzz_target;

fn batch<M: causeway_protocol::Message>(body: &[u8]) {
    let Ok((_first, _reverse, mut rest)) = batch_head(body) else { return };
    while !rest.is_empty() {
        match postcard::take_from_bytes::<Envelope<M>>(rest) {
            Ok((e, tail)) => {
                let _ = causeway_protocol::contract::newest_timestamp(&e.msg);
                rest = tail;
            }
            Err(_) => return,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = parse_ack(data);
    batch::<WrenMsg>(data);
    batch::<EcMsg>(data);
    batch::<PtccMsg>(data);
    batch::<EigerMsg>(data);
});
