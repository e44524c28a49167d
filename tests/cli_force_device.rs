//! `hipkern force --backend device` and `--backend device-atomic`
//! (`docs/design/force.md`). On the cpu platform they are the environment's
//! failure (exit status 1, one line, nothing written). GPU tests (`gpu_*`,
//! ignored on the cpu platform): the host backends' checks (cli_force.rs)
//! on the device backends, a large case with a hub atom, run-to-run
//! reproducibility, and bad indices refused with the host's message.
//! Helpers: tests/common/cli_force/.
mod common;
use common::cli_force::cases::{
    random_case, small_case, with_ghosts, Case, Frames, Graph, Half, Src,
};
use common::cli_force::jobs::{
    check_frames, check_ghost_folding, check_out_dtype_input, check_random_graphs, graphs,
    run_and_check, Job, OutDtype,
};
use common::cli_force::npy::{Dtype, F32, F64, I32, I64};
use common::cli_force::program::{assert_rejected, base_setup, Format, InputEdit};

/// On the cpu platform (no HIP or CUDA compiler at build time) the device
/// backends are the environment's failure: exit status 1, one line, nothing
/// written. The platform is the library's cfg (build.rs), as in
/// tests/runtime.rs it is `runtime::platform()`; both must agree.
#[cfg(hipkern_platform = "cpu")]
#[test]
fn device_backends_fail_cleanly_on_the_cpu_platform() {
    assert_eq!(hipkern::runtime::platform(), "cpu");
    for backend in ["device", "device-atomic"] {
        let case = small_case();
        let mut s = base_setup(&case);
        s.set("--backend", backend);
        let needs = format!("--backend {backend} needs a usable device");
        let needles = [needs.as_str(), "cpu platform", "use --backend cpu"];
        assert_rejected(&format!("--backend {backend}"), &s, 1, &needles);
        s.with_frames(&Frames::Size(3));
        s.precreate_outputs(&["force.npy", "virial.npy", "frame_voigt.npy"]);
        assert_rejected(
            &format!("--backend {backend}, outputs there"),
            &s,
            1,
            &needles,
        );
    }
    // No --backend: device, the default.
    let case = small_case();
    let mut s = base_setup(&case);
    s.unset("--backend");
    assert_rejected("default backend", &s, 1, &["--backend device needs"]);
    // Bad input is still reported as such (2), before any device is looked for.
    s.set("--split", "both");
    assert_rejected("bad split, default backend", &s, 2, &["unknown --split"]);
}

// ---- GPU ----------------------------------------------------------------

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_backend_matches_the_reference() {
    check_random_graphs("device");
    check_ghost_folding("device");
    check_frames("device");
    check_out_dtype_input("device");
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_atomic_backend_matches_the_reference() {
    check_random_graphs("device-atomic");
    check_ghost_folding("device-atomic");
    check_frames("device-atomic");
    // float32 in, float32 out: the atomic sums as they are.
    let case = random_case(8000, graphs()[4].1, F32);
    run_and_check(&Job {
        out_dtype: OutDtype::Input,
        ..Job::new("atomic, float32 out", &case, "device-atomic", Half)
    });
}

/// About 200 000 edges, 50 000 of them on one hub atom, 20 000 atoms.
fn large_case(precision: Dtype) -> Case {
    random_case(
        9000,
        Graph {
            n_ext: 20_000,
            n_edges: 200_000,
            hub_edges: 50_000,
            self_edges: 100,
            isolated: 500,
        },
        precision,
    )
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_backends_on_a_large_case_with_a_hub() {
    let frames = Frames::Size(5_000);
    for precision in [F64, F32] {
        let case = large_case(precision);
        for backend in ["device", "device-atomic", "cpu"] {
            for split in [Half, Src] {
                run_and_check(&Job {
                    frames: Some(&frames),
                    ..Job::new("large", &case, backend, split)
                });
            }
        }
        let folded = with_ghosts(case, 8_000, 9001);
        for backend in ["device", "device-atomic"] {
            run_and_check(&Job {
                format: Format::indices(I32),
                frames: Some(&Frames::Size(2_000)),
                ..Job::new("large, folded", &folded, backend, Half)
            });
        }
    }
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_backend_is_bitwise_reproducible() {
    let frames = Frames::Size(5_000);
    for precision in [F64, F32] {
        let case = large_case(precision);
        for out_dtype in [OutDtype::F64, OutDtype::Input] {
            let job = Job {
                out_dtype,
                frames: Some(&frames),
                ..Job::new("reproducible", &case, "device", Half)
            };
            let first = run_and_check(&job);
            let second = run_and_check(&job);
            assert_eq!(first, second, "{}: two runs differ", job.describe());
        }
    }
}

/// The device builds its plan on the device; bad indices are bad input
/// there too, with the host's message.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_backends_reject_bad_indices_like_the_host() {
    let case = small_case();
    let edits: [(&str, InputEdit); 3] = [
        ("dst = n_ext", &|s| {
            s.write_index("dst.npy", I64, &[0, 1, 2, 3, 4, 6, 0, 9])
        }),
        ("negative src", &|s| {
            s.write_index("src.npy", I32, &[0, 1, 2, -1, 0, 0, 0, 0])
        }),
        ("src = 2^40", &|s| {
            s.write_index("src.npy", I64, &[0, 1, 1 << 40, 0, 0, 0, 0, 0])
        }),
    ];
    for (what, edit) in edits {
        let mut host = base_setup(&case);
        edit(&host);
        let host_error = host.run().stderr;
        for backend in ["device", "device-atomic"] {
            host.set("--backend", backend);
            assert_rejected(&format!("{what} ({backend})"), &host, 2, &[]);
            assert_eq!(host.run().stderr, host_error, "{what} ({backend})");
        }
    }
    let mut s = base_setup(&case);
    s.write_index("mapping.npy", I64, &[0, 1, 2, 0, 3, 1]);
    s.set("--mapping", s.input("mapping.npy"))
        .set("--n-local", "3");
    for backend in ["device", "device-atomic"] {
        s.set("--backend", backend);
        assert_rejected(&format!("mapping ({backend})"), &s, 2, &["mapping[4] = 3"]);
    }
}
