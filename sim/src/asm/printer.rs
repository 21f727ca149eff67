//! The `.npuasm` printer. Its output parses back to an equal `Program`; keyword arguments equal
//! to their defaults are left out, exactly as the parser fills them in.

use std::fmt::Write;

use crate::isa::*;

pub(crate) fn print_program(p: &Program) -> String {
    let mut out = String::new();
    let _ = write!(out, "kernel {}", p.name);
    if p.blockdim != 1 {
        let _ = write!(out, " blockdim={}", p.blockdim);
    }
    out.push('\n');
    for param in &p.params {
        let shape: Vec<String> = param.shape.iter().map(|d| d.to_string()).collect();
        let _ = writeln!(
            out,
            "param {} : {}[{}] {}",
            param.name,
            param.dtype.name(),
            shape.join(", "),
            param.role.name()
        );
    }
    for b in &p.buffers {
        let _ = write!(out, "buffer {} : {}, {}", b.name, b.mem.name(), b.size);
        if let Some(a) = b.addr {
            let _ = write!(out, " @ {a}");
        }
        out.push('\n');
    }
    out.push('\n');
    print_block(&mut out, &p.body, 0);
    out
}

fn print_block(out: &mut String, body: &[Stmt], depth: usize) {
    let pad = "    ".repeat(depth);
    for s in body {
        match s {
            Stmt::Instr { instr, .. } => {
                let _ = writeln!(out, "{pad}{}", print_instr(instr));
            }
            Stmt::For {
                var,
                start,
                end,
                step,
                body,
                ..
            } => {
                let _ = write!(out, "{pad}for {var} in {start}..{end}");
                if *step != 1 {
                    let _ = write!(out, " step {step}");
                }
                out.push_str(" {\n");
                print_block(out, body, depth + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            Stmt::While { cond, body, .. } => {
                let _ = writeln!(
                    out,
                    "{pad}while {} {} {} {{",
                    scalar(&cond.lhs),
                    cmp_symbol(cond.op),
                    scalar(&cond.rhs)
                );
                print_block(out, body, depth + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            Stmt::If {
                cond,
                then,
                otherwise,
                ..
            } => {
                let _ = writeln!(
                    out,
                    "{pad}if {} {} {} {{",
                    scalar(&cond.lhs),
                    cmp_symbol(cond.op),
                    scalar(&cond.rhs)
                );
                print_block(out, then, depth + 1);
                if otherwise.is_empty() {
                    let _ = writeln!(out, "{pad}}}");
                } else {
                    let _ = writeln!(out, "{pad}}} else {{");
                    print_block(out, otherwise, depth + 1);
                    let _ = writeln!(out, "{pad}}}");
                }
            }
        }
    }
}

pub(crate) fn cmp_symbol(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Eq => "==",
        CmpOp::Ne => "!=",
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
    }
}

pub(crate) fn affine(a: &Affine) -> String {
    let mut s = String::new();
    for (i, (v, c)) in a.terms.iter().enumerate() {
        let (neg, mag) = (*c < 0, c.unsigned_abs());
        if i == 0 {
            if neg {
                s.push('-');
            }
        } else {
            s.push_str(if neg { " - " } else { " + " });
        }
        if mag == 1 {
            s.push_str(v);
        } else {
            let _ = write!(s, "{v}*{mag}");
        }
    }
    if a.terms.is_empty() {
        let _ = write!(s, "{}", a.constant);
    } else if a.constant != 0 {
        let _ = write!(
            s,
            " {} {}",
            if a.constant < 0 { '-' } else { '+' },
            a.constant.unsigned_abs()
        );
    }
    s
}

pub(crate) fn addr(a: &Addr) -> String {
    format!("{}[{}]", a.buffer, affine(&a.offset))
}

fn reg(r: Reg) -> String {
    match r {
        Reg::S(n) => format!("s{n}"),
        Reg::F(n) => format!("f{n}"),
    }
}

fn scalar(s: &Scalar) -> String {
    match s {
        Scalar::Int(v) => v.to_string(),
        Scalar::Float(v) if v.is_infinite() => if *v < 0.0 { "-inf" } else { "inf" }.to_string(),
        // `{:?}` always prints a decimal point or exponent, so the value re-lexes as a float.
        Scalar::Float(v) => format!("{v:?}"),
        Scalar::Reg(r) => reg(*r),
        Scalar::Var(v) => v.clone(),
    }
}

fn tuple(v: &[u32]) -> String {
    let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    if parts.len() == 1 {
        parts[0].clone()
    } else {
        format!("({})", parts.join(", "))
    }
}

fn cfg(c: &VecCfg, default_rep: &[u32]) -> String {
    let mut s = String::new();
    if c.repeat != 1 {
        let _ = write!(s, ", repeat={}", c.repeat);
    }
    if c.blk.iter().any(|&b| b != 1) {
        let _ = write!(s, ", blk={}", tuple(&c.blk));
    }
    if c.rep != default_rep {
        let _ = write!(s, ", rep={}", tuple(&c.rep));
    }
    s
}

fn kw(s: &mut String, key: &str, v: u32, default: Option<u32>) {
    if default != Some(v) {
        let _ = write!(s, ", {key}={v}");
    }
}

/// `n_burst`, `len`, `src_gap`, `dst_gap` of a burst copy, defaults left out.
fn bursts(s: &mut String, [n_burst, len, src_gap, dst_gap]: [u32; 4]) {
    kw(s, "n_burst", n_burst, Some(1));
    kw(s, "len", len, None);
    kw(s, "src_gap", src_gap, Some(0));
    kw(s, "dst_gap", dst_gap, Some(0));
}

pub(crate) fn print_instr(i: &Instr) -> String {
    match i {
        Instr::Copy {
            dst,
            src,
            n_burst,
            len,
            src_gap,
            dst_gap,
        } => {
            let mut s = format!("copy {}, {}", addr(dst), addr(src));
            bursts(&mut s, [*n_burst, *len, *src_gap, *dst_gap]);
            s
        }
        Instr::CopyPad {
            dst,
            src,
            n_burst,
            bytes,
            src_stride,
            dst_stride,
            len,
        } => {
            let mut s = format!("copy_pad {}, {}", addr(dst), addr(src));
            kw(&mut s, "n_burst", *n_burst, Some(1));
            kw(&mut s, "bytes", *bytes, None);
            kw(&mut s, "src_stride", *src_stride, Some(0));
            kw(&mut s, "dst_stride", *dst_stride, Some(0));
            kw(&mut s, "len", *len, Some(bytes.div_ceil(32)));
            s
        }
        Instr::Img2col {
            dst,
            src,
            h,
            w,
            c1,
            kh,
            kw: kwidth,
            stride,
            pad,
            pos,
            m1,
        } => {
            let mut s = format!("img2col {}, {}", addr(dst), addr(src));
            kw(&mut s, "h", *h, None);
            kw(&mut s, "w", *w, None);
            kw(&mut s, "c1", *c1, Some(1));
            kw(&mut s, "kh", *kh, None);
            kw(&mut s, "kw", *kwidth, None);
            kw(&mut s, "stride", *stride, Some(1));
            kw(&mut s, "pad", *pad, Some(0));
            kw(&mut s, "pos", *pos, Some(0));
            kw(&mut s, "m1", *m1, None);
            s
        }
        Instr::CopyUbToCc {
            dst,
            src,
            n_burst,
            len,
            src_gap,
            dst_gap,
        } => {
            let mut s = format!("copy_ub_to_cc {}, {}", addr(dst), addr(src));
            bursts(&mut s, [*n_burst, *len, *src_gap, *dst_gap]);
            s
        }
        Instr::Load3d {
            dst,
            src,
            c,
            cs,
            w,
            kh,
            kw: kwidth,
            k,
            n,
            f32,
        } => {
            let mut s = format!("load3d {}, {}", addr(dst), addr(src));
            kw(&mut s, "c", *c, None);
            kw(&mut s, "cs", *cs, None);
            kw(&mut s, "w", *w, None);
            kw(&mut s, "kh", *kh, Some(1));
            kw(&mut s, "kw", *kwidth, Some(1));
            kw(&mut s, "k", *k, None);
            kw(&mut s, "n", *n, None);
            if *f32 {
                s.push_str(", f32");
            }
            s
        }
        Instr::Load2d {
            dst,
            src,
            repeat,
            src_stride,
            transpose,
            f32,
        } => {
            let mut s = format!("load2d {}, {}", addr(dst), addr(src));
            kw(&mut s, "repeat", *repeat, Some(1));
            kw(&mut s, "src_stride", *src_stride, Some(1));
            if *transpose {
                s.push_str(", transpose");
            }
            if *f32 {
                s.push_str(", f32");
            }
            s
        }
        Instr::Mmad {
            out,
            c,
            a,
            b,
            m,
            k,
            n,
            init,
            src_f32,
        } => format!(
            "mmad.{} {}, {}, {}, m={m}, k={k}, n={n}, {}{}",
            out.name(),
            addr(c),
            addr(a),
            addr(b),
            if *init { "init" } else { "acc" },
            if *src_f32 { ", src_f32" } else { "" }
        ),
        Instr::CopyCcToUb {
            dst,
            src,
            n_burst,
            len,
            src_gap,
            dst_gap,
            f16,
            relu,
            src_f16,
        } => {
            let mut s = format!("copy_cc_to_ub {}, {}", addr(dst), addr(src));
            bursts(&mut s, [*n_burst, *len, *src_gap, *dst_gap]);
            if *f16 {
                s.push_str(", f16");
            }
            if *relu {
                s.push_str(", relu");
            }
            if *src_f16 {
                s.push_str(", src_f16");
            }
            s
        }
        Instr::VBin {
            op,
            ty,
            dst,
            src0,
            src1,
            cfg: c,
        } => format!(
            "{}.{} {}, {}, {}{}",
            name_of(&VBIN_NAMES, *op),
            ty.name(),
            addr(dst),
            addr(src0),
            addr(src1),
            cfg(c, &[8, 8, 8])
        ),
        Instr::VScalar {
            op,
            ty,
            dst,
            src,
            scalar: sc,
            cfg: c,
        } => format!(
            "{}.{} {}, {}, {}{}",
            name_of(&VSCALAR_NAMES, *op),
            ty.name(),
            addr(dst),
            addr(src),
            scalar(sc),
            cfg(c, &[8, 8])
        ),
        Instr::VUn {
            op,
            ty,
            dst,
            src,
            cfg: c,
        } => format!(
            "{}.{} {}, {}{}",
            name_of(&VUN_NAMES, *op),
            ty.name(),
            addr(dst),
            addr(src),
            cfg(c, &[8, 8])
        ),
        Instr::VDup {
            ty,
            dst,
            scalar: sc,
            cfg: c,
        } => format!(
            "vdup.{} {}, {}{}",
            ty.name(),
            addr(dst),
            scalar(sc),
            cfg(c, &[8])
        ),
        Instr::VCmp {
            op,
            ty,
            dst,
            src0,
            src1,
            cfg: c,
        } => format!(
            "vcmp.{}.{} {}, {}, {}{}",
            name_of(&CMP_NAMES, *op),
            ty.name(),
            addr(dst),
            addr(src0),
            addr(src1),
            cfg(c, &[8, 8])
        ),
        Instr::VSel {
            ty,
            dst,
            src0,
            src1,
            mask,
            cfg: c,
        } => format!(
            "vsel.{} {}, {}, {}, {}{}",
            ty.name(),
            addr(dst),
            addr(src0),
            addr(src1),
            addr(mask),
            cfg(c, &[8, 8, 8])
        ),
        Instr::VRed {
            op,
            ty,
            dst,
            src,
            cfg: c,
            acc,
        } => format!(
            "{}.{} {}, {}{}{}",
            name_of(&VRED_NAMES, *op),
            ty.name(),
            addr(dst),
            addr(src),
            cfg(c, &[1, 8]),
            if *acc { ", acc" } else { "" }
        ),
        Instr::VBrcb {
            ty,
            dst,
            src,
            cfg: c,
        } => format!(
            "vbrcb.{} {}, {}{}",
            ty.name(),
            addr(dst),
            addr(src),
            cfg(c, &[8])
        ),
        Instr::VConv {
            from,
            to,
            dst,
            src,
            cfg: c,
        } => {
            let lanes = 256 / from.size().max(to.size());
            let blk = |t: DType| (lanes * t.size() / 32) as u32;
            format!(
                "vconv.{}.{} {}, {}{}",
                from.name(),
                to.name(),
                addr(dst),
                addr(src),
                cfg(c, &[blk(*to), blk(*from)])
            )
        }
        Instr::SetMask { hi, lo } => format!("set_vector_mask {hi:#x}, {lo:#x}"),
        Instr::SetFlag { src, dst, event } => {
            format!("set_flag {}, {}, {event}", src.name(), dst.name())
        }
        Instr::WaitFlag { src, dst, event } => {
            format!("wait_flag {}, {}, {event}", src.name(), dst.name())
        }
        Instr::SyncAll => "sync_all".to_string(),
        Instr::Barrier { pipe } => {
            format!("pipe_barrier {}", pipe.map_or("ALL", |p| p.name()))
        }
        Instr::Mov { dst, src } => format!("mov {}, {}", reg(*dst), scalar(src)),
        Instr::SBin { op, dst, a, b } => format!(
            "{} {}, {}, {}",
            name_of(&SOP_NAMES, *op),
            reg(*dst),
            scalar(a),
            scalar(b)
        ),
        Instr::Ld { ty, dst, src } => format!("ld.{} {}, {}", ty.name(), reg(*dst), addr(src)),
        Instr::St { ty, dst, src } => {
            format!("st.{} {}, {}", ty.name(), addr(dst), scalar(src))
        }
        Instr::Count { dst, src, bits } => {
            format!("count {}, {}, bits={bits}", reg(*dst), addr(src))
        }
    }
}
