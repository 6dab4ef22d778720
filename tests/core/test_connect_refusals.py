"""What a Spark Connect session cannot carry is refused with the reason, from the server's answer
(``ServerPython``; tests/remote asks a real server)."""

import pytest

import panes
from panes.spark import connect
from panes.spark.connect import ServerPython, local_checkpoint_refusal, stream_refusal

EXE = "/srv/python"


def _refusal(
    monkeypatch, server: ServerPython, plan: str, checkpoint: str = "/data/ckpt", files=("/data/ckpt/x",), client=True
):
    """``client``: the Connect client builds the stateful plan (PySpark 4.1 on); False: this PySpark's says."""
    monkeypatch.setattr(connect, "server_python", lambda spark, paths=(): server)
    if client:
        monkeypatch.setattr(connect, "stateful_client_refusal", lambda: None)
    return stream_refusal(object(), plan, checkpoint, files)


def test_a_server_with_panes_that_sees_the_files_runs_both_plans(monkeypatch):
    ok = ServerPython(EXE, panes.__version__, False, {"/data/ckpt/x": True})
    assert _refusal(monkeypatch, ok, "native") is None
    assert _refusal(monkeypatch, ok, "stateful") is None


def test_panes_not_installed_on_the_server(monkeypatch):
    server = ServerPython(EXE, None, False, {"/data/ckpt/x": True})
    assert _refusal(monkeypatch, server, "native") == (
        f"panes is not installed in the Spark Connect server's Python ({EXE}): the native plan runs its step in "
        f"the server's foreachBatch worker; install panes {panes.__version__} there"
    )
    shipped = ServerPython(EXE, None, True, {"/data/ckpt/x": True})
    assert _refusal(monkeypatch, shipped, "stateful") == (
        f"panes is not installed in the Spark Connect server's Python ({EXE}): the stateful plan runs the core "
        f"engine in the server's transformWithStateInPandas workers (files added with addArtifacts do not reach "
        f"those workers); install panes {panes.__version__} there"
    )


def test_another_panes_on_the_server(monkeypatch):
    server = ServerPython(EXE, "0.0.1", False, {"/data/ckpt/x": True})
    assert _refusal(monkeypatch, server, "stateful") == (
        f"the Spark Connect server's Python ({EXE}) has panes 0.0.1, this process {panes.__version__}: the "
        f"stateful plan's objects are pickled from one to the other; install panes {panes.__version__} there"
    )


def test_files_the_server_does_not_see(monkeypatch):
    server = ServerPython(EXE, panes.__version__, False, {"/data/ckpt/x": False})
    assert _refusal(monkeypatch, server, "native") == (
        "the Spark Connect server does not see /data/ckpt/x, which this process wrote: the native plan needs the "
        "server to share this machine's filesystem at the same paths (the native plan keeps its open windows "
        "there; or use plan: stateful)"
    )


def test_a_server_that_cannot_run_python_functions(monkeypatch):
    server = ServerPython(error="ModuleNotFoundError: No module named 'pyarrow'")
    assert _refusal(monkeypatch, server, "stateful") == (
        "the Spark Connect server's Python cannot run panes' Python functions: ModuleNotFoundError: No module "
        "named 'pyarrow'"
    )


@pytest.mark.parametrize(
    "checkpoint, refused",
    [
        ("/data/ckpt", False),
        ("ckpt", False),
        ("file:///data/ckpt", False),
        ("C:\\ckpt", False),
        ("hdfs://nn/ckpt", True),
        ("s3a://bucket/ckpt", True),
        ("dbfs:/ckpt", True),
    ],
)
def test_the_native_plan_needs_a_local_checkpoint(checkpoint, refused):
    why = local_checkpoint_refusal(checkpoint)
    assert (why is not None) == refused
    if refused:
        assert why.startswith(
            "the native streaming plan keeps its open windows as local files under the "
            f"checkpoint, and {checkpoint} is on "
        )


def test_the_native_plan_refuses_a_remote_checkpoint_before_asking_the_server(monkeypatch):
    monkeypatch.setattr(connect, "server_python", lambda spark, paths=(): pytest.fail("asked the server"))
    assert stream_refusal(object(), "native", "s3a://b/c").endswith("(or use plan: stateful)")


def test_check_stream_does_nothing_on_a_classic_session(monkeypatch):
    monkeypatch.setattr(connect, "server_python", lambda spark, paths=(): pytest.fail("asked the server"))
    connect.check_stream(object(), "native", "/x")


def test_the_multi_stage_plan_needs_panes_on_the_server_and_its_checkpoint_there(monkeypatch):
    ok = ServerPython(EXE, panes.__version__, False, {"/data/ckpt/x": True})
    assert _refusal(monkeypatch, ok, "stages") is None
    missing = ServerPython(EXE, None, False, {"/data/ckpt/x": True})
    assert _refusal(monkeypatch, missing, "stages") == (
        f"panes is not installed in the Spark Connect server's Python ({EXE}): the multi-stage plan runs every stage's "
        f"step in the server's foreachBatch worker; install panes {panes.__version__} there"
    )
    unseen = ServerPython(EXE, panes.__version__, False, {"/data/ckpt/x": False})
    assert _refusal(monkeypatch, unseen, "stages") == (
        "the Spark Connect server does not see /data/ckpt/x, which this process wrote: the multi-stage plan needs the "
        "server to share this machine's filesystem at the same paths"
    )
    monkeypatch.setattr(connect, "server_python", lambda spark, paths=(): pytest.fail("asked the server"))
    assert stream_refusal(object(), "stages", "s3a://b/c") == (
        "the multi-stage plan keeps every stage's state as local files under the checkpoint, and s3a://b/c is on "
        "s3a://: give a path on the server's filesystem"
    )


def test_a_connect_client_without_transform_with_state_refuses_the_stateful_plan(monkeypatch):
    # (PySpark 4.0's Connect GroupedData has no transformWithStateInPandas; 4.1 on have it)
    import pyspark
    from pyspark.sql.connect.group import GroupedData

    ok = ServerPython(EXE, panes.__version__, False, {"/data/ckpt/x": True})
    monkeypatch.delattr(GroupedData, "transformWithStateInPandas", raising=False)
    why = (
        f"the stateful plan runs the core engine in transformWithStateInPandas, which the Spark Connect client of "
        f"PySpark {pyspark.__version__} does not have (4.1 on does): use a classic session, PySpark 4.1 or later, "
        f"or plan: native where the pipeline allows it"
    )
    assert _refusal(monkeypatch, ok, "stateful", client=False) == why
    assert _refusal(monkeypatch, ok, "native", client=False) is None
    # the Python API refuses it as it builds the plan, in one line
    monkeypatch.setattr(connect, "is_connect", lambda spark: True)
    with pytest.raises(connect.ConnectRefusal) as e:
        connect.check_stateful_client(object())
    assert str(e.value) == f"Spark Connect cannot run this stream: {why}"
    monkeypatch.setattr(connect, "is_connect", lambda spark: False)
    connect.check_stateful_client(object())  # (a classic session builds it)
