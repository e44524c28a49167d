// Many producer threads feeding the PSF sink's atomic mode: the C ABI's
// hipkern_psf_hub and hipkern_psf_producer (hipkern.h, "PSF producers";
// docs/design/psf.md#producers). Host code only, over the C ABI's own
// entry points (hipkern_psf_splat_atomic and the runtime's copies).
//
// Each producer fills a chunk buffer of its own with no lock; a full one
// goes into the hub's queue (the hub's mutex, once per chunk) and the
// producer takes an empty one, waiting when none is free. Every buffer is
// page-locked host memory allocated when the hub is made, so nothing is
// allocated afterwards and uploads are truly asynchronous. One worker
// thread applies chunks in arrival order: upload, splat, read the
// device's verdict word, synchronize the stream. The verdict names the
// first event the device refused (its support does not fit the stamps);
// the chunk then added nothing, so the worker reports that event to its
// producer, removes it, and applies the rest again: nothing else is lost.
#include "hipkern.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <thread>

namespace {

constexpr int64_t kFields = HIPKERN_PSF_EVENT_FIELDS;
constexpr uint64_t kNoBadEvent = ~0ull;

struct Chunk {
  double *events;
  int64_t n;
  hipkern_psf_producer *owner;
  int64_t first;  // the owner's number of the chunk's first event
};

// One refusal waiting for its producer: a status and the producer's event
// number (-1: not one event's).
struct Refusal {
  int32_t status;
  int64_t event;
};

bool event_ok(const double *e) {
  for (int64_t f = 0; f < kFields; ++f)
    if (!std::isfinite(e[f])) return false;
  // A support of 48 px or more reaches offsets beyond the stamps' ±47 at
  // every phase; between 47 and 48 the phase decides, and the device's own
  // check does (each such refusal costs a pass over its chunk).
  return e[2] >= 0 && e[3] >= 0 && e[4] >= 0 && e[5] >= 0 && e[6] > 0 &&
         e[6] < HIPKERN_PSF_CACHE_RADIUS + 1.0;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

struct hipkern_psf_producer {
  hipkern_psf_hub *hub;
  double *buffer = nullptr;
  int64_t fill = 0;
  int64_t pushed = 0;
  // Refusals of this producer's chunks, from the worker (under `mutex`);
  // `failed` lets push see them without taking the lock.
  std::mutex mutex;
  std::deque<Refusal> refusals;
  int32_t lost = HIPKERN_SUCCESS;  // a refusal that could not be recorded
  std::atomic<bool> failed{false};
  int64_t pending = 0;  // chunks handed over, not yet applied (hub's mutex)
};

struct hipkern_psf_hub {
  hipkern_psf_hub_config config{};
  std::mutex mutex;
  std::condition_variable returned;  // a buffer came back, or a chunk was applied
  std::condition_variable arrived;   // a chunk was queued, or stop
  double **free = nullptr;           // free buffers (a stack of `n_free`)
  int32_t n_free = 0;
  double **all = nullptr;  // every buffer, for destroy
  // Chunks handed over, a ring of `buffers` slots (at most that many
  // chunks exist), so handing over never allocates.
  Chunk *ring = nullptr;
  int32_t head = 0, queued = 0;
  int32_t device = 0;  // the caller's device at create: the worker's
  int32_t live = 0;
  bool stop = false;
  bool applying = false;
  int32_t failed = HIPKERN_SUCCESS;  // the first error of the machine
  double *d_events = nullptr;
  uint64_t *d_report = nullptr;
  uint64_t *h_report = nullptr;
  hipkern_psf_hub_stats stats{};
  std::thread worker;
};

namespace {

void refuse(hipkern_psf_producer *p, int32_t status, int64_t event) {
  std::lock_guard<std::mutex> lock(p->mutex);
  try {
    p->refusals.push_back({status, event});
  } catch (...) {
    // No memory for the record: the producer still learns that something
    // was refused.
    if (p->lost == HIPKERN_SUCCESS) p->lost = HIPKERN_ERROR_HOST_MEMORY;
  }
  p->failed.store(true, std::memory_order_release);
}

// One splat of the chunk's first n events, its verdict read back: the
// runtime's status, and in *bad the first refused event (kNoBadEvent).
int32_t splat(hipkern_psf_hub *h, const double *events, int64_t n, uint64_t *bad) {
  const hipkern_psf_hub_config &c = h->config;
  size_t bytes = static_cast<size_t>(n) * kFields * sizeof(double);
  int32_t s = hipkern_memcpy_async(h->d_events, events, bytes, HIPKERN_MEMCPY_HOST_TO_DEVICE,
                                   c.stream);
  if (s == HIPKERN_SUCCESS) s = hipkern_fill_u64(h->d_report, 1, kNoBadEvent, c.stream);
  if (s == HIPKERN_SUCCESS)
    s = hipkern_psf_splat_atomic(h->d_events, n, c.stamps, c.phases, c.image, c.width, c.height,
                                 h->d_report, c.stream);
  if (s == HIPKERN_SUCCESS)
    s = hipkern_memcpy_async(h->h_report, h->d_report, sizeof(uint64_t),
                             HIPKERN_MEMCPY_DEVICE_TO_HOST, c.stream);
  if (s == HIPKERN_SUCCESS) s = hipkern_stream_synchronize(c.stream);
  *bad = *h->h_report;
  return s;
}

// Applies a chunk; a refused event is reported, removed, and the rest
// applied again. Returns the events applied.
int64_t apply(hipkern_psf_hub *h, Chunk &c) {
  int64_t removed = 0;
  while (c.n > 0) {
    uint64_t bad = kNoBadEvent;
    int32_t s = splat(h, c.events, c.n, &bad);
    if (s != HIPKERN_SUCCESS) {
      refuse(c.owner, s, -1);
      std::lock_guard<std::mutex> lock(h->mutex);
      if (h->failed == HIPKERN_SUCCESS) h->failed = s;
      return 0;
    }
    if (bad == kNoBadEvent) return c.n;
    int64_t k = static_cast<int64_t>(bad);
    if (k < 0 || k >= c.n) {  // not a verdict this call can give
      refuse(c.owner, HIPKERN_ERROR_INVALID_ARGUMENT, -1);
      return 0;
    }
    // Events after the first removed one shift down: recover the number
    // the producer gave it. Removals come in increasing position, so every
    // earlier removal was before it.
    refuse(c.owner, HIPKERN_ERROR_INVALID_ARGUMENT, c.first + k + removed);
    std::memmove(c.events + k * kFields, c.events + (k + 1) * kFields,
                 static_cast<size_t>(c.n - k - 1) * kFields * sizeof(double));
    --c.n;
    ++removed;
  }
  return 0;
}

void work(hipkern_psf_hub *h) {
  // The caller's device at create: entry points given a stream act on its
  // device anyway; this covers the NULL stream (the device's default).
  hipkern_set_device(h->device);
  std::unique_lock<std::mutex> lock(h->mutex);
  for (;;) {
    auto idle = std::chrono::steady_clock::now();
    h->arrived.wait(lock, [h] { return h->stop || h->queued > 0; });
    h->stats.sink_idle_s += seconds_since(idle);
    if (h->queued == 0) return;  // stop, and nothing left
    Chunk c = h->ring[h->head];
    h->head = (h->head + 1) % h->config.buffers;
    --h->queued;
    h->applying = true;
    bool failed = h->failed != HIPKERN_SUCCESS;
    int32_t failure = h->failed;
    lock.unlock();
    auto busy = std::chrono::steady_clock::now();
    int64_t n_in = c.n, applied = 0;
    if (failed)
      refuse(c.owner, failure, -1);
    else
      applied = apply(h, c);
    double busy_s = seconds_since(busy);
    lock.lock();
    h->applying = false;
    h->stats.sink_busy_s += busy_s;
    if (applied > 0) ++h->stats.chunks;
    h->stats.events += applied;
    h->stats.refused_events += n_in - applied;
    h->free[h->n_free++] = c.events;
    --c.owner->pending;
    h->returned.notify_all();
  }
}

// Hands the producer's buffer over (if it holds events). Hub's mutex held.
void hand_over(hipkern_psf_hub *h, hipkern_psf_producer *p) {
  if (!p->buffer) return;
  if (p->fill == 0) {
    h->free[h->n_free++] = p->buffer;
  } else {
    h->ring[(h->head + h->queued) % h->config.buffers] = {p->buffer, p->fill, p,
                                                          p->pushed - p->fill};
    ++h->queued;
    ++p->pending;
    if (h->queued > h->stats.max_queued) h->stats.max_queued = h->queued;
    h->arrived.notify_one();
  }
  p->buffer = nullptr;
  p->fill = 0;
  h->returned.notify_all();
}

int32_t take_refusal(hipkern_psf_producer *p, int64_t *bad_event) {
  if (!p->failed.load(std::memory_order_acquire)) return HIPKERN_SUCCESS;
  std::lock_guard<std::mutex> lock(p->mutex);
  if (p->refusals.empty()) {
    int32_t lost = p->lost;
    p->lost = HIPKERN_SUCCESS;
    p->failed.store(false, std::memory_order_release);
    return lost;
  }
  Refusal r = p->refusals.front();
  p->refusals.pop_front();
  if (p->refusals.empty() && p->lost == HIPKERN_SUCCESS)
    p->failed.store(false, std::memory_order_release);
  if (bad_event) *bad_event = r.event;
  return r.status;
}

void release(hipkern_psf_hub *h) {
  if (h->all) {
    for (int32_t k = 0; k < h->config.buffers; ++k)
      if (h->all[k]) hipkern_free_host(h->all[k]);
  }
  delete[] h->all;
  delete[] h->free;
  delete[] h->ring;
  hipkern_free(h->d_events);
  hipkern_free(h->d_report);
  hipkern_free_host(h->h_report);
  delete h;
}

}  // namespace

static int32_t hipkern_psf_hub_create_impl(const hipkern_psf_hub_config *config,
                                          hipkern_psf_hub **hub) {
  if (!config || !hub || !config->stamps || !config->image) return HIPKERN_ERROR_INVALID_ARGUMENT;
  const hipkern_psf_hub_config &c = *config;
  if (c.phases < 1 || c.phases > 1024 || c.width < 1 || c.height < 1 || c.chunk_events < 1 ||
      c.chunk_events > HIPKERN_PSF_MAX_CHUNK_EVENTS || c.buffers < 2 || c.buffers > 1024)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  *hub = nullptr;
  hipkern_psf_hub *h = new (std::nothrow) hipkern_psf_hub;
  if (!h) return HIPKERN_ERROR_HOST_MEMORY;
  h->config = c;
  h->all = new (std::nothrow) double *[c.buffers]();
  h->free = new (std::nothrow) double *[c.buffers]();
  h->ring = new (std::nothrow) Chunk[c.buffers]();
  if (!h->all || !h->free || !h->ring) {
    release(h);
    return HIPKERN_ERROR_HOST_MEMORY;
  }
  size_t bytes = static_cast<size_t>(c.chunk_events) * kFields * sizeof(double);
  int32_t s = hipkern_get_device(&h->device);
  for (int32_t k = 0; k < c.buffers && s == HIPKERN_SUCCESS; ++k) {
    void *b = nullptr;
    s = hipkern_malloc_host(&b, bytes);
    h->all[k] = static_cast<double *>(b);
    h->free[h->n_free++] = h->all[k];
  }
  void *d_events = nullptr, *d_report = nullptr, *h_report = nullptr;
  if (s == HIPKERN_SUCCESS) s = hipkern_malloc(&d_events, bytes);
  h->d_events = static_cast<double *>(d_events);
  if (s == HIPKERN_SUCCESS) s = hipkern_malloc(&d_report, sizeof(uint64_t));
  h->d_report = static_cast<uint64_t *>(d_report);
  if (s == HIPKERN_SUCCESS) s = hipkern_malloc_host(&h_report, sizeof(uint64_t));
  h->h_report = static_cast<uint64_t *>(h_report);
  if (s != HIPKERN_SUCCESS) {
    release(h);
    return s;
  }
  try {
    h->worker = std::thread(work, h);
  } catch (...) {
    release(h);
    return HIPKERN_ERROR_HOST_MEMORY;
  }
  *hub = h;
  return HIPKERN_SUCCESS;
}

static int32_t hipkern_psf_producer_create_impl(hipkern_psf_hub *hub,
                                               hipkern_psf_producer **producer) {
  if (!hub || !producer) return HIPKERN_ERROR_INVALID_ARGUMENT;
  *producer = nullptr;
  std::lock_guard<std::mutex> lock(hub->mutex);
  // Each producer may hold one buffer while idle; one more must stay for
  // the others, or they could all wait on idle holders.
  if (hub->stop || hub->live + 1 >= hub->config.buffers) return HIPKERN_ERROR_INVALID_ARGUMENT;
  hipkern_psf_producer *p = new (std::nothrow) hipkern_psf_producer;
  if (!p) return HIPKERN_ERROR_HOST_MEMORY;
  p->hub = hub;
  ++hub->live;
  *producer = p;
  return HIPKERN_SUCCESS;
}

static int32_t hipkern_psf_producer_push_impl(hipkern_psf_producer *p, const double *events,
                                             int64_t n_events, int64_t *bad_event) {
  if (bad_event) *bad_event = -1;
  if (!p || (n_events > 0 && !events) || n_events < 0) return HIPKERN_ERROR_INVALID_ARGUMENT;
  int32_t earlier = take_refusal(p, bad_event);
  if (earlier != HIPKERN_SUCCESS) return earlier;
  for (int64_t k = 0; k < n_events; ++k) {
    if (!event_ok(events + k * kFields)) {
      if (bad_event) *bad_event = p->pushed + k;
      return HIPKERN_ERROR_INVALID_ARGUMENT;
    }
  }
  hipkern_psf_hub *h = p->hub;
  const int64_t chunk = h->config.chunk_events;
  for (int64_t k = 0; k < n_events;) {
    if (!p->buffer) {
      std::unique_lock<std::mutex> lock(h->mutex);
      if (h->n_free == 0) {
        auto t = std::chrono::steady_clock::now();
        ++h->stats.buffer_waits;
        h->returned.wait(lock, [h] { return h->n_free > 0 || h->failed != HIPKERN_SUCCESS; });
        h->stats.buffer_wait_s += seconds_since(t);
      }
      if (h->n_free == 0) return h->failed;  // the machine failed: no more chunks
      p->buffer = h->free[--h->n_free];
    }
    int64_t take = chunk - p->fill < n_events - k ? chunk - p->fill : n_events - k;
    std::memcpy(p->buffer + p->fill * kFields, events + k * kFields,
                static_cast<size_t>(take) * kFields * sizeof(double));
    p->fill += take;
    p->pushed += take;
    k += take;
    if (p->fill == chunk) {
      std::lock_guard<std::mutex> lock(h->mutex);
      hand_over(h, p);
    }
  }
  return HIPKERN_SUCCESS;
}

static int32_t hipkern_psf_producer_flush_impl(hipkern_psf_producer *p, int64_t *bad_event) {
  if (bad_event) *bad_event = -1;
  if (!p) return HIPKERN_ERROR_INVALID_ARGUMENT;
  hipkern_psf_hub *h = p->hub;
  std::unique_lock<std::mutex> lock(h->mutex);
  hand_over(h, p);
  h->returned.wait(lock, [p] { return p->pending == 0; });
  lock.unlock();
  return take_refusal(p, bad_event);
}

static int32_t hipkern_psf_producer_destroy_impl(hipkern_psf_producer *p) {
  if (!p) return HIPKERN_SUCCESS;
  int32_t s = hipkern_psf_producer_flush(p, nullptr);
  // Refusals nobody read: the first decides the status.
  for (int32_t more = take_refusal(p, nullptr); more != HIPKERN_SUCCESS;
       more = take_refusal(p, nullptr))
    if (s == HIPKERN_SUCCESS) s = more;
  hipkern_psf_hub *h = p->hub;
  {
    std::lock_guard<std::mutex> lock(h->mutex);
    --h->live;
    h->returned.notify_all();
  }
  delete p;
  return s;
}

static int32_t hipkern_psf_hub_finish_impl(hipkern_psf_hub *hub, hipkern_psf_hub_stats *stats) {
  if (!hub) return HIPKERN_ERROR_INVALID_ARGUMENT;
  std::unique_lock<std::mutex> lock(hub->mutex);
  if (hub->live > 0) return HIPKERN_ERROR_INVALID_ARGUMENT;
  hub->returned.wait(lock, [hub] { return hub->queued == 0 && !hub->applying; });
  if (stats) *stats = hub->stats;
  return hub->failed;
}

static int32_t hipkern_psf_hub_destroy_impl(hipkern_psf_hub *hub) {
  if (!hub) return HIPKERN_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(hub->mutex);
    if (hub->live > 0) return HIPKERN_ERROR_INVALID_ARGUMENT;
    hub->stop = true;
    hub->arrived.notify_all();
  }
  hub->worker.join();  // applies what is still queued first
  release(hub);
  return HIPKERN_SUCCESS;
}

// The C entry points: no exception crosses the ABI (an allocation or a
// system error inside becomes HIPKERN_ERROR_HOST_MEMORY).
template <typename F>
static int32_t guarded(F f) {
  try {
    return f();
  } catch (...) {
    return HIPKERN_ERROR_HOST_MEMORY;
  }
}

extern "C" int32_t hipkern_psf_hub_create(const hipkern_psf_hub_config *config,
                                          hipkern_psf_hub **hub) {
  return guarded([&] { return hipkern_psf_hub_create_impl(config, hub); });
}

extern "C" int32_t hipkern_psf_producer_create(hipkern_psf_hub *hub,
                                               hipkern_psf_producer **producer) {
  return guarded([&] { return hipkern_psf_producer_create_impl(hub, producer); });
}

extern "C" int32_t hipkern_psf_producer_push(hipkern_psf_producer *p, const double *events,
                                             int64_t n_events, int64_t *bad_event) {
  return guarded([&] { return hipkern_psf_producer_push_impl(p, events, n_events, bad_event); });
}

extern "C" int32_t hipkern_psf_producer_flush(hipkern_psf_producer *p, int64_t *bad_event) {
  return guarded([&] { return hipkern_psf_producer_flush_impl(p, bad_event); });
}

extern "C" int32_t hipkern_psf_producer_destroy(hipkern_psf_producer *p) {
  return guarded([&] { return hipkern_psf_producer_destroy_impl(p); });
}

extern "C" int32_t hipkern_psf_hub_finish(hipkern_psf_hub *hub, hipkern_psf_hub_stats *stats) {
  return guarded([&] { return hipkern_psf_hub_finish_impl(hub, stats); });
}

extern "C" int32_t hipkern_psf_hub_destroy(hipkern_psf_hub *hub) {
  return guarded([&] { return hipkern_psf_hub_destroy_impl(hub); });
}
