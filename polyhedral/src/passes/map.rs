//! Mapping marks: where a two-level parallel machine (PPCG's model of a GPU: a grid of groups,
//! each a block of threads) starts mapping loops to its levels.
//!
//! The pass walks the tree from the root and puts
//! - a [`Mark::Kernel`] above the outermost band whose first member is coincident: from there,
//!   the band's leading coincident members run on different groups, and everything outside
//!   a kernel mark runs sequentially on the host (one launch per instance of the kernel);
//! - a [`Mark::Thread`] above the first band below a kernel band (through sequences, filters and
//!   other bands) whose first member is coincident: its leading coincident members run on the
//!   threads of one group.
//!
//! A band whose first members carry dependences but whose later members do not (a tile
//! wavefront, a time loop fused with a parallel space loop) is split after its sequential
//! prefix first, so the mark can sit above the parallel members.
//!
//! On a machine that caps the loop iterations of one thread ([`Hoist::Sequential`]), the
//! sequential members of a permutable kernel band move outwards, to the host, before the
//! band is split: every launch then runs one iteration of them, and a thread's share of the
//! work no longer grows with their trip counts. Any order of a permutable band's members is
//! legal, and a coincident member stays coincident wherever it moves.
//!
//! Otherwise the pass only adds marks and splits bands: the tree schedules the same instances
//! in the same order afterwards. Either way [`crate::schedule::verify`] accepts it whenever it accepted
//! the input.

use crate::passes::{Pass, PassContext};
use crate::pipeline::Error;
use crate::schedule::mark::Mark;
use crate::schedule::tree::{Node, NodeKind, ScheduleTree};
use crate::schedule::ScheduleError;

/// Where the sequential members of a kernel band run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hoist {
    /// Inside the kernel, after its parallel members.
    None,
    /// On the host, before the parallel members (permutable bands only).
    Sequential,
}

/// Inserts kernel and thread marks into `tree` (see the module docs).
pub fn insert_mapping_marks(tree: &mut ScheduleTree, hoist: Hoist) -> Result<(), ScheduleError> {
    let mut root = std::mem::replace(&mut tree.root, Node::leaf());
    let result = mark_host(&mut root, hoist, 0);
    tree.root = root;
    result
}

/// Moves the non-coincident members of the permutable band `node`, `depth` schedule
/// dimensions deep, before its coincident ones; whether it moved any. Extensions below it name
/// the outer dimensions by position, so theirs are renumbered with the members.
fn sequential_first(node: &mut Node, depth: usize) -> bool {
    let NodeKind::Band(band) = &mut node.kind else {
        return false;
    };
    // A sequential member after a parallel one is what moves.
    if !band.permutable || !band.coincident[0] || band.coincident.iter().all(|&c| c) {
        return false;
    }
    let order: Vec<usize> = (0..band.coincident.len())
        .filter(|&k| !band.coincident[k])
        .chain((0..band.coincident.len()).filter(|&k| band.coincident[k]))
        .collect();
    for (_, f) in &mut band.schedule {
        let old = std::mem::take(f);
        *f = order.iter().map(|&k| old[k].clone()).collect();
    }
    band.coincident = order.iter().map(|&k| band.coincident[k]).collect();
    let mut moved_to = vec![0; order.len()];
    for (new, &old) in order.iter().enumerate() {
        moved_to[old] = new;
    }
    let renumber = |x: usize| {
        if (depth..depth + moved_to.len()).contains(&x) {
            depth + moved_to[x - depth]
        } else {
            x
        }
    };
    for c in &mut node.children {
        renumber_extensions(c, &renumber);
    }
    true
}

/// Renumbers the outer schedule dimensions the extensions in `node`'s subtree name.
fn renumber_extensions(node: &mut Node, renumber: &impl Fn(usize) -> usize) {
    if let NodeKind::Extension(e) = &mut node.kind {
        let outer = e.outer;
        let map = |x: usize| if x < outer { renumber(x) } else { x };
        for (_, constraints) in &mut e.stmts {
            for c in constraints {
                c.expr = c.expr.map_iters(&map);
            }
        }
    }
    for c in &mut node.children {
        renumber_extensions(c, renumber);
    }
}

/// The index of the first coincident member of a band, if any.
fn first_coincident(node: &Node) -> Option<usize> {
    match &node.kind {
        NodeKind::Band(b) => b.coincident.iter().position(|&c| c),
        _ => None,
    }
}

fn wrap(node: &mut Node, mark: Mark) {
    let old = std::mem::replace(node, Node::leaf());
    *node = Node::with_child(NodeKind::Mark(mark), old);
}

/// Marks the subtree `node`, `depth` schedule dimensions deep, which runs on the host.
fn mark_host(node: &mut Node, hoist: Hoist, depth: usize) -> Result<(), ScheduleError> {
    if hoist == Hoist::Sequential
        && first_coincident(node) == Some(0)
        && sequential_first(node, depth)
    {
        return mark_host(node, hoist, depth);
    }
    let inner = depth + members(node);
    match first_coincident(node) {
        Some(0) => {
            for c in &mut node.children {
                mark_group(c)?;
            }
            wrap(node, Mark::Kernel);
            Ok(())
        }
        Some(k) => {
            node.split_band(k)?;
            for c in &mut node.children {
                mark_host(c, hoist, depth + k)?;
            }
            Ok(())
        }
        None => {
            // A skipped subtree is not generated and a kernel mark is mapped already; any
            // other mark (a producer post-tiling fusion left `unfused`, with the reason) only
            // annotates the subtree below it, which still needs its kernels.
            if matches!(&node.kind, NodeKind::Mark(Mark::Skipped | Mark::Kernel)) {
                return Ok(());
            }
            for c in &mut node.children {
                mark_host(c, hoist, inner)?;
            }
            Ok(())
        }
    }
}

/// The schedule dimensions `node` adds: a band's members.
fn members(node: &Node) -> usize {
    match &node.kind {
        NodeKind::Band(b) => b.coincident.len(),
        _ => 0,
    }
}

/// Marks the subtree `node`, which runs on one group: the first coincident band on each path
/// gets a thread mark, or the band below it when that one's first member is coincident too.
fn mark_group(node: &mut Node) -> Result<(), ScheduleError> {
    match first_coincident(node) {
        // A tile band inside a kernel (a producer pulled into the kernel's tile, a statement
        // tiled for promotion) has few iterations there: its point band maps to the threads,
        // and each thread runs the tile loops.
        Some(0) if node.children.len() == 1 && first_coincident(&node.children[0]) == Some(0) => {
            mark_group(&mut node.children[0])
        }
        Some(0) => {
            wrap(node, Mark::Thread);
            Ok(())
        }
        Some(k) => {
            node.split_band(k)?;
            for c in &mut node.children {
                mark_group(c)?;
            }
            Ok(())
        }
        None => {
            for c in &mut node.children {
                mark_group(c)?;
            }
            Ok(())
        }
    }
}

/// The mapping marks as a pass of the pipeline, for targets with workgroups of invocations.
pub const PASS: Pass = Pass {
    name: "map",
    summary:
        "kernel and thread marks: where the loops start mapping to groups and to their threads \
        (GPU)",
    enabled: |target, _| target.invocations().is_some(),
    run,
};

fn run(cx: &mut PassContext) -> Result<(), Error> {
    let hoist = if cx.target.loop_iterations().is_some() {
        Hoist::Sequential
    } else {
        Hoist::None
    };
    insert_mapping_marks(&mut cx.tree, hoist)?;
    Ok(())
}
