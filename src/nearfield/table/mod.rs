//! Building one near-field table: the interaction cases (volumential's
//! encoding), the nodes and target points, the kernels, the entries, the
//! dense table, its scaling with box size, and the limits every builder
//! checks (`docs/design/nearfield.md`).
pub mod cases;
mod dense;
pub mod entry;
pub mod kernels;
pub mod limits;
pub mod quadrature;
pub mod scaling;

pub use dense::*;
