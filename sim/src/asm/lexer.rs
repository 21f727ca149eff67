//! Tokens of the `.npuasm` text. Newlines are tokens because the format is line-oriented;
//! `//` comments run to the end of the line and are dropped.

use crate::diagnostic::{Diagnostic, Span};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    Int(i64),
    Float(f64),
    Newline,
    Comma,
    Colon,
    Eq,
    At,
    Plus,
    Minus,
    Star,
    Dot,
    DotDot,
    LBracket,
    RBracket,
    LParen,
    RParen,
    LBrace,
    RBrace,
    EqEq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Eof,
}

impl Tok {
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(i) => format!("`{i}`"),
            Tok::Float(f) => format!("`{f}`"),
            Tok::Newline => "end of line".into(),
            Tok::Eof => "end of file".into(),
            other => format!("`{}`", punct(other)),
        }
    }
}

fn punct(t: &Tok) -> &'static str {
    match t {
        Tok::Comma => ",",
        Tok::Colon => ":",
        Tok::Eq => "=",
        Tok::At => "@",
        Tok::Plus => "+",
        Tok::Minus => "-",
        Tok::Star => "*",
        Tok::Dot => ".",
        Tok::DotDot => "..",
        Tok::LBracket => "[",
        Tok::RBracket => "]",
        Tok::LParen => "(",
        Tok::RParen => ")",
        Tok::LBrace => "{",
        Tok::RBrace => "}",
        Tok::EqEq => "==",
        Tok::Ne => "!=",
        Tok::Lt => "<",
        Tok::Le => "<=",
        Tok::Gt => ">",
        Tok::Ge => ">=",
        _ => "?",
    }
}

pub(crate) fn lex(text: &str) -> Result<Vec<(Tok, Span)>, Diagnostic> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c == b'\n' {
            out.push((Tok::Newline, Span::new(i, i + 1)));
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Ident(text[start..i].to_string()), Span::new(start, i)));
            continue;
        }
        if c.is_ascii_digit() {
            if c == b'0' && matches!(b.get(i + 1), Some(b'x') | Some(b'X')) {
                i += 2;
                while i < b.len() && (b[i].is_ascii_hexdigit() || b[i] == b'_') {
                    i += 1;
                }
                let digits: String = text[start + 2..i].chars().filter(|&c| c != '_').collect();
                let v = u64::from_str_radix(&digits, 16).map_err(|_| {
                    Diagnostic::new(Span::new(start, i), "invalid hexadecimal number")
                        .with_hint("at most 16 hex digits, e.g. `0xffff`")
                })?;
                out.push((Tok::Int(v as i64), Span::new(start, i)));
                continue;
            }
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let mut float = false;
            if b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(|d| d.is_ascii_digit()) {
                float = true;
                i += 1;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if matches!(b.get(i), Some(b'e') | Some(b'E')) {
                let mut j = i + 1;
                if matches!(b.get(j), Some(b'+') | Some(b'-')) {
                    j += 1;
                }
                if b.get(j).is_some_and(|d| d.is_ascii_digit()) {
                    float = true;
                    i = j;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let s = &text[start..i];
            let span = Span::new(start, i);
            let tok = if float {
                Tok::Float(
                    s.parse()
                        .map_err(|_| Diagnostic::new(span, "invalid number"))?,
                )
            } else {
                Tok::Int(s.parse().map_err(|_| {
                    Diagnostic::new(span, "integer too large").with_hint("at most 2^63 - 1")
                })?)
            };
            out.push((tok, span));
            continue;
        }
        let two = |t| (t, Span::new(start, start + 2));
        let one = |t| (t, Span::new(start, start + 1));
        let next = b.get(i + 1).copied();
        let (tok, span) = match (c, next) {
            (b'.', Some(b'.')) => two(Tok::DotDot),
            (b'=', Some(b'=')) => two(Tok::EqEq),
            (b'!', Some(b'=')) => two(Tok::Ne),
            (b'<', Some(b'=')) => two(Tok::Le),
            (b'>', Some(b'=')) => two(Tok::Ge),
            (b'.', _) => one(Tok::Dot),
            (b'=', _) => one(Tok::Eq),
            (b'<', _) => one(Tok::Lt),
            (b'>', _) => one(Tok::Gt),
            (b',', _) => one(Tok::Comma),
            (b':', _) => one(Tok::Colon),
            (b'@', _) => one(Tok::At),
            (b'+', _) => one(Tok::Plus),
            (b'-', _) => one(Tok::Minus),
            (b'*', _) => one(Tok::Star),
            (b'[', _) => one(Tok::LBracket),
            (b']', _) => one(Tok::RBracket),
            (b'(', _) => one(Tok::LParen),
            (b')', _) => one(Tok::RParen),
            (b'{', _) => one(Tok::LBrace),
            (b'}', _) => one(Tok::RBrace),
            _ => {
                let ch = text[start..].chars().next().unwrap_or('?');
                return Err(Diagnostic::new(
                    Span::new(start, start + ch.len_utf8()),
                    format!("unexpected character `{ch}`"),
                )
                .with_hint("comments start with `//`"));
            }
        };
        i = span.end as usize;
        out.push((tok, span));
    }
    out.push((Tok::Eof, Span::new(b.len(), b.len())));
    Ok(out)
}
