//! Dependence analysis of every kernel in `kernels/`: time per kernel (median of repeated
//! runs, release build). Run with `cargo xtask bench deps`.
//!
//! With `POLYFUSE_DEPS_EXPORT=DIR`, also writes for every kernel a JSON file with the kernel's
//! domains, accesses and original schedule in isl notation and the dependences polyfuse found,
//! which `xtask/isl_compare.py` recomputes with isl to compare answers and speed. With
//! `POLYFUSE_DEPS_ONLY=TEXT`, only the kernels whose file name contains `TEXT` run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use polyhedral::deps::{compute_dependences, DepKind, Dependences};
use polyhedral::Program;

fn kernels() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("kernels/ exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("pf" | "c")))
        .collect();
    found.sort();
    found
}

/// Median and minimum of repeated runs: at least 5, and at most about one second's worth.
fn measure(program: &Program) -> (Duration, Duration, Dependences) {
    let first = compute_dependences(program).expect("dependence analysis succeeds");
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 5 || (times.len() < 50 && start.elapsed() < Duration::from_secs(1)) {
        let t = Instant::now();
        let deps = compute_dependences(program).expect("dependence analysis succeeds");
        times.push(t.elapsed());
        std::hint::black_box(deps);
    }
    times.sort();
    (times[times.len() / 2], times[0], first)
}

fn union_of(program: &Program, deps: &Dependences, kind: DepKind, dataflow: bool) -> String {
    let list = if dataflow {
        &deps.dataflow
    } else {
        &deps.memory
    };
    let parts: Vec<String> = list
        .iter()
        .filter(|d| d.kind == kind)
        .map(|d| d.relation.to_string())
        .collect();
    let _ = program;
    serde_json::to_string(&parts).expect("strings serialise")
}

fn export(dir: &Path, name: &str, program: &Program, deps: &Dependences) {
    let mut domains = Vec::new();
    let mut writes = Vec::new();
    let mut reads = Vec::new();
    let mut schedules = Vec::new();
    let width = program
        .statements
        .iter()
        .map(|s| 2 * s.depth() + 1)
        .max()
        .unwrap_or(1);
    for s in &program.statements {
        domains.push(program.display_domain(s));
        writes.push(program.display_access(s, &s.write));
        for r in &s.reads {
            reads.push(program.display_access(s, r));
        }
        let mut dims: Vec<String> = s
            .original_schedule()
            .iter()
            .map(|e| program.display_affine(s, e))
            .collect();
        dims.resize(width, "0".into());
        let params: Vec<&str> = program.params.iter().map(|p| p.name.as_str()).collect();
        let prefix = if params.is_empty() {
            String::new()
        } else {
            format!("[{}] -> ", params.join(", "))
        };
        schedules.push(format!(
            "{prefix}{{ {}[{}] -> [{}] }}",
            s.name,
            s.iterators.join(", "),
            dims.join(", ")
        ));
    }
    let live_in: Vec<String> = deps
        .live_in
        .iter()
        .map(|l| l.instances.to_string())
        .collect();
    let json = format!(
        "{{\"kernel\": {}, \"domains\": {}, \"writes\": {}, \"reads\": {}, \"schedules\": {}, \
         \"flow\": {}, \"anti\": {}, \"output\": {}, \"dataflow\": {}, \"live_in\": {}}}\n",
        serde_json::to_string(name).unwrap(),
        serde_json::to_string(&domains).unwrap(),
        serde_json::to_string(&writes).unwrap(),
        serde_json::to_string(&reads).unwrap(),
        serde_json::to_string(&schedules).unwrap(),
        union_of(program, deps, DepKind::Flow, false),
        union_of(program, deps, DepKind::Anti, false),
        union_of(program, deps, DepKind::Output, false),
        union_of(program, deps, DepKind::Flow, true),
        serde_json::to_string(&live_in).unwrap(),
    );
    std::fs::write(dir.join(format!("{name}.json")), json).expect("export folder is writable");
}

fn main() {
    let export_dir = std::env::var_os("POLYFUSE_DEPS_EXPORT").map(PathBuf::from);
    println!(
        "| kernel | statements | dependences | median | min | under 50 ms |\n| --- | ---: | ---: | ---: | ---: | --- |"
    );
    let only = std::env::var("POLYFUSE_DEPS_ONLY").ok();
    let mut slow = 0;
    for path in kernels() {
        let name = path
            .file_name()
            .expect("kernel paths name files")
            .to_string_lossy()
            .into_owned();
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let program = frontend::load(&path, &frontend::Options::default())
            .unwrap_or_else(|e| panic!("{}", e.render(false)));
        let (median, min, deps) = measure(&program);
        let ok = median < Duration::from_millis(50);
        slow += usize::from(!ok);
        println!(
            "| {name} | {} | {} | {:.2} ms | {:.2} ms | {} |",
            program.statements.len(),
            deps.memory.len() + deps.dataflow.len(),
            median.as_secs_f64() * 1e3,
            min.as_secs_f64() * 1e3,
            if ok { "yes" } else { "no" }
        );
        if let Some(dir) = &export_dir {
            std::fs::create_dir_all(dir).expect("export folder can be made");
            export(dir, &name, &program, &deps);
        }
    }
    println!("\n{slow} kernel(s) over 50 ms");
}
