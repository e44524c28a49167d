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
//! Always run: without a device the API is a clean error (here, in a binary
//! with GPU tests, so that a device build runs it too). The payloads each
//! layout uploads and the host validation: nearfield_list1_payloads.rs.
//! Inputs, references and the device checks: tests/common/list1.rs and
//! tests/common/list1_device.rs.
mod common;
use common::list1::{
    compare, is_directional, quad, random_values, same_bits, synthetic, tree, TOL,
};
use common::list1_device::{check_layouts, gpu, reduced_case, staged_case, RawTiled};
use hipkern::nearfield::{
    evaluate_list1, DenseOrbits, EntryQuadrature, Kernel, List1Boxes, List1Evaluator, List1Layout,
    List1Payload, List1ReducedTables, List1Schedule, List1Tables, NearFieldTable, ReducedTable,
};
use hipkern::rng::SplitMix64;

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
