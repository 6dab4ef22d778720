"""``panes validate`` checks the columns a spec reads against its declared ``source.schema``
before Spark starts, with aggregates or with a window pipeline (which has none)."""

from click.testing import CliRunner

from panes import cli

SPEC = (
    'source: {{format: json, path: d, schema: "k STRING, t STRING, v LONG"}}\n'
    "event_time: t\nkey: {key}\nwindow: {{tumbling: {{size: 1 hour}}}}\n"
    "window_pipeline: {{sql: 'SELECT count(*) AS n FROM rows'}}\n"
)


def validate(tmp_path, key):
    (tmp_path / "d").mkdir(exist_ok=True)  # (an empty directory: the declared schema has the columns)
    spec = tmp_path / "p.yaml"
    spec.write_text(SPEC.format(key=key))
    return spec, CliRunner().invoke(cli.main, ["validate", str(spec)])


def test_a_window_pipeline_spec_is_checked_against_its_declared_schema(tmp_path):
    spec, result = validate(tmp_path, "k")
    assert (result.exit_code, result.output) == (
        0,
        f'{spec}: valid (stream, window {{"tumbling": {{"size": "1 hour"}}}})\n',
    )


def test_a_window_pipeline_spec_reading_a_column_the_schema_lacks_fails_naming_it(tmp_path):
    _, result = validate(tmp_path, "plate")
    assert (result.exit_code, result.output) == (2, "error: key: no column 'plate' in source.schema (k, t, v)\n")


def test_validate_checks_the_source_and_outputs_as_run_does(tmp_path):
    # a source path that does not exist (yet) and a sink under a file: panes run refuses both
    # before Spark starts, so validate does (nothing created)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    spec = tmp_path / "p.yaml"
    spec.write_text(
        SPEC.format(key="k").replace("path: d,", "path: nowhere,")
        + f"sink: {{format: json, path: {blocker / 'out'}}}\n"
    )
    result = CliRunner().invoke(cli.main, ["validate", str(spec)])
    assert (result.exit_code, result.output.splitlines()) == (
        2,
        [
            f"error: source.path: no such file or directory: {tmp_path / 'nowhere'}",
            f"error: sink.path: cannot write to {blocker / 'out'}: {blocker} is a file, not a directory",
        ],
    )
    (tmp_path / "nowhere").mkdir()
    blocker.unlink()
    result = CliRunner().invoke(cli.main, ["validate", str(spec)])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "a-file").exists()
