//! Reading GPU health (`docs/design/gpu-health.md`): NVIDIA's XID catalog as data
//! ([`xid`]) and the parsers of what the node tools print (`nvidia-smi -q -x`, `dcgmi
//! health -c -j`, the kernel log's `NVRM: Xid` lines), each turning a raw capture into
//! [`crate::model::health::Finding`]s. Pure functions over text: the providers run the
//! commands, the plan decides what a finding means for a pool.

pub mod parse;
pub mod xid;
