//! C identifiers for the program's names.
//!
//! Every name the generated C declares at file scope (parameters, functions, the kernel) and
//! every array and loop variable gets an identifier that is valid C, is no C keyword or name
//! of the standard headers the kernel includes, does not start with `pf_` (the prefix of the
//! generated helpers and harness), and differs from every other such identifier. Function locals
//! are named in a scope of their own that starts from the file-scope names.

use std::collections::HashSet;

/// C keywords and the standard names the generated code uses or includes.
const RESERVED: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "bool",
    "true",
    "false",
    "main",
    "errno",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "size_t",
    "NULL",
    "NAN",
    "INFINITY",
    "INT32_MIN",
    "INT32_MAX",
    "INT64_MIN",
    "INT64_MAX",
    "calloc",
    "malloc",
    "free",
    "memcpy",
    "exit",
    "abs",
    "sqrt",
    "sqrtf",
    "exp",
    "expf",
    "log",
    "logf",
    "pow",
    "powf",
    "fabs",
    "fabsf",
    "tanh",
    "tanhf",
    "sin",
    "sinf",
    "cos",
    "cosf",
    "floor",
    "floorf",
    "ceil",
    "ceilf",
    "fmin",
    "fminf",
    "fmax",
    "fmaxf",
    "fmod",
    "fmodf",
    "printf",
    "fprintf",
    "fopen",
    "fclose",
    "fread",
    "fwrite",
    "stderr",
    "stdout",
    "stdin",
    "FILE",
    "timespec",
    "clock_gettime",
    "CLOCK_MONOTONIC",
];

/// A set of identifiers in use.
#[derive(Clone, Default)]
pub(crate) struct Scope {
    taken: HashSet<String>,
}

impl Scope {
    /// Marks `name` as taken without declaring anything (a name of the surrounding code).
    pub(crate) fn reserve(&mut self, name: &str) {
        self.taken.insert(name.to_string());
    }

    /// An identifier close to `wanted` that is free in this scope; it is taken from now on.
    pub(crate) fn fresh(&mut self, wanted: &str) -> String {
        let mut base: String = wanted
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if base.is_empty()
            || base.starts_with(|c: char| c.is_ascii_digit() || c == '_')
            || base.starts_with("pf_")
        {
            base = format!("v{base}");
        }
        let usable =
            |s: &str, taken: &HashSet<String>| !taken.contains(s) && !RESERVED.contains(&s);
        let mut name = base.clone();
        let mut k = 1;
        while !usable(&name, &self.taken) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.taken.insert(name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_unique_and_unreserved() {
        let mut s = Scope::default();
        assert_eq!(s.fresh("A"), "A");
        assert_eq!(s.fresh("A"), "A_1");
        assert_eq!(s.fresh("exp"), "exp_1");
        assert_eq!(s.fresh("pf_x"), "vpf_x");
        assert_eq!(s.fresh("_t"), "v_t");
        assert_eq!(s.fresh("a.b"), "a_b");
        assert_eq!(s.fresh("2x"), "v2x");
    }
}
