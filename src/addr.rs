//! Resource addresses: `gpu_pool.train`, `job.eval[2]`, `quota.team["ml"]`.
//!
//! An address names one declared object (after `count`/`for_each` expansion). It is
//! the key of state resources, plan changes, graph nodes and cloud ownership tags, so
//! its text form is a contract: `Display` and `FromStr` round-trip.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub mod resolve;

/// The kinds of declared objects, in the order they are listed to users.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Provider,
    GpuPool,
    Quota,
    JobTemplate,
    Job,
    Autoscaler,
    Reservation,
}

impl Kind {
    pub const ALL: [Kind; 7] =
        [Kind::Provider, Kind::GpuPool, Kind::Quota, Kind::JobTemplate, Kind::Job, Kind::Autoscaler, Kind::Reservation];

    /// The HCL block name, also the first segment of an address.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Provider => "provider",
            Kind::GpuPool => "gpu_pool",
            Kind::Quota => "quota",
            Kind::JobTemplate => "job_template",
            Kind::Job => "job",
            Kind::Autoscaler => "autoscaler",
            Kind::Reservation => "reservation",
        }
    }
    /// The YAML top-level key.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Provider => "providers",
            Kind::GpuPool => "gpu_pools",
            Kind::Quota => "quotas",
            Kind::JobTemplate => "job_templates",
            Kind::Job => "jobs",
            Kind::Autoscaler => "autoscalers",
            Kind::Reservation => "reservations",
        }
    }
    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The key of one instance of a resource with `count` or `for_each`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InstanceKey {
    Int(u64),
    Str(String),
}

impl fmt::Display for InstanceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstanceKey::Int(i) => write!(f, "[{i}]"),
            InstanceKey::Str(s) => write!(f, "[{s:?}]"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Address {
    pub kind: Kind,
    pub name: String,
    pub key: Option<InstanceKey>,
}

impl Address {
    pub fn new(kind: Kind, name: impl Into<String>) -> Self {
        Address { kind, name: name.into(), key: None }
    }
    pub fn with_key(mut self, key: InstanceKey) -> Self {
        self.key = Some(key);
        self
    }
    /// The address without its instance key (`gpu_pool.train[0]` → `gpu_pool.train`).
    pub fn base(&self) -> Address {
        Address { key: None, ..self.clone() }
    }
    /// Does `target` (as given to `--target`) select this address? A target without a
    /// key selects every instance.
    pub fn matches_target(&self, target: &Address) -> bool {
        self.kind == target.kind && self.name == target.name && (target.key.is_none() || target.key == self.key)
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.kind, self.name)?;
        if let Some(k) = &self.key {
            write!(f, "{k}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}` is not a resource address: {reason}")]
pub struct AddressError {
    pub input: String,
    pub reason: &'static str,
}

pub fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl FromStr for Address {
    type Err = AddressError;
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        // The error copies the input: made only when the parse fails (`ok_or_else`), not
        // for every address read (every string of a spec is tried as one).
        let err = |reason| AddressError { input: input.to_string(), reason };
        let (kind_s, rest) = input.split_once('.').ok_or_else(|| err("expected KIND.NAME, e.g. `gpu_pool.train`"))?;
        let kind = Kind::parse(kind_s)
            .ok_or_else(|| err("unknown kind (expected provider, gpu_pool, quota, job_template, job or autoscaler)"))?;
        let (name, key) = match rest.find('[') {
            None => (rest, None),
            Some(i) => {
                let inner = rest[i..]
                    .strip_prefix('[')
                    .and_then(|r| r.strip_suffix(']'))
                    .ok_or_else(|| err("an instance key must look like [0] or [\"name\"]"))?;
                let key = if let Some(s) = inner.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
                    InstanceKey::Str(s.to_string())
                } else {
                    InstanceKey::Int(
                        inner.parse().map_err(|_| err("an instance key must be a number or a quoted string"))?,
                    )
                };
                (&rest[..i], Some(key))
            }
        };
        if !is_ident(name) {
            return Err(err("the name must start with a letter and hold only letters, digits, `_` and `-`"));
        }
        Ok(Address { kind, name: name.to_string(), key })
    }
}

impl Serialize for Address {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Address {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Address {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Address".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A resource address such as `gpu_pool.train` or `job.eval[0]`",
            "pattern": "^(provider|gpu_pool|quota|job_template|job|autoscaler)\\.[A-Za-z_][A-Za-z0-9_-]*(\\[(\\d+|\"[^\"]*\")\\])?$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in ["gpu_pool.train", "job.eval[2]", "quota.team[\"ml\"]", "provider.aws"] {
            let a: Address = s.parse().unwrap();
            assert_eq!(a.to_string(), s);
        }
    }

    #[test]
    fn rejects_bad_addresses() {
        for s in ["gpu_pool", "pool.train", "gpu_pool.1x", "job.x[", "job.x[a]"] {
            assert!(s.parse::<Address>().is_err(), "{s} should not parse");
        }
    }

    #[test]
    fn target_without_key_selects_all_instances() {
        let t: Address = "job.x".parse().unwrap();
        assert!("job.x[3]".parse::<Address>().unwrap().matches_target(&t));
        assert!(!"job.y[3]".parse::<Address>().unwrap().matches_target(&t));
    }
}
