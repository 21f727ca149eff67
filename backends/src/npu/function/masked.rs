//! The masked form of a vectorised statement body, with the functions it calls inlined, as
//! Vector instructions over one tile of lanes in UB.
//!
//! Every value of type f16, f32 or i32 is a buffer of one element per lane (an f16 repeat covers
//! 128 lanes, so f16 instructions run half the repeats); every `bool` value and
//! every mask is a buffer of one bit per lane, as `vcmp` writes it and `vsel` reads it. Mask
//! logic works on the bits as i32 words (`vand`, `vor`, and `!m` as `-1 - m` with `vsub`), over
//! whole 256-byte chunks; the bits past the tile's lanes are never read. Instructions run on
//! every lane whatever the masks ([`polyhedral::vectorize::mask`]): a select keeps each lane's
//! value, and the lanes outside the entry mask (padding between rows, rows past the end) are
//! never active, so no loop waits for them.
//!
//! Control flow that stays: a region with a branch on superword condition becomes
//! `count` of its mask on S and an `if` around it; a divergent loop becomes a `while` whose
//! test is the `count` of its active mask, taken after the header at every iteration. A branch
//! or a loop on a uniform condition is lowered as a masked one (its condition is then the same
//! in every lane, so the masks are all or nothing), which keeps every value on the Vector unit.
//! Constants are filled once, before the tiles ([`Lowering::setup`]).
//!
//! f16 values stay in f16 lanes: the Vector unit computes + − × ÷ in f32 and rounds to f16, and
//! f32's 24 bits are at least 2·11 + 2, so that double rounding is the correctly rounded result
//! the interpreter computes; its f16 `exp`, `ln`, `sqrt`, `rsqrt` are f64 rounded once, as the
//! interpreter's.

use std::collections::HashMap;

use polyhedral::program::{BinaryOp, MathFn, ScalarType, UnaryOp};
use polyhedral::vectorize::mask::{MNode, MaskDef, Region};
use polyhedral::vectorize::ssa::{Join, Op, ValueId};
use polyhedral::vectorize::{VectorFunction, VectorProgram};

use crate::npu::epilogue::format_float;
use crate::npu::Error;

/// A UB buffer of the tile (index into [`Lowering::kinds`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Buf(pub usize);

/// Element type of a lane buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Ty {
    F16,
    F32,
    I32,
}

impl Ty {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Ty::F16 => "f16",
            Ty::F32 => "f32",
            Ty::I32 => "i32",
        }
    }

    /// Bytes of one element.
    pub(crate) fn bytes(self) -> u64 {
        match self {
            Ty::F16 => 2,
            Ty::F32 | Ty::I32 => 4,
        }
    }

    /// `v` rounded to this type, as the interpreter rounds it.
    pub(crate) fn round(self, v: f64) -> f64 {
        match self {
            Ty::F16 => polyhedral::interp::round(ScalarType::F16, v),
            Ty::F32 => v as f32 as f64,
            Ty::I32 => v as i64 as i32 as f64,
        }
    }

    /// A constant as an operand of an instruction of this type.
    pub(crate) fn literal(self, v: f64) -> String {
        match self {
            Ty::F16 | Ty::F32 => format_float(v),
            Ty::I32 => format!("{}", v as i64),
        }
    }

    pub(crate) fn of(t: ScalarType) -> Option<Ty> {
        match t {
            ScalarType::F16 => Some(Ty::F16),
            ScalarType::F32 => Some(Ty::F32),
            ScalarType::I32 => Some(Ty::I32),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One element per lane.
    Lanes(Ty),
    /// One bit per lane.
    Mask,
}

/// One instruction (or a structured block of them) over every lane of the tile.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Line {
    /// `vOP.T dst, a, b` (`vadd` … `vmin`, `vor` for copies).
    Bin {
        op: &'static str,
        ty: Ty,
        dst: Buf,
        a: Buf,
        b: Buf,
    },
    /// `vcmp.CMP.T dst, a, b`: mask `dst`.
    Cmp {
        cmp: &'static str,
        ty: Ty,
        dst: Buf,
        a: Buf,
        b: Buf,
    },
    /// `vadds`, `vmuls`, `vmaxs` with a constant.
    Scalar {
        op: &'static str,
        ty: Ty,
        dst: Buf,
        src: Buf,
        value: f64,
    },
    /// `vexp`, `vln`, `vsqrt`, `vrsqrt`, `vabs`.
    Unary {
        op: &'static str,
        ty: Ty,
        dst: Buf,
        src: Buf,
    },
    Dup {
        ty: Ty,
        dst: Buf,
        value: f64,
    },
    /// `dst` ← `a` where `mask` is set, else `b`.
    Select {
        ty: Ty,
        dst: Buf,
        a: Buf,
        b: Buf,
        mask: Buf,
    },
    /// `vconv.FROM.TO`: i32 → f16 / f32, f16 ↔ f32.
    Conv {
        from: Ty,
        to: Ty,
        dst: Buf,
        src: Buf,
    },
    /// Bitwise `vand` / `vor` / `vsub` over whole mask buffers, as i32 words.
    MaskOp {
        op: &'static str,
        dst: Buf,
        a: Buf,
        b: Buf,
    },
    /// Every bit of a mask buffer 0 (`0`) or 1 (`-1`).
    MaskDup {
        dst: Buf,
        value: i64,
    },
    /// Branch on superword condition: `body` runs only when some lane of `mask` is set.
    IfAny {
        mask: Buf,
        reg: usize,
        body: Vec<Line>,
    },
    /// `head`, then `body; head` for as long as some lane of `mask` is set after `head`.
    WhileAny {
        mask: Buf,
        reg: usize,
        head: Vec<Line>,
        body: Vec<Line>,
    },
}

/// The first scalar register the mask tests count into (one per nesting level).
pub(crate) const FIRST_TEST_REG: usize = 8;
/// The last one.
const LAST_TEST_REG: usize = 31;

/// The buffers, constants and code of a statement body lowered to the Vector unit.
pub(crate) struct Lowering<'a> {
    vp: &'a VectorProgram,
    pub kinds: Vec<Kind>,
    consts: HashMap<(Option<Ty>, u64), Buf>,
    /// Instructions run once before the tiles (the constants).
    pub setup: Vec<Line>,
    /// Mask tests nested in each other at the current point.
    depth: usize,
}

/// One inlined variant: where each of its values and masks lives.
struct Instance<'v> {
    f: &'v VectorFunction,
    values: Vec<Option<Buf>>,
    masks: Vec<Option<Buf>>,
}

impl Instance<'_> {
    fn get(&self, v: ValueId) -> Result<Buf, Error> {
        self.values[v.index()].ok_or_else(|| {
            Error::NotYet(format!(
                "`{}`: value %{} used before the Vector unit computes it",
                self.f.ssa.name, v.0
            ))
        })
    }

    fn ty(&self, v: ValueId) -> ScalarType {
        self.f.ssa.value(v).ty
    }
}

/// The leaves of a variant: a function's parameters, a statement's reads.
pub(crate) type Leaf<'l> = dyn Fn(&Op) -> Result<Buf, Error> + 'l;

fn kind_of(t: ScalarType) -> Result<Kind, Error> {
    match t {
        ScalarType::Bool => Ok(Kind::Mask),
        t => Ty::of(t).map(Kind::Lanes).ok_or_else(|| {
            Error::NotYet(format!(
                "{t} values in a vectorised function on the Vector unit"
            ))
        }),
    }
}

fn lanes(k: Kind) -> Result<Ty, Error> {
    match k {
        Kind::Lanes(t) => Ok(t),
        Kind::Mask => Err(Error::NotYet(
            "arithmetic on bool values on the Vector unit".into(),
        )),
    }
}

impl<'a> Lowering<'a> {
    pub(crate) fn new(vp: &'a VectorProgram) -> Lowering<'a> {
        Lowering {
            vp,
            kinds: Vec::new(),
            consts: HashMap::new(),
            setup: Vec::new(),
            depth: 0,
        }
    }

    pub(crate) fn alloc(&mut self, k: Kind) -> Buf {
        self.kinds.push(k);
        Buf(self.kinds.len() - 1)
    }

    /// A buffer holding `value` in every lane, filled before the tiles.
    pub(crate) fn constant(&mut self, ty: Ty, value: f64) -> Buf {
        let value = ty.round(value);
        let key = (Some(ty), value.to_bits());
        if let Some(b) = self.consts.get(&key) {
            return *b;
        }
        let dst = self.alloc(Kind::Lanes(ty));
        self.setup.push(Line::Dup { ty, dst, value });
        self.consts.insert(key, dst);
        dst
    }

    /// A mask buffer with every bit `on`.
    fn mask_constant(&mut self, on: bool) -> Buf {
        let key = (None, on as u64);
        if let Some(b) = self.consts.get(&key) {
            return *b;
        }
        let dst = self.alloc(Kind::Mask);
        self.setup.push(Line::MaskDup {
            dst,
            value: -(on as i64),
        });
        self.consts.insert(key, dst);
        dst
    }

    fn test_reg(&self) -> Result<usize, Error> {
        let reg = FIRST_TEST_REG + self.depth;
        if reg > LAST_TEST_REG {
            return Err(Error::NotYet(
                "branches and loops nested this deep on the Vector unit".into(),
            ));
        }
        Ok(reg)
    }

    /// Lowers variant `variant` run under the lanes of mask `entry`, appending its code to
    /// `out`; returns the buffer of its result.
    pub(crate) fn variant(
        &mut self,
        variant: usize,
        entry: Buf,
        leaf: &Leaf,
        out: &mut Vec<Line>,
    ) -> Result<Buf, Error> {
        let vp = self.vp;
        let f = &vp.variants[variant];
        let mut inst = Instance {
            f,
            values: vec![None; f.ssa.values.len()],
            masks: vec![None; f.masked.masks.len()],
        };
        inst.masks[f.masked.entry().index()] = Some(entry);
        self.nodes(&mut inst, &f.masked.body, entry, leaf, out)?;
        inst.get(f.ssa.result())
    }

    fn nodes(
        &mut self,
        inst: &mut Instance,
        nodes: &[MNode],
        mask: Buf,
        leaf: &Leaf,
        out: &mut Vec<Line>,
    ) -> Result<(), Error> {
        for n in nodes {
            self.node(inst, n, mask, leaf, out)?;
        }
        Ok(())
    }

    fn node(
        &mut self,
        inst: &mut Instance,
        node: &MNode,
        mask: Buf,
        leaf: &Leaf,
        out: &mut Vec<Line>,
    ) -> Result<(), Error> {
        match node {
            MNode::Def(v) => self.def(inst, *v, mask, leaf, out),
            MNode::Return(_) => Ok(()),
            MNode::UniformIf {
                cond,
                then,
                otherwise,
                joins,
            } => {
                let (tm, em) = self.split(inst, mask, *cond, out)?;
                self.nodes(inst, then, tm, leaf, out)?;
                self.nodes(inst, otherwise, em, leaf, out)?;
                self.joins(inst, joins, tm, out)
            }
            MNode::MaskedIf {
                cond,
                then_mask,
                else_mask,
                then,
                otherwise,
                joins,
            } => {
                let (tm, em) = self.split(inst, mask, *cond, out)?;
                inst.masks[then_mask.index()] = Some(tm);
                inst.masks[else_mask.index()] = Some(em);
                self.region(inst, then, tm, leaf, out)?;
                self.region(inst, otherwise, em, leaf, out)?;
                self.joins(inst, joins, tm, out)
            }
            MNode::UniformLoop {
                phis,
                header,
                cond,
                body,
            } => self.masked_loop(inst, None, mask, (phis, header, *cond, body), leaf, out),
            MNode::MaskedLoop {
                active,
                phis,
                header,
                cond,
                body,
            } => {
                let outer = match inst.f.masked.masks[active.index()] {
                    MaskDef::Loop(o) => inst.masks[o.index()].unwrap_or(mask),
                    _ => mask,
                };
                self.masked_loop(
                    inst,
                    Some(active.index()),
                    outer,
                    (phis, header, *cond, body),
                    leaf,
                    out,
                )
            }
        }
    }

    /// The masks `mask & cond` and `mask & !cond`.
    fn split(
        &mut self,
        inst: &Instance,
        mask: Buf,
        cond: ValueId,
        out: &mut Vec<Line>,
    ) -> Result<(Buf, Buf), Error> {
        let c = inst.get(cond)?;
        let tm = self.alloc(Kind::Mask);
        out.push(Line::MaskOp {
            op: "vand",
            dst: tm,
            a: mask,
            b: c,
        });
        let not = self.not(c, out);
        let em = self.alloc(Kind::Mask);
        out.push(Line::MaskOp {
            op: "vand",
            dst: em,
            a: mask,
            b: not,
        });
        Ok((tm, em))
    }

    fn not(&mut self, m: Buf, out: &mut Vec<Line>) -> Buf {
        let ones = self.mask_constant(true);
        let dst = self.alloc(Kind::Mask);
        out.push(Line::MaskOp {
            op: "vsub",
            dst,
            a: ones,
            b: m,
        });
        dst
    }

    /// `dst` ← `a` where `mask`, else `b`, for values of kind `k`.
    fn select(&mut self, k: Kind, dst: Buf, mask: Buf, a: Buf, b: Buf, out: &mut Vec<Line>) {
        match k {
            Kind::Lanes(ty) => out.push(Line::Select {
                ty,
                dst,
                a,
                b,
                mask,
            }),
            Kind::Mask => {
                let t = self.alloc(Kind::Mask);
                out.push(Line::MaskOp {
                    op: "vand",
                    dst: t,
                    a: mask,
                    b: a,
                });
                let not = self.not(mask, out);
                let e = self.alloc(Kind::Mask);
                out.push(Line::MaskOp {
                    op: "vand",
                    dst: e,
                    a: not,
                    b,
                });
                out.push(Line::MaskOp {
                    op: "vor",
                    dst,
                    a: t,
                    b: e,
                });
            }
        }
    }

    /// `src`'s lanes converted from `from` to `to`, in a new buffer.
    fn conv(&mut self, from: Ty, to: Ty, src: Buf, out: &mut Vec<Line>) -> Buf {
        let dst = self.alloc(Kind::Lanes(to));
        out.push(Line::Conv { from, to, dst, src });
        dst
    }

    /// The mask of the lanes where `a cmp b` holds, for lanes of type `ty`.
    fn compare(&mut self, cmp: &'static str, ty: Ty, a: Buf, b: Buf, out: &mut Vec<Line>) -> Buf {
        let dst = self.alloc(Kind::Mask);
        out.push(Line::Cmp { cmp, ty, dst, a, b });
        dst
    }

    fn copy(&mut self, k: Kind, dst: Buf, src: Buf, out: &mut Vec<Line>) {
        out.push(match k {
            Kind::Lanes(ty) => Line::Bin {
                op: "vor",
                ty,
                dst,
                a: src,
                b: src,
            },
            Kind::Mask => Line::MaskOp {
                op: "vor",
                dst,
                a: src,
                b: src,
            },
        });
    }

    fn joins(
        &mut self,
        inst: &mut Instance,
        joins: &[Join],
        then_mask: Buf,
        out: &mut Vec<Line>,
    ) -> Result<(), Error> {
        for j in joins {
            let k = kind_of(inst.ty(j.phi))?;
            let (a, b) = (inst.get(j.inputs[0])?, inst.get(j.inputs[1])?);
            let dst = self.alloc(k);
            self.select(k, dst, then_mask, a, b, out);
            inst.values[j.phi.index()] = Some(dst);
        }
        Ok(())
    }

    fn region(
        &mut self,
        inst: &mut Instance,
        region: &Region,
        mask: Buf,
        leaf: &Leaf,
        out: &mut Vec<Line>,
    ) -> Result<(), Error> {
        if !region.boscc {
            return self.nodes(inst, &region.nodes, mask, leaf, out);
        }
        let reg = self.test_reg()?;
        self.depth += 1;
        let mut body = Vec::new();
        let r = self.nodes(inst, &region.nodes, mask, leaf, &mut body);
        self.depth -= 1;
        r?;
        out.push(Line::IfAny { mask, reg, body });
        Ok(())
    }

    /// A loop run until no lane of its active mask (`outer` on entry, `& cond` after every
    /// header) is left; each phi keeps its value in the lanes that have left.
    fn masked_loop(
        &mut self,
        inst: &mut Instance,
        active_id: Option<usize>,
        outer: Buf,
        (phis, header, cond, body): (&[Join], &[MNode], ValueId, &[MNode]),
        leaf: &Leaf,
        out: &mut Vec<Line>,
    ) -> Result<(), Error> {
        let active = self.alloc(Kind::Mask);
        if let Some(id) = active_id {
            inst.masks[id] = Some(active);
        }
        self.copy(Kind::Mask, active, outer, out);
        let mut bufs = Vec::new();
        for j in phis {
            let k = kind_of(inst.ty(j.phi))?;
            let b = self.alloc(k);
            self.copy(k, b, inst.get(j.inputs[0])?, out);
            inst.values[j.phi.index()] = Some(b);
            bufs.push((k, b));
        }
        let reg = self.test_reg()?;
        self.depth += 1;
        let lowered = (|| {
            let mut head = Vec::new();
            self.nodes(inst, header, active, leaf, &mut head)?;
            head.push(Line::MaskOp {
                op: "vand",
                dst: active,
                a: active,
                b: inst.get(cond)?,
            });
            let mut lines = Vec::new();
            self.nodes(inst, body, active, leaf, &mut lines)?;
            // Every phi's next value from the latch values of this iteration, before any phi
            // changes (a latch value may be another phi).
            let latches: Vec<Buf> = phis
                .iter()
                .map(|j| inst.get(j.inputs[1]))
                .collect::<Result<_, _>>()?;
            let through_phi = latches.iter().any(|l| bufs.iter().any(|(_, b)| b == l));
            let mut pending = Vec::new();
            for ((k, phi), latch) in bufs.iter().zip(&latches) {
                if through_phi {
                    let t = self.alloc(*k);
                    self.select(*k, t, active, *latch, *phi, &mut lines);
                    pending.push((*k, *phi, t));
                } else {
                    self.select(*k, *phi, active, *latch, *phi, &mut lines);
                }
            }
            for (k, phi, t) in pending {
                self.copy(k, phi, t, &mut lines);
            }
            Ok::<_, Error>((head, lines))
        })();
        self.depth -= 1;
        let (head, body) = lowered?;
        out.push(Line::WhileAny {
            mask: active,
            reg,
            head,
            body,
        });
        Ok(())
    }

    fn def(
        &mut self,
        inst: &mut Instance,
        v: ValueId,
        mask: Buf,
        leaf: &Leaf,
        out: &mut Vec<Line>,
    ) -> Result<(), Error> {
        let f = inst.f;
        let value = f.ssa.value(v);
        let kind = kind_of(value.ty)?;
        let buf = match &value.op {
            Op::Param(_) | Op::Read(_) | Op::Iter(_) => leaf(&value.op)?,
            Op::Size(p) => self.constant(lanes(kind)?, self.vp.size(*p) as f64),
            Op::Const(l) => match kind {
                Kind::Lanes(ty) => self.constant(ty, l.value),
                Kind::Mask => self.mask_constant(l.value != 0.0),
            },
            Op::Phi(..) => {
                return Err(Error::NotYet(format!(
                    "`{}`: a phi among definitions",
                    f.ssa.name
                )))
            }
            Op::Call(_, args) => {
                let variant = f.calls[&v];
                let args: Vec<Buf> = args
                    .iter()
                    .map(|a| inst.get(*a))
                    .collect::<Result<_, _>>()?;
                let leaf = move |op: &Op| match op {
                    Op::Param(k) => Ok(args[*k]),
                    _ => Err(Error::NotYet(
                        "a function leaf other than a parameter".into(),
                    )),
                };
                self.variant(variant, mask, &leaf, out)?
            }
            Op::Unary(UnaryOp::Neg, a) => {
                let ty = lanes(kind)?;
                let dst = self.alloc(kind);
                out.push(Line::Scalar {
                    op: "vmuls",
                    ty,
                    dst,
                    src: inst.get(*a)?,
                    value: -1.0,
                });
                dst
            }
            Op::Unary(UnaryOp::Not, a) => {
                let a = inst.get(*a)?;
                self.not(a, out)
            }
            Op::Binary(op, a, b) => self.binary(inst, *op, kind, *a, *b, out)?,
            Op::Select(c, t, e) => {
                let (c, t, e) = (inst.get(*c)?, inst.get(*t)?, inst.get(*e)?);
                let dst = self.alloc(kind);
                self.select(kind, dst, c, t, e, out);
                dst
            }
            Op::Math(m, args) => self.math(inst, *m, kind, args, out)?,
            Op::Cast(to, a) => {
                let from = inst.ty(*a);
                let src = inst.get(*a)?;
                match (from, *to) {
                    (x, y) if x == y => src,
                    // Exact (f16 → f32) or rounded once to nearest even, as the interpreter
                    // rounds the value to the target type.
                    (
                        ScalarType::I32 | ScalarType::F16 | ScalarType::F32,
                        ScalarType::F16 | ScalarType::F32,
                    ) => {
                        let (from, to) = (lanes(kind_of(from)?)?, lanes(kind)?);
                        self.conv(from, to, src, out)
                    }
                    (x, y) => {
                        return Err(Error::NotYet(format!(
                            "the conversion of {x} to {y} on the Vector unit"
                        )))
                    }
                }
            }
        };
        inst.values[v.index()] = Some(buf);
        Ok(())
    }

    fn binary(
        &mut self,
        inst: &Instance,
        op: BinaryOp,
        kind: Kind,
        a: ValueId,
        b: ValueId,
        out: &mut Vec<Line>,
    ) -> Result<Buf, Error> {
        let (x, y) = (inst.get(a)?, inst.get(b)?);
        let operand = kind_of(inst.ty(a))?;
        let cmp = match op {
            BinaryOp::Lt => Some("lt"),
            BinaryOp::Le => Some("le"),
            BinaryOp::Gt => Some("gt"),
            BinaryOp::Ge => Some("ge"),
            BinaryOp::Eq => Some("eq"),
            BinaryOp::Ne => Some("ne"),
            _ => None,
        };
        if let Some(cmp) = cmp {
            return Ok(self.compare(cmp, lanes(operand)?, x, y, out));
        }
        if matches!(op, BinaryOp::And | BinaryOp::Or) {
            let dst = self.alloc(Kind::Mask);
            out.push(Line::MaskOp {
                op: if op == BinaryOp::And { "vand" } else { "vor" },
                dst,
                a: x,
                b: y,
            });
            return Ok(dst);
        }
        let ty = lanes(kind)?;
        let konst = |v: ValueId| match &inst.f.ssa.value(v).op {
            Op::Const(l) => Some(l.value),
            _ => None,
        };
        // A constant operand of an operation with a scalar form: no buffer, same rounding
        // (`a - c` is `a + (-c)` exactly, in f32 and in wrapping i32).
        let with_scalar = match (op, konst(a), konst(b)) {
            (BinaryOp::Add, _, Some(c)) => Some(("vadds", x, c)),
            (BinaryOp::Add, Some(c), _) => Some(("vadds", y, c)),
            (BinaryOp::Mul, _, Some(c)) => Some(("vmuls", x, c)),
            (BinaryOp::Mul, Some(c), _) => Some(("vmuls", y, c)),
            (BinaryOp::Max, _, Some(c)) => Some(("vmaxs", x, c)),
            (BinaryOp::Max, Some(c), _) => Some(("vmaxs", y, c)),
            (BinaryOp::Sub, _, Some(c)) => Some((
                "vadds",
                x,
                match ty {
                    Ty::F16 | Ty::F32 => -ty.round(c),
                    Ty::I32 => (c as i64 as i32).wrapping_neg() as f64,
                },
            )),
            _ => None,
        };
        let dst = self.alloc(kind);
        if let Some((op, src, value)) = with_scalar {
            out.push(Line::Scalar {
                op,
                ty,
                dst,
                src,
                value,
            });
            return Ok(dst);
        }
        let name = match op {
            BinaryOp::Add => "vadd",
            BinaryOp::Sub => "vsub",
            BinaryOp::Mul => "vmul",
            BinaryOp::Div => "vdiv",
            BinaryOp::Min => "vmin",
            BinaryOp::Max => "vmax",
            BinaryOp::Rem if ty == Ty::I32 => {
                // a - (a / b)·b with truncating division: the remainder of C and Rust.
                let q = self.alloc(kind);
                out.push(Line::Bin {
                    op: "vdiv",
                    ty,
                    dst: q,
                    a: x,
                    b: y,
                });
                let p = self.alloc(kind);
                out.push(Line::Bin {
                    op: "vmul",
                    ty,
                    dst: p,
                    a: q,
                    b: y,
                });
                out.push(Line::Bin {
                    op: "vsub",
                    ty,
                    dst,
                    a: x,
                    b: p,
                });
                return Ok(dst);
            }
            _ => {
                return Err(Error::NotYet(format!(
                    "the {ty:?} operation {op:?} on the Vector unit"
                )))
            }
        };
        out.push(Line::Bin {
            op: name,
            ty,
            dst,
            a: x,
            b: y,
        });
        Ok(dst)
    }

    fn math(
        &mut self,
        inst: &Instance,
        m: MathFn,
        kind: Kind,
        args: &[ValueId],
        out: &mut Vec<Line>,
    ) -> Result<Buf, Error> {
        let ty = lanes(kind)?;
        let src = inst.get(args[0])?;
        if kind_of(inst.ty(args[0]))? != kind {
            return Err(Error::NotYet(format!(
                "`{}` of mixed types on the Vector unit",
                MathFn::name(m)
            )));
        }
        let unary = match (m, ty) {
            // f16: computed in f64 and rounded once, as the interpreter computes them.
            (MathFn::Sqrt, Ty::F32 | Ty::F16) => "vsqrt",
            (MathFn::Rsqrt, Ty::F32 | Ty::F16) => "vrsqrt",
            (MathFn::Exp, Ty::F32 | Ty::F16) => "vexp",
            (MathFn::Log, Ty::F32 | Ty::F16) => "vln",
            (MathFn::Abs, _) => "vabs",
            (MathFn::Tanh, Ty::F32) => return Ok(self.tanh(src, out)),
            (MathFn::Tanh, Ty::F16) => return Ok(self.tanh_f16(src, out)),
            _ => {
                return Err(Error::NotYet(format!(
                    "`{}` on the Vector unit",
                    MathFn::name(m)
                )))
            }
        };
        let dst = self.alloc(kind);
        out.push(Line::Unary {
            op: unary,
            ty,
            dst,
            src,
        });
        Ok(dst)
    }

    /// `tanh` of f16 lanes, computed in f32 and rounded to f16 once: below |u| = 0.5 its Taylor
    /// polynomial to u^13 (the `exp` formula cancels there), from 0.5 on the `exp` formula.
    /// Run on every one of the 65536 f16 values as the Vector unit computes them, both give
    /// the interpreter's f16 `tanh` (f64, rounded once) bit for bit, the polynomial up to
    /// |u| = 0.625 and the formula from 0.4; a test checks all of them on the simulator.
    fn tanh_f16(&mut self, u: Buf, out: &mut Vec<Line>) -> Buf {
        let f = Kind::Lanes(Ty::F32);
        let x = self.conv(Ty::F16, Ty::F32, u, out);
        let bin = |this: &mut Self, out: &mut Vec<Line>, op: &'static str, a: Buf, b: Buf| {
            let dst = this.alloc(f);
            out.push(Line::Bin {
                op,
                ty: Ty::F32,
                dst,
                a,
                b,
            });
            dst
        };
        let s = bin(self, out, "vmul", x, x);
        let mut acc = self.constant(Ty::F32, TANH_SERIES[TANH_SERIES.len() - 1]);
        for c in TANH_SERIES[..TANH_SERIES.len() - 1].iter().rev() {
            let p = bin(self, out, "vmul", acc, s);
            acc = self.alloc(f);
            out.push(Line::Scalar {
                op: "vadds",
                ty: Ty::F32,
                dst: acc,
                src: p,
                value: Ty::F32.round(*c),
            });
        }
        let t = bin(self, out, "vmul", s, acc);
        let t = bin(self, out, "vmul", x, t);
        let poly = bin(self, out, "vadd", x, t);
        let formula = self.tanh(x, out);
        let a = self.alloc(f);
        out.push(Line::Unary {
            op: "vabs",
            ty: Ty::F32,
            dst: a,
            src: x,
        });
        let half = self.constant(Ty::F32, 0.5);
        let near = self.compare("lt", Ty::F32, a, half, out);
        let r = self.alloc(f);
        self.select(f, r, near, poly, formula, out);
        let rounded = self.conv(Ty::F32, Ty::F16, r, out);
        // ±0 keeps its sign (the polynomial gives +0 for -0).
        let zero = self.constant(Ty::F32, 0.0);
        let at_zero = self.compare("eq", Ty::F32, x, zero, out);
        let dst = self.alloc(Kind::Lanes(Ty::F16));
        self.select(Kind::Lanes(Ty::F16), dst, at_zero, u, rounded, out);
        dst
    }

    /// `tanh u = 1 - 2 / (exp(2u) + 1)`: ±1 where `exp` overflows or vanishes, within a few
    /// f32 roundings of 1 (well inside the f32 tolerance) elsewhere.
    fn tanh(&mut self, u: Buf, out: &mut Vec<Line>) -> Buf {
        let k = Kind::Lanes(Ty::F32);
        let two = self.constant(Ty::F32, 2.0);
        let mut step = |this: &mut Self, line: &dyn Fn(Buf) -> Line| {
            let dst = this.alloc(k);
            out.push(line(dst));
            dst
        };
        let scalar = |op: &'static str, src: Buf, value: f64| {
            move |dst| Line::Scalar {
                op,
                ty: Ty::F32,
                dst,
                src,
                value,
            }
        };
        let u2 = step(self, &scalar("vmuls", u, 2.0));
        let e = step(self, &|dst| Line::Unary {
            op: "vexp",
            ty: Ty::F32,
            dst,
            src: u2,
        });
        let e1 = step(self, &scalar("vadds", e, 1.0));
        let q = step(self, &|dst| Line::Bin {
            op: "vdiv",
            ty: Ty::F32,
            dst,
            a: two,
            b: e1,
        });
        let nq = step(self, &scalar("vmuls", q, -1.0));
        step(self, &scalar("vadds", nq, 1.0))
    }
}

/// The coefficients of u^3, u^5, … u^13 in the Taylor series of `tanh u` at 0 (after u).
pub(crate) const TANH_SERIES: [f64; 6] = [
    -1.0 / 3.0,
    2.0 / 15.0,
    -17.0 / 315.0,
    62.0 / 2835.0,
    -1382.0 / 155925.0,
    21844.0 / 6081075.0,
];

/// The sizes the instructions of a tile use.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    /// Repeats of a lane instruction (64 lanes each).
    pub repeats: u64,
    /// Repeats of a mask instruction (2048 bits each).
    pub mask_repeats: u64,
}

impl Geometry {
    pub(crate) fn lanes(self) -> u64 {
        self.repeats * 64
    }
}

/// Writes `lines` as `.npuasm` at indentation `indent`; `name` names a buffer; `event` is the
/// V → S flag event the mask tests use.
pub(crate) fn emit(
    lines: &[Line],
    geo: Geometry,
    name: &dyn Fn(Buf) -> String,
    indent: usize,
    out: &mut Vec<String>,
) {
    let pad = "    ".repeat(indent);
    let r = geo.repeats;
    let mr = geo.mask_repeats;
    // Repeats of an instruction on `ty`: an f16 repeat holds 128 lanes.
    let rt = |ty: &Ty| match ty {
        Ty::F16 => r.div_ceil(2),
        Ty::F32 | Ty::I32 => r,
    };
    let count = |mask: Buf, reg: usize, out: &mut Vec<String>| {
        out.push(format!("{pad}set_flag V, S, {TEST_EVENT}"));
        out.push(format!("{pad}wait_flag V, S, {TEST_EVENT}"));
        out.push(format!(
            "{pad}count s{reg}, {}[0], bits={}",
            name(mask),
            geo.lanes()
        ));
    };
    for l in lines {
        match l {
            Line::Bin { op, ty, dst, a, b } => out.push(format!(
                "{pad}{op}.{} {}[0], {}[0], {}[0], repeat={}",
                ty.name(),
                name(*dst),
                name(*a),
                name(*b),
                rt(ty)
            )),
            Line::Cmp { cmp, ty, dst, a, b } => out.push(format!(
                "{pad}vcmp.{cmp}.{} {}[0], {}[0], {}[0], repeat={}",
                ty.name(),
                name(*dst),
                name(*a),
                name(*b),
                rt(ty)
            )),
            Line::Scalar {
                op,
                ty,
                dst,
                src,
                value,
            } => out.push(format!(
                "{pad}{op}.{} {}[0], {}[0], {}, repeat={}",
                ty.name(),
                name(*dst),
                name(*src),
                ty.literal(*value),
                rt(ty)
            )),
            Line::Unary { op, ty, dst, src } => out.push(format!(
                "{pad}{op}.{} {}[0], {}[0], repeat={}",
                ty.name(),
                name(*dst),
                name(*src),
                rt(ty)
            )),
            Line::Dup { ty, dst, value } => out.push(format!(
                "{pad}vdup.{} {}[0], {}, repeat={}",
                ty.name(),
                name(*dst),
                ty.literal(*value),
                rt(ty)
            )),
            Line::Select {
                ty,
                dst,
                a,
                b,
                mask,
            } => out.push(format!(
                "{pad}vsel.{} {}[0], {}[0], {}[0], {}[0], repeat={}",
                ty.name(),
                name(*dst),
                name(*a),
                name(*b),
                name(*mask),
                rt(ty)
            )),
            // A conversion's repeat holds the lanes of its wider type, 64 here.
            Line::Conv { from, to, dst, src } => out.push(format!(
                "{pad}vconv.{}.{} {}[0], {}[0], repeat={r}",
                from.name(),
                to.name(),
                name(*dst),
                name(*src)
            )),
            Line::MaskOp { op, dst, a, b } => out.push(format!(
                "{pad}{op}.i32 {}[0], {}[0], {}[0], repeat={mr}",
                name(*dst),
                name(*a),
                name(*b)
            )),
            Line::MaskDup { dst, value } => out.push(format!(
                "{pad}vdup.i32 {}[0], {value}, repeat={mr}",
                name(*dst)
            )),
            Line::IfAny { mask, reg, body } => {
                count(*mask, *reg, out);
                out.push(format!("{pad}if s{reg} != 0 {{"));
                emit(body, geo, name, indent + 1, out);
                out.push(format!("{pad}}}"));
            }
            Line::WhileAny {
                mask,
                reg,
                head,
                body,
            } => {
                emit(head, geo, name, indent, out);
                count(*mask, *reg, out);
                out.push(format!("{pad}while s{reg} != 0 {{"));
                emit(body, geo, name, indent + 1, out);
                emit(head, geo, name, indent + 1, out);
                let inner = "    ".repeat(indent + 1);
                out.push(format!("{inner}set_flag V, S, {TEST_EVENT}"));
                out.push(format!("{inner}wait_flag V, S, {TEST_EVENT}"));
                out.push(format!(
                    "{inner}count s{reg}, {}[0], bits={}",
                    name(*mask),
                    geo.lanes()
                ));
                out.push(format!("{pad}}}"));
            }
        }
    }
}

/// The flag event of V → S before a mask test.
pub(crate) const TEST_EVENT: u32 = 4;
