//! The integer types the exact core computes with, and the restart on a wider type.
//!
//! Sets and maps store their constraints as `i64`. Every operation that does arithmetic is
//! generic over [`Int`] and runs first on checked `i64`; when an intermediate value overflows
//! it signals [`Overflow`], and [`widening!`] runs the whole operation again on `i128` and,
//! if that overflows too, on big integers, where nothing overflows. Operations are pure
//! functions of their inputs, so a restart gives the same answer a wider first attempt would
//! have given. Only the answer is narrowed back to `i64` (after dividing every constraint by
//! the gcd of its coefficients): a number of the answer that does not fit is
//! [`Error::TooLarge`](super::Error::TooLarge), the one arithmetic error a caller can see.
//!
//! Invariant of every implementation: the checked operations either return the exact result
//! or `Overflow`, never a wrapped value.

use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{One, Signed, ToPrimitive, Zero};
use std::fmt;
use std::hash::{Hash, Hasher};

use super::Error;

/// An intermediate value did not fit the integer type in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Overflow;

/// Why an internal computation stopped: an overflow (the caller restarts on a wider type) or an
/// error that no width changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fail {
    Overflow,
    Error(Error),
}

impl From<Overflow> for Fail {
    fn from(_: Overflow) -> Fail {
        Fail::Overflow
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::Error(e)
    }
}

/// Outside the exact core (AST generation builds and combines `i64` rows itself) an overflow
/// means a row that cannot be stored.
impl From<Overflow> for Error {
    fn from(_: Overflow) -> Error {
        Error::TooLarge("a constraint coefficient")
    }
}

/// The outcome of the last (big-integer) attempt as a public result. Big integers never
/// overflow; should one report it anyway, the caller gets an error rather than a panic.
pub(crate) fn finish<V>(r: Result<V, Fail>) -> Result<V, Error> {
    r.map_err(|f| match f {
        Fail::Error(e) => e,
        Fail::Overflow => Error::TooLarge("an intermediate value"),
    })
}

/// Runs `$body` (an expression of type `Result<_, Fail>` in which the type name `$t` is an
/// [`Int`]) with `$t = i64`, then `i128`, then `BigInt`, stopping at the first attempt that
/// does not overflow; evaluates to `Result<_, Error>`. The body is a closure body: `?` in it
/// leaves the attempt, not the enclosing function.
macro_rules! widening {
    ($t:ident => $body:expr) => {{
        #[allow(clippy::redundant_closure_call)]
        match (|| {
            type $t = i64;
            $body
        })() {
            Err($crate::sets::int::Fail::Overflow) => match (|| {
                type $t = i128;
                $body
            })() {
                Err($crate::sets::int::Fail::Overflow) => $crate::sets::int::finish((|| {
                    type $t = ::num_bigint::BigInt;
                    $body
                })(
                )),
                r => $crate::sets::int::finish(r),
            },
            r => $crate::sets::int::finish(r),
        }
    }};
}
pub(crate) use widening;

/// An exact integer type: `i64`, `i128` or [`BigInt`].
pub(crate) trait Int: Clone + Ord + Hash + fmt::Debug + Send + Sync + 'static {
    fn from_i64(v: i64) -> Self;
    /// The value as `i64`, `None` when it does not fit.
    fn to_i64(&self) -> Option<i64>;
    fn zero() -> Self {
        Self::from_i64(0)
    }
    fn one() -> Self {
        Self::from_i64(1)
    }
    fn is_zero(&self) -> bool;
    fn is_pos(&self) -> bool;
    fn is_neg(&self) -> bool;
    fn is_one(&self) -> bool;
    /// `|self| = 1`.
    fn is_unit(&self) -> bool;
    fn add(&self, o: &Self) -> Result<Self, Overflow>;
    fn sub(&self, o: &Self) -> Result<Self, Overflow>;
    fn mul(&self, o: &Self) -> Result<Self, Overflow>;
    fn neg(&self) -> Result<Self, Overflow>;
    fn abs(&self) -> Result<Self, Overflow> {
        if self.is_neg() {
            self.neg()
        } else {
            Ok(self.clone())
        }
    }
    /// `self + k` for a small constant.
    fn add_i(&self, k: i64) -> Result<Self, Overflow> {
        self.add(&Self::from_i64(k))
    }
    /// The non-negative gcd; overflows only when it is `|MIN|`.
    fn gcd(&self, o: &Self) -> Result<Self, Overflow>;
    /// `floor(self / d)` for `d > 0`.
    fn div_floor(&self, d: &Self) -> Self;
    /// `self / d` for `d > 0` dividing `self`.
    fn div_exact(&self, d: &Self) -> Self;
    /// `self mod d` in `[0, d)` for `d > 0`.
    fn rem_floor(&self, d: &Self) -> Self;
    /// Whether `self` is the smallest value of a bounded type (whose negation overflows).
    fn is_min(&self) -> bool;
    /// Whether `self = −o`, without overflowing.
    fn is_neg_of(&self, o: &Self) -> bool;
    /// The sign of `self + o`, without overflowing.
    fn sum_sign(&self, o: &Self) -> std::cmp::Ordering;
    fn to_big(&self) -> BigInt;
    /// The big integer as `Self`, or `Overflow` when it does not fit.
    fn from_big(v: &BigInt) -> Result<Self, Overflow>;
    fn signum(&self) -> i32 {
        if self.is_pos() {
            1
        } else if self.is_neg() {
            -1
        } else {
            0
        }
    }
    /// A hash of the value (of its negation with `negated`) for grouping equal rows: equal
    /// values have equal fingerprints, and `x.fingerprint(true) == (−x).fingerprint(false)`
    /// whenever `−x` exists.
    fn fingerprint(&self, negated: bool) -> u64;
}

macro_rules! machine_int {
    ($t:ty, $wide:ty) => {
        impl Int for $t {
            #[inline]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            #[inline]
            fn to_i64(&self) -> Option<i64> {
                i64::try_from(*self).ok()
            }
            #[inline]
            fn zero() -> Self {
                0
            }
            #[inline]
            fn one() -> Self {
                1
            }
            #[inline]
            fn is_zero(&self) -> bool {
                *self == 0
            }
            #[inline]
            fn is_pos(&self) -> bool {
                *self > 0
            }
            #[inline]
            fn is_neg(&self) -> bool {
                *self < 0
            }
            #[inline]
            fn is_one(&self) -> bool {
                *self == 1
            }
            #[inline]
            fn is_unit(&self) -> bool {
                *self == 1 || *self == -1
            }
            #[inline]
            fn add(&self, o: &Self) -> Result<Self, Overflow> {
                self.checked_add(*o).ok_or(Overflow)
            }
            #[inline]
            fn sub(&self, o: &Self) -> Result<Self, Overflow> {
                self.checked_sub(*o).ok_or(Overflow)
            }
            #[inline]
            fn mul(&self, o: &Self) -> Result<Self, Overflow> {
                self.checked_mul(*o).ok_or(Overflow)
            }
            #[inline]
            fn neg(&self) -> Result<Self, Overflow> {
                self.checked_neg().ok_or(Overflow)
            }
            #[inline]
            fn add_i(&self, k: i64) -> Result<Self, Overflow> {
                self.checked_add(k as $t).ok_or(Overflow)
            }
            #[inline]
            fn gcd(&self, o: &Self) -> Result<Self, Overflow> {
                let (mut a, mut b) = (self.unsigned_abs(), o.unsigned_abs());
                while b != 0 {
                    let t = a % b;
                    a = b;
                    b = t;
                }
                <$t>::try_from(a).map_err(|_| Overflow)
            }
            #[inline]
            fn div_floor(&self, d: &Self) -> Self {
                self.div_euclid(*d)
            }
            #[inline]
            fn div_exact(&self, d: &Self) -> Self {
                *self / *d
            }
            #[inline]
            fn rem_floor(&self, d: &Self) -> Self {
                self.rem_euclid(*d)
            }
            #[inline]
            fn is_min(&self) -> bool {
                *self == <$t>::MIN
            }
            #[inline]
            fn is_neg_of(&self, o: &Self) -> bool {
                (*self as $wide) == -(*o as $wide)
            }
            #[inline]
            fn sum_sign(&self, o: &Self) -> std::cmp::Ordering {
                match self.checked_add(*o) {
                    Some(s) => s.cmp(&0),
                    // Only same-signed values overflow, and their sum has their sign.
                    None => self.cmp(&0),
                }
            }
            fn to_big(&self) -> BigInt {
                BigInt::from(*self)
            }
            fn from_big(v: &BigInt) -> Result<Self, Overflow> {
                <$t>::try_from(v).map_err(|_| Overflow)
            }
            #[inline]
            fn fingerprint(&self, negated: bool) -> u64 {
                let v = if negated { self.wrapping_neg() } else { *self };
                (v as u64) ^ ((v as $wide >> 64) as u64).rotate_left(32)
            }
        }
    };
}

machine_int!(i64, i128);
machine_int!(i128, i128);

impl Int for BigInt {
    fn from_i64(v: i64) -> Self {
        BigInt::from(v)
    }
    fn to_i64(&self) -> Option<i64> {
        ToPrimitive::to_i64(self)
    }
    fn is_zero(&self) -> bool {
        Zero::is_zero(self)
    }
    fn is_pos(&self) -> bool {
        self.is_positive()
    }
    fn is_neg(&self) -> bool {
        self.is_negative()
    }
    fn is_one(&self) -> bool {
        One::is_one(self)
    }
    fn is_unit(&self) -> bool {
        One::is_one(self.magnitude())
    }
    fn add(&self, o: &Self) -> Result<Self, Overflow> {
        Ok(self + o)
    }
    fn sub(&self, o: &Self) -> Result<Self, Overflow> {
        Ok(self - o)
    }
    fn mul(&self, o: &Self) -> Result<Self, Overflow> {
        Ok(self * o)
    }
    fn neg(&self) -> Result<Self, Overflow> {
        Ok(-self)
    }
    fn gcd(&self, o: &Self) -> Result<Self, Overflow> {
        Ok(Integer::gcd(self, o))
    }
    fn div_floor(&self, d: &Self) -> Self {
        Integer::div_floor(self, d)
    }
    fn div_exact(&self, d: &Self) -> Self {
        self / d
    }
    fn rem_floor(&self, d: &Self) -> Self {
        Integer::mod_floor(self, d)
    }
    fn is_min(&self) -> bool {
        false
    }
    fn is_neg_of(&self, o: &Self) -> bool {
        Zero::is_zero(&(self + o))
    }
    fn sum_sign(&self, o: &Self) -> std::cmp::Ordering {
        (self + o).sign().cmp(&num_bigint::Sign::NoSign)
    }
    fn to_big(&self) -> BigInt {
        self.clone()
    }
    fn from_big(v: &BigInt) -> Result<Self, Overflow> {
        Ok(v.clone())
    }
    fn fingerprint(&self, negated: bool) -> u64 {
        // Small values hash like the machine types, so the choice of type never matters.
        let v = if negated { -self } else { self.clone() };
        if let Some(x) = ToPrimitive::to_i64(&v) {
            return x as u64 ^ ((x as i128 >> 64) as u64).rotate_left(32);
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        v.hash(&mut h);
        h.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_operations_report_overflow() {
        assert_eq!(i64::MAX.add(&1), Err(Overflow));
        assert_eq!(i64::MIN.neg(), Err(Overflow));
        assert_eq!(Int::gcd(&i64::MIN, &0), Err(Overflow));
        assert_eq!((1i64 << 40).mul(&(1 << 40)), Err(Overflow));
        assert_eq!(
            (1i128 << 40).mul(&(1 << 40)),
            Ok(1i128 << 80),
            "i128 holds the product"
        );
        assert_eq!(i64::MAX.sum_sign(&i64::MAX), std::cmp::Ordering::Greater);
        assert_eq!(i64::MIN.sum_sign(&-1), std::cmp::Ordering::Less);
        assert!(i64::MAX.is_neg_of(&-i64::MAX));
        assert!(!i64::MIN.is_neg_of(&i64::MIN));
    }

    #[test]
    fn fingerprints_agree_across_types() {
        for v in [0i64, 1, -1, 12345, -(1 << 40), i64::MAX] {
            let b = BigInt::from(v);
            assert_eq!(v.fingerprint(false), b.fingerprint(false));
            assert_eq!(v.fingerprint(true), b.fingerprint(true));
            assert_eq!((v as i128).fingerprint(true), b.fingerprint(true));
            assert_eq!(v.fingerprint(true), (-v).fingerprint(false));
        }
    }

    #[test]
    fn floor_division_and_remainder() {
        assert_eq!(Int::div_floor(&-7i64, &2), -4);
        assert_eq!(Int::rem_floor(&-7i64, &2), 1);
        let (a, b) = (BigInt::from(-7), BigInt::from(2));
        assert_eq!(Int::div_floor(&a, &b), BigInt::from(-4));
        assert_eq!(Int::rem_floor(&a, &b), BigInt::from(1));
    }
}
