//! The syntax tree of a SCoP kernel: the kernel function's declarations and the statements
//! between `#pragma scop` and `#pragma endscop`, as written (after preprocessing). Nothing here
//! is checked for affinity or typed; [`super::lower`] does that.

use super::Loc;

/// The C types a kernel's data may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CType {
    Int,
    Float,
    Double,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Expr {
    pub kind: ExprKind,
    pub loc: Loc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

/// `=`, or the arithmetic of a compound assignment (`+=` is `Some(BinOp::Add)`).
pub(crate) type AssignOp = Option<BinOp>;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ExprKind {
    Int(i64),
    Float {
        value: f64,
        single: bool,
    },
    /// An identifier; `size` is the value of a size macro the preprocessor left as a name.
    Name {
        name: String,
        size: Option<i64>,
    },
    /// `base[index]`; `A[i][j]` is `Index(Index(A, i), j)`.
    Index(Box<Expr>, Box<Expr>),
    Call {
        name: String,
        args: Vec<Expr>,
    },
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    Cast(CType, Box<Expr>),
    Assign(AssignOp, Box<Expr>, Box<Expr>),
    /// `x++`, `++x` (`delta` 1) and `x--`, `--x` (`delta` -1): only their effect matters in a
    /// SCoP, never their value.
    Step {
        target: Box<Expr>,
        delta: i64,
    },
}

impl Expr {
    /// Structural equality, ignoring locations (to recognise `a < b ? a : b` as `min`).
    pub fn same_as(&self, other: &Expr) -> bool {
        use ExprKind as K;
        match (&self.kind, &other.kind) {
            (K::Int(a), K::Int(b)) => a == b,
            (
                K::Float {
                    value: a,
                    single: s,
                },
                K::Float {
                    value: b,
                    single: t,
                },
            ) => a == b && s == t,
            (K::Name { name: a, .. }, K::Name { name: b, .. }) => a == b,
            (K::Index(a, i), K::Index(b, j)) => a.same_as(b) && i.same_as(j),
            (K::Call { name: a, args: x }, K::Call { name: b, args: y }) => {
                a == b && x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.same_as(q))
            }
            (K::Unary(o, a), K::Unary(p, b)) => o == p && a.same_as(b),
            (K::Binary(o, a, b), K::Binary(p, c, d)) => o == p && a.same_as(c) && b.same_as(d),
            (K::Cond(a, b, c), K::Cond(d, e, f)) => a.same_as(d) && b.same_as(e) && c.same_as(f),
            (K::Cast(t, a), K::Cast(u, b)) => t == u && a.same_as(b),
            _ => false,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Stmt {
    pub kind: StmtKind,
    pub loc: Loc,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum StmtKind {
    For {
        init: Option<Expr>,
        cond: Option<Expr>,
        step: Option<Expr>,
        body: Box<Stmt>,
    },
    If {
        cond: Expr,
        then: Box<Stmt>,
        otherwise: Option<Box<Stmt>>,
    },
    Block(Vec<Stmt>),
    Expr(Expr),
    Empty,
}

/// A declared variable: a kernel parameter or a local of the kernel function.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Decl {
    pub name: String,
    pub loc: Loc,
    pub ty: CType,
    /// `char` or `short` data, held as `int`: reading it is exact, storing to it is not
    /// (C would truncate), so the lowering refuses stores.
    pub narrow: Option<&'static str>,
    /// An integer type fine for sizes and iterators but refused as data (`unsigned`,
    /// `size_t`, `uint32_t`, `int64_t`, …), whose arithmetic polyfuse's `i32` does not have.
    pub index_only: Option<&'static str>,
    /// Extents, outermost first; empty for a scalar. `None` for an extent left out (`A[]`).
    pub dims: Vec<Option<Expr>>,
    pub pointer: bool,
    /// A local's initializer (`double eps = 0.1;`): the expression, or where an initializer
    /// that is not one expression starts.
    pub init: Option<Result<Expr, Loc>>,
}

/// The function holding the SCoP.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Kernel {
    /// The function's name; empty for a SCoP at file scope (a fragment).
    pub name: String,
    /// Variables declared at file scope before the SCoP.
    pub globals: Vec<Decl>,
    pub params: Vec<Decl>,
    /// Declarations in the function body before `#pragma scop`.
    pub locals: Vec<Decl>,
    pub body: Vec<Stmt>,
    /// From the `#` of `#pragma scop` to the end of `#pragma endscop`, in the main file.
    pub scop: Loc,
}
