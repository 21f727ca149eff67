//! The assembler: resolves names, places buffers in their memories, checks operand memories,
//! types and registers, and flattens structured control flow into a `Kernel`.
//!
//! On the way out: every buffer lies inside its memory's capacity at an aligned address; every
//! operand names a known buffer in a memory its instruction accepts; every variable in an offset
//! is a loop counter in scope, `block_idx` or an integer register. Offsets that depend on loop
//! counters are checked against bounds and alignment when they are evaluated.

use std::sync::Arc;

use crate::diagnostic::{Diagnostic, Error, Span};
use crate::isa::*;
use crate::machine::Machine;

/// A variable an offset or scalar may read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Var {
    /// Loop counter slot; slot 0 is `block_idx`.
    Slot(u16),
    SReg(u8),
}

/// `c + Σ k·var`, resolved.
#[derive(Clone, Debug)]
pub(crate) struct Lin {
    pub c: i64,
    pub terms: Vec<(Var, i64)>,
}

/// A resolved operand: a buffer index and a byte offset inside it.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub buf: u32,
    pub off: Lin,
}

/// A resolved scalar operand.
#[derive(Clone, Copy, Debug)]
pub(crate) enum SVal {
    Int(i64),
    Float(f32),
    Var(Var),
    FReg(u8),
}

/// Where an instruction came from, for messages.
#[derive(Clone, Debug)]
pub(crate) struct Site {
    pub span: Span,
    pub line: usize,
    pub text: String,
    /// Loop counters in scope, shown with their values in runtime errors.
    pub scope: Vec<(String, u16)>,
}

#[derive(Clone, Debug)]
pub(crate) struct Exec {
    pub instr: Instr,
    /// The instruction's address operands in `Instr::addrs` order.
    pub ops: Vec<Resolved>,
    /// Source spans of `ops`, for messages.
    pub spans: Vec<Span>,
    /// The instruction's scalar operands in `Instr::scalars` order.
    pub scalars: Vec<SVal>,
    /// The pipe that runs the instruction.
    pub pipe: Pipe,
    pub site: u32,
}

#[derive(Clone, Debug)]
pub(crate) enum Op {
    Exec(Box<Exec>),
    /// Sets the counter; jumps to `exit` when the range is empty.
    LoopInit {
        slot: u16,
        start: i64,
        end: i64,
        exit: u32,
    },
    /// Advances the counter and jumps back to `body` while it is below `end`.
    LoopNext {
        slot: u16,
        step: i64,
        end: i64,
        body: u32,
    },
    /// Falls through when the condition holds, else jumps.
    Branch {
        lhs: SVal,
        op: CmpOp,
        rhs: SVal,
        otherwise: u32,
    },
    Jump(u32),
}

/// A buffer or parameter after placement.
#[derive(Clone, Debug)]
pub(crate) struct BufInfo {
    pub name: String,
    pub mem: Mem,
    /// Byte address inside the memory (for GM: inside the GM image of this run).
    pub base: u64,
    pub size: u64,
    /// For a GM tensor, its element size and its bytes before the padding to whole blocks
    /// (what byte-granular copies may touch); 1 and `size` for on-chip buffers.
    pub elem: u64,
    pub exact: u64,
    pub span: Span,
}

/// An assembled program, ready to simulate.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub(crate) program: Program,
    pub(crate) machine: Machine,
    pub(crate) bufs: Vec<BufInfo>,
    pub(crate) code: Vec<Op>,
    pub(crate) sites: Vec<Site>,
    pub(crate) slots: usize,
    pub(crate) gm_size: u64,
    pub(crate) file: Arc<str>,
    pub(crate) text: Arc<str>,
}

impl Kernel {
    pub fn program(&self) -> &Program {
        &self.program
    }

    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// Byte address each buffer was placed at, by name.
    pub fn placement(&self) -> Vec<(String, Mem, u64, u64)> {
        self.bufs
            .iter()
            .map(|b| (b.name.clone(), b.mem, b.base, b.size))
            .collect()
    }
}

struct Asm<'a> {
    machine: &'a Machine,
    blockdim: u32,
    bufs: Vec<BufInfo>,
    code: Vec<Op>,
    sites: Vec<Site>,
    scopes: Vec<(String, u16)>,
    slots: usize,
    text: &'a str,
}

/// The largest GM image one simulation allocates.
const MAX_GM_IMAGE: u64 = 1 << 30;

pub(crate) fn assemble(
    program: &Program,
    machine: &Machine,
    file: Arc<str>,
    text: Arc<str>,
) -> Result<Kernel, Error> {
    let fail = |d: Diagnostic| Error::shared(&file, &text, d);
    let mut asm = Asm {
        machine,
        blockdim: program.blockdim,
        bufs: Vec::new(),
        code: Vec::new(),
        sites: Vec::new(),
        scopes: vec![("block_idx".to_string(), 0)],
        slots: 1,
        text: &text,
    };
    let mut gm_size = 0u64;
    let gm_align = machine.mem(Mem::Gm).align.max(512);
    for p in &program.params {
        asm.check_unique(&p.name, p.span).map_err(fail)?;
        // The runtime pads every GM tensor to whole 32-byte blocks, as DMA moves whole blocks.
        let bytes = p
            .shape
            .iter()
            .try_fold(p.dtype.size(), |acc, &d| acc.checked_mul(d))
            .filter(|&b| gm_size.saturating_add(b) <= MAX_GM_IMAGE)
            .ok_or_else(|| {
                fail(
                    Diagnostic::new(
                        p.span,
                        format!("tensor `{}` is too large to simulate", p.name),
                    )
                    .with_hint("not supported yet: more than 1 GiB of GM tensors in one run"),
                )
            })?;
        let size = bytes.div_ceil(32) * 32;
        asm.bufs.push(BufInfo {
            name: p.name.clone(),
            mem: Mem::Gm,
            base: gm_size,
            size,
            elem: p.dtype.size(),
            exact: bytes,
            span: p.span,
        });
        gm_size = (gm_size + size).div_ceil(gm_align) * gm_align;
    }
    asm.place_buffers(&program.buffers).map_err(fail)?;
    asm.block(&program.body).map_err(fail)?;
    Ok(Kernel {
        program: program.clone(),
        machine: machine.clone(),
        bufs: asm.bufs,
        code: asm.code,
        sites: asm.sites,
        slots: asm.slots,
        gm_size,
        file,
        text,
    })
}

impl Asm<'_> {
    fn check_unique(&self, name: &str, span: Span) -> Result<(), Diagnostic> {
        if let Some(prev) = self.bufs.iter().find(|b| b.name == name) {
            return Err(Diagnostic::new(span, format!("`{name}` is declared twice"))
                .with_secondary(prev.span, "first declared here")
                .with_hint("give each buffer and parameter its own name"));
        }
        if name == "block_idx" || crate::asm::parse_reg(name).is_some() {
            return Err(Diagnostic::new(
                span,
                format!("`{name}` is a reserved name"),
            ));
        }
        Ok(())
    }

    fn place_buffers(&mut self, decls: &[BufferDecl]) -> Result<(), Diagnostic> {
        let mut bases = vec![0u64; decls.len()];
        for mem in Mem::ALL {
            let spec = self.machine.mem(mem);
            let mut taken: Vec<(u64, u64)> = decls
                .iter()
                .filter(|d| d.mem == mem)
                .filter_map(|d| d.addr.map(|a| (a, a + d.size)))
                .collect();
            for (i, d) in decls.iter().enumerate().filter(|(_, d)| d.mem == mem) {
                let base = match d.addr {
                    Some(a) => {
                        if !a.is_multiple_of(spec.align) {
                            return Err(Diagnostic::new(
                                d.span,
                                format!(
                                    "buffer `{}` at byte {a} is not aligned to {} bytes, as {} requires",
                                    d.name,
                                    spec.align,
                                    mem.name()
                                ),
                            )
                            .with_hint(format!(
                                "use an address that is a multiple of {}",
                                spec.align
                            )));
                        }
                        a
                    }
                    None => {
                        // First fit after every buffer already placed, aligned.
                        let mut a = 0u64;
                        taken.sort_unstable();
                        for &(lo, hi) in &taken {
                            if a + d.size <= lo {
                                break;
                            }
                            if hi > a {
                                a = hi.div_ceil(spec.align) * spec.align;
                            }
                        }
                        taken.push((a, a + d.size));
                        a
                    }
                };
                if base + d.size > spec.capacity {
                    let in_mem = decls.iter().filter(|x| x.mem == mem);
                    let used: u64 = in_mem.clone().map(|x| x.size).sum();
                    return Err(Diagnostic::new(
                        d.span,
                        format!(
                            "buffer `{}` (bytes {}..{} of {}) overflows {}: capacity {} bytes",
                            d.name,
                            base,
                            base + d.size,
                            mem.name(),
                            mem.name(),
                            spec.capacity
                        ),
                    )
                    .with_label("does not fit")
                    .with_hint(format!(
                        "the {} buffers declared in {} take {used} bytes; use smaller tiles or fewer buffers",
                        in_mem.count(),
                        mem.name()
                    )));
                }
                bases[i] = base;
            }
        }
        for (d, base) in decls.iter().zip(bases) {
            self.check_unique(&d.name, d.span)?;
            self.bufs.push(BufInfo {
                name: d.name.clone(),
                mem: d.mem,
                base,
                size: d.size,
                elem: 1,
                exact: d.size,
                span: d.span,
            });
        }
        Ok(())
    }

    fn var(&self, name: &str, span: Span) -> Result<Var, Diagnostic> {
        if let Some((_, slot)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return Ok(Var::Slot(*slot));
        }
        match crate::asm::parse_reg(name) {
            Some(Reg::S(r)) => Ok(Var::SReg(r)),
            Some(Reg::F(_)) => Err(Diagnostic::new(
                span,
                format!("`{name}` is a float register; offsets use integers"),
            )
            .with_hint("use an integer register s0..s31")),
            None => Err(Diagnostic::new(span, format!("unknown variable `{name}`"))
                .with_hint("offsets may use loop counters, `block_idx` and s0..s31")),
        }
    }

    fn operand(&self, a: &Addr) -> Result<(Resolved, Mem), Diagnostic> {
        let Some(idx) = self.bufs.iter().position(|b| b.name == a.buffer) else {
            return Err(
                Diagnostic::new(a.span, format!("unknown buffer `{}`", a.buffer))
                    .with_hint("declare it with `buffer NAME : MEM, BYTES` or `param`"),
            );
        };
        let mut terms = Vec::new();
        for (v, k) in &a.offset.terms {
            terms.push((self.var(v, a.span)?, *k));
        }
        Ok((
            Resolved {
                buf: idx as u32,
                off: Lin {
                    c: a.offset.constant,
                    terms,
                },
            },
            self.bufs[idx].mem,
        ))
    }

    fn scalar(&self, s: &Scalar, span: Span) -> Result<SVal, Diagnostic> {
        Ok(match s {
            Scalar::Int(v) => SVal::Int(*v),
            Scalar::Float(v) => SVal::Float(*v as f32),
            Scalar::Reg(Reg::S(r)) => SVal::Var(Var::SReg(*r)),
            Scalar::Reg(Reg::F(r)) => SVal::FReg(*r),
            Scalar::Var(v) => SVal::Var(self.var(v, span)?),
        })
    }

    fn line(&self, span: Span) -> usize {
        crate::diagnostic::line_col(self.text, span.start as usize).0
    }

    fn block(&mut self, body: &[Stmt]) -> Result<(), Diagnostic> {
        for s in body {
            match s {
                Stmt::Instr { instr, span } => self.instr(instr, *span)?,
                Stmt::For {
                    var,
                    start,
                    end,
                    step,
                    body,
                    span,
                } => {
                    if self.scopes.iter().any(|(n, _)| n == var) {
                        return Err(Diagnostic::new(
                            *span,
                            format!("loop counter `{var}` shadows an enclosing one"),
                        )
                        .with_hint("use a fresh name"));
                    }
                    let slot = self.slots as u16;
                    self.slots += 1;
                    let init = self.code.len();
                    self.code.push(Op::Jump(0));
                    self.scopes.push((var.clone(), slot));
                    self.block(body)?;
                    self.scopes.pop();
                    self.code.push(Op::LoopNext {
                        slot,
                        step: *step,
                        end: *end,
                        body: init as u32 + 1,
                    });
                    self.code[init] = Op::LoopInit {
                        slot,
                        start: *start,
                        end: *end,
                        exit: self.code.len() as u32,
                    };
                }
                Stmt::While { cond, body, span } => {
                    let lhs = self.scalar(&cond.lhs, *span)?;
                    let rhs = self.scalar(&cond.rhs, *span)?;
                    let head = self.code.len();
                    self.code.push(Op::Jump(0));
                    self.block(body)?;
                    self.code.push(Op::Jump(head as u32));
                    self.code[head] = Op::Branch {
                        lhs,
                        op: cond.op,
                        rhs,
                        otherwise: self.code.len() as u32,
                    };
                }
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                    span,
                } => {
                    let lhs = self.scalar(&cond.lhs, *span)?;
                    let rhs = self.scalar(&cond.rhs, *span)?;
                    let at = self.code.len();
                    self.code.push(Op::Jump(0));
                    self.block(then)?;
                    let jump = self.code.len();
                    self.code.push(Op::Jump(0));
                    let else_pc = self.code.len() as u32;
                    self.block(otherwise)?;
                    self.code[jump] = Op::Jump(self.code.len() as u32);
                    self.code[at] = Op::Branch {
                        lhs,
                        op: cond.op,
                        rhs,
                        otherwise: else_pc,
                    };
                }
            }
        }
        Ok(())
    }

    fn instr(&mut self, instr: &Instr, span: Span) -> Result<(), Diagnostic> {
        let addrs = instr.addrs();
        let mut ops = Vec::new();
        let mut mems = Vec::new();
        for a in &addrs {
            let (o, m) = self.operand(a)?;
            ops.push(o);
            mems.push(m);
        }
        self.check_special(instr, &addrs, &mems, &ops, span)?;
        let rules = instr.operands().into_iter().filter_map(|o| match o {
            Operand::Addr { mems, what, .. } => Some((mems, what)),
            _ => None,
        });
        for (i, (allowed, what)) in rules.enumerate() {
            if !allowed.is_empty() && !allowed.contains(&mems[i]) {
                let names: Vec<&str> = allowed.iter().map(|m| m.name()).collect();
                return Err(Diagnostic::new(
                    addrs[i].span,
                    format!(
                        "{what} must be in {}, but `{}` is in {}",
                        names.join(" or "),
                        addrs[i].buffer,
                        mems[i].name()
                    ),
                )
                .with_hint("see ISA.md for where each instruction's operands live"));
            }
        }
        check_registers(instr, span)?;
        let mut scalars = Vec::new();
        for s in instr.scalars() {
            scalars.push(self.scalar(s, span)?);
        }
        let site = self.sites.len() as u32;
        self.sites.push(Site {
            span,
            line: self.line(span),
            text: crate::asm::print_instr(instr),
            scope: self.scopes[1..].to_vec(),
        });
        let spans = addrs.iter().map(|a| a.span).collect();
        self.code.push(Op::Exec(Box::new(Exec {
            instr: instr.clone(),
            ops,
            spans,
            scalars,
            pipe: instr.pipe(&mems),
            site,
        })));
        Ok(())
    }

    /// The rules of an instruction beyond the memories the table allows its operands, checked
    /// before those: copy paths, `copy_pad`'s strides, memories not supported yet, float-only
    /// operations and the cores `sync_all` needs.
    fn check_special(
        &self,
        instr: &Instr,
        addrs: &[&Addr],
        mems: &[Mem],
        ops: &[Resolved],
        span: Span,
    ) -> Result<(), Diagnostic> {
        match instr {
            Instr::Copy { .. }
                if CopyPath::between(mems[1], mems[0]).is_none_or(|p| {
                    matches!(p, CopyPath::L1L0a | CopyPath::L1L0b | CopyPath::L0cUb)
                }) =>
            {
                return Err(Diagnostic::new(
                    span,
                    format!(
                        "`copy` has no path from {} to {}",
                        mems[1].name(),
                        mems[0].name()
                    ),
                )
                .with_hint(
                    "copy paths: GM->L1, GM->UB, UB->GM, UB->L1, UB->UB; L1->L0A/L0B is `load2d`, L0C->UB is `copy_cc_to_ub`",
                ));
            }
            Instr::CopyPad { .. } => self.check_copy_pad(instr, addrs, mems, ops, span)?,
            Instr::Img2col { .. } if mems[0] == Mem::L0b => {
                return Err(Diagnostic::new(
                    addrs[0].span,
                    "`img2col` into L0B is not supported yet",
                )
                .with_hint("img2col builds the feature-map operand in L0A; load weights into L0B with `load2d`"));
            }
            Instr::Load3d { .. } if mems[0] == Mem::L0a => {
                return Err(Diagnostic::new(
                    addrs[0].span,
                    "`load3d` into L0A is not supported yet",
                )
                .with_hint("load3d builds the im2col operand in L0B (zN); use `img2col` for L0A"));
            }
            Instr::VUn { op, ty, .. }
                if !matches!(op, VUnOp::Abs | VUnOp::Relu) && *ty == DType::I32 =>
            {
                return Err(Diagnostic::new(
                    span,
                    format!("`{}` is defined for f16 and f32 only", instr.mnemonic()),
                )
                .with_hint("convert with `vconv` first"));
            }
            Instr::SyncAll if self.blockdim > self.machine.cores => {
                return Err(Diagnostic::new(
                    span,
                    format!(
                        "`sync_all` needs every block on a core of its own: blockdim={} but the machine has {} cores",
                        self.blockdim, self.machine.cores
                    ),
                )
                .with_hint("launch at most as many blocks as there are cores"));
            }
            _ => {}
        }
        Ok(())
    }

    /// `copy_pad`: its path, element-granular GM side, block-aligned on-chip side and bursts
    /// that do not overlap.
    fn check_copy_pad(
        &self,
        instr: &Instr,
        addrs: &[&Addr],
        mems: &[Mem],
        ops: &[Resolved],
        span: Span,
    ) -> Result<(), Diagnostic> {
        let Instr::CopyPad {
            n_burst,
            bytes,
            src_stride,
            dst_stride,
            len,
            ..
        } = instr
        else {
            return Ok(());
        };
        let load = match (mems[1], mems[0]) {
            (Mem::Gm, Mem::L1 | Mem::Ub) => true,
            (Mem::Ub, Mem::Gm) => false,
            (from, to) => {
                return Err(Diagnostic::new(
                    span,
                    format!(
                        "`copy_pad` has no path from {} to {}",
                        from.name(),
                        to.name()
                    ),
                )
                .with_hint("copy_pad paths: GM->L1, GM->UB, UB->GM"))
            }
        };
        let gm = if load { 1 } else { 0 };
        let elem = self.bufs[ops[gm].buf as usize].elem;
        let (gm_stride, chip_stride) = if load {
            (*src_stride, *dst_stride)
        } else {
            (*dst_stride, *src_stride)
        };
        if !(*bytes as u64).is_multiple_of(elem) || !(gm_stride as u64).is_multiple_of(elem) {
            return Err(Diagnostic::new(
                span,
                format!("`bytes` and the GM stride must be multiples of the {elem}-byte elements of `{}`", addrs[gm].buffer),
            )
            .with_hint("move whole elements"));
        }
        if !chip_stride.is_multiple_of(32) {
            return Err(Diagnostic::new(
                span,
                format!(
                    "the {} stride {chip_stride} is not a multiple of 32 bytes",
                    mems[1 - gm].name()
                ),
            )
            .with_hint("on-chip bursts start on 32-byte blocks"));
        }
        let fit = bytes.div_ceil(32);
        if !load && *len != fit {
            return Err(Diagnostic::new(
                span,
                "`len` is for loads: a store writes exactly `bytes` bytes per burst",
            )
            .with_hint("leave `len` out"));
        }
        let written = if load {
            *len as u64 * 32
        } else {
            *bytes as u64
        };
        if *n_burst > 1 && (*dst_stride as u64) < written {
            return Err(Diagnostic::new(
                span,
                format!("bursts writing {written} bytes every {dst_stride} bytes overlap"),
            )
            .with_hint("make `dst_stride` at least the bytes one burst writes"));
        }
        Ok(())
    }
}

/// Register kinds: a scalar load's register matches its element type, and integer registers
/// receive no floats.
fn check_registers(instr: &Instr, span: Span) -> Result<(), Diagnostic> {
    match instr {
        Instr::Ld { ty, dst, .. } => check_reg_kind(*ty, *dst, span),
        Instr::Mov { dst, src } => {
            if matches!(dst, Reg::S(_)) && matches!(src, Scalar::Float(_) | Scalar::Reg(Reg::F(_)))
            {
                return Err(
                    Diagnostic::new(span, "an integer register cannot hold a float")
                        .with_hint("move floats into f0..f31"),
                );
            }
            Ok(())
        }
        Instr::SBin { dst, a, b, .. } => {
            if matches!(dst, Reg::S(_))
                && [a, b]
                    .iter()
                    .any(|s| matches!(s, Scalar::Float(_) | Scalar::Reg(Reg::F(_))))
            {
                return Err(Diagnostic::new(
                    span,
                    "integer arithmetic cannot read a float operand",
                )
                .with_hint("write the result to a float register f0..f31"));
            }
            Ok(())
        }
        Instr::SetMaskCount { lanes } => {
            if matches!(lanes, Scalar::Float(_) | Scalar::Reg(Reg::F(_))) {
                return Err(Diagnostic::new(span, "a lane count cannot be a float")
                    .with_hint("count lanes in an integer register s0..s31"));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn check_reg_kind(ty: DType, r: Reg, span: Span) -> Result<(), Diagnostic> {
    let ok = matches!(
        (ty, r),
        (DType::I32, Reg::S(_)) | (DType::F16 | DType::F32, Reg::F(_))
    );
    if ok {
        Ok(())
    } else {
        Err(
            Diagnostic::new(span, "the register kind does not match the element type")
                .with_hint("i32 goes to s0..s31, f16 and f32 to f0..f31"),
        )
    }
}
