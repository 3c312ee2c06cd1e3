"""Several worker processes behind one port (CAPSNET_PROCESSES, service/processes.py), driven as `python -m service`: they
answer as one process does, their metrics add up, they drain on SIGTERM, a killed one is replaced while clients are
answered, and a load or an unload through one of them reaches all."""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from bench.loadgen import load
from harness.payloads import digit_pngs, predict_requests
from harness.server import REPO, Server, children, connections_held, free_port, process_cpu_seconds, workers
from service.group import HANDLED
from tests.needs import missing
from tests.service.test_loading import new_version, weights_dir

PNGS = digit_pngs(12)


def predict(url: str, png: bytes) -> httpx.Response:
    """On a connection of its own, which the kernel hands to one of the workers by its addresses."""
    return httpx.post(url + "/predict", files={"file": ("d.png", png, "image/png")}, timeout=60)


def counted(metrics: str, endpoint: str) -> float:
    m = re.search(rf'^capsnet_requests_total{{endpoint="{re.escape(endpoint)}",method="POST",status="200"}} (\S+)$', metrics, re.M)
    return float(m.group(1)) if m else 0.0


def ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def wait_for(condition, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    weights = weights_dir(tmp_path_factory.mktemp("group"))
    grpc_port = free_port()
    server = Server({"CAPSNET_PROCESSES": "2", "CAPSNET_GRPC_PORT": str(grpc_port)}, weights=weights).wait_ready(120)
    yield server, weights, grpc_port
    server.stop()


def test_two_processes_answer_as_one_does_and_both_serve(group):
    """The same uploads give the same capsules from a single process and from the group, and both workers took some."""
    server, _, _ = group
    single = Server().wait_ready(120)
    try:
        alone = [predict(single.url, p).json() for p in PNGS]
    finally:
        single.stop()
    pids = workers(server.proc.pid)
    assert len(pids) == 2
    cpu = {pid: process_cpu_seconds(pid) for pid in pids}
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda p: predict(server.url, p), PNGS * 4))
    assert {r.status_code for r in together} == {200}
    for i, r in enumerate(together):
        answer, reference = r.json(), alone[i % len(PNGS)]
        assert answer["prediction"] == reference["prediction"]
        np.testing.assert_allclose(answer["lengths"], reference["lengths"], atol=2e-3)
    assert all(process_cpu_seconds(pid) - cpu[pid] > 0.05 for pid in pids), "each worker served some of them"


def test_keep_alive_clients_connecting_at_once_are_spread_over_the_workers(group):
    """32 clients that open their connections at once and keep them (a load generator, a load balancer's pool): every
    worker holds a share of them while they send uploads, so that every worker serves them, not only whichever woke
    first. Three times over, each with fresh connections: a burst can fall evenly by chance."""
    server, _, _ = group
    port = int(server.url.rsplit(":", 1)[1])
    pids = workers(server.proc.pid)
    for _ in range(3):
        held: dict[int, int] = {}

        def count_mid_load(held: dict[int, int] = held) -> None:
            time.sleep(1.0)
            held.update({pid: connections_held(pid, port) for pid in pids})

        counter = threading.Thread(target=count_mid_load)
        counter.start()
        result = load(server.url, predict_requests("127.0.0.1", port), 32, 2.0, 2000)
        counter.join()
        assert result.summary()["errors"] == 0
        assert sum(held.values()) == 32, held
        assert min(held.values()) >= 4, f"connections by worker: {held}"


def test_metrics_add_up_over_the_workers_whichever_is_scraped(group):
    server, _, _ = group
    before = counted(httpx.get(server.url + "/metrics").text, "/predict")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        statuses = [r.status_code for r in pool.map(lambda p: predict(server.url, p), PNGS * 2)]
    assert statuses == [200] * len(PNGS) * 2
    # a request is counted once its answer is sent, a moment after its client may have it
    wait_for(lambda: counted(httpx.get(server.url + "/metrics").text, "/predict") - before >= len(PNGS) * 2, 10, "every answer counted")
    scrapes = [httpx.get(server.url + "/metrics").text for _ in range(6)]  # each on its own connection: either worker
    assert {counted(text, "/predict") - before for text in scrapes} == {len(PNGS) * 2}
    assert all("capsnet_requests_in_flight" in text and "capsnet_queue_images" in text for text in scrapes)


def test_the_group_serves_grpc_from_every_worker(group):
    """gRPC clients, each on a connection of its own, are all answered; health says SERVING."""
    server, _, grpc_port = group
    x = np.zeros((1, 1, 28, 28), np.float32)
    for _ in range(6):
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        try:
            assert client.is_server_ready()
            inp = grpcclient.InferInput("image", list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            assert client.infer("capsnet", [inp]).as_numpy("lengths").shape == (1, 10)
        finally:
            client.close()


def test_a_load_or_an_unload_through_one_worker_reaches_them_all(group):
    """The repository extension's load lands on one worker and is answered once every worker has done it: from the
    answer on, every request, whichever worker it reaches, is served by the new version. An unload likewise takes the
    model out of every worker before it is answered, and a load brings it back on all."""
    server, weights, _ = group

    def answers(n: int = 16) -> list[httpx.Response]:
        """On fresh connections, spread by the kernel over both workers."""
        return [predict(server.url, PNGS[0]) for _ in range(n)]

    after = new_version(weights, "group")
    r = httpx.post(server.url + "/v2/repository/models/capsnet/load", timeout=120)
    assert r.status_code == 200, r.text
    assert {a.json()["model"]["version"] for a in answers()} == {after}
    assert httpx.post(server.url + "/v2/repository/models/capsnet/unload").status_code == 200
    assert {a.status_code for a in answers()} == {503}
    assert httpx.post(server.url + "/v2/repository/models/capsnet/load", timeout=120).status_code == 200
    assert {a.status_code for a in answers()} == {200}


def test_a_killed_worker_is_replaced_while_clients_are_answered(tmp_path):
    """SIGKILL one worker under load: the requests it held are lost with it (their connections close), every other
    request is answered 200 by the other worker, /readyz says 503 until the replacement is warm, then 200."""
    server = Server({"CAPSNET_PROCESSES": "2"}, weights=weights_dir(tmp_path)).wait_ready(120)
    try:
        victim, survivor = workers(server.proc.pid)
        results: list[int | str] = []
        stop = threading.Event()

        def client() -> None:
            while not stop.is_set():
                try:
                    results.append(predict(server.url, PNGS[len(results) % len(PNGS)]).status_code)
                except httpx.TransportError as e:
                    results.append(type(e).__name__)

        threads = [threading.Thread(target=client) for _ in range(3)]
        for t in threads:
            t.start()
        wait_for(lambda: len(results) >= 10, what="requests before the kill")
        os.kill(victim, signal.SIGKILL)
        at_kill = len(results)

        def readyz() -> int | str:
            try:
                return httpx.get(server.url + "/readyz").status_code
            except httpx.TransportError as e:  # a connection the killed worker's socket had queued is reset
                return type(e).__name__

        # the group is not ready while one worker is missing or still loading
        wait_for(lambda: readyz() == 503, what="not ready without the killed worker")
        wait_for(lambda: len(set(workers(server.proc.pid)) - {survivor}) == 1, what="replacement")
        wait_for(lambda: httpx.get(server.url + "/readyz").status_code == 200, timeout=120, what="ready again")
        wait_for(lambda: len(results) >= at_kill + 30, what="requests after the replacement")
        stop.set()
        for t in threads:
            t.join(60)
        failed = [r for r in results if r != 200]
        assert len(failed) <= 3, f"only the requests the killed worker held are lost: {failed}"
        assert all(isinstance(r, str) for r in failed), failed  # lost connections, never an error answer
        assert survivor in workers(server.proc.pid) and victim not in workers(server.proc.pid)
    finally:
        server.stop()


def test_a_hung_worker_is_not_ready_and_is_replaced(tmp_path):
    """A worker whose event loop stops (SIGSTOP: it holds its connections and answers none) is counted out of the group's
    readiness within CAPSNET_WORKER_STALL_S, killed and replaced; the group is ready again once the replacement is warm."""
    # 4 s: the survivor's mark, renewed every second, keeps 3 s to spare while the replacement warms beside it
    server = Server({"CAPSNET_PROCESSES": "2", "CAPSNET_WORKER_STALL_S": "4"}, weights=weights_dir(tmp_path)).wait_ready(120)
    try:
        victim, survivor = workers(server.proc.pid)
        os.kill(victim, signal.SIGSTOP)

        def readyz() -> int | str:
            try:  # a new connection the kernel hands the stopped worker is never answered
                return httpx.get(server.url + "/readyz", timeout=1).status_code
            except httpx.TransportError as e:
                return type(e).__name__

        wait_for(lambda: readyz() == 503, what="not ready with a hung worker")
        wait_for(lambda: victim not in workers(server.proc.pid) and len(workers(server.proc.pid)) == 2, what="replacement")
        wait_for(lambda: readyz() == 200, timeout=120, what="ready again")
        assert survivor in workers(server.proc.pid)
        assert [predict(server.url, png).status_code for png in PNGS] == [200] * len(PNGS)
        assert f"worker {victim} has not marked itself alive" in server.output()
    finally:
        server.stop()


def test_a_group_paused_whole_is_not_taken_for_hung_workers(tmp_path):
    """The whole group stopped and resumed (a container paused, a machine suspended, the process group sent SIGSTOP):
    the supervisor goes on (its wait for signals, cut short by the stop, returned a signal number that names none, and
    it stopped), and as no worker renewed its mark meanwhile, the supervisor's own rounds included, none is hung: the
    supervisor, resumed first, gives them a full CAPSNET_WORKER_STALL_S to renew their marks before it judges them."""
    server = Server({"CAPSNET_PROCESSES": "2", "CAPSNET_WORKER_STALL_S": "4"}, weights=weights_dir(tmp_path)).wait_ready(120)
    try:
        pids = workers(server.proc.pid)
        for pid in [*pids, server.proc.pid]:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(6)  # longer than the stall limit
        os.kill(server.proc.pid, signal.SIGCONT)
        time.sleep(1)  # the workers resumed a second later
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        wait_for(lambda: ready(server.url), what="ready after the pause")
        time.sleep(5)  # past the stall limit since the supervisor resumed
        assert sorted(workers(server.proc.pid)) == sorted(pids), "a worker of the paused group was killed"
        assert "has not marked itself alive" not in server.output()
        assert [predict(server.url, png).status_code for png in PNGS[:4]] == [200] * 4
    finally:
        server.stop()


def test_a_sighup_while_the_workers_start_is_taken_once_they_can(tmp_path):
    """SIGHUP (a reload) sent as the group starts: the supervisor passes it on to workers still loading, which hold it
    until they can reload, rather than being ended by it and replaced."""
    server = Server({"CAPSNET_PROCESSES": "2"}, weights=weights_dir(tmp_path))
    try:
        time.sleep(0.3)  # the supervisor is up, the workers are not warm
        server.proc.send_signal(signal.SIGHUP)
        server.wait_ready(120)
        time.sleep(2)  # the reloads the workers took
        assert "died" not in server.output(), server.output()[-2000:]
        assert len(workers(server.proc.pid)) == 2 and ready(server.url)
    finally:
        server.stop()


def test_sigterm_drains_every_worker_with_nothing_lost(tmp_path):
    """Requests in flight on both workers when the supervisor gets SIGTERM are all answered; then it exits 0."""
    server = Server({"CAPSNET_PROCESSES": "2"}, weights=weights_dir(tmp_path)).wait_ready(120)
    pids = workers(server.proc.pid)
    cpu = {pid: process_cpu_seconds(pid) for pid in pids}
    # 60 images: a request that takes a while; encoded once, so that the clients send at once
    body = json.dumps({"images": [base64.b64encode(p).decode() for p in PNGS] * 5}).encode()
    post = partial(httpx.post, server.url + "/predict/batch", content=body, headers={"Content-Type": "application/json"}, timeout=120)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(post) for _ in range(8)]
        # every request in a worker's hands or answered (one not yet taken when the drain begins is refused, not lost)
        taken = lambda: sum(connections_held(pid, server.port) for pid in pids) + sum(f.done() for f in futures)  # noqa: E731
        wait_for(lambda: taken() >= 8, what="every request taken")
        wait_for(lambda: all(process_cpu_seconds(pid) - cpu[pid] > 0.2 for pid in pids), what="both workers busy")
        server.proc.send_signal(signal.SIGTERM)
        answers = [f.result() for f in futures]
    assert [r.status_code for r in answers] == [200] * 8
    assert all(len(r.json()["results"]) == 60 for r in answers)
    assert server.proc.wait(60) == 0
    server.stop()


def blocked_signals(pid: int, tid: int) -> set[int]:
    """The signals thread `tid` of process `pid` blocks (its SigBlk mask, as /proc shows it)."""
    mask = next(line for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines() if line.startswith("SigBlk:"))
    bits = int(mask.split()[1], 16)
    return {n for n in range(1, 65) if bits >> (n - 1) & 1}


def test_sigterm_reaches_the_supervisor_whichever_of_its_threads_the_kernel_picks(tmp_path):
    """The kernel hands a signal sent to a process to any of its threads that does not block it. The supervisor waits for
    its signals on its main thread; numpy's and onnxruntime's imports start threads of their own, and one of those
    handed SIGTERM would take the default action: the supervisor killed outright, no drain, or as a container's PID 1
    the signal dropped, and the container killed at the end of its stop grace period. So every other thread blocks them."""
    server = Server({"CAPSNET_PROCESSES": "2"}, weights=weights_dir(tmp_path)).wait_ready(120)
    try:
        pid = server.proc.pid
        others = [int(tid) for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid]
        assert others, "the supervisor runs threads besides its main one (numpy's, onnxruntime's)"
        for tid in others:
            assert blocked_signals(pid, tid) >= HANDLED, f"thread {tid} of the supervisor can be handed them"
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(60) == 0
    finally:
        server.stop()


def test_a_worker_that_cannot_start_stops_the_group(tmp_path):
    weights = weights_dir(tmp_path)
    (weights / "capsnet.onnx").unlink()
    (weights / "capsnet.onnx").write_bytes(b"not a graph")
    server = Server({"CAPSNET_PROCESSES": "2", "CAPSNET_PRECISION": "fp32"}, weights=weights)
    try:
        assert server.proc.wait(120) == 3
    finally:
        server.stop()
    assert "could not start" in server.output()


def test_workers_do_not_outlive_a_killed_supervisor(tmp_path):
    """A supervisor killed outright cannot pass SIGTERM on; its workers get it from the kernel, drain and exit."""
    # its temporary directories, which nobody is left to remove, under the test's own
    server = Server({"CAPSNET_PROCESSES": "2", "TMPDIR": str(tmp_path)}, weights=weights_dir(tmp_path)).wait_ready(120)
    pids = workers(server.proc.pid)
    server.proc.kill()
    server.proc.wait(10)

    def alive(pid: int) -> bool:
        try:
            return "zombie" not in Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return False

    wait_for(lambda: not any(alive(pid) for pid in pids), what="workers gone")


def test_a_supervisor_that_is_pid_1_keeps_its_workers(tmp_path):
    """As a container's first process (PID 1 of its namespace, as Docker runs the image's command) the supervisor's
    workers serve: a worker tells that it is orphaned by its parent's pid, not by PID 1."""
    if subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode != 0:
        missing("containers", "no PID namespace to run in (unshare --pid needs root, as the container tests do)")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPSNET_")}
    env.update(CAPSNET_PORT=str(port), CAPSNET_HOST="127.0.0.1", CAPSNET_PROCESSES="2", CAPSNET_WEIGHTS_DIR=str(weights_dir(tmp_path)))
    cmd = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "service"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: ready(url), timeout=120, what="a ready group as PID 1")
        (supervisor,) = children(proc.pid)
        assert len(workers(supervisor)) == 2
        assert predict(url, PNGS[0]).status_code == 200
    finally:
        for pid in children(proc.pid):
            os.kill(pid, signal.SIGTERM)
        proc.wait(60)
