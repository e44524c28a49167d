//! The device List 1 evaluator (`List1Evaluator`) against the CPU float64
//! evaluator (`evaluate_list1`), `docs/design/list1.md`.
//!
//! GPU tests (`gpu_*`, ignored on the cpu platform): every layout (dense,
//! ORBIT, descriptor fallback through its resolution table and on the pure
//! descriptor path, bitwise equal to each other) and every kernel of the tables issue
//! (Laplace, Constant, Yukawa with per-level tables, axis target and source
//! derivatives, a directional source derivative — dense and fallback only;
//! ORBIT refuses it), 2D and 3D, q = 1..4, on random 2:1-balanced trees
//! with a root that is neither the unit box nor at the origin, fresh random
//! source values; the output buffer is poisoned (NaN) before every run and
//! every element is checked. Tables are symmetry-reduced builds
//! (`ReducedTable::build`, cheap quadrature orders in 3D: the evaluator's
//! correctness does not depend on how accurate the entries are), the CPU
//! reference runs on their dense reconstruction, and a few dense builds
//! (`NearFieldTable::build`) go through `List1Evaluator::from_tables`.
//! Accepted: relative max-norm error ≤ 1e−13; measured and asserted:
//! bitwise equality wherever the layouts hold the CPU's entry values (the
//! kernel never contracts into FMAs), and batch sizes 1, 32 (and 7, 64)
//! bitwise equal to each other.
//!
//! CPU tests (always): without a device the API is a clean error; every
//! layout's payload reconstructs every entry of a reduced table with
//! synthetic values exactly (so packing and addressing are checked
//! without quadrature); the bytes each layout uploads; the refusals (ORBIT
//! and a directional derivative, Yukawa without per-level tables); and the
//! host validation gives the CPU evaluator's own errors for bad inputs.
mod common;
use hipkern::nearfield::{
    default_targets_per_tile, evaluate_list1, prefer_source_staged, BalancedTree, DenseOrbits,
    EntryQuadrature, FallbackDescriptors, Kernel, List1Boxes, List1Evaluator, List1Layout,
    List1Payload, List1ReducedTables, List1Schedule, List1SourceStaging, List1Tables,
    NearFieldTable, OrbitDescriptors, RandomTreeConfig, ReducedTable, DEFAULT_PAIR_SCRATCH_BYTES,
    DEFAULT_STAGED_TARGETS_PER_TILE, MAX_GROUPED_MODES, MAX_TILED_MODES, TILE_TARGET_CHOICES,
};
use hipkern::rng::SplitMix64;
use hipkern::{Device, Stream};

/// The tolerance (relative, max-norm).
const TOL: f64 = 1e-13;

// ---------------------------------------------------------------- inputs

/// The kernels of the tables issue in dimension `dim` (name, kernel).
fn kernels(dim: usize) -> Vec<(&'static str, Kernel)> {
    let l = Kernel::laplace(dim).unwrap();
    let dir: Vec<f64> = if dim == 2 {
        vec![0.7, 0.7]
    } else {
        vec![0.4, -0.4, 0.4]
    };
    vec![
        ("laplace", l.clone()),
        ("constant", Kernel::constant(dim).unwrap()),
        ("yukawa", Kernel::yukawa(dim, 1.7).unwrap()),
        (
            "target-deriv",
            l.clone().axis_target_derivative(dim - 1).unwrap(),
        ),
        ("source-deriv", l.clone().axis_source_derivative(0).unwrap()),
        (
            "directional",
            l.directional_source_derivative(&dir).unwrap(),
        ),
    ]
}

fn is_yukawa(k: &Kernel) -> bool {
    matches!(k.base(), hipkern::nearfield::BaseKernel::Yukawa { .. })
}

fn is_directional(k: &Kernel) -> bool {
    matches!(
        k.derivative(),
        Some(hipkern::nearfield::Derivative::DirectionalSource(_))
    )
}

/// Quadrature orders: the defaults in 2D, cheap ones in 3D (module docs).
fn quad(dim: usize) -> EntryQuadrature {
    if dim == 2 {
        EntryQuadrature::default()
    } else {
        EntryQuadrature {
            radial_level: 2,
            angular_order: 5,
        }
    }
}

/// A random 2:1-balanced tree with an off-origin, non-unit root.
fn tree(dim: usize, seed: u64, max_level: u32) -> BalancedTree {
    let mut cfg = RandomTreeConfig::new(dim, seed, max_level);
    cfg.root_lower = (0..dim).map(|k| -0.4 + 0.3 * k as f64).collect();
    cfg.root_extent = 1.3;
    BalancedTree::random(&cfg).unwrap()
}

fn random_values(rng: &mut SplitMix64, n: usize) -> Vec<f64> {
    (0..n).map(|_| 0.5 + rng.uniform_pm1()).collect()
}

/// Reduced tables for a kernel on a tree: one scaled table, or (Yukawa)
/// one per level `0..=max_level`, built for the levels of the tree's
/// boxes (other levels hold a copy: they are never read).
enum Tables {
    Scaled(Box<ReducedTable>),
    PerLevel(Vec<ReducedTable>),
}

impl Tables {
    fn build(k: &Kernel, q: usize, t: &BalancedTree) -> Tables {
        let d = t.dim();
        if !is_yukawa(k) {
            return Tables::Scaled(Box::new(ReducedTable::build(k, q, 0.9, &quad(d)).unwrap()));
        }
        let top = t.max_level();
        let mut used = vec![false; top as usize + 1];
        for &l in t.levels() {
            used[l as usize] = true;
        }
        let built: Vec<Option<ReducedTable>> = (0..=top)
            .map(|l| {
                used[l as usize].then(|| {
                    let h = t.root_extent() / f64::from(1u32 << l);
                    ReducedTable::build(k, q, h, &quad(d)).unwrap()
                })
            })
            .collect();
        let any = built.iter().flatten().next().unwrap().clone();
        Tables::PerLevel(
            built
                .into_iter()
                .map(|x| x.unwrap_or_else(|| any.clone()))
                .collect(),
        )
    }

    fn view(&self) -> List1ReducedTables<'_> {
        match self {
            Tables::Scaled(t) => List1ReducedTables::Scaled(t),
            Tables::PerLevel(ts) => List1ReducedTables::PerLevel(ts),
        }
    }

    /// The dense reconstructions (the CPU reference's tables).
    fn dense(&self) -> Vec<NearFieldTable> {
        let one = |t: &ReducedTable| t.to_dense().unwrap();
        match self {
            Tables::Scaled(t) => vec![one(t)],
            Tables::PerLevel(ts) => ts.iter().map(one).collect(),
        }
    }
}

fn cpu_reference(
    dense: &[NearFieldTable],
    per_level: bool,
    boxes: &List1Boxes<'_>,
    f: &[f64],
) -> Vec<f64> {
    let tables = if per_level {
        List1Tables::PerLevel(dense)
    } else {
        List1Tables::Scaled(&dense[0])
    };
    evaluate_list1(boxes, &tables, f).unwrap()
}

/// `‖got − want‖∞ / ‖want‖∞` and the number of elements whose bits
/// differ (±0 counted equal). Panics on a non-finite element.
fn compare(what: &str, got: &[f64], want: &[f64]) -> (f64, usize) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let mut num = 0.0f64;
    let mut den = 0.0f64;
    let mut differ = 0;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(g.is_finite(), "{what}: element {i} is {g} (want {w})");
        num = num.max((g - w).abs());
        den = den.max(w.abs());
        if g.to_bits() != w.to_bits() && !(g == 0.0 && w == 0.0) {
            differ += 1;
        }
    }
    (if den > 0.0 { num / den } else { num }, differ)
}

/// A source-staged plan (32 boxes a tile) of a synthetic 3D Laplace table
/// at `q` in `layout` on a random tree (`tree_seed`), random source values
/// on the device, and its output, checked against the CPU sum to the
/// tolerance (the tensor cores add in another order).
fn staged_case(
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

/// Bitwise equality of two outputs.
fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The C ABI's tiled entry point on one evaluator's table and one plan's
/// pairs and source values, for the tests that edit a plan's raw tiles.
struct RawTiled<'a> {
    device: &'a Device,
    stream: &'a Stream,
    table: hipkern_sys::hipkern_list1_table,
    pairs: hipkern_sys::hipkern_list1_pairs,
    f: &'a hipkern::DeviceBuffer<f64>,
    out: hipkern::DeviceBuffer<f64>,
}

impl<'a> RawTiled<'a> {
    fn new(
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
    unsafe fn download<T: hipkern::runtime::DeviceRepr>(&self, p: *const T, n: usize) -> Vec<T> {
        // SAFETY: the caller's contract; the wrapper frees nothing.
        unsafe { hipkern::DeviceBuffer::from_raw_parts(self.device, p.cast_mut(), n) }
            .to_vec()
            .unwrap()
    }

    /// `hipkern_list1_evaluate_tiled` with `tiles` into the output, filled
    /// with `fill` first: its status and the whole output.
    fn call(&mut self, tiles: &hipkern_sys::hipkern_list1_tiles, fill: f64) -> (i32, Vec<f64>) {
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

fn gpu() -> (Device, Stream) {
    let d = Device::new(0).expect("a GPU is required for this test");
    let s = d.new_stream().unwrap();
    (d, s)
}

/// One evaluator run through `evaluate_into` into a poisoned buffer; the
/// whole output downloaded.
fn run_into(
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
fn check_layouts(
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
fn check_tiled(
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
fn reduced_case(dim: usize, qs: &[usize], max_level: u32, only: Option<&[&str]>) {
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

// ------------------------------------------------------------ always run

#[test]
fn without_a_device_the_api_is_a_clean_error() {
    // No Device on the cpu platform, so no List1Evaluator can be made; the C ABI's
    // argument checks come before any runtime call.
    let expect_bad = common::check_no_device_contract();
    let k = Kernel::laplace(2).unwrap();
    let reps = DenseOrbits::build(&k, 1).unwrap();
    let red = ReducedTable::from_parts(
        &k,
        1,
        1.0,
        &EntryQuadrature::default(),
        reps.representatives.clone(),
        vec![1.0; reps.n_representatives()],
    )
    .unwrap();
    let p = List1Payload::from_reduced(&List1ReducedTables::Scaled(&red), List1Layout::Dense);
    assert!(p.is_ok());
    let null = std::ptr::null::<f64>();
    let dummy = [0.0f64; 1];
    let table = hipkern_sys::hipkern_list1_table {
        layout: hipkern_sys::HIPKERN_LIST1_DENSE,
        dim: 2,
        q: 1,
        n_cases: 33,
        n_tables: 1,
        n_rows: 33,
        values: dummy.as_ptr(),
        mode_normalizers: dummy.as_ptr(),
        n_case_orbits: 0,
        case_orbit_ranks: std::ptr::null(),
        case_axis_perm: std::ptr::null(),
        case_axis_sign: std::ptr::null(),
        case_axis_group: std::ptr::null(),
        case_value_offsets: std::ptr::null(),
        axis_sign_power: std::ptr::null(),
        n_transforms: 0,
        transform_qpoint_map: std::ptr::null(),
        transform_case_map: std::ptr::null(),
        transform_signs: std::ptr::null(),
        lookup_size: 0,
        probe_count: 0,
        lookup_keys: std::ptr::null(),
        lookup_rows: std::ptr::null(),
        n_sign_lookup: 0,
        sign_lookup_ids: std::ptr::null(),
        sign_lookup_signs: std::ptr::null(),
        n_resolve_orbits: 0,
        resolve_case_orbit: std::ptr::null(),
        resolve_case_transform: std::ptr::null(),
        resolve_rows: std::ptr::null(),
    };
    let pairs = hipkern_sys::hipkern_list1_pairs {
        n_targets: 1,
        n_boxes: 1,
        n_pairs: 1,
        n_levels: 1,
        source_starts: std::ptr::null(),
        source_boxes: std::ptr::null(),
        pair_cases: std::ptr::null(),
        box_levels: std::ptr::null(),
        level_scale: std::ptr::null(),
        level_displacement: std::ptr::null(),
        level_table: std::ptr::null(),
    };
    let mut bad_layout = table;
    bad_layout.layout = 7;
    let mut bad_dim = table;
    bad_dim.dim = 4;
    let mut bad_rows = table;
    bad_rows.n_rows = 32;
    let mut orbit_without_descriptors = table;
    orbit_without_descriptors.layout = hipkern_sys::HIPKERN_LIST1_ORBIT;
    let mut bad_levels = pairs;
    bad_levels.n_levels = 0;
    // SAFETY: every call below is refused before any pointer is used.
    unsafe {
        let call = |t: *const hipkern_sys::hipkern_list1_table,
                    p: *const hipkern_sys::hipkern_list1_pairs,
                    batch: i32| {
            hipkern_sys::hipkern_list1_evaluate(
                t,
                p,
                null,
                std::ptr::null_mut(),
                batch,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(call(std::ptr::null(), &pairs, 1), expect_bad);
        assert_eq!(call(&table, std::ptr::null(), 1), expect_bad);
        assert_eq!(call(&table, &pairs, 0), expect_bad);
        assert_eq!(call(&table, &pairs, 1025), expect_bad);
        assert_eq!(call(&bad_layout, &pairs, 1), expect_bad);
        assert_eq!(call(&bad_dim, &pairs, 1), expect_bad);
        assert_eq!(call(&bad_rows, &pairs, 1), expect_bad);
        assert_eq!(call(&orbit_without_descriptors, &pairs, 1), expect_bad);
        assert_eq!(call(&table, &bad_levels, 1), expect_bad);
        // Null CSR / output with targets to write.
        assert_eq!(call(&table, &pairs, 1), expect_bad);
    }
}

/// Synthetic reduced table: random values on the representatives, 0 on
/// the orbits that are zero by symmetry.
fn synthetic(k: &Kernel, q: usize, extent: f64, rng: &mut SplitMix64) -> ReducedTable {
    let o = DenseOrbits::build(k, q).unwrap();
    let data = o
        .zero_by_symmetry
        .iter()
        .map(|&z| if z { 0.0 } else { rng.uniform_pm1() })
        .collect();
    ReducedTable::from_parts(
        k,
        q,
        extent,
        &EntryQuadrature::default(),
        o.representatives,
        data,
    )
    .unwrap()
}

/// Every layout's payload reconstructs every full entry of a reduced
/// table exactly (±0 equal), for per-level tables too: what the device
/// reads is what the CPU reads.
#[test]
fn payloads_reconstruct_every_entry() {
    let mut rng = SplitMix64::new(77);
    for dim in [2usize, 3] {
        let qs: &[usize] = if dim == 2 { &[1, 2, 3, 4] } else { &[1, 2, 3] };
        for (name, k) in kernels(dim) {
            for &q in qs {
                let tables = [
                    synthetic(&k, q, 1.0, &mut rng),
                    synthetic(&k, q, 0.5, &mut rng),
                ];
                let full: Vec<Vec<f64>> = tables
                    .iter()
                    .map(|t| t.reconstruct_full_table_from_symmetry())
                    .collect();
                for (layout, resolved) in [
                    (List1Layout::Dense, false),
                    (List1Layout::Orbit, false),
                    (List1Layout::Fallback, true),
                    (List1Layout::Fallback, false),
                ] {
                    let view = if is_yukawa(&k) {
                        List1ReducedTables::PerLevel(&tables)
                    } else {
                        List1ReducedTables::Scaled(&tables[0])
                    };
                    let mut p = match List1Payload::from_reduced(&view, layout) {
                        Err(e) if layout == List1Layout::Orbit && is_directional(&k) => {
                            assert!(e.to_string().contains("ORBIT"), "{e}");
                            continue;
                        }
                        r => r.unwrap(),
                    };
                    if layout == List1Layout::Fallback {
                        assert!(p.fallback_resolution().is_some(), "{dim}D {name} q={q}");
                        if !resolved {
                            p = p.without_fallback_resolution();
                        }
                    }
                    let nq = q.pow(dim as u32);
                    for (ti, want) in full.iter().enumerate().take(p.n_tables()) {
                        for (id, &w) in want.iter().enumerate() {
                            let (c, s, t) = (id / (nq * nq), (id / nq) % nq, id % nq);
                            let g = p.entry(ti, c, s, t).unwrap();
                            assert!(
                                g.to_bits() == w.to_bits() || (g == 0.0 && w == 0.0),
                                "{dim}D {name} q={q} {layout} table {ti} entry {id}: {g} vs {w}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The dense payload of a built dense table is the table; ORBIT and
/// fallback hold each orbit's representative value.
#[test]
fn payloads_of_dense_tables() {
    let k = Kernel::laplace(2)
        .unwrap()
        .axis_target_derivative(1)
        .unwrap();
    let q = 2;
    let t = NearFieldTable::build(&k, q, 1.0, &EntryQuadrature::default()).unwrap();
    let o = DenseOrbits::build(&k, q).unwrap();
    for layout in List1Layout::ALL {
        let p = List1Payload::from_tables(&List1Tables::Scaled(&t), layout).unwrap();
        let nq = q * q;
        for id in 0..t.data().len() {
            let (c, s, tt) = (id / (nq * nq), (id / nq) % nq, id % nq);
            let g = p.entry(0, c, s, tt).unwrap();
            let rep = o.canonical_entry_ids[id] as usize;
            let r = o.representatives.binary_search(&(rep as u32)).unwrap();
            let want = match layout {
                List1Layout::Dense => t.data()[id],
                _ if o.zero_by_symmetry[r] => 0.0,
                _ => o.canonical_scales[id] * t.data()[rep],
            };
            assert!(
                g.to_bits() == want.to_bits() || (g == 0.0 && want == 0.0),
                "{layout} entry {id}: {g} vs {want}"
            );
        }
    }
}

/// Bytes uploaded per layout at 3D q = 3 Laplace: dense 101331 values,
/// ORBIT 2510 rows and the 1576 descriptor bytes, the fallback its
/// own metadata; all with the 27 normalisers.
#[test]
fn upload_bytes_3d_q3() {
    let k = Kernel::laplace(3).unwrap();
    let mut rng = SplitMix64::new(5);
    let red = synthetic(&k, 3, 1.0, &mut rng);
    let v = List1ReducedTables::Scaled(&red);
    let dense = List1Payload::from_reduced(&v, List1Layout::Dense).unwrap();
    let orbit = List1Payload::from_reduced(&v, List1Layout::Orbit).unwrap();
    let fb = List1Payload::from_reduced(&v, List1Layout::Fallback).unwrap();
    assert_eq!(dense.upload_bytes().values, 101_331 * 8);
    assert_eq!(dense.upload_bytes().descriptors, 0);
    assert_eq!(orbit.upload_bytes().values, 2510 * 8);
    assert_eq!(orbit.upload_bytes().descriptors, 1576);
    assert_eq!(
        orbit.upload_bytes().descriptors,
        OrbitDescriptors::build(&k, 3).unwrap().metadata_bytes()
    );
    assert_eq!(fb.upload_bytes().values, 2510 * 8);
    assert_eq!(
        fb.upload_bytes().descriptors,
        FallbackDescriptors::prepare(&k, 3)
            .unwrap()
            .metadata_bytes()
    );
    // The resolution table: per case its orbit and transform, 10 canonical
    // cases × 27² u16 entries.
    let n_cases = hipkern::nearfield::Cases::new(3).unwrap().len();
    assert_eq!(fb.upload_bytes().resolution, 2 * n_cases + 10 * 729 * 2);
    let fbd = fb.clone().without_fallback_resolution();
    assert_eq!(fbd.upload_bytes().resolution, 0);
    assert_eq!(
        fbd.upload_bytes().descriptors,
        fb.upload_bytes().descriptors
    );
    assert_eq!(
        fb.upload_bytes().total(),
        fbd.upload_bytes().total() + fb.upload_bytes().resolution
    );
    for p in [&dense, &orbit] {
        assert_eq!(p.upload_bytes().resolution, 0);
    }
    for p in [&dense, &orbit, &fb] {
        assert_eq!(p.upload_bytes().normalizers, 27 * 8);
        let b = p.upload_bytes();
        eprintln!(
            "3D q=3 Laplace {}: {} B values + {} B descriptors + {} B normalisers + {} B \
             resolution = {} B",
            p.layout(),
            b.values,
            b.descriptors,
            b.normalizers,
            b.resolution,
            b.total()
        );
    }
}

/// Tables the evaluator refuses, with errors that say why.
#[test]
fn refused_tables() {
    let mut rng = SplitMix64::new(9);
    // ORBIT and a directional source derivative.
    let k = Kernel::laplace(3)
        .unwrap()
        .directional_source_derivative(&[0.2, 0.0, -0.9])
        .unwrap();
    let red = synthetic(&k, 1, 1.0, &mut rng);
    let e = List1Payload::from_reduced(&List1ReducedTables::Scaled(&red), List1Layout::Orbit)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ORBIT") && e.contains("directional") && e.contains("fallback"),
        "{e}"
    );
    for l in [List1Layout::Dense, List1Layout::Fallback] {
        List1Payload::from_reduced(&List1ReducedTables::Scaled(&red), l).unwrap();
    }
    // Yukawa through one scaled table.
    let y = synthetic(&Kernel::yukawa(2, 2.0).unwrap(), 2, 1.0, &mut rng);
    let e = List1Payload::from_reduced(&List1ReducedTables::Scaled(&y), List1Layout::Dense)
        .unwrap_err()
        .to_string();
    assert!(e.contains("Yukawa") && e.contains("per level"), "{e}");
    // Per-level tables of different q.
    let y3 = synthetic(&Kernel::yukawa(2, 2.0).unwrap(), 3, 0.5, &mut rng);
    let e = List1Payload::from_reduced(
        &List1ReducedTables::PerLevel(&[y.clone(), y3]),
        List1Layout::Fallback,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("per-level table 1"), "{e}");
    let e = List1Payload::from_reduced(&List1ReducedTables::PerLevel(&[]), List1Layout::Dense)
        .unwrap_err()
        .to_string();
    assert!(e.contains("empty"), "{e}");
    // A layout name.
    assert_eq!("orbit".parse::<List1Layout>().unwrap(), List1Layout::Orbit);
    assert!("sparse".parse::<List1Layout>().is_err());
}

/// The host validation of an evaluation gives the CPU evaluator's own
/// error, for each kind of bad input.
#[test]
fn bad_inputs_give_the_cpu_evaluators_errors() {
    let k = Kernel::laplace(2).unwrap();
    let q = 2;
    let mut rng = SplitMix64::new(3);
    let red = synthetic(&k, q, 1.0, &mut rng);
    let dense = red.to_dense().unwrap();
    let payload =
        List1Payload::from_reduced(&List1ReducedTables::Scaled(&red), List1Layout::Orbit).unwrap();
    let t = tree(2, 11, 4);
    let targets = t.all_boxes();
    let nq = q * q;
    let f = random_values(&mut rng, t.n_boxes() * nq);
    let good = t.list1_boxes(&targets);
    payload.check(&good, Some(&f)).unwrap();
    let same = |b: &List1Boxes<'_>, f: &[f64], what: &str| {
        let cpu = evaluate_list1(b, &List1Tables::Scaled(&dense), f)
            .unwrap_err()
            .to_string();
        let dev = payload.check(b, Some(f)).unwrap_err().to_string();
        assert_eq!(dev, cpu, "{what}");
        dev
    };
    // A pair that is not a List 1 neighbour: a far box in a list.
    let mut sources = t.list1_sources().to_vec();
    let far = (0..t.n_boxes() as u32)
        .find(|&b| {
            let d: f64 = (0..2)
                .map(|k| (t.centers()[2 * b as usize + k] - t.centers()[k]).abs())
                .fold(0.0, f64::max);
            d > 0.6
        })
        .unwrap();
    sources[1] = far;
    let b = List1Boxes {
        source_boxes: &sources,
        ..good
    };
    let e = same(&b, &f, "far pair");
    assert!(
        e.contains("not a List 1 pair") && e.contains(&format!("source box {far}")),
        "{e}"
    );
    // CSR not monotone, wrong end, box id out of range, target out of range.
    let mut starts = t.list1_starts().to_vec();
    starts.swap(2, 3);
    let b = List1Boxes {
        source_starts: &starts,
        ..good
    };
    assert!(same(&b, &f, "monotone").contains("not monotone"));
    let short = &t.list1_starts()[..t.n_boxes()];
    let b = List1Boxes {
        source_starts: short,
        ..good
    };
    same(&b, &f, "starts length");
    let mut sources = t.list1_sources().to_vec();
    sources[0] = t.n_boxes() as u32;
    let b = List1Boxes {
        source_boxes: &sources,
        ..good
    };
    assert!(same(&b, &f, "box id").contains("out of range"));
    let mut tg = targets.clone();
    tg[0] = u32::MAX;
    let b = List1Boxes {
        target_boxes: &tg,
        ..good
    };
    same(&b, &f, "target id");
    // Source values: length, non-finite.
    same(&good, &f[1..], "values length");
    let mut g = f.clone();
    g[5] = f64::NAN;
    assert!(same(&good, &g, "NaN value").contains("not finite"));
    // The dimension.
    let t3 = tree(3, 1, 2);
    let tg3 = t3.all_boxes();
    let f3 = vec![1.0; t3.n_boxes() * 8];
    same(&t3.list1_boxes(&tg3), &f3, "dimension");
}

// ---------------------------------------------------------------- GPU

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_reduced_tables_2d_every_kernel_q1_to_4() {
    reduced_case(2, &[1, 2, 3, 4], 6, None);
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_reduced_tables_3d_every_kernel_q1_to_3() {
    reduced_case(3, &[1, 2, 3], 4, None);
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_reduced_tables_3d_q4() {
    reduced_case(
        3,
        &[4],
        3,
        Some(&["laplace", "source-deriv", "directional", "yukawa"]),
    );
}

/// Dense builds through `from_tables`: the dense layout bitwise, ORBIT and
/// fallback (representative values) within the tolerance; a subset of
/// target boxes in a shuffled order, and a target with an empty list
/// (exact zeros).
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_dense_tables() {
    let (device, stream) = gpu();
    let mut rng = SplitMix64::new(0xDE75);
    let cases: Vec<(usize, Kernel, usize)> = vec![
        (2, Kernel::laplace(2).unwrap(), 3),
        (
            2,
            Kernel::laplace(2)
                .unwrap()
                .directional_source_derivative(&[0.7, 0.7])
                .unwrap(),
            2,
        ),
        (
            3,
            Kernel::laplace(3)
                .unwrap()
                .axis_target_derivative(2)
                .unwrap(),
            2,
        ),
        (3, Kernel::constant(3).unwrap(), 2),
    ];
    for (dim, k, q) in cases {
        let table = NearFieldTable::build(&k, q, 1.1, &quad(dim)).unwrap();
        let t = tree(dim, 0xABC + dim as u64, if dim == 2 { 5 } else { 3 });
        // Every other box, reversed, then one target with no pairs.
        let mut targets: Vec<u32> = (0..t.n_boxes() as u32).step_by(2).rev().collect();
        let (st, src) = (t.list1_starts(), t.list1_sources());
        let mut starts = vec![0u32];
        let mut lists = Vec::new();
        for &b in &targets {
            lists.extend_from_slice(&src[st[b as usize] as usize..st[b as usize + 1] as usize]);
            starts.push(lists.len() as u32);
        }
        targets.push(0);
        starts.push(lists.len() as u32);
        let boxes = List1Boxes {
            dim,
            root_extent: t.root_extent(),
            centers: t.centers(),
            levels: t.levels(),
            target_boxes: &targets,
            source_starts: &starts,
            source_boxes: &lists,
        };
        let nq = q.pow(dim as u32);
        let f = random_values(&mut rng, t.n_boxes() * nq);
        let want = evaluate_list1(&boxes, &List1Tables::Scaled(&table), &f).unwrap();
        let dense =
            List1Payload::from_tables(&List1Tables::Scaled(&table), List1Layout::Dense).unwrap();
        let ev = List1Evaluator::new(&device, &dense).unwrap();
        let got = ev.evaluate(&stream, &boxes, &f).unwrap();
        let (err, differ) = compare(&format!("dense {k:?}"), &got, &want);
        assert!(err == 0.0 && differ == 0, "{k:?}: {err:.2e}, {differ}");
        assert!(got[got.len() - nq..].iter().all(|&x| x == 0.0));
        let payloads = |l: List1Layout| List1Payload::from_tables(&List1Tables::Scaled(&table), l);
        let worst = check_layouts(
            &format!("dense-built {dim}D {k:?} q={q}"),
            &device,
            &stream,
            &payloads,
            is_directional(&k),
            &boxes,
            &f,
            &want,
            false,
        );
        eprintln!("dense-built {dim}D q={q}: worst {worst:.2e}");
    }
}

/// Invalid inputs: errors before anything is written; the output buffer
/// keeps its contents.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_invalid_inputs_leave_the_output_unchanged() {
    let (device, stream) = gpu();
    let k = Kernel::laplace(3).unwrap();
    let q = 2;
    let mut rng = SplitMix64::new(41);
    let red = synthetic(&k, q, 1.0, &mut rng);
    let t = tree(3, 5, 3);
    let targets = t.all_boxes();
    let boxes = t.list1_boxes(&targets);
    let nq = 8;
    let f = random_values(&mut rng, t.n_boxes() * nq);
    let mut ev = List1Evaluator::from_reduced(
        &device,
        &List1ReducedTables::Scaled(&red),
        List1Layout::Orbit,
    )
    .unwrap();
    let other = List1Evaluator::from_reduced(
        &device,
        &List1ReducedTables::Scaled(&red),
        List1Layout::Dense,
    )
    .unwrap();
    let mut plan = ev.plan(&boxes).unwrap();
    let mut foreign = other.plan(&boxes).unwrap();
    let fd = device.htod_copy(&f).unwrap();
    let n = t.n_boxes() * nq;
    let mut out = device.alloc::<f64>(n).unwrap();
    stream.fill(&mut out.as_slice_mut(), 7.25f64).unwrap();
    let unchanged = |out: &hipkern::DeviceBuffer<f64>, what: &str| {
        stream.synchronize().unwrap();
        let v = out.to_vec().unwrap();
        assert!(v.iter().all(|&x| x == 7.25), "{what}: output changed");
    };
    let e = ev
        .evaluate_into(&stream, &mut foreign, &fd, &mut out)
        .unwrap_err();
    assert!(e.to_string().contains("another evaluator"), "{e}");
    unchanged(&out, "foreign plan");
    let short = device.htod_copy(&f[1..]).unwrap();
    let e = ev
        .evaluate_into(&stream, &mut plan, &short, &mut out)
        .unwrap_err();
    assert!(e.to_string().contains("source_values"), "{e}");
    unchanged(&out, "short values");
    let mut small = device.alloc::<f64>(n - 1).unwrap();
    let e = ev
        .evaluate_into(&stream, &mut plan, &fd, &mut small)
        .unwrap_err();
    assert!(e.to_string().contains("out has"), "{e}");
    unchanged(&out, "short output");
    assert!(ev.set_target_batch_size(0).is_err());
    assert!(ev.set_target_batch_size(1025).is_err());
    assert_eq!(ev.target_batch_size(), 1);
    assert!(ev.set_pair_scratch_bytes(8 * nq - 1).is_err());
    assert!("sideways".parse::<List1Schedule>().is_err());
    // Host inputs: the CPU evaluator's errors.
    let mut g = f.clone();
    g[3] = f64::INFINITY;
    let e = ev.evaluate(&stream, &boxes, &g).unwrap_err().to_string();
    assert!(e.contains("not finite"), "{e}");
    let mut sources = t.list1_sources().to_vec();
    let last = sources.len() - 1;
    sources.swap(0, last);
    let b = List1Boxes {
        source_boxes: &sources,
        ..boxes
    };
    let e = ev.plan(&b).unwrap_err().to_string();
    assert!(e.contains("not a List 1 pair"), "{e}");
    // The good call still works after all that, and writes everything.
    ev.evaluate_into(&stream, &mut plan, &fd, &mut out).unwrap();
    stream.synchronize().unwrap();
    let got = out.to_vec().unwrap();
    let dense = red.to_dense().unwrap();
    let want = evaluate_list1(&boxes, &List1Tables::Scaled(&dense), &f).unwrap();
    let (err, differ) = compare("after errors", &got, &want);
    assert!(err <= TOL && differ == 0, "{err:.2e} {differ}");
    // Zero targets: nothing to write.
    let none: [u32; 0] = [];
    let empty = List1Boxes {
        target_boxes: &none,
        source_starts: &[0],
        source_boxes: &[],
        ..boxes
    };
    assert!(ev.evaluate(&stream, &empty, &f).unwrap().is_empty());
}

/// The source-staged tiled kernel's own checks, through the C ABI on the
/// plan's raw tiles: a slot naming another of its tile's sources makes
/// that box's outputs NaN and leaves every other box's bits; a
/// `max_tile_sources` below a tile's sources makes that tile's boxes NaN;
/// refused arguments write nothing; the per-key kernel (AUTO), which reads
/// no source slots, takes null ones and gives the same bits.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_tiled_source_staging_checks_its_slots() {
    use hipkern_sys as sys;
    let (device, stream) = gpu();
    if hipkern::runtime::platform() != "nvidia" || device.properties().major < 8 {
        eprintln!("no FP64 tensor cores here: the staged kernel is the FMA one; skipped");
        return;
    }
    let nq = 8;
    let mut rng = SplitMix64::new(0x0057_A6ED);
    let b = 32;
    let (ev, plan, fd, good) =
        staged_case(&device, &stream, &mut rng, 2, 0x5EED, List1Layout::Dense);

    let table = ev.raw_table();
    let pairs = plan.raw_pairs();
    let staged = plan
        .raw_tiles(sys::HIPKERN_LIST1_TILED_TENSOR_SOURCES)
        .unwrap();
    let n_tiles = plan.target_tiles();
    let mut raw = RawTiled::new(&device, &stream, table, pairs, &fd, good.len());
    // SAFETY: the plan's own buffers of these lengths, alive meanwhile.
    let (key_offsets, tile_targets, src_offsets, key_pairs, slots) = unsafe {
        (
            raw.download(staged.tile_key_offsets, n_tiles + 1),
            raw.download(staged.tile_targets, n_tiles * b),
            raw.download(staged.tile_source_offsets, n_tiles + 1),
            raw.download(staged.key_pairs, plan.tile_slots()),
            raw.download(staged.key_source_slots, plan.tile_slots()),
        )
    };
    let mut call = |tiles: &sys::hipkern_list1_tiles, fill: f64| raw.call(tiles, fill);
    let (rc, again) = call(&staged, f64::NAN);
    assert_eq!(rc, 0);
    assert!(
        same_bits(&again, &good),
        "the raw call differs from the safe one"
    );

    // One slot moved to another source of its tile.
    let (tile, e, lane) = (0..n_tiles)
        .filter(|&k| src_offsets[k + 1] - src_offsets[k] >= 2)
        .find_map(|k| {
            (key_offsets[k] as usize..key_offsets[k + 1] as usize).find_map(|e| {
                (0..b)
                    .find(|&l| key_pairs[e * b + l] != u32::MAX)
                    .map(|l| (k, e, l))
            })
        })
        .expect("a tile with two sources and a pair");
    let n_src = (src_offsets[tile + 1] - src_offsets[tile]) as u16;
    let mut moved = slots.clone();
    moved[e * b + lane] = (moved[e * b + lane] + 1) % n_src;
    let moved_d = device.htod_copy(&moved).unwrap();
    let mut tiles = staged;
    tiles.key_source_slots = moved_d.as_ptr();
    let (rc, got) = call(&tiles, 7.25);
    assert_eq!(rc, 0);
    // Box i's outputs all NaN, or all its good bits.
    let expect_box = |got: &[f64], i: usize, nan: bool, what: &str| {
        let row = &got[i * nq..(i + 1) * nq];
        if nan {
            assert!(row.iter().all(|x| x.is_nan()), "{what}: box {i} not NaN");
        } else {
            assert!(
                same_bits(row, &good[i * nq..(i + 1) * nq]),
                "{what}: box {i} changed"
            );
        }
    };
    let bad_box = tile_targets[tile * b + lane] as usize;
    let where_is = |i: usize| {
        tile_targets
            .iter()
            .position(|&x| x as usize == i)
            .map(|p| (p / b, p % b))
    };
    let changed: Vec<String> = (0..good.len() / nq)
        .filter(|&i| {
            i != bad_box && !same_bits(&got[i * nq..(i + 1) * nq], &good[i * nq..(i + 1) * nq])
        })
        .map(|i| {
            format!(
                "box {i} (tile, lane) {:?}: got {:?}, good {:?}",
                where_is(i),
                &got[i * nq..(i + 1) * nq],
                &good[i * nq..(i + 1) * nq]
            )
        })
        .collect();
    assert!(
        changed.is_empty(),
        "a moved slot (tile {tile}, key {e}, lane {lane}, box {bad_box}, slot {} -> {} of {n_src}): \
         {} other boxes changed: {}",
        slots[e * b + lane],
        moved[e * b + lane],
        changed.len(),
        changed.iter().take(4).cloned().collect::<Vec<_>>().join("; ")
    );
    for i in 0..good.len() / nq {
        expect_box(&got, i, i == bad_box, "a moved slot");
    }

    // A bound below the largest tile's sources: those tiles all NaN.
    let most = plan.max_tile_sources();
    assert!(most >= 2);
    let mut tiles = staged;
    tiles.max_tile_sources = most as i32 - 1;
    let (rc, got) = call(&tiles, 7.25);
    assert_eq!(rc, 0);
    let mut over = 0;
    for k in 0..n_tiles {
        let too_many = (src_offsets[k + 1] - src_offsets[k]) as usize > most - 1;
        over += usize::from(too_many);
        for &i in &tile_targets[k * b..(k + 1) * b] {
            if i == u32::MAX {
                continue;
            }
            expect_box(
                &got,
                i as usize,
                too_many,
                &format!("tile {k} (bound {})", most - 1),
            );
        }
    }
    assert!(over >= 1);

    // Refused before anything is written.
    let mut tiles = staged;
    tiles.max_tile_sources = sys::HIPKERN_LIST1_TILED_MAX_SOURCES as i32 + 1;
    let (rc, got) = call(&tiles, 7.25);
    assert_eq!(rc, sys::HIPKERN_ERROR_INVALID_ARGUMENT);
    assert!(got.iter().all(|&x| x == 7.25), "written by a refused call");
    let mut tiles = staged;
    tiles.key_source_slots = std::ptr::null();
    let (rc, got) = call(&tiles, 7.25);
    assert_eq!(rc, sys::HIPKERN_ERROR_INVALID_ARGUMENT);
    assert!(got.iter().all(|&x| x == 7.25), "written by a refused call");
    // The per-key kernel reads no source slots: null ones, the same bits.
    tiles.arithmetic = sys::HIPKERN_LIST1_TILED_AUTO as i32;
    tiles.tile_source_offsets = std::ptr::null();
    tiles.tile_sources = std::ptr::null();
    tiles.max_tile_sources = 0;
    let (rc, got) = call(&tiles, f64::NAN);
    assert_eq!(rc, 0);
    assert!(
        same_bits(&got, &good),
        "the per-key kernel differs from the staged one"
    );
    // Nor does it check the bound (its plans are not cut at one: a tile
    // may have more sources than the staged kernel's limit).
    tiles.max_tile_sources = sys::HIPKERN_LIST1_TILED_MAX_SOURCES as i32 + 1;
    let (rc, got) = call(&tiles, f64::NAN);
    assert_eq!(rc, 0, "the per-key kernel refused a bound it does not read");
    assert!(same_bits(&got, &good));
}

/// The key matrices of the source-staged kernel.
/// `hipkern_list1_expand_keys` gives every entry of every key's case
/// matrix as the CPU payload reconstructs it (`List1Payload::entry`), bit
/// for bit, in every layout (the fallback on both paths), 2D and 3D; a key
/// past the tables gives NaN; refused arguments write nothing. Through the
/// C ABI, on an ORBIT plan: a key whose index names no matrix makes the
/// tiles that use it NaN and leaves every other box's bits; without the
/// matrices (the layout decoded per tile) the same bits; a matrix pointer
/// without its index, or no matrices, is refused.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_key_matrices_are_the_layouts_entries() {
    use hipkern_sys as sys;
    let (device, stream) = gpu();
    let mut rng = SplitMix64::new(0x6E7A_11C5);
    for (dim, q) in [(3usize, 3usize), (2, 4), (3, 2)] {
        let k = Kernel::laplace(dim).unwrap();
        let red = synthetic(&k, q, 1.0, &mut rng);
        let nq = q.pow(dim as u32);
        let variants = [
            (List1Layout::Dense, true),
            (List1Layout::Orbit, true),
            (List1Layout::Fallback, true),
            (List1Layout::Fallback, false),
        ];
        for (layout, resolved) in variants {
            let what = format!("{dim}D q={q} {layout} (resolved {resolved})");
            let mut payload =
                List1Payload::from_reduced(&List1ReducedTables::Scaled(&red), layout).unwrap();
            if !resolved {
                payload = payload.without_fallback_resolution();
            }
            let ev = List1Evaluator::new(&device, &payload).unwrap();
            let table = ev.raw_table();
            let n_cases = table.n_cases as usize;
            let n_keys = n_cases * table.n_tables as usize;
            // Every key, shuffled, and one past the tables.
            let mut keys: Vec<u32> = (0..n_keys as u32).collect();
            for i in (1..keys.len()).rev() {
                keys.swap(i, rng.below(i + 1));
            }
            keys.push(n_keys as u32);
            let kd = device.htod_copy(&keys).unwrap();
            let mut out = device.alloc::<f64>(keys.len() * nq * nq).unwrap();
            let mut expand = |keys: *const u32, n: i64| -> (i32, Vec<f64>) {
                stream.fill(&mut out.as_slice_mut(), 7.25).unwrap();
                // SAFETY: the evaluator's table; `n` ≤ keys.len() keys on
                // the device and room for keys.len() matrices; synchronized
                // before reading.
                let rc = unsafe {
                    sys::hipkern_list1_expand_keys(
                        &table,
                        keys,
                        n,
                        out.as_mut_ptr(),
                        stream.as_raw(),
                    )
                };
                stream.synchronize().unwrap();
                (rc, out.to_vec().unwrap())
            };
            let (rc, got) = expand(kd.as_ptr(), keys.len() as i64);
            assert_eq!(rc, 0, "{what}");
            let mut zeros = 0usize;
            for (i, &key) in keys.iter().enumerate() {
                let m = &got[i * nq * nq..(i + 1) * nq * nq];
                if key as usize == n_keys {
                    assert!(m.iter().all(|x| x.is_nan()), "{what}: key past the tables");
                    continue;
                }
                let (tb, c) = (key as usize / n_cases, key as usize % n_cases);
                for s in 0..nq {
                    for t in 0..nq {
                        let want = payload.entry(tb, c, s, t).unwrap();
                        let g = m[s * nq + t];
                        zeros += usize::from(want == 0.0);
                        assert!(
                            g.to_bits() == want.to_bits() || (g == 0.0 && want == 0.0),
                            "{what}: key {key} (case {c}) entry ({s}, {t}): {g:e}, want {want:e}"
                        );
                    }
                }
            }
            eprintln!("{what}: {n_keys} keys × {nq}² entries as the payload's ({zeros} zero)");
            for (keys_ptr, n) in [(std::ptr::null(), keys.len() as i64), (kd.as_ptr(), -1)] {
                let (rc, got) = expand(keys_ptr, n);
                assert_eq!(rc, sys::HIPKERN_ERROR_INVALID_ARGUMENT, "{what}");
                assert!(
                    got.iter().all(|&x| x == 7.25),
                    "{what}: written by a refused call"
                );
            }
        }
    }

    // Through the C ABI, on an ORBIT plan of a random tree.
    if hipkern::runtime::platform() != "nvidia" || device.properties().major < 8 {
        eprintln!("no FP64 tensor cores here: the key matrices are not read; skipped");
        return;
    }
    let nq = 27;
    let b = 32;
    let (ev, plan, fd, good) =
        staged_case(&device, &stream, &mut rng, 3, 0x6E7A, List1Layout::Orbit);
    assert!(plan.key_matrices() > 0);

    let table = ev.raw_table();
    let pairs = plan.raw_pairs();
    let tiles = plan
        .raw_tiles(sys::HIPKERN_LIST1_TILED_TENSOR_SOURCES)
        .unwrap();
    let n_tiles = plan.target_tiles();
    let n_keys = (table.n_cases * table.n_tables) as usize;
    let mut raw = RawTiled::new(&device, &stream, table, pairs, &fd, good.len());
    // SAFETY: the plan's own buffers of these lengths, alive meanwhile.
    let (key_offsets, tile_targets, index) = unsafe {
        (
            raw.download(tiles.tile_key_offsets, n_tiles + 1),
            raw.download(tiles.tile_targets, n_tiles * b),
            raw.download(tiles.key_matrix_index, n_keys),
        )
    };
    // SAFETY: as above.
    let tile_keys = unsafe { raw.download(tiles.keys, key_offsets[n_tiles] as usize) };
    assert_eq!(
        index.iter().filter(|&&x| x != u32::MAX).count(),
        plan.key_matrices()
    );
    let mut call = |tl: &sys::hipkern_list1_tiles, fill: f64| raw.call(tl, fill);
    let (rc, again) = call(&tiles, f64::NAN);
    assert_eq!(rc, 0);
    assert!(
        same_bits(&again, &good),
        "the raw call differs from the safe one"
    );

    // One used key's index past the matrices: the tiles with that key NaN.
    let key = tile_keys[0] as usize;
    let mut broken = index.clone();
    broken[key] = plan.key_matrices() as u32;
    let broken_d = device.htod_copy(&broken).unwrap();
    let mut tl = tiles;
    tl.key_matrix_index = broken_d.as_ptr();
    let (rc, got) = call(&tl, 7.25);
    assert_eq!(rc, 0);
    let mut hit = 0;
    for k in 0..n_tiles {
        let uses = tile_keys[key_offsets[k] as usize..key_offsets[k + 1] as usize]
            .iter()
            .any(|&x| x as usize == key);
        hit += usize::from(uses);
        for &i in &tile_targets[k * b..(k + 1) * b] {
            if i == u32::MAX {
                continue;
            }
            let i = i as usize;
            let row = &got[i * nq..(i + 1) * nq];
            if uses {
                assert!(row.iter().all(|x| x.is_nan()), "tile {k}: box {i} not NaN");
            } else {
                assert!(
                    same_bits(row, &good[i * nq..(i + 1) * nq]),
                    "tile {k}: box {i} changed"
                );
            }
        }
    }
    assert!(hit >= 1);

    // Without the matrices: the layout decoded per tile, the same bits.
    let mut tl = tiles;
    tl.key_matrices = std::ptr::null();
    let (rc, got) = call(&tl, f64::NAN);
    assert_eq!(rc, 0);
    assert!(
        same_bits(&got, &good),
        "decoded per tile differs from the key matrices"
    );
    // Refused before anything is written.
    let mut tl = tiles;
    tl.key_matrix_index = std::ptr::null();
    let (rc, got) = call(&tl, 7.25);
    assert_eq!(rc, sys::HIPKERN_ERROR_INVALID_ARGUMENT);
    assert!(got.iter().all(|&x| x == 7.25), "written by a refused call");
    let mut tl = tiles;
    tl.n_key_matrices = 0;
    let (rc, got) = call(&tl, 7.25);
    assert_eq!(rc, sys::HIPKERN_ERROR_INVALID_ARGUMENT);
    assert!(got.iter().all(|&x| x == 7.25), "written by a refused call");
}
