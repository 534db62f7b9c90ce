//! The runner over a scripted agent API: batching and defaults of the agent states, the
//! send's timeout and run id, status, cancel and the check states, without a network.

use std::sync::Mutex;

use base64::Engine as _;

use super::*;
use crate::model::health::Readiness;

static FAKE: Agent = Agent {
    name: "Fake",
    unit: "send",
    record: "result",
    queued: &["WAIT"],
    running: &["GO"],
    succeeded: "OK",
    cancelled: &["STOP"],
    timed_out: None,
    failed: "BAD",
    zero_with_reason_is_the_agents: false,
};

/// Answers by send id; records every call it gets.
#[derive(Default)]
struct Scripted {
    answers: BTreeMap<String, (&'static str, Option<i64>, &'static str)>,
    calls: Mutex<Vec<String>>,
}

impl Scripted {
    fn log(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }
}

#[async_trait]
impl AgentApi for Scripted {
    const AGENT: &'static Agent = &FAKE;
    const AGENT_BATCH: usize = 2;
    const MAX_TIMEOUT_SECS: Option<u64> = Some(1_000);

    async fn agent_batch(&self, _region: &str, ids: &[String]) -> Result<Vec<(String, AgentState)>, ProviderError> {
        self.log(format!("agents {}", ids.join(",")));
        Ok(ids
            .iter()
            .filter_map(|id| match id.as_str() {
                "on" => Some((id.clone(), AgentState::Online)),
                "off" => Some((id.clone(), AgentState::Offline("Fake agent Stopped".into()))),
                _ => None,
            })
            .collect())
    }

    async fn send(&self, _region: &str, node: &str, cmd: &Command<'_>) -> Result<String, ProviderError> {
        let token = cmd.launch.map_or("-", |l| l.token.as_str());
        self.log(format!("send {node} {} {} {token}", cmd.name, cmd.timeout_secs));
        Ok("s-1".into())
    }

    async fn answer(&self, _region: &str, node: &str, send: &str) -> Result<Option<Answer>, ProviderError> {
        self.log(format!("answer {node} {send}"));
        Ok(self.answers.get(send).map(|(status, code, out)| Answer {
            status: status.to_string(),
            code: *code,
            why: String::new(),
            output: base64::engine::general_purpose::STANDARD.encode(out),
        }))
    }

    async fn stop(&self, _region: &str, node: &str, send: &str) -> Result<(), ProviderError> {
        self.log(format!("stop {node} {send}"));
        Ok(())
    }
}

fn runner(answers: &[(&str, &'static str, Option<i64>, &'static str)]) -> Agents<Scripted> {
    let answers = answers.iter().map(|(id, s, c, o)| (id.to_string(), (*s, *c, *o))).collect();
    Agents::new(Scripted { answers, calls: Mutex::default() })
}

fn calls(a: &Agents<Scripted>) -> Vec<String> {
    a.api().calls.lock().unwrap().clone()
}

fn warm_launch() -> LaunchJob {
    LaunchJob {
        job: "job.x".parse().unwrap(),
        pool: "gpu_pool.p".parse().unwrap(),
        node_id: "n".into(),
        region: "r".into(),
        image: "nginx".into(),
        command: vec![],
        env: BTreeMap::new(),
        secrets: BTreeMap::new(),
        gpus: 1,
        attempt: 1,
        token: "gj-1".into(),
        shape: None,
        max_runtime_secs: Some(900),
        keep_node: false,
        kube: None,
        readiness: Readiness::default(),
    }
}

#[tokio::test]
async fn agents_are_asked_in_batches_and_an_unreported_one_is_offline() {
    let a = runner(&[]);
    let ids: Vec<String> = ["on", "off", "gone"].map(String::from).to_vec();
    let states = a.agents("r", &ids).await.unwrap();
    assert_eq!(calls(&a), ["agents on,off", "agents gone"]);
    assert_eq!(states["on"], AgentState::Online);
    assert_eq!(states["off"], AgentState::Offline("Fake agent Stopped".into()));
    assert_eq!(states["gone"], AgentState::Offline("no Fake agent reported".into()));
}

#[tokio::test]
async fn a_job_is_sent_with_its_token_under_the_agents_timeout_ceiling() {
    let a = runner(&[]);
    let status = a.launch(&warm_launch(), &BTreeMap::new()).await.unwrap();
    // max_runtime 900 s + 300 s, capped at the agent's 1,000 s.
    assert_eq!(calls(&a), ["send n gpuplan-job 1000 gj-1"]);
    assert_eq!((status.id.as_str(), status.state), ("n/s-1", JobState::Queued));
    assert_eq!(status.message.as_deref(), Some("on warm node n (Fake invocation s-1)"));
}

#[tokio::test]
async fn a_running_send_is_stopped_and_an_ended_one_is_left_alone() {
    let a = runner(&[("s-1", "GO", None, ""), ("s-2", "BAD", Some(3), "boom")]);
    let cancelled = a.cancel("r", "n/s-1").await.unwrap();
    assert_eq!(cancelled.state, JobState::Cancelled);
    let failed = a.cancel("r", "n/s-2").await.unwrap();
    assert_eq!(failed.state, JobState::Failed);
    assert_eq!(calls(&a), ["answer n s-1", "stop n s-1", "answer n s-2"]);
    let missing = a.status("r", "n/s-9").await.unwrap_err();
    assert_eq!(
        (missing.code.as_str(), missing.message.as_str()),
        ("JobNotFound", "Fake has no result of run n/s-9 in r")
    );
}

#[tokio::test]
async fn a_check_waits_for_a_listed_send_and_reads_only_a_success() {
    let a = runner(&[
        ("s-1", "WAIT", None, ""),
        ("s-2", "OK", Some(0), "gpuplan-job-log=present"),
        ("s-3", "BAD", Some(1), "x"),
    ]);
    assert!(matches!(a.check("r", "n", "s-0").await.unwrap(), boot::Check::Pending), "not listed yet");
    assert!(matches!(a.check("r", "n", "s-1").await.unwrap(), boot::Check::Pending));
    assert!(
        matches!(a.check("r", "n", "s-2").await.unwrap(), boot::Check::Output(o) if o == "gpuplan-job-log=present")
    );
    assert!(matches!(a.check("r", "n", "s-3").await.unwrap(), boot::Check::Ended));
}
