//! Live prices from Tencent (`InquiryPriceRunInstances`) and Alibaba (`DescribePrice`)
//! against the signature-checking fakes, through `plan` and `offers`: a believable quote
//! prices the plan and is marked live with its time; an absurd one is refused with a
//! warning and the dated catalog price stands.

use serde_json::Value;

use crate::chinacloud::{Fleet, alibaba_fake, pool, tencent_fake};

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn this_year() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()[..4].to_string()
}

#[test]
fn tencent_quotes_price_the_plan_and_offers_and_absurd_ones_are_refused() {
    let fake = tencent_fake::Fake::start();
    {
        let mut s = fake.lock();
        // 7.1 CNY at the default 7.1 CNY/USD: exactly 1 USD/h.
        s.prices.insert(("GN7.2XLARGE32".into(), "POSTPAID_BY_HOUR".into()), 7.1);
        // moto-style nonsense for spot: refused.
        s.prices.insert(("GN7.2XLARGE32".into(), "SPOTPAID".into()), 0.00001);
    }
    let spec = format!(
        "provider \"tencentcloud\" {{\n  region   = \"ap-guangzhou\"\n  endpoint = \"{}\"\n  image    = \"img-gpuplan\"\n}}\n{}",
        fake.url,
        pool(
            "tencentcloud",
            &["ap-guangzhou-3"],
            "T4",
            "GN7.2XLARGE32",
            2,
            "    on_demand_base = 1\n    spot_percent   = 100"
        )
    );
    let env =
        [("TENCENTCLOUD_SECRET_ID", tencent_fake::SECRET_ID), ("TENCENTCLOUD_SECRET_KEY", tencent_fake::SECRET_KEY)];
    let f = Fleet::new(&spec, &env);

    let r = f.run(&["plan", "--json"]).expect(0);
    let p = &json(&r.stdout)["cost"]["pools"][0];
    assert_eq!(p["on_demand_price"]["source"], "live", "{p:#}");
    assert_eq!(p["on_demand_price"]["usd_per_hour"], 1.0);
    assert!(p["on_demand_price"]["as_of"].as_str().unwrap().starts_with(&this_year()), "{p:#}");
    assert_eq!(p["spot_price"]["source"], "catalog-spot-model", "the absurd spot quote is refused: {p:#}");
    assert_eq!(p["spot_price"]["as_of"], "2026-09-24");
    assert!(r.stderr.contains("ignoring it and using the catalog price"), "{}", r.stderr);
    assert!(!fake.calls("InquiryPriceRunInstances").is_empty());

    // The prose under the cost table wraps at the width; read it unwrapped.
    let text = f.run(&["plan"]).expect(0).stdout.replace("\n    ", " ");
    assert!(text.contains("prices: live for gpu_pool.train (on-demand) (quoted "), "{text}");
    assert!(text.contains("catalog as of 2026-09-24 for the rest"), "{text}");

    // `offers` asks the spec's provider too, and says which prices are live.
    let args = ["offers", "--gpu", "T4", "--provider", "tencentcloud", "--region", "ap-guangzhou"];
    let r = f.run(&args).expect(0);
    let row = r.stdout.lines().find(|l| l.contains("GN7.2XLARGE32")).expect("a GN7.2XLARGE32 row");
    assert!(row.contains("1.0000") && row.contains("live "), "{row}\n{}", r.stdout);
    let mut offline = args.to_vec();
    offline.extend(["--offline", "--json"]);
    let rows = json(&f.run(&offline).expect(0).stdout);
    let row = rows.as_array().unwrap().iter().find(|r| r["instance_type"] == "GN7.2XLARGE32").expect("row");
    assert_eq!(row["price_source"], "catalog");
    assert_eq!(row["price_as_of"], "2026-09-24");

    // The ledger records what the plan priced: the live on-demand quote, the catalog's
    // spot estimate (the spot quote was refused).
    f.run(&["apply", "--auto-approve"]).expect(0);
    let state =
        crate::state_plain::plain(json(&std::fs::read_to_string(f.path().join("state/default.json")).expect("state")));
    let lines: Vec<&Value> = state["spend"].as_object().expect("a spend ledger").values().collect();
    assert_eq!(lines.len(), 2, "{state:#}");
    for l in lines {
        if l["capacity"] == "on-demand" {
            assert_eq!(l["usd_per_hour"], 1.0, "{l}");
            assert!(l["price_source"].as_str().unwrap().starts_with("live (quoted "), "{l}");
        } else {
            assert!(l["price_source"].as_str().unwrap().starts_with("catalog (as of 2026-09-24)"), "{l}");
        }
    }
}

#[test]
fn alibaba_quotes_price_the_instance_line_not_the_disk() {
    let fake = alibaba_fake::Fake::start();
    {
        let mut s = fake.lock();
        s.prices.insert(("ecs.gn6i-c4g1.xlarge".into(), "NoSpot".into()), 3.55); // 0.5 USD
        s.prices.insert(("ecs.gn6i-c4g1.xlarge".into(), "SpotAsPriceGo".into()), 1.42); // 0.2 USD
    }
    let spec = format!(
        "provider \"alicloud\" {{\n  region = \"cn-hangzhou\"\n  image  = \"m-gpuplan\"\n}}\n{}",
        pool(
            "alicloud",
            &["cn-hangzhou-h"],
            "T4",
            "ecs.gn6i-c4g1.xlarge",
            2,
            "    on_demand_base = 1\n    spot_percent   = 100"
        )
    );
    let env = [
        ("ALIBABA_CLOUD_ACCESS_KEY_ID", alibaba_fake::ACCESS_KEY_ID),
        ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", alibaba_fake::ACCESS_KEY_SECRET),
        ("GPUPLAN_ALICLOUD_ENDPOINT", fake.url.as_str()),
    ];
    let f = Fleet::new(&spec, &env);
    let r = f.run(&["plan", "--json"]).expect(0);
    let p = &json(&r.stdout)["cost"]["pools"][0];
    assert_eq!(p["on_demand_price"]["source"], "live", "{p:#}\n{}", r.stderr);
    assert_eq!(p["on_demand_price"]["usd_per_hour"], 0.5, "the instance line, without the system disk");
    assert_eq!(p["spot_price"]["source"], "live");
    assert_eq!(p["spot_price"]["usd_per_hour"], 0.2);
    // 1 on-demand + 1 spot node.
    assert_eq!(json(&r.stdout)["cost"]["hourly_after"], 0.7);

    let r = f.run(&["offers", "--gpu", "T4", "--provider", "alicloud", "--region", "cn-hangzhou", "--spot", "--json"]);
    let rows = json(&r.expect(0).stdout);
    let row = rows.as_array().unwrap().iter().find(|r| r["instance_type"] == "ecs.gn6i-c4g1.xlarge").expect("row");
    assert_eq!(row["price_source"], "live");
    assert_eq!(row["usd_per_node_hour"], 0.2);
}
