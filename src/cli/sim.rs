//! `gpuplan sim ...`: the embedded cloud's own controls (spot reclaims, capacity, its clock).
//!
//! These act on `state/<workspace>.sim.json` directly, as the cloud itself would; they do
//! not take the state lock and never change gpuplan's state. The sim's settings come from
//! `GPUPLAN_SIM_*` only (the spec is not loaded, so a broken spec cannot block them).

use super::output;
use super::{CliError, ExitStatus, Settings, SimCommand, SimFault};
use crate::addr::{Address, Kind, is_ident};
use crate::engine::providers::sim_config;
use crate::providers::Capacity;
use crate::providers::sim::SimCloud;

pub fn run(settings: &Settings, command: &SimCommand) -> miette::Result<ExitStatus> {
    match command {
        SimCommand::Interrupt { pool, count } => interrupt(settings, pool, *count),
        SimCommand::Capacity { zone, spot, on_demand: _, limit, reset: _ } => {
            let capacity = if *spot { Capacity::Spot } else { Capacity::OnDemand };
            set_capacity(settings, zone, capacity, *limit)
        }
        SimCommand::Launch { gpu, gpus_per_node, count, spot, zone } => {
            let capacity = if *spot { Capacity::Spot } else { Capacity::OnDemand };
            let ids = open(settings)?.launch_unmanaged(gpu, *gpus_per_node, *count, capacity, zone)?;
            output::stdout(&ids.iter().map(|id| format!("{id}\n")).collect::<String>());
            output::stderr(&format!(
                "launched {} unmanaged {capacity} {} with {gpu} in {zone}; `gpuplan import --provider sim` lists them\n",
                ids.len(),
                crate::model::words::plural(ids.len(), "node", "nodes")
            ));
            Ok(ExitStatus::Success)
        }
        SimCommand::Trace { file } => trace(settings, file),
        SimCommand::Fault(f) => fault(settings, f),
        SimCommand::CapacityBlocks { instance_type, count, duration, region, zone, start } => {
            let q = BlockQuery { instance_type, count: *count, duration: *duration, region, zone, start };
            capacity_blocks(settings, &q)
        }
        SimCommand::Advance { by } => {
            let now = open(settings)?.advance(*by)?;
            output::stdout(&format!("{}\n", crate::model::time::rfc3339_ms(now)));
            output::stderr(&format!("the sim clock moved forward {}\n", humantime::format_duration(*by)));
            Ok(ExitStatus::Success)
        }
    }
}

/// `sim trace FILE`: the sim's prices and capacity follow the trace as its clock passes
/// each row (the world is created at `GPUPLAN_SIM_START` if there is none).
fn trace(settings: &Settings, file: &std::path::Path) -> miette::Result<ExitStatus> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| CliError::new(format!("cannot read the trace `{}`: {e}", file.display())))?;
    let rows = crate::providers::sim::trace::parse(&text).map_err(|e| {
        CliError::new(format!("the trace `{}` is not valid:\n{e}", file.display()))
            .hint(format!("a trace is a CSV starting with `{}`", crate::providers::sim::trace::HEADER))
    })?;
    let (n, first, last) = (rows.len(), rows.first().map(|r| r.at_ms), rows.last().map(|r| r.at_ms));
    let mut regions: Vec<&str> = rows.iter().map(|r| r.region.as_str()).collect();
    regions.sort();
    regions.dedup();
    let regions = regions.join(", ");
    open(settings)?.load_trace(rows.clone())?;
    let at = |ms: Option<u64>| ms.map_or("-".to_string(), crate::model::time::rfc3339_ms);
    output::stdout(&format!("loaded {n} trace row(s) for {regions}, from {} to {}\n", at(first), at(last)));
    Ok(ExitStatus::Success)
}

/// `sim capacity-blocks`'s arguments.
struct BlockQuery<'a> {
    instance_type: &'a str,
    count: u32,
    duration: std::time::Duration,
    region: &'a str,
    zone: &'a Option<String>,
    start: &'a Option<String>,
}

/// `sim capacity-blocks`: the offerings a `reservation { kind = "capacity_block" }` of this
/// shape chooses from, cheapest first, at the sim clock.
fn capacity_blocks(settings: &Settings, q: &BlockQuery<'_>) -> miette::Result<ExitStatus> {
    let secs = q.duration.as_secs();
    if secs == 0 || !secs.is_multiple_of(86_400) {
        return Err(CliError::new(format!(
            "a Capacity Block lasts whole days, not {}",
            humantime::format_duration(q.duration)
        ))
        .hint("give `--duration` in days, e.g. `--duration 7d`")
        .into());
    }
    let start_ms = match q.start {
        None => 0,
        Some(t) => {
            let at = humantime::parse_rfc3339_weak(t).map_err(|e| {
                CliError::new(format!("`--start {t}` is not a time: {e}")).hint("e.g. `--start 2027-01-10T00:00:00Z`")
            })?;
            let since = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        }
    };
    let query = crate::model::reservation::OfferingQuery {
        instance_type: q.instance_type.to_string(),
        count: q.count,
        start_ms,
        hours: u32::try_from(secs / 3600).unwrap_or(u32::MAX),
        zone: q.zone.clone(),
    };
    let now = open(settings)?.now_ms();
    let offers = crate::providers::sim::reservations::offerings(q.region, &query, now)
        .map_err(|e| CliError::new(e.to_string()).hint("`gpuplan offers GPU` lists the instance types and zones"))?;
    let mut out = String::from(
        "OFFERING                                  ZONE          START              END                COUNT  UPFRONT_USD\n",
    );
    for o in &offers {
        out.push_str(&format!(
            "{:<41} {:<13} {:<18} {:<18} {:>5}  {:>11}\n",
            o.id,
            o.zone,
            crate::model::reservation::minute(o.start_ms),
            crate::model::reservation::minute(o.end_ms),
            o.count,
            crate::model::money::usd(o.upfront_usd)
        ));
    }
    output::stdout(&out);
    Ok(ExitStatus::Success)
}

fn interrupt(settings: &Settings, pool: &str, count: u32) -> miette::Result<ExitStatus> {
    let pool = pool_address(pool)?;
    let path = settings.workspace().sim_path();
    // Reclaiming from a cloud that was never created would only create an empty one.
    let ids = if path.exists() { open(settings)?.interrupt(&pool, count)? } else { Vec::new() };
    if ids.is_empty() {
        return Err(CliError::new(format!("no live spot node of `{pool}` in the simulated cloud `{}`", path.display()))
            .hint(format!(
                "only spot nodes are reclaimed: give `{pool}` a `mix {{ spot_percent = ... }}` and run `gpuplan apply` first"
            ))
            .into());
    }
    output::stdout(&ids.iter().map(|id| format!("{id}\n")).collect::<String>());
    let noun = if ids.len() == 1 { "node" } else { "nodes" };
    output::stderr(&format!("reclaimed {} spot {noun} of {pool}\n", ids.len()));
    if (ids.len() as u32) < count {
        output::stderr(&format!("note: asked for {count}; that was every live spot node of {pool}\n"));
    }
    Ok(ExitStatus::Success)
}

fn set_capacity(settings: &Settings, zone: &str, capacity: Capacity, limit: Option<u32>) -> miette::Result<ExitStatus> {
    let cloud = open(settings)?;
    cloud.set_capacity(zone, capacity, limit)?;
    let now = cloud.capacity(zone, capacity);
    let how = if limit.is_some() { "set" } else { "default" };
    output::stdout(&format!("{zone} {capacity}: {now} live nodes per instance type ({how})\n"));
    Ok(ExitStatus::Success)
}

fn open(settings: &Settings) -> miette::Result<std::sync::Arc<SimCloud>> {
    let ws = settings.workspace();
    let config = sim_config(&ws, None)?;
    Ok(SimCloud::open(&ws.sim_path(), config)?)
}

/// `train`, `gpu_pool.train` or `gpu_pool.train[0]`.
fn pool_address(text: &str) -> Result<Address, CliError> {
    let hint = "name a pool as `train` or `gpu_pool.train`";
    if !text.contains('.') {
        if is_ident(text) {
            return Ok(Address::new(Kind::GpuPool, text));
        }
        return Err(CliError::new(format!("`{text}` is not a pool name")).hint(hint));
    }
    match text.parse::<Address>() {
        Ok(a) if a.kind == Kind::GpuPool => Ok(a),
        Ok(a) => Err(CliError::new(format!("`{a}` is a {}, not a gpu_pool", a.kind)).hint(hint)),
        Err(e) => Err(CliError::new(e.to_string()).hint(hint)),
    }
}

/// `sim fault NODE ...`: the node's health reads answer with this fault until `--clear`.
fn fault(settings: &Settings, f: &SimFault) -> miette::Result<ExitStatus> {
    use crate::providers::sim::Fault;
    if f.gpu.is_some() && f.xid.is_none() && !f.ecc {
        return Err(CliError::new("`--gpu` names the GPU of an `--xid` or `--ecc` fault")
            .hint("e.g. `gpuplan sim fault NODE --xid 79 --gpu 3`")
            .into());
    }
    let path = settings.workspace().sim_path();
    if !path.exists() {
        return Err(CliError::new(format!("no simulated cloud at `{}`", path.display()))
            .hint("run `gpuplan apply` first: faults are given to nodes it launched")
            .into());
    }
    let cloud = open(settings)?;
    let fault = if f.clear {
        None
    } else if let Some(code) = f.xid {
        Some(Fault::Xid { code, gpu: f.gpu })
    } else if f.ecc {
        Some(Fault::Ecc { gpu: f.gpu })
    } else if f.missing_gpu {
        Some(Fault::MissingGpu)
    } else if f.readiness_fail {
        Some(Fault::ReadinessFail)
    } else if let Some(file) = &f.from {
        // First seen now, by the sim's clock (a capture says what, not when).
        Some(Fault::Capture(super::health::capture(file, cloud.now_ms())?))
    } else {
        // clap's group requires one of the above.
        return Err(
            CliError::new("name a fault: --xid, --ecc, --missing-gpu, --readiness-fail, --from or --clear").into()
        );
    };
    let cleared = fault.is_none();
    let failed = cloud.set_fault(&f.node, fault)?;
    let node = &f.node;
    if cleared {
        output::stderr(&format!("{node}: its health reads answer healthy again\n"));
    } else {
        output::stderr(&format!(
            "{node}: its health reads report the fault until `gpuplan sim fault {node} --clear`\n"
        ));
    }
    for run in failed {
        output::stdout(&format!("{run}\n"));
        output::stderr(&format!("run {run} on {node} failed with its GPU\n"));
    }
    Ok(ExitStatus::Success)
}
