//! Mapping marks: where a two-level parallel machine (PPCG's model of a GPU: a grid of groups,
//! each a block of threads) starts mapping loops to its levels.
//!
//! The pass walks the tree from the root and puts
//! - a [`KERNEL_MARK`] above the outermost band whose first member is coincident: from there,
//!   the band's leading coincident members run on different groups, and everything outside
//!   a kernel mark runs sequentially on the host (one launch per instance of the kernel);
//! - a [`THREAD_MARK`] above the first band below a kernel band (through sequences, filters and
//!   other bands) whose first member is coincident: its leading coincident members run on the
//!   threads of one group.
//!
//! A band whose first members carry dependences but whose later members do not (a tile
//! wavefront, a time loop fused with a parallel space loop) is split after its sequential
//! prefix first, so the mark can sit above the parallel members.
//!
//! The pass only adds marks and splits bands: the tree schedules the same instances in the same
//! order afterwards, so [`super::verify`] accepts it whenever it accepted the input.

use super::tree::{Node, NodeKind, ScheduleTree};
use super::ScheduleError;

/// The mark above a band whose leading coincident members map to groups.
pub const KERNEL_MARK: &str = "kernel";
/// The mark above a band whose leading coincident members map to threads of a group.
pub const THREAD_MARK: &str = "thread";

/// Inserts kernel and thread marks into `tree` (see the module docs).
pub fn insert_mapping_marks(tree: &mut ScheduleTree) -> Result<(), ScheduleError> {
    let mut root = std::mem::replace(&mut tree.root, Node::leaf());
    let result = mark_host(&mut root);
    tree.root = root;
    result
}

/// The index of the first coincident member of a band, if any.
fn first_coincident(node: &Node) -> Option<usize> {
    match &node.kind {
        NodeKind::Band(b) => b.coincident.iter().position(|&c| c),
        _ => None,
    }
}

/// Splits the band `node` after its first `k` members (`0 < k < members`).
fn split(node: &mut Node, k: usize) {
    let NodeKind::Band(band) = &mut node.kind else {
        return;
    };
    let inner = super::tree::Band {
        schedule: band
            .schedule
            .iter_mut()
            .map(|(s, f)| (*s, f.split_off(k)))
            .collect(),
        permutable: band.permutable,
        coincident: band.coincident.split_off(k),
    };
    let children = std::mem::take(&mut node.children);
    node.children = vec![Node {
        kind: NodeKind::Band(inner),
        children,
    }];
}

fn wrap(node: &mut Node, name: &str) {
    let old = std::mem::replace(node, Node::leaf());
    *node = Node::with_child(NodeKind::Mark(name.to_string()), old);
}

/// Marks the subtree `node`, which runs on the host.
fn mark_host(node: &mut Node) -> Result<(), ScheduleError> {
    match first_coincident(node) {
        Some(0) => {
            for c in &mut node.children {
                mark_group(c)?;
            }
            wrap(node, KERNEL_MARK);
            Ok(())
        }
        Some(k) => {
            split(node, k);
            for c in &mut node.children {
                mark_host(c)?;
            }
            Ok(())
        }
        None => {
            if matches!(node.kind, NodeKind::Mark(_)) {
                return Ok(());
            }
            for c in &mut node.children {
                mark_host(c)?;
            }
            Ok(())
        }
    }
}

/// Marks the subtree `node`, which runs on one group: the first coincident band on each path
/// gets a thread mark.
fn mark_group(node: &mut Node) -> Result<(), ScheduleError> {
    match first_coincident(node) {
        Some(0) => {
            wrap(node, THREAD_MARK);
            Ok(())
        }
        Some(k) => {
            split(node, k);
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
pub struct MapMarks;

impl MapMarks {
    pub const NAME: &'static str = "map";
}

impl crate::pipeline::Pass for MapMarks {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn run(&self, cx: &mut crate::pipeline::PassContext) -> Result<(), crate::pipeline::Error> {
        // Producers that post-tiling fusion pulls into a tile would have to be spread over the
        // tile's threads with a barrier before their consumers; that mapping does not exist.
        let mut extension = false;
        cx.tree
            .root
            .walk(&mut |n| extension |= matches!(n.kind, NodeKind::Extension(_)));
        if extension {
            return Err(crate::pipeline::Error::Unsupported(
                "mapping a tree with extension nodes (post-tiling fusion) onto groups and \
                 threads"
                    .into(),
            ));
        }
        insert_mapping_marks(&mut cx.tree)?;
        Ok(())
    }
}
