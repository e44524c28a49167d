//! Plans built on the device (`hip/list1_plan.hip`): where the kernel is
//! chosen without looking at the pairs (`grouped` under the exact
//! contract, `per-target` beyond the tiled kernels' `q^d`), the tree's
//! arrays are uploaded as they are and the device classifies the pairs
//! and groups them by key. The host checks what is per box (the CPU
//! evaluator's checks before the pairs), cuts the chunks and tiles from
//! the device's key counts, and names what the device found wrong by the
//! CPU's own check, so that both refuse the same inputs with the same
//! messages. The tiled kernels' plans stay on the host: their kernel is
//! chosen by comparing tilings of the pairs.
//!
//! Two round trips: the classification's counts and report come back
//! (a few KB), the tiles' first slots go down, then the grouping runs and
//! the plan waits for it (plans are synchronous).
use super::parts::{Packing, Part};
use super::plan::{level_arrays, DeviceGrouping, List1DevicePlan};
use super::{List1Evaluator, List1Kernel};
use crate::nearfield::list1::{check_list1_boxes, check_source_values, shape_scalings, List1Boxes};
use crate::nearfield::list1_grouping::{chunk_targets, cut_tiles, tile_capacity, GroupChunk};
use crate::nearfield::Cases;
use crate::runtime::{check, Result};
use hipkern_sys as sys;
use std::sync::OnceLock;

/// A report's `first_*` with nothing found.
const NONE: u64 = u64::MAX;
/// The report's `first_*` fields, before `level_pairs`.
const REPORT_FIRSTS: usize = 4;
const MAX_LEVELS: usize = sys::HIPKERN_LIST1_MAX_LEVELS as usize;
/// Chunks a device plan takes at most: each costs two launches and a row
/// of key counts (n_keys, up to 2,919 with 3D per-level tables), so a
/// scratch bound cut to a few targets a chunk would cost more than the
/// host's grouping. The default bound (256 MiB) gives one chunk per
/// 1.2 million pairs at `q^d = 27`.
const MAX_DEVICE_CHUNKS: usize = 64;

/// `hipkern_list1_pair_report` as u64 words: the firsts, then the pairs
/// per level.
const REPORT_WORDS: usize = REPORT_FIRSTS + MAX_LEVELS;
const _: () = assert!(std::mem::size_of::<sys::hipkern_list1_pair_report>() == 8 * REPORT_WORDS);
// The key counts are read back as u64 words, two u32 a word, the first in
// the low half: the host and every device hipkern builds for are
// little-endian.
const _: () = assert!(cfg!(target_endian = "little"));

/// The cases of dimension `dim` (2 or 3: the boxes were checked),
/// enumerated once per process.
fn cases_of(dim: usize) -> Result<&'static Cases> {
    static CASES: [OnceLock<Cases>; 2] = [OnceLock::new(), OnceLock::new()];
    let slot = &CASES[usize::from(dim == 3)];
    if let Some(c) = slot.get() {
        return Ok(c);
    }
    let c = Cases::new(dim)?;
    Ok(slot.get_or_init(|| c))
}

impl List1Evaluator {
    /// The plan of `boxes` for `kernel` (`grouped` or `per-target`), built
    /// on the device; the CPU evaluator's checks and messages, `values`
    /// checked in its order when given. Inputs the device finds wrong, and
    /// tables whose level scalings the host must name, go the host's way.
    /// The device must be entered.
    pub(super) fn plan_on_device(
        &self,
        boxes: &List1Boxes<'_>,
        values: Option<&[f64]>,
        kernel: List1Kernel,
        reason: String,
    ) -> Result<List1DevicePlan> {
        debug_assert!(matches!(
            kernel,
            List1Kernel::Grouped | List1Kernel::PerTarget
        ));
        let meta = &self.meta;
        check_list1_boxes(boxes, &meta.shapes)?;
        let (n, nt, np, nq) = (
            boxes.n_boxes(),
            boxes.target_boxes.len(),
            boxes.source_boxes.len(),
            meta.nq,
        );
        // The same kernel and reason, planned on the host.
        let host = || self.plan_on_host(boxes, values, Some((kernel, reason.clone())));
        let max_level = boxes.levels.iter().copied().max().unwrap_or(0) as usize;
        // The level arrays do not depend on which levels the pairs use
        // (that decides only which levels are checked, below); tables that
        // give none are named by the host, in the CPU's order.
        let Ok(scalings) = shape_scalings(
            &meta.shapes,
            meta.per_level,
            boxes.root_extent,
            &vec![false; max_level + 1],
        ) else {
            return host();
        };
        let cases = cases_of(boxes.dim)?;
        if n > u32::MAX as usize || cases.len() != meta.n_cases || max_level >= MAX_LEVELS {
            return host();
        }
        let n_cases = meta.n_cases;
        let n_keys = self.n_tables * n_cases;
        let grouped = kernel == List1Kernel::Grouped;
        let chunks = if grouped {
            chunk_targets(
                boxes.source_starts,
                (self.pair_scratch_bytes / (8 * nq)).max(1),
            )
        } else {
            vec![(0..nt, 0..np)]
        };
        if chunks.len() > MAX_DEVICE_CHUNKS {
            return host();
        }
        let tile_max = tile_capacity(nq);
        let box_levels: Vec<u8> = boxes.levels.iter().map(|&l| l as u8).collect();
        let (scale, disp, table) = level_arrays(&scalings);
        // The report, then each chunk's key counts (u32, two a word): one
        // array, so that one copy brings both back.
        let n_counts = chunks.len() * n_keys;
        let mut found = vec![NONE; REPORT_FIRSTS];
        found.resize(REPORT_WORDS + n_counts.div_ceil(2), 0);
        // Each chunk's first slots, then the tile offsets and keys: at most
        // one tile per (chunk, key) beyond the full ones.
        let meta_bound = if grouped {
            let partial = chunks.len() * n_keys + np / tile_max + 1;
            chunks.len() * n_keys + 2 * partial + 1
        } else {
            0
        };

        let mut pack = Packing::default();
        let starts = pack.add(boxes.source_starts);
        let sources = pack.add(boxes.source_boxes);
        let levels_part = pack.add(&box_levels);
        let level_scale = pack.add(&scale);
        let level_displacement = pack.add(&disp);
        let level_table = pack.add(&table);
        let centers = pack.add(boxes.centers);
        let targets = pack.add(boxes.target_boxes);
        let case_indices = pack.add(cases.case_indices());
        let report = pack.add(&found);
        let pair_cases = pack.reserve::<u8>(np);
        let tile_pairs = pack.reserve::<u32>(if grouped { np } else { 0 });
        let tile_meta = pack.reserve::<u32>(meta_bound);
        // The arrays come before the pairs are checked: where the device
        // has not the memory, the host plans, so that its checks still
        // name bad input first.
        let Ok(mut parts) = pack.upload(&self.device, &self.plan_staging) else {
            return host();
        };

        let tree = sys::hipkern_list1_tree {
            dim: boxes.dim as i32,
            root_extent: boxes.root_extent,
            n_boxes: n as i64,
            n_targets: nt as i64,
            n_pairs: np as i64,
            centers: parts.ptr(centers),
            box_levels: parts.ptr(levels_part),
            target_boxes: parts.ptr(targets),
            source_starts: parts.ptr(starts),
            source_boxes: parts.ptr(sources),
            case_indices: parts.ptr(case_indices),
        };
        // The null stream: ordered with the plan's synchronous copies.
        let stream = std::ptr::null_mut();
        let counts = parts.ptr_mut(report.at(REPORT_WORDS)).cast::<u32>();
        for (c, (t, _)) in chunks.iter().enumerate() {
            let key_counts = counts.wrapping_add(c * n_keys);
            let cases_out = parts.ptr_mut(pair_cases);
            let report_out = parts.ptr_mut(report).cast();
            // SAFETY: every pointer is into `parts`, sized by the packing
            // above for the tree's counts that `tree` names (checked by
            // check_list1_boxes: centres n × dim, offsets nt + 1 ending at
            // np), the report its struct (size asserted at compile time)
            // followed by n_keys counts for every chunk; the entry point checks
            // the counts and ranges before launching and guards every
            // index it reads on the device.
            check("hipkern_list1_classify_pairs", unsafe {
                sys::hipkern_list1_classify_pairs(
                    &tree,
                    t.start as i64,
                    t.end as i64,
                    parts.ptr(level_table),
                    n_cases as i32,
                    n_keys as i64,
                    key_counts,
                    cases_out,
                    report_out,
                    stream,
                )
            })?;
        }
        parts.read(report, &mut found)?;
        if found[..REPORT_FIRSTS].iter().any(|&f| f != NONE) {
            // A bad source, a pair that is none of List 1's, a bad row:
            // the CPU's check names it.
            drop(parts);
            return host();
        }
        if let Some(v) = values {
            check_source_values(v, n, nq)?;
        }
        let level_pairs = &found[REPORT_FIRSTS..REPORT_WORDS];
        let used: Vec<bool> = (0..=max_level).map(|l| level_pairs[l] > 0).collect();
        let scalings = shape_scalings(&meta.shapes, meta.per_level, boxes.root_extent, &used)?;
        meta.check_sizes(boxes, scalings.len())?;
        let displacement_pairs = (0..=max_level)
            .filter(|&l| disp[l] != 0.0)
            .map(|l| level_pairs[l] as usize)
            .sum();

        let groups = if grouped {
            // Two counts a word, the first in the low half (both sides
            // are little-endian).
            let key_counts: Vec<u32> = found[REPORT_WORDS..]
                .iter()
                .flat_map(|&w| [w as u32, (w >> 32) as u32])
                .take(n_counts)
                .collect();
            let Some(g) = self.group_on_device(
                &mut parts,
                &tree,
                &chunks,
                &key_counts,
                (level_table, pair_cases, tile_pairs, tile_meta, meta_bound),
            )?
            else {
                // Counts that do not add up to the chunks' pairs: the host
                // plans instead (never seen; the device tests compare).
                drop(parts);
                return host();
            };
            Some(g)
        } else {
            None
        };
        self.device.synchronize()?;
        Ok(List1DevicePlan {
            evaluator: self.id,
            device: self.device.ordinal(),
            n_targets: nt,
            n_boxes: n,
            n_pairs: np,
            displacement_pairs,
            n_levels: scale.len(),
            nq,
            kernel,
            contract: self.contract,
            reason,
            bytes: parts.bytes(),
            parts,
            starts,
            sources,
            cases: pair_cases,
            box_levels: levels_part,
            level_scale,
            level_displacement,
            level_table,
            groups,
            tiles: None,
            built_on_device: true,
        })
    }

    /// The grouped kernel's tiles from the device's key counts (one row of
    /// `n_keys` per chunk): each key's run, in key order from the chunk's
    /// first pair, cut into tiles; the first slots written to the device
    /// and the pairs scattered there. `None` where a chunk's counts do not
    /// add up to its pairs.
    fn group_on_device(
        &self,
        parts: &mut super::parts::DeviceParts,
        tree: &sys::hipkern_list1_tree,
        chunks: &[(std::ops::Range<usize>, std::ops::Range<usize>)],
        key_counts: &[u32],
        (level_table, pair_cases, tile_pairs, tile_meta, meta_bound): (
            Part<u32>,
            Part<u8>,
            Part<u32>,
            Part<u32>,
            usize,
        ),
    ) -> Result<Option<DeviceGrouping>> {
        let n_keys = self.n_tables * self.meta.n_cases;
        let tile_max = tile_capacity(self.meta.nq);
        let mut next = Vec::with_capacity(chunks.len() * n_keys);
        let mut tile_offsets = vec![0u32];
        let mut tile_keys = Vec::new();
        let mut group_chunks = Vec::with_capacity(chunks.len());
        let mut max_chunk_pairs = 0;
        for (c, (targets, pairs)) in chunks.iter().enumerate() {
            let count: Vec<usize> = key_counts[c * n_keys..(c + 1) * n_keys]
                .iter()
                .map(|&k| k as usize)
                .collect();
            let mut at = pairs.start;
            for &k in &count {
                next.push(at as u32);
                at += k;
            }
            if at != pairs.end {
                return Ok(None);
            }
            let tile0 = tile_keys.len();
            cut_tiles(
                &count,
                tile_max,
                pairs.start,
                &mut tile_keys,
                &mut tile_offsets,
            );
            max_chunk_pairs = max_chunk_pairs.max(pairs.len());
            group_chunks.push(GroupChunk {
                targets: targets.clone(),
                pairs: pairs.clone(),
                tiles: tile0..tile_keys.len(),
            });
        }
        let n_next = next.len();
        let n_offsets = tile_offsets.len();
        let mut meta = next;
        meta.append(&mut tile_offsets);
        meta.append(&mut tile_keys);
        if meta.len() > meta_bound {
            return Ok(None);
        }
        parts.write(tile_meta, &meta)?;
        for (c, (_, pairs)) in chunks.iter().enumerate() {
            let key_next = parts.ptr_mut(tile_meta.at(c * n_keys));
            let out = parts.ptr_mut(tile_pairs);
            // SAFETY: `tree` points into `parts`, classified with nothing
            // reported; key_next is this chunk's n_keys first slots, each
            // run within the chunk's pairs (their sums were checked above),
            // tile_pairs holds n_pairs ids and the kernel writes no slot at
            // or beyond that bound.
            check("hipkern_list1_group_pairs", unsafe {
                sys::hipkern_list1_group_pairs(
                    tree,
                    pairs.start as i64,
                    pairs.end as i64,
                    parts.ptr(level_table),
                    self.meta.n_cases as i32,
                    n_keys as i64,
                    parts.ptr(pair_cases),
                    key_next,
                    out,
                    tree.n_pairs,
                    std::ptr::null_mut(),
                )
            })?;
        }
        Ok(Some(DeviceGrouping {
            chunks: group_chunks,
            tile_offsets: tile_meta.at(n_next),
            tile_keys: tile_meta.at(n_next + n_offsets),
            tile_pairs,
            max_chunk_pairs,
            scratch: None,
        }))
    }
}
