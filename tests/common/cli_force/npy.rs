//! `.npy` files written and read here, independent of the program's own
//! reader and writer: dtypes, byte orders, C and Fortran order.
use std::fs;
use std::path::Path;

// ---- .npy files ---------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    I32,
    I64,
    F32,
    F64,
}

pub use Dtype::{F32, F64, I32, I64};

impl Dtype {
    /// numpy's type code without the byte order.
    pub fn code(self) -> &'static str {
        match self {
            I32 => "i4",
            I64 => "i8",
            F32 => "f4",
            F64 => "f8",
        }
    }

    pub fn descr(self, big_endian: bool) -> String {
        format!("{}{}", if big_endian { '>' } else { '<' }, self.code())
    }
}

/// Byte order and element order of a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub big_endian: bool,
    /// Column-major element order (`fortran_order: True`).
    pub fortran: bool,
}

pub const BIG_ENDIAN: Layout = Layout {
    big_endian: true,
    fortran: false,
};
pub const FORTRAN: Layout = Layout {
    big_endian: false,
    fortran: true,
};
pub const BOTH: Layout = Layout {
    big_endian: true,
    fortran: true,
};

/// Values to write, converted to the file's dtype.
#[derive(Clone, Copy)]
pub enum Data<'a> {
    Int(&'a [i64]),
    Float(&'a [f64]),
}

impl Data<'_> {
    pub fn len(&self) -> usize {
        match self {
            Data::Int(v) => v.len(),
            Data::Float(v) => v.len(),
        }
    }
    pub fn int(&self, i: usize) -> i64 {
        match self {
            Data::Int(v) => v[i],
            Data::Float(v) => v[i] as i64,
        }
    }
    pub fn float(&self, i: usize) -> f64 {
        match self {
            Data::Int(v) => v[i] as f64,
            Data::Float(v) => v[i],
        }
    }
}

/// A version 1.0 header: the dict, padded with spaces and ended by a newline
/// so that the data starts at a multiple of 64 bytes.
pub fn npy_header(descr: &str, fortran: bool, shape: &[usize]) -> Vec<u8> {
    let shape = match shape {
        [n] => format!("({n},)"),
        dims => {
            let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            format!("({})", dims.join(", "))
        }
    };
    let fortran = if fortran { "True" } else { "False" };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}");
    // magic (6) + version (2) + header length (2) + dict + newline
    let unpadded = 10 + dict.len() + 1;
    let padding = (64 - unpadded % 64) % 64;
    let header_len = u16::try_from(dict.len() + padding + 1).expect("header fits version 1.0");
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&header_len.to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(out.len() + padding, b' ');
    out.push(b'\n');
    assert_eq!(out.len() % 64, 0);
    out
}

/// A whole `.npy` file holding `data` (row-major) as `dtype` in `layout`.
pub fn npy_bytes(dtype: Dtype, shape: &[usize], data: Data<'_>, layout: Layout) -> Vec<u8> {
    assert_eq!(
        shape.iter().product::<usize>(),
        data.len(),
        "shape {shape:?}"
    );
    let mut out = npy_header(&dtype.descr(layout.big_endian), layout.fortran, shape);
    let file_order: Vec<usize> = match (layout.fortran, shape) {
        (true, &[rows, cols]) => (0..cols)
            .flat_map(|j| (0..rows).map(move |i| i * cols + j))
            .collect(),
        (false, _) | (true, &[_]) => (0..data.len()).collect(),
        (true, _) => panic!("column-major order is written for 1-D and 2-D arrays only"),
    };
    macro_rules! put {
        ($x:expr) => {
            if layout.big_endian {
                out.extend_from_slice(&$x.to_be_bytes())
            } else {
                out.extend_from_slice(&$x.to_le_bytes())
            }
        };
    }
    for i in file_order {
        match dtype {
            I32 => put!(i32::try_from(data.int(i)).expect("value fits int32")),
            I64 => put!(data.int(i)),
            F32 => put!(data.float(i) as f32),
            F64 => put!(data.float(i)),
        }
    }
    out
}

/// A float output as read back.
pub struct NpyArray {
    pub descr: String,
    pub shape: Vec<usize>,
    /// The values, widened to float64.
    pub values: Vec<f64>,
    /// The values as stored, when the file is float32.
    pub f32_values: Option<Vec<f32>>,
}

/// The text after `'key':` in a header dict.
pub fn dict_entry<'a>(header: &'a str, key: &str, what: &str) -> &'a str {
    let pattern = format!("'{key}':");
    let at = header
        .find(&pattern)
        .unwrap_or_else(|| panic!("{what}: header {header:?} has no {key}"));
    header[at + pattern.len()..].trim_start()
}

/// Parses a little-endian float `.npy` file in C order (what the program
/// writes), checking the magic, the header's length and alignment and that
/// the data is exactly what the header promises.
pub fn parse_npy(bytes: &[u8], what: &str) -> NpyArray {
    assert!(
        bytes.len() >= 10 && &bytes[..6] == b"\x93NUMPY",
        "{what}: no .npy magic"
    );
    let (header_len, start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 => (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        ),
        v => panic!("{what}: .npy version {v}"),
    };
    let data_start = start + header_len;
    assert!(
        data_start <= bytes.len(),
        "{what}: header runs past the end"
    );
    assert_eq!(data_start % 64, 0, "{what}: data not 64-byte aligned");
    let header = std::str::from_utf8(&bytes[start..data_start]).expect("ASCII header");
    assert!(header.ends_with('\n'), "{what}: header {header:?}");

    let descr_text = dict_entry(header, "descr", what);
    let descr = descr_text
        .strip_prefix('\'')
        .and_then(|s| s.split('\'').next())
        .unwrap_or_else(|| panic!("{what}: descr in {header:?}"))
        .to_string();
    let fortran_text = dict_entry(header, "fortran_order", what);
    assert!(
        fortran_text.starts_with("False"),
        "{what}: fortran_order in {header:?}"
    );
    let shape_text = dict_entry(header, "shape", what);
    let shape: Vec<usize> = shape_text
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .unwrap_or_else(|| panic!("{what}: shape in {header:?}"))
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().expect("shape entry"))
        .collect();

    let data = &bytes[data_start..];
    let n: usize = shape.iter().product();
    let (values, f32_values) = match descr.as_str() {
        "<f8" => {
            assert_eq!(data.len(), 8 * n, "{what}: data length");
            let v = data
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect();
            (v, None)
        }
        "<f4" => {
            assert_eq!(data.len(), 4 * n, "{what}: data length");
            let v: Vec<f32> = data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            (v.iter().map(|&x| f64::from(x)).collect(), Some(v))
        }
        other => panic!("{what}: output dtype {other}"),
    };
    NpyArray {
        descr,
        shape,
        values,
        f32_values,
    }
}

/// Reads an output and checks its dtype and shape.
pub fn read_output(path: &Path, descr: &str, shape: &[usize]) -> NpyArray {
    let what = path.display().to_string();
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{what}: {e}"));
    let array = parse_npy(&bytes, &what);
    assert_eq!(array.descr, descr, "{what}: dtype");
    assert_eq!(array.shape, shape, "{what}: shape");
    array
}
