//! The local file backend: `state/<workspace>.json` plus its `.backup`, `.lock` and
//! `.journal` siblings (formats in `state/README.md`, written by `gpuplan init`).
//!
//! Invariants this file keeps:
//! - Reading never writes, and a state that cannot be read is never written over.
//! - Every write bumps `serial` exactly once, keeps the previous file as `.backup`, and is
//!   atomic and durable before it returns.
//! - While a journal exists the state file alone is not the state: plain writes are
//!   refused until the journal is folded in (`recover` or `compact`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::error::StateError;
use super::fsutil::{self, sibling};
use super::journal::{self, Journal, JournalFile};
use super::lock::{self, LockInfo, StateLock};
use super::model::{FORMAT_VERSION, State};
pub(crate) use super::parse::parse_state;
use super::replay::Replay;
use super::seal::Keyring;

/// A state file read and parsed without its lock, while the spec is still being parsed
/// (a no-op plan of 2,000 pools spent 10 ms reading its 2.6 MB state after the spec).
/// [`LocalBackend::recover_preread`] checks the file again under the lock and uses this
/// parse only if it still holds the same bytes ([`super::FileBytes::still_at`]), so what
/// it returns never depends on the head start.
pub struct Preread {
    path: PathBuf,
    bytes: super::FileBytes,
    state: State,
}

impl Preread {
    /// `None` when the file is missing, larger than `max_bytes` (the copy would only add
    /// to a large fleet's peak memory), unreadable or not a state this gpuplan reads.
    pub fn read(path: &Path, max_bytes: u64) -> Option<Preread> {
        // Any failure here is only a lost head start, never an error dropped: the read
        // under the lock reads the file again and reports what is wrong with it.
        if std::fs::metadata(path).ok()?.len() > max_bytes {
            return None;
        }
        // As above: an unreadable file here is reported by the read under the lock.
        let bytes = super::read_whole(path).ok()??;
        // A sealed state has no keys here: the read under the lock opens it.
        let state = parse_state(path, path, &bytes, &super::seal::Keyring::default()).ok()?;
        Some(Preread { path: path.to_path_buf(), bytes, state })
    }
}

#[derive(Debug, Clone)]
pub struct LocalBackend {
    path: PathBuf,
    /// Opens sealed files, and seals every write when the spec has `encryption {}`.
    keys: Keyring,
}

impl LocalBackend {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        LocalBackend { path: path.into(), keys: Keyring::default() }
    }

    /// The same backend, reading and writing with `keys` (`super::seal`).
    pub fn with_keys(mut self, keys: Keyring) -> Self {
        self.keys = keys;
        self
    }

    pub fn keys(&self) -> &Keyring {
        &self.keys
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn backup_path(&self) -> PathBuf {
        sibling(&self.path, ".backup")
    }
    pub fn lock_path(&self) -> PathBuf {
        sibling(&self.path, ".lock")
    }
    pub fn journal_path(&self) -> PathBuf {
        sibling(&self.path, ".journal")
    }

    /// Whether there is a state here: the state file, or the journal of a first apply that
    /// crashed before writing it.
    pub fn exists(&self) -> bool {
        self.path.exists() || self.journal_path().exists()
    }

    /// Take the lock, retrying every ~100 ms for up to `timeout` (zero: one try).
    pub fn lock(&self, operation: &str, timeout: Duration) -> Result<StateLock, StateError> {
        lock::acquire(&self.lock_path(), operation, timeout)
    }

    pub fn lock_info(&self) -> Result<Option<LockInfo>, StateError> {
        lock::peek(&self.lock_path())
    }

    /// Force-unlock: remove the lock file if its id is `id`.
    pub fn unlock(&self, id: &str) -> Result<LockInfo, StateError> {
        lock::force_unlock(&self.lock_path(), &self.path, id)
    }

    /// The current state: the state file plus any journal a crashed apply left, replayed in
    /// memory. Never writes. `None` if there is neither.
    pub fn read(&self) -> Result<Option<State>, StateError> {
        Ok(self.load()?.map(|loaded| loaded.state))
    }

    /// Like [`read`](Self::read), and if a journal exists, fold it into the state file
    /// (one write) and remove it.
    pub fn recover(&self, lock: &StateLock) -> Result<Option<State>, StateError> {
        self.recover_preread(lock, None)
    }

    /// [`recover`](Self::recover), with the state file already read and parsed before
    /// the lock: used only if the file still holds the same bytes ([`Preread`]).
    pub fn recover_preread(&self, lock: &StateLock, pre: Option<Preread>) -> Result<Option<State>, StateError> {
        self.check_lock(lock)?;
        let Some(loaded) = self.load_with(pre)? else { return Ok(None) };
        let mut state = loaded.state;
        match loaded.journal {
            JournalStatus::None => {}
            JournalStatus::AlreadyCompacted => self.remove_journal()?,
            JournalStatus::Replayed => {
                self.write_unchecked(&mut state)?;
                self.remove_journal()?;
            }
        }
        Ok(Some(state))
    }

    /// Write the whole state: `serial += 1`, previous file kept as `.backup`, atomic, 0600.
    /// `state` must descend from what is on disk (same lineage and serial), if anything is.
    pub fn write(&self, lock: &StateLock, state: &mut State) -> Result<(), StateError> {
        self.check_lock(lock)?;
        if self.journal_path().exists() {
            return Err(StateError::PendingJournal { path: self.journal_path() });
        }
        self.check_base(state)?;
        self.write_unchecked(state)
    }

    /// Replace the state with `state` whatever is on disk (`state push`, `init
    /// --migrate-state`; the caller checked lineage and serial): written with `serial + 1`,
    /// the previous file kept as `.backup`.
    pub fn replace(&self, lock: &StateLock, state: &mut State) -> Result<(), StateError> {
        self.check_lock(lock)?;
        if self.journal_path().exists() {
            return Err(StateError::PendingJournal { path: self.journal_path() });
        }
        self.write_unchecked(state)
    }

    /// Start a journal for an apply on top of `base`, which must be what is on disk.
    pub fn open_journal(&self, lock: &StateLock, base: &State) -> Result<Journal, StateError> {
        self.check_lock(lock)?;
        if self.journal_path().exists() {
            return Err(StateError::PendingJournal { path: self.journal_path() });
        }
        self.check_base(base)?;
        Journal::create(&self.journal_path(), base, &self.keys)
    }

    /// Fold `journal` into `state`, write it once (serial bumped once), remove the journal.
    /// `state` may be the journal's base or a copy the caller kept updated with the same
    /// entries: it is replaced by the journal's own fold of the base, which is what is durable.
    pub fn compact(&self, lock: &StateLock, journal: Journal, state: &mut State) -> Result<(), StateError> {
        self.check_lock(lock)?;
        if journal.path() != self.journal_path() {
            return Err(StateError::WrongLock { path: self.path.clone(), lock_path: journal.path().to_path_buf() });
        }
        if state.lineage != journal.lineage() {
            return Err(StateError::Stale {
                path: self.path.clone(),
                expected_lineage: journal.lineage().to_string(),
                expected_serial: journal.base_serial(),
                found_lineage: state.lineage.clone(),
                found_serial: state.serial,
            });
        }
        let mut folded = journal.into_state();
        self.check_base(&folded)?;
        self.write_unchecked(&mut folded)?;
        // The journal's removal is not synced: a crash that loses it leaves a journal
        // whose entries the durable state already holds (serial one past its base), which
        // the next command proves folded and removes without a write (`load_with`,
        // `AlreadyCompacted`). Nothing is replayed twice and nothing is lost, and the
        // apply saves one directory fsync after its last cloud call.
        fsutil::remove_if_exists(&self.journal_path())?;
        *state = folded;
        Ok(())
    }

    /// Remove the state and its backup (`gpuplan workspace delete`), under the lock, which
    /// the caller holds and then releases. A journal must have been folded first.
    pub fn delete_state(&self, lock: &StateLock) -> Result<(), StateError> {
        self.check_lock(lock)?;
        if self.journal_path().exists() {
            return Err(StateError::PendingJournal { path: self.journal_path() });
        }
        fsutil::remove_if_exists(&self.path)?;
        fsutil::remove_if_exists(&self.backup_path())?;
        fsutil::sync_dir(fsutil::parent_dir(&self.path))
    }

    fn check_lock(&self, lock: &StateLock) -> Result<(), StateError> {
        if lock.path() != self.lock_path() {
            return Err(StateError::WrongLock { path: self.path.clone(), lock_path: lock.path().to_path_buf() });
        }
        lock.check()
    }

    /// Refuse to write `state` unless it descends from the file on disk: a lost update would
    /// silently forget resources another run recorded.
    fn check_base(&self, state: &State) -> Result<(), StateError> {
        let Some(disk) = self.read_header(&self.path)? else { return Ok(()) };
        if disk.lineage != state.lineage || disk.serial != state.serial {
            return Err(StateError::Stale {
                path: self.path.clone(),
                expected_lineage: state.lineage.clone(),
                expected_serial: state.serial,
                found_lineage: disk.lineage,
                found_serial: disk.serial,
            });
        }
        Ok(())
    }

    fn write_unchecked(&self, state: &mut State) -> Result<(), StateError> {
        let dir = fsutil::parent_dir(&self.path);
        std::fs::create_dir_all(dir).map_err(StateError::io("create directory", dir))?;
        // Serialize the caller's copy with the next serial rather than a clone of it (a
        // 100,000-pool state is hundreds of MB in memory), and put the old serial back if
        // the write fails: the caller's copy advances only once the new serial is on disk.
        super::compact::tidy(state);
        let previous = (state.serial, state.format_version);
        state.serial += 1;
        state.format_version = FORMAT_VERSION;
        let written = (|| {
            // Sealed before anything on disk changes: a key that cannot seal (a passphrase
            // variable unset) leaves the state and its backup as they were.
            let sealed = self.sealed(state)?;
            if self.path.exists() {
                fsutil::snapshot(&self.path, &self.backup_path())?;
            }
            match sealed {
                Some(bytes) => fsutil::atomic_write(&self.path, &bytes),
                // Streamed, its large maps rendered on the cores in rounds (`pretty`): the
                // serialized state of a large fleet is over a hundred MB.
                None => fsutil::atomic_write_with(&self.path, |out| {
                    super::pretty::write_state(&mut *out, state)?;
                    out.write_all(b"\n")
                }),
            }
        })();
        if written.is_err() {
            (state.serial, state.format_version) = previous;
        }
        written
    }

    /// `state` as a sealed file's bytes, when the keys seal; `None` writes it plain.
    fn sealed(&self, state: &State) -> Result<Option<Vec<u8>>, StateError> {
        if !self.keys.seals() {
            return Ok(None);
        }
        let mut text = Vec::with_capacity(1 << 16);
        super::pretty::write_state(&mut text, state).map_err(StateError::io("render", &self.path))?;
        let head = super::seal::Head {
            format_version: Some(state.format_version),
            serial: Some(state.serial),
            lineage: Some(state.lineage.clone()),
        };
        super::seal::seal(&text, "state", head, &self.keys).map(Some).map_err(|e| StateError::encrypt(&self.path, e))
    }

    /// `gpuplan state rekey`: the backup written again with these keys (sealed, or plain
    /// without an `encryption` block), its serial unchanged. Under the lock; the state
    /// itself is written by the caller (`write`).
    pub fn rekey_backup(&self, lock: &StateLock) -> Result<bool, StateError> {
        self.check_lock(lock)?;
        let backup = self.backup_path();
        let Some(state) = self.read_file(&backup)? else { return Ok(false) };
        let bytes = match self.sealed(&state)? {
            Some(bytes) => bytes,
            None => {
                let mut text = Vec::with_capacity(1 << 16);
                super::pretty::write_state(&mut text, &state).map_err(StateError::io("render", &backup))?;
                text.push(b'\n');
                text
            }
        };
        // Replacing the backup by a new inode: the state file, a hard link of the old
        // backup until its next write, is not touched.
        fsutil::atomic_write(&backup, &bytes)?;
        Ok(true)
    }

    fn remove_journal(&self) -> Result<(), StateError> {
        let path = self.journal_path();
        fsutil::remove_if_exists(&path)?;
        fsutil::sync_dir(fsutil::parent_dir(&path))
    }

    /// Parse one state file (the state or its backup); `None` if missing.
    fn read_file(&self, path: &Path) -> Result<Option<State>, StateError> {
        self.read_file_with(path, None)
    }

    fn read_file_with(&self, path: &Path, pre: Option<Preread>) -> Result<Option<State>, StateError> {
        if let Some(p) = pre.filter(|p| p.path == path)
            && p.bytes.still_at(path).map_err(StateError::io("read", path))?
        {
            return Ok(Some(p.state));
        }
        let Some(bytes) = fsutil::read_optional(path)? else { return Ok(None) };
        parse_state(path, &self.backup_path(), &bytes, &self.keys).map(Some)
    }

    /// The lineage and serial of a state file, streamed: the rest of the file is checked
    /// to be well-formed JSON but not kept (parsing all of it into a `State` before every
    /// write doubled an apply's peak memory for a large fleet). A quick scan answers when
    /// it is sure ([`super::scan`]); otherwise `serde_json` reads the file, as it always
    /// did, and words what is wrong with it. `None` if missing.
    // `StateError` is large, as everywhere in this module (boxing it is a separate change).
    #[allow(clippy::result_large_err)]
    fn read_header(&self, path: &Path) -> Result<Option<Header>, StateError> {
        let mut file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StateError::io("read", path)(e)),
        };
        let corrupt = |line, column, message| StateError::Corrupt {
            path: path.to_path_buf(),
            line,
            column,
            message,
            backup: self.backup_path(),
        };
        let (found, result) = match super::scan::scan(&file) {
            super::scan::Scan::Sure(f) => {
                (Some(Header { format_version: f.format_version, serial: f.serial, lineage: f.lineage }), Ok(()))
            }
            super::scan::Scan::Unsure => {
                std::io::Seek::rewind(&mut file).map_err(StateError::io("read", path))?;
                header_by_serde(std::io::BufReader::with_capacity(1 << 16, file))
            }
        };
        match (found, result) {
            (_, Err(e)) => {
                let message = e.to_string();
                let suffix = format!(" at line {} column {}", e.line(), e.column());
                let message = message.strip_suffix(&suffix).unwrap_or(&message).to_string();
                Err(corrupt(Some(e.line()), Some(e.column()), message))
            }
            (Some(h), Ok(())) if !super::migrate::readable(h.format_version) => {
                Err(super::parse::unreadable_version(path, &self.backup_path(), h.format_version))
            }
            (Some(h), Ok(())) => Ok(Some(h)),
            (None, Ok(())) => Err(corrupt(None, None, "missing field `format_version`, `serial` or `lineage`".into())),
        }
    }

    fn load(&self) -> Result<Option<Loaded>, StateError> {
        self.load_with(None)
    }

    fn load_with(&self, pre: Option<Preread>) -> Result<Option<Loaded>, StateError> {
        let state = self.read_file_with(&self.path, pre)?;
        let journal_path = self.journal_path();
        let Some(bytes) = fsutil::read_optional(&journal_path)? else {
            return Ok(state.map(|state| Loaded { state, journal: JournalStatus::None }));
        };
        let JournalFile { header, entries } = journal::parse(&journal_path, &bytes, &self.keys)?;
        let mismatch = |state: &Option<State>| StateError::JournalMismatch {
            path: journal_path.clone(),
            journal_lineage: header.lineage.clone(),
            journal_serial: header.base_serial,
            state_lineage: state.as_ref().map(|s| s.lineage.clone()),
            state_serial: state.as_ref().map(|s| s.serial),
        };
        let fold = |base: State| {
            let mut replay = Replay::new(base);
            entries.iter().for_each(|e| replay.apply(e));
            replay.finish()
        };
        let base = match state {
            None => {
                // The first apply crashed before any state file existed.
                let mut base = State::new(header.lineage.clone());
                base.serial = header.base_serial;
                base
            }
            Some(s) if s.lineage == header.lineage && s.serial == header.base_serial => s,
            Some(s) if s.lineage == header.lineage && s.serial == header.base_serial + 1 => {
                // A compaction may have written the state and crashed before removing the
                // journal. Only if the journal folded onto the previous state (the backup,
                // or nothing if there was none) gives exactly this state is it proven done.
                let previous = match self.read_file(&self.backup_path()) {
                    Ok(Some(b)) if b.lineage == header.lineage && b.serial == header.base_serial => Some(b),
                    Ok(None) => Some(State { serial: header.base_serial, ..State::new(header.lineage.clone()) }),
                    _ => None,
                };
                let done = previous.map(fold).is_some_and(|mut f| {
                    f.serial = s.serial;
                    folded_into(f, &s)
                });
                if !done {
                    return Err(mismatch(&Some(s)));
                }
                return Ok(Some(Loaded { state: s, journal: JournalStatus::AlreadyCompacted }));
            }
            other => return Err(mismatch(&other)),
        };
        Ok(Some(Loaded { state: fold(base), journal: JournalStatus::Replayed }))
    }
}

/// Whether `state` is `folded` (a journal folded onto the state before it), allowing
/// history lines after the journal's own that the compaction wrote without journaling
/// them (an apply's closing lines, `Journal::fold_unwritten`).
fn folded_into(mut folded: State, state: &State) -> bool {
    if folded == *state {
        return true;
    }
    let journaled = std::mem::replace(&mut folded.history, state.history.clone());
    folded.history_summary = state.history_summary.clone();
    folded == *state && super::replay::history_extends(&journaled, &state.history)
}

/// What [`LocalBackend::read_header`] reads.
#[derive(Debug, PartialEq)]
pub(crate) struct Header {
    pub(crate) format_version: u32,
    pub(crate) serial: u64,
    pub(crate) lineage: String,
}

/// A state file's header as `serde_json` reads it from `read`, and whether the whole
/// document is well-formed: the header is only to be trusted with `Ok`.
pub(crate) fn header_by_serde(read: impl std::io::Read) -> (Option<Header>, serde_json::Result<()>) {
    let mut found = None;
    let mut de = serde_json::Deserializer::from_reader(read);
    let result =
        serde::Deserializer::deserialize_map(&mut de, HeaderVisitor { found: &mut found }).and_then(|()| de.end());
    (found, result)
}

struct HeaderVisitor<'a> {
    found: &'a mut Option<Header>,
}

impl<'de> serde::de::Visitor<'de> for HeaderVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a gpuplan state object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (mut format_version, mut serial, mut lineage) = (None, None, None);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "format_version" => format_version = Some(map.next_value::<u32>()?),
                "serial" => serial = Some(map.next_value::<u64>()?),
                "lineage" => lineage = Some(map.next_value::<String>()?),
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        if let (Some(format_version), Some(serial), Some(lineage)) = (format_version, serial, lineage) {
            *self.found = Some(Header { format_version, serial, lineage });
        }
        Ok(())
    }
}

struct Loaded {
    state: State,
    journal: JournalStatus,
}

enum JournalStatus {
    None,
    Replayed,
    /// A journal whose entries the state file already holds.
    AlreadyCompacted,
}
