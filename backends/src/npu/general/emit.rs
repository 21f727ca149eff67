//! The program being built: loops, conditions and integer expressions of the AST on the scalar
//! unit, and the registers they use.

use std::collections::BTreeMap;

use polyhedral::ast::{Ast, AstCond, AstExpr};
use polyhedral::deps::Dependences;
use polyhedral::program::{ArrayId, ArrayRole, Program, ScalarType};
use polyhedral::schedule::mark::Mark;
use sim::isa::{
    self, Addr, Affine, BufferDecl, CmpOp, Cond, DType, Instr, Mem, Param, Reg, Role, SOp, Scalar,
    Stmt,
};
use sim::Span;

use super::matrix::CubeBytes;
use super::promote::{self, Boxes};
use super::vector;
use super::waits;
use crate::loops::{evaluate, Linear};
use crate::npu::{Error, NpuTarget};

/// The scalar unit's registers of each kind.
const REGS: usize = isa::REGS as usize;

/// Bytes at the start of the unified buffer that the scalar unit and one vector lane exchange
/// values through (two 32-byte blocks: an operand and a result).
pub(super) const SCRATCH: u64 = 64;

/// Where an AST loop variable lives while its loop runs.
#[derive(Clone, Debug)]
enum Loc {
    /// A `for` counter of the program text.
    Counter(String),
    /// An integer register (the loop is a `while`).
    Reg(u8),
}

/// An integer value.
#[derive(Clone, Debug)]
pub(super) enum Int {
    Const(i64),
    /// A register holding a temporary that its user frees.
    Temp(u8),
    /// A loop variable (a counter or the register of a `while`), not to be freed.
    Var(Scalar),
}

impl Int {
    pub(super) fn scalar(&self) -> Scalar {
        match self {
            Int::Const(v) => Scalar::Int(*v),
            Int::Temp(r) => Scalar::Reg(Reg::S(*r)),
            Int::Var(s) => s.clone(),
        }
    }
}

/// The machine's type of an array element (f64 is narrowed before lowering).
pub(super) fn dtype(ty: ScalarType) -> Result<DType, Error> {
    match ty {
        ScalarType::F16 => Ok(DType::F16),
        ScalarType::F32 => Ok(DType::F32),
        ScalarType::I32 => Ok(DType::I32),
        ScalarType::F64 | ScalarType::Bool => {
            Err(Error::Unsupported(format!("{ty:?} arrays").to_lowercase()))
        }
    }
}

pub(super) struct Emitter<'p> {
    pub(super) program: &'p Program,
    pub(super) target: &'p NpuTarget,
    /// The parameters' values.
    pub(super) params: Vec<i64>,
    /// The statements being written, innermost block last.
    blocks: Vec<Vec<Stmt>>,
    sfree: [bool; REGS],
    ffree: [bool; REGS],
    vars: BTreeMap<String, Loc>,
    /// The values each bound loop variable takes, lowest and highest.
    pub(super) ranges: BTreeMap<String, (i64, i64)>,
    /// The name of the unified buffer's one buffer.
    pub(super) ub: String,
    /// The bytes of it the regions use.
    pub(super) ub_size: u64,
    /// The region being lowered: the boxes its accesses go to.
    pub(super) region: Option<Boxes>,
    /// Where the region's boxes end in the unified buffer (vector temporaries follow).
    pub(super) region_end: u64,
    /// Whether the tiles of the one matrix mark below the loops being written follow each
    /// other with nothing else between them (flags order them; see [`Emitter::tiles_only`]).
    pub(super) tiles_ordered: bool,
    /// Counters of the copies' loops written so far (for fresh names).
    counters: usize,
    /// The bytes of L1 and the L0 buffers the matrix tiles use.
    pub(super) cube: CubeBytes,
    /// The temporaries every read of which reads a value the kernel wrote, with the number
    /// of statement instances of the AST that access them.
    written_first: BTreeMap<ArrayId, usize>,
    /// The sequential loops around what is being written (outside any region).
    serial: usize,
}

impl<'p> Emitter<'p> {
    /// The program of `ast`, a loop AST of `program`.
    pub(super) fn lower(
        program: &'p Program,
        deps: &Dependences,
        ast: &Ast,
        target: &'p NpuTarget,
    ) -> Result<isa::Program, Error> {
        let mut ub = "ub".to_string();
        while program.array_by_name(&ub).is_some() {
            ub.push('_');
        }
        let mut e = Emitter {
            program,
            target,
            params: program.param_values(),
            blocks: vec![Vec::new()],
            sfree: [true; REGS],
            ffree: [true; REGS],
            vars: BTreeMap::new(),
            ranges: BTreeMap::new(),
            ub,
            ub_size: SCRATCH,
            region: None,
            region_end: SCRATCH,
            tiles_ordered: false,
            counters: 0,
            cube: CubeBytes::default(),
            written_first: BTreeMap::new(),
            serial: 0,
        };
        let settled = crate::loops::settle(ast, &e.params);
        let ast = &settled;
        e.written_first = program
            .arrays
            .iter()
            .enumerate()
            .map(|(k, _)| ArrayId(k as u32))
            .filter(|&a| program.array(a).role == ArrayRole::Temporary)
            .filter(|&a| deps.live_in.iter().all(|l| l.array != a))
            .map(|a| (a, instances_accessing(program, ast, a)))
            .collect();
        let blockdim = e.on_cores(ast)?;
        let mut body = e.blocks.pop().unwrap_or_default();
        waits::place(&mut body);
        let mut used: BTreeMap<ArrayId, bool> = BTreeMap::new();
        for (a, _, write) in crate::loops::accesses(program, ast) {
            *used.entry(a).or_default() |= write;
        }
        let mut params = Vec::new();
        for (&id, &written) in &used {
            let array = program.array(id);
            let shape: Vec<u64> = program
                .array_extents(id)
                .iter()
                .map(|&x| x.max(1) as u64)
                .collect();
            params.push(Param {
                name: array.name.clone(),
                dtype: dtype(array.elem)?,
                shape: if shape.is_empty() { vec![1] } else { shape },
                role: role(program, id, written),
                span: Span::default(),
            });
        }
        Ok(isa::Program {
            name: crate::npu::cube::kernel_name(&program.name),
            blockdim,
            params,
            buffers: e.buffers(),
            body,
        })
    }

    /// The program's buffers: the unified buffer, and L1 and the L0 buffers where matrix
    /// tiles use them.
    fn buffers(&self) -> Vec<BufferDecl> {
        let c = self.cube;
        [
            (Mem::Ub, self.ub_size),
            (Mem::L1, c.l1),
            (Mem::L0a, c.l0a),
            (Mem::L0b, c.l0b),
            (Mem::L0c, c.l0c),
        ]
        .into_iter()
        .filter(|&(mem, size)| size > 0 || mem == Mem::Ub)
        .map(|(mem, size)| BufferDecl {
            name: self.buffer_name(mem),
            mem,
            size,
            addr: None,
            span: Span::default(),
        })
        .collect()
    }

    /// The name of the program's one buffer in `mem`: the memory's, with underscores added
    /// until no GM tensor has it.
    pub(super) fn buffer_name(&self, mem: Mem) -> String {
        let mut name = match mem {
            Mem::L1 => "l1".to_string(),
            Mem::L0a => "l0a".to_string(),
            Mem::L0b => "l0b".to_string(),
            Mem::L0c => "l0c".to_string(),
            _ => return self.ub.clone(),
        };
        while self.program.array_by_name(&name).is_some() {
            name.push('_');
        }
        name
    }

    pub(super) fn push(&mut self, instr: Instr) {
        self.push_stmt(Stmt::Instr {
            instr: Box::new(instr),
            span: Span::default(),
        });
    }

    pub(super) fn push_stmt(&mut self, stmt: Stmt) {
        if let Some(b) = self.blocks.last_mut() {
            b.push(stmt);
        }
    }

    /// The statements `f` writes, as a block of their own.
    pub(super) fn nested(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<(), Error>,
    ) -> Result<Vec<Stmt>, Error> {
        self.blocks.push(Vec::new());
        let r = f(self);
        let block = self.blocks.pop().unwrap_or_default();
        r.map(|()| block)
    }

    /// `if lhs op rhs { then } else { otherwise }`.
    pub(super) fn branch(&mut self, lhs: Scalar, op: CmpOp, rhs: Scalar, then: Vec<Stmt>) {
        self.branch_else(lhs, op, rhs, then, Vec::new());
    }

    pub(super) fn branch_else(
        &mut self,
        lhs: Scalar,
        op: CmpOp,
        rhs: Scalar,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    ) {
        self.push_stmt(Stmt::If {
            cond: Cond { lhs, op, rhs },
            then,
            otherwise,
            span: Span::default(),
        });
    }

    /// `while r <= last { body; r += step }` over integer register `r`.
    pub(super) fn stepping(
        &mut self,
        r: u8,
        step: i64,
        last: Scalar,
        body: impl FnOnce(&mut Self) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let block = self.nested(|e| {
            body(e)?;
            e.push(Instr::SBin {
                op: SOp::Add,
                dst: Reg::S(r),
                a: Scalar::Reg(Reg::S(r)),
                b: Scalar::Int(step),
            });
            Ok(())
        })?;
        self.push_stmt(Stmt::While {
            cond: Cond {
                lhs: Scalar::Reg(Reg::S(r)),
                op: CmpOp::Le,
                rhs: last,
            },
            body: block,
            span: Span::default(),
        });
        Ok(())
    }

    /// `for var in start..end { body }` over a fresh counter, which `body` receives.
    pub(super) fn counted(
        &mut self,
        end: i64,
        body: impl FnOnce(&mut Self, &str) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let var = format!("k{}", self.counters);
        self.counters += 1;
        let block = self.nested(|e| body(e, &var))?;
        self.push_stmt(Stmt::For {
            var,
            start: 0,
            end,
            step: 1,
            body: block,
            span: Span::default(),
        });
        Ok(())
    }

    pub(super) fn sreg(&mut self) -> Result<u8, Error> {
        Self::take(&mut self.sfree, "integer", &self.program.name)
    }

    pub(super) fn freg(&mut self) -> Result<u8, Error> {
        Self::take(&mut self.ffree, "floating-point", &self.program.name)
    }

    fn take(free: &mut [bool; REGS], kind: &str, kernel: &str) -> Result<u8, Error> {
        let Some(r) = free.iter().position(|f| *f) else {
            return Err(Error::NotYet(format!(
                "`{kernel}` needs more than the scalar unit's {REGS} {kind} registers"
            )));
        };
        free[r] = false;
        Ok(r as u8)
    }

    pub(super) fn free_s(&mut self, r: u8) {
        self.sfree[r as usize] = true;
    }

    pub(super) fn free_f(&mut self, r: u8) {
        self.ffree[r as usize] = true;
    }

    pub(super) fn release(&mut self, v: Int) {
        if let Int::Temp(r) = v {
            self.free_s(r);
        }
    }

    fn node(&mut self, ast: &Ast) -> Result<(), Error> {
        match ast {
            Ast::Block(items) => {
                let planned = self
                    .region
                    .is_none()
                    .then(|| promote::plan_block(self, ast))
                    .flatten();
                match planned {
                    Some(boxes) => promote::region(self, ast, boxes),
                    None => items.iter().try_for_each(|a| self.node(a)),
                }
            }
            Ast::Mark {
                mark: Mark::Matrix(m),
                body,
            } if self.region.is_none() => {
                if self.matrix(m, body)? {
                    return Ok(());
                }
                self.node(body)
            }
            Ast::Mark { body, .. } => self.node(body),
            Ast::For { .. } | Ast::User { .. } if self.region.is_none() => {
                if let Some(boxes) = promote::plan(self, ast) {
                    return promote::region(self, ast, boxes);
                }
                match ast {
                    Ast::For {
                        var,
                        lower,
                        upper,
                        step,
                        body,
                        annotations,
                    } => {
                        let serial = usize::from(!annotations.parallel);
                        self.serial += serial;
                        let r = self
                            .tiles_only(body, |e| e.scalar_loop(var, lower, upper, *step, body));
                        self.serial -= serial;
                        r
                    }
                    _ => Err(Error::NotYet(format!(
                        "a statement instance of `{}` whose operands do not fit the unified \
                         buffer",
                        self.program.name
                    ))),
                }
            }
            Ast::For {
                var,
                lower,
                upper,
                step,
                body,
                annotations,
            } => {
                if *step == 1
                    && annotations.parallel
                    && self.vector_rows(var, lower, upper, body)?
                {
                    return Ok(());
                }
                if *step == 1
                    && self.vector_loop(var, lower, upper, body, !annotations.vectorizable)?
                {
                    return Ok(());
                }
                if annotations.vectorizable && *step == 1 {
                    if let Some(parts) = vector::distribute(var, lower, upper, body) {
                        return parts.iter().try_for_each(|a| self.node(a));
                    }
                }
                self.scalar_loop(var, lower, upper, *step, body)
            }
            Ast::If {
                conds,
                then,
                otherwise,
            } => self.if_node(conds, then, otherwise.as_deref()),
            Ast::User { stmt, args } => self.statement(*stmt, args),
        }
    }

    /// Writes loops with `write`; where `body` holds one matrix mark and nothing else, its
    /// tiles run one after the other with nothing between them, so what ran before is waited
    /// for once, here, and the tiles order their own pipes with flags.
    pub(super) fn tiles_only(
        &mut self,
        body: &Ast,
        write: impl FnOnce(&mut Self) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if self.tiles_ordered || matrix_marks(body) != Some(1) {
            return write(self);
        }
        self.push(Instr::Barrier { pipe: None });
        self.tiles_ordered = true;
        let r = write(self);
        self.tiles_ordered = false;
        r
    }

    pub(super) fn region_body(&mut self, ast: &Ast) -> Result<(), Error> {
        self.node(ast)
    }

    /// Whether `array` lives in one instance of the region `ast` alone, so that its box needs
    /// no copies: a temporary every read of which reads a value the kernel wrote, all of whose
    /// accesses lie in the region, with only parallel loops around it. Those loops carry no
    /// dependence, so the writer of every value the region reads runs in the same instance of
    /// it, before the read; nothing reads the array after the kernel.
    pub(super) fn lives_in_region(&self, array: ArrayId, ast: &Ast) -> bool {
        self.serial == 0
            && self
                .written_first
                .get(&array)
                .is_some_and(|&n| n == instances_accessing(self.program, ast, array))
    }

    /// A loop on the scalar unit.
    pub(super) fn scalar_loop(
        &mut self,
        var: &str,
        lower: &AstExpr,
        upper: &AstExpr,
        step: i64,
        body: &Ast,
    ) -> Result<(), Error> {
        let range = self.loop_range(lower, upper);
        if range.1 < range.0 {
            return Ok(());
        }
        let lo = self.int(lower)?;
        let hi = self.int(upper)?;
        self.ranges.insert(var.to_string(), range);
        match (&lo, &hi) {
            (Int::Const(a), Int::Const(b)) => {
                let name = counter_name(var);
                self.vars
                    .insert(var.to_string(), Loc::Counter(name.clone()));
                let block = self.nested(|e| e.node(body))?;
                self.push_stmt(Stmt::For {
                    var: name,
                    start: *a,
                    end: b + 1,
                    step,
                    body: block,
                    span: Span::default(),
                });
            }
            _ => {
                let r = self.sreg()?;
                self.push(Instr::Mov {
                    dst: Reg::S(r),
                    src: lo.scalar(),
                });
                self.release(lo.clone());
                self.vars.insert(var.to_string(), Loc::Reg(r));
                self.stepping(r, step, hi.scalar(), |e| e.node(body))?;
                self.free_s(r);
                self.release(hi);
            }
        }
        self.vars.remove(var);
        self.ranges.remove(var);
        Ok(())
    }

    fn if_node(
        &mut self,
        conds: &[AstCond],
        then: &Ast,
        otherwise: Option<&Ast>,
    ) -> Result<(), Error> {
        let then = self.nested(|e| e.node(then))?;
        let otherwise = match otherwise {
            Some(o) => self.nested(|e| e.node(o))?,
            None => Vec::new(),
        };
        if let [cond] = conds {
            let (v, op) = self.cond_value(cond)?;
            self.branch_else(v.scalar(), op, Scalar::Int(0), then, otherwise);
            self.release(v);
            return Ok(());
        }
        // Every condition clears the flag when it fails.
        let flag = self.sreg()?;
        self.push(Instr::Mov {
            dst: Reg::S(flag),
            src: Scalar::Int(1),
        });
        for cond in conds {
            let (v, op) = self.cond_value(cond)?;
            let clear = vec![Stmt::Instr {
                instr: Box::new(Instr::Mov {
                    dst: Reg::S(flag),
                    src: Scalar::Int(0),
                }),
                span: Span::default(),
            }];
            self.branch(v.scalar(), negate(op), Scalar::Int(0), clear);
            self.release(v);
        }
        self.if_set(flag, then, otherwise);
        Ok(())
    }

    /// `if flag == 1 { then } else { otherwise }`, freeing the flag's register.
    pub(super) fn if_set(&mut self, flag: u8, then: Vec<Stmt>, otherwise: Vec<Stmt>) {
        self.branch_else(
            Scalar::Reg(Reg::S(flag)),
            CmpOp::Eq,
            Scalar::Int(1),
            then,
            otherwise,
        );
        self.free_s(flag);
    }

    /// The range of a loop's variable from its bounds (unbounded where they are unknown).
    pub(super) fn loop_range(&self, lower: &AstExpr, upper: &AstExpr) -> (i64, i64) {
        match (self.interval(lower), self.interval(upper)) {
            (Some((a, _)), Some((_, b))) => (a, b),
            _ => (i64::MIN / 4, i64::MAX / 4),
        }
    }

    /// The value of `e` in an integer register of its own, which the caller frees.
    pub(super) fn held(&mut self, e: &AstExpr) -> Result<u8, Error> {
        let v = self.int(e)?;
        let r = self.sreg()?;
        self.push(Instr::Mov {
            dst: Reg::S(r),
            src: v.scalar(),
        });
        self.release(v);
        Ok(r)
    }

    /// The value a condition compares with 0, and how.
    fn cond_value(&mut self, cond: &AstCond) -> Result<(Int, CmpOp), Error> {
        Ok(match cond {
            AstCond::NonNegative(e) => (self.int(e)?, CmpOp::Ge),
            AstCond::Zero(e) => (self.int(e)?, CmpOp::Eq),
            AstCond::Divisible(e, k) => {
                let m = AstExpr::Mod(Box::new(e.clone()), *k);
                (self.int(&m)?, CmpOp::Eq)
            }
        })
    }

    /// The lowest and highest values of `e` over the bound loops' ranges.
    pub(super) fn interval(&self, e: &AstExpr) -> Option<(i64, i64)> {
        let iv = |x: &AstExpr| self.interval(x);
        Some(match e {
            AstExpr::Int(v) => (*v, *v),
            AstExpr::Var(v) => *self.ranges.get(v)?,
            AstExpr::Param(p) => {
                let v = *self.params.get(p.index())?;
                (v, v)
            }
            AstExpr::Add(a, b) => {
                let ((a0, a1), (b0, b1)) = (iv(a)?, iv(b)?);
                (a0.checked_add(b0)?, a1.checked_add(b1)?)
            }
            AstExpr::Mul(k, a) => {
                let (a0, a1) = iv(a)?;
                let (x, y) = (k.checked_mul(a0)?, k.checked_mul(a1)?);
                (x.min(y), x.max(y))
            }
            AstExpr::FloorDiv(a, k) => {
                let (a0, a1) = iv(a)?;
                (a0.div_euclid(*k), a1.div_euclid(*k))
            }
            AstExpr::CeilDiv(a, k) => {
                let (a0, a1) = iv(a)?;
                (-(-a0).div_euclid(*k), -(-a1).div_euclid(*k))
            }
            AstExpr::Mod(_, k) => (0, k - 1),
            AstExpr::Min(items) => {
                let r: Vec<(i64, i64)> = items.iter().map(iv).collect::<Option<_>>()?;
                (r.iter().map(|x| x.0).min()?, r.iter().map(|x| x.1).min()?)
            }
            AstExpr::Max(items) => {
                let r: Vec<(i64, i64)> = items.iter().map(iv).collect::<Option<_>>()?;
                (r.iter().map(|x| x.0).max()?, r.iter().map(|x| x.1).max()?)
            }
        })
    }

    /// The text's name of a bound loop variable.
    fn var_name(&self, v: &str) -> Result<String, Error> {
        match self.vars.get(v) {
            Some(Loc::Counter(c)) => Ok(c.clone()),
            Some(Loc::Reg(r)) => Ok(format!("s{r}")),
            None => Err(Error::NotYet(format!(
                "the loop variable `{v}` used outside its loop"
            ))),
        }
    }

    /// The value of an integer expression of the loop variables and parameters.
    /// `e` without the items of its outermost minima and maxima that never decide them (an
    /// item of a minimum that is never below another one, at the loops' ranges).
    pub(super) fn settled(&self, e: &AstExpr) -> AstExpr {
        let (items, min) = match e {
            AstExpr::Min(items) => (items, true),
            AstExpr::Max(items) => (items, false),
            e => return e.clone(),
        };
        let items: Vec<AstExpr> = items.iter().map(|x| self.settled(x)).collect();
        // `a` never decides against `b`: a ≥ b everywhere for a minimum, a ≤ b for a maximum.
        let never = |a: &AstExpr, b: &AstExpr| {
            let d = AstExpr::plus(a.clone(), AstExpr::mul(-1, b.clone()));
            self.interval(&d)
                .is_some_and(|(lo, hi)| if min { lo >= 0 } else { hi <= 0 })
        };
        let mut kept: Vec<AstExpr> = Vec::new();
        for (i, a) in items.iter().enumerate() {
            // Of two that are always equal, the first stays.
            let beaten = items
                .iter()
                .enumerate()
                .any(|(j, b)| j != i && never(a, b) && !(j > i && never(b, a)));
            if !beaten {
                kept.push(a.clone());
            }
        }
        if kept.is_empty() {
            kept = items;
        }
        if min {
            AstExpr::min(kept)
        } else {
            AstExpr::max(kept)
        }
    }

    pub(super) fn int(&mut self, e: &AstExpr) -> Result<Int, Error> {
        if let Some(v) = evaluate(e, Some(&self.params), &BTreeMap::new()) {
            return Ok(Int::Const(v));
        }
        match e {
            AstExpr::Int(v) => Ok(Int::Const(*v)),
            AstExpr::Param(p) => Ok(Int::Const(self.params[p.index()])),
            AstExpr::Var(v) => Ok(Int::Var(match self.vars.get(v.as_str()) {
                Some(Loc::Reg(r)) => Scalar::Reg(Reg::S(*r)),
                _ => Scalar::Var(self.var_name(v)?),
            })),
            AstExpr::Add(a, b) => {
                let (a, b) = (self.int(a)?, self.int(b)?);
                self.sbin(SOp::Add, a, b)
            }
            AstExpr::Mul(k, a) => {
                let a = self.int(a)?;
                self.sbin(SOp::Mul, a, Int::Const(*k))
            }
            AstExpr::FloorDiv(a, k) => {
                let a = self.int(a)?;
                let q = self.floor_div(&a, *k)?;
                self.release(a);
                Ok(q)
            }
            AstExpr::CeilDiv(a, k) => {
                // ceil(a / k) = -floor(-a / k)
                let a = self.int(a)?;
                let neg = self.sbin(SOp::Sub, Int::Const(0), a)?;
                let q = self.floor_div(&neg, *k)?;
                self.release(neg);
                self.sbin(SOp::Sub, Int::Const(0), q)
            }
            AstExpr::Mod(a, k) => {
                let a = self.int(a)?;
                let q = self.floor_div(&a, *k)?;
                let qk = self.sbin(SOp::Mul, q, Int::Const(*k))?;
                self.sbin(SOp::Sub, a, qk)
            }
            AstExpr::Min(_) | AstExpr::Max(_) => {
                let settled = self.settled(e);
                let items = match &settled {
                    AstExpr::Min(items) | AstExpr::Max(items) => items.clone(),
                    single => return self.int(single),
                };
                let op = if matches!(settled, AstExpr::Min(_)) {
                    SOp::Min
                } else {
                    SOp::Max
                };
                let mut acc = self.int(&items[0])?;
                for x in &items[1..] {
                    let x = self.int(x)?;
                    acc = self.sbin(op, acc, x)?;
                }
                Ok(acc)
            }
        }
    }

    /// `floor(a / k)` for `k > 0`: the machine's division truncates, so one less where the
    /// quotient times `k` passes `a`.
    fn floor_div(&mut self, a: &Int, k: i64) -> Result<Int, Error> {
        let q = self.sreg()?;
        self.push(Instr::SBin {
            op: SOp::Div,
            dst: Reg::S(q),
            a: a.scalar(),
            b: Scalar::Int(k),
        });
        let t = self.sreg()?;
        self.push(Instr::SBin {
            op: SOp::Mul,
            dst: Reg::S(t),
            a: Scalar::Reg(Reg::S(q)),
            b: Scalar::Int(k),
        });
        let dec = vec![Stmt::Instr {
            instr: Box::new(Instr::SBin {
                op: SOp::Sub,
                dst: Reg::S(q),
                a: Scalar::Reg(Reg::S(q)),
                b: Scalar::Int(1),
            }),
            span: Span::default(),
        }];
        self.branch(a.scalar(), CmpOp::Lt, Scalar::Reg(Reg::S(t)), dec);
        self.free_s(t);
        Ok(Int::Temp(q))
    }

    /// `a op b` in an integer register (one of the operands' when it is a temporary).
    pub(super) fn sbin(&mut self, op: SOp, a: Int, b: Int) -> Result<Int, Error> {
        let dst = match (&a, &b) {
            (Int::Temp(r), _) => *r,
            (_, Int::Temp(r)) => *r,
            _ => self.sreg()?,
        };
        self.push(Instr::SBin {
            op,
            dst: Reg::S(dst),
            a: a.scalar(),
            b: b.scalar(),
        });
        for v in [a, b] {
            if let Int::Temp(r) = v {
                if r != dst {
                    self.free_s(r);
                }
            }
        }
        Ok(Int::Temp(dst))
    }

    /// Adds `scale · e` to `offset`: its affine part as terms over the loop variables, the rest
    /// computed into a register that is pushed on `temps` for the caller to free.
    pub(super) fn add_scaled(
        &mut self,
        offset: &mut Affine,
        e: &AstExpr,
        scale: i64,
        temps: &mut Vec<u8>,
    ) -> Result<(), Error> {
        if let Some(l) = Linear::of(e) {
            offset.constant += scale * l.constant;
            for (p, c) in &l.params {
                offset.constant += scale * c * self.params[*p as usize];
            }
            for (v, c) in &l.vars {
                add_term(offset, self.var_name(v)?, scale * c);
            }
            return Ok(());
        }
        match self.int(e)? {
            Int::Const(v) => offset.constant += scale * v,
            Int::Var(Scalar::Var(name)) => add_term(offset, name, scale),
            Int::Var(Scalar::Reg(Reg::S(r))) => add_term(offset, format!("s{r}"), scale),
            Int::Temp(r) => {
                add_term(offset, format!("s{r}"), scale);
                temps.push(r);
            }
            Int::Var(other) => {
                return Err(Error::NotYet(format!("a subscript computed as {other:?}")))
            }
        }
        Ok(())
    }

    /// Binds a loop variable to an integer register while its loop is written.
    pub(super) fn bind(&mut self, var: &str, r: u8, range: (i64, i64)) {
        self.vars.insert(var.to_string(), Loc::Reg(r));
        self.ranges.insert(var.to_string(), range);
    }

    pub(super) fn unbind(&mut self, var: &str) {
        self.vars.remove(var);
        self.ranges.remove(var);
    }

    /// Where vector temporaries may start in the unified buffer.
    pub(super) fn vector_temps_start(&self) -> u64 {
        self.region_end
    }

    /// An address in the unified buffer.
    pub(super) fn ub_at(&self, offset: Affine) -> Addr {
        Addr {
            buffer: self.ub.clone(),
            offset,
            span: Span::default(),
        }
    }
}

/// The role of an array's GM tensor. Written boxes are copied in before their region runs, so
/// an output starts with the caller's contents (`inout`) unless every element of it is written
/// (`out`, as a temporary, whose GM tensor starts zeroed).
fn role(program: &Program, id: ArrayId, written: bool) -> Role {
    if !written {
        return Role::In;
    }
    match program.array(id).role {
        ArrayRole::Temporary => Role::Out,
        ArrayRole::Output if crate::npu::output_role(program, id) == "out" => Role::Out,
        _ => Role::InOut,
    }
}

/// Adds `c · name` to an offset, merging with a term of the same name.
/// The matrix marks of `ast`, or `None` where a statement instance lies outside them.
fn matrix_marks(ast: &Ast) -> Option<usize> {
    match ast {
        Ast::Mark {
            mark: Mark::Matrix(_),
            ..
        } => Some(1),
        Ast::Mark { body, .. } | Ast::For { body, .. } => matrix_marks(body),
        Ast::Block(items) => items.iter().try_fold(0, |n, a| Some(n + matrix_marks(a)?)),
        Ast::If {
            then, otherwise, ..
        } => Some(matrix_marks(then)? + otherwise.as_deref().map_or(Some(0), matrix_marks)?),
        Ast::User { .. } => None,
    }
}

pub(super) fn add_term(offset: &mut Affine, name: String, c: i64) {
    match offset.terms.iter_mut().find(|(n, _)| *n == name) {
        Some(t) => t.1 += c,
        None => offset.terms.push((name, c)),
    }
    offset.terms.retain(|(_, c)| *c != 0);
}

fn negate(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Eq => CmpOp::Ne,
        CmpOp::Ne => CmpOp::Eq,
        CmpOp::Lt => CmpOp::Ge,
        CmpOp::Ge => CmpOp::Lt,
        CmpOp::Le => CmpOp::Gt,
        CmpOp::Gt => CmpOp::Le,
    }
}

/// The text's name of the counter of an AST loop: the AST's own unless it reads as a register
/// or `block_idx`.
fn counter_name(var: &str) -> String {
    let reg = |p: char| {
        var.strip_prefix(p)
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    };
    if reg('s') || reg('f') || var == "block_idx" || var.starts_with('k') {
        format!("v_{var}")
    } else {
        var.to_string()
    }
}

/// The statement instances of `ast` (its `User` nodes) that access `array`.
fn instances_accessing(program: &Program, ast: &Ast, array: ArrayId) -> usize {
    let mut n = 0;
    ast.walk(&mut |a| {
        if let Ast::User { stmt, .. } = a {
            let s = &program.statements[stmt.index()];
            n += usize::from(s.write.array == array || s.reads.iter().any(|r| r.array == array));
        }
    });
    n
}
