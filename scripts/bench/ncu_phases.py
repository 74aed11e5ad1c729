#!/usr/bin/env python3
# Benchmark helper (not a test, issue 17): a kernel's Nsight Compute per-instruction counters
# split at each BAR.SYNC in address order, so that each barrier phase shows its share of the
# warp stall samples and of the executed instructions, its shared wavefronts and global
# loads, and its largest stall reasons.
# usage: ncu --section SourceCounters -o rep felab scripts/bench/one_case.lua ...;
#        ncu -i rep.ncu-rep --page source --csv --print-source sass > k.csv;
#        python3 scripts/bench/ncu_phases.py k.csv
import csv, sys
f = sys.argv[1]
rows = list(csv.reader(open(f)))
hdr = None
for i, r in enumerate(rows):
    if 'Address' in r and 'Source' in r:
        hdr = r; start = i + 1; break
ix = {h: i for i, h in enumerate(hdr)}
stalls = [h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
def g(r, k):
    try: return float(r[ix[k]].replace(',', ''))
    except Exception: return 0.0
ph = [dict(samples=0, instr=0, shwf=0, tag=0, l2=0, ldg=0, st={})]
for r in rows[start:]:
    if len(r) < len(hdr): continue
    s = r[ix['Source']]
    p = ph[-1]
    p['samples'] += g(r, 'Warp Stall Sampling (All Samples)')
    p['instr'] += g(r, 'Instructions Executed')
    p['shwf'] += g(r, 'L1 Wavefronts Shared')
    p['tag'] += g(r, 'L1 Tag Requests Global')
    p['l2'] += g(r, 'L2 Theoretical Sectors Global')
    if 'LDG' in s: p['ldg'] += g(r, 'Instructions Executed')
    for st in stalls: p['st'][st] = p['st'].get(st, 0) + g(r, st)
    if 'BAR.SYNC' in s: ph.append(dict(samples=0, instr=0, shwf=0, tag=0, l2=0, ldg=0, st={}))
tot = sum(p['samples'] for p in ph) or 1
ti = sum(p['instr'] for p in ph) or 1
print(f"{f}: {len(ph)} phases, samples {tot:.0f}, warp instructions {ti/1e6:.2f}M, shared wavefronts {sum(p['shwf'] for p in ph)/1e6:.2f}M")
for k, p in enumerate(ph):
    if p['samples'] == 0 and p['instr'] == 0: continue
    top = sorted(p['st'].items(), key=lambda x: -x[1])[:4]
    print(f"  phase {k}: samples {100*p['samples']/tot:5.1f}%  instr {100*p['instr']/ti:5.1f}%  shwf {p['shwf']/1e6:7.2f}M  ldg {p['ldg']/1e6:6.2f}M tagreq {p['tag']/1e6:6.2f}M l2sect {p['l2']/1e6:6.2f}M  " +
          " ".join(f"{k2[6:]}:{100*v/tot:.1f}%" for k2, v in top))
