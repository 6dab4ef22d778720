"""Record Beam Python's panes for a small, varied set of generated scenarios, for the bounded slice
of the differential check that ``make test`` runs without Beam (test_recorded_beam.py):

    python tests/conformance/record_beam_fixtures.py [--seeds 0-499] [--count 30] [--load-beam FILE]

From the seeds' scenarios it keeps, in seed order, the first whose (window kind, trigger kind,
accumulation mode) is not taken yet and whose comparison with panes is not accepted wholesale by
a scenario-level item, until it has ``count``; then fills up with the next ones. Each entry holds the
neutral scenario itself and Beam's result, so the file does not depend on the generator.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.conformance import beam_diff as bd  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "beam_python_2_77_recorded.json"


def choose(scenarios: list[dict], beam: dict, count: int) -> list[dict]:
    usable = [
        sc
        for sc in scenarios
        if beam[sc["id"]]["status"] in ("ok", "stall") and beam[sc["id"]]["panes"] and bd.scenario_item(sc) is None
    ]
    chosen, seen = [], set()
    for sc in usable:
        kind = (sc["window"]["kind"], sc["trigger"][0], sc["accumulation"])
        if kind not in seen:
            seen.add(kind)
            chosen.append(sc)
    chosen += [sc for sc in usable if sc not in chosen][: max(0, count - len(chosen))]
    return sorted(chosen[:count], key=lambda sc: sc["seed"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0-499")
    ap.add_argument("--count", type=int, default=30)
    ap.add_argument("--load-beam", default=None, help="Beam's results from run_conformance.py --save-beam")
    args = ap.parse_args(argv)
    lo, hi = (int(x) for x in args.seeds.split("-"))
    scenarios = [bd.generate(s) for s in range(lo, hi + 1)]
    if args.load_beam:
        beam = json.loads(Path(args.load_beam).read_text())
    else:
        beam = bd.run_beam(scenarios)
    chosen = choose(scenarios, beam, args.count)
    entries = [{"scenario": sc, "beam": {k: v for k, v in beam[sc["id"]].items() if k != "seconds"}} for sc in chosen]
    lines = ",\n".join(json.dumps(e, separators=(",", ":")) for e in entries)
    FIXTURES.write_text(
        f'{{"beam": "apache-beam 2.77.0, DirectRunner, TestStream (beam_side.py)",\n"scenarios": [\n{lines}\n]}}\n'
    )
    print(f"{len(entries)} scenarios: seeds {[sc['seed'] for sc in chosen]} -> {FIXTURES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
