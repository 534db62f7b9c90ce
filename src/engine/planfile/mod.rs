//! Saved plan files (`plan --out FILE`, `apply FILE`): the container, writing one
//! atomically, and reading one back, with errors that name the file.
//!
//! The container: a gzip stream (RFC 1952) of the [`Plan`] as compact JSON, so
//! `zcat FILE | jq .` reads it. Why gzip: a plan's JSON repeats the same keys and values
//! for every pool and compresses about tenfold at the fastest level, which is cheap enough
//! for small fleets; gzip's CRC-32 and length trailer catch a truncated or corrupted file;
//! and the backend (`flate2` on `miniz_oxide`) is pure Rust and quick to build.
//!
//! Reading never builds a `Value` tree: the text is inflated into one buffer (sized from
//! the gzip trailer) and deserialized straight into the plan's types, then freed. A plan
//! file as plain JSON (no container, as an earlier gpuplan wrote them) is still read.
//!
//! The document has its own `format_version` ([`FILE_FORMAT_VERSION`]): 2 added what
//! made the plan (`inputs`: variable values, workspace, overrides, the spec's
//! fingerprint). A file of another version is refused with the version named, also when
//! it does not read as this version's plan.
//!
//! A future `gpuplan show FILE` reads through [`open`] (the JSON text) or [`load`].
//!
//! With `encryption {}` in the spec, `plan --out` seals the file ([`save_with`];
//! `state::seal`: the compressed JSON under AES-256-GCM, the key provider named in a
//! plain header). Reading opens it with the key provider its header names
//! ([`super::keys::from_headers`]): a plan file is read where its spec may not be
//! (`show`), and the passphrase's variable or the KMS key is all it needs.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::bufread::MultiGzDecoder;
use flate2::write::GzEncoder;

use crate::plan::Plan;
use crate::plan::model::FILE_FORMAT_VERSION;
use crate::state::seal::Keyring;

/// gzip's magic bytes, the start of every plan file this version writes.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Buffer sizes: large enough that the inflater and the JSON reader work on whole blocks.
const BUFFER: usize = 64 * 1024;

/// A plan file that cannot be written or read. The message names the file.
#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    #[error("cannot write `{}`: {error}", path.display())]
    Write { path: PathBuf, error: std::io::Error },
    #[error("cannot read the plan file `{}`: {error}", path.display())]
    Read { path: PathBuf, error: std::io::Error },
    #[error("`{}` is not a gpuplan plan file: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("the plan file `{}` is truncated or corrupt: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },
    #[error("the plan file `{}` has format {found}; this gpuplan reads format {FILE_FORMAT_VERSION}", path.display())]
    Version { path: PathBuf, found: u32 },
    #[error("cannot {verb} `{}` with key_provider {}: {}", path.display(), error.provider, error.reason)]
    Sealing { path: PathBuf, verb: &'static str, error: crate::state::seal::SealError },
}

impl PlanFileError {
    /// The next step for the user.
    pub fn hint(&self) -> Option<String> {
        self.fixed_hint().map(str::to_string).or_else(|| match self {
            PlanFileError::Sealing { error, .. } => Some(error.hint.clone()),
            _ => None,
        })
    }

    fn fixed_hint(&self) -> Option<&'static str> {
        match self {
            PlanFileError::Write { .. } | PlanFileError::Sealing { .. } => None,
            PlanFileError::Read { .. } | PlanFileError::Invalid { .. } | PlanFileError::Corrupt { .. } => {
                Some("save the plan again with `gpuplan plan --out FILE`")
            }
            PlanFileError::Version { .. } => {
                Some("make the plan again with this version of gpuplan: `gpuplan plan --out FILE`")
            }
        }
    }
}

/// Write a saved plan atomically: to a temporary file beside it, then renamed.
///
/// Not synced to disk (it was, until the 2,000-pool benchmark showed the `fsync` taking
/// 1–4 ms of `plan --out`, the last thing it waited for). A plan file is not state: should
/// the machine fail before the kernel writes it, what is left is no file, the previous
/// one, or one that is cut short, and gzip's CRC-32 and length trailer make `apply` refuse
/// that one ("truncated or corrupt", with the hint to plan again) rather than act on part
/// of a plan. The state, which is, is still synced before every rename (docs/design/files.md).
pub fn save(path: &Path, plan: &Plan) -> Result<(), PlanFileError> {
    save_with(path, plan, &Keyring::default())
}

/// [`save`], sealed when `keys` seal (the spec has `encryption {}`): sealed in memory
/// first, so a key that cannot seal leaves no file.
pub fn save_with(path: &Path, plan: &Plan, keys: &Keyring) -> Result<(), PlanFileError> {
    let tmp = path.with_extension("tmp");
    if keys.seals() {
        let sealing = |error| PlanFileError::Sealing { path: path.to_path_buf(), verb: "encrypt", error };
        let text = crate::json_text::verbatim(|| serde_json::to_vec(plan))
            .map_err(|e| PlanFileError::Write { path: path.to_path_buf(), error: e.into() })?;
        let sealed = crate::state::seal::seal(&text, "plan", Default::default(), keys).map_err(sealing)?;
        return std::fs::write(&tmp, sealed).and_then(|()| std::fs::rename(&tmp, path)).map_err(|error| {
            // As below: the write error is what the user sees.
            let _ = std::fs::remove_file(&tmp);
            PlanFileError::Write { path: path.to_path_buf(), error }
        });
    }
    write_compressed(&tmp, plan).and_then(|()| std::fs::rename(&tmp, path)).map_err(|error| {
        // Best-effort cleanup of the half-written temp file: the write error below is what
        // the user sees, and a temp file that cannot be removed either never existed or is
        // overwritten by the next save.
        let _ = std::fs::remove_file(&tmp);
        PlanFileError::Write { path: path.to_path_buf(), error }
    })
}

/// The plan's compact JSON, gzipped into `tmp`: written in blocks of [`BUFFER`] bytes,
/// each compressed on a thread of its own while the next is written. One after the other
/// they were the longest thread of `plan --out` at 2,000 pools (160 M instructions of JSON
/// and 54 M of gzip, beside 112 M of text on the main thread). The compressor's error (a
/// full disk) is the one reported; the writer then stops at its next block.
fn write_compressed(tmp: &Path, plan: &Plan) -> std::io::Result<()> {
    let file = BufWriter::with_capacity(BUFFER, File::create(tmp)?);
    // A few blocks in flight: the writer runs ahead of the compressor by that much.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
    std::thread::scope(|s| {
        let compressor = s.spawn(move || -> std::io::Result<()> {
            let mut gz = GzEncoder::new(file, Compression::fast());
            for block in rx {
                gz.write_all(&block)?;
            }
            gz.finish()?.into_inner().map_err(|e| e.into_error())?;
            Ok(())
        });
        // The sender is dropped when this returns, error or not: that ends the compressor's loop.
        let written = write_json(Blocks(tx), plan);
        let compressed = compressor.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        compressed.and(written)
    })
}

/// The compact JSON into `blocks`. The JSON writer makes many small writes: a buffer
/// gathers them into blocks.
fn write_json(blocks: Blocks, plan: &Plan) -> std::io::Result<()> {
    let mut out = BufWriter::with_capacity(BUFFER, blocks);
    crate::json_text::verbatim(|| serde_json::to_writer(&mut out, plan))?;
    out.into_inner().map_err(|e| e.into_error())?;
    Ok(())
}

/// Hands each block its buffer fills on to the compressor's thread.
struct Blocks(std::sync::mpsc::SyncSender<Vec<u8>>);

impl Write for Blocks {
    fn write(&mut self, block: &[u8]) -> std::io::Result<usize> {
        // Gone only when the compressor stopped on an error, which is the one reported.
        self.0.send(block.to_vec()).map_err(|_| std::io::Error::other("the plan's compressor stopped"))?;
        Ok(block.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Read a saved plan: checks the container, the JSON and the format version.
///
/// The JSON text is inflated into memory whole and parsed from there: `serde_json` parses
/// a slice about twice as fast as a stream, which it reads byte by byte (at 100,000 pools,
/// 190 MB of text took about 1.5 s as a stream, a fifth of `apply FILE`). The text is
/// freed once the plan is built; `apply FILE` frees the spec before it reads the plan, so
/// the text and the plan are held where the spec was.
pub fn load(path: &Path) -> Result<Plan, PlanFileError> {
    load_with(path, &super::keys::from_headers())
}

/// [`load`], opening a sealed file with `keys`.
pub fn load_with(path: &Path, keys: &Keyring) -> Result<Plan, PlanFileError> {
    let mut text = Vec::with_capacity(text_size(path));
    // A failing inflater, a bad gzip trailer or bytes after the stream: a damaged file,
    // as when the JSON reader met them.
    open_with(path, keys)?
        .read_to_end(&mut text)
        .map_err(|error| PlanFileError::Corrupt { path: path.to_path_buf(), message: error.to_string() })?;
    let read = parse(&text);
    // A plan of another version may not read as this one's: name the version it has.
    let other_version = read.is_err().then(|| version_of(&text)).flatten().filter(|v| *v != FILE_FORMAT_VERSION);
    drop(text);
    if let Some(found) = other_version {
        return Err(PlanFileError::Version { path: path.to_path_buf(), found });
    }
    // The whole stream inflated and matched its CRC-32 and length: a JSON error is the
    // document's own, not a flipped byte the inflater passed on.
    let plan = read.map_err(|e| json_error(path, e))?;
    if plan.format_version != FILE_FORMAT_VERSION {
        return Err(PlanFileError::Version { path: path.to_path_buf(), found: plan.format_version });
    }
    Ok(plan)
}

/// The `format_version` of a document that looks like a plan (it has a `spec_digest`:
/// a state file, which also has a version, is not one).
fn version_of(text: &[u8]) -> Option<u32> {
    #[derive(serde::Deserialize)]
    struct Head {
        format_version: u32,
        #[allow(dead_code)] // present, or this is no plan: read only to tell that
        spec_digest: serde::de::IgnoredAny,
    }
    // Not a plan's head either: the caller reports the first error, which says more.
    serde_json::from_slice::<Head>(text).ok().map(|h| h.format_version)
}

/// A plan file's JSON text this large or larger (a 100,000-pool plan's is 190 MB) has its
/// change list parsed on the cores ([`parse_on_cores`]); a smaller one on one thread.
const PARSE_ON_CORES_FROM: usize = 8 << 20;

/// The plan in `text`. A large one is parsed on the cores; any error there is left to the
/// plain parse, which reports it with its place in the file as before.
fn parse(bytes: &[u8]) -> serde_json::Result<Plan> {
    // Checked as UTF-8 once, then read as text (`json_text::from_json_bytes`); bytes that
    // are not UTF-8 are read as bytes, for serde_json's own error.
    let Ok(text) = std::str::from_utf8(bytes) else { return serde_json::from_slice(bytes) };
    if text.len() >= PARSE_ON_CORES_FROM
        && crate::par::cores() >= 2
        && let Ok(plan) = parse_on_cores(text)
    {
        return Ok(plan);
    }
    serde_json::from_str(text)
}

/// The plan in `text`, the same as `serde_json::from_slice` reads it, on two threads: one
/// reads the plan with its change list skipped ([`crate::plan::model::skipping_changes`]),
/// the other only the change list, each reading through the other's part. At 100,000
/// pools the changes are about half of the plan's JSON, which was parsed on one core
/// while the other waited. Each change is built once, in a list of its exact size, as the
/// plain parse builds it: parsing them in runs and joining the runs held them twice and
/// raised the peak memory past 600 MiB.
fn parse_on_cores(text: &str) -> serde_json::Result<Plan> {
    /// The plan's change list alone.
    #[derive(serde::Deserialize)]
    struct Changes {
        #[serde(deserialize_with = "crate::model::exact::vec")]
        changes: Vec<crate::plan::ResourceChange>,
    }
    std::thread::scope(|s| {
        let rest = s.spawn(|| crate::plan::model::skipping_changes(|| serde_json::from_str::<Plan>(text)));
        let changes = serde_json::from_str::<Changes>(text);
        // A panic while parsing is a bug: surface it as one thread would.
        let mut plan = rest.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        plan.changes = changes?.changes;
        Ok(plan)
    })
}

/// The size of a plan file's JSON text, to size its buffer once: a plain file's length,
/// or a gzip file's length trailer (the text's size modulo 4 GiB). Only a hint: 0 when it
/// cannot be read, and at most 1 GiB, so a damaged trailer cannot ask for more.
fn text_size(path: &Path) -> usize {
    use std::io::{Seek, SeekFrom};
    let hint = || -> std::io::Result<u64> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        let mut head = [0u8; 2];
        file.read_exact(&mut head)?;
        if head != GZIP_MAGIC || len < 4 {
            return Ok(len);
        }
        let mut trailer = [0u8; 4];
        file.seek(SeekFrom::End(-4))?;
        file.read_exact(&mut trailer)?;
        Ok(u64::from(u32::from_le_bytes(trailer)))
    };
    // A hint that cannot be read costs a few reallocations, never an error: `load` reads
    // the file again and reports what is wrong with it.
    hint().map_or(0, |n| n.min(1 << 30) as usize)
}

/// A plan file's JSON text, inflated as it is read. The gzip trailer (CRC-32 and length)
/// is checked when the end is reached, and bytes after the stream are an error.
pub struct PlanJson {
    inner: Inner,
}

enum Inner {
    // Multi-member: after the plan's member, anything but the end of the file is an error
    // (a damaged or concatenated file), not silently ignored.
    Gzip(BufReader<MultiGzDecoder<BufReader<File>>>),
    /// A plain-JSON plan file from an earlier gpuplan.
    Plain(BufReader<File>),
    /// A sealed plan file's JSON, opened in memory.
    Opened(std::io::Cursor<Vec<u8>>),
}

/// Open a plan file for reading its JSON. Fails on a file that is neither a gzip stream
/// nor JSON.
pub fn open(path: &Path) -> Result<PlanJson, PlanFileError> {
    open_with(path, &super::keys::from_headers())
}

/// [`open`], opening a sealed file with `keys`.
pub fn open_with(path: &Path, keys: &Keyring) -> Result<PlanJson, PlanFileError> {
    let read_error = |error| PlanFileError::Read { path: path.to_path_buf(), error };
    let mut file = BufReader::with_capacity(BUFFER, File::open(path).map_err(read_error)?);
    let head = file.fill_buf().map_err(read_error)?;
    let inner = if crate::state::seal::is_sealed(head) {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(read_error)?;
        let opened = crate::state::seal::open(&bytes, keys).map_err(|error| PlanFileError::Sealing {
            path: path.to_path_buf(),
            verb: "decrypt",
            error,
        })?;
        Inner::Opened(std::io::Cursor::new(opened))
    } else if head.starts_with(&GZIP_MAGIC) {
        Inner::Gzip(BufReader::with_capacity(BUFFER, MultiGzDecoder::new(file)))
    } else if head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        Inner::Plain(file)
    } else if head.is_empty() {
        return Err(PlanFileError::Invalid { path: path.to_path_buf(), message: "the file is empty".into() });
    } else {
        return Err(PlanFileError::Invalid {
            path: path.to_path_buf(),
            message: "it is neither a gzip stream nor JSON".into(),
        });
    };
    Ok(PlanJson { inner })
}

impl Read for PlanJson {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match &mut self.inner {
            Inner::Gzip(r) => r.read(buf),
            Inner::Plain(r) => r.read(buf),
            Inner::Opened(r) => r.read(buf),
        }
    }
}

impl BufRead for PlanJson {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        match &mut self.inner {
            Inner::Gzip(r) => r.fill_buf(),
            Inner::Plain(r) => r.fill_buf(),
            Inner::Opened(r) => r.fill_buf(),
        }
    }
    fn consume(&mut self, n: usize) {
        match &mut self.inner {
            Inner::Gzip(r) => r.consume(n),
            Inner::Plain(r) => r.consume(n),
            Inner::Opened(r) => r.consume(n),
        }
    }
}

/// Sort a JSON reading error: a cut-off or garbled document is a damaged file;
/// well-formed JSON of another shape is not a plan.
fn json_error(path: &Path, e: serde_json::Error) -> PlanFileError {
    let path = path.to_path_buf();
    if e.is_data() {
        PlanFileError::Invalid { path, message: e.to_string() }
    } else {
        PlanFileError::Corrupt { path, message: e.to_string() }
    }
}

#[cfg(test)]
mod tests;
