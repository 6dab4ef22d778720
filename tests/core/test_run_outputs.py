"""Where ``panes run`` writes: with the panes on stdout as JSON lines, the dead letters never mix
into them (a console's tables go to stderr; a stdout dead-letter sink is refused before Spark
starts); ``--report`` into a directory that does not exist is refused in one line, for a multi-stage
spec too. No Spark here: every case stops before a session starts."""

import json

from click.testing import CliRunner

from panes import cli
from panes.spec import SinkSpec, dead_letter_sink


def _spec(tmp_path, **changes) -> str:
    (tmp_path / "data").mkdir()
    doc = {
        "source": {"format": "json", "path": str(tmp_path / "data"), "schema": "k STRING, t STRING"},
        "event_time": "t",
        "key": "k",
        "window": {"tumbling": {"size": "1 hour"}},
        "aggregates": {"n": {"count": "*"}},
        "checkpoint": str(tmp_path / "checkpoint"),
        **changes,
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_console_dead_letter_sink_prints_to_stderr_when_the_panes_go_to_stdout():
    stdout, console, json_file = (
        SinkSpec(format="stdout"),
        SinkSpec(format="console"),
        SinkSpec(format="json", path="d"),
    )
    to_stderr = SinkSpec(format="console", options={"to": "stderr"})
    assert dead_letter_sink(stdout, None) == to_stderr
    assert dead_letter_sink(stdout, console) == to_stderr
    assert dead_letter_sink(stdout, json_file) == json_file
    assert dead_letter_sink(console, None) == console
    assert dead_letter_sink(json_file, console) == console


def test_a_console_sink_prints_to_stdout_or_stderr_only(tmp_path):
    done = CliRunner().invoke(
        cli.main, ["run", _spec(tmp_path, dead_letter={"format": "console", "options": {"to": "file"}})]
    )
    assert (done.exit_code, done.stderr.strip()) == (
        2,
        "error: dead_letter: a console sink's options.to is stdout or stderr, not 'file'",
    )


def test_dead_letters_on_stdout_beside_the_panes_are_refused_naming_the_field(tmp_path):
    reason = (
        "error: dead_letter.format: stdout carries the panes as JSON lines: write the dead letters to a file, "
        "or to the console (its tables then go to stderr)"
    )
    done = CliRunner().invoke(cli.main, ["run", _spec(tmp_path, dead_letter={"format": "stdout"}), "--stdout"])
    assert (done.exit_code, done.stdout, done.stderr.strip()) == (2, "", reason)
    (tmp_path / "again").mkdir()
    spec = _spec(tmp_path / "again", sink={"format": "stdout"}, dead_letter={"format": "stdout"})
    done = CliRunner().invoke(cli.main, ["run", spec])
    assert (done.exit_code, done.stderr.strip()) == (2, reason)


def test_a_report_of_a_multi_stage_run_into_no_directory_is_refused_before_spark_starts(tmp_path):
    spec = tmp_path / "stages.json"
    spec.write_text(json.dumps({"inputs": {}, "stages": []}))
    page = tmp_path / "nowhere" / "page.html"
    done = CliRunner().invoke(cli.main, ["run", str(spec), "--report", str(page)])
    assert (done.exit_code, done.stderr.strip()) == (2, f"error: --report: cannot write {page}: no such directory")
