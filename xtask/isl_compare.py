#!/usr/bin/env python3
"""Recomputes polyfuse's dependences with isl (islpy) and compares answers and speed.

Reads the JSON files that `cargo bench --bench deps` writes when POLYFUSE_DEPS_EXPORT is set:
per kernel the domains, accesses and original schedule in isl notation and polyfuse's memory-based
flow/anti/output dependences, value-based flow dependences and live-in read instances. Prints a
table: for each kernel, whether isl's answer equals polyfuse's for each kind, and isl's time for
the same computation (median of repeated runs).
"""
import glob
import json
import os
import statistics
import sys
import time

import islpy as isl


def union_map(strings):
    result = None
    for s in strings:
        m = isl.UnionMap(s)
        result = m if result is None else result.union(m)
    return result


def union_set(strings):
    result = None
    for s in strings:
        m = isl.UnionSet(s)
        result = m if result is None else result.union(m)
    return result


def analyse(k):
    domain = union_set(k["domains"])
    writes = union_map(k["writes"]).intersect_domain(domain)
    reads = union_map(k["reads"]).intersect_domain(domain) if k["reads"] else None
    schedule = union_map(k["schedules"]).intersect_domain(domain)
    order = schedule.lex_lt_union_map(schedule)
    empty = isl.UnionMap("{ }")
    if reads is None:
        flow = anti = empty
        dataflow = empty
        live_in = isl.UnionSet("{ }")
    else:
        flow = writes.apply_range(reads.reverse()).intersect(order)
        anti = reads.apply_range(writes.reverse()).intersect(order)
        info = isl.UnionAccessInfo.from_sink(reads)
        info = info.set_must_source(writes)
        info = info.set_schedule_map(schedule)
        result = info.compute_flow()
        dataflow = result.get_must_dependence()
        live_in = result.get_must_no_source().domain()
    output = writes.apply_range(writes.reverse()).intersect(order)
    return {
        "flow": flow,
        "anti": anti,
        "output": output,
        "dataflow": dataflow,
        "live_in": live_in,
    }


def same(ours, theirs, is_set=False):
    if not ours:
        return theirs.is_empty()
    mine = union_set(ours) if is_set else union_map(ours)
    return mine.is_equal(theirs)


def main():
    folder = sys.argv[1]
    files = sorted(glob.glob(os.path.join(folder, "*.json")))
    if not files:
        sys.exit(f"no exported kernels in {folder}")
    print("| kernel | flow | anti | output | dataflow | live-in | isl time |")
    print("| --- | --- | --- | --- | --- | --- | ---: |")
    mismatches = 0
    for path in files:
        with open(path) as f:
            k = json.load(f)
        times = []
        start = time.perf_counter()
        while len(times) < 5 or (len(times) < 50 and time.perf_counter() - start < 1.0):
            t = time.perf_counter()
            isl_answer = analyse(k)
            times.append(time.perf_counter() - t)
        cells = []
        for kind in ["flow", "anti", "output", "dataflow"]:
            ok = same(k[kind], isl_answer[kind])
            mismatches += not ok
            cells.append("same" if ok else "DIFFERENT")
        ok = same(k["live_in"], isl_answer["live_in"], is_set=True)
        mismatches += not ok
        cells.append("same" if ok else "DIFFERENT")
        print(f"| {k['kernel']} | {' | '.join(cells)} | {statistics.median(times) * 1e3:.2f} ms |")
    print(f"\n{mismatches} answer(s) differ from isl's")
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
