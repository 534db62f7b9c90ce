//! The spec language: HCL and YAML files → raw tree (spans) → typed, validated [`Spec`].
//!
//! - `hcl.rs`, `yaml.rs`: parse one file into the format-independent [`raw`] tree.
//! - `eval.rs`: evaluate expressions (references, interpolation, functions) over the
//!   values and scope of `value.rs`, which `functions/` shares.
//! - `decode.rs`: schema-driven decoding of blocks into the typed [`model`], reporting
//!   every problem (unknown attributes, types, ranges, references) in one pass.
//! - `validate.rs`: cross-resource checks against the catalog and the providers;
//!   `adopt_check.rs`: what `moved`, `removed` and `import` blocks get wrong statically.

pub mod adopt;
mod adopt_check;
pub mod backend;
pub mod blocks;
pub mod capacity_use;
pub mod decode;
pub mod encryption;
pub mod env;
pub mod eval;
pub mod fields;
pub mod fingerprint;
pub mod functions;
pub mod hcl;
pub mod health_block;
pub mod model;
pub(crate) mod names_hash;
mod order;
pub mod pool_blocks;
mod pool_capacity;
pub mod pool_hardware;
pub mod pool_health;
pub mod raw;
pub mod reservation;
pub mod secrets;
pub mod spanned;
mod taint;
#[cfg(test)]
mod tests;
pub mod validate;
mod validate_hardware;
pub mod value;
mod value_ser;
pub mod varfile;
pub mod variables;
pub mod yaml;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub use model::Spec;

use crate::diag::{Diagnostic, Diagnostics, Sources, Span};

/// Inputs to evaluation that do not come from spec files.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// `--var` pairs and `--var-file`s in command-line order (later wins), or values
    /// decided elsewhere ([`varfile::VarArg`]).
    pub vars: Vec<varfile::VarArg>,
    /// Read the `*.auto.vars.hcl` files beside the spec, below `vars` (not when the
    /// values are a saved plan's, which are all of them).
    pub auto_var_files: bool,
    /// The process environment (for `env("X")` and `GPUPLAN_VAR_<name>`).
    pub env: BTreeMap<String, String>,
    /// The names of `env` that loads with these options looked up.
    pub env_read: eval::EnvReads,
    /// Leave the parsed files' raw tree to the process's exit rather than free it on a
    /// thread of its own: for a command that ends once the spec is checked (`validate`),
    /// where freeing it (tens of thousands of allocations at 2,000 pools) only took a core
    /// from validation and the dependency graph.
    pub raw_tree_to_exit: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            vars: Vec::new(),
            auto_var_files: true,
            env: BTreeMap::new(),
            env_read: Default::default(),
            raw_tree_to_exit: false,
        }
    }
}

impl LoadOptions {
    /// `--var NAME=VALUE` pairs, in order.
    pub fn with_flags(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        LoadOptions {
            vars: pairs.into_iter().map(|(k, v)| varfile::VarArg::Flag(k, v)).collect(),
            ..LoadOptions::default()
        }
    }
}

/// The result of loading a spec directory: always has the sources (for rendering
/// diagnostics); `spec` holds whatever decoded, valid or not.
#[derive(Debug, Default)]
pub struct Loaded {
    pub sources: Sources,
    pub spec: Spec,
    pub diags: Diagnostics,
    pub files: Vec<PathBuf>,
    /// YAML files of other tools found beside the specs (a kubeconfig, a CI workflow),
    /// by display name: not part of the spec. Commands say once that they were skipped.
    pub skipped: Vec<String>,
    /// The environment variables the load looked up ([`eval::EnvReads`]), sorted.
    pub env_read: Vec<String>,
    /// The var files read ([`varfile`]) among `sources`: not spec files.
    pub var_files: BTreeSet<u32>,
}

/// Spec files of a directory: `*.hcl`, `*.yaml`, `*.yml`, sorted, not recursive; not var
/// files (`*.vars.hcl`, `*.vars.yaml`, `*.vars.yml`: [`varfile`]).
pub fn spec_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    listing(dir).map(|(spec, _)| spec)
}

/// A directory's spec files and its var files (`*.vars.hcl`, `*.vars.yaml`, the auto
/// ones), sorted, not recursive: what `gpuplan fmt` formats (as `terraform fmt` formats
/// `.tfvars`) and what a change of wakes `reconcile`.
pub fn spec_and_var_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if matches!(ext, "hcl" | "yaml" | "yml") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The spec files and the `*.auto.vars.hcl` files of a directory, each sorted: one
/// listing for both.
fn listing(dir: &Path) -> std::io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let (mut files, mut auto) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !matches!(ext, "hcl" | "yaml" | "yml") || !path.is_file() {
            continue;
        }
        if varfile::is_auto_var_file(&path) {
            auto.push(path);
        } else if !varfile::is_var_file(&path) {
            files.push(path);
        }
    }
    files.sort();
    auto.sort();
    Ok((files, auto))
}

/// The spec files of a directory, read and not yet parsed ([`read_dir`]).
#[derive(Debug, Default)]
pub struct ReadDir {
    pub sources: Sources,
    /// Files that could not be read, or are not UTF-8.
    diags: Diagnostics,
    /// Files kept (lossily) for rendering only: not UTF-8.
    unreadable: BTreeSet<u32>,
    files: Vec<PathBuf>,
    /// The `*.auto.vars.hcl` files beside them, not read yet.
    auto_var_files: Vec<PathBuf>,
    dir: PathBuf,
}

/// Read every spec file of `dir` ([`spec_files`]) as [`load_dir`] reads them.
pub fn read_dir(dir: &Path) -> std::io::Result<ReadDir> {
    let (files, auto_var_files) = listing(dir)?;
    let mut sources = Sources::default();
    let mut diags = Diagnostics::default();
    // Files that are not UTF-8 are kept (lossily) for rendering, but not parsed: their
    // replacement characters would only cause confusing follow-up errors.
    let mut unreadable = BTreeSet::new();
    for path in &files {
        let name = display_path(path);
        match std::fs::read(path) {
            Ok(bytes) => {
                let text = match String::from_utf8(bytes) {
                    Ok(t) => t,
                    Err(e) => {
                        let valid = e.utf8_error().valid_up_to();
                        let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
                        let id = sources.add(name, text);
                        unreadable.insert(id);
                        diags.push(
                            Diagnostic::error("gpuplan::spec::encoding", "file is not valid UTF-8")
                                .at(crate::diag::Span::new(id, valid, valid + 1), "invalid byte here")
                                .help("spec files must be UTF-8 text"),
                        );
                        continue;
                    }
                };
                sources.add(name, text);
            }
            Err(e) => diags.push(Diagnostic::error("gpuplan::spec::io", format!("cannot read `{name}`: {e}"))),
        }
    }
    Ok(ReadDir { sources, diags, unreadable, files, auto_var_files, dir: dir.to_path_buf() })
}

/// Read and load every spec file of `dir`.
pub fn load_dir(dir: &Path, opts: &LoadOptions) -> std::io::Result<Loaded> {
    read_dir(dir).map(|read| load_read(read, opts))
}

/// Load the spec files [`read_dir`] read.
pub fn load_read(read: ReadDir, opts: &LoadOptions) -> Loaded {
    load_read_beside(read, opts, None::<fn(&Spec)>).0
}

/// [`load_read`], running `beside` on the decoded spec on a thread of its own while the
/// spec is validated (the dependency graph's cycles: [`crate::graph::load_checked`]);
/// with what it returned (`None` when not given).
pub fn load_read_beside<R: Send>(
    read: ReadDir,
    opts: &LoadOptions,
    beside: Option<impl FnOnce(&Spec) -> R + Send>,
) -> (Loaded, Option<R>) {
    let ReadDir { sources, mut diags, unreadable, files, auto_var_files, dir } = read;
    let dir = dir.as_path();
    let auto: &[PathBuf] = if opts.auto_var_files { &auto_var_files } else { &[] };
    let (mut loaded, beside) = load_parsed(sources, opts, &unreadable, auto, beside);
    if !files.is_empty() && loaded.skipped.len() == files.len() {
        diags.push(
            Diagnostic::error(
                "gpuplan::spec::no_files",
                format!("no spec files in `{}`: every YAML file there belongs to another tool", display_path(dir)),
            )
            .help("gpuplan reads files whose top-level keys are its block kinds (`providers:`, `gpu_pools:`, ...); run `gpuplan init` for a starter spec, or pass `-C DIR`"),
        );
    }
    if files.is_empty() {
        diags.push(
            Diagnostic::error(
                "gpuplan::spec::no_files",
                format!("no spec files (*.hcl, *.yaml, *.yml) in `{}`", display_path(dir)),
            )
            .help("run `gpuplan init` to create a starter spec, or pass `-C DIR`"),
        );
    }
    diags.extend(std::mem::take(&mut loaded.diags));
    diags.sort();
    loaded.diags = diags;
    loaded.files = files.into_iter().filter(|p| !loaded.skipped.contains(&display_path(p))).collect();
    (loaded, beside)
}

/// Block kinds the providers are built from ([`crate::engine::providers::providers_part`]):
/// providers and the backend, and the variables and locals they may refer to.
const PROVIDERS_KINDS: &[&str] = &["provider", "gpuplan", "variable", "locals"];

/// The providers' part of the spec in `read`, decoded without the rest: every file is
/// parsed, but only its [`PROVIDERS_KINDS`] blocks are kept (one file at a time, so the
/// rest never stands whole in memory) and decoded. For `apply PLANFILE` when `read` is
/// what the plan was made from ([`fingerprint`]) and `opts` gives the plan's variable
/// values: that spec was valid, and its providers' part is what this returns.
///
/// `None` when the part alone cannot be trusted to be the whole spec's: var files to read
/// (`opts` must give every value), any problem
/// reported on the way (a provider or local that refers to a pool, which is left out
/// here), a file that could not be read or parsed, or a pool on Kubernetes (its cluster
/// is built as a provider too). The caller then loads the whole spec.
pub fn load_providers_part(read: &ReadDir, opts: &LoadOptions) -> Option<(Spec, Vec<String>)> {
    decode_providers_part(parse_providers_part(read)?, opts)
}

/// The providers' part of the spec in `read`, parsed and not yet decoded
/// ([`parse_providers_part`]).
#[derive(Debug)]
pub struct ProvidersPart {
    files: Vec<raw::File>,
    skipped: Vec<String>,
}

/// The parsing half of [`load_providers_part`], which needs no variable values: every
/// file parsed, its [`PROVIDERS_KINDS`] blocks kept. `None` as there.
pub fn parse_providers_part(read: &ReadDir) -> Option<ProvidersPart> {
    if !read.diags.items.is_empty() || read.files.is_empty() {
        return None;
    }
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for (id, f) in read.sources.files() {
        let (_, parsed, diags) = parse_file(id, f);
        if !diags.items.is_empty() {
            return None;
        }
        match parsed {
            Parsed::Spec(mut body, format) => {
                if body.blocks.iter().any(|b| b.kind.name == "gpu_pool" && on_kubernetes(&b.body)) {
                    return None;
                }
                body.blocks.retain(|b| PROVIDERS_KINDS.contains(&b.kind.name.as_str()));
                files.push(raw::File { file: id, format, body });
            }
            Parsed::Foreign(name) => skipped.push(name),
            Parsed::Unparsable => return None,
        }
    }
    (skipped.len() < read.files.len()).then_some(ProvidersPart { files, skipped })
}

/// The decoding half of [`load_providers_part`]: `None` as there.
pub fn decode_providers_part(part: ProvidersPart, opts: &LoadOptions) -> Option<(Spec, Vec<String>)> {
    if opts.auto_var_files {
        return None;
    }
    let inputs = varfile::without_files(&opts.vars)?;
    let mut diags = Diagnostics::default();
    let decoded = decode::decode(&part.files, opts, &inputs, &mut diags);
    diags.items.is_empty().then_some((decoded.spec, part.skipped))
}

/// Does a pool's body say it runs on a Kubernetes cluster (a `kubernetes` block or,
/// from YAML, attribute)?
fn on_kubernetes(body: &raw::Body) -> bool {
    body.blocks.iter().any(|b| b.kind.name == "kubernetes") || body.attrs.iter().any(|a| a.key.name == "kubernetes")
}

/// Parse, decode and validate already-read sources. Pure: no I/O.
pub fn load_sources(sources: Sources, opts: &LoadOptions) -> Loaded {
    load_parsed(sources, opts, &BTreeSet::new(), &[], None::<fn(&Spec)>).0
}

/// [`load_sources`], leaving out the files in `skip` (already reported as unreadable),
/// with the var files `auto` below `opts.vars`, and `beside` run during validation
/// ([`load_read_beside`]).
fn load_parsed<R: Send>(
    mut sources: Sources,
    opts: &LoadOptions,
    skip: &BTreeSet<u32>,
    auto: &[PathBuf],
    beside: Option<impl FnOnce(&Spec) -> R + Send>,
) -> (Loaded, Option<R>) {
    let mut diags = Diagnostics::default();
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let todo: Vec<(u32, &crate::diag::SourceFile)> = sources.files().filter(|(id, _)| !skip.contains(id)).collect();
    for (id, parsed, mut file_diags) in parse_files(&todo, two_threads(&todo)) {
        diags.items.append(&mut file_diags.items);
        match parsed {
            Parsed::Spec(body, format) => files.push(raw::File { file: id, format, body }),
            Parsed::Foreign(name) => skipped.push(name),
            Parsed::Unparsable => {}
        }
    }
    let spec_count = sources.files().count() as u32;
    let inputs = varfile::resolve(auto, &opts.vars, &mut sources, &mut diags);
    let var_files = (spec_count..sources.files().count() as u32).collect();
    let decoded = decode::decode(&files, opts, &inputs, &mut diags);
    // Empty files are fine (a fleet may be split oddly while being edited), but a spec
    // that declares nothing at all is almost certainly the wrong directory, and planning
    // it would propose deleting every pool the state holds.
    let declares_nothing = files.iter().all(|f| f.body.blocks.is_empty() && f.body.attrs.is_empty());
    let first_spec = files.first().map(|f| f.file);
    // The raw tree is as big as the typed spec again: freed before validating, on a
    // thread of its own (tens of thousands of allocations at 2,000 pools), or left to the
    // process's exit when the command ends after the check.
    if opts.raw_tree_to_exit {
        std::mem::forget(files);
    } else {
        crate::par::drop_aside(files);
    }
    let mut spec = decoded.spec;
    // A map filled one insert at a time keeps its nodes about half full; rebuilt from its
    // sorted entries it is packed (several MB less for 100,000 pools).
    spec.gpu_pools = std::mem::take(&mut spec.gpu_pools).into_iter().collect();
    validate::resolve_job_pools(&mut spec, &mut diags);
    let beside = std::thread::scope(|s| {
        let spec = &spec;
        let other = beside.map(|f| s.spawn(move || f(spec)));
        validate::validate(spec, &decoded.partial, &mut diags);
        adopt_check::check(spec, &decoded.partial, &mut diags);
        // A panic beside is a bug: surface it as one thread would.
        other.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    });
    drop(decoded.partial);
    if declares_nothing
        && skip.is_empty()
        && !diags.has_errors()
        && let Some((id, f)) = sources.files().find(|(id, _)| Some(*id) == first_spec)
    {
        diags.push(
            Diagnostic::warning("gpuplan::spec::empty", "the spec declares nothing")
                .at(Span::new(id, 0, 0), format!("`{}` holds no blocks", f.name))
                .help("add a `provider` and a `gpu_pool` block (see examples/quickstart); planning an empty spec proposes deleting every pool the state holds"),
        );
    }
    diags.sort();
    (Loaded { sources, spec, diags, files: vec![], skipped, env_read: opts.env_read.names(), var_files }, beside)
}

/// One file's parse.
#[derive(Debug, PartialEq)]
enum Parsed {
    Spec(raw::Body, raw::Format),
    /// A YAML file of another tool (by display name).
    Foreign(String),
    /// Syntax errors only (reported in the file's diagnostics).
    Unparsable,
}

/// A spec this size or smaller is parsed on two threads when it has several files; a
/// larger one on one, file after file: at 100,000 pools two files' trees at once only
/// raised the peak memory, while at 2,000 pools the parse is most of `validate`.
const PARSE_TWO_UP_TO: usize = 8 << 20;

/// Whether the files are parsed on two threads: several files, [`PARSE_TWO_UP_TO`] bytes
/// or fewer in all.
fn two_threads(todo: &[(u32, &crate::diag::SourceFile)]) -> bool {
    todo.len() >= 2 && todo.iter().map(|(_, f)| f.text.len()).sum::<usize>() <= PARSE_TWO_UP_TO
}

/// Parse each file on its own (each with its own diagnostics), in file order, on one
/// thread or two (the same result).
fn parse_files(todo: &[(u32, &crate::diag::SourceFile)], two: bool) -> Vec<(u32, Parsed, Diagnostics)> {
    if !two || todo.len() < 2 {
        return todo.iter().map(|&(id, f)| parse_file(id, f)).collect();
    }
    let size: usize = todo.iter().map(|(_, f)| f.text.len()).sum();
    // Two runs of files of about half the bytes each; the first on this thread.
    let mut half = 0;
    let mut acc = 0;
    while half < todo.len() - 1 && acc < size / 2 {
        acc += todo[half].1.text.len();
        half += 1;
    }
    let (first, second) = todo.split_at(half.max(1));
    debug_assert!(!second.is_empty());
    std::thread::scope(|s| {
        let other = s.spawn(|| second.iter().map(|&(id, f)| parse_file(id, f)).collect::<Vec<_>>());
        let mut out: Vec<_> = first.iter().map(|&(id, f)| parse_file(id, f)).collect();
        // A panic while parsing is a bug: surface it as one thread would.
        out.extend(other.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        out
    })
}

fn parse_file(id: u32, f: &crate::diag::SourceFile) -> (u32, Parsed, Diagnostics) {
    let mut diags = Diagnostics::default();
    let is_yaml = f.name.ends_with(".yaml") || f.name.ends_with(".yml");
    let parsed = if is_yaml {
        match yaml::parse_in_folder(id, &f.text, &mut diags) {
            yaml::FolderFile::Spec(Some(body)) => Parsed::Spec(body, raw::Format::Yaml),
            yaml::FolderFile::Spec(None) => Parsed::Unparsable,
            yaml::FolderFile::Foreign => Parsed::Foreign(f.name.clone()),
        }
    } else {
        match hcl::parse(id, &f.text, &mut diags) {
            Some(body) => Parsed::Spec(body, raw::Format::Hcl),
            None => Parsed::Unparsable,
        }
    };
    (id, parsed, diags)
}

/// A path as users should see it: relative to the working directory when possible.
pub fn display_path(path: &Path) -> String {
    let cwd = std::env::current_dir().ok();
    let shown = cwd.as_deref().and_then(|c| path.strip_prefix(c).ok()).unwrap_or(path);
    if shown.as_os_str().is_empty() { ".".to_string() } else { shown.display().to_string() }
}
