//! Post-tiling fusion (Zhao and Di, MICRO 2020, algorithms 1–3): the live-out statements are
//! tiled first, and each tile then computes, just before it runs, exactly the producer
//! instances it reads.
//!
//! The pass works on the tiled tree whose root child is a sequence of *groups* (the
//! scheduler's fusion groups, smartfuse by default). A group that writes a kernel output is a
//! **consumer**; its top band (the tile band) gives every one of its statements the tile
//! coordinates `t = (c_0 … c_{k-1})` of its first `k` members. For a producer group (one that
//! writes only temporaries) the pass computes the **upwards-exposed footprint** of a tile:
//! the elements the tile's statements read from the producer's arrays, and from those, through
//! the producer's write access, the producer instances that write them — a relation from tile
//! coordinates to producer instances (the *extension schedule*, the seed's equation 6). It is
//! the integer projection of `{ (t, p) : r in tile t, r reads e, p writes e }`, kept when it
//! is one conjunction. Chains are fused transitively: once a producer is fused, its own
//! instances in a tile are readers for the producers before it.
//!
//! The fused producers are inserted under the consumer's first `k` band members with one
//! extension node (their own subtrees, tile bands included, below it, before the consumer's
//! rest), and their original subtrees are marked [`Mark::Skipped`], which AST generation leaves out.
//!
//! A producer group is fused only when all of these hold, each checked exactly on the integer
//! sets the extension will run:
//! - every value a tile reads from it is computed by that tile's extension, and no instance
//!   is in the extensions of two tiles (*disjointness*): no value is computed twice (instances
//!   whose values nobody reads write temporaries only, and are dropped) — unless the statement
//!   is a single assignment to a temporary and the shared instances are a small part of a
//!   tile's (a stencil's halo): then every tile computes its own copy of them
//!   ([`recompute`]), and dependences on that array between tiles carry nothing;
//! - every dependence between its instances and the fused statements stays inside one tile:
//!   the tile loops carry no new dependence, so those that were parallel stay parallel (the
//!   seed's parallel-loop rule, in its strictest form: the consumer loses no parallel loop);
//! - no dependence leads from it to a group between it and the consumer that stays where it is;
//! - every statement that reads its values is fused into the same tiles, and when it writes a
//!   kernel output every one of its instances (at the kernel's sizes) is in some tile (**multiple live-outs**: an intermediate that another live-out group reads too
//!   would have to be computed twice, so it is not fused);
//! - on a target that caps the loop iterations of one invocation, a fused tile stays within
//!   the share of the cap that tile sizes keep to ([`budget`]).
//!
//! Among the prefixes of the consumer's tile band, the one that fuses the most groups is used
//! (the longest among equals): a producer that every tile of one row needs (a row maximum in
//! softmax) fuses under the row's tile loop only. A group that could not be fused gets a mark
//! `unfused: REASON` above its subtree, which `--emit tree` shows.
//!
//! When the scheduler's fusion put a producer and a live-out statement in one band that lost
//! a parallel member (smartfuse skews a stencil's stages into one sequential nest), the pass
//! also tries the schedule with every component distributed (the live-out statements tiled on
//! their own, as the seed's algorithm starts) and keeps that one when as many groups remain
//! and more tile loops are parallel.
//!
//! What holds on the way out: the tree schedules every instance exactly once (skipped
//! subtrees excepted, whose instances the extensions run once each, recomputed halos once per
//! tile that needs them), in an order that respects every dependence.
//!
//! - [`budget`]: on targets that cap the loop iterations of one invocation, how much work a
//!   fused tile may give one invocation;
//! - [`recompute`]: when producer instances overlapping tiles need may be computed by each of
//!   them (halos), and whether that is worth it.

mod budget;
pub mod recompute;

use crate::deps::Dependences;
use crate::passes::{Pass, PassContext};
use crate::pipeline::Error as PipelineError;
use crate::program::{AffineExpr, ArrayRole, ConstraintKind, ParamId, Program, StmtId, Var};
use crate::schedule::expr::{QuasiAffine, QuasiConstraint};
use crate::schedule::instances::Instances;
use crate::schedule::pluto;
use crate::schedule::tree::{Extension, Filter, Node, NodeKind, ScheduleTree};
use crate::schedule::Mark;
use crate::schedule::ScheduleError;
use budget::InvocationBudget;

use crate::sets::conj::{Conj, Row};
use crate::sets::omega::{is_feasible, project};
use crate::sets::rel::{Basic, Rel};
use crate::sets::{Set, Tuple};

/// The post-tiling fusion pass (see the module docs).
pub const PASS: Pass = Pass {
    name: "post-tiling-fusion",
    summary: "producers pulled into the tiles of the statements that write the outputs (extension \
        nodes; `--fuse post-tiling`)",
    enabled: |_, options| options.post_tiling_fusion,
    run,
};

fn run(cx: &mut PassContext) -> Result<(), PipelineError> {
    let budget = InvocationBudget::of(cx.target);
    let fused = fuse_after_tiling(cx.program, cx.deps, &cx.tree, budget)?;
    let alternative = match mixes_producers(cx.program, &cx.tree) {
        true => distributed(cx)?,
        false => None,
    };
    if let Some((schedule, tree)) = alternative {
        let alternative = fuse_after_tiling(cx.program, cx.deps, &tree, budget)?;
        let (live, parallel) = shape(&fused);
        let (alt_live, alt_parallel) = shape(&alternative);
        if alt_live <= live && alt_parallel > parallel {
            cx.schedule = schedule;
            cx.tree = alternative;
            return Ok(());
        }
    }
    cx.tree = fused;
    Ok(())
}

/// The subtrees of the root's groups (the root's child when it is not a sequence).
fn group_roots(tree: &ScheduleTree) -> Vec<&Node> {
    let Some(top) = tree.root.children.first() else {
        return Vec::new();
    };
    if top.kind != NodeKind::Sequence {
        return vec![top];
    }
    top.children
        .iter()
        .filter_map(|c| c.children.first())
        .collect()
}

/// Whether some group of the scheduler's fusion computes a temporary together with a kernel
/// output in a tile band that lost a parallel member: smartfuse shifted or skewed a producer
/// into its consumer (a stencil's halo), where tiling the consumer alone and recomputing the
/// halo would keep every tile loop parallel.
fn mixes_producers(program: &Program, tree: &ScheduleTree) -> bool {
    group_roots(tree).into_iter().any(|g| {
        let NodeKind::Band(band) = &g.kind else {
            return false;
        };
        let roles: Vec<ArrayRole> = band
            .schedule
            .iter()
            .map(|(s, _)| {
                program
                    .array(program.statements[s.index()].write.array)
                    .role
            })
            .collect();
        roles.contains(&ArrayRole::Temporary)
            && roles.iter().any(|r| *r != ArrayRole::Temporary)
            && band.coincident.contains(&false)
    })
}

/// The scheduler's schedule with every strongly connected component distributed, through
/// the tree passes that ran before this one: the live-out statements tiled on their own.
/// `None` when the sizes of `--tile` do not fit that schedule's deepest band (they were
/// given for the scheduler's own fusion).
fn distributed(
    cx: &PassContext,
) -> Result<Option<(crate::schedule::pluto::PlutoSchedule, ScheduleTree)>, PipelineError> {
    let options = pluto::Options {
        fuse: pluto::Fusion::NoFuse,
        ..pluto::Options::default()
    };
    let schedule = pluto::schedule(cx.program, cx.deps, &options)?;
    if cx.options.verify {
        pluto::check_legality(cx.program, cx.deps, &schedule)?;
    }
    let mut sub = PassContext::new(cx.program, cx.deps, cx.target, cx.options, schedule)?;
    let earlier = cx.earlier();
    match sub.run(cx.pipeline(), 0..earlier.len(), |_, _| Ok(())) {
        Err(PipelineError::TileSizes(_)) => return Ok(None),
        result => result?,
    }
    Ok(Some((sub.schedule, sub.tree)))
}

/// (groups that still run on their own, leading parallel members of their top bands).
fn shape(tree: &ScheduleTree) -> (usize, usize) {
    let mut live = 0;
    let mut parallel = 0;
    for g in group_roots(tree) {
        match &g.kind {
            NodeKind::Mark(Mark::Skipped) => {}
            NodeKind::Band(band) => {
                live += 1;
                parallel += band.coincident.iter().take_while(|c| **c).count();
            }
            _ => live += 1,
        }
    }
    (live, parallel)
}

/// One child of the root sequence.
struct Group {
    stmts: Vec<StmtId>,
}

/// What fusing into one consumer with `k` tile members would do.
struct Plan {
    k: usize,
    /// Fused groups (indices), nearest to the consumer first.
    fused: Vec<usize>,
    /// Per fused statement, its extension constraints.
    exts: Vec<(StmtId, Vec<QuasiConstraint>)>,
    /// Groups that feed the consumer but stay unfused, with the reason.
    refused: Vec<(usize, String)>,
    /// Fused statements whose instances neighbouring tiles both compute (halos).
    recomputed: Vec<StmtId>,
}

/// Rewrites `tree` (see the module docs); a tree without a root sequence of groups comes back
/// unchanged. With a `budget`, no fused tile gives one invocation more than its share of the
/// target's cap on loop iterations.
pub(crate) fn fuse_after_tiling(
    program: &Program,
    deps: &Dependences,
    tree: &ScheduleTree,
    budget: Option<InvocationBudget>,
) -> Result<ScheduleTree, ScheduleError> {
    let Some(seq) = tree.root.children.first() else {
        return Ok(tree.clone());
    };
    if seq.kind != NodeKind::Sequence {
        return Ok(tree.clone());
    }
    let mut groups = Vec::new();
    for c in &seq.children {
        let NodeKind::Filter(f) = &c.kind else {
            return Ok(tree.clone());
        };
        if f.stmts.iter().any(|(_, cs)| !cs.is_empty()) {
            return Ok(tree.clone());
        }
        groups.push(Group {
            stmts: f.stmts.iter().map(|(s, _)| *s).collect(),
        });
    }
    let writes_output = |g: &Group| {
        g.stmts.iter().any(|s| {
            let a = program.statements[s.index()].write.array;
            program.arrays[a.index()].role != ArrayRole::Temporary
        })
    };
    let mut done = vec![false; groups.len()];
    let mut plans = Vec::new();
    let mut refusals: Vec<(usize, String)> = Vec::new();
    for b in (0..groups.len()).rev() {
        // A group that writes outputs may itself have been fused into a later consumer.
        if done[b] || !writes_output(&groups[b]) {
            continue;
        }
        let Some(NodeKind::Band(band)) = seq.children[b].children.first().map(|n| &n.kind) else {
            continue;
        };
        let mut best: Option<Plan> = None;
        for k in (1..=band.n_members()).rev() {
            let consumer = Consumer { b, band, k };
            let plan = plan_consumer(program, deps, &groups, &done, &consumer, budget)?;
            if best
                .as_ref()
                .is_none_or(|p| plan.fused.len() > p.fused.len())
            {
                best = Some(plan);
            }
        }
        let Some(plan) = best else { continue };
        for &a in &plan.fused {
            done[a] = true;
        }
        refusals.extend(plan.refused.iter().cloned());
        if !plan.fused.is_empty() {
            plans.push((b, plan));
        }
    }

    let mut out = tree.clone();
    for (b, plan) in &plans {
        let mut order = plan.fused.clone();
        order.sort_unstable();
        let subtree = if order.len() == 1 {
            seq.children[order[0]].children[0].clone()
        } else {
            Node::sequence(
                order
                    .iter()
                    .map(|&a| {
                        (
                            Filter::of_statements(&groups[a].stmts),
                            seq.children[a].children[0].clone(),
                        )
                    })
                    .collect(),
            )
        };
        let band_path = [0, *b, 0];
        let NodeKind::Band(band) = &seq.children[*b].children[0].kind else {
            unreachable!("plans are made for consumers whose subtree is a band")
        };
        if plan.k < band.n_members() {
            out.split_band(&band_path, plan.k)?;
        }
        let ext = Extension {
            outer: plan.k,
            stmts: plan.exts.clone(),
        };
        out.insert_extension(&[0, *b, 0, 0], ext, subtree, true)?;
    }
    for (_, plan) in &plans {
        for &a in &plan.fused {
            out.insert_mark(&[0, a, 0], Mark::Skipped)?;
        }
    }
    let mut marked = Vec::new();
    for (a, why) in refusals {
        if done[a] || marked.contains(&a) {
            continue;
        }
        marked.push(a);
        out.insert_mark(&[0, a, 0], Mark::Unfused(why.clone()))?;
    }
    Ok(out)
}

fn stmt_name(program: &Program, s: StmtId) -> &str {
    &program.statements[s.index()].name
}

fn array_name(program: &Program, s: StmtId) -> &str {
    let a = program.statements[s.index()].write.array;
    &program.arrays[a.index()].name
}

/// A consumer group `b` whose top band is `band`, tiled by its first `k` members.
struct Consumer<'a> {
    b: usize,
    band: &'a crate::schedule::tree::Band,
    k: usize,
}

/// Tries to fuse, nearest first, every group before the consumer into its tiles.
fn plan_consumer(
    program: &Program,
    deps: &Dependences,
    groups: &[Group],
    done: &[bool],
    consumer: &Consumer,
    budget: Option<InvocationBudget>,
) -> Result<Plan, ScheduleError> {
    let Consumer { b, band, k } = *consumer;
    let mut fused: Vec<Instances> = Vec::new();
    for &s in &groups[b].stmts {
        let mut inst = Instances::domain(program, s)?;
        let fns = band.functions(s).ok_or_else(|| {
            ScheduleError::Invalid(format!(
                "the band does not schedule {}",
                stmt_name(program, s)
            ))
        })?;
        for f in &fns[..k] {
            inst.add_dim(f)?;
        }
        fused.push(inst);
    }
    let mut plan = Plan {
        k,
        fused: Vec::new(),
        exts: Vec::new(),
        refused: Vec::new(),
        recomputed: Vec::new(),
    };
    let in_group = |a: usize, s: StmtId| groups[a].stmts.contains(&s);
    for a in (0..b).rev() {
        if done[a] {
            continue;
        }
        let is_fused = |s: StmtId| fused.iter().any(|f| f.stmt == s);
        let feeds = deps
            .dataflow
            .iter()
            .any(|d| in_group(a, d.source) && is_fused(d.sink));
        if !feeds {
            continue;
        }
        if let Some(d) = deps
            .dataflow
            .iter()
            .find(|d| in_group(a, d.source) && !in_group(a, d.sink) && !is_fused(d.sink))
        {
            plan.refused.push((
                a,
                format!(
                    "{} is also read by {}, outside the tiles of {}",
                    array_name(program, d.source),
                    stmt_name(program, d.sink),
                    stmt_names(program, &groups[b].stmts)
                ),
            ));
            continue;
        }
        let writes_output = groups[a].stmts.iter().any(|&s| {
            let arr = program.statements[s.index()].write.array;
            program.arrays[arr.index()].role != ArrayRole::Temporary
        });
        let target = Tiles {
            readers: &fused,
            recomputed: &plan.recomputed,
            a,
            b,
            k,
        };
        match fuse_group(program, deps, groups, &target, writes_output)? {
            Ok((exts, recomputed)) => {
                if let Some(budget) = budget {
                    let in_tile: Vec<Instances> = fused
                        .iter()
                        .cloned()
                        .chain(exts.iter().map(|(_, _, inst)| inst.clone()))
                        .collect();
                    if let Err(why) = budget.check(program, &in_tile, k)? {
                        plan.refused.push((a, why));
                        continue;
                    }
                }
                for (s, cs, inst) in exts {
                    plan.exts.push((s, cs));
                    fused.push(inst);
                }
                plan.recomputed.extend(recomputed);
                plan.fused.push(a);
            }
            Err(why) => plan.refused.push((a, why)),
        }
    }
    Ok(plan)
}

fn stmt_names(program: &Program, stmts: &[StmtId]) -> String {
    stmts
        .iter()
        .map(|&s| stmt_name(program, s))
        .collect::<Vec<_>>()
        .join(", ")
}

type Fused = Vec<(StmtId, Vec<QuasiConstraint>, Instances)>;

/// Where a producer group is being fused: the statements already in the tiles, those of them
/// recomputed on halos, the producer group `a`, the consumer group `b` and the tile members.
struct Tiles<'a> {
    readers: &'a [Instances],
    recomputed: &'a [StmtId],
    a: usize,
    b: usize,
    k: usize,
}

/// The extensions of group `a`'s statements for tiles of `k` members, with the statements
/// recomputed on halos, or why it cannot be fused. A group that writes a kernel output must
/// have every instance in some tile.
fn fuse_group(
    program: &Program,
    deps: &Dependences,
    groups: &[Group],
    tiles: &Tiles,
    writes_output: bool,
) -> Result<Result<(Fused, Vec<StmtId>), String>, ScheduleError> {
    let (a, b, k) = (tiles.a, tiles.b, tiles.k);
    let mut readers: Vec<Instances> = tiles.readers.to_vec();
    let mut recomputed: Vec<StmtId> = tiles.recomputed.to_vec();
    let mut out: Fused = Vec::new();
    // The tile loops run the consumer group's tiles: its statements lead the readers.
    let consumers = &tiles.readers[..groups[b].stmts.len()];
    let mut stmts = groups[a].stmts.clone();
    stmts.sort_unstable();
    for &s in stmts.iter().rev() {
        let Some(cs) = footprint(program, &readers, s, k)? else {
            return Ok(Err(format!(
                "the footprint of the tiles in {} is not one convex piece",
                array_name(program, s)
            )));
        };
        let inst = Instances::extension(program, s, k, &cs)?;
        if writes_output && !covers(program, &inst, consumers, k)? {
            return Ok(Err(format!(
                "some instances of {}, which writes the kernel output {}, are in no tile",
                stmt_name(program, s),
                array_name(program, s)
            )));
        }
        if !disjoint(&inst, k)? {
            if !recompute::single_assignment(program, deps, s) {
                return Ok(Err(format!(
                    "neighbouring tiles need the same instances of {}, which is not a single \
                     assignment to a temporary",
                    stmt_name(program, s)
                )));
            }
            let Some((shared, total)) =
                recompute::redundancy(program, &inst, &tiles.readers[0], k)?
            else {
                return Ok(Err(format!(
                    "the tiles of {} could not be measured",
                    stmt_name(program, s)
                )));
            };
            if !recompute::worth_recomputing(shared, total) {
                return Ok(Err(format!(
                    "neighbouring tiles would both compute {shared} of the {total} instances \
                     of {} in a tile",
                    stmt_name(program, s)
                )));
            }
            recomputed.push(s);
        }
        readers.push(inst.clone());
        out.push((s, cs, inst));
    }
    // Every value a tile reads from the group is computed in that tile (instances whose
    // values nobody reads write temporaries only, and are dropped).
    for d in deps
        .dataflow
        .iter()
        .filter(|d| groups[a].stmts.contains(&d.source))
    {
        let Some(sink) = readers.iter().find(|r| r.stmt == d.sink) else {
            continue;
        };
        let Some((_, cs, _)) = out.iter().find(|(s, _, _)| *s == d.source) else {
            continue;
        };
        if !computed_in_tile(program, cs, sink, &d.relation, k)? {
            return Ok(Err(format!(
                "some values of {} that {} reads are computed in no tile",
                array_name(program, d.source),
                stmt_name(program, d.sink)
            )));
        }
    }
    // Dependences between the group and what runs in the tiles stay inside one tile; none
    // leads to a group that stays between the producer and the consumer.
    let tiled = |s: StmtId| readers.iter().find(|r| r.stmt == s);
    // Tiles may run in any order, so a dependence between recomputed copies in two tiles
    // must carry nothing: every copy of an element of a recomputed array holds the same
    // value, and every read of it is served in its own tile (checked above).
    let halo = |array| {
        recomputed
            .iter()
            .any(|&s| program.statements[s.index()].write.array == array)
    };
    for d in deps.memory.iter().filter(|d| d.kind.is_legality()) {
        let from_group = groups[a].stmts.contains(&d.source);
        let to_group = groups[a].stmts.contains(&d.sink);
        if !from_group && !to_group {
            continue;
        }
        match (tiled(d.source), tiled(d.sink)) {
            (Some(_), Some(_)) if halo(d.array) => {}
            (Some(x), Some(y)) => {
                if crosses_tiles(program, x, y, &d.relation, k)? {
                    return Ok(Err(format!(
                        "a dependence from {} to {} would cross tiles",
                        stmt_name(program, d.source),
                        stmt_name(program, d.sink)
                    )));
                }
            }
            _ => {
                let between = (a + 1..b).any(|x| groups[x].stmts.contains(&d.sink));
                if from_group && between {
                    return Ok(Err(format!(
                        "{} depends on it and stays outside the tiles",
                        stmt_name(program, d.sink)
                    )));
                }
            }
        }
    }
    let fresh = recomputed[tiles.recomputed.len()..].to_vec();
    Ok(Ok((out, fresh)))
}

/// The extension constraints of `s` (over `c_0 … c_{k-1}` and its iterators): the instances
/// writing the elements the `readers` read in tile `c`; `None` when that is not one
/// conjunction without strides (or when a subscript involved has division variables).
fn footprint(
    program: &Program,
    readers: &[Instances],
    s: StmtId,
    k: usize,
) -> Result<Option<Vec<QuasiConstraint>>, ScheduleError> {
    let np = program.params.len();
    let st = &program.statements[s.index()];
    let np_iter = st.depth();
    let keep = np + k + np_iter;
    let dom = Instances::domain(program, s)?;
    let mut pieces: Vec<Conj> = Vec::new();
    for r in readers {
        let rs = &program.statements[r.stmt.index()];
        if st.has_divisions() || rs.has_divisions() {
            return Ok(None);
        }
        for acc in rs.reads.iter().filter(|acc| acc.array == st.write.array) {
            let n = r.rel.n + np_iter;
            let rmap: Vec<usize> = (0..r.rel.n)
                .map(|v| if v < np + k { v } else { v + np_iter })
                .collect();
            let mut c = r.rel.remap(n, &rmap);
            let mut dmap: Vec<usize> = (0..np).collect();
            dmap.extend((0..np_iter).map(|j| np + k + j));
            if dom.rel.n != np + np_iter {
                return Ok(None);
            }
            c.and(&dom.rel.remap(n, &dmap));
            for (fr, fw) in acc.subscripts.iter().zip(&st.write.subscripts) {
                let mut row: Row = vec![0; n + 1];
                row[0] = fr.constant - fw.constant;
                for &(v, coeff) in fr.terms() {
                    let col = match v {
                        Var::Param(p) => p.index(),
                        Var::Iter(j) => np + k + np_iter + j,
                        Var::Div(_) => unreachable!("refused above: no divisions"),
                    };
                    row[1 + col] += coeff;
                }
                for &(v, coeff) in fw.terms() {
                    let col = match v {
                        Var::Param(p) => p.index(),
                        Var::Iter(j) => np + k + j,
                        Var::Div(_) => unreachable!("refused above: no divisions"),
                    };
                    row[1 + col] -= coeff;
                }
                c.eqs.push(row);
            }
            pieces.extend(project(&c, keep)?);
        }
    }
    if pieces.is_empty() {
        return Ok(None);
    }
    let set = as_set(program, &pieces, k + np_iter);
    let hull = if pieces.len() == 1 {
        set
    } else {
        set.simple_hull()?
    };
    let parts = &hull.0.parts;
    if parts.len() != 1 || parts[0].nd != 0 {
        return Ok(None);
    }
    let c = &parts[0].c;
    let expr = |row: &Row| {
        let terms = (0..keep).filter(|&v| row[1 + v] != 0).map(|v| {
            let var = if v < np {
                Var::Param(ParamId(v as u32))
            } else {
                Var::Iter(v - np)
            };
            (var, row[1 + v])
        });
        QuasiAffine::from(AffineExpr::from_terms(terms, row[0]))
    };
    let mut cs = Vec::new();
    for row in &c.eqs {
        cs.push(QuasiConstraint {
            expr: expr(row),
            kind: ConstraintKind::Zero,
        });
    }
    for row in &c.ineqs {
        cs.push(QuasiConstraint {
            expr: expr(row),
            kind: ConstraintKind::NonNegative,
        });
    }
    Ok(Some(cs))
}

/// Conjunctions over `[parameters | dims | locals]` as one set of `dims` dimensions.
pub(crate) fn as_set(program: &Program, pieces: &[Conj], dims: usize) -> Set {
    let np = program.params.len();
    Set(Rel {
        params: program.params.iter().map(|p| p.name.clone()).collect(),
        parts: pieces
            .iter()
            .map(|c| Basic {
                dom: None,
                ran: Tuple::anonymous_dims(None, dims),
                np,
                nd: c.n - np - dims,
                c: c.clone(),
            })
            .collect(),
    })
}

/// For every instance of the dependence `rel` whose sink runs in tile `t` (per `sink`), the
/// source satisfies the extension constraints `cs` at `t`.
fn computed_in_tile(
    program: &Program,
    cs: &[QuasiConstraint],
    sink: &Instances,
    rel: &crate::sets::Map,
    k: usize,
) -> Result<bool, ScheduleError> {
    let np = program.params.len();
    let ny = sink.rel.n;
    for part in &rel.0.parts {
        let nx = part.ni();
        if part.np != np || part.no() != sink.n_iter {
            return Err(ScheduleError::Invalid(
                "a dependence does not match its statements".into(),
            ));
        }
        // [sink.rel (np | t | sink iters | sink locals) | source iters | dep locals]
        let total = ny + nx + part.nd;
        let mut c = sink.rel.remap(total, &(0..ny).collect::<Vec<_>>());
        let dmap: Vec<usize> = (0..part.c.n)
            .map(|v| {
                if v < np {
                    v
                } else if v < np + nx {
                    ny + (v - np)
                } else if v < np + nx + sink.n_iter {
                    np + k + (v - np - nx)
                } else {
                    ny + nx + (v - np - nx - sink.n_iter)
                }
            })
            .collect();
        c.and(&part.c.remap(total, &dmap));
        for q in cs {
            let mut row = vec![0; total + 1];
            row[0] = q.expr.affine.constant;
            for &(v, coeff) in q.expr.affine.terms() {
                let col = match v {
                    Var::Param(p) => p.index(),
                    Var::Iter(j) if j < k => np + j,
                    Var::Iter(j) => ny + (j - k),
                    // Extension constraints are band-level: divisions are floor terms there.
                    Var::Div(_) => unreachable!("an extension constraint with a division variable"),
                };
                row[1 + col] += coeff;
            }
            let mut negations = vec![row.iter().map(|x| -x).collect::<Row>()];
            if q.kind == ConstraintKind::Zero {
                negations.push(row.clone());
            }
            for mut neg in negations {
                neg[0] -= 1;
                let mut t = c.clone();
                t.ineqs.push(neg);
                if is_feasible(&t)? {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// Every instance of the statement is in the extension of some tile that runs, at the
/// kernel's sizes. The tile loops run the tiles of the `consumers` (the consumer group's
/// statements with their `k` tile dimensions) and no others, so an instance whose extension
/// tile holds no consumer instance is never executed: the tile must be one of theirs.
fn covers(
    program: &Program,
    ext: &Instances,
    consumers: &[Instances],
    k: usize,
) -> Result<bool, ScheduleError> {
    let np = ext.np;
    let n = ext.rel.n;
    let mut pieces = Vec::new();
    for r in consumers {
        // [np | tile | ext iterators | ext locals | consumer iterators and locals]
        let total = n + (r.rel.n - np - k);
        let rmap: Vec<usize> = (0..r.rel.n)
            .map(|v| if v < np + k { v } else { n + (v - np - k) })
            .collect();
        let mut c = ext.rel.remap(total, &(0..n).collect::<Vec<_>>());
        c.and(&r.rel.remap(total, &rmap));
        // At the kernel's sizes (as the domain below), which also keeps the projection cheap.
        fix_sizes(program, &mut c);
        // [np | ext iterators | tile | the rest], so that all but the iterators are projected
        // out.
        let map: Vec<usize> = (0..total)
            .map(|v| {
                if v < np {
                    v
                } else if v < np + k {
                    np + ext.n_iter + (v - np)
                } else if v < np + k + ext.n_iter {
                    v - k
                } else {
                    v
                }
            })
            .collect();
        pieces.extend(project(&c.remap(total, &map), np + ext.n_iter)?);
    }
    let reached = as_set(program, &pieces, ext.n_iter);
    // At the kernel's sizes, which the generated code is for: a parametric check would fail
    // where a size that only the consumer depends on is zero.
    let mut dom = Instances::domain(program, ext.stmt)?.rel;
    fix_sizes(program, &mut dom);
    let dom = as_set(program, std::slice::from_ref(&dom), ext.n_iter);
    Ok(dom.is_subset(&reached)?)
}

/// Binds the parameters of `c` (its first variables) to the kernel's sizes.
fn fix_sizes(program: &Program, c: &mut Conj) {
    for (i, p) in program.params.iter().enumerate() {
        let mut row = vec![0; c.n + 1];
        row[0] = -p.value;
        row[1 + i] = 1;
        c.eqs.push(row);
    }
}

/// The variables of a second copy of `ext` (tiles of `k` members) beside the first, sharing
/// the parameters and the iterators: `[np | t1 | iterators | locals1 | t2 | locals2]`, as
/// (the number of variables, where each variable of `ext` goes in the copy).
pub(crate) fn second_tile(ext: &Instances, k: usize) -> (usize, Vec<usize>) {
    let np = ext.np;
    let n = ext.rel.n;
    let total = n + k + (n - np - k - ext.n_iter);
    let second = (0..n)
        .map(|v| {
            if v < np {
                v
            } else if v < np + k {
                n + (v - np)
            } else if v < np + k + ext.n_iter {
                v
            } else {
                n + k + (v - np - k - ext.n_iter)
            }
        })
        .collect();
    (total, second)
}

/// No instance is in the extensions of two tiles.
fn disjoint(ext: &Instances, k: usize) -> Result<bool, ScheduleError> {
    let np = ext.np;
    let n = ext.rel.n;
    // [np | t1 | p | locals1 | t2 | locals2]
    let (total, second) = second_tile(ext, k);
    let mut c = ext.rel.remap(total, &(0..n).collect::<Vec<_>>());
    c.and(&ext.rel.remap(total, &second));
    for j in 0..k {
        let mut t = c.clone();
        let mut row = vec![0; total + 1];
        row[0] = -1;
        row[1 + n + j] = 1;
        row[1 + np + j] = -1;
        t.ineqs.push(row);
        if is_feasible(&t)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Some pair of the dependence `rel` runs its source and its sink in different tiles.
fn crosses_tiles(
    program: &Program,
    x: &Instances,
    y: &Instances,
    rel: &crate::sets::Map,
    k: usize,
) -> Result<bool, ScheduleError> {
    let np = program.params.len();
    let (nx, ny) = (x.rel.n, y.rel.n);
    for part in &rel.0.parts {
        if part.np != np || part.ni() != x.n_iter || part.no() != y.n_iter {
            return Err(ScheduleError::Invalid(
                "a dependence does not match its statements".into(),
            ));
        }
        let ld = part.nd;
        // [x.rel (np | t1 | x iters | x locals) | t2 | y iters | y locals | dep locals]
        let total = nx + (ny - np) + ld;
        let mut c = x.rel.remap(total, &(0..nx).collect::<Vec<_>>());
        let ymap: Vec<usize> = (0..ny)
            .map(|v| if v < np { v } else { nx + (v - np) })
            .collect();
        c.and(&y.rel.remap(total, &ymap));
        let dmap: Vec<usize> = (0..part.c.n)
            .map(|v| {
                if v < np {
                    v
                } else if v < np + x.n_iter {
                    np + k + (v - np)
                } else if v < np + x.n_iter + y.n_iter {
                    nx + k + (v - np - x.n_iter)
                } else {
                    nx + (ny - np) + (v - np - x.n_iter - y.n_iter)
                }
            })
            .collect();
        c.and(&part.c.remap(total, &dmap));
        for j in 0..k {
            for sign in [1, -1] {
                let mut t = c.clone();
                let mut row = vec![0; total + 1];
                row[0] = -1;
                row[1 + nx + j] = sign;
                row[1 + np + j] = -sign;
                t.ineqs.push(row);
                if is_feasible(&t)? {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}
