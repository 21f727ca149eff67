//! Lowering of a kernel to a [`Program`]: sizes, tensors and their roles, and one statement
//! per tensor statement (two for a reduction with initialisation), with domains, accesses,
//! typed bodies and original schedule positions.
//!
//! On the way out the program satisfies [`Program::verify`]; moreover no access is out of
//! bounds at any point of its statement's domain that [`super::ranges`] could exhibit, and every
//! iterator's range fits `i32` for the given size values.

use std::collections::HashMap;

use polyhedral::program::{
    Access, AffineExpr, Array, ArrayId, ArrayRole, BinaryOp, Constraint, ConstraintKind, Expr,
    ExprArena, Literal, Param, ParamId, Program, Reduction, ReductionOp, ScalarType, SourceKind,
    Span, Statement, Var,
};

use super::affine::{non_affine, to_affine, to_constraints};
use super::ast::{self, AssignKind, ExprKind, Ident, Kernel, KernelStmt, TensorStmt, Where};
use super::function::{is_builtin, resolve_call, FunctionTable};
use super::infer;
use super::ranges::{bind, check_bounds};
use super::types::{self, Callee, Names, Ty, Typed};
use crate::diagnostic::Diagnostic;
use crate::Options;

type LResult<T> = Result<T, Diagnostic>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sym {
    Size(ParamId),
    Tensor(ArrayId),
}

/// An enclosing `for` loop.
struct ForLoop {
    name: String,
    /// `lo <= t < hi`, over the sizes and outer loops (iterators numbered outermost first).
    constraints: Vec<Constraint>,
    lo: AffineExpr,
    hi: AffineExpr,
}

struct ArrayState {
    declared_output: bool,
    written: bool,
    /// The kernel may read its initial contents: it is read (or accumulated into) before
    /// anything wrote it, or the first statement writing it may leave elements unwritten.
    needs_initial: bool,
}

struct KernelLowering<'a> {
    program: Program,
    syms: HashMap<String, Sym>,
    state: Vec<ArrayState>,
    functions: &'a FunctionTable,
    /// Functions defined above the kernel, which it may call.
    visible: usize,
    all_functions: &'a [ast::FnDecl],
    /// What the user may want to know about the lowering: the ranges it inferred.
    notes: Vec<String>,
}

pub(crate) fn lower_kernel(
    kernel: &Kernel,
    functions: &FunctionTable,
    visible: usize,
    all_functions: &[ast::FnDecl],
    options: &Options,
) -> LResult<(Program, Vec<String>)> {
    let mut k = KernelLowering {
        program: Program {
            name: kernel.name.name.clone(),
            source: SourceKind::Kernel,
            functions: functions.functions.clone(),
            ..Program::default()
        },
        syms: HashMap::new(),
        state: Vec::new(),
        functions,
        visible,
        all_functions,
        notes: Vec::new(),
    };
    k.sizes(kernel, options)?;
    for decl in &kernel.inputs {
        k.declare_tensor(decl, ArrayRole::Input)?;
    }
    for decl in &kernel.outputs {
        k.declare_tensor(decl, ArrayRole::Output)?;
    }
    let mut fors = Vec::new();
    let mut path = Vec::new();
    k.block(&kernel.body, &mut fors, &mut path)?;
    for (i, a) in k.program.arrays.iter_mut().enumerate() {
        let s = &k.state[i];
        if s.declared_output {
            if !s.written {
                return Err(Diagnostic::new(
                    a.span,
                    format!("output `{}` is never written", a.name),
                )
                .with_hint("assign it in the kernel body, or remove it from the outputs"));
            }
            a.role = if s.needs_initial {
                ArrayRole::InOut
            } else {
                ArrayRole::Output
            };
        }
    }
    Ok((k.program, k.notes))
}

fn duplicate(id: &Ident) -> Diagnostic {
    Diagnostic::new(id.span, format!("duplicate name `{}`", id.name))
        .with_hint("sizes, tensors, functions and loop indices need distinct names")
}

impl KernelLowering<'_> {
    fn check_fresh(&self, id: &Ident) -> LResult<()> {
        if self.syms.contains_key(&id.name) || self.functions.by_name.contains_key(&id.name) {
            return Err(duplicate(id));
        }
        if is_builtin(&id.name) {
            return Err(
                Diagnostic::new(id.span, format!("`{}` is a built-in name", id.name))
                    .with_hint("choose another name"),
            );
        }
        Ok(())
    }

    fn sizes(&mut self, kernel: &Kernel, options: &Options) -> LResult<()> {
        for s in &kernel.sizes {
            self.check_fresh(&s.name)?;
            let id = ParamId(self.program.params.len() as u32);
            self.syms.insert(s.name.name.clone(), Sym::Size(id));
            self.program.params.push(Param {
                name: s.name.name.clone(),
                value: s.default.unwrap_or(-1),
            });
        }
        // A macro that is no size is for C input only; one that names a size must give it a
        // number.
        for (name, value) in &options.defines {
            let Some(text) = value else { continue };
            if text.trim().parse::<i64>().is_err()
                && matches!(self.syms.get(name.as_str()), Some(Sym::Size(_)))
            {
                return Err(Diagnostic::new(
                    kernel.name.span,
                    format!(
                        "`-D {name}={text}` gives size `{name}` a value that is not an integer"
                    ),
                )
                .with_hint(format!("give it a number: `-D {name}=128`")));
            }
        }
        let mut set = |name: &str, value: i64| {
            if let Some(Sym::Size(p)) = self.syms.get(name) {
                self.program.params[p.index()].value = value;
                true
            } else {
                false
            }
        };
        for (name, value) in &options.defines {
            if let Some(text) = value {
                if let Ok(v) = text.trim().parse::<i64>() {
                    set(name, v);
                }
            }
        }
        for (name, value) in &options.sizes {
            if !set(name, *value) {
                let known: Vec<&str> = kernel.sizes.iter().map(|s| s.name.name.as_str()).collect();
                return Err(Diagnostic::new(
                    kernel.name.span,
                    format!(
                        "`--size {name}` names no size of kernel `{}`",
                        kernel.name.name
                    ),
                )
                .with_hint(if known.is_empty() {
                    "this kernel has no sizes".to_string()
                } else {
                    format!("its sizes are {}", known.join(", "))
                }));
            }
        }
        for (s, p) in kernel.sizes.iter().zip(&self.program.params) {
            if s.default.is_none() && p.value == -1 {
                return Err(Diagnostic::new(
                    s.name.span,
                    format!("size `{}` has no value", s.name.name),
                )
                .with_hint(format!(
                    "give it a default (`{} = 128`) or pass `--size {}=…`",
                    s.name.name, s.name.name
                )));
            }
            if !(0..=i32::MAX as i64).contains(&p.value) {
                return Err(Diagnostic::new(
                    s.name.span,
                    format!("size `{}` = {} is out of range", s.name.name, p.value),
                )
                .with_hint("sizes are between 0 and 2147483647"));
            }
        }
        Ok(())
    }

    fn size_lookup(&self) -> impl FnMut(&Ident) -> LResult<Var> + '_ {
        |id: &Ident| match self.syms.get(&id.name) {
            Some(Sym::Size(p)) => Ok(Var::Param(*p)),
            _ => Err(
                Diagnostic::new(id.span, format!("unknown size `{}`", id.name))
                    .with_hint("declare it in `<…>` after the kernel name"),
            ),
        }
    }

    fn add_array(&mut self, array: Array, declared_output: bool) -> ArrayId {
        let id = ArrayId(self.program.arrays.len() as u32);
        self.syms.insert(array.name.clone(), Sym::Tensor(id));
        self.program.arrays.push(array);
        self.state.push(ArrayState {
            declared_output,
            written: false,
            needs_initial: false,
        });
        id
    }

    fn declare_tensor(&mut self, decl: &ast::TensorDecl, role: ArrayRole) -> LResult<()> {
        self.check_fresh(&decl.name)?;
        if decl.elem.ty == ScalarType::Bool {
            return Err(
                Diagnostic::new(decl.elem.span, "type mismatch: tensors cannot hold bool")
                    .with_hint("use `i32` or a floating-point type"),
            );
        }
        let params = self.program.param_values();
        let mut shape = Vec::new();
        for e in &decl.shape {
            let a = to_affine(e, "extent", &mut self.size_lookup())?;
            let v = eval_params(&a, &params);
            if !(1..=i32::MAX as i64).contains(&v) {
                return Err(Diagnostic::new(
                    e.span,
                    format!("extent of `{}` is {v} for these sizes", decl.name.name),
                )
                .with_hint("extents must be at least 1 and fit i32"));
            }
            shape.push(a);
        }
        self.add_array(
            Array {
                name: decl.name.name.clone(),
                elem: decl.elem.ty,
                shape,
                role,
                span: decl.name.span,
            },
            role == ArrayRole::Output,
        );
        Ok(())
    }

    fn block(
        &mut self,
        stmts: &[KernelStmt],
        fors: &mut Vec<ForLoop>,
        path: &mut Vec<usize>,
    ) -> LResult<()> {
        let mut counter = 0;
        for s in stmts {
            match s {
                KernelStmt::For { var, lo, hi, body } => {
                    self.check_fresh(var)?;
                    if fors.iter().any(|f| f.name == var.name) {
                        return Err(duplicate(var));
                    }
                    let mut lookup = |id: &Ident| -> LResult<Var> {
                        if let Some(k) = fors.iter().position(|f| f.name == id.name) {
                            return Ok(Var::Iter(k));
                        }
                        match self.syms.get(&id.name) {
                            Some(Sym::Size(p)) => Ok(Var::Param(*p)),
                            _ => Err(Diagnostic::new(
                                id.span,
                                format!("unknown size or loop index `{}`", id.name),
                            )
                            .with_hint("loop bounds use sizes and enclosing loop indices")),
                        }
                    };
                    let lo_a = to_affine(lo, "loop bound", &mut lookup)?;
                    let hi_a = to_affine(hi, "loop bound", &mut lookup)?;
                    let t = AffineExpr::var(Var::Iter(fors.len()));
                    fors.push(ForLoop {
                        name: var.name.clone(),
                        constraints: vec![Constraint::le(&lo_a, &t), Constraint::lt(&t, &hi_a)],
                        lo: lo_a,
                        hi: hi_a,
                    });
                    path.push(counter);
                    counter += 1;
                    let r = self.block(body, fors, path);
                    path.pop();
                    fors.pop();
                    r?;
                }
                KernelStmt::Tensor(ts) => {
                    counter += self.tensor_stmt(ts, fors, path, counter)?;
                }
            }
        }
        Ok(())
    }
}

/// What an identifier of a tensor statement stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NameKind {
    For(usize),
    Size(ParamId),
    Tensor(ArrayId),
    Function,
    Index,
}

/// An index of a tensor statement (an iterator that is not an enclosing loop's).
struct IndexInfo {
    name: String,
    first: Span,
    /// Tensor dimensions it subscripts bare on the right-hand side: (array, dim).
    rhs_dims: Vec<(ArrayId, usize)>,
    /// The left-hand side dimension it subscripts bare.
    lhs_dim: Option<(usize, Span)>,
    range: Option<(ast::Expr, ast::Expr, Span)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Value,
    Subscript,
}

struct Collector<'a, 'b> {
    k: &'a KernelLowering<'b>,
    fors: &'a [ForLoop],
    indices: Vec<IndexInfo>,
    /// Right-hand side subscripts that are not a bare index: (array, dimension, subscript,
    /// the whole access).
    affine_uses: Vec<(ArrayId, usize, ast::Expr, Span)>,
}

impl Collector<'_, '_> {
    fn kind(&self, name: &str) -> NameKind {
        if let Some(i) = self.fors.iter().position(|f| f.name == name) {
            return NameKind::For(i);
        }
        match self.k.syms.get(name) {
            Some(Sym::Size(p)) => NameKind::Size(*p),
            Some(Sym::Tensor(a)) => NameKind::Tensor(*a),
            None if self.k.functions.by_name.contains_key(name) || is_builtin(name) => {
                NameKind::Function
            }
            None => NameKind::Index,
        }
    }

    fn index(&mut self, id: &Ident) -> usize {
        if let Some(i) = self.indices.iter().position(|x| x.name == id.name) {
            return i;
        }
        self.indices.push(IndexInfo {
            name: id.name.clone(),
            first: id.span,
            rhs_dims: Vec::new(),
            lhs_dim: None,
            range: None,
        });
        self.indices.len() - 1
    }

    fn expr(&mut self, e: &ast::Expr, ctx: Ctx) -> LResult<()> {
        match &e.kind {
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) => Ok(()),
            ExprKind::Name(id) => match self.kind(&id.name) {
                NameKind::Index => {
                    self.index(id);
                    Ok(())
                }
                NameKind::Tensor(_) | NameKind::Function if ctx == Ctx::Subscript => {
                    Err(non_affine(e.span, "subscript")
                        .with_hint("subscripts cannot read tensors or call functions"))
                }
                _ => Ok(()),
            },
            ExprKind::Unary(_, a) => self.expr(a, ctx),
            ExprKind::Binary(_, a, b) => {
                self.expr(a, ctx)?;
                self.expr(b, ctx)
            }
            ExprKind::Ternary(a, b, c) => {
                self.expr(a, ctx)?;
                self.expr(b, ctx)?;
                self.expr(c, ctx)
            }
            ExprKind::Call(id, args) => {
                let kind = self.kind(&id.name);
                if ctx == Ctx::Subscript {
                    return Err(non_affine(e.span, "subscript")
                        .with_hint("subscripts cannot read tensors or call functions"));
                }
                match kind {
                    NameKind::Tensor(a) => {
                        check_arity(&self.k.program, a, args.len(), e.span)?;
                        for (d, arg) in args.iter().enumerate() {
                            self.expr(arg, Ctx::Subscript)?;
                            match &arg.kind {
                                ExprKind::Name(n) if self.kind(&n.name) == NameKind::Index => {
                                    let i = self.index(n);
                                    self.indices[i].rhs_dims.push((a, d));
                                }
                                _ => self.affine_uses.push((a, d, arg.clone(), e.span)),
                            }
                        }
                        Ok(())
                    }
                    NameKind::Function => {
                        for arg in args {
                            self.expr(arg, Ctx::Value)?;
                        }
                        Ok(())
                    }
                    NameKind::Index => Err(Diagnostic::new(
                        id.span,
                        format!("unknown tensor or function `{}`", id.name),
                    )
                    .with_hint("declare the tensor as an input or output, or assign it before this statement")),
                    NameKind::For(_) | NameKind::Size(_) => Err(Diagnostic::new(
                        id.span,
                        format!("`{}` is not a tensor or function", id.name),
                    )
                    .with_hint("only tensors and functions take arguments")),
                }
            }
        }
    }
}

fn check_arity(program: &Program, a: ArrayId, n: usize, span: Span) -> LResult<()> {
    let array = program.array(a);
    if array.shape.len() != n {
        return Err(Diagnostic::new(
            span,
            format!(
                "wrong number of subscripts: `{}` has {} dimension(s) but is given {n}",
                array.name,
                array.shape.len()
            ),
        )
        .with_hint(format!(
            "write one subscript per dimension, e.g. `{}`",
            example_access(&array.name, array.shape.len())
        )));
    }
    Ok(())
}

fn example_access(name: &str, dims: usize) -> String {
    const NAMES: [&str; 6] = ["i", "j", "k", "l", "m", "n"];
    if dims == 0 {
        return name.to_string();
    }
    let subs: Vec<String> = (0..dims)
        .map(|d| {
            NAMES
                .get(d)
                .map_or_else(|| format!("i{d}"), |s| s.to_string())
        })
        .collect();
    format!("{name}({})", subs.join(", "))
}

/// Name resolution and read collection for one statement's right-hand side.
struct BodyNames<'a, 'b> {
    k: &'a mut KernelLowering<'b>,
    fors: &'a [ForLoop],
    iters: &'a HashMap<String, usize>,
    reads: Vec<Access>,
}

impl BodyNames<'_, '_> {
    fn read(&mut self, a: ArrayId, subscripts: Vec<AffineExpr>, span: Span) -> LResult<Typed> {
        let array = &self.k.program.arrays[a.index()];
        let state = &mut self.k.state[a.index()];
        if !state.written {
            match array.role {
                ArrayRole::Temporary => {
                    return Err(Diagnostic::new(
                        span,
                        format!("`{}` is read before it is assigned", array.name),
                    )
                    .with_hint("assign the temporary in an earlier statement"))
                }
                ArrayRole::Output => state.needs_initial = true,
                _ => {}
            }
        }
        let r = match self
            .reads
            .iter()
            .position(|x| x.array == a && x.subscripts == subscripts)
        {
            Some(r) => r,
            None => {
                self.reads.push(Access {
                    array: a,
                    subscripts,
                    span,
                });
                self.reads.len() - 1
            }
        };
        Ok(Typed::leaf(Expr::Read(r), array.elem, span))
    }

    fn lookup(&self, id: &Ident) -> LResult<Var> {
        if let Some(i) = self.fors.iter().position(|f| f.name == id.name) {
            return Ok(Var::Iter(i));
        }
        if let Some(&i) = self.iters.get(&id.name) {
            return Ok(Var::Iter(i));
        }
        match self.k.syms.get(&id.name) {
            Some(Sym::Size(p)) => Ok(Var::Param(*p)),
            _ => Err(non_affine(id.span, "subscript")),
        }
    }
}

impl Names for BodyNames<'_, '_> {
    fn name(&mut self, id: &Ident) -> LResult<Typed> {
        if let Ok(v) = self.lookup(id) {
            let e = match v {
                Var::Iter(i) => Expr::Iter(i),
                Var::Param(p) => Expr::Param(p),
                // Names are iterators or sizes; the kernel language has no division variables.
                Var::Div(_) => unreachable!("a kernel name that is a division variable"),
            };
            return Ok(Typed::leaf(e, ScalarType::I32, id.span));
        }
        match self.k.syms.get(&id.name) {
            Some(&Sym::Tensor(a)) => {
                check_arity(&self.k.program, a, 0, id.span)?;
                self.read(a, Vec::new(), id.span)
            }
            _ => Err(
                Diagnostic::new(id.span, format!("`{}` is a function, not a value", id.name))
                    .with_hint(format!("call it: `{}(…)`", id.name)),
            ),
        }
    }

    fn call(&mut self, id: &Ident, args: &[ast::Expr], span: Span) -> LResult<Callee> {
        if let Some(&Sym::Tensor(a)) = self.k.syms.get(&id.name) {
            check_arity(&self.k.program, a, args.len(), span)?;
            let mut subs = Vec::new();
            for arg in args {
                subs.push(to_affine(arg, "subscript", &mut |n| self.lookup(n))?);
            }
            return Ok(Callee::Value(self.read(a, subs, span)?));
        }
        if let Some(&f) = self.k.functions.by_name.get(&id.name) {
            if f.index() >= self.k.visible {
                return Err(Diagnostic::new(
                    id.span,
                    format!("`{}` is called before its definition", id.name),
                )
                .with_hint(format!(
                    "move the definition of `{}` above the kernel",
                    id.name
                )));
            }
        }
        resolve_call(self.k.functions, self.k.all_functions, None, id)
    }
}

/// The identity of a reduction operator for the element type.
fn identity(kind: AssignKind, ty: ScalarType) -> f64 {
    let int = ty == ScalarType::I32;
    match kind {
        AssignKind::Mul => 1.0,
        AssignKind::Max if int => i32::MIN as f64,
        AssignKind::Max => f64::NEG_INFINITY,
        AssignKind::Min if int => i32::MAX as f64,
        AssignKind::Min => f64::INFINITY,
        _ => 0.0,
    }
}

impl KernelLowering<'_> {
    /// Lowers one tensor statement at position `counter` of its block; returns how many
    /// statements it became.
    fn tensor_stmt(
        &mut self,
        ts: &TensorStmt,
        fors: &[ForLoop],
        path: &[usize],
        counter: usize,
    ) -> LResult<usize> {
        // The written tensor.
        let lhs_array = match self.syms.get(&ts.lhs.name) {
            Some(&Sym::Tensor(a)) => {
                if self.program.arrays[a.index()].role == ArrayRole::Input {
                    return Err(Diagnostic::new(
                        ts.lhs.span,
                        format!("cannot write input `{}`", ts.lhs.name),
                    )
                    .with_hint("declare it as an output (after `->`) to update it"));
                }
                check_arity(&self.program, a, ts.subs.len(), ts.lhs.span)?;
                Some(a)
            }
            Some(Sym::Size(_)) => {
                return Err(Diagnostic::new(
                    ts.lhs.span,
                    format!("cannot assign to size `{}`", ts.lhs.name),
                )
                .with_hint("sizes are compile-time constants; change them with `--size`"))
            }
            None => {
                if fors.iter().any(|f| f.name == ts.lhs.name) {
                    return Err(Diagnostic::new(
                        ts.lhs.span,
                        format!("cannot assign to loop index `{}`", ts.lhs.name),
                    )
                    .with_hint("assign a tensor"));
                }
                self.check_fresh(&ts.lhs)?;
                None
            }
        };

        // Indices in order: left-hand side, right-hand side, `where`.
        let mut c = Collector {
            k: self,
            fors,
            indices: Vec::new(),
            affine_uses: Vec::new(),
        };
        for (d, sub) in ts.subs.iter().enumerate() {
            c.expr(sub, Ctx::Subscript)?;
            if let ExprKind::Name(n) = &sub.kind {
                if c.kind(&n.name) == NameKind::Index {
                    let i = c.index(n);
                    if c.indices[i].lhs_dim.is_none() {
                        c.indices[i].lhs_dim = Some((d, sub.span));
                    }
                }
            }
        }
        let n_lhs = c.indices.len();
        c.expr(&ts.rhs, Ctx::Value)?;
        for w in &ts.wheres {
            match w {
                Where::Range { index, lo, hi } => {
                    if c.kind(&index.name) != NameKind::Index {
                        return Err(Diagnostic::new(
                            index.span,
                            format!("`{}` is not an index of this statement", index.name),
                        )
                        .with_hint("`where` ranges apply to the statement's own indices"));
                    }
                    let i = c.index(index);
                    if c.indices[i].range.is_some() {
                        return Err(Diagnostic::new(
                            index.span,
                            format!("duplicate range for index `{}`", index.name),
                        )
                        .with_hint(
                            "give each index one `in lo:hi` range; add conditions with `<=`",
                        ));
                    }
                    c.expr(lo, Ctx::Subscript)?;
                    c.expr(hi, Ctx::Subscript)?;
                    c.indices[i].range = Some((lo.clone(), hi.clone(), index.span));
                }
                Where::Cond(e) => c.expr(e, Ctx::Subscript)?,
            }
        }
        let indices = c.indices;
        let affine_uses = c.affine_uses;
        if ts.kind == AssignKind::Set {
            if let Some(x) = indices[n_lhs..].first() {
                return Err(Diagnostic::new(
                    x.first,
                    format!(
                        "index `{}` appears only on the right-hand side of `=`",
                        x.name
                    ),
                )
                .with_hint(
                    "reduce over it with `+=!` (or `max=!`, …), or add it to the left-hand side",
                ));
            }
        }

        let n_for = fors.len();
        let depth = n_for + indices.len();
        let mut iters: HashMap<String, usize> = HashMap::new();
        for (k, x) in indices.iter().enumerate() {
            iters.insert(x.name.clone(), n_for + k);
        }
        let mut iterators: Vec<String> = fors.iter().map(|f| f.name.clone()).collect();
        iterators.extend(indices.iter().map(|x| x.name.clone()));
        let params = self.program.param_values();

        // Ranges.
        let lookup_in = |syms: &HashMap<String, Sym>, id: &Ident| -> LResult<Var> {
            if let Some(i) = fors.iter().position(|f| f.name == id.name) {
                return Ok(Var::Iter(i));
            }
            if let Some(&i) = iters.get(&id.name) {
                return Ok(Var::Iter(i));
            }
            match syms.get(&id.name) {
                Some(Sym::Size(p)) => Ok(Var::Param(*p)),
                _ => Err(non_affine(id.span, "expression")),
            }
        };
        let mut domain: Vec<Constraint> = Vec::new();
        for f in fors {
            domain.extend(f.constraints.iter().cloned());
        }
        // Per index: its constraints, and (lower, upper) bounds used to size temporaries.
        let mut bounds: Vec<Option<(AffineExpr, AffineExpr)>> = Vec::new();
        let mut deps: Vec<Vec<usize>> = Vec::new();
        for (k, x) in indices.iter().enumerate() {
            let me = AffineExpr::var(Var::Iter(n_for + k));
            if let Some((lo, hi, _)) = &x.range {
                let lo = to_affine(lo, "bound", &mut |id| lookup_in(&self.syms, id))?;
                let hi = to_affine(hi, "bound", &mut |id| lookup_in(&self.syms, id))?;
                let mut d = Vec::new();
                for e in [&lo, &hi] {
                    for &(v, _) in e.terms() {
                        if let Var::Iter(i) = v {
                            if i >= n_for {
                                d.push(i - n_for);
                            }
                        }
                    }
                }
                deps.push(d);
                domain.push(Constraint::le(&lo, &me));
                domain.push(Constraint::lt(&me, &hi));
                bounds.push(Some((lo, hi.add(&AffineExpr::constant(-1)))));
                continue;
            }
            deps.push(Vec::new());
            let mut extents: Vec<AffineExpr> = Vec::new();
            for &(a, d) in &x.rhs_dims {
                let e = self.program.arrays[a.index()].shape[d].clone();
                if !extents.contains(&e) {
                    extents.push(e);
                }
            }
            let rhs_count = extents.len();
            if let (Some(a), Some((d, sub_span))) = (lhs_array, x.lhs_dim) {
                let lhs_extent = self.program.arrays[a.index()].shape[d].clone();
                if self.state[a.index()].declared_output && rhs_count > 0 {
                    let rhs_min = extents.iter().map(|e| e.eval(&[], &params)).min();
                    let lhs_v = lhs_extent.eval(&[], &params);
                    if rhs_min != Some(lhs_v) {
                        return Err(Diagnostic::new(
                            sub_span,
                            format!(
                                "shape mismatch: dimension {d} of `{}` has extent {lhs_v} but index `{}` ranges over {} elements on the right-hand side",
                                ts.lhs.name,
                                x.name,
                                rhs_min.unwrap_or(0)
                            ),
                        )
                        .with_hint(format!(
                            "declare `{}` with a matching shape, or give the range with `where {} in lo:hi`",
                            ts.lhs.name, x.name
                        )));
                    }
                }
                if !extents.contains(&lhs_extent) {
                    extents.push(lhs_extent);
                }
            }
            if extents.is_empty() {
                // Inferred from the affine subscripts it appears in, once the other indices'
                // ranges are known.
                bounds.push(None);
                continue;
            }
            domain.push(Constraint::le(&AffineExpr::constant(0), &me));
            for e in &extents {
                domain.push(Constraint::lt(&me, e));
            }
            // Bounds checks use the smallest extent.
            let smallest = extents
                .iter()
                .min_by_key(|e| e.eval(&[], &params))
                .cloned()
                .unwrap_or_default();
            bounds.push(Some((
                AffineExpr::constant(0),
                smallest.add(&AffineExpr::constant(-1)),
            )));
        }
        let inferred = infer::infer_ranges(
            &self.program,
            &indices.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(),
            &indices.iter().map(|x| x.first).collect::<Vec<_>>(),
            &indices
                .iter()
                .map(|x| x.lhs_dim.is_some())
                .collect::<Vec<_>>(),
            n_for,
            &mut bounds,
            &affine_uses,
            &mut |e| to_affine(e, "subscript", &mut |id| lookup_in(&self.syms, id)),
        )?;
        for range in inferred {
            domain.extend(range.constraints);
            self.notes.push(format!(
                "{}: index `{}` in {} (inferred from {})",
                ts.lhs.name,
                range.index,
                range.range,
                range.from.join(", ")
            ));
        }
        let bounds: Vec<(AffineExpr, AffineExpr)> = bounds
            .into_iter()
            .map(|b| b.expect("infer_ranges gives every index a range or fails"))
            .collect();
        check_acyclic(&indices, &deps)?;
        for w in &ts.wheres {
            if let Where::Cond(e) = w {
                to_constraints(e, &mut |id| lookup_in(&self.syms, id), &mut domain)?;
            }
        }

        // The left-hand side.
        let mut lhs_subs = Vec::new();
        for sub in &ts.subs {
            lhs_subs.push(to_affine(sub, "subscript", &mut |id| {
                lookup_in(&self.syms, id)
            })?);
        }

        // The right-hand side.
        let accumulate = ts.kind != AssignKind::Set;
        let mut names = BodyNames {
            k: self,
            fors,
            iters: &iters,
            reads: Vec::new(),
        };
        if accumulate && !ts.init {
            match lhs_array {
                Some(a) => {
                    names.read(a, lhs_subs.clone(), ts.lhs.span)?;
                }
                None => {
                    return Err(Diagnostic::new(
                        ts.op_span,
                        format!(
                            "`{}` is accumulated into before it is assigned",
                            ts.lhs.name
                        ),
                    )
                    .with_hint("initialise it with a reduction such as `+=!`, or assign it first"))
                }
            }
        } else if accumulate {
            // The update of a reduction reads the element its initialisation wrote.
            names.reads.push(Access {
                array: lhs_array.unwrap_or(ArrayId(u32::MAX)),
                subscripts: lhs_subs.clone(),
                span: ts.lhs.span,
            });
        }
        let rhs = types::check(&ts.rhs, &mut names)?;
        let mut reads = names.reads;

        let elem = match lhs_array {
            Some(a) => self.program.arrays[a.index()].elem,
            None => match rhs.ty {
                Ty::Known(ScalarType::Bool) => {
                    return Err(Diagnostic::new(
                        ts.rhs.span,
                        "type mismatch: tensors cannot hold bool",
                    )
                    .with_hint("use `select(c, 1.0, 0.0)` to store a condition"))
                }
                Ty::Known(ScalarType::F16)
                    if ts.init && matches!(ts.kind, AssignKind::Add | AssignKind::Mul) =>
                {
                    ScalarType::F32
                }
                Ty::Known(t) => t,
                Ty::Int => ScalarType::I32,
                Ty::Float => ScalarType::F32,
            },
        };
        let rhs = match rhs.ty {
            Ty::Known(t) if accumulate && elem.is_float() && t.is_float() && t < elem => {
                types::widen_float_leaves(rhs, elem)
            }
            _ => rhs,
        };
        types::check_convert(&rhs, elem)?;

        // A new temporary: its shape covers the subscripts written.
        let array = match lhs_array {
            Some(a) => a,
            None => {
                let mut shape = Vec::new();
                for (d, sub) in lhs_subs.iter().enumerate() {
                    let upper = param_bound(sub, true, n_for, fors, &bounds, ts.subs[d].span)?;
                    let extent = upper.add(&AffineExpr::constant(1));
                    let v = eval_params(&extent, &params);
                    if !(1..=i32::MAX as i64).contains(&v) {
                        return Err(Diagnostic::new(
                            ts.subs[d].span,
                            format!("dimension {d} of `{}` would have extent {v}", ts.lhs.name),
                        )
                        .with_hint("check the ranges of the left-hand side's indices"));
                    }
                    shape.push(extent);
                }
                self.add_array(
                    Array {
                        name: ts.lhs.name.clone(),
                        elem,
                        shape,
                        role: ArrayRole::Temporary,
                        span: ts.lhs.span,
                    },
                    false,
                )
            }
        };
        for r in reads.iter_mut() {
            if r.array == ArrayId(u32::MAX) {
                r.array = array;
            }
        }

        // Bodies.
        let mut exprs = ExprArena::new();
        let value = types::emit(&rhs, Some(elem), &mut exprs);
        let (body, reduction) = if accumulate {
            let lhs_read = exprs.push(Expr::Read(0));
            let (op, red, value) = match ts.kind {
                AssignKind::Add => (BinaryOp::Add, ReductionOp::Add, value),
                AssignKind::Sub => (BinaryOp::Sub, ReductionOp::Add, value),
                AssignKind::Mul => (BinaryOp::Mul, ReductionOp::Mul, value),
                AssignKind::Max => (BinaryOp::Max, ReductionOp::Max, value),
                AssignKind::Min => (BinaryOp::Min, ReductionOp::Min, value),
                AssignKind::Set => unreachable!("accumulate excludes Set"),
            };
            let body = exprs.push(Expr::Binary(op, lhs_read, value));
            let iters: Vec<usize> = (0..depth)
                .filter(|&k| lhs_subs.iter().all(|s| s.coeff(Var::Iter(k)) == 0))
                .collect();
            // A reduction combines values that the reduction itself does not change: the body
            // reads no other element of the array it updates.
            let reads_own_array = reads.iter().skip(1).any(|r| r.array == array);
            let reduction =
                (!iters.is_empty() && !reads_own_array).then_some(Reduction { op: red, iters });
            (body, reduction)
        } else {
            (value, None)
        };

        let write = Access {
            array,
            subscripts: lhs_subs,
            span: ts.lhs.span,
        };
        let mut produced = Vec::new();
        if ts.init {
            // The initialisation runs over the left-hand side's indices only.
            let init_depth = n_for + n_lhs;
            for (k, d) in deps.iter().enumerate().take(n_lhs) {
                if let Some(&r) = d.iter().find(|&&r| r >= n_lhs) {
                    return Err(Diagnostic::new(
                        indices[k].first,
                        format!(
                            "the range of `{}` depends on reduction index `{}`",
                            indices[k].name, indices[r].name
                        ),
                    )
                    .with_hint("give left-hand side indices ranges over sizes and left-hand side indices only"));
                }
            }
            let n_params = self.program.params.len();
            let init_domain: Vec<Constraint> = domain
                .iter()
                .filter(|c| c.expr.uses_only(init_depth, n_params))
                .cloned()
                .collect();
            let mut init_exprs = ExprArena::new();
            let lit = init_exprs.push(Expr::Literal(Literal {
                value: identity(ts.kind, elem),
                ty: elem,
            }));
            let mut position = path.to_vec();
            position.push(counter);
            position.resize(init_depth + 1, 0);
            produced.push(Statement {
                name: String::new(),
                iterators: iterators[..init_depth].to_vec(),
                domain: init_domain,
                write: write.clone(),
                reads: Vec::new(),
                divs: Vec::new(),
                exprs: init_exprs,
                body: lit,
                position,
                reduction: None,
                span: ts.span,
            });
        }
        let mut position = path.to_vec();
        position.push(counter + produced.len());
        position.resize(depth + 1, 0);
        reads.shrink_to_fit();
        produced.push(Statement {
            name: String::new(),
            iterators,
            domain,
            write,
            reads,
            divs: Vec::new(),
            exprs,
            body,
            position,
            reduction,
            span: ts.span,
        });
        let count = produced.len();
        for mut s in produced {
            s.domain.dedup();
            check_bounds(
                &self.program,
                &s,
                "restrict the indices with `where`, e.g. `where i in 1:N-1`",
            )?;
            let first_write = !self.state[array.index()].written;
            let complete = fors.is_empty() && covers(&self.program, &s);
            if first_write && !complete {
                self.state[array.index()].needs_initial = true;
            }
            self.state[array.index()].written = true;
            s.name = format!("S{}", self.program.statements.len());
            self.program.statements.push(s);
        }
        Ok(count)
    }
}

/// Rejects `where` ranges that depend on each other in a cycle (the domain could be unbounded).
fn check_acyclic(indices: &[IndexInfo], deps: &[Vec<usize>]) -> LResult<()> {
    // 0 = unvisited, 1 = on the stack, 2 = done.
    fn visit(k: usize, deps: &[Vec<usize>], mark: &mut [u8]) -> Option<usize> {
        match mark[k] {
            1 => return Some(k),
            2 => return None,
            _ => {}
        }
        mark[k] = 1;
        for &d in &deps[k] {
            if let Some(c) = visit(d, deps, mark) {
                return Some(c);
            }
        }
        mark[k] = 2;
        None
    }
    let mut mark = vec![0u8; indices.len()];
    for k in 0..indices.len() {
        if let Some(c) = visit(k, deps, &mut mark) {
            let span = indices[c].range.as_ref().map_or(indices[c].first, |r| r.2);
            return Err(Diagnostic::new(
                span,
                format!("the range of `{}` depends on itself", indices[c].name),
            )
            .with_hint("bound each index by sizes and indices whose ranges do not depend on it"));
        }
    }
    Ok(())
}

/// An upper (or lower) bound of `e` over the statement's iterators, in the sizes only, found by
/// replacing every iterator by its own bound. The ranges are acyclic, so this terminates.
fn param_bound(
    e: &AffineExpr,
    upper: bool,
    n_for: usize,
    fors: &[ForLoop],
    bounds: &[(AffineExpr, AffineExpr)],
    span: Span,
) -> LResult<AffineExpr> {
    let mut current = e.clone();
    // Each substitution replaces the deepest iterator by expressions in shallower or acyclic
    // ones; `depth * depth` rounds are enough for an acyclic system.
    let depth = n_for + bounds.len();
    for _ in 0..=(depth * depth + 1) {
        let Some(&(v, c)) = current
            .terms()
            .iter()
            .find(|(v, _)| matches!(v, Var::Iter(_)))
        else {
            return Ok(current);
        };
        let Var::Iter(i) = v else {
            unreachable!("filtered to iterators")
        };
        let want_upper = upper == (c > 0);
        let replacement = if i < n_for {
            let f = &fors[i];
            if want_upper {
                f.hi.add(&AffineExpr::constant(-1))
            } else {
                f.lo.clone()
            }
        } else if want_upper {
            bounds[i - n_for].1.clone()
        } else {
            bounds[i - n_for].0.clone()
        };
        if replacement.coeff(v) != 0
            || replacement.terms().iter().any(|&(_, k)| k.abs() > 1 << 20)
            || c.abs() > 1 << 20
        {
            break;
        }
        current = current
            .sub(&AffineExpr::term(v, c))
            .add(&replacement.scale(c));
    }
    Err(
        Diagnostic::new(span, "cannot bound this subscript by the sizes")
            .with_hint("give the indices ranges in terms of sizes with `where i in lo:hi`"),
    )
}

/// Whether the statement certainly writes every element of the array it writes: its iterators
/// are exactly the write's subscripts, each ranging over at least the whole dimension.
fn covers(program: &Program, s: &Statement) -> bool {
    let extents = program.array_extents(s.write.array);
    let params = program.param_values();
    let n = s.depth();
    if s.write.subscripts.len() != n {
        return false;
    }
    // dim_of[k]: the dimension iterator k subscripts.
    let mut dim_of = vec![usize::MAX; n];
    for (d, sub) in s.write.subscripts.iter().enumerate() {
        match (sub.terms(), sub.constant) {
            ([(Var::Iter(k), 1)], 0) if dim_of[*k] == usize::MAX => dim_of[*k] = d,
            _ => return false,
        }
    }
    s.domain.iter().all(|c| {
        let (g, g0) = bind(&c.expr, n, &params);
        let vars: Vec<usize> = (0..n).filter(|&k| g[k] != 0).collect();
        match (vars.as_slice(), c.kind) {
            ([], ConstraintKind::NonNegative) => g0 >= 0,
            // i + g0 >= 0 holds from i = 0 when g0 >= 0.
            ([k], ConstraintKind::NonNegative) if g[*k] == 1 => g0 >= 0,
            // -i + g0 >= 0 holds up to i = extent - 1 when g0 >= extent - 1.
            ([k], ConstraintKind::NonNegative) if g[*k] == -1 => {
                g0 >= extents[dim_of[*k]] as i128 - 1
            }
            _ => false,
        }
    })
}

/// The value of a parameter-only expression, saturated to the `i64` range (`AffineExpr::eval`
/// could overflow on the unchecked shapes this validates).
fn eval_params(e: &AffineExpr, params: &[i64]) -> i64 {
    // Huge terms would make later unchecked evaluations overflow: call the extent invalid.
    let huge = e.terms().iter().any(|&(v, c)| match v {
        Var::Param(p) => (c as i128 * params[p.index()] as i128).abs() > 1 << 40,
        Var::Iter(_) | Var::Div(_) => true,
    });
    if huge {
        return i64::MAX;
    }
    let (_, v) = bind(e, 0, params);
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}
