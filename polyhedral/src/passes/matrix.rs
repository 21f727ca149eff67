//! Matrix-unit mapping: contractions whose point loops the target's matrix unit runs, retiled
//! in its fractals and marked for the back end.
//!
//! A statement qualifies when it is a [`crate::contraction`] with no loop-invariant factor
//! (the pipeline applies those beforehand where it can, [`crate::passes::prescale`]), its
//! operands of one element type the unit multiplies (f16 or f32), its sum and result in f32,
//! its domain a box (every constraint bounds one iterator), and its accesses such that a tile
//! is a matrix the unit's copies read row by row ([`qualifies_scaled`]). Of its m and n
//! iterators, one each is tiled: n the one that alone subscripts the written element's last
//! dimension, m one that alone subscripts another; the others run outside the tiles as the
//! batch does (a convolution's output rows). Its k iterators are laid out one after the other
//! in a tile (a convolution's channels, window rows and window columns: `CI × KH × KW` values
//! of k), the first tiled and the others whole: each operand must hold its rows one element
//! apart (one burst per value of k) or its k values, in that order, densely (one burst per
//! row). Its subtree must be a chain of bands scheduling it alone, the bands above it not
//! walking the tiled m and n or any k.
//!
//! The chain becomes, from the top:
//!
//! ```text
//! band [batch…, floor(m/Tm), floor(n/Tn)]   (coincident: one tile of the result each)
//!   mark matrix TmxTnxTk[*inner]
//!     band [floor(k/Tk)]                    (the k tiles, in order)
//!       band [m, k, k2…, n]                 (the points of one tile)
//! ```
//!
//! which is legal whatever the tiles: the statement's only dependences join instances that
//! write one element, and every element sees its k values in the tile layout's order. With one
//! k iterator that is ascending k, so the sums are the reference interpreter's, rounding for
//! rounding; with several it is the lexicographic order of the layout, a reassociation of the
//! sum where the layout lists them otherwise than the statement. Below the mark, the back end
//! keeps the tile of the result in the accumulator's memory across the k tiles.
//!
//! Where the statement right before it in a sequence sets the same elements to zero over the
//! same box and reads nothing (the init of `+=!`), it joins the tiles of the result: the mark
//! says `from zero` and holds a sequence of that statement's points and the k tiles. Its
//! instances of a tile run before the contraction's of that tile, which alone read them, so
//! that is legal too, and the back end starts the tile from zero instead of reading it.
//!
//! The sizes are multiples of the fractal: for `m` and `n` the ones with which the cores, each
//! taking its share of the result's tiles (over the batch too), move the fewest bytes (the
//! operands' rows and columns over all of k, the result in and out), then the largest, then tiles
//! that divide the extents; for `k` (values of the first k iterator, whose rows fill whole fractals
//! where there are others, or all of it) the largest whose operand tiles fit twice over (so the
//! next one is copied while the unit multiplies the current one) and that leaves at least `K_STEPS`
//! k tiles to overlap, else the smallest that fits twice, else the largest that fits once. Every
//! tile fits the memories the description names for the unit: the left operand's tile its memory,
//! the right one's its own, both together their parents (the staging buffer that fills them), the
//! accumulator's its memory and its parent. A fixed `--tile` gives the sizes of m, n and k in that
//! order instead, where they fit.

use crate::contraction::{contraction, Contraction};
use crate::passes::tile_size::TileSizes;
use crate::passes::{Pass, PassContext};
use crate::pipeline::Error;
use crate::program::{Access, AffineExpr, Expr, Program, ScalarType, StmtId, Var};
use crate::schedule::mark::{Mark, MatrixMark};
use crate::schedule::{Band, Filter, Node, NodeKind, QuasiAffine, ScheduleTree};
use crate::target::{MatrixMemories, TargetDescription};

/// The pass: contractions retiled and marked for the matrix unit.
pub const PASS: Pass = Pass {
    name: "matrix",
    summary: "contractions retiled in the matrix unit's fractals and marked for it (accelerator)",
    enabled: |target, _| target.matrix_memories().is_some() && target.fractal().is_some(),
    run,
};

fn run(cx: &mut PassContext) -> Result<(), Error> {
    let (Some(memories), Some(fractal)) = (cx.target.matrix_memories(), cx.target.fractal()) else {
        return Ok(());
    };
    let unit = Unit {
        target: cx.target,
        memories,
        fractal: i64::from(fractal.0.max(fractal.1).max(fractal.2)),
    };
    for stmt in cx.program.statement_ids() {
        let Some(c) = qualifies(cx.program, stmt) else {
            continue;
        };
        let Some(top) = chain_top(cx.program, &cx.tree, &c) else {
            continue;
        };
        let Some(mut mark) = unit.sizes(cx.program, &c, &cx.options.tiling) else {
            continue;
        };
        let init = zero_init(cx.program, &cx.tree, &top, &c);
        mark.zeroed = init.is_some();
        let Some(node) = retiled(&cx.tree, &top, &c, mark, init.as_ref()) else {
            continue;
        };
        match init {
            None => {
                if let Some(slot) = cx.tree.node_mut(&top) {
                    *slot = node;
                }
            }
            Some(init) => {
                let Some(sequence) = cx.tree.node_mut(&init.sequence) else {
                    continue;
                };
                let filter = Filter::of_statements(&[init.stmt, c.stmt]);
                sequence.children[init.index] = Node::with_child(NodeKind::Filter(filter), node);
                sequence.children.remove(init.index + 1);
            }
        }
    }
    Ok(())
}

/// The statement that sets a contraction's result to zero right before it (`+=!`), fused
/// into its tiles so that the matrix unit starts each tile from zero instead of reading it.
struct Init {
    stmt: StmtId,
    /// Per iterator of the contraction, the init statement's (none for k).
    iters: Vec<Option<usize>>,
    /// The sequence whose children are the two statements' filters, and the init's index.
    sequence: Vec<usize>,
    index: usize,
}

/// The init of `c` (see [`Init`]): the sibling filter right before the contraction's holds one
/// statement alone, in a chain of bands, that writes 0 to the element the contraction writes
/// over the same box of m, n and batch iterators and reads nothing.
fn zero_init(
    program: &Program,
    tree: &ScheduleTree,
    top: &[usize],
    c: &Contraction,
) -> Option<Init> {
    let n = top.len();
    if n < 2 {
        return None;
    }
    let (sequence, index) = (&top[..n - 2], top[n - 2]);
    let seq = tree.node(sequence)?;
    if !matches!(seq.kind, NodeKind::Sequence) || index == 0 {
        return None;
    }
    let unconstrained = |node: &Node, stmt: Option<StmtId>| match &node.kind {
        NodeKind::Filter(f) => match f.stmts.as_slice() {
            [(s, cs)] if cs.is_empty() && stmt.is_none_or(|x| x == *s) => Some(*s),
            _ => None,
        },
        _ => None,
    };
    unconstrained(&seq.children[index], Some(c.stmt))?;
    let prev = &seq.children[index - 1];
    let init = unconstrained(prev, None)?;
    // A chain of bands down to a leaf.
    let mut at = prev.children.first()?;
    while let NodeKind::Band(_) = at.kind {
        at = at.children.first()?;
    }
    if !matches!(at.kind, NodeKind::Leaf) {
        return None;
    }
    let (s0, s) = (
        &program.statements[init.index()],
        &program.statements[c.stmt.index()],
    );
    let zero = matches!(s0.exprs[s0.body], Expr::Literal(l) if l.value == 0.0);
    if !zero
        || !s0.reads.is_empty()
        || s0.reduction.is_some()
        || s0.depth() + c.k.len() != s.depth()
    {
        return None;
    }
    // The init's iterators are the contraction's but k, in order.
    let mut next = 0;
    let iters: Vec<Option<usize>> = (0..s.depth())
        .map(|q| {
            (!c.k.contains(&q)).then(|| {
                next += 1;
                next - 1
            })
        })
        .collect();
    let to_init = |q: usize| iters[q].unwrap_or(0);
    let written = s.write.subscripts.iter().map(|e| e.map_iters(to_init));
    if s0.write.array != s.write.array || !written.eq(s0.write.subscripts.iter().cloned()) {
        return None;
    }
    let same_box = (0..s.depth()).filter(|q| !c.k.contains(q)).all(|q| {
        iterator_range(program, c.stmt, q).is_some()
            && iterator_range(program, c.stmt, q) == iterator_range(program, init, to_init(q))
    });
    let boxed = s0.domain.iter().all(|k| {
        k.expr
            .terms()
            .iter()
            .filter(|(v, _)| matches!(v, Var::Iter(_)))
            .count()
            <= 1
    });
    (same_box && boxed).then(|| Init {
        stmt: init,
        iters,
        sequence: sequence.to_vec(),
        index: index - 1,
    })
}

/// The statements of `program` that the matrix unit of `target` can run, if it has one: the
/// scheduler fuses them with no other statement, so that each gets a band of its own.
pub fn contractions(program: &Program, target: &TargetDescription) -> Vec<StmtId> {
    if target.matrix_memories().is_none() || target.fractal().is_none() {
        return Vec::new();
    }
    program
        .statement_ids()
        .filter(|&s| qualifies(program, s).is_some())
        .collect()
}

/// The contraction of `stmt` when the matrix unit can run it (the module docs' conditions on
/// the statement).
pub fn qualifies(program: &Program, stmt: StmtId) -> Option<Contraction> {
    qualifies_scaled(program, stmt).filter(|c| c.scale_a.is_none() && c.scale_b.is_none())
}

/// The contraction of `stmt` when the matrix unit can run it once its operands' loop-invariant
/// factors, if any, are applied beforehand ([`crate::passes::prescale`]), its iterators
/// arranged as the unit runs them: `m[0]`, `n[0]` and `k[0]` are the ones tiled, the other m
/// and n iterators run outside the tiles as the batch does, and `k` is in the order its
/// values are laid out in a tile (module docs).
pub fn qualifies_scaled(program: &Program, stmt: StmtId) -> Option<Contraction> {
    let c = contraction(program, stmt)?;
    let s = &program.statements[stmt.index()];
    if c.ty != ScalarType::F32 {
        return None;
    }
    let (ea, eb) = (
        program.array(s.reads[c.a].array).elem,
        program.array(s.reads[c.b].array).elem,
    );
    if ea != eb || !matches!(ea, ScalarType::F16 | ScalarType::F32) {
        return None;
    }
    if program.array(s.write.array).elem != ScalarType::F32 {
        return None;
    }
    let iters = |e: &AffineExpr| {
        e.terms()
            .iter()
            .filter(|(v, _)| matches!(v, Var::Iter(_)))
            .count()
    };
    if s.domain.iter().any(|k| iters(&k.expr) > 1) {
        return None;
    }
    let swapped = Contraction {
        a: c.b,
        b: c.a,
        scale_a: c.scale_b,
        scale_b: c.scale_a,
        m: c.n.clone(),
        n: c.m.clone(),
        ..c.clone()
    };
    arranged(program, c).or_else(|| arranged(program, swapped))
}

/// `c` with its iterators arranged for the unit (see [`qualifies_scaled`]), when the result
/// is a matrix of rows along `m[0]` and columns along `n[0]` and each operand a matrix the
/// unit's copies read: along its rows (`m[0]` or `n[0]` one element apart) or along k (the
/// k iterators, in their order, dense: each tile's k values one run of elements).
fn arranged(program: &Program, mut c: Contraction) -> Option<Contraction> {
    let s = &program.statements[c.stmt.index()];
    let last = s.write.subscripts.len().checked_sub(1)?;
    let n = *c.n.iter().find(|&&n| unit_dim(&s.write, n) == Some(last))?;
    let (a, b) = (
        iterator_strides(program, &s.reads[c.a], s.depth()),
        iterator_strides(program, &s.reads[c.b], s.depth()),
    );
    let extent = |it: usize| iterator_range(program, c.stmt, it).map(|(lo, hi)| hi - lo + 1);
    // The k iterators in the order of A's strides, largest first (then B's): the layout of
    // an operand read along k.
    let mut order = c.k.clone();
    order.sort_by_key(|&k| (std::cmp::Reverse(a[k]), std::cmp::Reverse(b[k]), k));
    let order_b = {
        let mut o = c.k.clone();
        o.sort_by_key(|&k| (std::cmp::Reverse(b[k]), k));
        o
    };
    let dense = |st: &[i64], order: &[usize]| -> Option<bool> {
        let mut want = 1;
        for &k in order.iter().rev() {
            if st[k] != want {
                return Some(false);
            }
            want *= extent(k)?;
        }
        Some(true)
    };
    let along_rows = |st: &[i64], row: usize| st[row] == 1 && c.k.iter().all(|&k| st[k] > 0);
    let mut candidates: Vec<usize> =
        c.m.iter()
            .copied()
            .filter(|&m| unit_dim(&s.write, m).is_some_and(|d| d != last))
            .collect();
    candidates.sort_by_key(|&m| std::cmp::Reverse(unit_dim(&s.write, m)));
    for m in candidates {
        let (a_rows, b_rows) = (along_rows(&a, m), along_rows(&b, n));
        let order = match (a_rows, b_rows) {
            (_, true) if a_rows || dense(&a, &order)? => order.clone(),
            (true, false) if dense(&b, &order_b)? => order_b.clone(),
            (false, false) if dense(&a, &order)? && dense(&b, &order)? => order.clone(),
            _ => continue,
        };
        if a[m] <= 0 || b[n] <= 0 {
            continue;
        }
        let first = |v: &mut Vec<usize>, x: usize| {
            v.retain(|&y| y != x);
            v.insert(0, x);
        };
        first(&mut c.m, m);
        first(&mut c.n, n);
        c.k = order;
        return Some(c);
    }
    None
}

/// The elements between consecutive values of each of the statement's `depth` iterators in
/// `access`, in the array's row-major layout.
pub fn iterator_strides(program: &Program, access: &Access, depth: usize) -> Vec<i64> {
    let extents = program.array_extents(access.array);
    let mut dim = vec![1i64; extents.len()];
    for d in (0..extents.len().saturating_sub(1)).rev() {
        dim[d] = dim[d + 1] * extents[d + 1];
    }
    (0..depth)
        .map(|it| {
            access
                .subscripts
                .iter()
                .zip(&dim)
                .map(|(sub, st)| sub.coeff(Var::Iter(it)) * st)
                .sum()
        })
        .collect()
}

/// The iterators of `c` that run outside its tiles: the batch, and the m and n iterators
/// after the first (which the tiles walk).
pub fn outer_iterators(c: &Contraction) -> Vec<usize> {
    let mut outer = c.batch.clone();
    outer.extend(&c.m[1..]);
    outer.extend(&c.n[1..]);
    outer
}

/// The one dimension of `access` that iterator `it` subscripts, when it does so with
/// coefficient 1 and alone among the iterators there.
pub fn unit_dim(access: &Access, it: usize) -> Option<usize> {
    let dims: Vec<usize> = (0..access.subscripts.len())
        .filter(|&d| access.subscripts[d].coeff(Var::Iter(it)) != 0)
        .collect();
    let [d] = dims.as_slice() else { return None };
    let sub = &access.subscripts[*d];
    let others = sub
        .terms()
        .iter()
        .any(|(v, _)| matches!(v, Var::Iter(o) if *o != it));
    (sub.coeff(Var::Iter(it)) == 1 && !others).then_some(*d)
}

/// The lowest and highest value of iterator `it` over a box domain at the parameters' values.
fn iterator_range(program: &Program, stmt: StmtId, it: usize) -> Option<(i64, i64)> {
    let s = &program.statements[stmt.index()];
    let params = program.param_values();
    let (mut lo, mut hi) = (i64::MIN, i64::MAX);
    for k in &s.domain {
        let c = k.expr.coeff(Var::Iter(it));
        if c == 0 {
            continue;
        }
        let mut rest = k.expr.clone();
        rest.add_term(Var::Iter(it), -c);
        let r = rest.eval(&vec![0; s.depth()], &params);
        // c·it + r ≥ 0 (or = 0).
        let eq = k.kind == crate::program::ConstraintKind::Zero;
        if c > 0 || eq {
            lo = lo.max((-r).div_euclid(c.abs()) + i64::from((-r).rem_euclid(c.abs()) != 0));
        }
        if c < 0 || eq {
            hi = hi.min(r.div_euclid(c.abs()));
        }
    }
    (lo != i64::MIN && hi != i64::MAX && lo <= hi).then_some((lo, hi))
}

/// The path of the top of the chain of bands that schedules `c`'s statement alone, when the
/// chain walks its m, n and k iterators and the bands above it do not.
fn chain_top(program: &Program, tree: &ScheduleTree, c: &Contraction) -> Option<Vec<usize>> {
    let leaves = tree.find(&|k| matches!(k, NodeKind::Leaf));
    let mut path = leaves
        .into_iter()
        .find(|p| tree.statements_at(p).ok().as_deref() == Some(&[c.stmt]))?;
    path.pop();
    let is_own_band = |p: &[usize]| {
        matches!(tree.node(p).map(|n| &n.kind), Some(NodeKind::Band(_)))
            && tree.statements_at(p).ok().as_deref() == Some(&[c.stmt])
    };
    if !is_own_band(&path) {
        return None;
    }
    while path.len() > 1 && is_own_band(&path[..path.len() - 1]) {
        path.pop();
    }
    let walked = |p: &[usize]| -> Vec<usize> {
        let Some(NodeKind::Band(band)) = tree.node(p).map(|n| &n.kind) else {
            return Vec::new();
        };
        let f = band.functions(c.stmt).unwrap_or_default();
        let depth = program.statements[c.stmt.index()].depth();
        (0..depth)
            .filter(|&it| f.iter().any(|f| uses(f, it)))
            .collect()
    };
    let roles: Vec<usize> = [c.m[0], c.n[0]]
        .into_iter()
        .chain(c.k.iter().copied())
        .collect();
    for k in 0..path.len() {
        if walked(&path[..k]).iter().any(|it| roles.contains(it)) {
            return None;
        }
    }
    // The chain's members are functions of single iterators (points or tiles).
    let mut inside = Vec::new();
    let mut p = path.clone();
    while let Some(node) = tree.node(&p) {
        match &node.kind {
            NodeKind::Band(band) => {
                let f = band.functions(c.stmt)?;
                if f.iter().any(|f| single_iterator(f).is_none()) {
                    return None;
                }
                inside.extend(walked(&p));
                p.push(0);
            }
            NodeKind::Leaf => break,
            _ => return None,
        }
    }
    roles.iter().all(|it| inside.contains(it)).then_some(path)
}

/// Whether `f` uses iterator `it`, inside divisions too.
fn uses(f: &QuasiAffine, it: usize) -> bool {
    f.affine.coeff(Var::Iter(it)) != 0 || f.floors.iter().any(|t| uses(&t.num, it))
}

/// The iterator `f` walks when it is `it` or `floor(it / T)` (plus parameters and constants).
fn single_iterator(f: &QuasiAffine) -> Option<usize> {
    let iter_of = |a: &AffineExpr| -> Option<usize> {
        match a
            .terms()
            .iter()
            .filter(|(v, _)| matches!(v, Var::Iter(_)))
            .collect::<Vec<_>>()
            .as_slice()
        {
            [(Var::Iter(d), 1)] => Some(*d),
            _ => None,
        }
    };
    match f.floors.as_slice() {
        [] => iter_of(&f.affine),
        [t] if t.coeff == 1 && t.num.floors.is_empty() && iter_of(&f.affine).is_none() => f
            .affine
            .terms()
            .iter()
            .all(|(v, _)| !matches!(v, Var::Iter(_)))
            .then(|| iter_of(&t.num.affine))?,
        _ => None,
    }
}

/// The new subtree of the chain at `top` (module docs), with the init statement's tiles
/// where there is one.
fn retiled(
    tree: &ScheduleTree,
    top: &[usize],
    c: &Contraction,
    mark: MatrixMark,
    init: Option<&Init>,
) -> Option<Node> {
    let s = c.stmt;
    // The batch iterators (and the m and n ones not tiled) the chain walks; the others are
    // walked above it.
    let outer = outer_iterators(c);
    let mut batch = Vec::new();
    let mut p = top.to_vec();
    while let Some(Node {
        kind: NodeKind::Band(band),
        ..
    }) = tree.node(&p)
    {
        for f in band.functions(s)? {
            let it = single_iterator(f)?;
            if outer.contains(&it) && !batch.contains(&it) {
                batch.push(it);
            }
        }
        p.push(0);
    }
    let var = |it: usize| QuasiAffine::var(Var::Iter(it));
    let (m, n, k) = (c.m[0], c.n[0], c.k[0]);
    let band = |schedule: Vec<(StmtId, Vec<QuasiAffine>)>, coincident: Vec<bool>| {
        NodeKind::Band(Band {
            schedule,
            permutable: true,
            coincident,
        })
    };
    // m, the k iterators in their layout's order, n.
    let mut points = vec![var(m)];
    points.extend(c.k.iter().map(|&k| var(k)));
    points.push(var(n));
    let mut coincident = vec![false; points.len()];
    (coincident[0], coincident[points.len() - 1]) = (true, true);
    let points = Node::with_child(band(vec![(s, points)], coincident), Node::leaf());
    let k_tiles = Node::with_child(
        band(vec![(s, vec![var(k).floor_div(mark.k)?])], vec![false]),
        points,
    );
    // The tiles of the result: the batch, then m and n, of either statement.
    let tiles_of = |iter: &dyn Fn(usize) -> usize| -> Option<Vec<QuasiAffine>> {
        let mut tiles: Vec<QuasiAffine> = batch.iter().map(|&b| var(iter(b))).collect();
        tiles.push(var(iter(m)).floor_div(mark.m)?);
        tiles.push(var(iter(n)).floor_div(mark.n)?);
        Some(tiles)
    };
    let mut schedule = vec![(s, tiles_of(&|q| q)?)];
    let below = match init {
        None => k_tiles,
        Some(init) => {
            let at = |q: usize| init.iters[q].unwrap_or(0);
            schedule.insert(0, (init.stmt, tiles_of(&at)?));
            let zero = Node::with_child(
                band(
                    vec![(init.stmt, vec![var(at(m)), var(at(n))])],
                    vec![true, true],
                ),
                Node::leaf(),
            );
            Node::sequence(vec![
                (Filter::of_statements(&[init.stmt]), zero),
                (Filter::of_statements(&[s]), k_tiles),
            ])
        }
    };
    let marked = Node::with_child(NodeKind::Mark(Mark::Matrix(mark)), below);
    let coincident = vec![true; schedule[0].1.len()];
    Some(Node::with_child(band(schedule, coincident), marked))
}

/// The matrix unit as the pass sizes tiles for it.
struct Unit<'t> {
    target: &'t TargetDescription,
    memories: MatrixMemories,
    fractal: i64,
}

impl Unit<'_> {
    fn bytes(&self, id: crate::target::MemoryId) -> i64 {
        self.target.memory.node(id).bytes as i64
    }

    fn parent_bytes(&self, id: crate::target::MemoryId) -> Option<(crate::target::MemoryId, i64)> {
        let p = self.target.memory.node(id).parent?;
        Some((p, self.bytes(p)))
    }

    /// Whether tiles of `tm × tn × tk` (fractal multiples) fit the unit's memories, with
    /// `slots` of each operand's tile (two when the next k tile is copied while the unit
    /// multiplies the current one).
    fn fits_slots(&self, (tm, tn, tk): (i64, i64, i64), operand: i64, slots: i64) -> bool {
        let (a, b, acc) = (
            slots * tm * tk * operand,
            slots * tk * tn * operand,
            tm * tn * 4,
        );
        let mm = &self.memories;
        if a > self.bytes(mm.a) || b > self.bytes(mm.b) || acc > self.bytes(mm.acc) {
            return false;
        }
        let staging = match (self.parent_bytes(mm.a), self.parent_bytes(mm.b)) {
            (Some((pa, ba)), Some((pb, _))) if pa == pb => a + b <= ba,
            (Some((_, ba)), Some((_, bb))) => a <= ba && b <= bb,
            _ => true,
        };
        staging
            && self
                .parent_bytes(mm.acc)
                .is_none_or(|(_, bytes)| acc <= bytes)
    }

    fn fits(&self, tile: (i64, i64, i64), operand: i64) -> bool {
        self.fits_slots(tile, operand, 1)
    }

    /// The mark of `c` with its tile sizes, where some fit.
    fn sizes(&self, program: &Program, c: &Contraction, tiling: &TileSizes) -> Option<MatrixMark> {
        let s = &program.statements[c.stmt.index()];
        let operand = program.array(s.reads[c.a].array).elem.size_in_bytes() as i64;
        let extent = |it: usize| iterator_range(program, c.stmt, it).map(|(lo, hi)| hi - lo + 1);
        let (em, en, ek) = (extent(c.m[0])?, extent(c.n[0])?, extent(c.k[0])?);
        let f = self.fractal;
        let up = |e: i64| ceil_div(e, f) * f;
        let inner = c.k[1..].iter().try_fold(1, |p, &k| Some(p * extent(k)?))?;
        // The rows of k a tile of `tk` values of the first k iterator takes.
        let rows = |tk: i64| up(tk * inner);
        if let TileSizes::Fixed(v) = tiling {
            let size = |k: usize| *v.get(k).unwrap_or(v.last().unwrap_or(&f));
            let (tm, tn, tk) = (size(0).min(em), size(1).min(en), size(2).min(ek));
            if tm < 1 || tn < 1 || tk < 1 || !self.fits((up(tm), up(tn), rows(tk)), operand) {
                return None;
            }
            let why = format!("the sizes asked for, {operand}-byte operands");
            return Some(MatrixMark {
                m: tm,
                n: tn,
                k: tk,
                inner,
                zeroed: false,
                why,
            });
        }
        let candidates = |e: i64| -> Vec<i64> {
            let mut v: Vec<i64> = (1..=16).map(|k| k * f).filter(|&t| t < e).collect();
            v.push(up(e));
            v
        };
        let cores = i64::from(self.target.cores()).max(1);
        // Tiles of the result per value of the iterators outside them.
        let outer = outer_iterators(c)
            .iter()
            .try_fold(1, |p, &it| Some(p * extent(it)?))?;
        // The bytes one core moves: per tile of the result, its operands' rows and columns
        // over all of k and the result in and out; the fewest win, then larger tiles, then
        // tiles that divide the extents.
        // (bytes moved, larger first, divides), (tm, tn).
        type Ranked = ((i64, i64, bool), (i64, i64));
        let mut best: Option<Ranked> = None;
        for &tm in &candidates(em) {
            for &tn in &candidates(en) {
                if !self.fits((tm, tn, rows(1)), operand) {
                    continue;
                }
                let rounds = ceil_div(outer * ceil_div(em, tm) * ceil_div(en, tn), cores);
                let moved = rounds * ((tm + tn) * ek * inner * operand + 8 * tm * tn);
                let divides = (tm >= em || em % tm == 0) && (tn >= en || en % tn == 0);
                let key = (moved, -(tm * tn), !divides);
                if best.as_ref().is_none_or(|(k, _)| key < *k) {
                    best = Some((key, (tm, tn)));
                }
            }
        }
        let (_, (tm, tn)) = best?;
        // The k tile: double-buffered where that fits, and short enough that the copies of
        // [`K_STEPS`] tiles overlap the products (the largest such); else the largest that fits.
        // With other k iterators, the sizes whose rows fill whole fractals, and all of k.
        let k_candidates = || -> Vec<i64> {
            if inner == 1 {
                return candidates(ek);
            }
            (1..=ek)
                .filter(|&tk| tk == ek || tk * inner % f == 0)
                .collect()
        };
        let doubled: Vec<i64> = k_candidates()
            .into_iter()
            .filter(|&tk| self.fits_slots((tm, tn, rows(tk)), operand, 2))
            .collect();
        let tk = match doubled
            .iter()
            .filter(|&&tk| ceil_div(ek, tk) >= K_STEPS)
            .max()
        {
            Some(&tk) => tk,
            None => match doubled.iter().min() {
                Some(&tk) => tk,
                None => k_candidates()
                    .into_iter()
                    .filter(|&tk| self.fits((tm, tn, rows(tk)), operand))
                    .max()?,
            },
        };
        let node = |id| &self.target.memory.node(id).name;
        let why = format!(
            "{operand}-byte operands; {} tiles of the result over {cores} cores; {} {} B, {} {} B, {} {} B",
            outer * ceil_div(em, tm) * ceil_div(en, tn),
            node(self.memories.a),
            up(tm) * rows(tk) * operand,
            node(self.memories.b),
            rows(tk) * up(tn) * operand,
            node(self.memories.acc),
            up(tm) * up(tn) * 4,
        );
        Some(MatrixMark {
            m: tm,
            n: tn,
            k: tk,
            inner,
            zeroed: false,
            why,
        })
    }
}

/// The fewest k tiles per tile of the result that the sizes aim for, so that copies overlap
/// products.
const K_STEPS: i64 = 4;

/// `⌈a / b⌉` for `a ≥ 0`, `b > 0`.
fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}
