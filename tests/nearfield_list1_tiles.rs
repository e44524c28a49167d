//! List 1's tiled kernels through the C ABI (`hipkern_list1_evaluate_tiled`
//! and `hipkern_list1_expand_keys` on plans' raw tiles,
//! `docs/design/list1.md`): the staged kernel's slot and source checks,
//! the key matrices every tiled kernel reads for a compact layout (entry
//! by entry against the CPU payload, their index checks), and the entry
//! point's refusals (kernel, width, tensor cores, key matrices), each
//! leaving the output unwritten. GPU tests (`gpu_*`, ignored on the cpu
//! platform). The evaluator's kernels against the CPU evaluator:
//! nearfield_list1_device.rs.
mod common;
use common::list1::{same_bits, synthetic};
use common::list1_device::{gpu, raw_kernel, run_into, tile_width, tiled_case, RawTiled};
use hipkern::nearfield::list1_internals::{plan_with_kernel, raw_pairs, raw_table, raw_tiles};
use hipkern::nearfield::{
    Kernel, List1Evaluator, List1Kernel, List1Layout, List1Payload, List1ReducedTables,
};
use hipkern::rng::SplitMix64;
use hipkern_sys as sys;

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
