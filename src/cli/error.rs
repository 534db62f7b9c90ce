//! Errors the CLI raises itself (bad flags, missing paths, unimplemented commands) and how
//! any command error reaches the user: one `error:` line, then a `hint:` for the next step.

use miette::{GraphicalReportHandler, GraphicalTheme};

use super::Settings;
use super::output::{self, Style};

/// A problem with the invocation rather than the specs. Paths and code go in backticks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
#[diagnostic(code(gpuplan::cli))]
pub struct CliError {
    pub message: String,
    #[help]
    pub hint: Option<String>,
}

impl CliError {
    pub fn new(message: impl Into<String>) -> Self {
        CliError { message: message.into(), hint: None }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// `error: ...` and `hint: ...` on stderr, readable without colour.
    pub fn print(&self, color: bool) {
        let mut text = format!("{} {}\n", output::paint("error:", Style::Error, color), self.message);
        if let Some(hint) = &self.hint {
            text.push_str(&format!("{} {hint}\n", output::paint("hint:", Style::Hint, color)));
        }
        output::stderr(&text);
    }
}

/// Print a command's error: ours in the plain `error:`/`hint:` form, library diagnostics
/// through miette with the resolved colour and width.
pub fn print_report(report: &miette::Report, settings: &Settings) {
    if let Some(e) = report.downcast_ref::<CliError>() {
        e.print(settings.color_stderr);
        return;
    }
    let theme = if settings.color_stderr { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
    let handler = GraphicalReportHandler::new_themed(theme).with_width(settings.width);
    let mut text = String::new();
    if handler.render_report(&mut text, report.as_ref()).is_err() {
        text = format!("error: {report}");
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    output::stderr(&text);
}
