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
//! A scalar subexpression that computes something (`alpha * A[i][k]`, not a lone read) would
//! be computed again for every block of columns; where one loop lies between the rows and the
//! columns, it is computed once per row and step of that loop into a buffer before the column
//! blocks, and the tile reads the buffer ([`Hoisted`]).
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
    Access, ArrayId, BinaryOp, Division, Expr, ExprId, ScalarType, StmtId, UnaryOp, Var,
};

use super::body::BodyContext;
use super::helpers::Helper;
use super::writer::{shift, Writer};
use crate::loops::{expr_vars, Linear};

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

/// The most iterations of the loop between rows and columns whose column-invariant
/// subexpressions are computed ahead ([`Hoisted`]): their buffers live on the stack.
const MAX_HOISTED: i64 = 1024;

/// How a full tile is written in vector form ([`Writer::vector_plan`]).
pub(super) struct VectorPlan<'t> {
    /// The written array's element type, and the lanes of a vector of it.
    ty: ScalarType,
    lanes: i64,
    vec_ty: String,
    helper: Helper,
    /// The statements of the column loop with their arguments.
    users: Vec<(StmtId, &'t [AstExpr])>,
    /// Per statement, how each of its reads enters the tile.
    operands: Vec<Vec<Operand>>,
}

/// Column-invariant subexpressions computed ahead: a subexpression such as `alpha * A[i][k]`
/// is the same for every column, so rather than once per block of columns it is computed
/// once per row and step of the loop between rows and columns, into a buffer
/// `pf_hoist[row][k - lower]`, before the column blocks. The buffer holds what the tile
/// would have computed, by the same scalar code (so the results stay bit-identical), and
/// nothing the tile writes feeds it: the tile writes one array, whose reads are its
/// accumulators, never a scalar operand.
pub(super) struct Hoisted {
    /// Per subexpression: its statement, the expression and the buffer's C name.
    exprs: Vec<(StmtId, ExprId, String)>,
    /// The C names of the loop's variable and of its first value.
    var: String,
    base: String,
}

impl Hoisted {
    /// The buffer element that holds expression `id` of `stmt` in row `row`, if hoisted.
    fn element(&self, stmt: StmtId, id: ExprId, row: i64) -> Option<String> {
        let (_, _, name) = self.exprs.iter().find(|e| e.0 == stmt && e.1 == id)?;
        Some(format!("{name}[{row}][{} - {}]", self.var, self.base))
    }
}

/// A constant bound on the trip count of a loop from `lower` to `upper` (step one): an
/// argument of the upper bound's `min` at a constant distance from one of the lower bound's
/// `max`.
fn max_trip_count(lower: &AstExpr, upper: &AstExpr) -> Option<i64> {
    let args = |e: &AstExpr, max: bool| -> Vec<Linear> {
        let list = match (e, max) {
            (AstExpr::Max(v), true) | (AstExpr::Min(v), false) => v.clone(),
            _ => vec![e.clone()],
        };
        list.iter().filter_map(Linear::of).collect()
    };
    let (lows, highs) = (args(lower, true), args(upper, false));
    lows.iter()
        .flat_map(|l| highs.iter().map(move |h| (l, h)))
        .filter(|(l, h)| l.vars == h.vars && l.params == h.params)
        .map(|(l, h)| h.constant - l.constant + 1)
        .min()
}

/// Whether the value of iterator `d`, `args[d]`, uses loop variable `var`.
fn arg_uses(args: &[AstExpr], d: usize, var: &str) -> bool {
    let mut vars = BTreeSet::new();
    expr_vars(&args[d], &mut vars);
    vars.contains(var)
}

/// Whether some subscript of `access` uses loop variable `var` through the iterators' values
/// `args` (a division variable is taken to use every variable).
fn access_uses(access: &Access, args: &[AstExpr], var: &str) -> bool {
    access.subscripts.iter().any(|sub| {
        sub.terms().iter().any(|&(v, _)| match v {
            Var::Iter(d) => arg_uses(args, d, var),
            Var::Param(_) => false,
            Var::Div(_) => true,
        })
    })
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
        // Quasi-affine subscripts are no vectors.
        if access.subscripts.iter().any(|s| s.has_divisions()) {
            return None;
        }
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
                let uses_col = access_uses(r, args, tile.col_var);
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

    /// The C text of expression `id` of `stmt` in row `row` of the tile, a vector where
    /// [`Writer::vector_shape`] says so; `reads` are the C texts of the reads (vectors for
    /// vector operands), and a subexpression of `hoisted` is read from its buffer.
    #[allow(clippy::too_many_arguments)]
    fn vector_expr(
        &mut self,
        stmt: StmtId,
        id: ExprId,
        operands: &[Operand],
        ty: ScalarType,
        ctx: &BodyContext,
        row: i64,
        hoisted: Option<&Hoisted>,
    ) -> String {
        let program = self.program;
        let s = &program.statements[stmt.index()];
        if self.vector_shape(stmt, id, operands, ty) != Some(true) {
            return match hoisted.and_then(|h| h.element(stmt, id, row)) {
                Some(element) => element,
                None => self.scalar_expr(stmt, id, ctx),
            };
        }
        let sub = |w: &mut Self, x: ExprId| w.vector_expr(stmt, x, operands, ty, ctx, row, hoisted);
        match &s.exprs[id] {
            Expr::Read(r) => match ctx {
                BodyContext::Statement { reads, .. } => reads[*r].clone(),
                BodyContext::Function { .. } => String::new(),
            },
            Expr::Binary(op, a, b) => {
                let a = sub(self, *a);
                let b = sub(self, *b);
                format!("({a} {} {b})", op.symbol())
            }
            Expr::Unary(_, a) => format!("(-{})", sub(self, *a)),
            // `vector_shape` allows nothing else to be a vector.
            _ => String::new(),
        }
    }

    /// How the full tile is written in vector form, when the CPU model has vectors for the
    /// written array's element type and every statement fits (see the module docs).
    pub(super) fn vector_plan<'t>(&self, tile: &VectorTile<'t>) -> Option<VectorPlan<'t>> {
        let ty = self.program.array(tile.written).elem;
        let size = [ScalarType::F32, ScalarType::F64]
            .contains(&ty)
            .then(|| ty.size_in_bytes() as i64)?;
        let lanes = i64::from(self.options.cpu.vector_bytes) / size;
        let (vec_ty, helper) = vector_type(ty, lanes)?;
        if tile.cols % lanes != 0 {
            return None;
        }
        let users = Self::users(tile.stmts)?;
        let mut operands = Vec::new();
        for (stmt, args) in &users {
            // An iterator's value in the body is a scalar: it must not be the columns'.
            let s = &self.program.statements[stmt.index()];
            let column_value = s.exprs.iter().any(|(_, e)| match e {
                Expr::Iter(d) => arg_uses(args, *d, tile.col_var),
                _ => false,
            });
            if column_value {
                return None;
            }
            let ops = self.operands(*stmt, args, tile, ty)?;
            let body = self.program.statements[stmt.index()].body;
            self.vector_shape(*stmt, body, &ops, ty)?;
            operands.push(ops);
        }
        Some(VectorPlan {
            ty,
            lanes,
            vec_ty,
            helper,
            users,
            operands,
        })
    }

    /// Whether expression `id` of `stmt` depends on loop variable `var` through the
    /// statement's `args`: a read whose subscripts use it, or the value of an iterator that
    /// does.
    fn uses_var(&self, stmt: StmtId, id: ExprId, args: &[AstExpr], var: &str) -> bool {
        let s = &self.program.statements[stmt.index()];
        match &s.exprs[id] {
            Expr::Iter(d) => arg_uses(args, *d, var),
            Expr::Read(r) => access_uses(&s.reads[*r], args, var),
            e => e
                .operands()
                .into_iter()
                .any(|o| self.uses_var(stmt, o, args, var)),
        }
    }

    /// The column-invariant subexpressions of the tile's statements worth computing once
    /// per row and step of the loop between rows and columns, before the column blocks
    /// (see [`Hoisted`]): the largest subexpressions that are scalars in the tile, compute
    /// something (not a lone read or constant) and change with that loop. Written into
    /// buffers here, with the loop that fills them; `None` (nothing written) when the tile has
    /// not exactly one loop between rows and columns, that loop does not step by one, its
    /// trip count has no constant bound of at most [`MAX_HOISTED`], or nothing qualifies.
    pub(super) fn write_hoisted(
        &mut self,
        out: &mut String,
        tile: &VectorTile,
        plan: &VectorPlan,
        indent: usize,
    ) -> Option<Hoisted> {
        let [Ast::For {
            var,
            lower,
            upper,
            step: 1,
            ..
        }] = tile.middle
        else {
            return None;
        };
        let extent = max_trip_count(lower, upper).filter(|&e| e <= MAX_HOISTED)?;
        // Per subexpression: the index of its statement in the plan, and the expression.
        let mut found: Vec<(usize, ExprId)> = Vec::new();
        for (u, ((stmt, args), operands)) in plan.users.iter().zip(&plan.operands).enumerate() {
            let body = self.program.statements[stmt.index()].body;
            let mut ids = Vec::new();
            self.hoistable(*stmt, body, args, operands, plan.ty, var, &mut ids);
            found.extend(ids.into_iter().map(|id| (u, id)));
        }
        if found.is_empty() {
            return None;
        }
        let pad = "    ".repeat(indent);
        let k = self.loop_var(var);
        let (lo, hi) = (self.ast_expr(lower), self.ast_expr(upper));
        // Names of the `pf_` kind, which no kernel's own name takes (as the accumulators').
        let base = "pf_hoist_lo".to_string();
        let _ = writeln!(out, "{pad}const int64_t {base} = {lo};");
        let mut exprs = Vec::new();
        for &(u, id) in &found {
            let stmt = plan.users[u].0;
            let ty = self
                .program
                .expr_type(&self.program.statements[stmt.index()], id);
            let name = format!("pf_hoist_{}", exprs.len());
            let _ = writeln!(
                out,
                "{pad}{} {name}[{}][{extent}];",
                super::body::value_type(ty),
                tile.rows
            );
            exprs.push((stmt, id, name));
        }
        let _ = writeln!(
            out,
            "{pad}for (int64_t {k} = {base}; {k} <= {hi}; {k} += 1) {{"
        );
        for (&(u, id), (_, _, name)) in found.iter().zip(&exprs) {
            let (stmt, args) = plan.users[u];
            for r in 0..tile.rows {
                let args: Vec<AstExpr> = args.iter().map(|a| shift(a, tile.row_var, r)).collect();
                let reads = self.scalar_reads(stmt, &args, &plan.operands[u]);
                let ctx = BodyContext::Statement { args: &args, reads };
                let value = self.scalar_expr(stmt, id, &ctx);
                let _ = writeln!(out, "{pad}    {name}[{r}][{k} - {base}] = {value};");
            }
        }
        let _ = writeln!(out, "{pad}}}");
        Some(Hoisted {
            exprs,
            var: k,
            base,
        })
    }

    /// Collects into `found` the hoistable subexpressions of expression `id` (see
    /// [`Writer::write_hoisted`]).
    #[allow(clippy::too_many_arguments)]
    fn hoistable(
        &self,
        stmt: StmtId,
        id: ExprId,
        args: &[AstExpr],
        operands: &[Operand],
        ty: ScalarType,
        var: &str,
        found: &mut Vec<ExprId>,
    ) {
        let s = &self.program.statements[stmt.index()];
        if self.vector_shape(stmt, id, operands, ty) == Some(true) {
            for o in s.exprs[id].operands() {
                self.hoistable(stmt, o, args, operands, ty, var, found);
            }
            return;
        }
        let computes = matches!(s.exprs[id], Expr::Binary(..) | Expr::Unary(..));
        if computes && self.uses_var(stmt, id, args, var) {
            found.push(id);
        }
    }

    /// The C texts of a statement's reads for scalar code: the scalar operands' elements;
    /// the tile's vector operands and accumulators, which scalar subexpressions do not read,
    /// are left empty.
    fn scalar_reads(
        &mut self,
        stmt: StmtId,
        args: &[AstExpr],
        operands: &[Operand],
    ) -> Vec<String> {
        let s = &self.program.statements[stmt.index()];
        s.reads
            .iter()
            .zip(operands)
            .map(|(access, o)| match o {
                Operand::Scalar => self.scalar_read(&s.divs, access, args),
                Operand::Vector | Operand::Accumulator => String::new(),
            })
            .collect()
    }

    /// The C text of a scalar operand's element (converted from `f16`).
    fn scalar_read(&mut self, divs: &[Division], access: &Access, args: &[AstExpr]) -> String {
        let e = self.element(divs, access, args);
        if self.program.array(access.array).elem == ScalarType::F16 {
            self.use_helper(Helper::H2F);
            format!("pf_h2f({e})")
        } else {
            e
        }
    }

    /// The scalar C text of expression `id` of `stmt`.
    fn scalar_expr(&mut self, stmt: StmtId, id: ExprId, ctx: &BodyContext) -> String {
        let program = self.program;
        let s = &program.statements[stmt.index()];
        let types: Vec<ScalarType> = (0..s.exprs.len())
            .map(|i| program.expr_type(s, ExprId(i as u32)))
            .collect();
        self.body_expr(&s.exprs, &types, ctx, id)
    }

    /// Writes the full tile in vector form by `plan`, the column-invariant subexpressions
    /// of `hoisted` read from their buffers.
    pub(super) fn write_vector_tile(
        &mut self,
        out: &mut String,
        tile: &VectorTile,
        plan: &VectorPlan,
        hoisted: Option<&Hoisted>,
        indent: usize,
    ) {
        let VectorPlan {
            ty,
            lanes,
            vec_ty,
            helper,
            users,
            operands: plans,
        } = plan;
        let (ty, lanes, helper) = (*ty, *lanes, *helper);
        let vectors = tile.cols / lanes;
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
        let first_stmt = &self.program.statements[first.index()];
        let write = &first_stmt.write;
        let acc = |r: i64, v: i64| format!("pf_acc_{r}_{v}");
        let mut elements = Vec::new();
        for r in 0..tile.rows {
            for v in 0..vectors {
                let e = self.element(&first_stmt.divs, write, &at(first_args, r, v));
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
        for ((stmt, args), operands) in users.iter().zip(plans.iter()) {
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
                                let e = self.element(&s.divs, access, &args);
                                format!("(*(const {vec_ty}_u *)&{e})")
                            }
                            Operand::Scalar => self.scalar_read(&s.divs, access, &args),
                        })
                        .collect();
                    let ctx = BodyContext::Statement { args: &args, reads };
                    let value = self.vector_expr(*stmt, s.body, operands, ty, &ctx, r, hoisted);
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
    }
}

#[cfg(test)]
mod tests {
    use super::max_trip_count;
    use polyhedral::ast::AstExpr;

    fn tile_start() -> AstExpr {
        AstExpr::Mul(128, Box::new(AstExpr::var("c2")))
    }

    #[test]
    fn a_tile_loop_has_the_tile_size_as_its_bound() {
        // From 128·c2 to min(N - 1, 128·c2 + 127).
        let upper = AstExpr::Min(vec![
            AstExpr::plus(AstExpr::var("n"), AstExpr::Int(-1)),
            AstExpr::plus(tile_start(), AstExpr::Int(127)),
        ]);
        assert_eq!(max_trip_count(&tile_start(), &upper), Some(128));
        // A lower bound that is a max: any of its arguments bounds the loop from below.
        let lower = AstExpr::Max(vec![AstExpr::var("i"), tile_start()]);
        assert_eq!(max_trip_count(&lower, &upper), Some(128));
    }

    #[test]
    fn a_loop_over_a_size_has_no_constant_bound() {
        let upper = AstExpr::plus(AstExpr::var("n"), AstExpr::Int(-1));
        assert_eq!(max_trip_count(&AstExpr::Int(0), &upper), None);
        // The same variables with other coefficients are not a constant distance apart.
        let twice = AstExpr::plus(
            AstExpr::Mul(256, Box::new(AstExpr::var("c2"))),
            AstExpr::Int(7),
        );
        assert_eq!(max_trip_count(&tile_start(), &twice), None);
    }
}
