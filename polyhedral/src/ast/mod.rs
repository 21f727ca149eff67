//! The loop AST: what AST generation produces and every back end consumes.
//!
//! An [`Ast`] is a tree of loops, conditionals, marks and statement instances. Loop variables are
//! named; integer expressions ([`AstExpr`]) range over the enclosing loops' variables and the
//! size parameters. A [`Ast::User`] node executes one instance of a statement, its iterators
//! given as expressions of the loop variables.
//!
//! Invariants that [`verify`] checks and every consumer may rely on:
//! - every variable an expression uses is bound by an enclosing `for`, and no `for` rebinds a
//!   variable that is already bound (so emitters can declare loop variables as they meet them);
//! - loop steps, divisors and moduli are positive;
//! - a `User` node names an existing statement and gives one argument per iterator;
//! - parameters are in range.
//!
//! The AST says *which* instances run and in what order; it never says what a statement does:
//! [`run_ast`] executes a statement instance exactly as the reference interpreter does.

mod display;
mod original;
mod run;
#[cfg(test)]
mod tests;
mod verify;

pub use display::Spelling;
pub use original::original_ast;
pub use run::run_ast;
pub use verify::verify;

use crate::program::{AffineExpr, Division, ParamId, StmtId, Var};
use crate::schedule::Mark;

/// An integer expression over loop variables and size parameters, evaluated in `i64`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AstExpr {
    Int(i64),
    /// A loop variable bound by an enclosing [`Ast::For`].
    Var(String),
    Param(ParamId),
    Add(Box<AstExpr>, Box<AstExpr>),
    /// `k * e`
    Mul(i64, Box<AstExpr>),
    /// `floor(e / k)` for `k > 0`.
    FloorDiv(Box<AstExpr>, i64),
    /// `ceil(e / k)` for `k > 0`.
    CeilDiv(Box<AstExpr>, i64),
    /// The non-negative remainder of `e / k` for `k > 0`.
    Mod(Box<AstExpr>, i64),
    /// The smallest of at least one expression.
    Min(Vec<AstExpr>),
    /// The largest of at least one expression.
    Max(Vec<AstExpr>),
}

impl AstExpr {
    pub fn var(name: &str) -> AstExpr {
        AstExpr::Var(name.to_string())
    }

    /// Calls `f` on every loop variable the expression reads, in the order they appear.
    pub fn for_each_var<'e>(&'e self, f: &mut dyn FnMut(&'e str)) {
        match self {
            AstExpr::Var(v) => f(v),
            AstExpr::Int(_) | AstExpr::Param(_) => {}
            AstExpr::Add(a, b) => {
                a.for_each_var(f);
                b.for_each_var(f);
            }
            AstExpr::Mul(_, x)
            | AstExpr::FloorDiv(x, _)
            | AstExpr::CeilDiv(x, _)
            | AstExpr::Mod(x, _) => x.for_each_var(f),
            AstExpr::Min(items) | AstExpr::Max(items) => {
                items.iter().for_each(|x| x.for_each_var(f))
            }
        }
    }

    /// `a + b`, folding constants.
    pub fn plus(a: AstExpr, b: AstExpr) -> AstExpr {
        match (a, b) {
            (AstExpr::Int(x), AstExpr::Int(y)) => AstExpr::Int(x + y),
            (AstExpr::Int(0), e) | (e, AstExpr::Int(0)) => e,
            (a, b) => AstExpr::Add(Box::new(a), Box::new(b)),
        }
    }

    /// `k * e`, folding constants and unit factors.
    pub fn mul(k: i64, e: AstExpr) -> AstExpr {
        match (k, e) {
            (0, _) => AstExpr::Int(0),
            (1, e) => e,
            (k, AstExpr::Int(x)) => AstExpr::Int(k * x),
            (k, e) => AstExpr::Mul(k, Box::new(e)),
        }
    }

    /// `floord(e, k)`, or `e` itself when `k` is 1.
    pub fn floor_div(e: AstExpr, k: i64) -> AstExpr {
        match (e, k) {
            (e, 1) => e,
            (AstExpr::Int(x), k) => AstExpr::Int(x.div_euclid(k)),
            (e, k) => AstExpr::FloorDiv(Box::new(e), k),
        }
    }

    /// `ceild(e, k)`, or `e` itself when `k` is 1.
    pub fn ceil_div(e: AstExpr, k: i64) -> AstExpr {
        match (e, k) {
            (e, 1) => e,
            (AstExpr::Int(x), k) => AstExpr::Int(-((-x).div_euclid(k))),
            (e, k) => AstExpr::CeilDiv(Box::new(e), k),
        }
    }

    /// The minimum of `items`, or the single item itself.
    pub fn min(mut items: Vec<AstExpr>) -> AstExpr {
        if items.len() == 1 {
            items.pop().expect("one item")
        } else {
            AstExpr::Min(items)
        }
    }

    /// The maximum of `items`, or the single item itself.
    pub fn max(mut items: Vec<AstExpr>) -> AstExpr {
        if items.len() == 1 {
            items.pop().expect("one item")
        } else {
            AstExpr::Max(items)
        }
    }

    /// An affine expression of a statement's iterators and the parameters, with iterator `d`
    /// replaced by `iter(d)`. The expression has no division variable (a domain's, a
    /// shape's); [`AstExpr::from_subscript`] writes those of subscripts.
    pub fn from_affine(e: &AffineExpr, iter: &dyn Fn(usize) -> AstExpr) -> AstExpr {
        AstExpr::from_subscript(&[], e, iter)
    }

    /// An expression of a statement (a subscript) with iterator `d` replaced by `iter(d)` and
    /// each division variable by the floor division it stands for, from `divs` (the
    /// statement's [`crate::program::Statement::divs`]).
    pub fn from_subscript(
        divs: &[Division],
        e: &AffineExpr,
        iter: &dyn Fn(usize) -> AstExpr,
    ) -> AstExpr {
        let mut out = AstExpr::Int(0);
        for &(v, c) in e.terms() {
            let x = match v {
                Var::Iter(d) => iter(d),
                Var::Param(p) => AstExpr::Param(p),
                Var::Div(k) => {
                    let d = &divs[k];
                    AstExpr::floor_div(AstExpr::from_subscript(&divs[..k], &d.num, iter), d.den)
                }
            };
            out = AstExpr::plus(out, AstExpr::mul(c, x));
        }
        AstExpr::plus(out, AstExpr::Int(e.constant))
    }
}

/// A condition of an [`Ast::If`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AstCond {
    /// `e >= 0`
    NonNegative(AstExpr),
    /// `e == 0`
    Zero(AstExpr),
    /// `e mod k == 0`, for `k > 0`.
    Divisible(AstExpr, i64),
}

/// What a generator knows about a loop, for the emitters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LoopAnnotations {
    /// The iterations may run in any order, or at the same time (a coincident band member):
    /// no dependence is carried by this loop.
    pub parallel: bool,
    /// The loop is innermost, carries no dependence, and its accesses are stride-1 or
    /// invariant in it: consecutive iterations can run in SIMD lanes.
    pub vectorizable: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ast {
    /// Children run in order.
    Block(Vec<Ast>),
    /// `for (var = lower; var <= upper; var += step) body`; `step > 0`.
    For {
        var: String,
        lower: AstExpr,
        upper: AstExpr,
        step: i64,
        body: Box<Ast>,
        annotations: LoopAnnotations,
    },
    /// Runs `then` when every condition holds, `otherwise` when one fails.
    If {
        conds: Vec<AstCond>,
        then: Box<Ast>,
        otherwise: Option<Box<Ast>>,
    },
    /// One instance of `stmt`, its iterators (outermost first) given by `args`.
    User { stmt: StmtId, args: Vec<AstExpr> },
    /// A region a pass marked for the emitters (a kernel boundary, a packed array, …).
    Mark { mark: Mark, body: Box<Ast> },
}

impl Ast {
    /// Calls `f` on this node and every node below it, parents first.
    pub fn walk(&self, f: &mut dyn FnMut(&Ast)) {
        f(self);
        match self {
            Ast::Block(items) => items.iter().for_each(|a| a.walk(f)),
            Ast::For { body, .. } | Ast::Mark { body, .. } => body.walk(f),
            Ast::If {
                then, otherwise, ..
            } => {
                then.walk(f);
                if let Some(o) = otherwise {
                    o.walk(f);
                }
            }
            Ast::User { .. } => {}
        }
    }

    /// The parts of this node when it is an `if`, or a block holding exactly one: what an
    /// `else` branch made of one `if` is printed as (`else if`).
    pub fn single_if(&self) -> Option<(&[AstCond], &Ast, Option<&Ast>)> {
        match self {
            Ast::If {
                conds,
                then,
                otherwise,
            } => Some((conds, then, otherwise.as_deref())),
            Ast::Block(items) if items.len() == 1 => items[0].single_if(),
            _ => None,
        }
    }

    /// Whether a `for` loop appears at or below this node.
    pub fn contains_loop(&self) -> bool {
        let mut found = false;
        self.walk(&mut |a| found |= matches!(a, Ast::For { .. }));
        found
    }
}

impl AstExpr {
    /// The value of the expression with loop variables given by `var` and parameters by
    /// `params` (wrapping arithmetic, as [`run_ast`] evaluates).
    pub fn eval(&self, var: &dyn Fn(&str) -> i64, params: &[i64]) -> i64 {
        match self {
            AstExpr::Int(v) => *v,
            AstExpr::Var(name) => var(name),
            AstExpr::Param(p) => params.get(p.index()).copied().unwrap_or(0),
            AstExpr::Add(a, b) => a.eval(var, params).wrapping_add(b.eval(var, params)),
            AstExpr::Mul(k, x) => k.wrapping_mul(x.eval(var, params)),
            AstExpr::FloorDiv(x, k) => x.eval(var, params).div_euclid(*k),
            AstExpr::CeilDiv(x, k) => {
                let v = x.eval(var, params);
                v.div_euclid(*k) + i64::from(v.rem_euclid(*k) != 0)
            }
            AstExpr::Mod(x, k) => x.eval(var, params).rem_euclid(*k),
            AstExpr::Min(items) => items.iter().map(|x| x.eval(var, params)).min().unwrap_or(0),
            AstExpr::Max(items) => items.iter().map(|x| x.eval(var, params)).max().unwrap_or(0),
        }
    }
}

/// An estimate of the statement instances one execution of `ast` runs, at the parameter
/// values `params`, with the enclosing loops' variables at `bindings` (innermost last). Every
/// loop below is taken at its trip count with its variable at the middle of its range, and
/// both branches of a conditional are counted at most once (the larger), so the estimate is
/// exact for rectangular nests without guards and a fair measure of the work elsewhere; it is
/// what back ends use to decide whether a parallel loop is worth its start-up cost.
pub fn estimate_work(ast: &Ast, params: &[i64], bindings: &mut Vec<(String, i64)>) -> f64 {
    match ast {
        Ast::Block(items) => items
            .iter()
            .map(|a| estimate_work(a, params, bindings))
            .sum(),
        Ast::For {
            var,
            lower,
            upper,
            step,
            body,
            ..
        } => {
            let lookup = |name: &str| {
                bindings
                    .iter()
                    .rev()
                    .find(|(n, _)| n == name)
                    .map_or(0, |&(_, v)| v)
            };
            let (lo, hi) = (lower.eval(&lookup, params), upper.eval(&lookup, params));
            if hi < lo {
                return 0.0;
            }
            let trips = ((hi - lo) / step.max(&1) + 1) as f64;
            bindings.push((var.clone(), lo + (hi - lo) / 2));
            let inner = estimate_work(body, params, bindings);
            bindings.pop();
            trips * inner
        }
        Ast::If {
            then, otherwise, ..
        } => {
            let a = estimate_work(then, params, bindings);
            let b = otherwise
                .as_ref()
                .map_or(0.0, |o| estimate_work(o, params, bindings));
            a.max(b)
        }
        Ast::User { .. } => 1.0,
        Ast::Mark { body, .. } => estimate_work(body, params, bindings),
    }
}
