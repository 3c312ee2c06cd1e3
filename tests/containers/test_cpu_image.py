"""The CPU image, built from the Dockerfile as the README says and run by a real engine: ready, right, healthy by its
own HEALTHCHECK, not root, and a stop that answers the request in flight and exits 0."""

from __future__ import annotations

import json
import re
import urllib.request

from tests.conftest import REPO
from tests.containers.engine import Engine, container, in_flight_at_stop, mnist_seven_png, port_of, predict, wait_ready


def dockerfile_healthcheck() -> list[str]:
    """The HEALTHCHECK command the Dockerfile declares, as the image should carry it."""
    text = (REPO / "Dockerfile").read_text()
    cmd = re.search(r"HEALTHCHECK[^\n]*\\\n\s*CMD (\[.*\])", text)
    assert cmd, "the Dockerfile declares no HEALTHCHECK CMD"
    return ["CMD", *json.loads(cmd.group(1))]


def test_image_keeps_its_healthcheck_and_user(engine: Engine, cpu_image: str) -> None:
    """OCI images drop HEALTHCHECK: the build must write Docker's format for the probe to exist at all."""
    healthcheck = engine.image_healthcheck(cpu_image)
    assert healthcheck is not None, "the image has no HEALTHCHECK (built in the OCI format?)"
    assert healthcheck["Test"] == dockerfile_healthcheck()
    assert engine.inspect(cpu_image)["Config"]["User"] == "10001:10001"


def test_runs_ready_right_healthy_and_unprivileged(engine: Engine, cpu_image: str) -> None:
    with container(engine, cpu_image, "capsnet-test-cpu", {"CAPSNET_PROVIDERS": "cpu"}) as url:
        ready = wait_ready(url)
        assert ready == {"status": "ready", "provider": "CPUExecutionProvider", "device": "CPU"}
        answer = predict(url, mnist_seven_png())
        assert answer["prediction"] == 7 and answer["is_digit"] is True
        assert engine.healthy("capsnet-test-cpu")
        assert engine.process_uid("capsnet-test-cpu") == 10001


def test_stop_answers_the_request_in_flight_and_exits_0(engine: Engine, cpu_image: str) -> None:
    name = "capsnet-test-stop"
    with container(engine, cpu_image, name, {"CAPSNET_PROVIDERS": "cpu"}) as url:
        wait_ready(url)
        status, answer = in_flight_at_stop(port_of(url), lambda: engine("stop", "-t", "30", name))
        assert status == 200, answer
        assert answer["prediction"] == 7
        state = engine.inspect(name)["State"]
        assert state["Running"] is False
        assert state["ExitCode"] == 0, engine.logs(name)[-2000:]
        log = engine.logs(name)
        # uvicorn says this only when a connection is still open at SIGTERM: the request was in flight
        assert "Waiting for connections to close" in log and "Finished server process" in log


def test_several_processes_serve_in_the_container_and_stop_with_it(engine: Engine, cpu_image: str) -> None:
    """CAPSNET_PROCESSES=2 in the image, whose supervisor is the container's PID 1: ready, right, its /metrics the sum of
    both workers, and a stop that drains both and exits 0."""
    name = "capsnet-test-processes"
    with container(engine, cpu_image, name, {"CAPSNET_PROVIDERS": "cpu", "CAPSNET_PROCESSES": "2"}) as url:
        assert wait_ready(url)["status"] == "ready"
        for _ in range(6):
            assert predict(url, mnist_seven_png())["prediction"] == 7
        with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
            metrics = r.read().decode()
        assert 'capsnet_requests_total{endpoint="/predict",method="POST",status="200"} 6.0' in metrics
        engine("stop", "-t", "30", name)
        state = engine.inspect(name)["State"]
        assert state["ExitCode"] == 0, engine.logs(name)[-2000:]
        log = engine.logs(name)
        assert log.count("Finished server process") == 2 and "capsnet.processes: stopped" in log
