//! Statements fused into stages, and what each statement of a stage computes for one tile of
//! rows.
//!
//! A stage runs its statements one after the other on a tile of consecutive rows while the
//! tile is in UB; tiles go to the cores. Statements are fused greedily in program order
//! (post-tiling fusion on rows): a statement joins the current stage when every array it reads
//! that the stage writes can be taken from the tile — the writer's values at the same column
//! (a row shift is fine: the writer computes the rows the reader needs around the tile, the
//! halo, so overlapping tiles compute those rows twice and no value crosses tiles) — and when it
//! does not write an array the stage has read from GM (other tiles may still need the old
//! values). Element-wise statements and reductions of one stage share a column range.
//!
//! Per stage: an array written in it is **live** when the kernel returns it or a statement of
//! another stage reads it; it then goes to GM (temporaries too), else it never leaves the tile.
//! The tiles cut the rows of the live arrays' last writers, which must be the same rows. Each
//! statement's **need** is the rows `[t0 + lo, t1 + hi)` it computes for tile `[t0, t1)`: the
//! tile for a live array's last writer, and the rows its readers in the stage need, shifted by
//! their row offsets; statements no one needs are dropped. The reads from GM follow: per array
//! and column shift, the rows the needs cover.
//!
//! A statement that updates an array in place (reads from GM the elements it writes) computes
//! exactly the tile's rows, so no tile reads rows another one writes: its readers in the stage
//! read it at its own rows, and a halo further on would need rows beyond its readers' domains,
//! which are inside the live rows, which are its rows.

use std::collections::{BTreeMap, BTreeSet};

use polyhedral::program::ArrayId;
use polyhedral::Program;

use super::analysis::{Access, At, Item, Kind, VStmt};
use crate::npu::Error;

/// Where a read finds its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The value statement `k` of the stage computed in this tile.
    Tile(usize),
    /// GM (an input, or an array an earlier stage wrote).
    Gm,
}

/// One stage: statements fused on tiles of rows.
#[derive(Clone, Debug)]
pub(crate) struct Stage {
    /// In program order; only those some live array needs.
    pub stmts: Vec<VStmt>,
    /// Per statement: where each of its reads comes from.
    pub sources: Vec<Vec<Source>>,
    /// Per statement: the rows `[t0 + lo, t1 + hi)` it computes for tile `[t0, t1)`.
    pub need: Vec<(i64, i64)>,
    /// The rows the tiles cut.
    pub rows: (i64, i64),
    /// The columns of the element-wise statements and reductions.
    pub cols: Option<(i64, i64)>,
    /// Live arrays and the statement whose value goes to GM.
    pub live: Vec<(ArrayId, usize)>,
}

/// A stage or a sequential loop of stages.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    Stage(Stage),
    Loop { trips: i64, body: Vec<Stage> },
}

/// Fuses the statements of every item into stages; `fuse` false: only the statements that
/// write one array in a row share a stage (a reduction's initialisation and update).
pub(crate) fn stages(program: &Program, items: &[Item], fuse: bool) -> Result<Vec<Step>, Error> {
    // Which statements read each array, by statement id.
    let mut readers: BTreeMap<ArrayId, BTreeSet<u32>> = BTreeMap::new();
    for item in items {
        let list = match item {
            Item::Stmts(l) | Item::Loop { body: l, .. } => l,
        };
        for s in list {
            for r in &s.reads {
                readers.entry(r.array).or_default().insert(s.id.0);
            }
        }
    }
    let mut steps = Vec::new();
    for item in items {
        match item {
            Item::Stmts(list) => {
                for group in groups(list, fuse) {
                    if let Some(stage) = stage(program, group, &readers)? {
                        steps.push(Step::Stage(stage));
                    }
                }
            }
            Item::Loop { trips, body } => {
                let mut stages = Vec::new();
                for group in groups(body, fuse) {
                    stages.extend(stage(program, group, &readers)?);
                }
                if !stages.is_empty() && *trips > 0 {
                    steps.push(Step::Loop {
                        trips: *trips,
                        body: stages,
                    });
                }
            }
        }
    }
    Ok(steps)
}

/// The statement of `group` that last wrote `array`, if any.
fn last_writer(group: &[VStmt], array: ArrayId) -> Option<usize> {
    group.iter().rposition(|s| s.write.array == array)
}

/// Whether `s` reads its value of `read` from the tile of `group` (its writer there) and
/// whether it can: same column, rows inside the writer's.
fn tile_source(group: &[VStmt], s: &VStmt, read: Access) -> Option<Result<usize, ()>> {
    let w = last_writer(group, read.array)?;
    let writer = &group[w];
    let ok = match (writer.write.at, read.at) {
        (At::Tile { row: wr, col: wc }, At::Tile { row, col }) => {
            col == wc && inside(s.rows, row - wr, writer.rows)
        }
        (At::Row { row: wr }, At::Row { row }) => inside(s.rows, row - wr, writer.rows),
        _ => false,
    };
    Some(if ok { Ok(w) } else { Err(()) })
}

/// Whether rows `rows` shifted by `d` lie inside `outer`.
fn inside(rows: (i64, i64), d: i64, outer: (i64, i64)) -> bool {
    rows.0 + d >= outer.0 && rows.1 + d <= outer.1
}

/// Greedy fusion in program order.
fn groups(list: &[VStmt], fuse: bool) -> Vec<Vec<VStmt>> {
    let mut out: Vec<Vec<VStmt>> = Vec::new();
    let mut cur: Vec<VStmt> = Vec::new();
    for s in list {
        let same_array = cur.last().is_some_and(|l| l.write.array == s.write.array);
        if !cur.is_empty() && (!joins(&cur, s) || !(fuse || same_array)) {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(s.clone());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn joins(group: &[VStmt], s: &VStmt) -> bool {
    let cols = group.iter().find_map(|g| g.cols);
    if let (Some(a), Some(b)) = (cols, s.cols) {
        if a != b {
            return false;
        }
    }
    for read in &s.reads {
        match tile_source(group, s, *read) {
            Some(Err(())) => return false,
            Some(Ok(w)) => {
                // A writer that updated its array in place from GM computes only its own
                // tile's rows: others would read rows a neighbouring tile overwrites.
                let writer = &group[w];
                let in_place = writer
                    .reads
                    .iter()
                    .any(|r| r.array == writer.write.array && r.at == writer.write.at);
                if in_place && read.at.row() != writer.write.at.row() {
                    return false;
                }
            }
            None => {}
        }
    }
    // No write to an array the group reads from GM: the values other tiles read must stay.
    let read_from_gm = group.iter().enumerate().any(|(k, g)| {
        g.reads
            .iter()
            .any(|r| r.array == s.write.array && tile_source(&group[..k], g, *r).is_none())
    });
    if read_from_gm {
        return false;
    }
    // A second writer of an array writes the same elements.
    if let Some(w) = last_writer(group, s.write.array) {
        let prev = &group[w];
        let same_kind = matches!(
            (prev.kind, s.kind),
            (Kind::Full, Kind::Full)
                | (
                    Kind::Row | Kind::Reduce { .. },
                    Kind::Row | Kind::Reduce { .. }
                )
        );
        if !same_kind || prev.write.at != s.write.at || prev.rows != s.rows {
            return false;
        }
    }
    true
}

/// The stage of `group`, or `None` when nothing it computes is live.
fn stage(
    program: &Program,
    group: Vec<VStmt>,
    readers: &BTreeMap<ArrayId, BTreeSet<u32>>,
) -> Result<Option<Stage>, Error> {
    let ids: BTreeSet<u32> = group.iter().map(|s| s.id.0).collect();
    let mut live: Vec<(ArrayId, usize)> = Vec::new();
    for (k, s) in group.iter().enumerate() {
        let a = s.write.array;
        let read_elsewhere = readers
            .get(&a)
            .is_some_and(|r| r.iter().any(|id| !ids.contains(id)));
        if program.array(a).role.is_live_out() || read_elsewhere {
            live.retain(|(x, _)| *x != a);
            live.push((a, k));
        }
    }
    live.sort();
    let Some(&(first, w)) = live.first() else {
        return Ok(None);
    };
    let rows = group[w].rows;
    if let Some(&(other, w2)) = live.iter().find(|(_, w2)| group[*w2].rows != rows) {
        return Err(Error::NotYet(format!(
            "`{}` and `{}` leave the same stage over different rows ({}..{} and {}..{})",
            program.array(first).name,
            program.array(other).name,
            rows.0,
            rows.1,
            group[w2].rows.0,
            group[w2].rows.1
        )));
    }
    // Needs, from the live writers back to the statements they read.
    let mut need: Vec<Option<(i64, i64)>> = vec![None; group.len()];
    for &(_, w) in &live {
        need[w] = Some((0, 0));
    }
    let mut sources: Vec<Vec<Source>> = vec![Vec::new(); group.len()];
    for k in (0..group.len()).rev() {
        let s = &group[k];
        sources[k] = s
            .reads
            .iter()
            .map(|r| match tile_source(&group[..k], s, *r) {
                Some(Ok(w)) => Source::Tile(w),
                _ => Source::Gm,
            })
            .collect();
        let Some((lo, hi)) = need[k] else {
            continue;
        };
        for (r, src) in s.reads.iter().zip(&sources[k]) {
            if let Source::Tile(w) = *src {
                let d = r.at.row() - group[w].write.at.row();
                need[w] = Some(match need[w] {
                    None => (lo + d, hi + d),
                    Some((a, b)) => (a.min(lo + d), b.max(hi + d)),
                });
            }
        }
    }
    // Keep the needed statements, renumbering the sources.
    let kept: Vec<usize> = (0..group.len()).filter(|&k| need[k].is_some()).collect();
    let index = |k: usize| kept.iter().position(|&x| x == k);
    let stage = Stage {
        stmts: kept.iter().map(|&k| group[k].clone()).collect(),
        sources: kept
            .iter()
            .map(|&k| {
                sources[k]
                    .iter()
                    .map(|src| match src {
                        // A needed statement's tile sources are needed too.
                        Source::Tile(w) => Source::Tile(index(*w).unwrap_or(0)),
                        Source::Gm => Source::Gm,
                    })
                    .collect()
            })
            .collect(),
        need: kept.iter().filter_map(|&k| need[k]).collect(),
        rows,
        cols: group.iter().find_map(|g| g.cols),
        live: live
            .iter()
            .filter_map(|&(a, w)| index(w).map(|i| (a, i)))
            .collect(),
    };
    Ok(Some(stage))
}
