//! `hipkern demo`, the main job: on the CPU backend (small sizes) it runs
//! every step, prints the summary table (end-to-end and kernel times, each
//! step's error against its reference within tolerance), writes the FITS
//! and PNG it names (a lensed star field: a PNG with light in it), stores
//! the table in the cache given by `XDG_CACHE_HOME` (the user's cache
//! folder) and reads it back on the second run; bad flags are exit 2. On
//! the H200 (ignored test) the device backend at full sizes. The program
//! run is `HIPKERN_BIN` when set, else the one Cargo built.
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

/// A summary row's columns: step, backend, size, end to end, kernels,
/// error, note (the table puts two spaces at least between columns, and
/// none inside one).
struct Row {
    backend: String,
    total: String,
    kernels: String,
    error: String,
}

fn row(out: &str, step: &str) -> Row {
    let line = out
        .lines()
        .find(|l| l.starts_with(step))
        .unwrap_or_else(|| panic!("no row {step:?} in {out}"));
    let cols: Vec<&str> = line
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert!(cols.len() >= 7, "{line}");
    assert_eq!(cols[0], step);
    Row {
        backend: cols[1].to_string(),
        total: cols[3].to_string(),
        kernels: cols[4].to_string(),
        error: cols[5].to_string(),
    }
}

/// A time column's milliseconds: "2860 ms", "45.6 ms", "0.0400 ms".
fn millis(col: &str, what: &str) -> f64 {
    let v = col
        .strip_suffix(" ms")
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{what}: time {col:?} is not in ms"));
    assert!(v > 0.0 && v.is_finite(), "{what}: {col}");
    // Three significant digits (whole ms from 1,000 on): never "0.000".
    let digits = col.trim_end_matches(" ms").trim_start_matches(['0', '.']);
    assert!(
        digits.chars().filter(char::is_ascii_digit).count() >= 3,
        "{what}: {col}"
    );
    v
}

fn check_run(out: &str, backend: &str) {
    let header = out
        .lines()
        .find(|l| l.starts_with("step"))
        .unwrap_or_else(|| panic!("no header in {out}"));
    for col in ["backend", "size", "end to end", "kernels", "error", "note"] {
        assert!(header.contains(col), "{header}");
    }
    for step in [
        "near-field table",
        "List 1 (3D Laplace q=3)",
        "forces + virials (periodic)",
        "PSF: lensed star field",
    ] {
        let r = row(out, step);
        let total = millis(&r.total, step);
        let device = backend == "device" && step != "near-field table";
        if device {
            assert_eq!(r.backend, "device", "{step}");
            // The kernels are part of the whole path.
            let k = millis(&r.kernels, step);
            assert!(k <= total, "{step}: kernels {k} ms > end to end {total} ms");
        } else {
            assert_eq!(r.backend, "cpu", "{step}");
            assert_eq!(r.kernels, "-", "{step}");
        }
        if step == "near-field table" || (backend == "cpu" && step.starts_with("List 1")) {
            // No second result to check (the CPU evaluator is the reference).
            assert_eq!(r.error, "-", "{step}");
            continue;
        }
        let e: f64 = r
            .error
            .parse()
            .unwrap_or_else(|_| panic!("{step}: error {:?}", r.error));
        assert!(e <= 1e-10, "{step}: error {e}");
    }
}

/// The fraction of the PNG's pixels with light in them, after checking
/// it is an 8-bit RGB image.
fn lit_fraction(png_path: &Path) -> f64 {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0u8; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let px = &buf[..info.buffer_size()];
    // Saturated cores exist (bright stars), and so does black sky.
    assert!(px.contains(&255) && px.contains(&0));
    let lit = px
        .chunks_exact(3)
        .filter(|p| p.iter().any(|&c| c > 24))
        .count();
    lit as f64 / (px.len() / 3) as f64
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
    for f in ["demo-sky.fits", "demo-sky.png"] {
        let p = d.join("hipkern-demo").join(f);
        assert!(p.metadata().unwrap().len() > 1000, "{}", p.display());
        assert!(out.contains(&format!(
            "wrote {}",
            Path::new("hipkern-demo").join(f).display()
        )));
    }
    // A star field over the whole frame: not mostly black, not washed out.
    let lit = lit_fraction(&d.join("hipkern-demo").join("demo-sky.png"));
    assert!((0.05..0.8).contains(&lit), "{lit} of the pixels lit");
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
    assert!(d.join("img").join("demo-sky.png").is_file());
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
    let lit = lit_fraction(&dir.path().join("hipkern-demo").join("demo-sky.png"));
    assert!((0.05..0.8).contains(&lit), "{lit} of the pixels lit");
}
