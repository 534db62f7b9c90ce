//! Test-file parsing and the report views, without running anything.

use std::time::Duration;

use crate::diag::{Diagnostics, Sources};
use crate::testing::file::{Command, SimStep, parse};
use crate::testing::{Failure, FileReport, Report, RunReport, Shown, Status, junit, report};

fn parsed(text: &str) -> (Option<crate::testing::TestFile>, Diagnostics, Sources) {
    let mut sources = Sources::default();
    let id = sources.add("tests/t.test.hcl", text);
    let mut diags = Diagnostics::default();
    let f = parse(id, "tests/t.test.hcl", text, &mut diags);
    (f, diags, sources)
}

#[test]
fn runs_keep_their_order_command_and_sim_steps_as_written() {
    let (f, diags, _) = parsed(
        r#"
variables { spot = 20 }
run "first" {}
run "second" {
  command = plan
  variables { spot = 0 }
  sim {
    advance = "2h"
    capacity {
      zone = "us-east-1a"
      spot = 0
    }
    interrupt {
      pool = gpu_pool.train
    }
    job_duration = "30m"
  }
  expect_failures = [policy.min_spot_share, gpu_pool.train, quota.ml]
  assert {
    condition     = plan.summary.destroy == 0
    error_message = "no"
  }
}
"#,
    );
    assert!(diags.items.is_empty(), "{diags:?}");
    let f = f.unwrap();
    assert_eq!(f.variables.len(), 1);
    let names: Vec<&str> = f.runs.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["first", "second"]);
    assert_eq!(f.runs[0].command, Command::Apply);
    let r = &f.runs[1];
    assert_eq!(r.command, Command::Plan);
    assert_eq!(r.sim.job_duration, Some(Duration::from_secs(1800)));
    let kinds: Vec<&str> = r
        .sim
        .steps
        .iter()
        .map(|s| match s {
            SimStep::Advance { .. } => "advance",
            SimStep::Capacity { .. } => "capacity",
            SimStep::Interrupt { count: 1, .. } => "interrupt",
            SimStep::Interrupt { .. } => "interrupt with a count",
            SimStep::Fault { .. } => "fault",
        })
        .collect();
    assert_eq!(kinds, ["advance", "capacity", "interrupt"]);
    let expected: Vec<&str> = r.expect_failures.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(expected, ["policy.min_spot_share", "gpu_pool.train", "quota.ml"]);
    assert_eq!(r.asserts.len(), 1);
}

#[test]
fn every_problem_of_a_file_is_located() {
    let text = "run \"a\" {\n  comand = plan\n  assert {\n    condition = true\n  }\n  sim {\n    advance = \"soon\"\n  }\n}\nrun \"a\" {}\nfoo {}\n";
    let (_, diags, sources) = parsed(text);
    let found: Vec<(String, String)> = diags
        .items
        .iter()
        .map(|d| (d.primary().map(|s| sources.location(s)).unwrap_or_default(), d.message.clone()))
        .collect();
    let want = [
        ("tests/t.test.hcl:2:3", "unknown attribute `comand` in a test file"),
        ("tests/t.test.hcl:3:3", "`assert` needs `error_message`"),
        ("tests/t.test.hcl:7:15", "`soon` is not a duration"),
        ("tests/t.test.hcl:10:5", "run \"a\" is defined twice"),
        ("tests/t.test.hcl:11:1", "unknown block `foo` in a test file"),
    ];
    for (at, message) in want {
        assert!(found.iter().any(|(a, m)| a == at && m == message), "{at} {message} not in {found:#?}");
    }
    assert_eq!(found.len(), want.len(), "{found:#?}");
}

fn sample() -> Report {
    let failure = Failure {
        location: "tests/t.test.hcl:4:17".into(),
        message: "cost <too> \"high\" & rising\u{1}".into(),
        values: vec![Shown { expression: "plan.cost.hourly_after".into(), value: "612.5".into() }],
    };
    let run = |name: &str, status, failures| RunReport {
        name: name.into(),
        location: "tests/t.test.hcl:1:1".into(),
        status,
        duration: Duration::from_millis(12),
        failures,
    };
    Report {
        files: vec![FileReport {
            file: "tests/t.test.hcl".into(),
            runs: vec![
                run("ok", Status::Pass, vec![]),
                run("bad", Status::Fail, vec![failure]),
                run("later", Status::Skip, vec![]),
            ],
            duration: Duration::from_millis(40),
        }],
        duration: Duration::from_millis(41),
    }
}

#[test]
fn the_text_view_has_one_line_per_run_and_the_summary_last() {
    assert_eq!(
        report::text(&sample()),
        "tests/t.test.hcl\n  run \"ok\"... pass\n  run \"bad\"... fail\n    tests/t.test.hcl:4:17: cost <too> \"high\" & rising\u{1}\n      plan.cost.hourly_after = 612.5\n  run \"later\"... skip\n\n1 passed, 1 failed, 1 skipped\n"
    );
    assert_eq!(report::text(&Report::default()), "0 passed, 0 failed\n");
}

#[test]
fn junit_escapes_markup_and_drops_characters_xml_forbids() {
    let xml = junit::xml(&sample(), "2026-11-26T12:00:00");
    assert!(xml.contains("message=\"cost &lt;too&gt; &quot;high&quot; &amp; rising\""), "{xml}");
    assert!(!xml.contains('\u{1}'));
    assert!(
        xml.contains("<testsuites name=\"gpuplan test\" tests=\"3\" failures=\"1\" errors=\"0\" time=\"0.041\">"),
        "{xml}"
    );
    assert!(xml.contains("<testcase name=\"ok\" classname=\"tests/t.test.hcl\" time=\"0.012\"/>"), "{xml}");
    assert!(xml.contains("<skipped message="), "{xml}");
}
