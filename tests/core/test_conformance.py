"""Apache Beam's trigger transcripts (tests/conformance/beam_trigger_transcripts.yaml, vendored from the
apache-beam 2.77.0 wheel) replayed on the core engine with tests/conformance/transcript_replayer.py:
positive transcripts must pass; negative ones (with ``error:``) must fail with a TranscriptMismatch
whose message matches the regex.

Also, as Beam's TestStream harness does, the Default-trigger accumulating transcripts must give the
same panes whatever the bundling and order of each input, and the checker must not be vacuous: a
corrupted expectation must be caught."""

from __future__ import annotations

import copy
import hashlib
import re
from pathlib import Path

import pytest

from tests.conformance.transcript_replayer import TranscriptMismatch, load_transcripts, run_transcript

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "conformance" / "beam_trigger_transcripts.yaml"
# apache_beam/testing/data/trigger_transcripts.yaml in the apache-beam 2.77.0 wheel (tests/conformance/NOTICE)
BEAM_2_77_SHA256 = "2b5f54124c277e055274d4bccba126b11c8168d0b0a5d02103e9a0754bed8dea"
DOCS = load_transcripts(str(TRANSCRIPTS))


def _ids(docs):
    return [f"{i:02d}-{d['name']}" for i, d in docs]


POSITIVE = [(i, d) for i, d in enumerate(DOCS) if "error" not in d]
NEGATIVE = [(i, d) for i, d in enumerate(DOCS) if "error" in d]


def test_the_vendored_file_is_beams_2_77_copy_byte_for_byte():
    assert hashlib.sha256(TRANSCRIPTS.read_bytes()).hexdigest() == BEAM_2_77_SHA256


def test_the_file_holds_the_2_77_corpus():
    assert len(DOCS) == 18
    assert len(POSITIVE) == 13 and len(NEGATIVE) == 5
    names = [d["name"] for d in DOCS]
    assert names.count("timestamp_combiner_custom_timestamping_earliest") == 2


@pytest.mark.parametrize("doc", [d for _, d in POSITIVE], ids=_ids(POSITIVE))
def test_positive_transcript_passes(doc):
    checked = run_transcript(doc)
    expected = sum(len(a["expect"]) for a in doc["transcript"] if "expect" in a)
    assert checked == expected


@pytest.mark.parametrize("doc", [d for _, d in NEGATIVE], ids=_ids(NEGATIVE))
def test_negative_transcript_fails_with_the_expected_error(doc):
    with pytest.raises(TranscriptMismatch) as ei:
        run_transcript(doc)
    assert re.search(doc["error"], str(ei.value)), str(ei.value)


# -- bundling and order do not matter (Beam's TestStream variants) --------------------------------


def _is_default_accumulating(doc) -> bool:
    return (
        doc.get("trigger_fn", "Default") in ("Default", "Default()")
        and str(doc.get("accumulation_mode", "accumulating")).lower() == "accumulating"
    )


def _rebundle(doc, how):
    out = copy.deepcopy(doc)
    actions = []
    for a in out["transcript"]:
        if "input" not in a:
            actions.append(a)
            continue
        xs = list(a["input"])
        if how == "reversed":
            actions.append({"input": xs[::-1]})
        elif how == "one_per_bundle":
            actions.extend({"input": [x]} for x in xs)
        elif how == "one_per_bundle_reversed":
            actions.extend({"input": [x]} for x in xs[::-1])
        elif how == "two_per_bundle":
            actions.extend({"input": xs[i : i + 2]} for i in range(0, len(xs), 2))
        elif how == "shuffled":
            k = len(xs) // 2
            actions.append({"input": xs[k:] + xs[:k]})
    out["transcript"] = actions
    return out


DEFAULT_ACC = [(i, d) for i, d in POSITIVE if _is_default_accumulating(d)]


@pytest.mark.parametrize("how", ["reversed", "shuffled", "one_per_bundle", "one_per_bundle_reversed", "two_per_bundle"])
@pytest.mark.parametrize("doc", [d for _, d in DEFAULT_ACC], ids=_ids(DEFAULT_ACC))
def test_default_accumulating_transcripts_do_not_depend_on_bundling(doc, how):
    run_transcript(_rebundle(doc, how))


# -- the checker catches wrong expectations ---------------------------------------------------------


def _corrupt_values(doc):
    out = copy.deepcopy(doc)
    for a in out["transcript"]:
        if "expect" in a:
            for pane in a["expect"]:
                if "values" in pane:
                    pane["values"] = list(pane["values"]) + [999]
                    return out
    return None


def _drop_one_expected(doc):
    out = copy.deepcopy(doc)
    for a in out["transcript"]:
        if "expect" in a and a["expect"]:
            a["expect"] = a["expect"][:-1]
            return out
    return None


@pytest.mark.parametrize("doc", [d for _, d in POSITIVE], ids=_ids(POSITIVE))
def test_corrupted_expectations_are_caught(doc):
    bad = _corrupt_values(doc)
    if bad is not None:
        with pytest.raises(TranscriptMismatch, match="Unmatched output"):
            run_transcript(bad)
    short = _drop_one_expected(doc)
    assert short is not None
    with pytest.raises(TranscriptMismatch, match="Unexpected output"):
        run_transcript(short)
