/*
 * The C ABI on the cpu platform (no device toolchain): every entry point
 * exists, so the safe crate links the same way everywhere, and every one
 * that would touch a device returns HIPKERN_ERROR_NO_TOOLCHAIN. Including
 * hipkern.h makes the C compiler check each definition against its
 * declaration.
 */
#include "hipkern.h"
#include "hipkern_list1_widths.h"

#define NT return HIPKERN_ERROR_NO_TOOLCHAIN

int32_t hipkern_abi_version(void) { return HIPKERN_ABI_VERSION; }
const char *hipkern_platform(void) { return "cpu"; }
const char *hipkern_compiled_archs(void) { return ""; }
int32_t hipkern_runtime_version(int32_t *v) { if (v) *v = 0; NT; }
int32_t hipkern_build_runtime_version(void) { return 0; }
int32_t hipkern_driver_version(int32_t *v) { if (v) *v = 0; NT; }

const char *hipkern_error_name(int32_t s) {
  switch (s) {
    case HIPKERN_SUCCESS: return "HIPKERN_SUCCESS";
    case HIPKERN_ERROR_INVALID_ARGUMENT: return "HIPKERN_ERROR_INVALID_ARGUMENT";
    case HIPKERN_ERROR_NO_TOOLCHAIN: return "HIPKERN_ERROR_NO_TOOLCHAIN";
    case HIPKERN_ERROR_OVERFLOW: return "HIPKERN_ERROR_OVERFLOW";
    case HIPKERN_ERROR_INVALID_INDEX: return "HIPKERN_ERROR_INVALID_INDEX";
    case HIPKERN_ERROR_HOST_MEMORY: return "HIPKERN_ERROR_HOST_MEMORY";
    default: return "HIPKERN_ERROR_UNKNOWN";
  }
}

const char *hipkern_error_string(int32_t s) {
  switch (s) {
    case HIPKERN_SUCCESS: return "no error";
    case HIPKERN_ERROR_INVALID_ARGUMENT: return "invalid argument passed to a hipkern entry point";
    case HIPKERN_ERROR_NO_TOOLCHAIN: return "hipkern was built for the cpu platform, without device code";
    case HIPKERN_ERROR_OVERFLOW: return "a size computation would overflow";
    case HIPKERN_ERROR_INVALID_INDEX: return "an index is out of range";
    case HIPKERN_ERROR_HOST_MEMORY: return "a host allocation failed";
    default: return "unknown status (the cpu build has no device runtime)";
  }
}

int32_t hipkern_get_last_error(void) { return HIPKERN_SUCCESS; }
int32_t hipkern_device_count(int32_t *c) { if (c) *c = 0; NT; }
int32_t hipkern_get_device_properties(int32_t d, hipkern_device_props *p) { (void)d; (void)p; NT; }
int32_t hipkern_set_device(int32_t d) { (void)d; NT; }
int32_t hipkern_get_device(int32_t *d) { (void)d; NT; }
int32_t hipkern_device_synchronize(void) { NT; }
int32_t hipkern_mem_get_info(size_t *f, size_t *t) { (void)f; (void)t; NT; }
int32_t hipkern_malloc(void **p, size_t b) { if (p) *p = 0; (void)b; NT; }
int32_t hipkern_free(void *p) { (void)p; NT; }
int32_t hipkern_malloc_host(void **p, size_t b) { if (p) *p = 0; (void)b; NT; }
int32_t hipkern_free_host(void *p) { (void)p; NT; }
int32_t hipkern_memcpy(void *d, const void *s, size_t b, hipkern_memcpy_kind k) {
  (void)d; (void)s; (void)b; (void)k; NT;
}
int32_t hipkern_memcpy_async(void *d, const void *s, size_t b, hipkern_memcpy_kind k, void *st) {
  (void)d; (void)s; (void)b; (void)k; (void)st; NT;
}
int32_t hipkern_memset(void *d, int32_t v, size_t b) { (void)d; (void)v; (void)b; NT; }
int32_t hipkern_memset_async(void *d, int32_t v, size_t b, void *s) {
  (void)d; (void)v; (void)b; (void)s; NT;
}
int32_t hipkern_stream_create(void **s) { if (s) *s = 0; NT; }
int32_t hipkern_stream_destroy(void *s) { (void)s; NT; }
int32_t hipkern_stream_synchronize(void *s) { (void)s; NT; }
int32_t hipkern_stream_wait_event(void *s, void *e) { (void)s; (void)e; NT; }
int32_t hipkern_event_create(void **e) { if (e) *e = 0; NT; }
int32_t hipkern_event_destroy(void *e) { (void)e; NT; }
int32_t hipkern_event_record(void *e, void *s) { (void)e; (void)s; NT; }
int32_t hipkern_event_synchronize(void *e) { (void)e; NT; }
int32_t hipkern_event_elapsed_time(float *ms, void *a, void *b) { (void)ms; (void)a; (void)b; NT; }
int32_t hipkern_fill_u32(uint32_t *d, size_t n, uint32_t v, void *s) {
  (void)d; (void)n; (void)v; (void)s; NT;
}
int32_t hipkern_fill_u64(uint64_t *d, size_t n, uint64_t v, void *s) {
  (void)d; (void)n; (void)v; (void)s; NT;
}
int32_t hipkern_iota_u32(uint32_t *d, size_t n, uint32_t a, uint32_t st, void *s) {
  (void)d; (void)n; (void)a; (void)st; (void)s; NT;
}
int32_t hipkern_force_assemble(hipkern_dtype dt, const void *g, const void *r, int64_t ne,
                               const int32_t *a, const int32_t *b, const int32_t *c,
                               const int32_t *d, int32_t nr, hipkern_virial_split sp,
                               hipkern_dtype odt, void *f, void *w, double *acc, void *s) {
  (void)dt; (void)g; (void)r; (void)ne; (void)a; (void)b; (void)c; (void)d; (void)nr; (void)sp;
  (void)odt; (void)f; (void)w; (void)acc; (void)s; NT;
}
int32_t hipkern_force_plan_scratch_bytes(int64_t ne, int64_t nr, size_t *bytes) {
  (void)ne; (void)nr; if (bytes) *bytes = 0; NT;
}
int32_t hipkern_force_plan_build(hipkern_index_type it, const void *src, const void *dst,
                                 int64_t ne, int64_t nx, hipkern_index_type mt, const void *m,
                                 int64_t nl, int32_t *a, int32_t *b, int32_t *c, int32_t *d,
                                 void *sc, size_t sb, hipkern_force_plan_report *rep, void *s) {
  (void)it; (void)src; (void)dst; (void)ne; (void)nx; (void)mt; (void)m; (void)nl; (void)a;
  (void)b; (void)c; (void)d; (void)sc; (void)sb; (void)s;
  if (rep) rep->first_bad_src = rep->first_bad_dst = rep->first_bad_mapping = -1;
  NT;
}
int32_t hipkern_force_assemble_atomic(hipkern_dtype dt, const void *g, const void *r,
                                      const int32_t *src, const int32_t *dst, int64_t ne,
                                      int32_t nr, hipkern_virial_split sp, void *o, void *f,
                                      void *w, void *s) {
  (void)dt; (void)g; (void)r; (void)src; (void)dst; (void)ne; (void)nr; (void)sp; (void)o;
  (void)f; (void)w; (void)s; NT;
}

int32_t hipkern_force_frame_virial(const double *v, int64_t nr, const int32_t *rows,
                                   const int32_t *ptr, int64_t nf, double *fv, double *fvv,
                                   void *s) {
  (void)v; (void)nr; (void)rows; (void)ptr; (void)nf; (void)fv; (void)fvv; (void)s; NT;
}

int32_t hipkern_psf_splat_atomic(const double *ev, int64_t n, const double *st, int32_t p,
                                 double *img, int32_t w, int32_t h, uint64_t *rep, void *s) {
  (void)ev; (void)n; (void)st; (void)p; (void)img; (void)w; (void)h; (void)rep; (void)s; NT;
}

int32_t hipkern_psf_tile_bin(const double *ev, int64_t n, int32_t p, int32_t w, int32_t h,
                             int32_t tile, int32_t dl, uint32_t serial,
                             const hipkern_psf_tile_scratch *sc, uint64_t *rep, void *s) {
  (void)ev; (void)n; (void)p; (void)w; (void)h; (void)tile; (void)dl; (void)serial; (void)sc;
  (void)rep; (void)s; NT;
}

int32_t hipkern_psf_tile_accumulate(const double *st, int32_t p, double *img, int32_t w,
                                    int32_t h, int32_t tile, int32_t dl, int64_t n,
                                    uint64_t nt, int32_t merge,
                                    const hipkern_psf_tile_scratch *sc, const uint64_t *rep,
                                    void *s) {
  (void)st; (void)p; (void)img; (void)w; (void)h; (void)tile; (void)dl; (void)n; (void)nt;
  (void)merge; (void)sc; (void)rep; (void)s; NT;
}

int32_t hipkern_psf_count(const double *ev, int64_t n, int32_t w, int32_t h, uint64_t *c,
                          const uint64_t *rep, void *s) {
  (void)ev; (void)n; (void)w; (void)h; (void)c; (void)rep; (void)s; NT;
}

int32_t hipkern_psf_render_direct(const double *ev, int64_t n, const hipkern_psf_moffat *psf,
                                  double *img, int32_t w, int32_t h, uint64_t *rep, void *s) {
  (void)ev; (void)n; (void)psf; (void)img; (void)w; (void)h; (void)rep; (void)s; NT;
}

int32_t hipkern_list1_evaluate(const hipkern_list1_table *t, const hipkern_list1_pairs *p,
                               const double *f, double *out, void *s) {
  (void)t; (void)p; (void)f; (void)out; (void)s; NT;
}

int32_t hipkern_list1_evaluate_grouped(const hipkern_list1_table *t, const hipkern_list1_pairs *p,
                                       const hipkern_list1_groups *g, const double *f, double *out,
                                       void *s) {
  (void)t; (void)p; (void)g; (void)f; (void)out; (void)s; NT;
}

int32_t hipkern_list1_evaluate_tiled(const hipkern_list1_table *t, const hipkern_list1_pairs *p,
                                     const hipkern_list1_tiles *g, const double *f, double *out,
                                     void *s) {
  (void)t; (void)p; (void)g; (void)f; (void)out; (void)s; NT;
}

int32_t hipkern_list1_expand_keys(const hipkern_list1_table *t, const uint32_t *keys,
                                  int64_t n, double *out, void *s) {
  (void)t; (void)keys; (void)n; (void)out; (void)s; NT;
}

int32_t hipkern_list1_classify_pairs(const hipkern_list1_tree *tree, int64_t tb, int64_t te,
                                     const uint32_t *lt, int32_t nc, int64_t nk, uint32_t *kc,
                                     uint8_t *pc, hipkern_list1_pair_report *rep, void *s) {
  (void)tree; (void)tb; (void)te; (void)lt; (void)nc; (void)nk; (void)kc; (void)pc; (void)rep;
  (void)s; NT;
}

int32_t hipkern_list1_group_pairs(const hipkern_list1_tree *tree, int64_t pb, int64_t pe,
                                  const uint32_t *lt, int32_t nc, int64_t nk, const uint8_t *pc,
                                  uint32_t *kn, uint32_t *tp, int64_t ntp, void *s) {
  (void)tree; (void)pb; (void)pe; (void)lt; (void)nc; (void)nk; (void)pc; (void)kn; (void)tp;
  (void)ntp; (void)s; NT;
}

int32_t hipkern_list1_tiled_tensor_cores(int32_t *available) {
  if (available) *available = 0;
  NT;
}

/* A property of the ABI, not of a device: the widths of list1_tiled.hip's
 * kTiledTargets, kStagedTargets and kFmaTargets, the same on every
 * platform. */
int32_t hipkern_list1_tile_targets(int32_t kernel, int32_t *targets_per_tile) {
  int32_t b = 0;
  switch (kernel) {
    case HIPKERN_LIST1_TILED: b = HIPKERN_L1_TILED_TARGETS; break;
    case HIPKERN_LIST1_STAGED: b = HIPKERN_L1_STAGED_TARGETS; break;
    case HIPKERN_LIST1_TILED_FMA: b = HIPKERN_L1_FMA_TARGETS; break;
    default: break;
  }
  if (b == 0 || !targets_per_tile) return HIPKERN_ERROR_INVALID_ARGUMENT;
  *targets_per_tile = b;
  return HIPKERN_SUCCESS;
}

int32_t hipkern_psf_hub_create(const hipkern_psf_hub_config *c, hipkern_psf_hub **h) {
  (void)c;
  if (h) *h = 0;
  NT;
}
int32_t hipkern_psf_producer_create(hipkern_psf_hub *h, hipkern_psf_producer **p) {
  (void)h;
  if (p) *p = 0;
  NT;
}
int32_t hipkern_psf_producer_push(hipkern_psf_producer *p, const double *e, int64_t n,
                                  int64_t *bad) {
  (void)p, (void)e, (void)n;
  if (bad) *bad = -1;
  NT;
}
int32_t hipkern_psf_producer_flush(hipkern_psf_producer *p, int64_t *bad) {
  (void)p;
  if (bad) *bad = -1;
  NT;
}
int32_t hipkern_psf_producer_destroy(hipkern_psf_producer *p) { return p ? HIPKERN_ERROR_NO_TOOLCHAIN : HIPKERN_SUCCESS; }
int32_t hipkern_psf_hub_finish(hipkern_psf_hub *h, hipkern_psf_hub_stats *s) { (void)h, (void)s; NT; }
int32_t hipkern_psf_hub_destroy(hipkern_psf_hub *h) { return h ? HIPKERN_ERROR_NO_TOOLCHAIN : HIPKERN_SUCCESS; }
