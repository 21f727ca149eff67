//! Constant expressions of `#if` / `#elif` lines, evaluated over `i64` as the C preprocessor
//! does over `intmax_t`.
//!
//! On the way in, `defined` has been replaced and macros expanded; identifiers that are left
//! count as 0 (the C rule). Overflow and division by zero are errors, not wrapped values, so a
//! malformed header cannot select a group by accident.

use super::lexer::{TokKind, Token};
use super::{CError, Loc};

/// Evaluates a whole `#if` expression; `at` locates errors when the line is empty.
pub(crate) fn eval(tokens: &[Token], at: Loc) -> Result<i64, CError> {
    let mut p = CondParser { tokens, pos: 0, at };
    let v = p.ternary()?;
    match tokens.get(p.pos) {
        None => Ok(v),
        Some(t) => Err(CError::new(
            t.loc,
            format!("unexpected `{}` in a preprocessor condition", t.text),
            "a condition is an integer expression of literals, macros and `defined(NAME)`",
        )),
    }
}

/// Parses a C integer literal (`10`, `0x1F`, `017`, `0b101`, with `u`/`l` suffixes).
pub(crate) fn parse_int(text: &str) -> Option<i64> {
    let digits = text.trim_end_matches(['u', 'U', 'l', 'L']);
    let (radix, body) = if let Some(h) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        (16, h)
    } else if let Some(b) = digits
        .strip_prefix("0b")
        .or_else(|| digits.strip_prefix("0B"))
    {
        (2, b)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    if body.is_empty() {
        return None;
    }
    // Values that only fit `unsigned long long` wrap as the preprocessor's `uintmax_t` would
    // compare them; such sizes are rejected later as non-positive.
    u64::from_str_radix(body, radix).ok().map(|v| v as i64)
}

struct CondParser<'a> {
    tokens: &'a [Token],
    pos: usize,
    at: Loc,
}

impl CondParser<'_> {
    fn peek_punct(&self) -> Option<&str> {
        self.tokens
            .get(self.pos)
            .filter(|t| t.kind == TokKind::Punct)
            .map(|t| t.text.as_str())
    }

    fn loc(&self) -> Loc {
        self.tokens
            .get(self.pos)
            .or(self.tokens.last())
            .map_or(self.at, |t| t.loc)
    }

    fn err(&self, msg: impl Into<String>) -> CError {
        CError::new(
            self.loc(),
            msg,
            "a condition is an integer expression of literals, macros and `defined(NAME)`",
        )
    }

    fn overflow(&self) -> CError {
        self.err("arithmetic overflow in a preprocessor condition")
    }

    fn ternary(&mut self) -> Result<i64, CError> {
        let c = self.binary(0)?;
        if self.peek_punct() == Some("?") {
            self.pos += 1;
            let a = self.ternary()?;
            if self.peek_punct() != Some(":") {
                return Err(self.err("expected `:` in a conditional expression"));
            }
            self.pos += 1;
            let b = self.ternary()?;
            return Ok(if c != 0 { a } else { b });
        }
        Ok(c)
    }

    fn binary(&mut self, min_prec: u8) -> Result<i64, CError> {
        let mut lhs = self.unary()?;
        while let Some(op) = self.peek_punct() {
            let prec = match op {
                "||" => 1,
                "&&" => 2,
                "|" => 3,
                "^" => 4,
                "&" => 5,
                "==" | "!=" => 6,
                "<" | ">" | "<=" | ">=" => 7,
                "<<" | ">>" => 8,
                "+" | "-" => 9,
                "*" | "/" | "%" => 10,
                _ => break,
            };
            if prec < min_prec {
                break;
            }
            let op = op.to_string();
            self.pos += 1;
            let rhs = self.binary(prec + 1)?;
            lhs = self.apply(&op, lhs, rhs)?;
        }
        Ok(lhs)
    }

    fn apply(&self, op: &str, a: i64, b: i64) -> Result<i64, CError> {
        let v = match op {
            "||" => Some(((a != 0) || (b != 0)) as i64),
            "&&" => Some(((a != 0) && (b != 0)) as i64),
            "|" => Some(a | b),
            "^" => Some(a ^ b),
            "&" => Some(a & b),
            "==" => Some((a == b) as i64),
            "!=" => Some((a != b) as i64),
            "<" => Some((a < b) as i64),
            ">" => Some((a > b) as i64),
            "<=" => Some((a <= b) as i64),
            ">=" => Some((a >= b) as i64),
            "<<" => u32::try_from(b).ok().and_then(|s| a.checked_shl(s)),
            ">>" => u32::try_from(b).ok().and_then(|s| a.checked_shr(s)),
            "+" => a.checked_add(b),
            "-" => a.checked_sub(b),
            "*" => a.checked_mul(b),
            "/" | "%" if b == 0 => {
                return Err(self.err("division by zero in a preprocessor condition"))
            }
            "/" => a.checked_div(b),
            _ => a.checked_rem(b),
        };
        v.ok_or_else(|| self.overflow())
    }

    fn unary(&mut self) -> Result<i64, CError> {
        let Some(t) = self.tokens.get(self.pos) else {
            return Err(self.err("expected a value in a preprocessor condition"));
        };
        match (t.kind, t.text.as_str()) {
            (TokKind::Punct, "(") => {
                self.pos += 1;
                let v = self.ternary()?;
                if self.peek_punct() != Some(")") {
                    return Err(self.err("expected `)` in a preprocessor condition"));
                }
                self.pos += 1;
                Ok(v)
            }
            (TokKind::Punct, "!") => {
                self.pos += 1;
                Ok((self.unary()? == 0) as i64)
            }
            (TokKind::Punct, "-") => {
                self.pos += 1;
                let v = self.unary()?;
                v.checked_neg().ok_or_else(|| self.overflow())
            }
            (TokKind::Punct, "+") => {
                self.pos += 1;
                self.unary()
            }
            (TokKind::Punct, "~") => {
                self.pos += 1;
                Ok(!self.unary()?)
            }
            (TokKind::Number, text) => {
                let v = parse_int(text)
                    .ok_or_else(|| self.err(format!("`{text}` is not an integer constant")))?;
                self.pos += 1;
                Ok(v)
            }
            (TokKind::Char, text) => {
                let v = char_value(text)
                    .ok_or_else(|| self.err(format!("unsupported character constant {text}")))?;
                self.pos += 1;
                Ok(v)
            }
            (TokKind::Ident, _) => {
                self.pos += 1;
                Ok(0)
            }
            _ => Err(self.err(format!(
                "unexpected `{}` in a preprocessor condition",
                t.text
            ))),
        }
    }
}

fn char_value(text: &str) -> Option<i64> {
    let inner = text.strip_prefix('\'')?.strip_suffix('\'')?;
    let mut chars = inner.chars();
    let c = chars.next()?;
    let v = if c == '\\' {
        match chars.next()? {
            'n' => 10,
            't' => 9,
            '0' => 0,
            '\\' => 92,
            '\'' => 39,
            _ => return None,
        }
    } else {
        c as i64
    };
    chars.next().is_none().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::super::lexer::tokenize;
    use super::*;

    fn value(text: &str) -> Result<i64, CError> {
        eval(&tokenize(text, 0).unwrap(), Loc::default())
    }

    #[test]
    fn arithmetic_and_logic() {
        assert_eq!(value("1 + 2 * 3 == 7 && !0").unwrap(), 1);
        assert_eq!(value("(1 << 4) | 0x3").unwrap(), 19);
        assert_eq!(value("UNKNOWN || 010 == 8").unwrap(), 1);
        assert_eq!(value("1 ? 2 : 3").unwrap(), 2);
        assert_eq!(value("-7 / 2").unwrap(), -3);
    }

    #[test]
    fn errors_are_values() {
        assert!(value("1 / 0").is_err());
        assert!(value("9223372036854775807 + 1").is_err());
        assert!(value("(1").is_err());
        assert!(value("1.5").is_err());
        assert!(value("").is_err());
    }
}
