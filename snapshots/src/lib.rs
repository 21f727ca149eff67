//! Snapshot tests over every kernel in `kernels/`: the tests live in `tests/`, the blessed
//! outputs in `tests/snapshots/`. `cargo xtask snapshot` reviews changes and
//! `cargo xtask snapshot --accept` blesses them.
//!
//! This library holds what the tests share: the list of kernels and how each is loaded.

use std::path::{Path, PathBuf};

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

/// The snapshot name of a kernel: its file name with the dot replaced (`gemm.pf` → `gemm_pf`).
pub fn snapshot_name(path: &Path) -> String {
    path.file_name()
        .expect("kernel paths name files")
        .to_string_lossy()
        .replace(['.', '-'], "_")
}
