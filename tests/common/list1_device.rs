//! Shared by the device List 1 tests (tests/nearfield_list1_device.rs):
//! running a plan into a poisoned buffer; every kernel of every layout
//! against the CPU (a plan per kernel through
//! `list1_internals::plan_with_kernel`, and the evaluator's own plans under
//! both contracts); one tiled kernel's plan on a random tree; and the C
//! ABI's tiled entry point on a plan's raw tiles.
// Not every test binary that includes the common module uses these.
#![allow(dead_code)]
use super::list1::{
    compare, cpu_reference, is_directional, kernels, random_values, same_bits, synthetic, tree,
    Tables, TOL,
};
use hipkern::nearfield::list1_internals::plan_with_kernel;
use hipkern::nearfield::{
    evaluate_list1, staged_source_bound, Kernel, List1Boxes, List1Contract, List1DevicePlan,
    List1Evaluator, List1Kernel, List1Layout, List1Payload, List1ReducedTables, List1Tables,
    DEFAULT_PAIR_SCRATCH_BYTES, MAX_TILED_MODES,
};
use hipkern::rng::SplitMix64;
use hipkern::{Device, Stream};
use hipkern_sys as sys;

/// The C ABI's `hipkern_list1_tiled_kernel` of a tiled kernel (`None` for
/// per-target and grouped).
pub fn raw_kernel(kernel: List1Kernel) -> Option<i32> {
    match kernel {
        List1Kernel::Tiled => Some(sys::HIPKERN_LIST1_TILED as i32),
        List1Kernel::Staged => Some(sys::HIPKERN_LIST1_STAGED as i32),
        List1Kernel::TiledFma => Some(sys::HIPKERN_LIST1_TILED_FMA as i32),
        List1Kernel::PerTarget | List1Kernel::Grouped => None,
    }
}

/// A tiled kernel's one width (target boxes per tile), as
/// `hipkern_list1_tile_targets` gives it.
pub fn tile_width(kernel: List1Kernel) -> usize {
    let raw = raw_kernel(kernel).expect("a tiled kernel");
    let mut width = -1i32;
    // SAFETY: a valid out-pointer; the call reads its arguments only.
    let rc = unsafe { sys::hipkern_list1_tile_targets(raw, &mut width) };
    assert_eq!(rc, 0, "hipkern_list1_tile_targets({kernel})");
    usize::try_from(width).unwrap()
}

/// Why `ev` cannot run `kernel` (the word its refusal names), or `None`:
/// the grouped and tiled kernels take `q^d ≤ MAX_TILED_MODES`, `tiled`
/// and `staged` need the FP64 tensor cores.
pub fn cannot_run(ev: &List1Evaluator, kernel: List1Kernel) -> Option<&'static str> {
    if kernel != List1Kernel::PerTarget && ev.n_modes() > MAX_TILED_MODES {
        Some("q^d")
    } else if matches!(kernel, List1Kernel::Tiled | List1Kernel::Staged)
        && !ev.tensor_cores_available()
    {
        Some("tensor cores")
    } else {
        None
    }
}

/// The tiled kernels this evaluator's device runs; a note for the others.
pub fn tiled_kernels_here(ev: &List1Evaluator, what: &str) -> Vec<List1Kernel> {
    [
        List1Kernel::Tiled,
        List1Kernel::Staged,
        List1Kernel::TiledFma,
    ]
    .into_iter()
    .filter(|&k| {
        let why = cannot_run(ev, k);
        if let Some(why) = why {
            eprintln!("{what}: {k} skipped, cannot run here ({why})");
        }
        why.is_none()
    })
    .collect()
}

fn kernel_index(kernel: List1Kernel) -> usize {
    List1Kernel::ALL.iter().position(|&k| k == kernel).unwrap()
}

/// One kernel's plan of a synthetic 3D Laplace table on a random tree
/// ([`tiled_case`]), its source values on the device and its output.
pub struct KernelCase {
    pub tree: hipkern::nearfield::BalancedTree,
    pub targets: Vec<u32>,
    pub ev: List1Evaluator,
    pub plan: List1DevicePlan,
    pub fd: hipkern::DeviceBuffer<f64>,
    pub good: Vec<f64>,
}

impl KernelCase {
    /// Every box a target, in order.
    pub fn boxes(&self) -> List1Boxes<'_> {
        self.tree.list1_boxes(&self.targets)
    }
}

/// A plan for `kernel` of a synthetic 3D Laplace table at `q` in `layout`
/// on a random tree (`tree_seed`), random source values on the device, and
/// its output, checked against the CPU sum (bitwise for an exact kernel,
/// else to the tolerance); `None`, with a note, where this device cannot
/// run the kernel.
pub fn tiled_case(
    device: &Device,
    stream: &Stream,
    rng: &mut SplitMix64,
    q: usize,
    tree_seed: u64,
    layout: List1Layout,
    kernel: List1Kernel,
) -> Option<KernelCase> {
    let what = format!("3D q={q} {layout} {kernel}");
    let k = Kernel::laplace(3).unwrap();
    let red = synthetic(&k, q, 1.0, rng);
    let ev =
        List1Evaluator::from_reduced(device, &List1ReducedTables::Scaled(&red), layout).unwrap();
    if let Some(why) = cannot_run(&ev, kernel) {
        eprintln!("{what}: skipped, cannot run here ({why})");
        return None;
    }
    let tree = tree(3, tree_seed, 4);
    let targets = tree.all_boxes();
    let boxes = tree.list1_boxes(&targets);
    let f = random_values(rng, tree.n_boxes() * q.pow(3));
    let fd = device.htod_copy(&f).unwrap();
    let mut plan = plan_with_kernel(&ev, &boxes, kernel).unwrap();
    check_plan(&what, &ev, &plan, kernel);
    let good = run_into(&ev, stream, &mut plan, &fd);
    let dense = red.to_dense().unwrap();
    let want = evaluate_list1(&boxes, &List1Tables::Scaled(&dense), &f).unwrap();
    check_against(
        &what,
        &good,
        &want,
        kernel.contract() == List1Contract::Exact,
    );
    Some(KernelCase {
        tree,
        targets,
        ev,
        plan,
        fd,
        good,
    })
}

/// The C ABI's tiled entry point on one evaluator's table and one plan's
/// pairs and source values, for the tests that edit a plan's raw tiles.
pub struct RawTiled<'a> {
    pub device: &'a Device,
    pub stream: &'a Stream,
    pub table: sys::hipkern_list1_table,
    pub pairs: sys::hipkern_list1_pairs,
    pub f: &'a hipkern::DeviceBuffer<f64>,
    pub out: hipkern::DeviceBuffer<f64>,
}

impl<'a> RawTiled<'a> {
    pub fn new(
        device: &'a Device,
        stream: &'a Stream,
        table: sys::hipkern_list1_table,
        pairs: sys::hipkern_list1_pairs,
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
    pub fn call(&mut self, tiles: &sys::hipkern_list1_tiles, fill: f64) -> (i32, Vec<f64>) {
        self.stream
            .fill(&mut self.out.as_slice_mut(), fill)
            .unwrap();
        // SAFETY: the evaluator's table, the plan's pairs and buffers of
        // the right sizes on this device (the tests' edits keep every
        // pointer in bounds); synchronized before reading.
        let rc = unsafe {
            sys::hipkern_list1_evaluate_tiled(
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

    /// [`Self::call`] of tiles the entry point must refuse: the status is
    /// `HIPKERN_ERROR_INVALID_ARGUMENT` and nothing was written.
    pub fn refused(&mut self, tiles: &sys::hipkern_list1_tiles, what: &str) {
        let (rc, got) = self.call(tiles, 7.25);
        assert_eq!(
            rc,
            sys::HIPKERN_ERROR_INVALID_ARGUMENT,
            "{what}: not refused"
        );
        assert!(
            got.iter().all(|&x| x == 7.25),
            "{what}: written by a refused call"
        );
    }
}

pub fn gpu() -> (Device, Stream) {
    let d = Device::new(0).expect("a GPU is required for this test");
    let s = d.new_stream().unwrap();
    (d, s)
}

/// One plan run through `evaluate_into` into a poisoned (NaN) buffer; the
/// whole output downloaded.
pub fn run_into(
    ev: &List1Evaluator,
    stream: &Stream,
    plan: &mut List1DevicePlan,
    f: &hipkern::DeviceBuffer<f64>,
) -> Vec<f64> {
    let n = plan.n_targets() * ev.n_modes();
    let mut out = ev.device().alloc::<f64>(n).unwrap();
    stream.fill(&mut out.as_slice_mut(), f64::NAN).unwrap();
    ev.evaluate_into(stream, plan, f, &mut out).unwrap();
    stream.synchronize().unwrap();
    out.to_vec().unwrap()
}

/// Every element of `got` finite and within [`TOL`] of `want` (relative
/// max-norm); with `bitwise`, every element's bits equal. Returns the
/// error and prints it.
pub fn check_against(what: &str, got: &[f64], want: &[f64], bitwise: bool) -> f64 {
    let (err, differ) = compare(what, got, want);
    assert!(err <= TOL, "{what}: relative error {err:.3e}");
    if bitwise {
        assert_eq!(
            differ, 0,
            "{what}: {differ} elements differ in their bits from the CPU's"
        );
    }
    eprintln!(
        "{what}: rel err {err:.2e}, {differ}/{} bits differ",
        got.len()
    );
    err
}

/// What a plan of `kernel` must say about itself: its kernel, a reason, a
/// kernel that keeps the plan's contract, and the parts of that kernel
/// alone (tiles at the kernel's one width, key matrices exactly where the
/// layout is compact; the grouped chunks).
pub fn check_plan(what: &str, ev: &List1Evaluator, plan: &List1DevicePlan, kernel: List1Kernel) {
    assert_eq!(plan.kernel(), kernel, "{what}");
    assert!(!plan.reason().is_empty(), "{what}: no reason given");
    let c = kernel.contract();
    assert!(
        c == List1Contract::Exact || c == plan.contract(),
        "{what}: {kernel} keeps {c}, the plan was made under {}",
        plan.contract()
    );
    let nq = ev.n_modes();
    let pairs = plan.n_pairs();
    if raw_kernel(kernel).is_some() {
        let width = tile_width(kernel);
        assert_eq!(plan.targets_per_tile(), width, "{what}");
        assert!(
            plan.target_tiles() >= plan.n_targets().div_ceil(width),
            "{what}: {} tiles for {} targets",
            plan.target_tiles(),
            plan.n_targets()
        );
        let busy = plan.tiled_lanes_busy();
        assert!(
            pairs == 0 || (busy > 0.0 && busy <= 1.0),
            "{what}: lanes busy {busy}"
        );
        // The tiled kernels read dense case matrices: a compact layout's
        // plan carries its keys' matrices (one, never read, where it has
        // no pairs: the C ABI wants them with every compact table).
        let compact = ev.layout() != List1Layout::Dense;
        assert_eq!(
            plan.key_matrices() > 0,
            compact,
            "{what}: {} key matrices",
            plan.key_matrices()
        );
        if pairs == 0 {
            assert!(plan.key_matrices() <= 1, "{what}: {}", plan.key_matrices());
        }
        assert_eq!(plan.key_matrix_bytes(), plan.key_matrices() * nq * nq * 8);
        if kernel == List1Kernel::Staged {
            assert!(
                plan.max_tile_sources() <= staged_source_bound(nq, width),
                "{what}: {} sources in a tile",
                plan.max_tile_sources()
            );
            assert!(pairs == 0 || plan.max_tile_sources() >= 1, "{what}");
        } else {
            assert_eq!(plan.max_tile_sources(), 0, "{what}");
        }
        assert_eq!(plan.grouped_chunks(), 0, "{what}");
        assert_eq!(plan.pair_scratch_bytes(), 0, "{what}");
    } else {
        assert_eq!(
            (
                plan.target_tiles(),
                plan.targets_per_tile(),
                plan.key_matrices()
            ),
            (0, 0, 0),
            "{what}"
        );
        if kernel == List1Kernel::Grouped {
            assert!(pairs == 0 || plan.grouped_chunks() >= 1, "{what}");
        } else {
            assert_eq!(plan.grouped_chunks(), 0, "{what}");
        }
    }
}

/// Every kernel of `ev` through a plan of its own
/// (`list1_internals::plan_with_kernel`) against `want`: the exact kernels
/// (per-target, grouped) bitwise where `exact` (the layout holds the CPU's
/// entry values) and bitwise equal to each other always, the fast ones
/// (tiled, staged, tiled-fma) to [`TOL`], `tiled` and `staged` bitwise
/// equal; the kernels the device or table cannot run refused with a note.
/// Then the grouped kernel cut into about seven chunks (the same bits),
/// and the evaluator's own plans: under `Fast` (the default) and `Exact`,
/// each a kernel that keeps its contract, with a reason, giving the bits
/// of that kernel's own plan; `evaluate` (the `Vec` path) the same bits.
/// Returns each kernel's output (`None`: not run) and the worst error.
#[allow(clippy::too_many_arguments)]
pub fn check_kernels(
    what: &str,
    ev: &mut List1Evaluator,
    stream: &Stream,
    boxes: &List1Boxes<'_>,
    fd: &hipkern::DeviceBuffer<f64>,
    f: &[f64],
    want: &[f64],
    exact: bool,
) -> ([Option<Vec<f64>>; 5], f64) {
    let nq = ev.n_modes();
    let mut outs: [Option<Vec<f64>>; 5] = Default::default();
    // Each forced tiled plan's (tiles, lanes busy), for the evaluator's own.
    let mut tilings = [(0usize, 0.0f64); 5];
    let mut worst = 0.0f64;
    assert_eq!(ev.contract(), List1Contract::Fast, "{what}: the default");
    for kernel in List1Kernel::ALL {
        let run = format!("{what} {kernel}");
        if let Some(why) = cannot_run(ev, kernel) {
            let e = plan_with_kernel(ev, boxes, kernel).unwrap_err().to_string();
            assert!(e.contains(kernel.name()) && e.contains(why), "{run}: {e}");
            if why == "tensor cores" {
                eprintln!("{run}: skipped, no FP64 tensor cores here ({e})");
            }
            continue;
        }
        let mut plan = plan_with_kernel(ev, boxes, kernel).unwrap();
        check_plan(&run, ev, &plan, kernel);
        let got = run_into(ev, stream, &mut plan, fd);
        let bitwise = exact && kernel.contract() == List1Contract::Exact;
        worst = worst.max(check_against(&run, &got, want, bitwise));
        tilings[kernel_index(kernel)] = (plan.target_tiles(), plan.tiled_lanes_busy());
        outs[kernel_index(kernel)] = Some(got);
    }
    let out = |k: List1Kernel| outs[kernel_index(k)].as_ref();
    let per_target = out(List1Kernel::PerTarget).expect("per-target runs everywhere");
    if let Some(g) = out(List1Kernel::Grouped) {
        assert!(
            same_bits(g, per_target),
            "{what}: grouped differs from per-target"
        );
    }
    if let (Some(t), Some(s)) = (out(List1Kernel::Tiled), out(List1Kernel::Staged)) {
        assert!(same_bits(t, s), "{what}: staged differs from tiled");
    }

    // The grouped kernel in about seven chunks (a small scratch bound).
    if let Some(grouped) = out(List1Kernel::Grouped) {
        let pairs = boxes.source_boxes.len();
        let small = (pairs / 7).max(1) * nq * 8;
        ev.set_pair_scratch_bytes(small).unwrap();
        let mut plan = plan_with_kernel(ev, boxes, List1Kernel::Grouped).unwrap();
        ev.set_pair_scratch_bytes(DEFAULT_PAIR_SCRATCH_BYTES)
            .unwrap();
        assert!(
            plan.grouped_chunks() > 1 || pairs < 7,
            "{what}: {} chunks",
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
            plan.pair_scratch_bytes() <= small.max(widest * nq * 8),
            "{what}: scratch {} over the bound {small}",
            plan.pair_scratch_bytes()
        );
        let got = run_into(ev, stream, &mut plan, fd);
        assert!(
            same_bits(&got, grouped),
            "{what}: grouped in {} chunks differs from one chunk",
            plan.grouped_chunks()
        );
    }

    // The evaluator's own plans, under each contract.
    for contract in [List1Contract::Fast, List1Contract::Exact] {
        ev.set_contract(contract);
        assert_eq!(ev.contract(), contract);
        let mut plan = ev.plan(boxes).unwrap();
        let kernel = plan.kernel();
        let run = format!("{what} {contract} plan ({kernel}: {})", plan.reason());
        assert_eq!(plan.contract(), contract, "{run}");
        check_plan(&run, ev, &plan, kernel);
        assert!(cannot_run(ev, kernel).is_none(), "{run}: cannot run here");
        if contract == List1Contract::Exact || nq > MAX_TILED_MODES {
            let want_kernel = if nq > MAX_TILED_MODES {
                List1Kernel::PerTarget
            } else {
                List1Kernel::Grouped
            };
            assert_eq!(kernel, want_kernel, "{run}");
        }
        let got = run_into(ev, stream, &mut plan, fd);
        let forced = out(kernel).unwrap();
        assert!(
            same_bits(&got, forced),
            "{run}: differs from the {kernel} kernel's own plan"
        );
        if raw_kernel(kernel).is_some() {
            assert_eq!(
                (plan.target_tiles(), plan.tiled_lanes_busy()),
                tilings[kernel_index(kernel)],
                "{run}: another tiling than the {kernel} kernel's own plan"
            );
        }
        // The Vec path plans for one evaluation: the device-built plan of
        // the exact kernel, under either contract.
        let v = ev.evaluate(stream, boxes, f).unwrap();
        let one = if nq > MAX_TILED_MODES {
            List1Kernel::PerTarget
        } else {
            List1Kernel::Grouped
        };
        assert!(
            same_bits(&v, out(one).unwrap()),
            "{run}: evaluate() differs from the {one} kernel's own plan"
        );
        eprintln!("{run}");
    }
    ev.set_contract(List1Contract::Fast);
    (outs, worst)
}

/// Every layout of `tables` (ORBIT refused for a directional derivative)
/// through [`check_kernels`] against `want`; the fallback twice: through
/// its resolution table (where the rows fit 15 bits) and on the pure
/// descriptor path, every kernel's output bitwise equal between the two.
/// `exact`: the layouts hold the CPU's entry values, so the exact kernels
/// are asserted bitwise equal to `want`, and every kernel gives the same
/// bits in every layout. Returns the worst error.
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
    // Per kernel: the first layout's output and the first fallback's.
    let mut first: [Option<(String, Vec<f64>)>; 5] = Default::default();
    let mut fallback: [Option<Vec<f64>>; 5] = Default::default();
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
        let name = if layout == List1Layout::Fallback && !resolved {
            "fallback-descriptors".to_string()
        } else {
            layout.to_string()
        };
        let mut ev = List1Evaluator::new(device, &payload).unwrap();
        assert_eq!(ev.fallback_resolved(), resolved);
        assert_eq!(ev.upload_bytes(), payload.upload_bytes());
        eprintln!(
            "{what} {name}: {} B values + {} B descriptors, tensor cores {}",
            payload.upload_bytes().values,
            payload.upload_bytes().descriptors,
            ev.tensor_cores_available()
        );
        let (outs, err) = check_kernels(
            &format!("{what} {name}"),
            &mut ev,
            stream,
            boxes,
            &fd,
            f,
            want,
            exact,
        );
        worst = worst.max(err);
        for (kernel, got) in List1Kernel::ALL.into_iter().zip(outs) {
            let Some(got) = got else { continue };
            let i = kernel_index(kernel);
            if layout == List1Layout::Fallback {
                match &fallback[i] {
                    None => fallback[i] = Some(got.clone()),
                    Some(r) => assert!(
                        same_bits(r, &got),
                        "{what}: {kernel}: the fallback's descriptor path differs from its \
                         resolution table"
                    ),
                }
            }
            if exact {
                match &first[i] {
                    None => first[i] = Some((name.clone(), got)),
                    Some((l, r)) => assert!(
                        same_bits(r, &got),
                        "{what}: {kernel} in {name} differs from {l}"
                    ),
                }
            }
        }
    }
    worst
}

/// Reduced tables of every kernel at `qs` on a random tree of `dim`, all
/// layouts and kernels against the CPU on their reconstruction (the exact
/// kernels bitwise).
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
