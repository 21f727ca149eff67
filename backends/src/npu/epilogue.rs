//! The element-wise statements around the last contraction, as Vector instructions on tiles in
//! UB: the epilogue after it, and the prologue that gives a live-in accumulator its start.
//!
//! Each statement's body is lowered bottom-up into operations on `tm × tn` f32 tiles (the
//! accumulator's copy from L0C — or from GM, for the prologue — the arrays earlier statements
//! wrote, and temporaries), on per-column vectors (broadcast down the rows), on per-row
//! vectors (held expanded to a whole tile, each row's value in the 16 lanes of its row in every
//! chunk, so that a tile meets its values lane by lane) and on scalars (registers filled once per block, or
//! constants). Arithmetic on per-row vectors and scalars alone is hoisted: it runs once per
//! block on the expanded vectors. A temporary is used exactly once (the body is a tree), so an
//! operation writes over its first temporary operand instead of taking a new tile; the
//! statement's result becomes its array's tile. Every operation rounds to f32 as the
//! interpreter does after each operation: `a - s` is `a + (-s)` and `s - a` is `(-a) + s`,
//! both exact rewrites; division by a scalar divides by a tile filled with it.

use std::collections::BTreeMap;

use polyhedral::program::{
    ArrayId, BinaryOp, Expr, ExprId, MathFn, ScalarType, Statement, StmtId, UnaryOp,
};
use polyhedral::Program;

use super::plan::{Holding, Init, Plan};
use super::Error;

/// A scalar operand of a vector instruction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Scalar {
    Const(f64),
    /// Register `f{n}`.
    Reg(u8),
}

impl Scalar {
    /// `a OP b` (`add`, `sub`, `mul`, `div`, `min`, `max`) rounded to f32, when both are
    /// constants.
    pub(crate) fn fold(op: &str, a: Scalar, b: Scalar) -> Option<Scalar> {
        let (Scalar::Const(x), Scalar::Const(y)) = (a, b) else {
            return None;
        };
        let (x, y) = (x as f32, y as f32);
        let v = match op {
            "add" => x + y,
            "sub" => x - y,
            "mul" => x * y,
            "div" => x / y,
            "min" => x.min(y),
            _ => x.max(y),
        };
        Some(Scalar::Const(v as f64))
    }

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
    /// An expanded per-row vector: the inputs of [`Epilogue::rows`], then hoisted
    /// temporaries.
    Row(usize),
}

/// One Vector (or scalar-unit) operation of the epilogue.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Op {
    /// `vOP dst, a, b`: tiles, or a tile and a column or row vector broadcast over it (dst a
    /// tile); or row vectors (dst a row vector).
    Binary {
        op: &'static str,
        dst: Operand,
        a: Operand,
        b: Operand,
    },
    /// `vOPs dst, src, scalar` (`vadds`, `vmuls`, `vmaxs`); dst and src both tiles or both
    /// row vectors.
    WithScalar {
        op: &'static str,
        dst: Operand,
        src: Operand,
        scalar: Scalar,
    },
    /// `vdup dst, scalar`.
    Dup { dst: Operand, scalar: Scalar },
    /// `vOP dst, src`, both tiles or both row vectors.
    Unary {
        op: &'static str,
        dst: Operand,
        src: Operand,
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

/// Operations on one set of tiles.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tiles {
    /// Tiles per buffer (tile 0 receives the accumulator).
    pub count: usize,
    pub ops: Vec<Op>,
}

/// The lowered prologue and epilogue.
#[derive(Clone, Debug, Default)]
pub(crate) struct Epilogue {
    /// After the product: tile 0 receives the accumulator from L0C.
    pub after: Tiles,
    /// Before it, when the accumulator starts from GM: tile 0 receives its GM contents, and
    /// [`Epilogue::start`] holds its start at the end.
    pub before: Option<Tiles>,
    pub start: usize,
    /// Scalar inputs and the register each is loaded into.
    pub scalars: Vec<(ArrayId, u8)>,
    pub scalar_ops: Vec<ScalarOp>,
    /// Column-vector inputs, in [`Operand::Column`] order.
    pub columns: Vec<ArrayId>,
    /// Row-vector inputs, the first [`Operand::Row`] indices.
    pub rows: Vec<ArrayId>,
    /// Row vectors in all (inputs and hoisted temporaries).
    pub row_vectors: usize,
    /// Hoisted operations on row vectors, once per block.
    pub row_ops: Vec<Op>,
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
    /// An expanded row vector (read-only: inputs and hoisted results alike).
    Row(usize),
    Scalar(Scalar),
}

struct Lowering<'a> {
    program: &'a Program,
    ep: Epilogue,
    /// The tile set being lowered into.
    tiles: Tiles,
    array_tile: BTreeMap<ArrayId, usize>,
    free: Vec<usize>,
    next_reg: u8,
}

/// Lowers the plan's prologue and epilogue statements.
pub(crate) fn lower(program: &Program, plan: &Plan) -> Result<Epilogue, Error> {
    let mut l = Lowering {
        program,
        ep: Epilogue::default(),
        tiles: Tiles::default(),
        array_tile: BTreeMap::new(),
        free: Vec::new(),
        next_reg: 0,
    };
    for a in plan.arrays(Holding::Scalar) {
        let r = l.reg()?;
        l.ep.scalars.push((a, r));
    }
    l.ep.columns = plan.arrays(Holding::Column);
    l.ep.rows = plan.arrays(Holding::Row);
    l.ep.row_vectors = l.ep.rows.len();
    if let Init::Gm(prologue) = &plan.last().init {
        let start = l.statements(plan.acc, prologue)?;
        l.ep.start = start[&plan.acc];
        l.ep.before = Some(std::mem::take(&mut l.tiles));
    }
    let after = l.statements(plan.acc, &plan.epilogue)?;
    l.ep.after = std::mem::take(&mut l.tiles);
    for (&a, &t) in &after {
        if program.array(a).role.is_live_out() || plan.gm.contains(&a) {
            l.ep.outputs.push((a, t));
        }
    }
    Ok(l.ep)
}

impl Lowering<'_> {
    /// Lowers `stmts` into a fresh tile set whose tile 0 holds `acc`; returns the tile of
    /// every array at the end.
    fn statements(
        &mut self,
        acc: ArrayId,
        stmts: &[StmtId],
    ) -> Result<BTreeMap<ArrayId, usize>, Error> {
        self.tiles = Tiles {
            count: 1,
            ops: Vec::new(),
        };
        self.free.clear();
        self.array_tile.clear();
        self.array_tile.insert(acc, 0);
        for &id in stmts {
            let s = &self.program.statements[id.index()];
            let v = self.expr(s, s.body)?;
            let tile = match v {
                Val::Temp(t) => t,
                Val::Array(t) => {
                    // A copy: a fresh tile, the source times one (exact).
                    let d = self.tile();
                    self.tiles.ops.push(Op::WithScalar {
                        op: "vmuls",
                        dst: Operand::Tile(d),
                        src: Operand::Tile(t),
                        scalar: Scalar::Const(1.0),
                    });
                    d
                }
                Val::Column(_) | Val::Row(_) | Val::Scalar(_) => {
                    return Err(Error::NotYet(format!(
                        "statement {} does not depend on the contraction's result",
                        s.name
                    )))
                }
            };
            if let Some(old) = self.array_tile.insert(s.write.array, tile) {
                self.free.push(old);
            }
        }
        Ok(std::mem::take(&mut self.array_tile))
    }

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
            self.tiles.count += 1;
            self.tiles.count - 1
        })
    }

    /// A new hoisted row vector.
    fn row(&mut self) -> usize {
        self.ep.row_vectors += 1;
        self.ep.row_vectors - 1
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
                } else if let Some(r) = self.ep.rows.iter().position(|&x| x == a) {
                    Val::Row(r)
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
                        self.tiles.ops.push(Op::Unary {
                            op,
                            dst: Operand::Tile(d),
                            src: Operand::Tile(t),
                        });
                        Val::Temp(d)
                    }
                    Val::Row(r) => {
                        let d = self.row();
                        self.ep.row_ops.push(Op::Unary {
                            op,
                            dst: Operand::Row(d),
                            src: Operand::Row(r),
                        });
                        Val::Row(d)
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
                self.tiles.ops.push(Op::WithScalar {
                    op,
                    dst: Operand::Tile(d),
                    src: Operand::Tile(t),
                    scalar: c,
                });
                Ok(Val::Temp(d))
            }
            Val::Row(r) => {
                let d = self.row();
                self.ep.row_ops.push(Op::WithScalar {
                    op,
                    dst: Operand::Row(d),
                    src: Operand::Row(r),
                    scalar: c,
                });
                Ok(Val::Row(d))
            }
            Val::Scalar(x) => Ok(Val::Scalar(self.scalar_op(scalar_name(op), x, c)?)),
            Val::Column(_) => Err(not_tile(s)),
        }
    }

    fn scalar_op(&mut self, op: &'static str, a: Scalar, b: Scalar) -> Result<Scalar, Error> {
        if let Some(folded) = Scalar::fold(op, a, b) {
            return Ok(folded);
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
            Val::Array(t) | Val::Temp(t) | Val::Row(t) => Some(t),
            _ => None,
        };
        let rows_only = |v: Val| matches!(v, Val::Row(_) | Val::Scalar(_));
        match (a, b) {
            (Val::Scalar(x), Val::Scalar(y)) => Ok(Val::Scalar(self.scalar_op(name, x, y)?)),
            (Val::Column(_), Val::Column(_) | Val::Scalar(_) | Val::Row(_))
            | (Val::Scalar(_) | Val::Row(_), Val::Column(_)) => Err(Error::NotYet(format!(
                "arithmetic between per-column vectors and scalars or other vectors in statement {} (it would be hoisted out of the tile loop)",
                s.name
            ))),
            (x, y)
                if rows_only(x)
                    && rows_only(y)
                    && (matches!((x, y), (Val::Row(_), Val::Row(_)))
                        || !matches!(op, BinaryOp::Add | BinaryOp::Mul | BinaryOp::Max | BinaryOp::Sub)) =>
            {
                // Two row vectors; or division and min with a scalar, a row vector filled with
                // it (the other operations with a scalar are `vOPs` below).
                let fill = |l: &mut Self, v: Val| -> usize {
                    match v {
                        Val::Row(r) => r,
                        Val::Scalar(c) => {
                            let d = l.row();
                            l.ep.row_ops.push(Op::Dup { dst: Operand::Row(d), scalar: c });
                            d
                        }
                        // rows_only holds.
                        _ => 0,
                    }
                };
                let (x, y) = (fill(self, x), fill(self, y));
                let d = self.row();
                self.ep.row_ops.push(Op::Binary {
                    op: vop,
                    dst: Operand::Row(d),
                    a: Operand::Row(x),
                    b: Operand::Row(y),
                });
                Ok(Val::Row(d))
            }
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
                            l.tiles.ops.push(Op::Dup {
                                dst: Operand::Tile(d),
                                scalar: c,
                            });
                            Val::Temp(d)
                        }
                        other => other,
                    }
                };
                let (x, y) = (fill(self, x), fill(self, y));
                let operand = |v: Val| match v {
                    Val::Array(t) | Val::Temp(t) => Ok(Operand::Tile(t)),
                    Val::Column(c) => Ok(Operand::Column(c)),
                    Val::Row(r) => Ok(Operand::Row(r)),
                    Val::Scalar(_) => Err(not_tile(s)),
                };
                let (oa, ob) = (operand(x)?, operand(y)?);
                let d = self.result_tile(&[x, y]);
                self.tiles.ops.push(Op::Binary {
                    op: vop,
                    dst: Operand::Tile(d),
                    a: oa,
                    b: ob,
                });
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
