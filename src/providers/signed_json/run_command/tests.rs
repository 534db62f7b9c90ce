use super::*;

const AGENT: Agent = Agent {
    name: "Runner",
    unit: "send",
    record: "result",
    queued: &["WAIT"],
    running: &["GO"],
    succeeded: "OK",
    cancelled: &["STOP"],
    timed_out: Some(("LATE", "timed out (Runner Timeout)")),
    failed: "BAD",
    zero_with_reason_is_the_agents: false,
};

#[test]
fn status_words_map_to_states() {
    assert_eq!(AGENT.state("WAIT", None, "", "").0, JobState::Queued);
    assert_eq!(AGENT.state("GO", None, "", "").0, JobState::Running);
    assert_eq!(AGENT.state("OK", Some(0), "", "").0, JobState::Succeeded);
    assert_eq!(AGENT.state("STOP", None, "", ""), (JobState::Cancelled, Some("cancelled".into())));
    assert_eq!(AGENT.state("LATE", None, "", ""), (JobState::Failed, Some("timed out (Runner Timeout)".into())));
    let (s, m) = AGENT.state("ODD", None, "why", "");
    assert_eq!((s, m.as_deref()), (JobState::Failed, Some("Runner send ODD: why")), "an unknown word never passes");
}

#[test]
fn failures_carry_the_exit_code_or_the_agents_reason() {
    let (s, m) = AGENT.state("BAD", Some(3), "", "");
    assert_eq!((s, m.as_deref()), (JobState::Failed, Some("exited 3 (read with Runner)")));
    let (_, m) = AGENT.state("BAD", Some(i64::MAX), "no such process", "");
    assert_eq!(m.as_deref(), Some("Runner send failed: no such process"), "not a process exit code");
    let (_, m) = AGENT.state("BAD", Some(0), "not running", "");
    assert_eq!(m.as_deref(), Some("exited 0 (read with Runner)"));
    let strict = Agent { zero_with_reason_is_the_agents: true, ..AGENT };
    let (_, m) = strict.state("BAD", Some(0), "not running", "");
    assert_eq!(m.as_deref(), Some("Runner send failed: not running"));
}

#[test]
fn output_is_base64_or_a_clear_error() {
    assert_eq!(AGENT.output("aGk=").unwrap(), "hi");
    let e = AGENT.output("%%").unwrap_err();
    assert!(e.message.starts_with("Runner output is not base64"), "{}", e.message);
}
