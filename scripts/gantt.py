#!/usr/bin/env python3
"""Draws a task log as a per-worker Gantt chart in SVG, and prints each worker's busy and idle time over
the span of the run. The log is either starfa's own (starfa train --task-log FILE.csv) or StarPU's FxT
trace converted by starfa's --trace DIR (DIR/tasks.rec; the worker states of DIR/trace.rec beside it add
each worker's time waiting for its input data, the transfers, drawn as a grey strip under its tasks).

    scripts/gantt.py LOG.csv|tasks.rec OUT.svg [--title TEXT] [--from S] [--to S]

Each worker is a row, each task a bar coloured by its codelet; --from and --to show a window of the run
(seconds). Exit status 1 on an unreadable or empty log, 2 on a usage error."""
import csv
import html
import os
import sys

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac", "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02"]


def usage(msg):
    sys.stderr.write("gantt.py: %s\nusage: gantt.py LOG.csv|tasks.rec OUT.svg [--title TEXT] [--from S] [--to S]\n" % msg)
    sys.exit(2)


def rec_records(path):
    """The records of a recutils file (StarPU's tasks.rec, trace.rec): dicts of its fields."""
    record = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if record:
                    yield record
                record = {}
            elif not line.startswith("#") and ": " in line:
                key, value = line.split(": ", 1)
                record[key] = value
    if record:
        yield record


def read_tasks_rec(path):
    """Tasks of StarPU's tasks.rec (times in ms) as (codelet, worker, name, start_s, end_s)."""
    tasks = []
    for r in rec_records(path):
        if "StartTime" not in r or "EndTime" not in r or "WorkerId" not in r:
            continue
        w = int(r["WorkerId"])
        tasks.append((r.get("Name", "?"), w, "worker %d" % w, float(r["StartTime"]) * 1e-3,
                      float(r["EndTime"]) * 1e-3))
    return tasks


def read_fetching(path):
    """Per worker, the intervals (s) it spent in StarPU's FetchingInput state (waiting for transfers):
    a worker's SetState events each hold until its next one."""
    events = {}
    for r in rec_records(path):
        if r.get("E") == "SetState" and "W" in r and "S" in r and int(r["W"]) >= 0:
            events.setdefault(int(r["W"]), []).append((float(r["S"]) * 1e-3, r.get("N")))
    out = {}
    for w, ev in events.items():
        ev.sort()
        out[w] = [(t, ev[i + 1][0]) for i, (t, name) in enumerate(ev[:-1]) if name == "FetchingInput"]
    return out


def main(argv):
    args, opts = [], {"--title": None, "--from": None, "--to": None}
    i = 1
    while i < len(argv):
        if argv[i] in opts:
            if i + 1 >= len(argv):
                usage("%s needs a value" % argv[i])
            opts[argv[i]] = argv[i + 1]
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 2:
        usage("need the log and the output")
    fetching = {}
    try:
        if args[0].endswith(".rec"):
            tasks = read_tasks_rec(args[0])
            states = os.path.join(os.path.dirname(args[0]), "trace.rec")
            if os.path.exists(states):
                fetching = read_fetching(states)
        else:
            with open(args[0], newline="") as f:
                rows = list(csv.DictReader(f))
            tasks = [(r["codelet"], int(r["worker"]), r["worker_name"], float(r["start_s"]), float(r["end_s"]))
                     for r in rows]
    except (OSError, KeyError, ValueError) as e:
        sys.stderr.write("gantt.py: cannot read the task log %s: %s\n" % (args[0], e))
        return 1
    if not tasks:
        sys.stderr.write("gantt.py: %s holds no tasks\n" % args[0])
        return 1
    lo = float(opts["--from"]) if opts["--from"] else min(t[3] for t in tasks)
    hi = float(opts["--to"]) if opts["--to"] else max(t[4] for t in tasks)
    if not hi > lo:
        usage("empty window")
    tasks = [t for t in tasks if t[4] > lo and t[3] < hi]
    workers = sorted({(t[1], t[2]) for t in tasks})
    codelets = sorted({t[0] for t in tasks})
    colour = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(codelets)}
    busy = {w[0]: 0.0 for w in workers}
    for c, w, _, s, e in tasks:
        busy[w] += min(e, hi) - max(s, lo)
    span = hi - lo
    print("span %.6f s, %d tasks" % (span, len(tasks)))
    fetch = {w[0]: sum(max(0.0, min(e, hi) - max(s, lo)) for s, e in fetching.get(w[0], [])) for w in workers}
    for w, name in workers:
        print("  %-40s busy %.6f s (%.1f%%), idle %.6f s%s" % (
            name, busy[w], 100 * busy[w] / span, span - busy[w],
            ", waiting for input %.6f s" % fetch[w] if fetching else ""))

    left, width, row_h, top = 260, 1100, 22, 40
    height = top + row_h * len(workers) + 40 + 18 * ((len(codelets) + 3) // 4)
    x = lambda t: left + (t - lo) / span * width
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="12">' % (left + width + 20, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="20" font-size="14">%s</text>' % html.escape(
               opts["--title"] or "%s: %d tasks over %.3f s" % (args[0], len(tasks), span))]
    row = {w[0]: i for i, w in enumerate(workers)}
    for w, name in workers:
        y = top + row[w] * row_h
        out.append('<text x="10" y="%d">%s (%.0f%% busy)</text>' % (y + 15, html.escape(name[:32]),
                                                                 100 * busy[w] / span))
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="#f4f4f4"/>' % (left, y + 2, width, row_h - 4))
    for c, w, _, s, e in tasks:
        x0, x1 = x(max(s, lo)), x(min(e, hi))
        out.append('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s"><title>%s %.6f-%.6f s</title></rect>'
                   % (x0, top + row[w] * row_h + 2, max(x1 - x0, 0.3), row_h - 4, colour[c], html.escape(c), s, e))
    for w, intervals in fetching.items():
        if w not in row:
            continue
        for s0, e0 in intervals:
            if e0 > lo and s0 < hi:
                x0, x1 = x(max(s0, lo)), x(min(e0, hi))
                out.append('<rect x="%.2f" y="%d" width="%.2f" height="3" fill="#555"><title>waiting for input '
                           '%.6f-%.6f s</title></rect>' % (x0, top + row[w] * row_h + row_h - 5, max(x1 - x0, 0.3),
                                                           s0, e0))
    y = top + row_h * len(workers) + 16
    out.append('<text x="%d" y="%d">%.6f s</text><text x="%d" y="%d" text-anchor="end">%.6f s</text>'
               % (left, y, lo, left + width, y, hi))
    for i, c in enumerate(codelets):
        lx, ly = 10 + (i % 4) * 300, y + 20 + (i // 4) * 18
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>'
                   % (lx, ly - 10, colour[c], lx + 16, ly, html.escape(c)))
    out.append("</svg>\n")
    try:
        with open(args[1] + ".tmp", "w") as f:
            f.write("\n".join(out))
        os.replace(args[1] + ".tmp", args[1])
    except OSError as e:
        sys.stderr.write("gantt.py: cannot write %s: %s\n" % (args[1], e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
