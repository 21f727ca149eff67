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
//! may not are left to the scalar unit.
//!
//! The lanes are the loop's trip count; where that depends on outer loops (the last tile of a
//! dimension), the loop runs on the Vector unit when it has its largest trip count and on the
//! scalar unit otherwise. The Vector unit's work is done before the scalar unit goes on.

use polyhedral::ast::{Ast, AstExpr};
use polyhedral::program::{BinaryOp, Expr, ExprId, MathFn, StmtId, UnaryOp};
use sim::isa::{
    Addr, Affine, CmpOp, DType, Instr, Reg, SOp, Scalar, VBinOp, VScalarOp, VUnOp, VecCfg,
};

use super::emit::{dtype, Emitter, Int};
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
enum Op {
    Bin(VBinOp, Addr, Addr, Addr),
    Scalar(VScalarOp, Addr, Addr, Scalar),
    Un(VUnOp, Addr, Addr),
    Dup(Addr, Scalar),
}

/// A statement of the loop as vector operations.
struct Lowered {
    ops: Vec<Op>,
    /// Registers holding the invariant operands, freed once the operations are written.
    sregs: Vec<u8>,
    fregs: Vec<u8>,
}

impl Emitter<'_> {
    /// Lowers the loop `var` over `lower..=upper` with `body` on the Vector unit when it can
    /// be; `false` when it cannot (nothing is written then).
    ///
    /// The loop runs in three parts over one integer register: on the scalar unit until the
    /// accesses reach a 32-byte block, on the Vector unit one repeat at a time while a whole
    /// repeat of iterations is left, and the rest on the scalar unit.
    pub(super) fn vector_loop(
        &mut self,
        var: &str,
        lower: &AstExpr,
        upper: &AstExpr,
        body: &Ast,
    ) -> Result<bool, Error> {
        let Some(stmts) = users(body) else {
            return Ok(false);
        };
        let mut ty = None;
        let mut phases = Vec::new();
        for (stmt, args) in &stmts {
            let Some(t) = self.vectorizes(*stmt, args, var, &mut phases) else {
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
        // Iterations before the first block: (-(var + phase)) mod per_block of them.
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
        // Whole repeats, when one is left: the invariant operands are read only then (their
        // elements exist only where the loop runs).
        let last = self.sbin(SOp::Sub, hi.clone(), Int::Const(lanes - 1))?;
        let vector = self.nested(|e| {
            let mut lowered = Lowered {
                ops: Vec::new(),
                sregs: Vec::new(),
                fregs: Vec::new(),
            };
            for (stmt, args) in &stmts {
                e.vector_statement(*stmt, args, var, lanes, &mut lowered)?;
            }
            e.push(Instr::SetMask {
                hi: u64::MAX,
                lo: u64::MAX,
            });
            e.stepping(r, lanes, last.scalar(), |e| {
                for op in &lowered.ops {
                    e.push(instr(op, ty));
                }
                Ok(())
            })?;
            for x in lowered.sregs {
                e.free_s(x);
            }
            for x in lowered.fregs {
                e.free_f(x);
            }
            Ok(())
        })?;
        self.branch(Scalar::Reg(Reg::S(r)), CmpOp::Le, last.scalar(), vector);
        self.release(last);
        // The Vector unit is done before the scalar unit goes on.
        self.wait_for_vector();
        // The rest.
        self.scalar_iterations(r, hi.scalar(), body)?;
        self.unbind(var);
        self.free_s(h);
        self.free_s(r);
        Ok(true)
    }

    /// `while r <= last { body; r += 1 }` on the scalar unit.
    fn scalar_iterations(&mut self, r: u8, last: Scalar, body: &Ast) -> Result<(), Error> {
        self.stepping(r, 1, last, |e| e.region_body(body))
    }

    /// The element type a statement of the loop computes in on the Vector unit, pushing on
    /// `phases` where each of its consecutive accesses stands against its block; `None` when
    /// it does not run there.
    fn vectorizes(
        &self,
        stmt: StmtId,
        args: &[AstExpr],
        var: &str,
        phases: &mut Vec<Linear>,
    ) -> Option<DType> {
        let s = &self.program.statements[stmt.index()];
        let ty = dtype(self.program.array(s.write.array).elem).ok()?;
        let at = Instance::new(s, args);
        let write = subscripts(s, &s.write.subscripts, args);
        phases.push(self.consecutive(s.write.array, &write, var, ty)?);
        self.lanes_expr(&at, s.body, var, ty, phases).then_some(ty)
    }

    /// Where an access that walks the box's last dimension with the loop, one element per
    /// iteration, stands against the box's blocks: the element of iteration `var` is element
    /// `var + phase` of its row. `None` for any other access.
    fn consecutive(
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
        let mut phase = l.minus(&lower);
        for (p, c) in std::mem::take(&mut phase.params) {
            phase.constant += c * self.params[p as usize];
        }
        Some(phase)
    }

    /// Whether the expression depends on the loop's iteration.
    fn varies(&self, at: &Instance, id: ExprId, var: &str) -> bool {
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
    fn vector_statement(
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
        let at = Instance::new(s, args);
        let bytes = lanes as u64 * ty.size();
        let mut temps = Vec::new();
        let dst = promote::element(
            self,
            s.write.array,
            &subscripts(s, &s.write.subscripts, args),
            &mut temps,
        )?;
        out.sregs.extend(temps);
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
    fn vector_temp(&self, next: &mut u64, bytes: u64) -> Result<Addr, Error> {
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
fn instr(op: &Op, ty: DType) -> Instr {
    let shift = |a: &Addr| a.clone();
    let cfg = |n: usize| VecCfg {
        repeat: 1,
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
    }
}

fn op_dst(op: &Op) -> &Addr {
    match op {
        Op::Bin(_, d, ..) | Op::Scalar(_, d, ..) | Op::Un(_, d, _) | Op::Dup(d, _) => d,
    }
}

fn set_op_dst(op: &mut Op, dst: Addr) {
    match op {
        Op::Bin(_, d, ..) | Op::Scalar(_, d, ..) | Op::Un(_, d, _) | Op::Dup(d, _) => *d = dst,
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

/// The statement instances of a loop body made of statements alone.
fn users(body: &Ast) -> Option<Vec<(StmtId, &[AstExpr])>> {
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
fn subscripts(
    s: &polyhedral::program::Statement,
    subs: &[polyhedral::program::AffineExpr],
    args: &[AstExpr],
) -> Vec<AstExpr> {
    subs.iter()
        .map(|e| AstExpr::from_subscript(&s.divs, e, &|d| args[d].clone()))
        .collect()
}

fn uses(e: &AstExpr, var: &str) -> bool {
    let mut found = false;
    e.for_each_var(&mut |v| found |= v == var);
    found
}
