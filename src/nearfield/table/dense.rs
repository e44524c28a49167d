//! A dense near-field table: every entry `T[case, s, t]` of one kernel,
//! dimension, order `q` and source box extent `L`, in entry-id order
//! (`case·q^{2d} + s·q^d + t`, [`crate::nearfield::Cases::entry_id`]), with the data a
//! user of the table needs next to it: the source box's nodes
//! ([`crate::nearfield::q_points`]), the mode normalisers `∫_{[0,L]^d} φ_s` and the
//! case vectors and `case_indices` of [`crate::nearfield::Cases`].
//!
//! Built in parallel over (case, target point) pairs with
//! every core (`map_on_threads`); each pair is one [`entries_at_point`] call, which
//! gives all `q^d` source modes of that target at the cost of about one
//! entry. The values are those of [`crate::nearfield::entry`] with the same
//! quadrature orders (the same target points and the same quadrature pass;
//! tests/nearfield_table.rs compares them).
use crate::host_memory::filled_vec;
use crate::nearfield::cases::Cases;
use crate::nearfield::entry::{entries_at_point, EntryQuadrature};
use crate::nearfield::kernels::Kernel;
use crate::nearfield::limits::{check_finite, check_kernel_and_extent, check_table_size};
use crate::nearfield::quadrature::{gauss_legendre, q_points};
use crate::runtime::{Error, Result};
use crate::threads::map_on_threads;

/// A dense near-field interaction table (see the module docs).
#[derive(Clone, Debug)]
pub struct NearFieldTable {
    pub(in crate::nearfield) kernel: Kernel,
    pub(in crate::nearfield) q: usize,
    pub(in crate::nearfield) extent: f64,
    pub(in crate::nearfield) quad: EntryQuadrature,
    pub(in crate::nearfield) cases: Cases,
    pub(in crate::nearfield) q_points: Vec<f64>,
    pub(in crate::nearfield) mode_normalizers: Vec<f64>,
    pub(in crate::nearfield) data: Vec<f64>,
}

/// A kernel as messages name it, e.g. `Laplace, dimension 3, with
/// AxisSource(0)`.
pub(in crate::nearfield) fn kernel_name(k: &Kernel) -> String {
    match k.derivative() {
        None => format!("{:?}, dimension {}", k.base(), k.dim()),
        Some(d) => format!("{:?}, dimension {}, with {d:?}", k.base(), k.dim()),
    }
}

/// A full entry id as messages name it: `entry ID (case c = [..], source
/// mode s, target point t)`.
pub(in crate::nearfield) fn entry_name(cases: &Cases, q: usize, id: usize) -> String {
    let nq = q.pow(cases.dim() as u32);
    let (c, s, t) = (id / (nq * nq), (id / nq) % nq, id % nq);
    format!(
        "entry {id} (case {c} = {:?}, source mode {s}, target point {t})",
        cases.vector(c)
    )
}

/// `∫_{[0,L]^d} φ_s` for every mode `s` (axis 0 slowest): the product of the
/// Gauss–Legendre weights of the mode's nodes (the Lagrange basis on the
/// Gauss–Legendre nodes integrates to the weights exactly).
pub fn mode_normalizers(q: usize, l: f64, dim: usize) -> Result<Vec<f64>> {
    if !(1..=3).contains(&dim) {
        return Err(Error::InvalidInput(format!(
            "dimension {dim}: must be 1, 2 or 3"
        )));
    }
    let (_, w) = gauss_legendre(q, l)?;
    let nq = q.pow(dim as u32);
    Ok((0..nq)
        .map(|m| {
            (0..dim)
                .map(|k| w[(m / q.pow((dim - 1 - k) as u32)) % q])
                .product()
        })
        .collect())
}

impl NearFieldTable {
    /// Builds the table with as many threads as the machine offers
    /// (`std::thread::available_parallelism`).
    pub fn build(kernel: &Kernel, q: usize, l: f64, quad: &EntryQuadrature) -> Result<Self> {
        let threads = crate::threads::machine_threads();
        NearFieldTable::build_with_threads(kernel, q, l, quad, threads)
    }

    /// Builds the table with `threads` worker threads (at least 1). The
    /// result does not depend on `threads`.
    pub fn build_with_threads(
        kernel: &Kernel,
        q: usize,
        l: f64,
        quad: &EntryQuadrature,
        threads: usize,
    ) -> Result<Self> {
        let d = kernel.dim();
        // Everything refused before any work: the size (the 32-bit entry
        // ids, then this machine's memory), the extent, λ·L, a direction.
        let size = check_table_size(d, q)?;
        check_kernel_and_extent(kernel, l)?;
        let what = || {
            format!(
                "the dense near-field table of dimension {d}, q = {q} ({} entries)",
                size.n_entries
            )
        };
        let mut data = filled_vec(size.n_entries as usize, 0.0f64, &what)?;
        let cases = Cases::new(d)?;
        let qp = q_points(q, l, d)?;
        let normalizers = mode_normalizers(q, l, d)?;
        let nq = q.pow(d as u32);
        // Every target point of every case, checked once up front.
        let mut targets = Vec::with_capacity(cases.len() * nq * d);
        for c in 0..cases.len() {
            targets.extend(cases.target_points(c, q, l)?);
        }
        let n_items = cases.len() * nq;
        // One target point of one case a work item, on every thread (a
        // refused thread leaves its items to the others); the first
        // failure in item order.
        let results = map_on_threads(threads, (0..n_items).collect(), |item| {
            entries_at_point(kernel, q, &targets[item * d..(item + 1) * d], l, quad)
        });
        for (item, values) in results.into_iter().enumerate() {
            let (case, t) = (item / nq, item % nq);
            for (s, v) in values?.into_iter().enumerate() {
                data[(case * nq + s) * nq + t] = v;
            }
        }
        // Each pass checked its own values; this is the net behind it.
        check_finite(
            &format!("dense table ({})", kernel_name(kernel)),
            &data,
            &|id| entry_name(&cases, q, id),
        )?;
        Ok(NearFieldTable {
            kernel: kernel.clone(),
            q,
            extent: l,
            quad: *quad,
            cases,
            q_points: qp,
            mode_normalizers: normalizers,
            data,
        })
    }

    /// Rebuilds a dense table from stored entries (a cache payload): `data`
    /// in entry-id order, `n_cases · q^{2d}` finite values; the cases, the
    /// source box's nodes and the mode normalisers are recomputed from
    /// (`kernel`, `q`, `extent`), which are checked as [`Self::build`] does.
    pub fn from_parts(
        kernel: &Kernel,
        q: usize,
        extent: f64,
        quad: &EntryQuadrature,
        data: Vec<f64>,
    ) -> Result<NearFieldTable> {
        let d = kernel.dim();
        let cases = Cases::new(d)?;
        let qp = q_points(q, extent, d)?;
        let normalizers = mode_normalizers(q, extent, d)?;
        let n = cases.n_entries(q);
        if data.len() != n {
            return Err(Error::InvalidInput(format!(
                "dense table: {} values, dimension {d} and q = {q} have {n} entries",
                data.len()
            )));
        }
        if let Some((i, v)) = data.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(Error::InvalidInput(format!(
                "dense table: data[{i}] = {v} is not finite"
            )));
        }
        Ok(NearFieldTable {
            kernel: kernel.clone(),
            q,
            extent,
            quad: *quad,
            cases,
            q_points: qp,
            mode_normalizers: normalizers,
            data,
        })
    }

    /// The kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.kernel.dim()
    }

    /// Nodes per axis.
    pub fn q(&self) -> usize {
        self.q
    }

    /// The source box extent `L`.
    pub fn extent(&self) -> f64 {
        self.extent
    }

    /// The quadrature orders the entries were computed with.
    pub fn quadrature(&self) -> &EntryQuadrature {
        &self.quad
    }

    /// The cases (vectors, codes, `case_indices`).
    pub fn cases(&self) -> &Cases {
        &self.cases
    }

    /// `q^d`: source modes and target points per case.
    pub fn n_modes(&self) -> usize {
        self.q.pow(self.dim() as u32)
    }

    /// All entries in entry-id order (`n_cases · q^{2d}` values).
    pub fn data(&self) -> &[f64] {
        &self.data
    }

    /// The source box's nodes, `q^d × d` row-major, in `[0, L]`.
    pub fn q_points(&self) -> &[f64] {
        &self.q_points
    }

    /// `∫_{[0,L]^d} φ_s` for every source mode `s`.
    pub fn mode_normalizers(&self) -> &[f64] {
        &self.mode_normalizers
    }

    /// The case vectors, `n_cases × d` row-major, in case-id order.
    pub fn case_vectors(&self) -> Vec<i32> {
        (0..self.cases.len())
            .flat_map(|c| self.cases.vector(c).to_vec())
            .collect()
    }

    /// volumential's `case_indices` (code → case id, −1 for no case).
    pub fn case_indices(&self) -> &[i32] {
        self.cases.case_indices()
    }

    /// The entry `T[case, s, t]`, checked.
    pub fn get(&self, case: usize, s: usize, t: usize) -> Result<f64> {
        let id = self.cases.entry_id(case, s, t, self.q)?;
        Ok(self.data[id])
    }
}
