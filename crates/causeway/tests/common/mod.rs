//! What the tests that start `causeway server` processes share.

use std::net::TcpListener;
use std::process::Child;

/// Kills the servers however the test ends.
pub struct Servers(pub Vec<Child>);

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Distinct free ports. They are held all at once so they differ; a race
/// with other processes is possible but unlikely, and shows as a server
/// failing to bind.
pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<_> = (0..n).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    held.iter().map(|l| l.local_addr().unwrap().port()).collect()
}
