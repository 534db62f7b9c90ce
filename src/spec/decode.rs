//! The decoding driver: raw blocks from every file → one typed [`Spec`].
//!
//! 1. Collect blocks: unknown kinds, wrong labels and duplicate names are reported.
//! 2. Variables get their values (`--var`, `--var-file` and `*.auto.vars.hcl`, then
//!    `GPUPLAN_VAR_<name>`, then `default`).
//! 3. Locals and resources are ordered by the references in their expressions; cycles
//!    are reported with every member labelled, and their members skipped.
//! 4. In that order, locals are evaluated and resources expanded (`count`/`for_each`)
//!    and decoded by `blocks.rs`. A failed item poisons references to it, so one mistake
//!    is reported once, not once per dependent.
//! 5. Outputs are evaluated last.
//!
//! Steps 2 and 3 live in `variables.rs` and `order.rs`; this file drives them, evaluates
//! and decodes (with `blocks.rs`).

use std::collections::{BTreeMap, BTreeSet};

use crate::addr::{Address, InstanceKey, Kind};
use crate::diag::{Diagnostic, Diagnostics, Span, did_you_mean};
use crate::spec::eval::{Scope, Value};
use crate::spec::fields::{Cx, Fields, Reported, What, enum_error, type_error};
use crate::spec::model::*;
use crate::spec::order::{Item, Order, collect_exprs, dependency_order};
use crate::spec::raw::{self, Block, Expr, Ident, head, label};
use crate::spec::taint::Tainted;
use crate::spec::varfile::VarInput;
pub use crate::spec::variables::input_value;
use crate::spec::variables::{unset_variables, variables};
use crate::spec::{LoadOptions, Spec};
use crate::spec::{blocks, pool_blocks};

const BLOCK_KINDS: &[&str] = &[
    "provider",
    "gpu_pool",
    "quota",
    "job_template",
    "job",
    "autoscaler",
    "reservation",
    "variable",
    "locals",
    "output",
    "gpuplan",
    "moved",
    "removed",
    "import",
];

#[cfg(test)]
mod tests;

/// Most instances one `count`/`for_each` may create.
const MAX_INSTANCES: u64 = 100_000;

/// What decoding produced: the spec, plus what is known of the blocks that failed.
#[derive(Debug, Default)]
pub struct Decoded {
    pub spec: Spec,
    pub partial: Partial,
}

/// Blocks that failed to decode, as far as they are known: still declared for the blocks
/// that refer to them (one mistake is reported once, at its cause), and checked against
/// the catalog where their identity decoded.
#[derive(Debug, Default)]
pub struct Partial {
    /// Pools whose provider, GPU and GPUs per node decoded.
    pub pools: BTreeMap<Address, GpuPool>,
    /// Provider blocks by the name pools use, with what decoded; `kind` is `None` where
    /// the pools on it cannot be checked (an unknown kind, a region that failed).
    pub providers: BTreeMap<String, Provider>,
    /// Resource blocks that failed (`gpu_pool.train`, without instance keys), or sit in
    /// a reference cycle.
    pub failed: BTreeSet<Address>,
}

pub fn decode(files: &[raw::File], opts: &LoadOptions, inputs: &[VarInput], diags: &mut Diagnostics) -> Decoded {
    decode_with(files, opts, inputs, diags, true)
}

/// [`decode`]; `aside`: whether runs of pools nothing reads may be decoded on several
/// threads ([`pools_aside`]; the same result either way, which a test checks).
fn decode_with(
    files: &[raw::File],
    opts: &LoadOptions,
    inputs: &[VarInput],
    diags: &mut Diagnostics,
    aside: bool,
) -> Decoded {
    let mut spec = Spec::default();
    let mut partial = Partial::default();
    let collected = collect(files, diags);
    let yaml_files: BTreeSet<u32> = files.iter().filter(|f| f.format == raw::Format::Yaml).map(|f| f.file).collect();

    // Each kind's names built at once (sorted, then packed), not inserted one by one.
    let mut names: BTreeMap<Kind, Vec<&str>> = BTreeMap::new();
    for (kind, b) in &collected.resources {
        names.entry(*kind).or_default().push(label(b));
    }
    let declared: BTreeMap<Kind, BTreeSet<String>> =
        names.into_iter().map(|(k, n)| (k, n.into_iter().map(str::to_string).collect())).collect();

    spec.backend = crate::spec::backend::decode(&collected.settings, diags);
    spec.encryption = crate::spec::encryption::decode(&collected.settings, diags);
    let vars = variables(&collected.variables, opts, inputs, diags, &mut spec);
    let order = dependency_order(&collected.locals, &collected.resources, &collected.outputs, diags);
    let mut poisoned = unset_variables(&collected.variables, &vars);
    poisoned.extend(order.cyclic.iter().cloned());
    let env = Env { vars: &vars, declared: &declared, opts, yaml_files: &yaml_files, aside };
    let (locals, resources) = evaluate(&order, &env, &mut poisoned, diags, &mut spec, &mut partial);

    partial.failed = poisoned.iter().filter_map(|key| key.parse::<Address>().ok()).collect();
    let scope = || Scope {
        vars: Some(&vars),
        locals: Some(&locals),
        resources: Some(&resources),
        declared: Some(&declared),
        poisoned: Some(&poisoned),
        env: Some(&opts.env),
        env_read: Some(&opts.env_read),
        ..Scope::default()
    };
    let sensitive = spec.variables.iter().filter(|(_, v)| v.sensitive.value).map(|(n, _)| n.clone());
    let tainted = Tainted::find(sensitive, &collected.locals, &collected.resources, |b| label(b).to_string());
    spec.sensitive = tainted.resource_paths();
    for (b, reads) in collected.outputs.iter().zip(order.output_reads) {
        let mut cx = Cx { scope: scope(), diags, declared: &declared, yaml_files: &yaml_files };
        if let Some(o) = output(&mut cx, b, reads, &tainted) {
            spec.outputs.insert(label(b).to_string(), o);
        }
    }
    for b in &collected.adopt {
        let mut cx = Cx {
            scope: Scope {
                vars: Some(&vars),
                locals: Some(&locals),
                poisoned: Some(&poisoned),
                env: Some(&opts.env),
                env_read: Some(&opts.env_read),
                ..Scope::default()
            },
            diags,
            declared: &declared,
            yaml_files: &yaml_files,
        };
        crate::spec::adopt::decode(&mut cx, b, &mut spec);
    }
    Decoded { spec, partial }
}

/// What every evaluation of one decode reads besides the values evaluated so far.
struct Env<'a> {
    vars: &'a BTreeMap<String, Value>,
    declared: &'a BTreeMap<Kind, BTreeSet<String>>,
    opts: &'a LoadOptions,
    yaml_files: &'a BTreeSet<u32>,
    /// Whether runs of pools may be decoded on several threads ([`pools_aside`]).
    aside: bool,
}

/// Locals and resources in dependency order: each local's value and each resource's,
/// the resources decoded into `spec` (or `partial`). An item that fails is poisoned, so
/// what refers to it is not reported again. Returns the locals' and resources' values.
/// A run of pools nothing reads is decoded on the machine's cores ([`pools_aside`]).
fn evaluate(
    order: &Order<'_>,
    env: &Env<'_>,
    poisoned: &mut BTreeSet<String>,
    diags: &mut Diagnostics,
    spec: &mut Spec,
    partial: &mut Partial,
) -> (BTreeMap<String, Value>, BTreeMap<(Kind, String), Value>) {
    let mut values = Values::default();
    let mut at = 0;
    while at < order.order.len() {
        let run = unread_pools(order, &order.order[at..]);
        if env.aside
            && run.len() >= POOLS_ASIDE_MIN
            && let Some(outs) = pools_aside(order, run, env, &values, poisoned)
        {
            merge_aside(outs, diags, spec, partial, &mut values);
            at += run.len();
            continue;
        }
        evaluate_item(order, order.order[at], env, &mut values, poisoned, diags, spec, partial);
        at += 1;
    }
    (values.locals, values.resources)
}

/// The threads' shares of a run of pools ([`pools_aside`]) added in order: each map
/// built at once from every share's entries and merged in one pass, rather than each
/// share merged in a pass over the whole map (or inserted key by key).
fn merge_aside(outs: Vec<Aside>, diags: &mut Diagnostics, spec: &mut Spec, partial: &mut Partial, values: &mut Values) {
    let (mut pools, mut broken, mut read) = (Vec::new(), Vec::new(), Vec::new());
    for out in outs {
        let Aside { spec: s, partial: p, diags: mut d, values: v, .. } = out;
        diags.items.append(&mut d.items);
        pools.extend(s.gpu_pools);
        broken.extend(p.pools);
        read.extend(v);
    }
    merge_into(&mut spec.gpu_pools, pools);
    merge_into(&mut partial.pools, broken);
    merge_into(&mut values.resources, read);
}

/// `map` with `entries` added (a later entry wins, as with `insert`): the entries made into
/// a map at once (sorted, then built), then merged in one pass.
fn merge_into<K: Ord, V>(map: &mut BTreeMap<K, V>, entries: Vec<(K, V)>) {
    let mut added: BTreeMap<K, V> = entries.into_iter().collect();
    if map.is_empty() {
        *map = added;
    } else {
        map.append(&mut added);
    }
}

/// The locals' and resources' values evaluated so far.
#[derive(Default)]
struct Values {
    locals: BTreeMap<String, Value>,
    resources: BTreeMap<(Kind, String), Value>,
}

impl Values {
    fn scope<'a>(&'a self, env: &Env<'a>, poisoned: &'a BTreeSet<String>) -> Scope<'a> {
        Scope {
            vars: Some(env.vars),
            locals: Some(&self.locals),
            resources: Some(&self.resources),
            declared: Some(env.declared),
            poisoned: Some(poisoned),
            env: Some(&env.opts.env),
            env_read: Some(&env.opts.env_read),
            ..Scope::default()
        }
    }
}

/// Evaluate the local or decode the resource `order.items[i]` (see [`evaluate`]).
#[allow(clippy::too_many_arguments)]
fn evaluate_item(
    order: &Order<'_>,
    i: usize,
    env: &Env<'_>,
    values: &mut Values,
    poisoned: &mut BTreeSet<String>,
    diags: &mut Diagnostics,
    spec: &mut Spec,
    partial: &mut Partial,
) {
    let item = order.items[i];
    let mut cx = Cx { scope: values.scope(env, poisoned), diags, declared: env.declared, yaml_files: env.yaml_files };
    let done = match item {
        Item::Local(id, expr) => cx.eval(expr).map(|v| {
            spec.locals.insert(id.name.clone(), Spanned::new(v.clone(), expr.span));
            values.locals.insert(id.name.clone(), v);
        }),
        Item::Resource(kind, block) => {
            resource(&mut cx, kind, block, &order.refs[i], order.referenced[i], spec, partial).map(|v| {
                // Unreferenced resources stay as `Null` keys: "did you mean" lists them.
                values.resources.insert((kind, label(block).to_string()), v);
            })
        }
    };
    if done.is_err() {
        poisoned.insert(item.key());
    }
}

/// The fewest pools in a run worth decoding on several threads, and the fewest per thread.
const POOLS_ASIDE_MIN: usize = 256;

/// The longest run at the start of `rest` (indexes into `order.items`) of pools whose
/// values nothing reads: no pool of the run reads another's value, so their decoding
/// depends only on what was evaluated before the run.
fn unread_pools<'o>(order: &Order<'_>, rest: &'o [usize]) -> &'o [usize] {
    let n = rest
        .iter()
        .take_while(|&&i| matches!(order.items[i], Item::Resource(Kind::GpuPool, _)) && !order.referenced[i])
        .count();
    &rest[..n]
}

/// What one thread's share of a run of pools decoded to.
#[derive(Default)]
struct Aside {
    spec: Spec,
    partial: Partial,
    diags: Diagnostics,
    /// The value each pool's references see (`Null`: nothing reads them).
    values: Vec<((Kind, String), Value)>,
    failed: bool,
}

/// Decode a run of pools nothing reads ([`unread_pools`]) on the machine's cores, each
/// thread into its own spec and diagnostics, returned in the run's order. `None` when a
/// pool failed: a failure poisons the pool, which a later pool of the run may name (its
/// `depends_on`), so the caller decodes the run again one pool after another, as always.
/// When none fails, nothing a pool's decoding reads changes during the run: the result is
/// one thread's.
fn pools_aside(
    order: &Order<'_>,
    run: &[usize],
    env: &Env<'_>,
    values: &Values,
    poisoned: &BTreeSet<String>,
) -> Option<Vec<Aside>> {
    let outs = crate::par::runs_in_order(run, crate::par::cores(), POOLS_ASIDE_MIN / 2, |share| {
        let mut out = Aside::default();
        for &i in share {
            let Item::Resource(kind, block) = order.items[i] else { continue };
            let mut cx = Cx {
                scope: values.scope(env, poisoned),
                diags: &mut out.diags,
                declared: env.declared,
                yaml_files: env.yaml_files,
            };
            match resource(&mut cx, kind, block, &order.refs[i], false, &mut out.spec, &mut out.partial) {
                Ok(v) => out.values.push(((kind, label(block).to_string()), v)),
                Err(Reported) => {
                    out.failed = true;
                    break;
                }
            }
        }
        out
    });
    (!outs.iter().any(|o| o.failed)).then_some(outs)
}

#[derive(Default)]
struct Collected<'r> {
    /// `gpuplan { backend ... }` blocks.
    settings: Vec<&'r Block>,
    variables: Vec<&'r Block>,
    outputs: Vec<&'r Block>,
    /// `moved`, `removed` and `import` blocks (`spec::adopt`).
    adopt: Vec<&'r Block>,
    locals: Vec<(&'r Ident, &'r Expr)>,
    resources: Vec<(Kind, &'r Block)>,
}

/// Gather blocks from every file; report unknown kinds, bad labels and duplicates.
fn collect<'r>(files: &'r [raw::File], diags: &mut Diagnostics) -> Collected<'r> {
    let mut c = Collected::default();
    // By kind and name as written: no string is copied per block.
    let mut seen: BTreeMap<(&str, &str), Span> = BTreeMap::new();
    for file in files {
        for a in &file.body.attrs {
            diags.push(
                Diagnostic::error(
                    "gpuplan::spec::top_level_attribute",
                    format!("`{}` cannot be set at the top level", a.key.name),
                )
                .at(a.key.span, "not inside a block")
                .help(format!("put it in a `locals {{ ... }}` block and refer to it as `local.{}`", a.key.name)),
            );
        }
        for b in &file.body.blocks {
            let kind = b.kind.name.as_str();
            if !BLOCK_KINDS.contains(&kind) {
                let mut d = Diagnostic::error("gpuplan::spec::unknown_block", format!("unknown block type `{kind}`"))
                    .at(b.kind.span, "not a gpuplan block");
                let singular = kind.strip_suffix('s').filter(|s| BLOCK_KINDS.contains(s));
                d = match (singular, did_you_mean(kind, BLOCK_KINDS.iter().copied())) {
                    (Some(s), _) if file.format == raw::Format::Hcl => {
                        d.help(format!("HCL blocks are singular: `{s} \"NAME\" {{ ... }}`"))
                    }
                    (_, Some(s)) => d.help(format!("did you mean `{s}`?")),
                    _ => d.help(format!("block types: {}", BLOCK_KINDS.join(", "))),
                };
                diags.push(d);
                continue;
            }
            let unlabelled = kind == "locals" || kind == "gpuplan" || crate::spec::adopt::KINDS.contains(&kind);
            let want_labels = usize::from(!unlabelled);
            if b.labels.len() != want_labels {
                let span = b.labels.get(want_labels).map(|l| l.span).unwrap_or(b.kind.span);
                let d = if want_labels == 0 {
                    Diagnostic::error("gpuplan::spec::labels", format!("a `{kind}` block takes no name"))
                        .at(span, "remove this label")
                } else if b.labels.is_empty() {
                    let example = if kind == "provider" { "\"sim\"" } else { "\"NAME\"" };
                    Diagnostic::error("gpuplan::spec::labels", format!("a `{kind}` block needs a name"))
                        .at(span, "name missing")
                        .help(format!("write `{kind} {example} {{ ... }}`"))
                } else {
                    Diagnostic::error("gpuplan::spec::labels", format!("a `{kind}` block takes exactly one name"))
                        .at(span, "extra label")
                };
                diags.push(d);
                continue;
            }
            if kind == "gpuplan" {
                c.settings.push(b);
                continue;
            }
            if crate::spec::adopt::KINDS.contains(&kind) {
                c.adopt.push(b);
                continue;
            }
            if kind == "locals" {
                for inner in &b.body.blocks {
                    diags.push(
                        Diagnostic::error("gpuplan::spec::locals", "blocks are not allowed inside `locals`")
                            .at(inner.kind.span, "not an attribute")
                            .help("write `name = value`"),
                    );
                }
                for a in &b.body.attrs {
                    if let Some(prev) = seen.insert(("local", &a.key.name), a.key.span) {
                        diags.push(duplicate("local value", &a.key.name, a.key.span, prev));
                    } else {
                        c.locals.push((&a.key, &a.value));
                    }
                }
                continue;
            }
            let name = label(b);
            if kind != "provider" && !crate::addr::is_ident(name) {
                diags.push(
                    Diagnostic::error("gpuplan::spec::name", format!("{name:?} is not a valid {kind} name"))
                        .at(b.labels[0].span, "invalid name")
                        .help("names start with a letter or `_` and hold letters, digits, `_` and `-`"),
                );
                continue;
            }
            // Providers may repeat with different aliases; checked after decoding.
            if kind != "provider"
                && let Some(prev) = seen.insert((kind, name), b.labels[0].span)
            {
                diags.push(duplicate(kind, name, b.labels[0].span, prev));
                continue;
            }
            match kind {
                "variable" => c.variables.push(b),
                "output" => c.outputs.push(b),
                _ => c.resources.push((Kind::parse(kind).unwrap_or(Kind::GpuPool), b)),
            }
        }
    }
    c
}

fn duplicate(kind: &str, name: &str, span: Span, prev: Span) -> Diagnostic {
    Diagnostic::error("gpuplan::spec::duplicate", format!("{kind} {name:?} is declared more than once"))
        .at(span, "declared again here")
        .at(prev, "first declared here")
        .help("names must be unique across all spec files; rename or remove one")
}

/// One `output` block: its value, description and sensitivity (`sensitive = true`, or a
/// value that reads a sensitive variable, or a local or resource derived from one).
/// `None` when it failed (reported).
fn output(cx: &mut Cx<'_, '_>, b: &Block, reads: Vec<Address>, tainted: &Tainted) -> Option<Output> {
    let mut f = Fields::from_body(format!("output {:?}", label(b)), head(b), &b.body, cx.diags);
    let value = f.value(cx, "value");
    let value = f.required(cx, value, "value", "gpu_pool.NAME.gpu");
    let description = f.string(cx, "description");
    let sensitive = f.bool(cx, "sensitive");
    let mut sensitive = f.or(sensitive, false);
    let failed = f.failed;
    f.finish(cx, &["value", "description", "sensitive"]);
    let mut exprs = Vec::new();
    collect_exprs(&b.body, &mut exprs);
    sensitive.value |= tainted.reads(&exprs);
    match (value, failed) {
        (Some(value), false) => Some(Output { value, description, sensitive, reads }),
        _ => None,
    }
}

/// Expand and decode one resource block; returns the value other blocks see (`Null`
/// unless `keep`: nothing refers to it).
#[allow(clippy::too_many_arguments)]
fn resource(
    cx: &mut Cx<'_, '_>,
    kind: Kind,
    b: &Block,
    refs: &[Spanned<Address>],
    keep: bool,
    spec: &mut Spec,
    partial: &mut Partial,
) -> Result<Value, Reported> {
    let name = label(b);
    let Expansion { instances, count: meta_count, for_each: meta_for_each } = expand(cx, kind, b)?;

    let mut values: Vec<(Option<InstanceKey>, Value)> = Vec::new();
    let mut failed = false;
    for (key, each) in instances {
        cx.scope.count_index = match &key {
            Some(InstanceKey::Int(i)) if meta_count.is_some() => Some(*i),
            _ => None,
        };
        cx.scope.each = each.map(|(k, v)| (k, std::borrow::Cow::Owned(v)));
        let mut addr = Address::new(kind, name);
        addr.key = key.clone();
        let f = Fields::from_body(What::Resource(kind, name, key.clone()), head(b), &b.body, cx.diags);
        let mut broken = None;
        let fix_meta = |m: &mut Meta| {
            m.key = key.clone();
            m.count = meta_count.clone();
            m.for_each = meta_for_each.clone();
            m.references = refs.to_vec();
        };
        let value = match kind {
            Kind::Provider => decode_provider(f, cx, b, spec, &mut partial.providers),
            Kind::GpuPool => {
                store(pool_blocks::gpu_pool(f, cx, &mut broken), &addr, &mut spec.gpu_pools, keep, fix_meta)
            }
            Kind::Quota => store(blocks::quota(f, cx), &addr, &mut spec.quotas, keep, fix_meta),
            Kind::JobTemplate => store(blocks::job_template(f, cx), &addr, &mut spec.job_templates, keep, fix_meta),
            Kind::Job => store(blocks::job(f, cx), &addr, &mut spec.jobs, keep, fix_meta),
            Kind::Autoscaler => store(blocks::autoscaler(f, cx), &addr, &mut spec.autoscalers, keep, fix_meta),
            Kind::Reservation => {
                store(super::reservation::decode(f, cx), &addr, &mut spec.reservations, keep, fix_meta)
            }
        };
        if let Some(p) = broken.take() {
            partial.pools.insert(addr.clone(), p);
        }
        match value {
            Ok(v) => values.push((key, v)),
            Err(Reported) => failed = true,
        }
    }
    cx.scope.count_index = None;
    cx.scope.each = None;
    if failed {
        return Err(Reported);
    }
    Ok(instances_value(meta_count.is_some(), meta_for_each.is_some(), values))
}

/// The instances a resource block expands to: a key and, for `for_each`, its `each`
/// (key, value); and the meta-arguments as written.
struct Expansion {
    instances: Vec<(Option<InstanceKey>, Option<(Value, Value)>)>,
    count: Option<Spanned<u64>>,
    for_each: Option<Spanned<Value>>,
}

/// Evaluate `count` or `for_each` (at most one, and not on a provider).
fn expand(cx: &mut Cx<'_, '_>, kind: Kind, b: &Block) -> Result<Expansion, Reported> {
    let count = b.body.attr("count");
    let for_each = b.body.attr("for_each");
    if let (Some(c), Some(fe)) = (count, for_each) {
        return Err(cx.error(
            Diagnostic::error("gpuplan::spec::count_for_each", "`count` and `for_each` cannot both be set")
                .at(c.key.span, "count")
                .at(fe.key.span, "for_each")
                .help("keep one of them"),
        ));
    }
    if kind == Kind::Provider && (count.is_some() || for_each.is_some()) {
        let span = count.or(for_each).map(|a| a.key.span).unwrap_or(b.kind.span);
        return Err(cx.error(
            Diagnostic::error("gpuplan::spec::count", "providers cannot use `count` or `for_each`")
                .at(span, "not allowed here"),
        ));
    }
    if let Some(c) = count {
        let n = count_value(cx, &c.value)?;
        let instances = (0..n).map(|i| (Some(InstanceKey::Int(i)), None)).collect();
        Ok(Expansion { instances, count: Some(Spanned::new(n, c.value.span)), for_each: None })
    } else if let Some(fe) = for_each {
        let (instances, v) = for_each_instances(cx, &fe.value)?;
        Ok(Expansion { instances, count: None, for_each: Some(Spanned::new(v, fe.value.span)) })
    } else {
        Ok(Expansion { instances: vec![(None, None)], count: None, for_each: None })
    }
}

/// `count`: a whole number from 0 to [`MAX_INSTANCES`].
fn count_value(cx: &mut Cx<'_, '_>, expr: &Expr) -> Result<u64, Reported> {
    match cx.eval(expr)? {
        Value::Number(n) if n.fract() == 0.0 && n >= 0.0 && n <= MAX_INSTANCES as f64 => Ok(n as u64),
        Value::Number(n) if n.fract() == 0.0 && n >= 0.0 => Err(cx.error(crate::spec::fields::range_error(
            "count",
            &format!("{n}"),
            "0",
            &MAX_INSTANCES.to_string(),
            expr.span,
        ))),
        other => Err(cx.error(type_error("count", "a whole number ≥ 0", &other, expr.span))),
    }
}

/// `for_each`: a map (each key with its value) or a list of strings (each distinct string
/// as both key and value, sorted), at most [`MAX_INSTANCES`]; with the evaluated value.
#[allow(clippy::type_complexity)]
fn for_each_instances(
    cx: &mut Cx<'_, '_>,
    expr: &Expr,
) -> Result<(Vec<(Option<InstanceKey>, Option<(Value, Value)>)>, Value), Reported> {
    let v = cx.eval(expr)?;
    let mut instances = Vec::new();
    match &v {
        Value::Object(o) => instances.extend(
            o.iter().map(|(k, val)| (Some(InstanceKey::Str(k.clone())), Some((Value::String(k.clone()), val.clone())))),
        ),
        Value::List(l) => {
            let mut keys = BTreeSet::new();
            for item in l {
                let Value::String(s) = item else {
                    return Err(cx.error(type_error("for_each", "a map or a list of strings", item, expr.span)));
                };
                keys.insert(s.clone());
            }
            instances.extend(
                keys.into_iter()
                    .map(|k| (Some(InstanceKey::Str(k.clone())), Some((Value::String(k.clone()), Value::String(k))))),
            );
        }
        other => return Err(cx.error(type_error("for_each", "a map or a list of strings", other, expr.span))),
    }
    if instances.len() as u64 > MAX_INSTANCES {
        return Err(cx.error(
            Diagnostic::error("gpuplan::spec::for_each", "`for_each` creates too many instances")
                .at(expr.span, "too many"),
        ));
    }
    Ok((instances, v))
}

/// What other blocks see of a resource: a list for `count`, an object by key for
/// `for_each`, else the one instance's value.
fn instances_value(counted: bool, for_each: bool, values: Vec<(Option<InstanceKey>, Value)>) -> Value {
    if counted {
        Value::List(values.into_iter().map(|(_, v)| v).collect())
    } else if for_each {
        Value::Object(
            values
                .into_iter()
                .filter_map(|(k, v)| match k {
                    Some(InstanceKey::Str(s)) => Some((s, v)),
                    _ => None,
                })
                .collect(),
        )
    } else {
        values.into_iter().next().map(|(_, v)| v).unwrap_or_default()
    }
}

/// Resource blocks whose meta-arguments the driver fills in after decoding.
trait HasMeta: serde::Serialize {
    fn meta_mut(&mut self) -> &mut Meta;
}

macro_rules! has_meta {
    ($($t:ty),*) => { $(impl HasMeta for $t { fn meta_mut(&mut self) -> &mut Meta { &mut self.meta } })* };
}
has_meta!(GpuPool, Quota, JobTemplate, Job, Autoscaler, Reservation);

/// Fill in the meta-arguments of a decoded resource, keep it in the spec, and return the
/// value references to it see (when `keep`; else `Null`).
fn store<T: HasMeta, V: From<T>>(
    decoded: Result<T, Reported>,
    addr: &Address,
    into: &mut BTreeMap<Address, V>,
    keep: bool,
    fix_meta: impl Fn(&mut Meta),
) -> Result<Value, Reported> {
    decoded.map(|mut r| {
        fix_meta(r.meta_mut());
        let v = if keep { to_value(&r, addr) } else { Value::Null };
        into.insert(addr.clone(), V::from(r));
        v
    })
}

/// The value a reference like `gpu_pool.train` evaluates to: the decoded attributes
/// plus `name`, `address` and `id`.
fn to_value<T: serde::Serialize>(r: &T, addr: &Address) -> Value {
    let mut v = crate::spec::value_ser::to_value(r);
    if let Value::Object(o) = &mut v {
        o.insert("name".into(), Value::String(addr.name.clone()));
        o.insert("address".into(), Value::String(addr.to_string()));
        o.insert("id".into(), Value::String(addr.to_string()));
    }
    v
}

const PROVIDER_KINDS: &[(&str, ProviderKind)] = &[
    ("sim", ProviderKind::Sim),
    ("aws", ProviderKind::Aws),
    ("tencentcloud", ProviderKind::Tencentcloud),
    ("alicloud", ProviderKind::Alicloud),
];

fn decode_provider(
    f: Fields<'_>,
    cx: &mut Cx<'_, '_>,
    b: &Block,
    spec: &mut Spec,
    partial: &mut BTreeMap<String, Provider>,
) -> Result<Value, Reported> {
    let label = &b.labels[0];
    let kind = PROVIDER_KINDS.iter().find(|(n, _)| *n == label.name).map(|(_, k)| *k);
    let meant = did_you_mean(&label.name, PROVIDER_KINDS.iter().map(|(n, _)| *n));
    if kind.is_none() {
        cx.error(enum_error("provider", &label.name, PROVIDER_KINDS.iter().map(|(n, _)| *n), label.span).help(
            match &meant {
                Some(s) => format!("did you mean \"{s}\"?"),
                None => "gpuplan supports the providers sim, aws, tencentcloud and alicloud".into(),
            },
        ));
    }
    let mut broken = None;
    let decoded = blocks::provider(f, cx, Spanned::new(kind, label.span), &mut broken);
    // The name pools use for the block, whether or not its kind is known.
    let name = |p: &Provider| p.alias.as_ref().map_or_else(|| label.name.clone(), |a| a.value.clone());
    let p = match decoded {
        Ok(p) if kind.is_some() => p,
        Ok(p) => {
            // `provider "simm"`: pools naming it, or the kind it was meant to be, would
            // only repeat this error.
            if let Some(meant) = meant.filter(|_| p.alias.is_none()) {
                partial.entry(meant.to_string()).or_insert_with(|| p.clone());
            }
            partial.entry(name(&p)).or_insert(p);
            return Err(Reported);
        }
        Err(Reported) => {
            if let Some(p) = broken {
                partial.entry(name(&p)).or_insert(p);
            }
            return Err(Reported);
        }
    };
    let local = p.local_name();
    if let Some(prev) = spec.providers.get(&local) {
        let prev_span = prev.alias.as_ref().map(|a| a.span).unwrap_or(prev.kind.span);
        return Err(cx.error(
            Diagnostic::error("gpuplan::spec::duplicate", format!("provider {local:?} is configured more than once"))
                .at(p.alias.as_ref().map(|a| a.span).unwrap_or(label.span), "configured again here")
                .at(prev_span, "first configured here")
                .help("give the second block an `alias = \"NAME\"` and refer to it by that name"),
        ));
    }
    let v = crate::spec::value_ser::to_value(&p);
    spec.providers.insert(local, p);
    Ok(v)
}
