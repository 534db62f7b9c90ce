//! The dependency graph over resource addresses.
//!
//! Edges come from expression references (`gpu_pool.train.gpu`), `depends_on`, and the
//! address-valued attributes (a job's `pool`/`template`/`quota`, a quota's `pools`, an
//! autoscaler's `pool`). An edge `a → b` means "a depends on b": b is created first and
//! deleted last. Cycles are reported as located diagnostics naming every member.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;

use crate::addr::Address;
use crate::diag::{Diagnostic, Span};
use crate::spec::model::{Meta, Spanned};
use crate::spec::names_hash::NamesMap;
use crate::spec::{Loaded, Spec};

/// Why one resource depends on another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    pub span: Span,
}

/// The graph of one spec, borrowing its addresses: building it copies none of them (every
/// command that loads a spec builds one to check for cycles).
#[derive(Debug, Default)]
pub struct Graph<'s> {
    pub graph: DiGraph<&'s Address, Edge>,
    index: BTreeMap<&'s Address, NodeIndex>,
}

impl<'s> Graph<'s> {
    fn node(&mut self, a: &'s Address) -> NodeIndex {
        if let Some(n) = self.index.get(a) {
            return *n;
        }
        let n = self.graph.add_node(a);
        self.index.insert(a, n);
        n
    }

    pub fn get(&self, a: &Address) -> Option<NodeIndex> {
        self.index.get(a).copied()
    }

    pub fn addresses(&self) -> impl Iterator<Item = &'s Address> + '_ {
        self.index.keys().copied()
    }

    /// Direct dependencies of `a`.
    pub fn dependencies(&self, a: &Address) -> Vec<&'s Address> {
        let Some(n) = self.get(a) else { return vec![] };
        let mut out: Vec<&'s Address> = self.graph.neighbors(n).map(|m| self.graph[m]).collect();
        out.sort();
        out.dedup();
        out
    }

    /// Addresses in dependency order (dependencies first), ties broken by address.
    /// Returns `Err` with the cycles' diagnostics if the graph is not acyclic.
    pub fn order(&self) -> Result<Vec<Address>, Vec<Diagnostic>> {
        let cycles = self.cycles();
        if !cycles.is_empty() {
            return Err(cycles);
        }
        // Kahn's algorithm on reversed edges with a sorted ready set: deterministic.
        let mut remaining: BTreeMap<NodeIndex, usize> =
            self.graph.node_indices().map(|n| (n, self.graph.neighbors(n).collect::<BTreeSet<_>>().len())).collect();
        let mut ready: BTreeSet<(&Address, NodeIndex)> =
            remaining.iter().filter(|(_, d)| **d == 0).map(|(n, _)| (self.graph[*n], *n)).collect();
        let mut out = Vec::with_capacity(self.graph.node_count());
        while let Some((a, n)) = ready.pop_first() {
            out.push(a.clone());
            let dependents: BTreeSet<NodeIndex> =
                self.graph.neighbors_directed(n, petgraph::Direction::Incoming).collect();
            for d in dependents {
                if let Some(c) = remaining.get_mut(&d) {
                    *c -= 1;
                    if *c == 0 {
                        ready.insert((self.graph[d], d));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Every cycle, as one diagnostic each with every member labelled.
    pub fn cycles(&self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        for scc in petgraph::algo::tarjan_scc(&self.graph) {
            let self_loop = scc.len() == 1 && self.graph.contains_edge(scc[0], scc[0]);
            if scc.len() < 2 && !self_loop {
                continue;
            }
            let members: BTreeSet<NodeIndex> = scc.iter().copied().collect();
            let mut names: Vec<String> = scc.iter().map(|n| self.graph[*n].to_string()).collect();
            names.sort();
            let mut d =
                Diagnostic::error("gpuplan::graph::cycle", format!("dependency cycle between {}", names.join(", ")));
            let mut edges: Vec<_> = self
                .graph
                .edge_references()
                .filter(|e| members.contains(&e.source()) && members.contains(&e.target()))
                .collect();
            edges.sort_by_key(|e| (self.graph[e.source()], self.graph[e.target()]));
            for e in edges {
                d = d.at(e.weight().span, format!("{} depends on {}", self.graph[e.source()], self.graph[e.target()]));
            }
            out.push(d.help("remove one `depends_on` or reference so the resources can be ordered"));
        }
        out
    }

    /// Graphviz DOT.
    pub fn to_dot(&self) -> String {
        let mut s = String::from("digraph gpuplan {\n  rankdir = \"RL\";\n  node [shape = box];\n");
        for a in self.index.keys() {
            let _ = writeln!(s, "  \"{a}\";");
        }
        for (from, to) in self.sorted_edges() {
            let _ = writeln!(s, "  \"{from}\" -> \"{to}\";");
        }
        s.push_str("}\n");
        s
    }

    /// Mermaid flowchart (renders in GitHub markdown).
    pub fn to_mermaid(&self) -> String {
        let id = |a: &Address| a.to_string().replace(['.', '[', ']', '"'], "_");
        let mut s = String::from("flowchart RL\n");
        for a in self.index.keys() {
            let _ = writeln!(s, "  {}[\"{}\"]", id(a), a.to_string().replace('"', "#quot;"));
        }
        for (from, to) in self.sorted_edges() {
            let _ = writeln!(s, "  {} --> {}", id(from), id(to));
        }
        s
    }

    fn sorted_edges(&self) -> Vec<(&'s Address, &'s Address)> {
        let mut edges: Vec<_> =
            self.graph.edge_references().map(|e| (self.graph[e.source()], self.graph[e.target()])).collect();
        edges.sort();
        edges.dedup();
        edges
    }
}

/// Build the graph of a spec. Every declared resource is a node.
/// A loaded spec with its reference cycles added to its diagnostics: what every command
/// that loads a spec runs next (`spec/` decodes and validates one object at a time and
/// does not know the graph; the graph is built on top of it).
pub fn checked(mut loaded: Loaded) -> Loaded {
    let cycles = build(&loaded.spec).cycles();
    if !cycles.is_empty() {
        for cycle in cycles {
            loaded.diags.push(cycle);
        }
        loaded.diags.sort();
    }
    loaded
}

/// [`checked`] of the spec files [`crate::spec::read_dir`] read: the graph is built and
/// its cycles found on a thread of their own while the spec is validated.
pub fn load_checked(read: crate::spec::ReadDir, opts: &crate::spec::LoadOptions) -> Loaded {
    let (mut loaded, cycles) = crate::spec::load_read_beside(read, opts, Some(|spec: &Spec| build(spec).cycles()));
    let cycles = cycles.unwrap_or_default();
    if !cycles.is_empty() {
        for cycle in cycles {
            loaded.diags.push(cycle);
        }
        loaded.diags.sort();
    }
    loaded
}

/// What [`build`] keeps while it adds each resource's edges.
struct Builder<'s> {
    g: Graph<'s>,
    /// The index's addresses again, hashed (FxHash), and kept equal to it: each resource
    /// and each reference looks its address up here (a quota of 2,000 pools names each
    /// twice, in `pools` and in its references); the sorted index is searched only for an
    /// unkeyed name's instances.
    exact: NamesMap<&'s Address, NodeIndex>,
    /// By target node, the last edge made to it and the node it was made from:
    /// `update_edge` without its scan of the source's edges for each target (a quota of
    /// 1,000 pools scanned 500,000 edges), and without a map per source. An address is a
    /// source in one call of [`Builder::add`] only, so the edges from it are the ones
    /// made there. As `update_edge`, the last span wins.
    made: Vec<Option<(NodeIndex, EdgeIndex)>>,
}

impl<'s> Builder<'s> {
    fn link(&mut self, n: NodeIndex, m: NodeIndex, span: Span) {
        if self.made.len() <= m.index() {
            self.made.resize(m.index() + 1, None);
        }
        match self.made[m.index()] {
            Some((from, e)) if from == n => self.g.graph[e] = Edge { span },
            _ => self.made[m.index()] = Some((n, self.g.graph.add_edge(n, m, Edge { span }))),
        }
    }

    /// The edges from `from` to what its `depends_on`, its references and `extra` name.
    fn add(&mut self, from: &'s Address, meta: &'s Meta, extra: Vec<&'s Spanned<Address>>) {
        let n = match self.exact.get(from) {
            Some(&n) => n,
            None => self.g.node(from),
        };
        for d in meta.depends_on.iter().chain(meta.references.iter()).chain(extra) {
            // The address itself: a resource without instances, or one named with its key.
            if let Some(&m) = self.exact.get(&d.value) {
                self.link(n, m, d.span);
                continue;
            }
            // A reference without an instance key means every instance of it.
            // The index is sorted by (kind, name, key) with no key first, so a name's
            // instances are one contiguous range: no scan over every address per reference.
            let mut instances: Vec<NodeIndex> = Vec::new();
            if d.value.key.is_none() {
                let range = self.g.index.range::<&Address, _>(&d.value..);
                instances.extend(
                    range.take_while(|(a, _)| a.kind == d.value.kind && a.name == d.value.name).map(|(_, &m)| m),
                );
            }
            if instances.is_empty() {
                let m = self.g.node(&d.value);
                self.exact.insert(&d.value, m);
                instances.push(m);
            }
            for m in instances {
                self.link(n, m, d.span);
            }
        }
    }
}

pub fn build<'s>(spec: &'s Spec) -> Graph<'s> {
    let mut b = Builder { g: Graph::default(), exact: NamesMap::default(), made: Vec::new() };
    // Nodes first so unkeyed references can expand to every instance. Each map is keyed
    // by one kind, so no address repeats, and the index is built at once from them.
    let declared = spec.gpu_pools.keys().chain(spec.quotas.keys()).chain(spec.job_templates.keys());
    let declared = declared.chain(spec.jobs.keys()).chain(spec.autoscalers.keys());
    b.g.index = declared.map(|a| (a, b.g.graph.add_node(a))).collect();
    b.exact = b.g.index.iter().map(|(a, n)| (*a, *n)).collect();
    for (a, p) in &spec.gpu_pools {
        b.add(a, &p.meta, vec![]);
    }
    for (a, q) in &spec.quotas {
        b.add(a, &q.meta, q.pools.iter().collect());
    }
    for (a, t) in &spec.job_templates {
        b.add(a, &t.meta, vec![]);
    }
    for (a, j) in &spec.jobs {
        let mut extra = vec![&j.template, &j.pool];
        extra.extend(j.quota.iter());
        b.add(a, &j.meta, extra);
    }
    for (a, s) in &spec.autoscalers {
        b.add(a, &s.meta, vec![&s.pool]);
    }
    let mut g = b.g;
    // Providers are configuration, not graph nodes: references to them are dropped.
    let mut providers: Vec<NodeIndex> =
        g.index.iter().filter(|(a, _)| a.kind == crate::addr::Kind::Provider).map(|(_, n)| *n).collect();
    // Highest index first, so the node swapped into a removed slot is never a provider.
    providers.sort_by(|a, b| b.cmp(a));
    for n in providers {
        let a = g.graph[n];
        g.graph.remove_node(n);
        g.index.remove(a);
        // remove_node swaps the last node into `n`: fix its index entry.
        if let Some(moved) = g.graph.node_weight(n).copied() {
            g.index.insert(moved, n);
        }
    }
    g
}
