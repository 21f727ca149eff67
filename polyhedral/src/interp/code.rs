//! Statement bodies and scalar functions compiled to register code.
//!
//! Every expression node of a body gets its own register in a flat `f64` frame; literals and
//! parameters are constants placed in the frame once, when it is built. The code evaluates the
//! nodes in exactly the order the tree walker does, with the same laziness (`&&`, `||` and
//! `select` evaluate only what the walker evaluates, so a read or a division that the walker
//! skips cannot fail here either), and rounds every result to its node's type as the walker
//! does. A scalar function's frame holds its locals first, then its nodes; functions never
//! recurse (a function calls only functions defined before it), so each has one frame, reused
//! by every call.
//!
//! Invariants: code is only built from verified programs; a register index is always inside its
//! frame; `Iter` and `Load` appear only in statement code.

use super::{round, wrap_i32, InterpError};
use crate::program::{
    BinaryOp, Block, Expr, ExprArena, ExprId, Function, FunctionId, MathFn, Program, ScalarType,
    Statement, Stmt, UnaryOp,
};

/// A register of a frame.
pub(crate) type Reg = u32;

/// One instruction. `ty` is the type the result is rounded to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    /// The iterator at `depth`, as an `i32`.
    Iter {
        dst: Reg,
        depth: u32,
    },
    /// The element the statement's read `read` names.
    Load {
        dst: Reg,
        read: u32,
    },
    Neg {
        dst: Reg,
        a: Reg,
        ty: ScalarType,
    },
    Not {
        dst: Reg,
        a: Reg,
    },
    /// `operand` is the operands' type: it decides between integer and float arithmetic.
    Binary {
        op: BinaryOp,
        dst: Reg,
        a: Reg,
        b: Reg,
        operand: ScalarType,
        ty: ScalarType,
    },
    /// `dst = (src != 0)`.
    Truth {
        dst: Reg,
        src: Reg,
    },
    /// `dst = round(ty, src)`.
    Move {
        dst: Reg,
        src: Reg,
        ty: ScalarType,
    },
    /// `dst = src`, no rounding (assignment to a local).
    Copy {
        dst: Reg,
        src: Reg,
    },
    Math {
        f: MathFn,
        dst: Reg,
        a: Reg,
        b: Reg,
        ty: ScalarType,
    },
    Cast {
        dst: Reg,
        a: Reg,
        to: ScalarType,
    },
    /// Calls `f` with the registers `args[first..first + len]` of the unit's argument table.
    Call {
        f: u32,
        dst: Reg,
        first: u32,
        len: u32,
        ty: ScalarType,
    },
    Jump {
        to: u32,
    },
    JumpIfZero {
        cond: Reg,
        to: u32,
    },
    JumpIfNonZero {
        cond: Reg,
        to: u32,
    },
    /// One more iteration of a `while` loop of a function.
    Step,
    Return {
        src: Reg,
    },
}

/// Compiled code of a statement body or a function.
#[derive(Clone, Debug)]
pub(crate) struct Code {
    pub ops: Vec<Op>,
    /// Argument registers of the calls, by [`Op::Call`]'s `first` and `len`.
    pub args: Vec<Reg>,
    /// The frame as it starts: constants in place, zeros elsewhere.
    pub frame: Vec<f64>,
    /// Where a statement body leaves its value (unused for functions).
    pub result: Reg,
    /// For functions: how many locals (parameters first) precede the nodes' registers.
    pub locals: usize,
}

/// Compiles a statement's body.
pub(crate) fn compile_statement(program: &Program, stmt: &Statement) -> Code {
    let types = (0..stmt.exprs.len())
        .map(|i| program.expr_type(stmt, ExprId(i as u32)))
        .collect();
    let mut c = Compiler::new(program, &stmt.exprs, types, 0);
    let result = c.expr(stmt.body);
    c.finish(result)
}

/// Compiles a scalar function.
pub(crate) fn compile_function(program: &Program, function: &Function) -> Code {
    let types = (0..function.exprs.len())
        .map(|i| function.expr_type(program, ExprId(i as u32)))
        .collect();
    let mut c = Compiler::new(program, &function.exprs, types, function.locals.len());
    c.block(&function.body);
    // Verified functions return on every path; a value is still defined: zero, as the walker.
    let zero = c.constant(0.0);
    c.ops.push(Op::Return { src: zero });
    c.finish(0)
}

struct Compiler<'a> {
    program: &'a Program,
    arena: &'a ExprArena,
    types: Vec<ScalarType>,
    locals: usize,
    ops: Vec<Op>,
    args: Vec<Reg>,
    frame: Vec<f64>,
}

impl<'a> Compiler<'a> {
    fn new(
        program: &'a Program,
        arena: &'a ExprArena,
        types: Vec<ScalarType>,
        locals: usize,
    ) -> Compiler<'a> {
        Compiler {
            program,
            arena,
            types,
            locals,
            ops: Vec::new(),
            args: Vec::new(),
            frame: vec![0.0; locals + arena.len()],
        }
    }

    fn finish(self, result: Reg) -> Code {
        Code {
            ops: self.ops,
            args: self.args,
            frame: self.frame,
            result,
            locals: self.locals,
        }
    }

    fn reg(&self, id: ExprId) -> Reg {
        (self.locals + id.index()) as Reg
    }

    /// A fresh register holding `value` for good.
    fn constant(&mut self, value: f64) -> Reg {
        self.frame.push(value);
        (self.frame.len() - 1) as Reg
    }

    fn here(&self) -> u32 {
        self.ops.len() as u32
    }

    /// Points the jump at `at` to the current position.
    fn patch(&mut self, at: u32) {
        let here = self.here();
        match &mut self.ops[at as usize] {
            Op::Jump { to } | Op::JumpIfZero { to, .. } | Op::JumpIfNonZero { to, .. } => {
                *to = here
            }
            _ => unreachable!("only jumps are patched"),
        }
    }

    /// Emits the code evaluating `id`; returns the register holding its value.
    fn expr(&mut self, id: ExprId) -> Reg {
        let dst = self.reg(id);
        let ty = self.types[id.index()];
        match self.arena[id] {
            Expr::Literal(ref l) => {
                self.frame[dst as usize] = round(ty, l.value);
            }
            Expr::Param(p) => {
                self.frame[dst as usize] = wrap_i32(self.program.param(p).value);
            }
            Expr::Iter(d) => self.ops.push(Op::Iter {
                dst,
                depth: d as u32,
            }),
            Expr::Read(r) => self.ops.push(Op::Load {
                dst,
                read: r as u32,
            }),
            Expr::Local(l) => return l.0,
            Expr::Unary(UnaryOp::Neg, a) => {
                let a = self.expr(a);
                self.ops.push(Op::Neg { dst, a, ty });
            }
            Expr::Unary(UnaryOp::Not, a) => {
                let a = self.expr(a);
                self.ops.push(Op::Not { dst, a });
            }
            Expr::Binary(op @ (BinaryOp::And | BinaryOp::Or), a, b) => {
                let a = self.expr(a);
                self.ops.push(Op::Truth { dst, src: a });
                let skip = self.here();
                self.ops.push(if op == BinaryOp::And {
                    Op::JumpIfZero { cond: dst, to: 0 }
                } else {
                    Op::JumpIfNonZero { cond: dst, to: 0 }
                });
                let b = self.expr(b);
                self.ops.push(Op::Truth { dst, src: b });
                self.patch(skip);
            }
            Expr::Binary(op, a, b) => {
                let operand = self.types[a.index()];
                let a = self.expr(a);
                let b = self.expr(b);
                self.ops.push(Op::Binary {
                    op,
                    dst,
                    a,
                    b,
                    operand,
                    ty,
                });
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                let cond = self.expr(cond);
                let to_else = self.here();
                self.ops.push(Op::JumpIfZero { cond, to: 0 });
                let t = self.expr(then);
                self.ops.push(Op::Move { dst, src: t, ty });
                let to_end = self.here();
                self.ops.push(Op::Jump { to: 0 });
                self.patch(to_else);
                let o = self.expr(otherwise);
                self.ops.push(Op::Move { dst, src: o, ty });
                self.patch(to_end);
            }
            Expr::Math(f, ref args) => {
                let a = self.expr(args[0]);
                let b = if f == MathFn::Pow {
                    self.expr(args[1])
                } else {
                    a
                };
                self.ops.push(Op::Math { f, dst, a, b, ty });
            }
            Expr::Cast(to, a) => {
                let a = self.expr(a);
                self.ops.push(Op::Cast { dst, a, to });
            }
            Expr::Call(f, ref args) => {
                let regs: Vec<Reg> = args.iter().map(|&a| self.expr(a)).collect();
                let first = self.args.len() as u32;
                self.args.extend(&regs);
                self.ops.push(Op::Call {
                    f: f.0,
                    dst,
                    first,
                    len: regs.len() as u32,
                    ty,
                });
            }
        }
        dst
    }

    fn block(&mut self, block: &Block) {
        for s in block {
            match s {
                Stmt::Assign(l, e) => {
                    let src = self.expr(*e);
                    self.ops.push(Op::Copy { dst: l.0, src });
                }
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    let cond = self.expr(*cond);
                    let to_else = self.here();
                    self.ops.push(Op::JumpIfZero { cond, to: 0 });
                    self.block(then);
                    let to_end = self.here();
                    self.ops.push(Op::Jump { to: 0 });
                    self.patch(to_else);
                    self.block(otherwise);
                    self.patch(to_end);
                }
                Stmt::While { cond, body } => {
                    let top = self.here();
                    let cond = self.expr(*cond);
                    let to_end = self.here();
                    self.ops.push(Op::JumpIfZero { cond, to: 0 });
                    self.ops.push(Op::Step);
                    self.block(body);
                    self.ops.push(Op::Jump { to: top });
                    self.patch(to_end);
                }
                Stmt::Return(e) => {
                    let src = self.expr(*e);
                    self.ops.push(Op::Return { src });
                }
            }
        }
    }
}

/// At most this many loop iterations in one call of a scalar function.
pub(crate) const FUNCTION_LOOP_LIMIT: u64 = 100_000_000;

/// Why code stopped; the caller knows the names to put in an [`InterpError`].
#[derive(Debug)]
pub(crate) enum Fault {
    DivisionByZero,
    NonTerminating(FunctionId),
    /// A load failed; the loader made the error.
    Load(Box<InterpError>),
}

impl Fault {
    pub(crate) fn into_error(self, program: &Program, stmt: &Statement) -> InterpError {
        match self {
            Fault::DivisionByZero => InterpError::DivisionByZero {
                stmt: stmt.name.clone(),
            },
            Fault::NonTerminating(f) => InterpError::NonTerminating {
                function: program.function(f).name.clone(),
                limit: FUNCTION_LOOP_LIMIT,
            },
            Fault::Load(e) => *e,
        }
    }
}

/// Where statement code gets its iterators and array elements.
pub(crate) trait Env {
    fn iter(&self, depth: usize) -> i64;
    fn load(&mut self, read: usize) -> Result<f64, Fault>;
}

/// Functions read neither iterators nor arrays.
struct NoEnv;

impl Env for NoEnv {
    fn iter(&self, _: usize) -> i64 {
        unreachable!("verified: functions have no iterators")
    }
    fn load(&mut self, _: usize) -> Result<f64, Fault> {
        unreachable!("verified: functions read no arrays")
    }
}

/// Runs `code` (the code of function `this`, or of a statement body) on `frame`; `functions`
/// and `frames` are the program's compiled functions and their frames (for a function's own
/// code, only those defined before it). Returns the value of a `Return`, or the result
/// register when the code ends.
#[inline]
pub(crate) fn execute<E: Env>(
    code: &Code,
    this: Option<FunctionId>,
    frame: &mut [f64],
    env: &mut E,
    functions: &[Code],
    frames: &mut [Vec<f64>],
) -> Result<f64, Fault> {
    let mut pc = 0usize;
    let mut steps = 0u64;
    let ops = &code.ops[..];
    while let Some(&op) = ops.get(pc) {
        pc += 1;
        match op {
            Op::Iter { dst, depth } => frame[dst as usize] = wrap_i32(env.iter(depth as usize)),
            Op::Load { dst, read } => frame[dst as usize] = env.load(read as usize)?,
            Op::Neg { dst, a, ty } => {
                let x = frame[a as usize];
                frame[dst as usize] = if ty == ScalarType::I32 {
                    wrap_i32((x as i64).wrapping_neg())
                } else {
                    round(ty, -x)
                };
            }
            Op::Not { dst, a } => frame[dst as usize] = (frame[a as usize] == 0.0) as u8 as f64,
            Op::Binary {
                op,
                dst,
                a,
                b,
                operand,
                ty,
            } => {
                let v = binary(op, operand, frame[a as usize], frame[b as usize])?;
                frame[dst as usize] = round(ty, v);
            }
            Op::Truth { dst, src } => {
                frame[dst as usize] = (frame[src as usize] != 0.0) as u8 as f64
            }
            Op::Move { dst, src, ty } => frame[dst as usize] = round(ty, frame[src as usize]),
            Op::Copy { dst, src } => frame[dst as usize] = frame[src as usize],
            Op::Math { f, dst, a, b, ty } => {
                frame[dst as usize] = round(ty, math(f, frame[a as usize], frame[b as usize]));
            }
            Op::Cast { dst, a, to } => {
                let x = frame[a as usize];
                let v = match to {
                    // Float to integer truncates toward zero and saturates, as Rust's `as`.
                    ScalarType::I32 => x.trunc().clamp(i32::MIN as f64, i32::MAX as f64),
                    _ => x,
                };
                frame[dst as usize] = round(to, v);
            }
            Op::Call {
                f,
                dst,
                first,
                len,
                ty,
            } => {
                let f = f as usize;
                let callee = &functions[f];
                let (below, rest) = frames.split_at_mut(f);
                let callee_frame = &mut rest[0][..];
                callee_frame[..callee.locals].fill(0.0);
                for (k, &r) in code.args[first as usize..(first + len) as usize]
                    .iter()
                    .enumerate()
                {
                    callee_frame[k] = frame[r as usize];
                }
                let v = execute(
                    callee,
                    Some(FunctionId(f as u32)),
                    callee_frame,
                    &mut NoEnv,
                    &functions[..f],
                    below,
                )?;
                frame[dst as usize] = round(ty, v);
            }
            Op::Jump { to } => pc = to as usize,
            Op::JumpIfZero { cond, to } => {
                if frame[cond as usize] == 0.0 {
                    pc = to as usize;
                }
            }
            Op::JumpIfNonZero { cond, to } => {
                if frame[cond as usize] != 0.0 {
                    pc = to as usize;
                }
            }
            Op::Step => {
                steps += 1;
                if steps > FUNCTION_LOOP_LIMIT {
                    // Only function code has loops.
                    let f = this.expect("verified: statement bodies have no loops");
                    return Err(Fault::NonTerminating(f));
                }
            }
            Op::Return { src } => return Ok(frame[src as usize]),
        }
    }
    Ok(frame[code.result as usize])
}

/// A binary operation on values of type `ty`, before rounding (the tree walker's `binary`).
#[inline]
pub(crate) fn binary(op: BinaryOp, ty: ScalarType, x: f64, y: f64) -> Result<f64, Fault> {
    let bool_value = |b: bool| b as u8 as f64;
    Ok(match op {
        BinaryOp::Add if ty != ScalarType::I32 => x + y,
        BinaryOp::Mul if ty != ScalarType::I32 => x * y,
        BinaryOp::Sub if ty != ScalarType::I32 => x - y,
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
            wrap_i32(match op {
                BinaryOp::Add => a.wrapping_add(b),
                BinaryOp::Sub => a.wrapping_sub(b),
                BinaryOp::Mul => a.wrapping_mul(b),
                BinaryOp::Div => a.checked_div(b).ok_or(Fault::DivisionByZero)?,
                BinaryOp::Rem => a.checked_rem(b).ok_or(Fault::DivisionByZero)?,
                _ => unreachable!("comparisons, min, max and logic are handled above"),
            })
        }
        BinaryOp::Div => x / y,
        BinaryOp::Rem => x % y,
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => unreachable!("handled first"),
        BinaryOp::And | BinaryOp::Or => unreachable!("compiled to jumps"),
    })
}

pub(crate) fn math(f: MathFn, x: f64, y: f64) -> f64 {
    match f {
        MathFn::Sqrt => x.sqrt(),
        MathFn::Rsqrt => 1.0 / x.sqrt(),
        MathFn::Exp => x.exp(),
        MathFn::Log => x.ln(),
        MathFn::Pow => x.powf(y),
        MathFn::Abs => x.abs(),
        MathFn::Tanh => x.tanh(),
        MathFn::Sin => x.sin(),
        MathFn::Cos => x.cos(),
        MathFn::Floor => x.floor(),
        MathFn::Ceil => x.ceil(),
    }
}
