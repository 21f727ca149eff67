//! Dependences (`polyfuse check --emit deps`): snapshots of the textbook kernels, and the
//! analysis succeeding on every kernel.

use polyhedral::deps::{compute_dependences, DepKind, Dependences, Level};
use snapshots::{kernels, snapshot_name};

fn analyse(name: &str) -> (polyhedral::Program, Dependences) {
    let path = kernels()
        .into_iter()
        .find(|p| p.file_name().is_some_and(|f| f == name))
        .unwrap_or_else(|| panic!("no kernel {name}"));
    let program = frontend::load(&path, &frontend::Options::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let deps = compute_dependences(&program).unwrap();
    (program, deps)
}

/// The value-based flow dependences as `source -> sink on array: distance` lines.
fn dataflow_summary(program: &polyhedral::Program, deps: &Dependences) -> Vec<String> {
    deps.dataflow
        .iter()
        .map(|d| {
            let distance: Vec<String> = d.distance.iter().map(|x| x.to_string()).collect();
            format!(
                "{} -> {} on {}: ({})",
                program.statements[d.source.index()].name,
                program.statements[d.sink.index()].name,
                program.array(d.array).name,
                distance.join(", ")
            )
        })
        .collect()
}

#[test]
fn textbook_dependences() {
    for name in ["gemm.pf", "jacobi-2d.c", "lu.pf", "conv2d_relu.pf"] {
        let (program, deps) = analyse(name);
        insta::assert_snapshot!(
            format!("deps_{}", snapshot_name(std::path::Path::new(name))),
            deps.display(&program)
        );
    }
}

#[test]
fn gemm_accumulates_along_k() {
    let (program, deps) = analyse("gemm.pf");
    let flows = dataflow_summary(&program, &deps);
    assert_eq!(flows, ["S0 -> S1 on C: ()", "S1 -> S1 on C: (0, 0, 1)"]);
    // Every legality dependence between S1 instances is carried by k: i and j are parallel.
    for d in deps.legality().filter(|d| d.source == d.sink) {
        if program.statements[d.source.index()].name == "S1" {
            assert_eq!(d.level, Level::Loop(2));
        }
    }
}

#[test]
fn jacobi_2d_is_carried_by_time_with_unit_stencil_distances() {
    let (program, deps) = analyse("jacobi-2d.c");
    let flows = dataflow_summary(&program, &deps);
    // B is read at t from S0 of the same t; A at t from S1 of the previous t, at offsets -1..1.
    assert!(
        flows.contains(&"S0 -> S1 on B: (0)".to_string()),
        "{flows:?}"
    );
    assert!(
        flows.contains(&"S1 -> S0 on A: (1)".to_string()),
        "{flows:?}"
    );
    for d in deps.legality() {
        if d.source != d.sink || d.kind != DepKind::Flow {
            continue;
        }
        assert_eq!(
            d.level,
            Level::Loop(0),
            "only the time loop carries a self-flow"
        );
    }
}

#[test]
fn every_kernel_has_dependences_computed() {
    for path in kernels() {
        let program = frontend::load(&path, &frontend::Options::default())
            .unwrap_or_else(|e| panic!("{}", e.render(false)));
        let deps =
            compute_dependences(&program).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // Every read is either fed by a write or live-in, and every live-out array has a writer.
        assert!(!deps.live_out.is_empty(), "{}", path.display());
        assert!(!deps.display(&program).is_empty());
    }
}
