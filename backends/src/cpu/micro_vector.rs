//! The full tiles of a register tile ([`super::micro`]) in vector form: the `rows × cols`
//! accumulators are local variables of a GCC/Clang vector type of the CPU model's width
//! (`cols / lanes` vectors per row), loaded from the written array before the loops between
//! the rows and the columns and stored back after them; inside, every statement of every row
//! updates its row's vectors with operands that are vector loads of contiguous columns (a
//! read whose innermost stored dimension is the column iterator with coefficient 1) or
//! scalars (reads that do not use the column iterator, and every subexpression of them alone:
//! `alpha * A[i][k]`), which C's vector extensions broadcast where they meet a vector. This is
//! the outer product the compiler needs to see: per step of the loops between, `cols / lanes`
//! vector loads, one broadcast per row and `rows · cols / lanes` multiply-adds on registers.
//!
//! Exactness: each lane computes the scalar statement's operations on the same operands in
//! the same order (`+ - * /` and negation, correctly rounded per lane; the scalar
//! subexpressions are the scalar code), so the results are bit-identical to the scalar tile.
//! Anything else in a body that uses the column iterator (a function call, a conversion, a
//! select, a strided or transposed read) keeps the scalar tile.
//!
//! Loads and stores go through a vector type aligned as its element and allowed to alias it
//! (`pf_f64x8_u`), so they need no proof of alignment and break no aliasing rule.

use std::collections::BTreeSet;
use std::fmt::Write;

use polyhedral::ast::{Ast, AstExpr};
use polyhedral::program::{
    Access, ArrayId, BinaryOp, Expr, ExprId, ScalarType, StmtId, UnaryOp, Var,
};

use super::body::BodyContext;
use super::helpers::Helper;
use super::writer::{shift, Writer};
use crate::promote::{expr_vars, Linear};

/// A register tile's full tile, as [`Writer::write_vector_tile`] needs it.
pub(super) struct VectorTile<'t> {
    pub rows: i64,
    pub cols: i64,
    pub row_var: &'t str,
    pub col_var: &'t str,
    /// The C name of the variable that holds the tile's first column.
    pub first_col: String,
    /// The loops between the rows and the columns, outermost first.
    pub middle: &'t [&'t Ast],
    /// The statements of the column loop.
    pub stmts: &'t Ast,
    pub written: ArrayId,
}

/// What one read of a statement is inside the tile.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Operand {
    /// The same for every column: a scalar.
    Scalar,
    /// Contiguous columns: a vector load.
    Vector,
    /// The written element: the accumulator.
    Accumulator,
}

/// The C vector type of `lanes` elements of `ty`, its unaligned form, and the helper that
/// declares both.
fn vector_type(ty: ScalarType, lanes: i64) -> Option<(String, Helper)> {
    let helper = match (ty, lanes) {
        (ScalarType::F64, 4) => Helper::VecF64x4,
        (ScalarType::F64, 8) => Helper::VecF64x8,
        (ScalarType::F32, 8) => Helper::VecF32x8,
        (ScalarType::F32, 16) => Helper::VecF32x16,
        _ => return None,
    };
    let name = match ty {
        ScalarType::F64 => "f64",
        _ => "f32",
    };
    Some((format!("pf_{name}x{lanes}"), helper))
}

impl Writer<'_> {
    /// The statements of a column loop with their arguments.
    fn users(ast: &Ast) -> Option<Vec<(StmtId, &[AstExpr])>> {
        match ast {
            Ast::User { stmt, args } => Some(vec![(*stmt, args.as_slice())]),
            Ast::Block(items) => {
                let mut out = Vec::new();
                for i in items {
                    out.extend(Self::users(i)?);
                }
                Some(out)
            }
            _ => None,
        }
    }

    /// Whether `access` (with `args`) reads or writes whole contiguous vectors along
    /// `col_var`: the column iterator appears, with coefficient 1, only in the subscript of
    /// the dimension stored innermost (of the packed or tile-local buffer in scope, if any).
    fn contiguous(&self, access: &Access, args: &[AstExpr], col_var: &str) -> Option<bool> {
        let forms: Vec<Linear> = access
            .subscripts
            .iter()
            .map(|s| Linear::of(&AstExpr::from_affine(s, &|d| args[d].clone())))
            .collect::<Option<_>>()?;
        let innermost = self
            .local_layout(access.array)
            .and_then(|l| l.last().copied())
            .or_else(|| forms.len().checked_sub(1))?;
        let uses: Vec<usize> = (0..forms.len())
            .filter(|&d| forms[d].vars.contains_key(col_var))
            .collect();
        Some(uses == [innermost] && forms[innermost].vars[col_var] == 1)
    }

    /// How each read of `stmt` enters the tile; `None` when one cannot.
    fn operands(
        &self,
        stmt: StmtId,
        args: &[AstExpr],
        tile: &VectorTile,
        ty: ScalarType,
    ) -> Option<Vec<Operand>> {
        let s = &self.program.statements[stmt.index()];
        if s.write.array != tile.written || !self.contiguous(&s.write, args, tile.col_var)? {
            return None;
        }
        s.reads
            .iter()
            .map(|r| {
                let uses_col = r.subscripts.iter().any(|sub| {
                    sub.terms().iter().any(|&(v, _)| match v {
                        Var::Iter(d) => {
                            let mut vars = BTreeSet::new();
                            expr_vars(&args[d], &mut vars);
                            vars.contains(tile.col_var)
                        }
                        Var::Param(_) => false,
                    })
                });
                if r.array == tile.written {
                    // Every access of the written array has the write's subscripts
                    // (checked with the tile).
                    Some(Operand::Accumulator)
                } else if !uses_col {
                    Some(Operand::Scalar)
                } else if self.program.array(r.array).elem == ty
                    && self.contiguous(r, args, tile.col_var)?
                {
                    Some(Operand::Vector)
                } else {
                    None
                }
            })
            .collect()
    }

    /// Whether expression `id` of `stmt` is a vector (uses a vector operand), when the tile
    /// can compute it: a vector is a vector or accumulator read, or `+ - * /` or negation of
    /// values of the tile's type with at least one vector operand.
    fn vector_shape(
        &self,
        stmt: StmtId,
        id: ExprId,
        operands: &[Operand],
        ty: ScalarType,
    ) -> Option<bool> {
        let s = &self.program.statements[stmt.index()];
        let own = self.program.expr_type(s, id);
        match &s.exprs[id] {
            Expr::Read(r) => Some(operands[*r] != Operand::Scalar),
            Expr::Binary(op, a, b) => {
                let (va, vb) = (
                    self.vector_shape(stmt, *a, operands, ty)?,
                    self.vector_shape(stmt, *b, operands, ty)?,
                );
                if !(va || vb) {
                    return Some(false);
                }
                let types_match = own == ty
                    && self.program.expr_type(s, *a) == ty
                    && self.program.expr_type(s, *b) == ty;
                let arithmetic = matches!(
                    op,
                    BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div
                );
                (types_match && arithmetic).then_some(true)
            }
            Expr::Unary(UnaryOp::Neg, a) => {
                let v = self.vector_shape(stmt, *a, operands, ty)?;
                (!v || own == ty).then_some(v)
            }
            e => {
                // Anything else is a scalar when none of its operands is a vector.
                let mut scalar = true;
                for o in e.operands() {
                    scalar &= !self.vector_shape(stmt, o, operands, ty)?;
                }
                scalar.then_some(false)
            }
        }
    }

    /// The C text of expression `id` of `stmt`, a vector where [`Writer::vector_shape`] says
    /// so; `reads` are the C texts of the reads (vectors for vector operands).
    fn vector_expr(
        &mut self,
        stmt: StmtId,
        id: ExprId,
        operands: &[Operand],
        ty: ScalarType,
        ctx: &BodyContext,
    ) -> String {
        let program = self.program;
        let s = &program.statements[stmt.index()];
        if self.vector_shape(stmt, id, operands, ty) != Some(true) {
            let types: Vec<ScalarType> = (0..s.exprs.len())
                .map(|i| program.expr_type(s, ExprId(i as u32)))
                .collect();
            return self.body_expr(&s.exprs, &types, ctx, id);
        }
        match &s.exprs[id] {
            Expr::Read(r) => match ctx {
                BodyContext::Statement { reads, .. } => reads[*r].clone(),
                BodyContext::Function { .. } => String::new(),
            },
            Expr::Binary(op, a, b) => {
                let a = self.vector_expr(stmt, *a, operands, ty, ctx);
                let b = self.vector_expr(stmt, *b, operands, ty, ctx);
                format!("({a} {} {b})", op.symbol())
            }
            Expr::Unary(_, a) => format!("(-{})", self.vector_expr(stmt, *a, operands, ty, ctx)),
            // `vector_shape` allows nothing else to be a vector.
            _ => String::new(),
        }
    }

    /// Writes the full tile in vector form, when the CPU model has vectors for the written
    /// array's element type and every statement fits (see the module docs); `false` (and
    /// nothing written) otherwise.
    pub(super) fn write_vector_tile(
        &mut self,
        out: &mut String,
        tile: &VectorTile,
        indent: usize,
    ) -> bool {
        let ty = self.program.array(tile.written).elem;
        let Some(size) = [ScalarType::F32, ScalarType::F64]
            .contains(&ty)
            .then(|| ty.size_in_bytes() as i64)
        else {
            return false;
        };
        let lanes = i64::from(self.options.cpu.vector_bytes) / size;
        let Some((vec_ty, helper)) = vector_type(ty, lanes) else {
            return false;
        };
        if tile.cols % lanes != 0 {
            return false;
        }
        let vectors = tile.cols / lanes;
        let Some(users) = Self::users(tile.stmts) else {
            return false;
        };
        let mut plans = Vec::new();
        for (stmt, args) in &users {
            // An iterator's value in the body is a scalar: it must not be the columns'.
            let s = &self.program.statements[stmt.index()];
            let column_value = (0..s.exprs.len()).any(|i| match &s.exprs[ExprId(i as u32)] {
                Expr::Iter(d) => {
                    let mut vars = BTreeSet::new();
                    expr_vars(&args[*d], &mut vars);
                    vars.contains(tile.col_var)
                }
                _ => false,
            });
            if column_value {
                return false;
            }
            let Some(operands) = self.operands(*stmt, args, tile, ty) else {
                return false;
            };
            let body = self.program.statements[stmt.index()].body;
            if self.vector_shape(*stmt, body, &operands, ty).is_none() {
                return false;
            }
            plans.push(operands);
        }
        self.use_helper(helper);
        let at = |args: &[AstExpr], r: i64, v: i64| -> Vec<AstExpr> {
            args.iter()
                .map(|a| shift(&shift(a, tile.row_var, r), tile.col_var, v * lanes))
                .collect()
        };
        let pad = "    ".repeat(indent);
        let col = self.loop_var(tile.col_var);
        let _ = writeln!(out, "{pad}{{");
        let _ = writeln!(out, "{pad}    const int64_t {col} = {};", tile.first_col);
        // Every statement writes the same element (checked with the tile): the accumulators
        // of the first statement's write serve all.
        let (first, first_args) = users[0];
        let write = &self.program.statements[first.index()].write;
        let acc = |r: i64, v: i64| format!("pf_acc_{r}_{v}");
        let mut elements = Vec::new();
        for r in 0..tile.rows {
            for v in 0..vectors {
                let e = self.element(write, &at(first_args, r, v));
                let _ = writeln!(
                    out,
                    "{pad}    {vec_ty} {} = *(const {vec_ty}_u *)&{e};",
                    acc(r, v)
                );
                elements.push((acc(r, v), e));
            }
        }
        let mut depth = 1;
        for m in tile.middle {
            let Ast::For {
                var,
                lower,
                upper,
                step,
                ..
            } = m
            else {
                continue;
            };
            let inner = "    ".repeat(indent + depth);
            let (v, lo, hi) = (
                self.loop_var(var),
                self.ast_expr(lower),
                self.ast_expr(upper),
            );
            let _ = writeln!(
                out,
                "{inner}for (int64_t {v} = {lo}; {v} <= {hi}; {v} += {step}) {{"
            );
            depth += 1;
        }
        let inner = "    ".repeat(indent + depth);
        for ((stmt, args), operands) in users.iter().zip(&plans) {
            let s = &self.program.statements[stmt.index()];
            for r in 0..tile.rows {
                for v in 0..vectors {
                    let args = at(args, r, v);
                    let reads: Vec<String> = s
                        .reads
                        .iter()
                        .zip(operands)
                        .map(|(access, o)| match o {
                            Operand::Accumulator => acc(r, v),
                            Operand::Vector => {
                                let e = self.element(access, &args);
                                format!("(*(const {vec_ty}_u *)&{e})")
                            }
                            Operand::Scalar => {
                                let e = self.element(access, &args);
                                if self.program.array(access.array).elem == ScalarType::F16 {
                                    self.use_helper(Helper::H2F);
                                    format!("pf_h2f({e})")
                                } else {
                                    e
                                }
                            }
                        })
                        .collect();
                    let ctx = BodyContext::Statement { args: &args, reads };
                    let value = self.vector_expr(*stmt, s.body, operands, ty, &ctx);
                    if self.vector_shape(*stmt, s.body, operands, ty) == Some(true) {
                        let _ = writeln!(out, "{inner}{} = {value};", acc(r, v));
                    } else {
                        // A value the same for every column: broadcast to all lanes.
                        let splat = vec!["pf_s"; lanes as usize].join(", ");
                        let scalar = super::body::value_type(ty);
                        let _ = writeln!(
                            out,
                            "{inner}{{ const {scalar} pf_s = {value}; {} = ({vec_ty}){{{splat}}}; }}",
                            acc(r, v)
                        );
                    }
                }
            }
        }
        for d in (1..depth).rev() {
            let _ = writeln!(out, "{}}}", "    ".repeat(indent + d));
        }
        for (a, e) in elements {
            let _ = writeln!(out, "{pad}    *({vec_ty}_u *)&{e} = {a};");
        }
        let _ = writeln!(out, "{pad}}}");
        true
    }
}
