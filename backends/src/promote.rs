//! Memory promotion on a kernel's loops: which footprints go to workgroup memory and which
//! accumulators to registers on the GPU, and which temporaries live in one tile of a parallel
//! loop on the CPU.
//!
//! - **Tile-local temporaries** (CPU). A temporary all of whose accesses lie in the body of one
//!   parallel loop (a tile loop, after post-tiling fusion pulled the producers in), itself
//!   inside parallel loops only, is a value no iteration passes to another: none of those
//!   loops carries a dependence. It gets a zeroed array of its box in that body instead of a
//!   global buffer.
//!   The box of a temporary is computed per access ([`Region::enclosing_box`]): each
//!   subscript's range over the loops that enclose that access inside the body (their bounds
//!   may use loops further out in the body, and several loops may bind one variable with
//!   different bounds), as a lowest value (an affine form of the loops outside the body) and
//!   a constant width; the box is the rectangular hull of the accesses' ranges. On the GPU,
//!   a temporary all of whose accesses lie in one kernel's body below its grid loops (one
//!   tile per workgroup) gets such a box in workgroup memory the same way.
//! - **Workgroup tiles.** For one thread region (the loops under a `thread` mark, entered by
//!   every invocation of the group in uniform control flow), each array the kernel only reads
//!   and the region reads with reuse (some loop of the region that its subscripts do not use)
//!   gets the box of its accesses: per dimension, the lowest subscript over the region's loop
//!   ranges (an expression of the loops outside the region) and a constant extent, the largest
//!   the region's tiles can reach. The box is copied in cooperatively before the region and
//!   read there instead of global memory. An array the region writes is promoted the same way
//!   when its accesses have more than one subscript (a single one is a register's, below):
//!   every store into the box also sets the element's bit in a bit set beside it, and after
//!   the region exactly the elements whose bit is set are written back — never an element the
//!   group did not write, which another group may own. The loops mapped to groups and to
//!   invocations carry no dependence, so no other group or invocation reads or writes those
//!   elements meanwhile. Arrays the kernel writes only outside the region are not copied.
//!   Boxes are taken in the order the arrays are first accessed while they fit the workgroup
//!   memory left (a written box with its bit set).
//! - **Registers.** A sequential loop run by one invocation whose body accesses an array it
//!   writes at a single subscript that does not change inside the loop (gemm's `C[i][j]` in
//!   the `k` loop) keeps that element in a function-scope variable: loaded before the loop,
//!   stored after it, only when the loop runs at least once. Every access in the loop has
//!   that subscript, and no other invocation touches the element while the loop runs (the
//!   loops mapped to invocations carry no dependence), so the result is the same.
//!
//! Subscripts must be affine in the loop variables (no floor division of a region loop) and
//! loop bounds must not depend on other loops of the region, or the array is not promoted.
//!
//! - **Packed boxes** (CPU, [`Region::covering_box`]). A packed buffer needs a box that
//!   contains every element its region reaches, not the exact hull: where the hull above has
//!   no constant width (a triangle's bound on a loop of the region, a tile loop whose bounds
//!   are floor divisions), loops the subscripts do not use are ignored, and a dimension whose
//!   range is still unknown is the array's whole extent. The copies move only the elements of
//!   the box that exist, so the box may hold elements the region never touches.

use std::collections::{BTreeMap, BTreeSet};

use polyhedral::ast::{Ast, AstExpr};
use polyhedral::program::{ArrayId, ArrayRole, Program};

use crate::loops::{accesses, evaluate, expr_vars, Linear};

/// An access of a region with the loops that enclose it there: (array, subscripts, is the
/// write, the enclosing loops outermost first as (variable, lower, upper)).
type Enclosed = (ArrayId, Vec<AstExpr>, bool, Vec<(String, AstExpr, AstExpr)>);

fn enclosed_accesses(program: &Program, ast: &Ast) -> Vec<Enclosed> {
    fn rec(
        program: &Program,
        ast: &Ast,
        loops: &mut Vec<(String, AstExpr, AstExpr)>,
        out: &mut Vec<Enclosed>,
    ) {
        match ast {
            Ast::Block(items) => items.iter().for_each(|a| rec(program, a, loops, out)),
            Ast::For {
                var,
                lower,
                upper,
                body,
                ..
            } => {
                loops.push((var.clone(), lower.clone(), upper.clone()));
                rec(program, body, loops, out);
                loops.pop();
            }
            Ast::Mark { body, .. } => rec(program, body, loops, out),
            Ast::If {
                then, otherwise, ..
            } => {
                rec(program, then, loops, out);
                if let Some(o) = otherwise {
                    rec(program, o, loops, out);
                }
            }
            Ast::User { .. } => {
                for (a, subs, w) in accesses(program, ast) {
                    out.push((a, subs, w, loops.clone()));
                }
            }
        }
    }
    let mut out = Vec::new();
    rec(program, ast, &mut Vec::new(), &mut out);
    out
}

/// A range `[lo, lo + width]` whose lowest value is an affine form of outer loops.
#[derive(Clone, Debug)]
struct Span {
    lo: Linear,
    width: i64,
}

impl Linear {
    /// `e` as an affine form with the parameters (at `values`) and the variables of `fixed`
    /// folded into the constant; a part without variables left is evaluated whole.
    fn folded(
        e: &AstExpr,
        values: Option<&[i64]>,
        fixed: &BTreeMap<String, i64>,
    ) -> Option<Linear> {
        if let Some(v) = evaluate(e, values, fixed) {
            return Some(Linear {
                constant: v,
                ..Linear::default()
            });
        }
        let mut l = Linear::of(e)?;
        if let Some(values) = values {
            for (p, c) in std::mem::take(&mut l.params) {
                l.constant += c * values[p as usize];
            }
        }
        let vars = std::mem::take(&mut l.vars);
        for (v, c) in vars {
            match fixed.get(&v) {
                Some(x) => l.constant += c * x,
                None => {
                    l.vars.insert(v, c);
                }
            }
        }
        Some(l)
    }

    fn add_scaled(&mut self, other: &Linear, k: i64) {
        for (v, c) in &other.vars {
            *self.vars.entry(v.clone()).or_default() += k * c;
        }
        for (p, c) in &other.params {
            *self.params.entry(*p).or_default() += k * c;
        }
        self.constant += k * other.constant;
        self.vars.retain(|_, c| *c != 0);
        self.params.retain(|_, c| *c != 0);
    }

    /// The range of the form when the variables of `env` range over their spans.
    fn span(&self, env: &BTreeMap<String, Span>) -> Span {
        let mut lo = Linear {
            vars: BTreeMap::new(),
            params: self.params.clone(),
            constant: self.constant,
        };
        let mut width = 0;
        for (v, c) in &self.vars {
            match env.get(v) {
                Some(s) => {
                    lo.add_scaled(&s.lo, *c);
                    if *c < 0 {
                        lo.constant += c * s.width;
                    }
                    width += c.abs() * s.width;
                }
                None => {
                    *lo.vars.entry(v.clone()).or_default() += c;
                }
            }
        }
        Span { lo, width }
    }
}

/// The ranges of the loop variables of one access, innermost last; `None` when a loop's trip
/// count has no constant bound, `Some(None)` when a loop never runs. With `partial`, a loop
/// whose trip count has no constant bound is left out of the ranges instead (an expression
/// over its variable then keeps the variable: its range is unknown).
fn loop_spans(
    loops: &[(String, AstExpr, AstExpr)],
    values: Option<&[i64]>,
    fixed: &BTreeMap<String, i64>,
    partial: bool,
) -> Option<Option<BTreeMap<String, Span>>> {
    let mut env: BTreeMap<String, Span> = BTreeMap::new();
    for (v, lower, upper) in loops {
        let (lows, highs) = (max_terms(lower), min_terms(upper));
        let lows: Vec<Span> = lows
            .iter()
            .filter_map(|l| Some(Linear::folded(l, values, fixed)?.span(&env)))
            .collect();
        let highs: Vec<Span> = highs
            .iter()
            .filter_map(|h| Some(Linear::folded(h, values, fixed)?.span(&env)))
            .collect();
        let mut best: Option<(Linear, i64)> = None;
        for l in &lows {
            for h in &highs {
                let mut d = h.lo.minus(&l.lo);
                d.constant += h.width;
                if d.is_constant() && best.as_ref().is_none_or(|(_, w)| d.constant < *w) {
                    best = Some((l.lo.clone(), d.constant));
                }
            }
        }
        let Some((lo, width)) = best else {
            if partial {
                continue;
            }
            return None;
        };
        if width < 0 {
            return Some(None);
        }
        env.insert(v.clone(), Span { lo, width });
    }
    Some(Some(env))
}

/// A box of an array copied to workgroup memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SharedTile {
    pub array: ArrayId,
    /// Per dimension, the lowest subscript, over the loops outside the region.
    pub lower: Vec<AstExpr>,
    /// Per dimension, the number of elements.
    pub extent: Vec<i64>,
    /// Whether the region writes the array (the box is written back after it).
    pub written: bool,
}

impl SharedTile {
    pub(crate) fn len(&self) -> i64 {
        self.extent.iter().product()
    }

    /// The 32-bit words of the bit set of written elements.
    pub(crate) fn flag_words(&self) -> i64 {
        (self.len() + 31) / 32
    }
}

/// The loop ranges of the region: variable → (lower, upper); `None` when a variable is bound
/// by several loops with different bounds.
type Ranges = BTreeMap<String, Option<(AstExpr, AstExpr)>>;

fn ranges(ast: &Ast) -> Ranges {
    let mut out: Ranges = BTreeMap::new();
    ast.walk(&mut |a| {
        if let Ast::For {
            var, lower, upper, ..
        } = a
        {
            let r = (lower.clone(), upper.clone());
            match out.get(var) {
                Some(Some(old)) if *old != r => {
                    out.insert(var.clone(), None);
                }
                Some(_) => {}
                None => {
                    out.insert(var.clone(), Some(r));
                }
            }
        }
    });
    out
}

/// The terms of a lower bound (the items of a `max`).
fn max_terms(e: &AstExpr) -> Vec<&AstExpr> {
    match e {
        AstExpr::Max(items) => items.iter().collect(),
        e => vec![e],
    }
}

/// The terms of an upper bound (the items of a `min`).
fn min_terms(e: &AstExpr) -> Vec<&AstExpr> {
    match e {
        AstExpr::Min(items) => items.iter().collect(),
        e => vec![e],
    }
}

/// A constant bound on `upper - lower + 1` when a pair of their min / max terms differ by a
/// constant.
fn trip_bound(lower: &AstExpr, upper: &AstExpr, params: Option<&[i64]>) -> Option<i64> {
    let (lows, highs) = (max_terms(lower), min_terms(upper));
    let mut best: Option<i64> = None;
    for h in &highs {
        for l in &lows {
            if let (Some(h), Some(l)) = (Linear::of(h), Linear::of(l)) {
                let mut d = h.minus(&l);
                if let Some(values) = params.filter(|_| d.vars.is_empty()) {
                    d.constant += d
                        .params
                        .iter()
                        .map(|(p, c)| c * values[*p as usize])
                        .sum::<i64>();
                    d.params.clear();
                }
                if d.is_constant() {
                    let t = (d.constant + 1).max(0);
                    best = Some(best.map_or(t, |b| b.min(t)));
                }
            }
        }
    }
    best
}

/// The loops of a region and its accesses, from which the boxes of arrays are computed.
pub(crate) struct Region {
    /// Every variable a loop of the region binds.
    inner: BTreeSet<String>,
    /// Per region variable whose bounds use outer variables only: its bounds and a constant
    /// bound on its trip count.
    info: BTreeMap<String, (AstExpr, AstExpr, i64)>,
    /// Every access of the region's statements: (array, subscripts, is the write).
    pub(crate) all: Vec<(ArrayId, Vec<AstExpr>, bool)>,
    /// Every access with the loops enclosing it in the region.
    enclosed: Vec<Enclosed>,
    /// The parameters' values, when trip counts may use them.
    values: Option<Vec<i64>>,
}

impl Region {
    /// The region's loops and accesses; with `fold_params`, trip counts may depend on the
    /// program's parameters, taken at their values.
    pub(crate) fn new(program: &Program, region: &Ast, fold_params: bool) -> Region {
        let values = program.param_values();
        let params = fold_params.then_some(values.as_slice());
        let ranges = ranges(region);
        let inner: BTreeSet<String> = ranges.keys().cloned().collect();
        let mut info = BTreeMap::new();
        for (v, r) in &ranges {
            let Some((lo, hi)) = r else { continue };
            let mut used = BTreeSet::new();
            expr_vars(lo, &mut used);
            expr_vars(hi, &mut used);
            if used.iter().any(|u| inner.contains(u)) {
                continue;
            }
            if let Some(t) = trip_bound(lo, hi, params) {
                info.insert(v.clone(), (lo.clone(), hi.clone(), t));
            }
        }
        Region {
            inner,
            info,
            all: accesses(program, region),
            enclosed: enclosed_accesses(program, region),
            values: fold_params.then_some(values),
        }
    }

    /// The temporaries (not scalars) all of whose accesses (`totals` counts those of the whole
    /// kernel) are in the region, with their boxes ([`Region::enclosing_box`]), in the order
    /// of the arrays.
    pub(crate) fn tile_local_boxes(
        &self,
        program: &Program,
        totals: &BTreeMap<ArrayId, usize>,
        fixed: &BTreeMap<String, i64>,
    ) -> Vec<(ArrayId, Vec<AstExpr>, Vec<i64>)> {
        let mut counts: BTreeMap<ArrayId, usize> = BTreeMap::new();
        for (a, _, _) in &self.all {
            *counts.entry(*a).or_default() += 1;
        }
        counts
            .into_iter()
            .filter(|(a, n)| {
                let array = program.array(*a);
                array.role == ArrayRole::Temporary
                    && !array.shape.is_empty()
                    && totals.get(a) == Some(n)
            })
            .filter_map(|(a, _)| {
                let (lower, extent) = self.enclosing_box(program, a, fixed)?;
                Some((a, lower, extent))
            })
            .collect()
    }

    /// The rectangular hull of the ranges of every access of `array`, each over the loops that
    /// enclose it (see the module docs), with the variables of `fixed` (outer loops of one
    /// iteration) at their values: per dimension, the lowest subscript (an expression of the
    /// loops outside the region) and a constant extent.
    pub(crate) fn enclosing_box(
        &self,
        program: &Program,
        array: ArrayId,
        fixed: &BTreeMap<String, i64>,
    ) -> Option<(Vec<AstExpr>, Vec<i64>)> {
        self.hull(program, array, fixed, None, &|_| true)
    }

    /// A box that contains every element of `array` the region reaches, for copies that move
    /// exactly the elements of the box that exist: [`Region::enclosing_box`] where it is
    /// defined; otherwise, a loop whose bounds depend on loops of the region (a triangle, a
    /// tile below the region's top) contributes the hull of its range over theirs, a loop the
    /// subscripts do not use needs no range at all, and a dimension whose range still has no
    /// lowest value outside the region or no constant width is the array's whole extent
    /// (when that is a constant and `whole` allows it: not for a box inside a parallel loop,
    /// which must stay within the part of the array that loop's iteration owns). The box may
    /// hold elements the region never touches; a written box copied back returns them
    /// unchanged.
    pub(crate) fn covering_box(
        &self,
        program: &Program,
        array: ArrayId,
        fixed: &BTreeMap<String, i64>,
        whole: bool,
    ) -> Option<(Vec<AstExpr>, Vec<i64>)> {
        self.hull(program, array, fixed, Some(whole), &|_| true)
    }

    /// [`Region::covering_box`] of the accesses of `array` whose subscripts `keep` holds.
    pub(crate) fn covering_box_of(
        &self,
        program: &Program,
        array: ArrayId,
        whole: bool,
        keep: &dyn Fn(&[AstExpr]) -> bool,
    ) -> Option<(Vec<AstExpr>, Vec<i64>)> {
        self.hull(program, array, &BTreeMap::new(), Some(whole), keep)
    }

    fn hull(
        &self,
        program: &Program,
        array: ArrayId,
        fixed: &BTreeMap<String, i64>,
        whole: Option<bool>,
        keep: &dyn Fn(&[AstExpr]) -> bool,
    ) -> Option<(Vec<AstExpr>, Vec<i64>)> {
        let cover = whole.is_some();
        let rank = program.array(array).shape.len();
        let values = self.values.as_deref();
        // Per access and dimension, the range; `None` where it is unknown (`cover` only).
        let mut ranges: Vec<Vec<Option<Span>>> = Vec::new();
        let ours = self
            .enclosed
            .iter()
            .filter(|(a, subs, ..)| *a == array && keep(subs));
        for (_, subs, _, loops) in ours {
            let Some(env) = loop_spans(loops, values, fixed, cover)? else {
                continue;
            };
            let mut r = Vec::new();
            for e in subs {
                let span = Linear::folded(e, values, fixed)
                    .map(|l| l.span(&env))
                    .filter(|s| !s.lo.vars.keys().any(|v| self.inner.contains(v)));
                if span.is_none() && !cover {
                    return None;
                }
                r.push(span);
            }
            ranges.push(r);
        }
        if ranges.is_empty() {
            return None;
        }
        let mut lower = Vec::with_capacity(rank);
        let mut extent = Vec::with_capacity(rank);
        for d in 0..rank {
            match Self::dimension_hull(&ranges, d) {
                Some((lo, ext)) => {
                    lower.push(lo);
                    extent.push(ext);
                }
                None if whole == Some(true) => {
                    let whole =
                        AstExpr::from_affine(&program.array(array).shape[d], &|_| AstExpr::Int(0));
                    let n = evaluate(&whole, values, fixed)?;
                    lower.push(AstExpr::Int(0));
                    extent.push(n.max(1));
                }
                None => return None,
            }
        }
        Some((lower, extent))
    }

    /// The hull of dimension `d` of the accesses' ranges: every range known, and each one's
    /// lowest value a constant away from the first one's.
    fn dimension_hull(ranges: &[Vec<Option<Span>>], d: usize) -> Option<(AstExpr, i64)> {
        let base = &ranges[0][d].as_ref()?.lo;
        let mut lo_off = i64::MAX;
        let mut hi_off = i64::MIN;
        for r in ranges {
            let span = r[d].as_ref()?;
            let diff = span.lo.minus(base);
            if !diff.is_constant() {
                return None;
            }
            lo_off = lo_off.min(diff.constant);
            hi_off = hi_off.max(diff.constant + span.width);
        }
        let lower = AstExpr::plus(
            base.to_expr_without(&BTreeSet::new()),
            AstExpr::Int(base.constant + lo_off),
        );
        Some((lower, hi_off - lo_off + 1))
    }

    /// The affine forms of every access of `array` (one per subscript), when all are affine in
    /// loops of known range.
    fn forms(&self, array: ArrayId) -> Option<Vec<Vec<Linear>>> {
        let mut forms = Vec::new();
        for (_, subs, _) in self.all.iter().filter(|(a, _, _)| *a == array) {
            let mut f = Vec::new();
            for e in subs {
                let l = Linear::of(e)?;
                if l.vars
                    .keys()
                    .any(|v| self.inner.contains(v) && !self.info.contains_key(v))
                {
                    return None;
                }
                f.push(l);
            }
            forms.push(f);
        }
        (!forms.is_empty()).then_some(forms)
    }

    /// Whether some loop of the region of more than one iteration appears in no subscript of
    /// `array`.
    fn reused(&self, forms: &[Vec<Linear>]) -> bool {
        self.info.iter().any(|(v, (_, _, t))| {
            *t > 1
                && forms
                    .iter()
                    .all(|f| f.iter().all(|l| !l.vars.contains_key(v)))
        })
    }

    fn box_of_forms(
        &self,
        program: &Program,
        array: ArrayId,
        forms: &[Vec<Linear>],
    ) -> Option<(Vec<AstExpr>, Vec<i64>)> {
        let rank = program.array(array).shape.len();
        let mut lower = Vec::new();
        let mut extent = Vec::new();
        for d in 0..rank {
            let base = &forms[0][d];
            // Every access must differ from the first by a constant in this dimension.
            let mut offsets = Vec::new();
            for f in forms {
                let diff = f[d].minus(base);
                if !diff.is_constant() {
                    return None;
                }
                offsets.push(diff.constant);
            }
            let (min_off, max_off) = (
                *offsets.iter().min().expect("one access at least"),
                *offsets.iter().max().expect("one access at least"),
            );
            let mut lo = base.to_expr_without(&self.inner);
            let mut ext = 1 + max_off - min_off;
            for (v, c) in &base.vars {
                if let Some((vlo, vhi, t)) = self.info.get(v) {
                    let end = if *c > 0 { vlo } else { vhi };
                    lo = AstExpr::plus(lo, AstExpr::mul(*c, end.clone()));
                    ext += c.abs() * (t - 1);
                }
            }
            lower.push(AstExpr::plus(lo, AstExpr::Int(base.constant + min_off)));
            extent.push(ext);
        }
        Some((lower, extent))
    }
}

/// The workgroup tiles of a thread region `region` of a kernel that writes `written` (but not
/// of the arrays of `skip`, in workgroup memory already), within `budget` bytes of `elem_bytes`-byte elements (see the module docs).
pub(crate) fn shared_tiles(
    program: &Program,
    region: &Ast,
    written: &BTreeSet<ArrayId>,
    skip: &BTreeSet<ArrayId>,
    budget: &mut i64,
    elem_bytes: &dyn Fn(ArrayId) -> i64,
) -> Vec<SharedTile> {
    let r = Region::new(program, region, false);
    let mut order: Vec<ArrayId> = Vec::new();
    for (a, _, _) in &r.all {
        if !order.contains(a) {
            order.push(*a);
        }
    }
    let mut tiles = Vec::new();
    for array in order {
        let writes_here = r.all.iter().any(|(a, _, w)| *a == array && *w);
        if (written.contains(&array) && !writes_here)
            || program.array(array).shape.is_empty()
            || skip.contains(&array)
        {
            continue;
        }
        let subs: Vec<&Vec<AstExpr>> = r
            .all
            .iter()
            .filter(|(a, _, _)| *a == array)
            .map(|(_, s, _)| s)
            .collect();
        if writes_here && subs.iter().all(|s| *s == subs[0]) {
            continue;
        }
        let Some(forms) = r.forms(array) else {
            continue;
        };
        if !r.reused(&forms) {
            continue;
        }
        let Some((lower, extent)) = r.box_of_forms(program, array, &forms) else {
            continue;
        };
        let tile = SharedTile {
            array,
            lower,
            extent,
            written: writes_here,
        };
        let flags = if writes_here {
            4 * tile.flag_words()
        } else {
            0
        };
        let bytes = tile.len() * elem_bytes(array) + flags;
        if bytes <= *budget {
            *budget -= bytes;
            tiles.push(tile);
        }
    }
    tiles
}

/// The arrays a sequential loop `var` with body `body` can keep in registers, with their one
/// subscript (see the module docs).
pub(crate) fn register_candidates(
    program: &Program,
    var: &str,
    body: &Ast,
) -> Vec<(ArrayId, Vec<AstExpr>)> {
    let mut guarded = false;
    let mut bound_inside = BTreeSet::new();
    bound_inside.insert(var.to_string());
    body.walk(&mut |a| match a {
        Ast::If { .. } => guarded = true,
        Ast::For { var, .. } => {
            bound_inside.insert(var.clone());
        }
        _ => {}
    });
    if guarded {
        return Vec::new();
    }
    let all = accesses(program, body);
    let mut out: Vec<(ArrayId, Vec<AstExpr>)> = Vec::new();
    for (array, subs, write) in &all {
        if !write || out.iter().any(|(a, _)| a == array) {
            continue;
        }
        let same = all
            .iter()
            .filter(|(a, _, _)| a == array)
            .all(|(_, s, _)| s == subs);
        let mut used = BTreeSet::new();
        subs.iter().for_each(|e| expr_vars(e, &mut used));
        if same && used.is_disjoint(&bound_inside) {
            out.push((*array, subs.clone()));
        }
    }
    out
}
