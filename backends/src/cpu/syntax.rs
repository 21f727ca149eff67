//! How integer AST expressions are spelled in the generated C: loop variables and parameters
//! by their C names, 64-bit literals with their suffix, the integer helpers with the `pf_`
//! prefix of the helpers the writer emits, `min` and `max` with exactly two arguments.

use polyhedral::ast::Spelling;
use polyhedral::program::ParamId;

/// The C spelling of integer expressions ([`Spelling`] for [`polyhedral::ast::AstExpr`]).
pub(crate) struct CSyntax<'a> {
    pub var: &'a dyn Fn(&str) -> String,
    pub param: &'a dyn Fn(ParamId) -> String,
}

impl Spelling for CSyntax<'_> {
    fn var(&self, name: &str) -> String {
        (self.var)(name)
    }

    fn param(&self, p: ParamId) -> String {
        (self.param)(p)
    }

    fn int(&self, v: i64) -> String {
        if v == i64::MIN {
            "INT64_MIN".to_string()
        } else if i32::try_from(v).is_ok() {
            v.to_string()
        } else {
            format!("{v}LL")
        }
    }

    fn call(&self, name: &str, args: &[String]) -> String {
        format!("pf_{name}({})", args.join(", "))
    }

    fn binary_min_max(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use polyhedral::ast::{AstCond, AstExpr};

    #[test]
    fn expressions_print_with_minimal_parentheses() {
        let syntax = CSyntax {
            var: &|v| v.to_string(),
            param: &|_| "N".to_string(),
        };
        let x = AstExpr::var("x");
        let e = AstExpr::plus(
            AstExpr::mul(-2, AstExpr::plus(x.clone(), AstExpr::Int(1))),
            AstExpr::mul(-1, AstExpr::plus(x.clone(), AstExpr::Param(ParamId(0)))),
        );
        assert_eq!(e.to_infix(&syntax), "-2 * (x + 1) - (x + N)");
        let m = AstExpr::Min(vec![
            AstExpr::floor_div(x.clone(), 4),
            AstExpr::ceil_div(AstExpr::plus(x.clone(), AstExpr::Int(-3)), 2),
            AstExpr::Int(5_000_000_000),
        ]);
        assert_eq!(
            m.to_infix(&syntax),
            "pf_min(pf_floord(x, 4), pf_min(pf_ceild(x - 3, 2), 5000000000LL))"
        );
        assert_eq!(
            AstCond::Divisible(x, 3).to_infix(&syntax),
            "pf_mod(x, 3) == 0"
        );
    }
}
