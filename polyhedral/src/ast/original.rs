//! The original loop nest of a program as an [`Ast`]: the unscheduled baseline.
//!
//! The nest is the one the reference interpreter walks (built from the statements' 2d+1
//! positions). A loop shared by several statements runs from the smallest of their lower bounds
//! to the largest of their upper bounds, and each statement is guarded by the constraints the
//! loop no longer enforces; a loop whose statements all have the same bounds runs exactly those
//! bounds and needs no guard. Loop variables take the statements' iterator names where they
//! agree and are free, `c<depth>` otherwise. No loop is annotated: nothing here knows about
//! dependences.

use super::{Ast, AstCond, AstExpr, LoopAnnotations};
use crate::interp::InterpError;
use crate::program::{
    build_nest, collect_stmts, ConstraintKind, NestNode as Node, Program, Statement, StmtId, Var,
};

/// The program's original loop nest.
pub fn original_ast(program: &Program) -> Result<Ast, InterpError> {
    let nest = build_nest(program)?;
    let mut builder = Builder {
        program,
        names: Vec::new(),
        guarded: Vec::new(),
    };
    Ok(Ast::Block(builder.nodes(&nest)?))
}

struct Builder<'a> {
    program: &'a Program,
    /// The loop variable at each depth of the current path.
    names: Vec<String>,
    /// Whether the loop at each depth of the current path is wider than some statement's bounds.
    guarded: Vec<bool>,
}

/// A statement's bounds on one iterator: its lower bounds (the iterator is at least their
/// maximum) and upper bounds (at most their minimum), without repeats.
#[derive(PartialEq)]
struct Bounds {
    lower: Vec<AstExpr>,
    upper: Vec<AstExpr>,
}

impl Bounds {
    fn same_as(&self, other: &Bounds) -> bool {
        let same = |a: &[AstExpr], b: &[AstExpr]| {
            a.len() == b.len() && a.iter().all(|x| b.contains(x)) && b.iter().all(|x| a.contains(x))
        };
        same(&self.lower, &other.lower) && same(&self.upper, &other.upper)
    }
}

fn push_unique(list: &mut Vec<AstExpr>, e: AstExpr) {
    if !list.contains(&e) {
        list.push(e);
    }
}

impl Builder<'_> {
    fn nodes(&mut self, nodes: &[Node]) -> Result<Vec<Ast>, InterpError> {
        let mut out = Vec::new();
        for node in nodes {
            match node {
                Node::Stmt(s) => out.push(self.user(*s)),
                Node::Loop { depth, body } => out.push(self.for_loop(*depth, body)?),
            }
        }
        Ok(out)
    }

    fn for_loop(&mut self, depth: usize, body: &[Node]) -> Result<Ast, InterpError> {
        let program = self.program;
        let mut stmts = Vec::new();
        collect_stmts(body, &mut stmts);
        let bounds: Vec<Bounds> = stmts
            .iter()
            .map(|s| self.bounds(&program.statements[s.index()], depth))
            .collect::<Result<_, _>>()?;
        let exact = bounds.iter().all(|b| b.same_as(&bounds[0]));
        let (lower, upper) = if exact {
            (
                AstExpr::max(bounds[0].lower.clone()),
                AstExpr::min(bounds[0].upper.clone()),
            )
        } else {
            let mut lowers = Vec::new();
            let mut uppers = Vec::new();
            for b in &bounds {
                push_unique(&mut lowers, AstExpr::max(b.lower.clone()));
                push_unique(&mut uppers, AstExpr::min(b.upper.clone()));
            }
            (AstExpr::min(lowers), AstExpr::max(uppers))
        };
        let var = self.loop_name(&stmts, depth);
        self.names.push(var.clone());
        self.guarded.push(!exact);
        let inner = self.nodes(body);
        self.names.pop();
        self.guarded.pop();
        Ok(Ast::For {
            var,
            lower,
            upper,
            step: 1,
            body: Box::new(Ast::Block(inner?)),
            annotations: LoopAnnotations::default(),
        })
    }

    fn iter_expr(&self) -> impl Fn(usize) -> AstExpr + '_ {
        |d| AstExpr::Var(self.names[d].clone())
    }

    /// The bounds `stmt`'s domain puts on its iterator at `depth`, in terms of the enclosing
    /// loop variables.
    fn bounds(&self, stmt: &Statement, depth: usize) -> Result<Bounds, InterpError> {
        let var = Var::Iter(depth);
        let iter = self.iter_expr();
        let mut b = Bounds {
            lower: Vec::new(),
            upper: Vec::new(),
        };
        for c in &stmt.domain {
            if c.expr.innermost_iter() != Some(depth) {
                continue;
            }
            // a·x + rest ≥ 0 (or = 0).
            let a = c.expr.coeff(var);
            let mut rest = c.expr.clone();
            rest.add_term(var, -a);
            let rest_e = AstExpr::from_affine(&rest, &iter);
            let neg_rest = AstExpr::from_affine(&rest.scale(-1), &iter);
            let zero = c.kind == ConstraintKind::Zero;
            if a > 0 {
                push_unique(&mut b.lower, AstExpr::ceil_div(neg_rest.clone(), a));
                if zero {
                    push_unique(&mut b.upper, AstExpr::floor_div(neg_rest, a));
                }
            } else {
                push_unique(&mut b.upper, AstExpr::floor_div(rest_e.clone(), -a));
                if zero {
                    push_unique(&mut b.lower, AstExpr::ceil_div(rest_e, -a));
                }
            }
        }
        let missing = |which| InterpError::Unbounded {
            stmt: stmt.name.clone(),
            iter: stmt.iterators[depth].clone(),
            which,
        };
        if b.lower.is_empty() {
            return Err(missing("lower"));
        }
        if b.upper.is_empty() {
            return Err(missing("upper"));
        }
        Ok(b)
    }

    /// The statements' common iterator name when they agree and it is free, else `c<depth>`.
    fn loop_name(&self, stmts: &[StmtId], depth: usize) -> String {
        let program = self.program;
        let taken = |n: &str| {
            self.names.iter().any(|m| m == n) || program.params.iter().any(|p| p.name == n)
        };
        let first = &program.statements[stmts[0].index()].iterators[depth];
        let agree = stmts
            .iter()
            .all(|s| &program.statements[s.index()].iterators[depth] == first);
        if agree && !taken(first) {
            return first.clone();
        }
        let mut name = format!("c{depth}");
        let mut k = 0;
        while taken(&name) {
            k += 1;
            name = format!("c{depth}_{k}");
        }
        name
    }

    fn user(&self, id: StmtId) -> Ast {
        let stmt = &self.program.statements[id.index()];
        let iter = self.iter_expr();
        let args = (0..stmt.depth()).map(&iter).collect();
        let user = Ast::User { stmt: id, args };
        let conds: Vec<AstCond> = stmt
            .domain
            .iter()
            .filter(|c| c.expr.innermost_iter().is_none_or(|d| self.guarded[d]))
            .map(|c| {
                let e = AstExpr::from_affine(&c.expr, &iter);
                match c.kind {
                    ConstraintKind::NonNegative => AstCond::NonNegative(e),
                    ConstraintKind::Zero => AstCond::Zero(e),
                }
            })
            .collect();
        if conds.is_empty() {
            user
        } else {
            Ast::If {
                conds,
                then: Box::new(user),
                otherwise: None,
            }
        }
    }
}
