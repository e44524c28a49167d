//! `hipkern nearfield entry` run as a program: the printed value parsed
//! back against closed forms (q = 1 self entries of Laplace 2D/3D, Constant
//! entries) and against the library's `entry` on random cases, and every
//! bad flag (one line on stderr, `hipkern nearfield: error: ...`, exit 2,
//! nothing on stdout). The program run is `HIPKERN_BIN` when set, else the
//! one cargo built with these tests.
use hipkern::nearfield::{entry, CaseRef, Cases, EntryQuadrature, Kernel};
use std::f64::consts::PI;
use std::ffi::OsString;
use std::process::Command;

fn bin() -> OsString {
    std::env::var_os("HIPKERN_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_hipkern").into())
}

fn run(args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .arg("nearfield")
        .arg("entry")
        .args(args)
        .output()
        .expect("run hipkern")
}

/// Runs the command, expects success and one line with a float on stdout.
fn value(args: &[&str]) -> f64 {
    let out = run(args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{args:?}: exit {:?}, stderr {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: stdout {stdout:?}");
    // 17 significant digits: d.dddddddddddddddde±x.
    let mantissa = lines[0].split('e').next().unwrap();
    assert_eq!(
        mantissa.trim_start_matches('-').len(),
        18,
        "{args:?}: not 17 significant digits: {}",
        lines[0]
    );
    lines[0].parse().unwrap()
}

/// Runs the command, expects exit 2, one error line and an empty stdout;
/// returns the message.
fn error(args: &[&str]) -> String {
    let out = run(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: stderr {stderr}");
    assert!(out.stdout.is_empty(), "{args:?}: stdout not empty");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: stderr {stderr:?}");
    assert!(
        stderr.starts_with("hipkern nearfield: error: "),
        "{args:?}: {stderr}"
    );
    stderr
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

const SELF_3D: [&str; 10] = [
    "--dim",
    "3",
    "--q",
    "1",
    "--kernel",
    "laplace",
    "--case",
    "0,0,0",
    "--source-mode",
    "0",
];

#[test]
fn closed_form_self_entries() {
    let exact3 = (3.0 * (2.0 + 3f64.sqrt()).ln() - PI / 2.0) / (4.0 * PI);
    let mut a = SELF_3D.to_vec();
    a.extend(["--target-point", "0"]);
    let v3 = value(&a);
    assert!(rel(v3, exact3) < 1e-12, "3D {v3} vs {exact3}");
    let exact2 = (0.5 * 2f64.ln() + 1.5 - PI / 4.0) / (2.0 * PI);
    let v2 = value(&[
        "--dim",
        "2",
        "--q",
        "1",
        "--kernel",
        "laplace",
        "--case",
        "0,0",
        "--source-mode",
        "0",
        "--target-point",
        "0",
    ]);
    assert!(rel(v2, exact2) < 1e-12, "2D {v2} vs {exact2}");
    println!(
        "CLI closed forms: 3D {:.2e}, 2D {:.2e}",
        rel(v3, exact3),
        rel(v2, exact2)
    );
}

#[test]
fn constant_entries() {
    let c = |dim: &str, q: &str, case: &str, s: &str, t: &str, l: &str| {
        value(&[
            "--dim",
            dim,
            "--q",
            q,
            "--kernel",
            "constant",
            "--case",
            case,
            "--source-mode",
            s,
            "--target-point",
            t,
            "--extent",
            l,
        ])
    };
    assert!((c("2", "1", "0,0", "0", "0", "1") - 1.0).abs() < 1e-13);
    assert!((c("2", "2", "-4,4", "3", "1", "1") - 0.25).abs() < 1e-13);
    assert!((c("2", "2", "6,-2", "0", "2", "1") - 0.25).abs() < 1e-13);
    assert!((c("3", "1", "1,-3,3", "0", "0", "1") - 1.0).abs() < 1e-13);
    // ∫φ_s = L^d·w_s: q = 1, L = 2 in 2D is 4.
    assert!((c("2", "1", "4,0", "0", "0", "2") - 4.0).abs() < 1e-12);
}

#[test]
fn random_entries_match_the_library() {
    // The library's generator: this test compares with the library anyway.
    let mut rng = hipkern::rng::SplitMix64::new(0x0005_eed4);
    let quad = EntryQuadrature::default();
    // (dim, q, count): 3D entries are costly in a debug build, so fewer.
    for (dim, q, count) in [(2usize, 3usize, 6usize), (3, 2, 3)] {
        let cases = Cases::new(dim).unwrap();
        let nq = q.pow(dim as u32);
        for i in 0..count {
            let case = rng.below(cases.len());
            let s = rng.below(nq);
            let t = rng.below(nq);
            let l = [1.0, 0.25, 3.0][i % 3];
            let (name, lambda, kernel) = match i % 3 {
                0 => ("laplace", None, Kernel::laplace(dim).unwrap()),
                1 => ("yukawa", Some(1.5), Kernel::yukawa(dim, 1.5).unwrap()),
                _ => ("constant", None, Kernel::constant(dim).unwrap()),
            };
            let derivs: [(Option<String>, Kernel); 4] = [
                (None, kernel.clone()),
                (
                    Some(format!("target:{}", dim - 1)),
                    kernel.clone().axis_target_derivative(dim - 1).unwrap(),
                ),
                (
                    Some("source:0".into()),
                    kernel.clone().axis_source_derivative(0).unwrap(),
                ),
                (
                    Some(if dim == 2 {
                        "direction:0.5,-2".into()
                    } else {
                        "direction:0.5,-2,1".into()
                    }),
                    kernel
                        .clone()
                        .directional_source_derivative(if dim == 2 {
                            &[0.5, -2.0]
                        } else {
                            &[0.5, -2.0, 1.0]
                        })
                        .unwrap(),
                ),
            ];
            let (spec, k) = &derivs[rng.below(4)];
            let cv = cases.vector(case);
            let case_s = cv
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",");
            let (ds, qs, ss, ts, ls) = (
                dim.to_string(),
                q.to_string(),
                s.to_string(),
                t.to_string(),
                l.to_string(),
            );
            let mut args = vec![
                "--dim",
                &ds,
                "--q",
                &qs,
                "--kernel",
                name,
                "--case",
                &case_s,
                "--source-mode",
                &ss,
                "--target-point",
                &ts,
                "--extent",
                &ls,
            ];
            let lam;
            if let Some(x) = lambda {
                lam = format!("{x}");
                args.extend(["--lambda", &lam]);
            }
            if let Some(sp) = spec {
                args.extend(["--derivative", sp]);
            }
            let got = value(&args);
            let want = entry(k, q, CaseRef::Id(case), s, t, l, &quad).unwrap();
            // 17 significant digits round-trip a float64 exactly.
            assert_eq!(got, want, "{args:?}");
        }
    }
}

#[test]
fn bad_flags() {
    let base = |over: &[(&str, &str)], drop: &[&str]| -> Vec<String> {
        let mut v: Vec<(String, String)> = [
            ("--dim", "2"),
            ("--q", "2"),
            ("--kernel", "laplace"),
            ("--case", "0,4"),
            ("--source-mode", "0"),
            ("--target-point", "3"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        for (k, val) in over {
            match v.iter_mut().find(|(a, _)| a == k) {
                Some(e) => e.1 = val.to_string(),
                None => v.push((k.to_string(), val.to_string())),
            }
        }
        v.retain(|(a, _)| !drop.contains(&a.as_str()));
        v.into_iter().flat_map(|(a, b)| [a, b]).collect()
    };
    let check = |over: &[(&str, &str)], drop: &[&str], needle: &str| {
        let a = base(over, drop);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        let msg = error(&refs);
        assert!(msg.contains(needle), "{refs:?}: {msg}");
    };
    // The base command works.
    let a = base(&[], &[]);
    value(&a.iter().map(String::as_str).collect::<Vec<_>>());

    check(&[("--kernel", "helmholtz")], &[], "unknown --kernel");
    check(&[("--case", "0,5")], &[], "no interaction case");
    check(&[("--case", "4,-3")], &[], "no interaction case");
    check(&[("--case", "0,0,0")], &[], "components");
    check(&[("--case", "0,x")], &[], "not an integer");
    check(
        &[("--source-mode", "4")],
        &[],
        "--source-mode 4 out of range",
    );
    check(
        &[("--target-point", "4")],
        &[],
        "--target-point 4 out of range",
    );
    check(&[("--kernel", "yukawa")], &[], "needs --lambda");
    check(&[("--lambda", "1")], &[], "only for --kernel yukawa");
    check(
        &[("--kernel", "yukawa"), ("--lambda", "-1")],
        &[],
        "--lambda",
    );
    check(
        &[("--kernel", "yukawa"), ("--lambda", "0")],
        &[],
        "--lambda",
    );
    check(&[("--derivative", "target:2")], &[], "axis 2 out of range");
    check(&[("--derivative", "source:x")], &[], "--derivative");
    check(&[("--derivative", "normal:0")], &[], "--derivative");
    check(&[("--derivative", "target")], &[], "--derivative");
    check(&[("--derivative", "direction:1,2,3")], &[], "3 components");
    check(&[("--derivative", "direction:1,nan")], &[], "finite");
    check(&[("--dim", "4")], &[], "--dim 4");
    check(&[("--dim", "1"), ("--case", "0")], &[], "--dim 1");
    check(&[("--q", "0")], &[], "--q 0");
    check(&[("--extent", "0")], &[], "--extent");
    check(&[("--extent", "-1")], &[], "--extent");
    check(&[("--q", "two")], &[], "--q");
    check(&[], &["--target-point"], "--target-point");
}

/// The members of a .npz written by `hipkern nearfield build`, by name.
fn npz_members(path: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = std::collections::BTreeMap::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).unwrap();
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        out.insert(f.name().to_string(), bytes);
    }
    out
}

/// `build` writes the dense table and its metadata as numpy does (read back
/// here with ndarray-npy, an independent reader), equal bit for bit to the
/// library's table; a bad flag or output writes nothing.
#[test]
fn build_writes_the_table_as_npz() {
    use hipkern::nearfield::NearFieldTable;
    use ndarray::{ArrayD, Ix0};
    use ndarray_npy::ReadNpyExt;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("table.npz");
    let status = Command::new(bin())
        .args(["nearfield", "build", "--dim", "2", "--q", "2"])
        .args(["--kernel", "yukawa", "--lambda", "1.5", "--extent", "0.5"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let members = npz_members(&out);
    let names: Vec<&str> = members.keys().map(String::as_str).collect();
    for want in [
        "data.npy",
        "q_points.npy",
        "mode_normalizers.npy",
        "case_vecs.npy",
        "case_indices.npy",
        "dim.npy",
        "q.npy",
        "L.npy",
        "kernel.npy",
        "lambda.npy",
        "derivative.npy",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let f64s = |name: &str| ArrayD::<f64>::read_npy(members[name].as_slice()).unwrap();
    let i32s = |name: &str| ArrayD::<i32>::read_npy(members[name].as_slice()).unwrap();
    let table = NearFieldTable::build(
        &Kernel::yukawa(2, 1.5).unwrap(),
        2,
        0.5,
        &EntryQuadrature::default(),
    )
    .unwrap();
    let data = f64s("data.npy");
    assert_eq!(data.shape(), &[33 * 16]);
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(data.as_slice().unwrap()), bits(table.data()));
    let q_points = f64s("q_points.npy");
    assert_eq!(q_points.shape(), &[4, 2]);
    assert_eq!(q_points.as_slice().unwrap(), table.q_points());
    assert_eq!(
        f64s("mode_normalizers.npy").as_slice().unwrap(),
        table.mode_normalizers()
    );
    let cases = Cases::new(2).unwrap();
    let case_vecs = i32s("case_vecs.npy");
    assert_eq!(case_vecs.shape(), &[33, 2]);
    for c in 0..33 {
        assert_eq!(
            &case_vecs.as_slice().unwrap()[2 * c..2 * c + 2],
            cases.vector(c)
        );
    }
    assert_eq!(
        i32s("case_indices.npy").as_slice().unwrap(),
        cases.case_indices()
    );
    let scalar = |name: &str| {
        ndarray::Array::<f64, Ix0>::read_npy(members[name].as_slice())
            .unwrap()
            .into_scalar()
    };
    assert_eq!(scalar("L.npy"), 0.5);
    assert_eq!(scalar("lambda.npy"), 1.5);
    let dim = ndarray::Array::<i64, Ix0>::read_npy(members["dim.npy"].as_slice()).unwrap();
    assert_eq!(dim.into_scalar(), 2);
    // The string members: numpy's <U7 "yukawa " is UTF-32LE after the header.
    let kernel = &members["kernel.npy"];
    let header_len = u16::from_le_bytes([kernel[8], kernel[9]]) as usize;
    let header = std::str::from_utf8(&kernel[10..10 + header_len]).unwrap();
    assert!(header.contains("'descr': '<U6'"), "{header}");
    let text: String = kernel[10 + header_len..]
        .chunks(4)
        .map(|c| char::from_u32(u32::from_le_bytes([c[0], c[1], c[2], c[3]])).unwrap())
        .collect();
    assert_eq!(text, "yukawa");

    // Errors: nothing written, no temporary file left.
    let bad = dir.path().join("bad.npz");
    for extra in [
        vec!["--kernel", "laplace", "--lambda", "1"],
        vec!["--kernel", "helmholtz"],
        vec!["--kernel", "laplace", "--q", "0"],
    ] {
        let mut args = vec!["nearfield", "build", "--dim", "2", "--q", "2"];
        args.extend(extra.iter());
        let o = Command::new(bin())
            .args(&args)
            .arg("--out")
            .arg(&bad)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
    }
    let o = Command::new(bin())
        .args([
            "nearfield",
            "build",
            "--dim",
            "2",
            "--q",
            "1",
            "--kernel",
            "laplace",
        ])
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, vec!["table.npz".to_string()], "files left: {left:?}");
}
