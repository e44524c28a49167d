//! Devices: an `Arc`-shared handle per GPU ordinal.
use super::buffer::{DeviceBuffer, DeviceRepr};
use super::error::{check, cstr_lossy, Error, Result};
use super::stream::Stream;
use hipkern_sys as sys;
use std::sync::{Arc, Mutex};

/// Static properties of a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProperties {
    /// Marketing name.
    pub name: String,
    /// Architecture: `gfx1201` on AMD, `sm_90` on NVIDIA.
    pub arch_name: String,
    /// Global memory in bytes.
    pub total_memory: u64,
    /// Compute units (AMD) or streaming multiprocessors (NVIDIA).
    pub multiprocessors: i32,
    /// Wavefront or warp size.
    pub warp_size: i32,
    /// Compute capability or gfx version, major part.
    pub major: i32,
    /// Minor part.
    pub minor: i32,
    /// Shared memory (LDS) per block in bytes.
    pub shared_mem_per_block: u64,
    /// Largest block.
    pub max_threads_per_block: i32,
    /// PCI bus id.
    pub pci_bus_id: i32,
}

pub(crate) struct DeviceInner {
    pub(crate) ordinal: i32,
    pub(crate) props: DeviceProperties,
    /// Errors from frees in `Drop` (which cannot return them), kept for
    /// `Device::take_free_errors` instead of being lost or panicking.
    pub(crate) free_errors: Mutex<Vec<Error>>,
}

/// One GPU. Cheap to clone (an `Arc`); buffers and streams keep theirs alive.
///
/// Nothing is global: every operation makes this device current on the
/// calling thread for its own length only (`hipGetDevice`, and
/// `hipSetDevice` when another device is current) and restores the
/// caller's current device before it returns, so a process may hold one
/// `Device` per GPU, use them from any threads, and mix hipkern with its
/// own HIP/CUDA calls without hipkern changing the device those calls go
/// to. [`Device::bind`] is the one call that changes the thread's current
/// device on purpose.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

// Send/Sync: the handle is an ordinal, immutable properties and a Mutex.
// The HIP/CUDA runtime API is thread-safe, and each call makes the ordinal
// current on its own thread (DeviceScope), so no state is shared across
// threads unsafely.
// (Arc<DeviceInner> is already Send + Sync; this comment records why that is
// sound for the runtime, too.)

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Device({}: {})",
            self.inner.ordinal, self.inner.props.name
        )
    }
}

/// The platform this build is for: "amd", "nvidia" or "cpu".
pub fn platform() -> &'static str {
    hipkern_sys::PLATFORM
}

/// The device architectures compiled in (empty on cpu).
pub fn compiled_archs() -> Vec<String> {
    // SAFETY: returns a static NUL-terminated string.
    let s = unsafe { cstr_lossy(sys::hipkern_compiled_archs()) };
    s.split(',')
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect()
}

/// The runtime version the kernel layer was compiled against
/// (`hipkern_build_runtime_version`): HIP_VERSION on AMD, CUDART_VERSION on
/// NVIDIA, 0 on cpu. [`format_runtime_version`] spells it out.
pub fn build_runtime_version() -> i32 {
    // SAFETY: a plain call without arguments.
    unsafe { sys::hipkern_build_runtime_version() }
}

/// A runtime version number as people write it: `HIP 6.4.43484` on AMD
/// (major·10^7 + minor·10^5 + patch), `CUDA 13.0` on NVIDIA
/// (major·1000 + minor·10); `none` for 0.
pub fn format_runtime_version(platform: &str, v: i32) -> String {
    match (platform, v) {
        (_, 0) => "none".into(),
        ("amd", v) => format!(
            "HIP {}.{}.{}",
            v / 10_000_000,
            v / 100_000 % 100,
            v % 100_000
        ),
        ("nvidia", v) => format!("CUDA {}.{}", v / 1000, v % 1000 / 10),
        (_, v) => v.to_string(),
    }
}

/// Whether device code compiled for `compiled` runs on a device of
/// architecture `device_arch` (as [`DeviceProperties::arch_name`] spells
/// it).
///
/// AMD: a code object runs on its own processor only, so the base names
/// must be equal (`gfx90a` of `gfx90a:sramecc+:xnack-`); a target feature
/// the build named (`gfx90a:xnack+`) must be the device's setting where
/// the device states one, while an unnamed feature runs either way.
/// NVIDIA: the build embeds SASS for each `sm_N` and its PTX, which the
/// driver compiles for any newer device; architecture-specific targets
/// (`sm_90a`, `sm_100f`) carry no portable PTX and run on their own
/// major.minor only.
pub fn arch_is_compiled(device_arch: &str, compiled: &[String]) -> bool {
    compiled.iter().any(|c| arch_runs(device_arch, c))
}

fn arch_runs(device_arch: &str, compiled: &str) -> bool {
    if let (Some(dev), Some(built)) = (
        device_arch.strip_prefix("sm_"),
        compiled.strip_prefix("sm_"),
    ) {
        let number = |s: &str| s.trim_end_matches(['a', 'f']).parse::<u32>().ok();
        let (Some(d), Some(b)) = (number(dev), number(built)) else {
            return false;
        };
        let portable = built.ends_with(|c: char| c.is_ascii_digit());
        return d == b || (portable && d > b);
    }
    let mut dev = device_arch.split(':');
    let mut built = compiled.split(':');
    if dev.next() != built.next() {
        return false;
    }
    let dev_features: Vec<&str> = dev.collect();
    built.all(|f| {
        let name = f.trim_end_matches(['+', '-']);
        dev_features
            .iter()
            .find(|d| d.trim_end_matches(['+', '-']) == name)
            .is_none_or(|d| *d == f)
    })
}

/// The runtime's version number.
pub fn runtime_version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: v is a valid out-pointer.
    check("hipkern_runtime_version", unsafe {
        sys::hipkern_runtime_version(&mut v)
    })?;
    Ok(v)
}

/// The installed driver's version (0 when no driver is installed).
pub fn driver_version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: v is a valid out-pointer.
    check("hipkern_driver_version", unsafe {
        sys::hipkern_driver_version(&mut v)
    })?;
    Ok(v)
}

/// Number of visible devices, or the runtime's reason there are none.
pub fn device_count() -> Result<usize> {
    let mut n = 0;
    // SAFETY: n is a valid out-pointer.
    check("hipkern_device_count", unsafe {
        sys::hipkern_device_count(&mut n)
    })?;
    Ok(n.max(0) as usize)
}

impl Device {
    /// Opens device `ordinal`. On the cpu platform: `Error::NoToolchain`;
    /// without a driver or a device: the runtime's own error; a device
    /// whose architecture the build holds no code for
    /// ([`arch_is_compiled`]): `Error::ArchNotCompiled`, naming both.
    pub fn new(ordinal: usize) -> Result<Device> {
        let n = device_count()?;
        if ordinal >= n {
            return Err(Error::NoDevice {
                reason: format!("device {ordinal} asked for, {n} visible"),
            });
        }
        let ord = ordinal as i32;
        let mut p = std::mem::MaybeUninit::<sys::hipkern_device_props>::zeroed();
        // SAFETY: p points to writable storage for one hipkern_device_props.
        check("hipkern_get_device_properties", unsafe {
            sys::hipkern_get_device_properties(ord, p.as_mut_ptr())
        })?;
        // SAFETY: zeroed is a valid bit pattern for this plain C struct, and the call filled it.
        let p = unsafe { p.assume_init() };
        // SAFETY: the C side NUL-terminates both arrays (strncpy of size-1 into zeroed storage).
        let (name, arch_name) = unsafe {
            (
                cstr_lossy(p.name.as_ptr()),
                cstr_lossy(p.arch_name.as_ptr()),
            )
        };
        let props = DeviceProperties {
            name,
            arch_name,
            total_memory: p.total_global_mem,
            multiprocessors: p.multiprocessor_count,
            warp_size: p.warp_size,
            major: p.major,
            minor: p.minor,
            shared_mem_per_block: p.shared_mem_per_block,
            max_threads_per_block: p.max_threads_per_block,
            pci_bus_id: p.pci_bus_id,
        };
        // Before any launch: a device the build holds no code for would
        // fail at its first kernel with the runtime's "no binary for GPU".
        let compiled = compiled_archs();
        if !arch_is_compiled(&props.arch_name, &compiled) {
            return Err(Error::ArchNotCompiled {
                ordinal,
                device_name: props.name,
                device_arch: props.arch_name,
                compiled,
                platform: platform(),
            });
        }
        // No hipSetDevice here: opening a device leaves the thread's
        // current device as it was (the first call on it makes it current
        // for its own length).
        Ok(Device {
            inner: Arc::new(DeviceInner {
                ordinal: ord,
                props,
                free_errors: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.ordinal as usize
    }

    /// Static properties.
    pub fn properties(&self) -> &DeviceProperties {
        &self.inner.props
    }

    /// Makes this device current on the calling thread (`hipSetDevice` /
    /// `cudaSetDevice`) and leaves it so: the one call of hipkern that
    /// changes the thread's current device on purpose. Every other call
    /// makes its device current for its own length only and restores the
    /// caller's. Useful before the caller's own runtime calls, and on a
    /// thread (or an MPI rank) that works with one device only: bound
    /// once, hipkern's calls find their device current and never switch
    /// (on CUDA, restoring a thread's default device 0 would otherwise
    /// create device 0's primary context in a process that never used
    /// it).
    pub fn bind(&self) -> Result<()> {
        // SAFETY: plain call with an ordinal checked at construction.
        check("hipkern_set_device", unsafe {
            sys::hipkern_set_device(self.inner.ordinal)
        })
    }

    /// Makes this device current on the calling thread until the returned
    /// scope is dropped, which restores the device that was current
    /// before. Switches only when another device is current (one
    /// `hipGetDevice` otherwise), so nested scopes of one device cost one
    /// query each. A failed restore is recorded with
    /// [`Device::take_free_errors`] (a drop cannot return it), never
    /// panicked.
    pub(crate) fn enter(&self) -> Result<DeviceScope> {
        let mut current = -1;
        // SAFETY: `current` is a valid out-pointer.
        check("hipkern_get_device", unsafe {
            sys::hipkern_get_device(&mut current)
        })?;
        if current == self.inner.ordinal {
            return Ok(DeviceScope { restore: None });
        }
        self.bind()?;
        Ok(DeviceScope {
            restore: Some((current, self.clone())),
        })
    }

    /// Runs `f` with this device current ([`Device::enter`]), the caller's
    /// current device restored afterwards.
    pub(crate) fn with_current<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let _scope = self.enter()?;
        f()
    }

    /// Free and total memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        let _scope = self.enter()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers.
        check("hipkern_mem_get_info", unsafe {
            sys::hipkern_mem_get_info(&mut free, &mut total)
        })?;
        Ok((free, total))
    }

    /// Waits for all work on this device.
    pub fn synchronize(&self) -> Result<()> {
        let _scope = self.enter()?;
        // SAFETY: plain call.
        check("hipkern_device_synchronize", unsafe {
            sys::hipkern_device_synchronize()
        })
    }

    /// A new non-blocking stream on this device.
    pub fn new_stream(&self) -> Result<Stream> {
        Stream::new(self)
    }

    /// An uninitialised buffer of `len` elements. Its contents are
    /// whatever the allocator left: write before reading (tests poison it).
    pub fn alloc<T: DeviceRepr>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        DeviceBuffer::alloc(self, len)
    }

    /// A buffer of `len` elements with every byte zero.
    pub fn alloc_zeroed<T: DeviceRepr>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        let mut b = DeviceBuffer::alloc(self, len)?;
        b.memset_zero()?;
        Ok(b)
    }

    /// A buffer holding a copy of `host`.
    pub fn htod_copy<T: DeviceRepr>(&self, host: &[T]) -> Result<DeviceBuffer<T>> {
        let mut b = DeviceBuffer::alloc(self, host.len())?;
        b.copy_from_host(host)?;
        Ok(b)
    }

    /// Errors that frees in `Drop` met since the last call (normally none),
    /// and failures to restore the caller's current device after a call
    /// (which cannot return them either).
    pub fn take_free_errors(&self) -> Vec<Error> {
        std::mem::take(
            &mut *self
                .inner
                .free_errors
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }

    pub(crate) fn record_free_error(&self, e: Error) {
        self.inner
            .free_errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(e);
    }
}

#[cfg(test)]
impl Device {
    /// A handle no runtime call has checked, for unit tests of host-side
    /// validation only (never passed to a runtime call).
    pub(crate) fn detached_for_tests(ordinal: i32) -> Device {
        Device {
            inner: Arc::new(DeviceInner {
                ordinal,
                props: DeviceProperties {
                    name: "test".into(),
                    arch_name: "none".into(),
                    total_memory: 0,
                    multiprocessors: 0,
                    warp_size: 0,
                    major: 0,
                    minor: 0,
                    shared_mem_per_block: 0,
                    max_threads_per_block: 0,
                    pci_bus_id: 0,
                },
                free_errors: Mutex::new(Vec::new()),
            }),
        }
    }
}

/// The calling thread's current device switched for the length of one
/// call ([`Device::enter`]); dropping it switches back.
#[must_use = "the device is current only while the scope lives"]
pub(crate) struct DeviceScope {
    /// The device current before, and the device whose free errors
    /// record a failed restore; `None` when nothing was switched.
    restore: Option<(i32, Device)>,
}

impl Drop for DeviceScope {
    fn drop(&mut self) {
        if let Some((previous, device)) = self.restore.take() {
            // SAFETY: plain call; `previous` is the ordinal the runtime
            // itself reported as current.
            let r = check("hipkern_set_device", unsafe {
                sys::hipkern_set_device(previous)
            });
            if let Err(e) = r {
                device.record_free_error(e);
            }
        }
    }
}
