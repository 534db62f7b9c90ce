//! The direct serializer against the serde_json detour it replaces: the same value for
//! the example fleets' resources, for generated JSON, and for every shape serde has.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use serde::Serialize;

use super::to_value;
use crate::spec::value::Value;

/// What `decode` built before: serialize to JSON, convert, drop the JSON.
fn via_json<T: Serialize + ?Sized>(x: &T) -> Value {
    serde_json::to_value(x).map(|j| Value::from_json(&j)).unwrap_or_default()
}

fn same<T: Serialize + ?Sized>(x: &T) {
    assert_eq!(to_value(x), via_json(x));
}

#[test]
fn example_fleets_resources_read_the_same() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut seen = 0;
    for dir in ["quickstart", "quickstart-yaml", "aws", "multi-cloud", "kubernetes", "tencentcloud", "alicloud"] {
        let loaded = crate::spec::load_dir(&root.join(dir), &crate::spec::LoadOptions::default()).expect("reads");
        let s = &loaded.spec;
        s.gpu_pools.values().for_each(same);
        s.quotas.values().for_each(same);
        s.job_templates.values().for_each(same);
        s.jobs.values().for_each(same);
        s.autoscalers.values().for_each(same);
        s.reservations.values().for_each(same);
        s.providers.values().for_each(same);
        seen += s.gpu_pools.len() + s.jobs.len() + s.providers.len();
    }
    assert!(seen > 10, "the examples declare resources ({seen})");
}

#[derive(Serialize)]
enum Shape {
    Unit,
    Newtype(u8),
    Tuple(i32, String),
    Struct { a: Option<f32>, b: char },
}

#[derive(Serialize)]
struct Unit;

#[derive(Serialize)]
struct Every<'a> {
    shapes: Vec<Shape>,
    unit: (),
    unit_struct: Unit,
    tuple: (u16, i64, bool),
    #[serde(with = "serde_bytes_like")]
    bytes: &'a [u8],
    floats: [f64; 4],
    big: (u128, i128, u64, i8),
    #[serde(flatten)]
    flat: BTreeMap<String, u32>,
    keys: BTreeMap<Shape2, &'a str>,
}

#[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
enum Shape2 {
    Left,
    Right,
}

mod serde_bytes_like {
    pub fn serialize<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(b)
    }
}

#[test]
fn every_serde_shape_reads_as_serde_json_reads_it() {
    let every = Every {
        shapes: vec![
            Shape::Unit,
            Shape::Newtype(7),
            Shape::Tuple(-3, "x".into()),
            Shape::Struct { a: Some(1.5), b: 'é' },
            Shape::Struct { a: None, b: 'z' },
        ],
        unit: (),
        unit_struct: Unit,
        tuple: (1, -(1 << 60), true),
        bytes: &[0, 255, 3],
        floats: [0.1, f64::NAN, f64::INFINITY, -0.0],
        big: (u64::MAX as u128, i64::MIN as i128, u64::MAX, -8),
        flat: BTreeMap::from([("f1".into(), 1), ("f2".into(), 2)]),
        keys: BTreeMap::from([(Shape2::Left, "l"), (Shape2::Right, "r")]),
    };
    same(&every);
    let v = to_value(&every);
    let Value::Object(o) = &v else { panic!("an object: {v:?}") };
    assert_eq!(o["unit"], Value::Null);
    assert_eq!(o["f1"], Value::Number(1.0));
    assert_eq!(o["floats"], Value::List(vec![Value::Number(0.1), Value::Null, Value::Null, Value::Number(-0.0)]));
}

#[test]
fn what_serde_json_refuses_or_rewrites_falls_back_to_it() {
    // Keys that are not strings: serde_json writes numbers and bools as text.
    same(&BTreeMap::from([(1u32, "a"), (20, "b")]));
    same(&BTreeMap::from([(true, 1)]));
    same(&BTreeMap::from([(-7i64, 1)]));
    // Keys it refuses: the whole value is null, as before.
    same(&BTreeMap::from([((1, 2), "tuple key")]));
    assert_eq!(to_value(&BTreeMap::from([((1, 2), "tuple key")])), Value::Null);
    // 128-bit integers past 64 bits.
    same(&(u128::MAX, 1));
    same(&i128::MIN);
    // Raw JSON is parsed, not kept as a struct.
    let raw = serde_json::value::RawValue::from_string("{\"a\": [1, 2.5]}".into()).unwrap();
    same(&raw);
    assert_eq!(
        to_value(&raw),
        Value::Object(BTreeMap::from([("a".into(), Value::List(vec![Value::Number(1.0), Value::Number(2.5)]))]))
    );
}

fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
        ".{0,8}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::from),
            prop::collection::btree_map(".{0,6}", inner, 0..8)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn generated_json_reads_the_same(j in json()) {
        prop_assert_eq!(to_value(&j), Value::from_json(&j));
        prop_assert_eq!(to_value(&j), via_json(&j));
    }
}
