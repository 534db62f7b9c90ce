//! JSON Schemas generated from the Rust types (schemars): the YAML spec, the state file
//! and the JSON plan. `schemas/*.schema.json` are checked in; a test fails when they are
//! stale and regenerates them with `GPUPLAN_UPDATE_SCHEMAS=1`.

use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use crate::spec::raw::{Body, Expr, ExprKind, ObjectKey, TemplatePart};

/// Every schema, by file name under `schemas/`.
pub fn all() -> Vec<(&'static str, Value)> {
    vec![("spec.schema.json", spec()), ("state.schema.json", state()), ("plan.schema.json", plan())]
}

fn generator() -> schemars::SchemaGenerator {
    SchemaSettings::draft2020_12().into_generator()
}

/// The YAML spec document.
pub fn spec() -> Value {
    let mut v = generator().into_root_schema_for::<crate::spec::Spec>().to_value();
    v["$id"] = json!("https://gpuplan.dev/schemas/spec.schema.json");
    // Any attribute may be written as an interpolation instead of a literal.
    v["$defs"]["Interpolation"] = json!({
        "type": "string",
        "pattern": "\\$\\{",
        "description": "An expression in ${...}: references such as ${var.team}, arithmetic, functions"
    });
    // Lists, maps and nested blocks too: `labels: '${merge(local.a, local.b)}'` is valid.
    if let Some(Value::Object(defs)) = v.get_mut("$defs") {
        for def in defs.values_mut() {
            if let Some(Value::Object(props)) = def.get_mut("properties") {
                props.values_mut().for_each(allow_interpolation);
            }
        }
    }
    v
}

/// Wrap a property schema in `anyOf: [it, Interpolation]` unless it already allows one.
fn allow_interpolation(prop: &mut Value) {
    let interp = json!({ "$ref": "#/$defs/Interpolation" });
    let allows = |s: &Value| s.get("anyOf").and_then(Value::as_array).is_some_and(|a| a.contains(&interp));
    if allows(prop) {
        return;
    }
    // Optional values are `anyOf: [X, null]`: look one level in.
    if let Some(Value::Array(alts)) = prop.get("anyOf")
        && alts.iter().any(allows)
    {
        return;
    }
    let mut inner = std::mem::take(prop);
    let mut outer = serde_json::Map::new();
    // Keep the documentation on the outside, where editors look for it.
    if let Value::Object(m) = &mut inner {
        for key in ["description", "default", "title"] {
            if let Some(d) = m.remove(key) {
                outer.insert(key.to_string(), d);
            }
        }
    }
    outer.insert("anyOf".into(), json!([inner, interp]));
    *prop = Value::Object(outer);
}

/// The `plan --json` document.
pub fn plan() -> Value {
    let mut v = crate::render::plan_schema(generator()).to_value();
    v["$id"] = json!("https://gpuplan.dev/schemas/plan.schema.json");
    v
}

/// The state file.
pub fn state() -> Value {
    let mut v = generator().into_root_schema_for::<crate::state::State>().to_value();
    v["$id"] = json!("https://gpuplan.dev/schemas/state.schema.json");
    v
}

/// A parsed YAML file as the JSON document its author wrote (for schema checks):
/// blocks back under their plural keys, expressions as their literal values, and
/// interpolations as `${...}` strings.
pub fn yaml_document(body: &Body, text: &str) -> Value {
    let mut doc = serde_json::Map::new();
    for b in &body.blocks {
        let attrs = body_json(&b.body, text);
        if b.kind.name == "locals" {
            doc.insert("locals".into(), attrs);
            continue;
        }
        let plural = crate::addr::Kind::parse(&b.kind.name)
            .map(|k| k.plural().to_string())
            .unwrap_or_else(|| format!("{}s", b.kind.name));
        let name = b.labels.first().map(|l| l.name.clone()).unwrap_or_default();
        let entry = doc.entry(plural).or_insert_with(|| json!({}));
        if let Value::Object(m) = entry {
            m.insert(name, attrs);
        }
    }
    Value::Object(doc)
}

fn body_json(body: &Body, text: &str) -> Value {
    let mut m = serde_json::Map::new();
    for a in &body.attrs {
        m.insert(a.key.name.clone(), expr_json(&a.value, text));
    }
    for b in &body.blocks {
        m.insert(b.kind.name.clone(), body_json(&b.body, text));
    }
    Value::Object(m)
}

fn expr_json(e: &Expr, text: &str) -> Value {
    match &e.kind {
        ExprKind::Null => Value::Null,
        ExprKind::Bool(b) => json!(b),
        ExprKind::Number(n) => serde_json::Number::from_f64(*n)
            .map(|num| if n.fract() == 0.0 && n.abs() < 9e15 { json!(*n as i64) } else { Value::Number(num) })
            .unwrap_or(Value::Null),
        ExprKind::String(s) => json!(s),
        ExprKind::Array(items) => Value::Array(items.iter().map(|i| expr_json(i, text)).collect()),
        ExprKind::Object(items) => Value::Object(
            items
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        ObjectKey::Name(id) => id.name.clone(),
                        ObjectKey::Expr(k) => source(k, text),
                    };
                    (key, expr_json(v, text))
                })
                .collect(),
        ),
        ExprKind::Template(parts) => {
            let mut s = String::new();
            for p in parts {
                match p {
                    TemplatePart::Literal(l) => s.push_str(l),
                    TemplatePart::Interp(i) => {
                        s.push_str("${");
                        s.push_str(&source(i, text));
                        s.push('}');
                    }
                }
            }
            json!(s)
        }
        _ => json!(format!("${{{}}}", source(e, text))),
    }
}

fn source(e: &Expr, text: &str) -> String {
    text.get(e.span.start as usize..e.span.end as usize).unwrap_or("").to_string()
}
