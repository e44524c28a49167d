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
//! array (format version 1, 2 or 3; C or Fortran order, either byte order;
//! columns as the record) is accepted wherever an event file is, told apart
//! by its magic `\x93NUMPY`; it carries no PSF parameters, and its data
//! must be exactly `N·7·8` bytes after its header.
//!
//! # Hostile files
//!
//! Every size a header claims (the binary count, the `.npy` shape) is
//! checked with checked arithmetic against the bytes the file actually
//! holds before anything is allocated for it, and every allocation whose
//! size comes from a file is checked against the machine's available
//! memory ([`crate::host_memory`]) and made fallibly: a file that lies
//! about its size is an [`Error::InvalidInput`] naming the file, the claim
//! and what it holds; one too large for this machine an
//! [`Error::HostMemory`]. Failures of the machine or the file system while
//! reading or writing (other than a missing or unreadable file, or a path
//! that is a folder: the caller's input) are [`Error::Io`].
use super::model::MoffatPsf;
use super::output::{create_new, replace_via_temp};
use crate::host_memory::{available_bytes, reserve_vec};
use crate::runtime::{Error, Result};
use std::io::{BufWriter, Read, Write};
use std::path::Path;

/// The magic of a binary event file.
pub const EVENT_MAGIC: [u8; 8] = *b"HKPSFEVT";
/// The event-file version written and read.
pub const EVENT_VERSION: u32 = 1;
/// Bytes of the header.
pub const EVENT_HEADER_BYTES: usize = 48;
/// Bytes of one record.
pub const EVENT_RECORD_BYTES: usize = 56;

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

/// Writes the binary event file's bytes (layout in the module docs).
fn write_event_bytes(
    out: &mut impl Write,
    psf: &MoffatPsf,
    events: &[StarEvent],
) -> std::io::Result<()> {
    out.write_all(&EVENT_MAGIC)?;
    out.write_all(&EVENT_VERSION.to_le_bytes())?;
    out.write_all(&(EVENT_RECORD_BYTES as u32).to_le_bytes())?;
    out.write_all(&(events.len() as u64).to_le_bytes())?;
    for v in [psf.fwhm, psf.beta, psf.tail] {
        out.write_all(&v.to_le_bytes())?;
    }
    for e in events {
        for v in e.to_array() {
            out.write_all(&v.to_le_bytes())?;
        }
    }
    Ok(())
}

/// The bytes of a binary event file of `events` rendered with `psf`.
pub fn encode_events(psf: &MoffatPsf, events: &[StarEvent]) -> Vec<u8> {
    let mut out = Vec::with_capacity(EVENT_HEADER_BYTES + EVENT_RECORD_BYTES * events.len());
    write_event_bytes(&mut out, psf, events).expect("writing to a Vec cannot fail");
    out
}

/// The [`Error::Io`] of a failed write of `path`.
fn write_failure(path: &Path, what: &str, e: impl std::fmt::Display) -> Error {
    Error::Io {
        action: format!("cannot write {what} {}", path.display()),
        message: e.to_string(),
    }
}

/// Writes a binary event file (validating the PSF and the events first),
/// replacing `path` whole: it is written beside it and renamed into place,
/// so on an error `path` is as it was. A path that is a folder, or in a
/// folder that does not exist, is an [`Error::InvalidInput`]; a failure to
/// create, write, sync or rename the file an [`Error::Io`].
pub fn write_events(path: &Path, psf: &MoffatPsf, events: &[StarEvent]) -> Result<()> {
    psf.validate()?;
    validate_events(events)?;
    replace_via_temp(path, |temp| {
        let io = |e: std::io::Error| write_failure(path, "event file", e);
        let mut out = BufWriter::new(create_new(temp, "event file")?);
        write_event_bytes(&mut out, psf, events).map_err(io)?;
        let file = out.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)
    })
}

/// [`write_events`]'s bytes to `w` (flushed), for a caller that stages
/// its outputs itself; the PSF and the events are validated first.
pub fn write_events_to(w: &mut dyn Write, psf: &MoffatPsf, events: &[StarEvent]) -> Result<()> {
    psf.validate()?;
    validate_events(events)?;
    let io = |e: std::io::Error| Error::Io {
        action: "cannot write the event file".to_string(),
        message: e.to_string(),
    };
    write_event_bytes(&mut &mut *w, psf, events).map_err(io)?;
    w.flush().map_err(io)
}

/// [`write_events_npy`]'s bytes to `w` (flushed), for a caller that stages
/// its outputs itself; the events are validated first.
pub fn write_events_npy_to(w: &mut dyn Write, events: &[StarEvent]) -> Result<()> {
    validate_events(events)?;
    let io = |e: std::io::Error| Error::Io {
        action: "cannot write the event file".to_string(),
        message: e.to_string(),
    };
    w.write_all(&crate::npy::header(
        "<f8",
        &[events.len(), EVENT_FIELDS.len()],
    ))
    .map_err(io)?;
    for e in events {
        for v in e.to_array() {
            w.write_all(&v.to_le_bytes()).map_err(io)?;
        }
    }
    w.flush().map_err(io)
}

/// Writes events as an N×7 little-endian float64 `.npy` array (C order),
/// replacing `path` as [`write_events`] does, with the same errors.
pub fn write_events_npy(path: &Path, events: &[StarEvent]) -> Result<()> {
    validate_events(events)?;
    replace_via_temp(path, |temp| {
        let io = |e: std::io::Error| write_failure(path, "event file", e);
        let mut out = BufWriter::new(create_new(temp, "event file")?);
        out.write_all(&crate::npy::header(
            "<f8",
            &[events.len(), EVENT_FIELDS.len()],
        ))
        .map_err(io)?;
        for e in events {
            for v in e.to_array() {
                out.write_all(&v.to_le_bytes()).map_err(io)?;
            }
        }
        let file = out.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)
    })
}

/// Reads an event file (binary or `.npy`, by its magic).
///
/// A path that does not exist, cannot be opened for lack of permission or
/// is a folder is an [`Error::InvalidInput`] (the caller named it); a file
/// larger than the memory this machine has available an
/// [`Error::HostMemory`]; any other failure to read it an [`Error::Io`].
/// The contents are then checked as [`parse_events`] does.
pub fn read_events(path: &Path) -> Result<EventFile> {
    let name = path.display().to_string();
    let open_failure = |e: std::io::Error| {
        use std::io::ErrorKind::*;
        match e.kind() {
            NotFound | PermissionDenied | IsADirectory | InvalidInput => {
                Error::InvalidInput(format!("cannot read event file {name}: {e}"))
            }
            OutOfMemory => Error::HostMemory {
                what: format!("the contents of event file {name}"),
                needed_bytes: 0,
                available_bytes: None,
            },
            _ => Error::Io {
                action: format!("cannot read event file {name}"),
                message: e.to_string(),
            },
        }
    };
    let file = std::fs::File::open(path).map_err(open_failure)?;
    let meta = file.metadata().map_err(open_failure)?;
    if meta.is_dir() {
        return Err(Error::InvalidInput(format!(
            "cannot read event file {name}: it is a folder"
        )));
    }
    let what = || format!("the contents of event file {name}");
    // A regular file's length is known: check it and read it into one
    // allocation. Anything else (a pipe, a device) is read up to what the
    // machine has available, so an endless source is an error, not a
    // process grown until the kernel kills it.
    let (mut bytes, limit) = if meta.is_file() {
        let len = usize::try_from(meta.len()).map_err(|_| Error::HostMemory {
            what: what(),
            needed_bytes: meta.len(),
            available_bytes: available_bytes(),
        })?;
        (reserve_vec::<u8>(len, &what)?, meta.len())
    } else {
        (Vec::new(), available_bytes().unwrap_or(u64::MAX))
    };
    // One byte past the limit tells a source longer than it apart.
    let got = file
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(open_failure)?;
    if got as u64 > limit {
        return Err(if meta.is_file() {
            Error::Io {
                action: format!("cannot read event file {name}"),
                message: format!("it grew past its {limit} bytes while being read"),
            }
        } else {
            Error::HostMemory {
                what: what(),
                needed_bytes: got as u64,
                available_bytes: Some(limit),
            }
        });
    }
    parse_events(&bytes, &name)
}

/// Parses the bytes of an event file; `name` goes into error messages.
/// Rejects a wrong magic or version, a record size other than 56, a count
/// that disagrees with the length (truncated or trailing bytes), invalid
/// PSF parameters and invalid events (naming the event's index); for
/// `.npy`, a header that is not an N×7 float64 array or whose shape
/// disagrees with the bytes after it. Sizes are checked against `bytes`
/// before the events are allocated (fallibly, see the module docs).
pub fn parse_events(bytes: &[u8], name: &str) -> Result<EventFile> {
    let bad = |msg: String| Err(Error::InvalidInput(format!("event file {name}: {msg}")));
    if bytes.starts_with(crate::npy::MAGIC) {
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
    match count.checked_mul(EVENT_RECORD_BYTES as u64) {
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
        None => {
            return bad(format!(
                "the header's count {count} is impossibly large: {count} × \
                 {EVENT_RECORD_BYTES} bytes overflows 64 bits, and {body} bytes follow it"
            ))
        }
    }
    // count·56 == body ≤ bytes.len(): count fits usize.
    let count = count as usize;
    let psf = MoffatPsf {
        fwhm: f64_at(24),
        beta: f64_at(32),
        tail: f64_at(40),
    };
    psf.validate()
        .map_err(|e| Error::InvalidInput(format!("event file {name}: header: {e}")))?;
    let mut events = reserve_vec::<StarEvent>(count, &|| {
        format!("the {count} events of event file {name}")
    })?;
    for (k, rec) in bytes[EVENT_HEADER_BYTES..]
        .chunks_exact(EVENT_RECORD_BYTES)
        .enumerate()
    {
        let mut a = [0.0; 7];
        for (v, b) in a.iter_mut().zip(rec.chunks_exact(8)) {
            *v = f64::from_le_bytes(b.try_into().unwrap());
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

/// What a `.npy` header says.
#[derive(Debug, PartialEq)]
struct NpyHeader {
    /// The dtype string, e.g. `<f8`.
    descr: String,
    fortran_order: bool,
    /// The shape as written (each dimension as a u64; larger is an error).
    shape: Vec<u64>,
    /// Where the data starts.
    data_offset: usize,
}

/// The shape as numpy prints it: `(4, 6)`, `(5,)`, `()`.
fn shape_text(shape: &[u64]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Parses a `.npy` file's preamble and header dictionary (format versions
/// 1.0, 2.0 and 3.0). Only the three keys numpy writes are read; their
/// values must be a string, a boolean and a tuple of integers.
fn parse_npy_header(bytes: &[u8]) -> std::result::Result<NpyHeader, String> {
    if bytes.len() < 10 {
        return Err(format!("truncated .npy preamble: {} bytes", bytes.len()));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (len, start): (usize, usize) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(format!("truncated .npy preamble: {} bytes", bytes.len()));
            }
            (
                u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
                12,
            )
        }
        _ => {
            return Err(format!(
                ".npy format version {major}.{minor} (this reader knows 1.0, 2.0 and 3.0)"
            ))
        }
    };
    let data_offset = start
        .checked_add(len)
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| {
            format!(
                "truncated .npy header: it claims {len} bytes but the file has {} after the \
                 preamble",
                bytes.len() - start
            )
        })?;
    let text = std::str::from_utf8(&bytes[start..data_offset])
        .map_err(|_| "the .npy header is not text".to_string())?;
    let mut p = DictParser {
        s: text.as_bytes(),
        i: 0,
    };
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    p.expect(b'{')?;
    loop {
        p.skip_space();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.expect(b':')?;
        match key.as_str() {
            "descr" => {
                descr = Some(
                    p.string()
                        .map_err(|_| "dtype is not float64 (a structured dtype)".to_string())?,
                )
            }
            "fortran_order" => fortran_order = Some(p.boolean()?),
            "shape" => shape = Some(p.tuple()?),
            other => return Err(format!("unknown .npy header key {other:?}")),
        }
        p.skip_space();
        if !p.eat(b',') {
            p.expect(b'}')?;
            break;
        }
    }
    match (descr, fortran_order, shape) {
        (Some(descr), Some(fortran_order), Some(shape)) => Ok(NpyHeader {
            descr,
            fortran_order,
            shape,
            data_offset,
        }),
        _ => Err("the .npy header lacks descr, fortran_order or shape".into()),
    }
}

/// A cursor over a `.npy` header's Python dictionary literal.
struct DictParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl DictParser<'_> {
    fn skip_space(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_space();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!(
                "malformed .npy header: expected {:?} at byte {}",
                c as char, self.i
            ))
        }
    }

    /// A quoted string without escapes (numpy writes none in these keys).
    fn string(&mut self) -> std::result::Result<String, String> {
        self.skip_space();
        let q = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => {
                return Err(format!(
                    "malformed .npy header: expected a string at byte {}",
                    self.i
                ))
            }
        };
        let from = self.i + 1;
        let len = self.s[from..]
            .iter()
            .position(|&c| c == q)
            .ok_or_else(|| "malformed .npy header: an unterminated string".to_string())?;
        self.i = from + len + 1;
        Ok(String::from_utf8_lossy(&self.s[from..from + len]).into_owned())
    }

    fn boolean(&mut self) -> std::result::Result<bool, String> {
        self.skip_space();
        for (word, v) in [(&b"True"[..], true), (&b"False"[..], false)] {
            if self.s[self.i..].starts_with(word) {
                self.i += word.len();
                return Ok(v);
            }
        }
        Err(format!(
            "malformed .npy header: expected True or False at byte {}",
            self.i
        ))
    }

    fn tuple(&mut self) -> std::result::Result<Vec<u64>, String> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        loop {
            if self.eat(b')') {
                return Ok(dims);
            }
            // At most a few dimensions make sense; bound the work a hostile
            // header can ask for.
            if dims.len() >= NPY_MAX_DIMS {
                return Err(format!(
                    ".npy shape with more than {NPY_MAX_DIMS} dimensions"
                ));
            }
            self.skip_space();
            let from = self.i;
            while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                self.i += 1;
            }
            let digits = std::str::from_utf8(&self.s[from..self.i]).unwrap_or("");
            if digits.is_empty() {
                return Err(format!(
                    "malformed .npy shape: expected a number at byte {from}"
                ));
            }
            let d = digits.parse::<u64>().map_err(|_| {
                format!(".npy shape dimension {digits} is impossibly large (beyond 64 bits)")
            })?;
            dims.push(d);
            if !self.eat(b',') {
                self.expect(b')')?;
                return Ok(dims);
            }
        }
    }
}

/// The most dimensions a `.npy` shape may have here (numpy's own limit is
/// 64; events need 2).
const NPY_MAX_DIMS: usize = 64;

fn parse_npy(bytes: &[u8], name: &str) -> Result<EventFile> {
    let bad = |msg: String| Error::InvalidInput(format!("event file {name}: {msg}"));
    let h =
        parse_npy_header(bytes).map_err(|m| bad(format!("not an N×7 float64 .npy array: {m}")))?;
    let little = match h.descr.as_str() {
        "<f8" => true,
        ">f8" => false,
        "=f8" => cfg!(target_endian = "little"),
        other => {
            return Err(bad(format!(
                "not an N×7 float64 .npy array: dtype {other:?} (events need float64, \
                 '<f8' or '>f8')"
            )))
        }
    };
    let [rows, cols] = h.shape[..] else {
        return Err(bad(format!(
            ".npy shape {}, events need (N, 7) columns {}",
            shape_text(&h.shape),
            EVENT_FIELDS.join(", ")
        )));
    };
    if cols != 7 {
        return Err(bad(format!(
            ".npy shape {}, events need (N, 7) columns {}",
            shape_text(&h.shape),
            EVENT_FIELDS.join(", ")
        )));
    }
    let data = (bytes.len() - h.data_offset) as u64;
    let claimed = rows.checked_mul(7 * 8);
    if claimed != Some(data) {
        let claim = match claimed {
            Some(n) => format!("{n} bytes"),
            None => "more than 2^64 bytes".to_string(),
        };
        return Err(bad(format!(
            "the .npy header claims shape {} of float64 ({claim}), but the file holds {data} \
             bytes of data after its {}-byte header",
            shape_text(&h.shape),
            h.data_offset
        )));
    }
    // rows·56 == data ≤ bytes.len(): rows fits usize.
    let rows = rows as usize;
    let values = &bytes[h.data_offset..];
    let value = |k: usize| {
        let b: [u8; 8] = values[8 * k..8 * k + 8].try_into().unwrap();
        if little {
            f64::from_le_bytes(b)
        } else {
            f64::from_be_bytes(b)
        }
    };
    let mut events =
        reserve_vec::<StarEvent>(rows, &|| format!("the {rows} events of event file {name}"))?;
    for k in 0..rows {
        let mut a = [0.0; 7];
        for (c, v) in a.iter_mut().enumerate() {
            *v = value(if h.fortran_order {
                c * rows + k
            } else {
                k * 7 + c
            });
        }
        let e = StarEvent::from_array(a);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<EventFile>) -> String {
        match r {
            Err(Error::InvalidInput(m)) => m,
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    /// A version-1 `.npy` preamble and header for `dict`, then `data`.
    fn npy(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut h = dict.to_string();
        while (10 + h.len() + 1) % 64 != 0 {
            h.push(' ');
        }
        h.push('\n');
        let mut out = crate::npy::MAGIC.to_vec();
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out
    }

    fn event(k: usize) -> StarEvent {
        StarEvent::from_array([k as f64, 2.0, 3.0, 0.5, 0.25, 0.125, 4.0 + k as f64])
    }

    #[test]
    fn a_npy_header_claiming_2_to_the_40_rows_is_refused_before_allocating() {
        // 2^40 rows × 7 float64 would be a 61.6 TB allocation; the file holds
        // two rows.
        let data: Vec<u8> = [event(0), event(1)]
            .iter()
            .flat_map(|e| e.to_array())
            .flat_map(f64::to_le_bytes)
            .collect();
        let bytes = npy(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776, 7), }",
            &data,
        );
        let m = message(parse_events(&bytes, "huge.npy"));
        assert!(
            m.contains("huge.npy")
                && m.contains("(1099511627776, 7)")
                && m.contains("61572651155456 bytes")
                && m.contains("holds 112 bytes"),
            "{m}"
        );
        // A claim whose byte count overflows 64 bits, and one beyond u64.
        let m = message(parse_events(
            &npy(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952, 7), }",
                &data,
            ),
            "x.npy",
        ));
        assert!(
            m.contains("more than 2^64 bytes") && m.contains("holds 112 bytes"),
            "{m}"
        );
        let m = message(parse_events(
            &npy(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999, 7), }",
                &data,
            ),
            "x.npy",
        ));
        assert!(m.contains("impossibly large"), "{m}");
        // A header length beyond the file.
        let mut cut = npy(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 7), }",
            &[],
        );
        cut[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
        let m = message(parse_events(&cut, "cut.npy"));
        assert!(
            m.contains("truncated .npy header") && m.contains("65535"),
            "{m}"
        );
        let mut cut = npy("{}", &[]);
        cut[6] = 2;
        cut.truncate(11);
        assert!(message(parse_events(&cut, "v2.npy")).contains("truncated .npy preamble"));
    }

    #[test]
    fn a_binary_count_of_2_to_the_40_is_refused_naming_both_sizes() {
        let mut bytes = encode_events(&MoffatPsf::default(), &[event(0)]);
        bytes[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let m = message(parse_events(&bytes, "huge.bin"));
        assert!(
            m.contains("huge.bin")
                && m.contains("says 1099511627776 events (61572651155456 bytes)")
                && m.contains("56 bytes follow"),
            "{m}"
        );
        bytes[16..24].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
        let m = message(parse_events(&bytes, "huge.bin"));
        assert!(
            m.contains("overflows 64 bits") && m.contains("56 bytes follow"),
            "{m}"
        );
    }

    #[test]
    fn npy_variants_are_read_and_bad_ones_named() {
        let events: Vec<StarEvent> = (0..5).map(event).collect();
        let flat: Vec<f64> = events.iter().flat_map(|e| e.to_array()).collect();
        // What this module writes: numpy's 64-byte alignment.
        let mut written = crate::npy::header("<f8", &[5, EVENT_FIELDS.len()]);
        assert_eq!(written.len() % 64, 0);
        written.extend(flat.iter().flat_map(|v| v.to_le_bytes()));
        assert_eq!(parse_events(&written, "w").unwrap().events, events);
        // Big-endian, Fortran order, version 2.0, double quotes, no trailing comma.
        let fortran: Vec<u8> = (0..7)
            .flat_map(|c| events.iter().map(move |e| e.to_array()[c]))
            .flat_map(f64::to_be_bytes)
            .collect();
        let mut v2 = npy(
            "{\"descr\": \">f8\", \"fortran_order\": True, \"shape\": (5, 7)}",
            &fortran,
        );
        let len = u16::from_le_bytes([v2[8], v2[9]]) as u32;
        v2[6] = 2;
        v2.splice(8..10, len.to_le_bytes());
        let f = parse_events(&v2, "v2").unwrap();
        assert_eq!(
            (f.format, f.psf, f.events),
            (EventFormat::Npy, None, events.clone())
        );
        // Empty.
        let empty = npy(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 7), }",
            &[],
        );
        assert!(parse_events(&empty, "e").unwrap().events.is_empty());
        let data: Vec<u8> = flat.iter().flat_map(|v| v.to_le_bytes()).collect();
        for (dict, want) in [
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 7), }",
                "float64",
            ),
            (
                "{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (5, 7), }",
                "float64",
            ),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (35,), }",
                "(35,)",
            ),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (5, 7, 1), }",
                "(5, 7, 1)",
            ),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (7, 5), }",
                "(7, 5)",
            ),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (6, 7), }",
                "holds 280 bytes",
            ),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 7), }",
                "holds 280 bytes",
            ),
            (
                "{'descr': '<f8', 'fortran_order': maybe, 'shape': (5, 7), }",
                "True or False",
            ),
            ("{'descr': '<f8', 'shape': (5, 7), }", "lacks"),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (5, 7), 'x': 1}",
                "unknown",
            ),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (5, 7)",
                "malformed",
            ),
        ] {
            let m = message(parse_events(&npy(dict, &data), "bad.npy"));
            assert!(m.contains("bad.npy") && m.contains(want), "{dict}: {m}");
        }
        let mut version = npy("{}", &[]);
        version[6] = 9;
        assert!(message(parse_events(&version, "v9")).contains("version 9.0"));
    }

    #[test]
    fn sizes_beyond_the_machine_are_host_memory_errors() {
        let name = || "the test's events".to_string();
        let e = reserve_vec::<StarEvent>(1 << 58, &name).unwrap_err();
        assert!(matches!(e, Error::HostMemory { .. }), "{e}");
        assert!(e.to_string().contains("the test's events needs"), "{e}");
        assert_eq!(reserve_vec::<StarEvent>(3, &name).unwrap().capacity(), 3);
    }

    #[test]
    fn missing_files_and_folders_are_input_errors_and_writes_replace_whole() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.bin");
        let m = message(read_events(&missing));
        assert!(m.contains("none.bin"), "{m}");
        let m = message(read_events(dir.path()));
        assert!(m.contains("folder"), "{m}");
        let events: Vec<StarEvent> = (0..3).map(event).collect();
        let psf = MoffatPsf::default();
        // A folder that does not exist, or a path that is a folder: input.
        let nowhere = dir.path().join("no").join("e.bin");
        for r in [
            write_events(&nowhere, &psf, &events),
            write_events_npy(&nowhere, &events),
            write_events(dir.path(), &psf, &events),
        ] {
            assert!(matches!(r, Err(Error::InvalidInput(_))), "{r:?}");
        }
        // A name the file system refuses (longer than NAME_MAX): the rename
        // fails, a machine's failure, and nothing is left behind.
        let long = dir.path().join("e".repeat(300));
        for r in [
            write_events(&long, &psf, &events),
            write_events_npy(&long, &events),
        ] {
            match r {
                Err(Error::Io { action, .. }) => {
                    assert!(action.contains("cannot rename"), "{action}")
                }
                other => panic!("expected Io, got {other:?}"),
            }
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // Both formats round-trip through the files.
        let bin = dir.path().join("e.bin");
        write_events(&bin, &psf, &events).unwrap();
        assert_eq!(read_events(&bin).unwrap().events, events);
        let npy = dir.path().join("e.npy");
        write_events_npy(&npy, &events).unwrap();
        assert_eq!(read_events(&npy).unwrap().events, events);
        // Non-regular files (a pipe, a device) are read to their end.
        #[cfg(target_os = "linux")]
        {
            let null = read_events(Path::new("/dev/null"));
            assert!(message(null).contains("truncated header: 0 bytes"));
        }
    }
}
