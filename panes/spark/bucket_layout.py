"""Which hash bucket holds a key, and the number Spark groups that bucket by: its label.

The engine's plans over buckets group the rows by a bucket column, and Spark places each group in
the shuffle partition ``pmod(murmur3(value, 42), partitions)`` (its ``HashPartitioning``). A
partition's task runs its buckets one after another, each with a fixed cost (in a stream: the
state's load and save, the state server's round trips, the output's conversion), so how the buckets
fall on the partitions decides the slowest task. Numbered 0..n-1 they fall unevenly (8 buckets on 2
partitions: 5 and 3, both buckets of 2 on one). So bucket ``i`` of ``n`` is grouped by its label,
a number whose Spark hash is ``i`` modulo ``n``: with as many partitions as buckets, one bucket in
each; with a divisor or a multiple of ``n``, evenly.

A label is ``n << 20`` plus a small search offset, so a stored state's label says how many buckets
its checkpoint was made with, and a label below ``1 << 20`` that an older panes made it (its
buckets numbered 0..n-1): ``made_with``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..spec import MAX_BUCKETS, buckets_for

if TYPE_CHECKING:
    from pyspark.sql import Column

#: the layout's name (a checkpoint's state made in another cannot be read by this one)
LAYOUT = "spread-1"
#: labels are n << 20 plus an offset under 1 << 20: within a Spark int up to MAX_BUCKETS
LABEL_SHIFT = 20
_MASK32 = 0xFFFFFFFF


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` (signed), the hash its ``HashPartitioning`` places an int
    grouping column by."""

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & _MASK32

    k1 = rotl((value & _MASK32) * 0xCC9E2D51 & _MASK32, 15) * 0x1B873593 & _MASK32
    h1 = (rotl(seed ^ k1, 13) * 5 + 0xE6546B64) & _MASK32
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK32
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def spark_partition(label: int, partitions: int) -> int:
    """The shuffle partition Spark groups ``label`` in."""
    return spark_hash_int(label) % partitions  # (Python's % is Spark's pmod for a positive divisor)


@lru_cache(maxsize=64)
def labels(buckets: int) -> tuple[int, ...]:
    """The labels of ``buckets`` buckets, in bucket order: the first numbers from ``buckets << 20``
    on whose Spark hash is each bucket's number modulo ``buckets``."""
    if not 1 <= buckets <= MAX_BUCKETS:
        raise ValueError(f"buckets: {buckets} is not between 1 and {MAX_BUCKETS}")
    found: list[int | None] = [None] * buckets
    left, label = buckets, buckets << LABEL_SHIFT
    while left:  # (about n ln n tries: 7,700 for 1,024 buckets)
        slot = spark_partition(label, buckets)
        if found[slot] is None:
            found[slot] = label
            left -= 1
        label += 1
    return tuple(x for x in found if x is not None)


def default_buckets(spark: Any) -> int:
    """The buckets of a plan given none: one per shuffle partition of ``spark``'s session."""
    return buckets_for(int(spark.conf.get("spark.sql.shuffle.partitions")))


def made_with(label: int) -> int | None:
    """How many buckets a state stored under ``label`` was made with (None: an older panes made it,
    its buckets numbered 0..n-1)."""
    return label >> LABEL_SHIFT if label >= 1 << LABEL_SHIFT else None


def bucket_column(key: list[Column], buckets: int) -> Column:
    """The label of a row's bucket: the hash of its key's values over ``buckets`` (one bucket for
    no key)."""
    from pyspark.sql import functions as F  # (the layout's name and labels serve before Spark starts)

    found = labels(buckets)
    if not key or buckets == 1:
        return F.lit(found[0])
    index = F.pmod(F.xxhash64(*key), F.lit(buckets)).cast("int")
    return F.element_at(every_bucket(buckets), index + 1)


def every_bucket(buckets: int) -> Column:
    """Every bucket's label, as an array (a clock row reaches every bucket)."""
    from pyspark.sql import functions as F

    return F.expr(f"array({', '.join(map(str, labels(buckets)))})")  # (one JVM call, not one per label)


def numbered_refusal(checkpoint: str, afresh: str) -> str:
    """Why a checkpoint whose buckets an older panes numbered 0..n-1 cannot be read."""
    return (
        f"checkpoint {checkpoint} numbers its hash buckets 0..n-1, as panes before the bucket layout "
        f"{LAYOUT} did: this panes would look for each key's state in another bucket; {afresh}"
    )


def count_refusal(checkpoint: str, made: int, buckets: int, afresh: str) -> str:
    """Why a plan over ``buckets`` buckets cannot read a checkpoint kept in ``made`` buckets."""
    return (
        f"checkpoint {checkpoint} keeps its state in {made} hash buckets, not {buckets} (a key's state is "
        f"in its bucket of those {made}): run with buckets={made} (spark.buckets: {made}), or {afresh}"
    )


def refusal(checkpoint: str, label: int, buckets: int, afresh: str) -> str | None:
    """Why a plan over ``buckets`` buckets cannot read a checkpoint that stored a state under
    ``label`` (None: it can)."""
    made = made_with(label)
    if made is None:
        return numbered_refusal(checkpoint, afresh)
    return count_refusal(checkpoint, made, buckets, afresh) if made != buckets else None
