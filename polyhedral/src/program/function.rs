//! Scalar functions: elementwise code with local variables and structured control flow
//! (`if`/`else`, `while`, `return`), called from statement bodies.
//!
//! A function's parameters are its first `params` locals. Every path through the body ends in a
//! `return` (the front end checks it); a function may call only functions defined before it, so
//! calls never recurse.

use super::expr::{self, ExprArena, ExprId};
use super::{Program, ScalarType};

/// Index of a function in [`Program::functions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FunctionId(pub u32);

impl FunctionId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Index of a local variable (or parameter) in [`Function::locals`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocalId(pub u32);

impl LocalId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Local {
    pub name: String,
    pub ty: ScalarType,
}

pub type Block = Vec<Stmt>;

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `local = value` (also a declaration's initialiser).
    Assign(LocalId, ExprId),
    If {
        cond: ExprId,
        then: Block,
        otherwise: Block,
    },
    While {
        cond: ExprId,
        body: Block,
    },
    Return(ExprId),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub name: String,
    /// How many of the first locals are parameters.
    pub params: usize,
    pub locals: Vec<Local>,
    pub ret: ScalarType,
    pub exprs: ExprArena,
    pub body: Block,
}

impl Function {
    pub fn local(&self, id: super::LocalId) -> &Local {
        &self.locals[id.index()]
    }

    /// The type of one of the function's expressions.
    pub fn expr_type(&self, program: &Program, id: ExprId) -> ScalarType {
        expr::type_of(program, &self.exprs, id, &|_| ScalarType::Bool, &|l| {
            self.locals[l.index()].ty
        })
    }

    pub(super) fn verify(&self, program: &Program) -> Result<(), String> {
        if self.params > self.locals.len() {
            return Err("more parameters than locals".into());
        }
        let local_type = |l: LocalId| self.locals[l.index()].ty;
        let scope = expr::Scope {
            n_reads: 0,
            n_locals: self.locals.len(),
            depth: 0,
            read_type: &|_| ScalarType::Bool,
            local_type: &local_type,
        };
        if !self.exprs.is_empty() {
            let last = ExprId(self.exprs.len() as u32 - 1);
            expr::verify_arena(program, &self.exprs, last, &scope)?;
        }
        self.verify_block(program, &self.body)
    }

    fn verify_block(&self, program: &Program, block: &Block) -> Result<(), String> {
        let ty = |e: ExprId| self.expr_type(program, e);
        for s in block {
            match s {
                Stmt::Assign(l, e) => {
                    if l.index() >= self.locals.len() {
                        return Err("assignment to an unknown local".into());
                    }
                    if ty(*e) != self.locals[l.index()].ty {
                        return Err(format!(
                            "`{}` of type {} assigned a {}",
                            self.locals[l.index()].name,
                            self.locals[l.index()].ty,
                            ty(*e)
                        ));
                    }
                }
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    if ty(*cond) != ScalarType::Bool {
                        return Err("`if` condition is not bool".into());
                    }
                    self.verify_block(program, then)?;
                    self.verify_block(program, otherwise)?;
                }
                Stmt::While { cond, body } => {
                    if ty(*cond) != ScalarType::Bool {
                        return Err("`while` condition is not bool".into());
                    }
                    self.verify_block(program, body)?;
                }
                Stmt::Return(e) => {
                    if ty(*e) != self.ret {
                        return Err(format!("returns {} from a {} function", ty(*e), self.ret));
                    }
                }
            }
        }
        Ok(())
    }
}
