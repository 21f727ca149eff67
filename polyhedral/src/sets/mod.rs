//! Exact integer sets and maps (Presburger arithmetic without universal quantifiers), with
//! isl's semantics and notation.
//!
//! A [`Set`] is a finite union of conjunctions of affine constraints over the integer points
//! of named tuples (`S[i, j]`), with symbolic parameters and existentially quantified locals
//! (which express integer division and congruences). A [`Map`] relates points of one tuple to
//! points of another (`S[i] -> A[i + 1]`). Like isl's union types, one object may hold pieces
//! in several spaces; operations pair up pieces of matching spaces, and parameters are matched
//! by name.
//!
//! Every answer is exact over the integers: emptiness, subtraction, lexicographic optima and
//! bounds use Pugh's Omega test (exact Fourier–Motzkin with dark shadows and splinters,
//! symmetric-modulo equality elimination). Constraints are stored as `i64`; the arithmetic is
//! checked, and an operation whose intermediate values outgrow `i64` is run again on `i128`
//! and then on big integers, so the size of intermediate numbers never changes an answer
//! or makes an operation fail. Only an answer that itself needs a number beyond `i64` (a
//! coefficient, a bound, a coordinate) is an error, [`Error::TooLarge`].
//!
//! ```
//! use polyhedral::sets::{Map, Set};
//!
//! // Exact integer emptiness: no integer x has 1 ≤ 3x ≤ 2.
//! let s: Set = "{ [x] : 1 <= 3x <= 2 }".parse().unwrap();
//! assert!(s.is_empty().unwrap());
//!
//! // Image of a set under a map, and subtraction.
//! let d: Set = "[N] -> { S[i] : 0 <= i < N }".parse().unwrap();
//! let m: Map = "{ S[i] -> A[i + 1] }".parse().unwrap();
//! let img = d.apply(&m);
//! let expect: Set = "[N] -> { A[a] : 1 <= a <= N }".parse().unwrap();
//! assert!(img.is_equal(&expect).unwrap());
//!
//! // Lexicographic minimum per domain point (last-writer style questions).
//! let m: Map = "{ [i] -> [j] : i <= j < 10 and j mod 3 = 0 }".parse().unwrap();
//! let lm = m.lexmin().unwrap();
//! assert!(lm.contains(&[4], &[6]).unwrap());
//! assert!(!lm.contains(&[4], &[9]).unwrap());
//! ```
//!
//! Invariants: every piece's constraint rows have one column per parameter, tuple dimension
//! and local; pieces of one object share the parameter list; nothing here panics on user
//! input (malformed notation is a [`ParseError`] with a byte offset).

mod bounds;
pub(crate) mod conj;
pub(crate) mod int;
mod map;
pub(crate) mod omega;
mod parse;
mod print;
pub(crate) mod rel;
mod set;
mod space;

pub use map::{Map, Pair};
pub use parse::ParseError;
pub use set::{DimRange, Set};
pub use space::Tuple;

/// What can go wrong in a set operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A number of the answer (named by the message: a constraint coefficient, a bound, a
    /// coordinate) does not fit in 64 bits, the width sets and maps store. Intermediate values
    /// never cause it: they are computed on wider integers when needed.
    #[error("{0} of the result does not fit in 64 bits")]
    TooLarge(&'static str),
    /// The operation needs a bounded set (enumeration, a finite optimum) and got an unbounded one.
    #[error("the set is unbounded")]
    Unbounded,
    /// The operation is not defined for the objects' spaces.
    #[error("space mismatch: {0}")]
    Space(String),
    /// The operation needs an object without parameters.
    #[error("{0} is not supported on objects with parameters")]
    Parametric(&'static str),
}
