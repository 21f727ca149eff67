//! C expressions for statement bodies and scalar functions.
//!
//! Every expression is written in its C type (`f16` → `float` holding an `f16` value, `f32` →
//! `float`, `f64` → `double`, `i32` → `int32_t`, `bool` → `bool`) and rounded exactly where the
//! interpreter rounds, so the C computes bit for bit what the interpreter computes:
//! - `f32` and `f64` `+ - * /`, `sqrt`, `abs`, `floor`, `ceil`, `min`, `max` are correctly
//!   rounded in C already (the runner builds with `-ffp-contract=off`, so nothing is fused);
//! - the other math functions of `f32` and `f16` values are computed in `double` and rounded
//!   once to the type, as the interpreter does;
//! - every `f16` operation is rounded back to `f16` with `pf_f16r` (see [`super::helpers`]);
//! - `i32` arithmetic goes through the wrapping helpers.

use polyhedral::ast::AstExpr;
use polyhedral::interp::round;
use polyhedral::program::{
    BinaryOp, Expr, ExprArena, ExprId, Literal, MathFn, ScalarType, UnaryOp,
};

use super::helpers::Helper;
use super::writer::Writer;

/// What the expressions of one arena refer to.
pub(crate) enum BodyContext<'a> {
    /// A statement instance: its iterators' values and the C text of each read.
    Statement {
        args: &'a [AstExpr],
        reads: Vec<String>,
    },
    /// A scalar function: the C names of its locals.
    Function { locals: &'a [String] },
}

/// The C type that holds values of `ty` in expressions.
pub(crate) fn value_type(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::F16 | ScalarType::F32 => "float",
        ScalarType::F64 => "double",
        ScalarType::I32 => "int32_t",
        ScalarType::Bool => "bool",
    }
}

/// A C literal of type `ty` with the value the interpreter gives the literal.
pub(crate) fn literal(l: Literal) -> String {
    let v = round(l.ty, l.value);
    match l.ty {
        ScalarType::Bool => (if v != 0.0 { "true" } else { "false" }).to_string(),
        ScalarType::I32 if v == i32::MIN as f64 => "INT32_MIN".to_string(),
        ScalarType::I32 => format!("{}", v as i32),
        ScalarType::F64 => float_literal(v, ""),
        ScalarType::F32 | ScalarType::F16 => float_literal(v as f32 as f64, "f"),
    }
}

fn float_literal(v: f64, suffix: &str) -> String {
    let ty = if suffix.is_empty() { "double" } else { "float" };
    if v.is_nan() {
        format!("(({ty})NAN)")
    } else if v.is_infinite() {
        let sign = if v < 0.0 { "-" } else { "" };
        format!("({sign}({ty})INFINITY)")
    } else {
        // Debug prints the shortest text that reads back as the same value, in the type the
        // value was rounded to; C's correctly rounded literal parsing reads it back exactly.
        let text = if suffix.is_empty() {
            format!("{v:?}")
        } else {
            format!("{:?}", v as f32)
        };
        let text = if text.contains(['.', 'e', 'E']) {
            text
        } else {
            format!("{text}.0")
        };
        if v < 0.0 {
            format!("({text}{suffix})")
        } else {
            format!("{text}{suffix}")
        }
    }
}

impl Writer<'_> {
    /// The C text of expression `id` of `arena`, whose expression types are `types`.
    pub(crate) fn body_expr(
        &mut self,
        arena: &ExprArena,
        types: &[ScalarType],
        ctx: &BodyContext,
        id: ExprId,
    ) -> String {
        let ty = types[id.index()];
        let sub = |w: &mut Self, x: ExprId| w.body_expr(arena, types, ctx, x);
        match &arena[id] {
            Expr::Literal(l) => literal(*l),
            Expr::Iter(d) => match ctx {
                BodyContext::Statement { args, .. } => {
                    format!("(int32_t)({})", self.ast_expr(&args[*d]))
                }
                // Verified functions have no iterators; an empty context gives a C error.
                BodyContext::Function { .. } => "/* iterator outside a statement */".into(),
            },
            Expr::Param(p) => format!("(int32_t){}", self.param_name(*p)),
            Expr::Read(r) => match ctx {
                BodyContext::Statement { reads, .. } => reads[*r].clone(),
                BodyContext::Function { .. } => "/* read outside a statement */".into(),
            },
            Expr::Local(l) => match ctx {
                BodyContext::Function { locals } => locals[l.index()].clone(),
                BodyContext::Statement { .. } => "/* local outside a function */".into(),
            },
            Expr::Unary(UnaryOp::Not, a) => format!("(!{})", sub(self, *a)),
            Expr::Unary(UnaryOp::Neg, a) => {
                let a = sub(self, *a);
                if ty == ScalarType::I32 {
                    self.call(Helper::NegI32, "pf_neg_i32", &[a])
                } else {
                    format!("(-{a})")
                }
            }
            Expr::Binary(op, a, b) => {
                let operand = types[a.index()];
                let (a, b) = (sub(self, *a), sub(self, *b));
                self.binary(*op, operand, a, b)
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                let (c, t, o) = (sub(self, *cond), sub(self, *then), sub(self, *otherwise));
                format!("({c} ? {t} : {o})")
            }
            Expr::Math(m, args) => {
                let args: Vec<String> = args.iter().map(|a| sub(self, *a)).collect();
                self.math(*m, ty, &args)
            }
            Expr::Cast(to, a) => {
                let from = types[a.index()];
                let a = sub(self, *a);
                self.cast(*to, from, a)
            }
            Expr::Call(f, args) => {
                let args: Vec<String> = args.iter().map(|a| sub(self, *a)).collect();
                format!("{}({})", self.function_name(*f), args.join(", "))
            }
        }
    }

    fn call(&mut self, helper: Helper, name: &str, args: &[String]) -> String {
        self.use_helper(helper);
        format!("{name}({})", args.join(", "))
    }

    fn binary(&mut self, op: BinaryOp, ty: ScalarType, a: String, b: String) -> String {
        use BinaryOp::*;
        if op.is_comparison() || op.is_logical() {
            return format!("({a} {} {b})", op.symbol());
        }
        match ty {
            ScalarType::I32 => {
                let (helper, name) = match op {
                    Add => (Helper::AddI32, "pf_add_i32"),
                    Sub => (Helper::SubI32, "pf_sub_i32"),
                    Mul => (Helper::MulI32, "pf_mul_i32"),
                    Div => (Helper::DivI32, "pf_div_i32"),
                    Rem => (Helper::RemI32, "pf_rem_i32"),
                    Min => (Helper::MinI32, "pf_min_i32"),
                    _ => (Helper::MaxI32, "pf_max_i32"),
                };
                self.call(helper, name, &[a, b])
            }
            ScalarType::F64 => match op {
                Min => format!("fmin({a}, {b})"),
                Max => format!("fmax({a}, {b})"),
                Rem => format!("fmod({a}, {b})"),
                _ => format!("({a} {} {b})", op.symbol()),
            },
            ScalarType::F32 => match op {
                Min => format!("fminf({a}, {b})"),
                Max => format!("fmaxf({a}, {b})"),
                Rem => format!("fmodf({a}, {b})"),
                _ => format!("({a} {} {b})", op.symbol()),
            },
            // f16: min and max pick an operand, so they need no rounding.
            _ => match op {
                Min => format!("fminf({a}, {b})"),
                Max => format!("fmaxf({a}, {b})"),
                Rem => self.call(Helper::F16R, "pf_f16r", &[format!("fmodf({a}, {b})")]),
                _ => self.call(
                    Helper::F16R,
                    "pf_f16r",
                    &[format!("{a} {} {b}", op.symbol())],
                ),
            },
        }
    }

    fn math(&mut self, m: MathFn, ty: ScalarType, args: &[String]) -> String {
        let x = &args[0];
        if ty == ScalarType::I32 {
            // Verified programs apply only `abs` to integers.
            return self.call(Helper::AbsI32, "pf_abs_i32", std::slice::from_ref(x));
        }
        // Functions that are exact, or correctly rounded, in the value's own C type.
        let exact = |name: &str| match ty {
            ScalarType::F64 => format!("{name}({x})"),
            _ => format!("{name}f({x})"),
        };
        // Everything else: computed in double, as the interpreter does, then rounded once.
        let in_double = match m {
            MathFn::Rsqrt => format!("1.0 / sqrt((double){x})"),
            MathFn::Pow => format!("pow((double){x}, (double){})", args[1]),
            _ => format!("{}((double){x})", m.name()),
        };
        match (m, ty) {
            (MathFn::Abs, _) => exact("fabs"),
            (MathFn::Floor, _) => exact("floor"),
            (MathFn::Ceil, _) => exact("ceil"),
            (MathFn::Sqrt, ScalarType::F16) => {
                self.call(Helper::F16R, "pf_f16r", &[format!("sqrtf({x})")])
            }
            (MathFn::Sqrt, _) => exact("sqrt"),
            (_, ScalarType::F64) => format!("({in_double})"),
            (_, ScalarType::F32) => self.call(Helper::F32, "pf_f32", &[in_double]),
            _ => self.call(Helper::F16R, "pf_f16r", &[in_double]),
        }
    }

    fn cast(&mut self, to: ScalarType, from: ScalarType, a: String) -> String {
        use ScalarType::*;
        match (to, from) {
            _ if to == from => a,
            (F32, F16) => a,
            (F64, _) => format!("(double){a}"),
            (F32, F64) => self.call(Helper::F32, "pf_f32", &[a]),
            (F32, _) => format!("(float){a}"),
            (F16, _) => self.call(Helper::F16R, "pf_f16r", &[format!("(double){a}")]),
            (I32, _) => self.call(Helper::F2I, "pf_f2i", &[format!("(double){a}")]),
            // Verified programs cast between bool and numbers nowhere.
            (Bool, _) => format!("({a} != 0)"),
        }
    }
}
