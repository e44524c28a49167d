//! The PSF sink for `hipkern.psf` (`docs/design/psf.md`): the Moffat
//! model's parameters and pixel integrals, the phase cache as a shareable
//! object, and one sink class over either the float64 CPU sink or the
//! device sink, numpy arrays in and out.
//!
//! A call's events are validated here, every one of them, before the sink
//! sees any: the Rust CPU sink applies its chunks of 16,384 one by one, so
//! without this a bad event late in a long array would leave the earlier
//! chunks accumulated. After this check the CPU sink cannot refuse the
//! call; the device sink can still refuse a chunk for scratch
//! (`ScratchExceeded`, tile modes), after the chunks before it went in.
//!
//! The sink sits behind a mutex, locked only with the GIL released, so two
//! Python threads sharing a sink take turns instead of failing a borrow;
//! the class is frozen and `Sync` as PyO3 requires.
use crate::IntoPy;
use hipkern::host_memory::reserve_vec;
use hipkern::psf::{
    Binning, CacheConfig, ChunkMode, CpuSink, DeviceSink, HdrImage, MoffatPsf, PsfCache, SinkMode,
    SinkStats, StarEvent, CACHE_RADIUS, EVENT_FIELDS, MAX_DIRECT_SUPPORT, STAMP_SIDE,
};
use hipkern::Device;
use numpy::{
    PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3,
    PyReadwriteArray1, PyReadwriteArray3, PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A validated PSF from its three parameters (the error names the bad one).
fn moffat(fwhm: f64, beta: f64, tail: f64) -> PyResult<MoffatPsf> {
    MoffatPsf::new(fwhm, beta, tail).py()
}

/// `(alpha, norm, support_radius)` of a valid Moffat PSF; a `ValueError`
/// naming the parameter and its range otherwise.
#[pyfunction]
fn psf_params(fwhm: f64, beta: f64, tail: f64) -> PyResult<(f64, f64, f64)> {
    let p = moffat(fwhm, beta, tail)?;
    Ok((p.alpha(), p.norm(), p.support_radius()))
}

/// Writes into `out[k]` the PSF integrated over the unit pixel centred
/// at `(cu[k], cv[k])` relative to its centre (`MoffatPsf::pixel_integral`).
/// Outputs are allocated by the caller (numpy), here and below: numpy's
/// own allocation raises `MemoryError`, where rust-numpy's would panic.
#[pyfunction]
fn psf_pixel_integral(
    py: Python<'_>,
    fwhm: f64,
    beta: f64,
    tail: f64,
    cu: PyReadonlyArray1<'_, f64>,
    cv: PyReadonlyArray1<'_, f64>,
    mut out: PyReadwriteArray1<'_, f64>,
) -> PyResult<()> {
    let p = moffat(fwhm, beta, tail)?;
    let (cu, cv) = (
        contiguous(cu.as_slice(), "cu")?,
        contiguous(cv.as_slice(), "cv")?,
    );
    let out = contiguous(out.as_slice_mut(), "out")?;
    if cu.len() != cv.len() || cu.len() != out.len() {
        return Err(PyValueError::new_err("cu, cv and out differ in length"));
    }
    py.detach(|| {
        for ((o, &u), &v) in out.iter_mut().zip(cu).zip(cv) {
            *o = p.pixel_integral(u, v);
        }
    });
    Ok(())
}

/// The immutable phase cache, shared by every sink built over it.
#[pyclass(name = "PsfCache", module = "hipkern._native", frozen)]
struct PyPsfCache {
    cache: Arc<PsfCache>,
}

#[pymethods]
impl PyPsfCache {
    /// Builds the `(phases+1)²` stamps of the PSF on `threads` threads
    /// (0: every core), with the GIL released.
    #[new]
    fn new(
        py: Python<'_>,
        fwhm: f64,
        beta: f64,
        tail: f64,
        phases: i64,
        threads: i64,
    ) -> PyResult<Self> {
        let psf = moffat(fwhm, beta, tail)?;
        let config = CacheConfig {
            phases: count(phases, "phases")?,
            threads: count(threads, "threads")?,
        };
        let cache = py.detach(|| PsfCache::build_with(psf, &config)).py()?;
        Ok(PyPsfCache {
            cache: Arc::new(cache),
        })
    }

    #[getter]
    fn phases(&self) -> usize {
        self.cache.phases()
    }

    #[getter]
    fn nbytes(&self) -> usize {
        self.cache.bytes()
    }

    #[getter]
    fn build_seconds(&self) -> f64 {
        self.cache.build_time().as_secs_f64()
    }

    /// Stamp `(i, j)` (x phase i/P, y phase j/P) as a 95×95 array indexed
    /// `[dy + 47, dx + 47]`.
    fn stamp<'py>(&self, py: Python<'py>, i: i64, j: i64) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let p = self.cache.phases() as i64;
        // `PsfCache::stamp` panics beyond P: checked here first.
        if !(0..=p).contains(&i) || !(0..=p).contains(&j) {
            return Err(PyValueError::new_err(format!(
                "stamp ({i}, {j}): each phase index must be in 0..={p}"
            )));
        }
        let s = self.cache.stamp(i as usize, j as usize).to_vec();
        PyArray1::from_vec(py, s).reshape([STAMP_SIDE, STAMP_SIDE])
    }
}

/// A count or size from Python as usize: negative is a `ValueError`
/// naming it (usize extraction would raise `OverflowError`).
fn count(v: i64, what: &str) -> PyResult<usize> {
    usize::try_from(v).map_err(|_| PyValueError::new_err(format!("{what} = {v} is negative")))
}

fn parse_mode(mode: &str) -> PyResult<SinkMode> {
    match mode {
        "atomic" => Ok(SinkMode::Atomic),
        "tile16" => Ok(SinkMode::Tile16),
        "tile32" => Ok(SinkMode::Tile32),
        "adaptive" => Ok(SinkMode::Adaptive),
        _ => Err(PyValueError::new_err(format!(
            "mode = {mode:?} is unknown (atomic, tile16, tile32 or adaptive)"
        ))),
    }
}

fn parse_binning(binning: &str) -> PyResult<Binning> {
    match binning {
        "device" => Ok(Binning::Device),
        "host" => Ok(Binning::Host),
        _ => Err(PyValueError::new_err(format!(
            "binning = {binning:?} is unknown (device or host)"
        ))),
    }
}

/// The events of an (N, 7) float64 C-contiguous array, every one checked
/// as the sink would check it (the error names the first bad one's index),
/// before any is accumulated.
fn events_of(a: &PyReadonlyArray2<'_, f64>, direct: bool) -> PyResult<Vec<StarEvent>> {
    let shape = a.shape();
    if shape[1] != EVENT_FIELDS.len() {
        return Err(PyValueError::new_err(format!(
            "events has shape ({}, {}): need (N, 7), columns {}",
            shape[0],
            shape[1],
            EVENT_FIELDS.join(", ")
        )));
    }
    let flat = contiguous(a.as_slice(), "events")?;
    let n = shape[0];
    let mut events = reserve_vec(n, &|| format!("a copy of the {n} events")).py()?;
    events.extend(
        flat.chunks_exact(7)
            .map(|r| StarEvent::from_array([r[0], r[1], r[2], r[3], r[4], r[5], r[6]])),
    );
    for (i, e) in events.iter().enumerate() {
        e.validate(i).py()?;
        if direct && e.support > MAX_DIRECT_SUPPORT {
            return Err(PyValueError::new_err(format!(
                "event {i}: support = {:e} px exceeds the direct path's limit {MAX_DIRECT_SUPPORT:e} px",
                e.support
            )));
        }
        if !direct && !PsfCache::fits(e.x, e.y, e.support) {
            return Err(PyValueError::new_err(format!(
                "event {i}: support = {} at (x, y) = ({}, {}) reaches beyond the cache's \
                 ±{CACHE_RADIUS} px offsets (every support below 47.5 px fits); pass \
                 direct=True to render such events by the direct path",
                e.support, e.x, e.y
            )));
        }
    }
    Ok(events)
}

enum Backend {
    Cpu(CpuSink),
    // Boxed: the device sink is ten times the CPU one's size.
    Device(Box<DeviceSink>),
}

impl Backend {
    fn stats(&self) -> SinkStats {
        match self {
            Backend::Cpu(s) => s.stats(),
            Backend::Device(s) => s.stats(),
        }
    }
}

/// A PSF sink: the float64 CPU sink (`device` None) or the device sink.
#[pyclass(name = "PsfSink", module = "hipkern._native", frozen)]
struct PySink {
    /// None once closed.
    inner: Mutex<Option<Backend>>,
    #[pyo3(get)]
    width: usize,
    #[pyo3(get)]
    height: usize,
    /// The GPU ordinal, None on the CPU.
    #[pyo3(get)]
    device: Option<usize>,
    /// The device sink's mode, None on the CPU.
    #[pyo3(get)]
    mode: Option<&'static str>,
    /// The CPU sink's threads, 0 on a device.
    #[pyo3(get)]
    threads: usize,
}

impl PySink {
    /// The sink, locked (call with the GIL released); None once closed.
    fn lock(&self) -> MutexGuard<'_, Option<Backend>> {
        // A panic cannot happen while the lock is held (every path returns
        // errors); a poisoned lock would still hold a consistent sink.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `f` on the sink with the GIL released; a closed sink's error.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Backend) -> hipkern::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| match self.lock().as_mut() {
            Some(b) => Ok(f(b)),
            None => Err(()),
        })
        .map_err(|()| PyValueError::new_err("the sink is closed"))?
        .py()
    }

    /// The shape check of an image given to or taken from the sink.
    fn check_shape(&self, what: &str, shape: &[usize]) -> PyResult<()> {
        if shape != [self.height, self.width, 3] {
            return Err(PyValueError::new_err(format!(
                "{what} has shape {shape:?}: need (height, width, 3) = ({}, {}, 3)",
                self.height, self.width
            )));
        }
        Ok(())
    }

    /// The values of an image to start from: this sink's shape, C order,
    /// every value finite (a NaN would spread through every later sum).
    fn start_image<'a>(&self, a: &'a PyReadonlyArray3<'_, f64>) -> PyResult<&'a [f64]> {
        self.check_shape("image", a.shape())?;
        let data = contiguous(a.as_slice(), "image")?;
        match data.iter().position(|v| !v.is_finite()) {
            Some(k) => Err(PyValueError::new_err(format!(
                "image holds the non-finite value {} at flat index {k}",
                data[k]
            ))),
            None => Ok(data),
        }
    }
}

/// `data` (width·height·3 values) as an image, copied fallibly.
fn host_image(width: usize, height: usize, data: &[f64]) -> hipkern::Result<HdrImage> {
    let mut v = reserve_vec(data.len(), &|| {
        format!("a copy of the {width}×{height} image")
    })?;
    v.extend_from_slice(data);
    HdrImage::from_data(width, height, v)
}

fn contiguous<T, E>(r: Result<T, E>, what: &str) -> PyResult<T> {
    r.map_err(|_| PyValueError::new_err(format!("{what} must be C-contiguous")))
}

#[pymethods]
impl PySink {
    /// A black `width × height` image over `cache`, on the CPU (`device`
    /// None, `threads` row-parallel threads, 0 = every core) or on device
    /// `device` in `mode` with tile lists built per `binning`; `image`
    /// (height, width, 3) float64 is the image to start from.
    #[new]
    #[pyo3(signature = (cache, width, height, device=None, mode=None, binning="device", threads=0, image=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        cache: &PyPsfCache,
        width: i64,
        height: i64,
        device: Option<i64>,
        mode: Option<&str>,
        binning: &str,
        threads: i64,
        image: Option<PyReadonlyArray3<'_, f64>>,
    ) -> PyResult<Self> {
        let (width, height) = (count(width, "width")?, count(height, "height")?);
        let threads = count(threads, "threads")?;
        let binning = parse_binning(binning)?;
        let mode = mode.map(parse_mode).transpose()?;
        let device = device.map(|d| count(d, "device")).transpose()?;
        if device.is_none() && (mode.is_some() || binning != Binning::Device) {
            return Err(PyValueError::new_err(
                "mode and binning choose how the device sink works: device=None renders on the CPU",
            ));
        }
        if device.is_some() && threads != 0 {
            return Err(PyValueError::new_err(
                "threads is the CPU sink's (device=None); the device sink takes none",
            ));
        }
        let cache = cache.cache.clone();
        let mut sink = PySink {
            inner: Mutex::new(None),
            width,
            height,
            device,
            mode: None,
            threads: 0,
        };
        let start = image.as_ref().map(|a| sink.start_image(a)).transpose()?;
        let backend = py
            .detach(|| -> hipkern::Result<Backend> {
                let Some(ordinal) = device else {
                    let mut s = CpuSink::parallel(cache, width, height, threads)?;
                    if let Some(d) = start {
                        s.image_mut().data_mut().copy_from_slice(d);
                    }
                    return Ok(Backend::Cpu(s));
                };
                let dev = Device::new(ordinal)?;
                let mut s = DeviceSink::builder(&dev, cache, width, height)
                    .mode(mode.unwrap_or(SinkMode::Atomic))
                    .binning(binning)
                    .build()?;
                if let Some(d) = start {
                    s.upload_image(&host_image(width, height, d)?)?;
                }
                Ok(Backend::Device(Box::new(s)))
            })
            .py()?;
        sink.threads = match &backend {
            Backend::Cpu(s) => s.threads(),
            Backend::Device(_) => 0,
        };
        sink.mode = match &backend {
            Backend::Cpu(_) => None,
            Backend::Device(s) => Some(s.mode().name()),
        };
        *sink.inner.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(backend);
        Ok(sink)
    }

    /// Accumulates (N, 7) float64 events; with `direct`, events too large
    /// for the cache go by the exact direct path (the Rust sinks'
    /// `accumulate_routed`), else they are refused. Returns how many went
    /// directly.
    #[pyo3(signature = (events, direct=true))]
    fn accumulate(
        &self,
        py: Python<'_>,
        events: PyReadonlyArray2<'_, f64>,
        direct: bool,
    ) -> PyResult<usize> {
        let events = events_of(&events, direct)?;
        self.with(py, |b| match (b, direct) {
            (Backend::Cpu(s), true) => s.accumulate_routed(&events),
            (Backend::Cpu(s), false) => s.accumulate(&events).map(|()| 0),
            (Backend::Device(s), true) => s.accumulate_routed(&events),
            (Backend::Device(s), false) => s.accumulate(&events).map(|()| 0),
        })
    }

    /// Writes the image so far, whole, into `out` ((height, width, 3)
    /// float64, C order).
    fn image(&self, py: Python<'_>, mut out: PyReadwriteArray3<'_, f64>) -> PyResult<()> {
        self.check_shape("out", out.shape())?;
        let dst = contiguous(out.as_slice_mut(), "out")?;
        self.with(py, |b| {
            match b {
                Backend::Cpu(s) => dst.copy_from_slice(s.image().data()),
                Backend::Device(s) => dst.copy_from_slice(s.finish_pinned()?),
            }
            Ok(())
        })
    }

    /// Replaces the image by `image` ((height, width, 3) float64, finite).
    fn set_image(&self, py: Python<'_>, image: PyReadonlyArray3<'_, f64>) -> PyResult<()> {
        let data = self.start_image(&image)?;
        let (w, h) = (self.width, self.height);
        self.with(py, |b| match b {
            Backend::Cpu(s) => {
                s.image_mut().data_mut().copy_from_slice(data);
                Ok(())
            }
            Backend::Device(s) => s.upload_image(&host_image(w, h, data)?),
        })
    }

    /// Back to a black image and zero counters (buffers kept).
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |b| match b {
            Backend::Cpu(s) => {
                // `CpuSink` has no reset: a new one over the same cache,
                // the image allocated afresh (fallibly).
                *s = CpuSink::parallel(
                    s.cache().clone(),
                    s.image().width(),
                    s.image().height(),
                    s.threads(),
                )?;
                Ok(())
            }
            Backend::Device(s) => s.reset(),
        })
    }

    /// The counters: chunks, events, cached, direct, outside, contributions.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.with(py, |b| Ok(b.stats()))?;
        let d = PyDict::new(py);
        for (k, v) in [
            ("chunks", s.chunks),
            ("events", s.events),
            ("cached", s.cached),
            ("direct", s.direct),
            ("outside", s.outside),
            ("contributions", s.contributions),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// The device sink's chunks of the cached path, in order, as
    /// (events, mode) with mode "atomic", "tile16" or "tile32"; empty on
    /// the CPU.
    #[getter]
    fn chunk_log(&self, py: Python<'_>) -> PyResult<Vec<(usize, &'static str)>> {
        self.with(py, |b| {
            Ok(match b {
                Backend::Cpu(_) => Vec::new(),
                Backend::Device(s) => s
                    .chunk_log()
                    .iter()
                    .map(|c| {
                        let m = match c.mode {
                            ChunkMode::Atomic => "atomic",
                            ChunkMode::Tile16 => "tile16",
                            ChunkMode::Tile32 => "tile32",
                        };
                        (c.events, m)
                    })
                    .collect(),
            })
        })
    }

    /// Frees the sink (its image, and on a device its device memory) now.
    fn close(&self, py: Python<'_>) {
        let sink = py.detach(|| self.lock().take());
        // The device sink's drop synchronizes its streams: without the GIL.
        py.detach(move || drop(sink));
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        py.detach(|| self.lock().is_none())
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(psf_params, m)?)?;
    m.add_function(wrap_pyfunction!(psf_pixel_integral, m)?)?;
    m.add_class::<PyPsfCache>()?;
    m.add_class::<PySink>()?;
    Ok(())
}
