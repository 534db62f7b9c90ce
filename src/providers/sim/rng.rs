//! Deterministic ids and random draws from the seed.
//!
//! Ids come from SHA-256 over (seed, counter) so that the same seed and the same calls give
//! the same ids in every run: plan snapshots and benchmarks stay reproducible. Draws
//! (failure injection) use splitmix64 over (seed, stream, n): cheap, no extra crate.

use sha2::{Digest, Sha256};

/// `prefix` + 17 lowercase hex digits, like EC2's `i-0123456789abcdef0`.
pub fn id(prefix: &str, seed: u64, counter: u64) -> String {
    let mut h = Sha256::new();
    h.update(b"gpuplan-sim\0");
    h.update(seed.to_le_bytes());
    h.update(counter.to_le_bytes());
    let digest = h.finalize();
    let mut hex = crate::hex::hex(&digest);
    hex.truncate(17);
    format!("{prefix}{hex}")
}

/// Independent streams of draws, so that adding draws of one kind never shifts another.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    CallFailure = 1,
    JobFailure = 2,
}

/// A uniform draw in `[0, 1)` for the `n`th event of `stream`.
pub fn unit(seed: u64, stream: Stream, n: u64) -> f64 {
    let x = splitmix64(splitmix64(seed ^ (stream as u64).wrapping_mul(0xA076_1D64_78BD_642F)) ^ n);
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// True with probability `rate` for the `n`th event of `stream`.
pub fn chance(seed: u64, stream: Stream, n: u64, rate: f64) -> bool {
    rate > 0.0 && unit(seed, stream, n) < rate
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
