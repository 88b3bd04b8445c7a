// Probe for ranks sharing one GPU (issue: several ranks on one GPU).
//
// Part 1: which driver calls wait for a kernel that runs on ANOTHER stream
// of the same context. A rank's host thread must never make such a call
// while a peer rank's kernel spins waiting for this rank's next kernel, or
// both wait until the kernel times out.
//
// Part 2: co-residency. R "ranks" each launch a grid on their own stream;
// every block waits until all R grids' blocks have arrived. Checks that the
// driver's occupancy figure (blocks per SM x SMs) is what fits at once, and
// what programmatic dependent launch (a rank's next kernel resident early)
// does to that budget.
//
// Build: nvcc -O2 -arch=sm_90 -o shared_gpu shared_gpu.cu -lcuda
//        nvcc -cubin -arch=sm_90 -o k2.cubin shared_gpu.cu -DK2_ONLY
// Run:   ./shared_gpu k2.cubin [part3]
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

__device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __global__ void k2(unsigned* p) {
  if (p) atomicAdd(p, 1u);
}

#ifndef K2_ONLY
__global__ void spin(volatile int* flag, volatile int* started, unsigned long long timeout_ns,
                     int* timed_out) {
  *started = 1;
  __threadfence_system();
  unsigned long long t0 = gtimer();
  while (*flag == 0) {
    if (gtimer() - t0 > timeout_ns) {
      *timed_out = 1;
      break;
    }
  }
}

__global__ void never_launched_before(int* p) {
  if (p) *p = 7;
}

__global__ void arrive(unsigned* counter, unsigned target, unsigned long long timeout_ns,
                       unsigned* fails) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (threadIdx.x == 0) {
    atomicAdd(counter, 1u);
    unsigned long long t0 = gtimer();
    while (atomicAdd(counter, 0u) < target) {
      if (gtimer() - t0 > timeout_ns) {
        atomicAdd(fails, 1u);
        break;
      }
    }
  }
  __syncthreads();
}

#define CK(x)                                                                      \
  do {                                                                             \
    CUresult r_ = (x);                                                             \
    if (r_ != CUDA_SUCCESS) {                                                      \
      const char* s_;                                                              \
      cuGetErrorString(r_, &s_);                                                   \
      printf("  %s failed: %s (line %d)\n", #x, s_, __LINE__);                     \
    }                                                                              \
  } while (0)
#define RK(x)                                                                      \
  do {                                                                             \
    cudaError_t r_ = (x);                                                          \
    if (r_ != cudaSuccess) printf("  %s failed: %s\n", #x, cudaGetErrorString(r_)); \
  } while (0)

static volatile int *flag, *started;
static int* timed_out;
static CUstream sA, sB;
static CUdevice dev;
static size_t gran;

static double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Runs `op` while a kernel spins on stream A for up to 1.5 s.
static void measure(const char* name, const std::function<void()>& op) {
  *flag = 0;
  *started = 0;
  *timed_out = 0;
  spin<<<1, 32, 0, (cudaStream_t)sA>>>(flag, started, 1500000000ull, timed_out);
  double t = now_ms();
  while (*started == 0 && now_ms() - t < 5000) {
  }
  double t0 = now_ms();
  op();
  double el = now_ms() - t0;
  *flag = 1;
  cuStreamSynchronize(sA);
  printf("%-58s %8.1f ms  %s\n", name, el,
         el > 1000 || *timed_out ? "WAITS for the other stream's kernel" : "independent");
  fflush(stdout);
}

struct Vmm {
  CUmemGenericAllocationHandle h;
  CUdeviceptr p;
  size_t size;
};

static CUmemAllocationProp prop() {
  CUmemAllocationProp pr;
  memset(&pr, 0, sizeof pr);
  pr.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  pr.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  pr.location.id = 0;
  pr.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return pr;
}

static Vmm vmm_map(CUmemGenericAllocationHandle h, size_t size) {
  Vmm v{h, 0, size};
  CK(cuMemAddressReserve(&v.p, size, gran, 0, 0));
  CK(cuMemMap(v.p, size, 0, h, 0));
  CUmemAccessDesc d;
  memset(&d, 0, sizeof d);
  d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  d.location.id = 0;
  d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cuMemSetAccess(v.p, size, &d, 1));
  return v;
}

static Vmm vmm_new(size_t size) {
  CUmemAllocationProp pr = prop();
  CUmemGenericAllocationHandle h;
  CK(cuMemCreate(&h, size, &pr, 0));
  return vmm_map(h, size);
}

static void vmm_free(Vmm v) {
  CK(cuMemUnmap(v.p, v.size));
  CK(cuMemRelease(v.h));
  CK(cuMemAddressFree(v.p, v.size));
}

// Part 2: `ranks` grids of `grid` blocks x `threads`, each on its own stream;
// with `pdl`, each rank enqueues two such kernels back to back (the second
// with programmatic stream serialization), ranks after the first start 100
// ms late. Returns how many blocks timed out.
static unsigned coresident(int ranks, int grid, int threads, bool pdl) {
  unsigned *counters, *fails;
  RK(cudaMalloc(&counters, 2 * sizeof(unsigned)));
  RK(cudaMalloc(&fails, sizeof(unsigned)));
  RK(cudaMemset(counters, 0, 2 * sizeof(unsigned)));
  RK(cudaMemset(fails, 0, sizeof(unsigned)));
  RK(cudaDeviceSynchronize());
  std::vector<cudaStream_t> s(ranks);
  for (auto& x : s) RK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  unsigned target = (unsigned)(ranks * grid);
  unsigned long long to = 1000000000ull;
  auto launch = [&](cudaStream_t st, int k, bool with_pdl) {
    cudaLaunchConfig_t c = {};
    c.gridDim = dim3(grid);
    c.blockDim = dim3(threads);
    c.stream = st;
    cudaLaunchAttribute a[1];
    a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    a[0].val.programmaticStreamSerializationAllowed = 1;
    c.attrs = a;
    c.numAttrs = with_pdl ? 1 : 0;
    RK(cudaLaunchKernelEx(&c, arrive, counters + k, target, to, fails));
  };
  // Rank 0 first, with its next kernel queued behind it.
  launch(s[0], 0, false);
  if (pdl) launch(s[0], 1, true);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (int r = 1; r < ranks; r++) {
    launch(s[r], 0, false);
    if (pdl) launch(s[r], 1, true);
  }
  RK(cudaDeviceSynchronize());
  unsigned f = 0;
  RK(cudaMemcpy(&f, fails, sizeof f, cudaMemcpyDeviceToHost));
  for (auto& x : s) cudaStreamDestroy(x);
  cudaFree(counters);
  cudaFree(fails);
  return f;
}

// Part 3: does a module load on one thread hold up another thread's launch
// on the same device? Thread L starts a kernel that spins until a "setter"
// kernel (launched by thread P on another stream) runs, then loads a
// module; thread P launches the setter while the load waits.
static void load_vs_launch(const std::vector<char>& cubin) {
  CUfunction setter;
  CUmodule m;
  CK(cuModuleLoadData(&m, cubin.data()));
  CK(cuModuleGetFunction(&setter, m, "k2"));
  *flag = 0;
  *started = 0;
  *timed_out = 0;
  spin<<<1, 32, 0, (cudaStream_t)sA>>>(flag, started, 1500000000ull, timed_out);
  double t = now_ms();
  while (*started == 0 && now_ms() - t < 5000) {
  }
  double launch_ms = -1, load_ms = -1;
  std::thread p([&] {
    cuCtxSetCurrent(nullptr);
    CUcontext c;
    cuDevicePrimaryCtxRetain(&c, dev);
    cuCtxSetCurrent(c);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CUdeviceptr fp = (CUdeviceptr)flag;
    void* args[] = {&fp};
    double t0 = now_ms();
    CK(cuLaunchKernel(setter, 1, 1, 1, 32, 1, 1, 0, sB, args, nullptr));
    launch_ms = now_ms() - t0;
  });
  CUmodule m2;
  double t0 = now_ms();
  CK(cuModuleLoadData(&m2, cubin.data()));
  load_ms = now_ms() - t0;
  p.join();
  cuStreamSynchronize(sA);
  cuStreamSynchronize(sB);
  printf("load while a peer's kernel waits for another thread's launch: load %.1f ms, "
         "the other thread's launch %.1f ms, spinner %s\n",
         load_ms, launch_ms, *timed_out ? "TIMED OUT (the launch was held up)" : "released");
}

int main(int argc, char** argv) {
  RK(cudaSetDevice(0));
  RK(cudaFree(0));
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuCtxGetCurrent(&ctx));
  CK(cuStreamCreate(&sA, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&sB, CU_STREAM_NON_BLOCKING));
  RK(cudaHostAlloc((void**)&flag, 4096, cudaHostAllocMapped));
  started = flag + 1;
  timed_out = (int*)(flag + 2);
  CUmemAllocationProp pr = prop();
  CK(cuMemGetAllocationGranularity(&gran, &pr, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  char* env = getenv("CUDA_MODULE_LOADING");
  printf("CUDA_MODULE_LOADING=%s, VMM granularity %zu\n", env ? env : "(unset)", gran);
  int drv;
  cuDriverGetVersion(&drv);
  printf("driver API version %d\n", drv);

  // Warm-up (loads spin).
  measure("nothing (control)", [] {});
  if (argc > 2 && strcmp(argv[2], "part3") == 0) {
    std::vector<char> cubin;
    FILE* f = fopen(argv[1], "rb");
    if (!f) return 1;
    fseek(f, 0, SEEK_END);
    cubin.resize(ftell(f));
    fseek(f, 0, SEEK_SET);
    if (fread(cubin.data(), 1, cubin.size(), f) != cubin.size()) return 1;
    fclose(f);
    load_vs_launch(cubin);
    return 0;
  }
  measure("cuCtxSynchronize (control: must wait)", [] { CK(cuCtxSynchronize()); });

  CUdeviceptr d1 = 0, d2 = 0;
  CK(cuMemAlloc(&d2, 4096));
  measure("cuMemAlloc 4 KiB", [&] { CK(cuMemAlloc(&d1, 4096)); });
  measure("cuMemFree (unused 4 KiB)", [&] { CK(cuMemFree(d2)); });
  CK(cuMemAlloc(&d2, 64 << 20));
  measure("cuMemFree (unused 64 MiB)", [&] { CK(cuMemFree(d2)); });
  measure("cuMemAllocAsync+cuMemFreeAsync on B + sync B", [&] {
    CUdeviceptr p;
    CK(cuMemAllocAsync(&p, 4096, sB));
    CK(cuMemFreeAsync(p, sB));
    CK(cuStreamSynchronize(sB));
  });
  Vmm pre = vmm_new(gran);
  Vmm pre2 = vmm_new(gran);
  measure("VMM create+reserve+map+setaccess", [&] {
    Vmm v = vmm_new(gran);
    pre2 = v;
  });
  measure("VMM unmap+release+addressfree (unused)", [&] { vmm_free(pre); });
  Vmm pre3 = vmm_new(gran);
  measure("cuMemUnmap alone (unused)", [&] { CK(cuMemUnmap(pre3.p, pre3.size)); });
  measure("cuMemRelease alone", [&] { CK(cuMemRelease(pre3.h)); });
  measure("cuMemAddressFree alone", [&] { CK(cuMemAddressFree(pre3.p, pre3.size)); });
  measure("cuMemRetainAllocationHandle + map again (same device)", [&] {
    CUmemGenericAllocationHandle h;
    CK(cuMemRetainAllocationHandle(&h, (void*)pre2.p));
    Vmm v = vmm_map(h, gran);
    vmm_free(v);
  });
  vmm_free(pre2);

  // Modules.
  std::vector<char> cubin;
  if (argc > 1) {
    FILE* f = fopen(argv[1], "rb");
    if (f) {
      fseek(f, 0, SEEK_END);
      cubin.resize(ftell(f));
      fseek(f, 0, SEEK_SET);
      if (fread(cubin.data(), 1, cubin.size(), f) != cubin.size()) cubin.clear();
      fclose(f);
    }
  }
  CUmodule m1 = nullptr, m2 = nullptr, m3 = nullptr;
  CUfunction f2 = nullptr, f3 = nullptr;
  if (!cubin.empty()) {
    measure("cuModuleLoadData (cubin)", [&] { CK(cuModuleLoadData(&m1, cubin.data())); });
    CK(cuModuleLoadData(&m2, cubin.data()));
    measure("cuModuleGetFunction (module loaded before)", [&] {
      CK(cuModuleGetFunction(&f2, m2, "k2"));
    });
    measure("first launch of that function on B + sync B", [&] {
      void* args[] = {nullptr};
      CUdeviceptr z = 0;
      args[0] = &z;
      CK(cuLaunchKernel(f2, 1, 1, 1, 32, 1, 1, 0, sB, args, nullptr));
      CK(cuStreamSynchronize(sB));
    });
    CK(cuModuleLoadData(&m3, cubin.data()));
    CK(cuModuleGetFunction(&f3, m3, "k2"));
    measure("cuFuncLoad", [&] { CK(cuFuncLoad(f3)); });
    measure("cuModuleUnload (not in use)", [&] { CK(cuModuleUnload(m1)); });
  } else {
    printf("no cubin given: module probes skipped\n");
  }
  measure("first runtime launch of a never-launched kernel on B", [&] {
    never_launched_before<<<1, 32, 0, (cudaStream_t)sB>>>(nullptr);
    CK(cuStreamSynchronize(sB));
  });
  measure("cuStreamCreate + cuStreamDestroy", [&] {
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamDestroy(s));
  });
  static char host[4096];
  measure("cuMemcpyHtoD (synchronous API, pageable)", [&] { CK(cuMemcpyHtoD(d1, host, 4096)); });
  measure("cuMemcpyDtoH (synchronous API, pageable)", [&] { CK(cuMemcpyDtoH(host, d1, 4096)); });
  measure("cuMemcpyHtoDAsync on B + sync B (pageable)", [&] {
    CK(cuMemcpyHtoDAsync(d1, host, 4096, sB));
    CK(cuStreamSynchronize(sB));
  });
  measure("cuMemsetD8Async on B + sync B", [&] {
    CK(cuMemsetD8Async(d1, 0, 4096, sB));
    CK(cuStreamSynchronize(sB));
  });
  measure("cuMemHostAlloc + cuMemFreeHost", [&] {
    void* p;
    CK(cuMemHostAlloc(&p, 4096, 0));
    CK(cuMemFreeHost(p));
  });
  measure("event create/record on B/synchronize/destroy", [&] {
    CUevent e;
    CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(e, sB));
    CK(cuEventSynchronize(e));
    CK(cuEventDestroy(e));
  });
  measure("cuMemGetInfo", [&] {
    size_t a, b;
    CK(cuMemGetInfo(&a, &b));
  });
  measure("cuOccupancyMaxActiveBlocksPerMultiprocessor", [&] {
    int n;
    if (f2) CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f2, 256, 0));
  });
  measure("graph: capture (thread-local) on B, instantiate, launch, sync B", [&] {
    if (!f2) return;
    CK(cuStreamBeginCapture(sB, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CUdeviceptr z = 0;
    void* args[] = {&z};
    CK(cuLaunchKernel(f2, 1, 1, 1, 32, 1, 1, 0, sB, args, nullptr));
    CUgraph g;
    CK(cuStreamEndCapture(sB, &g));
    CUgraphExec ge;
    CK(cuGraphInstantiate(&ge, g, 0));
    CK(cuGraphLaunch(ge, sB));
    CK(cuStreamSynchronize(sB));
    CK(cuGraphExecDestroy(ge));
    CK(cuGraphDestroy(g));
  });
  measure("cuMemFree of memory from cuMemAlloc (4 KiB, again)", [&] { CK(cuMemFree(d1)); });

  // Part 2.
  int sms = 0;
  RK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  printf("\nco-residency: %d SMs\n", sms);
  printf("%-6s %-8s %-8s %-10s %-6s %-6s %s\n", "ranks", "threads", "occ/SM", "capacity", "grid",
         "pdl", "blocks timed out");
  for (int threads : {128, 512, 1024}) {
    int occ = 0;
    RK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, arrive, threads, 0));
    int cap = occ * sms;
    for (int ranks : {2, 4, 8}) {
      struct Case {
        int grid;
        bool pdl;
      } cases[] = {{cap / ranks, false},
                   {cap / ranks + 1, false},
                   {cap / ranks, true},
                   {cap / (2 * ranks), true}};
      for (auto c : cases) {
        unsigned f = coresident(ranks, c.grid, threads, c.pdl);
        printf("%-6d %-8d %-8d %-10d %-6d %-6s %u%s\n", ranks, threads, occ, cap, c.grid,
               c.pdl ? "yes" : "no", f, f ? "  (not all resident)" : "");
        fflush(stdout);
      }
    }
  }
  return 0;
}
#endif
