//! Packing (GPAT): which tensors to copy into contiguous buffers before which loop, and in
//! which layout.
//!
//! A *candidate* is a loop `M` of the tiled schedule tree (one band member) and an array `T`
//! its statements access: packing copies `T`'s working set in `M` (the elements the loop's
//! iterations reach) into a buffer `T'` right before `M`, every access below `M` reads or
//! writes `T'` instead, and a written `T'` is copied back after `M`. The four phases of the
//! analysis decide which candidates are worth their copies:
//!
//! 1. **Reuse**: every access of `T` below `M` is invariant in `M`: no iterator `M` pins
//!    (directly, or through the point loops of a tile `M` selects) appears in its subscripts,
//!    so each iteration of `M` reads the same `T'` again.
//! 2. **Cache residency**: the *target cache* of the nest is the largest cache that cannot hold
//!    every array the nest touches (no packing when the L1 holds them all: neither TLB nor
//!    stride can then be the bottleneck); `T'` stays there across iterations of `M` when the
//!    cache holds `T'` and twice the working sets of the other arrays in one iteration of `M`.
//! 3. **Goals**: the layout of `T'` orders its dimensions by the depth of the loops that walk
//!    them (shallow first), so the innermost loop walks the last dimension; when accesses
//!    disagree, the layout stays. The candidate must then *reduce the innermost stride* (and
//!    the innermost loop must reach at least two cache lines of `T'`), or *reduce TLB misses*:
//!    in `M` or a loop below it, the pages of every working set exceed the TLB's entries
//!    unpacked, and packing `T'` reaches fewer of them, beside the buffers already chosen
//!    (they need not all fit: every page a loop that overflows the TLB no longer touches is a
//!    translation it no longer refills).
//! 4. **Selection**: candidates are ranked by benefit (TLB entries saved times the executions
//!    of the loops that save them, plus the cache lines the innermost loop no longer crosses)
//!    over cost (the elements copied, twice for a written `T'`), ties broken by the shallower
//!    loop, and taken greedily: never the same array twice in one nest, and each one must still
//!    meet a goal with those already taken packed.
//!
//! Working sets are boxes computed from the schedule: a member that is a statement's iterator
//! pins it, a member `floor(x / T)` limits `x` to `T` values, and an iterator no member above
//! has pinned spans its domain's range at the program's sizes; a member that is a constant
//! for a statement runs its instances in one iteration. Statements under other schedules
//! (skewed members, the statements an extension node adds) or with quasi-affine subscripts
//! (division variables, `A[t % 2]`) make their loops, and the loops around an extension
//! node, no candidates; the loops below it that run only the statements
//! already there stay candidates. No kernel is
//! recognised by its shape: the analysis sees loops, subscripts and sizes only.
//!
//! Decisions are written into the tree as a mark above `M` per packed array
//! ([`Mark::Pack`]: the array, the layout and the reason), splitting `M`'s band where `M` is not
//! its first member; the back end copies a box that contains every element the accesses below
//! the mark reach: where loop bounds depend on loops below `M` (triangles, tiles of the
//! subscripts' iterators below `M`) it is the hull of their ranges, or the array's whole
//! extent, which is the bounding box the working sets above measure. Only the elements of the
//! box that exist are copied, and a written box copied back returns the elements the loops did
//! not write unchanged. Code that goes back into a C file runs at the sizes it is built with,
//! so there a box must not depend on them: every iterator of `T`'s subscripts that varies
//! below `M` must be limited by a tile above it.
//! A written array is packed below a loop that may run in parallel only when every such loop
//! above `M` *owns* its part of the array: one dimension is subscripted by exactly the
//! iterator the loop walks (or tiles), in every access below it, so different iterations
//! reach disjoint rows and no other thread touches the box between the copy-in and the
//! copy-out. The mark says so (`owned by the parallel loops`), and the back end copies such a
//! box back from inside the parallel loop.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::passes::{Pass, PassContext};
use crate::pipeline::Error;
use crate::program::{AffineExpr, ArrayId, ConstraintKind, Program, SourceKind, StmtId, Var};
use crate::schedule::mark::{Mark, PackMark};
use crate::schedule::{NodeKind, QuasiAffine, ScheduleTree};
use crate::target::{MemoryKind, TargetDescription, Tlb};

/// Bytes of a cache line, where the description does not give one.
const LINE_BYTES: i64 = 64;

/// The largest buffer the back end packs an array into; a larger box stays unpacked.
pub const MAX_PACKED_BYTES: i64 = 1 << 20;

/// One band member of the tree: a loop of the generated code.
#[derive(Clone, Debug)]
struct Slot {
    /// The band's path and the member's index in it.
    path: Vec<usize>,
    member: usize,
    /// Band members above this one (its depth in every statement's schedule).
    depth: usize,
    /// The slot of the outermost loop of the nest this one belongs to.
    nest: usize,
    /// Whether a member above this one (or this one) is coincident.
    parallel_above: bool,
    /// Whether this member is coincident (the generated code may run it in parallel).
    coincident: bool,
    /// The slot one member up, if any.
    parent: Option<usize>,
    /// The statements below the member.
    stmts: Vec<StmtId>,
    /// Whether every statement below has simple functions (see the module docs).
    analyzable: bool,
    /// Whether an extension node lies below the member.
    extended: bool,
    /// The slots directly below (one member deeper, any band).
    children: Vec<usize>,
}

/// How a member function pins a statement iterator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pin {
    /// The member is the iterator (plus constants and parameters).
    Point(usize),
    /// The member is `floor((x + c) / size)`.
    Tile(usize, i64),
    /// The member is a constant for the statement (its instances run in one iteration of
    /// the loop, as a statement placed before or after a deeper nest does).
    Const,
}

fn pin_of(f: &QuasiAffine) -> Option<Pin> {
    let iter_terms = |a: &AffineExpr| -> Vec<(usize, i64)> {
        a.terms()
            .iter()
            .filter_map(|&(v, c)| match v {
                Var::Iter(d) => Some((d, c)),
                // Band functions have no division variables (their divisions are floor terms).
                Var::Param(_) | Var::Div(_) => None,
            })
            .collect()
    };
    if f.floors.is_empty() {
        return match iter_terms(&f.affine).as_slice() {
            [] => Some(Pin::Const),
            [(d, c)] if c.abs() == 1 => Some(Pin::Point(*d)),
            _ => None,
        };
    }
    if !iter_terms(&f.affine).is_empty() || f.floors.len() != 1 {
        return None;
    }
    let t = &f.floors[0];
    if t.coeff != 1 || !t.num.floors.is_empty() {
        return None;
    }
    match iter_terms(&t.num.affine).as_slice() {
        [(d, 1)] => Some(Pin::Tile(*d, t.den)),
        _ => None,
    }
}

/// Whether a member function is exactly an iterator or `floor(x / size)`: no constant, no
/// parameter, so that one value of the member stands for the same iterator values in every
/// statement it schedules.
fn plain_pin(f: &QuasiAffine) -> bool {
    let plain = |a: &AffineExpr| {
        a.constant == 0
            && a.terms()
                .iter()
                .all(|&(v, c)| matches!(v, Var::Iter(_)) && c == 1)
    };
    match f.floors.as_slice() {
        [] => plain(&f.affine),
        [t] => f.affine.terms().is_empty() && f.affine.constant == 0 && plain(&t.num.affine),
        _ => false,
    }
}

/// Per statement: the pins of its members from the root down, and its iterators' ranges.
struct StmtInfo {
    pins: Vec<Pin>,
    /// Per member, whether its function is plain ([`plain_pin`]).
    plain: Vec<bool>,
    domain: Vec<i64>,
}

impl StmtInfo {
    /// The values each iterator takes with the first `depth` members fixed.
    fn extents(&self, depth: usize) -> Vec<i64> {
        let mut ext = self.domain.clone();
        for p in &self.pins[..depth.min(self.pins.len())] {
            match *p {
                Pin::Point(d) => ext[d] = 1,
                Pin::Tile(d, size) => ext[d] = ext[d].min(size),
                Pin::Const => {}
            }
        }
        ext
    }

    /// The iterations of member `depth` with the members above it fixed.
    fn trips(&self, depth: usize) -> i64 {
        let ext = self.extents(depth);
        match self.pins.get(depth) {
            Some(Pin::Point(d)) => ext[*d],
            Some(Pin::Tile(d, size)) => (ext[*d] + size - 1) / size,
            Some(Pin::Const) | None => 1,
        }
    }
}

/// The range of each iterator over a statement's domain at the program's sizes, by interval
/// propagation through its constraints (a box containing the domain).
fn domain_box(program: &Program, stmt: StmtId) -> Vec<i64> {
    let s = &program.statements[stmt.index()];
    let params = program.param_values();
    let n = s.depth();
    const FAR: i64 = 1 << 40;
    let mut lo = vec![-FAR; n];
    let mut hi = vec![FAR; n];
    for _ in 0..2 * n + 2 {
        for c in &s.domain {
            let mut bounds = vec![(c.expr.clone(), 1)];
            if c.kind == ConstraintKind::Zero {
                bounds.push((c.expr.scale(-1), 1));
            }
            for (e, _) in bounds {
                // e >= 0: for each iterator x with coefficient a, a·x >= -(rest).
                for &(v, a) in e.terms() {
                    let Var::Iter(x) = v else { continue };
                    // The largest value of the rest of the expression.
                    let mut rest_max = e.constant as i128;
                    for &(w, b) in e.terms() {
                        if w == v {
                            continue;
                        }
                        let (l, h) = match w {
                            Var::Iter(y) => (lo[y] as i128, hi[y] as i128),
                            Var::Param(p) => {
                                let val = params.get(p.index()).copied().unwrap_or(0) as i128;
                                (val, val)
                            }
                            // Domains have no division variables.
                            Var::Div(_) => continue,
                        };
                        rest_max += (b as i128 * l).max(b as i128 * h);
                    }
                    let a = a as i128;
                    if a > 0 {
                        // x >= -rest_max / a
                        let b =
                            (-rest_max).div_euclid(a) + i128::from((-rest_max).rem_euclid(a) != 0);
                        lo[x] = lo[x].max(b.clamp(-FAR as i128, FAR as i128) as i64);
                    } else {
                        // x <= rest_max / -a
                        let b = rest_max.div_euclid(-a);
                        hi[x] = hi[x].min(b.clamp(-FAR as i128, FAR as i128) as i64);
                    }
                }
            }
        }
    }
    (0..n).map(|d| (hi[d] - lo[d] + 1).clamp(1, FAR)).collect()
}

/// The analysis state of one tree.
struct Analysis<'a> {
    program: &'a Program,
    tlb: Tlb,
    slots: Vec<Slot>,
    stmts: BTreeMap<StmtId, StmtInfo>,
}

/// A box of array elements: one extent per dimension.
type Shape = Vec<i64>;

impl<'a> Analysis<'a> {
    fn new(program: &'a Program, tlb: Tlb, tree: &ScheduleTree) -> Self {
        let mut a = Analysis {
            program,
            tlb,
            slots: Vec::new(),
            stmts: BTreeMap::new(),
        };
        let mut pins: BTreeMap<StmtId, Vec<Option<(Pin, bool)>>> = BTreeMap::new();
        let mut blocked: Vec<StmtId> = Vec::new();
        a.collect(tree, &mut Vec::new(), None, false, &mut pins, &mut blocked);
        for (s, p) in pins {
            // Subscripts with divisions are not the boxes and strides the phases measure: the
            // loops around such a statement are no candidates.
            let divided = program.statements[s.index()].has_divisions();
            if divided || blocked.contains(&s) || p.iter().any(Option::is_none) {
                continue;
            }
            let (pins, plain) = p.into_iter().flatten().unzip();
            let info = StmtInfo {
                pins,
                plain,
                domain: domain_box(program, s),
            };
            a.stmts.insert(s, info);
        }
        for k in 0..a.slots.len() {
            let ok = a.slots[k].stmts.iter().all(|s| a.stmts.contains_key(s));
            a.slots[k].analyzable = ok && !a.slots[k].extended;
        }
        a
    }

    /// Records the slots of the bands at and below `path`, and each statement's pins.
    fn collect(
        &mut self,
        tree: &ScheduleTree,
        path: &mut Vec<usize>,
        parent: Option<usize>,
        parallel: bool,
        pins: &mut BTreeMap<StmtId, Vec<Option<(Pin, bool)>>>,
        blocked: &mut Vec<StmtId>,
    ) {
        let Some(node) = tree.node(path) else { return };
        let stmts = tree.statements_at(path).unwrap_or_default();
        let mut parent = parent;
        let mut parallel = parallel;
        match &node.kind {
            NodeKind::Mark(Mark::Skipped) => return,
            NodeKind::Extension(e) => {
                // The statements the extension adds run under its own schedule, and the loops
                // around it run them too: neither can be analysed. The statements that were
                // already below keep their members, so the loops below the extension that
                // run only those stay candidates.
                blocked.extend(e.stmts.iter().map(|(s, _)| *s));
                let mut at = parent;
                while let Some(k) = at {
                    self.slots[k].extended = true;
                    at = self.slots[k].parent;
                }
            }
            NodeKind::Band(band) => {
                let depth_above = parent.map_or(0, |p| self.slots[p].depth + 1);
                for m in 0..band.n_members() {
                    parallel |= band.coincident[m];
                    let k = self.slots.len();
                    let nest = parent.map_or(k, |p| self.slots[p].nest);
                    self.slots.push(Slot {
                        path: path.clone(),
                        member: m,
                        depth: depth_above + m,
                        nest,
                        parallel_above: parallel,
                        coincident: band.coincident[m],
                        parent,
                        stmts: stmts.clone(),
                        analyzable: false,
                        extended: false,
                        children: Vec::new(),
                    });
                    if let Some(p) = parent {
                        self.slots[p].children.push(k);
                    }
                    parent = Some(k);
                }
                for &s in &stmts {
                    let entry = pins.entry(s).or_default();
                    // A statement met twice at one depth (instances split over filters) has
                    // no single list of members.
                    if entry.len() != depth_above {
                        blocked.push(s);
                    }
                    match band.functions(s) {
                        Some(fs) => {
                            entry.extend(fs.iter().map(|f| Some((pin_of(f)?, plain_pin(f)))))
                        }
                        None => entry.push(None),
                    }
                }
            }
            _ => {}
        }
        for i in 0..node.children.len() {
            path.push(i);
            self.collect(tree, path, parent, parallel, pins, blocked);
            path.pop();
        }
    }

    fn elem_bytes(&self, t: ArrayId) -> i64 {
        self.program.array(t).elem.size_in_bytes() as i64
    }

    /// The working set of `t` over the statements of `stmts` with their first `depth`
    /// members fixed, or `None` when no statement of them accesses `t`.
    fn working_set(&self, t: ArrayId, stmts: &[StmtId], depth: usize) -> Option<Shape> {
        let extents = self.program.array_extents(t);
        let mut spans: Vec<(i64, i64, i64)> = vec![(0, i64::MAX, i64::MIN); extents.len()];
        let mut any = false;
        let params = self.program.param_values();
        for &s in stmts {
            let info = &self.stmts[&s];
            let ext = info.extents(depth);
            let st = &self.program.statements[s.index()];
            for acc in st.reads.iter().chain(std::iter::once(&st.write)) {
                if acc.array != t {
                    continue;
                }
                any = true;
                for (d, e) in acc.subscripts.iter().enumerate() {
                    let mut span = 1;
                    let mut base = e.constant;
                    for &(v, c) in e.terms() {
                        match v {
                            Var::Iter(x) => span += c.abs() * (ext[x] - 1),
                            Var::Param(p) => base += c * params[p.index()],
                            // Statements with divisions are not analysed (see `new`): the
                            // whole extent, were they.
                            Var::Div(_) => span += extents[d],
                        }
                    }
                    let (sp, lo, hi) = &mut spans[d];
                    *sp = (*sp).max(span);
                    *lo = (*lo).min(base);
                    *hi = (*hi).max(base);
                }
            }
        }
        any.then(|| {
            spans
                .iter()
                .zip(&extents)
                .map(|(&(sp, lo, hi), &n)| (sp + (hi - lo).min(n)).min(n).max(1))
                .collect()
        })
    }

    /// Whether the box of `t`'s accesses below the slot has extents that do not depend on the
    /// program's sizes. The back end copies a box that contains every element the loops below
    /// the slot reach (triangular bounds and tiles below the slot make it the hull of their
    /// ranges, or the array's whole extent), and a buffer needs constant extents. A kernel's
    /// sizes are constants, so its boxes always qualify; code that goes back into a C file
    /// runs at whatever sizes the file is built with, so there every iterator the subscripts
    /// of `t` use that still varies below the slot must be limited by a tile above it.
    fn box_expressible(&self, t: ArrayId, slot: &Slot) -> bool {
        if !matches!(self.program.source, SourceKind::CScop { .. }) {
            return true;
        }
        slot.stmts.iter().all(|s| {
            let info = &self.stmts[s];
            let ext = info.extents(slot.depth);
            let above = &info.pins[..slot.depth.min(info.pins.len())];
            self.accesses_of(t, *s).all(|acc| {
                acc.subscripts.iter().all(|e| {
                    e.terms().iter().all(|&(v, _)| match v {
                        Var::Iter(x) => {
                            ext[x] <= 1
                                || above
                                    .iter()
                                    .any(|p| matches!(p, Pin::Tile(y, _) if *y == x))
                        }
                        Var::Param(_) => true,
                        Var::Div(_) => false,
                    })
                })
            })
        })
    }

    /// The accesses of `t` in the statement `s`, its write included.
    fn accesses_of<'p>(
        &'p self,
        t: ArrayId,
        s: StmtId,
    ) -> impl Iterator<Item = &'p crate::program::Access> + 'p {
        let st = &self.program.statements[s.index()];
        st.reads
            .iter()
            .chain(std::iter::once(&st.write))
            .filter(move |a| a.array == t)
    }

    /// The iterator the member of `slot` pins in statement `s`.
    fn pinned(&self, slot: &Slot, s: StmtId) -> Option<(Pin, bool)> {
        let info = &self.stmts[&s];
        let pin = *info.pins.get(slot.depth)?;
        Some((pin, info.plain[slot.depth]))
    }

    /// Phase 1 per access: no access of `t` below the slot has the iterator the slot's member
    /// pins in its subscripts (the box of all accesses may stay the same while one access
    /// moves inside it, as `A[i][k]` beside `A[j][k]` does).
    fn invariant(&self, t: ArrayId, slot: &Slot) -> bool {
        slot.stmts.iter().all(|&s| {
            let Some((Pin::Point(x) | Pin::Tile(x, _), _)) = self.pinned(slot, s) else {
                return false;
            };
            self.accesses_of(t, s)
                .all(|acc| acc.subscripts.iter().all(|e| e.coeff(Var::Iter(x)) == 0))
        })
    }

    /// Whether each iteration of the member of `slot` owns a part of `t`: some dimension of
    /// `t` is subscripted by exactly the iterator the member pins, in every access of every
    /// statement below it, and the member is the same plain function of that iterator in all
    /// of them. Different iterations then reach disjoint rows of that dimension, so the one
    /// that packs a written box of `t` may copy it out without clobbering another's elements.
    fn owned_by(&self, t: ArrayId, slot: &Slot) -> bool {
        let rank = self.program.array(t).shape.len();
        let mut pin_kind: Option<Option<i64>> = None;
        let mut dims: Vec<bool> = vec![true; rank];
        for &s in &slot.stmts {
            if self.accesses_of(t, s).next().is_none() {
                continue;
            }
            let Some((pin, true)) = self.pinned(slot, s) else {
                return false;
            };
            let (x, size) = match pin {
                Pin::Point(x) => (x, None),
                Pin::Tile(x, size) => (x, Some(size)),
                Pin::Const => return false,
            };
            if *pin_kind.get_or_insert(size) != size {
                return false;
            }
            for acc in self.accesses_of(t, s) {
                for (d, e) in acc.subscripts.iter().enumerate() {
                    let exact =
                        e.constant == 0 && e.terms().len() == 1 && e.coeff(Var::Iter(x)) == 1;
                    dims[d] &= exact;
                }
            }
        }
        dims.contains(&true)
    }

    /// Whether a written `t` may be packed at `k`: every coincident member at or above it (any
    /// of which the generated code may run in parallel) owns a part of `t`.
    fn owned(&self, t: ArrayId, k: usize) -> bool {
        let mut at = Some(k);
        while let Some(a) = at {
            let slot = &self.slots[a];
            if slot.coincident && !(slot.analyzable && self.owned_by(t, slot)) {
                return false;
            }
            at = slot.parent;
        }
        true
    }

    /// The arrays the statements of `stmts` access.
    fn arrays_of(&self, stmts: &[StmtId]) -> Vec<ArrayId> {
        let mut out: Vec<ArrayId> = Vec::new();
        for &s in stmts {
            let st = &self.program.statements[s.index()];
            for acc in st.reads.iter().chain(std::iter::once(&st.write)) {
                if !out.contains(&acc.array) && !self.program.array(acc.array).shape.is_empty() {
                    out.push(acc.array);
                }
            }
        }
        out.sort();
        out
    }

    /// TLB entries needed to reach a box of `ws` elements in a row-major array of `shape`.
    fn tlb_entries(&self, ws: &[i64], shape: &[i64], elem: i64) -> i64 {
        let page = self.tlb.page_bytes as i64;
        // The contiguous runs: the trailing dimensions the box covers whole, and one more.
        let mut run = elem;
        let mut k = ws.len();
        while k > 0 {
            k -= 1;
            run *= ws[k];
            if ws[k] < shape[k] {
                break;
            }
        }
        let pitch: i64 = shape[k..].iter().product::<i64>() * elem;
        let runs: i64 = ws[..k].iter().product();
        let span_bytes = if runs > 1 {
            // Consecutive runs are at least a row of dimension k - 1 apart.
            pitch * (runs - 1) + run
        } else {
            run
        };
        let per_run = (run + page - 1) / page;
        (runs * per_run).min((span_bytes + page - 1) / page)
    }

    /// The layout that orders `t`'s dimensions by the depth of the loops walking them under
    /// the slot, shallow first; the identity when accesses disagree or a dimension is walked
    /// by no loop below the slot.
    fn layout(&self, t: ArrayId, slot: &Slot) -> Vec<usize> {
        let rank = self.program.array(t).shape.len();
        let identity: Vec<usize> = (0..rank).collect();
        let mut order: Option<Vec<usize>> = None;
        for &s in &slot.stmts {
            let info = &self.stmts[&s];
            let st = &self.program.statements[s.index()];
            for acc in st.reads.iter().chain(std::iter::once(&st.write)) {
                if acc.array != t {
                    continue;
                }
                // Per dimension, the deepest member pinning an iterator of its subscript.
                let depth_of = |x: usize| {
                    info.pins
                        .iter()
                        .rposition(|p| *p == Pin::Point(x))
                        .unwrap_or(0)
                };
                let depths: Vec<usize> = acc
                    .subscripts
                    .iter()
                    .map(|e| {
                        e.terms()
                            .iter()
                            .filter_map(|&(v, _)| match v {
                                Var::Iter(x) => Some(depth_of(x)),
                                Var::Param(_) | Var::Div(_) => None,
                            })
                            .max()
                            .unwrap_or(0)
                    })
                    .collect();
                let mut o = identity.clone();
                o.sort_by_key(|&d| depths[d]);
                match &order {
                    None => order = Some(o),
                    Some(prev) if *prev != o => return identity,
                    Some(_) => {}
                }
            }
        }
        order.unwrap_or(identity)
    }

    /// The distance in elements one step of the innermost loop moves the accesses of `t`
    /// (the largest over its accesses) in a row-major array of `shape` with dimensions stored
    /// in the order `layout`.
    fn innermost_stride(
        &self,
        t: ArrayId,
        stmts: &[StmtId],
        shape: &[i64],
        layout: &[usize],
    ) -> i64 {
        let mut strides = vec![0; shape.len()];
        let mut s = 1;
        for k in (0..layout.len()).rev() {
            strides[layout[k]] = s;
            s *= shape[layout[k]];
        }
        let mut out = 0;
        for &st_id in stmts {
            let info = &self.stmts[&st_id];
            let Some(Pin::Point(x)) = info.pins.last().copied() else {
                continue;
            };
            let st = &self.program.statements[st_id.index()];
            for acc in st.reads.iter().chain(std::iter::once(&st.write)) {
                if acc.array != t {
                    continue;
                }
                let step: i64 = acc
                    .subscripts
                    .iter()
                    .enumerate()
                    .map(|(d, e)| e.coeff(Var::Iter(x)).abs() * strides[d])
                    .sum();
                out = out.max(step);
            }
        }
        out
    }

    /// Executions of the loop at `slot` in the whole run (the product of the trip counts of
    /// the loops above it, for its first statement).
    fn executions(&self, slot: &Slot) -> i64 {
        let Some(s) = slot.stmts.first() else {
            return 0;
        };
        let info = &self.stmts[s];
        (0..slot.depth).map(|d| info.trips(d).max(1)).product()
    }

    /// Every slot at or below `k`.
    fn subtree(&self, k: usize) -> Vec<usize> {
        let mut out = vec![k];
        let mut i = 0;
        while i < out.len() {
            out.extend(self.slots[out[i]].children.iter().copied());
            i += 1;
        }
        out
    }

    /// The TLB entries the loop `l` needs, with the arrays of `packed` in their buffers.
    fn loop_entries(&self, l: usize, packed: &[&Candidate]) -> i64 {
        let slot = &self.slots[l];
        let mut total = 0;
        for t in self.arrays_of(&slot.stmts) {
            let Some(ws) = self.working_set(t, &slot.stmts, slot.depth) else {
                continue;
            };
            let elem = self.elem_bytes(t);
            let inside = packed
                .iter()
                .find(|c| c.array == t && self.subtree(c.slot).contains(&l));
            total += match inside {
                Some(c) => {
                    let ws_p: Vec<i64> = c.layout.iter().map(|&d| ws[d]).collect();
                    let shape_p: Vec<i64> = c.layout.iter().map(|&d| c.shape[d]).collect();
                    self.tlb_entries(&ws_p, &shape_p, elem)
                }
                None => self.tlb_entries(&ws, &self.program.array_extents(t), elem),
            };
        }
        total
    }

    /// GPAT's `improvesTLB`: the loops at or below the candidate's slot whose working sets
    /// overflow the TLB unpacked and touch fewer pages with the candidate packed beside
    /// `committed`, with the entries before and after. Packing is how a nest gets under the
    /// TLB, not something it is excused from once there: a loop whose pages stay above the
    /// entries still gains (each page its iterations no longer reach is a translation fewer
    /// to evict and refill), and one that `committed` already brought under gains again from
    /// each page fewer, as the TLB is shared with everything else the iteration touches.
    fn tlb_gains(&self, c: &Candidate, committed: &[&Candidate]) -> Vec<(usize, i64, i64)> {
        let mut with: Vec<&Candidate> = committed.to_vec();
        with.push(c);
        let limit = self.tlb.entries as i64;
        let mut out = Vec::new();
        for l in self.subtree(c.slot) {
            if !self.slots[l].analyzable {
                continue;
            }
            let before = self.loop_entries(l, committed);
            let after = self.loop_entries(l, &with);
            if self.loop_entries(l, &[]) > limit && after < before {
                out.push((l, before, after));
            }
        }
        out
    }
}

/// A (loop, array) pair that passed the filters, with what the goals found.
#[derive(Clone, Debug)]
struct Candidate {
    slot: usize,
    array: ArrayId,
    /// The working set in the loop: the packed buffer's box, in the array's dimension order.
    shape: Shape,
    layout: Vec<usize>,
    written: bool,
    /// Written below a coincident member that owns its part of the array (see
    /// [`Analysis::owned`]).
    owned: bool,
    /// The innermost stride before and after packing, when it shrinks.
    stride: Option<(i64, i64)>,
    /// The target cache's name.
    cache: String,
}

/// The pack decisions for `tree`: per packed (slot path, member), the marks to insert.
fn decide(
    program: &Program,
    target: &TargetDescription,
    tree: &ScheduleTree,
) -> Vec<(Vec<usize>, usize, PackMark)> {
    let Some(tlb) = target.tlb else {
        return Vec::new();
    };
    let an = Analysis::new(program, tlb, tree);
    let caches: Vec<(String, i64)> = target
        .memory
        .cache_chain()
        .iter()
        .filter(|m| m.kind == MemoryKind::Cache)
        .map(|m| (m.name.clone(), m.bytes as i64))
        .collect();
    let Some(&(_, l1)) = caches.first() else {
        return Vec::new();
    };
    let mut candidates = Vec::new();
    for (k, slot) in an.slots.iter().enumerate() {
        if !slot.analyzable || slot.stmts.is_empty() {
            continue;
        }
        let nest = &an.slots[slot.nest];
        let total: i64 = an
            .arrays_of(&nest.stmts)
            .iter()
            .map(|&t| an.program.array_len(t) as i64 * an.elem_bytes(t))
            .sum();
        if total <= l1 {
            continue;
        }
        // The largest cache that cannot hold the nest's arrays (the outermost one when none
        // can).
        let Some((cache, capacity)) = caches.iter().rev().find(|(_, b)| *b < total).cloned() else {
            continue;
        };
        for t in an.arrays_of(&slot.stmts) {
            let Some(shape) = an.working_set(t, &slot.stmts, slot.depth) else {
                continue;
            };
            if !an.box_expressible(t, slot) {
                continue;
            }
            // Phase 1: the accesses do not change with the slot's iterations.
            let Some(inside) = an.working_set(t, &slot.stmts, slot.depth + 1) else {
                continue;
            };
            let trips = an.stmts[&slot.stmts[0]].trips(slot.depth);
            if inside != shape || trips < 2 || !an.invariant(t, slot) {
                continue;
            }
            let written = slot
                .stmts
                .iter()
                .any(|s| program.statements[s.index()].write.array == t);
            let owned = written && slot.parallel_above;
            if owned && !an.owned(t, k) {
                continue;
            }
            // Phase 2: the buffer stays in the target cache across iterations.
            let elem = an.elem_bytes(t);
            let bytes = shape.iter().product::<i64>() * elem;
            let others: i64 = an
                .arrays_of(&slot.stmts)
                .into_iter()
                .filter(|&u| u != t)
                .filter_map(|u| {
                    let ws = an.working_set(u, &slot.stmts, slot.depth + 1)?;
                    Some(ws.iter().product::<i64>() * an.elem_bytes(u))
                })
                .sum();
            if bytes + 2 * others > capacity {
                continue;
            }
            // Phase 3: the goals.
            let layout = an.layout(t, slot);
            let full = program.array_extents(t);
            let before =
                an.innermost_stride(t, &slot.stmts, &full, &(0..full.len()).collect::<Vec<_>>());
            let after = an.innermost_stride(t, &slot.stmts, &shape, &layout);
            let inner_bytes = slot
                .stmts
                .iter()
                .map(|s| {
                    let info = &an.stmts[s];
                    info.trips(info.pins.len() - 1)
                })
                .max()
                .unwrap_or(1)
                * elem;
            let stride = (after < before && after > 0 && inner_bytes >= 2 * LINE_BYTES)
                .then_some((before, after));
            candidates.push(Candidate {
                slot: k,
                array: t,
                shape,
                layout,
                written,
                owned,
                stride,
                cache: cache.clone(),
            });
        }
    }
    // Phase 4: greedy selection by benefit over cost.
    let score = |c: &Candidate, committed: &[&Candidate]| -> Option<(f64, String)> {
        let slot = &an.slots[c.slot];
        let gains = an.tlb_gains(c, committed);
        if c.stride.is_none() && gains.is_empty() {
            return None;
        }
        let elem = an.elem_bytes(c.array);
        let mut benefit = 0.0;
        for &(l, before, after) in &gains {
            benefit += (before - after) as f64 * an.executions(&an.slots[l]) as f64;
        }
        if let Some((before, after)) = c.stride {
            // The cache lines the innermost loop stops crossing, over every execution of the
            // slot's loops.
            let lines = |s: i64| (s * elem).min(LINE_BYTES) as f64 / LINE_BYTES as f64;
            let inner: f64 = slot
                .stmts
                .iter()
                .map(|s| {
                    let info = &an.stmts[s];
                    (slot.depth..info.pins.len())
                        .map(|d| info.trips(d) as f64)
                        .product::<f64>()
                })
                .fold(0.0, f64::max);
            benefit += (lines(before) - lines(after)) * inner * an.executions(slot) as f64;
        }
        let copies = c.shape.iter().product::<i64>() as f64 * if c.written { 2.0 } else { 1.0 };
        let cost = copies * an.executions(slot) as f64;
        let mut why = Vec::new();
        if let Some((before, after)) = c.stride {
            why.push(format!("innermost stride {before} -> {after}"));
        }
        if let Some(&(l, before, after)) = gains.first() {
            why.push(format!(
                "TLB entries {before} -> {after} of {} at depth {}",
                an.tlb.entries, an.slots[l].depth
            ));
        }
        let dims: Vec<String> = c.shape.iter().map(|e| e.to_string()).collect();
        let reason = format!(
            "reused in depth {}, {} resident in {}; {}",
            slot.depth,
            dims.join("x"),
            c.cache,
            why.join("; ")
        );
        Some((benefit / cost.max(1.0), reason))
    };
    let mut ranked: Vec<(f64, usize, usize)> = candidates
        .iter()
        .enumerate()
        .filter_map(|(i, c)| score(c, &[]).map(|(r, _)| (r, an.slots[c.slot].depth, i)))
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut chosen: Vec<&Candidate> = Vec::new();
    let mut out = Vec::new();
    for (_, _, i) in ranked {
        let c = &candidates[i];
        let redundant = chosen.iter().any(|d| {
            d.array == c.array
                && an.slots[d.slot].nest == an.slots[c.slot].nest
                && (an.subtree(d.slot).contains(&c.slot) || an.subtree(c.slot).contains(&d.slot))
        });
        if redundant {
            continue;
        }
        let Some((_, reason)) = score(c, &chosen) else {
            continue;
        };
        chosen.push(c);
        let slot = &an.slots[c.slot];
        out.push((
            slot.path.clone(),
            slot.member,
            PackMark {
                array: program.array(c.array).name.clone(),
                layout: c.layout.clone(),
                owned: c.owned,
                reason,
            },
        ));
    }
    out
}

/// Inserts the marks of `decisions` into `tree`: deepest paths and members first, so that
/// splitting a band never moves a node a later insertion refers to.
fn insert_marks(
    tree: &mut ScheduleTree,
    mut decisions: Vec<(Vec<usize>, usize, PackMark)>,
) -> Result<(), Error> {
    decisions.sort_by(|a, b| {
        b.0.len()
            .cmp(&a.0.len())
            .then(b.0.cmp(&a.0))
            .then(b.1.cmp(&a.1))
            .then(a.2.array.cmp(&b.2.array))
    });
    let mut k = 0;
    while k < decisions.len() {
        let (path, member, _) = &decisions[k];
        let group = decisions[k..]
            .iter()
            .take_while(|(p, m, _)| p == path && m == member)
            .count();
        let mut at = path.clone();
        if *member > 0 {
            tree.split_band(path, *member)?;
            at.push(0);
        }
        for (_, _, mark) in &decisions[k..k + group] {
            tree.insert_mark(&at, Mark::Pack(mark.clone()))?;
        }
        k += group;
    }
    Ok(())
}

/// A report of the decisions, one line per packed array (for tests and messages).
pub fn describe(tree: &ScheduleTree) -> String {
    let mut out = String::new();
    tree.root.walk(&mut |n| {
        if let NodeKind::Mark(m @ Mark::Pack(_)) = &n.kind {
            let _ = writeln!(out, "{m}");
        }
    });
    out
}

/// The packing pass: the analysis of the module docs on the tiled tree, its decisions as
/// marks. Runs on targets that describe a TLB.
pub const PASS: Pass = Pass {
    name: "pack",
    summary: "arrays copied into contiguous buffers where the TLB and the cache lines gain (CPU)",
    enabled: |target, options| options.pack && target.tlb.is_some(),
    run,
};

fn run(cx: &mut PassContext) -> Result<(), Error> {
    let decisions = decide(cx.program, cx.target, &cx.tree);
    insert_marks(&mut cx.tree, decisions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_of_tile_and_point_members() {
        let i = QuasiAffine::var(Var::Iter(1));
        assert_eq!(pin_of(&i), Some(Pin::Point(1)));
        assert_eq!(pin_of(&i.floor_div(32).unwrap()), Some(Pin::Tile(1, 32)));
        assert_eq!(pin_of(&QuasiAffine::constant(0)), Some(Pin::Const));
        let skew = i.add(&QuasiAffine::var(Var::Iter(0)));
        assert_eq!(pin_of(&skew), None);
    }
}
