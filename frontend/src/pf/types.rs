//! Typing of expressions, shared by statement bodies and scalar functions.
//!
//! Checking turns an [`ast::Expr`] into a [`Typed`] tree whose every node has a [`Ty`]; emitting
//! writes it into an [`ExprArena`] with an explicit [`Expr::Cast`] wherever an operand's type
//! differs from the type its operator computes in. The rules:
//! - numbers promote along `i32 < f16 < f32 < f64`: a binary operator, `min`/`max`, `select`
//!   and math functions compute in the wider of their operands' types;
//! - unsuffixed literals (and operators over literals only) have no type of their own yet
//!   ([`Ty::Int`], [`Ty::Float`]): they take the type of the other operand, or of what they are
//!   assigned to, or `i32` / `f32` when nothing decides; a float literal never becomes `i32`;
//! - `bool` comes from comparisons, `&&`, `||`, `!`, `true`, `false`; it never mixes with
//!   numbers, and only numbers are compared;
//! - math functions need floating-point operands (`abs` also takes `i32`).
//!
//! Names are resolved by the caller through [`Names`]: statement bodies see indices, sizes and
//! tensors, functions see their locals.

use polyhedral::program::{
    BinaryOp, Expr, ExprArena, ExprId, FunctionId, Literal, MathFn, ScalarType, Span, UnaryOp,
};

use super::ast::{self, BinOp, ExprKind, Ident, UnOp};
use crate::diagnostic::Diagnostic;

/// The type of a checked expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    Known(ScalarType),
    /// Integer literals only: becomes whatever number type the context wants.
    Int,
    /// Literals only, at least one of them a float: becomes a floating type.
    Float,
}

impl Ty {
    fn describe(self) -> String {
        match self {
            Ty::Known(t) => t.name().to_string(),
            Ty::Int => "an integer literal".to_string(),
            Ty::Float => "a float literal".to_string(),
        }
    }

    fn is_bool(self) -> bool {
        self == Ty::Known(ScalarType::Bool)
    }

    /// The type it is emitted at when the context does not say.
    fn default_type(self) -> ScalarType {
        match self {
            Ty::Known(t) => t,
            Ty::Int => ScalarType::I32,
            Ty::Float => ScalarType::F32,
        }
    }
}

fn rank(t: ScalarType) -> u8 {
    match t {
        ScalarType::I32 => 0,
        ScalarType::F16 => 1,
        ScalarType::F32 => 2,
        ScalarType::F64 => 3,
        ScalarType::Bool => 4,
    }
}

/// A checked expression.
#[derive(Clone, Debug)]
pub(crate) struct Typed {
    pub kind: TKind,
    pub ty: Ty,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub(crate) enum TKind {
    Lit(f64),
    /// A leaf of the IR: an iterator, a size, a read or a local.
    Leaf(Expr),
    Unary(UnaryOp, Box<Typed>),
    /// The operator, its operands, and the type they are computed in.
    Binary(BinaryOp, Box<Typed>, Box<Typed>, Ty),
    Select(Box<Typed>, Box<Typed>, Box<Typed>),
    Math(MathFn, Vec<Typed>),
    Cast(ScalarType, Box<Typed>),
    Call(FunctionId, Vec<(Typed, ScalarType)>),
}

impl Typed {
    pub(crate) fn leaf(e: Expr, ty: ScalarType, span: Span) -> Typed {
        Typed {
            kind: TKind::Leaf(e),
            ty: Ty::Known(ty),
            span,
        }
    }
}

/// What `name(args)` is when it is not a builtin.
pub(crate) enum Callee {
    /// A value that needs no typing of the arguments (a tensor read).
    Value(Typed),
    Function {
        id: FunctionId,
        params: Vec<ScalarType>,
        ret: ScalarType,
    },
}

/// Resolution of names for [`check`].
pub(crate) trait Names {
    fn name(&mut self, id: &Ident) -> Result<Typed, Diagnostic>;
    fn call(&mut self, id: &Ident, args: &[ast::Expr], span: Span) -> Result<Callee, Diagnostic>;
}

fn mismatch(span: Span, msg: String, hint: &str) -> Diagnostic {
    Diagnostic::new(span, msg).with_hint(hint)
}

/// The type two numeric operands are computed in.
fn unify(a: &Typed, b: &Typed, what: &str) -> Result<Ty, Diagnostic> {
    for t in [a, b] {
        if t.ty.is_bool() {
            return Err(mismatch(
                t.span,
                format!("type mismatch: {what} needs numbers, found bool"),
                "use `select(c, 1.0, 0.0)` to turn a condition into a number",
            ));
        }
    }
    let float_int = |lit: &Typed, other: &Typed| {
        mismatch(
            lit.span,
            format!(
                "type mismatch: float literal used with {}",
                other.ty.describe()
            ),
            "cast the integer operand, e.g. `f32(n)`, or write an integer literal",
        )
    };
    Ok(match (a.ty, b.ty) {
        (Ty::Known(x), Ty::Known(y)) => Ty::Known(if rank(x) >= rank(y) { x } else { y }),
        (Ty::Known(ScalarType::I32), Ty::Float) => return Err(float_int(b, a)),
        (Ty::Float, Ty::Known(ScalarType::I32)) => return Err(float_int(a, b)),
        (Ty::Known(x), _) | (_, Ty::Known(x)) => Ty::Known(x),
        (Ty::Int, Ty::Int) => Ty::Int,
        _ => Ty::Float,
    })
}

fn need_bool(t: &Typed, what: &str) -> Result<(), Diagnostic> {
    if t.ty.is_bool() {
        Ok(())
    } else {
        Err(mismatch(
            t.span,
            format!(
                "type mismatch: {what} needs a bool, found {}",
                t.ty.describe()
            ),
            "compare it, e.g. `x != 0`",
        ))
    }
}

/// Checks that `t` may be stored into a tensor of type `to` (any number converts to any number).
pub(crate) fn check_convert(t: &Typed, to: ScalarType) -> Result<(), Diagnostic> {
    match (t.ty, to) {
        (Ty::Known(ScalarType::Bool), _) | (_, ScalarType::Bool) if t.ty != Ty::Known(to) => {
            Err(mismatch(
                t.span,
                format!("type mismatch: expected {to}, found {}", t.ty.describe()),
                "tensors hold numbers; use `select(c, 1.0, 0.0)` for a condition",
            ))
        }
        (Ty::Float, ScalarType::I32) => Err(mismatch(
            t.span,
            "type mismatch: float literal where i32 is expected".to_string(),
            "write an integer literal or cast with `i32(…)`",
        )),
        _ => Ok(()),
    }
}

/// Checks that `t` may be stored into a local, parameter or return value of type `to` without
/// losing information: the same type, or a wider number.
pub(crate) fn check_widen(t: &Typed, to: ScalarType, what: &str) -> Result<(), Diagnostic> {
    let ok = match t.ty {
        Ty::Known(from) => {
            from == to
                || (from != ScalarType::Bool && to != ScalarType::Bool && rank(from) < rank(to))
        }
        Ty::Int => to != ScalarType::Bool,
        Ty::Float => to.is_float(),
    };
    if ok {
        Ok(())
    } else {
        Err(mismatch(
            t.span,
            format!(
                "type mismatch: {what} has type {to}, found {}",
                t.ty.describe()
            ),
            "convert explicitly with a cast such as `i32(x)` or `f32(x)`",
        ))
    }
}

pub(crate) fn check(e: &ast::Expr, names: &mut dyn Names) -> Result<Typed, Diagnostic> {
    let span = e.span;
    let mk = |kind, ty| Typed { kind, ty, span };
    Ok(match &e.kind {
        ExprKind::Int(v) => {
            if i32::try_from(*v).is_err() {
                return Err(mismatch(
                    span,
                    "integer literal out of the i32 range".to_string(),
                    "write it as a float literal, e.g. `3000000000.0`",
                ));
            }
            mk(TKind::Lit(*v as f64), Ty::Int)
        }
        ExprKind::Float(v) => mk(TKind::Lit(*v), Ty::Float),
        ExprKind::Bool(b) => mk(
            TKind::Lit(if *b { 1.0 } else { 0.0 }),
            Ty::Known(ScalarType::Bool),
        ),
        ExprKind::Name(id) => {
            let mut t = names.name(id)?;
            t.span = span;
            t
        }
        ExprKind::Unary(UnOp::Neg, a) => {
            let a = check(a, names)?;
            if a.ty.is_bool() {
                return Err(mismatch(
                    a.span,
                    "type mismatch: `-` needs a number, found bool".to_string(),
                    "use `!` to negate a condition",
                ));
            }
            let ty = a.ty;
            mk(TKind::Unary(UnaryOp::Neg, Box::new(a)), ty)
        }
        ExprKind::Unary(UnOp::Not, a) => {
            let a = check(a, names)?;
            need_bool(&a, "`!`")?;
            mk(
                TKind::Unary(UnaryOp::Not, Box::new(a)),
                Ty::Known(ScalarType::Bool),
            )
        }
        ExprKind::Binary(op, a, b) => {
            let a = check(a, names)?;
            let b = check(b, names)?;
            binary(*op, a, b, span)?
        }
        ExprKind::Ternary(c, a, b) => {
            let c = check(c, names)?;
            let a = check(a, names)?;
            let b = check(b, names)?;
            select(c, a, b, span)?
        }
        ExprKind::Call(id, args) => call(id, args, span, names)?,
    })
}

fn binary(op: BinOp, a: Typed, b: Typed, span: Span) -> Result<Typed, Diagnostic> {
    let (ir, arith) = match op {
        BinOp::Add => (BinaryOp::Add, true),
        BinOp::Sub => (BinaryOp::Sub, true),
        BinOp::Mul => (BinaryOp::Mul, true),
        BinOp::Div => (BinaryOp::Div, true),
        BinOp::Rem => (BinaryOp::Rem, true),
        BinOp::Lt => (BinaryOp::Lt, false),
        BinOp::Le => (BinaryOp::Le, false),
        BinOp::Gt => (BinaryOp::Gt, false),
        BinOp::Ge => (BinaryOp::Ge, false),
        BinOp::Eq => (BinaryOp::Eq, false),
        BinOp::Ne => (BinaryOp::Ne, false),
        BinOp::And | BinOp::Or => {
            let sym = if op == BinOp::And { "`&&`" } else { "`||`" };
            need_bool(&a, sym)?;
            need_bool(&b, sym)?;
            let ir = if op == BinOp::And {
                BinaryOp::And
            } else {
                BinaryOp::Or
            };
            let t = Ty::Known(ScalarType::Bool);
            return Ok(Typed {
                kind: TKind::Binary(ir, Box::new(a), Box::new(b), t),
                ty: t,
                span,
            });
        }
    };
    let what = format!("`{}`", ir.symbol());
    let operand = unify(&a, &b, &what)?;
    if ir == BinaryOp::Rem && !matches!(operand, Ty::Known(ScalarType::I32) | Ty::Int) {
        return Err(mismatch(
            span,
            format!(
                "type mismatch: `%` needs i32 operands, found {}",
                operand.describe()
            ),
            "cast the operands with `i32(…)`",
        ));
    }
    let ty = if arith {
        operand
    } else {
        Ty::Known(ScalarType::Bool)
    };
    Ok(Typed {
        kind: TKind::Binary(ir, Box::new(a), Box::new(b), operand),
        ty,
        span,
    })
}

fn select(c: Typed, a: Typed, b: Typed, span: Span) -> Result<Typed, Diagnostic> {
    need_bool(&c, "a condition")?;
    let ty = if a.ty.is_bool() && b.ty.is_bool() {
        a.ty
    } else {
        unify(&a, &b, "a select")?
    };
    Ok(Typed {
        kind: TKind::Select(Box::new(c), Box::new(a), Box::new(b)),
        ty,
        span,
    })
}

fn arity_error(id: &Ident, want: usize, got: usize, span: Span) -> Diagnostic {
    Diagnostic::new(
        span,
        format!("`{}` takes {want} argument(s) but is given {got}", id.name),
    )
    .with_hint("check the call's arguments")
}

fn call(
    id: &Ident,
    args: &[ast::Expr],
    span: Span,
    names: &mut dyn Names,
) -> Result<Typed, Diagnostic> {
    let name = id.name.as_str();
    let mk = |kind, ty| Typed { kind, ty, span };
    if let Some(to) = super::parser::parse_type_name(name) {
        if args.len() != 1 {
            return Err(arity_error(id, 1, args.len(), span));
        }
        let a = check(&args[0], names)?;
        if to == ScalarType::Bool || a.ty.is_bool() {
            return Err(mismatch(
                span,
                format!("type mismatch: cannot cast {} to {to}", a.ty.describe()),
                "compare a number to get a bool, or use `select(c, 1, 0)` for a number",
            ));
        }
        return Ok(mk(TKind::Cast(to, Box::new(a)), Ty::Known(to)));
    }
    if name == "min" || name == "max" {
        if args.len() != 2 {
            return Err(arity_error(id, 2, args.len(), span));
        }
        let a = check(&args[0], names)?;
        let b = check(&args[1], names)?;
        let ty = unify(&a, &b, &format!("`{name}`"))?;
        let op = if name == "min" {
            BinaryOp::Min
        } else {
            BinaryOp::Max
        };
        return Ok(mk(TKind::Binary(op, Box::new(a), Box::new(b), ty), ty));
    }
    if name == "select" {
        if args.len() != 3 {
            return Err(arity_error(id, 3, args.len(), span));
        }
        let c = check(&args[0], names)?;
        let a = check(&args[1], names)?;
        let b = check(&args[2], names)?;
        return select(c, a, b, span);
    }
    if let Some(m) = MathFn::from_name(name) {
        if args.len() != m.arity() {
            return Err(arity_error(id, m.arity(), args.len(), span));
        }
        let mut typed = Vec::new();
        for a in args {
            typed.push(check(a, names)?);
        }
        let mut ty = typed[0].ty;
        if typed.len() == 2 {
            ty = unify(&typed[0], &typed[1], &format!("`{name}`"))?;
        } else if ty.is_bool() {
            return Err(mismatch(
                typed[0].span,
                format!("type mismatch: `{name}` needs a number, found bool"),
                "pass a floating-point value",
            ));
        }
        let ty = match ty {
            Ty::Int => Ty::Float,
            Ty::Known(ScalarType::I32) if m != MathFn::Abs => {
                return Err(mismatch(
                    span,
                    format!("type mismatch: `{name}` needs a floating-point argument, found i32"),
                    "cast it, e.g. `sqrt(f32(n))`",
                ))
            }
            t => t,
        };
        return Ok(mk(TKind::Math(m, typed), ty));
    }
    match names.call(id, args, span)? {
        Callee::Value(mut t) => {
            t.span = span;
            Ok(t)
        }
        Callee::Function {
            id: fid,
            params,
            ret,
        } => {
            if args.len() != params.len() {
                return Err(arity_error(id, params.len(), args.len(), span));
            }
            let mut typed = Vec::new();
            for (a, &p) in args.iter().zip(&params) {
                let t = check(a, names)?;
                check_widen(&t, p, &format!("this argument of `{name}`"))?;
                typed.push((t, p));
            }
            Ok(mk(TKind::Call(fid, typed), Ty::Known(ret)))
        }
    }
}

/// Writes `t` into `arena` at type `want` (its own type when `None`), casting where needed.
/// `t` was checked, and conversions to `want` were checked by [`check_convert`] or
/// [`check_widen`].
pub(crate) fn emit(t: &Typed, want: Option<ScalarType>, arena: &mut ExprArena) -> ExprId {
    let own = match t.ty {
        Ty::Known(k) => k,
        Ty::Int => match want {
            Some(w) if w != ScalarType::Bool => w,
            _ => ScalarType::I32,
        },
        Ty::Float => match want {
            Some(w) if w.is_float() => w,
            _ => ScalarType::F32,
        },
    };
    let id = emit_at(t, own, arena);
    match want {
        Some(w) if w != own => arena.push(Expr::Cast(w, id)),
        _ => id,
    }
}

/// Emits `t` computing in `ty` (its known type, or the type chosen for a literal tree).
fn emit_at(t: &Typed, ty: ScalarType, arena: &mut ExprArena) -> ExprId {
    match &t.kind {
        TKind::Lit(v) => {
            let value = if ty == ScalarType::I32 { v.trunc() } else { *v };
            arena.push(Expr::Literal(Literal { value, ty }))
        }
        TKind::Leaf(e) => arena.push(e.clone()),
        TKind::Unary(op, a) => {
            let a = emit(a, Some(ty), arena);
            arena.push(Expr::Unary(*op, a))
        }
        TKind::Binary(op, a, b, operand) => {
            let at = if op.is_comparison() || op.is_logical() {
                match operand {
                    Ty::Known(k) => *k,
                    _ => operand.default_type(),
                }
            } else {
                ty
            };
            let a = emit(a, Some(at), arena);
            let b = emit(b, Some(at), arena);
            arena.push(Expr::Binary(*op, a, b))
        }
        TKind::Select(c, a, b) => {
            let c = emit(c, Some(ScalarType::Bool), arena);
            let a = emit(a, Some(ty), arena);
            let b = emit(b, Some(ty), arena);
            arena.push(Expr::Select {
                cond: c,
                then: a,
                otherwise: b,
            })
        }
        TKind::Math(m, args) => {
            let args = args.iter().map(|a| emit(a, Some(ty), arena)).collect();
            arena.push(Expr::Math(*m, args))
        }
        TKind::Cast(to, a) => {
            // A literal converts at compile time: `f32(2)` is the literal 2.0f32.
            let direct = match a.ty {
                Ty::Int => *to != ScalarType::Bool,
                Ty::Float => to.is_float(),
                Ty::Known(k) => k == *to,
            };
            if direct {
                emit(a, Some(*to), arena)
            } else {
                let inner = emit(a, None, arena);
                arena.push(Expr::Cast(*to, inner))
            }
        }
        TKind::Call(f, args) => {
            let args = args.iter().map(|(a, p)| emit(a, Some(*p), arena)).collect();
            arena.push(Expr::Call(*f, args))
        }
    }
}

/// Casts every floating-point leaf narrower than `to` up to `to`, so that an accumulation into
/// `to` computes its right-hand side in `to` (products of `f16` values are exact in `f32`), and
/// recomputes the types above them.
pub(crate) fn widen_float_leaves(t: Typed, to: ScalarType) -> Typed {
    let span = t.span;
    match t.kind {
        TKind::Leaf(_) | TKind::Call(..) | TKind::Cast(..) => match t.ty {
            Ty::Known(k) if k.is_float() && rank(k) < rank(to) => Typed {
                kind: TKind::Cast(to, Box::new(t)),
                ty: Ty::Known(to),
                span,
            },
            _ => t,
        },
        TKind::Lit(_) => t,
        TKind::Unary(op, a) => {
            let a = widen_float_leaves(*a, to);
            let ty = if op == UnaryOp::Neg { a.ty } else { t.ty };
            Typed {
                kind: TKind::Unary(op, Box::new(a)),
                ty,
                span,
            }
        }
        TKind::Binary(op, a, b, _) => {
            let a = widen_float_leaves(*a, to);
            let b = widen_float_leaves(*b, to);
            let operand = if op.is_logical() {
                Ty::Known(ScalarType::Bool)
            } else {
                // Both operands were numbers of compatible types before widening.
                unify(&a, &b, "").unwrap_or(a.ty)
            };
            let ty = if op.is_comparison() || op.is_logical() {
                Ty::Known(ScalarType::Bool)
            } else {
                operand
            };
            Typed {
                kind: TKind::Binary(op, Box::new(a), Box::new(b), operand),
                ty,
                span,
            }
        }
        TKind::Select(c, a, b) => {
            let c = widen_float_leaves(*c, to);
            let a = widen_float_leaves(*a, to);
            let b = widen_float_leaves(*b, to);
            let ty = if a.ty.is_bool() {
                a.ty
            } else {
                unify(&a, &b, "").unwrap_or(a.ty)
            };
            Typed {
                kind: TKind::Select(Box::new(c), Box::new(a), Box::new(b)),
                ty,
                span,
            }
        }
        TKind::Math(m, args) => {
            let args: Vec<Typed> = args
                .into_iter()
                .map(|a| widen_float_leaves(a, to))
                .collect();
            let mut ty = args[0].ty;
            if args.len() == 2 {
                ty = unify(&args[0], &args[1], "").unwrap_or(ty);
            }
            if ty == Ty::Int {
                ty = Ty::Float;
            }
            Typed {
                kind: TKind::Math(m, args),
                ty,
                span,
            }
        }
    }
}
