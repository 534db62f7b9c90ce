//! What the Tencent Cloud and Alibaba Cloud providers do alike around their RunInstances
//! calls: creating a pool's nodes in batches, falling through the allowed instance types,
//! and turning a job's VM into a [`JobStatus`]. Each provider passes its own call and its
//! own out-of-stock error code; nothing here knows a wire format.

use std::future::Future;

use crate::providers::http::client_token;
use crate::providers::{
    CreateNodes, CreateResult, ErrorClass, JobState, JobStatus, LaunchJob, Node, NodeState, ProviderError, TAG_ATTEMPT,
    TAG_JOB, Tags,
};

/// Create `req.count` nodes, at most `batch` per call, trying `req.instance_types` in
/// order. `run(instance_type, count, client_token)` makes one call and answers the new
/// instance ids. Each batch has its own token derived from the request's (the first keeps
/// it unchanged), so a retried create returns the same instances.
///
/// An out-of-capacity answer, or fewer instances than asked for, moves on to the next type.
/// Throttling, transient faults and any error before the first node come back as `Err`
/// (the executor retries the whole call); other errors after some nodes end the call with
/// the nodes made so far, so the state records them. What could not be placed anywhere is
/// reported as an out-of-capacity error under `stockout_code`.
pub async fn create_in_batches<F, Fut>(
    req: &CreateNodes,
    image: &str,
    batch: usize,
    stockout_code: &str,
    mut run: F,
) -> Result<CreateResult, ProviderError>
where
    F: FnMut(String, usize, String) -> Fut,
    Fut: Future<Output = Result<Vec<String>, ProviderError>>,
{
    if req.instance_types.is_empty() {
        return Err(ProviderError::new(
            ErrorClass::Invalid,
            "MissingInstanceType",
            format!("`{}`: no instance type to launch in {}", req.pool, req.zone),
        ));
    }
    let mut out = CreateResult::default();
    let mut remaining = req.count as usize;
    let mut last_stockout: Option<ProviderError> = None;
    'types: for (ti, itype) in req.instance_types.iter().enumerate() {
        let mut bi = 0;
        while remaining > 0 {
            let n = remaining.min(batch);
            let suffix = if ti == 0 && bi == 0 { String::new() } else { format!("-t{ti}b{bi}") };
            match run(itype.clone(), n, client_token(&req.token, &suffix)).await {
                Ok(ids) => {
                    let got = ids.len();
                    out.nodes.extend(ids.into_iter().map(|id| pending_node(req, itype, image, id)));
                    remaining = remaining.saturating_sub(got);
                    bi += 1;
                    if got < n {
                        // The cloud delivered part of the batch: the rest is out of stock.
                        last_stockout = Some(ProviderError::new(
                            ErrorClass::OutOfCapacity,
                            stockout_code,
                            format!("{itype} delivered {got} of {n}"),
                        ));
                        continue 'types;
                    }
                }
                Err(e) if e.class == ErrorClass::OutOfCapacity => {
                    last_stockout = Some(e);
                    continue 'types;
                }
                Err(e) if out.nodes.is_empty() || matches!(e.class, ErrorClass::Throttled | ErrorClass::Retryable) => {
                    return Err(e);
                }
                Err(e) => {
                    out.errors.push(e);
                    return Ok(out);
                }
            }
        }
        break;
    }
    if remaining > 0 {
        let why = last_stockout.map(|e| e.message).unwrap_or_default();
        out.errors.push(ProviderError::new(
            ErrorClass::OutOfCapacity,
            stockout_code,
            format!(
                "{remaining} of {} {} {} in {} could not be placed on {}: {why}",
                req.count,
                req.capacity,
                if req.count == 1 { "node" } else { "nodes" },
                req.zone,
                req.instance_types.join(", ")
            ),
        ));
    }
    Ok(out)
}

/// Separates the node id from the command's id in the run id of a job on a warm node.
const COMMAND_SEP: char = '/';

/// Does a run-command's comment or description carry launch `token` as a word of its own
/// (`gpuplan gj-… job.x attempt 2`)? How a send made before a crash is found again.
pub fn carries(comment: &str, token: &str) -> bool {
    !token.is_empty() && comment.split_whitespace().any(|w| w == token)
}

/// The run id of a job a cloud's run-command API runs on a warm node: `<node>/<command>`,
/// so status, logs and cancel need no lookup (instance, command and invocation ids of
/// AWS, Tencent and Alibaba never contain a `/`).
pub fn command_run_id(node: &str, command: &str) -> String {
    format!("{node}{COMMAND_SEP}{command}")
}

/// A job just handed to a warm node's run-command agent: queued, under the run id
/// [`command_run_id`] makes, its message naming the node and the agent's `command`
/// (e.g. "SSM command 1f2e…").
pub fn queued_on_warm_node(req: &LaunchJob, command_id: &str, command: &str) -> JobStatus {
    JobStatus {
        id: command_run_id(&req.node_id, command_id),
        job: req.job.clone(),
        node_id: req.node_id.clone(),
        state: JobState::Queued,
        attempt: req.attempt,
        message: Some(format!("on warm node {} ({command})", req.node_id)),
        started_ms: None,
        finished_ms: None,
        address: None,
    }
}

/// Is this run id one of a job on a warm node ([`command_run_id`]), not a job VM's?
pub fn is_command_run(id: &str) -> bool {
    id.contains(COMMAND_SEP)
}

/// (node, command) of a [`command_run_id`].
pub fn split_command_run(id: &str) -> Result<(&str, &str), ProviderError> {
    id.split_once(COMMAND_SEP).ok_or_else(|| {
        ProviderError::new(ErrorClass::Invalid, "JobNotFound", format!("`{id}` is not a run-command run id"))
    })
}

/// The strings of a JSON array of instance ids (none when it is not an array).
pub fn string_ids(ids: &serde_json::Value) -> Vec<String> {
    ids.as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect()).unwrap_or_default()
}

fn pending_node(req: &CreateNodes, itype: &str, image: &str, id: String) -> Node {
    Node {
        provider: None,
        id,
        pool: req.pool.clone(),
        instance_type: itype.to_string(),
        region: req.region.clone(),
        zone: req.zone.clone(),
        capacity: req.capacity,
        state: NodeState::Pending,
        image: Some(image.to_string()),
        tags: req.tags.clone(),
    }
}

/// The status of a job launched as the first node of `made`, or why there is none.
pub fn launched(req: &LaunchJob, made: CreateResult, stockout_code: &str) -> Result<JobStatus, ProviderError> {
    let Some(node) = made.nodes.first() else {
        return Err(made.errors.into_iter().next().unwrap_or_else(|| {
            ProviderError::new(ErrorClass::OutOfCapacity, stockout_code, "no instance was created")
        }));
    };
    Ok(JobStatus {
        id: node.id.clone(),
        job: req.job.clone(),
        node_id: node.id.clone(),
        state: JobState::Queued,
        attempt: req.attempt,
        message: Some(format!("instance {} in {} boots the job", node.id, node.zone)),
        started_ms: None,
        finished_ms: None,
        address: None,
    })
}

/// The instance among `found` that carries a job tag, else a "no such job" error.
pub fn job_instance<T>(found: Vec<T>, tags: impl Fn(&T) -> Tags, region: &str, id: &str) -> Result<T, ProviderError> {
    found.into_iter().find(|i| tags(i).contains_key(TAG_JOB)).ok_or_else(|| {
        ProviderError::new(ErrorClass::Invalid, "JobNotFound", format!("no gpuplan job instance `{id}` in {region}"))
    })
}

/// A job VM's status from its tags (job address and attempt) and the state its instance
/// state maps to.
pub fn job_status(id: &str, tags: &Tags, state: JobState, message: Option<String>) -> Result<JobStatus, ProviderError> {
    let job = tags.get(TAG_JOB).and_then(|j| j.parse().ok()).ok_or_else(|| {
        ProviderError::new(
            ErrorClass::Invalid,
            "JobNotFound",
            format!("instance `{id}` carries no valid {TAG_JOB} tag"),
        )
    })?;
    Ok(JobStatus {
        id: id.to_string(),
        job,
        node_id: id.to_string(),
        state,
        attempt: tags.get(TAG_ATTEMPT).and_then(|a| a.parse().ok()).unwrap_or(0),
        message,
        started_ms: None,
        finished_ms: None,
        address: None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::providers::Capacity;

    fn req(count: u32, types: &[&str]) -> CreateNodes {
        CreateNodes {
            pool: "gpu_pool.p".parse().expect("address"),
            region: "r".into(),
            zone: "r-a".into(),
            zones: vec![],
            instance_types: types.iter().map(|t| t.to_string()).collect(),
            capacity: Capacity::OnDemand,
            count,
            image: None,
            max_spot_price: None,
            token: "tok".into(),
            tags: Tags::new(),
            user_data: None,
            join: None,
            hardware: None,
            reservation: None,
        }
    }

    /// Each call's (type, count, token), answering ids from `answers` in turn.
    async fn run(
        r: &CreateNodes,
        answers: Vec<Result<usize, ProviderError>>,
    ) -> (Result<CreateResult, ProviderError>, Vec<(String, usize, String)>) {
        let calls = Mutex::new(Vec::new());
        let answers = Mutex::new(answers.into_iter());
        let out = create_in_batches(r, "img", 2, "NoStock", |t, n, token| {
            calls.lock().unwrap().push((t.clone(), n, token));
            let answer = answers.lock().unwrap().next().expect("a scripted answer");
            let len = calls.lock().unwrap().len();
            async move { answer.map(|got| (0..got).map(|i| format!("{t}-{len}-{i}")).collect()) }
        })
        .await;
        (out, calls.into_inner().unwrap())
    }

    #[test]
    fn command_run_ids_carry_the_node_and_the_command() {
        let id = command_run_id("ins-1", "inv-2");
        assert!(is_command_run(&id) && !is_command_run("ins-1"));
        assert_eq!(split_command_run(&id).unwrap(), ("ins-1", "inv-2"));
        assert_eq!(split_command_run("ins-1").unwrap_err().code, "JobNotFound");
    }

    #[tokio::test]
    async fn batches_carry_their_own_tokens_and_a_short_batch_moves_to_the_next_type() {
        let r = req(5, &["a", "b"]);
        let (out, calls) = run(&r, vec![Ok(2), Ok(1), Ok(2)]).await;
        let out = out.expect("created");
        let shapes: Vec<(&str, usize)> = calls.iter().map(|(t, n, _)| (t.as_str(), *n)).collect();
        assert_eq!(shapes, [("a", 2), ("a", 2), ("b", 2)]);
        assert_eq!(calls[0].2, "tok", "the first batch keeps the plan's token");
        assert_ne!(calls[1].2, calls[0].2);
        assert_ne!(calls[2].2, calls[1].2);
        assert_eq!(out.nodes.len(), 5);
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        assert_eq!(out.nodes[3].instance_type, "b");
        assert!(out.nodes.iter().all(|n| n.state == NodeState::Pending && n.image.as_deref() == Some("img")));
    }

    #[tokio::test]
    async fn what_no_type_can_place_is_reported_as_out_of_capacity() {
        let r = req(3, &["a", "b"]);
        let stock = || Err(ProviderError::new(ErrorClass::OutOfCapacity, "NoStock", "none left"));
        let (out, calls) = run(&r, vec![Ok(2), stock(), stock()]).await;
        let out = out.expect("partial result");
        assert_eq!(calls.len(), 3);
        assert_eq!(out.nodes.len(), 2);
        assert_eq!(out.errors.len(), 1);
        assert_eq!(out.errors[0].class, ErrorClass::OutOfCapacity);
        assert!(out.errors[0].message.starts_with("1 of 3 on-demand nodes in r-a could not be placed on a, b"));
    }

    #[tokio::test]
    async fn throttling_fails_the_call_and_a_later_fatal_error_keeps_the_nodes_made() {
        let r = req(4, &["a"]);
        let throttled = ProviderError::new(ErrorClass::Throttled, "Throttled", "slow down");
        let (out, _) = run(&r, vec![Ok(2), Err(throttled)]).await;
        assert_eq!(out.expect_err("retried as a whole").class, ErrorClass::Throttled);
        let fatal = ProviderError::new(ErrorClass::Fatal, "Boom", "broken");
        let (out, _) = run(&r, vec![Ok(2), Err(fatal)]).await;
        let out = out.expect("the nodes made so far");
        assert_eq!((out.nodes.len(), out.errors.len()), (2, 1));
        let (out, calls) = run(&req(1, &[]), vec![]).await;
        assert_eq!(out.expect_err("no types").class, ErrorClass::Invalid);
        assert!(calls.is_empty());
    }
}
