"""Render kustomize overlays without the kustomize binary (none installs from this machine's registries).

Supports the subset AgentMesh's manifests use, with kustomize's semantics:
``resources`` (files and directories), ``components``, ``patches`` (strategic
merge by kind and name; lists of named items merged by name), ``configMapGenerator``
(files and literals, ``disableNameSuffixHash`` required), ``namespace`` and
``labels`` (metadata only). Anything else in a kustomization is an error, so
the renderer cannot silently ignore a field it does not understand.

``python -m tests.support.kustomize k8s/overlays/production`` prints the rendered YAML.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import yaml

SUPPORTED = {"apiVersion", "kind", "resources", "components", "patches", "configMapGenerator", "namespace", "labels"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "PriorityClass"}

Doc = dict[str, Any]


class KustomizeError(Exception):
    pass


def _docs(path: Path) -> list[Doc]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def merge(base: Any, patch: Any) -> Any:
    """Strategic merge: dicts recursively, lists of named dicts by name, everything else replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = merge(base[key], value) if key in base else copy.deepcopy(value)
        return out
    if (
        isinstance(base, list)
        and isinstance(patch, list)
        and all(isinstance(x, dict) and "name" in x for x in base + patch)
    ):
        out_list = [copy.deepcopy(x) for x in base]
        for item in patch:
            match = next((i for i, x in enumerate(out_list) if x["name"] == item["name"]), None)
            if match is None:
                out_list.append(copy.deepcopy(item))
            else:
                out_list[match] = merge(out_list[match], item)
        return out_list
    return copy.deepcopy(patch)


def _key(doc: Doc) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


def _generate_configmaps(root: Path, specs: list[Doc]) -> list[Doc]:
    out = []
    for spec in specs:
        if not spec.get("options", {}).get("disableNameSuffixHash"):
            raise KustomizeError(f"{root}: configMapGenerator {spec['name']} needs disableNameSuffixHash")
        data: dict[str, str] = {}
        for f in spec.get("files", []):
            data[Path(f).name] = (root / f).read_text()
        for literal in spec.get("literals", []):
            k, _, v = literal.partition("=")
            data[k] = v
        labels = spec.get("options", {}).get("labels", {})
        meta: Doc = {"name": spec["name"], **({"labels": dict(labels)} if labels else {})}
        out.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})
    return out


def render(directory: Path) -> list[Doc]:
    """Render the kustomization in ``directory`` to a list of resources."""
    k = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(k) - SUPPORTED
    if unknown:
        raise KustomizeError(f"{directory}: unsupported fields {sorted(unknown)}")
    docs: list[Doc] = []
    for entry in k.get("resources", []):
        path = directory / entry
        docs += render(path) if path.is_dir() else _docs(path)
    docs += _generate_configmaps(directory, k.get("configMapGenerator", []))
    for entry in k.get("components", []):
        docs = _apply_component(docs, (directory / entry).resolve())
    _patch(docs, directory, k.get("patches", []))
    seen: set[tuple[str, str]] = set()
    for doc in docs:
        if _key(doc) in seen:
            raise KustomizeError(f"{directory}: duplicate resource {_key(doc)}")
        seen.add(_key(doc))
        meta = doc.setdefault("metadata", {})
        if k.get("namespace") and doc["kind"] not in CLUSTER_SCOPED:
            meta["namespace"] = k["namespace"]
        for group in k.get("labels", []):
            meta.setdefault("labels", {}).update(group.get("pairs", {}))
    return docs


def _apply_component(docs: list[Doc], directory: Path) -> list[Doc]:
    c = yaml.safe_load((directory / "kustomization.yaml").read_text())
    if c.get("kind") != "Component":
        raise KustomizeError(f"{directory} is not a Component")
    unknown = set(c) - SUPPORTED
    if unknown:
        raise KustomizeError(f"{directory}: unsupported fields {sorted(unknown)}")
    out = list(docs)
    for entry in c.get("resources", []):
        out += _docs(directory / entry)
    out += _generate_configmaps(directory, c.get("configMapGenerator", []))
    _patch(out, directory, c.get("patches", []))
    return out


def _patch(docs: list[Doc], directory: Path, patches: list[Doc]) -> None:
    for entry in patches:
        for patch in _docs(directory / entry["path"]):
            index = next((i for i, d in enumerate(docs) if _key(d) == _key(patch)), None)
            if index is None:
                raise KustomizeError(f"{directory / entry['path']}: no resource {_key(patch)} to patch")
            docs[index] = merge(docs[index], patch)


if __name__ == "__main__":
    print(yaml.safe_dump_all(render(Path(sys.argv[1])), sort_keys=False))
