//! The runner: builds a written kernel with a `main` harness, runs it, reads its outputs.
//!
//! The harness (`main.c`) includes the kernel's translation unit, reads every non-temporary
//! array (into memory aligned to 64 bytes) from an input file (raw little-endian elements in
//! [`ArrayId`] order; `f16` as its bits), calls the kernel once between two `CLOCK_MONOTONIC`
//! readings, writes every live-out array to an output file in the same encoding, and prints the
//! kernel's time in seconds. The files live in a temporary folder removed afterwards.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use polyhedral::ast::Ast;
use polyhedral::interp::{self, Memory};
use polyhedral::program::{ArrayId, ArrayRole, Program, ScalarType};

use super::writer::{storage_type, KernelInterface, Writer};
use super::{Error, Options};
use crate::compare::{compare, keeps_arrays, Comparison};

/// What a kernel run produced.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuRun {
    /// Every live-out array's final contents, in [`ArrayId`] order.
    pub outputs: Vec<(ArrayId, Vec<f64>)>,
    /// Seconds the kernel call took, measured inside the harness.
    pub kernel_seconds: f64,
}

/// The environment variable naming a command the built kernel runs under (its words split at
/// white space, the kernel's path and arguments appended), e.g. `valgrind --tool=cachegrind`.
pub const RUNNER_VAR: &str = "POLYFUSE_CPU_RUNNER";

/// The environment variable holding more C compiler flags, passed after the defaults (e.g.
/// `-mno-avx512f` for a runner that does not know AVX-512).
pub const CFLAGS_VAR: &str = "POLYFUSE_CPU_CFLAGS";

/// The built kernel of [`check`] may run this long, plus [`TIME_LIMIT_FACTOR`] times the
/// interpreter's time on the same inputs: compiled code that runs that much slower than the
/// interpreter loops where it should not.
pub const TIME_LIMIT_FLOOR: Duration = Duration::from_secs(60);
/// See [`TIME_LIMIT_FLOOR`].
pub const TIME_LIMIT_FACTOR: u32 = 20;

/// Builds and runs the kernel of `ast` on `inputs` (the initial contents of every array); under
/// the command [`RUNNER_VAR`] names, when it is set.
pub fn run(
    program: &Program,
    ast: &Ast,
    inputs: &Memory,
    options: &Options,
) -> Result<CpuRun, Error> {
    run_within(program, ast, inputs, options, None)
}

/// [`run`], the built kernel stopped once it has run for `limit`.
fn run_within(
    program: &Program,
    ast: &Ast,
    inputs: &Memory,
    options: &Options,
    limit: Option<Duration>,
) -> Result<CpuRun, Error> {
    let (kernel, interface) = Writer::new(program, options).write_unit(ast)?;
    let dir = tempfile::Builder::new()
        .prefix("polyfuse-cpu-")
        .tempdir()
        .map_err(|e| io("create a temporary folder", e))?;
    let path = |name: &str| dir.path().join(name);
    write(&path("kernel.c"), kernel.as_bytes())?;
    write(&path("main.c"), harness(program, &interface).as_bytes())?;
    write(&path("input.bin"), &encode_inputs(program, inputs))?;
    build(options, &path("main.c"), &path("kernel"))?;

    let mut command = match std::env::var(RUNNER_VAR)
        .ok()
        .filter(|r| !r.trim().is_empty())
    {
        // A command the built kernel runs under: a profiler, a simulator, a debugger.
        Some(runner) => {
            let mut words = runner.split_whitespace();
            let mut c = Command::new(words.next().expect("the runner is not blank"));
            c.args(words).arg(path("kernel"));
            c
        }
        None => Command::new(path("kernel")),
    };
    command.arg(path("input.bin")).arg(path("output.bin"));
    if let Some(n) = options.threads {
        command.env("OMP_NUM_THREADS", n.to_string());
    }
    // Its output goes to files, so that a kernel stopped at its limit leaves no pipe behind.
    let create = |name: &str| {
        std::fs::File::create(path(name)).map_err(|e| io(&format!("create {name}"), e))
    };
    command
        .stdout(create("stdout.txt")?)
        .stderr(create("stderr.txt")?);
    let mut child = command
        .spawn()
        .map_err(|e| io("start the built kernel", e))?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| io("wait for the kernel", e))? {
            break status;
        }
        if let Some(limit) = limit.filter(|&l| started.elapsed() > l) {
            // The kernel may have ended meanwhile; either way it is gone after `wait`.
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::TimeLimit {
                seconds: limit.as_secs_f64(),
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let read = |name: &str| std::fs::read(path(name)).map_err(|e| io(&format!("read {name}"), e));
    if !status.success() {
        return Err(Error::Kernel {
            status: status.to_string(),
            log: String::from_utf8_lossy(&read("stderr.txt")?).into_owned(),
        });
    }
    let stdout = read("stdout.txt")?;
    let stdout = String::from_utf8_lossy(&stdout);
    let kernel_seconds = stdout.trim().parse::<f64>().map_err(|_| Error::Kernel {
        status: "no time reported".into(),
        log: stdout.to_string(),
    })?;
    let bytes =
        std::fs::read(path("output.bin")).map_err(|e| io("read the kernel's outputs", e))?;
    let outputs = decode_outputs(program, &bytes)?;
    Ok(CpuRun {
        outputs,
        kernel_seconds,
    })
}

/// The result of [`check`]: the comparison with the interpreter and the kernel's time.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckReport {
    pub comparison: Comparison,
    /// What the kernel computed: every live-out array, in [`ArrayId`] order.
    pub outputs: Vec<(ArrayId, Vec<f64>)>,
    pub kernel_seconds: f64,
    pub seed: u64,
    pub threads: Option<usize>,
}

impl CheckReport {
    /// What `polyfuse run --target cpu` prints.
    pub fn to_text(&self, program: &Program) -> String {
        let threads = match self.threads {
            Some(n) => format!("{n} threads"),
            None => "default threads".to_string(),
        };
        let mut out = format!(
            "kernel {} on cpu (seed {}, {threads})\n",
            program.name, self.seed
        );
        out += &self.comparison.to_text(program);
        out += &format!("kernel time: {:.6} s\n", self.kernel_seconds);
        out += &self.comparison.verdict();
        out
    }
}

/// Runs the interpreter and the kernel of `ast` on the random inputs of `seed` and compares
/// every live-out array.
pub fn check(
    program: &Program,
    ast: &Ast,
    options: &Options,
    seed: u64,
) -> Result<CheckReport, Error> {
    check_transformed(program, program, ast, options, seed)
}

/// [`check`] for a program the compiler rewrote (`program`, with `ast` its loops) against the
/// program as written (`reference`): the rewritten program keeps the reference's arrays, in
/// order, and may add temporaries after them. Both get the same random inputs; the
/// reference's live-out arrays are compared.
pub fn check_transformed(
    reference: &Program,
    program: &Program,
    ast: &Ast,
    options: &Options,
    seed: u64,
) -> Result<CheckReport, Error> {
    if !keeps_arrays(reference, program) {
        return Err(Error::InvalidProgram(
            "the rewritten program does not keep the original's arrays".into(),
        ));
    }
    let mut expected = interp::random_inputs(reference, seed);
    // The reference on as many threads as the generated code gets: loops the interpreter
    // proves parallel give the same bits on any number.
    let threads = options
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let started = Instant::now();
    interp::run_with(
        reference,
        &mut expected,
        &interp::RunOptions {
            threads,
            ..interp::RunOptions::default()
        },
    )?;
    let limit = TIME_LIMIT_FLOOR + started.elapsed() * TIME_LIMIT_FACTOR;
    let inputs = interp::random_inputs(program, seed);
    let cpu = run_within(program, ast, &inputs, options, Some(limit))?;
    Ok(CheckReport {
        comparison: compare(reference, &expected, &cpu.outputs),
        outputs: cpu.outputs,
        kernel_seconds: cpu.kernel_seconds,
        seed,
        threads: options.threads,
    })
}

fn io(what: &str, source: std::io::Error) -> Error {
    Error::Io {
        what: what.to_string(),
        source,
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    std::fs::write(path, bytes).map_err(|e| io(&format!("write {}", path.display()), e))
}

fn build(options: &Options, source: &Path, binary: &Path) -> Result<(), Error> {
    let mut command = Command::new(&options.cc);
    command.args(&options.cflags);
    if let Ok(extra) = std::env::var(CFLAGS_VAR) {
        command.args(extra.split_whitespace());
    }
    command.arg("-o").arg(binary).arg(source).arg("-lm");
    let text = format!("{command:?}");
    let result = command.output().map_err(|e| Error::CompilerMissing {
        cc: options.cc.clone(),
        source: e,
    })?;
    if result.status.success() {
        Ok(())
    } else {
        Err(Error::Build {
            command: text,
            log: String::from_utf8_lossy(&result.stderr).into_owned(),
        })
    }
}

/// Arrays whose contents go to the kernel: all but temporaries.
fn passed_arrays(program: &Program) -> impl Iterator<Item = ArrayId> + '_ {
    program
        .arrays
        .iter()
        .enumerate()
        .filter(|(_, a)| a.role != ArrayRole::Temporary)
        .map(|(k, _)| ArrayId(k as u32))
}

fn live_outs(program: &Program) -> impl Iterator<Item = ArrayId> + '_ {
    program
        .arrays
        .iter()
        .enumerate()
        .filter(|(_, a)| a.role.is_live_out())
        .map(|(k, _)| ArrayId(k as u32))
}

fn encode_inputs(program: &Program, inputs: &Memory) -> Vec<u8> {
    let mut bytes = Vec::new();
    for id in passed_arrays(program) {
        let ty = program.array(id).elem;
        for &v in inputs.array(id) {
            match ty {
                ScalarType::F16 => {
                    bytes.extend(half::f16::from_f64(v).to_bits().to_le_bytes());
                }
                ScalarType::F32 => bytes.extend((v as f32).to_le_bytes()),
                ScalarType::F64 => bytes.extend(v.to_le_bytes()),
                ScalarType::I32 => bytes.extend((v as i32).to_le_bytes()),
                ScalarType::Bool => bytes.push((v != 0.0) as u8),
            }
        }
    }
    bytes
}

fn decode_outputs(program: &Program, bytes: &[u8]) -> Result<Vec<(ArrayId, Vec<f64>)>, Error> {
    let mut rest = bytes;
    let mut outputs = Vec::new();
    for id in live_outs(program) {
        let ty = program.array(id).elem;
        let size = ty.size_in_bytes();
        let len = program.array_len(id);
        if rest.len() < len * size {
            return Err(Error::Kernel {
                status: "short output file".into(),
                log: format!("{} bytes missing", len * size - rest.len()),
            });
        }
        let (data, tail) = rest.split_at(len * size);
        rest = tail;
        let values = data
            .chunks_exact(size)
            .map(|c| match ty {
                ScalarType::F16 => half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f64(),
                ScalarType::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                ScalarType::F64 => {
                    f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
                }
                ScalarType::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                ScalarType::Bool => (c[0] != 0) as u8 as f64,
            })
            .collect();
        outputs.push((id, values));
    }
    Ok(outputs)
}

/// The `main` harness; every identifier it declares starts with `pf_`, which no name of the
/// kernel does.
fn harness(program: &Program, kernel: &KernelInterface) -> String {
    let mut out = String::from(
        "#define _POSIX_C_SOURCE 199309L\n#include <stdio.h>\n#include <stdlib.h>\n#include <time.h>\n#include \"kernel.c\"\n\n\
static void *pf_load(FILE *pf_in, size_t pf_bytes)\n{\n    void *pf_p = aligned_alloc(64, (pf_bytes + 63) / 64 * 64 + 64 * !pf_bytes);\n    if (!pf_p || (pf_bytes && fread(pf_p, 1, pf_bytes, pf_in) != pf_bytes)) {\n        fprintf(stderr, \"cannot read the inputs\\n\");\n        exit(3);\n    }\n    return pf_p;\n}\n\n\
static void pf_store(FILE *pf_out, const void *pf_p, size_t pf_bytes)\n{\n    if (pf_bytes && fwrite(pf_p, 1, pf_bytes, pf_out) != pf_bytes) {\n        fprintf(stderr, \"cannot write the outputs\\n\");\n        exit(3);\n    }\n}\n\n\
int main(int pf_argc, char **pf_argv)\n{\n    if (pf_argc != 3)\n        return 2;\n    FILE *pf_in = fopen(pf_argv[1], \"rb\");\n    if (!pf_in)\n        return 3;\n",
    );
    let bytes = |id: ArrayId| program.array_len(id) * program.array(id).elem.size_in_bytes();
    let by_value = |id: ArrayId| {
        program.array(id).shape.is_empty() && program.array(id).role == ArrayRole::Input
    };
    for &id in &kernel.args {
        let k = id.index();
        if by_value(id) {
            let store = storage_type(program.array(id).elem);
            out += &format!(
                "    {store} pf_a{k};\n    if (fread(&pf_a{k}, sizeof pf_a{k}, 1, pf_in) != 1)\n        return 3;\n"
            );
        } else {
            out += &format!("    void *pf_a{k} = pf_load(pf_in, {});\n", bytes(id));
        }
    }
    let args: Vec<String> = kernel
        .args
        .iter()
        .map(|id| format!("pf_a{}", id.index()))
        .collect();
    out += &format!(
        "    fclose(pf_in);\n    struct timespec pf_t0, pf_t1;\n    clock_gettime(CLOCK_MONOTONIC, &pf_t0);\n    int pf_status = {}({});\n    clock_gettime(CLOCK_MONOTONIC, &pf_t1);\n",
        kernel.name,
        args.join(", ")
    );
    out += "    if (pf_status != 0) {\n        fprintf(stderr, \"the kernel could not allocate its temporaries\\n\");\n        return 3;\n    }\n";
    out += "    FILE *pf_out = fopen(pf_argv[2], \"wb\");\n    if (!pf_out)\n        return 3;\n";
    for id in live_outs(program) {
        out += &format!("    pf_store(pf_out, pf_a{}, {});\n", id.index(), bytes(id));
    }
    out += "    if (fclose(pf_out) != 0)\n        return 3;\n";
    for &id in &kernel.args {
        if !by_value(id) {
            out += &format!("    free(pf_a{});\n", id.index());
        }
    }
    out += "    printf(\"%.9f\\n\", (double)(pf_t1.tv_sec - pf_t0.tv_sec) + 1e-9 * (double)(pf_t1.tv_nsec - pf_t0.tv_nsec));\n    return 0;\n}\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_past_its_time_limit_is_stopped() {
        // A scalar function that loops for far longer than the limit.
        let text = "fn spin(x: f32) -> f32 {\n    var y = x; var n = 0;\n    \
                    while n < 2000000000 { y = y * 0.5 + 1.0; n = n + 1; }\n    return y;\n}\n\
                    kernel slow<N = 4>(X: f32[N]) -> (Y: f32[N]) {\n    Y(i) = spin(X(i));\n}\n";
        let file = frontend::SourceFile::new("slow.pf", text);
        let program = frontend::parse(&file, frontend::Language::Kernel, &Default::default())
            .expect("the kernel parses");
        let ast = polyhedral::ast::original_ast(&program).expect("the loops are generated");
        let inputs = interp::random_inputs(&program, 1);
        let options = Options::default();
        let started = Instant::now();
        let limit = Some(Duration::from_millis(300));
        match run_within(&program, &ast, &inputs, &options, limit) {
            Err(Error::TimeLimit { .. }) => {}
            other => panic!("expected the time limit, got {other:?}"),
        }
        // Building takes a while; the kernel itself did not run its two billion iterations.
        assert!(started.elapsed() < Duration::from_secs(60));
    }
}
