//! Innermost loops on the Vector unit: the iterations of a vectorizable loop as the lanes of
//! vector instructions over the region's boxes.
//!
//! A loop is taken when the AST marks it vectorizable (innermost, no dependence carried, so
//! its statements may each run over all iterations in turn), its step is 1, its statements
//! write one element of the loop's iteration each, with the loop's variable in the last
//! subscript alone (consecutive elements of the box), and what they compute from the
//! iteration is made of reads of the same kind, arithmetic the Vector unit has, and values the
//! same in every iteration. Those invariant parts are computed once on the scalar unit and
//! broadcast; everything else is one vector instruction per operation over the loop's
//! elements, into temporaries after the region's boxes and, last, into the written box. Every
//! vector operand starts on a 32-byte block, as the unit needs: accesses whose first element
//! may not are left to the scalar unit. A loop that carries a dependence is taken when its
//! body is one reduction into an element the loop does not move (`s(i) += e(i, j)` over `j`):
//! its values are computed as above and `vcadd`, `vcmax` or `vcmin` fold them into the element
//! repeat after repeat, lane after lane, in the loop's order and rounding.
//!
//! The loop runs over one integer register: on the scalar unit until the accesses reach a
//! 32-byte block (not at all where the first iteration always starts on one), then on the
//! Vector unit, whole repeats and last the partial one under a mask that counts its lanes.
//! Where the trip count is the same in every instance of the loop, each operation is one
//! instruction over as many repeats as the trip count has (as far as the temporaries fit);
//! otherwise a loop steps one repeat at a time. A loop whose body holds conditions is first
//! split into one loop per item, each over the iterations its conditions leave
//! ([`distribute`]). The scalar unit waits for the Vector unit only where it reads what that
//! wrote ([`super::waits`]).

use polyhedral::ast::{Ast, AstCond, AstExpr};
use polyhedral::program::{ArrayId, BinaryOp, Expr, ExprId, MathFn, ReductionOp, StmtId, UnaryOp};
use polyhedral::vectorize::calls_function;
use sim::isa::{
    Addr, Affine, CmpOp, DType, Instr, Reg, SOp, Scalar, VBinOp, VRedOp, VScalarOp, VUnOp, VecCfg,
    MAX_REPEAT,
};

use super::emit::{dtype, Emitter, Int};
use super::masked::Masked;
use super::promote;
use super::scalar::{extremum, Instance, Val};
use crate::loops::Linear;
use crate::npu::{Error, BLOCK_BYTES, VECTOR_BYTES};

/// An operand of a vector operation.
#[derive(Clone, Debug)]
enum Operand {
    /// Consecutive elements from this address.
    Lanes(Addr),
    /// One value for every lane.
    Scalar(Scalar),
}

/// One vector operation over all the loop's elements (before it is split into repeats).
#[derive(Clone, Debug)]
pub(super) enum Op {
    Bin(VBinOp, Addr, Addr, Addr),
    Scalar(VScalarOp, Addr, Addr, Scalar),
    Un(VUnOp, Addr, Addr),
    Dup(Addr, Scalar),
    /// Every repeat of the source folded into the destination element, in order.
    Red(VRedOp, Addr, Addr),
    /// A statement that calls a function, in its masked form ([`super::masked`]).
    Masked(Box<Masked>),
}

/// What a reduction statement folds, and how.
pub(super) struct Reduce {
    op: VRedOp,
    pub(super) value: ExprId,
    /// `acc -= value`: the values are negated first (exactly), then summed.
    negate: bool,
}

/// A statement of the loop as vector operations.
#[derive(Default)]
pub(super) struct Lowered {
    pub(super) ops: Vec<Op>,
    /// Registers holding the invariant operands, freed once the operations are written.
    pub(super) sregs: Vec<u8>,
    pub(super) fregs: Vec<u8>,
}

impl Emitter<'_> {
    /// Lowers the loop `var` over `lower..=upper` with `body` on the Vector unit when it can
    /// be (`carried`: the loop carries a dependence, and runs there only as one reduction);
    /// `false` when it cannot (nothing is written then). The module docs say how.
    pub(super) fn vector_loop(
        &mut self,
        var: &str,
        lower: &AstExpr,
        upper: &AstExpr,
        body: &Ast,
        carried: bool,
    ) -> Result<bool, Error> {
        let Some(stmts) = users(body) else {
            return Ok(false);
        };
        let (lower, upper) = (&self.settled(lower), &self.settled(upper));
        // A loop that carries a dependence runs here only as one reduction into an element;
        // a statement that calls a function, only alone.
        let calls = stmts.iter().any(|(s, _)| calls_function(self.program, *s));
        if (carried || calls) && stmts.len() != 1 {
            return Ok(false);
        }
        let mut ty = None;
        let mut phases = Vec::new();
        for (stmt, args) in &stmts {
            let t = if carried {
                self.reduces(*stmt, args, var, &mut phases).map(|(t, _)| t)
            } else {
                self.vectorizes(*stmt, args, var, &mut phases)
            };
            let Some(t) = t else {
                return Ok(false);
            };
            if ty.is_some_and(|u| u != t) {
                return Ok(false);
            }
            ty = Some(t);
        }
        let (Some(ty), Some(phase)) = (ty, phases.first().cloned()) else {
            return Ok(false);
        };
        // Every access must reach a block at the same iterations.
        let per_block = (BLOCK_BYTES / ty.size()) as i64;
        let divisible = |l: &Linear| {
            l.constant % per_block == 0
                && l.vars.values().all(|c| c % per_block == 0)
                && l.params.values().all(|c| c % per_block == 0)
        };
        if !phases.iter().all(|q| divisible(&q.minus(&phase))) {
            return Ok(false);
        }
        let lanes = (VECTOR_BYTES / ty.size()) as i64;
        let r = self.held(lower)?;
        // The last iteration, in a register of its own that the computations below read.
        let h = self.held(upper)?;
        let hi = Int::Var(Scalar::Reg(Reg::S(h)));
        let range = self.loop_range(lower, upper);
        self.bind(var, r, range);
        // Iterations before the first block: (-(var + phase)) mod per_block of them, none
        // when the first iteration starts on a block whatever the outer loops.
        let mut first = Linear::of(lower).map(|l| self.with_params(l));
        if let Some(f) = &mut first {
            f.constant += phase.constant;
            for (v, c) in &phase.vars {
                *f.vars.entry(v.clone()).or_default() += c;
            }
        }
        let aligned = first.as_ref().is_some_and(|f| {
            f.constant % per_block == 0 && f.vars.values().all(|c| c % per_block == 0)
        });
        if !aligned {
            let at_var = AstExpr::plus(
                AstExpr::var(var),
                AstExpr::plus(
                    phase.to_expr_without(&Default::default()),
                    AstExpr::Int(phase.constant),
                ),
            );
            let peel = AstExpr::Mod(Box::new(AstExpr::mul(-1, at_var)), per_block);
            let peel = self.int(&peel)?;
            let peel_end = self.sbin(SOp::Add, peel, Int::Var(Scalar::Reg(Reg::S(r))))?;
            let peel_end = self.sbin(SOp::Sub, peel_end, Int::Const(1))?;
            let peel_end = self.sbin(SOp::Min, peel_end, hi.clone())?;
            self.scalar_iterations(r, peel_end.scalar(), body)?;
            self.release(peel_end);
        }
        // The trip count, when it is the same in every instance of the loop.
        let trip = match (aligned, Linear::of(upper), Linear::of(lower)) {
            (true, Some(u), Some(l)) => {
                let d = self.with_params(u.minus(&l));
                d.is_constant().then_some(d.constant + 1)
            }
            _ => None,
        };
        // The rest on the Vector unit, when any is left: the invariant operands are read only
        // then (their elements exist only where the loop runs). Whole repeats, then the last
        // partial one under a mask that counts its lanes.
        // Repeats per instruction: as many as the trip count has, the temporaries of every
        // operation (at most two per expression node) fitting the unified buffer.
        let chunk = trip.map_or(1, |t| {
            let repeat_bytes: u64 = stmts
                .iter()
                .map(|(s, _)| self.repeat_bytes(*s, lanes as u64, carried))
                .sum();
            let repeat_bytes = repeat_bytes as i64;
            let free =
                self.target.capacity(sim::isa::Mem::Ub) as i64 - self.vector_temps_start() as i64;
            (t / lanes)
                .min(i64::from(MAX_REPEAT))
                .min(free / repeat_bytes)
                .max(1)
        });
        let vector = self.nested(|e| {
            let mut lowered = Lowered::default();
            for (stmt, args) in &stmts {
                if carried {
                    e.vector_reduction(*stmt, args, var, lanes * chunk, &mut lowered)?;
                } else {
                    e.vector_statement(*stmt, args, var, lanes * chunk, &mut lowered)?;
                }
            }
            e.push(FULL_MASK);
            for op in &lowered.ops {
                if let Op::Masked(m) = op {
                    e.write_masked_setup(m, chunk as u32);
                }
            }
            match trip {
                Some(t) => {
                    let mut left = t / lanes;
                    while left > 0 {
                        let n = left.min(chunk);
                        e.write_ops(&lowered.ops, ty, n as u32, None);
                        left -= n;
                        if left > 0 || t % lanes > 0 {
                            e.push(Instr::SBin {
                                op: SOp::Add,
                                dst: Reg::S(r),
                                a: Scalar::Reg(Reg::S(r)),
                                b: Scalar::Int(n * lanes),
                            });
                        }
                    }
                    if t % lanes > 0 {
                        let count = Scalar::Int(t % lanes);
                        e.push(Instr::SetMaskCount {
                            lanes: count.clone(),
                        });
                        e.write_ops(&lowered.ops, ty, 1, Some(&count));
                        e.push(FULL_MASK);
                    }
                }
                None => {
                    let last = e.sbin(SOp::Sub, hi.clone(), Int::Const(lanes - 1))?;
                    e.stepping(r, lanes, last.scalar(), |e| {
                        e.write_ops(&lowered.ops, ty, 1, None);
                        Ok(())
                    })?;
                    e.release(last);
                    e.write_tail(&lowered.ops, ty, 1, r, &hi)?;
                }
            }
            for x in lowered.sregs {
                e.free_s(x);
            }
            for x in lowered.fregs {
                e.free_f(x);
            }
            Ok(())
        })?;
        self.branch(Scalar::Reg(Reg::S(r)), CmpOp::Le, hi.scalar(), vector);
        self.unbind(var);
        self.free_s(h);
        self.free_s(r);
        Ok(true)
    }

    /// Bytes of temporaries statement `stmt` needs per repeat of `lanes` lanes: a masked
    /// form's buffers where it runs as one (`carried`: the loop runs it as a reduction), else
    /// at most two per expression node.
    pub(super) fn repeat_bytes(&self, stmt: StmtId, lanes: u64, carried: bool) -> u64 {
        let masked = (!carried && calls_function(self.program, stmt))
            .then(|| self.masked_bytes(stmt, lanes))
            .flatten();
        masked.unwrap_or_else(|| {
            let nodes = self.program.statements[stmt.index()].exprs.len() as u64;
            VECTOR_BYTES * (2 * nodes + 1)
        })
    }

    /// `l` with the parameters replaced by their values.
    pub(super) fn with_params(&self, mut l: Linear) -> Linear {
        for (p, c) in std::mem::take(&mut l.params) {
            l.constant += c * self.params[p as usize];
        }
        l
    }

    /// `while r <= last { body; r += 1 }` on the scalar unit.
    fn scalar_iterations(&mut self, r: u8, last: Scalar, body: &Ast) -> Result<(), Error> {
        self.stepping(r, 1, last, |e| e.region_body(body))
    }

    /// The element type a statement of the loop computes in on the Vector unit, pushing on
    /// `phases` where each of its consecutive accesses stands against its block; `None` when
    /// it does not run there.
    pub(super) fn vectorizes(
        &self,
        stmt: StmtId,
        args: &[AstExpr],
        var: &str,
        phases: &mut Vec<Linear>,
    ) -> Option<DType> {
        if calls_function(self.program, stmt) {
            return self.masked_vectorizes(stmt, args, var, phases);
        }
        let s = &self.program.statements[stmt.index()];
        let ty = dtype(self.program.array(s.write.array).elem).ok()?;
        let at = Instance::new(s, args);
        let write = subscripts(s, &s.write.subscripts, args);
        phases.push(self.consecutive(s.write.array, &write, var, ty)?);
        self.lanes_expr(&at, s.body, var, ty, phases).then_some(ty)
    }

    /// The element type and operation of a statement that folds the loop's iterations into
    /// one element (`acc op= value`, the element the same in every iteration and `value`
    /// what the lanes compute), pushing its consecutive accesses' phases on `phases`; `None`
    /// for any other statement. The Vector unit folds a row's lanes in lane order, rounding
    /// after each step, as the loop does: sums in f32 or i32 only (f16 sums round to f16).
    pub(super) fn reduces(
        &self,
        stmt: StmtId,
        args: &[AstExpr],
        var: &str,
        phases: &mut Vec<Linear>,
    ) -> Option<(DType, Reduce)> {
        let s = &self.program.statements[stmt.index()];
        let red = s.reduction.as_ref()?;
        let ty = dtype(self.program.array(s.write.array).elem).ok()?;
        let Expr::Binary(bop, x, y) = &s.exprs[s.body] else {
            return None;
        };
        let is_acc = |e: ExprId| {
            matches!(&s.exprs[e], Expr::Read(r)
                if s.reads[*r].array == s.write.array
                    && s.reads[*r].subscripts == s.write.subscripts)
        };
        let value = match (is_acc(*x), is_acc(*y)) {
            (true, false) => *y,
            (false, true) if *bop != BinaryOp::Sub => *x,
            _ => return None,
        };
        let op = match (red.op, bop) {
            (ReductionOp::Add, BinaryOp::Add) => VRedOp::Cadd,
            (ReductionOp::Add, BinaryOp::Sub) => VRedOp::Cadd,
            (ReductionOp::Max, BinaryOp::Max) => VRedOp::Cmax,
            (ReductionOp::Min, BinaryOp::Min) => VRedOp::Cmin,
            _ => return None,
        };
        if op == VRedOp::Cadd && ty == DType::F16 {
            return None;
        }
        // The accumulator is read only as the accumulator (the value reads no element of its
        // array, which the loop changes), and stays put.
        let at = Instance::new(s, args);
        let write = subscripts(s, &s.write.subscripts, args);
        if reads_array(s, value, s.write.array)
            || write.iter().any(|e| uses(e, var))
            || !self.varies(&at, value, var)
        {
            return None;
        }
        self.lanes_expr(&at, value, var, ty, phases).then_some((
            ty,
            Reduce {
                op,
                value,
                negate: *bop == BinaryOp::Sub,
            },
        ))
    }

    /// The address of the element statement `s` writes at the iteration in `args` (its
    /// registers kept in `out` until the loop's operations are written).
    fn written_element(
        &mut self,
        s: &polyhedral::program::Statement,
        args: &[AstExpr],
        out: &mut Lowered,
    ) -> Result<Addr, Error> {
        let mut temps = Vec::new();
        let dst = promote::element(
            self,
            s.write.array,
            &subscripts(s, &s.write.subscripts, args),
            &mut temps,
        )?;
        out.sregs.extend(temps);
        Ok(dst)
    }

    /// A reduction statement of the loop ([`Self::reduces`]): its value over the repeats, then
    /// the fold of every repeat into the accumulator's element.
    pub(super) fn vector_reduction(
        &mut self,
        stmt: StmtId,
        args: &[AstExpr],
        var: &str,
        lanes: i64,
        out: &mut Lowered,
    ) -> Result<(), Error> {
        let program = self.program;
        let s = &program.statements[stmt.index()];
        let ty = dtype(program.array(s.write.array).elem)?;
        let mut phases = Vec::new();
        let (_, reduce) = self
            .reduces(stmt, args, var, &mut phases)
            .expect("a reduction the Vector unit folds");
        let at = Instance::new(s, args);
        let bytes = lanes as u64 * ty.size();
        let dst = self.written_element(s, args, out)?;
        let mut next_temp = self.vector_temps_start() + (out.ops.len() as u64) * bytes;
        let value = self.lanes_value(&at, reduce.value, var, ty, bytes, &mut next_temp, out)?;
        let Operand::Lanes(mut src) = value else {
            unreachable!("a varying value")
        };
        if reduce.negate {
            let t = self.vector_temp(&mut next_temp, bytes)?;
            out.ops
                .push(Op::Scalar(VScalarOp::Muls, t.clone(), src, minus_one(ty)));
            src = t;
        }
        self.ub_size = self.ub_size.max(next_temp);
        out.ops.push(Op::Red(reduce.op, dst, src));
        Ok(())
    }

    /// Where an access that walks the box's last dimension with the loop, one element per
    /// iteration, stands against the box's blocks: the element of iteration `var` is element
    /// `var + phase` of its row. `None` for any other access.
    pub(super) fn consecutive(
        &self,
        array: polyhedral::program::ArrayId,
        subs: &[AstExpr],
        var: &str,
        ty: DType,
    ) -> Option<Linear> {
        let (last, rest) = subs.split_last()?;
        if rest.iter().any(|e| uses(e, var)) {
            return None;
        }
        let mut l = Linear::of(last)?;
        if l.vars.remove(var) != Some(1) || dtype(self.program.array(array).elem).ok()? != ty {
            return None;
        }
        let lower = promote::last_lower(self, array, subs)?;
        Some(self.with_params(l.minus(&lower)))
    }

    /// Whether the expression depends on the loop's iteration.
    pub(super) fn varies(&self, at: &Instance, id: ExprId, var: &str) -> bool {
        let s = at.stmt;
        match &s.exprs[id] {
            Expr::Read(r) => subscripts(s, &s.reads[*r].subscripts, at.args)
                .iter()
                .any(|e| uses(e, var)),
            Expr::Iter(d) => uses(&at.args[*d], var),
            e => e.operands().iter().any(|&x| self.varies(at, x, var)),
        }
    }

    /// Whether a varying expression is made of what the lanes compute, in type `ty`.
    fn lanes_expr(
        &self,
        at: &Instance,
        id: ExprId,
        var: &str,
        ty: DType,
        phases: &mut Vec<Linear>,
    ) -> bool {
        let s = at.stmt;
        if !self.varies(at, id, var) {
            return true;
        }
        let program = self.program;
        if dtype(program.expr_type(s, id)).ok() != Some(ty) {
            return false;
        }
        let float = ty != DType::I32;
        let sub = |x: ExprId, phases: &mut Vec<Linear>| self.lanes_expr(at, x, var, ty, phases);
        match &s.exprs[id] {
            Expr::Read(r) => {
                let access = &s.reads[*r];
                let subs = subscripts(s, &access.subscripts, at.args);
                match self.consecutive(access.array, &subs, var, ty) {
                    Some(p) => {
                        phases.push(p);
                        true
                    }
                    None => false,
                }
            }
            Expr::Binary(op, a, b) => {
                let ok = match op {
                    BinaryOp::Add
                    | BinaryOp::Sub
                    | BinaryOp::Mul
                    | BinaryOp::Min
                    | BinaryOp::Max => true,
                    BinaryOp::Div => float,
                    _ => false,
                };
                ok && sub(*a, phases) && sub(*b, phases)
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => match extremum(&s.exprs, &s.reads, *cond, *then, *otherwise) {
                Some((_, a, b)) => sub(a, phases) && sub(b, phases),
                None => false,
            },
            Expr::Unary(UnaryOp::Neg, a) => sub(*a, phases),
            Expr::Math(MathFn::Exp | MathFn::Log | MathFn::Sqrt | MathFn::Rsqrt, args) if float => {
                sub(args[0], phases)
            }
            Expr::Math(MathFn::Abs, args) => sub(args[0], phases),
            Expr::Cast(_, a) => dtype(program.expr_type(s, *a)).ok() == Some(ty) && sub(*a, phases),
            _ => false,
        }
    }

    /// One statement of the loop as vector operations over one repeat from the iteration in
    /// `var`'s register, appended to `out` (its invariant operands computed now).
    pub(super) fn vector_statement(
        &mut self,
        stmt: StmtId,
        args: &[AstExpr],
        var: &str,
        lanes: i64,
        out: &mut Lowered,
    ) -> Result<(), Error> {
        let program = self.program;
        if calls_function(program, stmt) {
            let mut next_temp = self.vector_temps_start();
            let m = self.masked_statement(
                stmt,
                args,
                var,
                lanes as u64,
                &mut next_temp,
                &mut out.sregs,
                &mut out.fregs,
            )?;
            out.ops.push(Op::Masked(Box::new(m)));
            return Ok(());
        }
        let s = &program.statements[stmt.index()];
        let ty = dtype(program.array(s.write.array).elem)?;
        let at = Instance::new(s, args);
        let bytes = lanes as u64 * ty.size();
        let dst = self.written_element(s, args, out)?;
        let start = out.ops.len();
        let mut next_temp = self.vector_temps_start() + (out.ops.len() as u64) * bytes;
        let value = self.lanes_value(&at, s.body, var, ty, bytes, &mut next_temp, out)?;
        self.ub_size = self.ub_size.max(next_temp);
        // The last operation writes the result into the box.
        match value {
            Operand::Lanes(src) => match out.ops[start..].last_mut() {
                Some(op) if op_dst(op) == &src => set_op_dst(op, dst),
                _ => out.ops.push(Op::Scalar(VScalarOp::Muls, dst, src, one(ty))),
            },
            Operand::Scalar(x) => out.ops.push(Op::Dup(dst, x)),
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn lanes_value(
        &mut self,
        at: &Instance,
        id: ExprId,
        var: &str,
        ty: DType,
        bytes: u64,
        next_temp: &mut u64,
        out: &mut Lowered,
    ) -> Result<Operand, Error> {
        let s = at.stmt;
        if !self.varies(at, id, var) {
            let v = self.value(at, id)?;
            return Ok(Operand::Scalar(self.hold(v, out)));
        }
        let value = |e: &mut Self, x: ExprId, out: &mut Lowered, next: &mut u64| {
            e.lanes_value(at, x, var, ty, bytes, next, out)
        };
        Ok(match &s.exprs[id] {
            Expr::Read(r) => {
                let access = &s.reads[*r];
                let mut temps = Vec::new();
                let addr = promote::element(
                    self,
                    access.array,
                    &subscripts(s, &access.subscripts, at.args),
                    &mut temps,
                )?;
                out.sregs.extend(temps);
                Operand::Lanes(addr)
            }
            Expr::Cast(_, a) => value(self, *a, out, next_temp)?,
            Expr::Unary(UnaryOp::Neg, a) => {
                let a = value(self, *a, out, next_temp)?;
                let Operand::Lanes(a) = a else {
                    unreachable!("a varying operand")
                };
                let dst = self.vector_temp(next_temp, bytes)?;
                out.ops
                    .push(Op::Scalar(VScalarOp::Muls, dst.clone(), a, minus_one(ty)));
                Operand::Lanes(dst)
            }
            Expr::Math(f, args) => {
                let Operand::Lanes(a) = value(self, args[0], out, next_temp)? else {
                    unreachable!("a varying operand")
                };
                let op = match f {
                    MathFn::Exp => VUnOp::Exp,
                    MathFn::Log => VUnOp::Ln,
                    MathFn::Sqrt => VUnOp::Sqrt,
                    MathFn::Rsqrt => VUnOp::Rsqrt,
                    _ => VUnOp::Abs,
                };
                let dst = self.vector_temp(next_temp, bytes)?;
                out.ops.push(Op::Un(op, dst.clone(), a));
                Operand::Lanes(dst)
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                let (op, a, b) = extremum(&s.exprs, &s.reads, *cond, *then, *otherwise)
                    .expect("a selection the Vector unit computes");
                let a = value(self, a, out, next_temp)?;
                let b = value(self, b, out, next_temp)?;
                let dst = self.vector_temp(next_temp, bytes)?;
                self.binary(op, ty, dst.clone(), a, b, (next_temp, bytes), out)?;
                Operand::Lanes(dst)
            }
            Expr::Binary(op, a, b) => {
                let a = value(self, *a, out, next_temp)?;
                let b = value(self, *b, out, next_temp)?;
                let dst = self.vector_temp(next_temp, bytes)?;
                self.binary(*op, ty, dst.clone(), a, b, (next_temp, bytes), out)?;
                Operand::Lanes(dst)
            }
            other => return Err(Error::NotYet(format!("the vector expression {other:?}"))),
        })
    }

    /// `dst = a op b` with at least one of them lanes.
    #[allow(clippy::too_many_arguments)]
    fn binary(
        &mut self,
        op: BinaryOp,
        ty: DType,
        dst: Addr,
        a: Operand,
        b: Operand,
        (next_temp, bytes): (&mut u64, u64),
        out: &mut Lowered,
    ) -> Result<(), Error> {
        let vop = match op {
            BinaryOp::Add => VBinOp::Add,
            BinaryOp::Sub => VBinOp::Sub,
            BinaryOp::Mul => VBinOp::Mul,
            BinaryOp::Div => VBinOp::Div,
            BinaryOp::Min => VBinOp::Min,
            _ => VBinOp::Max,
        };
        let commutes = matches!(op, BinaryOp::Add | BinaryOp::Mul | BinaryOp::Max);
        let with_scalar = |op: BinaryOp| match op {
            BinaryOp::Add => Some(VScalarOp::Adds),
            BinaryOp::Mul => Some(VScalarOp::Muls),
            BinaryOp::Max => Some(VScalarOp::Maxs),
            _ => None,
        };
        match (a, b) {
            (Operand::Lanes(x), Operand::Lanes(y)) => out.ops.push(Op::Bin(vop, dst, x, y)),
            (Operand::Lanes(x), Operand::Scalar(c)) | (Operand::Scalar(c), Operand::Lanes(x))
                if commutes =>
            {
                let sop = with_scalar(op).expect("a commuting operator");
                out.ops.push(Op::Scalar(sop, dst, x, c));
            }
            (Operand::Lanes(x), Operand::Scalar(c)) if op == BinaryOp::Sub => {
                // x - c = x + (-c), exactly.
                let neg = self.negated(c, ty, out)?;
                out.ops.push(Op::Scalar(VScalarOp::Adds, dst, x, neg));
            }
            (Operand::Scalar(c), Operand::Lanes(y)) if op == BinaryOp::Sub => {
                // c - y = (-y) + c, exactly.
                out.ops
                    .push(Op::Scalar(VScalarOp::Muls, dst.clone(), y, minus_one(ty)));
                out.ops
                    .push(Op::Scalar(VScalarOp::Adds, dst.clone(), dst, c));
            }
            (a, b) => {
                // Division and minimum by a scalar: the scalar broadcast first.
                let mut lanes =
                    |o: Operand, e: &mut Self, out: &mut Lowered| -> Result<Addr, Error> {
                        match o {
                            Operand::Lanes(x) => Ok(x),
                            Operand::Scalar(c) => {
                                let t = e.vector_temp(next_temp, bytes)?;
                                out.ops.push(Op::Dup(t.clone(), c));
                                Ok(t)
                            }
                        }
                    };
                let x = lanes(a, self, out)?;
                let y = lanes(b, self, out)?;
                out.ops.push(Op::Bin(vop, dst, x, y));
            }
        }
        Ok(())
    }

    /// A temporary of `bytes` in the unified buffer, from `next` on.
    pub(super) fn vector_temp(&self, next: &mut u64, bytes: u64) -> Result<Addr, Error> {
        let at = *next;
        *next += bytes;
        if *next > self.target.capacity(sim::isa::Mem::Ub) {
            return Err(Error::NotYet(format!(
                "the vector temporaries of `{}` do not fit the unified buffer",
                self.program.name
            )));
        }
        Ok(self.ub_at(Affine::constant(at as i64)))
    }

    /// `-c` as a scalar operand.
    fn negated(&mut self, c: Scalar, ty: DType, out: &mut Lowered) -> Result<Scalar, Error> {
        Ok(match c {
            Scalar::Int(v) => Scalar::Int(-v),
            Scalar::Float(v) => Scalar::Float(-v),
            other => {
                let (dst, zero) = if ty == DType::I32 {
                    let r = self.sreg()?;
                    out.sregs.push(r);
                    (Reg::S(r), Scalar::Int(0))
                } else {
                    let r = self.freg()?;
                    out.fregs.push(r);
                    (Reg::F(r), Scalar::Float(0.0))
                };
                self.push(Instr::SBin {
                    op: sim::isa::SOp::Sub,
                    dst,
                    a: zero,
                    b: other,
                });
                Scalar::Reg(dst)
            }
        })
    }

    /// An invariant value as a scalar operand, its register kept until the operations are
    /// written.
    fn hold(&mut self, v: Val, out: &mut Lowered) -> Scalar {
        let s = v.scalar();
        match v {
            Val::F(r) => out.fregs.push(r),
            Val::I(Int::Temp(r)) => out.sregs.push(r),
            _ => {}
        }
        s
    }
}

/// The vector instruction of `op`: one repeat.
/// Every lane on.
pub(super) const FULL_MASK: Instr = Instr::SetMask {
    hi: u64::MAX,
    lo: u64::MAX,
};

impl Emitter<'_> {
    /// The last, partial repeat of a loop in register `r` that ends at `hi`, where one is
    /// left: `ops` over `repeat` repeats under a mask that counts its lanes.
    pub(super) fn write_tail(
        &mut self,
        ops: &[Op],
        ty: DType,
        repeat: u32,
        r: u8,
        hi: &Int,
    ) -> Result<(), Error> {
        let tail = self.nested(|e| {
            let left = e.sbin(SOp::Sub, hi.clone(), Int::Var(Scalar::Reg(Reg::S(r))))?;
            let left = e.sbin(SOp::Add, left, Int::Const(1))?;
            let count = left.scalar();
            e.push(Instr::SetMaskCount {
                lanes: count.clone(),
            });
            e.write_ops(ops, ty, repeat, Some(&count));
            e.release(left);
            e.push(FULL_MASK);
            Ok(())
        })?;
        self.branch(Scalar::Reg(Reg::S(r)), CmpOp::Le, hi.scalar(), tail);
        Ok(())
    }

    /// The instructions of `ops` over `repeat` consecutive repeats; `count`: the lanes of the
    /// last, partial repeat, under its counted mask.
    pub(super) fn write_ops(&mut self, ops: &[Op], ty: DType, repeat: u32, count: Option<&Scalar>) {
        for op in ops {
            match op {
                Op::Masked(m) => self.write_masked(m, repeat, count),
                op => self.push(instr(op, ty, repeat)),
            }
        }
    }
}

/// The instruction of `op` over `repeat` consecutive repeats (not a masked form's, which
/// [`Emitter::write_masked`] writes).
fn instr(op: &Op, ty: DType, repeat: u32) -> Instr {
    let shift = |a: &Addr| a.clone();
    let cfg = |n: usize| VecCfg {
        repeat,
        blk: vec![1; n],
        rep: vec![8; n],
    };
    match op {
        Op::Bin(op, d, a, b) => Instr::VBin {
            op: *op,
            ty,
            dst: shift(d),
            src0: shift(a),
            src1: shift(b),
            cfg: cfg(3),
        },
        Op::Scalar(op, d, a, c) => Instr::VScalar {
            op: *op,
            ty,
            dst: shift(d),
            src: shift(a),
            scalar: c.clone(),
            cfg: cfg(2),
        },
        Op::Un(op, d, a) => Instr::VUn {
            op: *op,
            ty,
            dst: shift(d),
            src: shift(a),
            cfg: cfg(2),
        },
        Op::Dup(d, c) => Instr::VDup {
            ty,
            dst: shift(d),
            scalar: c.clone(),
            cfg: cfg(1),
        },
        Op::Red(op, d, a) => Instr::VRed {
            op: *op,
            ty,
            dst: shift(d),
            src: shift(a),
            cfg: VecCfg {
                repeat,
                blk: vec![1; 2],
                rep: vec![0, 8],
            },
            acc: true,
        },
        Op::Masked(_) => unreachable!("a masked form is written by `write_masked`"),
    }
}

fn op_dst(op: &Op) -> &Addr {
    match op {
        Op::Bin(_, d, ..)
        | Op::Scalar(_, d, ..)
        | Op::Un(_, d, _)
        | Op::Dup(d, _)
        | Op::Red(_, d, _) => d,
        Op::Masked(m) => &m.dst,
    }
}

fn set_op_dst(op: &mut Op, dst: Addr) {
    match op {
        Op::Bin(_, d, ..)
        | Op::Scalar(_, d, ..)
        | Op::Un(_, d, _)
        | Op::Dup(d, _)
        | Op::Red(_, d, _) => *d = dst,
        Op::Masked(m) => m.dst = dst,
    }
}

fn one(ty: DType) -> Scalar {
    match ty {
        DType::I32 => Scalar::Int(1),
        _ => Scalar::Float(1.0),
    }
}

fn minus_one(ty: DType) -> Scalar {
    match ty {
        DType::I32 => Scalar::Int(-1),
        _ => Scalar::Float(-1.0),
    }
}

/// The loop `var` over `lower..=upper` around `body` as one loop per item of the body, each
/// over the iterations its conditions leave: a condition on `var` alone and outer loops
/// narrows the item's bounds, the others guard its loop. `None` when the body is statements
/// alone already, or has a condition on `var` that is no bound (a divisibility), or an
/// `else`.
///
/// The loop carries no dependence, so each item may run over all the iterations in turn, as
/// the vector lowering runs each statement: this is exact.
pub(super) fn distribute(
    var: &str,
    lower: &AstExpr,
    upper: &AstExpr,
    body: &Ast,
) -> Option<Vec<Ast>> {
    if users(body).is_some() {
        return None;
    }
    let items = match body {
        Ast::Block(items) => items.as_slice(),
        b => std::slice::from_ref(b),
    };
    let mut out = Vec::new();
    for item in items {
        let mut guards = Vec::new();
        let mut lowers = vec![lower.clone()];
        let mut uppers = vec![upper.clone()];
        let mut inner = item;
        while let Ast::If {
            conds,
            then,
            otherwise: None,
        } = inner
        {
            for c in conds {
                if !bound(c, var, &mut lowers, &mut uppers)? {
                    guards.push(c.clone());
                }
            }
            inner = then;
        }
        users(inner)?;
        let mut ast = Ast::For {
            var: var.to_string(),
            lower: AstExpr::max(lowers),
            upper: AstExpr::min(uppers),
            step: 1,
            body: Box::new(inner.clone()),
            annotations: polyhedral::ast::LoopAnnotations {
                parallel: true,
                vectorizable: true,
            },
        };
        if !guards.is_empty() {
            ast = Ast::If {
                conds: guards,
                then: Box::new(ast),
                otherwise: None,
            };
        }
        out.push(ast);
    }
    Some(out)
}

/// Adds the bound `cond` puts on `var` to `lowers` or `uppers`; `Some(false)` when it does not
/// use `var`, `None` when it uses it otherwise than affinely.
fn bound(
    cond: &AstCond,
    var: &str,
    lowers: &mut Vec<AstExpr>,
    uppers: &mut Vec<AstExpr>,
) -> Option<bool> {
    let (e, equal) = match cond {
        AstCond::NonNegative(e) => (e, false),
        AstCond::Zero(e) => (e, true),
        AstCond::Divisible(e, _) => return (!uses(e, var)).then_some(false),
    };
    if !uses(e, var) {
        return Some(false);
    }
    let mut l = Linear::of(e)?;
    let a = l.vars.remove(var)?;
    let rest = AstExpr::plus(
        l.to_expr_without(&Default::default()),
        AstExpr::Int(l.constant),
    );
    // a*var + rest >= 0 (or == 0).
    let (lo, hi) = if a > 0 {
        let at_least = AstExpr::ceil_div(AstExpr::mul(-1, rest.clone()), a);
        let at_most = AstExpr::floor_div(AstExpr::mul(-1, rest), a);
        (Some(at_least), equal.then_some(at_most))
    } else {
        let at_most = AstExpr::floor_div(rest.clone(), -a);
        let at_least = AstExpr::ceil_div(rest, -a);
        (equal.then_some(at_least), Some(at_most))
    };
    lowers.extend(lo);
    uppers.extend(hi);
    Some(true)
}

/// The statement instances of a loop body made of statements alone.
pub(super) fn users(body: &Ast) -> Option<Vec<(StmtId, &[AstExpr])>> {
    match body {
        Ast::User { stmt, args } => Some(vec![(*stmt, args.as_slice())]),
        Ast::Block(items) => {
            let mut out = Vec::new();
            for a in items {
                out.extend(users(a)?);
            }
            Some(out)
        }
        _ => None,
    }
}

/// The subscripts of an access of `s` for the iterators `args`.
pub(super) fn subscripts(
    s: &polyhedral::program::Statement,
    subs: &[polyhedral::program::AffineExpr],
    args: &[AstExpr],
) -> Vec<AstExpr> {
    subs.iter()
        .map(|e| AstExpr::from_subscript(&s.divs, e, &|d| args[d].clone()))
        .collect()
}

pub(super) fn uses(e: &AstExpr, var: &str) -> bool {
    let mut found = false;
    e.for_each_var(&mut |v| found |= v == var);
    found
}

/// Whether expression `e` of statement `s` reads an element of `array`.
fn reads_array(s: &polyhedral::program::Statement, e: ExprId, array: ArrayId) -> bool {
    match &s.exprs[e] {
        Expr::Read(r) => s.reads[*r].array == array,
        other => other
            .operands()
            .into_iter()
            .any(|o| reads_array(s, o, array)),
    }
}
