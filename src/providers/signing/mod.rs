//! Request signing for the clouds gpuplan calls over plain HTTP: Tencent Cloud's
//! TC3-HMAC-SHA256 ([`tc3`]) and Alibaba Cloud's ACS3-HMAC-SHA256 ([`acs3`]).
//!
//! Pure functions over bytes and strings: no clock, no network, no secrets kept. Each
//! signer returns every intermediate value (canonical request, string to sign) so the
//! known-answer tests compare them with the vendors' worked examples byte for byte, and
//! the fake endpoints in `tests/` recompute signatures with the same steps.

pub mod acs3;
pub mod tc3;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Lowercase hex of `bytes` (the crate's one [`crate::hex::hex`], named here too because
/// the signers' known-answer tests and fake endpoints spell signatures with it).
pub use crate::hex::hex;

/// Lowercase hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// HMAC-SHA256 of `msg` under `key`, raw bytes.
pub fn hmac_sha256(key: &[u8], msg: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length, so `new_from_slice` cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!("HMAC takes any key"));
    mac.update(msg);
    mac.finalize().into_bytes().to_vec()
}

/// Compare two signatures without leaking where they differ through timing.
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// RFC 3986 percent-encoding of UTF-8 bytes as Alibaba Cloud specifies it: unreserved
/// characters `A-Z a-z 0-9 - _ . ~` stay, everything else becomes `%XY` (uppercase hex),
/// so a space is `%20`, `*` is `%2A` and `~` is left alone.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The UTC date `YYYY-MM-DD` of a unix timestamp (Tencent's credential scope).
pub fn utc_date(unix_secs: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix_secs);
    humantime::format_rfc3339_seconds(t).to_string()[..10].to_string()
}

/// ISO 8601 UTC `YYYY-MM-DDTHH:MM:SSZ` of a unix timestamp (Alibaba's `x-acs-date`).
pub fn iso8601(unix_secs: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix_secs);
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoders() {
        assert_eq!(hex(&[0, 15, 255]), "000fff");
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(percent_encode("a b*c~d/é"), "a%20b%2Ac~d%2F%C3%A9");
        assert_eq!(utc_date(1551113065), "2019-02-25");
        assert_eq!(iso8601(1698315752), "2023-10-26T10:22:32Z");
        assert!(constant_time_eq("abc", "abc") && !constant_time_eq("abc", "abd") && !constant_time_eq("a", "ab"));
    }
}
