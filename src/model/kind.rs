//! [`ProviderKind`]: which cloud a provider block, a pool or a state record speaks of.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Sim,
    Aws,
    Tencentcloud,
    Alicloud,
}

impl ProviderKind {
    pub const ALL: [ProviderKind; 4] =
        [ProviderKind::Sim, ProviderKind::Aws, ProviderKind::Tencentcloud, ProviderKind::Alicloud];
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Sim => "sim",
            ProviderKind::Aws => "aws",
            ProviderKind::Tencentcloud => "tencentcloud",
            ProviderKind::Alicloud => "alicloud",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not one of [`ProviderKind::ALL`]; its message lists the known kinds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider kind `{0}` (known: sim, aws, tencentcloud, alicloud)")]
pub struct UnknownProviderKind(pub String);

impl FromStr for ProviderKind {
    type Err = UnknownProviderKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProviderKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| UnknownProviderKind(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_prints_and_nothing_else() {
        for k in ProviderKind::ALL {
            assert_eq!(k.as_str().parse::<ProviderKind>(), Ok(k));
        }
        let err = "gcp".parse::<ProviderKind>().unwrap_err();
        assert_eq!(err, UnknownProviderKind("gcp".into()));
        assert!(err.to_string().contains("known: sim, aws"), "{err}");
        assert!("AWS".parse::<ProviderKind>().is_err(), "kinds are lowercase, as in specs and state");
    }
}
