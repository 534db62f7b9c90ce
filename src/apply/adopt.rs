//! Executing a plan's imports, moves and forgets (`plan::adopt`), before its changes.
//!
//! Each instance is retagged in place first, then recorded: an import is in the state
//! only once its tags are on the cloud, so an interrupted apply leaves every instance
//! imported (tags and state) or tagged but unrecorded, which the next plan takes as the
//! import it was (never as an orphan) and finishes. A move is recorded once all its
//! instances carry the new address; until then the next plan moves it again. Nothing
//! here launches, stops or terminates an instance. A cancelled apply starts no new batch:
//! the adoption in flight stops after the batch it is tagging, recorded, and the rest
//! are skipped (the next plan shows them again).

use crate::addr::Address;
use crate::apply::{Cancel, Outcome, ProviderSet, Recorder, Status};
use crate::plan::Action;
use crate::plan::adopt::{AdoptAction, Adoption};
use crate::providers::{Node, Provider, ports};
use crate::state::JournalEntry;

/// Ids per tag call and per journal entry: an interruption loses at most one batch's
/// record, and the next plan finishes it.
const BATCH: usize = 100;

/// How many instances each kind of adoption took.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub imported: usize,
    pub moved: usize,
    pub forgotten: usize,
}

/// Why an adoption stopped short.
enum Stop {
    Failed(String),
    /// The apply was cancelled before this batch started.
    Interrupted(String),
}

impl From<String> for Stop {
    fn from(e: String) -> Self {
        Stop::Failed(e)
    }
}

/// Run every adoption in plan order, stopping at the first failure or cancellation (the
/// changes of the plan are then not run: they were planned against the adopted world).
pub async fn run(
    adoptions: &[Adoption],
    providers: &ProviderSet,
    recorder: &Recorder,
    cancel: &Cancel,
) -> (Vec<Outcome>, Counts) {
    let mut outcomes = Vec::new();
    let mut counts = Counts::default();
    for a in adoptions {
        let status = match one(a, providers, recorder, cancel, &mut counts).await {
            Ok(()) => Status::Done,
            Err(Stop::Failed(e)) => Status::Failed(e),
            Err(Stop::Interrupted(e)) => Status::Skipped(e),
        };
        let failed = !matches!(status, Status::Done);
        outcomes.push(Outcome {
            address: a.address.clone(),
            action: Action::NoOp,
            status,
            created: 0,
            deleted: 0,
            missing: 0,
        });
        if failed {
            break;
        }
    }
    (outcomes, counts)
}

async fn one(
    a: &Adoption,
    providers: &ProviderSet,
    recorder: &Recorder,
    cancel: &Cancel,
    counts: &mut Counts,
) -> Result<(), Stop> {
    let provider = match (&a.provider, a.nodes.is_empty()) {
        (_, true) => None,
        (Some(name), false) => Some(
            providers.get(name).ok_or_else(|| format!("provider `{name}` is not configured in the spec"))?.as_ref(),
        ),
        (None, false) => return Err(Stop::Failed(format!("`{}` records no provider for its instances", a.address))),
    };
    let region = a.region.as_deref().unwrap_or_default();
    if let Some(resource) = &a.resource {
        let entry = JournalEntry::PutResource { address: a.address.to_string(), resource: resource.clone() };
        recorder.record(vec![entry]).await?;
    }
    for (i, batch) in a.nodes.chunks(BATCH).enumerate() {
        if cancel.is_cancelled() {
            let done = i * BATCH;
            let left = a.nodes.len() - done;
            let verb = match a.action {
                AdoptAction::Import => "imported",
                AdoptAction::Move => "moved",
                AdoptAction::Forget => "forgotten",
            };
            let what = format!("{left} of {} instance(s) not {verb}", a.nodes.len());
            return Err(Stop::Interrupted(format!("{what}: {}", cancel.reason())));
        }
        if let Some(p) = provider {
            retag(p, region, a, batch).await?;
        }
        let entries = match a.action {
            AdoptAction::Import => {
                counts.imported += batch.len();
                vec![
                    JournalEntry::AddNodes { address: a.address.to_string(), nodes: batch.to_vec() },
                    spend_open(&a.address, a, provider, batch),
                ]
            }
            AdoptAction::Move => {
                counts.moved += batch.len();
                vec![]
            }
            AdoptAction::Forget => {
                counts.forgotten += batch.len();
                let ids: Vec<String> = batch.iter().map(|n| n.id.clone()).collect();
                let at_ms = provider.map_or(0, |p| p.clock_ms());
                vec![
                    JournalEntry::RemoveNodes { address: a.address.to_string(), ids: ids.clone() },
                    JournalEntry::SpendClose { ids, at_ms },
                ]
            }
        };
        recorder.record(entries).await?;
    }
    let last = match (a.action, &a.from) {
        (AdoptAction::Move, Some(from)) => {
            Some(JournalEntry::Move { from: from.to_string(), to: a.address.to_string() })
        }
        (AdoptAction::Forget, _) => Some(JournalEntry::DeleteResource { address: a.address.to_string() }),
        _ => None,
    };
    if let Some(entry) = last {
        recorder.record(vec![entry]).await?;
    }
    Ok(())
}

async fn retag(p: &dyn Provider, region: &str, a: &Adoption, batch: &[Node]) -> Result<(), String> {
    let ids: Vec<String> = batch.iter().map(|n| n.id.clone()).collect();
    let mut attempt = 0;
    loop {
        let tagged =
            async { ports::adoption_of(p, ports::RETAG)?.tag_nodes(region, &ids, &a.set_tags, &a.remove_tags).await };
        match tagged.await {
            Ok(()) => return Ok(()),
            Err(e) => {
                attempt += 1;
                match crate::apply::policy::decide(&e, attempt, 7) {
                    crate::apply::policy::Decision::Retry(d) => {
                        tokio::time::sleep(d.min(std::time::Duration::from_secs(30))).await
                    }
                    _ => {
                        return Err(format!(
                            "{} of {} instance(s) ({}) failed: {e}",
                            a.action.as_str(),
                            ids.len(),
                            ids.join(", ")
                        ));
                    }
                }
            }
        }
    }
}

/// Ledger lines for imported instances, from now at the catalog's price: gpuplan pays
/// attention to them from the import on.
fn spend_open(address: &Address, a: &Adoption, provider: Option<&dyn Provider>, nodes: &[Node]) -> JournalEntry {
    let kind = a.resource.as_ref().and_then(|r| r.provider_kind.clone());
    let kind = kind.or_else(|| provider.map(|p| p.kind().to_string())).unwrap_or_default();
    let name = a.provider.clone().unwrap_or_default();
    crate::apply::spend::spend_open_at(
        &address.to_string(),
        &name,
        &kind,
        provider.map_or(0, |p| p.clock_ms()),
        nodes,
        None,
    )
}

#[cfg(test)]
mod tests;
