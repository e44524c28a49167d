//! `hipkern nearfield entry` run as a program: the printed value parsed
//! back against closed forms (q = 1 self entries of Laplace 2D/3D, Constant
//! entries) and against the library's `entry` on random cases, and every
//! bad flag (one line on stderr, `hipkern nearfield: error: ...`, exit 2,
//! nothing on stdout). The program run is `HIPKERN_BIN` when set, else the
//! one cargo built with these tests. `build` and `stats`:
//! cli_nearfield_build.rs; `list1`: cli_nearfield_list1.rs.
mod common;
use common::cli_nearfield::bin;
use hipkern::nearfield::{entry, CaseRef, Cases, EntryQuadrature, Kernel};
use std::f64::consts::PI;
use std::process::Command;

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
