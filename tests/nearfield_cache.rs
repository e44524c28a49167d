//! The SQLite table cache (`hipkern::nearfield::TableCache`, schema 2.1.0;
//! docs/nearfield_cache.md): round trips, keys, upsert, WAL, read-only
//! handles, non-finite tables never stored, a two-process read/write test
//! (this binary re-invokes itself as a writer and two readers), and machine
//! faults as I/O errors. Payloads and files that are not caches:
//! nearfield_cache_payloads.rs; schema versions and the legacy 1.x schema:
//! nearfield_cache_legacy.rs. Helpers: tests/common/nearfield_cache.rs.
//!
//! Tables are small (q ≤ 2 when built by quadrature, synthetic values
//! through `from_parts` otherwise) so the whole file runs in a few seconds.
mod common;
use common::nearfield_cache::{
    assert_dense_eq, assert_reduced_eq, bits, column_names, err_text, get_dense, get_reduced,
    next_up, quad, raw, synth_dense, table_names,
};
use hipkern::nearfield::{
    CacheKey, CachedTable, EntryQuadrature, Kernel, NearFieldTable, ReducedTable, SymmetryMode,
    TableCache, CACHE_SCHEMA_VERSION,
};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Round trips, keys, upsert, WAL, read-only
// ---------------------------------------------------------------------------

#[test]
fn round_trip_of_built_dense_and_reduced_tables_is_bitwise() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache.sqlite");
    let dense = NearFieldTable::build(&Kernel::laplace(2).unwrap(), 2, 1.0, &quad()).unwrap();
    let yuk = Kernel::yukawa(2, 1.5).unwrap();
    let dense_y = NearFieldTable::build(&yuk, 2, 0.5, &quad()).unwrap();
    let red = ReducedTable::build(&yuk, 2, 0.5, &quad()).unwrap();
    let red3 = ReducedTable::build(&Kernel::laplace(3).unwrap(), 2, 1.0, &quad()).unwrap();
    let red_d = ReducedTable::from_dense(&synth_dense(
        &Kernel::laplace(2)
            .unwrap()
            .axis_target_derivative(1)
            .unwrap(),
        2,
        1.0,
        &quad(),
        3,
    ))
    .unwrap();
    {
        let c = TableCache::open(&path).unwrap();
        assert!(c.is_empty().unwrap());
        assert_eq!(c.schema_version(), CACHE_SCHEMA_VERSION);
        assert!(!c.is_read_only() && !c.is_legacy());
        assert_eq!(c.migrated_rows(), None);
        c.put_dense(&dense).unwrap();
        c.put_dense(&dense_y).unwrap();
        c.put_reduced(&red).unwrap();
        c.put_reduced(&red3).unwrap();
        c.put_reduced(&red_d).unwrap();
        assert_eq!(c.len().unwrap(), 5);
        // Read back on the writing handle too.
        assert_dense_eq(&get_dense(&c, &dense), &dense);
        assert_reduced_eq(&get_reduced(&c, &red3), &red3);
    }
    for c in [
        TableCache::open(&path).unwrap(),
        TableCache::open_read_only(&path).unwrap(),
    ] {
        assert_eq!(c.len().unwrap(), 5);
        assert_dense_eq(&get_dense(&c, &dense), &dense);
        assert_dense_eq(&get_dense(&c, &dense_y), &dense_y);
        assert_reduced_eq(&get_reduced(&c, &red), &red);
        assert_reduced_eq(&get_reduced(&c, &red3), &red3);
        assert_reduced_eq(&get_reduced(&c, &red_d), &red_d);
        // The convenience getters, and absent keys.
        let t = c.get_dense(&yuk, 2, 0.5, &quad()).unwrap().unwrap();
        assert_dense_eq(&t, &dense_y);
        let r = c.get_reduced(&yuk, 2, 0.5, &quad()).unwrap().unwrap();
        assert_reduced_eq(&r, &red);
        assert!(c
            .get_reduced(&Kernel::laplace(2).unwrap(), 2, 1.0, &quad())
            .unwrap()
            .is_none());
        assert!(c.get_dense(&yuk, 2, 1.0, &quad()).unwrap().is_none());
        // The reduced table still reconstructs the same full table.
        assert_eq!(
            bits(&r.reconstruct_full_table_from_symmetry()),
            bits(&red.reconstruct_full_table_from_symmetry())
        );
    }
}

#[test]
fn keys_separate_every_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.sqlite");
    let q2 = quad();
    let lap2 = || Kernel::laplace(2).unwrap();
    let alt_radial = EntryQuadrature {
        radial_level: 3,
        ..q2
    };
    let alt_angular = EntryQuadrature {
        angular_order: 5,
        ..q2
    };
    let lam = 1.5;
    let lam_next = next_up(lam);
    assert_eq!(lam_next, 1.500_000_000_000_000_2);
    // (kernel, q, extent, quad): every pair differs in one parameter.
    let dense_params: Vec<(Kernel, usize, f64, EntryQuadrature)> = vec![
        (Kernel::yukawa(2, lam).unwrap(), 2, 1.0, q2),
        (Kernel::yukawa(2, lam_next).unwrap(), 2, 1.0, q2),
        (Kernel::yukawa(3, lam).unwrap(), 2, 1.0, q2),
        (lap2(), 2, 1.0, q2),
        (lap2(), 2, 1.0, alt_radial),
        (lap2(), 2, 1.0, alt_angular),
        (lap2(), 2, next_up(1.0), q2),
        (lap2(), 2, 0.5, q2),
        (lap2(), 1, 1.0, q2),
        (lap2(), 3, 1.0, q2),
        (Kernel::laplace(3).unwrap(), 2, 1.0, q2),
        (Kernel::constant(2).unwrap(), 2, 1.0, q2),
        (lap2().axis_target_derivative(0).unwrap(), 2, 1.0, q2),
        (lap2().axis_target_derivative(1).unwrap(), 2, 1.0, q2),
        (lap2().axis_source_derivative(0).unwrap(), 2, 1.0, q2),
        (lap2().axis_source_derivative(1).unwrap(), 2, 1.0, q2),
        (
            lap2().directional_source_derivative(&[0.6, 0.8]).unwrap(),
            2,
            1.0,
            q2,
        ),
        (
            lap2()
                .directional_source_derivative(&[0.6, next_up(0.8)])
                .unwrap(),
            2,
            1.0,
            q2,
        ),
        (
            lap2().directional_source_derivative(&[0.8, 0.6]).unwrap(),
            2,
            1.0,
            q2,
        ),
        (
            Kernel::yukawa(2, lam)
                .unwrap()
                .axis_target_derivative(0)
                .unwrap(),
            2,
            1.0,
            q2,
        ),
        (
            Kernel::yukawa(2, lam_next)
                .unwrap()
                .axis_target_derivative(0)
                .unwrap(),
            2,
            1.0,
            q2,
        ),
    ];
    let dense: Vec<NearFieldTable> = dense_params
        .iter()
        .enumerate()
        .map(|(i, (k, q, l, qd))| synth_dense(k, *q, *l, qd, 100 + i as u64))
        .collect();
    // Reduced tables of some of the same parameters: symmetry is in the key.
    let reduced: Vec<ReducedTable> = [0usize, 1, 3, 4, 12]
        .iter()
        .map(|&i| {
            let (k, q, l, qd) = &dense_params[i];
            ReducedTable::from_dense(&synth_dense(k, *q, *l, qd, 500 + i as u64)).unwrap()
        })
        .collect();
    let mut texts: Vec<String> = dense
        .iter()
        .map(|t| CacheKey::of_dense(t).text())
        .chain(reduced.iter().map(|t| CacheKey::of_reduced(t).text()))
        .collect();
    let n = texts.len();
    texts.sort();
    texts.dedup();
    assert_eq!(texts.len(), n, "two parameter sets share a key text");
    let c = TableCache::open(&path).unwrap();
    for t in &dense {
        c.put_dense(t).unwrap();
    }
    for t in &reduced {
        c.put_reduced(t).unwrap();
    }
    assert_eq!(c.len().unwrap(), n, "an upsert merged two keys");
    for t in &dense {
        assert_dense_eq(&get_dense(&c, t), t);
    }
    for t in &reduced {
        assert_reduced_eq(&get_reduced(&c, t), t);
    }
    // The documented key text, and λ stored by its bits.
    let k = CacheKey::of_dense(&dense[0]);
    assert_eq!(
        k.text(),
        "dim=2;q=2;extent=3ff0000000000000;base=yukawa;lambda=3ff8000000000000;\
         derivative=none;axis=-1;direction=;radial_level=2;angular_order=4;symmetry=none;\
         payload_format=1"
    );
    assert_eq!(
        CacheKey::new(&dense_params[0].0, 2, 1.0, &q2, SymmetryMode::None).unwrap(),
        k
    );
    drop(c);
    let r = raw(&path);
    let mut st = r
        .prepare(
            "SELECT lambda_bits FROM nearfield_cache WHERE base_kernel = 'yukawa' AND dim = 2 \
             AND derivative = 'none' AND symmetry = 'none' ORDER BY lambda_bits",
        )
        .unwrap();
    let lb: Vec<String> = st
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(lb, ["3ff8000000000000", "3ff8000000000001"]);
    // Bad keys are refused as a table build refuses them.
    let l = lap2();
    assert!(CacheKey::new(&l, 0, 1.0, &q2, SymmetryMode::None).is_err());
    assert!(CacheKey::new(&l, 2, f64::NAN, &q2, SymmetryMode::None).is_err());
    assert!(CacheKey::new(&l, 2, -1.0, &q2, SymmetryMode::Full).is_err());
}

#[test]
fn upsert_replaces_the_table_of_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("upsert.sqlite");
    let k = Kernel::yukawa(2, 2.0).unwrap();
    let a = synth_dense(&k, 2, 1.0, &quad(), 1);
    let b = NearFieldTable::from_parts(
        &k,
        2,
        1.0,
        &quad(),
        a.data().iter().map(|v| 2.0 * v).collect(),
    )
    .unwrap();
    let c = TableCache::open(&path).unwrap();
    c.put_dense(&a).unwrap();
    assert_eq!(c.len().unwrap(), 1);
    assert_dense_eq(&get_dense(&c, &a), &a);
    c.put_dense(&b).unwrap();
    assert_eq!(c.len().unwrap(), 1);
    assert_dense_eq(&get_dense(&c, &a), &b);
    // The reduced table of the same parameters is another row, and
    // replaces only itself.
    let ra = ReducedTable::from_dense(&a).unwrap();
    let rb = ReducedTable::from_dense(&b).unwrap();
    c.put_reduced(&ra).unwrap();
    c.put_reduced(&rb).unwrap();
    assert_eq!(c.len().unwrap(), 2);
    assert_reduced_eq(&get_reduced(&c, &ra), &rb);
    c.put_dense(&a).unwrap();
    drop(c);
    let c = TableCache::open_read_only(&path).unwrap();
    assert_eq!(c.len().unwrap(), 2);
    assert_dense_eq(&get_dense(&c, &a), &a);
    assert_reduced_eq(&get_reduced(&c, &ra), &rb);
}

#[test]
fn writable_open_switches_to_wal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wal.sqlite");
    let c = TableCache::open(&path).unwrap();
    assert_eq!(c.journal_mode().unwrap(), "wal");
    c.put_dense(&synth_dense(
        &Kernel::laplace(2).unwrap(),
        1,
        1.0,
        &quad(),
        9,
    ))
    .unwrap();
    drop(c);
    // WAL persists in the file: a plain connection sees it, so does a
    // read-only handle.
    let mode: String = Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let ro = TableCache::open_read_only(&path).unwrap();
    assert_eq!(ro.journal_mode().unwrap(), "wal");
    // The 2.1.0 DDL: meta and nearfield_cache, the payload and no dense
    // arrays.
    let r = raw(&path);
    assert_eq!(table_names(&r), ["meta", "nearfield_cache"]);
    let cols = column_names(&r, "nearfield_cache");
    for want in [
        "dim",
        "q",
        "extent_bits",
        "base_kernel",
        "lambda_bits",
        "derivative",
        "derivative_axis",
        "direction_bits",
        "radial_level",
        "angular_order",
        "symmetry",
        "payload_format",
        "extent",
        "lambda",
        "payload",
    ] {
        assert!(cols.iter().any(|c| c == want), "no column {want}: {cols:?}");
    }
    assert_eq!(cols.len(), 15, "{cols:?}");
    let v: String = r
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |x| x.get(0),
        )
        .unwrap();
    assert_eq!(v, "2.1.0");
}

#[test]
fn read_only_handle_refuses_put_and_never_creates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ro.sqlite");
    // No file: refused, and not created.
    let e = err_text(TableCache::open_read_only(&path));
    assert!(e.contains("no such file"), "{e}");
    assert!(!path.exists());
    let t = synth_dense(&Kernel::laplace(3).unwrap(), 1, 1.0, &quad(), 4);
    TableCache::open(&path).unwrap().put_dense(&t).unwrap();
    let ro = TableCache::open_read_only(&path).unwrap();
    assert!(ro.is_read_only());
    let before = std::fs::read(&path).unwrap();
    let e = err_text(ro.put_dense(&t));
    assert!(e.contains("read-only"), "{e}");
    let e = err_text(ro.put_reduced(&ReducedTable::from_dense(&t).unwrap()));
    assert!(e.contains("read-only"), "{e}");
    assert_dense_eq(&get_dense(&ro, &t), &t);
    assert_eq!(ro.len().unwrap(), 1);
    drop(ro);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn non_finite_tables_are_never_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nan.sqlite");
    let k = Kernel::laplace(2).unwrap();
    let q2 = quad();
    let t = synth_dense(&k, 2, 1.0, &q2, 21);
    let mut nan = t.data().to_vec();
    nan[17] = f64::NAN;
    let e = err_text(NearFieldTable::from_parts(&k, 2, 1.0, &q2, nan));
    assert!(e.contains("not finite"), "{e}");
    let mut inf = t.data().to_vec();
    inf[0] = f64::INFINITY;
    assert!(NearFieldTable::from_parts(&k, 2, 1.0, &q2, inf).is_err());
    let r = ReducedTable::from_dense(&t).unwrap();
    let mut rd = r.reduced_data().to_vec();
    let i = rd.iter().position(|&v| v != 0.0).unwrap();
    rd[i] = f64::NAN;
    let e = err_text(ReducedTable::from_parts(
        &k,
        2,
        1.0,
        &q2,
        r.reduced_entry_ids().to_vec(),
        rd,
    ));
    assert!(e.contains("not finite"), "{e}");
    // No table with NaN or inf can be made: scaling 2D Laplace by 1e200
    // (ρ² = inf, inf − inf = NaN in the log shift) or 3D Laplace (ρ² = inf)
    // is refused, so nothing non-finite can reach a put.
    let e = err_text(t.scaled(1e200));
    assert!(e.contains("not finite"), "{e}");
    let e = err_text(synth_dense(&Kernel::laplace(3).unwrap(), 1, 1.0, &q2, 22).scaled(1e200));
    assert!(e.contains("not finite"), "{e}");
    let c = TableCache::open(&path).unwrap();
    assert_eq!(c.len().unwrap(), 0);
}

// ---------------------------------------------------------------------------
// Two processes reading while one writes
// ---------------------------------------------------------------------------

const ENV_DB: &str = "HIPKERN_CACHE_TEST_DB";
const ENV_ROLE: &str = "HIPKERN_CACHE_TEST_ROLE";
const ENV_STOP: &str = "HIPKERN_CACHE_TEST_STOP";
const WRITE_FOR: Duration = Duration::from_millis(2000);

/// The two versions the writer alternates: a 3D Yukawa q = 2 table (8896
/// values, a 71 KB payload over many overflow pages) and the same key's
/// data scaled by 2.
fn rw_versions() -> (NearFieldTable, NearFieldTable) {
    let k = Kernel::yukawa(3, 0.75).unwrap();
    let a = synth_dense(&k, 2, 0.5, &quad(), 91);
    let b = NearFieldTable::from_parts(
        &k,
        2,
        0.5,
        &quad(),
        a.data().iter().map(|v| 2.0 * v).collect(),
    )
    .unwrap();
    (a, b)
}

fn child_env() -> Option<(PathBuf, String)> {
    let db = std::env::var_os(ENV_DB)?;
    let role = std::env::var(ENV_ROLE).ok()?;
    Some((PathBuf::from(db), role))
}

/// Child: upserts B, A, B, … for [`WRITE_FOR`]. Does nothing unless run by
/// [`two_processes_read_while_one_writes`].
#[test]
fn child_cache_writer() {
    let Some((db, role)) = child_env() else {
        return;
    };
    if role != "writer" {
        return;
    }
    let (a, b) = rw_versions();
    let cache = TableCache::open(&db).unwrap();
    let start = Instant::now();
    let mut puts = 0u64;
    while start.elapsed() < WRITE_FOR {
        cache
            .put_dense(if puts % 2 == 0 { &b } else { &a })
            .unwrap();
        puts += 1;
    }
    println!("CHILD-RESULT writer puts={puts}");
}

/// Child: reads the key in a loop until the stop file appears; every read
/// must be exactly A or B. Does nothing unless run by
/// [`two_processes_read_while_one_writes`].
#[test]
fn child_cache_reader() {
    let Some((db, role)) = child_env() else {
        return;
    };
    if role != "reader" {
        return;
    }
    let stop = PathBuf::from(std::env::var_os(ENV_STOP).expect("stop file"));
    let (a, b) = rw_versions();
    let (ba, bb) = (bits(a.data()), bits(b.data()));
    let key = CacheKey::of_dense(&a);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut cache = TableCache::open_read_only(&db).unwrap();
    let (mut reads, mut na, mut nb) = (0u64, 0u64, 0u64);
    while !stop.exists() {
        assert!(Instant::now() < deadline, "reader: no stop file after 60 s");
        if reads % 64 == 63 {
            // Now and then a fresh connection (open while the writer writes).
            cache = TableCache::open_read_only(&db).unwrap();
        }
        let t = match cache.get(&key) {
            Ok(Some(CachedTable::Dense(t))) => t,
            other => panic!("reader: read {reads}: {other:?}"),
        };
        let got = bits(t.data());
        if got == ba {
            na += 1;
        } else if got == bb {
            nb += 1;
        } else {
            panic!("reader: read {reads} is neither version A nor B (torn)");
        }
        assert_eq!(t.kernel(), a.kernel());
        reads += 1;
    }
    println!("CHILD-RESULT reader reads={reads} a={na} b={nb}");
}

fn spawn_child(name: &str, db: &Path, role: &str, stop: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name,
            "--nocapture",
            "--include-ignored",
            "--test-threads=1",
        ])
        .env(ENV_DB, db)
        .env(ENV_ROLE, role)
        .env(ENV_STOP, stop)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `key=value` counts from a child's `CHILD-RESULT` line.
fn child_counts(out: &std::process::Output, who: &str) -> Vec<(String, u64)> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{who} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // libtest prints "test name ... " before the test's own output.
    let at = stdout
        .find("CHILD-RESULT ")
        .unwrap_or_else(|| panic!("{who}: no result line (did the child run?):\n{stdout}"));
    let line = stdout[at..].lines().next().unwrap();
    line.split_whitespace()
        .skip(2)
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

fn count(c: &[(String, u64)], k: &str) -> u64 {
    c.iter().find(|(n, _)| n == k).unwrap().1
}

#[test]
fn two_processes_read_while_one_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.sqlite");
    let stop = dir.path().join("stop");
    let (a, b) = rw_versions();
    TableCache::open(&db).unwrap().put_dense(&a).unwrap();
    let readers: Vec<_> = (0..2)
        .map(|_| spawn_child("child_cache_reader", &db, "reader", &stop))
        .collect();
    let writer = spawn_child("child_cache_writer", &db, "writer", &stop);
    let w = writer.wait_with_output().unwrap();
    std::fs::write(&stop, b"stop").unwrap();
    let r: Vec<_> = readers
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let wc = child_counts(&w, "writer");
    let puts = count(&wc, "puts");
    assert!(puts >= 10, "writer: only {puts} puts");
    let (mut seen_a, mut seen_b) = (0, 0);
    for (i, o) in r.iter().enumerate() {
        let rc = child_counts(o, &format!("reader {i}"));
        let reads = count(&rc, "reads");
        assert!(reads >= 10, "reader {i}: only {reads} reads");
        assert_eq!(count(&rc, "a") + count(&rc, "b"), reads);
        seen_a += count(&rc, "a");
        seen_b += count(&rc, "b");
    }
    // B exists only while the writer runs: reads overlapped the writes.
    assert!(
        seen_b > 0 && seen_a > 0,
        "readers saw A {seen_a} and B {seen_b} times"
    );
    eprintln!("two processes: {puts} puts, reads A {seen_a}, B {seen_b}");
    let c = TableCache::open_read_only(&db).unwrap();
    assert_eq!(c.len().unwrap(), 1);
    let last = bits(get_dense(&c, &a).data());
    assert!(last == bits(a.data()) || last == bits(b.data()));
}

// ---------------------------------------------------------------------------
// Machine faults
// ---------------------------------------------------------------------------

/// A cache that cannot be created for a reason of the machine (here: its
/// folder is a regular file) is `Error::Io`, not `InvalidInput`; a file
/// that is not a database stays `InvalidInput`.
#[test]
fn machine_faults_are_io_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain");
    std::fs::write(&file, b"not a folder").unwrap();
    match TableCache::open(file.join("cache.sqlite")) {
        Err(hipkern::Error::Io { action, message }) => {
            assert!(action.contains("cache.sqlite"), "{action}");
            assert!(action.contains("open"), "{action}");
            assert!(!message.is_empty());
        }
        other => panic!("expected Error::Io, got {other:?}"),
    }
    let junk = dir.path().join("junk.sqlite");
    std::fs::write(&junk, vec![0x5a; 4096]).unwrap();
    assert!(matches!(
        TableCache::open(&junk),
        Err(hipkern::Error::InvalidInput(_))
    ));
}
