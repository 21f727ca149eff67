//! Fusion passes that work on the tiled schedule tree.
//!
//! - [`post_tiling`]: post-tiling fusion (tile the live-out statements, then pull into each
//!   tile the producer instances it needs, with extension nodes).
//! - [`budget`]: on targets that cap the loop iterations of one invocation, how much work
//!   a fused tile may give one invocation.
//! - [`recompute`]: when producer instances overlapping tiles need may be computed by each
//!   of them (halos), and whether that is worth it.

mod budget;
pub mod post_tiling;
pub mod recompute;
