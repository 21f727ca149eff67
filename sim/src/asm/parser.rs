//! The `.npuasm` parser: header lines (`kernel`, `param`, `buffer`), then instructions and
//! structured `for` / `if` blocks, one statement per line.
//!
//! Every error carries the span of the offending token and a hint. The parser checks syntax and
//! operand shapes only; names and sizes are checked by the assembler.

use crate::asm::lexer::{lex, Tok};
use crate::diagnostic::{Diagnostic, Span};
use crate::isa::*;

type PResult<T> = Result<T, Diagnostic>;

pub(crate) fn parse_program(text: &str) -> PResult<Program> {
    let toks = lex(text)?;
    let mut p = Parser { toks, pos: 0 };
    p.program()
}

struct Parser {
    toks: Vec<(Tok, Span)>,
    pos: usize,
}

/// Keyword arguments after the positional operands: `key=value`, `key=(a, b)` or a bare flag.
enum KwValue {
    Int(i64),
    Tuple(Vec<i64>),
    Flag,
}

struct Kwargs {
    items: Vec<(String, KwValue, Span)>,
}

impl Kwargs {
    fn take(&mut self, key: &str) -> Option<(KwValue, Span)> {
        let i = self.items.iter().position(|(k, _, _)| k == key)?;
        let (_, v, s) = self.items.remove(i);
        Some((v, s))
    }

    fn int(&mut self, key: &str, default: Option<i64>, max: i64) -> PResult<i64> {
        match self.take(key) {
            Some((KwValue::Int(v), span)) => {
                if v < 0 || v > max {
                    return Err(
                        Diagnostic::new(span, format!("`{key}` must be in 0..={max}"))
                            .with_hint("see ISA.md for the operand ranges"),
                    );
                }
                Ok(v)
            }
            Some((_, span)) => Err(Diagnostic::new(span, format!("`{key}` takes a number"))
                .with_hint(format!("write `{key}=N`"))),
            None => default.ok_or_else(|| {
                Diagnostic::new(Span::default(), format!("missing `{key}=`"))
                    .with_hint("every required keyword argument must be given")
            }),
        }
    }

    fn flag(&mut self, key: &str) -> PResult<bool> {
        match self.take(key) {
            Some((KwValue::Flag, _)) => Ok(true),
            Some((_, span)) => Err(Diagnostic::new(span, format!("`{key}` is a bare flag"))
                .with_hint(format!("write `{key}` alone"))),
            None => Ok(false),
        }
    }

    fn tuple(&mut self, key: &str, default: Vec<u32>) -> PResult<Vec<u32>> {
        let n = default.len();
        match self.take(key) {
            Some((KwValue::Tuple(v), span)) => {
                if v.len() != n {
                    return Err(Diagnostic::new(
                        span,
                        format!("`{key}` needs {n} values, one per vector operand"),
                    )
                    .with_hint("order: destination first, then the sources"));
                }
                v.iter()
                    .map(|&x| {
                        u32::try_from(x)
                            .ok()
                            .filter(|&x| x <= 65535)
                            .ok_or_else(|| {
                                Diagnostic::new(
                                    span,
                                    format!("`{key}` values must be in 0..=65535"),
                                )
                            })
                    })
                    .collect()
            }
            Some((KwValue::Int(x), span)) if n == 1 => {
                if !(0..=65535).contains(&x) {
                    return Err(Diagnostic::new(
                        span,
                        format!("`{key}` must be in 0..=65535"),
                    ));
                }
                Ok(vec![x as u32])
            }
            Some((_, span)) => Err(Diagnostic::new(span, format!("`{key}` takes a tuple"))
                .with_hint(format!("write `{key}=(…)` with {n} values"))),
            None => Ok(default),
        }
    }

    /// `n_burst`, `len`, `src_gap`, `dst_gap` of a burst copy.
    fn bursts(&mut self) -> PResult<(u32, u32, u32, u32)> {
        Ok((
            self.int("n_burst", Some(1), 4095)? as u32,
            self.int("len", None, 65535)? as u32,
            self.int("src_gap", Some(0), 65535)? as u32,
            self.int("dst_gap", Some(0), 65535)? as u32,
        ))
    }

    fn finish(self, mnemonic: &str) -> PResult<()> {
        if let Some((k, _, span)) = self.items.into_iter().next() {
            return Err(
                Diagnostic::new(span, format!("`{mnemonic}` has no argument `{k}`"))
                    .with_hint("see ISA.md for this instruction's arguments"),
            );
        }
        Ok(())
    }
}

fn missing_fix(mut d: Diagnostic, span: Span) -> Diagnostic {
    if d.span.start == 0 && d.span.end == 0 {
        d.span = span;
    }
    d
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }

    fn span(&self) -> Span {
        self.toks[self.pos].1
    }

    fn bump(&mut self) -> (Tok, Span) {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == t {
            self.bump();
            true
        } else {
            false
        }
    }

    fn unexpected(&self, what: &str) -> Diagnostic {
        Diagnostic::new(
            self.span(),
            format!("expected {what}, found {}", self.peek().describe()),
        )
    }

    fn expect(&mut self, t: Tok, hint: &str) -> PResult<Span> {
        if self.peek() == &t {
            Ok(self.bump().1)
        } else {
            Err(self.unexpected(&t.describe()).with_hint(hint))
        }
    }

    fn ident(&mut self, what: &str) -> PResult<(String, Span)> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                let span = self.bump().1;
                Ok((s, span))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    fn int(&mut self, what: &str) -> PResult<(i64, Span)> {
        let neg = self.eat(&Tok::Minus);
        match self.peek().clone() {
            Tok::Int(v) => {
                let span = self.bump().1;
                Ok((if neg { -v } else { v }, span))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    fn skip_newlines(&mut self) {
        while self.eat(&Tok::Newline) {}
    }

    fn end_of_line(&mut self) -> PResult<()> {
        match self.peek() {
            Tok::Newline => {
                self.bump();
                Ok(())
            }
            Tok::Eof | Tok::RBrace => Ok(()),
            _ => Err(self
                .unexpected("end of line")
                .with_hint("one statement per line")),
        }
    }

    fn program(&mut self) -> PResult<Program> {
        self.skip_newlines();
        let (kw, span) = self.ident("`kernel NAME`")?;
        if kw != "kernel" {
            return Err(Diagnostic::new(span, "a program starts with `kernel NAME`")
                .with_hint("e.g. `kernel vadd blockdim=1`"));
        }
        let (name, _) = self.ident("the kernel name")?;
        let mut blockdim = 1;
        if let Tok::Ident(s) = self.peek() {
            if s == "blockdim" {
                self.bump();
                self.expect(Tok::Eq, "write `blockdim=N`")?;
                let (v, span) = self.int("the block dimension")?;
                if !(1..=65535).contains(&v) {
                    return Err(Diagnostic::new(span, "blockdim must be in 1..=65535"));
                }
                blockdim = v as u32;
            }
        }
        self.end_of_line()?;
        let mut params = Vec::new();
        let mut buffers = Vec::new();
        loop {
            self.skip_newlines();
            match self.peek() {
                Tok::Ident(s) if s == "param" => params.push(self.param()?),
                Tok::Ident(s) if s == "buffer" => buffers.push(self.buffer()?),
                _ => break,
            }
        }
        let body = self.block_body(true)?;
        Ok(Program {
            name,
            blockdim,
            params,
            buffers,
            body,
        })
    }

    fn param(&mut self) -> PResult<Param> {
        let start = self.bump().1;
        let (name, _) = self.ident("the parameter name")?;
        self.expect(Tok::Colon, "write `param NAME : f16[N, M] in`")?;
        let (ty, ty_span) = self.ident("an element type")?;
        let dtype = DType::from_name(&ty).ok_or_else(|| {
            Diagnostic::new(ty_span, format!("unknown element type `{ty}`"))
                .with_hint("types are f16, f32 and i32")
        })?;
        self.expect(Tok::LBracket, "the shape follows the type: `f16[64, 64]`")?;
        let mut shape = Vec::new();
        loop {
            let (d, span) = self.int("a dimension")?;
            if d <= 0 {
                return Err(Diagnostic::new(span, "dimensions must be positive"));
            }
            shape.push(d as u64);
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect(Tok::RBracket, "close the shape with `]`")?;
        let (role, role_span) = self.ident("`in`, `out` or `inout`")?;
        let role = match role.as_str() {
            "in" => Role::In,
            "out" => Role::Out,
            "inout" => Role::InOut,
            _ => {
                return Err(Diagnostic::new(role_span, format!("unknown role `{role}`"))
                    .with_hint("a parameter is `in`, `out` or `inout`"))
            }
        };
        let span = Span::new(start.start as usize, role_span.end as usize);
        self.end_of_line()?;
        Ok(Param {
            name,
            dtype,
            shape,
            role,
            span,
        })
    }

    fn buffer(&mut self) -> PResult<BufferDecl> {
        let start = self.bump().1;
        let (name, _) = self.ident("the buffer name")?;
        self.expect(Tok::Colon, "write `buffer NAME : UB, BYTES`")?;
        let (mem, mem_span) = self.ident("a memory")?;
        let mem = Mem::from_name(&mem)
            .filter(|m| *m != Mem::Gm)
            .ok_or_else(|| {
                Diagnostic::new(mem_span, format!("`{mem}` is not an on-chip memory"))
                    .with_hint("buffers live in L1, L0A, L0B, L0C or UB; GM tensors are `param`s")
            })?;
        self.expect(Tok::Comma, "the size follows the memory: `UB, 4096`")?;
        let (size, size_span) = self.int("the size in bytes")?;
        if size <= 0 {
            return Err(Diagnostic::new(
                size_span,
                "a buffer's size must be positive",
            ));
        }
        let mut end = size_span.end;
        let mut addr = None;
        if self.eat(&Tok::At) {
            let (a, span) = self.int("the byte address")?;
            if a < 0 {
                return Err(Diagnostic::new(span, "addresses are non-negative"));
            }
            addr = Some(a as u64);
            end = span.end;
        }
        self.end_of_line()?;
        Ok(BufferDecl {
            name,
            mem,
            size: size as u64,
            addr,
            span: Span::new(start.start as usize, end as usize),
        })
    }

    /// Statements up to `}` (or end of file at top level).
    fn block_body(&mut self, top: bool) -> PResult<Vec<Stmt>> {
        let mut out = Vec::new();
        loop {
            self.skip_newlines();
            match self.peek() {
                Tok::Eof if top => return Ok(out),
                Tok::Eof => {
                    return Err(self
                        .unexpected("`}`")
                        .with_hint("a `{` block was not closed"))
                }
                Tok::RBrace if !top => return Ok(out),
                Tok::RBrace => {
                    return Err(Diagnostic::new(self.span(), "unmatched `}`")
                        .with_hint("remove it or open a block before"))
                }
                Tok::Ident(s) if s == "param" || s == "buffer" || s == "kernel" => {
                    return Err(Diagnostic::new(
                        self.span(),
                        format!("`{s}` declarations come before the first instruction"),
                    )
                    .with_hint("move the declaration up to the header"))
                }
                _ => out.push(self.stmt()?),
            }
        }
    }

    /// `A CMP B` of an `if` or a `while`.
    fn cond(&mut self) -> PResult<Cond> {
        let lhs = self.scalar()?;
        let op = match self.bump() {
            (Tok::EqEq, _) => CmpOp::Eq,
            (Tok::Ne, _) => CmpOp::Ne,
            (Tok::Lt, _) => CmpOp::Lt,
            (Tok::Le, _) => CmpOp::Le,
            (Tok::Gt, _) => CmpOp::Gt,
            (Tok::Ge, _) => CmpOp::Ge,
            (t, span) => {
                return Err(Diagnostic::new(
                    span,
                    format!("expected a comparison, found {}", t.describe()),
                )
                .with_hint("one of == != < <= > >="))
            }
        };
        let rhs = self.scalar()?;
        Ok(Cond { lhs, op, rhs })
    }

    fn braced(&mut self) -> PResult<Vec<Stmt>> {
        self.expect(Tok::LBrace, "a block starts with `{` on the same line")?;
        let body = self.block_body(false)?;
        self.expect(Tok::RBrace, "close the block with `}`")?;
        Ok(body)
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        let start = self.span();
        let (word, _) = self.ident("an instruction")?;
        if word == "for" {
            let (var, var_span) = self.ident("the loop counter")?;
            if parse_reg(&var).is_some() || var == "block_idx" {
                return Err(Diagnostic::new(var_span, format!("`{var}` is reserved"))
                    .with_hint("name loop counters like `i`, `k0`"));
            }
            match self.ident("`in`")? {
                (s, _) if s == "in" => {}
                (_, span) => {
                    return Err(
                        Diagnostic::new(span, "expected `in`").with_hint("for i in 0..N { … }")
                    )
                }
            }
            let (lo, _) = self.int("the start")?;
            self.expect(Tok::DotDot, "ranges are `START..END`")?;
            let (hi, hi_span) = self.int("the end")?;
            let mut step = 1;
            let mut head_end = hi_span.end;
            if let Tok::Ident(s) = self.peek() {
                if s == "step" {
                    self.bump();
                    let (st, span) = self.int("the step")?;
                    if st <= 0 {
                        return Err(Diagnostic::new(span, "the step must be positive"));
                    }
                    step = st;
                    head_end = span.end;
                }
            }
            let span = Span::new(start.start as usize, head_end as usize);
            let body = self.braced()?;
            self.end_of_line()?;
            return Ok(Stmt::For {
                var,
                start: lo,
                end: hi,
                step,
                body,
                span,
            });
        }
        if word == "while" {
            let cond = self.cond()?;
            let span = Span::new(start.start as usize, self.toks[self.pos - 1].1.end as usize);
            let body = self.braced()?;
            self.end_of_line()?;
            return Ok(Stmt::While { cond, body, span });
        }
        if word == "if" {
            let cond = self.cond()?;
            let span = Span::new(start.start as usize, self.toks[self.pos - 1].1.end as usize);
            let then = self.braced()?;
            let mut otherwise = Vec::new();
            if let Tok::Ident(s) = self.peek() {
                if s == "else" {
                    self.bump();
                    otherwise = self.braced()?;
                }
            }
            self.end_of_line()?;
            return Ok(Stmt::If {
                cond,
                then,
                otherwise,
                span,
            });
        }
        let mut parts = vec![word];
        while self.eat(&Tok::Dot) {
            parts.push(self.ident("a suffix")?.0);
        }
        let instr = self.instr(&parts, start)?;
        let span = Span::new(start.start as usize, self.toks[self.pos - 1].1.end as usize);
        self.end_of_line()?;
        Ok(Stmt::Instr {
            instr: Box::new(instr),
            span,
        })
    }

    fn dtype_suffix(&self, parts: &[String], idx: usize, span: Span) -> PResult<DType> {
        let s = parts.get(idx).ok_or_else(|| {
            Diagnostic::new(span, format!("`{}` needs a type suffix", parts.join(".")))
                .with_hint("e.g. `.f16` or `.f32`")
        })?;
        DType::from_name(s).ok_or_else(|| {
            Diagnostic::new(span, format!("unknown element type `{s}`"))
                .with_hint("types are f16, f32 and i32")
        })
    }

    fn addr(&mut self) -> PResult<Addr> {
        let (buffer, start) = self.ident("an operand `buffer[offset]`")?;
        self.expect(Tok::LBracket, "operands are `buffer[byte offset]`")?;
        let offset = self.affine()?;
        let end = self.expect(Tok::RBracket, "close the offset with `]`")?;
        Ok(Addr {
            buffer,
            offset,
            span: Span::new(start.start as usize, end.end as usize),
        })
    }

    fn affine(&mut self) -> PResult<Affine> {
        let mut a = Affine::default();
        let mut sign = if self.eat(&Tok::Minus) { -1 } else { 1 };
        loop {
            let (coef, var) = match self.peek().clone() {
                Tok::Int(v) => {
                    self.bump();
                    if self.eat(&Tok::Star) {
                        (v, Some(self.ident("a variable")?.0))
                    } else {
                        (v, None)
                    }
                }
                Tok::Ident(s) => {
                    self.bump();
                    if self.eat(&Tok::Star) {
                        (self.int("a coefficient")?.0, Some(s))
                    } else {
                        (1, Some(s))
                    }
                }
                _ => {
                    return Err(self
                        .unexpected("a number or a variable")
                        .with_hint("offsets are affine: `64 + i*2048 + s1`"))
                }
            };
            let coef = coef
                .checked_mul(sign)
                .ok_or_else(|| Diagnostic::new(self.span(), "coefficient out of range"))?;
            match var {
                None => a.constant = a.constant.wrapping_add(coef),
                Some(v) => {
                    if let Some(t) = a.terms.iter_mut().find(|(n, _)| *n == v) {
                        t.1 = t.1.wrapping_add(coef);
                    } else {
                        a.terms.push((v, coef));
                    }
                }
            }
            sign = match self.peek() {
                Tok::Plus => 1,
                Tok::Minus => -1,
                _ => break,
            };
            self.bump();
        }
        a.terms.retain(|(_, c)| *c != 0);
        Ok(a)
    }

    fn scalar(&mut self) -> PResult<Scalar> {
        let neg = self.eat(&Tok::Minus);
        let (tok, span) = self.bump();
        let s = match tok {
            Tok::Int(v) => Scalar::Int(if neg { -v } else { v }),
            Tok::Float(v) => Scalar::Float(if neg { -v } else { v }),
            Tok::Ident(name) if name == "inf" => Scalar::Float(if neg {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }),
            Tok::Ident(name) if !neg => match parse_reg(&name) {
                Some(r) => Scalar::Reg(r),
                None => Scalar::Var(name),
            },
            t => {
                return Err(Diagnostic::new(
                    span,
                    format!("expected a scalar, found {}", t.describe()),
                )
                .with_hint("a number, a register (s0, f1) or a loop counter"))
            }
        };
        Ok(s)
    }

    fn reg(&mut self) -> PResult<Reg> {
        let (name, span) = self.ident("a register")?;
        parse_reg(&name).ok_or_else(|| {
            Diagnostic::new(span, format!("`{name}` is not a register"))
                .with_hint("registers are s0..s31 (integer) and f0..f31 (float)")
        })
    }

    fn comma(&mut self) -> PResult<()> {
        self.expect(Tok::Comma, "operands are separated by commas")
            .map(|_| ())
    }

    /// `DST, SRC` and the keyword arguments after them.
    fn dst_src_kwargs(&mut self) -> PResult<(Addr, Addr, Kwargs)> {
        let dst = self.addr()?;
        self.comma()?;
        let src = self.addr()?;
        Ok((dst, src, self.kwargs()?))
    }

    fn kwargs(&mut self) -> PResult<Kwargs> {
        let mut items = Vec::new();
        while self.eat(&Tok::Comma) {
            let (key, span) = self.ident("a keyword argument")?;
            if self.eat(&Tok::Eq) {
                if self.eat(&Tok::LParen) {
                    let mut vals = Vec::new();
                    loop {
                        vals.push(self.int("a number")?.0);
                        if !self.eat(&Tok::Comma) {
                            break;
                        }
                    }
                    let end = self.expect(Tok::RParen, "close the tuple with `)`")?;
                    items.push((
                        key,
                        KwValue::Tuple(vals),
                        Span::new(span.start as usize, end.end as usize),
                    ));
                } else {
                    let (v, vs) = self.int("a number")?;
                    items.push((
                        key,
                        KwValue::Int(v),
                        Span::new(span.start as usize, vs.end as usize),
                    ));
                }
            } else {
                items.push((key, KwValue::Flag, span));
            }
        }
        Ok(Kwargs { items })
    }

    fn vec_cfg(&mut self, kw: &mut Kwargs, blocks: &[u32]) -> PResult<VecCfg> {
        let repeat = kw.int("repeat", Some(1), 255)? as u32;
        if repeat == 0 {
            return Err(
                Diagnostic::new(Span::default(), "`repeat` must be in 1..=255")
                    .with_hint("a vector instruction runs at least one repeat"),
            );
        }
        let blk = kw.tuple("blk", vec![1; blocks.len()])?;
        let rep = kw.tuple("rep", blocks.to_vec())?;
        Ok(VecCfg { repeat, blk, rep })
    }

    fn instr(&mut self, parts: &[String], start: Span) -> PResult<Instr> {
        let head = parts[0].as_str();
        let full = parts.join(".");
        let fix = |d: Diagnostic| missing_fix(d, start);
        if let Some(op) = op_of(&VBIN_NAMES, head) {
            let ty = self.dtype_suffix(parts, 1, start)?;
            let dst = self.addr()?;
            self.comma()?;
            let src0 = self.addr()?;
            self.comma()?;
            let src1 = self.addr()?;
            let mut kw = self.kwargs()?;
            let cfg = self.vec_cfg(&mut kw, &[8, 8, 8]).map_err(fix)?;
            kw.finish(&full)?;
            return Ok(Instr::VBin {
                op,
                ty,
                dst,
                src0,
                src1,
                cfg,
            });
        }
        if let Some(op) = op_of(&VSCALAR_NAMES, head) {
            let ty = self.dtype_suffix(parts, 1, start)?;
            let dst = self.addr()?;
            self.comma()?;
            let src = self.addr()?;
            self.comma()?;
            let scalar = self.scalar()?;
            let mut kw = self.kwargs()?;
            let cfg = self.vec_cfg(&mut kw, &[8, 8]).map_err(fix)?;
            kw.finish(&full)?;
            return Ok(Instr::VScalar {
                op,
                ty,
                dst,
                src,
                scalar,
                cfg,
            });
        }
        if let Some(op) = op_of(&VUN_NAMES, head) {
            let ty = self.dtype_suffix(parts, 1, start)?;
            let dst = self.addr()?;
            self.comma()?;
            let src = self.addr()?;
            let mut kw = self.kwargs()?;
            let cfg = self.vec_cfg(&mut kw, &[8, 8]).map_err(fix)?;
            kw.finish(&full)?;
            return Ok(Instr::VUn {
                op,
                ty,
                dst,
                src,
                cfg,
            });
        }
        if let Some(op) = op_of(&VRED_NAMES, head) {
            let ty = self.dtype_suffix(parts, 1, start)?;
            let dst = self.addr()?;
            self.comma()?;
            let src = self.addr()?;
            let mut kw = self.kwargs()?;
            // The destination's repeat stride counts elements: one result per repeat.
            let cfg = self.vec_cfg(&mut kw, &[1, 8]).map_err(fix)?;
            let acc = kw.flag("acc")?;
            kw.finish(&full)?;
            return Ok(Instr::VRed {
                op,
                ty,
                dst,
                src,
                cfg,
                acc,
            });
        }
        match head {
            "vdup" => {
                let ty = self.dtype_suffix(parts, 1, start)?;
                let dst = self.addr()?;
                self.comma()?;
                let scalar = self.scalar()?;
                let mut kw = self.kwargs()?;
                let cfg = self.vec_cfg(&mut kw, &[8]).map_err(fix)?;
                kw.finish(&full)?;
                Ok(Instr::VDup {
                    ty,
                    dst,
                    scalar,
                    cfg,
                })
            }
            "vbrcb" => {
                let ty = self.dtype_suffix(parts, 1, start)?;
                let dst = self.addr()?;
                self.comma()?;
                let src = self.addr()?;
                let mut kw = self.kwargs()?;
                let cfg = self.vec_cfg(&mut kw, &[8]).map_err(fix)?;
                kw.finish(&full)?;
                Ok(Instr::VBrcb { ty, dst, src, cfg })
            }
            "vcmp" => {
                let op = parts
                    .get(1)
                    .and_then(|s| op_of(&CMP_NAMES, s))
                    .ok_or_else(|| {
                        Diagnostic::new(start, "`vcmp` needs a comparison suffix")
                            .with_hint("e.g. `vcmp.lt.f16` (eq, ne, lt, le, gt, ge)")
                    })?;
                let ty = self.dtype_suffix(parts, 2, start)?;
                let dst = self.addr()?;
                self.comma()?;
                let src0 = self.addr()?;
                self.comma()?;
                let src1 = self.addr()?;
                let mut kw = self.kwargs()?;
                let cfg = self.vec_cfg(&mut kw, &[8, 8]).map_err(fix)?;
                kw.finish(&full)?;
                Ok(Instr::VCmp {
                    op,
                    ty,
                    dst,
                    src0,
                    src1,
                    cfg,
                })
            }
            "vsel" => {
                let ty = self.dtype_suffix(parts, 1, start)?;
                let dst = self.addr()?;
                self.comma()?;
                let src0 = self.addr()?;
                self.comma()?;
                let src1 = self.addr()?;
                self.comma()?;
                let mask = self.addr()?;
                let mut kw = self.kwargs()?;
                let cfg = self.vec_cfg(&mut kw, &[8, 8, 8]).map_err(fix)?;
                kw.finish(&full)?;
                Ok(Instr::VSel {
                    ty,
                    dst,
                    src0,
                    src1,
                    mask,
                    cfg,
                })
            }
            "vconv" => {
                let from = self.dtype_suffix(parts, 1, start)?;
                let to = self.dtype_suffix(parts, 2, start)?;
                if from == to {
                    return Err(Diagnostic::new(start, "`vconv` converts between two types")
                        .with_hint("e.g. `vconv.f32.f16`"));
                }
                let (dst, src, mut kw) = self.dst_src_kwargs()?;
                let lanes = 256 / from.size().max(to.size());
                let blk = |t: DType| (lanes * t.size() / 32) as u32;
                let cfg = self.vec_cfg(&mut kw, &[blk(to), blk(from)]).map_err(fix)?;
                kw.finish(&full)?;
                Ok(Instr::VConv {
                    from,
                    to,
                    dst,
                    src,
                    cfg,
                })
            }
            "copy" => {
                let (dst, src, mut kw) = self.dst_src_kwargs()?;
                let (n_burst, len, src_gap, dst_gap) = kw.bursts().map_err(fix)?;
                kw.finish(&full)?;
                Ok(Instr::Copy {
                    dst,
                    src,
                    n_burst,
                    len,
                    src_gap,
                    dst_gap,
                })
            }
            "copy_pad" => {
                let (dst, src, mut kw) = self.dst_src_kwargs()?;
                let n_burst = kw.int("n_burst", Some(1), 4095).map_err(fix)? as u32;
                let bytes = kw.int("bytes", None, 65535 * 32).map_err(fix)? as u32;
                let src_stride = kw
                    .int("src_stride", Some(0), u32::MAX as i64)
                    .map_err(fix)? as u32;
                let dst_stride = kw
                    .int("dst_stride", Some(0), u32::MAX as i64)
                    .map_err(fix)? as u32;
                let fit = bytes.div_ceil(32);
                let len = kw.int("len", Some(fit as i64), 65535).map_err(fix)? as u32;
                kw.finish(&full)?;
                if len < fit {
                    return Err(Diagnostic::new(
                        start,
                        format!("`len={len}` blocks cannot hold a burst of {bytes} bytes"),
                    )
                    .with_hint(format!("use at least `len={fit}`, or leave it out")));
                }
                Ok(Instr::CopyPad {
                    dst,
                    src,
                    n_burst,
                    bytes,
                    src_stride,
                    dst_stride,
                    len,
                })
            }
            "copy_ub_to_cc" => {
                let (dst, src, mut kw) = self.dst_src_kwargs()?;
                let (n_burst, len, src_gap, dst_gap) = kw.bursts().map_err(fix)?;
                kw.finish(&full)?;
                Ok(Instr::CopyUbToCc {
                    dst,
                    src,
                    n_burst,
                    len,
                    src_gap,
                    dst_gap,
                })
            }
            "copy_cc_to_ub" => {
                let (dst, src, mut kw) = self.dst_src_kwargs()?;
                let (n_burst, len, src_gap, dst_gap) = kw.bursts().map_err(fix)?;
                let f16 = kw.flag("f16")?;
                let relu = kw.flag("relu")?;
                let src_f16 = kw.flag("src_f16")?;
                if src_f16 && f16 {
                    return Err(Diagnostic::new(start, "`src_f16` data is already f16")
                        .with_hint("drop the `f16` conversion flag"));
                }
                kw.finish(&full)?;
                Ok(Instr::CopyCcToUb {
                    dst,
                    src,
                    n_burst,
                    len,
                    src_gap,
                    dst_gap,
                    f16,
                    relu,
                    src_f16,
                })
            }
            "load2d" => {
                let (dst, src, mut kw) = self.dst_src_kwargs()?;
                let repeat = kw.int("repeat", Some(1), 255).map_err(fix)? as u32;
                let src_stride = kw.int("src_stride", Some(1), 65535).map_err(fix)? as u32;
                let transpose = kw.flag("transpose")?;
                let f32 = kw.flag("f32")?;
                kw.finish(&full)?;
                Ok(Instr::Load2d {
                    dst,
                    src,
                    repeat,
                    src_stride,
                    transpose,
                    f32,
                })
            }
            "load3d" => {
                let (dst, src, mut kw) = self.dst_src_kwargs()?;
                let c = kw.int("c", None, 4096).map_err(fix)? as u32;
                let cs = kw.int("cs", None, 1 << 20).map_err(fix)? as u32;
                let w = kw.int("w", None, 65535).map_err(fix)? as u32;
                let kh = kw.int("kh", Some(1), 255).map_err(fix)? as u32;
                let kwidth = kw.int("kw", Some(1), 255).map_err(fix)? as u32;
                let k = kw.int("k", None, 4096).map_err(fix)? as u32;
                let n = kw.int("n", None, 4096).map_err(fix)? as u32;
                let f32 = kw.flag("f32")?;
                kw.finish(&full)?;
                if c == 0 || kh == 0 || kwidth == 0 || k == 0 || n == 0 {
                    return Err(Diagnostic::new(
                        start,
                        "`load3d` channels, kernel and sizes must be positive",
                    )
                    .with_hint("a feature map and a kernel have at least one element"));
                }
                if !k.is_multiple_of(16) || !n.is_multiple_of(16) {
                    return Err(Diagnostic::new(
                        start,
                        "`load3d` writes whole fractals: `k` and `n` are multiples of 16",
                    )
                    .with_hint("round the sizes up; rows past the map's read 0"));
                }
                Ok(Instr::Load3d {
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
                })
            }
            "img2col" => {
                let (dst, src, mut kw) = self.dst_src_kwargs()?;
                let h = kw.int("h", None, 4096).map_err(fix)? as u32;
                let w = kw.int("w", None, 4096).map_err(fix)? as u32;
                let c1 = kw.int("c1", Some(1), 256).map_err(fix)? as u32;
                let kh = kw.int("kh", None, 255).map_err(fix)? as u32;
                let kwidth = kw.int("kw", None, 255).map_err(fix)? as u32;
                let stride = kw.int("stride", Some(1), 63).map_err(fix)? as u32;
                let pad = kw.int("pad", Some(0), 255).map_err(fix)? as u32;
                let pos = kw.int("pos", Some(0), 65535).map_err(fix)? as u32;
                let m1 = kw.int("m1", None, 255).map_err(fix)? as u32;
                kw.finish(&full)?;
                if h == 0 || w == 0 || c1 == 0 || kh == 0 || kwidth == 0 || stride == 0 || m1 == 0 {
                    return Err(Diagnostic::new(
                        start,
                        "`img2col` sizes, kernel, stride and m1 must be positive",
                    )
                    .with_hint("a feature map and a kernel have at least one element"));
                }
                if h + 2 * pad < kh || w + 2 * pad < kwidth {
                    return Err(Diagnostic::new(
                        start,
                        format!(
                            "the {kh}×{kwidth} kernel does not fit the padded {h}×{w} feature map"
                        ),
                    )
                    .with_hint("pad the feature map or use a smaller kernel"));
                }
                Ok(Instr::Img2col {
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
                })
            }
            "mmad" => {
                let out = self.dtype_suffix(parts, 1, start)?;
                if out == DType::I32 {
                    return Err(Diagnostic::new(start, "the cube writes f32 or f16")
                        .with_hint("use `mmad.f32` or `mmad.f16`"));
                }
                let c = self.addr()?;
                self.comma()?;
                let a = self.addr()?;
                self.comma()?;
                let b = self.addr()?;
                let mut kw = self.kwargs()?;
                let m = kw.int("m", None, 4096).map_err(fix)? as u32;
                let k = kw.int("k", None, 4096).map_err(fix)? as u32;
                let n = kw.int("n", None, 4096).map_err(fix)? as u32;
                let init = kw.flag("init")?;
                let acc = kw.flag("acc")?;
                let src_f32 = kw.flag("src_f32")?;
                if init == acc {
                    return Err(Diagnostic::new(
                        start,
                        "`mmad` needs exactly one of `init` or `acc`",
                    )
                    .with_hint("`init` overwrites C, `acc` adds to it"));
                }
                kw.finish(&full)?;
                Ok(Instr::Mmad {
                    out,
                    c,
                    a,
                    b,
                    m,
                    k,
                    n,
                    init,
                    src_f32,
                })
            }
            "set_vector_mask" => {
                let (hi, _) = self.int("the high 64 bits")?;
                self.comma()?;
                let (lo, _) = self.int("the low 64 bits")?;
                Ok(Instr::SetMask {
                    hi: hi as u64,
                    lo: lo as u64,
                })
            }
            "set_flag" | "wait_flag" => {
                let src = self.pipe()?;
                self.comma()?;
                let dst = self.pipe()?;
                self.comma()?;
                let (event, span) = self.int("an event id")?;
                if !(0..=7).contains(&event) {
                    return Err(Diagnostic::new(span, "event ids are 0..=7"));
                }
                if src == dst {
                    return Err(Diagnostic::new(start, "a flag links two different pipes")
                        .with_hint("order instructions of one pipe with `pipe_barrier`"));
                }
                let event = event as u8;
                Ok(if head == "set_flag" {
                    Instr::SetFlag { src, dst, event }
                } else {
                    Instr::WaitFlag { src, dst, event }
                })
            }
            "sync_all" => Ok(Instr::SyncAll),
            "pipe_barrier" => {
                let (name, span) = self.ident("a pipe or ALL")?;
                if name == "ALL" {
                    return Ok(Instr::Barrier { pipe: None });
                }
                let pipe = Pipe::from_name(&name).ok_or_else(|| {
                    Diagnostic::new(span, format!("unknown pipe `{name}`"))
                        .with_hint("pipes are S, V, M, MTE1, MTE2, MTE3 (or ALL)")
                })?;
                Ok(Instr::Barrier { pipe: Some(pipe) })
            }
            "mov" => {
                let dst = self.reg()?;
                self.comma()?;
                let src = self.scalar()?;
                Ok(Instr::Mov { dst, src })
            }
            "ld" => {
                let ty = self.dtype_suffix(parts, 1, start)?;
                let dst = self.reg()?;
                self.comma()?;
                let src = self.addr()?;
                Ok(Instr::Ld { ty, dst, src })
            }
            "st" => {
                let ty = self.dtype_suffix(parts, 1, start)?;
                let dst = self.addr()?;
                self.comma()?;
                let src = self.scalar()?;
                Ok(Instr::St { ty, dst, src })
            }
            "count" => {
                let dst = self.reg()?;
                self.comma()?;
                let src = self.addr()?;
                let mut kw = self.kwargs()?;
                let bits = kw.int("bits", None, 1 << 20).map_err(fix)? as u32;
                kw.finish(&full)?;
                Ok(Instr::Count { dst, src, bits })
            }
            _ => {
                if let Some(op) = op_of(&SOP_NAMES, head) {
                    let dst = self.reg()?;
                    self.comma()?;
                    let a = self.scalar()?;
                    self.comma()?;
                    let b = self.scalar()?;
                    return Ok(Instr::SBin { op, dst, a, b });
                }
                Err(
                    Diagnostic::new(start, format!("unknown instruction `{full}`"))
                        .with_hint("see ISA.md for the instruction set"),
                )
            }
        }
    }

    fn pipe(&mut self) -> PResult<Pipe> {
        let (name, span) = self.ident("a pipe")?;
        Pipe::from_name(&name).ok_or_else(|| {
            Diagnostic::new(span, format!("unknown pipe `{name}`"))
                .with_hint("pipes are S, V, M, MTE1, MTE2, MTE3")
        })
    }
}

pub(crate) fn parse_reg(name: &str) -> Option<Reg> {
    let (kind, num) = name.split_at(1);
    if num.is_empty() || (num.len() > 1 && num.starts_with('0')) {
        return None;
    }
    let n: u8 = num.parse().ok()?;
    if n >= REGS {
        return None;
    }
    match kind {
        "s" => Some(Reg::S(n)),
        "f" => Some(Reg::F(n)),
        _ => None,
    }
}
