"""Window pipeline functions of the tests (``window_pipeline: {fn: "window_functions:NAME"}``):
each takes a pandas DataFrame of a window's rows and returns a DataFrame. Importable by Spark's
Python workers (tests/conftest.py puts this directory on their path)."""

import pandas as pd


def distinct_cars(rows: pd.DataFrame) -> pd.DataFrame:
    """Per window, each traffic light's distinct cars, sorted, and their passengers."""
    out = []
    for light, group in rows.groupby("traffic_light", sort=True):
        cars = sorted(set(group["registration_plate"]))
        out.append(
            {
                "traffic_light": light,
                "cars": cars,
                "total_cars": len(cars),
                "passengers": int(group["passengers"].sum()),
            }
        )
    return pd.DataFrame(out, columns=["traffic_light", "cars", "total_cars", "passengers"])


def largest(rows: pd.DataFrame) -> pd.DataFrame:
    """The two rows with the largest v (ties: the earlier row), with their window end."""
    top = rows.sort_values("v", ascending=False, kind="stable").head(2)
    return pd.DataFrame(
        {
            "v": top["v"].to_numpy(),
            "t": top["t"].to_numpy(),
            "ends": top["window_end"].dt.strftime("%H:%M:%S").to_numpy(),
        }
    )


def occupancy(rows: pd.DataFrame) -> pd.DataFrame:
    """Passengers per car; fails on a window holding a car without passengers."""
    if (rows["passengers"] <= 0).any():
        raise ValueError("a car without passengers")
    return pd.DataFrame({"cars": [len(rows)], "per_car": [float(rows["passengers"].mean())]})


def nothing(rows: pd.DataFrame) -> pd.DataFrame:
    """No rows (but a column)."""
    return pd.DataFrame({"v": pd.Series([], dtype="int64")})


def not_a_frame(rows: pd.DataFrame):
    return len(rows)


def count_sum_min(rows: pd.DataFrame) -> pd.DataFrame:
    """count(*), sum(v), min(v) of the window's rows, as one row."""
    return pd.DataFrame({"n": [len(rows)], "s": [int(rows["v"].sum())], "lo": [int(rows["v"].min())]})


def rows_unless_odd(rows: pd.DataFrame) -> pd.DataFrame:
    """The window's number of rows; fails on a window of an odd number of rows (the conservation
    properties: a failed window's counted records go to the dead letters later)."""
    if len(rows) % 2:
        raise ValueError(f"an odd window: {len(rows)} rows")
    return pd.DataFrame({"n": [len(rows)]})
