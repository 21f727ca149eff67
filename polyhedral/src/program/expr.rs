//! Expressions of statement bodies and scalar functions, stored in an arena and addressed by
//! [`ExprId`] handles.
//!
//! Expressions are typed by construction: both operands of an arithmetic or comparison operator
//! have the same type, a `select`'s branches have the same type, conditions are `bool`, math
//! functions take and return one floating type (`abs`, `min` and `max` also take `i32`). The
//! front ends insert [`Expr::Cast`] wherever a source language promotes implicitly.

use super::{FunctionId, LocalId, ParamId, Program, ScalarType};

/// Handle of an expression in an [`ExprArena`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExprId(pub u32);

impl ExprId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The expressions of one statement body or one scalar function. Operands are always added
/// before the expressions that use them, so handles point backwards.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExprArena {
    exprs: Vec<Expr>,
}

impl ExprArena {
    pub fn new() -> ExprArena {
        ExprArena::default()
    }

    pub fn push(&mut self, e: Expr) -> ExprId {
        self.exprs.push(e);
        ExprId(self.exprs.len() as u32 - 1)
    }

    pub fn len(&self) -> usize {
        self.exprs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.exprs.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (ExprId, &Expr)> {
        self.exprs
            .iter()
            .enumerate()
            .map(|(i, e)| (ExprId(i as u32), e))
    }
}

impl std::ops::Index<ExprId> for ExprArena {
    type Output = Expr;
    fn index(&self, id: ExprId) -> &Expr {
        &self.exprs[id.index()]
    }
}

impl std::ops::IndexMut<ExprId> for ExprArena {
    fn index_mut(&mut self, id: ExprId) -> &mut Expr {
        &mut self.exprs[id.index()]
    }
}

/// A constant of a given type. Integers and booleans are held exactly in the `f64`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Literal {
    pub value: f64,
    pub ty: ScalarType,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// Truncating for integers, as in C.
    Div,
    /// Remainder with the sign of the dividend, as in C; integers only.
    Rem,
    Min,
    Max,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinaryOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge | BinaryOp::Eq | BinaryOp::Ne
        )
    }

    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or)
    }

    /// The operator as C and WGSL write it, or the function name for `min` / `max`.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::Min => "min",
            BinaryOp::Max => "max",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::And => "&&",
            BinaryOp::Or => "||",
        }
    }
}

/// Elementary functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MathFn {
    Sqrt,
    Rsqrt,
    Exp,
    Log,
    Pow,
    Abs,
    Tanh,
    Sin,
    Cos,
    Floor,
    Ceil,
}

impl MathFn {
    pub fn name(self) -> &'static str {
        match self {
            MathFn::Sqrt => "sqrt",
            MathFn::Rsqrt => "rsqrt",
            MathFn::Exp => "exp",
            MathFn::Log => "log",
            MathFn::Pow => "pow",
            MathFn::Abs => "abs",
            MathFn::Tanh => "tanh",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
        }
    }

    pub fn from_name(name: &str) -> Option<MathFn> {
        Some(match name {
            "sqrt" => MathFn::Sqrt,
            "rsqrt" => MathFn::Rsqrt,
            "exp" => MathFn::Exp,
            "log" => MathFn::Log,
            "pow" => MathFn::Pow,
            "abs" => MathFn::Abs,
            "tanh" => MathFn::Tanh,
            "sin" => MathFn::Sin,
            "cos" => MathFn::Cos,
            "floor" => MathFn::Floor,
            "ceil" => MathFn::Ceil,
            _ => return None,
        })
    }

    pub fn arity(self) -> usize {
        match self {
            MathFn::Pow => 2,
            _ => 1,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Literal(Literal),
    /// The value of a loop iterator of the statement (by depth), as `i32`.
    Iter(usize),
    /// The value of a size parameter, as `i32`.
    Param(ParamId),
    /// The element read by the statement's access of this index (statement bodies only).
    Read(usize),
    /// A parameter or local variable of a scalar function (function bodies only).
    Local(LocalId),
    Unary(UnaryOp, ExprId),
    Binary(BinaryOp, ExprId, ExprId),
    Select {
        cond: ExprId,
        then: ExprId,
        otherwise: ExprId,
    },
    Math(MathFn, Vec<ExprId>),
    Cast(ScalarType, ExprId),
    Call(FunctionId, Vec<ExprId>),
}

impl Expr {
    /// The direct operands.
    pub fn operands(&self) -> Vec<ExprId> {
        match self {
            Expr::Literal(_) | Expr::Iter(_) | Expr::Param(_) | Expr::Read(_) | Expr::Local(_) => {
                Vec::new()
            }
            Expr::Unary(_, a) | Expr::Cast(_, a) => vec![*a],
            Expr::Binary(_, a, b) => vec![*a, *b],
            Expr::Select {
                cond,
                then,
                otherwise,
            } => vec![*cond, *then, *otherwise],
            Expr::Math(_, args) | Expr::Call(_, args) => args.clone(),
        }
    }
}

/// The type of `id`, given the types of reads and locals.
pub(super) fn type_of(
    program: &Program,
    arena: &ExprArena,
    id: ExprId,
    read_type: &dyn Fn(usize) -> ScalarType,
    local_type: &dyn Fn(LocalId) -> ScalarType,
) -> ScalarType {
    match &arena[id] {
        Expr::Literal(l) => l.ty,
        Expr::Iter(_) | Expr::Param(_) => ScalarType::I32,
        Expr::Read(r) => read_type(*r),
        Expr::Local(l) => local_type(*l),
        Expr::Unary(UnaryOp::Not, _) => ScalarType::Bool,
        Expr::Unary(UnaryOp::Neg, a) => type_of(program, arena, *a, read_type, local_type),
        Expr::Binary(op, a, _) => {
            if op.is_comparison() || op.is_logical() {
                ScalarType::Bool
            } else {
                type_of(program, arena, *a, read_type, local_type)
            }
        }
        Expr::Select { then, .. } => type_of(program, arena, *then, read_type, local_type),
        Expr::Math(_, args) => type_of(program, arena, args[0], read_type, local_type),
        Expr::Cast(ty, _) => *ty,
        Expr::Call(f, _) => program.function(*f).ret,
    }
}

/// What the expressions of an arena may refer to.
pub(super) struct Scope<'a> {
    pub n_reads: usize,
    pub n_locals: usize,
    pub depth: usize,
    pub read_type: &'a dyn Fn(usize) -> ScalarType,
    pub local_type: &'a dyn Fn(LocalId) -> ScalarType,
}

/// Checks handles and typing rules of an arena whose root is `root`.
pub(super) fn verify_arena(
    program: &Program,
    arena: &ExprArena,
    root: ExprId,
    scope: &Scope,
) -> Result<(), String> {
    let Scope {
        n_reads,
        n_locals,
        depth,
        ..
    } = *scope;
    if root.index() >= arena.len() {
        return Err("root expression out of range".into());
    }
    for (id, e) in arena.iter() {
        for op in e.operands() {
            if op >= id {
                return Err(format!("expression {} uses a later expression", id.0));
            }
        }
        match e {
            Expr::Iter(i) if *i >= depth => return Err(format!("iterator {i} out of range")),
            Expr::Param(p) if p.index() >= program.params.len() => {
                return Err("parameter out of range".into())
            }
            Expr::Read(r) if *r >= n_reads => return Err(format!("read {r} out of range")),
            Expr::Local(l) if l.index() >= n_locals => {
                return Err(format!("local {} out of range", l.0))
            }
            Expr::Call(f, args) => {
                let Some(func) = program.functions.get(f.index()) else {
                    return Err("function out of range".into());
                };
                if func.params != args.len() {
                    return Err(format!("`{}` called with the wrong arity", func.name));
                }
            }
            Expr::Math(m, args) if m.arity() != args.len() => {
                return Err(format!("`{}` called with the wrong arity", m.name()))
            }
            _ => {}
        }
    }
    for (id, e) in arena.iter() {
        check_types(program, arena, id, e, scope)?;
    }
    Ok(())
}

fn check_types(
    program: &Program,
    arena: &ExprArena,
    id: ExprId,
    e: &Expr,
    scope: &Scope,
) -> Result<(), String> {
    let ty = |x: ExprId| type_of(program, arena, x, scope.read_type, scope.local_type);
    let bad = |what: &str| Err(format!("expression {}: {what}", id.0));
    match e {
        Expr::Unary(UnaryOp::Not, a) if ty(*a) != ScalarType::Bool => bad("`!` of a non-bool"),
        Expr::Unary(UnaryOp::Neg, a) if ty(*a) == ScalarType::Bool => bad("negated bool"),
        Expr::Binary(op, a, b) => {
            let (ta, tb) = (ty(*a), ty(*b));
            if ta != tb {
                bad(&format!("operands of `{}` are {ta} and {tb}", op.symbol()))
            } else if op.is_logical() != (ta == ScalarType::Bool) {
                bad(&format!("`{}` on {ta}", op.symbol()))
            } else if *op == BinaryOp::Rem && ta != ScalarType::I32 {
                bad("`%` on a non-integer")
            } else {
                Ok(())
            }
        }
        Expr::Select {
            cond,
            then,
            otherwise,
        } => {
            if ty(*cond) != ScalarType::Bool {
                bad("select condition is not bool")
            } else if ty(*then) != ty(*otherwise) {
                bad("select branches differ in type")
            } else {
                Ok(())
            }
        }
        Expr::Math(m, args) => {
            let t0 = ty(args[0]);
            let int_ok = *m == MathFn::Abs && t0 == ScalarType::I32;
            if !(t0.is_float() || int_ok) || args.iter().any(|a| ty(*a) != t0) {
                bad(&format!("`{}` on {t0}", m.name()))
            } else {
                Ok(())
            }
        }
        Expr::Cast(to, a) if (*to == ScalarType::Bool) != (ty(*a) == ScalarType::Bool) => {
            bad("cast between bool and a number")
        }
        Expr::Call(f, args) => {
            let func = program.function(*f);
            for (k, a) in args.iter().enumerate() {
                if ty(*a) != func.locals[k].ty {
                    return bad(&format!(
                        "argument {k} of `{}` has the wrong type",
                        func.name
                    ));
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
