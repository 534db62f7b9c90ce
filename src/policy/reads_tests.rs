//! [`Reads::of`]: the members of a pool's facts the starter policies name, every member
//! for whatever could see a pool whole, and the same verdicts either way.

use super::*;
use crate::diag::{Diagnostics, Sources};
use crate::plan::diff::{self, PlanInput};
use crate::policy::{Facts, PolicyResult, evaluate_reading};
use crate::state::State;

/// The shipped starter policies, as `policies/` holds them.
const STARTERS: [&str; 5] = [
    include_str!("../../policies/allowed_gpu_models.hcl"),
    include_str!("../../policies/fleet_hourly_cap.hcl"),
    include_str!("../../policies/max_gpu_hour_price.hcl"),
    include_str!("../../policies/min_spot_share.hcl"),
    include_str!("../../policies/no_destroy_pool_with_jobs.hcl"),
];

fn policies(text: &str) -> Vec<Policy> {
    let mut sources = Sources::default();
    let file = sources.add("p.hcl", text.to_string());
    let mut diags = Diagnostics::default();
    let out = crate::policy::load::parse(file, text, &sources, &mut diags);
    assert!(!diags.has_errors(), "{text}: {:?}", diags.items);
    out
}

/// A soft policy over `plan.pools` with this `assert` and `message`.
fn over_pools(assert: &str, message: &str) -> String {
    format!(
        "policy \"p\" {{\n  enforcement = \"soft\"\n  for_each = plan.pools\n  assert = {assert}\n  message = \"{message}\"\n}}\n"
    )
}

fn fields(r: Reads) -> Vec<&'static str> {
    POOL_FIELDS.iter().enumerate().filter(|&(i, _)| r.pool_field(i)).map(|(_, f)| *f).collect()
}

#[test]
fn the_starter_policies_read_ten_members_of_a_pool_and_no_change() {
    let all: Vec<Policy> = STARTERS.iter().flat_map(|t| policies(t)).collect();
    let r = Reads::of(&all);
    assert_eq!(
        fields(r),
        [
            "action",
            "destroys",
            "gpu",
            "gpus_after",
            "instance_type",
            "labels",
            "nodes_after",
            "price_per_gpu_hour",
            "running_jobs",
            "spot_share"
        ]
    );
    assert!(!r.changes());
    assert_eq!(fields(Reads::of(&policies(STARTERS[1]))), Vec::<&str>::new(), "fleet_hourly_cap reads no pool");
}

/// Ways of reaching pools' facts that name the member read, or only ask which pools there
/// are: trimmed to those members.
#[test]
fn members_named_are_the_members_built() {
    let cases = [
        (over_pools("each.value[\"spot_share\"] > 0", "${each.key}"), vec!["spot_share"], false),
        (over_pools("length([for k, v in plan.pools : v if v.gpu == \"A\"]) > 0", "x"), vec!["gpu"], false),
        (over_pools("[for p in plan.pools : p][0].region != \"\"", "x"), vec!["region"], false),
        (over_pools("contains(keys(plan.pools), each.key) && length(plan.changes) > 0", "x"), vec![], true),
        (
            over_pools("lookup(plan.pools, each.key, null) == null || plan.pools[each.key].name != \"\"", "x"),
            vec!["name"],
            false,
        ),
        // A `for` variable named `plan` is no longer the plan.
        (over_pools("length([for plan in [1] : plan]) > 0", "x"), vec![], false),
    ];
    for (text, want, changes) in cases {
        let r = Reads::of(&policies(&text));
        assert_eq!((fields(r), r.changes()), (want, changes), "{text}");
    }
}

/// Whatever could see a pool's facts whole: every member is built. (A member no fact has,
/// whose error lists them all, is refused when the policy loads, and built whole here too.)
#[test]
fn what_could_see_a_pool_whole_reads_every_member() {
    let cases = [
        over_pools("length(keys(each.value)) > 0", "x"),
        over_pools("length(jsonencode(plan.pools)) > 0", "x"),
        over_pools("true", "${each.value}"),
        over_pools("(each.value.gpus_after > 0 ? each.value : {}).gpu == \"A\"", "x"),
        over_pools("each.value[each.key] == 1", "x"),
        over_pools("length(plan.pools[*].gpu) > 0", "x"),
        over_pools("contains(values(each.value), 1)", "x"),
        over_pools("length([for k, v in each.value : k]) > 0", "x"),
        over_pools("lookup(each.value, \"gpu\", \"\") != \"\"", "x"),
        over_pools("plan != null", "x"),
        over_pools("length(plan[each.key]) > 0", "x"),
        "policy \"p\" {\n  enforcement = \"soft\"\n  for_each = plan.pools[\"gpu_pool.train\"]\n  assert = true\n}\n"
            .into(),
    ];
    for text in cases {
        assert_eq!(Reads::of(&policies(&text)), Reads::ALL, "{text}");
    }
}

/// A real plan's facts (two pools, labels, a quota, a running job), cost and spec.
fn judge(policies: &[Policy], reads: &Reads) -> Vec<PolicyResult> {
    let text = r#"
provider "sim" {
  region = "us-east-1"
}
gpu_pool "train" {
  provider      = "sim"
  gpu           = "L4"
  gpus_per_node = 1
  nodes {
    desired = 2
    max     = 3
  }
  labels = { team = "ml", critical = "true" }
}
gpu_pool "infer" {
  provider      = "sim"
  gpu           = "A100-80GB"
  gpus_per_node = 8
  nodes {
    desired = 1
    max     = 1
  }
}
quota "ml" {
  pools        = [gpu_pool.train, gpu_pool.infer]
  max_gpus     = 8
  allowed_gpus = ["L4"]
}
"#;
    let mut sources = Sources::default();
    sources.add("main.hcl", text.to_string());
    let loaded = crate::spec::load_sources(sources, &Default::default());
    assert!(!loaded.diags.has_errors(), "{:?}", loaded.diags.items);
    let spec = &loaded.spec;
    let state = State::new("l-1".into());
    let input = PlanInput::offline(spec, &state);
    let plan = diff::plan(&input).expect("the state is empty");
    let prices = crate::cost::PriceBook::new(spec, &Default::default());
    let cost = crate::cost::cost(&plan, spec, &prices).expect("every pool has a known provider");
    let train: crate::addr::Address = "gpu_pool.train".parse().expect("an address");
    let running = crate::jobs::running::RunningJobs::from([(train, vec!["job.a".parse().expect("an address")])]);
    let month_to_date = Default::default();
    let facts = Facts {
        plan: &plan,
        cost: &cost,
        spec,
        running_jobs: &running,
        month_to_date: &month_to_date,
        month_to_date_as_of: None,
    };
    evaluate_reading(policies, &facts, &["p".to_string()], reads)
}

/// The starter policies, and policies that reach pools every way above (failing ones,
/// broken ones and those that give up among them), judge a real plan alike with the
/// members they read and with every member.
#[test]
fn trimmed_facts_judge_as_whole_ones() {
    let mut texts: Vec<String> = STARTERS.iter().map(|t| t.to_string()).collect();
    texts.extend([
        over_pools("each.value.gpus_after > 8", "${each.key}: ${each.value.gpu} ${each.value.labels.team}"),
        over_pools(
            "lookup(each.value.labels, \"critical\", \"false\") == \"true\"",
            "${join(\",\", each.value.running_jobs)}",
        ),
        over_pools("length(keys(each.value)) == 26", "${jsonencode(keys(each.value))}"),
        over_pools("each.value.labels.team == \"ml\"", "${each.value.labels.team}"),
        over_pools("lookup(plan.pools, \"gpu_pool.x\", null) == null", "x"),
        over_pools("length(plan.changes) == 2 && plan.changes[0].action == \"create\"", "x"),
    ]);
    for text in &texts {
        let ps = policies(text);
        let (trimmed, whole) = (judge(&ps, &Reads::of(&ps)), judge(&ps, &Reads::ALL));
        assert!(!whole.is_empty(), "{text}");
        assert_eq!(trimmed, whole, "{text}");
    }
    // Some verdicts fail, some pass, some cannot be evaluated: the cases compare something.
    let all: Vec<PolicyResult> = texts.iter().flat_map(|t| judge(&policies(t), &Reads::ALL)).collect();
    assert!(all.iter().any(|r| r.passed) && all.iter().any(|r| !r.passed));
    assert!(all.iter().any(|r| r.message.starts_with("could not be evaluated")));
}
