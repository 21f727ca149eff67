//! Located errors: a message, a primary span, optional secondary spans and a hint, rendered with
//! file:line:col and carets by codespan-reporting.
//!
//! `Span` compares equal to every other span so that programs compare by content: a parsed,
//! printed and re-parsed program equals the original although its spans moved.

use std::sync::Arc;

use codespan_reporting::diagnostic::{Diagnostic as Report, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor, Styles, StylesWriter};

/// Byte range of source text.
#[derive(Clone, Copy, Debug, Default, Eq)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl PartialEq for Span {
    fn eq(&self, _: &Span) -> bool {
        true
    }
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start.min(u32::MAX as usize) as u32,
            end: end.min(u32::MAX as usize) as u32,
        }
    }
}

/// What went wrong and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub message: String,
    pub span: Span,
    pub label: String,
    pub secondary: Vec<(Span, String)>,
    pub hint: Option<String>,
}

impl Diagnostic {
    pub fn new(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            message: message.into(),
            span,
            label: String::new(),
            secondary: Vec::new(),
            hint: None,
        }
    }

    pub fn with_label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = label.into();
        self
    }

    pub fn with_secondary(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.secondary.push((span, label.into()));
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }
}

/// A diagnostic with the file it points into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub file: Arc<str>,
    pub text: Arc<str>,
    pub diagnostic: Box<Diagnostic>,
    /// The simulation stopped at one of its budgets ([`crate::SimOptions`]), not on a fault
    /// of the program.
    pub budget: bool,
}

impl Error {
    pub fn new(file: &str, text: &str, diagnostic: Diagnostic) -> Error {
        Error {
            file: file.into(),
            text: text.into(),
            diagnostic: Box::new(diagnostic),
            budget: false,
        }
    }

    pub(crate) fn shared(file: &Arc<str>, text: &Arc<str>, diagnostic: Diagnostic) -> Error {
        Error {
            file: file.clone(),
            text: text.clone(),
            diagnostic: Box::new(diagnostic),
            budget: false,
        }
    }

    /// This error, marked as the end of a budget.
    pub(crate) fn budget(mut self) -> Error {
        self.budget = true;
        self
    }

    pub fn message(&self) -> &str {
        &self.diagnostic.message
    }

    /// 1-based line and column of the primary span's start.
    pub fn line_col(&self) -> (usize, usize) {
        line_col(&self.text, self.diagnostic.span.start as usize)
    }

    fn clamp(&self, span: Span) -> std::ops::Range<usize> {
        let len = self.text.len();
        let start = floor_boundary(&self.text, (span.start as usize).min(len));
        let end = floor_boundary(&self.text, (span.end as usize).clamp(start, len));
        start..end
    }

    /// The error with file:line:col, the source lines with carets, and the hint.
    pub fn render(&self, color: bool) -> String {
        let files = SimpleFile::new(self.file.as_ref(), self.text.as_ref());
        let mut labels = vec![Label::primary((), self.clamp(self.diagnostic.span))
            .with_message(self.diagnostic.label.clone())];
        for (span, label) in &self.diagnostic.secondary {
            labels.push(Label::secondary((), self.clamp(*span)).with_message(label.clone()));
        }
        let mut report = Report::error()
            .with_message(&self.diagnostic.message)
            .with_labels(labels);
        if let Some(hint) = &self.diagnostic.hint {
            report = report.with_notes(vec![format!("hint: {hint}")]);
        }
        let mut buffer = if color {
            termcolor::Buffer::ansi()
        } else {
            termcolor::Buffer::no_color()
        };
        // Writing into memory cannot fail, and every span was clamped to the text.
        let styles = Styles::default();
        let mut writer = StylesWriter::new(&mut buffer, &styles);
        term::emit_to_write_style(&mut writer, &term::Config::default(), &files, &report)
            .expect("rendering a diagnostic");
        String::from_utf8_lossy(buffer.as_slice()).into_owned()
    }
}

pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..floor_boundary(text, offset.min(text.len()))];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (line, col) = self.line_col();
        write!(f, "{}:{line}:{col}: {}", self.file, self.diagnostic.message)?;
        if let Some(hint) = &self.diagnostic.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}
