//! `hipkern psf`: the PSF sink (`docs/design/psf.md`; the library side is
//! `hipkern::psf`).
//!
//! - `hipkern psf fixture NAME --out EVENTS.bin` writes one of the seeded
//!   fixtures (`dense`, `dispersed`, `magnified`, `ordinary`, `boundary`) as
//!   a binary event file (or an N×7 float64 `.npy` when `--out` ends in
//!   `.npy`).
//! - `hipkern psf replay EVENTS --mode atomic|tile16|tile32|adaptive|cpu --out IMG.fits|IMG.npy`
//!   replays an event file (binary or `.npy`) into an RGB image: through the
//!   cache, the events too large for it by the direct path; `--check` also
//!   renders the serial CPU float64 reference and applies the acceptance
//!   of `docs/design/psf.md#acceptance`.
//!
//! The order is what makes errors safe: every flag is checked, the outputs
//! planned (`output.rs`), the event file read and validated, the image
//! rendered (and checked), and only then are the outputs written, as one
//! set put in place all or none. So an error leaves every file as it was. Exit status 2 for what the caller got wrong, 1 for the
//! machine (no device, an output that cannot be written) and for a failed
//! `--check` (the outputs of a failed check are still written: they are
//! what to look at).
use super::output::OutputSet;
use super::Failure;
use clap::{Args, Subcommand};
use hipkern::psf::{
    fixtures, read_events, write_events_npy_to, write_events_to, write_fits_new,
    write_image_npy_to, write_png_to, CacheConfig, ChunkMode, CpuSink, EventFormat, HdrImage,
    ImageMeta, MoffatPsf, PsfCache, SinkMode, SinkStats, StarEvent, CACHE_RADIUS, CENTRE_TILE,
    DEFAULT_HEIGHT, DEFAULT_PHASES, DEFAULT_WIDTH, MAX_THREADS,
};
use hipkern::Device;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// The acceptance tolerance of `--check` (`docs/design/psf.md#acceptance`).
const CHECK_TOL: f64 = 1e-10;
/// The most pixels an image may have here (2^27: 3 GiB of float64 RGB).
const MAX_PIXELS: usize = 1 << 27;

/// Flags of `hipkern psf`.
#[derive(Args, Debug)]
pub struct PsfArgs {
    #[command(subcommand)]
    command: PsfCommand,
}

#[derive(Subcommand, Debug)]
enum PsfCommand {
    /// Writes a seeded fixture's events (for a 3840×2160 image) to an event file.
    Fixture(FixtureArgs),
    /// Replays an event file into an RGB image (FITS float32 or .npy float64).
    Replay(ReplayArgs),
}

/// Flags of `hipkern psf fixture`.
#[derive(Args, Debug)]
pub struct FixtureArgs {
    /// The fixture: dense, dispersed, magnified, ordinary or boundary.
    #[arg(value_name = "NAME")]
    name: String,
    /// The event file to write: .bin (binary, with the PSF in its header) or
    /// .npy (N×7 float64: x, y, flux, r, g, b, support).
    #[arg(long, value_name = "EVENTS.bin")]
    out: PathBuf,
}

/// Flags of `hipkern psf replay`. Mode is a string checked here (not by
/// clap), so that a wrong value is reported like every other input error.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The events: a binary event file or an N×7 float64 .npy.
    #[arg(value_name = "EVENTS.bin|EVENTS.npy")]
    events: PathBuf,
    /// Image width, pixels.
    #[arg(long, value_name = "W", default_value_t = DEFAULT_WIDTH)]
    width: usize,
    /// Image height, pixels.
    #[arg(long, value_name = "H", default_value_t = DEFAULT_HEIGHT)]
    height: usize,
    /// PSF FWHM, px (default: the event file's header, else 2.7).
    #[arg(long, value_name = "F", allow_hyphen_values = true)]
    fwhm: Option<f64>,
    /// Moffat β (default: the event file's header, else 4.5).
    #[arg(long, value_name = "B", allow_hyphen_values = true)]
    beta: Option<f64>,
    /// Flux fraction outside the support radius (default: the header, else 1e-8).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    tail: Option<f64>,
    /// Sub-pixel phase intervals P per axis of the PSF cache.
    #[arg(long, value_name = "P", default_value_t = DEFAULT_PHASES)]
    phases: usize,
    /// The device sink on GPU 0: atomic (global float64 atomics), tile16 /
    /// tile32 (owner-computes tiles, lists binned on the device), adaptive
    /// (per chunk tiles or atomic: AdaptiveThresholds::default()); cpu: the
    /// row-parallel CPU float64 sink.
    #[arg(long, value_name = "atomic|tile16|tile32|adaptive|cpu")]
    mode: String,
    /// Host threads for the cache build and the cpu sink (0: all cores).
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: usize,
    /// The image: .fits (float32, planes R, G, B, PSF in the header) or .npy
    /// (float64, shape (H, W, 3)).
    #[arg(long, value_name = "IMG.fits|IMG.npy")]
    out: PathBuf,
    /// A tone-mapped 8-bit sRGB preview (asinh of luminance).
    #[arg(long, value_name = "P.png")]
    png: Option<PathBuf>,
    /// Also render the serial CPU float64 reference, print the differences and
    /// fail (exit 1) unless the acceptance holds (docs/design/psf.md#acceptance).
    #[arg(long)]
    check: bool,
}

/// Runs `hipkern psf <cmd>`: the report on stdout, or one error line on
/// stderr.
pub fn run(args: &PsfArgs) -> ExitCode {
    let result = match &args.command {
        PsfCommand::Fixture(a) => execute_fixture(a).map(|lines| (lines, None)),
        PsfCommand::Replay(a) => execute_replay(a),
    };
    match result {
        Ok((lines, failure)) => match (super::print_lines(&lines), failure) {
            (Err(f), _) | (Ok(()), Some(f)) => f.report("hipkern psf"),
            (Ok(()), None) => ExitCode::SUCCESS,
        },
        Err(failure) => failure.report("hipkern psf"),
    }
}

/// The extension of `path`, if any (as written: `.FITS` is not `.fits`).
fn extension(path: &Path) -> Option<&str> {
    path.extension().and_then(|e| e.to_str())
}

/// A library error as a staging step's I/O error.
fn io_error(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// An image with a value that is not finite is never written: which pixel,
/// and why (valid events whose fluxes overflow float64 when summed).
pub(super) fn check_finite(image: &HdrImage) -> Result<(), Failure> {
    match image.first_non_finite() {
        None => Ok(()),
        Some((x, y, c)) => Err(Failure::bad_input(format!(
            "the image is not finite at pixel ({x}, {y}) channel {} ({}): the event fluxes \
             exceed float64's range there; nothing was written",
            ["R", "G", "B"][c],
            image.data()[3 * (y * image.width() + x) + c]
        ))),
    }
}

// ---- fixture --------------------------------------------------------------

fn execute_fixture(a: &FixtureArgs) -> Result<Vec<String>, Failure> {
    let npy = match extension(&a.out) {
        Some("bin") => false,
        Some("npy") => true,
        _ => {
            return Err(Failure::bad_input(format!(
                "--out {}: an event file ends in .bin (binary) or .npy (N×7 float64)",
                a.out.display()
            )))
        }
    };
    let mut set = OutputSet::new();
    let out = set.output("--out", &a.out)?;
    let f = fixtures::fixture(&a.name)?;
    let tiles = fixtures::centre_tiles(&f.events, f.width, f.height);
    let peak = tiles.values().copied().max().unwrap_or(0);
    let contributions = fixtures::fixture_contributions(&f);
    let chunks = f.events.len().div_ceil(hipkern::psf::CHUNK_EVENTS);
    let oversize = f
        .events
        .iter()
        .filter(|e| !PsfCache::fits(e.x, e.y, e.support))
        .count();
    let (psf, events) = (f.psf, &f.events);
    set.stage(out, |w| {
        if npy {
            write_events_npy_to(w, events)
        } else {
            write_events_to(w, &psf, events)
        }
        .map_err(io_error)
    })?;
    set.commit()?;
    Ok(vec![format!(
        "hipkern psf fixture: {}: {} events in {chunks} chunks, {} occupied {CENTRE_TILE}×{CENTRE_TILE} \
         centre tiles (peak {peak} events), {contributions} contributions on {}×{}, {oversize} \
         too large for the cache; PSF FWHM {} β {} tail {:e}; wrote {} ({})",
        f.name,
        f.events.len(),
        tiles.len(),
        f.width,
        f.height,
        psf.fwhm,
        psf.beta,
        psf.tail,
        a.out.display(),
        if npy { "N×7 float64 .npy" } else { "binary event file" }
    )])
}

// ---- replay ---------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Device(SinkMode),
    Cpu,
}

impl Mode {
    fn parse(s: &str) -> Result<Mode, Failure> {
        match s {
            "atomic" => Ok(Mode::Device(SinkMode::Atomic)),
            "tile16" => Ok(Mode::Device(SinkMode::Tile16)),
            "tile32" => Ok(Mode::Device(SinkMode::Tile32)),
            "adaptive" => Ok(Mode::Device(SinkMode::Adaptive)),
            "cpu" => Ok(Mode::Cpu),
            _ => Err(Failure::bad_input(format!(
                "unknown --mode '{s}' (atomic, tile16, tile32, adaptive or cpu)"
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Device(m) => m.name(),
            Mode::Cpu => "cpu",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ImageFormat {
    Fits,
    Npy,
}

/// What a sink produced.
struct Rendered {
    image: HdrImage,
    stats: SinkStats,
    /// Events that went by the direct path.
    direct: usize,
    seconds: f64,
    /// Device modes: cached-path chunks by how they went (atomic, tile16, tile32).
    chunk_modes: Option<[usize; 3]>,
}

/// The flags, checked before any file is read.
struct Request {
    mode: Mode,
    format: ImageFormat,
}

fn check_replay_flags(a: &ReplayArgs) -> Result<Request, Failure> {
    let mode = Mode::parse(&a.mode)?;
    for (flag, v) in [("--width", a.width), ("--height", a.height)] {
        if v == 0 || v > 1 << 20 {
            return Err(Failure::bad_input(format!(
                "{flag} {v}: must be in 1..={}",
                1 << 20
            )));
        }
    }
    if a.width * a.height > MAX_PIXELS {
        return Err(Failure::bad_input(format!(
            "--width {} --height {}: {} pixels, more than the {MAX_PIXELS} this program renders",
            a.width,
            a.height,
            a.width * a.height
        )));
    }
    if a.threads > MAX_THREADS {
        return Err(Failure::bad_input(format!(
            "--threads {}: must be in 0..={MAX_THREADS} (0: all cores)",
            a.threads
        )));
    }
    if !(1..=1024).contains(&a.phases) {
        return Err(Failure::bad_input(format!(
            "--phases {}: must be in 1..=1024",
            a.phases
        )));
    }
    let format = match extension(&a.out) {
        Some("fits") => ImageFormat::Fits,
        Some("npy") => ImageFormat::Npy,
        _ => {
            return Err(Failure::bad_input(format!(
                "--out {}: the image ends in .fits (float32) or .npy (float64)",
                a.out.display()
            )))
        }
    };
    if format == ImageFormat::Fits {
        // cfitsio is handed a temporary name in the target's folder; it
        // parses brackets and parentheses in a path as its own syntax.
        let dir = a
            .out
            .parent()
            .map(Path::to_string_lossy)
            .unwrap_or_default();
        if dir.contains(['[', ']', '(', ')']) {
            return Err(Failure::bad_input(format!(
                "--out {}: cfitsio reads [ ] ( ) in a path as its extended file-name syntax; \
                 choose a folder without them",
                a.out.display()
            )));
        }
    }
    if let Some(png) = &a.png {
        if extension(png) != Some("png") {
            return Err(Failure::bad_input(format!(
                "--png {}: the preview ends in .png",
                png.display()
            )));
        }
    }
    Ok(Request { mode, format })
}

/// The PSF: the event file's header (or the defaults), each flag given
/// replacing its parameter.
fn psf_of(a: &ReplayArgs, header: Option<MoffatPsf>) -> Result<(MoffatPsf, String), Failure> {
    let base = header.unwrap_or_default();
    let psf = MoffatPsf {
        fwhm: a.fwhm.unwrap_or(base.fwhm),
        beta: a.beta.unwrap_or(base.beta),
        tail: a.tail.unwrap_or(base.tail),
    };
    psf.validate()
        .map_err(|e| Failure::bad_input(format!("--fwhm/--beta/--tail: {e}")))?;
    let given = [a.fwhm, a.beta, a.tail]
        .iter()
        .filter(|v| v.is_some())
        .count();
    let source = match (header.is_some(), given) {
        (_, 3) => "the flags",
        (true, 0) => "the event file's header",
        (true, _) => "the event file's header and the flags",
        (false, 0) => "the defaults",
        (false, _) => "the defaults and the flags",
    };
    Ok((psf, source.to_string()))
}

/// Opens GPU 0 for a device mode: the environment's failure when there
/// is none (exit status 1), as `hipkern force --backend device` reports it.
fn open_device(mode: SinkMode) -> Result<Device, Failure> {
    super::open_device(&format!("--mode {}", mode.name()), "use --mode cpu")
}

/// `--mode cpu`: the row-parallel CPU float64 sink, events too large for
/// the cache routed to the direct path.
fn replay_cpu(
    cache: Arc<PsfCache>,
    width: usize,
    height: usize,
    threads: usize,
    events: &[StarEvent],
) -> Result<Rendered, Failure> {
    let mut sink = CpuSink::parallel(cache, width, height, threads)?;
    let start = Instant::now();
    let direct = sink.accumulate_routed(events)?;
    let seconds = start.elapsed().as_secs_f64();
    let stats = sink.stats();
    Ok(Rendered {
        image: sink.into_image(),
        stats,
        direct,
        seconds,
        chunk_modes: None,
    })
}

/// A device mode: the device sink [`hipkern::psf::DeviceSink`]
/// (src/psf/device/) in `mode`, events too large for the cache routed to
/// its mid-stream direct path. The time includes the final download.
fn replay_device(
    device: &Device,
    mode: SinkMode,
    cache: Arc<PsfCache>,
    width: usize,
    height: usize,
    events: &[StarEvent],
) -> Result<Rendered, Failure> {
    let mut sink = hipkern::psf::DeviceSink::builder(device, cache, width, height)
        .mode(mode)
        .build()?;
    let start = Instant::now();
    let direct = sink.accumulate_routed(events)?;
    let image = sink.finish()?;
    let seconds = start.elapsed().as_secs_f64();
    let mut modes = [0usize; 3];
    for c in sink.chunk_log() {
        modes[match c.mode {
            ChunkMode::Atomic => 0,
            ChunkMode::Tile16 => 1,
            ChunkMode::Tile32 => 2,
        }] += 1;
    }
    Ok(Rendered {
        image,
        stats: sink.stats(),
        direct,
        seconds,
        chunk_modes: Some(modes),
    })
}

type ReplayReport = (Vec<String>, Option<Failure>);

fn execute_replay(a: &ReplayArgs) -> Result<ReplayReport, Failure> {
    let total = Instant::now();
    let request = check_replay_flags(a)?;
    // Outputs planned before the events are read: never the input, never
    // each other, each a regular file or a new one in an existing folder.
    let mut set = OutputSet::new();
    set.input("EVENTS", &a.events)?;
    let out = set.output("--out", &a.out)?;
    let png_out = match &a.png {
        Some(p) => Some(set.output("--png", p)?),
        None => None,
    };
    let file = read_events(&a.events)?;
    let (psf, psf_source) = psf_of(a, file.psf)?;
    let events = &file.events;
    // Before the cache is built: no device is a quick, clear failure.
    let device = match request.mode {
        Mode::Device(m) => Some(open_device(m)?),
        Mode::Cpu => None,
    };
    let mut lines = vec![format!(
        "input: {}: {}, {} events",
        a.events.display(),
        match file.format {
            EventFormat::Binary => "binary event file",
            EventFormat::Npy => "N×7 float64 .npy",
        },
        events.len()
    )];
    lines.push(format!(
        "psf: Moffat FWHM {} px, β {}, tail {:e} (from {psf_source}): α {} px, support radius {} px",
        psf.fwhm,
        psf.beta,
        psf.tail,
        psf.alpha(),
        psf.support_radius()
    ));
    let config = CacheConfig {
        phases: a.phases,
        threads: a.threads,
    };
    let cache = Arc::new(PsfCache::build_with(psf, &config)?);
    lines.push(format!(
        "cache: P = {}, {} stamps of radius {CACHE_RADIUS} px, {:.1} MiB, built in {:.3} s",
        cache.phases(),
        (cache.phases() + 1) * (cache.phases() + 1),
        cache.bytes() as f64 / (1u64 << 20) as f64,
        cache.build_time().as_secs_f64()
    ));
    let (w, h) = (a.width, a.height);
    let rendered = match (&device, request.mode) {
        (Some(device), Mode::Device(m)) => replay_device(device, m, cache.clone(), w, h, events)?,
        _ => replay_cpu(cache.clone(), w, h, a.threads, events)?,
    };
    let st = rendered.stats;
    lines.push(format!(
        "replay: mode {}, image {w}×{h}: events {}, chunks {}, contributions {}, direct {} \
         (support beyond the cache's {CACHE_RADIUS} px), outside {}, time {:.3} s",
        request.mode.name(),
        st.events,
        st.chunks,
        st.contributions,
        rendered.direct,
        st.outside,
        rendered.seconds
    ));
    if let Some([atomic, t16, t32]) = rendered.chunk_modes {
        lines.push(format!(
            "chunks by mode: atomic {atomic}, tile16 {t16}, tile32 {t32}"
        ));
    }
    let mut check_failure = None;
    if a.check {
        let start = Instant::now();
        let mut reference = CpuSink::new(cache.clone(), w, h)?;
        reference.accumulate_routed(events)?;
        let seconds = start.elapsed().as_secs_f64();
        let c = rendered.image.compare(reference.image())?;
        let verdict = c.accept(CHECK_TOL);
        lines.push(format!(
            "check: serial CPU reference ({seconds:.3} s): {c}: {}",
            if verdict.is_ok() {
                "accepted"
            } else {
                "REJECTED"
            }
        ));
        if let Err(e) = verdict {
            check_failure = Some(Failure::environment(format!(
                "--check: mode {} differs from the CPU reference beyond the acceptance test \
                 ({CHECK_TOL:e}): {e}",
                request.mode.name()
            )));
        }
    }
    let sums = rendered.image.sums();
    lines.push(format!(
        "image: flux R {:e} G {:e} B {:e} Y {:e}, peak {:e}",
        sums.r,
        sums.g,
        sums.b,
        sums.y,
        rendered.image.peak()
    ));
    let meta = ImageMeta {
        psf,
        phases: cache.phases(),
        events: st.events,
        direct: rendered.direct as u64,
        outside: st.outside,
        sink: request.mode.name().to_string(),
    };
    let image = &rendered.image;
    check_finite(image)?;
    match request.format {
        ImageFormat::Fits => set.stage_at_path(out, |p| {
            write_fits_new(p, image, &meta).map_err(|e| e.to_string())
        })?,
        ImageFormat::Npy => set.stage(out, |w| write_image_npy_to(w, image))?,
    }
    let mut white = 0.0;
    if let Some(id) = png_out {
        set.stage(id, |w| {
            white = write_png_to(w, image).map_err(io_error)?;
            Ok(())
        })?;
    }
    set.commit()?;
    let mut wrote = format!(
        "wrote: {} ({})",
        a.out.display(),
        match request.format {
            ImageFormat::Fits => "FITS float32, NAXIS1 = width, NAXIS2 = height, NAXIS3 = R, G, B",
            ImageFormat::Npy => "float64 (H, W, 3)",
        }
    );
    if let Some(png) = &a.png {
        wrote.push_str(&format!(
            ", {} (8-bit sRGB preview, asinh, white point Y = {:e})",
            png.display(),
            white
        ));
    }
    lines.push(wrote);
    lines.push(format!("total time {:.3} s", total.elapsed().as_secs_f64()));
    Ok((lines, check_failure))
}
