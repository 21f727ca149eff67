//! The syntax tree of a `.pf` file, as the parser builds it: names are not resolved and
//! expressions are not typed yet. Every node keeps its source span for diagnostics.
//!
//! Expression trees record their height, and the parser rejects trees taller than
//! [`MAX_HEIGHT`], so every later recursive walk over them is bounded.

use polyhedral::program::{ScalarType, Span};

/// The tallest expression tree (and deepest block nesting) the parser accepts.
pub(crate) const MAX_HEIGHT: u32 = 96;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct TypeAnn {
    pub ty: ScalarType,
    pub span: Span,
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

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ExprKind {
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A bare name: an index, a size, a scalar tensor, a local.
    Name(Ident),
    /// `name(args)`: a tensor access, a call, a math function, a cast, `min`/`max`/`select`.
    Call(Ident, Vec<Expr>),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `cond ? then : otherwise`
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Expr {
    pub kind: ExprKind,
    pub span: Span,
    /// 1 for a leaf, one more than the tallest operand otherwise.
    pub height: u32,
}

impl Expr {
    pub(crate) fn leaf(kind: ExprKind, span: Span) -> Expr {
        Expr {
            kind,
            span,
            height: 1,
        }
    }

    /// A node over `children`, its height one above theirs.
    pub(crate) fn node(kind: ExprKind, span: Span) -> Expr {
        let height = 1 + match &kind {
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Name(_) => 0,
            ExprKind::Call(_, args) => args.iter().map(|a| a.height).max().unwrap_or(0),
            ExprKind::Unary(_, a) => a.height,
            ExprKind::Binary(_, a, b) => a.height.max(b.height),
            ExprKind::Ternary(a, b, c) => a.height.max(b.height).max(c.height),
        };
        Expr { kind, span, height }
    }
}

/// A statement of a scalar function.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum FnStmt {
    /// `var x = e;` (mutable) or `let x = e;`, with an optional `: type`.
    Decl {
        mutable: bool,
        name: Ident,
        ty: Option<TypeAnn>,
        init: Expr,
    },
    /// `x = e;` or `x op= e;` (`op` one of `+ - * /`).
    Assign {
        name: Ident,
        op: Option<BinOp>,
        value: Expr,
    },
    If {
        cond: Expr,
        then: Vec<FnStmt>,
        otherwise: Vec<FnStmt>,
    },
    While {
        cond: Expr,
        body: Vec<FnStmt>,
    },
    Return {
        value: Expr,
        span: Span,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FnDecl {
    pub name: Ident,
    pub params: Vec<(Ident, TypeAnn)>,
    pub ret: TypeAnn,
    pub body: Vec<FnStmt>,
    /// The closing brace, where a missing `return` is reported.
    pub end: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SizeDecl {
    pub name: Ident,
    pub default: Option<i64>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TensorDecl {
    pub name: Ident,
    pub elem: TypeAnn,
    /// Extents, affine in the sizes; empty for a scalar.
    pub shape: Vec<Expr>,
}

/// How a tensor statement combines its right-hand side with the element it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AssignKind {
    Set,
    Add,
    Sub,
    Mul,
    Max,
    Min,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Where {
    /// `i in lo:hi`
    Range { index: Ident, lo: Expr, hi: Expr },
    /// An affine condition such as `i <= j`.
    Cond(Expr),
}

/// `LHS(subs) op rhs where …;`
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TensorStmt {
    pub lhs: Ident,
    pub subs: Vec<Expr>,
    pub kind: AssignKind,
    /// The `!` of `+=!`: initialise with the operator's identity first.
    pub init: bool,
    pub op_span: Span,
    pub rhs: Expr,
    pub wheres: Vec<Where>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum KernelStmt {
    Tensor(TensorStmt),
    /// `for t in lo:hi { … }`
    For {
        var: Ident,
        lo: Expr,
        hi: Expr,
        body: Vec<KernelStmt>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Kernel {
    pub name: Ident,
    pub sizes: Vec<SizeDecl>,
    pub inputs: Vec<TensorDecl>,
    pub outputs: Vec<TensorDecl>,
    pub body: Vec<KernelStmt>,
}

/// A whole file: scalar functions and kernels in source order.
#[derive(Clone, Debug, PartialEq, Default)]
pub(crate) struct File {
    pub functions: Vec<FnDecl>,
    pub kernels: Vec<Kernel>,
}
