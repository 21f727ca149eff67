//! User-facing errors: a message, the span of source it is about, and a one-line hint,
//! rendered with file:line:col and a caret excerpt.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use codespan_reporting::diagnostic::{Diagnostic as Report, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor, Styles, StylesWriter};
use polyhedral::program::Span;

/// What went wrong, where, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub message: String,
    pub span: Span,
    pub hint: Option<String>,
}

impl Diagnostic {
    pub fn new(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            message: message.into(),
            span,
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }
}

/// A source text and the name it is shown under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    pub path: PathBuf,
    pub text: Arc<str>,
}

impl SourceFile {
    pub fn new(path: impl AsRef<Path>, text: impl Into<Arc<str>>) -> SourceFile {
        SourceFile {
            path: path.as_ref().to_path_buf(),
            text: text.into(),
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        let offset = (offset as usize).min(self.text.len());
        let before = &self.text[..floor_char_boundary(&self.text, offset)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before[line_start..].chars().count() + 1;
        (line, col)
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A diagnostic together with the file it points into: what a front end returns on bad input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub file: SourceFile,
    pub diagnostic: Diagnostic,
}

impl Error {
    pub fn new(file: &SourceFile, diagnostic: Diagnostic) -> Error {
        Error {
            file: file.clone(),
            diagnostic,
        }
    }

    /// 1-based line and column where the error starts.
    pub fn line_col(&self) -> (usize, usize) {
        self.file.line_col(self.diagnostic.span.start)
    }

    /// The error with file:line:col, the offending line with carets under the span, and the
    /// hint; in colour when `color` is set.
    pub fn render(&self, color: bool) -> String {
        let name = self.file.path.display().to_string();
        let files = SimpleFile::new(name, self.file.text.as_ref());
        let len = self.file.text.len();
        let start = floor_char_boundary(
            &self.file.text,
            (self.diagnostic.span.start as usize).min(len),
        );
        let end = floor_char_boundary(
            &self.file.text,
            (self.diagnostic.span.end as usize).clamp(start, len),
        );
        let mut report = Report::error()
            .with_message(&self.diagnostic.message)
            .with_labels(vec![Label::primary((), start..end)]);
        if let Some(hint) = &self.diagnostic.hint {
            report = report.with_notes(vec![format!("hint: {hint}")]);
        }
        let mut buffer = if color {
            termcolor::Buffer::ansi()
        } else {
            termcolor::Buffer::no_color()
        };
        let config = term::Config::default();
        // Writing into an in-memory buffer cannot fail, and the span was clamped to the text.
        let styles = Styles::default();
        let mut writer = StylesWriter::new(&mut buffer, &styles);
        term::emit_to_write_style(&mut writer, &config, &files, &report)
            .expect("rendering a diagnostic");
        String::from_utf8_lossy(buffer.as_slice()).into_owned()
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (line, col) = self.line_col();
        write!(
            f,
            "{}:{line}:{col}: {}",
            self.file.path.display(),
            self.diagnostic.message
        )?;
        if let Some(hint) = &self.diagnostic.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_location_caret_and_hint() {
        let file = SourceFile::new("k.pf", "kernel k() {\n  X(i) = 1;\n}\n");
        let err = Error::new(
            &file,
            Diagnostic::new(Span::new(15, 16), "unknown tensor `X`").with_hint("declare it"),
        );
        assert_eq!(err.line_col(), (2, 3));
        let text = err.render(false);
        assert!(text.contains("k.pf:2:3"), "{text}");
        assert!(text.contains("^"), "{text}");
        assert!(text.contains("hint: declare it"), "{text}");
        assert_eq!(
            err.to_string(),
            "k.pf:2:3: unknown tensor `X` (hint: declare it)"
        );
    }
}
