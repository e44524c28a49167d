//! The device List 1 evaluator (`List1Evaluator`) against the CPU float64
//! evaluator (`evaluate_list1`), `docs/design/list1.md`.
//!
//! GPU tests (`gpu_*`, ignored on the cpu platform): every kernel
//! (`List1Kernel`: per-target, grouped, tiled, staged, tiled-fma, each
//! through a plan of its own, `list1_internals::plan_with_kernel`; tiled
//! and staged skipped with a note where the device has no FP64 tensor
//! cores) in every layout (dense, ORBIT, descriptor fallback through its
//! resolution table and on the pure descriptor path, bitwise equal to each
//! other), and the evaluator's own plans under both contracts, for every
//! kernel of the tables issue (Laplace, Constant, Yukawa with per-level
//! tables, axis target and source derivatives, a directional source
//! derivative — dense and fallback only; ORBIT refuses it), 2D and 3D,
//! q = 1..4 (and 2D q = 9, past the grouped and tiled kernels' q^d ≤ 64),
//! on random 2:1-balanced trees with a root that is neither the unit box
//! nor at the origin, fresh random source values; the output buffer is
//! poisoned (NaN) before every run and every element is checked. Tables
//! are symmetry-reduced builds (`ReducedTable::build`, cheap quadrature
//! orders in 3D: the evaluator's correctness does not depend on how
//! accurate the entries are), the CPU reference runs on their dense
//! reconstruction, and a few dense builds (`NearFieldTable::build`) go
//! through `List1Evaluator::from_tables`.
//! Asserted: the exact kernels (per-target, grouped) bitwise equal to the
//! CPU wherever the layouts hold the CPU's entry values (they never
//! contract into FMAs) and to each other always; the fast ones (tiled,
//! staged, tiled-fma) within 1e−13 relative max-norm, tiled and staged
//! bitwise equal, each bitwise the same in every layout holding the same
//! entries; a plan's kernel keeps its contract and says why it was chosen.
//! The C ABI's refusals (bad pointers, enumerations, widths, key
//! matrices) write nothing.
//!
//! Always run: without a device the API is a clean error (here, in a binary
//! with GPU tests, so that a device build runs it too), and the tiled
//! kernels' widths. The payloads each layout uploads and the host
//! validation: nearfield_list1_payloads.rs. Inputs, references and the
//! device checks: tests/common/list1.rs and tests/common/list1_device.rs.
mod common;
use common::list1::{is_directional, quad, random_values, same_bits, synthetic, tree};
use common::list1_device::{
    check_against, check_layouts, check_plan, gpu, raw_kernel, reduced_case, run_into, tile_width,
    tiled_case, RawTiled,
};
use hipkern::nearfield::list1_internals::{plan_with_kernel, raw_pairs, raw_table, raw_tiles};
use hipkern::nearfield::{
    evaluate_list1, DenseOrbits, EntryQuadrature, Kernel, List1Boxes, List1Contract,
    List1Evaluator, List1Kernel, List1Layout, List1Payload, List1ReducedTables, List1Tables,
    NearFieldTable, ReducedTable,
};
use hipkern::rng::SplitMix64;
use hipkern_sys as sys;

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
    let table = sys::hipkern_list1_table {
        layout: sys::HIPKERN_LIST1_DENSE,
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
    let pairs = sys::hipkern_list1_pairs {
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
    let tiles = sys::hipkern_list1_tiles {
        targets_per_tile: 32,
        kernel: sys::HIPKERN_LIST1_TILED_FMA as i32,
        n_tiles: 1,
        tile_targets: std::ptr::null(),
        tile_key_offsets: std::ptr::null(),
        keys: std::ptr::null(),
        key_pairs: std::ptr::null(),
        max_tile_sources: 0,
        tile_source_offsets: std::ptr::null(),
        tile_sources: std::ptr::null(),
        key_source_slots: std::ptr::null(),
        key_matrices: std::ptr::null(),
        key_matrix_index: std::ptr::null(),
        n_key_matrices: 0,
    };
    let mut bad_layout = table;
    bad_layout.layout = 7;
    let mut bad_dim = table;
    bad_dim.dim = 4;
    let mut bad_rows = table;
    bad_rows.n_rows = 32;
    let mut orbit_without_descriptors = table;
    orbit_without_descriptors.layout = sys::HIPKERN_LIST1_ORBIT;
    let mut bad_levels = pairs;
    bad_levels.n_levels = 0;
    // SAFETY: every call below is refused before any pointer is used.
    unsafe {
        let call = |t: *const sys::hipkern_list1_table, p: *const sys::hipkern_list1_pairs| {
            sys::hipkern_list1_evaluate(t, p, null, std::ptr::null_mut(), std::ptr::null_mut())
        };
        assert_eq!(call(std::ptr::null(), &pairs), expect_bad);
        assert_eq!(call(&table, std::ptr::null()), expect_bad);
        assert_eq!(call(&bad_layout, &pairs), expect_bad);
        assert_eq!(call(&bad_dim, &pairs), expect_bad);
        assert_eq!(call(&bad_rows, &pairs), expect_bad);
        assert_eq!(call(&orbit_without_descriptors, &pairs), expect_bad);
        assert_eq!(call(&table, &bad_levels), expect_bad);
        // Null CSR / output with targets to write.
        assert_eq!(call(&table, &pairs), expect_bad);
        // The tiled entry point and the key expansion: null structs (the
        // refusals that need a device's tiles: gpu_tiled_entry_point_*).
        let tiled = |t: *const sys::hipkern_list1_table,
                     p: *const sys::hipkern_list1_pairs,
                     g: *const sys::hipkern_list1_tiles| {
            sys::hipkern_list1_evaluate_tiled(
                t,
                p,
                g,
                null,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(tiled(std::ptr::null(), &pairs, &tiles), expect_bad);
        assert_eq!(tiled(&table, std::ptr::null(), &tiles), expect_bad);
        assert_eq!(tiled(&table, &pairs, std::ptr::null()), expect_bad);
        let key = [0u32; 1];
        let rc = sys::hipkern_list1_expand_keys(
            std::ptr::null(),
            key.as_ptr(),
            1,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        assert_eq!(rc, expect_bad);
    }
}

/// `hipkern_list1_tile_targets`: each tiled kernel's one width (a property
/// of the ABI, the same on every platform, the cpu one included); an
/// unknown kernel or a null out-pointer refused, the out-value untouched.
#[test]
fn each_tiled_kernel_has_one_width() {
    for (kernel, width) in [
        (List1Kernel::Tiled, 64),
        (List1Kernel::Staged, 32),
        (List1Kernel::TiledFma, 32),
    ] {
        assert_eq!(tile_width(kernel), width, "{kernel}");
    }
    assert_eq!(raw_kernel(List1Kernel::PerTarget), None);
    assert_eq!(raw_kernel(List1Kernel::Grouped), None);
    for bad in [7, 3, -1, i32::MIN, i32::MAX] {
        let mut w = -5i32;
        // SAFETY: a valid out-pointer.
        let rc = unsafe { sys::hipkern_list1_tile_targets(bad, &mut w) };
        assert_eq!(rc, sys::HIPKERN_ERROR_INVALID_ARGUMENT, "kernel {bad}");
        assert_eq!(w, -5, "kernel {bad}: the width written");
    }
    for kernel in [
        List1Kernel::Tiled,
        List1Kernel::Staged,
        List1Kernel::TiledFma,
    ] {
        // SAFETY: a null out-pointer, refused before it is written.
        let rc = unsafe {
            sys::hipkern_list1_tile_targets(raw_kernel(kernel).unwrap(), std::ptr::null_mut())
        };
        assert_eq!(rc, sys::HIPKERN_ERROR_INVALID_ARGUMENT, "{kernel}: null");
    }
    // The names the CLI and the bench take.
    for kernel in List1Kernel::ALL {
        assert_eq!(kernel.name().parse::<List1Kernel>().unwrap(), kernel);
        let want = if matches!(kernel, List1Kernel::PerTarget | List1Kernel::Grouped) {
            List1Contract::Exact
        } else {
            List1Contract::Fast
        };
        assert_eq!(kernel.contract(), want, "{kernel}");
    }
    assert!("sideways".parse::<List1Kernel>().is_err());
    assert!("sideways".parse::<List1Contract>().is_err());
    assert_eq!(List1Contract::default(), List1Contract::Fast);
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

/// A table past the grouped and tiled kernels (2D q = 9: q^d = 81 > 64):
/// every layout runs per-target, bitwise the CPU's, under both contracts;
/// the other kernels are refused (`check_kernels`).
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_large_tables_run_per_target() {
    let (device, stream) = gpu();
    let mut rng = SplitMix64::new(0x0009_0051);
    let k = Kernel::laplace(2).unwrap();
    let q = 9;
    let red = synthetic(&k, q, 1.0, &mut rng);
    let t = tree(2, 0x51, 5);
    let targets = t.all_boxes();
    let boxes = t.list1_boxes(&targets);
    let f = random_values(&mut rng, t.n_boxes() * q * q);
    let dense = red.to_dense().unwrap();
    let want = evaluate_list1(&boxes, &List1Tables::Scaled(&dense), &f).unwrap();
    let payloads =
        |l: List1Layout| List1Payload::from_reduced(&List1ReducedTables::Scaled(&red), l);
    check_layouts(
        "2D laplace q=9",
        &device,
        &stream,
        &payloads,
        false,
        &boxes,
        &f,
        &want,
        true,
    );
}

/// Dense builds through `from_tables`: the dense layout bitwise under the
/// exact contract and within the tolerance under the fast one (the
/// default), ORBIT and fallback (representative values) within the
/// tolerance; a subset of target boxes in a shuffled order, and a target
/// with an empty list (exact zeros).
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
        let mut ev = List1Evaluator::new(&device, &dense).unwrap();
        for contract in [List1Contract::Fast, List1Contract::Exact] {
            ev.set_contract(contract);
            let got = ev.evaluate(&stream, &boxes, &f).unwrap();
            let what = format!("dense {k:?} {contract}");
            let err = check_against(&what, &got, &want, contract == List1Contract::Exact);
            if contract == List1Contract::Exact {
                assert_eq!(err, 0.0, "{what}");
            }
            assert!(
                got[got.len() - nq..].iter().all(|&x| x == 0.0),
                "{what}: the empty list's outputs"
            );
        }
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
/// keeps its contents. A plan keeps the kernel it chose when the
/// evaluator's contract changes; a kernel the device or table cannot run
/// is refused at plan time.
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
    check_plan("orbit fast plan", &ev, &plan, plan.kernel());
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
    assert!(ev.set_pair_scratch_bytes(8 * nq - 1).is_err());
    assert!("sideways".parse::<List1Kernel>().is_err());
    assert!("sideways".parse::<List1Contract>().is_err());
    // The tensor-core kernels where the device has none: refused at plan
    // time, with the reason.
    if !ev.tensor_cores_available() {
        for kernel in [List1Kernel::Tiled, List1Kernel::Staged] {
            let e = plan_with_kernel(&ev, &boxes, kernel)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(kernel.name()) && e.contains("tensor cores"),
                "{e}"
            );
        }
        eprintln!("no FP64 tensor cores here: tiled and staged refused");
    }
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
    let e = plan_with_kernel(&ev, &b, List1Kernel::PerTarget)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a List 1 pair"), "{e}");
    // The good call still works after all that, and writes everything; the
    // plan keeps its kernel when the evaluator's contract changes.
    let kernel = plan.kernel();
    ev.set_contract(List1Contract::Exact);
    assert_eq!(plan.kernel(), kernel);
    assert_eq!(plan.contract(), List1Contract::Fast);
    ev.evaluate_into(&stream, &mut plan, &fd, &mut out).unwrap();
    stream.synchronize().unwrap();
    let got = out.to_vec().unwrap();
    let dense = red.to_dense().unwrap();
    let want = evaluate_list1(&boxes, &List1Tables::Scaled(&dense), &f).unwrap();
    check_against(
        &format!("after errors ({kernel})"),
        &got,
        &want,
        kernel.contract() == List1Contract::Exact,
    );
    let mut exact = ev.plan(&boxes).unwrap();
    assert_eq!(exact.kernel(), List1Kernel::Grouped);
    let got = run_into(&ev, &stream, &mut exact, &fd);
    check_against("after errors, exact", &got, &want, true);
    // Zero targets: nothing to write.
    let none: [u32; 0] = [];
    let empty = List1Boxes {
        target_boxes: &none,
        source_starts: &[0],
        source_boxes: &[],
        ..boxes
    };
    for contract in [List1Contract::Exact, List1Contract::Fast] {
        ev.set_contract(contract);
        assert!(ev.evaluate(&stream, &empty, &f).unwrap().is_empty());
    }
    // Targets whose lists are all empty (no pairs, no keys): zeros from
    // every kernel, in a compact layout and the dense one.
    let lonely = List1Boxes {
        target_boxes: &[0, 1, 2],
        source_starts: &[0, 0, 0, 0],
        source_boxes: &[],
        ..boxes
    };
    for e in [&ev, &other] {
        for kernel in List1Kernel::ALL {
            let what = format!("{} {kernel}, empty lists", e.layout());
            if common::list1_device::cannot_run(e, kernel).is_some() {
                continue;
            }
            let mut p = plan_with_kernel(e, &lonely, kernel).unwrap();
            check_plan(&what, e, &p, kernel);
            let got = run_into(e, &stream, &mut p, &fd);
            assert!(
                got.len() == 3 * nq && got.iter().all(|&x| x == 0.0),
                "{what}: {got:?}"
            );
        }
    }
}

/// The staged kernel's own checks, through the C ABI on its plan's raw
/// tiles: a slot naming another of its tile's sources makes that box's
/// outputs NaN and leaves every other box's bits; a `max_tile_sources`
/// below a tile's sources makes that tile's boxes NaN; refused arguments
/// write nothing; the tiled kernel (per key, 64 boxes a tile), which reads
/// no source fields, takes null ones and any bound and gives the same
/// bits. Needs the FP64 tensor cores (skipped with a note elsewhere).
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_staged_kernel_checks_its_slots() {
    let (device, stream) = gpu();
    let nq = 8;
    let mut rng = SplitMix64::new(0x0057_A6ED);
    let Some(case) = tiled_case(
        &device,
        &stream,
        &mut rng,
        2,
        0x5EED,
        List1Layout::Dense,
        List1Kernel::Staged,
    ) else {
        return;
    };
    let (ev, plan, good) = (&case.ev, &case.plan, &case.good);
    let b = tile_width(List1Kernel::Staged);
    let staged = raw_tiles(plan).unwrap();
    assert_eq!(staged.kernel, sys::HIPKERN_LIST1_STAGED as i32);
    assert_eq!(staged.targets_per_tile as usize, b);
    let n_tiles = plan.target_tiles();
    let mut raw = RawTiled::new(
        &device,
        &stream,
        raw_table(ev),
        raw_pairs(plan),
        &case.fd,
        good.len(),
    );
    // SAFETY: the plan's own buffers of these lengths, alive meanwhile.
    let key_offsets = unsafe { raw.download(staged.tile_key_offsets, n_tiles + 1) };
    let n_slots = key_offsets[n_tiles] as usize * b;
    // SAFETY: as above.
    let (tile_targets, src_offsets, key_pairs, slots) = unsafe {
        (
            raw.download(staged.tile_targets, n_tiles * b),
            raw.download(staged.tile_source_offsets, n_tiles + 1),
            raw.download(staged.key_pairs, n_slots),
            raw.download(staged.key_source_slots, n_slots),
        )
    };
    assert!(
        key_pairs.iter().filter(|&&p| p != u32::MAX).count() == plan.n_pairs(),
        "every pair in one slot"
    );
    let (rc, again) = raw.call(&staged, f64::NAN);
    assert_eq!(rc, 0);
    assert!(
        same_bits(&again, good),
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
    let (rc, got) = raw.call(&tiles, 7.25);
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
    let (rc, got) = raw.call(&tiles, 7.25);
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
    raw.refused(&tiles, "max_tile_sources past the limit");
    let mut tiles = staged;
    tiles.max_tile_sources = -1;
    raw.refused(&tiles, "max_tile_sources -1");
    for (field, edit) in [
        ("tile_source_offsets", 0),
        ("tile_sources", 1),
        ("key_source_slots", 2),
    ] {
        let mut tiles = staged;
        match edit {
            0 => tiles.tile_source_offsets = std::ptr::null(),
            1 => tiles.tile_sources = std::ptr::null(),
            _ => tiles.key_source_slots = std::ptr::null(),
        }
        raw.refused(&tiles, &format!("null {field}"));
    }

    // The tiled kernel reads no source fields: its own plan's tiles with
    // them null and a bound it does not check (its plans are not cut at
    // one), the staged kernel's bits (the pairs are the same: one
    // evaluator, one tree).
    let tiled = plan_with_kernel(ev, &case.boxes(), List1Kernel::Tiled).unwrap();
    let mut tiles = raw_tiles(&tiled).unwrap();
    tiles.tile_source_offsets = std::ptr::null();
    tiles.tile_sources = std::ptr::null();
    tiles.key_source_slots = std::ptr::null();
    tiles.max_tile_sources = sys::HIPKERN_LIST1_TILED_MAX_SOURCES as i32 + 1;
    let (rc, got) = raw.call(&tiles, f64::NAN);
    assert_eq!(rc, 0, "the tiled kernel refused fields it does not read");
    assert!(
        same_bits(&got, good),
        "the tiled kernel differs from the staged one"
    );
}

/// The key matrices the tiled kernels read for a compact layout.
/// `hipkern_list1_expand_keys` gives every entry of every key's case
/// matrix as the CPU payload reconstructs it (`List1Payload::entry`), bit
/// for bit, in every layout (the fallback on both paths), 2D and 3D; a key
/// past the tables gives NaN; refused arguments write nothing. Through the
/// C ABI, on an ORBIT plan of every tiled kernel the device runs: a key
/// whose index names no matrix makes the tiles that use it NaN and leaves
/// every other box's bits; tiles of an ORBIT table without their key
/// matrices, a matrix pointer without its index, or no matrices, are
/// refused.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_key_matrices_are_the_layouts_entries() {
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
            let table = raw_table(&ev);
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

    // Through the C ABI, on an ORBIT plan of a random tree, per tiled
    // kernel.
    let nq = 27;
    for kernel in [
        List1Kernel::TiledFma,
        List1Kernel::Tiled,
        List1Kernel::Staged,
    ] {
        let Some(case) = tiled_case(
            &device,
            &stream,
            &mut rng,
            3,
            0x6E7A,
            List1Layout::Orbit,
            kernel,
        ) else {
            continue;
        };
        let (ev, plan, good) = (&case.ev, &case.plan, &case.good);
        assert!(plan.key_matrices() > 0, "{kernel}");
        let b = tile_width(kernel);
        let table = raw_table(ev);
        let tiles = raw_tiles(plan).unwrap();
        assert_eq!(tiles.n_key_matrices as usize, plan.key_matrices());
        let n_tiles = plan.target_tiles();
        let n_keys = (table.n_cases * table.n_tables) as usize;
        let mut raw = RawTiled::new(
            &device,
            &stream,
            table,
            raw_pairs(plan),
            &case.fd,
            good.len(),
        );
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
            plan.key_matrices(),
            "{kernel}"
        );
        let (rc, again) = raw.call(&tiles, f64::NAN);
        assert_eq!(rc, 0);
        assert!(
            same_bits(&again, good),
            "{kernel}: the raw call differs from the safe one"
        );

        // One used key's index past the matrices: the tiles with that key
        // NaN.
        let key = tile_keys[0] as usize;
        let mut broken = index.clone();
        broken[key] = plan.key_matrices() as u32;
        let broken_d = device.htod_copy(&broken).unwrap();
        let mut tl = tiles;
        tl.key_matrix_index = broken_d.as_ptr();
        let (rc, got) = raw.call(&tl, 7.25);
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
                    assert!(
                        row.iter().all(|x| x.is_nan()),
                        "{kernel} tile {k}: box {i} not NaN"
                    );
                } else {
                    assert!(
                        same_bits(row, &good[i * nq..(i + 1) * nq]),
                        "{kernel} tile {k}: box {i} changed"
                    );
                }
            }
        }
        assert!(hit >= 1);

        // Refused before anything is written: an ORBIT table's tiles
        // without their matrices (no kernel decodes a compact layout), the
        // matrices without their index, none of them.
        let mut tl = tiles;
        tl.key_matrices = std::ptr::null();
        raw.refused(&tl, &format!("{kernel}: ORBIT without key matrices"));
        let mut tl = tiles;
        tl.key_matrix_index = std::ptr::null();
        raw.refused(&tl, &format!("{kernel}: key matrices without an index"));
        let mut tl = tiles;
        tl.n_key_matrices = 0;
        raw.refused(&tl, &format!("{kernel}: no key matrices"));
    }
}

/// `hipkern_list1_evaluate_tiled` refuses, before writing anything, tiles
/// it cannot run: an unknown kernel, a width other than the kernel's one
/// (`hipkern_list1_tile_targets`), a negative tile count, and where the
/// device has no FP64 tensor cores the tiled and staged kernels. The
/// tiled-fma kernel on a staged plan's tiles (the same width): the bits of
/// its own plan (one arithmetic, the same bits for every tiling).
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_tiled_entry_point_refuses_bad_tiles() {
    let (device, stream) = gpu();
    let mut rng = SplitMix64::new(0x7E57_7111);
    let tiled_kinds = [
        List1Kernel::TiledFma,
        List1Kernel::Tiled,
        List1Kernel::Staged,
    ];
    for layout in [List1Layout::Dense, List1Layout::Orbit] {
        for kernel in tiled_kinds {
            let Some(case) = tiled_case(&device, &stream, &mut rng, 2, 0x7E57, layout, kernel)
            else {
                continue;
            };
            let what = format!("{layout} {kernel}");
            let (ev, plan, good) = (&case.ev, &case.plan, &case.good);
            let b = tile_width(kernel);
            let tiles = raw_tiles(plan).unwrap();
            assert_eq!(tiles.kernel, raw_kernel(kernel).unwrap(), "{what}");
            assert_eq!(tiles.targets_per_tile as usize, b, "{what}");
            assert_eq!(
                tiles.key_matrices.is_null(),
                layout == List1Layout::Dense,
                "{what}"
            );
            let mut raw = RawTiled::new(
                &device,
                &stream,
                raw_table(ev),
                raw_pairs(plan),
                &case.fd,
                good.len(),
            );
            let (rc, got) = raw.call(&tiles, f64::NAN);
            assert_eq!(rc, 0, "{what}");
            assert!(same_bits(&got, good), "{what}: the raw call differs");
            for bad in [7, 3, -1] {
                let mut t = tiles;
                t.kernel = bad;
                raw.refused(&t, &format!("{what}: kernel {bad}"));
            }
            let b32 = b as i32;
            for w in [0, b32 / 2, 2 * b32, 128, -b32] {
                if w == b32 {
                    continue;
                }
                let mut t = tiles;
                t.targets_per_tile = w;
                raw.refused(&t, &format!("{what}: {w} boxes a tile"));
            }
            // Another kernel of another width on these tiles.
            for other in tiled_kinds {
                if tile_width(other) != b && common::list1_device::cannot_run(ev, other).is_none() {
                    let mut t = tiles;
                    t.kernel = raw_kernel(other).unwrap();
                    raw.refused(&t, &format!("{what} as {other}"));
                }
            }
            let mut t = tiles;
            t.n_tiles = -1;
            raw.refused(&t, &format!("{what}: -1 tiles"));
            if !ev.tensor_cores_available() {
                // No tensor cores: tiled and staged refused at their own
                // widths, never run as FMAs.
                for other in [List1Kernel::Tiled, List1Kernel::Staged] {
                    let mut t = tiles;
                    t.kernel = raw_kernel(other).unwrap();
                    t.targets_per_tile = tile_width(other) as i32;
                    raw.refused(&t, &format!("{what} as {other} without tensor cores"));
                }
                eprintln!("{what}: tiled and staged refused (no FP64 tensor cores here)");
            }
            if kernel == List1Kernel::Staged {
                assert_eq!(tile_width(List1Kernel::TiledFma), b);
                let mut fma = plan_with_kernel(ev, &case.boxes(), List1Kernel::TiledFma).unwrap();
                let want = run_into(ev, &stream, &mut fma, &case.fd);
                let mut t = tiles;
                t.kernel = raw_kernel(List1Kernel::TiledFma).unwrap();
                let (rc, got) = raw.call(&t, f64::NAN);
                assert_eq!(rc, 0, "{what} as tiled-fma");
                assert!(
                    same_bits(&got, &want),
                    "{what}: tiled-fma on the staged tiles differs from its own plan"
                );
            }
        }
    }
}
