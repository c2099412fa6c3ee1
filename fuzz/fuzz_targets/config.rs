//! A cluster config file, and a users file: any text is parsed and
//! validated into a plan (or users) or an error that names the mistake,
//! never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = causeway_runtime::config::parse(text, std::path::Path::new("fuzz/cluster.toml"));
        let _ = causeway_runtime::auth::Users::parse(text);
    }
});
