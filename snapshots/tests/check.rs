//! `polyfuse check` output (arrays, statements, domains, schedules, accesses) of every kernel.

use snapshots::{kernels, snapshot_name};

#[test]
fn check_output_of_every_kernel() {
    let kernels = kernels();
    assert!(
        kernels.len() >= 14,
        "kernels/ holds only {} kernels",
        kernels.len()
    );
    for path in kernels {
        let program = frontend::load(&path, &frontend::Options::default())
            .unwrap_or_else(|e| panic!("{}", e.render(false)));
        program.verify().unwrap();
        insta::assert_snapshot!(
            format!("check_{}", snapshot_name(&path)),
            program.to_string()
        );
    }
}
