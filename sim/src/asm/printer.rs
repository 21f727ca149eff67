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

pub(crate) fn print_instr(i: &Instr) -> String {
    let mut head = i.mnemonic().to_string();
    let mut positional = Vec::new();
    let mut keywords = String::new();
    for op in i.operands() {
        match op {
            Operand::Mnemonic => {}
            Operand::Suffix(s) => {
                head.push('.');
                head.push_str(s);
            }
            Operand::Addr { addr: a, .. } => positional.push(addr(a)),
            Operand::Scalar(s) => positional.push(scalar(s)),
            Operand::Reg(r) => positional.push(reg(r)),
            Operand::Pipe(p) => positional.push(p.name().to_string()),
            Operand::PipeOrAll(p) => positional.push(p.map_or("ALL", |p| p.name()).to_string()),
            Operand::Event(e) => positional.push(e.to_string()),
            Operand::Word(w) => positional.push(format!("{w:#x}")),
            Operand::Keyword {
                key,
                value,
                default,
            } => {
                if default != Some(value) {
                    let _ = write!(keywords, ", {key}={value}");
                }
            }
            Operand::Flag { key, set } => {
                if set {
                    let _ = write!(keywords, ", {key}");
                }
            }
            Operand::Cfg { cfg: c, rep } => keywords.push_str(&cfg(c, &rep)),
        }
    }
    if !positional.is_empty() {
        head.push(' ');
        head.push_str(&positional.join(", "));
    }
    head + &keywords
}
