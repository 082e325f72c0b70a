"""Distributions in a real multi-process JAX program: two processes joined by
``jax.distributed`` on localhost (gloo CPU collectives, 2 devices each, PYTHONHASHSEED 0 and 2)
put distributions on the global mesh with the batch split, take a gradient, and pass them
through ``multihost_utils`` (broadcast_one_to_all, process_allgather, assert_equal).

Each process runs tests/multiprocess_worker.py and writes what it computed; the same program
in one process on 4 devices is the reference. numpyro's distributions run the same program
with a distribution whose leaves all have one shape: their leaf order follows the hash seed,
so the collectives mix up fields silently (the upstream problem stabledist fixes).

All five processes start at once; a process still running after `TIMEOUT` is killed with
SIGKILL (``jax.distributed`` catches SIGTERM, and a process whose peer died waits forever).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import multiprocess_worker as worker
import numpy as np
import numpyro.distributions as nd
import pytest

# one pytest worker starts them all (a module's tests run together, see tests/conftest.py);
# fresh processes: `make test-integration` (CI)
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ("0", "2")  # numpyro's field orders differ under these (checked below)
TIMEOUT = 300.0  # seconds for all processes together; they take ~15 s on an idle 2-core CI
CASES = ("mvn", "truncated")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Job:
    """One worker process and the files it writes."""

    name: str
    proc: subprocess.Popen[bytes]
    out: Path
    log: Path

    def result(self) -> dict[str, np.ndarray]:
        log = self.log.read_text(errors="replace")
        assert self.proc.returncode == 0, f"{self.name} exited {self.proc.returncode}:\n{log}"
        with np.load(self.out) as data:
            result = {key: data[key] for key in data.files}
        assert "error" not in result, f"{self.name} failed:\n{result.get('error')}"
        return result


def start(tmp: Path, name: str, process_id: int, num_processes: int, port: int, module: str,
          seed: str, cases: tuple[str, ...]) -> Job:
    env = dict(os.environ, PYTHONHASHSEED=seed,
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out, log = tmp / f"{name}.npz", tmp / f"{name}.log"
    with log.open("wb") as stream:
        proc = subprocess.Popen(
            [sys.executable, str(Path(worker.__file__)), str(process_id), str(num_processes),
             str(port), module, str(out), *cases],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=stream, stderr=subprocess.STDOUT,
        )
    return Job(name, proc, out, log)


def wait_all(jobs: list[Job], timeout: float) -> None:
    """Wait for every job. When one fails, its peer may wait forever in a collective, and
    past the deadline any may be stuck: then SIGKILL the rest (``jax.distributed`` handles
    SIGTERM and keeps waiting) and fail with the logs."""
    start = time.monotonic()
    failed: list[str] = []
    while not failed and any(job.proc.poll() is None for job in jobs):
        time.sleep(0.1)
        failed = [job.name for job in jobs if job.proc.returncode not in (None, 0)]
        if time.monotonic() - start > timeout:
            failed.append(f"timeout after {timeout} s")
    killed = [job.name for job in jobs if job.proc.poll() is None]
    for job in jobs:
        if job.proc.poll() is None:
            job.proc.kill()
            job.proc.wait()
    if failed:
        logs = "\n".join(f"--- {job.name} (exit {job.proc.returncode}):\n"
                         f"{job.log.read_text(errors='replace')[-3000:]}" for job in jobs)
        pytest.fail(f"failed: {failed}; killed: {killed}\n{logs}")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict]]:
    """Every process's results: stabledist in 2 processes, numpyro in 2, the reference."""
    tmp = tmp_path_factory.mktemp("multiprocess")
    sd_port, nd_port = free_port(), free_port()
    jobs = [
        *(start(tmp, f"stabledist{i}", i, 2, sd_port, "stabledist", SEEDS[i], CASES)
          for i in range(2)),
        *(start(tmp, f"numpyro{i}", i, 2, nd_port, "numpyro.distributions", SEEDS[i],
                ("truncated",))
          for i in range(2)),
        start(tmp, "reference", 0, 1, 0, "stabledist", SEEDS[0], CASES),
    ]
    try:
        wait_all(jobs, TIMEOUT)
        yield {job.name: job.result() for job in jobs}
    finally:
        for job in jobs:
            if job.proc.poll() is None:
                job.proc.kill()
                job.proc.wait()


def leaves(result: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """The arrays under ``prefix``, by key path (in the order the process flattened them)."""
    return {key[len(prefix):]: value for key, value in result.items()
            if key.startswith(prefix) and key[len(prefix):][:1] in (".", "[")}


def assert_bitwise(actual: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert list(actual) == list(expected)
    for key in expected:
        np.testing.assert_array_equal(actual[key], expected[key], err_msg=key, strict=True)


@pytest.mark.parametrize("case", CASES)
def test_stabledist_across_two_processes(results: dict[str, dict], case: str) -> None:
    """Both processes agree with each other and with the one-process run of the program."""
    ref, procs = results["reference"], [results["stabledist0"], results["stabledist1"]]
    assert [int(p["process_index"]) for p in procs] == [0, 1]
    assert [int(p["process_count"]) for p in procs] == [2, 2]
    for p in procs:
        # one leaf order (declaration order) whatever the hash seed: the processes agree
        assert str(p[f"{case}/fields"]) == str(ref[f"{case}/fields"])
        assert_bitwise(leaves(p, f"{case}/same"), leaves(ref, f"{case}/same"))
        # broadcast_one_to_all: every process gets process 0's distribution, field by field
        assert_bitwise(leaves(p, f"{case}/broadcast"), leaves(procs[0], f"{case}/mine"))
        # process_allgather: each field stacked over the processes
        mine = [leaves(q, f"{case}/mine") for q in procs]
        assert_bitwise(leaves(p, f"{case}/allgather"),
                       {k: np.stack([m[k] for m in mine]) for k in mine[0]})
        # assert_equal passes on equal distributions and catches different ones
        assert str(p[f"{case}/assert_equal_same"]) == ""
        assert "differs between processes" in str(p[f"{case}/assert_equal_mine"])
        assert not np.array_equal(*(m[".loc" if case == "mvn" else ".base_dist.loc"]
                                    for m in mine))
        # the batch is split over the 4 devices of both processes; the numbers are the
        # one-process program's, bit for bit (elementwise work, and per-member gradients)
        shapes = json.loads(str(p[f"{case}/shard_shapes"]))
        assert shapes == json.loads(str(ref[f"{case}/shard_shapes"]))
        assert shapes[0][0] == worker.BATCH // 4
        assert json.loads(str(p[f"{case}/grad_shard_shapes"])) == shapes  # laid out as d
        assert_bitwise(leaves(p, f"{case}/grad"), leaves(ref, f"{case}/grad"))
        np.testing.assert_array_equal(p[f"{case}/log_prob"], ref[f"{case}/log_prob"])
        # the sum over the batch crosses processes (gloo all-reduce): the order of the
        # additions may differ from one process's, so only up to float32 rounding
        np.testing.assert_allclose(p[f"{case}/total"], ref[f"{case}/total"], rtol=1e-6)
    np.testing.assert_array_equal(procs[0][f"{case}/total"], procs[1][f"{case}/total"])


@pytest.mark.parametrize("case", CASES)
def test_same_numbers_as_numpyro(results: dict[str, dict], case: str) -> None:
    """The two-process stabledist numbers are numpyro's in one process, unsharded, bit for
    bit (the same elementwise program); the sum over the batch up to float32 rounding."""
    d, x = worker.build(nd, 0.0)[case], worker.values()[case]
    log_prob = jax.jit(lambda d, x: d.log_prob(x))(d, x)
    grad = jax.jit(jax.grad(lambda d, x: jnp.sum(d.log_prob(x))))(d, x)
    p = results["stabledist1"]
    np.testing.assert_array_equal(p[f"{case}/log_prob"], log_prob, strict=True)
    np.testing.assert_allclose(p[f"{case}/total"], jnp.sum(log_prob), rtol=1e-6)
    names = {"mvn": ["loc", "scale_tril"],
             "truncated": ["base_dist.loc", "base_dist.scale", "low", "high"]}[case]
    for name in names:
        expected = grad
        for attr in name.split("."):
            expected = getattr(expected, attr)
        np.testing.assert_array_equal(p[f"{case}/grad.{name}"], expected, err_msg=name,
                                      strict=True)


def test_numpyro_mixes_fields_across_processes(results: dict[str, dict]) -> None:
    """The upstream problem, in the same program: numpyro's processes flatten one
    distribution in different orders, so collectives pair up different fields."""
    procs = [results["numpyro0"], results["numpyro1"]]
    fields = [json.loads(str(p["truncated/fields"]))[1] for p in procs]
    assert fields[0] != fields[1], f"numpyro's field order no longer follows the hash: {fields}"
    same = [list(leaves(p, "truncated/same").values()) for p in procs]
    # both processes hold the same distribution ...
    assert sorted(a.tobytes() for a in same[0]) == sorted(a.tobytes() for a in same[1])
    # ... but broadcasting it changes process 1's copy: its fields get other fields' values
    broadcast = list(leaves(procs[1], "truncated/broadcast").values())
    assert any(not np.array_equal(a, b) for a, b in zip(broadcast, same[1], strict=True))
    for p in procs:
        # assert_equal calls equal distributions different, and putting one on the global
        # mesh fails (jax.device_put checks the value is the same in every process)
        assert "differs between processes" in str(p["truncated/assert_equal_same"])
        assert "is not the same on each process" in str(p["truncated/device_put_error"])
