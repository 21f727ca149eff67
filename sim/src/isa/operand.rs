//! What the instruction table says about each instruction, in types: its fields as `Operand`s,
//! the rule that picks its pipe, its timing class, and the `Reader` interface through which a
//! parser builds an instruction from the table.

use super::{Addr, CmpOp, CopyPath, DType, Instr, Mem, Pipe, Reg, Scalar, VecCfg};

/// One field of an instruction, as the text writes it.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand<'a> {
    /// The operation, named by the mnemonic itself (`vadd`).
    Mnemonic,
    /// `.NAME` after the mnemonic: an element type or a comparison.
    Suffix(&'static str),
    /// A buffer address in one of `mems` (any memory, the instruction checking its path, when
    /// empty); `what` names the operand in messages.
    Addr {
        addr: &'a Addr,
        mems: &'static [Mem],
        what: &'static str,
    },
    Scalar(&'a Scalar),
    Reg(Reg),
    Pipe(Pipe),
    /// A pipe, or all pipes (`ALL`).
    PipeOrAll(Option<Pipe>),
    /// An event id of a flag.
    Event(u8),
    /// A 64-bit number, written in hex.
    Word(u64),
    /// `key=value`, left out of the text when `value` is the default; `default` None is a
    /// required argument.
    Keyword {
        key: &'static str,
        value: u32,
        default: Option<u32>,
    },
    /// A bare flag `key`, written when set.
    Flag {
        key: &'static str,
        set: bool,
    },
    /// A vector iteration: `repeat`, `blk` and `rep`, with `rep` the default repeat strides.
    Cfg {
        cfg: &'a VecCfg,
        rep: Vec<u32>,
    },
}

/// How an instruction's pipe is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipeRule {
    /// Always this pipe.
    Fixed(Pipe),
    /// The pipe of the copy path from the source's memory to the destination's.
    CopyPath,
    /// MTE3 when the destination is in GM, MTE2 otherwise.
    GmDirection,
    /// The flag's source pipe: the pipe that sets it.
    Signal,
    /// The flag's destination pipe: the pipe that waits.
    Wait,
}

/// What an instruction's duration is made of, in the machine description's costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimingClass {
    /// One scalar issue on S.
    Issue,
    /// A scalar access to UB on S.
    ScalarMemory,
    /// Ordering between pipes or blocks: as long as the wait.
    Sync,
    /// A path's startup, then its bytes at the path's bandwidth.
    Transfer,
    /// The cube's startup, then a cost per fractal multiplication.
    Cube,
    /// The vector unit's startup, then a cost per repeat.
    Vector,
    /// No time at all (a profiling annotation).
    Free,
}

/// An instruction's field that breaks a rule of the instruction set, found once the fields it
/// involves are read; reported at the mnemonic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub message: String,
    pub hint: String,
}

impl Invalid {
    pub fn new(message: impl Into<String>, hint: impl Into<String>) -> Invalid {
        Invalid {
            message: message.into(),
            hint: hint.into(),
        }
    }
}

/// What `Instr::read` asks of a parser: one call per field, in table order. Positional operands
/// come first, keyword arguments after them; `end_keywords` follows the last field.
pub(crate) trait Reader {
    type Error;
    /// The element type after the `idx`-th dot of the mnemonic.
    fn type_suffix(&mut self, idx: usize) -> Result<DType, Self::Error>;
    /// An element type the cube writes (f16 or f32) after the `idx`-th dot.
    fn cube_suffix(&mut self, idx: usize) -> Result<DType, Self::Error>;
    /// A comparison after the `idx`-th dot.
    fn cmp_suffix(&mut self, idx: usize) -> Result<CmpOp, Self::Error>;
    fn addr(&mut self) -> Result<Addr, Self::Error>;
    fn scalar(&mut self) -> Result<Scalar, Self::Error>;
    fn reg(&mut self) -> Result<Reg, Self::Error>;
    fn pipe(&mut self) -> Result<Pipe, Self::Error>;
    fn pipe_or_all(&mut self) -> Result<Option<Pipe>, Self::Error>;
    fn event(&mut self) -> Result<u8, Self::Error>;
    /// A 64-bit number; `what` describes it in messages.
    fn word(&mut self, what: &str) -> Result<u64, Self::Error>;
    /// `key=N` with `N` in `0..=max`; `default` None makes it required.
    fn keyword(&mut self, key: &str, default: Option<u32>, max: i64) -> Result<u32, Self::Error>;
    fn flag(&mut self, key: &str) -> Result<bool, Self::Error>;
    /// Exactly one of the flags `init` and `acc`: whether it is `init`.
    fn init_or_acc(&mut self) -> Result<bool, Self::Error>;
    /// `repeat`, `blk` and `rep`, with `rep` the default repeat strides.
    fn cfg(&mut self, rep: &[u32]) -> Result<VecCfg, Self::Error>;
    fn check(&mut self, checked: Result<(), Invalid>) -> Result<(), Self::Error>;
    /// After the last field: rejects keyword arguments the instruction does not have.
    fn end_keywords(&mut self) -> Result<(), Self::Error>;
}

impl Instr {
    /// The pipe the instruction runs on, given the memories of its address operands (in
    /// `addrs` order).
    pub fn pipe(&self, mems: &[Mem]) -> Pipe {
        match self.pipe_rule() {
            PipeRule::Fixed(pipe) => pipe,
            // The assembler accepts only paths that exist.
            PipeRule::CopyPath => CopyPath::between(mems[1], mems[0]).map_or(Pipe::V, |p| p.pipe()),
            PipeRule::GmDirection if mems[0] == Mem::Gm => Pipe::Mte3,
            PipeRule::GmDirection => Pipe::Mte2,
            PipeRule::Signal | PipeRule::Wait => match self {
                Instr::SetFlag { src, .. } => *src,
                Instr::WaitFlag { dst, .. } => *dst,
                _ => Pipe::S,
            },
        }
    }

    /// The address operands, destination first.
    pub fn addrs(&self) -> Vec<&Addr> {
        self.operands()
            .into_iter()
            .filter_map(|o| match o {
                Operand::Addr { addr, .. } => Some(addr),
                _ => None,
            })
            .collect()
    }

    /// The scalar operands, in text order.
    pub fn scalars(&self) -> Vec<&Scalar> {
        self.operands()
            .into_iter()
            .filter_map(|o| match o {
                Operand::Scalar(s) => Some(s),
                _ => None,
            })
            .collect()
    }
}
