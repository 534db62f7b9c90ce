//! The remote state object's body (docs/design/state-and-locks.md, "Compressed remote
//! state"): the state file's text, gzip-compressed and base64-encoded in a small JSON
//! envelope, `{"encoding": "gzip+base64", "format_version", "serial", "lineage", "state"}`.
//!
//! One object, so a write stays one compare-and-swap. The envelope keeps the header
//! fields in plain JSON: a conflict names the serial found without inflating anything,
//! and a gpuplan that reads only format 1 refuses it by its `format_version` ("written by
//! a newer gpuplan") instead of calling gzip bytes a corrupt state. The encoding is named
//! first, so a reader tells an envelope from a plain state file by its first bytes.

use std::borrow::Cow;
use std::io::{Read, Write};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::model::State;

/// The one encoding written and read.
pub const ENCODING: &str = "gzip+base64";

#[derive(Serialize, Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    encoding: Cow<'a, str>,
    format_version: u32,
    serial: u64,
    #[serde(borrow)]
    lineage: Cow<'a, str>,
    #[serde(borrow)]
    state: Cow<'a, str>,
}

/// `text` (the state file's text for `state`, with `serial` and `format_version` as
/// written) in its envelope.
pub fn encode(text: &[u8], state: &State, serial: u64, format_version: u32) -> std::io::Result<Vec<u8>> {
    let mut gz = flate2::write::GzEncoder::new(Vec::with_capacity(text.len() / 8), flate2::Compression::fast());
    gz.write_all(text)?;
    let packed = base64::engine::general_purpose::STANDARD.encode(gz.finish()?);
    let envelope = Envelope {
        encoding: ENCODING.into(),
        format_version,
        serial,
        lineage: state.lineage.as_str().into(),
        state: packed.into(),
    };
    let mut out = serde_json::to_vec(&envelope)?;
    out.push(b'\n');
    Ok(out)
}

/// Whether `bytes` are an envelope rather than a plain state file.
pub fn is_envelope(bytes: &[u8]) -> bool {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
    bytes[start..].starts_with(b"{\"encoding\"")
}

/// The state file's text inside `bytes` (`bytes` themselves when they are plain JSON).
/// `Err` says what is wrong, for a corrupt-state error.
pub fn decode(bytes: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    if !is_envelope(bytes) {
        return Ok(Cow::Borrowed(bytes));
    }
    let envelope: Envelope = serde_json::from_slice(bytes).map_err(|e| format!("a bad state envelope: {e}"))?;
    if envelope.encoding != ENCODING {
        return Err(format!(
            "the state is encoded as `{}`, which this gpuplan does not read (it reads `{ENCODING}`): a newer gpuplan wrote it",
            envelope.encoding
        ));
    }
    let packed = base64::engine::general_purpose::STANDARD
        .decode(envelope.state.as_bytes())
        .map_err(|e| format!("the state envelope's body is not base64: {e}"))?;
    let mut text = Vec::with_capacity(packed.len() * 8);
    flate2::read::GzDecoder::new(packed.as_slice())
        .read_to_end(&mut text)
        .map_err(|e| format!("the state envelope's body is not gzip: {e}"))?;
    Ok(Cow::Owned(text))
}
