//! The state file's text: what `serde_json::to_writer_pretty` writes for a [`State`],
//! byte for byte, but for the forms format 3 gives a pool's nodes and the spend ledger
//! ([`super::stored`]), with its large map (the resources) rendered on the machine's cores.
//!
//! At 100,000 pools the state is 130 MB of text, and rendering it on one thread was most
//! of the half second an apply spends writing its state after the last cloud call. Here
//! the entries of each map are rendered in rounds of [`ROUND`] (so a round's text, not
//! the whole file's, is held), each round split over the cores in order
//! ([`crate::par::runs_in_order`]), and written in order. The rest of the document is
//! small and rendered as before. Each value is rendered by `serde_json`'s pretty
//! printer and moved to its depth by indenting every line after the first: the printer
//! puts line breaks only between tokens (a string's own line breaks are escaped), so that
//! is the text the printer writes at that depth.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use super::model::State;

/// Map entries rendered per round.
const ROUND: usize = 8_192;

/// Entries per thread below which a round stays on one thread.
const PER_THREAD: usize = 512;

/// The printer's indentation step.
const STEP: &[u8] = b"  ";

/// Write `state` as `serde_json::to_writer_pretty` does (no final newline).
pub(crate) fn write_state(out: &mut impl Write, state: &State) -> io::Result<()> {
    // Every field by name: a field added to `State` fails to compile here until it is
    // written (in its place, with its `skip_serializing_if`).
    let State {
        format_version,
        serial,
        lineage,
        resources,
        history,
        history_summary,
        autoscale,
        spend,
        spend_months,
        alerts,
        outputs,
        standing,
        repairs,
        health,
    } = state;
    let mut object = Object::start(out, 0)?;
    object.field("format_version", format_version)?;
    object.field("serial", serial)?;
    object.field("lineage", lineage)?;
    object.map_with("resources", resources, |text, key, r, depth| {
        entry(text, key, &super::stored::ResourceOut(&super::migrate::pack(r, lineage)), depth)
    })?;
    if !history.is_empty() {
        object.field("history", history)?;
    }
    if let Some(summary) = history_summary {
        object.field("history_summary", summary)?;
    }
    if !autoscale.is_empty() {
        object.field("autoscale", autoscale)?;
    }
    if !spend.is_empty() {
        object.field("spend", &super::stored::LedgerOut(spend))?;
    }
    if !spend_months.is_empty() {
        object.field("spend_months", spend_months)?;
    }
    if !alerts.is_empty() {
        object.field("alerts", alerts)?;
    }
    if !outputs.is_empty() {
        object.field("outputs", outputs)?;
    }
    if !standing.is_empty() {
        object.field("standing", standing)?;
    }
    if !repairs.is_empty() {
        object.field("repairs", repairs)?;
    }
    if !health.is_empty() {
        object.field("health", health)?;
    }
    object.end()
}

/// A pretty-printed object being written at `depth`.
struct Object<'w, W: Write> {
    out: &'w mut W,
    depth: usize,
    empty: bool,
}

impl<'w, W: Write> Object<'w, W> {
    fn start(out: &'w mut W, depth: usize) -> io::Result<Self> {
        out.write_all(b"{")?;
        Ok(Object { out, depth, empty: true })
    }

    /// The separator and indentation before the next key.
    fn next_key(&mut self) -> io::Result<()> {
        self.out.write_all(if self.empty { b"\n" } else { b",\n" })?;
        self.empty = false;
        indent(self.out, self.depth + 1)
    }

    fn field(&mut self, name: &str, value: &impl Serialize) -> io::Result<()> {
        self.next_key()?;
        let mut text = Vec::new();
        entry(&mut text, name, value, self.depth + 1)?;
        self.out.write_all(&text)
    }

    /// A map field whose entries `write` renders (in the state's own form of a value, e.g.
    /// a resource without the tags gpuplan derives).
    fn map_with<V: Sync>(
        &mut self,
        name: &str,
        map: &BTreeMap<String, V>,
        write: impl Fn(&mut Vec<u8>, &str, &V, usize) -> io::Result<()> + Sync,
    ) -> io::Result<()> {
        self.next_key()?;
        serde_json::to_writer(&mut *self.out, name)?;
        self.out.write_all(b": ")?;
        if map.is_empty() {
            return self.out.write_all(b"{}");
        }
        let depth = self.depth + 2;
        let entries: Vec<(&String, &V)> = map.iter().collect();
        let cores = crate::par::cores();
        let mut first = true;
        self.out.write_all(b"{")?;
        for round in entries.chunks(ROUND) {
            let runs = crate::par::runs_in_order(round, cores, PER_THREAD, |run| render_run(run, depth, &write));
            for run in runs {
                self.out.write_all(if first { b"\n" } else { b",\n" })?;
                first = false;
                self.out.write_all(&run?)?;
            }
        }
        self.out.write_all(b"\n")?;
        indent(self.out, self.depth + 1)?;
        self.out.write_all(b"}")
    }

    fn end(self) -> io::Result<()> {
        if !self.empty {
            self.out.write_all(b"\n")?;
            indent(self.out, self.depth)?;
        }
        self.out.write_all(b"}")
    }
}

/// Entries of a map at `depth`, each on its own lines, joined by `,\n`.
fn render_run<V>(
    run: &[(&String, &V)],
    depth: usize,
    write: impl Fn(&mut Vec<u8>, &str, &V, usize) -> io::Result<()>,
) -> io::Result<Vec<u8>> {
    let mut text = Vec::with_capacity(run.len() * 256);
    for (i, (key, value)) in run.iter().enumerate() {
        if i > 0 {
            text.extend_from_slice(b",\n");
        }
        indent(&mut text, depth)?;
        write(&mut text, key, value, depth)?;
    }
    Ok(text)
}

/// `"key": value`, the value as the pretty printer writes it at `depth`.
fn entry(text: &mut Vec<u8>, key: &str, value: &impl Serialize, depth: usize) -> io::Result<()> {
    serde_json::to_writer(&mut *text, key)?;
    text.extend_from_slice(b": ");
    let value = serde_json::to_vec_pretty(value)?;
    for (i, line) in value.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            text.push(b'\n');
            indent(text, depth)?;
        }
        text.extend_from_slice(line);
    }
    Ok(())
}

fn indent(out: &mut impl Write, depth: usize) -> io::Result<()> {
    (0..depth).try_for_each(|_| out.write_all(STEP))
}
