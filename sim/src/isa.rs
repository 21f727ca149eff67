//! The instruction set: memories, pipes, element types, operands and the program tree that the
//! assembly text denotes.
//!
//! A `Program` is the parsed form of a `.npuasm` file and the only thing the printer and the
//! assembler see. Names (buffers, loop counters) are kept as written; the assembler resolves them.
//! Vector strides are in 32-byte blocks, copy lengths and gaps in the unit their instruction
//! documents (see ISA.md).

use crate::diagnostic::Span;

/// A memory: GM is shared by all cores, the others are private to a core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mem {
    Gm,
    L1,
    L0a,
    L0b,
    L0c,
    Ub,
}

impl Mem {
    pub const COUNT: usize = 6;
    pub const ALL: [Mem; 6] = [Mem::Gm, Mem::L1, Mem::L0a, Mem::L0b, Mem::L0c, Mem::Ub];

    pub fn name(self) -> &'static str {
        match self {
            Mem::Gm => "GM",
            Mem::L1 => "L1",
            Mem::L0a => "L0A",
            Mem::L0b => "L0B",
            Mem::L0c => "L0C",
            Mem::Ub => "UB",
        }
    }

    pub fn from_name(s: &str) -> Option<Mem> {
        Mem::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// An execution pipe. Each pipe runs its instructions in order; S issues all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pipe {
    S,
    V,
    M,
    Mte1,
    Mte2,
    Mte3,
}

impl Pipe {
    pub const COUNT: usize = 6;
    pub const ALL: [Pipe; 6] = [
        Pipe::S,
        Pipe::V,
        Pipe::M,
        Pipe::Mte1,
        Pipe::Mte2,
        Pipe::Mte3,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Pipe::S => "S",
            Pipe::V => "V",
            Pipe::M => "M",
            Pipe::Mte1 => "MTE1",
            Pipe::Mte2 => "MTE2",
            Pipe::Mte3 => "MTE3",
        }
    }

    pub fn from_name(s: &str) -> Option<Pipe> {
        Pipe::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// A data path between two memories, with its own bandwidth in the machine description.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CopyPath {
    GmL1,
    GmUb,
    UbGm,
    UbL1,
    L1L0a,
    L1L0b,
    L0cUb,
    UbUb,
}

impl CopyPath {
    pub const COUNT: usize = 8;
    pub const ALL: [CopyPath; 8] = [
        CopyPath::GmL1,
        CopyPath::GmUb,
        CopyPath::UbGm,
        CopyPath::UbL1,
        CopyPath::L1L0a,
        CopyPath::L1L0b,
        CopyPath::L0cUb,
        CopyPath::UbUb,
    ];

    pub fn ends(self) -> (Mem, Mem) {
        match self {
            CopyPath::GmL1 => (Mem::Gm, Mem::L1),
            CopyPath::GmUb => (Mem::Gm, Mem::Ub),
            CopyPath::UbGm => (Mem::Ub, Mem::Gm),
            CopyPath::UbL1 => (Mem::Ub, Mem::L1),
            CopyPath::L1L0a => (Mem::L1, Mem::L0a),
            CopyPath::L1L0b => (Mem::L1, Mem::L0b),
            CopyPath::L0cUb => (Mem::L0c, Mem::Ub),
            CopyPath::UbUb => (Mem::Ub, Mem::Ub),
        }
    }

    pub fn between(from: Mem, to: Mem) -> Option<CopyPath> {
        CopyPath::ALL.into_iter().find(|p| p.ends() == (from, to))
    }

    pub fn name(self) -> String {
        let (a, b) = self.ends();
        format!("{}->{}", a.name(), b.name())
    }

    /// The pipe that drives a plain `copy` on this path.
    pub fn pipe(self) -> Pipe {
        match self {
            CopyPath::GmL1 | CopyPath::GmUb => Pipe::Mte2,
            CopyPath::UbGm | CopyPath::UbL1 => Pipe::Mte3,
            CopyPath::L1L0a | CopyPath::L1L0b => Pipe::Mte1,
            CopyPath::L0cUb | CopyPath::UbUb => Pipe::V,
        }
    }
}

/// Element types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F16,
    F32,
    I32,
}

impl DType {
    pub fn size(self) -> u64 {
        match self {
            DType::F16 => 2,
            DType::F32 | DType::I32 => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::F32 => "f32",
            DType::I32 => "i32",
        }
    }

    pub fn from_name(s: &str) -> Option<DType> {
        [DType::F16, DType::F32, DType::I32]
            .into_iter()
            .find(|t| t.name() == s)
    }
}

/// A byte offset: `constant + Σ coefficient·variable`, the variables being loop counters,
/// `block_idx` or integer registers.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Affine {
    pub constant: i64,
    pub terms: Vec<(String, i64)>,
}

impl Affine {
    pub fn constant(c: i64) -> Affine {
        Affine {
            constant: c,
            terms: Vec::new(),
        }
    }
}

/// `buffer[offset]`: a byte address inside a declared buffer or kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addr {
    pub buffer: String,
    pub offset: Affine,
    pub span: Span,
}

/// A scalar register: `s0..s31` hold integers, `f0..f31` floating-point values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reg {
    S(u8),
    F(u8),
}

pub const REGS: u8 = 32;

/// A scalar operand.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    Int(i64),
    Float(f64),
    Reg(Reg),
    /// A loop counter or `block_idx`.
    Var(String),
}

/// Vector iteration: `repeat` repeats of 256 bytes; per operand a block stride and a repeat
/// stride in 32-byte blocks (for reductions' destinations: a repeat stride in elements).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VecCfg {
    pub repeat: u32,
    pub blk: Vec<u32>,
    pub rep: Vec<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VBinOp {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    And,
    Or,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VScalarOp {
    Adds,
    Muls,
    Maxs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VUnOp {
    Exp,
    Ln,
    Rec,
    Rsqrt,
    Sqrt,
    Abs,
    Relu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VRedOp {
    Cadd,
    Cmax,
    Cmin,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SOp {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
}

/// Names used in the text for each operation; the parser and printer share these tables.
pub const VBIN_NAMES: [(VBinOp, &str); 8] = [
    (VBinOp::Add, "vadd"),
    (VBinOp::Sub, "vsub"),
    (VBinOp::Mul, "vmul"),
    (VBinOp::Div, "vdiv"),
    (VBinOp::Max, "vmax"),
    (VBinOp::Min, "vmin"),
    (VBinOp::And, "vand"),
    (VBinOp::Or, "vor"),
];
pub const VSCALAR_NAMES: [(VScalarOp, &str); 3] = [
    (VScalarOp::Adds, "vadds"),
    (VScalarOp::Muls, "vmuls"),
    (VScalarOp::Maxs, "vmaxs"),
];
pub const VUN_NAMES: [(VUnOp, &str); 7] = [
    (VUnOp::Exp, "vexp"),
    (VUnOp::Ln, "vln"),
    (VUnOp::Rec, "vrec"),
    (VUnOp::Rsqrt, "vrsqrt"),
    (VUnOp::Sqrt, "vsqrt"),
    (VUnOp::Abs, "vabs"),
    (VUnOp::Relu, "vrelu"),
];
pub const VRED_NAMES: [(VRedOp, &str); 3] = [
    (VRedOp::Cadd, "vcadd"),
    (VRedOp::Cmax, "vcmax"),
    (VRedOp::Cmin, "vcmin"),
];
pub const CMP_NAMES: [(CmpOp, &str); 6] = [
    (CmpOp::Eq, "eq"),
    (CmpOp::Ne, "ne"),
    (CmpOp::Lt, "lt"),
    (CmpOp::Le, "le"),
    (CmpOp::Gt, "gt"),
    (CmpOp::Ge, "ge"),
];
pub const SOP_NAMES: [(SOp, &str); 6] = [
    (SOp::Add, "add"),
    (SOp::Sub, "sub"),
    (SOp::Mul, "mul"),
    (SOp::Div, "div"),
    (SOp::Min, "min"),
    (SOp::Max, "max"),
];

pub(crate) fn name_of<T: PartialEq + Copy>(table: &[(T, &'static str)], op: T) -> &'static str {
    table
        .iter()
        .find(|(o, _)| *o == op)
        .map_or("?", |(_, n)| *n)
}

pub(crate) fn op_of<T: Copy>(table: &[(T, &'static str)], name: &str) -> Option<T> {
    table.iter().find(|(_, n)| *n == name).map(|(o, _)| *o)
}

/// One machine instruction.
#[derive(Clone, Debug, PartialEq)]
pub enum Instr {
    /// DMA: `n_burst` bursts of `len` 32-byte blocks, skipping `src_gap` / `dst_gap` blocks
    /// between bursts. Path (and pipe) follow from the operands' memories.
    Copy {
        dst: Addr,
        src: Addr,
        n_burst: u32,
        len: u32,
        src_gap: u32,
        dst_gap: u32,
    },
    /// Byte-granular DMA between GM and L1 or UB: burst `i` moves `bytes` bytes from
    /// `src + i·src_stride` to `dst + i·dst_stride` (strides in bytes). Into L1 or UB each burst
    /// fills `len` 32-byte blocks, zeros after its bytes; out to GM exactly `bytes` bytes are
    /// written (and `len` is `⌈bytes / 32⌉`).
    CopyPad {
        dst: Addr,
        src: Addr,
        n_burst: u32,
        bytes: u32,
        src_stride: u32,
        dst_stride: u32,
        len: u32,
    },
    /// L1 → L0A/L0B: `repeat` fractals of 16×16 elements (512 bytes of f16, or 1024 bytes of
    /// f32 with `f32`), the source advancing `src_stride` fractals and the destination one
    /// fractal per repeat; `transpose` transposes each fractal.
    Load2d {
        dst: Addr,
        src: Addr,
        repeat: u32,
        src_stride: u32,
        transpose: bool,
        f32: bool,
    },
    /// L1 → L0A for convolution: the im2col matrix of an f16 feature map laid out
    /// [c1][h][w][16] in L1, written zZ. Row p of the matrix is output position `pos + p`
    /// (raster order over the output's `oh × ow`), column `((c·kh + i)·kw + j)·16 + c0` is input
    /// channel `16c + c0` at kernel offset (i, j); taps in the padding and positions past the
    /// output read 0. `m1` row fractals, `c1·kh·kw` column fractals.
    Img2col {
        dst: Addr,
        src: Addr,
        h: u32,
        w: u32,
        c1: u32,
        kh: u32,
        kw: u32,
        stride: u32,
        pad: u32,
        pos: u32,
        m1: u32,
    },
    /// L1 → L0B for convolution: `k` rows and `n` columns of the im2col matrix of a feature map
    /// held `[c][kh rows of w][…]` in L1 (channel `ci` at element `ci·cs`), written zN. Row
    /// `(ci·kh + i)·kw + j` of column `x` is element `ci·cs + i·w + j + x`; rows past
    /// `c·kh·kw` are 0. f16 elements, or f32 with `f32`.
    Load3d {
        dst: Addr,
        src: Addr,
        c: u32,
        cs: u32,
        w: u32,
        kh: u32,
        kw: u32,
        k: u32,
        n: u32,
        f32: bool,
    },
    /// Cube: C(m×n) = or += A(m×k)·B(k×n) with A zZ in L0A, B zN in L0B, C nZ in L0C; A and
    /// B hold f16, or f32 with `src_f32`.
    Mmad {
        out: DType,
        c: Addr,
        a: Addr,
        b: Addr,
        m: u32,
        k: u32,
        n: u32,
        init: bool,
        src_f32: bool,
    },
    /// L0C → UB, in 16×16 fractals of the source type; optional f32→f16 and ReLU.
    CopyCcToUb {
        dst: Addr,
        src: Addr,
        n_burst: u32,
        len: u32,
        src_gap: u32,
        dst_gap: u32,
        f16: bool,
        relu: bool,
        /// The L0C fractals hold f16 (written by `mmad.f16`) instead of f32.
        src_f16: bool,
    },
    /// UB → L0C, f32 16×16 fractals (an accumulator's initial value): `n_burst` bursts of
    /// `len` fractals, gaps in fractals.
    CopyUbToCc {
        dst: Addr,
        src: Addr,
        n_burst: u32,
        len: u32,
        src_gap: u32,
        dst_gap: u32,
    },
    VBin {
        op: VBinOp,
        ty: DType,
        dst: Addr,
        src0: Addr,
        src1: Addr,
        cfg: VecCfg,
    },
    VScalar {
        op: VScalarOp,
        ty: DType,
        dst: Addr,
        src: Addr,
        scalar: Scalar,
        cfg: VecCfg,
    },
    VUn {
        op: VUnOp,
        ty: DType,
        dst: Addr,
        src: Addr,
        cfg: VecCfg,
    },
    VDup {
        ty: DType,
        dst: Addr,
        scalar: Scalar,
        cfg: VecCfg,
    },
    VCmp {
        op: CmpOp,
        ty: DType,
        dst: Addr,
        src0: Addr,
        src1: Addr,
        cfg: VecCfg,
    },
    VSel {
        ty: DType,
        dst: Addr,
        src0: Addr,
        src1: Addr,
        mask: Addr,
        cfg: VecCfg,
    },
    /// One result per repeat; with `acc` the repeat's lanes are folded onto the destination
    /// element's value (so repeats with destination stride 0 chain into one reduction).
    VRed {
        op: VRedOp,
        ty: DType,
        dst: Addr,
        src: Addr,
        cfg: VecCfg,
        acc: bool,
    },
    /// Broadcast: element `8r + k` of SRC fills block `k` of repeat `r` of DST (destination
    /// block and repeat strides in `cfg`, which has one entry per operand: the destination).
    VBrcb {
        ty: DType,
        dst: Addr,
        src: Addr,
        cfg: VecCfg,
    },
    VConv {
        from: DType,
        to: DType,
        dst: Addr,
        src: Addr,
        cfg: VecCfg,
    },
    SetMask {
        hi: u64,
        lo: u64,
    },
    SetFlag {
        src: Pipe,
        dst: Pipe,
        event: u8,
    },
    WaitFlag {
        src: Pipe,
        dst: Pipe,
        event: u8,
    },
    /// `None` is `ALL`.
    Barrier {
        pipe: Option<Pipe>,
    },
    /// Every block of the kernel waits here until all of them have arrived with their pipes
    /// drained.
    SyncAll,
    Mov {
        dst: Reg,
        src: Scalar,
    },
    SBin {
        op: SOp,
        dst: Reg,
        a: Scalar,
        b: Scalar,
    },
    Ld {
        ty: DType,
        dst: Reg,
        src: Addr,
    },
    St {
        ty: DType,
        dst: Addr,
        src: Scalar,
    },
    /// Number of set bits among the first `bits` bits at the address.
    Count {
        dst: Reg,
        src: Addr,
        bits: u32,
    },
}

/// `lhs OP rhs` between scalars.
#[derive(Clone, Debug, PartialEq)]
pub struct Cond {
    pub lhs: Scalar,
    pub op: CmpOp,
    pub rhs: Scalar,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    Instr {
        instr: Box<Instr>,
        span: Span,
    },
    For {
        var: String,
        start: i64,
        end: i64,
        step: i64,
        body: Vec<Stmt>,
        span: Span,
    },
    If {
        cond: Cond,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
        span: Span,
    },
    /// Runs `body` as long as `cond` holds, tested before every iteration (registers the body
    /// sets, e.g. with `count`, decide when it ends).
    While {
        cond: Cond,
        body: Vec<Stmt>,
        span: Span,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    In,
    Out,
    InOut,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::In => "in",
            Role::Out => "out",
            Role::InOut => "inout",
        }
    }
}

/// A kernel parameter: a GM tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub role: Role,
    pub span: Span,
}

impl Param {
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }

    pub fn bytes(&self) -> u64 {
        self.elements() * self.dtype.size()
    }
}

/// A buffer in an on-chip memory; `addr` None lets the assembler place it.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferDecl {
    pub name: String,
    pub mem: Mem,
    pub size: u64,
    pub addr: Option<u64>,
    pub span: Span,
}

/// A whole `.npuasm` file.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub name: String,
    pub blockdim: u32,
    pub params: Vec<Param>,
    pub buffers: Vec<BufferDecl>,
    pub body: Vec<Stmt>,
}
