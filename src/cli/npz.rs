//! `.npz` output: a zip archive of named `.npy` arrays (stored, not
//! compressed), as `numpy.load` reads it. The `.npy` bytes are written here
//! (format 1.0, header padded so the data starts at a multiple of 64) so
//! that 0-d scalars and strings (`<U`) go in as numpy writes them too.
use super::Failure;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

/// One array's data, little-endian.
pub enum NpyData<'a> {
    F64(&'a [f64]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U32(&'a [u32]),
    U16(&'a [u16]),
    U8(&'a [u8]),
    I8(&'a [i8]),
    /// A 0-d unicode string (numpy `<U{n}`, UTF-32LE).
    Str(&'a str),
}

/// One named array: `name` becomes `name.npy` in the archive.
pub struct NpyArray<'a> {
    pub name: &'a str,
    pub shape: Vec<usize>,
    pub data: NpyData<'a>,
}

fn npy_bytes(a: &NpyArray<'_>) -> Vec<u8> {
    let (descr, mut body) = match &a.data {
        NpyData::F64(v) => (
            "<f8".to_string(),
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        NpyData::I32(v) => (
            "<i4".to_string(),
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        NpyData::I64(v) => (
            "<i8".to_string(),
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        NpyData::U32(v) => (
            "<u4".to_string(),
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        NpyData::U16(v) => (
            "<u2".to_string(),
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        NpyData::U8(v) => ("|u1".to_string(), v.to_vec()),
        NpyData::I8(v) => (
            "|i1".to_string(),
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        NpyData::Str(s) => {
            let chars: Vec<char> = s.chars().collect();
            (
                format!("<U{}", chars.len().max(1)),
                chars
                    .iter()
                    .flat_map(|&c| (c as u32).to_le_bytes())
                    .collect::<Vec<u8>>(),
            )
        }
    };
    if let NpyData::Str(s) = &a.data {
        if s.is_empty() {
            body = vec![0; 4];
        }
    }
    let shape = match a.shape.as_slice() {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // magic (6) + version (2) + header length (2) + header + '\n' ≡ 0 mod 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + body.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&body);
    out
}

/// Writes `arrays` to `target` as one `.npz`: first to a temporary file
/// beside it, renamed into place only when complete (an error leaves
/// `target` as it was).
pub fn write_npz(target: &Path, arrays: &[NpyArray<'_>]) -> Result<(), Failure> {
    if target.is_dir() {
        return Err(Failure::bad_input(format!(
            "--out {} is a directory",
            target.display()
        )));
    }
    // The same temporary name beside the target as the .npy outputs use.
    let temp = super::npy::temp_path(target)?;
    let fail = |e: String| {
        let _ = fs::remove_file(&temp);
        Failure::environment(format!("cannot write {}: {e}", target.display()))
    };
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .map_err(|e| {
            Failure::environment(format!(
                "cannot create {} (for {}): {e}",
                temp.display(),
                target.display()
            ))
        })?;
    let mut zip = zip::ZipWriter::new(file);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(true);
    for a in arrays {
        zip.start_file(format!("{}.npy", a.name), options)
            .map_err(|e| fail(e.to_string()))?;
        zip.write_all(&npy_bytes(a))
            .map_err(|e| fail(e.to_string()))?;
    }
    let file = zip.finish().map_err(|e| fail(e.to_string()))?;
    file.sync_all().map_err(|e| fail(e.to_string()))?;
    fs::rename(&temp, target).map_err(|e| fail(e.to_string()))
}
