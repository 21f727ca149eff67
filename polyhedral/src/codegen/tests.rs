//! Tests of AST generation.
