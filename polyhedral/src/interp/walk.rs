//! The tree-walking evaluator: the interpreter as it was first written, one statement instance
//! and one expression node at a time, straight from the [`Program`] IR.
//!
//! It is kept as the oracle the compiled interpreter ([`super::run`]) is tested against, bit for
//! bit, and as the baseline of `cargo xtask bench interp`. It shares the value semantics of the
//! module root ([`round`], [`wrap_i32`]) but none of the compiled interpreter's code.

use super::{round, wrap_i32, InterpError, Memory, RunStats};
use crate::program::{
    build_nest, collect_stmts, loop_bounds, BinaryOp, Block, Constraint, ConstraintKind, Expr,
    ExprArena, ExprId, Function, FunctionId, MathFn, NestNode as Node, Program, ScalarType,
    Statement, Stmt, StmtId, UnaryOp, Var,
};

/// Runs `program` on `memory` in the original order, one expression node at a time.
pub fn run_tree_walker(program: &Program, memory: &mut Memory) -> Result<RunStats, InterpError> {
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

/// What the interpreter precomputes for one statement.
struct StmtPlan {
    /// Indices of domain constraints that the loop bounds do not already enforce.
    guards: Vec<usize>,
    /// The domain with the bounds inner iterators imply on outer ones that have none of their
    /// own: what loop bounds are computed from.
    loop_bounds: Vec<Constraint>,
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
            loop_bounds: loop_bounds(&stmt.domain, stmt.depth()),
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
            let (l, h) = self.statement_bounds(s, depth)?;
            lo = lo.min(l);
            hi = hi.max(h);
        }
        Ok((lo, hi))
    }

    fn statement_bounds(&self, id: StmtId, depth: usize) -> Result<(i64, i64), InterpError> {
        let stmt = &self.program.statements[id.index()];
        let mut lo: Option<i64> = None;
        let mut hi: Option<i64> = None;
        let var = Var::Iter(depth);
        for c in &self.plans[id.index()].loop_bounds {
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
fn body_types(program: &Program, stmt: &Statement) -> Vec<ScalarType> {
    (0..stmt.exprs.len())
        .map(|i| program.expr_type(stmt, ExprId(i as u32)))
        .collect()
}

/// Executes one instance of `stmt`: evaluates its body with the iterators at `iters` and stores
/// the value, rounded to the element type, into the element it writes. `types` comes from
/// [`body_types`]. Every executor of statement instances (this interpreter, the AST
/// interpreter) goes through here, so they share one statement semantics.
fn execute_instance(
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
    let divs = stmt.division_values(iters, params);
    let mut offset: i64 = 0;
    let mut inside = true;
    for (sub, extent) in access.subscripts.iter().zip(&array.shape) {
        let i = sub.eval_with(iters, &divs, params);
        let n = extent.eval(&[], params);
        inside &= 0 <= i && i < n;
        offset = offset * n + i;
    }
    if !inside {
        let index: Vec<(i64, i64)> = access
            .subscripts
            .iter()
            .zip(&array.shape)
            .map(|(sub, extent)| {
                (
                    sub.eval_with(iters, &divs, params),
                    extent.eval(&[], params),
                )
            })
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
