//! The writer for isl's notation; its output reads back with [`super::parse`] to the same
//! set or map.
//!
//! Dimensions keep their names where those are valid, distinct and not parameters; otherwise
//! they print as `i0, i1, …` (domain and set dimensions) and `o0, o1, …` (range dimensions).
//! Locals print as `exists (e0, …: …)`.

use super::rel::{Basic, Rel};
use super::space::Tuple;
use std::fmt::{self, Write};

fn valid_name(s: &str) -> bool {
    let mut ch = s.chars();
    matches!(ch.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && ch.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '\'')
        && ![
            "and", "or", "exists", "floor", "ceil", "mod", "true", "false",
        ]
        .contains(&s)
}

fn term(out: &mut String, coef: i64, name: &str, first: &mut bool) {
    if !*first {
        out.push_str(" + ");
    }
    *first = false;
    if coef == 1 {
        out.push_str(name);
    } else {
        let _ = write!(out, "{coef}{name}");
    }
}

/// `row ≥ 0` (or `= 0`) with positive terms on the left and negative ones on the right.
fn constraint(row: &[i64], names: &[String], eq: bool) -> String {
    let (mut l, mut r) = (String::new(), String::new());
    let (mut lf, mut rf) = (true, true);
    for (i, &c) in row[1..].iter().enumerate() {
        if c > 0 {
            term(&mut l, c, &names[i], &mut lf);
        } else if c < 0 {
            term(&mut r, c.unsigned_abs() as i64, &names[i], &mut rf);
        }
    }
    let k = row[0];
    if k > 0 {
        if lf {
            let _ = write!(l, "{k}");
            lf = false;
        } else {
            let _ = write!(l, " + {k}");
        }
    } else if k < 0 {
        if rf {
            let _ = write!(r, "{}", k.unsigned_abs());
            rf = false;
        } else {
            let _ = write!(r, " + {}", k.unsigned_abs());
        }
    }
    if lf {
        l.push('0');
    }
    if rf {
        r.push('0');
    }
    format!("{l} {} {r}", if eq { "=" } else { ">=" })
}

fn tuple_names(t: &Tuple, prefix: &str, taken: &mut Vec<String>) -> Vec<String> {
    (0..t.arity())
        .map(|i| {
            let n = t.dim_name(i);
            let mut name = if valid_name(n) && !taken.iter().any(|x| x == n) {
                n.to_owned()
            } else {
                format!("{prefix}{i}")
            };
            while taken.contains(&name) {
                name.push('\'');
            }
            taken.push(name.clone());
            name
        })
        .collect()
}

fn write_tuple(out: &mut String, t: &Tuple, names: &[String]) {
    let _ = write!(out, "{}[{}]", t.name().unwrap_or(""), names.join(", "));
}

fn write_basic(out: &mut String, params: &[String], b: &Basic) {
    let mut taken: Vec<String> = params.to_vec();
    let mut names: Vec<String> = params.to_vec();
    if let Some(d) = &b.dom {
        let dn = tuple_names(d, "i", &mut taken);
        write_tuple(out, d, &dn);
        out.push_str(" -> ");
        names.extend(dn);
    }
    let prefix = if b.dom.is_some() { "o" } else { "i" };
    let rn = tuple_names(&b.ran, prefix, &mut taken);
    let tuple_printed = b.dom.is_some() || b.ran.arity() > 0 || b.ran.name().is_some();
    if tuple_printed {
        write_tuple(out, &b.ran, &rn);
    }
    names.extend(rn);
    let mut locals = Vec::new();
    for i in 0..b.nd {
        let mut n = format!("e{i}");
        while taken.contains(&n) {
            n.push('\'');
        }
        taken.push(n.clone());
        locals.push(n);
    }
    names.extend(locals.iter().cloned());
    let mut c = b.c.clone();
    // Normal form only; a contradiction found here still prints as the rows it leaves.
    let _ = c.normalize();
    let mut cs: Vec<String> = Vec::new();
    for r in &c.eqs {
        cs.push(constraint(r, &names, true));
    }
    for r in &c.ineqs {
        cs.push(constraint(r, &names, false));
    }
    if cs.is_empty() && b.nd == 0 && tuple_printed {
        return;
    }
    out.push_str(" : ");
    let body = if cs.is_empty() {
        "true".to_owned()
    } else {
        cs.join(" and ")
    };
    if b.nd > 0 {
        let _ = write!(out, "exists ({}: {body})", locals.join(", "));
    } else {
        out.push_str(&body);
    }
}

impl fmt::Display for Rel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        if !self.params.is_empty() {
            let _ = write!(out, "[{}] -> ", self.params.join(", "));
        }
        out.push_str("{ ");
        for (i, b) in self.parts.iter().enumerate() {
            if i > 0 {
                out.push_str("; ");
            }
            write_basic(&mut out, &self.params, b);
        }
        out.push_str(if self.parts.is_empty() { "}" } else { " }" });
        f.write_str(&out)
    }
}
