//! A reader for isl's notation of sets and maps.
//!
//! ```text
//! input   := [ '[' params ']' '->' ] '{' [ part (';' part)* ] '}'
//! part    := [ tuple [ '->' tuple ] ] [ ':' formula ]
//! tuple   := [ name ] '[' [ entry (',' entry)* ] ']'
//! formula := conj ( ('or' | '||') conj )*
//! conj    := atom ( ('and' | '&&') atom )*
//! atom    := '(' formula ')' | 'exists' '(' names ':' formula ')' | 'true' | 'false'
//!          | expr ( ('<' | '<=' | '>' | '>=' | '=' | '!=') expr )+
//! expr    := affine sums of integers, names, `c·e` (also `2i`), `floor(e / c)`, `ceil(e / c)`,
//!            `e mod c` (also `%`)
//! ```
//!
//! A tuple entry that is a fresh name introduces a dimension; anything else (a name already
//! bound, an expression) introduces an unnamed dimension equal to it. Divisions and `exists`
//! become local variables. Errors are values carrying the byte offset of the offending token;
//! no input makes the reader panic (arithmetic is checked, nesting is limited).

use super::conj::Conj;
use super::rel::{Basic, Rel};
use super::space::Tuple;
use std::collections::BTreeMap;
use std::fmt;

/// A syntax error with the byte offset where it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub pos: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at offset {}: {}", self.pos, self.message)
    }
}

impl std::error::Error for ParseError {}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Int(i64),
    Sym(&'static str),
    End,
}

const SYMS: [&str; 24] = [
    "->", "<=", ">=", "!=", "==", "&&", "||", "[", "]", "{", "}", "(", ")", ",", ";", ":", "+",
    "-", "*", "/", "%", "<", ">", "=",
];

fn lex(s: &str) -> Result<Vec<(Tok, usize)>, ParseError> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    'outer: while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() {
            let st = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let v: i64 = s[st..i].parse().map_err(|_| ParseError {
                pos: st,
                message: "integer literal too large".into(),
            })?;
            out.push((Tok::Int(v), st));
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let st = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'\'') {
                i += 1;
            }
            out.push((Tok::Ident(s[st..i].to_owned()), st));
            continue;
        }
        for sym in SYMS {
            if s[i..].starts_with(sym) {
                out.push((Tok::Sym(sym), i));
                i += sym.len();
                continue 'outer;
            }
        }
        return Err(ParseError {
            pos: i,
            message: format!(
                "unexpected character {:?}",
                s[i..].chars().next().unwrap_or('?')
            ),
        });
    }
    out.push((Tok::End, s.len()));
    Ok(out)
}

/// `c + Σ t[v]·v` over variable ids.
#[derive(Clone, Debug, Default)]
struct Lin {
    c: i64,
    t: BTreeMap<usize, i64>,
}

#[derive(Clone, Debug)]
enum Formula {
    /// `lin ≥ 0`, or `lin = 0` with `eq`.
    Atom(Lin, bool),
    And(Vec<Formula>),
    Or(Vec<Formula>),
}

const KEYWORDS: [&str; 8] = [
    "and", "or", "exists", "floor", "ceil", "mod", "true", "false",
];
const MAX_DEPTH: usize = 64;
const MAX_DISJUNCTS: usize = 4096;

struct Parser {
    toks: Vec<(Tok, usize)>,
    p: usize,
    depth: usize,
    /// Names in scope, innermost last.
    scope: Vec<(String, usize)>,
    nvars: usize,
    /// Constraints that define division locals; they hold in every disjunct.
    defs: Vec<(Lin, bool)>,
}

type PResult<T> = Result<T, ParseError>;

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.p].0
    }

    /// The token after the current one (the last token, the end, when there is none).
    fn peek_next(&self) -> &Tok {
        &self.toks[(self.p + 1).min(self.toks.len() - 1)].0
    }

    fn pos(&self) -> usize {
        self.toks[self.p].1
    }

    fn err<T>(&self, msg: impl Into<String>) -> PResult<T> {
        Err(ParseError {
            pos: self.pos(),
            message: msg.into(),
        })
    }

    fn bump(&mut self) {
        if self.p + 1 < self.toks.len() {
            self.p += 1;
        }
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Sym(x) if *x == s)
    }

    fn is_kw(&self, k: &str) -> bool {
        matches!(self.peek(), Tok::Ident(x) if x == k)
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.is_sym(s) || self.is_kw(s) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> PResult<()> {
        if self.eat(s) {
            Ok(())
        } else {
            self.err(format!("expected `{s}`"))
        }
    }

    fn ident(&mut self) -> PResult<String> {
        match self.peek().clone() {
            Tok::Ident(x) if !KEYWORDS.contains(&x.as_str()) => {
                self.bump();
                Ok(x)
            }
            _ => self.err("expected a name"),
        }
    }

    fn lookup(&self, name: &str) -> Option<usize> {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }

    fn fresh(&mut self) -> usize {
        self.nvars += 1;
        self.nvars - 1
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err("nesting too deep");
        }
        Ok(())
    }

    fn overflow<T>(&self) -> PResult<T> {
        self.err("integer overflow")
    }

    fn lin_add(&self, a: &Lin, b: &Lin, sb: i64) -> PResult<Lin> {
        let mut o = a.clone();
        let Some(bc) = b.c.checked_mul(sb) else {
            return self.overflow();
        };
        let Some(c) = o.c.checked_add(bc) else {
            return self.overflow();
        };
        o.c = c;
        for (v, x) in &b.t {
            let Some(x) = x.checked_mul(sb) else {
                return self.overflow();
            };
            let e = o.t.entry(*v).or_insert(0);
            let Some(s) = e.checked_add(x) else {
                return self.overflow();
            };
            *e = s;
        }
        o.t.retain(|_, x| *x != 0);
        Ok(o)
    }

    fn lin_scale(&self, a: &Lin, k: i64) -> PResult<Lin> {
        self.lin_add(&Lin::default(), a, k)
    }

    /// A new local `q = floor(e / d)`.
    fn floor_of(&mut self, e: &Lin, d: i64) -> PResult<Lin> {
        if d <= 0 {
            return self.err("divisor must be a positive integer");
        }
        let q = self.fresh();
        let mut qd = Lin::default();
        qd.t.insert(q, d);
        // e − d·q ≥ 0 and d·q + d − 1 − e ≥ 0
        let lo = self.lin_add(e, &qd, -1)?;
        let mut hi = self.lin_add(&qd, e, -1)?;
        hi.c = match hi.c.checked_add(d - 1) {
            Some(c) => c,
            None => return self.overflow(),
        };
        self.defs.push((lo, false));
        self.defs.push((hi, false));
        let mut r = Lin::default();
        r.t.insert(q, 1);
        Ok(r)
    }

    fn int(&mut self) -> PResult<i64> {
        match *self.peek() {
            Tok::Int(v) => {
                self.bump();
                Ok(v)
            }
            _ => self.err("expected an integer"),
        }
    }

    fn expr(&mut self) -> PResult<Lin> {
        self.enter()?;
        let neg = self.eat("-");
        let mut e = self.term()?;
        if neg {
            e = self.lin_scale(&e, -1)?;
        }
        loop {
            if self.eat("+") {
                let t = self.term()?;
                e = self.lin_add(&e, &t, 1)?;
            } else if self.eat("-") {
                let t = self.term()?;
                e = self.lin_add(&e, &t, -1)?;
            } else {
                break;
            }
        }
        self.depth -= 1;
        Ok(e)
    }

    fn term(&mut self) -> PResult<Lin> {
        let mut e = self.factor()?;
        loop {
            let implicit = matches!(self.toks[self.p.saturating_sub(1)].0, Tok::Int(_))
                && (matches!(self.peek(), Tok::Ident(x) if !KEYWORDS.contains(&x.as_str()) || x == "floor" || x == "ceil")
                    || self.is_sym("("));
            if self.eat("*") || implicit {
                let f = self.factor()?;
                e = if e.t.is_empty() {
                    self.lin_scale(&f, e.c)?
                } else if f.t.is_empty() {
                    self.lin_scale(&e, f.c)?
                } else {
                    return self.err("product of two non-constant expressions is not affine");
                };
            } else if self.eat("mod") || self.eat("%") {
                let d = self.int()?;
                let q = self.floor_of(&e, d)?;
                let dq = self.lin_scale(&q, d)?;
                e = self.lin_add(&e, &dq, -1)?;
            } else {
                return Ok(e);
            }
        }
    }

    fn factor(&mut self) -> PResult<Lin> {
        self.enter()?;
        let r = self.factor_inner();
        self.depth -= 1;
        r
    }

    fn factor_inner(&mut self) -> PResult<Lin> {
        match self.peek().clone() {
            Tok::Int(v) => {
                self.bump();
                Ok(Lin {
                    c: v,
                    t: BTreeMap::new(),
                })
            }
            Tok::Sym("-") => {
                self.bump();
                let f = self.factor()?;
                self.lin_scale(&f, -1)
            }
            Tok::Sym("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Ident(x) if x == "floor" || x == "ceil" => {
                self.bump();
                self.expect("(")?;
                let e = self.expr()?;
                self.expect("/")?;
                let d = self.int()?;
                self.expect(")")?;
                if x == "floor" {
                    self.floor_of(&e, d)
                } else {
                    let ne = self.lin_scale(&e, -1)?;
                    let f = self.floor_of(&ne, d)?;
                    self.lin_scale(&f, -1)
                }
            }
            Tok::Ident(_) => {
                let pos = self.pos();
                let name = self.ident()?;
                match self.lookup(&name) {
                    Some(v) => {
                        let mut l = Lin::default();
                        l.t.insert(v, 1);
                        Ok(l)
                    }
                    None => Err(ParseError {
                        pos,
                        message: format!("unknown name `{name}`"),
                    }),
                }
            }
            _ => self.err("expected an expression"),
        }
    }

    fn formula(&mut self) -> PResult<Formula> {
        self.enter()?;
        let mut v = vec![self.conj()?];
        while self.eat("or") || self.eat("||") {
            v.push(self.conj()?);
        }
        self.depth -= 1;
        Ok(if v.len() == 1 {
            v.pop().expect("one element")
        } else {
            Formula::Or(v)
        })
    }

    fn conj(&mut self) -> PResult<Formula> {
        let mut v = vec![self.atom()?];
        while self.eat("and") || self.eat("&&") {
            v.push(self.atom()?);
        }
        Ok(if v.len() == 1 {
            v.pop().expect("one element")
        } else {
            Formula::And(v)
        })
    }

    fn atom(&mut self) -> PResult<Formula> {
        self.enter()?;
        let r = self.atom_inner();
        self.depth -= 1;
        r
    }

    fn atom_inner(&mut self) -> PResult<Formula> {
        if self.eat("true") {
            return Ok(Formula::And(Vec::new()));
        }
        if self.eat("false") {
            return Ok(Formula::Or(Vec::new()));
        }
        if self.eat("exists") {
            self.expect("(")?;
            let mark = self.scope.len();
            loop {
                let name = self.ident()?;
                let v = self.fresh();
                self.scope.push((name, v));
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(":")?;
            let f = self.formula()?;
            self.expect(")")?;
            self.scope.truncate(mark);
            return Ok(f);
        }
        if self.is_sym("(") {
            let save = (self.p, self.nvars, self.defs.len(), self.depth);
            match self.chain() {
                Ok(f) => return Ok(f),
                Err(e1) => {
                    self.p = save.0;
                    self.nvars = save.1;
                    self.defs.truncate(save.2);
                    self.depth = save.3;
                    self.bump();
                    let f = match self.formula() {
                        Ok(f) => f,
                        Err(e2) => return Err(if e1.pos > e2.pos { e1 } else { e2 }),
                    };
                    self.expect(")")?;
                    return Ok(f);
                }
            }
        }
        self.chain()
    }

    fn chain(&mut self) -> PResult<Formula> {
        let mut lhs = self.expr()?;
        let mut parts = Vec::new();
        while let Tok::Sym(op @ ("<" | "<=" | ">" | ">=" | "=" | "==" | "!=")) = *self.peek() {
            self.bump();
            let rhs = self.expr()?;
            let d = self.lin_add(&rhs, &lhs, -1)?; // rhs − lhs
            let nd = self.lin_scale(&d, -1)?;
            let minus1 = |p: &Parser, l: &Lin| -> PResult<Lin> {
                let mut l = l.clone();
                l.c = match l.c.checked_sub(1) {
                    Some(c) => c,
                    None => return p.overflow(),
                };
                Ok(l)
            };
            parts.push(match op {
                "<" => Formula::Atom(minus1(self, &d)?, false),
                "<=" => Formula::Atom(d, false),
                ">" => Formula::Atom(minus1(self, &nd)?, false),
                ">=" => Formula::Atom(nd, false),
                "!=" => Formula::Or(vec![
                    Formula::Atom(minus1(self, &d)?, false),
                    Formula::Atom(minus1(self, &nd)?, false),
                ]),
                _ => Formula::Atom(d, true),
            });
            lhs = rhs;
        }
        if parts.is_empty() {
            return self.err("expected a comparison");
        }
        Ok(Formula::And(parts))
    }

    fn tuple(&mut self, dims: &mut Vec<usize>, defs: &mut Vec<(Lin, bool)>) -> PResult<Tuple> {
        let name = match self.peek() {
            Tok::Ident(_) => Some(self.ident()?),
            _ => None,
        };
        self.expect("[")?;
        let mut names = Vec::new();
        if !self.eat("]") {
            loop {
                let fresh_name = match (self.peek().clone(), self.peek_next()) {
                    (Tok::Ident(x), Tok::Sym("," | "]"))
                        if !KEYWORDS.contains(&x.as_str()) && self.lookup(&x).is_none() =>
                    {
                        Some(x)
                    }
                    _ => None,
                };
                let v = self.fresh();
                dims.push(v);
                if let Some(x) = fresh_name {
                    self.bump();
                    self.scope.push((x.clone(), v));
                    names.push(x);
                } else {
                    let e = self.expr()?;
                    let mut d = Lin::default();
                    d.t.insert(v, 1);
                    defs.push((self.lin_add(&d, &e, -1)?, true));
                    names.push(String::new());
                }
                if self.eat("]") {
                    break;
                }
                self.expect(",")?;
            }
        }
        Ok(Tuple::from_parts(name, names))
    }
}

fn dnf(f: &Formula, pos: usize) -> PResult<Vec<Vec<(Lin, bool)>>> {
    let too_big = || ParseError {
        pos,
        message: "formula has too many disjuncts".into(),
    };
    Ok(match f {
        Formula::Atom(l, e) => vec![vec![(l.clone(), *e)]],
        Formula::Or(v) => {
            let mut out = Vec::new();
            for g in v {
                out.extend(dnf(g, pos)?);
                if out.len() > MAX_DISJUNCTS {
                    return Err(too_big());
                }
            }
            out
        }
        Formula::And(v) => {
            let mut acc: Vec<Vec<(Lin, bool)>> = vec![Vec::new()];
            for g in v {
                let d = dnf(g, pos)?;
                if acc.len().saturating_mul(d.len()) > MAX_DISJUNCTS {
                    return Err(too_big());
                }
                let mut next = Vec::with_capacity(acc.len() * d.len());
                for a in &acc {
                    for b in &d {
                        let mut c = a.clone();
                        c.extend(b.iter().cloned());
                        next.push(c);
                    }
                }
                acc = next;
            }
            acc
        }
    })
}

/// Parses isl notation; `Ok((rel, is_map))`.
pub(crate) fn parse(s: &str) -> Result<(Rel, bool), ParseError> {
    let toks = lex(s)?;
    let mut p = Parser {
        toks,
        p: 0,
        depth: 0,
        scope: Vec::new(),
        nvars: 0,
        defs: Vec::new(),
    };
    let mut params: Vec<String> = Vec::new();
    if p.eat("[") {
        if !p.eat("]") {
            loop {
                let pos = p.pos();
                let n = p.ident()?;
                if params.contains(&n) {
                    return Err(ParseError {
                        pos,
                        message: format!("parameter `{n}` listed twice"),
                    });
                }
                params.push(n);
                if p.eat("]") {
                    break;
                }
                p.expect(",")?;
            }
        }
        p.expect("->")?;
    }
    let np = params.len();
    p.expect("{")?;
    let mut parts = Vec::new();
    let mut kind: Option<bool> = None;
    if !p.eat("}") {
        loop {
            let part_pos = p.pos();
            p.scope = params.iter().cloned().zip(0..).collect();
            p.nvars = np;
            p.defs.clear();
            let mut dims_in: Vec<usize> = Vec::new();
            let mut dims_out: Vec<usize> = Vec::new();
            let mut tdefs: Vec<(Lin, bool)> = Vec::new();
            let mut dom: Option<Tuple> = None;
            let ran;
            if p.is_sym(":") || p.is_sym(";") || p.is_sym("}") {
                ran = Tuple::anonymous_dims(None, 0);
            } else {
                let t = p.tuple(&mut dims_out, &mut tdefs)?;
                if p.eat("->") {
                    dom = Some(t);
                    dims_in = std::mem::take(&mut dims_out);
                    ran = p.tuple(&mut dims_out, &mut tdefs)?;
                } else {
                    ran = t;
                }
            }
            let is_map = dom.is_some();
            if *kind.get_or_insert(is_map) != is_map {
                return Err(ParseError {
                    pos: part_pos,
                    message: "a set piece and a map piece in one object".into(),
                });
            }
            let f = if p.eat(":") {
                p.formula()?
            } else {
                Formula::And(Vec::new())
            };
            let disj = dnf(&f, part_pos)?;
            // Columns: params, in, out, then every other variable as a local.
            let nv = p.nvars;
            let mut col = vec![usize::MAX; nv];
            for (i, c) in col.iter_mut().enumerate().take(np) {
                *c = i;
            }
            for (k, &v) in dims_in.iter().chain(&dims_out).enumerate() {
                col[v] = np + k;
            }
            let nf = np + dims_in.len() + dims_out.len();
            let mut next = nf;
            for c in col.iter_mut() {
                if *c == usize::MAX {
                    *c = next;
                    next += 1;
                }
            }
            let to_row = |l: &Lin| {
                let mut r = vec![0i64; nv + 1];
                r[0] = l.c;
                for (v, x) in &l.t {
                    r[1 + col[*v]] = *x;
                }
                r
            };
            let mut common = Conj::universe(nv);
            for (l, eq) in tdefs.iter().chain(&p.defs) {
                if *eq {
                    common.eqs.push(to_row(l));
                } else {
                    common.ineqs.push(to_row(l));
                }
            }
            for d in disj {
                let mut c = common.clone();
                for (l, eq) in &d {
                    if *eq {
                        c.eqs.push(to_row(l));
                    } else {
                        c.ineqs.push(to_row(l));
                    }
                }
                parts.push(Basic {
                    dom: dom.clone(),
                    ran: ran.clone(),
                    np,
                    nd: nv - nf,
                    c,
                });
            }
            if p.eat("}") {
                break;
            }
            p.expect(";")?;
        }
    }
    if *p.peek() != Tok::End {
        return p.err("unexpected input after `}`");
    }
    Ok((Rel { params, parts }, kind.unwrap_or(false)))
}
