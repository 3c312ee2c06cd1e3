"""The KServe manifests: the InferenceService against the KServe CRD's own schema with unknown fields forbidden, the
front's Deployment, Service, HorizontalPodAutoscaler, PodDisruptionBudget and ConfigMap against Kubernetes' schemas
(kubernetes-validate, strict)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from service.settings import Settings
from tests.conftest import REPO
from tests.needs import need_schema

KSERVE = REPO / "deploy" / "kserve"
ISVC_SCHEMA = REPO.parent / "shared" / "schemas" / "kserve-inferenceservice-v1beta1.json"
# the oldest Kubernetes these manifests are meant for, and the newest schemas kubernetes-validate ships
K8S_VERSIONS = ["1.30", kubernetes_validate.latest_version()]


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((KSERVE / name).read_text()) if d]


def strict(schema: Any) -> Any:
    """The schema with `additionalProperties: false` wherever it lists `properties`, except where Kubernetes keeps
    unknown fields (x-kubernetes-preserve-unknown-fields): a CRD schema allows any extra key, so a misspelt one
    (storageURI) would pass and be dropped silently by the API server."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if "properties" in out:
        out["properties"] = {k: strict(v) for k, v in out["properties"].items()}  # keys are field names, not keywords
        if not out.get("x-kubernetes-preserve-unknown-fields"):
            out.setdefault("additionalProperties", False)
    for key in ("items", "additionalProperties", "not"):
        if isinstance(out.get(key), dict):
            out[key] = strict(out[key])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in out:
            out[key] = strict(out[key])
    return out


@pytest.fixture(scope="module")
def isvc_validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(strict(json.loads(need_schema(ISVC_SCHEMA.name).read_text())))


def _errors(validator: jsonschema.Draft7Validator, doc: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(doc)]


def _front() -> dict[str, dict[str, Any]]:
    """front.yaml's objects by kind."""
    return {d["kind"]: d for d in _docs("front.yaml")}


def _isvc() -> dict[str, Any]:
    (doc,) = _docs("inferenceservice.yaml")
    return doc


def test_inference_service_matches_the_kserve_schema_with_no_unknown_fields(isvc_validator):
    doc = _isvc()
    assert (doc["apiVersion"], doc["kind"]) == ("serving.kserve.io/v1beta1", "InferenceService")
    assert not _errors(isvc_validator, doc), "\n".join(_errors(isvc_validator, doc))


def test_a_misspelt_key_is_caught(isvc_validator):
    doc = copy.deepcopy(_isvc())
    model = doc["spec"]["predictor"]["model"]
    model["storageURI"] = model.pop("storageUri")
    assert any("storageURI" in e for e in _errors(isvc_validator, doc))
    # ...which the schema as published lets through
    assert not list(jsonschema.Draft7Validator(json.loads(ISVC_SCHEMA.read_text())).iter_errors(doc))


def test_the_status_stays_open(isvc_validator):
    """status is x-kubernetes-preserve-unknown-fields: the strict schema must not close it."""
    doc = copy.deepcopy(_isvc()) | {"status": {"anything": {"the": "controller writes"}}}
    assert not _errors(isvc_validator, doc)


def test_the_predictor_is_triton_on_one_gpu_serving_onnx():
    predictor = _isvc()["spec"]["predictor"]
    model = predictor["model"]
    assert model["modelFormat"]["name"] == "onnx" and model["runtime"] == "kserve-tritonserver"
    assert model["storageUri"].startswith(("s3://", "gs://", "pvc://", "https://"))
    for part in ("requests", "limits"):
        assert model["resources"][part]["nvidia.com/gpu"] == "1"
    assert 1 <= predictor["minReplicas"] <= predictor["maxReplicas"]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_the_front_objects_are_valid_kubernetes(version):
    docs = _docs("front.yaml")
    assert [d["kind"] for d in docs] == ["Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "ConfigMap"]
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_strict_kubernetes_validation_catches_a_misspelt_key():
    deployment = copy.deepcopy(_docs("front.yaml")[0])
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullpolicy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[-1], strict=True)


def test_the_front_points_at_the_predictor_and_scales_on_cpu():
    front = _front()
    deployment, service, hpa = front["Deployment"], front["Service"], front["HorizontalPodAutoscaler"]
    isvc = _isvc()
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    container = containers["front"]
    env = {e["name"]: e["value"] for e in container["env"]}
    host = f"{isvc['metadata']['name']}-predictor.{isvc['metadata']['namespace']}.svc.cluster.local"
    assert env["CAPSNET_ENGINE_URL"] == f"http://{host}"
    settings = Settings.model_fields
    assert {k.removeprefix("CAPSNET_").lower() for k in env} <= set(settings), "every variable is a setting of the service"
    # Kubernetes' own gRPC probe on grpc.health.v1 for readiness; liveness and start-up on the front's own /healthz
    assert container["readinessProbe"]["grpc"]["service"] == "inference.GRPCInferenceService"
    own = ["python", "-m", "service.healthcheck", "--url", f"http://127.0.0.1:{env['CAPSNET_PORT']}/healthz"]
    assert container["livenessProbe"]["exec"]["command"] == container["startupProbe"]["exec"]["command"] == own
    assert container["resources"]["requests"]["cpu"], "CPU utilisation is measured against the request"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment["metadata"]["name"]}
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    assert {d["metadata"]["namespace"] for d in (deployment, service, hpa, isvc)} == {"capsnet"}


def test_clients_and_probes_reach_the_front_through_the_edge_with_its_configuration():
    """The pod's edge (deploy/edge/haproxy.cfg, as a ConfigMap identical to the files) is the only port: the Service
    and the probes go through it; the service listens on the pod's loopback, where the edge sends requests."""
    front_objects = _front()
    deployment, service, config_map = front_objects["Deployment"], front_objects["Service"], front_objects["ConfigMap"]
    pod = deployment["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    edge, front = containers["edge"], containers["front"]
    front_env = {e["name"]: e["value"] for e in front["env"]}
    edge_env = {e["name"]: e["value"] for e in edge["env"]}
    assert front_env["CAPSNET_HOST"] == "127.0.0.1" and "ports" not in front
    assert edge_env["EDGE_UPSTREAM"] == f"127.0.0.1:{front_env['CAPSNET_PORT']}"
    port, grpc, _ = edge["ports"]  # and the metrics port: test_prometheus_scrapes_the_edges_metrics_port
    assert port["name"] == "http" and edge_env["EDGE_BIND"] == f":{port['containerPort']}"
    assert grpc["name"] == "grpc" and edge_env["EDGE_GRPC_BIND"] == f":{grpc['containerPort']}"
    assert edge_env["EDGE_GRPC_UPSTREAM"] == f"127.0.0.1:{front_env['CAPSNET_GRPC_PORT']}"
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http", "grpc"]
    assert front["readinessProbe"]["grpc"]["port"] == grpc["containerPort"]  # readiness as clients are answered
    assert edge["livenessProbe"]["tcpSocket"]["port"] == port["containerPort"]  # the edge's own
    edge_dir = REPO / "deploy" / "edge"
    files = {"haproxy.cfg": edge_dir / "haproxy.cfg", **{p.name: p for p in (edge_dir / "errors").iterdir()}}
    assert config_map["data"] == {k: p.read_text() for k, p in files.items()}, "regenerate the ConfigMap (front.yaml's header)"
    (volume,) = [v for v in pod["volumes"] if "configMap" in v]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert {i["key"]: i["path"] for i in volume["configMap"]["items"]} == {k: str(p.relative_to(edge_dir)) for k, p in files.items()}
    assert edge["volumeMounts"] == [{"name": volume["name"], "mountPath": "/usr/local/etc/haproxy", "readOnly": True}]


def test_prometheus_scrapes_the_edges_metrics_port():
    """The main port keeps /metrics to EDGE_ADMIN_FROM (loopback); a scraper in another pod reaches the edge's metrics
    port, which serves GET /metrics alone (tests/edge/test_refusals.py), named by the pod's annotations."""
    deployment = _front()["Deployment"]
    template = deployment["spec"]["template"]
    edge = {c["name"]: c for c in template["spec"]["containers"]}["edge"]
    metrics = {p["name"]: p["containerPort"] for p in edge["ports"]}["metrics"]
    assert {e["name"]: e["value"] for e in edge["env"]}["EDGE_METRICS_BIND"] == f":{metrics}"
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == str(metrics)
    assert annotations["prometheus.io/path"] == "/metrics"


def test_the_front_starts_drains_and_writes_where_the_pod_lets_it():
    """What a real cluster does to the front: its root filesystem read-only (the worker processes' group and metrics
    files need a writable /tmp), a start-up that waits for the predictor (the probe outlasts that wait), and a stop that
    waits out the preStop, then the drain and the supervisor's last 10 s before SIGKILL (the pod's grace outlasts it)."""
    pod = _front()["Deployment"]["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    front = containers["front"]
    env = {e["name"]: e["value"] for e in front["env"]}
    assert front["securityContext"]["readOnlyRootFilesystem"] and int(env["CAPSNET_PROCESSES"]) > 1
    volumes = {v["name"]: v for v in pod["volumes"]}
    (tmp,) = [m for m in front["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert "emptyDir" in volumes[tmp["name"]] and not tmp.get("readOnly")
    settings = Settings.model_fields
    engine_wait = float(env.get("CAPSNET_ENGINE_START_TIMEOUT_S", settings["engine_start_timeout_s"].default))
    startup = front["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] > engine_wait
    drain = float(env.get("CAPSNET_GRACEFUL_TIMEOUT_S", settings["graceful_timeout_s"].default))
    for name, container in containers.items():
        pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
        assert pre_stop[0] == "sleep", name
        assert pod["terminationGracePeriodSeconds"] > int(pre_stop[1]) + drain + 10, name


def test_a_node_drain_leaves_the_front_serving():
    """Voluntary evictions (a drain, an upgrade) take one pod at a time and never the last one the autoscaler keeps, and
    the replicas are spread over nodes, so one node lost is not every replica lost."""
    front = _front()
    deployment, hpa, budget = front["Deployment"], front["HorizontalPodAutoscaler"], front["PodDisruptionBudget"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert budget["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert budget["spec"]["maxUnavailable"] < min(hpa["spec"]["minReplicas"], deployment["spec"]["replicas"])
    (spread,) = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["maxSkew"] == 1
    assert spread["labelSelector"]["matchLabels"].items() <= labels.items()
    # a single-node cluster still schedules every replica: the spread is a preference, not a condition
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway"


def test_every_manifest_is_tested():
    assert sorted(p.name for p in KSERVE.iterdir()) == ["front.yaml", "inferenceservice.yaml"]
