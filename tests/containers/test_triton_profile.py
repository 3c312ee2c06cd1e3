"""The Triton profile as far as this machine allows: nvcr.io's tritonserver cannot be pulled and needs a GPU, so the
front (the CPU image, with the environment docker-compose.yml gives `capsnet-front`) is pointed at an Open Inference
Protocol engine reachable as `triton:8000` on a container network, as compose would wire it. The engine here is this
project's own CPU image, which serves the protocol. The front must report that engine ready and answer through it.

Untested here: Triton itself in a container (tests/triton runs a real tritonserver outside one), and a GPU."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest
import yaml

from tests.conftest import REPO
from tests.containers.engine import CPU_IMAGE, Engine, container, mnist_seven_png, predict, wait_ready

NETWORK = "capsnet-test-oip"


def compose_service(name: str) -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"][name]


@pytest.fixture(scope="module")
def network(engine: Engine) -> Iterator[str]:
    engine("network", "rm", "-f", NETWORK, check=False)
    engine("network", "create", NETWORK)
    try:
        yield NETWORK
    finally:
        engine("network", "rm", "-f", NETWORK, check=False)


def test_front_answers_through_the_engine(engine: Engine, cpu_image: str, network: str) -> None:
    front = compose_service("capsnet-front")
    assert front["image"] == CPU_IMAGE, "the front runs the CPU image the tests built"
    url_in_compose = front["environment"]["CAPSNET_ENGINE_URL"]
    host, port = url_in_compose.removeprefix("http://").split(":")
    assert host == "triton" and "triton" in compose_service("triton")["profiles"]
    env = {k: front["environment"][k] for k in ("CAPSNET_ENGINE_URL", "CAPSNET_PROVIDERS")}
    with (
        container(engine, cpu_image, "capsnet-test-oip-engine", {"CAPSNET_PROVIDERS": "cpu", "CAPSNET_PORT": port}, network, host,
                  publish=False),
        container(engine, cpu_image, "capsnet-test-front", env, network) as url,
    ):  # fmt: skip
        ready = wait_ready(url)
        assert ready["status"] == "ready" and ready["engine"] == url_in_compose
        with urllib.request.urlopen(url + "/model", timeout=10) as r:
            assert json.loads(r.read())["engine"]["url"] == url_in_compose
        before = inferences(engine, port)
        assert predict(url, mnist_seven_png())["prediction"] == 7
        assert inferences(engine, port) == before + 1, "the front answered without asking the engine"


def inferences(engine: Engine, port: str) -> int:
    """The engine's own Open Inference Protocol statistics, asked inside its container (it publishes no port)."""
    ask = f"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/v2/models/capsnet/stats').read().decode())"
    return json.loads(engine("exec", "capsnet-test-oip-engine", "python", "-c", ask).stdout)["model_stats"][0]["inference_count"]
