//! The error type of the whole crate.
use std::ffi::CStr;
use std::fmt;

/// Everything that can go wrong in hipkern. Runtime failures carry the
/// runtime's own code, name and message (`hipGetErrorName` /
/// `hipGetErrorString`, or their CUDA equivalents on NVIDIA).
///
/// Non-exhaustive: later versions may add variants, so a `match` outside
/// this crate needs a wildcard arm.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The crate was built for the `cpu` platform: no device code exists.
    NoToolchain {
        /// Always "cpu"; named so the message says which build this is.
        platform: &'static str,
    },
    /// A device ordinal out of range (the runtime itself worked).
    NoDevice {
        /// What was asked for and what exists.
        reason: String,
    },
    /// The device's architecture is not among those this build compiled
    /// device code for (nothing was launched).
    ArchNotCompiled {
        /// The device asked for.
        ordinal: usize,
        /// Its name.
        device_name: String,
        /// Its architecture, e.g. `gfx90a:sramecc+:xnack-` or `sm_90`.
        device_arch: String,
        /// The architectures compiled in.
        compiled: Vec<String>,
        /// "amd" or "nvidia": says which variable rebuilds it.
        platform: &'static str,
    },
    /// A runtime call failed.
    Runtime {
        /// The entry point that failed, e.g. `hipkern_malloc`.
        call: &'static str,
        /// The runtime's code (positive) or hipkern's (negative).
        code: i32,
        /// The runtime's name for the code.
        name: String,
        /// The runtime's message for the code.
        message: String,
    },
    /// Input that the caller got wrong, named.
    InvalidInput(String),
    /// A host allocation this work needs cannot be made: more than the
    /// machine has, or the allocator refused it. Nothing was written.
    HostMemory {
        /// What needed it, e.g. `the PSF cache's 1,050,625 stamps`.
        what: String,
        /// Bytes it needs.
        needed_bytes: u64,
        /// Bytes the machine reports available (`MemAvailable` plus free
        /// swap on Linux), where known.
        available_bytes: Option<u64>,
    },
    /// A file could not be read or written for a reason of the machine
    /// (a full disk, a folder without write permission), not of its
    /// contents.
    Io {
        /// What was being done, e.g. `cannot write table.npz`.
        action: String,
        /// The operating system's message.
        message: String,
    },
    /// A chunk needed more of a bounded scratch buffer than it has. The
    /// chunk was not applied (the image is as before it) and the owner is
    /// still usable: split the chunk, or choose another mode.
    ScratchExceeded {
        /// Which buffer, e.g. `references`.
        buffer: &'static str,
        /// Bytes the chunk needs.
        needed_bytes: u64,
        /// Bytes the buffer has.
        capacity_bytes: u64,
        /// Events of the call accumulated before the refused chunk (the
        /// refused chunk and the ones after it were not).
        accumulated_events: usize,
    },
}

impl Error {
    /// Builds a `Runtime` error from a status code of the C ABI.
    pub fn from_status(call: &'static str, code: i32) -> Error {
        if code == hipkern_sys::HIPKERN_ERROR_NO_TOOLCHAIN {
            return Error::NoToolchain {
                platform: hipkern_sys::PLATFORM,
            };
        }
        // SAFETY: both return static NUL-terminated strings for any code (never NULL).
        let (name, message) = unsafe {
            (
                cstr_lossy(hipkern_sys::hipkern_error_name(code)),
                cstr_lossy(hipkern_sys::hipkern_error_string(code)),
            )
        };
        Error::Runtime {
            call,
            code,
            name,
            message,
        }
    }

    /// The runtime's code, when this is a runtime error.
    pub fn runtime_code(&self) -> Option<i32> {
        match self {
            Error::Runtime { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// # Safety
/// `p` is NULL or a valid NUL-terminated string.
pub(crate) unsafe fn cstr_lossy(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller guarantees a valid C string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoToolchain { platform } => write!(
                f,
                "hipkern was built for the {platform} platform (no HIP or CUDA compiler was found at build time): no device is usable; the CPU paths work"
            ),
            Error::NoDevice { reason } => write!(f, "no usable device: {reason}"),
            Error::ArchNotCompiled {
                ordinal,
                device_name,
                device_arch,
                compiled,
                platform,
            } => {
                let base = device_arch.split(':').next().unwrap_or(device_arch);
                let var = if *platform == "nvidia" {
                    "HIPKERN_CUDA_ARCH"
                } else {
                    "HIPKERN_OFFLOAD_ARCH"
                };
                write!(
                    f,
                    "device {ordinal} ({device_name}) is {device_arch}, but this build of hipkern \
                     holds device code for {} only: rebuild with {var}={base} (a comma-separated \
                     list for several{}), e.g. `{var}={base} cargo build --release`",
                    compiled.join(", "),
                    if *platform == "nvidia" {
                        ""
                    } else {
                        "; `native` takes this machine's GPUs"
                    }
                )
            }
            Error::Runtime { call, code, name, message } => {
                write!(f, "{call} failed: {name} ({code}): {message}")
            }
            Error::InvalidInput(s) => write!(f, "invalid input: {s}"),
            Error::HostMemory {
                what,
                needed_bytes,
                available_bytes,
            } => {
                if *needed_bytes == u64::MAX {
                    // bytes_of's overflow: the size is not even a 64-bit number.
                    write!(f, "out of host memory: {what} needs more than 2^64 bytes")?;
                } else {
                    write!(
                        f,
                        "out of host memory: {what} needs {needed_bytes} bytes ({:.1} GiB)",
                        *needed_bytes as f64 / GIB
                    )?;
                }
                match available_bytes {
                    Some(a) => write!(
                        f,
                        ", and this machine has {a} bytes ({:.1} GiB) available",
                        *a as f64 / GIB
                    ),
                    None => write!(f, ", and the allocator refused it"),
                }
            }
            Error::Io { action, message } => write!(f, "{action}: {message}"),
            Error::ScratchExceeded {
                buffer,
                needed_bytes,
                capacity_bytes,
                accumulated_events,
            } => write!(
                f,
                "scratch buffer `{buffer}` exceeded: the chunk needs {needed_bytes} bytes, the \
                 buffer has {capacity_bytes}; the chunk was not applied (the first \
                 {accumulated_events} events of the call were); split the chunk or choose the \
                 atomic mode"
            ),
        }
    }
}

const GIB: f64 = (1u64 << 30) as f64;

impl std::error::Error for Error {}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// Turns a C ABI status into a `Result`.
pub(crate) fn check(call: &'static str, status: i32) -> Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(Error::from_status(call, status))
    }
}
