//! The reference interpreter: runs a [`Program`] in its original order.
//!
//! It is the oracle every target is checked against, so it is written to be obviously correct
//! rather than fast: statement instances run one at a time, in the order of the 2d+1 original
//! schedule, and every array access is bounds-checked.
//!
//! Values are held as `f64` and rounded to their expression's type after every operation. For
//! `+ - * /` and `sqrt` this gives exactly the result of computing in the narrower type, because
//! `f64` has more than twice the precision of `f32` and `f16` plus two bits; `f16` rounding is
//! round-to-nearest-even (the `half` crate). `i32` arithmetic wraps as two's complement; integer
//! division truncates, as in C.

use std::collections::BTreeMap;

use crate::program::{
    ArrayId, ArrayRole, BinaryOp, Block, ConstraintKind, Expr, ExprArena, ExprId, Function,
    FunctionId, MathFn, Program, ScalarType, Statement, Stmt, StmtId, UnaryOp, Var,
};

/// The contents of every array of a program, indexed by [`ArrayId`], row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Memory {
    pub arrays: Vec<Vec<f64>>,
}

impl Memory {
    pub fn array(&self, id: ArrayId) -> &[f64] {
        &self.arrays[id.index()]
    }
}

/// Why a run stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InterpError {
    #[error("{stmt} accesses {array}[{index}] outside its extents [{extents}]")]
    OutOfBounds {
        stmt: String,
        array: String,
        index: String,
        extents: String,
    },
    #[error("{stmt} divides an integer by zero")]
    DivisionByZero { stmt: String },
    #[error("the loop over `{iter}` around {stmt} has no {which} bound")]
    Unbounded {
        stmt: String,
        iter: String,
        which: &'static str,
    },
    #[error("function `{function}` ran more than {limit} loop iterations in one call")]
    NonTerminating { function: String, limit: u64 },
    #[error("the statements' positions do not form a loop nest ({0})")]
    BadPositions(String),
    #[error("invalid AST: {0}")]
    InvalidAst(String),
    #[error("the AST executes {stmt}[{point}], which is outside its domain")]
    OutsideDomain { stmt: String, point: String },
}

/// Deterministic pseudo-random contents for every array that is not a temporary; temporaries
/// start as zeros.
///
/// The value of an element depends only on the seed, the array's name and element type, and the
/// element's flat index, so two programs with the same arrays (say, a `.pf` kernel and its C
/// version) get the same inputs whatever order they declare them in. Floats are uniform in
/// [-1, 1) rounded to the element type; `i32`s are uniform in [-16, 16).
pub fn random_inputs(program: &Program, seed: u64) -> Memory {
    let arrays = program
        .arrays
        .iter()
        .enumerate()
        .map(|(k, a)| {
            let len = program.array_len(ArrayId(k as u32));
            if a.role == ArrayRole::Temporary {
                return vec![0.0; len];
            }
            let base = splitmix64(seed ^ fnv1a(a.name.as_bytes()));
            (0..len as u64)
                .map(|i| {
                    let bits = splitmix64(base ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    match a.elem {
                        ScalarType::I32 => ((bits >> 59) as i64 - 16) as f64,
                        ty => {
                            // 53 random bits → [0, 1) exactly, then [-1, 1).
                            let unit = (bits >> 11) as f64 / (1u64 << 53) as f64;
                            round(ty, 2.0 * unit - 1.0)
                        }
                    }
                })
                .collect()
        })
        .collect();
    Memory { arrays }
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Rounds `x` to the nearest value of type `ty` (integers wrap to 32 bits; booleans are 0/1).
pub fn round(ty: ScalarType, x: f64) -> f64 {
    match ty {
        ScalarType::F64 => x,
        ScalarType::F32 => x as f32 as f64,
        ScalarType::F16 => round_f16(x),
        ScalarType::I32 => wrap_i32(x as i64),
        ScalarType::Bool => (x != 0.0) as u8 as f64,
    }
}

/// Round-to-nearest-even to `f16`, computed in `f64`: scaling by a power of two and rounding to
/// an integer are exact, so this is the correctly rounded result (`half`'s software conversion
/// gives the same, several times slower; a test compares them).
fn round_f16(x: f64) -> f64 {
    /// The smallest normal `f16`, 2^-14.
    const MIN_NORMAL: f64 = 6.103_515_625e-5;
    /// Halfway between the largest finite `f16` (65504) and the next power of two: from here on,
    /// values round to infinity.
    const OVERFLOW: f64 = 65520.0;
    if !x.is_finite() {
        return x;
    }
    let a = x.abs();
    if a >= OVERFLOW {
        return f64::INFINITY.copysign(x);
    }
    let exponent = if a < MIN_NORMAL {
        -14
    } else {
        ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023
    };
    let ulp = f64::powi(2.0, exponent - 10);
    (x / ulp).round_ties_even() * ulp
}

fn wrap_i32(x: i64) -> f64 {
    x as i32 as f64
}

/// Counts of what a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Statement instances executed.
    pub instances: u64,
}

/// Runs `program` on `memory` in the original order.
pub fn run(program: &Program, memory: &mut Memory) -> Result<RunStats, InterpError> {
    let tree = build_nest(program)?;
    let plans: Vec<StmtPlan> = program
        .statements
        .iter()
        .map(|s| StmtPlan::new(program, s, &tree))
        .collect();
    let mut machine = Machine {
        program,
        params: program.param_values(),
        plans,
        memory,
        iters: Vec::new(),
        stats: RunStats::default(),
    };
    machine.run_nodes(&tree)?;
    Ok(machine.stats)
}

/// The original loop nest, rebuilt from the statements' positions.
#[derive(Debug)]
pub(crate) enum Node {
    /// A loop over the iterator at `depth`, shared by every statement below it.
    Loop {
        depth: usize,
        body: Vec<Node>,
    },
    Stmt(StmtId),
}

pub(crate) fn build_nest(program: &Program) -> Result<Vec<Node>, InterpError> {
    let all: Vec<StmtId> = program.statement_ids().collect();
    build_level(program, &all, 0)
}

fn build_level(
    program: &Program,
    stmts: &[StmtId],
    depth: usize,
) -> Result<Vec<Node>, InterpError> {
    let mut groups: BTreeMap<usize, Vec<StmtId>> = BTreeMap::new();
    for &s in stmts {
        groups
            .entry(program.statements[s.index()].position[depth])
            .or_default()
            .push(s);
    }
    let mut nodes = Vec::new();
    for (_, group) in groups {
        let stmt = |s: StmtId| &program.statements[s.index()];
        match group.as_slice() {
            [single] if stmt(*single).depth() == depth => nodes.push(Node::Stmt(*single)),
            _ => {
                if let Some(s) = group.iter().find(|&&s| stmt(s).depth() == depth) {
                    return Err(InterpError::BadPositions(format!(
                        "{} shares position {} at depth {depth} with another statement",
                        stmt(*s).name,
                        stmt(*s).position[depth]
                    )));
                }
                nodes.push(Node::Loop {
                    depth,
                    body: build_level(program, &group, depth + 1)?,
                });
            }
        }
    }
    Ok(nodes)
}

/// What the interpreter precomputes for one statement.
struct StmtPlan {
    /// Indices of domain constraints that the loop bounds do not already enforce.
    guards: Vec<usize>,
    /// Types of the body's expressions.
    types: Vec<ScalarType>,
}

impl StmtPlan {
    fn new(program: &Program, stmt: &Statement, tree: &[Node]) -> StmtPlan {
        // A loop whose subtree holds only this statement runs exactly the statement's bounds
        // at that depth; constraints whose innermost iterator is such a loop's need no check.
        let mut exclusive = vec![false; stmt.depth()];
        mark_exclusive(program, tree, stmt, &mut exclusive);
        let guards = stmt
            .domain
            .iter()
            .enumerate()
            .filter(|(_, c)| match c.expr.innermost_iter() {
                Some(d) => !exclusive[d],
                None => true,
            })
            .map(|(k, _)| k)
            .collect();
        StmtPlan {
            guards,
            types: body_types(program, stmt),
        }
    }
}

/// Sets `exclusive[d]` when the loop at depth `d` enclosing `stmt` encloses nothing else.
/// Returns whether `stmt` is in `nodes`, and how many statements they hold.
fn mark_exclusive(
    program: &Program,
    nodes: &[Node],
    stmt: &Statement,
    exclusive: &mut [bool],
) -> (bool, usize) {
    let mut found = false;
    let mut count = 0;
    for node in nodes {
        match node {
            Node::Stmt(s) => {
                count += 1;
                found |= std::ptr::eq(&program.statements[s.index()], stmt);
            }
            Node::Loop { depth, body } => {
                let (inner_found, inner_count) = mark_exclusive(program, body, stmt, exclusive);
                if inner_found {
                    exclusive[*depth] = inner_count == 1;
                }
                found |= inner_found;
                count += inner_count;
            }
        }
    }
    (found, count)
}

struct Machine<'a> {
    program: &'a Program,
    params: Vec<i64>,
    plans: Vec<StmtPlan>,
    memory: &'a mut Memory,
    iters: Vec<i64>,
    stats: RunStats,
}

/// At most this many loop iterations in one call of a scalar function.
const FUNCTION_LOOP_LIMIT: u64 = 100_000_000;

impl Machine<'_> {
    fn run_nodes(&mut self, nodes: &[Node]) -> Result<(), InterpError> {
        for node in nodes {
            match node {
                Node::Stmt(s) => self.run_statement(*s)?,
                Node::Loop { depth, body } => {
                    let (lo, hi) = self.loop_bounds(*depth, body)?;
                    self.iters.truncate(*depth);
                    self.iters.push(lo);
                    let mut i = lo;
                    while i <= hi {
                        self.iters[*depth] = i;
                        self.run_nodes(body)?;
                        i += 1;
                    }
                    self.iters.truncate(*depth);
                }
            }
        }
        Ok(())
    }

    /// The union of the bounds every statement below a loop has on its iterator, given the
    /// values of the outer iterators.
    fn loop_bounds(&self, depth: usize, body: &[Node]) -> Result<(i64, i64), InterpError> {
        let mut lo = i64::MAX;
        let mut hi = i64::MIN;
        let mut stmts = Vec::new();
        collect_stmts(body, &mut stmts);
        for s in stmts {
            let stmt = &self.program.statements[s.index()];
            let (l, h) = self.statement_bounds(stmt, depth)?;
            lo = lo.min(l);
            hi = hi.max(h);
        }
        Ok((lo, hi))
    }

    fn statement_bounds(&self, stmt: &Statement, depth: usize) -> Result<(i64, i64), InterpError> {
        let mut lo: Option<i64> = None;
        let mut hi: Option<i64> = None;
        let var = Var::Iter(depth);
        for c in &stmt.domain {
            if c.expr.innermost_iter() != Some(depth) {
                continue;
            }
            let a = c.expr.coeff(var);
            // a·x + rest ≥ 0 (or = 0), with x the iterator at `depth` and rest known.
            let mut outer = self.iters.clone();
            outer.resize(depth + 1, 0);
            let rest = c.expr.eval(&outer, &self.params);
            let is_lower = a > 0 || c.kind == ConstraintKind::Zero;
            let is_upper = a < 0 || c.kind == ConstraintKind::Zero;
            if is_lower {
                let b = if a > 0 {
                    div_ceil(-rest, a)
                } else {
                    div_ceil(rest, -a)
                };
                lo = Some(lo.map_or(b, |l| l.max(b)));
            }
            if is_upper {
                let b = if a < 0 {
                    div_floor(rest, -a)
                } else {
                    div_floor(-rest, a)
                };
                hi = Some(hi.map_or(b, |h| h.min(b)));
            }
        }
        let missing = |which| InterpError::Unbounded {
            stmt: stmt.name.clone(),
            iter: stmt.iterators[depth].clone(),
            which,
        };
        Ok((
            lo.ok_or_else(|| missing("lower"))?,
            hi.ok_or_else(|| missing("upper"))?,
        ))
    }

    fn run_statement(&mut self, id: StmtId) -> Result<(), InterpError> {
        let program = self.program;
        let stmt = &program.statements[id.index()];
        let plan = &self.plans[id.index()];
        for &k in &plan.guards {
            if !stmt.domain[k].holds(&self.iters, &self.params) {
                return Ok(());
            }
        }
        execute_instance(
            program,
            stmt,
            &plan.types,
            &self.iters,
            &self.params,
            self.memory,
        )?;
        self.stats.instances += 1;
        Ok(())
    }
}

/// The types of a statement body's expressions, indexed by [`ExprId`]; what
/// [`execute_instance`] needs to round every intermediate value.
pub(crate) fn body_types(program: &Program, stmt: &Statement) -> Vec<ScalarType> {
    (0..stmt.exprs.len())
        .map(|i| program.expr_type(stmt, ExprId(i as u32)))
        .collect()
}

/// Executes one instance of `stmt`: evaluates its body with the iterators at `iters` and stores
/// the value, rounded to the element type, into the element it writes. `types` comes from
/// [`body_types`]. Every executor of statement instances (this interpreter, the AST
/// interpreter) goes through here, so they share one statement semantics.
pub(crate) fn execute_instance(
    program: &Program,
    stmt: &Statement,
    types: &[ScalarType],
    iters: &[i64],
    params: &[i64],
    memory: &mut Memory,
) -> Result<(), InterpError> {
    let value = {
        let mut eval = Evaluator {
            program,
            machine_params: params,
            memory: &*memory,
            ctx: Context::Statement { stmt, iters, types },
        };
        eval.eval(stmt.body)?
    };
    let offset = element_offset(program, stmt, &stmt.write, iters, params)?;
    let elem = program.array(stmt.write.array).elem;
    memory.arrays[stmt.write.array.index()][offset] = round(elem, value);
    Ok(())
}

pub(crate) fn collect_stmts(nodes: &[Node], out: &mut Vec<StmtId>) {
    for n in nodes {
        match n {
            Node::Stmt(s) => out.push(*s),
            Node::Loop { body, .. } => collect_stmts(body, out),
        }
    }
}

fn div_floor(a: i64, b: i64) -> i64 {
    a.div_euclid(b)
}

fn div_ceil(a: i64, b: i64) -> i64 {
    -((-a).div_euclid(b))
}

/// The row-major offset of an access, bounds-checked.
fn element_offset(
    program: &Program,
    stmt: &Statement,
    access: &crate::program::Access,
    iters: &[i64],
    params: &[i64],
) -> Result<usize, InterpError> {
    let array = program.array(access.array);
    let mut offset: i64 = 0;
    let mut inside = true;
    for (sub, extent) in access.subscripts.iter().zip(&array.shape) {
        let i = sub.eval(iters, params);
        let n = extent.eval(&[], params);
        inside &= 0 <= i && i < n;
        offset = offset * n + i;
    }
    if !inside {
        let index: Vec<(i64, i64)> = access
            .subscripts
            .iter()
            .zip(&array.shape)
            .map(|(sub, extent)| (sub.eval(iters, params), extent.eval(&[], params)))
            .collect();
        let join = |f: fn(&(i64, i64)) -> i64| {
            index
                .iter()
                .map(|p| f(p).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(InterpError::OutOfBounds {
            stmt: stmt.name.clone(),
            array: array.name.clone(),
            index: join(|p| p.0),
            extents: join(|p| p.1),
        });
    }
    Ok(offset as usize)
}

/// Where an expression is evaluated: a statement instance or a scalar function call.
enum Context<'a> {
    Statement {
        stmt: &'a Statement,
        iters: &'a [i64],
        types: &'a [ScalarType],
    },
    Function {
        function: &'a Function,
        locals: Vec<f64>,
        types: Vec<ScalarType>,
        /// The statement the call came from, for messages.
        caller: &'a str,
    },
}

struct Evaluator<'a> {
    program: &'a Program,
    machine_params: &'a [i64],
    memory: &'a Memory,
    ctx: Context<'a>,
}

impl<'a> Evaluator<'a> {
    fn arena(&self) -> &'a ExprArena {
        match &self.ctx {
            Context::Statement { stmt, .. } => &stmt.exprs,
            Context::Function { function, .. } => &function.exprs,
        }
    }

    fn ty(&self, id: ExprId) -> ScalarType {
        match &self.ctx {
            Context::Statement { types, .. } => types[id.index()],
            Context::Function { types, .. } => types[id.index()],
        }
    }

    fn stmt_name(&self) -> String {
        match &self.ctx {
            Context::Statement { stmt, .. } => stmt.name.clone(),
            Context::Function { caller, .. } => caller.to_string(),
        }
    }

    fn eval(&mut self, id: ExprId) -> Result<f64, InterpError> {
        let ty = self.ty(id);
        let v = match self.arena()[id] {
            Expr::Literal(ref l) => l.value,
            Expr::Iter(d) => match &self.ctx {
                Context::Statement { iters, .. } => wrap_i32(iters[d]),
                Context::Function { .. } => unreachable!("verified: functions have no iterators"),
            },
            Expr::Param(p) => wrap_i32(self.machine_params[p.index()]),
            Expr::Read(r) => match &self.ctx {
                Context::Statement { stmt, iters, .. } => {
                    let access = &stmt.reads[r];
                    let offset =
                        element_offset(self.program, stmt, access, iters, self.machine_params)?;
                    self.memory.arrays[access.array.index()][offset]
                }
                Context::Function { .. } => unreachable!("verified: functions read no arrays"),
            },
            Expr::Local(l) => match &self.ctx {
                Context::Function { locals, .. } => locals[l.index()],
                Context::Statement { .. } => unreachable!("verified: statements have no locals"),
            },
            Expr::Unary(UnaryOp::Neg, a) => {
                let x = self.eval(a)?;
                if ty == ScalarType::I32 {
                    wrap_i32((x as i64).wrapping_neg())
                } else {
                    -x
                }
            }
            Expr::Unary(UnaryOp::Not, a) => (self.eval(a)? == 0.0) as u8 as f64,
            Expr::Binary(BinaryOp::And, a, b) => {
                let x = self.eval(a)? != 0.0 && self.eval(b)? != 0.0;
                x as u8 as f64
            }
            Expr::Binary(BinaryOp::Or, a, b) => {
                let x = self.eval(a)? != 0.0 || self.eval(b)? != 0.0;
                x as u8 as f64
            }
            Expr::Binary(op, a, b) => {
                let operand_ty = self.ty(a);
                let x = self.eval(a)?;
                let y = self.eval(b)?;
                self.binary(op, operand_ty, x, y)?
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                if self.eval(cond)? != 0.0 {
                    self.eval(then)?
                } else {
                    self.eval(otherwise)?
                }
            }
            Expr::Math(m, ref args) => {
                let x = self.eval(args[0])?;
                match m {
                    MathFn::Sqrt => x.sqrt(),
                    MathFn::Rsqrt => 1.0 / x.sqrt(),
                    MathFn::Exp => x.exp(),
                    MathFn::Log => x.ln(),
                    MathFn::Pow => {
                        let y = self.eval(args[1])?;
                        x.powf(y)
                    }
                    MathFn::Abs => x.abs(),
                    MathFn::Tanh => x.tanh(),
                    MathFn::Sin => x.sin(),
                    MathFn::Cos => x.cos(),
                    MathFn::Floor => x.floor(),
                    MathFn::Ceil => x.ceil(),
                }
            }
            Expr::Cast(to, a) => {
                let x = self.eval(a)?;
                match to {
                    // Float to integer truncates toward zero and saturates, as Rust's `as`.
                    ScalarType::I32 => x.trunc().clamp(i32::MIN as f64, i32::MAX as f64),
                    _ => x,
                }
            }
            Expr::Call(f, ref args) => {
                let mut values = Vec::with_capacity(args.len());
                for a in args {
                    values.push(self.eval(*a)?);
                }
                self.call(f, values)?
            }
        };
        Ok(match self.arena()[id] {
            // Stored values, iterators and locals already have their type.
            Expr::Read(_) | Expr::Local(_) | Expr::Iter(_) | Expr::Param(_) => v,
            _ => round(ty, v),
        })
    }

    fn binary(&self, op: BinaryOp, ty: ScalarType, x: f64, y: f64) -> Result<f64, InterpError> {
        let bool_value = |b: bool| b as u8 as f64;
        Ok(match op {
            BinaryOp::Lt => bool_value(x < y),
            BinaryOp::Le => bool_value(x <= y),
            BinaryOp::Gt => bool_value(x > y),
            BinaryOp::Ge => bool_value(x >= y),
            BinaryOp::Eq => bool_value(x == y),
            BinaryOp::Ne => bool_value(x != y),
            BinaryOp::Min => x.min(y),
            BinaryOp::Max => x.max(y),
            _ if ty == ScalarType::I32 => {
                let (a, b) = (x as i64, y as i64);
                let divide_by_zero = || InterpError::DivisionByZero {
                    stmt: self.stmt_name(),
                };
                wrap_i32(match op {
                    BinaryOp::Add => a.wrapping_add(b),
                    BinaryOp::Sub => a.wrapping_sub(b),
                    BinaryOp::Mul => a.wrapping_mul(b),
                    BinaryOp::Div => a.checked_div(b).ok_or_else(divide_by_zero)?,
                    BinaryOp::Rem => a.checked_rem(b).ok_or_else(divide_by_zero)?,
                    _ => unreachable!("comparisons, min, max and logic are handled above"),
                })
            }
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            BinaryOp::Rem => x % y,
            BinaryOp::And | BinaryOp::Or => unreachable!("short-circuited in eval"),
        })
    }

    fn call(&mut self, id: FunctionId, args: Vec<f64>) -> Result<f64, InterpError> {
        let program = self.program;
        let function = program.function(id);
        let mut locals = vec![0.0; function.locals.len()];
        locals[..args.len()].copy_from_slice(&args);
        let types = (0..function.exprs.len())
            .map(|i| function.expr_type(program, ExprId(i as u32)))
            .collect();
        let caller = self.stmt_name();
        let mut callee = Evaluator {
            program,
            machine_params: self.machine_params,
            memory: self.memory,
            ctx: Context::Function {
                function,
                locals,
                types,
                caller: &caller,
            },
        };
        let mut steps = 0;
        match callee.exec_block(&function.body, &mut steps)? {
            Some(v) => Ok(v),
            // The front end rejects functions that can fall off their end; a verified
            // function cannot get here, but a value is still defined: zero.
            None => Ok(0.0),
        }
    }

    /// Runs a block of a function; `Some(v)` when it returned `v`.
    fn exec_block(&mut self, block: &Block, steps: &mut u64) -> Result<Option<f64>, InterpError> {
        for s in block {
            match s {
                Stmt::Assign(l, e) => {
                    let v = self.eval(*e)?;
                    if let Context::Function { locals, .. } = &mut self.ctx {
                        locals[l.index()] = v;
                    }
                }
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    let branch = if self.eval(*cond)? != 0.0 {
                        then
                    } else {
                        otherwise
                    };
                    if let Some(v) = self.exec_block(branch, steps)? {
                        return Ok(Some(v));
                    }
                }
                Stmt::While { cond, body } => {
                    while self.eval(*cond)? != 0.0 {
                        *steps += 1;
                        if *steps > FUNCTION_LOOP_LIMIT {
                            let name = match &self.ctx {
                                Context::Function { function, .. } => function.name.clone(),
                                Context::Statement { .. } => unreachable!(),
                            };
                            return Err(InterpError::NonTerminating {
                                function: name,
                                limit: FUNCTION_LOOP_LIMIT,
                            });
                        }
                        if let Some(v) = self.exec_block(body, steps)? {
                            return Ok(Some(v));
                        }
                    }
                }
                Stmt::Return(e) => return Ok(Some(self.eval(*e)?)),
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{
        Access, AffineExpr, Array, Constraint, Literal, Param, ParamId, Reduction, ReductionOp,
        Span,
    };

    fn it(d: usize) -> AffineExpr {
        AffineExpr::var(Var::Iter(d))
    }

    fn range(d: usize, lo: i64, hi: AffineExpr) -> Vec<Constraint> {
        vec![
            Constraint::le(&AffineExpr::constant(lo), &it(d)),
            Constraint::lt(&it(d), &hi),
        ]
    }

    /// s[i] = sum_{j <= i} x[j], as an init statement and a triangular update.
    fn prefix_sum(n: i64) -> Program {
        let np = AffineExpr::var(Var::Param(ParamId(0)));
        let array = |name: &str, role| Array {
            name: name.into(),
            elem: ScalarType::F32,
            shape: vec![np.clone()],
            role,
            span: Span::default(),
        };
        let access = |a: u32, sub: AffineExpr| Access {
            array: ArrayId(a),
            subscripts: vec![sub],
            span: Span::default(),
        };
        let mut init_exprs = ExprArena::new();
        let zero = init_exprs.push(Expr::Literal(Literal {
            value: 0.0,
            ty: ScalarType::F32,
        }));
        let init = Statement {
            name: "S0".into(),
            iterators: vec!["i".into()],
            domain: range(0, 0, np.clone()),
            write: access(1, it(0)),
            reads: vec![],
            exprs: init_exprs,
            body: zero,
            position: vec![0, 0],
            reduction: None,
            span: Span::default(),
        };
        let mut exprs = ExprArena::new();
        let acc = exprs.push(Expr::Read(0));
        let x = exprs.push(Expr::Read(1));
        let sum = exprs.push(Expr::Binary(BinaryOp::Add, acc, x));
        let mut domain = range(0, 0, np.clone());
        domain.extend(range(1, 0, it(0).add(&AffineExpr::constant(1))));
        let update = Statement {
            name: "S1".into(),
            iterators: vec!["i".into(), "j".into()],
            domain,
            write: access(1, it(0)),
            reads: vec![access(1, it(0)), access(0, it(1))],
            exprs,
            body: sum,
            position: vec![1, 0, 0],
            reduction: Some(Reduction {
                op: ReductionOp::Add,
                iters: vec![1],
            }),
            span: Span::default(),
        };
        Program {
            name: "prefix_sum".into(),
            params: vec![Param {
                name: "N".into(),
                value: n,
            }],
            arrays: vec![array("x", ArrayRole::Input), array("s", ArrayRole::Output)],
            statements: vec![init, update],
            ..Program::default()
        }
    }

    #[test]
    fn triangular_reduction_matches_hand_computation() {
        let p = prefix_sum(4);
        p.verify().unwrap();
        let mut mem = random_inputs(&p, 1);
        mem.arrays[0] = vec![1.0, 2.0, 3.0, 4.0];
        let stats = run(&p, &mut mem).unwrap();
        assert_eq!(mem.arrays[1], vec![1.0, 3.0, 6.0, 10.0]);
        assert_eq!(stats.instances, 4 + 10);
    }

    #[test]
    fn random_inputs_depend_on_name_not_order() {
        let p = prefix_sum(8);
        let mut q = p.clone();
        q.arrays.reverse();
        let a = random_inputs(&p, 7);
        let b = random_inputs(&q, 7);
        assert_eq!(a.arrays[0], b.arrays[1]);
        assert_ne!(a.arrays[0], random_inputs(&p, 8).arrays[0]);
        assert!(a.arrays[0].iter().all(|v| (-1.0..1.0).contains(v)));
    }

    #[test]
    fn out_of_bounds_is_reported() {
        let mut p = prefix_sum(4);
        p.statements[1].reads[1].subscripts[0] = it(1).add(&AffineExpr::constant(1));
        let mut mem = random_inputs(&p, 1);
        let err = run(&p, &mut mem).unwrap_err();
        assert_eq!(err.to_string(), "S1 accesses x[4] outside its extents [4]");
    }

    /// The correctly rounded f16 of a finite `x` below 65504 in magnitude, by brute force: the
    /// nearest of the three f16 values around `half`'s answer (which can be one ulp off just
    /// above ties), ties to the even bit pattern. Differences are exact in f64 here.
    fn reference_f16(x: f64) -> f64 {
        let guess = half::f16::from_f64(x).to_bits();
        let mut best: Option<(f64, u16)> = None;
        for bits in [guess.wrapping_sub(1), guess, guess.wrapping_add(1)] {
            let h = half::f16::from_bits(bits).to_f64();
            if !h.is_finite() || (h == 0.0 && bits != guess) {
                continue;
            }
            let d = (x - h).abs();
            best = match best {
                Some((bd, bb)) if bd < d || (bd == d && bb % 2 == 0) => Some((bd, bb)),
                _ => Some((d, bits)),
            };
        }
        half::f16::from_bits(best.unwrap().1).to_f64()
    }

    #[test]
    fn f16_rounding_is_correct() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for k in 0..200_000u64 {
            x = splitmix64(x ^ k);
            // Magnitudes from 2^-30 to 2^15 cover subnormals and normals.
            let v = f64::from_bits(x >> 12 | 0x3ff0_0000_0000_0000) - 1.0;
            let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
            let scaled = sign * v * f64::powi(2.0, (k % 45) as i32 - 30);
            assert_eq!(round_f16(scaled), reference_f16(scaled), "{scaled:e}");
        }
        for bits in 0..0x7bffu16 {
            let h = half::f16::from_bits(bits).to_f64();
            let next = half::f16::from_bits(bits + 1).to_f64();
            let mid = (h + next) / 2.0;
            assert_eq!(round_f16(h), h);
            // Ties go to the even pattern; just above a tie goes up.
            let even = if bits % 2 == 0 { h } else { next };
            assert_eq!(round_f16(mid), even, "tie {mid:e}");
            assert_eq!(round_f16(mid + mid * f64::EPSILON), next, "above {mid:e}");
        }
        assert_eq!(round_f16(65519.99), 65504.0);
        assert_eq!(round_f16(65520.0), f64::INFINITY);
        assert_eq!(round_f16(-1e9), f64::NEG_INFINITY);
    }

    #[test]
    fn f16_rounds_to_nearest_even() {
        // 1 + 2^-11 lies halfway between 1 and the next f16 (1 + 2^-10): ties go to even (1).
        assert_eq!(round(ScalarType::F16, 1.0 + f64::powi(2.0, -11)), 1.0);
        assert_eq!(
            round(ScalarType::F16, 1.0 + 3.0 * f64::powi(2.0, -11)),
            1.0 + f64::powi(2.0, -9)
        );
        assert_eq!(round(ScalarType::I32, 2147483648.0), -2147483648.0);
    }
}
