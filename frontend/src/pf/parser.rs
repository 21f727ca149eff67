//! Recursive-descent parser: tokens → [`ast::File`].
//!
//! Precedence, loosest first: `?:` (right-associative), `||`, `&&`, `== !=`, `< <= > >=`,
//! `+ -`, `* / %`, unary `- !`, then primaries (literals, names, calls, parentheses).
//! The parser stops at the first error. Expression trees taller than [`ast::MAX_HEIGHT`] and
//! blocks nested deeper than that are rejected, which bounds every recursion here and later.

use polyhedral::program::{ScalarType, Span};

use super::ast::{
    AssignKind, BinOp, Expr, ExprKind, File, FnDecl, FnStmt, Ident, Kernel, KernelStmt, SizeDecl,
    TensorDecl, TensorStmt, TypeAnn, UnOp, Where, MAX_HEIGHT,
};
use super::lexer::{Tok, Token};
use crate::diagnostic::Diagnostic;

type PResult<T> = Result<T, Diagnostic>;

/// Names the language reserves; none of them can name a tensor, size, index or local.
pub(crate) const KEYWORDS: &[&str] = &[
    "fn", "kernel", "var", "let", "if", "else", "while", "return", "for", "in", "where", "true",
    "false",
];

pub(crate) fn parse_type_name(name: &str) -> Option<ScalarType> {
    Some(match name {
        "f16" => ScalarType::F16,
        "f32" => ScalarType::F32,
        "f64" => ScalarType::F64,
        "i32" => ScalarType::I32,
        "bool" => ScalarType::Bool,
        _ => return None,
    })
}

pub(crate) fn parse_file(tokens: &[Token]) -> PResult<File> {
    let mut p = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let mut file = File::default();
    while p.peek() != &Tok::Eof {
        if p.at_keyword("fn") {
            file.functions.push(p.function()?);
        } else if p.at_keyword("kernel") {
            file.kernels.push(p.kernel()?);
        } else {
            return Err(p.expected("`fn` or `kernel`"));
        }
    }
    Ok(file)
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    /// Current nesting of blocks and parenthesised or unary sub-expressions.
    depth: u32,
}

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        &self.tokens[self.pos].tok
    }

    fn peek_at(&self, k: usize) -> &Tok {
        // The token list ends with Eof, which is never consumed.
        &self.tokens[(self.pos + k).min(self.tokens.len() - 1)].tok
    }

    fn span(&self) -> Span {
        self.tokens[self.pos].span
    }

    fn bump(&mut self) -> &Token {
        let t = &self.tokens[self.pos];
        if t.tok != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    fn at_keyword(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == kw)
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == tok {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expected(&self, what: &str) -> Diagnostic {
        Diagnostic::new(
            self.span(),
            format!("expected {what}, found {}", self.peek().describe()),
        )
        .with_hint(hint_for(what))
    }

    fn expect(&mut self, tok: &Tok) -> PResult<Span> {
        if self.peek() == tok {
            Ok(self.bump().span)
        } else {
            Err(self.expected(&tok.describe()))
        }
    }

    fn expect_keyword(&mut self, kw: &str) -> PResult<Span> {
        if self.at_keyword(kw) {
            Ok(self.bump().span)
        } else {
            Err(self.expected(&format!("`{kw}`")))
        }
    }

    fn ident(&mut self, what: &str) -> PResult<Ident> {
        match self.peek().clone() {
            Tok::Ident(name) if !KEYWORDS.contains(&name.as_str()) => {
                let span = self.bump().span;
                Ok(Ident { name, span })
            }
            // Where a name is expected, a reserved word is a name the user meant.
            Tok::Ident(name) if what.contains("name") || what.contains("index") => {
                Err(Diagnostic::new(
                    self.span(),
                    format!("`{name}` is a reserved word and cannot be used as {what}"),
                )
                .with_hint(format!(
                "choose another name, such as `{name}_` or `{name}0`; the reserved words are {}",
                KEYWORDS
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
            }
            _ => Err(self.expected(what)),
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_HEIGHT {
            return Err(Diagnostic::new(self.span(), "nested too deeply")
                .with_hint("split the expression or block into smaller parts"));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn type_ann(&mut self) -> PResult<TypeAnn> {
        if let Tok::Ident(name) = self.peek() {
            if let Some(ty) = parse_type_name(name) {
                let span = self.bump().span;
                return Ok(TypeAnn { ty, span });
            }
        }
        Err(self.expected("a type (`f16`, `f32`, `f64`, `i32` or `bool`)"))
    }

    fn function(&mut self) -> PResult<FnDecl> {
        self.expect_keyword("fn")?;
        let name = self.ident("a function name")?;
        self.expect(&Tok::LParen)?;
        let mut params = Vec::new();
        while self.peek() != &Tok::RParen {
            let p = self.ident("a parameter name")?;
            self.expect(&Tok::Colon)?;
            let ty = self.type_ann()?;
            params.push((p, ty));
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect(&Tok::RParen)?;
        self.expect(&Tok::Arrow)?;
        let ret = self.type_ann()?;
        let (body, end) = self.fn_block()?;
        Ok(FnDecl {
            name,
            params,
            ret,
            body,
            end,
        })
    }

    /// `{ stmt* }`, returning the span of the closing brace too.
    fn fn_block(&mut self) -> PResult<(Vec<FnStmt>, Span)> {
        self.expect(&Tok::LBrace)?;
        self.enter()?;
        let mut stmts = Vec::new();
        while self.peek() != &Tok::RBrace {
            if self.peek() == &Tok::Eof {
                return Err(self.expected("`}`"));
            }
            stmts.push(self.fn_stmt()?);
        }
        self.leave();
        let end = self.expect(&Tok::RBrace)?;
        Ok((stmts, end))
    }

    fn fn_stmt(&mut self) -> PResult<FnStmt> {
        if self.at_keyword("var") || self.at_keyword("let") {
            let mutable = self.at_keyword("var");
            self.bump();
            let name = self.ident("a variable name")?;
            let ty = if self.eat(&Tok::Colon) {
                Some(self.type_ann()?)
            } else {
                None
            };
            self.expect(&Tok::Assign)?;
            let init = self.expr()?;
            self.expect(&Tok::Semi)?;
            return Ok(FnStmt::Decl {
                mutable,
                name,
                ty,
                init,
            });
        }
        if self.at_keyword("if") {
            return self.if_stmt();
        }
        if self.at_keyword("while") {
            self.bump();
            let cond = self.expr()?;
            let (body, _) = self.fn_block()?;
            return Ok(FnStmt::While { cond, body });
        }
        if self.at_keyword("return") {
            let start = self.bump().span;
            let value = self.expr()?;
            let end = self.expect(&Tok::Semi)?;
            return Ok(FnStmt::Return {
                value,
                span: start.join(end),
            });
        }
        let name = self.ident("a statement")?;
        let op = match self.peek() {
            Tok::Assign => None,
            Tok::PlusEq => Some(BinOp::Add),
            Tok::MinusEq => Some(BinOp::Sub),
            Tok::StarEq => Some(BinOp::Mul),
            Tok::SlashEq => Some(BinOp::Div),
            _ => return Err(self.expected("`=`")),
        };
        self.bump();
        let value = self.expr()?;
        self.expect(&Tok::Semi)?;
        Ok(FnStmt::Assign { name, op, value })
    }

    fn if_stmt(&mut self) -> PResult<FnStmt> {
        self.expect_keyword("if")?;
        let cond = self.expr()?;
        let (then, _) = self.fn_block()?;
        let otherwise = if self.at_keyword("else") {
            self.bump();
            if self.at_keyword("if") {
                self.enter()?;
                let nested = self.if_stmt()?;
                self.leave();
                vec![nested]
            } else {
                self.fn_block()?.0
            }
        } else {
            Vec::new()
        };
        Ok(FnStmt::If {
            cond,
            then,
            otherwise,
        })
    }

    fn kernel(&mut self) -> PResult<Kernel> {
        self.expect_keyword("kernel")?;
        let name = self.ident("a kernel name")?;
        let mut sizes = Vec::new();
        if self.eat(&Tok::Lt) {
            while self.peek() != &Tok::Gt {
                let size = self.ident("a size name")?;
                let default = if self.eat(&Tok::Assign) {
                    match self.peek() {
                        Tok::Int(v) => {
                            let v = *v;
                            self.bump();
                            Some(v)
                        }
                        _ => return Err(self.expected("an integer default size")),
                    }
                } else {
                    None
                };
                sizes.push(SizeDecl {
                    name: size,
                    default,
                });
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
            self.expect(&Tok::Gt)?;
        }
        let inputs = self.tensor_decls()?;
        self.expect(&Tok::Arrow)?;
        let outputs = self.tensor_decls()?;
        let body = self.kernel_block()?;
        Ok(Kernel {
            name,
            sizes,
            inputs,
            outputs,
            body,
        })
    }

    fn tensor_decls(&mut self) -> PResult<Vec<TensorDecl>> {
        self.expect(&Tok::LParen)?;
        let mut decls = Vec::new();
        while self.peek() != &Tok::RParen {
            let name = self.ident("a tensor name")?;
            self.expect(&Tok::Colon)?;
            let elem = self.type_ann()?;
            let mut shape = Vec::new();
            if self.eat(&Tok::LBracket) {
                loop {
                    shape.push(self.expr()?);
                    if !self.eat(&Tok::Comma) {
                        break;
                    }
                }
                self.expect(&Tok::RBracket)?;
            }
            decls.push(TensorDecl { name, elem, shape });
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect(&Tok::RParen)?;
        Ok(decls)
    }

    fn kernel_block(&mut self) -> PResult<Vec<KernelStmt>> {
        self.expect(&Tok::LBrace)?;
        self.enter()?;
        let mut stmts = Vec::new();
        while self.peek() != &Tok::RBrace {
            if self.peek() == &Tok::Eof {
                return Err(self.expected("`}`"));
            }
            if self.at_keyword("for") {
                self.bump();
                let var = self.ident("a loop index")?;
                self.expect_keyword("in")?;
                let lo = self.expr()?;
                self.expect(&Tok::Colon)?;
                let hi = self.expr()?;
                let body = self.kernel_block()?;
                stmts.push(KernelStmt::For { var, lo, hi, body });
            } else {
                stmts.push(KernelStmt::Tensor(self.tensor_stmt()?));
            }
        }
        self.leave();
        self.expect(&Tok::RBrace)?;
        Ok(stmts)
    }

    fn tensor_stmt(&mut self) -> PResult<TensorStmt> {
        let lhs = self.ident("a tensor statement or `for`")?;
        let mut subs = Vec::new();
        if self.eat(&Tok::LParen) {
            while self.peek() != &Tok::RParen {
                subs.push(self.expr()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
            self.expect(&Tok::RParen)?;
        }
        let op_start = self.span();
        let kind = match self.peek().clone() {
            Tok::Assign => AssignKind::Set,
            Tok::PlusEq => AssignKind::Add,
            Tok::MinusEq => AssignKind::Sub,
            Tok::StarEq => AssignKind::Mul,
            Tok::Ident(m) if (m == "max" || m == "min") && self.peek_at(1) == &Tok::Assign => {
                self.bump();
                if m == "max" {
                    AssignKind::Max
                } else {
                    AssignKind::Min
                }
            }
            _ => return Err(self.expected("an assignment (`=`, `+=`, `+=!`, `max=!`, …)")),
        };
        let mut op_end = self.bump().span;
        // `!` right after the operator, with no space, makes it a reduction with initialisation.
        let init = self.peek() == &Tok::Bang && self.span().start == op_end.end;
        if init {
            op_end = self.bump().span;
        }
        let op_span = op_start.join(op_end);
        if init && matches!(kind, AssignKind::Set | AssignKind::Sub) {
            return Err(
                Diagnostic::new(op_span, "this operator has no reduction form")
                    .with_hint("reductions are `+=!`, `*=!`, `max=!` and `min=!`"),
            );
        }
        let rhs = self.expr()?;
        let mut wheres = Vec::new();
        if self.at_keyword("where") {
            self.bump();
            loop {
                wheres.push(self.where_clause()?);
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
        }
        let end = self.expect(&Tok::Semi)?;
        Ok(TensorStmt {
            span: lhs.span.join(end),
            lhs,
            subs,
            kind,
            init,
            op_span,
            rhs,
            wheres,
        })
    }

    fn where_clause(&mut self) -> PResult<Where> {
        if matches!(self.peek(), Tok::Ident(_))
            && matches!(self.peek_at(1), Tok::Ident(s) if s == "in")
        {
            let index = self.ident("an index")?;
            self.bump();
            let lo = self.expr()?;
            self.expect(&Tok::Colon)?;
            let hi = self.expr()?;
            return Ok(Where::Range { index, lo, hi });
        }
        Ok(Where::Cond(self.expr()?))
    }

    pub(crate) fn expr(&mut self) -> PResult<Expr> {
        self.enter()?;
        let e = self.ternary()?;
        self.leave();
        if e.height > MAX_HEIGHT {
            return Err(Diagnostic::new(e.span, "expression nested too deeply")
                .with_hint("split it into several statements"));
        }
        Ok(e)
    }

    fn ternary(&mut self) -> PResult<Expr> {
        let cond = self.binary(0)?;
        if self.eat(&Tok::Question) {
            let then = self.expr()?;
            self.expect(&Tok::Colon)?;
            let otherwise = self.expr()?;
            let span = cond.span.join(otherwise.span);
            return Ok(Expr::node(
                ExprKind::Ternary(Box::new(cond), Box::new(then), Box::new(otherwise)),
                span,
            ));
        }
        Ok(cond)
    }

    /// Left-associative binary operators of precedence level `level` and tighter.
    fn binary(&mut self, level: usize) -> PResult<Expr> {
        const LEVELS: &[&[(Tok, BinOp)]] = &[
            &[(Tok::OrOr, BinOp::Or)],
            &[(Tok::AndAnd, BinOp::And)],
            &[(Tok::EqEq, BinOp::Eq), (Tok::Ne, BinOp::Ne)],
            &[
                (Tok::Lt, BinOp::Lt),
                (Tok::Le, BinOp::Le),
                (Tok::Gt, BinOp::Gt),
                (Tok::Ge, BinOp::Ge),
            ],
            &[(Tok::Plus, BinOp::Add), (Tok::Minus, BinOp::Sub)],
            &[
                (Tok::Star, BinOp::Mul),
                (Tok::Slash, BinOp::Div),
                (Tok::Percent, BinOp::Rem),
            ],
        ];
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut lhs = self.binary(level + 1)?;
        loop {
            let Some(&(_, op)) = LEVELS[level].iter().find(|(t, _)| t == self.peek()) else {
                return Ok(lhs);
            };
            self.bump();
            let rhs = self.binary(level + 1)?;
            let span = lhs.span.join(rhs.span);
            lhs = Expr::node(ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), span);
            if lhs.height > MAX_HEIGHT {
                return Err(Diagnostic::new(span, "expression nested too deeply")
                    .with_hint("split it into several statements"));
            }
        }
    }

    fn unary(&mut self) -> PResult<Expr> {
        let op = match self.peek() {
            Tok::Minus => UnOp::Neg,
            Tok::Bang => UnOp::Not,
            _ => return self.primary(),
        };
        let start = self.bump().span;
        self.enter()?;
        let operand = self.unary()?;
        self.leave();
        let span = start.join(operand.span);
        Ok(Expr::node(ExprKind::Unary(op, Box::new(operand)), span))
    }

    fn primary(&mut self) -> PResult<Expr> {
        let span = self.span();
        match self.peek().clone() {
            Tok::Int(v) => {
                self.bump();
                Ok(Expr::leaf(ExprKind::Int(v), span))
            }
            Tok::Float(v) => {
                self.bump();
                Ok(Expr::leaf(ExprKind::Float(v), span))
            }
            Tok::LParen => {
                self.bump();
                let mut e = self.expr()?;
                let end = self.expect(&Tok::RParen)?;
                e.span = span.join(end);
                Ok(e)
            }
            Tok::Ident(name) if name == "true" || name == "false" => {
                self.bump();
                Ok(Expr::leaf(ExprKind::Bool(name == "true"), span))
            }
            Tok::Ident(_) => {
                // Type names are not keywords elsewhere, but here they are casts.
                let name = match self.peek() {
                    Tok::Ident(n) if parse_type_name(n).is_some() => {
                        let n = n.clone();
                        self.bump();
                        Ident { name: n, span }
                    }
                    _ => self.ident("an expression")?,
                };
                if self.eat(&Tok::LParen) {
                    let mut args = Vec::new();
                    while self.peek() != &Tok::RParen {
                        args.push(self.expr()?);
                        if !self.eat(&Tok::Comma) {
                            break;
                        }
                    }
                    let end = self.expect(&Tok::RParen)?;
                    Ok(Expr::node(ExprKind::Call(name, args), span.join(end)))
                } else {
                    Ok(Expr::leaf(ExprKind::Name(name), span))
                }
            }
            _ => Err(self.expected("an expression")),
        }
    }
}

/// The one-line hint for an "expected X" error.
fn hint_for(what: &str) -> String {
    match what {
        "`;`" => "every statement ends with `;`".to_string(),
        "`fn` or `kernel`" => {
            "a file holds `fn name(…) -> type { … }` functions and one `kernel name<…>(…) -> (…) { … }`"
                .to_string()
        }
        _ => format!("insert {what} here"),
    }
}
