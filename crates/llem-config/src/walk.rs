//! Walks any `Serialize` value as a stream of events, without building a JSON tree.
//!
//! Planning a 100 000-cell sweep hashes and range-checks every configuration; going through
//! `serde_json::Value` for that spent most of the time allocating maps. The canonical writer
//! ([`crate::canonical`]) and the range checker ([`crate::schema`]) are [`Sink`]s instead.

use std::fmt;

use serde::ser::{self, Serialize};

/// Receives the events of a walk.
pub trait Sink {
    /// `None` or unit.
    fn null(&mut self);
    /// A boolean.
    fn bool(&mut self, v: bool);
    /// A signed integer.
    fn i64(&mut self, v: i64);
    /// An unsigned integer.
    fn u64(&mut self, v: u64);
    /// A float.
    fn f64(&mut self, v: f64);
    /// A string (also unit enum variants).
    fn str(&mut self, v: &str);
    /// Start of a list.
    fn begin_seq(&mut self);
    /// Before each list element.
    fn seq_element(&mut self);
    /// End of a list.
    fn end_seq(&mut self);
    /// Start of a struct of type `name`.
    fn begin_struct(&mut self, name: &'static str);
    /// Before a struct field's value; `false` skips the value.
    fn field(&mut self, key: &'static str) -> bool;
    /// After a struct field (skipped or not).
    fn end_field(&mut self);
    /// End of a struct.
    fn end_struct(&mut self);
    /// Start of a map.
    fn begin_map(&mut self);
    /// A map key (rendered as a string) before its value.
    fn map_key(&mut self, key: &str);
    /// After a map value.
    fn end_map_value(&mut self);
    /// End of a map.
    fn end_map(&mut self);
}

/// A value that cannot be walked (bytes, enum variants with data, non-string map keys).
#[derive(Debug)]
pub struct WalkError(String);

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WalkError {}

impl ser::Error for WalkError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        WalkError(msg.to_string())
    }
}

/// Walks `value` into `sink`.
pub fn walk<T: Serialize + ?Sized, S: Sink>(value: &T, sink: &mut S) -> Result<(), WalkError> {
    value.serialize(Walker { sink })
}

struct Walker<'a, S> {
    sink: &'a mut S,
}

fn unsupported(what: &str) -> WalkError {
    WalkError(format!("cannot walk {what}"))
}

/// Small integer methods forwarded to the 64-bit one.
macro_rules! widen {
    ($($m:ident($t:ty)),* => $target:ident($wide:ty)) => {$(
        fn $m(self, v: $t) -> Result<(), WalkError> {
            self.$target(<$wide>::from(v))
        }
    )*};
}

/// Integer map keys, written as their decimal text.
macro_rules! to_key {
    ($($m:ident($t:ty)),*) => {$(
        fn $m(self, v: $t) -> Result<String, WalkError> {
            Ok(v.to_string())
        }
    )*};
}

impl<'a, S: Sink> ser::Serializer for Walker<'a, S> {
    type Ok = ();
    type Error = WalkError;
    type SerializeSeq = Compound<'a, S>;
    type SerializeTuple = Compound<'a, S>;
    type SerializeTupleStruct = Compound<'a, S>;
    type SerializeTupleVariant = ser::Impossible<(), WalkError>;
    type SerializeMap = Compound<'a, S>;
    type SerializeStruct = Compound<'a, S>;
    type SerializeStructVariant = ser::Impossible<(), WalkError>;

    fn serialize_bool(self, v: bool) -> Result<(), WalkError> {
        self.sink.bool(v);
        Ok(())
    }
    widen!(serialize_i8(i8), serialize_i16(i16), serialize_i32(i32) => serialize_i64(i64));
    fn serialize_i64(self, v: i64) -> Result<(), WalkError> {
        self.sink.i64(v);
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<(), WalkError> {
        match i64::try_from(v) {
            Ok(x) => self.serialize_i64(x),
            Err(_) => Err(unsupported("an integer beyond 64 bits")),
        }
    }
    widen!(serialize_u8(u8), serialize_u16(u16), serialize_u32(u32) => serialize_u64(u64));
    fn serialize_u64(self, v: u64) -> Result<(), WalkError> {
        self.sink.u64(v);
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<(), WalkError> {
        match u64::try_from(v) {
            Ok(x) => self.serialize_u64(x),
            Err(_) => Err(unsupported("an integer beyond 64 bits")),
        }
    }
    fn serialize_f32(self, v: f32) -> Result<(), WalkError> {
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), WalkError> {
        self.sink.f64(v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), WalkError> {
        self.serialize_str(v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), WalkError> {
        self.sink.str(v);
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), WalkError> {
        Err(unsupported("bytes"))
    }
    fn serialize_none(self) -> Result<(), WalkError> {
        self.sink.null();
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), WalkError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), WalkError> {
        self.sink.null();
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), WalkError> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), WalkError> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), WalkError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), WalkError> {
        self.sink.begin_map();
        self.sink.map_key(variant);
        value.serialize(Walker {
            sink: &mut *self.sink,
        })?;
        self.sink.end_map_value();
        self.sink.end_map();
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a, S>, WalkError> {
        self.sink.begin_seq();
        Ok(Compound { sink: self.sink })
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, S>, WalkError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        len: usize,
    ) -> Result<Compound<'a, S>, WalkError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, WalkError> {
        Err(unsupported("tuple variants"))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'a, S>, WalkError> {
        self.sink.begin_map();
        Ok(Compound { sink: self.sink })
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Compound<'a, S>, WalkError> {
        self.sink.begin_struct(name);
        Ok(Compound { sink: self.sink })
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, WalkError> {
        Err(unsupported("struct variants"))
    }
}

/// State of a list, map or struct being walked.
pub struct Compound<'a, S> {
    sink: &'a mut S,
}

impl<S: Sink> Compound<'_, S> {
    fn value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), WalkError> {
        v.serialize(Walker {
            sink: &mut *self.sink,
        })
    }
}

impl<S: Sink> ser::SerializeSeq for Compound<'_, S> {
    type Ok = ();
    type Error = WalkError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), WalkError> {
        self.sink.seq_element();
        self.value(v)
    }
    fn end(self) -> Result<(), WalkError> {
        self.sink.end_seq();
        Ok(())
    }
}

impl<S: Sink> ser::SerializeTuple for Compound<'_, S> {
    type Ok = ();
    type Error = WalkError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), WalkError> {
        ser::SerializeSeq::serialize_element(self, v)
    }
    fn end(self) -> Result<(), WalkError> {
        ser::SerializeSeq::end(self)
    }
}

impl<S: Sink> ser::SerializeTupleStruct for Compound<'_, S> {
    type Ok = ();
    type Error = WalkError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), WalkError> {
        ser::SerializeSeq::serialize_element(self, v)
    }
    fn end(self) -> Result<(), WalkError> {
        ser::SerializeSeq::end(self)
    }
}

impl<S: Sink> ser::SerializeMap for Compound<'_, S> {
    type Ok = ();
    type Error = WalkError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), WalkError> {
        let k = key.serialize(KeyString)?;
        self.sink.map_key(&k);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), WalkError> {
        self.value(v)?;
        self.sink.end_map_value();
        Ok(())
    }
    fn end(self) -> Result<(), WalkError> {
        self.sink.end_map();
        Ok(())
    }
}

impl<S: Sink> ser::SerializeStruct for Compound<'_, S> {
    type Ok = ();
    type Error = WalkError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), WalkError> {
        if self.sink.field(key) {
            self.value(v)?;
        }
        self.sink.end_field();
        Ok(())
    }
    fn end(self) -> Result<(), WalkError> {
        self.sink.end_struct();
        Ok(())
    }
}

/// Renders a map key as a string, as JSON does.
struct KeyString;

impl ser::Serializer for KeyString {
    type Ok = String;
    type Error = WalkError;
    type SerializeSeq = ser::Impossible<String, WalkError>;
    type SerializeTuple = ser::Impossible<String, WalkError>;
    type SerializeTupleStruct = ser::Impossible<String, WalkError>;
    type SerializeTupleVariant = ser::Impossible<String, WalkError>;
    type SerializeMap = ser::Impossible<String, WalkError>;
    type SerializeStruct = ser::Impossible<String, WalkError>;
    type SerializeStructVariant = ser::Impossible<String, WalkError>;

    fn serialize_bool(self, v: bool) -> Result<String, WalkError> {
        Ok(v.to_string())
    }
    to_key!(
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64)
    );
    fn serialize_f32(self, _: f32) -> Result<String, WalkError> {
        Err(unsupported("a float map key"))
    }
    fn serialize_f64(self, _: f64) -> Result<String, WalkError> {
        Err(unsupported("a float map key"))
    }
    fn serialize_char(self, v: char) -> Result<String, WalkError> {
        Ok(v.to_string())
    }
    fn serialize_str(self, v: &str) -> Result<String, WalkError> {
        Ok(v.to_string())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<String, WalkError> {
        Err(unsupported("a bytes map key"))
    }
    fn serialize_none(self) -> Result<String, WalkError> {
        Err(unsupported("a null map key"))
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<String, WalkError> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<String, WalkError> {
        Err(unsupported("a null map key"))
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<String, WalkError> {
        Err(unsupported("a unit map key"))
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<String, WalkError> {
        Ok(variant.to_string())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<String, WalkError> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, WalkError> {
        Err(unsupported("a variant map key"))
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, WalkError> {
        Err(unsupported("a list map key"))
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, WalkError> {
        Err(unsupported("a tuple map key"))
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, WalkError> {
        Err(unsupported("a tuple map key"))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, WalkError> {
        Err(unsupported("a variant map key"))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, WalkError> {
        Err(unsupported("a map map key"))
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, WalkError> {
        Err(unsupported("a struct map key"))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, WalkError> {
        Err(unsupported("a variant map key"))
    }
}
