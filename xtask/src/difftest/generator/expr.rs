//! Expressions of the generated statements: values, reads of inputs and temporaries in bounds,
//! math functions, conditions on values, and the scalar functions they call.

use super::super::kernel::{Aff, BinOp, CmpOp, Cond, Elem, Expr, FnStmt, Function, Lit, Tensor};
use super::super::Rng;
use super::{expr_mentions, ArrayInfo, Dim, Gen, Idx, Role};

impl Gen {
    /// A value of type `elem` over the statement's indices, `depth` operators deep at most.
    pub(super) fn expr(&mut self, elem: Elem, idx: &[Idx], depth: usize) -> Expr {
        if depth == 0 || self.rng.chance(0.3) {
            return self.leaf(elem, idx);
        }
        let float = elem.is_float();
        let roll = self.rng.below(100);
        match roll {
            0..=44 => {
                let op = *self.rng.pick(&[BinOp::Add, BinOp::Sub, BinOp::Mul]);
                let a = self.expr(elem, idx, depth - 1);
                let b = self.expr(elem, idx, depth - 1);
                let b = match op == BinOp::Mul && self.special() {
                    true => Expr::Lit(huge(elem)),
                    false => b,
                };
                Expr::Bin(op, Box::new(a), Box::new(b))
            }
            45..=54 => {
                let a = self.expr(elem, idx, depth - 1);
                if float {
                    let b = self.expr(elem, idx, depth - 1);
                    let denominator = if self.special() {
                        Expr::Lit(Lit::Float(0.0))
                    } else if self.rng.chance(0.9) {
                        Expr::Bin(
                            BinOp::Add,
                            Box::new(Expr::Call("abs".into(), vec![b])),
                            Box::new(Expr::Lit(Lit::Float(1.0))),
                        )
                    } else {
                        Expr::Lit(Lit::Float(*self.rng.pick(&[2.0, 4.0, 0.5])))
                    };
                    Expr::Bin(BinOp::Div, Box::new(a), Box::new(denominator))
                } else {
                    let op = *self.rng.pick(&[BinOp::Div, BinOp::Rem]);
                    let c = *self.rng.pick(&[2, 3, 4, 7]);
                    Expr::Bin(op, Box::new(a), Box::new(Expr::Lit(Lit::Int(c))))
                }
            }
            55..=64 => {
                let f = *self.rng.pick(&["min", "max"]);
                let a = self.expr(elem, idx, depth - 1);
                let b = self.expr(elem, idx, depth - 1);
                Expr::Call(f.into(), vec![a, b])
            }
            65..=76 if float => self.math(elem, idx, depth),
            77..=84 => {
                let c = self.value_cond(idx);
                let a = self.expr(elem, idx, depth - 1);
                let b = self.expr(elem, idx, depth - 1);
                Expr::Select(Box::new(c), Box::new(a), Box::new(b))
            }
            85..=91 if !self.kernel.functions.is_empty() => self.call(elem, idx, depth),
            92..=95 => {
                let other = *self.rng.pick(&[Elem::F16, Elem::F32, Elem::F64, Elem::I32]);
                let inner = self.expr(other, idx, depth - 1);
                // A float becoming an integer is truncated: keep it in range first.
                let inner = if other.is_float() && !float {
                    Expr::Bin(
                        BinOp::Mul,
                        Box::new(inner),
                        Box::new(Expr::Lit(Lit::Float(4.0))),
                    )
                } else {
                    inner
                };
                Expr::Call(elem.name().into(), vec![inner])
            }
            _ => Expr::Neg(Box::new(self.expr(elem, idx, depth - 1))),
        }
    }

    /// Whether this operation makes a special value (in a kernel that makes them).
    fn special(&mut self) -> bool {
        self.specials
            .as_mut()
            .is_some_and(|r| r.chance(super::SPECIAL_OPERATIONS))
    }

    pub(super) fn math(&mut self, elem: Elem, idx: &[Idx], depth: usize) -> Expr {
        let a = self.expr(elem, idx, depth - 1);
        let abs = |e: Expr| Expr::Call("abs".into(), vec![e]);
        let plus_one = |e: Expr| {
            Expr::Bin(
                BinOp::Add,
                Box::new(e),
                Box::new(Expr::Lit(Lit::Float(1.0))),
            )
        };
        // Exactly rounded on every target: abs, sqrt, floor, ceil.
        let exact = ["abs", "sqrt", "floor", "ceil"];
        let inexact = ["exp", "tanh", "sin", "cos", "log", "rsqrt", "pow"];
        let f = if self.transcendental && self.rng.chance(0.6) {
            *self.rng.pick(&inexact)
        } else {
            *self.rng.pick(&exact)
        };
        match f {
            "sqrt" => Expr::Call(f.into(), vec![abs(a)]),
            "log" | "rsqrt" => Expr::Call(f.into(), vec![plus_one(abs(a))]),
            "pow" => Expr::Call(f.into(), vec![abs(a), Expr::Lit(Lit::Float(2.0))]),
            _ => Expr::Call(f.into(), vec![a]),
        }
    }

    /// A call of one of the kernel's functions with arguments of its parameters' types.
    pub(super) fn call(&mut self, elem: Elem, idx: &[Idx], depth: usize) -> Expr {
        let f = self.rng.below(self.kernel.functions.len());
        let params: Vec<Elem> = self.kernel.functions[f]
            .params
            .iter()
            .map(|p| p.1)
            .collect();
        let name = self.kernel.functions[f].name.clone();
        let ret = self.kernel.functions[f].ret;
        let args = params
            .iter()
            .map(|&t| self.expr(t, idx, depth - 1))
            .collect();
        let call = Expr::Call(name, args);
        if ret == elem {
            call
        } else {
            Expr::Call(elem.name().into(), vec![call])
        }
    }

    /// A condition on values that every target computes exactly: inputs and indices.
    pub(super) fn value_cond(&mut self, idx: &[Idx]) -> Cond {
        let op = *self.rng.pick(&[
            CmpOp::Lt,
            CmpOp::Le,
            CmpOp::Gt,
            CmpOp::Ge,
            CmpOp::Eq,
            CmpOp::Ne,
        ]);
        let plain: Vec<&Idx> = idx.iter().filter(|x| x.size != usize::MAX).collect();
        let cond = if !plain.is_empty() && self.rng.chance(0.4) {
            let x = plain[self.rng.below(plain.len())];
            let y = plain[self.rng.below(plain.len())];
            let rhs = if x.name == y.name {
                Expr::Lit(Lit::Int(self.rng.below(4) as i64))
            } else {
                Expr::Name(y.name.clone())
            };
            Cond::Cmp(op, Expr::Name(x.name.clone()), rhs)
        } else {
            let a = self.input_read(self.elem, idx);
            let b = if self.rng.chance(0.5) {
                self.input_read(self.elem, idx)
            } else if self.elem.is_float() {
                Expr::Lit(Lit::Float(*self.rng.pick(&[0.0, 0.5, -0.25])))
            } else {
                Expr::Lit(Lit::Int(*self.rng.pick(&[0, 3, -4])))
            };
            Cond::Cmp(op, a, b)
        };
        if self.rng.chance(0.05) {
            Cond::Not(Box::new(cond))
        } else if self.rng.chance(0.15) {
            let other = self.value_cond(idx);
            if self.rng.chance(0.5) {
                Cond::And(Box::new(cond), Box::new(other))
            } else {
                Cond::Or(Box::new(cond), Box::new(other))
            }
        } else {
            cond
        }
    }

    pub(super) fn leaf(&mut self, elem: Elem, idx: &[Idx]) -> Expr {
        let roll = self.rng.below(100);
        match roll {
            0..=59 => self.any_read(elem, idx),
            60..=67 => self.scalar(elem),
            68..=84 => {
                if elem.is_float() {
                    Expr::Lit(Lit::Float(
                        *self.rng.pick(&[0.5, 2.0, 1.5, 0.25, 3.0, -1.0, 0.0]),
                    ))
                } else {
                    Expr::Lit(Lit::Int(*self.rng.pick(&[1, 2, 3, -2, 5, 0])))
                }
            }
            _ => {
                let x = &idx[self.rng.below(idx.len())];
                let v = Expr::Name(x.name.clone());
                if elem.is_float() {
                    Expr::Call(elem.name().into(), vec![v])
                } else {
                    v
                }
            }
        }
    }

    /// A scalar input (`alpha`, `beta`) of the kernel's element type.
    pub(super) fn scalar(&mut self, elem: Elem) -> Expr {
        let existing: Vec<String> = self
            .kernel
            .inputs
            .iter()
            .filter(|t| t.dims.is_empty())
            .map(|t| t.name.clone())
            .collect();
        let name = if existing.is_empty() || (existing.len() < 2 && self.rng.chance(0.3)) {
            let name = ["alpha", "beta"][existing.len()].to_string();
            self.kernel.inputs.push(Tensor {
                name: name.clone(),
                elem: self.elem,
                dims: Vec::new(),
            });
            name
        } else {
            existing[self.rng.below(existing.len())].clone()
        };
        self.convert(Expr::Read(name, Vec::new()), self.elem, elem)
    }

    /// `e` of type `from` as a value of type `to`: promoted implicitly or cast.
    pub(super) fn convert(&mut self, e: Expr, from: Elem, to: Elem) -> Expr {
        if from == to || (to.is_float() && from.is_float() && self.rng.chance(0.5)) {
            e
        } else {
            Expr::Call(to.name().into(), vec![e])
        }
    }

    /// A read of an existing array that fits the statement's indices, or of a new input.
    pub(super) fn any_read(&mut self, elem: Elem, idx: &[Idx]) -> Expr {
        let candidates: Vec<usize> = (0..self.arrays.len())
            .filter(|&a| self.arrays[a].role != Role::Input || self.rng.chance(0.7))
            .collect();
        if !candidates.is_empty() && self.rng.chance(0.6) {
            let a = candidates[self.rng.below(candidates.len())];
            if let Some(e) = self.read_array(a, elem, idx, false) {
                return e;
            }
        }
        self.input_read(elem, idx)
    }

    /// A read of a (new or existing) input over some of the statement's indices.
    pub(super) fn input_read(&mut self, elem: Elem, idx: &[Idx]) -> Expr {
        let inputs: Vec<usize> = (0..self.arrays.len())
            .filter(|&a| self.arrays[a].role == Role::Input)
            .collect();
        if !inputs.is_empty() && self.rng.chance(0.5) {
            let a = inputs[self.rng.below(inputs.len())];
            if let Some(e) = self.read_array(a, elem, idx, false) {
                return e;
            }
        }
        let subscriptable: Vec<&Idx> = idx.iter().filter(|x| x.size != usize::MAX).collect();
        if subscriptable.is_empty() {
            return self.scalar(elem);
        }
        let rank = 1 + self.rng.below(subscriptable.len().min(3));
        let mut chosen: Vec<Idx> = Vec::new();
        for _ in 0..rank {
            let x = subscriptable[self.rng.below(subscriptable.len())].clone();
            chosen.push(x);
        }
        self.new_input(elem, &chosen, idx)
    }

    /// A read that uses index `x`: of a new input whose dimensions `x` and maybe others
    /// subscript.
    pub(super) fn read_using(&mut self, elem: Elem, idx: &[Idx], x: &Idx) -> Expr {
        let mut chosen = vec![x.clone()];
        let others: Vec<&Idx> = idx
            .iter()
            .filter(|y| y.size != usize::MAX && y.name != x.name)
            .collect();
        if !others.is_empty() && self.rng.chance(0.6) {
            chosen.push(others[self.rng.below(others.len())].clone());
        }
        if self.rng.chance(0.5) {
            chosen.reverse();
        }
        let existing: Vec<usize> = (0..self.arrays.len())
            .filter(|&a| self.arrays[a].role != Role::Output)
            .collect();
        if !existing.is_empty() && self.rng.chance(0.3) {
            let a = existing[self.rng.below(existing.len())];
            if let Some(e) = self.read_array(a, elem, idx, false) {
                if expr_mentions(&e, &x.name) {
                    return e;
                }
            }
        }
        self.new_input(elem, &chosen, idx)
    }

    /// A new input with one dimension per chosen index (padded for stencil offsets
    /// sometimes), read at those indices.
    pub(super) fn new_input(&mut self, elem: Elem, chosen: &[Idx], idx: &[Idx]) -> Expr {
        let n = self
            .kernel
            .inputs
            .iter()
            .filter(|t| !t.dims.is_empty())
            .count();
        let name = ["A", "B", "C", "D", "E", "F", "G", "H"]
            .get(n)
            .map(|s| s.to_string())
            .unwrap_or_else(|| format!("X{n}"));
        let in_elem = if self.rng.chance(0.15) {
            self.pick_elem()
        } else {
            self.elem
        };
        let dims: Vec<Dim> = chosen
            .iter()
            .map(|x| {
                // Enough room for the index's whole range (a window reaches past its size).
                let pad = (*self.rng.weighted(&[(0i64, 75), (1, 15), (2, 10)])).max(-x.h);
                Dim {
                    size: x.size,
                    lo: 0,
                    h: -pad,
                }
            })
            .collect();
        self.kernel.inputs.push(Tensor {
            name: name.clone(),
            elem: in_elem,
            dims: dims
                .iter()
                .map(|d| self.size_aff(d.size).plus(-d.h))
                .collect(),
        });
        self.arrays.push(ArrayInfo {
            name,
            elem: in_elem,
            role: Role::Input,
            dims,
        });
        let a = self.arrays.len() - 1;
        // Subscript the new dimensions with the chosen indices, in order.
        let subs = chosen
            .iter()
            .zip(self.arrays[a].dims.clone())
            .map(|(x, d)| {
                self.subscript_with(x, &d)
                    .unwrap_or_else(|| Aff::var(&x.name))
            })
            .collect();
        let _ = idx;
        self.convert(Expr::Read(self.arrays[a].name.clone(), subs), in_elem, elem)
    }

    /// A read of array `a` with subscripts over `idx` that stay in its readable part, or
    /// `None` where some dimension has no such subscript. `neighbour` asks for an offset in
    /// one dimension when one fits (a stencil on the array being written).
    pub(super) fn read_array(
        &mut self,
        a: usize,
        elem: Elem,
        idx: &[Idx],
        neighbour: bool,
    ) -> Option<Expr> {
        let info = self.arrays[a].clone();
        if info.dims.is_empty() {
            return Some(self.convert(Expr::Read(info.name, Vec::new()), info.elem, elem));
        }
        let mut subs = Vec::new();
        for d in &info.dims {
            let fits: Vec<&Idx> = idx
                .iter()
                .filter(|x| x.size == d.size && d.lo - x.lo <= x.h - d.h)
                .collect();
            if fits.is_empty() {
                // A constant subscript inside the readable part, where one exists for every
                // size: the first element.
                if d.lo == 0 && d.h <= 0 {
                    subs.push(Aff::constant(0));
                    continue;
                }
                return None;
            }
            let x = fits[self.rng.below(fits.len())];
            subs.push(self.subscript_with(x, d)?);
        }
        if neighbour {
            // Shift one subscript by ±1 where the index's range allows it.
            for (k, d) in info.dims.iter().enumerate() {
                let Some(name) = subs[k].terms.first().map(|t| t.1.clone()) else {
                    continue;
                };
                let Some(x) = idx.iter().find(|x| x.name == name) else {
                    continue;
                };
                if subs[k].terms.len() != 1 || subs[k].terms[0].0 != 1 {
                    continue;
                }
                let lo = d.lo - x.lo;
                let hi = x.h - d.h;
                for off in [-1, 1] {
                    let o = subs[k].constant + off;
                    if o != 0 && lo <= o && o <= hi {
                        subs[k].constant = o;
                        return Some(self.convert(Expr::Read(info.name, subs), info.elem, elem));
                    }
                }
            }
        }
        Some(self.convert(Expr::Read(info.name, subs), info.elem, elem))
    }

    /// A subscript of a dimension over index `x`: `x + o` with an offset that keeps it in the
    /// readable part (mostly 0), or reversed (`S - 1 - x`) where that fits.
    pub(super) fn subscript_with(&mut self, x: &Idx, d: &Dim) -> Option<Aff> {
        let lo = d.lo - x.lo;
        let hi = x.h - d.h;
        if lo > hi {
            return None;
        }
        if x.size != usize::MAX && self.rng.chance(0.08) && x.h >= d.lo && x.lo >= d.h {
            return Some(self.size_aff(x.size).term(-1, &x.name).plus(-1));
        }
        let o = if (lo..=hi).contains(&0) && self.rng.chance(0.65) {
            0
        } else {
            lo + self.rng.below((hi - lo + 1) as usize) as i64
        };
        Some(Aff::var(&x.name).plus(o))
    }

    /// A scalar function with branches: `if`/`else`, maybe a bounded `while`, and returns.
    pub(super) fn function(&mut self) {
        let elem = self.elem;
        let name = format!("f{}", self.kernel.functions.len());
        let lit = |rng: &mut Rng| -> Expr {
            if elem.is_float() {
                Expr::Lit(Lit::Float(*rng.pick(&[0.5, 1.5, 2.0, -0.25, 0.0])))
            } else {
                Expr::Lit(Lit::Int(*rng.pick(&[1, 2, -3, 0])))
            }
        };
        let mut names = vec!["a".to_string(), "b".to_string()];
        let value = |rng: &mut Rng, names: &[String], depth: usize| -> Expr {
            fn go(
                rng: &mut Rng,
                names: &[String],
                depth: usize,
                lit: &dyn Fn(&mut Rng) -> Expr,
            ) -> Expr {
                if depth == 0 || rng.chance(0.3) {
                    return if rng.chance(0.75) {
                        Expr::Name(names[rng.below(names.len())].clone())
                    } else {
                        lit(rng)
                    };
                }
                let a = go(rng, names, depth - 1, lit);
                let b = go(rng, names, depth - 1, lit);
                match rng.below(5) {
                    0 => Expr::Call("min".into(), vec![a, b]),
                    1 => Expr::Call("max".into(), vec![a, b]),
                    k => Expr::Bin(
                        [BinOp::Add, BinOp::Sub, BinOp::Mul][k - 2],
                        Box::new(a),
                        Box::new(b),
                    ),
                }
            }
            go(rng, names, depth, &lit)
        };
        let cond = |rng: &mut Rng, names: &[String]| -> Cond {
            let op = *rng.pick(&[CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge]);
            let a = Expr::Name(names[rng.below(names.len())].clone());
            let b = if rng.chance(0.5) {
                Expr::Name(names[rng.below(names.len())].clone())
            } else {
                lit(rng)
            };
            Cond::Cmp(op, a, b)
        };
        let mut body = Vec::new();
        body.push(FnStmt::Local {
            name: "acc".into(),
            ty: elem,
            mutable: true,
            value: value(&mut self.rng, &names, 2),
        });
        names.push("acc".into());
        if self.rng.chance(0.8) {
            let c = cond(&mut self.rng, &names);
            let then = vec![FnStmt::Assign(
                "acc".into(),
                value(&mut self.rng, &names, 2),
            )];
            let other = if self.rng.chance(0.6) {
                vec![FnStmt::Assign(
                    "acc".into(),
                    value(&mut self.rng, &names, 2),
                )]
            } else {
                Vec::new()
            };
            body.push(FnStmt::If(c, then, other));
        }
        if self.rng.chance(0.5) {
            // A loop that runs at most `limit` times.
            let limit = 1 + self.rng.below(4) as i64;
            body.push(FnStmt::Local {
                name: "n".into(),
                ty: Elem::I32,
                mutable: true,
                value: Expr::Lit(Lit::Int(0)),
            });
            let c = Cond::And(
                Box::new(Cond::Cmp(
                    CmpOp::Lt,
                    Expr::Name("n".into()),
                    Expr::Lit(Lit::Int(limit)),
                )),
                Box::new(cond(&mut self.rng, &names)),
            );
            let step = value(&mut self.rng, &names, 2);
            body.push(FnStmt::While(
                c,
                vec![
                    FnStmt::Assign("acc".into(), step),
                    FnStmt::Assign(
                        "n".into(),
                        Expr::Bin(
                            BinOp::Add,
                            Box::new(Expr::Name("n".into())),
                            Box::new(Expr::Lit(Lit::Int(1))),
                        ),
                    ),
                ],
            ));
        }
        if self.rng.chance(0.4) {
            let c = cond(&mut self.rng, &names);
            body.push(FnStmt::If(
                c,
                vec![FnStmt::Return(value(&mut self.rng, &names, 1))],
                Vec::new(),
            ));
        }
        body.push(FnStmt::Return(Expr::Name("acc".into())));
        self.kernel.functions.push(Function {
            name,
            params: vec![("a".into(), elem), ("b".into(), elem)],
            ret: elem,
            body,
        });
    }
}

/// A factor whose product with a value near one overflows `elem` (or wraps, for `i32`).
fn huge(elem: Elem) -> Lit {
    match elem {
        Elem::F16 => Lit::Float(60000.0),
        Elem::F32 => Lit::Float(3.0e38),
        Elem::F64 => Lit::Float(1.5e308),
        Elem::I32 => Lit::Int(2147483647),
    }
}
