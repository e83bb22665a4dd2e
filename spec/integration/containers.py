"""Debian's podman for the image's test, as this machine runs it: the runc runtime
(crun fails on its cgroup layout), ulimits no higher than the host's hard ones, and no
bridge network (netavark needs netfilter, which this kernel lacks): the services share
one pod whose network is slirp4netns, with `redis` named in its hosts file, as compose
names its services. No image registry is reachable, so the base image is Debian
bookworm made by debootstrap from the machine's own apt mirror, and busbar's wheels are
put in the build context (the Containerfile's PIP_OPTIONS), built by the host's pip."""

from __future__ import annotations

import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BASE = "localhost/busbar-test-base:bookworm"  # kept between runs: debootstrap takes a minute
INSTALL = (
    "install Debian's podman, runc, catatonit, slirp4netns and debootstrap "
    "(apt-get install podman runc catatonit slirp4netns debootstrap; `make test` does it as root)"
)
# Debian bookworm's python3 is 3.11.2: redis-py wants async-timeout below 3.11.3, which
# the host's newer Python does not, so its pip leaves it out unless asked
FOR_THE_BASE = ["setuptools>=68", "wheel", "async-timeout>=4.0.3"]


SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # runc and debootstrap live in sbin


def tools() -> None:
    for name in ("podman", "runc", "catatonit", "slirp4netns", "debootstrap"):
        if shutil.which(name, path=SYSTEM_PATH) is None:
            pytest.fail(f"{name} is not installed: {INSTALL}", pytrace=False)


def config(directory: Path) -> dict[str, str]:
    """The environment podman runs with here: CONTAINERS_CONF names a file of ours, so the
    machine's own configuration is left as it is."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    conf = directory / "containers.conf"
    conf.write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={hard}:{hard}", "nproc=4096:4096"]\n'
        '[engine]\nruntime = "runc"\n'
    )
    return {"CONTAINERS_CONF": str(conf), "PATH": SYSTEM_PATH}


def podman(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        ["podman", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"podman {' '.join(args[:3])}: {done.stderr[-3000:]}"
    return done.stdout.strip()


def mirror() -> str:
    """The Debian mirror apt uses here (deb822 or one-line sources)."""
    for source in [
        *Path("/etc/apt/sources.list.d").glob("*.sources"),
        Path("/etc/apt/sources.list"),
    ]:
        if source.exists():
            found = re.search(r"^(?:URIs:\s*|deb\s+)(\S+/debian)\s*$", source.read_text(), re.M)
            if found:
                return found.group(1)
    pytest.fail("no Debian mirror in /etc/apt: the base image is made with debootstrap")


def base_image(env: dict[str, str], work: Path) -> str:
    """A Debian bookworm with python3 and its venv module, as an official Python image
    has them: made once and kept in podman's store."""
    if subprocess.run(["podman", "image", "exists", BASE], env=env).returncode == 0:
        return BASE
    root = work / "rootfs"
    done = subprocess.run(
        ["debootstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates",
         "bookworm", str(root), mirror()],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, f"debootstrap: {(done.stdout + done.stderr)[-3000:]}"
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE, env=env)
    subprocess.run(["podman", "import", "-", BASE], env=env, stdin=tar.stdout, check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    tar.wait()
    shutil.rmtree(root, ignore_errors=True)
    return BASE


def context(root: Path, work: Path) -> Path:
    """The build context: this tree as the .containerignore leaves it, and a wheelhouse
    of busbar's dependencies (and the build's own) made by the host's pip."""
    ignored = [
        line.strip().removeprefix("**/")
        for line in (root / ".containerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    tree = work / "context"
    shutil.copytree(root, tree, ignore=shutil.ignore_patterns(*ignored))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "wheel", "-q"]
    subprocess.run(
        [*pip, "--wheel-dir", str(tree / "wheelhouse"), str(tree), *FOR_THE_BASE],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    return tree
