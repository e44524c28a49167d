//! The `.npy` header (format 1.0) that the library's writers, and the
//! program's `.npy`/`.npz` outputs, put before their little-endian data:
//! written here rather than through an array crate so that the library
//! needs none.

/// The magic string every `.npy` file starts with.
pub const MAGIC: &[u8] = b"\x93NUMPY";

/// The header of a version 1.0 `.npy` file of a little-endian C-order
/// array (`descr` as numpy spells it, e.g. `<f8`), padded as numpy pads it
/// so that the data starts at a multiple of 64 bytes.
pub fn header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let shape = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        dims => {
            let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            format!("({})", dims.join(", "))
        }
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // magic (6) + version (2) + header length (2) + dict + '\n'.
    let unpadded = 10 + dict.len() + 1;
    let len = dict.len() + (64 - unpadded % 64) % 64 + 1;
    let mut out = Vec::with_capacity(10 + len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(len as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(10 + len - 1, b' ');
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_padded_to_64_bytes_as_numpy_writes_them() {
        for shape in [&[][..], &[5], &[3, 7], &[480, 640, 3]] {
            let h = header("<f8", shape);
            assert_eq!(h.len() % 64, 0, "{shape:?}");
            assert!(h.starts_with(MAGIC));
            assert_eq!(*h.last().unwrap(), b'\n');
            let len = u16::from_le_bytes([h[8], h[9]]) as usize;
            assert_eq!(10 + len, h.len());
        }
        // The exact bytes numpy 2.x writes for np.zeros((3, 7)).
        let h = header("<f8", &[3, 7]);
        let text = std::str::from_utf8(&h[10..]).unwrap();
        assert_eq!(
            text.trim_end(),
            "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 7), }"
        );
        assert_eq!(h.len(), 128);
        let one = header("<u4", &[4]);
        let text = std::str::from_utf8(&one[10..]).unwrap();
        assert!(
            text.contains("'descr': '<u4'") && text.contains("'shape': (4,)"),
            "{text}"
        );
    }
}
