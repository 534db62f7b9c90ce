//! The generated reference pages: `docs/reference/cli.md` from the clap model
//! (`gpuplan::cli::Cli`) and `docs/reference/spec.md` from the spec's JSON Schema
//! (`gpuplan::schema::spec()`, the same source `schemas/spec.schema.json` is written from).
//! Each test fails when the committed page differs from what the code generates and names
//! the command that rewrites it.

use std::fmt::Write as _;

use clap::CommandFactory;
use serde_json::{Map, Value};

use super::{BLESS, bless, read, root};

fn check_page(rel_path: &str, generated: &str) {
    let path = root().join(rel_path);
    if bless() {
        std::fs::write(&path, generated).expect("write the page");
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current != generated {
        let same = current.lines().zip(generated.lines()).take_while(|(a, b)| a == b).count();
        let line = same + 1;
        panic!("{rel_path} is stale (first difference near line {line}); regenerate it with `{BLESS}` and commit it");
    }
}

// ---------------------------------------------------------------------------------------
// CLI

/// Text for a table cell: pipes escaped, lines joined, and `<` / `>` outside code spans
/// written as entities so that `<DIR>` is not taken for an HTML tag.
fn cell(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out.push_str(part);
        } else {
            out.push_str(&part.replace('<', "&lt;").replace('>', "&gt;"));
        }
    }
    out.replace('|', "\\|").replace('\n', "<br>")
}

fn arg_name(a: &clap::Arg) -> String {
    let values = a.get_value_names().map(|v| v.iter().map(|n| format!("<{n}>")).collect::<Vec<_>>().join(" "));
    let takes = a.get_action().takes_values();
    let mut name = match (a.get_short(), a.get_long()) {
        (Some(s), Some(l)) => format!("-{s}, --{l}"),
        (Some(s), None) => format!("-{s}"),
        (None, Some(l)) => format!("--{l}"),
        (None, None) => return values.unwrap_or_else(|| format!("<{}>", a.get_id().as_str().to_uppercase())),
    };
    if takes && let Some(v) = values {
        name.push(' ');
        name.push_str(&v);
    }
    name
}

fn arg_help(a: &clap::Arg) -> String {
    let mut help = a.get_long_help().or(a.get_help()).map(|h| h.to_string()).unwrap_or_default();
    let mut notes = Vec::new();
    if a.is_required_set() {
        notes.push("required".to_string());
    }
    let defaults: Vec<String> = a.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
    if !defaults.is_empty() && !help.contains("[default:") {
        notes.push(format!("default: `{}`", defaults.join(",")));
    }
    let possible: Vec<String> =
        a.get_possible_values().iter().filter(|p| !p.is_hide_set()).map(|p| format!("`{}`", p.get_name())).collect();
    let is_bool = possible.len() == 2 && possible.iter().all(|p| p == "`true`" || p == "`false`");
    if !possible.is_empty() && !is_bool {
        notes.push(format!("one of {}", possible.join(", ")));
    }
    if let Some(env) = a.get_env() {
        notes.push(format!("env: `{}`", env.to_string_lossy()));
    }
    if !notes.is_empty() {
        if !help.is_empty() {
            help.push(' ');
        }
        write!(help, "({})", notes.join("; ")).unwrap();
    }
    help
}

fn arg_table(out: &mut String, args: &[&clap::Arg]) {
    if args.is_empty() {
        return;
    }
    out.push_str("| argument | meaning |\n|---|---|\n");
    for a in args {
        writeln!(out, "| {} | {} |", cell(&format!("`{}`", arg_name(a))), cell(&arg_help(a))).unwrap();
    }
    out.push('\n');
}

fn visible_args(cmd: &clap::Command) -> Vec<&clap::Arg> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_global_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .collect()
}

fn anchor(path: &str) -> String {
    path.replace(' ', "-")
}

fn command_section(out: &mut String, cmd: &clap::Command, path: &str) {
    writeln!(out, "## `{path}`\n").unwrap();
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        writeln!(out, "{about}\n").unwrap();
    }
    let usage = cmd.clone().bin_name(path).render_usage().to_string();
    writeln!(out, "```text\n{}\n```\n", usage.trim_end()).unwrap();
    arg_table(out, &visible_args(cmd));
    let subs: Vec<_> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    if !subs.is_empty() {
        out.push_str("| command | does |\n|---|---|\n");
        for s in &subs {
            let sub_path = format!("{path} {}", s.get_name());
            let about = s.get_about().map(|a| a.to_string()).unwrap_or_default();
            writeln!(out, "| [`{sub_path}`](#{}) | {} |", anchor(&sub_path), cell(&about)).unwrap();
        }
        out.push('\n');
        for s in subs {
            command_section(out, s, &format!("{path} {}", s.get_name()));
        }
    }
}

/// The CLI reference as Markdown, from the clap model.
pub fn cli_page() -> String {
    let cli = gpuplan::cli::Cli::command();
    let mut out = String::new();
    out.push_str("# CLI reference\n\n");
    writeln!(
        out,
        "<!-- Generated from the clap model (`gpuplan::cli::Cli`) by tests/testsuite/docs/reference.rs; \
         do not edit. Regenerate: {BLESS} -->\n"
    )
    .unwrap();
    if let Some(about) = cli.get_about() {
        writeln!(out, "{about}.\n").unwrap();
    }
    out.push_str(
        "Exit codes: `0` success (for `plan` and `drift`: no changes), `1` error, `2` changes present \
         (only with `--detailed-exitcode`), `3` a policy denied the plan; see \
         [Troubleshooting](../troubleshooting.md#exit-codes).\n\n",
    );
    out.push_str("## Global options\n\nAccepted before or after any command.\n\n");
    let globals: Vec<_> = cli.get_arguments().filter(|a| a.is_global_set() && !a.is_hide_set()).collect();
    arg_table(&mut out, &globals);
    out.push_str("## Commands\n\n| command | does |\n|---|---|\n");
    let subs: Vec<_> = cli.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    for s in &subs {
        let path = format!("gpuplan {}", s.get_name());
        let about = s.get_about().map(|a| a.to_string()).unwrap_or_default();
        writeln!(out, "| [`{path}`](#{}) | {} |", anchor(&path), cell(&about)).unwrap();
    }
    out.push('\n');
    for s in subs {
        command_section(&mut out, s, &format!("gpuplan {}", s.get_name()));
    }
    out.trim_end().to_string() + "\n"
}

#[test]
fn the_cli_reference_is_current() {
    let page = cli_page();
    for cmd in ["gpuplan init", "gpuplan plan", "gpuplan apply", "gpuplan state mv", "gpuplan sim trace"] {
        assert!(page.contains(&format!("## `{cmd}`")), "{cmd} missing from the generated page");
    }
    check_page("docs/reference/cli.md", &page);
}

// ---------------------------------------------------------------------------------------
// Spec

/// Top-level keys in the order a reader meets them; any other key follows, sorted.
const ORDER: &[&str] = &[
    "providers",
    "gpu_pools",
    "quotas",
    "job_templates",
    "jobs",
    "autoscalers",
    "variables",
    "locals",
    "outputs",
    "imports",
    "moves",
    "removals",
    "backend",
];

struct Schema {
    defs: Map<String, Value>,
    /// Definitions that a top-level key holds, by name: their section is that key's.
    top: std::collections::BTreeMap<String, String>,
}

impl Schema {
    fn def_name(v: &Value) -> Option<&str> {
        v.get("$ref")?.as_str()?.strip_prefix("#/$defs/")
    }

    /// The alternatives of `v` that are neither `null` nor the `${...}` escape every
    /// attribute allows.
    fn alternatives<'a>(&self, v: &'a Value) -> Vec<&'a Value> {
        match v.get("anyOf").or(v.get("oneOf")).and_then(Value::as_array) {
            Some(alts) => alts
                .iter()
                .filter(|a| a.get("type") != Some(&Value::String("null".into())))
                .filter(|a| Self::def_name(a) != Some("Interpolation"))
                .flat_map(|a| self.alternatives(a))
                .collect(),
            None => vec![v],
        }
    }

    /// A short type for a table cell, linking nested blocks to their section.
    fn type_of(&self, v: &Value) -> String {
        let alts = self.alternatives(v);
        let names: Vec<String> = alts.iter().map(|a| self.one_type(a)).collect();
        let mut uniq: Vec<String> = Vec::new();
        for n in names {
            if !uniq.contains(&n) {
                uniq.push(n);
            }
        }
        uniq.join(" or ")
    }

    fn one_type(&self, v: &Value) -> String {
        if let Some(name) = Self::def_name(v) {
            let def = &self.defs[name];
            if let Some(vals) = self.enum_values(def) {
                return vals;
            }
            if def.get("properties").is_some() {
                let section = self.top.get(name).cloned().unwrap_or_else(|| name.to_lowercase());
                return format!("[{name}](#{section}) block");
            }
            return match name {
                "Value" => "any value".into(),
                "Duration" => "duration (`90s`, `15m`, `2h`)".into(),
                "Address" | "Reference" => "reference (`gpu_pool.train`)".into(),
                other => self.type_of(&self.defs[other]),
            };
        }
        if let Some(vals) = self.enum_values(v) {
            return vals;
        }
        match v.get("type").and_then(Value::as_str) {
            Some("array") => format!("list of {}", v.get("items").map(|i| self.type_of(i)).unwrap_or("any".into())),
            Some("object") => match v.get("additionalProperties") {
                Some(Value::Object(_)) => format!("map of {}", self.type_of(&v["additionalProperties"])),
                _ => "map".into(),
            },
            Some("integer") => "integer".into(),
            Some("number") => "number".into(),
            Some("boolean") => "bool".into(),
            Some("string") => "string".into(),
            Some(other) => other.into(),
            None => "any".into(),
        }
    }

    fn enum_values(&self, v: &Value) -> Option<String> {
        let mut vals: Vec<String> = Vec::new();
        if let Some(e) = v.get("enum").and_then(Value::as_array) {
            vals.extend(e.iter().map(|x| format!("`{}`", x.as_str().map(String::from).unwrap_or(x.to_string()))));
        } else if let Some(alts) = v.get("oneOf").and_then(Value::as_array) {
            for a in alts {
                let c = a.get("const").or_else(|| a.get("enum").and_then(|e| e.get(0)))?;
                vals.push(format!("`{}`", c.as_str()?));
            }
        } else {
            return None;
        }
        Some(vals.join(" \\| "))
    }

    /// Limits, defaults and descriptions, as one cell.
    fn notes(v: &Value) -> String {
        let mut text = v.get("description").and_then(Value::as_str).unwrap_or("").replace('\n', " ");
        let mut extra = Vec::new();
        for (key, word) in [("minimum", "min"), ("maximum", "max")] {
            if let Some(n) = v.get(key) {
                extra.push(format!("{word} {n}"));
            }
        }
        if let Some(d) = v.get("default") {
            extra.push(format!("default `{d}`"));
        }
        if !extra.is_empty() {
            if !text.is_empty() {
                text.push(' ');
            }
            write!(text, "({})", extra.join(", ")).unwrap();
        }
        text
    }

    fn attributes(&self, out: &mut String, def: &Value) {
        let Some(props) = def.get("properties").and_then(Value::as_object) else { return };
        let required: Vec<&str> =
            def.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        out.push_str("| attribute | type | meaning |\n|---|---|---|\n");
        for (name, v) in props {
            let req = if required.contains(&name.as_str()) { " (required)" } else { "" };
            writeln!(out, "| `{name}`{req} | {} | {} |", cell(&self.type_of(v)), cell(&Self::notes(v))).unwrap();
        }
        out.push('\n');
    }
}

/// The spec reference as Markdown, from the JSON Schema of the spec.
pub fn spec_page() -> String {
    let schema = gpuplan::schema::spec();
    let defs = schema["$defs"].as_object().expect("$defs").clone();
    let props = schema["properties"].as_object().expect("properties");
    let mut top = std::collections::BTreeMap::new();
    for (key, v) in props {
        let inner = v.get("additionalProperties").or(v.get("items")).unwrap_or(v);
        let alts = inner.get("anyOf").and_then(Value::as_array).cloned().unwrap_or_else(|| vec![inner.clone()]);
        for a in alts {
            if let Some(name) = Schema::def_name(&a) {
                top.insert(name.to_string(), key.clone());
            }
        }
    }
    let s = Schema { defs, top };
    let mut out = String::new();
    out.push_str("# Spec reference\n\n");
    writeln!(
        out,
        "<!-- Generated from the spec's JSON Schema (`gpuplan::schema::spec()`, the source of \
         schemas/spec.schema.json) by tests/testsuite/docs/reference.rs; do not edit. Regenerate: {BLESS} -->\n"
    )
    .unwrap();
    out.push_str(
        "Every block and attribute a spec may hold, in YAML's spelling: a top-level key per block \
         kind (`gpu_pools:`), each mapping names to attributes. HCL writes the same as blocks \
         (`gpu_pool \"train\" { ... }`). Every attribute may also be an expression in `${...}`; \
         the [spec language guide](../guide/spec-language.md) explains both spellings. The \
         machine-readable form is [`schemas/spec.schema.json`](../../schemas/spec.schema.json).\n\n",
    );
    let mut keys: Vec<&String> = props.keys().collect();
    keys.sort_by_key(|k| (ORDER.iter().position(|o| o == k).unwrap_or(ORDER.len()), k.to_string()));
    out.push_str("## Blocks\n\n| YAML key | holds |\n|---|---|\n");
    for k in &keys {
        writeln!(out, "| [`{k}`](#{k}) | {} |", cell(&s.type_of(&props[k.as_str()]))).unwrap();
    }
    out.push('\n');
    let mut nested: Vec<String> = Vec::new();
    for k in &keys {
        let v = &props[k.as_str()];
        writeln!(out, "## `{k}`\n").unwrap();
        if let Some(d) = v.get("description").and_then(Value::as_str) {
            writeln!(out, "{}\n", d.replace('\n', " ")).unwrap();
        }
        let inner = v.get("additionalProperties").or(v.get("items")).unwrap_or(v);
        let alts = s.alternatives(inner);
        match alts.first().and_then(|a| Schema::def_name(a)) {
            Some(name) if s.defs[name].get("properties").is_some() => {
                let def = &s.defs[name];
                if let Some(d) = def.get("description").and_then(Value::as_str) {
                    writeln!(out, "{}\n", d.replace('\n', " ")).unwrap();
                }
                s.attributes(&mut out, def);
                collect_nested(&s, def, &mut nested);
            }
            _ => writeln!(out, "Type: {}.\n", s.type_of(v)).unwrap(),
        }
    }
    out.push_str("## Nested blocks\n\n");
    let mut i = 0;
    while i < nested.len() {
        let name = nested[i].clone();
        let def = s.defs[&name].clone();
        writeln!(out, "### {name}\n").unwrap();
        if let Some(d) = def.get("description").and_then(Value::as_str) {
            writeln!(out, "{}\n", d.replace('\n', " ")).unwrap();
        }
        s.attributes(&mut out, &def);
        collect_nested(&s, &def, &mut nested);
        i += 1;
    }
    out.trim_end().to_string() + "\n"
}

/// The object definitions `def`'s attributes refer to, each listed once.
fn collect_nested(s: &Schema, def: &Value, nested: &mut Vec<String>) {
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(name) = Schema::def_name(v) {
                    out.push(name.to_string());
                }
                m.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    if let Some(props) = def.get("properties") {
        refs(props, &mut found);
    }
    for name in found {
        if s.defs.get(&name).is_some_and(|d| d.get("properties").is_some())
            && !nested.contains(&name)
            && !s.top.contains_key(&name)
        {
            nested.push(name);
        }
    }
}

#[test]
fn the_spec_reference_is_current() {
    let page = spec_page();
    for needle in ["## `gpu_pools`", "| `gpus_per_node`", "### Mix", "| `spot_percent`"] {
        assert!(page.contains(needle), "{needle} missing from the generated page");
    }
    check_page("docs/reference/spec.md", &page);
}

#[test]
fn the_reference_pages_are_in_the_book() {
    let summary = read(&root().join("docs/SUMMARY.md"));
    for page in ["reference/cli.md", "reference/spec.md"] {
        assert!(summary.contains(&format!("({page})")), "docs/SUMMARY.md does not list {page}");
    }
}
