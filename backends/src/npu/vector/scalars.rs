//! The kernel's scalars: scalar inputs loaded into `f` registers once, and the arithmetic on
//! scalars that the statements need (constants fold, in f32; registers take a scalar-unit
//! instruction run once per block, before the stages).

use polyhedral::program::ArrayId;

use crate::npu::epilogue::{Scalar, ScalarOp};
use crate::npu::Error;

#[derive(Clone, Debug, Default)]
pub(crate) struct Scalars {
    /// Scalar inputs and the register each is loaded into.
    pub inputs: Vec<(ArrayId, u8)>,
    pub ops: Vec<ScalarOp>,
    next: u8,
}

impl Scalars {
    fn reg(&mut self) -> Result<u8, Error> {
        if self.next >= sim::isa::REGS {
            return Err(Error::NotYet(
                "more than 32 scalar values in one kernel".into(),
            ));
        }
        self.next += 1;
        Ok(self.next - 1)
    }

    /// The register holding scalar input `array`.
    pub(crate) fn input(&mut self, array: ArrayId) -> Result<Scalar, Error> {
        if let Some(&(_, r)) = self.inputs.iter().find(|(a, _)| *a == array) {
            return Ok(Scalar::Reg(r));
        }
        let r = self.reg()?;
        self.inputs.push((array, r));
        Ok(Scalar::Reg(r))
    }

    /// `a OP b` (`add`, `sub`, `mul`, `div`, `min`, `max`), rounded to f32.
    pub(crate) fn op(&mut self, op: &'static str, a: Scalar, b: Scalar) -> Result<Scalar, Error> {
        if let Some(folded) = Scalar::fold(op, a, b) {
            return Ok(folded);
        }
        if let Some(done) = self.ops.iter().find(|o| o.op == op && o.a == a && o.b == b) {
            return Ok(Scalar::Reg(done.dst));
        }
        let dst = self.reg()?;
        self.ops.push(ScalarOp { op, dst, a, b });
        Ok(Scalar::Reg(dst))
    }
}
