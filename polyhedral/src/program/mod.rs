//! The Program IR: what every front end produces and every pass and back end reads.
//!
//! A [`Program`] is a static control part (SCoP): arrays with element types, shapes and roles;
//! size parameters with their values; statements, each an iteration domain (affine constraints
//! over its named iterators and the parameters), the one array element it writes, the elements it
//! reads, an expression body and its place in the original loop nest; and scalar functions that
//! statement bodies may call.
//!
//! Invariants a front end establishes and [`Program::verify`] checks:
//! - every handle (array, parameter, function, expression, read) is in range;
//! - affine expressions in a statement use only that statement's iterators and the parameters,
//!   and subscripts also its division variables ([`Statement::divs`]: each a positive
//!   divisor and a numerator over the iterators, the parameters and the divisions before it);
//!   domains use no division variable, array shapes only parameters;
//! - a statement's iterators are listed outermost first, and `position` has one entry more than
//!   there are iterators: the statement's textual position at each loop depth, which with the
//!   iterators gives the classic 2d+1 original schedule `[p0, i0, p1, i1, …, pd]`;
//! - no two statements have the same original schedule prefix pattern (positions differ at the
//!   first level where their loop nests diverge);
//! - expression bodies are typed: [`Expr`] nodes carry no types themselves; [`Program::expr_type`]
//!   derives them, and the front ends insert explicit casts wherever operand types differ.
//!
//! Domains and accesses are plain conjunctions of affine constraints and tuples of affine
//! expressions, so the integer-set library takes them over directly: a domain is the basic set
//! `[params] -> { S[iterators] : constraints }`, an access the basic map
//! `[params] -> { S[iterators] -> A[subscripts] }`, its division variables existentially
//! quantified locals with their two defining inequalities (`A[t % 2]` is
//! `{ S[t] -> A[t - 2q] : exists q : 2q <= t <= 2q + 1 }`).

mod affine;
mod bounds;
mod display;
mod expr;
mod function;
mod nest;

pub use affine::{AffineExpr, Constraint, ConstraintKind, Division, Var};
pub use bounds::{count_points, loop_bounds};
pub use expr::{BinaryOp, Expr, ExprArena, ExprId, Literal, MathFn, UnaryOp};
pub use function::{Block, Function, FunctionId, Local, LocalId, Stmt};
pub use nest::{build_nest, collect_stmts, NestError, NestNode};

use std::fmt;

/// The element type of an array, a value, or an expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScalarType {
    F16,
    F32,
    F64,
    I32,
    /// The type of comparisons and logical operators; never an array element type.
    Bool,
}

impl ScalarType {
    pub fn is_float(self) -> bool {
        matches!(self, ScalarType::F16 | ScalarType::F32 | ScalarType::F64)
    }

    /// Size of one element in bytes (a `bool` counts as one byte).
    pub fn size_in_bytes(self) -> usize {
        match self {
            ScalarType::F16 => 2,
            ScalarType::F32 | ScalarType::I32 => 4,
            ScalarType::F64 => 8,
            ScalarType::Bool => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ScalarType::F16 => "f16",
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
            ScalarType::I32 => "i32",
            ScalarType::Bool => "bool",
        }
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How an array relates to the outside of the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArrayRole {
    /// Read, never written; its initial contents are the kernel's input.
    Input,
    /// Written, and its initial contents are not read.
    Output,
    /// Written, and its initial contents may be read.
    InOut,
    /// Neither an input nor an output: lives only while the kernel runs. Where it is stored is
    /// the compiler's choice.
    Temporary,
}

impl ArrayRole {
    pub fn name(self) -> &'static str {
        match self {
            ArrayRole::Input => "input",
            ArrayRole::Output => "output",
            ArrayRole::InOut => "inout",
            ArrayRole::Temporary => "temporary",
        }
    }

    /// Whether the array's final contents are a result of the kernel.
    pub fn is_live_out(self) -> bool {
        matches!(self, ArrayRole::Output | ArrayRole::InOut)
    }

    /// Whether the array's initial contents are given from outside.
    pub fn is_live_in(self) -> bool {
        matches!(self, ArrayRole::Input | ArrayRole::InOut)
    }
}

/// Index of an array in [`Program::arrays`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArrayId(pub u32);

/// Index of a size parameter in [`Program::params`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParamId(pub u32);

/// Index of a statement in [`Program::statements`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StmtId(pub u32);

impl ArrayId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}
impl ParamId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}
impl StmtId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A location in the source a program came from: byte offsets into the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The smallest span covering both.
    pub fn join(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// A compile-time size (`M` in `<M = 512>`, `N` from `#define N 1000`). Domains and shapes are
/// affine in the parameters; `value` is the size this compilation is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub value: i64,
}

/// A tensor (or, with an empty shape, a scalar).
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub name: String,
    pub elem: ScalarType,
    /// Extent of each dimension, affine in the parameters; empty for a scalar.
    pub shape: Vec<AffineExpr>,
    pub role: ArrayRole,
    pub span: Span,
}

/// One array element named by affine subscripts over a statement's iterators, the
/// parameters and the statement's division variables. A scalar (0-dimensional array) has no
/// subscripts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    pub array: ArrayId,
    pub subscripts: Vec<AffineExpr>,
    pub span: Span,
}

/// The reduction a statement performs, when it is the update of a reduction: the statement reads
/// the element it writes (and no other element of that array) and combines it with its body's
/// other operand by `op` (`x - e` counts as an `Add` of `-e`). `iters` is never empty. This is
/// what lets later passes reorder the iterations of `iters` (a parallel reduction); which of them
/// may really be reordered is for dependence analysis to say, since another statement may
/// re-initialise the element between them (a scalar accumulator reset in an outer loop).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reduction {
    pub op: ReductionOp,
    /// The iterators (indices into [`Statement::iterators`]) reduced over: those that do not
    /// appear in the written element's subscripts.
    pub iters: Vec<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReductionOp {
    Add,
    Mul,
    Max,
    Min,
}

impl ReductionOp {
    pub fn name(self) -> &'static str {
        match self {
            ReductionOp::Add => "+",
            ReductionOp::Mul => "*",
            ReductionOp::Max => "max",
            ReductionOp::Min => "min",
        }
    }
}

/// One statement of the SCoP: for every point of `domain`, in the original order,
/// `write := body`.
#[derive(Clone, Debug, PartialEq)]
pub struct Statement {
    /// `S0`, `S1`, … in program order.
    pub name: String,
    /// Loop iterators, outermost first.
    pub iterators: Vec<String>,
    /// The iteration domain: a conjunction of affine constraints over `iterators` and the
    /// parameters. Bounded for every parameter value.
    pub domain: Vec<Constraint>,
    /// The element this statement writes.
    pub write: Access,
    /// The elements the body reads, referred to by [`Expr::Read`].
    pub reads: Vec<Access>,
    /// The division variables the subscripts use ([`Var::Div`] `k` is `divs[k]`), each
    /// defined by the iterators, the parameters and the divisions before it.
    pub divs: Vec<Division>,
    /// Expressions of the body; `body` is the root.
    pub exprs: ExprArena,
    pub body: ExprId,
    /// Textual position at each loop depth (`iterators.len() + 1` entries); see the module docs.
    pub position: Vec<usize>,
    pub reduction: Option<Reduction>,
    pub span: Span,
}

impl Statement {
    pub fn depth(&self) -> usize {
        self.iterators.len()
    }

    /// Every access, the write first, then the reads in order.
    pub fn accesses(&self) -> impl Iterator<Item = (AccessKind, &Access)> {
        std::iter::once((AccessKind::Write, &self.write))
            .chain(self.reads.iter().map(|a| (AccessKind::Read, a)))
    }

    /// The values of the division variables at an instance.
    pub fn division_values(&self, iters: &[i64], params: &[i64]) -> Vec<i64> {
        let mut values = Vec::with_capacity(self.divs.len());
        for d in &self.divs {
            let num = d.num.eval_with(iters, &values, params);
            values.push(num.div_euclid(d.den));
        }
        values
    }

    /// The value of an expression of this statement (subscripts included) at an instance.
    pub fn eval(&self, e: &AffineExpr, iters: &[i64], params: &[i64]) -> i64 {
        if e.has_divisions() {
            e.eval_with(iters, &self.division_values(iters, params), params)
        } else {
            e.eval(iters, params)
        }
    }

    /// Whether `e` varies with the iterator at `depth`, directly or through a division.
    pub fn uses_iter(&self, e: &AffineExpr, depth: usize) -> bool {
        e.terms().iter().any(|&(v, _)| match v {
            Var::Iter(d) => d == depth,
            Var::Param(_) => false,
            Var::Div(k) => self
                .divs
                .get(k)
                .is_some_and(|d| self.uses_iter(&d.num, depth)),
        })
    }

    /// Whether some access uses a division variable.
    pub fn has_divisions(&self) -> bool {
        !self.divs.is_empty()
    }

    /// The 2d+1 original schedule `[p0, i0, p1, i1, …, pd]` as affine expressions.
    pub fn original_schedule(&self) -> Vec<AffineExpr> {
        let mut dims = Vec::with_capacity(2 * self.depth() + 1);
        for (level, &p) in self.position.iter().enumerate() {
            dims.push(AffineExpr::constant(p as i64));
            if level < self.depth() {
                dims.push(AffineExpr::var(Var::Iter(level)));
            }
        }
        dims
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    Read,
    Write,
}

/// Where a program came from, for messages and for source-to-source output.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum SourceKind {
    /// The `.pf` kernel language.
    #[default]
    Kernel,
    /// A C file's `#pragma scop` region; `scop` is the byte range of the region (pragmas
    /// included) in the file, so a back end can replace it. `size_names` spells each
    /// parameter as the SCoP's statements do (`ni` where the SCoP bounds a loop by the kernel
    /// parameter `ni` that stands for the size `NI`), one entry per parameter. The first
    /// `arrays` arrays are the file's data (declared by it, or used undeclared, as a
    /// fragment's are); any after them are the compiler's own temporaries, which code put
    /// back into the file must declare itself.
    CScop {
        scop: Span,
        size_names: Vec<String>,
        arrays: usize,
    },
}

/// A whole kernel.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Program {
    pub name: String,
    pub source: SourceKind,
    pub params: Vec<Param>,
    pub arrays: Vec<Array>,
    pub functions: Vec<Function>,
    pub statements: Vec<Statement>,
}

/// A violated IR invariant, found by [`Program::verify`]. Front ends never produce one; seeing it
/// means a bug in polyfuse, not in the user's kernel.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid program: {0}")]
pub struct VerifyError(pub String);

impl Program {
    pub fn array(&self, id: ArrayId) -> &Array {
        &self.arrays[id.index()]
    }

    pub fn param(&self, id: ParamId) -> &Param {
        &self.params[id.index()]
    }

    pub fn function(&self, id: FunctionId) -> &Function {
        &self.functions[id.index()]
    }

    pub fn array_by_name(&self, name: &str) -> Option<ArrayId> {
        self.arrays
            .iter()
            .position(|a| a.name == name)
            .map(|i| ArrayId(i as u32))
    }

    pub fn param_by_name(&self, name: &str) -> Option<ParamId> {
        self.params
            .iter()
            .position(|p| p.name == name)
            .map(|i| ParamId(i as u32))
    }

    pub fn statement_ids(&self) -> impl Iterator<Item = StmtId> {
        (0..self.statements.len() as u32).map(StmtId)
    }

    /// The parameters' values, indexed by [`ParamId`].
    pub fn param_values(&self) -> Vec<i64> {
        self.params.iter().map(|p| p.value).collect()
    }

    /// How many instances statement `s` has at the current sizes (`None` where that takes
    /// more than 10⁷ steps to count).
    pub fn instances(&self, s: StmtId) -> Option<u64> {
        let s = &self.statements[s.index()];
        count_points(&s.domain, s.depth(), &self.param_values(), 10_000_000)
    }

    /// The concrete extents of an array for the current parameter values.
    pub fn array_extents(&self, id: ArrayId) -> Vec<i64> {
        let params = self.param_values();
        self.array(id)
            .shape
            .iter()
            .map(|e| e.eval(&[], &params))
            .collect()
    }

    /// Number of elements of an array for the current parameter values.
    pub fn array_len(&self, id: ArrayId) -> usize {
        self.array_extents(id)
            .iter()
            .map(|&e| e.max(0) as usize)
            .product()
    }

    /// The type of an expression of a statement body.
    pub fn expr_type(&self, stmt: &Statement, id: ExprId) -> ScalarType {
        let read_type = |r: usize| self.array(stmt.reads[r].array).elem;
        // Verified statement bodies have no locals; `bool` is never asked for.
        expr::type_of(self, &stmt.exprs, id, &read_type, &|_| ScalarType::Bool)
    }

    /// Checks the invariants listed in the module docs.
    pub fn verify(&self) -> Result<(), VerifyError> {
        let err = |msg: String| Err(VerifyError(msg));
        let n_params = self.params.len();
        for a in &self.arrays {
            if a.elem == ScalarType::Bool {
                return err(format!("array `{}` has element type bool", a.name));
            }
            for e in &a.shape {
                if !e.uses_only(0, n_params) {
                    return err(format!("shape of `{}` uses an iterator", a.name));
                }
            }
        }
        for f in &self.functions {
            f.verify(self)
                .map_err(|m| VerifyError(format!("function `{}`: {m}", f.name)))?;
        }
        for s in &self.statements {
            for (k, d) in s.divs.iter().enumerate() {
                if d.den <= 0 || !d.num.uses_only_with(s.depth(), n_params, k) {
                    return err(format!("{}: division {k} is out of scope", s.name));
                }
            }
            let check_access = |acc: &Access| -> Result<(), VerifyError> {
                let Some(array) = self.arrays.get(acc.array.index()) else {
                    return err(format!("{}: array handle out of range", s.name));
                };
                if array.shape.len() != acc.subscripts.len() {
                    return err(format!(
                        "{}: `{}` has {} dimensions but is accessed with {} subscripts",
                        s.name,
                        array.name,
                        array.shape.len(),
                        acc.subscripts.len()
                    ));
                }
                if acc
                    .subscripts
                    .iter()
                    .any(|e| !e.uses_only_with(s.depth(), n_params, s.divs.len()))
                {
                    return err(format!("{}: subscript out of scope", s.name));
                }
                Ok(())
            };
            for (_, acc) in s.accesses() {
                check_access(acc)?;
            }
            if s.domain
                .iter()
                .any(|c| !c.expr.uses_only(s.depth(), n_params))
            {
                return err(format!("{}: domain constraint out of scope", s.name));
            }
            if s.position.len() != s.depth() + 1 {
                return err(format!("{}: position has the wrong length", s.name));
            }
            let read_type = |r: usize| self.array(s.reads[r].array).elem;
            let scope = expr::Scope {
                n_reads: s.reads.len(),
                n_locals: 0,
                depth: s.depth(),
                read_type: &read_type,
                local_type: &|_| ScalarType::Bool,
            };
            expr::verify_arena(self, &s.exprs, s.body, &scope)
                .map_err(|m| VerifyError(format!("{}: {m}", s.name)))?;
            let ty = self.expr_type(s, s.body);
            let elem = self.array(s.write.array).elem;
            if ty != elem {
                return err(format!(
                    "{}: body has type {ty} but writes `{}` of type {elem}",
                    s.name,
                    self.array(s.write.array).name
                ));
            }
        }
        Ok(())
    }
}
