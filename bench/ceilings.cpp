// kiln_ceilings: the machine's ceilings that model timings are read against.
//
//   kiln_ceilings [THREADS]
//
// prints one JSON object on stdout:
//   stream_triad_gbs  STREAM triad a[i] = b[i] + s * c[i] over three 128 MiB
//                     float64 arrays (far beyond any last-level cache),
//                     OpenMP static schedule, best of 10, counted as 3 arrays
//                     of traffic per pass (STREAM's convention: no
//                     write-allocate traffic counted)
//   gemm_gflops       oneDNN dnnl_sgemm, f32, row-major, M = N = K = 2048,
//                     best of 5 after one warm-up call
// at THREADS OpenMP threads (default: OpenMP's default). oneDNN in Debian's
// libdnnl is built on the same libgomp, so omp_set_num_threads governs both.
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double streamTriad(int reps, size_t *bytesOut) {
  const size_t n = (size_t{128} << 20) / sizeof(double);
  // Page-faulting the arrays happens in parallel first touch, outside the timing.
  double *a = static_cast<double *>(std::aligned_alloc(64, n * sizeof(double)));
  double *b = static_cast<double *>(std::aligned_alloc(64, n * sizeof(double)));
  double *c = static_cast<double *>(std::aligned_alloc(64, n * sizeof(double)));
  if (!a || !b || !c) {
    std::fprintf(stderr, "kiln_ceilings: out of memory\n");
    std::exit(1);
  }
  const long ln = static_cast<long>(n);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < ln; ++i) {
    a[i] = 0.0;
    b[i] = 1.0;
    c[i] = 2.0;
  }
  const double s = 3.0;
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    double t0 = now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < ln; ++i)
      a[i] = b[i] + s * c[i];
    best = std::min(best, now() - t0);
  }
  // Keep the result observable so the loop is not removed.
  volatile double sink = a[n / 2];
  (void)sink;
  std::free(a);
  std::free(b);
  std::free(c);
  *bytesOut = 3 * n * sizeof(double);
  return best;
}

double gemm(int reps, dnnl_dim_t m, int *statusOut) {
  std::vector<float> A(static_cast<size_t>(m * m)), B(A.size()), C(A.size());
  for (size_t i = 0; i < A.size(); ++i) {
    A[i] = static_cast<float>((i * 7) % 13) * 0.01f;
    B[i] = static_cast<float>((i * 5) % 11) * 0.01f;
  }
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {
    double t0 = now();
    dnnl_status_t st =
        dnnl_sgemm('N', 'N', m, m, m, 1.0f, A.data(), m, B.data(), m, 0.0f, C.data(), m);
    double t = now() - t0;
    if (st != dnnl_success) {
      *statusOut = static_cast<int>(st);
      return 0;
    }
    if (r > 0)
      best = std::min(best, t); // the first call is the warm-up
  }
  *statusOut = 0;
  return best;
}

} // namespace

int main(int argc, char **argv) {
  if (argc > 2 ||
      (argc == 2 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0))) {
    std::fprintf(stderr, "usage: kiln_ceilings [THREADS]\n");
    return argc == 2 ? 0 : 2;
  }
  if (argc == 2) {
    char *end = nullptr;
    long t = std::strtol(argv[1], &end, 10);
    if (!end || *end || t < 1 || t > 4096) {
      std::fprintf(stderr, "kiln_ceilings: THREADS must be an integer in [1, 4096], got '%s'\n",
                   argv[1]);
      return 2;
    }
    omp_set_num_threads(static_cast<int>(t));
  }
  int threads = omp_get_max_threads();

  size_t bytes = 0;
  double tStream = streamTriad(10, &bytes);
  const dnnl_dim_t m = 2048;
  int status = 0;
  double tGemm = gemm(5, m, &status);
  if (status != 0) {
    std::fprintf(stderr, "kiln_ceilings: dnnl_sgemm failed with status %d\n", status);
    return 1;
  }
  double flops = 2.0 * static_cast<double>(m) * m * m;
  std::printf("{\"threads\": %d, \"stream_triad_gbs\": %.2f, \"stream_bytes\": %zu, "
              "\"stream_best_s\": %.6f, "
              "\"gemm_gflops\": %.2f, \"gemm_mnk\": %ld, \"gemm_best_s\": %.6f}\n",
              threads, static_cast<double>(bytes) / tStream / 1e9, bytes, tStream,
              flops / tGemm / 1e9, static_cast<long>(m), tGemm);
  return 0;
}
