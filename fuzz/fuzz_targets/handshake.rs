//! The first frame a stranger sends a peer port (and the reply a dialer
//! reads): the handshake's head and body. Nothing may panic.
#![no_main]

use causeway_transport::handshake::{compare_terms, decode, Hello, Reply};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(hello) = decode::<Hello>(data) {
        let ours = vec![("protocol".to_string(), "wren".to_string())];
        let _ = compare_terms(&ours, &hello.terms);
    }
    let _ = decode::<Reply>(data);
});
