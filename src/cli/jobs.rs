//! `gpuplan jobs [list|status NAME|logs NAME|cancel NAME|render NAME]`.
//!
//! `list`, `status` and `logs` read the state without locking it and ask the providers
//! for the current status of active runs (the provider's view; the state is only updated
//! by `plan`/`apply`). `cancel` takes the state lock, cancels active runs through the
//! provider and marks the job cancelled so apply does not launch it again. `render`
//! needs only the spec.

use std::collections::BTreeMap;

use super::output::{self, Style};
use super::{CliError, ExitStatus, JobsCommand, Settings, addresses, load, runtime, state_common};
use crate::addr::Address;
use crate::jobs::JobRecord;
use crate::jobs::model::state_str;
use crate::jobs::status::{self, JobSummary};
use crate::providers::kube::manifest as k8s;
use crate::providers::{JobStatus, kube};
use crate::spec::{self, Spec};
use crate::state::State;

pub fn run(settings: &Settings, command: Option<&JobsCommand>) -> miette::Result<ExitStatus> {
    match command.unwrap_or(&JobsCommand::List { json: false }) {
        JobsCommand::List { json } => list(settings, *json),
        JobsCommand::Status { name, json } => show(settings, name, *json),
        JobsCommand::Logs { name, follow } => logs(settings, name, *follow),
        JobsCommand::Cancel { name } => cancel(settings, name),
        JobsCommand::Render { name } => render(settings, name),
    }
}

/// The spec when it loads without errors (these commands work from state alone otherwise).
fn quiet_spec(settings: &Settings) -> Spec {
    match spec::load_dir(&settings.dir, &settings.load_options()).map(crate::graph::checked) {
        Ok(l) if !l.diags.has_errors() => l.spec,
        _ => Spec::default(),
    }
}

/// Every job the spec declares or the state remembers.
fn job_addresses(spec: &Spec, state: Option<&State>) -> Vec<Address> {
    let mut all: Vec<Address> = spec.jobs.keys().cloned().collect();
    for a in state.iter().flat_map(|s| s.resources.keys()).filter_map(|a| a.parse::<Address>().ok()) {
        if a.kind == crate::addr::Kind::Job && !all.contains(&a) {
            all.push(a);
        }
    }
    all.sort();
    all
}

fn record<'s>(state: Option<&'s State>, addr: &Address) -> Option<&'s JobRecord> {
    state.and_then(|s| crate::jobs::place::record(s, addr))
}

/// Statuses of the active runs, from the providers, and the providers (their clocks time
/// the runs still going). Providers that cannot be reached give a warning and the
/// state's record stands.
fn observe(
    settings: &Settings,
    spec: &Spec,
    state: Option<&State>,
) -> miette::Result<(BTreeMap<String, JobStatus>, Option<crate::apply::ProviderSet>)> {
    let Some(state) = state else { return Ok((BTreeMap::new(), None)) };
    if !state.resources.values().filter_map(|r| r.job.as_ref()).any(|j| j.runs.iter().any(|r| r.is_active())) {
        return Ok((BTreeMap::new(), None));
    }
    let ws = settings.workspace().with_backend(spec).reading();
    let providers = match crate::engine::providers::build(&ws, spec, state) {
        Ok(p) => p,
        Err(e) => {
            warn(settings, &format!("showing the state's record: {e}"));
            return Ok((BTreeMap::new(), None));
        }
    };
    let grace = crate::jobs::refresh::exit_code_grace(&settings.env)
        .map_err(|e| CliError::new(e).hint("fix or unset GPUPLAN_EXIT_CODE_GRACE"))?;
    let seen = runtime::block_on(crate::jobs::refresh::statuses(&providers, state, grace))?;
    let seen = seen.unwrap_or_else(|(p, e)| {
        warn(settings, &format!("provider `{p}` answered {e}; showing the state's record"));
        BTreeMap::new()
    });
    Ok((seen, Some(providers)))
}

/// The wall clock, in ms since the epoch (runs of providers this command did not open).
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn warn(settings: &Settings, text: &str) {
    let w = output::paint("warning:", Style::Warning, settings.color_stderr);
    output::stderr(&format!("{w} {text}\n"));
}

fn summaries(settings: &Settings) -> miette::Result<(Spec, Vec<JobSummary>)> {
    let state = state_common::read(settings)?;
    let spec = quiet_spec(settings);
    let (seen, providers) = observe(settings, &spec, state.as_ref())?;
    let ledger = state.as_ref().map(|s| s.spend.clone()).unwrap_or_default();
    let clock =
        |provider: &str| providers.as_ref().and_then(|p| p.get(provider)).map_or_else(wall_ms, |p| p.clock_ms());
    let out = job_addresses(&spec, state.as_ref())
        .iter()
        .map(|a| {
            let replicas = spec.jobs.get(a).map(|j| j.replicas.value);
            status::summarize(a, record(state.as_ref(), a), replicas, &seen, &ledger, &clock)
        })
        .collect();
    Ok((spec, out))
}

fn list(settings: &Settings, json: bool) -> miette::Result<ExitStatus> {
    let (_, jobs) = summaries(settings)?;
    if json {
        let doc = serde_json::json!({ "format_version": 1, "jobs": jobs });
        output::stdout(&format!("{doc:#}\n"));
        return Ok(ExitStatus::Success);
    }
    if jobs.is_empty() {
        output::stderr("No jobs: declare `job` blocks in the spec and run `gpuplan apply`.\n");
        return Ok(ExitStatus::Success);
    }
    let rows: Vec<[String; 4]> = jobs
        .iter()
        .map(|j| {
            [j.address.to_string(), j.state.clone(), format!("{}/{}", j.running, j.replicas), j.attempt.to_string()]
        })
        .collect();
    output::stdout(&table(["JOB", "STATE", "RUNNING", "ATTEMPT"], &rows));
    Ok(ExitStatus::Success)
}

fn table<const N: usize>(head: [&str; N], rows: &[[String; N]]) -> String {
    let mut width = head.map(|h| h.chars().count());
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let s: Vec<String> = cells.iter().enumerate().map(|(i, c)| format!("{c:<w$}", w = width[i])).collect();
        format!("{}\n", s.join("  ").trim_end())
    };
    let mut out = line(head.to_vec());
    for r in rows {
        out += &line(r.iter().map(String::as_str).collect());
    }
    out
}

/// The jobs (instances) a name means ([`addresses::resolve`]), or an error naming what exists.
fn one<'j>(jobs: &'j [JobSummary], name: &str) -> Result<Vec<&'j JobSummary>, CliError> {
    let known: Vec<Address> = jobs.iter().map(|j| j.address.clone()).collect();
    let names: Vec<String> = known.iter().map(ToString::to_string).collect();
    let otherwise = if names.is_empty() {
        "no jobs are declared or recorded; add a `job` block to the spec".into()
    } else {
        format!("known jobs: {}", names.join(", "))
    };
    let lookup = addresses::Lookup { what: "job", place: "in the spec or the state".into(), otherwise };
    let found = addresses::resolve(name, &known, &lookup)?;
    Ok(jobs.iter().filter(|j| found.matches.contains(&j.address)).collect())
}

fn show(settings: &Settings, name: &str, json: bool) -> miette::Result<ExitStatus> {
    let (_, jobs) = summaries(settings)?;
    let found = one(&jobs, name)?;
    if json {
        let doc = serde_json::json!({ "format_version": 1, "jobs": found });
        output::stdout(&format!("{doc:#}\n"));
        return Ok(ExitStatus::Success);
    }
    let mut out = String::new();
    for j in found {
        out += &format!(
            "{}: {} ({}/{} replicas running, attempt {})\n",
            j.address, j.state, j.running, j.replicas, j.attempt
        );
        if let Some(t) = &j.waiting_since {
            out += &format!("  waiting since {t}\n");
        }
        if let Some(c) = j.cost_usd {
            out += &format!(
                "  cost so far: {} USD (its share of its nodes' ledger prices)\n",
                crate::model::money::usd(c)
            );
        }
        let rows: Vec<[String; 8]> = j
            .runs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                [
                    r.replica.to_string(),
                    r.attempt.to_string(),
                    r.id.clone(),
                    r.node_id.clone(),
                    r.capacity.to_string(),
                    state_str(r.status).to_string(),
                    j.run_costs_usd.get(i).copied().flatten().map_or_else(|| "—".to_string(), |c| format!("{c:.2}")),
                    r.message.clone().unwrap_or_default(),
                ]
            })
            .collect();
        if !rows.is_empty() {
            let t = table(["REPLICA", "ATTEMPT", "RUN", "NODE", "CAPACITY", "STATE", "USD", "MESSAGE"], &rows);
            out += &t.lines().map(|l| format!("  {l}\n")).collect::<String>();
        }
    }
    output::stdout(&out);
    Ok(ExitStatus::Success)
}

/// A job's own output where its provider can read it (Kubernetes: every pod's log; a
/// cloud job node: its log or console), prefixed with its replica, else its launch
/// history from state.
fn logs(settings: &Settings, name: &str, follow: bool) -> miette::Result<ExitStatus> {
    let (spec, jobs) = summaries(settings)?;
    let found = one(&jobs, name)?;
    // One output source per run of the latest attempt (per Job on Kubernetes, whose runs
    // share it); the sim cloud has no output of its own, only the history.
    let mut sources: Vec<(&JobSummary, &crate::jobs::JobRun)> = Vec::new();
    for j in &found {
        let latest = j.runs.iter().map(|r| r.attempt).max();
        // Kubernetes pods, job VMs, and jobs on warm nodes (the run-command API holds their output).
        let readable =
            |r: &&crate::jobs::JobRun| r.provider.starts_with(kube::PREFIX) || r.has_own_node() || on_warm_node(r);
        for r in j.runs.iter().filter(|r| Some(r.attempt) == latest).filter(readable) {
            let k8s = r.provider.starts_with(kube::PREFIX);
            let seen =
                |s: &crate::jobs::JobRun| s.provider == r.provider && s.region == r.region && same_job(&s.id, &r.id);
            if !(k8s && sources.iter().any(|(_, s)| seen(s))) {
                sources.push((j, r));
            }
        }
    }
    if sources.is_empty() {
        if follow {
            warn(settings, "`--follow` needs a job whose output gpuplan can read; showing its launch history");
        }
        let lines: String = found.into_iter().flat_map(status::log_lines).map(|l| format!("{l}\n")).collect();
        output::stdout(&lines);
        return Ok(ExitStatus::Success);
    }
    let state = state_common::read(settings)?.unwrap_or_else(|| State::new(String::new()));
    let ws = settings.workspace().with_backend(&spec).reading();
    let providers = crate::engine::providers::build(&ws, &spec, &state)?;
    let several = found.len() > 1;
    runtime::block_on(async {
        for (j, run) in sources {
            let Some(p) = providers.get(&run.provider) else {
                return Err(CliError::new(format!("{}: provider `{}` is not configured", j.address, run.provider)));
            };
            let prefix = if several { format!("{} ", j.address) } else { String::new() };
            // A job node holds one replica: its own index, not the node's view (0).
            let own = (run.has_own_node() || on_warm_node(run)).then_some(run.replica);
            let print = |replica: u32, line: &str| {
                output::stdout(&format!("{prefix}[replica {}] {line}\n", own.unwrap_or(replica)))
            };
            async {
                crate::providers::ports::logs_of(p.as_ref(), &run.id)?
                    .job_logs(&run.region, &run.id, follow, &print)
                    .await
            }
            .await
            .map_err(|e| CliError::new(format!("{}: cannot read its output: {e}", j.address)))?;
        }
        Ok(())
    })??;
    Ok(ExitStatus::Success)
}

/// A run a cloud's run-command API runs on a warm node of its pool (`<node>/<command>`;
/// Kubernetes run ids have slashes too, and are not these).
fn on_warm_node(r: &crate::jobs::JobRun) -> bool {
    !r.provider.starts_with(kube::PREFIX) && crate::providers::launch::is_command_run(&r.id)
}

/// Do two Kubernetes run ids (`<namespace>/<name>/<replica>`) name the same Job?
fn same_job(a: &str, b: &str) -> bool {
    a.rsplit_once('/').map(|x| x.0) == b.rsplit_once('/').map(|x| x.0)
}

fn cancel(settings: &Settings, name: &str) -> miette::Result<ExitStatus> {
    let spec = quiet_spec(settings);
    let ws = settings.workspace().with_backend(&spec);
    runtime::block_on(async {
        let mut session = crate::engine::open_session(&ws, "jobs cancel")?;
        let jobs: Vec<JobSummary> = job_addresses(&spec, Some(&session.state))
            .iter()
            .map(|a| {
                let rec = record(Some(&session.state), a);
                status::summarize(a, rec, None, &BTreeMap::new(), &BTreeMap::new(), &|_| wall_ms())
            })
            .collect();
        let targets: Vec<Address> = one(&jobs, name)?.into_iter().map(|j| j.address.clone()).collect();
        let providers = crate::engine::providers::build(&ws, &spec, &session.state)?;
        // Each cancel only while the state lock holds (docs/design/state-and-locks.md, "Expiry and fencing").
        let providers = crate::apply::fence::under_lock(&providers, &session.lock);
        let mut text = String::new();
        let mut failed = false;
        for addr in &targets {
            let key = addr.to_string();
            let mut rec = record(Some(&session.state), addr).cloned().unwrap_or_default();
            for run in rec.runs.iter_mut().filter(|r| r.is_active()) {
                let Some(p) = providers.get(&run.provider) else { continue };
                match async { crate::providers::ports::jobs_of(p.as_ref())?.cancel_job(&run.region, &run.id).await }
                    .await
                {
                    Ok(s) => {
                        run.status = s.state;
                        run.message = s.message;
                        text += &format!("{addr}: run {} {}\n", run.id, state_str(s.state));
                    }
                    Err(e) => {
                        failed = true;
                        text += &format!("{addr}: could not cancel run {}: {e}\n", run.id);
                    }
                }
            }
            rec.cancelled = true;
            rec.waiting_since = None;
            let resource = session.state.resources.entry(key.clone()).or_insert_with(|| crate::state::ResourceState {
                kind: "job".into(),
                provider: None,
                provider_kind: None,
                region: None,
                config: crate::json_text::JsonText::null(),
                sensitive: Vec::new(),
                dependencies: vec![],
                nodes: vec![],
                job: None,
                fallback: None,
                placement: None,
                reservation: None,
            });
            resource.job = Some(Box::new(rec));
            text += &format!("{addr}: cancelled; apply will not launch it again\n");
        }
        session.state.history.push(crate::engine::history(
            "jobs_cancel",
            targets.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        ));
        session.backend.write(&session.lock, &mut session.state)?;
        output::stderr(&text);
        output::stderr("hint: `gpuplan state rm job.NAME` forgets a job, so the next apply launches it anew\n");
        Ok::<_, miette::Report>(if failed { ExitStatus::Error } else { ExitStatus::Success })
    })?
}

fn render(settings: &Settings, name: &str) -> miette::Result<ExitStatus> {
    let Some(loaded) = load::valid_spec(settings)? else { return Ok(ExitStatus::Error) };
    let spec = &loaded.spec;
    let names: Vec<String> = spec.jobs.keys().map(ToString::to_string).collect();
    let otherwise = if names.is_empty() {
        "the spec declares no `job` blocks".into()
    } else {
        format!("jobs in the spec: {}", names.join(", "))
    };
    let lookup = addresses::Lookup { what: "job", place: "in the spec".into(), otherwise };
    let known: Vec<Address> = spec.jobs.keys().cloned().collect();
    let found = addresses::resolve(name, &known, &lookup)?;
    let addrs: Vec<&Address> = spec.jobs.keys().filter(|a| found.matches.contains(a)).collect();
    // The attempt and lineage a submission would carry now, when there is a state.
    let state = state_common::read(settings)?;
    let lineage = state.as_ref().map(|s| s.lineage.as_str());
    let docs: Vec<_> = addrs
        .iter()
        .filter_map(|a| {
            let next =
                record(state.as_ref(), a).map(|r| r.runs.iter().map(|r| r.attempt).max().unwrap_or(0) + 1).unwrap_or(1);
            k8s::manifest(spec, a, next, lineage)
        })
        .collect();
    let yaml_error = |e| CliError::new(format!("cannot write the manifests as YAML: {e}"));
    let mut text = k8s::to_yaml(&docs).map_err(yaml_error)?;
    // Multi-node jobs: the headless Service each Job's replicas rendezvous under.
    let services: Vec<_> = addrs.iter().filter_map(|a| k8s::service(spec, a, &spec.jobs[*a], lineage)).collect();
    if !services.is_empty() {
        text.push_str("---\n");
        text.push_str(&k8s::to_yaml(&services).map_err(yaml_error)?);
    }
    output::stdout(&text);
    Ok(ExitStatus::Success)
}
