//! What a connection may do, as the server's login gave it.

use serde::{Deserialize, Serialize};

/// What a connection may do, each role all that the one before may:
/// `Read` runs transactions that only read; `Write` writes and deletes too;
/// `Admin` also calls the operator hooks (`Dump`, `DropPeerConnections`,
/// `Stats`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Role {
    Read,
    Write,
    Admin,
}

impl Role {
    /// Its name in config files and messages.
    pub fn name(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }

    /// The role named `name` (as [`Role::name`] spells it).
    pub fn parse(name: &str) -> Option<Role> {
        [Role::Read, Role::Write, Role::Admin].into_iter().find(|r| r.name() == name)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
