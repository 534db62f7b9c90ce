//! The shared core of the two signed-JSON clouds, Tencent Cloud (`tencentcloud/`) and
//! Alibaba Cloud (`alicloud/`): what they do alike lives here once, and each cloud keeps
//! only what differs (its signer in `signing/`, endpoints, field names, its data).
//!
//! - `errors.rs`: error classification as data: each cloud's `code → class` table and
//!   hints, read by one classifier.
//!
//! Nothing here knows a wire format or a cloud's name; a cloud passes its own.

pub mod errors;
