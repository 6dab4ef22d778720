"""The Python API on a Spark Connect session: the server says which panes its Python imports and
which of this machine's files it sees; a stream it cannot carry is refused with the reason before it
starts; bounded input runs on both batch plans (the engine's with panes and a user's combine
function shipped as artifacts); a stream runs on both streaming plans, its callbacks on the server."""

import pytest

import panes

pytestmark = [pytest.mark.spark, pytest.mark.remote]

EPOCH = "1970-01-01 00:00:"
#: (key, start, end, timing, pane_index, is_last, retraction) of the panes of driver_connect_api.ROWS
A0, A10, B5 = (
    ["a", EPOCH + "00", EPOCH + "05", "ON_TIME", "0", "True", "False"],
    ["a", EPOCH + "10", EPOCH + "15", "ON_TIME", "0", "True", "False"],
    ["b", EPOCH + "05", EPOCH + "10", "ON_TIME", "0", "True", "False"],
)


@pytest.fixture(scope="module")
def seen(connect_server, run_driver, tmp_path_factory):
    from pathlib import Path

    work = tmp_path_factory.mktemp("connect-api")
    return work, run_driver(
        Path(__file__).with_name("driver_connect_api.py"), connect_server.url, str(work), timeout=900
    )


def test_the_server_says_what_it_imports_and_sees(seen):
    work, got = seen
    assert got["connect"] is True
    assert got["server"] == {
        "installed": panes.__version__,
        "shipped": False,
        "seen": {str(work): True, str(work / "nowhere"): False},
    }
    assert got["shipped_after"] is True


def test_the_session_writes_streaming_checkpoints_through_file_system_calls(seen):
    # the class the server's JVM has (asked with one query), as a classic session of panes sets it
    import pyspark

    from panes.spark.session import FILE_SYSTEM_MANAGERS

    # (the server: this PySpark's Spark; the class moved package in 4.1)
    spark_40 = pyspark.__version__.startswith("4.0.")
    assert seen[1]["checkpoint_manager"] == FILE_SYSTEM_MANAGERS[1 if spark_40 else 0]


def test_a_stream_the_server_cannot_carry_is_refused_with_the_reason(seen):
    work, got = seen
    assert got["refused"] == (
        f"Spark Connect cannot run this stream: the Spark Connect server does not see {work / 'nowhere'}, which "
        f"this process wrote: the native plan needs the server to share this machine's filesystem at the same "
        f"paths (the native plan keeps its open windows there; or use plan: stateful)"
    )


def test_bounded_input_on_both_batch_plans(seen):
    got = seen[1]["bounded"]
    assert got["native_plan"] == "batch: native Spark aggregation"
    assert got["native"] == [A0 + ["2", "5"], A10 + ["1", "5"], B5 + ["1", "4"]]
    assert got["dead"] == [["missing_event_time", '{"k":"b","v":1}', "None", "None", "event_time column t"]]
    assert got["engine_plan"] == "batch: core engine over hash buckets of the key"
    assert got["engine"] == [A0 + ["13"], A10 + ["25"], B5 + ["16"]]


@pytest.mark.parametrize("plan", ["native", "stateful"])
def test_a_stream_on_each_plan(seen, plan):
    from panes.spark.connect import stateful_client_refusal

    got = seen[1][plan]
    if plan == "stateful" and stateful_client_refusal():  # (a PySpark 4.0 client: refused before it starts)
        assert got == {
            "refused": f"Spark Connect cannot run this stream: {stateful_client_refusal()}",
            "seconds": got["seconds"],
        }
        return
    # (the window of a@12000 stays open: the input does not end)
    assert got["panes"] == [A0 + ["2", "5"], B5 + ["1", "4"]]
    assert got["dead"] == ["missing_event_time"]
