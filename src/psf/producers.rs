//! Many producer threads feeding one sink: a renderer's workers trace rays
//! and emit star events, each into its own [`Producer`], and a
//! [`SinkHub`] applies their chunks to one [`CpuSink`] or [`DeviceSink`].
//!
//! - **No lock on the hot path.** [`Producer::push`] checks the event and
//!   appends it to the producer's own chunk buffer; the hub's lock is taken
//!   once per chunk, to hand a full buffer over and take an empty one.
//! - **Bounded memory.** The hub allocates its chunk buffers when it is
//!   made ([`HubLimits`]) and never again: a producer that finds none free
//!   waits for the sink to return one. One thread, the hub's, owns the sink
//!   and applies chunks as they come, so producers never wait for the
//!   device, only for a buffer.
//! - **Errors reach their producer.** A bad event is refused by `push`
//!   itself, naming the producer and the event's number in its stream; it
//!   is never buffered. A chunk the sink refuses (a tile mode's scratch is
//!   too small for it) is split and applied in halves; an error of the
//!   machine is returned by that chunk's producer's next call (and by
//!   [`SinkHub::finish`]), and the hub then refuses every later chunk, so
//!   nothing is applied past it.
//! - **Determinism** ([`ChunkOrder`]): by default chunks are applied as
//!   they arrive, so the image depends on the threads' timing within
//!   rounding (`atomic` mode: as always). With [`ChunkOrder::Sequence`]
//!   each producer names the work item its events belong to
//!   ([`Producer::begin`]: a sequence number, e.g. the index of a tile of
//!   the sky), and items are applied in sequence order, each cut into
//!   chunks of [`HubLimits::chunk_events`] in its push order: the image is
//!   then bitwise the image of one producer pushing the items in order
//!   (the CPU sink and the tile modes; `atomic`, and the chunks
//!   `adaptive` sends to it, sum unordered on the device).
use super::reference::check_routed;
use super::{CpuSink, DeviceSink, StarEvent, CHUNK_EVENTS};
use crate::host_memory::reserve_vec;
use crate::runtime::{Error, Result};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A sink a hub feeds: one chunk at a time, on the hub's thread.
pub trait ChunkSink: Send + 'static {
    /// Accumulates `events` (at most [`CHUNK_EVENTS`], each already
    /// checked as `accumulate_routed` checks them), routing those that do
    /// not fit the cache by the direct path. On an error nothing of the
    /// chunk may have been applied, except after an error of the machine.
    fn accumulate_chunk(&mut self, events: &[StarEvent]) -> Result<()>;
}

impl ChunkSink for CpuSink {
    fn accumulate_chunk(&mut self, events: &[StarEvent]) -> Result<()> {
        self.accumulate_routed(events).map(|_| ())
    }
}

impl ChunkSink for DeviceSink {
    fn accumulate_chunk(&mut self, events: &[StarEvent]) -> Result<()> {
        self.accumulate_routed(events).map(|_| ())
    }
}

/// In which order a hub applies chunks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChunkOrder {
    /// As they arrive: no producer waits for another. The image depends on
    /// the arrival order within rounding.
    #[default]
    Arrival,
    /// By the producers' sequence numbers ([`Producer::begin`]): item `s`
    /// after every item below it, each item's chunks in push order. The
    /// numbers of all producers together must be 0, 1, 2, … each once, and
    /// each producer's must increase; a chunk of a later item waits for the
    /// earlier ones (in its buffer: a producer may then wait for a buffer).
    Sequence,
}

/// A hub's memory, fixed when it is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HubLimits {
    /// Events a producer buffers before it hands the chunk over, 1 ..=
    /// [`CHUNK_EVENTS`]. Default [`CHUNK_EVENTS`]: one full chunk of the
    /// device sink per hand-off, so `adaptive` sees whole chunks and the
    /// hub's lock is taken once per 16,384 events.
    pub chunk_events: usize,
    /// Chunk buffers, at least 2, allocated when the hub is made
    /// (`buffers × chunk_events × 56` bytes): one per producer while it
    /// fills it, the rest queued for the sink; a hub takes at most
    /// `buffers − 1` producers at once. Default 32 (29 MiB at the
    /// default chunk): two per thread of a 16-core renderer, so a producer
    /// waits only when the sink falls behind.
    pub buffers: usize,
}

impl Default for HubLimits {
    fn default() -> Self {
        HubLimits {
            chunk_events: CHUNK_EVENTS,
            buffers: 32,
        }
    }
}

/// Where a hub's time went, and what it did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HubStats {
    /// Chunks applied to the sink (a split chunk counts once).
    pub chunks: u64,
    /// Events applied.
    pub events: u64,
    /// Chunks the sink refused as too large for its scratch, then applied
    /// in halves.
    pub splits: u64,
    /// Chunks not applied: those refused by an error of the machine, and
    /// every one after it.
    pub refused_chunks: u64,
    /// Times a producer found no free buffer, and the time producers spent
    /// waiting for one, summed over producers.
    pub buffer_waits: u64,
    /// See `buffer_waits`.
    pub buffer_wait: Duration,
    /// Time the hub's thread spent in the sink (`accumulate_chunk`).
    pub sink_busy: Duration,
    /// Time the hub's thread waited for a chunk to apply.
    pub sink_idle: Duration,
    /// The most chunks queued for the sink at once.
    pub max_queued: usize,
}

/// Per-producer error box, shared with the hub's thread.
#[derive(Default)]
struct Slot {
    failed: AtomicBool,
    errors: Mutex<VecDeque<Error>>,
    /// Chunks handed over and not yet applied (changed under the hub's
    /// lock; an atomic so that the slot needs no lock of its own for it).
    pending: AtomicU64,
}

struct Chunk {
    events: Vec<StarEvent>,
    slot: Arc<Slot>,
    /// Sequence number and part, `(0, n)` in arrival order.
    key: (u64, u32),
}

struct State {
    free: Vec<Vec<StarEvent>>,
    /// Arrival order: the queue. Sequence order: keyed by (item, part).
    arrived: VecDeque<Chunk>,
    ordered: BTreeMap<(u64, u32), Chunk>,
    /// Sequence order: the next item to apply, and its next part.
    next: (u64, u32),
    /// Items begun and not yet closed, and closed items' part counts.
    open: BTreeSet<u64>,
    closed: BTreeMap<u64, u32>,
    live_producers: usize,
    waiting_producers: usize,
    next_producer: usize,
    /// The hub's thread is applying a chunk.
    applying: bool,
    /// The first error of the machine: every later chunk is refused.
    failed: Option<Error>,
    finishing: bool,
    stopped: bool,
    stats: HubStats,
}

struct Shared {
    state: Mutex<State>,
    /// Producers wait here for a buffer; `finish` for the queue to drain.
    returned: Condvar,
    /// The hub's thread waits here for a chunk.
    arrived: Condvar,
    limits: HubLimits,
    order: ChunkOrder,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock means a thread panicked while holding it, which
        // no path here does; the state is still consistent, so go on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sets up a [`SinkHub`]: [`SinkHub::builder`].
pub struct SinkHubBuilder<S: ChunkSink> {
    sink: S,
    limits: HubLimits,
    order: ChunkOrder,
}

impl<S: ChunkSink> SinkHubBuilder<S> {
    /// The hub's memory (default [`HubLimits::default`]).
    pub fn limits(mut self, limits: HubLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The order chunks are applied in (default [`ChunkOrder::Arrival`]).
    pub fn order(mut self, order: ChunkOrder) -> Self {
        self.order = order;
        self
    }

    /// Allocates the buffers and starts the hub's thread, which owns the
    /// sink until [`SinkHub::finish`].
    pub fn start(self) -> Result<SinkHub<S>> {
        let HubLimits {
            chunk_events,
            buffers,
        } = self.limits;
        if !(1..=CHUNK_EVENTS).contains(&chunk_events) {
            return Err(Error::InvalidInput(format!(
                "chunk_events = {chunk_events}: must be in 1..={CHUNK_EVENTS}"
            )));
        }
        if !(2..=1 << 20).contains(&buffers) {
            return Err(Error::InvalidInput(format!(
                "buffers = {buffers}: must be in 2..=2^20 (one a producer fills, one the sink applies)"
            )));
        }
        let mut free = Vec::new();
        free.try_reserve_exact(buffers)
            .map_err(|_| Error::HostMemory {
                what: format!("the hub's {buffers} buffer handles"),
                needed_bytes: (buffers * std::mem::size_of::<Vec<StarEvent>>()) as u64,
                available_bytes: None,
            })?;
        for k in 0..buffers {
            free.push(reserve_vec(chunk_events, &|| {
                format!("chunk buffer {k} of {buffers} ({chunk_events} events)")
            })?);
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                free,
                arrived: VecDeque::new(),
                ordered: BTreeMap::new(),
                next: (0, 0),
                open: BTreeSet::new(),
                closed: BTreeMap::new(),
                live_producers: 0,
                waiting_producers: 0,
                next_producer: 0,
                applying: false,
                failed: None,
                finishing: false,
                stopped: false,
                stats: HubStats::default(),
            }),
            returned: Condvar::new(),
            arrived: Condvar::new(),
            limits: self.limits,
            order: self.order,
        });
        let for_thread = shared.clone();
        let sink = self.sink;
        let consumer = std::thread::Builder::new()
            .name("hipkern-psf-hub".into())
            .spawn(move || consume(&for_thread, sink))
            .map_err(|e| Error::Io {
                action: "cannot start the hub's thread".into(),
                message: e.to_string(),
            })?;
        Ok(SinkHub {
            shared,
            consumer: Some(consumer),
            sink: None,
        })
    }
}

/// One sink fed by many [`Producer`]s (see the module docs).
pub struct SinkHub<S: ChunkSink> {
    shared: Arc<Shared>,
    consumer: Option<JoinHandle<S>>,
    /// The sink, back from the hub's thread after [`SinkHub::finish`].
    sink: Option<S>,
}

impl<S: ChunkSink> std::fmt::Debug for SinkHub<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkHub")
            .field("limits", &self.shared.limits)
            .field("order", &self.shared.order)
            .field("finished", &self.sink.is_some())
            .finish()
    }
}

impl<S: ChunkSink> SinkHub<S> {
    /// A hub over `sink` with the default limits, chunks in arrival order.
    pub fn new(sink: S) -> Result<SinkHub<S>> {
        Self::builder(sink).start()
    }

    /// A builder over `sink`.
    pub fn builder(sink: S) -> SinkHubBuilder<S> {
        SinkHubBuilder {
            sink,
            limits: HubLimits::default(),
            order: ChunkOrder::default(),
        }
    }

    /// The hub's limits.
    pub fn limits(&self) -> HubLimits {
        self.shared.limits
    }

    /// The hub's chunk order.
    pub fn order(&self) -> ChunkOrder {
        self.shared.order
    }

    /// A new producer (`Send`: move it to its thread). Producers are
    /// numbered from 0 in the order they are made; errors name them.
    pub fn producer(&self) -> Result<Producer> {
        let mut st = self.shared.lock();
        if st.finishing || st.stopped {
            return Err(Error::InvalidInput(
                "the hub is finished: it makes no more producers".into(),
            ));
        }
        // Each producer may hold one buffer while it is idle; one more must
        // stay for the others, or they could all wait on idle holders.
        if st.live_producers + 1 >= self.shared.limits.buffers {
            return Err(Error::InvalidInput(format!(
                "a hub of {} buffers takes at most {} producers at once",
                self.shared.limits.buffers,
                self.shared.limits.buffers - 1
            )));
        }
        st.live_producers += 1;
        let id = st.next_producer;
        st.next_producer += 1;
        drop(st);
        Ok(Producer {
            shared: self.shared.clone(),
            slot: Arc::new(Slot::default()),
            id,
            buffer: None,
            item: None,
            last_item: None,
            pushed: 0,
            wait: Duration::ZERO,
        })
    }

    /// What the hub has done so far.
    pub fn stats(&self) -> HubStats {
        self.shared.lock().stats
    }

    /// Applies every chunk handed over and takes the sink back from the
    /// hub's thread. Refused, changing nothing, while a producer is alive
    /// (finish or drop every producer first), and in sequence order while
    /// a number is missing (the error names it: a producer may still
    /// `begin` it and `flush`). Returns the first error of the machine,
    /// if any chunk met one (the sink is back either way).
    pub fn finish(&mut self) -> Result<HubStats> {
        if self.sink.is_some() {
            let st = self.shared.lock();
            return match &st.failed {
                Some(e) => Err(e.clone()),
                None => Ok(st.stats),
            };
        }
        let shared = &self.shared;
        let mut st = shared.lock();
        if st.live_producers > 0 {
            return Err(Error::InvalidInput(format!(
                "{} producer(s) are still alive: finish or drop every producer before the hub",
                st.live_producers
            )));
        }
        // Wait until the queue is empty, or the hub's thread is stuck on a
        // missing sequence number (idle with chunks queued).
        loop {
            let queued = st.arrived.len() + st.ordered.len();
            if queued == 0 && !st.applying {
                break;
            }
            if !st.applying && !peek_ready(&st, shared.order) {
                if st.failed.is_some() {
                    // Nothing more can be applied anyway: take the sink back.
                    break;
                }
                let (item, _) = st.next;
                let (first, _) = *st.ordered.keys().next().unwrap_or(&(item, 0));
                return Err(Error::InvalidInput(format!(
                    "sequence number {item} never came: {queued} chunk(s) of items {first} and \
                     later wait for it (a producer may still begin({item}) and flush)"
                )));
            }
            st = shared.returned.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.finishing = true;
        st.stopped = true;
        shared.arrived.notify_all();
        let failed = st.failed.clone();
        drop(st);
        let sink = match self.consumer.take().map(JoinHandle::join) {
            Some(Ok(sink)) => sink,
            _ => {
                return Err(Error::InvalidInput(
                    "the hub's thread ended abnormally; the sink is lost".into(),
                ))
            }
        };
        self.sink = Some(sink);
        match failed {
            Some(e) => Err(e),
            None => Ok(self.stats()),
        }
    }

    /// The sink, once [`SinkHub::finish`] has taken it back (else the hub,
    /// unchanged).
    pub fn into_sink(mut self) -> std::result::Result<S, SinkHub<S>> {
        match self.sink.take() {
            Some(sink) => Ok(sink),
            None => Err(self),
        }
    }
}

impl<S: ChunkSink> Drop for SinkHub<S> {
    fn drop(&mut self) {
        // Dropped unfinished: stop the thread (queued chunks are dropped
        // with the sink) and let waiting producers fail.
        let mut st = self.shared.lock();
        st.stopped = true;
        st.arrived.clear();
        st.ordered.clear();
        drop(st);
        self.shared.arrived.notify_all();
        self.shared.returned.notify_all();
        if let Some(h) = self.consumer.take() {
            let _ = h.join();
        }
    }
}

/// Whether a chunk is ready to apply (what [`ready`] would return).
fn peek_ready(st: &State, order: ChunkOrder) -> bool {
    match order {
        ChunkOrder::Arrival => !st.arrived.is_empty(),
        ChunkOrder::Sequence => {
            let (mut item, part) = st.next;
            let mut part = part;
            loop {
                if st.ordered.contains_key(&(item, part)) {
                    return true;
                }
                match st.closed.get(&item) {
                    Some(&parts) if parts == part => (item, part) = (item + 1, 0),
                    _ => return false,
                }
            }
        }
    }
}

/// Sequence order: nothing can be applied, the item the sink needs next is
/// open in no producer, and every live producer but the caller waits: the
/// item can never come (a number skipped, or taken out of order). A live
/// producer that is not waiting counts as one that may still begin it: a
/// producer kept alive but idle can hold the others up (drop it).
fn stuck(st: &State, order: ChunkOrder) -> bool {
    order == ChunkOrder::Sequence
        && !st.applying
        && !peek_ready(st, order)
        && !st.open.contains(&st.next.0)
        && st.waiting_producers + 1 >= st.live_producers
}

/// The next chunk to apply, if one is ready (sequence order: advances past
/// closed items).
fn ready(st: &mut State, order: ChunkOrder) -> Option<Chunk> {
    match order {
        ChunkOrder::Arrival => st.arrived.pop_front(),
        ChunkOrder::Sequence => loop {
            if let Some(c) = st.ordered.remove(&st.next) {
                st.next.1 += 1;
                return Some(c);
            }
            let (item, part) = st.next;
            match st.closed.get(&item) {
                Some(&parts) if parts == part => {
                    st.closed.remove(&item);
                    st.next = (item + 1, 0);
                }
                _ => return None,
            }
        },
    }
}

/// The hub's thread: applies ready chunks until stopped, then gives the
/// sink back.
fn consume<S: ChunkSink>(shared: &Shared, mut sink: S) -> S {
    let mut st = shared.lock();
    loop {
        let idle = Instant::now();
        let chunk = loop {
            if let Some(c) = ready(&mut st, shared.order) {
                break Some(c);
            }
            if st.stopped {
                break None;
            }
            // finish() waits for the queue or for this thread to be stuck.
            shared.returned.notify_all();
            st = shared.arrived.wait(st).unwrap_or_else(|p| p.into_inner());
        };
        st.stats.sink_idle += idle.elapsed();
        let Some(mut chunk) = chunk else {
            return sink;
        };
        st.applying = true;
        let failed = st.failed.clone();
        drop(st);
        let busy = Instant::now();
        let (result, splits) = match failed {
            Some(e) => (Err(e), 0),
            None => apply(&mut sink, &chunk.events),
        };
        let busy = busy.elapsed();
        st = shared.lock();
        st.applying = false;
        st.stats.sink_busy += busy;
        st.stats.splits += splits;
        match result {
            Ok(()) => {
                st.stats.chunks += 1;
                st.stats.events += chunk.events.len() as u64;
            }
            Err(e) => {
                st.stats.refused_chunks += 1;
                // A scratch refusal of a single event concerns that event
                // alone; anything else is the machine's, and ends the hub.
                let fatal = !matches!(e, Error::ScratchExceeded { .. });
                if fatal && st.failed.is_none() {
                    st.failed = Some(e.clone());
                }
                // Its producer's next call returns it (and finish, from
                // `failed`, if the producer is gone).
                lock(&chunk.slot.errors).push_back(e);
                chunk.slot.failed.store(true, Ordering::Release);
            }
        }
        chunk.slot.pending.fetch_sub(1, Ordering::AcqRel);
        chunk.events.clear();
        st.free.push(std::mem::take(&mut chunk.events));
        shared.returned.notify_all();
    }
}

/// Applies a chunk, in halves while the sink refuses it for scratch.
fn apply<S: ChunkSink>(sink: &mut S, events: &[StarEvent]) -> (Result<()>, u64) {
    // A sink that panics must not take the hub's thread (and every waiting
    // producer) with it: the panic becomes the hub's error.
    let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        sink.accumulate_chunk(events)
    }))
    .unwrap_or_else(|_| {
        Err(Error::InvalidInput(
            "the sink panicked while applying a chunk; the hub applies no more".into(),
        ))
    });
    match applied {
        Err(Error::ScratchExceeded {
            accumulated_events, ..
        }) if events.len() > 1 => {
            // What went in stays; the rest goes again, split in two.
            let rest = &events[accumulated_events.min(events.len())..];
            let (a, b) = rest.split_at(rest.len() / 2);
            let (ra, sa) = apply(sink, a);
            if ra.is_err() {
                return (ra, 1 + sa);
            }
            let (rb, sb) = apply(sink, b);
            (rb, 1 + sa + sb)
        }
        r => (r, 0),
    }
}

/// What one producer did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProducerStats {
    /// Events pushed (accepted).
    pub events: u64,
    /// Time spent waiting for a free buffer.
    pub buffer_wait: Duration,
}

/// One thread's way into a [`SinkHub`]: buffers events locally and hands
/// full chunks over. Dropping it hands over what it holds; errors that
/// arrive after that go to [`SinkHub::finish`].
pub struct Producer {
    shared: Arc<Shared>,
    slot: Arc<Slot>,
    id: usize,
    buffer: Option<Vec<StarEvent>>,
    /// Sequence order: the open item and the number of its next part.
    item: Option<(u64, u32)>,
    last_item: Option<u64>,
    pushed: u64,
    wait: Duration,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("id", &self.id)
            .field("pushed", &self.pushed)
            .field("item", &self.item)
            .finish()
    }
}

impl Producer {
    /// The producer's number (0, 1, … in the order the hub made them).
    pub fn id(&self) -> usize {
        self.id
    }

    /// Adds one event. A bad event (a field not finite, flux or colour
    /// negative, support not positive or beyond the direct path's limit) is
    /// refused, naming this producer and the event's number among those it
    /// was given, and not buffered. Also returns an error of the machine
    /// that one of this producer's chunks met.
    pub fn push(&mut self, event: StarEvent) -> Result<()> {
        self.check_async_errors()?;
        self.check(&event, self.pushed as usize)?;
        self.push_checked(event)
    }

    /// Adds `events` in order, all or none as far as the events go: each is
    /// checked first, and the first bad one is the error. (An error of the
    /// machine, or the hub's end, met while waiting for a buffer mid-call
    /// leaves the events before it taken.)
    pub fn extend(&mut self, events: &[StarEvent]) -> Result<()> {
        self.check_async_errors()?;
        for (k, e) in events.iter().enumerate() {
            self.check(e, self.pushed as usize + k)?;
        }
        for e in events {
            self.push_checked(*e)?;
        }
        Ok(())
    }

    /// Sequence order only: closes the item being filled (hands over its
    /// last chunk) and starts item `seq`, which must be above this
    /// producer's previous one and not yet applied.
    pub fn begin(&mut self, seq: u64) -> Result<()> {
        if self.shared.order != ChunkOrder::Sequence {
            return Err(Error::InvalidInput(
                "begin(seq) is for a hub in sequence order; this one applies chunks as they arrive"
                    .into(),
            ));
        }
        if let Some(last) = self.last_item {
            if seq <= last {
                return Err(Error::InvalidInput(format!(
                    "producer {}: item {seq} after item {last}: a producer's items must increase",
                    self.id
                )));
            }
        }
        self.close_item()?;
        let mut st = self.shared.lock();
        if seq < st.next.0 || st.open.contains(&seq) || st.closed.contains_key(&seq) {
            return Err(Error::InvalidInput(format!(
                "producer {}: item {seq} was already begun by another producer",
                self.id
            )));
        }
        st.open.insert(seq);
        drop(st);
        self.item = Some((seq, 0));
        self.last_item = Some(seq);
        Ok(())
    }

    /// Hands over the chunk being filled (sequence order: closes the item),
    /// then returns any error of the machine this producer's chunks met.
    pub fn flush(&mut self) -> Result<()> {
        match self.shared.order {
            ChunkOrder::Arrival => self.hand_over()?,
            ChunkOrder::Sequence => self.close_item()?,
        }
        self.check_async_errors()
    }

    /// Flushes, waits until the sink has applied (or refused) every chunk
    /// of this producer, and says what it did; an error of the machine that
    /// any of its chunks met is the error. In sequence order its chunks may
    /// wait for other producers' earlier items; if no producer has begun
    /// the item they wait for while every other one waits too, that is the
    /// error.
    pub fn finish(mut self) -> Result<ProducerStats> {
        self.flush()?;
        let shared = &*self.shared;
        let mut st = shared.lock();
        // After a failure the hub's thread still refuses (and counts) every
        // queued chunk, so this wait ends; only a dropped hub leaves chunks.
        while self.slot.pending.load(Ordering::Acquire) > 0 && !st.stopped {
            if stuck(&st, shared.order) {
                return Err(Error::InvalidInput(format!(
                    "producer {}: its chunks wait for item {}, which no producer has begun",
                    self.id, st.next.0
                )));
            }
            st.waiting_producers += 1;
            shared.returned.notify_all();
            st = shared.returned.wait(st).unwrap_or_else(|p| p.into_inner());
            st.waiting_producers -= 1;
        }
        let unapplied = self.slot.pending.load(Ordering::Acquire) > 0;
        drop(st);
        self.check_async_errors()?;
        if unapplied {
            return Err(Error::InvalidInput(format!(
                "producer {}: the hub was dropped before its chunks were applied",
                self.id
            )));
        }
        Ok(ProducerStats {
            events: self.pushed,
            buffer_wait: self.wait,
        })
    }

    fn check(&self, e: &StarEvent, index: usize) -> Result<()> {
        if self.shared.order == ChunkOrder::Sequence && self.item.is_none() {
            return Err(Error::InvalidInput(format!(
                "producer {}: events before begin(seq) in a hub in sequence order",
                self.id
            )));
        }
        check_routed(e, index)
            .map_err(|err| Error::InvalidInput(format!("producer {}: {}", self.id, inner(err))))
    }

    fn check_async_errors(&self) -> Result<()> {
        if self.slot.failed.load(Ordering::Acquire) {
            let mut errors = lock(&self.slot.errors);
            if let Some(e) = errors.pop_front() {
                if errors.is_empty() {
                    self.slot.failed.store(false, Ordering::Release);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    fn push_checked(&mut self, event: StarEvent) -> Result<()> {
        let mut buffer = match self.buffer.take() {
            Some(b) => b,
            None => self.take_buffer()?,
        };
        buffer.push(event);
        self.pushed += 1;
        let full = buffer.len() == self.shared.limits.chunk_events;
        self.buffer = Some(buffer);
        if full {
            self.hand_over()?;
        }
        Ok(())
    }

    /// Waits for a free buffer (sequence order: one is kept for the item
    /// the sink needs next, so its producer always gets one).
    fn take_buffer(&mut self) -> Result<Vec<StarEvent>> {
        let shared = &*self.shared;
        let mut st = shared.lock();
        let mut waited: Option<Instant> = None;
        let item = self.item.map(|(s, _)| s);
        let result = loop {
            if st.stopped {
                break Err(Error::InvalidInput(
                    "the hub was finished or dropped: it takes no more events".into(),
                ));
            }
            if let Some(e) = &st.failed {
                break Err(e.clone());
            }
            let reserve = match (shared.order, item) {
                (ChunkOrder::Sequence, Some(s)) if s != st.next.0 => 1,
                _ => 0,
            };
            if st.free.len() > reserve {
                if let Some(b) = st.free.pop() {
                    break Ok(b);
                }
            }
            if stuck(&st, shared.order) {
                break Err(Error::InvalidInput(format!(
                    "producer {}: item {} is begun by no producer while every producer waits \
                     for a buffer: a sequence number was skipped or taken out of order",
                    self.id, st.next.0
                )));
            }
            if waited.is_none() {
                waited = Some(Instant::now());
                st.stats.buffer_waits += 1;
            }
            st.waiting_producers += 1;
            // Wake the others: one of them may be the last to wait.
            shared.returned.notify_all();
            st = shared.returned.wait(st).unwrap_or_else(|p| p.into_inner());
            st.waiting_producers -= 1;
        };
        if let Some(t) = waited {
            let w = t.elapsed();
            st.stats.buffer_wait += w;
            self.wait += w;
        }
        result
    }

    /// Hands the buffer (if it holds events) to the sink.
    fn hand_over(&mut self) -> Result<()> {
        let Some(buffer) = self.buffer.take() else {
            return Ok(());
        };
        let shared = &*self.shared;
        let mut st = shared.lock();
        if buffer.is_empty() || st.stopped {
            st.free.push(buffer);
            shared.returned.notify_all();
            return if st.stopped {
                Err(Error::InvalidInput(
                    "the hub was finished or dropped: it takes no more events".into(),
                ))
            } else {
                Ok(())
            };
        }
        let key = match self.item.as_mut() {
            Some((seq, part)) => {
                *part += 1;
                (*seq, *part - 1)
            }
            None => (0, 0),
        };
        self.slot.pending.fetch_add(1, Ordering::AcqRel);
        let chunk = Chunk {
            events: buffer,
            slot: self.slot.clone(),
            key,
        };
        match shared.order {
            ChunkOrder::Arrival => st.arrived.push_back(chunk),
            ChunkOrder::Sequence => {
                st.ordered.insert(chunk.key, chunk);
            }
        }
        let queued = st.arrived.len() + st.ordered.len();
        st.stats.max_queued = st.stats.max_queued.max(queued);
        shared.arrived.notify_one();
        Ok(())
    }

    /// Sequence order: hands over the item's last chunk and marks it
    /// closed with its part count.
    fn close_item(&mut self) -> Result<()> {
        self.hand_over()?;
        if let Some((seq, parts)) = self.item.take() {
            let mut st = self.shared.lock();
            st.open.remove(&seq);
            st.closed.insert(seq, parts);
            self.shared.arrived.notify_one();
        }
        Ok(())
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        // What it holds goes to the sink; an error here can only be the
        // hub's own end or failure, which SinkHub::finish reports.
        let _ = match self.shared.order {
            ChunkOrder::Arrival => self.hand_over(),
            ChunkOrder::Sequence => self.close_item(),
        };
        let mut st = self.shared.lock();
        st.live_producers -= 1;
        self.shared.returned.notify_all();
    }
}

/// The message of an `InvalidInput`, else the error's display.
fn inner(e: Error) -> String {
    match e {
        Error::InvalidInput(m) => m,
        e => e.to_string(),
    }
}
