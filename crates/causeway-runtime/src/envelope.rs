//! A protocol message with its addresses: what travels between tasks and
//! between server processes.

use causeway_protocol::{Addr, Message};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "M: Message")]
pub struct Envelope<M> {
    pub from: Addr,
    pub to: Addr,
    pub msg: M,
}
