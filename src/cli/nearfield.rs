//! `hipkern nearfield`: near-field table entries (`docs/design/nearfield.md`;
//! the library side is `hipkern::nearfield`), CPU float64.
//!
//! `hipkern nearfield entry` prints one entry `T[case, s, t]` with 17
//! significant digits. Every flag is checked here (kernel, case vector,
//! indices against `q^d`, λ present exactly for Yukawa, the derivative
//! spec), so that a wrong value is one line on stderr and exit status 2.
use super::npz::{write_npz, NpyArray, NpyData};
use super::output::{OutputId, OutputSet};
use super::Failure;
use clap::{Args, Subcommand};
use hipkern::nearfield::{
    entry, CacheKey, CachedTable, CaseRef, Cases, DenseOrbits, EntryQuadrature,
    FallbackDescriptors, Kernel, List1Layout, List1Payload, List1ReducedTables, NearFieldTable,
    OrbitDescriptors, ReducedTable, SymmetryMode, TableCache, MAX_QUAD_ORDER,
};
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags of `hipkern nearfield`.
#[derive(Args, Debug)]
pub struct NearfieldArgs {
    #[command(subcommand)]
    command: NearfieldCommand,
}

#[derive(Subcommand, Debug)]
enum NearfieldCommand {
    /// One table entry T[case, source mode, target point], 17 significant digits.
    Entry(EntryArgs),
    /// A table into a .npz and/or the SQLite cache: dense (--symmetry none)
    /// or symmetry-reduced (--symmetry full).
    Build(BuildArgs),
    /// Sizes of a table and of its symmetry layouts (no quadrature).
    Stats(StatsArgs),
    /// List 1 of a density over a generated 2:1 tree, on the device or the CPU.
    List1(List1Args),
}

/// The flags that name a table: dimension, order, kernel, extent. Kernel
/// and derivative are strings checked here (not by clap), so that every
/// wrong value is reported the same way.
#[derive(Args, Debug)]
pub struct TableFlags {
    /// Dimension: 2 or 3.
    #[arg(long, value_name = "D")]
    pub(super) dim: usize,
    /// Gauss–Legendre nodes per axis of the source box.
    #[arg(long, value_name = "Q")]
    pub(super) q: usize,
    /// The kernel: laplace (2D −ln r/(2π), 3D 1/(4πr)), constant, or yukawa
    /// (needs --lambda).
    #[arg(long, value_name = "laplace|constant|yukawa")]
    pub(super) kernel: String,
    /// Source box extent L (the box is [0, L]^D).
    #[arg(
        long,
        value_name = "L",
        default_value_t = 1.0,
        allow_hyphen_values = true
    )]
    pub(super) extent: f64,
    /// Yukawa's screening parameter λ > 0 (yukawa only).
    #[arg(long, value_name = "X", allow_hyphen_values = true)]
    pub(super) lambda: Option<f64>,
    /// A derivative of G(x − y) (axes 0-based): target:AXIS (∂/∂x_AXIS),
    /// source:AXIS (∂/∂y_AXIS) or direction:X,Y[,Z] (Σ d_k ∂/∂y_k, d as given).
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true)]
    pub(super) derivative: Option<String>,
}

/// Flags of `hipkern nearfield entry`.
#[derive(Args, Debug)]
pub struct EntryArgs {
    #[command(flatten)]
    table: TableFlags,
    /// Case vector c = 4·(center_t − center_s)/h_s, D comma-separated integers
    /// (e.g. 0,0 or -4,4,0).
    #[arg(long, value_name = "C1,C2[,C3]", allow_hyphen_values = true)]
    case: String,
    /// Source mode s in 0..q^D (flat index, axis 0 slowest).
    #[arg(long, value_name = "S")]
    source_mode: usize,
    /// Target point t in 0..q^D (flat index, axis 0 slowest).
    #[arg(long, value_name = "T")]
    target_point: usize,
}

/// Flags of `hipkern nearfield build`.
#[derive(Args, Debug)]
pub struct BuildArgs {
    #[command(flatten)]
    table: TableFlags,
    /// Where the table goes (.npz: data or reduced_entry_ids + reduced_data
    /// and the layout's descriptors, q_points, mode_normalizers, case_vecs,
    /// case_indices, dim, q, L, kernel, lambda, derivative, symmetry).
    #[arg(long, value_name = "table.npz")]
    out: Option<PathBuf>,
    /// none: the dense table; full: one value per orbit of the kernel's
    /// symmetry group (only representatives are computed).
    #[arg(long, value_name = "none|full", default_value = "none")]
    symmetry: String,
    /// SQLite table cache (schema 2.1.0, created if missing): the table is
    /// read from it when present, else built and stored. A table stored
    /// there stays even if writing --out fails afterwards (it is correct).
    #[arg(long, value_name = "FILE.db")]
    cache: Option<PathBuf>,
    /// Builds the table even when the cache has it, and replaces the
    /// cache's entry (the way out of a corrupt entry).
    #[arg(long, requires = "cache")]
    rebuild: bool,
}

/// Flags of `hipkern nearfield list1` (src/cli/list1.rs).
#[derive(Args, Debug)]
pub struct List1Args {
    /// The table (its --extent is the table's, default 1; the tree's root
    /// box is [0, 1]^D).
    #[command(flatten)]
    pub(super) table: TableFlags,
    /// random:SEED:LEVELS (an adaptive 2:1-balanced tree, deepest level
    /// LEVELS) or uniform:LEVEL (2^(D·LEVEL) leaves).
    #[arg(long, value_name = "random:SEED:LEVELS|uniform:LEVEL")]
    pub(super) tree: String,
    /// Table layout on the device: dense, orbit (arithmetic ORBIT) or
    /// fallback (generated descriptors).
    #[arg(long, value_name = "dense|orbit|fallback", default_value = "dense")]
    pub(super) layout: String,
    /// device (GPU 0) or cpu (the float64 CPU evaluator).
    #[arg(long, value_name = "device|cpu", default_value = "device")]
    pub(super) backend: String,
    /// The device's result contract: fast (within 1e-13 relative max-norm
    /// of the CPU evaluator, the fastest kernel for the tree) or exact (bit
    /// for bit the CPU evaluator). The report names the kernel chosen.
    #[arg(long, value_name = "fast|exact", default_value = "fast")]
    pub(super) contract: String,
    /// Source values: a float64/float32 .npy of shape (n_boxes, q^D), per
    /// leaf (in the tree's order) at its nodes; default: the smooth density
    /// of src/cli/list1.rs at the nodes.
    #[arg(long, value_name = "FILE.npy")]
    pub(super) density: Option<PathBuf>,
    /// Writes the tree (.npz: centers, extents, levels, list1_starts,
    /// list1_sources, points, root_lower, root_extent, dim, q).
    #[arg(long, value_name = "TREE.npz")]
    pub(super) tree_out: Option<PathBuf>,
    /// Writes the potential at every point, float64 (n_boxes, q^D).
    #[arg(long, value_name = "U.npy")]
    pub(super) out: Option<PathBuf>,
}

/// Flags of `hipkern nearfield stats`.
#[derive(Args, Debug)]
pub struct StatsArgs {
    #[command(flatten)]
    table: TableFlags,
}

/// Runs `hipkern nearfield <cmd>`: the result on stdout, or one error line
/// on stderr.
pub fn run(args: &NearfieldArgs) -> ExitCode {
    let result = match &args.command {
        NearfieldCommand::Entry(a) => execute_entry(a),
        NearfieldCommand::Build(a) => execute_build(a),
        NearfieldCommand::Stats(a) => execute_stats(a),
        NearfieldCommand::List1(a) => super::list1::execute(a).map(|lines| lines.join("\n")),
    };
    match result.and_then(|out| super::print_lines(&[out])) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report("hipkern nearfield"),
    }
}

fn parse_ints(what: &str, s: &str) -> Result<Vec<i32>, Failure> {
    s.split(',')
        .map(|p| {
            p.trim().parse::<i32>().map_err(|_| {
                Failure::bad_input(format!(
                    "{what} '{s}': '{p}' is not an integer (comma-separated integers expected)"
                ))
            })
        })
        .collect()
}

fn parse_floats(what: &str, s: &str) -> Result<Vec<f64>, Failure> {
    s.split(',')
        .map(|p| match p.trim().parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err(Failure::bad_input(format!(
                "{what} '{s}': '{p}' is not a finite number"
            ))),
        })
        .collect()
}

/// The kernel named by --kernel, --lambda and --derivative, checked.
fn kernel_of(args: &TableFlags) -> Result<Kernel, Failure> {
    let d = args.dim;
    let base = match (args.kernel.as_str(), args.lambda) {
        ("laplace", None) => Kernel::laplace(d),
        ("constant", None) => Kernel::constant(d),
        ("yukawa", Some(lambda)) => {
            if !(lambda.is_finite() && lambda > 0.0) {
                return Err(Failure::bad_input(format!(
                    "--lambda {lambda}: must be finite and positive"
                )));
            }
            Kernel::yukawa(d, lambda)
        }
        ("yukawa", None) => {
            return Err(Failure::bad_input(
                "--kernel yukawa needs --lambda (the screening parameter, > 0)",
            ))
        }
        ("laplace" | "constant", Some(_)) => {
            return Err(Failure::bad_input(format!(
                "--lambda is only for --kernel yukawa, not {}",
                args.kernel
            )))
        }
        (other, _) => {
            return Err(Failure::bad_input(format!(
                "unknown --kernel '{other}' (laplace, constant or yukawa)"
            )))
        }
    }?;
    let Some(spec) = &args.derivative else {
        return Ok(base);
    };
    let bad_spec = || {
        Failure::bad_input(format!(
            "--derivative '{spec}': expected target:AXIS, source:AXIS or direction:X,Y{}",
            if d == 3 { ",Z" } else { "" }
        ))
    };
    let (kind, rest) = spec.split_once(':').ok_or_else(bad_spec)?;
    let axis = || -> Result<usize, Failure> {
        let a: usize = rest.trim().parse().map_err(|_| bad_spec())?;
        if a >= d {
            return Err(Failure::bad_input(format!(
                "--derivative '{spec}': axis {a} out of range 0..{d} (axes are 0-based)"
            )));
        }
        Ok(a)
    };
    let k = match kind {
        "target" => base.axis_target_derivative(axis()?),
        "source" => base.axis_source_derivative(axis()?),
        "direction" => {
            let v = parse_floats("--derivative direction", rest)?;
            if v.len() != d {
                return Err(Failure::bad_input(format!(
                    "--derivative '{spec}': direction has {} components, --dim is {d}",
                    v.len()
                )));
            }
            base.directional_source_derivative(&v)
        }
        _ => return Err(bad_spec()),
    }?;
    Ok(k)
}

/// Dimension, order and extent in range, and the kernel they name.
pub(super) fn check_table_flags(args: &TableFlags) -> Result<Kernel, Failure> {
    let d = args.dim;
    if d != 2 && d != 3 {
        return Err(Failure::bad_input(format!("--dim {d}: must be 2 or 3")));
    }
    if args.q == 0 || args.q > MAX_QUAD_ORDER {
        return Err(Failure::bad_input(format!(
            "--q {}: must be in 1..={MAX_QUAD_ORDER}",
            args.q
        )));
    }
    if !(args.extent.is_finite() && args.extent > 0.0) {
        return Err(Failure::bad_input(format!(
            "--extent {}: must be finite and positive",
            args.extent
        )));
    }
    let kernel = kernel_of(args)?;
    // The ranges whose results float64 represents (extent, Yukawa's λ·L,
    // a direction's components), refused before any work or file.
    hipkern::nearfield::check_kernel_and_extent(&kernel, args.extent)
        .map_err(|e| Failure::bad_input(super::message(&e)))?;
    Ok(kernel)
}

/// [`check_table_flags`] for commands that build whole tables: also the
/// table's size against the limit (`nearfield stats` refuses the same).
pub(super) fn check_table_flags_sized(args: &TableFlags) -> Result<Kernel, Failure> {
    let kernel = check_table_flags(args)?;
    hipkern::nearfield::check_table_size(args.dim, args.q).map_err(|e| {
        Failure::bad_input(format!(
            "--dim {} --q {}: {}",
            args.dim,
            args.q,
            super::message(&e)
        ))
    })?;
    Ok(kernel)
}

fn execute_entry(entry_args: &EntryArgs) -> Result<String, Failure> {
    let args = &entry_args.table;
    let kernel = check_table_flags(args)?;
    let d = args.dim;
    let cases = Cases::new(d)?;
    let c = parse_ints("--case", &entry_args.case)?;
    if c.len() != d {
        return Err(Failure::bad_input(format!(
            "--case '{}': {} components, --dim is {d}",
            entry_args.case,
            c.len()
        )));
    }
    if cases.id_of_vector(&c).is_none() {
        return Err(Failure::bad_input(format!(
            "--case '{}' is no interaction case of dimension {d} (components in \
             {{-4,0,4}}, {{±1,±3}} with a 3, or {{±2,±6}} with a 6)",
            entry_args.case
        )));
    }
    let nq = args.q.pow(d as u32);
    for (flag, v) in [
        ("--source-mode", entry_args.source_mode),
        ("--target-point", entry_args.target_point),
    ] {
        if v >= nq {
            return Err(Failure::bad_input(format!(
                "{flag} {v} out of range 0..{nq} (q^{d} with q = {})",
                args.q
            )));
        }
    }
    let value = entry(
        &kernel,
        args.q,
        CaseRef::Vector(&c),
        entry_args.source_mode,
        entry_args.target_point,
        args.extent,
        &EntryQuadrature::default(),
    )?;
    Ok(format!("{value:.16e}"))
}

/// The cache's failures are the machine's (exit status 1), not bad flags.
pub(super) fn cache_failure(path: &std::path::Path, e: hipkern::Error) -> Failure {
    Failure::environment(format!(
        "--cache {}: {}",
        path.display(),
        super::message(&e)
    ))
}

fn execute_build(build: &BuildArgs) -> Result<String, Failure> {
    let args = &build.table;
    let kernel = check_table_flags_sized(args)?;
    let symmetry = match build.symmetry.as_str() {
        "none" => SymmetryMode::None,
        "full" => SymmetryMode::Full,
        other => {
            return Err(Failure::bad_input(format!(
                "unknown --symmetry '{other}' (none or full)"
            )))
        }
    };
    if build.out.is_none() && build.cache.is_none() {
        return Err(Failure::bad_input(
            "nothing to write: give --out table.npz, --cache FILE.db or both",
        ));
    }
    // The output planned, and checked against the cache file, before the
    // cache is opened (or created) and before any work.
    let mut set = OutputSet::new();
    if let Some(p) = &build.cache {
        set.input("--cache", p)?;
    }
    let out = match &build.out {
        Some(p) => Some(set.output("--out", p)?),
        None => None,
    };
    let (d, q, l) = (args.dim, args.q, args.extent);
    let quad = EntryQuadrature::default();
    let key = CacheKey::new(&kernel, q, l, &quad, symmetry)?;
    let cache = match &build.cache {
        Some(p) => Some((TableCache::open(p).map_err(|e| cache_failure(p, e))?, p)),
        None => None,
    };
    let start = std::time::Instant::now();
    let cached = match &cache {
        Some(_) if build.rebuild => None,
        Some((c, p)) => c.get(&key).map_err(|e| cache_failure(p, e))?,
        None => None,
    };
    let from_cache = cached.is_some();
    let table = match cached {
        Some(t) => t,
        None => match symmetry {
            SymmetryMode::None => CachedTable::Dense(NearFieldTable::build(&kernel, q, l, &quad)?),
            SymmetryMode::Full => CachedTable::Reduced(ReducedTable::build(&kernel, q, l, &quad)?),
        },
    };
    let seconds = start.elapsed().as_secs_f64();
    if let Some(id) = out {
        stage_table_npz(&mut set, id, args, &table)?;
    }
    let mut stored = false;
    if let Some((c, p)) = &cache {
        if !from_cache {
            match &table {
                CachedTable::Dense(t) => c.put_dense(t),
                CachedTable::Reduced(t) => c.put_reduced(t),
            }
            .map_err(|e| cache_failure(p, e))?;
            stored = true;
        }
    }
    let what = match &table {
        CachedTable::Dense(t) => format!(
            "dense table, {} entries ({} cases × {}² modes and points)",
            t.data().len(),
            t.cases().len(),
            q.pow(d as u32)
        ),
        CachedTable::Reduced(t) if from_cache => format!(
            "reduced table, {} representatives of {} entries",
            t.reduced_data().len(),
            t.n_full_entries()
        ),
        CachedTable::Reduced(t) => format!(
            "reduced table, {} representatives of {} entries ({} quadrature passes)",
            t.reduced_data().len(),
            t.n_full_entries(),
            t.quadrature_passes()
        ),
    };
    let mut report = match (&cache, from_cache) {
        (Some((_, p)), true) => {
            format!("{what}: read from cache {} in {seconds:.2} s", p.display())
        }
        (Some((_, p)), false) => format!(
            "{what}: built in {seconds:.2} s, stored in cache {}{}",
            p.display(),
            if stored { "" } else { " (not stored)" }
        ),
        (None, _) => format!("{what}: built in {seconds:.2} s"),
    };
    set.commit()?;
    if let Some(out) = &build.out {
        report.push_str(&format!(": wrote {}", out.display()));
    }
    Ok(format!("hipkern nearfield: {report}"))
}

/// The online layout of a reduced table: the arithmetic ORBIT payload
/// where the kernel's group is modelled, else the generated descriptor
/// fallback (directional derivatives); one table as a per-level list, so
/// kernels without a scaling rule (Yukawa) are accepted too.
fn payload_of(t: &ReducedTable) -> Result<List1Payload, Failure> {
    let tables = List1ReducedTables::PerLevel(std::slice::from_ref(t));
    Ok(List1Payload::from_reduced(&tables, List1Layout::Orbit)
        .or_else(|_| List1Payload::from_reduced(&tables, List1Layout::Fallback))?)
}

fn stage_table_npz(
    set: &mut OutputSet,
    id: OutputId,
    args: &TableFlags,
    table: &CachedTable,
) -> Result<(), Failure> {
    let (d, q, l) = (args.dim, args.q, args.extent);
    let (cases, q_points, normalizers) = match table {
        CachedTable::Dense(t) => (t.cases(), t.q_points(), t.mode_normalizers()),
        CachedTable::Reduced(t) => (t.cases(), t.q_points(), t.mode_normalizers()),
    };
    let n_cases = cases.len();
    let case_vecs: Vec<i32> = (0..n_cases)
        .flat_map(|c| cases.vector(c).to_vec())
        .collect();
    let nq = q.pow(d as u32);
    let (dim_v, q_v, l_v) = ([d as i64], [q as i64], [l]);
    let lambda_v = [args.lambda.unwrap_or(f64::NAN)];
    let derivative = args.derivative.clone().unwrap_or_else(|| "none".into());
    let symmetry = match table {
        CachedTable::Dense(_) => "none",
        CachedTable::Reduced(_) => "full",
    };
    let mut arrays = vec![
        NpyArray {
            name: "q_points",
            shape: vec![nq, d],
            data: NpyData::F64(q_points),
        },
        NpyArray {
            name: "mode_normalizers",
            shape: vec![nq],
            data: NpyData::F64(normalizers),
        },
        NpyArray {
            name: "case_vecs",
            shape: vec![n_cases, d],
            data: NpyData::I32(&case_vecs),
        },
        NpyArray {
            name: "case_indices",
            shape: vec![cases.case_indices().len()],
            data: NpyData::I32(cases.case_indices()),
        },
        NpyArray {
            name: "dim",
            shape: vec![],
            data: NpyData::I64(&dim_v),
        },
        NpyArray {
            name: "q",
            shape: vec![],
            data: NpyData::I64(&q_v),
        },
        NpyArray {
            name: "L",
            shape: vec![],
            data: NpyData::F64(&l_v),
        },
        NpyArray {
            name: "kernel",
            shape: vec![],
            data: NpyData::Str(&args.kernel),
        },
        // NaN unless --kernel yukawa.
        NpyArray {
            name: "lambda",
            shape: vec![],
            data: NpyData::F64(&lambda_v),
        },
        NpyArray {
            name: "derivative",
            shape: vec![],
            data: NpyData::Str(&derivative),
        },
        NpyArray {
            name: "symmetry",
            shape: vec![],
            data: NpyData::Str(symmetry),
        },
    ];
    let payload;
    let probe;
    match table {
        CachedTable::Dense(t) => arrays.push(NpyArray {
            name: "data",
            shape: vec![t.data().len()],
            data: NpyData::F64(t.data()),
        }),
        CachedTable::Reduced(t) => {
            arrays.push(NpyArray {
                name: "reduced_entry_ids",
                shape: vec![t.reduced_entry_ids().len()],
                data: NpyData::U32(t.reduced_entry_ids()),
            });
            arrays.push(NpyArray {
                name: "reduced_data",
                shape: vec![t.reduced_data().len()],
                data: NpyData::F64(t.reduced_data()),
            });
            payload = payload_of(t)?;
            match (payload.orbit_descriptors(), payload.fallback_descriptors()) {
                (Some(o), _) => {
                    arrays.push(NpyArray {
                        name: "layout",
                        shape: vec![],
                        data: NpyData::Str("orbit"),
                    });
                    arrays.push(NpyArray {
                        // T[c, s, t] = slot.sign · orbit_rows[slot.row].
                        name: "orbit_rows",
                        shape: vec![payload.values().len()],
                        data: NpyData::F64(payload.values()),
                    });
                    arrays.push(NpyArray {
                        name: "case_orbit_ranks",
                        shape: vec![n_cases],
                        data: NpyData::U16(&o.case_orbit_ranks),
                    });
                    for (name, v) in [
                        ("case_axis_perm", &o.case_axis_perm),
                        ("case_axis_group", &o.case_axis_group),
                    ] {
                        arrays.push(NpyArray {
                            name,
                            shape: vec![n_cases, d],
                            data: NpyData::U8(v),
                        });
                    }
                    arrays.push(NpyArray {
                        name: "case_axis_sign",
                        shape: vec![n_cases, d],
                        data: NpyData::I8(&o.case_axis_sign),
                    });
                    arrays.push(NpyArray {
                        name: "case_value_offsets",
                        shape: vec![o.case_value_offsets.len()],
                        data: NpyData::U32(&o.case_value_offsets),
                    });
                    arrays.push(NpyArray {
                        name: "axis_sign_power",
                        shape: vec![d],
                        data: NpyData::U8(&o.axis_sign_power),
                    });
                }
                (None, Some(f)) => {
                    probe = [i64::from(f.probe_count)];
                    let nt = f.n_transforms();
                    arrays.push(NpyArray {
                        name: "layout",
                        shape: vec![],
                        data: NpyData::Str("fallback"),
                    });
                    arrays.push(NpyArray {
                        name: "transform_qpoint_map",
                        shape: vec![nt, nq],
                        data: NpyData::U16(&f.transform_qpoint_map),
                    });
                    arrays.push(NpyArray {
                        name: "transform_case_map",
                        shape: vec![nt, n_cases],
                        data: NpyData::U8(&f.transform_case_map),
                    });
                    arrays.push(NpyArray {
                        name: "transform_signs",
                        shape: vec![nt],
                        data: NpyData::I8(&f.transform_signs),
                    });
                    for (name, v) in [
                        ("representative_lookup_keys", &f.representative_lookup_keys),
                        ("representative_lookup_rows", &f.representative_lookup_rows),
                        ("sign_lookup_ids", &f.sign_lookup_ids),
                    ] {
                        arrays.push(NpyArray {
                            name,
                            shape: vec![v.len()],
                            data: NpyData::U32(v),
                        });
                    }
                    arrays.push(NpyArray {
                        name: "sign_lookup_signs",
                        shape: vec![f.sign_lookup_signs.len()],
                        data: NpyData::I8(&f.sign_lookup_signs),
                    });
                    arrays.push(NpyArray {
                        name: "probe_count",
                        shape: vec![],
                        data: NpyData::I64(&probe),
                    });
                }
                (None, None) => {
                    return Err(Failure::environment(
                        "a reduced table's payload has neither ORBIT nor fallback descriptors",
                    ))
                }
            }
        }
    }
    set.stage(id, |w| write_npz(w, &arrays))
}

fn execute_stats(stats: &StatsArgs) -> Result<String, Failure> {
    let args = &stats.table;
    let kernel = check_table_flags_sized(args)?;
    let q = args.q;
    let oracle = DenseOrbits::build(&kernel, q)?;
    let full = oracle.canonical_entry_ids.len();
    let zero_orbits = oracle.zero_by_symmetry.iter().filter(|&&z| z).count();
    let mut lines = vec![
        format!("full entries: {full}"),
        format!(
            "representative rows: {} ({zero_orbits} of them zero by symmetry, {} entries)",
            oracle.n_representatives(),
            oracle.zero_entries
        ),
    ];
    match OrbitDescriptors::build(&kernel, q) {
        Ok(o) => {
            lines.push(format!("case orbits: {}", o.n_case_orbits()));
            lines.push(format!(
                "metadata bytes (arithmetic ORBIT: case_orbit_ranks, case_axis_perm, \
                 case_axis_sign, case_axis_group, case_value_offsets, axis_sign_power): {}",
                o.metadata_bytes()
            ));
        }
        Err(_) => {
            lines.push(
                "case orbits: n/a (the arithmetic ORBIT path does not model this kernel's group)"
                    .into(),
            );
            lines.push(
                "metadata bytes (arithmetic ORBIT): n/a, this kernel uses the descriptor fallback"
                    .into(),
            );
        }
    }
    let f = FallbackDescriptors::prepare(&kernel, q)?;
    lines.push(format!(
        "fallback metadata bytes: {} ({} transforms, lookup {} slots, probe count {}, {} sign corrections)",
        f.metadata_bytes(),
        f.n_transforms(),
        f.representative_lookup_keys.len(),
        f.probe_count,
        f.sign_lookup_ids.len()
    ));
    lines.push(format!(
        "dense-map bytes (int32 canonical_entry_ids + float64 canonical_scales): {}",
        oracle.dense_map_bytes()
    ));
    Ok(lines.join("\n"))
}
