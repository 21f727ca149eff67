//! The random kernel generator: a [`Kernel`] from a seed, deterministically.
//!
//! A kernel has 1–3 sizes (small: each run takes milliseconds), 1–4 statements with loop depth
//! 1–4, and uses what the language offers: inferred and explicit ranges, triangular ranges
//! (`j in 0:i + 1`, `k in i + 1:N`), affine `where` conditions, stencil reads with offsets and
//! padded inputs, reversed subscripts, reductions (`+=!`, `max=!`, …) and updates (`+=`, …),
//! temporaries read by later statements, several outputs (in-out when read or partly written),
//! `for` loops around statements (time loops), element types `f16`, `f32`, `f64` and `i32` with
//! casts between them, math functions, `select`, and scalar functions with `if` and `while`.
//!
//! Every access stays in bounds whatever the sizes are: an index's range is tracked as
//! `lo <= x < S - h` for its size `S`, a tensor dimension's readable part as `lo <= x < S - h`
//! too (a padded input has `h < 0`; a temporary only where it was written), and an offset is
//! chosen so that the one fits in the other. Values stay small and finite where it matters:
//! divisors are `abs(…) + 1`, logarithms and square roots take `abs(…)`, integer division is by
//! a positive constant, except in the kernels that make special values on purpose (a fifth of
//! those without transcendental functions), where some float divisions are by zero and some
//! products are by a factor that overflows the type (floats to ±inf, `i32` wrapping); `select` and `if` conditions compare inputs and indices, never values
//! a target could round differently from the interpreter, and kernels with transcendental
//! functions (which may differ by an ulp between math libraries) call no scalar functions.

use super::kernel::{
    Aff, AffCond, BinOp, CmpOp, Cond, Elem, Expr, Item, Kernel, Lit, Op, Range, Stmt, Tensor,
};
use super::Rng;

mod expr;

/// The names indices are drawn from, in order.
const INDEX_NAMES: &[&str] = &["i", "j", "k", "l", "m", "n"];
/// The names of `for` loop variables.
const LOOP_NAMES: &[&str] = &["t", "u"];
/// The names of sizes.
const SIZE_NAMES: &[&str] = &["N", "M", "K"];
/// The deepest statement (loops around it included).
const MAX_DEPTH: usize = 4;
/// The share of kernels (without transcendental functions) that make special values.
const SPECIAL_KERNELS: f64 = 0.2;
/// In such a kernel, the share of divisions by zero and of products by a huge factor.
const SPECIAL_OPERATIONS: f64 = 0.3;

/// Generates the kernel of `seed`.
pub fn generate(seed: u64) -> Kernel {
    let mut rng = Rng::new(seed);
    let n_sizes = 1 + rng.below(3);
    let sizes: Vec<(String, i64)> = (0..n_sizes)
        .map(|k| (SIZE_NAMES[k].to_string(), 2 + rng.below(6) as i64))
        .collect();
    let elem = *rng.weighted(&[
        (Elem::F32, 35),
        (Elem::F64, 25),
        (Elem::I32, 20),
        (Elem::F16, 20),
    ]);
    let transcendental = elem.is_float() && elem != Elem::F16 && rng.chance(0.3);
    // Special values come from a generator of their own, so that the kernels of the main one
    // are those of every seed before they were added.
    let mut specials = Rng::new(seed ^ 0x5bec_1a15_0f1e_7d00);
    let specials = (!transcendental && specials.chance(SPECIAL_KERNELS)).then_some(specials);
    let mut g = Gen {
        rng,
        elem,
        transcendental,
        specials,
        kernel: Kernel {
            name: format!("k{:x}", seed & 0xffff_ffff),
            sizes,
            functions: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            body: Vec::new(),
            temporaries: Vec::new(),
        },
        arrays: Vec::new(),
        temps: 0,
    };
    if !transcendental && g.rng.chance(0.3) {
        for _ in 0..1 + g.rng.below(2) {
            g.function();
        }
    }
    let roll = g.rng.below(100);
    if roll < 12 {
        g.time_stencil();
    } else if roll < 24 {
        g.contraction();
    } else {
        g.body();
    }
    g.kernel
}

/// What a statement may read: a dimension's size and the part of it that holds values.
#[derive(Clone, Debug)]
struct Dim {
    size: usize,
    /// Readable: `lo <= x < S - h`.
    lo: i64,
    h: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Input,
    Output,
    Temp,
}

#[derive(Clone, Debug)]
struct ArrayInfo {
    name: String,
    elem: Elem,
    role: Role,
    dims: Vec<Dim>,
}

/// An index of the statement being generated (or an enclosing loop's variable).
#[derive(Clone, Debug)]
struct Idx {
    name: String,
    size: usize,
    /// Conservative range: `lo <= x < S - h`.
    lo: i64,
    h: i64,
    /// The `where` range, if the generator wrote one.
    range: Option<(Aff, Aff)>,
    /// A `for` variable rather than an index of the statement.
    looped: bool,
    on_lhs: bool,
    /// The left-hand side's subscript, where it is not the bare index (shifted or reversed).
    lhs_sub: Option<Aff>,
}

struct Gen {
    rng: Rng,
    elem: Elem,
    transcendental: bool,
    /// In a kernel with special values, what draws them: divisions by zero (±inf, NaN for
    /// 0/0) and products that overflow (±inf in floats, wrapping in `i32`).
    specials: Option<Rng>,
    kernel: Kernel,
    arrays: Vec<ArrayInfo>,
    temps: usize,
}

/// Where a statement writes.
enum Target {
    NewTemp,
    NewOutput,
    Existing(usize),
}

impl Gen {
    fn size_aff(&self, s: usize) -> Aff {
        Aff::var(&self.kernel.sizes[s].0)
    }

    /// The body: 1–4 statements, some of them inside a `for` loop.
    fn body(&mut self) {
        let n = *self
            .rng
            .weighted(&[(1usize, 15), (2, 35), (3, 30), (4, 20)]);
        // A `for` loop around statements `a..=b`.
        let looped = if self.rng.chance(0.2) {
            let a = self.rng.below(n);
            let b = a + self.rng.below(n - a);
            Some((a, b))
        } else {
            None
        };
        let mut items = Vec::new();
        let mut inner = Vec::new();
        let mut loop_var: Option<Idx> = None;
        for k in 0..n {
            let last = k + 1 == n;
            let inside = looped.is_some_and(|(a, b)| (a..=b).contains(&k));
            if inside && loop_var.is_none() {
                loop_var = Some(self.loop_var());
            }
            let fors: Vec<Idx> = if inside {
                loop_var.iter().cloned().collect()
            } else {
                Vec::new()
            };
            let stmt = self.statement(&fors, last);
            if inside {
                inner.push(Item::Stmt(stmt));
                if looped.is_some_and(|(_, b)| b == k) {
                    items.push(self.for_item(loop_var.take(), std::mem::take(&mut inner)));
                }
            } else {
                items.push(Item::Stmt(stmt));
            }
        }
        self.kernel.body = items;
    }

    fn loop_var(&mut self) -> Idx {
        let size = self.rng.below(self.kernel.sizes.len());
        // `for t in 0:S` (usable in subscripts of dimensions of size S) or `0:c` for a small
        // constant (a plain repetition: never a subscript).
        let constant = self.rng.chance(0.4);
        Idx {
            name: LOOP_NAMES[0].to_string(),
            size: if constant { usize::MAX } else { size },
            lo: 0,
            h: if constant {
                2 + self.rng.below(2) as i64
            } else {
                0
            },
            range: None,
            looped: true,
            on_lhs: false,
            lhs_sub: None,
        }
    }

    fn for_item(&self, var: Option<Idx>, body: Vec<Item>) -> Item {
        let var = var.expect("a loop variable exists while statements are inside the loop");
        let hi = if var.size == usize::MAX {
            Aff::constant(var.h)
        } else {
            self.size_aff(var.size)
        };
        Item::For {
            var: var.name,
            lo: Aff::constant(0),
            hi,
            body,
        }
    }

    /// A Jacobi-like time loop: one or two in-out arrays updated on their interior from their
    /// neighbours, `T` times.
    fn time_stencil(&mut self) {
        let rank = 1 + self.rng.below(2);
        let size = self.rng.below(self.kernel.sizes.len());
        let steps = 1 + self.rng.below(3) as i64;
        let two = self.rng.chance(0.6);
        let elem = if self.elem == Elem::I32 {
            Elem::F32
        } else {
            self.elem
        };
        self.elem = elem;
        let names: Vec<String> = if two {
            vec!["P".into(), "Q".into()]
        } else {
            vec!["P".into()]
        };
        for name in &names {
            self.kernel.outputs.push(Tensor {
                name: name.clone(),
                elem,
                dims: vec![self.size_aff(size); rank],
            });
            self.arrays.push(ArrayInfo {
                name: name.clone(),
                elem,
                role: Role::Output,
                dims: vec![Dim { size, lo: 0, h: 0 }; rank],
            });
        }
        let mut body = Vec::new();
        let order: Vec<(usize, usize)> = if two {
            vec![(1, 0), (0, 1)]
        } else {
            vec![(0, 0)]
        };
        for (dst, src) in order {
            let idx: Vec<Idx> = INDEX_NAMES[..rank]
                .iter()
                .map(|n| Idx {
                    name: n.to_string(),
                    size,
                    lo: 1,
                    h: 1,
                    range: Some((Aff::constant(1), self.size_aff(size).plus(-1))),
                    looped: false,
                    on_lhs: true,
                    lhs_sub: None,
                })
                .collect();
            let mut terms = vec![Expr::Read(
                names[src].clone(),
                idx.iter().map(|x| Aff::var(&x.name)).collect(),
            )];
            for d in 0..rank {
                for off in [-1, 1] {
                    if self.rng.chance(0.8) {
                        let subs = idx
                            .iter()
                            .enumerate()
                            .map(|(e, x)| Aff::var(&x.name).plus(if e == d { off } else { 0 }))
                            .collect();
                        terms.push(Expr::Read(names[src].clone(), subs));
                    }
                }
            }
            let sum = terms
                .into_iter()
                .reduce(|a, b| Expr::Bin(BinOp::Add, Box::new(a), Box::new(b)))
                .expect("the centre is always read");
            let rhs = Expr::Bin(
                BinOp::Mul,
                Box::new(Expr::Lit(Lit::Float(0.25))),
                Box::new(sum),
            );
            body.push(Item::Stmt(Stmt {
                lhs: names[dst].clone(),
                subs: idx.iter().map(|x| Aff::var(&x.name)).collect(),
                op: Op::Set,
                rhs,
                ranges: idx
                    .iter()
                    .map(|x| {
                        let (lo, hi) = x.range.clone().expect("every stencil index has a range");
                        Range {
                            index: x.name.clone(),
                            lo,
                            hi,
                        }
                    })
                    .collect(),
                conds: Vec::new(),
                loops: None,
            }));
        }
        for item in &mut body {
            if let Item::Stmt(s) = item {
                s.loops = Some(s.ranges.clone());
            }
        }
        self.kernel.body = vec![Item::For {
            var: LOOP_NAMES[0].to_string(),
            lo: Aff::constant(0),
            hi: Aff::constant(steps),
            body,
        }];
        // Sometimes a statement after the loop reads the result.
        if self.rng.chance(0.5) {
            let stmt = self.statement(&[], true);
            self.kernel.body.push(Item::Stmt(stmt));
        }
    }

    /// A matrix product as the accelerator's Cube computes it (`f16` operands, an `f32` sum),
    /// with sizes that are not multiples of its 16×16 fractal, sometimes transposed operands,
    /// and element-wise statements after it (bias, scaling, ReLU) on the product's tile.
    fn contraction(&mut self) {
        for (k, name) in ["M", "N", "K"].iter().enumerate() {
            // The accelerator takes rows of N and K that are whole 32-byte blocks of f16.
            let value = if k == 0 {
                *self.rng.pick(&[1i64, 3, 5, 16, 17, 20, 33])
            } else {
                *self.rng.weighted(&[(16i64, 4), (32, 3), (5, 1), (17, 1)])
            };
            if k < self.kernel.sizes.len() {
                self.kernel.sizes[k] = (name.to_string(), value);
            } else {
                self.kernel.sizes.push((name.to_string(), value));
            }
        }
        let sizes = |g: &Gen, dims: &[usize]| dims.iter().map(|&d| g.size_aff(d)).collect();
        let operand = *self
            .rng
            .weighted(&[(Elem::F16, 6), (Elem::F32, 2), (Elem::F64, 1)]);
        let (m, n, k) = (0, 1, 2);
        let transposed_a = self.rng.chance(0.15);
        let transposed_b = self.rng.chance(0.15);
        let a_dims = if transposed_a { [k, m] } else { [m, k] };
        let b_dims = if transposed_b { [n, k] } else { [k, n] };
        self.kernel.inputs.push(Tensor {
            name: "A".into(),
            elem: operand,
            dims: sizes(self, &a_dims),
        });
        self.kernel.inputs.push(Tensor {
            name: "B".into(),
            elem: operand,
            dims: sizes(self, &b_dims),
        });
        let read_a = Expr::Read(
            "A".into(),
            if transposed_a {
                vec![Aff::var("k"), Aff::var("i")]
            } else {
                vec![Aff::var("i"), Aff::var("k")]
            },
        );
        let read_b = Expr::Read(
            "B".into(),
            if transposed_b {
                vec![Aff::var("j"), Aff::var("k")]
            } else {
                vec![Aff::var("k"), Aff::var("j")]
            },
        );
        let sum = if operand == Elem::F64 {
            Elem::F64
        } else {
            Elem::F32
        };
        let product = Expr::Bin(BinOp::Mul, Box::new(read_a), Box::new(read_b));
        let epilogue = self.rng.below(3);
        let out_dims = sizes(self, &[m, n]);
        let full = |name: &str| Stmt {
            lhs: name.to_string(),
            subs: vec![Aff::var("i"), Aff::var("j")],
            op: Op::Set,
            rhs: Expr::Lit(Lit::Float(0.0)),
            ranges: Vec::new(),
            conds: Vec::new(),
            loops: Some(vec![
                Range {
                    index: "i".into(),
                    lo: Aff::constant(0),
                    hi: Aff::var("M"),
                },
                Range {
                    index: "j".into(),
                    lo: Aff::constant(0),
                    hi: Aff::var("N"),
                },
            ]),
        };
        let mut body = Vec::new();
        let acc = if epilogue == 0 { "C" } else { "T" };
        let mut first = full(acc);
        first.op = Op::AddInit;
        first.rhs = product;
        if let Some(loops) = first.loops.as_mut() {
            loops.push(Range {
                index: "k".into(),
                lo: Aff::constant(0),
                hi: Aff::var("K"),
            });
        }
        body.push(Item::Stmt(first));
        let tensor = |name: &str| Tensor {
            name: name.to_string(),
            elem: sum,
            dims: out_dims.clone(),
        };
        if epilogue == 0 {
            self.kernel.outputs.push(tensor("C"));
        } else {
            self.kernel.temporaries.push(tensor("T"));
            let mut previous = "T".to_string();
            for e in 0..epilogue {
                let mut value = Expr::Read(previous.clone(), vec![Aff::var("i"), Aff::var("j")]);
                for _ in 0..1 + self.rng.below(3) {
                    let operand = match self.rng.below(3) {
                        0 => {
                            if !self.kernel.inputs.iter().any(|t| t.name == "bias") {
                                self.kernel.inputs.push(Tensor {
                                    name: "bias".into(),
                                    elem: sum,
                                    dims: vec![self.size_aff(n)],
                                });
                            }
                            Expr::Read("bias".into(), vec![Aff::var("j")])
                        }
                        1 => {
                            if !self.kernel.inputs.iter().any(|t| t.name == "alpha") {
                                self.kernel.inputs.push(Tensor {
                                    name: "alpha".into(),
                                    elem: sum,
                                    dims: Vec::new(),
                                });
                            }
                            Expr::Read("alpha".into(), Vec::new())
                        }
                        _ => Expr::Lit(Lit::Float(*self.rng.pick(&[0.5, 2.0, -1.0]))),
                    };
                    value = match self.rng.below(4) {
                        0 => Expr::Bin(BinOp::Add, Box::new(value), Box::new(operand)),
                        1 => Expr::Bin(BinOp::Mul, Box::new(value), Box::new(operand)),
                        2 => Expr::Bin(BinOp::Sub, Box::new(value), Box::new(operand)),
                        _ => Expr::Call("max".into(), vec![value, Expr::Lit(Lit::Float(0.0))]),
                    };
                }
                let name = if e + 1 == epilogue {
                    "C".to_string()
                } else {
                    format!("U{e}")
                };
                let mut stmt = full(&name);
                stmt.rhs = value;
                body.push(Item::Stmt(stmt));
                if e + 1 == epilogue {
                    self.kernel.outputs.push(tensor("C"));
                } else {
                    self.kernel.temporaries.push(tensor(&name));
                }
                previous = name;
            }
        }
        self.kernel.body = body;
    }

    /// One statement; the last one of the kernel writes an output.
    fn statement(&mut self, fors: &[Idx], last: bool) -> Stmt {
        let outputs: Vec<usize> = (0..self.arrays.len())
            .filter(|&a| self.arrays[a].role == Role::Output)
            .collect();
        let budget = MAX_DEPTH - fors.len();
        let target = if last && (outputs.is_empty() || self.rng.chance(0.6)) {
            Target::NewOutput
        } else if last {
            Target::Existing(outputs[self.rng.below(outputs.len())])
        } else {
            match self.rng.below(4) {
                0 | 1 => Target::NewTemp,
                2 => Target::NewOutput,
                _ if !outputs.is_empty() => {
                    Target::Existing(outputs[self.rng.below(outputs.len())])
                }
                _ => Target::NewTemp,
            }
        };
        let op = match target {
            Target::NewTemp => *self.rng.weighted(&[
                (Op::Set, 45),
                (Op::AddInit, 30),
                (Op::MaxInit, 10),
                (Op::MinInit, 10),
                (Op::MulInit, 5),
            ]),
            _ => *self.rng.weighted(&[
                (Op::Set, 35),
                (Op::AddInit, 20),
                (Op::MaxInit, 5),
                (Op::MinInit, 5),
                (Op::MulInit, 3),
                (Op::Add, 15),
                (Op::Sub, 5),
                (Op::Mul, 5),
                (Op::Max, 4),
                (Op::Min, 3),
            ]),
        };
        let n_sizes = self.kernel.sizes.len();
        // The left-hand side's dimensions.
        let lhs_dims: Vec<usize> = match target {
            Target::Existing(a) => self.arrays[a].dims.iter().map(|d| d.size).collect(),
            _ => {
                let rank = 1 + self.rng.below(budget.min(3));
                (0..rank).map(|_| self.rng.below(n_sizes)).collect()
            }
        };
        let temp = matches!(target, Target::NewTemp);
        let mut idx: Vec<Idx> = fors.to_vec();
        for (d, &size) in lhs_dims.iter().enumerate() {
            let mut x = self.index(INDEX_NAMES[d], size, &idx, temp, true);
            if !temp && self.rng.chance(0.1) {
                self.shift_lhs(&mut x);
            }
            idx.push(x);
        }
        if op.reduces() {
            let room = (MAX_DEPTH - idx.len()).min(2);
            let n = if room == 0 {
                0
            } else if op.initialises() || self.rng.chance(0.6) {
                1 + self.rng.below(room)
            } else {
                self.rng.below(room + 1)
            };
            for _ in 0..n {
                let size = self.rng.below(n_sizes);
                let name = INDEX_NAMES[idx.iter().filter(|x| !x.looped).count()];
                let x = self.index(name, size, &idx, false, false);
                idx.push(x);
            }
        }
        let mut conds = Vec::new();
        if !temp && self.rng.chance(0.2) {
            if let Some(c) = self.condition(&idx) {
                conds.push(c);
            }
        }
        let elem = match target {
            Target::Existing(a) => self.arrays[a].elem,
            _ => self.pick_elem(),
        };
        // Every reduction index is read: one factor per reduction index, times the rest.
        let mut rhs = self.expr(elem, &idx, 2);
        for x in idx
            .iter()
            .filter(|x| !x.on_lhs && !x.looped)
            .cloned()
            .collect::<Vec<_>>()
        {
            let read = self.read_using(elem, &idx, &x);
            rhs = Expr::Bin(BinOp::Mul, Box::new(rhs), Box::new(read));
        }
        if !temp && self.rng.chance(0.15) {
            // Read the written array itself at a neighbour: a loop-carried dependence.
            if let Target::Existing(a) = target {
                if let Some(read) = self.read_array(a, elem, &idx, true) {
                    rhs = Expr::Bin(BinOp::Add, Box::new(rhs), Box::new(read));
                }
            }
        }

        let (name, subs) = match target {
            Target::Existing(a) => (
                self.arrays[a].name.clone(),
                idx.iter()
                    .filter(|x| x.on_lhs)
                    .map(|x| x.lhs_sub.clone().unwrap_or_else(|| Aff::var(&x.name)))
                    .collect(),
            ),
            _ => {
                let lhs: Vec<&Idx> = idx.iter().filter(|x| x.on_lhs).collect();
                let name = if temp {
                    self.temps += 1;
                    format!("T{}", self.temps)
                } else {
                    format!("O{}", self.kernel.outputs.len() + 1)
                };
                let dims = lhs
                    .iter()
                    .map(|x| Dim {
                        size: x.size,
                        lo: x.lo,
                        h: x.h,
                    })
                    .collect::<Vec<_>>();
                let tensor = Tensor {
                    name: name.clone(),
                    elem,
                    dims: lhs
                        .iter()
                        .map(|x| self.size_aff(x.size).plus(if temp { -x.h } else { 0 }))
                        .collect(),
                };
                if temp {
                    self.kernel.temporaries.push(tensor);
                } else {
                    self.kernel.outputs.push(tensor);
                }
                let subs = lhs
                    .iter()
                    .map(|x| x.lhs_sub.clone().unwrap_or_else(|| Aff::var(&x.name)))
                    .collect();
                self.arrays.push(ArrayInfo {
                    name: name.clone(),
                    elem,
                    role: if temp { Role::Temp } else { Role::Output },
                    dims: if temp {
                        dims
                    } else {
                        lhs.iter()
                            .map(|x| Dim {
                                size: x.size,
                                lo: 0,
                                h: 0,
                            })
                            .collect()
                    },
                });
                (name, subs)
            }
        };
        let ranges = self.ranges(&idx, &rhs, !temp);
        let loops = idx
            .iter()
            .filter(|x| !x.looped)
            .map(|x| {
                let (lo, hi) = x
                    .range
                    .clone()
                    .unwrap_or_else(|| (Aff::constant(0), self.size_aff(x.size)));
                Range {
                    index: x.name.clone(),
                    lo,
                    hi,
                }
            })
            .collect();
        Stmt {
            lhs: name,
            subs,
            op,
            rhs,
            ranges,
            conds,
            loops: Some(loops),
        }
    }

    /// Writes dimension `x` of an output shifted by one (`x + 1`, the range made to end one
    /// early) or reversed (`S - x - 1`); either way the range is written out, since a subscript
    /// that is not a bare index gives its index no range.
    fn shift_lhs(&mut self, x: &mut Idx) {
        let s = self.size_aff(x.size);
        let value = self.kernel.sizes[x.size].1;
        if self.rng.chance(0.5) && value >= 2 {
            if x.h == 0 {
                x.h = 1;
                x.range = Some(match x.range.take() {
                    Some((lo, _)) if x.lo + 1 < value => (lo, s.plus(-1)),
                    _ => {
                        x.lo = 0;
                        (Aff::constant(0), s.plus(-1))
                    }
                });
            }
            x.lhs_sub = Some(Aff::var(&x.name).plus(1));
        } else {
            if x.range.is_none() {
                x.range = Some((Aff::constant(x.lo), s.plus(-x.h)));
            }
            x.lhs_sub = Some(self.size_aff(x.size).term(-1, &x.name).plus(-1));
        }
    }

    fn pick_elem(&mut self) -> Elem {
        if self.rng.chance(0.15) {
            *self.rng.pick(&[Elem::F16, Elem::F32, Elem::F64, Elem::I32])
        } else {
            self.elem
        }
    }

    /// A new index of the statement: its range is the whole size, a part of it, or triangular
    /// on an earlier index of the same size. Temporaries get rectangular ranges, so that later
    /// statements know which of their elements hold values.
    fn index(&mut self, name: &str, size: usize, earlier: &[Idx], rect: bool, lhs: bool) -> Idx {
        let mut x = Idx {
            name: name.to_string(),
            size,
            lo: 0,
            h: 0,
            range: None,
            looped: false,
            on_lhs: lhs,
            lhs_sub: None,
        };
        let s = self.size_aff(size);
        let same: Vec<&Idx> = earlier.iter().filter(|y| y.size == size).collect();
        let roll = self.rng.below(100);
        if roll < 65 {
            // The whole size; written out or inferred (see `ranges`).
        } else if roll < 82 || rect || same.is_empty() {
            // Not empty at the kernel's sizes: `lo < S - h`.
            let value = self.kernel.sizes[size].1;
            x.h = self.rng.below(3.min(value) as usize) as i64;
            x.lo = self.rng.below(2.min(value - x.h) as usize) as i64;
            x.range = Some((Aff::constant(x.lo), s.plus(-x.h)));
        } else {
            let y = same[self.rng.below(same.len())];
            let yv = Aff::var(&y.name);
            match self.rng.below(if lhs { 3 } else { 4 }) {
                0 => {
                    x.lo = 0;
                    x.h = y.h;
                    x.range = Some((Aff::constant(0), yv.plus(1)));
                }
                1 => {
                    x.lo = y.lo;
                    x.h = 0;
                    x.range = Some((yv, s));
                }
                2 => {
                    x.lo = y.lo + 1;
                    x.h = 0;
                    x.range = Some((yv.plus(1), s));
                }
                _ => {
                    // A window after `y`, as a convolution reads: past the size by `w - 1`.
                    let w = 2 + self.rng.below(2) as i64;
                    x.lo = y.lo;
                    x.h = y.h - (w - 1);
                    x.range = Some((yv.clone(), yv.plus(w)));
                }
            }
        }
        x
    }

    /// An affine condition between two indices of the same size, or an index and its size.
    fn condition(&mut self, idx: &[Idx]) -> Option<AffCond> {
        let subscriptable: Vec<&Idx> = idx.iter().filter(|x| x.size != usize::MAX).collect();
        if subscriptable.is_empty() {
            return None;
        }
        let x = *self.rng.pick(&subscriptable);
        let s = self.size_aff(x.size);
        let others: Vec<&Idx> = subscriptable
            .iter()
            .copied()
            .filter(|y| y.size == x.size && y.name != x.name)
            .collect();
        let xv = Aff::var(&x.name);
        Some(
            if let (false, Some(&y)) = (others.is_empty(), others.first()) {
                let y = if others.len() > 1 {
                    others[self.rng.below(others.len())]
                } else {
                    y
                };
                let yv = Aff::var(&y.name);
                match self.rng.below(5) {
                    0 => AffCond {
                        lhs: xv,
                        op: CmpOp::Le,
                        rhs: yv,
                    },
                    1 => AffCond {
                        lhs: xv.term(1, &y.name),
                        op: CmpOp::Lt,
                        rhs: s,
                    },
                    2 => AffCond {
                        lhs: xv.term(1, &y.name),
                        op: CmpOp::Ge,
                        rhs: s.plus(-1),
                    },
                    3 => AffCond {
                        lhs: Aff::default().term(2, &x.name),
                        op: CmpOp::Le,
                        rhs: yv.plus(1),
                    },
                    _ => AffCond {
                        lhs: xv,
                        op: CmpOp::Gt,
                        rhs: yv,
                    },
                }
            } else {
                match self.rng.below(3) {
                    0 => AffCond {
                        lhs: Aff::default().term(2, &x.name),
                        op: CmpOp::Lt,
                        rhs: s.plus(1),
                    },
                    1 => AffCond {
                        lhs: xv,
                        op: CmpOp::Ge,
                        rhs: Aff::constant(1),
                    },
                    _ => AffCond {
                        lhs: xv,
                        op: CmpOp::Le,
                        rhs: s.plus(-2),
                    },
                }
            },
        )
    }

    /// The `where` ranges the statement needs. An index keeps an inferred range only where
    /// inference gives exactly its size: it subscripts bare a dimension whose extent is the
    /// size (an output, an unpadded input, a whole temporary) and none smaller; otherwise its
    /// range is written out (`where x in 0:S`).
    fn ranges(&mut self, idx: &[Idx], rhs: &Expr, declared_lhs: bool) -> Vec<Range> {
        let mut out = Vec::new();
        for x in idx.iter().filter(|x| !x.looped) {
            let (lo, hi) = match &x.range {
                Some(r) => r.clone(),
                None => {
                    let mut extents = Vec::new();
                    self.bare_extents(rhs, &x.name, &mut extents);
                    let smallest = extents.iter().copied().min();
                    // A declared array's own extent bounds an index of its left-hand side, and
                    // the right-hand side's smallest extent must then agree with it.
                    let inferable = if x.on_lhs && declared_lhs {
                        smallest.is_none_or(|p| p == 0)
                    } else {
                        smallest == Some(0)
                    };
                    if inferable && self.rng.chance(0.85) {
                        continue;
                    }
                    (Aff::constant(0), self.size_aff(x.size))
                }
            };
            out.push(Range {
                index: x.name.clone(),
                lo,
                hi,
            });
        }
        out
    }

    /// The extents (as `size + p`, giving `p`) of every dimension `name` subscripts bare in `e`.
    fn bare_extents(&self, e: &Expr, name: &str, out: &mut Vec<i64>) {
        match e {
            Expr::Read(array, subs) => {
                for (d, s) in subs.iter().enumerate() {
                    if s.terms.len() == 1 && s.terms[0] == (1, name.to_string()) && s.constant == 0
                    {
                        if let Some(p) = self.extent_pad(array, d) {
                            out.push(p);
                        }
                    }
                }
            }
            Expr::Name(_) | Expr::Lit(_) => {}
            Expr::Neg(a) => self.bare_extents(a, name, out),
            Expr::Bin(_, a, b) => {
                self.bare_extents(a, name, out);
                self.bare_extents(b, name, out);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| self.bare_extents(a, name, out)),
            Expr::Select(c, a, b) => {
                self.cond_bare_extents(c, name, out);
                self.bare_extents(a, name, out);
                self.bare_extents(b, name, out);
            }
        }
    }

    fn cond_bare_extents(&self, c: &Cond, name: &str, out: &mut Vec<i64>) {
        match c {
            Cond::Cmp(_, a, b) => {
                self.bare_extents(a, name, out);
                self.bare_extents(b, name, out);
            }
            Cond::And(a, b) | Cond::Or(a, b) => {
                self.cond_bare_extents(a, name, out);
                self.cond_bare_extents(b, name, out);
            }
            Cond::Not(a) => self.cond_bare_extents(a, name, out),
        }
    }

    /// The extent of dimension `d` of `array` minus its size.
    fn extent_pad(&self, array: &str, d: usize) -> Option<i64> {
        if let Some(t) = self
            .kernel
            .inputs
            .iter()
            .chain(&self.kernel.outputs)
            .find(|t| t.name == array)
        {
            return t.dims.get(d).map(|a| a.constant);
        }
        // A temporary: its extent is the end of its written range.
        self.arrays
            .iter()
            .find(|a| a.name == array)
            .and_then(|a| a.dims.get(d))
            .map(|dim| -dim.h)
    }
}

/// Whether `e` mentions `name` anywhere (in a subscript or as a value).
pub fn expr_mentions(e: &Expr, name: &str) -> bool {
    match e {
        Expr::Read(a, subs) => a == name || subs.iter().any(|s| s.mentions(name)),
        Expr::Name(n) => n == name,
        Expr::Lit(_) => false,
        Expr::Neg(a) => expr_mentions(a, name),
        Expr::Bin(_, a, b) => expr_mentions(a, name) || expr_mentions(b, name),
        Expr::Call(f, args) => f == name || args.iter().any(|a| expr_mentions(a, name)),
        Expr::Select(c, a, b) => {
            cond_mentions(c, name) || expr_mentions(a, name) || expr_mentions(b, name)
        }
    }
}

pub fn cond_mentions(c: &Cond, name: &str) -> bool {
    match c {
        Cond::Cmp(_, a, b) => expr_mentions(a, name) || expr_mentions(b, name),
        Cond::And(a, b) | Cond::Or(a, b) => cond_mentions(a, name) || cond_mentions(b, name),
        Cond::Not(a) => cond_mentions(a, name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_kernel() {
        for seed in 0..50 {
            assert_eq!(generate(seed).to_pf(), generate(seed).to_pf());
        }
        assert_ne!(generate(1).to_pf(), generate(2).to_pf());
    }

    #[test]
    fn kernels_have_outputs_and_bounded_depth() {
        for seed in 0..300 {
            let k = generate(seed);
            assert!(!k.outputs.is_empty(), "{}", k.to_pf());
            let stmts = k.statements();
            assert!((1..=5).contains(&stmts.len()), "{}", k.to_pf());
        }
    }
}
