//! How far ahead a message reaches: the newest [`Timestamp`] anywhere in
//! it. A node refuses a peer's message that reaches further ahead of its
//! own clock than the cluster's maximum clock offset (a poisoned or broken
//! clock), before any protocol sees it, so that no such timestamp moves a
//! hybrid clock.
//!
//! Found by walking the message through serde, as if serializing it, and
//! keeping every value serialized as the newtype struct `Timestamp`: every
//! message type of every protocol is covered as it is declared, with no
//! list of fields to keep up to date (a timestamp hidden in a plain `u64`
//! is not seen: protocols keep theirs as [`Timestamp`]). Keys and values
//! are skipped as bytes; nothing is allocated.

use crate::hlc::Timestamp;
use serde::ser::{self, Serialize};
use std::fmt;

/// The newest [`Timestamp`] in `value` ([`Timestamp::ZERO`] if none).
pub fn newest_timestamp<T: Serialize + ?Sized>(value: &T) -> Timestamp {
    let mut walk = Walk { newest: 0, in_timestamp: false };
    // The walk never fails: every method accepts what it is given.
    let _ = value.serialize(&mut walk);
    Timestamp(walk.newest)
}

struct Walk {
    newest: u64,
    /// The next `u64` is a timestamp's.
    in_timestamp: bool,
}

/// Never made: the walk accepts everything.
#[derive(Debug)]
pub struct Never;

impl fmt::Display for Never {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("never")
    }
}

impl std::error::Error for Never {}

impl ser::Error for Never {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Never
    }
}

macro_rules! skip {
    ($($name:ident: $ty:ty),* $(,)?) => {
        $(fn $name(self, _: $ty) -> Result<(), Never> {
            Ok(())
        })*
    };
}

impl ser::Serializer for &mut Walk {
    type Ok = ();
    type Error = Never;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn serialize_u64(self, v: u64) -> Result<(), Never> {
        if std::mem::take(&mut self.in_timestamp) {
            self.newest = self.newest.max(v);
        }
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, name: &'static str, value: &T) -> Result<(), Never> {
        self.in_timestamp = name == "Timestamp";
        let r = value.serialize(&mut *self);
        self.in_timestamp = false;
        r
    }

    skip! {
        serialize_bool: bool, serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_u8: u8, serialize_u16: u16, serialize_u32: u32, serialize_f32: f32, serialize_f64: f64,
        serialize_char: char, serialize_str: &str, serialize_bytes: &[u8], serialize_unit_struct: &'static str,
    }

    fn serialize_none(self) -> Result<(), Never> {
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Never> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Never> {
        Ok(())
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Never> {
        Ok(())
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), Never> {
        value.serialize(self)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Self, Never> {
        Ok(self)
    }

    fn serialize_tuple(self, _: usize) -> Result<Self, Never> {
        Ok(self)
    }

    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, Never> {
        Ok(self)
    }

    fn serialize_tuple_variant(self, _: &'static str, _: u32, _: &'static str, _: usize) -> Result<Self, Never> {
        Ok(self)
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Self, Never> {
        Ok(self)
    }

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Never> {
        Ok(self)
    }

    fn serialize_struct_variant(self, _: &'static str, _: u32, _: &'static str, _: usize) -> Result<Self, Never> {
        Ok(self)
    }

    fn is_human_readable(&self) -> bool {
        false
    }
}

macro_rules! compound {
    ($($trait:ident :: $method:ident),*) => {
        $(impl ser::$trait for &mut Walk {
            type Ok = ();
            type Error = Never;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Never> {
                value.serialize(&mut **self)
            }
            fn end(self) -> Result<(), Never> {
                Ok(())
            }
        })*
    };
}

compound!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for &mut Walk {
    type Ok = ();
    type Error = Never;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Never> {
        key.serialize(&mut **self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Never> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Never> {
        Ok(())
    }
}

impl ser::SerializeStruct for &mut Walk {
    type Ok = ();
    type Error = Never;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, _: &'static str, value: &T) -> Result<(), Never> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Never> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for &mut Walk {
    type Ok = ();
    type Error = Never;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, _: &'static str, value: &T) -> Result<(), Never> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<(), Never> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde::Serialize;

    #[derive(Serialize)]
    enum Msg {
        Commit { tx: u64, ct: Timestamp },
        Batch(Vec<(Bytes, Option<Timestamp>)>),
    }

    /// Protocol messages are walked in the simulator's tests
    /// (`tests/sim/reach.rs`): this crate's modules do not import the
    /// protocols.
    #[test]
    fn finds_the_newest_timestamp_wherever_it_sits() {
        let t = |x| Timestamp(x);
        assert_eq!(newest_timestamp(&t(7)), t(7));
        assert_eq!(newest_timestamp(&(3u64, t(5), vec![t(9), t(2)], Some(t(11)))), t(11));
        assert_eq!(newest_timestamp(&(u64::MAX, Bytes::from_static(b"\xff\xff"))), Timestamp::ZERO, "not timestamps");
        assert_eq!(newest_timestamp(&Msg::Commit { tx: u64::MAX, ct: t(40) }), t(40));
        let batch = Msg::Batch(vec![(Bytes::from_static(&[0xff; 16]), Some(t(43))), (Bytes::new(), None)]);
        assert_eq!(newest_timestamp(&batch), t(43));
    }
}
