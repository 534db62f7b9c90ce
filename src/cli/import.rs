//! `gpuplan import --provider NAME [--region R] [--filter K=V]... [--generate-config-out
//! FILE]`: the GPU instances no gpuplan state owns, grouped into pools (one per instance
//! type and image, zones joined, `desired` what runs, a `mix` that reproduces the
//! spot/on-demand split), as a table, or written to a new file as `gpu_pool` and
//! `import {}` blocks. Reads the cloud only; never writes over an existing file.
//! `--provider` may be left out when the spec has one provider block. Terraform's form,
//! `gpuplan import ADDR ID...`, is `import_ids.rs`.

use std::collections::BTreeMap;
use std::io::Write;

use super::output;
use super::{CliError, ExitStatus, ImportArgs, Settings, runtime};
use crate::model::ProviderKind;
use crate::providers::{Capacity, Node};
use crate::spec::Spec;

pub fn run(settings: &Settings, args: &ImportArgs) -> miette::Result<ExitStatus> {
    if let Some(address) = &args.address {
        return super::import_ids::run(settings, address, &args.ids, args.provider.as_deref());
    }
    let spec = match crate::spec::load_dir(&settings.dir, &settings.load_options()) {
        Ok(l) if !l.diags.has_errors() => l.spec,
        _ => return Err(CliError::new("the spec does not load").hint("run `gpuplan validate`").into()),
    };
    let provider = provider_name(&spec, args.provider.as_deref())?;
    let block = spec.providers.get(&provider).ok_or_else(|| {
        CliError::new(format!("the spec has no provider `{provider}`"))
            .hint(format!("add `provider \"{provider}\" {{ ... }}` first: its credentials and endpoint are used"))
    })?;
    let kind = block.kind.value.ok_or_else(|| CliError::new(format!("provider `{provider}` has no known kind")))?;
    let region =
        args.region.clone().or_else(|| block.region.as_ref().map(|r| r.value.clone())).ok_or_else(|| {
            CliError::new(format!("no region: provider `{provider}` sets none")).hint("pass --region R")
        })?;
    let filters = parse_filters(&args.filter)?;
    let nodes = list(settings, &spec, &provider, &region, &filters)?;
    let pools = group(&nodes, kind, &provider, &region);
    if pools.is_empty() {
        output::stderr(&format!("No unmanaged GPU instances in {provider} region {region}.\n"));
        return Ok(ExitStatus::Success);
    }
    for p in pools.iter().filter(|p| p.uneven()) {
        output::stderr(&format!(
            "warning: `gpu_pool.{}` runs unevenly over {}: gpuplan spreads a pool's nodes evenly over its zones, so its plan will move some of them; give it one zone, or split it\n",
            p.name,
            p.zones().join(", ")
        ));
    }
    match &args.generate_config_out {
        None => output::stdout(&table(&pools)),
        Some(path) => {
            let path = settings.resolve_path(path);
            write_new(&path, &hcl(&pools))?;
            let n: usize = pools.iter().map(|p| p.nodes.len()).sum();
            output::stderr(&format!(
                "Wrote {} pool(s) and {} import block(s) for {n} instance(s) to {}\nhint: review it, then `gpuplan plan` shows them as `import`\n",
                pools.len(),
                pools.len(),
                path.display()
            ));
        }
    }
    Ok(ExitStatus::Success)
}

/// `--provider`, else the spec's only provider block; several are an error naming them.
fn provider_name(spec: &Spec, given: Option<&str>) -> Result<String, CliError> {
    if let Some(name) = given {
        return Ok(name.to_string());
    }
    let names: Vec<&String> = spec.providers.keys().collect();
    match names.as_slice() {
        [only] => Ok(only.to_string()),
        [] => Err(CliError::new("the spec has no provider block to look in")
            .hint("add one, e.g. `provider \"aws\" { region = \"us-east-1\" }`, then run `gpuplan import` again")),
        several => {
            let listed: Vec<String> = several.iter().map(|n| format!("`{n}`")).collect();
            Err(CliError::new(format!("the spec has {} provider blocks: {}", several.len(), listed.join(", ")))
                .hint(format!("say which to look in: `--provider {}`", several[0])))
        }
    }
}

fn parse_filters(raw: &[String]) -> Result<Vec<(String, String)>, CliError> {
    raw.iter()
        .map(|f| match f.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(CliError::new(format!("`--filter {f}` is not KEY=VALUE")).hint("e.g. --filter team=ml")),
        })
        .collect()
}

fn list(
    settings: &Settings,
    spec: &Spec,
    provider: &str,
    region: &str,
    filters: &[(String, String)],
) -> Result<Vec<Node>, miette::Report> {
    let ws = settings.workspace().with_backend(spec).reading();
    let empty = crate::state::State::new("gpuplan-import".into());
    let providers = crate::engine::providers::build(&ws, spec, &empty)?;
    let p =
        providers.get(provider).ok_or_else(|| CliError::new(format!("provider `{provider}` could not be set up")))?;
    let listed = runtime::block_on(async {
        crate::providers::ports::adoption_of(p.as_ref(), crate::providers::ports::LIST_UNMANAGED)?
            .list_unmanaged(region, filters)
            .await
    })?;
    listed.map_err(|e| CliError::new(format!("listing instances in {provider} {region} failed: {e}")).into())
}

/// One generated pool: instances of one type and image.
struct Pool {
    name: String,
    provider: String,
    region: String,
    gpu: String,
    gpus: u32,
    instance_type: String,
    image: Option<String>,
    nodes: Vec<Node>,
}

/// One pool per (instance type, image), instances by id; types the catalog does not
/// know to have GPUs are left out.
fn group(nodes: &[Node], kind: ProviderKind, provider: &str, region: &str) -> Vec<Pool> {
    let cat = crate::catalog::catalog();
    let mut by: BTreeMap<(String, Option<String>), Vec<Node>> = BTreeMap::new();
    for n in nodes.iter().filter(|n| n.is_live()) {
        by.entry((n.instance_type.clone(), n.image.clone())).or_default().push(n.clone());
    }
    let mut names: BTreeMap<String, u32> = BTreeMap::new();
    let mut out = Vec::new();
    for ((itype, image), mut nodes) in by {
        let Some(t) = cat.instance_type(kind, &itype) else { continue };
        nodes.sort_by(|a, b| a.id.cmp(&b.id));
        let base: String = format!("imported_{}", itype.replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
        let seen = names.entry(base.clone()).or_default();
        *seen += 1;
        let name = if *seen == 1 { base } else { format!("{base}_{seen}") };
        out.push(Pool {
            name,
            provider: provider.to_string(),
            region: region.to_string(),
            gpu: t.gpu.clone(),
            gpus: t.gpus,
            instance_type: itype,
            image,
            nodes,
        });
    }
    out
}

impl Pool {
    fn zones(&self) -> Vec<&str> {
        let mut z: Vec<&str> = self.nodes.iter().map(|n| n.zone.as_str()).collect();
        z.sort_unstable();
        z.dedup();
        z
    }
    /// More than one node apart between two of its zones: not what an even spread gives.
    fn uneven(&self) -> bool {
        let per: Vec<usize> = self.zones().iter().map(|z| self.nodes.iter().filter(|n| n.zone == *z).count()).collect();
        per.iter().max().zip(per.iter().min()).is_some_and(|(max, min)| max - min > 1)
    }
    fn on_demand(&self) -> usize {
        self.nodes.iter().filter(|n| n.capacity == Capacity::OnDemand).count()
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

fn list_text(items: &[&str]) -> String {
    format!("[{}]", items.iter().map(|s| quote(s)).collect::<Vec<_>>().join(", "))
}

/// The pools and their import blocks as HCL. `on_demand_base` is the on-demand count and
/// every other node spot, so the split is exactly what runs.
fn hcl(pools: &[Pool]) -> String {
    let mut out = String::from(
        "# Written by `gpuplan import`: the instances below already run; `gpuplan apply`\n# tags and records them, launching and terminating nothing.\n",
    );
    for p in pools {
        let n = p.nodes.len();
        let od = p.on_demand();
        let spot_percent = if od < n { 100 } else { 0 };
        let image = p.image.as_ref().map(|i| format!("  image          = {}\n", quote(i))).unwrap_or_default();
        out += &format!(
            "\ngpu_pool {name} {{\n  provider       = {provider}\n  region         = {region}\n  zones          = {zones}\n  gpu            = {gpu}\n  gpus_per_node  = {gpus}\n  instance_types = {types}\n{image}\n  nodes {{\n    min     = 0\n    desired = {n}\n    max     = {n}\n  }}\n\n  mix {{\n    on_demand_base = {od}\n    spot_percent   = {spot_percent}\n  }}\n}}\n",
            name = quote(&p.name),
            provider = quote(&p.provider),
            region = quote(&p.region),
            zones = list_text(&p.zones()),
            gpu = quote(&p.gpu),
            gpus = p.gpus,
            types = list_text(&[p.instance_type.as_str()]),
        );
        let ids: Vec<&str> = p.nodes.iter().map(|n| n.id.as_str()).collect();
        out += &format!("\nimport {{\n  to  = gpu_pool.{}\n  ids = {}\n}}\n", p.name, list_text(&ids));
    }
    out
}

fn table(pools: &[Pool]) -> String {
    let mut rows = vec![["pool", "id", "instance type", "GPU", "capacity", "zone", "image"].map(String::from).to_vec()];
    for p in pools {
        for n in &p.nodes {
            rows.push(vec![
                format!("gpu_pool.{}", p.name),
                n.id.clone(),
                n.instance_type.clone(),
                format!("{} × {}", p.gpus, p.gpu),
                n.capacity.to_string(),
                n.zone.clone(),
                n.image.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
    }
    let widths: Vec<usize> =
        (0..rows[0].len()).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:w$}")).collect();
        out += cells.join("  ").trim_end();
        out.push('\n');
    }
    out
}

/// Write `text` to `path`, which must not exist yet.
fn write_new(path: &std::path::Path, text: &str) -> Result<(), CliError> {
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            CliError::new(format!("{} already exists; gpuplan import never overwrites a file", path.display()))
                .hint("name a new file")
        } else {
            CliError::new(format!("cannot create {}: {e}", path.display()))
        }
    })?;
    f.write_all(text.as_bytes()).map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))
}
