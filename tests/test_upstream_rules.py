"""The rules of `make test-upstream` (tools/upstream_tests.py): the checked-in list is valid, a
failure numpyro does not have is never expected, and a deliberate difference must fail exactly
as documented while numpyro passes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"
sys.path.insert(0, str(TOOLS))

from upstream_plugin import load_expected  # noqa: E402
from upstream_tests import EXPECTED, Run, judge  # noqa: E402

TEST = "test_distributions.py::test_consistent_pytree"
DIFFERENCE = f'''
[[difference]]
test = "{TEST}"
modes = ["substituted"]
message = "assert 'covariance_matrix' in"
reason = "numpyro writes lazy values into __dict__"
'''


def _run(mode: str, outcome: str, message: str = "") -> Run:
    return Run(mode, {TEST: (outcome, 0.1, message)}, 1.0, 0)


def test_the_checked_in_list_is_valid():
    entries = load_expected(EXPECTED)
    assert entries
    assert all("numpyro" in e.modes for e in entries if e.message is None)
    assert all("numpyro" not in e.modes for e in entries if e.message is not None)


@pytest.mark.parametrize("body, error", [
    ('[[failure]]\ntest = "t.py::x"\nmodes = ["substituted"]\nreason = "r"\n',
     "never expected"),
    (DIFFERENCE.replace('["substituted"]', '["numpyro", "substituted"]'), "numpyro passes"),
    (DIFFERENCE.replace("message = \"assert 'covariance_matrix' in\"\n", ""), "quote"),
    (DIFFERENCE.replace(TEST, "test_distributions.py::*"), "one node id"),
])
def test_malformed_entries_are_refused(tmp_path, body, error):
    path = tmp_path / "list.toml"
    path.write_text(body)
    with pytest.raises(ValueError, match=error):
        load_expected(path)


def test_a_difference_fails_as_documented_and_numpyro_passes(tmp_path):
    path = tmp_path / "list.toml"
    path.write_text(DIFFERENCE)
    entries = load_expected(path)
    documented = "AssertionError: assert 'covariance_matrix' in {'scale_tril': ...}"
    ok = judge({"numpyro": _run("numpyro", "passed"),
                "substituted": _run("substituted", "xfailed", documented)}, entries, [])
    assert ok.problems == []
    other = judge({"substituted": _run("substituted", "xfailed", "TypeError: boom")},
                  entries, [])
    assert ["fails otherwise than the documented difference" in p for p in other.problems] == [
        True]
    both = judge({"numpyro": _run("numpyro", "failed", documented),
                  "substituted": _run("substituted", "xfailed", documented)}, entries, [])
    assert any("fails with numpyro too" in p for p in both.problems)


def test_an_unlisted_failure_is_a_stabledist_bug():
    verdict = judge({"numpyro": _run("numpyro", "passed"),
                     "substituted": _run("substituted", "failed", "AssertionError")}, [], [])
    assert any("STABLEDIST ONLY" in p for p in verdict.problems)
