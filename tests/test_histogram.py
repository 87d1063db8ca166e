import numpy as np
import pytest

from harness.stats.histogram import (
    HIGHEST_US,
    counts_view,
    decode,
    encode,
    fold,
    fold_many,
    new_histogram,
    percentiles,
)


def recorded_one_by_one(values):
    histogram = new_histogram()
    for value in values:
        assert histogram.record_value(int(value))
    return histogram


def assert_same(a, b):
    assert np.array_equal(counts_view(a), counts_view(b))
    assert a.get_total_count() == b.get_total_count()
    assert a.get_min_value() == b.get_min_value()
    assert a.get_max_value() == b.get_max_value()
    assert a.get_percentile_to_value_dict([50, 90, 99, 99.9, 99.99]) == \
        b.get_percentile_to_value_dict([50, 90, 99, 99.9, 99.99])


@pytest.mark.parametrize("seed", range(4))
def test_fold_equals_record_value_value_for_value(seed):
    rng = np.random.default_rng(seed)
    values = np.concatenate([
        rng.integers(0, HIGHEST_US + 1, 5_000),                   # uniform over the range
        np.clip(rng.lognormal(5, 2, 20_000), 0, HIGHEST_US),      # latency-like, long tail
        rng.integers(0, 4096, 5_000),                             # the exact-unit buckets
        # every bucket boundary and its neighbours
        np.array([v + d for k in range(32) for v in [2 ** k] for d in (-1, 0, 1)
                  if 0 <= v + d <= HIGHEST_US]),
        np.array([0, 1, HIGHEST_US]),
    ]).astype(np.int64)
    folded = new_histogram()
    assert fold(folded, values) == 0
    assert_same(folded, recorded_one_by_one(values))


def test_fold_from_lists_in_chunks_equals_one_fold():
    rng = np.random.default_rng(9)
    chunks = [rng.integers(0, 100_000, n).tolist() for n in (0, 1, 10, 1000, 5)]
    chunked = new_histogram()
    fold_many(chunked, chunks)
    assert_same(chunked, recorded_one_by_one([v for c in chunks for v in c]))


def test_out_of_range_values_are_clamped_and_counted_never_dropped():
    histogram = new_histogram()
    assert fold(histogram, [-5, 10, HIGHEST_US * 2]) == 2
    assert histogram.get_total_count() == 3
    assert histogram.get_min_value() == 0
    assert histogram.get_max_value() >= HIGHEST_US


def test_encode_decode_round_trip_and_percentiles():
    histogram = new_histogram()
    fold(histogram, list(range(1, 1001)))
    again = decode(encode(histogram))
    assert_same(again, histogram)
    p = percentiles(again)
    assert p["p50"] == 500 and p["p99"] == 990 and p["max"] == 1000
    assert percentiles(new_histogram()) == {"p50": None, "p90": None, "p99": None,
                                            "p99.9": None, "max": None}


def test_values_at_equals_the_packages_get_value_at_percentile() -> None:
    import random

    from harness.stats.histogram import values_at

    rng = random.Random(11)
    for _ in range(100):
        histogram = new_histogram()
        for _ in range(rng.randint(1, 2000)):
            histogram.record_value(int(rng.lognormvariate(rng.uniform(0, 12), 2)) + 1)
        points = [0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0, rng.uniform(0, 100)]
        expected = [histogram.get_value_at_percentile(p) for p in points]
        assert values_at(histogram, points) == expected
        # The same histogram as the outputs meet it: decoded, and added into another.
        again = decode(encode(histogram))
        assert values_at(again, points) == expected
        summed = new_histogram()
        summed.add(again)
        assert values_at(summed, points) == expected
