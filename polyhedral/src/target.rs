//! Target descriptions: what the middle end knows about a machine.
//!
//! Every back end describes its machine with one [`TargetDescription`]; the passes read its
//! numbers and never its name (the name is for messages only). A description is data:
//!
//! - a [`MemoryTree`]: the machine's memories as a tree whose root is the global memory and
//!   whose edges say which memory feeds which (a CPU's caches form a chain; an accelerator's L1
//!   feeds L0A and L0B, and L0C drains to UB). Each node says how large it is, whether it is a
//!   transparent cache or an addressable scratchpad (which the code names and copies to), and
//!   for a cache, optionally its [`CacheGeometry`] (line size, associativity, miss penalty),
//!   which the cache model ([`crate::cache_model`]) needs;
//! - a parallel hierarchy ([`ParallelLevel`], outermost first): threads, cores, workgroups and
//!   invocations, a matrix unit's fractal;
//! - the vector unit, if any, with the number of its registers;
//! - the data TLB, if the machine translates addresses through one ([`Tlb`]): what packing
//!   ([`crate::passes::pack`]) weighs its copies against;
//! - the element types the machine computes in.
//!
//! Invariants (checked by [`TargetDescription::validate`]): the memory tree has exactly one root,
//! which is global; every other node has a parent that comes before it; capacities are positive;
//! a cache geometry belongs to a cache, has a positive power-of-two line size and at least one
//! way, and divides the capacity into whole sets.

use std::fmt;

use crate::program::{Program, ScalarType};

/// A memory of the tree, by its index in [`MemoryTree::nodes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemoryId(pub u32);

impl MemoryId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What a memory is to the code that runs on the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryKind {
    /// The memory the kernel's arrays live in (DRAM, a GPU's storage buffers, an
    /// accelerator's GM). The root of the tree.
    Global,
    /// A hardware-managed cache: never named by the code, only exploited by tiling.
    Cache,
    /// An on-chip memory the code addresses explicitly (a GPU's workgroup memory, an
    /// accelerator's buffers): data must be copied in and out of it.
    Scratchpad,
}

/// How a hardware cache is organised: what the cache model needs beyond its capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheGeometry {
    /// Bytes of one cache line: the unit the cache is filled in.
    pub line_bytes: u32,
    /// Lines per set (the associativity); a cache of one set is fully associative.
    pub ways: u32,
    /// Cycles an access that misses this cache waits beyond a hit in it: the weight of this
    /// cache's misses when tile sizes are chosen.
    pub miss_penalty_cycles: u32,
}

impl CacheGeometry {
    /// The number of sets of a cache of `bytes` bytes.
    pub fn sets(&self, bytes: u64) -> u64 {
        bytes / (self.line_bytes as u64 * self.ways as u64)
    }
}

/// One memory of the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryNode {
    /// What the memory is called in messages and reports (`L1d`, `workgroup`, `L0A`).
    pub name: String,
    pub kind: MemoryKind,
    /// Capacity in bytes of one instance of the memory.
    pub bytes: u64,
    /// The memory this one is filled from (`None` for the root).
    pub parent: Option<MemoryId>,
    /// Line size, associativity and miss penalty of a cache, when the description has them.
    pub geometry: Option<CacheGeometry>,
}

/// The memories of a machine, as a tree rooted at the global memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryTree {
    pub nodes: Vec<MemoryNode>,
}

impl MemoryTree {
    /// The global memory alone: a machine with no caches and no scratchpads.
    pub fn global(name: &str, bytes: u64) -> MemoryTree {
        MemoryTree {
            nodes: vec![MemoryNode {
                name: name.to_string(),
                kind: MemoryKind::Global,
                bytes,
                parent: None,
                geometry: None,
            }],
        }
    }

    /// Adds a node filled from `parent` and returns its id.
    pub fn add(&mut self, name: &str, kind: MemoryKind, bytes: u64, parent: MemoryId) -> MemoryId {
        self.nodes.push(MemoryNode {
            name: name.to_string(),
            kind,
            bytes,
            parent: Some(parent),
            geometry: None,
        });
        MemoryId(self.nodes.len() as u32 - 1)
    }

    /// Adds a cache of `bytes` bytes organised as `geometry`, filled from `parent`, and
    /// returns its id.
    pub fn add_cache(
        &mut self,
        name: &str,
        bytes: u64,
        geometry: CacheGeometry,
        parent: MemoryId,
    ) -> MemoryId {
        let id = self.add(name, MemoryKind::Cache, bytes, parent);
        self.nodes[id.index()].geometry = Some(geometry);
        id
    }

    pub fn node(&self, id: MemoryId) -> &MemoryNode {
        &self.nodes[id.index()]
    }

    pub fn root(&self) -> MemoryId {
        MemoryId(0)
    }

    /// The nodes filled from `id`.
    pub fn children(&self, id: MemoryId) -> impl Iterator<Item = MemoryId> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(move |(_, n)| n.parent == Some(id))
            .map(|(k, _)| MemoryId(k as u32))
    }

    /// The caches between the compute units and the global memory, closest first: the chain
    /// from the deepest cache up to the root (empty when the machine has no cache).
    pub fn cache_chain(&self) -> Vec<&MemoryNode> {
        let depth = |mut id: MemoryId| {
            let mut d = 0;
            while let Some(p) = self.node(id).parent {
                id = p;
                d += 1;
            }
            d
        };
        let deepest = (0..self.nodes.len() as u32)
            .map(MemoryId)
            .filter(|&id| self.node(id).kind == MemoryKind::Cache)
            .max_by_key(|&id| (depth(id), std::cmp::Reverse(id)));
        let mut chain = Vec::new();
        let mut at = deepest;
        while let Some(id) = at {
            let node = self.node(id);
            if node.kind == MemoryKind::Cache {
                chain.push(node);
            }
            at = node.parent;
        }
        chain
    }

    /// The addressable on-chip memories, in tree order.
    pub fn scratchpads(&self) -> impl Iterator<Item = &MemoryNode> {
        self.nodes
            .iter()
            .filter(|n| n.kind == MemoryKind::Scratchpad)
    }
}

/// One level of a machine's parallel hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParallelLevel {
    /// Threads that share the global memory and run loops of their own (a CPU's cores);
    /// `None` when the count is only known where the code runs.
    Threads { count: Option<u32> },
    /// Independent cores, each with its own on-chip memories (an accelerator's blocks).
    Cores { count: u32 },
    /// A grid of workgroups of up to three dimensions (a grid larger than the machine's
    /// per-dimension limit is the back end's to fold into loops).
    Workgroups,
    /// The invocations of one workgroup: at most `max_total` in all and `max_per_dim` along
    /// each dimension; where the driver leaves loops after a number of iterations of one
    /// invocation, `max_loop_iterations` is that number.
    Invocations {
        max_total: u32,
        max_per_dim: [u32; 3],
        max_loop_iterations: Option<u32>,
    },
    /// A matrix unit that multiplies an `m`×`k` fractal by a `k`×`n` one per instruction;
    /// `memories` says where its operands and its accumulator live (without it, the unit
    /// shapes tile sizes only and no statement is mapped to it).
    Matrix {
        m: u32,
        n: u32,
        k: u32,
        memories: Option<MatrixMemories>,
    },
}

/// The memories of a matrix unit: its left operand's (`a`, `m`×`k`), its right operand's
/// (`b`, `k`×`n`) and its accumulator's (`acc`, `m`×`n`), nodes of the memory tree; each is
/// filled from its parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixMemories {
    pub a: MemoryId,
    pub b: MemoryId,
    pub acc: MemoryId,
}

/// A machine's vector unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VectorUnit {
    /// Bytes of one vector register.
    pub bytes: u32,
    /// Iterations of the innermost, vectorized loop in one tile: long enough for vector loops
    /// with few remainders and for the hardware's prefetching. A whole number of vectors for
    /// every element type.
    pub tile_iterations: i64,
    /// Architectural vector registers.
    pub registers: u32,
    /// The vector registers an outer-product register tile may fill with its accumulators
    /// and operands (at most `registers`; see [`crate::passes::register_tile::shape`]): the rest are
    /// left to the C compiler, where it was seen to need them around the tile's loops.
    pub tile_registers: u32,
    /// Cycles from one multiply-add to the next that uses its result (0: not described).
    pub fma_latency: u32,
    /// Multiply-adds that start in one cycle: with the latency, how many independent chains
    /// of dependent multiply-adds keep the unit busy (see [`crate::passes::reduction_tile`]).
    pub fma_pipes: u32,
}

impl VectorUnit {
    /// Elements of type `ty` in one vector register (at least 1).
    pub fn lanes(&self, ty: ScalarType) -> i64 {
        (self.bytes as i64 / ty.size_in_bytes() as i64).max(1)
    }

    /// Elements in one vector register of the narrowest element type of `program`.
    pub fn narrowest_lanes(&self, program: &Program) -> i64 {
        program
            .arrays
            .iter()
            .map(|a| self.lanes(a.elem))
            .max()
            .unwrap_or(1)
    }

    /// The iterations a tile gives the vectorized loop of `program`: `tile_iterations`
    /// rounded up to a whole number of vectors of its narrowest element type.
    pub fn tile_length(&self, program: &Program) -> i64 {
        let lanes = self.narrowest_lanes(program);
        (self.tile_iterations.max(lanes) + lanes - 1) / lanes * lanes
    }
}

/// A machine's first-level data TLB: how many page translations it holds and the size of a
/// page, which together bound the memory a loop can touch without TLB misses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tlb {
    pub entries: u32,
    pub page_bytes: u64,
}

/// What the middle end knows about a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetDescription {
    /// The target's name, for messages only: no pass reads it.
    pub name: String,
    pub memory: MemoryTree,
    /// The parallel hierarchy, outermost level first (empty: one sequential unit).
    pub parallel: Vec<ParallelLevel>,
    pub vector: Option<VectorUnit>,
    /// The first-level data TLB, where the machine has one the code should care about.
    pub tlb: Option<Tlb>,
    /// The element types the machine can compute in.
    pub element_types: Vec<ScalarType>,
}

/// A description that breaks one of the invariants of [`TargetDescription`], or a program the
/// target cannot run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("target `{target}`: {what}")]
    Invalid { target: String, what: String },
    #[error("not supported on {target}: {ty} (array `{array}`)")]
    ElementType {
        target: String,
        ty: ScalarType,
        array: String,
    },
}

impl TargetDescription {
    /// Checks the invariants of the module docs.
    pub fn validate(&self) -> Result<(), TargetError> {
        let invalid = |what: String| {
            Err(TargetError::Invalid {
                target: self.name.clone(),
                what,
            })
        };
        let nodes = &self.memory.nodes;
        match nodes.first() {
            Some(root) if root.kind == MemoryKind::Global && root.parent.is_none() => {}
            _ => return invalid("the first memory must be the global memory, the root".into()),
        }
        for (k, n) in nodes.iter().enumerate().skip(1) {
            match n.parent {
                Some(p) if p.index() < k => {}
                _ => return invalid(format!("memory `{}` has no parent before it", n.name)),
            }
            if n.kind == MemoryKind::Global {
                return invalid(format!("memory `{}` is global but not the root", n.name));
            }
        }
        if let Some(n) = nodes.iter().find(|n| n.bytes == 0) {
            return invalid(format!("memory `{}` has no capacity", n.name));
        }
        for n in nodes {
            let Some(g) = n.geometry else { continue };
            if n.kind != MemoryKind::Cache {
                return invalid(format!(
                    "memory `{}` has a cache geometry but is no cache",
                    n.name
                ));
            }
            let set_bytes = g.line_bytes as u64 * g.ways as u64;
            if !g.line_bytes.is_power_of_two() || g.ways == 0 || n.bytes % set_bytes != 0 {
                return invalid(format!(
                    "cache `{}`: {} bytes are no whole number of {}-way sets of {}-byte lines",
                    n.name, n.bytes, g.ways, g.line_bytes
                ));
            }
        }
        Ok(())
    }

    /// Checks that the target computes in every element type of `program`'s arrays.
    pub fn supports(&self, program: &Program) -> Result<(), TargetError> {
        for a in &program.arrays {
            if !self.element_types.contains(&a.elem) {
                return Err(TargetError::ElementType {
                    target: self.name.clone(),
                    ty: a.elem,
                    array: a.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// Whether the target has units that run loop iterations in parallel with shared
    /// global memory (threads, cores or workgroups).
    pub fn has_parallel_units(&self) -> bool {
        self.parallel.iter().any(|l| match l {
            ParallelLevel::Threads { count } => count.is_none_or(|c| c > 1),
            ParallelLevel::Cores { count } => *count > 1,
            ParallelLevel::Workgroups | ParallelLevel::Invocations { .. } => true,
            ParallelLevel::Matrix { .. } => false,
        })
    }

    /// The invocation limits of one workgroup, if the target has workgroups.
    pub fn invocations(&self) -> Option<(u32, [u32; 3])> {
        self.parallel.iter().find_map(|l| match *l {
            ParallelLevel::Invocations {
                max_total,
                max_per_dim,
                ..
            } => Some((max_total, max_per_dim)),
            _ => None,
        })
    }

    /// The most loop iterations one invocation of a workgroup may run, where the machine
    /// has such a cap.
    pub fn loop_iterations(&self) -> Option<u32> {
        self.parallel.iter().find_map(|l| match *l {
            ParallelLevel::Invocations {
                max_loop_iterations,
                ..
            } => max_loop_iterations,
            _ => None,
        })
    }

    /// The memories of the matrix unit, where the target has one that says them.
    pub fn matrix_memories(&self) -> Option<MatrixMemories> {
        self.parallel.iter().find_map(|l| match *l {
            ParallelLevel::Matrix { memories, .. } => memories,
            _ => None,
        })
    }

    /// The cores the target spreads parallel loops over (1 without any).
    pub fn cores(&self) -> u32 {
        self.parallel
            .iter()
            .find_map(|l| match *l {
                ParallelLevel::Cores { count } => Some(count),
                _ => None,
            })
            .unwrap_or(1)
    }

    /// The matrix unit's fractal `(m, n, k)`, if the target has one.
    pub fn fractal(&self) -> Option<(u32, u32, u32)> {
        self.parallel.iter().find_map(|l| match *l {
            ParallelLevel::Matrix { m, n, k, .. } => Some((m, n, k)),
            _ => None,
        })
    }
}

impl fmt::Display for TargetDescription {
    /// The description in a few lines, for `--help`-style listings and test messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "target {}", self.name)?;
        for (k, n) in self.memory.nodes.iter().enumerate() {
            let parent = n
                .parent
                .map(|p| format!(" <- {}", self.memory.node(p).name))
                .unwrap_or_default();
            let geometry = n
                .geometry
                .map(|g| {
                    format!(
                        ", {}-way, {}-byte lines, miss penalty {} cycles",
                        g.ways, g.line_bytes, g.miss_penalty_cycles
                    )
                })
                .unwrap_or_default();
            writeln!(
                f,
                "  memory {k}: {} {:?} {} bytes{geometry}{parent}",
                n.name, n.kind, n.bytes
            )?;
        }
        for l in &self.parallel {
            writeln!(f, "  parallel: {l:?}")?;
        }
        if let Some(v) = self.vector {
            write!(f, "  vector: {} bytes, {} registers", v.bytes, v.registers)?;
            if v.tile_registers != v.registers {
                write!(f, " ({} for a register tile)", v.tile_registers)?;
            }
            writeln!(f)?;
        }
        if let Some(t) = self.tlb {
            writeln!(f, "  tlb: {} entries of {} bytes", t.entries, t.page_bytes)?;
        }
        let types: Vec<&str> = self.element_types.iter().map(|t| t.name()).collect();
        writeln!(f, "  element types: {}", types.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accelerator() -> TargetDescription {
        let mut memory = MemoryTree::global("GM", 1 << 30);
        let l1 = memory.add("L1", MemoryKind::Scratchpad, 1 << 20, memory.root());
        memory.add("L0A", MemoryKind::Scratchpad, 64 << 10, l1);
        memory.add("L0B", MemoryKind::Scratchpad, 64 << 10, l1);
        TargetDescription {
            name: "toy accelerator".into(),
            memory,
            parallel: vec![
                ParallelLevel::Cores { count: 2 },
                ParallelLevel::Matrix {
                    m: 16,
                    n: 16,
                    k: 16,
                    memories: None,
                },
            ],
            vector: None,
            tlb: None,
            element_types: vec![ScalarType::F16],
        }
    }

    #[test]
    fn a_tree_of_scratchpads_validates_and_has_no_cache_chain() {
        let t = accelerator();
        t.validate().unwrap();
        assert!(t.memory.cache_chain().is_empty());
        assert_eq!(t.memory.children(MemoryId(1)).count(), 2);
        assert_eq!(t.memory.scratchpads().count(), 3);
        assert_eq!(t.fractal(), Some((16, 16, 16)));
        assert!(t.has_parallel_units());
    }

    #[test]
    fn a_cache_chain_runs_from_the_closest_cache_outwards() {
        let mut memory = MemoryTree::global("DRAM", 1 << 34);
        let l3 = memory.add("L3", MemoryKind::Cache, 32 << 20, memory.root());
        let l2 = memory.add("L2", MemoryKind::Cache, 1 << 20, l3);
        memory.add("L1d", MemoryKind::Cache, 32 << 10, l2);
        let names: Vec<&str> = memory
            .cache_chain()
            .iter()
            .map(|n| n.name.as_str())
            .collect();
        assert_eq!(names, ["L1d", "L2", "L3"]);
    }

    #[test]
    fn cache_geometries_must_divide_their_cache_into_sets() {
        let geometry = CacheGeometry {
            line_bytes: 64,
            ways: 8,
            miss_penalty_cycles: 10,
        };
        let mut t = accelerator();
        let root = t.memory.root();
        t.memory.add_cache("L2", 1 << 20, geometry, root);
        t.validate().unwrap();
        assert_eq!(geometry.sets(32 << 10), 64);
        let mut odd = t.clone();
        odd.memory.nodes[4].bytes = 1000;
        assert!(odd.validate().is_err());
        let mut scratch = t.clone();
        scratch.memory.nodes[1].geometry = Some(geometry);
        assert!(scratch.validate().is_err());
    }

    #[test]
    fn broken_trees_are_refused() {
        let mut t = accelerator();
        t.memory.nodes[2].parent = Some(MemoryId(3));
        assert!(t.validate().is_err());
        let mut t = accelerator();
        t.memory.nodes[0].kind = MemoryKind::Cache;
        assert!(t.validate().is_err());
    }
}
