//! Front ends: source text → [`polyhedral::Program`].
//!
//! - [`diagnostic`]: located, one-line-explained errors shared by both languages;
//! - [`c`]: the C SCoP subset (PolyBench/C 4.2 style), [`c::parse_scop`].

pub mod c;
pub mod diagnostic;

pub use diagnostic::{Diagnostic, Error, SourceFile};

use std::path::PathBuf;

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
}
