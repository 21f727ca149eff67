//! The `.npuasm` assembly text: lexer, parser (located errors) and printer.
//!
//! `parse(print(p)) == p` for every program `p` the parser accepts.

mod lexer;
mod parser;
mod printer;

pub(crate) use parser::{parse_program, parse_reg};
pub(crate) use printer::{print_instr, print_program};
