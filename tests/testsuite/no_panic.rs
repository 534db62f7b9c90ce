//! No input makes the spec pipeline or the formatters panic: arbitrary text, byte-ish
//! text (control characters, brackets, quotes), and valid specs mutated by deleting,
//! duplicating and swapping characters or lines. Case counts stay small so this runs in
//! seconds in a debug build; the corpus (`tests/corpus.rs`) covers the known bad inputs.

use gpuplan::diag::{Diagnostics, Sources};
use gpuplan::spec::{self, LoadOptions};
use proptest::prelude::*;

const QUICKSTART_HCL: &str = include_str!("../../examples/quickstart/main.hcl");
const QUICKSTART_YAML: &str = include_str!("../../examples/quickstart-yaml/fleet.yaml");

/// Load `text` as `name` and format it with the formatter its extension picks; any
/// panic fails the property. A formatted result must itself format without panicking.
fn exercise(name: &str, text: &str) {
    let mut sources = Sources::default();
    sources.add(name, text);
    let loaded = gpuplan::graph::checked(spec::load_sources(sources, &LoadOptions::default()));
    // Rendering walks every span: they must all be inside the text.
    let _ = gpuplan::diag::render_text(&loaded.sources, &loaded.diags.items, 100, false);
    let _ = gpuplan::diag::to_json(&loaded.sources, &loaded.diags.items);
    let format: fn(u32, &str, &mut Diagnostics) -> Option<String> =
        if name.ends_with(".yaml") { spec::yaml::format } else { spec::hcl::format };
    let mut diags = Diagnostics::default();
    if let Some(out) = format(0, text, &mut diags) {
        let mut again = Diagnostics::default();
        let _ = format(0, &out, &mut again);
    }
}

fn both(text: &str) {
    exercise("main.hcl", text);
    exercise("fleet.yaml", text);
}

/// Characters that matter to HCL and YAML syntax, plus a few awkward ones.
fn byteish() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        "(",
        ")",
        "\"",
        "'",
        "${",
        "%{",
        "}",
        "=",
        ":",
        ",",
        "-",
        "#",
        "//",
        "/*",
        "*/",
        "<<EOT\n",
        "EOT",
        "\n",
        "\t",
        " ",
        "  ",
        "\0",
        "\\",
        "\u{feff}",
        "é",
        "1e400",
        "9999999999999999999999",
        "-0",
        ".",
        "&a",
        "*a",
        "!!str",
        "|",
        ">",
        "? ",
        "---",
        "...",
        "gpu_pool",
        "\"x\"",
        "locals",
        "var.x",
        "local.y",
        "x",
        "true",
    ]);
    prop::collection::vec(pieces, 0..60).prop_map(|v| v.concat())
}

#[derive(Debug, Clone)]
enum Edit {
    DeleteChar(usize),
    DuplicateChar(usize),
    SwapChars(usize, usize),
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    Insert(usize, char),
}

fn edit() -> impl Strategy<Value = Edit> {
    let at = any::<usize>();
    prop_oneof![
        at.prop_map(Edit::DeleteChar),
        at.prop_map(Edit::DuplicateChar),
        (at, at).prop_map(|(a, b)| Edit::SwapChars(a, b)),
        at.prop_map(Edit::DeleteLine),
        at.prop_map(Edit::DuplicateLine),
        (at, at).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        (at, prop::sample::select(vec!['{', '}', '[', ']', '"', ':', '=', '\n', '\t', ' ', '$', '-']))
            .prop_map(|(a, c)| Edit::Insert(a, c)),
    ]
}

/// Apply edits to `text`, character- and line-wise (positions taken modulo the length).
fn mutate(text: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for e in edits {
        let n = chars.len().max(1);
        match *e {
            Edit::DeleteChar(i) if !chars.is_empty() => {
                chars.remove(i % n);
            }
            Edit::DuplicateChar(i) if !chars.is_empty() => chars.insert(i % n, chars[i % n]),
            Edit::SwapChars(a, b) if !chars.is_empty() => chars.swap(a % n, b % n),
            Edit::Insert(i, c) => chars.insert(i % (chars.len() + 1), c),
            Edit::DeleteLine(_) | Edit::DuplicateLine(_) | Edit::SwapLines(..) => {
                let joined: String = chars.iter().collect();
                let mut lines: Vec<&str> = joined.split('\n').collect();
                let m = lines.len();
                match *e {
                    Edit::DeleteLine(i) => {
                        lines.remove(i % m);
                    }
                    Edit::DuplicateLine(i) => lines.insert(i % m, lines[i % m]),
                    Edit::SwapLines(a, b) => lines.swap(a % m, b % m),
                    _ => {}
                }
                chars = lines.join("\n").chars().collect();
            }
            _ => {}
        }
    }
    chars.into_iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_strings(text in any::<String>()) {
        both(&text);
    }

    #[test]
    fn syntax_heavy_strings(text in byteish()) {
        both(&text);
    }

    #[test]
    fn mutated_hcl_quickstart(edits in prop::collection::vec(edit(), 1..6)) {
        exercise("main.hcl", &mutate(QUICKSTART_HCL, &edits));
    }

    #[test]
    fn mutated_yaml_quickstart(edits in prop::collection::vec(edit(), 1..6)) {
        exercise("fleet.yaml", &mutate(QUICKSTART_YAML, &edits));
    }

    #[test]
    fn yaml_quickstart_read_as_hcl_and_back(edits in prop::collection::vec(edit(), 0..3)) {
        exercise("main.hcl", &mutate(QUICKSTART_YAML, &edits));
        exercise("fleet.yaml", &mutate(QUICKSTART_HCL, &edits));
    }
}

/// The mutator really changes its input, so the properties above test something.
#[test]
fn mutations_change_the_text() {
    let t = "a\nbc\nd";
    assert_eq!(mutate(t, &[Edit::DeleteChar(0)]), "\nbc\nd");
    assert_eq!(mutate(t, &[Edit::DuplicateLine(1)]), "a\nbc\nbc\nd");
    assert_eq!(mutate(t, &[Edit::SwapLines(0, 2)]), "d\nbc\na");
    assert_eq!(mutate(t, &[Edit::Insert(6, '{')]), "a\nbc\nd{");
}
