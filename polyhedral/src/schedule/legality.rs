//! Legality and coincidence of flat schedules, decided from the dependences.
//!
//! A schedule is *legal* when the schedule vectors of every legality dependence's source and
//! sink instances are lexicographically increasing. A dimension is *coincident* (a parallel
//! loop) when no legality dependence is carried by it: no pair whose schedule vectors agree
//! on the dimensions before it is ordered by it.
//!
//! Affine dimensions are decided on the dependence relations themselves: "the pair agrees on
//! the dimensions before `d` and goes backwards at `d`" is a set of affine constraints over
//! the source and sink iterators, so each question is whether a dependence polyhedron cut by
//! a few affine rows is empty. Prefixes on which no pair agrees end the walk over the
//! dimensions early.
//!
//! Tile bands ([`crate::passes::tile`]) are not asked about directly. A tile member is a sum of
//! `floor(φ_k / T_k)` over members `φ_k` of the point band right after it, and an integer
//! question about floors of several expressions (each an existential variable) may need
//! branch and bound or the Omega test's splinters to prove empty, while its answer follows
//! from the point band:
//!
//! - *legality*: when every `φ_k` has a non-negative distance on every dependence pair that
//!   agrees on the dimensions before the tile band (the band is permutable on them), so has
//!   each floor and every sum of floors; the pairs the tile dimensions leave equal are ordered
//!   by the dimensions after them. So a tiled schedule is legal when its *skeleton* (the
//!   schedule without the dimensions of its tile bands) is legal and every tile band's point
//!   members are non-negative on the pairs that reach it. This is what is checked: it is
//!   exactly the reason tiling is legal, and it holds for every schedule the passes build;
//! - *coincidence*: a tile dimension carries nothing when every point member it sums has
//!   distance zero on the pairs that reach the band, or is forced to zero by an earlier tile
//!   dimension of the band (a sum of non-negative terms that is zero has zero terms, which is
//!   why a wavefront's inner tile loops are parallel); every other dimension is coincident
//!   when it is in the skeleton, whose pairs include those of the tiled schedule. Coincidence
//!   of a tiled schedule is therefore sound (a coincident dimension never carries a
//!   dependence) but may miss parallelism that only tile boundaries create, as Pluto's and
//!   isl's tiling do.
//!
//! Agreeing on every dimension before a tile band is the same as agreeing on the skeleton's
//! dimensions before it, because every earlier tile dimension is a function of its point band,
//! which comes right after it and so also before the band. Past a tile band, the pairs kept
//! are also those agreeing on each tile member that is one point member of size 1 (an
//! affine condition); the others differ on a tile dimension, at a positive distance.
//! A point band may be split by the scalar dimensions that distribute its statements: its
//! members are the point dimensions after the tile band, in order. Each statement's tile
//! members decompose on their own (distributed statements may order their point members
//! differently, and loop nests apart before the band may tile differently); at a dependence,
//! the floors of its source are matched to those of its sink of the same size (the same
//! point member first), and each matched pair's distance is what the arguments above ask
//! about. A dependence whose ends' floors do not match is decided exactly.
//!
//! A schedule with divisions elsewhere (or a tile band that does not decompose over the point
//! band after it) is decided exactly on the composed schedule maps, divisions as existential
//! variables.

use num_traits::Zero;
use rayon::prelude::*;

use super::expr::QuasiAffine;
use super::pluto::{affine_row, stmt_tuple, BandKind, DimKind, Error, PlutoSchedule};
use crate::deps::{Dependence, Dependences};
use crate::program::{AffineExpr, Program, StmtId};
use crate::sets::{Map, Tuple};

/// Checks that every legality dependence's sink runs after its source.
pub fn check_legality(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
) -> Result<(), Error> {
    let Some(shape) = Shape::of(schedule) else {
        return check_legality_exact(program, deps, schedule);
    };
    for d in deps.legality() {
        let q = DepQuery::new(program, schedule, d)?;
        let mut prefix = d.relation.clone();
        let mut reaches_all = true;
        for (r, &dim) in shape.skeleton.iter().enumerate() {
            for band in shape.bands.iter().filter(|b| b.before == r) {
                let Some(matching) = band.matching(d.source, d.sink) else {
                    return check_legality_exact(program, deps, schedule);
                };
                for m in distinct(&matching) {
                    let (from, to) = (band.point[m.from], band.point[m.to]);
                    if !q
                        .cut_between(&prefix, from, to, Sign::Negative)?
                        .is_empty()?
                    {
                        return Err(violated(program, d, "inside a tile band"));
                    }
                }
                prefix = band.keep_equal(&matching, &q, prefix)?;
            }
            if !q.cut(&prefix, dim, Sign::Negative)?.is_empty()? {
                return Err(violated(program, d, ""));
            }
            prefix = q.cut(&prefix, dim, Sign::Zero)?;
            if prefix.is_empty()? {
                reaches_all = false;
                break;
            }
        }
        if reaches_all {
            return Err(violated(program, d, "(its instances are not ordered)"));
        }
    }
    Ok(())
}

/// Per dimension, whether no legality dependence is carried by it once the outer dimensions
/// are equal (a parallel loop): exact for schedules without tile bands, sound for tiled ones
/// (see the module docs).
pub fn coincident_dims(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
) -> Result<Vec<bool>, Error> {
    let all: Vec<StmtId> = program.statement_ids().collect();
    coincident_dims_among(program, deps, schedule, &all)
}

/// [`coincident_dims`] for the loop nest of the statements `stmts` only: dependences from or
/// to other statements are not considered (the scalar dimensions that separate the nests
/// order them).
pub fn coincident_dims_among(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    stmts: &[StmtId],
) -> Result<Vec<bool>, Error> {
    let Some(shape) = Shape::of(schedule) else {
        return coincident_dims_exact(program, deps, schedule, stmts);
    };
    // Each dependence's verdict on its own, side by side on the machine's cores; a dimension
    // is coincident when every dependence finds it so, and the first dependence (in order)
    // the shape cannot decide sends the whole question to the exact test.
    let among: Vec<&Dependence> = deps
        .legality()
        .filter(|d| stmts.contains(&d.source) && stmts.contains(&d.sink))
        .collect();
    let verdicts: Vec<Result<Option<Vec<bool>>, Error>> = among
        .par_iter()
        .map(|d| coincident_dims_of(program, schedule, &shape, d))
        .collect();
    let mut coincident = vec![true; schedule.dims.len()];
    for verdict in verdicts {
        let Some(own) = verdict? else {
            return coincident_dims_exact(program, deps, schedule, stmts);
        };
        for (all, one) in coincident.iter_mut().zip(own) {
            *all &= one;
        }
    }
    Ok(coincident)
}

/// Which dimensions of `schedule` (of the tiled `shape`) dependence `d` leaves coincident;
/// `None` where the shape alone cannot tell.
fn coincident_dims_of(
    program: &Program,
    schedule: &PlutoSchedule,
    shape: &Shape,
    d: &Dependence,
) -> Result<Option<Vec<bool>>, Error> {
    let mut coincident = vec![true; schedule.dims.len()];
    let q = DepQuery::new(program, schedule, d)?;
    let mut prefix = d.relation.clone();
    for (r, &dim) in shape.skeleton.iter().enumerate() {
        for band in shape.bands.iter().filter(|b| b.before == r) {
            // Not a permutable tile band, or one whose floors differ between the
            // statements: ask the tiled schedule itself.
            let Some(matching) = band.matching(d.source, d.sink) else {
                return Ok(None);
            };
            // A matched floor by what it divides at each end: point members that are
            // the same expressions are the same floor.
            let floor = |m: &Matched| {
                let exprs = |p: usize| &schedule.dims[band.point[p]].exprs;
                (
                    &exprs(m.from)[d.source.index()],
                    &exprs(m.to)[d.sink.index()],
                    m.size,
                )
            };
            // The floors with pairs that reach the band at a positive distance.
            let mut moves = Vec::new();
            for m in distinct(&matching) {
                let (from, to) = (band.point[m.from], band.point[m.to]);
                if !q
                    .cut_between(&prefix, from, to, Sign::Negative)?
                    .is_empty()?
                {
                    return Ok(None);
                }
                if !q
                    .cut_between(&prefix, from, to, Sign::Positive)?
                    .is_empty()?
                {
                    moves.push(floor(&m));
                }
            }
            // A floor an earlier tile member sums is equal on the pairs that reach a
            // later one (a sum of non-decreasing floors that is equal has equal floors).
            let mut forced = Vec::new();
            for (j, terms) in matching.iter().enumerate() {
                let floors: Vec<_> = terms.iter().map(floor).collect();
                if floors
                    .iter()
                    .any(|f| moves.contains(f) && !forced.contains(f))
                {
                    coincident[band.start + j] = false;
                }
                forced.extend(floors);
            }
            prefix = band.keep_equal(&matching, &q, prefix)?;
        }
        if coincident[dim] && !q.cut(&prefix, dim, Sign::Positive)?.is_empty()? {
            coincident[dim] = false;
        }
        prefix = q.cut(&prefix, dim, Sign::Zero)?;
        if prefix.is_empty()? {
            break;
        }
    }
    Ok(Some(coincident))
}

/// A tile band of the schedule and how its members decompose over its point band.
struct TileBand {
    /// The band's first dimension.
    start: usize,
    /// The dimensions of the point band's members, in order: right after the band, or split
    /// by the scalar dimensions that distribute its statements.
    point: Vec<usize>,
    /// How many skeleton dimensions come before the band.
    before: usize,
    /// Per statement and tile member, the floors it sums.
    terms: Vec<Vec<Vec<Term>>>,
}

/// One floor a tile member sums: of a point member (an index into the point band), by its
/// tile size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Term {
    member: usize,
    size: i64,
}

/// A floor of a tile member at a dependence's source matched to one of the same size at its
/// sink: the point members (indices into the point band) whose distance decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Matched {
    from: usize,
    to: usize,
    size: i64,
}

impl TileBand {
    /// Per tile member, its floors at `src` matched to those at `dst`, same size to same size
    /// (the same point member first); `None` when their sizes differ.
    fn matching(&self, src: StmtId, dst: StmtId) -> Option<Vec<Vec<Matched>>> {
        let (a, b) = (&self.terms[src.index()], &self.terms[dst.index()]);
        a.iter()
            .zip(b)
            .map(|(from, to)| {
                if from.len() != to.len() {
                    return None;
                }
                let mut left = to.clone();
                let mut matched = Vec::with_capacity(from.len());
                let mut rest = Vec::new();
                for t in from {
                    match left.iter().position(|u| u == t) {
                        Some(p) => {
                            left.remove(p);
                            matched.push(Matched {
                                from: t.member,
                                to: t.member,
                                size: t.size,
                            });
                        }
                        None => rest.push(*t),
                    }
                }
                for t in rest {
                    let u = left.remove(left.iter().position(|u| u.size == t.size)?);
                    matched.push(Matched {
                        from: t.member,
                        to: u.member,
                        size: t.size,
                    });
                }
                Some(matched)
            })
            .collect()
    }

    /// The pairs of `pairs` that agree on the tile members that are one floor of size 1 (a
    /// point member itself): only those reach the dimensions after the band.
    fn keep_equal(
        &self,
        matching: &[Vec<Matched>],
        q: &DepQuery,
        mut pairs: Map,
    ) -> Result<Map, Error> {
        for terms in matching {
            if let [m] = terms[..] {
                if m.size == 1 {
                    pairs =
                        q.cut_between(&pairs, self.point[m.from], self.point[m.to], Sign::Zero)?;
                }
            }
        }
        Ok(pairs)
    }
}

/// The distinct matched floors of a matching.
fn distinct(matching: &[Vec<Matched>]) -> Vec<Matched> {
    let mut out: Vec<Matched> = Vec::new();
    for &m in matching.iter().flatten() {
        if !out.iter().any(|o| o.from == m.from && o.to == m.to) {
            out.push(m);
        }
    }
    out
}

/// The structure of a schedule whose only divisions are in tile bands.
struct Shape {
    /// The dimensions outside tile bands, in order.
    skeleton: Vec<usize>,
    bands: Vec<TileBand>,
}

impl Shape {
    /// The structure of `schedule`, or `None` when it has divisions the module docs do not
    /// cover.
    fn of(schedule: &PlutoSchedule) -> Option<Shape> {
        let m = schedule.dims.len();
        let mut in_tile = vec![false; m];
        let mut bands = Vec::new();
        for b in schedule.bands.iter().filter(|b| b.kind == BandKind::Tile) {
            let point = point_members(schedule, b.start + b.len, b.len)?;
            let band = decompose(schedule, b.start, point)?;
            in_tile[b.start..b.start + b.len].fill(true);
            bands.push(band);
        }
        let skeleton: Vec<usize> = (0..m).filter(|&d| !in_tile[d]).collect();
        if skeleton
            .iter()
            .any(|&d| schedule.dims[d].exprs.iter().any(|e| !e.is_affine()))
        {
            return None;
        }
        for band in &mut bands {
            band.before = skeleton.iter().filter(|&&d| d < band.start).count();
        }
        Some(Shape { skeleton, bands })
    }
}

/// The dimensions of the `len` point members from `from` on: dimensions of point bands,
/// skipping scalar dimensions outside every band.
fn point_members(schedule: &PlutoSchedule, from: usize, len: usize) -> Option<Vec<usize>> {
    let in_point_band = |d: usize| {
        schedule
            .bands
            .iter()
            .any(|p| p.kind == BandKind::Point && (p.start..p.start + p.len).contains(&d))
    };
    let mut members = Vec::with_capacity(len);
    let mut d = from;
    while members.len() < len {
        if in_point_band(d) {
            members.push(d);
        } else if schedule.dims.get(d)?.kind != DimKind::Scalar {
            return None;
        }
        d += 1;
    }
    Some(members)
}

/// The tile band of `len` members at `start` as sums of floors of the point members at
/// dimensions `point`, when every statement's member is exactly such a sum.
fn decompose(schedule: &PlutoSchedule, start: usize, point: Vec<usize>) -> Option<TileBand> {
    let dims = &schedule.dims;
    let len = point.len();
    let n = dims[start].exprs.len();
    let mut terms = Vec::with_capacity(n);
    for s in 0..n {
        let members: Vec<&QuasiAffine> = point.iter().map(|&d| &dims[d].exprs[s]).collect();
        let mut of_stmt = Vec::with_capacity(len);
        for j in 0..len {
            let e = &dims[start + j].exprs[s];
            let mut parts: Vec<(QuasiAffine, i64)> = e
                .floors
                .iter()
                .map(|f| (f.coeff == 1 && f.num.is_affine()).then(|| (f.num.clone(), f.den)))
                .collect::<Option<_>>()?;
            // A member of size 1 appears as itself, in the affine part.
            let linear = AffineExpr::from_terms(e.affine.terms().iter().copied(), 0);
            if !linear.is_constant() {
                parts.push((QuasiAffine::from(linear), 1));
            }
            // Two point members may be the same expression for one statement (a skewed
            // band's time member and the row member of a statement without rows): either
            // serves, each floor taking one.
            let mut sum: Vec<Term> = Vec::with_capacity(parts.len());
            for (num, size) in parts {
                let member =
                    (0..len).find(|&k| *members[k] == num && !sum.iter().any(|t| t.member == k))?;
                sum.push(Term { member, size });
            }
            // The member must be the sum it decomposes into, constants included.
            let expected = sum.iter().try_fold(QuasiAffine::default(), |acc, t| {
                Some(acc.add(&members[t.member].floor_div(t.size)?))
            })?;
            if !same_sum(&expected, e) {
                return None;
            }
            sum.sort_unstable_by_key(|t| t.member);
            of_stmt.push(sum);
        }
        terms.push(of_stmt);
    }
    Some(TileBand {
        start,
        point,
        before: 0,
        terms,
    })
}

/// Whether two quasi-affine expressions are the same sum of terms, in any order.
fn same_sum(a: &QuasiAffine, b: &QuasiAffine) -> bool {
    if a.affine != b.affine || a.floors.len() != b.floors.len() {
        return false;
    }
    let mut used = vec![false; b.floors.len()];
    a.floors.iter().all(|f| {
        let hit = (0..b.floors.len()).find(|&i| !used[i] && b.floors[i] == *f);
        hit.map(|i| used[i] = true).is_some()
    })
}

/// Which distances a cut keeps.
#[derive(Clone, Copy)]
enum Sign {
    Negative,
    Zero,
    Positive,
}

/// Distances of one dependence's pairs along affine schedule dimensions, as constraint rows
/// over `[1, params…, source iterators…, sink iterators…]`.
struct DepQuery<'a> {
    schedule: &'a PlutoSchedule,
    params: Vec<&'a str>,
    src: StmtId,
    dst: StmtId,
    tuples: (Tuple, Tuple),
    np: usize,
    ds: usize,
    dt: usize,
}

impl<'a> DepQuery<'a> {
    fn new(
        program: &'a Program,
        schedule: &'a PlutoSchedule,
        d: &Dependence,
    ) -> Result<DepQuery<'a>, Error> {
        let (ss, ts) = (
            &program.statements[d.source.index()],
            &program.statements[d.sink.index()],
        );
        Ok(DepQuery {
            schedule,
            params: program.params.iter().map(|p| p.name.as_str()).collect(),
            src: d.source,
            dst: d.sink,
            tuples: (stmt_tuple(ss), stmt_tuple(ts)),
            np: program.params.len(),
            ds: ss.depth(),
            dt: ts.depth(),
        })
    }

    /// The row of `sink(to) − source(from)`; the dimensions are affine for the statements.
    fn distance(&self, from: usize, to: usize) -> Result<Vec<i64>, Error> {
        let dims = &self.schedule.dims;
        let (Some(es), Some(et)) = (
            dims[from].exprs[self.src.index()].as_affine(),
            dims[to].exprs[self.dst.index()].as_affine(),
        ) else {
            return Err(Error::Invalid(format!(
                "schedule dimension {from} or {to} is not affine"
            )));
        };
        let width = self.ds + self.dt;
        let rs = affine_row(es, self.np, width);
        let rt = affine_row(&et.map_iters(|k| k + self.ds), self.np, width);
        Ok(rt.iter().zip(&rs).map(|(b, a)| b - a).collect())
    }

    /// The pairs of `pairs` whose distance along `dim` has the given sign.
    fn cut(&self, pairs: &Map, dim: usize, sign: Sign) -> Result<Map, Error> {
        self.cut_between(pairs, dim, dim, sign)
    }

    /// The pairs of `pairs` where the sink's dimension `to` minus the source's dimension
    /// `from` has the given sign.
    fn cut_between(&self, pairs: &Map, from: usize, to: usize, sign: Sign) -> Result<Map, Error> {
        let mut row = self.distance(from, to)?;
        let (eqs, ineqs) = match sign {
            Sign::Zero => (vec![row], Vec::new()),
            Sign::Positive => {
                row[0] -= 1;
                (Vec::new(), vec![row])
            }
            Sign::Negative => {
                for x in row.iter_mut() {
                    *x = -*x;
                }
                row[0] -= 1;
                (Vec::new(), vec![row])
            }
        };
        if eqs
            .iter()
            .chain(&ineqs)
            .all(|r| r[1..].iter().all(Zero::is_zero))
        {
            // A constant distance: every pair or none.
            let c = eqs.first().or(ineqs.first()).map_or(0, |r| r[0]);
            let holds = if eqs.is_empty() { c >= 0 } else { c == 0 };
            return Ok(if holds {
                pairs.clone()
            } else {
                Map::empty(&self.params)
            });
        }
        let cut = Map::from_constraints(
            &self.params,
            self.tuples.0.clone(),
            self.tuples.1.clone(),
            &eqs,
            &ineqs,
        )?;
        Ok(pairs.intersect(&cut))
    }
}

fn violated(program: &Program, d: &Dependence, where_: &str) -> Error {
    let mut text = format!(
        "{} dependence {} -> {} on {} is violated",
        d.kind.name(),
        program.statements[d.source.index()].name,
        program.statements[d.sink.index()].name,
        program.array(d.array).name
    );
    if !where_.is_empty() {
        text.push(' ');
        text.push_str(where_);
    }
    Error::Illegal(text)
}

/// The pairs of a dependence as `{ [time of source] -> [time of sink] }`.
fn timed_pairs(relation: &Map, src: &Map, dst: &Map) -> Map {
    src.reverse().apply_range(relation).apply_range(dst)
}

fn statement_maps(program: &Program, schedule: &PlutoSchedule) -> Result<Vec<Map>, Error> {
    program
        .statement_ids()
        .map(|s| schedule.schedule_map(program, s))
        .collect()
}

/// [`check_legality`] on the composed schedule maps, divisions as existentials: the
/// reference the structural check of tiled schedules is tested against.
pub fn check_legality_exact(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
) -> Result<(), Error> {
    let maps = statement_maps(program, schedule)?;
    let params: Vec<&str> = program.params.iter().map(|p| p.name.as_str()).collect();
    let time = Tuple::anonymous_dims(None, schedule.dims.len());
    let later = Map::lex_lt(&params, &time, &time);
    for d in deps.legality() {
        let pairs = timed_pairs(&d.relation, &maps[d.source.index()], &maps[d.sink.index()]);
        if !pairs.is_subset(&later)? {
            return Err(violated(program, d, ""));
        }
    }
    Ok(())
}

/// [`coincident_dims_among`] on the composed schedule maps, divisions as existentials: exact
/// for every schedule, and slow for tiled ones.
pub fn coincident_dims_exact(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    stmts: &[StmtId],
) -> Result<Vec<bool>, Error> {
    let maps = statement_maps(program, schedule)?;
    let params: Vec<&str> = program.params.iter().map(|p| p.name.as_str()).collect();
    let m = schedule.dims.len();
    let time = Tuple::anonymous_dims(None, m);
    let mut coincident = vec![true; m];
    for d in deps
        .legality()
        .filter(|d| stmts.contains(&d.source) && stmts.contains(&d.sink))
    {
        let pairs = timed_pairs(&d.relation, &maps[d.source.index()], &maps[d.sink.index()]);
        for (k, flag) in coincident.iter_mut().enumerate() {
            if *flag {
                let carried = pairs.intersect(&Map::lex_lt_at(&params, &time, &time, k)?);
                if !carried.is_empty()? {
                    *flag = false;
                }
            }
        }
    }
    Ok(coincident)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Var;
    use crate::schedule::pluto::{Band, DimKind, ScheduleDim};

    fn dim(exprs: Vec<QuasiAffine>) -> ScheduleDim {
        ScheduleDim {
            kind: DimKind::Loop,
            exprs,
            coincident: false,
        }
    }

    fn band(start: usize, len: usize, kind: BandKind) -> Band {
        Band {
            start,
            len,
            permutable: true,
            kind,
        }
    }

    fn iter(k: usize) -> QuasiAffine {
        QuasiAffine::var(Var::Iter(k))
    }

    #[test]
    fn a_wavefront_decomposes_over_its_point_band() {
        let (i, j) = (iter(0), iter(1));
        let ti = i.floor_div(32).unwrap();
        let tj = j.floor_div(8).unwrap();
        let schedule = PlutoSchedule {
            dims: vec![
                dim(vec![ti.add(&tj)]),
                dim(vec![tj.clone()]),
                dim(vec![i.clone()]),
                dim(vec![j.clone()]),
            ],
            bands: vec![band(0, 2, BandKind::Tile), band(2, 2, BandKind::Point)],
        };
        let shape = Shape::of(&schedule).unwrap();
        assert_eq!(shape.skeleton, vec![2, 3]);
        let t = |member, size| Term { member, size };
        assert_eq!(
            shape.bands[0].terms,
            vec![vec![vec![t(0, 32), t(1, 8)], vec![t(1, 8)]]]
        );
        // A tile member that is not a sum of the point band's floors is not decomposed.
        let mut odd = schedule.clone();
        odd.dims[1].exprs[0] = i.add(&j).floor_div(4).unwrap();
        assert!(Shape::of(&odd).is_none());
        // Another size of a member's floor is a floor of its own.
        let mut other = schedule.clone();
        other.dims[1].exprs[0] = j.floor_div(4).unwrap();
        let shape = Shape::of(&other).unwrap();
        assert_eq!(shape.bands[0].terms[0][1], vec![t(1, 4)]);
    }

    /// A skewed band of two statements, `S0[t]` and `S1[t, i]`, with point members `t`,
    /// `t + i` and `i` (all three are `t` for `S0`), split by the scalar dimension that
    /// distributes the statements, under a wavefront whose first member sums `t` itself.
    #[test]
    fn a_point_band_split_by_a_scalar_dimension_with_repeated_members_decomposes() {
        let (t, i) = (iter(0), iter(1));
        let p1 = [t.clone(), t.add(&i)];
        let p2 = [t.clone(), i.clone()];
        let konst = |c: i64| QuasiAffine::from(AffineExpr::from_terms(std::iter::empty(), c));
        let per_stmt = |f: &dyn Fn(usize) -> QuasiAffine| dim(vec![f(0), f(1)]);
        let schedule = PlutoSchedule {
            dims: vec![
                per_stmt(&|s| {
                    t.add(&p1[s].floor_div(16).unwrap())
                        .add(&p2[s].floor_div(8).unwrap())
                }),
                per_stmt(&|s| p1[s].floor_div(16).unwrap()),
                per_stmt(&|s| p2[s].floor_div(8).unwrap()),
                per_stmt(&|_| t.clone()),
                per_stmt(&|s| p1[s].clone()),
                ScheduleDim {
                    kind: DimKind::Scalar,
                    exprs: vec![konst(0), konst(1)],
                    coincident: false,
                },
                per_stmt(&|s| p2[s].clone()),
            ],
            bands: vec![
                band(0, 3, BandKind::Tile),
                band(3, 2, BandKind::Point),
                band(6, 1, BandKind::Point),
            ],
        };
        let shape = Shape::of(&schedule).unwrap();
        assert_eq!(shape.skeleton, vec![3, 4, 5, 6]);
        assert_eq!(shape.bands[0].point, vec![3, 4, 6]);
        let t = |member, size| Term { member, size };
        let terms = &shape.bands[0].terms;
        assert_eq!(
            terms[0],
            vec![
                vec![t(0, 16), t(1, 8), t(2, 1)],
                vec![t(0, 16)],
                vec![t(0, 8)]
            ]
        );
        assert_eq!(
            terms[1],
            vec![
                vec![t(0, 1), t(1, 16), t(2, 8)],
                vec![t(1, 16)],
                vec![t(2, 8)]
            ]
        );
        // Matched by size: S0's three members are all `t`.
        let m = |from, to, size| Matched { from, to, size };
        assert_eq!(
            shape.bands[0].matching(StmtId(0), StmtId(1)).unwrap()[0],
            vec![m(0, 1, 16), m(1, 2, 8), m(2, 0, 1)]
        );
        // A dimension between the point members that is neither scalar nor a point member.
        let mut odd = schedule.clone();
        odd.dims[5].kind = DimKind::Loop;
        assert!(Shape::of(&odd).is_none());
    }

    /// Statements that tile their members differently: `S1[i, j]` orders its point members
    /// `j, i` (distributed after the band), `S2[i]` tiles its one loop along the band's
    /// second member.
    #[test]
    fn statements_that_tile_differently_match_their_floors_by_size() {
        let (i, j) = (iter(0), iter(1));
        let konst = |c: i64| QuasiAffine::from(AffineExpr::from_terms(std::iter::empty(), c));
        let (ti, tj) = (i.floor_div(32).unwrap(), j.floor_div(8).unwrap());
        let schedule = PlutoSchedule {
            dims: vec![
                dim(vec![ti.clone(), ti.clone(), konst(0)]),
                dim(vec![tj.clone(), tj.clone(), i.floor_div(16).unwrap()]),
                dim(vec![i.clone(), j.clone(), i.clone()]),
                dim(vec![j.clone(), i.clone(), konst(0)]),
            ],
            bands: vec![band(0, 2, BandKind::Tile), band(2, 2, BandKind::Point)],
        };
        let shape = Shape::of(&schedule).unwrap();
        let band = &shape.bands[0];
        let t = |member, size| Term { member, size };
        assert_eq!(band.terms[0], vec![vec![t(0, 32)], vec![t(1, 8)]]);
        assert_eq!(band.terms[1], vec![vec![t(1, 32)], vec![t(0, 8)]]);
        assert_eq!(band.terms[2], vec![vec![], vec![t(0, 16)]]);
        let m = |from, to, size| Matched { from, to, size };
        assert_eq!(
            band.matching(StmtId(0), StmtId(1)).unwrap(),
            vec![vec![m(0, 1, 32)], vec![m(1, 0, 8)]]
        );
        assert!(band.matching(StmtId(0), StmtId(2)).is_none());
        assert!(band.matching(StmtId(1), StmtId(2)).is_none());
    }
}
