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
use crate::nearfield::cases::Cases;
use crate::nearfield::entry::EntryQuadrature;
use crate::nearfield::kernels::{BaseKernel, Derivative, Kernel};
use crate::nearfield::quadrature::q_points;
use crate::nearfield::reduced::ReducedTable;
use crate::nearfield::table::NearFieldTable;
use crate::runtime::{Error, Result};
use rusqlite::types::ToSql;
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema version this crate writes.
pub const CACHE_SCHEMA_VERSION: &str = "2.1.0";
/// The payload format this crate writes and reads.
pub const PAYLOAD_FORMAT_VERSION: u32 = 1;
/// The first 8 bytes of every payload.
pub const PAYLOAD_MAGIC: [u8; 8] = *b"HKNFTAB\0";
const HEADER_BYTES: usize = 48;
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

/// Whether a cached table is dense or symmetry-reduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SymmetryMode {
    /// A dense [`NearFieldTable`].
    None,
    /// A [`ReducedTable`] under the kernel's full group.
    Full,
}

impl SymmetryMode {
    /// `"none"` or `"full"` (the `symmetry` column).
    pub fn as_str(self) -> &'static str {
        match self {
            SymmetryMode::None => "none",
            SymmetryMode::Full => "full",
        }
    }
}

/// The key of a cached table (module docs): compared by exact bits.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheKey {
    kernel: Kernel,
    q: usize,
    extent: f64,
    quad: EntryQuadrature,
    symmetry: SymmetryMode,
}

/// The key's column values, in the order of `KEY_WHERE`.
struct KeyColumns {
    dim: i64,
    q: i64,
    extent_bits: String,
    base: &'static str,
    lambda_bits: String,
    derivative: &'static str,
    axis: i64,
    direction_bits: String,
    radial: i64,
    angular: i64,
    symmetry: &'static str,
    format: i64,
    lambda: Option<f64>,
}

impl KeyColumns {
    fn params(&self) -> [&dyn ToSql; 12] {
        [
            &self.dim,
            &self.q,
            &self.extent_bits,
            &self.base,
            &self.lambda_bits,
            &self.derivative,
            &self.axis,
            &self.direction_bits,
            &self.radial,
            &self.angular,
            &self.symmetry,
            &self.format,
        ]
    }
}

fn hex_bits(x: f64) -> String {
    format!("{:016x}", x.to_bits())
}

impl CacheKey {
    /// A key, checking `q` and the extent as a table build does.
    pub fn new(
        kernel: &Kernel,
        q: usize,
        extent: f64,
        quad: &EntryQuadrature,
        symmetry: SymmetryMode,
    ) -> Result<CacheKey> {
        q_points(q, extent, kernel.dim())?;
        Ok(CacheKey {
            kernel: kernel.clone(),
            q,
            extent,
            quad: *quad,
            symmetry,
        })
    }

    /// The key of a dense table.
    pub fn of_dense(t: &NearFieldTable) -> CacheKey {
        CacheKey {
            kernel: t.kernel().clone(),
            q: t.q(),
            extent: t.extent(),
            quad: *t.quadrature(),
            symmetry: SymmetryMode::None,
        }
    }

    /// The key of a reduced table.
    pub fn of_reduced(t: &ReducedTable) -> CacheKey {
        CacheKey {
            kernel: t.kernel().clone(),
            q: t.q(),
            extent: t.extent(),
            quad: *t.quadrature(),
            symmetry: SymmetryMode::Full,
        }
    }

    /// The symmetry mode.
    pub fn symmetry(&self) -> SymmetryMode {
        self.symmetry
    }

    fn columns(&self) -> KeyColumns {
        let (base, lambda) = match self.kernel.base() {
            BaseKernel::Laplace => ("laplace", None),
            BaseKernel::Yukawa { lambda } => ("yukawa", Some(lambda)),
            BaseKernel::Constant => ("constant", None),
        };
        let (derivative, axis, direction_bits) = match self.kernel.derivative() {
            None => ("none", -1, String::new()),
            Some(Derivative::AxisTarget(a)) => ("axis_target", *a as i64, String::new()),
            Some(Derivative::AxisSource(a)) => ("axis_source", *a as i64, String::new()),
            Some(Derivative::DirectionalSource(v)) => (
                "directional_source",
                -1,
                v.iter().map(|&x| hex_bits(x)).collect::<Vec<_>>().join(","),
            ),
        };
        KeyColumns {
            dim: self.kernel.dim() as i64,
            q: self.q as i64,
            extent_bits: hex_bits(self.extent),
            base,
            lambda_bits: lambda.map(hex_bits).unwrap_or_default(),
            derivative,
            axis,
            direction_bits,
            radial: i64::from(self.quad.radial_level),
            angular: self.quad.angular_order as i64,
            symmetry: self.symmetry.as_str(),
            format: i64::from(PAYLOAD_FORMAT_VERSION),
            lambda,
        }
    }

    /// The canonical text of the key (its hash is in the payload header).
    pub fn text(&self) -> String {
        let c = self.columns();
        format!(
            "dim={};q={};extent={};base={};lambda={};derivative={};axis={};direction={};\
             radial_level={};angular_order={};symmetry={};payload_format={}",
            c.dim,
            c.q,
            c.extent_bits,
            c.base,
            c.lambda_bits,
            c.derivative,
            c.axis,
            c.direction_bits,
            c.radial,
            c.angular,
            c.symmetry,
            c.format
        )
    }
}

/// A table read from the cache.
#[derive(Clone, Debug)]
pub enum CachedTable {
    /// Symmetry mode `none`.
    Dense(NearFieldTable),
    /// Symmetry mode `full`.
    Reduced(ReducedTable),
}

/// FNV-1a, 64 bit.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The payload of `key` with `ids` (reduced only) and `values`.
fn encode_payload(key: &CacheKey, ids: &[u32], values: &[f64]) -> Result<Vec<u8>> {
    if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(Error::InvalidInput(format!(
            "table cache: refusing to store {}: value {i} = {v} is not finite",
            key.text()
        )));
    }
    let cases = Cases::new(key.kernel.dim())?;
    let mut out = Vec::with_capacity(HEADER_BYTES + 4 * ids.len() + 8 * values.len() + 8);
    out.extend_from_slice(&PAYLOAD_MAGIC);
    out.extend_from_slice(&PAYLOAD_FORMAT_VERSION.to_le_bytes());
    out.push(match key.symmetry {
        SymmetryMode::None => 0,
        SymmetryMode::Full => 1,
    });
    out.push(key.kernel.dim() as u8);
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(key.q as u32).to_le_bytes());
    out.extend_from_slice(&(cases.len() as u32).to_le_bytes());
    out.extend_from_slice(&fnv1a64(key.text().as_bytes()).to_le_bytes());
    out.extend_from_slice(&(ids.len() as u64).to_le_bytes());
    out.extend_from_slice(&(values.len() as u64).to_le_bytes());
    for id in ids {
        out.extend_from_slice(&id.to_le_bytes());
    }
    for v in values {
        out.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    let sum = fnv1a64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    Ok(out)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Decodes and checks a payload stored under `key`.
fn decode_payload(path: &Path, key: &CacheKey, blob: &[u8]) -> Result<CachedTable> {
    let bad = |m: String| {
        Error::InvalidInput(format!(
            "table cache {}: payload of {}: {m}; {CORRUPT_ENTRY_HINT}",
            path.display(),
            key.text()
        ))
    };
    if blob.len() < HEADER_BYTES + 8 {
        return Err(bad(format!(
            "{} bytes, shorter than a header and checksum ({} bytes): truncated",
            blob.len(),
            HEADER_BYTES + 8
        )));
    }
    // The lengths the header claims (read before they are trusted, only to
    // say what is wrong).
    let n_ids = u64_at(blob, 32);
    let n_values = u64_at(blob, 40);
    let expected = n_ids
        .checked_mul(4)
        .and_then(|a| n_values.checked_mul(8).and_then(|b| a.checked_add(b)))
        .and_then(|a| a.checked_add((HEADER_BYTES + 8) as u64));
    let need = || expected.map_or("more than 2^64".to_string(), |e| e.to_string());
    // The checksum first: any flipped or missing byte (header included) is
    // reported as a checksum mismatch before any field is believed.
    let body = blob.len() - 8;
    let stored = u64_at(blob, body);
    let sum = fnv1a64(&blob[..body]);
    if stored != sum {
        let mut m = format!(
            "checksum mismatch: stored {stored:016x}, the first {body} bytes hash to {sum:016x} (corrupt"
        );
        if blob[..8] != PAYLOAD_MAGIC {
            m.push_str("; bad magic, not a hipkern table payload");
        } else if expected.is_none_or(|e| e > blob.len() as u64) {
            m.push_str(&format!(
                "; {} bytes, the header's lengths need {}: truncated?",
                blob.len(),
                need()
            ));
        } else if expected != Some(blob.len() as u64) {
            m.push_str(&format!(
                "; {} bytes, the header's lengths need {}: extra bytes?",
                blob.len(),
                need()
            ));
        }
        m.push(')');
        return Err(bad(m));
    }
    if blob[..8] != PAYLOAD_MAGIC {
        return Err(bad("bad magic (not a hipkern table payload)".into()));
    }
    let format = u32_at(blob, 8);
    if format != PAYLOAD_FORMAT_VERSION {
        return Err(bad(format!(
            "payload format {format}, this build reads {PAYLOAD_FORMAT_VERSION}"
        )));
    }
    if blob[14] != 0 || blob[15] != 0 {
        return Err(bad("reserved header bytes 14..16 are not zero".into()));
    }
    if expected != Some(blob.len() as u64) {
        return Err(bad(format!(
            "{} bytes, the header's lengths ({n_ids} ids, {n_values} values) need {} \
             (truncated or corrupt)",
            blob.len(),
            need()
        )));
    }
    let kind = blob[12];
    let want_kind = match key.symmetry {
        SymmetryMode::None => 0,
        SymmetryMode::Full => 1,
    };
    let cases = Cases::new(key.kernel.dim())?;
    if kind != want_kind
        || usize::from(blob[13]) != key.kernel.dim()
        || u32_at(blob, 16) as usize != key.q
        || u32_at(blob, 20) as usize != cases.len()
        || u64_at(blob, 24) != fnv1a64(key.text().as_bytes())
    {
        return Err(bad(
            "header (kind, dim, q, cases or key hash) does not match the row's key".into(),
        ));
    }
    let ids_at = HEADER_BYTES;
    let values_at = ids_at + 4 * n_ids as usize;
    let values: Vec<f64> = (0..n_values as usize)
        .map(|i| f64::from_bits(u64_at(blob, values_at + 8 * i)))
        .collect();
    if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(bad(format!("value {i} = {v} is not finite")));
    }
    let k = &key.kernel;
    match key.symmetry {
        SymmetryMode::None => {
            if n_ids != 0 {
                return Err(bad(format!("dense payload with {n_ids} ids")));
            }
            NearFieldTable::from_parts(k, key.q, key.extent, &key.quad, values)
                .map(CachedTable::Dense)
                .map_err(|e| bad(e.to_string()))
        }
        SymmetryMode::Full => {
            let ids = (0..n_ids as usize)
                .map(|i| u32_at(blob, ids_at + 4 * i))
                .collect();
            ReducedTable::from_parts(k, key.q, key.extent, &key.quad, ids, values)
                .map(CachedTable::Reduced)
                .map_err(|e| bad(e.to_string()))
        }
    }
}

/// How the database is laid out.
#[derive(Clone, Debug, PartialEq)]
enum Layout {
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

/// One legacy row: (dim, kernel_type, q_order, source_box_level, extent,
/// q_points blob, data blob).
type LegacyRow = (i64, String, i64, i64, f64, Vec<u8>, Vec<u8>);

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
fn detect(conn: &Connection, path: &Path) -> Result<Option<(Layout, String)>> {
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
fn legacy_get(conn: &Connection, path: &Path, key: &CacheKey) -> Result<Option<NearFieldTable>> {
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
fn migrate(conn: &Connection, path: &Path, from: &str) -> Result<usize> {
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
