//! The reference interpreter: runs a [`Program`] in its original order.
//!
//! It is the oracle every target is checked against. Statement instances run one at a time, in
//! the order of the 2d+1 original schedule, and no access ever leaves its array: an access
//! outside is an error. Bodies and scalar functions are compiled once into register code over
//! flat arrays ([`code`]), accesses into affine offsets ([`plan`]), and the loop nest runs over
//! them ([`engine`]), with loops that dependence analysis proves parallel optionally on several
//! threads. [`run_tree_walker`] is the first, tree-walking evaluator, kept as the oracle the
//! compiled one is tested against bit for bit.
//!
//! Values are held as `f64` and rounded to their expression's type after every operation. For
//! `+ - * /` and `sqrt` this gives exactly the result of computing in the narrower type, because
//! `f64` has more than twice the precision of `f32` and `f16` plus two bits; `f16` rounding is
//! round-to-nearest-even (the `half` crate). `i32` arithmetic wraps as two's complement; integer
//! division truncates, as in C.

mod batch;
pub(crate) mod code;
mod engine;
mod plan;
#[cfg(test)]
mod tests;
mod walk;

pub use engine::{run, run_with, RunOptions};
pub(crate) use plan::InstanceRunner;
pub use walk::run_tree_walker;

use crate::program::{ArrayId, ArrayRole, NestError, Program, ScalarType};

/// The contents of every array of a program, indexed by [`ArrayId`], row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Memory {
    pub arrays: Vec<Vec<f64>>,
}

impl Memory {
    pub fn array(&self, id: ArrayId) -> &[f64] {
        &self.arrays[id.index()]
    }
}

/// The most statement instances one run of the interpreter begins: at its fastest (a few
/// hundred million instances a second on two cores) about a minute and a half, well above
/// PolyBench's LARGE datasets (floyd-warshall's 2.2·10¹⁰).
pub const MAX_INSTANCES: u64 = 1 << 35;

/// Why a run stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InterpError {
    #[error("{stmt} accesses {array}[{index}] outside its extents [{extents}]")]
    OutOfBounds {
        stmt: String,
        array: String,
        index: String,
        extents: String,
    },
    #[error("{stmt} divides an integer by zero")]
    DivisionByZero { stmt: String },
    #[error("the loop over `{iter}` around {stmt} has no {which} bound")]
    Unbounded {
        stmt: String,
        iter: String,
        which: &'static str,
    },
    #[error("function `{function}` ran more than {limit} loop iterations in one call")]
    NonTerminating { function: String, limit: u64 },
    #[error(
        "the kernel runs more than {limit} statement instances, the interpreter's budget; run it \
         with smaller `--size` values"
    )]
    InstanceBudget { limit: u64 },
    #[error("the statements' positions do not form a loop nest ({0})")]
    BadPositions(String),
    #[error("invalid AST: {0}")]
    InvalidAst(String),
    #[error("the AST executes {stmt}[{point}], which is outside its domain")]
    OutsideDomain { stmt: String, point: String },
    #[error("the memory does not fit the program: {0}")]
    BadMemory(String),
}

impl From<NestError> for InterpError {
    fn from(e: NestError) -> InterpError {
        InterpError::BadPositions(e.0)
    }
}

/// The bytes a [`Memory`] for `program` takes (every element is held as an `f64`), or `None`
/// when the count does not fit in 64 bits.
pub fn memory_bytes(program: &Program) -> Option<u64> {
    let mut total = 0u64;
    for k in 0..program.arrays.len() {
        let mut bytes = std::mem::size_of::<f64>() as u64;
        for e in program.array_extents(ArrayId(k as u32)) {
            bytes = bytes.checked_mul(e.max(0) as u64)?;
        }
        total = total.checked_add(bytes)?;
    }
    Some(total)
}

/// Deterministic pseudo-random contents for every array that is not a temporary; temporaries
/// start as zeros.
///
/// The value of an element depends only on the seed, the array's name and element type, and the
/// element's flat index ([`prng::input_bits`]), so two programs with the same arrays (say, a `.pf` kernel and its C
/// version) get the same inputs whatever order they declare them in. Floats are uniform in
/// [-1, 1) rounded to the element type; `i32`s are uniform in [-16, 16).
pub fn random_inputs(program: &Program, seed: u64) -> Memory {
    let arrays = program
        .arrays
        .iter()
        .enumerate()
        .map(|(k, a)| {
            let len = program.array_len(ArrayId(k as u32));
            if a.role == ArrayRole::Temporary {
                return vec![0.0; len];
            }
            (0..len as u64)
                .map(|i| {
                    let bits = prng::input_bits(seed, &a.name, i);
                    match a.elem {
                        ScalarType::I32 => prng::input_int(bits) as f64,
                        ty => round(ty, prng::input_unit(bits)),
                    }
                })
                .collect()
        })
        .collect();
    Memory { arrays }
}

/// Rounds `x` to the nearest value of type `ty` (integers wrap to 32 bits; booleans are 0/1).
pub fn round(ty: ScalarType, x: f64) -> f64 {
    match ty {
        ScalarType::F64 => x,
        ScalarType::F32 => x as f32 as f64,
        ScalarType::F16 => round_f16(x),
        ScalarType::I32 => wrap_i32(x as i64),
        ScalarType::Bool => (x != 0.0) as u8 as f64,
    }
}

/// Round-to-nearest-even to `f16`, computed in `f64`: scaling by a power of two and rounding to
/// an integer are exact, so this is the correctly rounded result (`half`'s software conversion
/// gives the same, several times slower; a test compares them).
fn round_f16(x: f64) -> f64 {
    /// The smallest normal `f16`, 2^-14.
    const MIN_NORMAL: f64 = 6.103_515_625e-5;
    /// Halfway between the largest finite `f16` (65504) and the next power of two: from here on,
    /// values round to infinity.
    const OVERFLOW: f64 = 65520.0;
    if !x.is_finite() {
        return x;
    }
    let a = x.abs();
    if a >= OVERFLOW {
        return f64::INFINITY.copysign(x);
    }
    let exponent = if a < MIN_NORMAL {
        -14
    } else {
        ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023
    };
    let ulp = f64::powi(2.0, exponent - 10);
    (x / ulp).round_ties_even() * ulp
}

pub(crate) fn wrap_i32(x: i64) -> f64 {
    x as i32 as f64
}

/// Counts of what a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Statement instances executed.
    pub instances: u64,
}
