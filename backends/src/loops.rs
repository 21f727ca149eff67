//! The loop AST as every back end reads it: affine forms over loop variables and parameters
//! ([`Linear`]), the variables an expression reads, the accesses of the statements below a
//! node, the value of a bound at given sizes, and the AST with the conditions those sizes
//! decide taken.

use std::collections::{BTreeMap, BTreeSet};

use polyhedral::ast::{Ast, AstCond, AstExpr};
use polyhedral::program::{ArrayId, ParamId, Program};

/// An affine form over loop variables and parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Linear {
    pub vars: BTreeMap<String, i64>,
    pub params: BTreeMap<u32, i64>,
    pub constant: i64,
}

impl Linear {
    pub(crate) fn of(e: &AstExpr) -> Option<Linear> {
        let mut out = Linear::default();
        out.add(e, 1)?;
        out.vars.retain(|_, c| *c != 0);
        out.params.retain(|_, c| *c != 0);
        Some(out)
    }

    fn add(&mut self, e: &AstExpr, k: i64) -> Option<()> {
        match e {
            AstExpr::Int(v) => self.constant += k * v,
            AstExpr::Var(v) => *self.vars.entry(v.clone()).or_default() += k,
            AstExpr::Param(p) => *self.params.entry(p.0).or_default() += k,
            AstExpr::Add(a, b) => {
                self.add(a, k)?;
                self.add(b, k)?;
            }
            AstExpr::Mul(m, a) => self.add(a, k * m)?,
            _ => return None,
        }
        Some(())
    }

    /// `self - other`, without zero terms.
    pub(crate) fn minus(&self, other: &Linear) -> Linear {
        let mut out = self.clone();
        for (v, c) in &other.vars {
            *out.vars.entry(v.clone()).or_default() -= c;
        }
        for (p, c) in &other.params {
            *out.params.entry(*p).or_default() -= c;
        }
        out.constant -= other.constant;
        out.vars.retain(|_, c| *c != 0);
        out.params.retain(|_, c| *c != 0);
        out
    }

    pub(crate) fn is_constant(&self) -> bool {
        self.vars.is_empty() && self.params.is_empty()
    }

    /// The form without the constant and the terms of `skip`, as an expression.
    pub(crate) fn to_expr_without(&self, skip: &BTreeSet<String>) -> AstExpr {
        let mut out = AstExpr::Int(0);
        for (v, c) in &self.vars {
            if !skip.contains(v) {
                out = AstExpr::plus(out, AstExpr::mul(*c, AstExpr::Var(v.clone())));
            }
        }
        for (p, c) in &self.params {
            out = AstExpr::plus(out, AstExpr::mul(*c, AstExpr::Param(ParamId(*p))));
        }
        out
    }
}

/// The variables an expression reads.
pub(crate) fn expr_vars(e: &AstExpr, out: &mut BTreeSet<String>) {
    e.for_each_var(&mut |v| {
        out.insert(v.to_string());
    });
}

/// The subscripts of every access of the statements below `ast`: (array, subscripts, is the
/// write).
pub(crate) fn accesses(program: &Program, ast: &Ast) -> Vec<(ArrayId, Vec<AstExpr>, bool)> {
    let mut out = Vec::new();
    ast.walk(&mut |a| {
        if let Ast::User { stmt, args } = a {
            let s = &program.statements[stmt.index()];
            let subs = |acc: &polyhedral::program::Access| -> Vec<AstExpr> {
                acc.subscripts
                    .iter()
                    .map(|e| AstExpr::from_subscript(&s.divs, e, &|d| args[d].clone()))
                    .collect()
            };
            for r in &s.reads {
                out.push((r.array, subs(r), false));
            }
            out.push((s.write.array, subs(&s.write), true));
        }
    });
    out
}

/// The value of `e` when it uses only parameters (at `values`) and the variables of `fixed`.
pub(crate) fn evaluate(
    e: &AstExpr,
    values: Option<&[i64]>,
    fixed: &BTreeMap<String, i64>,
) -> Option<i64> {
    let ev = |x: &AstExpr| evaluate(x, values, fixed);
    Some(match e {
        AstExpr::Int(v) => *v,
        AstExpr::Var(v) => *fixed.get(v)?,
        AstExpr::Param(p) => values?[p.index()],
        AstExpr::Add(a, b) => ev(a)?.checked_add(ev(b)?)?,
        AstExpr::Mul(k, a) => k.checked_mul(ev(a)?)?,
        AstExpr::FloorDiv(a, k) => ev(a)?.div_euclid(*k),
        AstExpr::CeilDiv(a, k) => -(-ev(a)?).div_euclid(*k),
        AstExpr::Mod(a, k) => ev(a)?.rem_euclid(*k),
        AstExpr::Min(items) => items
            .iter()
            .map(ev)
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .min()?,
        AstExpr::Max(items) => items
            .iter()
            .map(ev)
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .max()?,
    })
}

/// `ast` with the conditions that the parameters' `values` decide taken: an `if` whose
/// conditions all hold is its `then`, one with a condition that fails its `otherwise` (or
/// nothing); blocks that result inside blocks are spliced into them.
pub(crate) fn settle(ast: &Ast, values: &[i64]) -> Ast {
    let fixed = BTreeMap::new();
    let holds = |c: &AstCond| match c {
        AstCond::NonNegative(e) => evaluate(e, Some(values), &fixed).map(|v| v >= 0),
        AstCond::Zero(e) => evaluate(e, Some(values), &fixed).map(|v| v == 0),
        AstCond::Divisible(e, k) => evaluate(e, Some(values), &fixed).map(|v| v % k == 0),
    };
    match ast {
        Ast::Block(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match settle(item, values) {
                    Ast::Block(inner) => out.extend(inner),
                    a => out.push(a),
                }
            }
            if out.len() == 1 {
                out.pop().unwrap_or(Ast::Block(Vec::new()))
            } else {
                Ast::Block(out)
            }
        }
        Ast::For {
            var,
            lower,
            upper,
            step,
            body,
            annotations,
        } => Ast::For {
            var: var.clone(),
            lower: lower.clone(),
            upper: upper.clone(),
            step: *step,
            body: Box::new(settle(body, values)),
            annotations: *annotations,
        },
        Ast::If {
            conds,
            then,
            otherwise,
        } => {
            if conds.iter().any(|c| holds(c) == Some(false)) {
                return otherwise
                    .as_ref()
                    .map_or(Ast::Block(Vec::new()), |o| settle(o, values));
            }
            let open: Vec<AstCond> = conds
                .iter()
                .filter(|c| holds(c).is_none())
                .cloned()
                .collect();
            if open.is_empty() {
                return settle(then, values);
            }
            Ast::If {
                conds: open,
                then: Box::new(settle(then, values)),
                otherwise: otherwise.as_ref().map(|o| Box::new(settle(o, values))),
            }
        }
        Ast::User { .. } => ast.clone(),
        Ast::Mark { mark, body } => Ast::Mark {
            mark: mark.clone(),
            body: Box::new(settle(body, values)),
        },
    }
}
