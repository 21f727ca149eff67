//! Dependence analysis: which statement instances must stay ordered, and why.
//!
//! For every pair of accesses to one array by statements `S` and `T` (possibly `S = T`), the
//! dependence from `S` to `T` relates each instance `S[i]` to the instances `T[j]` that touch the
//! same element after it in the original order:
//!
//! ```text
//! { S[i] -> T[j] : i ∈ D_S, j ∈ D_T, a_S(i) = a_T(j), θ_S(i) ≺ θ_T(j) }
//! ```
//!
//! A quasi-affine access `a_S` (a subscript with the statement's division variables, `A[t % 2]`)
//! enters as the relation it is, each division an existentially quantified local with its two
//! defining inequalities, so its dependences are as exact as an affine access's.
//!
//! *Flow* (write then read), *anti* (read then write) and *output* (write then write) dependences
//! constrain every legal schedule; *input* dependences (read then read) only tell where reuse is.
//! These are memory-based: every earlier access counts, not just the last. Besides them, the
//! value-based flow dependences relate each read to the one write whose value it reads (the
//! last writer, Feautrier's dataflow), which gives the reads whose values come from before the
//! kernel ("upwards-exposed", live-in) and the writes whose values survive it (live-out).
//!
//! The original 2d+1 schedule is used without being built as a map: `S` precedes `T` when they
//! agree on the first `l` shared loop iterators and `S`'s iterator is smaller at loop `l`
//! (carried by loop `l`), or when they agree on all shared loops and `S` comes first in the text
//! (loop-independent). Every dependence is split by that level, which is what schedulers ask.

use rayon::prelude::*;
use std::fmt::Write;

use crate::program::{AccessKind, AffineExpr, ArrayId, Program, Statement, StmtId, Var};
use crate::sets::{self, Map, Set, Tuple};

/// The four kinds of dependence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DepKind {
    /// Write, then read: the read needs the value.
    Flow,
    /// Read, then write: the write must not clobber the value before it is read.
    Anti,
    /// Write, then write: the later value must win.
    Output,
    /// Read, then read: no constraint, only reuse.
    Input,
}

impl DepKind {
    pub fn name(self) -> &'static str {
        match self {
            DepKind::Flow => "flow",
            DepKind::Anti => "anti",
            DepKind::Output => "output",
            DepKind::Input => "input",
        }
    }

    /// Whether every legal schedule must respect it.
    pub fn is_legality(self) -> bool {
        self != DepKind::Input
    }
}

/// Where in the original loop nest a dependence is satisfied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// By the shared loop at this depth (0 = outermost): the source runs in an earlier
    /// iteration of it.
    Loop(usize),
    /// By textual order inside the innermost shared loop (or at top level).
    Textual,
}

/// The range of one component of a dependence's distance vector; `None` means unbounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Distance {
    pub min: Option<i64>,
    pub max: Option<i64>,
}

impl std::fmt::Display for Distance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.min, self.max) {
            (Some(a), Some(b)) if a == b => write!(f, "{a}"),
            (Some(a), Some(b)) => write!(f, "{a}..{b}"),
            (Some(a), None) => write!(f, "{a}.."),
            (None, Some(b)) => write!(f, "..{b}"),
            (None, None) => f.write_str("*"),
        }
    }
}

/// One dependence between two accesses, satisfied at one level of the original schedule.
#[derive(Clone, Debug)]
pub struct Dependence {
    pub kind: DepKind,
    pub source: StmtId,
    pub sink: StmtId,
    pub array: ArrayId,
    /// Index of the source's access in [`Statement::accesses`] (0 is the write).
    pub source_access: usize,
    /// Index of the sink's access in [`Statement::accesses`].
    pub sink_access: usize,
    pub level: Level,
    /// `{ S[i] -> T[j] }`, non-empty.
    pub relation: Map,
    /// The distance `j - i` on each loop the two statements share, outermost first.
    pub distance: Vec<Distance>,
}

/// A read whose value, for some instances, comes from before the kernel.
#[derive(Clone, Debug)]
pub struct LiveIn {
    pub stmt: StmtId,
    /// Index of the read in [`Statement::reads`].
    pub read: usize,
    pub array: ArrayId,
    /// The instances of the statement that read a value no statement wrote.
    pub instances: Set,
}

/// The instances of a statement whose written values are the final contents of their elements.
#[derive(Clone, Debug)]
pub struct LiveOut {
    pub stmt: StmtId,
    pub array: ArrayId,
    pub instances: Set,
}

/// Everything dependence analysis found about a program.
#[derive(Clone, Debug)]
pub struct Dependences {
    /// Memory-based flow, anti, output and input dependences.
    pub memory: Vec<Dependence>,
    /// Value-based flow dependences: each read instance related to its last writer only.
    pub dataflow: Vec<Dependence>,
    pub live_in: Vec<LiveIn>,
    pub live_out: Vec<LiveOut>,
}

impl Dependences {
    /// The memory-based dependences that constrain schedules.
    pub fn legality(&self) -> impl Iterator<Item = &Dependence> {
        self.memory.iter().filter(|d| d.kind.is_legality())
    }
}

/// Why dependence analysis failed: the integer-set library could not answer exactly.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("dependence analysis: {0}")]
pub struct DepsError(#[from] pub sets::Error);

/// The polyhedral view of a program: domains and access relations as sets and maps.
struct Model<'a> {
    program: &'a Program,
    params: Vec<String>,
    domains: Vec<Set>,
    /// Per statement, per access in [`Statement::accesses`] order: `{ S[i] -> A[e] }`
    /// restricted to the domain.
    accesses: Vec<Vec<Map>>,
}

impl<'a> Model<'a> {
    fn new(program: &'a Program) -> Result<Model<'a>, sets::Error> {
        let params: Vec<String> = program.params.iter().map(|p| p.name.clone()).collect();
        let mut model = Model {
            program,
            params,
            domains: Vec::new(),
            accesses: Vec::new(),
        };
        for stmt in &program.statements {
            model.domains.push(model.domain(stmt)?);
            let maps = stmt
                .accesses()
                .map(|(_, acc)| model.access(stmt, &acc.subscripts, acc.array))
                .collect::<Result<Vec<_>, _>>()?;
            model.accesses.push(maps);
        }
        Ok(model)
    }

    fn param_refs(&self) -> Vec<&str> {
        self.params.iter().map(String::as_str).collect()
    }

    fn tuple(&self, stmt: &Statement) -> Tuple {
        let dims: Vec<&str> = stmt.iterators.iter().map(String::as_str).collect();
        Tuple::new(Some(&stmt.name), &dims)
    }

    /// A constraint row `[constant, params…, then `width` iterator columns]` with the
    /// expression's iterators placed from column `offset` of the iterator part (and its
    /// division variables, which only subscripts have, from column `divs`).
    fn row(&self, e: &AffineExpr, offset: usize, divs: usize, width: usize) -> Vec<i64> {
        let np = self.params.len();
        let mut row = vec![0; 1 + np + width];
        row[0] = e.constant;
        for &(v, c) in e.terms() {
            match v {
                Var::Param(p) => row[1 + p.index()] += c,
                Var::Iter(d) => row[1 + np + offset + d] += c,
                Var::Div(k) => row[1 + np + divs + k] += c,
            }
        }
        row
    }

    /// Domain constraints of `stmt` as rows, its iterators at `offset` of `width` columns.
    fn domain_rows(
        &self,
        stmt: &Statement,
        offset: usize,
        width: usize,
    ) -> (Vec<Vec<i64>>, Vec<Vec<i64>>) {
        let mut eqs = Vec::new();
        let mut ineqs = Vec::new();
        for c in &stmt.domain {
            // Domains have no division variables.
            let row = self.row(&c.expr, offset, width, width);
            match c.kind {
                crate::program::ConstraintKind::Zero => eqs.push(row),
                crate::program::ConstraintKind::NonNegative => ineqs.push(row),
            }
        }
        (eqs, ineqs)
    }

    fn domain(&self, stmt: &Statement) -> Result<Set, sets::Error> {
        let (eqs, ineqs) = self.domain_rows(stmt, 0, stmt.depth());
        Set::from_constraints(&self.param_refs(), self.tuple(stmt), &eqs, &ineqs)
    }

    /// `{ S[i] -> A[subscripts] }` on the domain; the statement's division variables are
    /// locals, each with its two defining inequalities.
    fn access(
        &self,
        stmt: &Statement,
        subscripts: &[AffineExpr],
        array: ArrayId,
    ) -> Result<Map, sets::Error> {
        let depth = stmt.depth();
        let divs = depth + subscripts.len();
        let width = divs + stmt.divs.len();
        let (mut eqs, mut ineqs) = self.domain_rows(stmt, 0, width);
        for (k, d) in stmt.divs.iter().enumerate() {
            // den·q <= num <= den·q + den - 1
            let num = self.row(&d.num, 0, divs, width);
            let q = 1 + self.params.len() + divs + k;
            let mut lo = num.clone();
            lo[q] -= d.den;
            let mut hi: Vec<i64> = num.iter().map(|x| -x).collect();
            hi[q] += d.den;
            hi[0] += d.den - 1;
            ineqs.push(lo);
            ineqs.push(hi);
        }
        for (k, sub) in subscripts.iter().enumerate() {
            let mut row = self.row(sub, 0, divs, width);
            row[1 + self.params.len() + depth + k] -= 1;
            eqs.push(row);
        }
        let out = Tuple::anonymous_dims(Some(&self.program.array(array).name), subscripts.len());
        Map::from_constraints_with_locals(
            &self.param_refs(),
            self.tuple(stmt),
            out,
            stmt.divs.len(),
            &eqs,
            &ineqs,
        )
    }

    /// How many loops two statements share.
    fn shared_loops(&self, s: &Statement, t: &Statement) -> usize {
        let max = s.depth().min(t.depth());
        (0..max)
            .take_while(|&l| s.position[..=l] == t.position[..=l])
            .count()
    }

    /// `{ S[i] -> T[j] }` where `S[i]` runs before `T[j]` in the original order, first
    /// differing at `level`; `None` when no instance pair can.
    fn precedes(
        &self,
        s: &Statement,
        t: &Statement,
        level: Level,
    ) -> Result<Option<Map>, sets::Error> {
        let shared = self.shared_loops(s, t);
        let (equal, strict) = match level {
            Level::Loop(l) if l < shared => (l, Some(l)),
            Level::Loop(_) => return Ok(None),
            Level::Textual => {
                if shared == s.depth() && shared == t.depth() && s.position == t.position {
                    // The same statement: an instance does not precede itself.
                    return Ok(None);
                }
                if s.position[shared] >= t.position[shared] {
                    return Ok(None);
                }
                (shared, None)
            }
        };
        let width = s.depth() + t.depth();
        let np = self.params.len();
        let col = |side: usize, d: usize| 1 + np + side * s.depth() + d;
        let mut eqs = Vec::new();
        let mut ineqs = Vec::new();
        for d in 0..equal {
            let mut row = vec![0; 1 + np + width];
            row[col(0, d)] = 1;
            row[col(1, d)] = -1;
            eqs.push(row);
        }
        if let Some(d) = strict {
            // j_d - i_d - 1 >= 0
            let mut row = vec![0; 1 + np + width];
            row[0] = -1;
            row[col(0, d)] = -1;
            row[col(1, d)] = 1;
            ineqs.push(row);
        }
        Map::from_constraints(
            &self.param_refs(),
            self.tuple(s),
            self.tuple(t),
            &eqs,
            &ineqs,
        )
        .map(Some)
    }

    /// `{ S[i] -> [i_0, …, i_(n-1)] }`: the first `n` iterators.
    fn prefix(&self, stmt: &Statement, n: usize) -> Result<Map, sets::Error> {
        let np = self.params.len();
        let width = stmt.depth() + n;
        let eqs: Vec<Vec<i64>> = (0..n)
            .map(|d| {
                let mut row = vec![0; 1 + np + width];
                row[1 + np + d] = 1;
                row[1 + np + stmt.depth() + d] = -1;
                row
            })
            .collect();
        Map::from_constraints(
            &self.param_refs(),
            self.tuple(stmt),
            Tuple::anonymous_dims(None, n),
            &eqs,
            &[],
        )
    }

    /// The distance vector's range on the loops `S` and `T` share.
    fn distance(
        &self,
        s: &Statement,
        t: &Statement,
        relation: &Map,
    ) -> Result<Vec<Distance>, sets::Error> {
        let shared = self.shared_loops(s, t);
        if shared == 0 {
            return Ok(Vec::new());
        }
        let pairs = self
            .prefix(s, shared)?
            .reverse()
            .apply_range(relation)
            .apply_range(&self.prefix(t, shared)?);
        // Without the iterators as locals, each dimension's range is a small question.
        let deltas = pairs.deltas().without_locals()?;
        (0..shared)
            .map(|d| {
                Ok(match deltas.dim_range(d)? {
                    Some(r) => Distance {
                        min: r.min,
                        max: r.max,
                    },
                    None => Distance {
                        min: None,
                        max: None,
                    },
                })
            })
            .collect()
    }

    /// The schedule map `{ S[i] -> [p_0, i_0, p_1, …, p_d, 0, …] }` padded to `width`.
    fn schedule(&self, stmt: &Statement, width: usize) -> Result<Map, sets::Error> {
        let np = self.params.len();
        let cols = stmt.depth() + width;
        let (mut eqs, ineqs) = self.domain_rows(stmt, 0, cols);
        for (k, e) in stmt.original_schedule().iter().enumerate() {
            let mut row = self.row(e, 0, cols, cols);
            row[1 + np + stmt.depth() + k] -= 1;
            eqs.push(row);
        }
        for k in stmt.original_schedule().len()..width {
            let mut row = vec![0; 1 + np + cols];
            row[1 + np + stmt.depth() + k] = 1;
            eqs.push(row);
        }
        Map::from_constraints(
            &self.param_refs(),
            self.tuple(stmt),
            Tuple::anonymous_dims(None, width),
            &eqs,
            &ineqs,
        )
    }
}

/// Computes every dependence of `program` under its original schedule.
pub fn compute_dependences(program: &Program) -> Result<Dependences, DepsError> {
    let model = Model::new(program)?;
    let memory = memory_dependences(&model)?;
    let (dataflow, live_in) = dataflow(&model, &memory)?;
    let live_out = live_out(&model)?;
    Ok(Dependences {
        memory,
        dataflow,
        live_in,
        live_out,
    })
}

/// Whether `program`, at its parameters' values, writes every element of `array` (a
/// caller's contents of an output it writes only in part show through where it does not).
pub fn writes_every_element(program: &Program, array: ArrayId) -> Result<bool, DepsError> {
    let model = Model::new(program)?;
    let shape = &program.array(array).shape;
    let np = model.params.len();
    let width = shape.len();
    let mut eqs = Vec::new();
    let mut ineqs = Vec::new();
    for (p, value) in program.param_values().into_iter().enumerate() {
        let mut row = vec![0; 1 + np + width];
        row[0] = -value;
        row[1 + p] = 1;
        eqs.push(row);
    }
    for (d, extent) in shape.iter().enumerate() {
        // 0 <= x_d <= extent - 1
        let mut low = vec![0; 1 + np + width];
        low[1 + np + d] = 1;
        ineqs.push(low);
        let mut high = model.row(extent, 0, width, width);
        high[0] -= 1;
        high[1 + np + d] -= 1;
        ineqs.push(high);
    }
    let name = &program.array(array).name;
    let every = Set::from_constraints(
        &model.param_refs(),
        Tuple::anonymous_dims(Some(name), width),
        &eqs,
        &ineqs,
    )?;
    let mut rest = every;
    for (k, stmt) in program.statements.iter().enumerate() {
        if stmt.write.array == array {
            rest = rest.subtract(&model.accesses[k][0].range())?;
        }
    }
    Ok(rest.is_empty()?)
}

/// The memory-based dependences of every ordered pair of statements: per pair the levels
/// at which its instances can be ordered, then every pair of their accesses to one array,
/// both computed side by side on the machine's cores and listed in the order of a sequential
/// walk.
fn memory_dependences(model: &Model) -> Result<Vec<Dependence>, sets::Error> {
    let program = model.program;
    let n = program.statements.len();
    let pairs: Vec<(usize, usize)> = (0..n).flat_map(|s| (0..n).map(move |t| (s, t))).collect();
    let orders = pairs
        .par_iter()
        .map(|&(si, ti)| orders(model, si, ti))
        .collect::<Vec<_>>()
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let mut accesses = Vec::new();
    for (p, &(si, ti)) in pairs.iter().enumerate() {
        if orders[p].is_empty() {
            continue;
        }
        let (s, t) = (&program.statements[si], &program.statements[ti]);
        for (a, (ka, acc_a)) in s.accesses().enumerate() {
            for (b, (kb, acc_b)) in t.accesses().enumerate() {
                if acc_a.array == acc_b.array {
                    let kind = match (ka, kb) {
                        (AccessKind::Write, AccessKind::Read) => DepKind::Flow,
                        (AccessKind::Read, AccessKind::Write) => DepKind::Anti,
                        (AccessKind::Write, AccessKind::Write) => DepKind::Output,
                        (AccessKind::Read, AccessKind::Read) => DepKind::Input,
                    };
                    accesses.push(AccessPair {
                        kind,
                        array: acc_a.array,
                        source: (si, a),
                        sink: (ti, b),
                        orders: p,
                    });
                }
            }
        }
    }
    let per_access: Vec<Result<Vec<Dependence>, sets::Error>> = accesses
        .par_iter()
        .map(|pair| access_dependences(model, pair, &orders[pair.orders]))
        .collect();
    let mut deps = Vec::new();
    for found in per_access {
        deps.extend(found?);
    }
    Ok(deps)
}

/// The levels at which an instance of statement `si` can come before one of `ti`, each with
/// the relation of the instance pairs so ordered.
fn orders(model: &Model, si: usize, ti: usize) -> Result<Vec<(Level, Map)>, sets::Error> {
    let program = model.program;
    let (s, t) = (&program.statements[si], &program.statements[ti]);
    (0..model.shared_loops(s, t))
        .map(Level::Loop)
        .chain([Level::Textual])
        .filter_map(|level| model.precedes(s, t, level).transpose().map(|m| (level, m)))
        .map(|(level, m)| m.map(|m| (level, m)))
        .collect()
}

/// Two accesses to one array whose statements' instances can be ordered: the kind of
/// dependence between them, the array, each end as (statement, access) and the index of
/// the statement pair's orders.
struct AccessPair {
    kind: DepKind,
    array: ArrayId,
    source: (usize, usize),
    sink: (usize, usize),
    orders: usize,
}

/// The memory-based dependences of `pair`, one per level of `orders` at which its accesses
/// meet.
fn access_dependences(
    model: &Model,
    pair: &AccessPair,
    orders: &[(Level, Map)],
) -> Result<Vec<Dependence>, sets::Error> {
    let program = model.program;
    let ((si, a), (ti, b)) = (pair.source, pair.sink);
    let (s, t) = (&program.statements[si], &program.statements[ti]);
    let same = model.accesses[si][a].apply_range(&model.accesses[ti][b].reverse());
    let mut deps = Vec::new();
    for (level, order) in orders {
        let relation = same.intersect(order);
        if relation.is_empty()? {
            continue;
        }
        let relation = relation.simplify()?;
        let distance = model.distance(s, t, &relation)?;
        deps.push(Dependence {
            kind: pair.kind,
            source: StmtId(si as u32),
            sink: StmtId(ti as u32),
            array: pair.array,
            source_access: a,
            sink_access: b,
            level: *level,
            relation,
            distance,
        });
    }
    Ok(deps)
}

/// Width of the padded original schedules: the longest 2d+1 vector.
fn schedule_width(program: &Program) -> usize {
    program
        .statements
        .iter()
        .map(|s| 2 * s.depth() + 1)
        .max()
        .unwrap_or(1)
}

/// The value-based flow dependences and the upwards-exposed reads.
fn dataflow(
    model: &Model,
    memory: &[Dependence],
) -> Result<(Vec<Dependence>, Vec<LiveIn>), sets::Error> {
    let program = model.program;
    let width = schedule_width(program);
    let schedules: Vec<Map> = program
        .statements
        .iter()
        .map(|s| model.schedule(s, width))
        .collect::<Result<_, _>>()?;
    let reads: Vec<(usize, usize)> = program
        .statements
        .iter()
        .enumerate()
        .flat_map(|(t, stmt)| (0..stmt.reads.len()).map(move |r| (t, r)))
        .collect();
    let per_read: Vec<ReadFlow> = reads
        .par_iter()
        .map(|&(t, r)| read_dataflow(model, memory, &schedules, t, r))
        .collect();
    let mut flows = Vec::new();
    let mut live_in = Vec::new();
    for read in per_read {
        let (read_flows, read_live_in) = read?;
        flows.extend(read_flows);
        live_in.extend(read_live_in);
    }
    Ok((flows, live_in))
}

/// The value-based flow dependences into one read and its upwards-exposed instances.
type ReadFlow = Result<(Vec<Dependence>, Vec<LiveIn>), sets::Error>;

/// The value-based flow dependences into read `r` of statement `ti` and its instances that no
/// write reaches, from `memory`'s flow dependences and the statements' original `schedules`.
fn read_dataflow(
    model: &Model,
    memory: &[Dependence],
    schedules: &[Map],
    ti: usize,
    r: usize,
) -> ReadFlow {
    let program = model.program;
    let t = &program.statements[ti];
    let read = &t.reads[r];
    let mut flows = Vec::new();
    let mut live_in = Vec::new();
    let sink_access = r + 1;
    // Every earlier write of the element, as { T[j] -> [time of the write] }.
    let sources: Vec<&Dependence> = memory
        .iter()
        .filter(|d| d.kind == DepKind::Flow && d.sink.index() == ti && d.sink_access == sink_access)
        .collect();
    let reads = model.accesses[ti][sink_access].domain();
    let mut statements: Vec<StmtId> = sources.iter().map(|d| d.source).collect();
    statements.sort();
    statements.dedup();
    if statements.is_empty() {
        live_in.push(LiveIn {
            stmt: StmtId(ti as u32),
            read: r,
            array: read.array,
            instances: reads,
        });
        return Ok((flows, live_in));
    }
    // Per read instance, the last write: { T[j] -> S[i] } for each source statement S.
    let last_writers: Vec<(StmtId, Map)> = if let [only] = statements[..] {
        // With one source statement, the original order of its instances is the
        // lexicographic order of its iterators: no need to go through schedules.
        let all = union_all(sources.iter().map(|d| d.relation.reverse()));
        vec![(only, all.lexmax()?)]
    } else {
        let timed = union_all(sources.iter().map(|d| {
            d.relation
                .reverse()
                .apply_range(&schedules[d.source.index()])
        }));
        let latest = timed.lexmax()?;
        statements
            .iter()
            .map(|&s| (s, latest.apply_range(&schedules[s.index()].reverse())))
            .collect()
    };
    let written = last_writers
        .iter()
        .map(|(_, m)| m.domain())
        .reduce(|a, b| a.union(&b))
        .expect("there is at least one source statement");
    let exposed = reads.subtract(&written)?.simplify()?;
    if !exposed.is_empty()? {
        live_in.push(LiveIn {
            stmt: StmtId(ti as u32),
            read: r,
            array: read.array,
            instances: exposed,
        });
    }
    for (source, last) in last_writers {
        let s = &program.statements[source.index()];
        let relation = last.reverse().simplify()?;
        if relation.is_empty()? {
            continue;
        }
        for (level, order) in levels_of(model, s, t)? {
            let part = relation.intersect(&order);
            if part.is_empty()? {
                continue;
            }
            let part = part.simplify()?;
            let distance = model.distance(s, t, &part)?;
            flows.push(Dependence {
                kind: DepKind::Flow,
                source,
                sink: StmtId(ti as u32),
                array: read.array,
                source_access: 0,
                sink_access,
                level,
                relation: part,
                distance,
            });
        }
    }
    Ok((flows, live_in))
}

/// The union of non-empty many maps (the caller guarantees at least one).
fn union_all(maps: impl Iterator<Item = Map>) -> Map {
    maps.reduce(|a, b| a.union(&b))
        .expect("callers pass at least one map")
}

fn levels_of(
    model: &Model,
    s: &Statement,
    t: &Statement,
) -> Result<Vec<(Level, Map)>, sets::Error> {
    let mut out = Vec::new();
    for level in (0..model.shared_loops(s, t))
        .map(Level::Loop)
        .chain([Level::Textual])
    {
        if let Some(m) = model.precedes(s, t, level)? {
            out.push((level, m));
        }
    }
    Ok(out)
}

/// The writes whose values are the final contents of their elements, for live-out arrays.
fn live_out(model: &Model) -> Result<Vec<LiveOut>, sets::Error> {
    let program = model.program;
    let width = schedule_width(program);
    let mut out = Vec::new();
    for (ai, array) in program.arrays.iter().enumerate() {
        if !array.role.is_live_out() {
            continue;
        }
        let writers: Vec<usize> = program
            .statements
            .iter()
            .enumerate()
            .filter(|(_, s)| s.write.array.index() == ai)
            .map(|(k, _)| k)
            .collect();
        let mut timed: Option<Map> = None;
        let mut schedules = Vec::new();
        for &k in &writers {
            let schedule = model.schedule(&program.statements[k], width)?;
            let m = model.accesses[k][0].reverse().apply_range(&schedule);
            timed = Some(match timed {
                None => m,
                Some(t) => t.union(&m),
            });
            schedules.push(schedule);
        }
        let Some(timed) = timed else { continue };
        let latest = timed.lexmax()?;
        for (&k, schedule) in writers.iter().zip(&schedules) {
            let instances = latest.apply_range(&schedule.reverse()).range().simplify()?;
            if !instances.is_empty()? {
                out.push(LiveOut {
                    stmt: StmtId(k as u32),
                    array: ArrayId(ai as u32),
                    instances,
                });
            }
        }
    }
    Ok(out)
}

impl Dependences {
    /// The printed form used by `--emit deps` and snapshots.
    pub fn display(&self, program: &Program) -> String {
        let mut out = String::new();
        let name = |s: StmtId| program.statements[s.index()].name.as_str();
        let describe = |d: &Dependence| {
            let s = &program.statements[d.source.index()];
            let level = match d.level {
                Level::Loop(l) => format!("carried by loop {} ({})", l, s.iterators[l]),
                Level::Textual => "loop-independent".to_string(),
            };
            let distance: Vec<String> = d.distance.iter().map(|x| x.to_string()).collect();
            format!(
                "{:<6} {} -> {} on {}, {level}, distance ({})\n    {}\n",
                d.kind.name(),
                name(d.source),
                name(d.sink),
                program.array(d.array).name,
                distance.join(", "),
                d.relation
            )
        };
        let _ = writeln!(out, "memory-based dependences:");
        for d in &self.memory {
            out += &format!("  {}", describe(d));
        }
        let _ = writeln!(out, "value-based flow dependences:");
        for d in &self.dataflow {
            out += &format!("  {}", describe(d));
        }
        let _ = writeln!(out, "live-in reads:");
        for l in &self.live_in {
            let s = &program.statements[l.stmt.index()];
            let _ = writeln!(
                out,
                "  {} reads {}: {}",
                s.name,
                program.display_element(s, &s.reads[l.read]),
                l.instances
            );
        }
        let _ = writeln!(out, "live-out writes:");
        for l in &self.live_out {
            let _ = writeln!(
                out,
                "  {} writes {}: {}",
                name(l.stmt),
                program.array(l.array).name,
                l.instances
            );
        }
        out
    }
}
