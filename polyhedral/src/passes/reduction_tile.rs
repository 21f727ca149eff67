//! Reduction tiles: which point bands the back end turns into several independent reduction
//! chains by unrolling a parallel member and jamming its copies into an innermost loop that
//! carries only reductions.
//!
//! A row reduction such as `tmp[i] = A[i][j] * x[j] + tmp[i]` with `j` innermost is one chain
//! of dependent additions per row: the floating-point operations may not be reassociated (the
//! results must be those of the interpreter), so the loop issues one multiply-add per latency
//! of the adder. Running `R` rows in the same loop gives `R` independent chains, each still
//! summed in source order, so the results are bit-identical.
//!
//! A band qualifies when it is innermost (only sequences of statements below it), all its
//! member functions are single iterators of every statement below it (a point band, or a band
//! that was not tiled), its innermost member is not coincident but carries only reductions, and a member outside it is coincident and
//! subscripts the element every reduction of the innermost loop accumulates into:
//! - *only reductions*: once the band's outer members are equal, no legality dependence has a
//!   positive distance along the innermost member but those of a statement with itself on the
//!   element it accumulates into, where the statement is a reduction
//!   ([`crate::program::Reduction`]) over the innermost member's iterator (so the element is
//!   the same in every iteration of the innermost loop). The dimensions above the band are
//!   left out of the question, which can only find more dependences, never fewer.
//! - *the rows*: the innermost coincident member of the others whose iterator subscripts the
//!   written element of every such reduction, provided no statement runs more than one
//!   multiply-add per iteration whose value changes with the row ([`MAX_ROW_WORK`]). Jamming its iterations into the innermost loop
//!   interleaves instances of different rows, which share no dependence once the outer
//!   members are equal (it is coincident); the instances of one row keep their order.
//!
//! How many rows (`R`) comes from the vector unit's multiply-add latency and pipes (the
//! independent chains that keep every pipe busy) divided by the chains one row already has
//! (its reductions), within the registers (`R` accumulators per reduction and two operands),
//! preferring a count that divides the rows' tile size (no rows left over inside a full tile).
//!
//! The decision is a mark above the band ([`ReductionTileMark`]); nothing is recognised by its
//! shape: the analysis sees the band's flags, the dependences and the vector unit.

use crate::deps::Dependences;
use crate::passes::register_tile::{iterator_of, tile_of};
use crate::passes::{Pass, PassContext};
use crate::pipeline::Error;
use crate::program::{Program, StmtId, Var};
use crate::schedule::legality::coincident_dims_among;
use crate::schedule::mark::{Mark, ReductionTileMark};
use crate::schedule::pluto::{Band as FlatBand, BandKind, DimKind, PlutoSchedule, ScheduleDim};
use crate::schedule::tree::Band;
use crate::schedule::{Node, NodeKind, QuasiAffine, ScheduleTree};
use crate::target::VectorUnit;

/// The rows to jam for a vector unit, given the reduction chains one row runs and the size of
/// the tile the rows run in (when known); `None` when the unit does not describe its
/// multiply-add pipes or fewer than two rows fit.
pub fn rows(unit: &VectorUnit, chains: i64, row_tile: Option<i64>) -> Option<i64> {
    let chains = chains.max(1);
    let wanted = i64::from(unit.fma_latency) * i64::from(unit.fma_pipes);
    // Every chain of every row holds an accumulator; one operand of a row and one the rows
    // share are live beside them.
    let most = (i64::from(unit.registers) - 2) / chains;
    let least = ((wanted + chains - 1) / chains).min(most);
    if least < 2 {
        return None;
    }
    let divides = |r: i64| row_tile.is_none_or(|t| t % r == 0);
    Some(
        (least..=most.min(2 * least))
            .find(|&r| divides(r))
            .unwrap_or(least),
    )
}

/// Whether dependence `d` is a statement's self-dependence on the element it accumulates into
/// while its iterator `k` runs.
fn is_reduction_over(program: &Program, d: &crate::deps::Dependence, k: usize) -> bool {
    let s = &program.statements[d.source.index()];
    d.source == d.sink
        && d.array == s.write.array
        && s.reduction.as_ref().is_some_and(|r| r.iters.contains(&k))
}

/// The rows member of `band` (over `stmts`) when it qualifies (see the module docs) and the
/// rows' steps are light enough ([`MAX_ROW_WORK`]), and the number of reductions the innermost
/// loop runs per row.
fn qualifies(
    program: &Program,
    deps: &Dependences,
    band: &Band,
    stmts: &[StmtId],
) -> Result<Option<(usize, i64)>, Error> {
    let n = band.n_members();
    if n < 2 || band.coincident[n - 1] {
        return Ok(None);
    }
    // Per statement, the iterator of each member.
    let mut iters = Vec::new();
    for &s in stmts {
        let Some(functions) = band.functions(s) else {
            return Ok(None);
        };
        let Some(its) = functions
            .iter()
            .map(iterator_of)
            .collect::<Option<Vec<_>>>()
        else {
            return Ok(None);
        };
        iters.push((s, its));
    }
    let inner_of = |s: StmtId| iters.iter().find(|(t, _)| *t == s).map(|(_, i)| i[n - 1]);
    // The dependences that count: every legality dependence among the band's statements but
    // the reductions of the innermost loop.
    let others = Dependences {
        memory: deps
            .legality()
            .filter(|d| stmts.contains(&d.source) && stmts.contains(&d.sink))
            .filter(|d| !inner_of(d.source).is_some_and(|k| is_reduction_over(program, d, k)))
            .cloned()
            .collect(),
        dataflow: Vec::new(),
        live_in: Vec::new(),
        live_out: Vec::new(),
    };
    if !others.memory.is_empty() {
        let statements = program.statements.len();
        let dims = (0..n)
            .map(|m| {
                let mut exprs = vec![QuasiAffine::constant(0); statements];
                for &s in stmts {
                    if let Some(f) = band.functions(s) {
                        exprs[s.index()] = f[m].clone();
                    }
                }
                ScheduleDim {
                    kind: DimKind::Loop,
                    exprs,
                    coincident: false,
                }
            })
            .collect();
        let members = PlutoSchedule {
            dims,
            bands: vec![FlatBand {
                start: 0,
                len: n,
                permutable: band.permutable,
                kind: BandKind::Plain,
            }],
        };
        let flags = coincident_dims_among(program, &others, &members, stmts)?;
        if !flags[n - 1] {
            return Ok(None);
        }
    }
    // The reductions the innermost loop runs, by statement: their written subscripts.
    let reductions: Vec<(StmtId, &Vec<usize>)> = iters
        .iter()
        .filter(|(s, its)| {
            program.statements[s.index()]
                .reduction
                .as_ref()
                .is_some_and(|r| r.iters.contains(&its[n - 1]))
        })
        .map(|(s, its)| (*s, its))
        .collect();
    if reductions.is_empty() {
        return Ok(None);
    }
    // Rows of a write with quasi-affine subscripts may share an element: never jammed.
    let subscripts = |s: StmtId, d: usize| {
        let st = &program.statements[s.index()];
        !st.has_divisions()
            && st
                .write
                .subscripts
                .iter()
                .any(|e| e.coeff(Var::Iter(d)) != 0)
    };
    let row = (0..n - 1)
        .rev()
        .find(|&m| band.coincident[m] && reductions.iter().all(|(s, its)| subscripts(*s, its[m])));
    let Some(row) = row else {
        return Ok(None);
    };
    let light = iters
        .iter()
        .all(|(s, its)| row_work(&program.statements[s.index()], its[row]) <= MAX_ROW_WORK);
    Ok(light.then_some((row, reductions.len() as i64)))
}

/// The most operations whose values change with the row that one statement may run per
/// iteration: one multiply-add (a product and the accumulation). The jammed rows run
/// scalar, one operation at a time per row, while the loop left alone is vectorised by the C
/// compiler along the reduction for everything but the accumulation itself, so a longer
/// step is faster left alone: syr2k's six (two products of three factors, two additions) ran
/// 1.6x slower jammed (LARGE, one thread, medians of 7 interleaved runs: 611 against 380 ms),
/// syrk's two 1.3x faster (221 against 284 ms).
const MAX_ROW_WORK: usize = 2;

/// The operations of `s`'s body whose values change with iterator `row`: those with an
/// operand read at subscripts that use it, or the iterator itself.
fn row_work(s: &crate::program::Statement, row: usize) -> usize {
    use crate::program::Expr;
    let mut varies = vec![false; s.exprs.len()];
    let mut count = 0;
    // Operands come before the expressions that use them.
    for (id, e) in s.exprs.iter() {
        let v = match e {
            Expr::Iter(d) => *d == row,
            Expr::Read(k) => s.reads[*k]
                .subscripts
                .iter()
                .any(|sub| s.uses_iter(sub, row)),
            Expr::Literal(_) | Expr::Param(_) | Expr::Local(_) => false,
            other => {
                let v = other.operands().iter().any(|o| varies[o.index()]);
                count += usize::from(v);
                v
            }
        };
        varies[id.index()] = v;
    }
    count
}

/// Whether a subtree only orders statements (sequences and sets of filters): no loop, mark or
/// extension below it.
fn statements_only(node: &Node) -> bool {
    matches!(
        node.kind,
        NodeKind::Leaf | NodeKind::Sequence | NodeKind::Set | NodeKind::Filter(_)
    ) && node.children.iter().all(statements_only)
}

/// The reduction tiles of a tree: (path of the band, mark name).
pub fn decide(
    program: &Program,
    deps: &Dependences,
    unit: Option<&VectorUnit>,
    tree: &ScheduleTree,
) -> Result<Vec<(Vec<usize>, Mark)>, Error> {
    let Some(unit) = unit else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for path in tree.find(&|k| matches!(k, NodeKind::Band(_))) {
        let Some(node) = tree.node(&path) else {
            continue;
        };
        let NodeKind::Band(band) = &node.kind else {
            continue;
        };
        if !node.children.iter().all(statements_only) {
            continue;
        }
        let Ok(stmts) = tree.statements_at(&path) else {
            continue;
        };
        let Some((member, chains)) = qualifies(program, deps, band, &stmts)? else {
            continue;
        };
        // Every statement's iterator of the rows member, for the tile it runs in.
        let first = stmts[0];
        let row_iter = band.functions(first).and_then(|f| iterator_of(&f[member]));
        let row_tile = row_iter.and_then(|d| tile_of(tree, &path, first, d));
        let Some(rows) = rows(unit, chains, row_tile) else {
            continue;
        };
        let n = band.n_members();
        let s = &program.statements[first.index()];
        let inner = band.functions(first).and_then(|f| iterator_of(&f[n - 1]));
        let name = |d: Option<usize>| d.map_or("?", |d| s.iterators[d].as_str()).to_string();
        let why = format!(
            "{chains} reduction chain(s) per row over {}, {} independent chains wanted \
             (latency {} x {} pipes), rows {}",
            name(inner),
            unit.fma_latency * unit.fma_pipes,
            unit.fma_latency,
            unit.fma_pipes,
            name(row_iter),
        );
        let mark = ReductionTileMark {
            rows,
            member,
            loops: n,
            tile: row_tile.unwrap_or(0),
            why,
        };
        out.push((path, Mark::ReductionTile(mark)));
    }
    Ok(out)
}

/// The pass: a reduction-tile mark above each band [`decide`] picks.
pub const PASS: Pass = Pass {
    name: "reduction-tile",
    summary: "innermost reductions given independent chains from rows of a parallel loop (CPU)",
    enabled: |target, options| {
        options.register_tile
            && target
                .vector
                .is_some_and(|v| v.fma_latency > 0 && v.fma_pipes > 0 && v.registers > 0)
    },
    run,
};

fn run(cx: &mut PassContext) -> Result<(), Error> {
    let marks = decide(cx.program, cx.deps, cx.target.vector.as_ref(), &cx.tree)?;
    // The bands are innermost, not inside each other: inserting above one keeps the
    // others' paths.
    for (path, mark) in marks.into_iter().rev() {
        cx.tree.insert_mark(&path, mark)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(registers: u32, fma_latency: u32, fma_pipes: u32) -> VectorUnit {
        VectorUnit {
            bytes: 32,
            tile_iterations: 128,
            registers,
            tile_registers: registers,
            fma_latency,
            fma_pipes,
        }
    }

    #[test]
    fn rows_cover_the_latency_within_the_registers() {
        // 4 cycles x 2 pipes: 8 chains; one per row asks for 8 rows, two for 4, three for 3
        // (4 inside tiles of 32, which 3 does not divide).
        let u = unit(16, 4, 2);
        assert_eq!(rows(&u, 1, None), Some(8));
        assert_eq!(rows(&u, 2, Some(32)), Some(4));
        assert_eq!(rows(&u, 3, None), Some(3));
        assert_eq!(rows(&u, 3, Some(32)), Some(4));
        // Tiles of 7: no count between 8 and 14 divides them.
        assert_eq!(rows(&u, 1, Some(7)), Some(8));
        // Seven chains per row leave registers for two rows only, eight for one.
        assert_eq!(rows(&u, 7, None), Some(2));
        assert_eq!(rows(&u, 8, None), None);
        // A unit that does not describe its pipes, or one chain already enough.
        assert_eq!(rows(&unit(16, 0, 0), 1, None), None);
        assert_eq!(rows(&unit(16, 1, 1), 1, None), None);
    }
}
