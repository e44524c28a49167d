//! `hipkern demo`: the main job (`docs/design/program.md`). Every primitive once, on the
//! device when there is one (else the CPU backend), each checked against
//! its float64 CPU reference, then a summary of what each step cost.
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
//! 4. A lensed star field ([`hipkern::psf::sky`]: a star catalogue seen
//!    through a point-mass lens, with an Einstein ring) rendered by the
//!    `adaptive` device sink (CPU backend: the row-parallel sink), its
//!    brightest events by the direct path; the reference is the CPU sink
//!    (serial on the CPU backend; row-parallel, bitwise the same, beside a
//!    device); the image written as FITS and PNG.
//!
//! # What the summary's times are
//!
//! "end to end" is the wall clock of a step's whole path as a user calls
//! it: for the device, building and uploading (table, plan, events),
//! the kernels, and downloading the result; for the PSF the phase cache's
//! build too (a cost paid once per PSF, shown in the note). On the device
//! each step runs twice and the second, warm pass is timed: the first
//! loads the kernels, a once-per-process cost that would otherwise land in
//! whichever step comes first. "kernels" is the device time between
//! events around the kernels of that pass (the PSF: the sink's profile of
//! its binning, tile and atomic kernels); the CPU backend has none ("-").
//! The references' own times are not in the table.
//!
//! Sizes: `--size full` on a device, `small` on the CPU backend (a few
//! seconds on two cores); `--size` overrides.
use super::output::{OutputId, OutputSet};
use super::Failure;
use hipkern::force::{
    assemble_device_into, assemble_reference_f64, assemble_with_plan, Assembly, CsrPlan,
    DeviceGhostMapping, DevicePlan, GhostMapping, VirialSplit,
};
use hipkern::nearfield::{
    evaluate_list1, BalancedTree, EntryQuadrature, Kernel, List1Boxes, List1Evaluator, List1Kernel,
    List1Layout, List1ReducedTables, List1Tables, RandomTreeConfig, ReducedTable, TableCache,
};
use hipkern::psf::sky::{lensed_sky, LensedSkyConfig};
use hipkern::psf::{
    write_fits_new, write_png_to, ChunkMode, CpuSink, DeviceSink, HdrImage, ImageMeta, MoffatPsf,
    PsfCache, SinkMode, SinkStats, StarEvent, CHUNK_EVENTS,
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
    /// Folder for the image (demo-sky.fits, demo-sky.png); created if missing.
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
/// The PSF tolerance of the acceptance (`docs/design/psf.md#acceptance`:
/// max_rel, among its tests).
const PSF_TOL: f64 = 1e-10;

/// One row of the summary.
struct Row {
    step: &'static str,
    backend: &'static str,
    size: String,
    /// Wall clock of the step's whole path, s (module docs).
    total: f64,
    /// Device time of its kernels, s; `None` on the CPU.
    kernels: Option<f64>,
    /// Relative max-norm error against the reference, if there is one.
    error: Option<f64>,
    /// The error accepted.
    tol: f64,
    note: String,
}

/// `seconds` in milliseconds to 3 significant digits (whole ms from
/// 1,000 ms on): one unit down the column, so rows compare at a glance
/// and a 40 µs kernel reads 0.0400 ms, not 0.000 s.
fn ms(seconds: f64) -> String {
    let v = seconds * 1e3;
    if !v.is_finite() || v <= 0.0 {
        return format!("{v} ms");
    }
    let decimals = (2 - v.log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$} ms")
}

/// A device timing event pair's interval, s.
fn elapsed(a: &Event, b: &Event) -> Result<f64, Failure> {
    Ok(f64::from(a.elapsed_ms(b)?) * 1e-3)
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
    let start = Instant::now();
    let cache = TableCache::open(cache_path).map_err(cache_err)?;
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
        backend: "cpu",
        size: format!(
            "{} of {} entries",
            table.reduced_entry_ids().len(),
            table.n_full_entries()
        ),
        total: start.elapsed().as_secs_f64(),
        kernels: None,
        error: None,
        tol: 0.0,
        note: format!("{how}: {}", cache_path.display()),
    });
    Ok(table)
}

/// One device pass of List 1 as a user makes it: the table uploaded in
/// the ORBIT layout, the tree's plan built and uploaded, the density
/// uploaded, the kernels, the potential downloaded. Returns the potential,
/// the pass's wall clock, the kernels' device time (s) and the kernel the
/// plan chose under the default (fast) contract.
fn list1_device_pass(
    device: &Device,
    reduced: &ReducedTable,
    boxes: &List1Boxes<'_>,
    density: &[f64],
) -> Result<(Vec<f64>, f64, f64, List1Kernel), Failure> {
    let start = Instant::now();
    let evaluator = List1Evaluator::from_reduced(
        device,
        &List1ReducedTables::Scaled(reduced),
        List1Layout::Orbit,
    )?;
    let stream = device.new_stream()?;
    let mut plan = evaluator.plan(boxes)?;
    let f = device.htod_copy(density)?;
    let mut out = device.alloc::<f64>(plan.n_targets() * evaluator.n_modes())?;
    // Poisoned: a value the kernels did not write shows as NaN, which the
    // comparison counts as a miss.
    stream.fill(&mut out.as_slice_mut(), f64::NAN)?;
    let (a, b) = (Event::new(device)?, Event::new(device)?);
    a.record(&stream)?;
    evaluator.evaluate_into(&stream, &mut plan, &f, &mut out)?;
    b.record(&stream)?;
    let mut u = vec![f64::NAN; out.len()];
    // SAFETY: `u` is exclusively borrowed and the synchronize waits for the copy.
    unsafe { stream.copy_dtoh_async(&out.as_slice(), &mut u)? };
    stream.synchronize()?;
    let total = start.elapsed().as_secs_f64();
    Ok((u, total, elapsed(&a, &b)?, plan.kernel()))
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
    let targets = tree.all_boxes();
    let boxes = tree.list1_boxes(&targets);
    let size = format!(
        "{} leaves, {} pairs, {} points",
        tree.n_boxes(),
        tree.list1_sources().len(),
        density.len()
    );
    let pb = spinner("List 1: CPU float64 reference");
    // The CPU path as a user calls it: the table expanded, then evaluated.
    let start = Instant::now();
    let dense = reduced.to_dense()?;
    let reference = evaluate_list1(&boxes, &List1Tables::Scaled(&dense), &density)?;
    let cpu_seconds = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let Some(device) = device else {
        rows.push(Row {
            step: "List 1 (3D Laplace q=3)",
            backend: "cpu",
            size,
            total: cpu_seconds,
            kernels: None,
            // Nothing to compare: this is the reference itself.
            error: None,
            tol: TOL,
            note: "table expanded + CPU evaluator; it is the reference (nothing to check)".into(),
        });
        return Ok(());
    };
    let pb = spinner("List 1: device, ORBIT layout");
    list1_device_pass(device, reduced, &boxes, &density)?;
    let (u, total, kernels, kernel) = list1_device_pass(device, reduced, &boxes, &density)?;
    pb.finish_and_clear();
    rows.push(Row {
        step: "List 1 (3D Laplace q=3)",
        backend: "device",
        size,
        total,
        kernels: Some(kernels),
        error: Some(super::max_difference(&u, &reference).1),
        tol: TOL,
        note: format!(
            "ORBIT table + plan + density up, {kernel} kernel (fast contract), potential down; \
             CPU reference {}",
            ms(cpu_seconds)
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

/// One device pass of the force step as a user makes it: indices, ghost
/// mapping, gradients and edge vectors uploaded, the plan built on the
/// device, the assembly, force and virial downloaded. Returns them, the
/// pass's wall clock, and the device time of the plan build and of the
/// assembly (s).
fn force_device_pass(
    device: &Device,
    sys: &Periodic,
    split: VirialSplit,
) -> Result<(Assembly, f64, f64, f64), Failure> {
    let start = Instant::now();
    let stream = device.new_stream()?;
    let n_ext = sys.mapping.len();
    let src = device.htod_copy(&sys.src)?;
    let dst = device.htod_copy(&sys.dst)?;
    let mapping = device.htod_copy(&sys.mapping)?;
    let g = device.htod_copy(&sys.g)?;
    let r = device.htod_copy(&sys.edge_vec)?;
    let mut force = device.alloc::<f64>(3 * sys.n_local)?;
    let mut virial = device.alloc::<f64>(9 * sys.n_local)?;
    let (a, b, c) = (
        Event::new(device)?,
        Event::new(device)?,
        Event::new(device)?,
    );
    a.record(&stream)?;
    let ghosts = Some(DeviceGhostMapping::new(&mapping, sys.n_local));
    let plan = DevicePlan::build(&stream, &src, &dst, n_ext, ghosts)?;
    b.record(&stream)?;
    assemble_device_into(&stream, &plan, &g, &r, split, &mut force, &mut virial)?;
    c.record(&stream)?;
    c.synchronize()?;
    let out = Assembly {
        force: force.to_vec()?,
        virial: virial.to_vec()?,
    };
    let total = start.elapsed().as_secs_f64();
    Ok((out, total, elapsed(&a, &b)?, elapsed(&b, &c)?))
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
    let (assembly, total, kernels, backend, note) = match device {
        Some(device) => {
            force_device_pass(device, &sys, split)?;
            let (out, total, plan_s, assembly_s) = force_device_pass(device, &sys, split)?;
            let note = format!(
                "uploads + plan built on the device ({}) + assembly ({}) + download",
                ms(plan_s),
                ms(assembly_s)
            );
            (out, total, Some(plan_s + assembly_s), "device", note)
        }
        None => {
            let start = Instant::now();
            let plan = CsrPlan::build(&sys.src, &sys.dst, n_ext, ghosts)?;
            let out = assemble_with_plan(&plan, &sys.g, &sys.edge_vec, split)?;
            let total = start.elapsed().as_secs_f64();
            (
                out,
                total,
                None,
                "cpu",
                "plan + segment reduction".to_string(),
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
        backend,
        size: format!(
            "{n_local} atoms, {} ghosts, {} edges",
            n_ext - n_local,
            sys.src.len()
        ),
        total,
        kernels,
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

/// The lensed sky of each size. Full: the seed's 3840×2160 frame
/// ([`LensedSkyConfig::default`]). Small: 1600×900 with two thirds of its
/// density of stars and a smaller lens, so that the CPU backend's PSF step
/// (sink, serial reference, files) takes a few seconds on two cores and
/// its PNG stays under 1.5 MB.
fn sky_config(full: bool) -> LensedSkyConfig {
    if full {
        LensedSkyConfig::default()
    } else {
        LensedSkyConfig {
            width: 1600,
            height: 900,
            stars: 7_000,
            cluster_stars: 800,
            einstein_radius_px: 125.0,
            ..LensedSkyConfig::default()
        }
    }
}

/// What a PSF pass produced.
struct PsfPass {
    image: HdrImage,
    stats: SinkStats,
    /// Wall clock of sink, replay and download, s.
    seconds: f64,
    /// The device sink's kernel time, s.
    kernels: Option<f64>,
    note: String,
}

/// One device pass of the PSF step as a user makes it: the sink built
/// (stamps uploaded, scratch allocated), the events streamed chunk by
/// chunk (the direct ones by the mid-stream direct path), the image
/// downloaded.
fn psf_device_pass(
    device: &Device,
    cache: &Arc<PsfCache>,
    events: &[StarEvent],
    (width, height): (usize, usize),
    pb: &ProgressBar,
) -> Result<PsfPass, Failure> {
    let start = Instant::now();
    let mut sink = DeviceSink::builder(device, cache.clone(), width, height)
        .mode(SinkMode::Adaptive)
        .profile(true)
        .build()?;
    for part in events.chunks(CHUNK_EVENTS) {
        sink.accumulate_routed(part)?;
        pb.inc(part.len() as u64);
    }
    let image = sink.finish()?;
    let seconds = start.elapsed().as_secs_f64();
    let t = sink.timings().unwrap_or_default();
    let by_tiles = sink
        .chunk_log()
        .iter()
        .filter(|c| c.mode != ChunkMode::Atomic)
        .count();
    Ok(PsfPass {
        image,
        stats: sink.stats(),
        seconds,
        kernels: Some((t.bin_ms + t.accumulate_ms + t.atomic_ms) * 1e-3),
        note: format!(
            "adaptive: {by_tiles} of {} chunks by tiles",
            sink.chunk_log().len()
        ),
    })
}

/// Step 4: the lensed star field; stages FITS and PNG in `outputs`.
fn psf_step(
    device: Option<&Device>,
    full: bool,
    outputs: &mut DemoOutputs,
    rows: &mut Vec<Row>,
) -> Result<(), Failure> {
    let config = sky_config(full);
    let (width, height) = (config.width, config.height);
    let pb = spinner("PSF: generating the lensed star field");
    let sky = lensed_sky(&config)?;
    // The events too large for the cache go last, together: on the device
    // each chunk holding one costs an image download and upload (the
    // mid-stream direct path), so a renderer that knows its bright stars
    // sends them in one chunk. Both sinks see this same stream.
    let (mut events, direct): (Vec<StarEvent>, Vec<StarEvent>) = sky
        .events
        .iter()
        .partition(|e| PsfCache::fits(e.x, e.y, e.support));
    let n_direct = direct.len();
    events.extend(direct);
    pb.set_message("PSF: building the phase cache (P = 64)");
    let start = Instant::now();
    let cache = Arc::new(PsfCache::build(MoffatPsf::default())?);
    let cache_seconds = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let bar_len = events.len() as u64;
    let pass = match device {
        Some(device) => {
            let pb = bar(bar_len, "PSF: warm-up pass");
            psf_device_pass(device, &cache, &events, (width, height), &pb)?;
            pb.finish_and_clear();
            let pb = bar(bar_len, "PSF: rendering the lensed star field");
            let pass = psf_device_pass(device, &cache, &events, (width, height), &pb)?;
            pb.finish_and_clear();
            pass
        }
        None => {
            let pb = bar(bar_len, "PSF: rendering the lensed star field");
            let start = Instant::now();
            let mut sink = CpuSink::parallel(cache.clone(), width, height, 0)?;
            for part in events.chunks(CHUNK_EVENTS) {
                sink.accumulate_routed(part)?;
                pb.inc(part.len() as u64);
            }
            let stats = sink.stats();
            let image = sink.into_image();
            pb.finish_and_clear();
            PsfPass {
                image,
                stats,
                seconds: start.elapsed().as_secs_f64(),
                kernels: None,
                note: "row-parallel CPU sink".to_string(),
            }
        }
    };
    // The reference: the serial CPU sink; beside a device, the row-parallel
    // one (bitwise the serial one's sums, and many times faster on the
    // device machine's cores).
    let pb = spinner("PSF: CPU float64 reference");
    let mut reference = match device {
        Some(_) => CpuSink::parallel(cache.clone(), width, height, 0)?,
        None => CpuSink::new(cache.clone(), width, height)?,
    };
    reference.accumulate_routed(&events)?;
    pb.finish_and_clear();
    let image = pass.image;
    let stats = pass.stats;
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
        step: "PSF: lensed star field",
        backend: if device.is_some() { "device" } else { "cpu" },
        size: format!(
            "{} events ({n_direct} direct), {width}×{height}, {} contributions",
            events.len(),
            stats.contributions
        ),
        total: cache_seconds + pass.seconds,
        kernels: pass.kernels,
        // The acceptance (docs/design/psf.md#acceptance); the number shown is
        // max_rel over nonzero pixels.
        error: Some(if accepted { cmp.max_rel } else { f64::INFINITY }),
        tol: PSF_TOL,
        note: format!(
            "{} stars ({} behind the lens), θ_E {} px; phase cache {} + {}; PSF acceptance {}",
            config.stars + config.cluster_stars,
            config.cluster_stars,
            config.einstein_radius_px,
            ms(cache_seconds),
            pass.note,
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
    let fits = out_dir.join("demo-sky.fits");
    let png = out_dir.join("demo-sky.png");
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
    psf_step(device.as_ref(), full, &mut outputs, &mut rows)?;
    let files = vec![outputs.fits.1.clone(), outputs.png.1.clone()];
    outputs.set.commit()?;
    Ok((rows, files))
}

/// The summary: one row per step, columns two spaces apart at least (so
/// a script can split on that), then what the columns mean. Returns the
/// lines and whether a step missed its tolerance.
fn summary(rows: &[Row], files: &[PathBuf]) -> (Vec<String>, bool) {
    let line = |cols: [&str; 7]| {
        format!(
            "{:<28}  {:<7}  {:<60}  {:>10}  {:>10}  {:>7}  {}",
            cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6]
        )
    };
    let mut lines = vec![line([
        "step",
        "backend",
        "size",
        "end to end",
        "kernels",
        "error",
        "note",
    ])];
    let mut bad = false;
    for r in rows {
        let err = match r.error {
            Some(e) if e.is_finite() => format!("{e:.1e}"),
            Some(_) => "FAILED".to_string(),
            None => "-".to_string(),
        };
        if r.error.is_some_and(|e| e.is_nan() || e > r.tol) {
            bad = true;
        }
        let kernels = r.kernels.map_or_else(|| "-".to_string(), ms);
        lines.push(line([
            r.step,
            r.backend,
            &r.size,
            &ms(r.total),
            &kernels,
            &err,
            &r.note,
        ]));
    }
    lines.push(
        "end to end: wall clock of the step's whole path (device: a warm pass of uploads, \
         plan/build, kernels and downloads; PSF: with the phase cache's build)"
            .to_string(),
    );
    lines.push(
        "kernels: device time between events around the kernels (- on the CPU); error: \
         relative max-norm against the float64 CPU reference (PSF: max_rel of the acceptance, docs/design/psf.md)"
            .to_string(),
    );
    for f in files {
        lines.push(format!("wrote {}", f.display()));
    }
    (lines, bad)
}

/// Runs `hipkern demo`: the summary on stdout; exit 1 when a step's error
/// is beyond its tolerance, 2 for a bad flag, 1 for the machine's failures.
pub fn run(a: &DemoArgs) -> ExitCode {
    let (rows, files) = match execute(a) {
        Ok(x) => x,
        Err(f) => return f.report("hipkern demo"),
    };
    let (lines, bad) = summary(&rows, &files);
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

#[cfg(test)]
mod tests {
    use super::ms;

    #[test]
    fn times_read_in_milliseconds_to_three_digits() {
        for (s, want) in [
            (2.8594, "2859 ms"),
            (0.1163, "116 ms"),
            (0.04567, "45.7 ms"),
            (0.0012345, "1.23 ms"),
            (4.0e-5, "0.0400 ms"),
            (1.234e-7, "0.000123 ms"),
        ] {
            assert_eq!(ms(s), want, "{s}");
        }
    }
}
