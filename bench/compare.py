"""Join attn's and PyTorch's benchmark JSON lines by (bench, case, metric) and print the ratio.
Lines that are not JSON (notes, CPU info) are passed through."""
import json
import sys


def read(path):
    rows, notes = {}, []
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        try:
            r = json.loads(line)
            rows[(r["bench"], r["case"], r["metric"])] = r["value"]
        except (ValueError, KeyError):
            notes.append(line)
    return rows, notes


a, an = read(sys.argv[1])
t, tn = read(sys.argv[2])
for n in an:
    print("  attn:  " + n)
for n in tn:
    print("  torch: " + n)
print(f"  {'case':<40} {'metric':<12} {'attn':>10} {'pytorch':>10} {'ratio':>7}")
for key, va in a.items():
    vt = t.get(key)
    ratio = f"{va / vt:6.2f}x" if vt else "    n/a"
    vts = f"{vt:10.2f}" if vt is not None else "       n/a"
    print(f"  {key[1]:<40} {key[2]:<12} {va:10.2f} {vts} {ratio}")
