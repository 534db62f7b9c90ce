//! Error classification as data, for the signed-JSON clouds (Tencent Cloud, Alibaba
//! Cloud): each cloud writes its codes down as an [`ErrorTable`] (`code → class` rules in
//! order, hints by code and by class) and this module alone reads them. Adding a code is
//! a row in the cloud's table, never a branch. Pure.

use crate::providers::{ErrorClass, ProviderError};

/// How a rule matches an error code.
#[derive(Debug, Clone, Copy)]
pub enum Code {
    /// Exactly this code.
    Is(&'static str),
    /// This code or one under it: `Throttling` matches `Throttling` and `Throttling.User`.
    Under(&'static str),
    /// A code that starts with the first and ends with the second
    /// (`LimitExceeded.` … `Quota`).
    Between(&'static str, &'static str),
}

impl Code {
    fn matches(self, code: &str) -> bool {
        match self {
            Code::Is(c) => code == c,
            Code::Under(p) => code.strip_prefix(p).is_some_and(|rest| rest.is_empty() || rest.starts_with('.')),
            Code::Between(a, b) => code.starts_with(a) && code.ends_with(b),
        }
    }
}

/// One cloud's error codes: the first rule that matches decides the class; a code no rule
/// matches is classed by its HTTP status where `by_status` (5xx retryable, 4xx invalid),
/// else fatal.
pub struct ErrorTable {
    /// The cloud's name as messages say it (`Tencent Cloud`).
    pub cloud: &'static str,
    pub rules: &'static [(Code, ErrorClass)],
    pub by_status: bool,
    /// Hints for single codes, before those by class.
    pub code_hints: &'static [(&'static str, &'static str)],
    pub class_hints: &'static [(ErrorClass, &'static str)],
}

impl ErrorTable {
    /// The class of `code` (answered with HTTP `status`).
    pub fn class_of(&self, code: &str, status: u16) -> ErrorClass {
        if let Some((_, class)) = self.rules.iter().find(|(c, _)| c.matches(code)) {
            return *class;
        }
        match status {
            500.. if self.by_status => ErrorClass::Retryable,
            400..500 if self.by_status => ErrorClass::Invalid,
            _ => ErrorClass::Fatal,
        }
    }

    /// What to do next about `code` of `class`; empty when the table says nothing.
    pub fn hint(&self, code: &str, class: ErrorClass) -> &'static str {
        let by_code = self.code_hints.iter().find(|(c, _)| *c == code).map(|(_, h)| *h);
        by_code.or_else(|| self.class_hints.iter().find(|(c, _)| *c == class).map(|(_, h)| *h)).unwrap_or("")
    }

    /// The provider error of an error answer to `what`: its class, the cloud's message
    /// with the request id, and a `hint:` line where the table has one.
    pub fn api_error(&self, what: &str, code: &str, message: &str, request_id: &str, status: u16) -> ProviderError {
        let class = self.class_of(code, status);
        let h = self.hint(code, class);
        let mut msg = format!("{} {what}: {message}", self.cloud);
        if !request_id.is_empty() {
            msg.push_str(&format!(" (RequestId {request_id})"));
        }
        if !h.is_empty() {
            msg.push_str(&format!("\nhint: {h}"));
        }
        ProviderError::new(class, code, msg)
    }
}

#[cfg(test)]
mod tests;
