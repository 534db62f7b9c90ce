//! Foreign YAML: files of other tools kept beside the specs (a kubeconfig, a CI workflow,
//! a compose file) are not part of the spec. A file is foreign when more of its top-level
//! keys are unlike gpuplan's (`apiVersion`, `on`, `services`) than are gpuplan's or near
//! misses of one (`gpu_pool:`, by the did-you-mean distance); a list at the top is judged
//! by its items' words the same way. The count, not "any gpuplan key", decides, because other
//! tools share words with gpuplan: a GitHub Actions workflow has `jobs:` beside `name:`
//! and `on:`. A tie is read as a spec: skipping a real spec file would plan its pools
//! away, while reading a foreign one only reports its keys.

use super::lower::TOP_LEVEL;
use super::tree::{Node, NodeKind};
use crate::diag::did_you_mean;

/// Does this document root belong to another tool?
pub(super) fn is_foreign(root: &Node) -> bool {
    let (mut ours, mut theirs) = (0usize, 0usize);
    for word in top_words(root) {
        match word {
            // A merge key only says how the file is written.
            Some("<<") => {}
            Some(w) if is_gpuplan_key(w) => ours += 1,
            _ => theirs += 1,
        }
    }
    theirs > ours
}

/// The words a file leads with: the keys of a top-level mapping; for a list at the top
/// (an Ansible playbook, or a spec mistakenly written as `- gpu_pools`), its plain items
/// and the keys of its mapping items; a lone value itself. `None`: a key that is not a
/// plain name.
fn top_words(root: &Node) -> Vec<Option<&str>> {
    fn key(k: &Node) -> Option<&str> {
        k.scalar().map(|s| s.value.as_str())
    }
    match &root.kind {
        NodeKind::Mapping { entries, .. } => entries.iter().map(|(k, _)| key(k)).collect(),
        NodeKind::Sequence { items, .. } => items
            .iter()
            .flat_map(|item| match &item.kind {
                NodeKind::Mapping { entries, .. } => entries.iter().map(|(k, _)| key(k)).collect(),
                NodeKind::Scalar(s) => vec![Some(s.value.as_str())],
                _ => vec![None],
            })
            .collect(),
        NodeKind::Scalar(_) if root.is_empty_null() => vec![],
        NodeKind::Scalar(s) => vec![Some(s.value.as_str())],
        NodeKind::Alias(_) => vec![None],
    }
}

/// A top-level key of gpuplan's, in its plural or singular spelling, or close to one.
fn is_gpuplan_key(key: &str) -> bool {
    let names = || TOP_LEVEL.iter().flat_map(|(plural, singular)| [*plural, *singular]);
    names().any(|n| n == key) || did_you_mean(key, names()).is_some()
}
