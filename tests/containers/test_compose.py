"""docker-compose.yml's CPU profile brought up as the README says (`docker compose --profile cpu up --build edge-cpu`;
podman-compose where podman is the engine): through its edge it answers ready and right, the service is healthy by
its own check and not root, it received the settings the compose file and the shell gave it, and a stop answers the
request in flight and exits 0."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.server import free_port
from tests.containers.engine import Engine, in_flight_at_stop, mnist_seven_png, predict, wait_ready

PROJECT = "capsnet-test-compose"
# set in the shell, as a user would: the compose file must pass it through; CORS is left unset on purpose
SHELL = {"CAPSNET_MAX_BATCH": "16", "CAPSNET_LOG_LEVEL": "debug"}


def container_of(engine: Engine, service: str) -> str:
    names = engine(
        "ps", "-a", "--filter", f"label=com.docker.compose.project={PROJECT}", "--filter", f"label=com.docker.compose.service={service}",
        "--format", "{{.Names}}",
    ).stdout.split()  # fmt: skip
    assert len(names) == 1, f"{service}: containers {names}"
    return names[0]


@pytest.fixture(scope="module")
def stack(engine: Engine, cpu_image: str) -> Iterator[tuple[int, dict[str, str]]]:
    port = free_port()
    # gRPC is published beside the edge: on loopback here too, on a port of its own
    env = {**SHELL, "EDGE_PUBLISH": f"127.0.0.1:{port}", "GRPC_PUBLISH": f"127.0.0.1:{free_port()}"}
    env_unset = {k: v for k, v in engine.env.items() if not k.startswith(("CAPSNET_", "EDGE_"))}
    run = Engine(engine.cli, env_unset)
    run.compose("--profile", "cpu", "down", project=PROJECT, env=env)
    try:
        run.compose("--profile", "cpu", "up", "-d", "--build", "edge-cpu", project=PROJECT, env=env)
        yield port, env
    finally:
        run.compose("--profile", "cpu", "down", "-t", "5", project=PROJECT, env=env)


def test_edge_answers_ready_and_right(stack: tuple[int, dict[str, str]]) -> None:
    url = f"http://127.0.0.1:{stack[0]}"
    assert wait_ready(url)["provider"] == "CPUExecutionProvider"
    answer = predict(url, mnist_seven_png())
    assert answer["prediction"] == 7 and answer["is_digit"] is True


def test_grpc_answers_through_the_edge(stack: tuple[int, dict[str, str]]) -> None:
    """The Open Inference Protocol over gRPC on the port the edge publishes for it (HTTP/2 to CAPSNET_GRPC_PORT)."""
    import tritonclient.grpc as grpcclient

    wait_ready(f"http://127.0.0.1:{stack[0]}")
    with grpcclient.InferenceServerClient(stack[1]["GRPC_PUBLISH"]) as client:
        assert client.is_server_ready() and client.is_model_ready("capsnet")


def test_service_is_healthy_and_unprivileged(engine: Engine, stack: tuple[int, dict[str, str]]) -> None:
    wait_ready(f"http://127.0.0.1:{stack[0]}")
    service = container_of(engine, "capsnet-cpu")
    assert engine.healthy(service)
    assert engine.process_uid(service) == 10001


def test_service_received_the_settings(engine: Engine, stack: tuple[int, dict[str, str]]) -> None:
    """What the service parsed, read inside its container: the shell's values, the file's defaults, an unset CORS list
    empty (podman-compose 1.0.3 passed `${CAPSNET_CORS_ORIGINS:-}` through literally)."""
    wait_ready(f"http://127.0.0.1:{stack[0]}")
    got = engine.settings(container_of(engine, "capsnet-cpu"))
    assert got["max_batch"] == 16 and got["log_level"] == "debug"
    assert got["cors_origins"] == []
    assert got["providers"] == "cpu"
    assert (got["host"], got["port"], got["weights_dir"]) == ("0.0.0.0", 8000, "/app/weights")
    assert got["body_timeout_s"] == 10 and got["keepalive_timeout_s"] == 5


def test_stop_answers_the_request_in_flight_and_exits_0(engine: Engine, stack: tuple[int, dict[str, str]]) -> None:
    port, env = stack
    wait_ready(f"http://127.0.0.1:{port}")
    service = container_of(engine, "capsnet-cpu")
    stop = lambda: engine.compose("--profile", "cpu", "stop", "-t", "30", "capsnet-cpu", project=PROJECT, env=env)  # noqa: E731
    status, answer = in_flight_at_stop(port, stop)
    assert status == 200, answer
    assert answer["prediction"] == 7
    state = engine.inspect(service)["State"]
    killed = "137: killed at the end of the grace period"
    assert state["ExitCode"] == 0, f"exit {state['ExitCode']} ({killed}); its log ends:\n{engine.logs(service)[-3000:]}"
