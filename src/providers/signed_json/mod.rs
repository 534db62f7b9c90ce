//! The shared core of the two signed-JSON clouds, Tencent Cloud (`tencentcloud/`) and
//! Alibaba Cloud (`alicloud/`): what they do alike lives here once, and each cloud keeps
//! only what differs (its signer in `signing/`, endpoints, field names, its data).
//!
//! - `errors.rs`: error classification as data: each cloud's `code → class` table and
//!   hints, read by one classifier.
//! - `run_command.rs`: the run-command agents' answers (TAT, Cloud Assistant): status
//!   words as data → a run's state, and their base64 output.
//!
//! Nothing here knows a wire format or a cloud's name; a cloud passes its own.

pub mod errors;
pub mod run_command;
