"""A spec reaches Spark Connect through ``spark.remote`` (an ``sc://`` URL, not with a master); the
session helper picks Connect from its arguments or ``SPARK_REMOTE`` before it imports anything of
Spark's session machinery (no server here: only the choice is tested)."""

import pytest

from panes.spec import SpecError, parse_run_spec

BASE = {"source": {"format": "rate"}, "window": "global", "aggregates": {"n": {"count": "*"}}}


def test_spark_remote_is_a_connect_url():
    assert parse_run_spec({**BASE, "spark": {"remote": "sc://host:15002"}}).spark.remote == "sc://host:15002"
    assert parse_run_spec(BASE).spark.remote is None


@pytest.mark.parametrize(
    "spark, reason",
    [
        ({"remote": "http://host:15002"}, "a Spark Connect URL is sc://HOST:PORT, not 'http://host:15002'"),
        (
            {"remote": "sc://h:1", "master": "local[2]"},
            "a spec names a master or a Spark Connect server (remote), not both",
        ),
    ],
)
def test_spark_remote_refused(spark, reason):
    with pytest.raises(SpecError) as e:
        parse_run_spec({**BASE, "spark": spark})
    assert [(f.field, f.reason) for f in e.value.errors] == [("spark.remote", reason)]


@pytest.mark.parametrize(
    "args, env, expected",
    [
        ({"remote": "sc://a:1"}, None, "sc://a:1"),
        ({"master": "sc://b:2"}, None, "sc://b:2"),
        ({}, "sc://env:3", "sc://env:3"),
        ({"master": "local[1]"}, "sc://env:3", None),  # an explicit master beats the variable
        ({"remote": "sc://a:1"}, "sc://env:3", "sc://a:1"),
    ],
)
def test_get_spark_picks_connect(monkeypatch, args, env, expected):
    from panes.spark import session

    if env is None:
        monkeypatch.delenv("SPARK_REMOTE", raising=False)
    else:
        monkeypatch.setenv("SPARK_REMOTE", env)
    asked = []
    monkeypatch.setattr(session, "_connect", lambda url, *a: asked.append(url) or "connect session")
    if expected is None:
        # (a classic session would start a JVM: stop at the builder)
        from pyspark.sql import SparkSession

        monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: "classic session"))
        assert session.get_spark(**args) == "classic session"
        assert asked == []
    else:
        assert session.get_spark(**args) == "connect session"
        assert asked == [expected]
