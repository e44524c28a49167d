//! Frames with overlapped downloads: a renderer that streams frames ends
//! each one without waiting for its image to reach the host.
//!
//! [`DeviceSink::end_frame`] copies the image on the device into a frame
//! buffer, starts the image black again, and downloads the frame buffer
//! into page-locked memory on a stream of its own. The next frame's
//! uploads (copy stream) and kernels (compute stream) run beside that
//! download: PCIe moves both directions at once, and the device copy takes
//! a few hundredths of a millisecond where a 4K download takes milliseconds.
//! [`DeviceSink::ended_frame`] waits for the download and lends the frame.
//!
//! One frame is in flight: ending a frame while the previous one is still
//! downloading makes the device wait for that download before it overwrites
//! the frame buffer, and a frame not read before the next one ends is
//! replaced by it.
use super::DeviceSink;
use crate::runtime::Pinned;
use crate::runtime::{DeviceBuffer, Error, Event, Result, Stream};

/// The frame buffer, its page-locked copy and their stream (allocated by
/// the first [`DeviceSink::end_frame`]).
pub(super) struct Frames {
    stream: Stream,
    /// The device copy of the last ended frame.
    snapshot: DeviceBuffer<f64>,
    /// Its host copy.
    pinned: Pinned<f64>,
    /// Recorded on the compute stream after the snapshot copy.
    copied: Event,
    /// Recorded on the frame stream after the download.
    downloaded: Event,
    /// Frames ended so far.
    ended: u64,
}

impl Frames {
    /// Waits for the frame stream (the sink's drop: the pinned copy and the
    /// snapshot must not be freed under a running download).
    pub(super) fn synchronize(&self) -> Result<()> {
        self.stream.synchronize()
    }
}

impl DeviceSink {
    /// Ends the current frame without waiting for its download: queues, on
    /// the device, a copy of the image into the sink's frame buffer and a
    /// black image for the next frame, then the frame buffer's download
    /// into the sink's page-locked frame (its own stream, beside the next
    /// frame's work). Read it with [`DeviceSink::ended_frame`] before the
    /// next `end_frame`, which replaces it. Counters, stats and the chunk
    /// log go on across frames ([`DeviceSink::reset`] clears them). The
    /// first call allocates the frame buffer and its page-locked copy (two
    /// images' worth).
    pub fn end_frame(&mut self) -> Result<()> {
        let _scope = self.device.enter()?;
        if self.frames.is_none() {
            let len = self.width * self.height * 3;
            let mut pinned = Pinned::new(&self.device, len)?;
            pinned.as_mut_slice().fill(f64::NAN);
            self.frames = Some(Frames {
                stream: self.device.new_stream()?,
                snapshot: self.device.alloc::<f64>(len)?,
                pinned,
                copied: Event::new(&self.device)?,
                downloaded: Event::new(&self.device)?,
                ended: 0,
            });
        }
        let f = self.frames.as_mut().expect("allocated above");
        if f.ended > 0 {
            // The previous frame's download reads the snapshot: the copy
            // below waits for it.
            self.stream.wait_event(&f.downloaded)?;
        }
        self.stream
            .copy_dtod_async(&self.image.as_slice(), &mut f.snapshot.as_slice_mut())?;
        f.copied.record(&self.stream)?;
        self.stream.fill(&mut self.image.as_slice_mut(), 0.0f64)?;
        f.stream.wait_event(&f.copied)?;
        // SAFETY: the pinned frame is the sink's and the host reads it only
        // in `ended_frame`, after waiting for `downloaded` (recorded right
        // after this copy, or the stream is synchronized below when that
        // fails); a later download into it is queued only by a later
        // `end_frame`, which `ended_frame`'s borrow of the sink keeps from
        // overlapping a read; the sink's drop waits for this stream.
        unsafe {
            f.stream
                .copy_dtoh_async(&f.snapshot.as_slice(), f.pinned.as_mut_slice())?;
        }
        if let Err(e) = f.downloaded.record(&f.stream) {
            // `downloaded` would still be the previous frame's: wait here,
            // so that no later read can overlap this copy.
            let _ = f.stream.synchronize();
            return Err(e);
        }
        f.ended += 1;
        Ok(())
    }

    /// The last frame [`DeviceSink::end_frame`] ended, height × width × 3
    /// row-major, after waiting for its download; an error if no frame was
    /// ended yet.
    pub fn ended_frame(&mut self) -> Result<&[f64]> {
        let _scope = self.device.enter()?;
        let f = match self.frames.as_ref() {
            Some(f) if f.ended > 0 => f,
            _ => {
                return Err(Error::InvalidInput(
                    "ended_frame: no frame was ended yet (call end_frame first)".into(),
                ))
            }
        };
        f.downloaded.synchronize()?;
        Ok(f.pinned.as_slice())
    }

    /// How many frames [`DeviceSink::end_frame`] ended.
    pub fn frames_ended(&self) -> u64 {
        self.frames.as_ref().map_or(0, |f| f.ended)
    }
}
