"""The ``panes`` command line: run, validate, replay, explain.

A mistake in a spec, its paths or its columns is one ``error: FIELD: reason`` line per problem,
exit code 2, found before Spark starts where it can be. Any other failure is one line naming its
cause and the file that holds the full traceback (``--debug`` prints it instead), exit code 1.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import click

from .spec import RunSpec, SpecError

CONTEXT = {"help_option_names": ["-h", "--help"]}
#: Spark's log levels (panes' own logger takes the same, WARN as WARNING)
LOG_LEVELS = ("ERROR", "WARN", "INFO", "DEBUG")


def _fail(e: SpecError) -> None:
    """A user's mistake: one ``error:`` line per thing wrong, exit code 2."""
    for err in e.errors:
        click.echo(f"error: {err}", err=True)
    sys.exit(2)


def cause(e: BaseException) -> str:
    """The first line of an exception's message with its type (a Spark error's message goes on
    with the JVM's stack)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    first = lines[0] if lines else "(no message)"
    if len(first) > 300:
        first = first[:297] + "..."
    return f"{type(e).__name__}: {first}"


def traceback_file() -> Path:
    """Where a failure's traceback is written: ``$PANES_ERROR_DIR`` (default: the temporary directory)."""
    directory = Path(os.environ.get("PANES_ERROR_DIR") or tempfile.gettempdir())
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"panes-error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"


def _crash(e: BaseException, debug: bool) -> None:
    text = "".join(traceback.format_exception(e))
    if debug:
        click.echo(text, err=True, nl=False)
        click.echo(f"error: {cause(e)}", err=True)
        sys.exit(1)
    try:
        path = traceback_file()
        path.write_text(text)
        where = f"full traceback in {path}; --debug prints it"
    except OSError as oe:
        where = f"the traceback could not be written: {oe}; --debug prints it"
    click.echo(f"error: {cause(e)} ({where})", err=True)
    sys.exit(1)


def _quiet_broken_pipe() -> None:
    """The reader of stdout went away (``panes replay ... | head -1``): stop without a word."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


def command(f):
    """A command with ``--debug`` and ``--log-level``, whose failures end as the module says."""

    @click.option("--debug", is_flag=True, help="On a failure, print the full traceback.")
    @click.option(
        "--log-level",
        type=click.Choice(LOG_LEVELS, case_sensitive=False),
        default=None,
        help="Log level of panes and Spark (default: WARN for panes, ERROR for Spark; or PANES_LOG_LEVEL).",
    )
    @functools.wraps(f)
    def run(*args, debug: bool, log_level: str | None, **kwargs):
        _logging(log_level)
        try:
            return f(*args, **kwargs)
        except SpecError as e:
            _fail(e)
        except BrokenPipeError:
            _quiet_broken_pipe()
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except (click.exceptions.Exit, click.ClickException):
            raise
        except Exception as e:
            _crash(e, debug)

    return run


def _logging(level: str | None) -> None:
    level = (level or os.environ.get("PANES_LOG_LEVEL") or "").upper()
    if level:
        os.environ["PANES_SPARK_LOG_LEVEL"] = level  # (read when the Spark session starts)
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("panes").setLevel({"WARN": "WARNING"}.get(level, level) or "WARNING")


def check_plan(spec: RunSpec) -> None:
    """A stream forced onto the native plan (or its sink form, arrow) must be one it can run:
    checked before Spark starts."""
    plan = spec.spark.plan
    if spec.mode == "stream" and plan in ("native", "arrow"):
        from .spark.native import stream_unsupported
        from .spark.native.arrow_partials import sink_unsupported

        why = (stream_unsupported if plan == "native" else sink_unsupported)(spec.to_pipeline())
        if why:
            raise SpecError("spark.plan", f"{plan!r} cannot run this pipeline: {why} (use auto or stateful)")


def stage_graph_of(doc: dict):
    from . import stage_graph

    return stage_graph(doc)


@click.group(
    context_settings=CONTEXT, help="Event-time windowing for PySpark: windows, watermarks, triggers, late data."
)
@click.version_option(package_name="panes")
def main() -> None:
    pass


@main.command(help="Check a pipeline spec (or a replay scenario) without running it.")
@click.argument("spec", type=click.Path(dir_okay=False))
@command
def validate(spec: str) -> None:
    from .preflight import check_run
    from .scenario import load_scenario
    from .spec import load_document, load_run_spec
    from .stage_scenario import is_stage_scenario, load_stage_scenario
    from .stage_spec import is_stages_document, load_stages_run_spec

    doc = load_document(spec)
    if is_stage_scenario(doc):
        sc = load_stage_scenario(doc)
        click.echo(f"{spec}: valid replay scenario ({len(sc.graph.stages)} stages)")
        return
    if "timeline" in doc:
        load_scenario(doc)
        click.echo(f"{spec}: valid replay scenario")
        return
    if is_stages_document(doc):
        from .stage_checkpoint import run_errors

        ms = load_stages_run_spec(spec)
        # (its sources and outputs, as ``panes run`` checks them, without creating a directory)
        errors = run_errors(ms)
        if errors:
            raise SpecError.of(errors)
        click.echo(f"{spec}: valid ({ms.mode}, {len(ms.stages)} stages, output {ms.to_graph().output_stage.name})")
        return
    s = load_run_spec(spec)
    check_plan(s)
    # (its source and outputs, as ``panes run`` checks them, without creating a directory)
    errors = check_run(s)
    if errors:
        raise SpecError.of(errors)
    click.echo(f"{spec}: valid ({s.mode}, window {json.dumps(s.window)})")


@main.command(help="Replay a scenario's timeline and print every pane as a JSON line.")
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--engine", type=click.Choice(["core", "spark"]), default="core", show_default=True)
@click.option(
    "--dead-letter",
    "dead_letter",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write dead letters here, one JSON object per line.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also draw the replay as Streaming 102's picture into this .png, .svg or .pdf (needs panes[plot]).",
)
@command
def replay(scenario: str, engine: str, dead_letter: str | None, plot: str | None) -> None:
    from .replay import replay as run_replay
    from .scenario import dumps

    if plot:
        from .plot import check_plot

        check_plot(scenario, plot, engine)

    with contextlib.ExitStack() as files:
        try:  # (before anything runs: a path that cannot be written fails with no pane printed)
            out = files.enter_context(open(dead_letter, "w")) if dead_letter else None
        except OSError as e:
            raise SpecError("--dead-letter", f"cannot write {dead_letter}: {e.strerror or e}") from None
        result = run_replay(scenario, engine=engine)
        if out is not None:
            out.writelines(dumps(d) + "\n" for d in result.dead_letters)
    for w in result.warnings:
        click.echo(f"warning: {w}", err=True)
    for p in result.panes:
        click.echo(dumps(p))
    sys.stdout.flush()
    n = len(result.dead_letters)
    where = f" (in {dead_letter})" if dead_letter else " (not kept: pass --dead-letter FILE)" if n else ""
    line = f"done: {len(result.panes)} panes, {n} dead letters{where}"
    if result.accounting is not None:
        line += f"; {result.accounting.summary()}"
    if plot:
        from .plot import plot_replay

        plot_replay(scenario, plot)
        line += f"; picture in {plot}"
    click.echo(line, err=True)


@main.command(help="Run a pipeline spec: source -> windows -> sink (stream or batch).")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--master", default=None, help="Spark master URL (default: the spec's, else local[2]).")
@click.option(
    "--remote",
    default=None,
    metavar="sc://HOST:PORT",
    help="A Spark Connect server to run on (instead of a master; as spark.remote, or SPARK_REMOTE).",
)
@click.option("--mode", type=click.Choice(["stream", "batch"]), default=None, help="Override the spec's mode.")
@click.option(
    "--stdout",
    "to_stdout",
    is_flag=True,
    help="Write the panes to stdout as JSON lines (instead of the spec's sink); progress goes to stderr.",
)
@click.option(
    "--end-input",
    is_flag=True,
    help="After what is there now, end the input for good: every window closes, and the checkpoint takes no "
    "more data (a stream; as spark.end_input).",
)
@click.option("--quiet", is_flag=True, help="No progress on the terminal.")
@click.option(
    "--report",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write one HTML page of the run: throughput, watermark lag, panes and dead letters per micro-batch, "
    "where every record went.",
)
@command
def run(
    spec: str,
    master: str | None,
    remote: str | None,
    mode: str | None,
    to_stdout: bool,
    end_input: bool,
    quiet: bool,
    report: str | None,
) -> None:
    from .preflight import check_run
    from .spec import apply_run_options, load_document, load_run_spec
    from .stage_spec import is_stages_document, load_stages_run_spec

    if master and remote:
        raise SpecError("--remote", "a run names a master (--master) or a Spark Connect server (--remote), not both")
    if remote and not remote.startswith("sc://"):
        raise SpecError("--remote", f"a Spark Connect URL is sc://HOST:PORT, not {remote!r}")
    if report and not Path(report).absolute().parent.is_dir():
        raise SpecError("--report", f"cannot write {report}: no such directory")
    from .spark.connect import ConnectRefusal

    if is_stages_document(load_document(spec)):
        from .stage_runner import run_stages_command

        try:
            run_stages_command(load_stages_run_spec(spec), master, mode, to_stdout, end_input, quiet, report, remote)
        except ConnectRefusal as e:
            raise SpecError("spark.remote", str(e)) from None
        return
    s = load_run_spec(spec)
    apply_run_options(s, mode, to_stdout, end_input)
    check_plan(s)
    errors = check_run(s, create=True)
    from .runner import checkpoint_problems, run_spec

    errors += checkpoint_problems(s, s.spark.end_input)
    if errors:
        raise SpecError.of(errors)
    try:
        run_spec(s, master=master, progress=not quiet, remote=remote, report_path=report)
    except ConnectRefusal as e:
        raise SpecError("spark.remote", str(e)) from None


@main.command(help="List the open windows of a stream's checkpoint: aggregates now, watermark, pending records.")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--key", "key", multiple=True, help="Only this key's windows (a key of several columns: once per column)."
)
@click.option(
    "--from", "time_from", default=None, help="Only windows starting at or after this instant (ISO-8601 or ms)."
)
@click.option("--to", "time_to", default=None, help="Only windows starting at or before this instant.")
@command
def state(spec: str, key: tuple[str, ...], time_from: str | None, time_to: str | None) -> None:
    from .core.json_lines import dumps
    from .window_state import state as read_state

    df = read_state(spec, list(key) or None, time_from, time_to)
    rows = df.select(*state_columns(df)).collect()
    for row in rows:
        click.echo(dumps(state_record(row.asDict(), df)))
    sys.stdout.flush()
    click.echo(f"done: {len(rows)} open windows", err=True)


def state_columns(df) -> list:
    """The open windows' columns, each instant as epoch ms (no local time zone on the way)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    return [F.unix_millis(f.name).alias(f.name) if isinstance(f.dataType, TimestampType) else f.name for f in df.schema]


def state_record(row: dict, df) -> dict:
    """An open window as a JSON line: instants as ISO-8601 UTC with ms and Z, as panes' other output."""
    from pyspark.sql.types import TimestampType

    from .core.time import format_instant

    instants = {f.name for f in df.schema if isinstance(f.dataType, TimestampType)}
    return {k: format_instant(v) if k in instants and v is not None else v for k, v in row.items()}


@main.command(help="Say which plan a spec compiles to, and why.")
@click.argument("spec", type=click.Path(dir_okay=False))
@command
def explain(spec: str) -> None:
    from .spark.planner import explain_plan
    from .spec import RUN_FIELDS, load_document, parse_pipeline_spec

    doc = load_document(spec)
    from .stage_spec import is_stages_document

    if is_stages_document(doc.get("pipeline", doc)):
        from .spark.stages.plan import BATCH_EXPLAIN, EXPLAIN

        graph = stage_graph_of(doc.get("pipeline", doc))
        text = BATCH_EXPLAIN if doc.get("mode") == "batch" else "stream: " + EXPLAIN
        click.echo(f"{text}; {len(graph.stages)} stages, output {graph.output_stage.name}")
        return
    body = doc["pipeline"] if "pipeline" in doc else {k: v for k, v in doc.items() if k not in RUN_FIELDS}
    ps = parse_pipeline_spec(body)
    mode = doc.get("mode", "stream")
    forced = (doc.get("spark") or {}).get("plan", "auto") if isinstance(doc.get("spark"), dict) else "auto"
    if mode == "stream" and forced == "stateful":
        click.echo(
            "stream: transformWithStateInPandas over hash buckets of the key, driving the core "
            "engine (spark.plan: stateful)"
        )
        return
    if mode == "stream" and forced == "arrow":
        from .spark.native.arrow_partials import sink_unsupported
        from .spark.native.arrow_sink import PLAN_TEXT

        if sink_unsupported(ps.to_pipeline()) is None:
            click.echo(f"{PLAN_TEXT} (spark.plan: arrow)")
            return
    click.echo(explain_plan(ps.to_pipeline(), mode))


if __name__ == "__main__":  # pragma: no cover
    main()
