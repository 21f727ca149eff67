//! The printed form of a [`Program`], as `polyfuse check` shows it and snapshots record it.
//!
//! Domains and accesses are written in isl's notation (`[N] -> { S0[i, j] : 0 <= i < N }`), so
//! they can be pasted into isl or read back by the integer-set library's parser.

use std::fmt::{self, Write};

use super::{
    Access, AffineExpr, BinaryOp, Block, Constraint, ConstraintKind, Expr, ExprArena, ExprId,
    Function, Literal, ParamId, Program, ScalarType, SourceKind, Statement, Stmt, UnaryOp, Var,
};

impl Program {
    fn param_name(&self) -> impl Fn(ParamId) -> String + '_ {
        |p| self.params[p.index()].name.clone()
    }

    /// `[M, N] -> ` or nothing when there are no parameters.
    fn param_prefix(&self) -> String {
        if self.params.is_empty() {
            String::new()
        } else {
            let names: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
            format!("[{}] -> ", names.join(", "))
        }
    }

    /// An affine expression over a statement's iterators.
    pub fn display_affine(&self, stmt: &Statement, e: &AffineExpr) -> String {
        let iter_name = |i: usize| stmt.iterators[i].clone();
        let param_name = self.param_name();
        let text = e.display_with(&iter_name, &param_name).to_string();
        text
    }

    /// The domain in isl notation: `[N] -> { S0[i, j] : 0 <= i < N and j >= i }`.
    pub fn display_domain(&self, stmt: &Statement) -> String {
        let tuple = format!("{}[{}]", stmt.name, stmt.iterators.join(", "));
        let constraints = self.display_constraints(stmt, &stmt.domain);
        if constraints.is_empty() {
            format!("{}{{ {tuple} }}", self.param_prefix())
        } else {
            format!("{}{{ {tuple} : {constraints} }}", self.param_prefix())
        }
    }

    /// An access as an isl map: `[N] -> { S0[i, j] -> A[i, j + 1] }`.
    pub fn display_access(&self, stmt: &Statement, acc: &Access) -> String {
        format!(
            "{}{{ {}[{}] -> {} }}",
            self.param_prefix(),
            stmt.name,
            stmt.iterators.join(", "),
            self.display_element(stmt, acc)
        )
    }

    /// `A[i, j + 1]`, a division variable written as its floor division
    /// (`A[t - 2*floor((t)/2), i]`).
    pub fn display_element(&self, stmt: &Statement, acc: &Access) -> String {
        let iter_name = |i: usize| stmt.iterators[i].clone();
        let param_name = self.param_name();
        let subs: Vec<String> = acc
            .subscripts
            .iter()
            .map(|e| {
                e.display_with_divs(&stmt.divs, &iter_name, &param_name)
                    .to_string()
            })
            .collect();
        format!("{}[{}]", self.array(acc.array).name, subs.join(", "))
    }

    /// Constraints joined by `and`, with a lower and an upper bound of the same iterator written
    /// as one chain (`0 <= i < N`).
    fn display_constraints(&self, stmt: &Statement, constraints: &[Constraint]) -> String {
        let name = |e: &AffineExpr| self.display_affine(stmt, e);
        let mut parts = Vec::new();
        let mut used = vec![false; constraints.len()];
        for (k, c) in constraints.iter().enumerate() {
            if used[k] {
                continue;
            }
            used[k] = true;
            let Some(v) = c.expr.innermost_iter() else {
                parts.push(format!(
                    "{} {} 0",
                    name(&c.expr),
                    if c.kind == ConstraintKind::Zero {
                        "="
                    } else {
                        ">="
                    }
                ));
                continue;
            };
            let var = Var::Iter(v);
            let coeff = c.expr.coeff(var);
            // coeff·v + rest (>= or =) 0
            let rest = c.expr.sub(&AffineExpr::term(var, coeff));
            let lhs = if coeff.abs() == 1 {
                stmt.iterators[v].clone()
            } else {
                format!("{}{}", coeff.abs(), stmt.iterators[v])
            };
            let bound = if coeff > 0 { rest.scale(-1) } else { rest };
            if c.kind == ConstraintKind::Zero {
                parts.push(format!("{lhs} = {}", name(&bound)));
                continue;
            }
            let upper_of = |b: &AffineExpr| {
                if b.constant < 0 || b.is_constant() {
                    format!("< {}", name(&b.add(&AffineExpr::constant(1))))
                } else {
                    format!("<= {}", name(b))
                }
            };
            if coeff > 0 {
                // A matching upper bound with the same coefficient makes a chain.
                let partner = constraints.iter().enumerate().position(|(m, d)| {
                    !used[m]
                        && d.kind == ConstraintKind::NonNegative
                        && d.expr.innermost_iter() == Some(v)
                        && d.expr.coeff(var) == -coeff
                });
                match partner {
                    Some(m) => {
                        used[m] = true;
                        let d = &constraints[m];
                        let upper = d.expr.sub(&AffineExpr::term(var, -coeff));
                        parts.push(format!("{} <= {lhs} {}", name(&bound), upper_of(&upper)));
                    }
                    None => parts.push(format!("{lhs} >= {}", name(&bound))),
                }
            } else {
                parts.push(format!("{lhs} {}", upper_of(&bound)));
            }
        }
        parts.join(" and ")
    }

    /// A statement body as an expression.
    pub fn display_body(&self, stmt: &Statement) -> String {
        let mut out = String::new();
        let ctx = ExprContext {
            program: self,
            arena: &stmt.exprs,
            stmt: Some(stmt),
            function: None,
        };
        ctx.write(&mut out, stmt.body, 0);
        out
    }
}

struct ExprContext<'a> {
    program: &'a Program,
    arena: &'a ExprArena,
    stmt: Option<&'a Statement>,
    function: Option<&'a Function>,
}

fn precedence(op: BinaryOp) -> u8 {
    match op {
        BinaryOp::Or => 1,
        BinaryOp::And => 2,
        BinaryOp::Eq | BinaryOp::Ne => 3,
        BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => 4,
        BinaryOp::Add | BinaryOp::Sub => 5,
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => 6,
        BinaryOp::Min | BinaryOp::Max => 9,
    }
}

pub(crate) fn format_literal(l: Literal) -> String {
    match l.ty {
        ScalarType::Bool => (l.value != 0.0).to_string(),
        ScalarType::I32 => format!("{}", l.value as i64),
        _ => {
            let s = format!("{:?}", l.value);
            match l.ty {
                ScalarType::F64 => s,
                t => format!("{s}{}", t.name()),
            }
        }
    }
}

impl ExprContext<'_> {
    /// Writes `id`, parenthesised when its precedence is below `min_prec`.
    fn write(&self, out: &mut String, id: ExprId, min_prec: u8) {
        match &self.arena[id] {
            Expr::Literal(l) => out.push_str(&format_literal(*l)),
            Expr::Iter(i) => match self.stmt {
                Some(s) => out.push_str(&s.iterators[*i]),
                None => write!(out, "%iter{i}").unwrap(),
            },
            Expr::Param(p) => out.push_str(&self.program.params[p.index()].name),
            Expr::Read(r) => match self.stmt {
                Some(s) => out.push_str(&self.program.display_element(s, &s.reads[*r])),
                None => write!(out, "%read{r}").unwrap(),
            },
            Expr::Local(l) => match self.function {
                Some(f) => out.push_str(&f.locals[l.index()].name),
                None => write!(out, "%local{}", l.0).unwrap(),
            },
            Expr::Unary(op, a) => {
                out.push_str(match op {
                    UnaryOp::Neg => "-",
                    UnaryOp::Not => "!",
                });
                self.write(out, *a, 7);
            }
            Expr::Binary(op @ (BinaryOp::Min | BinaryOp::Max), a, b) => {
                write!(out, "{}(", op.symbol()).unwrap();
                self.write(out, *a, 0);
                out.push_str(", ");
                self.write(out, *b, 0);
                out.push(')');
            }
            Expr::Binary(op, a, b) => {
                let p = precedence(*op);
                let paren = p < min_prec;
                if paren {
                    out.push('(');
                }
                self.write(out, *a, p);
                write!(out, " {} ", op.symbol()).unwrap();
                self.write(out, *b, p + 1);
                if paren {
                    out.push(')');
                }
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                out.push_str("select(");
                self.write(out, *cond, 0);
                out.push_str(", ");
                self.write(out, *then, 0);
                out.push_str(", ");
                self.write(out, *otherwise, 0);
                out.push(')');
            }
            Expr::Math(m, args) => {
                write!(out, "{}(", m.name()).unwrap();
                self.write_args(out, args);
                out.push(')');
            }
            Expr::Cast(ty, a) => {
                write!(out, "{ty}(").unwrap();
                self.write(out, *a, 0);
                out.push(')');
            }
            Expr::Call(f, args) => {
                write!(out, "{}(", self.program.function(*f).name).unwrap();
                self.write_args(out, args);
                out.push(')');
            }
        }
    }

    fn write_args(&self, out: &mut String, args: &[ExprId]) {
        for (k, a) in args.iter().enumerate() {
            if k > 0 {
                out.push_str(", ");
            }
            self.write(out, *a, 0);
        }
    }

    fn write_block(&self, out: &mut String, block: &Block, indent: usize) {
        let f = self.function.expect("blocks belong to functions");
        let pad = "    ".repeat(indent);
        for s in block {
            match s {
                Stmt::Assign(l, e) => {
                    write!(out, "{pad}{} = ", f.locals[l.index()].name).unwrap();
                    self.write(out, *e, 0);
                    out.push_str(";\n");
                }
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    write!(out, "{pad}if ").unwrap();
                    self.write(out, *cond, 0);
                    out.push_str(" {\n");
                    self.write_block(out, then, indent + 1);
                    if otherwise.is_empty() {
                        writeln!(out, "{pad}}}").unwrap();
                    } else {
                        writeln!(out, "{pad}}} else {{").unwrap();
                        self.write_block(out, otherwise, indent + 1);
                        writeln!(out, "{pad}}}").unwrap();
                    }
                }
                Stmt::While { cond, body } => {
                    write!(out, "{pad}while ").unwrap();
                    self.write(out, *cond, 0);
                    out.push_str(" {\n");
                    self.write_block(out, body, indent + 1);
                    writeln!(out, "{pad}}}").unwrap();
                }
                Stmt::Return(e) => {
                    write!(out, "{pad}return ").unwrap();
                    self.write(out, *e, 0);
                    out.push_str(";\n");
                }
            }
        }
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.source {
            SourceKind::Kernel => "kernel",
            SourceKind::CScop { .. } => "C SCoP",
        };
        writeln!(f, "{kind} {}", self.name)?;
        if !self.params.is_empty() {
            let ps: Vec<String> = self
                .params
                .iter()
                .map(|p| format!("{} = {}", p.name, p.value))
                .collect();
            writeln!(f, "params: {}", ps.join(", "))?;
        }
        writeln!(f, "arrays:")?;
        let param_name = self.param_name();
        let no_iter = |_: usize| String::new();
        for a in &self.arrays {
            let dims: Vec<String> = a
                .shape
                .iter()
                .map(|e| e.display_with(&no_iter, &param_name).to_string())
                .collect();
            let shape = if dims.is_empty() {
                String::new()
            } else {
                format!("[{}]", dims.join(", "))
            };
            writeln!(f, "  {}: {}{shape} {}", a.name, a.elem, a.role.name())?;
        }
        for func in &self.functions {
            let params: Vec<String> = func.locals[..func.params]
                .iter()
                .map(|l| format!("{}: {}", l.name, l.ty))
                .collect();
            writeln!(
                f,
                "function {}({}) -> {} {{",
                func.name,
                params.join(", "),
                func.ret
            )?;
            let mut body = String::new();
            let ctx = ExprContext {
                program: self,
                arena: &func.exprs,
                stmt: None,
                function: Some(func),
            };
            ctx.write_block(&mut body, &func.body, 1);
            write!(f, "{body}")?;
            writeln!(f, "}}")?;
        }
        writeln!(f, "statements:")?;
        for s in &self.statements {
            writeln!(
                f,
                "  {}: {} = {}",
                s.name,
                self.display_element(s, &s.write),
                self.display_body(s)
            )?;
            writeln!(f, "    domain: {}", self.display_domain(s))?;
            let sched: Vec<String> = s
                .original_schedule()
                .iter()
                .map(|e| self.display_affine(s, e))
                .collect();
            writeln!(f, "    schedule: [{}]", sched.join(", "))?;
            if let Some(r) = &s.reduction {
                let iters: Vec<&str> = r.iters.iter().map(|&i| s.iterators[i].as_str()).collect();
                writeln!(
                    f,
                    "    reduction: {} over {}",
                    r.op.name(),
                    iters.join(", ")
                )?;
            }
            writeln!(f, "    write: {}", self.display_access(s, &s.write))?;
            for r in &s.reads {
                writeln!(f, "    read: {}", self.display_access(s, r))?;
            }
        }
        Ok(())
    }
}
