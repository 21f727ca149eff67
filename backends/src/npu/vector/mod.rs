//! Kernels without a contraction, on the Vector unit alone: element-wise statements, row
//! reductions and stencils over rows, tiled by rows into UB, spread over the cores, with
//! GM ↔ UB copies on MTE2 / MTE3 overlapping the vector work (double buffering).
//!
//! The passes, in order: [`analysis`] reads each statement's domain and accesses and the
//! sequential loops; [`stages`] fuses statements into stages (with the rows each computes per
//! tile, halos included) and decides which arrays go to GM; [`lower`] turns each stage into UB
//! buffers, transfers and vector operations; [`tiles`] picks each stage's tile height from
//! UB's capacity and the machine's costs; [`code`] and [`emit`] write the program.
//!
//! On the way out, as for the Cube's programs (see the parent module): GM tensors are the
//! kernel's arrays (f64 ones as f32 with [`Options::f64_as_f32`]) plus the temporaries that
//! cross stages; nothing is written outside the rows and columns the statements write; every
//! pair of accesses to the same buffer bytes from different pipes is ordered by a flag, a
//! barrier or `sync_all`.

mod analysis;
mod code;
mod emit;
mod lower;
mod scalars;
mod stages;
mod tiles;
mod transpose;

use polyhedral::contraction::contractions;
use polyhedral::Program;

use super::{Error, NpuTarget, Options};
use code::{distribution, StageCode};
use scalars::Scalars;
use stages::Step;

/// Whether `program` is for the Vector unit alone: it has no contraction for the Cube.
pub(crate) fn applies(program: &Program) -> bool {
    contractions(program).is_empty()
}

/// The stages of `program`, or why the Vector unit does not take it.
pub(crate) fn plan(program: &Program, options: &Options) -> Result<Vec<Step>, Error> {
    let items = analysis::analyse(program, options)?;
    let steps = stages::stages(program, &items, options.fuse)?;
    if steps.is_empty() {
        return Err(Error::NotYet(format!(
            "`{}` computes nothing it returns",
            program.name
        )));
    }
    for arr in &program.arrays {
        if arr.name.starts_with("ub") {
            return Err(Error::NotYet(format!(
                "the array name `{}` collides with the program's buffer names",
                arr.name
            )));
        }
    }
    Ok(steps)
}

/// The stages of `program` lowered to buffers and operations (with the scalars they use),
/// or why the Vector unit does not take it.
pub(crate) fn lower(
    program: &Program,
    options: &Options,
) -> Result<(Vec<Step>, Vec<lower::Lowered>, Scalars), Error> {
    let steps = plan(program, options)?;
    let mut scalars = Scalars::default();
    let lowered = stages_of(&steps)
        .iter()
        .enumerate()
        .map(|(k, st)| lower::lower(program, st, k, &mut scalars, options.double_buffer))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((steps, lowered, scalars))
}

/// Every stage, in program order (a loop's once).
fn stages_of(steps: &[Step]) -> Vec<&stages::Stage> {
    steps
        .iter()
        .flat_map(|s| match s {
            Step::Stage(st) => std::slice::from_ref(st).iter(),
            Step::Loop { body, .. } => body.iter(),
        })
        .collect()
}

/// The `.npuasm` program of `program` on the Vector unit.
pub(crate) fn compile(
    program: &Program,
    target: &NpuTarget,
    options: &Options,
) -> Result<String, Error> {
    let (steps, lowered, scalars) = lower(program, options)?;
    let base = 32 * scalars.inputs.len() as u64;
    let mut codes = Vec::new();
    for (st, low) in stages_of(&steps).into_iter().zip(&lowered) {
        let tr = tiles::choose(program, target, st, low, options.double_buffer, base)?;
        codes.push(StageCode::new(
            program,
            target,
            st,
            low,
            tr,
            options.double_buffer,
            base,
        ));
    }
    let blockdim = codes
        .iter()
        .map(|c| {
            distribution(
                (c.stage.rows.1 - c.stage.rows.0) as u64,
                c.tr,
                target.cores(),
            )
            .2
        })
        .max()
        .unwrap_or(1);
    Ok(emit::program(program, &steps, &codes, &scalars, blockdim))
}
