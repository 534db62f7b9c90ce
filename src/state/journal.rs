//! The apply journal `<state>.journal`: append-only, one JSON line per finished operation,
//! so an apply costs one small fsync'd append per batch and one state write at the end
//! (linear), instead of rewriting the whole state after every resource (quadratic).
//!
//! Format: a header line `{"journal":1,"lineage":"…","base_serial":N}`, then one
//! [`JournalEntry`] per line. The header is written atomically when the journal is created;
//! an append is one write of whole lines and one fsync. A crash mid-append can only leave
//! a torn tail (no final newline, or garbage lines at the very end): it was never
//! acknowledged, so reading ignores it. Garbage followed by a valid line is damage, not a
//! torn append, and is refused.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::addr::Address;

use super::error::StateError;
use super::fsutil::{self, private};
use super::model::State;
use super::replay::{JournalEntry, Replay};

pub const JOURNAL_VERSION: u32 = 1;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct JournalHeader {
    pub journal: u32,
    pub lineage: String,
    pub base_serial: u64,
}

/// An open journal for one apply. Entries are folded into an in-memory copy of the base as
/// they become durable, so [`super::LocalBackend::compact`] writes without re-reading.
/// Dropping a journal without compacting leaves the file for the next command to recover.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    sink: Sink,
    replay: Replay,
    entries: usize,
    /// Set when an append failed: the file may end in a partial line, and appending after
    /// it would turn a harmless torn tail into damage in the middle.
    poisoned: bool,
}

/// Where appended entries become durable.
#[derive(Debug)]
enum Sink {
    /// The local journal file: one write and one fsync per append.
    File(File),
    /// A remote backend has no append: the folded state is written to the store (CAS)
    /// at most every [`super::remote::FLUSH_EVERY`], and once more when the apply ends.
    Remote { backend: super::remote::RemoteBackend, last: std::time::Instant, dirty: bool },
}

impl Journal {
    /// A journal for an apply on a remote backend: entries are folded in memory and the
    /// state is written to the store every few seconds.
    pub(crate) fn remote(backend: super::remote::RemoteBackend, base: &State) -> Journal {
        Journal {
            path: PathBuf::from(backend.url()),
            sink: Sink::Remote { backend, last: std::time::Instant::now(), dirty: false },
            replay: Replay::new(base.clone()),
            entries: 0,
            poisoned: false,
        }
    }

    /// Create `path` with its header (atomically: temp, fsync, rename), then open it to append.
    pub(crate) fn create(path: &Path, base: &State) -> Result<Journal, StateError> {
        let header =
            JournalHeader { journal: JOURNAL_VERSION, lineage: base.lineage.clone(), base_serial: base.serial };
        let mut line = serde_json::to_vec(&header).expect("header serializes");
        line.push(b'\n');
        fsutil::atomic_write(path, &line)?;
        let file = private(OpenOptions::new().append(true)).open(path).map_err(StateError::io("open journal", path))?;
        Ok(Journal {
            path: path.to_path_buf(),
            sink: Sink::File(file),
            replay: Replay::new(base.clone()),
            entries: 0,
            poisoned: false,
        })
    }

    /// Append `entries` with one write and one fsync; durable when this returns `Ok`.
    /// Callers batch operations that finish together (group commit).
    pub fn append(&mut self, entries: &[JournalEntry]) -> Result<(), StateError> {
        self.append_owned(entries.to_vec())
    }

    /// [`append`](Self::append) for entries the caller no longer needs: after the write
    /// they move into the journal's copy of the state instead of being copied there.
    pub fn append_owned(&mut self, entries: Vec<JournalEntry>) -> Result<(), StateError> {
        if self.poisoned {
            return Err(StateError::JournalPoisoned { path: self.path.clone() });
        }
        if entries.is_empty() {
            return Ok(());
        }
        let file = match &mut self.sink {
            Sink::File(file) => file,
            Sink::Remote { .. } => {
                self.entries += entries.len();
                for entry in entries {
                    self.replay.apply_owned(entry);
                }
                return self.flush_remote(false);
            }
        };
        let mut buf = Vec::with_capacity(256 * entries.len());
        for entry in &entries {
            serde_json::to_writer(&mut buf, entry).expect("journal entries serialize");
            buf.push(b'\n');
        }
        if let Err(e) = file.write_all(&buf).and_then(|()| file.sync_data()) {
            self.poisoned = true;
            return Err(StateError::io("append to journal", &self.path)(e));
        }
        self.entries += entries.len();
        for entry in entries {
            self.replay.apply_owned(entry);
        }
        Ok(())
    }

    /// Remote: write the folded state when [`super::remote::FLUSH_EVERY`] has passed since
    /// the last write (or now, with `force`). Each write bumps the serial, as any write does.
    fn flush_remote(&mut self, force: bool) -> Result<(), StateError> {
        let Sink::Remote { backend, last, dirty } = &mut self.sink else { return Ok(()) };
        *dirty = true;
        if !force && last.elapsed() < super::remote::FLUSH_EVERY {
            return Ok(());
        }
        let mut snapshot = self.replay.snapshot();
        if let Err(e) = backend.write_unchecked(&mut snapshot) {
            self.poisoned = true;
            return Err(e);
        }
        self.replay.set_serial(snapshot.serial);
        *last = std::time::Instant::now();
        *dirty = false;
        Ok(())
    }

    /// Entries appended through this handle.
    pub fn entries(&self) -> usize {
        self.entries
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn lineage(&self) -> &str {
        self.replay.lineage()
    }

    pub(crate) fn base_serial(&self) -> u64 {
        self.replay.serial()
    }

    /// The base with every durable entry applied.
    pub(crate) fn into_state(self) -> State {
        self.replay.finish()
    }
}

/// A journal read back from disk: its header and its acknowledged entries.
pub(crate) struct JournalFile {
    pub header: JournalHeader,
    pub entries: Vec<JournalEntry>,
}

/// Parse a journal's bytes, dropping a torn tail.
pub(crate) fn parse(path: &Path, bytes: &[u8]) -> Result<JournalFile, StateError> {
    let damaged = |line: usize, message: String| StateError::JournalCorrupt { path: path.to_path_buf(), line, message };
    // Only newline-terminated lines were ever acknowledged; whatever follows the last newline is torn.
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => &bytes[..end],
        None => return Err(damaged(1, "the header line is incomplete".into())),
    };
    let mut lines = complete.split(|&b| b == b'\n');
    let first = lines.next().unwrap_or_default();
    let header: JournalHeader = serde_json::from_slice(first).map_err(|e| damaged(1, format!("bad header: {e}")))?;
    if header.journal != JOURNAL_VERSION {
        return Err(damaged(
            1,
            format!("journal version {} is not supported (expected {JOURNAL_VERSION})", header.journal),
        ));
    }
    let mut entries = Vec::new();
    let mut first_bad: Option<(usize, String)> = None;
    for (i, line) in lines.enumerate() {
        let number = i + 2;
        match serde_json::from_slice::<JournalEntry>(line) {
            Ok(entry) => {
                if let Some((line, message)) = first_bad {
                    return Err(damaged(line, message));
                }
                // Complete JSON naming no address is not a torn append: it is damage, and
                // replaying it would put a key the planner cannot read into the state.
                if let Some(Err(e)) = entry.address().map(str::parse::<Address>) {
                    return Err(damaged(number, e.to_string()));
                }
                entries.push(entry);
            }
            Err(e) => {
                first_bad.get_or_insert((number, e.to_string()));
            }
        }
    }
    Ok(JournalFile { header, entries })
}
