//! Star events, their validation and their files.
//!
//! # The binary event file (version 1)
//!
//! Little-endian throughout; a 48-byte header then `count` records of 56
//! bytes (the seven float64 fields of [`StarEvent`] in order):
//!
//! | offset | type     | field                                   |
//! |-------:|----------|-----------------------------------------|
//! | 0      | 8 bytes  | magic `HKPSFEVT`                        |
//! | 8      | u32      | version, 1                              |
//! | 12     | u32      | record size in bytes, 56                |
//! | 16     | u64      | count, the number of records            |
//! | 24     | f64      | PSF FWHM (px)                           |
//! | 32     | f64      | PSF β                                   |
//! | 40     | f64      | PSF tail fraction                       |
//! | 48     | 56·count | records x, y, flux, r, g, b, support    |
//!
//! The file must be exactly `48 + 56·count` bytes. An N×7 float64 `.npy`
//! array (C or Fortran order, either byte order; columns as the record) is
//! accepted wherever an event file is, told apart by its magic
//! `\x93NUMPY`; it carries no PSF parameters.
use super::model::MoffatPsf;
use crate::runtime::{Error, Result};
use std::io::Write;
use std::path::Path;

/// The magic of a binary event file.
pub const EVENT_MAGIC: [u8; 8] = *b"HKPSFEVT";
/// The event-file version written and read.
pub const EVENT_VERSION: u32 = 1;
/// Bytes of the header.
pub const EVENT_HEADER_BYTES: usize = 48;
/// Bytes of one record.
pub const EVENT_RECORD_BYTES: usize = 56;
const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// One star event: 7 float64, laid out as the device and the files hold it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct StarEvent {
    /// Centre x, continuous pixel units (pixel `ix` covers `[ix, ix+1)`).
    pub x: f64,
    /// Centre y.
    pub y: f64,
    /// Total flux (≥ 0).
    pub flux: f64,
    /// Red weight (≥ 0): the event deposits `flux·r` in R.
    pub r: f64,
    /// Green weight (≥ 0).
    pub g: f64,
    /// Blue weight (≥ 0).
    pub b: f64,
    /// Support radius, pixels (> 0): pixels whose centre lies within it.
    pub support: f64,
}

/// The names of the fields, in record order.
pub const EVENT_FIELDS: [&str; 7] = ["x", "y", "flux", "r", "g", "b", "support"];

impl StarEvent {
    /// The fields in record order.
    pub fn to_array(&self) -> [f64; 7] {
        [
            self.x,
            self.y,
            self.flux,
            self.r,
            self.g,
            self.b,
            self.support,
        ]
    }

    /// An event from fields in record order.
    pub fn from_array(a: [f64; 7]) -> StarEvent {
        StarEvent {
            x: a[0],
            y: a[1],
            flux: a[2],
            r: a[3],
            g: a[4],
            b: a[5],
            support: a[6],
        }
    }

    /// Checks the fields: all finite, flux and colours ≥ 0, support > 0.
    /// The error names `index` (the event's position in what the caller
    /// passed), the field and its value.
    pub fn validate(&self, index: usize) -> Result<()> {
        for (name, v) in EVENT_FIELDS.iter().zip(self.to_array()) {
            if !v.is_finite() {
                return Err(Error::InvalidInput(format!(
                    "event {index}: {name} = {v} is not finite ({self:?})"
                )));
            }
        }
        for (name, v) in [
            ("flux", self.flux),
            ("r", self.r),
            ("g", self.g),
            ("b", self.b),
        ] {
            if v < 0.0 {
                return Err(Error::InvalidInput(format!(
                    "event {index}: {name} = {v:e} is negative ({self:?})"
                )));
            }
        }
        if self.support <= 0.0 {
            return Err(Error::InvalidInput(format!(
                "event {index}: support = {:e} is not positive ({self:?})",
                self.support
            )));
        }
        Ok(())
    }
}

/// Validates every event (the first bad one is the error).
pub fn validate_events(events: &[StarEvent]) -> Result<()> {
    events
        .iter()
        .enumerate()
        .try_for_each(|(i, e)| e.validate(i))
}

/// Which kind of file events came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventFormat {
    /// The binary event file of this module.
    Binary,
    /// An N×7 float64 `.npy` array.
    Npy,
}

/// The contents of an event file.
#[derive(Clone, Debug, PartialEq)]
pub struct EventFile {
    /// What the file was.
    pub format: EventFormat,
    /// The PSF parameters of the header (`None` for `.npy`).
    pub psf: Option<MoffatPsf>,
    /// The events, in file order, validated.
    pub events: Vec<StarEvent>,
}

/// The bytes of a binary event file of `events` rendered with `psf`.
pub fn encode_events(psf: &MoffatPsf, events: &[StarEvent]) -> Vec<u8> {
    let mut out = Vec::with_capacity(EVENT_HEADER_BYTES + EVENT_RECORD_BYTES * events.len());
    out.extend_from_slice(&EVENT_MAGIC);
    out.extend_from_slice(&EVENT_VERSION.to_le_bytes());
    out.extend_from_slice(&(EVENT_RECORD_BYTES as u32).to_le_bytes());
    out.extend_from_slice(&(events.len() as u64).to_le_bytes());
    for v in [psf.fwhm, psf.beta, psf.tail] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for e in events {
        for v in e.to_array() {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// Writes a binary event file (validating the PSF and the events first).
pub fn write_events(path: &Path, psf: &MoffatPsf, events: &[StarEvent]) -> Result<()> {
    psf.validate()?;
    validate_events(events)?;
    let bytes = encode_events(psf, events);
    let io = |e: std::io::Error| {
        Error::InvalidInput(format!("cannot write event file {}: {e}", path.display()))
    };
    let mut f = std::fs::File::create(path).map_err(io)?;
    f.write_all(&bytes).map_err(io)?;
    f.sync_all().map_err(io)
}

/// Writes events as an N×7 float64 `.npy` array.
pub fn write_events_npy(path: &Path, events: &[StarEvent]) -> Result<()> {
    use ndarray_npy::WriteNpyExt;
    validate_events(events)?;
    let flat: Vec<f64> = events.iter().flat_map(|e| e.to_array()).collect();
    let arr = ndarray::Array2::from_shape_vec((events.len(), 7), flat)
        .map_err(|e| Error::InvalidInput(format!("events as N×7: {e}")))?;
    let io = |e: String| Error::InvalidInput(format!("cannot write {}: {e}", path.display()));
    let f = std::fs::File::create(path).map_err(|e| io(e.to_string()))?;
    arr.write_npy(std::io::BufWriter::new(f))
        .map_err(|e| io(e.to_string()))
}

/// Reads an event file (binary or `.npy`, by its magic).
pub fn read_events(path: &Path) -> Result<EventFile> {
    let bytes = std::fs::read(path).map_err(|e| {
        Error::InvalidInput(format!("cannot read event file {}: {e}", path.display()))
    })?;
    parse_events(&bytes, &path.display().to_string())
}

/// Parses the bytes of an event file; `name` goes into error messages.
/// Rejects a wrong magic or version, a record size other than 56, a count
/// that disagrees with the length (truncated or trailing bytes), invalid
/// PSF parameters and invalid events (naming the event's index).
pub fn parse_events(bytes: &[u8], name: &str) -> Result<EventFile> {
    let bad = |msg: String| Err(Error::InvalidInput(format!("event file {name}: {msg}")));
    if bytes.starts_with(NPY_MAGIC) {
        return parse_npy(bytes, name);
    }
    if bytes.len() < EVENT_HEADER_BYTES {
        if !bytes.is_empty() && !EVENT_MAGIC.starts_with(&bytes[..bytes.len().min(8)]) {
            return bad("wrong magic (neither HKPSFEVT nor \\x93NUMPY)".into());
        }
        return bad(format!(
            "truncated header: {} bytes, the header has {EVENT_HEADER_BYTES}",
            bytes.len()
        ));
    }
    if bytes[..8] != EVENT_MAGIC {
        return bad(format!(
            "wrong magic {:?} (neither HKPSFEVT nor \\x93NUMPY)",
            String::from_utf8_lossy(&bytes[..8])
        ));
    }
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    let f64_at = |o: usize| f64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    let version = u32_at(8);
    if version != EVENT_VERSION {
        return bad(format!(
            "version {version} (this reader knows version {EVENT_VERSION})"
        ));
    }
    let record = u32_at(12);
    if record as usize != EVENT_RECORD_BYTES {
        return bad(format!(
            "record size {record} bytes (version 1 has {EVENT_RECORD_BYTES})"
        ));
    }
    let count = u64_at(16);
    let body = (bytes.len() - EVENT_HEADER_BYTES) as u64;
    let need = count.checked_mul(EVENT_RECORD_BYTES as u64);
    match need {
        Some(n) if n == body => {}
        Some(n) if n > body => {
            return bad(format!(
                "truncated: the header says {count} events ({n} bytes) but {body} bytes follow it"
            ))
        }
        Some(n) => {
            return bad(format!(
                "{} trailing bytes after the {count} events the header announces",
                body - n
            ))
        }
        None => return bad(format!("count {count} is impossibly large")),
    }
    let psf = MoffatPsf {
        fwhm: f64_at(24),
        beta: f64_at(32),
        tail: f64_at(40),
    };
    psf.validate()
        .map_err(|e| Error::InvalidInput(format!("event file {name}: header: {e}")))?;
    let mut events = Vec::with_capacity(count as usize);
    for k in 0..count as usize {
        let o = EVENT_HEADER_BYTES + k * EVENT_RECORD_BYTES;
        let mut a = [0.0; 7];
        for (f, v) in a.iter_mut().enumerate() {
            *v = f64_at(o + 8 * f);
        }
        let e = StarEvent::from_array(a);
        e.validate(k)
            .map_err(|err| Error::InvalidInput(format!("event file {name}: {err}")))?;
        events.push(e);
    }
    Ok(EventFile {
        format: EventFormat::Binary,
        psf: Some(psf),
        events,
    })
}

fn parse_npy(bytes: &[u8], name: &str) -> Result<EventFile> {
    use ndarray_npy::ReadNpyExt;
    let arr = ndarray::Array2::<f64>::read_npy(std::io::Cursor::new(bytes)).map_err(|e| {
        Error::InvalidInput(format!(
            "event file {name}: not an N×7 float64 .npy array: {e}"
        ))
    })?;
    if arr.ncols() != 7 {
        return Err(Error::InvalidInput(format!(
            "event file {name}: .npy shape ({}, {}), events need (N, 7) columns {}",
            arr.nrows(),
            arr.ncols(),
            EVENT_FIELDS.join(", ")
        )));
    }
    let mut events = Vec::with_capacity(arr.nrows());
    for (k, row) in arr.rows().into_iter().enumerate() {
        let e = StarEvent::from_array([row[0], row[1], row[2], row[3], row[4], row[5], row[6]]);
        e.validate(k)
            .map_err(|err| Error::InvalidInput(format!("event file {name}: {err}")))?;
        events.push(e);
    }
    Ok(EventFile {
        format: EventFormat::Npy,
        psf: None,
        events,
    })
}
