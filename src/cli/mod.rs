//! The subcommands of the `hipkern` program that do more than print
//! (binary-only: nothing here is part of the library's API).
pub mod demo;
pub mod force;
mod list1;
mod list1_device;
pub mod nearfield;
mod npy;
mod npz;
pub mod psf;

use std::process::ExitCode;

/// Why a subcommand stopped: the one-line message it prints and its exit
/// status (2 for what the caller got wrong, 1 for the machine or the file
/// system failing).
#[derive(Debug)]
pub struct Failure {
    message: String,
    exit_code: u8,
}

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

    /// Prints `<command>: error: <message>` as exactly one line on stderr
    /// and returns the exit status.
    pub fn report(&self, command: &str) -> ExitCode {
        let one_line = self.message.replace(['\n', '\r'], " ");
        eprintln!("{command}: error: {one_line}");
        ExitCode::from(self.exit_code)
    }
}

impl From<hipkern::Error> for Failure {
    fn from(e: hipkern::Error) -> Failure {
        match e {
            hipkern::Error::InvalidInput(_) => Failure::bad_input(e.to_string()),
            _ => Failure::environment(e.to_string()),
        }
    }
}
