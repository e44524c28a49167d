//! The device side of `hipkern nearfield list1`.
use super::list1::LayoutFlag;
use super::Failure;
use hipkern::nearfield::{Kernel, List1Boxes, NearFieldTable, ReducedTable};

/// Evaluates on GPU 0; the potential and the report line.
#[allow(clippy::too_many_arguments)]
pub(super) fn evaluate(
    _kernel: &Kernel,
    _q: usize,
    _boxes: &List1Boxes<'_>,
    _dense: &[NearFieldTable],
    _reduced: &[ReducedTable],
    _per_level: bool,
    _layout: LayoutFlag,
    _batch: usize,
    _density: &[f64],
) -> Result<(Vec<f64>, String), Failure> {
    Err(Failure::environment(
        "--backend device: the device List 1 evaluator is not built yet; use --backend cpu",
    ))
}
