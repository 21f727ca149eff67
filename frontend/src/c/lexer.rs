//! The C tokenizer: source text → preprocessing tokens.
//!
//! Comments become whitespace and backslash-newline pairs join lines, as in translation phases
//! 2–3. Every token records whether it is the first on its logical line (so the preprocessor can
//! find directives) and whether whitespace precedes it (for `#` stringification and for
//! printing). Bytes that no C token starts with become [`TokKind::Other`] tokens rather than
//! errors, because they are harmless in skipped code and the parser reports them where they
//! matter. Spans always lie on character boundaries of the text.

use polyhedral::program::Span;

use super::{CError, Loc};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokKind {
    Ident,
    /// A preprocessing number: digits, letters, `.`, and signs after an exponent letter.
    Number,
    Str,
    Char,
    Punct,
    Other,
    /// `#pragma scop`, made by the preprocessor.
    ScopBegin,
    /// `#pragma endscop`, made by the preprocessor.
    ScopEnd,
}

/// A token and where it came from. Tokens produced by a macro expansion carry the location of
/// the macro's invocation, so messages point at the code the user wrote in the kernel.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Token {
    pub kind: TokKind,
    pub text: String,
    pub loc: Loc,
    pub line_start: bool,
    pub space_before: bool,
    /// Set by the preprocessor on an identifier that names a size macro left unexpanded: the
    /// macro's value.
    pub size: Option<i64>,
}

impl Token {
    pub fn is(&self, punct: &str) -> bool {
        matches!(self.kind, TokKind::Punct) && self.text == punct
    }

    pub fn is_ident(&self, name: &str) -> bool {
        self.kind == TokKind::Ident && self.text == name
    }
}

const PUNCTS: &[&str] = &[
    "<<=", ">>=", "...", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=",
    "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##", "#", "[", "]", "(", ")", "{", "}", ".", "&",
    "*", "+", "-", "~", "!", "/", "%", "<", ">", "^", "|", "?", ":", ";", "=", ",",
];

/// Splits `text` (the contents of file number `file`) into tokens.
pub(crate) fn tokenize(text: &str, file: u32) -> Result<Vec<Token>, CError> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut line_start = true;
    let mut space_before = false;
    let loc = |start: usize, end: usize| Loc {
        file,
        span: Span::new(start, end),
    };
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\n' {
            line_start = true;
            space_before = true;
            i += 1;
            continue;
        }
        if b == b'\\' && (bytes.get(i + 1) == Some(&b'\n') || starts_crlf(bytes, i + 1)) {
            i += if bytes[i + 1] == b'\r' { 3 } else { 2 };
            continue;
        }
        if b.is_ascii_whitespace() {
            space_before = true;
            i += 1;
            continue;
        }
        if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
            match text[i + 2..].find("*/") {
                Some(k) => i = i + 2 + k + 2,
                None => {
                    return Err(CError::new(
                        loc(i, i + 2),
                        "unterminated comment",
                        "close the comment with `*/`",
                    ))
                }
            }
            space_before = true;
            continue;
        }
        if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
            // A line comment ends at the newline, which stays to end the logical line; a
            // backslash before it continues the comment.
            let mut j = i + 2;
            while j < bytes.len() && bytes[j] != b'\n' {
                if bytes[j] == b'\\' && bytes.get(j + 1) == Some(&b'\n') {
                    j += 1;
                }
                j += 1;
            }
            i = j;
            space_before = true;
            continue;
        }
        let start = i;
        let kind;
        if b.is_ascii_alphabetic() || b == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            kind = TokKind::Ident;
        } else if b.is_ascii_digit()
            || (b == b'.' && bytes.get(i + 1).is_some_and(|c| c.is_ascii_digit()))
        {
            i += 1;
            while i < bytes.len() {
                let c = bytes[i];
                let exponent_sign =
                    matches!(c, b'+' | b'-') && matches!(bytes[i - 1], b'e' | b'E' | b'p' | b'P');
                if exponent_sign || c.is_ascii_alphanumeric() || c == b'.' || c == b'_' {
                    i += 1;
                } else {
                    break;
                }
            }
            kind = TokKind::Number;
        } else if b == b'"' || b == b'\'' {
            let mut j = i + 1;
            let mut closed = false;
            while j < bytes.len() && bytes[j] != b'\n' {
                if bytes[j] == b'\\' {
                    j += 2;
                    continue;
                }
                if bytes[j] == b {
                    closed = true;
                    j += 1;
                    break;
                }
                j += 1;
            }
            i = floor_boundary(text, j.min(bytes.len()));
            kind = match (closed, b) {
                (true, b'"') => TokKind::Str,
                (true, _) => TokKind::Char,
                // An unmatched quote is allowed in skipped groups; the parser rejects it
                // anywhere else.
                (false, _) => TokKind::Other,
            };
        } else if let Some(p) = PUNCTS.iter().find(|p| text[i..].starts_with(**p)) {
            i += p.len();
            kind = TokKind::Punct;
        } else {
            // One character, however many bytes it takes.
            let len = text[i..].chars().next().map_or(1, char::len_utf8);
            i += len;
            kind = TokKind::Other;
        }
        tokens.push(Token {
            kind,
            text: text[start..i].to_string(),
            loc: loc(start, i),
            line_start,
            space_before,
            size: None,
        });
        line_start = false;
        space_before = false;
    }
    Ok(tokens)
}

fn starts_crlf(bytes: &[u8], i: usize) -> bool {
    bytes.get(i) == Some(&b'\r') && bytes.get(i + 1) == Some(&b'\n')
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(TokKind, String)> {
        tokenize(text, 0)
            .unwrap()
            .into_iter()
            .map(|t| (t.kind, t.text))
            .collect()
    }

    #[test]
    fn numbers_punctuation_and_comments() {
        let toks = kinds("x+=1.5e-3f; /* c */ y<<=0x1F // z\n#");
        let texts: Vec<&str> = toks.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["x", "+=", "1.5e-3f", ";", "y", "<<=", "0x1F", "#"]);
        assert_eq!(toks[2].0, TokKind::Number);
    }

    #[test]
    fn line_starts_follow_logical_lines() {
        let toks = tokenize("#define A \\\n 1\n#x", 0).unwrap();
        let starts: Vec<bool> = toks.iter().map(|t| t.line_start).collect();
        assert_eq!(starts, [true, false, false, false, true, false]);
    }

    #[test]
    fn unterminated_comment_is_an_error() {
        let err = tokenize("a /* b", 0).unwrap_err();
        assert_eq!(err.message, "unterminated comment");
    }

    #[test]
    fn odd_bytes_become_other_tokens() {
        let toks = kinds("@ é 'x");
        assert!(toks.iter().all(|(k, _)| *k == TokKind::Other));
    }
}
