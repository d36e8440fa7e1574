"""moto's answers to EC2's catalog calls, computed once per test run instead of once per call.

DescribeInstanceTypes, DescribeInstanceTypeOfferings and DescribeSpotPriceHistory answer
from tables moto never changes, but moto serializes ~1,400 instance types afresh for every
call: about 3 CPU-seconds each time a controller or a provider loads its catalog, more than
half of what the end-to-end suites spend in moto. The first answer to each distinct request
is kept (in memory, and in TENON_MOTO_CACHE when set, so the other moto servers of the same
test run reuse it) and served again with a fresh request id. Every other call goes to moto.
"""

import hashlib
import io
import json
import os
import re
import tempfile
import threading
import urllib.parse
import uuid

import moto

# Read-only calls whose answer depends on the request alone, never on the account's state.
CATALOG_ACTIONS = frozenset({"DescribeInstanceTypes", "DescribeInstanceTypeOfferings", "DescribeSpotPriceHistory"})
# Parameters moto answers without reading (a spot price history's window: it has one price).
IGNORED = frozenset({"StartTime", "EndTime"})
REQUEST_ID = re.compile(rb"<requestId>[^<]*</requestId>")
REGION = re.compile(r"Credential=[^/]*/[^/]*/([^/]*)/")


class CatalogCache:
    """WSGI middleware in front of moto's application.

    `flavour` names what the server changed in moto's answers (its own source's digest), so
    servers patched differently never share an entry.
    """

    def __init__(self, app, flavour: str, directory: str | None = None) -> None:  # type: ignore[no-untyped-def]
        self.app = app
        self.flavour = flavour
        self.directory = directory
        self.memory: dict[str, tuple[str, list[tuple[str, str]], bytes]] = {}
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):  # type: ignore[no-untyped-def]
        if environ.get("REQUEST_METHOD") != "POST":
            return self.app(environ, start_response)
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(body)
        # Only Describe calls can be catalog calls: the others skip the parse.
        if b"Action=Describe" not in body:
            return self.app(environ, start_response)
        params = urllib.parse.parse_qsl(body.decode("latin-1"), keep_blank_values=True)
        if dict(params).get("Action") not in CATALOG_ACTIONS:
            return self.app(environ, start_response)
        region = REGION.search(environ.get("HTTP_AUTHORIZATION", ""))
        request = sorted((k, v) for k, v in params if k not in IGNORED)
        key = hashlib.sha256(
            json.dumps([moto.__version__, self.flavour, region.group(1) if region else "", request]).encode()
        ).hexdigest()
        answer = self.lookup(key)
        if answer is None:
            answer = self.ask(environ)
            if answer[0].startswith("200"):
                self.keep(key, answer)
        status, headers, payload = answer
        request_id = str(uuid.uuid4()).encode()
        payload = REQUEST_ID.sub(b"<requestId>" + request_id + b"</requestId>", payload, count=1)
        headers = [(k, v) for k, v in headers if k.lower() not in ("content-length", "x-amzn-requestid")]
        headers += [("Content-Length", str(len(payload))), ("x-amzn-RequestId", request_id.decode())]
        start_response(status, headers)
        return [payload]

    def ask(self, environ) -> tuple[str, list[tuple[str, str]], bytes]:  # type: ignore[no-untyped-def]
        started: dict[str, object] = {}

        def start_response(status, headers, exc_info=None):  # type: ignore[no-untyped-def]
            started["status"], started["headers"] = status, list(headers)
            return lambda _: None

        chunks = self.app(environ, start_response)
        try:
            payload = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close:
                close()
        return started["status"], started["headers"], payload  # type: ignore[return-value]

    def lookup(self, key: str) -> tuple[str, list[tuple[str, str]], bytes] | None:
        with self.lock:
            hit = self.memory.get(key)
        if hit is not None or not self.directory:
            return hit
        try:
            with open(os.path.join(self.directory, key), "rb") as f:
                head, payload = f.read().split(b"\n", 1)
            status, headers = json.loads(head)
        except (OSError, ValueError):
            return None
        hit = (status, [(k, v) for k, v in headers], payload)
        with self.lock:
            self.memory[key] = hit
        return hit

    def keep(self, key: str, answer: tuple[str, list[tuple[str, str]], bytes]) -> None:
        with self.lock:
            self.memory[key] = answer
        if not self.directory:
            return
        status, headers, payload = answer
        try:
            os.makedirs(self.directory, exist_ok=True)
            # Written whole, then renamed: another server never reads half an answer.
            fd, tmp = tempfile.mkstemp(dir=self.directory)
            with os.fdopen(fd, "wb") as f:
                f.write(json.dumps([status, headers]).encode() + b"\n" + payload)
            os.replace(tmp, os.path.join(self.directory, key))
        except OSError:
            pass


def serve(port: int, flavour_file: str) -> int:
    """Serves moto on 127.0.0.1:`port` (0: a free one) behind the catalog cache, on a
    background thread; returns the port."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    with open(flavour_file, "rb") as f:
        flavour = hashlib.sha256(f.read()).hexdigest()
    app = CatalogCache(
        DomainDispatcherApplication(create_backend_app), flavour, os.environ.get("TENON_MOTO_CACHE") or None
    )
    server = make_server("127.0.0.1", port, app, True, request_handler=MotoRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_port
