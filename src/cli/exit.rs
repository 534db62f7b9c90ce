//! [`ExitStatus`]: the process exit codes of `docs/design/cli.md`, the only thing a command returns
//! besides its output. `main` turns it into the process code; nothing else exits.

/// How a command ended. The numbers are a contract with scripts and CI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitStatus {
    /// Done; for `plan`/`drift`, nothing to change.
    Success = 0,
    /// Bad input, unreadable files, provider failure, usage errors.
    Error = 1,
    /// Changes or drift present (only with `--detailed-exitcode`).
    Changes = 2,
    /// A hard policy, or a soft one without `--override-policy`, denied the plan.
    PolicyDenied = 3,
}

impl ExitStatus {
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<ExitStatus> for std::process::ExitCode {
    fn from(status: ExitStatus) -> Self {
        std::process::ExitCode::from(status.code())
    }
}
