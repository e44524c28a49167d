//! `hipkern demo`: the main job (SPEC §8). Every primitive once, on the
//! device when there is one (else the CPU backend), each checked against
//! its float64 CPU reference, then a summary table.
//!
//! 1. The 3D Laplace q = 3 symmetry-reduced near-field table, read from the
//!    SQLite cache (`--cache`, default `$XDG_CACHE_HOME/hipkern/tables.db`,
//!    else `~/.cache/hipkern/tables.db`) or built and stored there.
//! 2. List 1 of that table over a generated 2:1-balanced adaptive octree
//!    (`random:2026:LEVELS`), the smooth default density of `hipkern
//!    nearfield list1`; the device uses the arithmetic ORBIT layout, the
//!    reference is the CPU evaluator over the expanded table.
//! 3. Forces and per-atom virials for a generated periodic system: atoms
//!    uniform in a cubic box, ghost atoms for the periodic images within
//!    the cutoff (folded into their owners by the ghost mapping), a
//!    neighbour list by cells, per-edge gradients of a smooth pair energy;
//!    the device builds the plan and assembles; the reference is the
//!    direct float64 edge loop.
//! 4. The dense PSF fixture (65,536 events, 3840×2160) replayed in the
//!    `adaptive` device mode (CPU backend: the row-parallel sink); the
//!    reference is the serial CPU sink; the image written as FITS and PNG.
//!
//! Sizes: `--size full` on a device, `small` on the CPU backend (under two
//! minutes on two cores); `--size` overrides.
use super::output::{OutputId, OutputSet};
use super::Failure;
use hipkern::force::{
    assemble_device, assemble_reference_f64, assemble_with_plan, CsrPlan, DevicePlan, GhostMapping,
    VirialSplit,
};
use hipkern::nearfield::{
    evaluate_list1, BalancedTree, EntryQuadrature, Kernel, List1Tables, RandomTreeConfig,
    ReducedTable, TableCache,
};
use hipkern::psf::{
    fixtures, write_fits_new, write_png_to, CpuSink, DeviceSink, ImageMeta, MoffatPsf, PsfCache,
    SinkMode, CHUNK_EVENTS,
};
use hipkern::rng::SplitMix64;
use hipkern::{Device, Event};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Flags of `hipkern demo`.
#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// SQLite table cache (created if missing) [default:
    /// $XDG_CACHE_HOME/hipkern/tables.db, else ~/.cache/hipkern/tables.db].
    #[arg(long, value_name = "FILE.db")]
    cache: Option<PathBuf>,
    /// Folder for the image (demo-dense.fits, demo-dense.png); created if missing.
    #[arg(long, value_name = "DIR", default_value = "hipkern-demo")]
    out_dir: PathBuf,
    /// auto (the device when one is usable, else the CPU), device or cpu.
    #[arg(long, value_name = "auto|device|cpu", default_value = "auto")]
    backend: String,
    /// small or full [default: full on a device, small on the CPU].
    #[arg(long, value_name = "small|full")]
    size: Option<String>,
    /// Builds the table even when the cache has it, and replaces the
    /// cache's entry (the way out of a corrupt entry).
    #[arg(long)]
    rebuild: bool,
}

/// Relative max-norm error accepted for List 1 and the forces (they sum in
/// another order than their references).
const TOL: f64 = 1e-12;
/// SPEC §7's PSF tolerance (the acceptance's max_rel, among its tests).
const PSF_TOL: f64 = 1e-10;

/// One row of the summary.
struct Row {
    step: &'static str,
    backend: String,
    size: String,
    seconds: f64,
    /// Relative max-norm error against the reference, if there is one.
    error: Option<f64>,
    /// The error accepted.
    tol: f64,
    note: String,
}

/// The default cache file.
fn default_cache() -> Result<PathBuf, Failure> {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".cache"),
            None => {
                return Err(Failure::environment(
                    "neither XDG_CACHE_HOME nor HOME is set: give --cache FILE.db",
                ))
            }
        },
    };
    Ok(base.join("hipkern").join("tables.db"))
}

fn spinner(msg: &str) -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    pb.set_style(ProgressStyle::with_template("{spinner} {msg} [{elapsed}]").expect("template"));
    pb.set_message(msg.to_string());
    pb.enable_steady_tick(Duration::from_millis(120));
    pb
}

fn bar(len: u64, msg: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} [{elapsed}]")
            .expect("template")
            .progress_chars("=> "),
    );
    pb.set_message(msg.to_string());
    pb
}

/// Step 1: the table, from the cache or built.
fn table_step(
    cache_path: &Path,
    rebuild: bool,
    rows: &mut Vec<Row>,
) -> Result<ReducedTable, Failure> {
    let kernel = Kernel::laplace(3)?;
    let quad = EntryQuadrature::default();
    let cache_err = |e| super::nearfield::cache_failure(cache_path, e);
    let cache = TableCache::open(cache_path).map_err(cache_err)?;
    let start = Instant::now();
    let pb = spinner("table: 3D Laplace q=3, symmetry-reduced");
    let cached = if rebuild {
        None
    } else {
        cache
            .get_reduced(&kernel, 3, 1.0, &quad)
            .map_err(cache_err)?
    };
    let (table, how) = match cached {
        Some(t) => (t, "read from the cache"),
        None => {
            let t = ReducedTable::build(&kernel, 3, 1.0, &quad)?;
            cache.put_reduced(&t).map_err(cache_err)?;
            (t, "built and stored")
        }
    };
    pb.finish_and_clear();
    rows.push(Row {
        step: "near-field table",
        backend: "cpu".into(),
        size: format!(
            "{} of {} entries",
            table.reduced_entry_ids().len(),
            table.n_full_entries()
        ),
        seconds: start.elapsed().as_secs_f64(),
        error: None,
        tol: 0.0,
        note: format!("{how}: {}", cache_path.display()),
    });
    Ok(table)
}

/// Step 2: List 1 over a random adaptive octree.
fn list1_step(
    device: Option<&Device>,
    reduced: &ReducedTable,
    levels: u32,
    rows: &mut Vec<Row>,
) -> Result<(), Failure> {
    let tree = BalancedTree::random(&RandomTreeConfig::new(3, 2026, levels))?;
    let points = tree.box_points(3)?;
    let density: Vec<f64> = points
        .chunks_exact(3)
        .map(super::list1::default_density)
        .collect();
    let dense = reduced.to_dense()?;
    let targets = tree.all_boxes();
    let boxes = tree.list1_boxes(&targets);
    let pb = spinner("List 1: CPU float64 reference");
    let start = Instant::now();
    let reference = evaluate_list1(&boxes, &List1Tables::Scaled(&dense), &density)?;
    let cpu_seconds = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let size = format!(
        "{} leaves, {} pairs, {} points",
        tree.n_boxes(),
        tree.list1_sources().len(),
        density.len()
    );
    let Some(device) = device else {
        rows.push(Row {
            step: "List 1 (3D Laplace q=3)",
            backend: "cpu".into(),
            size,
            seconds: cpu_seconds,
            // Nothing to compare: this is the reference itself.
            error: None,
            tol: TOL,
            note: "the CPU evaluator is the reference (no second result to check)".into(),
        });
        return Ok(());
    };
    let pb = spinner("List 1: device, ORBIT layout");
    // The `nearfield list1 --backend device` path: one warm-up, the median
    // of several runs (device events), the output poisoned first.
    let (u, _, ms) = super::list1_device::evaluate(
        device,
        &boxes,
        std::slice::from_ref(&dense),
        std::slice::from_ref(reduced),
        false,
        super::list1::LayoutFlag::Orbit,
        1,
        Some(hipkern::nearfield::List1Schedule::CaseGrouped),
        &density,
    )?;
    pb.finish_and_clear();
    rows.push(Row {
        step: "List 1 (3D Laplace q=3)",
        backend: "device".into(),
        size,
        seconds: ms * 1e-3,
        error: Some(super::max_difference(&u, &reference).1),
        tol: TOL,
        note: format!(
            "ORBIT layout, grouped schedule, median kernel time; CPU reference {cpu_seconds:.3} s"
        ),
    });
    Ok(())
}

/// A periodic system: local atoms, ghost images within `cutoff` of the
/// box, edges (src = neighbour, extended index; dst = centre, local) of
/// every pair closer than `cutoff`, gradients of E = Σ exp(−r²/8).
struct Periodic {
    n_local: usize,
    mapping: Vec<i64>,
    src: Vec<i32>,
    dst: Vec<i32>,
    g: Vec<f64>,
    edge_vec: Vec<f64>,
}

fn periodic_system(n_local: usize, seed: u64) -> Periodic {
    const CUTOFF: f64 = 5.0;
    // About 48 neighbours per atom: n (4/3)π rc³ = 48.
    let density = 48.0 / (4.0 / 3.0 * std::f64::consts::PI * CUTOFF.powi(3));
    let side = (n_local as f64 / density).cbrt();
    let mut rng = SplitMix64::new(seed);
    let mut pos: Vec<[f64; 3]> = (0..n_local)
        .map(|_| {
            let mut p = [0.0; 3];
            for v in &mut p {
                *v = side * 0.5 * (rng.uniform_pm1() + 1.0);
            }
            p
        })
        .collect();
    let mut mapping: Vec<i64> = (0..n_local as i64).collect();
    // Ghosts: every image (shift in {−1, 0, 1}³ but 0) within CUTOFF of the box.
    for i in 0..n_local {
        for sx in -1i32..=1 {
            for sy in -1i32..=1 {
                for sz in -1i32..=1 {
                    if (sx, sy, sz) == (0, 0, 0) {
                        continue;
                    }
                    let p = pos[i];
                    let q = [
                        p[0] + f64::from(sx) * side,
                        p[1] + f64::from(sy) * side,
                        p[2] + f64::from(sz) * side,
                    ];
                    if q.iter().all(|&c| c > -CUTOFF && c < side + CUTOFF) {
                        pos.push(q);
                        mapping.push(i as i64);
                    }
                }
            }
        }
    }
    // Cells of side ≥ CUTOFF over [−CUTOFF, side + CUTOFF).
    let span = side + 2.0 * CUTOFF;
    let nc = ((span / CUTOFF).floor() as usize).max(1);
    let cell_of = |p: &[f64; 3]| -> [usize; 3] {
        let mut c = [0usize; 3];
        for a in 0..3 {
            c[a] = (((p[a] + CUTOFF) / span * nc as f64) as usize).min(nc - 1);
        }
        c
    };
    let mut cells: Vec<Vec<usize>> = vec![Vec::new(); nc * nc * nc];
    for (k, p) in pos.iter().enumerate() {
        let c = cell_of(p);
        cells[(c[0] * nc + c[1]) * nc + c[2]].push(k);
    }
    let (mut src, mut dst, mut g, mut edge_vec) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..n_local {
        let c = cell_of(&pos[i]);
        for dx in -1i64..=1 {
            for dy in -1i64..=1 {
                for dz in -1i64..=1 {
                    let n = [c[0] as i64 + dx, c[1] as i64 + dy, c[2] as i64 + dz];
                    if n.iter().any(|&v| v < 0 || v >= nc as i64) {
                        continue;
                    }
                    let cell = &cells[((n[0] as usize) * nc + n[1] as usize) * nc + n[2] as usize];
                    for &j in cell {
                        if j == i {
                            continue;
                        }
                        let r = [
                            pos[j][0] - pos[i][0],
                            pos[j][1] - pos[i][1],
                            pos[j][2] - pos[i][2],
                        ];
                        let r2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
                        if r2 >= CUTOFF * CUTOFF {
                            continue;
                        }
                        // dE/d(edge_vec) of exp(−r²/8): −(r/4) exp(−r²/8).
                        let w = -0.25 * (-r2 / 8.0).exp();
                        src.push(j as i32);
                        dst.push(i as i32);
                        g.extend(r.iter().map(|v| w * v));
                        edge_vec.extend(r);
                    }
                }
            }
        }
    }
    Periodic {
        n_local,
        mapping,
        src,
        dst,
        g,
        edge_vec,
    }
}

/// Step 3: forces and virials of a periodic system.
fn force_step(device: Option<&Device>, n_local: usize, rows: &mut Vec<Row>) -> Result<(), Failure> {
    let pb = spinner("forces: generating the periodic system");
    let sys = periodic_system(n_local, 2026);
    let n_ext = sys.mapping.len();
    let ghosts = Some(GhostMapping {
        mapping: &sys.mapping,
        n_local: sys.n_local,
    });
    let split = VirialSplit::Half;
    pb.set_message("forces: float64 reference (edge loop)");
    let reference = assemble_reference_f64(
        &sys.g,
        &sys.edge_vec,
        &sys.src,
        &sys.dst,
        n_ext,
        ghosts,
        split,
    )?;
    pb.set_message("forces: assembly");
    let (assembly, seconds, backend, note) = match device {
        Some(device) => {
            let stream = device.new_stream()?;
            let g = device.htod_copy(&sys.g)?;
            let r = device.htod_copy(&sys.edge_vec)?;
            let (a, b) = (Event::new(device)?, Event::new(device)?);
            a.record(&stream)?;
            let plan = DevicePlan::build_from_host(&stream, &sys.src, &sys.dst, n_ext, ghosts)?;
            let (force, virial) = assemble_device(&stream, &plan, &g, &r, split)?;
            b.record(&stream)?;
            b.synchronize()?;
            let ms = f64::from(a.elapsed_ms(&b)?);
            let out = hipkern::force::Assembly {
                force: force.to_vec()?,
                virial: virial.to_vec()?,
            };
            (
                out,
                ms * 1e-3,
                "device",
                "plan built on the device + assembly",
            )
        }
        None => {
            let start = Instant::now();
            let plan = CsrPlan::build(&sys.src, &sys.dst, n_ext, ghosts)?;
            let out = assemble_with_plan(&plan, &sys.g, &sys.edge_vec, split)?;
            (
                out,
                start.elapsed().as_secs_f64(),
                "cpu",
                "plan + segment reduction",
            )
        }
    };
    pb.finish_and_clear();
    let error = super::max_difference(&assembly.force, &reference.force)
        .1
        .max(super::max_difference(&assembly.virial, &reference.virial).1);
    // The periodic system has no net force: Σ F = 0 up to rounding.
    let net: f64 = (0..3)
        .map(|a| {
            (0..n_local)
                .map(|i| assembly.force[3 * i + a])
                .sum::<f64>()
                .abs()
        })
        .fold(0.0, f64::max);
    rows.push(Row {
        step: "forces + virials (periodic)",
        backend: backend.into(),
        size: format!(
            "{n_local} atoms, {} ghosts, {} edges",
            n_ext - n_local,
            sys.src.len()
        ),
        seconds,
        error: Some(error),
        tol: TOL,
        note: format!("{note}; |Σ F| {net:.1e}"),
    });
    Ok(())
}

/// The demo's image files, planned before any work (`output.rs`).
struct DemoOutputs {
    set: OutputSet,
    fits: (OutputId, PathBuf),
    png: (OutputId, PathBuf),
}

/// Step 4: the dense PSF fixture; stages FITS and PNG in `outputs`.
fn psf_step(
    device: Option<&Device>,
    outputs: &mut DemoOutputs,
    rows: &mut Vec<Row>,
) -> Result<(), Failure> {
    let f = fixtures::fixture("dense")?;
    let pb = spinner("PSF: building the phase cache (P = 64)");
    let cache = Arc::new(PsfCache::build(MoffatPsf::default())?);
    pb.finish_and_clear();
    let pb = bar(f.events.len() as u64, "PSF: replaying the dense fixture");
    let start = Instant::now();
    let (image, backend, stats, note) = match device {
        Some(device) => {
            let mut sink = DeviceSink::builder(device, cache.clone(), f.width, f.height)
                .mode(SinkMode::Adaptive)
                .build()?;
            for part in f.events.chunks(CHUNK_EVENTS) {
                sink.accumulate(part)?;
                pb.inc(part.len() as u64);
            }
            let image = sink.finish()?;
            let by_tiles = sink
                .chunk_log()
                .iter()
                .filter(|c| c.mode != hipkern::psf::ChunkMode::Atomic)
                .count();
            let note = format!(
                "adaptive: {by_tiles} of {} chunks by tiles",
                sink.chunk_log().len()
            );
            (image, "device", sink.stats(), note)
        }
        None => {
            let mut sink = CpuSink::parallel(cache.clone(), f.width, f.height, 0)?;
            for part in f.events.chunks(CHUNK_EVENTS) {
                sink.accumulate(part)?;
                pb.inc(part.len() as u64);
            }
            let stats = sink.stats();
            (
                sink.into_image(),
                "cpu",
                stats,
                "row-parallel CPU sink".to_string(),
            )
        }
    };
    let seconds = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let pb = spinner("PSF: serial CPU reference");
    let mut reference = CpuSink::new(cache.clone(), f.width, f.height)?;
    reference.accumulate(&f.events)?;
    pb.finish_and_clear();
    let cmp = image.compare(reference.image())?;
    let accepted = cmp.accept(PSF_TOL).is_ok() && stats == reference.stats();
    let meta = ImageMeta {
        psf: *cache.psf(),
        phases: cache.phases(),
        events: stats.events,
        direct: stats.direct,
        outside: stats.outside,
        sink: if device.is_some() { "adaptive" } else { "cpu" }.to_string(),
    };
    super::psf::check_finite(&image)?;
    let set = &mut outputs.set;
    set.stage_at_path(outputs.fits.0, |p| {
        write_fits_new(p, &image, &meta).map_err(|e| e.to_string())
    })?;
    set.stage(outputs.png.0, |w| {
        write_png_to(w, &image)
            .map(|_| ())
            .map_err(|e| std::io::Error::other(e.to_string()))
    })?;
    rows.push(Row {
        step: "PSF replay (dense fixture)",
        backend: backend.into(),
        size: format!(
            "{} events, {}×{}, {} contributions",
            f.events.len(),
            f.width,
            f.height,
            stats.contributions
        ),
        seconds,
        // SPEC §7's acceptance; the number shown is max_rel over nonzero pixels.
        error: Some(if accepted { cmp.max_rel } else { f64::INFINITY }),
        tol: PSF_TOL,
        note: format!(
            "{note}; SPEC §7 acceptance {}",
            if accepted { "holds" } else { "FAILS" }
        ),
    });
    Ok(())
}

/// Plans the demo's files: the cache (updated in place, so no output may be
/// it), FITS and PNG in `out_dir` (created if missing).
fn plan_outputs(out_dir: &Path, cache: &Path) -> Result<DemoOutputs, Failure> {
    for dir in [Some(out_dir), cache.parent()].into_iter().flatten() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir).map_err(|e| {
                Failure::environment(format!("cannot create the folder {}: {e}", dir.display()))
            })?;
        }
    }
    let mut set = OutputSet::new();
    set.input("--cache", cache)?;
    let fits = out_dir.join("demo-dense.fits");
    let png = out_dir.join("demo-dense.png");
    let fits = (set.output("--out-dir", &fits)?, fits);
    let png = (set.output("--out-dir", &png)?, png);
    Ok(DemoOutputs { set, fits, png })
}

fn execute(a: &DemoArgs) -> Result<(Vec<Row>, Vec<PathBuf>), Failure> {
    let device = match a.backend.as_str() {
        "auto" => Device::new(0).ok(),
        "device" => Some(super::open_device("--backend device", "use --backend cpu")?),
        "cpu" => None,
        other => {
            return Err(Failure::bad_input(format!(
                "unknown --backend '{other}' (auto, device or cpu)"
            )))
        }
    };
    let full = match a.size.as_deref() {
        None => device.is_some(),
        Some("full") => true,
        Some("small") => false,
        Some(other) => {
            return Err(Failure::bad_input(format!(
                "unknown --size '{other}' (small or full)"
            )))
        }
    };
    let cache = match &a.cache {
        Some(p) => p.clone(),
        None => default_cache()?,
    };
    let mut outputs = plan_outputs(&a.out_dir, &cache)?;
    match &device {
        Some(d) => super::note(&format!(
            "hipkern demo: device {} ({}), {} sizes",
            d.properties().name,
            d.properties().arch_name,
            if full { "full" } else { "small" }
        )),
        None => super::note(&format!(
            "hipkern demo: CPU backend (platform {}: {}), {} sizes",
            hipkern::runtime::platform(),
            if hipkern::runtime::platform() == "cpu" {
                "built without a GPU compiler"
            } else {
                "no usable device"
            },
            if full { "full" } else { "small" }
        )),
    }
    let mut rows = Vec::new();
    let reduced = table_step(&cache, a.rebuild, &mut rows)?;
    list1_step(
        device.as_ref(),
        &reduced,
        if full { 7 } else { 6 },
        &mut rows,
    )?;
    force_step(
        device.as_ref(),
        if full { 262_144 } else { 65_536 },
        &mut rows,
    )?;
    psf_step(device.as_ref(), &mut outputs, &mut rows)?;
    let files = vec![outputs.fits.1.clone(), outputs.png.1.clone()];
    outputs.set.commit()?;
    Ok((rows, files))
}

/// Runs `hipkern demo`: the summary on stdout; exit 1 when a step's error
/// is beyond its tolerance, 2 for a bad flag, 1 for the machine's failures.
pub fn run(a: &DemoArgs) -> ExitCode {
    let (rows, files) = match execute(a) {
        Ok(x) => x,
        Err(f) => return f.report("hipkern demo"),
    };
    let mut lines = vec![format!(
        "{:<28} {:<7} {:<48} {:>10}  {:>9}  note",
        "step", "backend", "size", "time", "error"
    )];
    let mut bad = false;
    for r in &rows {
        let err = match r.error {
            Some(e) if e.is_finite() => format!("{e:.1e}"),
            Some(_) => "FAILED".to_string(),
            None => "-".to_string(),
        };
        if r.error.is_some_and(|e| e.is_nan() || e > r.tol) {
            bad = true;
        }
        lines.push(format!(
            "{:<28} {:<7} {:<48} {:>8.3} s  {:>9}  {}",
            r.step, r.backend, r.size, r.seconds, err, r.note
        ));
    }
    lines.push("error: relative max-norm against the float64 CPU reference (PSF: max_rel of SPEC §7's acceptance)".to_string());
    for f in &files {
        lines.push(format!("wrote {}", f.display()));
    }
    if let Err(f) = super::print_lines(&lines) {
        return f.report("hipkern demo");
    }
    if bad {
        Failure::environment("a step differs from its reference beyond tolerance")
            .report("hipkern demo")
    } else {
        ExitCode::SUCCESS
    }
}
