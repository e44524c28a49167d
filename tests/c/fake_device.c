/*
 * A stand-in for the kernel layer's runtime and atomic splat, in host
 * memory, so that the C ABI's host code (hip/psf_producers.hip: the PSF
 * hub's threads, ring, refusals and counts) runs on a machine without a
 * GPU (.ci/c-hub-on-fake-device.sh). "Device" memory is malloc'd host
 * memory, every copy is memcpy, a stream is a token, and
 * hipkern_psf_splat_atomic follows hipkern.h's rule: the first event with
 * a bad field or a support beyond the stamps goes into the report word and
 * nothing is added, else every contribution is added (serially, in event
 * order, under a lock: the hub calls from its worker thread).
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hipkern.h"

#define R HIPKERN_PSF_CACHE_RADIUS
#define SIDE HIPKERN_PSF_STAMP_SIDE
#define F HIPKERN_PSF_EVENT_FIELDS

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_device = 0;
static int g_stream_token;

int32_t hipkern_abi_version(void) { return HIPKERN_ABI_VERSION; }
const char *hipkern_platform(void) { return "fake"; }
const char *hipkern_error_name(int32_t s) { return s == 0 ? "HIPKERN_SUCCESS" : "HIPKERN_ERROR"; }
const char *hipkern_error_string(int32_t s) { return s == 0 ? "no error" : "an error"; }
int32_t hipkern_device_count(int32_t *n) { *n = 1; return HIPKERN_SUCCESS; }
int32_t hipkern_set_device(int32_t d) { g_device = d; return d == 0 ? HIPKERN_SUCCESS : HIPKERN_ERROR_INVALID_ARGUMENT; }
int32_t hipkern_get_device(int32_t *d) { *d = g_device; return HIPKERN_SUCCESS; }
int32_t hipkern_stream_create(void **s) { *s = &g_stream_token; return HIPKERN_SUCCESS; }
int32_t hipkern_stream_destroy(void *s) { (void)s; return HIPKERN_SUCCESS; }
int32_t hipkern_stream_synchronize(void *s) { (void)s; return HIPKERN_SUCCESS; }
int32_t hipkern_malloc(void **p, size_t bytes) {
  *p = bytes ? malloc(bytes) : NULL;
  return bytes && !*p ? HIPKERN_ERROR_HOST_MEMORY : HIPKERN_SUCCESS;
}
int32_t hipkern_free(void *p) { free(p); return HIPKERN_SUCCESS; }
int32_t hipkern_malloc_host(void **p, size_t bytes) { return hipkern_malloc(p, bytes); }
int32_t hipkern_free_host(void *p) { free(p); return HIPKERN_SUCCESS; }
int32_t hipkern_memcpy(void *dst, const void *src, size_t bytes, hipkern_memcpy_kind k) {
  (void)k;
  memcpy(dst, src, bytes);
  return HIPKERN_SUCCESS;
}
int32_t hipkern_memcpy_async(void *dst, const void *src, size_t bytes, hipkern_memcpy_kind k,
                             void *s) {
  (void)s;
  return hipkern_memcpy(dst, src, bytes, k);
}
int32_t hipkern_memset(void *dst, int32_t v, size_t bytes) {
  memset(dst, v, bytes);
  return HIPKERN_SUCCESS;
}
int32_t hipkern_fill_u64(uint64_t *dst, size_t n, uint64_t v, void *s) {
  (void)s;
  for (size_t i = 0; i < n; i++) dst[i] = v;
  return HIPKERN_SUCCESS;
}

/* The support's columns of row oy (hipkern.h's rule); 0 when the row is out. */
static int row_range(double fx, double fy, double s, int oy, int *lo, int *hi) {
  double dy = (oy + 0.5) - fy, h2 = s * s - dy * dy;
  if (h2 < 0) return 0;
  double w = sqrt(h2);
  *lo = (int)ceil((fx - 0.5) - w);
  *hi = (int)floor((fx - 0.5) + w);
  return 1;
}

static int event_bad(const double *e) {
  for (int f = 0; f < F; f++)
    if (!isfinite(e[f])) return 1;
  if (e[2] < 0 || e[3] < 0 || e[4] < 0 || e[5] < 0 || !(e[6] > 0)) return 1;
  double fx = e[0] - floor(e[0]), fy = e[1] - floor(e[1]), s = e[6];
  /* Every support row and column within the stamps' offsets. */
  for (int oy = -(int)ceil(s) - 1; oy <= (int)ceil(s) + 1; oy++) {
    int lo, hi;
    if (!row_range(fx, fy, s, oy, &lo, &hi) || lo > hi) continue;
    if (oy < -R || oy > R || lo < -R || hi > R) return 1;
  }
  return 0;
}

static size_t stamp_at(int phases, int i, int j, int dx, int dy) {
  return (((size_t)j * (phases + 1) + (size_t)i) * SIDE + (size_t)(dy + R)) * SIDE + (size_t)(dx + R);
}

int32_t hipkern_psf_splat_atomic(const double *events, int64_t n, const double *stamps,
                                 int32_t phases, double *image, int32_t width, int32_t height,
                                 uint64_t *report, void *stream) {
  (void)stream;
  if (n < 0 || (n > 0 && (!events || !stamps || !image || !report))) return HIPKERN_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&g_lock);
  for (int64_t k = 0; k < n; k++)
    if (event_bad(events + k * F) && (uint64_t)k < *report) *report = (uint64_t)k;
  if (*report != ~0ull) {
    pthread_mutex_unlock(&g_lock);
    return HIPKERN_SUCCESS; /* a refused call adds nothing */
  }
  for (int64_t k = 0; k < n; k++) {
    const double *e = events + k * F;
    double ax = floor(e[0]), ay = floor(e[1]), fx = e[0] - ax, fy = e[1] - ay;
    double gx = fx * phases, gy = fy * phases;
    int i0 = (int)floor(gx), j0 = (int)floor(gy);
    if (i0 > phases - 1) i0 = phases - 1;
    if (j0 > phases - 1) j0 = phases - 1;
    double tx = gx - i0, ty = gy - j0;
    double w00 = (1 - tx) * (1 - ty), w10 = tx * (1 - ty), w01 = (1 - tx) * ty, w11 = tx * ty;
    double col[3] = {e[2] * e[3], e[2] * e[4], e[2] * e[5]};
    for (int oy = -R; oy <= R; oy++) {
      int lo, hi;
      if (!row_range(fx, fy, e[6], oy, &lo, &hi)) continue;
      for (int ox = lo; ox <= hi; ox++) {
        long px = (long)ax + ox, py = (long)ay + oy;
        if (px < 0 || py < 0 || px >= width || py >= height) continue;
        double v = ((w00 * stamps[stamp_at(phases, i0, j0, ox, oy)] +
                     w10 * stamps[stamp_at(phases, i0 + 1, j0, ox, oy)]) +
                    w01 * stamps[stamp_at(phases, i0, j0 + 1, ox, oy)]) +
                   w11 * stamps[stamp_at(phases, i0 + 1, j0 + 1, ox, oy)];
        for (int c = 0; c < 3; c++) image[((size_t)py * width + (size_t)px) * 3 + c] += v * col[c];
      }
    }
  }
  pthread_mutex_unlock(&g_lock);
  return HIPKERN_SUCCESS;
}
