//! The AST verifier: checks the invariants listed in the module docs of [`super`] before an
//! interpreter or an emitter walks a tree.

use super::{Ast, AstCond, AstExpr};
use crate::program::Program;

/// Checks scoping, arities and positivity; the message names the first violation found.
pub fn verify(program: &Program, ast: &Ast) -> Result<(), String> {
    let mut scope = Vec::new();
    verify_node(program, ast, &mut scope)
}

fn verify_node<'a>(
    program: &Program,
    ast: &'a Ast,
    scope: &mut Vec<&'a str>,
) -> Result<(), String> {
    match ast {
        Ast::Block(items) => items
            .iter()
            .try_for_each(|item| verify_node(program, item, scope)),
        Ast::For {
            var,
            lower,
            upper,
            step,
            body,
            ..
        } => {
            verify_expr(program, lower, scope)?;
            verify_expr(program, upper, scope)?;
            if *step <= 0 {
                return Err(format!("the loop over `{var}` has step {step}"));
            }
            if scope.contains(&var.as_str()) {
                return Err(format!(
                    "the loop over `{var}` rebinds an enclosing variable"
                ));
            }
            scope.push(var);
            let result = verify_node(program, body, scope);
            scope.pop();
            result
        }
        Ast::If {
            conds,
            then,
            otherwise,
        } => {
            for c in conds {
                match c {
                    AstCond::NonNegative(e) | AstCond::Zero(e) => verify_expr(program, e, scope)?,
                    AstCond::Divisible(e, k) => {
                        verify_expr(program, e, scope)?;
                        positive(*k, "modulus")?;
                    }
                }
            }
            verify_node(program, then, scope)?;
            match otherwise {
                Some(o) => verify_node(program, o, scope),
                None => Ok(()),
            }
        }
        Ast::User { stmt, args } => {
            let Some(s) = program.statements.get(stmt.index()) else {
                return Err(format!("statement {} does not exist", stmt.0));
            };
            if args.len() != s.depth() {
                return Err(format!(
                    "{} has {} iterators but is given {} arguments",
                    s.name,
                    s.depth(),
                    args.len()
                ));
            }
            args.iter().try_for_each(|a| verify_expr(program, a, scope))
        }
        Ast::Mark { body, .. } => verify_node(program, body, scope),
    }
}

fn positive(k: i64, what: &str) -> Result<(), String> {
    if k > 0 {
        Ok(())
    } else {
        Err(format!("{what} {k} is not positive"))
    }
}

fn verify_expr(program: &Program, e: &AstExpr, scope: &[&str]) -> Result<(), String> {
    match e {
        AstExpr::Int(_) => Ok(()),
        AstExpr::Var(v) => {
            if scope.contains(&v.as_str()) {
                Ok(())
            } else {
                Err(format!("`{v}` is used outside a loop that binds it"))
            }
        }
        AstExpr::Param(p) => {
            if p.index() < program.params.len() {
                Ok(())
            } else {
                Err(format!("parameter {} does not exist", p.0))
            }
        }
        AstExpr::Add(a, b) => {
            verify_expr(program, a, scope)?;
            verify_expr(program, b, scope)
        }
        AstExpr::Mul(_, x) => verify_expr(program, x, scope),
        AstExpr::FloorDiv(x, k) | AstExpr::CeilDiv(x, k) => {
            positive(*k, "divisor")?;
            verify_expr(program, x, scope)
        }
        AstExpr::Mod(x, k) => {
            positive(*k, "modulus")?;
            verify_expr(program, x, scope)
        }
        AstExpr::Min(items) | AstExpr::Max(items) => {
            if items.is_empty() {
                return Err("min or max of nothing".into());
            }
            items
                .iter()
                .try_for_each(|x| verify_expr(program, x, scope))
        }
    }
}
