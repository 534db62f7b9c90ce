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

use base64::Engine as _;
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
    /// A sealed journal (`super::seal`): its key's metadata. Every entry line is then
    /// base64 of a nonce and the AES-256-GCM ciphertext of the entry, the header line
    /// its associated data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_provider: Option<super::seal::KeyMeta>,
    /// An empty message sealed under the key, so a wrong key is told from a torn tail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
}

/// The key and associated data a sealed journal's lines are sealed with.
#[derive(Debug)]
struct LineKey {
    key: [u8; 32],
    aad: Vec<u8>,
}

impl LineKey {
    fn seal(&self, line: &[u8]) -> Result<Vec<u8>, super::seal::SealError> {
        let body = super::seal::encrypt(&self.key, line, &self.aad)?;
        Ok(base64::engine::general_purpose::STANDARD.encode(body).into_bytes())
    }

    fn open(&self, line: &[u8]) -> Option<Vec<u8>> {
        let body = base64::engine::general_purpose::STANDARD.decode(line).ok()?;
        super::seal::decrypt(&self.key, &body, &self.aad)
    }
}

/// What the header's `check` is sealed with.
fn check_aad(lineage: &str, base_serial: u64) -> Vec<u8> {
    format!("gpuplan-journal {lineage} {base_serial}").into_bytes()
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
    /// Writes made durable through this handle (local: one fsync each).
    appends: usize,
    /// A sealed journal's key (`None`: lines are plain JSON).
    line_key: Option<LineKey>,
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
    /// at most every [`super::remote::Timing::flush_every`], and once more when the apply ends.
    Remote(RemoteSink),
}

/// The remote progress writer. A failed write is tried again later, with backoff: one
/// flaky answer must not end progress for the rest of the apply. Only a conflict (someone
/// else wrote, or the lock was lost) or a store that keeps failing stops it; entries are
/// folded in memory all the same, so the final write (or `errored.json`) has everything.
/// No write goes out while the lock's fence does not hold.
#[derive(Debug)]
struct RemoteSink {
    backend: super::remote::RemoteBackend,
    fence: super::fence::Fence,
    /// When the next write may go out.
    next: std::time::Instant,
    /// Failed writes in a row.
    failures: u32,
    /// Why writes stopped, once they have.
    stopped: Option<String>,
}

impl Journal {
    /// A journal for an apply on a remote backend: entries are folded in memory and the
    /// state is written to the store every few seconds, while `fence` (the lock's) holds.
    pub(crate) fn remote(backend: super::remote::RemoteBackend, base: &State, fence: super::fence::Fence) -> Journal {
        let next = std::time::Instant::now() + backend.timing().flush_every;
        Journal {
            path: PathBuf::from(backend.url()),
            sink: Sink::Remote(RemoteSink { backend, fence, next, failures: 0, stopped: None }),
            replay: Replay::new(base.clone()),
            entries: 0,
            appends: 0,
            line_key: None,
            poisoned: false,
        }
    }

    /// Create `path` with its header (atomically: temp, fsync, rename), then open it to append.
    /// Sealed when `keys` seal.
    pub(crate) fn create(path: &Path, base: &State, keys: &super::seal::Keyring) -> Result<Journal, StateError> {
        let mut header = JournalHeader {
            journal: JOURNAL_VERSION,
            lineage: base.lineage.clone(),
            base_serial: base.serial,
            key_provider: None,
            check: None,
        };
        let mut key = None;
        if keys.seals() {
            let (meta, k) = keys.write_key().map_err(|e| StateError::encrypt(path, e))?;
            let check = super::seal::encrypt(&k, b"", &check_aad(&base.lineage, base.serial))
                .map_err(|e| StateError::encrypt(path, e))?;
            header.key_provider = Some(meta);
            header.check = Some(base64::engine::general_purpose::STANDARD.encode(check));
            key = Some(k);
        }
        let mut line = serde_json::to_vec(&header).expect("header serializes");
        let line_key = key.map(|key| LineKey { key, aad: line.clone() });
        line.push(b'\n');
        fsutil::atomic_write(path, &line)?;
        let file = private(OpenOptions::new().append(true)).open(path).map_err(StateError::io("open journal", path))?;
        Ok(Journal {
            path: path.to_path_buf(),
            sink: Sink::File(file),
            replay: Replay::new(base.clone()),
            entries: 0,
            appends: 0,
            line_key,
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
        if matches!(self.sink, Sink::Remote(_)) {
            return self.append_remote(entries);
        }
        if self.poisoned {
            return Err(StateError::JournalPoisoned { path: self.path.clone() });
        }
        if entries.is_empty() {
            return Ok(());
        }
        let Sink::File(file) = &mut self.sink else { return Ok(()) };
        let mut buf = Vec::with_capacity(256 * entries.len());
        for entry in &entries {
            match &self.line_key {
                None => serde_json::to_writer(&mut buf, entry).expect("journal entries serialize"),
                Some(k) => {
                    let line = serde_json::to_vec(entry).expect("journal entries serialize");
                    buf.extend(k.seal(&line).map_err(|e| StateError::encrypt(&self.path, e))?);
                }
            }
            buf.push(b'\n');
        }
        if let Err(e) = file.write_all(&buf).and_then(|()| file.sync_data()) {
            self.poisoned = true;
            return Err(StateError::io("append to journal", &self.path)(e));
        }
        self.entries += entries.len();
        self.appends += 1;
        for entry in entries {
            self.replay.apply_owned(entry);
        }
        Ok(())
    }

    /// Fold `entries` into the journal's copy of the state without writing them: for the
    /// apply's closing history lines, which the compaction right after writes with the
    /// state, so they cost the apply no sync of their own. A crash before that compaction
    /// loses these lines and nothing else: every operation is in the journal already, and
    /// the apply had not reported finishing. A journal whose removal a crash lost after the
    /// compaction is still proven folded (`LocalBackend::load_with` allows the state
    /// history lines the journal never held).
    pub fn fold_unwritten(&mut self, entries: Vec<JournalEntry>) {
        for entry in entries {
            self.replay.apply_owned(entry);
        }
    }

    /// Remote: fold the entries in memory (always: they are what the final write holds),
    /// then write the folded state if it is due.
    fn append_remote(&mut self, entries: Vec<JournalEntry>) -> Result<(), StateError> {
        if entries.is_empty() {
            return Ok(());
        }
        self.entries += entries.len();
        for entry in entries {
            self.replay.apply_owned(entry);
        }
        self.flush_remote()
    }

    /// Remote: write the folded state when its time has come (every
    /// [`super::remote::Timing::flush_every`], later after failures). Each write bumps the
    /// serial, as any write does. A failure that is not a conflict is tried again after a
    /// backoff and is not the caller's error, until the store has failed too often in a row.
    fn flush_remote(&mut self) -> Result<(), StateError> {
        let Sink::Remote(sink) = &mut self.sink else { return Ok(()) };
        if let Some(cause) = &sink.stopped {
            return Err(StateError::ProgressStopped { url: sink.backend.url().to_string(), cause: cause.clone() });
        }
        let now = std::time::Instant::now();
        if now < sink.next {
            return Ok(());
        }
        let timing = sink.backend.timing();
        // Fenced, not merely guarded by the compare-and-swap: until the new holder writes,
        // the object is still the one we wrote, and a write now would land.
        let written = match sink.fence.check() {
            Ok(()) => {
                let mut snapshot = self.replay.snapshot();
                sink.backend.write_unchecked(&mut snapshot).map(|()| snapshot.serial)
            }
            Err(broken) => Err(StateError::fenced(broken)),
        };
        match written {
            Ok(serial) => {
                self.replay.set_serial(serial);
                sink.failures = 0;
                sink.next = std::time::Instant::now() + timing.flush_every;
                Ok(())
            }
            Err(e) => {
                sink.failures += 1;
                if e.is_conflict() || sink.failures >= timing.flush_attempts {
                    sink.stopped = Some(e.to_string());
                    return Err(e);
                }
                sink.next = std::time::Instant::now() + timing.backoff(sink.failures).max(timing.flush_every);
                Ok(())
            }
        }
    }

    /// Why remote progress writes stopped, if they did.
    pub fn stopped(&self) -> Option<&str> {
        match &self.sink {
            Sink::Remote(sink) => sink.stopped.as_deref(),
            Sink::File(_) => None,
        }
    }

    /// Entries appended through this handle.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Appends made durable through this handle: fsyncs of a local journal (none for a
    /// remote one, which writes on its own schedule). What group commit saves shows here.
    pub fn appends(&self) -> usize {
        self.appends
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

/// Parse a journal's bytes, dropping a torn tail; a sealed one is opened with `keys`
/// (a key that does not open its header's check is an error, never a torn tail).
pub(crate) fn parse(path: &Path, bytes: &[u8], keys: &super::seal::Keyring) -> Result<JournalFile, StateError> {
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
    let line_key = match (&header.key_provider, &header.check) {
        (None, _) => None,
        (Some(meta), check) => {
            let check = check.as_deref().and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok());
            let Some(check) = check else { return Err(damaged(1, "a sealed journal without its check".into())) };
            let aad = check_aad(&header.lineage, header.base_serial);
            let key = keys
                .open_with(meta, |k| super::seal::decrypt(k, &check, &aad).map(|_| *k))
                .map_err(|e| StateError::decrypt(path, e))?;
            Some(LineKey { key, aad: first.to_vec() })
        }
    };
    let mut entries = Vec::new();
    let mut first_bad: Option<(usize, String)> = None;
    for (i, line) in lines.enumerate() {
        let number = i + 2;
        let opened;
        let line = match &line_key {
            None => line,
            Some(k) => match k.open(line) {
                Some(plain) => {
                    opened = plain;
                    &opened[..]
                }
                None => {
                    first_bad.get_or_insert((number, "a sealed line that does not open".into()));
                    continue;
                }
            },
        };
        match crate::json_text::from_json_bytes::<JournalEntry>(line) {
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
