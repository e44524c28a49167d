//! The SQLite cache of near-field tables, schema 2.1.0
//! (`docs/design/nearfield.md#cache`; the full
//! description — DDL, key, payload layout byte by byte, the legacy 1.x
//! schema and its migration, concurrency — is `docs/nearfield_cache.md`).
//!
//! - One row per table in `nearfield_cache`; the table's arrays live only in
//!   the `payload` blob (dense: `data`; reduced: `reduced_entry_ids` +
//!   `reduced_data`). The nodes, normalisers and cases are recomputed.
//! - The key is every kernel parameter (base, λ bits, derivative kind, axis,
//!   direction bits), `dim`, `q`, the extent's bits, the quadrature orders,
//!   the symmetry mode and the payload format: two Yukawa λ never collide.
//! - The payload has a magic, a format version, lengths, a hash of the key
//!   and an FNV-1a 64 checksum: a corrupt, truncated or misplaced blob is an
//!   error naming the key, never a wrong table; NaN/inf refused both ways.
//! - [`TableCache::open`] creates, or migrates a legacy 1.x database (dense
//!   blob columns) in one transaction, then switches to WAL;
//!   [`TableCache::open_read_only`] writes nothing and reads a legacy
//!   database as it is. A major version above 2 is refused.
//! - A corrupt entry is an error that says how to replace it
//!   ([`CORRUPT_ENTRY_HINT`]); a put of a rebuilt table replaces it and
//!   [`TableCache::remove`] deletes it. SQLite failures that are the
//!   machine's (full disk, unwritable folder, I/O error) are
//!   [`Error::Io`], the rest `InvalidInput`.
//! - A put is one upsert in one `BEGIN IMMEDIATE` transaction; a get is one
//!   `SELECT` (one snapshot), so readers see the old or the new payload.

// One file per concern: the database (this file: opening, the schema in
// use, get and put), what a row holds (payload: the key, its columns and the
// payload codec) and older databases (legacy: detection, the 1.x layout,
// migration).
mod legacy;
mod payload;

pub use payload::{CacheKey, CachedTable, SymmetryMode, PAYLOAD_FORMAT_VERSION, PAYLOAD_MAGIC};

use crate::nearfield::entry::EntryQuadrature;
use crate::nearfield::kernels::Kernel;
use crate::nearfield::reduced::ReducedTable;
use crate::nearfield::table::NearFieldTable;
use crate::runtime::{Error, Result};
use legacy::{detect, legacy_get, migrate, Layout};
use payload::{decode_payload, encode_payload};
use rusqlite::types::ToSql;
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema version this crate writes.
pub const CACHE_SCHEMA_VERSION: &str = "2.1.0";
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

const TABLE_DDL: &str = "(
    dim             INTEGER NOT NULL,
    q               INTEGER NOT NULL,
    extent_bits     TEXT    NOT NULL,
    base_kernel     TEXT    NOT NULL,
    lambda_bits     TEXT    NOT NULL,
    derivative      TEXT    NOT NULL,
    derivative_axis INTEGER NOT NULL,
    direction_bits  TEXT    NOT NULL,
    radial_level    INTEGER NOT NULL,
    angular_order   INTEGER NOT NULL,
    symmetry        TEXT    NOT NULL,
    payload_format  INTEGER NOT NULL,
    extent          REAL    NOT NULL,
    lambda          REAL,
    payload         BLOB    NOT NULL,
    PRIMARY KEY (dim, q, extent_bits, base_kernel, lambda_bits, derivative,
                 derivative_axis, direction_bits, radial_level, angular_order,
                 symmetry, payload_format)
)";
const KEY_WHERE: &str = "dim = ?1 AND q = ?2 AND extent_bits = ?3 AND base_kernel = ?4 \
     AND lambda_bits = ?5 AND derivative = ?6 AND derivative_axis = ?7 \
     AND direction_bits = ?8 AND radial_level = ?9 AND angular_order = ?10 \
     AND symmetry = ?11 AND payload_format = ?12";

/// An open cache (module docs).
pub struct TableCache {
    conn: Connection,
    path: PathBuf,
    read_only: bool,
    layout: Layout,
    version: String,
    migrated_rows: Option<usize>,
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache")
            .field("path", &self.path)
            .field("read_only", &self.read_only)
            .field("version", &self.version)
            .finish()
    }
}

/// SQLite's result codes that are the machine's faults (a full disk, a
/// folder that cannot be written or opened, an I/O error, no memory, a
/// lock held too long), not the file's contents or the caller's input.
fn is_machine_fault(code: rusqlite::ErrorCode) -> bool {
    use rusqlite::ErrorCode as C;
    matches!(
        code,
        C::DiskFull
            | C::CannotOpen
            | C::ReadOnly
            | C::PermissionDenied
            | C::SystemIoFailure
            | C::OutOfMemory
            | C::DatabaseBusy
            | C::DatabaseLocked
            | C::FileLockingProtocolFailed
            | C::NoLargeFileSupport
    )
}

/// What a corrupt entry's error tells the user to do about it (the
/// program's `--rebuild` builds the table and replaces the entry through
/// [`TableCache::put_dense`]/[`TableCache::put_reduced`], upserts; a
/// library caller can also [`TableCache::remove`] it).
pub const CORRUPT_ENTRY_HINT: &str = "rerun with --rebuild to build it again and replace the entry";

impl TableCache {
    /// A problem of the file's contents or of the request (InvalidInput).
    fn err(path: &Path, what: &str, e: impl std::fmt::Display) -> Error {
        Error::InvalidInput(format!("table cache {}: {what}: {e}", path.display()))
    }

    /// An SQLite failure: [`Error::Io`] where it is the machine's
    /// ([`is_machine_fault`]), else as [`TableCache::err`] (a file that is
    /// not a database, a corrupt one, a schema it does not have).
    fn sql(path: &Path, what: &str, x: rusqlite::Error) -> Error {
        match x.sqlite_error_code() {
            Some(code) if is_machine_fault(code) => Error::Io {
                action: format!("table cache {}: {what}", path.display()),
                message: x.to_string(),
            },
            _ => TableCache::err(path, what, x),
        }
    }

    /// Opens (or creates) a cache for reading and writing: creates the
    /// schema, or migrates a legacy 1.x database (one transaction: payloads
    /// written, the dense columns and old tables dropped), refuses a major
    /// version above 2, then switches to WAL.
    pub fn open(path: impl AsRef<Path>) -> Result<TableCache> {
        let path = path.as_ref().to_path_buf();
        let e = |what: &str| {
            let p = path.clone();
            let w = what.to_string();
            move |x: rusqlite::Error| TableCache::sql(&p, &w, x)
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags).map_err(e("open"))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(e("busy_timeout"))?;
        let tx = Transaction::new_unchecked(&conn, TransactionBehavior::Immediate)
            .map_err(e("begin"))?;
        let (version, migrated_rows) = match detect(&tx, &path)? {
            None => {
                tx.execute_batch(&format!(
                    "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
                     INSERT INTO meta (key, value) VALUES ('schema_version', '{CACHE_SCHEMA_VERSION}');
                     CREATE TABLE nearfield_cache {TABLE_DDL};"
                ))
                .map_err(e("create schema"))?;
                (CACHE_SCHEMA_VERSION.to_string(), None)
            }
            Some((Layout::Current, v)) => (v, None),
            Some((Layout::Legacy, v)) => {
                let n = migrate(&tx, &path, &v)?;
                (CACHE_SCHEMA_VERSION.to_string(), Some(n))
            }
        };
        tx.commit().map_err(e("commit"))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(e("journal_mode"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(TableCache::err(
                &path,
                "journal_mode",
                format!("WAL refused (mode {mode})"),
            ));
        }
        Ok(TableCache {
            conn,
            path,
            read_only: false,
            layout: Layout::Current,
            version,
            migrated_rows,
        })
    }

    /// Opens an existing cache read-only: nothing is written (a legacy 1.x
    /// database is read as is); a major version above 2 is refused.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<TableCache> {
        let path = path.as_ref().to_path_buf();
        if !path.is_file() {
            return Err(TableCache::err(&path, "open read-only", "no such file"));
        }
        let e = |what: &'static str, p: &Path| {
            let p = p.to_path_buf();
            move |x: rusqlite::Error| TableCache::sql(&p, what, x)
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags).map_err(e("open", &path))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(e("busy_timeout", &path))?;
        conn.execute_batch("PRAGMA query_only = 1")
            .map_err(e("query_only", &path))?;
        let (layout, version) = {
            let tx = Transaction::new_unchecked(&conn, TransactionBehavior::Deferred)
                .map_err(e("begin", &path))?;
            detect(&tx, &path)?.ok_or_else(|| {
                TableCache::err(&path, "open read-only", "empty database, not a table cache")
            })?
        };
        Ok(TableCache {
            conn,
            path,
            read_only: true,
            layout,
            version,
            migrated_rows: None,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this is a read-only handle.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The schema version of the file (`"1.0.0"` for a legacy file read
    /// read-only, else 2.x).
    pub fn schema_version(&self) -> &str {
        &self.version
    }

    /// Whether the file is a legacy 1.x database read as is.
    pub fn is_legacy(&self) -> bool {
        self.layout == Layout::Legacy
    }

    /// Rows migrated from a legacy database by this [`TableCache::open`].
    pub fn migrated_rows(&self) -> Option<usize> {
        self.migrated_rows
    }

    /// SQLite's journal mode (`"wal"` after a writable open).
    pub fn journal_mode(&self) -> Result<String> {
        self.conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .map_err(|x| TableCache::sql(&self.path, "journal_mode", x))
    }

    /// Number of cached tables.
    pub fn len(&self) -> Result<usize> {
        self.conn
            .query_row("SELECT COUNT(*) FROM nearfield_cache", [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n as usize)
            .map_err(|x| TableCache::sql(&self.path, "count", x))
    }

    /// Whether the cache holds no table.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    fn upsert(&self, key: &CacheKey, payload: &[u8]) -> Result<()> {
        if self.read_only {
            return Err(TableCache::err(
                &self.path,
                "put",
                "the cache was opened read-only",
            ));
        }
        let e = |w: &'static str| move |x: rusqlite::Error| TableCache::sql(&self.path, w, x);
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(e("begin"))?;
        insert_row(&tx, "nearfield_cache", key, payload).map_err(e("upsert"))?;
        tx.commit().map_err(e("commit"))
    }

    /// Stores a dense table (an upsert: replaces the table of the same key).
    pub fn put_dense(&self, table: &NearFieldTable) -> Result<()> {
        let key = CacheKey::of_dense(table);
        self.upsert(&key, &encode_payload(&key, &[], table.data())?)
    }

    /// Stores a reduced table (an upsert).
    pub fn put_reduced(&self, table: &ReducedTable) -> Result<()> {
        let key = CacheKey::of_reduced(table);
        let payload = encode_payload(&key, table.reduced_entry_ids(), table.reduced_data())?;
        self.upsert(&key, &payload)
    }

    /// Removes the table of `key`; whether there was one. The way out of a
    /// corrupt entry (with a put of a rebuilt table, which replaces it
    /// anyway: puts are upserts). Refused on a read-only handle.
    pub fn remove(&self, key: &CacheKey) -> Result<bool> {
        if self.read_only {
            return Err(TableCache::err(
                &self.path,
                "remove",
                "the cache was opened read-only",
            ));
        }
        let e = |w: &'static str| move |x: rusqlite::Error| TableCache::sql(&self.path, w, x);
        let c = key.columns();
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(e("begin"))?;
        let n = tx
            .execute(
                &format!("DELETE FROM nearfield_cache WHERE {KEY_WHERE}"),
                &c.params()[..],
            )
            .map_err(e("delete"))?;
        tx.commit().map_err(e("commit"))?;
        Ok(n > 0)
    }

    /// The table of `key`, `None` when absent; a payload that does not
    /// decode is an error naming the key and saying how to replace it
    /// ([`CORRUPT_ENTRY_HINT`]; [`TableCache::remove`]).
    pub fn get(&self, key: &CacheKey) -> Result<Option<CachedTable>> {
        if self.layout == Layout::Legacy {
            if key.symmetry == SymmetryMode::Full {
                return Ok(None);
            }
            return legacy_get(&self.conn, &self.path, key).map(|t| t.map(CachedTable::Dense));
        }
        let c = key.columns();
        let blob: Option<Vec<u8>> = self
            .conn
            .query_row(
                &format!("SELECT payload FROM nearfield_cache WHERE {KEY_WHERE}"),
                &c.params()[..],
                |r| r.get(0),
            )
            .optional()
            .map_err(|x| match x {
                // A payload that is not a blob at all: a corrupt entry too.
                rusqlite::Error::InvalidColumnType(..)
                | rusqlite::Error::FromSqlConversionFailure(..) => TableCache::err(
                    &self.path,
                    &format!("payload of {}", key.text()),
                    format!("{x}; {CORRUPT_ENTRY_HINT}"),
                ),
                x => TableCache::sql(&self.path, "select", x),
            })?;
        blob.map(|b| decode_payload(&self.path, key, &b))
            .transpose()
    }

    /// The dense table of these parameters, if cached.
    pub fn get_dense(
        &self,
        kernel: &Kernel,
        q: usize,
        extent: f64,
        quad: &EntryQuadrature,
    ) -> Result<Option<NearFieldTable>> {
        let key = CacheKey::new(kernel, q, extent, quad, SymmetryMode::None)?;
        Ok(match self.get(&key)? {
            Some(CachedTable::Dense(t)) => Some(t),
            _ => None,
        })
    }

    /// The reduced table of these parameters, if cached.
    pub fn get_reduced(
        &self,
        kernel: &Kernel,
        q: usize,
        extent: f64,
        quad: &EntryQuadrature,
    ) -> Result<Option<ReducedTable>> {
        let key = CacheKey::new(kernel, q, extent, quad, SymmetryMode::Full)?;
        Ok(match self.get(&key)? {
            Some(CachedTable::Reduced(t)) => Some(t),
            _ => None,
        })
    }
}

fn insert_row(
    conn: &Connection,
    table: &str,
    key: &CacheKey,
    payload: &[u8],
) -> rusqlite::Result<usize> {
    let c = key.columns();
    let mut p: Vec<&dyn ToSql> = c.params().to_vec();
    p.push(&key.extent);
    p.push(&c.lambda);
    p.push(&payload);
    conn.execute(
        &format!(
            "INSERT INTO {table} (dim, q, extent_bits, base_kernel, lambda_bits, derivative,
                 derivative_axis, direction_bits, radial_level, angular_order, symmetry,
                 payload_format, extent, lambda, payload)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
             ON CONFLICT (dim, q, extent_bits, base_kernel, lambda_bits, derivative,
                 derivative_axis, direction_bits, radial_level, angular_order, symmetry,
                 payload_format)
             DO UPDATE SET payload = excluded.payload, extent = excluded.extent,
                 lambda = excluded.lambda"
        ),
        &p[..],
    )
}
