//! Shared by the device List 1 tests (tests/nearfield_list1_device.rs):
//! running an evaluator into a poisoned buffer, every layout and batch size
//! against the CPU, the tiled schedule at every tile width, the
//! source-staged plans, and the C ABI's tiled entry point on a plan's raw
//! tiles.
// Not every test binary that includes the common module uses these.
#![allow(dead_code)]
use super::list1::{
    compare, cpu_reference, is_directional, kernels, random_values, same_bits, synthetic, tree,
    Tables, TOL,
};
use hipkern::nearfield::{
    default_targets_per_tile, evaluate_list1, prefer_source_staged, Kernel, List1Boxes,
    List1Evaluator, List1Layout, List1Payload, List1ReducedTables, List1Schedule,
    List1SourceStaging, List1Tables, DEFAULT_PAIR_SCRATCH_BYTES, DEFAULT_STAGED_TARGETS_PER_TILE,
    MAX_GROUPED_MODES, MAX_TILED_MODES, TILE_TARGET_CHOICES,
};
use hipkern::rng::SplitMix64;
use hipkern::{Device, Stream};

/// A source-staged plan (32 boxes a tile) of a synthetic 3D Laplace table
/// at `q` in `layout` on a random tree (`tree_seed`), random source values
/// on the device, and its output, checked against the CPU sum to the
/// tolerance (the tensor cores add in another order).
pub fn staged_case(
    device: &Device,
    stream: &Stream,
    rng: &mut SplitMix64,
    q: usize,
    tree_seed: u64,
    layout: List1Layout,
) -> (
    List1Evaluator,
    hipkern::nearfield::List1DevicePlan,
    hipkern::DeviceBuffer<f64>,
    Vec<f64>,
) {
    let k = Kernel::laplace(3).unwrap();
    let red = synthetic(&k, q, 1.0, rng);
    let t = tree(3, tree_seed, 4);
    let targets = t.all_boxes();
    let boxes = t.list1_boxes(&targets);
    let f = random_values(rng, t.n_boxes() * q.pow(3));
    let fd = device.htod_copy(&f).unwrap();
    let mut ev =
        List1Evaluator::from_reduced(device, &List1ReducedTables::Scaled(&red), layout).unwrap();
    ev.set_schedule(List1Schedule::TargetTiled).unwrap();
    ev.set_targets_per_tile(32).unwrap();
    ev.set_tiled_source_staging(List1SourceStaging::On);
    let mut plan = ev.plan(&boxes).unwrap();
    let good = run_into(&ev, stream, &mut plan, &fd);
    let dense = red.to_dense().unwrap();
    let want = evaluate_list1(&boxes, &List1Tables::Scaled(&dense), &f).unwrap();
    let (err, _) = compare(&format!("staged {layout}"), &good, &want);
    assert!(err <= TOL, "staged {layout}: {err:.2e}");
    (ev, plan, fd, good)
}

/// The C ABI's tiled entry point on one evaluator's table and one plan's
/// pairs and source values, for the tests that edit a plan's raw tiles.
pub struct RawTiled<'a> {
    pub device: &'a Device,
    pub stream: &'a Stream,
    pub table: hipkern_sys::hipkern_list1_table,
    pub pairs: hipkern_sys::hipkern_list1_pairs,
    pub f: &'a hipkern::DeviceBuffer<f64>,
    pub out: hipkern::DeviceBuffer<f64>,
}

impl<'a> RawTiled<'a> {
    pub fn new(
        device: &'a Device,
        stream: &'a Stream,
        table: hipkern_sys::hipkern_list1_table,
        pairs: hipkern_sys::hipkern_list1_pairs,
        f: &'a hipkern::DeviceBuffer<f64>,
        n_out: usize,
    ) -> Self {
        let out = device.alloc::<f64>(n_out).unwrap();
        RawTiled {
            device,
            stream,
            table,
            pairs,
            f,
            out,
        }
    }

    /// `n` values of a plan's device array at `p`.
    ///
    /// # Safety
    /// `p` points to at least `n` values on this device, alive meanwhile.
    pub unsafe fn download<T: hipkern::runtime::DeviceRepr>(
        &self,
        p: *const T,
        n: usize,
    ) -> Vec<T> {
        // SAFETY: the caller's contract; the wrapper frees nothing.
        unsafe { hipkern::DeviceBuffer::from_raw_parts(self.device, p.cast_mut(), n) }
            .to_vec()
            .unwrap()
    }

    /// `hipkern_list1_evaluate_tiled` with `tiles` into the output, filled
    /// with `fill` first: its status and the whole output.
    pub fn call(&mut self, tiles: &hipkern_sys::hipkern_list1_tiles, fill: f64) -> (i32, Vec<f64>) {
        self.stream
            .fill(&mut self.out.as_slice_mut(), fill)
            .unwrap();
        // SAFETY: the evaluator's table, the plan's pairs and buffers of
        // the right sizes on this device (the tests' edits keep every
        // pointer in bounds); synchronized before reading.
        let rc = unsafe {
            hipkern_sys::hipkern_list1_evaluate_tiled(
                &self.table,
                &self.pairs,
                tiles,
                self.f.as_ptr(),
                self.out.as_mut_ptr(),
                self.stream.as_raw(),
            )
        };
        self.stream.synchronize().unwrap();
        (rc, self.out.to_vec().unwrap())
    }
}

pub fn gpu() -> (Device, Stream) {
    let d = Device::new(0).expect("a GPU is required for this test");
    let s = d.new_stream().unwrap();
    (d, s)
}

/// One evaluator run through `evaluate_into` into a poisoned buffer; the
/// whole output downloaded.
pub fn run_into(
    ev: &List1Evaluator,
    stream: &Stream,
    plan: &mut hipkern::nearfield::List1DevicePlan,
    f: &hipkern::DeviceBuffer<f64>,
) -> Vec<f64> {
    let n = plan.n_targets() * ev.n_modes();
    let mut out = ev.device().alloc::<f64>(n).unwrap();
    stream.fill(&mut out.as_slice_mut(), f64::NAN).unwrap();
    ev.evaluate_into(stream, plan, f, &mut out).unwrap();
    stream.synchronize().unwrap();
    out.to_vec().unwrap()
}

/// Every layout of `tables` (ORBIT refused for a directional derivative)
/// against `want`, with batch sizes 1, 32, 7 and 64 bitwise equal, and the
/// `Vec` path equal to the buffer path; the fallback twice: through its
/// resolution table (which every kernel here has) and on the pure
/// descriptor path, bitwise equal to each other. `exact`: assert bitwise
/// equality with `want` too. Returns the worst error.
#[allow(clippy::too_many_arguments)]
pub fn check_layouts(
    what: &str,
    device: &Device,
    stream: &Stream,
    payloads: &dyn Fn(List1Layout) -> hipkern::Result<List1Payload>,
    directional: bool,
    boxes: &List1Boxes<'_>,
    f: &[f64],
    want: &[f64],
    exact: bool,
) -> f64 {
    let fd = device.htod_copy(f).unwrap();
    let mut worst = 0.0f64;
    let mut resolved_out: Option<Vec<f64>> = None;
    let mut tiled_ref: [Option<Vec<f64>>; 2] = [None, None];
    let variants = [
        (List1Layout::Dense, false),
        (List1Layout::Orbit, false),
        (List1Layout::Fallback, true),
        (List1Layout::Fallback, false),
    ];
    for (layout, resolved) in variants {
        let payload = payloads(layout);
        if directional && layout == List1Layout::Orbit {
            let e = payload.unwrap_err().to_string();
            assert!(
                e.contains("ORBIT") && e.contains("directional"),
                "{what}: {e}"
            );
            continue;
        }
        let mut payload = payload.unwrap();
        if layout == List1Layout::Fallback {
            if payload.fallback_resolution().is_none() {
                // resolution() declines when a row needs more than 15 bits:
                // a derivative kernel's orbits are small, so its compact
                // rows are many (3D q=4: beyond 32,767). Only the
                // descriptor path exists then.
                assert!(
                    payload.n_rows() > 0x7FFF,
                    "{what}: no resolution table with {} rows",
                    payload.n_rows()
                );
                if resolved {
                    eprintln!("{what}: no resolution table (rows beyond 15 bits)");
                    continue;
                }
            }
            if !resolved {
                payload = payload.without_fallback_resolution();
                assert!(payload.fallback_resolution().is_none());
            }
        }
        let layout_name = if layout == List1Layout::Fallback && !resolved {
            "fallback-descriptors".to_string()
        } else {
            layout.to_string()
        };
        let layout = layout_name.as_str();
        let mut ev = List1Evaluator::new(device, &payload).unwrap();
        assert_eq!(ev.fallback_resolved(), resolved);
        assert_eq!(ev.upload_bytes(), payload.upload_bytes());
        let mut plan = ev.plan(boxes).unwrap();
        // The per-target schedule at four batch sizes, then the grouped
        // one in one chunk and (a plan made with a small scratch bound) in
        // many: every run bitwise equal to the first.
        let grouped = ev.n_modes() <= MAX_GROUPED_MODES;
        assert_eq!(
            ev.schedule(),
            if grouped {
                List1Schedule::CaseGrouped
            } else {
                List1Schedule::PerTarget
            }
        );
        let mut runs: Vec<(String, List1Schedule, usize, usize)> = [1usize, 32, 7, 64]
            .iter()
            .map(|&b| {
                (
                    format!("per-target batch {b}"),
                    List1Schedule::PerTarget,
                    b,
                    DEFAULT_PAIR_SCRATCH_BYTES,
                )
            })
            .collect();
        if grouped {
            runs.push((
                "grouped".into(),
                List1Schedule::CaseGrouped,
                1,
                DEFAULT_PAIR_SCRATCH_BYTES,
            ));
            // About seven chunks.
            let small = (plan.n_pairs() / 7).max(1) * ev.n_modes() * 8;
            runs.push((
                "grouped, chunked".into(),
                List1Schedule::CaseGrouped,
                1,
                small,
            ));
        } else {
            assert!(ev.set_schedule(List1Schedule::CaseGrouped).is_err());
        }
        let mut first: Option<Vec<f64>> = None;
        for (run, schedule, batch, scratch) in runs {
            ev.set_target_batch_size(batch).unwrap();
            ev.set_schedule(schedule).unwrap();
            if scratch != ev.pair_scratch_bytes() {
                ev.set_pair_scratch_bytes(scratch).unwrap();
                plan = ev.plan(boxes).unwrap();
                assert!(
                    plan.grouped_chunks() > 1 || plan.n_pairs() < 7,
                    "{what} {layout}: {} chunks",
                    plan.grouped_chunks()
                );
                // Within the bound, unless one target alone exceeds it.
                let widest = boxes
                    .source_starts
                    .windows(2)
                    .map(|w| (w[1] - w[0]) as usize)
                    .max()
                    .unwrap_or(0);
                assert!(
                    plan.pair_scratch_bytes() <= scratch.max(widest * ev.n_modes() * 8),
                    "{what} {layout}: scratch {} over the bound {scratch}",
                    plan.pair_scratch_bytes()
                );
            }
            let got = run_into(&ev, stream, &mut plan, &fd);
            let batch = run.as_str();
            let (err, differ) = compare(&format!("{what} {layout} {batch}"), &got, want);
            assert!(
                err <= TOL,
                "{what} {layout} {batch}: relative error {err:.3e}"
            );
            if exact {
                assert_eq!(
                    differ, 0,
                    "{what} {layout} {batch}: {differ} elements differ in their bits"
                );
            }
            worst = worst.max(err);
            match &first {
                None => {
                    eprintln!(
                        "{what} {layout}: rel err {err:.2e}, {differ}/{} bits differ, {} B values + {} B descriptors",
                        got.len(),
                        payload.upload_bytes().values,
                        payload.upload_bytes().descriptors
                    );
                    first = Some(got);
                }
                Some(b1) => {
                    let same = b1.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(
                        same,
                        "{what} {layout}: {batch} differs from per-target batch 1"
                    );
                }
            }
        }
        // The tiled schedule on the tensor cores (where the device has
        // them) and with FMAs: keys in order, so against `want` to the
        // tolerance only; per arithmetic bitwise the same at every tile
        // width and, where the layouts hold the same entries (`exact`), for
        // every layout.
        if ev.n_modes() <= MAX_TILED_MODES {
            for (ai, tensor) in [true, false].into_iter().enumerate() {
                let t0 = check_tiled(
                    &format!("{what} {layout}"),
                    &mut ev,
                    stream,
                    boxes,
                    &fd,
                    want,
                    tensor,
                );
                worst = worst.max(t0.1);
                if exact {
                    match &tiled_ref[ai] {
                        None => tiled_ref[ai] = Some(t0.0),
                        Some(r) => assert!(
                            r.iter().zip(&t0.0).all(|(a, b)| a.to_bits() == b.to_bits()),
                            "{what} {layout}: tiled (tensor cores {tensor}) differs from the first layout's"
                        ),
                    }
                }
            }
            ev.set_tiled_tensor_cores(true);
            ev.set_schedule(List1Schedule::PerTarget).unwrap();
        } else {
            assert!(ev.set_schedule(List1Schedule::TargetTiled).is_err());
        }
        ev.set_target_batch_size(1).unwrap();
        let v = ev.evaluate(stream, boxes, f).unwrap();
        ev.set_pair_scratch_bytes(DEFAULT_PAIR_SCRATCH_BYTES)
            .unwrap();
        let b1 = first.unwrap();
        assert!(
            v.iter().zip(&b1).all(|(a, b)| a.to_bits() == b.to_bits()),
            "{what} {layout}: evaluate() differs from evaluate_into()"
        );
        if payload.layout() == List1Layout::Fallback {
            match &resolved_out {
                None => resolved_out = Some(b1),
                Some(r) => assert!(
                    r.iter().zip(&b1).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{what}: the resolved fallback differs from the descriptor path"
                ),
            }
        }
    }
    worst
}

/// The tiled schedule of `ev` (tensor cores allowed or not) at the default
/// tile width and every other one, each against `want` to [`TOL`] and bitwise equal
/// to the default width's; returns that output and the worst error.
#[allow(clippy::too_many_arguments)]
pub fn check_tiled(
    what: &str,
    ev: &mut List1Evaluator,
    stream: &Stream,
    boxes: &List1Boxes<'_>,
    fd: &hipkern::DeviceBuffer<f64>,
    want: &[f64],
    tensor: bool,
) -> (Vec<f64>, f64) {
    ev.set_schedule(List1Schedule::TargetTiled).unwrap();
    ev.set_tiled_tensor_cores(tensor);
    ev.set_tiled_source_staging(List1SourceStaging::Off);
    let arith = if tensor { "tensor" } else { "fma" };
    let mut first: Option<Vec<f64>> = None;
    let mut worst = 0.0f64;
    let default = default_targets_per_tile(ev.n_modes());
    let widths =
        std::iter::once(default).chain(TILE_TARGET_CHOICES.into_iter().filter(|&w| w != default));
    for width in widths {
        ev.set_targets_per_tile(width).unwrap();
        let mut plan = ev.plan(boxes).unwrap();
        assert_eq!(plan.targets_per_tile(), width);
        assert!(!plan.tiled_for_source_staging());
        assert!(plan.target_tiles() >= plan.n_targets().div_ceil(width));
        assert!(plan.tile_slots() >= plan.n_pairs());
        let out = run_into(ev, stream, &mut plan, fd);
        let (err, _) = compare(&format!("{what} tiled {arith} {width}"), &out, want);
        assert!(
            err <= TOL,
            "{what} tiled {arith} {width}: relative error {err:.3e}"
        );
        eprintln!(
            "{what} tiled {arith} {width}: rel err {err:.2e}, {} tiles, lanes busy {:.3}",
            plan.target_tiles(),
            plan.tiled_lanes_busy()
        );
        worst = worst.max(err);
        if tensor {
            // The source-staged kernel: the same products in the same
            // order, so the same bits (or the same FMA fallback).
            ev.set_tiled_source_staging(List1SourceStaging::On);
            // A plan keeps the kernel it was cut for: the per-key plan
            // still runs per key.
            assert!(
                same_bits(&run_into(ev, stream, &mut plan, fd), &out),
                "{what} tiled {width}: the per-key plan changed with the evaluator's staging"
            );
            // With the keys' case matrices expanded (the default for
            // ORBIT and the fallback) and reconstructed per tile.
            for key_matrices in [true, false] {
                ev.set_tiled_key_matrices(key_matrices);
                let mut staged_plan = ev.plan(boxes).unwrap();
                assert!(staged_plan.tiled_for_source_staging());
                let expanded = key_matrices
                    && ev.layout() != List1Layout::Dense
                    && ev.tiled_tensor_cores_available();
                assert_eq!(staged_plan.key_matrices() > 0, expanded);
                assert_eq!(
                    staged_plan.key_matrix_bytes(),
                    staged_plan.key_matrices() * ev.n_modes() * ev.n_modes() * 8
                );
                let staged = run_into(ev, stream, &mut staged_plan, fd);
                let differ = out
                    .iter()
                    .zip(&staged)
                    .filter(|(a, b)| a.to_bits() != b.to_bits())
                    .count();
                assert_eq!(
                    differ,
                    0,
                    "{what} tiled {width}: the source-staged kernel (key matrices \
                     {key_matrices}) differs from the per-key one in {differ} values ({} \
                     sources per tile at most)",
                    staged_plan.max_tile_sources()
                );
            }
            ev.set_tiled_key_matrices(true);
            ev.set_tiled_source_staging(List1SourceStaging::Off);
        }
        match &first {
            None => first = Some(out),
            Some(t0) => assert!(
                t0.iter().zip(&out).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{what}: tiled {arith} {width} differs from the default width"
            ),
        }
    }
    // Auto at the default widths takes the tiling that
    // prefer_source_staged picks from the lanes busy of the two, and gives
    // the same bits whichever it is.
    ev.set_targets_per_tile(None).unwrap();
    let first = first.unwrap();
    let busy = hipkern::nearfield::List1DevicePlan::tiled_lanes_busy;
    let per_key = ev.plan(boxes).unwrap();
    ev.set_tiled_source_staging(List1SourceStaging::On);
    let staged = ev.plan(boxes).unwrap();
    assert_eq!(staged.targets_per_tile(), DEFAULT_STAGED_TARGETS_PER_TILE);
    ev.set_tiled_source_staging(List1SourceStaging::Auto);
    let mut auto = ev.plan(boxes).unwrap();
    let want_staged = tensor
        && ev.tiled_tensor_cores_available()
        && prefer_source_staged(busy(&per_key), busy(&staged));
    assert_eq!(auto.tiled_for_source_staging(), want_staged, "{what} auto");
    let chosen = if want_staged { &staged } else { &per_key };
    assert_eq!(
        (
            auto.targets_per_tile(),
            auto.target_tiles(),
            auto.tile_slots()
        ),
        (
            chosen.targets_per_tile(),
            chosen.target_tiles(),
            chosen.tile_slots()
        ),
        "{what} auto"
    );
    assert!(
        same_bits(&run_into(ev, stream, &mut auto, fd), &first),
        "{what} tiled {arith} auto (staged {want_staged}) differs from the per-key output"
    );
    eprintln!(
        "{what} tiled {arith} auto: lanes busy per key {:.3}, staged {:.3}: staged {want_staged}",
        busy(&per_key),
        busy(&staged)
    );
    (first, worst)
}

/// Reduced tables of every kernel at `qs` on a random tree of `dim`, all
/// layouts against the CPU on their reconstruction, bitwise.
pub fn reduced_case(dim: usize, qs: &[usize], max_level: u32, only: Option<&[&str]>) {
    let (device, stream) = gpu();
    let t = tree(dim, 0x1157 + dim as u64, max_level);
    let targets = t.all_boxes();
    let boxes = t.list1_boxes(&targets);
    eprintln!(
        "{dim}D tree: {} boxes, {} pairs, levels {:?}..{}",
        t.n_boxes(),
        t.list1_sources().len(),
        t.levels().iter().min(),
        t.max_level()
    );
    let mut rng = SplitMix64::new(0xD1CE ^ dim as u64);
    for &q in qs {
        let nq = q.pow(dim as u32);
        for (name, k) in kernels(dim) {
            if only.is_some_and(|o| !o.contains(&name)) {
                continue;
            }
            let tables = Tables::build(&k, q, &t);
            let dense = tables.dense();
            let f = random_values(&mut rng, t.n_boxes() * nq);
            let want = cpu_reference(&dense, matches!(tables, Tables::PerLevel(_)), &boxes, &f);
            let view = tables.view();
            let payloads = |l: List1Layout| List1Payload::from_reduced(&view, l);
            check_layouts(
                &format!("{dim}D {name} q={q}"),
                &device,
                &stream,
                &payloads,
                is_directional(&k),
                &boxes,
                &f,
                &want,
                true,
            );
        }
    }
}
