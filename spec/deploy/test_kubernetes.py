"""The Kubernetes manifests in deploy/kubernetes, the base and each overlay as kubectl
renders it (`kubectl kustomize`, no cluster), checked offline: valid against the
Kubernetes API's schemas (kubernetes-validate, strict: no unknown field), clean for
yamllint, and passing checkov's policies but the ones .checkov.yaml leaves out with a
reason; and what an operator would trip over: the kustomization naming every file, the
images at this release's version, settings busbar accepts, a worker never killed
mid-delivery, a drain never stuck on the disruption budget, web's probes on /health.
The tools come from `make kubetools`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.release import version
from config.settings import Settings, variables
from spec.deploy.prometheus import DEPLOY
from workers.process import check_timing

KUBERNETES = DEPLOY / "kubernetes"
BASE = KUBERNETES / "base"
TOOLS = DEPLOY.parent / "var" / "kubetools" / "bin"
VERSION = "1.30.0"  # the Kubernetes release the schemas are of: a common one in service
SECRET_KEYS = {"BUSBAR_ROOT_KEY", "BUSBAR_SECRET_KEY", "VALKEY_PASSWORD"}
REDIS_URL = "redis://:$(VALKEY_PASSWORD)@valkey:6379/0"  # made in each pod from the Secret


def run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = TOOLS / tool
    if not path.exists():
        pytest.fail(f"{tool} is not installed: run `make kubetools`", pytrace=False)
    return subprocess.run(
        [str(path), *args], capture_output=True, text=True, timeout=300, cwd=DEPLOY.parent
    )


KUSTOMIZATIONS = [BASE, *sorted((KUBERNETES / "overlays").iterdir())]


def manifests() -> list[Path]:
    return sorted(p for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml")


def rendered(where: Path, out: Path) -> Path:
    """What `kubectl apply -k <where>` would send, in one file."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl is not on PATH: `make kubetools` says what to install", pytrace=False)
    done = subprocess.run([kubectl, "kustomize", str(where)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    path = out / f"{where.name}.yaml"
    path.write_text(done.stdout)
    return path


def objects(path: Path | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, name) -> the object, across the base's manifests (or one rendered file)."""
    found = {}
    for source in [path] if path else manifests():
        for doc in yaml.safe_load_all(source.read_text()):
            found[(doc["kind"], doc["metadata"]["name"])] = doc
    return found


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return obj["spec"]["template"]["spec"]


@pytest.mark.parametrize("where", KUSTOMIZATIONS, ids=lambda p: p.name)
def test_every_object_is_valid_against_the_kubernetes_schemas(where: Path, tmp_path: Path):
    path = rendered(where, tmp_path)
    done = run("kubernetes-validate", "--strict", "-k", VERSION, str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARN" not in done.stdout and "ERROR" not in done.stdout, done.stdout
    assert done.stdout.count(" passed for resource ") == len(objects(path)) == len(objects())


def test_yamllint_finds_nothing():
    done = run("yamllint", "-s", "-c", str(KUBERNETES / ".yamllint.yaml"), str(KUBERNETES))
    assert (done.returncode, done.stdout) == (0, "")


def test_checkov_passes_every_policy_not_left_out_with_a_reason(tmp_path: Path):
    config = KUBERNETES / ".checkov.yaml"
    skipped = yaml.safe_load(config.read_text())["skip-check"]
    text = config.read_text()
    for check in skipped:  # each with the comment that says why, just above it
        above = text.split(f"  - {check}")[0].rstrip().splitlines()
        assert above[-1].lstrip().startswith(("#", "- CKV")), check
    for where in KUSTOMIZATIONS:
        done = run(
            "checkov", "-f", str(rendered(where, tmp_path)), "--config-file", str(config),
            "--skip-download", "--quiet", "--compact",
        )  # fmt: skip
        assert done.returncode == 0, (where.name, done.stdout[-4000:])
        assert "Failed checks: 0" in done.stdout, (where.name, done.stdout[-4000:])


def test_the_kustomization_names_every_manifest_and_nothing_else():
    listed = yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == [p.name for p in manifests()]


@pytest.mark.parametrize("where", KUSTOMIZATIONS, ids=lambda p: p.name)
def test_the_images_are_this_release_and_every_pod_is_locked_down(where: Path, tmp_path: Path):
    tags = set()
    for obj in objects(rendered(where, tmp_path)).values():
        if obj["kind"] not in ("Deployment", "StatefulSet", "CronJob"):
            continue
        spec = pod_spec(obj)
        assert spec["securityContext"]["runAsNonRoot"] is True, obj["metadata"]["name"]
        assert spec["automountServiceAccountToken"] is False
        for container in spec["containers"]:
            image, tag = container["image"].rsplit(":", 1)
            tags.add((image, tag))
            locked = container["securityContext"]
            assert locked["readOnlyRootFilesystem"] is True
            assert locked["allowPrivilegeEscalation"] is False
            assert locked["capabilities"]["drop"] == ["ALL"]
            assert container["resources"]["requests"]
    busbar_tags = {tag for image, tag in tags if image.endswith(("busbar", "busbar-lake"))}
    assert busbar_tags == {version()}  # make the release bump here too (CHANGELOG.md)


@pytest.mark.parametrize("where", KUSTOMIZATIONS, ids=lambda p: p.name)
def test_the_settings_are_busbars_and_a_worker_is_never_killed_mid_delivery(
    where: Path, tmp_path: Path
):
    found = objects(rendered(where, tmp_path))
    data = found[("ConfigMap", "busbar")]["data"]
    known = {name for name, _, _ in variables()}
    assert set(data) <= known, set(data) - known
    assert not set(data) & (SECRET_KEYS | {"BUSBAR_REDIS_URL"})  # from the Secret only
    secrets = dict.fromkeys(SECRET_KEYS, "5" * 64)
    url = REDIS_URL.replace("$(VALKEY_PASSWORD)", secrets["VALKEY_PASSWORD"])
    settings = Settings.from_env({**data, **secrets, "BUSBAR_REDIS_URL": url})
    check_timing(settings)  # what `busbar worker` checks at start
    worker = pod_spec(found[("Deployment", "busbar-worker")])
    assert worker["terminationGracePeriodSeconds"] >= settings.scrub_after_ms / 1000 + 15
    # a drain goes on (one may go) and, with two or more, leaves one delivering
    replicas = found[("Deployment", "busbar-worker")]["spec"]["replicas"]
    kept = found[("PodDisruptionBudget", "busbar-worker")]["spec"]["minAvailable"]
    assert kept == min(1, replicas - 1), (replicas, kept)
    password = {"name": "VALKEY_PASSWORD", "valueFrom": {"secretKeyRef": {
        "name": "busbar-secrets", "key": "VALKEY_PASSWORD"}}}  # fmt: skip
    for kind, name in (("Deployment", "busbar-web"), ("Deployment", "busbar-worker"),
                       ("CronJob", "busbar-ingest")):  # fmt: skip
        container = pod_spec(found[(kind, name)])["containers"][0]
        assert {"secretRef": {"name": "busbar-secrets"}} in container["envFrom"]
        assert {"configMapRef": {"name": "busbar"}} in container["envFrom"]
        # the password first: Kubernetes expands $(VALKEY_PASSWORD) from what is above
        assert container["env"][:2] == [password, {"name": "BUSBAR_REDIS_URL", "value": REDIS_URL}]
    web = pod_spec(found[("Deployment", "busbar-web")])["containers"][0]
    for probe in ("readinessProbe", "livenessProbe"):
        assert web[probe]["httpGet"]["path"] == "/health"
    valkey = pod_spec(found[("StatefulSet", "valkey")])["containers"][0]
    args = valkey["args"]
    assert args[args.index("--appendonly") + 1] == "yes"  # nothing acknowledged lost
    assert args[args.index("--appendfsync") + 1] == "always"
    assert args[args.index("--requirepass") + 1] == "$(VALKEY_PASSWORD)"  # never open
    assert valkey["env"] == [password]
