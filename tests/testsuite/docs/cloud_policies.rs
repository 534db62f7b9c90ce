//! The least-privilege policies of `docs/clouds/*.md` grant exactly what gpuplan calls.
//! Each policy is a ```` ```json ```` block under a `<!-- policy: NAME -->` line; its actions
//! are compared with the API actions read from the source (EC2 SDK calls and SSM actions in
//! `src/providers/aws/`, object-store calls in `src/state/`, signed calls in
//! `src/providers/tencentcloud/` and `src/providers/alicloud/`), plus the few permissions a
//! call needs beyond its own name (listed below with why). One missing or one extra fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{fences, read, rel, root};

/// Permissions no call site names but a call needs; each must appear in the policy.
const IMPLIED: &[(&str, &str, &str)] = &[
    ("aws-provider", "iam:PassRole", "CreateFleet and RunInstances with the provider's `iam_instance_profile`"),
    ("aws-s3-state", "s3:ListBucket", "without it S3 answers 403, not 404, for a state object that does not exist yet"),
];

/// The provider files whose calls need the policy. `credentials.rs` is left out: its STS
/// calls (`AssumeRole`, `AssumeRoleWithWebIdentity`, ...) obtain the identity the policy
/// is attached to, so they are the role's trust relationship, which the cloud pages
/// describe beside the policy, not part of it.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = e.expect("entry").path();
        if path.file_name().is_some_and(|n| n == "credentials.rs") {
            continue;
        }
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// A file's code without its unit tests (a top-level `#[cfg(test)] mod` and what follows)
/// and without comments, so fakes and prose do not count as calls.
fn code(path: &Path) -> String {
    let text = read(path);
    let text = match text.find("\n#[cfg(test)]\nmod ") {
        Some(i) => &text[..i],
        None => &text,
    };
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The arguments of each call `needle(...)` in `text` (`needle` ends with `(`), split at
/// top-level commas, with the call's line.
fn calls(text: &str, needle: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices(needle) {
        let line = text[..at].matches('\n').count() + 1;
        let mut args = vec![String::new()];
        let mut depth = 0;
        let mut in_str = false;
        for c in text[at + needle.len()..].chars() {
            if in_str {
                args.last_mut().unwrap().push(c);
                in_str = c != '"';
                continue;
            }
            match c {
                '"' => in_str = true,
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' if depth == 0 => break,
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    args.push(String::new());
                    continue;
                }
                _ => {}
            }
            args.last_mut().unwrap().push(c);
        }
        out.push((line, args.into_iter().map(|a| a.trim().to_string()).collect()));
    }
    out
}

/// The string literal `arg` holds; `None` for the forwarding helpers' `action` parameter.
fn literal(file: &Path, line: usize, arg: &str) -> Option<String> {
    if let Some(s) = arg.strip_prefix('"').and_then(|a| a.strip_suffix('"')) {
        return Some(s.to_string());
    }
    assert_eq!(arg, "action", "{}:{line}: cannot tell the API action of this call ({arg})", rel(file));
    None
}

fn pascal(snake: &str) -> String {
    snake.split('_').map(|w| w[..1].to_uppercase() + &w[1..]).collect()
}

/// `client.describe_instances()` (the EC2 SDK's fluent calls, `client` on its own line
/// or not), `self.ssm(region, "SendCommand", ...)` and
/// `self.json_call(SECRETS_MANAGER, region, &url, "DescribeSecret", ...)` in
/// `src/providers/aws/`.
fn aws_provider() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for file in rust_files(&root().join("src/providers/aws")) {
        let text = code(&file);
        for (at, _) in text.match_indices("client") {
            if text[..at].chars().next_back().is_some_and(is_ident) {
                continue;
            }
            let rest = text[at + "client".len()..].trim_start();
            let Some(rest) = rest.strip_prefix('.') else { continue };
            let name: String = rest.trim_start().chars().take_while(|c| is_ident(*c)).collect();
            if rest.trim_start()[name.len()..].starts_with("()") && !name.is_empty() {
                out.insert(format!("ec2:{}", pascal(&name)));
            }
        }
        for (line, args) in calls(&text, ".ssm(") {
            if let Some(a) = literal(&file, line, &args[1]) {
                out.insert(format!("ssm:{a}"));
            }
        }
        for (line, args) in calls(&text, ".json_call(") {
            let service = match args[0].trim() {
                "SECRETS_MANAGER" => "secretsmanager",
                "SSM" => "ssm",
                other => other,
            };
            if let Some(a) = literal(&file, line, &args[3]) {
                out.insert(format!("{service}:{a}"));
            }
        }
    }
    out
}

/// Object-store calls in `src/state/` (the s3 backend), as the S3 permissions they need.
fn s3_state() -> BTreeSet<String> {
    let map: BTreeMap<&str, &[&str]> = BTreeMap::from([
        ("get", &["s3:GetObject"][..]),
        ("get_opts", &["s3:GetObject"][..]),
        ("get_range", &["s3:GetObject"][..]),
        ("head", &["s3:GetObject"][..]),
        ("put", &["s3:PutObject"][..]),
        ("put_opts", &["s3:PutObject"][..]),
        ("put_multipart", &["s3:PutObject"][..]),
        ("copy", &["s3:GetObject", "s3:PutObject"][..]),
        ("copy_if_not_exists", &["s3:GetObject", "s3:PutObject"][..]),
        ("delete", &["s3:DeleteObject"][..]),
        ("list", &["s3:ListBucket"][..]),
        ("list_with_delimiter", &["s3:ListBucket"][..]),
        ("rename", &["s3:GetObject", "s3:PutObject", "s3:DeleteObject"][..]),
    ]);
    let mut out = BTreeSet::new();
    for file in rust_files(&root().join("src/state")) {
        let name = file.file_name().unwrap().to_string_lossy();
        if name.contains("test") {
            continue;
        }
        let text = code(&file);
        for (at, _) in text.match_indices("store.") {
            if text[at + 6..].starts_with(|c: char| !c.is_ascii_lowercase()) {
                continue;
            }
            let method: String = text[at + 6..].chars().take_while(|c| is_ident(*c)).collect();
            if !text[at + 6 + method.len()..].starts_with('(') {
                continue;
            }
            if let Some(actions) = map.get(method.as_str()) {
                out.extend(actions.iter().map(|a| a.to_string()));
            }
        }
    }
    out
}

/// `client.call("cvm", CVM_VERSION, "RunInstances", ...)` and `self.tat("RunCommand", ...)`.
fn tencentcloud() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for file in rust_files(&root().join("src/providers/tencentcloud")) {
        let text = code(&file);
        for (line, args) in calls(&text, ".call(") {
            let service = literal(&file, line, &args[0]).expect("a service name");
            if let Some(a) = literal(&file, line, &args[2]) {
                out.insert(format!("{service}:{a}"));
            }
        }
        for (line, args) in calls(&text, ".tat(") {
            if let Some(a) = literal(&file, line, &args[0]) {
                out.insert(format!("tat:{a}"));
            }
        }
    }
    out
}

/// `client.ecs("RunInstances", ...)`, `client.cs("GET", &path, "DescribeX", ...)` and
/// `client.cs_json(&path, "AttachInstances", ...)`.
fn alicloud() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for file in rust_files(&root().join("src/providers/alicloud")) {
        let text = code(&file);
        for (needle, index, service) in
            [(".ecs(", 0, "ecs"), (".cs(", 2, "cs"), (".cs_json(", 1, "cs"), (".kms(", 0, "kms")]
        {
            for (line, args) in calls(&text, needle) {
                if let Some(a) = literal(&file, line, &args[index]) {
                    out.insert(format!("{service}:{a}"));
                }
            }
        }
    }
    out
}

/// The actions of every `Action`/`action` list in a policy document, any case of the keys.
fn policy_actions(doc: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let statements = doc.get("Statement").or(doc.get("statement")).and_then(Value::as_array).expect("statements");
    for s in statements {
        let effect = s.get("Effect").or(s.get("effect")).and_then(Value::as_str).unwrap_or("");
        assert!(effect.eq_ignore_ascii_case("allow"), "only Allow statements: {s}");
        match s.get("Action").or(s.get("action")) {
            Some(Value::String(a)) => {
                out.insert(a.clone());
            }
            Some(Value::Array(list)) => out.extend(list.iter().map(|a| a.as_str().expect("action").to_string())),
            other => panic!("a statement without actions: {other:?}"),
        }
    }
    out
}

/// Every `<!-- policy: NAME -->` block of the cloud pages, parsed.
fn documented() -> BTreeMap<String, (String, BTreeSet<String>)> {
    let mut out = BTreeMap::new();
    for page in ["aws", "tencentcloud", "alicloud"] {
        let path = root().join(format!("docs/clouds/{page}.md"));
        for f in fences(&read(&path)) {
            let Some(name) = f.before.strip_prefix("<!-- policy: ").and_then(|s| s.strip_suffix(" -->")) else {
                continue;
            };
            assert_eq!(f.info, "json", "{}:{}: a policy block is ```json", rel(&path), f.line);
            let doc: Value = serde_json::from_str(&f.body)
                .unwrap_or_else(|e| panic!("{}:{}: the policy is not JSON: {e}", rel(&path), f.line));
            let place = format!("{}:{}", rel(&path), f.line);
            assert!(out.insert(name.to_string(), (place, policy_actions(&doc))).is_none(), "two policies named {name}");
        }
    }
    out
}

#[test]
fn each_cloud_policy_grants_exactly_what_the_code_calls() {
    let mut from_code = BTreeMap::from([
        ("aws-provider", aws_provider()),
        ("aws-s3-state", s3_state()),
        ("tencentcloud", tencentcloud()),
        ("alicloud", alicloud()),
    ]);
    for (policy, action, _why) in IMPLIED {
        from_code.get_mut(policy).expect("a known policy").insert(action.to_string());
    }
    // The scans must find the calls everyone knows are there.
    for (policy, action) in [
        ("aws-provider", "ec2:CreateFleet"),
        ("aws-provider", "ssm:SendCommand"),
        ("aws-s3-state", "s3:PutObject"),
        ("tencentcloud", "cvm:RunInstances"),
        ("tencentcloud", "tat:RunCommand"),
        ("alicloud", "ecs:RunInstances"),
        ("alicloud", "cs:AttachInstances"),
    ] {
        assert!(from_code[policy].contains(action), "the scan of the code missed {action}: {:?}", from_code[policy]);
    }
    let docs = documented();
    let mut problems = Vec::new();
    for (policy, wanted) in &from_code {
        let Some((place, granted)) = docs.get(*policy) else {
            problems.push(format!("no `<!-- policy: {policy} -->` block in docs/clouds/"));
            continue;
        };
        for missing in wanted.difference(granted) {
            problems.push(format!("{place} ({policy}): missing {missing}, which the code calls"));
        }
        for extra in granted.difference(wanted) {
            problems.push(format!("{place} ({policy}): {extra} is granted but nothing calls it"));
        }
    }
    for name in docs.keys() {
        if !from_code.contains_key(name.as_str()) {
            problems.push(format!("docs/clouds: policy `{name}` has no scan of the code to compare with"));
        }
    }
    assert!(problems.is_empty(), "cloud policies out of step with the code:\n{}", problems.join("\n"));
}

#[test]
fn the_call_scanner_reads_arguments() {
    let text = "x.call(\"cvm\", V, \"RunInstances\", &r, &json!({\"a\": [1, 2]})).await; y.tat(action, r)";
    let found = calls(text, ".call(");
    assert_eq!(found[0].1[..3], ["\"cvm\"", "V", "\"RunInstances\""]);
    assert_eq!(calls(text, ".tat(")[0].1, ["action", "r"]);
    assert_eq!(pascal("describe_spot_price_history"), "DescribeSpotPriceHistory");
}
