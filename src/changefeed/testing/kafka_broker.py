"""A real Apache Kafka broker (KRaft, one node, no ZooKeeper) for tests and benchmarks.

The jars are Apache Kafka's own from Maven Central (``tools/kafka-broker/pom.xml``), copied by
``make setup`` into ``build/kafka/libs``; nothing is fetched here. :class:`KafkaBroker` formats a
single-node KRaft log directory (``kafka.tools.StorageTool format --standalone``, with SCRAM
users added at format time as Kafka's ``--add-scram`` does), starts ``kafka.Kafka`` on free
loopback ports with four listeners, and stops, kills or restarts it on the same ports and data:

* ``PLAINTEXT`` — anonymous clients (``User:ANONYMOUS``, a super user);
* ``SASL_PLAINTEXT`` — SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN against the configured users;
* ``SSL`` — TLS with the given server certificate (no client certificates: anonymous);
* ``SASL_SSL`` — both.

Authorization is Kafka's ``StandardAuthorizer``: ``User:ANONYMOUS`` and ``User:admin`` are super
users, every other SASL user needs ACLs (so a user without them gets the broker's real
``TOPIC_AUTHORIZATION_FAILED``). The Java command-line tools of ``kafka-tools`` run with
:meth:`KafkaBroker.tool` (``java -cp build/kafka/libs/* org.apache.kafka.tools.X``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "KafkaBroker",
    "KafkaBrokerError",
    "TlsFiles",
    "free_port",
    "java_classpath",
    "kafka_libs",
    "run_java",
]

#: The pinned Apache Kafka version of ``tools/kafka-broker/pom.xml``.
KAFKA_VERSION = "4.4.0"
#: Where ``make setup`` puts the jars, relative to the repository root.
LIBS_RELATIVE = Path("build") / "kafka" / "libs"
#: Overrides the jar folder (another checkout's build/, a CI cache).
LIBS_ENV = "CHANGEFEED_KAFKA_LIBS"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
SUPER_USERS = ("ANONYMOUS", "admin")

_LOG4J2 = """\
status = error
name = changefeed-kafka-broker
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka_request.name = kafka.request.logger
logger.kafka_request.level = WARN
logger.state_change.name = state.change.logger
logger.state_change.level = WARN
"""

_TOOL_LOG4J2 = """\
status = error
name = changefeed-kafka-tool
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""


class KafkaBrokerError(RuntimeError):
    """The broker could not be set up or started (missing jars, Java, a start-up failure)."""


@dataclass(frozen=True)
class TlsFiles:
    """PEM material for the TLS listeners: the server's certificate chain and PKCS#8 key, and
    the CA that signed it (what clients trust)."""

    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes = b""


def free_port() -> int:
    """A loopback port free at the time of the call (never a conventional one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kafka_libs() -> Path:
    """The folder of Kafka's jars; :class:`KafkaBrokerError` (loud) when ``make setup`` has not
    fetched them."""
    env = os.environ.get(LIBS_ENV)
    path = Path(env) if env else Path(__file__).resolve().parents[3] / LIBS_RELATIVE
    if not (path / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file():
        raise KafkaBrokerError(
            f"Apache Kafka {KAFKA_VERSION} jars not found in {path}: run `make setup` "
            f"(it fetches them with Maven from tools/kafka-broker/pom.xml), or set {LIBS_ENV}"
        )
    return path


def java_classpath(libs: Path | None = None) -> str:
    return str((libs or kafka_libs()) / "*")


def java_bin() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    return "java"


def _tool_log_config(libs: Path) -> Path:
    path = libs.parent / "tool-log4j2.properties"
    if not path.is_file() or path.read_text() != _TOOL_LOG4J2:
        path.write_text(_TOOL_LOG4J2)
    return path


def run_java(
    main_class: str,
    args: Sequence[str],
    *,
    timeout: float = 120.0,
    jvm_args: Sequence[str] = ("-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"),
    input_text: str | None = None,
    check: bool = True,
    libs: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's Java command-line classes to completion; its output as text."""
    libs = libs or kafka_libs()
    cmd = [
        java_bin(),
        *jvm_args,
        f"-Dlog4j2.configurationFile={_tool_log_config(libs)}",
        "-cp",
        java_classpath(libs),
        main_class,
        *args,
    ]
    res = subprocess.run(cmd, input=input_text, capture_output=True, text=True, timeout=timeout, check=False)
    if check and res.returncode != 0:
        raise KafkaBrokerError(
            f"{main_class} {' '.join(args)} exited {res.returncode}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        )
    return res


@dataclass
class KafkaBroker:
    """One KRaft node (broker and controller) in ``workdir``; see the module docstring."""

    workdir: Path
    users: Mapping[str, str] = field(default_factory=lambda: {"admin": "admin-secret"})
    tls: TlsFiles | None = None
    partitions: int = 1
    auto_create_topics: bool = True
    authorizer: bool = True
    extra: Mapping[str, str] = field(default_factory=dict)
    heap: str = "768m"
    libs: Path = field(default_factory=kafka_libs)
    plaintext_port: int = field(default_factory=free_port)
    sasl_port: int = field(default_factory=free_port)
    ssl_port: int = field(default_factory=free_port)
    sasl_ssl_port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    # ------------------------------------------------------------------ addresses
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.plaintext_port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def log_file(self) -> Path:
        return self.workdir / "server.log"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    # ------------------------------------------------------------------ configuration
    def properties(self) -> dict[str, str]:
        names = ["PLAINTEXT", "SASL_PLAINTEXT"]
        ports = [self.plaintext_port, self.sasl_port]
        if self.tls is not None:
            names += ["SSL", "SASL_SSL"]
            ports += [self.ssl_port, self.sasl_ssl_port]
        listeners = [f"{n}://127.0.0.1:{p}" for n, p in zip(names, ports, strict=True)]
        plain_users = " ".join(f'user_{u}="{pw}"' for u, pw in self.users.items())
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": ",".join([*listeners, f"CONTROLLER://127.0.0.1:{self.controller_port}"]),
            "advertised.listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(
                ["CONTROLLER:PLAINTEXT", *(f"{n}:{n}" for n in names)]
            ),
            "log.dirs": str(self.data_dir),
            "num.partitions": str(self.partitions),
            "auto.create.topics.enable": "true" if self.auto_create_topics else "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.cleaner.threads": "1",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        }
        for lname in ("sasl_plaintext", "sasl_ssl"):
            props[f"listener.name.{lname}.scram-sha-256.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
            props[f"listener.name.{lname}.scram-sha-512.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
            props[f"listener.name.{lname}.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
            )
        if self.authorizer:
            props["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            props["super.users"] = ";".join(f"User:{u}" for u in SUPER_USERS)
        if self.tls is not None:
            props["ssl.keystore.type"] = "PEM"
            props["ssl.keystore.location"] = str(self.workdir / "server-keystore.pem")
            props["ssl.client.auth"] = "none"
        props.update(self.extra)
        return props

    def _write_config(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.tls is not None:
            (self.workdir / "server-keystore.pem").write_bytes(self.tls.key_pem + b"\n" + self.tls.cert_pem)
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.workdir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_file))
        return path

    def format(self) -> None:
        """Format the KRaft log directory (a new cluster id) with the SCRAM users."""
        config = self._write_config()
        cluster_id = run_java("kafka.tools.StorageTool", ["random-uuid"], libs=self.libs).stdout.strip()
        scram: list[str] = []
        for user, pw in self.users.items():
            for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                scram += ["--add-scram", f"{mech}=[name={user},password={pw}]"]
        run_java(
            "kafka.tools.StorageTool",
            ["format", "-t", cluster_id, "-c", str(config), "--standalone", "--ignore-formatted", *scram],
            libs=self.libs,
        )

    # ------------------------------------------------------------------ life cycle
    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        if not (self.data_dir / "meta.properties").is_file():
            self.format()
        config = self._write_config()
        mark = self.log_file.stat().st_size if self.log_file.exists() else 0
        cmd = [
            java_bin(),
            f"-Xmx{self.heap}",
            "-Xms256m",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            "-cp",
            java_classpath(self.libs),
            "kafka.Kafka",
            str(config),
        ]
        out = (self.workdir / "stdout.log").open("ab")
        self.proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        out.close()
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise KafkaBrokerError(
                    f"the Kafka broker exited with {self.proc.returncode} at start:\n{self._log_tail(mark)}"
                )
            if "Kafka Server started" in self._log_since(mark) and self._accepts(self.plaintext_port):
                return
            time.sleep(0.2)
        self.kill()
        raise KafkaBrokerError(
            f"the Kafka broker did not start within {timeout:.0f} s:\n{self._log_tail(mark)}"
        )

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """A clean shutdown (SIGTERM: Kafka's controlled shutdown); SIGKILL past ``timeout``."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL, as a crash: the log directory recovers at the next start."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        self.proc = None

    def restart(self, *, crash: bool = False, down_s: float = 0.0) -> None:
        self.kill() if crash else self.stop()
        if down_s:
            time.sleep(down_s)
        self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ tools
    def tool(
        self,
        main_class: str,
        *args: str,
        timeout: float = 120.0,
        check: bool = True,
        input_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """One of Kafka's Java tools (``TopicCommand``, ``ConsumerGroupCommand``,
        ``ProducerPerformance``...); ``main_class`` without a package means ``org.apache.kafka.tools``."""
        if "." not in main_class:
            main_class = f"org.apache.kafka.tools.{main_class}"
        return run_java(
            main_class, list(args), timeout=timeout, check=check, input_text=input_text, libs=self.libs
        )

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _accepts(port: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    def _log_since(self, mark: int) -> str:
        try:
            with self.log_file.open("rb") as f:
                f.seek(mark)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def _log_tail(self, mark: int) -> str:
        text = self._log_since(mark)
        stdout = self.workdir / "stdout.log"
        extra = stdout.read_text("utf-8", "replace")[-2000:] if stdout.exists() else ""
        return (text[-4000:] + "\n" + extra).strip()
