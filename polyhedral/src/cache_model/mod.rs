//! The stack-distance cache model (the seed's compile-time model) and the tile-size search it
//! drives.
//!
//! From the polyhedral representation alone — access relations, the schedule with its tile and
//! point bands, and the loops' trip counts at the program's sizes — the model predicts how many
//! times each cache level of the target misses: no program is run or traced. The loop
//! structure comes from a flat schedule ([`Model`], `nest.rs`: positions, coordinates, the
//! tree of loops and sequences); the evaluation (`eval.rs`) walks it, counting per loop the
//! lines each array touches in one iteration of its body and in the whole loop — their
//! difference is the reuse the loop carries, at a stack distance of one iteration's footprint —
//! and turns stack distances into misses with each level's capacity, line size and
//! associativity ([`Level`], from the target's [`CacheGeometry`]). `shape.rs` counts domains for
//! the model of triangular and skewed loops; the search (`search.rs`) chooses a band's tile
//! sizes by the cycles the predicted misses cost; `packing.rs` adds the pack marks' buffers
//! and their copies to a model, as the generated code has them; `report.rs` writes
//! `--emit cache-model`.
//!
//! What holds: a prediction is a deterministic function of the program, the schedule, the tile
//! sizes and the levels; it counts every line the program touches at least once in every level
//! (compulsory misses), and a reuse whose stack distance exceeds a fully associative level's
//! capacity always as a miss. Schedules the model does not cover (divisions outside tile bands,
//! statements with fewer loops than iterators) are [`Unsupported`]; the tile-size chooser then
//! keeps its capacity rule.

mod eval;
mod lookahead;
#[cfg(test)]
mod lru_sequence_tests;
#[cfg(test)]
mod lru_tests;
mod nest;
mod packing;
#[cfg(test)]
mod packing_tests;
mod report;
mod search;
mod shape;
#[cfg(test)]
mod tests;

pub use eval::{predict, Prediction};
pub use lookahead::{PackedRanking, FINALISTS, FINALIST_SPREAD, PACKED_MARGIN};
pub use nest::{Model, RegisterBlocking};
pub use packing::{packings, Packing, BUFFER_ALIGNMENT};
pub use report::report;
pub use search::{
    search_band, wavefront_tiles, BandSearch, Candidate, Streamed, COARSE, PARALLEL_TILE,
    RULE_MARGIN, STREAMED_PARALLEL_TILES, WAVEFRONT_TILES,
};

use crate::target::{CacheGeometry, TargetDescription};

/// A schedule or target the model does not cover, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unsupported(pub String);

/// One cache level as the model sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Level {
    pub name: String,
    pub bytes: u64,
    pub line_bytes: u32,
    pub ways: u32,
    pub sets: u64,
    pub miss_penalty_cycles: u32,
}

impl Level {
    pub fn new(name: &str, bytes: u64, geometry: CacheGeometry) -> Level {
        Level {
            name: name.to_string(),
            bytes,
            line_bytes: geometry.line_bytes,
            ways: geometry.ways,
            sets: geometry.sets(bytes),
            miss_penalty_cycles: geometry.miss_penalty_cycles,
        }
    }
}

/// `target`'s caches, closest first, when it has caches and every one has its geometry.
pub fn levels(target: &TargetDescription) -> Option<Vec<Level>> {
    let chain = target.memory.cache_chain();
    if chain.is_empty() {
        return None;
    }
    chain
        .iter()
        .map(|n| n.geometry.map(|g| Level::new(&n.name, n.bytes, g)))
        .collect()
}
