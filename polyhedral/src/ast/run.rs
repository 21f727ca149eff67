//! The AST interpreter: executes a generated [`Ast`] on a [`Memory`].
//!
//! Statement instances run through the reference interpreter's own compiled statements, so a
//! generated AST computes exactly what [`crate::interp::run`] computes whenever it runs the same
//! instances in a dependence-respecting order. Every instance is checked against its
//! statement's domain first: an AST that executes a point outside it is wrong, and is reported
//! rather than silently run. Integer expressions are evaluated in `i64`, wrapping on overflow.

use super::{Ast, AstCond, AstExpr};
use crate::interp::{InstanceRunner, InterpError, Memory, RunStats};
use crate::program::Program;

/// Runs `ast` on `memory`; the AST is verified first.
pub fn run_ast(program: &Program, ast: &Ast, memory: &mut Memory) -> Result<RunStats, InterpError> {
    super::verify(program, ast).map_err(InterpError::InvalidAst)?;
    let mut runner = AstRunner {
        program,
        params: program.param_values(),
        instances: InstanceRunner::new(program, memory)?,
        scope: Vec::new(),
        stats: RunStats::default(),
    };
    runner.run(ast)?;
    Ok(runner.stats)
}

struct AstRunner<'a, 'm> {
    program: &'a Program,
    params: Vec<i64>,
    instances: InstanceRunner<'a, 'm>,
    /// Bound loop variables, innermost last.
    scope: Vec<(&'a str, i64)>,
    stats: RunStats,
}

impl<'a> AstRunner<'a, '_> {
    fn run(&mut self, ast: &'a Ast) -> Result<(), InterpError> {
        match ast {
            Ast::Block(items) => items.iter().try_for_each(|item| self.run(item)),
            Ast::For {
                var,
                lower,
                upper,
                step,
                body,
                ..
            } => {
                let lo = self.eval(lower);
                let hi = self.eval(upper);
                self.scope.push((var, lo));
                let slot = self.scope.len() - 1;
                let mut i = lo;
                while i <= hi {
                    self.scope[slot].1 = i;
                    self.run(body)?;
                    i = match i.checked_add(*step) {
                        Some(next) => next,
                        None => break,
                    };
                }
                self.scope.pop();
                Ok(())
            }
            Ast::If {
                conds,
                then,
                otherwise,
            } => {
                if conds.iter().all(|c| self.holds(c)) {
                    self.run(then)
                } else if let Some(o) = otherwise {
                    self.run(o)
                } else {
                    Ok(())
                }
            }
            Ast::User { stmt, args } => {
                let iters: Vec<i64> = args.iter().map(|a| self.eval(a)).collect();
                if !self.instances.in_domain(*stmt, &iters) {
                    let s = &self.program.statements[stmt.index()];
                    let point: Vec<String> = iters.iter().map(|v| v.to_string()).collect();
                    return Err(InterpError::OutsideDomain {
                        stmt: s.name.clone(),
                        point: point.join(", "),
                    });
                }
                self.instances.execute(*stmt, &iters)?;
                self.stats.instances += 1;
                Ok(())
            }
            Ast::Mark { body, .. } => self.run(body),
        }
    }

    fn holds(&self, c: &AstCond) -> bool {
        match c {
            AstCond::NonNegative(e) => self.eval(e) >= 0,
            AstCond::Zero(e) => self.eval(e) == 0,
            AstCond::Divisible(e, k) => self.eval(e).rem_euclid(*k) == 0,
        }
    }

    /// Evaluates a verified expression: every variable is bound, every divisor positive.
    fn eval(&self, e: &AstExpr) -> i64 {
        match e {
            AstExpr::Int(v) => *v,
            AstExpr::Var(name) => self
                .scope
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map_or(0, |&(_, v)| v),
            AstExpr::Param(p) => self.params[p.index()],
            AstExpr::Add(a, b) => self.eval(a).wrapping_add(self.eval(b)),
            AstExpr::Mul(k, x) => k.wrapping_mul(self.eval(x)),
            AstExpr::FloorDiv(x, k) => self.eval(x).div_euclid(*k),
            AstExpr::CeilDiv(x, k) => {
                let v = self.eval(x);
                v.div_euclid(*k) + i64::from(v.rem_euclid(*k) != 0)
            }
            AstExpr::Mod(x, k) => self.eval(x).rem_euclid(*k),
            AstExpr::Min(items) => items.iter().map(|x| self.eval(x)).min().unwrap_or(0),
            AstExpr::Max(items) => items.iter().map(|x| self.eval(x)).max().unwrap_or(0),
        }
    }
}
