//! Bad Tencent / Alibaba provider blocks are reported at their line, all at once.

use crate::chinacloud::Fleet;

#[test]
fn bad_provider_blocks_are_located() {
    let spec = r#"provider "tencentcloud" {
  region   = "ap-guangzhou"
  endpoint = "cvm.tencentcloudapi.com"
  profile  = "default"
  subnets  = { "ap-guangzhou-3" = "subnet-abc" }
}

provider "alicloud" {
  region   = "cn-hangzhou"
  endpoint = "ftp://127.0.0.1:1"
}
"#;
    let f = Fleet::new(spec, &[]);
    let r = f.run(&["validate"]).expect(1);
    let flat = r.stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in [
        "bad `endpoint` for `tencentcloud`",
        "main.hcl:3:",
        "`profile` applies only to the `aws` provider",
        "main.hcl:4:",
        "must name its VPC too",
        "main.hcl:5:",
        "bad `endpoint` for `alicloud`",
        "main.hcl:10:",
    ] {
        assert!(flat.contains(needle), "missing {needle:?} in:\n{}", r.stderr);
    }
}

#[test]
fn a_bad_endpoint_variable_is_a_setup_error() {
    let spec = "provider \"alicloud\" {\n  region = \"cn-hangzhou\"\n}\n";
    let f = Fleet::new(spec, &[("GPUPLAN_ALICLOUD_ENDPOINT", "not a url")]);
    let r = f.run(&["plan"]).expect(1);
    assert!(r.stderr.contains("`not a url` is not a URL"), "{}", r.stderr);
    assert!(r.stderr.contains("GPUPLAN_ALICLOUD_ENDPOINT"), "{}", r.stderr);
}
