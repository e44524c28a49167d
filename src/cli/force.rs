//! `hipkern force`: force and per-atom virial from per-edge gradients in
//! `.npy` files (`docs/design/force.md`; the library side is `hipkern::force`).
//!
//! The order is what makes errors safe: flags are checked, every input is
//! read and checked, the assembly runs, the frame totals are summed, and
//! only then are the outputs written, as one set (`output.rs`): planned
//! before any input is read, put in place all or none. So any error leaves
//! every output file as it was.
use super::npy::{self, Dtype, Indices, Rows, Values};
use super::npz::write_npy;
use super::output::{OutputId, OutputSet};
use super::Failure;
use clap::Args;
use hipkern::force::{
    assemble_atomic_device_into, assemble_device, assemble_reference_f64, assemble_with_plan,
    frame_virials, voigt, Assembly, CsrPlan, DeviceEdges, DeviceIndex, DevicePlan, DeviceReal,
    Frames, GhostMapping, VirialSplit,
};
use hipkern::{Device, Stream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Flags of `hipkern force`. Backend, split and output dtype are plain
/// strings checked here (not by clap), so that a wrong value is reported
/// like every other input error: one line, no output written.
#[derive(Args, Debug)]
pub struct ForceArgs {
    /// Source atom of each edge: 1-D int32 or int64, length E.
    #[arg(long, value_name = "S.npy")]
    src: PathBuf,
    /// Destination atom of each edge: 1-D int32 or int64, length E.
    #[arg(long, value_name = "D.npy")]
    dst: PathBuf,
    /// Per-edge gradient dE/d(edge_vec): E×3, float32 or float64.
    #[arg(long, value_name = "G.npy")]
    g: PathBuf,
    /// Edge vector r_src − r_dst: E×3, the dtype of --g.
    #[arg(long, value_name = "V.npy")]
    edge_vec: PathBuf,
    /// Number of (extended) atoms: every src and dst index is in [0, N).
    #[arg(long, value_name = "N")]
    n_ext: usize,
    /// Local owner of each extended atom (1-D int32 or int64, length N, values in
    /// [0, L)): ghost atoms are folded into their owners. Needs --n-local.
    #[arg(long, value_name = "M.npy")]
    mapping: Option<PathBuf>,
    /// Number of local atoms: the output rows with --mapping.
    #[arg(long, value_name = "L")]
    n_local: Option<usize>,
    /// Where each edge's virial −g⊗edge_vec goes: half to each endpoint, or all to src.
    #[arg(long, value_name = "half|src", default_value = "half")]
    split: String,
    /// device: segment reduction on GPU 0; cpu: the same on the host; device-atomic:
    /// atomic scatters on GPU 0, in the input precision; reference: a direct float64 loop.
    #[arg(
        long,
        value_name = "device|cpu|device-atomic|reference",
        default_value = "device"
    )]
    backend: String,
    /// Precision of force and virial: f64, or input (float32 inputs: the float64
    /// result rounded once to float32).
    #[arg(long, value_name = "f64|input", default_value = "f64")]
    out_dtype: String,
    /// Frames of S consecutive output rows, for the per-frame virial.
    #[arg(long, value_name = "S")]
    frame_size: Option<usize>,
    /// Frame of each output row (1-D int32 or int64, values in [0, K)), for the
    /// per-frame virial. Needs --n-frames.
    #[arg(long, value_name = "FID.npy")]
    frame_ids: Option<PathBuf>,
    /// Number of frames named by --frame-ids.
    #[arg(long, value_name = "K")]
    n_frames: Option<usize>,
    /// Per-frame virial: frames×9 float64 (needs --frame-size or --frame-ids).
    #[arg(long, value_name = "FV.npy")]
    out_frame_virial: Option<PathBuf>,
    /// Per-frame virial in LAMMPS' Voigt order xx, yy, zz, xy, xz, yz: frames×6 float64.
    #[arg(long, value_name = "FVV.npy")]
    out_frame_voigt: Option<PathBuf>,
    /// Force: rows×3 (rows = N, or L with --mapping).
    #[arg(long, value_name = "F.npy")]
    out_force: PathBuf,
    /// Per-atom virial: rows×9 (each a row-major 3×3).
    #[arg(long, value_name = "W.npy")]
    out_virial: PathBuf,
}

/// Runs the subcommand: one summary line on stdout, or one error line on stderr.
pub fn run(args: &ForceArgs) -> ExitCode {
    match execute(args) {
        Ok(summary) => match super::print_lines(&[summary]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(failure) => failure.report("hipkern force"),
        },
        Err(failure) => failure.report("hipkern force"),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    Device,
    Cpu,
    DeviceAtomic,
    Reference,
}

impl Backend {
    const ALL: [Backend; 4] = [
        Backend::Device,
        Backend::Cpu,
        Backend::DeviceAtomic,
        Backend::Reference,
    ];

    fn name(self) -> &'static str {
        match self {
            Backend::Device => "device",
            Backend::Cpu => "cpu",
            Backend::DeviceAtomic => "device-atomic",
            Backend::Reference => "reference",
        }
    }

    fn parse(s: &str) -> Result<Backend, Failure> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| {
                Failure::bad_input(format!(
                    "unknown --backend '{s}' (device, cpu, device-atomic or reference)"
                ))
            })
    }
}

fn parse_split(s: &str) -> Result<VirialSplit, Failure> {
    match s {
        "half" => Ok(VirialSplit::Half),
        "src" => Ok(VirialSplit::Src),
        _ => Err(Failure::bad_input(format!(
            "unknown --split '{s}' (half or src)"
        ))),
    }
}

/// The precision of force and virial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutDtype {
    F64,
    /// The inputs' precision.
    Input,
}

fn parse_out_dtype(s: &str) -> Result<OutDtype, Failure> {
    match s {
        "f64" => Ok(OutDtype::F64),
        "input" => Ok(OutDtype::Input),
        _ => Err(Failure::bad_input(format!(
            "unknown --out-dtype '{s}' (f64 or input)"
        ))),
    }
}

/// How output rows are grouped into frames.
enum FrameSpec<'a> {
    Size(usize),
    Ids { path: &'a Path, n_frames: usize },
}

/// The flags, checked for consistency before any file is read.
struct Request<'a> {
    backend: Backend,
    split: VirialSplit,
    out_dtype: OutDtype,
    ghosts: Option<(&'a Path, usize)>,
    frames: Option<FrameSpec<'a>>,
}

impl<'a> Request<'a> {
    fn from_args(args: &'a ForceArgs) -> Result<Request<'a>, Failure> {
        let backend = Backend::parse(&args.backend)?;
        let split = parse_split(&args.split)?;
        let out_dtype = parse_out_dtype(&args.out_dtype)?;
        let ghosts = match (&args.mapping, args.n_local) {
            (Some(path), Some(n_local)) => Some((path.as_path(), n_local)),
            (None, None) => None,
            (Some(_), None) => {
                return Err(Failure::bad_input(
                    "--mapping needs --n-local (the number of local atoms)",
                ))
            }
            (None, Some(_)) => {
                return Err(Failure::bad_input(
                    "--n-local needs --mapping (the owner of each extended atom)",
                ))
            }
        };
        let frames = match (args.frame_size, &args.frame_ids, args.n_frames) {
            (Some(_), Some(_), _) => {
                return Err(Failure::bad_input(
                    "--frame-size and --frame-ids exclude each other",
                ))
            }
            (Some(size), None, None) => Some(FrameSpec::Size(size)),
            (Some(_), None, Some(_)) => {
                return Err(Failure::bad_input(
                    "--n-frames goes with --frame-ids, not --frame-size",
                ))
            }
            (None, Some(path), Some(n_frames)) => Some(FrameSpec::Ids { path, n_frames }),
            (None, Some(_), None) => {
                return Err(Failure::bad_input(
                    "--frame-ids needs --n-frames (the number of frames)",
                ))
            }
            (None, None, Some(_)) => {
                return Err(Failure::bad_input("--n-frames needs --frame-ids"))
            }
            (None, None, None) => None,
        };
        if frames.is_none() {
            for (flag, given) in [
                ("--out-frame-virial", args.out_frame_virial.is_some()),
                ("--out-frame-voigt", args.out_frame_voigt.is_some()),
            ] {
                if given {
                    return Err(Failure::bad_input(format!(
                        "{flag} needs --frame-size or --frame-ids"
                    )));
                }
            }
        }
        if let Some(FrameSpec::Ids { n_frames, .. }) = frames {
            // Before any input is read: a frame count whose totals this
            // machine cannot hold is refused up front.
            let what = || format!("--n-frames {n_frames}: the virial totals of {n_frames} frames");
            let bytes = hipkern::host_memory::bytes_of::<[f64; 9]>(n_frames as u128, &what)?;
            hipkern::host_memory::check_available(bytes, &what)?;
        }
        Ok(Request {
            backend,
            split,
            out_dtype,
            ghosts,
            frames,
        })
    }
}

/// The output flags given, each with its path.
fn output_paths(args: &ForceArgs) -> Vec<(&'static str, &Path)> {
    let mut outs = vec![
        ("--out-force", args.out_force.as_path()),
        ("--out-virial", args.out_virial.as_path()),
    ];
    if let Some(p) = &args.out_frame_virial {
        outs.push(("--out-frame-virial", p));
    }
    if let Some(p) = &args.out_frame_voigt {
        outs.push(("--out-frame-voigt", p));
    }
    outs
}

/// The input flags given, each with its path.
fn input_paths(args: &ForceArgs) -> Vec<(&'static str, &Path)> {
    let mut ins = vec![
        ("--src", args.src.as_path()),
        ("--dst", args.dst.as_path()),
        ("--g", args.g.as_path()),
        ("--edge-vec", args.edge_vec.as_path()),
    ];
    if let Some(p) = &args.mapping {
        ins.push(("--mapping", p));
    }
    if let Some(p) = &args.frame_ids {
        ins.push(("--frame-ids", p));
    }
    ins
}

/// Each output flag given and its place in the output set.
type PlannedOutputs = Vec<(&'static str, OutputId)>;

/// The output set: every input named, every output planned (checked and
/// its temporary file reserved) before any input is read. Returns the ids
/// of force, virial, frame virial and frame Voigt outputs.
fn plan_outputs(args: &ForceArgs) -> Result<(OutputSet, PlannedOutputs), Failure> {
    let mut set = OutputSet::new();
    for (flag, path) in input_paths(args) {
        set.input(flag, path)?;
    }
    let mut ids = Vec::new();
    for (flag, path) in output_paths(args) {
        ids.push((flag, set.output(flag, path)?));
    }
    Ok((set, ids))
}

/// Shapes that agree with each other: src and dst of one length E, g and
/// edge_vec E×3 of one dtype. Returns E.
fn check_edge_shapes(
    src: &Indices,
    dst: &Indices,
    g: &Rows,
    edge_vec: &Rows,
) -> Result<usize, Failure> {
    let n_edges = src.len();
    if dst.len() != n_edges {
        return Err(Failure::bad_input(format!(
            "src has {n_edges} entries but dst has {}",
            dst.len()
        )));
    }
    for (name, rows) in [("g", g), ("edge_vec", edge_vec)] {
        if rows.n_rows != n_edges {
            return Err(Failure::bad_input(format!(
                "{name} has {} rows but src and dst have {n_edges} edges (want ({n_edges}, 3))",
                rows.n_rows
            )));
        }
    }
    let (g_dtype, r_dtype) = (g.values.dtype(), edge_vec.values.dtype());
    if g_dtype != r_dtype {
        return Err(Failure::bad_input(format!(
            "g is {g_dtype} but edge_vec is {r_dtype}: both must have the same dtype"
        )));
    }
    Ok(n_edges)
}

/// Force (rows×3) and virial (rows×9) in the precision the backend
/// produced: float64, or the input precision for device-atomic.
struct Computed {
    force: Values,
    virial: Values,
}

impl From<Assembly> for Computed {
    fn from(a: Assembly) -> Computed {
        Computed {
            force: Values::F64(a.force),
            virial: Values::F64(a.virial),
        }
    }
}

/// One edge set in one index type and one precision.
struct EdgeSet<'a, T, I> {
    g: &'a [T],
    edge_vec: &'a [T],
    src: &'a [I],
    dst: &'a [I],
    n_ext: usize,
    ghosts: Option<GhostMapping<'a>>,
}

fn execute(args: &ForceArgs) -> Result<String, Failure> {
    let request = Request::from_args(args)?;
    let (mut set, ids) = plan_outputs(args)?;

    let src = npy::read_indices("src", &args.src)?;
    let dst = npy::read_indices("dst", &args.dst)?;
    let g = npy::read_rows("g", &args.g, 3)?;
    let edge_vec = npy::read_rows("edge_vec", &args.edge_vec, 3)?;
    let n_edges = check_edge_shapes(&src, &dst, &g, &edge_vec)?;
    let input_dtype = g.values.dtype();
    let mapping = match request.ghosts {
        Some((path, _)) => Some(npy::read_indices("mapping", path)?.as_i64().into_owned()),
        None => None,
    };
    let frame_ids = match request.frames {
        Some(FrameSpec::Ids { path, .. }) => {
            Some(npy::read_indices("frame_ids", path)?.as_i64().into_owned())
        }
        _ => None,
    };
    let ghosts = match (&mapping, request.ghosts) {
        (Some(mapping), Some((_, n_local))) => Some(GhostMapping { mapping, n_local }),
        _ => None,
    };

    let n_rows = ghosts.map_or(args.n_ext, |g| g.n_local);
    // Force and virial, float64, and their copies in the output precision.
    let what = || format!("the force and virial of {n_rows} rows");
    let bytes = hipkern::host_memory::bytes_of::<f64>(2 * 12 * n_rows as u128, &what)?;
    hipkern::host_memory::check_available(bytes, &what)?;
    let computed = assemble(
        request.backend,
        &src,
        &dst,
        &g.values,
        &edge_vec.values,
        args.n_ext,
        ghosts,
        request.split,
    )?;

    // Frame totals from the float64 virial (or the atomic path's, widened),
    // before any rounding to the output precision.
    let frames = match (&request.frames, &frame_ids) {
        (Some(FrameSpec::Size(size)), _) => Some(("--frame-size", Frames::Size(*size))),
        (Some(FrameSpec::Ids { n_frames, .. }), Some(frame_of)) => Some((
            "--frame-ids",
            Frames::Ids {
                frame_of,
                n_frames: *n_frames,
            },
        )),
        _ => None,
    };
    let frame_totals = match frames {
        Some((flag, frames)) => Some(
            frame_virials(&computed.virial.as_f64(), frames)
                .map_err(|e| Failure::bad_input(format!("{flag}: {e}")))?,
        ),
        None => None,
    };

    let out_dtype = match request.out_dtype {
        OutDtype::F64 => Dtype::F64,
        OutDtype::Input => input_dtype,
    };
    let force = computed.force.into_dtype(out_dtype);
    let virial = computed.virial.into_dtype(out_dtype);
    let (frame_virial, frame_voigt) = match &frame_totals {
        Some(totals) => (
            Values::F64(totals.iter().flatten().copied().collect()),
            Values::F64(totals.iter().flat_map(voigt).collect()),
        ),
        None => (Values::F64(Vec::new()), Values::F64(Vec::new())),
    };
    let n_frames = frame_totals.as_ref().map_or(0, Vec::len);
    for &(flag, id) in &ids {
        let (shape, values) = match flag {
            "--out-force" => ([n_rows, 3], &force),
            "--out-virial" => ([n_rows, 9], &virial),
            "--out-frame-virial" => ([n_frames, 9], &frame_virial),
            _ => ([n_frames, 6], &frame_voigt),
        };
        set.stage(id, |w| write_npy(w, &shape, &values.as_npy()))?;
    }
    set.commit()?;

    let written: Vec<String> = output_paths(args)
        .iter()
        .map(|(_, p)| p.display().to_string())
        .collect();
    Ok(format!(
        "hipkern force: backend {}, {n_edges} edges, {n_rows} rows, {input_dtype} in, {out_dtype} out: wrote {}",
        request.backend.name(),
        written.join(", ")
    ))
}

/// Picks the element and index types, then runs the backend. Index arrays
/// of different widths are both widened to int64.
// One argument per input array and option; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
fn assemble(
    backend: Backend,
    src: &Indices,
    dst: &Indices,
    g: &Values,
    edge_vec: &Values,
    n_ext: usize,
    ghosts: Option<GhostMapping<'_>>,
    split: VirialSplit,
) -> Result<Computed, Failure> {
    fn with_indices<T: DeviceReal>(
        backend: Backend,
        src: &Indices,
        dst: &Indices,
        g: &[T],
        edge_vec: &[T],
        n_ext: usize,
        ghosts: Option<GhostMapping<'_>>,
        split: VirialSplit,
    ) -> Result<Computed, Failure>
    where
        Vec<T>: Into<Values>,
    {
        match (src, dst) {
            (Indices::I32(src), Indices::I32(dst)) => assemble_typed(
                backend,
                &EdgeSet {
                    g,
                    edge_vec,
                    src,
                    dst,
                    n_ext,
                    ghosts,
                },
                split,
            ),
            _ => {
                let (src, dst) = (src.as_i64(), dst.as_i64());
                assemble_typed(
                    backend,
                    &EdgeSet {
                        g,
                        edge_vec,
                        src: &src,
                        dst: &dst,
                        n_ext,
                        ghosts,
                    },
                    split,
                )
            }
        }
    }
    match (g, edge_vec) {
        (Values::F32(g), Values::F32(r)) => {
            with_indices(backend, src, dst, g, r, n_ext, ghosts, split)
        }
        (Values::F64(g), Values::F64(r)) => {
            with_indices(backend, src, dst, g, r, n_ext, ghosts, split)
        }
        // check_edge_shapes rejects mixed precisions before this point.
        _ => Err(Failure::bad_input(
            "g and edge_vec must have the same dtype",
        )),
    }
}

fn assemble_typed<T: DeviceReal, I: DeviceIndex>(
    backend: Backend,
    edges: &EdgeSet<'_, T, I>,
    split: VirialSplit,
) -> Result<Computed, Failure>
where
    Vec<T>: Into<Values>,
{
    let EdgeSet {
        g,
        edge_vec,
        src,
        dst,
        n_ext,
        ghosts,
    } = *edges;
    Ok(match backend {
        Backend::Reference => {
            assemble_reference_f64(g, edge_vec, src, dst, n_ext, ghosts, split)?.into()
        }
        Backend::Cpu => {
            let plan = CsrPlan::build(src, dst, n_ext, ghosts)?;
            assemble_with_plan(&plan, g, edge_vec, split)?.into()
        }
        Backend::Device => assemble_on_device(backend, edges, split)?,
        Backend::DeviceAtomic => assemble_atomic_on_device(backend, edges, split)?,
    })
}

/// GPU 0 and a stream on it, or an error that says there is none.
fn open_device(backend: Backend) -> Result<(Device, Stream), Failure> {
    let device = super::open_device(
        &format!("--backend {}", backend.name()),
        "use --backend cpu",
    )?;
    let stream = device.new_stream()?;
    Ok((device, stream))
}

fn assemble_on_device<T: DeviceReal, I: DeviceIndex>(
    backend: Backend,
    edges: &EdgeSet<'_, T, I>,
    split: VirialSplit,
) -> Result<Computed, Failure> {
    let (device, stream) = open_device(backend)?;
    // Built on the device (indices checked there, same messages as the host).
    let plan =
        DevicePlan::build_from_host(&stream, edges.src, edges.dst, edges.n_ext, edges.ghosts)?;
    let g = device.htod_copy(edges.g)?;
    let edge_vec = device.htod_copy(edges.edge_vec)?;
    let (force, virial) = assemble_device(&stream, &plan, &g, &edge_vec, split)?;
    // The stream is non-blocking: wait for it before copying back.
    stream.synchronize()?;
    Ok(Assembly {
        force: force.to_vec()?,
        virial: virial.to_vec()?,
    }
    .into())
}

fn assemble_atomic_on_device<T: DeviceReal, I: DeviceIndex>(
    backend: Backend,
    edges: &EdgeSet<'_, T, I>,
    split: VirialSplit,
) -> Result<Computed, Failure>
where
    Vec<T>: Into<Values>,
{
    let (device, stream) = open_device(backend)?;
    let endpoints = DeviceEdges::upload(&device, edges.src, edges.dst, edges.n_ext, edges.ghosts)?;
    let n_rows = endpoints.n_rows();
    let g = device.htod_copy(edges.g)?;
    let edge_vec = device.htod_copy(edges.edge_vec)?;
    // The kernel zeroes force and virial itself; `outer` is its E×9 scratch.
    let mut outer = device.alloc::<T>(9 * edges.src.len())?;
    let mut force = device.alloc::<T>(3 * n_rows)?;
    let mut virial = device.alloc::<T>(9 * n_rows)?;
    assemble_atomic_device_into(
        &stream,
        &endpoints,
        &g,
        &edge_vec,
        split,
        &mut outer,
        &mut force,
        &mut virial,
    )?;
    stream.synchronize()?;
    Ok(Computed {
        force: force.to_vec()?.into(),
        virial: virial.to_vec()?.into(),
    })
}
