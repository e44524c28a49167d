//! Near-field tables and List 1 for `hipkern.nearfield`, in volumential's
//! conventions (`docs/design/nearfield.md`, `docs/design/list1.md`): a
//! table built from its symmetry representatives or entry by entry, read
//! from or stored in hipkern's SQLite cache; 2:1 trees as arrays; List 1 on
//! the CPU in float64 (the definition) or on a device under the fast or
//! exact contract.
//!
//! The Python wrapper checks types, dtypes and shapes and hands over
//! contiguous arrays of the types below; hipkern checks everything else
//! (ranges, CSR offsets, every pair a List 1 pair of a 2:1 tree, finite
//! values) before any work, so a bad value is a `ValueError` with
//! hipkern's own message. Device work is checked on the host first too: a
//! bad tree never opens a device.
use crate::IntoPy;
use hipkern::host_memory::reserve_vec;
use hipkern::nearfield::{
    check_kernel_and_extent, check_table_size, evaluate_list1, gauss_legendre, BalancedTree,
    BaseKernel, CacheKey, CachedTable, Cases, Derivative, EntryQuadrature, Kernel, List1Boxes,
    List1Contract, List1DevicePlan, List1Evaluator, List1Layout, List1Payload, List1ReducedTables,
    List1Tables, NearFieldTable, RandomTreeConfig, ReducedTable, SymmetryMode, TableCache,
    MAX_TREE_LEVEL,
};
use hipkern::{Device, Error, Result, Stream};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

fn bad<T>(msg: String) -> Result<T> {
    Err(Error::InvalidInput(msg))
}

/// A near-field table: the reduced one when it was built from its
/// representatives (`symmetry="full"`), and the dense one, computed from
/// the reduced one the first time it is needed (the CPU evaluator, the
/// dense layout, `dense()`), or built entry by entry (`symmetry="none"`).
#[pyclass(name = "NearFieldTable", module = "hipkern._native", frozen)]
pub(crate) struct Table {
    reduced: Option<ReducedTable>,
    dense: OnceLock<NearFieldTable>,
    loaded: bool,
}

/// What either kind of table knows besides its values: kernel, q, extent,
/// nodes, mode normalisers, cases.
type Meta<'a> = (&'a Kernel, usize, f64, &'a [f64], &'a [f64], &'a Cases);

impl Table {
    fn new(table: CachedTable, loaded: bool) -> Table {
        let (reduced, dense) = match table {
            CachedTable::Dense(t) => (None, t.into()),
            CachedTable::Reduced(t) => (Some(t), OnceLock::new()),
        };
        Table {
            reduced,
            dense,
            loaded,
        }
    }

    /// The dense table (every entry in entry-id order).
    fn dense(&self) -> Result<&NearFieldTable> {
        if let Some(t) = self.dense.get() {
            return Ok(t);
        }
        let Some(r) = &self.reduced else {
            return bad("near-field table: holds no values".into());
        };
        // Two threads may both expand; the first one stored is kept.
        let t = r.to_dense()?;
        Ok(self.dense.get_or_init(|| t))
    }

    fn meta(&self) -> Result<Meta<'_>> {
        if let Some(r) = &self.reduced {
            let (q, n) = (r.q_points(), r.mode_normalizers());
            return Ok((r.kernel(), r.q(), r.extent(), q, n, r.cases()));
        }
        let d = self.dense()?;
        let (q, n) = (d.q_points(), d.mode_normalizers());
        Ok((d.kernel(), d.q(), d.extent(), q, n, d.cases()))
    }

    fn kernel(&self) -> Option<&Kernel> {
        self.meta().ok().map(|m| m.0)
    }
}

#[pymethods]
impl Table {
    /// Everything but the entries, once (the wrapper keeps it): dim, q,
    /// extent, n_modes, n_cases, self_case, kernel ("laplace", "yukawa" or
    /// "constant"), lam, derivative (None, or (kind, axis or direction)),
    /// symmetry ("full": built from and holding the representatives, or
    /// "none"), loaded (read from the cache, else built), q_points (`q^d ×
    /// dim` row-major, in `[0, extent]`), mode_normalizers, case_vectors
    /// (`n_cases × dim`, case-id order), case_indices, and for "full" the
    /// reduced_entry_ids and reduced_data.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (k, q, extent, q_points, normalizers, cases) = self.meta().py()?;
        let d = PyDict::new(py);
        d.set_item("dim", k.dim())?;
        d.set_item("q", q)?;
        d.set_item("extent", extent)?;
        d.set_item("n_modes", q.pow(k.dim() as u32))?;
        d.set_item("n_cases", cases.len())?;
        d.set_item("self_case", cases.self_case())?;
        let (name, lam) = match k.base() {
            BaseKernel::Laplace => ("laplace", None),
            BaseKernel::Yukawa { lambda } => ("yukawa", Some(lambda)),
            BaseKernel::Constant => ("constant", None),
        };
        d.set_item("kernel", name)?;
        d.set_item("lam", lam)?;
        match k.derivative() {
            None => d.set_item("derivative", None::<()>)?,
            Some(Derivative::AxisTarget(a)) => d.set_item("derivative", ("target", *a))?,
            Some(Derivative::AxisSource(a)) => d.set_item("derivative", ("source", *a))?,
            Some(Derivative::DirectionalSource(v)) => {
                d.set_item("derivative", ("direction", v.clone()))?
            }
        }
        let full = self.reduced.is_some();
        d.set_item("symmetry", if full { "full" } else { "none" })?;
        d.set_item("loaded", self.loaded)?;
        d.set_item("q_points", PyArray1::from_slice(py, q_points))?;
        d.set_item("mode_normalizers", PyArray1::from_slice(py, normalizers))?;
        let v: Vec<i32> = (0..cases.len())
            .flat_map(|i| cases.vector(i).to_vec())
            .collect();
        d.set_item("case_vectors", PyArray1::from_vec(py, v))?;
        d.set_item(
            "case_indices",
            PyArray1::from_slice(py, cases.case_indices()),
        )?;
        if let Some(r) = &self.reduced {
            d.set_item(
                "reduced_entry_ids",
                PyArray1::from_slice(py, r.reduced_entry_ids()),
            )?;
            d.set_item("reduced_data", PyArray1::from_slice(py, r.reduced_data()))?;
        }
        Ok(d)
    }

    /// Every entry in entry-id order, `case·q^{2d} + s·q^d + t`.
    fn dense_data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let t = py.detach(|| self.dense()).py()?;
        Ok(PyArray1::from_slice(py, t.data()))
    }
}

/// The kernel named by the wrapper's arguments (`derivative`: None,
/// "target", "source" or "direction").
fn kernel_of(
    name: &str,
    dim: usize,
    lam: Option<f64>,
    derivative: Option<&str>,
    axis: usize,
    direction: Option<Vec<f64>>,
) -> Result<Kernel> {
    let base = match (name, lam) {
        ("laplace", None) => BaseKernel::Laplace,
        ("constant", None) => BaseKernel::Constant,
        ("yukawa", Some(lambda)) => BaseKernel::Yukawa { lambda },
        ("yukawa", None) => {
            return bad("kernel 'yukawa' needs lam (the screening parameter, > 0)".into())
        }
        ("laplace" | "constant", Some(_)) => {
            return bad(format!("lam is only for kernel 'yukawa', not '{name}'"))
        }
        _ => {
            return bad(format!(
                "unknown kernel '{name}' (laplace, constant or yukawa)"
            ))
        }
    };
    let k = Kernel::new(base, dim)?;
    match (derivative, direction) {
        (None, _) => Ok(k),
        (Some("target"), _) => k.axis_target_derivative(axis),
        (Some("source"), _) => k.axis_source_derivative(axis),
        (Some("direction"), Some(v)) => k.directional_source_derivative(&v),
        (Some(other), _) => bad(format!(
            "derivative '{other}': expected ('target', axis), ('source', axis) or \
             ('direction', vector)"
        )),
    }
}

/// Builds a table, or reads it from `cache` (created if missing) when
/// there and not `rebuild`, storing what it built. Every argument is
/// checked before the cache is opened.
#[pyfunction]
#[pyo3(signature = (kernel, dim, q, extent, lam=None, derivative=None, axis=0,
    direction=None, symmetry="full", cache=None, rebuild=false))]
#[allow(clippy::too_many_arguments)]
fn build_table(
    py: Python<'_>,
    kernel: &str,
    dim: usize,
    q: usize,
    extent: f64,
    lam: Option<f64>,
    derivative: Option<&str>,
    axis: usize,
    direction: Option<Vec<f64>>,
    symmetry: &str,
    cache: Option<PathBuf>,
    rebuild: bool,
) -> PyResult<Table> {
    // The size first: its message names dim and q and the largest q.
    check_table_size(dim, q).py()?;
    let k = kernel_of(kernel, dim, lam, derivative, axis, direction).py()?;
    check_kernel_and_extent(&k, extent).py()?;
    let mode = match symmetry {
        "full" => SymmetryMode::Full,
        "none" => SymmetryMode::None,
        other => {
            let msg = format!("symmetry '{other}': expected 'full' or 'none'");
            return Err(PyValueError::new_err(msg));
        }
    };
    let quad = EntryQuadrature::default();
    py.detach(move || {
        let key = CacheKey::new(&k, q, extent, &quad, mode)?;
        let cache = cache.map(TableCache::open).transpose()?;
        let cached = match &cache {
            Some(c) if !rebuild => c.get(&key)?,
            _ => None,
        };
        let loaded = cached.is_some();
        let table = match (cached, mode) {
            (Some(t), _) => t,
            (None, SymmetryMode::None) => {
                CachedTable::Dense(NearFieldTable::build(&k, q, extent, &quad)?)
            }
            (None, _) => CachedTable::Reduced(ReducedTable::build(&k, q, extent, &quad)?),
        };
        if let (Some(c), false) = (&cache, loaded) {
            match &table {
                CachedTable::Dense(t) => c.put_dense(t)?,
                CachedTable::Reduced(t) => c.put_reduced(t)?,
            }
        }
        Ok(Table::new(table, loaded))
    })
    .py()
}

type TreeArrays<'py> = (
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<u32>>,
);

/// A 2:1-balanced tree's leaves as (centers, levels, list1_starts,
/// list1_sources), Morton order: uniform at `max_level` without a seed,
/// else random (`BalancedTree::random`). The wrapper refuses refinements
/// that could grow without bound before this is called.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn tree(
    py: Python<'_>,
    dim: usize,
    root_lower: Vec<f64>,
    root_extent: f64,
    seed: Option<u64>,
    max_level: u32,
    min_level: u32,
    attractors: usize,
    refine_probability: f64,
) -> PyResult<TreeArrays<'_>> {
    let t = py
        .detach(|| match seed {
            None => BalancedTree::uniform(dim, max_level, &root_lower, root_extent),
            Some(seed) => BalancedTree::random(&RandomTreeConfig {
                min_level,
                attractors,
                refine_probability,
                root_lower,
                root_extent,
                ..RandomTreeConfig::new(dim, seed, max_level)
            }),
        })
        .py()?;
    Ok((
        PyArray1::from_slice(py, t.centers()),
        PyArray1::from_slice(py, t.levels()),
        PyArray1::from_slice(py, t.list1_starts()),
        PyArray1::from_slice(py, t.list1_sources()),
    ))
}

/// The `q^d` Gauss–Legendre nodes of every box, `n_boxes × q^d × dim`
/// row-major (per box in node order), as `BalancedTree::box_points`
/// computes them: `centre − h/2 + ξ_m` with `h = root_extent/2^level`.
#[pyfunction]
fn box_points<'py>(
    py: Python<'py>,
    dim: usize,
    root_extent: f64,
    centers: PyReadonlyArray1<'py, f64>,
    levels: PyReadonlyArray1<'py, u32>,
    q: usize,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let (c, lv) = (centers.as_slice()?, levels.as_slice()?);
    let out = py
        .detach(|| {
            // The wrapper's Tree checked the values; these keep every index
            // below in bounds.
            check_table_size(dim, q)?;
            if c.len() != lv.len() * dim || lv.iter().any(|&l| l > MAX_TREE_LEVEL) {
                return bad("box points: centers, levels or a level out of range".into());
            }
            // The nodes of each level once (the same values box_points uses).
            let mut nodes: Vec<Option<Vec<f64>>> = vec![None; MAX_TREE_LEVEL as usize + 1];
            let nq = q.pow(dim as u32);
            let mut out = reserve_vec(lv.len() * nq * dim, &|| "the box points".into())?;
            for (b, &l) in lv.iter().enumerate() {
                let h = root_extent / f64::from(1u32 << l);
                let x = match &mut nodes[l as usize] {
                    Some(x) => x,
                    slot => slot.insert(gauss_legendre(q, h)?.0),
                };
                for m in 0..nq {
                    for k in 0..dim {
                        let mk = (m / q.pow((dim - 1 - k) as u32)) % q;
                        out.push(c[b * dim + k] - 0.5 * h + x[mk]);
                    }
                }
            }
            Ok(out)
        })
        .py()?;
    Ok(PyArray1::from_vec(py, out))
}

/// A tree as List 1 input, from the wrapper: (dim, root_extent, centers
/// (flat), levels, target_boxes, source_starts, source_boxes).
#[derive(FromPyObject)]
struct BoxArgs<'py>(
    usize,
    f64,
    PyReadonlyArray1<'py, f64>,
    PyReadonlyArray1<'py, u32>,
    PyReadonlyArray1<'py, u32>,
    PyReadonlyArray1<'py, u32>,
    PyReadonlyArray1<'py, u32>,
);

impl BoxArgs<'_> {
    fn view(&self) -> PyResult<List1Boxes<'_>> {
        Ok(List1Boxes {
            dim: self.0,
            root_extent: self.1,
            centers: self.2.as_slice()?,
            levels: self.3.as_slice()?,
            target_boxes: self.4.as_slice()?,
            source_starts: self.5.as_slice()?,
            source_boxes: self.6.as_slice()?,
        })
    }
}

/// One table that scales, or one per source level (`tables[l]` at
/// `root_extent/2^l`).
fn refs<'a>(tables: &'a [Bound<'_, Table>], per_level: bool) -> PyResult<Vec<&'a Table>> {
    let r: Vec<&Table> = tables.iter().map(|t| t.get()).collect();
    if r.is_empty() || (!per_level && r.len() != 1) {
        let msg = format!(
            "table: one table, or a non-empty per-level list ({} given)",
            r.len()
        );
        return Err(PyValueError::new_err(msg));
    }
    Ok(r)
}

/// The host payload of `tables` in `layout` ("auto": ORBIT for reduced
/// tables, the fallback for a directional derivative, which ORBIT does not
/// cover; dense for dense tables). Reduced tables give every layout the
/// values of their dense expansion, the CPU evaluator's.
fn payload(tables: &[&Table], per_level: bool, layout: &str) -> Result<List1Payload> {
    let reduced: Option<Vec<&ReducedTable>> = tables.iter().map(|t| t.reduced.as_ref()).collect();
    let layout = match layout {
        "auto" if reduced.is_none() => List1Layout::Dense,
        "auto" => match tables[0].kernel().and_then(Kernel::derivative) {
            Some(Derivative::DirectionalSource(_)) => List1Layout::Fallback,
            _ => List1Layout::Orbit,
        },
        other => other.parse()?,
    };
    match reduced {
        Some(r) if per_level => {
            let owned: Vec<ReducedTable> = r.into_iter().cloned().collect();
            List1Payload::from_reduced(&List1ReducedTables::PerLevel(&owned), layout)
        }
        Some(r) => List1Payload::from_reduced(&List1ReducedTables::Scaled(r[0]), layout),
        None if per_level => {
            let ts = tables.iter().map(|t| t.dense().cloned());
            let ts = ts.collect::<Result<Vec<_>>>()?;
            List1Payload::from_tables(&List1Tables::PerLevel(&ts), layout)
        }
        None => List1Payload::from_tables(&List1Tables::Scaled(tables[0].dense()?), layout),
    }
}

/// A table uploaded to one device in one layout, with a stream of its
/// own; plans and evaluations under the contract it was made with.
#[pyclass(name = "List1Evaluator", module = "hipkern._native", frozen)]
struct Evaluator {
    ev: List1Evaluator,
    stream: Stream,
}

/// A tree's validated pairs on the evaluator's device, with the kernel its
/// contract chose; evaluated any number of times.
#[pyclass(name = "List1Plan", module = "hipkern._native", frozen)]
struct Plan {
    evaluator: Py<Evaluator>,
    plan: Mutex<List1DevicePlan>,
    kernel: &'static str,
    reason: String,
}

fn open_evaluator(
    payload: &List1Payload,
    device: usize,
    contract: List1Contract,
) -> Result<Evaluator> {
    let dev = Device::new(device)?;
    let mut ev = List1Evaluator::new(&dev, payload)?;
    ev.set_contract(contract);
    let stream = dev.new_stream()?;
    Ok(Evaluator { ev, stream })
}

#[pymethods]
impl Evaluator {
    #[new]
    fn new(
        py: Python<'_>,
        tables: Vec<Bound<'_, Table>>,
        per_level: bool,
        device: usize,
        layout: &str,
        contract: &str,
    ) -> PyResult<Evaluator> {
        let tables = refs(&tables, per_level)?;
        let contract: List1Contract = contract.parse().py()?;
        py.detach(|| open_evaluator(&payload(&tables, per_level, layout)?, device, contract))
            .py()
    }
    /// layout, contract, device, upload_bytes (the table on the device),
    /// tensor_cores (whether the fast contract may use FP64 tensor cores).
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("layout", self.ev.layout().name())?;
        d.set_item("contract", self.ev.contract().name())?;
        d.set_item("device", self.ev.device().ordinal())?;
        d.set_item("upload_bytes", self.ev.upload_bytes().total())?;
        d.set_item("tensor_cores", self.ev.tensor_cores_available())?;
        Ok(d)
    }
    /// Validates the tree on the host, chooses the kernel, uploads the pairs.
    fn plan(slf: &Bound<'_, Self>, boxes: BoxArgs<'_>) -> PyResult<Plan> {
        let b = boxes.view()?;
        let ev = slf.get();
        let plan = slf.py().detach(|| ev.ev.plan(&b)).py()?;
        Ok(Plan {
            evaluator: slf.clone().unbind(),
            kernel: plan.kernel().name(),
            reason: plan.reason().to_string(),
            plan: Mutex::new(plan),
        })
    }
}

#[pymethods]
impl Plan {
    /// The kernel the contract chose and why.
    fn kernel(&self) -> (&'static str, &str) {
        (self.kernel, &self.reason)
    }
    /// List 1 of host values over this plan (length and finiteness checked).
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        density: PyReadonlyArray1<'py, f64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let f = density.as_slice()?;
        let ev = self.evaluator.get();
        let out = py
            .detach(|| {
                // The grouped kernel's scratch is the plan's: one evaluation
                // at a time.
                let Ok(mut plan) = self.plan.lock() else {
                    return bad("list 1 plan: an earlier evaluation failed inside".into());
                };
                ev.ev.evaluate_plan(&ev.stream, &mut plan, f)
            })
            .py()?;
        Ok(PyArray1::from_vec(py, out))
    }
}

/// List 1 in one call, `n_targets × q^d`: on the CPU in float64
/// (`evaluate_list1`, the definition) without a device; on device `device`
/// after everything was checked on the host (the tables' payload, the tree,
/// the values), so that bad input never opens a device.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn list1<'py>(
    py: Python<'py>,
    tables: Vec<Bound<'py, Table>>,
    per_level: bool,
    boxes: BoxArgs<'py>,
    density: PyReadonlyArray1<'py, f64>,
    device: Option<usize>,
    layout: &str,
    contract: &str,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let tables = refs(&tables, per_level)?;
    let contract: List1Contract = contract.parse().py()?;
    let (b, f) = (boxes.view()?, density.as_slice()?);
    let out = py
        .detach(|| match device {
            // PerLevel takes a slice of tables: copies of the dense ones.
            None if per_level => {
                let ts = tables.iter().map(|t| t.dense().cloned());
                let ts = ts.collect::<Result<Vec<_>>>()?;
                evaluate_list1(&b, &List1Tables::PerLevel(&ts), f)
            }
            None => evaluate_list1(&b, &List1Tables::Scaled(tables[0].dense()?), f),
            Some(device) => {
                let payload = payload(&tables, per_level, layout)?;
                payload.check(&b, Some(f))?;
                let e = open_evaluator(&payload, device, contract)?;
                e.ev.evaluate(&e.stream, &b, f)
            }
        })
        .py()?;
    Ok(PyArray1::from_vec(py, out))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Table>()?;
    m.add_class::<Evaluator>()?;
    m.add_class::<Plan>()?;
    m.add_function(wrap_pyfunction!(build_table, m)?)?;
    m.add_function(wrap_pyfunction!(tree, m)?)?;
    m.add_function(wrap_pyfunction!(box_points, m)?)?;
    m.add_function(wrap_pyfunction!(list1, m)?)?;
    Ok(())
}
