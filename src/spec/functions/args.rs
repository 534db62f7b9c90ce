//! One call of a built-in function: its arguments, read and checked by type, each error
//! located at the argument and named after the function.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::diag::{Diagnostic, Span};
use crate::spec::value::{EvalError, EvalResult, Value, format_number};

/// An argument: borrowed where it is a reference into the scope (`plan.pools` is not
/// copied to be counted or searched), owned where it was computed.
pub(super) type Arg<'v> = (Cow<'v, Value>, Span);

pub(super) fn bad(span: Span, message: impl Into<String>, label: impl Into<String>) -> EvalError {
    Diagnostic::error("gpuplan::eval::function", message).at(span, label).into()
}

pub(super) struct Call<'a> {
    pub(super) name: &'a str,
    pub(super) span: Span,
    pub(super) args: Vec<Arg<'a>>,
}

impl Call<'_> {
    pub(super) fn arity(&self, min: usize, max: usize) -> Result<(), EvalError> {
        let n = self.args.len();
        if n < min || n > max {
            let want = if min == max {
                format!("{min}")
            } else if max == usize::MAX {
                format!("at least {min}")
            } else {
                format!("{min} to {max}")
            };
            return Err(bad(
                self.span,
                format!("`{}` takes {want} argument(s), got {n}", self.name),
                "wrong number of arguments",
            ));
        }
        Ok(())
    }
    /// Argument `i` and its span.
    pub(super) fn arg(&self, i: usize) -> (&Value, Span) {
        (&self.args[i].0, self.args[i].1)
    }
    pub(super) fn number(&self, i: usize) -> Result<f64, EvalError> {
        match self.arg(i) {
            (Value::Number(n), _) => Ok(*n),
            (Value::String(s), sp) => s
                .trim()
                .parse()
                .map_err(|_| bad(sp, format!("`{}` expects a number, found string {s:?}", self.name), "not a number")),
            (v, sp) => {
                Err(bad(sp, format!("`{}` expects a number, found {}", self.name, v.type_name()), "not a number"))
            }
        }
    }
    pub(super) fn string(&self, i: usize) -> Result<String, EvalError> {
        match self.arg(i) {
            (Value::String(s), _) => Ok(s.clone()),
            (Value::Number(n), _) => Ok(format_number(*n)),
            (Value::Bool(b), _) => Ok(b.to_string()),
            (v, sp) => {
                Err(bad(sp, format!("`{}` expects a string, found {}", self.name, v.type_name()), "not a string"))
            }
        }
    }
    pub(super) fn list(&self, i: usize) -> Result<Vec<Value>, EvalError> {
        self.list_ref(i).map(<[Value]>::to_vec)
    }
    pub(super) fn list_ref(&self, i: usize) -> Result<&[Value], EvalError> {
        match self.arg(i) {
            (Value::List(l), _) => Ok(l),
            (v, sp) => Err(bad(sp, format!("`{}` expects a list, found {}", self.name, v.type_name()), "not a list")),
        }
    }
    pub(super) fn object(&self, i: usize) -> Result<BTreeMap<String, Value>, EvalError> {
        self.object_ref(i).cloned()
    }
    pub(super) fn object_ref(&self, i: usize) -> Result<&BTreeMap<String, Value>, EvalError> {
        match self.arg(i) {
            (Value::Object(o), _) => Ok(o),
            (v, sp) => {
                Err(bad(sp, format!("`{}` expects an object, found {}", self.name, v.type_name()), "not an object"))
            }
        }
    }
    /// The list argument `i` with every element as a string (errors point at the list).
    pub(super) fn list_of_strings(&self, i: usize) -> Result<Vec<String>, EvalError> {
        self.strings_of(self.list(i)?, self.args[i].1)
    }
    /// `items` as strings, each error located at `span` and named after this function.
    pub(super) fn strings_of(&self, items: Vec<Value>, span: Span) -> Result<Vec<String>, EvalError> {
        let inner =
            Call { name: self.name, span: self.span, args: items.into_iter().map(|v| (Cow::Owned(v), span)).collect() };
        (0..inner.args.len()).map(|i| inner.string(i)).collect()
    }
    pub(super) fn numbers(&self) -> Result<Vec<f64>, EvalError> {
        // min(1, 2) and min([1, 2]...) both work; a single list argument is spread too.
        if let [(items, sp)] = self.args.as_slice()
            && let Value::List(items) = &**items
        {
            let inner = Call {
                name: self.name,
                span: self.span,
                args: items.iter().map(|v| (Cow::Borrowed(v), *sp)).collect(),
            };
            return inner.numbers();
        }
        (0..self.args.len()).map(|i| self.number(i)).collect()
    }
}

pub(super) fn finite(n: f64, span: Span) -> EvalResult {
    if n.is_finite() { Ok(Value::Number(n)) } else { Err(bad(span, "result is out of range", "overflows")) }
}
