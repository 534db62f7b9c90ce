//! A saved plan's header in `show`: when it was made and how long ago.

use std::time::{Duration, SystemTime};

use super::*;
use crate::plan::inputs::PlanInputs;
use crate::render::variables::text_at;
use crate::spec::fingerprint::Fingerprint;

fn saved(made_at: Option<&str>) -> Plan {
    let mut plan = no_changes();
    plan.inputs = Some(PlanInputs {
        workspace: "prod".into(),
        variables: Default::default(),
        overrides: vec![],
        sources: Fingerprint { gpuplan: "0".into(), files: Default::default(), env: Default::default() },
        made_at: made_at.map(str::to_string),
    });
    plan
}

#[test]
fn a_saved_plan_says_when_it_was_made_and_how_long_ago() {
    let made = humantime::parse_rfc3339("2026-12-07T10:00:00Z").unwrap();
    let plan = saved(Some("2026-12-07T10:00:00Z"));
    let at = |secs| text_at(&plan, made + Duration::from_secs(secs));
    assert_eq!(
        at(3 * 3600 + 5 * 60 + 59),
        "Saved plan of workspace `prod`, made 2026-12-07T10:00:00Z (3h 5m ago); the spec declares no variables.\n\n"
    );
    assert!(at(30).contains("made 2026-12-07T10:00:00Z (less than a minute ago);"), "{}", at(30));
    assert!(at(2 * 86400).contains("(2days ago)"), "{}", at(2 * 86400));
    // Made on a machine whose clock runs ahead: the time, without an age.
    let early = text_at(&plan, made - Duration::from_secs(60));
    assert!(early.contains("made 2026-12-07T10:00:00Z;"), "{early}");
    let json = plan_json(&plan);
    assert_eq!(json["timestamp"], "2026-12-07T10:00:00Z", "{json:#}");
}

#[test]
fn a_plan_file_that_did_not_record_its_time_says_nothing_of_it() {
    let plan = saved(None);
    let text = text_at(&plan, SystemTime::now());
    assert_eq!(text, "Saved plan of workspace `prod`; the spec declares no variables.\n\n");
    assert!(plan_json(&plan).get("timestamp").is_none());
}
