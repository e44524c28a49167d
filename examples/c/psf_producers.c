/*
 * A C/OpenMP renderer's side of the PSF sink: every OpenMP thread traces
 * its share of a star field and pushes the star events it emits through
 * its own producer (hipkern_psf_producer_*, hip/include/hipkern.h "PSF
 * producers") into one hub, which splats them on the device; then the
 * hub is finished and the image written as a float64 .npy (height x width
 * x 3). No Rust, no HIP or CUDA headers.
 *
 * The "renderer" draws work items (strips of sky) with OpenMP's dynamic
 * schedule; item k's stars come from a generator seeded by k, so the
 * events do not depend on the threads. Stamps are made-up Gaussians (as in
 * hipkern_example.c). Checks, against a float64 loop here that follows
 * hipkern.h's rule for hipkern_psf_splat_atomic:
 *   - the image from every thread equals the reference within 1e-12 of
 *     its peak (the float64 atomics sum in varying order);
 *   - a bad event (negative flux) pushed by one thread is refused naming
 *     its number among that producer's events, and nothing of it arrives;
 *   - an event far too large for the stamps is refused by push, the whole
 *     push with it, naming the event; one that only the device finds too
 *     large (47.6 px at phase 0) is left out, the producer's next call
 *     names it, and the rest of its chunk is applied;
 *   - the hub's counts: every good event applied, the one too large refused.
 *
 * Usage: psf_producers [--require-device] [out.npy]
 * Exit status: 0 every check held (or no device and no --require-device),
 * 1 a mismatch, 2 a call failed or no device with --require-device.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipkern.h"

#define WIDTH 512
#define HEIGHT 384
#define PHASES 8
#define SIDE HIPKERN_PSF_STAMP_SIDE
#define RADIUS HIPKERN_PSF_CACHE_RADIUS
#define F HIPKERN_PSF_EVENT_FIELDS
#define ITEMS 96
#define PER_ITEM 700
#define PI 3.14159265358979323846

#define CHECK(call)                                                                   \
  do {                                                                                \
    int32_t st_ = (call);                                                             \
    if (st_ != HIPKERN_SUCCESS) {                                                     \
      fprintf(stderr, "psf_producers: %s failed: %d %s (%s)\n", #call, (int)st_,      \
              hipkern_error_name(st_), hipkern_error_string(st_));                    \
      exit(2);                                                                        \
    }                                                                                 \
  } while (0)

static int g_failed = 0;
static void verdict(const char *what, int ok, const char *detail) {
  printf("  %-52s %s  %s\n", what, detail, ok ? "ok" : "MISMATCH");
  if (!ok) g_failed++;
}

static uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double u01(uint64_t *s) { return (double)(mix(s) >> 11) * 0x1.0p-53; }

static void *xmalloc(size_t bytes) {
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "psf_producers: out of host memory\n");
    exit(2);
  }
  return p;
}

/* Work item k: a strip of sky, PER_ITEM stars seeded by k. */
static void trace_item(int k, double *events) {
  uint64_t s = 1000003ull * (uint64_t)(k + 1);
  for (int i = 0; i < PER_ITEM; i++) {
    double *e = events + (size_t)i * F;
    e[0] = -8.0 + (WIDTH + 16.0) * u01(&s);
    e[1] = -8.0 + (HEIGHT + 16.0) / ITEMS * (k + u01(&s)); /* the item's strip */
    e[2] = pow(10.0, 3.0 * u01(&s));
    e[3] = 0.2 + 0.8 * u01(&s);
    e[4] = 0.2 + 0.8 * u01(&s);
    e[5] = 0.2 + 0.8 * u01(&s);
    e[6] = 6.0 + 10.0 * u01(&s);
  }
}

static size_t stamp_at(int i, int j, int dx, int dy) {
  return (((size_t)j * (PHASES + 1) + (size_t)i) * SIDE + (size_t)(dy + RADIUS)) * SIDE +
         (size_t)(dx + RADIUS);
}

/* hipkern.h's rule for one event (the float64 reference, no contraction). */
static void splat_reference(const double *ev, const double *stamps, double *image) {
  double x = ev[0], y = ev[1], s = ev[6];
  double ax = floor(x), ay = floor(y), fx = x - ax, fy = y - ay;
  double gx = fx * PHASES, gy = fy * PHASES;
  int i0 = (int)floor(gx), j0 = (int)floor(gy);
  if (i0 > PHASES - 1) i0 = PHASES - 1;
  if (j0 > PHASES - 1) j0 = PHASES - 1;
  double tx = gx - i0, ty = gy - j0;
  double w00 = (1 - tx) * (1 - ty), w10 = tx * (1 - ty), w01 = (1 - tx) * ty, w11 = tx * ty;
  double col[3] = {ev[2] * ev[3], ev[2] * ev[4], ev[2] * ev[5]};
  for (int oy = -RADIUS; oy <= RADIUS; oy++) {
    double dy = (oy + 0.5) - fy, h2 = s * s - dy * dy;
    if (h2 < 0) continue;
    double w = sqrt(h2);
    int lo = (int)ceil((fx - 0.5) - w), hi = (int)floor((fx - 0.5) + w);
    for (int ox = lo; ox <= hi; ox++) {
      long px = (long)ax + ox, py = (long)ay + oy;
      if (px < 0 || py < 0 || px >= WIDTH || py >= HEIGHT) continue;
      double v = ((w00 * stamps[stamp_at(i0, j0, ox, oy)] + w10 * stamps[stamp_at(i0 + 1, j0, ox, oy)]) +
                  w01 * stamps[stamp_at(i0, j0 + 1, ox, oy)]) +
                 w11 * stamps[stamp_at(i0 + 1, j0 + 1, ox, oy)];
      for (int c = 0; c < 3; c++) image[((size_t)py * WIDTH + (size_t)px) * 3 + c] += v * col[c];
    }
  }
}

static int write_npy(const char *path, const double *image) {
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  char header[128];
  int n = snprintf(header, sizeof header,
                   "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d, 3), }", HEIGHT,
                   WIDTH);
  int total = 10 + n + 1, pad = (64 - total % 64) % 64;
  unsigned short hlen = (unsigned short)(n + pad + 1);
  int ok = fwrite("\x93NUMPY\x01\x00", 1, 8, f) == 8 && fwrite(&hlen, 2, 1, f) == 1 &&
           fwrite(header, 1, (size_t)n, f) == (size_t)n;
  for (int k = 0; ok && k < pad; k++) ok = fputc(' ', f) != EOF;
  ok = ok && fputc('\n', f) != EOF;
  ok = ok && fwrite(image, sizeof(double), (size_t)WIDTH * HEIGHT * 3, f) == (size_t)WIDTH * HEIGHT * 3;
  return fclose(f) == 0 && ok;
}

int main(int argc, char **argv) {
  int require_device = 0;
  const char *out = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--require-device") == 0) require_device = 1;
    else if (!out && argv[i][0] != '-') out = argv[i];
    else {
      fprintf(stderr, "usage: %s [--require-device] [out.npy]\n", argv[0]);
      return 2;
    }
  }
  printf("hipkern C ABI v%d, platform %s, %d OpenMP threads\n", (int)hipkern_abi_version(),
         hipkern_platform(), omp_get_max_threads());
  int32_t count = 0, st = hipkern_device_count(&count);
  if (st != HIPKERN_SUCCESS || count == 0) {
    printf("no device (%s: %s): nothing checked\n", st ? hipkern_error_name(st) : "count 0",
           st ? hipkern_error_string(st) : "no devices");
    return require_device ? 2 : 0;
  }
  CHECK(hipkern_set_device(0));
  void *stream = NULL;
  CHECK(hipkern_stream_create(&stream));

  /* Made-up stamps: a Gaussian of sigma 1.5 px at each phase. */
  size_t n_stamp = (size_t)(PHASES + 1) * (PHASES + 1) * SIDE * SIDE;
  double *stamps = xmalloc(sizeof(double) * n_stamp);
  for (int j = 0; j <= PHASES; j++)
    for (int i = 0; i <= PHASES; i++)
      for (int dy = -RADIUS; dy <= RADIUS; dy++)
        for (int dx = -RADIUS; dx <= RADIUS; dx++) {
          double ux = dx + 0.5 - (double)i / PHASES, uy = dy + 0.5 - (double)j / PHASES;
          stamps[stamp_at(i, j, dx, dy)] = exp(-(ux * ux + uy * uy) / (2 * 1.5 * 1.5)) / (2 * PI * 2.25);
        }
  size_t image_values = (size_t)WIDTH * HEIGHT * 3;
  void *d_stamps = NULL, *d_image = NULL;
  CHECK(hipkern_malloc(&d_stamps, sizeof(double) * n_stamp));
  CHECK(hipkern_memcpy(d_stamps, stamps, sizeof(double) * n_stamp, HIPKERN_MEMCPY_HOST_TO_DEVICE));
  CHECK(hipkern_malloc(&d_image, sizeof(double) * image_values));
  CHECK(hipkern_memset(d_image, 0, sizeof(double) * image_values));

  /* Two buffers a thread: one to fill, one in flight (at least threads + 1). */
  int buffers = 2 * omp_get_max_threads() + 2;
  if (buffers > 1024) buffers = 1024;
  hipkern_psf_hub_config config = {d_stamps, PHASES, d_image, WIDTH, HEIGHT, 2048, buffers, stream};
  hipkern_psf_hub *hub = NULL;
  CHECK(hipkern_psf_hub_create(&config, &hub));

  int bad_named = 0, big_named = 0, huge_named = 0, bad_thread = -1;
  int64_t pushed_total = 0;
#pragma omp parallel reduction(+ : pushed_total)
  {
    hipkern_psf_producer *p = NULL;
    CHECK(hipkern_psf_producer_create(hub, &p));
    double *events = xmalloc(sizeof(double) * PER_ITEM * F);
    int64_t mine = 0;
#pragma omp for schedule(dynamic)
    for (int k = 0; k < ITEMS; k++) {
      trace_item(k, events);
      int64_t bad = -1;
      if (k == 5) {
        /* One bad event in the middle of a push: the whole push is refused. */
        double keep = events[3 * F + 2];
        events[3 * F + 2] = -1.0;
        int32_t s = hipkern_psf_producer_push(p, events, PER_ITEM, &bad);
#pragma omp critical
        {
          bad_named = s == HIPKERN_ERROR_INVALID_ARGUMENT && bad == mine + 3;
          bad_thread = omp_get_thread_num();
        }
        events[3 * F + 2] = keep;
      }
      if (k == 11) {
        /* A support of 80 px cannot fit the 47 px stamps: push refuses it
           whole. One of 47.6 px at phase 0 does not fit either, but only
           the device's check says so (at other phases it would). */
        events[7 * F + 6] = 80.0;
        int32_t s = hipkern_psf_producer_push(p, events, PER_ITEM, &bad);
#pragma omp critical
        huge_named = s == HIPKERN_ERROR_INVALID_ARGUMENT && bad == mine + 7;
        events[7 * F + 0] = floor(events[7 * F + 0]);
        events[7 * F + 1] = floor(events[7 * F + 1]);
        events[7 * F + 6] = 47.6;
      }
      int32_t s = hipkern_psf_producer_push(p, events, PER_ITEM, &bad);
      CHECK(s);
      mine += PER_ITEM;
      if (k == 11) {
        s = hipkern_psf_producer_flush(p, &bad);
#pragma omp critical
        big_named = s == HIPKERN_ERROR_INVALID_ARGUMENT && bad == mine - PER_ITEM + 7;
      }
    }
    CHECK(hipkern_psf_producer_destroy(p));
    free(events);
    pushed_total += mine;
  }
  hipkern_psf_hub_stats stats;
  CHECK(hipkern_psf_hub_finish(hub, &stats));
  CHECK(hipkern_psf_hub_destroy(hub));

  double *got = xmalloc(sizeof(double) * image_values);
  double *want = xmalloc(sizeof(double) * image_values);
  CHECK(hipkern_memcpy(got, d_image, sizeof(double) * image_values, HIPKERN_MEMCPY_DEVICE_TO_HOST));
  double *events = xmalloc(sizeof(double) * PER_ITEM * F);
  for (int k = 0; k < ITEMS; k++) {
    trace_item(k, events);
    for (int i = 0; i < PER_ITEM; i++)
      if (!(k == 11 && i == 7)) splat_reference(events + (size_t)i * F, stamps, want);
  }
  double peak = 0, err = 0;
  for (size_t v = 0; v < image_values; v++) {
    peak = fmax(peak, fabs(want[v]));
    double d = fabs(got[v] - want[v]);
    err = d == d ? fmax(err, d) : INFINITY;
  }
  char detail[160];
  printf("psf producers: %d items x %d stars, %lld events applied in %lld chunks, "
         "%lld buffer waits, worker busy %.3f s, idle %.3f s\n",
         ITEMS, PER_ITEM, (long long)stats.events, (long long)stats.chunks,
         (long long)stats.buffer_waits, stats.sink_busy_s, stats.sink_idle_s);
  snprintf(detail, sizeof detail, "max |got - want| / peak = %.2e", err / peak);
  verdict("image from every thread vs the float64 loop", err <= 1e-12 * peak, detail);
  snprintf(detail, sizeof detail, "(thread %d)", bad_thread);
  verdict("a negative flux refused whole, its event named", bad_named, detail);
  verdict("a support of 80 px refused by push, the event named", huge_named, "");
  verdict("a 47.6 px support at phase 0 named by the producer's flush", big_named, "");
  snprintf(detail, sizeof detail, "%lld applied, %lld refused of %lld", (long long)stats.events,
           (long long)stats.refused_events, (long long)pushed_total);
  verdict("the hub's counts", stats.events == pushed_total - 1 && stats.refused_events == 1,
          detail);
  if (out) {
    if (!write_npy(out, got)) {
      fprintf(stderr, "psf_producers: cannot write %s\n", out);
      return 2;
    }
    printf("wrote %s (%d x %d x 3 float64)\n", out, HEIGHT, WIDTH);
  }
  CHECK(hipkern_free(d_stamps));
  CHECK(hipkern_free(d_image));
  CHECK(hipkern_stream_destroy(stream));
  free(stamps), free(got), free(want), free(events);
  if (g_failed) {
    printf("psf_producers: %d MISMATCH(ES)\n", g_failed);
    return 1;
  }
  printf("psf_producers: OK\n");
  return 0;
}
