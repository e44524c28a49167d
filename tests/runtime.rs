//! Runtime/FFI tests. The first group runs everywhere (no GPU needed); the
//! `gpu_*` group needs a device: ignored on the cpu platform, run by plain
//! `cargo test` on an amd or nvidia build (CI, with no GPU, passes
//! `--skip gpu_`).
use hipkern::runtime::{self, Device, Error};

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
