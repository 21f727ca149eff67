//! Kernel inputs: from a directory (one file per parameter) or generated from a seed.
//!
//! For parameter `NAME` the directory holds `NAME.bin` (raw little-endian elements of the
//! parameter's type, row-major) or `NAME.txt` (numbers separated by whitespace or commas,
//! row-major). Generated inputs are uniform in [-1, 1) for floats and in -8..=8 for i32, from
//! a splitmix64 stream seeded by the seed and the parameter's name, so they are reproducible.

use std::collections::BTreeMap;
use std::path::Path;

use half::f16;

use crate::isa::{DType, Program, Role};
use crate::Tensor;

/// Reads every `in` / `inout` parameter from `dir`.
pub fn load_inputs(program: &Program, dir: &Path) -> Result<BTreeMap<String, Tensor>, String> {
    if !dir.is_dir() {
        return Err(format!(
            "error: {}: {}\n",
            dir.display(),
            if dir.exists() {
                "not a folder (--inputs takes a folder of NAME.bin or NAME.txt files)"
            } else {
                "no such folder"
            }
        ));
    }
    let mut out = BTreeMap::new();
    for p in program.params.iter().filter(|p| p.role != Role::Out) {
        let n = p.elements() as usize;
        let bin = dir.join(format!("{}.bin", p.name));
        let txt = dir.join(format!("{}.txt", p.name));
        let values: Vec<f64> = if bin.exists() {
            let bytes = std::fs::read(&bin)
                .map_err(|e| format!("error: cannot read {}: {e}\n", bin.display()))?;
            let es = p.dtype.size() as usize;
            if bytes.len() != n * es {
                return Err(format!(
                    "error: {} has {} bytes; `{}` needs {} ({} elements of {})\n",
                    bin.display(),
                    bytes.len(),
                    p.name,
                    n * es,
                    n,
                    p.dtype.name()
                ));
            }
            bytes
                .chunks_exact(es)
                .map(|c| match p.dtype {
                    DType::F16 => f16::from_le_bytes([c[0], c[1]]).to_f64(),
                    DType::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                    DType::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                })
                .collect()
        } else if txt.exists() {
            let text = std::fs::read_to_string(&txt)
                .map_err(|e| format!("error: cannot read {}: {e}\n", txt.display()))?;
            let vals: Result<Vec<f64>, String> = words(&text)
                .map(|(at, s)| {
                    s.parse::<f64>().map_err(|_| {
                        let (line, col) = line_col(&text, at);
                        format!(
                            "error: {}:{line}:{col}: `{s}` is not a number\n",
                            txt.display()
                        )
                    })
                })
                .collect();
            let vals = vals?;
            if vals.len() != n {
                return Err(format!(
                    "error: {} has {} numbers; `{}` needs {n}\n",
                    txt.display(),
                    vals.len(),
                    p.name
                ));
            }
            vals
        } else {
            return Err(format!(
                "error: no input for `{}`: expected {} or {}\n",
                p.name,
                bin.display(),
                txt.display()
            ));
        };
        out.insert(
            p.name.clone(),
            Tensor::new(p.dtype, p.shape.clone(), values),
        );
    }
    Ok(out)
}

/// The words of an input text (separated by whitespace or commas), with their byte offsets.
fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let separator = |c: char| c.is_whitespace() || c == ',';
    text.char_indices()
        .filter(move |&(i, c)| !separator(c) && text[..i].chars().next_back().is_none_or(separator))
        .map(move |(i, _)| {
            let end = text[i..].find(separator).map_or(text.len(), |e| i + e);
            (i, &text[i..end])
        })
}

/// The 1-based line and column (in characters) of byte offset `at`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Deterministic inputs for every `in` / `inout` parameter: the values the reference
/// interpreter gives an array of the same name and element type ([`prng::input_bits`]).
pub fn random_inputs(program: &Program, seed: u64) -> BTreeMap<String, Tensor> {
    let mut out = BTreeMap::new();
    for p in program.params.iter().filter(|p| p.role != Role::Out) {
        let values = (0..p.elements()).map(|i| {
            let bits = prng::input_bits(seed, &p.name, i);
            match p.dtype {
                DType::I32 => prng::input_int(bits) as f64,
                _ => prng::input_unit(bits),
            }
        });
        out.insert(
            p.name.clone(),
            Tensor::new(p.dtype, p.shape.clone(), values),
        );
    }
    out
}
