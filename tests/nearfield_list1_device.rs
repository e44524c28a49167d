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
//! The C ABI's refusals of the plain and grouped entry points write
//! nothing; the tiled entry point's own checks and refusals, and the key
//! matrices: nearfield_list1_tiles.rs.
//!
//! Always run: without a device the API is a clean error (here, in a binary
//! with GPU tests, so that a device build runs it too), and the tiled
//! kernels' widths. The payloads each layout uploads and the host
//! validation: nearfield_list1_payloads.rs. Inputs, references and the
//! device checks: tests/common/list1.rs and tests/common/list1_device.rs.
mod common;
use common::list1::{is_directional, quad, random_values, synthetic, tree};
use common::list1_device::{
    check_against, check_layouts, check_plan, gpu, raw_kernel, reduced_case, run_into, tile_width,
};
use hipkern::nearfield::list1_internals::plan_with_kernel;
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
