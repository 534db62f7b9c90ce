//! `gpuplan nodes [--unhealthy] [--json]`: the pools' nodes with their GPU health, after a
//! refresh (docs/design/gpu-health.md). Reads only: the evidence and each unhealthy node's
//! fate are the refreshed plan's, so they say what `gpuplan plan` says.

use super::output;
use super::{ExitStatus, NodesArgs, Settings, common, load, runtime};
use crate::engine::{self, run::PlanRequest};
use crate::plan::model::HealthEntry;

pub fn run(settings: &Settings, args: &NodesArgs) -> miette::Result<ExitStatus> {
    let Some(loaded) = load::valid_spec(settings)? else { return Ok(ExitStatus::Error) };
    let ws = settings.workspace().with_backend(&loaded.spec).reading();
    runtime::block_on(async {
        let session = engine::open_session(&ws, "nodes")?;
        common::warn_stale_lock(&session);
        let providers = engine::providers::build(&ws, &loaded.spec, &session.state)?;
        let req = PlanRequest { refresh: true, env: settings.env.clone(), ..PlanRequest::default() };
        let plan = engine::run::plan(&loaded.spec, &session, &providers, &req).await?;
        let mut rows = Vec::new();
        for (address, r) in &session.state.resources {
            for n in r.nodes.iter().filter(|n| n.is_live()) {
                let health = plan.health.iter().find(|h| h.node == n.id);
                if args.unhealthy && health.is_none() {
                    continue;
                }
                rows.push(Row { address, node: n, health });
            }
        }
        output::stdout(&if args.json { json(&rows) } else { text(&rows) });
        Ok::<_, miette::Report>(ExitStatus::Success)
    })?
}

struct Row<'a> {
    address: &'a str,
    node: &'a crate::providers::Node,
    health: Option<&'a HealthEntry>,
}

fn json(rows: &[Row<'_>]) -> String {
    let nodes: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "address": r.address,
                "node": r.node.id,
                "zone": r.node.zone,
                "instance_type": r.node.instance_type,
                "capacity": r.node.capacity,
                "healthy": r.health.is_none(),
                "health": r.health,
            })
        })
        .collect();
    format!("{:#}\n", serde_json::json!({ "format_version": 1, "nodes": nodes }))
}

fn text(rows: &[Row<'_>]) -> String {
    if rows.is_empty() {
        return "No nodes.\n".into();
    }
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            let (health, evidence) = match r.health {
                None => ("healthy".to_string(), String::new()),
                Some(h) => {
                    let fate = h.held_by.as_ref().map_or(h.action.clone(), |by| format!("{} waits ({by})", h.action));
                    (fate, h.evidence.clone())
                }
            };
            [r.address.to_string(), r.node.id.clone(), r.node.zone.clone(), health, evidence]
        })
        .collect();
    let head = ["POOL", "NODE", "ZONE", "HEALTH", "EVIDENCE"];
    let mut width = head.map(|h| h.chars().count());
    for r in &cells {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let s: Vec<String> = cells.iter().enumerate().map(|(i, c)| format!("{c:<w$}", w = width[i])).collect();
        format!("{}\n", s.join("  ").trim_end())
    };
    let mut out = line(head.to_vec());
    for r in &cells {
        out += &line(r.iter().map(String::as_str).collect());
    }
    out
}
