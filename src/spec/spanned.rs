//! The two small types every spec block is built from: [`Spanned`], a value with the span
//! it was written at, and [`Duration`], a duration as the user spells it. They live below
//! the typed spec (`model.rs`) and the field readers (`fields.rs`, `adopt.rs`), which all
//! use them, so that none of those files reaches up into another for them.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::diag::Span;

/// A value with the span of the expression (or block) it came from.
#[derive(Debug, Clone, Default)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub fn new(value: T, span: Span) -> Self {
        Spanned { value, span }
    }
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Spanned<U> {
        Spanned { value: f(self.value), span: self.span }
    }
}

impl<T> std::ops::Deref for Spanned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: PartialEq> PartialEq for Spanned<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<T: Serialize> Serialize for Spanned<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Spanned<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(|value| Spanned { value, span: Span::default() })
    }
}

impl<T: JsonSchema> JsonSchema for Spanned<T> {
    // Always inline, under its own name: sharing `T`'s name made `Spanned<T>` and `T` one
    // definition that referred to itself, and `T`'s real schema was lost.
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Spanned_{}", T::schema_name()).into()
    }
    fn schema_id() -> std::borrow::Cow<'static, str> {
        format!("Spanned<{}>", T::schema_id()).into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // Any value may instead be written as an interpolation (`"${var.x}"`).
        let inner = g.subschema_for::<T>();
        schemars::json_schema!({ "anyOf": [inner, { "$ref": "#/$defs/Interpolation" }] })
    }
}

/// A duration written as `90s`, `15m`, `2h`, `1h30m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    pub fn secs(s: u64) -> Self {
        Duration(std::time::Duration::from_secs(s))
    }
    pub fn as_secs(&self) -> u64 {
        self.0.as_secs()
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl std::str::FromStr for Duration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        crate::model::time::duration(s).map(Duration)
    }
}

impl Serialize for Duration {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A duration such as `90s`, `15m`, `2h` or `1h 30m`",
            "pattern": "^\\s*\\d+\\s*[a-zA-Z]+(\\s*\\d+\\s*[a-zA-Z]+)*\\s*$"
        })
    }
}
