//! The getting-started page is a transcript: every ```` ```console ```` block holds `$ gpuplan
//! ...` lines, each followed by what it prints (stdout, then stderr). This test runs them in
//! order in one empty folder against the embedded cloud and compares, with sim instance ids
//! and UUIDs normalised as in the snapshot tests, and apply's per-resource progress lines
//! compared in any order (independent resources finish in either). `GPUPLAN_BLESS=1`
//! rewrites the outputs.

use std::path::Path;

use assert_cmd::cargo::cargo_bin_cmd;

use super::{BLESS, bless, fences, read, root};

const PAGE: &str = "docs/guide/getting-started.md";

/// One `$ command` of a console block and the output shown under it.
struct Step {
    args: Vec<String>,
    shown: String,
}

fn steps(body: &str) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    for line in body.lines() {
        if let Some(cmd) = line.strip_prefix("$ ") {
            assert!(!cmd.contains(['"', '\'', '|', '>', '&', ';']), "{PAGE}: keep commands plain words: {cmd}");
            let args: Vec<String> = cmd.split_whitespace().map(String::from).collect();
            assert_eq!(args[0], "gpuplan", "{PAGE}: only gpuplan commands run in console blocks: {cmd}");
            out.push(Step { args: args[1..].to_vec(), shown: String::new() });
        } else {
            let step = out.last_mut().unwrap_or_else(|| panic!("{PAGE}: a console block starts with `$ `"));
            step.shown.push_str(line.trim_end());
            step.shown.push('\n');
        }
    }
    out
}

/// Random parts of output: sim instance ids (`i-` and 17 hex digits) and UUIDs.
fn normalise(text: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let hex = |c: &char| c.is_ascii_hexdigit() && !c.is_ascii_uppercase();
    while i < chars.len() {
        let rest = &chars[i..];
        if rest.len() >= 19 && rest[0] == 'i' && rest[1] == '-' && rest[2..19].iter().all(hex) {
            out.push_str("i-<id>");
            i += 19;
            continue;
        }
        let shape = [8, 4, 4, 4, 12];
        let uuid_len = 36;
        if rest.len() >= uuid_len {
            let mut at = 0;
            let is_uuid = shape.iter().enumerate().all(|(k, n)| {
                let ok = rest[at..at + n].iter().all(hex) && (k == 4 || rest[at + n] == '-');
                at += n + 1;
                ok
            });
            if is_uuid {
                out.push_str("<uuid>");
                i += uuid_len;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out.lines().map(str::trim_end).map(|l| format!("{l}\n")).collect()
}

/// Apply reports each resource's progress as `ADDR: ...` when it happens, and independent
/// resources finish in either order: runs of such lines compare as sets.
fn canonical(text: &str) -> String {
    let is_progress = |l: &str| {
        l.split_once(": ").is_some_and(|(addr, _)| {
            addr.contains('.') && addr.chars().all(|c| c.is_ascii_alphanumeric() || "._[]\"".contains(c))
        })
    };
    let mut out = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    for line in text.lines() {
        if is_progress(line) {
            run.push(line);
            continue;
        }
        run.sort_unstable();
        out.append(&mut run);
        out.push(line);
    }
    run.sort_unstable();
    out.append(&mut run);
    out.join("\n")
}

fn run(dir: &Path, args: &[String]) -> String {
    let out = cargo_bin_cmd!("gpuplan")
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .env_remove("GPUPLAN_WORKSPACE")
        .env_remove("GPUPLAN_CNY_PER_USD")
        .env_remove("GPUPLAN_SIM_START")
        .env_remove("AWS_ACCESS_KEY_ID")
        .args(args)
        .output()
        .expect("gpuplan runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    normalise(&text)
}

#[test]
fn getting_started_commands_print_what_the_page_shows() {
    let path = root().join(PAGE);
    let page = read(&path);
    let blocks: Vec<_> = fences(&page).into_iter().filter(|f| f.info == "console").collect();
    let count: usize = blocks.iter().map(|b| steps(&b.body).len()).sum();
    assert!(count >= 4, "{PAGE} shows {count} commands; it walks through init, plan, apply and plan again");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut rewritten = page.clone();
    let mut stale = Vec::new();
    // Later blocks first, so earlier byte ranges stay valid while rewriting.
    let mut new_bodies = Vec::new();
    for b in &blocks {
        let mut body = String::new();
        for step in steps(&b.body) {
            let got = run(dir.path(), &step.args);
            if canonical(&got) != canonical(&step.shown) {
                stale.push(format!(
                    "$ gpuplan {}\n--- the page shows ---\n{}--- it prints ---\n{got}",
                    step.args.join(" "),
                    step.shown
                ));
            }
            body.push_str(&format!("$ gpuplan {}\n{got}", step.args.join(" ")));
        }
        new_bodies.push((b.body_range.clone(), body));
    }
    for (range, body) in new_bodies.into_iter().rev() {
        rewritten.replace_range(range, &body);
    }
    if bless() {
        std::fs::write(&path, rewritten).expect("rewrite the page");
        return;
    }
    assert!(
        stale.is_empty(),
        "{PAGE} is stale; regenerate it with `{BLESS}` and read the diff:\n\n{}",
        stale.join("\n")
    );
}

#[test]
fn progress_lines_compare_in_any_order_but_nothing_else_does() {
    let a = "gpu_pool.a: created 1 node\njob_template.t: done\n\nApply complete!\n";
    let b = "job_template.t: done\ngpu_pool.a: created 1 node\n\nApply complete!\n";
    assert_eq!(canonical(a), canonical(b));
    assert_ne!(canonical("x\ny\n"), canonical("y\nx\n"));
    assert_ne!(canonical(a), canonical("gpu_pool.a: created 2 nodes\njob_template.t: done\n\nApply complete!\n"));
}

#[test]
fn ids_and_uuids_are_normalised() {
    assert_eq!(
        normalise("node i-0a1b2c3d4e5f60718 of b9382005-3338-45f1-a8bb-dcf33cb9df5f  \n"),
        "node i-<id> of <uuid>\n"
    );
    assert_eq!(normalise("i-0abc is short\n"), "i-0abc is short\n");
}
