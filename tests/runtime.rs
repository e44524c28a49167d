//! Runtime/FFI tests. The first group runs everywhere (no GPU needed); the
//! `gpu_*` group needs a device: ignored on the cpu platform, run by plain
//! `cargo test` on an amd or nvidia build (CI, with no GPU, passes
//! `--skip gpu_`). The views' host-side checks (null, misaligned,
//! overflowing pointers; lengths and offsets) need a `Device` value, which
//! the cpu platform cannot make: they are unit tests of
//! `src/runtime/buffer.rs`, always run; here they are repeated on a device.
use hipkern::force::{assemble_device_into, assemble_reference_f64, DevicePlan, VirialSplit};
use hipkern::runtime::{
    self, Device, DeviceRepr, DeviceSlice, DeviceSliceMut, Error, Event, Stream,
};
use std::ffi::c_void;

mod common;
use common::{check_close, current_device};

/// Whether this machine has a usable device (only the GPU tests care).
fn gpu() -> Device {
    Device::new(0).expect("a GPU is required for this test")
}

// ---- always run ---------------------------------------------------------

#[test]
fn device_new_without_gpu_is_an_error_not_a_crash() {
    let platform = runtime::platform();
    match Device::new(0) {
        Ok(d) => {
            // Only possible on a GPU machine with a device build.
            assert_ne!(platform, "cpu");
            assert!(!d.properties().name.is_empty());
        }
        Err(e) => {
            let msg = e.to_string();
            match platform {
                "cpu" => {
                    assert_eq!(e, Error::NoToolchain { platform: "cpu" });
                    assert!(msg.contains("cpu platform"), "{msg}");
                }
                _ => match &e {
                    // The runtime's own no-driver / no-device error, with its message.
                    Error::Runtime {
                        code,
                        name,
                        message,
                        ..
                    } => {
                        assert!(*code > 0, "{e}");
                        assert!(!name.is_empty() && !message.is_empty(), "{e}");
                        assert!(msg.contains(name.as_str()) && msg.contains(message.as_str()));
                    }
                    Error::NoDevice { .. } => {}
                    other => panic!("unexpected error kind on {platform}: {other}"),
                },
            }
        }
    }
}

#[test]
fn platform_and_archs_agree_with_the_build() {
    let archs = runtime::compiled_archs();
    match runtime::platform() {
        "cpu" => assert!(archs.is_empty()),
        "amd" => assert!(
            !archs.is_empty() && archs.iter().all(|a| a.starts_with("gfx")),
            "{archs:?}"
        ),
        "nvidia" => assert!(
            !archs.is_empty() && archs.iter().all(|a| a.starts_with("sm_")),
            "{archs:?}"
        ),
        p => panic!("unknown platform {p}"),
    }
    assert_eq!(hipkern_sys::PLATFORM, runtime::platform());
}

#[test]
fn c_abi_reports_its_version_and_names_every_status() {
    // SAFETY: plain calls; the returned strings are static.
    unsafe {
        assert_eq!(
            hipkern_sys::hipkern_abi_version() as u32,
            hipkern_sys::HIPKERN_ABI_VERSION
        );
        for code in [0, -1, -2, -3, -99] {
            assert!(!hipkern_sys::hipkern_error_name(code).is_null());
            assert!(!hipkern_sys::hipkern_error_string(code).is_null());
        }
    }
    let e = Error::from_status("hipkern_x", hipkern_sys::HIPKERN_ERROR_INVALID_ARGUMENT);
    assert!(
        e.to_string().contains("HIPKERN_ERROR_INVALID_ARGUMENT"),
        "{e}"
    );
}

#[test]
fn c_abi_rejects_null_out_pointers_without_crashing() {
    // SAFETY: the entry points check for NULL before writing.
    unsafe {
        assert_ne!(hipkern_sys::hipkern_device_count(std::ptr::null_mut()), 0);
        assert_ne!(hipkern_sys::hipkern_malloc(std::ptr::null_mut(), 16), 0);
        assert_ne!(hipkern_sys::hipkern_stream_create(std::ptr::null_mut()), 0);
        assert_ne!(hipkern_sys::hipkern_event_create(std::ptr::null_mut()), 0);
        assert_ne!(
            hipkern_sys::hipkern_fill_u32(std::ptr::null_mut(), 4, 0, std::ptr::null_mut()),
            0
        );
        // A bad memcpy kind is refused before any runtime call.
        let mut x = 0u8;
        let p = &mut x as *mut u8 as *mut std::ffi::c_void;
        assert_ne!(hipkern_sys::hipkern_memcpy(p, p, 1, 77), 0);
    }
}

// ---- GPU -----------------------------------------------------------------

/// Seeded random u32s.
fn random_u32(n: usize, seed: u64) -> Vec<u32> {
    let mut r = hipkern::rng::SplitMix64::new(seed);
    (0..n).map(|_| r.next_u64() as u32).collect()
}

fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_copies_round_trip_for_0_1_odd_and_1gib() {
    let d = gpu();
    let seed = fresh_seed();
    for n in [0usize, 1, 7, 1_000_003, (1usize << 30) / 4] {
        let host = random_u32(n, seed ^ n as u64);
        let mut buf = d.alloc::<u32>(n).unwrap();
        let s = d.new_stream().unwrap();
        s.fill(&mut buf.as_slice_mut(), 0xFFFF_FFFFu32).unwrap();
        s.synchronize().unwrap();
        buf.copy_from_host(&host).unwrap();
        let mut back = vec![0xDEAD_BEEFu32; n];
        buf.copy_to_host(&mut back).unwrap();
        assert!(back == host, "round trip of {n} u32 differs");
        // Device-to-device through a sub-slice, odd offsets.
        if n > 2 {
            let mut other = d.alloc::<u32>(n - 2).unwrap();
            s.copy_dtod_async(&buf.slice(1..n - 1).unwrap(), &mut other.as_slice_mut())
                .unwrap();
            s.synchronize().unwrap();
            assert!(
                other.to_vec().unwrap() == host[1..n - 1],
                "dtod of {n} differs"
            );
        }
    }
    assert!(d.take_free_errors().is_empty());
}

/// The synchronous copies and memset have landed when they return: a
/// stream of hipkern's (non-blocking, so not ordered after the null stream
/// those calls use) copies the tail of the buffer right after, and must see
/// the new values. The failure this guards against is a race (a pageable
/// upload's last DMA still running: seen once as a kernel reading stale
/// index arrays), so the test repeats it with fresh values; it can pass by
/// luck where the bug is, never fail where it is not.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_synchronous_copies_have_landed_for_other_streams() {
    let d = gpu();
    let s = d.new_stream().unwrap();
    let n = 64usize << 20; // 256 MiB of u32: staged in many chunks
    let tail = 1 << 16;
    let mut buf = d.alloc::<u32>(n).unwrap();
    let mut copy = d.alloc::<u32>(tail).unwrap();
    let seed = fresh_seed();
    for round in 0..8u64 {
        let host = random_u32(n, seed ^ round);
        buf.copy_from_host(&host).unwrap();
        s.copy_dtod_async(&buf.slice(n - tail..).unwrap(), &mut copy.as_slice_mut())
            .unwrap();
        s.synchronize().unwrap();
        let got = copy.to_vec().unwrap();
        let stale = got
            .iter()
            .zip(&host[n - tail..])
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(
            stale, 0,
            "round {round}: {stale} of the last {tail} values not yet uploaded"
        );
        buf.memset_zero().unwrap();
        s.copy_dtod_async(&buf.slice(n - tail..).unwrap(), &mut copy.as_slice_mut())
            .unwrap();
        s.synchronize().unwrap();
        assert!(
            copy.to_vec().unwrap().iter().all(|&x| x == 0),
            "round {round}: the memset had not landed"
        );
    }
    assert!(d.take_free_errors().is_empty());
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_length_mismatch_and_bad_ranges_are_errors() {
    let d = gpu();
    let mut b = d.alloc::<f64>(10).unwrap();
    assert!(matches!(
        b.copy_from_host(&[1.0; 9]),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        b.copy_to_host(&mut [0.0; 11]),
        Err(Error::InvalidInput(_))
    ));
    assert!(b.slice(3..11).is_err());
    assert!(b.slice(11..).is_err());
    #[allow(clippy::reversed_empty_ranges)]
    let r = b.slice(5..4);
    assert!(r.is_err());
    assert_eq!(b.slice(10..).unwrap().len(), 0);
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_async_copies_are_ordered_by_events_across_streams() {
    let d = gpu();
    let n = 1 << 24;
    let host = random_u32(n, fresh_seed());
    let mut a = d.alloc::<u32>(n).unwrap();
    let mut b = d.alloc::<u32>(n).unwrap();
    let s1 = d.new_stream().unwrap();
    let s2 = d.new_stream().unwrap();
    s2.fill(&mut b.as_slice_mut(), 0x7FC0_0000u32).unwrap();
    s2.synchronize().unwrap();
    // s1: upload into a; event; s2 waits on it, then copies a -> b and downloads.
    // SAFETY: host outlives the stream (synchronised below).
    unsafe { s1.copy_htod_async(&host, &mut a.as_slice_mut()).unwrap() };
    let uploaded = s1.record_event().unwrap();
    s2.wait_event(&uploaded).unwrap();
    s2.copy_dtod_async(&a.as_slice(), &mut b.as_slice_mut())
        .unwrap();
    let mut back = vec![0u32; n];
    // SAFETY: back is not read until s2 is synchronised.
    unsafe { s2.copy_dtoh_async(&b.as_slice(), &mut back).unwrap() };
    let done = s2.record_event().unwrap();
    done.synchronize().unwrap();
    assert!(back == host);
    let ms = uploaded.elapsed_ms(&done).unwrap();
    assert!(ms >= 0.0 && ms.is_finite(), "{ms}");
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_fill_and_iota_kernels_checked_element_by_element() {
    let d = gpu();
    let s = d.new_stream().unwrap();
    let seed = fresh_seed();
    for n in [1usize, 255, 256, 257, 65535 * 256 + 13] {
        let r = random_u32(3, seed ^ n as u64);
        let mut b = d.alloc::<f64>(n).unwrap();
        b.copy_from_host(&vec![f64::NAN; n]).unwrap(); // poison
        let value = r[0] as f64 / 7.0 - 1e5;
        s.fill(&mut b.as_slice_mut(), value).unwrap();
        s.synchronize().unwrap();
        let v = b.to_vec().unwrap();
        for (i, x) in v.iter().enumerate() {
            assert!(
                x.to_bits() == value.to_bits(),
                "fill f64 n={n}: element {i} is {x}, want {value}"
            );
        }
        // A sub-slice fill leaves the rest alone.
        if n > 2 {
            s.fill(&mut b.slice_mut(1..n - 1).unwrap(), -0.0f64)
                .unwrap();
            s.synchronize().unwrap();
            let v = b.to_vec().unwrap();
            assert_eq!(v[0].to_bits(), value.to_bits());
            assert_eq!(v[n - 1].to_bits(), value.to_bits());
            assert!(v[1..n - 1]
                .iter()
                .all(|x| x.to_bits() == (-0.0f64).to_bits()));
        }
        let mut u = d.alloc::<u32>(n).unwrap();
        u.copy_from_host(&vec![0xFFFF_FFFF; n]).unwrap();
        s.iota_u32(&mut u.as_slice_mut(), r[1], r[2]).unwrap();
        s.synchronize().unwrap();
        for (i, x) in u.to_vec().unwrap().iter().enumerate() {
            let want = r[1].wrapping_add((i as u32).wrapping_mul(r[2]));
            assert_eq!(*x, want, "iota n={n} element {i}");
        }
        let mut f = d.alloc::<f32>(n).unwrap();
        f.copy_from_host(&vec![f32::NAN; n]).unwrap();
        s.fill(&mut f.as_slice_mut(), 3.25f32).unwrap();
        s.synchronize().unwrap();
        assert!(f.to_vec().unwrap().iter().all(|x| *x == 3.25));
    }
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_dropping_buffers_frees_them_200_times_1gib() {
    let d = gpu();
    let (free0, total) = d.memory_info().unwrap();
    for i in 0..200 {
        let b = d
            .alloc::<u8>(1 << 30)
            .unwrap_or_else(|e| panic!("allocation {i} failed: {e}"));
        assert_eq!(b.len(), 1 << 30);
        drop(b);
    }
    let (free1, _) = d.memory_info().unwrap();
    assert!(
        200u64 << 30 > total as u64,
        "the loop must allocate more than the card holds"
    );
    assert!(
        free1 + (64 << 20) >= free0,
        "memory leaked: free {free0} -> {free1}"
    );
    assert!(d.take_free_errors().is_empty());
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_impossible_allocation_is_an_error_with_the_runtime_message() {
    let d = gpu();
    let e = d.alloc::<u8>(1usize << 50).unwrap_err();
    match &e {
        Error::Runtime {
            call,
            code,
            message,
            ..
        } => {
            assert_eq!(*call, "hipkern_malloc");
            assert!(*code > 0);
            assert!(message.contains("allocating 1125899906842624 bytes"), "{e}");
        }
        other => panic!("expected a runtime error, got {other}"),
    }
    // The device stays usable.
    let b = d.htod_copy(&[1u32, 2, 3]).unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![1, 2, 3]);
    // Overflowing element counts are refused before the runtime is asked.
    assert!(matches!(
        d.alloc::<f64>(usize::MAX / 4),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_info_reports_the_device() {
    let d = gpu();
    let p = d.properties();
    assert!(
        p.total_memory > 0 && p.multiprocessors > 0 && p.warp_size > 0,
        "{p:?}"
    );
    assert!(runtime::runtime_version().unwrap() > 0);
    assert!(runtime::build_runtime_version() > 0);
    // Device::new refuses a device the build has no code for.
    assert!(
        runtime::arch_is_compiled(&p.arch_name, &runtime::compiled_archs()),
        "{p:?}"
    );
}

// ---- device and build must match (no GPU needed) --------------------------

#[test]
fn amd_devices_match_compiled_archs_by_base_and_stated_features() {
    let built = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // hipGetDeviceProperties' gcnArchName carries the device's features.
    let mi250 = "gfx90a:sramecc+:xnack-";
    assert!(runtime::arch_is_compiled(
        mi250,
        &built(&["gfx1201", "gfx90a"])
    ));
    assert!(runtime::arch_is_compiled(mi250, &built(&["gfx90a:xnack-"])));
    assert!(runtime::arch_is_compiled(
        mi250,
        &built(&["gfx90a:sramecc+"])
    ));
    // A feature the build fixed differently: the code object does not load.
    assert!(!runtime::arch_is_compiled(
        mi250,
        &built(&["gfx90a:xnack+"])
    ));
    // Another processor of the same family is another code object.
    assert!(!runtime::arch_is_compiled(
        mi250,
        &built(&["gfx942", "gfx1201"])
    ));
    assert!(!runtime::arch_is_compiled("gfx1101", &built(&["gfx1100"])));
    assert!(runtime::arch_is_compiled("gfx1201", &built(&["gfx1201"])));
    // No feature stated by the device: a build that names one still runs.
    assert!(runtime::arch_is_compiled(
        "gfx1100",
        &built(&["gfx1100:xnack-"])
    ));
    assert!(!runtime::arch_is_compiled("gfx1201", &[]));
}

#[test]
fn nvidia_devices_run_their_sass_or_newer_ptx() {
    let built = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(runtime::arch_is_compiled("sm_90", &built(&["sm_90"])));
    // compute_90 PTX is compiled by the driver for newer GPUs.
    assert!(runtime::arch_is_compiled("sm_100", &built(&["sm_90"])));
    assert!(runtime::arch_is_compiled(
        "sm_120",
        &built(&["sm_80", "sm_90"])
    ));
    // Not for older ones, and not from architecture-specific targets.
    assert!(!runtime::arch_is_compiled("sm_80", &built(&["sm_90"])));
    assert!(runtime::arch_is_compiled("sm_90", &built(&["sm_90a"])));
    assert!(!runtime::arch_is_compiled("sm_100", &built(&["sm_90a"])));
    assert!(!runtime::arch_is_compiled("gfx90a", &built(&["sm_90"])));
}

#[test]
fn arch_mismatch_names_both_and_how_to_rebuild() {
    let e = Error::ArchNotCompiled {
        ordinal: 1,
        device_name: "AMD Instinct MI250X".into(),
        device_arch: "gfx90a:sramecc+:xnack-".into(),
        compiled: vec!["gfx1201".into(), "gfx1100".into()],
        platform: "amd",
    };
    let m = e.to_string();
    for part in [
        "device 1 (AMD Instinct MI250X)",
        "gfx90a:sramecc+:xnack-",
        "gfx1201, gfx1100",
        "HIPKERN_OFFLOAD_ARCH=gfx90a ",
        "native",
    ] {
        assert!(m.contains(part), "{part:?} not in {m}");
    }
    let e = Error::ArchNotCompiled {
        ordinal: 0,
        device_name: "NVIDIA A100".into(),
        device_arch: "sm_80".into(),
        compiled: vec!["sm_90".into()],
        platform: "nvidia",
    };
    assert!(e.to_string().contains("HIPKERN_CUDA_ARCH=sm_80 "), "{e}");
}

#[test]
fn runtime_versions_are_spelled_out_and_the_build_reports_its_own() {
    for (platform, v, spelled) in [
        ("amd", 60_443_484, "HIP 6.4.43484"),
        ("amd", 70_253_211, "HIP 7.2.53211"),
        ("nvidia", 13_000, "CUDA 13.0"),
        ("nvidia", 12_080, "CUDA 12.8"),
    ] {
        assert_eq!(runtime::format_runtime_version(platform, v), spelled);
    }
    assert_eq!(runtime::format_runtime_version("cpu", 0), "none");
    let built = runtime::build_runtime_version();
    match runtime::platform() {
        "cpu" => assert_eq!(built, 0),
        // HIP 5.0 or newer; CUDA 11.0 or newer.
        "amd" => assert!(built >= 50_000_000, "{built}"),
        _ => assert!(built >= 11_000, "{built}"),
    }
}

// ---- interop: the caller's current device, borrowed handles and memory ----

/// `f()`, asserting that it leaves the thread's current device at `want`.
fn unchanged<R>(want: i32, what: &str, f: impl FnOnce() -> R) -> R {
    let r = f();
    assert_eq!(
        current_device(),
        want,
        "{what} changed the thread's current device"
    );
    r
}

/// Device memory from the C ABI's own allocator, standing for another
/// library's tensor: views over it borrow it, and it is freed by
/// [`CAlloc::free`] (which checks that hipkern did not free it).
struct CAlloc {
    ptr: *mut c_void,
    bytes: usize,
}

impl CAlloc {
    /// `bytes` bytes on `d` (made current first: the C ABI allocates on the
    /// current device).
    fn new(d: &Device, bytes: usize) -> CAlloc {
        d.bind().unwrap();
        let mut ptr = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let rc = unsafe { hipkern_sys::hipkern_malloc(&mut ptr, bytes) };
        assert_eq!(rc, 0, "hipkern_malloc of {bytes} bytes");
        CAlloc { ptr, bytes }
    }

    fn view<'a, T: DeviceRepr>(&'a self, d: &'a Device, len: usize) -> DeviceSlice<'a, T> {
        assert!(len * std::mem::size_of::<T>() <= self.bytes);
        // SAFETY: the allocation holds `bytes` ≥ len·size_of::<T>() bytes on
        // `d` (256-byte aligned) and lives as long as `self`, which the
        // view borrows.
        unsafe { DeviceSlice::from_raw_parts(self, d, self.ptr.cast::<T>(), len) }.unwrap()
    }

    fn view_mut<'a, T: DeviceRepr>(
        &'a mut self,
        d: &'a Device,
        len: usize,
    ) -> DeviceSliceMut<'a, T> {
        assert!(len * std::mem::size_of::<T>() <= self.bytes);
        let ptr = self.ptr.cast::<T>();
        // SAFETY: as in `view`; the view borrows `self` mutably, so no other
        // view of this allocation exists meanwhile.
        unsafe { DeviceSliceMut::from_raw_parts_mut(self, d, ptr, len) }.unwrap()
    }

    /// Frees it; success shows that nothing freed it before.
    fn free(self) {
        // SAFETY: ptr came from hipkern_malloc and is freed once, here.
        let rc = unsafe { hipkern_sys::hipkern_free(self.ptr) };
        assert_eq!(rc, 0, "hipkern_free of memory hipkern only borrowed");
    }
}

/// Every device's calls, with every device made current beforehand in
/// turn (with one device: device 0 set beforehand), leave the thread's
/// current device where it was: opening a device, streams, events, sync
/// and async copies, memset, the fill and iota kernels, a plan build and
/// an assembly, memory info, drops. `Device::bind` alone changes it.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_calls_leave_the_current_device_as_found() {
    let n = runtime::device_count().unwrap();
    let devices: Vec<Device> = (0..n).map(|k| Device::new(k).unwrap()).collect();
    let mut rng = hipkern::rng::SplitMix64::from_clock();
    for current in 0..n as i32 {
        // SAFETY: a plain call with a valid ordinal.
        assert_eq!(unsafe { hipkern_sys::hipkern_set_device(current) }, 0);
        for d in &devices {
            let at = |what: &str| format!("{what} on device {} (current {current})", d.ordinal());
            unchanged(current, &at("Device::new"), || {
                Device::new(d.ordinal()).unwrap()
            });
            let s = unchanged(current, &at("new_stream"), || d.new_stream().unwrap());
            let len = 1000 + rng.below(1000);
            let host = random_u32(len, rng.next_u64());
            let mut a = unchanged(current, &at("htod_copy"), || d.htod_copy(&host).unwrap());
            let mut b = unchanged(current, &at("alloc"), || d.alloc::<u32>(len).unwrap());
            unchanged(current, &at("fill"), || {
                s.fill(&mut b.as_slice_mut(), 7u32).unwrap()
            });
            let e = unchanged(current, &at("record_event"), || s.record_event().unwrap());
            let s2 = d.new_stream().unwrap();
            unchanged(current, &at("wait_event"), || s2.wait_event(&e).unwrap());
            unchanged(current, &at("copy_dtod_async"), || {
                s2.copy_dtod_async(&a.as_slice(), &mut b.as_slice_mut())
                    .unwrap()
            });
            unchanged(current, &at("synchronize"), || s2.synchronize().unwrap());
            assert!(b.to_vec().unwrap() == host, "{}", at("the copy"));
            unchanged(current, &at("iota_u32"), || {
                s.iota_u32(&mut a.as_slice_mut(), 1, 2).unwrap()
            });
            unchanged(current, &at("event synchronize"), || {
                s.record_event().unwrap().synchronize().unwrap()
            });
            unchanged(current, &at("memset_zero"), || b.memset_zero().unwrap());
            unchanged(current, &at("to_vec"), || b.to_vec().unwrap());
            unchanged(current, &at("memory_info"), || d.memory_info().unwrap());
            unchanged(current, &at("Device::synchronize"), || {
                d.synchronize().unwrap()
            });
            // A kernel of the primitives: a plan built on the device and an assembly.
            let (src, dst) = (vec![0i32, 1, 2], vec![1i32, 2, 0]);
            let g = vec![1.0f64; 9];
            unchanged(current, &at("the force plan and assembly"), || {
                let plan = DevicePlan::build_from_host(&s, &src, &dst, 3, None).unwrap();
                let (gd, rd) = (d.htod_copy(&g).unwrap(), d.htod_copy(&g).unwrap());
                let (mut f, mut w) = (d.alloc::<f64>(9).unwrap(), d.alloc::<f64>(27).unwrap());
                assemble_device_into(&s, &plan, &gd, &rd, VirialSplit::Half, &mut f, &mut w)
                    .unwrap();
                s.synchronize().unwrap();
            });
            unchanged(current, &at("dropping buffers, streams, events"), || {
                drop((a, b, e, s, s2))
            });
            assert!(d.take_free_errors().is_empty(), "{}", at("free errors"));
        }
    }
    // Bind is the deliberate exception.
    devices[n - 1].bind().unwrap();
    assert_eq!(current_device(), (n - 1) as i32);
}

/// A stream created through the C ABI, borrowed: hipkern's fill and copy
/// run on it, dropping the `Stream` (and its clone) does not destroy it
/// (the C ABI's own destroy succeeds afterwards); a null borrowed stream is
/// the device's default stream.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_borrowed_stream_runs_work_and_is_not_destroyed() {
    let d = gpu();
    d.bind().unwrap(); // the C ABI creates streams on the current device
    let current = current_device();
    let mut raw = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { hipkern_sys::hipkern_stream_create(&mut raw) }, 0);
    let seed = fresh_seed();
    let n = (1 << 22) + 3;
    let value = random_u32(1, seed)[0];
    let mut a = d.alloc::<u32>(n).unwrap();
    let mut b = d.alloc::<u32>(n).unwrap();
    {
        // SAFETY: raw is a live stream of d, destroyed below after both
        // Streams are dropped and their work synchronized.
        let s = unsafe { Stream::from_raw(&d, raw) };
        assert!(!s.is_owned() && d.new_stream().unwrap().is_owned());
        assert_eq!(s.as_raw(), raw);
        let clone = s.clone();
        s.fill(&mut a.as_slice_mut(), value).unwrap();
        clone
            .copy_dtod_async(&a.as_slice(), &mut b.as_slice_mut())
            .unwrap();
        s.synchronize().unwrap();
        let got = b.to_vec().unwrap();
        for (i, x) in got.iter().enumerate() {
            assert_eq!(
                *x, value,
                "element {i} after the fill and copy on the borrowed stream"
            );
        }
        // SAFETY: a null stream is the device's default stream (never destroyed).
        let default = unsafe { Stream::from_raw(&d, std::ptr::null_mut()) };
        default.iota_u32(&mut a.as_slice_mut(), value, 3).unwrap();
        default.synchronize().unwrap();
        for (i, x) in a.to_vec().unwrap().iter().enumerate() {
            let want = value.wrapping_add(3u32.wrapping_mul(i as u32));
            assert_eq!(*x, want, "iota on the default stream, element {i}");
        }
    }
    assert!(d.take_free_errors().is_empty());
    // SAFETY: raw is still a live stream (hipkern only borrowed it).
    unsafe {
        assert_eq!(hipkern_sys::hipkern_stream_synchronize(raw), 0);
        assert_eq!(
            hipkern_sys::hipkern_stream_destroy(raw),
            0,
            "the borrowed stream was no longer alive"
        );
    }
    assert_eq!(current_device(), current);
}

/// An event created through the C ABI, borrowed, recorded on stream A
/// after a large fill; stream B waits on it and copies what A wrote: B
/// must see the new values every round (the previous round's differ). The
/// event times against one of hipkern's, a null borrowed event is refused,
/// and dropping the `Event` does not destroy it.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_borrowed_event_orders_a_second_stream_after_the_first() {
    let d = gpu();
    d.bind().unwrap();
    let current = current_device();
    let mut raw = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { hipkern_sys::hipkern_event_create(&mut raw) }, 0);
    let (sa, sb) = (d.new_stream().unwrap(), d.new_stream().unwrap());
    let n = 1usize << 26; // 256 MiB of u32: the fill takes a while
    let tail = 1usize << 16;
    let mut a = d.alloc::<u32>(n).unwrap();
    let mut b = d.alloc::<u32>(tail).unwrap();
    let values = random_u32(8, fresh_seed());
    {
        // SAFETY: raw is a live event of d, destroyed below after the
        // Event is dropped and every stream that used it synchronized.
        let ev = unsafe { Event::from_raw(&d, raw) };
        assert!(!ev.is_owned() && ev.as_raw() == raw && ev.device().ordinal() == d.ordinal());
        for (round, &v) in values.iter().enumerate() {
            let v = if round > 0 && v == values[round - 1] {
                !v
            } else {
                v
            };
            let start = sa.record_event().unwrap();
            sa.fill(&mut a.as_slice_mut(), v).unwrap();
            ev.record(&sa).unwrap();
            sb.wait_event(&ev).unwrap();
            sb.copy_dtod_async(&a.slice(n - tail..).unwrap(), &mut b.as_slice_mut())
                .unwrap();
            let mut back = vec![0u32; tail];
            // SAFETY: back is not read before sb is synchronized.
            unsafe { sb.copy_dtoh_async(&b.as_slice(), &mut back).unwrap() };
            sb.synchronize().unwrap();
            let stale = back.iter().filter(|&&x| x != v).count();
            assert_eq!(stale, 0, "round {round}: stream B ran before the event");
            let ms = start.elapsed_ms(&ev).unwrap();
            assert!(ms >= 0.0 && ms.is_finite(), "{ms}");
        }
        // SAFETY: a null event is refused before any runtime call.
        let null = unsafe { Event::from_raw(&d, std::ptr::null_mut()) };
        assert!(matches!(null.record(&sa), Err(Error::InvalidInput(_))));
        assert!(matches!(sb.wait_event(&null), Err(Error::InvalidInput(_))));
        assert!(matches!(null.synchronize(), Err(Error::InvalidInput(_))));
        sa.synchronize().unwrap();
    }
    assert!(d.take_free_errors().is_empty());
    // SAFETY: raw is still a live event (hipkern only borrowed it).
    unsafe {
        assert_eq!(hipkern_sys::hipkern_event_synchronize(raw), 0);
        assert_eq!(
            hipkern_sys::hipkern_event_destroy(raw),
            0,
            "the borrowed event was no longer alive"
        );
    }
    assert_eq!(current_device(), current);
}

/// Views over memory of the C ABI's allocator (standing for another
/// library's tensors) go into the force assembly as inputs and outputs,
/// with a sub-view of a hipkern buffer as one input: every element against
/// the float64 CPU reference, outputs poisoned first. Views refuse null
/// and misaligned pointers on a device too, and a short view is refused
/// by the assembly before anything is launched.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_views_over_foreign_memory_feed_the_force_assembly() {
    let d = gpu();
    let mut rng = hipkern::rng::SplitMix64::from_clock();
    let n_ext = 4000 + rng.below(2000);
    let (src, dst, g, r) = common::edge_system(&mut rng, n_ext, n_ext * 3 / 4, 96, Some(11));
    let e = src.len();
    let mut g_mem = CAlloc::new(&d, 8 * 3 * e);
    let mut f_mem = CAlloc::new(&d, 8 * 3 * n_ext);
    let mut w_mem = CAlloc::new(&d, 8 * 9 * n_ext);
    let current = current_device();
    let s = d.new_stream().unwrap();
    g_mem.view_mut::<f64>(&d, 3 * e).copy_from_host(&g).unwrap();
    // edge_vec: a sub-view at an offset of 5 elements of a hipkern buffer.
    let mut r_host = vec![f64::NAN; 5];
    r_host.extend_from_slice(&r);
    let r_buf = d.htod_copy(&r_host).unwrap();
    let plan = DevicePlan::build_from_host(&s, &src, &dst, n_ext, None).unwrap();
    for split in [VirialSplit::Half, VirialSplit::Src] {
        let want = assemble_reference_f64(&g, &r, &src, &dst, n_ext, None, split).unwrap();
        s.fill(&mut f_mem.view_mut(&d, 3 * n_ext), f64::NAN)
            .unwrap();
        s.fill(&mut w_mem.view_mut(&d, 9 * n_ext), f64::NAN)
            .unwrap();
        assemble_device_into(
            &s,
            &plan,
            &g_mem.view::<f64>(&d, 3 * e),
            &r_buf.slice(5..).unwrap(),
            split,
            &mut f_mem.view_mut::<f64>(&d, 3 * n_ext),
            &mut w_mem.view_mut::<f64>(&d, 9 * n_ext),
        )
        .unwrap();
        s.synchronize().unwrap();
        let f = f_mem.view::<f64>(&d, 3 * n_ext).to_vec().unwrap();
        let w = w_mem.view::<f64>(&d, 9 * n_ext).to_vec().unwrap();
        check_close(&format!("force {split:?}"), &f, &want.force, 1e-13);
        check_close(&format!("virial {split:?}"), &w, &want.virial, 1e-13);
    }
    // A view one element short is refused, naming it, before any launch.
    s.fill(&mut f_mem.view_mut(&d, 3 * n_ext), -1.0f64).unwrap();
    let err = assemble_device_into(
        &s,
        &plan,
        &g_mem.view::<f64>(&d, 3 * e - 1),
        &r_buf.slice(5..).unwrap(),
        VirialSplit::Half,
        &mut f_mem.view_mut::<f64>(&d, 3 * n_ext),
        &mut w_mem.view_mut::<f64>(&d, 9 * n_ext),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidInput(m) if m.starts_with("g has")),
        "{err}"
    );
    s.synchronize().unwrap();
    let f = f_mem.view::<f64>(&d, 3 * n_ext).to_vec().unwrap();
    assert!(
        f.iter().all(|&x| x == -1.0),
        "a refused call wrote the output"
    );
    // The host-side checks, on a real device and real memory.
    // SAFETY: refused before anything is dereferenced.
    unsafe {
        let misaligned = g_mem.ptr.cast::<u8>().add(4).cast::<f64>();
        assert!(matches!(
            DeviceSlice::from_raw_parts(&g_mem, &d, misaligned, 1),
            Err(Error::InvalidInput(_))
        ));
        assert!(matches!(
            DeviceSlice::from_raw_parts(&g_mem, &d, std::ptr::null::<f64>(), 1),
            Err(Error::InvalidInput(_))
        ));
        let empty = DeviceSlice::from_raw_parts(&g_mem, &d, std::ptr::null::<f64>(), 0).unwrap();
        assert_eq!(empty.to_vec().unwrap(), Vec::<f64>::new());
    }
    assert_eq!(current_device(), current);
    assert!(d.take_free_errors().is_empty());
    for m in [g_mem, f_mem, w_mem] {
        m.free();
    }
}
