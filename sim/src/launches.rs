//! Several kernels in one file, launched one after another on the same GM: a kernel's `out`
//! and `inout` tensors are what the later kernels that name them read, so a computation whose
//! blocks depend on each other's results (a product that reads another one whole) runs as
//! kernels separated by launches, the only synchronisation between blocks.
//!
//! Each kernel of the file starts at a `kernel` header and has its own parameters, buffers and
//! blocks; a GM tensor named by several kernels must have one element type and shape. The
//! report of a sequence adds the kernels' cycles, instructions, busy cycles, fractal-MACs and
//! bytes, and takes the largest core count and memory peaks; the outputs are every tensor some
//! kernel writes, as the last one left it; the timeline is the first kernel's.

use std::collections::BTreeMap;

use crate::assemble::Kernel;
use crate::diagnostic::{Diagnostic, Error};
use crate::isa::Role;
use crate::report::Report;
use crate::run::{Outcome, SimOptions};
use crate::{Machine, Tensor};

/// The kernels of `text`, parsed and assembled; diagnostics point into the whole file.
pub fn load_all(file: &str, text: &str, machine: &Machine) -> Result<Vec<Kernel>, Error> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let starts: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("kernel ") || l.trim() == "kernel")
        .map(|(i, _)| i)
        .collect();
    if starts.len() <= 1 {
        return Ok(vec![crate::load(file, text, machine)?]);
    }
    let mut kernels: Vec<Kernel> = Vec::new();
    for (n, &start) in starts.iter().enumerate() {
        // The section's lines where they are in the file, the others blank, so that spans
        // and line numbers are the file's.
        let from = if n == 0 { 0 } else { start };
        let to = starts.get(n + 1).copied().unwrap_or(lines.len());
        let section: String = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if (from..to).contains(&i) {
                    l.to_string()
                } else {
                    l.chars().filter(|&c| c == '\n').collect()
                }
            })
            .collect();
        let kernel = crate::load(file, &section, machine)?;
        for p in &kernel.program().params {
            let earlier = kernels
                .iter()
                .flat_map(|k| k.program().params.iter())
                .find(|q| q.name == p.name);
            if let Some(q) = earlier {
                if q.dtype != p.dtype || q.shape != p.shape {
                    return Err(Error::new(
                        file,
                        &section,
                        Diagnostic::new(
                            p.span,
                            format!(
                                "`{}` is {}[{:?}] here but {}[{:?}] in an earlier kernel",
                                p.name,
                                p.dtype.name(),
                                p.shape,
                                q.dtype.name(),
                                q.shape
                            ),
                        )
                        .with_hint("a GM tensor has one type and shape in every kernel"),
                    ));
                }
            }
        }
        kernels.push(kernel);
    }
    Ok(kernels)
}

/// The tensors the kernels read before any of them writes them.
pub fn inputs_of(kernels: &[Kernel]) -> Vec<(usize, String)> {
    let mut written: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for (i, k) in kernels.iter().enumerate() {
        for p in &k.program().params {
            let name = p.name.as_str();
            if p.role != Role::Out
                && !written.contains(&name)
                && !out.iter().any(|(_, n): &(usize, String)| n == name)
            {
                out.push((i, p.name.clone()));
            }
        }
        written.extend(
            k.program()
                .params
                .iter()
                .filter(|p| p.role != Role::In)
                .map(|p| p.name.as_str()),
        );
    }
    out
}

/// Deterministic inputs (`random_inputs` of each kernel) for every tensor the kernels read
/// before writing it.
pub fn random_inputs_all(kernels: &[Kernel], seed: u64) -> BTreeMap<String, Tensor> {
    let mut out = BTreeMap::new();
    for (i, name) in inputs_of(kernels) {
        let mut all = crate::random_inputs(kernels[i].program(), seed);
        if let Some(t) = all.remove(&name) {
            out.insert(name, t);
        }
    }
    out
}

/// Runs the kernels in order on one GM.
pub fn simulate_all(
    kernels: &[Kernel],
    inputs: &BTreeMap<String, Tensor>,
    options: &SimOptions,
) -> Result<Outcome, Error> {
    let mut tensors = inputs.clone();
    let mut reports = Vec::new();
    let mut timeline = None;
    let mut written: BTreeMap<String, ()> = BTreeMap::new();
    for (i, k) in kernels.iter().enumerate() {
        let options = SimOptions {
            timeline: options.timeline && i == 0,
            ..options.clone()
        };
        let outcome = crate::run::simulate(k, &tensors, &options)?;
        for (name, t) in outcome.outputs {
            written.insert(name.clone(), ());
            tensors.insert(name, t);
        }
        reports.push(outcome.report);
        if i == 0 {
            timeline = outcome.timeline;
        }
    }
    let outputs: BTreeMap<String, Tensor> = tensors
        .into_iter()
        .filter(|(name, _)| written.contains_key(name))
        .collect();
    let report = if reports.len() == 1 {
        reports.swap_remove(0)
    } else {
        Report::sequence(&reports, &outputs)
    };
    Ok(Outcome {
        outputs,
        report,
        timeline,
    })
}
