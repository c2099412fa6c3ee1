//! Session tokens: a session's causal state, carried between connections.

use crate::Error;
use bytes::Bytes;
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A session's causal state — its snapshot and the time of its last
/// commit — exported by [`Client::export_session`](crate::Client::export_session)
/// and adopted by [`Client::resume_session`](crate::Client::resume_session) on
/// another connection to the same DC, so that the new connection reads what
/// the old one wrote and saw.
///
/// The content is opaque: only the server reads it. Its text form
/// ([`Display`](fmt::Display) and [`FromStr`]) is lowercase hex, safe in a
/// shell, a URL or a file. With serde it is a hex string in human-readable
/// formats and raw bytes in binary ones.
///
/// ```
/// use causeway_client::SessionToken;
///
/// let token = SessionToken::from_bytes(vec![0x01, 0xab]);
/// assert_eq!(token.to_string(), "01ab");
/// assert_eq!("01AB".parse::<SessionToken>().unwrap(), token);
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SessionToken(Bytes);

impl SessionToken {
    /// Wraps bytes a server exported (no check: the server checks on resume).
    pub fn from_bytes(bytes: impl Into<Bytes>) -> SessionToken {
        SessionToken(bytes.into())
    }

    /// The token's bytes, as the server exported them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The token's bytes, as the server exported them.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }
}

impl fmt::Display for SessionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0.iter() {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for SessionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionToken({self})")
    }
}

impl FromStr for SessionToken {
    type Err = Error;

    /// Parses the hex text form (either case; surrounding whitespace is ignored).
    fn from_str(s: &str) -> Result<Self, Error> {
        let s = s.trim().as_bytes();
        if s.len() & 1 == 1 {
            return Err(Error::BadToken("odd number of hex digits".into()));
        }
        let digit = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(Error::BadToken(format!("{:?} is not a hex digit", c as char))),
        };
        let bytes =
            s.chunks_exact(2).map(|p| Ok(digit(p[0])? << 4 | digit(p[1])?)).collect::<Result<Vec<u8>, Error>>()?;
        Ok(SessionToken(bytes.into()))
    }
}

impl Serialize for SessionToken {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.collect_str(self)
        } else {
            serializer.serialize_bytes(&self.0)
        }
    }
}

impl<'de> Deserialize<'de> for SessionToken {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if deserializer.is_human_readable() {
            let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
            s.parse().map_err(de::Error::custom)
        } else {
            Ok(SessionToken(Bytes::deserialize(deserializer)?))
        }
    }
}
