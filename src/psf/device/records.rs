//! What the sink reports of its chunks: the mode each went by, its list
//! sizes, and the kernel times of the profile.
use super::DeviceSink;
use crate::runtime::{Event, Result};

/// How one chunk was accumulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkMode {
    /// Float64 atomics.
    Atomic,
    /// 16×16 tiles.
    Tile16,
    /// 32×32 tiles.
    Tile32,
}

/// One chunk of the sink's cached path, as it went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRecord {
    /// Events in the chunk.
    pub events: usize,
    /// How it was accumulated.
    pub mode: ChunkMode,
    /// Tile references (tile modes and adaptive; else 0).
    pub references: u64,
    /// Tasks.
    pub tasks: u64,
    /// Partial-sum slots.
    pub partial_slots: u64,
    /// The longest tile list.
    pub longest_list: u64,
    /// Events whose centre lies on the image.
    pub centre_events: u64,
    /// Occupied 32×32 centre tiles.
    pub centre_tiles: u64,
}

/// Time spent, from device events (only with
/// [`DeviceSinkBuilder::profile`](super::DeviceSinkBuilder::profile)).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SinkTimings {
    /// Binning pass (check, prepare, and with device binning count + scan), ms.
    pub bin_ms: f64,
    /// Host binning (wall clock, including the lists' upload), ms.
    pub host_binning_ms: f64,
    /// Tile accumulation (scatter, sort, accumulate, merge), ms.
    pub accumulate_ms: f64,
    /// Atomic splats (and their contribution counts), ms.
    pub atomic_ms: f64,
    /// The direct path's renders (events too large for the cache), ms.
    pub direct_ms: f64,
}

/// Pending device-event pairs of the profile, and what they summed to.
#[derive(Default)]
pub(super) struct Profile {
    pub(super) pending: Vec<(ChunkStage, Event, Event)>,
    pub(super) spare: Vec<Event>,
    pub(super) timings: SinkTimings,
}

#[derive(Clone, Copy)]
pub(super) enum ChunkStage {
    Bin,
    Accumulate,
    Atomic,
    Direct,
}

impl DeviceSink {
    /// A device event on the compute stream when profiling.
    pub(super) fn mark(&mut self) -> Result<Option<Event>> {
        let Some(p) = self.profile.as_mut() else {
            return Ok(None);
        };
        let e = match p.spare.pop() {
            Some(e) => e,
            None => Event::new(&self.device)?,
        };
        e.record(&self.stream)?;
        Ok(Some(e))
    }

    /// Closes a profiled stage opened by [`DeviceSink::mark`].
    pub(super) fn close(&mut self, stage: ChunkStage, start: Option<Event>) -> Result<()> {
        let Some(start) = start else {
            return Ok(());
        };
        let end = self.mark()?.expect("profiling");
        self.profile
            .as_mut()
            .expect("profiling")
            .pending
            .push((stage, start, end));
        Ok(())
    }

    /// Adds the finished profiled stages (the stream has been synchronized).
    pub(super) fn drain_profile(&mut self) -> Result<()> {
        let Some(p) = self.profile.as_mut() else {
            return Ok(());
        };
        for (stage, a, b) in p.pending.drain(..) {
            let ms = f64::from(a.elapsed_ms(&b)?);
            match stage {
                ChunkStage::Bin => p.timings.bin_ms += ms,
                ChunkStage::Accumulate => p.timings.accumulate_ms += ms,
                ChunkStage::Atomic => p.timings.atomic_ms += ms,
                ChunkStage::Direct => p.timings.direct_ms += ms,
            }
            p.spare.push(a);
            p.spare.push(b);
        }
        Ok(())
    }
}
