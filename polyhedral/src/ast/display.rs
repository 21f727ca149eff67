//! The printed form of an [`Ast`]: pseudo-C, as `--emit ast` shows it and snapshots record it.
//!
//! The infix expression printer is shared with the back ends through [`Spelling`], which says
//! how variables, parameters, integer literals and the integer helpers (`floord`, `ceild`,
//! `mod`, `min`, `max`) are spelled in a language, so every output prints the same
//! precedence-correct expressions. The pseudo-C of this module is one spelling; each back end
//! has its own beside its writer.

use std::fmt::{self, Write};

use super::{Ast, AstCond, AstExpr};
use crate::program::{ParamId, Program};

/// How [`AstExpr::to_infix`] spells names, literals and helper calls.
pub trait Spelling {
    /// A loop variable.
    fn var(&self, name: &str) -> String;
    /// A parameter.
    fn param(&self, p: ParamId) -> String;
    /// An integer literal.
    fn int(&self, v: i64) -> String {
        v.to_string()
    }
    /// A call of the integer helper `name` (`floord`, `ceild`, `mod`, `min`, `max`).
    fn call(&self, name: &str, args: &[String]) -> String {
        format!("{name}({})", args.join(", "))
    }
    /// Whether `min` / `max` take exactly two arguments rather than any number.
    fn binary_min_max(&self) -> bool {
        false
    }
}

const PREC_ADD: u8 = 1;
const PREC_MUL: u8 = 2;
const PREC_ATOM: u8 = 3;

impl AstExpr {
    /// The expression in infix syntax, parenthesised only where precedence needs it.
    pub fn to_infix(&self, syntax: &dyn Spelling) -> String {
        self.c_at(syntax, 0)
    }

    fn c_at(&self, s: &dyn Spelling, min_prec: u8) -> String {
        let (text, prec) = match self {
            AstExpr::Int(v) => (s.int(*v), if *v < 0 { PREC_ADD } else { PREC_ATOM }),
            AstExpr::Var(name) => (s.var(name), PREC_ATOM),
            AstExpr::Param(p) => (s.param(*p), PREC_ATOM),
            AstExpr::Add(a, b) => {
                let left = a.c_at(s, PREC_ADD);
                let text = match &**b {
                    AstExpr::Int(c) if *c < 0 && *c != i64::MIN => format!("{left} - {}", -c),
                    AstExpr::Mul(k, x) if *k < 0 && *k != i64::MIN => {
                        let m = AstExpr::mul(-k, (**x).clone());
                        format!("{left} - {}", m.c_at(s, PREC_MUL))
                    }
                    _ => format!("{left} + {}", b.c_at(s, PREC_MUL)),
                };
                (text, PREC_ADD)
            }
            AstExpr::Mul(-1, x) => (format!("-{}", x.c_at(s, PREC_ATOM)), PREC_ADD),
            AstExpr::Mul(k, x) => (
                format!("{} * {}", s.int(*k), x.c_at(s, PREC_ATOM)),
                if *k < 0 { PREC_ADD } else { PREC_MUL },
            ),
            AstExpr::FloorDiv(x, k) => (call(s, "floord", &[x, &AstExpr::Int(*k)]), PREC_ATOM),
            AstExpr::CeilDiv(x, k) => (call(s, "ceild", &[x, &AstExpr::Int(*k)]), PREC_ATOM),
            AstExpr::Mod(x, k) => (call(s, "mod", &[x, &AstExpr::Int(*k)]), PREC_ATOM),
            AstExpr::Min(items) => (min_max(s, "min", items), PREC_ATOM),
            AstExpr::Max(items) => (min_max(s, "max", items), PREC_ATOM),
        };
        if prec < min_prec {
            format!("({text})")
        } else {
            text
        }
    }
}

fn call(s: &dyn Spelling, name: &str, args: &[&AstExpr]) -> String {
    let args: Vec<String> = args.iter().map(|a| a.c_at(s, 0)).collect();
    s.call(name, &args)
}

fn min_max(s: &dyn Spelling, name: &str, items: &[AstExpr]) -> String {
    if !s.binary_min_max() || items.len() <= 2 {
        let refs: Vec<&AstExpr> = items.iter().collect();
        return call(s, name, &refs);
    }
    // Nested to the right: min(a, min(b, c)).
    let rest = match name {
        "min" => AstExpr::Min(items[1..].to_vec()),
        _ => AstExpr::Max(items[1..].to_vec()),
    };
    call(s, name, &[&items[0], &rest])
}

impl AstCond {
    /// The condition in infix syntax, with negative terms moved to the right: `i >= c1 + 1`,
    /// `c0 == N`, `mod(e, k) == 0`.
    pub fn to_infix(&self, syntax: &dyn Spelling) -> String {
        match self {
            AstCond::NonNegative(e) => relation(syntax, e, ">="),
            AstCond::Zero(e) => relation(syntax, e, "=="),
            AstCond::Divisible(e, k) => {
                format!("{} == 0", call(syntax, "mod", &[e, &AstExpr::Int(*k)]))
            }
        }
    }
}

/// `e op 0` written as `positive terms op negative terms`.
fn relation(s: &dyn Spelling, e: &AstExpr, op: &str) -> String {
    let mut terms = Vec::new();
    let mut constant = 0i64;
    flatten(e, 1, &mut terms, &mut constant);
    let side = |sign: i64, k: i64| {
        let mut out = AstExpr::Int(0);
        for (c, x) in &terms {
            if c * sign > 0 {
                out = AstExpr::plus(out, AstExpr::mul(c * sign, (*x).clone()));
            }
        }
        if k > 0 {
            out = AstExpr::plus(out, AstExpr::Int(k));
        }
        out.to_infix(s)
    };
    format!("{} {op} {}", side(1, constant), side(-1, -constant))
}

/// Splits a sum into `coefficient · term` pairs and a constant.
fn flatten<'a>(e: &'a AstExpr, k: i64, terms: &mut Vec<(i64, &'a AstExpr)>, constant: &mut i64) {
    match e {
        AstExpr::Int(v) => *constant = constant.wrapping_add(k.wrapping_mul(*v)),
        AstExpr::Add(a, b) => {
            flatten(a, k, terms, constant);
            flatten(b, k, terms, constant);
        }
        AstExpr::Mul(m, x) => flatten(x, k.wrapping_mul(*m), terms, constant),
        _ => terms.push((k, e)),
    }
}

impl Ast {
    /// The AST as pseudo-C, statement instances written `S0(c0, c1 + 1);`.
    pub fn display<'a>(&'a self, program: &'a Program) -> impl fmt::Display + 'a {
        DisplayAst { ast: self, program }
    }
}

struct DisplayAst<'a> {
    ast: &'a Ast,
    program: &'a Program,
}

impl fmt::Display for DisplayAst<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let syntax = PseudoC {
            program: self.program,
        };
        write_node(&mut out, self.ast, self.program, &syntax, 0);
        f.write_str(&out)
    }
}

/// The spelling of `--emit ast`: names as written, helpers without a prefix, n-ary `min` and
/// `max`.
struct PseudoC<'a> {
    program: &'a Program,
}

impl Spelling for PseudoC<'_> {
    fn var(&self, name: &str) -> String {
        name.to_string()
    }

    fn param(&self, p: ParamId) -> String {
        self.program
            .params
            .get(p.index())
            .map_or_else(|| format!("param{}", p.0), |p| p.name.clone())
    }
}

fn write_node(out: &mut String, ast: &Ast, program: &Program, s: &dyn Spelling, indent: usize) {
    let pad = "  ".repeat(indent);
    match ast {
        Ast::Block(items) => {
            for item in items {
                write_node(out, item, program, s, indent);
            }
        }
        Ast::For {
            var,
            lower,
            upper,
            step,
            body,
            annotations,
        } => {
            let mut notes = Vec::new();
            if annotations.parallel {
                notes.push("parallel");
            }
            if annotations.vectorizable {
                notes.push("vectorizable");
            }
            if !notes.is_empty() {
                let _ = writeln!(out, "{pad}// {}", notes.join(", "));
            }
            let _ = writeln!(
                out,
                "{pad}for ({var} = {}; {var} <= {}; {var} += {step}) {{",
                lower.to_infix(s),
                upper.to_infix(s)
            );
            write_node(out, body, program, s, indent + 1);
            let _ = writeln!(out, "{pad}}}");
        }
        Ast::If {
            conds,
            then,
            otherwise,
        } => {
            let conds: Vec<String> = conds.iter().map(|c| c.to_infix(s)).collect();
            let _ = writeln!(out, "{pad}if ({}) {{", conds.join(" && "));
            write_node(out, then, program, s, indent + 1);
            let mut rest = otherwise.as_deref();
            // An `else` holding only another `if` is written `else if`.
            while let Some(o) = rest {
                match o.single_if() {
                    Some((conds, then, otherwise)) => {
                        let conds: Vec<String> = conds.iter().map(|c| c.to_infix(s)).collect();
                        let _ = writeln!(out, "{pad}}} else if ({}) {{", conds.join(" && "));
                        write_node(out, then, program, s, indent + 1);
                        rest = otherwise;
                    }
                    None => {
                        let _ = writeln!(out, "{pad}}} else {{");
                        write_node(out, o, program, s, indent + 1);
                        rest = None;
                    }
                }
            }
            let _ = writeln!(out, "{pad}}}");
        }
        Ast::User { stmt, args } => {
            let name = program
                .statements
                .get(stmt.index())
                .map_or_else(|| format!("S?{}", stmt.0), |st| st.name.clone());
            let args: Vec<String> = args.iter().map(|a| a.to_infix(s)).collect();
            let _ = writeln!(out, "{pad}{name}({});", args.join(", "));
        }
        Ast::Mark { mark, body } => {
            let _ = writeln!(out, "{pad}// mark: {mark}");
            let _ = writeln!(out, "{pad}{{");
            write_node(out, body, program, s, indent + 1);
            let _ = writeln!(out, "{pad}}}");
        }
    }
}
