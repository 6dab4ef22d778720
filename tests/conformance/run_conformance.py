"""Run the differential check: N random scenarios through panes' core and Beam Python, then report.

    python tests/conformance/run_conformance.py [--n 500] [--seed 0] [--jobs 2] [--out DIR]

Beam runs in its own interpreter ($BEAM_PYTHON, else .venv-conformance: ``make conformance`` makes
it). Writes DIR/report.jsonl (every scenario's differences) and DIR/unexplained.txt, prints the
accepted differences per item of KNOWN_DIFFERENCES.md, and exits 1 when a difference is left that
no item explains.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.conformance import beam_diff as bd  # noqa: E402


def report(out: Path, scenarios: list, beam: dict, outcomes: list) -> list:
    """Write the report files, print the summary; return the scenarios with unexplained differences."""
    out.mkdir(parents=True, exist_ok=True)
    accepted: collections.Counter = collections.Counter()
    scenarios_with: collections.Counter = collections.Counter()
    unexplained = []
    for oc in outcomes:
        items = {d.accepted_by for d in oc.diffs if d.accepted_by}
        accepted.update(d.accepted_by for d in oc.diffs if d.accepted_by)
        scenarios_with.update(items)
    with open(out / "report.jsonl", "w") as f:
        for sc, oc in zip(scenarios, outcomes):
            f.write(
                json.dumps(
                    {
                        "id": sc["id"],
                        "trigger": bd.trigger_text(sc["trigger"]),
                        "window": sc["window"],
                        "accumulation": sc["accumulation"],
                        "lateness": sc["lateness"],
                        "beam_status": beam[sc["id"]]["status"],
                        "status": oc.status,
                        "diffs": [bd.diff_text(d) for d in oc.diffs],
                    }
                )
                + "\n"
            )
    with open(out / "unexplained.txt", "w") as f:
        for sc, oc in zip(scenarios, outcomes):
            if oc.unexplained:
                unexplained.append(sc)
                f.write(
                    f"== {sc['id']} {bd.trigger_text(sc['trigger'])} {sc['window']} {sc['accumulation']} "
                    f"lateness={sc['lateness']} beam={beam[sc['id']]['status']}\n"
                )
                f.writelines("   " + bd.diff_text(d) + "\n" for d in oc.unexplained)
    statuses = collections.Counter(beam[sc["id"]]["status"] for sc in scenarios)
    refused = sum(oc.status == "panes_refused" for oc in outcomes)
    print(f"scenarios: {len(scenarios)}; beam status: {dict(statuses)}; refused by panes: {refused}")
    print("accepted differences by known item (differences / scenarios):")
    for k in sorted(accepted, key=lambda x: int(x[1:])):
        print(f"  {k}: {accepted[k]} / {scenarios_with[k]}")
    n = sum(len(oc.unexplained) for oc in outcomes)
    print(f"unexplained: {n} differences in {len(unexplained)} scenarios (see {out}/unexplained.txt)")
    return unexplained


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2, help="Beam worker processes")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--ids", default=None, help="comma-separated seeds to run instead of a range")
    ap.add_argument("--save-beam", default=None, help="write Beam's results (JSON) to this file")
    ap.add_argument("--load-beam", default=None, help="read Beam's results from this file instead of running Beam")
    args = ap.parse_args(argv)

    t0 = time.time()
    seeds = [int(s) for s in args.ids.split(",")] if args.ids else list(range(args.seed, args.seed + args.n))
    scenarios = [bd.generate(s) for s in seeds]
    if args.load_beam:
        beam = json.loads(Path(args.load_beam).read_text())
    else:
        python = bd.beam_python()
        chunks = [scenarios[i :: args.jobs] for i in range(args.jobs)]
        with ThreadPoolExecutor(args.jobs) as ex:
            parts = list(ex.map(lambda c: bd.run_beam(c, python), chunks))
        beam = {k: v for part in parts for k, v in part.items()}
    if args.save_beam:
        Path(args.save_beam).write_text(json.dumps(beam))
    t_beam = time.time() - t0
    outcomes = [bd.compare(sc, bd.run_panes(sc), beam[sc["id"]]) for sc in scenarios]
    unexplained = report(Path(args.out), scenarios, beam, outcomes)
    print(f"time: {time.time() - t0:.1f} s (Beam {t_beam:.1f} s in {args.jobs} workers)")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
