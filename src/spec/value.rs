//! The values of the spec language and what names mean while evaluating: [`Value`],
//! [`EvalError`], the [`Scope`] an expression is evaluated in and the [`EnvReads`] a load
//! notes. Both the evaluator (`eval.rs`) and the built-in functions (`functions/`) work on
//! these; they live below both so that neither file has to reach into the other for them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::addr::Kind;
use crate::diag::Diagnostic;

/// An evaluated value. Numbers are f64 (integers are exact up to 2^53).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    List(Vec<Value>),
    Object(BTreeMap<String, Value>),
}

impl Value {
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Object(_) => "object",
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Bool(b) => (*b).into(),
            Value::Number(n) => number_json(*n),
            Value::String(s) => s.clone().into(),
            Value::List(l) => l.iter().map(Value::to_json).collect::<Vec<_>>().into(),
            Value::Object(o) => {
                o.iter().map(|(k, v)| (k.clone(), v.to_json())).collect::<serde_json::Map<_, _>>().into()
            }
        }
    }
    pub fn from_json(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
            serde_json::Value::String(s) => Value::String(s.clone()),
            serde_json::Value::Array(a) => Value::List(a.iter().map(Value::from_json).collect()),
            serde_json::Value::Object(o) => {
                Value::Object(o.iter().map(|(k, v)| (k.clone(), Value::from_json(v))).collect())
            }
        }
    }
}

fn number_json(n: f64) -> serde_json::Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        (n as i64).into()
    } else {
        serde_json::Number::from_f64(n).map(serde_json::Value::Number).unwrap_or(serde_json::Value::Null)
    }
}

/// Format a number the way HCL prints it: integers without a fraction.
pub fn format_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 9.0e15 { format!("{}", n as i64) } else { format!("{n}") }
}

impl Value {
    /// The value as text, as `Display` writes it; a string is moved, not written anew.
    pub fn into_text(self) -> String {
        match self {
            Value::String(s) => s,
            other => other.to_string(),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::String(s) => f.write_str(s),
            Value::Number(n) => f.write_str(&format_number(*n)),
            other => write!(f, "{}", other.to_json()),
        }
    }
}

impl Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde_json::Value::deserialize(d).map(|v| Value::from_json(&v))
    }
}

impl JsonSchema for Value {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Value".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "description": "Any value" })
    }
}

/// Why an expression produced no value.
#[derive(Debug, Clone, PartialEq)]
pub enum EvalError {
    /// A located problem in this expression.
    Diag(Box<Diagnostic>),
    /// It refers to something that already failed; the cause was reported there.
    Poisoned,
}

impl From<Diagnostic> for EvalError {
    fn from(d: Diagnostic) -> Self {
        EvalError::Diag(Box::new(d))
    }
}

pub type EvalResult = Result<Value, EvalError>;

/// The names of the environment variables a load looked up (`env("X")`,
/// `GPUPLAN_VAR_<name>`), set or not: with the spec files and the variables' values, all
/// that decoding a spec depends on ([`crate::spec::fingerprint`]).
#[derive(Debug, Default)]
pub struct EnvReads(std::sync::Mutex<std::collections::BTreeSet<String>>);

impl EnvReads {
    pub fn note(&self, name: &str) {
        // A poisoned lock only means another thread panicked mid-insert of a name; the
        // set is still a set of names.
        let mut names = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !names.contains(name) {
            names.insert(name.to_string());
        }
    }
    /// The names looked up so far, sorted.
    pub fn names(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().cloned().collect()
    }
}

impl Clone for EnvReads {
    fn clone(&self) -> Self {
        EnvReads(std::sync::Mutex::new(self.names().into_iter().collect()))
    }
}

/// What names mean while evaluating one expression.
#[derive(Default)]
pub struct Scope<'a> {
    pub vars: Option<&'a BTreeMap<String, Value>>,
    pub locals: Option<&'a BTreeMap<String, Value>>,
    /// Evaluated resources by kind and name (an object, or a list / map of objects for
    /// `count` / `for_each`).
    pub resources: Option<&'a BTreeMap<(Kind, String), Value>>,
    /// Every resource the spec declares, by kind: what a reference to an undeclared one
    /// is told it may have meant (else the resources evaluated so far).
    pub declared: Option<&'a BTreeMap<Kind, std::collections::BTreeSet<String>>>,
    /// Variables, locals and resources that failed; references to them are silently poisoned.
    pub poisoned: Option<&'a std::collections::BTreeSet<String>>,
    pub env: Option<&'a BTreeMap<String, String>>,
    /// Where the names `env()` looks up are noted (a spec's load: [`EnvReads`]).
    pub env_read: Option<&'a EnvReads>,
    pub count_index: Option<u64>,
    /// `each.key` and `each.value`; the value is borrowed where it lies in data the scope
    /// already borrows (a policy's `for_each = plan.pools`), so it is not copied per item.
    pub each: Option<(Value, Cow<'a, Value>)>,
    /// `for` expression variables, innermost last; borrowed, not copied, when the
    /// collection lies in data the scope borrows.
    pub bound: Vec<(String, Cow<'a, Value>)>,
    /// Extra top-level names (policies see `plan`).
    pub extra: Option<&'a BTreeMap<String, Value>>,
}
