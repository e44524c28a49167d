//! The symmetry reduction of a table (`docs/design/nearfield.md`): kernel
//! groups and the dense oracle, the arithmetic ORBIT descriptors, the
//! generated descriptor fallback, and the compact reduced table built from
//! representatives only.
pub mod fallback;
mod groups;
pub mod orbit;
pub mod reduced;

pub use groups::*;
