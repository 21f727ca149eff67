//! The cores: the iterations of a kernel's outermost parallel loops spread over the blocks.
//!
//! The top-level loop nests of the AST run one after another, separated by `sync_all`. A nest
//! whose outermost loop is parallel (no dependence carried) runs its iterations on all the
//! blocks in turn (block `b` takes iterations `b`, `b + B`, …) when every statement below the
//! loop lies in a region directly under it, and the boxes of the arrays the nest writes are
//! apart for different iterations: per pair of boxes of one array, some dimension whose lowest
//! index is `a·i + k` in the loop's variable `i` alone, with `|a|` (times the step) at least
//! the width of the one plus how far it starts past the other. Then no two blocks touch the
//! same bytes of an array that one of them writes. Where the loop alone has fewer iterations
//! than the machine has cores, or its body is too large for one region, and its body is one
//! parallel loop of constant bounds whose regions are apart along it and every loop outside,
//! the blocks take the iterations of the loops together, and so on inward while they are fewer
//! than the cores (tiles of a tensor that is small along its first dimensions). A matrix tile
//! counts as the region of what it touches. A vector loop of many iterations per block is
//! spread as runs instead, one per block, so that each still runs on the Vector unit. Any
//! other nest runs on block 0 alone.

use polyhedral::ast::{Ast, AstExpr, LoopAnnotations};
use polyhedral::schedule::mark::Mark;
use sim::isa::{CmpOp, Instr, Reg, SOp, Scalar};

use super::emit::Emitter;
use super::promote::{self, Boxes};
use crate::loops::Linear;
use crate::npu::Error;

/// The iterations of a vector loop's run on one block are a multiple of this (a full repeat
/// of f16 lanes).
const RUN: i64 = 128;

/// The iterations per block from which a vector loop is spread in runs.
const RUNS_FROM: i64 = 4;

/// A top-level loop that runs on every block.
struct Spread<'a> {
    var: &'a str,
    /// The loop runs on the Vector unit (innermost, iterations independent, stride one): the
    /// blocks take runs of iterations instead of one iteration each.
    vectorizable: bool,
    lower: &'a AstExpr,
    upper: &'a AstExpr,
    step: i64,
    body: &'a Ast,
    trips: i64,
    /// Parallel loops each all of the body of the one before, spread with it while the loops
    /// so far have fewer iterations than the machine has cores: their variables, first
    /// values, steps and trips, outermost first.
    inner: Vec<Inner<'a>>,
}

struct Inner<'a> {
    var: &'a str,
    first: i64,
    step: i64,
    trips: i64,
    body: &'a Ast,
}

impl Emitter<'_> {
    /// The program of `ast` on the machine's cores; the number of blocks it uses.
    pub(super) fn on_cores(&mut self, ast: &Ast) -> Result<u32, Error> {
        let items: Vec<&Ast> = match ast {
            Ast::Block(items) => items.iter().collect(),
            a => vec![a],
        };
        let spread: Vec<Option<Spread>> = items.iter().map(|a| self.spread(a)).collect();
        let cores = self.target.cores() as i64;
        let blocks = spread
            .iter()
            .flatten()
            .map(|s| (s.trips * s.inner.iter().map(|i| i.trips).product::<i64>()).min(cores))
            .max()
            .unwrap_or(1)
            .max(1);
        if blocks == 1 {
            self.region_body(ast)?;
            return Ok(1);
        }
        for (k, (item, spread)) in items.iter().zip(&spread).enumerate() {
            if k > 0 {
                self.push(Instr::SyncAll);
            }
            match spread {
                Some(s) => self.spread_loop(s, blocks)?,
                None => {
                    let block = self.nested(|e| e.region_body(item))?;
                    self.branch(
                        Scalar::Var("block_idx".to_string()),
                        CmpOp::Eq,
                        Scalar::Int(0),
                        block,
                    );
                }
            }
        }
        Ok(blocks as u32)
    }

    /// `ast` as a loop to spread over the blocks, when it is one (see the module docs).
    fn spread<'a>(&mut self, ast: &'a Ast) -> Option<Spread<'a>> {
        let Ast::For {
            var,
            lower,
            upper,
            step,
            body,
            annotations:
                LoopAnnotations {
                    parallel: true,
                    vectorizable,
                },
        } = ast
        else {
            return None;
        };
        let (lo, hi) = (self.interval(lower)?, self.interval(upper)?);
        if lo.0 != lo.1 || hi.1 < lo.0 {
            return None;
        }
        let trips = (hi.1 - lo.0) / step + 1;
        let vectorizable = *vectorizable && *step == 1;
        self.ranges.insert(var.clone(), (lo.0, hi.1));
        let ok = self.apart(var, *step, body);
        let cores = self.target.cores() as i64;
        let mut inner: Vec<Inner> = Vec::new();
        let mut outers = vec![(var.as_str(), *step)];
        let mut product = trips;
        while !ok && inner.is_empty() || product < cores {
            let at = inner.last().map_or(&**body, |i| i.body);
            let Some(i) = self.inner(&outers, at) else {
                break;
            };
            product *= i.trips;
            outers.push((i.var, i.step));
            inner.push(i);
        }
        self.ranges.remove(var);
        for i in &inner {
            self.ranges.remove(i.var);
        }
        (ok || !inner.is_empty()).then_some(Spread {
            var,
            vectorizable: vectorizable && inner.is_empty(),
            lower,
            upper,
            step: *step,
            body,
            trips,
            inner,
        })
    }

    /// The body of the innermost of the spread loops `outers` as a loop to spread with them:
    /// one parallel loop of constant bounds whose own regions are apart for different
    /// iterations of every one of the loops. Its range stays bound.
    fn inner<'a>(&mut self, outers: &[(&str, i64)], body: &'a Ast) -> Option<Inner<'a>> {
        let mut items = Vec::new();
        flatten(body, &mut items);
        let [Ast::For {
            var,
            lower,
            upper,
            step,
            body,
            annotations: LoopAnnotations { parallel: true, .. },
        }] = items.as_slice()
        else {
            return None;
        };
        let (lo, hi) = (self.interval(lower)?, self.interval(upper)?);
        if lo.0 != lo.1 || hi.0 != hi.1 || hi.1 < lo.0 {
            return None;
        }
        self.ranges.insert(var.clone(), (lo.0, hi.1));
        let ok =
            self.apart(var, *step, body) && outers.iter().all(|&(v, st)| self.apart(v, st, body));
        if !ok {
            self.ranges.remove(var);
        }
        ok.then_some(Inner {
            var,
            first: lo.0,
            step: *step,
            trips: (hi.1 - lo.0) / step + 1,
            body,
        })
    }

    /// Whether every statement of `body` is in a region right under the loop of `var` and the
    /// boxes the regions write are apart for different iterations.
    fn apart(&self, var: &str, step: i64, body: &Ast) -> bool {
        let mut regions: Vec<Boxes> = Vec::new();
        let mut children = Vec::new();
        flatten(body, &mut children);
        if let Some(b) = promote::plan_block(self, body) {
            // The body is one region.
            regions.push(b);
            children.clear();
        }
        for c in children {
            let matrix = matches!(
                c,
                Ast::Mark {
                    mark: Mark::Matrix(_),
                    ..
                }
            );
            if !matrix && !matches!(c, Ast::For { .. } | Ast::User { .. }) {
                return false;
            }
            // The Cube's tiles touch what their region would.
            let boxes = if promote::has_matrix(c) {
                promote::footprint(self, c)
            } else {
                promote::plan(self, c)
            };
            match boxes {
                Some(b) => regions.push(b),
                None => return false,
            }
        }
        let boxes: Vec<_> = regions.iter().flat_map(|r| r.iter()).collect();
        let written: Vec<_> = boxes
            .iter()
            .filter(|b| b.written)
            .map(|b| b.array)
            .collect();
        for (i, b1) in boxes.iter().enumerate() {
            if !written.contains(&b1.array) {
                continue;
            }
            for b2 in boxes[i..].iter().filter(|b| b.array == b1.array) {
                let separated = (0..b1.rank()).any(|d| {
                    let (Some((a1, k1)), Some((a2, k2))) =
                        (self.along(b1.lower(d), var), self.along(b2.lower(d), var))
                    else {
                        return false;
                    };
                    let a = (a1 * step).abs();
                    a1 == a2 && a > 0 && a >= b1.width(d) + k1 - k2 && a >= b2.width(d) + k2 - k1
                });
                if !separated {
                    return false;
                }
            }
        }
        true
    }

    /// `e` as `a·var + k`, when it is that.
    fn along(&self, e: Option<&AstExpr>, var: &str) -> Option<(i64, i64)> {
        let mut l = Linear::of(e?)?;
        let a = l.vars.remove(var).unwrap_or(0);
        if !l.vars.is_empty() {
            return None;
        }
        let k = l.constant
            + l.params
                .iter()
                .map(|(p, c)| c * self.params[*p as usize])
                .sum::<i64>();
        Some((a, k))
    }

    /// The loop with block `b` taking iterations `b`, `b + blocks`, … of it (of the two loops'
    /// iterations in order, where the inner one is spread too).
    fn spread_loop(&mut self, s: &Spread, blocks: i64) -> Result<(), Error> {
        if !s.inner.is_empty() {
            return self.spread_nest(s, blocks);
        }
        if s.vectorizable && s.trips >= RUNS_FROM * blocks {
            return self.spread_runs(s, blocks);
        }
        let r = self.sreg()?;
        let lower = self.int(s.lower)?;
        self.push(Instr::SBin {
            op: SOp::Mul,
            dst: Reg::S(r),
            a: Scalar::Var("block_idx".to_string()),
            b: Scalar::Int(s.step),
        });
        self.push(Instr::SBin {
            op: SOp::Add,
            dst: Reg::S(r),
            a: Scalar::Reg(Reg::S(r)),
            b: lower.scalar(),
        });
        self.release(lower);
        let h = self.held(s.upper)?;
        let range = self.loop_range(s.lower, s.upper);
        self.bind(s.var, r, range);
        self.tiles_only(s.body, |e| {
            e.stepping(r, blocks * s.step, Scalar::Reg(Reg::S(h)), |e| {
                e.region_body(s.body)
            })
        })?;
        self.unbind(s.var);
        self.free_s(h);
        self.free_s(r);
        Ok(())
    }
}

impl Emitter<'_> {
    /// A vector loop of at least [`RUNS_FROM`] iterations per block spread as runs (rather than
    /// as that many instances on the scalar unit of each block): block `b` takes the `b`-th
    /// run of `RUN`-aligned iterations (a whole number of full repeats each, so no two blocks
    /// share a 32-byte block of what they write), the blocks past the last run nothing.
    fn spread_runs(&mut self, s: &Spread, blocks: i64) -> Result<(), Error> {
        let ceil = |a: i64, b: i64| (a + b - 1) / b;
        let run = ceil(ceil(s.trips, blocks), RUN) * RUN;
        let runs = ceil(s.trips, run);
        // The run's index is the block's; its first iteration `run · index + lower`, an affine
        // form whose boxes lie a run apart (the last one cut by the array's end, not moved).
        let start = format!("{}_run", s.var);
        let r = self.sreg()?;
        self.push(Instr::Mov {
            dst: Reg::S(r),
            src: Scalar::Var("block_idx".to_string()),
        });
        self.bind(&start, r, (0, runs - 1));
        let from = AstExpr::plus(
            AstExpr::Mul(run, Box::new(AstExpr::Var(start.clone()))),
            s.lower.clone(),
        );
        let to = AstExpr::min(vec![
            s.upper.clone(),
            AstExpr::plus(from.clone(), AstExpr::Int(run - 1)),
        ]);
        let ast = Ast::For {
            var: s.var.to_string(),
            lower: from,
            upper: to,
            step: 1,
            body: Box::new(s.body.clone()),
            annotations: LoopAnnotations {
                parallel: true,
                vectorizable: true,
            },
        };
        let body = self.nested(|e| e.region_body(&ast))?;
        self.branch(
            Scalar::Var("block_idx".to_string()),
            CmpOp::Lt,
            Scalar::Int(runs),
            body,
        );
        self.unbind(&start);
        self.free_s(r);
        Ok(())
    }

    /// Nested loops spread together: iteration `f` of the product of their trips is, from
    /// the innermost loop out, `f mod trips` of each and `f / trips` left for the ones
    /// outside it.
    fn spread_nest(&mut self, s: &Spread, blocks: i64) -> Result<(), Error> {
        let flat = self.sreg()?;
        self.push(Instr::Mov {
            dst: Reg::S(flat),
            src: Scalar::Var("block_idx".to_string()),
        });
        let outer = self.sreg()?;
        let mut regs = Vec::new();
        for _ in &s.inner {
            regs.push(self.sreg()?);
        }
        let rest = self.sreg()?;
        let lower = self.int(s.lower)?;
        let total: i64 = s.trips * s.inner.iter().map(|i| i.trips).product::<i64>();
        let last = Scalar::Int(total - 1);
        let range = self.loop_range(s.lower, s.upper);
        let body = s.inner.last().map_or(s.body, |i| i.body);
        self.tiles_only(body, |e| {
            e.stepping(flat, blocks, last, |e| {
                let reg = |r: u8| Scalar::Reg(Reg::S(r));
                // From the innermost loop out: q = src / trips, at = first + (src - q·trips)·step,
                // and q is what the loops outside share (two registers in turn).
                let mut ops = Vec::new();
                let mut src = flat;
                for (i, &at) in s.inner.iter().zip(&regs).rev() {
                    let q = if src == outer { rest } else { outer };
                    ops.extend([
                        (SOp::Div, q, reg(src), Scalar::Int(i.trips)),
                        (SOp::Mul, at, reg(q), Scalar::Int(i.trips)),
                        (SOp::Sub, at, reg(src), reg(at)),
                        (SOp::Mul, at, reg(at), Scalar::Int(i.step)),
                        (SOp::Add, at, reg(at), Scalar::Int(i.first)),
                    ]);
                    src = q;
                }
                ops.extend([
                    (SOp::Mul, src, reg(src), Scalar::Int(s.step)),
                    (SOp::Add, src, reg(src), lower.scalar()),
                ]);
                for (op, dst, a, b) in ops {
                    e.push(Instr::SBin {
                        op,
                        dst: Reg::S(dst),
                        a,
                        b,
                    });
                }
                e.bind(s.var, src, range);
                for (i, &at) in s.inner.iter().zip(&regs) {
                    let last = i.first + (i.trips - 1) * i.step;
                    e.bind(i.var, at, (i.first, last));
                }
                let r = e.region_body(body);
                for i in &s.inner {
                    e.unbind(i.var);
                }
                e.unbind(s.var);
                r
            })
        })?;
        self.release(lower);
        for r in [rest]
            .into_iter()
            .chain(regs.into_iter().rev())
            .chain([outer, flat])
        {
            self.free_s(r);
        }
        Ok(())
    }
}

/// The nodes of a loop body below its blocks and marks (but matrix marks, whose subtrees the
/// Cube runs as one).
fn flatten<'a>(ast: &'a Ast, out: &mut Vec<&'a Ast>) {
    match ast {
        Ast::Block(items) => items.iter().for_each(|a| flatten(a, out)),
        Ast::Mark {
            mark: Mark::Matrix(_),
            ..
        } => out.push(ast),
        Ast::Mark { body, .. } => flatten(body, out),
        a => out.push(a),
    }
}
