//! The unfused lowering (`--fuse nofuse`): every statement group is its own kernel and the
//! arrays one group writes for another pass through GM tensors.
//!
//! A **statement group** is a run of consecutive top-level statements that write one array
//! (a reduction's initialisation and update, 2mm's `D *= beta` and `D += tmp × C`) or that
//! share an outermost loop (a time loop, a C loop nest): the unit the scheduler's `nofuse`
//! strategy distributes. Each group becomes a program of its own over the same arrays, in
//! which the arrays it writes are outputs (those an earlier group wrote, or the caller
//! passed in, that it reads before writing are `inout`) and the arrays it only reads are
//! inputs; it is lowered as the fused lowering lowers any kernel (the Cube for a contraction
//! with its accumulator's initialisation, the Vector unit for the rest, where a loop's groups
//! are one stage each too, see [`Options::fuse`]), and its kernels run after the previous group's. So the
//! program's intermediates, which the fused lowering keeps in L1 or UB, make a GM round trip
//! here: the comparison `cargo xtask bench fusion` measures.
//!
//! On the way out: the kernels are those of the groups in program order, named after the
//! kernel and the group's first statement; a temporary one group writes and a later one
//! reads is a GM parameter of both (`out` in the writer, `in` in the readers), as the
//! runner's inputs skip temporaries.

mod flatten;

use polyhedral::program::{ArrayId, ArrayRole, ScalarType};
use polyhedral::Program;

use super::{Error, NpuTarget, Options};

/// The statement groups of `program`: ranges of statement indices in program order.
pub(crate) fn groups(program: &Program) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for (k, s) in program.statements.iter().enumerate() {
        let joins = k > 0 && {
            let prev = &program.statements[k - 1];
            prev.write.array == s.write.array || prev.position.first() == s.position.first()
        };
        match out.last_mut() {
            Some(r) if joins => r.end = k + 1,
            _ => out.push(k..k + 1),
        }
    }
    out
}

/// The program of group `range` of `program`: its statements over every array, with the
/// roles the group gives them (`written`: the arrays earlier groups wrote).
fn group_program(program: &Program, range: std::ops::Range<usize>, written: &[bool]) -> Program {
    let stmts = &program.statements[range.clone()];
    let mut sub = program.clone();
    sub.name = format!(
        "{}_{}",
        super::cube::kernel_name(&program.name),
        stmts[0].name
    );
    sub.statements = stmts.to_vec();
    for (k, arr) in sub.arrays.iter_mut().enumerate() {
        let id = ArrayId(k as u32);
        let writes = stmts.iter().any(|s| s.write.array == id);
        let reads = stmts.iter().any(|s| s.reads.iter().any(|r| r.array == id));
        if !writes && !reads {
            // Not a parameter of the group's kernel: its type takes no part in the lowering's
            // checks (the f16 operands of a contraction are not the epilogue's concern).
            arr.role = ArrayRole::Input;
            arr.elem = ScalarType::F32;
            continue;
        }
        arr.role = if !writes {
            ArrayRole::Input
        } else if arr.role == ArrayRole::InOut || (reads && written[k]) {
            ArrayRole::InOut
        } else {
            ArrayRole::Output
        };
    }
    sub
}

/// Every group's program, in order.
fn group_programs(program: &Program) -> Vec<Program> {
    let mut written = vec![false; program.arrays.len()];
    let mut out = Vec::new();
    for range in groups(program) {
        out.push(group_program(program, range.clone(), &written));
        for s in &program.statements[range] {
            written[s.write.array.index()] = true;
        }
    }
    out
}

/// `sub`, or its flattened form ([`flatten`]) when the lowering takes only that.
fn lowerable(sub: &Program, options: &Options) -> Program {
    if super::lowers(sub, options).is_err() {
        if let Some(flat) = flatten::flatten(sub) {
            if super::lowers(&flat, options).is_ok() {
                return flat;
            }
        }
    }
    sub.clone()
}

/// `asm`, the program of `low` (`sub` or its flattened form), with every GM parameter
/// declared with `sub`'s shape: a tensor has one shape in all the kernels, and the
/// instructions address GM by element offsets, which flattening keeps.
fn gm_shapes(asm: &str, sub: &Program, low: &Program) -> String {
    let mut out = String::with_capacity(asm.len());
    for line in asm.lines() {
        let mut line = line.to_string();
        for (k, arr) in sub.arrays.iter().enumerate() {
            let id = ArrayId(k as u32);
            let (from, to) = (super::gm_shape(low, id), super::gm_shape(sub, id));
            let head = format!("param {} : ", arr.name);
            if from != to && line.starts_with(&head) {
                line = line.replacen(&format!("[{from}]"), &format!("[{to}]"), 1);
            }
        }
        out += &line;
        out += "\n";
    }
    out
}

/// The `.npuasm` program of `program` with every statement group its own kernel.
pub(crate) fn compile(
    program: &Program,
    target: &NpuTarget,
    options: &Options,
) -> Result<String, Error> {
    let subs = group_programs(program);
    if subs.len() == 1 {
        return super::lower(program, target, options);
    }
    let mut text = String::new();
    for sub in &subs {
        if !text.is_empty() {
            text += "\n";
        }
        let low = lowerable(sub, options);
        text += &gm_shapes(&super::lower(&low, target, options)?, sub, &low);
    }
    Ok(text)
}

/// Whether the unfused lowering takes `program`, or why not.
pub(crate) fn supported(program: &Program, options: &Options) -> Result<(), Error> {
    let subs = group_programs(program);
    if subs.len() == 1 {
        return super::lowers(program, options);
    }
    subs.iter()
        .try_for_each(|sub| super::lowers(&lowerable(sub, options), options))
}
