"""The ``panes`` command line: run, validate, replay, explain."""

from __future__ import annotations

import json
import sys

import click

from .spec import RunSpec, SpecError


def _fail(e: Exception) -> None:
    """A user's mistake: one ``error:`` line per thing wrong, exit code 2."""
    for err in (e.errors if isinstance(e, SpecError) else [e]):
        click.echo(f"error: {err}", err=True)
    sys.exit(2)


def check_plan(spec: RunSpec) -> None:
    """A stream forced onto the native plan must be one it can run: checked before Spark starts."""
    if spec.mode == "stream" and spec.spark.plan == "native":
        from .spark.native import stream_unsupported

        why = stream_unsupported(spec.to_pipeline())
        if why:
            raise SpecError("spark.plan", f"'native' cannot run this pipeline: {why} (use auto or stateful)")


def stage_graph_of(doc: dict):
    from . import stage_graph

    return stage_graph(doc)


@click.group(help="Event-time windowing for PySpark: windows, watermarks, triggers, late data.")
@click.version_option(package_name="panes")
def main() -> None:
    pass


@main.command(help="Check a pipeline spec (or a replay scenario) without running it.")
@click.argument("spec", type=click.Path(dir_okay=False))
def validate(spec: str) -> None:
    from .scenario import load_scenario
    from .spec import load_document, load_run_spec
    from .stage_scenario import is_stage_scenario, load_stage_scenario
    from .stage_spec import is_stages_document, load_stages_run_spec

    try:
        doc = load_document(spec)
        if is_stage_scenario(doc):
            sc = load_stage_scenario(doc)
            click.echo(f"{spec}: valid replay scenario ({len(sc.graph.stages)} stages)")
        elif "timeline" in doc:
            load_scenario(doc)
            click.echo(f"{spec}: valid replay scenario")
        elif is_stages_document(doc):
            ms = load_stages_run_spec(spec)
            click.echo(f"{spec}: valid ({ms.mode}, {len(ms.stages)} stages, output {ms.to_graph().output_stage.name})")
        else:
            s = load_run_spec(spec)
            check_plan(s)
            click.echo(f"{spec}: valid ({s.mode}, window {json.dumps(s.window)})")
    except SpecError as e:
        _fail(e)


@main.command(help="Replay a scenario's timeline and print every pane as a JSON line.")
@click.argument("scenario", type=click.Path(dir_okay=False))
@click.option("--engine", type=click.Choice(["core", "spark"]), default="core", show_default=True)
@click.option("--dead-letter", "dead_letter", type=click.Path(dir_okay=False), default=None,
              help="Write dead letters here, one JSON object per line.")
def replay(scenario: str, engine: str, dead_letter: str | None) -> None:
    from .scenario import dumps
    from .replay import replay as run_replay

    try:
        result = run_replay(scenario, engine=engine)
    except SpecError as e:
        _fail(e)
        return
    for p in result.panes:
        click.echo(dumps(p))
    if dead_letter:
        with open(dead_letter, "w") as f:
            for d in result.dead_letters:
                f.write(dumps(d) + "\n")


@main.command(help="Run a pipeline spec: source -> windows -> sink (stream or batch).")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--master", default=None, help="Spark master URL (default: the spec's, else local[2]).")
@click.option("--mode", type=click.Choice(["stream", "batch"]), default=None,
              help="Override the spec's mode.")
@click.option("--quiet", is_flag=True, help="No progress on the terminal.")
def run(spec: str, master: str | None, mode: str | None, quiet: bool) -> None:
    from .spec import load_document, load_run_spec
    from .stage_spec import is_stages_document, load_stages_run_spec

    try:
        if is_stages_document(load_document(spec)):
            ms = load_stages_run_spec(spec)
            if mode:
                ms.mode = "batch" if mode == "batch" else "stream"
            from .stage_runner import run_stages

            run_stages(ms, master=master, progress=not quiet)
            return
    except SpecError as e:
        _fail(e)
        return
    try:
        s = load_run_spec(spec)
        if mode:
            s.mode = "batch" if mode == "batch" else "stream"
        check_plan(s)
    except SpecError as e:
        _fail(e)
        return
    from .runner import run_spec

    run_spec(s, master=master, progress=not quiet)


@main.command(help="Say which plan a spec compiles to, and why.")
@click.argument("spec", type=click.Path(dir_okay=False))
def explain(spec: str) -> None:
    from .spark.planner import explain_plan
    from .spec import load_document, parse_pipeline_spec

    try:
        doc = load_document(spec)
        from .stage_spec import is_stages_document

        if is_stages_document(doc.get("pipeline", doc)):
            from .spark.stages.plan import BATCH_EXPLAIN, EXPLAIN

            graph = stage_graph_of(doc.get("pipeline", doc))
            text = BATCH_EXPLAIN if doc.get("mode") == "batch" else "stream: " + EXPLAIN
            click.echo(f"{text}; {len(graph.stages)} stages, output {graph.output_stage.name}")
            return
        run_fields = ("source", "sink", "dead_letter", "checkpoint", "spark", "mode", "timeout")
        body = doc["pipeline"] if "pipeline" in doc else {k: v for k, v in doc.items() if k not in run_fields}
        ps = parse_pipeline_spec(body)
    except SpecError as e:
        _fail(e)
        return
    mode = doc.get("mode", "stream")
    forced = (doc.get("spark") or {}).get("plan", "auto") if isinstance(doc.get("spark"), dict) else "auto"
    if mode == "stream" and forced == "stateful":
        click.echo("stream: transformWithStateInPandas over hash buckets of the key, driving the core "
                   "engine (spark.plan: stateful)")
        return
    click.echo(explain_plan(ps.to_pipeline(), mode))


if __name__ == "__main__":  # pragma: no cover
    main()
