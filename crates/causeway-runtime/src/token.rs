//! Session tokens: a session's causal state, exported from one connection and
//! resumed on another connection to the same DC.

use bytes::Bytes;
use causeway_client::wire::WireError;
use causeway_protocol::{DcId, Protocol, Session};
use serde::{Deserialize, Serialize};

/// Bumped when the layout below changes.
const TOKEN_VERSION: u8 = 1;

#[derive(Serialize, Deserialize)]
struct Token {
    version: u8,
    protocol: String,
    dc: u16,
    state: Vec<u8>,
}

type StateOf<P> = <<P as Protocol>::Session as Session>::State;

pub fn encode<P: Protocol>(dc: DcId, state: &StateOf<P>) -> Result<Bytes, WireError> {
    let state = postcard::to_allocvec(state).map_err(|e| WireError::Unavailable(format!("encoding a token: {e}")))?;
    let token = Token { version: TOKEN_VERSION, protocol: P::NAME.into(), dc: dc.0, state };
    postcard::to_allocvec(&token).map(Bytes::from).map_err(|e| WireError::Unavailable(format!("encoding a token: {e}")))
}

pub fn decode<P: Protocol>(dc: DcId, bytes: &[u8]) -> Result<StateOf<P>, WireError> {
    let token: Token = postcard::from_bytes(bytes).map_err(|_| WireError::BadToken("not a session token".into()))?;
    if token.version != TOKEN_VERSION {
        return Err(WireError::BadToken(format!(
            "token version {} (this server reads {TOKEN_VERSION})",
            token.version
        )));
    }
    if token.protocol != P::NAME {
        return Err(WireError::BadToken(format!("token of a {} cluster, this one runs {}", token.protocol, P::NAME)));
    }
    if token.dc != dc.0 {
        return Err(WireError::BadToken(format!("token from DC {}, this connection is in DC {}", token.dc, dc.0)));
    }
    postcard::from_bytes(&token.state).map_err(|e| WireError::BadToken(format!("corrupt session state: {e}")))
}
