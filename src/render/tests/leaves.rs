//! The attribute lines read from a configuration's text (`render::leaf_text`) against
//! those read from its parsed tree: the same lines wherever the text reading answers.

use proptest::prelude::*;
use serde_json::{Value as Json, json};

use super::*;
use crate::render::facts::{leaf_lines, tree_attr_lines};

fn with_text(action: Action, key: Option<crate::addr::InstanceKey>, text: JsonText) -> ResourceChange {
    let mut address = pool_addr("p");
    address.key = key;
    let mut c = change(address, action, None, None);
    if action == Action::Delete {
        c.before = Some(text);
    } else {
        c.after = Some(text);
    }
    c
}

/// Any JSON value, with what the text reading must refuse: escapes, floats, big and
/// negative numbers, objects in arrays, secret references, empty keys, defaults.
fn any_json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        any::<u64>().prop_map(Json::from),
        (-3i64..3).prop_map(Json::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Json::from),
        "[a-z_ é\"\\\\\n]{0,5}".prop_map(Json::String),
        Just(json!("on_demand")),
        Just(json!("vault:kv/team#token")),
    ];
    let key = prop_oneof![
        "[a-z_.]{0,3}",
        Just("secret".to_string()),
        Just("nodes".to_string()),
        Just("min".to_string()),
        Just("mix".to_string()),
        Just("fallback".to_string()),
        Just("count".to_string()),
        Just("lifecycle".to_string()),
        Just("prevent_destroy".to_string()),
    ];
    leaf.prop_recursive(4, 40, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
            prop::collection::btree_map(key.clone(), inner, 0..5).prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn text_and_tree_give_the_same_lines(v in any_json(), delete in any::<bool>(), keyed in any::<bool>()) {
        let action = if delete { Action::Delete } else { Action::Create };
        let key = keyed.then_some(crate::addr::InstanceKey::Int(0));
        let c = with_text(action, key, JsonText::from_value(&v));
        if let Some(fast) = leaf_lines(&c) {
            prop_assert_eq!(fast, tree_attr_lines(&c));
        }
    }
}

#[test]
fn a_pool_s_configuration_is_read_from_its_text() {
    let mut cfg = pool_cfg("A100-80GB", 2, 50);
    cfg["depends_on"] = json!(["gpu_pool.a", "gpu_pool.b"]);
    cfg["labels"] = json!({"team": "ml", "critical": "true", "empty": ""});
    cfg["lifecycle"] = json!({"prevent_destroy": false, "create_before_destroy": true});
    cfg["disk"] = json!({});
    cfg["count"] = json!(2);
    for action in [Action::Create, Action::Delete] {
        for key in [None, Some(crate::addr::InstanceKey::Int(1))] {
            let c = with_text(action, key, JsonText::from_value(&cfg));
            let fast = leaf_lines(&c).expect("a plain configuration is read from its text");
            assert_eq!(fast, tree_attr_lines(&c));
        }
    }
    // The lines themselves, for one: defaults, empty values and nulls left out.
    let c = with_text(Action::Create, Some(crate::addr::InstanceKey::Int(1)), JsonText::from_value(&cfg));
    let lines: Vec<String> = leaf_lines(&c).unwrap().iter().map(|l| format!("{} = {}", l.path, l.text)).collect();
    assert_eq!(
        lines,
        [
            "depends_on = [\"gpu_pool.a\", \"gpu_pool.b\"]",
            "gpu = \"A100-80GB\"",
            "gpus_per_node = 8",
            "instance_types = [\"p4de.24xlarge\"]",
            "labels.critical = \"true\"",
            "labels.team = \"ml\"",
            "lifecycle.create_before_destroy = true",
            "mix.on_demand_base = 1",
            "mix.spot_percent = 50",
            "nodes.desired = 2",
            "nodes.max = 16",
            "provider = \"sim\"",
            "region = \"us-east-1\"",
            "zones = [\"us-east-1a\", \"us-east-1b\"]",
        ]
    );
}

#[test]
fn what_the_text_reading_refuses_is_read_from_the_tree() {
    for v in [
        json!({"a": "quote \" in"}),
        json!({"a": 1.5}),
        json!({"a": 12345678901234567890u64}),
        json!({"a": [{"b": 1}]}),
        json!({"token": {"secret": "vault:kv/team#token"}}),
        json!({"": 1}),
        json!([1, 2]),
        json!("text"),
    ] {
        let c = with_text(Action::Create, None, JsonText::from_value(&v));
        assert_eq!(leaf_lines(&c), None, "{v}");
        // The views still show its lines, read from the tree.
        assert_eq!(crate::render::facts::attr_lines(&c).len(), tree_attr_lines(&c).len());
    }
}
