"""Every parser of user input, searched with Hypothesis for the inputs nobody thought of: each
input is accepted (and what it gives is sane: finite, in range) or refused as `harness` says
it to a user: an error main() turns into its own lines and exit code 2 (harness.cli.app.
refusal), never another exception, which would reach the user as a traceback. The value
parsers alone may raise ValueError: the flag that calls one turns it into BadInput naming
the flag, which the group-string fuzzer checks. Bounded examples: the quick tier runs them.
The byte-level readers (profiles, workloads, size files, run directories) are fuzzed here
with random and mutated documents, and at length, coverage-guided, by contrib/bench/fuzz.py,
whose findings are kept as cases in tests/fuzz_cases/ and replayed here."""

from __future__ import annotations

import contextlib
import json
import math
import os
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness.cli.app import REFUSALS, refusal
from harness.errors import BadInput, StartFailure
from harness.experiments import profile
from harness.plan.backlog import parse_backlog
from harness.plan.group import address_list, parse_module
from harness.plan.options import parse_args, parse_property
from harness.plan.sizes import parse_sizes
from harness.plan.steps import parse_burst, parse_steps
from harness.rundir import reader
from harness.stats import slo
from harness.textfiles import MAX_DEPTH, decode
from harness.units import parse_duration, parse_range, parse_size, parse_weighted

CASES = Path(__file__).parent / "fuzz_cases"
# A value parser's refusal: the flag calling it names the flag (harness.plan.options).
PARSER_REFUSED = (ValueError, BadInput)
# HARNESS_FUZZ_EXAMPLES=5000 searches longer (by hand; the suite keeps to a few seconds).
FAST = settings(max_examples=int(os.environ.get("HARNESS_FUZZ_EXAMPLES", "200")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# Text that looks like what the parsers read: digits, units, separators, signs and words that
# float() takes (nan, inf), beside arbitrary text.
ALPHABET = string.digits + "kKmMgGbBsuh.,:@-_+ eE" + "naif"
near = st.text(alphabet=ALPHABET, max_size=40)
words = st.sampled_from(["nan", "inf", "-inf", "1e309", "-0", "0", "1e-400", "9" * 40])
texts = st.one_of(near, st.text(max_size=40), words,
                  st.builds(lambda a, b: f"{a}:{b}", words | near, near | words))


def sane(value: Any) -> bool:
    """No NaN or infinity anywhere in what a parser gave."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, tuple | list):
        return all(sane(v) for v in value)
    if hasattr(value, "__dict__") or hasattr(value, "__dataclass_fields__"):
        return all(sane(v) for v in vars(value).values()) if hasattr(value, "__dict__") else \
            all(sane(getattr(value, f)) for f in value.__dataclass_fields__)
    return True


PARSERS = {
    "duration": parse_duration, "size": parse_size, "backlog": parse_backlog,
    "steps": parse_steps, "burst": parse_burst, "sizes": parse_sizes,
    "source-addresses": address_list, "module": parse_module, "property": parse_property,
    "range": lambda t: parse_range(t, parse_size),
    "weighted": lambda t: parse_weighted(t, parse_size, "SIZE"),
}


@pytest.mark.parametrize("name", sorted(PARSERS))
@FAST
@given(text=texts)
@example(text="nan:1s")
@example(text="inf:1s")
@example(text="256:nan")
@example(text="1e309")
@example(text="0-0-0")
@example(text="@")
def test_a_value_parser_accepts_sanely_or_refuses(name: str, text: str) -> None:
    try:
        value = PARSERS[name](text)
    except PARSER_REFUSED:
        return
    assert sane(value), (name, text, value)
    if name in ("duration", "size"):
        assert value >= 0, (name, text, value)


def refused_as_main_says(call: Any) -> None:
    """call() accepts its input, or raises what main() says in lines of its own with exit
    code 2; anything else (a ValueError leaking from a parser) fails, naming it."""
    try:
        call()
    except REFUSALS as exc:
        lines, code = refusal(exc)
        assert code == 2 and lines, (exc, lines, code)
        assert all("\n" not in line for line in lines), lines
    except Exception as exc:  # what main() would show as a traceback
        raise AssertionError(f"{type(exc).__name__} reaches the user as a traceback: "
                             f"{exc}") from exc


def test_a_leaking_value_error_fails_the_fuzzers_judge() -> None:
    def leaks() -> None:
        raise ValueError("could not convert string to float: 'x'")

    def cannot_start() -> None:
        raise StartFailure("no broker")

    with pytest.raises(AssertionError, match="ValueError reaches the user as a traceback"):
        refused_as_main_says(leaks)
    with pytest.raises(AssertionError):  # one line, but a run that failed: exit 1, not 2
        refused_as_main_says(cannot_start)
    refused_as_main_says(lambda: None)


@FAST
@given(text=texts | st.from_regex(r"[a-z.]{1,12} *(<=|>=|<|>|==) *[0-9a-z.%]{0,8}",
                                   fullmatch=True))
def test_a_threshold_expression_parses_or_is_refused(text: str) -> None:
    refused_as_main_says(
        lambda: slo.parse(text, {"sender": ["latency"], "receiver": ["latency"]}, {}))


@FAST
@given(args=st.lists(st.sampled_from(["-rt", "--rate", "-rl", "--size", "--sizes", "-d",
                                      "--burst", "--rate-steps", "--slo", "-m", "--set", "x",
                                      "nan", "-1", "1e309", "4k", "1..2", ""]) | texts,
                     max_size=8))
def test_a_group_string_parses_or_is_refused(args: list[str]) -> None:
    refused_as_main_says(lambda: parse_args(args, "-g"))


# -- whole files ---------------------------------------------------------------------------------

yaml_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
yaml_values = st.recursive(yaml_scalars, lambda inner: st.lists(inner, max_size=4) |
                           st.dictionaries(st.text(max_size=12), inner, max_size=4),
                           max_leaves=20)
PROFILE_KEYS = ["groups", "run", "sweep", "search", "omb", "scenario", "experiments", "-m",
                "module", "rate", "size", "destination", "duration", "threads"]


def mutated_profile(data: Any) -> dict[str, Any]:
    """A profile that was whole, with one of its keys given something else."""
    base: dict[str, Any] = {"groups": [{"module": "loopback.Sender", "destination": "q",
                                        "rate": 100}], "run": {"duration": 1}}
    return {**base, **(data if isinstance(data, dict) else {"groups": data})}


@FAST
@given(data=yaml_values | st.dictionaries(st.sampled_from(PROFILE_KEYS), yaml_values,
                                          max_size=4).map(mutated_profile))
@example(data={"\n": None})  # found by this test: the key's line break split the error in two
def test_a_profile_document_loads_or_is_refused(tmp_path_factory: Any, data: Any) -> None:
    path = tmp_path_factory.mktemp("profile") / "p.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    refused_as_main_says(lambda: profile.load(path))


@FAST
@given(blob=st.binary(max_size=300))
@example(blob=b"\x84" * 100)
@example(blob=b"[" * 5000)
@example(blob=b"a: &x [*x]")
def test_profile_bytes_load_or_are_refused(tmp_path_factory: Any, blob: bytes) -> None:
    path = tmp_path_factory.mktemp("profile") / "p.yaml"
    path.write_bytes(blob)
    refused_as_main_says(lambda: profile.load(path))


OMB_KEYS = ["topics", "partitionsPerTopic", "messageSize", "producerRate",
            "testDurationMinutes", "subscriptionsPerTopic", "consumerPerSubscription",
            "producersPerTopic", "consumerBacklogSizeGB", "randomizedPayloadPoolSize",
            "keyDistributor"]


def omb_workload(path: Path) -> None:
    """The workload read and made into a profile, as `harness run --omb FILE -m kafka`
    does (harness.cli.run)."""
    profile.load_data(path, "", {"connections": {"broker": {"transport": "kafka"}},
                                 "omb": str(path.resolve()), "run": {}}, {})


@FAST
@given(data=yaml_values | st.dictionaries(st.sampled_from(OMB_KEYS), yaml_values, max_size=6))
@example(data={"topics": float("inf")})  # found by this test: int(inf) raised, not refused
@example(data={"producerRate": float("nan")})
def test_an_omb_workload_loads_or_is_refused(tmp_path_factory: Any, data: Any) -> None:
    path = tmp_path_factory.mktemp("omb") / "w.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    refused_as_main_says(lambda: omb_workload(path))


def make_run(directory: Path, manifest: bytes, intervals: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "manifest.json").write_bytes(manifest)
    (directory / "intervals.jsonl").write_bytes(intervals)
    return directory


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() |
                           st.text(max_size=10),
                           lambda inner: st.lists(inner, max_size=3) |
                           st.dictionaries(st.text(max_size=8), inner, max_size=3),
                           max_leaves=12)


@FAST
@given(manifest=st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()),
       intervals=st.binary(max_size=300) | st.lists(json_values, max_size=4).map(
           lambda rows: b"\n".join(json.dumps(r).encode() for r in rows)))
def test_a_run_directory_reads_or_is_refused(tmp_path_factory: Any, manifest: bytes,
                                            intervals: bytes) -> None:
    run_dir = make_run(tmp_path_factory.mktemp("run"), manifest, intervals)
    refused_as_main_says(lambda: list(reader.Records(reader.load(run_dir).intervals)))


def test_one_decoding_rule_names_the_file_line_and_column() -> None:
    with pytest.raises(BadInput) as refused:
        decode(b"groups:\n  - m: \x84x\n", "p.yaml")
    assert refused.value.where == "p.yaml:2:8"
    assert "not UTF-8" in refused.value.problem and "0x84" in refused.value.problem


def test_a_profile_nested_past_the_limit_is_refused_in_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text("groups: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n")
    with pytest.raises(BadInput) as refused:
        profile.load(deep)
    assert "levels deep" in str(refused.value)


def test_a_file_too_large_to_be_a_profile_is_refused_unread(tmp_path: Path) -> None:
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as f:  # sparse: nothing written but its length
        f.truncate(10 * 2**30)
    with pytest.raises(BadInput) as refused:
        profile.load(huge)
    assert "MiB" in str(refused.value) and "10,737,418,240 bytes" in str(refused.value)


def replay(target: str, blob: bytes, folder: Path) -> None:
    """One input through the reader contrib/bench/fuzz.py fuzzed it with: it is accepted or
    refused as main() says it, or this raises."""

    def read() -> None:
        if target == "profile":
            path = folder / "p.yaml"
            path.write_bytes(blob)
            profile.load(path)
        elif target == "omb":
            path = folder / "w.yaml"
            path.write_bytes(blob)
            omb_workload(path)
        elif target == "sizes":
            path = folder / "sizes.txt"
            path.write_bytes(blob)
            parse_sizes(f"@{path}")
        elif target == "intervals":
            path = folder / "intervals.jsonl"
            path.write_bytes(blob)
            list(reader.Records(path))
        else:
            raise AssertionError(f"no reader for {target}")

    if target == "sizes":  # a flag's value (--sizes @FILE): the flag names itself
        with contextlib.suppress(PARSER_REFUSED):
            read()
    else:
        refused_as_main_says(read)


@pytest.mark.parametrize("target", ["profile", "omb", "sizes", "intervals"])
def test_what_the_fuzzer_found_and_covered_stays_fixed(target: str, tmp_path: Path) -> None:
    """contrib/bench/fuzz.py's crashes (<target>-crash-<sha1>) and its corpus
    (corpus/<target>/: every input that reached new code), replayed through their reader."""
    found = sorted(CASES.glob(f"{target}-crash-*")) + sorted((CASES / "corpus" / target).glob("*"))
    assert found, f"no corpus for {target}: run contrib/bench/fuzz.py {target}"
    for case in found:
        replay(target, case.read_bytes(), tmp_path)
