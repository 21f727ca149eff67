//! Marks: what a pass decides about a subtree and a later pass or a back end acts on, carried
//! by [`NodeKind::Mark`](super::NodeKind::Mark) in the tree and by `Ast::Mark` in the loop AST.
//!
//! Each mark is a value of [`Mark`]; its text (`--emit tree`, the snapshots, a comment in the
//! generated C) is written by its `Display` and read back by [`Mark::parse`], here and nowhere
//! else, so no pass or writer reads mark text.

use std::fmt;

/// A decision about the subtree below.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Mark {
    /// Copy an array into a contiguous buffer around the subtree (`pack`).
    Pack(PackMark),
    /// Run the band below as a register tile (`register_tile`).
    RegisterTile(RegisterTileMark),
    /// Jam rows of a reduction in the band below (`reduction_tile`).
    ReductionTile(ReductionTileMark),
    /// Where a GPU kernel starts: the loops from here map to the grid of groups (`map`).
    Kernel,
    /// Where a kernel's loops start mapping to the threads of a group (`map`).
    Thread,
    /// A subtree whose instances an extension node runs elsewhere: AST generation leaves it
    /// out (post-tiling fusion).
    Skipped,
    /// A producer post-tiling fusion left where it was, and why.
    Unfused(String),
    /// Run the contraction below on the matrix unit, in tiles of the given sizes (`matrix`).
    Matrix(MatrixMark),
}

/// What a matrix mark says: the sizes (elements) of the tiles of the contraction's m, n and
/// first k iterators that the matrix unit runs at once, the values of its other k iterators
/// that a tile runs whole for each of those (`inner`: the product of their extents, 1 with one
/// k iterator; a tile's k values are `k × inner`, laid out in the k iterators' order), whether
/// the tile starts from zero, and why the sizes were chosen. The subtree below is one loop over the k tiles above the point loops of
/// one tile of m and n; when `zeroed`, a sequence runs first the statement that sets the tile
/// to zero, then that loop.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MatrixMark {
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub inner: i64,
    pub zeroed: bool,
    pub why: String,
}

/// What a pack mark says: the array, the layout of its buffer (`layout[k]` is the array
/// dimension stored as the buffer's dimension `k`), whether the loops above that may run in
/// parallel each own the part of the array the buffer holds (so a written buffer may be
/// copied back from inside them), and why it was packed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PackMark {
    pub array: String,
    pub layout: Vec<usize>,
    pub owned: bool,
    pub reason: String,
}

/// What a register-tile mark says: rows and columns (elements) of the tile, the loops of the
/// band below it, and why the shape was chosen.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RegisterTileMark {
    pub rows: i64,
    pub cols: i64,
    pub loops: usize,
    pub why: String,
}

/// What a reduction-tile mark says: how many rows run jammed, which member of the band below
/// is the rows' loop (0 = outermost), how many members the band has, the size of the tiles
/// the rows' loop runs in (0 when it is not tiled), and why.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReductionTileMark {
    pub rows: i64,
    pub member: usize,
    pub loops: usize,
    pub tile: i64,
    pub why: String,
}

const PACK: &str = "pack ";
const OWNED: &str = " owned by the parallel loops";
const REGISTER_TILE: &str = "register tile ";
const REDUCTION_TILE: &str = "reduction tile ";
const KERNEL: &str = "kernel";
const THREAD: &str = "thread";
const SKIPPED: &str = "skipped";
const UNFUSED: &str = "unfused: ";
const MATRIX: &str = "matrix ";
const ZEROED: &str = " from zero";

impl fmt::Display for Mark {
    /// `pack A layout [1, 0] owned by the parallel loops: why` (`owned …` only when owned),
    /// `register tile 4x8 over 3 loops: why`, `reduction tile 4 rows of loop 0 over 2 loops in
    /// tiles of 32: why`, `kernel`, `thread`, `skipped`, `unfused: why`, `matrix 64x64x128*9
    /// from zero: why` (`*9` only when `inner` is not 1, `from zero` only when zeroed).
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Mark::Pack(m) => {
                let layout: Vec<String> = m.layout.iter().map(|d| d.to_string()).collect();
                let owned = if m.owned { OWNED } else { "" };
                write!(
                    f,
                    "{PACK}{} layout [{}]{owned}: {}",
                    m.array,
                    layout.join(", "),
                    m.reason
                )
            }
            Mark::RegisterTile(m) => write!(
                f,
                "{REGISTER_TILE}{}x{} over {} loops: {}",
                m.rows, m.cols, m.loops, m.why
            ),
            Mark::ReductionTile(m) => write!(
                f,
                "{REDUCTION_TILE}{} rows of loop {} over {} loops in tiles of {}: {}",
                m.rows, m.member, m.loops, m.tile, m.why
            ),
            Mark::Kernel => f.write_str(KERNEL),
            Mark::Thread => f.write_str(THREAD),
            Mark::Skipped => f.write_str(SKIPPED),
            Mark::Unfused(why) => write!(f, "{UNFUSED}{why}"),
            Mark::Matrix(m) => {
                let zeroed = if m.zeroed { ZEROED } else { "" };
                write!(f, "{MATRIX}{}x{}x{}", m.m, m.n, m.k)?;
                if m.inner != 1 {
                    write!(f, "*{}", m.inner)?;
                }
                write!(f, "{zeroed}: {}", m.why)
            }
        }
    }
}

impl Mark {
    /// The mark a text written by `Display` stands for.
    pub fn parse(text: &str) -> Option<Mark> {
        match text {
            KERNEL => return Some(Mark::Kernel),
            THREAD => return Some(Mark::Thread),
            SKIPPED => return Some(Mark::Skipped),
            _ => {}
        }
        if let Some(why) = text.strip_prefix(UNFUSED) {
            return Some(Mark::Unfused(why.to_string()));
        }
        if let Some(rest) = text.strip_prefix(PACK) {
            return parse_pack(rest).map(Mark::Pack);
        }
        if let Some(rest) = text.strip_prefix(REGISTER_TILE) {
            return parse_register_tile(rest).map(Mark::RegisterTile);
        }
        if let Some(rest) = text.strip_prefix(MATRIX) {
            return parse_matrix(rest).map(Mark::Matrix);
        }
        let rest = text.strip_prefix(REDUCTION_TILE)?;
        parse_reduction_tile(rest).map(Mark::ReductionTile)
    }
}

fn parse_pack(rest: &str) -> Option<PackMark> {
    let (array, rest) = rest.split_once(" layout [")?;
    let (layout, rest) = rest.split_once(']')?;
    let (owned, rest) = match rest.strip_prefix(OWNED) {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let reason = rest.strip_prefix(": ")?;
    let layout = if layout.is_empty() {
        Vec::new()
    } else {
        layout
            .split(", ")
            .map(|d| d.parse().ok())
            .collect::<Option<Vec<usize>>>()?
    };
    Some(PackMark {
        array: array.to_string(),
        layout,
        owned,
        reason: reason.to_string(),
    })
}

fn parse_register_tile(rest: &str) -> Option<RegisterTileMark> {
    let (shape, rest) = rest.split_once(" over ")?;
    let (rows, cols) = shape.split_once('x')?;
    let (loops, why) = rest.split_once(" loops: ")?;
    Some(RegisterTileMark {
        rows: rows.parse().ok()?,
        cols: cols.parse().ok()?,
        loops: loops.parse().ok()?,
        why: why.to_string(),
    })
}

fn parse_reduction_tile(rest: &str) -> Option<ReductionTileMark> {
    let (rows, rest) = rest.split_once(" rows of loop ")?;
    let (member, rest) = rest.split_once(" over ")?;
    let (loops, rest) = rest.split_once(" loops in tiles of ")?;
    let (tile, why) = rest.split_once(": ")?;
    Some(ReductionTileMark {
        rows: rows.parse().ok()?,
        member: member.parse().ok()?,
        loops: loops.parse().ok()?,
        tile: tile.parse().ok()?,
        why: why.to_string(),
    })
}

fn parse_matrix(rest: &str) -> Option<MatrixMark> {
    let (shape, why) = rest.split_once(": ")?;
    let (shape, zeroed) = match shape.strip_suffix(ZEROED) {
        Some(s) => (s, true),
        None => (shape, false),
    };
    let (shape, inner) = match shape.split_once('*') {
        Some((s, inner)) => (s, inner.parse().ok()?),
        None => (shape, 1),
    };
    let mut sizes = shape.split('x').map(|t| t.parse().ok());
    let (m, n, k) = (sizes.next()??, sizes.next()??, sizes.next()??);
    if sizes.next().is_some() {
        return None;
    }
    Some(MatrixMark {
        m,
        n,
        k,
        inner,
        zeroed,
        why: why.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mark_reads_back_as_written() {
        let marks = [
            Mark::Pack(PackMark {
                array: "A".into(),
                layout: vec![1, 0],
                owned: false,
                reason: "strided: 2 lines per element".into(),
            }),
            Mark::Pack(PackMark {
                array: "B".into(),
                layout: vec![],
                owned: true,
                reason: "TLB".into(),
            }),
            Mark::RegisterTile(RegisterTileMark {
                rows: 4,
                cols: 8,
                loops: 3,
                why: "12 accumulators: 2 vectors".into(),
            }),
            Mark::ReductionTile(ReductionTileMark {
                rows: 4,
                member: 0,
                loops: 2,
                tile: 32,
                why: "latency 4 x 2 pipes".into(),
            }),
            Mark::Kernel,
            Mark::Thread,
            Mark::Skipped,
            Mark::Unfused("T is also read by S2: the tiles".into()),
            Mark::Matrix(MatrixMark {
                m: 64,
                n: 32,
                k: 128,
                inner: 1,
                zeroed: false,
                why: "f16 operands, L0A 16 of 64 KiB".into(),
            }),
            Mark::Matrix(MatrixMark {
                m: 16,
                n: 16,
                k: 16,
                inner: 9,
                zeroed: true,
                why: "f32".into(),
            }),
        ];
        for mark in marks {
            let text = mark.to_string();
            assert_eq!(Mark::parse(&text), Some(mark), "{text}");
        }
    }

    #[test]
    fn other_text_is_no_mark() {
        for text in [
            "product",
            "pack A layout [x]: r",
            "register tile 4x8 over 3: x",
            "reduction tile 4 rows of loop 0 over 2 loops in tiles of : x",
            "kernels",
            "matrix 64x32: x",
            "matrix 64x32x16x8: x",
        ] {
            assert_eq!(Mark::parse(text), None, "{text}");
        }
    }
}
