//! Register tiles: which point bands the back end turns into a small outer product whose
//! accumulators stay in vector registers, and of which shape.
//!
//! A band qualifies when it is a leaf band of one statement, permutable, with at least three
//! members, every member an iterator of the statement (a point band, or a band that was not
//! tiled), its outermost and innermost members coincident, the element the statement writes
//! subscripted by the outermost and the innermost member's iterators in one different
//! dimension each and by none of the others (so it stays the same while they run), and a
//! target vector unit with registers. A band of at least two members whose innermost member
//! is coincident and alone subscripts the written element gets a tile of one row: every
//! other member is walked with the accumulators held (`doitgen`'s `sum[p] += A[r][q][s] *
//! C4[s][p]` over `s`, inside the band above that runs `r` and `q`). Its outermost member gives the *rows* of the tile, its innermost one the
//! *columns* (the vectorised loop, whole vectors of the written array's element type), and the
//! members between are walked inside the tile with the accumulators held: the back end
//! unrolls the rows and jams them into the column loop, blocks the column loop by the tile's
//! width outside the members between (legal because the band is permutable), and keeps the
//! written elements of one tile in an aligned local buffer the compiler keeps in registers
//! (see the CPU writer for what it checks of the loops and accesses it finds below the mark).
//!
//! The shape `rows × vectors` is chosen from the vector unit alone (a row's, by
//! [`row_shape`]): the accumulators, one vector of each column operand and one broadcast row
//! operand must fit the registers a register tile may fill (`rows·vectors + vectors + 1 ≤
//! tile_registers`; the unit may leave some of its registers to the C compiler), and among
//! those shapes the one with the most multiply-adds per operand loaded
//! (`rows·vectors / (rows + vectors)`) wins, preferring a shape whose rows and columns divide
//! the sizes of the tiles the band runs in (no partial register tiles inside a full tile),
//! then more rows.
//!
//! The decision is a mark above the band ([`RegisterTileMark`]); nothing is recognised by
//! its shape: the analysis sees the band's flags, the member functions and the vector unit.

use num_rational::Rational64;

use crate::passes::{Pass, PassContext};
use crate::pipeline::Error;
use crate::program::{Program, StmtId, Var};
use crate::schedule::mark::{Mark, RegisterTileMark};
use crate::schedule::{NodeKind, QuasiAffine, ScheduleTree};
use crate::target::VectorUnit;

/// The register tile shape `(rows, vectors)` for a vector unit, given the sizes of the tiles
/// the rows and the columns run in (when known) and the lanes of a vector.
pub fn shape(
    unit: &VectorUnit,
    lanes: i64,
    row_tile: Option<i64>,
    col_tile: Option<i64>,
) -> Option<(i64, i64)> {
    let registers = i64::from(unit.tile_registers);
    // (divides the tiles, multiply-adds per operand loaded, rows) and the shape.
    type Ranked = ((bool, Rational64, i64), (i64, i64));
    let mut best: Option<Ranked> = None;
    for vectors in 1..registers {
        for rows in 2..registers {
            if rows * vectors + vectors + 1 > registers {
                break;
            }
            let divides = row_tile.is_none_or(|t| t % rows == 0)
                && col_tile.is_none_or(|t| t % (vectors * lanes) == 0);
            let key = (
                divides,
                Rational64::new(rows * vectors, rows + vectors),
                rows,
            );
            if best.as_ref().is_none_or(|(k, _)| key > *k) {
                best = Some((key, (rows, vectors)));
            }
        }
    }
    best.map(|(_, s)| s)
}

/// The vectors of a register tile of one row: its accumulators, one vector of each column
/// operand and one broadcast operand must fit the registers a register tile may fill
/// (`2·vectors + 1 ≤ tile_registers`); the most vectors (multiply-adds per operand loaded
/// grow with them) whose columns divide the tile the columns run in (the unit's vectorised
/// tile length when they are not tiled).
pub fn row_shape(unit: &VectorUnit, lanes: i64, col_tile: Option<i64>) -> Option<i64> {
    let registers = i64::from(unit.tile_registers);
    let tile = col_tile.unwrap_or(unit.tile_iterations);
    (1..registers)
        .filter(|v| 2 * v < registers && tile % (v * lanes) == 0)
        .max()
}

/// The iterator a member function is, when it is exactly one iterator with coefficient 1
/// (plus constants and parameters).
pub(crate) fn iterator_of(f: &QuasiAffine) -> Option<usize> {
    if !f.floors.is_empty() {
        return None;
    }
    let iters: Vec<(usize, i64)> = f
        .affine
        .terms()
        .iter()
        .filter_map(|&(v, c)| match v {
            Var::Iter(d) => Some((d, c)),
            Var::Param(_) | Var::Div(_) => None,
        })
        .collect();
    match iters.as_slice() {
        [(d, 1)] => Some(*d),
        _ => None,
    }
}

/// The size of the tile a band above `path` gives iterator `d` of `stmt` (`floor(d / T)`).
pub(crate) fn tile_of(tree: &ScheduleTree, path: &[usize], stmt: StmtId, d: usize) -> Option<i64> {
    (0..path.len()).rev().find_map(|k| {
        let NodeKind::Band(band) = &tree.node(&path[..k])?.kind else {
            return None;
        };
        band.functions(stmt)?
            .iter()
            .find_map(|f| match f.floors.as_slice() {
                [t] if f.affine.terms().is_empty()
                    && t.coeff == 1
                    && t.num.floors.is_empty()
                    && t.num.affine.terms() == [(Var::Iter(d), 1)] =>
                {
                    Some(t.den)
                }
                _ => None,
            })
    })
}

/// The iterators the member functions `functions` (outermost first) of `stmt` walk, each one
/// iterator, with the dimensions of the element the statement writes that each subscripts;
/// `None` when a function is not one iterator, or the statement writes a scalar or has
/// quasi-affine subscripts.
fn written_dims(
    program: &Program,
    stmt: StmtId,
    functions: &[QuasiAffine],
) -> Option<(Vec<usize>, Vec<Vec<usize>>)> {
    let iters = functions
        .iter()
        .map(iterator_of)
        .collect::<Option<Vec<_>>>()?;
    let s = &program.statements[stmt.index()];
    if program.array(s.write.array).shape.is_empty() || s.has_divisions() {
        return None;
    }
    let dims = iters
        .iter()
        .map(|&d| {
            (0..s.write.subscripts.len())
                .filter(|&k| s.write.subscripts[k].coeff(Var::Iter(d)) != 0)
                .collect()
        })
        .collect();
    Some((iters, dims))
}

/// The iterators the member functions `functions` (outermost first) of `stmt` walk, when a
/// register tile fits them: every function is one iterator, the statement writes an element
/// of an array (not a scalar) that the outermost and the innermost iterators subscript in one
/// different dimension each and the iterators between do not subscript (so the element stays
/// the same while they run).
pub(crate) fn accumulated(
    program: &Program,
    stmt: StmtId,
    functions: &[QuasiAffine],
) -> Option<Vec<usize>> {
    let n = functions.len();
    if n < 3 {
        return None;
    }
    let (iters, dims) = written_dims(program, stmt, functions)?;
    let held = dims[1..n - 1].iter().all(Vec::is_empty);
    (held && dims[0].len() == 1 && dims[n - 1].len() == 1 && dims[0] != dims[n - 1])
        .then_some(iters)
}

/// The iterators of a register tile of one row: the innermost member's iterator subscripts
/// the written element in one dimension and no other member's subscripts it, so the element
/// stays the same while all the others run (a sum over them of a row of columns).
pub(crate) fn accumulated_row(
    program: &Program,
    stmt: StmtId,
    functions: &[QuasiAffine],
) -> Option<Vec<usize>> {
    let n = functions.len();
    if n < 2 {
        return None;
    }
    let (iters, dims) = written_dims(program, stmt, functions)?;
    (dims[..n - 1].iter().all(Vec::is_empty) && dims[n - 1].len() == 1).then_some(iters)
}

/// The register tiles of a tree: (path of the band, mark name).
pub fn decide(
    program: &Program,
    unit: Option<&VectorUnit>,
    tree: &ScheduleTree,
) -> Vec<(Vec<usize>, Mark)> {
    let Some(unit) = unit.filter(|u| u.tile_registers >= 4) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for path in tree.find(&|k| matches!(k, NodeKind::Band(_))) {
        let Some(node) = tree.node(&path) else {
            continue;
        };
        let NodeKind::Band(band) = &node.kind else {
            continue;
        };
        let n = band.n_members();
        let leaf = node
            .children
            .iter()
            .all(|c| matches!(c.kind, NodeKind::Leaf));
        if !leaf || !band.permutable || n < 2 || !band.coincident[n - 1] {
            continue;
        }
        let Ok(stmts) = tree.statements_at(&path) else {
            continue;
        };
        let [stmt] = stmts.as_slice() else { continue };
        let Some(functions) = band.functions(*stmt) else {
            continue;
        };
        let s = &program.statements[stmt.index()];
        let written = program.array(s.write.array);
        let lanes = unit.lanes(written.elem);
        let (iters, shaped) = match accumulated(program, *stmt, functions) {
            Some(iters) if band.coincident[0] => {
                let row_tile = tile_of(tree, &path, *stmt, iters[0]);
                let col_tile = tile_of(tree, &path, *stmt, iters[n - 1]);
                (iters, shape(unit, lanes, row_tile, col_tile))
            }
            _ => {
                let Some(iters) = accumulated_row(program, *stmt, functions) else {
                    continue;
                };
                let col_tile = tile_of(tree, &path, *stmt, iters[n - 1]);
                (iters, row_shape(unit, lanes, col_tile).map(|v| (1, v)))
            }
        };
        let Some((rows, vectors)) = shaped else {
            continue;
        };
        let row = if rows == 1 {
            "one row of".to_string()
        } else {
            format!("rows {}", s.iterators[iters[0]])
        };
        let why = format!(
            "{} accumulators of {} vector registers, {} lanes of {}, {row} columns {}",
            rows * vectors,
            unit.registers,
            lanes,
            written.elem,
            s.iterators[iters[n - 1]],
        );
        let mark = RegisterTileMark {
            rows,
            cols: vectors * lanes,
            loops: n,
            why,
        };
        out.push((path, Mark::RegisterTile(mark)));
    }
    out
}

/// The pass: a register-tile mark above each band [`decide`] picks.
pub const PASS: Pass = Pass {
    name: "register-tile",
    summary:
        "point bands whose accumulators can stay in vector registers marked as register tiles (CPU)",
    enabled: |target, options| {
        options.register_tile && target.vector.is_some_and(|v| v.tile_registers > 0)
    },
    run,
};

fn run(cx: &mut PassContext) -> Result<(), Error> {
    let marks = decide(cx.program, cx.target.vector.as_ref(), &cx.tree);
    // Leaf bands are not inside each other: inserting above one keeps the others' paths.
    for (path, mark) in marks.into_iter().rev() {
        cx.tree.insert_mark(&path, mark)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(registers: u32) -> VectorUnit {
        VectorUnit {
            bytes: 32,
            tile_iterations: 128,
            registers,
            tile_registers: registers,
            fma_latency: 4,
            fma_pipes: 2,
        }
    }

    #[test]
    fn shapes_fit_the_registers() {
        // 16 registers, 4 lanes: 4 rows of 3 vectors use all 16 (12 + 3 + 1) and load 7
        // operands per 12 multiply-adds, the best ratio.
        assert_eq!(shape(&unit(16), 4, None, None), Some((4, 3)));
        // Inside 32 x 128 tiles, 12 columns would leave partial tiles: 4 rows of 2 vectors.
        assert_eq!(shape(&unit(16), 4, Some(32), Some(128)), Some((4, 2)));
        // 32 registers: 6 rows of 4 vectors (24 + 4 + 1 = 29).
        let (r, v) = shape(&unit(32), 8, None, None).unwrap();
        assert!(r * v + v < 32);
        assert_eq!(shape(&unit(3), 4, None, None), None);
        // 28 of 32 registers for the tile, 8 lanes, columns tiled by 256: 5 rows of 4 vectors
        // (20 + 4 + 1 = 25; 6 rows would need 29).
        let within_28 = VectorUnit {
            tile_registers: 28,
            ..unit(32)
        };
        assert_eq!(shape(&unit(32), 8, None, Some(256)), Some((6, 4)));
        assert_eq!(shape(&within_28, 8, None, Some(256)), Some((5, 4)));
    }

    #[test]
    fn a_row_takes_the_most_vectors_that_divide_its_tile() {
        // 32 columns of 4 lanes: 8 vectors would fit 16 registers only as 17; 4 divide 32.
        assert_eq!(row_shape(&unit(16), 4, Some(32)), Some(4));
        // 32 registers, 8 lanes, columns tiled by 32: 4 vectors (8 would be 64 columns).
        assert_eq!(row_shape(&unit(32), 8, Some(32)), Some(4));
        // Untiled: the unit's vector tile of 128 iterations; 8 vectors would need 17 registers.
        assert_eq!(row_shape(&unit(16), 4, None), Some(4));
        assert_eq!(row_shape(&unit(2), 4, Some(32)), None);
    }
}
