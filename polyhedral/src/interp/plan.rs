//! What the interpreter precomputes for a program before it runs an instance: per statement, its
//! compiled body, its accesses as affine offsets into flat arrays (over the iterators and, for
//! quasi-affine subscripts, the statement's division variables, computed per instance), its
//! domain and its loop bounds, all with the parameters bound to their values; and a raw view of
//! a [`Memory`].
//!
//! Invariant of [`RawMemory`]: it was made from a memory whose arrays have exactly the
//! program's lengths, and that memory is neither resized nor otherwise touched while the view is
//! in use. Every access goes through [`AccessPlan::checked_offset`] or was proved in bounds for
//! a whole loop by [`AccessPlan::in_bounds`] before it is made.

use std::marker::PhantomData;

use super::code::{self, Code, Env, Fault};
use super::{round, InterpError, Memory};
use crate::program::{
    loop_bounds, Access, AffineExpr, ArrayId, ConstraintKind, Program, ScalarType, Statement,
    StmtId, Var,
};

/// `c + Σ coeffs[d]·iters[d]`: an affine expression with its parameters bound. The variables
/// are the statement's iterators, followed by its division variables when the expression uses
/// them (then it is evaluated at a point holding both, see [`AccessPlan::point`]).
#[derive(Clone, Debug)]
pub(crate) struct Lin {
    pub c: i64,
    pub coeffs: Vec<i64>,
}

impl Lin {
    pub fn new(e: &AffineExpr, depth: usize, params: &[i64]) -> Lin {
        let mut coeffs = vec![0; depth];
        let mut c = e.constant;
        for &(v, k) in e.terms() {
            let at = match v {
                Var::Iter(d) => d,
                Var::Param(p) => {
                    c += k * params[p.index()];
                    continue;
                }
                Var::Div(q) => depth + q,
            };
            if coeffs.len() <= at {
                coeffs.resize(at + 1, 0);
            }
            coeffs[at] += k;
        }
        Lin { c, coeffs }
    }

    #[inline]
    pub fn eval(&self, iters: &[i64]) -> i64 {
        self.c
            + self
                .coeffs
                .iter()
                .zip(iters)
                .map(|(a, x)| a * x)
                .sum::<i64>()
    }

    /// The value with the iterators from `depth` on taken as zero.
    #[inline]
    pub fn eval_outer(&self, iters: &[i64], depth: usize) -> i64 {
        self.c
            + self.coeffs[..depth]
                .iter()
                .zip(iters)
                .map(|(a, x)| a * x)
                .sum::<i64>()
    }

    pub fn coeff(&self, depth: usize) -> i64 {
        self.coeffs.get(depth).copied().unwrap_or(0)
    }

    fn scaled_add(&mut self, other: &Lin, k: i64) {
        self.c += k * other.c;
        if self.coeffs.len() < other.coeffs.len() {
            self.coeffs.resize(other.coeffs.len(), 0);
        }
        for (a, b) in self.coeffs.iter_mut().zip(&other.coeffs) {
            *a += k * b;
        }
    }
}

/// One access: its array, its subscripts, the array's extents and the row-major offset.
#[derive(Clone, Debug)]
pub(crate) struct AccessPlan {
    pub array: usize,
    pub subscripts: Vec<Lin>,
    pub extents: Vec<i64>,
    pub offset: Lin,
    /// The statement's division variables when this access uses one (empty otherwise):
    /// `floor(num / den)`, `num` over the iterators and the divisions before it. Such an
    /// access is evaluated at [`AccessPlan::point`] and never proved in bounds for a loop.
    pub divs: Vec<(Lin, i64)>,
    /// The statement's number of iterators.
    depth: usize,
}

impl AccessPlan {
    fn new(program: &Program, stmt: &Statement, access: &Access, params: &[i64]) -> AccessPlan {
        let depth = stmt.depth();
        let extents = program.array_extents(access.array);
        let subscripts: Vec<Lin> = access
            .subscripts
            .iter()
            .map(|s| Lin::new(s, depth, params))
            .collect();
        let mut offset = Lin::new(&AffineExpr::constant(0), depth, params);
        let mut stride = 1i64;
        for (sub, &n) in subscripts.iter().zip(&extents).rev() {
            offset.scaled_add(sub, stride);
            stride = stride.wrapping_mul(n);
        }
        let divs = if access.subscripts.iter().any(AffineExpr::has_divisions) {
            stmt.divs
                .iter()
                .map(|d| (Lin::new(&d.num, depth, params), d.den))
                .collect()
        } else {
            Vec::new()
        };
        AccessPlan {
            array: access.array.index(),
            subscripts,
            extents,
            offset,
            divs,
            depth,
        }
    }

    /// The iterators followed by the division variables' values, for an access that uses
    /// divisions; the iterators themselves otherwise.
    fn point<'a>(&self, iters: &'a [i64]) -> std::borrow::Cow<'a, [i64]> {
        if self.divs.is_empty() {
            return std::borrow::Cow::Borrowed(iters);
        }
        // The machine's iterators may hold more values than this statement has loops.
        let mut point = iters[..self.depth].to_vec();
        for (num, den) in &self.divs {
            let v = num.eval(&point).div_euclid(*den);
            point.push(v);
        }
        std::borrow::Cow::Owned(point)
    }

    /// Whether the access stays inside the array for every value of the iterator at `depth`
    /// from `lo` to `hi`, the outer iterators as in `iters`. Subscripts without divisions are
    /// affine, so the ends of the range decide; one with divisions is never proved.
    pub fn in_bounds(&self, iters: &[i64], depth: usize, lo: i64, hi: i64) -> bool {
        self.divs.is_empty()
            && self.subscripts.iter().zip(&self.extents).all(|(sub, &n)| {
                let rest = sub.eval_outer(iters, depth);
                let a = sub.coeff(depth);
                let (x, y) = (rest + a * lo, rest + a * hi);
                0 <= x.min(y) && x.max(y) < n
            })
    }

    /// The row-major offset of the access at `iters`, or the error naming the element outside
    /// the array.
    pub fn checked_offset(
        &self,
        program: &Program,
        stmt: &Statement,
        iters: &[i64],
    ) -> Result<usize, InterpError> {
        let point = self.point(iters);
        let mut inside = true;
        for (sub, &n) in self.subscripts.iter().zip(&self.extents) {
            let i = sub.eval(&point);
            inside &= 0 <= i && i < n;
        }
        if inside {
            return Ok(self.offset.eval(&point) as usize);
        }
        let join = |values: Vec<i64>| {
            values
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        Err(InterpError::OutOfBounds {
            stmt: stmt.name.clone(),
            array: program.arrays[self.array].name.clone(),
            index: join(self.subscripts.iter().map(|s| s.eval(&point)).collect()),
            extents: join(self.extents.clone()),
        })
    }
}

/// One constraint of a domain, with the loop-bound form the interpreter needs.
#[derive(Clone, Debug)]
pub(crate) struct Bound {
    pub expr: Lin,
    pub kind: ConstraintKind,
}

impl Bound {
    #[inline]
    pub fn holds(&self, iters: &[i64]) -> bool {
        let v = self.expr.eval(iters);
        match self.kind {
            ConstraintKind::NonNegative => v >= 0,
            ConstraintKind::Zero => v == 0,
        }
    }
}

/// Everything precomputed for one statement.
#[derive(Clone, Debug)]
pub(crate) struct StmtPlan {
    pub code: Code,
    /// The write first, then the reads.
    pub accesses: Vec<AccessPlan>,
    /// The domain's constraints.
    pub domain: Vec<Bound>,
    /// Per depth, the constraints whose innermost iterator it is (the loop's bounds), with
    /// those the inner iterators imply where the domain has none (see [`loop_bounds`]).
    pub bounds: Vec<Vec<Bound>>,
    /// Per depth, the constraints whose innermost iterator is outside it (or that use none).
    pub outer: Vec<Vec<Bound>>,
    pub elem: ScalarType,
    /// Every access stays inside its array at every point of a box that contains the domain:
    /// no run needs to check them.
    pub always_in_bounds: bool,
}

impl StmtPlan {
    fn new(program: &Program, stmt: &Statement, params: &[i64]) -> StmtPlan {
        let depth = stmt.depth();
        let accesses: Vec<AccessPlan> = stmt
            .accesses()
            .map(|(_, a)| AccessPlan::new(program, stmt, a, params))
            .collect();
        let domain: Vec<Bound> = stmt
            .domain
            .iter()
            .map(|c| Bound {
                expr: Lin::new(&c.expr, depth, params),
                kind: c.kind,
            })
            .collect();
        let level = |c: &crate::program::Constraint| c.expr.innermost_iter();
        // With the bounds inner iterators imply on outer ones that have none of their own.
        let looped = loop_bounds(&stmt.domain, depth);
        let bounds = (0..depth)
            .map(|d| {
                looped
                    .iter()
                    .filter(|c| level(c) == Some(d))
                    .map(|c| Bound {
                        expr: Lin::new(&c.expr, depth, params),
                        kind: c.kind,
                    })
                    .collect()
            })
            .collect();
        let outer = (0..depth)
            .map(|d| {
                stmt.domain
                    .iter()
                    .zip(&domain)
                    .filter(|(c, _)| level(c).is_none_or(|l| l < d))
                    .map(|(_, b)| b.clone())
                    .collect()
            })
            .collect();
        let always_in_bounds = match bounding_box(&domain, depth) {
            Some(bx) => accesses.iter().all(|a| {
                a.divs.is_empty()
                    && a.subscripts.iter().zip(&a.extents).all(|(sub, &n)| {
                        let (lo, hi) = range_over(sub, &bx);
                        0 <= lo && hi < n
                    })
            }),
            None => false,
        };
        StmtPlan {
            code: code::compile_statement(program, stmt),
            accesses,
            domain,
            always_in_bounds,
            bounds,
            outer,
            elem: program.array(stmt.write.array).elem,
        }
    }

    /// The statement's own bounds on the iterator at `depth`, the outer ones as in `iters`.
    pub fn bounds_at(
        &self,
        stmt: &Statement,
        iters: &[i64],
        depth: usize,
    ) -> Result<(i64, i64), InterpError> {
        let mut lo: Option<i64> = None;
        let mut hi: Option<i64> = None;
        for b in &self.bounds[depth] {
            // a·x + rest ≥ 0 (or = 0), with x the iterator at `depth` and rest known.
            let a = b.expr.coeff(depth);
            let rest = b.expr.eval_outer(iters, depth);
            let zero = b.kind == ConstraintKind::Zero;
            if a > 0 || zero {
                let v = if a > 0 {
                    div_ceil(-rest, a)
                } else {
                    div_ceil(rest, -a)
                };
                lo = Some(lo.map_or(v, |l| l.max(v)));
            }
            if a < 0 || zero {
                let v = if a < 0 {
                    div_floor(rest, -a)
                } else {
                    div_floor(-rest, a)
                };
                hi = Some(hi.map_or(v, |h| h.min(v)));
            }
        }
        let missing = |which| InterpError::Unbounded {
            stmt: stmt.name.clone(),
            iter: stmt.iterators[depth].clone(),
            which,
        };
        Ok((
            lo.ok_or_else(|| missing("lower"))?,
            hi.ok_or_else(|| missing("upper"))?,
        ))
    }
}

/// Interval bounds of every iterator over a domain, by propagating its constraints to a fixed
/// point: a box that contains the domain. `None` when some iterator is unbounded, the domain is
/// found empty, or the bounds grow too large to compute with safely.
fn bounding_box(domain: &[Bound], depth: usize) -> Option<Vec<(i64, i64)>> {
    const LIMIT: i128 = 1 << 40;
    let mut bx: Vec<(Option<i128>, Option<i128>)> = vec![(None, None); depth];
    for _ in 0..16 {
        let mut changed = false;
        for b in domain {
            // Both directions for an equality.
            let signs: &[i128] = match b.kind {
                ConstraintKind::NonNegative => &[1],
                ConstraintKind::Zero => &[1, -1],
            };
            for &sign in signs {
                for j in 0..depth {
                    let a = sign * b.expr.coeffs[j] as i128;
                    if a == 0 {
                        continue;
                    }
                    // The largest value of the rest of the row.
                    let mut rest = Some(sign * b.expr.c as i128);
                    for (k, &c) in b.expr.coeffs.iter().enumerate() {
                        let c = sign * c as i128;
                        if k == j || c == 0 {
                            continue;
                        }
                        let end = if c > 0 { bx[k].1 } else { bx[k].0 };
                        rest = rest.zip(end).map(|(r, e)| r + c * e);
                    }
                    let Some(rest) = rest else { continue };
                    if a > 0 {
                        let lo = -(rest.div_euclid(a));
                        if bx[j].0.is_none_or(|l| lo > l) {
                            bx[j].0 = Some(lo);
                            changed = true;
                        }
                    } else {
                        let hi = rest.div_euclid(-a);
                        if bx[j].1.is_none_or(|h| hi < h) {
                            bx[j].1 = Some(hi);
                            changed = true;
                        }
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    bx.iter()
        .map(|&(lo, hi)| match (lo, hi) {
            (Some(l), Some(h)) if l <= h && l.abs() < LIMIT && h.abs() < LIMIT => {
                Some((l as i64, h as i64))
            }
            _ => None,
        })
        .collect()
}

/// The smallest and largest values of `e` over the box `bx`.
fn range_over(e: &Lin, bx: &[(i64, i64)]) -> (i64, i64) {
    let (mut lo, mut hi) = (e.c, e.c);
    for (&a, &(l, h)) in e.coeffs.iter().zip(bx) {
        let (x, y) = (a * l, a * h);
        lo += x.min(y);
        hi += x.max(y);
    }
    (lo, hi)
}

fn div_floor(a: i64, b: i64) -> i64 {
    a.div_euclid(b)
}

fn div_ceil(a: i64, b: i64) -> i64 {
    -((-a).div_euclid(b))
}

/// A program's compiled statements and functions.
#[derive(Clone, Debug)]
pub(crate) struct Compiled {
    pub plans: Vec<StmtPlan>,
    pub functions: Vec<Code>,
}

impl Compiled {
    pub fn new(program: &Program) -> Compiled {
        let params = program.param_values();
        Compiled {
            plans: program
                .statements
                .iter()
                .map(|s| StmtPlan::new(program, s, &params))
                .collect(),
            functions: program
                .functions
                .iter()
                .map(|f| code::compile_function(program, f))
                .collect(),
        }
    }
}

/// The registers one thread runs with: a frame per statement and per function.
#[derive(Clone, Debug)]
pub(crate) struct Frames {
    pub statements: Vec<Vec<f64>>,
    pub functions: Vec<Vec<f64>>,
}

impl Frames {
    pub fn new(compiled: &Compiled) -> Frames {
        Frames {
            statements: compiled
                .plans
                .iter()
                .map(|p| p.code.frame.clone())
                .collect(),
            functions: compiled.functions.iter().map(|f| f.frame.clone()).collect(),
        }
    }
}

/// Base pointers of a memory's arrays; see the module docs for when it may be used.
pub(crate) struct RawMemory<'m> {
    pub bases: Vec<*mut f64>,
    _memory: PhantomData<&'m mut Memory>,
}

// SAFETY: threads share a `RawMemory` only to run iterations of a loop that dependence
// analysis proved parallel: no element one iteration writes is read or written by another.
unsafe impl Send for RawMemory<'_> {}
unsafe impl Sync for RawMemory<'_> {}

impl<'m> RawMemory<'m> {
    /// A view of `memory`, once its arrays are checked to have the program's lengths.
    pub fn new(program: &Program, memory: &'m mut Memory) -> Result<RawMemory<'m>, InterpError> {
        if memory.arrays.len() != program.arrays.len() {
            return Err(InterpError::BadMemory(format!(
                "{} arrays given for {} in the program",
                memory.arrays.len(),
                program.arrays.len()
            )));
        }
        for (k, a) in memory.arrays.iter().enumerate() {
            let expected = program.array_len(ArrayId(k as u32));
            if a.len() != expected {
                return Err(InterpError::BadMemory(format!(
                    "`{}` has {} elements, not {expected}",
                    program.arrays[k].name,
                    a.len()
                )));
            }
        }
        Ok(RawMemory {
            bases: memory.arrays.iter_mut().map(|a| a.as_mut_ptr()).collect(),
            _memory: PhantomData,
        })
    }

    /// # Safety
    /// `offset` is inside array `array` (see the module docs).
    #[inline]
    pub unsafe fn read(&self, array: usize, offset: usize) -> f64 {
        *self.bases[array].add(offset)
    }

    /// # Safety
    /// `start..start + len` is inside array `array`, and no other thread writes it meanwhile.
    #[inline]
    pub unsafe fn slice(&self, array: usize, start: usize, len: usize) -> &[f64] {
        std::slice::from_raw_parts(self.bases[array].add(start), len)
    }

    /// # Safety
    /// As [`RawMemory::read`], and no other thread touches the element.
    #[inline]
    pub unsafe fn write(&self, array: usize, offset: usize, value: f64) {
        *self.bases[array].add(offset) = value;
    }
}

/// Loads of an instance whose every access is checked as it is made.
struct CheckedEnv<'a> {
    program: &'a Program,
    stmt: &'a Statement,
    plan: &'a StmtPlan,
    iters: &'a [i64],
    memory: &'a RawMemory<'a>,
}

impl Env for CheckedEnv<'_> {
    #[inline]
    fn iter(&self, depth: usize) -> i64 {
        self.iters[depth]
    }

    fn load(&mut self, read: usize) -> Result<f64, Fault> {
        let access = &self.plan.accesses[read + 1];
        let offset = access
            .checked_offset(self.program, self.stmt, self.iters)
            .map_err(|e| Fault::Load(Box::new(e)))?;
        // SAFETY: `checked_offset` checked every subscript against its extent.
        Ok(unsafe { self.memory.read(access.array, offset) })
    }
}

/// Executes one instance of statement `id` at `iters`, checking every access; the domain is
/// the caller's to check.
pub(crate) fn execute_checked(
    program: &Program,
    compiled: &Compiled,
    frames: &mut Frames,
    memory: &RawMemory,
    id: StmtId,
    iters: &[i64],
) -> Result<(), InterpError> {
    let stmt = &program.statements[id.index()];
    let plan = &compiled.plans[id.index()];
    let mut env = CheckedEnv {
        program,
        stmt,
        plan,
        iters,
        memory,
    };
    let value = code::execute(
        &plan.code,
        None,
        &mut frames.statements[id.index()],
        &mut env,
        &compiled.functions,
        &mut frames.functions,
    )
    .map_err(|f| f.into_error(program, stmt))?;
    let write = &plan.accesses[0];
    let offset = write.checked_offset(program, stmt, iters)?;
    // SAFETY: checked just above; the caller runs this instance on one thread only.
    unsafe { memory.write(write.array, offset, round(plan.elem, value)) };
    Ok(())
}

/// Runs single statement instances, as the AST interpreter needs: each is checked against its
/// statement's domain, then executed with every access checked.
pub(crate) struct InstanceRunner<'p, 'm> {
    program: &'p Program,
    compiled: Compiled,
    frames: Frames,
    memory: RawMemory<'m>,
}

impl<'p, 'm> InstanceRunner<'p, 'm> {
    pub fn new(
        program: &'p Program,
        memory: &'m mut Memory,
    ) -> Result<InstanceRunner<'p, 'm>, InterpError> {
        let compiled = Compiled::new(program);
        let frames = Frames::new(&compiled);
        Ok(InstanceRunner {
            program,
            frames,
            memory: RawMemory::new(program, memory)?,
            compiled,
        })
    }

    /// Whether `iters` is a point of statement `id`'s domain.
    pub fn in_domain(&self, id: StmtId, iters: &[i64]) -> bool {
        self.compiled.plans[id.index()]
            .domain
            .iter()
            .all(|b| b.holds(iters))
    }

    pub fn execute(&mut self, id: StmtId, iters: &[i64]) -> Result<(), InterpError> {
        execute_checked(
            self.program,
            &self.compiled,
            &mut self.frames,
            &self.memory,
            id,
            iters,
        )
    }
}
