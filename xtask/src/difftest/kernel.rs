//! The random kernels' model: sizes, tensors, scalar functions and statements, printed as a
//! `.pf` kernel. The generator builds it, the shrinker edits it, the runner prints it.
//!
//! The model is a little more structured than the text (a statement's `where` ranges and
//! conditions are kept apart, subscripts are affine expressions) so that the shrinker can
//! remove and simplify parts; every model prints to text the `.pf` parser reads, whether or not
//! the front end then accepts it (a shrunk kernel may not be; the shrinker checks).

use std::fmt::{self, Write};

/// An element type of the language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F16,
    F32,
    F64,
    I32,
}

impl Elem {
    pub fn name(self) -> &'static str {
        match self {
            Elem::F16 => "f16",
            Elem::F32 => "f32",
            Elem::F64 => "f64",
            Elem::I32 => "i32",
        }
    }

    pub fn is_float(self) -> bool {
        self != Elem::I32
    }
}

/// An affine expression over sizes, loop variables and indices: `Σ coeff·name + constant`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Aff {
    pub terms: Vec<(i64, String)>,
    pub constant: i64,
}

impl Aff {
    pub fn constant(c: i64) -> Aff {
        Aff {
            terms: Vec::new(),
            constant: c,
        }
    }

    pub fn var(name: &str) -> Aff {
        Aff {
            terms: vec![(1, name.to_string())],
            constant: 0,
        }
    }

    pub fn plus(mut self, c: i64) -> Aff {
        self.constant += c;
        self
    }

    pub fn term(mut self, coeff: i64, name: &str) -> Aff {
        self.terms.push((coeff, name.to_string()));
        self
    }

    pub fn mentions(&self, name: &str) -> bool {
        self.terms.iter().any(|(c, n)| *c != 0 && n == name)
    }
}

impl fmt::Display for Aff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (c, name) in &self.terms {
            let (sign, mag) = if *c < 0 { ("-", -c) } else { ("+", *c) };
            if *c == 0 {
                continue;
            }
            if first {
                if sign == "-" {
                    f.write_str("-")?;
                }
            } else {
                write!(f, " {sign} ")?;
            }
            if mag == 1 {
                f.write_str(name)?;
            } else {
                write!(f, "{mag} * {name}")?;
            }
            first = false;
        }
        if first {
            write!(f, "{}", self.constant)
        } else if self.constant > 0 {
            write!(f, " + {}", self.constant)
        } else if self.constant < 0 {
            write!(f, " - {}", -self.constant)
        } else {
            Ok(())
        }
    }
}

/// A tensor: an input, an output, or (in a statement's left-hand side) a temporary.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub elem: Elem,
    /// Extents, affine in the sizes; none for a scalar.
    pub dims: Vec<Aff>,
}

/// A literal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lit {
    Int(i64),
    /// Printed with a decimal point.
    Float(f64),
}

impl fmt::Display for Lit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Lit::Int(v) if v < 0 => write!(f, "({v})"),
            Lit::Int(v) => write!(f, "{v}"),
            Lit::Float(v) => {
                let text = if v.fract() == 0.0 {
                    format!("{v:.1}")
                } else {
                    format!("{v}")
                };
                if v < 0.0 {
                    write!(f, "({text})")
                } else {
                    f.write_str(&text)
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl CmpOp {
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
        }
    }
}

/// A value expression of a statement or a function.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A tensor element, or a scalar tensor (no subscripts), a function's local or an index.
    Read(String, Vec<Aff>),
    /// An index, size or function local used as a value.
    Name(String),
    Lit(Lit),
    Neg(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// A call: math functions, `min`, `max`, casts and scalar functions.
    Call(String, Vec<Expr>),
    /// `select(c, a, b)`.
    Select(Box<Cond>, Box<Expr>, Box<Expr>),
}

/// A condition (of `select`, `if` and `while`).
#[derive(Clone, Debug, PartialEq)]
pub enum Cond {
    Cmp(CmpOp, Expr, Expr),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Not(Box<Cond>),
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Read(name, subs) if subs.is_empty() => f.write_str(name),
            Expr::Read(name, subs) => {
                write!(f, "{name}(")?;
                for (k, s) in subs.iter().enumerate() {
                    if k > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{s}")?;
                }
                f.write_str(")")
            }
            Expr::Name(n) => f.write_str(n),
            Expr::Lit(l) => write!(f, "{l}"),
            Expr::Neg(e) => write!(f, "-({e})"),
            Expr::Bin(op, a, b) => write!(f, "({a} {} {b})", op.symbol()),
            Expr::Call(name, args) => {
                write!(f, "{name}(")?;
                for (k, a) in args.iter().enumerate() {
                    if k > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
            Expr::Select(c, a, b) => write!(f, "select({c}, {a}, {b})"),
        }
    }
}

impl fmt::Display for Cond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cond::Cmp(op, a, b) => write!(f, "{a} {} {b}", op.symbol()),
            Cond::And(a, b) => write!(f, "({a} && {b})"),
            Cond::Or(a, b) => write!(f, "({a} || {b})"),
            Cond::Not(c) => write!(f, "!({c})"),
        }
    }
}

/// A statement of a scalar function.
#[derive(Clone, Debug, PartialEq)]
pub enum FnStmt {
    /// `var name: ty = value;` (`let` when not mutable).
    Local {
        name: String,
        ty: Elem,
        mutable: bool,
        value: Expr,
    },
    Assign(String, Expr),
    If(Cond, Vec<FnStmt>, Vec<FnStmt>),
    While(Cond, Vec<FnStmt>),
    Return(Expr),
}

/// A scalar function: every path returns.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub name: String,
    pub params: Vec<(String, Elem)>,
    pub ret: Elem,
    pub body: Vec<FnStmt>,
}

/// The assignment operators of a tensor statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Set,
    Add,
    Sub,
    Mul,
    Max,
    Min,
    /// `+=!`: a reduction initialised to 0.
    AddInit,
    MulInit,
    MaxInit,
    MinInit,
}

impl Op {
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Set => "=",
            Op::Add => "+=",
            Op::Sub => "-=",
            Op::Mul => "*=",
            Op::Max => "max=",
            Op::Min => "min=",
            Op::AddInit => "+=!",
            Op::MulInit => "*=!",
            Op::MaxInit => "max=!",
            Op::MinInit => "min=!",
        }
    }

    /// Whether the right-hand side may use indices the left-hand side does not.
    pub fn reduces(self) -> bool {
        self != Op::Set
    }

    /// Whether the statement initialises its left-hand side (so it may create a temporary).
    pub fn initialises(self) -> bool {
        matches!(
            self,
            Op::Set | Op::AddInit | Op::MulInit | Op::MaxInit | Op::MinInit
        )
    }
}

/// `where index in lo:hi`.
#[derive(Clone, Debug, PartialEq)]
pub struct Range {
    pub index: String,
    pub lo: Aff,
    pub hi: Aff,
}

/// An affine condition of a `where`: `lhs op rhs`.
#[derive(Clone, Debug, PartialEq)]
pub struct AffCond {
    pub lhs: Aff,
    pub op: CmpOp,
    pub rhs: Aff,
}

/// A tensor statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub lhs: String,
    pub subs: Vec<Aff>,
    pub op: Op,
    pub rhs: Expr,
    pub ranges: Vec<Range>,
    pub conds: Vec<AffCond>,
    /// Every index of the statement with its range written out, in an order where each range
    /// names only indices before it: the loops of the statement written in C (`None` where the
    /// generator did not know them).
    pub loops: Option<Vec<Range>>,
}

/// An item of the kernel body: a statement or a `for` loop around items.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Stmt(Stmt),
    For {
        var: String,
        lo: Aff,
        hi: Aff,
        body: Vec<Item>,
    },
}

/// The language a kernel is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    Pf,
    C,
}

impl Lang {
    /// The file extension, which tells `polyfuse` the language.
    pub fn ext(self) -> &'static str {
        match self {
            Lang::Pf => "pf",
            Lang::C => "c",
        }
    }
}

/// A whole `.pf` file: functions and one kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub sizes: Vec<(String, i64)>,
    pub functions: Vec<Function>,
    pub inputs: Vec<Tensor>,
    pub outputs: Vec<Tensor>,
    pub body: Vec<Item>,
    /// The temporaries with the shapes the front end gives them: the local arrays of the kernel
    /// written in C (the `.pf` text leaves them out).
    pub temporaries: Vec<Tensor>,
}

impl Kernel {
    /// The statements in program order.
    pub fn statements(&self) -> Vec<&Stmt> {
        fn walk<'a>(items: &'a [Item], out: &mut Vec<&'a Stmt>) {
            for item in items {
                match item {
                    Item::Stmt(s) => out.push(s),
                    Item::For { body, .. } => walk(body, out),
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.body, &mut out);
        out
    }

    /// The kernel's text in `lang`.
    pub fn render(&self, lang: Lang) -> String {
        match lang {
            Lang::Pf => self.to_pf(),
            Lang::C => self.to_c(),
        }
    }

    /// The `.pf` text.
    pub fn to_pf(&self) -> String {
        let mut out = String::new();
        for f in &self.functions {
            print_function(&mut out, f);
            out.push('\n');
        }
        let sizes: Vec<String> = self
            .sizes
            .iter()
            .map(|(n, v)| format!("{n} = {v}"))
            .collect();
        let decl = |t: &Tensor| {
            if t.dims.is_empty() {
                format!("{}: {}", t.name, t.elem.name())
            } else {
                let dims: Vec<String> = t.dims.iter().map(|d| d.to_string()).collect();
                format!("{}: {}[{}]", t.name, t.elem.name(), dims.join(", "))
            }
        };
        let inputs: Vec<String> = self.inputs.iter().map(decl).collect();
        let outputs: Vec<String> = self.outputs.iter().map(decl).collect();
        let _ = writeln!(
            out,
            "kernel {}<{}>({})\n    -> ({}) {{",
            self.name,
            sizes.join(", "),
            inputs.join(", "),
            outputs.join(", ")
        );
        print_items(&mut out, &self.body, 1);
        out.push_str("}\n");
        out
    }
}

fn indent(out: &mut String, level: usize) {
    for _ in 0..level {
        out.push_str("    ");
    }
}

fn print_items(out: &mut String, items: &[Item], level: usize) {
    for item in items {
        match item {
            Item::Stmt(s) => {
                indent(out, level);
                print_stmt(out, s);
            }
            Item::For { var, lo, hi, body } => {
                indent(out, level);
                let _ = writeln!(out, "for {var} in {lo}:{hi} {{");
                print_items(out, body, level + 1);
                indent(out, level);
                out.push_str("}\n");
            }
        }
    }
}

fn print_stmt(out: &mut String, s: &Stmt) {
    let subs: Vec<String> = s.subs.iter().map(|a| a.to_string()).collect();
    let _ = write!(
        out,
        "{}({}) {} {}",
        s.lhs,
        subs.join(", "),
        s.op.symbol(),
        s.rhs
    );
    let mut wheres: Vec<String> = s
        .ranges
        .iter()
        .map(|r| format!("{} in {}:{}", r.index, r.lo, r.hi))
        .collect();
    wheres.extend(
        s.conds
            .iter()
            .map(|c| format!("{} {} {}", c.lhs, c.op.symbol(), c.rhs)),
    );
    if !wheres.is_empty() {
        let _ = write!(out, " where {}", wheres.join(", "));
    }
    out.push_str(";\n");
}

fn print_function(out: &mut String, f: &Function) {
    let params: Vec<String> = f
        .params
        .iter()
        .map(|(n, t)| format!("{n}: {}", t.name()))
        .collect();
    let _ = writeln!(
        out,
        "fn {}({}) -> {} {{",
        f.name,
        params.join(", "),
        f.ret.name()
    );
    print_fn_block(out, &f.body, 1);
    out.push_str("}\n");
}

fn print_fn_block(out: &mut String, body: &[FnStmt], level: usize) {
    for s in body {
        indent(out, level);
        match s {
            FnStmt::Local {
                name,
                ty,
                mutable,
                value,
            } => {
                let kw = if *mutable { "var" } else { "let" };
                let _ = writeln!(out, "{kw} {name}: {} = {value};", ty.name());
            }
            FnStmt::Assign(name, value) => {
                let _ = writeln!(out, "{name} = {value};");
            }
            FnStmt::If(c, then, other) => {
                let _ = writeln!(out, "if {c} {{");
                print_fn_block(out, then, level + 1);
                indent(out, level);
                if other.is_empty() {
                    out.push_str("}\n");
                } else {
                    out.push_str("} else {\n");
                    print_fn_block(out, other, level + 1);
                    indent(out, level);
                    out.push_str("}\n");
                }
            }
            FnStmt::While(c, body) => {
                let _ = writeln!(out, "while {c} {{");
                print_fn_block(out, body, level + 1);
                indent(out, level);
                out.push_str("}\n");
            }
            FnStmt::Return(e) => {
                let _ = writeln!(out, "return {e};");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affine_expressions_print_as_the_language_writes_them() {
        assert_eq!(Aff::var("i").plus(1).to_string(), "i + 1");
        assert_eq!(
            Aff::var("N").term(-1, "i").plus(-1).to_string(),
            "N - i - 1"
        );
        assert_eq!(Aff::constant(-2).to_string(), "-2");
        assert_eq!(Aff::default().term(2, "i").to_string(), "2 * i");
        assert_eq!(Aff::default().term(-1, "j").to_string(), "-j");
    }

    #[test]
    fn literals_keep_their_kind() {
        assert_eq!(Lit::Float(2.0).to_string(), "2.0");
        assert_eq!(Lit::Float(-0.5).to_string(), "(-0.5)");
        assert_eq!(Lit::Int(-3).to_string(), "(-3)");
    }
}
