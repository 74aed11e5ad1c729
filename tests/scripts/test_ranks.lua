-- felab under mpirun (issue 48, first step; shell/ranks.c, engine/parallel/comm.c): a script
-- runs on every rank (mpi.rank, mpi.size), only rank 0 prints unless FELAB_ALL_RANKS=1; a
-- script's error on one rank names it and stops every rank with a nonzero status; at the
-- prompt (piped input) every chunk runs on every rank, an error on rank 1 reaches rank 0's
-- output with the rank named and the session goes on; amg (hypre on each rank's own
-- communicator) solves on two ranks as on one. Skipped where mpirun is missing or felab was
-- built without MPI.
local T = dofile((arg[0]:match("^(.*/)") or "") .. "check.lua")
local check = T.check
local exe = T.exe()

if os.execute("command -v mpirun > /dev/null 2>&1") ~= true then
  T.skip("mpirun is not installed")
  return
end
local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p '" .. dir .. "'")
-- root may run OpenMPI's ranks (CI's containers); --oversubscribe: more ranks than cores
local mpirun = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader "
               .. "timeout 120 mpirun --oversubscribe -np "

local function run(np, args, input, env)
  local cmd = ("%s%s%d '%s' %s 2>&1"):format(env or "", mpirun, np, exe, args)
  if input then
    local f = io.open(dir .. "/in.lua", "w")
    f:write(input)
    f:close()
    cmd = ("%s < '%s/in.lua'"):format(cmd, dir)
  end
  local p = io.popen(cmd)
  local out = p:read("a")
  local _, _, rc = p:close()
  return out, rc
end

local out = run(1, "-e 'print(\"size\", mpi.size, \"rank\", mpi.rank)'")
if out:find("size\t1\trank\t0", 1, true) == nil and out:find("MPI", 1, true) then
  T.skip("mpirun cannot start felab here: " .. out:sub(1, 200))
  os.execute("rm -rf '" .. dir .. "'")
  return
end
check(out:find("size\t1\trank\t0", 1, true), "one rank: %s", out)
for _, np in ipairs({2, 3}) do
  local o = run(np, "-e 'print(\"size\", mpi.size, \"rank\", mpi.rank)'")
  local _, lines = o:gsub("size\t" .. np .. "\trank\t", "")
  check(lines == 1 and o:find("size\t" .. np .. "\trank\t0", 1, true), "%d ranks: only rank 0 "
        .. "prints: %s", np, o)
  local a = run(np, "-e 'print(\"rank\", mpi.rank)'", nil, "FELAB_ALL_RANKS=1 ")
  for r = 0, np - 1 do
    check(a:find("rank\t" .. r, 1, true), "%d ranks, FELAB_ALL_RANKS=1: rank %d printed nothing: %s",
          np, r, a)
  end
end

-- a script's error on rank 1: named, every rank stopped, a nonzero status
local f = io.open(dir .. "/fail.lua", "w")
f:write('if mpi.rank == 1 then error("rank one fails here") end\n',
        'local t = os.time() + 20 while os.time() < t do end\n') -- rank 0 would wait
f:close()
local t0 = os.time()
local o, rc = run(2, "'" .. dir .. "/fail.lua'")
check(rc ~= 0 and o:find("rank 1 of 2: ", 1, true) and o:find("rank one fails here", 1, true) and
      os.time() - t0 < 15, "a script's error on rank 1: status %s, %d s, %s", tostring(rc),
      os.time() - t0, o)

-- the prompt (piped): every chunk on every rank, an error on rank 1 named, the session on
local session = table.concat({
  "x = 10 * mpi.rank",
  "if mpi.rank == 1 then error('only rank one') end",
  "for i = 1, 2 do",
  "  x = x + i",
  "end",
  "print('x on rank 0', x, mpi.size)",
  "error('on every rank')",
  "print('still here')",
}, "\n") .. "\n"
o, rc = run(2, "", session)
check(o:find("rank 1: stdin:1: only rank one", 1, true), "prompt: rank 1's error: %s", o)
check(o:find("rank 0 (and 1): stdin:1: on every rank", 1, true), "prompt: an error on both: %s", o)
check(o:find("x on rank 0\t3\t2", 1, true) and o:find("still here", 1, true), "prompt: the "
      .. "session went on: %s", o)
check(rc ~= 0, "prompt: piped input with errors exits nonzero (%s)", tostring(rc))

-- amg on two ranks: each rank's hypre on its own communicator, the solve as on one rank (not
-- probed here: an amg setup in this process would start MPI, and mpirun below it then fails)
local script = "local m = mesh.box{cells = {6, 6, 6}, cell = 'tet', distort = 0.2}\n" ..
               "local A = fe.operator(fe.space(m, 'P1'), physics.poisson{kappa = 1, source = 1}," ..
               " {dirichlet = 'all'})\n" ..
               "local x, i = solve.cg(A, {pc = 'amg'})\n" ..
               "print(('amg %d %.12g'):format(i.iterations, x:norm()))\n"
local g = io.open(dir .. "/amg.lua", "w")
g:write(script)
g:close()
local one = run(1, "'" .. dir .. "/amg.lua'")
if one:find("built without hypre", 1, true) then
  T.skip("amg: felab was built without hypre")
else
  local two = run(2, "'" .. dir .. "/amg.lua'")
  local a, b = one:match("amg %d+ %S+"), two:match("amg %d+ %S+")
  check(a and a == b, "amg on one rank and on two: %s, %s (%s%s)", tostring(a), tostring(b), one,
        two)
end
os.execute("rm -rf '" .. dir .. "'")
T.done()
