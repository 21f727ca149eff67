//! Statement instances under a schedule-tree path, as integer conjunctions: what AST
//! generation and the verifier walk the tree with.
//!
//! An [`Instances`] holds the instances of one statement reaching a node together with the
//! values of the `d` band members above it, as one conjunction over the variables
//! `[parameters | c_0 … c_{d-1} | statement iterators | locals]`. Locals are the integer
//! divisions of quasi-affine functions (`q = floor(e/k)` as `k·q ≤ e ≤ k·q + k - 1`), so
//! every local is a function of the other variables and the conjunction is exact.

use super::expr::{QuasiAffine, QuasiConstraint};
use super::ScheduleError;
use crate::program::{ConstraintKind, Program, StmtId, Var};
use crate::sets::conj::{add as checked_add, Conj, Row};

#[derive(Clone, Debug)]
pub(crate) struct Instances {
    pub stmt: StmtId,
    pub n_iter: usize,
    /// Parameters.
    pub np: usize,
    /// Schedule dimensions.
    pub d: usize,
    pub rel: Conj,
}

impl Instances {
    /// Every instance of `stmt`'s domain, with no schedule dimension yet.
    pub fn domain(program: &Program, stmt: StmtId) -> Result<Instances, ScheduleError> {
        let s = program
            .statements
            .get(stmt.index())
            .ok_or_else(|| ScheduleError::Invalid(format!("no statement {}", stmt.index())))?;
        let np = program.params.len();
        let n_iter = s.depth();
        let mut inst = Instances {
            stmt,
            n_iter,
            np,
            d: 0,
            rel: Conj::universe(np + n_iter),
        };
        for c in &s.domain {
            let q = QuasiConstraint {
                expr: c.expr.clone().into(),
                kind: c.kind,
            };
            inst.add_iter_constraint(&q)?;
        }
        Ok(inst)
    }

    /// New instances of an extension at `d` schedule dimensions: constraints over `c_k` (as
    /// `Var::Iter(k)`, `k < d`) and the iterators (`Var::Iter(d + j)`), within the domain.
    pub fn extension(
        program: &Program,
        stmt: StmtId,
        d: usize,
        constraints: &[QuasiConstraint],
    ) -> Result<Instances, ScheduleError> {
        let mut inst = Instances::domain(program, stmt)?;
        let np = inst.np;
        let map: Vec<usize> = (0..np)
            .chain((np..np + inst.n_iter).map(|v| v + d))
            .collect();
        inst.rel = inst.rel.remap(np + d + inst.n_iter, &map);
        inst.d = d;
        let n_iter = inst.n_iter;
        for c in constraints {
            if !c.expr.uses_only(d + n_iter, np) {
                return Err(ScheduleError::Invalid(format!(
                    "extension constraint of {} uses an unknown variable",
                    program.statements[stmt.index()].name
                )));
            }
            let col = |v: Var| match v {
                Var::Param(p) => p.index(),
                Var::Iter(k) => np + k,
                // `uses_only` above admits no division variable.
                Var::Div(_) => unreachable!("an extension constraint with a division variable"),
            };
            inst.add_constraint(c, &col)?;
        }
        Ok(inst)
    }

    fn iter_col(&self) -> impl Fn(Var) -> usize {
        let (np, d) = (self.np, self.d);
        move |v| match v {
            Var::Param(p) => p.index(),
            Var::Iter(j) => np + d + j,
            // Domains, filters and band functions are checked by `uses_only`, which admits no
            // division variable (those of a schedule are its floor terms).
            Var::Div(_) => unreachable!("a schedule expression with a division variable"),
        }
    }

    fn check_scope(&self, q: &QuasiAffine, what: &str) -> Result<(), ScheduleError> {
        if q.uses_only(self.n_iter, self.np) {
            Ok(())
        } else {
            Err(ScheduleError::Invalid(format!(
                "{what} of statement {} uses an unknown variable or a non-positive divisor",
                self.stmt.index()
            )))
        }
    }

    /// Keeps the instances satisfying `c` (over the iterators and the parameters).
    pub fn add_iter_constraint(&mut self, c: &QuasiConstraint) -> Result<(), ScheduleError> {
        self.check_scope(&c.expr, "a filter")?;
        let col = self.iter_col();
        self.add_constraint(c, &col)
    }

    fn add_constraint(
        &mut self,
        c: &QuasiConstraint,
        col: &dyn Fn(Var) -> usize,
    ) -> Result<(), ScheduleError> {
        let row = lower(&c.expr, col, &mut self.rel)?;
        match c.kind {
            ConstraintKind::NonNegative => self.rel.ineqs.push(row),
            ConstraintKind::Zero => self.rel.eqs.push(row),
        }
        Ok(())
    }

    /// Appends schedule dimension `c_d = f(iterators, parameters)`.
    pub fn add_dim(&mut self, f: &QuasiAffine) -> Result<(), ScheduleError> {
        self.check_scope(f, "a band function")?;
        let at = self.np + self.d;
        let map: Vec<usize> = (0..self.rel.n)
            .map(|v| if v < at { v } else { v + 1 })
            .collect();
        self.rel = self.rel.remap(self.rel.n + 1, &map);
        self.d += 1;
        let col = self.iter_col();
        let mut row = lower(f, &col, &mut self.rel)?;
        row[1 + at] -= 1;
        self.rel.eqs.push(row);
        Ok(())
    }

    /// The rows of `ctx` (over parameters and the schedule dimensions) over this relation's
    /// variables.
    pub fn with_context(&self, ctx: &Conj) -> Conj {
        let mut c = self.rel.clone();
        let map: Vec<usize> = (0..ctx.n).collect();
        c.and(&ctx.remap(c.n, &map));
        c
    }
}

/// A row for `q` over `c`'s variables; divisions become fresh locals of `c` (with their
/// defining constraints), so the row has `c.n + 1` entries once it returns.
pub(crate) fn lower(
    q: &QuasiAffine,
    col: &dyn Fn(Var) -> usize,
    c: &mut Conj,
) -> Result<Row, ScheduleError> {
    let mut row = vec![0; c.n + 1];
    row[0] = q.affine.constant;
    for &(v, k) in q.affine.terms() {
        let i = 1 + col(v);
        row[i] = checked_add(row[i], k)?;
    }
    for f in &q.floors {
        if f.den <= 0 {
            return Err(ScheduleError::Invalid(
                "division by a non-positive number".into(),
            ));
        }
        let mut num = lower(&f.num, col, c)?;
        // The same division twice is one local: `floor(i/4)` in a tile member and in
        // `i - 4*floor(i/4)` of its point member must be equal for `i` to be recovered.
        let existing = (0..c.n).find(|&l| {
            num[1 + l] == 0 && {
                let mut lo = num.clone();
                lo[1 + l] = -f.den;
                c.ineqs.contains(&lo) && {
                    let mut hi: Row = num.iter().map(|&x| -x).collect();
                    hi[1 + l] = f.den;
                    hi[0] += f.den - 1;
                    c.ineqs.contains(&hi)
                }
            }
        });
        if let Some(l) = existing {
            row[1 + l] = checked_add(row[1 + l], f.coeff)?;
            continue;
        }
        c.add_vars(1);
        let l = c.n - 1;
        num.resize(c.n + 1, 0);
        // den·l ≤ num ≤ den·l + den - 1
        let mut lo = num.clone();
        lo[1 + l] = checked_add(lo[1 + l], -f.den)?;
        let mut hi: Row = num.iter().map(|&x| -x).collect();
        hi[1 + l] = checked_add(hi[1 + l], f.den)?;
        hi[0] = checked_add(hi[0], f.den - 1)?;
        c.ineqs.push(lo);
        c.ineqs.push(hi);
        row.resize(c.n + 1, 0);
        row[1 + l] = checked_add(row[1 + l], f.coeff)?;
    }
    row.resize(c.n + 1, 0);
    for r in c.eqs.iter_mut().chain(c.ineqs.iter_mut()) {
        r.resize(c.n + 1, 0);
    }
    Ok(row)
}
