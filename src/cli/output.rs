//! Writing to stdout (data) and stderr (everything else), and the little colour the CLI's
//! own messages use. Closed pipes (`gpuplan fmt --check | head`) are not errors; any other
//! failure to write stdout (a full disk under `> plan.txt`) is kept and fails the command
//! once it has run ([`stdout_error`]): a plan nobody could read must not exit 0.

use std::io::Write;
use std::sync::{Mutex, PoisonError};

/// The first error writing stdout other than a closed pipe.
static STDOUT_ERROR: Mutex<Option<std::io::Error>> = Mutex::new(None);

/// Keep `result`'s error, unless it is a closed pipe (the reader stopped reading: fine).
fn keep(result: std::io::Result<()>) {
    if let Err(e) = result
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        STDOUT_ERROR.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(e);
    }
}

/// The error that kept stdout from being written, if any; taken, so it is reported once.
pub fn stdout_error() -> Option<std::io::Error> {
    STDOUT_ERROR.lock().unwrap_or_else(PoisonError::into_inner).take()
}

#[derive(Debug, Clone, Copy)]
pub enum Style {
    Error,
    Warning,
    Hint,
    Success,
}

/// `text` wrapped in ANSI bold colour when `color`, else unchanged.
pub fn paint(text: &str, style: Style, color: bool) -> String {
    if !color {
        return text.to_string();
    }
    let code = match style {
        Style::Error => "1;31",
        Style::Warning => "1;33",
        Style::Hint => "1;36",
        Style::Success => "1;32",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// Data for the user or a script.
pub fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    keep(out.write_all(text.as_bytes()).and_then(|()| out.flush()));
}

/// Data written straight to stdout by `write` (large documents never held whole). A
/// closed pipe (`| head`) is not an error; another failure is kept, as with [`stdout`].
pub fn stdout_with(write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
    let mut out = std::io::stdout().lock();
    keep(write(&mut out).and_then(|()| out.flush()));
}

/// Diagnostics, summaries, hints.
pub fn stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
