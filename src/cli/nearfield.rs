//! `hipkern nearfield`: near-field table entries (SPEC §5; the library side
//! is `hipkern::nearfield`), CPU float64.
//!
//! `hipkern nearfield entry` prints one entry `T[case, s, t]` with 17
//! significant digits. Every flag is checked here (kernel, case vector,
//! indices against `q^d`, λ present exactly for Yukawa, the derivative
//! spec), so that a wrong value is one line on stderr and exit status 2.
use super::npz::{write_npz, NpyArray, NpyData};
use super::Failure;
use clap::{Args, Subcommand};
use hipkern::nearfield::{
    entry, CaseRef, Cases, EntryQuadrature, Kernel, NearFieldTable, MAX_QUAD_ORDER,
};
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
    /// The dense table (every case, source mode, target point) into a .npz.
    Build(BuildArgs),
}

/// The flags that name a table: dimension, order, kernel, extent. Kernel
/// and derivative are strings checked here (not by clap), so that every
/// wrong value is reported the same way.
#[derive(Args, Debug)]
pub struct TableFlags {
    /// Dimension: 2 or 3.
    #[arg(long, value_name = "D")]
    dim: usize,
    /// Gauss–Legendre nodes per axis of the source box.
    #[arg(long, value_name = "Q")]
    q: usize,
    /// The kernel: laplace (2D −ln r/(2π), 3D 1/(4πr)), constant, or yukawa
    /// (needs --lambda).
    #[arg(long, value_name = "laplace|constant|yukawa")]
    kernel: String,
    /// Source box extent L (the box is [0, L]^D).
    #[arg(
        long,
        value_name = "L",
        default_value_t = 1.0,
        allow_hyphen_values = true
    )]
    extent: f64,
    /// Yukawa's screening parameter λ > 0 (yukawa only).
    #[arg(long, value_name = "X", allow_hyphen_values = true)]
    lambda: Option<f64>,
    /// A derivative of G(x − y) (axes 0-based): target:AXIS (∂/∂x_AXIS),
    /// source:AXIS (∂/∂y_AXIS) or direction:X,Y[,Z] (Σ d_k ∂/∂y_k, d as given).
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true)]
    derivative: Option<String>,
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
    /// Where the table goes (.npz: data, q_points, mode_normalizers,
    /// case_vecs, case_indices, dim, q, L, kernel, lambda, derivative).
    #[arg(long, value_name = "table.npz")]
    out: std::path::PathBuf,
}

/// Runs `hipkern nearfield <cmd>`: the result on stdout, or one error line
/// on stderr.
pub fn run(args: &NearfieldArgs) -> ExitCode {
    let result = match &args.command {
        NearfieldCommand::Entry(a) => execute_entry(a),
        NearfieldCommand::Build(a) => execute_build(a),
    };
    match result {
        Ok(out) => {
            println!("{out}");
            ExitCode::SUCCESS
        }
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
fn check_table_flags(args: &TableFlags) -> Result<Kernel, Failure> {
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
    kernel_of(args)
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

fn execute_build(build: &BuildArgs) -> Result<String, Failure> {
    let args = &build.table;
    let kernel = check_table_flags(args)?;
    let (d, q, l) = (args.dim, args.q, args.extent);
    let start = std::time::Instant::now();
    let table = NearFieldTable::build(&kernel, q, l, &EntryQuadrature::default())?;
    let seconds = start.elapsed().as_secs_f64();
    let cases = table.cases();
    let n_cases = cases.len();
    let case_vecs: Vec<i32> = (0..n_cases)
        .flat_map(|c| cases.vector(c).to_vec())
        .collect();
    let nq = q.pow(d as u32);
    let (dim_v, q_v, l_v) = ([d as i64], [q as i64], [l]);
    let lambda_v = [args.lambda.unwrap_or(f64::NAN)];
    let derivative = args.derivative.clone().unwrap_or_else(|| "none".into());
    let arrays = [
        NpyArray {
            name: "data",
            shape: vec![table.data().len()],
            data: NpyData::F64(table.data()),
        },
        NpyArray {
            name: "q_points",
            shape: vec![nq, d],
            data: NpyData::F64(table.q_points()),
        },
        NpyArray {
            name: "mode_normalizers",
            shape: vec![nq],
            data: NpyData::F64(table.mode_normalizers()),
        },
        NpyArray {
            name: "case_vecs",
            shape: vec![n_cases, d],
            data: NpyData::I32(&case_vecs),
        },
        NpyArray {
            name: "case_indices",
            shape: vec![table.case_indices().len()],
            data: NpyData::I32(table.case_indices()),
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
    ];
    write_npz(&build.out, &arrays)?;
    Ok(format!(
        "hipkern nearfield: {} entries ({n_cases} cases × {nq}² modes and points) in {seconds:.2} s: wrote {}",
        table.data().len(),
        build.out.display()
    ))
}
