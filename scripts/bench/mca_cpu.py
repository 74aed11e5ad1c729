#!/usr/bin/env python3
"""Benchmark (not a test): the cpu's patch kernels as llvm-mca simulates them (issue 17).

The cpu backend's patch strategy runs a cell's points one after another, each a long chain of
dependent multiply-adds; the core's out-of-order window, not its multiply-add rate, decides how
much of one point overlaps the next. felab's model does not simulate that window yet. This
script measures the applies, then compiles the same kernels to assembly with FE_MCA (the
regions patch.knl marks: a point, and the map apart where a cell makes it once for several
points) and asks llvm-mca (LLVM's simulator of a core's scheduler, ports and latencies) for the
cycles of each region, and prints measured against simulated cycles a cell.

usage: python3 scripts/bench/mca_cpu.py [felab] [mcpu]
  felab: the shell (default build/felab); mcpu: llvm-mca's -mcpu (default native)
needs: gcc, llvm-mca (Debian's llvm), 2 minutes on this machine.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

FLAGS = "-std=gnu11 -O3 -march=native -ffp-contract=fast -fopenmp -fPIC"  # cpu-backend.c's
CASES = [("P1-tet", "tet", "P1", 64), ("Q1-hex", "hex", "Q1", 64), ("P2-tet", "tet", "P2", 32)]

LUA = """
device.use("cpu")
for _, c in ipairs({%s}) do
  local m = mesh.box{cells = c[4], cell = c[2]}
  local V = fe.space(m, c[3])
  local A = fe.operator(V, physics.poisson{kappa = 1, source = 1}, {dirichlet = "all"})
  for _, prec in ipairs({"double", "single"}) do
    local w = V:interpolate(function(x) return x[1] * (1 - x[2]) + x[3] end):to("cpu", prec)
    local o = {backend = "cpu", precision = prec, strategy = "patch"}
    local _, best = A:apply(w, o)
    for _ = 2, 10 do
      local _, rep = A:apply(w, o)
      if rep.seconds < best.seconds then best = rep end
    end
    print(("case %%s %%s %%.6e %%d %%.3f"):format(c[1], prec, best.seconds, best.ncells, best.ratio))
  end
end
"""

CHAIN = r"""
#include <stdio.h>
#include <time.h>
int main(void)
{
  double x = 1.0001, a = 0.99999, b = 1e-7, best = 1e9;
  const long n = 100000000;
  for (int r = 0; r < 5; r++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
      __asm__ volatile("# LLVM-MCA-BEGIN chain");
      __asm__ volatile("vfmadd132sd %1, %2, %0" : "+x"(x) : "x"(a), "x"(b));
      __asm__ volatile("# LLVM-MCA-END chain");
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (s < best) best = s;
  }
  printf("%.6e %g\n", best / n, x);
  return 0;
}
"""


def mca(asm, mcpu):
    """cycles an iteration of each region of an assembly file"""
    out = subprocess.run(["llvm-mca", "-mcpu=" + mcpu, "-iterations=100", "-all-views=false",
                          "-summary-view", asm], capture_output=True, text=True, check=True).stdout
    cycles, region = {}, None
    for line in out.splitlines():
        m = re.search(r"Code Region - (\S+)", line)
        if m:
            region = m.group(1)
        m = re.match(r"Total Cycles:\s+(\d+)", line)
        if m and region:
            cycles[region] = int(m.group(1)) / 100.0
    return cycles


def define(src, name):
    m = re.search(r"^#define %s (\d+)" % name, src, re.M)
    return int(m.group(1)) if m else 0


def main():
    felab = sys.argv[1] if len(sys.argv) > 1 else "build/felab"
    mcpu = sys.argv[2] if len(sys.argv) > 2 else "native"
    for tool in ("gcc", "llvm-mca"):
        if not shutil.which(tool):
            sys.exit("mca_cpu.py: %s is not on PATH (Debian: apt-get install gcc llvm)" % tool)
    tmp = tempfile.mkdtemp(prefix="felab-mca-")
    env = dict(os.environ, FELAB_CACHE=tmp, OMP_WAIT_POLICY="passive")
    lua = os.path.join(tmp, "cases.lua")
    with open(lua, "w") as f:
        f.write(LUA % ", ".join('{"%s", "%s", "%s", %d}' % c for c in CASES))
    run = subprocess.run([felab, lua], capture_output=True, text=True, env=env)
    if run.returncode:
        sys.exit("mca_cpu.py: %s failed:\n%s" % (felab, run.stderr))
    measured = {}
    for line in run.stdout.splitlines():
        p = line.split()
        if p and p[0] == "case":
            measured[(p[1], p[2])] = (float(p[3]), int(p[4]), float(p[5]))
    threads = os.cpu_count() or 1
    if os.environ.get("OMP_NUM_THREADS"):
        threads = int(os.environ["OMP_NUM_THREADS"])

    # seconds a cycle of llvm-mca's core: a chain of dependent multiply-adds timed and simulated
    c = os.path.join(tmp, "chain.c")
    with open(c, "w") as f:
        f.write(CHAIN)
    subprocess.run(["gcc", "-O2", "-march=native", c, "-o", c[:-2]], check=True)
    subprocess.run(["gcc", "-O2", "-march=native", "-S", c, "-o", c[:-2] + ".s"], check=True)
    per_fma = float(subprocess.run([c[:-2]], capture_output=True, text=True).stdout.split()[0])
    lat = mca(c[:-2] + ".s", mcpu)["chain"]
    cycle = per_fma / lat
    print("a dependent multiply-add: %.3f ns, %.1f cycles in llvm-mca's core: a cycle %.3f ns "
          "(%.2f GHz); %d threads" % (per_fma * 1e9, lat, cycle * 1e9, 1e-9 / cycle, threads))

    kernels = os.path.join(tmp, "cpu")
    names = {(1, 4): "P1-tet", (8, 8): "Q1-hex", (4, 10): "P2-tet"}
    rows = []
    for name in sorted(os.listdir(kernels)):
        if not name.endswith(".c"):
            continue
        path = os.path.join(kernels, name)
        src = open(path).read()
        if "template: patch" not in src:
            continue
        nq, nb = define(src, "NQ"), define(src, "NB")
        case = names.get((nq, nb))
        prec = "double" if define(src, "FE_DOUBLE") else "single"
        if not case or (case, prec) not in measured:
            continue
        asm = path[:-2] + ".s"
        subprocess.run(["gcc"] + FLAGS.split() + ["-DFE_MCA=1", "-S", path, "-o", asm], check=True)
        r = mca(asm, mcpu)
        apart = define(src, "GEO_RECOMPUTE") and define(src, "GEO_AFFINE") and nq > 1
        sim = nq * r.get("point", 0) + (r.get("map", 0) if apart else 0)
        sec, cells, ratio = measured[(case, prec)]
        meas = sec / cycle * threads / cells
        rows.append((case, prec, nq, r.get("point", 0), r.get("map", 0) if apart else 0, sim, meas,
                     ratio))
    print("\n%-7s %-6s %3s %10s %9s %10s %10s %6s %10s" % ("case", "prec", "NQ", "point cyc",
          "map cyc", "sim/cell", "meas/cell", "sim/m", "felab p/m"))
    for r in rows:
        print("%-7s %-6s %3d %10.1f %9.1f %10.1f %10.1f %6.2f %10.2f" % (r[0], r[1], r[2], r[3],
              r[4], r[5], r[6], r[5] / r[6], r[7]))
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
