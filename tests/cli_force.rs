//! `hipkern force` run as a program on `.npy` files (`docs/design/force.md`).
//!
//! What the checks rest on is written here, independent of the library: a
//! SplitMix64 generator, a `.npy` writer and reader, and the float64
//! reference (a direct loop over edges, with compensated sums so that it is
//! the exact result to about one ulp). The program run is `HIPKERN_BIN` when
//! set (scripts/device-tests.sh points it at the device build), else the one
//! cargo built with these tests.
//!
//! Always run: `--backend cpu` and `--backend reference` against the
//! reference, the reader on other byte orders and layouts, and every bad
//! input (exit status 2, one line on stderr, nothing created or changed).
//! GPU tests (`gpu_*`, ignored on the cpu platform): the same for `--backend device` and
//! `device-atomic`, a large case with a hub atom, and run-to-run
//! reproducibility.
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

// ---- random numbers -----------------------------------------------------

/// SplitMix64 (Steele, Lea and Flood, 2014).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)`.
    fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in `[-1, 1)`.
    fn pm1(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
}

// ---- .npy files ---------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dtype {
    I32,
    I64,
    F32,
    F64,
}

use Dtype::{F32, F64, I32, I64};

impl Dtype {
    /// numpy's type code without the byte order.
    fn code(self) -> &'static str {
        match self {
            I32 => "i4",
            I64 => "i8",
            F32 => "f4",
            F64 => "f8",
        }
    }

    fn descr(self, big_endian: bool) -> String {
        format!("{}{}", if big_endian { '>' } else { '<' }, self.code())
    }
}

/// Byte order and element order of a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Layout {
    big_endian: bool,
    /// Column-major element order (`fortran_order: True`).
    fortran: bool,
}

const BIG_ENDIAN: Layout = Layout {
    big_endian: true,
    fortran: false,
};
const FORTRAN: Layout = Layout {
    big_endian: false,
    fortran: true,
};
const BOTH: Layout = Layout {
    big_endian: true,
    fortran: true,
};

/// Values to write, converted to the file's dtype.
#[derive(Clone, Copy)]
enum Data<'a> {
    Int(&'a [i64]),
    Float(&'a [f64]),
}

impl Data<'_> {
    fn len(&self) -> usize {
        match self {
            Data::Int(v) => v.len(),
            Data::Float(v) => v.len(),
        }
    }
    fn int(&self, i: usize) -> i64 {
        match self {
            Data::Int(v) => v[i],
            Data::Float(v) => v[i] as i64,
        }
    }
    fn float(&self, i: usize) -> f64 {
        match self {
            Data::Int(v) => v[i] as f64,
            Data::Float(v) => v[i],
        }
    }
}

/// A version 1.0 header: the dict, padded with spaces and ended by a newline
/// so that the data starts at a multiple of 64 bytes.
fn npy_header(descr: &str, fortran: bool, shape: &[usize]) -> Vec<u8> {
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
fn npy_bytes(dtype: Dtype, shape: &[usize], data: Data<'_>, layout: Layout) -> Vec<u8> {
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
struct NpyArray {
    descr: String,
    shape: Vec<usize>,
    /// The values, widened to float64.
    values: Vec<f64>,
    /// The values as stored, when the file is float32.
    f32_values: Option<Vec<f32>>,
}

/// The text after `'key':` in a header dict.
fn dict_entry<'a>(header: &'a str, key: &str, what: &str) -> &'a str {
    let pattern = format!("'{key}':");
    let at = header
        .find(&pattern)
        .unwrap_or_else(|| panic!("{what}: header {header:?} has no {key}"));
    header[at + pattern.len()..].trim_start()
}

/// Parses a little-endian float `.npy` file in C order (what the program
/// writes), checking the magic, the header's length and alignment and that
/// the data is exactly what the header promises.
fn parse_npy(bytes: &[u8], what: &str) -> NpyArray {
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
fn read_output(path: &Path, descr: &str, shape: &[usize]) -> NpyArray {
    let what = path.display().to_string();
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("{what}: {e}"));
    let array = parse_npy(&bytes, &what);
    assert_eq!(array.descr, descr, "{what}: dtype");
    assert_eq!(array.shape, shape, "{what}: shape");
    array
}

// ---- edge sets and the reference ----------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Split {
    Half,
    Src,
}

use Split::{Half, Src};

impl Split {
    fn name(self) -> &'static str {
        match self {
            Half => "half",
            Src => "src",
        }
    }
}

#[derive(Clone, Debug)]
struct Ghosts {
    mapping: Vec<i64>,
    n_local: usize,
}

/// One edge set. The values are exactly representable in `precision`, so the
/// float64 reference of these values is the reference for the file's values.
#[derive(Clone, Debug)]
struct Case {
    n_ext: usize,
    src: Vec<i64>,
    dst: Vec<i64>,
    g: Vec<f64>,
    edge_vec: Vec<f64>,
    precision: Dtype,
    ghosts: Option<Ghosts>,
}

impl Case {
    fn n_edges(&self) -> usize {
        self.src.len()
    }
    fn n_rows(&self) -> usize {
        self.ghosts.as_ref().map_or(self.n_ext, |g| g.n_local)
    }
}

/// The shape of a random edge set: `hub_edges` edges touch one hub atom
/// (as src or dst), `self_edges` have src == dst, the last `isolated` atoms
/// have no edge at all; the rest are random pairs.
#[derive(Clone, Copy, Debug)]
struct Graph {
    n_ext: usize,
    n_edges: usize,
    hub_edges: usize,
    self_edges: usize,
    isolated: usize,
}

fn random_case(seed: u64, graph: Graph, precision: Dtype) -> Case {
    let mut rng = SplitMix64(seed);
    let active = graph.n_ext - graph.isolated;
    assert!(graph.n_edges == 0 || active > 0);
    assert!(graph.hub_edges + graph.self_edges <= graph.n_edges);
    let hub = if active > 0 { rng.below(active) } else { 0 };
    let mut pairs: Vec<(usize, usize)> = (0..graph.n_edges)
        .map(|e| {
            let other = rng.below(active);
            if e < graph.hub_edges {
                if rng.below(2) == 0 {
                    (hub, other)
                } else {
                    (other, hub)
                }
            } else if e < graph.hub_edges + graph.self_edges {
                (other, other)
            } else {
                (rng.below(active), other)
            }
        })
        .collect();
    // Fisher–Yates, so that hub and self edges are spread over the list.
    for i in (1..pairs.len()).rev() {
        pairs.swap(i, rng.below(i + 1));
    }
    let round = |x: f64| match precision {
        F32 => f64::from(x as f32),
        _ => x,
    };
    let n = 3 * graph.n_edges;
    // Gradients over several binades, edge vectors in [-4, 4).
    let g = (0..n)
        .map(|_| round(rng.pm1() * 2f64.powi(rng.below(9) as i32 - 4)))
        .collect();
    let edge_vec = (0..n).map(|_| round(4.0 * rng.pm1())).collect();
    Case {
        n_ext: graph.n_ext,
        src: pairs.iter().map(|p| p.0 as i64).collect(),
        dst: pairs.iter().map(|p| p.1 as i64).collect(),
        g,
        edge_vec,
        precision,
        ghosts: None,
    }
}

/// Folds atoms `n_local..` into random owners among `0..n_local` (local atoms own themselves).
fn with_ghosts(mut case: Case, n_local: usize, seed: u64) -> Case {
    assert!(0 < n_local && n_local <= case.n_ext);
    let mut rng = SplitMix64(seed);
    let mapping = (0..case.n_ext)
        .map(|k| {
            if k < n_local {
                k as i64
            } else {
                rng.below(n_local) as i64
            }
        })
        .collect();
    case.ghosts = Some(Ghosts { mapping, n_local });
    case
}

/// Float64 sums with Neumaier's compensation.
struct Sums {
    sum: Vec<f64>,
    compensation: Vec<f64>,
}

impl Sums {
    fn new(n: usize) -> Sums {
        Sums {
            sum: vec![0.0; n],
            compensation: vec![0.0; n],
        }
    }
    fn add(&mut self, i: usize, x: f64) {
        let s = self.sum[i];
        let t = s + x;
        self.compensation[i] += if s.abs() >= x.abs() {
            (s - t) + x
        } else {
            (x - t) + s
        };
        self.sum[i] = t;
    }
    fn finish(self) -> Vec<f64> {
        self.sum
            .iter()
            .zip(&self.compensation)
            .map(|(s, c)| s + c)
            .collect()
    }
}

/// Force (rows×3) and per-atom virial (rows×9), row-major.
struct Expected {
    force: Vec<f64>,
    virial: Vec<f64>,
}

/// The definition, edge by edge: g_e to dst, −g_e to src, the virial
/// −g_e ⊗ edge_vec_e split half/half or all to src, endpoints folded into
/// their owners.
fn reference(case: &Case, split: Split) -> Expected {
    let rows = case.n_rows();
    let owner = |k: i64| -> usize {
        let k = usize::try_from(k).expect("index >= 0");
        match &case.ghosts {
            Some(gh) => usize::try_from(gh.mapping[k]).expect("owner >= 0"),
            None => k,
        }
    };
    let mut force = Sums::new(3 * rows);
    let mut virial = Sums::new(9 * rows);
    for e in 0..case.n_edges() {
        let (s, d) = (owner(case.src[e]), owner(case.dst[e]));
        let g = &case.g[3 * e..3 * e + 3];
        let r = &case.edge_vec[3 * e..3 * e + 3];
        for (a, &ga) in g.iter().enumerate() {
            force.add(3 * d + a, ga);
            force.add(3 * s + a, -ga);
            for (b, &rb) in r.iter().enumerate() {
                let v = -ga * rb;
                match split {
                    Half => {
                        virial.add(9 * s + 3 * a + b, 0.5 * v);
                        virial.add(9 * d + 3 * a + b, 0.5 * v);
                    }
                    Src => virial.add(9 * s + 3 * a + b, v),
                }
            }
        }
    }
    Expected {
        force: force.finish(),
        virial: virial.finish(),
    }
}

/// How output rows are grouped into frames.
#[derive(Clone, Debug)]
enum Frames {
    Size(usize),
    Ids {
        ids: Vec<i64>,
        n_frames: usize,
        dtype: Dtype,
    },
}

impl Frames {
    /// The frame of each of `rows` rows, and the number of frames.
    fn frame_of(&self, rows: usize) -> (Vec<usize>, usize) {
        match self {
            Frames::Size(s) => {
                assert_eq!(rows % s, 0, "the reference takes whole frames");
                ((0..rows).map(|k| k / s).collect(), rows / s)
            }
            Frames::Ids { ids, n_frames, .. } => {
                assert_eq!(ids.len(), rows);
                (ids.iter().map(|&f| f as usize).collect(), *n_frames)
            }
        }
    }
}

/// Per-frame virial (K×9, the sum of the frame's rows) and its Voigt form
/// (K×6: xx, yy, zz, xy = W[0][1], xz = W[0][2], yz = W[1][2]).
fn frame_reference(virial: &[f64], frame_of: &[usize], n_frames: usize) -> (Vec<f64>, Vec<f64>) {
    let mut sums = Sums::new(9 * n_frames);
    for (k, &f) in frame_of.iter().enumerate() {
        for c in 0..9 {
            sums.add(9 * f + c, virial[9 * k + c]);
        }
    }
    let full = sums.finish();
    let voigt = full
        .chunks_exact(9)
        .flat_map(|w| [w[0], w[4], w[8], w[1], w[2], w[5]])
        .collect();
    (full, voigt)
}

// ---- comparisons --------------------------------------------------------

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0f64, |m, x| m.max(x.abs()))
}

/// max |got − want| / max |want| over the whole array (max |want| floored at
/// the smallest normal float64, so an all-zero reference asks for zeros).
/// NaN anywhere in `got` counts as infinitely far.
fn relative_error(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = max_abs(want).max(f64::MIN_POSITIVE);
    let worst = got
        .iter()
        .zip(want)
        .map(|(a, b)| {
            let d = (a - b).abs();
            if d.is_nan() {
                f64::INFINITY
            } else {
                d
            }
        })
        .fold(0.0f64, f64::max);
    worst / scale
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    let err = relative_error(got, want);
    assert!(
        err <= tol,
        "{what}: relative max-norm error {err:e} > {tol:e}"
    );
}

/// Distance in float32 steps (+0 and −0 are one value).
fn ulps(a: f32, b: f32) -> u64 {
    let key = |x: f32| -> i64 {
        let bits = x.to_bits();
        if bits >> 31 == 1 {
            -i64::from(bits & 0x7FFF_FFFF)
        } else {
            i64::from(bits)
        }
    };
    key(a).abs_diff(key(b))
}

/// The float32 step above |x|.
fn ulp(x: f32) -> f32 {
    let x = x.abs();
    f32::from_bits(x.to_bits() + 1) - x
}

/// Each float32 value is the float64 reference rounded once, to within one
/// ulp; where the array's float64 rounding error (`tol` × max |want|) is
/// itself more than an ulp of the value (cancellation), within that error
/// plus one ulp.
fn assert_rounded_once(what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    let scale = max_abs(want);
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        let rounded = b as f32;
        let ok = ulps(a, rounded) <= 1
            || (f64::from(a) - b).abs() <= tol * scale + f64::from(ulp(rounded));
        assert!(
            ok,
            "{what}[{i}] = {a:e}, but the reference {b:e} rounds to {rounded:e}"
        );
    }
}

/// The relative tolerance of a backend's output, as float64.
fn tolerance(backend: &str, precision: Dtype) -> f64 {
    match (backend, precision) {
        // Atomic sums in the input precision, in any order.
        ("device-atomic", F32) => 1e-4,
        ("device-atomic", _) => 1e-12,
        // Float64 sums of the input values, in another order than the reference's.
        _ => 1e-13,
    }
}

// ---- running the program ------------------------------------------------

fn hipkern() -> PathBuf {
    std::env::var_os("HIPKERN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_hipkern")))
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Outcome {
    fn assert_success(&self, what: &str) {
        assert_eq!(
            self.code,
            Some(0),
            "{what}: exit status; stderr: {}",
            self.stderr
        );
        assert!(self.stderr.is_empty(), "{what}: stderr {:?}", self.stderr);
        assert_eq!(
            self.stdout.lines().count(),
            1,
            "{what}: stdout {:?}",
            self.stdout
        );
        assert!(
            self.stdout.starts_with("hipkern force: backend "),
            "{what}: stdout {:?}",
            self.stdout
        );
    }

    /// Exit status `code`, nothing on stdout, and on stderr exactly one line
    /// `hipkern force: error: ...` that contains each of `needles`.
    fn assert_failure(&self, what: &str, code: i32, needles: &[&str]) {
        assert_eq!(
            self.code,
            Some(code),
            "{what}: exit status; stderr: {:?}",
            self.stderr
        );
        assert!(self.stdout.is_empty(), "{what}: stdout {:?}", self.stdout);
        let one_line = self
            .stderr
            .strip_suffix('\n')
            .unwrap_or_else(|| panic!("{what}: stderr does not end a line: {:?}", self.stderr));
        assert!(
            !one_line.contains(['\n', '\r']),
            "{what}: stderr is not one line: {:?}",
            self.stderr
        );
        assert!(
            one_line.starts_with("hipkern force: error: "),
            "{what}: stderr {one_line:?}"
        );
        for needle in needles {
            assert!(
                one_line.contains(needle),
                "{what}: the error should mention {needle:?}: {one_line:?}"
            );
        }
    }
}

/// How the input files of a case are written.
#[derive(Clone, Copy, Debug)]
struct Format {
    src: Dtype,
    dst: Dtype,
    mapping: Dtype,
    index_layout: Layout,
    g_layout: Layout,
    edge_vec_layout: Layout,
}

impl Format {
    /// Every index array in `dtype`, every file little-endian in C order.
    fn indices(dtype: Dtype) -> Format {
        Format {
            src: dtype,
            dst: dtype,
            mapping: dtype,
            index_layout: Layout::default(),
            g_layout: Layout::default(),
            edge_vec_layout: Layout::default(),
        }
    }
}

/// A temporary folder (inputs in `in/`, outputs in `out/`) and the flags of
/// one `hipkern force` command; `set` replaces a flag given before.
struct Setup {
    dir: tempfile::TempDir,
    flags: Vec<(String, OsString)>,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().expect("temporary folder");
        fs::create_dir(dir.path().join("in")).unwrap();
        fs::create_dir(dir.path().join("out")).unwrap();
        Setup {
            dir,
            flags: Vec::new(),
        }
    }

    /// The case's inputs written in `format`, with the flags naming them and
    /// `out/force.npy`, `out/virial.npy` as outputs.
    fn for_case(case: &Case, format: Format) -> Setup {
        let mut setup = Setup::new();
        let e = case.n_edges();
        let src = setup.write_input(
            "src.npy",
            &npy_bytes(format.src, &[e], Data::Int(&case.src), format.index_layout),
        );
        let dst = setup.write_input(
            "dst.npy",
            &npy_bytes(format.dst, &[e], Data::Int(&case.dst), format.index_layout),
        );
        let g = setup.write_input(
            "g.npy",
            &npy_bytes(
                case.precision,
                &[e, 3],
                Data::Float(&case.g),
                format.g_layout,
            ),
        );
        let edge_vec = setup.write_input(
            "edge_vec.npy",
            &npy_bytes(
                case.precision,
                &[e, 3],
                Data::Float(&case.edge_vec),
                format.edge_vec_layout,
            ),
        );
        setup
            .set("--src", src)
            .set("--dst", dst)
            .set("--g", g)
            .set("--edge-vec", edge_vec)
            .set("--n-ext", case.n_ext.to_string());
        if let Some(gh) = &case.ghosts {
            let mapping = setup.write_input(
                "mapping.npy",
                &npy_bytes(
                    format.mapping,
                    &[case.n_ext],
                    Data::Int(&gh.mapping),
                    format.index_layout,
                ),
            );
            setup
                .set("--mapping", mapping)
                .set("--n-local", gh.n_local.to_string());
        }
        let (force, virial) = (setup.output("force.npy"), setup.output("virial.npy"));
        setup.set("--out-force", force).set("--out-virial", virial);
        setup
    }

    /// Frame flags, and `out/frame_virial.npy`, `out/frame_voigt.npy` as outputs.
    fn with_frames(&mut self, frames: &Frames) -> &mut Setup {
        match frames {
            Frames::Size(s) => {
                self.set("--frame-size", s.to_string());
            }
            Frames::Ids {
                ids,
                n_frames,
                dtype,
            } => {
                let path = self.write_input(
                    "frame_ids.npy",
                    &npy_bytes(*dtype, &[ids.len()], Data::Int(ids), Layout::default()),
                );
                self.set("--frame-ids", path)
                    .set("--n-frames", n_frames.to_string());
            }
        }
        let (fv, fvv) = (
            self.output("frame_virial.npy"),
            self.output("frame_voigt.npy"),
        );
        self.set("--out-frame-virial", fv)
            .set("--out-frame-voigt", fvv)
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }
    fn input(&self, name: &str) -> PathBuf {
        self.root().join("in").join(name)
    }
    fn output(&self, name: &str) -> PathBuf {
        self.root().join("out").join(name)
    }

    fn write_input(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.input(name);
        fs::write(&path, bytes).unwrap();
        path
    }

    fn write_index(&self, name: &str, dtype: Dtype, values: &[i64]) {
        let bytes = npy_bytes(dtype, &[values.len()], Data::Int(values), Layout::default());
        self.write_input(name, &bytes);
    }

    fn write_floats(&self, name: &str, dtype: Dtype, shape: &[usize], values: &[f64]) {
        let bytes = npy_bytes(dtype, shape, Data::Float(values), Layout::default());
        self.write_input(name, &bytes);
    }

    fn set(&mut self, flag: &str, value: impl Into<OsString>) -> &mut Setup {
        let value = value.into();
        match self.flags.iter_mut().find(|(f, _)| f == flag) {
            Some(slot) => slot.1 = value,
            None => self.flags.push((flag.to_string(), value)),
        }
        self
    }

    fn unset(&mut self, flag: &str) -> &mut Setup {
        self.flags.retain(|(f, _)| f != flag);
        self
    }

    fn run(&self) -> Outcome {
        let out = Command::new(hipkern())
            .arg("force")
            .args(
                self.flags
                    .iter()
                    .flat_map(|(f, v)| [OsString::from(f), v.clone()]),
            )
            .output()
            .expect("run hipkern");
        Outcome {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Every file in `out/`, by name.
    fn out_files(&self) -> BTreeMap<String, Vec<u8>> {
        fs::read_dir(self.root().join("out"))
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                let name = entry.file_name().into_string().unwrap();
                (name, fs::read(entry.path()).unwrap())
            })
            .collect()
    }

    /// Output files with known contents, as an earlier run might have left.
    fn precreate_outputs(&self, names: &[&str]) {
        for name in names {
            fs::write(self.output(name), format!("earlier contents of {name}\n")).unwrap();
        }
    }
}

/// Every file and folder under `root` with its contents (None for folders).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if path.is_dir() {
                out.insert(rel, None);
                pending.push(path);
            } else {
                out.insert(rel, Some(fs::read(&path).unwrap()));
            }
        }
    }
    out
}

// ---- successful runs against the reference -------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutDtype {
    /// The default: no --out-dtype flag.
    Default,
    F64,
    Input,
}

/// One successful run of the program and what it must produce.
struct Job<'a> {
    label: &'a str,
    case: &'a Case,
    format: Format,
    split: Split,
    backend: &'a str,
    out_dtype: OutDtype,
    frames: Option<&'a Frames>,
}

impl<'a> Job<'a> {
    fn new(label: &'a str, case: &'a Case, backend: &'a str, split: Split) -> Job<'a> {
        Job {
            label,
            case,
            format: Format::indices(I64),
            split,
            backend,
            out_dtype: OutDtype::Default,
            frames: None,
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} (--backend {}, --split {}, {:?} in, {:?}/{:?} indices, {:?} out, frames {})",
            self.label,
            self.backend,
            self.split.name(),
            self.case.precision,
            self.format.src,
            self.format.dst,
            self.out_dtype,
            match self.frames {
                Some(Frames::Size(s)) => format!("of {s}"),
                Some(Frames::Ids { n_frames, .. }) => format!("{n_frames} by id"),
                None => "none".into(),
            }
        )
    }
}

/// Runs the job and compares every element of every output with the
/// reference; checks dtypes and shapes, and that `out/` holds exactly the
/// outputs. Returns the output files' bytes by name.
fn run_and_check(job: &Job<'_>) -> BTreeMap<String, Vec<u8>> {
    let what = job.describe();
    let mut setup = Setup::for_case(job.case, job.format);
    setup
        .set("--backend", job.backend)
        .set("--split", job.split.name());
    match job.out_dtype {
        OutDtype::Default => {}
        OutDtype::F64 => {
            setup.set("--out-dtype", "f64");
        }
        OutDtype::Input => {
            setup.set("--out-dtype", "input");
        }
    }
    if let Some(frames) = job.frames {
        setup.with_frames(frames);
    }
    let outcome = setup.run();
    outcome.assert_success(&what);
    assert!(
        outcome.stdout.contains(&format!(
            "backend {}, {} edges",
            job.backend,
            job.case.n_edges()
        )),
        "{what}: stdout {:?}",
        outcome.stdout
    );

    let files = setup.out_files();
    let mut want_names = vec!["force.npy", "virial.npy"];
    if job.frames.is_some() {
        want_names.extend(["frame_virial.npy", "frame_voigt.npy"]);
    }
    want_names.sort_unstable();
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(names, want_names, "{what}: files in out/ (no temporaries)");

    let expected = reference(job.case, job.split);
    let rows = job.case.n_rows();
    let tol = tolerance(job.backend, job.case.precision);
    let f32_out = job.out_dtype == OutDtype::Input && job.case.precision == F32;
    let descr = if f32_out { "<f4" } else { "<f8" };
    for (name, width, want) in [
        ("force.npy", 3, &expected.force),
        ("virial.npy", 9, &expected.virial),
    ] {
        let got = read_output(&setup.output(name), descr, &[rows, width]);
        let what = format!("{what}: {name}");
        match &got.f32_values {
            // The float64 result rounded once (device-atomic sums in float32).
            Some(v) if job.backend != "device-atomic" => assert_rounded_once(&what, v, want, tol),
            _ => assert_close(&what, &got.values, want, tol),
        }
    }
    if let Some(frames) = job.frames {
        let (frame_of, n_frames) = frames.frame_of(rows);
        let (full, voigt) = frame_reference(&expected.virial, &frame_of, n_frames);
        for (name, width, want) in [
            ("frame_virial.npy", 9, &full),
            ("frame_voigt.npy", 6, &voigt),
        ] {
            let got = read_output(&setup.output(name), "<f8", &[n_frames, width]);
            assert_close(&format!("{what}: {name}"), &got.values, want, tol);
        }
    }
    files
}

/// The random graphs every backend is checked on.
fn graphs() -> Vec<(&'static str, Graph)> {
    let g = |n_ext, n_edges, hub_edges, self_edges, isolated| Graph {
        n_ext,
        n_edges,
        hub_edges,
        self_edges,
        isolated,
    };
    vec![
        ("no edges", g(5, 0, 0, 0, 0)),
        ("no atoms", g(0, 0, 0, 0, 0)),
        ("one self edge", g(1, 1, 0, 1, 0)),
        ("random pairs", g(40, 300, 0, 5, 3)),
        ("hub of 300 edges", g(64, 700, 300, 12, 8)),
    ]
}

/// Every graph × precision × index width × split, against the reference.
fn check_random_graphs(backend: &str) {
    for (i, (label, graph)) in graphs().into_iter().enumerate() {
        for precision in [F64, F32] {
            let case = random_case(1000 + i as u64, graph, precision);
            for index in [I32, I64] {
                for split in [Half, Src] {
                    run_and_check(&Job {
                        format: Format::indices(index),
                        ..Job::new(label, &case, backend, split)
                    });
                }
            }
        }
    }
}

/// Ghost atoms folded into their owners: mixed index widths, both splits.
fn check_ghost_folding(backend: &str) {
    let graph = Graph {
        n_ext: 48,
        n_edges: 400,
        hub_edges: 120,
        self_edges: 6,
        isolated: 4,
    };
    for precision in [F64, F32] {
        let case = with_ghosts(random_case(2000, graph, precision), 20, 2001);
        for (split, src, mapping) in [(Half, I32, I64), (Src, I64, I32), (Half, I64, I64)] {
            let format = Format {
                src,
                dst: src,
                mapping,
                ..Format::indices(I64)
            };
            run_and_check(&Job {
                format,
                ..Job::new("folded into 20 owners", &case, backend, split)
            });
        }
        // Every atom its own owner: the unfolded result.
        let mut identity = case.clone();
        identity.ghosts = Some(Ghosts {
            mapping: (0..graph.n_ext as i64).collect(),
            n_local: graph.n_ext,
        });
        let folded = run_and_check(&Job::new("identity mapping", &identity, backend, Half));
        identity.ghosts = None;
        let plain = run_and_check(&Job::new("no mapping", &identity, backend, Half));
        // (Atomic sums need not repeat bit for bit.)
        if backend != "device-atomic" {
            assert_eq!(folded, plain, "an identity mapping changes nothing");
        }
    }
}

/// Per-frame virial by frame size and by frame ids (with an empty frame),
/// with and without folding.
fn check_frames(backend: &str) {
    let graph = Graph {
        n_ext: 60,
        n_edges: 360,
        hub_edges: 60,
        self_edges: 4,
        isolated: 6,
    };
    let mut rng = SplitMix64(3000);
    for (precision, split, ids_dtype) in [(F64, Half, I32), (F32, Src, I64)] {
        let case = random_case(3001, graph, precision);
        for size in [15, 60, 1] {
            let frames = Frames::Size(size);
            run_and_check(&Job {
                frames: Some(&frames),
                ..Job::new("frames by size", &case, backend, split)
            });
        }
        // Five frames, frame 3 empty (its totals are zero).
        let frames = Frames::Ids {
            ids: (0..60).map(|_| [0, 1, 2, 4][rng.below(4)]).collect(),
            n_frames: 5,
            dtype: ids_dtype,
        };
        run_and_check(&Job {
            frames: Some(&frames),
            ..Job::new("frames by id", &case, backend, split)
        });

        let folded = with_ghosts(case, 30, 3002);
        for frames in [
            Frames::Size(10),
            Frames::Ids {
                ids: (0..30).map(|k| (k % 2) as i64).collect(),
                n_frames: 2,
                dtype: ids_dtype,
            },
        ] {
            run_and_check(&Job {
                frames: Some(&frames),
                ..Job::new("folded, frames over local rows", &folded, backend, split)
            });
        }
    }
}

/// `--out-dtype input`: float32 for float32 inputs, each value the float64
/// result rounded once (bit for bit the `--out-dtype f64` output rounded);
/// frame totals stay float64. Float64 inputs: the same bytes as f64.
fn check_out_dtype_input(backend: &str) {
    let graph = Graph {
        n_ext: 64,
        n_edges: 700,
        hub_edges: 300,
        self_edges: 12,
        isolated: 8,
    };
    let frames = Frames::Size(16);
    for precision in [F32, F64] {
        let case = random_case(4000, graph, precision);
        let job = |out_dtype| Job {
            out_dtype,
            frames: Some(&frames),
            ..Job::new("out dtype", &case, backend, Half)
        };
        let wide = run_and_check(&job(OutDtype::F64));
        let narrow = run_and_check(&job(OutDtype::Input));
        let default = run_and_check(&job(OutDtype::Default));
        assert_eq!(default, wide, "the default --out-dtype is f64");
        for name in ["frame_virial.npy", "frame_voigt.npy"] {
            assert_eq!(narrow[name], wide[name], "{name} stays float64");
        }
        for name in ["force.npy", "virial.npy"] {
            if precision == F64 {
                assert_eq!(narrow[name], wide[name], "float64 in: input means f64");
                continue;
            }
            let w = parse_npy(&wide[name], name);
            let n = parse_npy(&narrow[name], name);
            assert_eq!(n.shape, w.shape);
            let n = n.f32_values.expect("float32 output");
            for (i, (&x, &y)) in n.iter().zip(&w.values).enumerate() {
                assert_eq!(
                    x.to_bits(),
                    (y as f32).to_bits(),
                    "{name}[{i}]: {x:e} is not {y:e} rounded to float32"
                );
            }
        }
    }
}

const HOST_BACKENDS: [&str; 2] = ["cpu", "reference"];

#[test]
fn cpu_backend_matches_the_reference_on_random_graphs() {
    check_random_graphs("cpu");
}

#[test]
fn reference_backend_matches_the_reference_on_random_graphs() {
    check_random_graphs("reference");
}

#[test]
fn host_backends_fold_ghosts_into_owners() {
    for backend in HOST_BACKENDS {
        check_ghost_folding(backend);
    }
}

#[test]
fn host_backends_sum_the_virial_per_frame() {
    for backend in HOST_BACKENDS {
        check_frames(backend);
    }
}

#[test]
fn host_backends_round_once_to_the_input_precision() {
    for backend in HOST_BACKENDS {
        check_out_dtype_input(backend);
    }
}

#[test]
fn cpu_and_reference_backends_agree() {
    let case = random_case(
        5000,
        Graph {
            n_ext: 64,
            n_edges: 700,
            hub_edges: 300,
            self_edges: 12,
            isolated: 8,
        },
        F64,
    );
    let frames = Frames::Size(8);
    let [cpu, reference] = HOST_BACKENDS.map(|backend| {
        let files = run_and_check(&Job {
            frames: Some(&frames),
            ..Job::new("agree", &case, backend, Src)
        });
        files
            .iter()
            .map(|(name, bytes)| (name.clone(), parse_npy(bytes, name).values))
            .collect::<BTreeMap<_, _>>()
    });
    for (name, values) in &cpu {
        assert_close(
            &format!("cpu vs reference: {name}"),
            values,
            &reference[name],
            1e-13,
        );
    }
}

/// Big-endian and column-major inputs (and src, dst of different widths)
/// give the same bytes as little-endian C-order ones.
#[test]
fn reader_takes_big_endian_and_fortran_order_inputs() {
    let graph = Graph {
        n_ext: 30,
        n_edges: 200,
        hub_edges: 50,
        self_edges: 3,
        isolated: 2,
    };
    let formats = [
        Format {
            src: I32,
            dst: I64,
            mapping: I32,
            index_layout: BIG_ENDIAN,
            g_layout: BOTH,
            edge_vec_layout: BIG_ENDIAN,
        },
        Format {
            src: I64,
            dst: I32,
            mapping: I64,
            index_layout: FORTRAN,
            g_layout: FORTRAN,
            edge_vec_layout: BOTH,
        },
    ];
    for precision in [F64, F32] {
        let case = with_ghosts(random_case(6000, graph, precision), 25, 6001);
        for backend in HOST_BACKENDS {
            let plain = run_and_check(&Job::new("little-endian, C order", &case, backend, Half));
            for format in formats {
                let other = run_and_check(&Job {
                    format,
                    ..Job::new("big-endian / fortran order", &case, backend, Half)
                });
                assert_eq!(other, plain, "{backend}, {format:?}: outputs differ");
            }
        }
    }
}

/// The writer against the bytes numpy writes: `np.save` of
/// `np.arange(6, dtype='>f8').reshape(2, 3).T` (column-major, so
/// fortran_order True, shape (3, 2), data 0..6 on disk) and of
/// `np.zeros(7, dtype='<i4')` (the header only).
#[test]
fn npy_writer_matches_numpy_byte_for_byte() {
    let header = npy_header(">f8", true, &[3, 2]);
    let mut want = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
    want.extend_from_slice(b"{'descr': '>f8', 'fortran_order': True, 'shape': (3, 2), }");
    want.resize(127, b' ');
    want.push(b'\n');
    assert_eq!(header, want);
    // arange(6).reshape(2, 3).T is [[0, 3], [1, 4], [2, 5]]; column-major on disk: 0..6.
    let file = npy_bytes(
        F64,
        &[3, 2],
        Data::Float(&[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]),
        BOTH,
    );
    let data: Vec<f64> = file[128..]
        .chunks_exact(8)
        .map(|c| f64::from_be_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(data, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(&npy_header("<i4", false, &[7])[..], {
        let mut h = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
        h.extend_from_slice(b"{'descr': '<i4', 'fortran_order': False, 'shape': (7,), }");
        h.resize(127, b' ');
        h.push(b'\n');
        h
    });
}

// ---- bad input ----------------------------------------------------------

/// A small valid case: 6 atoms (one isolated), 8 edges, float64.
fn small_case() -> Case {
    random_case(
        7000,
        Graph {
            n_ext: 6,
            n_edges: 8,
            hub_edges: 3,
            self_edges: 1,
            isolated: 1,
        },
        F64,
    )
}

/// A change to a setup's flags (or files).
type SetupEdit<'a> = &'a dyn Fn(&mut Setup);
/// A change to a setup's input files.
type InputEdit<'a> = &'a dyn Fn(&Setup);

/// The small case with int64 indices, run with --backend cpu.
fn base_setup(case: &Case) -> Setup {
    let mut setup = Setup::for_case(case, Format::indices(I64));
    setup.set("--backend", "cpu");
    setup
}

/// Runs `setup`, which must fail with exit status `code` and one error line
/// containing `needles`, leaving every file and folder under its temporary
/// folder as it was: no output created or changed, no temporary file left.
fn assert_rejected(what: &str, setup: &Setup, code: i32, needles: &[&str]) {
    let before = snapshot(setup.root());
    let outcome = setup.run();
    outcome.assert_failure(what, code, needles);
    let after = snapshot(setup.root());
    let changed: Vec<&PathBuf> = before
        .keys()
        .chain(after.keys())
        .filter(|p| before.get(*p) != after.get(*p))
        .collect();
    assert!(
        changed.is_empty(),
        "{what}: files created, changed or removed: {changed:?}"
    );
}

/// The small case, edited by `edit`, must be rejected as bad input (exit 2).
fn rejected(what: &str, needles: &[&str], edit: impl FnOnce(&Case, &mut Setup)) {
    let case = small_case();
    let mut setup = base_setup(&case);
    edit(&case, &mut setup);
    assert_rejected(what, &setup, 2, needles);
}

#[test]
fn the_small_case_of_the_bad_input_tests_is_valid() {
    let case = with_ghosts(small_case(), 3, 7001);
    let frames = Frames::Ids {
        ids: vec![0, 1, 1],
        n_frames: 2,
        dtype: I64,
    };
    for backend in HOST_BACKENDS {
        run_and_check(&Job::new("small case", &small_case(), backend, Half));
        run_and_check(&Job {
            frames: Some(&frames),
            ..Job::new("small case, folded", &case, backend, Src)
        });
    }
}

#[test]
fn missing_and_malformed_files_are_rejected() {
    rejected("g missing", &["g (", "g.npy", "cannot read"], |_, s| {
        fs::remove_file(s.input("g.npy")).unwrap();
    });
    rejected("src missing", &["src (", "cannot read"], |_, s| {
        s.set("--src", s.input("nowhere.npy"));
    });
    rejected("mapping missing", &["mapping (", "cannot read"], |_, s| {
        s.set("--mapping", s.input("nowhere.npy"))
            .set("--n-local", "3");
    });
    rejected("not a .npy file", &["dst (", "not a .npy file"], |_, s| {
        s.write_input("dst.npy", b"src,dst\n0,1\n");
    });
    rejected(
        "header cut short",
        &["edge_vec (", "not a .npy file"],
        |_, s| {
            let bytes = fs::read(s.input("edge_vec.npy")).unwrap();
            s.write_input("edge_vec.npy", &bytes[..40]);
        },
    );
    // The header promises 8×3 float64 (192 bytes) but 7 rows follow.
    rejected(
        "g truncated",
        &["g (", "the header says float64 (8, 3)", "168 bytes"],
        |c, s| {
            let bytes = npy_bytes(F64, &[8, 3], Data::Float(&c.g), Layout::default());
            s.write_input("g.npy", &bytes[..bytes.len() - 24]);
        },
    );
    rejected("src truncated", &["src (", "int64 (8,)"], |c, s| {
        let bytes = npy_bytes(I64, &[8], Data::Int(&c.src), Layout::default());
        s.write_input("src.npy", &bytes[..bytes.len() - 3]);
    });
    rejected(
        "extra bytes after the data",
        &["g (", "200 bytes"],
        |c, s| {
            let mut bytes = npy_bytes(F64, &[8, 3], Data::Float(&c.g), Layout::default());
            bytes.extend_from_slice(&[0; 8]);
            s.write_input("g.npy", &bytes);
        },
    );
    // A header claiming an enormous array is an error, not an allocation.
    rejected("absurd shape", &["g (", "the header says"], |_, s| {
        let mut bytes = npy_header("<f8", false, &[1 << 60, 3]);
        bytes.extend_from_slice(&[0; 64]);
        s.write_input("g.npy", &bytes);
    });
}

#[test]
fn wrong_dtypes_are_rejected() {
    rejected(
        "float src",
        &["src (", "float64", "int32 or int64"],
        |c, s| {
            s.write_floats(
                "src.npy",
                F64,
                &[8],
                &c.src.iter().map(|&i| i as f64).collect::<Vec<_>>(),
            );
        },
    );
    rejected(
        "float32 dst",
        &["dst (", "float32", "int32 or int64"],
        |c, s| {
            s.write_floats(
                "dst.npy",
                F32,
                &[8],
                &c.dst.iter().map(|&i| i as f64).collect::<Vec<_>>(),
            );
        },
    );
    rejected("int g", &["g (", "int32", "float32 or float64"], |_, s| {
        s.write_input(
            "g.npy",
            &npy_bytes(I32, &[8, 3], Data::Int(&[1; 24]), Layout::default()),
        );
    });
    rejected(
        "int edge_vec",
        &["edge_vec (", "int64", "float32 or float64"],
        |_, s| {
            s.write_input(
                "edge_vec.npy",
                &npy_bytes(I64, &[8, 3], Data::Int(&[1; 24]), Layout::default()),
            );
        },
    );
    rejected(
        "float mapping",
        &["mapping (", "float64", "int32 or int64"],
        |_, s| {
            s.write_floats("mapping.npy", F64, &[6], &[0.0, 1.0, 2.0, 0.0, 1.0, 2.0]);
            s.set("--mapping", s.input("mapping.npy"))
                .set("--n-local", "3");
        },
    );
    rejected(
        "unsigned src",
        &["src (", "<u4", "not supported"],
        |_, s| {
            let mut bytes = npy_header("<u4", false, &[8]);
            bytes.extend_from_slice(&[0; 32]);
            s.write_input("src.npy", &bytes);
        },
    );
    rejected("float16 g", &["g (", "<f2", "not supported"], |_, s| {
        let mut bytes = npy_header("<f2", false, &[8, 3]);
        bytes.extend_from_slice(&[0; 48]);
        s.write_input("g.npy", &bytes);
    });
    rejected(
        "g and edge_vec dtypes differ",
        &["g is float32 but edge_vec is float64"],
        |c, s| s.write_floats("g.npy", F32, &[8, 3], &c.g),
    );
}

#[test]
fn wrong_shapes_are_rejected() {
    rejected("g is E×2", &["g (", "(8, 2)", "(E, 3)"], |c, s| {
        s.write_floats("g.npy", F64, &[8, 2], &c.g[..16]);
    });
    rejected("g is 1-D", &["g (", "(24,)", "(E, 3)"], |c, s| {
        s.write_floats("g.npy", F64, &[24], &c.g);
    });
    rejected("edge_vec is 3-D", &["edge_vec (", "(8, 3, 1)"], |c, s| {
        s.write_floats("edge_vec.npy", F64, &[8, 3, 1], &c.edge_vec);
    });
    rejected("src is 2-D", &["src (", "(8, 1)", "1-D"], |c, s| {
        let bytes = npy_bytes(I64, &[8, 1], Data::Int(&c.src), Layout::default());
        s.write_input("src.npy", &bytes);
    });
    rejected("dst is 0-D", &["dst (", "()", "1-D"], |_, s| {
        let bytes = npy_bytes(I64, &[], Data::Int(&[0]), Layout::default());
        s.write_input("dst.npy", &bytes);
    });
    rejected(
        "src and dst lengths differ",
        &["src has 8 entries but dst has 7"],
        |c, s| {
            s.write_index("dst.npy", I64, &c.dst[..7]);
        },
    );
    rejected(
        "g has too few rows",
        &["g has 7 rows", "8 edges"],
        |c, s| {
            s.write_floats("g.npy", F64, &[7, 3], &c.g[..21]);
        },
    );
    rejected(
        "edge_vec has too many rows",
        &["edge_vec has 9 rows", "8 edges"],
        |c, s| {
            let mut r = c.edge_vec.clone();
            r.extend([0.0; 3]);
            s.write_floats("edge_vec.npy", F64, &[9, 3], &r);
        },
    );
    rejected(
        "mapping length",
        &["mapping has 5 entries but n_ext = 6"],
        |_, s| {
            s.write_index("mapping.npy", I64, &[0, 1, 2, 0, 1]);
            s.set("--mapping", s.input("mapping.npy"))
                .set("--n-local", "3");
        },
    );
}

#[test]
fn indices_out_of_range_are_named_with_their_first_position() {
    for backend in HOST_BACKENDS {
        for dtype in [I32, I64] {
            let what = |w: &str| format!("{w} ({backend}, {dtype:?})");
            let setup = |edit: &dyn Fn(&Case, &Setup)| {
                let case = small_case();
                let mut s = Setup::for_case(&case, Format::indices(dtype));
                s.set("--backend", backend);
                edit(&case, &s);
                s
            };
            let s = setup(&|c, s| {
                let mut src = c.src.clone();
                src[3] = -1;
                src[6] = -2;
                s.write_index("src.npy", dtype, &src);
            });
            assert_rejected(
                &what("negative src"),
                &s,
                2,
                &["src[3] = -1", "out of range"],
            );
            let s = setup(&|c, s| {
                let mut dst = c.dst.clone();
                dst[5] = 6;
                dst[7] = 100;
                s.write_index("dst.npy", dtype, &dst);
            });
            assert_rejected(&what("dst = n_ext"), &s, 2, &["dst[5] = 6", "n_ext = 6"]);
            let s = setup(&|c, s| {
                let mut dst = c.dst.clone();
                dst[0] = i64::from(i32::MAX);
                s.write_index("dst.npy", dtype, &dst);
            });
            assert_rejected(&what("dst = i32::MAX"), &s, 2, &["dst[0] = 2147483647"]);
        }
        // int64 values beyond int32 are reported as they are, not truncated.
        let mut s = base_setup(&small_case());
        s.set("--backend", backend);
        let mut src = small_case().src;
        src[2] = 1 << 40;
        s.write_index("src.npy", I64, &src);
        assert_rejected("src = 2^40", &s, 2, &["src[2] = 1099511627776"]);
        src[2] = (1 << 32) + 1;
        s.write_index("src.npy", I64, &src);
        assert_rejected("src = 2^32 + 1", &s, 2, &["src[2] = 4294967297"]);
    }
    // The first bad position, not a later one.
    rejected("dst out of range twice", &["dst[5]"], |c, s| {
        let mut dst = c.dst.clone();
        dst[5] = 6;
        dst[7] = 9;
        s.write_index("dst.npy", I64, &dst);
    });
    let case = small_case();
    let mut s = base_setup(&case);
    let mut dst = case.dst.clone();
    dst[5] = 6;
    dst[7] = 9;
    s.write_index("dst.npy", I64, &dst);
    let outcome = s.run();
    assert!(!outcome.stderr.contains("dst[7]"), "{}", outcome.stderr);
    s.set("--n-ext", "1000");
    assert_eq!(s.run().code, Some(0), "valid with a larger --n-ext");
}

#[test]
fn bad_mappings_are_rejected() {
    for backend in HOST_BACKENDS {
        for dtype in [I32, I64] {
            let with_mapping = |mapping: &'static [i64], n_local: &'static str| {
                move |_: &Case, s: &mut Setup| {
                    s.write_index("mapping.npy", dtype, mapping);
                    s.set("--mapping", s.input("mapping.npy"))
                        .set("--n-local", n_local)
                        .set("--backend", backend);
                }
            };
            rejected(
                &format!("mapping = n_local ({backend}, {dtype:?})"),
                &["mapping[4] = 3", "n_local = 3"],
                with_mapping(&[0, 1, 2, 0, 3, 9], "3"),
            );
            rejected(
                &format!("negative mapping ({backend}, {dtype:?})"),
                &["mapping[1] = -1"],
                with_mapping(&[0, -1, 2, 0, 1, 2], "3"),
            );
            rejected(
                &format!("n_local > n_ext ({backend}, {dtype:?})"),
                &["n_local = 7 exceeds n_ext = 6"],
                with_mapping(&[0, 1, 2, 3, 4, 5], "7"),
            );
        }
    }
    rejected(
        "--mapping without --n-local",
        &["--mapping needs --n-local"],
        |_, s| {
            s.write_index("mapping.npy", I64, &[0, 1, 2, 0, 1, 2]);
            s.set("--mapping", s.input("mapping.npy"));
        },
    );
    rejected(
        "--n-local without --mapping",
        &["--n-local needs --mapping"],
        |_, s| {
            s.set("--n-local", "3");
        },
    );
}

#[test]
fn bad_flag_values_are_rejected() {
    rejected(
        "unknown split",
        &["unknown --split 'dst'", "half or src"],
        |_, s| {
            s.set("--split", "dst");
        },
    );
    rejected(
        "split is case-sensitive",
        &["unknown --split 'Half'"],
        |_, s| {
            s.set("--split", "Half");
        },
    );
    rejected("unknown backend", &["unknown --backend 'gpu'"], |_, s| {
        s.set("--backend", "gpu");
    });
    rejected("empty backend", &["unknown --backend ''"], |_, s| {
        s.set("--backend", "");
    });
    rejected(
        "unknown out dtype",
        &["unknown --out-dtype 'f32'"],
        |_, s| {
            s.set("--out-dtype", "f32");
        },
    );
}

#[test]
fn bad_output_paths_are_rejected() {
    rejected(
        "force and virial to one file",
        &["--out-force and --out-virial name the same file"],
        |_, s| {
            s.set("--out-virial", s.output("force.npy"));
        },
    );
    rejected(
        "one file spelled two ways",
        &["--out-force and --out-virial name the same file"],
        |_, s| {
            s.set("--out-virial", s.root().join("in/../out/./force.npy"));
        },
    );
    rejected(
        "frame output onto the virial",
        &["--out-virial and --out-frame-voigt name the same file"],
        |_, s| {
            s.with_frames(&Frames::Size(2));
            s.set("--out-frame-voigt", s.output("virial.npy"));
        },
    );
    rejected(
        "output is a folder",
        &["--out-force", "is a directory"],
        |_, s| {
            fs::create_dir(s.output("force.npy")).unwrap();
        },
    );
    rejected(
        "force onto an input",
        &["--g and --out-force name the same file"],
        |_, s| {
            s.set("--out-force", s.input("g.npy"));
        },
    );
    // Outputs already there stay as they were.
    let case = small_case();
    let mut s = base_setup(&case);
    s.precreate_outputs(&["force.npy"]);
    s.set("--out-virial", s.output("force.npy"));
    assert_rejected("same file, already there", &s, 2, &["name the same file"]);
}

#[test]
fn bad_frame_flags_are_rejected() {
    rejected(
        "frame size does not divide the rows",
        &[
            "--frame-size",
            "6 rows are not a whole number of frames of 4",
        ],
        |_, s| {
            s.with_frames(&Frames::Size(4));
        },
    );
    rejected("frame size 0", &["--frame-size", "frame size 0"], |_, s| {
        s.with_frames(&Frames::Size(0));
    });
    rejected(
        "frame ids too short",
        &["--frame-ids", "5 entries", "6 rows"],
        |_, s| {
            s.with_frames(&Frames::Ids {
                ids: vec![0, 0, 0, 1, 1],
                n_frames: 2,
                dtype: I32,
            });
        },
    );
    rejected(
        "frame id = n_frames",
        &["--frame-ids", "[2] = 3", "[0, 3)"],
        |_, s| {
            s.with_frames(&Frames::Ids {
                ids: vec![0, 1, 3, 2, 1, 4],
                n_frames: 3,
                dtype: I64,
            });
        },
    );
    rejected("negative frame id", &["--frame-ids", "[4] = -1"], |_, s| {
        s.with_frames(&Frames::Ids {
            ids: vec![0, 1, 2, 2, -1, 0],
            n_frames: 3,
            dtype: I32,
        });
    });
    rejected("float frame ids", &["frame_ids (", "float64"], |_, s| {
        s.with_frames(&Frames::Ids {
            ids: vec![0; 6],
            n_frames: 1,
            dtype: I64,
        });
        s.write_floats("frame_ids.npy", F64, &[6], &[0.0; 6]);
    });
    rejected(
        "--frame-ids without --n-frames",
        &["--frame-ids needs --n-frames"],
        |_, s| {
            s.write_index("frame_ids.npy", I64, &[0; 6]);
            s.set("--frame-ids", s.input("frame_ids.npy"));
        },
    );
    rejected(
        "--n-frames alone",
        &["--n-frames needs --frame-ids"],
        |_, s| {
            s.set("--n-frames", "2");
        },
    );
    rejected(
        "--frame-size with --n-frames",
        &["--n-frames goes with --frame-ids"],
        |_, s| {
            s.set("--frame-size", "3").set("--n-frames", "2");
        },
    );
    rejected(
        "both kinds of frames",
        &["--frame-size and --frame-ids exclude each other"],
        |_, s| {
            s.with_frames(&Frames::Ids {
                ids: vec![0; 6],
                n_frames: 1,
                dtype: I64,
            });
            s.set("--frame-size", "3");
        },
    );
    rejected(
        "frame output without frames",
        &["--out-frame-voigt needs --frame-size or --frame-ids"],
        |_, s| {
            s.set("--out-frame-voigt", s.output("frame_voigt.npy"));
        },
    );
    rejected(
        "frame outputs without frames",
        &["--out-frame-virial needs --frame-size or --frame-ids"],
        |_, s| {
            s.with_frames(&Frames::Size(2)).unset("--frame-size");
        },
    );
}

/// Flags clap cannot parse (a missing output, a number that is not one, an
/// unknown or repeated flag): one line `hipkern force: error: ...` naming
/// the flag (main.rs shortens clap's usage message), exit status 2, and
/// nothing written.
#[test]
fn unparsable_flags_are_usage_errors() {
    let cases: [(&str, &str, SetupEdit); 5] = [
        ("no --out-virial", "--out-virial", &|s| {
            s.unset("--out-virial");
        }),
        ("--n-ext not a number", "--n-ext", &|s| {
            s.set("--n-ext", "six");
        }),
        ("negative --n-ext", "-1", &|s| {
            s.set("--n-ext", "-1");
        }),
        ("unknown flag", "--virial-split", &|s| {
            s.set("--virial-split", "half");
        }),
        ("--split twice", "--split", &|s| {
            s.set("--split", "src");
            s.flags.push(("--split".into(), "half".into()));
        }),
    ];
    for (what, needle, edit) in cases {
        let mut s = base_setup(&small_case());
        edit(&mut s);
        assert_rejected(what, &s, 2, &[needle]);
    }
}

/// An error found after the assembly (the frame grouping) still leaves
/// outputs from an earlier run byte for byte as they were.
#[test]
fn a_late_error_leaves_earlier_outputs_untouched() {
    let outputs = [
        "force.npy",
        "virial.npy",
        "frame_virial.npy",
        "frame_voigt.npy",
    ];
    for backend in HOST_BACKENDS {
        let case = small_case();
        let mut s = base_setup(&case);
        s.set("--backend", backend).with_frames(&Frames::Size(4));
        s.precreate_outputs(&outputs);
        assert_rejected(
            &format!("frames of 4 over 6 rows ({backend}), outputs already there"),
            &s,
            2,
            &["not a whole number of frames"],
        );
        s.write_index("dst.npy", I64, &[0, 1, 2, 3, 4, 6, 0, 0]);
        assert_rejected(
            &format!("dst out of range ({backend}), outputs already there"),
            &s,
            2,
            &["dst[5] = 6"],
        );
    }
}

/// An output that cannot be written (its folder is missing) is the
/// environment's failure (exit status 1), and the outputs that could be
/// written are not put in place either.
#[test]
fn an_unwritable_output_changes_nothing() {
    let case = small_case();
    let mut s = base_setup(&case);
    s.with_frames(&Frames::Size(3));
    s.set(
        "--out-frame-voigt",
        s.root().join("out/missing/frame_voigt.npy"),
    );
    // A folder that does not exist is the caller's path (exit 2), found
    // when the outputs are planned, before any input is read.
    let missing = ["frame_voigt.npy", "does not exist"];
    assert_rejected("last output's folder missing", &s, 2, &missing);
    s.precreate_outputs(&["force.npy", "virial.npy", "frame_virial.npy"]);
    assert_rejected(
        "last output's folder missing, others there",
        &s,
        2,
        &missing,
    );
    s.set("--out-force", s.root().join("missing/force.npy"));
    assert_rejected("first output's folder missing", &s, 2, &["force.npy"]);
}

/// On the cpu platform (no HIP or CUDA compiler at build time) the device
/// backends are the environment's failure: exit status 1, one line, nothing
/// written. The platform is the library's cfg (build.rs), as in
/// tests/runtime.rs it is `runtime::platform()`; both must agree.
#[cfg(hipkern_platform = "cpu")]
#[test]
fn device_backends_fail_cleanly_on_the_cpu_platform() {
    assert_eq!(hipkern::runtime::platform(), "cpu");
    for backend in ["device", "device-atomic"] {
        let case = small_case();
        let mut s = base_setup(&case);
        s.set("--backend", backend);
        let needs = format!("--backend {backend} needs a usable device");
        let needles = [needs.as_str(), "cpu platform", "use --backend cpu"];
        assert_rejected(&format!("--backend {backend}"), &s, 1, &needles);
        s.with_frames(&Frames::Size(3));
        s.precreate_outputs(&["force.npy", "virial.npy", "frame_voigt.npy"]);
        assert_rejected(
            &format!("--backend {backend}, outputs there"),
            &s,
            1,
            &needles,
        );
    }
    // No --backend: device, the default.
    let case = small_case();
    let mut s = base_setup(&case);
    s.unset("--backend");
    assert_rejected("default backend", &s, 1, &["--backend device needs"]);
    // Bad input is still reported as such (2), before any device is looked for.
    s.set("--split", "both");
    assert_rejected("bad split, default backend", &s, 2, &["unknown --split"]);
}

// ---- GPU ----------------------------------------------------------------

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_backend_matches_the_reference() {
    check_random_graphs("device");
    check_ghost_folding("device");
    check_frames("device");
    check_out_dtype_input("device");
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_atomic_backend_matches_the_reference() {
    check_random_graphs("device-atomic");
    check_ghost_folding("device-atomic");
    check_frames("device-atomic");
    // float32 in, float32 out: the atomic sums as they are.
    let case = random_case(8000, graphs()[4].1, F32);
    run_and_check(&Job {
        out_dtype: OutDtype::Input,
        ..Job::new("atomic, float32 out", &case, "device-atomic", Half)
    });
}

/// About 200 000 edges, 50 000 of them on one hub atom, 20 000 atoms.
fn large_case(precision: Dtype) -> Case {
    random_case(
        9000,
        Graph {
            n_ext: 20_000,
            n_edges: 200_000,
            hub_edges: 50_000,
            self_edges: 100,
            isolated: 500,
        },
        precision,
    )
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_backends_on_a_large_case_with_a_hub() {
    let frames = Frames::Size(5_000);
    for precision in [F64, F32] {
        let case = large_case(precision);
        for backend in ["device", "device-atomic", "cpu"] {
            for split in [Half, Src] {
                run_and_check(&Job {
                    frames: Some(&frames),
                    ..Job::new("large", &case, backend, split)
                });
            }
        }
        let folded = with_ghosts(case, 8_000, 9001);
        for backend in ["device", "device-atomic"] {
            run_and_check(&Job {
                format: Format::indices(I32),
                frames: Some(&Frames::Size(2_000)),
                ..Job::new("large, folded", &folded, backend, Half)
            });
        }
    }
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_backend_is_bitwise_reproducible() {
    let frames = Frames::Size(5_000);
    for precision in [F64, F32] {
        let case = large_case(precision);
        for out_dtype in [OutDtype::F64, OutDtype::Input] {
            let job = Job {
                out_dtype,
                frames: Some(&frames),
                ..Job::new("reproducible", &case, "device", Half)
            };
            let first = run_and_check(&job);
            let second = run_and_check(&job);
            assert_eq!(first, second, "{}: two runs differ", job.describe());
        }
    }
}

/// The device builds its plan on the device; bad indices are bad input
/// there too, with the host's message.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_backends_reject_bad_indices_like_the_host() {
    let case = small_case();
    let edits: [(&str, InputEdit); 3] = [
        ("dst = n_ext", &|s| {
            s.write_index("dst.npy", I64, &[0, 1, 2, 3, 4, 6, 0, 9])
        }),
        ("negative src", &|s| {
            s.write_index("src.npy", I32, &[0, 1, 2, -1, 0, 0, 0, 0])
        }),
        ("src = 2^40", &|s| {
            s.write_index("src.npy", I64, &[0, 1, 1 << 40, 0, 0, 0, 0, 0])
        }),
    ];
    for (what, edit) in edits {
        let mut host = base_setup(&case);
        edit(&host);
        let host_error = host.run().stderr;
        for backend in ["device", "device-atomic"] {
            host.set("--backend", backend);
            assert_rejected(&format!("{what} ({backend})"), &host, 2, &[]);
            assert_eq!(host.run().stderr, host_error, "{what} ({backend})");
        }
    }
    let mut s = base_setup(&case);
    s.write_index("mapping.npy", I64, &[0, 1, 2, 0, 3, 1]);
    s.set("--mapping", s.input("mapping.npy"))
        .set("--n-local", "3");
    for backend in ["device", "device-atomic"] {
        s.set("--backend", backend);
        assert_rejected(&format!("mapping ({backend})"), &s, 2, &["mapping[4] = 3"]);
    }
}
