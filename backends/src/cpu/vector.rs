//! Vector variants of scalar functions, in C with GCC/Clang vector extensions.
//!
//! A loop whose body is one statement that calls a scalar function, and whose iterations are
//! independent, runs `W` iterations at a time (`W` lanes of 32-bit values in the target
//! description's vector registers, or of 64-bit values where the body or a function it calls
//! has an `f64` value: [`super::lanes`]) through the masked form of [`polyhedral::vectorize`]:
//! the statement body and every function it reaches become code on `pf_vWf` / `pf_vWi` /
//! `pf_vWd` vectors, masks are `pf_vWi` (or `pf_vWl`) vectors of 0 / -1, selects are bitwise
//! blends, a branch on superword condition is `if (pf_any_vW(mask))`, and a divergent loop
//! exits when its active mask is empty. Uniform values stay scalars, linear ones a scalar for
//! lane 0 and their stride; a function variant takes uniform and linear parameters as scalars
//! and the caller's mask last.
//! The iterations left over when the trip count is not a multiple of `W` run the scalar code.
//!
//! Where the masked form has a divergent loop, one call runs several independent vectors
//! (`profit::interleave`, from the target's vector registers): each iteration of the loop
//! is a chain of dependent operations, and a second vector's chain fills the latencies of the
//! first. Their variables are suffixed `_0`, `_1`, …; a function variant then takes each
//! varying parameter and the mask once per vector and returns a struct of vectors. Whole
//! vectors left over after the groups run one at a time.
//!
//! Contiguous accesses whose first lane is a whole number of vectors from the array's start
//! whenever the loop's first iteration is ([`aligned::alignment`]) are tested once per loop:
//! when all their first vectors are aligned, every vector of the loop is, and a copy of the
//! vector loops tells the C compiler so (`__builtin_assume_aligned`). The runner allocates
//! arrays on 64-byte boundaries.
//!
//! Why vector extensions rather than `#pragma omp declare simd`: measured with GCC 12 on
//! mandelbrot (256 × 256, one thread), `escape` under `declare simd uniform(ci, limit)
//! notinbranch` called from an `omp simd` loop took the same time as the scalar code (66.7 ms
//! against 65.9 ms): GCC reports the function's loop "not vectorized: control flow in loop"
//! and calls the scalar body lane by lane. The masked form written out runs all lanes of the
//! divergent loop at once (several times faster, see `cargo xtask bench vector`).
//!
//! Exactness is that of the scalar code: `f32` and `f64` `+ - * /` and comparisons are
//! correctly rounded per lane, `f16` ones are computed in `float` and rounded to `f16` as the
//! scalar code rounds them; `i32` arithmetic wraps (computed on unsigned lanes); integer
//! division, math functions, float-to-integer conversions and conversions that would round
//! twice (`f64` or `i32` to `f16`) run lane by lane through the scalar helpers; `min` / `max`
//! return the other operand for NaN as `fminf` does. `f16` arrays are read and written lane by
//! lane (`pf_h2f`, `pf_f2h`).

use std::collections::HashMap;
use std::fmt::Write;

use polyhedral::ast::{Ast, AstExpr};
use polyhedral::program::{Access, BinaryOp, ScalarType, StmtId, UnaryOp};
use polyhedral::vectorize::classify::Class;
use polyhedral::vectorize::mask::{MNode, MaskDef, MaskId, Region};
use polyhedral::vectorize::ssa::{Join, Op, ValueId};
use polyhedral::vectorize::{
    access_pattern, aligned, calls_function, AccessPattern, VectorFunction, VectorProgram,
};

use super::profit;

use super::body::{literal, value_type};
use super::helpers::Helper;
use super::lanes::{self, Lanes};
use super::writer::Writer;

/// The vector variants written so far, and their C names.
pub(crate) struct VectorState {
    pub program: VectorProgram,
    /// Lanes per vector.
    pub width: usize,
    /// Vector registers of the target, which bound how many vectors one call runs at once.
    pub registers: u32,
    /// The C names of the function variants written, by (variant, vectors per call, lanes).
    names: HashMap<(usize, usize, Lanes), String>,
    /// Whether a variant with 64-bit lanes was written, and one with `f16` values.
    wide: bool,
    half: bool,
    /// The C text of the function variants, each after the ones it calls.
    pub text: String,
}

impl VectorState {
    pub fn new(
        program: &polyhedral::program::Program,
        width: usize,
        registers: u32,
    ) -> VectorState {
        VectorState {
            program: VectorProgram::new(program),
            width,
            registers,
            names: HashMap::new(),
            wide: false,
            half: false,
            text: String::new(),
        }
    }

    /// The lanes variant `variant` runs on: 64-bit where it or a function it calls has an
    /// `f64` value, else 32-bit.
    fn lanes(&self, variant: usize) -> Lanes {
        let bytes = 4 * self.width;
        let wide = self.program.has_type(variant, ScalarType::F64);
        Lanes {
            n: if wide { bytes / 8 } else { bytes / 4 },
            wide,
        }
    }

    /// The typedefs and helpers the variants written use.
    pub fn prelude(&self) -> String {
        let mut out = lanes::prelude(self.width);
        if self.half {
            out += &lanes::f16_rounding(self.width);
        }
        if self.wide {
            let n = self.width / 2;
            out += &lanes::prelude(n);
            if self.half {
                out += &lanes::f16_rounding(n);
            }
            out += &lanes::wide_prelude(n);
        }
        out
    }
}

/// Whether `e` mentions loop variable `var`.
fn mentions(e: &AstExpr, var: &str) -> bool {
    match e {
        AstExpr::Int(_) | AstExpr::Param(_) => false,
        AstExpr::Var(v) => v == var,
        AstExpr::Add(a, b) => mentions(a, var) || mentions(b, var),
        AstExpr::Mul(_, x)
        | AstExpr::FloorDiv(x, _)
        | AstExpr::CeilDiv(x, _)
        | AstExpr::Mod(x, _) => mentions(x, var),
        AstExpr::Min(items) | AstExpr::Max(items) => items.iter().any(|x| mentions(x, var)),
    }
}

/// `e` with loop variable `var` replaced by `var + k`.
fn shifted(e: &AstExpr, var: &str, k: i64) -> AstExpr {
    match e {
        AstExpr::Var(v) if v == var => {
            AstExpr::Add(Box::new(AstExpr::Var(v.clone())), Box::new(AstExpr::Int(k)))
        }
        AstExpr::Add(a, b) => {
            AstExpr::Add(Box::new(shifted(a, var, k)), Box::new(shifted(b, var, k)))
        }
        AstExpr::Mul(c, x) => AstExpr::Mul(*c, Box::new(shifted(x, var, k))),
        AstExpr::FloorDiv(x, c) => AstExpr::FloorDiv(Box::new(shifted(x, var, k)), *c),
        AstExpr::CeilDiv(x, c) => AstExpr::CeilDiv(Box::new(shifted(x, var, k)), *c),
        AstExpr::Mod(x, c) => AstExpr::Mod(Box::new(shifted(x, var, k)), *c),
        AstExpr::Min(items) => AstExpr::Min(items.iter().map(|x| shifted(x, var, k)).collect()),
        AstExpr::Max(items) => AstExpr::Max(items.iter().map(|x| shifted(x, var, k)).collect()),
        other => other.clone(),
    }
}

/// Where the code of one variant's values comes from.
enum Site<'a> {
    /// A function variant: its parameters' C names.
    Function { params: &'a [String] },
    /// A statement body in the vector loop over `var`: the instance's iterators, and whether
    /// the first vectors of the accesses [`Writer::aligned_accesses`] lists are aligned.
    Statement {
        var: &'a str,
        args: &'a [AstExpr],
        aligned: bool,
    },
}

/// What the vector loops of one loop of the AST are written from.
struct VectorLoops<'a> {
    variant: usize,
    lanes: Lanes,
    copies: usize,
    /// C names: the loop variable, the vector counter, the first and last iteration, the
    /// number of groups of `copies` vectors.
    c: &'a str,
    k: &'a str,
    lo: &'a str,
    hi: &'a str,
    full: &'a str,
    var: &'a str,
    args: &'a [AstExpr],
    parallel: bool,
}

impl Writer<'_> {
    /// The statement and iterator depth of a loop that runs vectorised, if `ast` is one: a
    /// step-1 loop without dependences whose body is one instance of a statement that calls a
    /// function, of types the vector code handles, indexed by the loop variable directly.
    pub(super) fn vector_loop(&mut self, ast: &Ast) -> Option<(StmtId, usize)> {
        let width = self.vector.as_ref()?.width;
        let Ast::For {
            var,
            step: 1,
            body,
            annotations,
            ..
        } = ast
        else {
            return None;
        };
        if !(annotations.parallel || annotations.vectorizable) || width < 2 {
            return None;
        }
        // A temporary living in one iteration of this loop is declared by the scalar loop.
        if self.tile_locals.contains_key(&(ast as *const Ast)) {
            return None;
        }
        let mut inner: &Ast = body;
        while let Ast::Block(items) = inner {
            match items.as_slice() {
                [one] => inner = one,
                _ => return None,
            }
        }
        let Ast::User { stmt, args } = inner else {
            return None;
        };
        let program = self.program;
        if !calls_function(program, *stmt) {
            return None;
        }
        let depth = args.iter().position(|a| *a == AstExpr::Var(var.clone()))?;
        if args
            .iter()
            .enumerate()
            .any(|(d, a)| d != depth && mentions(a, var))
        {
            return None;
        }
        let s = &program.statements[stmt.index()];
        let stored =
            |a: &polyhedral::program::Access| program.array(a.array).elem != ScalarType::Bool;
        if !stored(&s.write)
            || !s.reads.iter().all(stored)
            || access_pattern(&s.write, depth) == AccessPattern::Uniform
        {
            return None;
        }
        let state = self.vector.as_mut()?;
        let variant = state.program.statement_variant(program, *stmt, depth);
        // Variants with 64-bit lanes have half as many.
        if state.lanes(variant).n < 2 {
            return None;
        }
        if !self.options.vectorize_plain_functions
            && profit::compiler_vectorises(&state.program, variant).is_some()
        {
            return None;
        }
        Some((*stmt, depth))
    }

    /// Writes loop `ast` (accepted by [`Writer::vector_loop`]) as a loop over vectors of
    /// `W` iterations (an OpenMP parallel loop when `parallel`) and a scalar loop for the rest.
    pub(super) fn write_vector_loop(
        &mut self,
        out: &mut String,
        ast: &Ast,
        stmt: StmtId,
        depth: usize,
        indent: usize,
        parallel: bool,
    ) {
        let Ast::For {
            var,
            lower,
            upper,
            body,
            ..
        } = ast
        else {
            return;
        };
        let mut inner: &Ast = body;
        while let Ast::Block(items) = inner {
            inner = &items[0];
        }
        let Ast::User { args, .. } = inner else {
            return;
        };
        let (lanes, variant, copies) = {
            let state = self
                .vector
                .as_mut()
                .expect("vector loops need vector state");
            let v = state.program.statement_variant(self.program, stmt, depth);
            let copies = profit::interleave(&state.program, v, state.registers);
            let lanes = state.lanes(v);
            state.wide |= lanes.wide;
            state.half |= state.program.has_type(v, ScalarType::F16);
            (lanes, v, copies)
        };
        let w = lanes.n;
        self.ensure_callees(variant, copies, lanes);
        if copies > 1 {
            self.ensure_callees(variant, 1, lanes);
        }
        let pad = "    ".repeat(indent);
        let c = match self.loop_vars.get(var) {
            Some(c) => c.clone(),
            None => {
                let c = self.scope.fresh(var);
                self.loop_vars.insert(var.clone(), c.clone());
                c
            }
        };
        let lo_name = self.scope.fresh("pf_lo");
        let full = self.scope.fresh("pf_full");
        let k = self.scope.fresh("pf_k");
        let lo = self.ast_expr(lower);
        let hi = self.ast_expr(upper);
        let step = w * copies;
        let _ = writeln!(out, "{pad}{{");
        let _ = writeln!(out, "{pad}    const int64_t {lo_name} = {lo};");
        let _ = writeln!(
            out,
            "{pad}    const int64_t {full} = {hi} >= {lo_name} ? ({hi} - {lo_name} + 1) / {step} : 0;"
        );
        // With every access that may be aligned aligned in the first vector, all vectors are:
        // the loop then runs a copy of the vector loops with aligned loads and stores.
        let aligned = self.aligned_accesses(stmt, depth, w);
        let loops = VectorLoops {
            variant,
            lanes,
            copies,
            c: &c,
            k: &k,
            lo: &lo_name,
            hi: &hi,
            full: &full,
            var,
            args,
            parallel,
        };
        if aligned.is_empty() {
            self.write_vector_loops(out, &loops, false, indent + 1);
        } else {
            let al = self.scope.fresh("pf_aligned");
            let bytes: Vec<usize> = aligned
                .iter()
                .map(|a| lanes.bytes(self.program.array(a.array).elem))
                .collect();
            let addresses: Vec<String> = aligned
                .iter()
                .map(|a| {
                    let divs = &self.program.statements[stmt.index()].divs;
                    format!("(uintptr_t)&{}", self.element(divs, a, args))
                })
                .collect();
            // Vectors of one size test their addresses' OR once.
            let test = if bytes.iter().all(|b| *b == bytes[0]) {
                format!("(({}) % {}) == 0", addresses.join(" | "), bytes[0])
            } else {
                let each: Vec<String> = addresses
                    .iter()
                    .zip(&bytes)
                    .map(|(a, b)| format!("{a} % {b} == 0"))
                    .collect();
                each.join(" && ")
            };
            let _ = writeln!(out, "{pad}    int {al} = 0;");
            let _ = writeln!(
                out,
                "{pad}    if ({full} > 0) {{\n{pad}        const int64_t {c} = {lo_name};\n{pad}        {al} = {test};\n{pad}    }}"
            );
            let _ = writeln!(out, "{pad}    if ({al}) {{");
            self.write_vector_loops(out, &loops, true, indent + 2);
            let _ = writeln!(out, "{pad}    }} else {{");
            self.write_vector_loops(out, &loops, false, indent + 2);
            let _ = writeln!(out, "{pad}    }}");
        }
        let step = w * copies;
        let mut rest = format!("{lo_name} + {step} * {full}");
        if copies > 1 {
            rest = format!(
                "{lo_name} + {step} * {full} + ({hi} - {lo_name} + 1 - {step} * {full}) / {w} * {w}"
            );
        }
        let _ = writeln!(
            out,
            "{pad}    for (int64_t {c} = {rest}; {c} <= {hi}; {c} += 1) {{"
        );
        let line = self.instance(stmt, args);
        let _ = writeln!(out, "{pad}        {line}");
        let _ = writeln!(out, "{pad}    }}");
        let _ = writeln!(out, "{pad}}}");
    }

    /// The contiguous accesses of statement `stmt` vectorised at `depth` whose first lane is
    /// a whole number of `w`-lane vectors from the array's start when the loop's first
    /// iteration is (those a run-time test of the first vector's addresses may find aligned);
    /// `f16` arrays are read and written lane by lane, so they are never among them.
    fn aligned_accesses(
        &self,
        stmt: StmtId,
        depth: usize,
        w: usize,
    ) -> Vec<polyhedral::program::Access> {
        let s = &self.program.statements[stmt.index()];
        std::iter::once(&s.write)
            .chain(&s.reads)
            .filter(|a| {
                self.program.array(a.array).elem != ScalarType::F16
                    && aligned::alignment(self.program, a, depth).is_some_and(|n| n % w as i64 == 0)
            })
            .cloned()
            .collect()
    }

    /// The loop over groups of `copies` vectors (an OpenMP parallel loop when `parallel`),
    /// then the one over the whole vectors left; `aligned` when the first vector of every
    /// access [`Writer::aligned_accesses`] lists is aligned.
    fn write_vector_loops(
        &mut self,
        out: &mut String,
        l: &VectorLoops,
        aligned: bool,
        indent: usize,
    ) {
        let w = l.lanes.n;
        let (mask, code) = (l.lanes.mask(), l.lanes.mask_code());
        let pad = "    ".repeat(indent);
        let (c, k, lo, hi, full) = (l.c, l.k, l.lo, l.hi, l.full);
        let step = w * l.copies;
        if l.parallel {
            let threads = match self.options.threads {
                Some(n) => format!(" num_threads({n})"),
                None => String::new(),
            };
            let _ = writeln!(out, "{pad}#pragma omp parallel for{threads}");
        }
        let _ = writeln!(out, "{pad}for (int64_t {k} = 0; {k} < {full}; {k} += 1) {{");
        let _ = writeln!(out, "{pad}    const int64_t {c} = {lo} + {step} * {k};");
        let site = Site::Statement {
            var: l.var,
            args: l.args,
            aligned,
        };
        let text = self.variant_body(l.variant, &site, "pf_all", l.copies, l.lanes, indent + 1);
        let _ = writeln!(
            out,
            "{pad}    const {mask} pf_all = pf_splat_v{w}{code}(-1);"
        );
        out.push_str(&text);
        let _ = writeln!(out, "{pad}}}");
        if l.copies > 1 {
            // Whole vectors left over run one at a time.
            let _ = writeln!(
                out,
                "{pad}for (int64_t {c} = {lo} + {step} * {full}; {c} + {} <= {hi}; {c} += {w}) {{",
                w - 1
            );
            let text = self.variant_body(l.variant, &site, "pf_all", 1, l.lanes, indent + 1);
            let _ = writeln!(
                out,
                "{pad}    const {mask} pf_all = pf_splat_v{w}{code}(-1);"
            );
            out.push_str(&text);
            let _ = writeln!(out, "{pad}}}");
        }
    }

    /// Writes the variants, running `copies` vectors per call, of the functions `variant`
    /// calls (and those they call) unless written.
    fn ensure_callees(&mut self, variant: usize, copies: usize, lanes: Lanes) {
        let state = self.vector.as_ref().expect("vector state");
        let mut callees: Vec<usize> = state.program.variants[variant]
            .calls
            .values()
            .copied()
            .collect();
        callees.sort();
        callees.dedup();
        for callee in callees {
            let state = self.vector.as_ref().expect("vector state");
            let v = &state.program.variants[callee];
            // Calls whose arguments are all uniform call the scalar function.
            if v.params.iter().all(|c| c.is_uniform())
                || state.names.contains_key(&(callee, copies, lanes))
            {
                continue;
            }
            self.ensure_callees(callee, copies, lanes);
            self.write_function_variant(callee, copies, lanes);
        }
    }

    /// Writes function variant `variant` running `copies` vectors per call: each varying
    /// parameter and the mask are passed once per vector, and the results come back in a
    /// struct of `copies` vectors.
    fn write_function_variant(&mut self, variant: usize, copies: usize, lanes: Lanes) {
        let f = {
            let state = self.vector.as_ref().expect("vector state");
            state.program.variants[variant].clone()
        };
        let w = lanes.n;
        let fid = f.function.expect("function variants name their function");
        let codes: String = f.params.iter().map(|c| c.code()).collect();
        let times = if copies > 1 {
            format!("x{copies}")
        } else {
            String::new()
        };
        let base = format!("{}_v{w}{times}_{codes}", self.function_name(fid));
        let name = self.scope.fresh(&base);
        let params: Vec<String> = (0..f.params.len())
            .map(|k| self.scope.fresh(&format!("pf_{}", f.ssa.locals[k].name)))
            .collect();
        let mut decls = Vec::new();
        for (k, (c, n)) in f.params.iter().zip(&params).enumerate() {
            let ty = c_type(lanes, f.ssa.locals[k].ty, *c);
            if *c == Class::Varying && copies > 1 {
                decls.extend((0..copies).map(|g| format!("{ty} {n}_{g}")));
            } else {
                decls.push(format!("{ty} {n}"));
            }
        }
        let mask = lanes.mask();
        if copies > 1 {
            decls.extend((0..copies).map(|g| format!("{mask} pf_m0_{g}")));
        } else {
            decls.push(format!("{mask} pf_m0"));
        }
        let ret = result_type(lanes, f.ssa.ret, copies);
        let site = Site::Function { params: &params };
        let body = self.variant_body(variant, &site, "pf_m0", copies, lanes, 1);
        let text = format!(
            "\nstatic inline {ret} {name}({})\n{{\n{body}}}\n",
            decls.join(", ")
        );
        let state = self.vector.as_mut().expect("vector state");
        state.names.insert((variant, copies, lanes), name);
        state.text += &text;
    }

    /// The C statements of a variant's masked form running `copies` vectors at once, the
    /// entry mask named `entry`: a function variant ends in its `return`, a statement's stores
    /// its value.
    fn variant_body(
        &mut self,
        variant: usize,
        site: &Site,
        entry: &str,
        copies: usize,
        lanes: Lanes,
        indent: usize,
    ) -> String {
        let f = {
            let state = self.vector.as_ref().expect("vector state");
            state.program.variants[variant].clone()
        };
        let mut e = Emitter {
            lanes,
            w: lanes.n,
            f: &f,
            site,
            entry: entry.to_string(),
            copies,
            copy: 0,
            out: String::new(),
        };
        let pad = "    ".repeat(indent);
        // Every value and mask is declared first: a region skipped by a branch on superword
        // condition leaves its values as declared, and selects read them.
        for (k, v) in f.ssa.values.iter().enumerate() {
            if matches!(v.op, Op::Param(_)) {
                continue;
            }
            let ty = c_type(lanes, v.ty, f.classes[k]);
            for g in e.copies_of(f.classes[k]) {
                e.copy = g;
                let name = e.name(ValueId(k as u32));
                let _ = writeln!(e.out, "{pad}{ty} {name} = {{0}};");
            }
        }
        for k in 1..f.masked.masks.len() {
            for g in 0..copies {
                e.copy = g;
                let name = e.mask(MaskId(k as u32));
                let _ = writeln!(e.out, "{pad}{} {name} = {{0}};", lanes.mask());
            }
        }
        e.copy = 0;
        e.nodes(self, &f.masked.body, MaskId(0), indent);
        e.out
    }
}

/// Whether `v` is an integer constant other than 0 and -1.
fn constant_divisor(f: &VectorFunction, v: ValueId) -> bool {
    matches!(&f.ssa.value(v).op, Op::Const(l) if l.ty == ScalarType::I32 && l.value != 0.0 && l.value != -1.0)
}

/// The C type of a value of type `ty` and class `class`.
fn c_type(lanes: Lanes, ty: ScalarType, class: Class) -> String {
    match class {
        Class::Uniform => value_type(ty).to_string(),
        Class::Linear(_) => "int32_t".to_string(),
        Class::Varying => lanes.vector(ty),
    }
}

/// The C type of a function variant's result: one vector, or a struct of `copies`.
fn result_type(lanes: Lanes, ty: ScalarType, copies: usize) -> String {
    let one = c_type(lanes, ty, Class::Varying);
    if copies > 1 {
        format!("{one}x{copies}")
    } else {
        one
    }
}

struct Emitter<'a> {
    lanes: Lanes,
    /// Lanes per vector (`lanes.n`).
    w: usize,
    f: &'a VectorFunction,
    site: &'a Site<'a>,
    entry: String,
    /// Independent vectors of lanes run together (interleaved, for instruction-level
    /// parallelism): varying values and masks have one C variable per copy, uniform and linear
    /// ones are shared.
    copies: usize,
    /// The copy being written.
    copy: usize,
    out: String,
}

impl Emitter<'_> {
    fn class(&self, v: ValueId) -> Class {
        self.f.classes[v.index()]
    }

    fn ty(&self, v: ValueId) -> ScalarType {
        self.f.ssa.value(v).ty
    }

    /// The copies a value of class `class` has its own variable in.
    fn copies_of(&self, class: Class) -> std::ops::Range<usize> {
        if class == Class::Varying {
            0..self.copies
        } else {
            0..1
        }
    }

    /// The suffix of the current copy's variables.
    fn suffix(&self) -> String {
        if self.copies > 1 {
            format!("_{}", self.copy)
        } else {
            String::new()
        }
    }

    /// The C name holding `v` in its class's form (in the current copy if varying).
    fn name(&self, v: ValueId) -> String {
        let own = if self.class(v) == Class::Varying {
            self.suffix()
        } else {
            String::new()
        };
        match (&self.f.ssa.value(v).op, self.site) {
            (Op::Param(k), Site::Function { params }) => format!("{}{own}", params[*k]),
            _ => format!("pf_v{}{own}", v.0),
        }
    }

    fn mask(&self, m: MaskId) -> String {
        match (m.0, self.site) {
            // A statement's entry mask has every lane in every copy.
            (0, Site::Statement { .. }) => self.entry.clone(),
            (0, Site::Function { .. }) => format!("{}{}", self.entry, self.suffix()),
            _ => format!("pf_m{}{}", m.0, self.suffix()),
        }
    }

    /// Whether any lane of mask `m` is set in any copy.
    fn any(&mut self, m: MaskId) -> String {
        let saved = self.copy;
        let names: Vec<String> = (0..self.copies)
            .map(|g| {
                self.copy = g;
                self.mask(m)
            })
            .collect();
        self.copy = saved;
        let code = if self.lanes.wide { "l" } else { "" };
        format!("pf_any_v{}{code}({})", self.w, names.join(" | "))
    }

    /// The index of the current copy's lane 0 among all copies' lanes.
    fn lane0(&self) -> usize {
        self.copy * self.w
    }

    /// `v` as a vector.
    fn vec(&self, v: ValueId) -> String {
        let w = self.w;
        let n = self.name(v);
        match self.class(v) {
            Class::Varying => n,
            Class::Linear(s) if self.copy == 0 => format!("pf_lin_v{w}i({n}, {s})"),
            Class::Linear(s) => format!(
                "pf_lin_v{w}i((int32_t)((uint32_t){n} + {}u * (uint32_t){s}), {s})",
                self.lane0()
            ),
            Class::Uniform => match self.ty(v) {
                ScalarType::F16 | ScalarType::F32 => format!("pf_splat_v{w}f({n})"),
                ScalarType::F64 => format!("pf_splat_v{w}d({n})"),
                ScalarType::I32 => format!("pf_splat_v{w}i({n})"),
                ScalarType::Bool if self.lanes.wide => format!("pf_splat_v{w}l(-(int64_t){n})"),
                ScalarType::Bool => format!("pf_splat_v{w}i(-(int32_t){n})"),
            },
        }
    }

    /// `v` in lane `k` (a C expression), as a scalar.
    fn lane(&self, v: ValueId, k: &str) -> String {
        let n = self.name(v);
        match self.class(v) {
            Class::Varying if self.ty(v) == ScalarType::Bool => format!("({n}[{k}] != 0)"),
            Class::Varying => format!("{n}[{k}]"),
            Class::Linear(s) if self.copy == 0 => {
                format!("(int32_t)((uint32_t){n} + (uint32_t)({k}) * (uint32_t){s})")
            }
            Class::Linear(s) => format!(
                "(int32_t)((uint32_t){n} + (uint32_t)({k} + {}) * (uint32_t){s})",
                self.lane0()
            ),
            Class::Uniform => n,
        }
    }

    /// `v` converted to the form of class `to` (which is at least as varying as `v`'s).
    fn as_class(&self, v: ValueId, to: Class) -> String {
        if to == Class::Varying {
            self.vec(v)
        } else {
            self.name(v)
        }
    }

    fn line(&mut self, indent: usize, text: &str) {
        let pad = "    ".repeat(indent);
        let _ = writeln!(self.out, "{pad}{text}");
    }

    fn nodes(&mut self, wr: &mut Writer, nodes: &[MNode], mask: MaskId, indent: usize) {
        for n in nodes {
            self.node(wr, n, mask, indent);
        }
    }

    fn region(&mut self, wr: &mut Writer, r: &Region, mask: MaskId, indent: usize) {
        if r.nodes.is_empty() {
            return;
        }
        if r.boscc {
            let test = format!("if ({}) {{", self.any(mask));
            self.line(indent, &test);
            self.nodes(wr, &r.nodes, mask, indent + 1);
            self.line(indent, "}");
        } else {
            self.nodes(wr, &r.nodes, mask, indent);
        }
    }

    /// `phi = input` for the joins, in the phis' form, in every copy.
    fn assign_joins(&mut self, joins: &[Join], input: usize, indent: usize) {
        self.write_joins(joins, indent, |e, j, c| e.as_class(j.inputs[input], c));
    }

    /// `phi = value(join, class)` for the joins, in every copy of each phi (the value is
    /// computed with [`Self::copy`] set to the copy), all values read before any phi is written.
    fn write_joins(
        &mut self,
        joins: &[Join],
        indent: usize,
        value: impl Fn(&mut Self, &Join, Class) -> String,
    ) {
        let mut items = Vec::new();
        for j in joins {
            let c = self.class(j.phi);
            let ty = c_type(self.lanes, self.ty(j.phi), c);
            for g in self.copies_of(c) {
                self.copy = g;
                let v = value(self, j, c);
                items.push((self.name(j.phi), ty.clone(), v));
            }
        }
        self.copy = 0;
        self.write_parallel(items, indent);
    }

    /// `target = value` for every (target, C type, value), the values all read before any
    /// target is written (inputs may be other phis of the same joins).
    fn write_parallel(&mut self, items: Vec<(String, String, String)>, indent: usize) {
        match items.as_slice() {
            [] => {}
            [(target, _, value)] => {
                let text = format!("{target} = {value};");
                self.line(indent, &text);
            }
            _ => {
                self.line(indent, "{");
                for (k, (_, ty, v)) in items.iter().enumerate() {
                    self.line(indent + 1, &format!("const {ty} pf_t{k} = {v};"));
                }
                for (k, (target, _, _)) in items.iter().enumerate() {
                    self.line(indent + 1, &format!("{target} = pf_t{k};"));
                }
                self.line(indent, "}");
            }
        }
    }

    fn select(&self, ty: ScalarType, m: &str, a: &str, b: &str) -> String {
        self.lanes.select(ty, m, a, b)
    }

    fn node(&mut self, wr: &mut Writer, n: &MNode, mask: MaskId, indent: usize) {
        match n {
            MNode::Def(v) => self.def(wr, *v, mask, indent),
            MNode::Return(v) => self.ret(wr, *v, indent),
            MNode::UniformIf {
                cond,
                then,
                otherwise,
                joins,
            } => {
                let c = self.name(*cond);
                self.line(indent, &format!("if ({c}) {{"));
                self.nodes(wr, then, mask, indent + 1);
                self.assign_joins(joins, 0, indent + 1);
                self.line(indent, "} else {");
                self.nodes(wr, otherwise, mask, indent + 1);
                self.assign_joins(joins, 1, indent + 1);
                self.line(indent, "}");
            }
            MNode::MaskedIf {
                cond,
                then_mask,
                else_mask,
                then,
                otherwise,
                joins,
            } => {
                for g in 0..self.copies {
                    self.copy = g;
                    let (m, c) = (self.mask(mask), self.vec(*cond));
                    let (tm, em) = (self.mask(*then_mask), self.mask(*else_mask));
                    self.line(indent, &format!("{tm} = {m} & {c};"));
                    self.line(indent, &format!("{em} = {m} & ~{c};"));
                }
                self.copy = 0;
                self.region(wr, then, *then_mask, indent);
                self.region(wr, otherwise, *else_mask, indent);
                let then_mask = *then_mask;
                self.write_joins(joins, indent, |e, j, c| {
                    if c == Class::Varying {
                        let (a, b) = (e.vec(j.inputs[0]), e.vec(j.inputs[1]));
                        let tm = e.mask(then_mask);
                        e.select(e.ty(j.phi), &tm, &a, &b)
                    } else {
                        e.name(j.inputs[0])
                    }
                });
            }
            MNode::UniformLoop {
                phis,
                header,
                cond,
                body,
            } => {
                self.assign_joins(phis, 0, indent);
                self.line(indent, "for (;;) {");
                self.nodes(wr, header, mask, indent + 1);
                let c = self.name(*cond);
                self.line(indent + 1, &format!("if (!{c})"));
                self.line(indent + 2, "break;");
                self.nodes(wr, body, mask, indent + 1);
                self.assign_joins(phis, 1, indent + 1);
                self.line(indent, "}");
            }
            MNode::MaskedLoop {
                active,
                phis,
                header,
                cond,
                body,
            } => {
                let MaskDef::Loop(outer) = self.f.masked.masks[active.index()] else {
                    return;
                };
                for g in 0..self.copies {
                    self.copy = g;
                    let (a, o) = (self.mask(*active), self.mask(outer));
                    self.line(indent, &format!("{a} = {o};"));
                }
                self.copy = 0;
                self.assign_joins(phis, 0, indent);
                self.line(indent, "for (;;) {");
                self.nodes(wr, header, *active, indent + 1);
                for g in 0..self.copies {
                    self.copy = g;
                    let (a, c) = (self.mask(*active), self.vec(*cond));
                    self.line(indent + 1, &format!("{a} = {a} & {c};"));
                }
                self.copy = 0;
                let any = self.any(*active);
                self.line(indent + 1, &format!("if (!{any})"));
                self.line(indent + 2, "break;");
                self.nodes(wr, body, *active, indent + 1);
                let mut items = Vec::new();
                for j in phis {
                    let ty = c_type(self.lanes, self.ty(j.phi), Class::Varying);
                    for g in 0..self.copies {
                        self.copy = g;
                        let (l, p) = (self.vec(j.inputs[1]), self.vec(j.phi));
                        let v = if self.f.frozen[j.phi.index()] {
                            let a = self.mask(*active);
                            self.select(self.ty(j.phi), &a, &l, &p)
                        } else {
                            l
                        };
                        items.push((self.name(j.phi), ty.clone(), v));
                    }
                }
                self.copy = 0;
                self.write_parallel(items, indent + 1);
                self.line(indent, "}");
            }
        }
    }

    fn ret(&mut self, wr: &mut Writer, v: ValueId, indent: usize) {
        match self.site {
            Site::Function { .. } if self.copies > 1 => {
                let results: Vec<String> = (0..self.copies)
                    .map(|g| {
                        self.copy = g;
                        self.vec(v)
                    })
                    .collect();
                self.copy = 0;
                let ty = result_type(self.lanes, self.ty(v), self.copies);
                let text = format!("return ({ty}){{{{{}}}}};", results.join(", "));
                self.line(indent, &text);
            }
            Site::Function { .. } => {
                let text = format!("return {};", self.vec(v));
                self.line(indent, &text);
            }
            Site::Statement { var, args, .. } => {
                let stmt = &wr.program.statements[self
                    .f
                    .statement
                    .expect("statement variants name their statement")
                    .index()];
                let write = stmt.write.clone();
                let depth = self.f.depth;
                for g in 0..self.copies {
                    self.copy = g;
                    let half = wr.program.array(write.array).elem == ScalarType::F16;
                    match access_pattern(&write, depth) {
                        AccessPattern::Contiguous if !half => {
                            let at = self.lane_args(var, args, 0);
                            let target = wr.element(&stmt.divs, &write, &at);
                            let target = self.address(wr, &write, &target);
                            let ty = c_type(self.lanes, self.ty(v), Class::Varying);
                            let text = format!(
                                "{{ const {ty} pf_st = {}; memcpy({target}, &pf_st, sizeof pf_st); }}",
                                self.vec(v)
                            );
                            self.line(indent, &text);
                        }
                        _ => {
                            for k in 0..self.w {
                                let at = self.lane_args(var, args, k);
                                let target = wr.element(&stmt.divs, &write, &at);
                                let mut value = self.lane(v, &k.to_string());
                                if half {
                                    value = wr.call(Helper::F2H, "pf_f2h", &[value]);
                                }
                                self.line(indent, &format!("{target} = {value};"));
                            }
                        }
                    }
                }
                self.copy = 0;
            }
        }
    }

    /// The subscripts of lane `k` of the current copy: `args` with `var` moved on by the
    /// lanes before it.
    fn lane_args(&self, var: &str, args: &[AstExpr], k: usize) -> Vec<AstExpr> {
        let by = (self.lane0() + k) as i64;
        if by == 0 {
            return args.to_vec();
        }
        args.iter().map(|a| shifted(a, var, by)).collect()
    }

    /// The address of `element`, a vector of contiguous access `access`, told aligned to the
    /// C compiler where the loop runs with its first vectors aligned and the access is one
    /// [`Writer::aligned_accesses`] lists.
    fn address(&self, wr: &Writer, access: &Access, element: &str) -> String {
        let aligned = matches!(self.site, Site::Statement { aligned: true, .. })
            && aligned::alignment(wr.program, access, self.f.depth)
                .is_some_and(|n| n % self.w as i64 == 0);
        if aligned {
            let bytes = self.lanes.bytes(wr.program.array(access.array).elem);
            format!("__builtin_assume_aligned(&{element}, {bytes})")
        } else {
            format!("&{element}")
        }
    }

    /// Defines `v`, in every copy if it is varying.
    fn def(&mut self, wr: &mut Writer, v: ValueId, mask: MaskId, indent: usize) {
        let class = self.class(v);
        if self.copies > 1 && class == Class::Varying {
            if let Op::Call(_, args) = &self.f.ssa.value(v).op {
                let args = args.clone();
                self.call_copies(wr, v, &args, mask, indent);
                return;
            }
        }
        for g in self.copies_of(class) {
            self.copy = g;
            self.def_one(wr, v, mask, indent);
        }
        self.copy = 0;
    }

    /// A call of a function variant running all copies at once, its results unpacked.
    fn call_copies(
        &mut self,
        wr: &mut Writer,
        v: ValueId,
        args: &[ValueId],
        mask: MaskId,
        indent: usize,
    ) {
        let state = wr.vector.as_ref().expect("vector state");
        let callee = self.f.calls[&v];
        let name = state.names[&(callee, self.copies, self.lanes)].clone();
        let params = state.program.variants[callee].params.clone();
        let mut texts = Vec::new();
        for (a, c) in args.iter().zip(&params) {
            for g in self.copies_of(*c) {
                self.copy = g;
                texts.push(self.as_class(*a, *c));
            }
        }
        for g in 0..self.copies {
            self.copy = g;
            texts.push(self.mask(mask));
        }
        let ty = result_type(self.lanes, self.ty(v), self.copies);
        self.line(indent, "{");
        self.line(
            indent + 1,
            &format!("const {ty} pf_r = {name}({});", texts.join(", ")),
        );
        for g in 0..self.copies {
            self.copy = g;
            let n = self.name(v);
            self.line(indent + 1, &format!("{n} = pf_r.v[{g}];"));
        }
        self.copy = 0;
        self.line(indent, "}");
    }

    fn def_one(&mut self, wr: &mut Writer, v: ValueId, mask: MaskId, indent: usize) {
        let value = self.f.ssa.value(v).clone();
        let class = self.class(v);
        let name = self.name(v);
        let w = self.w;
        let text = match (&value.op, class) {
            (Op::Param(_), _) => return,
            (Op::Phi(..), _) => return,
            (Op::Const(l), _) => {
                let lit = literal(*l);
                if class == Class::Varying {
                    // Classification makes constants uniform.
                    return;
                }
                lit
            }
            (Op::Size(p), _) => format!("(int32_t){}", wr.param_name(*p)),
            (Op::Iter(d), _) => {
                let Site::Statement { args, .. } = self.site else {
                    return;
                };
                let a = wr.ast_expr(&args[*d]);
                format!("(int32_t)({a})")
            }
            (Op::Read(r), _) => {
                let Site::Statement { var, args, .. } = self.site else {
                    return;
                };
                let stmt =
                    &wr.program.statements[self.f.statement.expect("statement variant").index()];
                let access = stmt.reads[*r].clone();
                // `f16` elements are widened one by one.
                let half = wr.program.array(access.array).elem == ScalarType::F16;
                let load = |wr: &mut Writer, at: &[AstExpr]| {
                    let e = wr.element(&stmt.divs, &access, at);
                    if half {
                        wr.call(Helper::H2F, "pf_h2f", &[e])
                    } else {
                        e
                    }
                };
                match access_pattern(&access, self.f.depth) {
                    AccessPattern::Uniform => load(wr, args),
                    AccessPattern::Contiguous if !half => {
                        let e = wr.element(&stmt.divs, &access, &self.lane_args(var, args, 0));
                        let e = self.address(wr, &access, &e);
                        self.line(indent, &format!("memcpy(&{name}, {e}, sizeof {name});"));
                        return;
                    }
                    AccessPattern::Contiguous | AccessPattern::Gather => {
                        let lanes: Vec<String> = (0..w)
                            .map(|k| load(wr, &self.lane_args(var, args, k)))
                            .collect();
                        let ty = c_type(self.lanes, value.ty, Class::Varying);
                        format!("({ty}){{{}}}", lanes.join(", "))
                    }
                }
            }
            (op, Class::Uniform) | (op, Class::Linear(_)) => self.scalar_op(wr, op, value.ty),
            (op, Class::Varying) => match self.vector_op(wr, v, op, value.ty, mask) {
                Some(t) => t,
                None => {
                    // Lane by lane.
                    self.line(indent, &format!("for (int pf_k = 0; pf_k < {w}; pf_k++)"));
                    let scalar = self.lane_op(wr, op, value.ty);
                    self.line(indent + 1, &format!("{name}[pf_k] = {scalar};"));
                    return;
                }
            },
        };
        self.line(indent, &format!("{name} = {text};"));
    }

    /// A uniform or linear value from the scalar forms of its operands (a linear value's
    /// scalar is its lane 0).
    fn scalar_op(&mut self, wr: &mut Writer, op: &Op, ty: ScalarType) -> String {
        let n = |v: &ValueId| self.name(*v);
        match op {
            Op::Unary(UnaryOp::Not, a) => format!("(!{})", n(a)),
            Op::Unary(UnaryOp::Neg, a) if ty == ScalarType::I32 => {
                wr.call(Helper::NegI32, "pf_neg_i32", &[n(a)])
            }
            Op::Unary(UnaryOp::Neg, a) => format!("(-{})", n(a)),
            Op::Binary(BinaryOp::And, a, b) => format!("({} && {})", n(a), n(b)),
            Op::Binary(BinaryOp::Or, a, b) => format!("({} || {})", n(a), n(b)),
            Op::Binary(op, a, b) => wr.binary(*op, self.ty(*a), n(a), n(b)),
            Op::Select(c, t, e) => format!("({} ? {} : {})", n(c), n(t), n(e)),
            Op::Math(m, args) => {
                let args: Vec<String> = args.iter().map(n).collect();
                wr.math(*m, ty, &args)
            }
            Op::Cast(to, a) => wr.cast(*to, self.ty(*a), n(a)),
            Op::Call(f, args) => {
                let args: Vec<String> = args.iter().map(n).collect();
                format!("{}({})", wr.function_name(*f), args.join(", "))
            }
            _ => unreachable!("leaves and phis are handled by `def`"),
        }
    }

    /// One lane of a varying value, from its operands' lanes `pf_k`.
    fn lane_op(&mut self, wr: &mut Writer, op: &Op, ty: ScalarType) -> String {
        let l = |v: &ValueId| self.lane(*v, "pf_k");
        match op {
            Op::Binary(op, a, b) => wr.binary(*op, self.ty(*a), l(a), l(b)),
            Op::Math(m, args) => {
                let args: Vec<String> = args.iter().map(l).collect();
                wr.math(*m, ty, &args)
            }
            Op::Cast(to, a) => wr.cast(*to, self.ty(*a), l(a)),
            _ => unreachable!("only binary operators, math and casts run lane by lane"),
        }
    }

    /// A varying value as one vector expression, or `None` where it runs lane by lane.
    fn vector_op(
        &mut self,
        wr: &mut Writer,
        id: ValueId,
        op: &Op,
        ty: ScalarType,
        mask: MaskId,
    ) -> Option<String> {
        let w = self.w;
        let lanes = self.lanes;
        let v = |x: &ValueId| self.vec(*x);
        // An `f16` result of `+ - * /` is computed in `float` and rounded to `f16`.
        let f16r = |x: String| format!("pf_f16r_v{w}({x})");
        Some(match op {
            Op::Unary(UnaryOp::Not, a) => format!("(~{})", v(a)),
            Op::Unary(UnaryOp::Neg, a) if ty == ScalarType::I32 => {
                format!("(pf_v{w}i)((pf_v{w}u){{0}} - (pf_v{w}u){})", v(a))
            }
            Op::Unary(UnaryOp::Neg, a) => format!("(-{})", v(a)),
            Op::Binary(op, a, b) => {
                let operand = self.ty(*a);
                let (x, y) = (v(a), v(b));
                match op {
                    BinaryOp::And => format!("({x} & {y})"),
                    BinaryOp::Or => format!("({x} | {y})"),
                    _ if op.is_comparison() => {
                        lanes.mask_of_comparison(operand, format!("({x} {} {y})", op.symbol()))
                    }
                    // Min and max pick an operand, so `f16` ones need no rounding.
                    BinaryOp::Min | BinaryOp::Max if operand.is_float() => {
                        let kind = if operand == ScalarType::F64 { 'd' } else { 'f' };
                        let name = if *op == BinaryOp::Min { "fmin" } else { "fmax" };
                        format!("pf_{name}_v{w}{kind}({x}, {y})")
                    }
                    BinaryOp::Min => format!("pf_sel_v{w}i({x} < {y}, {x}, {y})"),
                    BinaryOp::Max => format!("pf_sel_v{w}i({x} > {y}, {x}, {y})"),
                    BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div
                        if operand == ScalarType::F16 =>
                    {
                        f16r(format!("{x} {} {y}", op.symbol()))
                    }
                    BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div
                        if operand.is_float() =>
                    {
                        format!("({x} {} {y})", op.symbol())
                    }
                    BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => {
                        format!("(pf_v{w}i)((pf_v{w}u){x} {} (pf_v{w}u){y})", op.symbol())
                    }
                    // By a constant other than 0 and -1, C's truncating division is the
                    // interpreter's, and the compiler turns it into multiplies and shifts.
                    BinaryOp::Div | BinaryOp::Rem if constant_divisor(self.f, *b) => {
                        format!("({x} {} {y})", op.symbol())
                    }
                    _ => return None,
                }
            }
            Op::Select(c, t, e) => self.select(ty, &v(c), &v(t), &v(e)),
            Op::Cast(to, a) => {
                use ScalarType::*;
                match (*to, self.ty(*a)) {
                    (to, from) if to == from => v(a),
                    (F32, F16) => v(a),
                    // Exact, or rounded once as the scalar cast rounds.
                    (F32, I32 | F64) | (F64, I32 | F16 | F32) => {
                        format!("__builtin_convertvector({}, {})", v(a), lanes.vector(*to))
                    }
                    (F16, F32) => f16r(v(a)),
                    // An `f64` or `i32` rounded to `f32` first would be rounded twice.
                    _ => return None,
                }
            }
            Op::Call(_, args) => {
                let state = wr.vector.as_ref().expect("vector state");
                let callee = self.f.calls[&id];
                let name = state.names[&(callee, 1, self.lanes)].clone();
                let params = state.program.variants[callee].params.clone();
                let mut texts: Vec<String> = args
                    .iter()
                    .zip(&params)
                    .map(|(a, c)| self.as_class(*a, *c))
                    .collect();
                texts.push(self.mask(mask));
                format!("{name}({})", texts.join(", "))
            }
            _ => return None,
        })
    }
}
