//! A small, deterministic YAML emitter for the manifests gpuplan renders.
//!
//! Block style, two-space indent, keys in the order given. A string is written plain only
//! when YAML 1.1 and 1.2 parsers would both read it back as the same string (not a number,
//! bool, null or anything with indicator characters); otherwise it is double-quoted with
//! escapes. Emitting is a pure function of the value, so snapshots are stable.

/// A YAML value. Maps keep insertion order.
#[derive(Debug, Clone, PartialEq)]
pub enum Yaml {
    Str(String),
    Int(i64),
    Bool(bool),
    Seq(Vec<Yaml>),
    Map(Vec<(String, Yaml)>),
}

impl Yaml {
    pub fn str(s: impl Into<String>) -> Yaml {
        Yaml::Str(s.into())
    }
    pub fn map(entries: Vec<(&str, Yaml)>) -> Yaml {
        Yaml::Map(entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }
}

/// One document, ending in a newline.
pub fn to_string(doc: &Yaml) -> String {
    let mut out = String::new();
    match doc {
        Yaml::Map(m) if !m.is_empty() => map(&mut out, m, 0),
        Yaml::Seq(s) if !s.is_empty() => seq(&mut out, s, 0),
        other => {
            out += &inline(other);
            out.push('\n');
        }
    }
    out
}

/// Several documents separated by `---`.
pub fn documents(docs: &[Yaml]) -> String {
    docs.iter().map(to_string).collect::<Vec<_>>().join("---\n")
}

fn map(out: &mut String, m: &[(String, Yaml)], indent: usize) {
    for (k, v) in m {
        out.push_str(&" ".repeat(indent));
        out.push_str(&scalar(k));
        out.push(':');
        match v {
            Yaml::Map(inner) if !inner.is_empty() => {
                out.push('\n');
                map(out, inner, indent + 2);
            }
            Yaml::Seq(inner) if !inner.is_empty() => {
                out.push('\n');
                seq(out, inner, indent);
            }
            other => {
                out.push(' ');
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

fn seq(out: &mut String, s: &[Yaml], indent: usize) {
    for v in s {
        out.push_str(&" ".repeat(indent));
        out.push_str("- ");
        match v {
            Yaml::Map(inner) if !inner.is_empty() => {
                // The first entry sits on the dash's line; the rest align under it.
                let mut first = String::new();
                map(&mut first, &inner[..1], indent + 2);
                out.push_str(&first[indent + 2..]);
                map(out, &inner[1..], indent + 2);
            }
            Yaml::Seq(inner) if !inner.is_empty() => {
                out.push('\n');
                seq(out, inner, indent + 2);
            }
            other => {
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

fn inline(v: &Yaml) -> String {
    match v {
        Yaml::Str(s) => scalar(s),
        Yaml::Int(i) => i.to_string(),
        Yaml::Bool(b) => b.to_string(),
        Yaml::Seq(_) => "[]".into(),
        Yaml::Map(_) => "{}".into(),
    }
    .to_string()
}

/// A string as a scalar: plain when unambiguous, else double-quoted.
pub fn scalar(s: &str) -> String {
    if plain_ok(s) { s.to_string() } else { quote(s) }
}

fn plain_ok(s: &str) -> bool {
    let Some(first) = s.chars().next() else { return false };
    if s != s.trim() || !(first.is_ascii_alphanumeric() || first == '/' || first == '.' || first == '_') {
        return false;
    }
    if !s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@+,".contains(c)) {
        return false;
    }
    // `: ` never occurs (no spaces); a trailing `:` would read as a key.
    if s.ends_with(':') {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    const RESERVED: &[&str] = &["true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", ".inf", ".nan"];
    if RESERVED.contains(&lower.as_str()) {
        return false;
    }
    // Anything a YAML 1.1 or 1.2 resolver might take for a number (ints, floats, octal,
    // hex, sexagesimal `1:30`, dates) stays quoted.
    let numberish = s.chars().next().is_some_and(|c| c.is_ascii_digit() || c == '.' || c == '+')
        && s.chars().all(|c| c.is_ascii_hexdigit() || "._:+-xoXOeE".contains(c));
    !numberish
}

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ambiguous_strings_are_quoted_and_plain_ones_are_not() {
        for s in ["true", "No", "null", "~", "8", "0x1F", "1.5", "1e3", "1:30", "", " lead", "a: b", "#x", "-x", "a b"]
        {
            assert!(scalar(s).starts_with('"'), "{s:?} must be quoted, got {}", scalar(s));
        }
        for s in ["train", "nvidia.com/gpu", "ghcr.io/example/finetune:1.4", "s3://b/k", "A100-80GB", "gpuplan-high"] {
            assert_eq!(scalar(s), s, "{s:?} can stay plain");
        }
        assert_eq!(scalar("say \"hi\"\n"), r#""say \"hi\"\n""#);
    }

    #[test]
    fn nested_maps_and_sequences_indent_consistently() {
        let doc = Yaml::map(vec![
            ("a", Yaml::Int(1)),
            ("b", Yaml::map(vec![("c", Yaml::Seq(vec![Yaml::str("x"), Yaml::str("true")]))])),
            ("d", Yaml::Seq(vec![Yaml::map(vec![("e", Yaml::Bool(true)), ("f", Yaml::Map(vec![]))])])),
        ]);
        assert_eq!(to_string(&doc), "a: 1\nb:\n  c:\n  - x\n  - \"true\"\nd:\n- e: true\n  f: {}\n");
    }
}
