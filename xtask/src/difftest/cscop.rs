//! A random kernel written as a C SCoP, as PolyBench writes kernels: sizes as `#define`s, inputs
//! and outputs as array parameters, temporaries as local arrays, each statement as its own loop
//! nest (a reduction with initialisation as two), `where` conditions as `if`s.
//!
//! Only kernels the C subset can say are written ([`Kernel::c_compatible`]): no `f16`, no
//! scalar functions. The C kernel is a program of its own, checked against the interpreter's
//! run of what the C front end made of it; its arithmetic follows C's conversions (a `0.5` is a
//! `double`), not the `.pf` kernel's.

use std::fmt::Write;

use super::kernel::{AffCond, Cond, Elem, Expr, Item, Kernel, Op, Range, Stmt, Tensor};

impl Kernel {
    /// Whether the kernel can be written as a C SCoP.
    pub fn c_compatible(&self) -> bool {
        let text = self.to_pf();
        self.functions.is_empty()
            && !text.contains("f16")
            && self.statements().iter().all(|s| s.loops.is_some())
    }

    /// The kernel as a C file with one SCoP.
    pub fn to_c(&self) -> String {
        let mut out = String::from("#include <math.h>\n\n");
        for (name, value) in &self.sizes {
            let _ = writeln!(out, "#define {name} {value}");
        }
        let params: Vec<String> = self
            .inputs
            .iter()
            .chain(&self.outputs)
            .map(declaration)
            .collect();
        let _ = writeln!(out, "\nvoid {}({})\n{{", self.name, params.join(", "));
        let mut names: Vec<String> = Vec::new();
        for s in self.statements() {
            for r in s.loops.iter().flatten() {
                if !names.contains(&r.index) {
                    names.push(r.index.clone());
                }
            }
        }
        collect_loop_vars(&self.body, &mut names);
        if !names.is_empty() {
            let _ = writeln!(out, "  int {};", names.join(", "));
        }
        for t in &self.temporaries {
            let _ = writeln!(out, "  {};", declaration(t));
        }
        out.push_str("#pragma scop\n");
        let mut w = Writer { out, kernel: self };
        w.items(&self.body, 1);
        let mut out = w.out;
        out.push_str("#pragma endscop\n}\n");
        out
    }
}

fn collect_loop_vars(items: &[Item], names: &mut Vec<String>) {
    for item in items {
        if let Item::For { var, body, .. } = item {
            if !names.contains(var) {
                names.push(var.clone());
            }
            collect_loop_vars(body, names);
        }
    }
}

fn c_type(e: Elem) -> &'static str {
    match e {
        Elem::F16 | Elem::F32 => "float",
        Elem::F64 => "double",
        Elem::I32 => "int",
    }
}

fn declaration(t: &Tensor) -> String {
    let dims: String = t.dims.iter().map(|d| format!("[{d}]")).collect();
    format!("{} {}{dims}", c_type(t.elem), t.name)
}

struct Writer<'a> {
    out: String,
    kernel: &'a Kernel,
}

impl Writer<'_> {
    fn indent(&mut self, level: usize) {
        for _ in 0..level {
            self.out.push_str("  ");
        }
    }

    fn items(&mut self, items: &[Item], level: usize) {
        for item in items {
            match item {
                Item::Stmt(s) => self.statement(s, level),
                Item::For { var, lo, hi, body } => {
                    self.indent(level);
                    let _ = writeln!(self.out, "for ({var} = {lo}; {var} < {hi}; {var}++) {{");
                    self.items(body, level + 1);
                    self.indent(level);
                    self.out.push_str("}\n");
                }
            }
        }
    }

    /// The element type of the array `name` writes.
    fn elem_of(&self, name: &str) -> Elem {
        self.kernel
            .inputs
            .iter()
            .chain(&self.kernel.outputs)
            .chain(&self.kernel.temporaries)
            .find(|t| t.name == name)
            .map_or(Elem::F64, |t| t.elem)
    }

    fn statement(&mut self, s: &Stmt, level: usize) {
        let loops = s.loops.as_deref().unwrap_or(&[]);
        let subs: String = s.subs.iter().map(|a| format!("[{a}]")).collect();
        let lhs = format!("{}{subs}", s.lhs);
        let elem = self.elem_of(&s.lhs);
        let lhs_names: Vec<String> = s
            .subs
            .iter()
            .flat_map(|a| a.terms.iter().map(|(_, n)| n.clone()))
            .collect();
        if s.op.initialises() && s.op != Op::Set {
            // The initialisation over the left-hand side's indices.
            let init = match (s.op, elem) {
                (Op::AddInit, _) => "0".to_string(),
                (Op::MulInit, _) => "1".to_string(),
                (Op::MaxInit, Elem::I32) => "(-2147483647 - 1)".to_string(),
                (Op::MinInit, Elem::I32) => "2147483647".to_string(),
                (Op::MaxInit, _) => "-1e30".to_string(),
                _ => "1e30".to_string(),
            };
            let own: Vec<_> = loops
                .iter()
                .filter(|r| lhs_names.contains(&r.index))
                .cloned()
                .collect();
            let conds: Vec<String> = s
                .conds
                .iter()
                .filter(|c| {
                    [&c.lhs, &c.rhs].iter().all(|a| {
                        a.terms.iter().all(|(_, n)| {
                            !loops.iter().any(|r| &r.index == n) || lhs_names.contains(n)
                        })
                    })
                })
                .map(|c| format!("{} {} {}", c.lhs, cmp(c), c.rhs))
                .collect();
            let body = format!("{lhs} = {init};");
            self.nest(&own, &conds, &body, level);
        }
        let value = self.expr(&s.rhs);
        let body = match s.op {
            Op::Set => format!("{lhs} = {value};"),
            Op::Add | Op::AddInit => format!("{lhs} += {value};"),
            Op::Sub => format!("{lhs} -= {value};"),
            Op::Mul | Op::MulInit => format!("{lhs} *= {value};"),
            Op::Max | Op::MaxInit => format!("{lhs} = max({lhs}, {value});"),
            Op::Min | Op::MinInit => format!("{lhs} = min({lhs}, {value});"),
        };
        let conds: Vec<String> = s
            .conds
            .iter()
            .map(|c| format!("{} {} {}", c.lhs, cmp(c), c.rhs))
            .collect();
        self.nest(loops, &conds, &body, level);
    }

    fn nest(&mut self, loops: &[Range], conds: &[String], body: &str, level: usize) {
        for (k, r) in loops.iter().enumerate() {
            self.indent(level + k);
            let _ = writeln!(
                self.out,
                "for ({i} = {}; {i} < {}; {i}++)",
                r.lo,
                r.hi,
                i = r.index
            );
        }
        let level = level + loops.len();
        self.indent(level);
        if conds.is_empty() {
            let _ = writeln!(self.out, "{body}");
        } else {
            let _ = writeln!(self.out, "if ({})\n", conds.join(" && "));
            self.out.pop();
            self.indent(level + 1);
            let _ = writeln!(self.out, "{body}");
        }
    }

    fn expr(&self, e: &Expr) -> String {
        match e {
            Expr::Read(name, subs) => {
                let subs: String = subs.iter().map(|a| format!("[{a}]")).collect();
                format!("{name}{subs}")
            }
            Expr::Name(n) => n.clone(),
            Expr::Lit(l) => l.to_string(),
            Expr::Neg(a) => format!("-({})", self.expr(a)),
            Expr::Bin(op, a, b) => {
                format!("({} {} {})", self.expr(a), op.symbol(), self.expr(b))
            }
            Expr::Call(f, args) => {
                let args: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                match f.as_str() {
                    "f32" | "f16" => format!("(float)({})", args.join(", ")),
                    "f64" => format!("(double)({})", args.join(", ")),
                    "i32" => format!("(int)({})", args.join(", ")),
                    "abs" => format!("fabs({})", args.join(", ")),
                    "rsqrt" => format!("(1.0 / sqrt({}))", args.join(", ")),
                    other => format!("{other}({})", args.join(", ")),
                }
            }
            Expr::Select(c, a, b) => {
                format!("({} ? {} : {})", self.cond(c), self.expr(a), self.expr(b))
            }
        }
    }

    fn cond(&self, c: &Cond) -> String {
        match c {
            Cond::Cmp(op, a, b) => {
                format!("{} {} {}", self.expr(a), op.symbol(), self.expr(b))
            }
            Cond::And(a, b) => format!("({} && {})", self.cond(a), self.cond(b)),
            Cond::Or(a, b) => format!("({} || {})", self.cond(a), self.cond(b)),
            Cond::Not(a) => format!("!({})", self.cond(a)),
        }
    }
}

fn cmp(c: &AffCond) -> &'static str {
    c.op.symbol()
}

#[cfg(test)]
mod tests {
    use super::super::generator::generate;

    #[test]
    fn compatible_kernels_become_c_with_one_scop() {
        let mut written = 0;
        for seed in 0..200 {
            let k = generate(seed);
            if k.c_compatible() {
                let c = k.to_c();
                assert_eq!(c.matches("#pragma scop").count(), 1, "{c}");
                assert!(c.contains(&format!("void {}(", k.name)), "{c}");
                written += 1;
            }
        }
        assert!(written > 20, "only {written} kernels could be written in C");
    }

    #[test]
    fn aff_prints_as_c_accepts_it() {
        let a = super::super::kernel::Aff::var("N").term(-1, "i").plus(-1);
        assert_eq!(a.to_string(), "N - i - 1");
    }
}
