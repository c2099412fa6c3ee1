#!/usr/bin/env python3
"""The Geo-SDUR tables of docs/BENCHMARKS.md, from the sweep.json of sweeps
of `--workload sdur-micro` or `social` (python3, no packages).

    scripts/sdur_table.py docs/figures/data/sdur-wan1-delay/sweep.json ...

One row per setting (placement, workload, share of globals, reordering
threshold, delay), medians over the setting's runs (its --rounds) with the
range of the p99 in brackets. "near" is what the clients of the DCs that
hold a partition's majority saw (DCs 0 and 2 in WAN 1, 2,2,1/0,0,1: the
paper's locals; every DC in WAN 2): the larger of those DCs' p99 and the
mean over their commits, from each class's `by_dc`.
"""
import collections
import json
import sys

WAN1 = "2,2,1/0,0,1"


def med(v):
    v = sorted(x for x in v if x is not None)
    return v[len(v) // 2] if v else float("nan")


def near(c, dcs):
    ds = [d for d in c["by_dc"] if d["dc"] in dcs]
    n = sum(d["committed"] for d in ds)
    if not n:
        return None, None
    return sum(d["mean_ms"] * d["committed"] for d in ds) / n, max(d["p99_ms"] for d in ds)


def main(paths):
    rows = collections.defaultdict(list)
    for path in paths:
        for r in json.load(open(path)):
            o = r.get("ordered") or {}
            w = r["workload"]
            key = (o.get("members"), w.get("kind"), r["clients_per_dc"], w.get("global_fraction") or 0.0,
                   o.get("reorder_threshold") or 0, o.get("delay") or "off")
            rows[key].append(r)
    print("| placement | workload | clients/DC | globals | R | D | class | txn/s | mean ms (near) | p99 ms (near) | p99 ms (all) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(rows):
        members, kind, load, g, reorder, delay = key
        runs = rows[key]
        dcs = [0, 2] if members == WAN1 else [0, 1, 2]
        classes = sorted({c for r in runs for c in r["txn_classes"]}, key=lambda c: ["local", "global", "timeline", "post", "follow-local", "follow-global"].index(c))
        for c in classes:
            cs = [r["txn_classes"][c] for r in runs if c in r["txn_classes"]]
            nears = [near(x, dcs) for x in cs]
            p99 = [x["latency"]["p99_ms"] for x in cs]
            np99 = [n[1] for n in nears if n[1] is not None]
            span = f" [{min(np99):.0f}–{max(np99):.0f}]" if np99 else ""
            place = "WAN 1" if members == WAN1 else "WAN 2" if members == "0,1,2/0,1,2" else members
            print(f"| {place} | {kind} | {load} | {g:.0%} | {reorder} | {delay} | {c} | "
                  f"{med([x['throughput_tps'] for x in cs]):.0f} | {med([n[0] for n in nears]):.1f} | "
                  f"{med(np99):.1f}{span} | {med(p99):.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
