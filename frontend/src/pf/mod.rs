//! The `.pf` kernel language: a Tensor-Comprehensions-like notation for tensor kernels, parsed
//! into a [`polyhedral::Program`] by [`parse_kernel`].
//!
//! # A first kernel
//!
//! ```text
//! // line comments and /* block comments */
//! kernel gemm_bias_relu<M = 512, N = 512, K = 512>(A: f16[M, K], B: f16[K, N], bias: f32[N])
//!     -> (C: f32[M, N]) {
//!     T(i, j) +=! A(i, k) * B(k, j);        // reduction over k, initialised to 0
//!     C(i, j) = max(T(i, j) + bias(j), 0.0);
//! }
//! ```
//!
//! A file holds scalar functions (`fn`) and exactly one `kernel`.
//!
//! # Sizes
//!
//! `<M = 512, N>` declares compile-time sizes with optional defaults. `--size M=1024` (and
//! `-D M=1024`) override them; a `--size` naming no size of the kernel is an error, and a size
//! without a default must be given. Sizes are `i32` values inside expressions and may appear in
//! shapes, subscripts, ranges and loop bounds.
//!
//! # Tensors
//!
//! The parameters before `->` are inputs, the ones after are outputs: `name: type[extents]`
//! with element type `f16`, `f32`, `f64` or `i32`, and extents affine in the sizes
//! (`f32[H + 2, W + 2]`). Without brackets a tensor is a scalar (`alpha: f32`), read as `alpha`.
//! Inputs cannot be written. An output whose initial contents the kernel may read (it is read,
//! or accumulated into with `+=`, before any statement wrote it) is in-out; every output must be
//! written. Any other tensor that a statement assigns is a temporary: its element type is that of
//! the right-hand side (`f32` for a `+=!`/`*=!` over `f16` values, as the accelerator's Cube
//! accumulates), and its shape covers the ranges of its left-hand side's subscripts in the
//! statement that first assigns it. A temporary must be assigned before it is read.
//!
//! # Statements
//!
//! `LHS(i, j, …) op expression where …;` with `op` one of
//! - `=`: assignment; every index on the right must also appear on the left;
//! - `+=`, `-=`, `*=`, `max=`, `min=`: accumulate into the existing values;
//! - `+=!`, `*=!`, `max=!`, `min=!`: reduction: first set every element of the left-hand side to
//!   the operator's identity (0, 1, -inf, +inf; for `i32` its minimum and maximum), then
//!   accumulate.
//!
//! Indices are the names in subscripts that are not sizes or loop indices. Those on the right but
//! not on the left are reduction indices. A statement's iterators are the enclosing `for` loops'
//! indices, then its left-hand side's indices in order, then the others in order of first
//! appearance. Every statement is its own loop nest, executed in program order, except that
//! `for t in lo:hi { … }` (nestable) runs a sequence of statements inside one shared loop, as a
//! time loop of a stencil does; `t` can be used in subscripts, ranges and expressions.
//!
//! # Ranges
//!
//! An index ranges over the intersection of the extents of every tensor dimension it subscripts
//! as a bare name: in `A(i, k)` with `A: f32[M, K]`, `0 <= i < M` and `0 <= k < K`. An index
//! that subscripts no dimension bare gets its range from the affine subscripts it appears in, as
//! Tensor Comprehensions does: the largest range for which each such access stays in bounds
//! whatever values the subscript's other indices take in theirs (`y` in `I(y + ky)` with
//! `0 <= ky < KH` and `I`'s extent `H + KH - 1`: `0 <= y < H`; see `infer.rs`); such subscripts
//! never narrow the range of an index used bare. On the left-hand side, a declared output's shape must
//! agree with the range inferred from the right-hand side. `where` overrides and adds:
//! `where i in 1:N-1, j in 0:i+1` gives half-open ranges (affine in sizes, loop indices and
//! other indices, without cycles), and `where i <= j` (any affine comparison, `&&` allowed) adds
//! conditions. An index whose range cannot be inferred is an error; so is an access that is out of
//! bounds at some point of the statement's domain for the given sizes.
//!
//! # Expressions
//!
//! `+ - * / %`, comparisons `< <= > >= == !=`, `&& || !`, `c ? a : b` and `select(c, a, b)`,
//! `min(a, b)`, `max(a, b)`, the math functions `sqrt rsqrt exp log pow abs tanh sin cos floor
//! ceil`, casts `f16(e) f32(e) f64(e) i32(e)`, calls of functions defined above the kernel,
//! literals (`2`, `0.5`, `1e-5`, `true`, `false`), indices and sizes (as `i32`), and tensor reads
//! with affine subscripts (`A(i + 1, 2 * j)`).
//!
//! Typing: numbers promote to the wider operand type along `i32 < f16 < f32 < f64`; unsuffixed
//! literals take the type of the other operand (a float literal never becomes `i32`: cast the
//! other side), or `i32`/`f32` when nothing decides; assigning to a tensor converts to its element
//! type; accumulating into a wider float type (`f32 += f16 * f16`) computes the right-hand side in
//! the wider type. `bool` values come only from comparisons and logical operators and are never
//! stored in tensors.
//!
//! # Functions
//!
//! ```text
//! fn escape(cr: f32, ci: f32, limit: i32) -> i32 {
//!     var zr = 0.0; var zi = 0.0; var n = 0;      // var: mutable; let: immutable
//!     while n < limit && zr * zr + zi * zi < 4.0 {
//!         let t = zr * zr - zi * zi + cr;
//!         zi = 2.0 * zr * zi + ci; zr = t; n += 1;
//!     }
//!     if n > 3 { return n; } else { return 0; }
//! }
//! ```
//!
//! Parameters and `let` bindings are immutable; `var x: f64 = 0.0;` gives a type explicitly
//! (otherwise the initialiser's: `i32` for integer literals, `f32` for float literals).
//! Assignments (`=`, `+=`, `-=`, `*=`, `/=`), arguments and returns accept the same type or a
//! wider number. Statements are `var`, `let`, assignment, `if`/`else if`/`else`, `while` and
//! `return`; every path must return. A function may call only functions defined above it.
//!
//! # Errors
//!
//! Every problem is reported as one located [`Error`] with a one-line hint; no input makes the
//! front end panic.

mod affine;
mod ast;
mod function;
mod infer;
mod lexer;
mod lower;
mod parser;
pub(crate) mod ranges;
mod types;

#[cfg(test)]
mod tests;

use polyhedral::program::Span;
use polyhedral::Program;

use crate::diagnostic::{Diagnostic, Error, SourceFile};
use crate::Options;

/// Parses and lowers the one kernel of a `.pf` file.
pub fn parse_kernel(file: &SourceFile, options: &Options) -> Result<Program, Error> {
    parse_kernel_with_notes(file, options).map(|(p, _)| p)
}

/// [`parse_kernel`], with notes on what was inferred (index ranges), one line each.
pub fn parse_kernel_with_notes(
    file: &SourceFile,
    options: &Options,
) -> Result<(Program, Vec<String>), Error> {
    lower_file(&file.text, options).map_err(|d| Error::new(file, d))
}

fn lower_file(text: &str, options: &Options) -> Result<(Program, Vec<String>), Diagnostic> {
    let tokens = lexer::lex(text)?;
    let ast = parser::parse_file(&tokens)?;
    let kernel = match ast.kernels.as_slice() {
        [k] => k,
        [] => {
            return Err(Diagnostic::new(
                Span::new(text.len(), text.len()),
                "no kernel in this file",
            )
            .with_hint("add `kernel name<sizes>(inputs) -> (outputs) { … }`"))
        }
        [_, second, ..] => {
            return Err(
                Diagnostic::new(second.name.span, "a file holds exactly one kernel")
                    .with_hint("move the second kernel into its own file"),
            )
        }
    };
    let mut table = function::FunctionTable::default();
    let kernel_start = kernel.name.span.start;
    let visible = ast
        .functions
        .iter()
        .filter(|f| f.name.span.start < kernel_start)
        .count();
    for f in &ast.functions {
        function::lower_function(&mut table, &ast.functions, f)?;
    }
    let (program, notes) = lower::lower_kernel(kernel, &table, visible, &ast.functions, options)?;
    if let Err(e) = program.verify() {
        return Err(Diagnostic::new(
            kernel.name.span,
            format!("internal error: the lowered kernel is invalid: {e}"),
        )
        .with_hint("this is a bug in polyfuse; please report it with this kernel"));
    }
    Ok((program, notes))
}
