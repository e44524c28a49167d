//! `hipkern nearfield list1` run as a program: `--backend cpu` checked from
//! the written files alone (cases, scaling rule, density and potential
//! recomputed here); on the cpu platform `--backend device` is the
//! machine's failure, nothing written. GPU tests (`gpu_*`, ignored on the
//! cpu platform): `--backend device` in every layout and schedule against
//! the CPU evaluator.
mod common;
use common::cli_nearfield::{npz_members, read_npz, read_npz_f64, run_nearfield, stdout_of};

/// `list1 --backend cpu` on a random 2D tree and a uniform 3D tree, checked
/// from the files alone: the tree .npz (centres, extents, levels, List 1
/// CSR, points, density) and the dense table .npz of `build`, with the case
/// of each pair found here from volumential's encoding (c = 4(centre_t −
/// centre_s)/h_s, code base 13 shift 6, `case_indices`), the scaling rule
/// written here (3D Laplace: ρ²·T; 2D Laplace: ρ²·T − ρ² ln ρ · N_s/(2π)),
/// the default density recomputed at the points, and the potential summed
/// here; `--out` equals it to 1e−13 relative (max-norm). Bad flags exit 2.
#[test]
fn list1_cpu_potential_checked_from_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (dim, q, tree) in [(2usize, 3usize, "random:7:6"), (3, 1, "random:3:4")] {
        let dim_s = dim.to_string();
        let q_s = q.to_string();
        let flags = ["--dim", &dim_s, "--q", &q_s, "--kernel", "laplace"];
        let mut a = vec!["build"];
        a.extend(flags);
        a.extend(["--out", "table.npz"]);
        stdout_of(&run_nearfield(d, &a), "build");
        let mut a = vec!["list1"];
        a.extend(flags);
        a.extend([
            "--tree",
            tree,
            "--backend",
            "cpu",
            "--tree-out",
            "tree.npz",
            "--out",
            "u.npy",
        ]);
        let report = stdout_of(&run_nearfield(d, &a), "list1");
        assert!(
            report.contains("difference from the CPU evaluator"),
            "{report}"
        );
        let table = npz_members(&d.join("table.npz"));
        let data = read_npz_f64(&table, "data.npy");
        let normalizers = read_npz_f64(&table, "mode_normalizers.npy");
        let case_indices: Vec<i32> = read_npz(&table, "case_indices.npy");
        let t = npz_members(&d.join("tree.npz"));
        let centers = read_npz_f64(&t, "centers.npy");
        let extents = read_npz_f64(&t, "extents.npy");
        let starts: Vec<u32> = read_npz(&t, "list1_starts.npy");
        let sources: Vec<u32> = read_npz(&t, "list1_sources.npy");
        let points = read_npz_f64(&t, "points.npy");
        let density = read_npz_f64(&t, "density.npy");
        let nq = q.pow(dim as u32);
        let n = extents.len();
        assert_eq!(points.len(), n * nq * dim);
        // The documented default density at every point.
        for (i, x) in points.chunks_exact(dim).enumerate() {
            let lin = 1.0 + x[0] - 0.5 * x[1] + if dim == 3 { 0.25 * x[2] } else { 0.0 };
            let r2: f64 = x.iter().map(|a| (a - 0.5) * (a - 0.5)).sum();
            let want = lin * (-4.0 * r2).exp();
            assert!(
                (density[i] - want).abs() <= 1e-15 * want.abs().max(1.0),
                "point {i}"
            );
        }
        let mut u = vec![0.0f64; n * nq];
        for tb in 0..n {
            for &sb in &sources[starts[tb] as usize..starts[tb + 1] as usize] {
                let sb = sb as usize;
                let h = extents[sb];
                let mut code = 0usize;
                for k in 0..dim {
                    let c = 4.0 * (centers[tb * dim + k] - centers[sb * dim + k]) / h;
                    let ci = c.round() as i32;
                    assert!((c - f64::from(ci)).abs() < 1e-9, "pair {tb},{sb}: c = {c}");
                    code = code * 13 + (ci + 6) as usize;
                }
                let case = case_indices[code];
                assert!(case >= 0, "pair {tb},{sb}: no case");
                let case = case as usize;
                let rho: f64 = h; // the table's extent is 1
                for s in 0..nq {
                    let f = density[sb * nq + s];
                    for tp in 0..nq {
                        let e = data[(case * nq + s) * nq + tp];
                        let v = if dim == 3 {
                            rho * rho * e
                        } else {
                            rho * rho * e
                                - rho * rho * rho.ln() * normalizers[s]
                                    / (2.0 * std::f64::consts::PI)
                        };
                        u[tb * nq + tp] += f * v;
                    }
                }
            }
        }
        let got: Vec<f64> = {
            use ndarray_npy::ReadNpyExt;
            let bytes = std::fs::read(d.join("u.npy")).unwrap();
            let a = ndarray::Array2::<f64>::read_npy(bytes.as_slice()).unwrap();
            assert_eq!(a.shape(), &[n, nq]);
            a.into_raw_vec_and_offset().0
        };
        let scale = u.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let worst = got
            .iter()
            .zip(&u)
            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
        assert!(worst <= 1e-13 * scale, "{tree}: {worst:e} of {scale:e}");
    }
    for (extra, needle) in [
        (&["--tree", "random:1"][..], "--tree"),
        (
            &["--tree", "uniform:2", "--layout", "sparse"][..],
            "--layout",
        ),
        (
            &["--tree", "uniform:2", "--backend", "tpu"][..],
            "--backend",
        ),
        (
            &["--tree", "uniform:2", "--contract", "sloppy"][..],
            "--contract",
        ),
    ] {
        let mut a = vec!["list1", "--dim", "2", "--q", "2", "--kernel", "laplace"];
        a.extend(extra);
        let o = run_nearfield(d, &a);
        assert_eq!(o.status.code(), Some(2), "{a:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(needle), "{a:?}");
    }
    let o = run_nearfield(
        d,
        &[
            "list1",
            "--dim",
            "2",
            "--q",
            "2",
            "--kernel",
            "laplace",
            "--derivative",
            "direction:0.3,0.8",
            "--tree",
            "uniform:2",
            "--layout",
            "orbit",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("fallback"));
}

/// On the cpu platform `list1 --backend device` (the default) is the
/// machine's failure: exit 1, one line naming the missing device and the
/// way out, nothing written.
#[cfg(hipkern_platform = "cpu")]
#[test]
fn list1_device_backend_fails_cleanly_without_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = run_nearfield(
        d,
        &[
            "list1",
            "--dim",
            "2",
            "--q",
            "2",
            "--kernel",
            "laplace",
            "--tree",
            "uniform:2",
            "--out",
            "u.npy",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let msg = String::from_utf8_lossy(&o.stderr);
    assert_eq!(msg.lines().count(), 1, "{msg}");
    assert!(
        msg.contains("needs a usable device") && msg.contains("--backend cpu"),
        "{msg}"
    );
    assert!(!d.join("u.npy").exists());
}

/// `list1 --backend device` in every layout, batch 1 and 32, on random
/// trees (2D q = 3 Laplace, 3D q = 2 Yukawa per level, 2D q = 2
/// directional derivative without ORBIT): the printed difference from the
/// CPU evaluator is ≤ 1e−13 relative, and `--out` is the same file for
/// the per-target schedule at batch 1 and 32 and the grouped schedule; the
/// tiled schedule (FMAs in case order) is within the same bound.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_list1_device_backend_matches_the_cpu_evaluator() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: [(&[&str], &str, &[&str]); 3] = [
        (
            &["--dim", "2", "--q", "3", "--kernel", "laplace"],
            "random:11:7",
            &["dense", "orbit", "fallback"],
        ),
        (
            &[
                "--dim", "3", "--q", "2", "--kernel", "yukawa", "--lambda", "3",
            ],
            "random:12:4",
            &["dense", "orbit", "fallback"],
        ),
        (
            &[
                "--dim",
                "2",
                "--q",
                "2",
                "--kernel",
                "laplace",
                "--derivative",
                "direction:0.3,-0.8",
            ],
            "random:13:6",
            &["dense", "fallback"],
        ),
    ];
    for (flags, tree, layouts) in cases {
        for layout in layouts {
            for contract in ["exact", "fast"] {
                let mut a = vec!["list1"];
                a.extend(flags);
                a.extend([
                    "--tree",
                    tree,
                    "--layout",
                    layout,
                    "--backend",
                    "device",
                    "--contract",
                    contract,
                ]);
                let report = stdout_of(&run_nearfield(d, &a), "list1 device");
                let line = report
                    .lines()
                    .find(|l| l.starts_with("difference from the CPU evaluator"))
                    .unwrap();
                let rel: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
                assert!(rel <= 1e-13, "{flags:?} {layout} {contract}: {line}");
                assert!(report.contains("backend device"), "{report}");
                assert!(
                    report.contains(&format!("contract {contract}, kernel ")),
                    "{report}"
                );
                // The exact contract's result is the CPU evaluator's, bit
                // for bit: no difference at all.
                if contract == "exact" {
                    assert!(
                        line.contains("max abs 0.000e0,"),
                        "{flags:?} {layout}: {line}"
                    );
                }
            }
        }
    }
}
