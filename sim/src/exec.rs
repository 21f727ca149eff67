//! Numerics: what each instruction does to memory, lane by lane where the hardware works lane
//! by lane, with the exact rounding of the real part.
//!
//! f16 results are rounded to nearest even from a wider intermediate: + − × ÷ are computed in
//! f32, which is wide enough (24 ≥ 2·11 + 2 bits) that rounding twice equals rounding once;
//! transcendental functions are computed in f64 and rounded once. The cube multiplies f16
//! fractals exactly in f32 (f32 fractals with the product rounded to f32) and accumulates in
//! f32 in increasing k order. Callers have checked
//! every address against its buffer, so slices here never go out of bounds.

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::isa::*;

/// Reads one element as f64 (exact for every element type).
#[inline]
pub(crate) fn load(mem: &[u8], addr: usize, ty: DType) -> f64 {
    match ty {
        DType::F16 => f16::from_bits(u16::from_le_bytes([mem[addr], mem[addr + 1]])).to_f64(),
        DType::F32 => f32::from_le_bytes(mem[addr..addr + 4].try_into().unwrap_or([0; 4])) as f64,
        DType::I32 => i32::from_le_bytes(mem[addr..addr + 4].try_into().unwrap_or([0; 4])) as f64,
    }
}

/// Rounds a value to the element type (nearest even; i32 saturates, NaN becomes 0).
#[inline]
pub(crate) fn round_to(v: f64, ty: DType) -> f64 {
    match ty {
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::F32 => v as f32 as f64,
        DType::I32 => {
            if v.is_nan() {
                0.0
            } else {
                v.round_ties_even().clamp(i32::MIN as f64, i32::MAX as f64)
            }
        }
    }
}

/// Writes one element, rounding to its type.
#[inline]
pub(crate) fn store(mem: &mut [u8], addr: usize, ty: DType, v: f64) {
    match ty {
        DType::F16 => {
            mem[addr..addr + 2].copy_from_slice(&f16::from_f64(v).to_bits().to_le_bytes())
        }
        DType::F32 => mem[addr..addr + 4].copy_from_slice(&(v as f32).to_le_bytes()),
        DType::I32 => {
            mem[addr..addr + 4].copy_from_slice(&(round_to(v, DType::I32) as i32).to_le_bytes())
        }
    }
}

fn bits_of(v: f64, ty: DType) -> u32 {
    match ty {
        DType::F16 => f16::from_f64(v).to_bits() as u32,
        DType::F32 => (v as f32).to_bits(),
        DType::I32 => v as i32 as u32,
    }
}

fn from_bits(b: u32, ty: DType) -> f64 {
    match ty {
        DType::F16 => f16::from_bits(b as u16).to_f64(),
        DType::F32 => f32::from_bits(b) as f64,
        DType::I32 => b as i32 as f64,
    }
}

/// A binary lane operation; the result is rounded by `store`.
pub(crate) fn binary(op: VBinOp, ty: DType, a: f64, b: f64) -> f64 {
    if ty == DType::I32 {
        let (x, y) = (a as i32, b as i32);
        let r = match op {
            VBinOp::Add => x.wrapping_add(y),
            VBinOp::Sub => x.wrapping_sub(y),
            VBinOp::Mul => x.wrapping_mul(y),
            // Integer division by zero yields 0, as the vector unit does not trap.
            VBinOp::Div => x.checked_div(y).unwrap_or(0),
            VBinOp::Max => x.max(y),
            VBinOp::Min => x.min(y),
            VBinOp::And => x & y,
            VBinOp::Or => x | y,
        };
        return r as f64;
    }
    let (x, y) = (a as f32, b as f32);
    let r = match op {
        VBinOp::Add => x + y,
        VBinOp::Sub => x - y,
        VBinOp::Mul => x * y,
        VBinOp::Div => x / y,
        VBinOp::Max => x.max(y),
        VBinOp::Min => x.min(y),
        VBinOp::And => return from_bits(bits_of(a, ty) & bits_of(b, ty), ty),
        VBinOp::Or => return from_bits(bits_of(a, ty) | bits_of(b, ty), ty),
    };
    r as f64
}

pub(crate) fn unary(op: VUnOp, ty: DType, a: f64) -> f64 {
    match op {
        VUnOp::Exp => a.exp(),
        VUnOp::Ln => a.ln(),
        VUnOp::Rec => 1.0 / a,
        VUnOp::Rsqrt => 1.0 / a.sqrt(),
        VUnOp::Sqrt => a.sqrt(),
        VUnOp::Abs => {
            if ty == DType::I32 {
                (a as i32).wrapping_abs() as f64
            } else {
                a.abs()
            }
        }
        VUnOp::Relu => {
            if a > 0.0 {
                a
            } else {
                0.0
            }
        }
    }
}

pub(crate) fn compare(op: CmpOp, a: f64, b: f64) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

/// The 128-bit mask `(hi, lo)` with the first `lanes` lanes on.
pub(crate) fn mask_of_count(lanes: i64) -> (u64, u64) {
    let first = |n: i64| match n {
        n if n <= 0 => 0,
        n if n >= 64 => u64::MAX,
        n => (1u64 << n) - 1,
    };
    (first(lanes - 64), first(lanes))
}

/// Lane `l` is active in the 128-bit mask `(hi, lo)`.
#[inline]
pub(crate) fn lane_on(mask: (u64, u64), l: usize) -> bool {
    if l < 64 {
        mask.1 >> l & 1 == 1
    } else {
        mask.0 >> (l - 64) & 1 == 1
    }
}

/// Byte address of lane `l` in repeat `r` of an operand with element size `esize`.
#[inline]
pub(crate) fn lane_addr(
    base: usize,
    r: usize,
    l: usize,
    esize: usize,
    blk: u32,
    rep: u32,
) -> usize {
    let per_block = 32 / esize;
    base + r * rep as usize * 32 + (l / per_block) * blk as usize * 32 + (l % per_block) * esize
}

/// Highest active lane below `lanes`, if any.
pub(crate) fn last_lane(mask: (u64, u64), lanes: usize) -> Option<usize> {
    (0..lanes).rev().find(|&l| lane_on(mask, l))
}

/// The cube: C = (init ? 0 : C) + A·B over whole 16×16×16 fractals.
/// A is zZ [M1][K1][16][16], B is zN [K1][N1][16 n][16 k], C is nZ [N1][M1][16 m][16 n].
#[allow(clippy::too_many_arguments)]
pub(crate) fn mmad(
    l0a: &[u8],
    a: usize,
    l0b: &[u8],
    b: usize,
    l0c: &mut [u8],
    c: usize,
    (m1, k1, n1): (usize, usize, usize),
    src: DType,
    out: DType,
    init: bool,
) {
    let (mm, kk, nn) = (m1 * 16, k1 * 16, n1 * 16);
    let es = src.size() as usize;
    let h = |mem: &[u8], at: usize| load(mem, at, src) as f32;
    let mut am = vec![0f32; mm * kk];
    for m in 0..mm {
        for k in 0..kk {
            let at = a + (((m / 16) * k1 + k / 16) * 256 + (m % 16) * 16 + k % 16) * es;
            am[m * kk + k] = h(l0a, at);
        }
    }
    // Stored transposed (n-major) so the inner loop runs over contiguous k.
    let mut bt = vec![0f32; nn * kk];
    for k in 0..kk {
        for n in 0..nn {
            let at = b + (((k / 16) * n1 + n / 16) * 256 + (n % 16) * 16 + k % 16) * es;
            bt[n * kk + k] = h(l0b, at);
        }
    }
    let esize = out.size() as usize;
    for n in 0..nn {
        let brow = &bt[n * kk..(n + 1) * kk];
        for m in 0..mm {
            let at = c + (((n / 16) * m1 + m / 16) * 256 + (m % 16) * 16 + n % 16) * esize;
            let mut acc = if init {
                0.0f32
            } else {
                load(l0c, at, out) as f32
            };
            let arow = &am[m * kk..(m + 1) * kk];
            for k in 0..kk {
                // f16·f16 is exact in f32, so only the additions round; f32·f32 rounds the
                // product to f32 before the addition (no fused multiply-add).
                acc += arow[k] * brow[k];
            }
            store(l0c, at, out, acc as f64);
        }
    }
}

/// Whether `fast_vector` may run an instruction: every lane active and every operand's blocks
/// contiguous, so each repeat of each operand is one 256-byte slice.
pub(crate) fn contiguous_full(instr: &Instr, ty: DType, mask: (u64, u64), cfg: &VecCfg) -> bool {
    let full = match ty {
        DType::F16 => mask == (u64::MAX, u64::MAX),
        _ => mask.1 == u64::MAX,
    };
    full && ty != DType::I32
        && cfg.blk.iter().all(|&b| b == 1)
        && matches!(
            instr,
            Instr::VBin {
                op: VBinOp::Add
                    | VBinOp::Sub
                    | VBinOp::Mul
                    | VBinOp::Div
                    | VBinOp::Max
                    | VBinOp::Min,
                ..
            } | Instr::VScalar { .. }
                | Instr::VDup { .. }
                | Instr::VUn {
                    op: VUnOp::Abs | VUnOp::Relu,
                    ..
                }
        )
}

fn read_f32s(ub: &[u8], at: usize, ty: DType, out: &mut [f32; 128]) -> usize {
    match ty {
        DType::F16 => {
            let mut h = [f16::ZERO; 128];
            for (o, c) in h.iter_mut().zip(ub[at..at + 256].chunks_exact(2)) {
                *o = f16::from_bits(u16::from_le_bytes([c[0], c[1]]));
            }
            // Batch conversion (SIMD where the CPU has it); exact in this direction.
            h.convert_to_f32_slice(out);
            128
        }
        _ => {
            for (o, c) in out.iter_mut().zip(ub[at..at + 256].chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
            64
        }
    }
}

fn write_f32s(ub: &mut [u8], at: usize, ty: DType, vals: &[f32]) {
    match ty {
        DType::F16 => {
            let mut h = [f16::ZERO; 128];
            // Rounds to nearest even, like `f16::from_f32`.
            h[..vals.len()].convert_from_f32_slice(vals);
            for (c, v) in ub[at..at + 256].chunks_exact_mut(2).zip(&h[..vals.len()]) {
                c.copy_from_slice(&v.to_bits().to_le_bytes());
            }
        }
        _ => {
            for (c, v) in ub[at..at + 256].chunks_exact_mut(4).zip(vals) {
                c.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// The common vector case on whole 256-byte repeats, computing in f32 (exact for f16 results
/// of + − × ÷, see the module docs) without per-lane addressing. Returns false for anything it
/// does not cover, which the caller then runs lane by lane.
pub(crate) fn fast_vector(
    instr: &Instr,
    ty: DType,
    ub: &mut [u8],
    addrs: &[usize],
    cfg: &VecCfg,
    scalar: Option<f64>,
) -> bool {
    let mut x = [0f32; 128];
    let mut y = [0f32; 128];
    let s = scalar.unwrap_or(0.0) as f32;
    for r in 0..cfg.repeat as usize {
        let at = |i: usize| addrs[i] + r * cfg.rep[i] as usize * 32;
        let n = match instr {
            Instr::VBin { op, .. } => {
                let n = read_f32s(ub, at(1), ty, &mut x);
                read_f32s(ub, at(2), ty, &mut y);
                let f: fn(f32, f32) -> f32 = match op {
                    VBinOp::Add => |a, b| a + b,
                    VBinOp::Sub => |a, b| a - b,
                    VBinOp::Mul => |a, b| a * b,
                    VBinOp::Div => |a, b| a / b,
                    VBinOp::Max => f32::max,
                    VBinOp::Min => f32::min,
                    VBinOp::And | VBinOp::Or => return false,
                };
                for (a, b) in x.iter_mut().zip(&y) {
                    *a = f(*a, *b);
                }
                n
            }
            Instr::VScalar { op, .. } => {
                let n = read_f32s(ub, at(1), ty, &mut x);
                for a in x.iter_mut() {
                    *a = match op {
                        VScalarOp::Adds => *a + s,
                        VScalarOp::Muls => *a * s,
                        VScalarOp::Maxs => a.max(s),
                    };
                }
                n
            }
            Instr::VUn { op, .. } => {
                let n = read_f32s(ub, at(1), ty, &mut x);
                for a in x.iter_mut() {
                    *a = match op {
                        VUnOp::Abs => a.abs(),
                        _ if *a > 0.0 => *a,
                        _ => 0.0,
                    };
                }
                n
            }
            Instr::VDup { .. } => {
                x = [s; 128];
                if ty == DType::F16 {
                    128
                } else {
                    64
                }
            }
            _ => return false,
        };
        write_f32s(ub, at(0), ty, &x[..n]);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_rounding_is_nearest_even() {
        // 1 + 2^-11 lies halfway between 1 and the next f16 (1 + 2^-10): ties go to even (1).
        assert_eq!(round_to(1.0 + 2f64.powi(-11), DType::F16), 1.0);
        // 1 + 3·2^-11 is halfway between 1+2^-10 and 1+2^-9: even is 1 + 2^-9.
        assert_eq!(
            round_to(1.0 + 3.0 * 2f64.powi(-11), DType::F16),
            1.0 + 2f64.powi(-9)
        );
        assert_eq!(round_to(70000.0, DType::F16), f64::INFINITY);
        assert_eq!(round_to(2.5, DType::I32), 2.0);
        assert_eq!(round_to(3.5, DType::I32), 4.0);
    }

    #[test]
    fn binary_ops_on_each_type() {
        assert_eq!(binary(VBinOp::Div, DType::I32, 7.0, 0.0), 0.0);
        assert_eq!(
            binary(VBinOp::Add, DType::I32, i32::MAX as f64, 1.0),
            i32::MIN as f64
        );
        assert_eq!(binary(VBinOp::And, DType::I32, 12.0, 10.0), 8.0);
        assert_eq!(binary(VBinOp::Max, DType::F16, -1.0, 2.0), 2.0);
        // and-ing a float with its sign-cleared pattern: 0x7fff & bits(-2.0) = bits(2.0).
        assert_eq!(
            binary(VBinOp::And, DType::F16, -2.0, from_bits(0x7fff, DType::F16)),
            2.0
        );
    }

    #[test]
    fn lane_addresses_follow_block_and_repeat_strides() {
        // f16: 16 lanes per block. Lane 17 is block 1, element 1.
        assert_eq!(lane_addr(0, 0, 17, 2, 1, 8), 32 + 2);
        assert_eq!(lane_addr(0, 0, 17, 2, 2, 8), 64 + 2);
        assert_eq!(lane_addr(0, 2, 0, 4, 1, 16), 2 * 16 * 32);
        assert!(lane_on((0, 1), 0) && !lane_on((0, 1), 1) && lane_on((1, 0), 64));
        assert_eq!(last_lane((0, 0xff), 64), Some(7));
        assert_eq!(last_lane((0, 0), 64), None);
    }
}
