//! `.npz` output: a zip archive of named `.npy` arrays (stored, not
//! compressed), as `numpy.load` reads it. The `.npy` bytes are written here
//! (format 1.0, header padded so the data starts at a multiple of 64) so
//! that 0-d scalars and strings (`<U`) go in as numpy writes them too.
use std::io::Write;

/// One array's data, little-endian.
pub enum NpyData<'a> {
    F64(&'a [f64]),
    F32(&'a [f32]),
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

/// numpy's `descr` of `data`.
fn descr(data: &NpyData<'_>) -> String {
    match data {
        NpyData::F64(_) => "<f8".to_string(),
        NpyData::F32(_) => "<f4".to_string(),
        NpyData::I32(_) => "<i4".to_string(),
        NpyData::I64(_) => "<i8".to_string(),
        NpyData::U32(_) => "<u4".to_string(),
        NpyData::U16(_) => "<u2".to_string(),
        NpyData::U8(_) => "|u1".to_string(),
        NpyData::I8(_) => "|i1".to_string(),
        NpyData::Str(s) => format!("<U{}", s.chars().count().max(1)),
    }
}

/// Writes one array as a `.npy` (format 1.0, little-endian, C order) to
/// `w`, streaming the values (no copy of the array is made).
pub fn write_npy(w: &mut dyn Write, shape: &[usize], data: &NpyData<'_>) -> std::io::Result<()> {
    w.write_all(&hipkern::npy::header(&descr(data), shape))?;
    // In blocks, so a large array is not copied whole.
    fn put<T: Copy, const N: usize>(
        w: &mut dyn Write,
        v: &[T],
        bytes: impl Fn(T) -> [u8; N],
    ) -> std::io::Result<()> {
        let mut block = Vec::with_capacity(N * 8192);
        for chunk in v.chunks(8192) {
            block.clear();
            block.extend(chunk.iter().flat_map(|&x| bytes(x)));
            w.write_all(&block)?;
        }
        Ok(())
    }
    match data {
        NpyData::F64(v) => put(w, v, f64::to_le_bytes),
        NpyData::F32(v) => put(w, v, f32::to_le_bytes),
        NpyData::I32(v) => put(w, v, i32::to_le_bytes),
        NpyData::I64(v) => put(w, v, i64::to_le_bytes),
        NpyData::U32(v) => put(w, v, u32::to_le_bytes),
        NpyData::U16(v) => put(w, v, u16::to_le_bytes),
        NpyData::U8(v) => w.write_all(v),
        NpyData::I8(v) => put(w, v, i8::to_le_bytes),
        NpyData::Str("") => w.write_all(&[0; 4]),
        NpyData::Str(s) => {
            let chars: Vec<u32> = s.chars().map(|c| c as u32).collect();
            put(w, &chars, u32::to_le_bytes)
        }
    }
}

/// Writes `arrays` as one `.npz` archive to `w` (an output set's staged
/// file: see `output.rs`).
pub fn write_npz<W: Write + std::io::Seek>(w: W, arrays: &[NpyArray<'_>]) -> std::io::Result<()> {
    let mut zip = zip::ZipWriter::new(w);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .large_file(true);
    for a in arrays {
        zip.start_file(format!("{}.npy", a.name), options)?;
        write_npy(&mut zip, &a.shape, &a.data)?;
    }
    zip.finish()?.flush()
}
