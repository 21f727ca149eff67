//! Snapshot tests over every kernel in `kernels/`: the tests live in `tests/`, the blessed
//! outputs in `tests/snapshots/`. `cargo xtask snapshot` reviews changes and
//! `cargo xtask snapshot --accept` blesses them.
//!
//! This library holds what the tests share: the list of kernels, how each is loaded, the
//! small target that makes tiles partial, and bitwise comparison of memories.

use std::path::{Path, PathBuf};

use polyhedral::interp::Memory;
use polyhedral::program::{ArrayRole, Program, ScalarType};
use polyhedral::target::{
    MemoryKind, MemoryTree, ParallelLevel, TargetDescription, Tlb, VectorUnit,
};

/// Every kernel in `kernels/` (`.pf` and `.c` files), sorted by file name.
pub fn kernels() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("pf" | "c")))
        .collect();
    found.sort();
    found
}

/// A kernel at small sizes, so that every test can run it on the interpreter: PolyBench's mini
/// dataset for C (every size at most 12), every size of a `.pf` kernel cut to 5, 6 or 7
/// (different values per size, so mixed-up sizes show).
pub fn load_small(path: &Path) -> polyhedral::Program {
    let options = frontend::Options {
        defines: vec![("MINI_DATASET".into(), None)],
        ..frontend::Options::default()
    };
    let mut program =
        frontend::load(path, &options).unwrap_or_else(|e| panic!("{}", e.render(false)));
    let pf = path.extension().is_some_and(|e| e == "pf");
    for (k, p) in program.params.iter_mut().enumerate() {
        p.value = if pf {
            p.value.min(5 + (k as i64 % 3))
        } else {
            p.value.min(12)
        };
    }
    program
}

/// A kernel at its default sizes (PolyBench's LARGE dataset for C).
pub fn load(path: &Path) -> polyhedral::Program {
    frontend::load(path, &frontend::Options::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)))
}

/// A kernel with its parameters set from `sizes` in order (cycling through them).
pub fn load_at(path: &Path, sizes: &[i64]) -> polyhedral::Program {
    let mut program = load(path);
    for (k, p) in program.params.iter_mut().enumerate() {
        p.value = sizes[k % sizes.len()];
    }
    program
}

/// The kernels of kernels/ with a statement that calls a scalar function the vectoriser
/// makes a vector variant of.
pub fn kernels_with_vector_functions() -> Vec<PathBuf> {
    kernels()
        .into_iter()
        .filter(|p| {
            !polyhedral::vectorize::VectorProgram::for_program(&load(p))
                .variants
                .is_empty()
        })
        .collect()
}

/// The kernel of kernels/ whose file is `name`.
pub fn kernel(name: &str) -> PathBuf {
    kernels()
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == name))
        .unwrap_or_else(|| panic!("kernels/{name} exists"))
}

/// The snapshot name of a kernel: its file name with the dot replaced (`gemm.pf` → `gemm_pf`).
pub fn snapshot_name(path: &Path) -> String {
    path.file_name()
        .expect("kernel paths name files")
        .to_string_lossy()
        .replace(['.', '-'], "_")
}

/// A machine whose closest memory is so small that tiles at the test sizes are 2 to 4 wide,
/// so that partial and full tiles both occur.
pub fn tiny_target() -> TargetDescription {
    let mut memory = MemoryTree::global("DRAM", 1 << 30);
    memory.add("L1", MemoryKind::Cache, 256, memory.root());
    TargetDescription {
        name: "tiny".into(),
        memory,
        parallel: vec![ParallelLevel::Threads { count: None }],
        vector: Some(VectorUnit {
            bytes: 16,
            tile_iterations: 128,
            registers: 32,
            tile_registers: 32,
            fma_latency: 0,
            fma_pipes: 0,
        }),
        tlb: None,
        element_types: vec![
            ScalarType::F16,
            ScalarType::F32,
            ScalarType::F64,
            ScalarType::I32,
        ],
    }
}

/// [`tiny_target`] with a 1 MiB cache beyond its L1: room for expanded arrays, and tiles
/// sized by the cache-hierarchy rule.
pub fn roomy_target() -> TargetDescription {
    let mut memory = MemoryTree::global("DRAM", 1 << 30);
    let l3 = memory.add("L3", MemoryKind::Cache, 1 << 20, memory.root());
    memory.add("L1", MemoryKind::Cache, 256, l3);
    TargetDescription {
        name: "tiny with room for expanded arrays".into(),
        memory,
        ..tiny_target()
    }
}

/// [`tiny_target`] with a 2 KiB second cache and a TLB of four 64-byte pages: small enough
/// that the packing analysis finds candidates in the kernels at their test sizes.
pub fn packing_target() -> TargetDescription {
    let mut memory = MemoryTree::global("DRAM", 1 << 30);
    let l2 = memory.add("L2", MemoryKind::Cache, 2 << 10, memory.root());
    memory.add("L1", MemoryKind::Cache, 256, l2);
    TargetDescription {
        name: "tiny with a TLB".into(),
        memory,
        tlb: Some(Tlb {
            entries: 4,
            page_bytes: 64,
        }),
        ..tiny_target()
    }
}

/// The bits of the arrays of `program` that are seen outside a run (every array but its
/// temporaries), as `memory` holds them: `memory` may hold more arrays after them (those a
/// compiled program added).
pub fn observable_bits(program: &Program, memory: &Memory) -> Vec<Vec<u64>> {
    program
        .arrays
        .iter()
        .zip(&memory.arrays)
        .filter(|(a, _)| a.role != ArrayRole::Temporary)
        .map(|(_, values)| values.iter().map(|x| x.to_bits()).collect())
        .collect()
}

/// Every array's elements as bit patterns, for exact comparison.
pub fn bits(m: &Memory) -> Vec<Vec<u64>> {
    m.arrays
        .iter()
        .map(|a| a.iter().map(|x| x.to_bits()).collect())
        .collect()
}
