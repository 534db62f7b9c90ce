//! A state file as tests look inside it: a pool's `nodes` as a list of whole records and
//! the `spend` ledger as a map of lines by node id, as formats 1 and 2 wrote them. Format
//! 3 writes both packed (docs/design/state-and-locks.md, "State that stays small"); this
//! unpacks them from the contract's words alone, with no gpuplan code, so a test that reads
//! the file through here also checks the format as the contract states it.

use std::path::Path;

use serde_json::{Map, Value};

/// The state file at `path`, unpacked.
pub fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    plain(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// `state` with its packed lists unpacked; a state already plain is returned as it is.
pub fn plain(mut state: Value) -> Value {
    if let Some(resources) = state.get_mut("resources").and_then(Value::as_object_mut) {
        for resource in resources.values_mut() {
            if let Some(nodes) = resource.get_mut("nodes") {
                *nodes = plain_nodes(nodes.take());
            }
        }
    }
    if let Some(spend) = state.get_mut("spend") {
        *spend = plain_ledger(spend.take());
    }
    state
}

fn plain_nodes(nodes: Value) -> Value {
    let Value::Object(packed) = nodes else { return nodes };
    let common = packed["common"].as_object().expect("`common` is an object").clone();
    let each = packed["each"].as_array().expect("`each` is a list");
    let records = each.iter().map(|node| {
        let mut record = Map::new();
        let own = match node {
            Value::String(id) => Map::from_iter([("id".to_string(), Value::String(id.clone()))]),
            Value::Object(fields) => fields.clone(),
            other => panic!("a node in `each` is an id or an object, not {other}"),
        };
        record.insert("id".into(), own["id"].clone());
        for (key, value) in common.iter().chain(own.iter().filter(|(k, _)| *k != "id")) {
            record.insert(key.clone(), value.clone());
        }
        record.retain(|_, v| !v.is_null());
        if record.get("tags").and_then(Value::as_object).is_some_and(Map::is_empty) {
            record.remove("tags");
        }
        Value::Object(record)
    });
    Value::Array(records.collect())
}

fn plain_ledger(spend: Value) -> Value {
    let Value::Array(groups) = spend else { return spend };
    let mut lines = Map::new();
    for group in groups {
        let mut shared = group.as_object().expect("a ledger group is an object").clone();
        let Some(Value::Object(by_id)) = shared.remove("lines") else { panic!("a ledger group without `lines`") };
        for (id, span) in by_id {
            let mut line = shared.clone();
            match span {
                Value::Number(start) => {
                    line.insert("start_ms".into(), Value::Number(start));
                }
                Value::Object(times) => line.extend(times),
                other => panic!("a ledger line is a launch time or an object, not {other}"),
            }
            assert!(lines.insert(id.clone(), Value::Object(line)).is_none(), "ledger line {id} in two groups");
        }
    }
    Value::Object(lines)
}
