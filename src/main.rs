//! The `hipkern` program.
mod cli;

use clap::{Parser, Subcommand};
use hipkern::runtime;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "hipkern",
    version,
    about = "HIP GPU kernels: near-field tables, force/virial assembly, PSF sink"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The main job: every primitive once (device when usable, else CPU),
    /// checked against its float64 CPU reference; a summary table; the
    /// PSF image as FITS and PNG.
    Demo(cli::demo::DemoArgs),
    /// Platform and architectures compiled for, runtime version, devices.
    Info,
    /// Force and per-atom virial from per-edge gradients (.npy in, .npy out).
    // Boxed: the flags are many paths, the other variants none.
    Force(Box<cli::force::ForceArgs>),
    /// Near-field interaction table entries (CPU float64).
    Nearfield(cli::nearfield::NearfieldArgs),
    /// PSF sink: write a seeded fixture's events, replay events into an image.
    Psf(cli::psf::PsfArgs),
}

fn info() -> ExitCode {
    match cli::print_lines(&info_lines()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report("hipkern info"),
    }
}

/// What `hipkern info` prints.
fn info_lines() -> Vec<String> {
    let archs = runtime::compiled_archs();
    let mut lines = vec![
        format!(
            "hipkern {} (C ABI v{})",
            env!("CARGO_PKG_VERSION"),
            hipkern_sys::HIPKERN_ABI_VERSION
        ),
        format!(
            "platform: {}   compiled for: {}",
            runtime::platform(),
            if archs.is_empty() {
                "no device code".to_string()
            } else {
                archs.join(", ")
            }
        ),
    ];
    if runtime::platform() == "cpu" {
        lines.push("devices: none usable: built without a HIP or CUDA compiler (cpu platform); CPU paths only".to_string());
        return lines;
    }
    let version = |v| runtime::format_runtime_version(runtime::platform(), v);
    lines.push(format!(
        "built against: {} ({})",
        version(runtime::build_runtime_version()),
        runtime::build_runtime_version()
    ));
    lines.push(match runtime::runtime_version() {
        Ok(v) => format!("runtime version: {} ({v})", version(v)),
        Err(e) => format!("runtime version: unknown ({e})"),
    });
    lines.push(match runtime::driver_version() {
        Ok(v) => format!("driver version: {v}"),
        Err(e) => format!("driver version: unknown ({e})"),
    });
    let n = match runtime::device_count() {
        Ok(n) => n,
        Err(e) => {
            lines.push(format!("devices: none usable: {e}"));
            return lines;
        }
    };
    if n == 0 {
        lines.push("devices: none visible".to_string());
    }
    for i in 0..n {
        lines.push(match runtime::Device::new(i) {
            Ok(d) => {
                let p = d.properties();
                format!(
                    "device {i}: {} ({}), {:.1} GiB, {} compute units, warp/wavefront {}",
                    p.name,
                    p.arch_name,
                    p.total_memory as f64 / (1u64 << 30) as f64,
                    p.multiprocessors,
                    p.warp_size
                )
            }
            Err(e) => format!("device {i}: not usable: {e}"),
        });
    }
    lines
}

fn main() -> ExitCode {
    cli::output::install_signal_cleanup();
    // Usage errors as one line, like every other error of the program
    // (`hipkern: error: ...`, exit 2); --help and --version print as usual.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
                || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            {
                e.exit();
            }
            let rendered = e.render().to_string();
            // clap's message is its first paragraph (then tips and usage).
            let paragraph: Vec<&str> = rendered
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let joined = paragraph.join(" ");
            let message = joined.trim_start_matches("error: ");
            // Named after the subcommand when there is one, as its other errors are.
            let sub = std::env::args()
                .nth(1)
                .filter(|a| a == "force" || a == "info" || a == "nearfield" || a == "psf");
            let (prefix, help) = match &sub {
                Some(sub) => (format!("hipkern {sub}"), format!("hipkern {sub} --help")),
                None => ("hipkern".to_string(), "hipkern --help".to_string()),
            };
            cli::note(&format!("{prefix}: error: {message} (see {help})"));
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::Demo(args) => cli::demo::run(&args),
        Command::Info => info(),
        Command::Force(args) => cli::force::run(&args),
        Command::Nearfield(args) => cli::nearfield::run(&args),
        Command::Psf(args) => cli::psf::run(&args),
    }
}
