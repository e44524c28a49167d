//! List 1 evaluator benchmark (device events, warm-up, median of many
//! runs, min..max spread; docs/design/list1.md, docs/design/program.md#benchmarks):
//! the dense layout is the peer.
//!
//! Configurations: 3D Laplace q = 3 and q = 4 on the uniform octree of
//! level 5 (32768 leaves) and on a random 2:1-balanced adaptive octree of
//! similar size; 2D Laplace q = 4 on the uniform quadtree of level 8 (65536
//! leaves) and a random adaptive one. Every layout (dense, ORBIT, the
//! fallback on its pure descriptor path — `fallback` — and through its
//! plan-time resolution table — `fallback-res`) at list1_target_batch_size
//! 1 and 32, all from one symmetry-reduced table
//! per configuration (`ReducedTable::build` at moderate quadrature orders:
//! the timing does not depend on the entries' accuracy; the dense layout is
//! its `reconstruct_full_table_from_symmetry`), so every layout holds the
//! same entry values and every output must equal the dense batch-1 output
//! bit for bit (checked, printed).
//!
//! Reported per run: median time, spread, ns per target point, FP64
//! multiply-adds per second (counted: per pair and target point q^d
//! products-and-sums of the table sum plus one for scale·acc + disp, plus
//! q^d for the 2D displacement sum; the kernel issues them as separate
//! correctly rounded multiplies and adds, never fused), bytes per second two
//! ways: operand bytes (every float64 the sums read: per pair and target
//! point q^d entries and q^d source values, plus the outputs; served mostly
//! by the caches) and compulsory bytes (the table and metadata, the source
//! values, the outputs and the plan once: the DRAM floor) against the
//! measured device copy bandwidth; the bytes each layout uploads; ratios to
//! the dense layout at the same batch size.
//! JSON under $HIPKERN_BENCH_OUT (list1.json). Subsets: the comma-separated
//! names in HIPKERN_BENCH_CONFIGS, HIPKERN_BENCH_SCHEDULES and
//! HIPKERN_BENCH_LAYOUTS (dense and b1 always run: they are the
//! references).
use hipkern::nearfield::{
    BalancedTree, EntryQuadrature, Kernel, List1Evaluator, List1Layout, List1Payload,
    List1ReducedTables, List1Schedule, List1SourceStaging, RandomTreeConfig, ReducedTable,
    DEFAULT_PAIR_SCRATCH_BYTES,
};
use hipkern::rng::SplitMix64;
use hipkern::{Device, Stream};
use std::time::Instant;

/// Target time of the repetitions of one measurement (ms), and their bounds.
const TARGET_MS: f64 = 1500.0;
const MIN_REPS: usize = 3;
const MAX_REPS: usize = 30;

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// Device-event timing: one untimed run (warm-up and size probe), then a
/// second warm-up when cheap, then as many repetitions as fit TARGET_MS
/// (MIN_REPS..=MAX_REPS). Returns (median, min, max, reps).
fn time_ms(stream: &Stream, mut f: impl FnMut()) -> (f64, f64, f64, usize) {
    let a = stream.record_event().unwrap();
    f();
    let b = stream.record_event().unwrap();
    b.synchronize().unwrap();
    let probe = f64::from(a.elapsed_ms(&b).unwrap());
    if probe < 200.0 {
        f();
    }
    stream.synchronize().unwrap();
    let reps = ((TARGET_MS / probe.max(1e-3)) as usize).clamp(MIN_REPS, MAX_REPS);
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let a = stream.record_event().unwrap();
        f();
        let b = stream.record_event().unwrap();
        b.synchronize().unwrap();
        t.push(f64::from(a.elapsed_ms(&b).unwrap()));
    }
    let (m, lo, hi) = stats(t);
    (m, lo, hi, reps)
}

/// The tiled schedule's kernel in one bench row (all the same bits but
/// `Fma`'s, which has its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tiled {
    /// Not the tiled schedule.
    No,
    /// Tensor cores, per-key staged (`tN`).
    PerKey,
    /// Tensor cores, source-staged, ORBIT and fallback reading their keys'
    /// case matrices (`sN`).
    Staged,
    /// The same decoding the layout per tile and key (`dN`).
    StagedDecoding,
    /// FMAs only (`fN`).
    Fma,
    /// The evaluator's defaults: staging chosen per plan, default widths.
    Auto,
}

/// One bench row's schedule.
#[derive(Clone, Copy, Debug)]
struct Run {
    name: &'static str,
    schedule: List1Schedule,
    batch: usize,
    scratch: usize,
    tiled: Tiled,
    /// Target boxes per tile (`None`: the evaluator's defaults).
    width: Option<usize>,
}

impl Run {
    fn untiled(name: &'static str, schedule: List1Schedule, batch: usize, scratch: usize) -> Run {
        Run {
            name,
            schedule,
            batch,
            scratch,
            tiled: Tiled::No,
            width: None,
        }
    }

    fn tiled(name: &'static str, tiled: Tiled, width: Option<usize>) -> Run {
        Run {
            name,
            schedule: List1Schedule::TargetTiled,
            batch: 1,
            scratch: DEFAULT_PAIR_SCRATCH_BYTES,
            tiled,
            width,
        }
    }
}

struct Config {
    name: String,
    q: usize,
    tree: BalancedTree,
}

fn random_tree(dim: usize, seed: u64, max_level: u32, p: f64) -> BalancedTree {
    let mut cfg = RandomTreeConfig::new(dim, seed, max_level);
    cfg.refine_probability = p;
    BalancedTree::random(&cfg).unwrap()
}

fn main() {
    let device = match Device::new(0) {
        Ok(d) => d,
        Err(e) => {
            println!("list1 bench: no device ({e}); nothing to time");
            return;
        }
    };
    let stream = device.new_stream().unwrap();
    println!(
        "device: {} ({})",
        device.properties().name,
        device.properties().arch_name
    );
    // Copy bandwidth: 1 GiB device-to-device, bytes read + written.
    let n = 1usize << 27;
    let src = device.alloc_zeroed::<f64>(n).unwrap();
    let mut dst = device.alloc::<f64>(n).unwrap();
    let (copy_ms, _, _, _) = time_ms(&stream, || {
        stream
            .copy_dtod_async(&src.as_slice(), &mut dst.as_slice_mut())
            .unwrap()
    });
    let bw = 2.0 * (n * 8) as f64 / (copy_ms * 1e-3);
    println!(
        "copy bandwidth: {:.2} TB/s (1 GiB dtod, read+write, median {copy_ms:.3} ms)",
        bw / 1e12
    );
    drop((src, dst));

    let quad = EntryQuadrature {
        radial_level: 3,
        angular_order: 10,
    };
    println!(
        "tables: ReducedTable::build, radial level {}, angular order {} (timing only)",
        quad.radial_level, quad.angular_order
    );
    let only = std::env::var("HIPKERN_BENCH_CONFIGS").ok();
    // A comma-separated subset of the schedules (b1 always runs).
    let sched_only = std::env::var("HIPKERN_BENCH_SCHEDULES").ok();
    // A comma-separated subset of the layouts (dense always runs: its b1
    // is the reference and its times the /dense column's).
    let layout_only = std::env::var("HIPKERN_BENCH_LAYOUTS").ok();
    let t0 = Instant::now();
    let uni3 = BalancedTree::uniform(3, 5, &[0.0; 3], 1.0).unwrap();
    let rnd3 = random_tree(3, 1, 6, 0.3);
    let uni2 = BalancedTree::uniform(2, 8, &[0.0; 2], 1.0).unwrap();
    let rnd2 = random_tree(2, 3, 10, 0.55);
    println!(
        "trees: {:.2} s (3D uniform {} boxes, 3D random {} boxes, 2D uniform {}, 2D random {})",
        t0.elapsed().as_secs_f64(),
        uni3.n_boxes(),
        rnd3.n_boxes(),
        uni2.n_boxes(),
        rnd2.n_boxes()
    );
    let configs = vec![
        Config {
            name: "3d-q3-uniform".into(),
            q: 3,
            tree: uni3.clone(),
        },
        Config {
            name: "3d-q3-random".into(),
            q: 3,
            tree: rnd3.clone(),
        },
        Config {
            name: "3d-q4-uniform".into(),
            q: 4,
            tree: uni3,
        },
        Config {
            name: "3d-q4-random".into(),
            q: 4,
            tree: rnd3,
        },
        Config {
            name: "2d-q4-uniform".into(),
            q: 4,
            tree: uni2,
        },
        Config {
            name: "2d-q4-random".into(),
            q: 4,
            tree: rnd2,
        },
    ];
    let mut tables: Vec<((usize, usize), ReducedTable)> = Vec::new();
    let mut rng = SplitMix64::new(0x1157);
    let mut json = Vec::new();
    println!();
    println!(
        "{:<15} {:>6} {:>8} {:<12} {:>6} {:>10} {:>19} {:>9} {:>8} {:>9} {:>9} {:>10} {:>10} {:>7}",
        "config",
        "boxes",
        "pairs",
        "layout",
        "sched",
        "median",
        "spread",
        "ns/point",
        "GFMA/s",
        "opGB/s",
        "minGB/s",
        "table B",
        "meta B",
        "/dense"
    );
    for cfg in &configs {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|x| x == cfg.name))
        {
            continue;
        }
        let dim = cfg.tree.dim();
        let q = cfg.q;
        let nq = q.pow(dim as u32);
        let key = (dim, q);
        if !tables.iter().any(|(k, _)| *k == key) {
            let t0 = Instant::now();
            let k = Kernel::laplace(dim).unwrap();
            let t = ReducedTable::build(&k, q, 1.0, &quad).unwrap();
            eprintln!(
                "table {dim}D q={q}: {} rows, {:.2} s",
                t.reduced_data().len(),
                t0.elapsed().as_secs_f64()
            );
            tables.push((key, t));
        }
        let table = &tables.iter().find(|(k, _)| *k == key).unwrap().1;
        let view = List1ReducedTables::Scaled(table);
        let targets = cfg.tree.all_boxes();
        let boxes = cfg.tree.list1_boxes(&targets);
        let f: Vec<f64> = (0..cfg.tree.n_boxes() * nq)
            .map(|_| 0.5 + rng.uniform_pm1())
            .collect();
        let fd = device.htod_copy(&f).unwrap();
        let mut reference: Option<Vec<f64>> = None;
        // Per schedule: the per-target one at batch 1 and 32, the grouped
        // one with the default scratch bound and with 32 MiB (chunks whose
        // pair products stay in L2), the tiled one at 64, 32 and 128 target
        // boxes per tile in each of its kernels, and auto (the evaluator's
        // defaults: staging chosen per plan, default widths).
        const S: usize = DEFAULT_PAIR_SCRATCH_BYTES;
        use Tiled::*;
        let tiled_runs = |kind: Tiled, prefix: &'static [&'static str; 3]| {
            [64, 32, 128]
                .into_iter()
                .zip(prefix.iter())
                .map(move |(w, &n)| Run::tiled(n, kind, Some(w)))
        };
        let all_schedules: Vec<Run> = [
            Run::untiled("b1", List1Schedule::PerTarget, 1, S),
            Run::untiled("b32", List1Schedule::PerTarget, 32, S),
            Run::untiled("grp", List1Schedule::CaseGrouped, 1, S),
            Run::untiled("grp32M", List1Schedule::CaseGrouped, 1, 32 << 20),
        ]
        .into_iter()
        .chain(tiled_runs(PerKey, &["t64", "t32", "t128"]))
        .chain(tiled_runs(Staged, &["s64", "s32", "s128"]))
        .chain(tiled_runs(StagedDecoding, &["d64", "d32", "d128"]))
        .chain(tiled_runs(Fma, &["f64", "f32", "f128"]))
        .chain(std::iter::once(Run::tiled("auto", Auto, None)))
        .collect();
        // b1 always runs first: it is the bitwise reference.
        let schedules: Vec<_> = all_schedules
            .iter()
            .copied()
            .filter(|r| {
                r.name == "b1"
                    || sched_only
                        .as_deref()
                        .is_none_or(|o| o.split(',').any(|x| x == r.name))
            })
            .collect();
        let mut dense_ms = vec![0.0f64; schedules.len()];
        let mut tiled_reference: [Option<Vec<f64>>; 2] = [None, None];
        let variants = [
            (List1Layout::Dense, false, "dense"),
            (List1Layout::Orbit, false, "orbit"),
            (List1Layout::Fallback, false, "fallback"),
            (List1Layout::Fallback, true, "fallback-res"),
        ];
        for (layout, resolved, name) in variants {
            if layout != List1Layout::Dense
                && layout_only
                    .as_deref()
                    .is_some_and(|o| !o.split(',').any(|x| x == name))
            {
                continue;
            }
            let t0 = Instant::now();
            let mut payload = List1Payload::from_reduced(&view, layout).unwrap();
            if layout == List1Layout::Fallback && !resolved {
                payload = payload.without_fallback_resolution();
            }
            let mut ev = List1Evaluator::new(&device, &payload).unwrap();
            let prep_s = t0.elapsed().as_secs_f64();
            assert_eq!(ev.fallback_resolved(), resolved, "{} {name}", cfg.name);
            let mut plan = ev.plan(&boxes).unwrap();
            // The tiled kernel and width the plan was made for (the
            // evaluator's defaults: auto).
            let mut plan_kind = Tiled::Auto;
            let mut plan_width: Option<usize> = None;
            // Wall time of the last plan (host tiling, uploads, key
            // matrices expanded on the device).
            let mut plan_s = 0.0;
            let up = ev.upload_bytes();
            let n_out = plan.n_targets() * nq;
            let mut out = device.alloc::<f64>(n_out).unwrap();
            let pairs = plan.n_pairs() as f64;
            let points = n_out as f64;
            let fmas = pairs * nq as f64 * (nq as f64 + 1.0)
                + (plan.displacement_pairs() * nq * nq) as f64;
            let operand_bytes = 8.0 * (2.0 * pairs * (nq * nq) as f64 + points);
            let compulsory =
                (up.total() + plan.upload_bytes() + 8 * cfg.tree.n_boxes() * nq + 8 * n_out) as f64;
            for (bi, run) in schedules.iter().enumerate() {
                let sched = run.name;
                let tiled = run.schedule == List1Schedule::TargetTiled;
                ev.set_tiled_tensor_cores(run.tiled != Fma);
                ev.set_tiled_source_staging(match run.tiled {
                    Staged | StagedDecoding => List1SourceStaging::On,
                    Auto => List1SourceStaging::Auto,
                    _ => List1SourceStaging::Off,
                });
                ev.set_tiled_key_matrices(run.tiled != StagedDecoding);
                ev.set_target_batch_size(run.batch).unwrap();
                ev.set_schedule(run.schedule).unwrap();
                let replan = tiled && (run.tiled != plan_kind || run.width != plan_width);
                if run.scratch != ev.pair_scratch_bytes() || replan {
                    ev.set_pair_scratch_bytes(run.scratch).unwrap();
                    ev.set_targets_per_tile(run.width).unwrap();
                    let t0 = Instant::now();
                    plan = ev.plan(&boxes).unwrap();
                    plan_s = t0.elapsed().as_secs_f64();
                    plan_kind = run.tiled;
                    plan_width = run.width;
                }
                stream.fill(&mut out.as_slice_mut(), f64::NAN).unwrap();
                let (ms, lo, hi, reps) = time_ms(&stream, || {
                    ev.evaluate_into(&stream, &mut plan, &fd, &mut out).unwrap()
                });
                let got = out.to_vec().unwrap();
                // The bitwise schedules against dense batch 1; the tiled
                // one against the first tiled run, bitwise, and against
                // dense batch 1 to rounding (printed).
                let same_as =
                    |r: &Vec<f64>| r.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits());
                let reference_err = reference.as_ref().map_or(0.0, |r| max_relative(&got, r));
                let same = match if tiled {
                    &mut tiled_reference[usize::from(run.tiled == Fma)]
                } else {
                    &mut reference
                } {
                    slot @ None => {
                        assert!(
                            got.iter().all(|x| x.is_finite()),
                            "{}: non-finite",
                            cfg.name
                        );
                        *slot = Some(got);
                        true
                    }
                    Some(r) => same_as(r),
                };
                assert!(
                    same,
                    "{} {name} {sched}: output differs from {}",
                    cfg.name,
                    if tiled {
                        "the first tiled run"
                    } else {
                        "dense batch 1"
                    }
                );
                assert!(
                    reference_err <= 1e-13,
                    "{} {name} {sched}: {reference_err:.2e} from dense batch 1",
                    cfg.name
                );
                if tiled {
                    eprintln!(
                        "{} {name} {sched}: {reference_err:.2e} from dense batch 1 (max-norm \
                         relative), {} at {} boxes per tile, lanes busy {:.3}, {} tiles, at \
                         most {} sources per tile, {} key matrices ({} B), planned in {:.1} ms",
                        cfg.name,
                        if plan.tiled_for_source_staging() {
                            "source-staged"
                        } else {
                            "per-key"
                        },
                        plan.targets_per_tile(),
                        plan.tiled_lanes_busy(),
                        plan.target_tiles(),
                        plan.max_tile_sources(),
                        plan.key_matrices(),
                        plan.key_matrix_bytes(),
                        plan_s * 1e3
                    );
                }
                if layout == List1Layout::Dense {
                    dense_ms[bi] = ms;
                }
                let s = ms * 1e-3;
                println!(
                    "{:<15} {:>6} {:>8} {:<12} {:>6} {:>8.3}ms {:>8.3}..{:>8.3}ms {:>9.3} {:>8.1} {:>9.1} {:>9.1} {:>10} {:>10} {:>7.2}",
                    cfg.name,
                    cfg.tree.n_boxes(),
                    plan.n_pairs(),
                    name,
                    sched,
                    ms,
                    lo,
                    hi,
                    ms * 1e6 / points,
                    fmas / s / 1e9,
                    operand_bytes / s / 1e9,
                    compulsory / s / 1e9,
                    up.values,
                    up.descriptors + up.normalizers + up.resolution,
                    ms / dense_ms[bi]
                );
                json.push(format!(
                    "{{\"config\":\"{}\",\"dim\":{dim},\"q\":{q},\"boxes\":{},\"pairs\":{},\"layout\":\"{}\",\"resolved\":{resolved},\"schedule\":\"{sched}\",\"chunks\":{},\"reps\":{reps},\"median_ms\":{ms:.6},\"min_ms\":{lo:.6},\"max_ms\":{hi:.6},\"ns_per_target_point\":{:.4},\"fma\":{fmas},\"fma_per_s\":{:.4e},\"operand_bytes\":{operand_bytes},\"operand_bytes_per_s\":{:.4e},\"compulsory_bytes\":{compulsory},\"compulsory_bytes_per_s\":{:.4e},\"copy_bandwidth_bytes_per_s\":{bw:.4e},\"table_bytes\":{},\"descriptor_bytes\":{},\"normalizer_bytes\":{},\"resolution_bytes\":{},\"plan_bytes\":{},\"ratio_to_dense\":{:.4},\"prepare_s\":{prep_s:.3},\"bitwise_equal_to_reference\":{same},\"relative_error_to_dense_b1\":{reference_err:.3e},\"tile_slots\":{},\"targets_per_tile\":{},\"source_staged\":{},\"key_matrix_bytes\":{}}}",
                    cfg.name,
                    cfg.tree.n_boxes(),
                    plan.n_pairs(),
                    layout.name(),
                    if run.schedule == List1Schedule::CaseGrouped { plan.grouped_chunks() } else { 0 },
                    ms * 1e6 / points,
                    fmas / s,
                    operand_bytes / s,
                    compulsory / s,
                    up.values,
                    up.descriptors,
                    up.normalizers,
                    up.resolution,
                    plan.upload_bytes(),
                    ms / dense_ms[bi],
                    if tiled { plan.tile_slots() } else { 0 },
                    if tiled { plan.targets_per_tile() } else { 0 },
                    tiled && plan.tiled_for_source_staging(),
                    if tiled { plan.key_matrix_bytes() } else { 0 }
                ));
            }
        }
    }
    println!();
    println!(
        "opGB/s: float64 operands the sums read (cached); minGB/s: table + metadata + values + \
         outputs + plan once, against {:.2} TB/s copy bandwidth; /dense: time over the dense \
         layout's in the same schedule (b1/b32: per-target, batch 1/32; grp: case-grouped, one \
         chunk per 256 MiB of pair products; grp32M: 32 MiB chunks; t64/t32/t128: target-tiled, \
         64/32/128 boxes per tile on the FP64 tensor cores where the device has them, s64/s32/s128 \
         the same source-staged (ORBIT and fallback reading their keys' case matrices, expanded \
         once per plan), d64/d32/d128 source-staged decoding the layout per tile, f64/f32/f128 \
         per-key with FMAs, auto: the evaluator's defaults (staged or per-key by lanes busy, \
         default widths); keys in order: bitwise equal across layouts, widths and kernels, to \
         rounding against b1)",
        bw / 1e12
    );
    if let Ok(dir) = std::env::var("HIPKERN_BENCH_OUT") {
        let _ = std::fs::write(
            format!("{dir}/list1.json"),
            format!("[{}]\n", json.join(",\n")),
        );
    }
}

/// max |got − want| / max |want| (∞ for a NaN or a length mismatch).
fn max_relative(got: &[f64], want: &[f64]) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    let mut num = 0.0f64;
    let mut den = 0.0f64;
    for (g, w) in got.iter().zip(want) {
        let d = (g - w).abs();
        if d.is_nan() {
            return f64::INFINITY;
        }
        num = num.max(d);
        den = den.max(w.abs());
    }
    if den > 0.0 {
        num / den
    } else {
        num
    }
}
