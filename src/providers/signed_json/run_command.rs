//! What the two clouds' run-command agents (Tencent's TAT, Alibaba's Cloud Assistant)
//! answer, read alike: a status word → a run's [`JobState`] and message, as data per
//! agent ([`Agent`]), and the base64 output both return. The runner over them is
//! `agents.rs`; each cloud's calls stay in its `warm.rs`. Pure.

use base64::Engine;

use crate::providers::userdata;
use crate::providers::{ErrorClass, JobState, ProviderError};

/// One agent's status words.
pub struct Agent {
    /// As messages name it (`TAT`, `Cloud Assistant`).
    pub name: &'static str,
    /// What one send is called in its API (`task`, `invocation`).
    pub unit: &'static str,
    /// What its API calls a send's result on a node (`task`, `result`).
    pub record: &'static str,
    pub queued: &'static [&'static str],
    pub running: &'static [&'static str],
    pub succeeded: &'static str,
    pub cancelled: &'static [&'static str],
    /// A status that means the run's `Timeout` ended it, with the message to say.
    pub timed_out: Option<(&'static str, &'static str)>,
    pub failed: &'static str,
    /// A failure with exit code 0 and a reason is the agent's failure (the reason), not
    /// the job's exit: Cloud Assistant answers so when it could not run the script.
    pub zero_with_reason_is_the_agents: bool,
}

impl Agent {
    /// A run's state from the agent's `status`, exit `code`, failure reason `why` and the
    /// job's `log`. An exit code outside i32 is no process exit code: the run still
    /// fails, with the agent's own reason instead of a number (never a pass).
    pub fn state(&self, status: &str, code: Option<i64>, why: &str, log: &str) -> (JobState, Option<String>) {
        let how = format!("read with {}", self.name);
        if self.queued.contains(&status) {
            (JobState::Queued, None)
        } else if self.running.contains(&status) {
            (JobState::Running, None)
        } else if status == self.succeeded {
            (JobState::Succeeded, Some(userdata::exit_message(0, log, &how)))
        } else if self.cancelled.contains(&status) {
            (JobState::Cancelled, Some("cancelled".into()))
        } else if let Some((_, message)) = self.timed_out.filter(|(s, _)| *s == status) {
            (JobState::Failed, Some(message.into()))
        } else if status == self.failed {
            let agents = |c: i32| self.zero_with_reason_is_the_agents && c == 0 && !why.is_empty();
            // An exit code outside i32 is no process's: the run still fails, with the
            // agent's reason instead of an exit line.
            match code.and_then(|c| i32::try_from(c).ok()).filter(|c| !agents(*c)) {
                Some(c) => (JobState::Failed, Some(userdata::exit_message(c, log, &how))),
                None => (JobState::Failed, Some(format!("{} {} failed: {why}", self.name, self.unit))),
            }
        } else {
            (JobState::Failed, Some(format!("{} {} {status}: {why}", self.name, self.unit)))
        }
    }

    /// The output the agent returns (base64), decoded.
    pub fn output(&self, b64: &str) -> Result<String, ProviderError> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).map_err(|e| {
            ProviderError::new(ErrorClass::Fatal, "BadResponse", format!("{} output is not base64: {e}", self.name))
        })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

#[cfg(test)]
mod tests;
