//! Fission of the innermost loop where its statements pass values to each other through
//! memory from one iteration to the next.
//!
//! A fused (or time-skewed) loop nest can leave several statements in one innermost loop with
//! a flow dependence between two of them that the innermost loop carries: in a Jacobi sweep
//! fused with its copy-back, iteration `j` of the second statement reads `B[i][j - 1]`, which
//! the first wrote one iteration earlier. Once the C compiler vectorises the loop, that read is
//! a vector load overlapping the vector store just before it, which the processor cannot
//! forward from its store buffer: every iteration waits for the store to reach the cache.
//! Measured on jacobi-2d (LARGE, one thread, GCC 12, AVX-512 machine): the untiled, skewed,
//! fused loop took 3.5–4.3 s, the same loop split into one loop per statement 1.7–2.1 s, and
//! GCC's original sweeps 2.3–3.0 s.
//!
//! The pass gives each statement of such an innermost loop its own loop: a scalar dimension
//! inserted before the innermost loop dimension orders the statements as the loop body did,
//! and the band holding that dimension loses it to a band of its own. A flow dependence that
//! the innermost loop does not carry (a value used in the iteration that computes it) keeps its
//! statements together, since the value then stays in a register. Each loop nest is split only
//! if the schedule stays legal (checked exactly: a dependence from a later statement of the
//! body to an earlier one in a later iteration forbids it).

use crate::deps::{DepKind, Dependences};
use crate::passes::{Pass, PassContext};
use crate::pipeline::Error as PipelineError;
use crate::program::{Program, StmtId};
use crate::schedule::expr::QuasiAffine;
use crate::schedule::legality::{check_legality, coincident_dims, coincident_dims_among};
use crate::schedule::pluto::{Band, BandKind, DimKind, Error, PlutoSchedule};

/// `schedule` with the innermost loop split into one loop per statement wherever a flow
/// dependence between two of its statements is carried by it, as the module docs describe.
pub fn split_innermost_loops(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
) -> Result<PlutoSchedule, Error> {
    let Some(inner) = schedule.dims.iter().rposition(|d| d.kind == DimKind::Loop) else {
        return Ok(schedule.clone());
    };
    // A tile band's member cannot lose its point loop.
    let Some(band) = schedule
        .bands
        .iter()
        .find(|b| (b.start..b.start + b.len).contains(&inner))
        .copied()
    else {
        return Ok(schedule.clone());
    };
    if band.kind == BandKind::Tile {
        return Ok(schedule.clone());
    }
    let mut out = with_scalar_dim(schedule, inner, band);
    let mut changed = false;
    for nest in schedule.nests_at(inner) {
        if nest.len() < 2 || !carries_flow_between(program, deps, schedule, &nest, inner)? {
            continue;
        }
        // The statements in the order of the loop body: by the scalar dimensions after the
        // innermost loop, then by statement.
        let mut order = nest.clone();
        order.sort_by_key(|s| {
            let after: Vec<i64> = schedule.dims[inner + 1..]
                .iter()
                .filter(|d| d.kind == DimKind::Scalar)
                .map(|d| d.exprs[s.index()].eval(&[], &[]))
                .collect();
            (after, s.index())
        });
        let mut candidate = out.clone();
        for (position, s) in order.iter().enumerate() {
            candidate.dims[inner].exprs[s.index()] = QuasiAffine::constant(position as i64);
        }
        match check_legality(program, deps, &candidate) {
            Ok(()) => {
                out = candidate;
                changed = true;
            }
            Err(Error::Illegal(_)) => {}
            Err(e) => return Err(e),
        }
    }
    if !changed {
        return Ok(schedule.clone());
    }
    let flags = coincident_dims(program, deps, &out)?;
    for (d, f) in out.dims.iter_mut().zip(flags) {
        d.coincident = f;
    }
    Ok(out)
}

/// Whether dimension `inner` carries a flow dependence between two different statements of
/// `nest` once the outer dimensions are equal.
fn carries_flow_between(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
    nest: &[StmtId],
    inner: usize,
) -> Result<bool, Error> {
    let between = Dependences {
        memory: deps
            .memory
            .iter()
            .filter(|d| d.kind == DepKind::Flow && d.source != d.sink)
            .filter(|d| nest.contains(&d.source) && nest.contains(&d.sink))
            .cloned()
            .collect(),
        dataflow: Vec::new(),
        live_in: Vec::new(),
        live_out: Vec::new(),
    };
    if between.memory.is_empty() {
        return Ok(false);
    }
    let flags = coincident_dims_among(program, &between, schedule, nest)?;
    Ok(!flags[inner])
}

/// `schedule` with a scalar dimension (zero for every statement) inserted before dimension
/// `inner`, the last member of `band`, which becomes a band of its own.
fn with_scalar_dim(schedule: &PlutoSchedule, inner: usize, band: Band) -> PlutoSchedule {
    let mut out = schedule.with_scalar_dim(inner);
    let mut bands = Vec::new();
    for b in out.bands {
        if b == band {
            if b.len > 1 {
                bands.push(Band {
                    len: b.len - 1,
                    ..b
                });
            }
            bands.push(Band {
                start: inner + 1,
                len: 1,
                ..b
            });
        } else {
            bands.push(b);
        }
    }
    out.bands = bands;
    out
}

/// The innermost-loop fission pass ([`split_innermost_loops`]).
pub const PASS: Pass = Pass {
    name: "fission",
    summary: "innermost loops whose statements pass values through memory split into one loop per \
        statement",
    enabled: |target, options| {
        options.fission && target.vector.is_some() && target.invocations().is_none()
    },
    run,
};

fn run(cx: &mut PassContext) -> Result<(), PipelineError> {
    let split = split_innermost_loops(cx.program, cx.deps, &cx.schedule)?;
    cx.set_schedule(split)
}
