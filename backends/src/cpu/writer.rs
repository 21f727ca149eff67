//! The C writer: a program and its loop AST → one C99 + OpenMP translation unit.
//!
//! The unit holds the helpers the kernel uses, the size parameters as `static const int64_t`,
//! the scalar functions as `static` C functions, and the kernel: `int NAME(arrays…)`, which
//! returns 0, or 1 when it cannot allocate its temporaries. Arrays are passed in [`ArrayId`]
//! order, temporaries excepted: a multi-dimensional array as a `restrict` array parameter
//! (`float A[restrict M][K]`, read-only ones `const`), a scalar input by value, a scalar output
//! through a `restrict` pointer. `f16` arrays are `uint16_t` storage. Temporaries are allocated
//! zeroed inside the kernel, as the interpreter starts them.
//!
//! The outermost loop annotated parallel in each nest becomes `#pragma omp parallel for`
//! (with `schedule(static, 1)` where its iterations do unequal work, as in triangular nests);
//! an innermost loop annotated vectorizable becomes `#pragma omp simd` (both on one loop:
//! `parallel for simd`).
//!
//! A pack mark ([`PackMark`]) becomes a buffer of the box its loops access, aligned to a cache
//! line, in the mark's layout: copied in before the loops, read and written there instead of
//! the array, and copied back after them when they write it (inside a parallel loop only when
//! the mark says that loop owns the box). A register-tile mark ([`Mark::RegisterTile`]) becomes
//! an outer product of accumulators kept in a local buffer (see [`super::micro`]). Elsewhere, a
//! loop that carries no dependence
//! around a vectorizable innermost loop is unrolled and its copies jammed into that loop (a
//! register tile, [`Options::register_tile`]), the iterations left over run one at a time. A
//! reduction-tile mark ([`ReductionTileMark`]) has the same done to the loop it names around an
//! innermost loop of reductions, each row's accumulator held in a local of its own (see
//! [`super::reduction`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write;

use polyhedral::ast::{self, Ast, AstCond, AstExpr};
use polyhedral::program::{
    ArrayId, ArrayRole, FunctionId, ParamId, Program, ScalarType, SourceKind, Stmt, StmtId,
};
use polyhedral::schedule::mark::{Mark, PackMark, ReductionTileMark};

use super::accumulate::Accumulator;
use super::body::{value_type, BodyContext};
use super::helpers::Helper;
use super::names::Scope;
use super::syntax::CSyntax;
use super::vector::VectorState;
use super::{Error, Options};

/// How the harness calls a written kernel.
pub(crate) struct KernelInterface {
    pub name: String,
    /// The kernel's arguments, in order.
    pub args: Vec<ArrayId>,
}

/// Writes a program and its AST as C99 + OpenMP: one translation unit with the helpers, the
/// sizes as `static const int64_t`, the scalar functions and the kernel
/// `int NAME(arrays…)` (see the module docs for its interface).
pub struct Writer<'a> {
    pub(super) program: &'a Program,
    pub(super) options: &'a Options,
    /// Whether the code goes back into the C file the program came from (see [`super::scop`]):
    /// sizes, arrays and scalars keep their names from that file, scalars are plain variables.
    in_source: bool,
    pub(super) scope: Scope,
    kernel: String,
    params: Vec<String>,
    arrays: Vec<String>,
    functions: Vec<String>,
    pub(super) loop_vars: HashMap<String, String>,
    /// The enclosing loops' variables at the middle of their ranges, for work estimates.
    pub(super) midpoints: Vec<(String, i64)>,
    helpers: BTreeSet<Helper>,
    /// Per parallel loop (by address in the AST), the temporaries that live in one of its
    /// iterations: (array, lowest subscripts, extents).
    pub(super) tile_locals: HashMap<*const Ast, Vec<TileLocal>>,
    /// The tile-local temporaries and packed buffers in scope: (array, local name, names of
    /// the lowest subscripts, the array dimension each local dimension stores).
    locals: Vec<(ArrayId, String, Vec<String>, Vec<usize>)>,
    /// Function-level vectorization: the vector variants written so far (`None` when scalar
    /// functions are not vectorised).
    pub(super) vector: Option<VectorState>,
    /// The array elements held in locals in the loop being written (see
    /// [`super::accumulate`]).
    pub(super) accumulators: Vec<Accumulator>,
    /// Set just before the loop whose accumulators were opened around it is written.
    pub(super) holding: bool,
    /// Inside a register tile's accumulated block: its column loop (constant trip count) is
    /// unrolled rather than `omp simd` (see [`super::micro`]).
    pub(super) in_register_tile: bool,
    /// The rows loops of reduction tiles (by address in the AST) and their rows (see
    /// [`super::reduction`]).
    pub(super) reduction_rows: HashMap<*const Ast, ReductionTileMark>,
    /// Innermost loops of reduction tiles (by address in the AST), which run one iteration
    /// at a time (see [`super::reduction`]).
    pub(super) in_order: HashSet<*const Ast>,
}

/// A temporary living in one iteration of a parallel loop: the array, its box's lowest
/// subscripts (expressions of the loops outside the iteration) and its extents.
type TileLocal = (ArrayId, Vec<AstExpr>, Vec<i64>);

/// The most bytes of tile-local temporaries one iteration of a parallel loop keeps on the
/// stack.
const TILE_LOCAL_BYTES: i64 = 64 << 10;

/// The most bytes of one packed buffer, which lives on the stack of the thread that runs the
/// packed loop.
const PACKED_BYTES: i64 = polyhedral::passes::pack::MAX_PACKED_BYTES;

/// The alignment of packed buffers: a cache line, and a whole number of vectors.
const PACKED_ALIGN: i64 = polyhedral::cache_model::BUFFER_ALIGNMENT as i64;

/// An array copied into a packed buffer for one region (see [`polyhedral::passes::pack`]).
pub(super) struct Packed {
    array: ArrayId,
    /// Per array dimension, the lowest subscript of the box (an expression of the loops
    /// outside the region) and its extent.
    lower: Vec<AstExpr>,
    extent: Vec<i64>,
    /// The array dimension each buffer dimension stores.
    layout: Vec<usize>,
    written: bool,
    /// Whether every element of the box lies in the array (the copies need no bounds).
    pub(super) inside: bool,
}

/// The C type elements of `ty` are stored in.
pub(crate) fn storage_type(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::F16 => "uint16_t",
        ScalarType::F32 => "float",
        ScalarType::F64 => "double",
        ScalarType::I32 => "int32_t",
        ScalarType::Bool => "bool",
    }
}

impl<'a> Writer<'a> {
    pub fn new(program: &'a Program, options: &'a Options) -> Writer<'a> {
        let mut scope = Scope::default();
        let kernel = scope.fresh(&program.name);
        let params = program
            .params
            .iter()
            .map(|p| scope.fresh(&p.name))
            .collect();
        let arrays = program
            .arrays
            .iter()
            .map(|a| scope.fresh(&a.name))
            .collect();
        let functions = program
            .functions
            .iter()
            .map(|f| scope.fresh(&f.name))
            .collect();
        Writer {
            program,
            options,
            in_source: false,
            scope,
            kernel,
            params,
            arrays,
            functions,
            loop_vars: HashMap::new(),
            midpoints: Vec::new(),
            helpers: BTreeSet::new(),
            tile_locals: HashMap::new(),
            locals: Vec::new(),
            vector: None,
            accumulators: Vec::new(),
            holding: false,
            in_register_tile: false,
            reduction_rows: HashMap::new(),
            in_order: HashSet::new(),
        }
        .with_vectors()
    }

    /// Turns on function-level vectorization when the options ask for it and the target has
    /// vectors of at least two 32-bit lanes.
    fn with_vectors(mut self) -> Self {
        let unit = self.options.description().vector;
        let lanes = unit.map_or(0, |v| v.bytes as usize / 4);
        let registers = unit.map_or(0, |v| v.registers);
        if self.options.vectorize_functions && lanes >= 2 && !self.program.functions.is_empty() {
            self.vector = Some(VectorState::new(self.program, lanes, registers));
        }
        self
    }

    /// A writer for code that replaces the SCoP of the C file the program came from: sizes,
    /// arrays and scalars are spelled as that file spells them, and the loop variables it
    /// declares avoid every identifier in `taken` (the file's identifiers).
    pub(crate) fn in_source<'t>(
        program: &'a Program,
        options: &'a Options,
        taken: impl IntoIterator<Item = &'t str>,
    ) -> Writer<'a> {
        let mut scope = Scope::default();
        for name in taken {
            scope.reserve(name);
        }
        let (params, declared) = match &program.source {
            SourceKind::CScop {
                size_names, arrays, ..
            } => (size_names.clone(), *arrays),
            SourceKind::Kernel => (
                program.params.iter().map(|p| p.name.clone()).collect(),
                program.arrays.len(),
            ),
        };
        // The file's own arrays keep their names; the compiler's temporaries get fresh ones.
        let arrays = program
            .arrays
            .iter()
            .enumerate()
            .map(|(k, a)| {
                if k < declared {
                    a.name.clone()
                } else {
                    scope.fresh(&a.name)
                }
            })
            .collect();
        Writer {
            program,
            options,
            in_source: true,
            scope,
            kernel: program.name.clone(),
            params,
            arrays,
            functions: program.functions.iter().map(|f| f.name.clone()).collect(),
            loop_vars: HashMap::new(),
            midpoints: Vec::new(),
            helpers: BTreeSet::new(),
            tile_locals: HashMap::new(),
            locals: Vec::new(),
            vector: None,
            accumulators: Vec::new(),
            holding: false,
            in_register_tile: false,
            reduction_rows: HashMap::new(),
            in_order: HashSet::new(),
        }
    }

    /// The statements that replace the SCoP (one block, indented by `indent` levels) and the
    /// helper definitions they need, in that order.
    pub(crate) fn write_in_source(
        mut self,
        ast: &Ast,
        indent: usize,
    ) -> Result<(String, String), Error> {
        let program = self.program;
        program
            .verify()
            .map_err(|e| Error::InvalidProgram(e.to_string()))?;
        ast::verify(program, ast).map_err(Error::InvalidAst)?;
        if let Some(f) = program.functions.first() {
            return Err(Error::Unsupported(format!(
                "scalar function `{}` in a C SCoP",
                f.name
            )));
        }
        let declared = match &program.source {
            SourceKind::CScop { arrays, .. } => *arrays,
            SourceKind::Kernel => program.arrays.len(),
        };
        let mut body = String::new();
        let pad = "    ".repeat(indent);
        let _ = writeln!(body, "{pad}{{");
        let own: Vec<ArrayId> = (declared..program.arrays.len())
            .map(|k| ArrayId(k as u32))
            .collect();
        let inner = "    ".repeat(indent + 1);
        for &id in &own {
            let decl = self.temporary_declaration(id);
            let name = &self.arrays[id.index()];
            let _ = writeln!(body, "{inner}{decl}");
            let _ = writeln!(
                body,
                "{inner}if (!{name}) {{\n{inner}    fprintf(stderr, \"polyfuse: out of memory\\n\");\n{inner}    abort();\n{inner}}}"
            );
        }
        self.write_node(&mut body, ast, indent + 1, false);
        for &id in &own {
            let _ = writeln!(body, "{inner}free({});", self.arrays[id.index()]);
        }
        let _ = writeln!(body, "{pad}}}");
        Ok((body, self.helper_definitions()))
    }

    /// The definitions of every helper used so far, each after the ones it calls.
    fn helper_definitions(&self) -> String {
        let mut helpers = BTreeSet::new();
        for &h in &self.helpers {
            helpers.insert(h);
            helpers.extend(h.requires());
        }
        let mut out = String::new();
        for h in helpers {
            out.push('\n');
            out += h.source();
        }
        out
    }

    /// The C translation unit of the kernel.
    pub fn write(self, ast: &Ast) -> Result<String, Error> {
        self.write_unit(ast).map(|(text, _)| text)
    }

    pub(crate) fn write_unit(mut self, ast: &Ast) -> Result<(String, KernelInterface), Error> {
        let program = self.program;
        program
            .verify()
            .map_err(|e| Error::InvalidProgram(e.to_string()))?;
        ast::verify(program, ast).map_err(Error::InvalidAst)?;
        self.check_shapes()?;

        let mut functions = String::new();
        for k in 0..program.functions.len() {
            self.write_function(&mut functions, FunctionId(k as u32));
        }
        let (kernel, interface) = self.write_kernel(ast);

        let mut out = format!(
            "/* Generated by polyfuse from kernel `{}`. */\n",
            program.name
        );
        out += "#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n";
        out += &self.helper_definitions();
        if !program.params.is_empty() {
            out.push('\n');
            for (p, name) in program.params.iter().zip(&self.params) {
                let _ = writeln!(out, "static const int64_t {name} = {};", p.value);
            }
        }
        out += &functions;
        if let Some(state) = &self.vector {
            if !state.text.is_empty() || kernel.contains("pf_all") {
                out += &state.prelude();
                out += &state.text;
            }
        }
        out.push('\n');
        out += &kernel;
        Ok((out, interface))
    }

    /// Array parameters need positive inner extents to be valid C types.
    fn check_shapes(&self) -> Result<(), Error> {
        for (k, a) in self.program.arrays.iter().enumerate() {
            let extents = self.program.array_extents(ArrayId(k as u32));
            if extents.iter().skip(1).any(|&e| e < 1) {
                return Err(Error::Unsupported(format!(
                    "array `{}` has an empty inner dimension",
                    a.name
                )));
            }
        }
        Ok(())
    }

    pub(crate) fn use_helper(&mut self, h: Helper) {
        self.helpers.insert(h);
    }

    pub(crate) fn param_name(&self, p: ParamId) -> &str {
        &self.params[p.index()]
    }

    pub(crate) fn function_name(&self, f: FunctionId) -> &str {
        &self.functions[f.index()]
    }

    /// An integer AST expression in C, recording the helpers it calls.
    pub(crate) fn ast_expr(&mut self, e: &AstExpr) -> String {
        self.note_helpers(e);
        self.with_syntax(|s| e.to_infix(s))
    }

    fn ast_cond(&mut self, c: &AstCond) -> String {
        match c {
            AstCond::NonNegative(e) | AstCond::Zero(e) => self.note_helpers(e),
            AstCond::Divisible(e, _) => {
                self.use_helper(Helper::Mod);
                self.note_helpers(e);
            }
        }
        self.with_syntax(|s| c.to_infix(s))
    }

    /// Calls `f` with the C spelling of loop variables, parameters and integer helpers.
    fn with_syntax<R>(&self, f: impl FnOnce(&CSyntax) -> R) -> R {
        // Verified ASTs use only variables of enclosing loops, which are named on entry.
        let var = |v: &str| {
            self.loop_vars
                .get(v)
                .cloned()
                .unwrap_or_else(|| v.to_string())
        };
        let param = |p: ParamId| self.params[p.index()].clone();
        f(&CSyntax {
            var: &var,
            param: &param,
        })
    }

    fn note_helpers(&mut self, e: &AstExpr) {
        match e {
            AstExpr::Int(_) | AstExpr::Var(_) | AstExpr::Param(_) => {}
            AstExpr::Add(a, b) => {
                self.note_helpers(a);
                self.note_helpers(b);
            }
            AstExpr::Mul(_, x) => self.note_helpers(x),
            AstExpr::FloorDiv(x, _) => {
                self.use_helper(Helper::FloorD);
                self.note_helpers(x);
            }
            AstExpr::CeilDiv(x, _) => {
                self.use_helper(Helper::CeilD);
                self.note_helpers(x);
            }
            AstExpr::Mod(x, _) => {
                self.use_helper(Helper::Mod);
                self.note_helpers(x);
            }
            AstExpr::Min(items) | AstExpr::Max(items) => {
                if items.len() > 1 {
                    self.use_helper(if matches!(e, AstExpr::Min(_)) {
                        Helper::Min
                    } else {
                        Helper::Max
                    });
                }
                items.iter().for_each(|x| self.note_helpers(x));
            }
        }
    }

    fn write_function(&mut self, out: &mut String, id: FunctionId) {
        let program = self.program;
        let f = program.function(id);
        let mut scope = self.scope.clone();
        let locals: Vec<String> = f.locals.iter().map(|l| scope.fresh(&l.name)).collect();
        let types: Vec<ScalarType> = (0..f.exprs.len())
            .map(|i| f.expr_type(program, polyhedral::program::ExprId(i as u32)))
            .collect();
        let params: Vec<String> = (0..f.params)
            .map(|k| format!("{} {}", value_type(f.locals[k].ty), locals[k]))
            .collect();
        let params = if params.is_empty() {
            "void".to_string()
        } else {
            params.join(", ")
        };
        let _ = write!(
            out,
            "\nstatic {} {}({params})\n{{\n",
            value_type(f.ret),
            self.functions[id.index()]
        );
        for (local, name) in f.locals.iter().zip(&locals).skip(f.params) {
            let zero = zero_literal(local.ty);
            let _ = writeln!(out, "    {} {name} = {zero};", value_type(local.ty));
        }
        let ctx = BodyContext::Function { locals: &locals };
        self.write_block(out, &f.exprs, &types, &ctx, &f.body, 1);
        // Front ends make every path return; where the body does not visibly end in a return,
        // one more keeps C from falling off the end (the interpreter's value there is zero).
        if !matches!(f.body.last(), Some(Stmt::Return(_))) {
            let _ = writeln!(out, "    return {};", zero_literal(f.ret));
        }
        out.push_str("}\n");
    }

    fn write_block(
        &mut self,
        out: &mut String,
        arena: &polyhedral::program::ExprArena,
        types: &[ScalarType],
        ctx: &BodyContext,
        block: &[Stmt],
        indent: usize,
    ) {
        let pad = "    ".repeat(indent);
        for s in block {
            match s {
                Stmt::Assign(l, e) => {
                    let v = self.body_expr(arena, types, ctx, *e);
                    let BodyContext::Function { locals } = ctx else {
                        continue;
                    };
                    let _ = writeln!(out, "{pad}{} = {v};", locals[l.index()]);
                }
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    let c = self.body_expr(arena, types, ctx, *cond);
                    let _ = writeln!(out, "{pad}if ({c}) {{");
                    self.write_block(out, arena, types, ctx, then, indent + 1);
                    if !otherwise.is_empty() {
                        let _ = writeln!(out, "{pad}}} else {{");
                        self.write_block(out, arena, types, ctx, otherwise, indent + 1);
                    }
                    let _ = writeln!(out, "{pad}}}");
                }
                Stmt::While { cond, body } => {
                    let c = self.body_expr(arena, types, ctx, *cond);
                    let _ = writeln!(out, "{pad}while ({c}) {{");
                    self.write_block(out, arena, types, ctx, body, indent + 1);
                    let _ = writeln!(out, "{pad}}}");
                }
                Stmt::Return(e) => {
                    let v = self.body_expr(arena, types, ctx, *e);
                    let _ = writeln!(out, "{pad}return {v};");
                }
            }
        }
    }

    /// `T (*name)[d2]… = calloc(d1, sizeof *name);`: a zeroed temporary array on the heap, as
    /// the interpreter starts temporaries.
    fn temporary_declaration(&self, id: ArrayId) -> String {
        let a = self.program.array(id);
        let name = &self.arrays[id.index()];
        let store = storage_type(a.elem);
        // The sizes of a kernel function are constants; code put back into a C file spells
        // them by name, and `calloc(0, …)` may fail, so at least one element is asked for.
        let count = if self.in_source {
            let first = AstExpr::from_affine(&a.shape[0], &|_| AstExpr::Int(0));
            let n = self.with_syntax(|s| first.to_infix(s));
            format!("{n} > 0 ? {n} : 1")
        } else {
            self.program.array_extents(id)[0].max(1).to_string()
        };
        let inner = self.inner_dims(id);
        let pointer = if inner.is_empty() {
            format!("*{name}")
        } else {
            format!("(*{name}){inner}")
        };
        format!("{store} {pointer} = calloc({count}, sizeof *{name});")
    }

    /// Whether array `id` is passed to the kernel by value.
    fn by_value(&self, id: ArrayId) -> bool {
        let a = self.program.array(id);
        a.shape.is_empty() && a.role == ArrayRole::Input
    }

    /// `[d1][d2]…` for the dimensions after the first.
    fn inner_dims(&self, id: ArrayId) -> String {
        let a = self.program.array(id);
        self.with_syntax(|syntax| {
            a.shape
                .iter()
                .skip(1)
                .map(|e| {
                    format!(
                        "[{}]",
                        AstExpr::from_affine(e, &|_| AstExpr::Int(0)).to_infix(syntax)
                    )
                })
                .collect()
        })
    }

    fn write_kernel(&mut self, ast: &Ast) -> (String, KernelInterface) {
        let program = self.program;
        let mut args = Vec::new();
        let mut decls = Vec::new();
        let mut temps = Vec::new();
        for (k, a) in program.arrays.iter().enumerate() {
            let id = ArrayId(k as u32);
            let name = &self.arrays[k];
            let store = storage_type(a.elem);
            if a.role == ArrayRole::Temporary {
                temps.push(id);
                continue;
            }
            args.push(id);
            if self.by_value(id) {
                decls.push(format!("{store} {name}"));
            } else if a.shape.is_empty() {
                decls.push(format!("{store} *restrict {name}"));
            } else {
                let first = AstExpr::from_affine(&a.shape[0], &|_| AstExpr::Int(0));
                let first = self.with_syntax(|s| first.to_infix(s));
                let constness = if a.role == ArrayRole::Input {
                    "const "
                } else {
                    ""
                };
                decls.push(format!(
                    "{constness}{store} {name}[restrict {first}]{}",
                    self.inner_dims(id)
                ));
            }
        }
        let mut out = String::new();
        let decls = if decls.is_empty() {
            "void".to_string()
        } else {
            decls.join(", ")
        };
        let _ = writeln!(out, "int {}({decls})\n{{", self.kernel);
        let local = if self.in_source {
            BTreeSet::new()
        } else {
            self.find_tile_locals(ast)
        };
        let mut allocated = Vec::new();
        for &id in temps.iter().filter(|id| !local.contains(id)) {
            let a = program.array(id);
            let name = &self.arrays[id.index()];
            let store = storage_type(a.elem);
            if a.shape.is_empty() {
                let _ = writeln!(out, "    {store} {name} = 0;");
                continue;
            }
            let _ = writeln!(out, "    {}", self.temporary_declaration(id));
            allocated.push(name.clone());
        }
        if !allocated.is_empty() {
            let missing: Vec<String> = allocated.iter().map(|n| format!("!{n}")).collect();
            let _ = writeln!(out, "    if ({}) {{", missing.join(" || "));
            for n in &allocated {
                let _ = writeln!(out, "        free({n});");
            }
            let _ = writeln!(out, "        return 1;\n    }}");
        }
        self.write_node(&mut out, ast, 1, false);
        for n in &allocated {
            let _ = writeln!(out, "    free({n});");
        }
        out += "    return 0;\n}\n";
        let interface = KernelInterface {
            name: self.kernel.clone(),
            args,
        };
        (out, interface)
    }

    /// Finds the temporaries that can live in one iteration of a parallel loop (see
    /// [`crate::promote`]), records them in `tile_locals`, and returns them. Each goes to the
    /// deepest parallel loop (below parallel loops only) whose body holds all its accesses
    /// and where its box fits, the smallest box.
    fn find_tile_locals(&mut self, ast: &Ast) -> BTreeSet<ArrayId> {
        let program = self.program;
        let values = program.param_values();
        let mut totals: BTreeMap<ArrayId, usize> = BTreeMap::new();
        for (a, _, _) in crate::loops::accesses(program, ast) {
            *totals.entry(a).or_default() += 1;
        }
        // (depth, loop, array, lowest subscripts, extents, bytes)
        let mut candidates: Vec<(usize, *const Ast, TileLocal, i64)> = Vec::new();
        // Only below loops that all carry no dependence: a value a loop further out carried from
        // one of its iterations to the next would be lost with the iteration's array.
        let mut stack: Vec<(&Ast, usize, BTreeMap<String, i64>, bool)> =
            vec![(ast, 0, BTreeMap::new(), true)];
        while let Some((node, depth, fixed, outer_parallel)) = stack.pop() {
            match node {
                Ast::Block(items) => {
                    stack.extend(
                        items
                            .iter()
                            .map(|i| (i, depth, fixed.clone(), outer_parallel)),
                    );
                }
                Ast::Mark { body, .. } => stack.push((body, depth, fixed, outer_parallel)),
                Ast::If {
                    then, otherwise, ..
                } => {
                    stack.push((then, depth, fixed.clone(), outer_parallel));
                    if let Some(o) = otherwise {
                        stack.push((o, depth, fixed, outer_parallel));
                    }
                }
                Ast::User { .. } => {}
                Ast::For {
                    var,
                    lower,
                    upper,
                    body,
                    annotations,
                    ..
                } => {
                    // A loop of one iteration at the kernel's sizes fixes its variable.
                    let mut inner = fixed.clone();
                    let at = |e| crate::loops::evaluate(e, Some(&values), &fixed);
                    if let (Some(l), Some(u)) = (at(lower), at(upper)) {
                        if l == u {
                            inner.insert(var.clone(), l);
                        }
                    }
                    let parallel = outer_parallel && annotations.parallel;
                    if parallel {
                        let region = crate::promote::Region::new(program, body, true);
                        for (a, lower, extent) in region.tile_local_boxes(program, &totals, &inner)
                        {
                            let array = program.array(a);
                            let bytes = extent.iter().product::<i64>() * value_bytes(array.elem);
                            if bytes <= TILE_LOCAL_BYTES {
                                candidates.push((
                                    depth,
                                    node as *const Ast,
                                    (a, lower, extent),
                                    bytes,
                                ));
                            }
                        }
                    }
                    stack.push((body, depth + 1, inner, parallel));
                }
            }
        }
        candidates.sort_by(|x, y| y.0.cmp(&x.0).then((x.2).0.cmp(&(y.2).0)));
        let mut budgets: HashMap<*const Ast, i64> = HashMap::new();
        let mut found = BTreeSet::new();
        for (_, node, local, bytes) in candidates {
            let budget = budgets.entry(node).or_insert(TILE_LOCAL_BYTES);
            if found.contains(&local.0) || bytes > *budget {
                continue;
            }
            *budget -= bytes;
            found.insert(local.0);
            self.tile_locals.entry(node).or_default().push(local);
        }
        for boxes in self.tile_locals.values_mut() {
            boxes.sort_by_key(|b| b.0);
        }
        found
    }

    pub(super) fn write_node(
        &mut self,
        out: &mut String,
        ast: &Ast,
        indent: usize,
        in_parallel: bool,
    ) {
        let pad = "    ".repeat(indent);
        match ast {
            Ast::Block(items) => {
                for item in items {
                    self.write_node(out, item, indent, in_parallel);
                }
            }
            Ast::For {
                var,
                lower,
                upper,
                step,
                body,
                annotations,
            } => {
                let parallel = self.options.openmp
                    && annotations.parallel
                    && !in_parallel
                    && self.worth_parallel(ast);
                if let Some((stmt, depth)) = self.vector_loop(ast) {
                    self.write_vector_loop(out, ast, stmt, depth, indent, parallel);
                    return;
                }
                let simd = self.options.openmp && annotations.vectorizable && !body.contains_loop();
                let pragma = match (parallel, simd) {
                    (true, true) => Some("parallel for simd"),
                    (true, false) => Some("parallel for"),
                    (false, true) => Some("simd"),
                    (false, false) => None,
                };
                if pragma == Some("simd") && self.in_register_tile {
                    // GCC keeps the accumulators of a fully unrolled column loop in vector
                    // registers across the loops around it, but not those of an `omp simd`
                    // loop, which it reloads and stores in every iteration.
                    let (l, u) = self.bounds_at_midpoints(lower, upper);
                    let _ = writeln!(out, "{pad}#pragma GCC unroll {}", (u - l + 1).max(1));
                } else if let Some(p) = pragma {
                    let threads = match self.options.threads {
                        Some(n) if parallel => format!(" num_threads({n})"),
                        _ => String::new(),
                    };
                    let schedule = if parallel && self.uneven_iterations(ast) {
                        " schedule(static, 1)"
                    } else {
                        ""
                    };
                    let _ = writeln!(out, "{pad}#pragma omp {p}{schedule}{threads}");
                }
                if !parallel && pragma.is_none() {
                    if let Some(mark) = self.take_reduction_rows(ast) {
                        let _ = writeln!(out, "{pad}/* reduction tile: {} rows */", mark.rows);
                        self.write_reduction_tile(out, ast, &mark, indent, in_parallel);
                        return;
                    }
                }
                if self.options.register_tile && !parallel && pragma.is_none() {
                    if let Some(rows) = self.register_rows(ast) {
                        self.write_unrolled(out, ast, rows, false, indent, in_parallel);
                        return;
                    }
                }
                let lo = self.ast_expr(lower);
                let c = self.loop_var(var);
                let hi = self.ast_expr(upper);
                let held = std::mem::take(&mut self.holding);
                if pragma.is_none() && !body.contains_loop() && !held {
                    let accumulators = self.loop_accumulators(ast, &c);
                    if !accumulators.is_empty() {
                        self.write_with_accumulators(
                            out,
                            ast,
                            accumulators,
                            (&lo, &hi),
                            indent,
                            in_parallel,
                        );
                        return;
                    }
                }
                if self.in_order.remove(&(ast as *const Ast)) && self.options.openmp {
                    // One iteration at a time (see [`super::reduction`]).
                    let _ = writeln!(out, "{pad}#pragma omp simd if(simd: 0)");
                }
                let _ = writeln!(
                    out,
                    "{pad}for (int64_t {c} = {lo}; {c} <= {hi}; {c} += {step}) {{"
                );
                let (l, u) = self.bounds_at_midpoints(lower, upper);
                self.midpoints.push((var.clone(), l + (u - l).max(0) / 2));
                let locals = self
                    .tile_locals
                    .get(&(ast as *const Ast))
                    .cloned()
                    .unwrap_or_default();
                for (id, lower, extent) in &locals {
                    let name = self
                        .scope
                        .fresh(&format!("{}_tile", self.arrays[id.index()]));
                    let mut lows = Vec::new();
                    for e in lower {
                        let lo = self.scope.fresh(&format!("{name}_lo"));
                        let text = self.ast_expr(e);
                        let _ = writeln!(out, "{pad}    const int64_t {lo} = {text};");
                        lows.push(lo);
                    }
                    let dims: String = extent.iter().map(|e| format!("[{e}]")).collect();
                    let store = storage_type(self.program.array(*id).elem);
                    let _ = writeln!(out, "{pad}    {store} {name}{dims} = {{0}};");
                    let layout = (0..extent.len()).collect();
                    self.locals.push((*id, name, lows, layout));
                }
                self.write_node(out, body, indent + 1, in_parallel || parallel);
                for _ in &locals {
                    self.locals.pop();
                }
                self.midpoints.pop();
                let _ = writeln!(out, "{pad}}}");
            }
            Ast::If {
                conds,
                then,
                otherwise,
            } => {
                let conds = self.cond_list(conds);
                let _ = writeln!(out, "{pad}if ({conds}) {{");
                self.write_node(out, then, indent + 1, in_parallel);
                let mut rest = otherwise.as_deref();
                // An `else` holding only another `if` is written `else if`.
                while let Some(o) = rest {
                    match o.single_if() {
                        Some((conds, then, otherwise)) => {
                            let conds = self.cond_list(conds);
                            let _ = writeln!(out, "{pad}}} else if ({conds}) {{");
                            self.write_node(out, then, indent + 1, in_parallel);
                            rest = otherwise;
                        }
                        None => {
                            let _ = writeln!(out, "{pad}}} else {{");
                            self.write_node(out, o, indent + 1, in_parallel);
                            rest = None;
                        }
                    }
                }
                let _ = writeln!(out, "{pad}}}");
            }
            Ast::User { stmt, args } => {
                let line = self.instance(*stmt, args);
                let _ = writeln!(out, "{pad}{line}");
            }
            Ast::Mark { mark, body } => {
                if let Mark::RegisterTile(mark) = mark {
                    let micro = self
                        .options
                        .register_tile
                        .then(|| self.micro_kernel(mark, body, in_parallel));
                    match micro.flatten() {
                        Some(micro) => {
                            let (r, c) = (mark.rows, mark.cols);
                            let _ = writeln!(out, "{pad}/* register tile {r}x{c} */");
                            self.write_micro(out, mark, micro, indent, in_parallel);
                        }
                        None => self.write_node(out, body, indent, in_parallel),
                    }
                    return;
                }
                if let Mark::ReductionTile(mark) = mark {
                    let rows = self
                        .options
                        .register_tile
                        .then(|| self.reduction_rows_loop(mark, body))
                        .flatten();
                    if let Some(rows) = rows {
                        self.reduction_rows.insert(rows as *const Ast, mark.clone());
                    }
                    self.write_node(out, body, indent, in_parallel);
                    return;
                }
                if let Mark::Pack(mark) = mark {
                    match self.pack_box(mark, body, in_parallel, false) {
                        Ok(packed) => {
                            self.write_packed(out, packed, body, indent, in_parallel);
                            return;
                        }
                        Err(why) => {
                            let _ = writeln!(out, "{pad}/* {} not packed: {why} */", mark.array);
                            self.write_node(out, body, indent, in_parallel);
                            return;
                        }
                    }
                }
                let text = mark.to_string().replace("*/", "* /");
                let _ = writeln!(out, "{pad}/* mark: {text} */");
                let _ = writeln!(out, "{pad}{{");
                self.write_node(out, body, indent + 1, in_parallel);
                let _ = writeln!(out, "{pad}}}");
            }
        }
    }

    /// The C name of loop variable `var`: a name is bound once per nest (verified), so sibling
    /// loops can share it.
    pub(super) fn loop_var(&mut self, var: &str) -> String {
        if let Some(c) = self.loop_vars.get(var) {
            return c.clone();
        }
        let c = self.scope.fresh(var);
        self.loop_vars.insert(var.to_string(), c.clone());
        c
    }

    /// The unroll factor of a register tile rooted at `for_loop`, when it can have one: the
    /// loop carries no dependence, steps by one, is not the innermost, and its body is a
    /// chain of loops (bounds free of its variable) ending in a vectorizable innermost loop of
    /// statements only, with no tile-local or packed buffer starting inside, that read an
    /// array element the rows share (an operand loaded once for all of them). Jamming
    /// iterations of a loop that carries no dependence into the innermost loop only
    /// interleaves instances that touch different elements, so every element sees the same
    /// operations in the same order.
    fn register_rows(&self, for_loop: &Ast) -> Option<i64> {
        let Ast::For {
            var,
            lower,
            upper,
            step: 1,
            body,
            annotations,
        } = for_loop
        else {
            return None;
        };
        if !annotations.parallel
            || annotations.vectorizable
            || self.tile_locals.contains_key(&(for_loop as *const Ast))
        {
            return None;
        }
        let rows = i64::from(self.options.cpu.vector_registers / 4);
        let (lo, hi) = self.bounds_at_midpoints(lower, upper);
        if rows < 2 || hi - lo + 1 < rows {
            return None;
        }
        let mut at: &Ast = body;
        loop {
            match at {
                Ast::Block(items) if items.len() == 1 => at = &items[0],
                Ast::For {
                    lower,
                    upper,
                    body,
                    annotations,
                    ..
                } => {
                    let mut used = BTreeSet::new();
                    crate::loops::expr_vars(lower, &mut used);
                    crate::loops::expr_vars(upper, &mut used);
                    if used.contains(var) || self.tile_locals.contains_key(&(at as *const Ast)) {
                        return None;
                    }
                    if !body.contains_loop() {
                        // Statements only, none calling a scalar function: a call costs
                        // far more than the loads a jam shares, and the loop of one call
                        // runs the function's vector variant instead.
                        let plain = |i: &Ast| match i {
                            Ast::User { stmt, .. } => {
                                !polyhedral::vectorize::calls_function(self.program, *stmt)
                            }
                            _ => false,
                        };
                        let users = match &**body {
                            Ast::Block(items) => items.iter().all(plain),
                            other => plain(other),
                        };
                        // Some array operand the rows share, or the jam saves nothing.
                        let shared = crate::loops::accesses(self.program, body).iter().any(
                            |(a, subs, write)| {
                                let mut used = BTreeSet::new();
                                subs.iter()
                                    .for_each(|e| crate::loops::expr_vars(e, &mut used));
                                !write
                                    && !self.program.array(*a).shape.is_empty()
                                    && !used.contains(var)
                            },
                        );
                        return (annotations.vectorizable && users && shared).then_some(rows);
                    }
                    at = body;
                }
                _ => return None,
            }
        }
    }

    /// A loop unrolled `rows` times with the copies jammed into its innermost loop, then the
    /// iterations left over one at a time; the jammed innermost loops run one iteration at a
    /// time when `in_order` (see [`super::reduction`]).
    pub(super) fn write_unrolled(
        &mut self,
        out: &mut String,
        for_loop: &Ast,
        rows: i64,
        in_order: bool,
        indent: usize,
        in_parallel: bool,
    ) {
        let Ast::For {
            var,
            lower,
            upper,
            step,
            body,
            ..
        } = for_loop
        else {
            return;
        };
        let pad = "    ".repeat(indent);
        let lo = self.ast_expr(lower);
        let c = self.loop_var(var);
        let hi = self.ast_expr(upper);
        let (l, u) = self.bounds_at_midpoints(lower, upper);
        self.midpoints.push((var.clone(), l + (u - l).max(0) / 2));
        let _ = writeln!(out, "{pad}{{");
        let _ = writeln!(out, "{pad}    int64_t {c} = {lo};");
        let _ = writeln!(
            out,
            "{pad}    for (; {c} <= {hi} - {}; {c} += {rows}) {{",
            rows - 1
        );
        let jammed = jam(body, var, rows);
        if in_order {
            self.run_in_order(&jammed);
        }
        self.write_node(out, &jammed, indent + 2, in_parallel);
        let _ = writeln!(out, "{pad}    }}");
        let _ = writeln!(out, "{pad}    for (; {c} <= {hi}; {c} += {step}) {{");
        self.write_node(out, body, indent + 2, in_parallel);
        let _ = writeln!(out, "{pad}    }}");
        let _ = writeln!(out, "{pad}}}");
        self.midpoints.pop();
    }

    /// The box of the accesses below a pack mark, when the array can be packed there: (array,
    /// lowest subscripts, extents, layout, whether the region writes it). A `nested` buffer
    /// may hold part of a buffer already in scope (it is copied from and back into that one).
    pub(super) fn pack_box(
        &self,
        mark: &PackMark,
        body: &Ast,
        in_parallel: bool,
        nested: bool,
    ) -> Result<Packed, String> {
        let program = self.program;
        let id = program.array_by_name(&mark.array).ok_or("no such array")?;
        let array = program.array(id);
        let mut sorted = mark.layout.clone();
        sorted.sort_unstable();
        if array.shape.is_empty() || sorted != (0..array.shape.len()).collect::<Vec<_>>() {
            return Err("the layout does not fit the array".into());
        }
        if !nested && self.locals.iter().any(|(a, _, _, _)| *a == id) {
            return Err("already local".into());
        }
        // Code that goes back into its C file runs at whatever sizes the file is built with, so
        // the box must not depend on them.
        let region = crate::promote::Region::new(program, body, !self.in_source);
        let written = region.all.iter().any(|(a, _, w)| *a == id && *w);
        if written && in_parallel && !mark.owned {
            return Err("written inside a parallel loop".into());
        }
        // A nested box is read from and written into the buffer around it, so it must not
        // reach past that buffer's box: it is the exact hull of the accesses.
        let fixed = Default::default();
        let (lower, extent) = if nested {
            region.enclosing_box(program, id, &fixed)
        } else {
            // Inside a parallel loop a box must not reach another iteration's elements: those
            // may be written meanwhile, and a written box's copy-out would overwrite them.
            region.covering_box(program, id, &fixed, !in_parallel)
        }
        .ok_or("the accesses have no box of constant size")?;
        let bytes = extent.iter().product::<i64>() * value_bytes(array.elem);
        if bytes > PACKED_BYTES {
            return Err(format!(
                "{bytes} bytes exceed the {PACKED_BYTES} of a packed buffer"
            ));
        }
        Ok(Packed {
            array: id,
            lower,
            extent,
            layout: mark.layout.clone(),
            written,
            inside: false,
        })
    }

    /// A packed region: the buffer, the copy-in, the region reading and writing the buffer,
    /// and the copy-out of a written array. Elements of the box outside the array (a partial
    /// last tile) are neither copied in nor out; the region never touches them.
    pub(super) fn write_packed(
        &mut self,
        out: &mut String,
        packed: Packed,
        body: &Ast,
        indent: usize,
        in_parallel: bool,
    ) {
        let pad = "    ".repeat(indent);
        let Packed {
            array: id,
            lower,
            extent,
            layout,
            written,
            inside,
        } = packed;
        let array = self.program.array(id);
        let global = self.arrays[id.index()].clone();
        let name = self.scope.fresh(&format!("{global}_packed"));
        let store = storage_type(array.elem);
        let _ = writeln!(out, "{pad}{{");
        let mut lows = Vec::new();
        let mut highs = Vec::new();
        for (d, e) in lower.iter().enumerate() {
            let lo = self.scope.fresh(&format!("{name}_lo"));
            let text = self.ast_expr(e);
            let _ = writeln!(out, "{pad}    const int64_t {lo} = {text};");
            let shape = AstExpr::from_affine(&array.shape[d], &|_| AstExpr::Int(0));
            let shape = self.ast_expr(&shape);
            let ext = extent[d];
            highs.push(format!("({lo} + {ext} < {shape} ? {lo} + {ext} : {shape})"));
            lows.push(lo);
        }
        let dims: String = layout.iter().map(|&d| format!("[{}]", extent[d])).collect();
        let _ = writeln!(
            out,
            "{pad}    {store} {name}{dims} __attribute__((aligned({PACKED_ALIGN})));"
        );
        let vars: Vec<String> = (0..lower.len())
            .map(|d| self.scope.fresh(&format!("{name}_{d}")))
            .collect();
        let packed_elem: String = layout
            .iter()
            .map(|&d| format!("[{} - {}]", vars[d], lows[d]))
            .collect();
        // The elements come from the buffer of the array in scope, if any, else the array.
        let global_elem: String = match self.locals.iter().rev().find(|l| l.0 == id) {
            Some((_, outer, outer_lows, outer_layout)) => {
                let mut text = outer.clone();
                for &d in outer_layout {
                    let _ = write!(text, "[{} - {}]", vars[d], outer_lows[d]);
                }
                text
            }
            None => {
                let subs: String = vars.iter().map(|v| format!("[{v}]")).collect();
                format!("{global}{subs}")
            }
        };
        let copy = |out: &mut String, stmt: &str| {
            for d in 0..vars.len() {
                let p = "    ".repeat(indent + 1 + d);
                let (v, lo, hi) = (&vars[d], &lows[d], &highs[d]);
                let _ = if inside {
                    let ext = extent[d];
                    writeln!(
                        out,
                        "{p}for (int64_t {v} = {lo}; {v} < {lo} + {ext}; {v} += 1) {{"
                    )
                } else {
                    writeln!(
                        out,
                        "{p}for (int64_t {v} = ({lo} > 0 ? {lo} : 0); {v} < {hi}; {v} += 1) {{"
                    )
                };
            }
            let _ = writeln!(out, "{}{stmt}", "    ".repeat(indent + 1 + vars.len()));
            for d in (0..vars.len()).rev() {
                let _ = writeln!(out, "{}}}", "    ".repeat(indent + 1 + d));
            }
        };
        copy(out, &format!("{name}{packed_elem} = {global_elem};"));
        self.locals.push((id, name.clone(), lows.clone(), layout));
        self.write_node(out, body, indent + 1, in_parallel);
        self.locals.pop();
        if written {
            copy(out, &format!("{global_elem} = {name}{packed_elem};"));
        }
        let _ = writeln!(out, "{pad}}}");
    }

    /// A loop's bounds at the program's sizes, with the enclosing loops' variables at the
    /// middle of their ranges.
    pub(super) fn bounds_at_midpoints(&self, lower: &AstExpr, upper: &AstExpr) -> (i64, i64) {
        let params = self.program.param_values();
        let var_of = |name: &str| {
            self.midpoints
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map_or(0, |&(_, v)| v)
        };
        (lower.eval(&var_of, &params), upper.eval(&var_of, &params))
    }

    /// Whether a parallel loop runs enough statement instances per execution, at the
    /// program's sizes, to pay for starting a parallel region (see
    /// [`Options::min_parallel_work`]).
    pub(super) fn worth_parallel(&self, for_loop: &Ast) -> bool {
        if self.options.min_parallel_work == 0 {
            return true;
        }
        // A loop of one iteration gives the second thread nothing to do, however much work
        // that iteration holds (the one tile of a wavefront's narrow diagonals).
        if let Ast::For {
            lower, upper, step, ..
        } = for_loop
        {
            let (lo, hi) = self.bounds_at_midpoints(lower, upper);
            if hi < lo + (*step).max(1) {
                return false;
            }
        }
        let params = self.program.param_values();
        let mut bindings = self.midpoints.clone();
        ast::estimate_work(for_loop, &params, &mut bindings)
            >= self.options.min_parallel_work as f64
    }

    /// Whether the first and the second half of a parallel loop's iterations do markedly
    /// different amounts of work at the program's sizes (one half more than 1.5 times the
    /// other), as in triangular nests: contiguous blocks of such a loop would load one thread
    /// with most of the work, so its iterations are dealt out one at a time instead. Loops
    /// whose work rises and falls symmetrically (wavefronts) keep contiguous blocks, which
    /// keep neighbouring tiles, and the data they share, on one thread.
    fn uneven_iterations(&self, for_loop: &Ast) -> bool {
        let Ast::For {
            var,
            lower,
            upper,
            step,
            body,
            ..
        } = for_loop
        else {
            return false;
        };
        let params = self.program.param_values();
        let mut bindings = self.midpoints.clone();
        let (lo, hi) = self.bounds_at_midpoints(lower, upper);
        let step = (*step).max(1);
        if hi <= lo {
            return false;
        }
        // The work at the first, quarter, middle, three-quarter and last iteration; each
        // half's work by the trapezoid rule.
        let w: Vec<f64> = (0..=4)
            .map(|q| {
                let v = lo + (hi - lo) * q / 4 / step * step;
                bindings.push((var.clone(), v));
                let w = ast::estimate_work(body, &params, &mut bindings);
                bindings.pop();
                w
            })
            .collect();
        let first = w[0] + 2.0 * w[1] + w[2];
        let second = w[2] + 2.0 * w[3] + w[4];
        first.max(second) > 1.5 * first.min(second)
    }

    /// Conditions joined by `&&` (`true` for none).
    fn cond_list(&mut self, conds: &[AstCond]) -> String {
        let conds: Vec<String> = conds.iter().map(|c| self.ast_cond(c)).collect();
        if conds.is_empty() {
            "true".to_string()
        } else {
            conds.join(" && ")
        }
    }

    /// The array dimension each dimension of the tile-local or packed buffer of `array` in
    /// scope stores, outermost first; `None` when the array is accessed in place.
    pub(super) fn local_layout(&self, array: ArrayId) -> Option<&[usize]> {
        self.locals
            .iter()
            .rev()
            .find(|(a, _, _, _)| *a == array)
            .map(|(_, _, _, layout)| layout.as_slice())
    }

    /// The C text of an array element accessed by a statement instance (`divs`: the
    /// statement's division variables).
    pub(super) fn element(
        &mut self,
        divs: &[polyhedral::program::Division],
        access: &polyhedral::program::Access,
        args: &[AstExpr],
    ) -> String {
        let id = access.array;
        let a = self.program.array(id);
        let name = self.arrays[id.index()].clone();
        if a.shape.is_empty() {
            let direct = self.in_source || self.by_value(id) || a.role == ArrayRole::Temporary;
            return if direct { name } else { format!("{name}[0]") };
        }
        if let Some((_, local, lows, layout)) = self
            .locals
            .iter()
            .rev()
            .find(|(a, _, _, _)| *a == id)
            .cloned()
        {
            let subs: Vec<String> = access
                .subscripts
                .iter()
                .map(|sub| self.ast_expr(&AstExpr::from_subscript(divs, sub, &|d| args[d].clone())))
                .collect();
            let mut text = local;
            for &d in &layout {
                let _ = write!(text, "[{} - {}]", subs[d], lows[d]);
            }
            return self.accumulated(text);
        }
        let mut text = name;
        for sub in &access.subscripts {
            let e = AstExpr::from_subscript(divs, sub, &|d| args[d].clone());
            let _ = write!(text, "[{}]", self.ast_expr(&e));
        }
        self.accumulated(text)
    }

    /// One statement instance: `A[i][j] = value;`.
    pub(super) fn instance(&mut self, id: StmtId, args: &[AstExpr]) -> String {
        let program = self.program;
        let stmt = &program.statements[id.index()];
        let types: Vec<ScalarType> = (0..stmt.exprs.len())
            .map(|i| program.expr_type(stmt, polyhedral::program::ExprId(i as u32)))
            .collect();
        let mut reads = Vec::new();
        for access in &stmt.reads {
            let e = self.element(&stmt.divs, access, args);
            if program.array(access.array).elem == ScalarType::F16 {
                self.use_helper(Helper::H2F);
                reads.push(format!("pf_h2f({e})"));
            } else {
                reads.push(e);
            }
        }
        let ctx = BodyContext::Statement { args, reads };
        let value = self.body_expr(&stmt.exprs, &types, &ctx, stmt.body);
        let target = self.element(&stmt.divs, &stmt.write, args);
        if program.array(stmt.write.array).elem == ScalarType::F16 {
            self.use_helper(Helper::F2H);
            format!("{target} = pf_f2h({value});")
        } else {
            format!("{target} = {value};")
        }
    }
}

/// `body` with the statements of its innermost loop repeated for `var`, `var + 1`, …,
/// `var + rows - 1` (see [`Writer::register_rows`] for the shape it expects).
pub(super) fn jam(body: &Ast, var: &str, rows: i64) -> Ast {
    jam_strided(body, var, rows, 1)
}

/// [`jam`] with the copies `stride` rows apart: for `var`, `var + stride`, …,
/// `var + (rows - 1) * stride`.
pub(super) fn jam_strided(body: &Ast, var: &str, rows: i64, stride: i64) -> Ast {
    match body {
        Ast::Block(items) => Ast::Block(
            items
                .iter()
                .map(|i| jam_strided(i, var, rows, stride))
                .collect(),
        ),
        Ast::For {
            var: v,
            lower,
            upper,
            step,
            body,
            annotations,
        } => Ast::For {
            var: v.clone(),
            lower: lower.clone(),
            upper: upper.clone(),
            step: *step,
            body: Box::new(jam_strided(body, var, rows, stride)),
            annotations: *annotations,
        },
        Ast::User { stmt, args } => Ast::Block(
            (0..rows)
                .map(|r| Ast::User {
                    stmt: *stmt,
                    args: args.iter().map(|a| shift(a, var, r * stride)).collect(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `e` with `var` replaced by `var + by`.
pub(super) fn shift(e: &AstExpr, var: &str, by: i64) -> AstExpr {
    match e {
        AstExpr::Var(v) if v == var => AstExpr::plus(e.clone(), AstExpr::Int(by)),
        AstExpr::Int(_) | AstExpr::Var(_) | AstExpr::Param(_) => e.clone(),
        AstExpr::Add(a, b) => AstExpr::plus(shift(a, var, by), shift(b, var, by)),
        AstExpr::Mul(k, a) => AstExpr::mul(*k, shift(a, var, by)),
        AstExpr::FloorDiv(a, k) => AstExpr::floor_div(shift(a, var, by), *k),
        AstExpr::CeilDiv(a, k) => AstExpr::ceil_div(shift(a, var, by), *k),
        AstExpr::Mod(a, k) => AstExpr::Mod(Box::new(shift(a, var, by)), *k),
        AstExpr::Min(items) => AstExpr::min(items.iter().map(|i| shift(i, var, by)).collect()),
        AstExpr::Max(items) => AstExpr::max(items.iter().map(|i| shift(i, var, by)).collect()),
    }
}

/// Bytes of one stored element of `ty`.
fn value_bytes(ty: ScalarType) -> i64 {
    match ty {
        ScalarType::F16 => 2,
        ScalarType::F32 | ScalarType::I32 => 4,
        ScalarType::F64 => 8,
        ScalarType::Bool => 1,
    }
}

fn zero_literal(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::F16 | ScalarType::F32 => "0.0f",
        ScalarType::F64 => "0.0",
        ScalarType::I32 => "0",
        ScalarType::Bool => "false",
    }
}
