//! The device side of `hipkern nearfield list1`: the table uploaded once in
//! the chosen layout, the tree's plan uploaded, one warm-up evaluation,
//! then the median of several timed with device events.
use super::list1::LayoutFlag;
use super::Failure;
use hipkern::nearfield::{
    List1Boxes, List1Contract, List1Evaluator, List1Kernel, List1Layout, List1ReducedTables,
    List1Tables, NearFieldTable, ReducedTable,
};
use hipkern::runtime::{Device, Event};
use std::time::Instant;

/// Timed repetitions after the warm-up.
const REPEATS: usize = 9;

/// Evaluates on `device`; the potential, the report line and the median
/// kernel time (ms).
#[allow(clippy::too_many_arguments)]
pub(super) fn evaluate(
    device: &Device,
    boxes: &List1Boxes<'_>,
    dense: &[NearFieldTable],
    reduced: &[ReducedTable],
    per_level: bool,
    layout: LayoutFlag,
    contract: List1Contract,
    density: &[f64],
) -> Result<(Vec<f64>, String, f64), Failure> {
    let start = Instant::now();
    let mut evaluator = match layout {
        LayoutFlag::Dense => {
            let tables = if per_level {
                List1Tables::PerLevel(dense)
            } else {
                List1Tables::Scaled(&dense[0])
            };
            List1Evaluator::from_tables(device, &tables, List1Layout::Dense)?
        }
        LayoutFlag::Orbit | LayoutFlag::Fallback => {
            let tables = if per_level {
                List1ReducedTables::PerLevel(reduced)
            } else {
                List1ReducedTables::Scaled(&reduced[0])
            };
            let l = if layout == LayoutFlag::Orbit {
                List1Layout::Orbit
            } else {
                List1Layout::Fallback
            };
            List1Evaluator::from_reduced(device, &tables, l)?
        }
    };
    evaluator.set_contract(contract);
    let upload_seconds = start.elapsed().as_secs_f64();
    let bytes = evaluator.upload_bytes();
    let stream = device.new_stream()?;
    let mut plan = evaluator.plan(boxes)?;
    // The density uploaded once; the output poisoned, so a value the
    // kernel did not write shows as NaN. One warm-up run (module load,
    // first touch), then the timed runs, then one download.
    let mut f = device.alloc::<f64>(density.len())?;
    // SAFETY: `density` outlives the copy, which the synchronize below waits for.
    unsafe { stream.copy_htod_async(density, &mut f.as_slice_mut())? };
    let mut out = device.alloc::<f64>(plan.n_targets() * evaluator.n_modes())?;
    stream.fill(&mut out.as_slice_mut(), f64::NAN)?;
    evaluator.evaluate_into(&stream, &mut plan, &f, &mut out)?;
    let mut times = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        let (a, b) = (Event::new(device)?, Event::new(device)?);
        a.record(&stream)?;
        evaluator.evaluate_into(&stream, &mut plan, &f, &mut out)?;
        b.record(&stream)?;
        b.synchronize()?;
        times.push(f64::from(a.elapsed_ms(&b)?));
    }
    let mut u = vec![f64::NAN; out.len()];
    // SAFETY: `u` is exclusively borrowed and the synchronize waits for the copy.
    unsafe { stream.copy_dtoh_async(&out.as_slice(), &mut u)? };
    stream.synchronize()?;
    times.sort_by(f64::total_cmp);
    let median = times[REPEATS / 2];
    let tiles = match plan.kernel() {
        List1Kernel::Tiled | List1Kernel::Staged | List1Kernel::TiledFma => format!(
            " {} tiles of {} boxes, lanes busy {:.3}, {} key matrices;",
            plan.target_tiles(),
            plan.targets_per_tile(),
            plan.tiled_lanes_busy(),
            plan.key_matrices()
        ),
        List1Kernel::Grouped => format!(" {} chunks;", plan.grouped_chunks()),
        List1Kernel::PerTarget => String::new(),
    };
    let line = format!(
        "backend device ({}): layout {}, contract {}, kernel {} ({});{tiles} uploaded {} bytes \
         (values {}, descriptors {}, normalizers {}, resolution {}) in {upload_seconds:.3} s; \
         kernel median {median:.4} ms of {REPEATS} (min {:.4}, max {:.4}), {:.3} ns per target \
         point",
        device.properties().name,
        evaluator.layout(),
        plan.contract(),
        plan.kernel(),
        plan.reason(),
        bytes.total(),
        bytes.values,
        bytes.descriptors,
        bytes.normalizers,
        bytes.resolution,
        times[0],
        times[REPEATS - 1],
        median * 1e6 / u.len().max(1) as f64
    );
    Ok((u, line, median))
}
