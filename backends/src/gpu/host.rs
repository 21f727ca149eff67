//! The split of a loop AST into the host program and its kernels.
//!
//! Everything outside a `kernel` mark runs on the host: sequential loops and conditionals
//! become [`HostOp`]s, evaluated by the runner, and each kernel mark becomes one [`Kernel`],
//! dispatched once per execution of its [`HostOp::Launch`] with the enclosing host loop
//! variables passed in the uniform block. Statements the host reaches outside any kernel mark
//! (nothing around them can run in parallel) become kernels of their own that one invocation
//! runs.
//!
//! A kernel's mapping ([`KernelMapping`]):
//! - `Groups`: the kernel mark's leading parallel loops (up to three) run on workgroup ids,
//!   and the thread marks inside map their leading parallel loops to local invocation ids;
//! - `Flat`: a kernel without thread marks maps its leading parallel loops to global
//!   invocation ids, each invocation running the rest of the body alone;
//! - `Serial`: one invocation runs the whole body.
//!
//! Mapped loops keep their bounds: an invocation runs iterations `lower + id·step`,
//! `lower + (id + n)·step`, … up to `upper`, where `n` is the number of ids of that
//! dimension, so any grid (a folded one larger than the per-dimension limit, a block
//! smaller than a tile) runs every iteration exactly once.

use polyhedral::ast::{Ast, AstCond, AstExpr};
use polyhedral::schedule::Mark;

use std::collections::BTreeSet;

use super::Limits;
use crate::loops::expr_vars;

/// One step of the host program.
#[derive(Clone, Debug, PartialEq)]
pub enum HostOp {
    Loop {
        var: String,
        lower: AstExpr,
        upper: AstExpr,
        step: i64,
        body: Vec<HostOp>,
    },
    If {
        conds: Vec<AstCond>,
        then: Vec<HostOp>,
        otherwise: Vec<HostOp>,
    },
    /// One dispatch of kernel `kernel`.
    Launch { kernel: usize },
}

/// A loop run on ids of one grid or block dimension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MappedLoop {
    pub var: String,
    pub lower: AstExpr,
    pub upper: AstExpr,
    pub step: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelMapping {
    /// Grid loops on workgroup ids (outermost first), thread marks inside on local ids.
    Groups {
        grid: Vec<MappedLoop>,
    },
    /// Loops on global invocation ids (outermost first).
    Flat {
        loops: Vec<MappedLoop>,
        block: [u32; 3],
    },
    Serial,
}

/// One compute entry point.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub mapping: KernelMapping,
    /// What runs inside the mapped loops.
    pub body: Ast,
    /// Host loop variables around the launch, outermost first.
    pub host_vars: Vec<String>,
}

impl Kernel {
    /// The workgroup size of the kernel's entry point.
    pub fn block(&self, limits: &Limits) -> [u32; 3] {
        match &self.mapping {
            KernelMapping::Flat { block, .. } => *block,
            KernelMapping::Serial => [1, 1, 1],
            KernelMapping::Groups { .. } => {
                let mut dims = 0;
                self.body.walk(&mut |a| {
                    if let Ast::Mark {
                        mark: Mark::Thread,
                        body,
                    } = a
                    {
                        dims = dims.max(leading_parallel(body, 3).0.len());
                    }
                });
                if dims == 0 {
                    [1, 1, 1]
                } else {
                    limits.block(dims)
                }
            }
        }
    }

    /// The loops whose ids the grid spans, outermost first.
    pub fn grid_loops(&self) -> &[MappedLoop] {
        match &self.mapping {
            KernelMapping::Groups { grid } => grid,
            KernelMapping::Flat { loops, .. } => loops,
            KernelMapping::Serial => &[],
        }
    }
}

/// The leading perfectly nested parallel loops of `ast` (at most `max`), and the body inside
/// them.
pub(crate) fn leading_parallel(ast: &Ast, max: usize) -> (Vec<MappedLoop>, &Ast) {
    let mut loops = Vec::new();
    let mut at = ast;
    loop {
        match single(at) {
            Ast::For {
                var,
                lower,
                upper,
                step,
                body,
                annotations,
            } if annotations.parallel && loops.len() < max => {
                loops.push(MappedLoop {
                    var: var.clone(),
                    lower: lower.clone(),
                    upper: upper.clone(),
                    step: *step,
                });
                at = body;
            }
            _ => return (loops, at),
        }
    }
}

/// The one item of a block of one item, or `ast` itself.
fn single(ast: &Ast) -> &Ast {
    match ast {
        Ast::Block(items) if items.len() == 1 => &items[0],
        other => other,
    }
}

fn contains_kernel(ast: &Ast) -> bool {
    let mut found = false;
    ast.walk(&mut |a| {
        found |= matches!(
            a,
            Ast::Mark {
                mark: Mark::Kernel,
                ..
            }
        );
    });
    found
}

fn contains_thread(ast: &Ast) -> bool {
    let mut found = false;
    ast.walk(&mut |a| {
        found |= matches!(
            a,
            Ast::Mark {
                mark: Mark::Thread,
                ..
            }
        );
    });
    found
}

/// Splits `ast` into the host program and its kernels (see the module docs).
pub fn split_host(ast: &Ast, limits: &Limits) -> (Vec<HostOp>, Vec<Kernel>) {
    let mut splitter = Splitter {
        kernels: Vec::new(),
        host_vars: Vec::new(),
        limits,
    };
    let ops = splitter.host(ast);
    (ops, splitter.kernels)
}

struct Splitter<'a> {
    kernels: Vec<Kernel>,
    host_vars: Vec<String>,
    limits: &'a Limits,
}

impl Splitter<'_> {
    fn launch(&mut self, mapping: KernelMapping, body: Ast) -> Vec<HostOp> {
        let kernel = self.kernels.len();
        self.kernels.push(Kernel {
            name: format!("k{kernel}"),
            mapping,
            body,
            host_vars: self.host_vars.clone(),
        });
        vec![HostOp::Launch { kernel }]
    }

    fn host(&mut self, ast: &Ast) -> Vec<HostOp> {
        if !contains_kernel(ast) {
            return self.launch(KernelMapping::Serial, ast.clone());
        }
        match ast {
            Ast::Block(items) => items.iter().flat_map(|a| self.host(a)).collect(),
            Ast::For {
                var,
                lower,
                upper,
                step,
                body,
                ..
            } => {
                self.host_vars.push(var.clone());
                let body = self.host(body);
                self.host_vars.pop();
                vec![HostOp::Loop {
                    var: var.clone(),
                    lower: lower.clone(),
                    upper: upper.clone(),
                    step: *step,
                    body,
                }]
            }
            Ast::If {
                conds,
                then,
                otherwise,
            } => vec![HostOp::If {
                conds: conds.clone(),
                then: self.host(then),
                otherwise: otherwise.as_ref().map_or(Vec::new(), |o| self.host(o)),
            }],
            Ast::Mark {
                mark: Mark::Kernel,
                body,
            } => self.kernel(body),
            Ast::Mark { body, .. } => self.host(body),
            Ast::User { .. } => self.launch(KernelMapping::Serial, ast.clone()),
        }
    }

    fn kernel(&mut self, body: &Ast) -> Vec<HostOp> {
        // A guard on parameters and host loops alone (a fused producer's domain condition)
        // is the host's to test: the mapped loops are under it.
        if let Ast::If {
            conds,
            then,
            otherwise: None,
        } = single(body)
        {
            let mut vars = BTreeSet::new();
            for c in conds {
                let (AstCond::NonNegative(e) | AstCond::Zero(e) | AstCond::Divisible(e, _)) = c;
                expr_vars(e, &mut vars);
            }
            if vars.iter().all(|v| self.host_vars.contains(v)) {
                return vec![HostOp::If {
                    conds: conds.clone(),
                    then: self.kernel(then),
                    otherwise: Vec::new(),
                }];
            }
        }
        let (loops, inner) = leading_parallel(body, 3);
        let inner = inner.clone();
        if contains_thread(&inner) {
            self.launch(KernelMapping::Groups { grid: loops }, inner)
        } else if loops.is_empty() {
            self.launch(KernelMapping::Serial, inner)
        } else {
            let block = self.limits.block(loops.len());
            self.launch(KernelMapping::Flat { loops, block }, inner)
        }
    }
}
