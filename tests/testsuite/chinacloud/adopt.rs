//! Adopting hand-made instances on Tencent Cloud and Alibaba Cloud, through the CLI
//! against the signature-checking fakes: `gpuplan import` writes the pool and its import
//! block, `plan` shows them as imports, `apply` tags them (Tencent's Tag API, Alibaba's
//! ECS `TagResources`) and launches or terminates nothing, the next plan is empty; a
//! `moved` rename retags in place and `removed` with `destroy = false` untags.

use crate::chinacloud::tencent_fake::{self, SECRET_ID, SECRET_KEY};
use crate::chinacloud::{Fleet, alibaba_fake};

const REGION: &str = "ap-guangzhou";
const Z3: &str = "ap-guangzhou-3";

/// The instances' ids and what their `key` tag holds.
fn tencent_tags(fake: &tencent_fake::Fake, key: &str) -> Vec<(String, Option<String>)> {
    fake.instances().into_iter().map(|i| (i.id.clone(), i.tags.get(key).cloned())).collect()
}

#[test]
fn tencent_hand_made_instances_are_imported_renamed_and_let_go_of_by_tags_alone() {
    let fake = tencent_fake::Fake::start();
    let mut ids: Vec<String> = (0..3).map(|_| fake.add(REGION, Z3, &[("owner", "ops")])).collect();
    ids.sort();
    fake.lock().instances.get_mut(&ids[2]).unwrap().charge_type = "SPOTPAID".into();
    let provider =
        format!("provider \"tencentcloud\" {{\n  region   = \"{REGION}\"\n  endpoint = \"{}\"\n}}\n", fake.url);
    let f = Fleet::new(&provider, &[("TENCENTCLOUD_SECRET_ID", SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", SECRET_KEY)]);

    let table = f.run(&["import", "--provider", "tencentcloud", "--filter", "owner=ops"]).expect(0);
    assert!(ids.iter().all(|id| table.stdout.contains(id.as_str())), "{}", table.stdout);
    f.run(&["import", "--provider", "tencentcloud", "--generate-config-out", "adopted.hcl"]).expect(0);
    let generated = std::fs::read_to_string(f.path().join("adopted.hcl")).unwrap();
    assert!(generated.contains("on_demand_base = 2") && generated.contains("spot_percent   = 100"), "{generated}");

    let plan = f.run(&["plan"]).expect(0);
    assert!(plan.stdout.contains("Plan: 3 to import, 0 to add, 0 to change, 0 to destroy."), "{}", plan.stdout);
    f.run(&["apply", "--auto-approve"]).expect(0);
    assert!(fake.calls("RunInstances").is_empty() && fake.calls("TerminateInstances").is_empty());
    assert!(!fake.calls("TagResources").is_empty());
    let pool = "gpu_pool.imported_GN7_2XLARGE32".to_string();
    assert_eq!(
        tencent_tags(&fake, "gpuplan:address"),
        ids.iter().map(|i| (i.clone(), Some(pool.clone()))).collect::<Vec<_>>()
    );
    assert!(f.run(&["plan"]).expect(0).stdout.contains("No changes."));

    let renamed = generated.replace("imported_GN7_2XLARGE32", "legacy");
    let moved = "moved {\n  from = gpu_pool.imported_GN7_2XLARGE32\n  to   = gpu_pool.legacy\n}\n";
    std::fs::write(f.path().join("adopted.hcl"), format!("{renamed}{moved}")).unwrap();
    f.run(&["apply", "--auto-approve"]).expect(0);
    let legacy = Some("gpu_pool.legacy".to_string());
    assert_eq!(
        tencent_tags(&fake, "gpuplan:address"),
        ids.iter().map(|i| (i.clone(), legacy.clone())).collect::<Vec<_>>()
    );
    assert!(f.run(&["plan"]).expect(0).stdout.contains("No changes."));

    let removed = "removed {\n  from = gpu_pool.legacy\n  lifecycle {\n    destroy = false\n  }\n}\n";
    std::fs::write(f.path().join("adopted.hcl"), removed).unwrap();
    f.run(&["apply", "--auto-approve"]).expect(0);
    assert!(!fake.calls("UnTagResources").is_empty());
    assert_eq!(tencent_tags(&fake, "gpuplan:managed"), ids.iter().map(|i| (i.clone(), None)).collect::<Vec<_>>());
    assert_eq!(fake.instances().len(), 3, "all still there");
    assert!(fake.calls("RunInstances").is_empty() && fake.calls("TerminateInstances").is_empty());
    assert!(f.run(&["plan"]).expect(0).stdout.contains("No changes."));
}

#[test]
fn alibaba_hand_made_instances_are_imported_renamed_and_let_go_of_by_tags_alone() {
    let region = "cn-hangzhou";
    let zone = "cn-hangzhou-h";
    let fake = alibaba_fake::Fake::start();
    let mut ids: Vec<String> = (0..3).map(|_| fake.add(region, zone, &[("owner", "ops")])).collect();
    ids.sort();
    fake.lock().instances.get_mut(&ids[2]).unwrap().spot_strategy = "SpotAsPriceGo".into();
    let provider = format!("provider \"alicloud\" {{\n  region   = \"{region}\"\n  endpoint = \"{}\"\n}}\n", fake.url);
    let env = [
        ("ALIBABA_CLOUD_ACCESS_KEY_ID", alibaba_fake::ACCESS_KEY_ID),
        ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", alibaba_fake::ACCESS_KEY_SECRET),
    ];
    let f = Fleet::new(&provider, &env);
    let tags = |key: &str| -> Vec<(String, Option<String>)> {
        fake.instances().into_iter().map(|i| (i.id.clone(), i.tags.get(key).cloned())).collect()
    };
    let launches = || fake.lock().calls.iter().filter(|(a, _)| a == "RunInstances" || a == "DeleteInstances").count();
    let called = |action: &str| fake.lock().calls.iter().any(|(a, _)| a == action);

    f.run(&["import", "--provider", "alicloud", "--filter", "owner=ops", "--generate-config-out", "adopted.hcl"])
        .expect(0);
    let generated = std::fs::read_to_string(f.path().join("adopted.hcl")).unwrap();
    assert!(ids.iter().all(|id| generated.contains(id.as_str())), "{generated}");
    assert!(generated.contains("on_demand_base = 2") && generated.contains("spot_percent   = 100"), "{generated}");
    let plan = f.run(&["plan"]).expect(0);
    assert!(plan.stdout.contains("Plan: 3 to import, 0 to add, 0 to change, 0 to destroy."), "{}", plan.stdout);
    f.run(&["apply", "--auto-approve"]).expect(0);
    assert_eq!(launches(), 0);
    assert!(called("TagResources"));
    let pool = Some("gpu_pool.imported_ecs_gn6i_c4g1_xlarge".to_string());
    assert_eq!(tags("gpuplan:address"), ids.iter().map(|i| (i.clone(), pool.clone())).collect::<Vec<_>>());
    assert!(f.run(&["plan"]).expect(0).stdout.contains("No changes."));

    let renamed = generated.replace("imported_ecs_gn6i_c4g1_xlarge", "legacy");
    let moved = "moved {\n  from = gpu_pool.imported_ecs_gn6i_c4g1_xlarge\n  to   = gpu_pool.legacy\n}\n";
    std::fs::write(f.path().join("adopted.hcl"), format!("{renamed}{moved}")).unwrap();
    f.run(&["apply", "--auto-approve"]).expect(0);
    let legacy = Some("gpu_pool.legacy".to_string());
    assert_eq!(tags("gpuplan:address"), ids.iter().map(|i| (i.clone(), legacy.clone())).collect::<Vec<_>>());
    assert!(f.run(&["plan"]).expect(0).stdout.contains("No changes."));

    let removed = "removed {\n  from = gpu_pool.legacy\n  lifecycle {\n    destroy = false\n  }\n}\n";
    std::fs::write(f.path().join("adopted.hcl"), removed).unwrap();
    f.run(&["apply", "--auto-approve"]).expect(0);
    assert!(called("UntagResources"));
    assert_eq!(tags("gpuplan:managed"), ids.iter().map(|i| (i.clone(), None)).collect::<Vec<_>>());
    assert_eq!(fake.instances().len(), 3);
    assert_eq!(launches(), 0);
    assert!(f.run(&["plan"]).expect(0).stdout.contains("No changes."));
}
