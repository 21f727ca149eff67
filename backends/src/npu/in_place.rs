//! Contractions that update their result in place (trmm's `B := A·B` over a triangle of `A`),
//! as two kernels launched one after the other.
//!
//! A contraction that reads, as an operand, the array it accumulates into can run on the
//! Cube when no instance reads an element some instance has already updated (there is no flow
//! dependence into the operand's read): then every operand read sees the array as it was
//! before the kernel, so a copy of it taken first serves. A cut of the domain between the
//! reduction iterator and another one (`k` in `i + 1:M`) becomes a cut of the operand that
//! holds both: its elements outside the domain are replaced by zeros, so the products over the
//! whole bounding box add exact zeros where the interpreter adds nothing.
//!
//! The first kernel (`…_prep`, one block on the Vector unit's copies) writes those operands
//! into GM temporaries — the copy, and the cut operand with its zeros — row pieces through UB;
//! the second is the contraction of the rewritten program ([`super::cube`]) reading them.
//! Anything else that updates an array in place from other elements of it is refused with
//! the statement and the reason.

use std::fmt::Write as _;

use polyhedral::contraction::contraction;
use polyhedral::deps::{compute_dependences, DepKind};
use polyhedral::program::{
    AffineExpr, ArrayId, ArrayRole, BinaryOp, Constraint, Expr, Reduction, ReductionOp, ScalarType,
    Var,
};
use polyhedral::Program;

use super::cube::gm_type;
use super::plan::{self, in_place_reduction};
use super::{Error, BLOCK_BYTES, VECTOR_BYTES};

/// A GM temporary the first kernel writes from an array of the kernel.
#[derive(Clone, Debug)]
pub(crate) struct Prep {
    pub from: ArrayId,
    pub to: ArrayId,
    /// The element of `from` that `to`'s first element is copied from.
    pub offset: u64,
    /// The elements kept of a 2-d array, `sr · row + sc · col + c >= 0` as `(sr, sc, c)`
    /// with `sr = -sc = ±1`; the others become 0. `None`: a plain copy.
    pub keep: Option<(i64, i64, i64)>,
}

/// The rewritten program, what a first kernel prepares for it and what a last one copies
/// back from its results.
#[derive(Clone, Debug)]
pub(crate) struct Rewrite {
    pub program: Program,
    pub preps: Vec<Prep>,
    pub posts: Vec<Prep>,
}

/// The rewrite of `program` when a statement updates an array in place from other elements
/// of it; `None` when none does; an error naming the statement when it cannot be lowered.
pub(crate) fn rewrite(program: &Program) -> Result<Option<Rewrite>, Error> {
    let Some(id) = program
        .statement_ids()
        .find(|&id| in_place_reduction(&program.statements[id.index()]))
    else {
        return Ok(None);
    };
    let s = &program.statements[id.index()];
    let x = s.write.array;
    let refuse = |why: String| {
        Error::NotYet(format!(
            "statement {} updates `{}` in place from other elements of it ({}): {why}",
            s.name,
            program.array(x).name,
            program.display_body(s)
        ))
    };
    // Every read of the array at other elements must see it as it was before the kernel.
    let deps = compute_dependences(program)
        .map_err(|e| refuse(format!("its dependences are not computed ({e})")))?;
    if let Some(d) = deps.memory.iter().find(|d| {
        d.kind == DepKind::Flow
            && d.sink == id
            && d.array == x
            && s.reads[d.sink_access - 1].subscripts != s.write.subscripts
    }) {
        return Err(refuse(format!(
            "it reads elements {} has already updated (a recurrence), so no copy taken before it serves",
            program.statements[d.source.index()].name
        )));
    }
    // The operand: the one read of the array at other elements than the write's.
    let ops: Vec<usize> = (0..s.reads.len())
        .filter(|&r| s.reads[r].array == x && s.reads[r].subscripts != s.write.subscripts)
        .collect();
    let [op] = ops.as_slice() else {
        return Err(refuse(
            "it reads the array at several other elements".into(),
        ));
    };
    let others = program
        .statement_ids()
        .filter(|&o| o != id && in_place_reduction(&program.statements[o.index()]));
    if let Some(o) = others.into_iter().next() {
        return Err(refuse(format!(
            "{} updates an array in place too",
            program.statements[o.index()].name
        )));
    }
    let mut out = program.clone();
    let copy = add_temp(&mut out, x, "in");
    // With the operand read from the copy the statement reads nothing else of the array it
    // updates: a sum over the iterators its write does not use.
    let st = &mut out.statements[id.index()];
    st.reads[*op].array = copy;
    if matches!(st.exprs[st.body], Expr::Binary(BinaryOp::Add, _, _)) {
        let iters: Vec<usize> = (0..st.depth())
            .filter(|&k| {
                st.write
                    .subscripts
                    .iter()
                    .all(|e| e.coeff(Var::Iter(k)) == 0)
            })
            .collect();
        st.reduction = Some(Reduction {
            op: ReductionOp::Add,
            iters,
        });
    }
    let Some(c) = contraction(&out, id).filter(|c| c.a == *op || c.b == *op) else {
        return Err(refuse(
            "it is no contraction with the array as an operand".into(),
        ));
    };
    let mut preps = Vec::new();
    preps.push(Prep {
        from: x,
        to: copy,
        offset: 0,
        keep: None,
    });
    // Cuts between a reduction iterator and another: onto the operand holding both.
    let dom = plan::domain(program, s)?;
    let params = program.param_values();
    for &(ix, iy, k) in &dom.cuts {
        if !c.k.contains(&ix) && !c.k.contains(&iy) {
            continue;
        }
        let held = [c.a, c.b].into_iter().find_map(|r| {
            let subs: Vec<Option<usize>> = s.reads[r]
                .subscripts
                .iter()
                .map(|e| match e.bind_params(&params).terms() {
                    [(Var::Iter(i), 1)] if e.bind_params(&params).constant == 0 => Some(*i),
                    _ => None,
                })
                .collect();
            let dx = subs.iter().position(|&v| v == Some(ix))?;
            let dy = subs.iter().position(|&v| v == Some(iy))?;
            (subs.len() == 2 && subs.iter().all(Option::is_some)).then_some((r, dx, dy))
        });
        let Some((r, dx, _)) = held else {
            return Err(refuse(format!(
                "its domain {} is cut by a reduction bound that no operand holds",
                program.display_domain(s)
            )));
        };
        if r == *op {
            return Err(refuse("the updated operand is cut by the domain".into()));
        }
        if preps.iter().any(|p| p.from == s.reads[r].array) {
            return Err(refuse("an operand is cut twice".into()));
        }
        // x - y + k >= 0 over the array's row and column subscripts.
        let (sr, sc) = if dx == 0 { (1, -1) } else { (-1, 1) };
        let from = s.reads[r].array;
        let to = add_temp(&mut out, from, "cut");
        out.statements[id.index()].reads[r].array = to;
        preps.push(Prep {
            from,
            to,
            offset: 0,
            keep: Some((sr, sc, k)),
        });
        // The statement now runs over the bounding box, from 0.
        let domain = &mut out.statements[id.index()].domain;
        domain.retain(|con| {
            let e = con.expr.bind_params(&params);
            !matches!(e.terms(), [(Var::Iter(a), 1), (Var::Iter(b), -1)] | [(Var::Iter(b), -1), (Var::Iter(a), 1)]
                if *a == ix && *b == iy && e.constant == k)
        });
        for it in [ix, iy] {
            domain.push(Constraint::non_negative(AffineExpr::var(Var::Iter(it))));
        }
    }
    Ok(Some(Rewrite {
        program: out,
        preps,
        posts: Vec::new(),
    }))
}

/// A GM temporary of `from`'s type and shape, named after it.
pub(crate) fn add_temp(program: &mut Program, from: ArrayId, suffix: &str) -> ArrayId {
    let arr = program.array(from).clone();
    let mut name = format!("{}_{suffix}", arr.name);
    while program.array_by_name(&name).is_some() {
        name.push('_');
    }
    program.arrays.push(polyhedral::program::Array {
        name,
        role: ArrayRole::Temporary,
        ..arr
    });
    ArrayId(program.arrays.len() as u32 - 1)
}

/// The first kernel: each prepared temporary written from its array, in pieces of rows
/// through UB, one piece per block (the cut ones' dropped elements set to 0 by masked
/// `vdup`s on the way).
pub(crate) fn prep_kernel(
    program: &Program,
    preps: &[Prep],
    cores: u64,
    (name, what): (&str, &str),
) -> String {
    const PIECE: u64 = 64 * 1024;
    let mut out = String::new();
    let _ = writeln!(out, "// {}: {what}", program.name);
    let _ = writeln!(out, "kernel {name} blockdim=BLOCKS");
    let mut declared: Vec<ArrayId> = Vec::new();
    for p in preps {
        for (a, role) in [(p.from, "in"), (p.to, "out")] {
            if declared.contains(&a) {
                continue;
            }
            declared.push(a);
            let arr = program.array(a);
            let dims: Vec<String> = program
                .array_extents(a)
                .iter()
                .map(|d| d.to_string())
                .collect();
            let _ = writeln!(
                out,
                "param {} : {}[{}] {role}",
                arr.name,
                gm_type(arr.elem),
                dims.join(", ")
            );
        }
    }
    // Pieces of rows, about as many as the cores, each one block's work.
    let share = (cores / preps.len().max(1) as u64).max(1);
    let mut pieces = Vec::new();
    for p in preps {
        let ext = program.array_extents(p.to);
        let es = elem_bytes(program.array(p.to).elem);
        let cols = *ext.last().unwrap_or(&1) as u64;
        let rows = ext[..ext.len().saturating_sub(1)].iter().product::<i64>() as u64;
        let rs = (cols * es).div_ceil(BLOCK_BYTES) * BLOCK_BYTES;
        // Pieces of at least 4 KiB: a copy's startup outweighs smaller ones.
        let pr = (PIECE / rs)
            .clamp(1, 4095)
            .min(rows.div_ceil(share).max(4096 / rs))
            .min(rows);
        let mut r0 = 0;
        while r0 < rows {
            let n = pr.min(rows - r0);
            pieces.push((p, es, cols, rs, r0, n));
            r0 += n;
        }
    }
    // The cut pieces first: blocks reach their code in program order and the earlier ones
    // win the shared GM bandwidth, so the pieces with Vector work between their copies get
    // their rows first and zero them while the plain copies still stream.
    pieces.sort_by_key(|&(p, ..)| p.keep.is_none());
    let ub = pieces
        .iter()
        .map(|&(_, _, _, rs, _, n)| n * rs)
        .max()
        .unwrap_or(0)
        + VECTOR_BYTES;
    let _ = writeln!(out, "buffer ub_p : UB, {ub}");
    let many = pieces.len() > 1;
    for (b, &(p, es, cols, rs, r0, n)) in pieces.iter().enumerate() {
        let rb = cols * es;
        let (src, dst) = (&program.array(p.from).name, &program.array(p.to).name);
        let _ = writeln!(
            out,
            "// `{dst}` rows {r0}..{}: `{src}`{}",
            r0 + n,
            if p.keep.is_some() {
                " with the elements outside the domain set to 0"
            } else {
                ""
            }
        );
        if many {
            let _ = writeln!(out, "if block_idx == {b} {{");
        }
        let at = r0 * rb;
        let from_at = p.offset * es + at;
        let bursts = |l: &mut String, stride: String| {
            if n > 1 {
                let _ = write!(l, ", n_burst={n}, bytes={rb}, {stride}");
            } else {
                let _ = write!(l, ", bytes={rb}");
            }
        };
        let mut l = format!("copy_pad ub_p[0], {src}[{from_at}]");
        bursts(&mut l, format!("src_stride={rb}, dst_stride={rs}"));
        let _ = writeln!(out, "{l}");
        match p.keep {
            Some(keep) => {
                let _ = writeln!(out, "set_flag MTE2, V, 0");
                let _ = writeln!(out, "wait_flag MTE2, V, 0");
                for r in 0..n {
                    let (z0, z1) = dropped(keep, (r0 + r) as i64, cols as i64);
                    zero(&mut out, r * rs, z0, z1, es);
                }
                let _ = writeln!(out, "set_vector_mask {FULL}, {FULL}");
                let _ = writeln!(out, "set_flag V, MTE3, 0");
                let _ = writeln!(out, "wait_flag V, MTE3, 0");
            }
            None => {
                let _ = writeln!(out, "set_flag MTE2, MTE3, 0");
                let _ = writeln!(out, "wait_flag MTE2, MTE3, 0");
            }
        }
        let mut l = format!("copy_pad {dst}[{at}], ub_p[0]");
        bursts(&mut l, format!("src_stride={rs}, dst_stride={rb}"));
        let _ = writeln!(out, "{l}");
        if many {
            let _ = writeln!(out, "}}");
        }
    }
    // The header's block count is known once the pieces are.
    out.replacen(
        "blockdim=BLOCKS",
        &format!("blockdim={}", pieces.len().max(1)),
        1,
    )
}

const FULL: &str = "0xffffffffffffffff";

fn elem_bytes(ty: ScalarType) -> u64 {
    match ty {
        ScalarType::F16 => 2,
        _ => 4,
    }
}

/// The columns `[z0, z1)` of row `row` that `keep` drops (one side of the row).
fn dropped((sr, sc, c): (i64, i64, i64), row: i64, cols: i64) -> (i64, i64) {
    if sc < 0 {
        // col <= sr·row + c: kept is a prefix.
        ((sr * row + c + 1).clamp(0, cols), cols)
    } else {
        // col >= -(sr·row + c): kept is a suffix.
        (0, (-(sr * row + c)).clamp(0, cols))
    }
}

/// `vdup`s of 0 over the elements `[z0, z1)` of the row at byte `base` of `ub_p`, the
/// partial repeats under a vector mask.
fn zero(out: &mut String, base: u64, z0: i64, z1: i64, es: u64) {
    let lanes = (VECTOR_BYTES / es) as i64;
    let ty = if es == 2 { "f16" } else { "f32" };
    let mut at = z0;
    while at < z1 {
        let g = at / lanes;
        let end = ((g + 1) * lanes).min(z1);
        let addr = base + (g * lanes) as u64 * es;
        if at == g * lanes && end == (g + 1) * lanes {
            // Whole repeats.
            let n = (z1 - at) / lanes;
            let _ = writeln!(out, "set_vector_mask {FULL}, {FULL}");
            let _ = writeln!(out, "vdup.{ty} ub_p[{addr}], 0.0, repeat={n}");
            at += n * lanes;
        } else {
            let (hi, lo) = mask(at - g * lanes, end - g * lanes);
            let _ = writeln!(out, "set_vector_mask {hi:#x}, {lo:#x}");
            let _ = writeln!(out, "vdup.{ty} ub_p[{addr}], 0.0");
            at = end;
        }
    }
}

/// The vector mask of lanes `[a, b)`: bits of lanes 64.. in the high word.
fn mask(a: i64, b: i64) -> (u64, u64) {
    let bits = |lo: i64, hi: i64| -> u64 {
        let (lo, hi) = (lo.clamp(0, 64), hi.clamp(0, 64));
        if hi <= lo {
            0
        } else if hi - lo == 64 {
            u64::MAX
        } else {
            ((1u64 << (hi - lo)) - 1) << lo
        }
    };
    (bits(a - 64, b - 64), bits(a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_cover_their_lanes() {
        assert_eq!(mask(0, 64), (0, u64::MAX));
        assert_eq!(mask(3, 5), (0, 0b11000));
        assert_eq!(mask(60, 68), (0b1111, 0xf << 60));
        assert_eq!(dropped((1, -1, -1), 3, 10), (3, 10));
        assert_eq!(dropped((-1, 1, 0), 3, 10), (0, 3));
    }
}
