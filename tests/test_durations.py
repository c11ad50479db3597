"""The quick run stays quick and no test hangs on the machine's speed: every test measured at or over the `slow`
threshold (tests/durations.txt, written by `python -m tests.durations`) is marked slow, the list names only tests
that exist, and no property test is timed by Hypothesis."""

from __future__ import annotations

import pytest

from tests.durations import LIST, collected, read_list, threshold_s

# Kept in the quick run although it takes longer: the quick run holds one accuracy test, its cheapest scored case
QUICK_ON_PURPOSE = {"tests/test_classify.py::test_full_evidence_f1_at_least_095[lease-expiry-logfmt-True-False]"}
REMEASURE = "measure again with `python -m tests.durations` (or `-- tests/that_file.py` for a few)"


@pytest.fixture(scope="module")
def tests() -> dict[str, dict[str, bool]]:
    return collected()


# each collects the whole suite in a process of its own (once per module)
@pytest.mark.slow
def test_every_test_measured_at_or_over_the_threshold_is_marked_slow(tests):
    limit = threshold_s()
    unmarked = {test_id: seconds for test_id, seconds in read_list().items() if seconds >= limit
                and test_id in tests and not tests[test_id]["slow"] and test_id not in QUICK_ON_PURPOSE}
    assert not unmarked, (f"{len(unmarked)} test(s) took {limit} s or more ({LIST.name}) and are not marked slow: "
                          + ", ".join(f"{test_id} {seconds:.2f} s" for test_id, seconds in sorted(unmarked.items())))


@pytest.mark.slow
def test_the_quick_run_holds_an_accuracy_test(tests):
    quick = [test_id for test_id, test in tests.items() if not test["slow"] and "_f1_at_least_" in test_id]
    assert quick and set(quick) <= QUICK_ON_PURPOSE, quick


@pytest.mark.slow
def test_the_list_of_durations_names_only_tests_that_exist(tests):
    gone = sorted(set(read_list()) - set(tests))
    assert not gone, f"{LIST.name} lists {len(gone)} test(s) that no longer exist ({', '.join(gone[:10])}): {REMEASURE}"


@pytest.mark.slow
def test_no_property_test_is_timed_by_hypothesis(tests):
    """A deadline or the too_slow health check fails an example for being slow, which a busy machine makes it."""
    timed = sorted(test_id for test_id, test in tests.items() if test["timed"])
    assert not timed, f"{len(timed)} property test(s) timed by Hypothesis: {', '.join(timed[:10])}"
