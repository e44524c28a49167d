//! The `hipkern` program.
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
    /// Platform and architectures compiled for, runtime version, devices.
    Info,
}

fn info() -> ExitCode {
    let archs = runtime::compiled_archs();
    println!(
        "hipkern {} (C ABI v{})",
        env!("CARGO_PKG_VERSION"),
        hipkern_sys::HIPKERN_ABI_VERSION
    );
    println!(
        "platform: {}   compiled for: {}",
        runtime::platform(),
        if archs.is_empty() {
            "no device code".to_string()
        } else {
            archs.join(", ")
        }
    );
    if runtime::platform() == "cpu" {
        println!("devices: none usable: built without a HIP or CUDA compiler (cpu platform); CPU paths only");
        return ExitCode::SUCCESS;
    }
    match runtime::runtime_version() {
        Ok(v) => println!("runtime version: {v}"),
        Err(e) => println!("runtime version: unknown ({e})"),
    }
    match runtime::driver_version() {
        Ok(v) => println!("driver version: {v}"),
        Err(e) => println!("driver version: unknown ({e})"),
    }
    let n = match runtime::device_count() {
        Ok(n) => n,
        Err(e) => {
            println!("devices: none usable: {e}");
            return ExitCode::SUCCESS;
        }
    };
    if n == 0 {
        println!("devices: none visible");
    }
    for i in 0..n {
        match runtime::Device::new(i) {
            Ok(d) => {
                let p = d.properties();
                println!(
                    "device {i}: {} ({}), {:.1} GiB, {} compute units, warp/wavefront {}",
                    p.name,
                    p.arch_name,
                    p.total_memory as f64 / (1u64 << 30) as f64,
                    p.multiprocessors,
                    p.warp_size
                );
                if !archs.is_empty()
                    && !archs
                        .iter()
                        .any(|a| a.split(':').next() == Some(p.arch_name.as_str()))
                {
                    println!("  note: {} is not among the compiled architectures; kernels may not launch", p.arch_name);
                }
            }
            Err(e) => println!("device {i}: not usable: {e}"),
        }
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Info => info(),
    }
}
