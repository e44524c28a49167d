//! Tile lists of the owner-computes modes (`tile16`, `tile32`), built on the
//! host: the optional CPU binning path (`docs/design/psf.md#tiles`), and the statement of
//! what the device's binning pass (`hipkern_psf_tile_bin`) computes.
//!
//! # The lists
//!
//! The image is cut into tiles of side `tile` (16 or 32), numbered row-major,
//! `ty·⌈width/tile⌉ + tx`. An event is in a tile's list when one of its
//! in-image support pixels (the clipped per-row ranges of
//! [`super::support`]) lies in the tile. Found per band of tile rows
//! without visiting pixels: the support's rows are nested about row 0
//! (every row's column range lies inside the range of any row nearer to
//! row 0), so a band's columns are those of its row nearest the anchor row,
//! clipped to the image. Each list holds event indices of the chunk in
//! ascending order (the device sorts its scattered lists into that order),
//! so a pixel adds its events in the order the CPU reference does.
//!
//! # The tasks
//!
//! A tile's list is cut into segments of at most [`SEGMENT`] references,
//! one accumulation task each, tiles in ascending order. A tile with one
//! segment writes its pixels directly ([`DIRECT_TASK`]); the segments of a
//! longer list write partial sums into consecutive slots (numbered across
//! the chunk in task order) that a merge adds in segment order.
use super::event::StarEvent;
use super::reference::{clip_span, place};

/// Most references one accumulation task takes.
pub const SEGMENT: usize = hipkern_sys::HIPKERN_PSF_SEGMENT as usize;
/// `partial` of a task whose tile has one segment (it writes the pixels).
pub const DIRECT_TASK: u32 = hipkern_sys::HIPKERN_PSF_DIRECT_TASK;

/// One accumulation task, laid out as `hipkern_psf_tile_task`:
/// `[tile, start, count, partial, segment, segments]`.
pub type TileTask = [u32; 6];

/// The tile lists and tasks of one chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileLists {
    /// Tile side, 16 or 32.
    pub tile: usize,
    /// The end of each tile's list in `references` (its start is the
    /// previous tile's end): what the device's `tile_ends` holds after
    /// binning and scatter.
    pub ends: Vec<u32>,
    /// Event indices, tile by tile, ascending within a tile.
    pub references: Vec<u32>,
    /// The tasks, tiles in ascending order, segments in order.
    pub tasks: Vec<TileTask>,
    /// Partial-sum slots the tasks use.
    pub partial_slots: u64,
    /// Tiles with a non-empty list.
    pub occupied_tiles: u64,
    /// The longest list.
    pub longest_list: u64,
}

/// Tiles of side `tile` on a `width × height` image.
pub fn tile_count(width: usize, height: usize, tile: usize) -> usize {
    width.div_ceil(tile) * height.div_ceil(tile)
}

/// Calls `f(tile index)` once for every tile of side `tile` holding one of
/// the event's in-image support pixels, bands in ascending order, tiles
/// ascending within a band (the device's `for_each_tile`). The event must
/// fit the cache (its offsets within ±[`CACHE_RADIUS`](super::CACHE_RADIUS)).
pub fn for_each_tile(
    e: &StarEvent,
    width: usize,
    height: usize,
    tile: usize,
    mut f: impl FnMut(u32),
) {
    // The in-image rows (and the clearly-outside test) as the CPU sink
    // places the event.
    let Some((p, _)) = place(e, width, height) else {
        return;
    };
    let (py_lo, py_hi) = (p.ay + p.oy_lo, p.ay + p.oy_hi);
    let t = tile as i64;
    let ntx = width.div_ceil(tile) as i64;
    for ty in py_lo / t..=py_hi / t {
        let b_lo = (ty * t).max(py_lo);
        let b_hi = (ty * t + t - 1).min(py_hi);
        // The band's columns are those of its row nearest the anchor row.
        let oy = 0i64.clamp(b_lo - p.ay, b_hi - p.ay);
        let Some((a, b)) = clip_span(p.fx, p.fy, p.s, oy, p.ax, width) else {
            continue;
        };
        for tx in a / t..=b / t {
            f((ty * ntx + tx) as u32);
        }
    }
}

/// The lists and tasks of one chunk of cache-fitting events (at most
/// `CHUNK_EVENTS`), by counting, a prefix sum and a scatter in event order.
pub fn bin_chunk(events: &[StarEvent], width: usize, height: usize, tile: usize) -> TileLists {
    let n_tiles = tile_count(width, height, tile);
    // Each event's tiles, found once (the row spans are the cost): event k's
    // are tiles[first[k]..first[k + 1]].
    let (mut tiles, mut first) = (Vec::new(), Vec::with_capacity(events.len() + 1));
    for e in events {
        first.push(tiles.len());
        for_each_tile(e, width, height, tile, |t| tiles.push(t));
    }
    first.push(tiles.len());
    let mut counts = vec![0u32; n_tiles];
    for &t in &tiles {
        counts[t as usize] += 1;
    }
    let mut cursor = Vec::with_capacity(n_tiles);
    let mut total = 0u32;
    for &c in &counts {
        cursor.push(total);
        total += c;
    }
    let mut references = vec![0u32; total as usize];
    for (k, span) in first.windows(2).enumerate() {
        for &t in &tiles[span[0]..span[1]] {
            let c = &mut cursor[t as usize];
            references[*c as usize] = k as u32;
            *c += 1;
        }
    }
    let mut tasks = Vec::new();
    let (mut slot, mut occupied, mut longest) = (0u32, 0u64, 0u64);
    let mut start = 0u32;
    for (t, &n) in counts.iter().enumerate() {
        let segments = (n as usize).div_ceil(SEGMENT) as u32;
        for seg in 0..segments {
            let begin = seg * SEGMENT as u32;
            tasks.push([
                t as u32,
                start + begin,
                (n - begin).min(SEGMENT as u32),
                if segments > 1 {
                    slot + seg
                } else {
                    DIRECT_TASK
                },
                seg,
                segments,
            ]);
        }
        if segments > 1 {
            slot += segments;
        }
        occupied += u64::from(n > 0);
        longest = longest.max(u64::from(n));
        start += n;
    }
    TileLists {
        tile,
        ends: cursor,
        references,
        tasks,
        partial_slots: u64::from(slot),
        occupied_tiles: occupied,
        longest_list: longest,
    }
}

#[cfg(test)]
mod tests {
    use super::super::support::{anchor_phase, row_span};
    use super::super::CACHE_RADIUS;
    use super::*;
    use crate::rng::SplitMix64;
    use std::collections::BTreeSet;

    /// The tiles of an event's in-image pixels, visiting every pixel.
    fn tiles_by_pixels(e: &StarEvent, width: usize, height: usize, tile: usize) -> BTreeSet<u32> {
        let (ax, fx) = anchor_phase(e.x);
        let (ay, fy) = anchor_phase(e.y);
        let r = CACHE_RADIUS as i64;
        let ntx = width.div_ceil(tile) as i64;
        let mut set = BTreeSet::new();
        for oy in -r..=r {
            let py = ay + oy;
            if py < 0 || py >= height as i64 {
                continue;
            }
            if let Some((lo, hi)) = row_span(fx, fy, e.support, oy) {
                for px in (ax + lo).max(0)..=(ax + hi).min(width as i64 - 1) {
                    set.insert(((py / tile as i64) * ntx + px / tile as i64) as u32);
                }
            }
        }
        set
    }

    fn unit(rng: &mut SplitMix64) -> f64 {
        0.5 * (rng.uniform_pm1() + 1.0)
    }

    fn random_events(seed: u64, n: usize, width: usize, height: usize) -> Vec<StarEvent> {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|_| {
                // Centres up to 60 px off the image, supports up to the cache's reach.
                let x = unit(&mut rng) * (width as f64 + 120.0) - 60.0;
                let y = unit(&mut rng) * (height as f64 + 120.0) - 60.0;
                let support = 0.3 + unit(&mut rng) * 46.0;
                StarEvent {
                    x,
                    y,
                    flux: 1.0,
                    r: 1.0,
                    g: 1.0,
                    b: 1.0,
                    support,
                }
            })
            .collect()
    }

    #[test]
    fn band_rule_finds_exactly_the_tiles_of_the_pixels() {
        for &(w, h) in &[(200usize, 150usize), (33, 17), (16, 16), (1, 64)] {
            for tile in [16, 32] {
                for e in random_events(w as u64 * 31 + tile as u64, 400, w, h) {
                    let mut got = Vec::new();
                    for_each_tile(&e, w, h, tile, |t| got.push(t));
                    let set: BTreeSet<u32> = got.iter().copied().collect();
                    assert_eq!(set.len(), got.len(), "a tile twice for {e:?}");
                    assert_eq!(
                        set,
                        tiles_by_pixels(&e, w, h, tile),
                        "{e:?} on {w}×{h}, tile {tile}"
                    );
                }
            }
        }
    }

    #[test]
    fn lists_are_sorted_and_tasks_cover_them() {
        let (w, h) = (300, 200);
        let mut events = random_events(7, 3000, w, h);
        // A crowd in one spot, so some lists are longer than one segment.
        for e in events.iter_mut().take(1200) {
            e.x = 100.0 + (e.x - 100.0) * 0.02;
            e.y = 90.0 + (e.y - 90.0) * 0.02;
        }
        for tile in [16, 32] {
            let l = bin_chunk(&events, w, h, tile);
            assert_eq!(l.ends.len(), tile_count(w, h, tile));
            assert_eq!(*l.ends.last().unwrap() as usize, l.references.len());
            let sets: Vec<BTreeSet<u32>> = events
                .iter()
                .map(|e| tiles_by_pixels(e, w, h, tile))
                .collect();
            let mut begin = 0usize;
            for (t, &end) in l.ends.iter().enumerate() {
                let list = &l.references[begin..end as usize];
                assert!(
                    list.windows(2).all(|p| p[0] < p[1]),
                    "tile {t} not ascending"
                );
                let want: Vec<u32> = (0..events.len() as u32)
                    .filter(|&k| sets[k as usize].contains(&(t as u32)))
                    .collect();
                assert_eq!(list, &want[..], "tile {t}");
                begin = end as usize;
            }
            assert!(
                l.longest_list > SEGMENT as u64,
                "the crowd makes long lists"
            );
            // Tasks: consecutive, each ≤ SEGMENT, covering every list; slots distinct.
            let mut covered = 0usize;
            let mut slots = BTreeSet::new();
            for task in &l.tasks {
                let [_, start, count, partial, segment, segments] = *task;
                assert_eq!(start as usize, covered);
                assert!(count >= 1 && count as usize <= SEGMENT);
                assert!(segment < segments);
                if segments == 1 {
                    assert_eq!(partial, DIRECT_TASK);
                } else {
                    assert!(slots.insert(partial));
                }
                covered += count as usize;
            }
            assert_eq!(covered, l.references.len());
            assert_eq!(slots.len() as u64, l.partial_slots);
        }
    }
}
