//! Client-side encryption of what gpuplan stores (docs/design/secrets.md, "Encryption
//! at rest"): the state and its backup, the remote state object, the journal's lines and
//! saved plan files, sealed with AES-256-GCM (ring's) under a key from the spec's
//! `encryption {}` block ([`Keyring`], in [`keys`]).
//!
//! A sealed file is one JSON object, `{"encoding": "gzip+aes-256-gcm+base64",
//! "format_version", "serial", "lineage", "key_provider": {...}, "state": "..."}`: the
//! remote envelope's shape (`super::envelope`), so a gpuplan that does not know the
//! encoding refuses it by name, lineage and serial stay readable for the
//! compare-and-swap checks, and the key provider's metadata (a salt, a wrapped data key,
//! never a key) travels with the file. The body is base64 of a 12-byte random nonce and
//! the AES-256-GCM ciphertext of the gzip-compressed text; every field before it is the
//! associated data, so an edited header fails to open like a wrong key.
//!
//! Nothing here reads the spec or calls a cloud: the key service comes in through
//! [`crate::model::encryption::DataKeys`].

pub mod keys;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::io::{Read, Write};

use base64::Engine as _;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use serde::{Deserialize, Serialize};

pub use keys::{KeyMeta, Keyring, SealError};

/// The encoding a sealed file names first.
pub const ENCODING: &str = "gzip+aes-256-gcm+base64";

/// A sealed file's plain part: everything but the body, the ciphertext's associated data.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Header {
    pub encoding: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_version: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<String>,
    pub key_provider: KeyMeta,
}

/// Whether `bytes` are a sealed file (its first field names [`ENCODING`]).
pub fn is_sealed(bytes: &[u8]) -> bool {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
    bytes[start..].starts_with(format!("{{\"encoding\":\"{ENCODING}\"").as_bytes())
}

/// What a sealed file's header says, and its body (`field` names it: `state` or `plan`).
#[derive(Deserialize)]
struct Sealed<'a> {
    #[serde(flatten)]
    header: Header,
    #[serde(alias = "plan", borrow)]
    state: Cow<'a, str>,
}

/// The header of a sealed file, without opening it (`None` when `bytes` are not one).
pub fn header(bytes: &[u8]) -> Option<Header> {
    is_sealed(bytes).then(|| serde_json::from_slice::<Sealed>(bytes).ok().map(|s| s.header)).flatten()
}

/// Seal `text` (compressed first) under the keyring's write key: the file's bytes, one
/// JSON line. `field` names the body (`state`, `plan`); `head` gives the plain fields.
pub fn seal(text: &[u8], field: &str, head: Head, keys: &Keyring) -> Result<Vec<u8>, SealError> {
    let (meta, key) = keys.write_key()?;
    let mut gz = flate2::write::GzEncoder::new(Vec::with_capacity(text.len() / 8), flate2::Compression::fast());
    let packed = gz.write_all(text).and_then(|()| gz.finish()).map_err(|e| SealError::damaged(e.to_string()))?;
    let header = Header {
        encoding: ENCODING.to_string(),
        format_version: head.format_version,
        serial: head.serial,
        lineage: head.lineage,
        key_provider: meta,
    };
    let aad = serde_json::to_vec(&header).map_err(|e| SealError::damaged(e.to_string()))?;
    let body = encrypt(&key, &packed, &aad)?;
    let mut out = aad;
    out.pop(); // the header's closing brace: the body is its last field
    out.extend_from_slice(format!(",\"{field}\":\"").as_bytes());
    out.extend_from_slice(base64::engine::general_purpose::STANDARD.encode(&body).as_bytes());
    out.extend_from_slice(b"\"}\n");
    Ok(out)
}

/// The plain fields of a sealed file: the state's, or none for a plan.
#[derive(Default)]
pub struct Head {
    pub format_version: Option<u32>,
    pub serial: Option<u64>,
    pub lineage: Option<String>,
}

/// Open a sealed file's bytes: the text that was sealed. `Err` says which key provider
/// failed and why.
pub fn open(bytes: &[u8], keys: &Keyring) -> Result<Vec<u8>, SealError> {
    let sealed: Sealed =
        serde_json::from_slice(bytes).map_err(|e| SealError::damaged(format!("a bad sealed file: {e}")))?;
    let body = base64::engine::general_purpose::STANDARD
        .decode(sealed.state.as_bytes())
        .map_err(|e| SealError::damaged(format!("the sealed body is not base64: {e}")))?;
    let aad = serde_json::to_vec(&sealed.header).map_err(|e| SealError::damaged(e.to_string()))?;
    let packed = keys.open_with(&sealed.header.key_provider, |key| decrypt(key, &body, &aad))?;
    let mut text = Vec::with_capacity(packed.len() * 8);
    flate2::read::GzDecoder::new(packed.as_slice())
        .read_to_end(&mut text)
        .map_err(|e| SealError::damaged(format!("the sealed body is not gzip: {e}")))?;
    Ok(text)
}

fn cipher(key: &[u8; 32]) -> LessSafeKey {
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("an AES-256 key is 32 bytes"))
}

/// `nonce || ciphertext || tag` of `plain` under `key`, with `aad` bound to it. The
/// nonce is 96 random bits: a key seals a few files and journal lines per process, far
/// below the 2^32 messages random nonces are good for.
pub(crate) fn encrypt(key: &[u8; 32], plain: &[u8], aad: &[u8]) -> Result<Vec<u8>, SealError> {
    let mut nonce = [0u8; NONCE_LEN];
    keys::random(&mut nonce)?;
    let mut out = Vec::with_capacity(NONCE_LEN + plain.len() + AES_256_GCM.tag_len());
    out.extend_from_slice(&nonce);
    let mut sealed = plain.to_vec();
    cipher(key)
        .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), &mut sealed)
        .map_err(|_| SealError::damaged("AES-GCM refused to encrypt".into()))?;
    out.extend_from_slice(&sealed);
    Ok(out)
}

/// The plain bytes of `nonce || ciphertext || tag`; `None` when the key does not open it
/// (a wrong key, or bytes or associated data that were altered).
pub(crate) fn decrypt(key: &[u8; 32], body: &[u8], aad: &[u8]) -> Option<Vec<u8>> {
    if body.len() < NONCE_LEN + AES_256_GCM.tag_len() {
        return None;
    }
    let (nonce, sealed) = body.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut buf = sealed.to_vec();
    let plain = cipher(key).open_in_place(nonce, Aad::from(aad), &mut buf).ok()?.len();
    buf.truncate(plain);
    Some(buf)
}
