//! Batched execution of an innermost loop: each instruction of a statement body runs for a block
//! of consecutive iterations before the next instruction does, so its dispatch is paid once per
//! block rather than once per instance.
//!
//! Only *pure* bodies run batched: straight-line code (no `select`, `&&`, `||` or calls) with no
//! instruction that can fail (no integer division or remainder), whose accesses were all proved
//! inside their arrays for the whole loop. Such code computes the same values in any order that
//! respects its data flow, with one exception: a load that may read an element written by an
//! earlier iteration of the same loop (a *carried* load). Carried loads, and every instruction
//! that depends on one, run iteration by iteration after the others, each iteration's write made
//! before the next iteration's carried loads, which is the sequential order. When every carried
//! load reads the very element the statement writes in every iteration (a reduction into one
//! element), the element is kept in a register across the block and written once at its end:
//! nothing else in the loop reads it, so no one can tell.

use super::code::{Code, Op, Reg};
use super::plan::RawMemory;
use super::{round, wrap_i32};
use crate::program::{BinaryOp, ScalarType};

/// Iterations per block.
pub(crate) const LANES: usize = 128;

/// Whether `code` may run batched.
pub(crate) fn is_pure(code: &Code) -> bool {
    code.ops.iter().all(|op| match op {
        Op::Binary {
            op: BinaryOp::Div | BinaryOp::Rem,
            operand: ScalarType::I32,
            ..
        } => false,
        Op::Binary {
            op: BinaryOp::And | BinaryOp::Or,
            ..
        } => false,
        Op::Iter { .. }
        | Op::Load { .. }
        | Op::Neg { .. }
        | Op::Not { .. }
        | Op::Binary { .. }
        | Op::Truth { .. }
        | Op::Move { .. }
        | Op::Copy { .. }
        | Op::Math { .. }
        | Op::Cast { .. } => true,
        Op::Call { .. }
        | Op::Jump { .. }
        | Op::JumpIfZero { .. }
        | Op::JumpIfNonZero { .. }
        | Op::Step
        | Op::Return { .. } => false,
    })
}

/// Per statement: the registers of a block of iterations, lane-major per register, and the
/// split of the code for the current loop entry.
#[derive(Clone, Debug, Default)]
pub(crate) struct BatchState {
    lanes: Vec<f64>,
    /// Instructions that depend on no carried load, run a whole block at a time.
    block_ops: Vec<u32>,
    /// The others, run iteration by iteration.
    lane_ops: Vec<u32>,
    carried: Vec<bool>,
    dependent: Vec<bool>,
    /// Every carried load reads the written element, the same one in every iteration.
    accumulate: bool,
    /// When accumulating, and the iteration-by-iteration part is only `acc = acc op other`
    /// (or `other op acc`): the operation, the operand type, the result type, the other
    /// operand's register, and whether the accumulator is on the left.
    reduce: Option<(BinaryOp, ScalarType, ScalarType, Reg, bool)>,
    /// Whether the fields above describe some loop entry yet.
    prepared: bool,
}

impl BatchState {
    pub fn new(code: &Code) -> BatchState {
        let regs = code.frame.len();
        let mut lanes = vec![0.0; regs * LANES];
        // Constants stay in place: no instruction writes their registers.
        for (r, &v) in code.frame.iter().enumerate() {
            lanes[r * LANES..(r + 1) * LANES].fill(v);
        }
        BatchState {
            lanes,
            ..BatchState::default()
        }
    }
}

/// An innermost loop entry, as the batch runner sees it.
pub(crate) struct LoopEntry<'a> {
    /// Values of the iterators; the loop's own is replaced per iteration.
    pub iters: &'a [i64],
    pub depth: usize,
    /// Arrays of the accesses (write first) and their offsets at iterator zero and steps.
    pub arrays: &'a [usize],
    pub offsets: &'a [(i64, i64)],
    pub elem: ScalarType,
}

/// Splits `code` for a loop over `lo..=hi`: which loads are carried, which instructions
/// depend on them.
pub(crate) fn prepare(state: &mut BatchState, code: &Code, entry: &LoopEntry, lo: i64, hi: i64) {
    let (bw, sw) = entry.offsets[0];
    let reads = entry.offsets.len() - 1;
    let mut accumulate = true;
    let mut same = state.carried.len() == reads && state.prepared;
    for r in 0..reads {
        let (br, sr) = entry.offsets[r + 1];
        let carried = entry.arrays[r + 1] == entry.arrays[0] && overlaps(bw, sw, br, sr, lo, hi);
        if carried && !(sw == 0 && sr == 0 && br == bw) {
            accumulate = false;
        }
        if state.carried.get(r) != Some(&carried) {
            same = false;
            if state.carried.len() <= r {
                state.carried.push(carried);
            } else {
                state.carried[r] = carried;
            }
        }
    }
    // The split depends only on which loads are carried: most loop entries repeat the last.
    if same && accumulate == state.accumulate {
        return;
    }
    state.accumulate = accumulate;
    state.prepared = true;
    let regs = code.frame.len();
    state.dependent.clear();
    state.dependent.resize(regs, false);
    state.block_ops.clear();
    state.lane_ops.clear();
    for (k, op) in code.ops.iter().enumerate() {
        let (dst, dependent) = match *op {
            Op::Load { dst, read } => (dst, state.carried[read as usize]),
            Op::Iter { dst, .. } => (dst, false),
            Op::Neg { dst, a, .. }
            | Op::Not { dst, a }
            | Op::Truth { dst, src: a }
            | Op::Move { dst, src: a, .. }
            | Op::Copy { dst, src: a }
            | Op::Cast { dst, a, .. } => (dst, state.dependent[a as usize]),
            Op::Binary { dst, a, b, .. } | Op::Math { dst, a, b, .. } => (
                dst,
                state.dependent[a as usize] || state.dependent[b as usize],
            ),
            _ => unreachable!("only pure code runs batched"),
        };
        state.dependent[dst as usize] = dependent;
        if dependent {
            state.lane_ops.push(k as u32);
        } else {
            state.block_ops.push(k as u32);
        }
    }
    state.reduce = None;
    if let (true, &[load, update]) = (state.accumulate, &state.lane_ops[..]) {
        if let (
            Op::Load { dst: acc, .. },
            Op::Binary {
                op,
                dst,
                a,
                b,
                operand,
                ty,
            },
        ) = (code.ops[load as usize], code.ops[update as usize])
        {
            let reducible = matches!(
                op,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Min | BinaryOp::Max
            ) && operand != ScalarType::I32;
            if reducible && dst == code.result && (a == acc) != (b == acc) {
                let (other, left) = if a == acc { (b, true) } else { (a, false) };
                state.reduce = Some((op, operand, ty, other, left));
            }
        }
    }
}

/// Whether some iteration `i'` reads (at `br + sr·i'`) what an earlier iteration `i` writes (at
/// `bw + sw·i`), both in `lo..=hi`.
fn overlaps(bw: i64, sw: i64, br: i64, sr: i64, lo: i64, hi: i64) -> bool {
    if hi <= lo {
        return false;
    }
    let diff = br - bw;
    if sw == sr {
        if sw == 0 {
            return diff == 0;
        }
        // sw·(i − i') = diff: i' = i − diff / sw must be later, within the range.
        if diff % sw != 0 {
            return false;
        }
        let later = -(diff / sw);
        return later > 0 && later <= hi - lo;
    }
    // Different steps: whether the written and read offsets' ranges meet at all.
    let range = |b: i64, s: i64| {
        let (x, y) = (b + s * lo, b + s * hi);
        (x.min(y), x.max(y))
    };
    let (w0, w1) = range(bw, sw);
    let (r0, r1) = range(br, sr);
    w0 <= r1 && r0 <= w1
}

/// Runs iterations `lo..=hi` (at most [`LANES`] of them) of a prepared statement.
pub(crate) fn run_block(
    state: &mut BatchState,
    code: &Code,
    entry: &LoopEntry,
    memory: &RawMemory,
    lo: i64,
    hi: i64,
) {
    let n = (hi - lo + 1) as usize;
    debug_assert!(n <= LANES);
    let lanes = &mut state.lanes;
    for &k in &state.block_ops {
        block_op(code.ops[k as usize], lanes, n, entry, memory, lo);
    }
    let (bw, sw) = entry.offsets[0];
    let write = entry.arrays[0];
    let result = code.result as usize * LANES;
    if state.lane_ops.is_empty() {
        for lane in 0..n {
            let offset = bw + sw * (lo + lane as i64);
            // SAFETY: the caller proved every access inside its array for the whole loop.
            unsafe {
                memory.write(
                    write,
                    offset as usize,
                    round(entry.elem, lanes[result + lane]),
                )
            };
        }
        return;
    }
    if let Some((op, operand, ty, other, left)) = state.reduce {
        // SAFETY: as above; the element is the same in every iteration.
        let acc = unsafe { memory.read(write, bw as usize) };
        let values = &lanes[reg(other)..reg(other) + n];
        let acc = match (op, left) {
            (BinaryOp::Add, _) => fold(acc, values, entry.elem, ty, |x, y| x + y),
            (BinaryOp::Mul, _) => fold(acc, values, entry.elem, ty, |x, y| x * y),
            (BinaryOp::Sub, true) => fold(acc, values, entry.elem, ty, |x, y| x - y),
            (_, true) => fold(acc, values, entry.elem, ty, |x, y| {
                pure_binary(op, operand, x, y)
            }),
            (_, false) => fold(acc, values, entry.elem, ty, |x, y| {
                pure_binary(op, operand, y, x)
            }),
        };
        // SAFETY: as above.
        unsafe { memory.write(write, bw as usize, acc) };
        return;
    }
    if state.accumulate {
        // SAFETY: as above; the element is the same in every iteration.
        let mut acc = unsafe { memory.read(write, bw as usize) };
        for lane in 0..n {
            for &k in &state.lane_ops {
                lane_op(
                    code.ops[k as usize],
                    lanes,
                    lane,
                    entry,
                    memory,
                    lo,
                    Some(acc),
                );
            }
            acc = round(entry.elem, lanes[result + lane]);
        }
        // SAFETY: as above.
        unsafe { memory.write(write, bw as usize, acc) };
        return;
    }
    for lane in 0..n {
        for &k in &state.lane_ops {
            lane_op(code.ops[k as usize], lanes, lane, entry, memory, lo, None);
        }
        let offset = bw + sw * (lo + lane as i64);
        // SAFETY: as above.
        unsafe {
            memory.write(
                write,
                offset as usize,
                round(entry.elem, lanes[result + lane]),
            )
        };
    }
}

/// `acc = round(elem, round(ty, f(acc, v)))` for every `v` in order.
#[inline(always)]
fn fold(
    mut acc: f64,
    values: &[f64],
    elem: ScalarType,
    ty: ScalarType,
    f: impl Fn(f64, f64) -> f64,
) -> f64 {
    if elem == ScalarType::F64 && ty == ScalarType::F64 {
        for &v in values {
            acc = f(acc, v);
        }
    } else {
        for &v in values {
            acc = round(elem, round(ty, f(acc, v)));
        }
    }
    acc
}

#[inline]
fn reg(r: Reg) -> usize {
    r as usize * LANES
}

/// Applies `f` lane by lane: `dst[l] = f(a[l], b[l])`.
#[inline(always)]
fn map2(lanes: &mut [f64], n: usize, dst: Reg, a: Reg, b: Reg, f: impl Fn(f64, f64) -> f64) {
    // Every node writes its own register: a result never overwrites an operand.
    assert!(dst != a && dst != b && n <= LANES);
    let (d, a, b) = (reg(dst), reg(a), reg(b));
    assert!(d.max(a).max(b) + LANES <= lanes.len());
    let base = lanes.as_mut_ptr();
    // SAFETY: the three ranges are inside `lanes` (asserted), and the written one is disjoint
    // from the two read ones, which may coincide with each other.
    let (out, x, y) = unsafe {
        (
            std::slice::from_raw_parts_mut(base.add(d), n),
            std::slice::from_raw_parts(base.add(a), n),
            std::slice::from_raw_parts(base.add(b), n),
        )
    };
    for ((o, &x), &y) in out.iter_mut().zip(x).zip(y) {
        *o = f(x, y);
    }
}

/// Rounds the first `n` lanes of `dst` to `ty`.
#[inline(always)]
fn round_lanes(lanes: &mut [f64], n: usize, dst: Reg, ty: ScalarType) {
    let d = reg(dst);
    match ty {
        ScalarType::F64 => {}
        ScalarType::F32 => {
            for v in &mut lanes[d..d + n] {
                *v = *v as f32 as f64;
            }
        }
        _ => {
            for v in &mut lanes[d..d + n] {
                *v = round(ty, *v);
            }
        }
    }
}

fn block_op(op: Op, lanes: &mut [f64], n: usize, entry: &LoopEntry, memory: &RawMemory, lo: i64) {
    match op {
        Op::Iter { dst, depth } => {
            let d = reg(dst);
            let depth = depth as usize;
            for l in 0..n {
                let v = if depth == entry.depth {
                    lo + l as i64
                } else {
                    entry.iters[depth]
                };
                lanes[d + l] = wrap_i32(v);
            }
        }
        Op::Load { dst, read } => {
            let (base, step) = entry.offsets[read as usize + 1];
            let array = entry.arrays[read as usize + 1];
            let d = reg(dst);
            let start = base + step * lo;
            let out = &mut lanes[d..d + n];
            if step == 1 {
                // SAFETY: the caller proved every access inside its array for the whole loop.
                out.copy_from_slice(unsafe { memory.slice(array, start as usize, n) });
            } else {
                for (l, o) in out.iter_mut().enumerate() {
                    // SAFETY: as above.
                    *o = unsafe { memory.read(array, (start + step * l as i64) as usize) };
                }
            }
        }
        Op::Binary {
            op,
            dst,
            a,
            b,
            operand,
            ty,
        } => {
            if operand != ScalarType::I32 {
                match op {
                    BinaryOp::Add => map2(lanes, n, dst, a, b, |x, y| x + y),
                    BinaryOp::Sub => map2(lanes, n, dst, a, b, |x, y| x - y),
                    BinaryOp::Mul => map2(lanes, n, dst, a, b, |x, y| x * y),
                    BinaryOp::Div => map2(lanes, n, dst, a, b, |x, y| x / y),
                    _ => map2(lanes, n, dst, a, b, |x, y| pure_binary(op, operand, x, y)),
                }
            } else {
                map2(lanes, n, dst, a, b, |x, y| pure_binary(op, operand, x, y));
            }
            round_lanes(lanes, n, dst, ty);
        }
        _ => {
            for lane in 0..n {
                lane_op(op, lanes, lane, entry, memory, lo, None);
            }
        }
    }
}

/// Runs one instruction for one iteration (`lo + lane`); `acc` replaces carried loads when the
/// statement accumulates into one element.
#[inline]
fn lane_op(
    op: Op,
    lanes: &mut [f64],
    lane: usize,
    entry: &LoopEntry,
    memory: &RawMemory,
    lo: i64,
    acc: Option<f64>,
) {
    let at = |r: Reg| reg(r) + lane;
    let i = lo + lane as i64;
    match op {
        Op::Iter { dst, depth } => {
            let depth = depth as usize;
            let v = if depth == entry.depth {
                i
            } else {
                entry.iters[depth]
            };
            lanes[at(dst)] = wrap_i32(v);
        }
        Op::Load { dst, read } => {
            lanes[at(dst)] = match acc {
                Some(v) => v,
                None => {
                    let (base, step) = entry.offsets[read as usize + 1];
                    // SAFETY: the caller proved every access inside its array for the loop.
                    unsafe {
                        memory.read(entry.arrays[read as usize + 1], (base + step * i) as usize)
                    }
                }
            };
        }
        Op::Neg { dst, a, ty } => {
            let x = lanes[at(a)];
            lanes[at(dst)] = if ty == ScalarType::I32 {
                wrap_i32((x as i64).wrapping_neg())
            } else {
                round(ty, -x)
            };
        }
        Op::Not { dst, a } => lanes[at(dst)] = (lanes[at(a)] == 0.0) as u8 as f64,
        Op::Truth { dst, src } => lanes[at(dst)] = (lanes[at(src)] != 0.0) as u8 as f64,
        Op::Move { dst, src, ty } => lanes[at(dst)] = round(ty, lanes[at(src)]),
        Op::Copy { dst, src } => lanes[at(dst)] = lanes[at(src)],
        Op::Binary {
            op,
            dst,
            a,
            b,
            operand,
            ty,
        } => {
            lanes[at(dst)] = round(ty, pure_binary(op, operand, lanes[at(a)], lanes[at(b)]));
        }
        Op::Math { f, dst, a, b, ty } => {
            lanes[at(dst)] = round(ty, super::code::math(f, lanes[at(a)], lanes[at(b)]));
        }
        Op::Cast { dst, a, to } => {
            let x = lanes[at(a)];
            let v = match to {
                ScalarType::I32 => x.trunc().clamp(i32::MIN as f64, i32::MAX as f64),
                _ => x,
            };
            lanes[at(dst)] = round(to, v);
        }
        _ => unreachable!("only pure code runs batched"),
    }
}

/// [`super::code`]'s binary operations that cannot fail.
#[inline]
fn pure_binary(op: BinaryOp, ty: ScalarType, x: f64, y: f64) -> f64 {
    super::code::binary(op, ty, x, y).unwrap_or_else(|_| unreachable!("pure code cannot fail"))
}
