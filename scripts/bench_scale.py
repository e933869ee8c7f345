#!/usr/bin/env python3
"""The measuring and reporting half of scripts/bench-scale.sh.

  bench_scale.py sample BASE OUT STOP   # every second until STOP exists: each controller's CPU, memory, passes
  bench_scale.py report RESULTS         # the Markdown tables (stdout) and RESULTS/scale.tsv

`sample` finds the controllers by their command line (`drover controller
--engine unix://BASE/machines/...`: only this benchmark's), reads
/proc/PID/stat (utime + stime) and /proc/PID/status (VmRSS, VmHWM), and asks
each one's metrics endpoint (its machine's address, port 9464) for
`drover_passes_total` and `drover_controller_acting`. One JSON line per
controller per sample. A controller whose machine is destroyed vanishes
between samples: its figures are those of its last sample (≤ 1 s old).

`report` reads what bench-scale.sh left in RESULTS (per size W and run K:
`W-K.json` with the wall times, `events-W-K-{boot,roll}.json` from `drover
events --output json`, `samples-W-K-{boot,roll}.jsonl` from `sample`).
"""

import base64
import collections
import datetime
import http.client
import json
import os
import socket
import statistics
import sys
import time
import urllib.request

METRICS_PORT = 9464
TICK = os.sysconf("SC_CLK_TCK")


def controllers(base):
    """{pid: instance dir} of this benchmark's controller processes (not
    the `sh -c "while :; do drover controller ..."` loops around them)."""
    prefix = f"unix://{base}/machines/"
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        argv = [a.decode(errors="replace") for a in argv if a]
        if len(argv) >= 4 and argv[0].endswith("drover") and argv[1] == "controller":
            engine = argv[argv.index("--engine") + 1] if "--engine" in argv else ""
            if engine.startswith(prefix):
                found[int(pid)] = os.path.dirname(engine[len("unix://"):])
    return found


def proc_figures(pid):
    """(CPU seconds, VmRSS kB, VmHWM kB) of `pid`, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # The command may hold spaces: fields count from after its ')'.
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return None
    cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    kb = lambda k: int(status.get(k, "0 kB").split()[0])
    return cpu, kb("VmRSS"), kb("VmHWM")


def scrape(address):
    """(passes, acting) from a controller's metrics endpoint, None when it
    does not answer within half a second."""
    try:
        url = f"http://{address}:{METRICS_PORT}/metrics"
        with urllib.request.urlopen(url, timeout=0.5) as r:
            text = r.read().decode()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        if line.startswith(("drover_passes_total ", "drover_controller_acting ")):
            name, value = line.split()
            values[name] = float(value)
    return int(values.get("drover_passes_total", 0)), int(values.get("drover_controller_acting", 0))


def address_of(instance_dir):
    try:
        with open(os.path.join(instance_dir, "instance.json")) as f:
            return json.load(f)["address"]
    except (OSError, ValueError, KeyError):
        return None


class UnixHTTP(http.client.HTTPConnection):
    """HTTP to an engine's API socket."""

    def __init__(self, path):
        super().__init__("localhost", timeout=2)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(2)
        self.sock.connect(self.path)


def engine_nodes(sock):
    """The swarm's nodes as the engine at `sock` lists them, None when it
    does not answer as a manager."""
    try:
        c = UnixHTTP(sock)
        c.request("GET", "/v1.41/nodes")
        r = c.getresponse()
        body = r.read()
        c.close()
    except OSError:
        return None
    return json.loads(body) if r.status == 200 else None


def newer_managers(base, since_ms):
    """Engine sockets of the manager machines made after `since_ms`,
    newest first. A roll never demotes them: asking them cannot stretch a
    leader's self-demotion (swarm-facts.md), as asking the old leader
    would. The newest is a replaced pet once one exists, not the spare."""
    found = []
    root = os.path.join(base, "machines", "instances")
    for inst in os.listdir(root) if os.path.isdir(root) else []:
        try:
            with open(os.path.join(root, inst, "instance.json")) as f:
                rec = json.load(f)
        except (OSError, ValueError):
            continue
        if rec.get("tags", {}).get("drover.group") == "managers" and rec.get("created_ms", 0) > since_ms:
            found.append((rec["created_ms"], rec["socket"]))
    return [s for _, s in sorted(found, reverse=True)]


def record_nodes(base, since_ms, seen, f):
    """Writes each node the first time it is seen `ready`: its id, engine
    link label and `UpdatedAt` (the engine's time of its last change: the
    one that made it ready, for a new node nobody updated since)."""
    for sock in newer_managers(base, since_ms):
        nodes = engine_nodes(sock)
        if nodes is None:
            continue
        for n in nodes:
            if n["ID"] in seen or n.get("Status", {}).get("State") != "ready":
                continue
            seen.add(n["ID"])
            labels = n.get("Description", {}).get("Engine", {}).get("Labels") or {}
            row = {"node": n["ID"], "link": labels.get("drover.link"), "created": n.get("CreatedAt"),
                   "ready": n.get("UpdatedAt")}
            f.write(json.dumps(row) + "\n")
        return


def record_leaves(store, seen, f):
    """Writes each engine leave a controller reported in its heartbeat
    (`engine.left.at_ms`): where a leader's self-demotion ends (its step
    has no finished event: the controller that started it stood down). Read
    through etcd's JSON gateway, as scripts/bench-real.sh does; a beat
    vanishes with its controller, hence every second."""
    prefix = b"/drover/default/controllers/"
    body = json.dumps({"key": base64.b64encode(prefix).decode(),
                       "range_end": base64.b64encode(prefix[:-1] + b"0").decode()}).encode()
    try:
        with urllib.request.urlopen(f"http://{store}/v3/kv/range", body, timeout=0.5) as r:
            kvs = json.load(r).get("kvs", [])
    except (OSError, ValueError):
        return
    for kv in kvs:
        beat = json.loads(base64.b64decode(kv["value"]))
        beat = beat.get("data", beat)
        left = (beat.get("engine") or {}).get("left")
        if left and (beat.get("holder"), left["at_ms"]) not in seen:
            seen.add((beat.get("holder"), left["at_ms"]))
            f.write(json.dumps({"holder": beat.get("holder"), "left_ms": left["at_ms"]}) + "\n")


def sample(base, out, stop):
    """Samples every second until `stop` exists, then once more; also
    records, in OUT.nodes, when each node made meanwhile became ready and,
    in OUT.leaves, the engine leaves the controllers reported."""
    since = int(time.time() * 1000)
    store = os.environ.get("DROVER_STORE", "").removeprefix("etcd://")
    seen, seen_leaves = set(), set()
    with open(out, "a") as f, open(out + ".nodes", "a") as nodes, open(out + ".leaves", "a") as leaves:
        while True:
            last = os.path.exists(stop)
            now = int(time.time() * 1000)
            record_nodes(base, since, seen, nodes)
            record_leaves(store, seen_leaves, leaves)
            nodes.flush()
            leaves.flush()
            for pid, inst in controllers(base).items():
                figures = proc_figures(pid)
                address = address_of(inst)
                metrics = scrape(address) if address else None
                if figures is None:
                    continue
                cpu, rss, hwm = figures
                row = {"t": now, "pid": pid, "instance": os.path.basename(inst), "cpu_s": cpu,
                       "rss_kb": rss, "hwm_kb": hwm}
                if metrics is not None:
                    row["passes"], row["acting"] = metrics
                f.write(json.dumps(row) + "\n")
            f.flush()
            if last:
                return
            time.sleep(1)


# --- report ---------------------------------------------------------------

def load_json(path):
    with open(path) as f:
        return json.load(f)


def per_controller(samples_path):
    """{pid: (first sample, last sample, acting ever)} over one phase. A
    sample without metrics keeps the pass count of the one before it."""
    first, last, acting = {}, {}, collections.defaultdict(bool)
    passes = {}
    with open(samples_path) as f:
        for line in f:
            s = json.loads(line)
            pid = s["pid"]
            if "passes" in s:
                passes[pid] = s["passes"]
                acting[pid] |= bool(s["acting"])
            s["passes"] = passes.get(pid, 0)
            first.setdefault(pid, s)
            last[pid] = s
    return {pid: (first[pid], last[pid], acting[pid]) for pid in first}


def controller_figures(samples_path, since_start):
    """CPU per pass (ms), passes, CPU of the standbys (s), the acting
    controllers' peak RSS (VmHWM, MB) and RSS at the end (MB) over one
    phase. `since_start`: count from each process's start (bootstrap: every
    controller is born in it) rather than from its first sample (the roll).
    Acting: a controller whose metrics said it acted in some sample, or
    whose passes grew."""
    cpu_acting = passes = cpu_standby = 0.0
    hwm, rss_end = 0, 0
    last_t = -1
    for pid, (a, b, acting) in per_controller(samples_path).items():
        d_cpu = b["cpu_s"] - (0 if since_start else a["cpu_s"])
        d_passes = b["passes"] - (0 if since_start else a["passes"])
        if acting or d_passes > 0:
            cpu_acting += d_cpu
            passes += d_passes
            hwm = max(hwm, b["hwm_kb"])
            if b["t"] > last_t:
                last_t, rss_end = b["t"], b["rss_kb"]
        else:
            cpu_standby += d_cpu
    per_pass = 1000 * cpu_acting / passes if passes else float("nan")
    return {"cpu_ms_per_pass": per_pass, "passes": int(passes), "standby_cpu_s": cpu_standby,
            "hwm_mb": hwm / 1024, "rss_mb": rss_end / 1024}


def step_kind(reason):
    return reason.split(" ")[0] if reason else "?"


def operations(events, since_ms):
    """{op: {"group", "what", "begin", "end", "steps": [(kind, start, end, reason)]}}
    of the operations begun at or after `since_ms`; "what" is the begin
    event's reason (Provision, Roll, Retire). A step's start and end pair
    up by kind (the finished event repeats the started one's text); a step
    never finished has end None."""
    ops = collections.defaultdict(lambda: {"group": None, "what": None, "begin": None, "end": None, "steps": []})
    open_steps = collections.defaultdict(dict)
    for e in sorted(events, key=lambda e: e["at_ms"]):
        op = e.get("op")
        if not op:
            continue
        o = ops[op]
        o["group"] = o["group"] or e.get("group")
        if e["action"] == "begin":
            o["begin"], o["what"] = e["at_ms"], e.get("reason")
        elif e["action"] == "end":
            o["end"] = e["at_ms"]
        elif e["action"] == "step":
            kind = step_kind(e.get("reason"))
            if e.get("outcome") == "started":
                open_steps[op][kind] = (e["at_ms"], e.get("reason", ""))
            elif kind in open_steps[op]:
                o["steps"].append((kind, open_steps[op].pop(kind)[0], e["at_ms"], e.get("reason", "")))
    # A step whose controller stood down before it finished (a leader's
    # self-demotion): its end is left to `close_steps`.
    for op, steps in open_steps.items():
        ops[op]["steps"].extend((kind, start, None, reason) for kind, (start, reason) in steps.items())
    return {k: v for k, v in ops.items() if v["begin"] is not None and v["begin"] >= since_ms}


def parse_time(text):
    """An engine's RFC 3339 time (nanoseconds) as ms since the epoch."""
    date, frac = (text.rstrip("Z").split(".") + ["0"])[:2]
    t = datetime.datetime.fromisoformat(date).replace(tzinfo=datetime.timezone.utc)
    return t.timestamp() * 1000 + float("0." + frac) * 1000


def ready_times(nodes_path):
    """{engine link label: ms its node became ready}, from `sample`."""
    ready = {}
    if os.path.exists(nodes_path):
        with open(nodes_path) as f:
            for line in f:
                n = json.loads(line)
                if n.get("link") and n.get("ready"):
                    ready[n["link"]] = parse_time(n["ready"])
    return ready


def leave_times(leaves_path):
    """The engine leaves the controllers reported (ms), sorted."""
    if not os.path.exists(leaves_path):
        return []
    with open(leaves_path) as f:
        return sorted(json.loads(line)["left_ms"] for line in f)


def close_steps(o, leaves):
    """`o`'s steps, each unfinished one ended at the first engine leave
    reported after it began (a self-demotion: demote, out of the raft,
    leave), provided that comes before the operation's next step; the
    count of those that stay open (they count nothing)."""
    steps, still_open = [], 0
    starts = sorted(s[1] for s in o["steps"])
    for kind, start, end, reason in o["steps"]:
        if end is None:
            after = [t for t in starts if t > start]
            bound = after[0] if after else (o["end"] or float("inf"))
            end = next((t for t in leaves if start < t <= bound), None)
            if end is None:
                still_open += 1
                continue
        steps.append((kind, start, end, reason))
    return steps, still_open


def op_cost(steps, watch, ready):
    """An operation's engine-bound least time, s, from its `steps`
    (`close_steps`), and whether its new node's ready time was known.

    Every step but its (last) provision counts whole: each is one side
    effect the engines perform (drain; demote; demote self, wait out of the
    raft and leave; destroy; node rm). The provision (engine start, boot
    script, join) and the watch overlap: the controller starts watching
    the new member once its node is ready, which is before the boot script
    returns. That part lasts max(provision, ready - provision start +
    watch); when the node's ready time was not caught, max(provision,
    watch), which is less."""
    provisions = [s for s in steps if s[0] == "provision"]
    last = provisions[-1] if provisions else None
    others = sum(s[2] - s[1] for s in steps if s is not last)
    if last is None:
        return others / 1000, True
    _, start, end, reason = last
    link = reason.split("(link ", 1)[1].rstrip(")") if "(link " in reason else None
    at = ready.get(link)
    joined = (at - start) if at is not None and at >= start else 0
    return (others + max(end - start, joined + watch * 1000)) / 1000, at is not None


def minimum(ops, spec, ready, leaves):
    """The engine-bound minimum of a roll, s, its waves, how many new
    nodes' ready times were missing and how many steps stayed open.

    Within a group the operations, in the order they began, make waves of
    `max_in_flight` (the first `canaries` alone first; managers one at a
    time); a wave lasts as long as its slowest operation (`op_cost`). The
    groups roll one after another, in the spec's order, except a group's
    retirements (the managers' temporary spare, retired once every pet is
    replaced), which the planner runs beside the next group's roll: the
    minimum is the sum over groups of max(its waves, the retirements of
    the group before), plus the last group's retirements."""
    waves, missing, still_open, total, carry = [], 0, 0, 0.0, 0.0
    for group, g in spec.items():
        mine = sorted((o for o in ops.values() if o["group"] == group), key=lambda o: o["begin"])
        rolls, retires = [], []
        for o in mine:
            steps, unended = close_steps(o, leaves)
            cost, known = op_cost(steps, g["watch"], ready)
            missing += not known
            still_open += unended
            (retires if o["what"] == "Retire" else rolls).append(cost)
        sizes = [1] * min(g["canaries"], len(rolls))
        while sum(sizes) < len(rolls):
            sizes.append(g["max_in_flight"])
        i, rolled = 0, 0.0
        for n in sizes:
            waves.append((group, len(rolls[i:i + n]), max(rolls[i:i + n])))
            rolled += waves[-1][2]
            i += n
        total += max(rolled, carry)
        carry = sum(retires)
        waves.extend((f"{group} retire", 1, c) for c in retires)
    return total + carry, waves, missing, still_open


def overlapping_groups(ops, order):
    """Whether a group's rolling operations began before the group ahead
    of it had ended its own (the minimum assumes they did not)."""
    ends = {}
    for o in ops.values():
        if o["what"] != "Retire":
            g = ends.setdefault(o["group"], [float("inf"), 0])
            g[0] = min(g[0], o["begin"])
            g[1] = max(g[1], o["end"] or o["begin"])
    spans = [ends[g] for g in order if g in ends]
    return any(a[1] > b[0] for a, b in zip(spans, spans[1:]))


def bootstrap(ops, groups, ready):
    """A bootstrap's machine-bound minimum, s: each manager's provision,
    join and watch (`op_cost`), one after another, the workers all at once
    (the slowest) beside the second and later managers; and its time at fault tolerance 0, s, against
    the least that can be: from the first manager's node ready to the
    third's (three managers tolerate one loss), and the least the rules
    allow for it — one manager operation at a time, each member's health
    watched before the next is added (a joining voter counts before it
    has caught up: swarm-facts.md) — the first's watch, the second's add
    (provision start → node ready) and watch, the third's add. None where
    a ready time was not caught."""
    def cost(o, group):
        return op_cost(close_steps(o, [])[0], groups[group]["watch"], ready)[0]

    managers = sorted((o for o in ops.values() if o["group"] == "managers" and o["what"] == "Provision"),
                      key=lambda o: o["begin"])
    workers = [o for o in ops.values() if o["group"] != "managers" and o["what"] == "Provision"]
    # The workers join once the first manager exists, beside the others.
    costs = [cost(o, "managers") for o in managers]
    slowest_worker = max((cost(o, o["group"]) for o in workers), default=0)
    least = (costs[0] if costs else 0) + max(sum(costs[1:]), slowest_worker)

    def add(o):
        """(provision start, node ready) of a manager's operation."""
        p = [s for s in o["steps"] if s[0] == "provision"]
        reason = p[-1][3] if p else ""
        link = reason.split("(link ", 1)[1].rstrip(")") if "(link " in reason else None
        return (p[-1][1] if p else None), ready.get(link)

    adds = [add(o) for o in managers]
    first_ready = min(ready.values(), default=None)
    if len(adds) < 2 or first_ready is None or any(r is None or s is None for s, r in adds[-2:]):
        return least, None, None
    ft0 = (adds[-1][1] - first_ready) / 1000
    joins = sum(r - s for s, r in adds[-2:]) / 1000 + 2 * groups["managers"]["watch"]
    return least, ft0, joins


COLUMNS = ["workers", "nodes", "run", "boot_s", "boot_printed_s", "boot_min_s", "boot_ratio", "ft0_s", "ft0_joins_s",
           "boot_cpu_ms_per_pass", "boot_passes",
           "boot_rss_mb", "boot_hwm_mb", "roll_s", "min_s", "ratio", "roll_cpu_ms_per_pass", "roll_passes",
           "roll_rss_mb", "roll_hwm_mb", "roll_standby_cpu_s", "ready_missing", "open_steps", "overlap", "waves"]


def run_row(res, workers, run):
    """One TSV row: the figures of size `workers`, run `run`."""
    meta = load_json(f"{res}/{workers}-{run}.json")
    ops = operations(load_json(f"{res}/events-{workers}-{run}-roll.json"), meta["roll_start_ms"])
    ready = ready_times(f"{res}/samples-{workers}-{run}-roll.jsonl.nodes")
    leaves = leave_times(f"{res}/samples-{workers}-{run}-roll.jsonl.leaves")
    least, waves, missing, still_open = minimum(ops, meta["groups"], ready, leaves)
    roll_s = (meta["roll_end_ms"] - meta["roll_start_ms"]) / 1000
    boot = controller_figures(f"{res}/samples-{workers}-{run}-boot.jsonl", since_start=True)
    boot_s = (meta["boot_end_ms"] - meta["boot_start_ms"]) / 1000
    boot_ops = {k: o for k, o in operations(load_json(f"{res}/events-{workers}-{run}-boot.json"),
                                            meta["boot_start_ms"]).items() if o["begin"] < meta["boot_end_ms"]}
    boot_ready = ready_times(f"{res}/samples-{workers}-{run}-boot.jsonl.nodes")
    boot_least, ft0, ft0_joins = bootstrap(boot_ops, meta["groups"], boot_ready)
    nan = float("nan")
    roll = controller_figures(f"{res}/samples-{workers}-{run}-roll.jsonl", since_start=False)
    return {
        "workers": workers, "nodes": workers + 3, "run": run,
        "boot_s": boot_s, "boot_min_s": boot_least,
        "boot_ratio": boot_s / boot_least if boot_least else nan,
        "ft0_s": nan if ft0 is None else ft0, "ft0_joins_s": nan if ft0_joins is None else ft0_joins,
        "boot_printed_s": meta.get("boot_printed_s", float("nan")),
        "boot_cpu_ms_per_pass": boot["cpu_ms_per_pass"], "boot_passes": boot["passes"],
        "boot_rss_mb": boot["rss_mb"], "boot_hwm_mb": boot["hwm_mb"],
        "roll_s": roll_s, "min_s": least, "ratio": roll_s / least if least else float("nan"),
        "roll_cpu_ms_per_pass": roll["cpu_ms_per_pass"], "roll_passes": roll["passes"],
        "roll_rss_mb": roll["rss_mb"], "roll_hwm_mb": roll["hwm_mb"],
        "roll_standby_cpu_s": roll["standby_cpu_s"],
        "waves": " ".join(f"{g}:{n}:{c:.2f}" for g, n, c in waves),
        "overlap": int(overlapping_groups(ops, list(meta["groups"]))),
        "ready_missing": missing,
        "open_steps": still_open,
    }


def cell(rows, key, digits):
    values = [r[key] for r in rows]
    med = statistics.median(values)
    runs = " ".join(f"{v:.{digits}f}" for v in values)
    return f"{med:.{digits}f}" + (f" ({runs})" if len(values) > 1 else "")


def report(res):
    rows = []
    for name in sorted(os.listdir(res)):
        stem = name[:-len(".json")]
        if name.endswith(".json") and stem.count("-") == 1 and stem.replace("-", "").isdigit():
            workers, run = map(int, stem.split("-"))
            if os.path.exists(f"{res}/samples-{workers}-{run}-roll.jsonl"):
                rows.append(run_row(res, workers, run))
    rows.sort(key=lambda r: (r["workers"], r["run"]))
    with open(f"{res}/scale.tsv", "w") as f:
        f.write("\t".join(COLUMNS) + "\n")
        for r in rows:
            f.write("\t".join(f"{r[c]:.4f}" if isinstance(r[c], float) else str(r[c]) for c in COLUMNS) + "\n")
    by_size = collections.defaultdict(list)
    for r in rows:
        by_size[r["workers"]].append(r)
    lines = [
        ("bootstrap: `apply` from nothing to converged, s", "boot_s", 1),
        ("bootstrap: `apply`'s printed \"converged after\", s", "boot_printed_s", 1),
        ("bootstrap: machine-bound minimum (managers' provision + join + watch in turn, the workers beside them), s", "boot_min_s", 1),
        ("bootstrap: **ratio** (target ≤ 1.2)", "boot_ratio", 3),
        ("bootstrap: at fault tolerance 0 (first manager ready → third ready), s", "ft0_s", 1),
        ("bootstrap: the least for it: the first's watch, the second's add and watch, the third's add, s", "ft0_joins_s", 1),
        ("bootstrap: controllers' CPU per pass, ms", "boot_cpu_ms_per_pass", 2),
        ("bootstrap: passes", "boot_passes", 0),
        ("bootstrap: acting controller's peak RSS (VmHWM), MB", "boot_hwm_mb", 1),
        ("roll: `apply` to converged, s", "roll_s", 1),
        ("roll: engine-bound minimum, s", "min_s", 1),
        ("roll: **ratio** (target ≤ 1.10)", "ratio", 3),
        ("roll: acting controllers' CPU per pass, ms", "roll_cpu_ms_per_pass", 2),
        ("roll: passes", "roll_passes", 0),
        ("roll: acting controller's RSS at the end, MB", "roll_rss_mb", 1),
        ("roll: acting controllers' peak RSS (VmHWM), MB", "roll_hwm_mb", 1),
        ("roll: standby controllers' CPU, s", "roll_standby_cpu_s", 2),
    ]
    for workers, rs in sorted(by_size.items()):
        print(f"\n### {workers + 3} nodes: 3 managers + {workers} workers ({len(rs)} run{'s' * (len(rs) > 1)}, medians)\n")
        print("| figure | median (runs) |")
        print("|---|---|")
        for label, key, digits in lines:
            print(f"| {label} | {cell(rs, key, digits)} |")
        print(f"\nWaves of run {rs[0]['run']} (group:operations:seconds): {rs[0]['waves']}")
        if any(r["overlap"] for r in rs):
            print("\n**Note**: a group's roll began before the one ahead of it ended: the minimum (their sum) overstates it.")
        if any(r["ready_missing"] for r in rs):
            print(f"\n**Note**: {sum(r['ready_missing'] for r in rs)} new nodes' ready time was not caught: their watch counted from the provision's start (a lower minimum).")
        if any(r["open_steps"] for r in rs):
            print(f"\n**Note**: {sum(r['open_steps'] for r in rs)} unfinished steps (self-demotions) had no reported leave: they count nothing (a lower minimum).")
    print(f"\nTSV: {res}/scale.tsv")


def main(argv):
    if len(argv) == 4 and argv[0] == "sample":
        sample(*argv[1:])
    elif len(argv) == 2 and argv[0] == "report":
        report(argv[1])
    else:
        print("usage: bench_scale.py sample BASE OUT STOP | report RESULTS", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
