//! The subcommands of the `hipkern` program that do more than print
//! (binary-only: nothing here is part of the library's API).
pub mod demo;
pub mod force;
mod list1;
mod list1_device;
pub mod nearfield;
mod npy;
mod npz;
pub mod output;
pub mod psf;

use std::io::Write;
use std::process::ExitCode;

/// Why a subcommand stopped: the one-line message it prints and its exit
/// status (2 for what the caller got wrong, 1 for the machine or the file
/// system failing).
#[derive(Debug)]
pub struct Failure {
    message: String,
    exit_code: u8,
}

/// The exit status of a write to a closed pipe: what a shell reports for a
/// tool killed by SIGPIPE (128 + 13), which is how C tools stop there.
const CLOSED_PIPE: u8 = 141;

impl Failure {
    /// Wrong flags or input files (exit status 2, as clap's usage errors).
    pub fn bad_input(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            exit_code: 2,
        }
    }

    /// Not the caller's input: no device, a runtime error, an output that
    /// cannot be written (exit status 1).
    pub fn environment(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            exit_code: 1,
        }
    }

    /// Standard output could not be written. A closed pipe (`| head -1`)
    /// stops the program silently, as SIGPIPE stops C tools; anything else
    /// (a full disk behind `> file`) is the machine's failure.
    pub fn stdout(e: &std::io::Error) -> Failure {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Failure {
                message: String::new(),
                exit_code: CLOSED_PIPE,
            };
        }
        Failure::environment(format!("cannot write to standard output: {e}"))
    }

    /// Prints `<command>: error: <message>` as exactly one line on stderr
    /// and returns the exit status (a closed stdout: no line). A stderr that
    /// cannot be written loses the line, never panics.
    pub fn report(&self, command: &str) -> ExitCode {
        if self.exit_code != CLOSED_PIPE {
            let one_line = self.message.replace(['\n', '\r'], " ");
            let _ = writeln!(std::io::stderr(), "{command}: error: {one_line}");
        }
        ExitCode::from(self.exit_code)
    }
}

/// Writes `lines` to standard output, each with a newline, and flushes:
/// a closed pipe or a full disk is a [`Failure`], not a panic (`println!`
/// panics on both).
pub(crate) fn print_lines<S: AsRef<str>>(lines: &[S]) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    for l in lines {
        writeln!(out, "{}", l.as_ref()).map_err(|e| Failure::stdout(&e))?;
    }
    out.flush().map_err(|e| Failure::stdout(&e))
}

/// The bytes of an input file: a regular file (a device such as
/// `/dev/zero` or a FIFO could be read without end), no larger than this
/// machine can hold. `whose` names it in messages (`src (a.npy)`).
pub(crate) fn read_input(whose: &str, path: &std::path::Path) -> Result<Vec<u8>, Failure> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Failure::bad_input(format!("{whose}: cannot read: {e}")))?;
    if !meta.is_file() {
        return Err(Failure::bad_input(format!(
            "{whose}: not a regular file (a directory, device, FIFO or socket); \
             give the file itself"
        )));
    }
    hipkern::host_memory::check_available(meta.len(), &|| whose.to_string())?;
    std::fs::read(path).map_err(|e| Failure::bad_input(format!("{whose}: cannot read: {e}")))
}

/// A note on stderr (progress, what was chosen); lost, not a panic, when
/// stderr cannot be written.
pub(crate) fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

impl From<hipkern::Error> for Failure {
    fn from(e: hipkern::Error) -> Failure {
        match e {
            hipkern::Error::InvalidInput(_) => Failure::bad_input(message(&e)),
            _ => Failure::environment(e.to_string()),
        }
    }
}

/// A library error's message; the caller's input without the "invalid
/// input:" prefix (exit status 2 already says so).
pub(crate) fn message(e: &hipkern::Error) -> String {
    match e {
        hipkern::Error::InvalidInput(s) => s.clone(),
        _ => e.to_string(),
    }
}

/// GPU 0, or the machine's failure (exit status 1) in one line: `flag`
/// (e.g. `--backend device`) needs a usable device, there is none (the
/// runtime's reason), and `way_out` (e.g. `use --backend cpu`).
pub(crate) fn open_device(flag: &str, way_out: &str) -> Result<hipkern::runtime::Device, Failure> {
    hipkern::runtime::Device::new(0).map_err(|e| {
        Failure::environment(format!(
            "{flag} needs a usable device, and there is none ({e}); {way_out}"
        ))
    })
}

/// `(max |got − want|, that over max |want|)` (the plain difference where
/// `want` is all 0). A value of either that is not finite gives ∞ for both:
/// a poisoned value the device did not write must not read as agreement
/// (`f64::max` would drop a NaN).
pub(crate) fn max_difference(got: &[f64], want: &[f64]) -> (f64, f64) {
    if got.len() != want.len() || got.iter().chain(want).any(|v| !v.is_finite()) {
        return (f64::INFINITY, f64::INFINITY);
    }
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let diff = got
        .iter()
        .zip(want)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    (diff, if scale > 0.0 { diff / scale } else { diff })
}

#[cfg(test)]
mod tests {
    use super::max_difference;

    #[test]
    fn a_poisoned_value_is_no_agreement() {
        assert_eq!(max_difference(&[1.0, 2.0], &[1.0, 2.5]), (0.5, 0.2));
        assert_eq!(max_difference(&[0.0], &[0.0]), (0.0, 0.0));
        assert_eq!(max_difference(&[1e-3], &[0.0]), (1e-3, 1e-3));
        let inf = (f64::INFINITY, f64::INFINITY);
        assert_eq!(max_difference(&[1.0, f64::NAN], &[1.0, 2.0]), inf);
        assert_eq!(max_difference(&[f64::NAN, 2.0], &[1.0, 2.0]), inf);
        assert_eq!(max_difference(&[1.0], &[1.0, 2.0]), inf);
        assert_eq!(max_difference(&[1.0, 2.0], &[1.0, f64::NAN]), inf);
    }
}
