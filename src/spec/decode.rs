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

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::{DiGraph, NodeIndex};

use crate::addr::{Address, InstanceKey, Kind};
use crate::diag::{Diagnostic, Diagnostics, Span, did_you_mean};
use crate::spec::blocks;
use crate::spec::eval::{Scope, Value};
use crate::spec::fields::{Cx, Fields, Reported, enum_error, type_error};
use crate::spec::model::*;
use crate::spec::raw::{self, Block, Expr, ExprKind, Ident};
use crate::spec::varfile::{VarFrom, VarInput, VarValue};
use crate::spec::{LoadOptions, Spec};

const BLOCK_KINDS: &[&str] = &[
    "provider",
    "gpu_pool",
    "quota",
    "job_template",
    "job",
    "autoscaler",
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

/// One thing evaluated in dependency order.
#[derive(Debug, Clone, Copy)]
enum Item<'r> {
    Local(&'r Ident, &'r Expr),
    Resource(Kind, &'r Block),
}

impl Item<'_> {
    fn key(&self) -> String {
        match self {
            Item::Local(id, _) => format!("local.{}", id.name),
            Item::Resource(k, b) => format!("{k}.{}", label(b)),
        }
    }
    fn name_span(&self) -> Span {
        match self {
            Item::Local(id, _) => id.span,
            Item::Resource(_, b) => b.labels.first().map(|l| l.span).unwrap_or(b.kind.span),
        }
    }
}

fn label(b: &Block) -> &str {
    b.labels.first().map(|l| l.name.as_str()).unwrap_or("")
}

/// The block's header: `gpu_pool "train"` in HCL; just the name in YAML, where the kind is
/// the plural key further up (YAML block spans start at the name).
fn head(b: &Block) -> Span {
    match (b.labels.first(), b.labels.last()) {
        (Some(first), Some(last)) if b.span.start > b.kind.span.start => first.span.join(last.span),
        (_, Some(last)) => b.kind.span.join(last.span),
        _ => b.kind.span,
    }
}

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
    let mut spec = Spec::default();
    let mut partial = Partial::default();
    let collected = collect(files, diags);
    let yaml_files: BTreeSet<u32> = files.iter().filter(|f| f.format == raw::Format::Yaml).map(|f| f.file).collect();

    let mut declared: BTreeMap<Kind, BTreeSet<String>> = BTreeMap::new();
    for (kind, b) in &collected.resources {
        declared.entry(*kind).or_default().insert(label(b).to_string());
    }

    spec.backend = crate::spec::backend::decode(&collected.settings, diags);
    let vars = variables(&collected.variables, opts, inputs, diags, &mut spec);

    // Order locals and resources by the references between them.
    let mut items: Vec<Item<'_>> = collected.locals.iter().map(|(id, e)| Item::Local(id, e)).collect();
    items.extend(collected.resources.iter().map(|(k, b)| Item::Resource(*k, b)));
    let index: BTreeMap<String, usize> = items.iter().enumerate().map(|(i, it)| (it.key(), i)).collect();
    let mut graph: DiGraph<usize, Span> = DiGraph::new();
    let nodes: Vec<NodeIndex> = (0..items.len()).map(|i| graph.add_node(i)).collect();
    let mut refs: Vec<Vec<Spanned<Address>>> = vec![Vec::new(); items.len()];
    // Only the values something reads are built for evaluation: keeping every resource's
    // value would hold a large fleet twice (typed and as a value tree) until decoding
    // ends, and building one costs more than decoding the block. A `depends_on` list only
    // names what it waits for. Outputs are evaluated last and may read any resource.
    let mut referenced = vec![false; items.len()];
    for (i, item) in items.iter().enumerate() {
        for Reference { target, span, reads } in references(item) {
            if let Some(&j) = index.get(&target) {
                graph.update_edge(nodes[i], nodes[j], span);
                referenced[j] |= reads;
                if let Item::Resource(k, b) = items[j] {
                    refs[i].push(Spanned::new(Address::new(k, label(b)), span));
                }
            }
        }
    }
    let output_reads: Vec<Vec<Address>> = collected
        .outputs
        .iter()
        .map(|b| {
            let (direct, reads) = output_reads(b, &index, &graph, &nodes, &items);
            for j in direct {
                referenced[j] = true;
            }
            reads
        })
        .collect();
    let mut poisoned = unset_variables(&collected.variables, &vars);
    let mut order = Vec::new();
    // Tarjan yields components dependencies-first for edges dependent → dependency.
    for scc in petgraph::algo::tarjan_scc(&graph) {
        let self_loop = scc.len() == 1 && graph.contains_edge(scc[0], scc[0]);
        if scc.len() > 1 || self_loop {
            report_cycle(&graph, &scc, &items, diags);
            for n in &scc {
                poisoned.insert(items[graph[*n]].key());
            }
        } else {
            order.push(graph[scc[0]]);
        }
    }

    let mut locals: BTreeMap<String, Value> = BTreeMap::new();
    let mut resources: BTreeMap<(Kind, String), Value> = BTreeMap::new();
    for i in order {
        let item = items[i];
        let mut cx = Cx {
            scope: Scope {
                vars: Some(&vars),
                locals: Some(&locals),
                resources: Some(&resources),
                declared: Some(&declared),
                poisoned: Some(&poisoned),
                env: Some(&opts.env),
                env_read: Some(&opts.env_read),
                ..Scope::default()
            },
            diags,
            declared: &declared,
            yaml_files: &yaml_files,
        };
        match item {
            Item::Local(id, expr) => match cx.eval(expr) {
                Ok(v) => {
                    spec.locals.insert(id.name.clone(), Spanned::new(v.clone(), expr.span));
                    locals.insert(id.name.clone(), v);
                }
                Err(Reported) => {
                    poisoned.insert(item.key());
                }
            },
            Item::Resource(kind, block) => {
                let keep = referenced[i];
                match resource(&mut cx, kind, block, &refs[i], keep, &mut spec, &mut partial) {
                    // Unreferenced resources stay as `Null` keys: "did you mean" lists them.
                    Ok(v) => {
                        resources.insert((kind, label(block).to_string()), v);
                    }
                    Err(Reported) => {
                        poisoned.insert(item.key());
                    }
                }
            }
        }
    }

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
    for (b, reads) in collected.outputs.iter().zip(output_reads) {
        let mut cx = Cx { scope: scope(), diags, declared: &declared, yaml_files: &yaml_files };
        if let Some(o) = output(&mut cx, b, reads, &spec.variables) {
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
    let mut seen: BTreeMap<(String, String), Span> = BTreeMap::new();
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
                    if let Some(prev) = seen.insert(("local".into(), a.key.name.clone()), a.key.span) {
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
                && let Some(prev) = seen.insert((kind.to_string(), name.to_string()), b.labels[0].span)
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

/// One reference of an item: the `local.x` / `KIND.NAME` it names, where, and whether
/// evaluating the item reads the value (a `depends_on` list of names does not).
struct Reference {
    target: String,
    span: Span,
    reads: bool,
}

/// Every `local.x` / `KIND.NAME` this item refers to.
fn references(item: &Item<'_>) -> Vec<Reference> {
    let (mut reads, mut names) = (Vec::new(), Vec::new());
    match item {
        Item::Local(_, e) => reads.push(*e),
        Item::Resource(_, b) => {
            for a in &b.body.attrs {
                let list = if a.key.name == "depends_on" && names_only(&a.value) { &mut names } else { &mut reads };
                push_expr(&a.value, list);
            }
            for inner in &b.body.blocks {
                collect_exprs(&inner.body, &mut reads);
            }
        }
    }
    let tag = |reads: bool| move |(target, span)| Reference { target, span, reads };
    let mut out: Vec<Reference> = expr_references(reads).into_iter().map(tag(true)).collect();
    out.extend(expr_references(names).into_iter().map(tag(false)));
    out
}

/// A list whose items are all references by name (`[gpu_pool.a, gpu_pool.b["x"]]`, or
/// strings in YAML): decoding it as addresses never evaluates them (`fields::address_of`).
fn names_only(e: &Expr) -> bool {
    let ExprKind::Array(items) = &e.kind else { return false };
    items.iter().all(|i| matches!(i.kind, ExprKind::String(_)) || crate::spec::fields::named_reference(i).is_some())
}

/// Every `local.x` / `KIND.NAME` these expressions refer to, with where.
fn expr_references(exprs: Vec<&Expr>) -> Vec<(String, Span)> {
    let mut out = Vec::new();
    for e in exprs {
        let mut bound = BTreeSet::new();
        for_vars(e, &mut bound);
        let mut ts = Vec::new();
        e.traversals(&mut ts);
        for (root, steps, span) in ts {
            if bound.contains(root.name.as_str()) {
                continue;
            }
            let Some(raw::Step::Attr(id)) = steps.first() else { continue };
            if root.name == "local" || Kind::parse(&root.name).is_some() {
                out.push((format!("{}.{}", root.name, id.name), span));
            }
        }
        // `depends_on = ["gpu_pool.x"]` and YAML references written as strings.
        if let ExprKind::String(s) = &e.kind
            && let Ok(a) = s.parse::<Address>()
        {
            out.push((a.base().to_string(), e.span));
        }
    }
    out
}

/// One `output` block: its value, description and sensitivity (`sensitive = true`, or a
/// value that reads a sensitive variable). `None` when it failed (reported).
fn output(
    cx: &mut Cx<'_, '_>,
    b: &Block,
    reads: Vec<Address>,
    variables: &BTreeMap<String, Variable>,
) -> Option<Output> {
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
    let mut ts = Vec::new();
    exprs.iter().for_each(|e| e.traversals(&mut ts));
    let secret = |(root, steps, _): &(&Ident, &[raw::Step], Span)| match steps.first() {
        Some(raw::Step::Attr(id)) if root.name == "var" => variables.get(&id.name).is_some_and(|v| v.sensitive.value),
        _ => false,
    };
    sensitive.value |= ts.iter().any(secret);
    match (value, failed) {
        (Some(value), false) => Some(Output { value, description, sensitive, reads }),
        _ => None,
    }
}

/// What output `b` reads: the locals and resources it names (by their index in `items`),
/// and the resources it reads directly or through those locals.
fn output_reads(
    b: &Block,
    index: &BTreeMap<String, usize>,
    graph: &DiGraph<usize, Span>,
    nodes: &[NodeIndex],
    items: &[Item<'_>],
) -> (Vec<usize>, Vec<Address>) {
    let mut exprs = Vec::new();
    collect_exprs(&b.body, &mut exprs);
    let direct: Vec<usize> = expr_references(exprs).into_iter().filter_map(|(t, _)| index.get(&t).copied()).collect();
    let (mut seen, mut reads) = (BTreeSet::new(), BTreeSet::new());
    let mut stack = direct.clone();
    while let Some(i) = stack.pop() {
        if !seen.insert(i) {
            continue;
        }
        match items[i] {
            Item::Resource(kind, block) => {
                reads.insert(Address::new(kind, label(block)));
            }
            Item::Local(..) => stack.extend(graph.neighbors(nodes[i]).map(|n| graph[n])),
        }
    }
    (direct, reads.into_iter().collect())
}

fn collect_exprs<'r>(body: &'r raw::Body, out: &mut Vec<&'r Expr>) {
    for a in &body.attrs {
        push_expr(&a.value, out);
    }
    for b in &body.blocks {
        collect_exprs(&b.body, out);
    }
}

fn push_expr<'r>(e: &'r Expr, out: &mut Vec<&'r Expr>) {
    out.push(e);
    // Strings inside arrays (YAML `depends_on: [gpu_pool.a]`) are references too.
    if let ExprKind::Array(items) = &e.kind {
        out.extend(items.iter().filter(|i| matches!(i.kind, ExprKind::String(_))));
    }
}

fn for_vars<'r>(e: &'r Expr, out: &mut BTreeSet<&'r str>) {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match &e.kind {
            ExprKind::For(f) => {
                out.insert(f.value_var.name.as_str());
                if let Some(k) = &f.key_var {
                    out.insert(k.name.as_str());
                }
                stack.push(&f.collection);
                stack.push(&f.value_expr);
            }
            ExprKind::Array(items) => stack.extend(items.iter()),
            ExprKind::Object(items) => stack.extend(items.iter().map(|(_, v)| v)),
            ExprKind::Call { args, .. } => stack.extend(args.iter()),
            ExprKind::Conditional { cond, then, otherwise } => stack.extend([&**cond, &**then, &**otherwise]),
            ExprKind::Binary { lhs, rhs, .. } => stack.extend([&**lhs, &**rhs]),
            ExprKind::Unary { expr, .. } => stack.push(expr),
            _ => {}
        }
    }
}

fn report_cycle(graph: &DiGraph<usize, Span>, scc: &[NodeIndex], items: &[Item<'_>], diags: &mut Diagnostics) {
    // Walk the cycle from its first-declared member so the message reads in order.
    let members: BTreeSet<NodeIndex> = scc.iter().copied().collect();
    let start = *scc.iter().min_by_key(|n| graph[**n]).unwrap_or(&scc[0]);
    let mut path = vec![start];
    let mut edges = Vec::new();
    let mut cur = start;
    loop {
        let next = graph
            .edges(cur)
            .filter(|e| members.contains(&petgraph::visit::EdgeRef::target(e)))
            .min_by_key(|e| graph[petgraph::visit::EdgeRef::target(e)]);
        let Some(e) = next else { break };
        let target = petgraph::visit::EdgeRef::target(&e);
        edges.push((cur, target, *e.weight()));
        if target == start || path.contains(&target) || path.len() > members.len() {
            break;
        }
        path.push(target);
        cur = target;
    }
    let names: Vec<String> = path.iter().map(|n| items[graph[*n]].key()).collect();
    let mut d = Diagnostic::error(
        "gpuplan::spec::cycle",
        format!("reference cycle: {} → {}", names.join(" → "), names.first().cloned().unwrap_or_default()),
    );
    for (from, to, span) in &edges {
        d = d.at(*span, format!("{} refers to {}", items[graph[*from]].key(), items[graph[*to]].key()));
    }
    for n in &path {
        if !edges.iter().any(|(from, _, _)| from == n) {
            d = d.at(items[graph[*n]].name_span(), "part of the cycle");
        }
    }
    diags.push(d.help("break the cycle: one of these must not depend on the other"));
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
    let name = label(b).to_string();
    let what = format!("{kind} {name:?}");
    let Expansion { instances, count: meta_count, for_each: meta_for_each } = expand(cx, kind, b)?;

    let mut values: Vec<(Option<InstanceKey>, Value)> = Vec::new();
    let mut failed = false;
    for (key, each) in instances {
        cx.scope.count_index = match &key {
            Some(InstanceKey::Int(i)) if meta_count.is_some() => Some(*i),
            _ => None,
        };
        cx.scope.each = each;
        let mut addr = Address::new(kind, name.clone());
        addr.key = key.clone();
        let inst_what = match &key {
            Some(k) => format!("{what}{k}"),
            None => what.clone(),
        };
        let f = Fields::from_body(inst_what, head(b), &b.body, cx.diags);
        let mut broken = None;
        let fix_meta = |m: &mut Meta| {
            m.key = key.clone();
            m.count = meta_count.clone();
            m.for_each = meta_for_each.clone();
            m.references = refs.to_vec();
        };
        let value = match kind {
            Kind::Provider => decode_provider(f, cx, b, spec, &mut partial.providers),
            Kind::GpuPool => store(blocks::gpu_pool(f, cx, &mut broken), &addr, &mut spec.gpu_pools, keep, fix_meta),
            Kind::Quota => store(blocks::quota(f, cx), &addr, &mut spec.quotas, keep, fix_meta),
            Kind::JobTemplate => store(blocks::job_template(f, cx), &addr, &mut spec.job_templates, keep, fix_meta),
            Kind::Job => store(blocks::job(f, cx), &addr, &mut spec.jobs, keep, fix_meta),
            Kind::Autoscaler => store(blocks::autoscaler(f, cx), &addr, &mut spec.autoscalers, keep, fix_meta),
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
has_meta!(GpuPool, Quota, JobTemplate, Job, Autoscaler);

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
    let mut v = serde_json::to_value(r).map(|j| Value::from_json(&j)).unwrap_or_default();
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
    let v = Value::from_json(&serde_json::to_value(&p).unwrap_or_default());
    spec.providers.insert(local, p);
    Ok(v)
}

const VAR_TYPES: &[(&str, VarType)] = &[
    ("any", VarType::Any),
    ("string", VarType::String),
    ("number", VarType::Number),
    ("bool", VarType::Bool),
    ("list", VarType::List),
    ("map", VarType::Map),
];

/// `var.NAME` of each variable declared without a value: it was reported where it is
/// declared, so references to it are poisoned, not reported again where it is used.
fn unset_variables(blocks: &[&Block], vars: &BTreeMap<String, Value>) -> BTreeSet<String> {
    blocks.iter().map(|b| label(b)).filter(|name| !vars.contains_key(*name)).map(|name| format!("var.{name}")).collect()
}

/// Decode variable blocks and fix each variable's value: the last of `inputs` that sets
/// it (var files and `--var`, [`crate::spec::varfile`]), else `GPUPLAN_VAR_<name>`, else
/// its `default`.
fn variables(
    blocks: &[&Block],
    opts: &LoadOptions,
    inputs: &[VarInput],
    diags: &mut Diagnostics,
    spec: &mut Spec,
) -> BTreeMap<String, Value> {
    let declared: BTreeMap<Kind, BTreeSet<String>> = BTreeMap::new();
    let mut values = BTreeMap::new();
    let names: Vec<&str> = blocks.iter().map(|b| label(b)).collect();
    undeclared_inputs(inputs, &names, diags);
    for b in blocks {
        let name = label(b).to_string();
        let no_files = BTreeSet::new();
        let mut cx = Cx { scope: Scope::default(), diags, declared: &declared, yaml_files: &no_files };
        let mut f = Fields::from_body(format!("variable {name:?}"), head(b), &b.body, cx.diags);
        // `type = string` is a bare keyword in HCL and a string in YAML.
        let ty = match f.raw("type") {
            Some(Expr { kind: ExprKind::Traversal { root, steps }, span }) if steps.is_empty() => {
                var_type(&mut cx, &root.name, *span)
            }
            Some(Expr { kind: ExprKind::Call { name: fname, .. }, span }) => var_type(&mut cx, &fname.name, *span),
            Some(Expr { kind: ExprKind::String(s), span }) => var_type(&mut cx, s, *span),
            Some(e) => {
                cx.error(
                    Diagnostic::error(
                        "gpuplan::spec::variable_type",
                        "a variable `type` must be a type name such as `string`",
                    )
                    .at(e.span, "not a type"),
                );
                None
            }
            None => Some(Spanned::new(VarType::Any, f.head)),
        };
        let default = f.value(&mut cx, "default");
        let description = f.string(&mut cx, "description");
        let sensitive = f.bool(&mut cx, "sensitive");
        let sensitive = f.or(sensitive, false);
        f.raw("nullable");
        let failed = f.failed;
        f.finish(&mut cx, &["type", "default", "description", "sensitive", "nullable"]);
        let Some(ty) = ty else { continue };
        if failed {
            continue;
        }
        let given = given_value(&name, inputs, opts);
        let Some((value, from)) = variable_value(&mut cx, b, &name, &ty, default.as_ref(), given) else { continue };
        values.insert(name.clone(), value.value.clone());
        spec.variables.insert(name, Variable { ty, default, description, sensitive, value, from });
    }
    values
}

/// Values for variables the spec does not declare: an error for `--var` (a typo sets
/// nothing), a warning for a var file (one file may serve several specs), as Terraform.
fn undeclared_inputs(inputs: &[VarInput], names: &[&str], diags: &mut Diagnostics) {
    for input in inputs.iter().filter(|i| !names.contains(&i.name.as_str())) {
        let name = &input.name;
        let mut d = match &input.from {
            VarFrom::File { file, key, .. } => Diagnostic::warning(
                "gpuplan::spec::undeclared_variable",
                format!("`{file}` sets `{name}`, a variable the spec does not declare; it is ignored"),
            )
            .at(*key, "not declared"),
            VarFrom::Flag => Diagnostic::error(
                "gpuplan::spec::undeclared_variable",
                format!("`--var {name}=...` sets a variable the spec does not declare"),
            ),
            VarFrom::Given(from) => Diagnostic::error(
                "gpuplan::spec::undeclared_variable",
                format!("{from} sets `{name}`, a variable the spec does not declare"),
            ),
        };
        d = match did_you_mean(name, names.iter().copied()) {
            Some(s) => d.help(format!("did you mean `{s}`?")),
            None => d.help(format!("declare it: variable \"{name}\" {{ type = string }}")),
        };
        diags.push(d);
    }
}

/// The value given for `name`: the last input that sets it, else `GPUPLAN_VAR_<name>`
/// (looked up, and so noted, only then).
fn given_value(name: &str, inputs: &[VarInput], opts: &LoadOptions) -> Option<(VarValue, VarFrom)> {
    if let Some(input) = inputs.iter().rev().find(|i| i.name == name) {
        return Some((input.value.clone(), input.from.clone()));
    }
    let env_key = format!("GPUPLAN_VAR_{name}");
    opts.env_read.note(&env_key);
    let text = opts.env.get(&env_key)?;
    Some((VarValue::Text(text.clone()), VarFrom::Given(format!("the environment ({env_key})"))))
}

/// The variable's value in force and where it came from; `None` (reported) when it is
/// not of the declared type or there is none.
fn variable_value(
    cx: &mut Cx<'_, '_>,
    b: &Block,
    name: &str,
    ty: &Spanned<VarType>,
    default: Option<&Spanned<Value>>,
    given: Option<(VarValue, VarFrom)>,
) -> Option<(Spanned<Value>, VarSource)> {
    match (given, default) {
        (Some((value, from)), _) => match input_value(&value, ty.value) {
            Ok(v) => Some((Spanned::new(v, head(b)), source_of(&from))),
            Err(expected) => {
                let shown = match &value {
                    VarValue::Text(text) => format!("{text:?}"),
                    VarValue::Typed(v) => v.to_json().to_string(),
                };
                let mut d = Diagnostic::error(
                    "gpuplan::spec::variable_value",
                    format!("the value {shown} for variable `{name}` (from {}) is not {expected}", from.describe()),
                );
                if let VarFrom::File { value, .. } = &from {
                    d = d.at(*value, format!("not {expected}"));
                }
                cx.error(d.at(ty.span, format!("declared as {expected}")));
                None
            }
        },
        (None, Some(d)) => match coerce(&d.value, ty.value) {
            Some(v) => Some((Spanned::new(v, d.span), VarSource::Default)),
            None => {
                cx.error(
                    type_error(&format!("the default of variable `{name}`"), type_desc(ty.value), &d.value, d.span)
                        .at(ty.span, "declared type"),
                );
                None
            }
        },
        (None, None) => {
            cx.error(
                Diagnostic::error("gpuplan::spec::variable_unset", format!("variable `{name}` has no value"))
                    .at(head(b), "no default and not set")
                    .help(format!(
                        "pass `--var {name}=...` or a `--var-file`, set GPUPLAN_VAR_{name}, or add a `default`"
                    )),
            );
            None
        }
    }
}

fn source_of(from: &VarFrom) -> VarSource {
    match from {
        VarFrom::Flag => VarSource::Flag,
        VarFrom::File { file, .. } => VarSource::File(file.clone()),
        VarFrom::Given(from) => VarSource::Given(from.clone()),
    }
}

fn var_type(cx: &mut Cx<'_, '_>, name: &str, span: Span) -> Option<Spanned<VarType>> {
    let name = match name {
        "set" | "tuple" => "list",
        "object" => "map",
        other => other,
    };
    match VAR_TYPES.iter().find(|(n, _)| *n == name) {
        Some((_, t)) => Some(Spanned::new(*t, span)),
        None => {
            cx.error(enum_error("type", name, VAR_TYPES.iter().map(|(n, _)| *n), span));
            None
        }
    }
}

fn type_desc(t: VarType) -> &'static str {
    match t {
        VarType::Any => "any value",
        VarType::String => "a string",
        VarType::Number => "a number",
        VarType::Bool => "a bool",
        VarType::List => "a list",
        VarType::Map => "a map",
    }
}

fn coerce(v: &Value, t: VarType) -> Option<Value> {
    match (t, v) {
        (VarType::Any, v) => Some(v.clone()),
        (_, Value::Null) => Some(Value::Null),
        (VarType::String, Value::String(_) | Value::Number(_) | Value::Bool(_)) => Some(Value::String(v.to_string())),
        (VarType::Number, Value::Number(_)) => Some(v.clone()),
        (VarType::Number, Value::String(s)) => s.trim().parse().ok().map(Value::Number),
        (VarType::Bool, Value::Bool(_)) => Some(v.clone()),
        (VarType::Bool, Value::String(s)) if s == "true" || s == "false" => Some(Value::Bool(s == "true")),
        (VarType::List, Value::List(_)) | (VarType::Map, Value::Object(_)) => Some(v.clone()),
        _ => None,
    }
}

/// A given value as the declared type says: text ([`parse_var`]) or a value from a file
/// or a saved plan (converted as a default is). `Err`: what was expected.
pub fn input_value(value: &VarValue, t: VarType) -> Result<Value, &'static str> {
    match value {
        VarValue::Text(text) => parse_var(text, t),
        VarValue::Typed(v) => coerce(v, t).ok_or_else(|| expected(t)),
    }
}

fn expected(t: VarType) -> &'static str {
    match t {
        VarType::List => "a list (write it as JSON, e.g. [\"a\", \"b\"])",
        VarType::Map => "a map (write it as JSON, e.g. {\"k\": \"v\"})",
        other => type_desc(other),
    }
}

/// `--var` and environment values: strings as-is, numbers and bools parsed, lists and
/// maps as JSON.
fn parse_var(text: &str, t: VarType) -> Result<Value, &'static str> {
    let json = || serde_json::from_str::<serde_json::Value>(text).ok().map(|j| Value::from_json(&j));
    let v = match t {
        VarType::String => Some(Value::String(text.to_string())),
        VarType::Any => Some(json().unwrap_or_else(|| Value::String(text.to_string()))),
        VarType::Number | VarType::Bool => coerce(&Value::String(text.trim().to_string()), t),
        VarType::List | VarType::Map => json().and_then(|v| coerce(&v, t)),
    };
    v.ok_or_else(|| expected(t))
}
