//! Writing to stdout (data) and stderr (everything else), and the little colour the CLI's
//! own messages use. Closed pipes (`gpuplan fmt --check | head`) are not errors.

use std::io::Write;

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
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Data written straight to stdout by `write` (large documents never held whole). A
/// closed pipe (`| head`) is not an error, as with [`stdout`].
pub fn stdout_with(write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
    let mut out = std::io::stdout().lock();
    let _ = write(&mut out).and_then(|()| out.flush());
}

/// Diagnostics, summaries, hints.
pub fn stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
