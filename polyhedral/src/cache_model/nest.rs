//! The loop structure the cache model works on, built from a flat schedule.
//!
//! Every dimension of the flat schedule is a *position*. For one statement a position is a
//! scalar (a constant that orders loop nests), a *point* loop over one of the statement's
//! *coordinates* (an affine loop function `φ` of its iterators: a point-band member or a loop
//! outside any tiled band), a *tile* loop over one of them (`floor(φ / T)`, `T` read from a
//! size *slot*, so that the same model can be evaluated for other tile sizes), or fixed (the
//! statement does not move along a loop that other statements share).
//!
//! A statement's coordinates must be as many as its iterators and independent, so that every
//! subscript is an affine function of them, and each must move one iterator (no skewed
//! loops); a wavefront tile loop (the sum of a band's tile members) counts as the tile loop of
//! its first member. Anything else is [`Unsupported`].
//!
//! The positions form a tree: a loop position is a loop node over the statements that move
//! along it; a scalar position whose statements have different constants is a sequence node;
//! each statement ends in a leaf. Every array is one reference group whose members are the
//! accesses to it, as functions of their statement's coordinates; scalars (arrays of no
//! dimension) are left out, as the generated code keeps them in registers.

use std::collections::BTreeMap;

use num_rational::Rational64;
use num_traits::Zero;

use crate::passes::intra_tile::invert;
use crate::passes::register_tile;
use crate::program::{AffineExpr, ArrayId, Program, Var};
use crate::schedule::expr::QuasiAffine;
use crate::schedule::pluto::{Band, BandKind, DimKind, PlutoSchedule};
use crate::target::VectorUnit;

use super::packing::{Buffer, Frame};
use super::shape::domain_shape;
use super::Unsupported;

/// What one position is for one statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// A scalar dimension's constant.
    Scalar(i64),
    /// A point loop over coordinate `0`.
    Point(usize),
    /// A tile loop over coordinate `coord`, of the size in slot `slot`.
    Tile { coord: usize, slot: usize },
    /// A loop the statement does not move along.
    Fixed,
}

/// A position's entry for one statement, before coordinates are numbered.
#[derive(Clone, Debug)]
enum Entry {
    Constant(i64),
    Affine(AffineExpr),
    Tile { phi: AffineExpr, slot: usize },
}

struct Position {
    kind: DimKind,
    /// One entry per statement.
    entries: Vec<Entry>,
}

/// A statement as the model sees it.
#[derive(Clone, Debug)]
pub(crate) struct StmtModel {
    pub roles: Vec<Role>,
    /// Per coordinate: least and greatest value over the domain.
    pub ranges: Vec<(f64, f64)>,
    /// Per coordinate: whether the domain ties it to another coordinate (a triangle, a skew).
    pub coupled: Vec<bool>,
    /// Instances over the volume of the coordinates' box: 1 for a rectangular domain.
    pub fill: f64,
    /// For the copy of a packed buffer (`packing.rs`): the copy's number, shared by the
    /// statements that copy one buffer in (or out) together.
    pub copy: Option<usize>,
}

/// One access of a reference group: its subscripts as affine functions of its statement's
/// coordinates.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub stmt: usize,
    /// Per subscript: coefficients per coordinate, and the constant.
    pub subscripts: Vec<(Vec<f64>, f64)>,
    /// The fraction of its box the access's image fills: the statement's fill when every
    /// coupled iterator appears in a subscript (the image has the domain's shape), else 1.
    pub fill: f64,
    /// For an access to a packed buffer, how each coordinate of the statement places it in
    /// the buffer (`packing.rs`); its subscripts are then in the buffer's dimension order.
    pub frames: Option<Vec<Frame>>,
}

/// Every access to one array.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub array: ArrayId,
    /// The array's extents.
    pub extents: Vec<f64>,
    pub elem_bytes: f64,
    pub members: Vec<Member>,
    /// For a packed buffer of the array, where it is (then `extents` are the array's, in
    /// the buffer's dimension order: the buffer's own follow from the tile sizes).
    pub buffer: Option<Buffer>,
}

#[derive(Clone, Debug)]
pub(crate) enum Node {
    Loop {
        position: usize,
        stmts: Vec<usize>,
        body: usize,
    },
    Sequence {
        stmts: Vec<usize>,
        children: Vec<usize>,
    },
    Leaf {
        stmt: usize,
    },
    /// The copies of one packed buffer in or out: loops over the buffer's box, which touch
    /// each of its lines once.
    Copy {
        stmts: Vec<usize>,
    },
}

impl Node {
    pub fn stmts(&self) -> Vec<usize> {
        match self {
            Node::Loop { stmts, .. } | Node::Sequence { stmts, .. } | Node::Copy { stmts } => {
                stmts.clone()
            }
            Node::Leaf { stmt } => vec![*stmt],
        }
    }
}

/// The loop structure of a program under one schedule, with its tile sizes in slots.
#[derive(Clone, Debug)]
pub struct Model {
    pub(crate) stmts: Vec<StmtModel>,
    pub(crate) groups: Vec<Group>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) root: usize,
    /// Per position: the loop counter's value at the middle of the iteration space, where the
    /// model takes its representative blocks.
    pub(crate) middle: Vec<f64>,
    /// The tile size of every slot, as the schedule has it.
    pub sizes: Vec<i64>,
    /// The register tile the band's point loops get, if any: its rows and columns are tile
    /// loops whose sizes follow from the band's (see [`Model::slot_sizes`]).
    pub(crate) register: Option<RegisterBlocking>,
    /// With a register tile, the position of its first loop: the point loops from there on
    /// run in the register tile's order.
    pub(crate) register_at: Option<usize>,
}

/// A register tile of one row in a final schedule: the code walks its columns in blocks of
/// `width` outside the loops of its band, so the blocks are a tile loop in front of the
/// band's first loop, dimension `at`; `columns` holds the columns loop's function of each
/// statement of the band.
#[derive(Clone, Debug)]
pub struct ColumnBlocks {
    pub at: usize,
    pub columns: Vec<(usize, AffineExpr)>,
    pub width: i64,
}

/// A register tile ([`crate::passes::register_tile`]) inside the tiles of a band: the band members of
/// its rows and its columns, and the vector unit and lanes its shape comes from. Between its
/// copies the accumulators stay in registers while the members between rows and columns run,
/// so the code walks blocks of `rows × cols` elements with those members inside them.
#[derive(Clone, Debug)]
pub struct RegisterBlocking {
    pub rows: usize,
    pub cols: usize,
    pub unit: VectorUnit,
    pub lanes: i64,
}

impl Model {
    /// The size of every slot for the band sizes `sizes`: those, then (with a register tile)
    /// the tile's rows and columns, the shape [`register_tile::shape`] picks for tiles of
    /// these sizes.
    pub fn slot_sizes(&self, sizes: &[i64]) -> Vec<i64> {
        let mut all = sizes.to_vec();
        if let Some(r) = &self.register {
            let at = |k: usize| sizes.get(k).copied();
            let (rows, vectors) =
                register_tile::shape(&r.unit, r.lanes, at(r.rows), at(r.cols)).unwrap_or((1, 1));
            all.extend([rows, vectors * r.lanes]);
        }
        all
    }
}

impl Model {
    /// The model of `schedule` as it is: every statement's tile loop has a slot of its own
    /// holding its size (tiling may order the tile loops of different loop nests differently,
    /// so one dimension can tile different members).
    pub fn of_schedule(program: &Program, schedule: &PlutoSchedule) -> Result<Model, Unsupported> {
        Model::of_schedule_with(program, schedule, &[])
    }

    /// [`Model::of_schedule`] with the column blocks of register tiles of one row: each adds a
    /// tile loop of its own slot in front of its dimension.
    pub fn of_schedule_with(
        program: &Program,
        schedule: &PlutoSchedule,
        blocks: &[ColumnBlocks],
    ) -> Result<Model, Unsupported> {
        let mut sizes = Vec::new();
        let mut positions = Vec::with_capacity(schedule.dims.len() + blocks.len());
        for (d, dim) in schedule.dims.iter().enumerate() {
            for block in blocks.iter().filter(|b| b.at == d) {
                sizes.push(block.width);
                let slot = sizes.len() - 1;
                positions.push(Position {
                    kind: DimKind::Loop,
                    entries: (0..program.statements.len())
                        .map(|s| match block.columns.iter().find(|(t, _)| *t == s) {
                            Some((_, phi)) => Entry::Tile {
                                phi: phi.clone(),
                                slot,
                            },
                            None => Entry::Constant(0),
                        })
                        .collect(),
                });
            }
            let tile = schedule
                .band_of(d)
                .is_some_and(|b| b.kind == BandKind::Tile);
            let entries = dim
                .exprs
                .iter()
                .map(|e| {
                    let (entry, den) = classify(e, tile.then_some(sizes.len()))?;
                    // A tile of size 1 is its point loop, written without a division.
                    Ok(match entry {
                        Entry::Affine(phi) if tile => {
                            sizes.push(1);
                            Entry::Tile {
                                phi,
                                slot: sizes.len() - 1,
                            }
                        }
                        Entry::Tile { phi, slot } => {
                            sizes.push(den.unwrap_or(1));
                            Entry::Tile { phi, slot }
                        }
                        other => other,
                    })
                })
                .collect::<Result<Vec<_>, Unsupported>>()?;
            positions.push(Position {
                kind: dim.kind,
                entries,
            });
        }
        build(program, positions, sizes)
    }

    /// The model of `schedule` (not yet tiled) with `band` tiled: tile loops in the band's
    /// order, member `k`'s size in slot `k`, then the point loops in `order` (indices into the
    /// band), as tiling and the intra-tile permutation will leave them. With a register tile,
    /// its row and column blocks come between (slots `band.len` and `band.len + 1`), and the
    /// point loops of the other members run outside its rows and columns.
    pub fn with_band_tiled(
        program: &Program,
        schedule: &PlutoSchedule,
        band: &Band,
        order: &[usize],
        register: Option<RegisterBlocking>,
    ) -> Result<Model, Unsupported> {
        let orders = vec![order.to_vec(); program.statements.len()];
        Model::with_nests_tiled(program, schedule, band, &orders, register)
    }

    /// [`Model::with_band_tiled`] with the point loops of each statement in its own order
    /// (`orders[s]`): statements that scalar dimensions put into different loop nests share
    /// the band's tile sizes, but each nest's point loops are permuted on their own.
    pub fn with_nests_tiled(
        program: &Program,
        schedule: &PlutoSchedule,
        band: &Band,
        orders: &[Vec<usize>],
        register: Option<RegisterBlocking>,
    ) -> Result<Model, Unsupported> {
        // Statement `s`'s entry of dimension `d`, a tile loop's in `slot`.
        let entry = |d: usize, s: usize, slot: Option<usize>| -> Result<Entry, Unsupported> {
            let e = &schedule.dims[d].exprs[s];
            Ok(match (classify(e, None)?.0, slot) {
                (Entry::Affine(phi), Some(slot)) => Entry::Tile { phi, slot },
                (other, _) => other,
            })
        };
        let plain = |d: usize| -> Result<Position, Unsupported> {
            Ok(Position {
                kind: schedule.dims[d].kind,
                entries: (0..orders.len())
                    .map(|s| entry(d, s, None))
                    .collect::<Result<_, _>>()?,
            })
        };
        let mut positions = Vec::with_capacity(schedule.dims.len() + band.len + 2);
        for d in 0..band.start {
            positions.push(plain(d)?);
        }
        for k in 0..band.len {
            positions.push(Position {
                kind: DimKind::Loop,
                entries: (0..orders.len())
                    .map(|s| entry(band.start + k, s, Some(k)))
                    .collect::<Result<_, _>>()?,
            });
        }
        let mut points = orders.to_vec();
        if let Some(r) = &register {
            for (slot, k) in [(band.len, r.rows), (band.len + 1, r.cols)] {
                positions.push(Position {
                    kind: DimKind::Loop,
                    entries: (0..orders.len())
                        .map(|s| entry(band.start + k, s, Some(slot)))
                        .collect::<Result<_, _>>()?,
                });
            }
            for order in &mut points {
                order.retain(|&k| k != r.rows && k != r.cols);
                order.extend([r.rows, r.cols]);
            }
        }
        for p in 0..points.first().map_or(0, Vec::len) {
            positions.push(Position {
                kind: DimKind::Loop,
                entries: points
                    .iter()
                    .enumerate()
                    .map(|(s, order)| entry(band.start + order[p], s, None))
                    .collect::<Result<_, _>>()?,
            });
        }
        for d in band.start + band.len..schedule.dims.len() {
            positions.push(plain(d)?);
        }
        let slots = band.len + if register.is_some() { 2 } else { 0 };
        let mut model = build(program, positions, vec![1; slots])?;
        model.register_at = register.as_ref().map(|_| band.start + band.len);
        model.register = register;
        Ok(model)
    }
}

/// What a schedule expression is for one statement; a division needs a slot (`tile`), and its
/// denominator is returned with it.
fn classify(e: &QuasiAffine, tile: Option<usize>) -> Result<(Entry, Option<i64>), Unsupported> {
    if e.floors.is_empty() {
        return Ok(if e.affine.terms().is_empty() {
            (Entry::Constant(e.affine.constant), None)
        } else {
            (Entry::Affine(e.affine.clone()), None)
        });
    }
    let simple = e.affine.terms().is_empty()
        && e.affine.constant == 0
        && e.floors.iter().all(|f| f.coeff == 1 && f.num.is_affine());
    match (simple, tile) {
        (true, Some(slot)) => {
            let first = &e.floors[0];
            Ok((
                Entry::Tile {
                    phi: first.num.affine.clone(),
                    slot,
                },
                Some(first.den),
            ))
        }
        _ => Err(Unsupported(
            "a schedule dimension with divisions outside a tile band".into(),
        )),
    }
}

fn build(
    program: &Program,
    positions: Vec<Position>,
    sizes: Vec<i64>,
) -> Result<Model, Unsupported> {
    let params = program.param_values();
    let n_stmts = program.statements.len();
    let mut stmts = Vec::with_capacity(n_stmts);
    let mut groups: BTreeMap<ArrayId, Group> = BTreeMap::new();
    for (si, stmt) in program.statements.iter().enumerate() {
        let mut coords: Vec<AffineExpr> = Vec::new();
        for p in &positions {
            if let Entry::Affine(phi) = &p.entries[si] {
                if p.kind == DimKind::Loop && !coords.contains(phi) {
                    coords.push(phi.clone());
                }
            }
        }
        let roles = positions
            .iter()
            .map(|p| match (&p.entries[si], p.kind) {
                (Entry::Constant(c), DimKind::Scalar) => Ok(Role::Scalar(*c)),
                (Entry::Constant(_), DimKind::Loop) => Ok(Role::Fixed),
                (Entry::Affine(phi), DimKind::Loop) => Ok(Role::Point(
                    coords.iter().position(|c| c == phi).unwrap_or_default(),
                )),
                (Entry::Tile { phi, slot }, DimKind::Loop) => {
                    match coords.iter().position(|c| c == phi) {
                        Some(coord) => Ok(Role::Tile { coord, slot: *slot }),
                        None => Err(Unsupported(
                            "a tile loop whose point loop is missing".into(),
                        )),
                    }
                }
                _ => Err(Unsupported("a scalar dimension that varies".into())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let depth = stmt.depth();
        // A quasi-affine subscript (`A[t % 2]`) is no affine function of the loops.
        if stmt.has_divisions() {
            return Err(Unsupported(format!(
                "the quasi-affine subscripts of statement {}",
                stmt.name
            )));
        }
        // The reuse of a skewed loop (a wavefront of a time-iterated stencil) is not one
        // iteration's footprint apart: the model does not cover it.
        if let Some(c) = coords
            .iter()
            .find(|c| (0..depth).filter(|&k| c.coeff(Var::Iter(k)) != 0).count() > 1)
        {
            let iter = |k: usize| stmt.iterators[k].clone();
            let param = |p: crate::program::ParamId| program.param(p).name.clone();
            return Err(Unsupported(format!(
                "the skewed loop {} of statement {}",
                c.display_with(&iter, &param),
                stmt.name
            )));
        }
        if coords.len() != depth {
            return Err(Unsupported(format!(
                "statement {} has {} loops for {depth} iterators",
                stmt.name,
                coords.len()
            )));
        }
        let matrix: Vec<Vec<Rational64>> = coords
            .iter()
            .map(|c| {
                (0..depth)
                    .map(|k| Rational64::from_integer(c.coeff(Var::Iter(k))))
                    .collect()
            })
            .collect();
        let inverse = invert(&matrix).ok_or_else(|| {
            Unsupported(format!(
                "the loops of statement {} are not independent",
                stmt.name
            ))
        })?;
        let shape = domain_shape(stmt, &params, &coords)?;
        let ranges: Vec<(f64, f64)> = shape
            .ranges
            .iter()
            .map(|&(lo, hi)| (lo as f64, hi as f64))
            .collect();
        let coupled: Vec<bool> = coords
            .iter()
            .map(|c| {
                let used: Vec<usize> = (0..depth).filter(|&k| c.coeff(Var::Iter(k)) != 0).collect();
                used.len() > 1 || used.iter().any(|&k| shape.coupled[k])
            })
            .collect();
        let volume: f64 = ranges.iter().map(|&(lo, hi)| hi - lo + 1.0).product();
        let fill = if volume > 0.0 {
            (shape.instances / volume).clamp(0.0, 1.0)
        } else {
            1.0
        };
        let offsets: Vec<Rational64> = coords
            .iter()
            .map(|c| Rational64::from_integer(c.bind_params(&params).constant))
            .collect();
        // A scalar lives in a register of the generated code (a parameter passed by value, a
        // local): it never occupies a cache line the model should count.
        for (_, access) in stmt.accesses().filter(|(_, a)| !a.subscripts.is_empty()) {
            let mut uses = vec![false; depth];
            let subscripts = access
                .subscripts
                .iter()
                .map(|e| {
                    let e = e.bind_params(&params);
                    let a: Vec<Rational64> = (0..depth)
                        .map(|k| Rational64::from_integer(e.coeff(Var::Iter(k))))
                        .collect();
                    for (k, x) in a.iter().enumerate() {
                        uses[k] |= !x.is_zero();
                    }
                    // subscript = a·x + c and x = M⁻¹(φ − φ0).
                    let coeffs: Vec<Rational64> = (0..depth)
                        .map(|c| (0..depth).map(|k| a[k] * inverse[k][c]).sum())
                        .collect();
                    let shift: Rational64 = coeffs.iter().zip(&offsets).map(|(x, o)| *x * *o).sum();
                    let constant = Rational64::from_integer(e.constant) - shift;
                    (coeffs.iter().map(to_f64).collect(), to_f64(&constant))
                })
                .collect::<Vec<_>>();
            let shaped = (0..depth).all(|k| !shape.coupled[k] || uses[k]);
            let member = Member {
                stmt: si,
                subscripts,
                fill: if shaped { fill } else { 1.0 },
                frames: None,
            };
            let array = program.array(access.array);
            let group = groups.entry(access.array).or_insert_with(|| Group {
                array: access.array,
                extents: program
                    .array_extents(access.array)
                    .iter()
                    .map(|&x| x as f64)
                    .collect(),
                elem_bytes: array.elem.size_in_bytes() as f64,
                members: Vec::new(),
                buffer: None,
            });
            let duplicate = group
                .members
                .iter()
                .any(|m| m.stmt == si && m.subscripts == member.subscripts);
            if !duplicate {
                group.members.push(member);
            }
        }
        stmts.push(StmtModel {
            roles,
            ranges,
            coupled,
            fill,
            copy: None,
        });
    }
    let middle = (0..positions.len())
        .map(|p| {
            let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
            for s in &stmts {
                let coord = match s.roles[p] {
                    Role::Point(c) | Role::Tile { coord: c, .. } => c,
                    _ => continue,
                };
                lo = lo.min(s.ranges[coord].0);
                hi = hi.max(s.ranges[coord].1);
            }
            if lo <= hi {
                ((lo + hi) / 2.0).floor()
            } else {
                0.0
            }
        })
        .collect();
    let mut nodes = Vec::new();
    let all: Vec<usize> = (0..n_stmts).collect();
    let root = tree(&stmts, &all, 0, &mut nodes);
    Ok(Model {
        stmts,
        groups: groups.into_values().collect(),
        nodes,
        root,
        middle,
        sizes,
        register: None,
        register_at: None,
    })
}

/// The node for statements `stmts` from position `p` on.
pub(super) fn tree(stmts: &[StmtModel], of: &[usize], p: usize, nodes: &mut Vec<Node>) -> usize {
    let n_positions = stmts.first().map_or(0, |s| s.roles.len());
    let push = |nodes: &mut Vec<Node>, n: Node| {
        nodes.push(n);
        nodes.len() - 1
    };
    let sequence = |nodes: &mut Vec<Node>, children: Vec<usize>| {
        push(
            nodes,
            Node::Sequence {
                stmts: of.to_vec(),
                children,
            },
        )
    };
    if p == n_positions {
        if let [s] = of {
            return push(nodes, Node::Leaf { stmt: *s });
        }
        let copy = stmts[of[0]].copy;
        if copy.is_some() && of.iter().all(|&s| stmts[s].copy == copy) {
            return push(nodes, Node::Copy { stmts: of.to_vec() });
        }
        let children = of
            .iter()
            .map(|&s| push(nodes, Node::Leaf { stmt: s }))
            .collect();
        return sequence(nodes, children);
    }
    let roles: Vec<Role> = of.iter().map(|&s| stmts[s].roles[p]).collect();
    if let Some(Role::Scalar(_)) = roles.first() {
        let mut by_value: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
        for (&s, r) in of.iter().zip(&roles) {
            let v = if let Role::Scalar(v) = r { *v } else { 0 };
            by_value.entry(v).or_default().push(s);
        }
        if by_value.len() == 1 {
            return tree(stmts, of, p + 1, nodes);
        }
        let children = by_value
            .into_values()
            .map(|group| tree(stmts, &group, p + 1, nodes))
            .collect();
        return sequence(nodes, children);
    }
    if roles.iter().all(|r| matches!(r, Role::Fixed)) {
        return tree(stmts, of, p + 1, nodes);
    }
    let body = tree(stmts, of, p + 1, nodes);
    push(
        nodes,
        Node::Loop {
            position: p,
            stmts: of.to_vec(),
            body,
        },
    )
}

fn to_f64(x: &Rational64) -> f64 {
    *x.numer() as f64 / *x.denom() as f64
}
