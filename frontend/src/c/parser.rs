//! Finds the kernel in a preprocessed translation unit and parses it.
//!
//! Outside the function that holds `#pragma scop`, only the declarations of variables at file
//! scope before it are read (arrays and scalars: the kernel's data, as its parameters are);
//! everything else is skipped by matching braces, so arbitrary C (harness code, `main`,
//! headers' declarations) never has to parse. A `#pragma scop` at file scope is a fragment
//! with no function around it. Of the kernel function, the parameter list, the declarations
//! before the SCoP and the SCoP itself are parsed; code after `#pragma endscop` is ignored. File-scope `typedef`s of
//! arithmetic types (`typedef char base;`) are recorded and expanded in the kernel's
//! declarations. `a = b = e;` is split into `b = e; a = b;`.

use super::ast::{BinOp, CType, Decl, Expr, ExprKind, Kernel, Stmt, StmtKind, UnOp};
use super::cond::parse_int;
use super::lexer::{TokKind, Token};
use super::{CError, Loc};

const SCOP_HINT: &str =
    "a SCoP holds for loops with affine bounds, affine ifs and assignments to array elements";

/// Nesting deeper than this is rejected rather than risking the stack.
const MAX_NESTING: usize = 200;

fn is_type_word(name: &str) -> bool {
    matches!(
        name,
        "int"
            | "long"
            | "short"
            | "char"
            | "unsigned"
            | "signed"
            | "float"
            | "double"
            | "const"
            | "volatile"
            | "static"
            | "register"
            | "restrict"
            | "__restrict"
            | "__restrict__"
            | "inline"
            | "extern"
            | "auto"
            | "void"
            | "size_t"
            | "ssize_t"
            | "ptrdiff_t"
            | "intptr_t"
            | "uintptr_t"
            | "int8_t"
            | "int16_t"
            | "int32_t"
            | "int64_t"
            | "uint8_t"
            | "uint16_t"
            | "uint32_t"
            | "uint64_t"
    )
}

/// The name of a type that is fine for sizes and iterators only, as a static string.
fn index_type(word: &str) -> &'static str {
    match word {
        "size_t" => "size_t",
        "uintptr_t" => "uintptr_t",
        "uint8_t" => "uint8_t",
        "uint16_t" => "uint16_t",
        "uint32_t" => "uint32_t",
        "uint64_t" => "uint64_t",
        "ssize_t" => "ssize_t",
        "ptrdiff_t" => "ptrdiff_t",
        "intptr_t" => "intptr_t",
        _ => "int64_t",
    }
}

/// Locates the kernel function and parses it.
pub(crate) fn parse_kernel(tokens: &[Token]) -> Result<Kernel, CError> {
    let Some(begin) = tokens.iter().position(|t| t.kind == TokKind::ScopBegin) else {
        if let Some(end) = tokens.iter().find(|t| t.kind == TokKind::ScopEnd) {
            return Err(CError::new(
                end.loc,
                "#pragma endscop without #pragma scop",
                "mark the start of the kernel with #pragma scop",
            ));
        }
        return Err(CError::new(
            Loc::default(),
            "no `#pragma scop` in the file",
            "mark the kernel's loop nest with #pragma scop and #pragma endscop",
        ));
    };
    let begin_loc = tokens[begin].loc;
    let Some(end) = (begin + 1..tokens.len()).find(|&k| tokens[k].kind == TokKind::ScopEnd) else {
        return Err(CError::new(
            begin_loc,
            "unterminated SCoP: no #pragma endscop after this #pragma scop",
            "close the kernel's loop nest with #pragma endscop",
        ));
    };
    if let Some(again) = tokens[end + 1..]
        .iter()
        .find(|t| t.kind == TokKind::ScopBegin)
    {
        return Err(CError::new(
            again.loc,
            "a second #pragma scop: one SCoP per file is supported yet",
            "compile each kernel from its own file",
        ));
    }
    // The top-level braces around the pragma are the kernel function's body.
    let mut depth = 0usize;
    let mut decl_start = 0;
    let mut body_open = None;
    for (k, t) in tokens[..begin].iter().enumerate() {
        if t.is("{") {
            if depth == 0 {
                body_open = Some(k);
            }
            depth += 1;
        } else if t.is("}") {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                decl_start = k + 1;
                body_open = None;
            }
        } else if t.is(";") && depth == 0 {
            decl_start = k + 1;
        }
    }
    // A SCoP at file scope is a fragment: no function, only the declarations before it.
    let (file_scope, function) = match body_open {
        Some(open) => (&tokens[..decl_start], Some(open)),
        None => (&tokens[..begin], None),
    };
    let typedefs = collect_typedefs(file_scope);
    let globals = parse_globals(&expand_typedefs(file_scope, &typedefs));
    let (name, params, locals) = match function {
        Some(open) => {
            let header = expand_typedefs(&tokens[decl_start..open], &typedefs);
            let (name, params) = parse_header(&header, tokens[open].loc)?;
            let locals = parse_locals(&expand_typedefs(&tokens[open + 1..begin], &typedefs))?;
            (name, params, locals)
        }
        None => (String::new(), Vec::new(), Vec::new()),
    };
    let mut p = Parser::new(&tokens[begin + 1..end], tokens[end].loc);
    let mut body = Vec::new();
    while p.pos < p.tokens.len() {
        body.push(p.statement()?);
    }
    let locals = merge_inner(locals, p.inner)?;
    Ok(Kernel {
        name,
        globals,
        params,
        locals,
        body,
        scop: Loc {
            file: begin_loc.file,
            span: begin_loc.span.join(tokens[end].loc.span),
        },
    })
}

/// `static void kernel_gemm(int ni, DATA_TYPE A[NI][NK], …)`: the name and the parameters.
fn parse_header(header: &[Token], open_loc: Loc) -> Result<(String, Vec<Decl>), CError> {
    let bad = || {
        CError::new(
            open_loc,
            "cannot read the header of the function holding the SCoP",
            "write the kernel as `void name(type param, …) { … }`",
        )
    };
    let (Some(close), true) = (
        header.len().checked_sub(1),
        header.last().is_some_and(|t| t.is(")")),
    ) else {
        return Err(bad());
    };
    let mut depth = 0usize;
    let mut lparen = None;
    for k in (0..=close).rev() {
        if header[k].is(")") {
            depth += 1;
        } else if header[k].is("(") {
            depth -= 1;
            if depth == 0 {
                lparen = Some(k);
                break;
            }
        }
    }
    let Some(lparen) = lparen else {
        return Err(bad());
    };
    let name = match lparen.checked_sub(1).map(|k| &header[k]) {
        Some(t) if t.kind == TokKind::Ident => t.text.clone(),
        _ => return Err(bad()),
    };
    let inner = &header[lparen + 1..close];
    let mut params = Vec::new();
    if inner.len() == 1 && inner[0].is_ident("void") || inner.is_empty() {
        return Ok((name, params));
    }
    for piece in split_top_level(inner, ",") {
        if piece.is_empty() {
            return Err(bad());
        }
        let mut p = Parser::new(piece, piece[piece.len() - 1].loc);
        let ty = p.type_specifiers()?;
        let decl = p.declarator(ty)?;
        p.expect_end("a parameter declaration")?;
        params.push(decl);
    }
    Ok((name, params))
}

/// Splits at `sep` tokens outside parentheses and brackets.
fn split_top_level<'t>(tokens: &'t [Token], sep: &str) -> Vec<&'t [Token]> {
    let mut pieces = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (k, t) in tokens.iter().enumerate() {
        if t.is("(") || t.is("[") || t.is("{") {
            depth += 1;
        } else if t.is(")") || t.is("]") || t.is("}") {
            depth = depth.saturating_sub(1);
        } else if t.is(sep) && depth == 0 {
            pieces.push(&tokens[start..k]);
            start = k + 1;
        }
    }
    pieces.push(&tokens[start..]);
    pieces
}

/// `a = b = e;` as the statements `b = e; a = b;`, innermost first: C gives an assignment
/// the value of its left operand after the store, so reading the inner target back is exact
/// (both conversions happen as in C). Works for compound inner assignments (`a = b += e`)
/// too. Anything else is pushed unchanged.
fn split_chained_assignment(e: Expr, out: &mut Vec<Expr>) {
    let Expr {
        kind: ExprKind::Assign(op, target, rhs),
        loc,
    } = e
    else {
        out.push(e);
        return;
    };
    if !matches!(rhs.kind, ExprKind::Assign(..)) {
        out.push(Expr {
            kind: ExprKind::Assign(op, target, rhs),
            loc,
        });
        return;
    }
    let ExprKind::Assign(_, inner_target, _) = &rhs.kind else {
        unreachable!("matched as an assignment just above")
    };
    let value = inner_target.as_ref().clone();
    split_chained_assignment(*rhs, out);
    out.push(Expr {
        kind: ExprKind::Assign(op, target, Box::new(value)),
        loc,
    });
}

/// `typedef char base;` at file scope: the alias and the type words it stands for. Typedefs
/// of structs, pointers, arrays or function types are not recorded; a kernel using one
/// reports an unknown type.
pub(crate) fn collect_typedefs(tokens: &[Token]) -> Vec<(String, Vec<Token>)> {
    let mut out: Vec<(String, Vec<Token>)> = Vec::new();
    let mut depth = 0usize;
    let mut k = 0;
    while k < tokens.len() {
        let t = &tokens[k];
        if t.is("{") {
            depth += 1;
        } else if t.is("}") {
            depth = depth.saturating_sub(1);
        } else if depth == 0 && t.is_ident("typedef") {
            let Some(len) = tokens[k + 1..].iter().position(|t| t.is(";")) else {
                break;
            };
            let words = &tokens[k + 1..k + 1 + len];
            if let [spec @ .., name] = words {
                let spec_ok = !spec.is_empty()
                    && spec.iter().all(|w| {
                        w.kind == TokKind::Ident
                            && (is_type_word(&w.text) || out.iter().any(|(n, _)| *n == w.text))
                    });
                if spec_ok && name.kind == TokKind::Ident && !is_type_word(&name.text) {
                    let expanded = expand_typedefs(spec, &out);
                    out.push((name.text.clone(), expanded));
                }
            }
            k += len + 1;
        }
        k += 1;
    }
    out
}

/// `tokens` with every typedef name replaced by the type words it stands for, located at the
/// use.
pub(crate) fn expand_typedefs(tokens: &[Token], typedefs: &[(String, Vec<Token>)]) -> Vec<Token> {
    let mut out = Vec::with_capacity(tokens.len());
    for t in tokens {
        match typedefs
            .iter()
            .rev()
            .find(|(n, _)| t.kind == TokKind::Ident && *n == t.text)
        {
            Some((_, words)) => out.extend(words.iter().map(|w| Token {
                loc: t.loc,
                ..w.clone()
            })),
            None => out.push(t.clone()),
        }
    }
    out
}

/// A local's initial value when it is one expression; otherwise where it starts (a brace
/// list, a statement expression, …), for the error if the SCoP reads the local.
fn parse_initializer(tokens: &[Token], at: Loc) -> Result<Expr, Loc> {
    let Some(last) = tokens.last() else {
        return Err(at);
    };
    let mut p = Parser::new(tokens, last.loc);
    match p.expr() {
        Ok(e) if p.pos == tokens.len() => Ok(e),
        _ => Err(tokens[0].loc),
    }
}

/// The statements of `tokens`: each up to `;` outside braces, or a whole braced block.
fn statements(tokens: &[Token]) -> Vec<&[Token]> {
    let mut out = Vec::new();
    let mut k = 0;
    while k < tokens.len() {
        // One statement: up to `;` outside braces, or a whole braced block.
        let mut depth = 0usize;
        let mut end = k;
        while end < tokens.len() {
            let t = &tokens[end];
            if t.is("{") {
                depth += 1;
            } else if t.is("}") {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            } else if t.is(";") && depth == 0 {
                break;
            }
            end += 1;
        }
        out.push(&tokens[k..end.min(tokens.len())]);
        k = end + 1;
    }
    out
}

/// Whether `stmt` starts like a declaration (with a type word).
fn starts_declaration(stmt: &[Token]) -> bool {
    stmt.first()
        .is_some_and(|t| t.kind == TokKind::Ident && is_type_word(&t.text))
}

/// The declarators of the declaration `stmt`, with their initializers.
fn declaration(stmt: &[Token]) -> Result<Vec<Decl>, CError> {
    let mut p = Parser::new(stmt, stmt[stmt.len() - 1].loc);
    let ty = p.type_specifiers()?;
    let mut out = Vec::new();
    loop {
        let mut decl = p.declarator(ty)?;
        if p.eat("=") {
            let rest = split_top_level(&p.tokens[p.pos..], ",");
            decl.init = Some(parse_initializer(rest[0], p.loc()));
            p.pos += rest[0].len();
        }
        out.push(decl);
        if !p.eat(",") {
            break;
        }
    }
    p.expect_end("a declaration")?;
    Ok(out)
}

/// The kernel's locals with the variables declared inside the SCoP: a block-scoped variable
/// is one temporary of the kernel (C gives it no value on entry to its block, so no value
/// passes from one entry to the next). Blocks may declare one name again with the same type;
/// a name that shadows a local, or is declared again with another type, is refused.
fn merge_inner(mut locals: Vec<Decl>, inner: Vec<Decl>) -> Result<Vec<Decl>, CError> {
    let outer = locals.len();
    for d in inner {
        match locals.iter().position(|l| l.name == d.name) {
            None => locals.push(d),
            Some(k)
                if k >= outer
                    && locals[k].ty == d.ty
                    && locals[k].dims.is_empty()
                    && d.dims.is_empty() => {}
            Some(_) => {
                return Err(CError::new(
                    d.loc,
                    format!("`{}` is declared again inside the SCoP", d.name),
                    "give the variables of the SCoP's blocks names of their own",
                ))
            }
        }
    }
    Ok(locals)
}

/// Declarations at the top of the kernel body; other statements there are skipped.
fn parse_locals(tokens: &[Token]) -> Result<Vec<Decl>, CError> {
    let mut locals = Vec::new();
    for stmt in statements(tokens) {
        if starts_declaration(stmt) {
            locals.extend(declaration(stmt)?);
        }
    }
    Ok(locals)
}

/// The variables declared at file scope: declarations of arrays and scalars outside any
/// function. Function prototypes and definitions, typedefs, struct definitions and
/// declarations polyfuse cannot read are skipped (a header's own declarations need not be
/// SCoP data); a SCoP that uses such a name says it does not know it.
fn parse_globals(tokens: &[Token]) -> Vec<Decl> {
    statements(tokens)
        .into_iter()
        .filter(|stmt| starts_declaration(stmt))
        .filter(|stmt| !stmt.iter().any(|t| t.is("(") || t.is("{")))
        .filter_map(|stmt| declaration(stmt).ok())
        .flatten()
        .collect()
}

struct Parser<'t> {
    tokens: &'t [Token],
    pos: usize,
    /// Where "unexpected end" errors point.
    end_loc: Loc,
    depth: usize,
    /// `char` or `short` when the last type specifiers named one (kept as `int` data).
    narrow: Option<&'static str>,
    /// The type the last type specifiers named when it is fine for sizes and iterators but
    /// not for data (`unsigned`, `size_t`, `int64_t`, …).
    index_only: Option<&'static str>,
    /// The declarations met inside the SCoP, in order.
    inner: Vec<Decl>,
}

impl<'t> Parser<'t> {
    /// A parser of `tokens`, whose "unexpected end" errors point at `end_loc`.
    fn new(tokens: &'t [Token], end_loc: Loc) -> Parser<'t> {
        Parser {
            tokens,
            pos: 0,
            end_loc,
            depth: 0,
            narrow: None,
            index_only: None,
            inner: Vec::new(),
        }
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn loc(&self) -> Loc {
        self.peek().map_or(self.end_loc, |t| t.loc)
    }

    fn at(&self, punct: &str) -> bool {
        self.peek().is_some_and(|t| t.is(punct))
    }

    fn eat(&mut self, punct: &str) -> bool {
        let yes = self.at(punct);
        if yes {
            self.pos += 1;
        }
        yes
    }

    fn syntax_error(&self, expected: &str) -> CError {
        let found = match self.peek() {
            Some(t) if t.kind == TokKind::ScopEnd => "#pragma endscop".to_string(),
            Some(t) => format!("`{}`", t.text),
            None => "the end of the SCoP".to_string(),
        };
        CError::new(
            self.loc(),
            format!("expected {expected}, found {found}"),
            "check the syntax around here",
        )
    }

    fn expect(&mut self, punct: &str) -> Result<(), CError> {
        if self.eat(punct) {
            Ok(())
        } else {
            Err(self.syntax_error(&format!("`{punct}`")))
        }
    }

    fn expect_end(&self, what: &str) -> Result<(), CError> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.syntax_error(&format!("the end of {what}"))),
        }
    }

    fn enter(&mut self) -> Result<(), CError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(CError::new(
                self.loc(),
                "nesting too deep",
                "simplify the expression or loop nest",
            ));
        }
        Ok(())
    }

    /// `static const double` …: the type a declaration's specifiers name.
    fn type_specifiers(&mut self) -> Result<CType, CError> {
        let start = self.loc();
        let mut ty = None;
        let mut any_int = false;
        self.narrow = None;
        self.index_only = None;
        while let Some(t) = self.peek() {
            if t.kind != TokKind::Ident || !is_type_word(&t.text) {
                break;
            }
            match t.text.as_str() {
                "double" => ty = Some(CType::Double),
                "float" => ty = Some(CType::Float),
                "char" => {
                    any_int = true;
                    self.narrow = Some("char");
                }
                "short" => {
                    any_int = true;
                    self.narrow = Some("short");
                }
                "int8_t" | "int16_t" => {
                    any_int = true;
                    self.narrow = Some(if t.text == "int8_t" {
                        "int8_t"
                    } else {
                        "int16_t"
                    });
                }
                "unsigned" => {
                    any_int = true;
                    self.index_only = Some("unsigned");
                }
                word @ ("size_t" | "uintptr_t" | "uint8_t" | "uint16_t" | "uint32_t"
                | "uint64_t" | "ssize_t" | "ptrdiff_t" | "intptr_t" | "int64_t") => {
                    any_int = true;
                    self.index_only = Some(index_type(word));
                }
                "int" | "long" | "signed" | "int32_t" => any_int = true,
                "void" => {
                    return Err(CError::new(
                        t.loc,
                        "`void` data is not supported in a kernel",
                        "give parameters and locals an arithmetic type",
                    ))
                }
                _ => {}
            }
            self.pos += 1;
        }
        match (ty, any_int) {
            (Some(t), _) => Ok(t),
            (None, true) => Ok(CType::Int),
            (None, false) => {
                let what = self
                    .peek()
                    .map_or(String::new(), |t| format!(" `{}`", t.text));
                Err(CError::new(
                    if self.peek().is_some() {
                        self.loc()
                    } else {
                        start
                    },
                    format!("unknown type{what}"),
                    "kernel data must be int, float or double (DATA_TYPE is a macro for one)",
                ))
            }
        }
    }

    /// `*name[N][M]` after the type specifiers.
    fn declarator(&mut self, ty: CType) -> Result<Decl, CError> {
        let mut pointer = false;
        while self.eat("*") {
            pointer = true;
            while self
                .peek()
                .is_some_and(|t| t.kind == TokKind::Ident && is_type_word(&t.text))
            {
                self.pos += 1;
            }
        }
        let Some(name) = self.peek().filter(|t| t.kind == TokKind::Ident).cloned() else {
            return Err(self.syntax_error("a variable name"));
        };
        self.pos += 1;
        let mut dims = Vec::new();
        while self.eat("[") {
            while self
                .peek()
                .is_some_and(|t| t.kind == TokKind::Ident && is_type_word(&t.text))
            {
                self.pos += 1;
            }
            if self.eat("]") {
                dims.push(None);
                continue;
            }
            dims.push(Some(self.expr()?));
            self.expect("]")?;
        }
        Ok(Decl {
            name: name.text,
            loc: name.loc,
            ty,
            narrow: self.narrow,
            index_only: self.index_only,
            dims,
            pointer,
            init: None,
        })
    }

    fn statement(&mut self) -> Result<Stmt, CError> {
        self.enter()?;
        let s = self.statement_inner();
        self.depth -= 1;
        s
    }

    fn statement_inner(&mut self) -> Result<Stmt, CError> {
        let Some(t) = self.peek().cloned() else {
            return Err(self.syntax_error("a statement"));
        };
        let loc = t.loc;
        if t.kind == TokKind::ScopBegin {
            return Err(CError::new(
                loc,
                "#pragma scop inside a SCoP",
                "close the first SCoP with #pragma endscop",
            ));
        }
        if t.is("{") {
            self.pos += 1;
            let mut stmts = Vec::new();
            while !self.at("}") {
                if self.peek().is_none() {
                    return Err(self.syntax_error("`}`"));
                }
                stmts.push(self.statement()?);
            }
            self.pos += 1;
            return Ok(Stmt {
                kind: StmtKind::Block(stmts),
                loc,
            });
        }
        if t.is(";") {
            self.pos += 1;
            return Ok(Stmt {
                kind: StmtKind::Empty,
                loc,
            });
        }
        if t.kind == TokKind::Ident {
            match t.text.as_str() {
                "for" => return self.for_statement(loc),
                "if" => {
                    self.pos += 1;
                    self.expect("(")?;
                    let cond = self.expr()?;
                    self.expect(")")?;
                    let then = Box::new(self.statement()?);
                    let otherwise = if self.peek().is_some_and(|t| t.is_ident("else")) {
                        self.pos += 1;
                        Some(Box::new(self.statement()?))
                    } else {
                        None
                    };
                    return Ok(Stmt {
                        kind: StmtKind::If {
                            cond,
                            then,
                            otherwise,
                        },
                        loc,
                    });
                }
                "while" | "do" | "goto" | "return" | "break" | "continue" | "switch" | "case"
                | "default" => {
                    return Err(CError::new(
                        loc,
                        format!("`{}` is not supported in a SCoP", t.text),
                        SCOP_HINT,
                    ))
                }
                name if is_type_word(name) => return self.inner_declaration(loc),
                _ => {}
            }
        }
        let e = self.expr()?;
        self.expect(";")?;
        let mut chain = Vec::new();
        split_chained_assignment(e, &mut chain);
        if chain.len() == 1 {
            // One element was pushed just above.
            let e = chain.pop().expect("one assignment");
            return Ok(Stmt {
                kind: StmtKind::Expr(e),
                loc,
            });
        }
        Ok(Stmt {
            kind: StmtKind::Block(
                chain
                    .into_iter()
                    .map(|e| Stmt {
                        loc: e.loc,
                        kind: StmtKind::Expr(e),
                    })
                    .collect(),
            ),
            loc,
        })
    }

    /// A declaration inside the SCoP (`double s = 0.0;`, `int c;`): the variables go to
    /// [`Parser::inner`], and what runs there is the assignment of each initializer.
    fn inner_declaration(&mut self, loc: Loc) -> Result<Stmt, CError> {
        let end = (self.pos..self.tokens.len())
            .find(|&k| self.tokens[k].is(";"))
            .ok_or_else(|| self.syntax_error("`;` after the declaration"))?;
        let decls = declaration(&self.tokens[self.pos..end])?;
        self.pos = end + 1;
        let mut assignments = Vec::new();
        for mut d in decls {
            match d.init.take() {
                None => {}
                Some(Ok(value)) if d.dims.is_empty() && !d.pointer => {
                    let target = Expr {
                        kind: ExprKind::Name {
                            name: d.name.clone(),
                            size: None,
                        },
                        loc: d.loc,
                    };
                    assignments.push(Stmt {
                        kind: StmtKind::Expr(Expr {
                            kind: ExprKind::Assign(None, Box::new(target), Box::new(value)),
                            loc: d.loc,
                        }),
                        loc: d.loc,
                    });
                }
                Some(Ok(e)) => {
                    return Err(CError::new(
                        e.loc,
                        format!("initializer of array `{}` is not supported", d.name),
                        "set the array's elements with assignments in the SCoP",
                    ))
                }
                Some(Err(at)) => {
                    return Err(CError::new(
                        at,
                        format!("initializer of `{}` is not supported", d.name),
                        "initialize a scalar with one expression, e.g. double s = 0.0;",
                    ))
                }
            }
            self.inner.push(d);
        }
        Ok(Stmt {
            kind: StmtKind::Block(assignments),
            loc,
        })
    }

    fn for_statement(&mut self, loc: Loc) -> Result<Stmt, CError> {
        self.pos += 1;
        self.expect("(")?;
        // `for (int i = 0; …)` declares the iterator; the type does not matter here.
        while self
            .peek()
            .is_some_and(|t| t.kind == TokKind::Ident && is_type_word(&t.text))
        {
            self.pos += 1;
        }
        let init = if self.at(";") {
            None
        } else {
            Some(self.expr()?)
        };
        self.expect(";")?;
        let cond = if self.at(";") {
            None
        } else {
            Some(self.expr()?)
        };
        self.expect(";")?;
        let step = if self.at(")") {
            None
        } else {
            Some(self.expr()?)
        };
        self.expect(")")?;
        let body = Box::new(self.statement()?);
        Ok(Stmt {
            kind: StmtKind::For {
                init,
                cond,
                step,
                body,
            },
            loc,
        })
    }

    pub fn expr(&mut self) -> Result<Expr, CError> {
        self.enter()?;
        let e = self.assignment();
        self.depth -= 1;
        e
    }

    fn assignment(&mut self) -> Result<Expr, CError> {
        let lhs = self.conditional()?;
        let op = match self.peek() {
            Some(t) if t.kind == TokKind::Punct => match t.text.as_str() {
                "=" => Some(None),
                "+=" => Some(Some(BinOp::Add)),
                "-=" => Some(Some(BinOp::Sub)),
                "*=" => Some(Some(BinOp::Mul)),
                "/=" => Some(Some(BinOp::Div)),
                "%=" => Some(Some(BinOp::Rem)),
                "<<=" | ">>=" | "&=" | "|=" | "^=" => return Err(self.bitwise()),
                _ => None,
            },
            _ => None,
        };
        let Some(op) = op else { return Ok(lhs) };
        self.pos += 1;
        let rhs = self.expr()?;
        let loc = lhs.loc;
        Ok(Expr {
            kind: ExprKind::Assign(op, Box::new(lhs), Box::new(rhs)),
            loc,
        })
    }

    fn bitwise(&self) -> CError {
        CError::new(
            self.loc(),
            format!(
                "operator `{}` is not supported in a SCoP",
                self.peek().map_or("", |t| t.text.as_str())
            ),
            "kernels use + - * / % comparisons && || ! and ?:",
        )
    }

    fn conditional(&mut self) -> Result<Expr, CError> {
        let c = self.binary(0)?;
        if !self.eat("?") {
            return Ok(c);
        }
        let a = self.expr()?;
        self.expect(":")?;
        self.enter()?;
        let b = self.conditional();
        self.depth -= 1;
        let b = b?;
        let loc = c.loc;
        Ok(Expr {
            kind: ExprKind::Cond(Box::new(c), Box::new(a), Box::new(b)),
            loc,
        })
    }

    fn binary(&mut self, min_prec: u8) -> Result<Expr, CError> {
        let mut lhs = self.unary()?;
        while let Some(t) = self.peek().filter(|t| t.kind == TokKind::Punct) {
            let (op, prec) = match t.text.as_str() {
                "||" => (BinOp::Or, 1),
                "&&" => (BinOp::And, 2),
                "==" => (BinOp::Eq, 3),
                "!=" => (BinOp::Ne, 3),
                "<" => (BinOp::Lt, 4),
                ">" => (BinOp::Gt, 4),
                "<=" => (BinOp::Le, 4),
                ">=" => (BinOp::Ge, 4),
                "+" => (BinOp::Add, 5),
                "-" => (BinOp::Sub, 5),
                "*" => (BinOp::Mul, 6),
                "/" => (BinOp::Div, 6),
                "%" => (BinOp::Rem, 6),
                "|" | "&" | "^" | "<<" | ">>" => return Err(self.bitwise()),
                _ => break,
            };
            if prec < min_prec {
                break;
            }
            self.pos += 1;
            self.enter()?;
            let rhs = self.binary(prec + 1);
            self.depth -= 1;
            let rhs = rhs?;
            let loc = Loc {
                file: lhs.loc.file,
                span: if lhs.loc.file == rhs.loc.file {
                    lhs.loc.span.join(rhs.loc.span)
                } else {
                    lhs.loc.span
                },
            };
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                loc,
            };
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, CError> {
        self.enter()?;
        let e = self.unary_inner();
        self.depth -= 1;
        e
    }

    fn unary_inner(&mut self) -> Result<Expr, CError> {
        let Some(t) = self.peek().cloned() else {
            return Err(self.syntax_error("an expression"));
        };
        let loc = t.loc;
        let wrap = |kind| Expr { kind, loc };
        if t.kind == TokKind::Punct {
            match t.text.as_str() {
                "-" => {
                    self.pos += 1;
                    let a = self.unary()?;
                    return Ok(wrap(ExprKind::Unary(UnOp::Neg, Box::new(a))));
                }
                "+" => {
                    self.pos += 1;
                    return self.unary();
                }
                "!" => {
                    self.pos += 1;
                    let a = self.unary()?;
                    return Ok(wrap(ExprKind::Unary(UnOp::Not, Box::new(a))));
                }
                "++" | "--" => {
                    self.pos += 1;
                    let a = self.unary()?;
                    let delta = if t.text == "++" { 1 } else { -1 };
                    return Ok(wrap(ExprKind::Step {
                        target: Box::new(a),
                        delta,
                    }));
                }
                "~" | "&" | "*" => return Err(self.bitwise_or_pointer()),
                "(" => {
                    let is_cast = self
                        .tokens
                        .get(self.pos + 1)
                        .is_some_and(|n| n.kind == TokKind::Ident && is_type_word(&n.text));
                    if is_cast {
                        self.pos += 1;
                        let ty = self.type_specifiers()?;
                        if self.at("*") {
                            return Err(self.bitwise_or_pointer());
                        }
                        self.expect(")")?;
                        let a = self.unary()?;
                        return Ok(wrap(ExprKind::Cast(ty, Box::new(a))));
                    }
                }
                _ => {}
            }
        }
        self.postfix()
    }

    fn bitwise_or_pointer(&self) -> CError {
        CError::new(
            self.loc(),
            format!(
                "`{}` (pointers and bit operations) is not supported in a SCoP",
                self.peek().map_or("", |t| t.text.as_str())
            ),
            "index arrays with subscripts: A[i][j]",
        )
    }

    fn postfix(&mut self) -> Result<Expr, CError> {
        let mut e = self.primary()?;
        loop {
            let loc = e.loc;
            if self.eat("[") {
                let index = self.expr()?;
                self.expect("]")?;
                e = Expr {
                    kind: ExprKind::Index(Box::new(e), Box::new(index)),
                    loc,
                };
            } else if self.at("(") {
                let ExprKind::Name { name, .. } = &e.kind else {
                    return Err(CError::new(
                        self.loc(),
                        "only named functions can be called",
                        "call math functions by name: sqrt(x)",
                    ));
                };
                let name = name.clone();
                self.pos += 1;
                let mut args = Vec::new();
                if !self.eat(")") {
                    loop {
                        args.push(self.conditional_arg()?);
                        if self.eat(")") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                e = Expr {
                    kind: ExprKind::Call { name, args },
                    loc,
                };
            } else if self.at("++") || self.at("--") {
                let delta = if self.at("++") { 1 } else { -1 };
                self.pos += 1;
                e = Expr {
                    kind: ExprKind::Step {
                        target: Box::new(e),
                        delta,
                    },
                    loc,
                };
            } else if self.at(".") || self.at("->") {
                return Err(CError::new(
                    self.loc(),
                    "structure members are not supported in a SCoP",
                    "use plain arrays and scalars",
                ));
            } else {
                return Ok(e);
            }
        }
    }

    /// A call argument: an expression without a top-level comma.
    fn conditional_arg(&mut self) -> Result<Expr, CError> {
        self.enter()?;
        let e = self.assignment();
        self.depth -= 1;
        e
    }

    fn primary(&mut self) -> Result<Expr, CError> {
        let Some(t) = self.peek().cloned() else {
            return Err(self.syntax_error("an expression"));
        };
        let loc = t.loc;
        let kind = match t.kind {
            TokKind::Ident => {
                if is_type_word(&t.text) || matches!(t.text.as_str(), "for" | "if" | "else") {
                    return Err(self.syntax_error("an expression"));
                }
                ExprKind::Name {
                    name: t.text.clone(),
                    size: t.size,
                }
            }
            TokKind::Number => parse_number(&t.text).ok_or_else(|| {
                CError::new(
                    loc,
                    format!("malformed number `{}`", t.text),
                    "write integers as 12 and floating constants as 1.0, 2.5e-3 or 0.5f",
                )
            })?,
            TokKind::Punct if t.text == "(" => {
                self.pos += 1;
                let e = self.expr()?;
                self.expect(")")?;
                return Ok(e);
            }
            TokKind::Str | TokKind::Char => {
                return Err(CError::new(
                    loc,
                    "string and character literals are not supported in a SCoP",
                    "kernels compute on numbers",
                ))
            }
            _ => return Err(self.syntax_error("an expression")),
        };
        self.pos += 1;
        Ok(Expr { kind, loc })
    }
}

/// An integer or floating constant as C writes it.
fn parse_number(text: &str) -> Option<ExprKind> {
    let is_float = !text.starts_with("0x")
        && !text.starts_with("0X")
        && (text.contains('.') || text.contains(['e', 'E']));
    if !is_float {
        return parse_int(text)
            .filter(|v| i32::try_from(*v).is_ok())
            .map(ExprKind::Int);
    }
    let (digits, single) = match text.strip_suffix(['f', 'F']) {
        Some(d) => (d, true),
        None => (text.strip_suffix(['l', 'L']).unwrap_or(text), false),
    };
    if digits.is_empty()
        || !digits
            .bytes()
            .all(|b| b.is_ascii_digit() || b".eE+-".contains(&b))
    {
        return None;
    }
    digits
        .parse::<f64>()
        .ok()
        .map(|value| ExprKind::Float { value, single })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_number("12"), Some(ExprKind::Int(12)));
        assert_eq!(
            parse_number("0.5f"),
            Some(ExprKind::Float {
                value: 0.5,
                single: true
            })
        );
        assert_eq!(
            parse_number("1e3"),
            Some(ExprKind::Float {
                value: 1000.0,
                single: false
            })
        );
        assert_eq!(parse_number("1.2.3"), None);
        assert_eq!(parse_number("99999999999"), None);
    }
}
