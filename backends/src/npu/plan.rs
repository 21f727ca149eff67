//! What the accelerator runs of a kernel: its contraction on the Cube and the element-wise
//! statements around it on the Vector unit, recognised from the polyhedral representation.
//!
//! A kernel the lowering takes has, in statement order:
//! 1. optionally, the initialisation `T[i, j] = 0` of the accumulator;
//! 2. one contraction ([`polyhedral::contraction`]) `T[i, j] += A[i, k] * B[k, j]` over the
//!    box `0 <= i < M, 0 <= j < N, 0 <= k < K`, with f16 operands and an f32 sum (the Cube's
//!    arithmetic: exact f16 products, f32 accumulation in increasing k);
//! 3. element-wise statements `X[i, j] = f(…)` over the same `M × N` box whose reads are tile
//!    arrays at `[i, j]` (T or an array an earlier one of them wrote), per-column vectors at
//!    `[j]` and scalars. They run on the tile while it is in UB: the Cube's result flows
//!    L0C → UB → Vector → GM, and only live-out arrays get a GM tensor.
//!
//! Everything else is refused with a one-line reason: f64 and i32 arithmetic the machine lacks
//! ([`Error::Unsupported`]), other structures ([`Error::NotYet`]).

use std::collections::BTreeMap;

use polyhedral::contraction::{contraction, Contraction};
use polyhedral::program::{
    ArrayId, ArrayRole, ConstraintKind, Expr, ScalarType, Statement, StmtId, Var,
};
use polyhedral::Program;

use super::{Error, Options, FRACTAL};

/// How each array of the kernel is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holding {
    /// Cube operand A (`[M, K]` row-major in GM).
    OperandA,
    /// Cube operand B (`[K, N]` row-major in GM).
    OperandB,
    /// An `M × N` tile in UB (the accumulator and the element-wise results); written to GM
    /// when live-out.
    Tile,
    /// A per-column vector (`[N]`), loaded into UB once per block.
    Column,
    /// A scalar input, loaded into a scalar register.
    Scalar,
}

/// The structure [`plan`] found.
#[derive(Clone, Debug)]
pub struct Plan {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub contraction: Contraction,
    /// The accumulator `T`.
    pub acc: ArrayId,
    pub a: ArrayId,
    pub b: ArrayId,
    /// The element-wise statements after the contraction, in order.
    pub epilogue: Vec<StmtId>,
    pub holding: BTreeMap<ArrayId, Holding>,
}

impl Plan {
    /// The arrays held as `h`, in id order.
    pub fn arrays(&self, h: Holding) -> Vec<ArrayId> {
        self.holding
            .iter()
            .filter(|(_, &x)| x == h)
            .map(|(&a, _)| a)
            .collect()
    }
}

/// Recognises the kernel's structure.
pub fn plan(program: &Program, options: &Options) -> Result<Plan, Error> {
    check_types(program, options)?;
    let contractions: Vec<Contraction> = program
        .statement_ids()
        .filter_map(|id| contraction(program, id))
        .collect();
    let c = match contractions.as_slice() {
        [] => {
            return Err(Error::NotYet(format!(
                "`{}` has no contraction; kernels on the Vector unit alone are not lowered",
                program.name
            )))
        }
        [c] => c.clone(),
        _ => {
            return Err(Error::NotYet(format!(
                "`{}` has {} contractions; one per kernel is lowered",
                program.name,
                contractions.len()
            )))
        }
    };
    let stmt = &program.statements[c.stmt.index()];
    if c.windowed {
        return Err(Error::NotYet(format!(
            "statement {} is a convolution (an operand subscript slides with the reduction); im2col lowering is not done",
            stmt.name
        )));
    }
    if !c.batch.is_empty() || c.m.len() != 1 || c.n.len() != 1 || c.k.len() != 1 {
        return Err(Error::NotYet(format!(
            "statement {} is a contraction over {} batch, {} m, {} n and {} k iterators; one each of m, n, k is lowered",
            stmt.name,
            c.batch.len(),
            c.m.len(),
            c.n.len(),
            c.k.len()
        )));
    }
    if c.scale_a.is_some() || c.scale_b.is_some() {
        return Err(not_matrix(stmt, "an operand is scaled before the product"));
    }
    let (mi, ni, ki) = (c.m[0], c.n[0], c.k[0]);
    let it = |d: usize| vec![(Var::Iter(d), 1)];
    let acc = stmt.write.array;
    let (a, b) = (stmt.reads[c.a].array, stmt.reads[c.b].array);
    let shape_of = |id: ArrayId| program.array_extents(id);
    let subs = |s: &Statement, r: Option<usize>| -> Vec<Vec<(Var, i64)>> {
        let acc = r.map_or(&s.write, |r| &s.reads[r]);
        acc.subscripts
            .iter()
            .map(|e| {
                if e.constant == 0 {
                    e.terms().to_vec()
                } else {
                    vec![]
                }
            })
            .collect()
    };
    if subs(stmt, None) != vec![it(mi), it(ni)] {
        return Err(not_matrix(stmt, "its write is not T[i, j]"));
    }
    if subs(stmt, Some(c.a)) != vec![it(mi), it(ki)] {
        return Err(not_matrix(
            stmt,
            "operand A is not read as A[i, k] (transposed operands are not lowered)",
        ));
    }
    if subs(stmt, Some(c.b)) != vec![it(ki), it(ni)] {
        return Err(not_matrix(
            stmt,
            "operand B is not read as B[k, j] (transposed operands are not lowered)",
        ));
    }
    let ext = box_extents(program, stmt)?;
    let (m, n, k) = (ext[mi], ext[ni], ext[ki]);
    if shape_of(acc) != [m as i64, n as i64]
        || shape_of(a) != [m as i64, k as i64]
        || shape_of(b) != [k as i64, n as i64]
    {
        return Err(not_matrix(stmt, "its loops do not span whole arrays"));
    }
    for (name, id) in [("A", a), ("B", b)] {
        if program.array(id).elem != ScalarType::F16 {
            return Err(Error::NotYet(format!(
                "operand {name} (`{}`) of {} is {}; the Cube multiplies f16 operands",
                program.array(id).name,
                stmt.name,
                program.array(id).elem
            )));
        }
    }
    if c.ty != ScalarType::F32 || program.array(acc).elem != ScalarType::F32 {
        return Err(Error::NotYet(format!(
            "the contraction {} accumulates in {}; the Cube accumulates f16 products in f32",
            stmt.name,
            program.array(acc).elem
        )));
    }
    for (what, size) in [("K", k), ("N", n)] {
        if size % FRACTAL != 0 {
            return Err(Error::NotYet(format!(
                "{what} = {size} is not a multiple of 16: rows of the row-major operands would start off GM's 32-byte blocks"
            )));
        }
    }
    if [a, b].contains(&acc) || a == b {
        return Err(not_matrix(stmt, "its operands alias"));
    }
    let mut holding = BTreeMap::new();
    holding.insert(a, Holding::OperandA);
    holding.insert(b, Holding::OperandB);
    holding.insert(acc, Holding::Tile);
    if program.array(acc).role.is_live_in() {
        return Err(Error::NotYet(format!(
            "`{}` accumulates onto its initial contents",
            program.array(acc).name
        )));
    }

    let mut epilogue = Vec::new();
    let mut seen_contraction = false;
    for id in program.statement_ids() {
        let s = &program.statements[id.index()];
        if id == c.stmt {
            seen_contraction = true;
            continue;
        }
        if !seen_contraction {
            let zero = matches!(&s.exprs[s.body], Expr::Literal(l) if l.value == 0.0);
            let box_ok = box_extents(program, s).ok() == Some(vec![m, n]);
            if s.write.array == acc && zero && box_ok && subs(s, None) == vec![it(0), it(1)] {
                continue;
            }
            return Err(Error::NotYet(format!(
                "statement {} runs before the contraction and is not its initialisation to 0",
                s.name
            )));
        }
        if s.depth() != 2
            || box_extents(program, s).ok() != Some(vec![m, n])
            || subs(s, None) != vec![it(0), it(1)]
            || shape_of(s.write.array) != [m as i64, n as i64]
            || s.reduction.is_some()
        {
            return Err(Error::NotYet(format!(
                "statement {} after the contraction is not element-wise over its M × N result",
                s.name
            )));
        }
        if holding.contains_key(&s.write.array) && s.write.array != acc {
            let h = holding[&s.write.array];
            if h != Holding::Tile {
                return Err(not_matrix(s, "it overwrites an operand"));
            }
        }
        for (r, read) in s.reads.iter().enumerate() {
            let arr = program.array(read.array);
            let h = if subs(s, Some(r)) == vec![it(0), it(1)]
                && holding.get(&read.array) == Some(&Holding::Tile)
            {
                Holding::Tile
            } else if arr.shape.is_empty() && arr.role == ArrayRole::Input {
                Holding::Scalar
            } else if subs(s, Some(r)) == vec![it(1)]
                && shape_of(read.array) == [n as i64]
                && arr.role == ArrayRole::Input
            {
                Holding::Column
            } else {
                return Err(Error::NotYet(format!(
                    "statement {} reads {} (only the tile at [i, j], per-column inputs at [j] and scalars are lowered)",
                    s.name,
                    program.display_element(s, read)
                )));
            };
            if let Some(&old) = holding.get(&read.array) {
                if old != h {
                    return Err(Error::NotYet(format!("`{}` is used in two ways", arr.name)));
                }
            }
            holding.insert(read.array, h);
        }
        holding.insert(s.write.array, Holding::Tile);
        epilogue.push(id);
    }
    for (k, arr) in program.arrays.iter().enumerate() {
        if arr.role.is_live_out() && !holding.contains_key(&ArrayId(k as u32)) {
            return Err(Error::NotYet(format!(
                "output `{}` is not written by the lowered statements",
                arr.name
            )));
        }
    }
    Ok(Plan {
        m,
        n,
        k,
        contraction: c,
        acc,
        a,
        b,
        epilogue,
        holding,
    })
}

fn not_matrix(stmt: &Statement, why: &str) -> Error {
    Error::NotYet(format!(
        "statement {} is a contraction but not a plain matrix product: {why}",
        stmt.name
    ))
}

/// f64 and i32 arithmetic: the machine has neither (its i32 vectors only add, compare and
/// select), f64 is computed in f32 where the options allow it.
fn check_types(program: &Program, options: &Options) -> Result<(), Error> {
    for arr in &program.arrays {
        match arr.elem {
            ScalarType::F64 if !options.f64_as_f32 => {
                return Err(Error::Unsupported(format!(
                    "f64 arithmetic (`{}` is f64; the machine computes in f16 and f32 — `--npu-f32` computes in f32)",
                    arr.name
                )))
            }
            ScalarType::I32 => {
                return Err(Error::Unsupported(format!(
                    "i32 arithmetic (`{}` is i32)",
                    arr.name
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

/// The extent of each iterator of `stmt` when its domain is a box `0 <= it < E` (at the
/// program's sizes).
fn box_extents(program: &Program, stmt: &Statement) -> Result<Vec<u64>, Error> {
    let params = program.param_values();
    let mut lo = vec![None::<i64>; stmt.depth()];
    let mut hi = vec![None::<i64>; stmt.depth()];
    let not_box = || {
        Error::NotYet(format!(
            "the domain of {} is not a rectangular box",
            stmt.name
        ))
    };
    for c in &stmt.domain {
        let e = c.expr.bind_params(&params);
        let iters: Vec<(usize, i64)> = e
            .terms()
            .iter()
            .filter_map(|(v, k)| match v {
                Var::Iter(d) => Some((*d, *k)),
                Var::Param(_) => None,
            })
            .collect();
        match (iters.as_slice(), c.kind) {
            ([], _) => {}
            ([(d, 1)], ConstraintKind::NonNegative) => {
                // it + c >= 0
                let v = -e.constant;
                lo[*d] = Some(lo[*d].map_or(v, |l: i64| l.max(v)));
            }
            ([(d, -1)], ConstraintKind::NonNegative) => {
                // c - it >= 0: it <= c
                let v = e.constant + 1;
                hi[*d] = Some(hi[*d].map_or(v, |h: i64| h.min(v)));
            }
            _ => return Err(not_box()),
        }
    }
    lo.iter()
        .zip(&hi)
        .map(|(l, h)| match (l, h) {
            (Some(0), Some(h)) if *h > 0 => Ok(*h as u64),
            _ => Err(not_box()),
        })
        .collect()
}
