//! Checks of a pool's `disk {}` and `network {}` against its cloud and instance types
//! (docs/design/big-runs.md): a disk type the cloud sells, a fabric the cloud has and
//! every instance type the pool may launch has. Called by `validate.rs` for each pool.

use crate::addr::Address;
use crate::catalog::hardware::{self, cloud_fabric, disk_types, fabric_of};
use crate::catalog::{Catalog, InstanceType};
use crate::diag::{Diagnostic, Diagnostics, did_you_mean};
use crate::model::hardware::Fabric;
use crate::spec::model::{GpuPool, ProviderKind, Spanned};

/// Disk types and the fabric of `pool`, a pool of `kind` in `region` (`cny`: its rate).
pub fn check(
    cat: &Catalog,
    kind: ProviderKind,
    addr: &Address,
    pool: &GpuPool,
    region: &str,
    cny: f64,
    diags: &mut Diagnostics,
) {
    if let Some(d) = &pool.disk {
        for t in d.kind.iter().chain(d.data.iter().filter_map(|x| x.kind.as_ref())) {
            check_disk_type(kind, t, diags);
        }
    }
    if let Some(n) = &pool.network
        && !matches!(kind, ProviderKind::Sim | ProviderKind::Aws)
    {
        not_built(addr, kind, n, diags);
    }
    let Some(fabric) = pool.network.as_ref().and_then(|n| n.fabric.as_ref()) else {
        hpc_without_rdma(addr, kind, pool, diags);
        return;
    };
    if let Some(own) = cloud_fabric(kind)
        && own != fabric.value
    {
        diags.push(
            Diagnostic::error(
                "gpuplan::spec::fabric",
                format!("`{addr}` is a `{kind}` pool: fabric `{}` is not one `{kind}` has", fabric.value),
            )
            .at(fabric.span, format!("`{kind}` offers `{own}`"))
            .help(format!("write `fabric = \"{own}\"`, or remove `fabric`")),
        );
        return;
    }
    let named: Vec<(&Spanned<String>, Option<&InstanceType>)> =
        pool.instance_types.iter().map(|t| (t, cat.instance_type(kind, &t.value))).collect();
    if !named.is_empty() {
        for (t, _) in named.iter().filter(|(_, it)| it.is_some()) {
            if fabric_of(&t.value).map(|(f, _)| f) != Some(fabric.value) {
                diags.push(lacks(addr, fabric, &t.value, t.span));
            }
        }
        return;
    }
    let types = cat.matching(kind, region, &pool.gpu.value, pool.gpus_per_node.value, cny);
    if !types.is_empty() && !types.iter().any(|t| fabric_of(&t.name).map(|(f, _)| f) == Some(fabric.value)) {
        let cheapest = &types[0].name;
        diags.push(lacks(addr, fabric, cheapest, fabric.span));
    }
}

/// A disk type `kind` does not sell (a sim pool takes any cloud's).
fn check_disk_type(kind: ProviderKind, t: &Spanned<String>, diags: &mut Diagnostics) {
    let sells = |k: ProviderKind| hardware::disk_type(k, &t.value).is_some();
    let ok =
        if kind == ProviderKind::Sim { hardware::DISK_TYPES.iter().any(|d| d.name == t.value) } else { sells(kind) };
    if ok {
        return;
    }
    let names: Vec<&str> = if kind == ProviderKind::Sim {
        hardware::DISK_TYPES.iter().map(|d| d.name).collect()
    } else {
        disk_types(kind).map(|d| d.name).collect()
    };
    let hint = match did_you_mean(&t.value, names.iter().copied()) {
        Some(s) => format!("did you mean {s:?}? `{kind}` disk types: {}", names.join(", ")),
        None => format!("`{kind}` disk types: {}", names.join(", ")),
    };
    diags.push(
        Diagnostic::error("gpuplan::spec::disk_type", format!("unknown disk type {:?} for provider `{kind}`", t.value))
            .at(t.span, "not a disk type of this cloud")
            .help(hint),
    );
}

/// A Tencent HCC (RDMA) type named by a pool without `fabric = "rdma"`: CVM launches
/// those only into an HPC cluster, which gpuplan makes for `fabric = "rdma"` alone.
fn hpc_without_rdma(addr: &Address, kind: ProviderKind, pool: &GpuPool, diags: &mut Diagnostics) {
    if kind != ProviderKind::Tencentcloud {
        return;
    }
    for t in pool.instance_types.iter().filter(|t| fabric_of(&t.value).is_some_and(|(f, _)| f == Fabric::Rdma)) {
        diags.push(
            Diagnostic::error(
                "gpuplan::spec::fabric",
                format!("`{addr}` names {}, an HPC-cluster type, without `fabric = \"rdma\"`", t.value),
            )
            .at(t.span, "Tencent Cloud launches this type only into an HPC cluster")
            .help("add `network { fabric = \"rdma\" }` (gpuplan makes the pool's HPC cluster), or pick another type"),
        );
    }
}

/// `instance_type` has no `fabric`: say which types of the pool's GPU do.
fn lacks(addr: &Address, fabric: &Spanned<Fabric>, instance_type: &str, span: crate::diag::Span) -> Diagnostic {
    let with: Vec<&str> =
        hardware::FABRIC_TYPES.iter().filter(|(_, f, _)| *f == fabric.value).map(|(t, _, _)| *t).collect();
    Diagnostic::error(
        "gpuplan::spec::fabric",
        format!("`{addr}` asks for fabric `{}`, which instance type {instance_type} does not have", fabric.value),
    )
    .at(span, format!("{instance_type} has no {}", fabric.value))
    .help(format!(
        "use an instance type with {} ({}) and a GPU to match, or remove `fabric`",
        fabric.value,
        with.join(", ")
    ))
}

/// `network {}` where a cloud cannot make it: Tencent Cloud has no call that packs nodes
/// close other than its HPC clusters (its disaster-recovery groups spread them), so
/// `placement_group` there points at `fabric = "rdma"`. Built: EFA interfaces and cluster
/// placement groups on AWS, deployment sets (`placement_group`) and eRDMA interfaces
/// (`fabric = "erdma"`) on Alibaba Cloud, HPC clusters (`fabric = "rdma"`) on Tencent
/// Cloud; the sim cloud models them all.
fn not_built(addr: &Address, kind: ProviderKind, n: &crate::spec::model::NetworkBlock, diags: &mut Diagnostics) {
    let Some(g) = n.placement_group.as_ref().filter(|_| kind == ProviderKind::Tencentcloud) else { return };
    diags.push(
        Diagnostic::error(
            "gpuplan::spec::network_not_built",
            format!("`{addr}`: `{kind}` has no cluster placement group: its nodes pack close only in an HPC cluster"),
        )
        .at(g.span, "not on this cloud (its disaster-recovery groups spread nodes; docs/design/big-runs.md)")
        .help(
            "write `fabric = \"rdma\"` instead (an HPC cluster per pool and zone, on an RDMA instance type such as \
             HCCG5v.24XLARGE384)",
        ),
    );
}

/// `fabric = "erdma"` on Alibaba Cloud: each node's elastic RDMA interface is a secondary
/// network interface, which ECS takes only with a vSwitch of the node's zone and a
/// security group, from the provider block (`subnets`, `security_groups`). Checked for
/// the zones a pool names (a pool naming none takes the catalog's, known at plan time).
pub fn check_erdma_interface(
    kind: ProviderKind,
    addr: &Address,
    pool: &GpuPool,
    provider: &crate::spec::model::Provider,
    diags: &mut Diagnostics,
) {
    let Some(f) = pool.network.as_ref().and_then(|n| n.fabric.as_ref()) else { return };
    if kind != ProviderKind::Alicloud || f.value != Fabric::Erdma {
        return;
    }
    let missing: Vec<&str> =
        pool.zones.iter().filter(|z| !provider.subnets.contains_key(&z.value)).map(|z| z.value.as_str()).collect();
    let no_group = provider.security_groups.is_empty();
    if missing.is_empty() && !no_group {
        return;
    }
    let mut lacks = Vec::new();
    if !missing.is_empty() {
        lacks.push(format!("a vSwitch in `subnets` for {}", missing.join(", ")));
    }
    if no_group {
        lacks.push("a security group in `security_groups`".to_string());
    }
    diags.push(
        Diagnostic::error(
            "gpuplan::spec::erdma_interface",
            format!("`{addr}`: the eRDMA interface of each node needs {}", lacks.join(" and ")),
        )
        .at(f.span, "an elastic RDMA interface is a secondary network interface")
        .help(format!(
            "set them in `provider \"{}\"`: `subnets = {{ \"ZONE\" = \"vsw-…\" }}`, `security_groups = [\"sg-…\"]`",
            pool.provider.value
        )),
    );
}

/// `fabric = "rdma"` on Tencent Cloud in a pool jobs run on: a job node launches into the
/// HPC cluster of the pool's first zone, which only a pool naming its `zones` has (a
/// removed pool's clusters are found again from them), and CVM launches an HCC type
/// nowhere else.
pub fn check_rdma_job_zones(
    kind: ProviderKind,
    addr: &Address,
    pool: &GpuPool,
    spec: &crate::spec::Spec,
    diags: &mut Diagnostics,
) {
    let Some(f) = pool.network.as_ref().and_then(|n| n.fabric.as_ref()) else { return };
    if kind != ProviderKind::Tencentcloud || f.value != Fabric::Rdma || !pool.zones.is_empty() {
        return;
    }
    let Some((job, _)) = spec.jobs.iter().find(|(_, j)| &j.pool.value == addr) else { return };
    diags.push(
        Diagnostic::error(
            "gpuplan::spec::fabric",
            format!("`{job}` runs on `{addr}`, whose RDMA job nodes need an HPC cluster of a zone the pool names"),
        )
        .at(f.span, "this pool names no `zones`")
        .help("name the pool's zones (`zones = [\"ap-guangzhou-3\"]`): each job node launches into the first's HPC cluster"),
    );
}

/// `fabric = "efa"` on an AWS pool whose provider block names no `security_groups`: EFA
/// passes only between members of a group that lets all traffic in from and out to
/// itself, and gpuplan adds those rules to the groups it launches into, never to a VPC's
/// default group.
pub fn check_efa_groups(
    addr: &Address,
    provider: &crate::spec::model::Provider,
    pool: &GpuPool,
    diags: &mut Diagnostics,
) {
    let Some(fabric) = pool.network.as_ref().and_then(|n| n.fabric.as_ref()) else { return };
    if fabric.value != Fabric::Efa || !provider.security_groups.is_empty() {
        return;
    }
    diags.push(
        Diagnostic::error(
            "gpuplan::spec::efa_security_groups",
            format!("`{addr}` asks for fabric `efa`, but its provider block names no `security_groups`"),
        )
        .at(fabric.span, "EFA needs the nodes' security groups")
        .at(provider.kind.span, "no `security_groups` in this block")
        .help(
            "name the groups its nodes launch in, in the provider block's `security_groups`: gpuplan adds the \
             all-traffic rules from and to each group itself that EFA needs",
        ),
    );
}
