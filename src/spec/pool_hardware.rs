//! Decoders of a pool's `disk {}` and `network {}` blocks (docs/design/big-runs.md):
//! sizes, types and the fabric as written; which types and fabrics a cloud and an
//! instance type have is checked against the catalog in `validate.rs`.

use crate::model::hardware::Fabric;
use crate::spec::fields::{Cx, Fields, Reported};
use crate::spec::model::{DataDisk, DiskBlock, NetworkBlock, PlacementGroup};

/// `disk { size_gb, type, data = [{ size_gb, type }] }`.
pub fn disk(mut f: Fields<'_>, cx: &mut Cx<'_, '_>) -> Result<DiskBlock, Reported> {
    let span = f.head;
    let size_gb = f.u32(cx, "size_gb", 20, 16_384);
    let kind = f.string(cx, "type");
    let mut data = Vec::new();
    if let Some(items) = f.object_list(cx, "data") {
        for df in items.value {
            let r = data_disk(df, cx);
            if let Some(d) = f.check(r) {
                data.push(d);
            }
        }
    }
    let failed = f.failed;
    f.finish(cx, &["size_gb", "type", "data"]);
    if failed {
        return Err(Reported);
    }
    Ok(DiskBlock { size_gb, kind, data, span })
}

fn data_disk(mut f: Fields<'_>, cx: &mut Cx<'_, '_>) -> Result<DataDisk, Reported> {
    let size_gb = f.u32(cx, "size_gb", 1, 65_536);
    let size_gb = f.required(cx, size_gb, "size_gb", "2000");
    let kind = f.string(cx, "type");
    let failed = f.failed;
    f.finish(cx, &["size_gb", "type"]);
    if failed {
        return Err(Reported);
    }
    Ok(DataDisk { size_gb: size_gb.ok_or(Reported)?, kind })
}

/// `network { fabric, placement_group }`.
pub fn network(mut f: Fields<'_>, cx: &mut Cx<'_, '_>) -> Result<NetworkBlock, Reported> {
    let span = f.head;
    let fabric = f.enumeration(cx, "fabric", &[("efa", Fabric::Efa), ("rdma", Fabric::Rdma), ("erdma", Fabric::Erdma)]);
    let placement_group = f.enumeration(cx, "placement_group", &[("cluster", PlacementGroup::Cluster)]);
    let failed = f.failed;
    f.finish(cx, &["fabric", "placement_group"]);
    if failed {
        return Err(Reported);
    }
    Ok(NetworkBlock { fabric, placement_group, span })
}
