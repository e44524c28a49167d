//! Shared by the table cache's tests (tests/nearfield_cache*.rs): small
//! tables with synthetic values, bitwise comparisons, reads through the
//! cache, a file's bytes and its folder's names, and a side SQLite
//! connection for editing a cache file behind the cache's back.
// Not every test binary that includes the common module uses these.
#![allow(dead_code)]
use hipkern::nearfield::{
    CacheKey, CachedTable, EntryQuadrature, Kernel, NearFieldTable, ReducedTable, TableCache,
};
use rusqlite::Connection;
use std::path::Path;

pub fn quad() -> EntryQuadrature {
    EntryQuadrature {
        radial_level: 2,
        angular_order: 4,
    }
}

pub fn n_cases(dim: usize) -> usize {
    match dim {
        2 => 33,
        3 => 139,
        _ => unreachable!(),
    }
}

/// The next f64 above a positive `x`.
pub fn next_up(x: f64) -> f64 {
    f64::from_bits(x.to_bits() + 1)
}

/// `n` finite, nonzero, deterministic values (splitmix64 of the index and
/// the seed mapped to ±[0.5, 1.5)·10^k).
pub fn synth(n: usize, seed: u64) -> Vec<f64> {
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
pub fn synth_dense(
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

pub fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

pub fn assert_dense_eq(a: &NearFieldTable, b: &NearFieldTable) {
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

pub fn assert_reduced_eq(a: &ReducedTable, b: &ReducedTable) {
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

pub fn get_dense(cache: &TableCache, t: &NearFieldTable) -> NearFieldTable {
    match cache.get(&CacheKey::of_dense(t)).unwrap() {
        Some(CachedTable::Dense(x)) => x,
        other => panic!("expected a dense table, got {other:?}"),
    }
}

pub fn get_reduced(cache: &TableCache, t: &ReducedTable) -> ReducedTable {
    match cache.get(&CacheKey::of_reduced(t)).unwrap() {
        Some(CachedTable::Reduced(x)) => x,
        other => panic!("expected a reduced table, got {other:?}"),
    }
}

pub fn err_text<T: std::fmt::Debug>(r: hipkern::runtime::Result<T>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

/// The bytes of a file and the names in its folder (to check that nothing
/// was written, not even a side file).
pub fn snapshot(path: &Path) -> (Vec<u8>, Vec<String>) {
    let bytes = std::fs::read(path).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (bytes, names)
}

/// A side connection for editing a cache file behind the cache's back.
pub fn raw(path: &Path) -> Connection {
    let c = Connection::open(path).unwrap();
    c.execute_batch("PRAGMA synchronous = OFF").unwrap();
    c
}

pub fn set_only_payload(c: &Connection, blob: &[u8]) {
    let n = c
        .execute("UPDATE nearfield_cache SET payload = ?1", [blob])
        .unwrap();
    assert_eq!(n, 1);
}

pub fn only_payload(c: &Connection) -> Vec<u8> {
    c.query_row("SELECT payload FROM nearfield_cache", [], |r| r.get(0))
        .unwrap()
}

pub fn table_names(c: &Connection) -> Vec<String> {
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

pub fn column_names(c: &Connection, table: &str) -> Vec<String> {
    let mut st = c.prepare(&format!("PRAGMA table_info({table})")).unwrap();
    st.query_map([], |r| r.get(1))
        .unwrap()
        .collect::<rusqlite::Result<Vec<String>>>()
        .unwrap()
}
