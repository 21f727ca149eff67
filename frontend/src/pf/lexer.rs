//! Tokens of the `.pf` language and the lexer that produces them.
//!
//! Every token carries the byte span it came from. The lexer never panics: any byte sequence
//! either lexes or yields one located [`Diagnostic`]. Integer literals must fit an `i64` and
//! float literals must be finite; an identifier character right after a number is an error
//! (`12ab`), so numbers and names never run together.

use polyhedral::program::Span;

use crate::diagnostic::Diagnostic;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    Int(i64),
    Float(f64),
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Lt,
    Le,
    Gt,
    Ge,
    EqEq,
    Ne,
    Assign,
    PlusEq,
    MinusEq,
    StarEq,
    SlashEq,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Bang,
    AndAnd,
    OrOr,
    Question,
    Colon,
    Semi,
    Comma,
    Arrow,
    Eof,
}

impl Tok {
    /// How the token is named in "expected X, found Y" messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(v) => format!("`{v}`"),
            Tok::Float(v) => format!("`{v:?}`"),
            Tok::Eof => "end of file".to_string(),
            t => format!("`{}`", t.symbol()),
        }
    }

    fn symbol(&self) -> &'static str {
        match self {
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::EqEq => "==",
            Tok::Ne => "!=",
            Tok::Assign => "=",
            Tok::PlusEq => "+=",
            Tok::MinusEq => "-=",
            Tok::StarEq => "*=",
            Tok::SlashEq => "/=",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::Bang => "!",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
            Tok::Question => "?",
            Tok::Colon => ":",
            Tok::Semi => ";",
            Tok::Comma => ",",
            Tok::Arrow => "->",
            Tok::Ident(_) | Tok::Int(_) | Tok::Float(_) | Tok::Eof => "",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub span: Span,
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Splits `text` into tokens, ending with [`Tok::Eof`].
pub(crate) fn lex(text: &str) -> Result<Vec<Token>, Diagnostic> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c == b'/' && bytes.get(i + 1) == Some(&b'*') {
            i += 2;
            loop {
                if i + 1 >= bytes.len() {
                    return Err(Diagnostic::new(
                        Span::new(start, start + 2),
                        "unterminated block comment",
                    )
                    .with_hint("close it with `*/`"));
                }
                if bytes[i] == b'*' && bytes[i + 1] == b'/' {
                    i += 2;
                    break;
                }
                i += 1;
            }
            continue;
        }
        if is_ident_start(c) {
            while i < bytes.len() && is_ident_char(bytes[i]) {
                i += 1;
            }
            tokens.push(Token {
                tok: Tok::Ident(text[start..i].to_string()),
                span: Span::new(start, i),
            });
            continue;
        }
        if c.is_ascii_digit() {
            let (tok, end) = lex_number(text, start)?;
            tokens.push(Token {
                tok,
                span: Span::new(start, end),
            });
            i = end;
            continue;
        }
        let two = |a: u8, b: u8| c == a && bytes.get(i + 1) == Some(&b);
        let (tok, len) = if two(b'<', b'=') {
            (Tok::Le, 2)
        } else if two(b'>', b'=') {
            (Tok::Ge, 2)
        } else if two(b'=', b'=') {
            (Tok::EqEq, 2)
        } else if two(b'!', b'=') {
            (Tok::Ne, 2)
        } else if two(b'+', b'=') {
            (Tok::PlusEq, 2)
        } else if two(b'-', b'=') {
            (Tok::MinusEq, 2)
        } else if two(b'*', b'=') {
            (Tok::StarEq, 2)
        } else if two(b'/', b'=') {
            (Tok::SlashEq, 2)
        } else if two(b'&', b'&') {
            (Tok::AndAnd, 2)
        } else if two(b'|', b'|') {
            (Tok::OrOr, 2)
        } else if two(b'-', b'>') {
            (Tok::Arrow, 2)
        } else {
            let tok = match c {
                b'(' => Tok::LParen,
                b')' => Tok::RParen,
                b'[' => Tok::LBracket,
                b']' => Tok::RBracket,
                b'{' => Tok::LBrace,
                b'}' => Tok::RBrace,
                b'<' => Tok::Lt,
                b'>' => Tok::Gt,
                b'=' => Tok::Assign,
                b'+' => Tok::Plus,
                b'-' => Tok::Minus,
                b'*' => Tok::Star,
                b'/' => Tok::Slash,
                b'%' => Tok::Percent,
                b'!' => Tok::Bang,
                b'?' => Tok::Question,
                b':' => Tok::Colon,
                b';' => Tok::Semi,
                b',' => Tok::Comma,
                _ => {
                    let ch = text[start..].chars().next().unwrap_or('?');
                    return Err(Diagnostic::new(
                        Span::new(start, start + ch.len_utf8()),
                        format!("unexpected character `{}`", ch.escape_default()),
                    )
                    .with_hint("kernels are written in ASCII: names, numbers and operators"));
                }
            };
            (tok, 1)
        };
        tokens.push(Token {
            tok,
            span: Span::new(start, start + len),
        });
        i += len;
    }
    tokens.push(Token {
        tok: Tok::Eof,
        span: Span::new(text.len(), text.len()),
    });
    Ok(tokens)
}

/// A number starting at `start`: digits, then optionally `.digits` and an exponent.
fn lex_number(text: &str, start: usize) -> Result<(Tok, usize), Diagnostic> {
    let bytes = text.as_bytes();
    let digits = |mut i: usize| {
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let mut i = digits(start);
    let mut is_float = false;
    if i < bytes.len() && bytes[i] == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
        is_float = true;
        i = digits(i + 1);
    }
    if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        let mut j = i + 1;
        if j < bytes.len() && (bytes[j] == b'+' || bytes[j] == b'-') {
            j += 1;
        }
        if j < bytes.len() && bytes[j].is_ascii_digit() {
            is_float = true;
            i = digits(j);
        }
    }
    let bad = |end: usize, why: &str| {
        Diagnostic::new(Span::new(start, end), format!("bad number: {why}"))
            .with_hint("write integers as `12` and floats as `1.5` or `2.5e-3`")
    };
    if i < bytes.len() && (is_ident_char(bytes[i]) || bytes[i] == b'.') {
        let mut end = i;
        while end < bytes.len() && (is_ident_char(bytes[end]) || bytes[end] == b'.') {
            end += 1;
        }
        return Err(bad(end, "unexpected characters after the digits"));
    }
    let s = &text[start..i];
    if is_float {
        match s.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok((Tok::Float(v), i)),
            _ => Err(bad(i, "float literal out of range")),
        }
    } else {
        match s.parse::<i64>() {
            Ok(v) => Ok((Tok::Int(v), i)),
            Err(_) => Err(bad(i, "integer literal too large")),
        }
    }
}
