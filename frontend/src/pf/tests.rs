//! Tests of the `.pf` front end.
