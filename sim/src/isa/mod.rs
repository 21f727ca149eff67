//! The instruction set: memories, pipes, element types, operands and the program tree that the
//! assembly text denotes.
//!
//! A `Program` is the parsed form of a `.npuasm` file and the only thing the printer and the
//! assembler see. Names (buffers, loop counters) are kept as written; the assembler resolves them.
//! Vector strides are in 32-byte blocks, copy lengths and gaps in the unit their instruction
//! documents (see ISA.md).
//!
//! The instructions themselves are listed once, in `table`: the `Instr` enum and what the
//! parser, printer, assembler and simulator need to know of each instruction come from there.

mod operand;
mod table;

pub(crate) use operand::Reader;
pub use operand::{Invalid, Operand, PipeRule, TimingClass};
pub use table::{mnemonics, Instr};

use crate::diagnostic::Span;

/// Bytes in a block, the unit of DMA lengths, gaps and vector strides.
pub const BLOCK_BYTES: u64 = 32;
/// Bytes one vector repeat covers (with every lane active and contiguous blocks).
pub const REPEAT_BYTES: u64 = 256;
/// Blocks in one vector repeat: the default repeat stride of a vector operand.
pub const BLOCKS_PER_REPEAT: u32 = (REPEAT_BYTES / BLOCK_BYTES) as u32;
/// The most repeats of one vector instruction or `load2d`.
pub const MAX_REPEAT: u32 = 255;
/// Rows and columns of a fractal, the cube's unit: 16×16 elements.
pub const FRACTAL: u64 = 16;
/// Elements in a fractal.
pub const FRACTAL_ELEMS: u64 = FRACTAL * FRACTAL;
/// The most bursts of one `copy`, `copy_pad`, `copy_cc_to_ub` or `copy_ub_to_cc`.
pub const MAX_BURSTS: u32 = 4095;
/// The longest burst, in blocks (fractals for the copies to and from L0C).
pub const MAX_BURST_BLOCKS: u32 = 65535;
/// The largest gap between bursts (in the same unit), stride of `load2d` and block or repeat
/// stride of a vector operand.
pub const MAX_GAP: u32 = 65535;
/// Event ids of a flag between two pipes: `0..EVENTS`.
pub const EVENTS: u8 = 8;

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
