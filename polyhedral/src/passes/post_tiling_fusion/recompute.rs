//! Halo recomputation in post-tiling fusion: when the producer instances that neighbouring
//! tiles need overlap (a stencil's halo), each tile computes its own copy of the shared ones.
//!
//! That is only sound when every copy computes the same value and no tile's copy clobbers a
//! value another tile still needs: the producer must be a **single assignment** to a
//! temporary (no other statement writes the array, no two of its instances write the same
//! element, it does not read the array), so all copies of an instance write the same value,
//! computed from inputs that are the same in every tile (the pass checks, as for any fused
//! producer, that every value a tile reads is computed in that tile). A producer that writes
//! a kernel output is never recomputed.
//!
//! Recomputation costs work, so it is only done when a tile's copies are a small part of its
//! producer work (the seed's cost check): at the kernel's sizes, for a tile in the middle of
//! the tile space, the instances it shares with the next tile along each tile dimension,
//! summed over the dimensions, must be at most [`MAX_REDUNDANT`] of its instances.

use crate::deps::{DepKind, Dependences};
use crate::program::{ArrayRole, Program, StmtId};
use crate::schedule::instances::Instances;
use crate::schedule::ScheduleError;
use crate::sets::conj::{Conj, Row};

use super::{as_set, second_tile};

/// The largest share (numerator, denominator) of a tile's producer instances that
/// neighbouring tiles compute too, for the producer to be recomputed rather than left unfused.
pub const MAX_REDUNDANT: (i64, i64) = (1, 4);

/// Whether `s` is a single assignment to a temporary (see the module docs).
pub(crate) fn single_assignment(program: &Program, deps: &Dependences, s: StmtId) -> bool {
    let st = &program.statements[s.index()];
    let array = st.write.array;
    program.array(array).role == ArrayRole::Temporary
        && program
            .statements
            .iter()
            .enumerate()
            .all(|(i, o)| i == s.index() || o.write.array != array)
        && st.reads.iter().all(|r| r.array != array)
        && !deps
            .memory
            .iter()
            .any(|d| d.kind == DepKind::Output && d.source == s && d.sink == s)
}

/// For the extension `ext` of tiles of `k` members, at the kernel's sizes: (instances of a
/// middle tile that a neighbouring tile computes too, summed over the tile dimensions;
/// instances of that tile). The tiles are those of `consumer`'s instances (an extension may
/// reach tile coordinates no consumer instance has, where it never runs). `None` when the
/// middle tile has no instance.
pub(crate) fn redundancy(
    program: &Program,
    ext: &Instances,
    consumer: &Instances,
    k: usize,
) -> Result<Option<(i64, i64)>, ScheduleError> {
    let np = ext.np;
    let n = ext.rel.n;
    let mut base = ext.rel.clone();
    fix_params(program, &mut base);
    let mut tiles = consumer.rel.clone();
    fix_params(program, &mut tiles);
    let mut middle = Vec::with_capacity(k);
    let mut spans = Vec::with_capacity(k);
    for j in 0..k {
        let Some((lo, hi)) = range(program, &tiles, np + j)? else {
            return Ok(None);
        };
        middle.push(lo + (hi - lo) / 2);
        spans.push((lo, hi));
    }
    let mut own = base.clone();
    fix(&mut own, np, &middle);
    let iters: Vec<usize> = (np + k..np + k + ext.n_iter).collect();
    let total = volume(program, &own, &iters)?;
    if total == 0 {
        return Ok(None);
    }
    // [np | t1 | iterators | locals1 | t2 | locals2]
    let (wide, second) = second_tile(ext, k);
    let mut shared = 0;
    for j in 0..k {
        let (lo, hi) = spans[j];
        if lo == hi {
            continue;
        }
        let mut next = middle.clone();
        next[j] = if middle[j] < hi {
            middle[j] + 1
        } else {
            middle[j] - 1
        };
        let mut both = own.remap(wide, &(0..n).collect::<Vec<_>>());
        let mut other = base.remap(wide, &second);
        fix(&mut other, n, &next);
        both.and(&other);
        shared += volume(program, &both, &iters)?;
    }
    Ok(Some((shared, total)))
}

/// Whether `shared` of `total` instances is within [`MAX_REDUNDANT`].
pub fn worth_recomputing(shared: i64, total: i64) -> bool {
    let (num, den) = MAX_REDUNDANT;
    shared * den <= total * num
}

pub(super) fn fix_params(program: &Program, c: &mut Conj) {
    for (i, p) in program.params.iter().enumerate() {
        let mut row: Row = vec![0; c.n + 1];
        row[0] = -p.value;
        row[1 + i] = 1;
        c.eqs.push(row);
    }
}

/// Variables `at`, `at + 1`, … set to `values`.
pub(super) fn fix(c: &mut Conj, at: usize, values: &[i64]) {
    for (j, &v) in values.iter().enumerate() {
        let mut row: Row = vec![0; c.n + 1];
        row[0] = -v;
        row[1 + at + j] = 1;
        c.eqs.push(row);
    }
}

/// The range of variable `v` of `c` (parameters fixed), the others existential.
pub(super) fn range(
    program: &Program,
    c: &Conj,
    v: usize,
) -> Result<Option<(i64, i64)>, ScheduleError> {
    let np = program.params.len();
    let map: Vec<usize> = (0..c.n)
        .map(|u| {
            if u < np {
                u
            } else if u == v {
                np
            } else if u < v {
                u + 1
            } else {
                u
            }
        })
        .collect();
    let set = as_set(program, &[c.remap(c.n, &map)], 1);
    let (Some(lo), Some(hi)) = (set.lexmin_point()?, set.lexmax_point()?) else {
        return Ok(None);
    };
    Ok(Some((lo[np], hi[np])))
}

/// The number of points of the rectangular hull of `c` over the variables `vars`.
pub(super) fn volume(program: &Program, c: &Conj, vars: &[usize]) -> Result<i64, ScheduleError> {
    let mut v = 1;
    for &u in vars {
        match range(program, c, u)? {
            Some((lo, hi)) => v *= hi - lo + 1,
            None => return Ok(0),
        }
    }
    Ok(v)
}
