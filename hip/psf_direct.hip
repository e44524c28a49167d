// The PSF sink's direct path on the device (docs/design/psf.md#direct-path):
// events whose support the stamps cannot hold, rendered from the Moffat
// PSF's pixel integrals (src/psf/model.rs) instead of the cache.
//
// hipkern_psf_render_direct launches two kernels on the caller's stream:
//
//   psf_direct_check: one thread per event; every field finite, flux and
//     colours >= 0, 0 < support <= HIPKERN_PSF_MAX_DIRECT_SUPPORT; the index
//     of each bad event is atomicMin'd into the caller's report word.
//   psf_direct: one block per 16 x 16 tile of the image (grid-stride over
//     the tiles), one thread per pixel. The block walks the events in
//     order; an event whose support cannot reach the tile (a test every
//     thread of the block computes alike, with a pixel of margin) is
//     skipped by the whole block. Otherwise each thread applies the
//     support contract to its own pixel (support.rs: the same row range
//     the CPU's render_direct walks) and, inside, adds the pixel integral
//     times the colour products. A pixel is one thread's: it is read once,
//     takes its events in order and is written once, so no atomics and the
//     CPU's order of additions. Events are few (a frame's brightest stars),
//     tiles many; the skip test is the cost per event and tile.
//
// Against the CPU reference: the geometry, the node positions, the rule
// choice, every sum and product are the CPU's correctly rounded float64
// operations in its order (hipkern_psf_support.h: never contracted); the
// one difference is the device's pow (CUDA: <= 2 ulp; the CPU's libm is
// within 1 ulp), so values agree to a few ulp, not bitwise.
#include "hipkern_port.h"
#include "hipkern.h"
#include "hipkern_psf_support.h"

#include <cmath>

namespace {

constexpr int kFields = HIPKERN_PSF_EVENT_FIELDS;
constexpr int kTile = 16;
constexpr unsigned kTileThreads = kTile * kTile;
constexpr unsigned kCheckBlock = 256;
constexpr int64_t kMaxCheckBlocks = 65535;
// Tiles per launch before the grid strides (any count works; this keeps
// the grid inside every device's limit).
constexpr int64_t kMaxTileBlocks = int64_t{1} << 20;
constexpr unsigned long long kNone = ~0ull;
constexpr double kPi = 3.14159265358979323846;

// The Moffat constants and the three Gauss-Legendre half rules the pixel
// integral chooses from: 4 nodes per axis (2 positive) at [0, 2), 6 at
// [2, 5), 8 at [5, 9), each node t_k > 0 standing for +-t_k.
struct DirectModel {
  double ia2;   // 1 / alpha^2
  double mb;    // -beta
  double norm;  // (beta - 1) / (pi alpha^2)
  double node[9];
  double weight[9];
};
// Where each rule starts in DirectModel::node / weight.
constexpr int kRule4 = 0, kRule6 = 2, kRule8 = 5;

// MoffatPsf::integrate with a rule of H positive nodes.
template <int H>
__device__ double integrate(const DirectModel &m, const double *node, const double *weight,
                            double cu, double cv) {
  double v1[H], v2[H];
#pragma unroll
  for (int l = 0; l < H; ++l) {
    const double t = hk_mul(0.5, node[l]);
    const double p = hk_add(cv, t), q = hk_sub(cv, t);
    v1[l] = hk_mul(p, p);
    v2[l] = hk_mul(q, q);
  }
  const auto f = [&](double r2) { return pow(hk_add(1.0, hk_mul(r2, m.ia2)), m.mb); };
  const auto inner = [&](double u2) {
    double s = 0.0;
#pragma unroll
    for (int l = 0; l < H; ++l)
      s = hk_add(s, hk_mul(weight[l], hk_add(f(hk_add(u2, v1[l])), f(hk_add(u2, v2[l])))));
    return s;
  };
  double outer = 0.0;
#pragma unroll
  for (int k = 0; k < H; ++k) {
    const double t = hk_mul(0.5, node[k]);
    const double p = hk_add(cu, t), q = hk_sub(cu, t);
    outer = hk_add(outer, hk_mul(weight[k], hk_add(inner(hk_mul(p, p)), inner(hk_mul(q, q)))));
  }
  return hk_mul(hk_mul(m.norm, 0.25), outer);
}

// MoffatPsf::pixel_integral: the rule from the distance d of the pixel's
// nearest point, 8 nodes for d^2 < 16, 6 for d^2 < 144, else 4.
__device__ double pixel_integral(const DirectModel &m, double cu, double cv) {
  const double du = fmax(hk_sub(fabs(cu), 0.5), 0.0);
  const double dv = fmax(hk_sub(fabs(cv), 0.5), 0.0);
  const double d2 = hk_add(hk_mul(du, du), hk_mul(dv, dv));
  if (d2 < 16.0) return integrate<4>(m, m.node + kRule8, m.weight + kRule8, cu, cv);
  if (d2 < 144.0) return integrate<3>(m, m.node + kRule6, m.weight + kRule6, cu, cv);
  return integrate<2>(m, m.node + kRule4, m.weight + kRule4, cu, cv);
}

// StarEvent::validate and the direct path's support limit (check_routed).
__device__ bool direct_event_ok(const double *e) {
  for (int f = 0; f < kFields; ++f)
    if (!isfinite(e[f])) return false;
  if (e[2] < 0.0 || e[3] < 0.0 || e[4] < 0.0 || e[5] < 0.0) return false;
  return e[6] > 0.0 && e[6] <= HIPKERN_PSF_MAX_DIRECT_SUPPORT;
}

__global__ void psf_direct_check(const double *__restrict__ events, int64_t n_events,
                                 unsigned long long *report) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n_events;
       k += stride)
    if (!direct_event_ok(events + kFields * k)) atomicMin(report, static_cast<unsigned long long>(k));
}

__global__ void __launch_bounds__(kTileThreads)
    psf_direct(const double *__restrict__ events, int64_t n_events, DirectModel m,
               double *__restrict__ image, int32_t width, int32_t height, int64_t tiles_x,
               int64_t n_tiles, const unsigned long long *report) {
  if (*report != kNone) return;
  for (int64_t t = blockIdx.x; t < n_tiles; t += gridDim.x) {
    const int64_t x0 = (t % tiles_x) * kTile, y0 = (t / tiles_x) * kTile;
    const int64_t ix = x0 + threadIdx.x % kTile, iy = y0 + threadIdx.x / kTile;
    const bool in_image = ix < width && iy < height;
    const double tx0 = static_cast<double>(x0), ty0 = static_cast<double>(y0);
    double acc[3] = {0.0, 0.0, 0.0};
    bool touched = false;
    for (int64_t k = 0; k < n_events; ++k) {
      const double *e = events + kFields * k;
      const double x = e[0], y = e[1], s = e[6];
      // No pixel centre of the tile (x0 + 0.5 .. x0 + 15.5) lies within s:
      // the same answer in every thread, so the block skips together.
      if (x + s + 1.0 < tx0 || x - s - 1.0 > tx0 + kTile || y + s + 1.0 < ty0 ||
          y - s - 1.0 > ty0 + kTile)
        continue;
      if (!in_image) continue;
      // The support contract at this pixel (anchor, phase, row range); the
      // skip above bounds |ix - x| and |iy - y| by s + 17, so the offsets
      // and the anchors' casts stay far inside int64.
      const double ax = floor(x), ay = floor(y);
      const double fx = hk_sub(x, ax), fy = hk_sub(y, ay);
      const int64_t ox = ix - static_cast<int64_t>(ax), oy = iy - static_cast<int64_t>(ay);
      int64_t lo, hi;
      if (!row_span(fx, fy, s, oy, &lo, &hi) || ox < lo || ox > hi) continue;
      const double cu = hk_sub(hk_add(static_cast<double>(ox), 0.5), fx);
      const double cv = hk_sub(hk_add(static_cast<double>(oy), 0.5), fy);
      const double v = pixel_integral(m, cu, cv);
      const size_t o = (static_cast<size_t>(iy) * static_cast<size_t>(width) + ix) * 3;
      if (!touched) {
        acc[0] = image[o];
        acc[1] = image[o + 1];
        acc[2] = image[o + 2];
        touched = true;
      }
#pragma unroll
      for (int c = 0; c < 3; ++c) acc[c] = hk_add(acc[c], hk_mul(v, hk_mul(e[2], e[3 + c])));
    }
    if (touched) {
      const size_t o = (static_cast<size_t>(iy) * static_cast<size_t>(width) + ix) * 3;
      image[o] = acc[0];
      image[o + 1] = acc[1];
      image[o + 2] = acc[2];
    }
  }
}

// Host code: the file's clang pragma covers it under clang (HIP); under
// nvcc the host compiler is gcc, whose C++ default contracts a*b + c into
// an FMA where the target has one (not x86-64's baseline, but aarch64):
// turned off here, so the constants are HalfRule::new's and alpha()'s bits.
#if defined(__GNUC__) && !defined(__clang__)
#define HIPKERN_HOST_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define HIPKERN_HOST_NO_CONTRACT
#endif

// HalfRule::new on the host, the same operations in the same order.
HIPKERN_HOST_NO_CONTRACT void half_rule(int n, double *nodes, double *weights) {
  for (int k = 0; k < n / 2; ++k) {
    double x = std::cos(kPi * (static_cast<double>(k) + 0.75) / (static_cast<double>(n) + 0.5));
    double dp = 1.0;
    for (int it = 0; it < 100; ++it) {
      double p0 = 1.0, p1 = x;
      for (int j = 2; j <= n; ++j) {
        const double p2 = (static_cast<double>(2 * j - 1) * x * p1 - static_cast<double>(j - 1) * p0) /
                          static_cast<double>(j);
        p0 = p1;
        p1 = p2;
      }
      dp = static_cast<double>(n) * (x * p1 - p0) / (x * x - 1.0);
      const double dx = p1 / dp;
      x -= dx;
      if (std::fabs(dx) < 1e-17) break;
    }
    nodes[k] = x;
    weights[k] = 2.0 / ((1.0 - x * x) * dp * dp);
  }
}

bool in_range(double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; }

// MoffatPsf::validate's ranges and support limit, then the constants.
HIPKERN_HOST_NO_CONTRACT bool direct_model(const hipkern_psf_moffat &p, DirectModel *m) {
  if (!in_range(p.fwhm, 0.5, 1000.0) || !in_range(p.beta, 1.1, 100.0) ||
      !in_range(p.tail, 1e-15, 0.5))
    return false;
  const double a = p.fwhm / (2.0 * std::sqrt(std::pow(2.0, 1.0 / p.beta) - 1.0));
  const double norm = (p.beta - 1.0) / (kPi * a * a);
  const double r = a * std::sqrt(std::pow(p.tail, 1.0 / (1.0 - p.beta)) - 1.0);
  if (!(std::isfinite(a) && a > 0.0 && std::isfinite(norm) && norm > 0.0 && std::isfinite(r) &&
        r > 0.0 && r <= HIPKERN_PSF_MAX_DIRECT_SUPPORT))
    return false;
  m->ia2 = 1.0 / (a * a);
  m->mb = -p.beta;
  m->norm = norm;
  half_rule(4, m->node + kRule4, m->weight + kRule4);
  half_rule(6, m->node + kRule6, m->weight + kRule6);
  half_rule(8, m->node + kRule8, m->weight + kRule8);
  return true;
}

}  // namespace

extern "C" {

int32_t hipkern_psf_render_direct(const double *events, int64_t n_events,
                                  const hipkern_psf_moffat *psf, double *image, int32_t width,
                                  int32_t height, uint64_t *report, void *stream) {
  if (n_events < 0 || width < 1 || height < 1 || !report || !psf)
    return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_events > INT64_MAX / (kFields * 8)) return HIPKERN_ERROR_OVERFLOW;
  DirectModel m;
  if (!direct_model(*psf, &m)) return HIPKERN_ERROR_INVALID_ARGUMENT;
  if (n_events == 0) return HIPKERN_SUCCESS;
  if (!events || !image) return HIPKERN_ERROR_INVALID_ARGUMENT;
  HIPKERN_ON_STREAM_DEVICE(on_device, stream);
  hipStream_t s = static_cast<hipStream_t>(stream);
  unsigned long long *rep = reinterpret_cast<unsigned long long *>(report);
  (void)hipGetLastError();  // a stale error must not be reported as ours
  const int64_t check_blocks = (n_events + kCheckBlock - 1) / kCheckBlock;
  psf_direct_check<<<static_cast<unsigned>(check_blocks < kMaxCheckBlocks ? check_blocks
                                                                          : kMaxCheckBlocks),
                     kCheckBlock, 0, s>>>(events, n_events, rep);
  hipError_t e = hipGetLastError();
  if (e != hipSuccess) return static_cast<int32_t>(e);
  const int64_t tiles_x = (static_cast<int64_t>(width) + kTile - 1) / kTile;
  const int64_t n_tiles = tiles_x * ((static_cast<int64_t>(height) + kTile - 1) / kTile);
  const unsigned blocks =
      static_cast<unsigned>(n_tiles < kMaxTileBlocks ? n_tiles : kMaxTileBlocks);
  psf_direct<<<blocks, kTileThreads, 0, s>>>(events, n_events, m, image, width, height, tiles_x,
                                             n_tiles, rep);
  return static_cast<int32_t>(hipGetLastError());
}

}  // extern "C"
