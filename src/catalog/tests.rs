use super::check::is_date;
use super::*;

use ProviderKind::{Alicloud, Aws, Sim, Tencentcloud};

/// No price or spec in the catalog may claim to be from after this date.
const NOT_AFTER: &str = "2026-11-21";
const RATE: f64 = DEFAULT_CNY_PER_USD;

fn names<'a>(types: &[&'a InstanceType]) -> Vec<&'a str> {
    types.iter().map(|t| t.name.as_str()).collect()
}

#[test]
fn every_row_of_every_file_passes_the_checks() {
    let mut all = Vec::new();
    for cloud in CLOUDS {
        let c = catalog().cloud(cloud).unwrap_or_else(|| panic!("no catalog for {cloud}"));
        assert!(!c.instance_types.is_empty(), "{cloud} has no instance types");
        all.extend(problems(c, NOT_AFTER));
    }
    assert!(all.is_empty(), "catalog problems:\n{}", all.join("\n"));
}

#[test]
fn instance_names_are_unique_across_clouds() {
    let mut seen = std::collections::HashSet::new();
    for t in catalog().instance_types(Sim) {
        assert!(seen.insert(&t.name), "{} appears in two clouds", t.name);
    }
}

#[test]
fn every_gpu_model_is_sold_somewhere_and_aliases_do_not_shadow_names() {
    let types = catalog().instance_types(Sim);
    for m in GPU_MODELS {
        assert!(types.iter().any(|t| t.gpu == m.name), "no instance type has GPU {}", m.name);
        for alias in m.aliases {
            let hits = gpu_models_like(alias);
            assert!(hits.contains(&m), "alias {alias} does not lead back to {}", m.name);
            assert!(!GPU_MODELS.iter().any(|o| normalize(o.name) == normalize(alias)), "alias {alias} is a model name");
        }
    }
}

/// Copy the AWS catalog with one row broken by `edit`; the checks must notice.
fn aws_problems_after(edit: impl FnOnce(&mut CloudCatalog)) -> Vec<String> {
    let mut c = catalog().cloud(Aws).unwrap().clone();
    edit(&mut c);
    problems(&c, NOT_AFTER)
}

#[test]
fn checks_catch_broken_rows() {
    type Edit = fn(&mut InstanceType);
    let cases: [(&str, Edit); 11] = [
        ("not a canonical model", |t| t.gpu = "A100".into()),
        ("GPU memory", |t| t.gpu_memory_gib = 22.35),
        ("no GPUs", |t| t.gpus = 0),
        ("must be positive and finite", |t| t.price = f64::NAN),
        ("vCPU", |t| t.ram_gib = 0.0),
        ("not in the file's region list", |t| t.regions.push("mars-1".into())),
        ("lists no regions", |t| t.regions.clear()),
        ("not a zone of the type's regions", |t| t.zones = vec!["ap-southeast-1a".into()]),
        ("without a note", |t| (t.price_estimated, t.note) = (true, None)),
        ("not a YYYY-MM-DD", |t| t.as_of = "2026-02-30".into()),
        ("is after", |t| t.as_of = "2026-12-01".into()),
    ];
    for (want, edit) in cases {
        let found = aws_problems_after(|c| {
            let t = c.instance_types.iter_mut().find(|t| t.name == "p4de.24xlarge").unwrap();
            t.regions = vec!["us-east-1".into()];
            edit(t);
        });
        assert!(found.iter().any(|p| p.contains(want)), "expected {want:?}, got {found:?}");
    }
    let dup = aws_problems_after(|c| c.instance_types.push(c.instance_types[0].clone()));
    assert!(dup.iter().any(|p| p.contains("listed twice")), "{dup:?}");
    let zone = aws_problems_after(|c| c.regions[0].zones.push("us-west-2z".into()));
    assert!(zone.iter().any(|p| p.contains("not named after its region")), "{zone:?}");
    let cur = aws_problems_after(|c| c.currency = Currency::Cny);
    assert!(cur.iter().any(|p| p.contains("billing currency")), "{cur:?}");
}

#[test]
fn dates_are_checked_for_real_days() {
    for ok in ["2026-09-24", "2024-02-29", "2000-02-29", "2026-12-31"] {
        assert!(is_date(ok), "{ok}");
    }
    for bad in
        ["2026-9-24", "2025-02-29", "1900-02-29", "2026-13-01", "2026-00-10", "2026-04-31", "2026-09-2x", "２026-09-2"]
    {
        assert!(!is_date(bad), "{bad}");
    }
}

#[test]
fn hand_checked_rows() {
    let c = catalog();
    let p4de = c.instance_type(Aws, "p4de.24xlarge").unwrap();
    assert_eq!((p4de.price, p4de.currency, p4de.gpus, p4de.gpu.as_str()), (27.44705, Currency::Usd, 8, "A100-80GB"));
    assert_eq!((p4de.vcpu, p4de.ram_gib, p4de.gpu_memory_gib, p4de.price_estimated), (96, 1152.0, 80.0, false));
    let g5 = c.instance_type(Aws, "g5.48xlarge").unwrap();
    assert_eq!((g5.price, g5.gpu.as_str(), g5.gpus, g5.gpu_memory_gib), (16.288, "A10G", 8, 24.0));
    let gn10xp = c.instance_type(Tencentcloud, "GN10Xp.2XLARGE40").unwrap();
    assert_eq!((gn10xp.price, gn10xp.currency, gn10xp.price_estimated), (18.0, Currency::Cny, false));
    let gn10xp8 = c.instance_type(Tencentcloud, "GN10Xp.20XLARGE320").unwrap();
    assert_eq!((gn10xp8.price, gn10xp8.gpus, gn10xp8.price_estimated), (144.0, 8, true));
    let gn7e = c.instance_type(Alicloud, "ecs.gn7e-c16g1.4xlarge").unwrap();
    assert_eq!((gn7e.price, gn7e.gpu.as_str(), gn7e.as_of.as_str()), (34.742, "A100-80GB", "2026-08-20"));
    let aws = c.cloud(Aws).unwrap();
    assert_eq!((aws.currency, aws.price_region.as_str(), aws.spot_discount), (Currency::Usd, "us-east-1", 0.6));
    assert_eq!(c.zones_of(Aws, "us-east-1").len(), 6);
}

#[test]
fn matching_is_cheapest_first_within_region_gpu_and_count() {
    let t4 = catalog().matching(Aws, "us-east-1", "T4", 1, RATE);
    assert_eq!(names(&t4), ["g4dn.xlarge", "g4dn.2xlarge", "g4dn.4xlarge", "g4dn.8xlarge", "g4dn.16xlarge"]);
    let a100 = catalog().matching(Aws, "us-west-2", "A100-80GB", 8, RATE);
    assert_eq!(names(&a100), ["p4de.24xlarge"]);
    assert!(catalog().matching(Aws, "ap-southeast-1", "A100-80GB", 8, RATE).is_empty());
    assert!(catalog().matching(Aws, "us-east-1", "A100-80GB", 4, RATE).is_empty());
    // Estimated per-GPU prices tie with the priced size; the smaller host wins.
    let gn6i = catalog().matching(Alicloud, "cn-hangzhou", "T4", 1, RATE);
    assert_eq!(gn6i[0].name, "ecs.gn6i-c4g1.xlarge");
    assert_eq!(gn6i.len(), 4);
}

#[test]
fn matching_breaks_price_ties_by_vcpu_then_name() {
    let row = |name: &str, price: f64, vcpu: u32| {
        format!(
            r#"{{"name": "{name}", "gpu": "T4", "gpus": 1, "gpu_memory_gib": 16, "vcpu": {vcpu}, "ram_gib": 16,
                "regions": ["r-1"], "price": {price}, "price_source": "test", "as_of": "2026-01-01"}}"#
        )
    };
    let rows = [row("b", 1.0, 8), row("a", 1.0, 8), row("c", 1.0, 4), row("d", 0.5, 64), row("e", 0.9, 8)];
    let src = format!(
        r#"{{"cloud": "aws", "currency": "USD", "price_region": "r-1",
            "spot": {{"typical_discount": 0.5, "source": "test", "as_of": "2026-01-01"}},
            "regions": [{{"name": "r-1", "zones": ["r-1a"]}}], "instance_types": [{}]}}"#,
        rows.join(",")
    );
    let c = Catalog::new(vec![parse(&src).unwrap()]);
    assert_eq!(names(&c.matching(Aws, "r-1", "T4", 1, RATE)), ["d", "e", "c", "a", "b"]);
    assert!(c.matching(Aws, "r-2", "T4", 1, RATE).is_empty());
}

#[test]
fn sim_serves_every_cloud_and_real_providers_only_their_own() {
    let c = catalog();
    assert_eq!(c.clouds_for(Sim).len(), 3);
    assert!(c.cloud(Sim).is_none());
    assert_eq!(c.instance_type(Sim, "GN7.2XLARGE32").unwrap().cloud, Tencentcloud);
    assert_eq!(c.instance_type(Sim, "ecs.gn8is.2xlarge").unwrap().cloud, Alicloud);
    assert!(c.instance_type(Aws, "GN7.2XLARGE32").is_none());
    assert_eq!(c.region(Sim, "cn-hangzhou").unwrap().cloud, Alicloud);
    assert!(c.region(Tencentcloud, "cn-hangzhou").is_none());
    assert_eq!(c.region(Sim, "ap-southeast-1").unwrap().cloud, Aws, "sim searches AWS first");
    let sim_types = c.instance_types(Sim).len();
    assert_eq!(sim_types, CLOUDS.iter().map(|&k| c.instance_types(k).len()).sum::<usize>());
    assert_eq!(c.regions(Sim).len(), CLOUDS.iter().map(|&k| c.regions(k).len()).sum::<usize>());
    // ap-southeast-1 exists at AWS and Alibaba: sim compares both in USD.
    let t4 = c.matching(Sim, "ap-southeast-1", "T4", 1, RATE);
    assert_eq!(t4[0].name, "ecs.gn6i-c4g1.xlarge", "2.55 CNY is below 0.526 USD at {RATE}");
    assert!(t4.iter().any(|t| t.cloud == Aws) && t4.iter().any(|t| t.cloud == Alicloud));
    assert!(t4.windows(2).all(|w| w[0].price_usd(RATE) <= w[1].price_usd(RATE)));
}

#[test]
fn prices_convert_to_usd_and_spot_applies_the_cloud_discount() {
    let c = catalog();
    let g4dn = c.instance_type(Aws, "g4dn.xlarge").unwrap();
    assert_eq!(g4dn.price_usd(RATE), 0.526);
    assert!((g4dn.spot_price_usd(RATE) - 0.526 * 0.4).abs() < 1e-12);
    let gn7 = c.instance_type(Tencentcloud, "GN7.2XLARGE32").unwrap();
    assert!((gn7.price_usd(7.0) - 6.5 / 7.0).abs() < 1e-12);
    assert!((gn7.spot_price_usd(7.0) - 6.5 / 7.0 * 0.15).abs() < 1e-12);
    assert!(gn7.price_usd(6.5) > gn7.price_usd(7.5), "a dearer dollar makes CNY prices cheaper");
}

#[test]
fn zones_of_a_type_narrow_the_region() {
    let c = catalog();
    let gz = c.region(Tencentcloud, "ap-guangzhou").unwrap();
    assert_eq!(c.instance_type(Tencentcloud, "GT4.4XLARGE96").unwrap().zones_in(gz), ["ap-guangzhou-4"]);
    assert_eq!(c.instance_type(Tencentcloud, "GN7.2XLARGE32").unwrap().zones_in(gz).len(), gz.zones.len());
    let sg = c.region(Aws, "ap-southeast-1").unwrap();
    assert!(c.instance_type(Aws, "p4de.24xlarge").unwrap().zones_in(sg).is_empty());
    let ali_sg = c.region(Alicloud, "ap-southeast-1").unwrap();
    assert!(c.instance_type(Aws, "g4dn.xlarge").unwrap().zones_in(ali_sg).is_empty(), "another cloud's region");
}

#[test]
fn gpu_models_resolve_exactly_and_aliases_give_hints() {
    let c = catalog();
    assert_eq!(c.gpu_model("A100-80GB").map(|m| m.memory_gib), Some(80));
    assert_eq!(c.gpu_model("H200").map(|m| m.memory_gib), Some(141));
    assert!(c.gpu_model("a100-80gb").is_none(), "gpu_model is exact");
    let names = |s: &str| gpu_models_like(s).iter().map(|m| m.name).collect::<Vec<_>>();
    assert_eq!(names("a100"), ["A100-40GB", "A100-80GB"]);
    assert_eq!(names("a100-80g"), ["A100-80GB"]);
    assert_eq!(names("a100_80gb"), ["A100-80GB"]);
    assert_eq!(names("H100-80GB"), ["H100"]);
    assert_eq!(names("v100"), ["V100-16GB", "V100-32GB"]);
    assert!(names("P100").is_empty());
}

/// The name and GPU indexes find exactly what a scan of every served cloud finds, in the
/// same order (for `sim`, the first cloud that has a name wins).
#[test]
fn indexed_lookups_match_a_scan_of_the_catalog() {
    // A copy starts with an empty memo, whatever other tests asked the embedded catalog.
    let c = &catalog().clone();
    for provider in [Sim, Aws, Tencentcloud, Alicloud] {
        let types = c.instance_types(provider);
        let regions = c.regions(provider);
        for t in catalog().instance_types(Sim) {
            let scanned = types.iter().copied().find(|x| x.name == t.name);
            assert_eq!(
                c.instance_type(provider, &t.name).map(|x| (x.cloud, &x.name)),
                scanned.map(|x| (x.cloud, &x.name))
            );
        }
        for r in catalog().regions(Sim) {
            let scanned = regions.iter().copied().find(|x| x.name == r.name);
            assert_eq!(c.region(provider, &r.name).map(|x| (x.cloud, &x.name)), scanned.map(|x| (x.cloud, &x.name)));
            let gpus_models: std::collections::BTreeSet<&str> = types.iter().map(|t| t.gpu.as_str()).collect();
            for gpu in gpus_models {
                for gpus in [1, 2, 4, 8] {
                    let mut scanned: Vec<&InstanceType> = types
                        .iter()
                        .copied()
                        .filter(|x| x.gpu == gpu && x.gpus == gpus && x.offered_in(&r.name))
                        .collect();
                    scanned.sort_by(|a, b| {
                        a.price_usd(7.2)
                            .total_cmp(&b.price_usd(7.2))
                            .then(a.vcpu.cmp(&b.vcpu))
                            .then_with(|| a.name.cmp(&b.name))
                    });
                    // Asked twice: the second answer comes from the memo (for the first
                    // questions; past its cap, computed again) and must be the same.
                    for _ in 0..2 {
                        let found = c.matching(provider, &r.name, gpu, gpus, 7.2);
                        assert_eq!(
                            found.iter().map(|x| (x.cloud, &x.name)).collect::<Vec<_>>(),
                            scanned.iter().map(|x| (x.cloud, &x.name)).collect::<Vec<_>>()
                        );
                    }
                }
            }
        }
        assert!(c.instance_type(provider, "no-such-type").is_none());
        assert!(c.region(provider, "no-such-region").is_none());
    }
}
