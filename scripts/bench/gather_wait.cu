// Benchmark (not a test), issue 48: the wait of a split space's gather for a place, outside
// felab. A small kernel (the boundary cells: 300 blocks that spin D us) on a stream of the
// highest priority, a gather queued behind it (82 blocks of 256 threads, 21,000 indexed
// reads), then a kernel that fills the device for 8 waves (the interior) on another stream, as
// engine/operator/operator-action.c queues them. The host waits for the small kernel's event,
// then times its wait for the gather's ("gathered"), and the gather's end from the interior's
// launch. Plain (follow 0) the gather asks for places when the small kernel ends, and the
// interior holds them all; launched with programmatic stream serialization (follow 1: the small
// kernel's blocks run griddepcontrol.launch_dependents as they begin, the gather
// griddepcontrol.wait) its blocks are placed while the small kernel runs; follow 2: the same
// without the event between the two. For three interiors (what bounds their blocks a
// multiprocessor), two block times D and three host delays between the gather's launch and the
// interior's. docs/benchmarks.md section 8.
//   nvcc -arch=sm_90 -O2 -o gather_wait scripts/bench/gather_wait.cu && ./gather_wait
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(x)                                                                            \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::printf("%s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__);              \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

// a block that holds its place for `cycles`, and with `lets` lets a following launch in first
__global__ void hold(long long cycles, int lets, float *sink)
{
  extern __shared__ float scratch[];
  if (lets) asm volatile("griddepcontrol.launch_dependents;");
  scratch[threadIdx.x] = (float)threadIdx.x;
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  __syncthreads();
  if (threadIdx.x == 0 && scratch[1] < 0) sink[blockIdx.x] = scratch[0];
}

__global__ void gather(const double *x, const int *at, double *out, int n, int follows)
{
  if (follows) asm volatile("griddepcontrol.wait;" ::: "memory");
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[at[i]];
}

static double now()
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void busy(double us)
{
  for (const double t = now(); (now() - t) * 1e6 < us;) {
  }
}

int main()
{
  CHECK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int khz = 0, least = 0, greatest = 0;
  CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  const double ghz = khz * 1e-6;
  const int sms = prop.multiProcessorCount, n = 21000;
  cudaStream_t main_q, side;
  CHECK(cudaStreamCreateWithFlags(&main_q, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithPriority(&side, cudaStreamNonBlocking, greatest));
  cudaEvent_t forked, cells, gathered;
  CHECK(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&cells, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&gathered, cudaEventDisableTiming));
  double *x, *out;
  int *at;
  float *sink;
  CHECK(cudaMalloc(&x, 8 << 20));
  CHECK(cudaMalloc(&out, 8 * n));
  CHECK(cudaMalloc(&at, 4 * n));
  CHECK(cudaMalloc(&sink, 1 << 22));
  std::vector<int> h(n);
  for (int i = 0; i < n; i++) h[i] = (int)((37LL * i) % (1 << 20));
  CHECK(cudaMemcpy(at, h.data(), 4 * n, cudaMemcpyHostToDevice));
  CHECK(cudaFuncSetAttribute(hold, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  std::printf("%s, %d SMs, %.2f GHz\n", prop.name, sms, ghz);
  std::printf("%-30s %5s %6s %6s | gathered us: median (quartiles) least | from the interior's "
              "launch: median\n", "interior", "D us", "delay", "follow");
  struct shape {
    const char *name;
    int threads, shared, resident;
  } shapes[] = {{"128 threads, 16 KB (12 an SM)", 128, 16 * 1024, 12},
                {"256 threads, 8 KB (8: threads)", 256, 8 * 1024, 8},
                {"64 threads, 48 KB (4 an SM)", 64, 48 * 1024, 4}};
  for (const shape &s : shapes)
    for (double D : {12.0, 25.0})
      for (double delay : {0.0, 6.0, 12.0})
        for (int follow = 0; follow < 3; follow++) {
          const long long cycles = (long long)(D * 1e3 * ghz);
          std::vector<double> g, from;
          for (int it = 0; it < 120; it++) {
            CHECK(cudaEventRecord(forked, main_q));
            CHECK(cudaStreamWaitEvent(side, forked, 0));
            hold<<<300, s.threads, s.shared, side>>>(cycles, follow > 0, sink);
            if (follow < 2) CHECK(cudaEventRecord(cells, side));
            cudaLaunchAttribute attr[1];
            attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attr[0].val.programmaticStreamSerializationAllowed = 1;
            cudaLaunchConfig_t lc = {};
            lc.gridDim = dim3((n + 255) / 256);
            lc.blockDim = dim3(256);
            lc.stream = side;
            lc.attrs = attr;
            lc.numAttrs = follow ? 1 : 0;
            CHECK(cudaLaunchKernelEx(&lc, gather, (const double *)x, (const int *)at, out, n,
                                     follow > 0));
            CHECK(cudaEventRecord(gathered, side));
            if (delay > 0) busy(delay);
            hold<<<sms * s.resident * 8, s.threads, s.shared, main_q>>>(cycles, 0, sink);
            const double launched = now();
            double t0 = launched;
            if (follow < 2) {
              CHECK(cudaEventSynchronize(cells));
              t0 = now();
            }
            CHECK(cudaEventSynchronize(gathered));
            const double t1 = now();
            CHECK(cudaDeviceSynchronize());
            if (it >= 20) g.push_back((t1 - t0) * 1e6), from.push_back((t1 - launched) * 1e6);
          }
          std::sort(g.begin(), g.end());
          std::sort(from.begin(), from.end());
          const size_t m = g.size();
          std::printf("%-30s %5.0f %6.0f %6d | %6.1f (%5.1f-%5.1f) %5.1f | %6.1f\n", s.name, D,
                      delay, follow, g[m / 2], g[m / 4], g[3 * m / 4], g[0], from[m / 2]);
        }
  return 0;
}
