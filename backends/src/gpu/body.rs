//! WGSL expressions for statement bodies and scalar functions.
//!
//! Values live in their WGSL type (`f16` and `f32` → `f32`, `i32` → `i32`, `bool` → `bool`) and
//! are rounded where the interpreter rounds: `f32` arithmetic is `f32` already; every `f16`
//! operation goes through `pf_f16r`, which rounds an `f32` to the nearest `f16` value, ties to
//! even, exactly. `i32` arithmetic wraps in WGSL as in the interpreter. Math functions are
//! WGSL's, whose precision is the device's: the comparison's tolerance covers a few ulps.

use polyhedral::interp::round;
use polyhedral::program::{
    BinaryOp, Expr, ExprArena, ExprId, Function, Literal, MathFn, Program, ScalarType, UnaryOp,
};

/// The WGSL type of values (and of stored elements) of `ty`.
pub(crate) fn value_type(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::F16 | ScalarType::F32 | ScalarType::F64 => "f32",
        ScalarType::I32 => "i32",
        ScalarType::Bool => "bool",
    }
}

/// A WGSL literal with the value the interpreter gives `l`.
pub(crate) fn literal(l: Literal) -> String {
    let v = round(l.ty, l.value);
    match l.ty {
        ScalarType::Bool => (if v != 0.0 { "true" } else { "false" }).to_string(),
        ScalarType::I32 if v == i32::MIN as f64 => "bitcast<i32>(0x80000000u)".to_string(),
        ScalarType::I32 if v < 0.0 => format!("({}i)", v as i32),
        ScalarType::I32 => format!("{}i", v as i32),
        _ => float_literal(v as f32),
    }
}

pub(crate) fn float_literal(v: f32) -> String {
    if v.is_nan() {
        "bitcast<f32>(0x7fc00000u)".to_string()
    } else if v.is_infinite() {
        if v < 0.0 {
            "bitcast<f32>(0xff800000u)".to_string()
        } else {
            "bitcast<f32>(0x7f800000u)".to_string()
        }
    } else {
        let text = format!("{v:?}");
        let text = if text.contains(['.', 'e', 'E']) {
            text
        } else {
            format!("{text}.0")
        };
        if v.is_sign_negative() {
            format!("({text}f)")
        } else {
            format!("{text}f")
        }
    }
}

/// What an expression's leaves refer to.
pub(crate) enum Leaves<'a> {
    /// A statement instance: the WGSL text of each iterator and of each read.
    Statement {
        iters: &'a [String],
        reads: &'a [String],
    },
}

pub(crate) struct BodyWriter<'a> {
    pub program: &'a Program,
    pub param: &'a dyn Fn(usize) -> String,
    /// Whether `while` loops are followed by a check that they ran to their ends.
    pub guard: bool,
}

impl BodyWriter<'_> {
    /// The WGSL text of expression `id` of `arena`, whose expression types are `types`.
    pub(crate) fn expr(
        &self,
        arena: &ExprArena,
        types: &[ScalarType],
        leaves: &Leaves,
        id: ExprId,
    ) -> String {
        let ty = types[id.index()];
        let sub = |x: ExprId| self.expr(arena, types, leaves, x);
        match &arena[id] {
            Expr::Literal(l) => literal(*l),
            Expr::Iter(d) => {
                let Leaves::Statement { iters, .. } = leaves;
                iters[*d].clone()
            }
            Expr::Param(p) => (self.param)(p.index()),
            Expr::Read(r) => {
                let Leaves::Statement { reads, .. } = leaves;
                reads[*r].clone()
            }
            Expr::Local(l) => format!("l{}", l.index()),
            Expr::Unary(UnaryOp::Not, a) => format!("(!{})", sub(*a)),
            Expr::Unary(UnaryOp::Neg, a) => format!("(-{})", sub(*a)),
            Expr::Binary(op, a, b) => {
                let operand = types[a.index()];
                binary(*op, operand, sub(*a), sub(*b))
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => format!(
                "select({}, {}, {})",
                sub(*otherwise),
                sub(*then),
                sub(*cond)
            ),
            Expr::Math(m, args) => {
                let args: Vec<String> = args.iter().map(|a| sub(*a)).collect();
                math(*m, ty, &args)
            }
            Expr::Cast(to, a) => cast(*to, types[a.index()], sub(*a)),
            Expr::Call(f, args) => {
                let args: Vec<String> = args.iter().map(|a| sub(*a)).collect();
                format!(
                    "{}({})",
                    function_name(self.program.function(*f)),
                    args.join(", ")
                )
            }
        }
    }
}

pub(crate) fn function_name(f: &Function) -> String {
    format!("f_{}", f.name)
}

pub(super) fn binary(op: BinaryOp, ty: ScalarType, a: String, b: String) -> String {
    use BinaryOp::*;
    if op.is_comparison() || op.is_logical() {
        return format!("({a} {} {b})", op.symbol());
    }
    match (ty, op) {
        (_, Min) => format!("min({a}, {b})"),
        (_, Max) => format!("max({a}, {b})"),
        // The correctly rounded f32 quotient rounds to the correctly rounded f16 one (24 bits
        // are at least 2·11 + 2), and `pf_div` gives IEEE's result for a zero divisor.
        (ScalarType::F16, Div) => format!("pf_f16r(pf_div({a}, {b}))"),
        (ScalarType::F16, _) => format!("pf_f16r({a} {} {b})", op.symbol()),
        (ScalarType::F32 | ScalarType::F64, Mul) => format!("(({a} * {b}) + pf.zero)"),
        (ScalarType::F32 | ScalarType::F64, Div) => format!("pf_div({a}, {b})"),
        (ScalarType::I32, Div) => format!("pf_idiv({a}, {b})"),
        (ScalarType::I32, Rem) => format!("pf_irem({a}, {b})"),
        _ => format!("({a} {} {b})", op.symbol()),
    }
}

pub(super) fn math(m: MathFn, ty: ScalarType, args: &[String]) -> String {
    let x = &args[0];
    let text = match m {
        MathFn::Rsqrt => format!("inverseSqrt({x})"),
        MathFn::Pow => format!("pow({x}, {})", args[1]),
        _ => format!("{}({x})", m.name()),
    };
    let exact = matches!(m, MathFn::Abs | MathFn::Floor | MathFn::Ceil);
    if ty == ScalarType::F16 && !exact {
        format!("pf_f16r({text})")
    } else {
        text
    }
}

pub(super) fn cast(to: ScalarType, from: ScalarType, a: String) -> String {
    use ScalarType::*;
    match (to, from) {
        _ if to == from => a,
        (F32 | F64, F16 | F32 | F64) => a,
        (F16 | F32 | F64, Bool) => format!("select(0.0f, 1.0f, {a})"),
        (F16, _) => format!("pf_f16r(f32({a}))"),
        (F32 | F64, _) => format!("f32({a})"),
        (I32, Bool) => format!("select(0i, 1i, {a})"),
        (I32, _) => format!("pf_f2i({a})"),
        (Bool, I32) => format!("({a} != 0i)"),
        (Bool, _) => format!("({a} != 0.0f)"),
    }
}

/// Helper functions every module may call (WGSL has no `static inline`; unused functions
/// cost nothing).
pub(crate) const HELPERS: &str = "\
fn pf_floord(a: i32, b: i32) -> i32 {
    let q = a / b;
    if (a % b != 0i && a < 0i) {
        return q - 1i;
    }
    return q;
}

fn pf_ceild(a: i32, b: i32) -> i32 {
    let q = a / b;
    if (a % b != 0i && a > 0i) {
        return q + 1i;
    }
    return q;
}

// A kernel's integer `/` and `%`: WGSL refuses a shader that divides by a constant zero, which
// a kernel may well do (the interpreter stops where such a division runs); a divisor passed to
// a function is no constant.
fn pf_idiv(a: i32, b: i32) -> i32 {
    return a / b;
}

fn pf_irem(a: i32, b: i32) -> i32 {
    return a % b;
}

fn pf_mod(a: i32, b: i32) -> i32 {
    let r = a % b;
    if (r < 0i) {
        return r + b;
    }
    return r;
}

// Truncates toward zero and saturates, NaN giving 0, as the interpreter converts. NaN is
// recognised from its bits: drivers may fold `x != x` to false.
fn pf_f2i(x: f32) -> i32 {
    if ((bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u) {
        return 0i;
    }
    if (x >= 2147483648.0f) {
        return 2147483647i;
    }
    if (x <= -2147483648.0f) {
        return bitcast<i32>(0x80000000u);
    }
    return i32(x);
}

// a / b correctly rounded. WGSL allows 2.5 ulp of error in `/`, and a fused multiply-add may
// be computed unfused, so the residual a - q·b of the quotient is computed exactly with
// Dekker's product (Veltkamp's splitting; `pf.zero` keeps the products from being contracted),
// and one correction step gives the nearest value. A zero divisor gives IEEE's result, built
// from bits (±inf, NaN for 0/0 and NaN/0): WGSL lets a shader compiler assume no infinity,
// and one that sees the zero folds the quotient to anything.
fn pf_div(a: f32, b: f32) -> f32 {
    let ab = bitcast<u32>(a);
    let bb = bitcast<u32>(b);
    if ((bb & 0x7fffffffu) == 0u) {
        if ((ab & 0x7fffffffu) == 0u || (ab & 0x7fffffffu) > 0x7f800000u) {
            return bitcast<f32>(0x7fc00000u);
        }
        return bitcast<f32>(0x7f800000u | ((ab ^ bb) & 0x80000000u));
    }
    let q = a / b;
    if (!(abs(q) < 1.0e30f) || abs(q) < 1.0e-30f || !(abs(b) < 1.0e30f) || abs(b) < 1.0e-30f
        || !(abs(a) < 1.0e30f) || abs(a) < 1.0e-30f) {
        return q;
    }
    let cq = 4097.0f * q + pf.zero;
    let qh = cq - (cq - q);
    let ql = q - qh;
    let cb = 4097.0f * b + pf.zero;
    let bh = cb - (cb - b);
    let bl = b - bh;
    let p = q * b + pf.zero;
    let e = ((qh * bh + pf.zero - p) + qh * bl + pf.zero + ql * bh + pf.zero) + ql * bl + pf.zero;
    let r = (a - p) - e;
    return q + r / b;
}

// The f16 value nearest to x (ties to even), as an f32: scaling by a power of two is exact and
// round() rounds ties to even, so this is the correctly rounded result.
fn pf_f16r(x: f32) -> f32 {
    let a = abs(x);
    if (a != a) {
        return x;
    }
    var r: f32;
    if (a >= 65520.0f) {
        r = bitcast<f32>(0x7f800000u);
    } else if (a < 6.103515625e-5f) {
        r = round(a * 16777216.0f) / 16777216.0f;
    } else {
        let e = i32((bitcast<u32>(a) >> 23u) & 0xffu) - 127i;
        let ulp = bitcast<f32>(u32(e - 10i + 127i) << 23u);
        r = round(a / ulp) * ulp;
    }
    return select(r, -r, x < 0.0f);
}
";
