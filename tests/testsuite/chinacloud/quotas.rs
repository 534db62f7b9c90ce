//! `gpuplan check` reads the account quotas Tencent (`DescribeAccountQuota`, instances
//! per zone) and Alibaba (`DescribeAccountAttributes`, vCPUs) report, and fails when they
//! cannot hold the pools' `nodes.max`.

use crate::chinacloud::{Fleet, alibaba_fake, pool, tencent_fake};

#[test]
fn tencent_instance_quota_per_zone_is_checked_against_nodes_max() {
    let fake = tencent_fake::Fake::start();
    fake.lock().postpaid_quota = vec![("ap-guangzhou-3".into(), 3, 100), ("ap-guangzhou-4".into(), 0, 50)];
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}",
        fake.url,
        pool("tencentcloud", &["ap-guangzhou-3"], "T4", "GN7.2XLARGE32", 1, "    spot_percent = 0")
    );
    let env =
        [("TENCENTCLOUD_SECRET_ID", tencent_fake::SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", tencent_fake::SECRET_KEY)];
    let f = Fleet::new(&spec, &env);
    let r = f.run(&["check"]).expect(0);
    let line = r.stdout.lines().find(|l| l.contains("quotas of provider \"tencentcloud\"")).expect("a quota line");
    assert!(
        line.starts_with("ok") && line.contains("pay-as-you-go instances in ap-guangzhou-3: 3 of 100 used"),
        "{}",
        r.stdout
    );
    assert!(!line.contains("ap-guangzhou-4"), "only the zones the pools use: {line}");

    // 10 in the zone, 3 used: the pool's nodes.max of 16 does not fit.
    fake.lock().postpaid_quota = vec![("ap-guangzhou-3".into(), 3, 10)];
    let r = f.run(&["check"]).expect(1);
    assert!(r.stdout.contains("not enough quota for the pools' nodes.max: pay-as-you-go instances in ap-guangzhou-3: 7 left, the pools may need 16"), "{}", r.stdout);
    assert!(r.stdout.contains("hint: raise the quota"), "{}", r.stdout);
}

#[test]
fn alibaba_vcpu_quota_is_checked_against_nodes_max() {
    let fake = alibaba_fake::Fake::start();
    // ecs.gn6i-c4g1.xlarge has 4 vCPUs: 16 nodes need 64.
    fake.lock().postpaid_vcpus = (10, 100);
    let spec = format!(
        "provider \"alicloud\" {{\n  region = \"cn-hangzhou\"\n  image  = \"m-gpuplan\"\n}}\n{}",
        pool("alicloud", &["cn-hangzhou-h"], "T4", "ecs.gn6i-c4g1.xlarge", 1, "    spot_percent = 0")
    );
    let env = [
        ("ALIBABA_CLOUD_ACCESS_KEY_ID", alibaba_fake::ACCESS_KEY_ID),
        ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", alibaba_fake::ACCESS_KEY_SECRET),
        ("GPUPLAN_ALICLOUD_ENDPOINT", fake.url.as_str()),
    ];
    let f = Fleet::new(&spec, &env);
    let r = f.run(&["check"]).expect(0);
    assert!(r.stdout.contains("pay-as-you-go vCPUs: 10 of 100 used"), "{}", r.stdout);
    fake.lock().postpaid_vcpus = (50, 100);
    let r = f.run(&["check"]).expect(1);
    assert!(r.stdout.contains("pay-as-you-go vCPUs: 50 left, the pools may need 64"), "{}", r.stdout);
}
