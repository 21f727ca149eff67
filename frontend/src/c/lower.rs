//! Lowering a parsed kernel to the Program IR: affine domains, quasi-affine accesses, typed
//! bodies, array roles and the original 2d+1 schedule.
//!
//! Names in the SCoP resolve, in this order, to: an enclosing loop's iterator; an iterator
//! after its loop (below); a size (a size
//! macro the preprocessor kept as a name, a `--size` name, an `int` kernel parameter whose
//! upper-cased name is a size, as PolyBench pairs `ni` with `NI`, or an `int` scalar parameter
//! or local that the SCoP never writes and uses in a loop bound, a condition or a subscript:
//! `int n = 1000;` before the SCoP, its value from `--size n=…`, `-D`, or its initializer); a
//! kernel parameter or local declared before the SCoP (an array, or a 0-d array for a scalar);
//! a name the file does not declare (an array or scalar of double, or a size, see
//! [`super::implicit`]). Sizes become [`Param`]s in order of first use, keeping their macro
//! names; `--size` overrides their values.
//!
//! Loops: `for (i = lb; cond; step)` with a constant step. A loop with a stride `s` other than
//! `±1` runs a fresh iterator `i' >= 0` with C's `i` being `lb + s·i'` (its start must be one
//! affine value). A loop counting up keeps `i`
//! as its iterator (`lb <= i`, plus the condition). A loop counting down is normalised to a
//! fresh iterator counting up that keeps the C name: C's `i` is `lb - i'` (or `-i'` when `lb`
//! is a `min`), substituted everywhere `i` appears, so domains stay increasing and the
//! original schedule stays the textual order. Bounds may be `min`/`max` (functions, macros,
//! or `a < b ? a : b`), each becoming several constraints; a bound that would need a
//! disjunction (`i < max(a, b)`) is rejected.
//!
//! Bounds, conditions and subscripts may divide by constants: C's `/` and `%` where the
//! dividend keeps one sign at every point of the enclosing loops (for every non-negative size;
//! elsewhere a located error, C's truncation being no floor division there), and `floord` /
//! `ceild` ([`super::quasi`]). Subscripts keep them as the statement's division variables;
//! domains get them written out (`j <= i / 2` is `2j <= i`), and a condition that cannot be
//! written without one (`i % 2 == 0`) is refused.
//!
//! After its loop, in the code that follows it in its block, an iterator holds the value that
//! ended the loop: its last value plus the step where the loop runs, its start where it does
//! not ([`Lowerer::exit_of`]). Where both cases occur and the values differ, each statement
//! or loop that reads it is lowered once per case, with the case's conditions (on sizes and
//! outer iterators) added to its domain. An exit value that is not affine (a bound that is a
//! min of several) is a located error where it is read.
//!
//! Bodies follow C's usual arithmetic conversions: operands are promoted to the wider of
//! `int < float < double` with explicit casts, and the value assigned is converted to the
//! element type. `x op= e` reads `x` first, so it is the statement's first read.
//!
//! Roles: a kernel parameter never written is an input; one written is in-out when the SCoP
//! also reads it, output otherwise; locals are temporaries.
//!
//! A scalar local the SCoP uses that is initialized where it is declared (`double eps = 0.1;`)
//! gets its initializer as an assignment before the SCoP's first statement, as C runs it.
//! `char` and `short` data is held as `int`, which is exact for reading it; stores to it are
//! refused, since C would truncate them.

use std::collections::{HashMap, HashSet};

use polyhedral::program::{
    Access, AffineExpr, Array, ArrayId, ArrayRole, BinaryOp, Constraint, ConstraintKind,
    Expr as IrExpr, ExprArena, ExprId, Literal, MathFn, Param, ParamId, Program, Reduction,
    ReductionOp, ScalarType, SourceKind, Span, Statement, UnaryOp, Var,
};

use super::ast::{BinOp, CType, Decl, Expr, ExprKind, Kernel, Stmt, StmtKind, UnOp};
use super::implicit::{infer_extents, undeclared};
use super::preprocess::Preprocessed;
use super::quasi::{small, Divisions};
use super::{CError, Loc};
use crate::Options;

const AFFINE_HINT: &str =
    "bounds, conditions and subscripts must be affine in loop iterators and sizes, e.g. A[i + 1][2 * j]";
/// Most pieces a `min` / `max` bound may have.
const MAX_PIECES: usize = 64;
const BOUNDS_HINT: &str =
    "the loops reach past the array: check their bounds against the array's extents and the sizes";
const SIZE_HINT: &str = "define it with -D NAME=VALUE, --size NAME=VALUE, or #define in the file";

/// The Program of `kernel`, with notes on what was inferred (undeclared data, extents).
pub(crate) fn lower(
    kernel: &Kernel,
    pp: &Preprocessed,
    options: &Options,
) -> Result<(Program, Vec<String>), CError> {
    let mut l = Lowerer {
        pp,
        options,
        params: Vec::new(),
        size_names: Vec::new(),
        in_statements: false,
        decls: HashMap::new(),
        iterator_names: HashSet::new(),
        int_sizes: HashMap::new(),
        arrays: Vec::new(),
        array_of: HashMap::new(),
        statements: Vec::new(),
        loops: Vec::new(),
        domain: Vec::new(),
        counters: vec![0],
        positions: Vec::new(),
        divisions: Divisions::default(),
        exits: Vec::new(),
        selected: Vec::new(),
        implicit_sizes: HashSet::new(),
    };
    for s in &kernel.body {
        collect_iterators(s, &mut l.iterator_names);
    }
    let mut body_used = HashSet::new();
    for s in &kernel.body {
        collect_names_stmt(s, &mut body_used);
    }
    l.int_sizes = int_sizes(kernel);
    let inits = initializers(kernel, &body_used, &l.int_sizes)?;
    let mut used = body_used;
    for s in &inits {
        collect_names_stmt(s, &mut used);
    }
    // Locals shadow parameters, which shadow variables at file scope; file-scope arrays are
    // the caller's data as parameters are.
    let outer = kernel.globals.len();
    for (k, d) in kernel.globals.iter().enumerate() {
        l.decls.insert(d.name.clone(), (d, true, k));
    }
    for (k, d) in kernel.params.iter().enumerate() {
        l.decls.insert(d.name.clone(), (d, true, outer + k));
    }
    for (k, d) in kernel.locals.iter().enumerate() {
        l.decls
            .insert(d.name.clone(), (d, false, outer + kernel.params.len() + k));
    }
    // Arrays in declaration order, so the Program lists them as the C function does.
    let mut order: Vec<(&Decl, bool, usize)> = l.decls.values().copied().collect();
    order.sort_by_key(|&(_, _, k)| k);
    for (d, is_param, _) in order {
        let data = !l.iterator_names.contains(&d.name)
            && l.size_alias(&d.name).is_none()
            && !l.int_sizes.contains_key(&d.name);
        if used.contains(d.name.as_str()) && data {
            l.declare_array(d, is_param)?;
        }
    }
    // Names the file does not declare: arrays and scalars of double, or sizes.
    let known = |e: &Expr| {
        let ExprKind::Name { name, size } = &e.kind else {
            return true;
        };
        size.is_some()
            || l.decls.contains_key(name.as_str())
            || l.iterator_names.contains(name)
            || options.sizes.iter().any(|(n, _)| n == name)
            || pp.size_value(name).is_some()
    };
    let (implicit, sizes) = undeclared(&kernel.body, &known)?;
    let mut notes = Vec::new();
    l.implicit_sizes = sizes.into_iter().collect();
    let mut inferred = Vec::new();
    for u in &implicit {
        let id = ArrayId(l.arrays.len() as u32);
        l.arrays.push((
            Array {
                name: u.name.clone(),
                elem: ScalarType::F64,
                // The extents are known once the accesses are (below).
                shape: vec![AffineExpr::constant(1); u.dims],
                role: ArrayRole::Input,
                span: u.loc.span,
            },
            true,
        ));
        l.array_of.insert(u.name.clone(), id);
        let what = if u.dims == 0 { "a scalar" } else { "an array" };
        notes.push(format!(
            "{}: not declared, taken as {what} of double, as clan assumes",
            u.name
        ));
        if u.dims > 0 {
            inferred.push((id, u, notes.len()));
        }
    }
    for (name, _) in &options.extents {
        if !inferred.iter().any(|(_, u, _)| u.name == *name) {
            return Err(CError::new(
                pragma_line(kernel.scop, pp),
                format!("--extent {name}: the SCoP has no undeclared array `{name}`"),
                "--extent gives the extents of arrays the file does not declare",
            ));
        }
    }
    l.in_statements = true;
    for s in inits.iter().chain(&kernel.body) {
        l.statement(s)?;
    }
    let mut written = vec![false; l.arrays.len()];
    let mut read = vec![false; l.arrays.len()];
    for s in &l.statements {
        written[s.write.array.index()] = true;
        for r in &s.reads {
            read[r.array.index()] = true;
        }
    }
    let arrays: Vec<Array> = l
        .arrays
        .into_iter()
        .enumerate()
        .map(|(k, (mut a, is_param))| {
            a.role = match (is_param, written[k], read[k]) {
                (false, _, _) => ArrayRole::Temporary,
                (true, false, _) => ArrayRole::Input,
                (true, true, true) => ArrayRole::InOut,
                (true, true, false) => ArrayRole::Output,
            };
            a
        })
        .collect();
    let name = if kernel.name.is_empty() {
        fragment_name(pp)
    } else {
        kernel
            .name
            .strip_prefix("kernel_")
            .filter(|n| !n.is_empty())
            .unwrap_or(&kernel.name)
            .to_string()
    };
    let mut program = Program {
        name,
        source: SourceKind::CScop {
            scop: kernel.scop.span,
            size_names: l
                .params
                .iter()
                .zip(l.size_names)
                .map(|(p, spelled)| spelled.unwrap_or_else(|| p.name.clone()))
                .collect(),
            arrays: arrays.len(),
        },
        params: l.params,
        arrays,
        functions: Vec::new(),
        statements: l.statements,
    };
    // Each array's extents are noted right after what it was taken as.
    for (k, (id, u, at)) in inferred.into_iter().enumerate() {
        // The notes of the arrays before this one are in already.
        let at = at + k;
        let given = options.extents.iter().rev().find(|(n, _)| *n == u.name);
        let extents = match given {
            Some((_, e)) if e.len() != u.dims => {
                return Err(CError::new(
                    u.loc,
                    format!(
                        "--extent {} gives {} extents, but `{}` is used with {} subscripts",
                        u.name,
                        e.len(),
                        u.name,
                        u.dims
                    ),
                    "give one extent per subscript, e.g. --extent A=100x200",
                ))
            }
            Some((_, e)) => {
                notes.insert(at, format!("{}: extents from --extent: {e:?}", u.name));
                e.clone()
            }
            None => {
                let e = infer_extents(&program, id, u.dims)?;
                let note = format!("{}: extents inferred from its accesses: {e:?}", u.name);
                notes.insert(at, note);
                e
            }
        };
        program.arrays[id.index()].shape = extents.into_iter().map(AffineExpr::constant).collect();
    }
    for s in &program.statements {
        crate::pf::ranges::check_bounds(&program, s, BOUNDS_HINT).map_err(|d| {
            CError::new(
                Loc {
                    file: 0,
                    span: d.span,
                },
                d.message,
                d.hint.unwrap_or_default(),
            )
        })?;
    }
    Ok((program, notes))
}

/// The first line of the SCoP's region (its `#pragma scop`).
fn pragma_line(scop: Loc, pp: &Preprocessed) -> Loc {
    let start = scop.span.start as usize;
    let end = pp
        .files
        .get(scop.file as usize)
        .and_then(|f| f.text.get(start..))
        .and_then(|t| t.find('\n'))
        .map_or(scop.span.end as usize, |n| start + n);
    Loc {
        file: scop.file,
        span: Span::new(start, end.min(scop.span.end as usize)),
    }
}

/// The name of a SCoP at file scope: its file's stem as an identifier (`scop` when nothing of
/// it is left).
fn fragment_name(pp: &Preprocessed) -> String {
    let stem = pp
        .files
        .first()
        .and_then(|f| f.path.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut name: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert_str(0, "scop_");
    }
    name
}

/// The initializers of the scalar locals the SCoP uses, as assignments that run before its
/// first statement: C stores them before the SCoP starts, so the SCoP sees the values.
fn initializers(
    kernel: &Kernel,
    used: &HashSet<&str>,
    sizes: &HashMap<String, Option<i64>>,
) -> Result<Vec<Stmt>, CError> {
    let mut out = Vec::new();
    for d in &kernel.locals {
        let Some(init) = &d.init else { continue };
        if !used.contains(d.name.as_str()) || sizes.contains_key(&d.name) {
            continue;
        }
        let value =
            match init {
                Ok(e) if d.dims.is_empty() && !d.pointer => e.clone(),
                Ok(e) => {
                    return Err(CError::new(
                        e.loc,
                        format!("initializer of array `{}` is not supported", d.name),
                        "set the array's elements in the SCoP, or pass it as a parameter",
                    ))
                }
                Err(loc) => return Err(CError::new(
                    *loc,
                    format!("initializer of `{}` is not supported", d.name),
                    "initialize a scalar the SCoP uses with one expression, e.g. double eps = 0.1;",
                )),
            };
        let target = Expr {
            kind: ExprKind::Name {
                name: d.name.clone(),
                size: None,
            },
            loc: d.loc,
        };
        out.push(Stmt {
            loc: d.loc,
            kind: StmtKind::Expr(Expr {
                kind: ExprKind::Assign(None, Box::new(target), Box::new(value)),
                loc: d.loc,
            }),
        });
    }
    Ok(out)
}

/// The `int` scalar parameters and locals that are sizes (see the module docs), with the
/// value of a local's constant initializer.
fn int_sizes(kernel: &Kernel) -> HashMap<String, Option<i64>> {
    let mut affine = HashSet::new();
    let mut written = HashSet::new();
    for s in &kernel.body {
        collect_affine_names(s, &mut affine);
        collect_written(s, &mut written);
    }
    kernel
        .globals
        .iter()
        .chain(&kernel.params)
        .chain(&kernel.locals)
        .filter(|d| d.ty == CType::Int && d.dims.is_empty() && !d.pointer && d.narrow.is_none())
        .filter(|d| affine.contains(d.name.as_str()) && !written.contains(d.name.as_str()))
        .map(|d| {
            let value = match &d.init {
                Some(Ok(e)) => constant(e),
                _ => None,
            };
            (d.name.clone(), value)
        })
        .collect()
}

/// The value of an integer constant expression of literals and size macros.
fn constant(e: &Expr) -> Option<i64> {
    match &e.kind {
        ExprKind::Int(v) => Some(*v),
        ExprKind::Name { size, .. } => *size,
        ExprKind::Unary(UnOp::Neg, a) => constant(a)?.checked_neg(),
        ExprKind::Binary(op, a, b) => {
            let (a, b) = (constant(a)?, constant(b)?);
            match op {
                BinOp::Add => a.checked_add(b),
                BinOp::Sub => a.checked_sub(b),
                BinOp::Mul => a.checked_mul(b),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The names used in loop headers, conditions and subscripts.
fn collect_affine_names<'a>(s: &'a Stmt, out: &mut HashSet<&'a str>) {
    walk_names(s, out, collect_subscript_names);
}

fn collect_subscript_names<'a>(e: &'a Expr, out: &mut HashSet<&'a str>) {
    match &e.kind {
        ExprKind::Index(a, i) => {
            collect_names(i, out);
            collect_subscript_names(a, out);
        }
        ExprKind::Binary(_, a, b) | ExprKind::Assign(_, a, b) => {
            collect_subscript_names(a, out);
            collect_subscript_names(b, out);
        }
        ExprKind::Call { args, .. } => args.iter().for_each(|a| collect_subscript_names(a, out)),
        ExprKind::Unary(_, a) | ExprKind::Cast(_, a) => collect_subscript_names(a, out),
        ExprKind::Cond(c, a, b) => {
            collect_subscript_names(c, out);
            collect_subscript_names(a, out);
            collect_subscript_names(b, out);
        }
        _ => {}
    }
}

/// The names the SCoP assigns (the root of every assignment's target).
fn collect_written<'a>(s: &'a Stmt, out: &mut HashSet<&'a str>) {
    match &s.kind {
        StmtKind::For { body, .. } => collect_written(body, out),
        StmtKind::If {
            then, otherwise, ..
        } => {
            collect_written(then, out);
            if let Some(o) = otherwise {
                collect_written(o, out);
            }
        }
        StmtKind::Block(b) => b.iter().for_each(|s| collect_written(s, out)),
        StmtKind::Expr(e) => written_root(e, out),
        StmtKind::Empty => {}
    }
}

fn written_root<'a>(e: &'a Expr, out: &mut HashSet<&'a str>) {
    match &e.kind {
        ExprKind::Assign(_, target, value) => {
            let mut root = &**target;
            while let ExprKind::Index(base, _) = &root.kind {
                root = base;
            }
            if let ExprKind::Name { name, .. } = &root.kind {
                out.insert(name);
            }
            written_root(value, out);
        }
        ExprKind::Step { target, .. } => {
            let mut root = &**target;
            while let ExprKind::Index(base, _) = &root.kind {
                root = base;
            }
            if let ExprKind::Name { name, .. } = &root.kind {
                out.insert(name);
            }
        }
        _ => {}
    }
}

fn collect_iterators(s: &Stmt, out: &mut HashSet<String>) {
    match &s.kind {
        StmtKind::For { init, body, .. } => {
            if let Some(Expr {
                kind: ExprKind::Assign(None, target, _),
                ..
            }) = init
            {
                if let ExprKind::Name { name, .. } = &target.kind {
                    out.insert(name.clone());
                }
            }
            collect_iterators(body, out);
        }
        StmtKind::If {
            then, otherwise, ..
        } => {
            collect_iterators(then, out);
            if let Some(o) = otherwise {
                collect_iterators(o, out);
            }
        }
        StmtKind::Block(b) => b.iter().for_each(|s| collect_iterators(s, out)),
        StmtKind::Expr(_) | StmtKind::Empty => {}
    }
}

fn collect_names_stmt<'a>(s: &'a Stmt, out: &mut HashSet<&'a str>) {
    walk_names(s, out, collect_names);
}

/// The names of the loop headers and conditions under `s`, and those `body` collects from its
/// expression statements.
fn walk_names<'a>(
    s: &'a Stmt,
    out: &mut HashSet<&'a str>,
    body: fn(&'a Expr, &mut HashSet<&'a str>),
) {
    match &s.kind {
        StmtKind::For {
            init,
            cond,
            step,
            body: inner,
        } => {
            for e in [init, cond, step].into_iter().flatten() {
                collect_names(e, out);
            }
            walk_names(inner, out, body);
        }
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => {
            collect_names(cond, out);
            walk_names(then, out, body);
            if let Some(o) = otherwise {
                walk_names(o, out, body);
            }
        }
        StmtKind::Block(b) => b.iter().for_each(|s| walk_names(s, out, body)),
        StmtKind::Expr(e) => body(e, out),
        StmtKind::Empty => {}
    }
}

fn collect_names<'a>(e: &'a Expr, out: &mut HashSet<&'a str>) {
    match &e.kind {
        ExprKind::Name { name, .. } => {
            out.insert(name);
        }
        ExprKind::Int(_) | ExprKind::Float { .. } => {}
        ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) | ExprKind::Assign(_, a, b) => {
            collect_names(a, out);
            collect_names(b, out);
        }
        ExprKind::Call { args, .. } => args.iter().for_each(|a| collect_names(a, out)),
        ExprKind::Unary(_, a) | ExprKind::Cast(_, a) | ExprKind::Step { target: a, .. } => {
            collect_names(a, out)
        }
        ExprKind::Cond(a, b, c) => {
            collect_names(a, out);
            collect_names(b, out);
            collect_names(c, out);
        }
    }
}

fn scalar_type(ty: CType) -> ScalarType {
    match ty {
        CType::Int => ScalarType::I32,
        CType::Float => ScalarType::F32,
        CType::Double => ScalarType::F64,
    }
}

/// An affine value, or the `min` / `max` of several (one piece is plain affine).
#[derive(Clone, Debug)]
enum Bound {
    Min(Vec<AffineExpr>),
    Max(Vec<AffineExpr>),
}

impl Bound {
    fn affine(e: AffineExpr) -> Bound {
        Bound::Min(vec![e])
    }

    fn single(&self) -> Option<&AffineExpr> {
        match self {
            Bound::Min(v) | Bound::Max(v) if v.len() == 1 => Some(&v[0]),
            _ => None,
        }
    }

    /// The pieces if this is a min (or plain affine).
    fn as_min(&self) -> Option<&[AffineExpr]> {
        match self {
            Bound::Min(v) => Some(v),
            Bound::Max(v) if v.len() == 1 => Some(v),
            Bound::Max(_) => None,
        }
    }

    fn as_max(&self) -> Option<&[AffineExpr]> {
        match self {
            Bound::Max(v) => Some(v),
            Bound::Min(v) if v.len() == 1 => Some(v),
            Bound::Min(_) => None,
        }
    }

    fn negate(self) -> Bound {
        match self {
            Bound::Min(v) => Bound::Max(v.iter().map(|e| e.scale(-1)).collect()),
            Bound::Max(v) => Bound::Min(v.iter().map(|e| e.scale(-1)).collect()),
        }
    }

    fn scale(self, k: i64) -> Bound {
        if k < 0 {
            return self.negate().scale(-k);
        }
        match self {
            Bound::Min(v) => Bound::Min(v.iter().map(|e| e.scale(k)).collect()),
            Bound::Max(v) => Bound::Max(v.iter().map(|e| e.scale(k)).collect()),
        }
    }
}

struct LoopCtx {
    name: String,
    /// C's value of the loop variable, affine in the statement iterators.
    value: AffineExpr,
}

/// What a loop iterator holds after its loop, in the code that follows the loop at its
/// level (see [`Lowerer::exit_of`]).
#[derive(Clone, Debug)]
enum Exit {
    /// Its value on each piece of the enclosing domain that some instance may reach (a
    /// single piece has no conditions: they hold wherever the code runs).
    Known(Vec<ExitPiece>),
    /// Not an affine value, and why.
    Unknown(String),
}

#[derive(Clone, Debug)]
struct ExitPiece {
    /// Affine constraints on the outer iterators and the sizes.
    conditions: Vec<Constraint>,
    value: AffineExpr,
}

struct Lowerer<'a> {
    pp: &'a Preprocessed,
    options: &'a Options,
    params: Vec<Param>,
    /// Per parameter, the name the SCoP's statements first used for it.
    size_names: Vec<Option<String>>,
    /// Whether the SCoP's statements are being lowered (rather than declarations).
    in_statements: bool,
    /// Declared names: the declaration, whether it is a kernel parameter, and its order.
    decls: HashMap<String, (&'a Decl, bool, usize)>,
    iterator_names: HashSet<String>,
    /// The `int` scalars that are sizes, with a local's initial value.
    int_sizes: HashMap<String, Option<i64>>,
    /// Arrays and whether each is a kernel parameter.
    arrays: Vec<(Array, bool)>,
    array_of: HashMap<String, ArrayId>,
    statements: Vec<Statement>,
    loops: Vec<LoopCtx>,
    domain: Vec<Constraint>,
    /// Next textual position at each depth (`loops.len() + 1` entries).
    counters: Vec<usize>,
    /// Positions of the enclosing loops.
    positions: Vec<usize>,
    /// The divisions of bounds, conditions and subscripts (see [`super::quasi`]).
    divisions: Divisions,
    /// Iterators' values after their loops, visible to the code that follows each loop in
    /// its block (and what that code holds); innermost last.
    exits: Vec<(String, Exit)>,
    /// For exits of several pieces, the piece the code being lowered is for: (index into
    /// `exits`, piece).
    selected: Vec<(usize, usize)>,
    /// Undeclared names that are sizes (see [`super::implicit`]).
    implicit_sizes: HashSet<String>,
}

impl<'a> Lowerer<'a> {
    fn declare_array(&mut self, d: &Decl, is_param: bool) -> Result<(), CError> {
        if let Some(ty) = d.index_only {
            return Err(CError::new(
                d.loc,
                format!("`{ty}` data `{}` is not supported yet", d.name),
                format!(
                    "polyfuse computes integer data as 32-bit signed int, whose arithmetic \
                     differs from `{ty}`'s; declare it as int (`{ty}` sizes and iterators are fine)"
                ),
            ));
        }
        if d.pointer {
            return Err(CError::new(
                d.loc,
                format!("pointer `{}`: the SCoP needs the array's extents", d.name),
                "declare it as an array, e.g. double A[N][M] or DATA_TYPE POLYBENCH_2D(A,N,M,n,m)",
            ));
        }
        let mut shape = Vec::new();
        for dim in &d.dims {
            let Some(e) = dim else {
                return Err(CError::new(
                    d.loc,
                    format!("array `{}` has an extent left out", d.name),
                    "give every extent, e.g. double A[N][M]",
                ));
            };
            let b = self.bound(e, "array extent")?;
            let Some(a) = b.single().cloned() else {
                return Err(CError::new(
                    e.loc,
                    "an array extent cannot be a min or max",
                    "write the extent as a size expression",
                ));
            };
            shape.push(a);
        }
        let id = ArrayId(self.arrays.len() as u32);
        self.arrays.push((
            Array {
                name: d.name.clone(),
                elem: scalar_type(d.ty),
                shape,
                role: ArrayRole::Input,
                span: d.loc.span,
            },
            is_param,
        ));
        self.array_of.insert(d.name.clone(), id);
        Ok(())
    }

    /// The parameter for size `name`, created on first use.
    fn param(&mut self, name: &str, value: Option<i64>, loc: Loc) -> Result<ParamId, CError> {
        if let Some(k) = self.params.iter().position(|p| p.name == name) {
            return Ok(ParamId(k as u32));
        }
        let overridden = self
            .options
            .sizes
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|&(_, v)| v);
        let Some(value) = overridden.or(value).or_else(|| self.pp.size_value(name)) else {
            return Err(CError::new(
                loc,
                format!("undefined size `{name}`"),
                SIZE_HINT,
            ));
        };
        self.params.push(Param {
            name: name.to_string(),
            value,
        });
        self.size_names.push(None);
        Ok(ParamId(self.params.len() as u32 - 1))
    }

    /// The parameter for the `int` scalar `name` that is a size, its value `--size`'s, `-D`'s
    /// or its initializer's.
    fn int_size(&mut self, name: &str, init: Option<i64>, loc: Loc) -> Result<ParamId, CError> {
        let given =
            self.options.sizes.iter().any(|(n, _)| n == name) || self.pp.size_value(name).is_some();
        if init.is_none() && !given {
            let (d, _, _) = self.decls[name];
            return Err(CError::new(
                d.loc,
                format!("the size `{name}` has no value"),
                format!(
                    "`{name}` bounds the SCoP's loops: give it with --size {name}=VALUE, or \
                     initialize it with a constant"
                ),
            ));
        }
        self.param(name, init, loc)
    }

    /// Notes that the statements spell parameter `p` as `name`, unless spelled before.
    fn spelled(&mut self, p: ParamId, name: &str) {
        if self.in_statements && self.size_names[p.index()].is_none() {
            self.size_names[p.index()] = Some(name.to_string());
        }
    }

    /// The size an `int` kernel parameter stands for (`ni` → `NI`).
    fn size_alias(&self, name: &str) -> Option<String> {
        let (d, is_param, _) = self.decls.get(name)?;
        if !is_param || d.ty != CType::Int || !d.dims.is_empty() || d.pointer {
            return None;
        }
        let upper = name.to_uppercase();
        let known = self.pp.size_value(&upper).is_some()
            || self.options.sizes.iter().any(|(n, _)| *n == upper);
        (known && upper != name).then_some(upper)
    }

    /// What a name means in a bound or subscript, if it is affine: a loop value or a size.
    fn affine_name(
        &mut self,
        name: &str,
        size: Option<i64>,
        loc: Loc,
    ) -> Result<Option<AffineExpr>, CError> {
        if let Some(l) = self.loops.iter().rev().find(|l| l.name == name) {
            return Ok(Some(l.value.clone()));
        }
        if let Some(value) = self.exit_value(name, loc)? {
            return Ok(Some(value));
        }
        if self.iterator_names.contains(name) {
            return Err(CError::new(
                loc,
                format!("`{name}` is used outside a loop over it"),
                "a SCoP may use a loop iterator inside its loop, or after the loop in the same block \
                 (where it holds the value that ended the loop)",
            ));
        }
        if let Some(alias) = self.size_alias(name) {
            let p = self.param(&alias, None, loc)?;
            self.spelled(p, name);
            return Ok(Some(AffineExpr::var(Var::Param(p))));
        }
        if let Some(&value) = self.int_sizes.get(name) {
            let p = self.int_size(name, value, loc)?;
            self.spelled(p, name);
            return Ok(Some(AffineExpr::var(Var::Param(p))));
        }
        if self.decls.contains_key(name) {
            return Ok(None);
        }
        if size.is_some() || self.options.sizes.iter().any(|(n, _)| n == name) {
            let p = self.param(name, size, loc)?;
            self.spelled(p, name);
            return Ok(Some(AffineExpr::var(Var::Param(p))));
        }
        Err(CError::new(
            loc,
            format!("undefined size `{name}`"),
            SIZE_HINT,
        ))
    }

    /// The value iterator `name` holds after its loop, where the code being lowered follows
    /// one; an error where that value is not affine.
    fn exit_value(&self, name: &str, loc: Loc) -> Result<Option<AffineExpr>, CError> {
        let Some(e) = self.exits.iter().rposition(|(n, _)| n == name) else {
            return Ok(None);
        };
        match &self.exits[e].1 {
            Exit::Unknown(why) => Err(CError::new(
                loc,
                format!("the value of `{name}` after its loop is not affine: {why}"),
                "use the iterator after a loop whose start and bound are affine, or only inside its loop",
            )),
            Exit::Known(pieces) if pieces.len() == 1 => Ok(Some(pieces[0].value.clone())),
            Exit::Known(pieces) => {
                let chosen = self.selected.iter().rev().find(|(x, _)| *x == e);
                match chosen {
                    Some(&(_, k)) => Ok(Some(pieces[k].value.clone())),
                    None => Err(CError::new(
                        loc,
                        format!(
                            "the value of `{name}` after its loop depends on whether the loop ran"
                        ),
                        "use it in a statement of the block that follows the loop",
                    )),
                }
            }
        }
    }

    /// An exit of several pieces that `s`'s own expressions (a loop's header, a condition,
    /// an assignment; not what is nested inside) use and no enclosing fork has chosen a piece
    /// of: its index into `exits` and its pieces.
    fn unchosen_exit(&self, s: &Stmt) -> Option<(usize, Vec<ExitPiece>)> {
        let mut names = HashSet::new();
        let mut bound: Option<&str> = None;
        match &s.kind {
            StmtKind::For {
                init, cond, step, ..
            } => {
                match init.as_ref().map(|e| &e.kind) {
                    Some(ExprKind::Assign(None, target, lb)) => {
                        collect_names(lb, &mut names);
                        if let ExprKind::Name { name, .. } = &target.kind {
                            bound = Some(name);
                        }
                    }
                    _ => return None,
                }
                let mut header = HashSet::new();
                for e in [cond, step].into_iter().flatten() {
                    collect_names(e, &mut header);
                }
                names.extend(header.into_iter().filter(|n| Some(*n) != bound));
            }
            StmtKind::If { cond, .. } => collect_names(cond, &mut names),
            StmtKind::Expr(e) => collect_names(e, &mut names),
            StmtKind::Block(_) | StmtKind::Empty => return None,
        }
        names
            .into_iter()
            .filter(|n| !self.loops.iter().any(|l| l.name == *n))
            .filter_map(|n| self.exits.iter().rposition(|(x, _)| x == n))
            .filter(|&e| !self.selected.iter().any(|(x, _)| *x == e))
            .find_map(|e| match &self.exits[e].1 {
                Exit::Known(p) if p.len() > 1 => Some((e, p.clone())),
                _ => None,
            })
    }

    /// Lowers `s` once per piece of exit `e`, each time under that piece's conditions. A loop
    /// inside that ends leaves, after it, the value it leaves in each piece: the pieces of its
    /// exit under each piece's conditions.
    fn fork(&mut self, e: usize, pieces: &[ExitPiece], s: &Stmt) -> Result<(), CError> {
        let mark = self.exits.len();
        // Per name of a loop that ended: its pieces so far, or why it has no affine value.
        let mut ended: Vec<(String, Result<Vec<ExitPiece>, String>)> = Vec::new();
        for (k, piece) in pieces.iter().enumerate() {
            let at = self.domain.len();
            self.domain.extend(piece.conditions.iter().cloned());
            self.selected.push((e, k));
            let result = self.statement(s);
            self.selected.pop();
            self.domain.truncate(at);
            result?;
            let new: Vec<(String, Exit)> = self.exits.drain(mark..).collect();
            for (i, (n, exit)) in new.iter().enumerate() {
                // A later loop over the same iterator decides what it holds.
                if new[i + 1..].iter().any(|(m, _)| m == n) {
                    continue;
                }
                let slot = match ended.iter().position(|(m, _)| m == n) {
                    Some(x) => &mut ended[x].1,
                    None => {
                        ended.push((n.clone(), Ok(Vec::new())));
                        &mut ended.last_mut().expect("just pushed").1
                    }
                };
                match (exit, slot) {
                    (Exit::Known(ps), Ok(all)) => all.extend(ps.iter().map(|p| ExitPiece {
                        conditions: [&piece.conditions[..], &p.conditions[..]].concat(),
                        value: p.value.clone(),
                    })),
                    (Exit::Unknown(why), slot) => *slot = Err(why.clone()),
                    (Exit::Known(_), Err(_)) => {}
                }
            }
        }
        for (n, exit) in ended {
            let exit = match exit {
                Ok(pieces) => Exit::Known(pieces),
                Err(why) => Exit::Unknown(why),
            };
            self.exits.push((n, exit));
        }
        Ok(())
    }

    fn not_affine(&self, e: &Expr, what: &str) -> CError {
        CError::new(e.loc, format!("non-affine {what}"), AFFINE_HINT)
    }

    /// An affine expression with `min` / `max`, as loop bounds and conditions allow.
    /// Coefficients stay within `i32` and pieces are few, so no arithmetic on them overflows.
    fn bound(&mut self, e: &Expr, what: &str) -> Result<Bound, CError> {
        let b = self.bound_unchecked(e, what)?;
        let pieces = match &b {
            Bound::Min(v) | Bound::Max(v) => v,
        };
        let limit = i64::from(i32::MAX);
        let in_range = |a: &AffineExpr| {
            a.constant.abs() <= limit && a.terms().iter().all(|&(_, c)| c.abs() <= limit)
        };
        if pieces.len() > MAX_PIECES || !pieces.iter().all(in_range) {
            return Err(CError::new(
                e.loc,
                format!("{what} too large to handle"),
                "keep coefficients and constants within int range and min/max nesting small",
            ));
        }
        Ok(b)
    }

    fn bound_unchecked(&mut self, e: &Expr, what: &str) -> Result<Bound, CError> {
        match &e.kind {
            ExprKind::Int(v) => Ok(Bound::affine(AffineExpr::constant(*v))),
            ExprKind::Name { name, size } => match self.affine_name(name, *size, e.loc)? {
                Some(a) => Ok(Bound::affine(a)),
                None => Err(CError::new(
                    e.loc,
                    format!("non-affine {what}: `{name}` is data, not an iterator or size"),
                    AFFINE_HINT,
                )),
            },
            ExprKind::Unary(UnOp::Neg, a) => Ok(self.bound(a, what)?.negate()),
            ExprKind::Cast(CType::Int, a) => self.bound(a, what),
            ExprKind::Binary(op @ (BinOp::Add | BinOp::Sub), a, b) => {
                let x = self.bound(a, what)?;
                let mut y = self.bound(b, what)?;
                if *op == BinOp::Sub {
                    y = y.negate();
                }
                let sum = |xs: &[AffineExpr], ys: &[AffineExpr]| -> Vec<AffineExpr> {
                    xs.iter()
                        .flat_map(|p| ys.iter().map(move |q| p.add(q)))
                        .collect()
                };
                if let (Some(p), Some(q)) = (x.as_min(), y.as_min()) {
                    Ok(Bound::Min(sum(p, q)))
                } else if let (Some(p), Some(q)) = (x.as_max(), y.as_max()) {
                    Ok(Bound::Max(sum(p, q)))
                } else {
                    Err(CError::new(
                        e.loc,
                        format!("{what} mixing min and max is not supported yet"),
                        "split the loop or condition so each bound is a min or a max",
                    ))
                }
            }
            ExprKind::Binary(BinOp::Mul, a, b) => {
                let x = self.bound(a, what)?;
                let y = self.bound(b, what)?;
                let constant =
                    |b: &Bound| b.single().filter(|a| a.is_constant()).map(|a| a.constant);
                match (constant(&x), constant(&y)) {
                    (Some(k), _) => Ok(y.scale(k)),
                    (_, Some(k)) => Ok(x.scale(k)),
                    _ => Err(self.not_affine(e, what)),
                }
            }
            ExprKind::Binary(op @ (BinOp::Div | BinOp::Rem), a, b) => {
                let x = self.bound(a, what)?;
                let y = self.bound(b, what)?;
                let constant =
                    |b: &Bound| b.single().filter(|a| a.is_constant()).map(|a| a.constant);
                match (constant(&x), constant(&y)) {
                    (Some(p), Some(q)) if q != 0 => {
                        let v = if *op == BinOp::Div {
                            p.checked_div(q)
                        } else {
                            p.checked_rem(q)
                        };
                        v.map(|v| Bound::affine(AffineExpr::constant(v)))
                            .ok_or_else(|| self.not_affine(e, what))
                    }
                    (_, Some(0)) => Err(CError::new(
                        b.loc,
                        format!("division by zero in this {what}"),
                        "divide by a non-zero constant",
                    )),
                    (_, Some(q)) if *op == BinOp::Div => self.truncated_division(x, q, a, what),
                    (_, Some(q)) => {
                        let Some(p) = x.single().cloned() else {
                            return Err(CError::new(
                                e.loc,
                                format!("`%` of a min or max in this {what} is not supported"),
                                "take the remainder of an affine expression",
                            ));
                        };
                        // C's remainder has the dividend's sign: p - m·trunc(p / m).
                        let m = q.abs();
                        let quotient = self.truncated_quotient(&p, m, a, "%", what)?;
                        Ok(Bound::affine(p.sub(&quotient.scale(m))))
                    }
                    _ => Err(self.not_affine(e, what)),
                }
            }
            ExprKind::Call { name, args }
                if args.len() == 2 && matches!(name.as_str(), "floord" | "ceild") =>
            {
                let x = self.bound(&args[0], what)?;
                let y = self.bound(&args[1], what)?;
                let Some(den) = y
                    .single()
                    .filter(|d| d.is_constant() && d.constant > 0)
                    .map(|d| d.constant)
                else {
                    return Err(CError::new(
                        args[1].loc,
                        format!("the divisor of `{name}` must be a positive constant"),
                        format!("write {name}(a, b) with b a positive integer constant"),
                    ));
                };
                // floor and ceil do not decrease: they keep a min a min and a max a max.
                let floor = name == "floord";
                let mut map = |v: &[AffineExpr]| -> Vec<AffineExpr> {
                    v.iter()
                        .map(|p| {
                            if floor {
                                self.divisions.floor(p, den)
                            } else {
                                self.divisions.ceil(p, den)
                            }
                        })
                        .collect()
                };
                Ok(match &x {
                    Bound::Min(v) => Bound::Min(map(v)),
                    Bound::Max(v) => Bound::Max(map(v)),
                })
            }
            ExprKind::Call { name, args }
                if args.len() == 2 && matches!(name.as_str(), "min" | "max" | "MIN" | "MAX") =>
            {
                let is_min = name.eq_ignore_ascii_case("min");
                self.min_max(is_min, &args[0], &args[1], e, what)
            }
            ExprKind::Cond(c, a, b) => {
                // `x < y ? x : y` is min(x, y); `x > y ? x : y` is max(x, y).
                if let ExprKind::Binary(op, l, r) = &c.kind {
                    let lt = matches!(op, BinOp::Lt | BinOp::Le);
                    let gt = matches!(op, BinOp::Gt | BinOp::Ge);
                    if lt || gt {
                        if l.same_as(a) && r.same_as(b) {
                            return self.min_max(lt, l, r, e, what);
                        }
                        if l.same_as(b) && r.same_as(a) {
                            return self.min_max(gt, l, r, e, what);
                        }
                    }
                }
                Err(self.not_affine(e, what))
            }
            _ => Err(self.not_affine(e, what)),
        }
    }

    /// C's `x / q` for a non-zero constant `q`: `trunc(x / |q|)`, negated when `q < 0`.
    /// Truncation does not decrease, so a min stays a min (a max a max).
    fn truncated_division(
        &mut self,
        x: Bound,
        q: i64,
        dividend: &Expr,
        what: &str,
    ) -> Result<Bound, CError> {
        let m = q.abs();
        let pieces = match &x {
            Bound::Min(v) | Bound::Max(v) => v.clone(),
        };
        let mut out = Vec::with_capacity(pieces.len());
        for p in &pieces {
            out.push(self.truncated_quotient(p, m, dividend, "/", what)?);
        }
        let b = match x {
            Bound::Min(_) => Bound::Min(out),
            Bound::Max(_) => Bound::Max(out),
        };
        Ok(if q < 0 { b.negate() } else { b })
    }

    /// `trunc(p / m)` for `m > 0`: `floor(p / m)` where `p` is non-negative at every point of
    /// the enclosing domain (every size non-negative), `-floor(-p / m)` where it is
    /// non-positive; an error naming `op` at `dividend` otherwise, since truncation toward zero
    /// of a dividend of either sign is no floor division.
    fn truncated_quotient(
        &mut self,
        p: &AffineExpr,
        m: i64,
        dividend: &Expr,
        op: &str,
        what: &str,
    ) -> Result<AffineExpr, CError> {
        let depth = self.loops.len();
        let np = self.params.len();
        let below = |bound: Constraint| {
            let mut c = self.domain.clone();
            c.push(bound);
            self.divisions.infeasible(&c, depth, np)
        };
        let zero = AffineExpr::constant(0);
        if below(Constraint::lt(p, &zero)) {
            Ok(self.divisions.floor(p, m))
        } else if below(Constraint::lt(&zero, p)) {
            Ok(self.divisions.floor(&p.scale(-1), m).scale(-1))
        } else {
            Err(CError::new(
                dividend.loc,
                format!("the dividend of `{op}` in this {what} may be negative"),
                format!(
                    "C's `{op}` truncates toward zero, which is a floor division only where the \
                     dividend keeps one sign; write floord(a, b) for the floor, or bound the \
                     loops so the dividend is non-negative"
                ),
            ))
        }
    }

    fn min_max(
        &mut self,
        is_min: bool,
        a: &Expr,
        b: &Expr,
        whole: &Expr,
        what: &str,
    ) -> Result<Bound, CError> {
        let x = self.bound(a, what)?;
        let y = self.bound(b, what)?;
        let joined = if is_min {
            x.as_min()
                .zip(y.as_min())
                .map(|(p, q)| Bound::Min([p, q].concat()))
        } else {
            x.as_max()
                .zip(y.as_max())
                .map(|(p, q)| Bound::Max([p, q].concat()))
        };
        joined.ok_or_else(|| {
            CError::new(
                whole.loc,
                format!("{what} nesting min and max is not supported yet"),
                "split the loop or condition so each bound is a min or a max",
            )
        })
    }

    /// An affine expression without min / max (subscripts).
    fn affine(&mut self, e: &Expr, what: &str) -> Result<AffineExpr, CError> {
        let b = self.bound(e, what)?;
        b.single().cloned().ok_or_else(|| {
            CError::new(
                e.loc,
                format!("{what} with min or max is not supported"),
                AFFINE_HINT,
            )
        })
    }

    /// The conjunction of constraints a SCoP condition stands for.
    fn condition(&mut self, e: &Expr) -> Result<Vec<Constraint>, CError> {
        match &e.kind {
            ExprKind::Binary(BinOp::And, a, b) => {
                let mut c = self.condition(a)?;
                c.extend(self.condition(b)?);
                Ok(c)
            }
            ExprKind::Binary(BinOp::Or, ..) => Err(CError::new(
                e.loc,
                "`||` in a SCoP condition is not supported yet",
                "split the statement into one if per alternative",
            )),
            ExprKind::Binary(BinOp::Ne, ..) => Err(CError::new(
                e.loc,
                "`!=` in a SCoP condition is not supported yet",
                "split into an if with `<` and an if with `>`",
            )),
            ExprKind::Binary(
                op @ (BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq),
                a,
                b,
            ) => {
                let (small, large, strict) = match op {
                    BinOp::Lt => (a, b, true),
                    BinOp::Le => (a, b, false),
                    BinOp::Gt => (b, a, true),
                    BinOp::Ge => (b, a, false),
                    _ => {
                        let x = self.affine(a, "condition")?;
                        let y = self.affine(b, "condition")?;
                        return Ok(vec![Constraint::eq(&x, &y)]);
                    }
                };
                let s = self.bound(small, "condition")?;
                let l = self.bound(large, "condition")?;
                let (Some(ss), Some(ls)) = (s.as_max(), l.as_min()) else {
                    return Err(CError::new(
                        e.loc,
                        "this comparison with min/max is a disjunction, not supported yet",
                        "compare with min on the larger side and max on the smaller side",
                    ));
                };
                let mut out = Vec::new();
                for x in ss {
                    for y in ls {
                        out.push(if strict {
                            Constraint::lt(x, y)
                        } else {
                            Constraint::le(x, y)
                        });
                    }
                }
                Ok(out)
            }
            ExprKind::Unary(UnOp::Not, a) => {
                let inner = self.condition(a)?;
                match inner.as_slice() {
                    [c] if c.kind == ConstraintKind::NonNegative => Ok(vec![negate(c)]),
                    _ => Err(CError::new(
                        e.loc,
                        "`!` of a compound condition or an equality is not supported yet",
                        "write the negated comparison directly, e.g. i >= j for !(i < j)",
                    )),
                }
            }
            ExprKind::Int(v) => Ok(if *v != 0 {
                Vec::new()
            } else {
                vec![Constraint::non_negative(AffineExpr::constant(-1))]
            }),
            _ => Err(CError::new(
                e.loc,
                "a SCoP condition must be affine comparisons joined by &&",
                AFFINE_HINT,
            )),
        }
    }

    /// `constraints` without division variables (see [`Divisions::linearize`]); an error at
    /// `loc` where one cannot be removed.
    fn constrain(&self, constraints: &[Constraint], loc: Loc) -> Result<Vec<Constraint>, CError> {
        let mut out = Vec::new();
        for c in constraints {
            let Some(cs) = self.divisions.linearize(c) else {
                return Err(CError::new(
                    loc,
                    "this bound or condition needs a division variable in the iteration domain, \
                     which is not supported yet",
                    "divisions are exact in bounds such as j <= i / 2 or i < floord(n, 4); a test \
                     such as i % 2 == 0 is not supported",
                ));
            };
            out.extend(cs);
        }
        Ok(out)
    }

    fn statement(&mut self, s: &Stmt) -> Result<(), CError> {
        if let Some((e, pieces)) = self.unchosen_exit(s) {
            return self.fork(e, &pieces, s);
        }
        match &s.kind {
            StmtKind::Block(b) => b.iter().try_for_each(|s| self.statement(s)),
            StmtKind::Empty => Ok(()),
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                let raw = self.condition(cond)?;
                let constraints = self.constrain(&raw, cond.loc)?;
                let mark = self.domain.len();
                let exits = self.exits.len();
                self.domain.extend(constraints);
                self.statement(then)?;
                self.domain.truncate(mark);
                self.exits.truncate(exits);
                if let Some(o) = otherwise {
                    let negated = match raw.as_slice() {
                        [c] if c.kind == ConstraintKind::NonNegative => negate(c),
                        _ => return Err(CError::new(
                            cond.loc,
                            "`else` of a compound condition or an equality is not supported yet",
                            "write the else branch as its own if with the opposite comparison",
                        )),
                    };
                    let negated = self.constrain(&[negated], cond.loc)?;
                    self.domain.extend(negated);
                    self.statement(o)?;
                    self.domain.truncate(mark);
                    self.exits.truncate(exits);
                }
                Ok(())
            }
            StmtKind::For {
                init,
                cond,
                step,
                body,
            } => self.for_loop(s, init.as_ref(), cond.as_ref(), step.as_ref(), body),
            StmtKind::Expr(e) => self.assignment(e, s.loc),
        }
    }

    fn for_loop(
        &mut self,
        s: &Stmt,
        init: Option<&Expr>,
        cond: Option<&Expr>,
        step: Option<&Expr>,
        body: &Stmt,
    ) -> Result<(), CError> {
        let (Some(init), Some(cond), Some(step)) = (init, cond, step) else {
            return Err(CError::new(
                s.loc,
                "a SCoP loop needs an initialisation, a condition and a step",
                "write for (i = lb; i < ub; i++)",
            ));
        };
        let ExprKind::Assign(None, target, lb) = &init.kind else {
            return Err(CError::new(
                init.loc,
                "a SCoP loop must start by assigning its iterator",
                "write for (i = lb; i < ub; i++)",
            ));
        };
        let ExprKind::Name { name, .. } = &target.kind else {
            return Err(CError::new(
                target.loc,
                "a loop iterator must be a plain variable",
                "write for (i = lb; i < ub; i++)",
            ));
        };
        if self.loops.iter().any(|l| l.name == *name) {
            return Err(CError::new(
                target.loc,
                format!("`{name}` is already the iterator of an enclosing loop"),
                "give each loop of a nest its own iterator",
            ));
        }
        if let Some((d, _, _)) = self.decls.get(name.as_str()) {
            if d.ty != CType::Int || !d.dims.is_empty() {
                return Err(CError::new(
                    target.loc,
                    format!("loop iterator `{name}` is not an int"),
                    "declare loop iterators as int",
                ));
            }
        }
        let delta = self.step_of(step, name)?;
        let lower = self.bound(lb, "loop bound")?;
        let depth = self.loops.len();
        let t = AffineExpr::var(Var::Iter(depth));
        let mark = self.domain.len();
        let mut from = Vec::new();
        let value = if delta.abs() > 1 {
            // A strided loop: C's `i` is `lb + delta·i'` for a fresh `i' >= 0`.
            let Some(start) = lower.single() else {
                return Err(CError::new(
                    lb.loc,
                    "a loop with a stride other than 1 must start at an affine value",
                    "start the strided loop at an affine value (no min or max)",
                ));
            };
            from.push(Constraint::non_negative(t.clone()));
            start.add(&t.scale(delta))
        } else if delta > 0 {
            let Some(lbs) = lower.as_max() else {
                return Err(CError::new(
                    lb.loc,
                    "a loop counting up from a min is not supported yet",
                    "start the loop at an affine value or a max",
                ));
            };
            for l in lbs {
                from.push(Constraint::le(l, &t));
            }
            t.clone()
        } else if let Some(start) = lower.single() {
            from.push(Constraint::non_negative(t.clone()));
            start.sub(&t)
        } else {
            let Some(starts) = lower.as_min() else {
                return Err(CError::new(
                    lb.loc,
                    "a loop counting down from a max is not supported yet",
                    "start the loop at an affine value or a min",
                ));
            };
            let value = t.scale(-1);
            for l in starts {
                from.push(Constraint::le(&value, l));
            }
            value
        };
        let from = self.constrain(&from, lb.loc)?;
        self.domain.extend(from.iter().cloned());
        self.loops.push(LoopCtx {
            name: name.clone(),
            value: value.clone(),
        });
        let raw = self.condition(cond)?;
        let constraints = self.constrain(&raw, cond.loc)?;
        let t_var = Var::Iter(depth);
        let bounded = constraints.iter().any(|c| {
            c.expr.coeff(t_var) < 0 || (c.kind == ConstraintKind::Zero && c.expr.coeff(t_var) != 0)
        });
        if !bounded {
            return Err(CError::new(
                cond.loc,
                format!(
                    "the loop condition does not bound `{name}` in the direction it {}",
                    if delta > 0 {
                        "counts up"
                    } else {
                        "counts down"
                    }
                ),
                "count up with i < ub or i <= ub, down with i >= lb or i > lb",
            ));
        }
        self.domain.extend(constraints.iter().cloned());
        let position = self.counters[depth];
        self.counters[depth] += 1;
        self.positions.push(position);
        self.counters.push(0);
        let exits = self.exits.len();
        let result = self.statement(body);
        self.exits.truncate(exits);
        self.counters.pop();
        self.positions.pop();
        self.loops.pop();
        self.domain.truncate(mark);
        result?;
        let start = lower.single().cloned();
        let exit = self.exit_of(depth, &value, start, &from, &constraints);
        self.exits.push((name.clone(), exit));
        Ok(())
    }

    /// What the iterator of the loop at `depth` holds once the loop is done, at every point
    /// of the enclosing domain: the first value that fails the condition where the loop runs
    /// (its last value plus one step), its start where it does not. C's value is `value`, a
    /// function of the normalised iterator `t`; `from` are the constraints that bound `t`
    /// below, `cond` the condition's (one upper bound of `t`, and constraints without it that
    /// decide whether the loop runs at all); `start` is the value C's initialisation assigns.
    /// The loop runs where its last iteration satisfies `from`.
    fn exit_of(
        &mut self,
        depth: usize,
        value: &AffineExpr,
        start: Option<AffineExpr>,
        from: &[Constraint],
        cond: &[Constraint],
    ) -> Exit {
        let t = Var::Iter(depth);
        let mut upper = None;
        let mut runs = Vec::new();
        for c in cond {
            let a = c.expr.coeff(t);
            if a == 0 {
                runs.push(c.clone());
            } else if a > 0 || c.kind == ConstraintKind::Zero {
                return Exit::Unknown("its condition bounds it on both sides".into());
            } else if upper.replace(c).is_some() {
                return Exit::Unknown("its bound is a min of several".into());
            }
        }
        let Some(upper) = upper else {
            return Exit::Unknown("its condition does not bound it".into());
        };
        // -a·t + r >= 0: the last iteration is t = floor(r / a).
        let a = -upper.expr.coeff(t);
        let mut r = upper.expr.clone();
        r.add_term(t, a);
        if !small(&upper.expr) || !small(value) || !from.iter().all(|c| small(&c.expr)) {
            return Exit::Unknown("its bounds have numbers too large to handle".into());
        }
        let last = self.divisions.floor(&r, a);
        let at_last = |e: &AffineExpr| {
            let k = e.coeff(t);
            let mut out = e.clone();
            out.add_term(t, -k);
            out.add(&last.scale(k))
        };
        for c in from {
            runs.push(Constraint {
                expr: at_last(&c.expr),
                kind: c.kind,
            });
        }
        let k = value.coeff(t);
        let after = at_last(value).add(&AffineExpr::constant(k));
        let mut pieces: Vec<(Vec<Constraint>, Option<AffineExpr>)> =
            vec![(runs.clone(), Some(after.clone()))];
        for j in 0..runs.len() {
            let negations = match runs[j].kind {
                ConstraintKind::NonNegative => vec![negate(&runs[j])],
                ConstraintKind::Zero => {
                    let e = &runs[j].expr;
                    vec![
                        Constraint::non_negative(e.sub(&AffineExpr::constant(1))),
                        Constraint::non_negative(e.scale(-1).sub(&AffineExpr::constant(1))),
                    ]
                }
            };
            for n in negations {
                let mut c = runs[..j].to_vec();
                c.push(n);
                pieces.push((c, start.clone()));
            }
        }
        let mut known = Vec::new();
        let np = self.params.len();
        for (conditions, value) in pieces {
            let Some(conditions) = conditions
                .iter()
                .map(|c| self.divisions.linearize(c))
                .collect::<Option<Vec<_>>>()
            else {
                return Exit::Unknown("whether it runs needs a division in the domain".into());
            };
            let conditions: Vec<Constraint> = conditions.into_iter().flatten().collect();
            let mut all = self.domain.clone();
            all.extend(conditions.iter().cloned());
            if self.divisions.infeasible(&all, depth, np) {
                continue;
            }
            let Some(value) = value else {
                return Exit::Unknown("it may not run, and it starts from a min or max".into());
            };
            known.push(ExitPiece { conditions, value });
        }
        // One value where every piece's equals the first's (`k < t` from 0 leaves k = t, also
        // when t = 0): no pieces.
        let same = |p: &ExitPiece, first: &AffineExpr| {
            let d = p.value.sub(first);
            [d.clone(), d.scale(-1)].iter().all(|e| {
                let mut all = self.domain.clone();
                all.extend(p.conditions.iter().cloned());
                all.push(Constraint::non_negative(e.sub(&AffineExpr::constant(1))));
                self.divisions.infeasible(&all, depth, np)
            })
        };
        let first = known.first().map_or(after, |p| p.value.clone());
        if known.iter().all(|p| same(p, &first)) {
            // Also where no piece can be reached: the code after the loop never runs.
            known = vec![ExitPiece {
                conditions: Vec::new(),
                value: first,
            }];
        }
        Exit::Known(known)
    }

    /// The constant step of `name` (`i++`: 1, `i -= 2`: -2), an error otherwise.
    fn step_of(&self, step: &Expr, name: &str) -> Result<i64, CError> {
        let is_iter = |e: &Expr| matches!(&e.kind, ExprKind::Name { name: n, .. } if n == name);
        let int = |e: &Expr| match e.kind {
            ExprKind::Int(v) => Some(v),
            _ => None,
        };
        let delta = match &step.kind {
            ExprKind::Step { target, delta } if is_iter(target) => Some(*delta),
            ExprKind::Assign(Some(BinOp::Add), t, v) if is_iter(t) => int(v),
            ExprKind::Assign(Some(BinOp::Sub), t, v) if is_iter(t) => int(v).map(|v| -v),
            ExprKind::Assign(None, t, v) if is_iter(t) => match &v.kind {
                ExprKind::Binary(BinOp::Add, a, b) if is_iter(a) => int(b),
                ExprKind::Binary(BinOp::Add, a, b) if is_iter(b) => int(a),
                ExprKind::Binary(BinOp::Sub, a, b) if is_iter(a) => int(b).map(|v| -v),
                _ => None,
            },
            _ => {
                return Err(CError::new(
                    step.loc,
                    format!("the loop step must change the iterator `{name}`"),
                    "write i++, i--, i += 1 or i -= 1",
                ))
            }
        };
        match delta {
            Some(d) if d != 0 && d.abs() <= i64::from(i32::MAX) => Ok(d),
            Some(_) => Err(CError::new(
                step.loc,
                "the loop step must be a non-zero int constant",
                "step the iterator by a constant, e.g. i += 3",
            )),
            None => Err(CError::new(
                step.loc,
                "a loop step that is not a constant is not supported",
                "step the iterator by a constant, e.g. i += 3 or i = i - 2",
            )),
        }
    }

    /// The array and subscripts an lvalue or a read names.
    fn element(&mut self, e: &Expr) -> Result<Access, CError> {
        let mut subs = Vec::new();
        let mut cur = e;
        while let ExprKind::Index(base, index) = &cur.kind {
            subs.push(index.as_ref());
            cur = base;
        }
        subs.reverse();
        let ExprKind::Name { name, .. } = &cur.kind else {
            return Err(CError::new(
                cur.loc,
                "only named arrays can be indexed",
                "index arrays by name: A[i][j]",
            ));
        };
        let Some(&array) = self.array_of.get(name) else {
            let (message, hint) = if self.iterator_names.contains(name)
                || self.size_alias(name).is_some()
            {
                (
                    format!("`{name}` is not an array"),
                    "only arrays and scalars declared before the SCoP hold data",
                )
            } else if cur.kind != e.kind || !self.decls.contains_key(name.as_str()) {
                (
                        format!("unknown identifier `{name}`"),
                        "declare it at file scope, as a kernel parameter, or as a local before #pragma scop",
                    )
            } else {
                (
                    format!("`{name}` is not an array"),
                    "only arrays and scalars declared before the SCoP hold data",
                )
            };
            return Err(CError::new(cur.loc, message, hint));
        };
        let dims = self.arrays[array.index()].0.shape.len();
        if subs.len() != dims {
            return Err(CError::new(
                e.loc,
                format!(
                    "`{name}` has {dims} dimension{} but is used with {} subscript{}",
                    if dims == 1 { "" } else { "s" },
                    subs.len(),
                    if subs.len() == 1 { "" } else { "s" }
                ),
                "give one subscript per dimension",
            ));
        }
        let mut subscripts = Vec::new();
        for s in subs {
            subscripts.push(self.affine(s, "subscript")?);
        }
        Ok(Access {
            array,
            subscripts,
            span: e.loc.span,
        })
    }

    fn assignment(&mut self, e: &Expr, loc: Loc) -> Result<(), CError> {
        let (op, target, rhs, one);
        match &e.kind {
            ExprKind::Assign(o, t, r) => {
                op = *o;
                target = t.as_ref();
                rhs = r.as_ref();
            }
            ExprKind::Step { target: t, delta } => {
                one = Expr {
                    kind: ExprKind::Int(1),
                    loc: e.loc,
                };
                op = Some(if *delta > 0 { BinOp::Add } else { BinOp::Sub });
                target = t.as_ref();
                rhs = &one;
            }
            ExprKind::Call { name, .. } => return Err(CError::new(
                e.loc,
                format!("call to `{name}` is not supported in a SCoP"),
                "only math functions (sqrt, exp, pow, fabs, …) may be called, inside expressions",
            )),
            _ => {
                return Err(CError::new(
                    e.loc,
                    "a SCoP statement must be an assignment",
                    "write A[i][j] = expression; (or +=, -=, *=, /=)",
                ))
            }
        }
        let mut root = target;
        while let ExprKind::Index(base, _) = &root.kind {
            root = base;
        }
        if let ExprKind::Name { name, size } = &root.kind {
            if self.iterator_names.contains(name) {
                return Err(CError::new(
                    target.loc,
                    format!("assignment to loop iterator `{name}`"),
                    "SCoP loops change their iterators only in the for header",
                ));
            }
            let is_size = size.is_some()
                || self.size_alias(name).is_some()
                || self.options.sizes.iter().any(|(n, _)| n == name);
            if is_size && !self.array_of.contains_key(name) {
                return Err(CError::new(
                    target.loc,
                    format!("assignment to size `{name}`"),
                    "sizes are constants",
                ));
            }
        }
        if let ExprKind::Name { name, .. } = &root.kind {
            if let Some(narrow) = self.decls.get(name.as_str()).and_then(|d| d.0.narrow) {
                return Err(CError::new(
                    target.loc,
                    format!("store to `{narrow}` data `{name}` is not supported"),
                    format!("polyfuse holds `{narrow}` data as 32-bit int, so it may only be read in a SCoP; declare `{name}` as int"),
                ));
            }
        }
        let mut write = self.element(target)?;
        let elem = self.arrays[write.array.index()].0.elem;
        let mut b = Body {
            arena: ExprArena::new(),
            reads: Vec::new(),
        };
        let mut reduction_op = None;
        let value = match op {
            None => {
                let (v, ty) = self.value(&mut b, rhs)?;
                if let IrExpr::Binary(bop @ (BinaryOp::Add | BinaryOp::Mul), x, y) = b.arena[v] {
                    if ty == elem && (b.is_read_of(x, &write) || b.is_read_of(y, &write)) {
                        reduction_op = Some(bop);
                    }
                }
                b.convert(v, ty, elem)
            }
            Some(bop) => {
                let r = b.read(write.clone());
                let current = b.arena.push(IrExpr::Read(r));
                let (v, ty) = self.value(&mut b, rhs)?;
                let (id, ty) = self.arith(&mut b, bop, (current, elem), (v, ty), e)?;
                if ty == elem && matches!(bop, BinOp::Add | BinOp::Mul) {
                    reduction_op = Some(if bop == BinOp::Add {
                        BinaryOp::Add
                    } else {
                        BinaryOp::Mul
                    });
                }
                b.convert(id, ty, elem)
            }
        };
        let depth = self.loops.len();
        let mut position = self.positions.clone();
        position.push(self.counters[depth]);
        self.counters[depth] += 1;
        let same_array = b.reads.iter().filter(|r| r.0 == write.array).count();
        let self_reads = b
            .arena
            .iter()
            .filter(|&(id, _)| b.is_read_of(id, &write))
            .count();
        let mut reads: Vec<Access> = b
            .reads
            .into_iter()
            .map(|(array, subscripts, span)| Access {
                array,
                subscripts,
                span,
            })
            .collect();
        let divs = {
            let mut subscripts: Vec<&mut AffineExpr> = write
                .subscripts
                .iter_mut()
                .chain(reads.iter_mut().flat_map(|r| r.subscripts.iter_mut()))
                .collect();
            self.divisions.localize(&mut subscripts)
        };
        let mut statement = Statement {
            name: format!("S{}", self.statements.len()),
            iterators: self.loops.iter().map(|l| l.name.clone()).collect(),
            domain: self.domain.clone(),
            write,
            reads,
            divs,
            exprs: b.arena,
            body: value,
            position,
            reduction: None,
            span: loc.span.join(e.loc.span),
        };
        // A reduction reads the element it updates exactly once and nothing else of its
        // array; it reduces over the iterators the element does not depend on.
        statement.reduction = reduction_op.and_then(|rop| {
            let iters: Vec<usize> = (0..depth)
                .filter(|&k| {
                    let w = &statement.write.subscripts;
                    w.iter().all(|s| !statement.uses_iter(s, k))
                })
                .collect();
            (same_array == 1 && self_reads == 1 && !iters.is_empty()).then(|| Reduction {
                op: if rop == BinaryOp::Add {
                    ReductionOp::Add
                } else {
                    ReductionOp::Mul
                },
                iters,
            })
        });
        self.statements.push(statement);
        Ok(())
    }

    /// Lowers an expression of a statement body to the arena: its handle and C type.
    fn value(&mut self, b: &mut Body, e: &Expr) -> Result<(ExprId, ScalarType), CError> {
        match &e.kind {
            ExprKind::Int(v) => Ok((
                b.arena.push(IrExpr::Literal(Literal {
                    value: *v as f64,
                    ty: ScalarType::I32,
                })),
                ScalarType::I32,
            )),
            ExprKind::Float { value, single } => {
                let (value, ty) = if *single {
                    (*value as f32 as f64, ScalarType::F32)
                } else {
                    (*value, ScalarType::F64)
                };
                Ok((b.arena.push(IrExpr::Literal(Literal { value, ty })), ty))
            }
            ExprKind::Name { name, size } => {
                if self.array_of.contains_key(name) {
                    let acc = self.element(e)?;
                    let ty = self.arrays[acc.array.index()].0.elem;
                    let r = b.read(acc);
                    return Ok((b.arena.push(IrExpr::Read(r)), ty));
                }
                if !self.decls.contains_key(name.as_str())
                    && size.is_none()
                    && !self.iterator_names.contains(name)
                    && !self.implicit_sizes.contains(name)
                    && !self.options.sizes.iter().any(|(n, _)| n == name)
                {
                    return Err(CError::new(
                        e.loc,
                        format!("unknown identifier `{name}`"),
                        "declare it at file scope, as a kernel parameter, or as a local before #pragma scop",
                    ));
                }
                match self.affine_name(name, *size, e.loc)? {
                    Some(a) => Ok((b.affine_value(&a, &self.divisions), ScalarType::I32)),
                    None => Err(CError::new(
                        e.loc,
                        format!("`{name}` cannot be used here"),
                        "read arrays and scalars declared before the SCoP",
                    )),
                }
            }
            ExprKind::Index(..) => {
                let acc = self.element(e)?;
                let ty = self.arrays[acc.array.index()].0.elem;
                let r = b.read(acc);
                Ok((b.arena.push(IrExpr::Read(r)), ty))
            }
            ExprKind::Unary(UnOp::Neg, a) => {
                let (v, ty) = self.value(b, a)?;
                let (v, ty) = b.numeric(v, ty);
                Ok((b.arena.push(IrExpr::Unary(UnaryOp::Neg, v)), ty))
            }
            ExprKind::Unary(UnOp::Not, a) => {
                let (v, ty) = self.value(b, a)?;
                let c = b.truth(v, ty);
                Ok((
                    b.arena.push(IrExpr::Unary(UnaryOp::Not, c)),
                    ScalarType::Bool,
                ))
            }
            ExprKind::Binary(op, x, y) => {
                let l = self.value(b, x)?;
                let r = self.value(b, y)?;
                self.arith(b, *op, l, r, e)
            }
            ExprKind::Cond(c, x, y) => {
                let (cv, ct) = self.value(b, c)?;
                let cond = b.truth(cv, ct);
                let (xv, xt) = self.value(b, x)?;
                let (yv, yt) = self.value(b, y)?;
                let (xv, xt) = b.numeric(xv, xt);
                let (yv, yt) = b.numeric(yv, yt);
                let ty = promote(xt, yt);
                let then = b.convert(xv, xt, ty);
                let otherwise = b.convert(yv, yt, ty);
                Ok((
                    b.arena.push(IrExpr::Select {
                        cond,
                        then,
                        otherwise,
                    }),
                    ty,
                ))
            }
            ExprKind::Cast(t, a) => {
                let (v, ty) = self.value(b, a)?;
                let (v, ty) = b.numeric(v, ty);
                let to = scalar_type(*t);
                Ok((b.convert(v, ty, to), to))
            }
            ExprKind::Call { name, args } => self.call(b, name, args, e),
            ExprKind::Assign(..) | ExprKind::Step { .. } => Err(CError::new(
                e.loc,
                "assignment inside an expression is not supported in a SCoP",
                "write one assignment per statement",
            )),
        }
    }

    fn arith(
        &mut self,
        b: &mut Body,
        op: BinOp,
        (x, xt): (ExprId, ScalarType),
        (y, yt): (ExprId, ScalarType),
        e: &Expr,
    ) -> Result<(ExprId, ScalarType), CError> {
        if matches!(op, BinOp::And | BinOp::Or) {
            let p = b.truth(x, xt);
            let q = b.truth(y, yt);
            let bop = if op == BinOp::And {
                BinaryOp::And
            } else {
                BinaryOp::Or
            };
            return Ok((b.arena.push(IrExpr::Binary(bop, p, q)), ScalarType::Bool));
        }
        let (x, xt) = b.numeric(x, xt);
        let (y, yt) = b.numeric(y, yt);
        let ty = promote(xt, yt);
        if op == BinOp::Rem && ty != ScalarType::I32 {
            return Err(CError::new(
                e.loc,
                "`%` needs integer operands",
                "use % on int values only",
            ));
        }
        let x = b.convert(x, xt, ty);
        let y = b.convert(y, yt, ty);
        let (bop, result) = match op {
            BinOp::Add => (BinaryOp::Add, ty),
            BinOp::Sub => (BinaryOp::Sub, ty),
            BinOp::Mul => (BinaryOp::Mul, ty),
            BinOp::Div => (BinaryOp::Div, ty),
            BinOp::Rem => (BinaryOp::Rem, ty),
            BinOp::Lt => (BinaryOp::Lt, ScalarType::Bool),
            BinOp::Le => (BinaryOp::Le, ScalarType::Bool),
            BinOp::Gt => (BinaryOp::Gt, ScalarType::Bool),
            BinOp::Ge => (BinaryOp::Ge, ScalarType::Bool),
            BinOp::Eq => (BinaryOp::Eq, ScalarType::Bool),
            BinOp::Ne => (BinaryOp::Ne, ScalarType::Bool),
            // Handled above.
            BinOp::And | BinOp::Or => unreachable!("logical operators are lowered first"),
        };
        Ok((b.arena.push(IrExpr::Binary(bop, x, y)), result))
    }

    fn call(
        &mut self,
        b: &mut Body,
        name: &str,
        args: &[Expr],
        e: &Expr,
    ) -> Result<(ExprId, ScalarType), CError> {
        enum Kind {
            Math(MathFn, ScalarType),
            MinMax(BinaryOp, Option<ScalarType>),
        }
        if matches!(name, "floord" | "ceild") {
            return self.floor_ceil_value(b, name, args, e);
        }
        let kind = match name {
            "min" | "MIN" => Kind::MinMax(BinaryOp::Min, None),
            "max" | "MAX" => Kind::MinMax(BinaryOp::Max, None),
            "fmin" => Kind::MinMax(BinaryOp::Min, Some(ScalarType::F64)),
            "fmax" => Kind::MinMax(BinaryOp::Max, Some(ScalarType::F64)),
            "fminf" => Kind::MinMax(BinaryOp::Min, Some(ScalarType::F32)),
            "fmaxf" => Kind::MinMax(BinaryOp::Max, Some(ScalarType::F32)),
            "abs" => Kind::Math(MathFn::Abs, ScalarType::I32),
            "fabs" => Kind::Math(MathFn::Abs, ScalarType::F64),
            "fabsf" => Kind::Math(MathFn::Abs, ScalarType::F32),
            _ => {
                let (base, ty) = match name.strip_suffix('f') {
                    Some(base) if MathFn::from_name(base).is_some() => (base, ScalarType::F32),
                    _ => (name, ScalarType::F64),
                };
                match MathFn::from_name(base).filter(|m| !matches!(m, MathFn::Abs | MathFn::Rsqrt)) {
                    Some(m) => Kind::Math(m, ty),
                    None => {
                        return Err(CError::new(
                            e.loc,
                            format!("call to `{name}` is not supported in a SCoP"),
                            "only math functions (sqrt, exp, log, pow, fabs, sin, cos, tanh, floor, ceil, min, max) may be called",
                        ))
                    }
                }
            }
        };
        let arity = match kind {
            Kind::Math(m, _) => m.arity(),
            Kind::MinMax(..) => 2,
        };
        if args.len() != arity {
            return Err(CError::new(
                e.loc,
                format!(
                    "`{name}` takes {arity} argument{} but is given {}",
                    if arity == 1 { "" } else { "s" },
                    args.len()
                ),
                "check the call",
            ));
        }
        let mut vals = Vec::new();
        for a in args {
            let (v, ty) = self.value(b, a)?;
            vals.push(b.numeric(v, ty));
        }
        let ty = match kind {
            Kind::Math(_, ty) | Kind::MinMax(_, Some(ty)) => ty,
            Kind::MinMax(_, None) => promote(vals[0].1, vals[1].1),
        };
        let ids: Vec<ExprId> = vals.iter().map(|&(v, t)| b.convert(v, t, ty)).collect();
        let id = match kind {
            Kind::Math(m, _) => b.arena.push(IrExpr::Math(m, ids)),
            Kind::MinMax(op, _) => b.arena.push(IrExpr::Binary(op, ids[0], ids[1])),
        };
        Ok((id, ty))
    }

    /// `floord(a, b)` or `ceild(a, b)` in a statement's value: the floor or ceiling of an
    /// `int` divided by a positive constant.
    fn floor_ceil_value(
        &mut self,
        b: &mut Body,
        name: &str,
        args: &[Expr],
        e: &Expr,
    ) -> Result<(ExprId, ScalarType), CError> {
        let den = match args {
            [_, d] => constant(d).filter(|&d| d > 0),
            _ => {
                return Err(CError::new(
                    e.loc,
                    format!("`{name}` takes 2 arguments but is given {}", args.len()),
                    "check the call",
                ))
            }
        };
        let Some(den) = den else {
            return Err(CError::new(
                args[1].loc,
                format!("the divisor of `{name}` must be a positive constant"),
                format!("write {name}(a, b) with b a positive integer constant"),
            ));
        };
        let (v, ty) = self.value(b, &args[0])?;
        let (v, ty) = b.numeric(v, ty);
        if ty != ScalarType::I32 {
            return Err(CError::new(
                args[0].loc,
                format!("`{name}` needs an int dividend"),
                format!("{name} divides integers; use floor or ceil on floating-point values"),
            ));
        }
        let id = if name == "floord" {
            b.floor_div(v, den)
        } else {
            // ceil(a / b) = -floor(-a / b)
            let neg = b.arena.push(IrExpr::Unary(UnaryOp::Neg, v));
            let q = b.floor_div(neg, den);
            b.arena.push(IrExpr::Unary(UnaryOp::Neg, q))
        };
        Ok((id, ScalarType::I32))
    }
}

/// `e >= 0` negated over the integers: `-e - 1 >= 0`.
fn negate(c: &Constraint) -> Constraint {
    Constraint::non_negative(c.expr.scale(-1).add(&AffineExpr::constant(-1)))
}

/// C's usual arithmetic conversions on `int`, `float` and `double`.
fn promote(a: ScalarType, b: ScalarType) -> ScalarType {
    let rank = |t: ScalarType| match t {
        ScalarType::F64 => 3,
        ScalarType::F32 => 2,
        ScalarType::F16 => 1,
        _ => 0,
    };
    if rank(a) >= rank(b) {
        a
    } else {
        b
    }
}

/// A statement body under construction.
struct Body {
    arena: ExprArena,
    /// Distinct elements read, with their spans.
    reads: Vec<(ArrayId, Vec<AffineExpr>, Span)>,
}

impl Body {
    /// The index of a read of `acc`, shared with an earlier read of the same element.
    fn read(&mut self, acc: Access) -> usize {
        if let Some(k) = self
            .reads
            .iter()
            .position(|r| r.0 == acc.array && r.1 == acc.subscripts)
        {
            return k;
        }
        self.reads.push((acc.array, acc.subscripts, acc.span));
        self.reads.len() - 1
    }

    /// Whether `id` reads exactly the element `acc` names.
    fn is_read_of(&self, id: ExprId, acc: &Access) -> bool {
        match self.arena[id] {
            IrExpr::Read(r) => self.reads[r].0 == acc.array && self.reads[r].1 == acc.subscripts,
            _ => false,
        }
    }

    /// An `i32` expression for an affine value of iterators, sizes and the divisions of
    /// `divisions`.
    fn affine_value(&mut self, a: &AffineExpr, divisions: &Divisions) -> ExprId {
        let int = |v: i64| {
            IrExpr::Literal(Literal {
                value: v as f64,
                ty: ScalarType::I32,
            })
        };
        let mut acc: Option<ExprId> = None;
        for &(v, c) in a.terms() {
            let leaf = match v {
                Var::Iter(k) => self.arena.push(IrExpr::Iter(k)),
                Var::Param(p) => self.arena.push(IrExpr::Param(p)),
                Var::Div(k) => {
                    let d = &divisions.divs[k];
                    let num = self.affine_value(&d.num, divisions);
                    self.floor_div(num, d.den)
                }
            };
            let (term, negative) = match c {
                1 => (leaf, false),
                -1 if acc.is_some() => (leaf, true),
                -1 => (self.arena.push(IrExpr::Unary(UnaryOp::Neg, leaf)), false),
                _ if c < 0 && acc.is_some() => {
                    let k = self.arena.push(int(-c));
                    (
                        self.arena.push(IrExpr::Binary(BinaryOp::Mul, k, leaf)),
                        true,
                    )
                }
                _ => {
                    let k = self.arena.push(int(c));
                    (
                        self.arena.push(IrExpr::Binary(BinaryOp::Mul, k, leaf)),
                        false,
                    )
                }
            };
            acc = Some(match acc {
                None => term,
                Some(prev) => {
                    let op = if negative {
                        BinaryOp::Sub
                    } else {
                        BinaryOp::Add
                    };
                    self.arena.push(IrExpr::Binary(op, prev, term))
                }
            });
        }
        let c = a.constant;
        match acc {
            None => self.arena.push(int(c)),
            Some(prev) if c == 0 => prev,
            Some(prev) => {
                let (op, k) = if c > 0 {
                    (BinaryOp::Add, c)
                } else {
                    (BinaryOp::Sub, -c)
                };
                let k = self.arena.push(int(k));
                self.arena.push(IrExpr::Binary(op, prev, k))
            }
        }
    }

    /// `floor(n / den)` of an `i32` for `den > 0`, with C's truncating division:
    /// `(n >= 0 ? n : n - (den - 1)) / den`.
    fn floor_div(&mut self, n: ExprId, den: i64) -> ExprId {
        let int = |v: i64| {
            IrExpr::Literal(Literal {
                value: v as f64,
                ty: ScalarType::I32,
            })
        };
        let d = self.arena.push(int(den));
        let zero = self.arena.push(int(0));
        let cond = self.arena.push(IrExpr::Binary(BinaryOp::Ge, n, zero));
        let k = self.arena.push(int(den - 1));
        let shifted = self.arena.push(IrExpr::Binary(BinaryOp::Sub, n, k));
        let dividend = self.arena.push(IrExpr::Select {
            cond,
            then: n,
            otherwise: shifted,
        });
        self.arena.push(IrExpr::Binary(BinaryOp::Div, dividend, d))
    }

    /// A boolean as the `int` C makes of it; numbers unchanged.
    fn numeric(&mut self, v: ExprId, ty: ScalarType) -> (ExprId, ScalarType) {
        if ty != ScalarType::Bool {
            return (v, ty);
        }
        let one = self.arena.push(IrExpr::Literal(Literal {
            value: 1.0,
            ty: ScalarType::I32,
        }));
        let zero = self.arena.push(IrExpr::Literal(Literal {
            value: 0.0,
            ty: ScalarType::I32,
        }));
        (
            self.arena.push(IrExpr::Select {
                cond: v,
                then: one,
                otherwise: zero,
            }),
            ScalarType::I32,
        )
    }

    /// A number as a condition (`!= 0`); booleans unchanged.
    fn truth(&mut self, v: ExprId, ty: ScalarType) -> ExprId {
        if ty == ScalarType::Bool {
            return v;
        }
        let zero = self.arena.push(IrExpr::Literal(Literal { value: 0.0, ty }));
        self.arena.push(IrExpr::Binary(BinaryOp::Ne, v, zero))
    }

    /// `v` converted from `from` to `to`, with a cast only where they differ.
    fn convert(&mut self, v: ExprId, from: ScalarType, to: ScalarType) -> ExprId {
        let (v, from) = self.numeric(v, from);
        if from == to {
            v
        } else {
            self.arena.push(IrExpr::Cast(to, v))
        }
    }
}
