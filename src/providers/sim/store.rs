//! The simulated cloud's files: snapshot, event log and lock.
//!
//! - `<path>`: the snapshot, a pretty JSON [`World`] (its nodes and tokens written short,
//!   [`super::snapshot`]; an older format is read as it is), rewritten only at compaction
//!   (temp file, fsync, rename), so a create does not rewrite thousands of nodes; the log
//!   is compacted once it holds more records than both the threshold and the world's size,
//!   and when `apply` or `destroy` ends with a log as long as the world
//!   ([`Store::wants_settling`]).
//! - `<path>.log`: JSON lines, one [`Record`] per mutating call, appended in one write.
//!   Appends are not fsynced on purpose: the sim models a remote cloud whose state must
//!   survive the *client* process being killed (SIGKILL, Ctrl-C), and a write that reached
//!   the page cache survives that; only an OS crash could lose it, which a laptop sim need
//!   not survive. A torn last line (a crash mid-write) is ignored and cut off at open.
//! - `<path>.lock`: held with an exclusive OS lock while a cloud is open, so two gpuplan
//!   processes never interleave appends; it holds the holder's pid for the error message.
//!   The holder removes it when it is done ([`Store::close`], or the drop), as the state
//!   lock does: removed while still locked, and an opener that locked a removed file
//!   tries again on the new one. No lock file outlives the command that took it.
//!
//! Opened for reading only (`create` false), a cloud that has no files yet is an empty
//! world kept in memory: nothing is created, locked or written.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::SimError;
use super::world::{FORMAT_VERSION, Record, World};
use crate::state::FileBytes;

/// [`Store::wants_settling`]: a log of at least this many records, and at least as long
/// as the world is large, is folded into the snapshot when a command that changed the
/// cloud ends.
pub const SETTLE_FROM: usize = 1_000;

/// [`Store::wants_settling`]: a log of at least this many bytes, and at least as large as
/// the snapshot, is folded into it too, so a small world's log stays small however many
/// days of calls it has seen.
pub const SETTLE_BYTES: u64 = 16 * 1024;

/// Poll interval while another process holds the lock.
const LOCK_POLL: Duration = Duration::from_millis(50);

pub struct Store {
    path: PathBuf,
    log_path: PathBuf,
    disk: Disk,
    /// Bytes of whole records in the log: a failed append is cut back to here.
    log_len: u64,
    /// Bytes of the snapshot as last written or read.
    snapshot_len: u64,
    /// Records appended since this store was opened (by this command).
    appended: usize,
    /// Records in the log since the last compaction.
    records: usize,
    compact_after: usize,
}

/// Where the world's changes go.
enum Disk {
    /// The files, under the lock (held until closed; closing the file releases the OS lock).
    Files { log: File, lock: File },
    /// Nowhere: a cloud that did not exist, read by a command that writes nothing.
    Memory,
    /// The command is done with the cloud and released its lock: writes are refused.
    Closed,
}

/// `<path><suffix>`, e.g. `default.sim.json.log`.
pub fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut s: OsString = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

impl Store {
    /// Lock, load the snapshot, replay the log, and compact if the log is long (or there
    /// was no snapshot yet, so that the file exists from the first open). With `pre` (the
    /// same files read before the lock, [`Preread`]), the world it parsed is used when
    /// the files still hold the same bytes; otherwise they are parsed again.
    ///
    /// With `create` false, a cloud that has neither file yet is not created: an empty
    /// world is kept in memory and nothing is written ([`Disk::Memory`]).
    pub fn open(
        path: &Path,
        lock_timeout: Duration,
        compact_after: usize,
        pre: Option<Preread>,
        create: bool,
    ) -> Result<(Store, World), SimError> {
        let log_path = sibling(path, ".log");
        if !create && !path.exists() && !log_path.exists() {
            let store = Store {
                path: path.to_path_buf(),
                log_path,
                disk: Disk::Memory,
                log_len: 0,
                snapshot_len: 0,
                appended: 0,
                records: 0,
                compact_after,
            };
            return Ok((store, World::default()));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(SimError::io("create the folder", dir))?;
        }
        let lock = acquire_lock(path, lock_timeout)?;
        let pre = match pre.filter(|p| p.path == path) {
            Some(p) if p.still_held(path, &log_path)? => Some(p),
            _ => None,
        };
        let (mut world, existed, records, log_len) = match pre {
            Some(p) => (p.world, p.files.snapshot.is_some(), p.records, p.log_len),
            None => {
                let files = Files::read(path, &log_path)?;
                let (mut world, existed) = parse_snapshot(path, files.snapshot.as_deref())?;
                let (records, log_len) = replay(&log_path, files.log.as_deref().unwrap_or_default(), &mut world)?;
                if files.log.as_ref().is_some_and(|log| (log_len as usize) < log.len()) {
                    // Whatever follows the last good newline is a torn write; cut it so
                    // appends start clean.
                    let f =
                        OpenOptions::new().write(true).open(&log_path).map_err(SimError::io("repair", &log_path))?;
                    f.set_len(log_len).map_err(SimError::io("repair", &log_path))?;
                }
                (world, existed, records, log_len)
            }
        };
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(SimError::io("open the event log", &log_path))?;
        let disk = Disk::Files { log, lock };
        let snapshot_len = fs::metadata(path).map_or(0, |m| m.len());
        let mut store = Store {
            path: path.to_path_buf(),
            log_path,
            disk,
            log_len,
            snapshot_len,
            appended: 0,
            records,
            compact_after,
        };
        if !existed || records > compact_after {
            store.compact(&mut world)?;
        }
        Ok((store, world))
    }

    /// Append one record as one line, in one write.
    pub fn append(&mut self, record: &Record) -> Result<(), SimError> {
        let log = match &mut self.disk {
            Disk::Files { log, .. } => log,
            Disk::Memory => {
                self.records += 1;
                self.appended += 1;
                return Ok(());
            }
            Disk::Closed => return Err(closed()),
        };
        let mut line = serde_json::to_vec(record).map_err(|e| SimError::Corrupt {
            path: self.log_path.clone(),
            line: None,
            message: format!("cannot encode an event: {e}"),
        })?;
        line.push(b'\n');
        if let Err(e) = log.write_all(&line) {
            // Cut a partial line off so that later appends do not follow garbage.
            let _ = log.set_len(self.log_len);
            return Err(SimError::io("append to the event log", &self.log_path)(e));
        }
        self.log_len += line.len() as u64;
        self.records += 1;
        self.appended += 1;
        Ok(())
    }

    /// Whether the log is long enough to fold into a new snapshot. The threshold grows with
    /// the world (`world_size`: nodes and jobs), so each compaction's full rewrite is paid
    /// for by at least as many appends: compaction stays linear in the calls made instead
    /// of quadratic in the fleet (100,000 creates rewrote a growing snapshot ten times).
    /// A log of at least [`SETTLE_BYTES`] and at least the snapshot's size counts too:
    /// its rewrite is paid for by as many bytes appended.
    pub fn wants_compaction(&self, world_size: usize) -> bool {
        self.records > self.compact_after.max(world_size) || self.log_outgrew_snapshot()
    }

    fn log_outgrew_snapshot(&self) -> bool {
        self.log_len >= SETTLE_BYTES && self.log_len >= self.snapshot_len
    }

    /// Whether the log should be folded into the snapshot now that a command that changed
    /// the cloud is done ([`SimCloud::settle`](super::SimCloud::settle)): when the next
    /// open would do it anyway (past the threshold), or when the log holds at least
    /// [`SETTLE_FROM`] records and at least as many as the world has nodes and jobs. Every
    /// later open then reads one snapshot instead of replaying the log: after an apply of
    /// 2,000 pools, 2,000 records cost each no-op plan 50 million instructions, against 37
    /// million for the snapshot. A rewrite is paid for by at least as many appends, so
    /// compaction stays linear in the calls made.
    /// A log of at least [`SETTLE_BYTES`] and at least the snapshot's size is folded too.
    pub fn wants_settling(&self, world_size: usize) -> bool {
        // Counted over this command's appends too: a compaction on the way (the log outgrew
        // a smaller snapshot) does not keep the end of a large apply in the log.
        let n = self.records.max(self.appended);
        self.records > self.compact_after
            || (self.records > 0 && n >= SETTLE_FROM && n >= world_size)
            || self.log_outgrew_snapshot()
    }

    /// Write the whole world as the new snapshot and empty the log. Records carry sequence
    /// numbers, so a crash between the rename and the truncation only leaves records that
    /// the next open skips.
    pub fn compact(&mut self, world: &mut World) -> Result<(), SimError> {
        let log = match &mut self.disk {
            Disk::Files { log, .. } => log,
            Disk::Memory => {
                world.drop_gone();
                self.records = 0;
                return Ok(());
            }
            Disk::Closed => return Err(closed()),
        };
        world.drop_gone();
        let tmp = sibling(&self.path, ".tmp");
        let write = || -> std::io::Result<u64> {
            // Streamed: a world of 100,000 nodes is about 100 MB of JSON.
            let mut out = std::io::BufWriter::with_capacity(1 << 16, File::create(&tmp)?);
            serde_json::to_writer_pretty(&mut out, &*world).map_err(std::io::Error::from)?;
            let f = out.into_inner().map_err(std::io::IntoInnerError::into_error)?;
            // Compaction is rare, so unlike appends it can afford an fsync: the rename must
            // never expose an empty snapshot while the log is being emptied.
            f.sync_all()?;
            fs::rename(&tmp, &self.path)?;
            fs::metadata(&self.path).map(|m| m.len())
        };
        self.snapshot_len = write().map_err(SimError::io("write the snapshot", &self.path))?;
        log.set_len(0).map_err(SimError::io("truncate the event log", &self.log_path))?;
        self.log_len = 0;
        self.records = 0;
        Ok(())
    }

    /// The command is done with the cloud: remove the lock file and release the lock.
    /// Later writes are refused. Commands that leave their values to the process's exit
    /// call it ([`SimCloud::close`](super::SimCloud::close)): the exit releases the OS
    /// lock but would leave the file.
    pub fn close(&mut self) {
        if let Disk::Files { lock, .. } = std::mem::replace(&mut self.disk, Disk::Closed) {
            let lock_path = sibling(&self.path, ".lock");
            // Removed while still locked, and only if it is still ours; an opener that
            // locked the removed file sees that and tries again on the new one.
            if crate::state::same_file(&lock, &lock_path) {
                // A file left behind is harmless: the next opener locks it as before.
                let _ = fs::remove_file(&lock_path);
            }
            // Dropping `lock` (and the log) here releases the OS lock.
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.close();
    }
}

fn closed() -> SimError {
    SimError::Invalid("the simulated cloud was closed by this command; nothing more can be written to it".into())
}

fn acquire_lock(path: &Path, timeout: Duration) -> Result<File, SimError> {
    let lock_path = sibling(path, ".lock");
    let start = Instant::now();
    let mut file = loop {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(SimError::io("open the lock file", &lock_path))?;
        match file.try_lock() {
            // A file its holder removed on release locks nothing: try the current one.
            Ok(()) if !crate::state::same_file(&file, &lock_path) => continue,
            Ok(()) => break file,
            Err(TryLockError::WouldBlock) => {
                let waited = start.elapsed();
                if waited >= timeout {
                    let holder = fs::read_to_string(&lock_path).ok().map(|s| s.trim().to_string()).unwrap_or_default();
                    let holder = if holder.is_empty() { String::new() } else { format!(" ({holder})") };
                    return Err(SimError::Locked { path: path.to_path_buf(), holder, waited });
                }
                drop(file);
                std::thread::sleep(LOCK_POLL.min(timeout - waited));
            }
            Err(TryLockError::Error(e)) => return Err(SimError::io("lock", &lock_path)(e)),
        }
    };
    // Best effort: the pid only improves the message another process shows.
    let _ = file.set_len(0).and_then(|_| file.write_all(format!("pid {}\n", std::process::id()).as_bytes()));
    Ok(file)
}

/// The bytes of the snapshot and of the log (`None`: the file does not exist).
struct Files {
    snapshot: Option<FileBytes>,
    log: Option<Vec<u8>>,
}

impl Files {
    fn read(path: &Path, log_path: &Path) -> Result<Files, SimError> {
        // The snapshot is only ever replaced by rename, so it may be mapped; the log is
        // appended and truncated in place, so it is read.
        let snapshot = crate::state::read_whole(path).map_err(SimError::io("read", path))?;
        Ok(Files { snapshot, log: read_optional(log_path)? })
    }
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, SimError> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SimError::io("read", path)(e)),
    }
}

/// The cloud's files read and parsed without the lock, while the spec is still being
/// parsed (a no-op plan of 2,000 pools spent 8 ms here after the spec). [`Store::open`]
/// reads the files again under the lock and uses this world only if every byte is the
/// same, so what it returns never depends on the head start.
pub struct Preread {
    path: PathBuf,
    files: Files,
    world: World,
    records: usize,
    log_len: u64,
}

impl Preread {
    /// `None` when the files are missing, larger than `max_bytes` together (the copy
    /// would only add to a large fleet's peak memory), unreadable, or not clean (a torn
    /// log tail is repaired under the lock, never here).
    pub fn read(path: &Path, max_bytes: u64) -> Option<Preread> {
        let log_path = sibling(path, ".log");
        let size = |p: &Path| fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        if size(path) + size(&log_path) > max_bytes {
            return None;
        }
        // Any failure here is only a lost head start, never an error dropped: the open
        // under the lock reads the files again and reports what is wrong with them.
        let files = Files::read(path, &log_path).ok()?;
        files.snapshot.as_ref()?;
        let (mut world, _) = parse_snapshot(path, files.snapshot.as_deref()).ok()?;
        let log = files.log.as_deref().unwrap_or_default();
        let (records, log_len) = replay(&log_path, log, &mut world).ok()?;
        if (log_len as usize) < log.len() {
            return None;
        }
        Some(Preread { path: path.to_path_buf(), files, world, records, log_len })
    }

    /// Whether both files still hold the bytes read ahead (the snapshot unchanged since it
    /// was mapped and the same bytes, the log compared piece by piece; no second copy).
    fn still_held(&self, path: &Path, log_path: &Path) -> Result<bool, SimError> {
        let snapshot = match &self.files.snapshot {
            Some(bytes) => bytes.still_at(path),
            None => crate::state::holds(path, None),
        };
        let snapshot = snapshot.map_err(SimError::io("read", path))?;
        Ok(snapshot
            && crate::state::holds(log_path, self.files.log.as_deref()).map_err(SimError::io("read", log_path))?)
    }
}

/// The snapshot's world (the empty world when there is none) and whether it existed.
fn parse_snapshot(path: &Path, text: Option<&[u8]>) -> Result<(World, bool), SimError> {
    let Some(text) = text else { return Ok((World::default(), false)) };
    let newer = |version| SimError::Corrupt {
        path: path.to_path_buf(),
        line: None,
        message: format!("format_version {version} was written by a newer gpuplan (this one reads {FORMAT_VERSION})"),
    };
    let mut world: World = crate::json_text::from_json_bytes(text).map_err(|e| {
        // A newer format may not fit today's struct: say "newer gpuplan", not "bad field".
        #[derive(serde::Deserialize)]
        struct Version {
            format_version: u32,
        }
        match serde_json::from_slice::<Version>(text) {
            Ok(v) if v.format_version > FORMAT_VERSION => newer(v.format_version),
            _ => SimError::Corrupt { path: path.to_path_buf(), line: Some(e.line()), message: e.to_string() },
        }
    })?;
    if world.format_version > FORMAT_VERSION {
        return Err(newer(world.format_version));
    }
    // An older format reads as it is; the next compaction writes this one. The indexes
    // are built once the log is replayed ([`replay`] always follows).
    world.format_version = FORMAT_VERSION;
    Ok((world, true))
}

/// Apply the log's records newer than the snapshot, then build the world's indexes (the
/// counts the records kept on the way are rebuilt whole). Returns the number of records in
/// the log and the length of its whole lines; a torn tail (past that length) is left for
/// the caller to cut off.
fn replay(log_path: &Path, bytes: &[u8], world: &mut World) -> Result<(usize, u64), SimError> {
    let (mut pos, mut records, mut line_no) = (0usize, 0usize, 0usize);
    while let Some(len) = bytes[pos..].iter().position(|&b| b == b'\n') {
        line_no += 1;
        let line = &bytes[pos..pos + len];
        if !line.iter().all(u8::is_ascii_whitespace) {
            match crate::json_text::from_json_bytes::<Record>(line) {
                Ok(record) if record.seq > world.seq => world.apply_record(record),
                Ok(_) => {}
                // A bad last line is a write torn by a crash: the call never completed.
                Err(_) if bytes[pos + len..].iter().all(u8::is_ascii_whitespace) => break,
                Err(e) => {
                    return Err(SimError::Corrupt {
                        path: log_path.to_path_buf(),
                        line: Some(line_no),
                        message: e.to_string(),
                    });
                }
            }
            records += 1;
        }
        pos += len + 1;
    }
    world.reindex();
    Ok((records, pos as u64))
}
