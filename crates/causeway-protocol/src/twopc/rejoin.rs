//! A replica that restarted holds back the transactions clients start on it
//! until its DC's stabilization has told it the stable times again.
//!
//! Why: the snapshot a coordinator hands out comes from the stable times it
//! knows, joined with what the client has seen. A restarted replica knows
//! none, so it would hand out the client's last snapshot — which may be
//! older than what the other replicas of the DC, meanwhile, collected
//! versions for (their GC bound moves up with every round in which no
//! running transaction holds an older snapshot). A transaction reading
//! such a snapshot finds the versions it should see gone (Wren seed 6827
//! of the crash tests: a session missed its own write). The first stable
//! times the DC agrees on after the restart are at least every bound used
//! before it (stabilization only takes minima of positions that do not go
//! back, see [`crate::recovery::stream::PeerStreams::unrecorded_positions`]),
//! so from then on the snapshots it hands out are safe again.
//!
//! Requests wait, in order, rather than fail: stabilization runs every Δ_G,
//! so the wait is short while the DC is whole. One start per client is
//! held (a client that gave up and asked again replaces its first), and at
//! most [`MAX_WAITING_STARTS`]; past that a start is refused. (While a node
//! of the DC is down the runtime answers a held begin itself, naming it.)

use crate::ids::Addr;

/// Starts waiting on a restarted replica, by at most this many clients (a
/// session has one start in flight, so this is the number of sessions).
pub const MAX_WAITING_STARTS: usize = 4096;

/// The starts held back while the replica rejoins its DC.
#[derive(Debug)]
pub struct StartGate<S> {
    /// `Some` while rejoining: the starts that wait, oldest first.
    waiting: Option<Vec<(Addr, S)>>,
}

impl<S> Default for StartGate<S> {
    /// Open: a replica that starts for the first time hands out snapshots
    /// at once (no replica of the DC has collected anything yet).
    fn default() -> Self {
        StartGate { waiting: None }
    }
}

/// What to do with a start.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit<S> {
    /// Start it now.
    Now(S),
    /// Held until the gate opens.
    Held,
    /// Too many are held already: refuse it.
    Full,
}

impl<S> StartGate<S> {
    /// Closes the gate: the replica restarted.
    pub fn close(&mut self) {
        self.waiting = Some(Vec::new());
    }

    pub fn is_open(&self) -> bool {
        self.waiting.is_none()
    }

    /// A client's start. A session has one start in flight: a newer one
    /// from the same client (it gave the first up and asked again)
    /// replaces the one held, so the gate holds one per session.
    pub fn admit(&mut self, client: Addr, start: S) -> Admit<S> {
        match &mut self.waiting {
            None => Admit::Now(start),
            Some(waiting) => {
                if let Some(held) = waiting.iter_mut().find(|(c, _)| *c == client) {
                    held.1 = start;
                    Admit::Held
                } else if waiting.len() < MAX_WAITING_STARTS {
                    waiting.push((client, start));
                    Admit::Held
                } else {
                    Admit::Full
                }
            }
        }
    }

    /// Opens the gate: the starts that waited, oldest first.
    pub fn open(&mut self) -> Vec<(Addr, S)> {
        self.waiting.take().unwrap_or_default()
    }

    /// Starts held right now.
    pub fn held(&self) -> usize {
        self.waiting.as_ref().map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ClientId, DcId};

    fn client(index: u32) -> Addr {
        Addr::Client(ClientId { dc: DcId(0), index })
    }

    #[test]
    fn an_open_gate_admits_at_once() {
        let mut gate = StartGate::default();
        assert_eq!(gate.admit(client(1), 7), Admit::Now(7));
        assert!(gate.open().is_empty());
    }

    #[test]
    fn a_closed_gate_holds_starts_in_order_until_opened_and_bounds_them() {
        let mut gate = StartGate::default();
        gate.close();
        for n in 0..MAX_WAITING_STARTS as u32 {
            assert_eq!(gate.admit(client(n), n), Admit::Held);
        }
        let one_more = MAX_WAITING_STARTS as u32;
        assert_eq!(gate.admit(client(one_more), one_more), Admit::Full);
        assert_eq!(gate.held(), MAX_WAITING_STARTS);
        let released = gate.open();
        assert_eq!(released.len(), MAX_WAITING_STARTS);
        assert_eq!(released[0], (client(0), 0));
        assert!(gate.is_open());
        assert_eq!(gate.admit(client(1), 1), Admit::Now(1));
    }

    #[test]
    fn a_client_that_asks_again_replaces_its_held_start() {
        let mut gate = StartGate::default();
        gate.close();
        assert_eq!(gate.admit(client(1), 1), Admit::Held);
        assert_eq!(gate.admit(client(2), 2), Admit::Held);
        assert_eq!(gate.admit(client(1), 3), Admit::Held);
        assert_eq!(gate.held(), 2);
        assert_eq!(gate.open(), vec![(client(1), 3), (client(2), 2)]);
    }
}
