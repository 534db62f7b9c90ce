//! What a spec was loaded from, part by part: gpuplan's version, each spec file's text
//! and each environment variable the spec looked up with `env()`, as SHA-256 digests.
//!
//! Loading is a pure function of these and the variables' values, so a saved plan
//! records its spec's fingerprint beside those values: `apply PLANFILE` takes equal
//! fingerprints (and the plan's values) as the planned spec without decoding it again,
//! and when they differ says which part did: a file, an environment variable, gpuplan.
//! Values are kept as digests only: an environment variable may hold a secret.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::diag::Sources;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// The version of gpuplan that loaded the spec.
    pub gpuplan: String,
    /// SHA-256 of each spec file's text, by file name (the spec folder is flat).
    pub files: BTreeMap<String, String>,
    /// SHA-256 of each environment variable the spec looked up, by name; `null`: unset.
    pub env: BTreeMap<String, Option<String>>,
}

impl Fingerprint {
    /// The fingerprint of the spec files in `sources` (all but `skip`: var files) and of
    /// the environment variables `names` as `env` has them.
    pub fn of(sources: &Sources, skip: &BTreeSet<u32>, names: &[String], env: &BTreeMap<String, String>) -> Self {
        let files = sources
            .files()
            .filter(|(id, _)| !skip.contains(id))
            .map(|(_, f)| (file_name(&f.name), digest(f.text.as_bytes())))
            .collect();
        let env = names.iter().map(|n| (n.clone(), env.get(n).map(|v| digest(v.as_bytes())))).collect();
        Fingerprint { gpuplan: env!("CARGO_PKG_VERSION").to_string(), files, env }
    }

    /// The names of the environment variables this fingerprint covers.
    pub fn env_names(&self) -> Vec<String> {
        self.env.keys().cloned().collect()
    }

    /// What is different now (`self`) from `saved`, one phrase each, files first:
    /// "`main.hcl` changed", "`extra.hcl` is new", "the environment variable `X` changed".
    pub fn changes_since(&self, saved: &Fingerprint) -> Vec<String> {
        let mut out = Vec::new();
        for (name, was) in &saved.files {
            match self.files.get(name) {
                Some(now) if now != was => out.push(format!("`{name}` changed")),
                Some(_) => {}
                None => out.push(format!("`{name}` is gone")),
            }
        }
        out.extend(self.files.keys().filter(|n| !saved.files.contains_key(*n)).map(|n| format!("`{n}` is new")));
        for (name, was) in &saved.env {
            let now = self.env.get(name).cloned().flatten();
            match (was, now) {
                (Some(a), Some(b)) if *a != b => out.push(format!("the environment variable `{name}` changed")),
                (Some(_), None) => out.push(format!("the environment variable `{name}` is no longer set")),
                (None, Some(_)) => out.push(format!("the environment variable `{name}` is set now")),
                _ => {}
            }
        }
        if self.gpuplan != saved.gpuplan {
            out.push(format!("it was saved by gpuplan {}; this is gpuplan {}", saved.gpuplan, self.gpuplan));
        }
        out
    }
}

fn file_name(shown: &str) -> String {
    Path::new(shown).file_name().map_or_else(|| shown.to_string(), |n| n.to_string_lossy().into_owned())
}

fn digest(bytes: &[u8]) -> String {
    crate::hex::hex(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(files: &[(&str, &str)]) -> Sources {
        let mut s = Sources::default();
        for (name, text) in files {
            s.add(*name, *text);
        }
        s
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn each_changed_part_is_named_and_nothing_else() {
        let names = vec!["IMAGE".to_string(), "ZONE".to_string()];
        let none = BTreeSet::new();
        let saved = Fingerprint::of(
            &sources(&[("fleet/main.hcl", "a"), ("fleet/old.hcl", "b")]),
            &none,
            &names,
            &env(&[("IMAGE", "ami-1"), ("UNRELATED", "x")]),
        );
        assert_eq!(saved.files.len(), 2);
        assert!(saved.files.contains_key("main.hcl"), "keyed by file name, not the path shown: {saved:?}");
        // The same parts, seen from another directory, another unrelated variable: equal.
        let same = Fingerprint::of(
            &sources(&[("main.hcl", "a"), ("old.hcl", "b")]),
            &none,
            &names,
            &env(&[("IMAGE", "ami-1")]),
        );
        assert_eq!(same, saved);
        assert!(same.changes_since(&saved).is_empty());
        let now = Fingerprint::of(
            &sources(&[("main.hcl", "a2"), ("new.hcl", "c")]),
            &none,
            &names,
            &env(&[("IMAGE", "ami-2"), ("ZONE", "")]),
        );
        assert_eq!(
            now.changes_since(&saved),
            [
                "`main.hcl` changed",
                "`old.hcl` is gone",
                "`new.hcl` is new",
                "the environment variable `IMAGE` changed",
                "the environment variable `ZONE` is set now",
            ]
        );
        // A value is never kept, only its digest.
        assert!(!serde_json::to_string(&saved).unwrap().contains("ami-1"));
    }

    #[test]
    fn var_files_are_not_spec_files() {
        let s = sources(&[("main.hcl", "a"), ("prod.auto.vars.hcl", "n = 1")]);
        let f = Fingerprint::of(&s, &BTreeSet::from([1]), &[], &BTreeMap::new());
        assert_eq!(f.files.keys().collect::<Vec<_>>(), ["main.hcl"]);
    }
}
