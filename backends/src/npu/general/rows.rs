//! Rows of vector loops as the repeats of one instruction: a parallel loop over rows around
//! one vectorizable loop over columns runs each column chunk of every row at once, one repeat
//! per row.
//!
//! A row loop around several items runs as one row loop per item. The inner loop's columns
//! must be the same in every row and start on a 32-byte block, its
//! accesses' columns must not move with the row, and what its statements compute once per row
//! on the scalar unit (the values the columns share) must be the same in every row. Then each
//! operand steps by a constant per repeat: a box walked by the row, its bytes between rows (a
//! multiple of a block, the rows padded to blocks); a box the rows share, 0; a temporary, one
//! repeat (temporaries hold the rows one after the other). The row count is an immediate:
//! where the loop's trip count is not the same in every instance, the instances with its
//! largest count run this way and the others row by row.

use polyhedral::ast::{Ast, AstExpr};
use polyhedral::program::ExprId;
use sim::isa::{Addr, CmpOp, Instr, Reg, SOp, Scalar, Stmt, MAX_REPEAT};

use super::emit::{Emitter, Int};
use super::vector::{users, uses, Lowered, Op, FULL_MASK};
use crate::loops::Linear;
use crate::npu::{Error, BLOCK_BYTES, VECTOR_BYTES};

/// Most blocks between the starts of consecutive repeats.
const MAX_REPEAT_STRIDE: i64 = 255;

/// How the operands of the instructions being written step from row to row.
#[derive(Clone, Debug)]
pub(super) struct RowSteps {
    /// The name of the register holding the row.
    row: String,
    /// Where the vector temporaries start.
    temps: i64,
}

impl RowSteps {
    /// Blocks from one repeat's start to the next for operand `a`; `None` when they are not a
    /// whole number of blocks a repeat stride can hold.
    fn stride(&self, a: &Addr) -> Option<u32> {
        let per_row = self.per_row(a);
        let blocks = if per_row != 0 {
            per_row / BLOCK_BYTES as i64
        } else if a.offset.terms.is_empty() && a.offset.constant >= self.temps {
            (VECTOR_BYTES / BLOCK_BYTES) as i64
        } else {
            0
        };
        let fits = per_row % BLOCK_BYTES as i64 == 0 && (0..=MAX_REPEAT_STRIDE).contains(&blocks);
        fits.then_some(blocks as u32)
    }

    /// Bytes operand `a` moves by from one row to the next.
    fn per_row(&self, a: &Addr) -> i64 {
        a.offset
            .terms
            .iter()
            .filter(|(n, _)| *n == self.row)
            .map(|(_, c)| *c)
            .sum()
    }

    /// Whether every operand of the vector instructions in `stmts` steps as [`Self::stride`]
    /// allows; sets their repeat strides when `set`.
    fn apply(&self, stmts: &mut [Stmt], set: bool) -> bool {
        stmts.iter_mut().all(|s| match s {
            Stmt::Instr { instr, .. } => self.apply_instr(instr, set),
            Stmt::If {
                then, otherwise, ..
            } => self.apply(then, set) && self.apply(otherwise, set),
            Stmt::For { body, .. } | Stmt::While { body, .. } => self.apply(body, set),
        })
    }

    fn apply_instr(&self, instr: &mut Instr, set: bool) -> bool {
        // The operands the repeat strides describe, in the configuration's order.
        let (operands, cfg): (Vec<&Addr>, _) = match instr {
            Instr::VBin {
                dst,
                src0,
                src1,
                cfg,
                ..
            }
            | Instr::VSel {
                dst,
                src0,
                src1,
                cfg,
                ..
            } => (vec![&*dst, &*src0, &*src1], cfg),
            Instr::VScalar { dst, src, cfg, .. }
            | Instr::VUn { dst, src, cfg, .. }
            | Instr::VConv { dst, src, cfg, .. } => (vec![&*dst, &*src], cfg),
            Instr::VDup { dst, cfg, .. } => (vec![&*dst], cfg),
            // The destination is a bit string, one repeat's bits after the other's.
            Instr::VCmp {
                src0, src1, cfg, ..
            } => (vec![&*src0, &*src1], cfg),
            // One result per repeat: the destination steps by elements, one row's
            // accumulator to the next's.
            Instr::VRed {
                ty, dst, src, cfg, ..
            } => {
                let per_row = self.per_row(dst);
                let es = ty.size() as i64;
                let (Some(from), true) = (self.stride(src), per_row > 0 && per_row % es == 0)
                else {
                    return false;
                };
                if per_row / es > MAX_REPEAT_STRIDE {
                    return false;
                }
                if set {
                    cfg.rep = vec![(per_row / es) as u32, from];
                }
                return true;
            }
            _ => return true,
        };
        let Some(strides) = operands
            .iter()
            .map(|a| self.stride(a))
            .collect::<Option<Vec<u32>>>()
        else {
            return false;
        };
        if set {
            cfg.rep = strides;
        }
        true
    }
}

/// The inner loop of a group of rows and what it runs.
struct Columns<'a> {
    var: &'a str,
    lower: &'a AstExpr,
    upper: &'a AstExpr,
    stmts: &'a [(polyhedral::program::StmtId, &'a [AstExpr])],
    ty: sim::isa::DType,
    /// Rows per instruction.
    rows: i64,
    /// The loop carries a dependence: its one statement is a reduction per row.
    carried: bool,
}

impl Emitter<'_> {
    /// Lowers the loop `row` over `lower..=upper` around `inner` as described in the module
    /// docs; `false` when it cannot be (nothing is written then).
    pub(super) fn vector_rows(
        &mut self,
        row: &str,
        lower: &AstExpr,
        upper: &AstExpr,
        inner: &Ast,
    ) -> Result<bool, Error> {
        let mut inner = inner;
        while let Ast::Block(items) = inner {
            match items.as_slice() {
                [item] => inner = item,
                [] => return Ok(false),
                items => return self.distributed_rows(row, lower, upper, items),
            }
        }
        let Ast::For {
            var,
            lower: col_lower,
            upper: col_upper,
            step: 1,
            body,
            annotations,
        } = inner
        else {
            return Ok(false);
        };
        if uses(col_lower, row) || uses(col_upper, row) {
            return Ok(false);
        }
        // A loop that carries a dependence runs as one reduction per row.
        let carried = !annotations.vectorizable;
        let Some(stmts) = users(body) else {
            return Ok(false);
        };
        let (lower, upper) = (self.settled(lower), self.settled(upper));
        let count = trip_count(&lower, &upper);
        let Some((fewest, most)) = self.interval(&count) else {
            return Ok(false);
        };
        if most < 2 || most > i64::from(MAX_REPEAT) {
            return Ok(false);
        }
        let Some(ty) = self.row_lanes(&stmts, var, row, col_lower, carried) else {
            return Ok(false);
        };
        let lanes = (VECTOR_BYTES / ty.size()) as i64;
        // Rows per instruction: the most whose temporaries fit, dividing the row count.
        let per_row: u64 = stmts
            .iter()
            .map(|(s, _)| self.repeat_bytes(*s, lanes as u64, carried))
            .sum();
        let free =
            self.target.capacity(sim::isa::Mem::Ub) as i64 - self.vector_temps_start() as i64;
        let Some(group) = (2..=most)
            .rev()
            .find(|g| most % g == 0 && g * per_row as i64 <= free)
        else {
            return Ok(false);
        };
        // The rows, in a block of their own: the loop's register bound to the first row of
        // each group, the operands' strides checked once the instructions are written.
        let rr = self.sreg()?;
        let row_range = self.loop_range(&lower, &upper);
        self.bind(row, rr, row_range);
        let steps = RowSteps {
            row: format!("s{rr}"),
            temps: self.vector_temps_start() as i64,
        };
        let mut fits = true;
        let columns = Columns {
            var,
            lower: col_lower,
            upper: col_upper,
            stmts: &stmts,
            ty,
            rows: group,
            carried,
        };
        let block = self.nested(|e| {
            let first = e.int(&lower)?;
            e.push(Instr::Mov {
                dst: Reg::S(rr),
                src: first.scalar(),
            });
            e.release(first);
            if group == most {
                return e.row_group(&columns);
            }
            let last = e.int(&AstExpr::plus(upper.clone(), AstExpr::Int(1 - group)))?;
            let held = e.sbin(SOp::Add, last, Int::Const(0))?;
            e.stepping(rr, group, held.scalar(), |e| e.row_group(&columns))?;
            e.release(held);
            Ok(())
        });
        self.unbind(row);
        let mut block = match block {
            Ok(b) => b,
            Err(Error::NotYet(_)) => {
                fits = false;
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        fits &= steps.apply(&mut block, false);
        if !fits {
            self.free_s(rr);
            return Ok(false);
        }
        steps.apply(&mut block, true);
        if fewest == most {
            block.into_iter().for_each(|s| self.push_stmt(s));
        } else {
            // Instances with fewer rows run row by row.
            let n = self.int(&count)?;
            let by_row = self.nested(|e| e.scalar_loop(row, &lower, &upper, 1, inner))?;
            self.branch_else(n.scalar(), CmpOp::Eq, Scalar::Int(most), block, by_row);
            self.release(n);
        }
        self.free_s(rr);
        Ok(true)
    }

    /// The loop `row` over each of `items` in turn (it carries no dependence, so each item
    /// may run over all the rows before the next), those that can with their rows as repeats;
    /// `false` when none can (nothing is written then).
    fn distributed_rows(
        &mut self,
        row: &str,
        lower: &AstExpr,
        upper: &AstExpr,
        items: &[Ast],
    ) -> Result<bool, Error> {
        let mut any = false;
        let block = self.nested(|e| {
            for item in items {
                if e.vector_rows(row, lower, upper, item)? {
                    any = true;
                } else {
                    e.scalar_loop(row, lower, upper, 1, item)?;
                }
            }
            Ok(())
        })?;
        if any {
            block.into_iter().for_each(|s| self.push_stmt(s));
        }
        Ok(any)
    }

    /// One group of rows from the row in the loop's register: the inner loop's column chunks,
    /// each over every row of the group.
    fn row_group(&mut self, c: &Columns) -> Result<(), Error> {
        let (var, ty, most) = (c.var, c.ty, c.rows);
        let lanes = (VECTOR_BYTES / ty.size()) as i64;
        let r = self.held(&self.settled(c.lower))?;
        let h = self.held(&self.settled(c.upper))?;
        let hi = Int::Var(Scalar::Reg(Reg::S(h)));
        let col_range = self.loop_range(c.lower, c.upper);
        self.bind(var, r, col_range);
        let mut lowered = Lowered::default();
        for (stmt, args) in c.stmts {
            if c.carried {
                self.vector_reduction(*stmt, args, var, lanes * most, &mut lowered)?;
            } else {
                self.vector_statement(*stmt, args, var, lanes * most, &mut lowered)?;
            }
        }
        let vector = self.nested(|e| {
            e.push(FULL_MASK);
            for op in &lowered.ops {
                if let Op::Masked(m) = op {
                    e.write_masked_setup(m.as_ref(), most as u32);
                }
            }
            let last = e.sbin(SOp::Sub, hi.clone(), Int::Const(lanes - 1))?;
            e.stepping(r, lanes, last.scalar(), |e| {
                e.write_ops(&lowered.ops, ty, most as u32, None);
                Ok(())
            })?;
            e.release(last);
            e.write_tail(&lowered.ops, ty, most as u32, r, &hi)
        })?;
        self.branch(Scalar::Reg(Reg::S(r)), CmpOp::Le, hi.scalar(), vector);
        for x in lowered.sregs {
            self.free_s(x);
        }
        for x in lowered.fregs {
            self.free_f(x);
        }
        self.unbind(var);
        self.free_s(h);
        self.free_s(r);
        Ok(())
    }

    /// The element type the statements of the inner loop `var` compute in when their rows can
    /// run as repeats (see the module docs), else `None`.
    fn row_lanes(
        &self,
        stmts: &[(polyhedral::program::StmtId, &[AstExpr])],
        var: &str,
        row: &str,
        col_lower: &AstExpr,
        carried: bool,
    ) -> Option<sim::isa::DType> {
        let calls = stmts
            .iter()
            .any(|(s, _)| polyhedral::vectorize::calls_function(self.program, *s));
        if (calls || carried) && stmts.len() != 1 {
            return None;
        }
        let mut ty = None;
        let mut phases = Vec::new();
        for (stmt, args) in stmts {
            let s = &self.program.statements[stmt.index()];
            let (t, root) = if carried {
                let (t, reduce) = self.reduces(*stmt, args, var, &mut phases)?;
                (t, reduce.value)
            } else {
                (self.vectorizes(*stmt, args, var, &mut phases)?, s.body)
            };
            let at = super::scalar::Instance::new(s, args);
            if ty.is_some_and(|u| u != t) || !self.row_shared(&at, root, var, row) {
                return None;
            }
            ty = Some(t);
        }
        let ty = ty?;
        // Every access starts its row on a block, at the same column in every row.
        let per_block = (BLOCK_BYTES / ty.size()) as i64;
        let first = self.with_params(Linear::of(col_lower)?);
        phases
            .iter()
            .all(|p| {
                let mut at = first.clone();
                at.constant += p.constant;
                for (v, c) in &p.vars {
                    *at.vars.entry(v.clone()).or_default() += c;
                }
                !p.vars.contains_key(row)
                    && p.params.is_empty()
                    && at.constant % per_block == 0
                    && at.vars.values().all(|c| c % per_block == 0)
            })
            .then_some(ty)
    }

    /// Whether what expression `id` computes once for all columns of `var` (on the scalar
    /// unit, broadcast) is the same in every row.
    fn row_shared(&self, at: &super::scalar::Instance, id: ExprId, var: &str, row: &str) -> bool {
        if !self.varies(at, id, var) {
            return !self.varies(at, id, row);
        }
        at.stmt.exprs[id]
            .operands()
            .iter()
            .all(|&x| self.row_shared(at, x, var, row))
    }
}

/// `upper - lower + 1`, the difference taken inside the minima and maxima of `upper` where
/// `lower` is affine, so that its interval keeps what the bounds share (`min(N - 1, 64c + 63)
/// - 64c + 1` is `min(N - 64c, 64)`).
fn trip_count(lower: &AstExpr, upper: &AstExpr) -> AstExpr {
    fn less(e: &AstExpr, lower: &Linear) -> AstExpr {
        match e {
            AstExpr::Min(items) => AstExpr::min(items.iter().map(|x| less(x, lower)).collect()),
            AstExpr::Max(items) => AstExpr::max(items.iter().map(|x| less(x, lower)).collect()),
            e => match Linear::of(e) {
                Some(l) => {
                    let d = l.minus(lower);
                    AstExpr::plus(
                        d.to_expr_without(&Default::default()),
                        AstExpr::Int(d.constant + 1),
                    )
                }
                None => AstExpr::plus(
                    AstExpr::plus(
                        e.clone(),
                        AstExpr::mul(-1, lower.to_expr_without(&Default::default())),
                    ),
                    AstExpr::Int(1 - lower.constant),
                ),
            },
        }
    }
    match Linear::of(lower) {
        Some(l) => less(upper, &l),
        None => AstExpr::plus(
            AstExpr::plus(upper.clone(), AstExpr::mul(-1, lower.clone())),
            AstExpr::Int(1),
        ),
    }
}
