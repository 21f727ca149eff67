//! What the accelerator runs of a kernel: its contractions on the Cube and the element-wise
//! statements around them on the Vector unit, recognised from the polyhedral representation.
//!
//! A kernel the lowering takes is, in statement order, a sequence of stages and then an
//! epilogue:
//! - a stage is one contraction ([`polyhedral::contraction`]) with the statements that give its
//!   accumulator its initial value: `T[..] = 0` (the `+=!` form), or element-wise statements
//!   on the accumulator read from GM (`C[i, j] *= beta` before `C[i, j] += …`; a live-in
//!   accumulator with none of them starts from its GM contents);
//! - every stage but the last produces a temporary that the last stage reads as one of its
//!   operands, whole (its rows are the last stage's rows and its columns the last stage's
//!   reduction, or its rows the reduction and its columns the last stage's columns); it stays
//!   on chip, in L1, and has no GM tensor — or, as [`Plan::launches`], every stage is a kernel
//!   of its own and the temporaries pass through GM between them;
//! - the epilogue is element-wise statements over the last stage's result whose reads are
//!   result-shaped arrays at the same element, per-row or per-column vectors, and scalars. They
//!   run on the tile while it is in UB, and only live-out arrays get a GM tensor.
//!
//! Each contraction's iterators are grouped into the Cube's three dimensions: a dimension is
//! a group of iterators (outermost first) whose flat index runs contiguously through every
//! array that uses it; iterators that do not fold are loops around the Cube — independent
//! ones (batch iterators, unfolded row or column iterators) and, outermost in the reduction's
//! order, accumulating ones, so every element is summed in the interpreter's order. An operand
//! whose subscript slides with the reduction (a convolution's input) is gathered row by row
//! (im2col): its reduction rows need not be contiguous.
//!
//! A contraction's domain is a box from 0, or one cut by diagonals between its row and column
//! iterators (a triangular loop nest, [`Band`]): the Cube computes the bounding box and only
//! the band's elements are written out (its prologue and epilogue run over the same domain).
//!
//! Everything else is refused with a one-line reason: f64 (unless computed in f32) and i32
//! arithmetic the machine lacks ([`Error::Unsupported`]), other structures ([`Error::NotYet`]).

use std::collections::{BTreeMap, BTreeSet};

use polyhedral::contraction::{contraction, Contraction};
use polyhedral::program::{
    Access, ArrayId, ArrayRole, ConstraintKind, Expr, ExprId, ScalarType, Statement, StmtId, Var,
};
use polyhedral::Program;

use super::{Error, Options, FRACTAL};

/// How each array of the epilogue is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holding {
    /// A stage's operand (read from GM through L1, or a stage's result kept in L1).
    Operand,
    /// A result-shaped tile in UB (the accumulator and the element-wise results); written to
    /// GM when live-out.
    Tile,
    /// A per-column vector, indexed by the result's column iterator.
    Column,
    /// A per-row vector, indexed by the result's row iterator.
    Row,
    /// A scalar input, loaded into a scalar register.
    Scalar,
}

/// The element type the Cube multiplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operands {
    /// f16 operands, exact products, f32 sums.
    F16,
    /// f32 operands (f32 kernels, and f64 ones computed in f32).
    F32,
}

impl Operands {
    /// Bytes of one element.
    pub fn size(self) -> u64 {
        match self {
            Operands::F16 => 2,
            Operands::F32 => 4,
        }
    }
}

/// One iterator of a loop nest or of a Cube dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Comp {
    /// Index into the statement's iterators.
    pub iter: usize,
    pub extent: u64,
}

/// A Cube dimension: iterators outermost first, the flat index running over them in mixed
/// radix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dim {
    pub comps: Vec<Comp>,
}

impl Dim {
    pub fn extent(&self) -> u64 {
        self.comps.iter().map(|c| c.extent).product()
    }

    /// The extent rounded up to whole fractals.
    pub fn padded(&self) -> u64 {
        self.extent().div_ceil(FRACTAL) * FRACTAL
    }
}

/// Where an array's elements are: element offset `offset + Σ strides[it] · it` over the
/// statement's iterators (row-major arrays, sizes bound).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addressing {
    pub array: ArrayId,
    pub strides: Vec<i64>,
    pub offset: i64,
}

impl Addressing {
    fn of(program: &Program, access: &Access, depth: usize) -> Addressing {
        let params = program.param_values();
        let extents = program.array_extents(access.array);
        let mut strides = vec![0i64; depth];
        let mut offset = 0i64;
        let mut row = 1i64;
        for (d, sub) in access.subscripts.iter().enumerate().rev() {
            let e = sub.bind_params(&params);
            for (v, k) in e.terms() {
                if let Var::Iter(it) = v {
                    strides[*it] += k * row;
                }
            }
            offset += e.constant * row;
            row *= extents[d];
        }
        Addressing {
            array: access.array,
            strides,
            offset,
        }
    }

    /// The stride of a dimension's flat index when it runs contiguously here (each iterator's
    /// stride the next one's times its extent), else `None`.
    pub fn dim_stride(&self, dim: &Dim) -> Option<i64> {
        let inner = dim.comps.last()?;
        let mut want = self.strides[inner.iter];
        for w in dim.comps.windows(2).rev() {
            want *= w[1].extent as i64;
            if self.strides[w[0].iter] != want {
                return None;
            }
        }
        Some(self.strides[inner.iter])
    }
}

/// Which of an operand's two Cube dimensions runs along GM rows (stride 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inner {
    /// The reduction: A as `[m][k]` or B as `[n][k]` in GM.
    K,
    /// The other dimension: A as `[k][m]` or B as `[k][n]` in GM.
    Other,
}

/// Where a stage's operand comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A GM tensor, copied into L1 16 elements of its inner dimension per burst; the
    /// reduction rows of a sliding-window operand are gathered row by row.
    Gm {
        at: Addressing,
        inner: Inner,
        gathered: bool,
    },
    /// The result of an earlier stage, kept in L1.
    Stage(usize),
}

/// A loop-invariant factor an operand is multiplied by on chip before the product.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Factor {
    Const(f64),
    Scalar(ArrayId),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    pub source: Source,
    pub scale: Option<Factor>,
    /// For an earlier stage's result, how it is read from GM when the stages run as separate
    /// kernels ([`Plan::launches`]).
    pub in_gm: Option<Source>,
}

/// How a stage's accumulator starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Init {
    Zero,
    /// From its GM contents, through these element-wise statements (possibly none).
    Gm(Vec<StmtId>),
}

/// One contraction on the Cube.
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub stmt: StmtId,
    pub contraction: Contraction,
    pub acc: ArrayId,
    pub m: Dim,
    pub n: Dim,
    pub k: Dim,
    /// Independent loops around the Cube (batch iterators and row or column iterators that do
    /// not fold), outermost first.
    pub outer: Vec<Comp>,
    /// Reduction iterators outside the Cube's `k`, outermost first.
    pub k_outer: Vec<Comp>,
    pub a: Operand,
    pub b: Operand,
    /// The accumulator's addressing.
    pub write: Addressing,
    /// The iterator of each of the write's subscripts.
    pub write_iters: Vec<usize>,
    pub init: Init,
    /// Whether a stage that feeds the last one also writes its result to GM (a live-out
    /// array, as C files declare every array).
    pub live_out: bool,
    /// The diagonal band the domain keeps of the bounding box of rows and columns (a
    /// triangular loop nest); `None` for a box.
    pub band: Option<Band>,
}

/// The elements of a result whose column index minus row index (along the Cube's `n` and `m`
/// dimensions) lies in `[lo, hi]`: what a triangular loop nest keeps of its bounding box.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Band {
    pub lo: Option<i64>,
    pub hi: Option<i64>,
}

impl Band {
    pub fn contains(&self, d: i64) -> bool {
        self.lo.is_none_or(|lo| d >= lo) && self.hi.is_none_or(|hi| d <= hi)
    }
}

/// The structure [`plan`] found.
#[derive(Clone, Debug)]
pub struct Plan {
    pub stages: Vec<Stage>,
    pub operands: Operands,
    /// The last stage's accumulator.
    pub acc: ArrayId,
    /// The element-wise statements after the last stage, in order.
    pub epilogue: Vec<StmtId>,
    pub holding: BTreeMap<ArrayId, Holding>,
    /// Each epilogue array's addressing over the last stage's iterators.
    pub tiles: BTreeMap<ArrayId, Addressing>,
    /// Temporaries that get a GM tensor: a stage's result a later kernel reads
    /// ([`Plan::launches`]).
    pub gm: BTreeSet<ArrayId>,
}

impl Plan {
    /// The arrays held as `h`, in id order.
    pub fn arrays(&self, h: Holding) -> Vec<ArrayId> {
        self.holding
            .iter()
            .filter(|(_, &x)| x == h)
            .map(|(&a, _)| a)
            .collect()
    }

    pub fn last(&self) -> &Stage {
        // `plan` never returns a plan without stages.
        &self.stages[self.stages.len() - 1]
    }
}

/// Recognises the kernel's structure.
pub fn plan(program: &Program, options: &Options) -> Result<Plan, Error> {
    check_types(program, options)?;
    let ids: Vec<StmtId> = program.statement_ids().collect();
    let found: Vec<Contraction> = ids
        .iter()
        .filter_map(|&id| contraction(program, id))
        .collect();
    if found.is_empty() {
        refuse_in_place(program)?;
        return Err(Error::NotYet(format!(
            "`{}` has no contraction; kernels on the Vector unit alone are not lowered",
            program.name
        )));
    }
    // Statements in order: initialisations and prologues gather until their contraction.
    let mut stages = Vec::new();
    let mut pending: Vec<StmtId> = Vec::new();
    let mut epilogue = Vec::new();
    let last_stmt = found[found.len() - 1].stmt;
    for &id in &ids {
        let s = &program.statements[id.index()];
        if let Some(c) = found.iter().find(|c| c.stmt == id) {
            stages.push(stage(program, c, std::mem::take(&mut pending))?);
        } else if id.index() < last_stmt.index() {
            pending.push(id);
        } else {
            if s.reduction.is_some() {
                return Err(Error::NotYet(format!(
                    "statement {} after the last contraction is a reduction",
                    s.name
                )));
            }
            epilogue.push(id);
        }
    }
    if let Some(&id) = pending.first() {
        let s = &program.statements[id.index()];
        return Err(Error::NotYet(format!(
            "statement {} is neither a contraction nor the initialisation of the next one",
            s.name
        )));
    }
    let operands = operand_type(program, &stages)?;
    chain(program, &mut stages)?;
    if stages.len() > 1 {
        if let Some(st) = stages.iter().find(|s| s.band.is_some()) {
            return Err(Error::NotYet(format!(
                "the contraction {} of a chain runs over a triangular domain",
                program.statements[st.stmt.index()].name
            )));
        }
    }
    let last = &stages[stages.len() - 1];
    let acc = last.acc;
    let mut holding = BTreeMap::new();
    for st in &stages {
        for op in [&st.a, &st.b] {
            if let Source::Gm { at, .. } = &op.source {
                holding.insert(at.array, Holding::Operand);
            }
            if let Some(Factor::Scalar(a)) = op.scale {
                holding.insert(a, Holding::Scalar);
            }
        }
    }
    for st in &stages[..stages.len() - 1] {
        holding.insert(st.acc, Holding::Operand);
    }
    holding.insert(acc, Holding::Tile);
    let mut tiles = BTreeMap::new();
    tiles.insert(acc, last.write.clone());
    let stmt = &program.statements[last.stmt.index()];
    let write_box = domain(program, stmt)?.over(&last.write_iters);
    if let Init::Gm(prologue) = &last.init {
        for &id in prologue {
            element_wise(program, last, &write_box, id, &mut holding, &mut tiles)?;
        }
    }
    for &id in &epilogue {
        element_wise(program, last, &write_box, id, &mut holding, &mut tiles)?;
    }
    for (k, arr) in program.arrays.iter().enumerate() {
        if arr.role.is_live_out() && !holding.contains_key(&ArrayId(k as u32)) {
            return Err(Error::NotYet(format!(
                "output `{}` is not written by the lowered statements",
                arr.name
            )));
        }
    }
    Ok(Plan {
        stages,
        operands,
        acc,
        epilogue,
        holding,
        tiles,
        gm: BTreeSet::new(),
    })
}

/// Whether a statement reduces into the array it reads at other elements (a product
/// accumulated in place, such as trmm's: no Vector statement, and a contraction only through
/// [`super::in_place`]).
pub(crate) fn in_place_reduction(s: &Statement) -> bool {
    let reduces = (0..s.depth()).any(|it| {
        s.write
            .subscripts
            .iter()
            .all(|e| e.coeff(Var::Iter(it)) == 0)
    });
    in_place(s) && reduces
}

/// Refuses a kernel with a statement that reduces into the array it reads at other elements.
pub(crate) fn refuse_in_place(program: &Program) -> Result<(), Error> {
    match program.statements.iter().find(|s| in_place_reduction(s)) {
        Some(s) => Err(Error::NotYet(format!(
            "statement {} updates `{}` in place from other elements of it ({}); in-place updates are not lowered",
            s.name,
            program.array(s.write.array).name,
            program.display_body(s)
        ))),
        None => Ok(()),
    }
}

impl Plan {
    /// The plan as one kernel per stage, in order: each earlier stage writes its result to a
    /// GM tensor that the last stage's kernel reads — GM in between where the on-chip chain
    /// would compute the intermediates again in every block.
    pub fn launches(&self, program: &Program) -> Vec<Plan> {
        let (last, producers) = match self.stages.split_last() {
            Some((l, p)) if !p.is_empty() => (l, p),
            _ => return vec![self.clone()],
        };
        let temps: BTreeSet<ArrayId> = producers.iter().map(|p| p.acc).collect();
        let mut out = Vec::new();
        for p in producers {
            let mut holding = BTreeMap::new();
            for op in [&p.a, &p.b] {
                if let Source::Gm { at, .. } = &op.source {
                    holding.insert(at.array, Holding::Operand);
                }
                if let Some(Factor::Scalar(a)) = op.scale {
                    holding.insert(a, Holding::Scalar);
                }
            }
            holding.insert(p.acc, Holding::Tile);
            out.push(Plan {
                stages: vec![Stage {
                    live_out: false,
                    ..p.clone()
                }],
                operands: self.operands,
                acc: p.acc,
                epilogue: Vec::new(),
                holding,
                tiles: BTreeMap::from([(p.acc, p.write.clone())]),
                gm: BTreeSet::from([p.acc]),
            });
        }
        let mut last = last.clone();
        for op in [&mut last.a, &mut last.b] {
            if let Some(src) = op.in_gm.take() {
                op.source = src;
            }
        }
        // Only what the last kernel touches: its operands and their factors, the arrays of
        // its prologue and epilogue.
        let mut used: BTreeSet<ArrayId> = BTreeSet::from([last.acc]);
        for op in [&last.a, &last.b] {
            if let Source::Gm { at, .. } = &op.source {
                used.insert(at.array);
            }
            if let Some(Factor::Scalar(a)) = op.scale {
                used.insert(a);
            }
        }
        let prologue = match &last.init {
            Init::Gm(p) => p.clone(),
            Init::Zero => Vec::new(),
        };
        for id in prologue.iter().chain(&self.epilogue) {
            let s = &program.statements[id.index()];
            used.extend(s.reads.iter().map(|r| r.array));
            used.insert(s.write.array);
        }
        let mut holding = self.holding.clone();
        holding.retain(|a, _| used.contains(a));
        out.push(Plan {
            stages: vec![last],
            gm: temps,
            holding,
            ..self.clone()
        });
        out
    }
}

/// Whether a statement reads the array it writes at another element.
fn in_place(s: &Statement) -> bool {
    s.reads
        .iter()
        .any(|r| r.array == s.write.array && r.subscripts != s.write.subscripts)
}

fn not_matrix(stmt: &Statement, why: &str) -> Error {
    Error::NotYet(format!(
        "statement {} is a contraction but not a matrix product the Cube runs: {why}",
        stmt.name
    ))
}

fn it(d: usize) -> Vec<(Var, i64)> {
    vec![(Var::Iter(d), 1)]
}

/// Each subscript's terms when it is a plain iterator sum with no constant.
fn subscripts(access: &Access) -> Vec<Vec<(Var, i64)>> {
    access
        .subscripts
        .iter()
        .map(|e| {
            if e.constant == 0 {
                e.terms().to_vec()
            } else {
                vec![]
            }
        })
        .collect()
}

/// One contraction with the statements that initialise its accumulator.
fn stage(program: &Program, c: &Contraction, before: Vec<StmtId>) -> Result<Stage, Error> {
    let stmt = &program.statements[c.stmt.index()];
    let dom = domain(program, stmt)?;
    let ext = dom.extents.clone();
    let acc = stmt.write.array;
    let rank = stmt.write.subscripts.len();
    let write_iters: Vec<usize> = subscripts(&stmt.write)
        .iter()
        .filter_map(|t| match t.as_slice() {
            [(Var::Iter(i), 1)] => Some(*i),
            _ => None,
        })
        .collect();
    let distinct = write_iters
        .iter()
        .enumerate()
        .all(|(k, i)| !write_iters[..k].contains(i));
    if write_iters.len() != rank || !distinct {
        return Err(not_matrix(
            stmt,
            "its write is not one element per iteration of its outer loops",
        ));
    }
    let write_box: Vec<i64> = write_iters.iter().map(|&i| ext[i] as i64).collect();
    if program.array_extents(acc) != write_box {
        return Err(not_matrix(stmt, "its loops do not span the whole result"));
    }
    if program.array(acc).elem == ScalarType::F16 || c.ty == ScalarType::F16 {
        return Err(Error::NotYet(format!(
            "the contraction {} accumulates in f16; the Cube accumulates in f32",
            stmt.name
        )));
    }
    let depth = stmt.depth();
    let write = Addressing::of(program, &stmt.write, depth);
    let at_a = Addressing::of(program, &stmt.reads[c.a], depth);
    let at_b = Addressing::of(program, &stmt.reads[c.b], depth);
    let windowed = |r: usize| {
        stmt.reads[r].subscripts.iter().any(|s| {
            let has = |set: &[usize]| set.iter().any(|&i| s.coeff(Var::Iter(i)) != 0);
            (has(&c.m) || has(&c.n) || has(&c.batch)) && has(&c.k)
        })
    };
    let (win_a, win_b) = (windowed(c.a), windowed(c.b));
    if win_a && win_b {
        return Err(not_matrix(stmt, "both operands slide with the reduction"));
    }
    let comp = |i: usize| Comp {
        iter: i,
        extent: ext[i],
    };
    // The reduction: the longest suffix (in the interpreter's summation order) that runs
    // contiguously through the operands; a sliding-window operand gathers its rows instead.
    let ks: Vec<Comp> = c.k.iter().map(|&i| comp(i)).collect();
    let mut split = 0;
    loop {
        let dim = Dim {
            comps: ks[split..].to_vec(),
        };
        let fits = |at: &Addressing, win: bool| win || at.dim_stride(&dim).is_some();
        if fits(&at_a, win_a) && fits(&at_b, win_b) {
            break;
        }
        split += 1;
        if split == ks.len() {
            return Err(not_matrix(
                stmt,
                "no reduction iterator runs contiguously through both operands",
            ));
        }
    }
    if split > 0 && (win_a || win_b) {
        return Err(not_matrix(
            stmt,
            "the reduction of the sliding-window operand does not run contiguously through the other one",
        ));
    }
    let k = Dim {
        comps: ks[split..].to_vec(),
    };
    let k_outer = ks[..split].to_vec();
    // Rows and columns: the longest suffix (in the write's order) contiguous in the write and
    // in the operand that holds them; the other iterators are independent loops.
    let fold = |set: &[usize], at: &Addressing| -> (Dim, Vec<Comp>) {
        let comps: Vec<Comp> = set.iter().map(|&i| comp(i)).collect();
        for s in 0..comps.len() {
            let dim = Dim {
                comps: comps[s..].to_vec(),
            };
            if write.dim_stride(&dim).is_some() && at.dim_stride(&dim).is_some() {
                return (dim, comps[..s].to_vec());
            }
        }
        (
            Dim {
                comps: comps[comps.len() - 1..].to_vec(),
            },
            comps[..comps.len() - 1].to_vec(),
        )
    };
    let (m, m_out) = fold(&c.m, &at_a);
    let (n, n_out) = fold(&c.n, &at_b);
    let mut outer: Vec<Comp> = c.batch.iter().map(|&i| comp(i)).collect();
    outer.extend(m_out);
    outer.extend(n_out);
    outer.sort_by_key(|c| c.iter);
    // The result leaves UB in rows of 16 columns: its columns must be contiguous in GM.
    if write.dim_stride(&n) != Some(1) || write.dim_stride(&m).is_none() {
        return Err(not_matrix(
            stmt,
            "its result's columns are not contiguous in GM (a transposed result)",
        ));
    }
    let operand = |r: usize, at: Addressing, other: &Dim, win: bool, scale: Option<ExprId>| {
        let inner = if win {
            if at.dim_stride(other) != Some(1) {
                return Err(not_matrix(
                    stmt,
                    "the sliding-window operand's other dimension is not contiguous",
                ));
            }
            Inner::Other
        } else if at.dim_stride(&k) == Some(1) && at.dim_stride(other).is_some() {
            Inner::K
        } else if at.dim_stride(other) == Some(1) && at.dim_stride(&k).is_some() {
            Inner::Other
        } else {
            return Err(not_matrix(
                stmt,
                &format!(
                    "operand {} has no contiguous dimension",
                    program.display_element(stmt, &stmt.reads[r])
                ),
            ));
        };
        let scale = match scale {
            None => None,
            Some(e) => Some(factor(program, stmt, e)?),
        };
        Ok(Operand {
            in_gm: None,
            source: Source::Gm {
                at,
                inner,
                gathered: win,
            },
            scale,
        })
    };
    if (c.scale_a.is_some() || c.scale_b.is_some()) && (split > 0 || win_a || win_b) {
        return Err(not_matrix(
            stmt,
            "a scaled operand with reduction loops outside the Cube or a sliding window",
        ));
    }
    let a = operand(c.a, at_a, &m, win_a, c.scale_a)?;
    let b = operand(c.b, at_b, &n, win_b, c.scale_b)?;
    let band = if dom.cuts.is_empty() {
        None
    } else {
        Some(band_of(&dom, &m, &n).ok_or_else(|| {
            Error::NotYet(format!(
                "the domain {} of {} is cut by more than a diagonal between its row and column iterators",
                program.display_domain(stmt),
                stmt.name
            ))
        })?)
    };
    let write_dom = dom.over(&write_iters);
    // The accumulator's start.
    let mut zero = false;
    let mut prologue = Vec::new();
    for id in before {
        let s = &program.statements[id.index()];
        if s.write.array != acc {
            return Err(Error::NotYet(format!(
                "statement {} runs before the contraction {} and does not initialise its accumulator",
                s.name, stmt.name
            )));
        }
        let is_zero =
            matches!(&s.exprs[s.body], Expr::Literal(l) if l.value == 0.0) && s.reads.is_empty();
        if is_zero && prologue.is_empty() && !zero {
            zero = true;
        } else if zero {
            return Err(Error::NotYet(format!(
                "statement {} updates `{}` after its initialisation to 0",
                s.name,
                program.array(acc).name
            )));
        } else {
            prologue.push(id);
        }
        if domain(program, s).ok().as_ref() != Some(&write_dom)
            || subscripts(&s.write) != (0..rank).map(it).collect::<Vec<_>>()
        {
            return Err(Error::NotYet(format!(
                "statement {} does not initialise every element of `{}` once",
                s.name,
                program.array(acc).name
            )));
        }
    }
    let init = if zero {
        Init::Zero
    } else if program.array(acc).role.is_live_in() {
        Init::Gm(prologue)
    } else {
        return Err(Error::NotYet(format!(
            "the accumulator `{}` of {} is never initialised",
            program.array(acc).name,
            stmt.name
        )));
    };
    Ok(Stage {
        stmt: c.stmt,
        contraction: c.clone(),
        acc,
        m,
        n,
        k,
        outer,
        k_outer,
        a,
        b,
        write,
        write_iters,
        init,
        live_out: false,
        band,
    })
}

/// The band of a domain cut only by constraints between the row and column iterator (each
/// dimension one iterator), or `None`.
fn band_of(dom: &Domain, m: &Dim, n: &Dim) -> Option<Band> {
    let ([mi], [ni]) = (m.comps.as_slice(), n.comps.as_slice()) else {
        return None;
    };
    let mut band = Band { lo: None, hi: None };
    for &(x, y, c) in &dom.cuts {
        if x == mi.iter && y == ni.iter {
            // m - n + c >= 0: n - m <= c
            band.hi = Some(band.hi.map_or(c, |h| h.min(c)));
        } else if x == ni.iter && y == mi.iter {
            // n - m + c >= 0: n - m >= -c
            band.lo = Some(band.lo.map_or(-c, |l| l.max(-c)));
        } else {
            return None;
        }
    }
    Some(band)
}

/// A literal, or a scalar input.
fn factor(program: &Program, stmt: &Statement, e: ExprId) -> Result<Factor, Error> {
    match &stmt.exprs[e] {
        Expr::Literal(l) => Ok(Factor::Const(l.value)),
        Expr::Read(r) => {
            let a = stmt.reads[*r].array;
            if program.array(a).shape.is_empty() && program.array(a).role == ArrayRole::Input {
                Ok(Factor::Scalar(a))
            } else {
                Err(not_matrix(
                    stmt,
                    "an operand is scaled by an element of an array",
                ))
            }
        }
        _ => Err(not_matrix(stmt, "an operand is scaled by an expression")),
    }
}

/// The type the Cube multiplies: f16 when every operand is f16 in GM, f32 when every one is
/// f32 (or f64 computed in f32) and stage results feed later stages as f32.
fn operand_type(program: &Program, stages: &[Stage]) -> Result<Operands, Error> {
    let mut types = Vec::new();
    for st in stages {
        for op in [&st.a, &st.b] {
            let ty = match &op.source {
                Source::Gm { at, .. } => program.array(at.array).elem,
                Source::Stage(_) => ScalarType::F32,
            };
            types.push((ty, op));
        }
    }
    let all = |t: &[ScalarType]| types.iter().all(|(ty, _)| t.contains(ty));
    if all(&[ScalarType::F16]) {
        if types.iter().any(|(_, op)| op.scale.is_some()) {
            return Err(Error::NotYet(
                "a scaled f16 operand (the scaled value would round to f16)".into(),
            ));
        }
        Ok(Operands::F16)
    } else if all(&[ScalarType::F32, ScalarType::F64]) {
        Ok(Operands::F32)
    } else {
        Err(Error::NotYet(
            "operands of mixed f16 and f32 types (the Cube multiplies one type)".into(),
        ))
    }
}

/// Every stage but the last feeds the last one an operand, whole, and nothing else: the
/// last stage's operand becomes that stage's result.
fn chain(program: &Program, stages: &mut [Stage]) -> Result<(), Error> {
    let Some((last, producers)) = stages.split_last_mut() else {
        return Ok(());
    };
    if producers.len() > 2 {
        return Err(Error::NotYet(format!(
            "{} contractions; a chain of at most three (two feeding the last) is lowered",
            stages.len()
        )));
    }
    let stmt = &program.statements[last.stmt.index()];
    let mut used = vec![false; producers.len()];
    for (role, op) in [("A", &mut last.a), ("B", &mut last.b)] {
        let Source::Gm { at, .. } = &op.source else {
            continue;
        };
        let Some(p) = producers.iter().position(|p| p.acc == at.array) else {
            continue;
        };
        let prod = &mut producers[p];
        let pst = &program.statements[prod.stmt.index()];
        let read = if role == "A" {
            &stmt.reads[last.contraction.a]
        } else {
            &stmt.reads[last.contraction.b]
        };
        let (rows, cols) = if role == "A" {
            (&last.m, &last.k)
        } else {
            (&last.k, &last.n)
        };
        let single = |d: &Dim| (d.comps.len() == 1).then(|| d.comps[0]);
        let ok = match (single(rows), single(cols)) {
            (Some(r), Some(c)) => {
                subscripts(read) == vec![it(r.iter), it(c.iter)]
                    && prod.m.extent() == r.extent
                    && prod.n.extent() == c.extent
                    && prod.outer.is_empty()
                    && prod.k_outer.is_empty()
                    && last.outer.is_empty()
                    && last.k_outer.is_empty()
                    && matches!(prod.a.source, Source::Gm { .. })
                    && matches!(prod.b.source, Source::Gm { .. })
                    && prod.init == Init::Zero
                    && op.scale.is_none()
            }
            _ => false,
        };
        if !ok {
            return Err(Error::NotYet(format!(
                "the result of {} feeds {} other than as a whole operand matrix",
                pst.name, stmt.name
            )));
        }
        prod.live_out = program.array(prod.acc).role.is_live_out();
        used[p] = true;
        op.in_gm = Some(std::mem::replace(&mut op.source, Source::Stage(p)));
    }
    if let Some(p) = used.iter().position(|u| !u) {
        return Err(Error::NotYet(format!(
            "the result of {} does not feed the last contraction",
            program.statements[producers[p].stmt.index()].name
        )));
    }
    Ok(())
}

/// Checks one element-wise statement of the prologue or epilogue and records how its arrays
/// are held.
fn element_wise(
    program: &Program,
    st: &Stage,
    write_box: &Domain,
    id: StmtId,
    holding: &mut BTreeMap<ArrayId, Holding>,
    tiles: &mut BTreeMap<ArrayId, Addressing>,
) -> Result<(), Error> {
    let s = &program.statements[id.index()];
    let rank = write_box.extents.len();
    let ident: Vec<_> = (0..rank).map(it).collect();
    if s.depth() != rank
        || domain(program, s).ok().as_ref() != Some(write_box)
        || subscripts(&s.write) != ident
        || program.array_extents(s.write.array)
            != write_box
                .extents
                .iter()
                .map(|&e| e as i64)
                .collect::<Vec<_>>()
        || s.reduction.is_some()
    {
        return Err(Error::NotYet(format!(
            "statement {} is not element-wise over the result of the last contraction",
            s.name
        )));
    }
    if let Some(&h) = holding.get(&s.write.array) {
        if h != Holding::Tile {
            return Err(Error::NotYet(format!(
                "statement {} overwrites `{}`, which is read another way",
                s.name,
                program.array(s.write.array).name
            )));
        }
    }
    // An element-wise statement's iterator d runs along the result's subscript d.
    let single = |d: &Dim| {
        (d.comps.len() == 1)
            .then(|| st.write_iters.iter().position(|&w| w == d.comps[0].iter))
            .flatten()
    };
    for (r, read) in s.reads.iter().enumerate() {
        let arr = program.array(read.array);
        let subs = subscripts(read);
        let h = if subs == ident && holding.get(&read.array) == Some(&Holding::Tile) {
            Holding::Tile
        } else if arr.shape.is_empty() && arr.role == ArrayRole::Input {
            Holding::Scalar
        } else if arr.role == ArrayRole::Input
            && subs.len() == 1
            && single(&st.n).is_some_and(|j| subs[0] == it(j))
            && program.array_extents(read.array) == [st.n.extent() as i64]
        {
            Holding::Column
        } else if arr.role == ArrayRole::Input
            && subs.len() == 1
            && single(&st.m).is_some_and(|i| subs[0] == it(i))
            && program.array_extents(read.array) == [st.m.extent() as i64]
        {
            Holding::Row
        } else {
            return Err(Error::NotYet(format!(
                "statement {} reads {} (only the result's element, per-row and per-column input vectors and scalars are lowered)",
                s.name,
                program.display_element(s, &s.reads[r])
            )));
        };
        if let Some(&old) = holding.get(&read.array) {
            if old != h {
                return Err(Error::NotYet(format!("`{}` is used in two ways", arr.name)));
            }
        }
        holding.insert(read.array, h);
    }
    holding.insert(s.write.array, Holding::Tile);
    // Of the result's shape, so addressed as the accumulator is.
    tiles.insert(
        s.write.array,
        Addressing {
            array: s.write.array,
            ..st.write.clone()
        },
    );
    if program.array(s.write.array).elem == ScalarType::F16
        && program.array(s.write.array).role.is_live_out()
    {
        return Err(Error::NotYet(format!(
            "the f16 output `{}` (results leave UB as f32)",
            program.array(s.write.array).name
        )));
    }
    Ok(())
}

/// f64 and i32 arithmetic: the machine has neither (its i32 vectors only add, compare and
/// select), f64 is computed in f32 where the options allow it.
pub(crate) fn check_types(program: &Program, options: &Options) -> Result<(), Error> {
    for arr in &program.arrays {
        match arr.elem {
            ScalarType::F64 if !options.f64_as_f32 => {
                return Err(Error::Unsupported(format!(
                    "f64 arithmetic (`{}` is f64; the machine computes in f16 and f32 — `--npu-f32` computes in f32)",
                    arr.name
                )))
            }
            ScalarType::I32 => {
                return Err(Error::Unsupported(format!(
                    "i32 arithmetic (`{}` is i32)",
                    arr.name
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

/// An iteration domain at the program's sizes: the box `0 <= it < extents[it]` cut by the
/// constraints `x - y + c >= 0` between two iterators, `(x, y, c)` in `cuts`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Domain {
    pub extents: Vec<u64>,
    pub cuts: Vec<(usize, usize, i64)>,
}

impl Domain {
    /// The domain over the iterators `iters` (renamed to their positions there); cuts that
    /// involve another iterator are left out.
    fn over(&self, iters: &[usize]) -> Domain {
        let pos = |x: usize| iters.iter().position(|&i| i == x);
        Domain {
            extents: iters.iter().map(|&i| self.extents[i]).collect(),
            cuts: self
                .cuts
                .iter()
                .filter_map(|&(x, y, c)| Some((pos(x)?, pos(y)?, c)))
                .collect(),
        }
    }
}

/// The domain of `stmt` when it is a box from 0, possibly cut by diagonals `x - y + c >= 0`
/// (a triangular loop nest) whose bounding box starts at 0 too.
pub(crate) fn domain(program: &Program, stmt: &Statement) -> Result<Domain, Error> {
    let params = program.param_values();
    let depth = stmt.depth();
    let mut lo = vec![None::<i64>; depth];
    let mut hi = vec![None::<i64>; depth];
    let mut cuts = Vec::new();
    let not_box = || {
        Error::NotYet(format!(
            "the domain {} of {} is not a box from 0, or one cut by diagonals",
            program.display_domain(stmt),
            stmt.name
        ))
    };
    for c in &stmt.domain {
        let e = c.expr.bind_params(&params);
        let iters: Vec<(usize, i64)> = e
            .terms()
            .iter()
            .filter_map(|(v, k)| match v {
                Var::Iter(d) => Some((*d, *k)),
                // Domains have no division variables.
                Var::Param(_) | Var::Div(_) => None,
            })
            .collect();
        if c.kind != ConstraintKind::NonNegative && !iters.is_empty() {
            return Err(not_box());
        }
        match iters.as_slice() {
            [] => {}
            [(d, 1)] => {
                // it + c >= 0
                let v = -e.constant;
                lo[*d] = Some(lo[*d].map_or(v, |l: i64| l.max(v)));
            }
            [(d, -1)] => {
                // c - it >= 0: it <= c
                let v = e.constant + 1;
                hi[*d] = Some(hi[*d].map_or(v, |h: i64| h.min(v)));
            }
            [(x, 1), (y, -1)] | [(y, -1), (x, 1)] => cuts.push((*x, *y, e.constant)),
            _ => return Err(not_box()),
        }
    }
    // A lower bound of its own must be the box's 0; the cuts may imply the others.
    if lo.iter().any(|l| l.is_some_and(|l| l != 0)) {
        return Err(not_box());
    }
    for _ in 0..depth {
        for &(x, y, c) in &cuts {
            // y <= x + c and x >= y - c.
            if let Some(h) = hi[x] {
                hi[y] = Some(hi[y].map_or(h + c, |v: i64| v.min(h + c)));
            }
            if let Some(l) = lo[y] {
                lo[x] = Some(lo[x].map_or(l - c, |v: i64| v.max(l - c)));
            }
        }
    }
    let extents = lo
        .iter()
        .zip(&hi)
        .map(|(l, h)| match (l, h) {
            (Some(l), Some(h)) if *l >= 0 && *h > 0 => Ok(*h as u64),
            _ => Err(not_box()),
        })
        .collect::<Result<Vec<u64>, Error>>()?;
    Ok(Domain { extents, cuts })
}
