//! The CPU target end to end on every kernel in `kernels/`: the optimizing pipeline under
//! every fusion strategy, its C built with the system C compiler and run against the reference
//! interpreter, packed and unpacked (exact for integers, within the element type's tolerance otherwise; every
//! kernel here is bit-exact in practice because the pipeline keeps each element's order of
//! operations and the build does not contract); the same C under the address and
//! undefined-behaviour sanitizers; and the source-to-source output of every C kernel, built
//! with the file's own harness, printing exactly what the original prints.

use std::path::Path;
use std::process::Command;

use backends::cpu;
use polyhedral::pipeline::{compile, Options};
use polyhedral::schedule::pluto::Fusion;
use snapshots::{kernels, load_small, packing_target, tiny_target};

/// The options of CPU model `model` with two threads, and every parallel loop parallel
/// whatever its work, so that the OpenMP code paths run at these small sizes. Its code runs on
/// every host: where the host lacks the model's vectors, the C compiler splits them into the
/// host's.
fn model_options(model: cpu::CpuModel) -> cpu::Options {
    cpu::Options::for_model(model).with(|o| {
        o.threads = Some(2);
        o.min_parallel_work = 0;
    })
}

/// The AVX-512 model, with a line saying whether this host runs its vectors as such.
fn wide_model() -> cpu::CpuModel {
    let model = cpu::models::X86_64_V4;
    if !model.runs_natively() {
        println!(
            "{}: this host lacks {}; its code runs with the host's narrower vectors",
            model.name,
            model.features.join("/")
        );
    }
    model
}

#[test]
fn every_kernel_every_strategy_runs_on_the_cpu_like_the_interpreter() {
    for path in kernels() {
        let program = load_small(&path);
        for fuse in [Fusion::NoFuse, Fusion::SmartFuse, Fusion::MaxFuse] {
            let default = cpu::CpuModel::default();
            let wide = wide_model();
            let runs = [
                (cpu::description(), true, default),
                (cpu::description(), false, default),
                (cpu::description_for(&wide), true, wide),
                (tiny_target(), true, default),
                (packing_target(), true, default),
                (packing_target(), false, default),
            ];
            for (target, pack, model) in runs {
                let what = format!(
                    "{} {} on {} ({}){}",
                    path.display(),
                    fuse.name(),
                    target.name,
                    model.name,
                    if pack { "" } else { " unpacked" }
                );
                eprintln!("{what}");
                let options = Options {
                    fuse,
                    pack,
                    ..Options::default()
                };
                let c =
                    compile(&program, &target, &options).unwrap_or_else(|e| panic!("{what}: {e}"));
                let report =
                    cpu::check_transformed(&program, &c.program, &c.ast, &model_options(model), 3)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(
                    report.comparison.passed(),
                    "{what}:\n{}\n{}",
                    report.to_text(&program),
                    c.ast.display(&c.program)
                );
            }
        }
    }
}

const SANITIZE: &[&str] = &[
    "-O1",
    "-g",
    "-fopenmp",
    "-ffp-contract=off",
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
];

/// Why the sanitizers cannot be used here, if they cannot.
fn sanitizers_unavailable() -> Option<String> {
    let dir = tempfile::tempdir().ok()?;
    let src = dir.path().join("probe.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").ok()?;
    let bin = dir.path().join("probe");
    let built = Command::new("cc")
        .args(SANITIZE)
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output()
        .ok()?;
    if !built.status.success() {
        return Some(String::from_utf8_lossy(&built.stderr).into_owned());
    }
    match Command::new(&bin).output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(String::from_utf8_lossy(&o.stderr).into_owned()),
        Err(e) => Some(e.to_string()),
    }
}

#[test]
fn optimized_c_of_every_kernel_passes_the_sanitizers() {
    if let Some(reason) = sanitizers_unavailable() {
        println!("skipped: the sanitizer runtime is not usable here: {reason}");
        return;
    }
    let sanitized = |model| {
        model_options(model).with(|o| o.cflags = SANITIZE.iter().map(|s| s.to_string()).collect())
    };
    let (default, wide) = (cpu::CpuModel::default(), wide_model());
    for path in kernels() {
        let program = load_small(&path);
        let runs = [
            (tiny_target(), default),
            (cpu::description(), default),
            (cpu::description_for(&wide), wide),
            (packing_target(), default),
        ];
        for (target, model) in runs {
            let what = format!("{} on {} ({})", path.display(), target.name, model.name);
            let c = compile(&program, &target, &Options::default())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let report = cpu::check_transformed(&program, &c.program, &c.ast, &sanitized(model), 4)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                report.comparison.passed(),
                "{what}:\n{}",
                report.to_text(&program)
            );
        }
    }
}

/// Builds a PolyBench-style C file with its own harness and returns what it prints with
/// `-DPOLYBENCH_DUMP_ARRAYS` (the live-out arrays).
fn dump(source: &Path, dataset: &str, dir: &Path, name: &str) -> String {
    let kernels_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels");
    let binary = dir.join(name);
    let built = Command::new("cc")
        .args([
            "-O2",
            "-fopenmp",
            "-ffp-contract=off",
            "-DPOLYBENCH_DUMP_ARRAYS",
        ])
        .arg(format!("-D{dataset}"))
        .arg("-I")
        .arg(&kernels_dir)
        .arg(source)
        .arg("-o")
        .arg(&binary)
        .arg("-lm")
        .output()
        .expect("the C compiler runs");
    assert!(
        built.status.success(),
        "{} does not build:\n{}",
        source.display(),
        String::from_utf8_lossy(&built.stderr)
    );
    let ran = Command::new(&binary)
        .env("OMP_NUM_THREADS", "2")
        .output()
        .expect("the built kernel runs");
    assert!(ran.status.success(), "{} failed", binary.display());
    let text = String::from_utf8_lossy(&ran.stderr).into_owned();
    assert!(
        text.contains("begin dump"),
        "{}: no arrays printed",
        source.display()
    );
    text
}

#[test]
fn source_to_source_output_prints_what_the_original_prints() {
    let dir = tempfile::tempdir().unwrap();
    for path in kernels() {
        if path.extension().is_none_or(|e| e != "c") {
            continue;
        }
        let options = frontend::Options {
            defines: vec![("MINI_DATASET".into(), None)],
            ..frontend::Options::default()
        };
        let program = frontend::load(&path, &options).unwrap();
        let source = std::fs::read_to_string(&path).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let (default, wide) = (cpu::CpuModel::default(), wide_model());
        for (target, fuse, model) in [
            (tiny_target(), Fusion::SmartFuse, default),
            (cpu::description(), Fusion::MaxFuse, default),
            (cpu::description_for(&wide), Fusion::SmartFuse, wide),
            (tiny_target(), Fusion::NoFuse, default),
            (packing_target(), Fusion::SmartFuse, default),
        ] {
            let c = compile(
                &program,
                &target,
                &Options {
                    fuse,
                    ..Options::default()
                },
            )
            .unwrap();
            let replaced = cpu::replace_scop(&c.program, &c.ast, &source, &model_options(model))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let optimized = dir.path().join(format!("{stem}.opt.c"));
            std::fs::write(&optimized, &replaced).unwrap();
            // The code is generated at the mini sizes but is parametric: it must also be
            // right at the small ones.
            for dataset in ["MINI_DATASET", "SMALL_DATASET"] {
                let expected = dump(&path, dataset, dir.path(), &format!("{stem}.orig"));
                let actual = dump(&optimized, dataset, dir.path(), &format!("{stem}.opt"));
                assert!(
                    expected == actual,
                    "{} {} on {} at {dataset}: the optimized file prints other arrays\n{replaced}",
                    path.display(),
                    fuse.name(),
                    target.name
                );
            }
        }
    }
}
