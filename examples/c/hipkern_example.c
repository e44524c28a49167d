/*
 * A plain C application of hipkern's C ABI (hip/include/hipkern.h), linked
 * against an installed libhipkern (CMake's find_package or pkg-config:
 * examples/c/CMakeLists.txt, scripts/build-c-example.sh). No Rust, no HIP
 * or CUDA headers: device memory, streams and kernels go through
 * hipkern_* entry points only, and every call's status is checked.
 *
 *   1. Force/virial assembly (docs/design/force.md) on a small generated system
 *      (3 frames of 64 atoms, a random neighbour list, the gradients of a
 *      Gaussian pair energy): the CSR plan built on the device
 *      (hipkern_force_plan_build), the atomic-free assembly
 *      (hipkern_force_assemble) with float64 inputs and the half split, and
 *      with float32 inputs and the src split, and the per-frame virial totals
 *      (hipkern_force_frame_virial), each against a float64 loop written
 *      here; then a bad index, which must come back as
 *      HIPKERN_ERROR_INVALID_INDEX naming its position.
 *   2. The PSF sink's atomic mode (docs/design/psf.md, hipkern_psf_splat_atomic)
 *      with a phase cache of made-up Gaussian stamps and a few hundred
 *      events, against a float64 loop following hipkern.h's rule; then an
 *      event too large for the cache, which must be refused with nothing
 *      added.
 *   3. List 1 of the near-field evaluator (docs/design/list1.md,
 *      hipkern_list1_evaluate) in the DENSE layout, 3D, q = 2: a uniform
 *      grid of 4 x 4 x 4 boxes at level 2, each box's List 1 itself and its
 *      neighbours, every pair's interaction case found here from the box
 *      centres, one table of made-up values, bitwise equal to a float64
 *      loop in hipkern.h's order; then a table with an unknown layout,
 *      which must be refused with the output unchanged.
 *
 * Outputs are poisoned (every byte 0xFF: float64 NaN) before each call,
 * except the PSF image, which the sink adds into and so starts at zero.
 * Kernels and memsets run on one stream the program creates; host copies
 * are synchronous and followed by a device synchronization.
 *
 * Usage: hipkern_example [--require-device]
 * Exit status: 0 every check held (or no device and no --require-device),
 * 1 a mismatch, 2 a call failed or no device with --require-device.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipkern.h"

static int g_failed_checks = 0;

/* A call that must succeed: prints the status and exits 2 otherwise. */
#define CHECK(call)                                                                   \
  do {                                                                                \
    int32_t st_ = (call);                                                             \
    if (st_ != HIPKERN_SUCCESS) {                                                     \
      fprintf(stderr, "hipkern_example: %s failed: %d %s (%s)\n", #call, (int)st_,    \
              hipkern_error_name(st_), hipkern_error_string(st_));                    \
      exit(2);                                                                        \
    }                                                                                 \
  } while (0)

/* A verdict: prints it, counts failures. */
static void verdict(const char *what, int ok, const char *detail) {
  printf("  %-44s %s  %s\n", what, detail, ok ? "ok" : "MISMATCH");
  if (!ok) g_failed_checks++;
}

/* splitmix64: a small seeded generator. */
static uint64_t rng_state = 2026;
static uint64_t next_u64(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double uniform01(void) { return (double)(next_u64() >> 11) * 0x1.0p-53; }
static int below(int n) { return (int)(next_u64() % (uint64_t)n); }

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "hipkern_example: out of host memory\n");
    exit(2);
  }
  return p;
}

/* ||a - b||_inf / ||b||_inf; NaN anywhere gives NaN (so a poisoned value fails). */
static double rel_err(const double *a, const double *b, size_t n) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs(a[i] - b[i]);
    if (isnan(e)) return NAN;
    if (e > err) err = e;
    if (fabs(b[i]) > scale) scale = fabs(b[i]);
  }
  return scale > 0.0 ? err / scale : err;
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CHECK(hipkern_malloc(&p, bytes ? bytes : 1));
  return p;
}
static void *dev_upload(const void *host, size_t bytes) {
  void *p = dev_alloc(bytes);
  CHECK(hipkern_memcpy(p, host, bytes, HIPKERN_MEMCPY_HOST_TO_DEVICE));
  /* A copy from pageable memory may still be in flight when hipkern_memcpy
   * returns, and the demo's kernels run on a non-blocking stream. */
  CHECK(hipkern_device_synchronize());
  return p;
}
static void download(void *host, const void *dev, size_t bytes) {
  CHECK(hipkern_memcpy(host, dev, bytes, HIPKERN_MEMCPY_DEVICE_TO_HOST));
}

/* ---- 1. force / virial assembly ----------------------------------------- */
enum { FRAMES = 3, ATOMS = 64, ROWS = FRAMES * ATOMS, MAX_NEIGHBOURS = 24 };
static const double TOL_FORCE = 1e-12;

/* The float64 reference: F[dst] += g, F[src] -= g; the per-edge virial
 * W[a][b] = -g_a r_b goes half to each endpoint (split_src = 0) or all to
 * the source (split_src = 1). g and r given as float64 values. */
static void force_reference(const double *g, const double *r, const int32_t *src,
                            const int32_t *dst, int n_edges, int split_src, double *force,
                            double *virial) {
  memset(force, 0, sizeof(double) * 3 * ROWS);
  memset(virial, 0, sizeof(double) * 9 * ROWS);
  double w_dst = split_src ? 0.0 : 0.5, w_src = split_src ? 1.0 : 0.5;
  for (int e = 0; e < n_edges; e++) {
    int d = dst[e], s = src[e];
    for (int a = 0; a < 3; a++) {
      double ga = g[3 * e + a];
      force[3 * d + a] += ga;
      force[3 * s + a] -= ga;
      for (int b = 0; b < 3; b++) {
        double w = -ga * r[3 * e + b];
        if (w_dst != 0.0) virial[9 * d + 3 * a + b] += w_dst * w;
        virial[9 * s + 3 * a + b] += w_src * w;
      }
    }
  }
}

static void force_demo(void *stream) {
  /* Atoms in a 10 x 10 x 10 box, frames laid end to end (row f*ATOMS + k). */
  double pos[3 * ROWS];
  for (int i = 0; i < 3 * ROWS; i++) pos[i] = 10.0 * uniform01();
  int cap = ROWS * MAX_NEIGHBOURS, n_edges = 0;
  int32_t *src = xmalloc(sizeof(int32_t) * cap), *dst = xmalloc(sizeof(int32_t) * cap);
  double *g = xmalloc(sizeof(double) * 3 * cap), *r = xmalloc(sizeof(double) * 3 * cap);
  for (int f = 0; f < FRAMES; f++)
    for (int k = 0; k < ATOMS; k++) {
      int d = f * ATOMS + k, nn = below(MAX_NEIGHBOURS + 1);
      for (int j = 0; j < nn; j++) {
        int s = f * ATOMS + below(ATOMS);
        if (s == d) continue;
        double v[3], r2 = 0.0;
        for (int a = 0; a < 3; a++) {
          v[a] = pos[3 * s + a] - pos[3 * d + a];
          r2 += v[a] * v[a];
        }
        double e = exp(-r2 / 4.0); /* E_e = exp(-|r|^2/4), g = dE/dr */
        for (int a = 0; a < 3; a++) {
          r[3 * n_edges + a] = v[a];
          g[3 * n_edges + a] = -0.5 * v[a] * e;
        }
        src[n_edges] = s;
        dst[n_edges] = d;
        n_edges++;
      }
    }
  printf("force: %d frames x %d atoms, %d edges\n", FRAMES, ATOMS, n_edges);

  /* The plan on the device. */
  size_t scratch_bytes = 0;
  CHECK(hipkern_force_plan_scratch_bytes(n_edges, ROWS, &scratch_bytes));
  void *d_src = dev_upload(src, sizeof(int32_t) * n_edges);
  void *d_dst = dev_upload(dst, sizeof(int32_t) * n_edges);
  int32_t *d_dst_order = dev_alloc(sizeof(int32_t) * n_edges);
  int32_t *d_src_order = dev_alloc(sizeof(int32_t) * n_edges);
  int32_t *d_dst_ptr = dev_alloc(sizeof(int32_t) * (ROWS + 1));
  int32_t *d_src_ptr = dev_alloc(sizeof(int32_t) * (ROWS + 1));
  void *d_scratch = dev_alloc(scratch_bytes);
  hipkern_force_plan_report report;
  CHECK(hipkern_force_plan_build(HIPKERN_INDEX_I32, d_src, d_dst, n_edges, ROWS,
                                 HIPKERN_INDEX_I32, NULL, 0, d_dst_order, d_dst_ptr,
                                 d_src_order, d_src_ptr, d_scratch, scratch_bytes, &report,
                                 stream));
  CHECK(hipkern_stream_synchronize(stream));

  /* The plan is a stable counting sort: check it against one done here. */
  {
    int32_t *order = xmalloc(sizeof(int32_t) * n_edges), ptr[ROWS + 1];
    download(order, d_dst_order, sizeof(int32_t) * n_edges);
    download(ptr, d_dst_ptr, sizeof(ptr));
    int ok = ptr[0] == 0 && ptr[ROWS] == n_edges, next = 0;
    for (int row = 0; row < ROWS && ok; row++)
      for (int e = 0; e < n_edges && ok; e++)
        if (dst[e] == row) ok = ptr[row] <= next && next < ptr[row + 1] && order[next++] == e;
    verdict("device plan (dst side) = stable counting sort:", ok, "");
    free(order);
  }

  double *want_f = xmalloc(sizeof(double) * 3 * ROWS), *want_w = xmalloc(sizeof(double) * 9 * ROWS);
  double *got_f = xmalloc(sizeof(double) * 3 * ROWS), *got_w = xmalloc(sizeof(double) * 9 * ROWS);
  double *d_force = dev_alloc(sizeof(double) * 3 * ROWS);
  double *d_virial = dev_alloc(sizeof(double) * 9 * ROWS);
  char detail[160];

  /* (a) float64 inputs, half split, float64 outputs. */
  void *d_g = dev_upload(g, sizeof(double) * 3 * n_edges);
  void *d_r = dev_upload(r, sizeof(double) * 3 * n_edges);
  CHECK(hipkern_memset_async(d_force, 0xFF, sizeof(double) * 3 * ROWS, stream));
  CHECK(hipkern_memset_async(d_virial, 0xFF, sizeof(double) * 9 * ROWS, stream));
  CHECK(hipkern_force_assemble(HIPKERN_DTYPE_F64, d_g, d_r, n_edges, d_dst_order, d_dst_ptr,
                               d_src_order, d_src_ptr, ROWS, HIPKERN_VIRIAL_HALF,
                               HIPKERN_DTYPE_F64, d_force, d_virial, NULL, stream));
  CHECK(hipkern_stream_synchronize(stream));
  download(got_f, d_force, sizeof(double) * 3 * ROWS);
  download(got_w, d_virial, sizeof(double) * 9 * ROWS);
  force_reference(g, r, src, dst, n_edges, 0, want_f, want_w);
  double ef = rel_err(got_f, want_f, 3 * ROWS), ew = rel_err(got_w, want_w, 9 * ROWS);
  snprintf(detail, sizeof detail, "force %.2e, virial %.2e", ef, ew);
  verdict("assemble f64 inputs, half split vs loop:", ef <= TOL_FORCE && ew <= TOL_FORCE, detail);

  /* Per-frame totals of that virial, consecutive frames of ATOMS rows. */
  {
    int32_t frame_ptr[FRAMES + 1];
    for (int f = 0; f <= FRAMES; f++) frame_ptr[f] = f * ATOMS;
    int32_t *d_frame_ptr = dev_upload(frame_ptr, sizeof(frame_ptr));
    double *d_fv = dev_alloc(sizeof(double) * 9 * FRAMES), *d_voigt = dev_alloc(sizeof(double) * 6 * FRAMES);
    CHECK(hipkern_memset_async(d_fv, 0xFF, sizeof(double) * 9 * FRAMES, stream));
    CHECK(hipkern_memset_async(d_voigt, 0xFF, sizeof(double) * 6 * FRAMES, stream));
    CHECK(hipkern_force_frame_virial(d_virial, ROWS, NULL, d_frame_ptr, FRAMES, d_fv, d_voigt,
                                     stream));
    CHECK(hipkern_stream_synchronize(stream));
    double fv[9 * FRAMES], voigt[6 * FRAMES], want_fv[9 * FRAMES] = {0}, want_voigt[6 * FRAMES];
    download(fv, d_fv, sizeof(fv));
    download(voigt, d_voigt, sizeof(voigt));
    static const int voigt_idx[6] = {0, 4, 8, 1, 2, 5}; /* xx yy zz xy xz yz */
    for (int f = 0; f < FRAMES; f++) {
      for (int k = 0; k < ATOMS; k++)
        for (int c = 0; c < 9; c++) want_fv[9 * f + c] += want_w[9 * (f * ATOMS + k) + c];
      for (int c = 0; c < 6; c++) want_voigt[6 * f + c] = want_fv[9 * f + voigt_idx[c]];
      printf("  frame %d virial (xx yy zz xy xz yz): %.6e %.6e %.6e %.6e %.6e %.6e\n", f,
             voigt[6 * f], voigt[6 * f + 1], voigt[6 * f + 2], voigt[6 * f + 3],
             voigt[6 * f + 4], voigt[6 * f + 5]);
    }
    double e9 = rel_err(fv, want_fv, 9 * FRAMES), e6 = rel_err(voigt, want_voigt, 6 * FRAMES);
    snprintf(detail, sizeof detail, "3x3 %.2e, Voigt %.2e", e9, e6);
    verdict("frame virial totals vs loop:", e9 <= TOL_FORCE && e6 <= TOL_FORCE, detail);
    CHECK(hipkern_free(d_frame_ptr));
    CHECK(hipkern_free(d_fv));
    CHECK(hipkern_free(d_voigt));
  }
  CHECK(hipkern_free(d_g));
  CHECK(hipkern_free(d_r));

  /* (b) float32 inputs, src split, float64 outputs: the reference sums the
   * same float32 values in float64. */
  {
    float *g32 = xmalloc(sizeof(float) * 3 * n_edges), *r32 = xmalloc(sizeof(float) * 3 * n_edges);
    double *g32d = xmalloc(sizeof(double) * 3 * n_edges), *r32d = xmalloc(sizeof(double) * 3 * n_edges);
    for (int i = 0; i < 3 * n_edges; i++) {
      g32[i] = (float)g[i];
      r32[i] = (float)r[i];
      g32d[i] = g32[i];
      r32d[i] = r32[i];
    }
    void *d_g32 = dev_upload(g32, sizeof(float) * 3 * n_edges);
    void *d_r32 = dev_upload(r32, sizeof(float) * 3 * n_edges);
    CHECK(hipkern_memset_async(d_force, 0xFF, sizeof(double) * 3 * ROWS, stream));
    CHECK(hipkern_memset_async(d_virial, 0xFF, sizeof(double) * 9 * ROWS, stream));
    CHECK(hipkern_force_assemble(HIPKERN_DTYPE_F32, d_g32, d_r32, n_edges, d_dst_order,
                                 d_dst_ptr, d_src_order, d_src_ptr, ROWS, HIPKERN_VIRIAL_SRC,
                                 HIPKERN_DTYPE_F64, d_force, d_virial, NULL, stream));
    CHECK(hipkern_stream_synchronize(stream));
    download(got_f, d_force, sizeof(double) * 3 * ROWS);
    download(got_w, d_virial, sizeof(double) * 9 * ROWS);
    force_reference(g32d, r32d, src, dst, n_edges, 1, want_f, want_w);
    ef = rel_err(got_f, want_f, 3 * ROWS);
    ew = rel_err(got_w, want_w, 9 * ROWS);
    snprintf(detail, sizeof detail, "force %.2e, virial %.2e", ef, ew);
    verdict("assemble f32 inputs, src split vs loop:", ef <= TOL_FORCE && ew <= TOL_FORCE, detail);
    CHECK(hipkern_free(d_g32));
    CHECK(hipkern_free(d_r32));
    free(g32), free(r32), free(g32d), free(r32d);
  }

  /* A bad index: dst[7] = ROWS (out of range) must be named, not used. */
  {
    int32_t bad = ROWS;
    CHECK(hipkern_memcpy((int32_t *)d_dst + 7, &bad, sizeof bad, HIPKERN_MEMCPY_HOST_TO_DEVICE));
    CHECK(hipkern_device_synchronize());
    int32_t st = hipkern_force_plan_build(HIPKERN_INDEX_I32, d_src, d_dst, n_edges, ROWS,
                                          HIPKERN_INDEX_I32, NULL, 0, d_dst_order, d_dst_ptr,
                                          d_src_order, d_src_ptr, d_scratch, scratch_bytes,
                                          &report, stream);
    snprintf(detail, sizeof detail, "status %s, first bad dst %lld, src %lld",
             hipkern_error_name(st), (long long)report.first_bad_dst,
             (long long)report.first_bad_src);
    verdict("plan with dst[7] out of range refused:",
            st == HIPKERN_ERROR_INVALID_INDEX && report.first_bad_dst == 7 &&
                report.first_bad_src == -1,
            detail);
  }

  void *bufs[] = {d_src, d_dst, d_dst_order, d_src_order, d_dst_ptr, d_src_ptr,
                  d_scratch, d_force, d_virial};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) CHECK(hipkern_free(bufs[i]));
  free(src), free(dst), free(g), free(r);
  free(want_f), free(want_w), free(got_f), free(got_w);
}

/* ---- 2. PSF sink, atomic mode ------------------------------------------- */
enum { WIDTH = 160, HEIGHT = 120, PHASES = 8, EVENTS = 400 };
#define SIDE HIPKERN_PSF_STAMP_SIDE
#define RAD HIPKERN_PSF_CACHE_RADIUS
static const double TOL_PSF = 1e-12;
static const double PI = 3.14159265358979323846;

static size_t stamp_at(int i, int j, int dx, int dy) {
  return ((((size_t)j * (PHASES + 1) + (size_t)i) * SIDE + (size_t)(dy + RAD)) * SIDE +
          (size_t)(dx + RAD));
}

/* hipkern.h's rule for one event, in float64 (compiled without contraction). */
static void psf_reference(const double *ev, const double *stamps, double *image) {
  double x = ev[0], y = ev[1], flux = ev[2], s = ev[6];
  double ax = floor(x), ay = floor(y), fx = x - ax, fy = y - ay;
  double gx = fx * PHASES, gy = fy * PHASES;
  int i0 = (int)floor(gx), j0 = (int)floor(gy);
  if (i0 > PHASES - 1) i0 = PHASES - 1;
  if (j0 > PHASES - 1) j0 = PHASES - 1;
  double tx = gx - i0, ty = gy - j0;
  double w00 = (1 - tx) * (1 - ty), w10 = tx * (1 - ty), w01 = (1 - tx) * ty, w11 = tx * ty;
  for (int oy = -RAD; oy <= RAD; oy++) {
    double dy = (oy + 0.5) - fy, h2 = s * s - dy * dy;
    if (h2 < 0) continue;
    double w = sqrt(h2);
    int lo = (int)ceil((fx - 0.5) - w), hi = (int)floor((fx - 0.5) + w);
    long py = (long)ay + oy;
    if (py < 0 || py >= HEIGHT) continue;
    for (int ox = lo; ox <= hi; ox++) {
      long px = (long)ax + ox;
      if (px < 0 || px >= WIDTH) continue;
      double v = ((w00 * stamps[stamp_at(i0, j0, ox, oy)] +
                   w10 * stamps[stamp_at(i0 + 1, j0, ox, oy)]) +
                  w01 * stamps[stamp_at(i0, j0 + 1, ox, oy)]) +
                 w11 * stamps[stamp_at(i0 + 1, j0 + 1, ox, oy)];
      double *p = image + 3 * ((size_t)py * WIDTH + (size_t)px);
      p[0] += v * (flux * ev[3]);
      p[1] += v * (flux * ev[4]);
      p[2] += v * (flux * ev[5]);
    }
  }
}

static void psf_demo(void *stream) {
  /* Made-up stamps: a Gaussian of sigma 1.5 px centred at the phase. */
  size_t n_stamp = (size_t)(PHASES + 1) * (PHASES + 1) * SIDE * SIDE;
  double *stamps = xmalloc(sizeof(double) * n_stamp);
  for (int j = 0; j <= PHASES; j++)
    for (int i = 0; i <= PHASES; i++)
      for (int dy = -RAD; dy <= RAD; dy++)
        for (int dx = -RAD; dx <= RAD; dx++) {
          double ux = dx + 0.5 - (double)i / PHASES, uy = dy + 0.5 - (double)j / PHASES;
          stamps[stamp_at(i, j, dx, dy)] = exp(-(ux * ux + uy * uy) / (2 * 1.5 * 1.5)) / (2 * PI * 2.25);
        }
  /* Events: inside, on the edges and a few px outside; support 4..12 px. */
  double ev[HIPKERN_PSF_EVENT_FIELDS * EVENTS];
  for (int k = 0; k < EVENTS; k++) {
    double *e = ev + HIPKERN_PSF_EVENT_FIELDS * k;
    e[0] = -10.0 + (WIDTH + 20.0) * uniform01();
    e[1] = -10.0 + (HEIGHT + 20.0) * uniform01();
    e[2] = pow(10.0, 3.0 * uniform01());
    e[3] = 0.2 + 0.8 * uniform01();
    e[4] = 0.2 + 0.8 * uniform01();
    e[5] = 0.2 + 0.8 * uniform01();
    e[6] = 4.0 + 8.0 * uniform01();
  }
  size_t n_pix = (size_t)3 * WIDTH * HEIGHT;
  double *want = calloc(n_pix, sizeof(double)), *got = xmalloc(sizeof(double) * n_pix);
  if (!want) exit(2);
  for (int k = 0; k < EVENTS; k++) psf_reference(ev + HIPKERN_PSF_EVENT_FIELDS * k, stamps, want);
  printf("psf: %d events on %d x %d RGB, %d phases, made-up Gaussian stamps\n", EVENTS, WIDTH,
         HEIGHT, PHASES);

  double *d_stamps = dev_upload(stamps, sizeof(double) * n_stamp);
  double *d_ev = dev_upload(ev, sizeof ev);
  double *d_image = dev_alloc(sizeof(double) * n_pix);
  uint64_t *d_report = dev_alloc(sizeof(uint64_t));
  /* The image starts at zero (the sink adds); the report word at all ones. */
  CHECK(hipkern_memset_async(d_image, 0, sizeof(double) * n_pix, stream));
  CHECK(hipkern_fill_u64(d_report, 1, UINT64_MAX, stream));
  /* Two calls of half the events each: the sink accumulates. */
  CHECK(hipkern_psf_splat_atomic(d_ev, EVENTS / 2, d_stamps, PHASES, d_image, WIDTH, HEIGHT,
                                 d_report, stream));
  CHECK(hipkern_psf_splat_atomic(d_ev + HIPKERN_PSF_EVENT_FIELDS * (EVENTS / 2),
                                 EVENTS - EVENTS / 2, d_stamps, PHASES, d_image, WIDTH, HEIGHT,
                                 d_report, stream));
  CHECK(hipkern_stream_synchronize(stream));
  uint64_t rep = 0;
  download(&rep, d_report, sizeof rep);
  download(got, d_image, sizeof(double) * n_pix);
  double e = rel_err(got, want, n_pix), total = 0.0;
  for (size_t i = 0; i < n_pix; i++) total += want[i];
  char detail[160];
  snprintf(detail, sizeof detail, "rel err %.2e (sum %.6e)", e, total);
  verdict("splat_atomic vs loop:", rep == UINT64_MAX && e <= TOL_PSF, detail);

  /* An event whose support (60 px) exceeds the cache radius (47 px): the
   * call reports event 1 and adds nothing, not even event 0. */
  double bad[2 * HIPKERN_PSF_EVENT_FIELDS] = {50.5, 40.5, 1.0, 1.0, 1.0, 1.0, 5.0,
                                              80.5, 60.5, 1.0, 1.0, 1.0, 1.0, 60.0};
  CHECK(hipkern_memcpy(d_ev, bad, sizeof bad, HIPKERN_MEMCPY_HOST_TO_DEVICE));
  CHECK(hipkern_device_synchronize());
  CHECK(hipkern_psf_splat_atomic(d_ev, 2, d_stamps, PHASES, d_image, WIDTH, HEIGHT, d_report,
                                 stream));
  CHECK(hipkern_stream_synchronize(stream));
  double *after = xmalloc(sizeof(double) * n_pix);
  download(&rep, d_report, sizeof rep);
  download(after, d_image, sizeof(double) * n_pix);
  int unchanged = memcmp(after, got, sizeof(double) * n_pix) == 0;
  snprintf(detail, sizeof detail, "report %llu, image unchanged: %s", (unsigned long long)rep,
           unchanged ? "yes" : "no");
  verdict("support-60 event refused:", rep == 1 && unchanged, detail);

  CHECK(hipkern_free(d_stamps));
  CHECK(hipkern_free(d_ev));
  CHECK(hipkern_free(d_image));
  CHECK(hipkern_free(d_report));
  free(stamps), free(want), free(got), free(after);
}

/* ---- 3. List 1 near-field evaluator, DENSE layout ------------------------- */
/* 3D, q = 2 nodes per axis (NQ = q^3 = 8 modes and target points per box);
 * a uniform grid of GRID^3 boxes at level LEVEL of a unit root box. */
enum { L1_DIM = 3, L1_Q = 2, L1_NQ = 8, LEVEL = 2, GRID = 4, L1_BOXES = GRID * GRID * GRID };
/* Case codes: vectors c in {-6..6}^dim, code = Horner of c_k + 6 in base 13
 * (first component most significant); 3D has 139 cases. */
enum { CASE_BASE = 13, CASE_SHIFT = 6, CASE_CODES = CASE_BASE * CASE_BASE * CASE_BASE,
       L1_CASES = 139 };
/* A made-up extent of the table (the box side it was built for). */
static const double L1_TABLE_EXTENT = 0.3;

/* Whether a vector is an interaction case (src/nearfield/cases.rs): c = 0
 * (the box itself); max|c_k| = 4, components in {0, +-4} (a neighbour of the
 * same size); max 3, components in {+-1, +-3} (the target half the
 * source's size); max 6, components in {+-2, +-6} (twice the size). */
static int is_case(const int *c, int dim) {
  int max = 0;
  for (int k = 0; k < dim; k++) max = abs(c[k]) > max ? abs(c[k]) : max;
  int a, b; /* the allowed |c_k| */
  switch (max) {
    case 0: return 1;
    case 4: a = 0, b = 4; break;
    case 3: a = 1, b = 3; break;
    case 6: a = 2, b = 6; break;
    default: return 0;
  }
  for (int k = 0; k < dim; k++)
    if (abs(c[k]) != a && abs(c[k]) != b) return 0;
  return 1;
}

/* The case ids of dimension 3, as hipkern numbers them: the vectors of
 * {-6..6}^3 in increasing code order, the cases among them numbered 0, 1,
 * ... id_of_code[code] = the id, -1 where the code is no case. Returns the
 * number of cases. */
static int case_ids(int *id_of_code) {
  int n = 0;
  for (int code = 0; code < CASE_CODES; code++) {
    int c[L1_DIM], r = code;
    for (int k = L1_DIM - 1; k >= 0; k--) { /* last component least significant */
      c[k] = r % CASE_BASE - CASE_SHIFT;
      r /= CASE_BASE;
    }
    id_of_code[code] = is_case(c, L1_DIM) ? n++ : -1;
  }
  return n;
}

/* The case of a (target, source) pair: c = 4 (centre_t - centre_s) / h_s,
 * rounded (exact here: dyadic centres), looked up by its code; -1 if it is
 * no case. (The pairs here are of one level; a 2:1 tree's pairs of two
 * levels get their cases by the same rule.) */
static int case_of_pair(const int *id_of_code, const double *centre_t, const double *centre_s,
                        double h_s) {
  int code = 0;
  for (int k = 0; k < L1_DIM; k++) {
    double raw = 4.0 * (centre_t[k] - centre_s[k]) / h_s;
    long c = lround(raw);
    if (fabs(raw - (double)c) > 1e-6 || c < -CASE_SHIFT || c > CASE_SHIFT) return -1;
    code = code * CASE_BASE + (int)c + CASE_SHIFT;
  }
  return id_of_code[code];
}

/* One correctly rounded float64 product and sum: the volatile store keeps
 * the compiler from fusing them into an FMA, whatever -ffp-contract it is
 * given (the reference must match the device bit for bit). */
static double mul_rn(double a, double b) {
  volatile double p = a * b;
  return p;
}
static double add_rn(double a, double b) {
  volatile double s = a + b;
  return s;
}

/* hipkern.h's rule, in its order: per target box i and target point t,
 * u = 0; for each pair j of box i in list order: acc = 0; for each source
 * mode s in order: acc = acc + f[box_j][s] * T(case_j, s, t); then
 * u = u + (scale * acc + disp) with disp = 0.0 (every level's displacement
 * is 0 here: only 2D Laplace has one), added as the device and the CPU
 * evaluator (src/nearfield/list1.rs) add it. DENSE: T(c, s, t) =
 * values[(c * NQ + s) * NQ + t] (one table). */
static void list1_reference(int n_targets, const uint32_t *starts, const uint32_t *sources,
                            const uint8_t *cases, const uint8_t *box_levels,
                            const double *level_scale, const double *values, const double *f,
                            double *out) {
  for (int i = 0; i < n_targets; i++)
    for (int t = 0; t < L1_NQ; t++) {
      double u = 0.0;
      for (uint32_t j = starts[i]; j < starts[i + 1]; j++) {
        const double *fs = f + (size_t)sources[j] * L1_NQ;
        const double *T = values + (size_t)cases[j] * L1_NQ * L1_NQ + (size_t)t;
        double acc = 0.0;
        for (int s = 0; s < L1_NQ; s++) acc = add_rn(acc, mul_rn(fs[s], T[(size_t)s * L1_NQ]));
        const double disp = 0.0;
        u = add_rn(u, add_rn(mul_rn(level_scale[box_levels[sources[j]]], acc), disp));
      }
      out[(size_t)i * L1_NQ + t] = u;
    }
}

static void list1_demo(void *stream) {
  /* The case numbering, built here: no table builder needed in C. */
  int *id_of_code = xmalloc(sizeof(int) * CASE_CODES);
  int n_cases = case_ids(id_of_code);
  if (n_cases != L1_CASES) {
    fprintf(stderr, "hipkern_example: %d cases in 3D, expected %d\n", n_cases, L1_CASES);
    exit(2);
  }

  /* Box b = (ix * GRID + iy) * GRID + iz, side h = 1 / 2^LEVEL, centre
   * ((ix, iy, iz) + 1/2) h; every box is a target box (output row b). Its
   * List 1: the boxes within one step on every axis (itself included), in
   * increasing box id; the case of each pair from the centres. */
  const double h = 1.0 / (double)(1 << LEVEL);
  double centre[L1_BOXES][L1_DIM];
  for (int b = 0; b < L1_BOXES; b++) {
    centre[b][0] = (b / (GRID * GRID) + 0.5) * h;
    centre[b][1] = (b / GRID % GRID + 0.5) * h;
    centre[b][2] = (b % GRID + 0.5) * h;
  }
  uint32_t starts[L1_BOXES + 1];
  uint32_t *sources = xmalloc(sizeof(uint32_t) * L1_BOXES * 27);
  uint8_t *cases = xmalloc(L1_BOXES * 27);
  int n_pairs = 0;
  for (int b = 0; b < L1_BOXES; b++) {
    starts[b] = (uint32_t)n_pairs;
    int ix = b / (GRID * GRID), iy = b / GRID % GRID, iz = b % GRID;
    for (int x = ix - 1; x <= ix + 1; x++)
      for (int y = iy - 1; y <= iy + 1; y++)
        for (int z = iz - 1; z <= iz + 1; z++) {
          if (x < 0 || x >= GRID || y < 0 || y >= GRID || z < 0 || z >= GRID) continue;
          int sb = (x * GRID + y) * GRID + z;
          int c = case_of_pair(id_of_code, centre[b], centre[sb], h);
          if (c < 0) {
            fprintf(stderr, "hipkern_example: boxes %d and %d are no List 1 pair\n", b, sb);
            exit(2);
          }
          sources[n_pairs] = (uint32_t)sb;
          cases[n_pairs] = (uint8_t)c;
          n_pairs++;
        }
  }
  starts[L1_BOXES] = (uint32_t)n_pairs;
  uint8_t box_levels[L1_BOXES];
  memset(box_levels, LEVEL, sizeof box_levels);

  /* Per level 0..LEVEL: the caller's scaling of the one table, here 3D
   * Laplace's rule (h_l / L)^2 for a table of extent L; no displacement;
   * table 0. */
  enum { N_LEVELS = LEVEL + 1 };
  double level_scale[N_LEVELS], level_displacement[N_LEVELS];
  uint32_t level_table[N_LEVELS];
  for (int l = 0; l < N_LEVELS; l++) {
    double rho = 1.0 / (double)(1 << l) / L1_TABLE_EXTENT;
    level_scale[l] = rho * rho;
    level_displacement[l] = 0.0;
    level_table[l] = 0;
  }

  /* The table: made-up values in [-1, 1), values[(case * NQ + s) * NQ + t].
   * Real tables come from the Rust table builder: `hipkern nearfield build
   * --dim 3 --q 2 --kernel laplace --extent L --out table.npz` writes this
   * array as `data` (with `mode_normalizers`, and `case_indices`, the
   * code-to-id lookup built above); what a C caller must get right are the
   * case ids of its pairs. The mode normalisers (the integral of each
   * source mode: (L/2)^3 for q = 2) are read only where a level has a
   * displacement (none here), but the pointer is required. */
  size_t n_rows = (size_t)L1_CASES * L1_NQ * L1_NQ;
  double *values = xmalloc(sizeof(double) * n_rows);
  for (size_t k = 0; k < n_rows; k++) values[k] = 2.0 * uniform01() - 1.0;
  double normalizers[L1_NQ];
  for (int s = 0; s < L1_NQ; s++) normalizers[s] = pow(L1_TABLE_EXTENT / 2.0, 3.0);
  double f[L1_BOXES * L1_NQ];
  for (int k = 0; k < L1_BOXES * L1_NQ; k++) f[k] = 2.0 * uniform01() - 1.0;
  double *want = xmalloc(sizeof(double) * L1_BOXES * L1_NQ);
  list1_reference(L1_BOXES, starts, sources, cases, box_levels, level_scale, values, f, want);
  printf("list1: 3D q=%d DENSE, %d boxes at level %d, %d pairs, %d cases, made-up table\n",
         L1_Q, L1_BOXES, LEVEL, n_pairs, n_cases);

  hipkern_list1_table table;
  memset(&table, 0, sizeof table); /* the ORBIT / FALLBACK fields: unused */
  table.layout = HIPKERN_LIST1_DENSE;
  table.dim = L1_DIM;
  table.q = L1_Q;
  table.n_cases = L1_CASES;
  table.n_tables = 1;
  table.n_rows = (int64_t)n_rows;
  void *d_values = dev_upload(values, sizeof(double) * n_rows);
  void *d_norms = dev_upload(normalizers, sizeof normalizers);
  table.values = d_values;
  table.mode_normalizers = d_norms;
  hipkern_list1_pairs pairs;
  memset(&pairs, 0, sizeof pairs);
  void *d_starts = dev_upload(starts, sizeof starts);
  void *d_sources = dev_upload(sources, sizeof(uint32_t) * n_pairs);
  void *d_cases = dev_upload(cases, (size_t)n_pairs);
  void *d_levels = dev_upload(box_levels, sizeof box_levels);
  void *d_scale = dev_upload(level_scale, sizeof level_scale);
  void *d_disp = dev_upload(level_displacement, sizeof level_displacement);
  void *d_ltab = dev_upload(level_table, sizeof level_table);
  pairs.n_targets = L1_BOXES;
  pairs.n_boxes = L1_BOXES;
  pairs.n_pairs = n_pairs;
  pairs.n_levels = N_LEVELS;
  pairs.source_starts = d_starts;
  pairs.source_boxes = d_sources;
  pairs.pair_cases = d_cases;
  pairs.box_levels = d_levels;
  pairs.level_scale = d_scale;
  pairs.level_displacement = d_disp;
  pairs.level_table = d_ltab;
  double *d_f = dev_upload(f, sizeof f);
  size_t out_bytes = sizeof(double) * L1_BOXES * L1_NQ;
  double *d_out = dev_alloc(out_bytes);

  /* Bitwise the loop (32 lanes a box: lanes 8..31 have no target). */
  double *got = xmalloc(out_bytes);
  char detail[160];
  CHECK(hipkern_memset_async(d_out, 0xFF, out_bytes, stream));
  CHECK(hipkern_list1_evaluate(&table, &pairs, d_f, d_out, stream));
  CHECK(hipkern_stream_synchronize(stream));
  download(got, d_out, out_bytes);
  double e = rel_err(got, want, (size_t)L1_BOXES * L1_NQ);
  int same = memcmp(got, want, out_bytes) == 0;
  snprintf(detail, sizeof detail, "rel err %.2e, bitwise equal: %s", e, same ? "yes" : "no");
  verdict("list1 dense vs loop:", same, detail);

  /* An unknown layout: refused before any launch, the output unchanged. */
  hipkern_list1_table bad_table = table;
  bad_table.layout = (hipkern_list1_layout)3;
  double *after = xmalloc(out_bytes);
  int32_t st = hipkern_list1_evaluate(&bad_table, &pairs, d_f, d_out, stream);
  CHECK(hipkern_stream_synchronize(stream));
  download(after, d_out, out_bytes);
  int unchanged = memcmp(after, got, out_bytes) == 0;
  snprintf(detail, sizeof detail, "status %s, output unchanged: %s", hipkern_error_name(st),
           unchanged ? "yes" : "no");
  verdict("list1 unknown layout refused:", st == HIPKERN_ERROR_INVALID_ARGUMENT && unchanged,
          detail);

  void *bufs[] = {d_values, d_norms,  d_starts, d_sources, d_cases, d_levels,
                  d_scale,  d_disp,   d_ltab,   d_f,       d_out};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) CHECK(hipkern_free(bufs[i]));
  free(id_of_code), free(sources), free(cases), free(values), free(want);
  free(got), free(after);
}

int main(int argc, char **argv) {
  int require_device = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--require-device") == 0) {
      require_device = 1;
    } else {
      fprintf(stderr, "usage: %s [--require-device]\n", argv[0]);
      return 2;
    }
  }
  printf("hipkern C ABI v%d (header v%d), platform %s, archs [%s]\n", (int)hipkern_abi_version(),
         HIPKERN_ABI_VERSION, hipkern_platform(), hipkern_compiled_archs());
  if (hipkern_abi_version() != HIPKERN_ABI_VERSION) {
    fprintf(stderr, "hipkern_example: library ABI %d, header %d\n", (int)hipkern_abi_version(),
            HIPKERN_ABI_VERSION);
    return 2;
  }
  int32_t count = 0, st = hipkern_device_count(&count);
  if (st != HIPKERN_SUCCESS || count == 0) {
    printf("no device (%s: %s): nothing checked\n", st ? hipkern_error_name(st) : "count 0",
           st ? hipkern_error_string(st) : "no devices");
    return require_device ? 2 : 0;
  }
  hipkern_device_props props;
  CHECK(hipkern_set_device(0));
  CHECK(hipkern_get_device_properties(0, &props));
  printf("device 0: %s (%s)\n", props.name, props.arch_name);
  void *stream = NULL;
  CHECK(hipkern_stream_create(&stream));
  force_demo(stream);
  psf_demo(stream);
  list1_demo(stream);
  CHECK(hipkern_stream_destroy(stream));
  if (g_failed_checks) {
    printf("hipkern_example: %d MISMATCH(ES)\n", g_failed_checks);
    return 1;
  }
  printf("hipkern_example: OK\n");
  return 0;
}
