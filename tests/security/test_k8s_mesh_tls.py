"""The production overlay runs the mesh on mutual TLS; cert-manager can issue its Secret."""

from __future__ import annotations

import os
from pathlib import Path

from tests.unit.test_k8s import Doc, render

ROOT = Path(__file__).resolve().parents[2]
INTERNAL = {"agentmesh-router", "agentmesh-tools", "agentmesh-inference"}


def _deployments(docs: list[Doc]) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}


def test_production_mounts_the_mesh_secret_and_probes_the_plaintext_health_port() -> None:
    docs = render(ROOT / "k8s" / "overlays" / "production")
    env = {d["metadata"]["name"]: d["data"] for d in docs if d["kind"] == "ConfigMap"}
    for name, deployment in _deployments(docs).items():
        if name not in INTERNAL | {"agentmesh-gateway"}:
            continue
        spec = deployment["spec"]["template"]["spec"]
        assert {"name": "mesh-tls", "secret": {"secretName": "agentmesh-mesh-tls", "defaultMode": 0o440}} in spec[
            "volumes"
        ], name
        assert env[name]["AGENTMESH_TLS_CA"] == "/etc/agentmesh/tls/ca.crt", name
        container = spec["containers"][0]
        if name in INTERNAL:
            assert env[name]["AGENTMESH_HEALTH_PORT"] == "9250"
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                assert container[probe]["grpc"]["port"] == 9250, (name, probe)
        else:  # the public port stays plaintext behind Envoy; its probes are unchanged
            assert container["readinessProbe"]["grpc"]["port"] == 50051


def test_the_cert_manager_component_issues_the_mesh_secret(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {os.path.relpath(ROOT / 'k8s' / 'overlays' / 'production', overlay)}\n"
        f"components:\n  - {os.path.relpath(ROOT / 'k8s' / 'components' / 'cert-manager', overlay)}\n"
    )
    docs = render(overlay)
    certificates = {d["spec"]["secretName"] for d in docs if d["kind"] == "Certificate"}
    assert "agentmesh-mesh-tls" in certificates
    leaf = next(d for d in docs if d["kind"] == "Certificate" and d["spec"]["secretName"] == "agentmesh-mesh-tls")
    assert {"server auth", "client auth"} <= set(leaf["spec"]["usages"])
    assert "mesh.agentmesh.internal" in leaf["spec"]["dnsNames"]
