#!/usr/bin/env python3
"""isl as an oracle for polyfuse's middle end, for `cargo xtask difftest`.

Reads one JSON request per line on standard input and answers one JSON line each:

    {"program": TEXT, "deps": TEXT, "trees": [[LABEL, PROGRAM, DEPS, TREE], ...]}

`program` and `deps` are what `polyfuse check K` and `polyfuse check K --emit deps` print; each
tree entry holds what `polyfuse compile K --emit program|deps|tree` print for one set of options
(the compiled program may have expanded arrays). The answer is {"ok": true} or
{"ok": false, "why": TEXT}.

Checks:
- dependences: polyfuse's memory-based flow, anti, output and input dependences, value-based flow
  dependences, live-in reads and live-out writes equal isl's, for the kernel and for every
  compiled program;
- schedules: every statement instance runs exactly once in the optimized tree (with post-tiling
  fusion: at most once, and every instance a live-out value depends on runs), every flow, anti
  and output dependence (isl's) goes forward in it, and every band member marked coincident has
  zero distance along every dependence its outer schedule does not order. Trees with extension
  nodes (post-tiling fusion) are flattened here, with `skipped` subtrees left out; isl's own
  flattening is used for the others.
"""
import json
import sys

import islpy as isl

from isl_compare import union_map, union_set


class Program:
    """A program as `polyfuse check` prints it."""

    def __init__(self, text):
        self.roles = {}
        self.statements = []  # (name, iterators, domain, schedule dims, write, reads)
        self.params = ""
        section = None
        current = None
        self.values = []
        for line in text.splitlines():
            if line.startswith("params: "):
                self.values = [v.strip() for v in line[len("params: "):].split(",")]
                continue
            if line == "arrays:":
                section = "arrays"
                continue
            if line == "statements:":
                section = "statements"
                continue
            if line.startswith("inferred ranges:"):
                section = None
                continue
            if section == "arrays" and line.startswith("  ") and ":" in line:
                name, rest = line.strip().split(":", 1)
                self.roles[name] = rest.split()[-1]
            elif section == "statements":
                stripped = line.strip()
                if line.startswith("  ") and not line.startswith("    "):
                    current = {"name": stripped.split(":", 1)[0], "reads": []}
                    self.statements.append(current)
                elif stripped.startswith("domain: "):
                    current["domain"] = stripped[len("domain: "):]
                    head = current["domain"].split("{", 1)
                    self.params = head[0]
                    tuple_text = head[1].split("[", 1)[1].split("]", 1)[0]
                    current["iterators"] = [x.strip() for x in tuple_text.split(",") if x.strip()]
                elif stripped.startswith("schedule: "):
                    inner = stripped[len("schedule: "):].strip()[1:-1]
                    current["schedule"] = [x.strip() for x in inner.split(",")]
                elif stripped.startswith("write: "):
                    current["write"] = stripped[len("write: "):]
                    current["write_array"] = current["write"].split("->")[-1].split("[")[0].strip()
                elif stripped.startswith("read: "):
                    current["reads"].append(stripped[len("read: "):])
        if not self.statements:
            raise ValueError("no statements in the program text")

    def stmt(self, name):
        for s in self.statements:
            if s["name"] == name:
                return s
        raise ValueError(f"no statement {name}")

    def context(self):
        """The sizes the kernel was compiled for, as a parameter set."""
        if not self.values:
            return None
        names = [v.split("=")[0].strip() for v in self.values]
        return isl.Set(f"[{', '.join(names)}] -> {{ : {' and '.join(self.values)} }}")

    def domain(self):
        return within(union_set([s["domain"] for s in self.statements]), self.context())

    def writes(self):
        return union_map([s["write"] for s in self.statements]).intersect_domain(self.domain())

    def reads(self):
        reads = [r for s in self.statements for r in s["reads"]]
        if not reads:
            return isl.UnionMap("{ }")
        return union_map(reads).intersect_domain(self.domain())

    def schedule(self):
        width = max(len(s["schedule"]) for s in self.statements)
        maps = []
        for s in self.statements:
            dims = s["schedule"] + ["0"] * (width - len(s["schedule"]))
            maps.append(f"{self.params}{{ {s['name']}[{', '.join(s['iterators'])}] -> [{', '.join(dims)}] }}")
        return union_map(maps).intersect_domain(self.domain())


class Deps:
    """Dependences as `--emit deps` prints them."""

    def __init__(self, text, program):
        self.memory = {"flow": [], "anti": [], "output": [], "input": []}
        self.dataflow = []
        self.live_in = []
        self.live_out = []
        section = None
        pending = None
        for line in text.splitlines():
            if line == "memory-based dependences:":
                section = "memory"
            elif line == "value-based flow dependences:":
                section = "dataflow"
            elif line == "live-in reads:":
                section = "live-in"
            elif line == "live-out writes:":
                section = "live-out"
            elif line.startswith("    ") and pending is not None:
                kind = pending
                pending = None
                if section == "memory":
                    self.memory[kind].append(line.strip())
                else:
                    self.dataflow.append(line.strip())
            elif line.startswith("  ") and section in ("memory", "dataflow"):
                pending = line.split()[0]
            elif line.startswith("  ") and section == "live-in":
                head, instances = line.strip().split("]: ", 1)
                stmt, element = head.split(" reads ", 1)
                s = program.stmt(stmt)
                access = f"{program.params}{{ {stmt}[{', '.join(s['iterators'])}] -> {element}] }}"
                self.live_in.append(isl.UnionMap(access).intersect_domain(isl.UnionSet(instances)))
            elif line.startswith("  ") and section == "live-out":
                head, instances = line.strip().split(": ", 1)
                self.live_out.append(instances)


def isl_dependences(p):
    domain = p.domain()
    writes = p.writes()
    reads = p.reads()
    schedule = p.schedule()
    order = schedule.lex_lt_union_map(schedule)
    info = isl.UnionAccessInfo.from_sink(reads)
    info = info.set_must_source(writes)
    info = info.set_schedule_map(schedule)
    flow = info.compute_flow()
    live_out = isl.UnionSet("{ }")
    for array, role in p.roles.items():
        if role not in ("output", "inout"):
            continue
        maps = [s["write"] for s in p.statements if s["write_array"] == array]
        if not maps:
            continue
        w = union_map(maps).intersect_domain(domain)
        latest = w.reverse().apply_range(schedule).lexmax()
        live_out = live_out.union(latest.apply_range(schedule.reverse()).range())
    return {
        "flow": writes.apply_range(reads.reverse()).intersect(order),
        "anti": reads.apply_range(writes.reverse()).intersect(order),
        "output": writes.apply_range(writes.reverse()).intersect(order),
        "input": reads.apply_range(reads.reverse()).intersect(order),
        "dataflow": flow.get_must_dependence(),
        "live_in": flow.get_must_no_source(),
        "live_out": live_out,
    }


def within(x, context):
    """`x` (a union set or map) for the parameter values of `context` (all, when it is None)."""
    return x if context is None else x.intersect_params(context)


def equal_maps(ours, theirs, context):
    mine = union_map(ours) if ours else isl.UnionMap("{ }")
    return within(mine, context).is_equal(within(theirs, context))


def check_dependences(program_text, deps_text, label):
    p = Program(program_text)
    d = Deps(deps_text, p)
    isl_deps = isl_dependences(p)
    wrong = []
    context = p.context()
    for kind in ("flow", "anti", "output", "input"):
        if not equal_maps(d.memory[kind], isl_deps[kind], context):
            wrong.append(kind)
    if not equal_maps(d.dataflow, isl_deps["dataflow"], context):
        wrong.append("value-based flow")
    live_in = isl.UnionMap("{ }")
    for m in d.live_in:
        live_in = live_in.union(m)
    if not within(live_in, context).is_equal(within(isl_deps["live_in"], context)):
        wrong.append("live-in")
    live_out = union_set(d.live_out) if d.live_out else isl.UnionSet("{ }")
    if not within(live_out, context).is_equal(within(isl_deps["live_out"], context)):
        wrong.append("live-out")
    if wrong:
        return f"{label}: polyfuse's {', '.join(wrong)} dependences differ from isl's"
    return None


def zeros_map(domain, n):
    return isl.UnionMap.from_domain_and_range(domain, isl.UnionSet("{ [" + ", ".join(["0"] * n) + "] }"))


def constant_map(domain, values):
    text = "{ [" + ", ".join(str(v) for v in values) + "] }"
    return isl.UnionMap.from_domain_and_range(domain, isl.UnionSet(text))


def n_out(m):
    """The number of output dimensions of a union map whose ranges all have the same width."""
    dims = set()
    m.foreach_map(lambda x: dims.add(x.dim(isl.dim_type.out)))
    if len(dims) > 1:
        raise ValueError("ranges of different widths")
    return dims.pop() if dims else 0


def pad(m, width):
    """Pads every map of `m` with zero output dimensions up to `width`."""
    out = isl.UnionMap("{ }")
    pieces = []
    m.foreach_map(pieces.append)
    for piece in pieces:
        piece = isl.UnionMap.from_map(piece)
        extra = width - n_out(piece)
        if extra > 0:
            piece = piece.flat_range_product(zeros_map(piece.domain(), extra))
        out = out.union(piece)
    return out


def flatten(node, time, prefix, leaves):
    """Instances → time vectors below `node` (a tree with extension nodes), appended to
    `leaves` as (map, width) per leaf. `time` maps the instances that reach `node` to their
    time so far; `prefix` maps them to the values of the outer band members only (what an
    extension node's relation reads)."""
    kind = node.get_type()
    t = isl.schedule_node_type
    if kind == t.leaf:
        leaves.append(time)
        return
    if kind == t.mark and node.mark_get_id().get_name() == "skipped":
        return
    if kind == t.band:
        partial = isl.UnionMap.from_multi_union_pw_aff(node.band_get_partial_schedule())
        time = time.flat_range_product(partial)
        prefix = prefix.flat_range_product(partial)
        flatten(node.child(0), time, prefix, leaves)
        return
    if kind == t.filter:
        f = node.filter_get_filter()
        flatten(node.child(0), time.intersect_domain(f), prefix.intersect_domain(f), leaves)
        return
    if kind in (t.sequence, t.set):
        for k in range(node.n_children()):
            child = node.child(k)
            f = child.filter_get_filter()
            tk = time.intersect_domain(f)
            tk = tk.flat_range_product(constant_map(tk.domain(), [k]))
            flatten(child, tk, prefix.intersect_domain(f), leaves)
        return
    if kind == t.extension:
        ext = node.extension_get_extension()
        at_prefix = prefix.reverse().apply_range(time)
        new_time = ext.reverse().apply_range(at_prefix)
        flatten(node.child(0), time.union(new_time), prefix.union(ext.reverse()), leaves)
        return
    if kind in (t.mark, t.context, t.guard):
        flatten(node.child(0), time, prefix, leaves)
        return
    raise ValueError(f"cannot flatten a {kind} node")


def flat_schedule(schedule):
    root = schedule.get_root()
    if "extension" not in str(schedule):
        return schedule.get_map(), False
    domain = schedule.get_domain()
    start = isl.UnionMap.from_domain_and_range(domain, isl.UnionSet("{ [] }"))
    leaves = []
    flatten(root.child(0), start, start, leaves)
    width = max((n_out(m) for m in leaves), default=0)
    result = isl.UnionMap("{ }")
    for m in leaves:
        result = result.union(pad(m, width))
    return result, True


def needed(deps):
    """The instances whose values reach a live-out write: the live-out writes and, through
    value-based flow dependences, every instance they depend on."""
    result = deps["live_out"]
    for _ in range(10000):
        more = result.union(deps["dataflow"].intersect_range(result).domain())
        if more.is_equal(result):
            return result
        result = more
    raise ValueError("the needed instances did not converge")


def bands(node, out):
    if node.get_type() == isl.schedule_node_type.band:
        out.append(node)
    for k in range(node.n_children()):
        bands(node.child(k), out)


def check_schedule(program_text, tree_text, label):
    p = Program(program_text)
    deps = isl_dependences(p)
    legality = deps["flow"].union(deps["anti"]).union(deps["output"])
    schedule = isl.Schedule.read_from_str(isl.DEFAULT_CONTEXT, tree_text)
    domain = p.domain()
    if not within(schedule.get_domain(), p.context()).is_equal(domain):
        return f"{label}: the tree's domain is not the program's"
    flat, extended = flat_schedule(schedule)
    flat = flat.intersect_domain(domain)
    # Post-tiling fusion computes only what the live-out statements need: with extension
    # nodes, instances no live-out value depends on may be left out.
    must_run = needed(deps) if extended else domain
    if not must_run.is_subset(flat.domain()):
        missing = must_run.subtract(flat.domain())
        return f"{label}: instances the tree never runs: {missing}"
    if not flat.is_single_valued():
        return f"{label}: instances the tree runs more than once"
    order = flat.lex_lt_union_map(flat)
    ran = flat.domain()
    violated = legality.intersect_domain(ran).intersect_range(ran).subtract(order)
    if not violated.is_empty():
        return f"{label}: dependences the schedule runs backwards or at once: {violated}"
    if extended:
        return None
    found = []
    bands(schedule.get_root(), found)
    for band in found:
        band_domain = band.get_domain()
        deps_here = legality.intersect_domain(band_domain).intersect_range(band_domain)
        if deps_here.is_empty():
            continue
        outer = band.get_prefix_schedule_union_map()
        partial = band.band_get_partial_schedule()
        for k in range(band.band_n_member()):
            member = isl.UnionMap.from_union_pw_aff(partial.get_at(k))
            if band.band_member_get_coincident(k):
                same_outer = outer.apply_range(outer.reverse())
                carried_here = deps_here.intersect(same_outer)
                same_member = member.apply_range(member.reverse())
                wrong = carried_here.subtract(same_member)
                if not wrong.is_empty():
                    return (
                        f"{label}: band member {k} of {member} is marked coincident but "
                        f"dependences cross it: {wrong}"
                    )
            outer = outer.flat_range_product(member)
    return None


def answer(request):
    why = check_dependences(request["program"], request["deps"], "kernel")
    if why:
        return why
    for label, program, deps, tree in request.get("trees", []):
        why = check_dependences(program, deps, label) or check_schedule(program, tree, label)
        if why:
            return why
    return None


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            why = answer(json.loads(line))
            reply = {"ok": why is None}
            if why:
                reply["why"] = why
        except Exception as e:  # an isl error or text this script cannot read
            reply = {"ok": False, "why": f"isl could not check: {type(e).__name__}: {e}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
