//! Regions and their boxes in the unified buffer: which subtree of the AST is promoted, where
//! each array's box lies in UB, and the copies between GM and UB around it.

use std::collections::BTreeMap;

use polyhedral::ast::{Ast, AstExpr};
use polyhedral::program::ArrayId;
use polyhedral::schedule::mark::Mark;
use sim::isa::{Addr, Affine, CmpOp, Instr, Mem, Reg, Scalar};
use sim::Span;

use super::emit::{add_term, dtype, Emitter, Int, SCRATCH};
use crate::loops::{evaluate, Linear};
use crate::npu::{Error, BLOCK_BYTES};
use crate::promote::Region;

/// Most bursts of one copy.
const MAX_BURSTS: i64 = 4095;

/// An array's box in the unified buffer while a region runs.
#[derive(Clone, Debug)]
pub(super) struct ArrayBox {
    pub(super) array: ArrayId,
    /// The subscripts of the accesses the box holds (a statement's own boxes, or one phase of
    /// a read-only array's); `None`: every access of the array in the region.
    holds: Option<Vec<Vec<AstExpr>>>,
    /// Per dimension, the box's lowest index: an expression of the loops outside the region
    /// (clamped so that the box lies inside the array).
    lower: Vec<AstExpr>,
    /// Per dimension, where the lowest index is held while the region runs: a register when it
    /// is not an affine form of the loop variables.
    lower_reg: Vec<Option<u8>>,
    /// Per dimension, the number of elements.
    width: Vec<i64>,
    /// Per dimension, how a box that passes the end of the array there is copied: it keeps
    /// its place and is copied only as far as the array goes. `None`: the box always lies
    /// inside the array there.
    tail: Vec<Option<Tail>>,
    /// Per dimension, the bytes between consecutive indices in UB (rows padded to 32 bytes).
    pitch: Vec<i64>,
    /// Byte offset of the box in the buffer.
    offset: u64,
    /// Bytes of the box in UB.
    bytes: u64,
    /// Whether the box is copied in before the region.
    read: bool,
    /// Whether the box is copied back after the region.
    pub(super) written: bool,
}

/// What a box holds: an array, or some accesses of it (their subscripts).
type BoxKey = (ArrayId, Option<Vec<Vec<AstExpr>>>);

/// The boxes of a region.
#[derive(Clone, Debug)]
pub(super) struct Boxes {
    boxes: Vec<ArrayBox>,
}

impl ArrayBox {
    pub(super) fn rank(&self) -> usize {
        self.width.len()
    }

    /// The lowest index of dimension `d`, when it is not held in a register.
    pub(super) fn lower(&self, d: usize) -> Option<&AstExpr> {
        self.lower_reg[d].is_none().then(|| &self.lower[d])
    }

    pub(super) fn width(&self, d: usize) -> i64 {
        self.width[d]
    }
}

impl Boxes {
    pub(super) fn iter(&self) -> impl Iterator<Item = &ArrayBox> {
        self.boxes.iter()
    }

    /// The bytes the boxes copy in and out.
    fn bytes(&self) -> u64 {
        self.boxes
            .iter()
            .map(|b| b.bytes * (u64::from(b.read) + u64::from(b.written)))
            .sum()
    }

    fn get(&self, array: ArrayId, subscripts: &[AstExpr]) -> Option<&ArrayBox> {
        self.boxes.iter().find(|b| {
            b.array == array
                && b.holds
                    .as_ref()
                    .is_none_or(|h| h.iter().any(|s| s.as_slice() == subscripts))
        })
    }
}

/// The boxes of `ast` as a region, when they all fit the unified buffer.
///
/// A loop nest gets one box per array, the hull of its accesses, copied in whole (the nest may
/// read what it does not write) and copied back when written; an array it only reads, at
/// last indices a fraction of a 32-byte block apart (a stencil's neighbours), one box per
/// phase ([`phases`]). A single statement instance gets one box of one element per distinct
/// access: its reads all come before its write, so a read of a box the write does not share
/// sees GM as it was, and only what is read is copied in.
pub(super) fn plan(e: &Emitter, ast: &Ast) -> Option<Boxes> {
    if has_matrix(ast) {
        return None;
    }
    let boxes = footprint(e, ast)?;
    let end = boxes.boxes.last().map_or(SCRATCH, |b| b.offset + b.bytes);
    (end <= e.target.capacity(Mem::Ub)).then_some(boxes)
}

/// The boxes of a block of subtrees as one region, when it fits and moves no more bytes than
/// its items would as regions of their own (their boxes may overlap: a value one item writes
/// and the next reads then stays in UB).
pub(super) fn plan_block(e: &Emitter, block: &Ast) -> Option<Boxes> {
    let Ast::Block(items) = block else {
        return None;
    };
    if items.len() < 2 {
        return None;
    }
    let mut apart = 0;
    for item in items {
        if !matches!(item, Ast::For { .. } | Ast::User { .. }) {
            return None;
        }
        apart += plan(e, item)?.bytes();
    }
    plan(e, block).filter(|b| b.bytes() <= apart)
}

/// Whether a matrix mark lies in `ast`: the Cube's tiles take their operands from GM, so no
/// region holds them.
pub(super) fn has_matrix(ast: &Ast) -> bool {
    let mut found = false;
    ast.walk(&mut |a| {
        found |= matches!(
            a,
            Ast::Mark {
                mark: Mark::Matrix(_),
                ..
            }
        )
    });
    found
}

/// The boxes `ast` would have as a region (see [`plan`]), whether or not they fit.
pub(super) fn footprint(e: &Emitter, ast: &Ast) -> Option<Boxes> {
    let program = e.program;
    let region = Region::new(program, ast, true);
    // (array, subscripts for a statement's own boxes) → (read, written).
    let mut keys: Vec<(BoxKey, (bool, bool))> = Vec::new();
    let single = matches!(ast, Ast::User { .. });
    for (a, subs, w) in &region.all {
        let key = (*a, single.then(|| vec![subs.clone()]));
        match keys.iter_mut().find(|(k, _)| *k == key) {
            Some((_, (r, wr))) => {
                *r |= !w;
                *wr |= w;
            }
            None => keys.push((key, (!w || !single, *w))),
        }
    }
    if !single {
        keys = keys
            .into_iter()
            .flat_map(|(key, rw)| match (&key, rw) {
                ((a, None), (true, false)) => match phases(e, &region, *a) {
                    Some(classes) => classes.into_iter().map(|c| ((*a, Some(c)), rw)).collect(),
                    None => vec![(key, rw)],
                },
                _ => vec![(key, rw)],
            })
            .collect();
    }
    keys.sort_by_key(|((a, _), _)| *a);
    let read_in_region = |array: ArrayId| region.all.iter().any(|(a, _, w)| *a == array && !w);
    let mut offset = SCRATCH;
    let mut boxes = Vec::new();
    for ((array, holds), (read, written)) in keys {
        let extents = program.array_extents(array);
        let (lower, width) = match &holds {
            Some(subs) if single => (subs[0].clone(), vec![1; subs[0].len()]),
            _ => {
                let (lower, extent) = match &holds {
                    Some(h) => region.covering_box_of(program, array, true, &|s| {
                        h.iter().any(|x| x.as_slice() == s)
                    })?,
                    None => region.covering_box(program, array, &BTreeMap::new(), true)?,
                };
                let width = extent
                    .iter()
                    .zip(&extents)
                    .map(|(&w, &n)| w.min(n).max(1))
                    .collect();
                (lower, width)
            }
        };
        let es = dtype(program.array(array).elem).ok()?.size() as i64;
        // Keep the box inside the array: its lowest index between 0 and the extent less its
        // width. Where the loops' ranges show that it always is, the index stays as it is;
        // where boxes at least a width apart pass the end, they keep their place too: the one
        // the end cuts is copied as far as the end, those past it not at all
        // (`ArrayBox::tail`).
        let (lower, tail): (Vec<AstExpr>, Vec<Option<Tail>>) = lower
            .into_iter()
            .zip(width.iter().zip(&extents))
            .map(|(lo, (&w, &n))| match e.interval(&lo) {
                Some((a, b)) if a >= 0 && b <= n - w => (lo, None),
                Some((a, b)) if a >= 0 => {
                    match step_apart(e, &lo, w, b).and_then(|step| Tail::of(a, b, step, w, n)) {
                        Some(t) => (lo, Some(t)),
                        None => (clamped(lo, n - w), None),
                    }
                }
                _ => (clamped(lo, n - w), None),
            })
            .unzip();
        // A box the region writes whole before reading any of it needs nothing from GM; one
        // that lives in the region alone neither that nor a copy back.
        let local = !single && e.lives_in_region(array, ast);
        let read = read
            && !local
            && (single || read_in_region(array) || !fully_written(e, ast, array, &lower, &width));
        let written = written && !local;
        let rank = width.len();
        let mut pitch = vec![es; rank];
        if rank >= 1 {
            let row = round_up(width[rank - 1] * es);
            for d in (0..rank - 1).rev() {
                pitch[d] = if d == rank - 2 {
                    row
                } else {
                    pitch[d + 1] * width[d + 1]
                };
            }
        }
        let bytes = match rank {
            0 => BLOCK_BYTES as i64,
            1 => round_up(width[0] * es),
            _ => pitch[0] * width[0],
        };
        boxes.push(ArrayBox {
            array,
            holds,
            lower_reg: vec![None; rank],
            lower,
            width,
            tail,
            pitch,
            offset,
            bytes: bytes as u64,
            read,
            written,
        });
        offset += bytes as u64;
        offset = offset.next_multiple_of(BLOCK_BYTES);
    }
    Some(Boxes { boxes })
}

/// The accesses of `array` in `region` by their phase, when there are several: the last
/// subscripts of all of them are one affine form of the loops plus constants, which fall in
/// more than one class modulo the elements of a 32-byte block. A box per class, starting at
/// its lowest index, puts every access of the class at the same place in a block as the others'
/// (a vector instruction's operands all start on a block), where one box for all would not.
fn phases(e: &Emitter, region: &Region, array: ArrayId) -> Option<Vec<Vec<Vec<AstExpr>>>> {
    let es = dtype(e.program.array(array).elem).ok()?.size() as i64;
    let per_block = BLOCK_BYTES as i64 / es;
    let mut classes: BTreeMap<i64, Vec<Vec<AstExpr>>> = BTreeMap::new();
    let mut form = None;
    for (_, subs, _) in region.all.iter().filter(|(a, ..)| *a == array) {
        let last = e.with_params(Linear::of(subs.last()?)?);
        if form.get_or_insert_with(|| last.vars.clone()) != &last.vars {
            return None;
        }
        let class = classes
            .entry(last.constant.rem_euclid(per_block))
            .or_default();
        if !class.contains(subs) {
            class.push(subs.clone());
        }
    }
    (classes.len() > 1).then(|| classes.into_values().collect())
}

/// Along one dimension, the boxes past the end of the array: their lowest indices are at least
/// a width apart, so one of them at most, the last within the array, is cut by its end.
#[derive(Clone, Copy, Debug)]
struct Tail {
    /// The elements of the box that the array's end cuts, if one is.
    partial: Option<i64>,
    /// Whether boxes may start at or past the end: those are not copied at all (the region
    /// reads and writes nothing of them).
    beyond: bool,
}

impl Tail {
    /// The tail of boxes of width `w` starting at `a..=top` in steps of `step`, in an array of
    /// `n` elements; `None` when none starts within the array.
    fn of(a: i64, top: i64, step: i64, w: i64, n: i64) -> Option<Tail> {
        let last = if top < n {
            top
        } else {
            top - step * ((top - n + step) / step)
        };
        (last >= a).then_some(Tail {
            partial: (last > n - w).then_some(n - last),
            beyond: top >= n,
        })
    }
}

/// The step between the values `lo` takes when they are at least `w` apart and `top`, their
/// bound, is one of them or lies a whole step above the last: `lo` is `c·v + k` in one loop
/// variable with `c ≥ w` and `top ≡ k (mod c)`.
fn step_apart(e: &Emitter, lo: &AstExpr, w: i64, top: i64) -> Option<i64> {
    let l = e.with_params(Linear::of(lo)?);
    let [(_, &c)] = l.vars.iter().collect::<Vec<_>>()[..] else {
        return None;
    };
    (c >= w && (top - l.constant).rem_euclid(c) == 0).then_some(c)
}

/// `lo` kept between 0 and `top`.
fn clamped(lo: AstExpr, top: i64) -> AstExpr {
    AstExpr::max(vec![
        AstExpr::Int(0),
        AstExpr::min(vec![lo, AstExpr::Int(top)]),
    ])
}

/// Whether the one statement of `ast` that writes `array` writes every element of the box at
/// `lower` with `width` in every instance of the region: its subscripts are distinct loops of
/// step 1 plus constants, each loop walking exactly the box's width from where the box
/// starts whatever the loops outside it, or indices the region does not move where the box is
/// one element wide, under no condition.
fn fully_written(e: &Emitter, ast: &Ast, array: ArrayId, lower: &[AstExpr], width: &[i64]) -> bool {
    let mut sites = Vec::new();
    if !write_sites(e, ast, array, &mut Vec::new(), &mut sites) {
        return false;
    }
    let [(loops, subs)] = sites.as_slice() else {
        return false;
    };
    // Loops that take one value (the region's of one iteration, those outside it that the
    // cores fixed) count as that value.
    let mut one: BTreeMap<&str, i64> = e
        .ranges
        .iter()
        .filter(|(_, (a, b))| a == b)
        .map(|(w, (a, _))| (w.as_str(), *a))
        .collect();
    for (w, lo, hi, _) in loops {
        let value = |x: &AstExpr| evaluate(&e.settled(x), Some(&e.params), &BTreeMap::new());
        match (value(lo), value(hi)) {
            (Some(a), Some(b)) if a == b => {
                one.insert(w.as_str(), a);
            }
            _ => {
                one.remove(w.as_str());
            }
        }
    }
    let fixed = |mut l: Linear| {
        l = e.with_params(l);
        l.vars.retain(|w, c| match one.get(w.as_str()) {
            Some(&a) => {
                l.constant += *c * a;
                false
            }
            None => true,
        });
        l
    };
    let values: BTreeMap<String, i64> = one.iter().map(|(w, &a)| (w.to_string(), a)).collect();
    let bound = |x: &AstExpr| match evaluate(x, Some(&e.params), &values) {
        Some(v) => Some(Linear {
            constant: v,
            ..Linear::default()
        }),
        None => Linear::of(&e.settled(x)).map(fixed),
    };
    let inner: Vec<&str> = loops
        .iter()
        .map(|(v, ..)| v.as_str())
        .filter(|v| !one.contains_key(v))
        .collect();
    let mut used = Vec::new();
    for (d, sub) in subs.iter().enumerate() {
        let Some(l) = Linear::of(sub).map(fixed) else {
            return false;
        };
        // An index the region does not move: the box is one element wide there.
        if !l.vars.keys().any(|w| inner.contains(&w.as_str())) {
            if width[d] != 1 || Linear::of(&lower[d]).map(fixed) != Some(l) {
                return false;
            }
            continue;
        }
        let Some((v, 1)) = l.vars.iter().next().map(|(v, c)| (v.clone(), *c)) else {
            return false;
        };
        if l.vars.len() != 1 || used.contains(&v) {
            return false;
        }
        let Some((_, lo, hi, 1)) = loops.iter().find(|(w, ..)| *w == v) else {
            return false;
        };
        let (Some(lo), Some(hi)) = (bound(lo), bound(hi)) else {
            return false;
        };
        let trip = hi.minus(&lo);
        let mut first = lo.clone();
        first.constant += l.constant;
        let starts = Linear::of(&lower[d]).map(fixed);
        if lo.vars.keys().any(|w| inner.contains(&w.as_str()))
            || !trip.is_constant()
            || trip.constant + 1 != width[d]
            || starts != Some(first)
        {
            return false;
        }
        used.push(v);
    }
    true
}

/// A loop's variable, bounds and step.
type LoopBounds = (String, AstExpr, AstExpr, i64);

/// Collects the statements of `ast` that write `array`, each with its enclosing loops (variable,
/// bounds, step) and its write's subscripts; `false` when one lies under a condition.
fn write_sites(
    e: &Emitter,
    ast: &Ast,
    array: ArrayId,
    loops: &mut Vec<LoopBounds>,
    out: &mut Vec<(Vec<LoopBounds>, Vec<AstExpr>)>,
) -> bool {
    match ast {
        Ast::Block(items) => items.iter().all(|a| write_sites(e, a, array, loops, out)),
        Ast::Mark { body, .. } => write_sites(e, body, array, loops, out),
        Ast::For {
            var,
            lower,
            upper,
            step,
            body,
            ..
        } => {
            loops.push((var.clone(), lower.clone(), upper.clone(), *step));
            let ok = write_sites(e, body, array, loops, out);
            loops.pop();
            ok
        }
        Ast::If {
            then, otherwise, ..
        } => {
            let mut inside = Vec::new();
            write_sites(e, then, array, loops, &mut inside);
            if let Some(o) = otherwise {
                write_sites(e, o, array, loops, &mut inside);
            }
            inside.is_empty()
        }
        Ast::User { stmt, args } => {
            let s = &e.program.statements[stmt.index()];
            if s.write.array == array {
                let subs = s
                    .write
                    .subscripts
                    .iter()
                    .map(|x| AstExpr::from_subscript(&s.divs, x, &|d| args[d].clone()))
                    .collect();
                out.push((loops.clone(), subs));
            }
            true
        }
    }
}

/// Lowers `ast` as a region with `boxes`: copies in, the region, copies out.
pub(super) fn region(e: &mut Emitter, ast: &Ast, mut boxes: Boxes) -> Result<(), Error> {
    let end = boxes
        .boxes
        .iter()
        .map(|b| b.offset + b.bytes)
        .max()
        .unwrap_or(SCRATCH);
    e.ub_size = e.ub_size.max(end);
    // Lowest indices that are not affine are computed once, into registers.
    for b in &mut boxes.boxes {
        for d in 0..b.lower.len() {
            if Linear::of(&b.lower[d]).is_none() {
                match e.int(&b.lower[d])? {
                    Int::Temp(r) => b.lower_reg[d] = Some(r),
                    Int::Const(v) => b.lower[d] = AstExpr::Int(v),
                    v => {
                        let r = e.sreg()?;
                        e.push(Instr::Mov {
                            dst: Reg::S(r),
                            src: v.scalar(),
                        });
                        b.lower_reg[d] = Some(r);
                    }
                }
            }
        }
    }
    // What ran before (the previous region's copies out) is done.
    e.push(Instr::Barrier { pipe: None });
    for b in boxes.boxes.iter().filter(|b| b.read) {
        copy(e, b, true)?;
    }
    e.push(Instr::Barrier { pipe: None });
    e.region = Some(boxes.clone());
    e.region_end = end;
    let r = e.region_body(ast);
    e.region = None;
    r?;
    for b in boxes.boxes.iter().filter(|b| b.written) {
        copy(e, b, false)?;
    }
    for b in &boxes.boxes {
        for r in b.lower_reg.iter().flatten() {
            e.free_s(*r);
        }
    }
    Ok(())
}

/// Adds `scale ·` the box's lowest index of dimension `d` to `offset`.
fn add_lower(
    e: &mut Emitter,
    b: &ArrayBox,
    d: usize,
    scale: i64,
    offset: &mut Affine,
    temps: &mut Vec<u8>,
) -> Result<(), Error> {
    match b.lower_reg[d] {
        Some(r) => {
            add_term(offset, format!("s{r}"), scale);
            Ok(())
        }
        None => e.add_scaled(offset, &b.lower[d].clone(), scale, temps),
    }
}

/// The address in UB of the element of `array` at `subscripts`, inside the region's box.
pub(super) fn element(
    e: &mut Emitter,
    array: ArrayId,
    subscripts: &[AstExpr],
    temps: &mut Vec<u8>,
) -> Result<Addr, Error> {
    let Some(b) = e
        .region
        .as_ref()
        .and_then(|r| r.get(array, subscripts))
        .cloned()
    else {
        return Err(Error::NotYet(format!(
            "an access of `{}` outside the region that holds it",
            e.program.array(array).name
        )));
    };
    let mut offset = Affine::constant(b.offset as i64);
    for (d, sub) in subscripts.iter().enumerate() {
        e.add_scaled(&mut offset, sub, b.pitch[d], temps)?;
        add_lower(e, &b, d, -b.pitch[d], &mut offset, temps)?;
    }
    Ok(e.ub_at(offset))
}

/// Copies a box from GM to UB (`inward`) or back; a box with tails as far as the array goes:
/// per dimension with a tail, the whole width where the lowest index leaves room for it, the
/// elements up to the end where it is cut, nothing where it starts past the end.
fn copy(e: &mut Emitter, b: &ArrayBox, inward: bool) -> Result<(), Error> {
    copy_widths(e, b, inward, b.width.clone(), 0)
}

/// [`copy`] with the widths of the dimensions before `d` chosen.
fn copy_widths(
    e: &mut Emitter,
    b: &ArrayBox,
    inward: bool,
    mut width: Vec<i64>,
    d: usize,
) -> Result<(), Error> {
    let Some((k, tail)) = (d..b.rank()).find_map(|k| b.tail[k].map(|t| (k, t))) else {
        return copy_box(e, b, &width, inward);
    };
    let extent = e.program.array_extents(b.array)[k];
    let lower = e.int(&b.lower[k].clone())?;
    let at = lower.scalar();
    let whole = e.nested(|e| copy_widths(e, b, inward, width.clone(), k + 1))?;
    let cut = match tail.partial {
        Some(p) => {
            width[k] = p;
            let part = e.nested(|e| copy_widths(e, b, inward, width, k + 1))?;
            if tail.beyond {
                e.nested(|e| {
                    e.branch(at.clone(), CmpOp::Le, Scalar::Int(extent - 1), part);
                    Ok(())
                })?
            } else {
                part
            }
        }
        None => Vec::new(),
    };
    e.branch_else(at, CmpOp::Le, Scalar::Int(extent - b.width[k]), whole, cut);
    e.release(lower);
    Ok(())
}

/// Copies `width` elements of a box from GM to UB (`inward`) or back.
fn copy_box(e: &mut Emitter, b: &ArrayBox, width: &[i64], inward: bool) -> Result<(), Error> {
    let program = e.program;
    let array = program.array(b.array);
    let es = dtype(array.elem)?.size() as i64;
    let extents = program.array_extents(b.array);
    let rank = width.len();
    // Bytes between consecutive indices of each dimension in GM.
    let mut stride = vec![es; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        stride[d] = stride[d + 1] * extents[d + 1];
    }
    let mut temps = Vec::new();
    let mut gm = Affine::constant(0);
    for (d, &s) in stride.iter().enumerate() {
        add_lower(e, b, d, s, &mut gm, &mut temps)?;
    }
    let ub = Affine::constant(b.offset as i64);
    // Bytes of one burst (one row of the box), bursts per copy and their strides.
    let (row, rows, gm_step, ub_step) = match rank {
        0 => (es, 1, es, BLOCK_BYTES as i64),
        1 => (width[0] * es, 1, es, BLOCK_BYTES as i64),
        _ => (
            width[rank - 1] * es,
            width[rank - 2],
            stride[rank - 2],
            b.pitch[rank - 2],
        ),
    };
    let outer = rank.saturating_sub(2);
    let name = array.name.clone();
    copy_rows(
        e,
        &Rows {
            name: &name,
            widths: &width[..outer],
            gm_strides: &stride[..outer],
            ub_pitches: &b.pitch[..outer],
            row,
            rows,
            gm_step,
            ub_step,
            inward,
        },
        gm,
        ub,
    )?;
    for t in temps {
        e.free_s(t);
    }
    Ok(())
}

/// The rows of a box: the outer dimensions looped over, then bursts of rows.
struct Rows<'a> {
    name: &'a str,
    widths: &'a [i64],
    gm_strides: &'a [i64],
    ub_pitches: &'a [i64],
    row: i64,
    rows: i64,
    gm_step: i64,
    ub_step: i64,
    inward: bool,
}

fn copy_rows(e: &mut Emitter, r: &Rows, gm: Affine, ub: Affine) -> Result<(), Error> {
    if let Some((&w, rest)) = r.widths.split_first() {
        let inner = Rows {
            widths: rest,
            gm_strides: &r.gm_strides[1..],
            ub_pitches: &r.ub_pitches[1..],
            ..*r
        };
        return e.counted(w, |e, k| {
            let (mut gm, mut ub) = (gm.clone(), ub.clone());
            add_term(&mut gm, k.to_string(), r.gm_strides[0]);
            add_term(&mut ub, k.to_string(), r.ub_pitches[0]);
            copy_rows(e, &inner, gm, ub)
        });
    }
    let len = (r.row as u64).div_ceil(BLOCK_BYTES) as u32;
    let mut first = 0;
    while first < r.rows {
        let n = (r.rows - first).min(MAX_BURSTS);
        let (mut gm, mut ub) = (gm.clone(), ub.clone());
        gm.constant += first * r.gm_step;
        ub.constant += first * r.ub_step;
        let gm = Addr {
            buffer: r.name.to_string(),
            offset: gm,
            span: Span::default(),
        };
        let ub = e.ub_at(ub);
        let (dst, src, src_stride, dst_stride) = if r.inward {
            (ub, gm, r.gm_step, r.ub_step)
        } else {
            (gm, ub, r.ub_step, r.gm_step)
        };
        e.push(Instr::CopyPad {
            dst,
            src,
            n_burst: n as u32,
            bytes: r.row as u32,
            src_stride: src_stride as u32,
            dst_stride: dst_stride as u32,
            len,
        });
        first += n;
    }
    Ok(())
}

/// `bytes` rounded up to whole 32-byte blocks.
fn round_up(bytes: i64) -> i64 {
    (bytes as u64).div_ceil(BLOCK_BYTES) as i64 * BLOCK_BYTES as i64
}

/// The lowest index of the last dimension of the box that holds the access of `array` at
/// `subscripts`, as an affine form of the loops outside the region; `None` where it is held in
/// a register.
pub(super) fn last_lower(e: &Emitter, array: ArrayId, subscripts: &[AstExpr]) -> Option<Linear> {
    let b = e.region.as_ref()?.get(array, subscripts)?;
    if b.lower_reg.last().copied().flatten().is_some() {
        return None;
    }
    Linear::of(b.lower.last()?)
}
