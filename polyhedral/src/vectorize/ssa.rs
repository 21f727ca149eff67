//! Static single assignment form of a scalar function's body (or of a statement body).
//!
//! Every value is defined once: an expression node of the body becomes one [`Value`] each time
//! the walk meets it, a read of a local becomes the local's current value, and where control
//! flow joins, a [`Op::Phi`] merges the values a local has on the incoming paths: after an
//! `if` (then, else) and at a loop header (entry, latch). Control flow stays structured
//! ([`Node::If`], [`Node::Loop`]), which is what if-conversion ([`super::mask`]) walks.
//!
//! Early returns are first rewritten into a result local and a `done` flag (the code after a
//! statement that may return runs under `!done`, loops that may return also test it), so the
//! SSA body has exactly one [`Node::Return`], its last node.

use crate::program::{
    BinaryOp, Block, Expr, ExprId, Function, FunctionId, Literal, Local, LocalId, MathFn, ParamId,
    Program, ScalarType, Statement, Stmt, UnaryOp,
};

/// Handle of a value in [`Ssa::values`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Parameter `k` of the function.
    Param(usize),
    /// A size parameter of the kernel.
    Size(ParamId),
    /// Iterator `d` of the statement (statement bodies only).
    Iter(usize),
    /// Read `r` of the statement (statement bodies only).
    Read(usize),
    Const(Literal),
    Unary(UnaryOp, ValueId),
    Binary(BinaryOp, ValueId, ValueId),
    Select(ValueId, ValueId, ValueId),
    Math(MathFn, Vec<ValueId>),
    Cast(ScalarType, ValueId),
    Call(FunctionId, Vec<ValueId>),
    /// The value of a local where paths join: after an `if` (then, else) or at a loop header
    /// (entry, latch).
    Phi(LocalId, [ValueId; 2]),
}

impl Op {
    pub fn operands(&self) -> Vec<ValueId> {
        match self {
            Op::Param(_) | Op::Size(_) | Op::Iter(_) | Op::Read(_) | Op::Const(_) => Vec::new(),
            Op::Unary(_, a) | Op::Cast(_, a) => vec![*a],
            Op::Binary(_, a, b) => vec![*a, *b],
            Op::Select(c, t, e) => vec![*c, *t, *e],
            Op::Math(_, args) | Op::Call(_, args) => args.clone(),
            Op::Phi(_, inputs) => inputs.to_vec(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    pub op: Op,
    pub ty: ScalarType,
}

/// A phi and its two inputs, in the order of [`Op::Phi`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Join {
    pub phi: ValueId,
    pub inputs: [ValueId; 2],
}

#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// Definition of a value that is not a phi.
    Def(ValueId),
    If {
        cond: ValueId,
        then: Vec<Node>,
        otherwise: Vec<Node>,
        joins: Vec<Join>,
    },
    /// `while`: the phis of the locals the body assigns, the header that computes the
    /// condition from them, and the body.
    Loop {
        phis: Vec<Join>,
        header: Vec<Node>,
        cond: ValueId,
        body: Vec<Node>,
    },
    Return(ValueId),
}

/// A body in SSA form.
#[derive(Clone, Debug, PartialEq)]
pub struct Ssa {
    pub name: String,
    /// The function's locals (with the result and `done` locals early returns add); empty for
    /// a statement body.
    pub locals: Vec<Local>,
    pub params: usize,
    pub ret: ScalarType,
    pub values: Vec<Value>,
    pub body: Vec<Node>,
}

impl Ssa {
    pub fn value(&self, v: ValueId) -> &Value {
        &self.values[v.index()]
    }

    /// The value the body returns (its last node).
    pub fn result(&self) -> ValueId {
        match self.body.last() {
            Some(Node::Return(v)) => *v,
            // Construction always ends the body in a return.
            _ => unreachable!("an SSA body ends in its return"),
        }
    }
}

/// The SSA form of function `id`.
pub fn function_ssa(program: &Program, id: FunctionId) -> Ssa {
    let f = normalize_returns(program.function(id));
    let mut b = Builder {
        program,
        function: Some(&f),
        stmt: None,
        values: Vec::new(),
    };
    let mut env: Vec<ValueId> = Vec::new();
    let mut body = Vec::new();
    for (k, local) in f.locals.iter().enumerate() {
        let op = if k < f.params {
            Op::Param(k)
        } else {
            Op::Const(Literal {
                value: 0.0,
                ty: local.ty,
            })
        };
        env.push(b.value(op, local.ty, &mut body));
    }
    b.block(&f.body, &mut env, &mut body);
    if !matches!(body.last(), Some(Node::Return(_))) {
        // Verified functions return on every path; the interpreter's value otherwise is 0.
        let zero = b.value(
            Op::Const(Literal {
                value: 0.0,
                ty: f.ret,
            }),
            f.ret,
            &mut body,
        );
        body.push(Node::Return(zero));
    }
    Ssa {
        name: f.name.clone(),
        locals: f.locals.clone(),
        params: f.params,
        ret: f.ret,
        values: b.values,
        body,
    }
}

/// The SSA form of a statement's body: its value is the one [`Node::Return`].
pub fn statement_ssa(program: &Program, stmt: &Statement) -> Ssa {
    let mut b = Builder {
        program,
        function: None,
        stmt: Some(stmt),
        values: Vec::new(),
    };
    let mut body = Vec::new();
    let v = b.expr(stmt.body, &[], &mut body);
    body.push(Node::Return(v));
    Ssa {
        name: stmt.name.clone(),
        locals: Vec::new(),
        params: 0,
        ret: b.values[v.index()].ty,
        values: b.values,
        body,
    }
}

struct Builder<'a> {
    program: &'a Program,
    function: Option<&'a Function>,
    stmt: Option<&'a Statement>,
    values: Vec<Value>,
}

impl Builder<'_> {
    fn value(&mut self, op: Op, ty: ScalarType, out: &mut Vec<Node>) -> ValueId {
        let id = self.new_value(op, ty);
        out.push(Node::Def(id));
        id
    }

    fn new_value(&mut self, op: Op, ty: ScalarType) -> ValueId {
        self.values.push(Value { op, ty });
        ValueId(self.values.len() as u32 - 1)
    }

    fn expr(&mut self, e: ExprId, env: &[ValueId], out: &mut Vec<Node>) -> ValueId {
        let (expr, ty) = match (self.function, self.stmt) {
            (Some(f), _) => (&f.exprs[e], f.expr_type(self.program, e)),
            (None, Some(s)) => (&s.exprs[e], self.program.expr_type(s, e)),
            (None, None) => unreachable!("a builder has a function or a statement"),
        };
        let op = match expr {
            Expr::Literal(l) => Op::Const(*l),
            Expr::Iter(d) => Op::Iter(*d),
            Expr::Param(p) => Op::Size(*p),
            Expr::Read(r) => Op::Read(*r),
            Expr::Local(l) => return env[l.index()],
            Expr::Unary(op, a) => Op::Unary(*op, self.expr(*a, env, out)),
            Expr::Binary(op, a, b) => {
                let a = self.expr(*a, env, out);
                Op::Binary(*op, a, self.expr(*b, env, out))
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                let c = self.expr(*cond, env, out);
                let t = self.expr(*then, env, out);
                Op::Select(c, t, self.expr(*otherwise, env, out))
            }
            Expr::Math(m, args) => {
                Op::Math(*m, args.iter().map(|a| self.expr(*a, env, out)).collect())
            }
            Expr::Cast(to, a) => Op::Cast(*to, self.expr(*a, env, out)),
            Expr::Call(f, args) => {
                Op::Call(*f, args.iter().map(|a| self.expr(*a, env, out)).collect())
            }
        };
        self.value(op, ty, out)
    }

    fn block(&mut self, block: &Block, env: &mut [ValueId], out: &mut Vec<Node>) {
        let f = self.function.expect("only function bodies have blocks");
        for s in block {
            match s {
                Stmt::Assign(l, e) => {
                    let v = self.expr(*e, env, out);
                    env[l.index()] = v;
                }
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    let c = self.expr(*cond, env, out);
                    let (mut te, mut ee) = (env.to_vec(), env.to_vec());
                    let (mut tn, mut en) = (Vec::new(), Vec::new());
                    self.block(then, &mut te, &mut tn);
                    self.block(otherwise, &mut ee, &mut en);
                    let mut joins = Vec::new();
                    for l in 0..env.len() {
                        if te[l] != ee[l] {
                            let inputs = [te[l], ee[l]];
                            let phi =
                                self.new_value(Op::Phi(LocalId(l as u32), inputs), f.locals[l].ty);
                            joins.push(Join { phi, inputs });
                            env[l] = phi;
                        } else {
                            // Both paths give the local one value, perhaps not the one it had
                            // before the `if` (each branch assigns it the same parameter).
                            env[l] = te[l];
                        }
                    }
                    out.push(Node::If {
                        cond: c,
                        then: tn,
                        otherwise: en,
                        joins,
                    });
                }
                Stmt::While { cond, body } => {
                    let mut assigned = vec![false; env.len()];
                    mark_assigned(body, &mut assigned);
                    let mut phis = Vec::new();
                    for (l, _) in assigned.iter().enumerate().filter(|(_, a)| **a) {
                        let entry = env[l];
                        // The latch input is set once the body is built.
                        let phi = self
                            .new_value(Op::Phi(LocalId(l as u32), [entry, entry]), f.locals[l].ty);
                        phis.push(Join {
                            phi,
                            inputs: [entry, entry],
                        });
                        env[l] = phi;
                    }
                    let mut header = Vec::new();
                    let c = self.expr(*cond, env, &mut header);
                    let mut inner = env.to_vec();
                    let mut nodes = Vec::new();
                    self.block(body, &mut inner, &mut nodes);
                    for j in &mut phis {
                        let Op::Phi(l, _) = self.values[j.phi.index()].op else {
                            unreachable!("loop phis are phis")
                        };
                        j.inputs[1] = inner[l.index()];
                        self.values[j.phi.index()].op = Op::Phi(l, j.inputs);
                    }
                    out.push(Node::Loop {
                        phis,
                        header,
                        cond: c,
                        body: nodes,
                    });
                }
                Stmt::Return(e) => {
                    let v = self.expr(*e, env, out);
                    out.push(Node::Return(v));
                    return;
                }
            }
        }
    }
}

fn mark_assigned(block: &Block, assigned: &mut [bool]) {
    for s in block {
        match s {
            Stmt::Assign(l, _) => assigned[l.index()] = true,
            Stmt::If {
                then, otherwise, ..
            } => {
                mark_assigned(then, assigned);
                mark_assigned(otherwise, assigned);
            }
            Stmt::While { body, .. } => mark_assigned(body, assigned),
            Stmt::Return(_) => {}
        }
    }
}

fn contains_return(block: &[Stmt]) -> bool {
    block.iter().any(|s| match s {
        Stmt::Return(_) => true,
        Stmt::If {
            then, otherwise, ..
        } => contains_return(then) || contains_return(otherwise),
        Stmt::While { body, .. } => contains_return(body),
        Stmt::Assign(..) => false,
    })
}

/// `f` with its returns made a result local, a `done` flag and one final return, unless its
/// only return is its last statement.
fn normalize_returns(f: &Function) -> Function {
    let n = f.body.len();
    let only_last =
        n > 0 && matches!(f.body[n - 1], Stmt::Return(_)) && !contains_return(&f.body[..n - 1]);
    if only_last {
        return f.clone();
    }
    let mut g = f.clone();
    let ret = LocalId(g.locals.len() as u32);
    g.locals.push(Local {
        name: "result".to_string(),
        ty: f.ret,
    });
    let done = LocalId(g.locals.len() as u32);
    g.locals.push(Local {
        name: "done".to_string(),
        ty: ScalarType::Bool,
    });
    let done_expr = g.exprs.push(Expr::Local(done));
    let not_done = g.exprs.push(Expr::Unary(UnaryOp::Not, done_expr));
    let yes = g.exprs.push(Expr::Literal(Literal {
        value: 1.0,
        ty: ScalarType::Bool,
    }));
    let mut r = ReturnRewrite {
        ret,
        done,
        not_done,
        yes,
    };
    let mut body = r.block(&mut g, &f.body);
    let result = g.exprs.push(Expr::Local(ret));
    body.push(Stmt::Return(result));
    g.body = body;
    g
}

struct ReturnRewrite {
    ret: LocalId,
    done: LocalId,
    not_done: ExprId,
    yes: ExprId,
}

impl ReturnRewrite {
    fn block(&mut self, g: &mut Function, block: &[Stmt]) -> Block {
        let mut out = Vec::new();
        for (i, s) in block.iter().enumerate() {
            let may_return = contains_return(std::slice::from_ref(s));
            match s {
                Stmt::Return(e) => {
                    out.push(Stmt::Assign(self.ret, *e));
                    out.push(Stmt::Assign(self.done, self.yes));
                    return out;
                }
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    let then = self.block(g, then);
                    let otherwise = self.block(g, otherwise);
                    out.push(Stmt::If {
                        cond: *cond,
                        then,
                        otherwise,
                    });
                }
                Stmt::While { cond, body } if may_return => {
                    let cond = g
                        .exprs
                        .push(Expr::Binary(BinaryOp::And, self.not_done, *cond));
                    let body = self.block(g, body);
                    out.push(Stmt::While { cond, body });
                }
                _ => out.push(s.clone()),
            }
            if may_return {
                let rest = self.block(g, &block[i + 1..]);
                if !rest.is_empty() {
                    out.push(Stmt::If {
                        cond: self.not_done,
                        then: rest,
                        otherwise: Vec::new(),
                    });
                }
                return out;
            }
        }
        out
    }
}
