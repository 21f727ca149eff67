//! Fusion passes that work on the tiled schedule tree.
//!
//! - [`post_tiling`]: post-tiling fusion (tile the live-out statements, then pull into each
//!   tile the producer instances it needs, with extension nodes).

pub mod post_tiling;
