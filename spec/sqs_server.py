"""A real SQS API for tests: moto's server (the dev extra's `moto[server]`) on a free
loopback port, enforcing signatures once it is set up. Its first actions, unsigned, make
an IAM user allowed every SQS action and its access key; from then on a request signed
by anyone else is refused as AWS refuses it (InvalidClientTokenId,
SignatureDoesNotMatch). It keeps its queues in memory: a test that needs the API gone
for a while cuts it behind a forwarder (spec/tcp_forwarder.py), not by killing it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3

from dev.redis_server import free_port
from spec.integration.processes import log_says

REGION = "eu-west-1"
SETUP_ACTIONS = 3  # create_user, put_user_policy, create_access_key: unsigned


class SqsServer:
    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.key = ("", "")  # (access key id, secret access key), once started

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Returns once *this* process says it runs on its port (its own log line): a
        connection to the port alone may reach another test process's server that took
        the same free port first; then moto's exits (address in use) and it is started
        again on another port."""
        for _ in range(3):
            if self._launched():
                break
            self.port = free_port()
        else:
            raise RuntimeError(f"moto's server did not start: see {self.log}")
        iam = self.client("iam", ("setup", "setup"))
        iam.create_user(UserName="busbar")
        iam.put_user_policy(UserName="busbar", PolicyName="sqs", PolicyDocument=json.dumps(
            {"Version": "2012-10-17",
             "Statement": [{"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}]}))  # fmt: skip
        made = iam.create_access_key(UserName="busbar")["AccessKey"]
        self.key = (made["AccessKeyId"], made["SecretAccessKey"])

    def _launched(self) -> bool:
        env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_ACTIONS)}
        offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        running = f"Running on http://127.0.0.1:{self.port}"
        if log_says(self.process, self.log, offset, lambda said: running in said, 30):
            return True
        self.process.kill()
        self.process.wait()
        return False

    def client(self, service: str = "sqs", key: tuple[str, str] | None = None) -> Any:
        key = key or self.key
        return boto3.client(service, region_name=REGION, endpoint_url=self.url,
                            aws_access_key_id=key[0], aws_secret_access_key=key[1])  # fmt: skip

    def queue(self, name: str) -> str:
        """A new queue (FIFO when the name ends in .fifo): its URL."""
        attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
        return str(self.client().create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])

    def received(self, queue_url: str) -> list[dict[str, Any]]:
        """Every message the queue holds, in its order, each deleted once read (a FIFO
        queue gives a group's next message only once the one before is deleted)."""
        sqs = self.client()
        found: list[dict[str, Any]] = []
        while True:
            answer = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10,
                                         AttributeNames=["All"], MessageAttributeNames=["All"],
                                         WaitTimeSeconds=0)  # fmt: skip
            messages = answer.get("Messages", [])
            if not messages:
                return found
            found += messages
            handles = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                       for i, m in enumerate(messages)]  # fmt: skip
            sqs.delete_message_batch(QueueUrl=queue_url, Entries=handles)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


@contextmanager
def sqs_server(tmp_path: Path) -> Iterator[SqsServer]:
    server = SqsServer(tmp_path / "moto.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()
