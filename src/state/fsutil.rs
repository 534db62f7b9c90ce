//! Small durable-file helpers shared by the state, lock and journal files: owner-only
//! modes, atomic replace (temp file, fsync, rename, fsync dir) and sibling paths.
//!
//! Nothing here knows about the state format.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::error::StateError;

/// `state/default.json` + `.lock` → `state/default.json.lock`.
pub(crate) fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name: OsString = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Open options that create files readable by the owner only: state holds cloud ids,
/// tags and configuration that other local users have no business reading.
pub(crate) fn private(options: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// The directory holding `path` ("." for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

#[cfg(test)]
thread_local! {
    /// File and directory syncs made by this thread, counted in tests: what a write costs
    /// in syncs is part of an apply's time.
    pub(crate) static SYNCS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Count one sync (tests only).
fn counted() {
    #[cfg(test)]
    SYNCS.with(|c| c.set(c.get() + 1));
}

/// Make a rename or unlink in `dir` durable. Directories cannot be opened for fsync on
/// Windows; there the rename itself is the best we get.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StateError> {
    #[cfg(unix)]
    {
        File::open(dir).and_then(|d| d.sync_all()).map_err(StateError::io("sync directory", dir))?;
        counted();
    }
    let _ = dir;
    Ok(())
}

/// Replace `path` with `bytes` atomically: readers see the old or the new file, never a
/// mix, and after return the new content survives a power cut. Mode 0600.
pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    atomic_write_with(path, |w| w.write_all(bytes))
}

/// [`atomic_write`] with the content streamed by `write` into a buffered temp file, so a
/// large file never needs to exist in memory as a whole.
// `StateError` is large, as everywhere in this module (boxing it is a separate change).
#[allow(clippy::result_large_err)]
pub(crate) fn atomic_write_with(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<(), StateError> {
    let tmp = sibling(path, ".tmp");
    // A temp file left by a crash may have other permissions; `mode` only applies on create.
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(StateError::io("remove stale temp file", &tmp)(e)),
    }
    let result = (|| {
        let file = private(OpenOptions::new().write(true).create_new(true)).open(&tmp)?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        write(&mut out)?;
        out.into_inner().map_err(io::IntoInnerError::into_error)?.sync_all()?;
        counted();
        Ok(())
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(StateError::io("write", &tmp)(e));
    }
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(StateError::io("replace", path)(e));
    }
    sync_dir(parent_dir(path))
}

/// Make `backup` hold what `path` holds now, atomically, without ever removing `path`.
/// A hard link costs nothing and keeps the old file's mode; copy where links fail.
pub(crate) fn snapshot(path: &Path, backup: &Path) -> Result<(), StateError> {
    let tmp = sibling(backup, ".tmp");
    let _ = fs::remove_file(&tmp);
    if fs::hard_link(path, &tmp).is_err() {
        let bytes = fs::read(path).map_err(StateError::io("read", path))?;
        return atomic_write(backup, &bytes);
    }
    fs::rename(&tmp, backup).map_err(StateError::io("replace", backup))
}

/// Remove a file, treating "already gone" as done.
pub(crate) fn remove_if_exists(path: &Path) -> Result<(), StateError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StateError::io("remove", path)(e)),
    }
}

/// Read a whole file; `None` if it does not exist.
pub(crate) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, StateError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StateError::io("read", path)(e)),
    }
}

/// A file's bytes as read ahead of the lock: mapped from the page cache where the
/// platform allows it, read into memory otherwise (and for an empty file, which cannot be
/// mapped).
///
/// Why mapped: on a VM every fresh page of a copy is a page fault the kernel must
/// zero first (about 2 µs each on the machine of the README's benchmarks); the 2,000-pool
/// state (2.6 MB) and sim snapshot (1.3 MB) were a thousand of them on the read-ahead
/// thread, the longer of a plan's two threads at its start. A mapping shares the pages the
/// kernel already caches and maps them in one call.
///
/// Only for files gpuplan replaces whole (temp file, fsync, rename: the state and the sim
/// snapshot): a replaced file's mapping keeps the old inode's bytes, which is exactly what
/// the read saw. Never for a file appended or truncated in place (journal, sim log, lock
/// files): a mapping of a file cut shorter under it faults (SIGBUS) where a read would
/// only see fewer bytes. Git maps its index under the same rule. Whether the file still
/// holds what was read is [`FileBytes::still_at`], which for a mapping also checks that
/// nothing wrote to the file in place since.
pub(crate) enum FileBytes {
    /// The mapping, and the file's identity and times when it was mapped.
    Mapped(memmap2::Mmap, Stamp),
    Read(Vec<u8>),
}

/// A file's identity (device and inode), length, and modification and change times, as
/// `fstat` gave them. An in-place write changes the times (Linux takes a fine-grained
/// time for a change made after the times were read, so two writes within one clock tick
/// still differ); gpuplan's own writes make a new inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamp {
    len: u64,
    #[cfg(unix)]
    id: (u64, u64, i64, i64, i64, i64),
    #[cfg(not(unix))]
    modified: std::time::SystemTime,
}

impl Stamp {
    /// `None` where the platform gives no modification time: such a file is read, not
    /// mapped, since nothing would tell an in-place write.
    fn of(meta: &fs::Metadata) -> Option<Stamp> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Some(Stamp {
                len: meta.len(),
                id: (meta.dev(), meta.ino(), meta.mtime(), meta.mtime_nsec(), meta.ctime(), meta.ctime_nsec()),
            })
        }
        #[cfg(not(unix))]
        {
            meta.modified().ok().map(|modified| Stamp { len: meta.len(), modified })
        }
    }
}

impl FileBytes {
    /// Whether the file at `path` still holds exactly these bytes. A mapping shows what
    /// its file holds now, so comparing it with the file again proves nothing after an
    /// in-place write: for a mapping the file must also be the same file, unchanged since
    /// it was mapped ([`Stamp`]), and that is all it takes: the same file's bytes read
    /// again come from the same page cache the mapping shows, so they always compare
    /// equal (reading them again was 6 MB of copies under the locks of a 2,000-pool plan).
    /// Read bytes are compared piece by piece ([`holds`]).
    pub(crate) fn still_at(&self, path: &Path) -> io::Result<bool> {
        match self {
            FileBytes::Mapped(_, stamp) => match fs::metadata(path) {
                Ok(now) => Ok(Stamp::of(&now).as_ref() == Some(stamp)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e),
            },
            FileBytes::Read(bytes) => holds(path, Some(bytes)),
        }
    }
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m, _) => m,
            FileBytes::Read(v) => v,
        }
    }
}

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = if matches!(self, FileBytes::Mapped(..)) { "mapped" } else { "read" };
        write!(f, "FileBytes({how}, {} bytes)", self.len())
    }
}

/// The whole file at `path` as [`FileBytes`] (see there for which files may be mapped);
/// `None` if it does not exist.
pub(crate) fn read_whole(path: &Path) -> io::Result<Option<FileBytes>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    let len = meta.len();
    if let Some(stamp) = Stamp::of(&meta).filter(|_| len > 0) {
        // SAFETY: the bytes are only read, and only files replaced by rename are passed
        // here (see `FileBytes`), so no writer of gpuplan's changes them under the map.
        // `populate` maps every page now, in one call, instead of a fault per 64 KiB.
        // A refused mapping is not an error: the file is read below instead.
        if let Ok(map) = unsafe { memmap2::MmapOptions::new().populate().map(&file) } {
            return Ok(Some(FileBytes::Mapped(map, stamp)));
        }
    }
    // Empty, without a modification time, or on a file system that cannot map: read it.
    let mut bytes = Vec::with_capacity(len as usize);
    io::Read::read_to_end(&mut &file, &mut bytes)?;
    Ok(Some(FileBytes::Read(bytes)))
}

/// Whether the file at `path` holds exactly `expected` (`None`: that no file is there),
/// read in 64 KiB pieces compared as they come. Checking that a file read earlier is
/// unchanged then costs no second copy of it: a 2,000-pool state is 2.6 MB, and a fresh
/// buffer that size is fresh memory the kernel must zero first.
pub(crate) fn holds(path: &Path, expected: Option<&[u8]>) -> io::Result<bool> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(expected.is_none()),
        Err(e) => return Err(e),
    };
    let Some(mut rest) = expected else { return Ok(false) };
    if file.metadata()?.len() != rest.len() as u64 {
        return Ok(false);
    }
    let mut piece = vec![0u8; 1 << 16];
    loop {
        let n = match io::Read::read(&mut file, &mut piece) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(rest.is_empty());
        }
        // Longer than its length said (it grew while being read): not the same bytes.
        if n > rest.len() || piece[..n] != rest[..n] {
            return Ok(false);
        }
        rest = &rest[n..];
    }
}

/// Whether `file` (an open handle) is still the file at `path`: a lock file can be
/// removed or replaced under an open handle, which then locks nothing anyone can see.
pub(crate) fn same_file(file: &File, path: &Path) -> bool {
    let (Ok(a), Ok(b)) = (file.metadata(), fs::metadata(path)) else { return false };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    {
        // No portable file identity in std: fall back to "it still exists with our length".
        a.len() == b.len()
    }
}
