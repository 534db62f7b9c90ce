//! Alibaba Cloud's capacity reservations against the signature-checking fake (issue 52):
//! a `reservation { kind = "on_demand" }` on `alicloud` is created with the plan's client
//! token, recorded, and released on destroy.

use crate::chinacloud::Fleet;
use crate::chinacloud::alibaba_fake::{ACCESS_KEY_ID, ACCESS_KEY_SECRET, Fake};

const SPEC: &str = r#"provider "alicloud" {
  region = "cn-hangzhou"
}

reservation "t4" {
  provider       = "alicloud"
  zone           = "cn-hangzhou-h"
  kind           = "on_demand"
  instance_type  = "ecs.gn6i-c4g1.xlarge"
  instance_count = 2
  duration       = "30d"
}
"#;

#[test]
fn an_alibaba_capacity_reservation_is_created_once_and_released_on_destroy() {
    let fake = Fake::start();
    let f = Fleet::new(
        SPEC,
        &[
            ("ALIBABA_CLOUD_ACCESS_KEY_ID", ACCESS_KEY_ID),
            ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", ACCESS_KEY_SECRET),
            ("GPUPLAN_ALICLOUD_ENDPOINT", &fake.url),
        ],
    );
    let r = f.run(&["plan"]).expect(0);
    assert!(r.stdout.contains("buy reservation.t4: on_demand, 2 × ecs.gn6i-c4g1.xlarge"), "{}", r.stdout);
    assert!(r.stdout.contains("USD/h, used or not), cancellable, ends "), "{}", r.stdout);
    f.run(&["apply", "--auto-approve"]).expect(0);
    let created = fake.calls("CreateCapacityReservation");
    assert_eq!(created.len(), 1, "one create");
    assert!(created[0].starts_with("gp-"), "under the plan's client token: {created:?}");
    {
        let s = fake.lock();
        let (_, item) = s.reservations.values().next().expect("a reservation");
        assert_eq!(item["AllocatedResources"]["AllocatedResource"][0]["TotalAmount"], 2);
        assert_eq!(item["EndTimeType"], "Limited");
    }
    // Nothing more to buy.
    let r = f.run(&["plan", "--detailed-exitcode"]).expect(0);
    assert!(r.stdout.contains("keep reservation.t4"), "{}", r.stdout);
    f.run(&["destroy", "--auto-approve"]).expect(0);
    assert_eq!(fake.calls("ReleaseCapacityReservation").len(), 1);
    let s = fake.lock();
    assert!(s.reservations.values().all(|(_, i)| i["Status"] == "Released"));
}

#[test]
fn an_alibaba_pool_launches_into_its_capacity_reservation_by_private_pool_id() {
    let fake = Fake::start();
    let pool = |desired: u32| {
        format!(
            r#"{SPEC}
gpu_pool "infer" {{
  provider       = "alicloud"
  zones          = ["cn-hangzhou-h"]
  gpu            = "T4"
  gpus_per_node  = 1
  instance_types = ["ecs.gn6i-c4g1.xlarge"]
  image          = "m-gpuplan"
  nodes {{
    min     = 0
    desired = {desired}
    max     = 4
  }}
  capacity {{
    reservation = reservation.t4
  }}
}}
"#
        )
    };
    let f = Fleet::new(
        &pool(0),
        &[
            ("ALIBABA_CLOUD_ACCESS_KEY_ID", ACCESS_KEY_ID),
            ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", ACCESS_KEY_SECRET),
            ("GPUPLAN_ALICLOUD_ENDPOINT", &fake.url),
        ],
    );
    f.run(&["apply", "--auto-approve"]).expect(0);
    let id = fake.lock().reservations.keys().next().expect("bought").clone();
    std::fs::write(f.path().join("main.hcl"), pool(3)).unwrap();
    let r = f.run(&["plan"]).expect(0);
    assert!(r.stdout.contains(&format!("reserved: reservation.t4 ({id})")), "{}", r.stdout);
    f.run(&["apply", "--auto-approve"]).expect(0);
    let s = fake.lock();
    let (_, item) = &s.reservations[&id];
    assert_eq!(item["AllocatedResources"]["AllocatedResource"][0]["UsedAmount"], 2, "two in the private pool");
    assert_eq!(s.instances.len(), 3, "the third per `mix`");
}
