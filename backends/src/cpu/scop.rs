//! Source-to-source output for C input, as Pluto's `polycc` writes it: the C file the program
//! came from, with its `#pragma scop` … `#pragma endscop` region (pragmas included) replaced by
//! the generated loops, so the file still builds with its own harness and prints what it
//! printed before.
//!
//! The generated statements use the file's own names: sizes by their macro names (so the
//! file's `#define`s and `-D` flags still decide them), arrays and scalars by the names the
//! SCoP used. Loop variables are declared in the replacing block with names no identifier of
//! the file uses. The integer helpers the loops need (`pf_floord`, `pf_min`, …) are
//! `static inline` functions inserted after the last `#include` line before the SCoP, with
//! the standard headers they need.

use polyhedral::ast::Ast;
use polyhedral::program::{Program, SourceKind};

use super::writer::Writer;
use super::{Error, Options};

/// `source` (the text of the C file `program` was read from) with the program's SCoP replaced
/// by the loops of `ast`.
pub fn replace_scop(
    program: &Program,
    ast: &Ast,
    source: &str,
    options: &Options,
) -> Result<String, Error> {
    let SourceKind::CScop { scop, .. } = &program.source else {
        return Err(Error::Unsupported(
            "source-to-source output needs a C file with a #pragma scop region".into(),
        ));
    };
    let (start, end) = (scop.start as usize, scop.end as usize);
    if start > end || end > source.len() || !source.is_char_boundary(start) {
        return Err(Error::InvalidProgram(
            "the SCoP's location does not lie in the given source".into(),
        ));
    }
    let taken = identifiers(source);
    if let Some(clash) = taken.iter().find(|n| n.starts_with("pf_")) {
        return Err(Error::Unsupported(format!(
            "the file already uses the identifier `{clash}`; names starting with `pf_` are \
             the generated helpers'"
        )));
    }
    let line_start = source[..start].rfind('\n').map_or(0, |k| k + 1);
    let indent = source[line_start..start]
        .chars()
        .take_while(|c| c.is_whitespace())
        .count()
        .div_ceil(4)
        .max(1);
    let writer = Writer::in_source(program, options, taken.iter().map(String::as_str));
    let (body, helpers) = writer.write_in_source(ast, indent)?;

    let mut out = String::with_capacity(source.len() + body.len() + helpers.len() + 256);
    let insert_at = helpers_position(&source[..line_start]);
    out += &source[..insert_at];
    if insert_at > 0 && !out.ends_with('\n') {
        out.push('\n');
    }
    out += &format!(
        "\n/* Helpers of the loops polyfuse generated for `{}`. */\n",
        program.name
    );
    out += "#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n";
    out += &helpers;
    out.push('\n');
    out += &source[insert_at..line_start];
    let pad = "    ".repeat(indent);
    out += &format!(
        "{pad}/* The SCoP of `{}`, optimized by polyfuse. */\n",
        program.name
    );
    out += &body;
    let rest = &source[end..];
    // The replaced region ended at the end of `#pragma endscop`; keep what follows it on
    // that line (a comment) on a line of its own.
    out += rest.strip_prefix('\n').unwrap_or(rest);
    Ok(out)
}

/// Where the helpers go: after the last top-level `#include` line of `head`, or at the start.
fn helpers_position(head: &str) -> usize {
    let mut position = 0;
    let mut offset = 0;
    for line in head.split_inclusive('\n') {
        offset += line.len();
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix('#') {
            if rest.trim_start().starts_with("include") {
                position = offset;
            }
        }
    }
    position
}

/// Every identifier-like word in `text` (in code, comments and strings alike: avoiding a few
/// more names than necessary costs nothing).
fn identifiers(text: &str) -> Vec<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut word = String::new();
    let mut in_number = false;
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' {
            if word.is_empty() && c.is_ascii_digit() {
                in_number = true;
            }
            word.push(c);
        } else {
            if !word.is_empty() && !in_number {
                out.insert(std::mem::take(&mut word));
            }
            word.clear();
            in_number = false;
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_skip_numbers() {
        assert_eq!(
            identifiers("for (i = 0x1f; i < N2; i++) A_1[i] = 2e5;"),
            vec!["A_1", "N2", "for", "i"]
        );
    }

    #[test]
    fn helpers_go_after_the_last_include() {
        let head = "/* c */\n#include <a.h>\n# include \"b.h\"\nint x;\n";
        assert_eq!(&head[helpers_position(head)..], "int x;\n");
        assert_eq!(helpers_position("int x;\n"), 0);
    }
}
