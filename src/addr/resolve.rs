//! What a user typed, as the addresses it means among those that exist (the spec's, the
//! state's, a command's own list): a full address (`gpu_pool.train`, `job.eval[2]`;
//! without a key, every instance) or, where only one kind has the name, the name alone
//! (`train`, `eval[2]`). One resolver for every command that takes addresses
//! (`--target`, `state show|rm|mv`, `jobs ...`, `import`), so they all accept the same
//! spellings and refuse the same mistakes, with the closest address that exists.

use super::{Address, AddressError, Kind};

/// What an input resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The address meant: as typed, or a short name with its kind (no key: every instance).
    pub address: Address,
    /// The known addresses it selects, in the order given.
    pub matches: Vec<Address>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Neither an address nor a name.
    #[error(transparent)]
    Invalid(#[from] AddressError),
    /// Nothing known has that address or name.
    #[error("no `{input}`")]
    Unknown { input: String, suggestion: Option<Address> },
    /// A name alone that more than one kind has.
    #[error("`{input}` names more than one resource")]
    Ambiguous { input: String, candidates: Vec<Address> },
}

/// Resolve `input` against the `known` addresses.
pub fn resolve(input: &str, known: &[Address]) -> Result<Resolved, ResolveError> {
    let input = input.trim();
    let selecting = |a: &Address| known.iter().filter(|k| k.matches_target(a)).cloned().collect::<Vec<_>>();
    if has_kind(input) {
        let address: Address = input.parse()?;
        let matches = selecting(&address);
        if matches.is_empty() {
            let suggestion = suggest_for(&address, known);
            return Err(ResolveError::Unknown { input: input.to_string(), suggestion });
        }
        return Ok(Resolved { address, matches });
    }
    // A name alone: parsed as if it had a kind, which checks the name and the key.
    let shape: Address = format!("{}.{input}", Kind::GpuPool).parse().map_err(|e: AddressError| AddressError {
        input: input.to_string(),
        reason: if input.contains('.') {
            "unknown kind (expected gpu_pool, quota, job_template, job or autoscaler)"
        } else {
            e.reason
        },
    })?;
    let mut found: Vec<Resolved> = Kind::ALL
        .into_iter()
        .map(|kind| Address { kind, ..shape.clone() })
        .map(|address| Resolved { matches: selecting(&address), address })
        .filter(|r| !r.matches.is_empty())
        .collect();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => {
            let names: Vec<&str> = known.iter().map(|k| k.name.as_str()).collect();
            let near = crate::diag::did_you_mean(&shape.name, names);
            let suggestion = near.and_then(|n| known.iter().find(|k| k.name == n)).map(Address::base);
            Err(ResolveError::Unknown { input: input.to_string(), suggestion })
        }
        _ => Err(ResolveError::Ambiguous {
            input: input.to_string(),
            candidates: found.into_iter().map(|r| r.address).collect(),
        }),
    }
}

/// Does `input` start with a kind (`gpu_pool.`)? A name never holds a `.` before its key.
fn has_kind(input: &str) -> bool {
    let head = input.split('[').next().unwrap_or(input);
    head.contains('.')
}

/// The closest known address to a full one that exists nowhere: the same name under
/// another kind (`gpu_pool.eval` for `job.eval`), else the closest name of the same kind.
fn suggest_for(address: &Address, known: &[Address]) -> Option<Address> {
    if let Some(other) = known.iter().find(|k| k.name == address.name && k.kind != address.kind) {
        return Some(other.base());
    }
    let same_kind: Vec<&Address> = known.iter().filter(|k| k.kind == address.kind).collect();
    let near = crate::diag::did_you_mean(&address.name, same_kind.iter().map(|k| k.name.as_str()))?;
    same_kind.into_iter().find(|k| k.name == near).map(Address::base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Vec<Address> {
        ["gpu_pool.train", "gpu_pool.starter", "quota.starter", "job.eval[0]", "job.eval[1]"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect()
    }

    fn addr(s: &str) -> Address {
        s.parse().unwrap()
    }

    #[test]
    fn full_addresses_select_themselves_or_every_instance() {
        let r = resolve("gpu_pool.train", &known()).unwrap();
        assert_eq!((r.address, r.matches), (addr("gpu_pool.train"), vec![addr("gpu_pool.train")]));
        let r = resolve("job.eval", &known()).unwrap();
        assert_eq!(r.matches, vec![addr("job.eval[0]"), addr("job.eval[1]")]);
        assert_eq!(resolve("job.eval[1]", &known()).unwrap().matches, vec![addr("job.eval[1]")]);
    }

    #[test]
    fn a_name_alone_resolves_where_only_one_kind_has_it() {
        assert_eq!(resolve("train", &known()).unwrap().address, addr("gpu_pool.train"));
        let r = resolve("eval[0]", &known()).unwrap();
        assert_eq!((r.address, r.matches), (addr("job.eval[0]"), vec![addr("job.eval[0]")]));
        let e = resolve("starter", &known()).unwrap_err();
        assert_eq!(
            e,
            ResolveError::Ambiguous {
                input: "starter".into(),
                candidates: vec![addr("gpu_pool.starter"), addr("quota.starter")]
            }
        );
    }

    #[test]
    fn unknown_addresses_suggest_the_closest_that_exists() {
        let unknown = |input: &str| match resolve(input, &known()) {
            Err(ResolveError::Unknown { suggestion, .. }) => suggestion.map(|a| a.to_string()),
            other => panic!("{input}: {other:?}"),
        };
        assert_eq!(unknown("gpu_pool.trian").as_deref(), Some("gpu_pool.train"));
        assert_eq!(unknown("job.train").as_deref(), Some("gpu_pool.train"), "the same name, another kind");
        assert_eq!(unknown("trian").as_deref(), Some("gpu_pool.train"));
        assert_eq!(unknown("evla").as_deref(), Some("job.eval"));
        assert_eq!(unknown("gpu_pool.nope"), None, "a shared `gpu_pool.` is no likeness");
        assert_eq!(unknown("job.eval[7]").as_deref(), Some("job.eval"));
    }

    #[test]
    fn what_is_no_address_says_why() {
        for input in ["pool.train", "gpu_pool.1x", "x[", "9lives", ""] {
            assert!(matches!(resolve(input, &known()), Err(ResolveError::Invalid(_))), "{input}");
        }
    }
}
