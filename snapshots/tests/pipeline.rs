//! The optimizing pipeline on every kernel: for every fusion strategy, tiled and untiled, the
//! scheduled loop AST runs exactly like the reference interpreter (bit for bit, same number
//! of instances).

use polyhedral::ast::{run_ast, verify};
use polyhedral::interp::{random_inputs, run};
use polyhedral::passes::tile_size::TileSizes;
use polyhedral::pipeline::{compile, Options};
use polyhedral::schedule::pluto::Fusion;
use snapshots::{kernels, load_small, observable_bits, roomy_target, tiny_target};

#[test]
fn every_kernel_every_strategy_tiled_and_untiled_runs_like_the_interpreter() {
    let roomy = roomy_target();
    for path in kernels() {
        let program = load_small(&path);
        let mut expected = random_inputs(&program, 5);
        let reference = run(&program, &mut expected).unwrap();
        for fuse in [Fusion::NoFuse, Fusion::SmartFuse, Fusion::MaxFuse] {
            for (tiling, target) in [
                (TileSizes::Off, tiny_target()),
                (TileSizes::FromTarget, tiny_target()),
                (TileSizes::FromTarget, roomy.clone()),
            ] {
                let what = format!("{} {} {tiling:?}", path.display(), fuse.name());
                let options = Options {
                    fuse,
                    tiling,
                    ..Options::default()
                };
                let c =
                    compile(&program, &target, &options).unwrap_or_else(|e| panic!("{what}: {e}"));
                let compiled = &c.program;
                verify(compiled, &c.ast).unwrap_or_else(|e| panic!("{what}: {e}"));
                // The compiled program (arrays expanded, perhaps) runs every one of its
                // instances once, and leaves the original's arrays as the original does.
                let mut actual = random_inputs(compiled, 5);
                let mut own = actual.clone();
                let instances = run(compiled, &mut own).unwrap().instances;
                let stats = run_ast(compiled, &c.ast, &mut actual)
                    .unwrap_or_else(|e| panic!("{what}: {e}\n{}", c.ast.display(compiled)));
                assert_eq!(stats.instances, instances, "{what}");
                if c.expansions.is_empty() {
                    assert_eq!(stats.instances, reference.instances, "{what}");
                }
                assert!(
                    observable_bits(&program, &actual) == observable_bits(&program, &expected),
                    "{what}: results differ\n{}\n{}",
                    c.tree.display(compiled),
                    c.ast.display(compiled)
                );
            }
        }
    }
}
