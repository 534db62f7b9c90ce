use super::*;
use crate::addr::Kind;

fn job(name: &str, priority: Priority, age: Option<&str>, gpus: u32, replicas: u32, preemptible: bool) -> Demand {
    Demand {
        address: Address::new(Kind::Job, name),
        pool: pool_addr(),
        quota: Some(quota_addr()),
        priority,
        age: age.map(str::to_string),
        preemptible,
        replicas,
        gpus_per_replica: gpus,
    }
}

fn pool_addr() -> Address {
    Address::new(Kind::GpuPool, "train")
}

fn quota_addr() -> Address {
    Address::new(Kind::Quota, "ml")
}

/// A pool of 8-GPU nodes: `od` on-demand and `spot` spot nodes, all free.
fn pool(od: u32, spot: u32, fallback: Fallback) -> BTreeMap<Address, PoolRoom> {
    let mut nodes = vec![NodeRoom { capacity: Capacity::OnDemand, free: 8, id: None }; od as usize];
    nodes.extend(vec![NodeRoom { capacity: Capacity::Spot, free: 8, id: None }; spot as usize]);
    let room = PoolRoom {
        gpu: "A100-80GB".into(),
        gpus_per_node: 8,
        fallback,
        nodes,
        usd_per_gpu_hour_on_demand: Some(5.0),
        usd_per_gpu_hour_spot: Some(2.0),
    };
    BTreeMap::from([(pool_addr(), room)])
}

fn quota(q: QuotaRoom) -> BTreeMap<Address, QuotaRoom> {
    BTreeMap::from([(quota_addr(), q)])
}

fn names(out: &[Admission]) -> Vec<String> {
    out.iter().map(|a| a.address.name.clone()).collect()
}

fn get<'a>(out: &'a [Admission], name: &str) -> &'a Admission {
    out.iter().find(|a| a.address.name == name).expect("job decided")
}

fn code(out: &[Admission], name: &str) -> Option<&'static str> {
    get(out, name).reason.as_ref().map(|r| r.code.as_str())
}

#[test]
fn order_is_priority_then_age_then_address() {
    let demands = vec![
        job("low_old", Priority::Low, Some("2026-01-01T00:00:00Z"), 1, 1, false),
        job("new_b", Priority::High, None, 1, 1, false),
        job("new_a", Priority::High, None, 1, 1, false),
        job("high_young", Priority::High, Some("2026-03-01T00:00:00Z"), 1, 1, false),
        job("high_old", Priority::High, Some("2026-02-01T00:00:00Z"), 1, 1, false),
        job("critical", Priority::Critical, None, 1, 1, false),
        job("medium", Priority::Medium, None, 1, 1, false),
    ];
    let out = admit(demands, &pool(4, 0, Fallback::OnDemand), &quota(QuotaRoom::default()));
    assert_eq!(names(&out), ["critical", "high_old", "high_young", "new_a", "new_b", "medium", "low_old"]);
    assert!(out.iter().all(|a| a.placed.is_some()));
}

#[test]
fn preemptible_jobs_prefer_spot_and_others_stay_on_demand() {
    let demands =
        vec![job("batch", Priority::Medium, None, 8, 1, true), job("serve", Priority::Medium, None, 8, 1, false)];
    let out = admit(demands, &pool(1, 1, Fallback::OnDemand), &quota(QuotaRoom::default()));
    assert_eq!(get(&out, "batch").placed, Some(vec![Capacity::Spot]));
    assert_eq!(get(&out, "serve").placed, Some(vec![Capacity::OnDemand]));
}

#[test]
fn non_preemptible_job_never_uses_spot() {
    let out = admit(
        vec![job("serve", Priority::Critical, None, 8, 1, false)],
        &pool(0, 4, Fallback::OnDemand),
        &quota(QuotaRoom::default()),
    );
    assert_eq!(get(&out, "serve").placed, None);
    assert_eq!(code(&out, "serve"), Some("capacity"));
    assert!(get(&out, "serve").reason.as_ref().unwrap().message.contains("on-demand nodes"));
}

#[test]
fn preemptible_job_falls_back_to_on_demand_only_when_the_pool_allows() {
    let d = || vec![job("batch", Priority::Medium, None, 8, 1, true)];
    let out = admit(d(), &pool(1, 0, Fallback::OnDemand), &quota(QuotaRoom::default()));
    assert_eq!(get(&out, "batch").placed, Some(vec![Capacity::OnDemand]));
    let out = admit(d(), &pool(1, 0, Fallback::Wait), &quota(QuotaRoom::default()));
    assert_eq!(get(&out, "batch").placed, None);
    assert_eq!(code(&out, "batch"), Some("capacity"));
}

#[test]
fn replicas_each_need_a_node_and_are_admitted_whole() {
    // Two 6-GPU replicas cannot share an 8-GPU node: with one node the job waits whole.
    let out = admit(
        vec![job("ddp", Priority::High, None, 6, 2, false)],
        &pool(1, 0, Fallback::OnDemand),
        &quota(QuotaRoom::default()),
    );
    assert_eq!(get(&out, "ddp").placed, None);
    let out = admit(
        vec![job("ddp", Priority::High, None, 6, 2, false)],
        &pool(2, 0, Fallback::OnDemand),
        &quota(QuotaRoom::default()),
    );
    assert_eq!(get(&out, "ddp").placed, Some(vec![Capacity::OnDemand, Capacity::OnDemand]));
}

#[test]
fn higher_priority_job_takes_the_gpus_and_the_other_waits_for_priority() {
    let demands = vec![
        job("low", Priority::Low, Some("2020-01-01T00:00:00Z"), 8, 1, false),
        job("crit", Priority::Critical, None, 8, 1, false),
    ];
    let out = admit(demands, &pool(1, 0, Fallback::OnDemand), &quota(QuotaRoom::default()));
    assert_eq!(names(&out), ["crit", "low"]);
    assert!(get(&out, "crit").placed.is_some());
    assert_eq!(code(&out, "low"), Some("priority"));
    assert!(get(&out, "low").reason.as_ref().unwrap().message.contains("`job.crit`"));
}

#[test]
fn older_job_of_equal_priority_comes_first_and_the_newer_waits_for_capacity() {
    let demands = vec![
        job("young", Priority::High, Some("2026-05-01T00:00:00Z"), 8, 1, false),
        job("old", Priority::High, Some("2026-04-01T00:00:00Z"), 8, 1, false),
    ];
    let out = admit(demands, &pool(1, 0, Fallback::OnDemand), &quota(QuotaRoom::default()));
    assert!(get(&out, "old").placed.is_some());
    assert_eq!(code(&out, "young"), Some("capacity"));
    assert!(get(&out, "young").reason.as_ref().unwrap().message.contains("queued earlier"));
}

#[test]
fn a_job_too_big_for_the_pool_does_not_block_smaller_ones() {
    let demands =
        vec![job("huge", Priority::Critical, None, 8, 3, false), job("small", Priority::Low, None, 2, 1, false)];
    let out = admit(demands, &pool(2, 0, Fallback::OnDemand), &quota(QuotaRoom::default()));
    assert_eq!(code(&out, "huge"), Some("capacity"));
    assert!(get(&out, "huge").reason.as_ref().unwrap().message.contains("has 16 free"));
    assert!(get(&out, "small").placed.is_some());
}

#[test]
fn quota_max_gpus_refuses_what_would_exceed_it() {
    let q = QuotaRoom { max_gpus: Some(12), used_gpus: 4, ..QuotaRoom::default() };
    let demands = vec![job("a", Priority::High, None, 8, 1, false), job("b", Priority::Medium, None, 1, 1, false)];
    let out = admit(demands, &pool(4, 0, Fallback::OnDemand), &quota(q));
    // 4 in use + 8 = 12: admitted; then 12 + 1 > 12: refused.
    assert!(get(&out, "a").placed.is_some());
    assert_eq!(code(&out, "b"), Some("quota"));
    assert!(get(&out, "b").reason.as_ref().unwrap().message.contains("allows 12 GPUs; 12 are in use"));
}

#[test]
fn quota_allowed_gpus_refuses_other_models() {
    let q = QuotaRoom { allowed_gpus: vec!["H100".into()], ..QuotaRoom::default() };
    let out = admit(vec![job("a", Priority::High, None, 1, 1, false)], &pool(1, 0, Fallback::OnDemand), &quota(q));
    assert_eq!(code(&out, "a"), Some("quota"));
    assert!(get(&out, "a").reason.as_ref().unwrap().message.contains("does not allow A100-80GB"));
}

#[test]
fn quota_hourly_budget_counts_the_capacity_the_job_lands_on() {
    // 8 GPUs on spot cost 16 USD/h, on-demand 40 USD/h.
    let q = || QuotaRoom { hourly_usd: Some(20.0), ..QuotaRoom::default() };
    let spot = admit(vec![job("a", Priority::High, None, 8, 1, true)], &pool(1, 1, Fallback::OnDemand), &quota(q()));
    assert_eq!(get(&spot, "a").placed, Some(vec![Capacity::Spot]));
    let od = admit(vec![job("a", Priority::High, None, 8, 1, false)], &pool(1, 1, Fallback::OnDemand), &quota(q()));
    assert_eq!(code(&od, "a"), Some("quota"));
    assert!(get(&od, "a").reason.as_ref().unwrap().message.contains("budget is 20.00 USD/h"));
}

#[test]
fn quota_monthly_budget_refuses_too() {
    let q = QuotaRoom { monthly_usd: Some(1000.0), ..QuotaRoom::default() };
    // 1 GPU on-demand: 5 USD/h × 730 h = 3650 USD/month.
    let out = admit(vec![job("a", Priority::High, None, 1, 1, false)], &pool(1, 0, Fallback::OnDemand), &quota(q));
    assert_eq!(code(&out, "a"), Some("quota"));
    // Money reads as in every view: two decimals, thousands separated.
    let why = &get(&out, "a").reason.as_ref().unwrap().message;
    assert!(why.contains("budget is 1,000.00 USD/month") && why.contains("cost 3,650.00 USD/month"), "{why}");
}

#[test]
fn a_refused_job_leaves_the_room_to_others() {
    let q = QuotaRoom { max_gpus: Some(4), ..QuotaRoom::default() };
    let demands =
        vec![job("big", Priority::Critical, None, 8, 1, false), job("fits", Priority::Low, None, 4, 1, false)];
    let out = admit(demands, &pool(1, 0, Fallback::OnDemand), &quota(q));
    assert_eq!(code(&out, "big"), Some("quota"));
    assert_eq!(get(&out, "fits").placed, Some(vec![Capacity::OnDemand]));
}

#[test]
fn a_job_for_a_pool_without_nodes_waits_for_capacity() {
    let mut d = job("a", Priority::High, None, 1, 1, false);
    d.pool = Address::new(Kind::GpuPool, "gone");
    let out = admit(vec![d], &pool(1, 0, Fallback::OnDemand), &BTreeMap::new());
    assert_eq!(code(&out, "a"), Some("capacity"));
}

mod fair_share {
    use super::*;

    /// 1-GPU jobs of two quotas, all `Medium`, quota a's queued first.
    fn demands(n: usize) -> Vec<Demand> {
        let mut out = Vec::new();
        for (q, day) in [("a", "01"), ("b", "02")] {
            for i in 0..n {
                let mut d = job(
                    &format!("{q}{i}"),
                    Priority::Medium,
                    Some(&format!("2026-01-{day}T00:00:{i:02}Z")),
                    1,
                    1,
                    false,
                );
                d.quota = Some(Address::new(Kind::Quota, q));
                out.push(d);
            }
        }
        out
    }

    fn quotas(a: Option<f64>, b: Option<f64>) -> BTreeMap<Address, QuotaRoom> {
        BTreeMap::from([
            (Address::new(Kind::Quota, "a"), QuotaRoom { weight: a, ..QuotaRoom::default() }),
            (Address::new(Kind::Quota, "b"), QuotaRoom { weight: b, ..QuotaRoom::default() }),
        ])
    }

    fn admitted(out: &[Admission], q: &str) -> usize {
        out.iter().filter(|a| a.placed.is_some() && a.address.name.starts_with(q)).count()
    }

    #[test]
    fn capacity_is_shared_in_proportion_to_weight() {
        // One on-demand node of 8 GPUs; 8 jobs of each quota wait.
        let out = admit(demands(8), &pool(1, 0, Fallback::Wait), &quotas(Some(1.0), Some(3.0)));
        assert_eq!((admitted(&out, "a"), admitted(&out, "b")), (2, 6));
        let waiting = out.iter().find(|a| a.address.name == "a7").unwrap().reason.as_ref().unwrap();
        assert!(waiting.message.contains("fair share: `quota.a` has 2 GPUs in use at weight 1"), "{waiting:?}");
    }

    #[test]
    fn equal_weights_share_equally_and_no_weight_keeps_age_order() {
        let out = admit(demands(8), &pool(1, 0, Fallback::Wait), &quotas(Some(1.0), Some(1.0)));
        assert_eq!((admitted(&out, "a"), admitted(&out, "b")), (4, 4));
        // Without weights: priority, then age, as before (a's jobs are older).
        let out = admit(demands(8), &pool(1, 0, Fallback::Wait), &quotas(None, None));
        assert_eq!((admitted(&out, "a"), admitted(&out, "b")), (8, 0));
    }

    #[test]
    fn running_jobs_count_in_the_share() {
        // Quota b already runs 6 GPUs elsewhere: a catches up first.
        let mut q = quotas(Some(1.0), Some(1.0));
        q.get_mut(&Address::new(Kind::Quota, "b")).unwrap().used_gpus = 6;
        let out = admit(demands(8), &pool(1, 0, Fallback::Wait), &q);
        assert_eq!((admitted(&out, "a"), admitted(&out, "b")), (7, 1));
    }
}

/// Random small queues: the near-linear admission decides exactly what the straightforward
/// reference (the loop it replaced) decides, in the same order with the same reasons,
/// with and without fair share, budgets, `max_gpus`, allowed models, unknown pools and
/// quotas, spot fallback and several jobs competing per priority.
mod differential {
    use super::*;
    use proptest::prelude::*;

    const PRIORITIES: [Priority; 4] = [Priority::Critical, Priority::High, Priority::Medium, Priority::Low];
    const FALLBACKS: [Fallback; 3] = [Fallback::OnDemand, Fallback::Wait, Fallback::Fail];
    const AGES: [Option<&str>; 4] =
        [None, Some("2026-01-01T00:00:00Z"), Some("2026-01-02T00:00:00Z"), Some("2026-01-03T00:00:00Z")];

    fn node() -> impl Strategy<Value = NodeRoom> {
        (any::<bool>(), 0u32..9).prop_map(|(spot, free)| NodeRoom {
            capacity: if spot { Capacity::Spot } else { Capacity::OnDemand },
            free,
            id: None,
        })
    }

    fn pools() -> impl Strategy<Value = BTreeMap<Address, PoolRoom>> {
        let room = (proptest::collection::vec(node(), 0..5), 0usize..3, any::<bool>(), 0u8..3).prop_map(
            |(nodes, fallback, a100, priced)| PoolRoom {
                gpu: if a100 { "A100-80GB" } else { "L4" }.into(),
                gpus_per_node: 8,
                fallback: FALLBACKS[fallback],
                nodes,
                usd_per_gpu_hour_on_demand: (priced > 0).then_some(4.0),
                usd_per_gpu_hour_spot: (priced > 1).then_some(1.5),
            },
        );
        proptest::collection::vec(room, 0..3).prop_map(|rooms| {
            rooms.into_iter().enumerate().map(|(i, r)| (Address::new(Kind::GpuPool, format!("p{i}")), r)).collect()
        })
    }

    fn quotas() -> impl Strategy<Value = BTreeMap<Address, QuotaRoom>> {
        let room = (
            proptest::option::of(0u64..24),
            0u8..3,
            proptest::option::of(0u32..40),
            proptest::option::of(0u32..20_000),
            0u64..6,
            proptest::option::of(prop_oneof![Just(0.5), Just(1.0), Just(2.0), Just(3.0)]),
        )
            .prop_map(|(max_gpus, allowed, hourly, monthly, used_gpus, weight)| QuotaRoom {
                max_gpus,
                allowed_gpus: match allowed {
                    0 => vec![],
                    1 => vec!["L4".into()],
                    _ => vec!["A100-80GB".into(), "H100".into()],
                },
                hourly_usd: hourly.map(f64::from),
                monthly_usd: monthly.map(f64::from),
                used_gpus,
                used_hourly_usd: used_gpus as f64 * 0.5,
                weight,
            });
        proptest::collection::vec(room, 0..4).prop_map(|rooms| {
            rooms.into_iter().enumerate().map(|(i, r)| (Address::new(Kind::Quota, format!("q{i}")), r)).collect()
        })
    }

    fn demand() -> impl Strategy<Value = Demand> {
        (0u32..4, proptest::option::of(0u32..5), 0usize..4, 0usize..4, any::<bool>(), 0u32..4, 0u32..9, 0u32..1000)
            .prop_map(|(pool, quota, priority, age, preemptible, replicas, gpus, name)| Demand {
                address: Address::new(Kind::Job, format!("j{name}")),
                pool: Address::new(Kind::GpuPool, format!("p{pool}")),
                quota: quota.map(|q| Address::new(Kind::Quota, format!("q{q}"))),
                priority: PRIORITIES[priority],
                age: AGES[age].map(str::to_string),
                preemptible,
                replicas,
                gpus_per_replica: gpus,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
        #[test]
        fn admission_matches_the_reference(
            demands in proptest::collection::vec(demand(), 0..24),
            pools in pools(),
            quotas in quotas(),
        ) {
            let fast = admit(demands.clone(), &pools, &quotas);
            let slow = super::super::reference::admit(demands, &pools, &quotas);
            prop_assert_eq!(fast, slow);
        }
    }
}
