//! Shared test inputs; the submodules hold what one family of test files
//! shares (each module's docs name its files). A family's module is built
//! with the features its tests require (`cli`, `cache`), so every binary
//! that includes this module still builds without them.
use hipkern::rng::SplitMix64;
#[cfg(feature = "cli")]
pub mod cli_force;
#[cfg(feature = "cli")]
pub mod cli_nearfield;
pub mod list1;
pub mod list1_device;
#[cfg(feature = "cache")]
pub mod nearfield_cache;
pub mod psf;

/// A neighbour-list-like edge set: edges grouped by dst (the centre atom,
/// centres `0..n_centres`, each with 0..=max_per_centre edges), src random
/// in `[0, n_ext)`; with `isolate_every = Some(m)`, every centre with
/// `k % m == 3` gets no edges of its own (it may still be a neighbour).
/// Returns (src, dst, g, edge_vec), g uniform in [-1, 1), edge_vec in [-4, 4).
#[allow(dead_code)] // not every test binary that includes this module calls it
pub fn edge_system(
    rng: &mut SplitMix64,
    n_ext: usize,
    n_centres: usize,
    max_per_centre: usize,
    isolate_every: Option<usize>,
) -> (Vec<i32>, Vec<i32>, Vec<f64>, Vec<f64>) {
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    for k in 0..n_centres {
        if isolate_every.is_some_and(|m| k % m == 3) {
            continue;
        }
        for _ in 0..rng.below(max_per_centre + 1) {
            dst.push(k as i32);
            src.push(rng.below(n_ext) as i32);
        }
    }
    let e = src.len();
    let g = (0..3 * e).map(|_| rng.uniform_pm1()).collect();
    let r = (0..3 * e).map(|_| 4.0 * rng.uniform_pm1()).collect();
    (src, dst, g, r)
}

/// The no-device contract shared by the device APIs' tests: on the cpu
/// platform `Device::new` is `Error::NoToolchain` (no device object, so no
/// sink or evaluator, can exist); on a device platform it is a device or
/// the runtime's own error. Returns the status a C entry point's argument
/// checks give before any runtime call: the cpu stub's "no toolchain", else
/// "invalid argument".
#[allow(dead_code)] // not every test binary that includes this module calls it
pub fn check_no_device_contract() -> i32 {
    use hipkern::{runtime, Device, Error};
    match Device::new(0) {
        Err(e) => {
            if runtime::platform() == "cpu" {
                assert_eq!(e, Error::NoToolchain { platform: "cpu" });
            }
        }
        Ok(d) => assert_ne!(runtime::platform(), "cpu", "{d:?}"),
    }
    if runtime::platform() == "cpu" {
        hipkern_sys::HIPKERN_ERROR_NO_TOOLCHAIN
    } else {
        hipkern_sys::HIPKERN_ERROR_INVALID_ARGUMENT
    }
}

/// The calling thread's current device, as the C ABI reports it.
#[allow(dead_code)] // not every test binary that includes this module calls it
pub fn current_device() -> i32 {
    let mut d = -1;
    // SAFETY: a valid out-pointer.
    let rc = unsafe { hipkern_sys::hipkern_get_device(&mut d) };
    assert_eq!(rc, 0, "hipkern_get_device");
    d
}

/// Per element: finite, and |a − b| ≤ rel·(|b| + max|ref|).
#[allow(dead_code)] // not every test binary that includes this module calls it
pub fn check_close(what: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(a.is_finite(), "{what}[{i}] = {a} (unwritten or poisoned)");
        assert!(
            (a - b).abs() <= rel * (b.abs() + scale),
            "{what}[{i}]: {a} vs {b}"
        );
    }
}
