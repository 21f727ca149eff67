//! Front ends: source text → [`polyhedral::Program`].
//!
//! - [`pf`]: the `.pf` kernel language;
//! - [`c`]: the `#pragma scop` region of a C file, as PolyBench/C writes its kernels;
//! - [`diagnostic`]: located, one-line-explained errors shared by both.
//!
//! [`load`] reads a file and picks the language by its extension.

pub mod c;
pub mod diagnostic;
pub mod pf;

pub use diagnostic::{Diagnostic, Error, SourceFile};

use std::path::{Path, PathBuf};

use polyhedral::Program;

/// What the command line says about sizes, macros and include paths.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--size NAME=VALUE`: overrides of a kernel's size defaults.
    pub sizes: Vec<(String, i64)>,
    /// `-D NAME[=VALUE]`: preprocessor definitions for C input (also accepted as size
    /// overrides for `.pf` kernels when they name a size).
    pub defines: Vec<(String, Option<String>)>,
    /// `-I DIR`: where quoted `#include`s are looked for after the including file's folder.
    pub include_dirs: Vec<PathBuf>,
    /// `--extent NAME=AxB`: the extents of an array a C SCoP uses without declaring it.
    pub extents: Vec<(String, Vec<i64>)>,
}

/// The source languages polyfuse reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// `.pf`
    Kernel,
    /// `.c`
    CScop,
}

impl Language {
    pub fn from_path(path: &Path) -> Option<Language> {
        match path.extension()?.to_str()? {
            "pf" => Some(Language::Kernel),
            "c" => Some(Language::CScop),
            _ => None,
        }
    }
}

/// Parses a source text in the given language.
pub fn parse(file: &SourceFile, language: Language, options: &Options) -> Result<Program, Error> {
    parse_with_notes(file, language, options).map(|(p, _)| p)
}

/// [`parse`], with notes on what the front end inferred (index ranges of `.pf` kernels,
/// undeclared data of C SCoPs and its extents), one line each.
pub fn parse_with_notes(
    file: &SourceFile,
    language: Language,
    options: &Options,
) -> Result<(Program, Vec<String>), Error> {
    match language {
        Language::Kernel => {
            if let Some((name, _)) = options.extents.first() {
                return Err(Error::new(
                    file,
                    Diagnostic::new(
                        polyhedral::program::Span::default(),
                        format!("--extent {name}: a kernel's tensors have declared shapes"),
                    )
                    .with_hint("--extent gives the extents of arrays a C SCoP does not declare"),
                ));
            }
            pf::parse_kernel_with_notes(file, options)
        }
        Language::CScop => c::parse_scop_with_notes(file, options),
    }
}

/// Why [`load`] failed.
#[derive(Debug)]
pub enum LoadError {
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    UnknownLanguage {
        path: PathBuf,
    },
    Source(Box<Error>),
}

impl LoadError {
    /// The message for the user: a located diagnostic for errors in the source.
    pub fn render(&self, color: bool) -> String {
        match self {
            LoadError::Read { path, error } => {
                format!("error: cannot read {}: {error}\n", path.display())
            }
            LoadError::UnknownLanguage { path } => format!(
                "error: {}: unknown kind of file\n  = hint: kernels are `.pf` files or C files (`.c`) with a `#pragma scop` region\n",
                path.display()
            ),
            LoadError::Source(e) => e.render(color),
        }
    }
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Source(e) => write!(f, "{e}"),
            other => f.write_str(other.render(false).lines().next().unwrap_or_default()),
        }
    }
}

impl std::error::Error for LoadError {}

/// Reads `path` and parses it in the language its extension names.
pub fn load(path: &Path, options: &Options) -> Result<Program, LoadError> {
    load_with_notes(path, options).map(|(p, _)| p)
}

/// [`load`], with the notes of [`parse_with_notes`].
pub fn load_with_notes(
    path: &Path,
    options: &Options,
) -> Result<(Program, Vec<String>), LoadError> {
    let language = Language::from_path(path).ok_or_else(|| LoadError::UnknownLanguage {
        path: path.to_path_buf(),
    })?;
    let bytes = std::fs::read(path).map_err(|error| LoadError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    // Invalid UTF-8 is replaced rather than refused, so the parser reports the bad character
    // with its location.
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let file = SourceFile::new(path, text);
    parse_with_notes(&file, language, options).map_err(|e| LoadError::Source(Box::new(e)))
}
