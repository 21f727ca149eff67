//! A small C preprocessor: conditional groups, object- and function-like macros (with `#`,
//! `##` and `__VA_ARGS__`), quoted and angle includes, and the two SCoP pragmas.
//!
//! Its output is the translation unit's tokens after expansion, with two differences from a C
//! compiler's that the SCoP front end relies on:
//! - an object-like macro whose replacement is an integer constant made of literals only
//!   (`#define NI 1000`, `-D N=64`) is a *size*: it is left unexpanded, as an identifier token
//!   with [`Token::size`] set to its value, so the kernel can keep the name as a parameter.
//!   Macros named `POLYBENCH_…` are the harness's switches, never sizes, and expand normally;
//! - `#pragma scop` / `#pragma endscop` in the main file become [`TokKind::ScopBegin`] /
//!   [`TokKind::ScopEnd`] tokens spanning the whole pragma line;
//! - a file's own function-like `floord` and `ceild` (Pluto defines them with `?:` and `/`)
//!   are not expanded: the SCoP front end knows them as the floor and the ceiling of a
//!   division by a positive constant.
//!
//! PolyBench's `polybench.h` is usually included with angle brackets and not on the include
//! path, so the macros the kernels use from it are predefined (see [`POLYBENCH_PRELUDE`]); a
//! real `polybench.h` found through `-I` redefines them consistently. Angle includes that are
//! not found on the include path are skipped; quoted ones that are not found are errors.
//!
//! Expansion follows the C standard's rescanning with hide sets, simplified: a token produced
//! by expanding macro `M` is never expanded as `M` again. Expansion work is bounded so that no
//! input can make it run away.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::cond::{self, parse_int};
use super::lexer::{tokenize, TokKind, Token};
use super::{CError, Loc};
use crate::{Error, Options, SourceFile};

/// What `polybench.h` provides to a kernel, for when the real header is not reachable.
pub(crate) const POLYBENCH_PRELUDE: &str = "\
#define POLYBENCH_PADDING_FACTOR 0
#define POLYBENCH_RESTRICT
#define POLYBENCH_C99_SELECT(x, y) x
#define POLYBENCH_1D(var, d1, dd1) var[d1]
#define POLYBENCH_2D(var, d1, d2, dd1, dd2) var[d1][d2]
#define POLYBENCH_3D(var, d1, d2, d3, dd1, dd2, dd3) var[d1][d2][d3]
#define POLYBENCH_4D(var, d1, d2, d3, d4, dd1, dd2, dd3, dd4) var[d1][d2][d3][d4]
#define POLYBENCH_LOOP_BOUND(x, y) x
#define SCALAR_VAL(x) x
#define SQRT_FUN(x) sqrt(x)
#define EXP_FUN(x) exp(x)
#define POW_FUN(x, y) pow(x, y)
#define DATA_TYPE double
";

const MAX_INCLUDE_DEPTH: usize = 40;
/// Macro expansions allowed in one translation unit.
const MAX_EXPANSIONS: usize = 200_000;
/// Tokens one expansion may have pending at once.
const MAX_PENDING: usize = 200_000;

#[derive(Clone, Debug)]
struct Macro {
    /// `None` for an object-like macro.
    params: Option<Vec<String>>,
    variadic: bool,
    body: Vec<Token>,
}

/// Names of macros a token must not be expanded as: a persistent list shared between the
/// tokens of one expansion.
#[derive(Clone, Debug, Default)]
struct HideSet(Option<Rc<HideNode>>);

#[derive(Debug)]
struct HideNode {
    name: Rc<str>,
    next: HideSet,
}

impl HideSet {
    fn contains(&self, name: &str) -> bool {
        let mut cur = &self.0;
        while let Some(node) = cur {
            if &*node.name == name {
                return true;
            }
            cur = &node.next.0;
        }
        false
    }

    fn with(&self, name: &str) -> HideSet {
        HideSet(Some(Rc::new(HideNode {
            name: name.into(),
            next: self.clone(),
        })))
    }
}

#[derive(Clone, Debug)]
struct PTok {
    tok: Token,
    hide: HideSet,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Program text: sizes stay names.
    Text,
    /// An `#if` line: everything expands.
    Cond,
}

struct Group {
    /// Whether lines of this group are kept.
    active: bool,
    /// Whether some branch of this `#if` chain was taken already.
    taken: bool,
    seen_else: bool,
    parent_active: bool,
    loc: Loc,
}

/// The translation unit after preprocessing.
pub(crate) struct Preprocessed {
    /// `files[0]` is the main file; headers follow in the order they were first read.
    pub files: Vec<SourceFile>,
    pub tokens: Vec<Token>,
    macros: HashMap<String, Macro>,
}

impl Preprocessed {
    /// The value of a size macro as defined at the end of the translation unit.
    pub fn size_value(&self, name: &str) -> Option<i64> {
        self.macros
            .get(name)
            .and_then(|m| literal_macro_value(name, m))
    }
}

/// Preprocesses `main` (file 0) with the options' definitions and include path.
pub(crate) fn preprocess(main: &SourceFile, options: &Options) -> Result<Preprocessed, Error> {
    let mut pp = Preprocessor {
        options,
        files: vec![main.clone()],
        macros: HashMap::new(),
        out: Vec::new(),
        expansions: 0,
    };
    let prelude = pp.add_file(SourceFile::new(
        "<polybench.h built-ins>",
        POLYBENCH_PRELUDE,
    ));
    let mut command_line = String::new();
    for (name, value) in &options.defines {
        command_line.push_str(&format!(
            "#define {name} {}\n",
            value.as_deref().unwrap_or("1")
        ));
    }
    let cl = pp.add_file(SourceFile::new("<command line>", command_line));
    let run = pp
        .process_file(prelude, 0)
        .and_then(|()| pp.process_file(cl, 0))
        .and_then(|()| pp.process_file(0, 0));
    if let Err(e) = run {
        return Err(e.into_error(&pp.files));
    }
    Ok(Preprocessed {
        files: pp.files,
        tokens: pp.out,
        macros: pp.macros,
    })
}

struct Preprocessor<'a> {
    options: &'a Options,
    files: Vec<SourceFile>,
    macros: HashMap<String, Macro>,
    out: Vec<Token>,
    expansions: usize,
}

fn directive_hint() -> &'static str {
    "supported directives: #define #undef #include #if #ifdef #ifndef #elif #else #endif #pragma"
}

/// The value of an object-like macro that is a size: see the module docs.
fn literal_macro_value(name: &str, m: &Macro) -> Option<i64> {
    if m.params.is_some() || name.starts_with("POLYBENCH_") || m.body.is_empty() {
        return None;
    }
    let literal_only = m.body.iter().all(|t| match t.kind {
        TokKind::Number => parse_int(&t.text).is_some(),
        TokKind::Punct => matches!(t.text.as_str(), "(" | ")" | "+" | "-" | "*"),
        _ => false,
    });
    if !literal_only || !m.body.iter().any(|t| t.kind == TokKind::Number) {
        return None;
    }
    cond::eval(&m.body, m.body[0].loc).ok()
}

impl Preprocessor<'_> {
    fn add_file(&mut self, file: SourceFile) -> u32 {
        self.files.push(file);
        self.files.len() as u32 - 1
    }

    fn process_file(&mut self, file: u32, depth: usize) -> Result<(), CError> {
        let text = self.files[file as usize].text.clone();
        let toks = tokenize(&text, file)?;
        let mut groups: Vec<Group> = Vec::new();
        let mut pending: Vec<Token> = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            let active = groups.last().is_none_or(|g| g.active);
            if toks[i].line_start && toks[i].is("#") {
                let end = (i + 1..toks.len())
                    .find(|&k| toks[k].line_start)
                    .unwrap_or(toks.len());
                if active {
                    self.flush(&mut pending)?;
                }
                self.directive(&toks[i], &toks[i + 1..end], &mut groups, file, depth)?;
                i = end;
            } else {
                if active {
                    pending.push(toks[i].clone());
                }
                i += 1;
            }
        }
        self.flush(&mut pending)?;
        if let Some(g) = groups.last() {
            return Err(CError::new(
                g.loc,
                "unterminated conditional group",
                "close it with `#endif`",
            ));
        }
        Ok(())
    }

    fn flush(&mut self, pending: &mut Vec<Token>) -> Result<(), CError> {
        if pending.is_empty() {
            return Ok(());
        }
        let input = pending
            .drain(..)
            .map(|tok| PTok {
                tok,
                hide: HideSet::default(),
            })
            .collect();
        let expanded = self.expand(input, Mode::Text)?;
        self.out.extend(expanded.into_iter().map(|p| p.tok));
        Ok(())
    }

    fn directive(
        &mut self,
        hash: &Token,
        line: &[Token],
        groups: &mut Vec<Group>,
        file: u32,
        depth: usize,
    ) -> Result<(), CError> {
        let active = groups.last().is_none_or(|g| g.active);
        let Some(name_tok) = line.first() else {
            return Ok(());
        };
        let rest = &line[1..];
        let line_loc = Loc {
            file,
            span: hash
                .loc
                .span
                .join(line.last().map_or(hash.loc.span, |t| t.loc.span)),
        };
        let name = if name_tok.kind == TokKind::Ident {
            name_tok.text.as_str()
        } else {
            ""
        };
        match name {
            "if" | "ifdef" | "ifndef" => {
                let cond = if !active {
                    false
                } else if name == "if" {
                    self.eval_condition(rest, name_tok.loc)? != 0
                } else {
                    let id = self.macro_name(rest, name_tok)?;
                    self.macros.contains_key(&id.text) == (name == "ifdef")
                };
                groups.push(Group {
                    active: active && cond,
                    taken: cond,
                    seen_else: false,
                    parent_active: active,
                    loc: line_loc,
                });
            }
            "elif" | "else" => {
                let Some(g) = groups.last() else {
                    return Err(CError::new(
                        line_loc,
                        format!("#{name} without #if"),
                        "every #elif / #else belongs to an #if, #ifdef or #ifndef",
                    ));
                };
                if g.seen_else {
                    return Err(CError::new(
                        line_loc,
                        format!("#{name} after #else"),
                        "#else must be the last branch of its #if",
                    ));
                }
                let (parent_active, taken) = (g.parent_active, g.taken);
                let cond = if !parent_active || taken {
                    false
                } else if name == "elif" {
                    self.eval_condition(rest, name_tok.loc)? != 0
                } else {
                    true
                };
                // `groups` is non-empty: checked above.
                let g = groups.last_mut().expect("an open group");
                g.active = parent_active && cond;
                g.taken |= cond;
                g.seen_else = name == "else";
            }
            "endif" => {
                if groups.pop().is_none() {
                    return Err(CError::new(
                        line_loc,
                        "#endif without #if",
                        "remove it, or add the #if it closes",
                    ));
                }
            }
            _ if !active => {}
            "define" => self.define(rest, name_tok)?,
            "undef" => {
                let id = self.macro_name(rest, name_tok)?;
                self.macros.remove(&id.text);
            }
            "include" => self.include(rest, line_loc, file, depth)?,
            "pragma" => self.pragma(rest, line_loc, file)?,
            "error" => {
                let text: Vec<&str> = rest.iter().map(|t| t.text.as_str()).collect();
                return Err(CError::new(
                    line_loc,
                    format!("#error {}", text.join(" ")),
                    "the file asked to stop here; check the macros it tests",
                ));
            }
            "warning" | "line" | "ident" => {}
            _ if name_tok.kind == TokKind::Number => {}
            _ => {
                return Err(CError::new(
                    name_tok.loc,
                    format!("unknown preprocessor directive `#{}`", name_tok.text),
                    directive_hint(),
                ))
            }
        }
        Ok(())
    }

    fn macro_name<'t>(&self, rest: &'t [Token], directive: &Token) -> Result<&'t Token, CError> {
        match rest.first() {
            Some(t) if t.kind == TokKind::Ident => Ok(t),
            Some(t) => Err(CError::new(
                t.loc,
                format!("expected a macro name after #{}", directive.text),
                "macro names are identifiers",
            )),
            None => Err(CError::new(
                directive.loc,
                format!("expected a macro name after #{}", directive.text),
                "macro names are identifiers",
            )),
        }
    }

    fn define(&mut self, rest: &[Token], directive: &Token) -> Result<(), CError> {
        let name = self.macro_name(rest, directive)?;
        let mut k = 1;
        let mut params = None;
        let mut variadic = false;
        if rest.get(1).is_some_and(|t| t.is("(") && !t.space_before) {
            let mut list = Vec::new();
            k = 2;
            let bad = |t: Option<&Token>| {
                CError::new(
                    t.map_or(name.loc, |t| t.loc),
                    format!("malformed parameter list of macro `{}`", name.text),
                    "write `#define NAME(a, b) replacement`",
                )
            };
            if rest.get(k).is_some_and(|t| t.is(")")) {
                k += 1;
            } else {
                loop {
                    let t = rest.get(k);
                    match t {
                        Some(t) if t.kind == TokKind::Ident => list.push(t.text.clone()),
                        Some(t) if t.is("...") => {
                            variadic = true;
                            list.push("__VA_ARGS__".to_string());
                        }
                        _ => return Err(bad(t)),
                    }
                    k += 1;
                    match rest.get(k) {
                        Some(t) if t.is(")") => {
                            k += 1;
                            break;
                        }
                        Some(t) if t.is(",") && !variadic => k += 1,
                        t => return Err(bad(t)),
                    }
                }
            }
            params = Some(list);
        }
        if params.as_ref().is_some_and(|p| p.len() == 2)
            && matches!(name.text.as_str(), "floord" | "ceild")
        {
            return Ok(());
        }
        let body = rest[k..].to_vec();
        self.macros.insert(
            name.text.clone(),
            Macro {
                params,
                variadic,
                body,
            },
        );
        Ok(())
    }

    fn include(
        &mut self,
        rest: &[Token],
        line_loc: Loc,
        file: u32,
        depth: usize,
    ) -> Result<(), CError> {
        let (name, quoted) = match rest.first() {
            Some(t) if t.kind == TokKind::Str => (t.text[1..t.text.len() - 1].to_string(), true),
            Some(t) if t.is("<") => {
                let Some(close) = rest.iter().position(|t| t.is(">")) else {
                    return Err(CError::new(
                        line_loc,
                        "expected `>` after the included file's name",
                        "write #include <file.h>",
                    ));
                };
                let name: String = rest[1..close].iter().map(|t| t.text.as_str()).collect();
                (name, false)
            }
            _ => {
                return Err(CError::new(
                    line_loc,
                    "expected \"file\" or <file> after #include",
                    "write #include \"file.h\"",
                ))
            }
        };
        if depth >= MAX_INCLUDE_DEPTH {
            return Err(CError::new(
                line_loc,
                "#include nested too deeply",
                "an include guard (#ifndef NAME_H / #define NAME_H) stops recursive inclusion",
            ));
        }
        let mut candidates: Vec<PathBuf> = Vec::new();
        if quoted {
            let dir = self.files[file as usize]
                .path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            candidates.push(dir.join(&name));
        }
        candidates.extend(self.options.include_dirs.iter().map(|d| d.join(&name)));
        let found = candidates.into_iter().find(|p| p.is_file());
        let Some(path) = found else {
            if quoted {
                return Err(CError::new(
                    line_loc,
                    format!("cannot find included file `{name}`"),
                    "quoted includes are looked for next to the including file, then in -I folders",
                ));
            }
            return Ok(());
        };
        let text = std::fs::read(&path).map_err(|e| {
            CError::new(
                line_loc,
                format!("cannot read `{}`: {e}", path.display()),
                "check the file's permissions",
            )
        })?;
        let text = String::from_utf8(text).map_err(|_| {
            CError::new(
                line_loc,
                format!("`{}` is not UTF-8 text", path.display()),
                "save the header as UTF-8",
            )
        })?;
        let id = self.add_file(SourceFile::new(path, text));
        self.process_file(id, depth + 1)
    }

    fn pragma(&mut self, rest: &[Token], line_loc: Loc, file: u32) -> Result<(), CError> {
        let kind = match rest.first() {
            Some(t) if t.is_ident("scop") => TokKind::ScopBegin,
            Some(t) if t.is_ident("endscop") => TokKind::ScopEnd,
            _ => return Ok(()),
        };
        if file != 0 {
            return Err(CError::new(
                line_loc,
                "SCoP pragmas must be in the main file",
                "move the kernel with its #pragma scop into the file being compiled",
            ));
        }
        self.out.push(Token {
            kind,
            text: if kind == TokKind::ScopBegin {
                "#pragma scop".into()
            } else {
                "#pragma endscop".into()
            },
            loc: line_loc,
            line_start: true,
            space_before: true,
            size: None,
        });
        Ok(())
    }

    fn eval_condition(&mut self, line: &[Token], at: Loc) -> Result<i64, CError> {
        let mut replaced = Vec::new();
        let mut k = 0;
        while k < line.len() {
            let t = &line[k];
            if t.is_ident("defined") {
                let (name, next) = match (line.get(k + 1), line.get(k + 2), line.get(k + 3)) {
                    (Some(p), Some(n), Some(c))
                        if p.is("(") && n.kind == TokKind::Ident && c.is(")") =>
                    {
                        (n, k + 4)
                    }
                    (Some(n), _, _) if n.kind == TokKind::Ident => (n, k + 2),
                    _ => {
                        return Err(CError::new(
                            t.loc,
                            "expected a macro name after `defined`",
                            "write defined(NAME) or defined NAME",
                        ))
                    }
                };
                let value = if self.macros.contains_key(&name.text) {
                    "1"
                } else {
                    "0"
                };
                replaced.push(PTok {
                    tok: Token {
                        kind: TokKind::Number,
                        text: value.into(),
                        ..t.clone()
                    },
                    hide: HideSet::default(),
                });
                k = next;
            } else {
                replaced.push(PTok {
                    tok: t.clone(),
                    hide: HideSet::default(),
                });
                k += 1;
            }
        }
        let expanded: Vec<Token> = self
            .expand(replaced, Mode::Cond)?
            .into_iter()
            .map(|p| p.tok)
            .collect();
        cond::eval(&expanded, at)
    }

    /// Expands every macro in `input`, rescanning results, as the standard describes.
    fn expand(&mut self, input: Vec<PTok>, mode: Mode) -> Result<Vec<PTok>, CError> {
        let mut input: VecDeque<PTok> = input.into();
        let mut out = Vec::new();
        while let Some(mut t) = input.pop_front() {
            if t.tok.kind != TokKind::Ident || t.hide.contains(&t.tok.text) {
                out.push(t);
                continue;
            }
            let Some(m) = self.macros.get(&t.tok.text) else {
                out.push(t);
                continue;
            };
            if mode == Mode::Text {
                if let Some(v) = literal_macro_value(&t.tok.text, m) {
                    t.tok.size = Some(v);
                    out.push(t);
                    continue;
                }
            }
            let m = m.clone();
            let replacement = match &m.params {
                None => self.substitute(&t, &m, &[], mode)?,
                Some(params) => {
                    if !input.front().is_some_and(|n| n.tok.is("(")) {
                        out.push(t);
                        continue;
                    }
                    let args = collect_args(&mut input, &t, params.len(), m.variadic)?;
                    if args.len() != params.len() && !(params.is_empty() && args.len() == 1) {
                        return Err(CError::new(
                            t.tok.loc,
                            format!(
                                "macro `{}` takes {} arguments but is given {}",
                                t.tok.text,
                                params.len(),
                                args.len()
                            ),
                            "check the macro's definition",
                        ));
                    }
                    self.substitute(&t, &m, &args, mode)?
                }
            };
            self.expansions += 1;
            if self.expansions > MAX_EXPANSIONS || input.len() + replacement.len() > MAX_PENDING {
                return Err(CError::new(
                    t.tok.loc,
                    "macro expansion too large",
                    "a macro expands to itself many times over; simplify the macros",
                ));
            }
            for r in replacement.into_iter().rev() {
                input.push_front(r);
            }
        }
        Ok(out)
    }

    /// The replacement of one invocation, before rescanning.
    fn substitute(
        &mut self,
        call: &PTok,
        m: &Macro,
        args: &[Vec<PTok>],
        mode: Mode,
    ) -> Result<Vec<PTok>, CError> {
        let params: &[String] = m.params.as_deref().unwrap_or(&[]);
        let param_index = |t: &Token| {
            (t.kind == TokKind::Ident)
                .then(|| params.iter().position(|p| *p == t.text))
                .flatten()
        };
        let hide = call.hide.with(&call.tok.text);
        let retag = |mut tok: Token| {
            tok.loc = call.tok.loc;
            PTok {
                tok,
                hide: hide.clone(),
            }
        };
        let mut result: Vec<PTok> = Vec::new();
        // Whether the next piece must be pasted onto the last token of `result`.
        let mut paste = false;
        let body = &m.body;
        let mut k = 0;
        while k < body.len() {
            let t = &body[k];
            let next_is_paste = body.get(k + 1).is_some_and(|n| n.is("##"));
            let mut piece: Vec<PTok>;
            if t.is("##") {
                if result.is_empty() || k + 1 == body.len() {
                    return Err(CError::new(
                        call.tok.loc,
                        "`##` at either end of a macro's replacement",
                        "`##` pastes the tokens on both sides of it",
                    ));
                }
                paste = true;
                k += 1;
                continue;
            } else if t.is("#") && m.params.is_some() {
                let Some(p) = body.get(k + 1).and_then(param_index) else {
                    return Err(CError::new(
                        call.tok.loc,
                        "`#` in a function-like macro must come before a parameter",
                        "`#param` makes a string of the argument",
                    ));
                };
                let mut text = String::from("\"");
                for (n, a) in args
                    .get(p)
                    .map(Vec::as_slice)
                    .unwrap_or(&[])
                    .iter()
                    .enumerate()
                {
                    if n > 0 && a.tok.space_before {
                        text.push(' ');
                    }
                    text.push_str(&a.tok.text.replace('\\', "\\\\").replace('"', "\\\""));
                }
                text.push('"');
                piece = vec![retag(Token {
                    kind: TokKind::Str,
                    text,
                    ..t.clone()
                })];
                k += 2;
            } else if let Some(p) = param_index(t) {
                let arg = args.get(p).cloned().unwrap_or_default();
                piece = if paste || next_is_paste {
                    arg.into_iter().map(|a| retag(a.tok)).collect()
                } else {
                    self.expand(arg, mode)?
                        .into_iter()
                        .map(|a| PTok {
                            tok: Token {
                                loc: call.tok.loc,
                                ..a.tok
                            },
                            hide: a.hide,
                        })
                        .collect()
                };
                k += 1;
            } else {
                piece = vec![retag(t.clone())];
                k += 1;
            }
            if paste && !piece.is_empty() {
                if let Some(last) = result.pop() {
                    let first = piece.remove(0);
                    let text = format!("{}{}", last.tok.text, first.tok.text);
                    let relexed = tokenize(&text, call.tok.loc.file).unwrap_or_default();
                    if relexed.len() != 1 {
                        return Err(CError::new(
                            call.tok.loc,
                            format!("pasting gives `{text}`, which is not one token"),
                            "`##` must form a single valid token",
                        ));
                    }
                    let kind = relexed[0].kind;
                    result.push(retag(Token {
                        kind,
                        text,
                        ..last.tok
                    }));
                }
            }
            paste = false;
            result.extend(piece);
        }
        if let Some(first) = result.first_mut() {
            first.tok.space_before = call.tok.space_before;
        }
        Ok(result)
    }
}

/// Reads the parenthesised arguments of an invocation from the front of `input`, which starts
/// with `(`. A variadic macro's last parameter takes the rest, commas included.
fn collect_args(
    input: &mut VecDeque<PTok>,
    call: &PTok,
    n_params: usize,
    variadic: bool,
) -> Result<Vec<Vec<PTok>>, CError> {
    input.pop_front();
    let mut args = vec![Vec::new()];
    let mut depth = 0usize;
    loop {
        let Some(t) = input.pop_front() else {
            return Err(CError::new(
                call.tok.loc,
                format!("unterminated invocation of macro `{}`", call.tok.text),
                "close the argument list with `)`",
            ));
        };
        if t.tok.is("(") {
            depth += 1;
        } else if t.tok.is(")") {
            if depth == 0 {
                break;
            }
            depth -= 1;
        } else if t.tok.is(",") && depth == 0 && !(variadic && args.len() == n_params) {
            args.push(Vec::new());
            continue;
        }
        // `args` always has at least one element: it starts with one and only grows.
        args.last_mut().expect("an argument").push(t);
    }
    Ok(args)
}
