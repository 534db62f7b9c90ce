//! Each static check of `moved`, `removed` and `import` blocks, and the blocks that failed
//! to decode, which count as declared.

use crate::diag::Sources;
use crate::spec::load_sources;

const POOL: &str = r#"
provider "sim" {
  region = "us-east-1"
}

gpu_pool "train" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    min     = 0
    desired = 1
    max     = 2
  }
}
"#;

/// The error messages of `POOL` plus `extra`, in the order `validate` prints them.
fn errors(extra: &str) -> Vec<String> {
    let mut sources = Sources::default();
    sources.add("main.hcl", format!("{POOL}{extra}"));
    let loaded = load_sources(sources, &Default::default());
    loaded
        .diags
        .items
        .iter()
        .filter(|d| d.severity == crate::diag::Severity::Error)
        .map(|d| d.message.clone())
        .collect()
}

#[test]
fn an_import_into_an_undeclared_pool_is_reported_with_the_name_it_meant() {
    let errs = errors("import {\n  to  = gpu_pool.trian\n  ids = [\"i-1\"]\n}\n");
    assert_eq!(errs, ["`import` into `gpu_pool.trian`, which the spec does not declare"]);
    assert!(errors("import {\n  to  = gpu_pool.train\n  ids = [\"i-1\"]\n}\n").is_empty());
}

#[test]
fn an_import_into_a_pool_whose_block_failed_is_not_reported_again() {
    let pool = &POOL[POOL.find("gpu_pool").expect("a pool")..];
    let broken = pool.replace("gpu_pool \"train\"", "gpu_pool \"old\"").replace("max     = 2", "max     = \"two\"");
    let errs = errors(&format!("{broken}import {{\n  to  = gpu_pool.old\n  ids = [\"i-1\"]\n}}\n"));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("`max`"), "{errs:?}");
}

#[test]
fn a_removed_block_for_a_declared_resource_is_reported() {
    let errs = errors("removed {\n  from = gpu_pool.train\n}\n");
    assert_eq!(errs, ["`gpu_pool.train` is in a `removed` block but still declared in the spec"]);
    assert!(errors("removed {\n  from = gpu_pool.old\n}\n").is_empty());
}

#[test]
fn a_cycle_of_moved_blocks_is_reported_once() {
    let moves = "moved {\n  from = gpu_pool.a\n  to   = gpu_pool.b\n}\nmoved {\n  from = gpu_pool.b\n  to   = gpu_pool.c\n}\nmoved {\n  from = gpu_pool.c\n  to   = gpu_pool.a\n}\n";
    let errs = errors(moves);
    assert_eq!(errs, ["the `moved` blocks form a cycle: `gpu_pool.a` → `gpu_pool.b` → `gpu_pool.c` → `gpu_pool.a`"]);
    // A chain is fine; so is a key-less move followed by a keyed one elsewhere.
    assert!(errors("moved {\n  from = gpu_pool.a\n  to   = gpu_pool.b\n}\nmoved {\n  from = gpu_pool.b\n  to   = gpu_pool.train\n}\n").is_empty());
    // Every instance of `a` moves to `b`, and `b[0]` back to `a[0]`: a cycle through keys.
    let keyed = "moved {\n  from = gpu_pool.a\n  to   = gpu_pool.b\n}\nmoved {\n  from = gpu_pool.b[0]\n  to   = gpu_pool.a[0]\n}\n";
    assert_eq!(errors(keyed).len(), 1, "{:?}", errors(keyed));
}
