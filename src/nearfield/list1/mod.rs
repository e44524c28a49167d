//! List 1 (`docs/design/list1.md`): 2:1 trees and their lists, the CPU
//! float64 evaluator, and the device evaluator with its plans (grouping,
//! tiling).
mod cpu;
pub mod device;
pub mod grouping;
pub mod tiling;
pub mod tree;

pub use cpu::*;
