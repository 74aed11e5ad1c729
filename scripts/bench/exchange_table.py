"""The table of scripts/bench/exchange_gpu.sh: for each case and round ("round K" lines before
exchange_parts.lua's output; exchange_gpu.sh's K is FELAB_FOLLOW), the rank whose neighbour was
ready (the least median of messages: the other's waits for its neighbour's lateness, which the
model leaves out), its exchange's median measured against the model's, and its gather's
median (least) against the gather's term; then how many cases of each round came within 25%.
    python3 scripts/bench/exchange_table.py OUT"""
import re
import sys

LINE = re.compile(r"(\S+) (\S+) (\d+) dofs, rank (\d+) of \d+, [^:]*: measured us, median "
                  r"\(least\) of \d+: total ([\d.]+) \(([\d.]+)\), gather ([\d.]+) \(([\d.]+)\), "
                  r"messages ([\d.]+)")
PRED = re.compile(r"predicted us: total ([\d.]+), gather ([\d.]+)")


def rows(lines):
    label = "-"
    for i, line in enumerate(lines):
        if line.startswith("round "):
            label = line.split()[1]
            continue
        m = LINE.match(line)
        if not m:
            continue
        p = next((PRED.search(x) for x in lines[i + 1:i + 4] if PRED.search(x)), None)
        if not p:
            continue
        yield {"round": label, "case": (m.group(1), m.group(2), int(m.group(3))),
               "total": float(m.group(5)), "gather": float(m.group(7)),
               "gather_least": float(m.group(8)), "messages": float(m.group(9)),
               "pred": float(p.group(1)), "pred_gather": float(p.group(2))}


def main(path):
    with open(path) as f:
        lines = f.read().split("\n")
    cases = {}
    for r in rows(lines):
        cases.setdefault(r["case"], {}).setdefault(r["round"], []).append(r)
    within = {}
    for case, by_round in cases.items():
        out = "%-3s %-8s %9d" % case
        for label in sorted(by_round):
            r = min(by_round[label], key=lambda r: r["messages"])
            ratio = r["pred"] / r["total"]
            w = within.setdefault(label, [0, 0])
            w[0] += 0.8 <= ratio <= 1.25
            w[1] += 1
            out += " | %s: %5.1f pred %5.1f (%.2f), gather %4.1f (%.1f) pred %4.1f" % (
                label, r["total"], r["pred"], ratio, r["gather"], r["gather_least"],
                r["pred_gather"])
        print(out)
    for label, (k, n) in sorted(within.items()):
        print("round %s: %d of %d within 25%%" % (label, k, n))


if __name__ == "__main__":
    main(sys.argv[1])
