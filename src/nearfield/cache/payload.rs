//! What a cache row holds: the key (every parameter of a table, compared
//! by exact bits) and its columns, the tables a row decodes to, and the
//! payload codec (header, lengths, key hash, FNV-1a 64 checksum) that makes
//! a corrupt, truncated or misplaced blob an error instead of a wrong table.
use super::CORRUPT_ENTRY_HINT;
use crate::nearfield::cases::Cases;
use crate::nearfield::entry::EntryQuadrature;
use crate::nearfield::kernels::{BaseKernel, Derivative, Kernel};
use crate::nearfield::quadrature::q_points;
use crate::nearfield::reduced::ReducedTable;
use crate::nearfield::table::NearFieldTable;
use crate::runtime::{Error, Result};
use rusqlite::types::ToSql;
use std::path::Path;

/// The payload format this crate writes and reads.
pub const PAYLOAD_FORMAT_VERSION: u32 = 1;
/// The first 8 bytes of every payload.
pub const PAYLOAD_MAGIC: [u8; 8] = *b"HKNFTAB\0";
const HEADER_BYTES: usize = 48;

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
    pub(super) kernel: Kernel,
    pub(super) q: usize,
    pub(super) extent: f64,
    quad: EntryQuadrature,
    pub(super) symmetry: SymmetryMode,
}

/// The key's column values, in the order of `KEY_WHERE`.
pub(super) struct KeyColumns {
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
    pub(super) lambda: Option<f64>,
}

impl KeyColumns {
    pub(super) fn params(&self) -> [&dyn ToSql; 12] {
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

    pub(super) fn columns(&self) -> KeyColumns {
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
pub(super) fn encode_payload(key: &CacheKey, ids: &[u32], values: &[f64]) -> Result<Vec<u8>> {
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
pub(super) fn decode_payload(path: &Path, key: &CacheKey, blob: &[u8]) -> Result<CachedTable> {
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
