//! Session tokens: a session's causal state, exported from one connection and
//! resumed on another connection to the same DC.
//!
//! A token is authenticated with an HMAC-SHA256 under the cluster's token
//! key: the state inside (snapshot times, the last commit time, cached
//! writes) is trusted by coordinators, so a client must not be able to forge
//! it — a snapshot time from the future would move a DC's stable time past
//! what is installed. Nodes that share a key (`token_key` in the config)
//! accept each other's tokens; without one, each node draws its own key and
//! accepts only its own.

use bytes::Bytes;
use causeway_protocol::{DcId, Protocol, Session};
use causeway_wire::WireError;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// Bumped when the layout below changes.
const TOKEN_VERSION: u8 = 2;

#[derive(Serialize, Deserialize)]
struct Body {
    version: u8,
    protocol: String,
    dc: u16,
    state: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct Token {
    body: Vec<u8>,
    mac: Vec<u8>,
}

type StateOf<P> = <<P as Protocol>::Session as Session>::State;

fn mac(key: &[u8], body: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(body);
    mac
}

fn internal(e: postcard::Error) -> WireError {
    WireError::Unavailable(format!("encoding a token: {e}"))
}

pub fn encode<P: Protocol>(key: &[u8], dc: DcId, state: &StateOf<P>) -> Result<Bytes, WireError> {
    let state = postcard::to_allocvec(state).map_err(internal)?;
    let body = postcard::to_allocvec(&Body { version: TOKEN_VERSION, protocol: P::NAME.into(), dc: dc.0, state })
        .map_err(internal)?;
    let mac = mac(key, &body).finalize().into_bytes().to_vec();
    postcard::to_allocvec(&Token { body, mac }).map(Bytes::from).map_err(internal)
}

pub fn decode<P: Protocol>(key: &[u8], dc: DcId, bytes: &[u8]) -> Result<StateOf<P>, WireError> {
    let token: Token = postcard::from_bytes(bytes).map_err(|_| WireError::BadToken("not a session token".into()))?;
    mac(key, &token.body).verify_slice(&token.mac).map_err(|_| {
        WireError::BadToken(
            "issued by a node that does not share this node's token_key (or altered since); \
             set the same token_key on every node to resume tokens across them"
                .into(),
        )
    })?;
    let body: Body = postcard::from_bytes(&token.body).map_err(|_| WireError::BadToken("corrupt token".into()))?;
    if body.version != TOKEN_VERSION {
        return Err(WireError::BadToken(format!("token version {} (this server reads {TOKEN_VERSION})", body.version)));
    }
    if body.protocol != P::NAME {
        return Err(WireError::BadToken(format!("token of a {} cluster, this one runs {}", body.protocol, P::NAME)));
    }
    if body.dc != dc.0 {
        return Err(WireError::BadToken(format!("token from DC {}, this connection is in DC {}", body.dc, dc.0)));
    }
    postcard::from_bytes(&body.state).map_err(|e| WireError::BadToken(format!("corrupt session state: {e}")))
}

/// A key for a node without a configured one.
pub fn random_key() -> Vec<u8> {
    use rand::TryRngCore;
    let mut key = vec![0u8; 32];
    if rand::rngs::OsRng.try_fill_bytes(&mut key).is_err() {
        // No OS randomness: fall back to the clock and the process id,
        // which at least differ between processes.
        let seed = crate::clock::now_micros() ^ (u64::from(std::process::id()) << 40);
        key[..8].copy_from_slice(&seed.to_le_bytes());
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_protocol::wren::{Wren, WrenSessionState};
    use causeway_protocol::Timestamp;

    fn state(t: u64) -> WrenSessionState {
        WrenSessionState { lst: Timestamp(t), rst: Timestamp(t), hwt: Timestamp(t), cache: Vec::new() }
    }

    #[test]
    fn a_token_round_trips_under_its_key_only() {
        let token = encode::<Wren>(b"key one", DcId(1), &state(7)).unwrap();
        assert_eq!(decode::<Wren>(b"key one", DcId(1), &token).unwrap(), state(7));
        assert!(matches!(decode::<Wren>(b"key two", DcId(1), &token), Err(WireError::BadToken(_))));
        assert!(matches!(decode::<Wren>(b"key one", DcId(0), &token), Err(WireError::BadToken(_))));
    }

    #[test]
    fn a_forged_state_is_refused() {
        let token = encode::<Wren>(b"k", DcId(0), &state(7)).unwrap();
        let mut t: Token = postcard::from_bytes(&token).unwrap();
        let mut body: Body = postcard::from_bytes(&t.body).unwrap();
        body.state = postcard::to_allocvec(&state(u64::MAX)).unwrap();
        t.body = postcard::to_allocvec(&body).unwrap();
        let forged = postcard::to_allocvec(&t).unwrap();
        assert!(matches!(decode::<Wren>(b"k", DcId(0), &forged), Err(WireError::BadToken(_))));
    }
}
