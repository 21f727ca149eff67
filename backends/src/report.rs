//! What `polyfuse run` prints about a kernel's outputs: per live-out array a checksum (the sum
//! of its elements, in row-major order, accumulated in f64), the sum of absolute values, and a
//! few sample elements (first, a third and two thirds of the way through, last).

use std::time::Duration;

use polyhedral::interp::Memory;

use crate::compare::Comparison;
use polyhedral::program::{ArrayId, Program};
use serde_json::{json, Value};

/// The summary of one output array.
pub struct OutputSummary {
    pub array: ArrayId,
    pub extents: Vec<i64>,
    pub checksum: f64,
    pub abs_sum: f64,
    pub samples: Vec<(Vec<i64>, f64)>,
}

/// Summaries of every live-out array, in declaration order.
pub fn summarize(program: &Program, memory: &Memory) -> Vec<OutputSummary> {
    summarize_with(program, &|id| memory.array(id))
}

/// Summaries of every live-out array a target produced (`outputs`, by array).
pub fn summarize_outputs(program: &Program, outputs: &[(ArrayId, Vec<f64>)]) -> Vec<OutputSummary> {
    summarize_with(program, &|id| {
        outputs
            .iter()
            .find(|(a, _)| *a == id)
            .map_or(&[][..], |(_, v)| v.as_slice())
    })
}

fn summarize_with<'m>(
    program: &Program,
    values_of: &dyn Fn(ArrayId) -> &'m [f64],
) -> Vec<OutputSummary> {
    program
        .arrays
        .iter()
        .enumerate()
        .filter(|(_, a)| a.role.is_live_out())
        .map(|(k, _)| {
            let id = ArrayId(k as u32);
            let values = values_of(id);
            let extents = program.array_extents(id);
            let n = values.len();
            let mut picks = vec![0, n / 3, 2 * n / 3, n.saturating_sub(1)];
            picks.dedup();
            let samples = if n == 0 {
                Vec::new()
            } else {
                picks
                    .into_iter()
                    .map(|flat| (unflatten(flat, &extents), values[flat]))
                    .collect()
            };
            OutputSummary {
                array: id,
                checksum: values.iter().sum(),
                abs_sum: values.iter().map(|v| v.abs()).sum(),
                extents,
                samples,
            }
        })
        .collect()
}

fn unflatten(mut flat: usize, extents: &[i64]) -> Vec<i64> {
    let mut index = vec![0; extents.len()];
    for (d, &e) in extents.iter().enumerate().rev() {
        index[d] = (flat % e as usize) as i64;
        flat /= e as usize;
    }
    index
}

fn join<T: ToString>(items: &[T]) -> String {
    items
        .iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn to_text(
    program: &Program,
    target: &str,
    seed: u64,
    results: &[OutputSummary],
    elapsed: Duration,
) -> String {
    let mut out = format!("kernel {} on {target} (seed {seed})\n", program.name);
    for r in results {
        let array = program.array(r.array);
        out += &format!(
            "  {}: {}[{}]  checksum {:.9e}  abs-sum {:.9e}\n",
            array.name,
            array.elem,
            join(&r.extents),
            r.checksum,
            r.abs_sum
        );
        let samples: Vec<String> = r
            .samples
            .iter()
            .map(|(index, v)| format!("{}[{}] = {v:.9e}", array.name, join(index)))
            .collect();
        if !samples.is_empty() {
            out += &format!("    {}\n", samples.join("   "));
        }
    }
    out += &format!("time: {:.3} s\n", elapsed.as_secs_f64());
    out
}

/// The stable JSON document documented in the README; targets other than the interpreter add
/// their own keys to it.
pub fn to_value(program: &Program, target: &str, seed: u64, results: &[OutputSummary]) -> Value {
    let params: serde_json::Map<String, Value> = program
        .params
        .iter()
        .map(|p| (p.name.clone(), json!(p.value)))
        .collect();
    let outputs: Vec<Value> = results
        .iter()
        .map(|r| {
            let array = program.array(r.array);
            json!({
                "name": array.name,
                "type": array.elem.name(),
                "shape": r.extents,
                "checksum": r.checksum,
                "abs_sum": r.abs_sum,
                "samples": r.samples.iter().map(|(index, value)| json!({
                    "index": index,
                    "value": value,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "kernel": program.name,
        "target": target,
        "seed": seed,
        "params": params,
        "outputs": outputs,
    })
}

/// Adds a target's comparison with the interpreter to its JSON document: `matches_interp`, and
/// per output its largest absolute and relative errors, its count of mismatches and of elements
/// the target's language leaves unspecified (non-finite on the GPU).
pub fn add_comparison(json: &mut Value, comparison: &Comparison) {
    json["matches_interp"] = json!(comparison.passed());
    if let Some(outputs) = json["outputs"].as_array_mut() {
        for (out, c) in outputs.iter_mut().zip(&comparison.arrays) {
            out["max_abs_error"] = json!(c.max_abs);
            out["max_rel_error"] = json!(c.max_rel);
            out["mismatches"] = json!(c.mismatches);
            out["unspecified"] = json!(c.unspecified);
        }
    }
}
