//! Older databases: what layout and schema version a file has (refusing
//! a major version above 2 and layouts that are neither), the legacy 1.x
//! layout (dense blob columns, kernel names, kwargs) read as is, and its
//! migration into 2.1.0 payloads.
use super::payload::{encode_payload, CacheKey, SymmetryMode};
use super::{insert_row, TableCache, CACHE_SCHEMA_VERSION, TABLE_DDL};
use crate::nearfield::entry::EntryQuadrature;
use crate::nearfield::kernels::{BaseKernel, Derivative, Kernel};
use crate::nearfield::quadrature::q_points;
use crate::nearfield::table::NearFieldTable;
use crate::runtime::Result;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior};
use std::path::Path;

/// How the database is laid out.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Layout {
    /// Schema 2.x (`meta`, `nearfield_cache` with `payload`).
    Current,
    /// Legacy 1.x (dense blob columns), read as is (read-only mode only).
    Legacy,
}

fn parse_semver(v: &str) -> Option<(u64, u64, u64)> {
    let p: Vec<&str> = v.split('.').collect();
    if p.len() != 3 {
        return None;
    }
    Some((p[0].parse().ok()?, p[1].parse().ok()?, p[2].parse().ok()?))
}

/// One legacy row: (dim, kernel_type, q_order, source_box_level, extent,
/// q_points blob, data blob).
type LegacyRow = (i64, String, i64, i64, f64, Vec<u8>, Vec<u8>);

fn table_names(conn: &Connection, path: &Path) -> Result<Vec<String>> {
    let e = |x: rusqlite::Error| TableCache::sql(path, "read sqlite_master", x);
    let mut st = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .map_err(e)?;
    let names = st
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(e)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(e)?;
    Ok(names)
}

fn column_names(conn: &Connection, path: &Path, table: &str) -> Result<Vec<String>> {
    let e = |x: rusqlite::Error| TableCache::sql(path, "table_info", x);
    let mut st = conn
        .prepare(&format!("PRAGMA table_info({table})"))
        .map_err(e)?;
    let names = st
        .query_map([], |r| r.get::<_, String>(1))
        .map_err(e)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(e)?;
    Ok(names)
}

fn check_version(path: &Path, v: &str) -> Result<(u64, u64, u64)> {
    let s = parse_semver(v).ok_or_else(|| {
        TableCache::err(
            path,
            "schema_version",
            format!("{v:?} is not MAJOR.MINOR.PATCH"),
        )
    })?;
    if s.0 > 2 {
        return Err(TableCache::err(
            path,
            "schema_version",
            format!(
                "the file has schema {v}, newer than this build's {CACHE_SCHEMA_VERSION} \
                 (major {} > 2): refusing to read or write it",
                s.0
            ),
        ));
    }
    Ok(s)
}

/// The layout and version of the database, `None` for an empty one.
pub(super) fn detect(conn: &Connection, path: &Path) -> Result<Option<(Layout, String)>> {
    let tables = table_names(conn, path)?;
    if tables.is_empty() {
        return Ok(None);
    }
    let has = |n: &str| tables.iter().any(|t| t == n);
    if has("meta") {
        let v: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|x| TableCache::sql(path, "read meta", x))?;
        let v = v.ok_or_else(|| {
            TableCache::err(path, "meta", "no schema_version row: not a table cache")
        })?;
        let s = check_version(path, &v)?;
        let cols = if has("nearfield_cache") {
            column_names(conn, path, "nearfield_cache")?
        } else {
            Vec::new()
        };
        if s.0 != 2 || !cols.iter().any(|c| c == "payload") || cols.iter().any(|c| c == "data") {
            return Err(TableCache::err(
                path,
                "schema",
                format!("schema_version {v} in meta but not the 2.x layout"),
            ));
        }
        return Ok(Some((Layout::Current, v)));
    }
    if has("nearfield_cache") {
        let cols = column_names(conn, path, "nearfield_cache")?;
        let v = if has("nearfield_cache_meta") {
            conn.query_row(
                "SELECT value_text FROM nearfield_cache_meta WHERE key = 'schema_version'",
                [],
                |r| r.get::<_, String>(0),
            )
            .optional()
            .map_err(|x| TableCache::sql(path, "read nearfield_cache_meta", x))?
        } else {
            None
        }
        .unwrap_or_else(|| "1.0.0".to_string());
        let s = check_version(path, &v)?;
        if s.0 == 1 && cols.iter().any(|c| c == "data") && !cols.iter().any(|c| c == "payload") {
            return Ok(Some((Layout::Legacy, v)));
        }
        return Err(TableCache::err(
            path,
            "schema",
            format!(
                "nearfield_cache of version {v} with columns {cols:?} is neither the legacy 1.x \
                 layout nor 2.1.0 (volumential 2.0.0 npz payloads are not read)"
            ),
        ));
    }
    Err(TableCache::err(
        path,
        "schema",
        format!("not a table cache (tables {tables:?})"),
    ))
}

/// The legacy `kernel_type` of a kernel (`Laplace`, `Yukawa`, `Constant`,
/// with `-Dx`/`-Dy`/`-Dz` for a target axis derivative); `None` when the
/// legacy schema has no name for it.
fn legacy_kernel_type(k: &Kernel) -> Option<String> {
    let base = match k.base() {
        BaseKernel::Laplace => "Laplace",
        BaseKernel::Yukawa { .. } => "Yukawa",
        BaseKernel::Constant => "Constant",
    };
    match k.derivative() {
        None => Some(base.to_string()),
        Some(Derivative::AxisTarget(a)) if *a < 3 => {
            Some(format!("{base}-D{}", ["x", "y", "z"][*a]))
        }
        _ => None,
    }
}

fn legacy_kwargs(conn: &Connection, path: &Path, row: &LegacyRow) -> Result<Vec<(String, String)>> {
    if !table_names(conn, path)?
        .iter()
        .any(|t| t == "nearfield_cache_kwargs")
    {
        return Ok(Vec::new());
    }
    let e = |x: rusqlite::Error| TableCache::sql(path, "read nearfield_cache_kwargs", x);
    let mut st = conn
        .prepare(
            "SELECT key, value_text FROM nearfield_cache_kwargs WHERE dim = ?1 AND \
             kernel_type = ?2 AND q_order = ?3 AND source_box_level = ?4",
        )
        .map_err(e)?;
    let out = st
        .query_map(rusqlite::params![row.0, row.1, row.2, row.3], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(e)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(e)?;
    Ok(out)
}

/// The key and table of a legacy row, checked.
fn legacy_table(
    conn: &Connection,
    path: &Path,
    row: &LegacyRow,
) -> Result<(CacheKey, NearFieldTable)> {
    let name = format!(
        "legacy row (dim {}, kernel_type {:?}, q_order {}, source_box_level {})",
        row.0, row.1, row.2, row.3
    );
    let bad = |m: String| TableCache::err(path, &name, m);
    let kwargs = legacy_kwargs(conn, path, row)?;
    let kw = |k: &str| kwargs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let int = |k: &str| -> Result<i64> {
        kw(k)
            .ok_or_else(|| bad(format!("kwarg {k} missing")))?
            .parse::<i64>()
            .map_err(|x| bad(format!("kwarg {k}: {x}")))
    };
    let dim = usize::try_from(row.0).map_err(|x| bad(x.to_string()))?;
    let (base, deriv) = match row.1.split_once('-') {
        Some((b, d)) => (b, Some(d)),
        None => (row.1.as_str(), None),
    };
    let mut kernel = match base {
        "Laplace" => Kernel::laplace(dim),
        "Constant" => Kernel::constant(dim),
        "Yukawa" => {
            let lam = kw("lam")
                .ok_or_else(|| bad("kwarg lam missing".into()))?
                .parse::<f64>()
                .map_err(|x| bad(format!("kwarg lam: {x}")))?;
            Kernel::yukawa(dim, lam)
        }
        other => return Err(bad(format!("unknown kernel type {other:?}"))),
    }
    .map_err(|x| bad(x.to_string()))?;
    if let Some(d) = deriv {
        let axis = ["Dx", "Dy", "Dz"]
            .iter()
            .position(|&n| n == d)
            .ok_or_else(|| bad(format!("unknown derivative suffix {d:?}")))?;
        kernel = kernel
            .axis_target_derivative(axis)
            .map_err(|x| bad(x.to_string()))?;
    }
    let quad = EntryQuadrature {
        radial_level: u32::try_from(int("radial_level")?).map_err(|x| bad(x.to_string()))?,
        angular_order: usize::try_from(int("angular_order")?).map_err(|x| bad(x.to_string()))?,
    };
    let q = usize::try_from(row.2).map_err(|x| bad(x.to_string()))?;
    let key = CacheKey::new(&kernel, q, row.4, &quad, SymmetryMode::None)
        .map_err(|x| bad(x.to_string()))?;
    let f64s = |b: &[u8], what: &str| -> Result<Vec<f64>> {
        if b.len() % 8 != 0 {
            return Err(bad(format!(
                "{what}: {} bytes, not a whole f64 array",
                b.len()
            )));
        }
        Ok(b.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect())
    };
    let stored_qp = f64s(&row.5, "q_points")?;
    let qp = q_points(q, row.4, dim).map_err(|x| bad(x.to_string()))?;
    if stored_qp.len() != qp.len()
        || stored_qp
            .iter()
            .zip(&qp)
            .any(|(a, b)| (a - b).abs().is_nan() || (a - b).abs() > 1e-12 * row.4)
    {
        return Err(bad("q_points differ from this crate's nodes".into()));
    }
    let data = f64s(&row.6, "data")?;
    let table = NearFieldTable::from_parts(&kernel, q, row.4, &quad, data)
        .map_err(|x| bad(x.to_string()))?;
    Ok((key, table))
}

fn legacy_rows(
    conn: &Connection,
    path: &Path,
    filter: Option<(&CacheKey, &str)>,
) -> Result<Vec<LegacyRow>> {
    let e = |x: rusqlite::Error| TableCache::sql(path, "read legacy nearfield_cache", x);
    let sql = "SELECT dim, kernel_type, q_order, source_box_level, source_box_extent, q_points, \
               data FROM nearfield_cache";
    let map = |r: &rusqlite::Row<'_>| -> rusqlite::Result<LegacyRow> {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
        ))
    };
    let rows = match filter {
        None => {
            let mut st = conn.prepare(sql).map_err(e)?;
            let v = st
                .query_map([], map)
                .map_err(e)?
                .collect::<rusqlite::Result<Vec<_>>>();
            v.map_err(e)?
        }
        Some((key, kt)) => {
            let mut st = conn
                .prepare(&format!(
                    "{sql} WHERE dim = ?1 AND kernel_type = ?2 AND q_order = ?3 AND source_box_extent = ?4"
                ))
                .map_err(e)?;
            let v = st
                .query_map(
                    rusqlite::params![key.kernel.dim() as i64, kt, key.q as i64, key.extent],
                    map,
                )
                .map_err(e)?
                .collect::<rusqlite::Result<Vec<_>>>();
            v.map_err(e)?
        }
    };
    Ok(rows)
}

/// A dense table from a legacy database, read as is.
pub(super) fn legacy_get(
    conn: &Connection,
    path: &Path,
    key: &CacheKey,
) -> Result<Option<NearFieldTable>> {
    let Some(kt) = legacy_kernel_type(&key.kernel) else {
        return Ok(None);
    };
    let tx = Transaction::new_unchecked(conn, TransactionBehavior::Deferred)
        .map_err(|x| TableCache::sql(path, "begin", x))?;
    let mut found: Option<NearFieldTable> = None;
    for row in legacy_rows(&tx, path, Some((key, &kt)))? {
        let (k, t) = legacy_table(&tx, path, &row)?;
        if k.text() != key.text() {
            continue;
        }
        // Two rows of one key (two levels, one extent): as in the migration,
        // the same data is one table, different data an error.
        match &found {
            Some(f)
                if f.data()
                    .iter()
                    .map(|v| v.to_bits())
                    .ne(t.data().iter().map(|v| v.to_bits())) =>
            {
                return Err(TableCache::err(
                    path,
                    "legacy read",
                    format!("two legacy rows are {} with different data", key.text()),
                ));
            }
            Some(_) => {}
            None => found = Some(t),
        }
    }
    Ok(found)
}

/// Moves every legacy row into a 2.1.0 payload and rebuilds the tables
/// (inside the caller's transaction); the number of tables written (the
/// legacy rows less exact duplicates of one key).
pub(super) fn migrate(conn: &Connection, path: &Path, from: &str) -> Result<usize> {
    let rows = legacy_rows(conn, path, None)?;
    let mut moved: Vec<(CacheKey, Vec<u8>, String)> = Vec::with_capacity(rows.len());
    for row in &rows {
        let (key, table) = legacy_table(conn, path, row)?;
        let payload = encode_payload(&key, &[], table.data())?;
        let name = format!(
            "(dim {}, kernel_type {:?}, q_order {}, source_box_level {})",
            row.0, row.1, row.2, row.3
        );
        // Two legacy rows can map to one 2.1.0 key (same extent at two
        // levels): the same table is kept once, different ones are an error
        // (an upsert would silently keep whichever came last).
        if let Some((_, p, other)) = moved.iter().find(|(k, _, _)| k.text() == key.text()) {
            if *p != payload {
                return Err(TableCache::err(
                    path,
                    "migrate",
                    format!(
                        "legacy rows {other} and {name} are both {} with different data",
                        key.text()
                    ),
                ));
            }
            continue;
        }
        moved.push((key, payload, name));
    }
    let e = |x: rusqlite::Error| TableCache::sql(path, "migrate", x);
    conn.execute_batch(&format!("CREATE TABLE nearfield_cache_2_1_0 {TABLE_DDL};"))
        .map_err(e)?;
    for (key, payload, _) in &moved {
        insert_row(conn, "nearfield_cache_2_1_0", key, payload).map_err(e)?;
    }
    conn.execute_batch(&format!(
        "DROP TABLE IF EXISTS nearfield_cache_kwargs;
         DROP TABLE nearfield_cache;
         DROP TABLE IF EXISTS nearfield_cache_meta;
         ALTER TABLE nearfield_cache_2_1_0 RENAME TO nearfield_cache;
         CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
         INSERT INTO meta (key, value) VALUES ('schema_version', '{CACHE_SCHEMA_VERSION}');"
    ))
    .map_err(e)?;
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('migrated_from', ?1)",
        [from],
    )
    .map_err(e)?;
    Ok(moved.len())
}
