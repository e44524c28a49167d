//! The plan built on the device (`hipkern_force_plan_build`) against the
//! host plan, bad indices on the device, and the assembly over large,
//! skewed edge sets (E = 10^6, one atom with 10^5 edges each way, isolated
//! atoms, src == dst edges, edges in neighbour-list and in random order)
//! in f64, f32 and f32-rounded-once outputs, against the float64 reference
//! and against the atomic fp32 path. GPU tests (`gpu_*`) are ignored
//! on the cpu platform.
use hipkern::force::{
    assemble_atomic_device_into, assemble_device_into, assemble_device_rounded_into,
    assemble_reference_f64, frame_virials, frame_virials_device_into, voigt, Assembly, CsrPlan,
    DeviceEdges, DeviceFrames, DeviceGhostMapping, DevicePlan, Frames, GhostMapping, VirialSplit,
};
use hipkern::rng::SplitMix64 as Rng;
use hipkern::{Device, DeviceBuffer, Error, Stream};

/// Edges of a skewed neighbour list: `n_centres` centres (every fifth one
/// isolated) with 0..=2·mean edges each, grouped by dst; one hub atom with
/// `hub_edges` edges as dst and as many as src; one edge in a hundred with
/// src == dst. With `shuffle`, the edges come in random order.
fn skewed(
    rng: &mut Rng,
    n_ext: usize,
    n_centres: usize,
    mean: usize,
    hub_edges: usize,
    shuffle: bool,
) -> (Vec<i32>, Vec<i32>) {
    let hub = 7 % n_ext;
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for k in 0..n_centres {
        if k % 5 == 2 || k == hub {
            continue;
        }
        for _ in 0..rng.below(2 * mean + 1) {
            dst.push(k as i32);
            let s = if rng.below(100) == 0 {
                k
            } else {
                rng.below(n_ext)
            };
            src.push(s as i32);
        }
        if k == n_centres / 2 {
            for _ in 0..hub_edges {
                dst.push(hub as i32);
                src.push(rng.below(n_ext) as i32);
            }
        }
    }
    for _ in 0..hub_edges {
        src.push(hub as i32);
        dst.push(rng.below(n_ext) as i32);
    }
    if shuffle {
        for i in (1..src.len()).rev() {
            let j = rng.below(i + 1);
            src.swap(i, j);
            dst.swap(i, j);
        }
    }
    (src, dst)
}

fn ghost_mapping(rng: &mut Rng, n_ext: usize, n_local: usize) -> Vec<i64> {
    (0..n_ext)
        .map(|k| {
            if k < n_local {
                k as i64
            } else {
                rng.below(n_local) as i64
            }
        })
        .collect()
}

fn values(rng: &mut Rng, n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|_| scale * rng.uniform_pm1()).collect()
}

/// ‖got − want‖∞ / ‖want‖∞ (`docs/design/program.md#relative-error`), after
/// checking every element is finite.
fn rel_err(what: &str, got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let mut worst = 0.0f64;
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(a.is_finite(), "{what}[{i}] = {a} (unwritten or poisoned)");
        worst = worst.max((a - b).abs());
    }
    worst / scale.max(f64::MIN_POSITIVE)
}

fn poisoned<T: hipkern::runtime::DeviceRepr + Clone>(
    d: &Device,
    n: usize,
    nan: T,
) -> DeviceBuffer<T> {
    d.htod_copy(&vec![nan; n]).unwrap()
}

fn to_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_plan_equals_the_host_plan() {
    let d = Device::new(0).unwrap();
    let s = d.new_stream().unwrap();
    let mut rng = Rng::from_clock();
    // (n_ext, centres, mean degree, hub edges, shuffled)
    let cases = [
        (5usize, 0usize, 0usize, 0usize, false),
        (1, 1, 1, 0, false),
        (700, 600, 40, 0, true),
        (8000, 6000, 100, 3000, false),
        (20_000, 8000, 50, 100_000, false),
        (20_000, 8000, 50, 100_000, true),
        // 2^18 < n_ext: three radix passes; dst in order (no hub, not
        // shuffled) takes the in-order path, src and the folded keys the
        // passes.
        (300_000, 250_000, 4, 0, false),
        (300_000, 250_000, 4, 20_000, true),
        // 2^15 < n_ext <= 2^16: two passes, dst shuffled (sorted too);
        // n_ext = 2^19: three passes, each key bit used.
        (40_000, 30_000, 8, 0, true),
        (524_288, 400_000, 2, 0, false),
        // 2^24 < n_ext: four passes (the most a key below 2^31 takes).
        (20_000_000, 50_000, 4, 1_000, true),
    ];
    for &(n_ext, n_centres, mean, hub, shuffle) in &cases {
        let (src, dst) = skewed(&mut rng, n_ext, n_centres, mean, hub, shuffle);
        let what = format!("E={} n_ext={n_ext} shuffled={shuffle}", src.len());
        let host = CsrPlan::build(&src, &dst, n_ext, None).unwrap();
        let dev = DevicePlan::build_from_host(&s, &src, &dst, n_ext, None).unwrap();
        assert!(dev.to_host().unwrap() == host, "int32 plan differs: {what}");
        let src64: Vec<i64> = src.iter().map(|&x| x as i64).collect();
        let dst64: Vec<i64> = dst.iter().map(|&x| x as i64).collect();
        let dev = DevicePlan::build_from_host(&s, &src64, &dst64, n_ext, None).unwrap();
        assert!(dev.to_host().unwrap() == host, "int64 plan differs: {what}");

        // Ghost folding, the mapping as int64 (host) and as int32 (device).
        let n_local = (n_ext / 2).max(1);
        let mapping = ghost_mapping(&mut rng, n_ext, n_local);
        let ghosts = GhostMapping {
            mapping: &mapping,
            n_local,
        };
        let host = CsrPlan::build(&src, &dst, n_ext, Some(ghosts)).unwrap();
        let dev = DevicePlan::build_from_host(&s, &src, &dst, n_ext, Some(ghosts)).unwrap();
        assert!(
            dev.to_host().unwrap() == host,
            "folded plan differs: {what}"
        );
        let m32: Vec<i32> = mapping.iter().map(|&m| m as i32).collect();
        let (src_d, dst_d, m_d) = (
            d.htod_copy(&src).unwrap(),
            d.htod_copy(&dst).unwrap(),
            d.htod_copy(&m32).unwrap(),
        );
        let dev = DevicePlan::build(
            &s,
            &src_d,
            &dst_d,
            n_ext,
            Some(DeviceGhostMapping::new(&m_d, n_local)),
        )
        .unwrap();
        assert!(
            dev.to_host().unwrap() == host,
            "folded plan (int32 mapping) differs: {what}"
        );
        eprintln!("device plan == host plan: {what}");
    }
    // The passes' tiles find their output slots from the tiles before them
    // while those run (a look-back): a race would show as a plan that
    // differs from one build to the next. Many builds of one large case,
    // each against the host plan.
    let (src, dst) = skewed(&mut rng, 300_000, 250_000, 8, 50_000, true);
    let host = CsrPlan::build(&src, &dst, 300_000, None).unwrap();
    let (src_d, dst_d) = (d.htod_copy(&src).unwrap(), d.htod_copy(&dst).unwrap());
    for build in 0..20 {
        let dev = DevicePlan::build(&s, &src_d, &dst_d, 300_000, None).unwrap();
        assert!(
            dev.to_host().unwrap() == host,
            "build {build} of E={} differs from the host plan",
            src.len()
        );
    }
}

fn expect_error<T: std::fmt::Debug>(res: hipkern::Result<T>, want: &str) {
    match res {
        Err(Error::InvalidInput(m)) => assert_eq!(m, want),
        other => panic!("expected the error {want:?}, got {other:?}"),
    }
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_plan_rejects_bad_indices_and_writes_nothing() {
    let d = Device::new(0).unwrap();
    let s = d.new_stream().unwrap();
    let mut rng = Rng::from_clock();
    let n_ext = 5000;
    let (src, dst) = skewed(&mut rng, n_ext, 4000, 100, 0, false);
    let e = src.len();
    let mut plan = DevicePlan::build_from_host(&s, &src, &dst, n_ext, None).unwrap();
    let before = plan.to_host().unwrap();
    let mut scratch = d
        .alloc::<u8>(DevicePlan::scratch_bytes(e, n_ext).unwrap())
        .unwrap();
    // Each case: the same message as the host validation, and the plan's
    // previous contents untouched.
    let mut cases: Vec<(Vec<i32>, Vec<i32>)> = Vec::new();
    let (mut s1, mut s2, mut d1) = (src.clone(), src.clone(), dst.clone());
    s1[e - 3] = n_ext as i32; // src ≥ n_ext near the end
    s2[e / 2] = -1; // two bad src positions: the first is reported
    s2[e - 1] = n_ext as i32 + 7;
    d1[17] = -5; // negative dst
    cases.push((s1, dst.clone()));
    cases.push((s2, dst.clone()));
    cases.push((src.clone(), d1.clone()));
    cases.push((src.clone(), d1));
    cases.last_mut().unwrap().0[e - 2] = i32::MAX; // src and dst bad: src first, as on the host
    for (bad_src, bad_dst) in &cases {
        let want = match CsrPlan::build(bad_src, bad_dst, n_ext, None) {
            Err(Error::InvalidInput(m)) => m,
            other => panic!("host build accepted a bad list: {other:?}"),
        };
        let (sd, dd) = (d.htod_copy(bad_src).unwrap(), d.htod_copy(bad_dst).unwrap());
        expect_error(plan.rebuild(&s, &sd, &dd, n_ext, None, &mut scratch), &want);
        expect_error(
            DevicePlan::build(&s, &sd, &dd, n_ext, None).map(|_| ()),
            &want,
        );
        assert!(
            plan.to_host().unwrap() == before,
            "plan written despite {want}"
        );
    }
    // A mapping target ≥ n_local, and one that is negative.
    let n_local = 3000;
    let mut mapping = ghost_mapping(&mut rng, n_ext, n_local);
    mapping[4321] = n_local as i64;
    mapping[4999] = -1;
    let want = match CsrPlan::build(
        &src,
        &dst,
        n_ext,
        Some(GhostMapping {
            mapping: &mapping,
            n_local,
        }),
    ) {
        Err(Error::InvalidInput(m)) => m,
        other => panic!("host build accepted a bad mapping: {other:?}"),
    };
    let (sd, dd, md) = (
        d.htod_copy(&src).unwrap(),
        d.htod_copy(&dst).unwrap(),
        d.htod_copy(&mapping).unwrap(),
    );
    let mut folded = DevicePlan::build_from_host(
        &s,
        &src,
        &dst,
        n_ext,
        Some(GhostMapping {
            mapping: &ghost_mapping(&mut rng, n_ext, n_local),
            n_local,
        }),
    )
    .unwrap();
    let folded_before = folded.to_host().unwrap();
    let mut scratch = d
        .alloc::<u8>(DevicePlan::scratch_bytes(e, n_local).unwrap())
        .unwrap();
    expect_error(
        folded.rebuild(
            &s,
            &sd,
            &dd,
            n_ext,
            Some(DeviceGhostMapping::new(&md, n_local)),
            &mut scratch,
        ),
        &want,
    );
    assert!(folded.to_host().unwrap() == folded_before);
    // Lengths that disagree, before anything runs.
    let short = d.htod_copy(&src[..e - 1]).unwrap();
    expect_error(
        DevicePlan::build(&s, &short, &dd, n_ext, None).map(|_| ()),
        &format!("src has {} entries but dst has {e}", e - 1),
    );
    let m_short = d.htod_copy(&mapping[..n_ext - 1]).unwrap();
    expect_error(
        DevicePlan::build(
            &s,
            &sd,
            &dd,
            n_ext,
            Some(DeviceGhostMapping::new(&m_short, n_local)),
        )
        .map(|_| ()),
        &format!("mapping has {} entries but n_ext = {n_ext}", n_ext - 1),
    );
}

/// f64 force and virial of the assembly into poisoned outputs.
fn run_f64<T: hipkern::force::DeviceReal>(
    s: &Stream,
    plan: &DevicePlan,
    g: &DeviceBuffer<T>,
    r: &DeviceBuffer<T>,
    split: VirialSplit,
) -> (Vec<f64>, Vec<f64>) {
    let d = s.device();
    let n = plan.n_rows();
    let mut f = poisoned(d, 3 * n, f64::NAN);
    let mut w = poisoned(d, 9 * n, f64::NAN);
    assemble_device_into(s, plan, g, r, split, &mut f, &mut w).unwrap();
    s.synchronize().unwrap();
    (f.to_vec().unwrap(), w.to_vec().unwrap())
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_large_skewed_assembly_in_f64_f32_and_rounded_f32() {
    let d = Device::new(0).unwrap();
    let s = d.new_stream().unwrap();
    let mut rng = Rng::from_clock();
    let n_ext = 20_000;
    for (shuffle, fold) in [(false, false), (true, false), (false, true)] {
        let (src, dst) = skewed(&mut rng, n_ext, 8000, 50, 100_000, shuffle);
        let e = src.len();
        let n_local = 12_000;
        let mapping = ghost_mapping(&mut rng, n_ext, n_local);
        let ghosts = fold.then_some(GhostMapping {
            mapping: &mapping,
            n_local,
        });
        let plan = DevicePlan::build_from_host(&s, &src, &dst, n_ext, ghosts).unwrap();
        let n = plan.n_rows();
        let g = values(&mut rng, 3 * e, 1.0);
        let r = values(&mut rng, 3 * e, 4.0);
        let g32h: Vec<f32> = g.iter().map(|&x| x as f32).collect();
        let r32h: Vec<f32> = r.iter().map(|&x| x as f32).collect();
        let (g64, r64) = (d.htod_copy(&g).unwrap(), d.htod_copy(&r).unwrap());
        let (g32, r32) = (d.htod_copy(&g32h).unwrap(), d.htod_copy(&r32h).unwrap());
        let edges = DeviceEdges::upload(&d, &src, &dst, n_ext, ghosts).unwrap();
        for split in [VirialSplit::Half, VirialSplit::Src] {
            let what = format!("E={e} shuffled={shuffle} folded={fold} {split:?}");
            let want = assemble_reference_f64(&g, &r, &src, &dst, n_ext, ghosts, split).unwrap();
            let (f, w) = run_f64(&s, &plan, &g64, &r64, split);
            let (ef, ew) = (
                rel_err("f64 force", &f, &want.force),
                rel_err("f64 virial", &w, &want.virial),
            );
            assert!(ef <= 1e-13 && ew <= 1e-13, "{what}: f64 {ef:.2e} {ew:.2e}");

            // f32 inputs: the reference is float64 on the same f32 values.
            let want32: Assembly = assemble_reference_f64(
                &to_f64(&g32h),
                &to_f64(&r32h),
                &src,
                &dst,
                n_ext,
                ghosts,
                split,
            )
            .unwrap();
            let (f, w) = run_f64(&s, &plan, &g32, &r32, split);
            let (e1, e2) = (
                rel_err("f32-in force", &f, &want32.force),
                rel_err("f32-in virial", &w, &want32.virial),
            );
            assert!(
                e1 <= 1e-13 && e2 <= 1e-13,
                "{what}: f32 in, f64 out {e1:.2e} {e2:.2e}"
            );

            // Rounded once to f32: within half an f32 ulp of the reference
            // per element (plus the float64 sums' own 1e-13), i.e. no worse
            // than the reference rounded once.
            let mut accum = poisoned(&d, 12 * n, f64::NAN);
            let mut fr = poisoned(&d, 3 * n, f32::NAN);
            let mut wr = poisoned(&d, 9 * n, f32::NAN);
            assemble_device_rounded_into(
                &s, &plan, &g32, &r32, split, &mut accum, &mut fr, &mut wr,
            )
            .unwrap();
            s.synchronize().unwrap();
            let (fr, wr) = (fr.to_vec().unwrap(), wr.to_vec().unwrap());
            let mut rounded_err = [0.0f64; 2];
            let mut ref_rounded_err = [0.0f64; 2];
            for (k, (got, want)) in [(&fr, &want32.force), (&wr, &want32.virial)]
                .into_iter()
                .enumerate()
            {
                let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                for (i, (&a, &b)) in got.iter().zip(want.iter()).enumerate() {
                    let half_ulp = b.abs() * f32::EPSILON as f64 / 2.0;
                    let err = (a as f64 - b).abs();
                    assert!(
                        a.is_finite() && err <= half_ulp * (1.0 + 1e-9) + 1e-13 * scale,
                        "{what}: rounded output {k} [{i}] = {a} vs {b}"
                    );
                    rounded_err[k] = rounded_err[k].max(err / scale);
                    ref_rounded_err[k] =
                        ref_rounded_err[k].max(((b as f32) as f64 - b).abs() / scale);
                }
            }
            // Bitwise identical when repeated.
            let mut fr2 = poisoned(&d, 3 * n, f32::NAN);
            let mut wr2 = poisoned(&d, 9 * n, f32::NAN);
            assemble_device_rounded_into(
                &s, &plan, &g32, &r32, split, &mut accum, &mut fr2, &mut wr2,
            )
            .unwrap();
            s.synchronize().unwrap();
            let same =
                |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same(&fr, &fr2.to_vec().unwrap()) && same(&wr, &wr2.to_vec().unwrap()));

            // The atomic fp32 path on the same inputs: measured, and worse.
            let mut outer = poisoned(&d, 9 * e, f32::NAN);
            let mut fa = poisoned(&d, 3 * n, f32::NAN);
            let mut wa = poisoned(&d, 9 * n, f32::NAN);
            assemble_atomic_device_into(
                &s, &edges, &g32, &r32, split, &mut outer, &mut fa, &mut wa,
            )
            .unwrap();
            s.synchronize().unwrap();
            let atomic_err = [
                rel_err(
                    "atomic force",
                    &to_f64(&fa.to_vec().unwrap()),
                    &want32.force,
                ),
                rel_err(
                    "atomic virial",
                    &to_f64(&wa.to_vec().unwrap()),
                    &want32.virial,
                ),
            ];
            eprintln!(
                "{what}: f32 rel. error force/virial: rounded-once {:.2e}/{:.2e} (reference rounded once {:.2e}/{:.2e}), atomic fp32 {:.2e}/{:.2e}",
                rounded_err[0], rounded_err[1], ref_rounded_err[0], ref_rounded_err[1], atomic_err[0], atomic_err[1]
            );
            assert!(
                rounded_err[0] < atomic_err[0] && rounded_err[1] < atomic_err[1],
                "{what}: the atomic fp32 path was not worse"
            );
        }
    }
}

/// Per-frame virial totals on the device against the host's, by frame
/// size and by frame id (shuffled ids, empty frames, one frame holding a
/// third of the rows), 9 components and Voigt, poisoned outputs, bitwise
/// reruns; bad ids and sizes give the host's message and write nothing.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_frame_virials_on_the_device_match_the_host() {
    let d = Device::new(0).unwrap();
    let s = d.new_stream().unwrap();
    let mut rng = Rng::from_clock();
    for &(n_rows, n_frames) in &[
        (0usize, 0usize),
        (1, 1),
        (640, 10),
        (300_000, 37),
        (50_000, 1),
    ] {
        let virial = values(&mut rng, 9 * n_rows, 3.0);
        let virial_d = d.htod_copy(&virial).unwrap();
        let what = format!("{n_rows} rows, {n_frames} frames");
        // Ids: a third of the rows in frame 0, the rest spread, frame
        // n_frames - 1 left empty when there are several.
        let ids: Vec<i64> = (0..n_rows)
            .map(|_| {
                if n_frames <= 1 || rng.below(3) == 0 {
                    0
                } else {
                    rng.below(n_frames.max(2) - 1) as i64
                }
            })
            .collect();
        let mut by: Vec<(String, DeviceFrames, Vec<[f64; 9]>)> = Vec::new();
        if let Some(size) = n_rows.checked_div(n_frames) {
            if size > 0 && n_rows % n_frames == 0 {
                by.push((
                    format!("{what}, by size {size}"),
                    DeviceFrames::by_size(&d, n_rows, size).unwrap(),
                    frame_virials(&virial, Frames::Size(size)).unwrap(),
                ));
            }
        }
        let ids32: Vec<i32> = ids.iter().map(|&x| x as i32).collect();
        for (name, frames) in [
            (
                "int64 ids",
                DeviceFrames::by_ids(&s, &d.htod_copy(&ids).unwrap(), n_frames),
            ),
            (
                "int32 ids",
                DeviceFrames::by_ids(&s, &d.htod_copy(&ids32).unwrap(), n_frames),
            ),
        ] {
            by.push((
                format!("{what}, {name}"),
                frames.unwrap(),
                frame_virials(
                    &virial,
                    Frames::Ids {
                        frame_of: &ids,
                        n_frames,
                    },
                )
                .unwrap(),
            ));
        }
        for (what, frames, want) in &by {
            assert_eq!(frames.n_frames(), want.len(), "{what}");
            let want9: Vec<f64> = want.iter().flatten().copied().collect();
            let want6: Vec<f64> = want.iter().flat_map(voigt).collect();
            let mut runs = Vec::new();
            for _ in 0..2 {
                let mut w9 = poisoned(&d, 9 * n_frames, f64::NAN);
                let mut w6 = poisoned(&d, 6 * n_frames, f64::NAN);
                frame_virials_device_into(&s, &virial_d, frames, &mut w9, Some(&mut w6)).unwrap();
                s.synchronize().unwrap();
                let (w9, w6) = (w9.to_vec().unwrap(), w6.to_vec().unwrap());
                let e9 = rel_err(what, &w9, &want9);
                let e6 = rel_err(what, &w6, &want6);
                assert!(e9 <= 1e-13 && e6 <= 1e-13, "{what}: errors {e9:e} {e6:e}");
                runs.push((w9, w6));
            }
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(&runs[0].0) == bits(&runs[1].0) && bits(&runs[0].1) == bits(&runs[1].1),
                "{what}: reruns differ"
            );
            // Without Voigt: the 9 components alone.
            let mut w9 = poisoned(&d, 9 * n_frames, f64::NAN);
            frame_virials_device_into(&s, &virial_d, frames, &mut w9, None).unwrap();
            s.synchronize().unwrap();
            assert!(
                bits(&w9.to_vec().unwrap()) == bits(&runs[0].0),
                "{what}: no-Voigt run"
            );
        }
    }

    // Bad ids: the host's message, outputs untouched.
    let n_rows = 1000;
    let mut ids: Vec<i64> = (0..n_rows).map(|k| (k % 4) as i64).collect();
    ids[613] = 4;
    ids[900] = -1;
    let host = frame_virials(
        &vec![0.0; 9 * n_rows],
        Frames::Ids {
            frame_of: &ids,
            n_frames: 4,
        },
    )
    .unwrap_err()
    .to_string();
    let dev = DeviceFrames::by_ids(&s, &d.htod_copy(&ids).unwrap(), 4)
        .err()
        .expect("bad frame id accepted")
        .to_string();
    assert_eq!(dev, host);
    assert!(dev.contains("frame_of[613] = 4"), "{dev}");
    expect_error(
        DeviceFrames::by_size(&d, 1000, 3).map(|_| ()),
        "1000 rows are not a whole number of frames of 3",
    );
    expect_error(
        DeviceFrames::by_size(&d, 1000, 0).map(|_| ()),
        "frame size 0",
    );
    // Lengths that disagree: nothing written.
    let frames = DeviceFrames::by_size(&d, 1000, 250).unwrap();
    let virial_d = d.htod_copy(&vec![1.0f64; 9 * 999]).unwrap();
    let mut w9 = poisoned(&d, 36, -7.0f64);
    expect_error(
        frame_virials_device_into(&s, &virial_d, &frames, &mut w9, None),
        "virial has 8991 elements but 1000 rows (N×9) need 9000",
    );
    let virial_d = d.htod_copy(&vec![1.0f64; 9 * 1000]).unwrap();
    let mut w6 = poisoned(&d, 23, -7.0f64);
    expect_error(
        frame_virials_device_into(&s, &virial_d, &frames, &mut w9, Some(&mut w6)),
        "frame_voigt has 23 elements but 4 frames (K×6) need 24",
    );
    s.synchronize().unwrap();
    assert!(
        w9.to_vec().unwrap().iter().all(|&x| x == -7.0),
        "frame_virial written"
    );
}
