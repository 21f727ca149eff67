//! Schedule trees: the IR every scheduling pass rewrites and AST generation reads.
//!
//! - [`tree`]: the node kinds of isl (domain, context, band, sequence, set, filter, extension,
//!   mark, leaf), the tree of a program's original order ([`schedule_tree_of`]) and rewrites
//!   (split a band, insert a mark or an extension, replace a band's functions);
//! - [`expr`]: quasi-affine functions and constraints (affine plus `floor(e/k)`), what bands,
//!   filters and extensions are written in;
//! - [`verify`]: the structural rules and the exactly-once property (every instance reaches
//!   exactly one leaf, every band schedules every statement below it);
//! - the printer ([`ScheduleTree::display`]) writes isl's YAML-like form;
//! - [`pluto`]: the Pluto scheduler (affine hyperplanes per level by integer programming,
//!   permutable bands, coincident members, SCC cuts and fusion strategies), the flat
//!   multi-dimensional schedule it produces;
//! - [`legality`]: legality and coincidence of flat schedules, tiled ones included, decided
//!   from the dependences;
//! - [`from_pluto`]: a flat Pluto schedule as a tree (bands, sequences for distribution, tile
//!   and point bands);
//! - [`mark`]: the marks passes leave in the tree for later passes and the back ends.
//!
//! The passes that rewrite trees and schedules are [`crate::passes`]; AST generation from a tree
//! is [`crate::codegen::generate_ast`].

pub mod expr;
mod from_pluto;
pub(crate) mod instances;
pub mod legality;
pub mod mark;
pub mod pluto;
mod print;
pub mod tree;
mod verify;

pub use expr::{FloorTerm, QuasiAffine, QuasiConstraint};
pub use from_pluto::tree_of_schedule;
pub use mark::Mark;
pub use tree::{schedule_tree_of, Band, Extension, Filter, Node, NodeKind, NodePath, ScheduleTree};
pub use verify::verify;

/// What can go wrong building, rewriting, checking or generating code from a schedule tree.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The program itself cannot be scheduled (its original nest is malformed).
    #[error("program: {0}")]
    Program(String),
    /// A rewrite was asked for something the tree does not have.
    #[error("rewrite: {0}")]
    Rewrite(String),
    /// The tree breaks a rule of the module docs or schedules an instance other than once.
    #[error("invalid schedule tree: {0}")]
    Invalid(String),
    /// A loop of the generated code would have no lower or upper bound.
    #[error("unbounded loop: {0}")]
    Unbounded(String),
    #[error(transparent)]
    Sets(#[from] crate::sets::Error),
}
