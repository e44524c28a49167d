//! List 1 evaluator benchmark (device events, warm-up, median of many
//! runs, min..max spread; docs/design/list1.md, docs/design/program.md#benchmarks):
//! every kernel in every layout, the dense layout the peer.
//!
//! Configurations: 3D Laplace q = 3 and q = 4 on the uniform octree of
//! level 5 (32768 leaves) and on a random 2:1-balanced adaptive octree of
//! similar size; 2D Laplace q = 4 on the uniform quadtree of level 8 (65536
//! leaves) and a random adaptive one. Every layout (dense, ORBIT, the
//! fallback on its pure descriptor path — `fallback` — and through its
//! plan-time resolution table — `fallback-res`), all from one
//! symmetry-reduced table per configuration (`ReducedTable::build` at
//! moderate quadrature orders: the timing does not depend on the entries'
//! accuracy; the dense layout is its `reconstruct_full_table_from_symmetry`),
//! so every layout holds the same entry values.
//!
//! Kernels (`List1Kernel`), each through a plan of its own
//! (`list1_internals::plan_with_kernel`): `per-target`, `grouped`, `tiled`,
//! `staged`, `tiled-fma` (tiled and staged need the FP64 tensor cores: a
//! device without them skips them with a note); and `exact`, `fast`: the
//! evaluator's own plan under that contract (`List1Contract`), timed like
//! the others, its chosen kernel in the `runs` column and its reason in the
//! summary. Checked, every output: the dense per-target output bitwise
//! equal to the CPU float64 evaluator's (`evaluate_list1`, once per
//! configuration); every exact kernel's output (per-target, grouped) in
//! every layout bitwise equal to it; every fast kernel's (tiled, staged,
//! tiled-fma) within 1e−13 relative max-norm of it and bitwise equal
//! across layouts (tiled and staged to each other too).
//!
//! Reported per run: median time, spread, ns per target point, FP64
//! multiply-adds per second (counted: per pair and target point q^d
//! products-and-sums of the table sum plus one for scale·acc + disp, plus
//! q^d for the 2D displacement sum), bytes per second two ways: operand
//! bytes (every float64 the sums read: per pair and target point q^d
//! entries and q^d source values, plus the outputs; served mostly by the
//! caches) and compulsory bytes (the table and metadata, the source
//! values, the outputs and the plan once: the DRAM floor) against the
//! measured device copy bandwidth; the bytes each layout uploads; ratios to
//! the dense layout in the same run. Then a summary per configuration and
//! layout: each kernel's median, `exact`'s and `fast`'s, fast over the
//! fastest kernel and exact over grouped.
//! JSON under $HIPKERN_BENCH_OUT (list1.json). Subsets: the comma-separated
//! names in HIPKERN_BENCH_CONFIGS, HIPKERN_BENCH_KERNELS (kernel names,
//! `exact`, `fast`) and HIPKERN_BENCH_LAYOUTS (dense and per-target always
//! run: they are the references).
use hipkern::nearfield::list1_internals::{plan_on_host, plan_with_kernel};
use hipkern::nearfield::{
    evaluate_list1, BalancedTree, EntryQuadrature, Kernel, List1Contract, List1DevicePlan,
    List1Evaluator, List1Kernel, List1Layout, List1Payload, List1ReducedTables, List1Tables,
    RandomTreeConfig, ReducedTable,
};
use hipkern::rng::SplitMix64;
use hipkern::{Device, Stream};
use std::time::Instant;

/// Target time of the repetitions of one measurement (ms), and their bounds.
const TARGET_MS: f64 = 1500.0;
const MIN_REPS: usize = 3;
const MAX_REPS: usize = 30;
/// Plans of a new tree timed per contract and layout (after one warm-up).
const NEW_TREE_REPS: usize = 7;
/// The fast kernels' bound against the reference (relative max-norm).
const FAST_TOL: f64 = 1e-13;

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

/// One bench row: a kernel through a plan of its own, or the evaluator's
/// own plan under a contract.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Run {
    Kernel(List1Kernel),
    Contract(List1Contract),
}

impl Run {
    /// Every run, per-target first (the reference).
    fn all() -> Vec<Run> {
        List1Kernel::ALL
            .into_iter()
            .map(Run::Kernel)
            .chain([
                Run::Contract(List1Contract::Exact),
                Run::Contract(List1Contract::Fast),
            ])
            .collect()
    }

    fn name(self) -> &'static str {
        match self {
            Run::Kernel(k) => k.name(),
            Run::Contract(c) => c.name(),
        }
    }
}

/// The reference slot of a fast kernel's bits: tiled and staged share one
/// (the same products in the same order), tiled-fma has its own.
fn fast_slot(kernel: List1Kernel) -> usize {
    usize::from(kernel == List1Kernel::TiledFma)
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

/// The comma-separated names of `var` (`None`: unset, everything), each
/// checked against `valid`.
fn subset(var: &str, valid: &[&str]) -> Option<Vec<String>> {
    let v = std::env::var(var).ok()?;
    let names: Vec<String> = v
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    for n in &names {
        assert!(
            valid.contains(&n.as_str()),
            "{var}: unknown name '{n}' (valid: {})",
            valid.join(", ")
        );
    }
    Some(names)
}

fn wanted(only: &Option<Vec<String>>, name: &str) -> bool {
    only.as_ref().is_none_or(|o| o.iter().any(|x| x == name))
}

/// One timed row, for the summary.
struct Row {
    config: String,
    layout: &'static str,
    run: Run,
    ms: f64,
    kernel: List1Kernel,
    reason: String,
}

/// What a tiled plan says of its tiles (stderr).
fn tiles_line(plan: &List1DevicePlan) -> String {
    format!(
        "{} boxes per tile, lanes busy {:.3}, {} tiles, at most {} sources per tile (staged), \
         {} key matrices ({} B)",
        plan.targets_per_tile(),
        plan.tiled_lanes_busy(),
        plan.target_tiles(),
        plan.max_tile_sources(),
        plan.key_matrices(),
        plan.key_matrix_bytes()
    )
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
    const CONFIGS: [&str; 6] = [
        "3d-q3-uniform",
        "3d-q3-random",
        "3d-q4-uniform",
        "3d-q4-random",
        "2d-q4-uniform",
        "2d-q4-random",
    ];
    const LAYOUTS: [&str; 4] = ["dense", "orbit", "fallback", "fallback-res"];
    let runs_all = Run::all();
    let run_names: Vec<&str> = runs_all.iter().map(|r| r.name()).collect();
    if std::env::var_os("HIPKERN_BENCH_SCHEDULES").is_some() {
        eprintln!(
            "list1 bench: HIPKERN_BENCH_SCHEDULES is gone (ignored): name kernels in \
             HIPKERN_BENCH_KERNELS ({})",
            run_names.join(",")
        );
    }
    let only = subset("HIPKERN_BENCH_CONFIGS", &CONFIGS);
    // A subset of the runs (per-target always runs: its dense output is
    // the reference).
    let run_only = subset("HIPKERN_BENCH_KERNELS", &run_names);
    // A subset of the layouts (dense always runs: its per-target output is
    // the reference and its times the /dense column's).
    let layout_only = subset("HIPKERN_BENCH_LAYOUTS", &LAYOUTS);
    let runs: Vec<Run> = runs_all
        .iter()
        .copied()
        .filter(|&r| r == Run::Kernel(List1Kernel::PerTarget) || wanted(&run_only, r.name()))
        .collect();
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
    let configs: Vec<Config> = CONFIGS
        .iter()
        .zip([
            (3, &uni3),
            (3, &rnd3),
            (4, &uni3),
            (4, &rnd3),
            (4, &uni2),
            (4, &rnd2),
        ])
        .map(|(name, (q, tree))| Config {
            name: name.to_string(),
            q,
            tree: tree.clone(),
        })
        .collect();
    let mut tables: Vec<((usize, usize), ReducedTable)> = Vec::new();
    let mut rng = SplitMix64::new(0x1157);
    let mut json = Vec::new();
    let mut rows: Vec<Row> = Vec::new();
    let mut new_tree: Vec<String> = Vec::new();
    println!();
    println!(
        "{:<15} {:>6} {:>8} {:<12} {:>10} {:>10} {:>10} {:>19} {:>9} {:>8} {:>9} {:>9} {:>10} {:>10} {:>7}",
        "config",
        "boxes",
        "pairs",
        "layout",
        "kernel",
        "runs",
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
    for cfg in configs.iter().filter(|c| wanted(&only, &c.name)) {
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
        // The host's share of every plan: checking the tree and finding
        // every pair's case (List1Boxes::pairs), median of NEW_TREE_REPS.
        let pairs_ms = stats(
            (0..NEW_TREE_REPS)
                .map(|_| {
                    let t0 = Instant::now();
                    boxes.pairs().unwrap();
                    t0.elapsed().as_secs_f64() * 1e3
                })
                .collect(),
        )
        .0;
        let f: Vec<f64> = (0..cfg.tree.n_boxes() * nq)
            .map(|_| 0.5 + rng.uniform_pm1())
            .collect();
        let fd = device.htod_copy(&f).unwrap();
        // The CPU float64 evaluator on the table's dense reconstruction:
        // the dense per-target output must be it, bit for bit.
        let t0 = Instant::now();
        let dense_table = table.to_dense().unwrap();
        let cpu = evaluate_list1(&boxes, &List1Tables::Scaled(&dense_table), &f).unwrap();
        eprintln!(
            "{}: CPU reference in {:.2} s",
            cfg.name,
            t0.elapsed().as_secs_f64()
        );
        drop(dense_table);
        // The dense per-target output, and per fast slot the first
        // layout's output.
        let mut reference: Option<Vec<f64>> = None;
        let mut fast_reference: [Option<(&str, Vec<f64>)>; 2] = [None, None];
        let mut dense_ms = vec![f64::NAN; runs.len()];
        let variants = [
            (List1Layout::Dense, false, "dense"),
            (List1Layout::Orbit, false, "orbit"),
            (List1Layout::Fallback, false, "fallback"),
            (List1Layout::Fallback, true, "fallback-res"),
        ];
        for (layout, resolved, name) in variants {
            if layout != List1Layout::Dense && !wanted(&layout_only, name) {
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
            let up = ev.upload_bytes();
            for (ri, &run) in runs.iter().enumerate() {
                let what = format!("{} {name} {}", cfg.name, run.name());
                // The plan (wall time: host checks and tiling, uploads, key
                // matrices expanded on the device).
                let t0 = Instant::now();
                let planned = match run {
                    Run::Kernel(k) => plan_with_kernel(&ev, &boxes, k),
                    Run::Contract(c) => {
                        ev.set_contract(c);
                        ev.plan(&boxes)
                    }
                };
                let plan_s = t0.elapsed().as_secs_f64();
                let mut plan = match planned {
                    Ok(p) => p,
                    Err(e) if matches!(run, Run::Kernel(_)) => {
                        // tiled and staged without tensor cores.
                        eprintln!("{what}: skipped ({e})");
                        println!("{what}: skipped, cannot run here");
                        continue;
                    }
                    Err(e) => panic!("{what}: {e}"),
                };
                let kernel = plan.kernel();
                if let Run::Contract(c) = run {
                    assert_eq!(plan.contract(), c, "{what}");
                    assert!(
                        kernel.contract() == List1Contract::Exact || kernel.contract() == c,
                        "{what}: the {kernel} kernel does not keep the {c} contract"
                    );
                    assert!(!plan.reason().is_empty(), "{what}: no reason");
                }
                let n_out = plan.n_targets() * nq;
                let mut out = device.alloc::<f64>(n_out).unwrap();
                stream.fill(&mut out.as_slice_mut(), f64::NAN).unwrap();
                let (ms, lo, hi, reps) = time_ms(&stream, || {
                    ev.evaluate_into(&stream, &mut plan, &fd, &mut out).unwrap()
                });
                let got = out.to_vec().unwrap();
                drop(out);
                let same = |r: &[f64]| r.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits());
                if reference.is_none() {
                    // Dense per-target: the CPU's bits.
                    assert_eq!(run, Run::Kernel(List1Kernel::PerTarget));
                    assert!(
                        got.len() == cpu.len() && same(&cpu),
                        "{what}: differs from the CPU evaluator ({:.2e})",
                        max_relative(&got, &cpu)
                    );
                    reference = Some(got.clone());
                }
                let r = reference.as_deref().unwrap();
                let reference_err = max_relative(&got, r);
                let bitwise = same(r);
                if kernel.contract() == List1Contract::Exact {
                    assert!(
                        bitwise,
                        "{what} ({kernel}): not bitwise the dense per-target output \
                         ({reference_err:.2e})"
                    );
                } else {
                    assert!(
                        reference_err <= FAST_TOL,
                        "{what} ({kernel}): {reference_err:.2e} from dense per-target"
                    );
                    match &fast_reference[fast_slot(kernel)] {
                        None => fast_reference[fast_slot(kernel)] = Some((name, got.clone())),
                        Some((l, fr)) => assert!(
                            same(fr),
                            "{what} ({kernel}): differs from the same arithmetic in {l}"
                        ),
                    }
                }
                let tiled = plan.target_tiles() > 0;
                eprintln!(
                    "{what}: {kernel} ({}), {reference_err:.2e} from dense per-target, planned \
                     in {:.1} ms{}",
                    plan.reason(),
                    plan_s * 1e3,
                    if tiled {
                        format!(", {}", tiles_line(&plan))
                    } else if kernel == List1Kernel::Grouped {
                        format!(", {} chunks", plan.grouped_chunks())
                    } else {
                        String::new()
                    }
                );
                if layout == List1Layout::Dense {
                    dense_ms[ri] = ms;
                }
                let pairs = plan.n_pairs() as f64;
                let points = n_out as f64;
                let fmas = pairs * nq as f64 * (nq as f64 + 1.0)
                    + (plan.displacement_pairs() * nq * nq) as f64;
                let operand_bytes = 8.0 * (2.0 * pairs * (nq * nq) as f64 + points);
                let compulsory = (up.total()
                    + plan.upload_bytes()
                    + plan.key_matrix_bytes()
                    + 8 * cfg.tree.n_boxes() * nq
                    + 8 * n_out) as f64;
                let s = ms * 1e-3;
                println!(
                    "{:<15} {:>6} {:>8} {:<12} {:>10} {:>10} {:>8.3}ms {:>8.3}..{:>8.3}ms {:>9.3} {:>8.1} {:>9.1} {:>9.1} {:>10} {:>10} {:>7.2}",
                    cfg.name,
                    cfg.tree.n_boxes(),
                    plan.n_pairs(),
                    name,
                    run.name(),
                    kernel.name(),
                    ms,
                    lo,
                    hi,
                    ms * 1e6 / points,
                    fmas / s / 1e9,
                    operand_bytes / s / 1e9,
                    compulsory / s / 1e9,
                    up.values,
                    up.descriptors + up.normalizers + up.resolution,
                    ms / dense_ms[ri]
                );
                json.push(format!(
                    "{{\"config\":\"{}\",\"dim\":{dim},\"q\":{q},\"boxes\":{},\"pairs\":{},\"layout\":\"{}\",\"resolved\":{resolved},\"run\":\"{}\",\"kernel\":\"{kernel}\",\"contract\":\"{}\",\"reason\":\"{}\",\"chunks\":{},\"reps\":{reps},\"median_ms\":{ms:.6},\"min_ms\":{lo:.6},\"max_ms\":{hi:.6},\"ns_per_target_point\":{:.4},\"fma\":{fmas},\"fma_per_s\":{:.4e},\"operand_bytes\":{operand_bytes},\"operand_bytes_per_s\":{:.4e},\"compulsory_bytes\":{compulsory},\"compulsory_bytes_per_s\":{:.4e},\"copy_bandwidth_bytes_per_s\":{bw:.4e},\"table_bytes\":{},\"descriptor_bytes\":{},\"normalizer_bytes\":{},\"resolution_bytes\":{},\"plan_bytes\":{},\"plan_s\":{plan_s:.4},\"ratio_to_dense\":{:.4},\"prepare_s\":{prep_s:.3},\"bitwise_equal_to_reference\":{bitwise},\"relative_error_to_dense_per_target\":{reference_err:.3e},\"targets_per_tile\":{},\"target_tiles\":{},\"lanes_busy\":{:.4},\"max_tile_sources\":{},\"key_matrix_bytes\":{}}}",
                    cfg.name,
                    cfg.tree.n_boxes(),
                    plan.n_pairs(),
                    layout.name(),
                    run.name(),
                    plan.contract(),
                    plan.reason().replace('\\', "\\\\").replace('"', "\\\""),
                    plan.grouped_chunks(),
                    ms * 1e6 / points,
                    fmas / s,
                    operand_bytes / s,
                    compulsory / s,
                    up.values,
                    up.descriptors,
                    up.normalizers,
                    up.resolution,
                    plan.upload_bytes(),
                    ms / dense_ms[ri],
                    plan.targets_per_tile(),
                    plan.target_tiles(),
                    plan.tiled_lanes_busy(),
                    plan.max_tile_sources(),
                    plan.key_matrix_bytes()
                ));
                rows.push(Row {
                    config: cfg.name.clone(),
                    layout: name,
                    run,
                    ms,
                    kernel,
                    reason: plan.reason().to_string(),
                });
            }
            // A new tree to potential under each contract: plan and first
            // evaluation, wall time to the stream's end (median of
            // NEW_TREE_REPS after one warm-up; the output is the caller's).
            let n_out = targets.len() * nq;
            let mut out = device.alloc::<f64>(n_out).unwrap();
            // The exact plan twice: built on the device (the evaluator's
            // own) and on the host (the path before, its peer in this run).
            for (contract, on_host) in [
                (List1Contract::Exact, false),
                (List1Contract::Exact, true),
                (List1Contract::Fast, false),
            ] {
                ev.set_contract(contract);
                let (mut plan_ms, mut total_ms) = (Vec::new(), Vec::new());
                let mut kernel = None;
                let mut where_built = "";
                for rep in 0..=NEW_TREE_REPS {
                    stream.fill(&mut out.as_slice_mut(), f64::NAN).unwrap();
                    stream.synchronize().unwrap();
                    let t0 = Instant::now();
                    let mut plan = if on_host {
                        plan_on_host(&ev, &boxes, List1Kernel::Grouped).unwrap()
                    } else {
                        ev.plan(&boxes).unwrap()
                    };
                    where_built = if plan.built_on_device() {
                        "device"
                    } else {
                        "host"
                    };
                    let planned = t0.elapsed().as_secs_f64() * 1e3;
                    ev.evaluate_into(&stream, &mut plan, &fd, &mut out).unwrap();
                    stream.synchronize().unwrap();
                    let total = t0.elapsed().as_secs_f64() * 1e3;
                    kernel = Some(plan.kernel());
                    if rep > 0 {
                        plan_ms.push(planned);
                        total_ms.push(total);
                    }
                }
                let got = out.to_vec().unwrap();
                let r = reference.as_deref().unwrap();
                let err = max_relative(&got, r);
                let what = format!("{} {name} new tree {contract}", cfg.name);
                if contract == List1Contract::Exact {
                    assert!(
                        got.iter().zip(r).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{what}: not bitwise the dense per-target output ({err:.2e})"
                    );
                } else {
                    assert!(err <= FAST_TOL, "{what}: {err:.2e} from dense per-target");
                }
                let (p, _, _) = stats(plan_ms);
                let (t, lo, hi) = stats(total_ms);
                new_tree.push(format!(
                    "{:<15} {:<12} {:<6} {:<10} {:<6} {:>9.2}ms {:>9.2}ms {:>9.2}ms {:>7.2}..{:>7.2}ms",
                    cfg.name,
                    name,
                    contract.to_string(),
                    kernel.unwrap().name(),
                    where_built,
                    pairs_ms,
                    p,
                    t,
                    lo,
                    hi
                ));
            }
            ev.set_contract(List1Contract::Fast);
        }
    }
    println!();
    println!(
        "new tree to potential: plan + first evaluation, wall time to the stream's end, median \
         of {NEW_TREE_REPS} after a warm-up (the plan alone beside it, and the host's check and \
         classification of the pairs: the host plan's share); the exact plan built where the \
         evaluator builds it (device) and on the host (the path before, timed beside it)"
    );
    println!(
        "{:<15} {:<12} {:<6} {:<10} {:<6} {:>11} {:>11} {:>11} {:>18}",
        "config", "layout", "contract", "kernel", "built", "pairs", "plan", "plan+eval", "spread"
    );
    for line in &new_tree {
        println!("{line}");
    }
    println!();
    println!(
        "opGB/s: float64 operands the sums read (cached); minGB/s: table + metadata + values + \
         outputs + plan (and key matrices) once, against {:.2} TB/s copy bandwidth; /dense: time \
         over the dense layout's in the same run. Kernels: per-target (32 lanes a target box), \
         grouped (a case matrix per group of pairs of one key, one chunk per 256 MiB of pair \
         products), tiled (64 boxes a tile, FP64 tensor cores), staged (32 boxes a tile, each \
         tile's sources loaded once, tensor cores), tiled-fma (32 boxes a tile, FMAs); the \
         compact layouts' tiled plans read their keys' case matrices, expanded once per plan. \
         exact / fast: the evaluator's own plan under that contract, `runs` its kernel. \
         per-target and grouped: bitwise the CPU; tiled, staged, tiled-fma: keys in order, \
         bitwise equal across layouts (tiled and staged to each other), to rounding against \
         the CPU",
        bw / 1e12
    );
    summary(&rows);
    if let Ok(dir) = std::env::var("HIPKERN_BENCH_OUT") {
        let _ = std::fs::write(
            format!("{dir}/list1.json"),
            format!("[{}]\n", json.join(",\n")),
        );
    }
}

/// Per configuration and layout: the median ms of each kernel, of `exact`
/// and `fast` (and the kernel each ran), fast over the fastest kernel,
/// exact over grouped; then the contract plans' reasons.
fn summary(rows: &[Row]) {
    println!();
    println!("summary: median ms per configuration and layout ('-': not run)");
    let cols: Vec<Run> = Run::all();
    let mut head = format!("{:<15} {:<12}", "config", "layout");
    for c in &cols {
        head.push_str(&format!(" {:>10}", c.name()));
    }
    println!(
        "{head} {:>9} {:>11} {:>10} {:>10}",
        "fast/best", "exact/grp", "exact runs", "fast runs"
    );
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if !keys.contains(&(r.config.as_str(), r.layout)) {
            keys.push((r.config.as_str(), r.layout));
        }
    }
    let mut reasons = Vec::new();
    for (config, layout) in keys {
        let find = |run: Run| {
            rows.iter()
                .find(|r| r.config == config && r.layout == layout && r.run == run)
        };
        let ms = |run: Run| find(run).map(|r| r.ms);
        let mut line = format!("{config:<15} {layout:<12}");
        for &c in &cols {
            match ms(c) {
                Some(v) => line.push_str(&format!(" {v:>10.3}")),
                None => line.push_str(&format!(" {:>10}", "-")),
            }
        }
        let best = List1Kernel::ALL
            .into_iter()
            .filter_map(|k| ms(Run::Kernel(k)))
            .fold(f64::INFINITY, f64::min);
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b.is_finite() && b > 0.0 => format!("{:.2}", a / b),
            _ => "-".to_string(),
        };
        let fast = Run::Contract(List1Contract::Fast);
        let exact = Run::Contract(List1Contract::Exact);
        let grouped = Run::Kernel(List1Kernel::Grouped);
        let runs_of = |run: Run| find(run).map_or("-", |r| r.kernel.name());
        println!(
            "{line} {:>9} {:>11} {:>10} {:>10}",
            ratio(ms(fast), Some(best)),
            ratio(ms(exact), ms(grouped)),
            runs_of(exact),
            runs_of(fast)
        );
        for run in [exact, fast] {
            if let Some(r) = find(run) {
                reasons.push(format!(
                    "{config} {layout} {}: {} ({})",
                    run.name(),
                    r.kernel,
                    r.reason
                ));
            }
        }
    }
    if !reasons.is_empty() {
        println!();
        println!("plans under each contract (kernel, reason):");
        for r in reasons {
            println!("  {r}");
        }
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
