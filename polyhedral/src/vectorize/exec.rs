//! Runs a masked form lane by lane: the semantics every vector emitter implements, checked
//! against the scalar interpreter by the tests, and the source of the benchmark's counts of
//! blocks skipped by branches on superword condition.
//!
//! Every value is computed in every lane, as the emitted code does; masks decide which lanes
//! a select or a loop's frozen value keeps. The run also checks the classification: a value
//! classified uniform must hold one value in all lanes, a linear(s) one `lane0 + s·k` in lane
//! `k` (an error otherwise).

use super::classify::Class;
use super::mask::{MNode, MaskDef, MaskId, Region};
use super::ssa::{Join, Op, ValueId};
use super::{VectorFunction, VectorProgram};
use crate::interp::code::{binary, math, FUNCTION_LOOP_LIMIT};
use crate::interp::round;
use crate::interp::Memory;
use crate::program::{Access, ArrayId, BinaryOp, Program, ScalarType, StmtId, UnaryOp};

/// What the runs of masked code did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneStats {
    /// Branches on superword condition evaluated.
    pub boscc_tests: u64,
    /// … of which found no active lane and skipped their region.
    pub boscc_skips: u64,
    /// Iterations of divergent loops (one per vector iteration, whatever the lanes).
    pub masked_loop_iterations: u64,
    /// Lane-iterations of divergent loops where the lane was active.
    pub active_lane_iterations: u64,
}

/// The values of one leaf ([`Op::Param`], [`Op::Iter`], [`Op::Read`]) in each lane.
pub type Leaves<'a> = dyn Fn(&Op) -> Vec<f64> + 'a;

/// Runs variant `variant` of `program` on `width` lanes with the active lanes `mask`; `leaf`
/// gives the lanes' values of the leaves. Returns the result in every lane (inactive lanes
/// hold values nobody may read).
pub fn run_lanes(
    program: &VectorProgram,
    variant: usize,
    mask: &[bool],
    leaf: &Leaves,
    stats: &mut LaneStats,
) -> Result<Vec<f64>, String> {
    run(program, variant, mask, leaf, stats, true)
}

/// [`run_lanes`] on lanes that may come from several rows of the vectorised loop (as an
/// accelerator's tile holds them): a value uniform along a row differs between rows, so the
/// classes are not checked.
pub fn run_lanes_across_rows(
    program: &VectorProgram,
    variant: usize,
    mask: &[bool],
    leaf: &Leaves,
    stats: &mut LaneStats,
) -> Result<Vec<f64>, String> {
    run(program, variant, mask, leaf, stats, false)
}

fn run(
    program: &VectorProgram,
    variant: usize,
    mask: &[bool],
    leaf: &Leaves,
    stats: &mut LaneStats,
    check_classes: bool,
) -> Result<Vec<f64>, String> {
    let f = &program.variants[variant];
    let width = mask.len();
    let mut run = Run {
        program,
        f,
        width,
        values: vec![vec![0.0; width]; f.ssa.values.len()],
        masks: vec![vec![false; width]; f.masked.masks.len()],
        leaf,
        stats,
        steps: 0,
        check_classes,
    };
    run.masks[0] = mask.to_vec();
    run.nodes(&f.masked.body, MaskId(0))?;
    Ok(run.values[f.ssa.result().index()].clone())
}

struct Run<'a, 'b> {
    program: &'a VectorProgram,
    f: &'a VectorFunction,
    width: usize,
    values: Vec<Vec<f64>>,
    masks: Vec<Vec<bool>>,
    leaf: &'a Leaves<'b>,
    stats: &'a mut LaneStats,
    steps: u64,
    check_classes: bool,
}

impl Run<'_, '_> {
    fn nodes(&mut self, nodes: &[MNode], mask: MaskId) -> Result<(), String> {
        for n in nodes {
            self.node(n, mask)?;
        }
        Ok(())
    }

    fn node(&mut self, node: &MNode, mask: MaskId) -> Result<(), String> {
        match node {
            MNode::Def(v) => self.def(*v, mask),
            MNode::Return(_) => Ok(()),
            MNode::UniformIf {
                cond,
                then,
                otherwise,
                joins,
            } => {
                let taken = self.values[cond.index()][0] != 0.0;
                self.nodes(if taken { then } else { otherwise }, mask)?;
                for j in joins {
                    let input = j.inputs[if taken { 0 } else { 1 }];
                    self.values[j.phi.index()] = self.values[input.index()].clone();
                }
                Ok(())
            }
            MNode::MaskedIf {
                cond,
                then_mask,
                else_mask,
                then,
                otherwise,
                joins,
            } => {
                let c: Vec<bool> = self.values[cond.index()]
                    .iter()
                    .map(|x| *x != 0.0)
                    .collect();
                let m = self.masks[mask.index()].clone();
                self.masks[then_mask.index()] = (0..self.width).map(|k| m[k] && c[k]).collect();
                self.masks[else_mask.index()] = (0..self.width).map(|k| m[k] && !c[k]).collect();
                self.region(then, *then_mask)?;
                self.region(otherwise, *else_mask)?;
                for j in joins {
                    let sel = &self.masks[then_mask.index()];
                    let v: Vec<f64> = (0..self.width)
                        .map(|k| {
                            let input = j.inputs[if sel[k] { 0 } else { 1 }];
                            self.values[input.index()][k]
                        })
                        .collect();
                    self.values[j.phi.index()] = v;
                }
                Ok(())
            }
            MNode::UniformLoop {
                phis,
                header,
                cond,
                body,
            } => {
                self.enter(phis);
                loop {
                    self.nodes(header, mask)?;
                    if self.values[cond.index()][0] == 0.0 {
                        return Ok(());
                    }
                    self.step()?;
                    self.nodes(body, mask)?;
                    let next: Vec<Vec<f64>> = phis
                        .iter()
                        .map(|j| self.values[j.inputs[1].index()].clone())
                        .collect();
                    for (j, v) in phis.iter().zip(next) {
                        self.values[j.phi.index()] = v;
                    }
                }
            }
            MNode::MaskedLoop {
                active,
                phis,
                header,
                cond,
                body,
            } => {
                let MaskDef::Loop(outer) = self.f.masked.masks[active.index()] else {
                    return Err("a divergent loop's mask is not a loop mask".into());
                };
                self.masks[active.index()] = self.masks[outer.index()].clone();
                self.enter(phis);
                loop {
                    self.nodes(header, *active)?;
                    let c = self.values[cond.index()].clone();
                    let a = &mut self.masks[active.index()];
                    for k in 0..self.width {
                        a[k] = a[k] && c[k] != 0.0;
                    }
                    let live = a.iter().filter(|x| **x).count() as u64;
                    if live == 0 {
                        return Ok(());
                    }
                    self.stats.masked_loop_iterations += 1;
                    self.stats.active_lane_iterations += live;
                    self.step()?;
                    self.nodes(body, *active)?;
                    let a = self.masks[active.index()].clone();
                    let next: Vec<Vec<f64>> = phis
                        .iter()
                        .map(|j| {
                            (0..self.width)
                                .map(|k| {
                                    let keep = !a[k] && self.f.frozen[j.phi.index()];
                                    let input = if keep { j.phi } else { j.inputs[1] };
                                    self.values[input.index()][k]
                                })
                                .collect()
                        })
                        .collect();
                    for (j, v) in phis.iter().zip(next) {
                        self.values[j.phi.index()] = v;
                    }
                }
            }
        }
    }

    fn step(&mut self) -> Result<(), String> {
        self.steps += 1;
        if self.steps > FUNCTION_LOOP_LIMIT {
            return Err(format!(
                "`{}` ran more than {FUNCTION_LOOP_LIMIT} loop iterations",
                self.f.ssa.name
            ));
        }
        Ok(())
    }

    fn enter(&mut self, phis: &[Join]) {
        for j in phis {
            self.values[j.phi.index()] = self.values[j.inputs[0].index()].clone();
        }
    }

    fn region(&mut self, region: &Region, mask: MaskId) -> Result<(), String> {
        if region.boscc {
            self.stats.boscc_tests += 1;
            if !self.masks[mask.index()].iter().any(|x| *x) {
                self.stats.boscc_skips += 1;
                return Ok(());
            }
        }
        self.nodes(&region.nodes, mask)
    }

    fn def(&mut self, v: ValueId, mask: MaskId) -> Result<(), String> {
        let value = self.f.ssa.value(v);
        let ty = value.ty;
        let lanes: Vec<f64> = match &value.op {
            Op::Param(_) | Op::Iter(_) | Op::Read(_) => (self.leaf)(&value.op),
            Op::Size(p) => vec![self.program.size(*p) as f64; self.width],
            Op::Const(l) => vec![round(l.ty, l.value); self.width],
            Op::Phi(..) => return Err("a phi among definitions".into()),
            Op::Call(f, args) => {
                let variant = self.f.calls[&v];
                let args: Vec<Vec<f64>> = args
                    .iter()
                    .map(|a| self.values[a.index()].clone())
                    .collect();
                let callee = &self.program.variants[variant];
                debug_assert_eq!(callee.function, Some(*f));
                let leaf = move |op: &Op| match op {
                    Op::Param(k) => args[*k].clone(),
                    _ => unreachable!("functions have only parameters as leaves"),
                };
                let mask = self.masks[mask.index()].clone();
                let out = run(
                    self.program,
                    variant,
                    &mask,
                    &leaf,
                    self.stats,
                    self.check_classes,
                )?;
                out.into_iter().map(|x| round(ty, x)).collect()
            }
            op => (0..self.width).map(|k| self.lane_op(op, ty, k)).collect(),
        };
        self.check_class(v, &lanes)?;
        self.values[v.index()] = lanes;
        Ok(())
    }

    fn lane_op(&self, op: &Op, ty: ScalarType, k: usize) -> f64 {
        let x = |v: &ValueId| self.values[v.index()][k];
        let f = self.f;
        match op {
            Op::Unary(UnaryOp::Not, a) => (x(a) == 0.0) as u8 as f64,
            Op::Unary(UnaryOp::Neg, a) => {
                if ty == ScalarType::I32 {
                    round(ty, -(x(a) as i64) as f64)
                } else {
                    round(ty, -x(a))
                }
            }
            Op::Binary(BinaryOp::And, a, b) => (x(a) != 0.0 && x(b) != 0.0) as u8 as f64,
            Op::Binary(BinaryOp::Or, a, b) => (x(a) != 0.0 || x(b) != 0.0) as u8 as f64,
            Op::Binary(op, a, b) => {
                let operand = f.ssa.value(*a).ty;
                // Division by zero: 0, as the generated code gives (the interpreter stops
                // there, so such lanes are never compared).
                round(ty, binary(*op, operand, x(a), x(b)).unwrap_or(0.0))
            }
            Op::Select(c, t, e) => {
                if x(c) != 0.0 {
                    x(t)
                } else {
                    x(e)
                }
            }
            Op::Math(m, args) => {
                let y = args.get(1).map_or(0.0, x);
                round(ty, math(*m, x(&args[0]), y))
            }
            Op::Cast(to, a) => {
                let v = match to {
                    ScalarType::I32 => x(a).trunc().clamp(i32::MIN as f64, i32::MAX as f64),
                    _ => x(a),
                };
                round(*to, v)
            }
            _ => unreachable!("leaves, constants, calls and phis are handled by `def`"),
        }
    }

    fn check_class(&self, v: ValueId, lanes: &[f64]) -> Result<(), String> {
        if !self.check_classes {
            return Ok(());
        }
        let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
        let ok = match self.f.classes[v.index()] {
            Class::Varying => true,
            Class::Uniform => lanes.iter().all(|x| same(*x, lanes[0])),
            Class::Linear(s) => lanes.iter().enumerate().all(|(k, x)| {
                let expect = (lanes[0] as i64).wrapping_add(s.wrapping_mul(k as i64)) as i32;
                *x == expect as f64
            }),
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "`{}`: value %{} is classified {} but its lanes are {lanes:?}",
                self.f.ssa.name,
                v.0,
                self.f.classes[v.index()]
            ))
        }
    }
}

/// Runs statement `stmt` (which reads only arrays that `inputs` holds as they are when it
/// starts) vectorised over its innermost iterator: its domain's points in rows of consecutive
/// innermost iterations, `width` at a time, the last group of a row with its missing lanes
/// masked off. Returns every point with the value written there.
pub fn run_statement(
    program: &Program,
    inputs: &Memory,
    stmt: StmtId,
    width: usize,
    stats: &mut LaneStats,
) -> Result<Vec<(Vec<i64>, f64)>, String> {
    let s = &program.statements[stmt.index()];
    if s.depth() == 0 {
        return Err(format!("{} is not in a loop", s.name));
    }
    let depth = s.depth() - 1;
    let mut vp = VectorProgram::new(program);
    let variant = vp.statement_variant(program, stmt, depth);
    let params = program.param_values();
    let bound = (0..program.arrays.len())
        .flat_map(|a| program.array_extents(ArrayId(a as u32)))
        .max()
        .unwrap_or(1);
    let offset = |access: &Access, p: &[i64]| {
        let extents = program.array_extents(access.array);
        let mut off = 0i64;
        for (sub, e) in access.subscripts.iter().zip(&extents) {
            off = off * e + s.eval(sub, p, &params);
        }
        off as usize
    };
    // The domain's points (iterators from 0 to below the largest extent), by rows.
    let mut rows: Vec<Vec<Vec<i64>>> = Vec::new();
    let mut p = vec![0i64; s.depth()];
    'points: loop {
        if s.domain.iter().all(|c| c.holds(&p, &params)) {
            match rows.last_mut() {
                Some(r) if r[0][..depth] == p[..depth] => r.push(p.clone()),
                _ => rows.push(vec![p.clone()]),
            }
        }
        let mut d = s.depth();
        loop {
            if d == 0 {
                break 'points;
            }
            d -= 1;
            p[d] += 1;
            if p[d] < bound {
                break;
            }
            p[d] = 0;
        }
    }
    let mut out = Vec::new();
    for row in rows {
        for group in row.chunks(width) {
            let leaf = |op: &Op| -> Vec<f64> {
                (0..width)
                    .map(|k| {
                        let p = &group[k.min(group.len() - 1)];
                        match op {
                            Op::Iter(d) => p[*d] as f64,
                            Op::Read(r) => {
                                let a = &s.reads[*r];
                                inputs.array(a.array)[offset(a, p)]
                            }
                            _ => 0.0,
                        }
                    })
                    .collect()
            };
            let mask: Vec<bool> = (0..width).map(|k| k < group.len()).collect();
            let lanes = run_lanes(&vp, variant, &mask, &leaf, stats)?;
            out.extend(group.iter().cloned().zip(lanes));
        }
    }
    Ok(out)
}
