//! Statements that call the kernel's scalar functions, on the Vector unit: the statement's
//! body vectorised over the loop's iterator ([`polyhedral::vectorize`]), its masked form
//! ([`crate::npu::function::masked`]) written as instructions over the loop's repeats.
//!
//! Every value of the masked form is a buffer of one element (or, for masks, one bit) per lane,
//! from the vector temporaries on; the statement's reads are the boxes themselves where the
//! loop walks them (the masked form never writes its leaves) and, where they do not vary with
//! the loop, a buffer their value is broadcast into. The entry mask holds the lanes the loop
//! runs: all of a whole repeat, and for the last, partial one the lanes its counted mask
//! leaves on, so no branch or loop of the body waits for the lanes past the end. The body runs
//! with every lane on (a select keeps each lane's value), and its result is copied into the
//! written box under the loop's mask. Its branches and loops test the `count` of their masks
//! in integer registers of their own; the scalar unit waits for the vector work before each
//! count ([`super::waits`]).

use polyhedral::ast::AstExpr;
use polyhedral::program::{Expr, StmtId};
use polyhedral::vectorize::ssa::Op as SsaOp;
use polyhedral::vectorize::VectorProgram;
use sim::isa::{
    Addr, CmpOp, Cond, DType, Instr, Reg, Scalar, Stmt, VBinOp, VecCfg, CMP_NAMES, VBIN_NAMES,
    VSCALAR_NAMES, VUN_NAMES,
};
use sim::Span;

use super::emit::{dtype, Emitter};
use super::scalar::Instance;
use super::vector::{subscripts, uses};
use crate::loops::Linear;
use crate::npu::function::masked::{Buf, Kind, Line, Lowering, Ty, FIRST_TEST_REG};
use crate::npu::{Error, VECTOR_BYTES};

/// Lanes of one 32-bit repeat.
const LANES: u64 = VECTOR_BYTES / 4;
/// Lanes of one mask repeat: 256 bytes of bits.
const MASK_LANES: u64 = VECTOR_BYTES * 8;

/// A statement's masked form, ready to be written over any number of repeats.
#[derive(Clone, Debug)]
pub(super) struct Masked {
    /// The constants, then the body.
    setup: Vec<Line>,
    body: Vec<Line>,
    /// Where each buffer of the form lives.
    addrs: Vec<Addr>,
    entry: Buf,
    result: Buf,
    /// The element the loop's first lane writes.
    pub(super) dst: Addr,
    /// The reads that do not vary with the loop: their buffer and value.
    broadcasts: Vec<(Buf, Ty, Scalar)>,
    /// The integer registers the mask tests count into, per nesting level.
    tests: Vec<u8>,
}

/// The masked form of a statement's body: its buffers and lines.
struct Form {
    kinds: Vec<Kind>,
    /// The constants, filled before the body.
    setup: Vec<Line>,
    body: Vec<Line>,
    entry: Buf,
    result: Buf,
}

/// The masked form of statement `stmt`'s body over its innermost iterator; `None` when it has
/// values the lowering below does not take. Buffer 0 is the entry mask, buffer `1 + r` read
/// `r`.
fn form(program: &polyhedral::Program, stmt: StmtId) -> Option<Form> {
    let s = &program.statements[stmt.index()];
    let depth = s.depth().checked_sub(1)?;
    let mut vp = VectorProgram::new(program);
    let variant = vp.statement_variant(program, stmt, depth);
    let f = &vp.variants[variant];
    if f.ssa.value(f.ssa.result()).ty != program.array(s.write.array).elem {
        return None;
    }
    let mut low = Lowering::new(&vp);
    let entry = low.alloc(Kind::Mask);
    let mut reads = Vec::new();
    for a in &s.reads {
        let ty = Ty::of(program.array(a.array).elem)?;
        reads.push(low.alloc(Kind::Lanes(ty)));
    }
    let leaf = |op: &SsaOp| match op {
        SsaOp::Read(r) => Ok(reads[*r]),
        _ => Err(Error::NotYet(
            "iterator values in a vectorised statement".into(),
        )),
    };
    let mut body = Vec::new();
    let result = low.variant(variant, entry, &leaf, &mut body).ok()?;
    // f16 lanes fill half the repeats the others do; this lowering keeps to 32-bit lanes.
    if low.kinds.contains(&Kind::Lanes(Ty::F16)) {
        return None;
    }
    Some(Form {
        kinds: low.kinds,
        setup: low.setup,
        body,
        entry,
        result,
    })
}

impl Emitter<'_> {
    /// The element type statement `stmt`, which calls a function, computes in on the Vector
    /// unit over the loop `var`, pushing on `phases` where its consecutive accesses stand
    /// against their blocks; `None` when it does not run there.
    pub(super) fn masked_vectorizes(
        &self,
        stmt: StmtId,
        args: &[AstExpr],
        var: &str,
        phases: &mut Vec<Linear>,
    ) -> Option<DType> {
        let program = self.program;
        let s = &program.statements[stmt.index()];
        let ty = dtype(program.array(s.write.array).elem).ok()?;
        // The loop runs the statement's innermost iterator, which nothing else uses.
        let (last, outer) = args.split_last()?;
        if *last != AstExpr::var(var) || outer.iter().any(|a| uses(a, var)) {
            return None;
        }
        if !matches!(ty, DType::F32 | DType::I32) {
            return None;
        }
        let write = subscripts(s, &s.write.subscripts, args);
        phases.push(self.consecutive(s.write.array, &write, var, ty)?);
        for a in &s.reads {
            let subs = subscripts(s, &a.subscripts, args);
            if subs.iter().any(|e| uses(e, var)) {
                let t = dtype(program.array(a.array).elem).ok()?;
                phases.push(self.consecutive(a.array, &subs, var, t)?);
            }
        }
        form(program, stmt)?;
        Some(ty)
    }

    /// The buffers of the masked form of `stmt` over `lanes` lanes.
    pub(super) fn masked_bytes(&self, stmt: StmtId, lanes: u64) -> Option<u64> {
        form(self.program, stmt).map(|f| f.kinds.iter().map(|k| kind_bytes(*k, lanes)).sum())
    }

    /// Statement `stmt` over `lanes` lanes from the iteration in the loop's register: its
    /// masked form, the buffers from `next_temp` on, its invariant reads loaded now (their
    /// registers pushed on `sregs` and `fregs`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn masked_statement(
        &mut self,
        stmt: StmtId,
        args: &[AstExpr],
        var: &str,
        lanes: u64,
        next_temp: &mut u64,
        sregs: &mut Vec<u8>,
        fregs: &mut Vec<u8>,
    ) -> Result<Masked, Error> {
        let program = self.program;
        let s = &program.statements[stmt.index()];
        let form = form(program, stmt)
            .ok_or_else(|| Error::NotYet(format!("statement {} on the Vector unit", s.name)))?;
        let at = Instance::new(s, args);
        let mut addrs: Vec<Option<Addr>> = vec![None; form.kinds.len()];
        let mut broadcasts = Vec::new();
        // The reads: box elements where the loop walks them, broadcasts otherwise (buffer
        // `1 + r` is read `r`, allocated right after the entry mask).
        for (r, a) in s.reads.iter().enumerate() {
            let buf = Buf(1 + r);
            let subs = subscripts(s, &a.subscripts, args);
            if subs.iter().any(|e| uses(e, var)) {
                let mut temps = Vec::new();
                addrs[buf.0] = Some(super::promote::element(self, a.array, &subs, &mut temps)?);
                sregs.extend(temps);
            } else {
                let id = s
                    .exprs
                    .iter()
                    .find_map(|(id, e)| matches!(e, Expr::Read(x) if *x == r).then_some(id))
                    .ok_or_else(|| Error::NotYet(format!("statement {}'s reads", s.name)))?;
                let v = self.value(&at, id)?;
                let ty = Ty::of(program.array(a.array).elem).unwrap_or(Ty::F32);
                broadcasts.push((buf, ty, v.scalar()));
                match v {
                    super::scalar::Val::F(x) => fregs.push(x),
                    super::scalar::Val::I(super::emit::Int::Temp(x)) => sregs.push(x),
                    _ => {}
                }
            }
        }
        for (k, a) in addrs.iter_mut().enumerate() {
            if a.is_none() {
                let bytes = kind_bytes(form.kinds[k], lanes);
                *a = Some(self.vector_temp(next_temp, bytes)?);
            }
        }
        self.ub_size = self.ub_size.max(*next_temp);
        let mut dst_temps = Vec::new();
        let dst = super::promote::element(
            self,
            s.write.array,
            &subscripts(s, &s.write.subscripts, args),
            &mut dst_temps,
        )?;
        sregs.extend(dst_temps);
        let levels = test_levels(&form.body);
        let mut tests = Vec::new();
        for _ in 0..levels {
            let r = self.sreg()?;
            sregs.push(r);
            tests.push(r);
        }
        Ok(Masked {
            setup: form.setup,
            body: form.body,
            addrs: addrs.into_iter().flatten().collect(),
            entry: form.entry,
            result: form.result,
            dst,
            broadcasts,
            tests,
        })
    }

    /// Fills the constants of `m` and its entry mask with every lane on, for up to `repeats`
    /// repeats: once before the loop's repeats, which only read them (the last, partial
    /// repeat writes its own entry mask, after every other).
    pub(super) fn write_masked_setup(&mut self, m: &Masked, repeats: u32) {
        let n = u64::from(repeats);
        let w = Writer { m, n };
        self.push(Instr::VDup {
            ty: DType::I32,
            dst: w.addr(m.entry),
            scalar: Scalar::Int(-1),
            cfg: w.cfg(1, w.mask_repeats()),
        });
        for s in w.lines(&m.setup) {
            self.push_stmt(s);
        }
    }

    /// Writes `m` over `repeats` repeats, its constants filled ([`Self::write_masked_setup`]);
    /// `count`: the lanes of the last, partial repeat, its counted mask set (and set again
    /// for the copy into the box).
    pub(super) fn write_masked(&mut self, m: &Masked, repeats: u32, count: Option<&Scalar>) {
        let n = u64::from(repeats);
        let w = Writer { m, n };
        for (buf, ty, value) in &m.broadcasts {
            self.push(Instr::VDup {
                ty: w.dtype(*ty),
                dst: w.addr(*buf),
                scalar: value.clone(),
                cfg: w.cfg(1, n),
            });
        }
        if count.is_some() {
            // The entry mask: the lanes the counted mask leaves on (a compare writes 0 bits
            // for the others); the body then runs on every lane.
            self.push(Instr::VCmp {
                op: CmpOp::Eq,
                ty: DType::I32,
                dst: w.addr(m.entry),
                src0: w.addr(m.result),
                src1: w.addr(m.result),
                cfg: w.cfg(2, n),
            });
            self.push(full_mask());
        }
        for s in w.lines(&m.body) {
            self.push_stmt(s);
        }
        if let Some(count) = count {
            self.push(Instr::SetMaskCount {
                lanes: count.clone(),
            });
        }
        self.push(Instr::VBin {
            op: VBinOp::Or,
            ty: DType::I32,
            dst: m.dst.clone(),
            src0: w.addr(m.result),
            src1: w.addr(m.result),
            cfg: w.cfg(3, n),
        });
    }
}

/// The masked form's lines as instructions over `n` repeats.
struct Writer<'m> {
    m: &'m Masked,
    n: u64,
}

impl Writer<'_> {
    fn addr(&self, b: Buf) -> Addr {
        self.m.addrs[b.0].clone()
    }

    fn dtype(&self, ty: Ty) -> DType {
        match ty {
            Ty::F16 => DType::F16,
            Ty::F32 => DType::F32,
            Ty::I32 => DType::I32,
        }
    }

    fn cfg(&self, operands: usize, repeat: u64) -> VecCfg {
        VecCfg {
            repeat: repeat as u32,
            blk: vec![1; operands],
            rep: vec![8; operands],
        }
    }

    fn mask_repeats(&self) -> u64 {
        self.n.div_ceil(MASK_LANES / LANES)
    }

    fn test(&self, reg: usize) -> Reg {
        Reg::S(self.m.tests[reg - FIRST_TEST_REG])
    }

    fn count(&self, mask: Buf, reg: usize) -> Stmt {
        instr(Instr::Count {
            dst: self.test(reg),
            src: self.addr(mask),
            bits: (self.n * LANES) as u32,
        })
    }

    fn any(&self, reg: usize) -> Cond {
        Cond {
            lhs: Scalar::Reg(self.test(reg)),
            op: CmpOp::Ne,
            rhs: Scalar::Int(0),
        }
    }

    fn lines(&self, lines: &[Line]) -> Vec<Stmt> {
        let mut out = Vec::new();
        for l in lines {
            self.line(l, &mut out);
        }
        out
    }

    fn line(&self, l: &Line, out: &mut Vec<Stmt>) {
        let n = self.n;
        let lit = |ty: Ty, v: f64| match ty {
            Ty::I32 => Scalar::Int(v as i64),
            _ => Scalar::Float(v),
        };
        let i = match l {
            Line::Bin { op, ty, dst, a, b } => Instr::VBin {
                op: named(&VBIN_NAMES, op),
                ty: self.dtype(*ty),
                dst: self.addr(*dst),
                src0: self.addr(*a),
                src1: self.addr(*b),
                cfg: self.cfg(3, n),
            },
            Line::Cmp { cmp, ty, dst, a, b } => Instr::VCmp {
                op: named(&CMP_NAMES, cmp),
                ty: self.dtype(*ty),
                dst: self.addr(*dst),
                src0: self.addr(*a),
                src1: self.addr(*b),
                cfg: self.cfg(2, n),
            },
            Line::Scalar {
                op,
                ty,
                dst,
                src,
                value,
            } => Instr::VScalar {
                op: named(&VSCALAR_NAMES, op),
                ty: self.dtype(*ty),
                dst: self.addr(*dst),
                src: self.addr(*src),
                scalar: lit(*ty, *value),
                cfg: self.cfg(2, n),
            },
            Line::Unary { op, ty, dst, src } => Instr::VUn {
                op: named(&VUN_NAMES, op),
                ty: self.dtype(*ty),
                dst: self.addr(*dst),
                src: self.addr(*src),
                cfg: self.cfg(2, n),
            },
            Line::Dup { ty, dst, value } => Instr::VDup {
                ty: self.dtype(*ty),
                dst: self.addr(*dst),
                scalar: lit(*ty, *value),
                cfg: self.cfg(1, n),
            },
            Line::Select {
                ty,
                dst,
                a,
                b,
                mask,
            } => Instr::VSel {
                ty: self.dtype(*ty),
                dst: self.addr(*dst),
                src0: self.addr(*a),
                src1: self.addr(*b),
                mask: self.addr(*mask),
                cfg: self.cfg(3, n),
            },
            // Both types are 32 bits wide here, so a repeat holds 64 lanes of each.
            Line::Conv { from, to, dst, src } => Instr::VConv {
                from: self.dtype(*from),
                to: self.dtype(*to),
                dst: self.addr(*dst),
                src: self.addr(*src),
                cfg: self.cfg(2, n),
            },
            Line::MaskOp { op, dst, a, b } => Instr::VBin {
                op: named(&VBIN_NAMES, op),
                ty: DType::I32,
                dst: self.addr(*dst),
                src0: self.addr(*a),
                src1: self.addr(*b),
                cfg: self.cfg(3, self.mask_repeats()),
            },
            Line::MaskDup { dst, value } => Instr::VDup {
                ty: DType::I32,
                dst: self.addr(*dst),
                scalar: Scalar::Int(*value),
                cfg: self.cfg(1, self.mask_repeats()),
            },
            Line::IfAny { mask, reg, body } => {
                out.push(self.count(*mask, *reg));
                out.push(Stmt::If {
                    cond: self.any(*reg),
                    then: self.lines(body),
                    otherwise: Vec::new(),
                    span: Span::default(),
                });
                return;
            }
            Line::WhileAny {
                mask,
                reg,
                head,
                body,
            } => {
                out.extend(self.lines(head));
                out.push(self.count(*mask, *reg));
                let mut round = self.lines(body);
                round.extend(self.lines(head));
                round.push(self.count(*mask, *reg));
                out.push(Stmt::While {
                    cond: self.any(*reg),
                    body: round,
                    span: Span::default(),
                });
                return;
            }
        };
        out.push(instr(i));
    }
}

fn instr(i: Instr) -> Stmt {
    Stmt::Instr {
        instr: Box::new(i),
        span: Span::default(),
    }
}

fn full_mask() -> Instr {
    Instr::SetMask {
        hi: u64::MAX,
        lo: u64::MAX,
    }
}

/// The operation a name of the masked form stands for (the form writes only names the
/// instruction set has).
fn named<T: Copy>(table: &[(T, &str)], name: &str) -> T {
    let bare = name.strip_prefix('v').unwrap_or(name);
    table
        .iter()
        .find(|(_, n)| *n == name || *n == bare)
        .map(|(op, _)| *op)
        .unwrap_or_else(|| panic!("`{name}` is an operation of the instruction set"))
}

/// Bytes of a buffer of kind `k` over `lanes` lanes, whole repeats.
fn kind_bytes(k: Kind, lanes: u64) -> u64 {
    match k {
        Kind::Lanes(_) => lanes.div_ceil(LANES) * VECTOR_BYTES,
        Kind::Mask => lanes.div_ceil(MASK_LANES) * VECTOR_BYTES,
    }
}

/// How deep the mask tests of `lines` nest.
fn test_levels(lines: &[Line]) -> usize {
    lines
        .iter()
        .map(|l| match l {
            Line::IfAny { body, .. } => 1 + test_levels(body),
            Line::WhileAny { head, body, .. } => 1 + test_levels(head).max(test_levels(body)),
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}
