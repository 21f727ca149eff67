//! The element-wise statements after the contraction, as Vector instructions on the tile in UB.
//!
//! Each statement's body is lowered bottom-up into operations on `tm × tn` f32 tiles (the
//! accumulator's copy from L0C, the arrays earlier statements wrote, and temporaries), on
//! per-column vectors (broadcast down the rows) and on scalars (registers filled once per
//! block, or constants). A temporary is used exactly once (the body is a tree), so an
//! operation writes over its first temporary operand instead of taking a new tile; the
//! statement's result becomes its array's tile. Every operation rounds to f32 as the
//! interpreter does after each operation: `a - s` is `a + (-s)` and `s - a` is `(-a) + s`,
//! both exact rewrites; division by a scalar divides by a tile filled with it.

use std::collections::BTreeMap;

use polyhedral::program::{
    ArrayId, BinaryOp, Expr, ExprId, MathFn, ScalarType, Statement, UnaryOp,
};
use polyhedral::Program;

use super::plan::{Holding, Plan};
use super::Error;

/// A scalar operand of a vector instruction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Scalar {
    Const(f64),
    /// Register `f{n}`.
    Reg(u8),
}

impl Scalar {
    pub(crate) fn text(self) -> String {
        match self {
            Scalar::Const(v) => format_float(v),
            Scalar::Reg(r) => format!("f{r}"),
        }
    }
}

/// An f32 constant as the assembler reads it back exactly.
pub(crate) fn format_float(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else {
        format!("{:?}", v as f32 as f64)
    }
}

/// A vector operand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Operand {
    /// A tile (index into the UB tiles).
    Tile(usize),
    /// A per-column vector (index into [`Epilogue::columns`]).
    Column(usize),
}

/// One Vector (or scalar-unit) operation of the epilogue.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Op {
    /// `vOP dst, a, b` (a and b tiles, or one of them a column vector broadcast down rows).
    Binary {
        op: &'static str,
        dst: usize,
        a: Operand,
        b: Operand,
    },
    /// `vOPs dst, src, scalar` (`vadds`, `vmuls`, `vmaxs`).
    WithScalar {
        op: &'static str,
        dst: usize,
        src: usize,
        scalar: Scalar,
    },
    /// `vdup dst, scalar`.
    Dup { dst: usize, scalar: Scalar },
    /// `vOP dst, src`.
    Unary {
        op: &'static str,
        dst: usize,
        src: usize,
    },
}

/// A scalar-unit operation run once per block: `OP f{dst}, a, b`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ScalarOp {
    pub op: &'static str,
    pub dst: u8,
    pub a: Scalar,
    pub b: Scalar,
}

/// The lowered epilogue.
#[derive(Clone, Debug, Default)]
pub(crate) struct Epilogue {
    /// Tiles per buffer (tile 0 receives the accumulator from L0C).
    pub tiles: usize,
    pub ops: Vec<Op>,
    /// Scalar inputs and the register each is loaded into.
    pub scalars: Vec<(ArrayId, u8)>,
    pub scalar_ops: Vec<ScalarOp>,
    /// Column-vector inputs, in [`Operand::Column`] order.
    pub columns: Vec<ArrayId>,
    /// Live-out tile arrays and the tile holding each at the end.
    pub outputs: Vec<(ArrayId, usize)>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Val {
    /// A tile that belongs to an array (read-only here).
    Array(usize),
    /// A temporary tile this value owns.
    Temp(usize),
    Column(usize),
    Scalar(Scalar),
}

struct Lowering<'a> {
    program: &'a Program,
    ep: Epilogue,
    array_tile: BTreeMap<ArrayId, usize>,
    free: Vec<usize>,
    next_reg: u8,
}

/// Lowers the plan's element-wise statements.
pub(crate) fn lower(program: &Program, plan: &Plan) -> Result<Epilogue, Error> {
    let mut l = Lowering {
        program,
        ep: Epilogue {
            tiles: 1,
            ..Default::default()
        },
        array_tile: BTreeMap::new(),
        free: Vec::new(),
        next_reg: 0,
    };
    l.array_tile.insert(plan.acc, 0);
    for a in plan.arrays(Holding::Scalar) {
        let r = l.reg()?;
        l.ep.scalars.push((a, r));
    }
    l.ep.columns = plan.arrays(Holding::Column);
    for &id in &plan.epilogue {
        let s = &program.statements[id.index()];
        let v = l.expr(s, s.body)?;
        let tile = match v {
            Val::Temp(t) => t,
            Val::Array(t) => {
                // A copy: a fresh tile, the source times one (exact).
                let d = l.tile();
                l.ep.ops.push(Op::WithScalar {
                    op: "vmuls",
                    dst: d,
                    src: t,
                    scalar: Scalar::Const(1.0),
                });
                d
            }
            Val::Column(_) | Val::Scalar(_) => {
                return Err(Error::NotYet(format!(
                    "statement {} does not depend on the contraction's result",
                    s.name
                )))
            }
        };
        if let Some(old) = l.array_tile.insert(s.write.array, tile) {
            l.free.push(old);
        }
    }
    for (&a, &t) in &l.array_tile {
        if program.array(a).role.is_live_out() {
            l.ep.outputs.push((a, t));
        }
    }
    Ok(l.ep)
}

impl Lowering<'_> {
    fn reg(&mut self) -> Result<u8, Error> {
        if self.next_reg >= 32 {
            return Err(Error::NotYet(
                "more than 32 scalar values in the epilogue".into(),
            ));
        }
        self.next_reg += 1;
        Ok(self.next_reg - 1)
    }

    fn tile(&mut self) -> usize {
        self.free.pop().unwrap_or_else(|| {
            self.ep.tiles += 1;
            self.ep.tiles - 1
        })
    }

    /// A tile to write a result into, given the operands: the first owned temporary.
    fn result_tile(&mut self, operands: &[Val]) -> usize {
        let own = operands.iter().find_map(|v| match v {
            Val::Temp(t) => Some(*t),
            _ => None,
        });
        for v in operands {
            if let Val::Temp(t) = v {
                if Some(*t) != own {
                    self.free.push(*t);
                }
            }
        }
        own.unwrap_or_else(|| self.tile())
    }

    fn expr(&mut self, s: &Statement, e: ExprId) -> Result<Val, Error> {
        let ty = self.program.expr_type(s, e);
        if !matches!(ty, ScalarType::F32 | ScalarType::F64) {
            return Err(Error::NotYet(format!(
                "{ty} values in the element-wise statement {}",
                s.name
            )));
        }
        Ok(match &s.exprs[e] {
            Expr::Literal(l) => Val::Scalar(Scalar::Const(l.value as f32 as f64)),
            Expr::Read(r) => {
                let a = s.reads[*r].array;
                if let Some(&t) = self.array_tile.get(&a) {
                    Val::Array(t)
                } else if let Some(c) = self.ep.columns.iter().position(|&x| x == a) {
                    Val::Column(c)
                } else if let Some(&(_, r)) = self.ep.scalars.iter().find(|(x, _)| *x == a) {
                    Val::Scalar(Scalar::Reg(r))
                } else {
                    return Err(Error::NotYet(format!(
                        "statement {} reads `{}` before it is written",
                        s.name,
                        self.program.array(a).name
                    )));
                }
            }
            Expr::Cast(_, x) => {
                let from = self.program.expr_type(s, *x);
                if !matches!(from, ScalarType::F32 | ScalarType::F64) {
                    return Err(Error::NotYet(format!(
                        "a conversion from {from} in statement {}",
                        s.name
                    )));
                }
                self.expr(s, *x)?
            }
            Expr::Unary(UnaryOp::Neg, x) => {
                let v = self.expr(s, *x)?;
                self.with_scalar(s, "vmuls", v, Scalar::Const(-1.0))?
            }
            Expr::Binary(op, x, y) => {
                let (a, b) = (self.expr(s, *x)?, self.expr(s, *y)?);
                self.binary(s, *op, a, b)?
            }
            Expr::Math(f, args) if args.len() == 1 => {
                let v = self.expr(s, args[0])?;
                let op = match f {
                    MathFn::Exp => "vexp",
                    MathFn::Log => "vln",
                    MathFn::Sqrt => "vsqrt",
                    MathFn::Rsqrt => "vrsqrt",
                    MathFn::Abs => "vabs",
                    _ => {
                        return Err(Error::NotYet(format!(
                            "`{}` in statement {} (the Vector unit has exp, ln, sqrt, rsqrt and abs)",
                            f.name(),
                            s.name
                        )))
                    }
                };
                match v {
                    Val::Array(t) | Val::Temp(t) => {
                        let d = self.result_tile(&[v]);
                        self.ep.ops.push(Op::Unary { op, dst: d, src: t });
                        Val::Temp(d)
                    }
                    _ => return Err(not_tile(s)),
                }
            }
            _ => {
                return Err(Error::NotYet(format!(
                    "the expression `{}` of statement {} (selects, comparisons and calls are not lowered)",
                    self.program.display_body(s),
                    s.name
                )))
            }
        })
    }

    fn with_scalar(
        &mut self,
        s: &Statement,
        op: &'static str,
        v: Val,
        c: Scalar,
    ) -> Result<Val, Error> {
        match v {
            Val::Array(t) | Val::Temp(t) => {
                let d = self.result_tile(&[v]);
                self.ep.ops.push(Op::WithScalar {
                    op,
                    dst: d,
                    src: t,
                    scalar: c,
                });
                Ok(Val::Temp(d))
            }
            Val::Scalar(x) => Ok(Val::Scalar(self.scalar_op(scalar_name(op), x, c)?)),
            Val::Column(_) => Err(not_tile(s)),
        }
    }

    fn scalar_op(&mut self, op: &'static str, a: Scalar, b: Scalar) -> Result<Scalar, Error> {
        if let (Scalar::Const(x), Scalar::Const(y)) = (a, b) {
            let (x, y) = (x as f32, y as f32);
            let v = match op {
                "add" => x + y,
                "sub" => x - y,
                "mul" => x * y,
                "div" => x / y,
                "min" => x.min(y),
                _ => x.max(y),
            };
            return Ok(Scalar::Const(v as f64));
        }
        let dst = self.reg()?;
        self.ep.scalar_ops.push(ScalarOp { op, dst, a, b });
        Ok(Scalar::Reg(dst))
    }

    fn binary(&mut self, s: &Statement, op: BinaryOp, a: Val, b: Val) -> Result<Val, Error> {
        let name = match op {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
            _ => {
                return Err(Error::NotYet(format!(
                    "the operator `{}` in statement {}",
                    op.symbol(),
                    s.name
                )))
            }
        };
        let vop = match op {
            BinaryOp::Add => "vadd",
            BinaryOp::Sub => "vsub",
            BinaryOp::Mul => "vmul",
            BinaryOp::Div => "vdiv",
            BinaryOp::Max => "vmax",
            _ => "vmin",
        };
        let tile_of = |v: Val| match v {
            Val::Array(t) | Val::Temp(t) => Some(t),
            _ => None,
        };
        match (a, b) {
            (Val::Scalar(x), Val::Scalar(y)) => Ok(Val::Scalar(self.scalar_op(name, x, y)?)),
            (Val::Column(_), Val::Column(_))
            | (Val::Column(_), Val::Scalar(_))
            | (Val::Scalar(_), Val::Column(_)) => Err(Error::NotYet(format!(
                "arithmetic between per-column vectors and scalars in statement {} (it would be hoisted out of the tile loop)",
                s.name
            ))),
            (t, Val::Scalar(c)) | (Val::Scalar(c), t)
                if tile_of(t).is_some() && matches!(op, BinaryOp::Add | BinaryOp::Mul | BinaryOp::Max) =>
            {
                let vop = match op {
                    BinaryOp::Add => "vadds",
                    BinaryOp::Mul => "vmuls",
                    _ => "vmaxs",
                };
                self.with_scalar(s, vop, t, c)
            }
            (t, Val::Scalar(c)) if tile_of(t).is_some() && op == BinaryOp::Sub => {
                let neg = self.scalar_op("mul", c, Scalar::Const(-1.0))?;
                self.with_scalar(s, "vadds", t, neg)
            }
            (Val::Scalar(c), t) if tile_of(t).is_some() && op == BinaryOp::Sub => {
                let negated = self.with_scalar(s, "vmuls", t, Scalar::Const(-1.0))?;
                self.with_scalar(s, "vadds", negated, c)
            }
            (x, y) => {
                // Division and min by a scalar (and any scalar on the left of them): a tile
                // filled with the scalar.
                let fill = |l: &mut Self, v: Val| -> Val {
                    match v {
                        Val::Scalar(c) => {
                            let d = l.tile();
                            l.ep.ops.push(Op::Dup { dst: d, scalar: c });
                            Val::Temp(d)
                        }
                        other => other,
                    }
                };
                let (x, y) = (fill(self, x), fill(self, y));
                let operand = |v: Val| match v {
                    Val::Array(t) | Val::Temp(t) => Ok(Operand::Tile(t)),
                    Val::Column(c) => Ok(Operand::Column(c)),
                    Val::Scalar(_) => Err(not_tile(s)),
                };
                let (oa, ob) = (operand(x)?, operand(y)?);
                let d = self.result_tile(&[x, y]);
                self.ep.ops.push(Op::Binary { op: vop, dst: d, a: oa, b: ob });
                Ok(Val::Temp(d))
            }
        }
    }
}

fn scalar_name(vop: &'static str) -> &'static str {
    match vop {
        "vadds" => "add",
        "vmuls" => "mul",
        _ => "max",
    }
}

fn not_tile(s: &Statement) -> Error {
    Error::NotYet(format!(
        "a function of per-column vectors alone in statement {}",
        s.name
    ))
}
