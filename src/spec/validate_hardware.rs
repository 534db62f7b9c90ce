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
    let Some(fabric) = pool.network.as_ref().and_then(|n| n.fabric.as_ref()) else { return };
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

/// `network {}` off AWS: gpuplan does not yet make HPC clusters or eRDMA interfaces, nor
/// placement groups (HPC clusters, deployment sets), and launching without them while
/// the plan shows them would mislead. The sim cloud models them all; AWS makes EFA
/// interfaces and cluster placement groups.
fn not_built(addr: &Address, kind: ProviderKind, n: &crate::spec::model::NetworkBlock, diags: &mut Diagnostics) {
    let fabric = n.fabric.as_ref().map(|f| (f.span, "with a fabric", "remove `fabric`, or try it on a `sim` pool"));
    let group = n
        .placement_group
        .as_ref()
        .map(|g| (g.span, "into a placement group", "remove `placement_group`, or use it on an `aws` or `sim` pool"));
    for (span, what, help) in fabric.into_iter().chain(group) {
        let built = "only the sim cloud and aws make this so far";
        diags.push(
            Diagnostic::error(
                "gpuplan::spec::network_not_built",
                format!("`{addr}`: gpuplan does not yet launch `{kind}` nodes {what}"),
            )
            .at(span, format!("{built} (docs/design/big-runs.md)"))
            .help(help),
        );
    }
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
