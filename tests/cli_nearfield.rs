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

fn run_nearfield(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .current_dir(dir)
        .arg("nearfield")
        .args(args)
        .output()
        .expect("run hipkern")
}

fn stdout_of(o: &std::process::Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: exit {:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// The number after `label` on its line of `stats` output.
fn stat(out: &str, label: &str) -> usize {
    let line = out
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no '{label}' line in {out}"));
    let rest = &line[line.find("):").map(|i| i + 2).unwrap_or(label.len())..];
    let rest = rest.trim_start_matches(':').trim_start();
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("'{label}': no number in {line}"))
}

/// `stats` prints the numbers: 3D q = 3 scalar Laplace has 101,331
/// full entries, 2,510 representative rows in 10 case orbits, 1,576 bytes of
/// ORBIT metadata and 1,215,972 bytes of dense maps; the representative
/// counts of 2D q = 1..5 and 3D q = 1..4; a directional derivative reports
/// the fallback.
#[test]
fn stats_prints_the_symmetry_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = run_nearfield(
        d,
        &["stats", "--dim", "3", "--q", "3", "--kernel", "laplace"],
    );
    let out = stdout_of(&o, "stats 3D q=3");
    assert_eq!(stat(&out, "full entries"), 101_331, "{out}");
    assert_eq!(stat(&out, "representative rows"), 2510, "{out}");
    assert_eq!(stat(&out, "case orbits"), 10, "{out}");
    assert_eq!(stat(&out, "metadata bytes"), 1576, "{out}");
    assert_eq!(stat(&out, "dense-map bytes"), 1_215_972, "{out}");
    for (dim, counts) in [
        (2, &[7usize, 73, 357, 1084, 2641][..]),
        (3, &[10, 256, 2510, 12936][..]),
    ] {
        for (i, &want) in counts.iter().enumerate() {
            let q = (i + 1).to_string();
            let dim_s = dim.to_string();
            let o = run_nearfield(
                d,
                &["stats", "--dim", &dim_s, "--q", &q, "--kernel", "constant"],
            );
            let out = stdout_of(&o, "stats");
            assert_eq!(
                stat(&out, "representative rows"),
                want,
                "{dim}D q={q}: {out}"
            );
        }
    }
    let o = run_nearfield(
        d,
        &[
            "stats",
            "--dim",
            "2",
            "--q",
            "3",
            "--kernel",
            "laplace",
            "--derivative",
            "direction:0.6,0.6",
        ],
    );
    let out = stdout_of(&o, "stats directional");
    assert!(out.contains("descriptor fallback"), "{out}");
    assert_eq!(stat(&out, "full entries"), 33 * 81);
    assert!(stat(&out, "fallback metadata bytes") > 0);
}

fn read_npz_f64(m: &std::collections::BTreeMap<String, Vec<u8>>, name: &str) -> Vec<f64> {
    use ndarray_npy::ReadNpyExt;
    ndarray::ArrayD::<f64>::read_npy(m[name].as_slice())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .into_raw_vec_and_offset()
        .0
}

fn read_npz<T: ndarray_npy::ReadableElement>(
    m: &std::collections::BTreeMap<String, Vec<u8>>,
    name: &str,
) -> Vec<T> {
    use ndarray_npy::ReadNpyExt;
    ndarray::ArrayD::<T>::read_npy(m[name].as_slice())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .into_raw_vec_and_offset()
        .0
}

/// `build --symmetry full` and `build --symmetry none` of one table into
/// `d`: the reduced .npz's members and the dense table's `data`.
fn build_reduced_and_dense(
    d: &std::path::Path,
    table: &[&str],
) -> (std::collections::BTreeMap<String, Vec<u8>>, Vec<f64>) {
    for (symmetry, out) in [("full", "red.npz"), ("none", "dense.npz")] {
        let mut a = vec!["build"];
        a.extend(table);
        a.extend(["--symmetry", symmetry, "--out", out]);
        stdout_of(&run_nearfield(d, &a), symmetry);
    }
    (
        npz_members(&d.join("red.npz")),
        read_npz_f64(&npz_members(&d.join("dense.npz")), "data.npy"),
    )
}

/// `build --symmetry full` of a directional derivative writes the compact
/// table and the fallback descriptors; every full entry is rebuilt here from
/// the .npz alone, with the lookup rule of the docs implemented in the test
/// (transform candidates, smallest id, positive sign then lower transform
/// on ties, Fibonacci-hashed linear probing for `probe_count` slots, sparse
/// sign corrections), and compared with the dense table `build --symmetry
/// none` writes (1e−14 relative, 1e−16 absolute floor: they are two
/// independent builds); zero-by-symmetry entries are exactly 0 in the
/// rebuild.
#[test]
fn reduced_npz_with_fallback_descriptors_rebuilds_the_dense_table() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let table = [
        "--dim",
        "2",
        "--q",
        "3",
        "--kernel",
        "laplace",
        "--derivative",
        "direction:0.6,0.6",
    ];
    let (red, dense) = build_reduced_and_dense(d, &table);
    assert!(!red.contains_key("data.npy"));
    let ids: Vec<u32> = read_npz(&red, "reduced_entry_ids.npy");
    let values = read_npz_f64(&red, "reduced_data.npy");
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let qmap: Vec<u16> = read_npz(&red, "transform_qpoint_map.npy");
    let cmap: Vec<u8> = read_npz(&red, "transform_case_map.npy");
    let tsign: Vec<i8> = read_npz(&red, "transform_signs.npy");
    let keys: Vec<u32> = read_npz(&red, "representative_lookup_keys.npy");
    let rows: Vec<u32> = read_npz(&red, "representative_lookup_rows.npy");
    let fix_ids: Vec<u32> = read_npz(&red, "sign_lookup_ids.npy");
    let fix_signs: Vec<i8> = read_npz(&red, "sign_lookup_signs.npy");
    let probes = read_npz::<i64>(&red, "probe_count.npy")[0] as usize;
    let (n_cases, nq) = (33usize, 9usize);
    assert_eq!(dense.len(), n_cases * nq * nq);
    let size = keys.len();
    assert!(size.is_power_of_two());
    let bits = size.trailing_zeros();
    let mut worst = 0.0f64;
    let mut exact_zeros = 0;
    for (e, &want) in dense.iter().enumerate() {
        let (c, s, t) = (e / (nq * nq), (e / nq) % nq, e % nq);
        let (mut best, mut sign) = (u32::MAX, 1i8);
        for (g, &sg) in tsign.iter().enumerate() {
            let id = ((usize::from(cmap[g * n_cases + c]) * nq + usize::from(qmap[g * nq + s]))
                * nq
                + usize::from(qmap[g * nq + t])) as u32;
            if id < best || (id == best && sg > 0 && sign < 0) {
                best = id;
                sign = sg;
            }
        }
        if let Ok(i) = fix_ids.binary_search(&(e as u32)) {
            sign = fix_signs[i];
        }
        let h = if bits == 0 {
            0
        } else {
            (best.wrapping_mul(0x9E37_79B1) >> (32 - bits)) as usize
        };
        let row = (0..probes)
            .map(|p| (h + p) & (size - 1))
            .find(|&k| keys[k] == best)
            .map(|k| rows[k] as usize)
            .unwrap_or_else(|| panic!("entry {e}: representative {best} not found"));
        assert_eq!(ids[row], best, "entry {e}");
        let got = f64::from(sign) * values[row];
        if values[row] == 0.0 {
            exact_zeros += 1;
        }
        worst = worst.max((got - want).abs() / want.abs().max(1e-2));
    }
    assert!(worst <= 1e-14, "worst {worst:e}");
    assert!(
        exact_zeros > 0,
        "a directional q=3 table has zero-by-symmetry entries"
    );
}

/// `build --symmetry full` of a scalar kernel writes the ORBIT descriptors
/// (equal to the library's) and `orbit_rows`; `slot.sign · orbit_rows[row]`
/// rebuilds every entry of the dense table to 1e−14.
#[test]
fn reduced_npz_with_orbit_descriptors_rebuilds_the_dense_table() {
    use hipkern::nearfield::OrbitDescriptors;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let table = [
        "--dim",
        "2",
        "--q",
        "3",
        "--kernel",
        "laplace",
        "--derivative",
        "source:1",
        "--extent",
        "0.25",
    ];
    let (red, dense) = build_reduced_and_dense(d, &table);
    let k = Kernel::laplace(2)
        .unwrap()
        .axis_source_derivative(1)
        .unwrap();
    let o = OrbitDescriptors::build(&k, 3).unwrap();
    assert_eq!(
        read_npz::<u16>(&red, "case_orbit_ranks.npy"),
        o.case_orbit_ranks
    );
    assert_eq!(read_npz::<u8>(&red, "case_axis_perm.npy"), o.case_axis_perm);
    assert_eq!(read_npz::<i8>(&red, "case_axis_sign.npy"), o.case_axis_sign);
    assert_eq!(
        read_npz::<u8>(&red, "case_axis_group.npy"),
        o.case_axis_group
    );
    assert_eq!(
        read_npz::<u32>(&red, "case_value_offsets.npy"),
        o.case_value_offsets
    );
    assert_eq!(
        read_npz::<u8>(&red, "axis_sign_power.npy"),
        o.axis_sign_power
    );
    let rows = read_npz_f64(&red, "orbit_rows.npy");
    assert_eq!(rows.len(), o.n_rows());
    let nq = 9;
    let mut worst = 0.0f64;
    for (e, &want) in dense.iter().enumerate() {
        let slot = o.slot(e / (nq * nq), (e / nq) % nq, e % nq);
        let got = f64::from(slot.sign) * rows[slot.row];
        worst = worst.max((got - want).abs() / want.abs().max(1e-2));
    }
    assert!(worst <= 1e-14, "worst {worst:e}");
}

/// `--cache`: the first build stores the table, the second reads it (no
/// quadrature) and writes a byte-identical .npz; another λ is another key;
/// `--cache` alone fills the cache; a file that is not a cache is the
/// machine's error (exit 1) naming the flag and writes nothing; neither
/// output, or an unknown `--symmetry`, is a bad flag (exit 2).
#[test]
fn build_with_a_cache() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = [
        "build",
        "--dim",
        "2",
        "--q",
        "2",
        "--kernel",
        "yukawa",
        "--symmetry",
        "full",
        "--cache",
        "c.db",
    ];
    let with = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend(extra);
        run_nearfield(d, &a)
    };
    let first = stdout_of(&with(&["--lambda", "2", "--out", "a.npz"]), "first");
    assert!(first.contains("stored in cache"), "{first}");
    let second = stdout_of(&with(&["--lambda", "2", "--out", "b.npz"]), "second");
    assert!(second.contains("read from cache"), "{second}");
    assert_eq!(
        std::fs::read(d.join("a.npz")).unwrap(),
        std::fs::read(d.join("b.npz")).unwrap()
    );
    let other = stdout_of(&with(&["--lambda", "2.0000000000000004"]), "other λ");
    assert!(other.contains("stored in cache"), "{other}");
    let again = stdout_of(&with(&["--lambda", "2.0000000000000004"]), "other λ again");
    assert!(again.contains("read from cache"), "{again}");
    // Dense and reduced of one kernel are two keys.
    let mut dense = base.to_vec();
    dense[8] = "none";
    dense.extend(["--lambda", "2"]);
    let out = stdout_of(&run_nearfield(d, &dense), "dense");
    assert!(
        out.contains("dense table") && out.contains("stored in cache"),
        "{out}"
    );

    std::fs::write(d.join("junk.db"), b"this is not a database, just text").unwrap();
    let o = run_nearfield(
        d,
        &[
            "build", "--dim", "2", "--q", "1", "--kernel", "laplace", "--cache", "junk.db",
            "--out", "j.npz",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let msg = String::from_utf8_lossy(&o.stderr);
    assert!(msg.contains("--cache") && msg.contains("junk.db"), "{msg}");
    assert!(!d.join("j.npz").exists());
    assert_eq!(
        std::fs::read(d.join("junk.db")).unwrap(),
        b"this is not a database, just text"
    );
    for args in [
        &["build", "--dim", "2", "--q", "1", "--kernel", "laplace"][..],
        &[
            "build",
            "--dim",
            "2",
            "--q",
            "1",
            "--kernel",
            "laplace",
            "--symmetry",
            "half",
            "--out",
            "h.npz",
        ][..],
    ] {
        let o = run_nearfield(d, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
    }
    assert!(!d.join("h.npz").exists());
}

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
        (&["--tree", "uniform:2", "--batch", "7"][..], "--batch"),
        (
            &["--tree", "uniform:2", "--schedule", "sideways"][..],
            "--schedule",
        ),
        (
            &[
                "--tree",
                "uniform:2",
                "--schedule",
                "grouped",
                "--backend",
                "cpu",
            ][..],
            "--schedule",
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
            let mut outs = Vec::new();
            for (batch, schedule) in [
                ("1", "per-target"),
                ("32", "per-target"),
                ("1", "grouped"),
                ("1", "tiled"),
            ] {
                let out = format!("u-{layout}-{batch}-{schedule}.npy");
                let mut a = vec!["list1"];
                a.extend(flags);
                a.extend([
                    "--tree",
                    tree,
                    "--layout",
                    layout,
                    "--backend",
                    "device",
                    "--batch",
                    batch,
                    "--schedule",
                    schedule,
                    "--out",
                    &out,
                ]);
                let report = stdout_of(&run_nearfield(d, &a), "list1 device");
                let line = report
                    .lines()
                    .find(|l| l.starts_with("difference from the CPU evaluator"))
                    .unwrap();
                let rel: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
                assert!(rel <= 1e-13, "{flags:?} {layout} {batch}: {line}");
                assert!(report.contains("backend device"), "{report}");
                assert!(
                    report.contains(&format!("schedule {schedule},")),
                    "{report}"
                );
                outs.push(std::fs::read(d.join(&out)).unwrap());
            }
            assert_eq!(
                outs[0], outs[1],
                "{flags:?} {layout}: batch 1 and 32 differ"
            );
            assert_eq!(
                outs[0], outs[2],
                "{flags:?} {layout}: the grouped schedule differs"
            );
        }
    }
}
