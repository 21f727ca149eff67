//! Lowering of scalar functions (`fn`) to [`polyhedral::program::Function`].
//!
//! Names are lexically scoped: a block's declarations are visible from their declaration to the
//! end of the block and may shadow outer ones (each declaration is a fresh local). Parameters
//! and `let` bindings cannot be assigned. A function may call only functions defined above it,
//! so calls never recurse, and every path through its body must end in `return`.

use std::collections::HashMap;

use polyhedral::program::{
    Block, Expr, ExprArena, Function, FunctionId, Local, LocalId, MathFn, ScalarType, Span, Stmt,
};

use super::ast::{self, ExprKind, FnDecl, FnStmt, Ident};
use super::types::{self, Callee, Names, Typed};
use crate::diagnostic::Diagnostic;

/// The functions lowered so far, by name, with where each was defined.
#[derive(Default)]
pub(crate) struct FunctionTable {
    pub functions: Vec<Function>,
    pub by_name: HashMap<String, FunctionId>,
}

/// Whether `name` is taken by the language itself (casts and built-in functions).
pub(crate) fn is_builtin(name: &str) -> bool {
    super::parser::parse_type_name(name).is_some()
        || MathFn::from_name(name).is_some()
        || matches!(name, "min" | "max" | "select")
}

/// A function name as a call site sees it: defined above, the one being defined, defined
/// below, or unknown.
pub(crate) fn resolve_call(
    table: &FunctionTable,
    all: &[FnDecl],
    current: Option<&str>,
    id: &Ident,
) -> Result<Callee, Diagnostic> {
    if let Some(&fid) = table.by_name.get(&id.name) {
        let f = &table.functions[fid.index()];
        return Ok(Callee::Function {
            id: fid,
            params: f.locals[..f.params].iter().map(|l| l.ty).collect(),
            ret: f.ret,
        });
    }
    if current == Some(id.name.as_str()) {
        return Err(
            Diagnostic::new(id.span, format!("recursive call of `{}`", id.name)).with_hint(
                "functions cannot call themselves; write the recursion as a `while` loop",
            ),
        );
    }
    if all.iter().any(|f| f.name.name == id.name) {
        return Err(Diagnostic::new(
            id.span,
            format!("`{}` is called before its definition", id.name),
        )
        .with_hint(format!(
            "move the definition of `{}` above this use",
            id.name
        )));
    }
    Err(
        Diagnostic::new(id.span, format!("unknown function `{}`", id.name))
            .with_hint("define it with `fn` above its first use"),
    )
}

struct Var {
    local: LocalId,
    mutable: bool,
}

struct Lowerer<'a> {
    table: &'a FunctionTable,
    all: &'a [FnDecl],
    current: &'a str,
    locals: Vec<Local>,
    scopes: Vec<HashMap<String, Var>>,
    exprs: ExprArena,
}

impl Names for Lowerer<'_> {
    fn name(&mut self, id: &Ident) -> Result<Typed, Diagnostic> {
        match self.lookup(&id.name) {
            Some(v) => Ok(Typed::leaf(
                Expr::Local(v.local),
                self.locals[v.local.index()].ty,
                id.span,
            )),
            None => Err(
                Diagnostic::new(id.span, format!("unknown variable `{}`", id.name))
                    .with_hint("declare it with `var` or `let` before using it"),
            ),
        }
    }

    fn call(&mut self, id: &Ident, _args: &[ast::Expr], _: Span) -> Result<Callee, Diagnostic> {
        resolve_call(self.table, self.all, Some(self.current), id)
    }
}

impl Lowerer<'_> {
    fn lookup(&self, name: &str) -> Option<&Var> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn declare(
        &mut self,
        name: &Ident,
        ty: ScalarType,
        mutable: bool,
    ) -> Result<LocalId, Diagnostic> {
        check_local_name(name)?;
        // Scopes are pushed before any declaration is made.
        let scope = self.scopes.last_mut().expect("a scope is open");
        if scope.contains_key(&name.name) {
            return Err(Diagnostic::new(
                name.span,
                format!("duplicate name `{}` in this block", name.name),
            )
            .with_hint("rename one of them, or assign to the existing variable"));
        }
        let local = LocalId(self.locals.len() as u32);
        self.locals.push(Local {
            name: name.name.clone(),
            ty,
        });
        scope.insert(name.name.clone(), Var { local, mutable });
        Ok(local)
    }

    fn block(&mut self, stmts: &[FnStmt], ret: ScalarType) -> Result<(Block, bool), Diagnostic> {
        self.scopes.push(HashMap::new());
        let mut out = Vec::new();
        let mut returns = false;
        for s in stmts {
            returns |= self.stmt(s, ret, &mut out)?;
        }
        self.scopes.pop();
        Ok((out, returns))
    }

    /// Lowers one statement; true when every path through it returns.
    fn stmt(&mut self, s: &FnStmt, ret: ScalarType, out: &mut Block) -> Result<bool, Diagnostic> {
        match s {
            FnStmt::Decl {
                mutable,
                name,
                ty,
                init,
            } => {
                let value = types::check(init, self)?;
                let ty = match ty {
                    Some(ann) => {
                        types::check_widen(&value, ann.ty, &format!("`{}`", name.name))?;
                        ann.ty
                    }
                    None => match value.ty {
                        types::Ty::Known(t) => t,
                        types::Ty::Int => ScalarType::I32,
                        types::Ty::Float => ScalarType::F32,
                    },
                };
                let e = types::emit(&value, Some(ty), &mut self.exprs);
                let local = self.declare(name, ty, *mutable)?;
                out.push(Stmt::Assign(local, e));
                Ok(false)
            }
            FnStmt::Assign { name, op, value } => {
                let Some(var) = self.lookup(&name.name) else {
                    return Err(Diagnostic::new(
                        name.span,
                        format!("unknown variable `{}`", name.name),
                    )
                    .with_hint("declare it with `var` before assigning to it"));
                };
                if !var.mutable {
                    return Err(Diagnostic::new(
                        name.span,
                        format!("cannot assign to `{}`: it is immutable", name.name),
                    )
                    .with_hint(
                        "declare it with `var` instead of `let` (parameters are immutable)",
                    ));
                }
                let local = var.local;
                let ty = self.locals[local.index()].ty;
                // `x op= e` is `x = x op e`.
                let value = match op {
                    Some(op) => {
                        let lhs = ast::Expr::leaf(ExprKind::Name(name.clone()), name.span);
                        let span = name.span.join(value.span);
                        ast::Expr::node(
                            ExprKind::Binary(*op, Box::new(lhs), Box::new(value.clone())),
                            span,
                        )
                    }
                    None => value.clone(),
                };
                let typed = types::check(&value, self)?;
                types::check_widen(&typed, ty, &format!("`{}`", name.name))?;
                let e = types::emit(&typed, Some(ty), &mut self.exprs);
                out.push(Stmt::Assign(local, e));
                Ok(false)
            }
            FnStmt::If {
                cond,
                then,
                otherwise,
            } => {
                let c = self.condition(cond)?;
                let (then, r1) = self.block(then, ret)?;
                let (otherwise, r2) = self.block(otherwise, ret)?;
                out.push(Stmt::If {
                    cond: c,
                    then,
                    otherwise,
                });
                Ok(r1 && r2)
            }
            FnStmt::While { cond, body } => {
                let c = self.condition(cond)?;
                let (body, _) = self.block(body, ret)?;
                out.push(Stmt::While { cond: c, body });
                Ok(false)
            }
            FnStmt::Return { value, .. } => {
                let typed = types::check(value, self)?;
                types::check_widen(&typed, ret, "the return value")?;
                let e = types::emit(&typed, Some(ret), &mut self.exprs);
                out.push(Stmt::Return(e));
                Ok(true)
            }
        }
    }

    fn condition(&mut self, cond: &ast::Expr) -> Result<polyhedral::program::ExprId, Diagnostic> {
        let c = types::check(cond, self)?;
        types::check_widen(&c, ScalarType::Bool, "a condition")?;
        Ok(types::emit(&c, Some(ScalarType::Bool), &mut self.exprs))
    }
}

fn check_local_name(name: &Ident) -> Result<(), Diagnostic> {
    if is_builtin(&name.name) {
        return Err(
            Diagnostic::new(name.span, format!("`{}` is a built-in name", name.name))
                .with_hint("choose another name"),
        );
    }
    Ok(())
}

/// Lowers `decl`, which may call the functions already in `table`, and adds it there.
pub(crate) fn lower_function(
    table: &mut FunctionTable,
    all: &[FnDecl],
    decl: &FnDecl,
) -> Result<(), Diagnostic> {
    if is_builtin(&decl.name.name) {
        return Err(Diagnostic::new(
            decl.name.span,
            format!("`{}` is a built-in function", decl.name.name),
        )
        .with_hint("choose another name for the function"));
    }
    if table.by_name.contains_key(&decl.name.name) {
        return Err(Diagnostic::new(
            decl.name.span,
            format!("duplicate function `{}`", decl.name.name),
        )
        .with_hint("rename one of the two definitions"));
    }
    let mut l = Lowerer {
        table,
        all,
        current: &decl.name.name,
        locals: Vec::new(),
        scopes: vec![HashMap::new()],
        exprs: ExprArena::new(),
    };
    for (p, ann) in &decl.params {
        l.declare(p, ann.ty, false)?;
    }
    let (body, returns) = l.block(&decl.body, decl.ret.ty)?;
    if !returns {
        return Err(Diagnostic::new(
            decl.end,
            format!(
                "`{}` may reach its end without returning a value",
                decl.name.name
            ),
        )
        .with_hint("add a `return` on every path, e.g. at the end of the function"));
    }
    let function = Function {
        name: decl.name.name.clone(),
        params: decl.params.len(),
        locals: l.locals,
        ret: decl.ret.ty,
        exprs: l.exprs,
        body,
    };
    let id = FunctionId(table.functions.len() as u32);
    table.by_name.insert(function.name.clone(), id);
    table.functions.push(function);
    Ok(())
}
