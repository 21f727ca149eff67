//! What `polyfuse compile --emit cache-model` prints: per tile band, the misses the model
//! predicts in each cache level for the tile sizes the kernel was compiled with and for the
//! search's runner-up, then the whole kernel's misses, per array.
//!
//! The search is run again on the schedule before tiling, exactly as the tiling pass ran it:
//! a band's two columns are the kernel's misses with that band tiled and the others not, as
//! the search compared its candidates. The kernel's misses at the end are those of the final
//! schedule (every band tiled and permuted as the pipeline left it), whose model walks the
//! register tiles of one row as the code runs them (their columns in blocks, a tile loop in
//! front of their band) but has no other register tiles: where the kernel's one tile band
//! gets a register tile of rows and columns (the search expected one and the tree has it),
//! they are the search's figures for the chosen tiles instead, which walk the register tile
//! as the code runs it. The kernel's misses count the packed
//! buffers of its pack marks as the code has them: the copies in and out, and the loops below
//! a mark on the buffer (`packing.rs`). All are from cold caches, on one thread.

use std::fmt::Write;

use crate::passes::post_tiling_fusion;
use crate::passes::tile::Lookahead;
use crate::pipeline::Compiled;
use crate::program::StmtId;
use crate::schedule::pluto::{display_expr, Band, BandKind, PlutoSchedule};
use crate::schedule::{Mark, NodeKind};
use crate::target::TargetDescription;

use super::eval::{predict, Prediction};
use super::lookahead::PackedRanking;
use super::nest::{ColumnBlocks, Model};
use super::packing::packings;
use super::search::{search_band, RULE_MARGIN, STREAMED_PARALLEL_TILES, WAVEFRONT_TILES};
use super::{levels, Level, Unsupported};

/// The report of `compiled` on `target`'s caches.
pub fn report(compiled: &Compiled, target: &TargetDescription) -> Result<String, Unsupported> {
    let levels = levels(target).ok_or_else(|| {
        Unsupported(format!(
            "the {} target describes no cache with a line size and an associativity",
            target.name
        ))
    })?;
    if compiled
        .stages
        .iter()
        .any(|(name, _)| *name == post_tiling_fusion::PASS.name)
    {
        return Err(Unsupported(
            "the cache model of trees with extension nodes (post-tiling fusion)".into(),
        ));
    }
    let program = &compiled.program;
    let model = Model::of_schedule_with(program, &compiled.tiled, &column_blocks(compiled))?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cache model of {} on {} (cold caches, one thread)",
        program.name, target.name
    );
    let described: Vec<String> = levels
        .iter()
        .map(|l| {
            format!(
                "{} {} {}-way {}-byte lines",
                l.name,
                bytes(l.bytes),
                l.ways,
                l.line_bytes
            )
        })
        .collect();
    let _ = writeln!(out, "caches: {}", described.join(", "));
    // With a register tile on the kernel's one tile band, the search's walk of it (below),
    // and the sizes of its slots.
    let mut register_aware: Option<(Model, Vec<i64>)> = None;
    // The passes the search looked ahead to when tiling.
    let lookahead = Lookahead::of(target, &compiled.options);
    let mut tile_bands: Vec<Band> = compiled
        .tiled
        .bands
        .iter()
        .filter(|b| b.kind == BandKind::Tile)
        .copied()
        .collect();
    tile_bands.sort_by_key(|b| b.start);
    let single_band = tile_bands.len() == 1;
    // Whether the code has the register tile the search walked (a pack mark inside the point
    // band leaves it without one).
    let register_tiled = !compiled
        .tree
        .find(&|k| matches!(k, NodeKind::Mark(Mark::RegisterTile(_))))
        .is_empty();
    let mut before = 0;
    for tile_band in tile_bands {
        // Tiling put `before` tile dimensions ahead of this band's: its band started there.
        let start = tile_band.start - before;
        before += tile_band.len;
        let Some(band) = compiled
            .schedule
            .bands
            .iter()
            .find(|b| b.start == start && b.len == tile_band.len)
            .copied()
        else {
            continue;
        };
        let actual = tile_sizes(compiled, &band, &tile_band);
        let search = search_band(
            program,
            &compiled.deps,
            &compiled.schedule,
            &band,
            target,
            lookahead.as_ref(),
        )
        .map_err(|e| Unsupported(e.to_string()))?;
        let Some(search) = search else {
            let _ = writeln!(
                out,
                "band {}: tiles {}, not chosen by the cache model",
                describe(compiled, &band),
                times(&actual)
            );
            continue;
        };
        let by_model = search.best.sizes == actual;
        let rule_kept = format!(
            "the capacity rule's (the model's best saves less than {:.0}% on them)",
            100.0 * RULE_MARGIN
        );
        let _ = writeln!(
            out,
            "band {}: tiles {}, {}",
            describe(compiled, &band),
            times(&actual),
            match (by_model, search.kept_rule) {
                (true, true) => &rule_kept,
                (true, false) if search.rule == actual => {
                    "chosen by the cache model (the capacity rule's too)"
                }
                (true, false) => "chosen by the cache model",
                (false, _) => "given",
            }
        );
        if let Some(streamed) = search.streamed {
            let why = if streamed.whole {
                ", untiled: no member is parallel, so its tiles would run as a wavefront, and the \
                 band streams the kernel's data once"
                    .to_string()
            } else if streamed.wavefront {
                format!(
                    ", like every member's tiles the extent over {WAVEFRONT_TILES}: no member is \
                     parallel, so the tiles run as a wavefront, and no shape keeps more of the \
                     data the band sweeps again and again, so the shape serves the wavefront's \
                     diagonals"
                )
            } else if streamed.parallel {
                format!(
                    ", for the hardware prefetcher: a page, or as long as leaves the parallel \
                     member {STREAMED_PARALLEL_TILES} tiles for the threads"
                )
            } else {
                ", a page, for the hardware prefetcher".to_string()
            };
            let _ = writeln!(
                out,
                "  the band streams (its first-level misses are about the lines each execution \
                 of it touches): tiles of member {} at least {} long{why}",
                streamed.member + 1,
                streamed.run,
            );
        }
        let _ = writeln!(
            out,
            "  misses of the kernel with this band tiled (the others not), as the search \
             compared them:"
        );
        let mine = predict(&search.model, &actual, &levels);
        if single_band && by_model && search.model.register.is_some() && register_tiled {
            // The final schedule's model has no register tiles; the search's walks this one
            // as the code runs it, and with one tile band it is the whole kernel's.
            register_aware = Some((search.model.clone(), actual.clone()));
        }
        let other = if by_model {
            let what = if search.kept_rule {
                "the model's best"
            } else {
                "runner-up"
            };
            search.runner_up.map(|r| (what, r.sizes, r.prediction))
        } else {
            Some(("model's choice", search.best.sizes, search.best.prediction))
        };
        table(&mut out, &levels, &actual, &mine, other.as_ref());
        if let (true, Some(packed)) = (by_model, &search.packed) {
            packed_table(&mut out, &levels, packed);
        }
    }
    let (kernel, sizes) = match &register_aware {
        Some((m, s)) => (m, s.as_slice()),
        None => (&model, model.sizes.as_slice()),
    };
    let packs = packings(program, &compiled.tree)?;
    let chosen = if packs.is_empty() {
        predict(kernel, sizes, &levels)
    } else {
        predict(
            &kernel.with_packing(program, &packs, sizes)?,
            sizes,
            &levels,
        )
    };
    let _ = writeln!(out, "predicted misses of the kernel:");
    let mut header = format!("  {:<6} {:>14}", "level", "total");
    for (a, buffer, _) in &chosen.arrays {
        let name = &program.array(*a).name;
        let name = if *buffer {
            format!("{name}_packed")
        } else {
            name.clone()
        };
        let _ = write!(header, " {name:>12}");
    }
    let _ = writeln!(out, "{header}");
    for (k, l) in levels.iter().enumerate() {
        let mut row = format!("  {:<6} {:>14.0}", l.name, chosen.misses[k]);
        for (_, _, m) in &chosen.arrays {
            let _ = write!(row, " {:>12.0}", m[k]);
        }
        let _ = writeln!(out, "{row}");
    }
    let _ = writeln!(out, "lines touched: {:.0}", chosen.compulsory);
    Ok(out)
}

/// The tile size of each member of `band` (of the schedule before tiling) in `tile_band` (of
/// the tiled schedule): the divisor of the tile loop over the member's function, for a
/// statement that moves along it (tiling may order the tile loops of each loop nest
/// differently). A member no statement moves along has size 1.
fn tile_sizes(compiled: &Compiled, band: &Band, tile_band: &Band) -> Vec<i64> {
    let n_stmts = compiled.program.statements.len();
    (0..band.len)
        .map(|k| {
            for s in 0..n_stmts {
                let phi = &compiled.schedule.dims[band.start + k].exprs[s];
                if phi.affine.terms().is_empty() {
                    continue;
                }
                for d in tile_band.start..tile_band.start + tile_band.len {
                    let e = &compiled.tiled.dims[d].exprs[s];
                    match e.floors.first() {
                        Some(f) if f.num == *phi => return f.den,
                        None if e == phi => return 1,
                        _ => {}
                    }
                }
            }
            1
        })
        .collect()
}

/// `over (i, j, k) of S0, S1`: the band's members for its first statement that moves along
/// them, and the statements it schedules.
fn describe(compiled: &Compiled, band: &Band) -> String {
    let program = &compiled.program;
    let schedule: &PlutoSchedule = &compiled.schedule;
    let moves = |s: usize| schedule.members_moved(band, StmtId(s as u32));
    let moving: Vec<usize> = (0..program.statements.len())
        .filter(|&s| moves(s) > 0)
        .collect();
    // The members as the statement that moves along most of them sees them.
    let deepest = moving
        .iter()
        .copied()
        .max_by_key(|&s| (moves(s), std::cmp::Reverse(s)));
    let members = deepest.map(|s| {
        (band.start..band.start + band.len)
            .map(|d| display_expr(&schedule.dims[d].exprs[s], program, &program.statements[s]))
            .collect::<Vec<_>>()
            .join(", ")
    });
    let names: Vec<&str> = moving
        .iter()
        .map(|&s| program.statements[s].name.as_str())
        .collect();
    format!(
        "over ({}) of {}",
        members.unwrap_or_default(),
        names.join(", ")
    )
}

fn table(
    out: &mut String,
    levels: &[Level],
    sizes: &[i64],
    prediction: &Prediction,
    other: Option<&(&str, Vec<i64>, Prediction)>,
) {
    let mut header = format!(
        "  {:<6}  {:>20}",
        "level",
        format!("tiles {}", times(sizes))
    );
    if let Some((what, other_sizes, _)) = other {
        let _ = write!(header, "  {:>20}", format!("tiles {}", times(other_sizes)));
        let _ = write!(header, "  ({what})");
    }
    let _ = writeln!(out, "{header}");
    for (k, l) in levels.iter().enumerate() {
        let mut row = format!("  {:<6}  {:>20.0}", l.name, prediction.misses[k]);
        if let Some((_, _, p)) = other {
            let _ = write!(row, "  {:>20.0}", p.misses[k]);
        }
        let _ = writeln!(out, "{row}");
    }
}

/// The finalists ranked with the buffers the pack pass gives them ([`super::lookahead`]).
fn packed_table(out: &mut String, levels: &[Level], packed: &PackedRanking) {
    let _ = writeln!(
        out,
        "  with the buffers the pack pass gives ({}), the search's finalists{}:",
        packed.arrays.join(", "),
        if packed.replaced {
            format!(
                ": the cheapest, with its own buffers, saves more than {:.0}% and replaces \
                 the choice",
                100.0 * packed.margin
            )
        } else {
            format!(" (none saves {:.0}% on the choice)", 100.0 * packed.margin)
        }
    );
    let choice = &packed.choice;
    match &packed.challenger {
        Some(c) if packed.replaced => {
            let other = (
                "the choice it replaced",
                choice.sizes.clone(),
                choice.prediction.clone(),
            );
            table(out, levels, &c.sizes, &c.prediction, Some(&other));
        }
        Some(c) => {
            let other = (
                "cheapest other finalist",
                c.sizes.clone(),
                c.prediction.clone(),
            );
            table(out, levels, &choice.sizes, &choice.prediction, Some(&other));
        }
        None => table(out, levels, &choice.sizes, &choice.prediction, None),
    }
}

fn times(sizes: &[i64]) -> String {
    sizes
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(" x ")
}

fn bytes(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

/// The column blocks of the register tiles of one row in `compiled`'s tree, placed in its
/// final schedule: in front of the dimension that is the tiled band's first loop for every
/// statement of it (a tile whose band is not found so is left out).
fn column_blocks(compiled: &Compiled) -> Vec<ColumnBlocks> {
    let tree = &compiled.tree;
    let dims = &compiled.tiled.dims;
    tree.find(&|k| matches!(k, NodeKind::Mark(_)))
        .iter()
        .filter_map(|path| {
            let node = tree.node(path)?;
            let NodeKind::Mark(Mark::RegisterTile(mark)) = &node.kind else {
                return None;
            };
            if mark.rows != 1 {
                return None;
            }
            let NodeKind::Band(band) = &node.children.first()?.kind else {
                return None;
            };
            let mut at = None;
            let mut columns = Vec::new();
            for (stmt, functions) in &band.schedule {
                let (first, last) = (functions.first()?, functions.last()?);
                if !last.floors.is_empty() {
                    return None;
                }
                let s = stmt.index();
                let d = dims
                    .iter()
                    .position(|dim| dim.exprs.get(s) == Some(first))?;
                if at.is_some_and(|a| a != d) {
                    return None;
                }
                at = Some(d);
                columns.push((s, last.affine.clone()));
            }
            Some(ColumnBlocks {
                at: at?,
                columns,
                width: mark.cols,
            })
        })
        .collect()
}
