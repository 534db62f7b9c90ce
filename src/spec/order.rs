//! The order a spec's locals and resources are evaluated in: the references between
//! them (`local.x`, `KIND.NAME`, `depends_on`) make a graph, evaluated dependencies
//! first; a reference cycle is reported once, with every member labelled, and its
//! members are left out. Also what each output reads. No evaluation happens here.

use std::borrow::Cow;
use std::collections::BTreeSet;

use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};

use crate::addr::{Address, Kind};
use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::spec::model::Spanned;
use crate::spec::names_hash::NamesMap;
use crate::spec::raw::{self, Block, Expr, ExprKind, Ident, label};

/// One thing evaluated in dependency order.
#[derive(Debug, Clone, Copy)]
pub(super) enum Item<'r> {
    Local(&'r Ident, &'r Expr),
    Resource(Kind, &'r Block),
}

impl<'r> Item<'r> {
    pub fn key(&self) -> String {
        let (root, name) = self.names();
        format!("{root}.{name}")
    }
    /// `("local", NAME)` or `(KIND, NAME)`: the key's two halves, borrowed.
    fn names(&self) -> (&'r str, &'r str) {
        match self {
            Item::Local(id, _) => ("local", &id.name),
            Item::Resource(k, b) => (k.as_str(), label(b)),
        }
    }
    fn name_span(&self) -> Span {
        match self {
            Item::Local(id, _) => id.span,
            Item::Resource(_, b) => b.labels.first().map(|l| l.span).unwrap_or(b.kind.span),
        }
    }
}

/// Locals and resources ordered by the references between them, and what each reads.
pub(super) struct Order<'r> {
    pub items: Vec<Item<'r>>,
    /// The resources each item refers to, with where.
    pub refs: Vec<Vec<Spanned<Address>>>,
    /// Whether something reads the item's value (only those values are built).
    pub referenced: Vec<bool>,
    /// What each output block reads (resources, directly or through locals).
    pub output_reads: Vec<Vec<Address>>,
    /// Indexes into `items`, dependencies first; items of a cycle are left out.
    pub order: Vec<usize>,
    /// The keys (`local.x`, `gpu_pool.a`) of the items in a reference cycle (reported).
    pub cyclic: Vec<String>,
}

/// The order locals and resources are evaluated in; every reference cycle is reported.
pub(super) fn dependency_order<'r>(
    locals: &[(&'r Ident, &'r Expr)],
    resources: &[(Kind, &'r Block)],
    outputs: &[&Block],
    diags: &mut Diagnostics,
) -> Order<'r> {
    // Order locals and resources by the references between them.
    let mut items: Vec<Item<'_>> = locals.iter().map(|(id, e)| Item::Local(id, e)).collect();
    items.extend(resources.iter().map(|(k, b)| Item::Resource(*k, b)));
    // Looked up once per reference (a quota listing 2,000 pools): hashed (FxHash), not
    // searched, by the names as the spec writes them (no key is made).
    let index: Index<'r> = items.iter().enumerate().map(|(i, it)| (it.names(), i)).collect();
    let mut graph: DiGraph<usize, Span> = DiGraph::new();
    let nodes: Vec<NodeIndex> = (0..items.len()).map(|i| graph.add_node(i)).collect();
    let mut refs: Vec<Vec<Spanned<Address>>> = vec![Vec::new(); items.len()];
    // Only the values something reads are built for evaluation: keeping every resource's
    // value would hold a large fleet twice (typed and as a value tree) until decoding
    // ends, and building one costs more than decoding the block. A `depends_on` list only
    // names what it waits for. Outputs are evaluated last and may read any resource.
    let mut referenced = vec![false; items.len()];
    // Each item's references are found on its own: on the machine's cores for a fleet.
    let found = crate::par::runs_in_order(&items, crate::par::cores(), REFERENCES_PER_THREAD, |run| {
        run.iter().map(references).collect::<Vec<_>>()
    });
    // By target, the last edge made to it and the item it was made from: `update_edge`
    // without its scan of the edges made so far from an item (a quota listing 1,000 pools
    // scanned 500,000), and without a map per item. As `update_edge` does, the last span wins.
    let mut made: Vec<Option<(usize, EdgeIndex)>> = vec![None; items.len()];
    for (i, item_refs) in found.into_iter().flatten().enumerate() {
        for Reference { target, span, reads } in item_refs {
            if let Some(&j) = index.get(&target.names()) {
                match made[j] {
                    Some((from, e)) if from == i => graph[e] = span,
                    _ => made[j] = Some((i, graph.add_edge(nodes[i], nodes[j], span))),
                }
                referenced[j] |= reads;
                if let Item::Resource(k, b) = items[j] {
                    refs[i].push(Spanned::new(Address::new(k, label(b)), span));
                }
            }
        }
    }
    let output_reads: Vec<Vec<Address>> = outputs
        .iter()
        .map(|b| {
            let (direct, reads) = output_reads(b, &index, &graph, &nodes, &items);
            for j in direct {
                referenced[j] = true;
            }
            reads
        })
        .collect();
    let (mut order, mut cyclic) = (Vec::new(), Vec::new());
    // Tarjan yields components dependencies-first for edges dependent → dependency.
    for scc in petgraph::algo::tarjan_scc(&graph) {
        let self_loop = scc.len() == 1 && graph.contains_edge(scc[0], scc[0]);
        if scc.len() > 1 || self_loop {
            report_cycle(&graph, &scc, &items, diags);
            for n in &scc {
                cyclic.push(items[graph[*n]].key());
            }
        } else {
            order.push(graph[scc[0]]);
        }
    }
    Order { items, refs, referenced, output_reads, order, cyclic }
}

/// The fewest items whose references are worth finding on another thread.
const REFERENCES_PER_THREAD: usize = 512;

/// Items by their names (`("local", x)`, `(KIND, NAME)`), as [`Item`]s hold them.
type Index<'r> = NamesMap<(&'r str, &'r str), usize>;

/// One reference of an item: the `local.x` / `KIND.NAME` it names, where, and whether
/// evaluating the item reads the value (a `depends_on` list of names does not).
pub(super) struct Reference<'r> {
    pub target: Target<'r>,
    pub span: Span,
    pub reads: bool,
}

/// What a reference names: `local.NAME` (root `local`) or `KIND.NAME`, borrowed from the
/// spec where it is written as a traversal; a name inside a string is parsed, so owned.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Target<'r> {
    pub root: &'r str,
    pub name: Cow<'r, str>,
}

impl Target<'_> {
    fn names(&self) -> (&str, &str) {
        (self.root, &self.name)
    }
}

impl std::fmt::Display for Target<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.root, self.name)
    }
}

/// Every `local.x` / `KIND.NAME` this item refers to.
pub(super) fn references<'r>(item: &Item<'r>) -> Vec<Reference<'r>> {
    let (mut reads, mut names) = (Vec::new(), Vec::new());
    match item {
        Item::Local(_, e) => reads.push(*e),
        Item::Resource(kind, b) => {
            for a in &b.body.attrs {
                let list = if names_only_attr(*kind, &a.key.name, &a.value) { &mut names } else { &mut reads };
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

/// An attribute decoded as addresses (`fields::address_of`, `blocks.rs`), written as
/// names: `depends_on` on any block, a quota's `pools`, a job's `template`, `pool` and
/// `quota`, an autoscaler's `pool`. Decoding it reads no value, so a fleet whose quota
/// lists every pool builds no pool's value.
fn names_only_attr(kind: Kind, attr: &str, e: &Expr) -> bool {
    let list = matches!((kind, attr), (_, "depends_on") | (Kind::Quota, "pools"));
    let single = matches!((kind, attr), (Kind::Job, "template" | "pool" | "quota") | (Kind::Autoscaler, "pool"));
    (list && names_only(e)) || (single && is_name(e))
}

/// A reference by name (`gpu_pool.a`, `gpu_pool.a["x"]`) or a string (YAML).
fn is_name(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::String(_)) || crate::spec::fields::named_reference(e).is_some()
}

/// A list whose items are all references by name (`[gpu_pool.a, gpu_pool.b["x"]]`, or
/// strings in YAML): decoding it as addresses never evaluates them (`fields::address_of`).
fn names_only(e: &Expr) -> bool {
    let ExprKind::Array(items) = &e.kind else { return false };
    items.iter().all(is_name)
}

/// Every `local.x` / `KIND.NAME` these expressions refer to, with where. A literal is
/// only looked at for a string naming a resource (most of a fleet's attributes are
/// literals), and one set of loop variables and one list of traversals serve every
/// expression, cleared in between.
fn expr_references(exprs: Vec<&Expr>) -> Vec<(Target<'_>, Span)> {
    let mut out = Vec::new();
    let (mut bound, mut stack, mut ts) = (BTreeSet::new(), Vec::new(), Vec::new());
    for e in exprs {
        match &e.kind {
            ExprKind::Null | ExprKind::Bool(_) | ExprKind::Number(_) | ExprKind::Unsupported(_) | ExprKind::Invalid => {
                continue;
            }
            ExprKind::String(s) => {
                string_reference(s, e.span, &mut out);
                continue;
            }
            _ => {}
        }
        bound.clear();
        for_vars(e, &mut stack, &mut bound);
        ts.clear();
        e.traversals(&mut ts);
        for &(root, steps, span) in &ts {
            if bound.contains(root.name.as_str()) {
                continue;
            }
            let Some(raw::Step::Attr(id)) = steps.first() else { continue };
            if root.name == "local" || Kind::parse(&root.name).is_some() {
                out.push((Target { root: &root.name, name: Cow::Borrowed(&id.name) }, span));
            }
        }
    }
    out
}

/// `depends_on = ["gpu_pool.x"]` and YAML references written as strings. Only a string
/// that starts with a kind is parsed: the others (regions, GPU models, zones) would each
/// make a parse error to throw away.
fn string_reference<'r>(s: &str, span: Span, out: &mut Vec<(Target<'r>, Span)>) {
    if s.split_once('.').is_some_and(|(kind, _)| Kind::parse(kind).is_some())
        && let Ok(a) = s.parse::<Address>()
    {
        out.push((Target { root: a.kind.as_str(), name: Cow::Owned(a.name) }, span));
    }
}

/// What output `b` reads: the locals and resources it names (by their index in `items`),
/// and the resources it reads directly or through those locals.
fn output_reads(
    b: &Block,
    index: &Index<'_>,
    graph: &DiGraph<usize, Span>,
    nodes: &[NodeIndex],
    items: &[Item<'_>],
) -> (Vec<usize>, Vec<Address>) {
    let mut exprs = Vec::new();
    collect_exprs(&b.body, &mut exprs);
    let direct: Vec<usize> =
        expr_references(exprs).into_iter().filter_map(|(t, _)| index.get(&t.names()).copied()).collect();
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

pub(super) fn collect_exprs<'r>(body: &'r raw::Body, out: &mut Vec<&'r Expr>) {
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

/// The loop variables of every `for` inside `e`, into `out`; `stack` is scratch space,
/// left empty.
fn for_vars<'r>(e: &'r Expr, stack: &mut Vec<&'r Expr>, out: &mut BTreeSet<&'r str>) {
    stack.push(e);
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
