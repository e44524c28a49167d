//! The host side of List 1's tiled kernels
//! (`hipkern_list1_evaluate_tiled`): the target boxes cut into tiles of
//! `targets_per_tile` boxes (one device thread each), and per tile the keys
//! `table · n_cases + case` of its boxes' pairs with, per key and lane, the
//! pair of that lane's box.
//!
//! A tile's block builds one case matrix per key of the tile and every
//! lane with a pair of that key applies it; a lane without one idles for
//! that key. So the tiles gather boxes with the same keys: the boxes are
//! ordered by their sorted key lists (lexicographically, ties by box id:
//! the interior boxes of a uniform region all have the same 3^d same-level
//! keys and stay in tree order) and cut in that order. [`TargetTiling::slots`]
//! against the pair count measures what is left idle.
//!
//! The `staged` kernel loads each tile's source boxes
//! once (shared memory rows): so a tile also lists its distinct source
//! boxes, sorted, and each (key, lane) slot the position of its pair's
//! source among them.
//! A tile is cut early where one more box would take it past
//! `max_sources` distinct sources (a box alone may exceed it: its own
//! sources are at most one per case).

use crate::threads::{map_on_threads, threads_for};

/// The tiles, the keys and the pair slots, as `hipkern_list1_tiles` takes
/// them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TargetTiling {
    pub targets_per_tile: usize,
    /// `n_tiles × targets_per_tile` target ids (`u32::MAX`: no box).
    pub tile_targets: Vec<u32>,
    /// `n_tiles + 1` offsets into `keys`.
    pub tile_key_offsets: Vec<u32>,
    /// Each tile's keys, ascending (a key repeats where a box has two
    /// pairs of one key).
    pub keys: Vec<u32>,
    /// `keys.len() × targets_per_tile` pair ids (`u32::MAX`: none).
    pub key_pairs: Vec<u32>,
    /// `n_tiles + 1` offsets into `tile_sources`.
    pub tile_source_offsets: Vec<u32>,
    /// Each tile's distinct source boxes, ascending.
    pub tile_sources: Vec<u32>,
    /// Per slot of `key_pairs`, the position of its pair's source box among
    /// its tile's sources (`u16::MAX`: no pair).
    pub key_source_slots: Vec<u16>,
    /// The most sources of one tile.
    pub max_tile_sources: usize,
}

impl TargetTiling {
    pub fn n_tiles(&self) -> usize {
        self.tile_key_offsets.len().saturating_sub(1)
    }

    /// Lane slots walked (keys × lanes): the device's work in units of one
    /// pair; the pair count over this is the tiles' utilisation.
    pub fn slots(&self) -> usize {
        self.key_pairs.len()
    }
}

/// The lanes busy of tiles walking `slots` lane slots for `pairs` pairs:
/// the fraction of the device's lane work that is a pair.
pub(crate) fn lanes_busy(pairs: usize, slots: usize) -> f64 {
    pairs as f64 / slots.max(1) as f64
}

const NONE: u32 = u32::MAX;

/// Pairs per thread at least when each target's pairs are sorted and when
/// the tiles' key rows are built: below this a thread's start costs more
/// than its share.
const PAIRS_PER_THREAD: usize = 1 << 16;

/// The threads for `n_pairs` pairs in `n_tiles` tiles, and the tiles cut
/// into one run of consecutive tiles per thread.
fn tile_runs(n_tiles: usize, n_pairs: usize) -> (usize, Vec<std::ops::Range<usize>>) {
    let threads = threads_for(n_pairs, PAIRS_PER_THREAD).min(n_tiles.max(1));
    let per = n_tiles.div_ceil(threads).max(1);
    let runs = (0..n_tiles.div_ceil(per))
        .map(|r| r * per..((r + 1) * per).min(n_tiles))
        .collect();
    (threads, runs)
}

/// The key rows of a run of consecutive tiles, offsets relative to the run.
#[derive(Default)]
struct KeyRows {
    tile_key_ends: Vec<u32>,
    keys: Vec<u32>,
    key_pairs: Vec<u32>,
    key_source_slots: Vec<u16>,
}

impl KeyOrder<'_> {
    /// The key rows of tiles `run` (tile `x`'s boxes `order[tiles[x]]`, in
    /// lane order; `t` the tiles' sources, of `n_sources` source boxes).
    fn key_rows(
        &self,
        run: std::ops::Range<usize>,
        tiles: &[std::ops::Range<usize>],
        t: &TargetTiling,
        n_sources: usize,
        source: &impl Fn(usize) -> u32,
    ) -> KeyRows {
        let b = t.targets_per_tile;
        let mut out = KeyRows::default();
        // (lane, pair) of one tile by key, lanes ascending within a key and a
        // lane's pairs in list order (each target's pairs are sorted by key,
        // stably): a counting sort over the tile's distinct keys. Each key's
        // rows are then its largest count on one lane.
        let mut entries: Vec<(u32, u32)> = Vec::new();
        let mut distinct: Vec<u32> = Vec::new();
        // Per key: its pairs in the tile, then its next entry (dense over the
        // keys; only the tile's own are touched and reset).
        let mut slot = vec![0u32; self.n_keys];
        // Per source box, its position among the open tile's sources (set for
        // each tile's own before its pairs look them up).
        let mut position = vec![0u16; n_sources];
        for tile in run {
            let boxes = &self.order[tiles[tile].clone()];
            distinct.clear();
            for &i in boxes {
                for &(k, _) in self.pairs_of(i) {
                    if slot[k as usize] == 0 {
                        distinct.push(k);
                    }
                    slot[k as usize] += 1;
                }
            }
            distinct.sort_unstable();
            let mut next = 0u32;
            for &k in &distinct {
                let n = slot[k as usize];
                slot[k as usize] = next;
                next += n;
            }
            entries.clear();
            entries.resize(next as usize, (0, 0));
            for (lane, &i) in boxes.iter().enumerate() {
                for &(k, j) in self.pairs_of(i) {
                    let s = &mut slot[k as usize];
                    entries[*s as usize] = (lane as u32, j);
                    *s += 1;
                }
            }
            let here = &t.tile_sources
                [t.tile_source_offsets[tile] as usize..t.tile_source_offsets[tile + 1] as usize];
            for (at, &s) in here.iter().enumerate() {
                position[s as usize] = at as u16;
            }
            let mut x = 0;
            for &k in &distinct {
                // After the scatter a key's slot is its end.
                let end = std::mem::take(&mut slot[k as usize]) as usize;
                let row0 = out.keys.len();
                while x < end {
                    // This lane's pairs of key k go to rows row0, row0 + 1, ...
                    let lane = entries[x].0;
                    let mut occurrence = 0;
                    while x < end && entries[x].0 == lane {
                        let row = row0 + occurrence;
                        if row == out.keys.len() {
                            out.keys.push(k);
                            out.key_pairs.resize(out.keys.len() * b, NONE);
                            out.key_source_slots.resize(out.keys.len() * b, u16::MAX);
                        }
                        let j = entries[x].1;
                        out.key_pairs[row * b + lane as usize] = j;
                        let at = position[source(j as usize) as usize];
                        debug_assert_eq!(here[usize::from(at)], source(j as usize));
                        out.key_source_slots[row * b + lane as usize] = at;
                        occurrence += 1;
                        x += 1;
                    }
                }
            }
            out.tile_key_ends.push(out.keys.len() as u32);
        }
        out
    }
}

/// FxHash's step (a rotate, a xor, a multiply per 8 bytes): the key lists
/// are hashed once per target, so SipHash's cost would show in a plan.
#[derive(Default)]
struct ListHasher(u64);

impl std::hash::Hasher for ListHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut v = [0u8; 8];
            v[..c.len()].copy_from_slice(c);
            self.0 =
                (self.0.rotate_left(5) ^ u64::from_le_bytes(v)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
}

/// The targets ordered by their sorted key lists (lexicographically), ties
/// by target id. Most targets share a list with many others (a uniform
/// region's interior has one), so the distinct lists are sorted and the
/// targets placed by their list's rank, in id order.
fn order_by_key_lists(starts: &[u32], sorted: &[(u32, u32)]) -> Vec<usize> {
    let n_targets = starts.len().saturating_sub(1);
    let keys: Vec<u32> = sorted.iter().map(|&(k, _)| k).collect();
    let list = |i: usize| &keys[starts[i] as usize..starts[i + 1] as usize];
    let mut class_of: std::collections::HashMap<
        &[u32],
        usize,
        std::hash::BuildHasherDefault<ListHasher>,
    > = Default::default();
    let mut first_of_class: Vec<usize> = Vec::new();
    let class: Vec<usize> = (0..n_targets)
        .map(|i| {
            *class_of.entry(list(i)).or_insert_with(|| {
                first_of_class.push(i);
                first_of_class.len() - 1
            })
        })
        .collect();
    let mut by_list: Vec<usize> = (0..first_of_class.len()).collect();
    by_list.sort_unstable_by(|&a, &b| list(first_of_class[a]).cmp(list(first_of_class[b])));
    // Each class's first position in the order, then a stable placement.
    let mut at = vec![0usize; first_of_class.len()];
    let mut count = vec![0usize; first_of_class.len()];
    for &c in &class {
        count[c] += 1;
    }
    let mut next = 0;
    for &c in &by_list {
        at[c] = next;
        next += count[c];
    }
    let mut order = vec![0usize; n_targets];
    for (i, &c) in class.iter().enumerate() {
        order[at[c]] = i;
        at[c] += 1;
    }
    order
}

/// What every tiling of one plan's pairs shares, whatever its width and
/// source bound: each target's pairs sorted by key (stable: list order
/// within a key) and the targets ordered by those key lists
/// ([`order_by_key_lists`]). A plan that compares tilings builds it once.
pub(crate) struct KeyOrder<'a> {
    starts: &'a [u32],
    /// Per target, its (key, pair) sorted by key, at the target's offsets.
    sorted: Vec<(u32, u32)>,
    /// The targets in tile order.
    order: Vec<usize>,
    /// One more than the largest key.
    n_keys: usize,
    /// The most pairs of one target.
    longest: usize,
}

impl<'a> KeyOrder<'a> {
    /// The order of the targets of CSR `starts` (`n_targets + 1` offsets;
    /// pair `j` of key `key(j)`).
    pub fn new(starts: &'a [u32], key: impl Fn(usize) -> u32 + Sync) -> Self {
        let n_targets = starts.len().saturating_sub(1);
        let n_pairs = starts.last().map_or(0, |&s| s as usize);
        let mut sorted: Vec<(u32, u32)> = vec![(0, 0); n_pairs];
        let threads = threads_for(n_pairs, PAIRS_PER_THREAD);
        let per = n_targets.div_ceil(threads).max(1);
        let mut runs = Vec::with_capacity(threads);
        let mut rest = sorted.as_mut_slice();
        for a in (0..n_targets).step_by(per) {
            let b = (a + per).min(n_targets);
            let (mine, tail) = rest.split_at_mut((starts[b] - starts[a]) as usize);
            runs.push((a..b, mine));
            rest = tail;
        }
        map_on_threads(threads, runs, |(targets, mine)| {
            let base = starts[targets.start] as usize;
            for i in targets {
                let (lo, hi) = (starts[i] as usize, starts[i + 1] as usize);
                let row = &mut mine[lo - base..hi - base];
                for (e, j) in row.iter_mut().zip(lo..hi) {
                    *e = (key(j), j as u32);
                }
                row.sort_unstable();
            }
        });
        let order = order_by_key_lists(starts, &sorted);
        KeyOrder {
            // Each target's pairs are sorted by key: its last is its largest.
            n_keys: starts
                .windows(2)
                .filter(|w| w[1] > w[0])
                .map(|w| sorted[w[1] as usize - 1].0 as usize + 1)
                .max()
                .unwrap_or(0),
            longest: starts
                .windows(2)
                .map(|w| (w[1] - w[0]) as usize)
                .max()
                .unwrap_or(0),
            starts,
            sorted,
            order,
        }
    }

    /// Target `i`'s (key, pair), sorted by key.
    fn pairs_of(&self, i: usize) -> &[(u32, u32)] {
        &self.sorted[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    /// The targets, in this order, cut into tiles of at most
    /// `targets_per_tile` boxes and, but for a box alone, `max_sources`
    /// distinct source boxes (at most `u16::MAX − 1`; pair `j`'s source
    /// box `source(j)`): [`Self::cut`], then [`Self::rows`].
    pub fn tile(
        &self,
        source: impl Fn(usize) -> u32 + Sync,
        targets_per_tile: usize,
        max_sources: usize,
    ) -> TargetTiling {
        let cut = self.cut(&source, targets_per_tile, max_sources);
        self.rows(cut, &source)
    }

    /// Where [`Self::tile`] cuts the tiles, and each tile's sources; its
    /// key rows not yet built ([`Self::slots`] counts them).
    pub fn cut(
        &self,
        source: &(impl Fn(usize) -> u32 + Sync),
        targets_per_tile: usize,
        max_sources: usize,
    ) -> Cut {
        let max_sources = max_sources.clamp(1, usize::from(u16::MAX) - 1);
        let b = targets_per_tile.max(1);
        let n_sources = (0..self.sorted.len())
            .map(|j| source(j) as usize + 1)
            .max()
            .unwrap_or(0);
        // A bound no tile can reach cuts every b boxes: the tiles' sources
        // are then found on every core.
        if n_sources.min(b.saturating_mul(self.longest)) <= max_sources {
            self.cut_every(b, n_sources, source)
        } else {
            self.cut_bounded(b, max_sources, n_sources, source)
        }
    }

    /// The lane slots the key rows of `cut` take ([`TargetTiling::slots`]),
    /// counted without building them: per tile, each key's most pairs on
    /// one lane, times the lanes.
    pub fn slots(&self, cut: &Cut) -> usize {
        let n_tiles = cut.tiles.len();
        let n_keys = self.n_keys;
        let (threads, runs) = tile_runs(n_tiles, self.sorted.len());
        let rows: Vec<usize> = map_on_threads(threads, runs, |run: std::ops::Range<usize>| {
            let mut most = vec![0u32; n_keys];
            let mut touched: Vec<u32> = Vec::new();
            let mut rows = 0usize;
            for tile in run {
                for &i in &self.order[cut.tiles[tile].clone()] {
                    // A lane's pairs of one key are adjacent (sorted).
                    for same in self.pairs_of(i).chunk_by(|a, b| a.0 == b.0) {
                        let k = same[0].0 as usize;
                        if most[k] == 0 {
                            touched.push(k as u32);
                        }
                        most[k] = most[k].max(same.len() as u32);
                    }
                }
                for k in touched.drain(..) {
                    rows += std::mem::take(&mut most[k as usize]) as usize;
                }
            }
            rows
        });
        rows.iter().sum::<usize>() * cut.targets_per_tile
    }

    /// The tiling of `cut`: its key rows built on every core.
    pub fn rows(&self, cut: Cut, source: &(impl Fn(usize) -> u32 + Sync)) -> TargetTiling {
        let Cut {
            targets_per_tile: b,
            n_sources,
            tiles,
            tile_source_offsets,
            tile_sources,
        } = cut;
        let n_pairs = self.sorted.len();
        let n_tiles = tiles.len();
        let mut t = TargetTiling {
            targets_per_tile: b,
            tile_targets: vec![NONE; n_tiles * b],
            tile_key_offsets: Vec::with_capacity(n_tiles + 1),
            max_tile_sources: tile_source_offsets
                .windows(2)
                .map(|w| (w[1] - w[0]) as usize)
                .max()
                .unwrap_or(0),
            tile_source_offsets,
            tile_sources,
            ..TargetTiling::default()
        };
        // Each tile's key rows depend on that tile alone: the tiles are cut
        // into one run per thread, each run's rows built apart and appended
        // in tile order (the same rows one thread would build).
        let (threads, runs) = tile_runs(n_tiles, n_pairs);
        let runs: Vec<KeyRows> = map_on_threads(threads, runs, |run| {
            self.key_rows(run, &tiles, &t, n_sources, source)
        });
        t.tile_key_offsets.push(0);
        for (tile, range) in tiles.iter().enumerate() {
            for (lane, &i) in self.order[range.clone()].iter().enumerate() {
                t.tile_targets[tile * b + lane] = i as u32;
            }
        }
        for run in runs {
            let at = t.keys.len() as u32;
            t.tile_key_offsets
                .extend(run.tile_key_ends.iter().map(|&e| at + e));
            t.keys.extend_from_slice(&run.keys);
            t.key_pairs.extend_from_slice(&run.key_pairs);
            t.key_source_slots.extend_from_slice(&run.key_source_slots);
        }
        t
    }

    /// Tiles of `b` boxes in order, each tile's sources found apart (one
    /// run of tiles per thread, with its own marks).
    fn cut_every(
        &self,
        b: usize,
        n_sources: usize,
        source: &(impl Fn(usize) -> u32 + Sync),
    ) -> Cut {
        let n_targets = self.order.len();
        let tiles: Vec<std::ops::Range<usize>> = (0..n_targets)
            .step_by(b)
            .map(|x| x..(x + b).min(n_targets))
            .collect();
        let n_tiles = tiles.len();
        let (threads, runs) = tile_runs(n_tiles, self.sorted.len());
        let runs: Vec<(Vec<u32>, Vec<u32>)> =
            map_on_threads(threads, runs, |run: std::ops::Range<usize>| {
                let mut in_tile = vec![NONE; n_sources];
                let (mut ends, mut sources) = (Vec::new(), Vec::new());
                for tile in run {
                    let first = sources.len();
                    for &i in &self.order[tiles[tile].clone()] {
                        for &(_, j) in self.pairs_of(i) {
                            let s = source(j as usize);
                            if in_tile[s as usize] != tile as u32 {
                                in_tile[s as usize] = tile as u32;
                                sources.push(s);
                            }
                        }
                    }
                    sources[first..].sort_unstable();
                    ends.push(sources.len() as u32);
                }
                (ends, sources)
            });
        let mut cut = Cut {
            targets_per_tile: b,
            n_sources,
            tiles,
            tile_source_offsets: Vec::with_capacity(n_tiles + 1),
            tile_sources: Vec::new(),
        };
        cut.tile_source_offsets.push(0);
        for (ends, sources) in runs {
            let at = cut.tile_sources.len() as u32;
            cut.tile_source_offsets.extend(ends.iter().map(|&e| at + e));
            cut.tile_sources.extend_from_slice(&sources);
        }
        cut
    }

    /// The greedy cut: a box joins the open tile if the tile keeps at most
    /// `b` boxes and `max_sources` distinct sources (`union`); a closed
    /// tile's union, sorted, is its sources. Marks per source box
    /// (`in_tile`: the tile holding it; `in_box`: the box last counting it)
    /// keep the cut linear in the pairs; each pair's source is read once
    /// unless its box opens a tile.
    fn cut_bounded(
        &self,
        b: usize,
        max_sources: usize,
        n_sources: usize,
        source: &impl Fn(usize) -> u32,
    ) -> Cut {
        let mut in_tile = vec![NONE; n_sources];
        let mut in_box = vec![NONE; n_sources];
        let mut cut = Cut {
            targets_per_tile: b,
            n_sources,
            tiles: Vec::new(),
            tile_source_offsets: vec![0],
            tile_sources: Vec::new(),
        };
        let mut union: Vec<u32> = Vec::new();
        let mut fresh: Vec<u32> = Vec::new();
        let mut begin = 0;
        let close = |cut: &mut Cut, union: &mut Vec<u32>, range| {
            cut.tiles.push(range);
            union.sort_unstable();
            cut.tile_sources.append(union);
            cut.tile_source_offsets.push(cut.tile_sources.len() as u32);
        };
        for (x, &i) in self.order.iter().enumerate() {
            let tile = cut.tiles.len() as u32;
            fresh.clear();
            for &(_, j) in self.pairs_of(i) {
                let s = source(j as usize);
                if in_tile[s as usize] != tile && in_box[s as usize] != x as u32 {
                    in_box[s as usize] = x as u32;
                    fresh.push(s);
                }
            }
            if x > begin && (x - begin == b || union.len() + fresh.len() > max_sources) {
                close(&mut cut, &mut union, begin..x);
                begin = x;
                // The box opens the next tile: all its sources are new there.
                let tile = tile + 1;
                for &(_, j) in self.pairs_of(i) {
                    let s = source(j as usize);
                    if in_tile[s as usize] != tile {
                        in_tile[s as usize] = tile;
                        union.push(s);
                    }
                }
            } else {
                for &s in &fresh {
                    in_tile[s as usize] = tile;
                }
                union.extend_from_slice(&fresh);
            }
        }
        if begin < self.order.len() {
            close(&mut cut, &mut union, begin..self.order.len());
        }
        cut
    }
}

/// Where a tiling cuts the ordered targets: the tiles (ranges of the
/// order) and each tile's distinct sources, ascending.
#[cfg_attr(test, derive(Debug, PartialEq))]
pub(crate) struct Cut {
    targets_per_tile: usize,
    /// One more than the largest source box.
    n_sources: usize,
    tiles: Vec<std::ops::Range<usize>>,
    /// `tiles.len() + 1` offsets into `tile_sources`.
    tile_source_offsets: Vec<u32>,
    tile_sources: Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// Every target on exactly one lane; every pair in exactly one slot, on
    /// its own target's lane, under its own key, with the position of its
    /// source among its tile's sources; keys ascending per tile; no empty
    /// key row; a tile's sources distinct, ascending, exactly its pairs',
    /// within `max_sources` unless the tile is one box.
    fn check(
        starts: &[u32],
        keys: &[u32],
        sources: &[u32],
        b: usize,
        max_sources: usize,
    ) -> TargetTiling {
        let order = KeyOrder::new(starts, |j| keys[j]);
        let source = |j: usize| sources[j];
        let cut = order.cut(&source, b, max_sources);
        let slots = order.slots(&cut);
        let t = order.rows(cut, &source);
        assert_eq!(slots, t.slots(), "slots counted before the rows");
        // The cut by the bound, where no tile can reach it, is the cut
        // every b boxes (which `cut` takes then, on every core).
        let n_sources = sources.iter().map(|&x| x as usize + 1).max().unwrap_or(0);
        assert_eq!(
            order.cut_bounded(b, n_sources.max(1), n_sources, &source),
            order.cut_every(b, n_sources, &source),
            "the bounded cut with an unreachable bound"
        );
        let n_targets = starts.len() - 1;
        let n_pairs = keys.len();
        if max_sources >= n_pairs {
            assert_eq!(t.n_tiles(), n_targets.div_ceil(b));
        }
        assert_eq!(t.tile_targets.len(), t.n_tiles() * b);
        assert_eq!(t.key_pairs.len(), t.keys.len() * b);
        assert_eq!(t.key_source_slots.len(), t.keys.len() * b);
        assert_eq!(t.tile_source_offsets.len(), t.n_tiles() + 1);
        assert_eq!(
            *t.tile_source_offsets.last().unwrap() as usize,
            t.tile_sources.len()
        );
        let mut target_seen = vec![false; n_targets];
        let mut pair_seen = vec![false; n_pairs];
        for tile in 0..t.n_tiles() {
            let (e0, e1) = (
                t.tile_key_offsets[tile] as usize,
                t.tile_key_offsets[tile + 1] as usize,
            );
            assert!(t.keys[e0..e1].windows(2).all(|w| w[0] <= w[1]));
            let here = &t.tile_sources
                [t.tile_source_offsets[tile] as usize..t.tile_source_offsets[tile + 1] as usize];
            assert!(
                here.windows(2).all(|w| w[0] < w[1]),
                "sources not distinct, ascending"
            );
            assert!(here.len() <= t.max_tile_sources);
            let boxes_here = t.tile_targets[tile * b..(tile + 1) * b]
                .iter()
                .filter(|&&i| i != NONE)
                .count();
            assert!(
                here.len() <= max_sources || boxes_here == 1,
                "tile {tile} over the bound"
            );
            let mut used = vec![false; here.len()];
            for e in e0..e1 {
                let row = &t.key_pairs[e * b..(e + 1) * b];
                assert!(row.iter().any(|&j| j != NONE), "key row {e} empty");
                for (lane, &j) in row.iter().enumerate() {
                    if j == NONE {
                        continue;
                    }
                    let i = t.tile_targets[tile * b + lane];
                    assert_ne!(i, NONE, "a pair on a lane without a box");
                    let j = j as usize;
                    assert!(
                        (starts[i as usize] as usize..starts[i as usize + 1] as usize).contains(&j)
                    );
                    assert_eq!(keys[j], t.keys[e]);
                    let slot = usize::from(t.key_source_slots[e * b + lane]);
                    assert_eq!(here[slot], sources[j], "pair {j}'s source slot");
                    used[slot] = true;
                    assert!(!pair_seen[j], "pair {j} twice");
                    pair_seen[j] = true;
                }
            }
            assert!(
                used.iter().all(|&u| u),
                "a source of tile {tile} no pair reads"
            );
            for lane in 0..b {
                let i = t.tile_targets[tile * b + lane];
                if i != NONE {
                    assert!(!target_seen[i as usize], "target {i} twice");
                    target_seen[i as usize] = true;
                }
            }
        }
        assert!(target_seen.iter().all(|&s| s), "a target on no lane");
        assert!(pair_seen.iter().all(|&s| s), "a pair in no slot");
        t
    }

    #[test]
    fn every_target_on_one_lane_every_pair_in_one_slot() {
        let mut rng = SplitMix64::new(0x7469_6c65_6431);
        for round in 0..200 {
            let n_targets = rng.below(150);
            let mut starts = vec![0u32];
            for _ in 0..n_targets {
                let n = rng.below(if round % 5 == 0 { 40 } else { 12 }) as u32;
                starts.push(starts.last().unwrap() + n);
            }
            let n_keys = 1 + rng.below(30) as u32;
            let n_pairs = *starts.last().unwrap() as usize;
            // Repeated keys within a list included (a repeated pair).
            let keys: Vec<u32> = (0..n_pairs)
                .map(|_| rng.below(n_keys as usize) as u32)
                .collect();
            let n_boxes = 1 + rng.below(200);
            let sources: Vec<u32> = (0..n_pairs).map(|_| rng.below(n_boxes) as u32).collect();
            let max_sources = [usize::MAX, 1, 8, 40][(round / 4) % 4];
            check(
                &starts,
                &keys,
                &sources,
                [1, 2, 32, 64][round % 4],
                max_sources,
            );
        }
    }

    #[test]
    fn same_key_lists_share_tiles_in_order() {
        // Targets 0, 2, 4 have keys {1, 5}; 1 and 3 have {2}; 5 none.
        let starts = [0u32, 2, 3, 5, 6, 8, 8];
        let keys = [5, 1, 2, 1, 5, 2, 1, 5];
        let sources = [9, 3, 4, 3, 7, 4, 3, 9];
        let t = check(&starts, &keys, &sources, 2, usize::MAX);
        // Order: [] (5), then {1, 5} (0, 2, 4), then {2} (1, 3).
        assert_eq!(t.tile_targets, vec![5, 0, 2, 4, 1, 3]);
        assert_eq!(t.tile_key_offsets, vec![0, 2, 4, 5]);
        assert_eq!(t.keys, vec![1, 5, 1, 5, 2]);
        assert_eq!(t.key_pairs, vec![NONE, 1, NONE, 0, 3, 6, 4, 7, 2, 5]);
        assert_eq!(t.slots(), 10);
        assert_eq!(t.tile_source_offsets, vec![0, 2, 5, 6]);
        assert_eq!(t.tile_sources, vec![3, 9, 3, 7, 9, 4]);
        assert_eq!(t.max_tile_sources, 3);
        let m = u16::MAX;
        assert_eq!(t.key_source_slots, vec![m, 0, m, 1, 0, 0, 1, 2, 0, 0]);
    }

    #[test]
    fn a_tile_is_cut_where_its_sources_would_pass_the_bound() {
        // Four targets, two pairs each; targets 0 and 1 share their
        // sources, 2 and 3 read two new ones each.
        let starts = [0u32, 2, 4, 6, 8];
        let keys = [0, 1, 0, 1, 0, 1, 0, 1];
        let sources = [10, 11, 10, 11, 12, 13, 14, 15];
        let t = check(&starts, &keys, &sources, 4, 4);
        assert_eq!(t.n_tiles(), 2);
        assert_eq!(t.tile_targets, vec![0, 1, 2, NONE, 3, NONE, NONE, NONE]);
        assert_eq!(t.tile_sources, vec![10, 11, 12, 13, 14, 15]);
        // A box with more sources than the bound gets a tile of its own.
        let t = check(&starts, &keys, &sources, 4, 1);
        assert_eq!(t.n_tiles(), 4);
        assert_eq!(t.max_tile_sources, 2);
    }

    #[test]
    fn a_repeated_key_gets_a_second_row() {
        let starts = [0u32, 3, 4];
        let keys = [7, 7, 2, 7];
        let t = check(&starts, &keys, &[5, 6, 5, 5], 2, usize::MAX);
        assert_eq!(t.keys, vec![2, 7, 7]);
        assert_eq!(t.key_pairs, vec![2, NONE, 0, 3, 1, NONE]);
    }

    #[test]
    fn a_uniform_octree_stages_few_sources() {
        // 16^3 leaves: a tile of 64 interior boxes in Morton order is close
        // to a 4 x 4 x 4 block reading 6 x 6 x 6 = 216 sources (not aligned
        // to the Morton blocks: the boundary boxes have other key lists), so
        // the staged source rows are a small share of the pairs (the per-key
        // staging loads one row per pair).
        let tree = crate::nearfield::BalancedTree::uniform(3, 4, &[0.0; 3], 1.0).unwrap();
        let targets = tree.all_boxes();
        let boxes = tree.list1_boxes(&targets);
        let cases = boxes.pairs().unwrap().cases;
        let b = 64;
        let t = KeyOrder::new(boxes.source_starts, |j| u32::from(cases[j])).tile(
            |j| boxes.source_boxes[j],
            b,
            4 * b,
        );
        let full = (0..t.n_tiles())
            .filter(|&k| {
                t.tile_targets[k * b..(k + 1) * b]
                    .iter()
                    .all(|&i| i != NONE)
            })
            .count();
        let at_216 = (0..t.n_tiles())
            .filter(|&k| t.tile_source_offsets[k + 1] - t.tile_source_offsets[k] <= 216)
            .count();
        let pairs = cases.len();
        eprintln!(
            "{} tiles ({full} full, {at_216} with at most 216 sources), {} staged source rows \
             for {pairs} pairs, at most {} per tile",
            t.n_tiles(),
            t.tile_sources.len(),
            t.max_tile_sources
        );
        assert!(t.max_tile_sources <= 4 * b);
        assert!(t.n_tiles() <= tree.n_boxes().div_ceil(b) * 5 / 4);
        assert!(5 * t.tile_sources.len() < pairs);
    }
}
