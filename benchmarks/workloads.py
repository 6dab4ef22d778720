"""The benchmarks of the suite: data set, panes spec and plain-PySpark formulation(s) of each.

Every formulation (panes or plain) yields the same columns: the key columns, ``window_start``,
``window_end`` (timestamps) and the aggregates, so that one checksum compares both sides (see
``suite.checksum``). A batch benchmark may list several plain formulations; the fastest one
measured in the run is its baseline ("the best plain Spark formulation"). A streaming benchmark has
one: what plain Structured Streaming can express (``withWatermark`` + a windowed ``groupBy``,
append mode).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

SECOND = 1_000
MINUTE = 60_000

# -- building blocks -------------------------------------------------------------------------------------

#: the aggregates: output name -> builder of the (unaliased) aggregate Column
Aggs = dict[str, Callable[[], Column]]


def _agg(aggs: Aggs) -> list[Column]:
    return [make().alias(name) for name, make in aggs.items()]


def _ms(ts: str) -> Column:
    return F.unix_millis(F.col(ts))


def _out(key: list[str], start: Column, end: Column, names: list[str]) -> list[Column]:
    return [*[F.col(k) for k in key], start.alias("window_start"), end.alias("window_end"), *[F.col(n) for n in names]]


def by_window(key, ts, size, slide=None, delay=None):
    """groupBy(key, window(ts, size[, slide])): Spark's own window() (tumbling: a projection;
    sliding: an Expand). ``delay``: streaming, withWatermark(ts, delay) first, append mode."""

    def build(df: DataFrame, aggs: Aggs) -> DataFrame:
        names = list(aggs)
        if delay is not None:
            df = df.withWatermark(ts, delay)
        w = F.window(ts, f"{size} milliseconds", f"{slide or size} milliseconds").alias("w")
        g = df.groupBy(*key, w).agg(*_agg(aggs))
        return g.select(*_out(key, F.col("w.start"), F.col("w.end"), names))

    return build


def by_start(key, ts, size, hop=None):
    """Batch: group by the window start computed as a long (ts - ts mod period), bounds made after
    the aggregation. hop < size (size a multiple of hop): explode the size/hop starts of each row;
    hop > size: the rows in the gap filtered out first."""
    hop = hop or size

    def build(df: DataFrame, aggs: Aggs) -> DataFrame:
        names = list(aggs)
        t = _ms(ts)
        last = t - F.pmod(t, F.lit(hop))
        if hop < size:
            assert size % hop == 0
            starts = F.array(*[last - F.lit(i * hop) for i in range(size // hop)])
            df = df.withColumn("__s", F.explode(starts))
        else:
            df = df.withColumn("__s", last)
            if hop > size:
                df = df.filter(t - F.col("__s") < F.lit(size))
        g = df.groupBy(*key, "__s").agg(*_agg(aggs))
        return g.select(
            *_out(key, F.timestamp_millis(F.col("__s")), F.timestamp_millis(F.col("__s") + F.lit(size)), names)
        )

    return build


def window_gaps(key, ts, size, hop):
    """Hopping windows with gaps (hop > size), which window() refuses: tumbling window(ts, hop),
    keep the rows with ts < start + size, group."""

    def build(df: DataFrame, aggs: Aggs) -> DataFrame:
        names = list(aggs)
        w = F.window(ts, f"{hop} milliseconds")
        df = df.withColumn("w", w).filter(_ms(ts) < F.unix_millis(F.col("w.start")) + F.lit(size))
        g = df.groupBy(*key, "w").agg(*_agg(aggs))
        end = F.timestamp_millis(F.unix_millis(F.col("w.start")) + F.lit(size))
        return g.select(*_out(key, F.col("w.start"), end, names))

    return build


def by_session_window(key, ts, gap, delay=None):
    """groupBy(key, session_window(ts, gap)) (streaming: withWatermark first, append mode)."""

    def build(df: DataFrame, aggs: Aggs) -> DataFrame:
        names = list(aggs)
        if delay is not None:
            df = df.withWatermark(ts, delay)
        g = df.groupBy(*key, F.session_window(ts, f"{gap} milliseconds").alias("w")).agg(*_agg(aggs))
        return g.select(*_out(key, F.col("w.start"), F.col("w.end"), names))

    return build


def by_session_lag(key, ts, gap):
    """Batch sessions with window functions: over partitionBy(key).orderBy(ts), a row starts a
    session when the previous row of its key is gap or more before it; a running sum of those
    starts numbers the sessions; group by (key, number). One sort, no further shuffle."""

    def build(df: DataFrame, aggs: Aggs) -> DataFrame:
        names = list(aggs)
        t = _ms(ts)
        order = Window.partitionBy(*key).orderBy("__t")
        df = df.withColumn("__t", t)
        prev = F.lag("__t").over(order)
        new = F.when(prev.isNull() | (F.col("__t") - prev >= F.lit(gap)), 1).otherwise(0)
        df = df.withColumn("__sid", F.sum(new).over(order.rowsBetween(Window.unboundedPreceding, 0)))
        g = df.groupBy(*key, "__sid").agg(F.min("__t").alias("__lo"), F.max("__t").alias("__hi"), *_agg(aggs))
        return g.select(
            *_out(key, F.timestamp_millis(F.col("__lo")), F.timestamp_millis(F.col("__hi") + F.lit(gap)), names)
        )

    return build


def by_session_buckets(key, ts, gap, merge: dict[str, Callable[[str], Column]]):
    """Batch sessions without sorting the rows: rows less than a gap apart are in one session, so
    first aggregate each key's rows per gap-long bucket of time (hash aggregation, combined
    map-side); then number the sessions over each key's buckets in time order (a bucket starts one
    when it begins a gap or more after the previous one's last row) and merge the buckets'
    aggregates per (key, number) with ``merge`` (name -> merge of that column's partials)."""

    def build(df: DataFrame, aggs: Aggs) -> DataFrame:
        names = list(aggs)
        t = _ms(ts)
        b = df.groupBy(*key, (t - F.pmod(t, F.lit(gap))).alias("__b")).agg(
            F.min(t).alias("__lo"), F.max(t).alias("__hi"), *_agg(aggs)
        )
        order = Window.partitionBy(*key).orderBy("__lo")
        prev = F.lag("__hi").over(order)
        new = F.when(prev.isNull() | (F.col("__lo") - prev >= F.lit(gap)), 1).otherwise(0)
        b = b.withColumn("__sid", F.sum(new).over(order.rowsBetween(Window.unboundedPreceding, 0)))
        g = b.groupBy(*key, "__sid").agg(
            F.min("__lo").alias("__lo"), F.max("__hi").alias("__hi"), *[merge[n](n).alias(n) for n in names]
        )
        return g.select(
            *_out(key, F.timestamp_millis(F.col("__lo")), F.timestamp_millis(F.col("__hi") + F.lit(gap)), names)
        )

    return build


def by_key(key, ts=None):
    """The global window: groupBy(key); with ``ts``, of the rows that have an event time (as
    Spark's window() and session_window() drop the rows without one, and panes dead-letters them)."""

    def build(df: DataFrame, aggs: Aggs) -> DataFrame:
        names = list(aggs)
        if ts is not None:
            df = df.filter(F.col(ts).isNotNull())
        g = df.groupBy(*key).agg(*_agg(aggs))
        none = F.lit(None).cast("timestamp")
        return g.select(*_out(key, none, none, names))

    return build


def sliding_frames(key, ts, d, dedupe: str):
    """KIP-450 sliding windows (time difference d, both ends inclusive) with window functions over
    partitionBy(key).orderBy(ts): each record's left window [t - d, t] is the RANGE frame (-d, 0),
    its right window [t + 1, t + d + 1] the frame (1, d + 1) when that holds records.

    ``dedupe="drop_duplicates"``: union of both, dropDuplicates on (key, start, end) (records at
    the same time give the same left window; a right window equal to a later record's left window).
    ``dedupe="filter"``: the same windows without the extra shuffle: one row per distinct time
    (lag), and a right window only when no record sits exactly at t + d + 1."""

    def build(df: DataFrame, aggs: Aggs) -> DataFrame:
        names = list(aggs)
        order = Window.partitionBy(*key).orderBy("__t")
        frames = {"l": order.rangeBetween(-d, 0), "r": order.rangeBetween(1, d + 1)}
        cols = []
        for side, fr in frames.items():
            cols += [make().over(fr).alias(f"{n}_{side}") for n, make in aggs.items()]
        base = df.withColumn("__t", _ms(ts))
        extra = [F.count(F.lit(1)).over(frames["r"]).alias("__nr")]
        if dedupe == "filter":
            prev = F.lag("__t").over(order)
            extra += [
                (prev.isNull() | (prev != F.col("__t"))).alias("__first"),
                F.count(F.lit(1)).over(order.rangeBetween(d + 1, d + 1)).alias("__nend"),
            ]
        framed = base.select(*key, "__t", *cols, *extra)
        right_ok = F.col("__nr") > 0
        if dedupe == "filter":
            framed = framed.filter("__first")
            right_ok = right_ok & (F.col("__nend") == 0)
        left = framed.select(
            *key,
            (F.col("__t") - d).alias("__lo"),
            F.col("__t").alias("__hi"),
            *[F.col(f"{n}_l").alias(n) for n in names],
        )
        right = framed.filter(right_ok).select(
            *key,
            (F.col("__t") + 1).alias("__lo"),
            (F.col("__t") + d + 1).alias("__hi"),
            *[F.col(f"{n}_r").alias(n) for n in names],
        )
        both = left.unionByName(right)
        if dedupe == "drop_duplicates":
            both = both.dropDuplicates([*key, "__lo", "__hi"])
        return both.select(*_out(key, F.timestamp_millis(F.col("__lo")), F.timestamp_millis(F.col("__hi")), names))

    return build


def top_n_row_number(key, ts, size, n, value):
    """The n largest ``value`` rows per (key, tumbling window): the window start as a long, then
    row_number() over partitionBy(key, start).orderBy(value desc) <= n (one sort per key)."""

    def build(df: DataFrame, aggs: Aggs) -> DataFrame:
        t = _ms(ts)
        df = df.withColumn("__s", t - F.pmod(t, F.lit(size)))
        rank = F.row_number().over(Window.partitionBy(*key, "__s").orderBy(F.col(value).desc(), F.col(ts)))
        top = df.withColumn("__r", rank).filter(F.col("__r") <= n)
        bounds = F.timestamp_millis(F.col("__s")), F.timestamp_millis(F.col("__s") + F.lit(size))
        return top.select(*_out(key, bounds[0], bounds[1], [value]))

    return build


def top_n_collect(key, ts, size, n, value, delay=None):
    """The n largest ``value`` rows per (key, window) as an aggregate: the window's (value, ts)
    pairs collected, sorted descending, the first n kept and exploded; the only formulation plain
    Structured Streaming accepts (``delay``: withWatermark first, append mode)."""

    def build(df: DataFrame, aggs: Aggs) -> DataFrame:
        if delay is not None:
            df = df.withWatermark(ts, delay)
        w = F.window(ts, f"{size} milliseconds").alias("w")
        pairs = F.slice(F.sort_array(F.collect_list(F.struct(F.col(value), F.col(ts))), asc=False), 1, n)
        g = df.groupBy(*key, w).agg(pairs.alias("__top"))
        rows = g.select(*key, "w", F.explode("__top").alias("__t"))
        return rows.select(
            *key,
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            F.col(f"__t.{value}").alias(value),
        )

    return build


def proc_time_window(key, size):
    """Nexmark q12 in plain Spark: the processing time as a column (current_timestamp(), the
    micro-batch's time), a watermark on it, groupBy(key, window(p_time, size)), append mode."""

    def build(df: DataFrame, aggs: Aggs) -> DataFrame:
        names = list(aggs)
        df = df.withColumn("p_time", F.current_timestamp()).withWatermark("p_time", "0 seconds")
        g = df.groupBy(*key, F.window("p_time", f"{size} milliseconds").alias("w")).agg(*_agg(aggs))
        return g.select(*_out(key, F.col("w.start"), F.col("w.end"), names))

    return build


# -- Nexmark second stages -----------------------------------------------------------------------------


def q5_stage2(counts: DataFrame, source: DataFrame | None = None) -> DataFrame:
    """q5's second stage: per window, the auction(s) with the most bids (ties kept): the maximum
    count per window joined back to the counts. Works per micro-batch too: a window's counts are
    all emitted in the same micro-batch (when it closes)."""
    top = counts.groupBy("window_start", "window_end").agg(F.max("num").alias("__maxn"))
    return (
        counts.join(top, ["window_start", "window_end"])
        .filter(F.col("num") >= F.col("__maxn"))
        .select("auction", "window_start", "window_end", "num")
    )


def q7_stage2(maxes: DataFrame, source: DataFrame) -> DataFrame:
    """q7's second stage: the bids carrying the window's highest price (ties kept), the maximum per
    window joined back to the bids of that window ([start, end), as NEXMARK.md's Spark version)."""
    t = F.unix_millis("dateTime")
    bids = source.select(
        "auction", "bidder", "price", F.timestamp_millis(t - F.pmod(t, F.lit(10 * SECOND))).alias("window_start")
    )
    return (
        bids.join(maxes, ["window_start"])
        .filter(F.col("price") == F.col("maxprice"))
        .select("auction", "bidder", "window_start", "window_end", "maxprice")
    )


# -- aggregates ----------------------------------------------------------------------------------------


COUNT_SUM: Aggs = {"n": lambda: F.count(F.lit(1)), "total": lambda: F.sum("amount")}


def count_only(name: str) -> Aggs:
    return {name: lambda: F.count(F.lit(1))}


def max_of(column: str, name: str) -> Aggs:
    return {name: lambda: F.max(column)}


AGG_SPECS = {  # panes aggregates matching the builders above
    "count_sum": {"n": {"count": "*"}, "total": {"sum": "amount"}},
}


# -- the benchmarks ----------------------------------------------------------------------------------------


@dataclass
class Bench:
    name: str
    mode: str  # "stream" | "batch"
    data: str  # data set id (suite.DataSets)
    spec: dict  # the panes spec
    key: list[str]
    aggs: Aggs  # output name -> aggregate (plain side)
    plains: dict[str, Callable]  # label -> build(df, aggs) (a plain formulation)
    group: str = ""  # benchmarks of one group share their plain runs (same data and baseline)
    what: str = ""  # one line for the report
    time: str = "event"  # "event" | "processing" (q12)
    final_only: bool = False  # compare only the final panes (early firings, retractions)
    state_series: bool = False  # record the state size per micro-batch
    files_per_trigger: int | None = None
    #: a second stage applied to both sides' windowed result (``stage2(result, source)``), e.g.
    #: Nexmark's max per window; ``out_key`` are then the key columns of its rows
    stage2: Callable | None = None
    out_key: list[str] | None = None
    plan: str = "auto"  # panes.window(..., plan=): "auto", or force "stateful"
    #: the final panes are the ON_TIME ones (allowed lateness on in-order data: the window's last
    #: pane is at garbage collection, not emitted when empty)
    final_on_time: bool = False

    def __post_init__(self):
        self.group = self.group or self.name
        if self.out_key is None:
            self.out_key = list(self.key)


def benchmarks(keys_list=(1_000, 10_000, 100_000)) -> list[Bench]:
    from common import human

    out: list[Bench] = []
    ev_key, ev_ts = ["key"], "ts"
    for keys in keys_list:
        data = f"events_{keys}"
        spec = {
            "event_time": "ts",
            "key": ["key"],
            "window": {"tumbling": {"size": "1 minute"}},
            "aggregates": AGG_SPECS["count_sum"],
        }
        label = f"tumbling_{human(keys)}_keys"
        out.append(
            Bench(
                f"{label}_stream",
                "stream",
                data,
                spec,
                ev_key,
                COUNT_SUM,
                {"window": by_window(ev_key, ev_ts, MINUTE, delay="0 seconds")},
                what=f"tumbling 1 min count+sum, {human(keys)} keys, default trigger",
            )
        )
        if keys == 10_000:
            early = dict(spec, trigger={"after_watermark": {"early": {"count": 1}}})
            lateness = dict(early, allowed_lateness="1 minute")
            # (the output watermark's cost: allowed lateness makes pane timing hang on every key's
            # holds; each bucket reports them and the driver decides. The native plan refuses
            # early firings with allowed lateness, so both run on the stateful plan)
            variants = (
                ("early_firings", early, "accumulating", "auto"),
                ("retracting", dict(early, accumulation="retracting"), "retracting", "auto"),
                ("stateful", early, "accumulating, stateful plan", "stateful"),
                ("stateful_late", lateness, "allowed lateness 1 min, stateful plan", "stateful"),
            )
            for suffix, variant, what, plan in variants:
                out.append(
                    Bench(
                        f"{label}_stream_{suffix}",
                        "stream",
                        data,
                        variant,
                        ev_key,
                        COUNT_SUM,
                        {"window": by_window(ev_key, ev_ts, MINUTE, delay="0 seconds")},
                        group=f"{label}_stream",
                        final_only=True,
                        what=f"early firings {{count: 1}}, {what}, vs plain default trigger",
                        plan=plan,
                        final_on_time="allowed_lateness" in variant,
                    )
                )
        out.append(
            Bench(
                f"{label}_batch",
                "batch",
                data,
                spec,
                ev_key,
                COUNT_SUM,
                {"window": by_window(ev_key, ev_ts, MINUTE), "start_long": by_start(ev_key, ev_ts, MINUTE)},
                what=f"tumbling 1 min count+sum, {human(keys)} keys",
            )
        )

    # Nexmark (bid stream); watermark 4 s as Nexmark's source
    nx_ts = "dateTime"
    q5 = {
        "event_time": nx_ts,
        "key": "auction",
        "window": {"hopping": {"size": "10 seconds", "hop": "2 seconds"}},
        "watermark": {"max_delay": "4 seconds"},
        "aggregates": {"num": {"count": "*"}},
    }
    q7 = {
        "event_time": nx_ts,
        "window": {"tumbling": {"size": "10 seconds"}},
        "watermark": {"max_delay": "4 seconds"},
        "aggregates": {"maxprice": {"max": "price"}},
    }
    q11 = {
        "event_time": nx_ts,
        "key": "bidder",
        "window": {"session": {"gap": "10 seconds"}},
        "watermark": {"max_delay": "4 seconds"},
        "aggregates": {"bid_count": {"count": "*"}},
    }
    q12 = {"key": "bidder", "window": {"tumbling": {"size": "10 seconds"}}, "aggregates": {"bid_count": {"count": "*"}}}
    for mode in ("stream", "batch"):
        delay = "4 seconds" if mode == "stream" else None
        plains5 = {"window": by_window(["auction"], nx_ts, 10 * SECOND, 2 * SECOND, delay=delay)}
        plains7 = {"window": by_window([], nx_ts, 10 * SECOND, delay=delay)}
        plains11 = {"session_window": by_session_window(["bidder"], nx_ts, 10 * SECOND, delay=delay)}
        if mode == "batch":
            plains5["explode_starts"] = by_start(["auction"], nx_ts, 10 * SECOND, 2 * SECOND)
            plains7["start_long"] = by_start([], nx_ts, 10 * SECOND)
            plains11["lag_running_sum"] = by_session_lag(["bidder"], nx_ts, 10 * SECOND)
            plains11["gap_buckets"] = by_session_buckets(["bidder"], nx_ts, 10 * SECOND, {"bid_count": F.sum})
        out.append(
            Bench(
                f"nexmark_q5_{mode}",
                mode,
                "nexmark",
                q5,
                ["auction"],
                count_only("num"),
                plains5,
                what="q5 first stage: bids per auction, hopping 10 s / 2 s",
            )
        )
        out.append(
            Bench(
                f"nexmark_q7_{mode}",
                mode,
                "nexmark",
                q7,
                [],
                max_of("price", "maxprice"),
                plains7,
                what="q7 first stage: max price per tumbling 10 s window",
            )
        )
        out.append(
            Bench(
                f"nexmark_q11_{mode}",
                mode,
                "nexmark",
                q11,
                ["bidder"],
                count_only("bid_count"),
                plains11,
                what="q11: bids per bidder session, gap 10 s",
            )
        )
    # the full q5 and q7: the second stage (max per window, joined back) on both sides' first stage;
    # q5 also streaming, the second stage run per micro-batch on the windows it closed
    out.append(
        Bench(
            "nexmark_q5_full_stream",
            "stream",
            "nexmark",
            q5,
            ["auction"],
            count_only("num"),
            {"window": by_window(["auction"], nx_ts, 10 * SECOND, 2 * SECOND, delay="4 seconds")},
            stage2=q5_stage2,
            what="q5 complete: hot items (stage 2 per micro-batch on the closed windows)",
        )
    )
    out.append(
        Bench(
            "nexmark_q5_full_batch",
            "batch",
            "nexmark",
            q5,
            ["auction"],
            count_only("num"),
            {
                "window": by_window(["auction"], nx_ts, 10 * SECOND, 2 * SECOND),
                "explode_starts": by_start(["auction"], nx_ts, 10 * SECOND, 2 * SECOND),
            },
            stage2=q5_stage2,
            what="q5 complete: hot items per hopping window",
        )
    )
    out.append(
        Bench(
            "nexmark_q7_full_batch",
            "batch",
            "nexmark",
            q7,
            [],
            max_of("price", "maxprice"),
            {"window": by_window([], nx_ts, 10 * SECOND), "start_long": by_start([], nx_ts, 10 * SECOND)},
            stage2=q7_stage2,
            out_key=["auction", "bidder"],
            what="q7 complete: the highest bids of each tumbling 10 s window",
        )
    )
    out.append(
        Bench(
            "nexmark_q12_stream",
            "stream",
            "nexmark",
            q12,
            ["bidder"],
            count_only("bid_count"),
            {"window_current_timestamp": proc_time_window(["bidder"], 10 * SECOND)},
            time="processing",
            what="q12: bids per bidder per 10 s of processing time (panes: ingestion time)",
        )
    )

    # batch only: the other window types, on the 10k-keys events
    base = {"event_time": "ts", "key": ["key"], "aggregates": AGG_SPECS["count_sum"]}
    out.append(
        Bench(
            "hopping_gaps_batch",
            "batch",
            "events_10000",
            dict(base, window={"hopping": {"size": "10 seconds", "hop": "30 seconds"}}),
            ev_key,
            COUNT_SUM,
            {
                "window_filter": window_gaps(ev_key, ev_ts, 10 * SECOND, 30 * SECOND),
                "start_long": by_start(ev_key, ev_ts, 10 * SECOND, 30 * SECOND),
            },
            what="hopping 10 s every 30 s (gaps), count+sum per key",
        )
    )
    out.append(
        Bench(
            "sessions_batch",
            "batch",
            "events_10000",
            dict(base, window={"session": {"gap": "30 seconds"}}),
            ev_key,
            COUNT_SUM,
            {
                "session_window": by_session_window(ev_key, ev_ts, 30 * SECOND),
                "lag_running_sum": by_session_lag(ev_key, ev_ts, 30 * SECOND),
                "gap_buckets": by_session_buckets(ev_key, ev_ts, 30 * SECOND, {"n": F.sum, "total": F.sum}),
            },
            what="sessions, gap 30 s, count+sum per key",
        )
    )
    out.append(
        Bench(
            "sliding_batch",
            "batch",
            "events_10000",
            dict(base, window={"sliding": {"time_difference": "10 seconds"}}),
            ev_key,
            COUNT_SUM,
            {
                "frames_drop_duplicates": sliding_frames(ev_key, ev_ts, 10 * SECOND, "drop_duplicates"),
                "frames_filter": sliding_frames(ev_key, ev_ts, 10 * SECOND, "filter"),
            },
            what="KIP-450 sliding, time difference 10 s, count+sum per key",
        )
    )
    # (on data where 0.1% of the records have no event time: a plain groupBy(key) counts them, and
    # computes another answer than the global window of event time, which has none for them)
    out.append(
        Bench(
            "global_batch",
            "batch",
            "events_10000_untimed",
            dict(base, window="global"),
            ev_key,
            COUNT_SUM,
            {"group_by_key_with_time": by_key(ev_key, ev_ts)},
            what="global window, count+sum per key (0.1% of the records without event time)",
        )
    )

    # state stays bounded: 30 minutes of event time, allowed lateness, late records
    st = {
        "event_time": "ts",
        "key": ["key"],
        "window": {"tumbling": {"size": "1 minute"}},
        "watermark": {"max_delay": "5 seconds"},
        "allowed_lateness": "2 minutes",
        "aggregates": AGG_SPECS["count_sum"],
    }
    out.append(
        Bench(
            "state_bounded",
            "stream",
            "state",
            st,
            ev_key,
            COUNT_SUM,
            {"window": by_window(ev_key, ev_ts, MINUTE, delay="125 seconds")},
            state_series=True,
            files_per_trigger=1,
            what="tumbling 1 min, max_delay 5 s + allowed lateness 2 min (plain: watermark "
            "delay 2 min 5 s), 3 % of records 30-90 s late, one file per micro-batch",
        )
    )
    out.append(
        Bench(
            "state_bounded_stateful",
            "stream",
            "state",
            st,
            ev_key,
            COUNT_SUM,
            {"window": by_window(ev_key, ev_ts, MINUTE, delay="125 seconds")},
            group="state_bounded",
            state_series=True,
            files_per_trigger=1,
            plan="stateful",
            what="state_bounded with panes' stateful plan forced (transformWithStateInPandas)",
        )
    )
    # a window pipeline: the three largest amounts of each key's minute, with their time (issue 31)
    top3 = {
        "event_time": "ts",
        "key": ["key"],
        "window": {"tumbling": {"size": "1 minute"}},
        "window_pipeline": {"sql": "SELECT amount, ts FROM rows ORDER BY amount DESC LIMIT 3"},
    }
    for mode in ("stream", "batch"):
        plains = {
            "collect_sorted": top_n_collect(
                ev_key, ev_ts, MINUTE, 3, "amount", delay="0 seconds" if mode == "stream" else None
            )
        }
        if mode == "batch":
            plains["row_number"] = top_n_row_number(ev_key, ev_ts, MINUTE, 3, "amount")
        out.append(
            Bench(
                f"top3_10k_keys_{mode}",
                mode,
                "events_10000",
                top3,
                ev_key,
                {"amount": lambda: F.max("amount")},  # (the checksum's value column: the amounts kept)
                plains,
                what="window pipeline: top 3 amounts per key and 1 min window (SQL ORDER BY ... LIMIT 3), 10 k keys",
            )
        )
    return out
