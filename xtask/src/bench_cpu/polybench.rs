//! Where PolyBench/C 4.2.1 is and what it holds. Its text is never part of this repository:
//! the benchmark takes it from `--polybench DIR`, from `POLYBENCH_DIR`, from a `polybench`
//! folder beside the workspace or one unpacked under `target/`, and otherwise downloads the
//! release tarball into `target/` (which needs `curl` and `tar`).

use std::path::{Path, PathBuf};
use std::process::Command;

const RELEASE: &str = "polybench-c-4.2.1-beta";
const RELEASE_URL: &str =
    "https://downloads.sourceforge.net/project/polybench/polybench-c-4.2.1-beta.tar.gz";

/// The datasets of PolyBench/C 4.2.1, smallest first.
pub(crate) const DATASETS: [&str; 5] = ["MINI", "SMALL", "MEDIUM", "LARGE", "EXTRALARGE"];

/// One kernel of the suite: `dir/name.c` with its header `dir/name.h`.
pub(crate) struct Kernel {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) source: PathBuf,
}

/// An unpacked PolyBench/C tree.
pub(crate) struct PolyBench {
    pub(crate) root: PathBuf,
}

impl PolyBench {
    pub(crate) fn utilities(&self) -> PathBuf {
        self.root.join("utilities")
    }

    /// `utilities/polybench.c`, linked into every binary.
    pub(crate) fn harness(&self) -> PathBuf {
        self.utilities().join("polybench.c")
    }

    /// The kernels of `utilities/benchmark_list`, in its order.
    pub(crate) fn kernels(&self) -> Result<Vec<Kernel>, String> {
        let list = self.utilities().join("benchmark_list");
        let text =
            std::fs::read_to_string(&list).map_err(|e| format!("{}: {e}", list.display()))?;
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|line| {
                let source = self.root.join(line.trim_start_matches("./"));
                let name = source
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .ok_or_else(|| format!("{}: `{line}` names no file", list.display()))?;
                let dir = source
                    .parent()
                    .ok_or_else(|| format!("{}: `{line}` has no folder", list.display()))?
                    .to_path_buf();
                Ok(Kernel { name, dir, source })
            })
            .collect()
    }
}

fn is_polybench(dir: &Path) -> bool {
    dir.join("utilities/benchmark_list").is_file() && dir.join("utilities/polybench.c").is_file()
}

/// Finds PolyBench/C, downloading it into `target/` when it is nowhere else.
pub(crate) fn locate(given: Option<&Path>, workspace: &Path) -> Result<PolyBench, String> {
    if let Some(dir) = given {
        return if is_polybench(dir) {
            Ok(PolyBench {
                root: dir.to_path_buf(),
            })
        } else {
            Err(format!(
                "{} is not a PolyBench/C tree (no utilities/benchmark_list)",
                dir.display()
            ))
        };
    }
    let mut candidates: Vec<PathBuf> = std::env::var_os("POLYBENCH_DIR")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    if let Some(parent) = workspace.parent() {
        candidates.push(parent.join("polybench"));
        candidates.push(parent.join(RELEASE));
    }
    let target = workspace.join("target");
    candidates.push(target.join(RELEASE));
    if let Some(dir) = candidates.iter().find(|d| is_polybench(d)) {
        return Ok(PolyBench { root: dir.clone() });
    }
    download(&target)?;
    let dir = target.join(RELEASE);
    if is_polybench(&dir) {
        Ok(PolyBench { root: dir })
    } else {
        Err(format!(
            "the downloaded tarball did not unpack into {}",
            dir.display()
        ))
    }
}

fn download(target: &Path) -> Result<(), String> {
    std::fs::create_dir_all(target).map_err(|e| format!("{}: {e}", target.display()))?;
    let tarball = target.join(format!("{RELEASE}.tar.gz"));
    println!("PolyBench/C not found: downloading {RELEASE_URL}");
    let fetched = Command::new("curl")
        .args(["-fsSL", "--retry", "2", "-o"])
        .arg(&tarball)
        .arg(RELEASE_URL)
        .status()
        .is_ok_and(|s| s.success());
    let unpacked = fetched
        && Command::new("tar")
            .arg("xzf")
            .arg(&tarball)
            .arg("-C")
            .arg(target)
            .status()
            .is_ok_and(|s| s.success());
    if unpacked {
        Ok(())
    } else {
        Err(format!(
            "PolyBench/C 4.2.1 was not found and could not be downloaded: unpack \
             {RELEASE}.tar.gz and pass --polybench DIR (or set POLYBENCH_DIR)"
        ))
    }
}

/// `large`, `LARGE` or `LARGE_DATASET` as PolyBench's name, `LARGE`.
pub(crate) fn parse_dataset(text: &str) -> Result<&'static str, String> {
    let upper = text.to_ascii_uppercase();
    let name = upper.strip_suffix("_DATASET").unwrap_or(&upper);
    DATASETS
        .into_iter()
        .find(|d| *d == name)
        .ok_or_else(|| format!("unknown dataset `{text}` (one of {})", DATASETS.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::parse_dataset;

    #[test]
    fn datasets_are_read_in_any_of_their_spellings() {
        assert_eq!(parse_dataset("medium"), Ok("MEDIUM"));
        assert_eq!(parse_dataset("EXTRALARGE_DATASET"), Ok("EXTRALARGE"));
        assert!(parse_dataset("HUGE").is_err());
    }
}
