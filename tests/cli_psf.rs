//! `hipkern psf fixture` and `hipkern psf replay` run as a program
//! (`docs/design/psf.md`).
//!
//! What the checks rest on is written here, independent of the program: a
//! SplitMix64 generator, a writer of the binary event file (the format
//! documented in src/psf/event.rs) and of N×7 float64 `.npy`, a reader of
//! the `.npy` image, a FITS reader (2880-byte header blocks of 80-character
//! cards, big-endian float32 data) and the Moffat formulas for α, the
//! support radius and the encircled flux. The library's `CpuSink` is the
//! reference the written images must equal bitwise; the PNG is decoded with
//! the `png` crate. The program run is `HIPKERN_BIN` when set, else the one
//! cargo built with these tests.
//!
//! Always run (CPU): a fixture written and replayed with `--check`; events
//! written here replayed into FITS, `.npy` and PNG, each read back; flux
//! conservation; every bad input (exit status 2, one line on stderr,
//! nothing on stdout, the folder byte-identical); an unwritable output
//! (exit 1, nothing written); `--mode atomic` without a device (exit 1).
//! GPU tests (`gpu_*`, ignored on the cpu platform): `--mode atomic --check` on every
//! fixture.
use hipkern::psf::{CacheConfig, CpuSink, HdrImage, MoffatPsf, PsfCache, StarEvent};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

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

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[lo, hi)`.
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
}

// ---- the Moffat formulas (docs/design/psf.md#model) ------------------------

const FWHM: f64 = 2.7;
const BETA: f64 = 4.5;
const TAIL: f64 = 1e-8;

fn alpha(fwhm: f64, beta: f64) -> f64 {
    fwhm / (2.0 * (2f64.powf(1.0 / beta) - 1.0).sqrt())
}

fn support_radius(fwhm: f64, beta: f64, tail: f64) -> f64 {
    alpha(fwhm, beta) * (tail.powf(1.0 / (1.0 - beta)) - 1.0).sqrt()
}

// ---- event files written here ---------------------------------------------

/// An event as its seven fields x, y, flux, r, g, b, support.
type Ev = [f64; 7];

/// A binary event file, version 1: magic, version, record size, count,
/// FWHM, β, tail, then the records, all little-endian.
fn event_file_bytes(psf: [f64; 3], events: &[Ev]) -> Vec<u8> {
    let mut out = b"HKPSFEVT".to_vec();
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&56u32.to_le_bytes());
    out.extend_from_slice(&(events.len() as u64).to_le_bytes());
    for v in psf.iter().chain(events.iter().flatten()) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// A `.npy` (version 1.0) of `rows` float64 rows of `cols`, little-endian,
/// C order, or Fortran order when `fortran`.
fn npy_f64(rows: &[Vec<f64>], cols: usize, fortran: bool) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '<f8', 'fortran_order': {}, 'shape': ({}, {cols}), }}",
        if fortran { "True" } else { "False" },
        rows.len()
    );
    let unpadded = 10 + dict.len() + 1;
    let padding = (64 - unpadded % 64) % 64;
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&((dict.len() + padding + 1) as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(out.len() + padding, b' ');
    out.push(b'\n');
    if fortran {
        for c in 0..cols {
            for r in rows {
                out.extend_from_slice(&r[c].to_le_bytes());
            }
        }
    } else {
        for v in rows.iter().flatten() {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

fn events_npy(events: &[Ev], fortran: bool) -> Vec<u8> {
    let rows: Vec<Vec<f64>> = events.iter().map(|e| e.to_vec()).collect();
    npy_f64(&rows, 7, fortran)
}

/// `n` events with centres in `[lo_x, hi_x) × [lo_y, hi_y)`, support the
/// default PSF's radius, flux log-uniform over four decades, colours in
/// `[0.2, 1.5)`.
fn random_events(seed: u64, n: usize, x: (f64, f64), y: (f64, f64)) -> Vec<Ev> {
    let mut rng = SplitMix64(seed);
    let r = support_radius(FWHM, BETA, TAIL);
    (0..n)
        .map(|_| {
            [
                rng.range(x.0, x.1),
                rng.range(y.0, y.1),
                10f64.powf(rng.range(0.0, 4.0)),
                rng.range(0.2, 1.5),
                rng.range(0.2, 1.5),
                rng.range(0.2, 1.5),
                r,
            ]
        })
        .collect()
}

fn star_events(events: &[Ev]) -> Vec<StarEvent> {
    events.iter().map(|&e| StarEvent::from_array(e)).collect()
}

// ---- reading outputs -------------------------------------------------------

/// A float64 `.npy` of shape `(h, w, 3)`, C order, little-endian: its values.
fn read_image_npy(path: &Path, h: usize, w: usize) -> Vec<f64> {
    let bytes = fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00", "{}", path.display());
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + hlen]).unwrap();
    assert!(header.contains("'descr': '<f8'"), "{header}");
    assert!(header.contains("'fortran_order': False"), "{header}");
    assert!(
        header.contains(&format!("'shape': ({h}, {w}, 3)")),
        "{header}"
    );
    let data = &bytes[10 + hlen..];
    assert_eq!(data.len(), h * w * 3 * 8);
    data.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// A FITS primary HDU: its header cards (keyword → value text) and data.
struct Fits {
    cards: BTreeMap<String, String>,
    data: Vec<u8>,
}

impl Fits {
    fn read(path: &Path) -> Fits {
        let bytes = fs::read(path).unwrap();
        assert_eq!(bytes.len() % 2880, 0, "FITS length {}", bytes.len());
        let mut cards = BTreeMap::new();
        let mut end = None;
        for (k, card) in bytes.chunks_exact(80).enumerate() {
            let card = std::str::from_utf8(card).expect("header cards are ASCII");
            let key = card[..8].trim_end().to_string();
            if key == "END" {
                end = Some(k);
                break;
            }
            if &card[8..10] == "= " {
                // The value, without its comment (no '/' in our strings).
                let value = card[10..].split('/').next().unwrap().trim();
                cards.insert(key, value.to_string());
            }
        }
        let end = end.expect("an END card");
        let data_start = ((end + 1) * 80).div_ceil(2880) * 2880;
        Fits {
            cards,
            data: bytes[data_start..].to_vec(),
        }
    }

    fn int(&self, key: &str) -> i64 {
        self.cards[key]
            .parse()
            .unwrap_or_else(|_| panic!("{key} = {}", self.cards[key]))
    }

    fn real(&self, key: &str) -> f64 {
        // FITS may write an exponent with D.
        self.cards[key].replace('D', "E").parse().unwrap()
    }

    fn string(&self, key: &str) -> String {
        let v = &self.cards[key];
        v.trim_matches('\'').trim_end().to_string()
    }

    /// Big-endian float32 value `k` of the data.
    fn f32_at(&self, k: usize) -> f32 {
        f32::from_be_bytes(self.data[4 * k..4 * k + 4].try_into().unwrap())
    }
}

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

// ---- running the program ---------------------------------------------------

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

fn run(dir: &Path, args: &[&str]) -> Outcome {
    let out = Command::new(hipkern())
        .current_dir(dir)
        .arg("psf")
        .args(args.iter().map(OsString::from))
        .output()
        .expect("run hipkern");
    Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
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
    }

    /// The stdout line that starts with `prefix`.
    fn line(&self, prefix: &str) -> &str {
        self.stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line {prefix:?} in {:?}", self.stdout))
    }

    /// Exit status `code`, nothing on stdout, and on stderr exactly one line
    /// `hipkern psf: error: ...` that contains each of `needles`.
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
            one_line.starts_with("hipkern psf: error: "),
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

/// The number after `key ` in `line` (`events 12765,` → 12765).
fn count_after(line: &str, key: &str) -> u64 {
    let rest = line
        .split(&format!("{key} "))
        .nth(1)
        .unwrap_or_else(|| panic!("no {key:?} in {line:?}"));
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("no count after {key:?} in {line:?}"))
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

/// The library's serial CPU reference of `events` on a `w × h` image.
fn reference(events: &[StarEvent], w: usize, h: usize, phases: usize) -> HdrImage {
    let psf = MoffatPsf::default();
    let cache = PsfCache::build_with(psf, &CacheConfig { phases, threads: 0 }).unwrap();
    let mut sink = CpuSink::new(Arc::new(cache), w, h).unwrap();
    sink.accumulate_routed(events).unwrap();
    sink.into_image()
}

// ---- successful runs -------------------------------------------------------

/// `fixture boundary` writes exactly the library's fixture; `replay --mode
/// cpu --check` on it routes the 8 oversized events to the direct path,
/// counts the events wholly outside, passes the check, and its `.npy` is
/// bitwise the library's serial reference.
#[test]
fn fixture_then_replay_with_check() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = run(d, &["fixture", "boundary", "--out", "boundary.bin"]);
    out.assert_success("fixture boundary");
    let f = hipkern::psf::fixtures::boundary();
    let written = fs::read(d.join("boundary.bin")).unwrap();
    assert_eq!(
        written,
        hipkern::psf::encode_events(&f.psf, &f.events),
        "the fixture file is the library's fixture"
    );
    // Our own reading of the header.
    assert_eq!(&written[..8], b"HKPSFEVT");
    assert_eq!(
        u64::from_le_bytes(written[16..24].try_into().unwrap()),
        f.events.len() as u64
    );
    let line = out.line("hipkern psf fixture: boundary: ");
    assert_eq!(count_after(line, "boundary:"), f.events.len() as u64);
    assert!(line.contains("8 too large for the cache"), "{line}");

    let out = run(
        d,
        &[
            "replay",
            "boundary.bin",
            "--mode",
            "cpu",
            "--phases",
            "8",
            "--check",
            "--out",
            "boundary.npy",
        ],
    );
    out.assert_success("replay boundary");
    let line = out.line("replay: mode cpu, image 3840×2160");
    let (w, h) = (3840, 2160);
    let want = reference(&f.events, w, h, 8);
    let outside = f
        .events
        .iter()
        .filter(|e| hipkern::psf::event_contributions(e, w, h) == 0)
        .count() as u64;
    assert!(outside > 0);
    assert_eq!(count_after(line, "events"), f.events.len() as u64);
    assert_eq!(count_after(line, "chunks"), 3);
    assert_eq!(count_after(line, "direct"), 8);
    assert_eq!(count_after(line, "outside"), outside);
    assert_eq!(
        count_after(line, "contributions"),
        hipkern::psf::fixtures::fixture_contributions(&f)
    );
    let check = out.line("check: ");
    assert!(check.ends_with(": accepted"), "{check}");
    assert!(
        check.contains("max_abs 0e0") && check.contains("max_rel 0e0"),
        "{check}"
    );
    assert!(out.line("psf: ").contains("from the event file's header"));
    let got = read_image_npy(&d.join("boundary.npy"), h, w);
    assert!(
        got.iter()
            .zip(want.data())
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "the .npy is bitwise the serial reference"
    );
    let mut names: Vec<_> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["boundary.bin", "boundary.npy"], "no temporaries");
}

/// Events written here (a `.bin` with the PSF in its header, and the same
/// events as N×7 `.npy` in C and Fortran order) replayed on a 256×192
/// image: the `.npy` image is bitwise the library's reference, the FITS
/// holds every value rounded to float32 with the right axes and header,
/// the PNG decodes to the library's tone map, and the image's flux is the
/// events' flux times the encircled fraction `1 − tail`.
#[test]
fn independent_events_to_fits_npy_png() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (w, h) = (256usize, 192usize);
    let r = support_radius(FWHM, BETA, TAIL);
    // Centres at least the support radius + 1 px from every edge.
    let m = r + 1.0;
    let events = random_events(0x5EED_0001, 400, (m, w as f64 - m), (m, h as f64 - m));
    fs::write(
        d.join("ev.bin"),
        event_file_bytes([FWHM, BETA, TAIL], &events),
    )
    .unwrap();
    fs::write(d.join("ev_c.npy"), events_npy(&events, false)).unwrap();
    fs::write(d.join("ev_f.npy"), events_npy(&events, true)).unwrap();
    let size = ["--width", "256", "--height", "192", "--phases", "16"];
    let replay = |input: &str, extra: &[&str]| {
        let mut args = vec!["replay", input, "--mode", "cpu"];
        args.extend_from_slice(&size);
        args.extend_from_slice(extra);
        let out = run(d, &args);
        out.assert_success(&format!("replay {input} {extra:?}"));
        out
    };
    let out = replay(
        "ev.bin",
        &["--check", "--out", "img.fits", "--png", "img.png"],
    );
    assert!(out.line("check: ").ends_with(": accepted"));
    let line = out.line("replay: ");
    assert_eq!(count_after(line, "events"), 400);
    assert_eq!(count_after(line, "direct"), 0);
    assert_eq!(count_after(line, "outside"), 0);
    let out_c = replay("ev_c.npy", &["--out", "img_c.npy"]);
    assert!(out_c
        .line("input: ")
        .contains("N×7 float64 .npy, 400 events"));
    assert!(out_c.line("psf: ").contains("from the defaults"));
    replay("ev_f.npy", &["--out", "img_f.npy"]);

    let want = reference(&star_events(&events), w, h, 16);
    for name in ["img_c.npy", "img_f.npy"] {
        let got = read_image_npy(&d.join(name), h, w);
        assert!(
            got.iter()
                .zip(want.data())
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{name} is bitwise the library's reference"
        );
    }

    // FITS: header, axes, every value the float64 one rounded to float32.
    let fits = Fits::read(&d.join("img.fits"));
    assert_eq!(fits.cards["SIMPLE"], "T");
    assert_eq!(fits.int("BITPIX"), -32);
    assert_eq!(fits.int("NAXIS"), 3);
    assert_eq!(fits.int("NAXIS1"), w as i64);
    assert_eq!(fits.int("NAXIS2"), h as i64);
    assert_eq!(fits.int("NAXIS3"), 3);
    assert_eq!(fits.real("FWHM"), FWHM);
    assert_eq!(fits.real("BETA"), BETA);
    assert_eq!(fits.real("TAIL"), TAIL);
    assert!(rel(fits.real("ALPHA"), alpha(FWHM, BETA)) < 1e-14);
    assert!(rel(fits.real("SUPPORT"), r) < 1e-14);
    assert!(rel(fits.real("SUPPORT"), 45.84777786185942) < 1e-14);
    assert_eq!(fits.int("PHASES"), 16);
    assert_eq!(fits.int("CACHERAD"), 47);
    assert_eq!(fits.int("NEVENTS"), 400);
    assert_eq!(fits.int("NDIRECT"), 0);
    assert_eq!(fits.int("NOUTSIDE"), 0);
    assert_eq!(fits.string("SINK"), "cpu");
    assert_eq!(fits.string("PSFMODEL"), "MOFFAT");
    for (k, c) in ["R", "G", "B"].iter().enumerate() {
        assert_eq!(fits.string(&format!("PLANE{}", k + 1)), *c);
    }
    assert!(fits.data.len() >= w * h * 3 * 4);
    assert!(
        fits.data[w * h * 3 * 4..].iter().all(|&b| b == 0),
        "zero padding"
    );
    let mut mismatches = 0;
    for c in 0..3 {
        for iy in 0..h {
            for ix in 0..w {
                let v = fits.f32_at((c * h + iy) * w + ix);
                let want = want.pixel(ix, iy)[c] as f32;
                if v.to_bits() != want.to_bits() {
                    mismatches += 1;
                }
            }
        }
    }
    assert_eq!(mismatches, 0, "FITS values ≠ the image rounded to float32");

    // PNG: size, 8-bit RGB, the library's tone map of the image.
    let decoder = png::Decoder::new(std::io::BufReader::new(
        fs::File::open(d.join("img.png")).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0u8; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (w as u32, h as u32));
    assert_eq!(info.color_type, png::ColorType::Rgb);
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let preview = hipkern::psf::tone_map(&want);
    assert_eq!(&buf[..info.buffer_size()], preview.rgb.as_slice());
    assert!(preview.white > 0.0);
    assert!(buf.contains(&255) && buf.contains(&0));

    // Flux: every event is wholly inside, so each channel's total is
    // Σ flux·colour times the encircled fraction 1 − tail (to the support
    // boundary's pixelisation: measured ~5e−12; without the factor 1e−8).
    let sums = want.sums();
    for (c, total) in [sums.r, sums.g, sums.b].into_iter().enumerate() {
        let deposited: f64 = events.iter().map(|e| e[2] * e[3 + c]).sum();
        let expect = deposited * (1.0 - TAIL);
        assert!(
            rel(total, expect) < 1e-10,
            "channel {c}: image {total} vs {expect} (rel {:e})",
            rel(total, expect)
        );
    }
    let line = out.line("image: flux R ");
    let printed: f64 = line["image: flux R ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rel(printed, sums.r) < 1e-15, "{line}");
}

/// The PSF flags replace the header's parameters (and go into the FITS).
#[test]
fn psf_flags_override_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let events = random_events(0x5EED_0002, 20, (60.0, 100.0), (60.0, 100.0));
    fs::write(
        d.join("ev.bin"),
        event_file_bytes([3.5, 3.0, 1e-6], &events),
    )
    .unwrap();
    let base = [
        "replay", "ev.bin", "--mode", "cpu", "--width", "160", "--height", "160", "--phases", "4",
    ];
    let mut args = base.to_vec();
    args.extend(["--out", "a.fits"]);
    let out = run(d, &args);
    out.assert_success("header PSF");
    assert!(out
        .line("psf: ")
        .contains("FWHM 3.5 px, β 3, tail 1e-6 (from the event file's header)"));
    let fits = Fits::read(&d.join("a.fits"));
    assert_eq!(
        (fits.real("FWHM"), fits.real("BETA"), fits.real("TAIL")),
        (3.5, 3.0, 1e-6)
    );
    let mut args = base.to_vec();
    args.extend(["--fwhm", "2.2", "--tail", "1e-7", "--out", "b.fits"]);
    let out = run(d, &args);
    out.assert_success("flags");
    assert!(out.line("psf: ").contains("FWHM 2.2 px, β 3, tail 1e-7"));
    let fits = Fits::read(&d.join("b.fits"));
    assert_eq!(
        (fits.real("FWHM"), fits.real("BETA"), fits.real("TAIL")),
        (2.2, 3.0, 1e-7)
    );
    assert!(rel(fits.real("SUPPORT"), support_radius(2.2, 3.0, 1e-7)) < 1e-14);
}

// ---- bad input ---------------------------------------------------------------

/// A folder with good inputs and outputs already there; each bad command
/// must fail with exit 2 and one line, and leave it byte-identical.
#[test]
fn bad_inputs_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let events = random_events(0x5EED_0003, 10, (60.0, 100.0), (60.0, 100.0));
    let good = event_file_bytes([FWHM, BETA, TAIL], &events);
    fs::write(d.join("ev.bin"), &good).unwrap();
    fs::write(d.join("ev.npy"), events_npy(&events, false)).unwrap();
    fs::write(d.join("img.fits"), "earlier contents of img.fits\n").unwrap();
    fs::write(d.join("img.png"), "earlier contents of img.png\n").unwrap();
    fs::create_dir(d.join("folder.fits")).unwrap();
    fs::create_dir(d.join("a[1]")).unwrap();
    let write = |name: &str, bytes: &[u8]| fs::write(d.join(name), bytes).unwrap();
    write("truncated.bin", &good[..good.len() - 13]);
    write("header_only.bin", &good[..30]);
    let mut trailing = good.clone();
    trailing.extend_from_slice(&[0; 56]);
    write("trailing.bin", &trailing);
    let mut magic = good.clone();
    magic[..8].copy_from_slice(b"NOTEVENT");
    write("magic.bin", &magic);
    let mut version = good.clone();
    version[8] = 2;
    write("version.bin", &version);
    let field = |k: usize, f: usize| 48 + 56 * k + 8 * f;
    let mut bad = events.clone();
    bad[3][0] = f64::NAN;
    write("nan.bin", &event_file_bytes([FWHM, BETA, TAIL], &bad));
    let mut bad = events.clone();
    bad[4][1] = f64::INFINITY;
    write("inf.npy", &events_npy(&bad, false));
    let mut bad = events.clone();
    bad[5][2] = -1.0;
    write("negflux.bin", &event_file_bytes([FWHM, BETA, TAIL], &bad));
    let mut bad = events.clone();
    bad[6][4] = -0.5;
    write("negcolour.bin", &event_file_bytes([FWHM, BETA, TAIL], &bad));
    let mut bad = events.clone();
    bad[7][6] = 0.0;
    write("support0.bin", &event_file_bytes([FWHM, BETA, TAIL], &bad));
    write("badpsf.bin", &event_file_bytes([FWHM, 0.5, TAIL], &events));
    let rows6: Vec<Vec<f64>> = events.iter().map(|e| e[..6].to_vec()).collect();
    write("six.npy", &npy_f64(&rows6, 6, false));
    let npy = events_npy(&events, false);
    write("short.npy", &npy[..npy.len() - 8]);
    assert_eq!(field(0, 0), 48);

    // `replay INPUT` with the base flags, each flag of `extra` (pairs)
    // replacing the base's or added.
    let r = |input: &str| -> Vec<String> {
        [
            "replay", input, "--mode", "cpu", "--width", "128", "--height", "128",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let with = |mut v: Vec<String>, extra: &[&str]| {
        for pair in extra.chunks(2) {
            match v.iter().position(|a| a == pair[0]) {
                Some(i) => v[i + 1] = pair[1].to_string(),
                None => v.extend(pair.iter().map(|s| s.to_string())),
            }
        }
        v
    };
    let out = ["--out", "img.fits", "--png", "img.png"];
    let cases: Vec<(&str, Vec<String>, Vec<&str>)> = vec![
        ("missing file", with(r("nope.bin"), &out), vec!["nope.bin"]),
        (
            "truncated",
            with(r("truncated.bin"), &out),
            vec!["truncated"],
        ),
        (
            "header only",
            with(r("header_only.bin"), &out),
            vec!["truncated header"],
        ),
        (
            "trailing bytes",
            with(r("trailing.bin"), &out),
            vec!["trailing bytes"],
        ),
        (
            "wrong magic",
            with(r("magic.bin"), &out),
            vec!["wrong magic"],
        ),
        (
            "wrong version",
            with(r("version.bin"), &out),
            vec!["version 2"],
        ),
        (
            "NaN x",
            with(r("nan.bin"), &out),
            vec!["event 3", "x = NaN"],
        ),
        (
            "inf y (.npy)",
            with(r("inf.npy"), &out),
            vec!["event 4", "y = inf"],
        ),
        (
            "negative flux",
            with(r("negflux.bin"), &out),
            vec!["event 5", "flux"],
        ),
        (
            "negative colour",
            with(r("negcolour.bin"), &out),
            vec!["event 6", "g ="],
        ),
        (
            "zero support",
            with(r("support0.bin"), &out),
            vec!["event 7", "support"],
        ),
        ("bad header PSF", with(r("badpsf.bin"), &out), vec!["beta"]),
        (
            ".npy of 6 columns",
            with(r("six.npy"), &out),
            vec!["(N, 7)"],
        ),
        ("short .npy", with(r("short.npy"), &out), vec!["short.npy"]),
        (
            "unknown mode",
            with(r("ev.bin"), &["--out", "img.fits", "--mode", "gpu"]),
            vec!["unknown --mode 'gpu'"],
        ),
        (
            "width 0",
            with(r("ev.bin"), &["--out", "img.fits", "--width", "0"]),
            vec!["--width 0"],
        ),
        (
            "too many pixels",
            with(
                r("ev.bin"),
                &[
                    "--out", "img.fits", "--width", "1048576", "--height", "1048576",
                ],
            ),
            vec!["pixels"],
        ),
        (
            "width not a number",
            with(r("ev.bin"), &["--out", "img.fits", "--width", "wide"]),
            vec!["--width"],
        ),
        (
            "fwhm 0",
            with(r("ev.bin"), &["--out", "img.fits", "--fwhm", "0"]),
            vec!["fwhm"],
        ),
        (
            "fwhm negative",
            with(r("ev.bin"), &["--out", "img.fits", "--fwhm", "-2"]),
            vec!["fwhm"],
        ),
        (
            "beta 1",
            with(r("ev.bin"), &["--out", "img.fits", "--beta", "1"]),
            vec!["beta"],
        ),
        (
            "tail 2",
            with(r("ev.bin"), &["--out", "img.fits", "--tail", "2"]),
            vec!["tail"],
        ),
        (
            "tail NaN",
            with(r("ev.bin"), &["--out", "img.fits", "--tail", "nan"]),
            vec!["tail"],
        ),
        (
            "phases 0",
            with(r("ev.bin"), &["--out", "img.fits", "--phases", "0"]),
            vec!["--phases 0"],
        ),
        (
            "out .png",
            with(r("ev.bin"), &["--out", "img.png"]),
            vec!["--out img.png", ".fits"],
        ),
        (
            "out no extension",
            with(r("ev.bin"), &["--out", "img"]),
            vec!["--out img"],
        ),
        (
            "png not .png",
            with(r("ev.bin"), &["--out", "img.fits", "--png", "img.jpg"]),
            vec!["--png img.jpg"],
        ),
        (
            "out a folder",
            with(r("ev.bin"), &["--out", "folder.fits"]),
            vec!["directory"],
        ),
        (
            "FITS in a folder cfitsio misreads",
            with(r("ev.bin"), &["--out", "a[1]/img.fits"]),
            vec!["[ ] ( )"],
        ),
        (
            "out names the input",
            with(r("ev.npy"), &["--out", "ev.npy"]),
            vec!["EVENTS and --out name the same file"],
        ),
        (
            "out names the input (path)",
            with(r("ev.npy"), &["--out", "./ev.npy"]),
            vec!["EVENTS and --out name the same file"],
        ),
        ("no --out", r("ev.bin"), vec!["--out"]),
        (
            "unknown fixture",
            vec![
                "fixture".into(),
                "crowded".into(),
                "--out".into(),
                "f.bin".into(),
            ],
            vec!["no fixture named \"crowded\""],
        ),
        (
            "fixture out .txt",
            vec![
                "fixture".into(),
                "dense".into(),
                "--out".into(),
                "f.txt".into(),
            ],
            vec!["--out f.txt"],
        ),
        (
            "fixture out a folder",
            vec![
                "fixture".into(),
                "dense".into(),
                "--out".into(),
                "folder.fits".into(),
            ],
            vec!["--out folder.fits"],
        ),
    ];
    for (what, args, needles) in cases {
        let before = snapshot(d);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let outcome = run(d, &args);
        outcome.assert_failure(what, 2, &needles);
        assert!(snapshot(d) == before, "{what}: the folder changed");
    }
}

/// An output whose folder is missing is refused before any work (exit
/// status 2), and the other output is not put in place either.
#[test]
fn an_unwritable_output_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let events = random_events(0x5EED_0004, 10, (60.0, 100.0), (60.0, 100.0));
    fs::write(
        d.join("ev.bin"),
        event_file_bytes([FWHM, BETA, TAIL], &events),
    )
    .unwrap();
    fs::write(d.join("img.fits"), "earlier contents of img.fits\n").unwrap();
    let base = [
        "replay", "ev.bin", "--mode", "cpu", "--width", "128", "--height", "128", "--phases", "2",
    ];
    for (out, png, needle) in [
        ("img.fits", "missing/p.png", "p.png"),
        ("missing/img.npy", "p.png", "img.npy"),
    ] {
        let before = snapshot(d);
        let mut args = base.to_vec();
        args.extend(["--out", out, "--png", png]);
        // A missing folder is the caller's path (exit 2), found before any
        // work.
        run(d, &args).assert_failure(&format!("{out} {png}"), 2, &[needle, "does not exist"]);
        assert!(snapshot(d) == before, "{out} {png}: the folder changed");
    }
}

/// On the cpu platform `--mode atomic` is the environment's failure: exit
/// status 1, one line, nothing written; bad input is still reported as
/// such (2) first.
#[cfg(hipkern_platform = "cpu")]
#[test]
fn atomic_mode_fails_cleanly_without_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let events = random_events(0x5EED_0005, 10, (60.0, 100.0), (60.0, 100.0));
    fs::write(
        d.join("ev.bin"),
        event_file_bytes([FWHM, BETA, TAIL], &events),
    )
    .unwrap();
    let before = snapshot(d);
    let args = [
        "replay", "ev.bin", "--mode", "atomic", "--width", "128", "--height", "128", "--out",
        "img.fits", "--png", "img.png", "--check",
    ];
    run(d, &args).assert_failure(
        "--mode atomic",
        1,
        &[
            "--mode atomic needs a usable device",
            "cpu platform",
            "use --mode cpu",
        ],
    );
    assert!(snapshot(d) == before);
    let mut args = args.to_vec();
    args.extend(["--tail", "0"]);
    run(d, &args).assert_failure("--mode atomic, bad tail", 2, &["tail"]);
    assert!(snapshot(d) == before);
}

// ---- GPU -------------------------------------------------------------------

/// Every device mode with `--check` on every fixture: the acceptance
/// (`docs/design/psf.md#acceptance`) against the serial CPU reference (the
/// program exits 1 when it fails); the device modes say how their chunks
/// went.
#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_device_modes_pass_the_check_on_every_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for name in hipkern::psf::fixtures::FIXTURE_NAMES {
        let file = format!("{name}.bin");
        run(d, &["fixture", name, "--out", &file]).assert_success(name);
        for mode in ["atomic", "tile16", "tile32", "adaptive"] {
            let out = run(
                d,
                &[
                    "replay", &file, "--mode", mode, "--check", "--out", "img.fits", "--png",
                    "img.png",
                ],
            );
            out.assert_success(&format!("{mode} {name}"));
            assert!(out.line("check: ").ends_with(": accepted"), "{mode} {name}");
            let chunks = out.line("chunks by mode: ");
            let by_tiles = !chunks.contains("tile16 0, tile32 0");
            match mode {
                "atomic" => assert!(!by_tiles, "{name}: {chunks}"),
                "tile16" | "tile32" => assert!(chunks.contains("atomic 0"), "{name}: {chunks}"),
                _ => {}
            }
            let fits = Fits::read(&d.join("img.fits"));
            assert_eq!(fits.string("SINK"), mode);
        }
    }
}
