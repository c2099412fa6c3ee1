//! Where a replica task's messages go before the router: its own, back
//! into the task; background ones, held a moment for company.
//!
//! Two costs of a transaction this removes (issue 17):
//!
//! * **A coordinator's slice of its own partition never leaves the task.**
//!   A message a replica sends itself (a read slice or a prepare when the
//!   coordinator is also a cohort) is queued here and handed back to the
//!   replica before the task waits again, not through its inbox channel.
//! * **Background traffic rides with other messages.** Stable-time gossip,
//!   heartbeats and the like ([`Message::is_background`]) to another node
//!   wait up to [`HOLD`] for a message to that node, and leave with it: in
//!   the same transport write, waking the peer once. Under load one comes
//!   within the hold; when idle they leave at its end, [`HOLD`] late. Every
//!   protocol copes with a message [`HOLD`] late (the network may delay
//!   any message), and order on each link is kept: whatever is held for a
//!   node leaves before the next message to it.

use crate::router::Router;
use causeway_protocol::{Addr, Message, ReplicaId};
use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::Instant;

/// The longest a background message waits for company. Short against the
/// intervals of background traffic (Δ_G and Δ_R are 5 ms by default; a
/// BiST round is two hops) and long against the gaps between messages
/// under load (a fraction of a millisecond).
pub const HOLD: Duration = Duration::from_millis(1);

/// What [`Outgoing`] needs of the router (a trait so tests can watch).
pub trait Route<M> {
    /// Hands `msg` to the node that hosts `to`.
    fn send(&self, from: Addr, to: Addr, msg: M);
    /// Counts a message that is not handed to [`Route::send`].
    fn count_sent(&self, msg: &M);
    /// The node that hosts `addr`: messages to one node share a link.
    fn host_of(&self, addr: Addr) -> Option<usize>;
    /// The node this replica runs on.
    fn this_node(&self) -> usize;
}

impl<M: Message> Route<M> for Router<M> {
    fn send(&self, from: Addr, to: Addr, msg: M) {
        Router::send(self, from, to, msg)
    }

    fn count_sent(&self, msg: &M) {
        Router::count_sent(self, msg)
    }

    fn host_of(&self, addr: Addr) -> Option<usize> {
        Router::host_of(self, addr)
    }

    fn this_node(&self) -> usize {
        self.node()
    }
}

pub struct Outgoing<M> {
    me: ReplicaId,
    /// Messages to this replica itself, in the order sent.
    own: VecDeque<M>,
    /// Background messages for other nodes, in the order sent.
    held: Vec<(Addr, M)>,
    /// When the oldest of `held` must leave.
    due: Option<Instant>,
}

impl<M: Message> Outgoing<M> {
    pub fn new(me: ReplicaId) -> Self {
        Outgoing { me, own: VecDeque::new(), held: Vec::new(), due: None }
    }

    /// Sends `msg` to `to`: back to this replica, held, or through the
    /// router (after what is held for the same node).
    pub fn send(&mut self, router: &impl Route<M>, to: Addr, msg: M, now: impl FnOnce() -> Instant) {
        let from = Addr::Replica(self.me);
        if to == from {
            router.count_sent(&msg);
            self.own.push_back(msg);
        } else if msg.is_background() && router.host_of(to).is_some_and(|host| host != router.this_node()) {
            self.due.get_or_insert_with(|| now() + HOLD);
            self.held.push((to, msg));
        } else {
            if !self.held.is_empty() {
                let host = router.host_of(to);
                self.release(router, |held| host.is_some() && router.host_of(held) == host);
            }
            router.send(from, to, msg);
        }
    }

    pub fn me(&self) -> ReplicaId {
        self.me
    }

    /// The next message this replica sent itself.
    pub fn next_own(&mut self) -> Option<M> {
        self.own.pop_front()
    }

    pub fn has_own(&self) -> bool {
        !self.own.is_empty()
    }

    /// When the held messages must leave, if any are held.
    pub fn due(&self) -> Option<Instant> {
        self.due
    }

    /// Sends every held message if their time has come (`now` is asked
    /// only if some are held).
    pub fn release_due(&mut self, router: &impl Route<M>, now: impl FnOnce() -> Instant) {
        if self.due.is_some_and(|due| due <= now()) {
            self.release(router, |_| true);
        }
    }

    /// Sends the held messages whose destination `pick` admits, in order.
    fn release(&mut self, router: &impl Route<M>, pick: impl Fn(Addr) -> bool) {
        let from = Addr::Replica(self.me);
        for (to, msg) in self.held.extract_if(.., |(to, _)| pick(*to)) {
            router.send(from, to, msg);
        }
        if self.held.is_empty() {
            self.due = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_protocol::hlc::Timestamp;
    use causeway_protocol::twopc::TxnMsg;
    use causeway_protocol::wren::WrenMsg;
    use causeway_protocol::TxId;
    use std::cell::RefCell;

    /// Replicas of DC 0: partition 0 (this one) is on this node, 1 and 2
    /// share another, 3 has one of its own.
    fn node_of(a: Addr) -> usize {
        match a {
            Addr::Replica(r) if r.partition.0 == 0 => 0,
            Addr::Replica(r) if r.partition.0 <= 2 => 1,
            _ => 2,
        }
    }

    #[derive(Default)]
    struct Watch {
        /// (partition, background) of each message handed on, in order.
        sent: RefCell<Vec<(u32, bool)>>,
        counted: RefCell<usize>,
    }

    impl Route<WrenMsg> for Watch {
        fn send(&self, _from: Addr, to: Addr, msg: WrenMsg) {
            let Addr::Replica(r) = to else { unreachable!() };
            self.sent.borrow_mut().push((r.partition.0, msg.is_background()));
        }
        fn count_sent(&self, _: &WrenMsg) {
            *self.counted.borrow_mut() += 1;
        }
        fn host_of(&self, addr: Addr) -> Option<usize> {
            Some(node_of(addr))
        }
        fn this_node(&self) -> usize {
            0
        }
    }

    fn to(p: u32) -> Addr {
        Addr::Replica(ReplicaId::new(0, p))
    }

    fn background() -> WrenMsg {
        TxnMsg::Heartbeat { t: Timestamp(7) }
    }

    fn eager() -> WrenMsg {
        TxnMsg::Abort { tx: TxId(1) }
    }

    fn taken(w: &Watch) -> Vec<(u32, bool)> {
        w.sent.borrow_mut().drain(..).collect()
    }

    /// Background messages wait; the first message to a replica of their
    /// node takes them along, ahead of it and in order, and leaves the
    /// ones for other nodes waiting.
    #[test]
    fn background_messages_leave_with_the_next_message_to_their_node_and_before_it() {
        let (w, t0) = (Watch::default(), Instant::now());
        let mut o = Outgoing::new(ReplicaId::new(0, 0));
        o.send(&w, to(1), background(), || t0);
        o.send(&w, to(3), background(), || t0);
        o.send(&w, to(2), background(), || t0);
        assert_eq!(taken(&w), []);
        assert_eq!(o.due(), Some(t0 + HOLD));
        // Partition 2 shares partition 1's node: both held for it go first.
        o.send(&w, to(2), eager(), || t0);
        assert_eq!(taken(&w), [(1, true), (2, true), (2, false)]);
        assert_eq!(o.due(), Some(t0 + HOLD), "partition 3's still waits");
        o.release_due(&w, || t0 + HOLD / 2);
        assert_eq!(taken(&w), []);
        o.release_due(&w, || t0 + HOLD);
        assert_eq!(taken(&w), [(3, true)]);
        assert_eq!(o.due(), None);
        // Nothing held: an eager message goes at once, and so does
        // background traffic to a replica of this node (no link to share).
        o.send(&w, to(3), eager(), || t0);
        assert_eq!(taken(&w), [(3, false)]);
    }

    /// What a replica sends itself comes back in order, counted, without
    /// reaching the router.
    #[test]
    fn messages_to_itself_stay_in_the_task() {
        let w = Watch::default();
        let mut o = Outgoing::new(ReplicaId::new(0, 0));
        o.send(&w, to(0), eager(), Instant::now);
        o.send(&w, to(0), background(), Instant::now);
        assert_eq!(taken(&w), []);
        assert_eq!(*w.counted.borrow(), 2);
        assert!(matches!(o.next_own(), Some(TxnMsg::Abort { .. })));
        assert!(matches!(o.next_own(), Some(TxnMsg::Heartbeat { .. })));
        assert!(o.next_own().is_none());
        assert_eq!(o.due(), None);
    }
}
