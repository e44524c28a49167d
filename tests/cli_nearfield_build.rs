//! `hipkern nearfield build` and `stats` run as a program: the dense table
//! and its metadata written as numpy does, bit for bit the library's; the
//! symmetry numbers `stats` prints; `build --symmetry full` (ORBIT and
//! fallback descriptors) rebuilt entry by entry from the .npz alone against
//! `build --symmetry none`; `--cache` hits, misses and failures; bad flags
//! and outputs write nothing.
mod common;
use common::cli_nearfield::{bin, npz_members, read_npz, read_npz_f64, run_nearfield, stdout_of};
use hipkern::nearfield::{Cases, EntryQuadrature, Kernel};
use std::process::Command;

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
