//! The SQLite table cache (`hipkern::nearfield::TableCache`, schema 2.1.0;
//! docs/nearfield_cache.md): round trips, keys, upsert, WAL, read-only
//! handles, a legacy 1.x database built here from the documented DDL (read
//! as is read-only, migrated writable), version refusal, corrupt, truncated
//! and NaN payloads (one encoded here from the documented layout), files
//! that are not caches, and a two-process read/write test (this binary
//! re-invokes itself as a writer and two readers).
//!
//! Tables are small (q ≤ 2 when built by quadrature, synthetic values
//! through `from_parts` otherwise) so the whole file runs in a few seconds.
use hipkern::nearfield::{
    q_points, CacheKey, CachedTable, EntryQuadrature, Kernel, NearFieldTable, ReducedTable,
    SymmetryMode, TableCache, CACHE_SCHEMA_VERSION, PAYLOAD_FORMAT_VERSION, PAYLOAD_MAGIC,
};
use rusqlite::{params, Connection};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn quad() -> EntryQuadrature {
    EntryQuadrature {
        radial_level: 2,
        angular_order: 4,
    }
}

fn n_cases(dim: usize) -> usize {
    match dim {
        2 => 33,
        3 => 139,
        _ => unreachable!(),
    }
}

/// The next f64 above a positive `x`.
fn next_up(x: f64) -> f64 {
    f64::from_bits(x.to_bits() + 1)
}

/// `n` finite, nonzero, deterministic values (splitmix64 of the index and
/// the seed mapped to ±[0.5, 1.5)·10^k).
fn synth(n: usize, seed: u64) -> Vec<f64> {
    (0..n as u64)
        .map(|i| {
            let mut z = i
                .wrapping_add(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15))
                .wrapping_add(0x632b_e59b_d9b4_e019);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let m = 0.5 + (z >> 11) as f64 / (1u64 << 53) as f64;
            let s = if z & 1 == 0 { 1.0 } else { -1.0 };
            s * m * 10f64.powi((z >> 5 & 7) as i32 - 3)
        })
        .collect()
}

/// A dense table with synthetic entries.
fn synth_dense(
    kernel: &Kernel,
    q: usize,
    extent: f64,
    quad: &EntryQuadrature,
    seed: u64,
) -> NearFieldTable {
    let d = kernel.dim();
    let n = n_cases(d) * q.pow(2 * d as u32);
    NearFieldTable::from_parts(kernel, q, extent, quad, synth(n, seed)).unwrap()
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn assert_dense_eq(a: &NearFieldTable, b: &NearFieldTable) {
    assert_eq!(a.kernel(), b.kernel());
    assert_eq!(a.q(), b.q());
    assert_eq!(a.extent().to_bits(), b.extent().to_bits());
    assert_eq!(a.quadrature(), b.quadrature());
    assert!(bits(a.data()) == bits(b.data()), "data differ");
    assert_eq!(bits(a.q_points()), bits(b.q_points()));
    assert_eq!(bits(a.mode_normalizers()), bits(b.mode_normalizers()));
    assert_eq!(a.case_indices(), b.case_indices());
    assert_eq!(a.case_vectors(), b.case_vectors());
}

fn assert_reduced_eq(a: &ReducedTable, b: &ReducedTable) {
    assert_eq!(a.kernel(), b.kernel());
    assert_eq!(a.q(), b.q());
    assert_eq!(a.extent().to_bits(), b.extent().to_bits());
    assert_eq!(a.quadrature(), b.quadrature());
    assert_eq!(a.reduced_entry_ids(), b.reduced_entry_ids());
    assert!(
        bits(a.reduced_data()) == bits(b.reduced_data()),
        "reduced data differ"
    );
    assert_eq!(bits(a.q_points()), bits(b.q_points()));
    assert_eq!(bits(a.mode_normalizers()), bits(b.mode_normalizers()));
    assert_eq!(a.zero_orbits(), b.zero_orbits());
}

fn get_dense(cache: &TableCache, t: &NearFieldTable) -> NearFieldTable {
    match cache.get(&CacheKey::of_dense(t)).unwrap() {
        Some(CachedTable::Dense(x)) => x,
        other => panic!("expected a dense table, got {other:?}"),
    }
}

fn get_reduced(cache: &TableCache, t: &ReducedTable) -> ReducedTable {
    match cache.get(&CacheKey::of_reduced(t)).unwrap() {
        Some(CachedTable::Reduced(x)) => x,
        other => panic!("expected a reduced table, got {other:?}"),
    }
}

fn err_text<T: std::fmt::Debug>(r: hipkern::runtime::Result<T>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

/// The bytes of a file and the names in its folder (to check that nothing
/// was written, not even a side file).
fn snapshot(path: &Path) -> (Vec<u8>, Vec<String>) {
    let bytes = std::fs::read(path).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (bytes, names)
}

/// FNV-1a 64 as docs/nearfield_cache.md defines it.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A payload encoded from the documented layout (docs/nearfield_cache.md,
/// "The payload (format 1), byte by byte"), independent of the crate's
/// encoder.
fn doc_payload(key: &CacheKey, dim: usize, q: usize, ids: &[u32], values: &[f64]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"HKNFTAB\0");
    b.extend_from_slice(&1u32.to_le_bytes());
    b.push(match key.symmetry() {
        SymmetryMode::None => 0,
        SymmetryMode::Full => 1,
    });
    b.push(dim as u8);
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&(q as u32).to_le_bytes());
    b.extend_from_slice(&(n_cases(dim) as u32).to_le_bytes());
    b.extend_from_slice(&fnv1a64(key.text().as_bytes()).to_le_bytes());
    b.extend_from_slice(&(ids.len() as u64).to_le_bytes());
    b.extend_from_slice(&(values.len() as u64).to_le_bytes());
    for id in ids {
        b.extend_from_slice(&id.to_le_bytes());
    }
    for v in values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    let sum = fnv1a64(&b);
    b.extend_from_slice(&sum.to_le_bytes());
    b
}

/// A side connection for editing a cache file behind the cache's back.
fn raw(path: &Path) -> Connection {
    let c = Connection::open(path).unwrap();
    c.execute_batch("PRAGMA synchronous = OFF").unwrap();
    c
}

fn set_only_payload(c: &Connection, blob: &[u8]) {
    let n = c
        .execute("UPDATE nearfield_cache SET payload = ?1", [blob])
        .unwrap();
    assert_eq!(n, 1);
}

fn only_payload(c: &Connection) -> Vec<u8> {
    c.query_row("SELECT payload FROM nearfield_cache", [], |r| r.get(0))
        .unwrap()
}

fn table_names(c: &Connection) -> Vec<String> {
    let mut st = c
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
             ORDER BY name",
        )
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<Vec<String>>>()
        .unwrap()
}

fn column_names(c: &Connection, table: &str) -> Vec<String> {
    let mut st = c.prepare(&format!("PRAGMA table_info({table})")).unwrap();
    st.query_map([], |r| r.get(1))
        .unwrap()
        .collect::<rusqlite::Result<Vec<String>>>()
        .unwrap()
}

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
// Corrupt, truncated and hand-encoded payloads
// ---------------------------------------------------------------------------

#[test]
fn every_flipped_payload_byte_is_a_checksum_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let k = Kernel::yukawa(2, 0.25).unwrap();
    // q = 1: 33 values, a 320-byte dense payload; the reduced one has ids.
    let dense = synth_dense(&k, 1, 1.0, &quad(), 31);
    let red = ReducedTable::from_dense(&synth_dense(
        &Kernel::laplace(2).unwrap(),
        1,
        1.0,
        &quad(),
        32,
    ))
    .unwrap();
    assert!(!red.reduced_entry_ids().is_empty());
    for which in 0..2 {
        let p = dir.path().join(format!("flip{which}.sqlite"));
        let c = TableCache::open(&p).unwrap();
        let key = if which == 0 {
            c.put_dense(&dense).unwrap();
            CacheKey::of_dense(&dense)
        } else {
            c.put_reduced(&red).unwrap();
            CacheKey::of_reduced(&red)
        };
        let r = raw(&p);
        let good = only_payload(&r);
        for i in 0..good.len() {
            for mask in [0x01u8, 0x80] {
                let mut b = good.clone();
                b[i] ^= mask;
                set_only_payload(&r, &b);
                let e = err_text(c.get(&key));
                assert!(e.contains("checksum"), "byte {i}: {e}");
                assert!(e.contains(&key.text()), "byte {i}: {e}");
            }
        }
        set_only_payload(&r, &good);
        match (which, c.get(&key).unwrap()) {
            (0, Some(CachedTable::Dense(t))) => assert_dense_eq(&t, &dense),
            (1, Some(CachedTable::Reduced(t))) => assert_reduced_eq(&t, &red),
            (_, other) => panic!("{other:?}"),
        }
    }
}

#[test]
fn truncated_and_foreign_payloads_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trunc.sqlite");
    let t = synth_dense(&Kernel::laplace(2).unwrap(), 2, 1.0, &quad(), 41);
    let key = CacheKey::of_dense(&t);
    let c = TableCache::open(&path).unwrap();
    c.put_dense(&t).unwrap();
    let r = raw(&path);
    let good = only_payload(&r);
    let n = good.len();
    for len in [0, 1, 8, 47, 55, 56, 57, n / 2, n - 9, n - 8, n - 1] {
        let changed = r
            .execute(
                "UPDATE nearfield_cache SET payload = substr(payload, 1, ?1)",
                [len as i64],
            )
            .unwrap();
        assert_eq!(changed, 1);
        assert_eq!(only_payload(&r).len(), len);
        let e = err_text(c.get(&key));
        assert!(e.contains("truncated"), "length {len}: {e}");
        assert!(e.contains(&key.text()), "length {len}: {e}");
        set_only_payload(&r, &good);
    }
    // One byte too many (a valid payload with a byte appended).
    let mut long = good.clone();
    long.push(0);
    set_only_payload(&r, &long);
    assert!(err_text(c.get(&key)).contains("checksum"));
    // Not a blob, a blob of zeros, text.
    r.execute("UPDATE nearfield_cache SET payload = zeroblob(400)", [])
        .unwrap();
    let e = err_text(c.get(&key));
    assert!(e.contains("checksum") && e.contains("magic"), "{e}");
    r.execute("UPDATE nearfield_cache SET payload = 'a text payload'", [])
        .unwrap();
    err_text(c.get(&key));
    r.execute("UPDATE nearfield_cache SET payload = 42", [])
        .unwrap();
    err_text(c.get(&key));
    set_only_payload(&r, &good);
    assert_dense_eq(&get_dense(&c, &t), &t);
}

#[test]
fn a_payload_moved_under_another_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("moved.sqlite");
    // Two Yukawa λ one ulp apart: same sizes, different keys.
    let a = synth_dense(&Kernel::yukawa(2, 1.5).unwrap(), 2, 1.0, &quad(), 51);
    let b = synth_dense(
        &Kernel::yukawa(2, next_up(1.5)).unwrap(),
        2,
        1.0,
        &quad(),
        52,
    );
    let c = TableCache::open(&path).unwrap();
    c.put_dense(&a).unwrap();
    c.put_dense(&b).unwrap();
    let r = raw(&path);
    r.execute(
        "UPDATE nearfield_cache SET payload = (SELECT payload FROM nearfield_cache \
         WHERE lambda_bits = '3ff8000000000000') WHERE lambda_bits = '3ff8000000000001'",
        [],
    )
    .unwrap();
    assert_dense_eq(&get_dense(&c, &a), &a);
    let e = err_text(c.get(&CacheKey::of_dense(&b)));
    assert!(e.contains("does not match the row's key"), "{e}");
    assert!(e.contains(&CacheKey::of_dense(&b).text()), "{e}");
}

/// Payloads encoded here from the documented layout: equal to what the
/// crate writes, and with a NaN (valid checksum) refused as "not finite".
#[test]
fn documented_layout_matches_and_nan_payloads_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let k = Kernel::laplace(3)
        .unwrap()
        .axis_source_derivative(2)
        .unwrap();
    let dense = synth_dense(&k, 1, 0.75, &quad(), 61);
    let red = ReducedTable::from_dense(&synth_dense(
        &Kernel::yukawa(2, 3.0).unwrap(),
        2,
        0.5,
        &quad(),
        62,
    ))
    .unwrap();
    assert_eq!(PAYLOAD_MAGIC, *b"HKNFTAB\0");
    assert_eq!(PAYLOAD_FORMAT_VERSION, 1);
    for which in 0..2 {
        let p = dir.path().join(format!("doc{which}.sqlite"));
        let c = TableCache::open(&p).unwrap();
        let (key, dim, q, ids, values) = if which == 0 {
            c.put_dense(&dense).unwrap();
            (
                CacheKey::of_dense(&dense),
                3,
                1,
                vec![],
                dense.data().to_vec(),
            )
        } else {
            c.put_reduced(&red).unwrap();
            (
                CacheKey::of_reduced(&red),
                2,
                2,
                red.reduced_entry_ids().to_vec(),
                red.reduced_data().to_vec(),
            )
        };
        let r = raw(&p);
        let stored = only_payload(&r);
        let mine = doc_payload(&key, dim, q, &ids, &values);
        assert!(
            stored == mine,
            "the crate's payload differs from the documented layout (first at byte {:?})",
            stored.iter().zip(&mine).position(|(a, b)| a != b)
        );
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut v = values.clone();
            let i = v.iter().position(|&x| x != 0.0).unwrap();
            v[i] = bad;
            set_only_payload(&r, &doc_payload(&key, dim, q, &ids, &v));
            let e = err_text(c.get(&key));
            assert!(e.contains("not finite"), "{e}");
            assert!(e.contains(&key.text()), "{e}");
        }
        // Valid checksums around other wrong fields.
        let mut wrong_len = values.clone();
        wrong_len.pop();
        let mut wrong_ids = ids.clone();
        wrong_ids.pop();
        let cases: Vec<Vec<u8>> = vec![
            // One value short (dense) or one id and one value short (reduced).
            doc_payload(&key, dim, q, &wrong_ids, &wrong_len),
            // Another dimension's header.
            doc_payload(&key, 5 - dim, q, &ids, &values),
            // The key hash of another key (same kind, dim and q).
            doc_payload(
                &CacheKey::new(
                    &Kernel::constant(dim).unwrap(),
                    q,
                    1.0,
                    &quad(),
                    key.symmetry(),
                )
                .unwrap(),
                dim,
                q,
                &ids,
                &values,
            ),
            // Format 2, resealed.
            {
                let mut b = doc_payload(&key, dim, q, &ids, &values);
                b[8] = 2;
                let n = b.len() - 8;
                let s = fnv1a64(&b[..n]);
                b[n..].copy_from_slice(&s.to_le_bytes());
                b
            },
            // The other kind, resealed.
            {
                let mut b = doc_payload(&key, dim, q, &ids, &values);
                b[12] ^= 1;
                let n = b.len() - 8;
                let s = fnv1a64(&b[..n]);
                b[n..].copy_from_slice(&s.to_le_bytes());
                b
            },
            // Reserved bytes set, resealed.
            {
                let mut b = doc_payload(&key, dim, q, &ids, &values);
                b[14] = 1;
                let n = b.len() - 8;
                let s = fnv1a64(&b[..n]);
                b[n..].copy_from_slice(&s.to_le_bytes());
                b
            },
        ];
        for (j, b) in cases.iter().enumerate() {
            set_only_payload(&r, b);
            let e = err_text(c.get(&key));
            assert!(e.contains(&key.text()), "case {j}: {e}");
        }
        if which == 1 {
            // Ids out of order, and a zero-by-symmetry orbit with a value.
            let mut sw = ids.clone();
            sw.swap(0, 1);
            set_only_payload(&r, &doc_payload(&key, dim, q, &sw, &values));
            err_text(c.get(&key));
            if red.zero_orbits() > 0 {
                // Find a zero orbit: a representative whose value is 0.
                let j = values.iter().position(|&x| x == 0.0).unwrap();
                let mut v = values.clone();
                v[j] = 1.0;
                set_only_payload(&r, &doc_payload(&key, dim, q, &ids, &v));
                err_text(c.get(&key));
            }
        }
        set_only_payload(&r, &mine);
        assert!(c.get(&key).unwrap().is_some());
    }
}

// ---------------------------------------------------------------------------
// Files that are not (current) caches, version policy
// ---------------------------------------------------------------------------

#[test]
fn files_that_are_not_caches_are_errors_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    // An SQLite database of something else.
    let other = dir.path().join("other.sqlite");
    {
        let c = Connection::open(&other).unwrap();
        c.execute_batch("CREATE TABLE foo (x INTEGER); INSERT INTO foo VALUES (1);")
            .unwrap();
    }
    // A file that is not SQLite at all.
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "this is not an SQLite database\n".repeat(200)).unwrap();
    for p in [&other, &text] {
        let before = snapshot(p);
        let e = err_text(TableCache::open(p));
        assert!(e.contains(&p.display().to_string()), "{e}");
        let e2 = err_text(TableCache::open_read_only(p));
        assert!(!e2.is_empty());
        if p == &other {
            assert!(e.contains("not a table cache"), "{e}");
            assert!(e2.contains("not a table cache"), "{e2}");
        } else {
            assert!(e.contains("not a database"), "{e}");
        }
        assert!(snapshot(p) == before, "{} changed", p.display());
    }
    // An empty file: read-only refuses it; writable makes it a cache.
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    let e = err_text(TableCache::open_read_only(&empty));
    assert!(e.contains("empty"), "{e}");
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
    assert!(TableCache::open(&empty).unwrap().is_empty().unwrap());
    // A folder.
    err_text(TableCache::open(dir.path()));
    err_text(TableCache::open_read_only(dir.path()));
    // A meta table without the 2.x layout, and a malformed version.
    let odd = dir.path().join("odd.sqlite");
    {
        let c = Connection::open(&odd).unwrap();
        c.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
             INSERT INTO meta VALUES ('schema_version', '2.1.0');",
        )
        .unwrap();
    }
    let before = snapshot(&odd);
    assert!(err_text(TableCache::open(&odd)).contains("not the 2.x layout"));
    assert!(err_text(TableCache::open_read_only(&odd)).contains("not the 2.x layout"));
    Connection::open(&odd)
        .unwrap()
        .execute(
            "UPDATE meta SET value = '2.1' WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
    let before2 = snapshot(&odd);
    assert!(before2 != before);
    assert!(err_text(TableCache::open(&odd)).contains("MAJOR.MINOR.PATCH"));
    assert!(err_text(TableCache::open_read_only(&odd)).contains("MAJOR.MINOR.PATCH"));
    assert!(snapshot(&odd) == before2);
}

#[test]
fn a_newer_major_version_is_refused_by_both_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v3.sqlite");
    let t = synth_dense(&Kernel::laplace(2).unwrap(), 2, 1.0, &quad(), 71);
    TableCache::open(&path).unwrap().put_dense(&t).unwrap();
    {
        let r = Connection::open(&path).unwrap();
        r.execute(
            "UPDATE meta SET value = '3.0.0' WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
        // Back to a rollback journal so that no side file is left around.
        r.query_row("PRAGMA journal_mode = DELETE", [], |x| {
            x.get::<_, String>(0)
        })
        .unwrap();
    }
    let before = snapshot(&path);
    for e in [
        err_text(TableCache::open(&path)),
        err_text(TableCache::open_read_only(&path)),
    ] {
        assert!(e.contains("3.0.0"), "{e}");
        assert!(e.contains("newer"), "{e}");
    }
    assert!(snapshot(&path) == before, "the file changed");
    // A newer minor version of major 2 is read and written.
    Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE meta SET value = '2.7.1' WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
    let c = TableCache::open(&path).unwrap();
    assert_eq!(c.schema_version(), "2.7.1");
    assert_dense_eq(&get_dense(&c, &t), &t);
    // A legacy file whose meta says 3.0.0 is refused too.
    let legacy = dir.path().join("legacy-v3.sqlite");
    write_legacy(&legacy, &legacy_rows()[..1], Some("3.0.0"));
    let before = snapshot(&legacy);
    for e in [
        err_text(TableCache::open(&legacy)),
        err_text(TableCache::open_read_only(&legacy)),
    ] {
        assert!(e.contains("3.0.0"), "{e}");
    }
    assert!(snapshot(&legacy) == before, "the legacy file changed");
}

// ---------------------------------------------------------------------------
// The legacy 1.x schema (docs/nearfield_cache.md, "The legacy 1.x schema")
// ---------------------------------------------------------------------------

/// The legacy DDL exactly as documented.
const LEGACY_DDL: &str = "
CREATE TABLE nearfield_cache (
    dim               INTEGER NOT NULL,
    kernel_type       TEXT    NOT NULL,
    q_order           INTEGER NOT NULL,
    source_box_level  INTEGER NOT NULL,
    source_box_extent REAL    NOT NULL,
    q_points          BLOB    NOT NULL,
    data              BLOB    NOT NULL,
    PRIMARY KEY (dim, kernel_type, q_order, source_box_level)
);
CREATE TABLE nearfield_cache_kwargs (
    dim              INTEGER NOT NULL,
    kernel_type      TEXT    NOT NULL,
    q_order          INTEGER NOT NULL,
    source_box_level INTEGER NOT NULL,
    key              TEXT    NOT NULL,
    value_text       TEXT    NOT NULL,
    PRIMARY KEY (dim, kernel_type, q_order, source_box_level, key)
);
CREATE TABLE nearfield_cache_meta (
    key        TEXT PRIMARY KEY NOT NULL,
    value_text TEXT NOT NULL
);
";

struct LegacyRow {
    kernel_type: &'static str,
    level: i64,
    /// Extra or replaced kwargs (`lam` for Yukawa).
    kwargs: Vec<(&'static str, String)>,
    table: NearFieldTable,
    /// Bytes to drop from the end of `data` (a broken row).
    short_data: usize,
}

fn le_f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A legacy database with `rows`; `version` is the `schema_version` row of
/// `nearfield_cache_meta` (none at all when `None`).
fn write_legacy(path: &Path, rows: &[LegacyRow], version: Option<&str>) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(LEGACY_DDL).unwrap();
    if let Some(v) = version {
        c.execute(
            "INSERT INTO nearfield_cache_meta (key, value_text) VALUES ('schema_version', ?1)",
            [v],
        )
        .unwrap();
    }
    for r in rows {
        let t = &r.table;
        let d = t.dim() as i64;
        let q = t.q() as i64;
        let data = le_f64s(t.data());
        c.execute(
            "INSERT INTO nearfield_cache (dim, kernel_type, q_order, source_box_level, \
             source_box_extent, q_points, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                d,
                r.kernel_type,
                q,
                r.level,
                t.extent(),
                le_f64s(&q_points(t.q(), t.extent(), t.dim()).unwrap()),
                &data[..data.len() - r.short_data],
            ],
        )
        .unwrap();
        let mut kw: Vec<(&str, String)> = vec![
            ("radial_level", t.quadrature().radial_level.to_string()),
            ("angular_order", t.quadrature().angular_order.to_string()),
        ];
        for (k, v) in &r.kwargs {
            kw.retain(|(n, _)| n != k);
            if !v.is_empty() {
                kw.push((k, v.clone()));
            }
        }
        for (k, v) in kw {
            c.execute(
                "INSERT INTO nearfield_cache_kwargs (dim, kernel_type, q_order, \
                 source_box_level, key, value_text) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![d, r.kernel_type, q, r.level, k, v],
            )
            .unwrap();
        }
    }
}

/// Four dense legacy rows: a Yukawa with its `lam`, a target derivative, a
/// 3D Laplace and a Constant; q_points written with this crate's nodes.
fn legacy_rows() -> Vec<LegacyRow> {
    let q3 = EntryQuadrature {
        radial_level: 3,
        angular_order: 5,
    };
    vec![
        LegacyRow {
            kernel_type: "Yukawa",
            level: 0,
            kwargs: vec![("lam", "1.5".to_string())],
            table: synth_dense(&Kernel::yukawa(2, 1.5).unwrap(), 2, 1.0, &quad(), 81),
            short_data: 0,
        },
        LegacyRow {
            kernel_type: "Laplace-Dy",
            level: 1,
            kwargs: vec![],
            table: synth_dense(
                &Kernel::laplace(2)
                    .unwrap()
                    .axis_target_derivative(1)
                    .unwrap(),
                2,
                0.5,
                &quad(),
                82,
            ),
            short_data: 0,
        },
        LegacyRow {
            kernel_type: "Laplace",
            level: 2,
            kwargs: vec![],
            table: synth_dense(&Kernel::laplace(3).unwrap(), 2, 0.25, &q3, 83),
            short_data: 0,
        },
        LegacyRow {
            kernel_type: "Constant",
            level: 0,
            kwargs: vec![],
            table: synth_dense(&Kernel::constant(2).unwrap(), 1, 2.0, &quad(), 84),
            short_data: 0,
        },
    ]
}

#[test]
fn legacy_database_read_only_as_is_then_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("legacy.sqlite");
    let rows = legacy_rows();
    write_legacy(&path, &rows, Some("1.0.0"));
    let before = snapshot(&path);
    {
        let ro = TableCache::open_read_only(&path).unwrap();
        assert!(ro.is_legacy() && ro.is_read_only());
        assert_eq!(ro.schema_version(), "1.0.0");
        assert_eq!(ro.len().unwrap(), rows.len());
        for r in &rows {
            assert_dense_eq(&get_dense(&ro, &r.table), &r.table);
            assert!(ro
                .get(
                    &CacheKey::new(
                        r.table.kernel(),
                        r.table.q(),
                        r.table.extent(),
                        r.table.quadrature(),
                        SymmetryMode::Full
                    )
                    .unwrap()
                )
                .unwrap()
                .is_none());
        }
        // Another λ, another quadrature, a source derivative: absent.
        assert!(ro
            .get_dense(&Kernel::yukawa(2, next_up(1.5)).unwrap(), 2, 1.0, &quad())
            .unwrap()
            .is_none());
        let other_quad = EntryQuadrature {
            angular_order: 9,
            ..quad()
        };
        assert!(ro
            .get_dense(&Kernel::yukawa(2, 1.5).unwrap(), 2, 1.0, &other_quad)
            .unwrap()
            .is_none());
        let src = Kernel::laplace(2)
            .unwrap()
            .axis_source_derivative(1)
            .unwrap();
        assert!(ro.get_dense(&src, 2, 0.5, &quad()).unwrap().is_none());
        assert!(err_text(ro.put_dense(&rows[0].table)).contains("read-only"));
    }
    assert!(
        snapshot(&path) == before,
        "a read-only open changed the legacy file"
    );
    // Writable: migrated in place.
    {
        let c = TableCache::open(&path).unwrap();
        assert_eq!(c.migrated_rows(), Some(rows.len()));
        assert_eq!(c.schema_version(), "2.1.0");
        assert!(!c.is_legacy());
        assert_eq!(c.journal_mode().unwrap(), "wal");
        assert_eq!(c.len().unwrap(), rows.len());
        for r in &rows {
            assert_dense_eq(&get_dense(&c, &r.table), &r.table);
        }
    }
    {
        let r = raw(&path);
        assert_eq!(table_names(&r), ["meta", "nearfield_cache"]);
        let cols = column_names(&r, "nearfield_cache");
        assert!(cols.iter().any(|c| c == "payload"), "{cols:?}");
        for gone in ["data", "q_points", "kernel_type", "q_order"] {
            assert!(!cols.iter().any(|c| c == gone), "{gone} left: {cols:?}");
        }
        let meta: Vec<(String, String)> = {
            let mut st = r
                .prepare("SELECT key, value FROM meta ORDER BY key")
                .unwrap();
            st.query_map([], |x| Ok((x.get(0)?, x.get(1)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        };
        assert_eq!(
            meta,
            [
                ("migrated_from".to_string(), "1.0.0".to_string()),
                ("schema_version".to_string(), "2.1.0".to_string())
            ]
        );
        // The Yukawa row carries λ in its key, by bits.
        let lb: String = r
            .query_row(
                "SELECT lambda_bits FROM nearfield_cache WHERE base_kernel = 'yukawa'",
                [],
                |x| x.get(0),
            )
            .unwrap();
        assert_eq!(lb, format!("{:016x}", 1.5f64.to_bits()));
    }
    // Opened again: nothing more to migrate; read-only sees 2.1.0.
    let c = TableCache::open(&path).unwrap();
    assert_eq!(c.migrated_rows(), None);
    drop(c);
    let ro = TableCache::open_read_only(&path).unwrap();
    assert!(!ro.is_legacy());
    assert_eq!(ro.schema_version(), "2.1.0");
    for r in &rows {
        assert_dense_eq(&get_dense(&ro, &r.table), &r.table);
    }
}

#[test]
fn legacy_without_meta_and_with_duplicate_levels() {
    let dir = tempfile::tempdir().unwrap();
    // No schema_version row: 1.0.0. The same Laplace table at two levels
    // with one extent is one 2.1.0 table.
    let path = dir.path().join("dup.sqlite");
    let mut rows = legacy_rows();
    let dup = LegacyRow {
        kernel_type: "Laplace",
        level: 3,
        kwargs: vec![],
        table: rows[2].table.clone(),
        short_data: 0,
    };
    rows.push(dup);
    write_legacy(&path, &rows, None);
    let ro = TableCache::open_read_only(&path).unwrap();
    assert_eq!(ro.schema_version(), "1.0.0");
    assert_dense_eq(&get_dense(&ro, &rows[2].table), &rows[2].table);
    drop(ro);
    let c = TableCache::open(&path).unwrap();
    assert_eq!(c.migrated_rows(), Some(4));
    assert_eq!(c.len().unwrap(), 4);
    assert_dense_eq(&get_dense(&c, &rows[2].table), &rows[2].table);
    drop(c);
    // Different data under one 2.1.0 key: refused (read-only and writable),
    // the file unchanged.
    let path = dir.path().join("conflict.sqlite");
    let mut rows = legacy_rows();
    let t = &rows[2].table;
    let other = NearFieldTable::from_parts(
        t.kernel(),
        t.q(),
        t.extent(),
        t.quadrature(),
        t.data().iter().map(|v| -v).collect(),
    )
    .unwrap();
    rows.push(LegacyRow {
        kernel_type: "Laplace",
        level: 3,
        kwargs: vec![],
        table: other,
        short_data: 0,
    });
    write_legacy(&path, &rows, Some("1.2.0"));
    let before = snapshot(&path);
    let e = err_text(TableCache::open(&path));
    assert!(e.contains("different data"), "{e}");
    let ro = TableCache::open_read_only(&path).unwrap();
    assert!(err_text(ro.get(&CacheKey::of_dense(&rows[2].table))).contains("different data"));
    assert_dense_eq(&get_dense(&ro, &rows[0].table), &rows[0].table);
    drop(ro);
    assert!(snapshot(&path) == before);
}

#[test]
fn a_broken_legacy_row_fails_the_whole_migration_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    type Breaker = fn(&mut LegacyRow);
    let breaks: [(&str, Breaker, &str); 4] = [
        ("short data", |r| r.short_data = 8, "entries"),
        ("ragged data", |r| r.short_data = 3, "not a whole f64 array"),
        (
            "no lam",
            |r| r.kwargs = vec![("lam", String::new())],
            "kwarg lam missing",
        ),
        (
            "no radial_level",
            |r| r.kwargs.push(("radial_level", String::new())),
            "kwarg radial_level missing",
        ),
    ];
    for (i, (what, brk, msg)) in breaks.iter().enumerate() {
        let path = dir.path().join(format!("broken{i}.sqlite"));
        let mut rows = legacy_rows();
        brk(&mut rows[0]);
        write_legacy(&path, &rows, Some("1.0.0"));
        let before = snapshot(&path);
        let e = err_text(TableCache::open(&path));
        assert!(e.contains(msg), "{what}: {e}");
        assert!(e.contains("legacy row"), "{what}: {e}");
        assert!(snapshot(&path) == before, "{what}: the file changed");
        // Still a legacy file that reads as is, except the broken row.
        let ro = TableCache::open_read_only(&path).unwrap();
        assert!(ro.is_legacy());
        assert_dense_eq(&get_dense(&ro, &rows[1].table), &rows[1].table);
        err_text(ro.get(&CacheKey::of_dense(&rows[0].table)));
    }
    // A legacy NaN (volumential's sentinel for an entry not computed) is
    // refused as well.
    let path = dir.path().join("nan.sqlite");
    write_legacy(&path, &legacy_rows()[1..2], Some("1.0.0"));
    {
        let r = raw(&path);
        let mut data: Vec<u8> = r
            .query_row("SELECT data FROM nearfield_cache", [], |x| x.get(0))
            .unwrap();
        data[16..24].copy_from_slice(&f64::NAN.to_le_bytes());
        r.execute("UPDATE nearfield_cache SET data = ?1", [&data])
            .unwrap();
    }
    let before = snapshot(&path);
    assert!(err_text(TableCache::open(&path)).contains("not finite"));
    assert!(snapshot(&path) == before);
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
// The way out of a corrupt entry, and machine faults
// ---------------------------------------------------------------------------

/// A corrupt entry is an error carrying the hint; removing it (or putting
/// the table again, an upsert) makes the key usable again.
#[test]
fn a_corrupt_entry_says_how_to_replace_it_and_can_be_replaced() {
    use hipkern::nearfield::CORRUPT_ENTRY_HINT;
    assert_eq!(
        CORRUPT_ENTRY_HINT,
        "rerun with --rebuild to build it again and replace the entry"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corrupt.sqlite");
    let t = synth_dense(&Kernel::laplace(2).unwrap(), 2, 1.0, &quad(), 71);
    let other = synth_dense(&Kernel::laplace(2).unwrap(), 1, 1.0, &quad(), 72);
    let key = CacheKey::of_dense(&t);
    let c = TableCache::open(&path).unwrap();
    c.put_dense(&t).unwrap();
    c.put_dense(&other).unwrap();
    let r = raw(&path);
    let corrupt = |how: &str| {
        let sql = match how {
            "flip" => "UPDATE nearfield_cache SET payload = zeroblob(400) WHERE q = 2",
            "truncate" => "UPDATE nearfield_cache SET payload = substr(payload, 1, 30) WHERE q = 2",
            _ => "UPDATE nearfield_cache SET payload = 'text' WHERE q = 2",
        };
        assert_eq!(r.execute(sql, []).unwrap(), 1);
    };
    for how in ["flip", "truncate", "text"] {
        corrupt(how);
        let e = err_text(c.get(&key));
        assert!(e.contains(CORRUPT_ENTRY_HINT), "{how}: {e}");
        assert!(e.contains(&key.text()), "{how}: {e}");
        // Removing the entry: the key is absent, the other table untouched.
        assert!(c.remove(&key).unwrap());
        assert!(!c.remove(&key).unwrap());
        assert!(c.get(&key).unwrap().is_none());
        assert_eq!(c.len().unwrap(), 1);
        assert_dense_eq(&get_dense(&c, &other), &other);
        c.put_dense(&t).unwrap();
        assert_dense_eq(&get_dense(&c, &t), &t);
        // Replacing it in place (what --rebuild does): a put over it.
        corrupt(how);
        assert!(err_text(c.get(&key)).contains(CORRUPT_ENTRY_HINT));
        c.put_dense(&t).unwrap();
        assert_dense_eq(&get_dense(&c, &t), &t);
        assert_eq!(c.len().unwrap(), 2);
    }
    // A reduced entry likewise.
    let red = ReducedTable::from_dense(&t).unwrap();
    let rkey = CacheKey::of_reduced(&red);
    c.put_reduced(&red).unwrap();
    r.execute(
        "UPDATE nearfield_cache SET payload = zeroblob(64) WHERE symmetry = 'full'",
        [],
    )
    .unwrap();
    assert!(err_text(c.get(&rkey)).contains(CORRUPT_ENTRY_HINT));
    assert!(c.remove(&rkey).unwrap());
    assert!(c.get(&rkey).unwrap().is_none());
    // A read-only handle removes nothing.
    drop(c);
    let ro = TableCache::open_read_only(&path).unwrap();
    let e = err_text(ro.remove(&key));
    assert!(e.contains("read-only"), "{e}");
    assert_dense_eq(&get_dense(&ro, &t), &t);
}

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
