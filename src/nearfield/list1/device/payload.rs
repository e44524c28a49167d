//! What is uploaded once per table: the host payload of a layout (values,
//! normalisers, the ORBIT or fallback addressing, and the entry each layout
//! reconstructs), its byte counts, its upload into a `List1Evaluator`, and
//! the key matrices a tiled plan of a compact layout expands from it on
//! the device.
use super::{
    bad, upload, List1Contract, List1Evaluator, List1Layout, DEFAULT_PAIR_SCRATCH_BYTES, NEXT_ID,
};
use crate::nearfield::cases::Cases;
use crate::nearfield::fallback::{FallbackDescriptors, FallbackResolution};
use crate::nearfield::kernels::{Derivative, Kernel};
use crate::nearfield::list1::{shape_scalings, List1Boxes, List1Tables, TableShape};
use crate::nearfield::orbit::OrbitDescriptors;
use crate::nearfield::reduced::ReducedTable;
use crate::nearfield::table::NearFieldTable;
use crate::runtime::{check, Device, DeviceBuffer, Result};
use hipkern_sys as sys;
use std::sync::atomic::Ordering;

/// Symmetry-reduced tables of a List 1 evaluation (as [`List1Tables`] for
/// dense ones).
#[derive(Clone, Copy, Debug)]
pub enum List1ReducedTables<'a> {
    /// One table of a kernel with a scaling rule, any extent.
    Scaled(&'a ReducedTable),
    /// One table per source level, `tables[l]` at extent `root_extent/2^l`.
    PerLevel(&'a [ReducedTable]),
}

/// Bytes a table upload sends to the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct List1UploadBytes {
    /// The float64 values (every table's entries or rows).
    pub values: usize,
    /// The layout's addressing metadata (ORBIT or fallback descriptors; 0
    /// for dense), as [`OrbitDescriptors::metadata_bytes`] /
    /// [`FallbackDescriptors::metadata_bytes`] count them.
    pub descriptors: usize,
    /// The mode normalisers (`q^d` float64, read by 2D Laplace's
    /// displacement).
    pub normalizers: usize,
    /// The fallback's plan-time resolution table
    /// ([`FallbackResolution::bytes`]; 0 without one).
    pub resolution: usize,
}

impl List1UploadBytes {
    /// Everything.
    pub fn total(&self) -> usize {
        self.values + self.descriptors + self.normalizers + self.resolution
    }
}

/// What the evaluator knows of its tables besides the values: enough to
/// validate boxes and compute the level scalings exactly as the CPU does.
#[derive(Clone, Debug)]
pub(super) struct TableMeta {
    pub(super) kernel: Kernel,
    pub(super) q: usize,
    pub(super) dim: usize,
    pub(super) nq: usize,
    pub(super) n_cases: usize,
    /// Kernel, `q` and extent of each table, for the level scalings.
    pub(super) shapes: Vec<TableShape>,
    pub(super) per_level: bool,
}

// The checks of a tree's boxes against these tables (`TableMeta::check`)
// are the plan's: plan.rs.
impl TableMeta {
    fn shape_of_reduced(t: &ReducedTable) -> TableShape {
        TableShape {
            kernel: t.kernel().clone(),
            q: t.q(),
            extent: t.extent(),
        }
    }

    /// Checks the tables (kernel, `q`, scaling rule; sizes the device can
    /// address) as [`level_scalings`] does, before any value is packed.
    fn new(shapes: Vec<TableShape>, per_level: bool) -> Result<TableMeta> {
        let Some(first) = shapes.first() else {
            return bad("per-level tables: the list is empty".into());
        };
        let (kernel, q, dim) = (first.kernel.clone(), first.q, first.kernel.dim());
        if !(dim == 2 || dim == 3) {
            return bad(format!("dimension {dim}: must be 2 or 3"));
        }
        let n_cases = Cases::new(dim)?.len();
        let nq = q.pow(dim as u32);
        // The scaling rule (Scaled) or one kernel and q (PerLevel).
        shape_scalings(&shapes, per_level, 1.0, &[])?;
        let meta = TableMeta {
            kernel,
            q,
            dim,
            nq,
            n_cases,
            shapes,
            per_level,
        };
        if (n_cases as u64) * (nq as u64) * (nq as u64) > u64::from(u32::MAX) {
            return bad(format!(
                "{n_cases} cases × (q^d = {nq})² entries do not fit the device's 32-bit entry ids"
            ));
        }
        Ok(meta)
    }
}

/// The addressing of a layout, host side.
#[derive(Clone, Debug)]
enum HostAddressing {
    Dense,
    Orbit(Box<OrbitDescriptors>),
    Fallback(Box<FallbackDescriptors>, Option<Box<FallbackResolution>>),
}

/// The host arrays of one layout, ready to upload (module docs).
#[derive(Clone, Debug)]
pub struct List1Payload {
    layout: List1Layout,
    meta: TableMeta,
    n_tables: usize,
    n_rows: usize,
    values: Vec<f64>,
    normalizers: Vec<f64>,
    addressing: HostAddressing,
}

fn orbit_descriptors(kernel: &Kernel, q: usize) -> Result<OrbitDescriptors> {
    if let Some(Derivative::DirectionalSource(v)) = kernel.derivative() {
        return bad(format!(
            "the ORBIT layout does not model the directional source derivative along {v:?} \
             (its group keeps the direction collinear, not an axis); use the dense or the \
             fallback layout"
        ));
    }
    OrbitDescriptors::build(kernel, q)
}

/// Rows of the ORBIT layout from (full id, value) pairs holding at least
/// every representative, ascending: each row takes its first entry's value
/// times that entry's slot sign (0 for an entry zero by symmetry).
fn pack_orbit(
    desc: &OrbitDescriptors,
    nq: usize,
    entries: impl Iterator<Item = (usize, f64)>,
) -> Result<Vec<f64>> {
    let n = desc.n_rows();
    let mut out = vec![0.0f64; n];
    let mut seen = vec![false; n];
    let mut left = n;
    for (e, v) in entries {
        let slot = desc.slot(e / (nq * nq), (e / nq) % nq, e % nq);
        if !seen[slot.row] {
            seen[slot.row] = true;
            left -= 1;
            out[slot.row] = if slot.sign == 0 {
                0.0
            } else {
                f64::from(slot.sign) * v
            };
            if left == 0 {
                break;
            }
        }
    }
    if let Some(r) = seen.iter().position(|s| !s) {
        return bad(format!(
            "ORBIT row {r} has no entry (inconsistent descriptors)"
        ));
    }
    Ok(out)
}

impl List1Payload {
    /// The payload of dense tables in `layout`. ORBIT rows take each
    /// orbit's representative entry (the smallest full id), fallback rows
    /// the representatives in order; orbits that are zero by symmetry get
    /// exactly 0.
    pub fn from_tables(tables: &List1Tables<'_>, layout: List1Layout) -> Result<List1Payload> {
        let list: Vec<&NearFieldTable> = match tables {
            List1Tables::Scaled(t) => vec![*t],
            List1Tables::PerLevel(ts) => ts.iter().collect(),
        };
        let meta = TableMeta::new(
            list.iter().map(|t| TableShape::of(t)).collect(),
            matches!(tables, List1Tables::PerLevel(_)),
        )?;
        let (nq, q) = (meta.nq, meta.q);
        let (addressing, n_rows, values) = match layout {
            List1Layout::Dense => {
                let n = meta.n_cases * nq * nq;
                let mut v = Vec::with_capacity(n * list.len());
                for t in &list {
                    v.extend_from_slice(t.data());
                }
                (HostAddressing::Dense, n, v)
            }
            List1Layout::Orbit => {
                let desc = orbit_descriptors(&meta.kernel, q)?;
                let mut v = Vec::with_capacity(desc.n_rows() * list.len());
                for t in &list {
                    v.extend(pack_orbit(&desc, nq, t.data().iter().copied().enumerate())?);
                }
                (
                    HostAddressing::Orbit(Box::new(desc.clone())),
                    desc.n_rows(),
                    v,
                )
            }
            List1Layout::Fallback => {
                let desc = FallbackDescriptors::prepare(&meta.kernel, q)?;
                let mut v = Vec::with_capacity(desc.n_rows() * list.len());
                for t in &list {
                    v.extend(
                        desc.representatives
                            .iter()
                            .zip(&desc.zero_by_symmetry)
                            .map(|(&r, &z)| if z { 0.0 } else { t.data()[r as usize] }),
                    );
                }
                let n = desc.n_rows();
                let res = desc.resolution().map(Box::new);
                (HostAddressing::Fallback(Box::new(desc), res), n, v)
            }
        };
        let normalizers = list[0].mode_normalizers().to_vec();
        Ok(List1Payload {
            layout,
            n_tables: list.len(),
            meta,
            n_rows,
            values,
            normalizers,
            addressing,
        })
    }

    /// The payload of symmetry-reduced tables in `layout`: dense values
    /// through [`ReducedTable::reconstruct_full_table_from_symmetry`], ORBIT
    /// rows from the representatives (`row value = slot sign · value`),
    /// fallback rows the reduced data itself (its ids must be the
    /// fallback's representatives).
    pub fn from_reduced(
        tables: &List1ReducedTables<'_>,
        layout: List1Layout,
    ) -> Result<List1Payload> {
        let list: Vec<&ReducedTable> = match tables {
            List1ReducedTables::Scaled(t) => vec![*t],
            List1ReducedTables::PerLevel(ts) => ts.iter().collect(),
        };
        let meta = TableMeta::new(
            list.iter()
                .map(|t| TableMeta::shape_of_reduced(t))
                .collect(),
            matches!(tables, List1ReducedTables::PerLevel(_)),
        )?;
        let (nq, q) = (meta.nq, meta.q);
        let (addressing, n_rows, values) = match layout {
            List1Layout::Dense => {
                let n = meta.n_cases * nq * nq;
                let mut v = Vec::with_capacity(n * list.len());
                for t in &list {
                    v.extend(t.reconstruct_full_table_from_symmetry());
                }
                (HostAddressing::Dense, n, v)
            }
            List1Layout::Orbit => {
                let desc = orbit_descriptors(&meta.kernel, q)?;
                let mut v = Vec::with_capacity(desc.n_rows() * list.len());
                for t in &list {
                    let reps = t
                        .reduced_entry_ids()
                        .iter()
                        .zip(t.reduced_data())
                        .map(|(&e, &x)| (e as usize, x));
                    v.extend(pack_orbit(&desc, nq, reps)?);
                }
                let n = desc.n_rows();
                (HostAddressing::Orbit(Box::new(desc)), n, v)
            }
            List1Layout::Fallback => {
                let desc = FallbackDescriptors::prepare(&meta.kernel, q)?;
                let mut v = Vec::with_capacity(desc.n_rows() * list.len());
                for (l, t) in list.iter().enumerate() {
                    if t.reduced_entry_ids() != &desc.representatives[..] {
                        return bad(format!(
                            "reduced table {l}: its {} representative ids are not the \
                             fallback's {} representatives",
                            t.reduced_entry_ids().len(),
                            desc.representatives.len()
                        ));
                    }
                    v.extend_from_slice(t.reduced_data());
                }
                let n = desc.n_rows();
                let res = desc.resolution().map(Box::new);
                (HostAddressing::Fallback(Box::new(desc), res), n, v)
            }
        };
        let normalizers = list[0].mode_normalizers().to_vec();
        Ok(List1Payload {
            layout,
            n_tables: list.len(),
            meta,
            n_rows,
            values,
            normalizers,
            addressing,
        })
    }

    /// The ORBIT descriptors the rows are addressed with (ORBIT payloads).
    pub fn orbit_descriptors(&self) -> Option<&OrbitDescriptors> {
        match &self.addressing {
            HostAddressing::Orbit(d) => Some(d),
            _ => None,
        }
    }

    /// The generated fallback descriptors (fallback payloads).
    pub fn fallback_descriptors(&self) -> Option<&FallbackDescriptors> {
        match &self.addressing {
            HostAddressing::Fallback(d, _) => Some(d),
            _ => None,
        }
    }

    /// The fallback's plan-time resolution table (module docs), when the
    /// payload carries one: fallback payloads whose
    /// [`FallbackDescriptors::resolution`] is `Some`, unless
    /// [`List1Payload::without_fallback_resolution`] dropped it.
    pub fn fallback_resolution(&self) -> Option<&FallbackResolution> {
        match &self.addressing {
            HostAddressing::Fallback(_, r) => r.as_deref(),
            _ => None,
        }
    }

    /// The same payload without the fallback's resolution table: the
    /// device then takes the pure descriptor path (transform candidates,
    /// smallest full id, sign lookup, hash). Other layouts are unchanged.
    pub fn without_fallback_resolution(mut self) -> List1Payload {
        if let HostAddressing::Fallback(_, r) = &mut self.addressing {
            *r = None;
        }
        self
    }

    /// The layout.
    pub fn layout(&self) -> List1Layout {
        self.layout
    }

    /// The kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.meta.kernel
    }

    /// Nodes per axis.
    pub fn q(&self) -> usize {
        self.meta.q
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.meta.dim
    }

    /// Tables (1, or one per level).
    pub fn n_tables(&self) -> usize {
        self.n_tables
    }

    /// Values per table (every entry for dense, compact rows otherwise).
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// The values as uploaded (`n_tables × n_rows`).
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Bytes an upload of this payload sends.
    pub fn upload_bytes(&self) -> List1UploadBytes {
        List1UploadBytes {
            values: self.values.len() * 8,
            descriptors: match &self.addressing {
                HostAddressing::Dense => 0,
                HostAddressing::Orbit(d) => d.metadata_bytes(),
                HostAddressing::Fallback(d, _) => d.metadata_bytes(),
            },
            normalizers: self.normalizers.len() * 8,
            resolution: self.fallback_resolution().map_or(0, |r| r.bytes()),
        }
    }

    /// Entry `(case, s, t)` of table `table` as the layout reconstructs it
    /// (the value the device reads): dense the value, ORBIT `slot sign ·
    /// row`, fallback `sign · row` of its slot (through the resolution
    /// table when the payload carries one).
    pub fn entry(&self, table: usize, case: usize, s: usize, t: usize) -> Result<f64> {
        let nq = self.meta.nq;
        if table >= self.n_tables || case >= self.meta.n_cases || s >= nq || t >= nq {
            return bad(format!(
                "entry (table {table}, case {case}, source mode {s}, target point {t}) out of \
                 range ({} tables, {} cases, {nq} points)",
                self.n_tables, self.meta.n_cases
            ));
        }
        let base = table * self.n_rows;
        Ok(match &self.addressing {
            HostAddressing::Dense => self.values[base + (case * nq + s) * nq + t],
            HostAddressing::Orbit(d) => {
                let slot = d.slot(case, s, t);
                if slot.sign == 0 {
                    0.0
                } else {
                    f64::from(slot.sign) * self.values[base + slot.row]
                }
            }
            HostAddressing::Fallback(d, Some(r)) => {
                let (row, sign) = r.slot(d, case, s, t);
                f64::from(sign) * self.values[base + row as usize]
            }
            HostAddressing::Fallback(d, None) => {
                let slot = d.slot(case, s, t)?;
                f64::from(slot.sign) * self.values[base + slot.row as usize]
            }
        })
    }

    /// The checks an evaluation makes before anything is launched
    /// (module docs), without a device: boxes and lists, `source_values`
    /// when given, and the level scalings.
    pub fn check(&self, boxes: &List1Boxes<'_>, source_values: Option<&[f64]>) -> Result<()> {
        self.meta.check(boxes, source_values).map(|_| ())
    }
}

/// The addressing of a layout, on the device.
pub(super) enum DeviceAddressing {
    Dense,
    Orbit {
        ranks: DeviceBuffer<u16>,
        perm: DeviceBuffer<u8>,
        sign: DeviceBuffer<i8>,
        group: DeviceBuffer<u8>,
        offsets: DeviceBuffer<u32>,
        axis_sign_power: DeviceBuffer<u8>,
        n_case_orbits: usize,
    },
    Fallback {
        qmap: DeviceBuffer<u16>,
        cmap: DeviceBuffer<u8>,
        signs: DeviceBuffer<i8>,
        keys: DeviceBuffer<u32>,
        rows: DeviceBuffer<u32>,
        probe_count: u32,
        sign_ids: DeviceBuffer<u32>,
        sign_signs: DeviceBuffer<i8>,
        n_transforms: usize,
        resolution: Option<DeviceResolution>,
    },
}

/// A [`FallbackResolution`] on the device.
pub(super) struct DeviceResolution {
    pub(super) case_orbit: DeviceBuffer<u8>,
    pub(super) case_transform: DeviceBuffer<u8>,
    pub(super) rows: DeviceBuffer<u16>,
    pub(super) n_orbits: usize,
}

/// The case matrices of a plan's distinct keys on the device
/// (`hipkern_list1_expand_keys`), `q^d × q^d` float64 each, and the index
/// from every key (`table · n_cases + case`) to its matrix (`u32::MAX`:
/// none).
pub(super) struct KeyMatrices {
    pub(super) count: usize,
    pub(super) values: DeviceBuffer<f64>,
    pub(super) index: DeviceBuffer<u32>,
}

/// The distinct keys of `keys` (ascending) and, for each of `n_keys` key
/// ids, its position among them (`u32::MAX` for a key not in `keys`).
fn key_matrix_index(keys: &[u32], n_keys: usize) -> (Vec<u32>, Vec<u32>) {
    let mut distinct = keys.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let mut index = vec![u32::MAX; n_keys];
    for (i, &k) in distinct.iter().enumerate() {
        index[k as usize] = i as u32;
    }
    (distinct, index)
}

impl List1Evaluator {
    /// Uploads `payload` to `device` (synchronously), with the
    /// [`List1Contract::Fast`] contract.
    pub fn new(device: &Device, payload: &List1Payload) -> Result<List1Evaluator> {
        let _scope = device.enter()?;
        let values = upload(device, &payload.values)?;
        let normalizers = upload(device, &payload.normalizers)?;
        let addressing = match &payload.addressing {
            HostAddressing::Dense => DeviceAddressing::Dense,
            HostAddressing::Orbit(d) => DeviceAddressing::Orbit {
                ranks: upload(device, &d.case_orbit_ranks)?,
                perm: upload(device, &d.case_axis_perm)?,
                sign: upload(device, &d.case_axis_sign)?,
                group: upload(device, &d.case_axis_group)?,
                offsets: upload(device, &d.case_value_offsets)?,
                axis_sign_power: upload(device, &d.axis_sign_power)?,
                n_case_orbits: d.n_case_orbits(),
            },
            HostAddressing::Fallback(d, r) => DeviceAddressing::Fallback {
                qmap: upload(device, &d.transform_qpoint_map)?,
                cmap: upload(device, &d.transform_case_map)?,
                signs: upload(device, &d.transform_signs)?,
                keys: upload(device, &d.representative_lookup_keys)?,
                rows: upload(device, &d.representative_lookup_rows)?,
                probe_count: d.probe_count,
                sign_ids: upload(device, &d.sign_lookup_ids)?,
                sign_signs: upload(device, &d.sign_lookup_signs)?,
                n_transforms: d.n_transforms(),
                resolution: match r {
                    None => None,
                    Some(r) => Some(DeviceResolution {
                        case_orbit: upload(device, &r.case_orbit)?,
                        case_transform: upload(device, &r.case_transform)?,
                        rows: upload(device, &r.rows)?,
                        n_orbits: r.n_orbits(),
                    }),
                },
            },
        };
        let mut available = 0i32;
        // SAFETY: a valid out-pointer; the call reads the current device,
        // made `device` by the scope above.
        check("hipkern_list1_tiled_tensor_cores", unsafe {
            sys::hipkern_list1_tiled_tensor_cores(&mut available)
        })?;
        Ok(List1Evaluator {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            device: device.clone(),
            layout: payload.layout,
            meta: payload.meta.clone(),
            n_tables: payload.n_tables,
            n_rows: payload.n_rows,
            values,
            normalizers,
            addressing,
            bytes: payload.upload_bytes(),
            contract: List1Contract::Fast,
            pair_scratch_bytes: DEFAULT_PAIR_SCRATCH_BYTES,
            plan_staging: std::sync::Mutex::new(Default::default()),
            tensor_cores_available: available != 0,
        })
    }

    /// [`List1Payload::from_tables`] uploaded.
    pub fn from_tables(
        device: &Device,
        tables: &List1Tables<'_>,
        layout: List1Layout,
    ) -> Result<List1Evaluator> {
        List1Evaluator::new(device, &List1Payload::from_tables(tables, layout)?)
    }

    /// [`List1Payload::from_reduced`] uploaded.
    pub fn from_reduced(
        device: &Device,
        tables: &List1ReducedTables<'_>,
        layout: List1Layout,
    ) -> Result<List1Evaluator> {
        List1Evaluator::new(device, &List1Payload::from_reduced(tables, layout)?)
    }

    /// The case matrices of the distinct keys among `keys` (ids below
    /// `n_tables · n_cases`, from the plan's validated pairs), expanded on
    /// the device (synchronously, on a stream of its own).
    pub(super) fn expand_keys(&self, keys: &[u32]) -> Result<KeyMatrices> {
        let d = &self.device;
        let nq = self.meta.nq;
        let (distinct, index) = key_matrix_index(keys, self.n_tables * self.meta.n_cases);
        let keys_d = upload(d, &distinct)?;
        let mut values = d.alloc::<f64>(distinct.len() * nq * nq)?;
        let stream = d.new_stream()?;
        let t = self.raw_table();
        let _scope = d.enter()?;
        // SAFETY: the evaluator's table (live buffers, checked at upload),
        // `distinct.len()` keys below n_tables · n_cases on the device and
        // room for as many q^d × q^d matrices; synchronized before the
        // buffers can be dropped.
        let status = unsafe {
            sys::hipkern_list1_expand_keys(
                &t,
                keys_d.as_ptr(),
                distinct.len() as i64,
                values.as_mut_ptr(),
                stream.as_raw(),
            )
        };
        check("hipkern_list1_expand_keys", status)?;
        stream.synchronize()?;
        Ok(KeyMatrices {
            count: distinct.len(),
            values,
            index: upload(d, &index)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::key_matrix_index;

    #[test]
    fn key_matrix_index_numbers_the_distinct_keys_in_order() {
        let (distinct, index) = key_matrix_index(&[7, 2, 7, 0, 2, 9], 12);
        assert_eq!(distinct, [0, 2, 7, 9]);
        let none = u32::MAX;
        assert_eq!(
            index,
            [0, none, 1, none, none, none, none, 2, none, 3, none, none]
        );
        let (distinct, index) = key_matrix_index(&[], 3);
        assert!(distinct.is_empty());
        assert_eq!(index, [none; 3]);
    }
}
