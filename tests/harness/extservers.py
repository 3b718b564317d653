"""Real source servers on loopback: PostgreSQL, MariaDB, an S3 server, a Kafka broker, HDFS.

In the style of tests/harness/servers.py: each server gets its own directory (config,
data, logs, socket) in a temp dir, free ports on 127.0.0.1 only, a user with a
password, waits until it answers, and is stopped on `stop()` / `remove()`.

What they run is installed by scripts/install-source-servers:
- PostgreSQL and MariaDB: Debian's packages (their service is not used);
- S3: versitygw (an S3 server over a plain directory), built with `go install`;
- Kafka: the Apache Kafka broker in KRaft mode (no ZooKeeper), jars from Maven;
- HDFS: Apache Hadoop's NameNode and DataNode (one of each), jars from Maven.
Each class has `available()` and `missing()` (what to install, or None).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import glob
import hashlib
import hmac
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest

from .servers import free_port

REPO = Path(__file__).resolve().parents[2]
# Keep in step with scripts/install-source-servers.
CACHE = Path(os.environ.get("CHUTE_SOURCE_SERVERS") or REPO / ".cache" / "source-servers")
VERSITYGW_VERSION = "v1.8.0"
KAFKA_VERSION = "4.1.1"
HADOOP_VERSION = "3.4.1"

TEST_USER = "chute_test"
TEST_PASSWORD = "s3cr3t-Pa55word"
TEST_DATABASE = "chute_test"


def _install_hint(name: str) -> str:
    return f"run scripts/install-source-servers {name}"


@dataclass
class _Server:
    """A server process in its own session (so a stop reaches its children)."""

    root: Path
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    name: ClassVar[str] = "server"

    @staticmethod
    def missing() -> str | None:
        """Why this server cannot run here (what to install), or None."""
        return None

    @classmethod
    def available(cls) -> bool:
        return cls.missing() is None

    def _spawn(self, args: Sequence[str], env: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        (self.root / "log").mkdir(parents=True, exist_ok=True)
        with open(self.root / "log" / "stdout.log", "ab") as log:
            self.process = subprocess.Popen(
                list(args),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,
                env={**os.environ, **(env or {})},
                start_new_session=True,
                **kwargs,
            )

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited during start; see {self.root}/log")
            if self.ready():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} did not get ready in {timeout:.0f} s; see {self.root}/log")

    def ready(self) -> bool:
        raise NotImplementedError

    def _setup(self, args: Sequence[str], made_root: bool, **kwargs: Any) -> None:
        """Run a one-off setup command (initdb and the like) in root; on failure drop a root we made."""
        try:
            _run(args, cwd=self.root, **kwargs)
        except Exception:
            if made_root:
                shutil.rmtree(self.root, ignore_errors=True)
            raise

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout: float = 20.0) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def remove(self) -> None:
        """Kill the server (its directory goes: a clean shutdown keeps nothing) and delete it.
        A SIGTERM'd 18.16 server took up to 20 s (then the kill) at the end of a test process."""
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _run(args: Sequence[str], env: Mapping[str, str] | None = None, input: bytes | None = None, **kwargs: Any) -> str:
    """Run a client command; raise with its output on failure."""
    proc = subprocess.run(
        list(args),
        input=input,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
        **kwargs,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} failed ({proc.returncode}): {proc.stderr.decode(errors='replace').strip()}")
    return str(proc.stdout.decode())


# --- PostgreSQL ---------------------------------------------------------------------------------


def _postgres_bin() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin with a server in it."""
    found = glob.glob("/usr/lib/postgresql/*/bin/postgres")
    if not found:
        return None
    return Path(max(found, key=lambda p: int(Path(p).parent.parent.name))).parent


@dataclass
class PostgresServer(_Server):
    """PostgreSQL from Debian's package; `dsn` is a libpq URL for the test user and database.

    initdb and postgres refuse to run as root: as root, the server runs as `nobody`
    and its directory (a fresh one under /tmp unless given) is chowned to it, so a
    given root must sit where `nobody` can reach it (not under pytest's 0700 tmp_path).
    """

    port: int = 0
    name: ClassVar[str] = "postgres"

    @staticmethod
    def missing() -> str | None:
        return None if _postgres_bin() else _install_hint("postgres")

    @property
    def bin(self) -> Path:
        path = _postgres_bin()
        if path is None:
            raise RuntimeError(_install_hint("postgres"))
        return path

    @property
    def dsn(self) -> str:
        return f"postgresql://{TEST_USER}:{TEST_PASSWORD}@127.0.0.1:{self.port}/{TEST_DATABASE}"

    @property
    def address(self) -> str:
        """host:port, as ClickHouse's postgresql() table function takes it."""
        return f"127.0.0.1:{self.port}"

    def _as_owner(self) -> dict[str, Any]:
        if os.geteuid() != 0:
            return {}
        return {"user": "nobody", "group": "nogroup", "extra_groups": []}

    @classmethod
    def create(cls, root: Path | None = None) -> PostgresServer:
        made_root = root is None
        root = Path(root or tempfile.mkdtemp(prefix="chute-pg-"))
        root.mkdir(parents=True, exist_ok=True)
        server = cls(root, free_port())
        (root / "log").mkdir(exist_ok=True)
        pwfile = root / "pwfile"
        pwfile.write_text(TEST_PASSWORD + "\n")
        if os.geteuid() == 0:
            for path in (root, root / "log", pwfile):
                shutil.chown(path, "nobody", "nogroup")
        server._setup(
            [
                str(server.bin / "initdb"),
                "-D",
                str(root / "data"),
                "-U",
                TEST_USER,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ],
            made_root,
            **server._as_owner(),
        )
        pwfile.unlink()
        return server

    def start(self, timeout: float = 30.0) -> PostgresServer:
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.root),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "50",
        }
        args = [str(self.bin / "postgres"), "-D", str(self.root / "data")]
        for key, value in settings.items():
            args += ["-c", f"{key}={value}"]
        self._spawn(args, **self._as_owner())
        self._wait_ready(timeout)
        if TEST_DATABASE not in self.sql("SELECT datname FROM pg_database", database="postgres").split():
            self.sql(f"CREATE DATABASE {TEST_DATABASE}", database="postgres")
        return self

    def ready(self) -> bool:
        proc = subprocess.run(
            [str(self.bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port), "-d", "postgres"],
            check=False,
        )
        return proc.returncode == 0

    def sql(self, statements: str, database: str = TEST_DATABASE) -> str:
        """Run statements with psql as the test user; tab-separated rows, no header."""
        return _run(
            [
                str(self.bin / "psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-F",
                "\t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                TEST_USER,
                "-d",
                database,
            ],
            env={"PGPASSWORD": TEST_PASSWORD, "PGCONNECT_TIMEOUT": "10"},
            input=statements.encode(),
        )


# --- MariaDB ------------------------------------------------------------------------------------

MARIADBD = "/usr/sbin/mariadbd"
MARIADB_INSTALL_DB = "/usr/bin/mariadb-install-db"
MARIADB_CLIENT = "/usr/bin/mariadb"

# Run by mariadbd at each start (--init-file), before it takes connections:
# bootstrap (mariadb-install-db --extra-file) skips the grant tables, so no CREATE USER there.
MARIADB_INIT = f"""
CREATE USER IF NOT EXISTS '{TEST_USER}'@'127.0.0.1' IDENTIFIED BY '{TEST_PASSWORD}';
CREATE USER IF NOT EXISTS '{TEST_USER}'@'localhost' IDENTIFIED BY '{TEST_PASSWORD}';
GRANT ALL PRIVILEGES ON *.* TO '{TEST_USER}'@'127.0.0.1';
GRANT ALL PRIVILEGES ON *.* TO '{TEST_USER}'@'localhost';
CREATE DATABASE IF NOT EXISTS {TEST_DATABASE};
"""


@dataclass
class MariaDBServer(_Server):
    """MariaDB (the MySQL protocol) from Debian's package, with its own datadir and socket."""

    port: int = 0
    name: ClassVar[str] = "mariadb"

    @staticmethod
    def missing() -> str | None:
        ok = all(os.path.exists(p) for p in (MARIADBD, MARIADB_INSTALL_DB, MARIADB_CLIENT))
        return None if ok else _install_hint("mariadb")

    @property
    def address(self) -> str:
        """host:port, as ClickHouse's mysql() table function takes it."""
        return f"127.0.0.1:{self.port}"

    @property
    def dsn(self) -> str:
        return f"mysql://{TEST_USER}:{TEST_PASSWORD}@127.0.0.1:{self.port}/{TEST_DATABASE}"

    @property
    def socket_path(self) -> Path:
        return self.root / "mysqld.sock"

    def _user_args(self) -> list[str]:
        return ["--user=root"] if os.geteuid() == 0 else []

    @classmethod
    def create(cls, root: Path | None = None) -> MariaDBServer:
        made_root = root is None
        root = Path(root or tempfile.mkdtemp(prefix="chute-mariadb-"))
        for sub in ("log", "tmp"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        server = cls(root, free_port())
        (root / "init.sql").write_text(MARIADB_INIT)
        server._setup(
            [
                MARIADB_INSTALL_DB,
                "--no-defaults",
                *server._user_args(),
                f"--datadir={root / 'data'}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ],
            made_root,
        )
        return server

    def start(self, timeout: float = 30.0) -> MariaDBServer:
        self._spawn(
            [
                MARIADBD,
                "--no-defaults",
                *self._user_args(),
                f"--datadir={self.root / 'data'}",
                "--bind-address=127.0.0.1",
                f"--port={self.port}",
                f"--socket={self.socket_path}",
                f"--pid-file={self.root / 'mysqld.pid'}",
                f"--tmpdir={self.root / 'tmp'}",
                f"--log-error={self.root / 'log' / 'error.log'}",
                "--skip-name-resolve",
                f"--init-file={self.root / 'init.sql'}",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_general_ci",
                "--innodb-buffer-pool-size=64M",
                "--innodb-flush-log-at-trx-commit=0",
                "--max-connections=100",
            ]
        )
        self._wait_ready(timeout)
        return self

    def ready(self) -> bool:
        """The server's handshake packet (protocol 10) on the TCP port."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                head = conn.recv(5)
        except OSError:
            return False
        return len(head) == 5 and head[4] == 10

    def sql(self, statements: str, database: str = TEST_DATABASE) -> str:
        """Run statements with the mariadb client as the test user; tab-separated rows, no header."""
        return _run(
            [
                MARIADB_CLIENT,
                "--no-defaults",
                "--protocol=TCP",
                "-h",
                "127.0.0.1",
                "-P",
                str(self.port),
                "-u",
                TEST_USER,
                "--batch",
                "--skip-column-names",
                database,
            ],
            env={"MYSQL_PWD": TEST_PASSWORD},
            input=statements.encode(),
        )


# --- S3 (versitygw) -----------------------------------------------------------------------------

S3_ACCESS_KEY = "chute-test-key"
S3_SECRET_KEY = "chute-test-Secret-0123456789"
S3_REGION = "us-east-1"
S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def versitygw_binary() -> Path:
    return CACHE / f"versitygw-{VERSITYGW_VERSION}" / "versitygw"


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def _quote(text: str, safe: str = "-_.~") -> str:
    return urllib.parse.quote(text, safe=safe)


@dataclass
class S3Server(_Server):
    """versitygw's posix backend on loopback: buckets are directories of `root/data`.

    Path-style URLs: `f"{endpoint}/{bucket}/{key}"`; the access key and secret are
    `access_key` and `secret_key`. A few signed (SigV4) requests are built in, so the
    tests need no S3 client library.
    """

    port: int = 0
    bucket: str = "chute-test"
    access_key: str = S3_ACCESS_KEY
    secret_key: str = S3_SECRET_KEY
    name: ClassVar[str] = "versitygw"

    def credentials_in(self, monkeypatch: Any) -> None:
        """This server's keys as the AWS environment (`monkeypatch`: pytest's), with no session
        token or endpoint of the machine's own left to override them."""
        for name in ("AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", self.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", self.secret_key)

    @staticmethod
    def missing() -> str | None:
        return None if os.access(versitygw_binary(), os.X_OK) else _install_hint("s3")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, key: str = "", bucket: str | None = None) -> str:
        return f"{self.endpoint}/{bucket or self.bucket}/{_quote(key, safe='/-_.~*?{},')}"

    @classmethod
    def create(cls, root: Path | None = None) -> S3Server:
        root = Path(root or tempfile.mkdtemp(prefix="chute-s3-"))
        for sub in ("log", "data"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        return cls(root, free_port())

    def start(self, timeout: float = 30.0) -> S3Server:
        self._spawn(
            [
                str(versitygw_binary()),
                "--port",
                f"127.0.0.1:{self.port}",
                "--region",
                S3_REGION,
                "--quiet",
                "posix",
                str(self.root / "data"),
            ],
            # In the environment, not on the command line that `ps` shows.
            env={"ROOT_ACCESS_KEY": self.access_key, "ROOT_SECRET_KEY": self.secret_key},
        )
        self._wait_ready(timeout)
        if not (self.root / "data" / self.bucket).exists():
            self.create_bucket(self.bucket)
        return self

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.endpoint + "/", timeout=1):
                return True
        except urllib.error.HTTPError:
            return True  # any S3 answer (403 for an unsigned request) means it is up
        except OSError:
            return False

    def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None = None,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One SigV4-signed request; `path` is '/bucket/key' (unquoted). Returns status, headers, body."""
        query = dict(query or {})
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        day = amz_date[:8]
        payload_hash = hashlib.sha256(body).hexdigest()
        canonical_uri = _quote(path, safe="/-_.~")
        canonical_query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items()))
        signed = {"host": f"127.0.0.1:{self.port}", "x-amz-content-sha256": payload_hash, "x-amz-date": amz_date}
        signed_names = ";".join(sorted(signed))
        canonical_request = "\n".join(
            [
                method,
                canonical_uri,
                canonical_query,
                "".join(f"{k}:{signed[k]}\n" for k in sorted(signed)),
                signed_names,
                payload_hash,
            ]
        )
        scope = f"{day}/{S3_REGION}/s3/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
        )
        key = _hmac(("AWS4" + self.secret_key).encode(), day)
        for part in (S3_REGION, "s3", "aws4_request"):
            key = _hmac(key, part)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        all_headers = {
            **signed,
            **(headers or {}),
            "Authorization": (
                f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
                f"SignedHeaders={signed_names}, Signature={signature}"
            ),
        }
        url = self.endpoint + canonical_uri + (f"?{canonical_query}" if canonical_query else "")
        req = urllib.request.Request(url, data=body if method in ("PUT", "POST") else None, method=method)
        for name, value in all_headers.items():
            if name != "host":
                req.add_header(name, value)
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, dict(resp.headers.items()), resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers.items()), exc.read()

    def _checked(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, str], bytes]:
        status, headers, body = self.request(*args, **kwargs)
        if status >= 300:
            raise RuntimeError(f"S3 {args[0]} {args[1]} -> {status}: {body.decode(errors='replace')}")
        return status, headers, body

    def create_bucket(self, bucket: str) -> None:
        self._checked("PUT", f"/{bucket}")

    def put_object(self, key: str, data: bytes, bucket: str | None = None) -> str:
        """Upload one object; returns its ETag (quoted, as S3 sends it)."""
        _, headers, _ = self._checked("PUT", f"/{bucket or self.bucket}/{key}", body=data)
        return headers.get("ETag", "")

    def get_object(self, key: str, bucket: str | None = None, byte_range: str | None = None) -> bytes:
        """Download an object, or part of it with byte_range such as 'bytes=0-99'."""
        headers = {"Range": byte_range} if byte_range else None
        return self._checked("GET", f"/{bucket or self.bucket}/{key}", headers=headers)[2]

    def list_keys(self, prefix: str = "", bucket: str | None = None, page_size: int = 1000) -> list[str]:
        """All keys under prefix, by ListObjectsV2 pages."""
        keys: list[str] = []
        token = ""
        while True:
            query = {"list-type": "2", "prefix": prefix, "max-keys": str(page_size)}
            if token:
                query["continuation-token"] = token
            body = self._checked("GET", f"/{bucket or self.bucket}", query=query)[2]
            doc = ET.fromstring(body)
            keys += [el.text or "" for el in doc.iter(f"{S3_NS}Key")]
            token = doc.findtext(f"{S3_NS}NextContinuationToken") or ""
            if doc.findtext(f"{S3_NS}IsTruncated") != "true" or not token:
                return keys


# --- Kafka --------------------------------------------------------------------------------------

KAFKA_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \
  required user_{sasl_user}="{sasl_password}";
log.dirs={root}/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
"""

KAFKA_LOG4J = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {root}/log/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""

KAFKA_TOOLS_LOG4J = """\
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""

KAFKA_STARTED = "Kafka Server started"


def kafka_jars() -> Path:
    return CACHE / f"kafka-{KAFKA_VERSION}" / "jars"


S = TypeVar("S", bound="_Server")


@contextlib.contextmanager
def running(kind: type[S]) -> Iterator[S]:
    """A started server of `kind` on loopback, removed afterwards; the test is skipped
    (saying what to install) where the server is not installed."""
    if not kind.available():
        pytest.skip(f"no {kind.name} server: {kind.missing()}")
    server = kind.create()  # type: ignore[attr-defined]
    try:
        server.start()
        yield server
    finally:
        server.remove()


def _java_missing(jars: Path, server: str) -> str | None:
    """What a server run from Maven jars lacks: Java, or its installed jars."""
    if not shutil.which("java"):
        return "java (17 or newer) is not on PATH"
    if not (jars.parent / "complete").exists():
        return _install_hint(server)
    return None


@dataclass
class KafkaBroker(_Server):
    """One Kafka broker in KRaft mode (broker and controller in one JVM); `bootstrap` is host:port.

    Topics, producing and consuming go through Kafka's own command-line tools
    (a JVM start each, about a second), so the tests need no Kafka client library.
    """

    port: int = 0
    controller_port: int = 0
    sasl_port: int = 0
    """A second listener that takes SASL PLAIN logins of `SASL_USER`."""
    heap: str = "512m"
    name: ClassVar[str] = "kafka"
    SASL_USER: ClassVar[str] = "chute"
    SASL_PASSWORD: ClassVar[str] = "kafka-secret-5731"

    @staticmethod
    def missing() -> str | None:
        return _java_missing(kafka_jars(), "kafka")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def _java(self, main: str, *args: str, server: bool = False) -> list[str]:
        """A command line for one of Kafka's main classes: the broker, or a short-lived tool."""
        if server:
            opts = [f"-Xmx{self.heap}", "-XX:+UseG1GC", f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}"]
        else:  # a tool: small heap, quick start, warnings to stderr
            opts = ["-Xmx256m", "-XX:TieredStopAtLevel=1"]
            opts.append(f"-Dlog4j2.configurationFile={self.root / 'tools-log4j2.properties'}")
        java = shutil.which("java") or "java"
        return [java, *opts, "-XX:-UsePerfData", "-Djava.awt.headless=true", "-cp", f"{kafka_jars()}/*", main, *args]

    @classmethod
    def create(cls, root: Path | None = None) -> KafkaBroker:
        made_root = root is None
        root = Path(root or tempfile.mkdtemp(prefix="chute-kafka-"))
        for sub in ("log", "data"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        broker = cls(root, free_port(), free_port(), free_port())
        (root / "server.properties").write_text(
            KAFKA_PROPERTIES.format(
                root=root,
                port=broker.port,
                controller_port=broker.controller_port,
                sasl_port=broker.sasl_port,
                sasl_user=cls.SASL_USER,
                sasl_password=cls.SASL_PASSWORD,
            )
        )
        (root / "log4j2.properties").write_text(KAFKA_LOG4J.format(root=root))
        (root / "tools-log4j2.properties").write_text(KAFKA_TOOLS_LOG4J)
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        broker._setup(
            broker._java(
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={cluster_id}",  # one glued argument: an id may start with "-"
                "--config",
                str(root / "server.properties"),
            ),
            made_root,
        )
        return broker

    def start(self, timeout: float = 60.0) -> KafkaBroker:
        self._spawn(self._java("kafka.Kafka", str(self.root / "server.properties"), server=True))
        self._wait_ready(timeout)
        return self

    def ready(self) -> bool:
        log = self.root / "log" / "server.log"
        return log.exists() and KAFKA_STARTED in log.read_text(errors="replace") and _port_open(self.port)

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        _run(
            self._java(
                "org.apache.kafka.tools.TopicCommand",
                "--bootstrap-server",
                self.bootstrap,
                "--create",
                "--if-not-exists",
                "--topic",
                topic,
                "--partitions",
                str(partitions),
                "--replication-factor",
                "1",
            )
        )

    def produce(self, topic: str, messages: Sequence[str], key_separator: str | None = None) -> None:
        """One message per item (no newlines inside); with key_separator, 'key<sep>value'."""
        args = ["--bootstrap-server", self.bootstrap, "--topic", topic, "--producer-property", "acks=all"]
        if key_separator is not None:
            args += ["--property", "parse.key=true", "--property", f"key.separator={key_separator}"]
        data = "".join(m + "\n" for m in messages).encode()
        _run(self._java("org.apache.kafka.tools.ConsoleProducer", *args), input=data)

    def consume(self, topic: str, max_messages: int, timeout_ms: int = 20000, group: str | None = None) -> list[str]:
        """Up to max_messages values from the beginning of the topic."""
        args = [
            "--bootstrap-server",
            self.bootstrap,
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            str(max_messages),
            "--timeout-ms",
            str(timeout_ms),
        ]
        if group:
            args += ["--group", group]
        proc = subprocess.run(
            self._java("org.apache.kafka.tools.consumer.ConsoleConsumer", *args),
            capture_output=True,
            timeout=timeout_ms / 1000 + 60,
            check=False,
        )
        # The tool exits non-zero on its timeout: what it printed until then is the answer.
        return proc.stdout.decode().splitlines()


# --- HDFS ---------------------------------------------------------------------------------------

HDFS_SITE = """<?xml version="1.0"?>
<configuration>
{properties}
</configuration>
"""

HDFS_LOG4J = """\
log4j.rootLogger=INFO,console
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.err
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
"""


def hadoop_jars() -> Path:
    return CACHE / f"hadoop-{HADOOP_VERSION}" / "jars"


def _site(properties: Mapping[str, str]) -> str:
    lines = (f"  <property><name>{k}</name><value>{v}</value></property>" for k, v in properties.items())
    return HDFS_SITE.format(properties="\n".join(lines))


@dataclass
class HdfsServer(_Server):
    """A single-node HDFS: a NameNode and a DataNode (two JVMs) on 127.0.0.1.

    `url(path)` is the hdfs://127.0.0.1:port/path the engine reads; files are
    written and listed over WebHDFS (HTTP) on the NameNode's HTTP port, so the
    tests need no HDFS client library. The Maven jars carry no web-app
    resources, so empty `webapps/hdfs` and `webapps/datanode` directories are put
    on the class path: WebHDFS is a servlet of its own and needs none of them.
    """

    port: int = 0
    http_port: int = 0
    heap: str = "256m"
    datanode: subprocess.Popen[bytes] | None = field(default=None, init=False)
    name: ClassVar[str] = "hdfs"

    @staticmethod
    def missing() -> str | None:
        return _java_missing(hadoop_jars(), "hdfs")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, path: str = "/") -> str:
        return f"hdfs://{self.address}/{path.lstrip('/')}"

    def _java(self, main: str, *args: str) -> list[str]:
        java = shutil.which("java") or "java"
        opts = [
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:-UsePerfData",
            "-Djava.awt.headless=true",
            # WebHDFS's JAXB (through Jersey 1) reflects into java.lang on Java 17.
            "--add-opens",
            "java.base/java.lang=ALL-UNNAMED",
            f"-Dhadoop.log.dir={self.root / 'log'}",
        ]
        classpath = f"{self.root / 'conf'}:{self.root / 'www'}:{hadoop_jars()}/*"
        return [java, *opts, "-cp", classpath, main, *args]

    @classmethod
    def create(cls, root: Path | None = None) -> HdfsServer:
        made_root = root is None
        root = Path(root or tempfile.mkdtemp(prefix="chute-hdfs-"))
        for sub in ("log", "conf", "name", "data", "www/webapps/hdfs", "www/webapps/datanode", "www/webapps/static"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        server = cls(root, free_port(), free_port())
        loopback = "127.0.0.1"
        core = {"fs.defaultFS": f"hdfs://{loopback}:{server.port}", "hadoop.tmp.dir": str(root / "tmp")}
        hdfs = {
            "dfs.replication": "1",
            "dfs.namenode.name.dir": str(root / "name"),
            "dfs.datanode.data.dir": str(root / "data"),
            "dfs.permissions.enabled": "false",
            "dfs.namenode.rpc-address": f"{loopback}:{server.port}",
            "dfs.namenode.http-address": f"{loopback}:{server.http_port}",
            "dfs.namenode.secondary.http-address": f"{loopback}:{free_port()}",
            "dfs.datanode.address": f"{loopback}:{free_port()}",
            "dfs.datanode.http.address": f"{loopback}:{free_port()}",
            "dfs.datanode.ipc.address": f"{loopback}:{free_port()}",
            # The DataNode registers as 127.0.0.1, and clients reach it by that name.
            "dfs.datanode.hostname": loopback,
            "dfs.client.use.datanode.hostname": "true",
            "dfs.datanode.use.datanode.hostname": "true",
            "dfs.namenode.datanode.registration.ip-hostname-check": "false",
            # Out of safe mode as soon as it starts (there are no blocks to wait for).
            "dfs.namenode.safemode.extension": "0",
            "dfs.namenode.safemode.min.datanodes": "0",
            "dfs.heartbeat.interval": "1",
            # A file closes without waiting for the DataNode's report of its last block
            # (which costs a poll of 400 ms and up per file written).
            "dfs.namenode.file.close.num-committed-allowed": "1",
            "dfs.client.block.write.locateFollowingBlock.initial.delay.ms": "20",
            # No fsync of the NameNode's edit log per operation: a test server, thrown away.
            "dfs.namenode.edits.noeditlogchannelflush": "true",
        }
        (root / "conf" / "core-site.xml").write_text(_site(core))
        (root / "conf" / "hdfs-site.xml").write_text(_site(hdfs))
        (root / "conf" / "log4j.properties").write_text(HDFS_LOG4J)
        server._setup(
            server._java("org.apache.hadoop.hdfs.server.namenode.NameNode", "-format", "-nonInteractive", "-force"),
            made_root,
        )
        return server

    def start(self, timeout: float = 60.0) -> HdfsServer:
        self._spawn(self._java("org.apache.hadoop.hdfs.server.namenode.NameNode"))
        with open(self.root / "log" / "datanode.log", "ab") as log:
            self.datanode = subprocess.Popen(
                self._java("org.apache.hadoop.hdfs.server.datanode.DataNode"),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,
                start_new_session=True,
            )
        try:
            self._wait_ready(timeout)
        except Exception:
            self.stop()
            raise
        return self

    def _jmx(self, bean: str) -> dict[str, Any]:
        import httpx

        response = httpx.get(f"http://127.0.0.1:{self.http_port}/jmx", params={"qry": bean}, timeout=2)
        beans = response.json().get("beans", [])
        return dict(beans[0]) if beans else {}

    def ready(self) -> bool:
        """The DataNode is registered with room to write, and the NameNode is out of safe mode."""
        if self.datanode is None or self.datanode.poll() is not None:
            raise RuntimeError(f"the hdfs datanode exited during start; see {self.root}/log")
        if not _port_open(self.http_port):
            return False
        try:
            state = self._jmx("Hadoop:service=NameNode,name=FSNamesystemState")
            info = self._jmx("Hadoop:service=NameNode,name=NameNodeInfo")
        except Exception:
            return False
        return (
            state.get("NumLiveDataNodes") == 1
            and int(state.get("CapacityRemaining") or 0) > 0
            and info.get("Safemode", "x") == ""
        )

    def _stop_process(self, process: subprocess.Popen[bytes] | None, sig: int, timeout: float) -> None:
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def kill(self) -> None:
        self._stop_process(self.datanode, signal.SIGKILL, 10)
        self._stop_process(self.process, signal.SIGKILL, 10)

    def stop(self, timeout: float = 20.0) -> None:
        self._stop_process(self.datanode, signal.SIGTERM, timeout)
        self._stop_process(self.process, signal.SIGTERM, timeout)

    # -- WebHDFS ------------------------------------------------------------------------------

    def _webhdfs(self, method: str, path: str, op: str, **params: str) -> Any:
        import httpx

        url = f"http://127.0.0.1:{self.http_port}/webhdfs/v1/{path.lstrip('/')}"
        response = httpx.request(
            method, url, params={"op": op, "user.name": "chute", **params}, timeout=30, follow_redirects=False
        )
        return response

    def put(self, path: str, data: bytes) -> None:
        """Write (or overwrite) a file: the NameNode redirects the CREATE to the DataNode."""
        import httpx

        for attempt in range(5):
            first = self._webhdfs("PUT", path, "CREATE", overwrite="true")
            if first.status_code == 307:
                second = httpx.put(first.headers["location"], content=data, timeout=60)
                if second.status_code == 201:
                    return
                first = second
            if attempt == 4:
                raise RuntimeError(f"WebHDFS CREATE {path}: HTTP {first.status_code} {first.text[:300]}")
            time.sleep(0.5)

    def mkdir(self, path: str) -> None:
        response = self._webhdfs("PUT", path, "MKDIRS")
        if response.status_code != 200:
            raise RuntimeError(f"WebHDFS MKDIRS {path}: HTTP {response.status_code} {response.text[:300]}")

    def delete(self, path: str) -> None:
        self._webhdfs("DELETE", path, "DELETE", recursive="true")

    def status(self, path: str) -> dict[str, Any]:
        """WebHDFS FileStatus: length, modificationTime (ms), type."""
        response = self._webhdfs("GET", path, "GETFILESTATUS")
        if response.status_code != 200:
            raise RuntimeError(f"WebHDFS GETFILESTATUS {path}: HTTP {response.status_code} {response.text[:300]}")
        return dict(response.json()["FileStatus"])

    def set_mtime(self, path: str, mtime_ms: int) -> None:
        response = self._webhdfs("PUT", path, "SETTIMES", modificationtime=str(mtime_ms))
        if response.status_code != 200:
            raise RuntimeError(f"WebHDFS SETTIMES {path}: HTTP {response.status_code} {response.text[:300]}")
