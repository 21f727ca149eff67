//! Packed buffers in the model: the code as the back end writes it for the pack marks of the
//! tree ([`crate::passes::pack`]).
//!
//! A pack mark of array `T` above a loop copies the box of `T` its loops reach into a buffer
//! `T'` before the loop, runs the loop on `T'`, and copies a written box back after it. The
//! model sees the same: at the mark's position a sequence of three — the copy in, the loops,
//! the copy out when the loops write `T` — where the copies are statements of their own
//! (one per statement below the mark that accesses `T`, in the coordinates of that
//! statement, with its loops above the mark), whose block is the mark's: they read `T`'s box
//! and write `T'` (in) or the reverse (out), each line once ([`Node::Copy`]). Below the mark
//! every access to `T` goes to `T'` instead, a group of its own: a dense row-major array of
//! the buffer's extents, in the mark's layout, at an address of its own aligned to
//! [`BUFFER_ALIGNMENT`].
//!
//! A coordinate places an access in the buffer by its *frame* ([`Frame`]): limited by a tile
//! loop above the mark, its value from the tile's first; fixed by a point loop above the
//! mark, at the buffer's start; otherwise (the loops below the mark walk it whole) from the
//! start of its range. The buffer's box is the hull of its accesses in those terms, a tile
//! counting its full size (the box the back end allocates: the last, partial tile of a loop
//! leaves part of it unused), clamped to the array's extents. Loops above the mark leave the
//! buffer in place; loops below move its accesses as they move the array's.
//!
//! Marks nest: a mark below another one of the same array copies from the outer buffer. A
//! buffer beyond [`crate::passes::pack::MAX_PACKED_BYTES`] is not packed by the back end, nor here. A
//! mark among the loops a register tile reorders is [`Unsupported`].
//!
//! [`Node::Copy`]: super::nest::Node::Copy

use crate::passes::pack::MAX_PACKED_BYTES;
use crate::program::{ArrayId, Program};
use crate::schedule::{Mark, NodeKind, ScheduleTree};

use super::nest::{tree, Group, Member, Model, Role};
use super::Unsupported;

/// The alignment in bytes of a packed buffer's first element (a cache line, as the back end
/// allocates it).
pub const BUFFER_ALIGNMENT: u64 = 64;

/// How a coordinate of a statement places its accesses in a packed buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A tile loop above the mark limits the coordinate to a tile of the size in `slot`: the
    /// buffer holds the tile, from its first value.
    Tile { slot: usize },
    /// A point loop above the mark fixes the coordinate: one value, at the buffer's start.
    Pinned,
    /// No loop above the mark limits the coordinate: its whole range, from its start.
    Free,
}

/// Where a packed buffer is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Buffer {
    /// The model position of its mark: a scalar position (the copy in, the loops, the copy
    /// out); the loops before it are above the mark.
    pub position: usize,
}

/// A pack mark as the model takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packing {
    pub array: ArrayId,
    /// `layout[k]` is the array dimension stored as the buffer's dimension `k`.
    pub layout: Vec<usize>,
    /// The band members above the mark.
    pub depth: usize,
    /// The statements below the mark (indices into the program's statements).
    pub stmts: Vec<usize>,
}

/// The pack marks of `tree`, outer ones first.
pub fn packings(program: &Program, tree: &ScheduleTree) -> Result<Vec<Packing>, Unsupported> {
    let paths = tree.find(&|k| matches!(k, NodeKind::Mark(Mark::Pack(_))));
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        let Some(NodeKind::Mark(Mark::Pack(mark))) = tree.node(&path).map(|n| &n.kind) else {
            continue;
        };
        let array = program.array_by_name(&mark.array).ok_or_else(|| {
            Unsupported(format!("a pack mark of the unknown array {}", mark.array))
        })?;
        let depth = tree
            .band_members_above(&path)
            .map_err(|e| Unsupported(e.to_string()))?;
        let stmts = tree
            .statements_at(&path)
            .map_err(|e| Unsupported(e.to_string()))?
            .iter()
            .map(|s| s.index())
            .collect();
        out.push(Packing {
            array,
            layout: mark.layout.clone(),
            depth,
            stmts,
        });
    }
    Ok(out)
}

/// The relative values `(lo, hi)` a coordinate of frame `frame` takes in a block where it
/// runs from `lo` to `hi`, its range starting at `start`; `sizes` are the slots' sizes.
pub(super) fn relative(frame: Frame, lo: f64, hi: f64, start: f64, sizes: &[i64]) -> (f64, f64) {
    match frame {
        Frame::Pinned => (0.0, 0.0),
        Frame::Free => (lo - start, hi - start),
        Frame::Tile { slot } => {
            let t = sizes.get(slot).copied().unwrap_or(1).max(1) as f64;
            let first = ((lo - start) / t).floor();
            if ((hi - start) / t).floor() == first {
                (lo - start - first * t, hi - start - first * t)
            } else {
                (0.0, t - 1.0)
            }
        }
    }
}

/// The values a coordinate of frame `frame` takes over one execution of the mark's loops.
fn width(frame: Frame, range: (f64, f64), sizes: &[i64]) -> f64 {
    match frame {
        Frame::Pinned => 1.0,
        Frame::Free => range.1 - range.0 + 1.0,
        Frame::Tile { slot } => sizes.get(slot).copied().unwrap_or(1).max(1) as f64,
    }
}

/// A buffer's box at the slots' sizes `sizes`: per buffer dimension, the least relative
/// subscript of its accesses (subtracted from each access) and the extent.
pub(super) fn buffer_box(model: &Model, group: &Group, sizes: &[i64]) -> (Vec<f64>, Vec<f64>) {
    let rank = group.extents.len();
    let (mut lo, mut hi) = (vec![f64::INFINITY; rank], vec![f64::NEG_INFINITY; rank]);
    for m in &group.members {
        let Some(frames) = &m.frames else { continue };
        let s = &model.stmts[m.stmt];
        for (d, (coeffs, constant)) in m.subscripts.iter().enumerate() {
            let (mut a, mut b) = (*constant, *constant);
            for (c, &x) in coeffs.iter().enumerate() {
                let w = width(frames[c], s.ranges[c], sizes) - 1.0;
                a += (x * w).min(0.0);
                b += (x * w).max(0.0);
            }
            lo[d] = lo[d].min(a);
            hi[d] = hi[d].max(b);
        }
    }
    let extents = (0..rank)
        .map(|d| {
            if lo[d] <= hi[d] {
                (hi[d] - lo[d] + 1.0).min(group.extents[d]).max(1.0)
            } else {
                1.0
            }
        })
        .collect();
    let lo = lo
        .into_iter()
        .map(|x| if x.is_finite() { x } else { 0.0 })
        .collect();
    (lo, extents)
}

impl Model {
    /// This model with the buffers of `packings` (outer marks first), for the band sizes
    /// `sizes` (one per band slot, as [`super::predict`] takes them): see the module docs.
    pub fn with_packing(
        &self,
        program: &Program,
        packings: &[Packing],
        sizes: &[i64],
    ) -> Result<Model, Unsupported> {
        let slot_sizes = self.slot_sizes(sizes);
        let mut model = self.clone();
        let originals = model.stmts.len();
        for packing in packings {
            model.pack(program, packing, originals, &slot_sizes)?;
        }
        let all: Vec<usize> = (0..model.stmts.len()).collect();
        model.nodes.clear();
        model.root = tree(&model.stmts, &all, 0, &mut model.nodes);
        Ok(model)
    }

    /// The position a mark above `depth` band members takes among the positions of the
    /// statements `below` it: before the loop that is the statements' `depth`-th (counting
    /// the loops they do not move along, as the tree's bands do), and before the scalar
    /// positions in front of it that order the statements below among themselves.
    fn mark_position(&self, below: &[usize], depth: usize) -> Result<usize, Unsupported> {
        let mut at: Option<usize> = None;
        for &s in below {
            let roles = &self.stmts[s].roles;
            let mut loops = 0;
            let p = (0..roles.len())
                .find(|&q| {
                    let is_loop = !matches!(roles[q], Role::Scalar(_));
                    let here = is_loop && loops == depth;
                    loops += usize::from(is_loop);
                    here
                })
                .ok_or_else(|| Unsupported("a pack mark below every loop".into()))?;
            if at.is_some_and(|a| a != p) {
                return Err(Unsupported(
                    "a pack mark whose statements have its loop at different positions".into(),
                ));
            }
            at = Some(p);
        }
        let mut p = at.ok_or_else(|| Unsupported("a pack mark above no statement".into()))?;
        while p > 0 {
            let values: Vec<Role> = below.iter().map(|&s| self.stmts[s].roles[p - 1]).collect();
            let differ =
                matches!(values[0], Role::Scalar(_)) && values.iter().any(|v| *v != values[0]);
            if !differ {
                break;
            }
            p -= 1;
        }
        if self.register_at.is_some_and(|r| p > r) {
            return Err(Unsupported(
                "a pack mark among the loops of a register tile".into(),
            ));
        }
        Ok(p)
    }

    /// Adds the buffer of one mark (see the module docs): `originals` statements are the
    /// program's, the others copies.
    fn pack(
        &mut self,
        program: &Program,
        packing: &Packing,
        originals: usize,
        sizes: &[i64],
    ) -> Result<(), Unsupported> {
        let t = packing.array;
        let below: Vec<usize> = packing
            .stmts
            .iter()
            .copied()
            .filter(|&s| s < originals)
            .collect();
        // The group holding each statement's accesses to `t`: the array's, or the buffer of
        // an outer mark.
        let users: Vec<(usize, usize)> = below
            .iter()
            .filter_map(|&s| {
                let g = self
                    .groups
                    .iter()
                    .rposition(|g| g.array == t && g.members.iter().any(|m| m.stmt == s))?;
                Some((s, g))
            })
            .collect();
        if users.is_empty() {
            return Ok(());
        }
        let p = self.mark_position(&below, packing.depth)?;
        let rank = program.array(t).shape.len();
        let mut sorted = packing.layout.clone();
        sorted.sort_unstable();
        if sorted != (0..rank).collect::<Vec<_>>() {
            return Err(Unsupported(format!(
                "a pack mark of {} whose layout does not fit it",
                program.array(t).name
            )));
        }
        let array_extents: Vec<f64> = program.array_extents(t).iter().map(|&x| x as f64).collect();
        // The buffer's group (its position once the mark's scalar position is in), with the
        // accesses of the statements below.
        let mut buffer = Group {
            array: t,
            extents: packing.layout.iter().map(|&d| array_extents[d]).collect(),
            elem_bytes: program.array(t).elem.size_in_bytes() as f64,
            members: Vec::new(),
            buffer: Some(Buffer { position: p }),
        };
        // Per statement below, how its coordinates place its accesses in the buffer.
        let frames: Vec<Vec<Frame>> = users
            .iter()
            .map(|&(s, _)| {
                let mut frames = vec![Frame::Free; self.stmts[s].ranges.len()];
                for role in &self.stmts[s].roles[..p] {
                    match *role {
                        Role::Point(c) => frames[c] = Frame::Pinned,
                        Role::Tile { coord, slot } if frames[coord] == Frame::Free => {
                            frames[coord] = Frame::Tile { slot }
                        }
                        _ => {}
                    }
                }
                frames
            })
            .collect();
        let packed = |stmt: usize, m: &Member, frames: &[Frame]| Member {
            stmt,
            subscripts: packing
                .layout
                .iter()
                .map(|&d| m.subscripts[d].clone())
                .collect(),
            fill: m.fill,
            frames: Some(frames.to_vec()),
        };
        for (&(s, g), frames) in users.iter().zip(&frames) {
            for m in self.groups[g].members.iter().filter(|m| m.stmt == s) {
                buffer.members.push(packed(s, m, frames));
            }
        }
        // The back end leaves a buffer beyond its limit unpacked.
        let (_, extents) = buffer_box(self, &buffer, sizes);
        if extents.iter().product::<f64>() * buffer.elem_bytes > MAX_PACKED_BYTES as f64 {
            return Ok(());
        }
        let written = below
            .iter()
            .any(|&s| program.statements[s].write.array == t);
        let copy_in = self
            .stmts
            .iter()
            .filter_map(|s| s.copy)
            .max()
            .map_or(0, |c| c + 1);
        // The copies: per statement below, in (and out), its loops above the mark.
        let mut copies = Vec::new();
        for (&(s, g), frames) in users.iter().zip(&frames) {
            let mine: Vec<Member> = self.groups[g]
                .members
                .iter()
                .filter(|m| m.stmt == s)
                .cloned()
                .collect();
            for (k, value) in [(copy_in, 0), (copy_in + 1, 2)] {
                if value == 2 && !written {
                    continue;
                }
                let id = self.stmts.len() + copies.len();
                let mut stmt = self.stmts[s].clone();
                stmt.roles.truncate(p);
                stmt.roles.push(Role::Scalar(value));
                stmt.roles.extend(std::iter::repeat_n(
                    Role::Fixed,
                    self.stmts[s].roles.len() - p,
                ));
                stmt.copy = Some(k);
                let reads: Vec<Member> = mine
                    .iter()
                    .map(|m| Member {
                        stmt: id,
                        ..m.clone()
                    })
                    .collect();
                let writes: Vec<Member> = mine.iter().map(|m| packed(id, m, frames)).collect();
                copies.push((stmt, g, reads, writes));
            }
            // Below the mark the statement reaches the buffer only.
            self.groups[g].members.retain(|m| m.stmt != s);
        }
        // The mark's scalar position: the loops' statements (and all others) at 1.
        for s in self.stmts.iter_mut() {
            s.roles.insert(p, Role::Scalar(1));
        }
        self.middle.insert(p, 0.0);
        if let Some(r) = self.register_at.as_mut() {
            if *r >= p {
                *r += 1;
            }
        }
        for g in self.groups.iter_mut() {
            if let Some(b) = g.buffer.as_mut() {
                if b.position >= p {
                    b.position += 1;
                }
            }
        }
        let index = self.groups.len();
        self.groups.push(buffer);
        for (stmt, g, reads, writes) in copies {
            self.stmts.push(stmt);
            self.groups[g].members.extend(reads);
            self.groups[index].members.extend(writes);
        }
        Ok(())
    }
}
