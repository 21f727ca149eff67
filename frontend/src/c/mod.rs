//! The C SCoP front end: a C file whose kernel is marked with `#pragma scop` /
//! `#pragma endscop`, as PolyBench/C 4.2, Pluto and PPCG write them → [`Program`].
//!
//! The stages, one file each:
//! - [`lexer`]: text → preprocessing tokens;
//! - [`preprocess`] (with [`cond`] for `#if` arithmetic): directives, macros, includes; size
//!   macros stay names, the SCoP pragmas become tokens;
//! - [`parser`]: finds the function holding the SCoP and parses its parameters, its local
//!   declarations and the SCoP's statements into the [`ast`];
//! - [`lower`]: checks affinity and types and builds the Program (domains, accesses, bodies,
//!   roles, original schedule), with [`quasi`] for divisions by constants and [`implicit`] for
//!   names the file does not declare.
//!
//! The produced Program satisfies [`Program::verify`]; every failure on the way is an
//! [`Error`] located in the file it is about (a header's own mistakes point into the header),
//! never a panic.

mod ast;
mod cond;
mod implicit;
mod lexer;
mod lower;
mod parser;
mod preprocess;
mod quasi;
#[cfg(test)]
mod tests;

use polyhedral::program::{Program, Span};

use crate::{Diagnostic, Error, Options, SourceFile};

/// A location: a byte range in one of the translation unit's files (0 is the main file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Loc {
    pub file: u32,
    pub span: Span,
}

/// An error before it is attached to its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CError {
    pub loc: Loc,
    pub message: String,
    pub hint: String,
}

impl CError {
    pub fn new(loc: Loc, message: impl Into<String>, hint: impl Into<String>) -> CError {
        CError {
            loc,
            message: message.into(),
            hint: hint.into(),
        }
    }

    pub fn into_error(self, files: &[SourceFile]) -> Error {
        let file = files
            .get(self.loc.file as usize)
            .or(files.first())
            // `files` always holds the main file.
            .expect("the main file");
        Error::new(
            file,
            Diagnostic::new(self.loc.span, self.message).with_hint(self.hint),
        )
    }
}

/// Parses the SCoP of a C file. `file.path` is where quoted includes are looked for first;
/// `options` gives `-D` definitions, `--size` overrides and `-I` folders.
///
/// The Program's spans are byte ranges of the main file, and its source is
/// [`polyhedral::program::SourceKind::CScop`] with the range of the pragmas and everything
/// between them.
pub fn parse_scop(file: &SourceFile, options: &Options) -> Result<Program, Error> {
    parse_scop_with_notes(file, options).map(|(p, _)| p)
}

/// [`parse_scop`], with notes on what the front end inferred (undeclared arrays and scalars,
/// their extents), one line each.
pub fn parse_scop_with_notes(
    file: &SourceFile,
    options: &Options,
) -> Result<(Program, Vec<String>), Error> {
    let pp = preprocess::preprocess(file, options)?;
    let kernel = parser::parse_kernel(&pp.tokens).map_err(|e| e.into_error(&pp.files))?;
    lower::lower(&kernel, &pp, options).map_err(|e| e.into_error(&pp.files))
}
