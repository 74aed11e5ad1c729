-- felab's device table: datasheet figures for the devices felab can predict for.
--
-- What it is for
--   perf.predict(A, {device = "A100", ...}) and perf.compare{...} answer "what if this ran
--   on device X?" without having device X. felab measures (calibrates) the ceilings of the
--   device it is running on, then scales them by the ratio of datasheet figures between the
--   target entry here and the entry that matches the present device:
--     DRAM streaming       by  dram_gbs
--     FMA / arithmetic     by  fp64_gflops (double) or fp32_gflops (single)
--     shared memory / L1   by  units * clock_ghz * shared_bytes_per_clock
--     kernel launches      unchanged (launch latency is a host/driver cost, not a datasheet one)
--   So only ratios matter, but every figure must still be a real vendor figure so that the
--   ratios mean something. Capacities (dram_gb, l2_mb, shared_kb, regs_per_unit,
--   max_threads_per_unit) are used for fit / occupancy warnings, not for scaling.
--
-- Fields of an entry (all numbers are peaks for the part named in `variant`)
--   name                  short name used at the prompt ("A100", "H100 PCIe", ...)
--   match                 lowercase substrings of the driver's device name (CUDA/HIP name, or
--                         the CPU's /proc/cpuinfo "model name"); plain substring search, not a
--                         Lua pattern. The FIRST entry in array order with any matching string
--                         wins, so a more specific entry must come before a less specific one
--                         (H100 PCIe before H100).
--   kind                  "gpu" or "cpu"
--   vendor                "NVIDIA", "AMD", ...
--   variant               the exact part the figures are for ("H100 SXM5 80GB", ...)
--   units                 SMs (NVIDIA), CUs (AMD GPU), cores (CPU)
--   gcds                  (AMD MI250X only) graphics compute dies in the package; the figures
--                         are for the whole package, but one process sees ONE GCD, i.e. a
--                         1/gcds share of units, dram_gbs, dram_gb, l2_mb and the FLOP rates
--   clock_ghz             clock (GHz) the peak figures are computed at (NVIDIA/AMD: boost;
--                         CPU: the all-core clock used in the derivation)
--   dram_gbs              memory bandwidth, GB/s (10^9 bytes/s)
--   dram_gb               memory capacity, GB
--   l2_mb                 last-level on-chip cache, MB (GPU: L2; CPU: L3)
--   infinity_cache_mb     (AMD MI300X only) the 256 MB Infinity Cache (MALL) behind the L2
--   fp64_gflops           vector FP64 peak, GFLOP/s (no tensor/matrix units)
--   fp32_gflops           vector FP32 peak, GFLOP/s (not tensor, matrix or sparse figures)
--   fp64_matrix_gflops    FP64 tensor-core / matrix-core peak, GFLOP/s; nil where the part has
--                         none
--   shared_kb             largest shared memory (LDS) one SM/CU can hold, KB (CPU: L1D/core)
--   shared_bytes_per_clock shared-memory bytes per clock per SM/CU (NVIDIA Volta+: 32 banks x
--                         4 B = 128; AMD CDNA LDS: 128; CPU: L1 load bytes/clock/core)
--   regs_per_unit         32-bit registers per SM/CU (nil for a CPU)
--   max_threads_per_unit  resident threads per SM/CU (CPU: hardware threads per core)
--   warp                  threads per warp (NVIDIA 32) / wavefront (AMD 64); CPU: double
--                         lanes of one SIMD register (AVX-512: 8)
--   sources               URLs of the datasheets/whitepapers used, each with a note of what
--                         came from where; "(not confirmed here)" marks a figure that is the
--                         vendor's published figure as we know it but that was not re-checked
--                         against the document when this file was written
--
-- Adding a device
--   Copy the entry nearest to it, change every field, and fill `sources` with the vendor
--   documents you took the numbers from (datasheet, whitepaper, product page; never a
--   benchmark). Put it BEFORE any entry whose `match` strings would also match its device
--   name. Use nil only where the vendor publishes no figure, and say so in a comment.
--   Check it loads:
--     lua5.4 -e 'for _, d in ipairs(dofile("shell/lib/devices.lua")) do print(d.name) end'

return {
  -- NVIDIA ------------------------------------------------------------------------------

  {
    name = "V100",
    match = {"v100"},  -- "Tesla V100-SXM2-32GB"; PCIe/16GB parts fall back to this entry
    kind = "gpu",
    vendor = "NVIDIA",
    variant = "V100 SXM2 32GB",
    units = 80,
    clock_ghz = 1.53,
    dram_gbs = 900,
    dram_gb = 32,
    l2_mb = 6,
    fp64_gflops = 7800,
    fp32_gflops = 15700,
    fp64_matrix_gflops = nil,  -- Volta tensor cores have no FP64 mode
    shared_kb = 96,
    shared_bytes_per_clock = 128,
    regs_per_unit = 65536,
    max_threads_per_unit = 2048,
    warp = 32,
    sources = {
      "https://www.nvidia.com/en-us/data-center/v100/ : V100 SXM2 datasheet: 7.8 TF FP64,"
        .. " 15.7 TF FP32, 900 GB/s, 32 GB",
      "https://images.nvidia.com/content/volta-architecture/pdf/volta-architecture-"
        .. "whitepaper.pdf : 80 SMs, 2560 FP64 cores, L2 6144 KB, shared memory configurable"
        .. " up to 96 KB/SM, 256 KB register file/SM (= 65536 x 32-bit), 1530 MHz SXM2"
        .. " boost (2560 x 2 x 1.53 GHz = 7.8 TF)",
      "https://docs.nvidia.com/cuda/cuda-c-programming-guide/ : 2048 threads/SM for cc 7.0,"
        .. " 32 banks x 32 bit per clock shared memory (not confirmed here)",
    },
  },

  {
    name = "A100",
    match = {"a100"},  -- "NVIDIA A100-SXM4-80GB"; 40GB / PCIe parts fall back to this entry
    kind = "gpu",
    vendor = "NVIDIA",
    variant = "A100 SXM4 80GB",
    units = 108,
    clock_ghz = 1.41,
    dram_gbs = 2039,
    dram_gb = 80,
    l2_mb = 40,
    fp64_gflops = 9700,
    fp32_gflops = 19500,
    fp64_matrix_gflops = 19500,
    shared_kb = 164,
    shared_bytes_per_clock = 128,
    regs_per_unit = 65536,
    max_threads_per_unit = 2048,
    warp = 32,
    sources = {
      "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-"
        .. "datasheet-us-nvidia-1758950-r4-web.pdf : FP64 9.7 TF, FP64 Tensor Core 19.5 TF,"
        .. " FP32 19.5 TF, 80GB SXM 2,039 GB/s",
      "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-"
        .. "architecture-whitepaper.pdf : 108 SMs, 1410 MHz boost, L2 40960 KB, shared memory"
        .. " up to 164 KB/SM, 256 KB register file/SM, 2048 threads/SM",
    },
  },

  {
    name = "H100 PCIe",
    match = {"h100 pcie"},  -- "NVIDIA H100 PCIe"; must stay before "H100"
    kind = "gpu",
    vendor = "NVIDIA",
    variant = "H100 PCIe 80GB",
    units = 114,
    clock_ghz = 1.755,
    dram_gbs = 2000,
    dram_gb = 80,
    l2_mb = 50,
    fp64_gflops = 25600,         -- datasheet rounds to 26 TF
    fp32_gflops = 51200,         -- datasheet rounds to 51 TF
    fp64_matrix_gflops = 51200,  -- datasheet rounds to 51 TF
    shared_kb = 228,
    shared_bytes_per_clock = 128,
    regs_per_unit = 65536,
    max_threads_per_unit = 2048,
    warp = 32,
    sources = {
      "https://www.nvidia.com/en-us/data-center/h100/ : H100 datasheet, PCIe column: FP64"
        .. " 26 TF, FP64 Tensor Core 51 TF, FP32 51 TF, 80 GB, 2 TB/s",
      "NVIDIA H100 PCIe Product Brief PB-11133-001 : 350 W card, memory bandwidth"
        .. " 'greater than 2,000 GB/s' (2000 used)",
      "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper : 114 SMs,"
        .. " L2 50 MB, shared memory configurable up to 228 KB/SM, register file 256 KB/SM;"
        .. " 25.6 / 51.2 / 51.2 TF at 1755 MHz boost (114 x 64 FP64 x 2 x 1.755 GHz)"
        .. " (clock not confirmed here)",
    },
  },

  {
    name = "H100",
    -- "NVIDIA H100 80GB HBM3" is the SXM5 part. "nvidia h100" (not "h100") keeps
    -- "NVIDIA GH200 ..." out; an "NVIDIA H100 NVL" also lands here (approximate).
    match = {"h100 80gb hbm3", "h100 sxm", "nvidia h100"},
    kind = "gpu",
    vendor = "NVIDIA",
    variant = "H100 SXM5 80GB",
    units = 132,
    clock_ghz = 1.98,            -- the FP64/FP32 peaks are at 1.98 GHz (tensor FP16/FP8: 1.83)
    dram_gbs = 3350,
    dram_gb = 80,
    l2_mb = 50,
    fp64_gflops = 33500,         -- datasheet rounds to 34 TF
    fp32_gflops = 66900,         -- datasheet rounds to 67 TF
    fp64_matrix_gflops = 66900,  -- datasheet rounds to 67 TF
    shared_kb = 228,
    shared_bytes_per_clock = 128,
    regs_per_unit = 65536,
    max_threads_per_unit = 2048,
    warp = 32,
    sources = {
      "https://www.nvidia.com/en-us/data-center/h100/ : H100 datasheet, SXM column: FP64"
        .. " 34 TF, FP64 Tensor Core 67 TF, FP32 67 TF, 80 GB, 3.35 TB/s",
      "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper : 132 SMs,"
        .. " 128 FP32 + 64 FP64 lanes/SM, L2 50 MB, shared memory up to 228 KB/SM, register"
        .. " file 256 KB/SM, 2048 threads/SM; unrounded 33.5 / 66.9 / 66.9 TF, which imply"
        .. " 1.98 GHz (132 x 64 x 2 x 1.98 GHz = 33.5 TF)",
    },
  },

  {
    name = "H200",
    match = {"nvidia h200"},  -- "NVIDIA H200"; "NVIDIA GH200 ..." does not match
    kind = "gpu",
    vendor = "NVIDIA",
    variant = "H200 SXM 141GB",
    units = 132,
    clock_ghz = 1.98,
    dram_gbs = 4800,
    dram_gb = 141,
    l2_mb = 50,
    fp64_gflops = 33500,         -- datasheet: 34 TF (same GH100 silicon and clocks as H100 SXM)
    fp32_gflops = 66900,         -- datasheet: 67 TF
    fp64_matrix_gflops = 66900,  -- datasheet: 67 TF
    shared_kb = 228,
    shared_bytes_per_clock = 128,
    regs_per_unit = 65536,
    max_threads_per_unit = 2048,
    warp = 32,
    sources = {
      "https://www.nvidia.com/en-us/data-center/h200/ : H200 SXM: 141 GB HBM3e, 4.8 TB/s,"
        .. " FP64 34 TF, FP64 Tensor Core 67 TF, FP32 67 TF",
      "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper : SM count,"
        .. " clocks, L2, shared memory, registers taken from H100 SXM5 (same GH100 die);"
        .. " the H200 page does not list them (not confirmed here)",
    },
  },

  {
    name = "L40S",
    match = {"l40s"},  -- "NVIDIA L40S" (the plain L40 does not match)
    kind = "gpu",
    vendor = "NVIDIA",
    variant = "L40S 48GB PCIe",
    units = 142,
    clock_ghz = 2.52,
    dram_gbs = 864,
    dram_gb = 48,
    l2_mb = 96,
    -- FP64 is not in the L40S datasheet. Derived from the CUDA Programming Guide throughput
    -- table: compute capability 8.9 does 2 FP64 FMA/clock/SM (1/64 of FP32):
    -- 142 SMs x 2 x 2 flop x 2.52 GHz = 1431 GF/s.
    fp64_gflops = 1431,
    fp32_gflops = 91600,
    fp64_matrix_gflops = nil,  -- Ada tensor cores have no FP64 mode
    shared_kb = 100,
    shared_bytes_per_clock = 128,
    regs_per_unit = 65536,
    max_threads_per_unit = 1536,
    warp = 32,
    sources = {
      "https://www.nvidia.com/en-us/data-center/l40s/ : L40S datasheet: 48 GB GDDR6,"
        .. " 864 GB/s, 18,176 CUDA cores (= 142 SMs x 128), FP32 91.6 TF; no FP64 figure",
      "https://docs.nvidia.com/cuda/cuda-c-programming-guide/ : cc 8.9: 1536 threads/SM,"
        .. " 100 KB shared memory/SM, 64K registers/SM, FP64 throughput 2/clock/SM"
        .. " (fp64_gflops derived from it) (not confirmed here)",
      "https://docs.nvidia.com/cuda/ada-tuning-guide/index.html : Ada occupancy / unified"
        .. " shared memory-L1 (same limits as above)",
      "Ada Lovelace architecture whitepaper : 2520 MHz boost (91.6 TF / (18176 x 2)),"
        .. " L2 96 MB for the AD102 data-center parts (not confirmed here; one third-party"
        .. " page lists 48 MB)",
    },
  },

  -- AMD GPUs ----------------------------------------------------------------------------

  {
    name = "MI250X",
    -- "AMD Instinct MI250X". rocm-smi may say "AMD Instinct MI250X/MI250", so an MI250
    -- (208 CUs) can land here too.
    match = {"mi250x"},
    kind = "gpu",
    vendor = "AMD",
    variant = "MI250X OAM 128GB (both GCDs)",
    -- Whole package, BOTH GCDs. One process (one HIP device) sees ONE GCD: 110 CUs, 64 GB,
    -- 1638.4 GB/s, 8 MB L2, 23.95 TF FP64 vector; divide the package figures by gcds.
    units = 220,
    gcds = 2,
    clock_ghz = 1.70,
    dram_gbs = 3276.8,
    dram_gb = 128,
    l2_mb = 16,                  -- 8 MB per GCD
    fp64_gflops = 47900,
    fp32_gflops = 47900,         -- vector FP32; packed FP32 (v_pk_fma_f32) is 95.7 TF
    fp64_matrix_gflops = 95700,
    shared_kb = 64,
    shared_bytes_per_clock = 128,
    regs_per_unit = 131072,      -- 512 KB unified VGPR+AccVGPR file per CU / 4 B
    max_threads_per_unit = 2048, -- 4 SIMDs x 8 waves (gfx90a) x 64 lanes
    warp = 64,
    sources = {
      "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html : 220 CUs,"
        .. " 1700 MHz peak engine clock, FP64/FP32 vector 47.9 TF, FP64 matrix 95.7 TF,"
        .. " packed FP32 95.7 TF, 128 GB HBM2e, 3.2768 TB/s"
        .. " (220 x 128 flop x 1.7 GHz = 47.9 TF)",
      "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html : MI250X 220 CUs"
        .. " (110 per GCD), wavefront 64, LDS 64 KiB, L2 16 MiB (8 per GCD), VGPR file"
        .. " 512 KiB per CU",
      "https://github.com/llvm/llvm-project/blob/main/llvm/lib/Target/AMDGPU/Utils/"
        .. "AMDGPUBaseInfo.cpp : getMaxWavesPerEU() returns 8 for gfx90a-class targets,"
        .. " so 4 x 8 x 64 = 2048 threads/CU (not 2560 as on older GCN)",
      "https://www.amd.com/content/dam/amd/en/documents/instinct-business-docs/white-papers/"
        .. "amd-cdna2-white-paper.pdf : LDS 128 bytes/clock/CU (not confirmed here)",
    },
  },

  {
    name = "MI300X",
    match = {"mi300x"},  -- "AMD Instinct MI300X"
    kind = "gpu",
    vendor = "AMD",
    variant = "MI300X OAM 192GB",
    units = 304,
    clock_ghz = 2.10,
    dram_gbs = 5300,
    dram_gb = 192,
    l2_mb = 32,                  -- 4 MB per XCD x 8 XCDs
    infinity_cache_mb = 256,
    fp64_gflops = 81700,
    fp32_gflops = 163400,
    fp64_matrix_gflops = 163400,
    shared_kb = 64,
    shared_bytes_per_clock = 128,
    regs_per_unit = 131072,      -- 512 KB unified VGPR+AccVGPR file per CU / 4 B
    max_threads_per_unit = 2048, -- 4 SIMDs x 8 waves (gfx942 has the gfx90a limit) x 64
    warp = 64,
    sources = {
      "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html : MI300X peak"
        .. " table: vector FP64 128 flop/clk/CU = 81.7 TF, vector FP32 256 = 163.4 TF,"
        .. " matrix FP64 256 = 163.4 TF; 5.3 TB/s; 38 active CUs per XCD, 4 MB L2 per XCD",
      "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html : MI300X 192 GiB,"
        .. " 304 CUs, wavefront 64, LDS 64 KiB, L3 (Infinity Cache) 256 MiB, L2 32 MiB,"
        .. " VGPR file 512 KiB per CU",
      "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html : 2100 MHz"
        .. " peak engine clock (81.7 TF / (304 x 128)), 192 GB HBM3 (clock not confirmed"
        .. " here)",
      "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/white-papers/"
        .. "amd-cdna-3-white-paper.pdf : LDS 128 bytes/clock/CU (not confirmed here)",
      "https://github.com/llvm/llvm-project/blob/main/llvm/lib/Target/AMDGPU/Utils/"
        .. "AMDGPUBaseInfo.cpp : 8 waves per SIMD -> 2048 threads/CU",
    },
  },

  -- CPUs --------------------------------------------------------------------------------

  {
    name = "Ryzen 9 7950X",
    -- /proc/cpuinfo: "AMD Ryzen 9 7950X 16-Core Processor". The "16-core" keeps the
    -- 7950X3D (128 MB L3) from matching.
    match = {"ryzen 9 7950x 16-core"},
    kind = "cpu",
    vendor = "AMD",
    variant = "Ryzen 9 7950X (Zen 4, 16 cores, AM5)",
    units = 16,
    -- AMD publishes no all-core clock, only base 4.5 GHz and max (1-core) boost 5.7 GHz.
    -- The 4.5 GHz base clock is used as the all-core clock (a floor: real all-core AVX
    -- clocks are usually higher).
    clock_ghz = 4.5,
    dram_gbs = 83.2,             -- 2 channels x 8 B x 5200 MT/s (DDR5-5200, the rated speed)
    dram_gb = 128,               -- maximum supported memory, not what a given box holds
    l2_mb = 64,                  -- L3
    -- cores x all-core clock x FMA units x lanes x 2 flop:
    -- 16 x 4.5 GHz x 2 x 4 (two 256-bit FMA pipes; AVX-512 runs as 2 x 256 bit) x 2
    fp64_gflops = 1152,
    fp32_gflops = 2304,          -- same with 8 single lanes per 256-bit pipe
    fp64_matrix_gflops = nil,    -- no matrix unit
    shared_kb = 32,              -- L1D per core
    shared_bytes_per_clock = 64, -- 2 x 256-bit loads per clock per core
    regs_per_unit = nil,
    max_threads_per_unit = 2,    -- SMT
    warp = 8,                    -- doubles per AVX-512 register
    sources = {
      "https://www.amd.com/en/products/processors/desktops/ryzen/7000-series/"
        .. "amd-ryzen-9-7950x.html : 16 cores / 32 threads, base 4.5 GHz, boost up to"
        .. " 5.7 GHz, L3 64 MB, L2 16 MB, DDR5-5200 (2 channels), AVX-512, max memory 128 GB"
        .. " (max memory not confirmed here)",
      "https://www.amd.com/content/dam/amd/en/documents/processor-tech-docs/software-"
        .. "optimization-guides/57647.pdf : Zen 4 software optimization guide: 32 KB L1D,"
        .. " two 256-bit FMA pipes, 512-bit ops split in two, two 256-bit loads per clock"
        .. " (not confirmed here)",
      "derived: fp64/fp32_gflops = cores x clock x FMA pipes x lanes x 2 (see above);"
        .. " dram_gbs = 2 x 8 B x 5.2 GT/s = 83.2 GB/s",
    },
  },
}
