//! `compile --target gpu` and `run --target gpu`.

use crate::{report, CompileEmit, Failure, OptimizeArgs, RunArgs};

fn options(args: &OptimizeArgs) -> backends::gpu::Options {
    backends::gpu::Options {
        promote: !args.no_promote,
        f64_as_f32: args.gpu_f32,
        adapter: args.adapter.clone(),
        ..Default::default()
    }
}

/// Whether `run --target all` can include the GPU.
pub(crate) fn adapter_present(args: &OptimizeArgs) -> bool {
    backends::gpu::adapter_limits(args.adapter.as_deref()).is_ok()
}

fn failure(program: &polyhedral::Program, e: backends::gpu::Error) -> Failure {
    Failure(format!("error: {}: {e}\n", program.name))
}

/// The text `compile --target gpu --emit …` writes.
pub(crate) fn compile(
    program: &polyhedral::Program,
    args: &OptimizeArgs,
    emit: CompileEmit,
) -> Result<String, Failure> {
    let options = options(args);
    let gpu = backends::gpu::compile(program, &args.pipeline(), &options)
        .map_err(|e| failure(program, e))?;
    let compiled = &gpu.compiled;
    Ok(match emit {
        CompileEmit::Deps => compiled.deps.display(&compiled.program).to_string(),
        CompileEmit::Tree => compiled.tree.display(&compiled.program),
        CompileEmit::Ast => compiled.ast.display(&compiled.program).to_string(),
        CompileEmit::Wgsl => {
            backends::gpu::Writer::new(&compiled.program, &options)
                .write(&compiled.ast)
                .map_err(|e| failure(program, e))?
                .wgsl
        }
        CompileEmit::C => {
            return Err(Failure(
                "error: the gpu target writes WGSL (--emit wgsl), not C\n".into(),
            ))
        }
    })
}

/// Runs the kernel on the GPU against the interpreter: the text to print (empty with
/// `--json`), the JSON document, and whether the outputs match.
pub(crate) fn run(
    program: &polyhedral::Program,
    args: &RunArgs,
) -> Result<(String, serde_json::Value, bool), Failure> {
    let mut options = options(&args.optimize);
    // Generate code for the adapter that will run it.
    let (_, limits) = backends::gpu::adapter_limits(options.adapter.as_deref())
        .map_err(|e| failure(program, e))?;
    options.limits = limits;
    let gpu = backends::gpu::compile(program, &args.optimize.pipeline(), &options)
        .map_err(|e| failure(program, e))?;
    let module = backends::gpu::Writer::new(&gpu.compiled.program, &options)
        .write(&gpu.compiled.ast)
        .map_err(|e| failure(program, e))?;
    let report = backends::gpu::check(
        &gpu.reference,
        &gpu.compiled.program,
        &module,
        &options,
        args.seed,
    )
    .map_err(|e| failure(program, e))?;
    let reference = &gpu.reference;
    let results = report::summarize_outputs(reference, &report.outputs);
    let mut document = report::to_value(reference, "gpu", args.seed, &results);
    document["kernel_seconds"] = serde_json::json!(report.kernel_seconds);
    document["matches_interp"] = serde_json::json!(report.comparison.passed());
    document["adapter"] = serde_json::json!(report.adapter);
    if let Some(outputs) = document["outputs"].as_array_mut() {
        for (out, c) in outputs.iter_mut().zip(&report.comparison.arrays) {
            out["max_abs_error"] = serde_json::json!(c.max_abs);
            out["max_rel_error"] = serde_json::json!(c.max_rel);
            out["mismatches"] = serde_json::json!(c.mismatches);
        }
    }
    let text = if args.json {
        String::new()
    } else {
        let mut text = String::new();
        if gpu.reference != *program {
            text += "note: f64 computed in f32 (--gpu-f32); compared with the interpreter running the kernel in f32\n";
        }
        for n in &module.notes {
            text += &format!("note: {n}\n");
        }
        text + &report.to_text(reference)
    };
    Ok((text, document, report.comparison.passed()))
}
