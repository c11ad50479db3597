"""Score the classifier against the simulator's ground truth (used by tests and by hand)."""

from __future__ import annotations

import csv
from pathlib import Path

from forensics.ingest.case import load_case
from forensics.kinds import KINDS
from forensics.findings import build_document


def truth_of(out_dir: Path) -> dict[tuple, str]:
    with open(out_dir / "truth.csv", newline="", encoding="utf-8") as handle:
        return {(r["campaign"], r["step"], r["recipient"]): r["kind"] for r in csv.DictReader(handle)}


def predicted_of(files) -> dict[tuple, str]:
    document = build_document(load_case([str(f) for f in files]))
    return {(a["campaign"] or "", a["step"] or "", a["recipient"]): a["kind"] for a in document["affected"]}


def f1_by_kind(truth: dict, predicted: dict) -> dict[str, float]:
    scores = {}
    for kind in KINDS:
        t = {k for k, v in truth.items() if v == kind}
        p = {k for k, v in predicted.items() if v == kind}
        if not t and not p:
            continue
        tp = len(t & p)
        scores[kind] = 2 * tp / (len(t) + len(p))
    return scores


def false_people(truth: dict, predicted: dict) -> set:
    """People reported as duplicates who are not (a 'not a duplicate' case reported)."""
    return set(predicted) - set(truth)


if __name__ == "__main__":
    import sys
    import tempfile

    from forensics.simulate.run import KINDS as SCENARIOS, simulate

    kinds = sys.argv[1:] or SCENARIOS
    for thin in (False, True):
        for kind in kinds:
            for syntax in ("logfmt", "jsonl", "csv", "mixed"):
                with tempfile.TemporaryDirectory() as tmp:
                    result = simulate(kind, 1500, Path(tmp), seed=7, syntax=syntax, thin=thin)
                    truth, predicted = truth_of(Path(tmp)), predicted_of(result.files)
                    scores = f1_by_kind(truth, predicted)
                    print(f"thin={thin!s:5} {kind:17} {syntax:6} truth={len(truth):4} "
                          f"false={len(false_people(truth, predicted))} "
                          + " ".join(f"{k}={v:.3f}" for k, v in scores.items()))
