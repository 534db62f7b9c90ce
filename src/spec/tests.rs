//! Loading a folder of files: parsing them on two threads gives exactly what parsing them
//! one after the other gives.

use super::*;

/// Files of every kind the loader meets: good HCL, HCL with a syntax error, HCL with a
/// problem found later, spec YAML, broken YAML and another tool's YAML file.
fn folder() -> Sources {
    let mut sources = Sources::default();
    for i in 0..12 {
        let (name, text) = match i % 6 {
            0 => (format!("p{i}.hcl"), format!("gpu_pool \"p{i}\" {{\n  provider = \"sim\"\n  gpu = \"L4\"\n}}\n")),
            1 => (format!("p{i}.hcl"), format!("gpu_pool \"p{i}\" {{\n  provider = = \"sim\"\n}}\n")),
            2 => (format!("p{i}.hcl"), format!("gpu_pol \"p{i}\" {{}}\nlocals {{\n  x = \"${{\"\n}}\n")),
            3 => (format!("p{i}.yaml"), format!("gpu_pools:\n  q{i}:\n    provider: sim\n    gpu: L4\n")),
            4 => (format!("p{i}.yaml"), "gpu_pools:\n  - [unclosed\n".to_string()),
            _ => (format!("ci{i}.yml"), "apiVersion: v1\nkind: Config\nclusters: []\n".to_string()),
        };
        sources.add(name, text);
    }
    sources
}

#[test]
fn files_parsed_on_two_threads_come_back_in_file_order_with_the_same_diagnostics() {
    let sources = folder();
    let todo: Vec<_> = sources.files().collect();
    assert!(two_threads(&todo), "a small folder of several files is parsed on two threads");
    let one = parse_files(&todo, false);
    assert!(one.iter().any(|(_, _, d)| d.has_errors()), "the folder has broken files");
    assert!(one.iter().any(|(_, p, _)| matches!(p, Parsed::Foreign(_))), "the folder has another tool's file");
    assert!(one.iter().any(|(_, p, _)| matches!(p, Parsed::Unparsable)), "the folder has unparsable files");
    let two = parse_files(&todo, true);
    assert_eq!(two.len(), one.len());
    for ((id1, p1, d1), (id2, p2, d2)) in one.iter().zip(&two) {
        assert_eq!(id1, id2);
        assert_eq!(p1, p2, "file {id1}");
        assert_eq!(d1.items, d2.items, "file {id1}");
    }
    // One file, or a large spec, stays on the calling thread.
    assert!(!two_threads(&todo[..1]));
    let mut big = Sources::default();
    big.add("a.hcl", " ".repeat(PARSE_TWO_UP_TO));
    big.add("b.hcl", " ");
    assert!(!two_threads(&big.files().collect::<Vec<_>>()));
}
