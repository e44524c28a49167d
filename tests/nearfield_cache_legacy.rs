//! The table cache's schema versions (docs/nearfield_cache.md): the legacy
//! 1.x schema ("The legacy 1.x schema"), a database built here from the
//! documented DDL, read as is read-only and migrated when opened writable;
//! one without its meta table and with duplicate levels; a broken row
//! failing the whole migration and changing nothing. A newer major version
//! is refused by both opens (a legacy file's too); a newer minor one is
//! read and written.
mod common;
use common::nearfield_cache::{
    assert_dense_eq, column_names, err_text, get_dense, next_up, quad, raw, snapshot, synth_dense,
    table_names,
};
use hipkern::nearfield::{
    q_points, CacheKey, EntryQuadrature, Kernel, NearFieldTable, SymmetryMode, TableCache,
};
use rusqlite::{params, Connection};
use std::path::Path;

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
// Version policy
// ---------------------------------------------------------------------------

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
