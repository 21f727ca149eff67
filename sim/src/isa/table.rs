//! The instruction table: every instruction once, with its mnemonic, its fields in the order the
//! text writes them, how each field is written (its operand kind, keyword, default and limit),
//! the pipe it runs on and its timing class.
//!
//! `instructions!` turns the table into the `Instr` enum and the code that the parser, the
//! printer, the assembler and the simulator share: `Instr::read` builds an instruction field by
//! field from a `Reader` (the parser), `Instr::operands` lists the fields as `Operand`s (for the
//! printer and the assembler's operand checks), and `Instr::mnemonic`, `Instr::pipe_rule` and
//! `Instr::timing_class` give the per-instruction metadata.
//!
//! A row is `Variant HEAD [PIPE, TIMING] { field: Type = kind, … } [where (CHECK)];`. HEAD is
//! the mnemonic, or an operation table (`VBIN_NAMES`) whose names are the mnemonics, the
//! operation being the row's first field, of kind `op`. The kinds:
//!
//! - `op`: the operation the mnemonic names;
//! - `suffix(i)`: the element type after the `i`-th dot (`vadd.f16`); `cube_suffix(i)` the
//!   same, f16 or f32 only; `cmp_suffix(i)` a comparison (`vcmp.lt.f16`);
//! - positional operands, separated by commas: `addr(MEM | …; "what")` a buffer address in
//!   one of the memories (`addr(any)`: the instruction decides), `vec` a vector operand in UB,
//!   `scalar`, `reg`, `pipe`, `pipe_or_all`, `event` (0..=7) and `word("what")` (a 64-bit
//!   number printed in hex);
//! - keyword arguments after the positional operands, the keyword being the field's name:
//!   `opt(DEFAULT, MAX)` and `req(MAX)` numbers in `0..=MAX` (left out of the text when equal
//!   to the default), `flag` a bare flag, `init_or_acc` one of the flags `init` and `acc`, and
//!   `cfg(REP)` a vector iteration (`repeat`, `blk`, `rep`, with `REP` the default repeat
//!   strides, one per vector operand).
//!
//! Defaults may depend on earlier fields through method calls only (`bytes.div_ceil(32)`): the
//! parser sees those fields as values, the printer as references. `where` after a field checks
//! the fields read so far, after the row the whole instruction once its keyword arguments are
//! known; checks return an `Invalid`, reported at the mnemonic.
//!
//! What the table does not say is the assembler's, as it needs the operands' buffers or the
//! machine: the paths of `copy` and `copy_pad` (and `copy_pad`'s strides against its GM
//! tensor), the memories `img2col` and `load3d` do not support yet, the unary operations
//! defined for floats only, the register kinds of `ld`, `mov` and the scalar arithmetic, and the
//! cores `sync_all` needs.

use super::operand::{Invalid, Operand, PipeRule, Reader, TimingClass};
use super::*;

macro_rules! instructions {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident $head:tt [$pipe:ident, $timing:ident]
        $({
            $(
                $(#[doc = $fdoc:literal])*
                $field:ident : $ty:ty = $kind:ident $(($($arg:tt)*))? $(where $fcheck:expr)?
            ),* $(,)?
        })?
        $(where ($check:expr))?;
    )*) => {
        /// One machine instruction.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Instr {
            $(
                $(#[doc = $doc])*
                $variant $({ $( $(#[doc = $fdoc])* $field: $ty ),* })?,
            )*
        }

        impl Instr {
            /// The mnemonic, without suffixes (`vadd`, `copy`).
            #[allow(unused_variables)]
            pub fn mnemonic(&self) -> &'static str {
                match self {
                    $( Instr::$variant $({ $($field),* })? => head_name!($head; $($($field),*)?), )*
                }
            }

            /// Which pipe runs the instruction.
            pub fn pipe_rule(&self) -> PipeRule {
                match self {
                    $( Instr::$variant { .. } => pipe_rule!($pipe), )*
                }
            }

            /// What the instruction's duration is made of.
            pub fn timing_class(&self) -> TimingClass {
                match self {
                    $( Instr::$variant { .. } => TimingClass::$timing, )*
                }
            }

            /// The fields in the order the text writes them.
            #[allow(unused_variables)]
            pub fn operands(&self) -> Vec<Operand<'_>> {
                match self {
                    $(
                        Instr::$variant $({ $($field),* })? => vec![
                            $($( operand!($field, $kind $(($($arg)*))?) ),*)?
                        ],
                    )*
                }
            }

            /// Reads the instruction whose mnemonic is `head` field by field; None if no
            /// instruction has that mnemonic.
            #[allow(unused_variables)]
            pub(crate) fn read<R: Reader>(head: &str, r: &mut R) -> Option<Result<Instr, R::Error>> {
                $(
                    if let Some(found) = head_match!(head, $head) {
                        let mut read = || -> Result<Instr, R::Error> {
                            $($(
                                let $field: $ty = read_field!(r, found, $field, $kind $(($($arg)*))?);
                                $( r.check($fcheck)?; )?
                            )*)?
                            r.end_keywords()?;
                            $( r.check($check)?; )?
                            Ok(Instr::$variant $({ $($field),* })?)
                        };
                        return Some(read());
                    }
                )*
                None
            }
        }

        /// Every mnemonic of the instruction set, in table order.
        pub fn mnemonics() -> Vec<&'static str> {
            [$( head_names!($head) ),*].concat()
        }
    };
}

macro_rules! head_name {
    ($name:literal; $($field:ident),*) => {
        $name
    };
    ($table:ident; $op:ident $(, $field:ident)*) => {
        name_of(&$table, *$op)
    };
}

macro_rules! head_names {
    ($name:literal) => {
        vec![$name]
    };
    ($table:ident) => {
        $table.iter().map(|(_, n)| *n).collect::<Vec<_>>()
    };
}

macro_rules! head_match {
    ($head:ident, $name:literal) => {
        ($head == $name).then_some(())
    };
    ($head:ident, $table:ident) => {
        op_of(&$table, $head)
    };
}

macro_rules! pipe_rule {
    (S) => {
        PipeRule::Fixed(Pipe::S)
    };
    (V) => {
        PipeRule::Fixed(Pipe::V)
    };
    (M) => {
        PipeRule::Fixed(Pipe::M)
    };
    (Mte1) => {
        PipeRule::Fixed(Pipe::Mte1)
    };
    ($rule:ident) => {
        PipeRule::$rule
    };
}

macro_rules! read_field {
    ($r:ident, $found:ident, $field:ident, op) => {
        $found
    };
    ($r:ident, $found:ident, $field:ident, suffix($i:expr)) => {
        $r.type_suffix($i)?
    };
    ($r:ident, $found:ident, $field:ident, cube_suffix($i:expr)) => {
        $r.cube_suffix($i)?
    };
    ($r:ident, $found:ident, $field:ident, cmp_suffix($i:expr)) => {
        $r.cmp_suffix($i)?
    };
    ($r:ident, $found:ident, $field:ident, addr($($mems:tt)*)) => {
        $r.addr()?
    };
    ($r:ident, $found:ident, $field:ident, vec) => {
        $r.addr()?
    };
    ($r:ident, $found:ident, $field:ident, scalar) => {
        $r.scalar()?
    };
    ($r:ident, $found:ident, $field:ident, reg) => {
        $r.reg()?
    };
    ($r:ident, $found:ident, $field:ident, pipe) => {
        $r.pipe()?
    };
    ($r:ident, $found:ident, $field:ident, pipe_or_all) => {
        $r.pipe_or_all()?
    };
    ($r:ident, $found:ident, $field:ident, event) => {
        $r.event()?
    };
    ($r:ident, $found:ident, $field:ident, word($what:literal)) => {
        $r.word($what)?
    };
    ($r:ident, $found:ident, $field:ident, opt($default:expr, $max:expr)) => {
        $r.keyword(stringify!($field), Some($default), ($max) as i64)?
    };
    ($r:ident, $found:ident, $field:ident, req($max:expr)) => {
        $r.keyword(stringify!($field), None, ($max) as i64)?
    };
    ($r:ident, $found:ident, $field:ident, flag) => {
        $r.flag(stringify!($field))?
    };
    ($r:ident, $found:ident, $field:ident, init_or_acc) => {
        $r.init_or_acc()?
    };
    ($r:ident, $found:ident, $field:ident, cfg($rep:expr)) => {
        $r.cfg(&$rep)?
    };
}

macro_rules! operand {
    ($field:ident, op) => {
        Operand::Mnemonic
    };
    ($field:ident, suffix($i:expr)) => {
        Operand::Suffix($field.name())
    };
    ($field:ident, cube_suffix($i:expr)) => {
        Operand::Suffix($field.name())
    };
    ($field:ident, cmp_suffix($i:expr)) => {
        Operand::Suffix(name_of(&CMP_NAMES, *$field))
    };
    ($field:ident, addr(any)) => {
        Operand::Addr {
            addr: $field,
            mems: &[],
            what: "",
        }
    };
    ($field:ident, addr($($mem:ident)|+; $what:literal)) => {
        Operand::Addr {
            addr: $field,
            mems: &[$(Mem::$mem),+],
            what: $what,
        }
    };
    ($field:ident, vec) => {
        Operand::Addr {
            addr: $field,
            mems: &[Mem::Ub],
            what: "vector operands",
        }
    };
    ($field:ident, scalar) => {
        Operand::Scalar($field)
    };
    ($field:ident, reg) => {
        Operand::Reg(*$field)
    };
    ($field:ident, pipe) => {
        Operand::Pipe(*$field)
    };
    ($field:ident, pipe_or_all) => {
        Operand::PipeOrAll(*$field)
    };
    ($field:ident, event) => {
        Operand::Event(*$field)
    };
    ($field:ident, word($what:literal)) => {
        Operand::Word(*$field)
    };
    ($field:ident, opt($default:expr, $max:expr)) => {
        Operand::Keyword {
            key: stringify!($field),
            value: *$field,
            default: Some($default),
        }
    };
    ($field:ident, req($max:expr)) => {
        Operand::Keyword {
            key: stringify!($field),
            value: *$field,
            default: None,
        }
    };
    ($field:ident, flag) => {
        Operand::Flag {
            key: stringify!($field),
            set: *$field,
        }
    };
    ($field:ident, init_or_acc) => {
        Operand::Flag {
            key: if *$field { "init" } else { "acc" },
            set: true,
        }
    };
    ($field:ident, cfg($rep:expr)) => {
        Operand::Cfg {
            cfg: $field,
            rep: $rep.to_vec(),
        }
    };
}

instructions! {
    /// DMA: `n_burst` bursts of `len` 32-byte blocks, skipping `src_gap` / `dst_gap` blocks
    /// between bursts. Path (and pipe) follow from the operands' memories.
    Copy "copy" [CopyPath, Transfer] {
        dst: Addr = addr(any),
        src: Addr = addr(any),
        n_burst: u32 = opt(1, MAX_BURSTS),
        len: u32 = req(MAX_BURST_BLOCKS),
        src_gap: u32 = opt(0, MAX_GAP),
        dst_gap: u32 = opt(0, MAX_GAP),
    };
    /// Byte-granular DMA between GM and L1 or UB: burst `i` moves `bytes` bytes from
    /// `src + i·src_stride` to `dst + i·dst_stride` (strides in bytes). Into L1 or UB each burst
    /// fills `len` 32-byte blocks, zeros after its bytes; out to GM exactly `bytes` bytes are
    /// written (and `len` is `⌈bytes / 32⌉`).
    CopyPad "copy_pad" [GmDirection, Transfer] {
        dst: Addr = addr(any),
        src: Addr = addr(any),
        n_burst: u32 = opt(1, MAX_BURSTS),
        bytes: u32 = req(MAX_BURST_BLOCKS * BLOCK_BYTES as u32),
        src_stride: u32 = opt(0, u32::MAX),
        dst_stride: u32 = opt(0, u32::MAX),
        len: u32 = opt(bytes.div_ceil(BLOCK_BYTES as u32), MAX_BURST_BLOCKS),
    } where (pad_fits(bytes, len));
    /// L1 → L0A/L0B: `repeat` fractals of 16×16 elements (512 bytes of f16, or 1024 bytes of
    /// f32 with `f32`), the source advancing `src_stride` fractals and the destination one
    /// fractal per repeat; `transpose` transposes each fractal.
    Load2d "load2d" [Mte1, Transfer] {
        dst: Addr = addr(L0a | L0b; "the load2d destination"),
        src: Addr = addr(L1; "the load2d source"),
        repeat: u32 = opt(1, MAX_REPEAT),
        src_stride: u32 = opt(1, MAX_GAP),
        transpose: bool = flag,
        f32: bool = flag,
    };
    /// L1 → L0A for convolution: the im2col matrix of an f16 feature map laid out
    /// [c1][h][w][16] in L1, written zZ. Row p of the matrix is output position `pos + p`
    /// (raster order over the output's `oh × ow`), column `((c·kh + i)·kw + j)·16 + c0` is input
    /// channel `16c + c0` at kernel offset (i, j); taps in the padding and positions past the
    /// output read 0. `m1` row fractals, `c1·kh·kw` column fractals.
    Img2col "img2col" [Mte1, Transfer] {
        dst: Addr = addr(L0a; "the img2col destination"),
        src: Addr = addr(L1; "the img2col source"),
        h: u32 = req(4096),
        w: u32 = req(4096),
        c1: u32 = opt(1, 256),
        kh: u32 = req(255),
        kw: u32 = req(255),
        stride: u32 = opt(1, 63),
        pad: u32 = opt(0, 255),
        pos: u32 = opt(0, 65535),
        m1: u32 = req(255),
    } where (img2col_fits(h, w, c1, (kh, kw), stride, pad, m1));
    /// L1 → L0B for convolution: `k` rows and `n` columns of the im2col matrix of a feature map
    /// held `[c][kh rows of w][…]` in L1 (channel `ci` at element `ci·cs`), written zN. Row
    /// `(ci·kh + i)·kw + j` of column `x` is element `ci·cs + i·w + j + x`; rows past
    /// `c·kh·kw` are 0. f16 elements, or f32 with `f32`.
    Load3d "load3d" [Mte1, Transfer] {
        dst: Addr = addr(L0b; "the load3d destination"),
        src: Addr = addr(L1; "the load3d source"),
        c: u32 = req(4096),
        cs: u32 = req(1 << 20),
        w: u32 = req(65535),
        kh: u32 = opt(1, 255),
        kw: u32 = opt(1, 255),
        k: u32 = req(4096),
        n: u32 = req(4096),
        f32: bool = flag,
    } where (load3d_fits(c, (kh, kw), k, n));
    /// Cube: C(m×n) = or += A(m×k)·B(k×n) with A zZ in L0A, B zN in L0B, C nZ in L0C; A and
    /// B hold f16, or f32 with `src_f32`.
    Mmad "mmad" [M, Cube] {
        out: DType = cube_suffix(1),
        c: Addr = addr(L0c; "C"),
        a: Addr = addr(L0a; "A"),
        b: Addr = addr(L0b; "B"),
        m: u32 = req(4096),
        k: u32 = req(4096),
        n: u32 = req(4096),
        init: bool = init_or_acc,
        src_f32: bool = flag,
    };
    /// L0C → UB, in 16×16 fractals of the source type; optional f32→f16 and ReLU.
    CopyCcToUb "copy_cc_to_ub" [V, Transfer] {
        dst: Addr = addr(Ub; "the destination"),
        src: Addr = addr(L0c; "the source"),
        n_burst: u32 = opt(1, MAX_BURSTS),
        len: u32 = req(MAX_BURST_BLOCKS),
        src_gap: u32 = opt(0, MAX_GAP),
        dst_gap: u32 = opt(0, MAX_GAP),
        f16: bool = flag,
        relu: bool = flag,
        /// The L0C fractals hold f16 (written by `mmad.f16`) instead of f32.
        src_f16: bool = flag where one_conversion(f16, src_f16),
    };
    /// UB → L0C, f32 16×16 fractals (an accumulator's initial value): `n_burst` bursts of
    /// `len` fractals, gaps in fractals.
    CopyUbToCc "copy_ub_to_cc" [V, Transfer] {
        dst: Addr = addr(L0c; "the destination"),
        src: Addr = addr(Ub; "the source"),
        n_burst: u32 = opt(1, MAX_BURSTS),
        len: u32 = req(MAX_BURST_BLOCKS),
        src_gap: u32 = opt(0, MAX_GAP),
        dst_gap: u32 = opt(0, MAX_GAP),
    };
    VBin VBIN_NAMES [V, Vector] {
        op: VBinOp = op,
        ty: DType = suffix(1),
        dst: Addr = vec,
        src0: Addr = vec,
        src1: Addr = vec,
        cfg: VecCfg = cfg([BLOCKS_PER_REPEAT; 3]),
    };
    VScalar VSCALAR_NAMES [V, Vector] {
        op: VScalarOp = op,
        ty: DType = suffix(1),
        dst: Addr = vec,
        src: Addr = vec,
        scalar: Scalar = scalar,
        cfg: VecCfg = cfg([BLOCKS_PER_REPEAT; 2]),
    };
    VUn VUN_NAMES [V, Vector] {
        op: VUnOp = op,
        ty: DType = suffix(1),
        dst: Addr = vec,
        src: Addr = vec,
        cfg: VecCfg = cfg([BLOCKS_PER_REPEAT; 2]),
    };
    VDup "vdup" [V, Vector] {
        ty: DType = suffix(1),
        dst: Addr = vec,
        scalar: Scalar = scalar,
        cfg: VecCfg = cfg([BLOCKS_PER_REPEAT]),
    };
    /// The destination is a bit string (one bit per lane), so the strides describe the two
    /// sources only.
    VCmp "vcmp" [V, Vector] {
        op: CmpOp = cmp_suffix(1),
        ty: DType = suffix(2),
        dst: Addr = vec,
        src0: Addr = vec,
        src1: Addr = vec,
        cfg: VecCfg = cfg([BLOCKS_PER_REPEAT; 2]),
    };
    VSel "vsel" [V, Vector] {
        ty: DType = suffix(1),
        dst: Addr = vec,
        src0: Addr = vec,
        src1: Addr = vec,
        mask: Addr = vec,
        cfg: VecCfg = cfg([BLOCKS_PER_REPEAT; 3]),
    };
    /// One result per repeat; with `acc` the repeat's lanes are folded onto the destination
    /// element's value (so repeats with destination stride 0 chain into one reduction). The
    /// destination's repeat stride counts elements.
    VRed VRED_NAMES [V, Vector] {
        op: VRedOp = op,
        ty: DType = suffix(1),
        dst: Addr = vec,
        src: Addr = vec,
        cfg: VecCfg = cfg([1, BLOCKS_PER_REPEAT]),
        acc: bool = flag,
    };
    /// Broadcast: element `8r + k` of SRC fills block `k` of repeat `r` of DST (destination
    /// block and repeat strides in `cfg`, which has one entry per operand: the destination).
    VBrcb "vbrcb" [V, Vector] {
        ty: DType = suffix(1),
        dst: Addr = vec,
        src: Addr = vec,
        cfg: VecCfg = cfg([BLOCKS_PER_REPEAT]),
    };
    /// A repeat holds as many lanes as 256 bytes of the wider type; each operand's default
    /// repeat stride is one repeat of its own type.
    VConv "vconv" [V, Vector] {
        from: DType = suffix(1),
        to: DType = suffix(2) where distinct_types(from, to),
        dst: Addr = vec,
        src: Addr = vec,
        cfg: VecCfg = cfg(conversion_strides(from.size(), to.size())),
    };
    SetMask "set_vector_mask" [S, Issue] {
        hi: u64 = word("the high 64 bits"),
        lo: u64 = word("the low 64 bits"),
    };
    /// The mask's counter mode: the first LANES lanes of every repeat on and the others off
    /// (all of them from 128 lanes up, none below one lane).
    SetMaskCount "set_vector_mask_count" [S, Issue] {
        lanes: Scalar = scalar,
    };
    SetFlag "set_flag" [Signal, Sync] {
        src: Pipe = pipe,
        dst: Pipe = pipe,
        event: u8 = event,
    } where (distinct_pipes(src, dst));
    WaitFlag "wait_flag" [Wait, Sync] {
        src: Pipe = pipe,
        dst: Pipe = pipe,
        event: u8 = event,
    } where (distinct_pipes(src, dst));
    /// `None` is `ALL`.
    Barrier "pipe_barrier" [S, Sync] {
        pipe: Option<Pipe> = pipe_or_all,
    };
    /// Every block of the kernel waits here until all of them have arrived with their pipes
    /// drained.
    SyncAll "sync_all" [S, Sync];
    /// Counts one statement instance that the program computes on the scalar unit: a
    /// profiling annotation, which takes no time and is not an instruction of the count; the
    /// report gives the total.
    Tally "tally" [S, Free];
    Mov "mov" [S, Issue] {
        dst: Reg = reg,
        src: Scalar = scalar,
    };
    SBin SOP_NAMES [S, Issue] {
        op: SOp = op,
        dst: Reg = reg,
        a: Scalar = scalar,
        b: Scalar = scalar,
    };
    Ld "ld" [S, ScalarMemory] {
        ty: DType = suffix(1),
        dst: Reg = reg,
        src: Addr = addr(Ub; "scalar loads"),
    };
    St "st" [S, ScalarMemory] {
        ty: DType = suffix(1),
        dst: Addr = addr(Ub; "scalar memory operands"),
        src: Scalar = scalar,
    };
    /// Number of set bits among the first `bits` bits at the address.
    Count "count" [S, ScalarMemory] {
        dst: Reg = reg,
        src: Addr = addr(Ub; "scalar memory operands"),
        bits: u32 = req(1 << 20),
    };
}

/// `vconv`'s default repeat strides (destination, source): one repeat of each type, a repeat
/// holding as many lanes as 256 bytes of the wider type.
fn conversion_strides(from: u64, to: u64) -> [u32; 2] {
    let lanes = REPEAT_BYTES / from.max(to);
    let blocks = |size: u64| (lanes * size / BLOCK_BYTES) as u32;
    [blocks(to), blocks(from)]
}

fn distinct_types(from: DType, to: DType) -> Result<(), Invalid> {
    if from == to {
        return Err(Invalid::new(
            "`vconv` converts between two types",
            "e.g. `vconv.f32.f16`",
        ));
    }
    Ok(())
}

fn distinct_pipes(src: Pipe, dst: Pipe) -> Result<(), Invalid> {
    if src == dst {
        return Err(Invalid::new(
            "a flag links two different pipes",
            "order instructions of one pipe with `pipe_barrier`",
        ));
    }
    Ok(())
}

fn one_conversion(f16: bool, src_f16: bool) -> Result<(), Invalid> {
    if src_f16 && f16 {
        return Err(Invalid::new(
            "`src_f16` data is already f16",
            "drop the `f16` conversion flag",
        ));
    }
    Ok(())
}

fn pad_fits(bytes: u32, len: u32) -> Result<(), Invalid> {
    let fit = bytes.div_ceil(BLOCK_BYTES as u32);
    if len < fit {
        return Err(Invalid::new(
            format!("`len={len}` blocks cannot hold a burst of {bytes} bytes"),
            format!("use at least `len={fit}`, or leave it out"),
        ));
    }
    Ok(())
}

fn load3d_fits(c: u32, (kh, kw): (u32, u32), k: u32, n: u32) -> Result<(), Invalid> {
    if c == 0 || kh == 0 || kw == 0 || k == 0 || n == 0 {
        return Err(Invalid::new(
            "`load3d` channels, kernel and sizes must be positive",
            "a feature map and a kernel have at least one element",
        ));
    }
    let fractal = FRACTAL as u32;
    if !k.is_multiple_of(fractal) || !n.is_multiple_of(fractal) {
        return Err(Invalid::new(
            "`load3d` writes whole fractals: `k` and `n` are multiples of 16",
            "round the sizes up; rows past the map's read 0",
        ));
    }
    Ok(())
}

fn img2col_fits(
    h: u32,
    w: u32,
    c1: u32,
    (kh, kw): (u32, u32),
    stride: u32,
    pad: u32,
    m1: u32,
) -> Result<(), Invalid> {
    if h == 0 || w == 0 || c1 == 0 || kh == 0 || kw == 0 || stride == 0 || m1 == 0 {
        return Err(Invalid::new(
            "`img2col` sizes, kernel, stride and m1 must be positive",
            "a feature map and a kernel have at least one element",
        ));
    }
    if h + 2 * pad < kh || w + 2 * pad < kw {
        return Err(Invalid::new(
            format!("the {kh}×{kw} kernel does not fit the padded {h}×{w} feature map"),
            "pad the feature map or use a smaller kernel",
        ));
    }
    Ok(())
}
