//! `gpuplan sim ...`: the arguments of the embedded cloud's commands (run in `sim.rs`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;

use super::value_parsers::parse_duration;

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Reclaim spot nodes of a pool, as the cloud would
    Interrupt {
        #[arg(value_name = "POOL")]
        pool: String,
        /// How many nodes
        #[arg(long, value_name = "N", default_value_t = 1)]
        count: u32,
    },
    /// Limit live nodes per instance type in a zone, or restore the default
    #[command(group = clap::ArgGroup::new("kind").required(true).args(["spot", "on_demand"]))]
    #[command(group = clap::ArgGroup::new("amount").required(true).args(["limit", "reset"]))]
    Capacity {
        #[arg(value_name = "ZONE")]
        zone: String,
        /// Spot capacity
        #[arg(long)]
        spot: bool,
        /// On-demand capacity
        #[arg(long)]
        on_demand: bool,
        /// Live nodes allowed per instance type
        #[arg(long, value_name = "N")]
        limit: Option<u32>,
        /// Back to the default (`GPUPLAN_SIM_ZONE_CAPACITY`, else 1,000)
        #[arg(long)]
        reset: bool,
    },
    /// Launch unmanaged nodes (no gpuplan tags), as if made by hand: to try `import`
    Launch {
        /// Catalog GPU model, e.g. `A100-40GB`
        #[arg(long, value_name = "MODEL")]
        gpu: String,
        /// GPUs per node [default: the cheapest type with this GPU]
        #[arg(long, value_name = "N")]
        gpus_per_node: Option<u32>,
        /// How many nodes
        #[arg(long, value_name = "N", default_value_t = 1)]
        count: u32,
        /// Spot nodes (default on-demand)
        #[arg(long)]
        spot: bool,
        /// Zone to launch in
        #[arg(long, value_name = "ZONE", default_value = "us-east-1a")]
        zone: String,
    },
    /// Move the sim clock forward, e.g. `10h` or `31days`: nodes accrue hours, jobs progress
    Advance {
        #[arg(value_name = "DUR", value_parser = parse_duration)]
        by: Duration,
    },
    /// Load a price and capacity trace (CSV: time,provider,region,gpu,capacity,price_usd_hour,available_nodes)
    Trace {
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Give a node a GPU fault its health reads report until `--clear`
    Fault(SimFault),
    /// List the Capacity Block offerings the sim sells for an instance type (fixed windows, paid up front)
    CapacityBlocks {
        /// Instance type, e.g. `p5.48xlarge`
        #[arg(long, value_name = "TYPE")]
        instance_type: String,
        /// Instances in the block
        #[arg(long, default_value_t = 1)]
        count: u32,
        /// The window's length, in whole days (e.g. `7d`)
        #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "1d")]
        duration: Duration,
        /// The region
        #[arg(long, default_value = "us-east-1")]
        region: String,
        /// Only this zone
        #[arg(long)]
        zone: Option<String>,
        /// The earliest start (RFC 3339); default: the sim clock
        #[arg(long, value_name = "TIME")]
        start: Option<String>,
    },
}

/// `gpuplan sim fault NODE ...`: one fault at a time, kept in the sim world.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("fault").required(true)
    .args(["xid", "ecc", "missing_gpu", "readiness_fail", "from", "clear"]))]
pub struct SimFault {
    /// The node's id (`gpuplan nodes` or `gpuplan state show` lists them)
    #[arg(value_name = "NODE")]
    pub node: String,
    /// An XID from NVIDIA's catalog, e.g. 79 (fallen off the bus)
    #[arg(long, value_name = "N")]
    pub xid: Option<u32>,
    /// The GPU's index on the node [default: 0]
    #[arg(long, value_name = "I")]
    pub gpu: Option<u32>,
    /// Uncorrectable ECC errors
    #[arg(long)]
    pub ecc: bool,
    /// One GPU fewer than the shape promises answers
    #[arg(long)]
    pub missing_gpu: bool,
    /// The node's readiness check fails
    #[arg(long)]
    pub readiness_fail: bool,
    /// A raw capture (nvidia-smi XML, DCGM JSON, kernel `NVRM: Xid` lines) as the node's answer
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// The node answers healthy again
    #[arg(long)]
    pub clear: bool,
}
