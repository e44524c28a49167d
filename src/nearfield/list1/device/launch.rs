//! The launches: a plan and source values checked against the evaluator
//! (its plan, its device, the lengths), the table and pairs handed to the C
//! ABI (`hipkern_list1_evaluate`, `_grouped`, `_tiled`) for the plan's
//! kernel, and the host-slice conveniences `evaluate` and `evaluate_plan`.
use super::dispatch::choose_for_one_evaluation;
use super::payload::DeviceAddressing;
use super::{bad, upload, List1DevicePlan, List1Evaluator, List1Kernel};
use crate::nearfield::list1::{check_source_values, List1Boxes};
use crate::runtime::{check, DeviceMemory, DeviceMemoryMut, Result, Stream};
use hipkern_sys as sys;

impl List1Evaluator {
    fn same_device(&self, what: &str, ordinal: usize) -> Result<()> {
        if ordinal != self.device.ordinal() {
            return bad(format!(
                "{what} is on device {ordinal}, the evaluator's table on device {}",
                self.device.ordinal()
            ));
        }
        Ok(())
    }

    /// List 1 of `source_values` (`n_boxes × q^d` on the device) over
    /// `plan` into `out` (`n_targets × q^d`, fully overwritten),
    /// asynchronously on `stream`, with the plan's kernel. Checked
    /// before anything is launched: the plan is this evaluator's,
    /// everything is on its device, the lengths. Device-resident source
    /// values are not checked for finiteness (a non-finite value reaches
    /// the targets whose lists hold its box).
    ///
    /// The grouped kernel writes the pair products into the plan's
    /// scratch (allocated here the first time): evaluations of one plan on
    /// different streams must be ordered by the caller, as for `out`.
    ///
    /// `source_values` and `out` may be buffers or views (another
    /// library's memory borrowed with
    /// [`DeviceSlice::from_raw_parts`](crate::runtime::DeviceSlice::from_raw_parts)).
    pub fn evaluate_into(
        &self,
        stream: &Stream,
        plan: &mut List1DevicePlan,
        source_values: &(impl DeviceMemory<f64> + ?Sized),
        out: &mut (impl DeviceMemoryMut<f64> + ?Sized),
    ) -> Result<()> {
        let source_values = source_values.device_view();
        let mut out = out.device_view_mut();
        if plan.evaluator != self.id {
            return bad(
                "the plan was made by another evaluator (its level scalings belong to that \
                 evaluator's tables)"
                    .into(),
            );
        }
        self.same_device("the stream", stream.device().ordinal())?;
        self.same_device("the plan", plan.device)?;
        self.same_device("source_values", source_values.device().ordinal())?;
        self.same_device("out", out.device().ordinal())?;
        let nq = self.meta.nq;
        if source_values.len() != plan.n_boxes * nq {
            return bad(format!(
                "source_values has {} values, expected n_boxes × q^d = {} × {nq}",
                source_values.len(),
                plan.n_boxes
            ));
        }
        if out.len() != plan.n_targets * nq {
            return bad(format!(
                "out has {} values, expected n_targets × q^d = {} × {nq}",
                out.len(),
                plan.n_targets
            ));
        }
        let _scope = self.device.enter()?;
        if plan.n_pairs == 0 {
            // Every list empty: zeros, whichever kernel the plan names (a
            // plan without pairs has no groups or key rows to launch).
            return stream.fill(&mut out, 0.0);
        }
        // SAFETY: every pointer is live device memory of this device with
        // the length the descriptors say (checked above and at upload; a
        // view is live memory of its length by its constructor's
        // contract); the
        // plan's indices were validated on the host (box ids < n_boxes, case
        // ids < n_cases, levels < n_levels, tables < n_tables), and the
        // descriptors come from OrbitDescriptors / FallbackDescriptors of
        // this kernel and q (the fallback's resolution table from
        // FallbackDescriptors::resolution, whose rows, case orbits and
        // transforms it checked), so every read the kernel makes is in
        // bounds.
        match plan.kernel {
            List1Kernel::PerTarget => unsafe {
                self.launch(stream, plan, source_values.as_ptr(), out.as_mut_ptr())
            },
            List1Kernel::Grouped => {
                if plan.n_pairs as u64 > sys::HIPKERN_LIST1_GROUPED_MAX_PAIRS as u64 {
                    return bad(format!(
                        "the grouped kernel takes at most {} pairs; this plan has {} (plan it \
                         under the fast contract)",
                        sys::HIPKERN_LIST1_GROUPED_MAX_PAIRS,
                        plan.n_pairs
                    ));
                }
                let Some(g) = plan.groups.as_mut() else {
                    return bad("the grouped plan has no groups".into());
                };
                let need = g.max_chunk_pairs * nq;
                if g.scratch.as_ref().is_none_or(|b| b.len() < need) {
                    g.scratch = None;
                    g.scratch = Some(self.device.alloc::<f64>(need.max(1))?);
                }
                // SAFETY: as above; the groups come from group_pairs over
                // the plan's own validated pairs (every pair of a chunk in
                // one group of its own key, ids inside the chunk), and the
                // scratch holds the largest chunk's pairs × q^d.
                unsafe {
                    self.launch_grouped(stream, plan, source_values.as_ptr(), out.as_mut_ptr())
                }
            }
            // SAFETY: as above; the tiles come from KeyOrder's tiling of the
            // plan's own validated pairs (every target on one lane, every
            // pair in one slot of its own key and its own target's lane),
            // cut at the kernel's width, and a compact layout's plan
            // carries the key matrices of every key of its tiles
            // (expand_keys).
            List1Kernel::Tiled | List1Kernel::Staged | List1Kernel::TiledFma => unsafe {
                self.launch_tiled(stream, plan, source_values.as_ptr(), out.as_mut_ptr())
            },
        }
    }

    /// The table as the C ABI's `hipkern_list1_evaluate*` entry points take
    /// it: device pointers into this evaluator's buffers, valid while it
    /// lives.
    pub(crate) fn raw_table(&self) -> sys::hipkern_list1_table {
        let null8 = std::ptr::null::<u8>();
        let mut t = sys::hipkern_list1_table {
            layout: self.layout.raw(),
            dim: self.meta.dim as i32,
            q: self.meta.q as i32,
            n_cases: self.meta.n_cases as i32,
            n_tables: self.n_tables as i32,
            n_rows: self.n_rows as i64,
            values: self.values.as_ptr(),
            mode_normalizers: self.normalizers.as_ptr(),
            n_case_orbits: 0,
            case_orbit_ranks: std::ptr::null(),
            case_axis_perm: null8,
            case_axis_sign: std::ptr::null(),
            case_axis_group: null8,
            case_value_offsets: std::ptr::null(),
            axis_sign_power: null8,
            n_transforms: 0,
            transform_qpoint_map: std::ptr::null(),
            transform_case_map: null8,
            transform_signs: std::ptr::null(),
            lookup_size: 0,
            probe_count: 0,
            lookup_keys: std::ptr::null(),
            lookup_rows: std::ptr::null(),
            n_sign_lookup: 0,
            sign_lookup_ids: std::ptr::null(),
            sign_lookup_signs: std::ptr::null(),
            n_resolve_orbits: 0,
            resolve_case_orbit: null8,
            resolve_case_transform: null8,
            resolve_rows: std::ptr::null(),
        };
        match &self.addressing {
            DeviceAddressing::Dense => {}
            DeviceAddressing::Orbit {
                ranks,
                perm,
                sign,
                group,
                offsets,
                axis_sign_power,
                n_case_orbits,
            } => {
                t.n_case_orbits = *n_case_orbits as i32;
                t.case_orbit_ranks = ranks.as_ptr();
                t.case_axis_perm = perm.as_ptr();
                t.case_axis_sign = sign.as_ptr();
                t.case_axis_group = group.as_ptr();
                t.case_value_offsets = offsets.as_ptr();
                t.axis_sign_power = axis_sign_power.as_ptr();
            }
            DeviceAddressing::Fallback {
                qmap,
                cmap,
                signs,
                keys,
                rows,
                probe_count,
                sign_ids,
                sign_signs,
                n_transforms,
                resolution,
            } => {
                t.n_transforms = *n_transforms as i32;
                t.transform_qpoint_map = qmap.as_ptr();
                t.transform_case_map = cmap.as_ptr();
                t.transform_signs = signs.as_ptr();
                t.lookup_size = keys.len() as u32;
                t.probe_count = *probe_count;
                t.lookup_keys = keys.as_ptr();
                t.lookup_rows = rows.as_ptr();
                t.n_sign_lookup = sign_ids.len() as u32;
                t.sign_lookup_ids = sign_ids.as_ptr();
                t.sign_lookup_signs = sign_signs.as_ptr();
                if let Some(r) = resolution {
                    t.n_resolve_orbits = r.n_orbits as i32;
                    t.resolve_case_orbit = r.case_orbit.as_ptr();
                    t.resolve_case_transform = r.case_transform.as_ptr();
                    t.resolve_rows = r.rows.as_ptr();
                }
            }
        }
        t
    }

    /// Called by `evaluate_into` alone, inside its device scope (the
    /// evaluator's device current).
    ///
    /// # Safety
    /// `f` and `out` point to `n_boxes·q^d` and `n_targets·q^d` float64 on
    /// the evaluator's device, `plan` is this evaluator's.
    unsafe fn launch(
        &self,
        stream: &Stream,
        plan: &List1DevicePlan,
        f: *const f64,
        out: *mut f64,
    ) -> Result<()> {
        let t = self.raw_table();
        let p = plan.raw_pairs();
        // SAFETY: the caller's contract (see above); the structs live
        // across the call, which copies them into the launch.
        let status = unsafe { sys::hipkern_list1_evaluate(&t, &p, f, out, stream.as_raw()) };
        check("hipkern_list1_evaluate", status)
    }

    /// # Safety
    /// As [`Self::launch`], and the plan's scratch holds its largest
    /// chunk's pairs × q^d.
    unsafe fn launch_grouped(
        &self,
        stream: &Stream,
        plan: &mut List1DevicePlan,
        f: *const f64,
        out: *mut f64,
    ) -> Result<()> {
        let t = self.raw_table();
        let p = plan.raw_pairs();
        let parts = &plan.parts;
        let Some(g) = plan.groups.as_mut() else {
            return bad("the grouped plan has no groups".into());
        };
        let scratch = match g.scratch.as_mut() {
            Some(b) => b.as_mut_ptr(),
            None => return bad("the grouped kernel's scratch is missing".into()),
        };
        for ch in &g.chunks {
            let groups = sys::hipkern_list1_groups {
                target_begin: ch.targets.start as i64,
                target_end: ch.targets.end as i64,
                pair_begin: ch.pairs.start as i64,
                pair_end: ch.pairs.end as i64,
                n_tiles: ch.tiles.len() as i64,
                // SAFETY (offsets): tile ranges index the uploaded arrays
                // (tile_offsets has one more entry than tile_keys).
                tile_offsets: unsafe { parts.ptr(g.tile_offsets).add(ch.tiles.start) },
                tile_keys: unsafe { parts.ptr(g.tile_keys).add(ch.tiles.start) },
                tile_pairs: parts.ptr(g.tile_pairs),
                pair_values: scratch,
            };
            // SAFETY: the caller's contract; the structs live across the
            // call, which copies them into the launches.
            let status = unsafe {
                sys::hipkern_list1_evaluate_grouped(&t, &p, &groups, f, out, stream.as_raw())
            };
            check("hipkern_list1_evaluate_grouped", status)?;
        }
        Ok(())
    }

    /// # Safety
    /// As [`Self::launch`].
    unsafe fn launch_tiled(
        &self,
        stream: &Stream,
        plan: &List1DevicePlan,
        f: *const f64,
        out: *mut f64,
    ) -> Result<()> {
        let Some(tiles) = plan.raw_tiles() else {
            return bad(format!("the {} plan has no tiles", plan.kernel));
        };
        let t = self.raw_table();
        let p = plan.raw_pairs();
        // SAFETY: the caller's contract; the structs live across the call,
        // which copies them into the launch.
        let status =
            unsafe { sys::hipkern_list1_evaluate_tiled(&t, &p, &tiles, f, out, stream.as_raw()) };
        check("hipkern_list1_evaluate_tiled", status)
    }

    /// List 1 of host `source_values` over host `boxes`: validated as the
    /// CPU evaluator validates (same checks, same order, same messages),
    /// uploaded, evaluated on `stream` and downloaded (`n_targets × q^d`,
    /// per target box in node order, as [`crate::nearfield::evaluate_list1`]).
    ///
    /// Its plan serves one evaluation, so it is the one that costs least:
    /// built on the device for `grouped` (`per-target` for `q^d > 64`)
    /// under either contract. The result is bitwise the CPU's, which keeps
    /// the fast contract too. A tree evaluated more than once should keep
    /// its plan ([`Self::plan`], [`Self::evaluate_plan`]): under the fast
    /// contract that plan is tiled, slower to build, faster to run.
    pub fn evaluate(
        &self,
        stream: &Stream,
        boxes: &List1Boxes<'_>,
        source_values: &[f64],
    ) -> Result<Vec<f64>> {
        let one = choose_for_one_evaluation(self.meta.nq);
        let mut plan = self.plan_checked(boxes, Some(source_values), Some(one))?;
        self.evaluate_plan(stream, &mut plan, source_values)
    }

    /// List 1 of host `source_values` over an uploaded plan (checked:
    /// length and finite values, as the CPU evaluator), into a `Vec`.
    pub fn evaluate_plan(
        &self,
        stream: &Stream,
        plan: &mut List1DevicePlan,
        source_values: &[f64],
    ) -> Result<Vec<f64>> {
        check_source_values(source_values, plan.n_boxes, self.meta.nq)?;
        self.same_device("the stream", stream.device().ordinal())?;
        let _scope = self.device.enter()?;
        let f = upload(&self.device, source_values)?;
        let mut out = self.device.alloc::<f64>(plan.n_targets * self.meta.nq)?;
        self.evaluate_into(stream, plan, &f, &mut out)?;
        let mut host = vec![f64::NAN; out.len()];
        // SAFETY: `host` is exclusively borrowed here and the synchronize
        // below waits for the copy before it is read or dropped.
        unsafe { stream.copy_dtoh_async(&out.as_slice(), &mut host)? };
        stream.synchronize()?;
        Ok(host)
    }
}
