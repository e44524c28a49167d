//! `hipkern demo`, the main job: on the CPU backend (small sizes) it runs
//! every step, prints the summary table with each step's error against its
//! reference within tolerance, writes the FITS and PNG it names, stores the
//! table in the cache given by `XDG_CACHE_HOME` (the user's cache folder)
//! and reads it back on the second run; bad flags are exit 2. On the H200
//! (ignored test) the device backend at full sizes. The program run is
//! `HIPKERN_BIN` when set, else the one Cargo built.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn hipkern() -> PathBuf {
    std::env::var_os("HIPKERN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_hipkern")))
}

fn demo(dir: &Path, args: &[&str]) -> Output {
    Command::new(hipkern())
        .current_dir(dir)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .arg("demo")
        .args(args)
        .output()
        .expect("run hipkern demo")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The summary row of `step`: (backend, error column).
fn row(out: &str, step: &str) -> (String, String) {
    let line = out
        .lines()
        .find(|l| l.starts_with(step))
        .unwrap_or_else(|| panic!("no row {step:?} in {out}"));
    let rest: Vec<&str> = line[step.len()..].split_whitespace().collect();
    let backend = rest[0].to_string();
    // The error column follows "time s".
    let s = rest.iter().position(|w| *w == "s").expect("time column");
    (backend, rest[s + 1].to_string())
}

fn check_run(out: &str, backend: &str) {
    for step in [
        "List 1 (3D Laplace q=3)",
        "forces + virials (periodic)",
        "PSF replay (dense fixture)",
    ] {
        let (b, err) = row(out, step);
        assert_eq!(b, backend, "{step}");
        if backend == "cpu" && step.starts_with("List 1") {
            // The CPU evaluator is the reference: no error to show.
            assert_eq!(err, "-", "{step}");
            continue;
        }
        let e: f64 = err
            .parse()
            .unwrap_or_else(|_| panic!("{step}: error {err:?}"));
        assert!(e <= 1e-10, "{step}: error {e}");
    }
    assert_eq!(row(out, "near-field table").0, "cpu");
}

#[test]
fn cpu_backend_runs_every_step_and_reuses_the_cached_table() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = demo(d, &["--backend", "cpu", "--size", "small"]);
    let out = stdout(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    check_run(&out, "cpu");
    let db = d.join("cache").join("hipkern").join("tables.db");
    assert!(db.is_file(), "no cache at {}", db.display());
    assert!(out.contains("built and stored"), "{out}");
    for f in ["demo-dense.fits", "demo-dense.png"] {
        let p = d.join("hipkern-demo").join(f);
        assert!(p.metadata().unwrap().len() > 1000, "{}", p.display());
        assert!(out.contains(&format!(
            "wrote {}",
            Path::new("hipkern-demo").join(f).display()
        )));
    }
    // Second run: the table comes from the cache; --cache and --out-dir move things.
    let other = d.join("elsewhere.db");
    let o = demo(
        d,
        &[
            "--backend",
            "cpu",
            "--size",
            "small",
            "--cache",
            other.to_str().unwrap(),
            "--out-dir",
            "img",
        ],
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("built and stored") && other.is_file());
    let o = demo(d, &["--backend", "cpu", "--size", "small"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("read from the cache"), "{}", stdout(&o));
    assert!(d.join("img").join("demo-dense.png").is_file());
}

#[test]
fn bad_flags_are_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    for args in [["--backend", "gpu"], ["--size", "huge"]] {
        let o = demo(dir.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(args[1]), "{err}");
    }
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_backend_full_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let o = demo(dir.path(), &["--backend", "device"]);
    let out = stdout(&o);
    eprintln!("{out}");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    check_run(&out, "device");
}
