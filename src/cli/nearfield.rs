//! `hipkern nearfield`: near-field table entries (SPEC §5; the library side
//! is `hipkern::nearfield`), CPU float64.
//!
//! `hipkern nearfield entry` prints one entry `T[case, s, t]` with 17
//! significant digits. Every flag is checked here (kernel, case vector,
//! indices against `q^d`, λ present exactly for Yukawa, the derivative
//! spec), so that a wrong value is one line on stderr and exit status 2.
use super::Failure;
use clap::{Args, Subcommand};
use hipkern::nearfield::{entry, CaseRef, Cases, EntryQuadrature, Kernel, MAX_QUAD_ORDER};
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
}

/// Flags of `hipkern nearfield entry`. Kernel, case and derivative are
/// strings checked here (not by clap), so that every wrong value is reported
/// the same way.
#[derive(Args, Debug)]
pub struct EntryArgs {
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

/// Runs `hipkern nearfield <cmd>`: the result on stdout, or one error line
/// on stderr.
pub fn run(args: &NearfieldArgs) -> ExitCode {
    let result = match &args.command {
        NearfieldCommand::Entry(a) => execute_entry(a),
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
fn kernel_of(args: &EntryArgs) -> Result<Kernel, Failure> {
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

fn execute_entry(args: &EntryArgs) -> Result<String, Failure> {
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
    let cases = Cases::new(d)?;
    let c = parse_ints("--case", &args.case)?;
    if c.len() != d {
        return Err(Failure::bad_input(format!(
            "--case '{}': {} components, --dim is {d}",
            args.case,
            c.len()
        )));
    }
    if cases.id_of_vector(&c).is_none() {
        return Err(Failure::bad_input(format!(
            "--case '{}' is no interaction case of dimension {d} (components in \
             {{-4,0,4}}, {{±1,±3}} with a 3, or {{±2,±6}} with a 6)",
            args.case
        )));
    }
    let nq = args.q.pow(d as u32);
    for (flag, v) in [
        ("--source-mode", args.source_mode),
        ("--target-point", args.target_point),
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
        args.source_mode,
        args.target_point,
        args.extent,
        &EntryQuadrature::default(),
    )?;
    Ok(format!("{value:.16e}"))
}
