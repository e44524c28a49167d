//! `.npy` input and output for the CLI.
//!
//! Inputs are read with their dtype taken from the file's header, so one
//! flag takes int32 or int64 (indices) and float32 or float64 (edge data).
//! Every problem is a [`Failure`] that names the array and its file.
//! Outputs go through an output set (`output.rs`), written by
//! `npz::write_npy`.
use super::Failure;
use ndarray::ArrayD;
use ndarray_npy::npy::header::Header;
use ndarray_npy::{ReadNpyExt, ReadableElement};
use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

/// The element types the CLI reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    I32,
    I64,
    F32,
    F64,
}

impl Dtype {
    fn from_descriptor(descr: &str) -> Option<Dtype> {
        // numpy writes the byte order first ('<' little, '>' big); the
        // reader converts either.
        match descr {
            "<i4" | ">i4" => Some(Dtype::I32),
            "<i8" | ">i8" => Some(Dtype::I64),
            "<f4" | ">f4" => Some(Dtype::F32),
            "<f8" | ">f8" => Some(Dtype::F64),
            _ => None,
        }
    }

    fn item_size(self) -> usize {
        match self {
            Dtype::I32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::F64 => 8,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dtype::I32 => "int32",
            Dtype::I64 => "int64",
            Dtype::F32 => "float32",
            Dtype::F64 => "float64",
        })
    }
}

/// A shape as numpy prints it: `(5,)`, `(5, 3)`.
pub struct Shape<'a>(pub &'a [usize]);

impl fmt::Display for Shape<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [n] => write!(f, "({n},)"),
            dims => {
                let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
                write!(f, "({})", dims.join(", "))
            }
        }
    }
}

/// One input file, read whole, its header checked against its size.
struct NpyInput {
    /// What the array is called in messages (`src`, `g`, ...).
    name: &'static str,
    path: PathBuf,
    bytes: Vec<u8>,
    dtype: Dtype,
    shape: Vec<usize>,
}

impl NpyInput {
    fn open(name: &'static str, path: &Path) -> Result<NpyInput, Failure> {
        let whose = || format!("{name} ({})", path.display());
        let bytes = super::read_input(&whose(), path)?;
        let mut rest = bytes.as_slice();
        let header = Header::from_reader(&mut rest)
            .map_err(|e| Failure::bad_input(format!("{}: not a .npy file: {e}", whose())))?;
        let descr = header.type_descriptor.as_string().map(String::as_str);
        let Some(dtype) = descr.and_then(Dtype::from_descriptor) else {
            return Err(Failure::bad_input(format!(
                "{}: dtype {} is not supported (int32, int64, float32 or float64)",
                whose(),
                header.type_descriptor
            )));
        };
        // Checked before the reader allocates `shape` elements, so a header
        // that promises more than the file holds is an error, not an abort.
        let want_bytes = header
            .shape
            .iter()
            .try_fold(dtype.item_size(), |n, &d| n.checked_mul(d));
        if want_bytes != Some(rest.len()) {
            return Err(Failure::bad_input(format!(
                "{}: the header says {dtype} {} but the file holds {} bytes of data",
                whose(),
                Shape(&header.shape),
                rest.len()
            )));
        }
        Ok(NpyInput {
            name,
            path: path.to_path_buf(),
            bytes,
            dtype,
            shape: header.shape,
        })
    }

    fn whose(&self) -> String {
        format!("{} ({})", self.name, self.path.display())
    }

    /// The elements in row-major (C) order, whatever the file's layout.
    fn values<T: ReadableElement + Copy>(&self) -> Result<Vec<T>, Failure> {
        let array = ArrayD::<T>::read_npy(self.bytes.as_slice())
            .map_err(|e| Failure::bad_input(format!("{}: {e}", self.whose())))?;
        Ok(if array.is_standard_layout() {
            array.into_raw_vec_and_offset().0
        } else {
            array.iter().copied().collect()
        })
    }

    fn require_ndim(&self, ndim: usize, what: &str) -> Result<(), Failure> {
        if self.shape.len() != ndim {
            return Err(Failure::bad_input(format!(
                "{} has shape {}; {what}",
                self.whose(),
                Shape(&self.shape)
            )));
        }
        Ok(())
    }
}

/// An index array as it came: int32 or int64.
pub enum Indices {
    I32(Vec<i32>),
    I64(Vec<i64>),
}

impl Indices {
    pub fn len(&self) -> usize {
        match self {
            Indices::I32(v) => v.len(),
            Indices::I64(v) => v.len(),
        }
    }

    /// Widened to int64 (borrowed when already int64).
    pub fn as_i64(&self) -> Cow<'_, [i64]> {
        match self {
            Indices::I32(v) => Cow::Owned(v.iter().map(|&i| i64::from(i)).collect()),
            Indices::I64(v) => Cow::Borrowed(v),
        }
    }
}

/// Reads a 1-D int32 or int64 array.
pub fn read_indices(name: &'static str, path: &Path) -> Result<Indices, Failure> {
    let input = NpyInput::open(name, path)?;
    match input.dtype {
        Dtype::I32 | Dtype::I64 => {}
        other => {
            return Err(Failure::bad_input(format!(
                "{} has dtype {other}; an index array must be int32 or int64",
                input.whose()
            )))
        }
    }
    input.require_ndim(1, "an index array must be 1-D")?;
    Ok(match input.dtype {
        Dtype::I32 => Indices::I32(input.values()?),
        _ => Indices::I64(input.values()?),
    })
}

/// Floating-point values in one precision.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl From<Vec<f32>> for Values {
    fn from(v: Vec<f32>) -> Values {
        Values::F32(v)
    }
}

impl From<Vec<f64>> for Values {
    fn from(v: Vec<f64>) -> Values {
        Values::F64(v)
    }
}

impl Values {
    pub fn dtype(&self) -> Dtype {
        match self {
            Values::F32(_) => Dtype::F32,
            Values::F64(_) => Dtype::F64,
        }
    }

    /// Widened to float64 (borrowed when already float64).
    pub fn as_f64(&self) -> Cow<'_, [f64]> {
        match self {
            Values::F32(v) => Cow::Owned(v.iter().map(|&x| f64::from(x)).collect()),
            Values::F64(v) => Cow::Borrowed(v),
        }
    }

    /// In `dtype` (float32 or float64): float64 to float32 rounds each value
    /// once, to nearest; float32 to float64 is exact.
    pub fn into_dtype(self, dtype: Dtype) -> Values {
        match (self, dtype) {
            (Values::F64(v), Dtype::F32) => Values::F32(v.iter().map(|&x| x as f32).collect()),
            (Values::F32(v), Dtype::F64) => Values::F64(v.iter().map(|&x| f64::from(x)).collect()),
            (same, _) => same,
        }
    }
}

/// A 2-D float array: its row count and the values in row-major order.
pub struct Rows {
    pub n_rows: usize,
    pub values: Values,
}

/// Reads an n×`width` float32 or float64 array.
pub fn read_rows(name: &'static str, path: &Path, width: usize) -> Result<Rows, Failure> {
    let input = NpyInput::open(name, path)?;
    match input.dtype {
        Dtype::F32 | Dtype::F64 => {}
        other => {
            return Err(Failure::bad_input(format!(
                "{} has dtype {other}; it must be float32 or float64",
                input.whose()
            )))
        }
    }
    let want = format!("it must be (E, {width})");
    input.require_ndim(2, &want)?;
    if input.shape[1] != width {
        return Err(Failure::bad_input(format!(
            "{} has shape {}; {want}",
            input.whose(),
            Shape(&input.shape)
        )));
    }
    Ok(Rows {
        n_rows: input.shape[0],
        values: match input.dtype {
            Dtype::F32 => Values::F32(input.values()?),
            _ => Values::F64(input.values()?),
        },
    })
}

impl Values {
    /// The values as a `.npy` writes them.
    pub fn as_npy(&self) -> super::npz::NpyData<'_> {
        match self {
            Values::F32(v) => super::npz::NpyData::F32(v),
            Values::F64(v) => super::npz::NpyData::F64(v),
        }
    }
}
