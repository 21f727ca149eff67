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
                            .filter(|&x| x <= MAX_GAP)
                            .ok_or_else(|| {
                                Diagnostic::new(
                                    span,
                                    format!("`{key}` values must be in 0..={MAX_GAP}"),
                                )
                            })
                    })
                    .collect()
            }
            Some((KwValue::Int(x), span)) if n == 1 => {
                if !(0..=MAX_GAP as i64).contains(&x) {
                    return Err(Diagnostic::new(
                        span,
                        format!("`{key}` must be in 0..={MAX_GAP}"),
                    ));
                }
                Ok(vec![x as u32])
            }
            Some((_, span)) => Err(Diagnostic::new(span, format!("`{key}` takes a tuple"))
                .with_hint(format!("write `{key}=(…)` with {n} values"))),
            None => Ok(default),
        }
    }

    /// `repeat`, `blk` and `rep` of a vector instruction; `blocks` are the default repeat strides.
    fn vec_cfg(&mut self, blocks: &[u32]) -> PResult<VecCfg> {
        let repeat = self.int("repeat", Some(1), MAX_REPEAT as i64)? as u32;
        if repeat == 0 {
            return Err(Diagnostic::new(
                Span::default(),
                format!("`repeat` must be in 1..={MAX_REPEAT}"),
            )
            .with_hint("a vector instruction runs at least one repeat"));
        }
        let blk = self.tuple("blk", vec![1; blocks.len()])?;
        let rep = self.tuple("rep", blocks.to_vec())?;
        Ok(VecCfg { repeat, blk, rep })
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

    fn instr(&mut self, parts: &[String], start: Span) -> PResult<Instr> {
        let full = parts.join(".");
        let mut fields = Fields {
            p: self,
            parts,
            start,
            full: &full,
            positional: 0,
            kw: None,
            pending: None,
        };
        Instr::read(&parts[0], &mut fields).unwrap_or_else(|| {
            Err(
                Diagnostic::new(start, format!("unknown instruction `{full}`"))
                    .with_hint("see ISA.md for the instruction set"),
            )
        })
    }

    fn pipe(&mut self) -> PResult<Pipe> {
        let (name, span) = self.ident("a pipe")?;
        Pipe::from_name(&name).ok_or_else(|| {
            Diagnostic::new(span, format!("unknown pipe `{name}`"))
                .with_hint("pipes are S, V, M, MTE1, MTE2, MTE3")
        })
    }
}

/// The parser as the instruction table's `Reader`: the fields of one instruction, after its
/// mnemonic and suffixes `parts` (at `start`).
struct Fields<'p, 'a> {
    p: &'p mut Parser,
    parts: &'a [String],
    start: Span,
    /// The mnemonic with its suffixes, as written.
    full: &'a str,
    /// Positional operands read so far.
    positional: usize,
    /// The keyword arguments, read at the first keyword field.
    kw: Option<Kwargs>,
    /// An error found among the keyword arguments, reported once they have all been read.
    pending: Option<Diagnostic>,
}

impl Fields<'_, '_> {
    /// Before a positional operand: the comma after the previous one.
    fn next_positional(&mut self) -> PResult<&mut Parser> {
        if self.positional > 0 {
            self.p.comma()?;
        }
        self.positional += 1;
        Ok(self.p)
    }

    fn kwargs(&mut self) -> PResult<&mut Kwargs> {
        let kw = match self.kw.take() {
            Some(kw) => kw,
            None => self.p.kwargs()?,
        };
        Ok(self.kw.insert(kw))
    }
}

impl Reader for Fields<'_, '_> {
    type Error = Diagnostic;

    fn type_suffix(&mut self, idx: usize) -> PResult<DType> {
        self.p.dtype_suffix(self.parts, idx, self.start)
    }

    fn cube_suffix(&mut self, idx: usize) -> PResult<DType> {
        let ty = self.type_suffix(idx)?;
        if ty == DType::I32 {
            return Err(Diagnostic::new(self.start, "the cube writes f32 or f16")
                .with_hint("use `mmad.f32` or `mmad.f16`"));
        }
        Ok(ty)
    }

    fn cmp_suffix(&mut self, idx: usize) -> PResult<CmpOp> {
        let head = &self.parts[0];
        self.parts
            .get(idx)
            .and_then(|s| op_of(&CMP_NAMES, s))
            .ok_or_else(|| {
                Diagnostic::new(self.start, format!("`{head}` needs a comparison suffix"))
                    .with_hint(format!("e.g. `{head}.lt.f16` (eq, ne, lt, le, gt, ge)"))
            })
    }

    fn addr(&mut self) -> PResult<Addr> {
        self.next_positional()?.addr()
    }

    fn scalar(&mut self) -> PResult<Scalar> {
        self.next_positional()?.scalar()
    }

    fn reg(&mut self) -> PResult<Reg> {
        self.next_positional()?.reg()
    }

    fn pipe(&mut self) -> PResult<Pipe> {
        self.next_positional()?.pipe()
    }

    fn pipe_or_all(&mut self) -> PResult<Option<Pipe>> {
        let (name, span) = self.next_positional()?.ident("a pipe or ALL")?;
        if name == "ALL" {
            return Ok(None);
        }
        let pipe = Pipe::from_name(&name).ok_or_else(|| {
            Diagnostic::new(span, format!("unknown pipe `{name}`"))
                .with_hint("pipes are S, V, M, MTE1, MTE2, MTE3 (or ALL)")
        })?;
        Ok(Some(pipe))
    }

    fn event(&mut self) -> PResult<u8> {
        let (event, span) = self.next_positional()?.int("an event id")?;
        if !(0..EVENTS as i64).contains(&event) {
            return Err(Diagnostic::new(
                span,
                format!("event ids are 0..={}", EVENTS - 1),
            ));
        }
        Ok(event as u8)
    }

    fn word(&mut self, what: &str) -> PResult<u64> {
        Ok(self.next_positional()?.int(what)?.0 as u64)
    }

    fn keyword(&mut self, key: &str, default: Option<u32>, max: i64) -> PResult<u32> {
        let start = self.start;
        let v = self.kwargs()?.int(key, default.map(i64::from), max);
        Ok(v.map_err(|d| missing_fix(d, start))? as u32)
    }

    fn flag(&mut self, key: &str) -> PResult<bool> {
        self.kwargs()?.flag(key)
    }

    fn init_or_acc(&mut self) -> PResult<bool> {
        let init = self.flag("init")?;
        let acc = self.flag("acc")?;
        if init == acc {
            self.pending = Some(
                Diagnostic::new(
                    self.start,
                    format!("`{}` needs exactly one of `init` or `acc`", self.parts[0]),
                )
                .with_hint("`init` overwrites C, `acc` adds to it"),
            );
        }
        Ok(init)
    }

    fn cfg(&mut self, rep: &[u32]) -> PResult<VecCfg> {
        let start = self.start;
        let cfg = self.kwargs()?.vec_cfg(rep);
        cfg.map_err(|d| missing_fix(d, start))
    }

    fn check(&mut self, checked: Result<(), Invalid>) -> PResult<()> {
        checked.map_err(|e| Diagnostic::new(self.start, e.message).with_hint(e.hint))
    }

    fn end_keywords(&mut self) -> PResult<()> {
        if let Some(d) = self.pending.take() {
            return Err(d);
        }
        match self.kw.take() {
            Some(kw) => kw.finish(self.full),
            None => Ok(()),
        }
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
