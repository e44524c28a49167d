//! List 1 plans built on the device (`hip/list1_plan.hip`,
//! `src/nearfield/list1/device/tree_plan.rs`) against the same plans built
//! on the host (`list1_internals::plan_on_host`).
//!
//! GPU tests (`gpu_*`, ignored on the cpu platform), on fresh random 2:1
//! trees (2D and 3D, off-origin non-unit roots), a uniform 3D tree of
//! 32,768 boxes, scaled and per-level tables, one chunk and many:
//! - every pair's case equals the host's classification;
//! - the grouped tiles: offsets, keys and chunks equal to the host's, and
//!   each key's run holds exactly the host's pair ids (the order inside a
//!   run is the device's arrival order);
//! - the evaluations of both plans (outputs poisoned) bitwise equal to
//!   each other and to the CPU float64 evaluator;
//! - bad inputs refused with the host's message, nothing planned;
//! - the C entry points' own argument checks, their paths for more keys
//!   than a block counts in shared memory, more rows than one pass of the
//!   grid, and the report's smallest bad indices against the host's.
mod common;
use common::list1::{random_values, synthetic, tree, Tables};
use common::list1_device::{check_against, gpu, run_into};
use hipkern::nearfield::list1_internals::{download_plan, plan_on_host, plan_with_kernel};
use hipkern::nearfield::{
    evaluate_list1, BalancedTree, Cases, Kernel, List1Boxes, List1Contract, List1DevicePlan,
    List1Evaluator, List1Kernel, List1Layout, List1ReducedTables, List1Tables,
};
use hipkern::rng::SplitMix64;
use hipkern_sys as sys;

/// The device plan of `boxes` against the host's for `kernel`: cases,
/// tiles and chunks; returns both plans.
fn compare_plans(
    what: &str,
    ev: &List1Evaluator,
    boxes: &List1Boxes<'_>,
    kernel: List1Kernel,
) -> (List1DevicePlan, List1DevicePlan) {
    let dev = plan_with_kernel(ev, boxes, kernel).unwrap();
    let host = plan_on_host(ev, boxes, kernel).unwrap();
    assert!(dev.built_on_device(), "{what}: not built on the device");
    assert!(!host.built_on_device(), "{what}");
    assert_eq!(dev.kernel(), kernel, "{what}");
    assert_eq!(
        (dev.n_pairs(), dev.n_targets(), dev.n_boxes()),
        (host.n_pairs(), host.n_targets(), host.n_boxes()),
        "{what}"
    );
    assert_eq!(
        dev.displacement_pairs(),
        host.displacement_pairs(),
        "{what}"
    );
    assert_eq!(dev.grouped_chunks(), host.grouped_chunks(), "{what}");
    assert_eq!(
        dev.pair_scratch_bytes(),
        host.pair_scratch_bytes(),
        "{what}"
    );
    let d = download_plan(&dev).unwrap();
    let h = download_plan(&host).unwrap();
    let (dc, doff, dkeys, dpairs, dchunks) =
        (d.cases, d.tile_offsets, d.tile_keys, d.tile_pairs, d.chunks);
    let (hc, hoff, hkeys, hpairs, hchunks) =
        (h.cases, h.tile_offsets, h.tile_keys, h.tile_pairs, h.chunks);
    let np = boxes.source_boxes.len();
    assert_eq!(dc.len(), np, "{what}");
    if let Some(j) = (0..np).find(|&j| dc[j] != hc[j]) {
        panic!(
            "{what}: pair {j} (target row of source box {}) has case {} on the device, {} on the host",
            boxes.source_boxes[j], dc[j], hc[j]
        );
    }
    assert_eq!(doff, hoff, "{what}: tile offsets");
    assert_eq!(dkeys, hkeys, "{what}: tile keys");
    assert_eq!(dchunks, hchunks, "{what}: chunks");
    assert_eq!(dpairs.len(), hpairs.len(), "{what}");
    // Each key's run within a chunk: the same pair ids.
    for [_, pairs, tiles] in &dchunks {
        let mut k = tiles.start;
        let mut seen = 0;
        while k < tiles.end {
            let mut e = k + 1;
            while e < tiles.end && dkeys[e] == dkeys[k] {
                e += 1;
            }
            let (a, b) = (doff[k] as usize, doff[e] as usize);
            let mut d = dpairs[a..b].to_vec();
            d.sort_unstable();
            assert_eq!(d, hpairs[a..b], "{what}: key {} run {a}..{b}", dkeys[k]);
            assert!(d.iter().all(|&j| pairs.contains(&(j as usize))), "{what}");
            seen += b - a;
            k = e;
        }
        assert_eq!(seen, pairs.len(), "{what}: a chunk's pairs in its tiles");
    }
    (dev, host)
}

/// Both plans evaluated (poisoned outputs), bitwise each other and the CPU.
fn compare_evaluations(
    what: &str,
    ev: &List1Evaluator,
    plans: &mut (List1DevicePlan, List1DevicePlan),
    f: &[f64],
    want: &[f64],
) {
    let stream = ev.device().new_stream().unwrap();
    let fd = ev.device().htod_copy(f).unwrap();
    let got_dev = run_into(ev, &stream, &mut plans.0, &fd);
    let got_host = run_into(ev, &stream, &mut plans.1, &fd);
    check_against(&format!("{what}, device plan"), &got_dev, want, true);
    check_against(&format!("{what}, host plan"), &got_host, want, true);
}

fn evaluator(device: &hipkern::Device, tables: &Tables) -> List1Evaluator {
    let mut ev = List1Evaluator::from_reduced(device, &tables.view(), List1Layout::Dense).unwrap();
    ev.set_contract(List1Contract::Exact);
    ev
}

fn cpu_want(tables: &Tables, boxes: &List1Boxes<'_>, f: &[f64]) -> Vec<f64> {
    let dense = tables.dense();
    let t = match tables {
        Tables::Scaled(_) => List1Tables::Scaled(&dense[0]),
        Tables::PerLevel(_) => List1Tables::PerLevel(&dense),
    };
    evaluate_list1(boxes, &t, f).unwrap()
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_plans_equal_host_plans_on_random_trees() {
    let (device, _stream) = gpu();
    let mut rng = SplitMix64::new(0x6c31_706c_616e);
    for (dim, q, max_level, yukawa) in [
        (2, 3, 6, false),
        (2, 2, 7, true),
        (3, 2, 4, false),
        (3, 3, 4, false),
        (3, 2, 4, true),
    ] {
        let seed = rng.next_u64();
        let t = tree(dim, seed, max_level);
        let k = if yukawa {
            Kernel::yukawa(dim, 1.7).unwrap()
        } else {
            Kernel::laplace(dim).unwrap()
        };
        let tables = if yukawa {
            Tables::build(&k, q, &t)
        } else {
            Tables::Scaled(Box::new(synthetic(&k, q, 0.9, &mut rng)))
        };
        let targets = t.all_boxes();
        let boxes = t.list1_boxes(&targets);
        let nq = q.pow(dim as u32);
        let f = random_values(&mut rng, t.n_boxes() * nq);
        let want = cpu_want(&tables, &boxes, &f);
        let mut ev = evaluator(&device, &tables);
        let what = format!("{dim}D q = {q}, tree seed {seed:#x}, yukawa {yukawa}");
        // The evaluator's own exact plan is the device's.
        let own = ev.plan(&boxes).unwrap();
        assert!(own.built_on_device(), "{what}");
        assert_eq!(own.kernel(), List1Kernel::Grouped, "{what}");
        let got = ev.evaluate(&_stream, &boxes, &f).unwrap();
        check_against(&format!("{what}, evaluate"), &got, &want, true);
        for kernel in [List1Kernel::Grouped, List1Kernel::PerTarget] {
            let w = format!("{what}, {kernel}");
            let mut plans = compare_plans(&w, &ev, &boxes, kernel);
            compare_evaluations(&w, &ev, &mut plans, &f, &want);
        }
        // Many chunks: the scratch bound cut to about a seventh.
        let per_chunk = boxes.source_boxes.len().div_ceil(7).max(1);
        ev.set_pair_scratch_bytes(per_chunk * nq * 8).unwrap();
        let w = format!("{what}, chunks");
        let mut plans = compare_plans(&w, &ev, &boxes, List1Kernel::Grouped);
        assert!(
            plans.0.grouped_chunks() >= 5,
            "{w}: {}",
            plans.0.grouped_chunks()
        );
        compare_evaluations(&w, &ev, &mut plans, &f, &want);
        // The fast contract's plans (q^d ≤ 64 here) are chosen by tiling
        // the pairs: built on the host.
        ev.set_contract(List1Contract::Fast);
        let fast = ev.plan(&boxes).unwrap();
        assert!(!fast.built_on_device(), "{what}: {}", fast.kernel());
    }
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_plan_of_a_uniform_tree_and_subsets_of_targets() {
    let (device, stream) = gpu();
    let mut rng = SplitMix64::new(0x756e_6966);
    let k = Kernel::laplace(3).unwrap();
    let tables = Tables::Scaled(Box::new(synthetic(&k, 3, 1.0, &mut rng)));
    let t = BalancedTree::uniform(3, 5, &[0.25, -1.0, 0.5], 2.0).unwrap();
    let ev = evaluator(&device, &tables);
    let all = t.all_boxes();
    let boxes = t.list1_boxes(&all);
    assert_eq!(boxes.source_boxes.len(), 830_584);
    let f = random_values(&mut rng, t.n_boxes() * 27);
    let want = cpu_want(&tables, &boxes, &f);
    let mut plans = compare_plans("uniform 32,768", &ev, &boxes, List1Kernel::Grouped);
    compare_evaluations("uniform 32,768", &ev, &mut plans, &f, &want);
    // Targets in another order, some boxes twice, some not at all, each
    // with its list: the rows follow the targets.
    let mut targets = Vec::new();
    let mut starts = vec![0u32];
    let mut sources = Vec::new();
    let all_starts = t.list1_starts();
    for _ in 0..5000 {
        let b = rng.below(t.n_boxes());
        targets.push(b as u32);
        sources.extend_from_slice(
            &t.list1_sources()[all_starts[b] as usize..all_starts[b + 1] as usize],
        );
        starts.push(sources.len() as u32);
    }
    let sub = List1Boxes {
        target_boxes: &targets,
        source_starts: &starts,
        source_boxes: &sources,
        ..boxes
    };
    let want = cpu_want(&tables, &sub, &f);
    let mut plans = compare_plans("5,000 random targets", &ev, &sub, List1Kernel::Grouped);
    compare_evaluations("5,000 random targets", &ev, &mut plans, &f, &want);
    let got = ev.evaluate(&stream, &sub, &f).unwrap();
    check_against("5,000 random targets, evaluate", &got, &want, true);
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_plans_refuse_as_the_host_does() {
    let (device, stream) = gpu();
    let mut rng = SplitMix64::new(0x7265_6675);
    let k = Kernel::laplace(3).unwrap();
    let tables = Tables::Scaled(Box::new(synthetic(&k, 2, 0.9, &mut rng)));
    let t = tree(3, 17, 4);
    let ev = evaluator(&device, &tables);
    let targets = t.all_boxes();
    let boxes = t.list1_boxes(&targets);
    let np = boxes.source_boxes.len();
    let same = |what: &str, b: &List1Boxes<'_>, expect: &str| {
        let dev = ev.plan(b).unwrap_err().to_string();
        let host = plan_on_host(&ev, b, List1Kernel::Grouped)
            .unwrap_err()
            .to_string();
        assert_eq!(dev, host, "{what}");
        assert!(dev.contains(expect), "{what}: {dev}");
        let f = random_values(&mut SplitMix64::new(3), t.n_boxes() * 8);
        let e = ev.evaluate(&stream, b, &f).unwrap_err().to_string();
        assert_eq!(e, host, "{what}: evaluate");
    };
    // A pair that is none of List 1's: the first source swapped with the last.
    let mut s = t.list1_sources().to_vec();
    s.swap(0, np - 1);
    same(
        "swapped",
        &List1Boxes {
            source_boxes: &s,
            ..boxes
        },
        "not a List 1 pair",
    );
    // A source out of range late in the list, and a refused pair before
    // it: the range is named first (the CPU's order).
    let mut s = t.list1_sources().to_vec();
    s.swap(1, np - 2);
    s[np - 1] = t.n_boxes() as u32 + 3;
    same(
        "out of range",
        &List1Boxes {
            source_boxes: &s,
            ..boxes
        },
        "out of range",
    );
    // A target box out of range, a level beyond the tree's limit, a
    // non-finite centre: per-box checks on the host, before any upload.
    let mut tg = targets.clone();
    tg[5] = t.n_boxes() as u32;
    same(
        "target",
        &List1Boxes {
            target_boxes: &tg,
            ..boxes
        },
        "target_boxes[5]",
    );
    let mut lv = t.levels().to_vec();
    lv[2] = 40;
    same(
        "level",
        &List1Boxes {
            levels: &lv,
            ..boxes
        },
        "level 40",
    );
    let mut c = t.centers().to_vec();
    c[7] = f64::NAN;
    same(
        "centre",
        &List1Boxes {
            centers: &c,
            ..boxes
        },
        "not finite",
    );
    // A box one level off its neighbours' size: sizes two levels apart.
    let mut lv = t.levels().to_vec();
    let b = t.list1_sources()[0] as usize;
    lv[b] += 2;
    same(
        "sizes",
        &List1Boxes {
            levels: &lv,
            ..boxes
        },
        "not a List 1 pair",
    );
    // Non-finite values through evaluate: the values' message, after the
    // pairs passed.
    let mut f = random_values(&mut rng, t.n_boxes() * 8);
    f[11] = f64::INFINITY;
    let e = ev.evaluate(&stream, &boxes, &f).unwrap_err().to_string();
    assert!(e.contains("not finite"), "{e}");
    // Per-level tables without the level some pair's source is at.
    let yk = Kernel::yukawa(3, 1.0).unwrap();
    let per = Tables::build(&yk, 2, &t);
    let Tables::PerLevel(mut ts) = per else {
        unreachable!()
    };
    ts.truncate(2);
    let ev2 = List1Evaluator::from_reduced(
        &device,
        &List1ReducedTables::PerLevel(&ts),
        List1Layout::Dense,
    )
    .unwrap();
    let mut ev2 = ev2;
    ev2.set_contract(List1Contract::Exact);
    let dev = ev2.plan(&boxes).unwrap_err().to_string();
    let host = plan_on_host(&ev2, &boxes, List1Kernel::Grouped)
        .unwrap_err()
        .to_string();
    assert_eq!(dev, host);
    assert!(dev.contains("per-level tables"), "{dev}");
    // The evaluator still plans after all that.
    let mut plans = compare_plans("after errors", &ev, &boxes, List1Kernel::Grouped);
    let f = random_values(&mut rng, t.n_boxes() * 8);
    let want = cpu_want(&tables, &boxes, &f);
    compare_evaluations("after errors", &ev, &mut plans, &f, &want);
}

/// The C entry points alone: their argument checks, and more keys than a
/// block counts in shared memory (keys spread by a level table the safe
/// API never makes): cases and runs against the host's classification.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_c_entry_points_with_many_keys_and_bad_arguments() {
    let (device, stream) = gpu();
    let t = tree(3, 23, 5);
    let targets = t.all_boxes();
    let boxes = t.list1_boxes(&targets);
    let cases = Cases::new(3).unwrap();
    let host_cases = boxes.pairs().unwrap().cases;
    let n_cases = cases.len();
    let np = boxes.source_boxes.len();
    // Table of level l: 40 + 3·l, so every key is beyond 4,096.
    let level_table: Vec<u32> = (0..32).map(|l| 40 + 3 * l).collect();
    let n_keys = (40 + 3 * 32) * n_cases;
    let up = |x: &[u32]| device.htod_copy(x).unwrap();
    let dt = DeviceTree::new(&device, &boxes, &cases);
    let ltab = up(&level_table);
    let mut counts = device.alloc_zeroed::<u32>(n_keys).unwrap();
    let mut pc = device.htod_copy(&vec![0xEEu8; np]).unwrap();
    let mut rep = device.htod_copy(&report_init()).unwrap();
    let tree_c = dt.raw();
    let s = stream.as_raw();
    let classify = |tr: &sys::hipkern_list1_tree,
                    a: i64,
                    b: i64,
                    nc: i32,
                    nk: i64,
                    counts: *mut u32,
                    pc: *mut u8,
                    rep: *mut sys::hipkern_list1_pair_report| {
        // SAFETY: device buffers sized for the tree above; the entry point
        // checks the rest.
        unsafe {
            sys::hipkern_list1_classify_pairs(tr, a, b, ltab.as_ptr(), nc, nk, counts, pc, rep, s)
        }
    };
    let nt = targets.len() as i64;
    let (cp, pp, rp) = (
        counts.as_mut_ptr(),
        pc.as_mut_ptr(),
        rep.as_mut_ptr().cast::<sys::hipkern_list1_pair_report>(),
    );
    let bad = sys::HIPKERN_ERROR_INVALID_ARGUMENT;
    let mut t4 = tree_c;
    t4.dim = 4;
    assert_eq!(
        classify(&t4, 0, nt, n_cases as i32, n_keys as i64, cp, pp, rp),
        bad
    );
    let mut tr = tree_c;
    tr.root_extent = f64::INFINITY;
    assert_eq!(
        classify(&tr, 0, nt, n_cases as i32, n_keys as i64, cp, pp, rp),
        bad
    );
    assert_eq!(
        classify(&tree_c, 1, 0, n_cases as i32, n_keys as i64, cp, pp, rp),
        bad
    );
    assert_eq!(
        classify(
            &tree_c,
            0,
            nt + 1,
            n_cases as i32,
            n_keys as i64,
            cp,
            pp,
            rp
        ),
        bad
    );
    assert_eq!(classify(&tree_c, 0, nt, 0, n_keys as i64, cp, pp, rp), bad);
    assert_eq!(
        classify(&tree_c, 0, nt, 256, n_keys as i64, cp, pp, rp),
        bad
    );
    assert_eq!(classify(&tree_c, 0, nt, n_cases as i32, 0, cp, pp, rp), bad);
    assert_eq!(
        classify(
            &tree_c,
            0,
            nt,
            n_cases as i32,
            n_keys as i64,
            std::ptr::null_mut(),
            pp,
            rp
        ),
        bad
    );
    let mut tr = tree_c;
    tr.source_boxes = std::ptr::null();
    assert_eq!(
        classify(&tr, 0, nt, n_cases as i32, n_keys as i64, cp, pp, rp),
        bad
    );
    // SAFETY: a null tree is refused before anything is read.
    let rc = unsafe {
        sys::hipkern_list1_classify_pairs(
            std::ptr::null(),
            0,
            nt,
            ltab.as_ptr(),
            n_cases as i32,
            n_keys as i64,
            cp,
            pp,
            rp,
            s,
        )
    };
    assert_eq!(rc, bad);
    stream.synchronize().unwrap();
    assert!(
        pc.to_vec().unwrap().iter().all(|&x| x == 0xEE),
        "a refused call wrote"
    );
    // Two calls over halves of the targets: the report and counts add up.
    let half = nt / 2;
    assert_eq!(
        classify(&tree_c, 0, half, n_cases as i32, n_keys as i64, cp, pp, rp),
        0
    );
    assert_eq!(
        classify(&tree_c, half, nt, n_cases as i32, n_keys as i64, cp, pp, rp),
        0
    );
    stream.synchronize().unwrap();
    let got = pc.to_vec().unwrap();
    for j in 0..np {
        assert_eq!(u16::from(got[j]), host_cases[j], "pair {j}");
    }
    let r = rep.to_vec().unwrap();
    assert_eq!(&r[..4], &[u64::MAX; 4], "nothing reported");
    let mut want_levels = [0u64; 32];
    for &sb in t.list1_sources() {
        want_levels[t.levels()[sb as usize] as usize] += 1;
    }
    assert_eq!(&r[4..], &want_levels);
    let key = |j: usize| {
        let l = t.levels()[t.list1_sources()[j] as usize] as usize;
        level_table[l] as usize * n_cases + host_cases[j] as usize
    };
    let mut want_counts = vec![0u32; n_keys];
    (0..np).for_each(|j| want_counts[key(j)] += 1);
    assert_eq!(counts.to_vec().unwrap(), want_counts);
    // The scatter with one atomic a pair: each key's run its pairs.
    let mut next = Vec::with_capacity(n_keys);
    let mut at = 0u32;
    for &c in &want_counts {
        next.push(at);
        at += c;
    }
    let mut kn = up(&next);
    let mut tp = device.alloc::<u32>(np).unwrap();
    stream.fill(&mut tp.as_slice_mut(), u32::MAX).unwrap();
    let group = |a: i64, b: i64, kn: *mut u32, tp: *mut u32, ntp: i64| {
        // SAFETY: as above.
        unsafe {
            sys::hipkern_list1_group_pairs(
                &tree_c,
                a,
                b,
                ltab.as_ptr(),
                n_cases as i32,
                n_keys as i64,
                pc.as_ptr(),
                kn,
                tp,
                ntp,
                s,
            )
        }
    };
    let (knp, tpp) = (kn.as_mut_ptr(), tp.as_mut_ptr());
    assert_eq!(group(-1, np as i64, knp, tpp, np as i64), bad);
    assert_eq!(group(0, np as i64 + 1, knp, tpp, np as i64), bad);
    assert_eq!(group(0, np as i64, knp, tpp, -1), bad);
    assert_eq!(
        group(0, np as i64, knp, std::ptr::null_mut(), np as i64),
        bad
    );
    assert_eq!(group(0, np as i64, knp, tpp, np as i64), 0);
    stream.synchronize().unwrap();
    let ids = tp.to_vec().unwrap();
    for (k, &start) in next.iter().enumerate() {
        let run = &ids[start as usize..(start + want_counts[k]) as usize];
        let mut r = run.to_vec();
        r.sort_unstable();
        let want: Vec<u32> = (0..np).filter(|&j| key(j) == k).map(|j| j as u32).collect();
        assert_eq!(r, want, "key {k}");
    }
}

/// A report before the first classification: the four firsts none, no
/// pairs at any level (36 words).
fn report_init() -> Vec<u64> {
    let mut init = vec![u64::MAX; 4];
    init.resize(36, 0);
    init
}

/// A tree's arrays on the device, for the C entry points.
struct DeviceTree {
    centers: hipkern::DeviceBuffer<f64>,
    levels: hipkern::DeviceBuffer<u8>,
    targets: hipkern::DeviceBuffer<u32>,
    starts: hipkern::DeviceBuffer<u32>,
    sources: hipkern::DeviceBuffer<u32>,
    case_indices: hipkern::DeviceBuffer<i32>,
    root_extent: f64,
    n_boxes: usize,
}

impl DeviceTree {
    fn new(device: &hipkern::Device, boxes: &List1Boxes<'_>, cases: &Cases) -> DeviceTree {
        let levels: Vec<u8> = boxes.levels.iter().map(|&l| l as u8).collect();
        DeviceTree {
            centers: device.htod_copy(boxes.centers).unwrap(),
            levels: device.htod_copy(&levels).unwrap(),
            targets: device.htod_copy(boxes.target_boxes).unwrap(),
            starts: device.htod_copy(boxes.source_starts).unwrap(),
            sources: device.htod_copy(boxes.source_boxes).unwrap(),
            case_indices: device.htod_copy(cases.case_indices()).unwrap(),
            root_extent: boxes.root_extent,
            n_boxes: boxes.n_boxes(),
        }
    }

    /// The tree as the C entry points take it (pointers into `self`).
    fn raw(&self) -> sys::hipkern_list1_tree {
        sys::hipkern_list1_tree {
            dim: 3,
            root_extent: self.root_extent,
            n_boxes: self.n_boxes as i64,
            n_targets: self.targets.len() as i64,
            n_pairs: self.sources.len() as i64,
            centers: self.centers.as_ptr(),
            box_levels: self.levels.as_ptr(),
            target_boxes: self.targets.as_ptr(),
            source_starts: self.starts.as_ptr(),
            source_boxes: self.sources.as_ptr(),
            case_indices: self.case_indices.as_ptr(),
        }
    }

    /// Every row classified in one call with `level_table` and `n_keys`:
    /// the cases, the key counts and the report (36 words).
    fn classify(
        &self,
        stream: &hipkern::Stream,
        level_table: &[u32],
        n_cases: usize,
        n_keys: usize,
    ) -> (Vec<u8>, Vec<u32>, Vec<u64>) {
        let device = stream.device();
        let n_targets = self.targets.len();
        let n_pairs = self.sources.len();
        let lt = device.htod_copy(level_table).unwrap();
        let mut counts = device.alloc_zeroed::<u32>(n_keys).unwrap();
        let mut pc = device.htod_copy(&vec![0xEEu8; n_pairs]).unwrap();
        let mut rep = device.htod_copy(&report_init()).unwrap();
        let tree = self.raw();
        // SAFETY: every array sized for the tree it describes; the report
        // is 36 words, the counts n_keys.
        let rc = unsafe {
            sys::hipkern_list1_classify_pairs(
                &tree,
                0,
                n_targets as i64,
                lt.as_ptr(),
                n_cases as i32,
                n_keys as i64,
                counts.as_mut_ptr(),
                pc.as_mut_ptr(),
                rep.as_mut_ptr().cast(),
                stream.as_raw(),
            )
        };
        assert_eq!(rc, 0);
        stream.synchronize().unwrap();
        (
            pc.to_vec().unwrap(),
            counts.to_vec().unwrap(),
            rep.to_vec().unwrap(),
        )
    }
}

/// More target rows than one pass of the classification's grid covers
/// (every box's row repeated to 40,000), keys counted in shared memory;
/// then sources out of range and pairs that are none of List 1's: the
/// report names the smallest index of each, as the host finds them.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_classification_over_many_rows_and_its_report() {
    let (device, stream) = gpu();
    let t = tree(3, 29, 4);
    let cases = Cases::new(3).unwrap();
    let n_cases = cases.len();
    let (mut targets, mut starts, mut sources) = (Vec::new(), vec![0u32], Vec::new());
    let all = t.list1_starts();
    while targets.len() < 40_000 {
        let b = targets.len() % t.n_boxes();
        targets.push(b as u32);
        sources.extend_from_slice(&t.list1_sources()[all[b] as usize..all[b + 1] as usize]);
        starts.push(sources.len() as u32);
    }
    let boxes = List1Boxes {
        dim: 3,
        root_extent: t.root_extent(),
        centers: t.centers(),
        levels: t.levels(),
        target_boxes: &targets,
        source_starts: &starts,
        source_boxes: &sources,
    };
    let host = boxes.pairs().unwrap().cases;
    let (got, counts, rep) =
        DeviceTree::new(&device, &boxes, &cases).classify(&stream, &[0; 32], n_cases, n_cases);
    for (j, (&g, &h)) in got.iter().zip(&host).enumerate() {
        assert_eq!(u16::from(g), h, "pair {j}");
    }
    let mut want = vec![0u32; n_cases];
    host.iter().for_each(|&c| want[c as usize] += 1);
    assert_eq!(counts, want);
    assert_eq!(&rep[..4], &[u64::MAX; 4]);
    assert_eq!(rep[4..].iter().sum::<u64>(), sources.len() as u64);

    // Two sources out of range and two sources that make no List 1 pair
    // with their target (the first box that does not, as the host's
    // check finds it): the smallest index of each kind.
    let np = sources.len();
    let side = |l: u32| t.root_extent() / f64::from(1u32 << l);
    let row_of = |j: usize| starts.partition_point(|&s| s as usize <= j) - 1;
    let refuses = |i: usize, sb: usize| {
        let tb = targets[i] as usize;
        cases
            .case_of_pair(
                &t.centers()[3 * tb..3 * tb + 3],
                side(t.levels()[tb]),
                &t.centers()[3 * sb..3 * sb + 3],
                side(t.levels()[sb]),
            )
            .is_err()
    };
    let mut bad = sources.clone();
    bad[np - 5] = t.n_boxes() as u32 + 1;
    bad[np / 2] = u32::MAX;
    for j in [np / 3, 1000] {
        let i = row_of(j);
        bad[j] = (0..t.n_boxes()).find(|&sb| refuses(i, sb)).unwrap() as u32;
    }
    let b = List1Boxes {
        source_boxes: &bad,
        ..boxes
    };
    let (got, _, rep) =
        DeviceTree::new(&device, &b, &cases).classify(&stream, &[0; 32], n_cases, n_cases);
    assert_eq!(rep[1], (np / 2) as u64, "first source out of range");
    assert_eq!(rep[2], 1000, "first pair that is none of List 1's");
    assert_eq!((rep[0], rep[3]), (u64::MAX, u64::MAX));
    assert_eq!(got[np / 2], 0xFF);
    assert_eq!((got[1000], got[np / 3]), (0xFF, 0xFF));
}
