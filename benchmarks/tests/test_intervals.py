"""Interval verdicts: the paired ratio's 95% t-interval (stabledist.benchmark), the rows
that carry it and the targets that judge by it."""

from __future__ import annotations

import math

import pytest

from benchmarks.registry import BENCHMARKS
from benchmarks.report import slower_target
from stabledist.benchmark._measure import BenchResult, Case, paired_ratio_interval
from stabledist.benchmark._rows import aggregate, first_call_row, make_row, single


def test_paired_ratio_interval_by_hand_and_its_verdicts() -> None:
    """Ratios e^0, e^0.1, e^0.2: log mean 0.1, sd 0.1, n 3, so the half-width of the log
    interval is 4.303 * 0.1 / sqrt(3)."""
    iv = paired_ratio_interval([2.0, 2 * math.exp(0.1), 2 * math.exp(0.2)], [2.0, 2.0, 2.0])
    half = 4.302653 * 0.1 / math.sqrt(3)  # t(0.975, df 2)
    assert iv["n"] == 3 and iv["verdict"] == "same"
    assert iv["ratio"] == pytest.approx(math.exp(0.1))
    assert iv["lo"] == pytest.approx(math.exp(0.1 - half))
    assert iv["hi"] == pytest.approx(math.exp(0.1 + half))
    same = paired_ratio_interval([5.0] * 4, [5.0] * 4)  # identical: zero-width interval at 1
    assert (same["ratio"], same["lo"], same["hi"], same["verdict"]) == (1.0, 1.0, 1.0, "same")
    # numpyro / stabledist about 0.8: stabledist clearly slower, and the mirror image faster
    slow = paired_ratio_interval([1.0, 1.1, 0.9, 1.0, 1.05], [1.25, 1.35, 1.15, 1.2, 1.3])
    assert slow["verdict"] == "slower" and slow["hi"] < 0.97
    fast = paired_ratio_interval([1.25, 1.35, 1.15, 1.2, 1.3], [1.0, 1.1, 0.9, 1.0, 1.05])
    assert fast["verdict"] == "faster" and fast["lo"] > 1.03
    # a 10% gap with too much scatter across two pairs: the interval straddles, "same"
    wide = paired_ratio_interval([1.0, 1.0], [1.0, 1.2])
    assert wide["hi"] > 0.97 and wide["verdict"] == "same"
    # one pair: no interval, never "slower"
    one = paired_ratio_interval([1.0], [2.0])
    assert (one["ratio"], one["lo"], one["hi"], one["n"], one["verdict"]) == (
        0.5, None, None, 1, "unresolved")
    # pairs with a non-positive member are dropped; unequal lengths are an error
    assert paired_ratio_interval([0.0, 2.0], [1.0, 1.0])["verdict"] == "unresolved"
    assert paired_ratio_interval([], [])["verdict"] == "unresolved"
    with pytest.raises(ValueError):
        paired_ratio_interval([1.0, 2.0], [1.0])


def test_rows_carry_interval_verdict_and_whether_judged() -> None:
    case = Case("c", {}, {"numpyro": [1.0, 1.1, 0.9, 1.0], "stabledist": [1.3, 1.4, 1.2, 1.3]})
    row = single("dispatch", case, "ns/call")
    assert row["verdict"] == "slower" and row["judged"] is True
    assert row["ratio"] < row["ratio_hi"] < 0.97 and row["spread"] == "95% CI (t, 4 reps)"
    assert single("lazy", case, "ns/read")["judged"] is False  # own targets
    assert single("compile", case, "s", judged=False)["judged"] is False
    agg = aggregate("flatten", [case, case], "all", "ns")
    assert agg["judged"] is False and agg["verdict"] is None
    once = first_call_row("closure", "x first call", {"numpyro": 2.0, "stabledist": 1.0})
    assert (once["ratio"], once["verdict"], once["judged"]) == (2.0, "unresolved", True)
    reps = first_call_row("closure", "x first call", {"numpyro": [2.0, 2.2, 2.1],
                                                       "stabledist": [1.0, 1.1, 1.0],
                                                       "nocache": [3.0]})
    assert reps["verdict"] == "faster" and reps["stabledist"] == 1.0 and reps["nocache"] == 3.0


def test_slower_target_judges_only_judged_rows_by_their_interval() -> None:
    def row(bench: str, ratio: float, lo: float | None, hi: float | None, verdict: str,
            judged: bool = True) -> dict:
        return make_row(bench, f"{bench} case", "s", ratio=ratio, ratio_lo=lo, ratio_hi=hi,
                        verdict=verdict, judged=judged)

    lazy = row("lazy", 0.5, 0.4, 0.6, "slower", judged=False)
    fine = [row("e2e", 0.95, 0.90, 1.01, "same"), row("closure", 1.5, 1.4, 1.6, "faster"),
            lazy, row("compile", 0.6, None, None, "unresolved")]
    t = slower_target(fine)
    assert t is not None and t["target"] == "slower" and t["passed"] is True
    assert "wholly below 0.97" in t["criterion"]
    assert t["value"] == "worst row e2e / e2e case: 0.95x [0.90-1.01]"  # lowest upper bound
    assert "of 3 judged rows: 1 faster, 1 same, 0 slower, 1 unresolved" in t["detail"]
    slow_rows = [*fine, row("dispatch", 0.9, 0.85, 0.96, "slower")]
    slow = slower_target(slow_rows)
    assert slow is not None and slow["passed"] is False
    assert "slower: dispatch/dispatch case 0.90x [0.85-0.96]" in slow["detail"]
    unresolved = slower_target([row("e2e", 0.5, None, None, "unresolved")])
    assert unresolved is not None and unresolved["passed"] is None  # nothing resolved: N/A
    smoke = slower_target(slow_rows, False)
    assert smoke is not None and smoke["passed"] is None
    assert slower_target([lazy]) is None


def test_e2e_target_uses_the_interval_rule() -> None:
    check = next(t.check for t in BENCHMARKS["e2e"].targets if t.key == "e2e")
    res = BenchResult("e2e", "t", "s", {"numpyro": "", "stabledist": ""}, "", [
        Case("gp NUTS", {"same_program": True},
             {"numpyro": [1.0, 1.1, 0.95], "stabledist": [1.05, 1.0, 1.0]}),
        Case("angles NUTS", {"same_program": False},
             {"numpyro": [2.0, 2.1, 2.2], "stabledist": [1.0, 1.0, 1.1]})])
    verdict = check(res)
    assert verdict is not None and verdict.passed is True
    assert verdict.value.startswith("worst gp NUTS") and "(the same program)" in verdict.value
    res.cases.append(Case("m SVI", {}, {"numpyro": [1.0, 1.0, 1.0],
                                        "stabledist": [1.2, 1.25, 1.22]}))
    verdict = check(res)
    assert verdict is not None and verdict.passed is False and "slower: m SVI" in verdict.detail
    res.cases = [Case("m SVI", {}, {"numpyro": [1.0], "stabledist": [2.0]})]
    verdict = check(res)
    assert verdict is not None and verdict.passed is None  # one repetition: no interval
