//! Schedules: new execution orders for a program's statement instances.
//!
//! - [`pluto`]: the Pluto scheduler (affine hyperplanes per level by integer programming,
//!   permutable bands, coincident members, SCC cuts and fusion strategies), the flat
//!   multi-dimensional schedule it produces, and an exact legality checker;
//! - [`tile`]: tiling of permutable bands into tile and point bands, tile sizes from a
//!   capacity rule, and the tile-level wavefront.

pub mod pluto;
pub mod tile;
