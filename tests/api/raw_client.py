"""Raw HTTP/1.1 requests to a lote server, signed with botocore's SigV4 signer
(so tests can send bodies and headers no SDK would), and a parser for the
answers that checks the AWS shape every response must have."""
import datetime
import email.utils
import http.client
import json
import socket

import botocore.auth
import botocore.awsrequest
import botocore.credentials


class Answer:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = {k.lower(): v for k, v in headers}
        self.body = body

    def header(self, name):
        return self.headers.get(name.lower(), "")

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def shape_problems(self):
        """What is wrong with this answer's AWS shape ([] if nothing)."""
        problems = []
        if not self.header("date"):
            problems.append("no Date header")
        else:
            try:
                email.utils.parsedate_to_datetime(self.header("date"))
            except (TypeError, ValueError):
                problems.append("Date %r is not an HTTP date" % self.header("date"))
        if not self.header("x-amzn-requestid"):
            problems.append("no x-amzn-RequestId header")
        try:
            body = self.json()
        except ValueError:
            problems.append("body is not JSON: %r" % self.body[:200])
            return problems
        if self.status != 200:
            if not isinstance(body, dict) or not body.get("__type"):
                problems.append("error body has no __type: %r" % self.body[:200])
            elif self.header("x-amzn-errortype") != body["__type"]:
                problems.append("x-amzn-ErrorType %r != __type %r" %
                                (self.header("x-amzn-errortype"), body["__type"]))
            if not isinstance(body, dict) or not isinstance(body.get("message"), str):
                problems.append("error body has no message")
        return problems

    def code(self):
        try:
            return self.json().get("__type", "")
        except ValueError:
            return ""

    def __repr__(self):
        return "HTTP %d %s" % (self.status, self.body[:300])


class RawClient:
    """One keep-alive connection; reconnects after the server closes it."""

    def __init__(self, endpoint, key, secret, region="us-east-1", timeout=60):
        host_port = endpoint.split("//", 1)[1].rstrip("/")
        self.host, port = host_port.rsplit(":", 1)
        self.port = int(port)
        self.host_header = host_port
        self.creds = botocore.credentials.Credentials(key, secret)
        self.region = region
        self.timeout = timeout
        self.conn = None

    def sign(self, method, path, body, headers, service, skew_seconds=0):
        """Headers (a list of pairs) with SigV4 added, as botocore signs."""
        req = botocore.awsrequest.AWSRequest(method=method, url="http://%s%s" % (self.host_header, path),
                                             data=body, headers=dict(headers))
        signer = botocore.auth.SigV4Auth(self.creds, service, self.region)
        if skew_seconds:
            when = datetime.datetime.utcnow() + datetime.timedelta(seconds=skew_seconds)
            req.context["timestamp"] = when.strftime("%Y%m%dT%H%M%SZ")
            signer._modify_request_before_signing(req)
            canonical = signer.canonical_request(req)
            string_to_sign = signer.string_to_sign(req, canonical)
            signature = signer.signature(string_to_sign, req)
            signer._inject_signature_to_request(req, signature)
        else:
            signer.add_auth(req)
        return list(req.headers.items())

    def send(self, method, path, body=b"", headers=(), service="batch", sign=True, skew_seconds=0):
        if isinstance(body, str):
            body = body.encode("utf-8")
        headers = list(headers)
        if sign:
            headers = self.sign(method, path, body, headers, service, skew_seconds)
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
                self.conn.putheader("Host", self.host_header)
                for k, v in headers:
                    if k.lower() != "host":
                        self.conn.putheader(k, v)
                if body or method in ("POST", "PUT"):
                    self.conn.putheader("Content-Length", str(len(body)))
                self.conn.endheaders(body)
                resp = self.conn.getresponse()
                data = resp.read()
                answer = Answer(resp.status, resp.getheaders(), data)
                if resp.will_close:
                    self.close()
                return answer
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A keep-alive connection the server closed while idle: retry once.
                self.close()
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def batch(self, operation_path, body, method="POST", **kw):
        return self.send(method, operation_path, json.dumps(body) if not isinstance(body, (bytes, str)) else body,
                         [("Content-Type", "application/json")], "batch", **kw)

    def logs(self, operation, body, **kw):
        data = json.dumps(body) if not isinstance(body, (bytes, str)) else body
        return self.send("POST", "/", data, [("Content-Type", "application/x-amz-json-1.1"),
                                              ("X-Amz-Target", "Logs_20140328." + operation)], "logs", **kw)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def raw_exchange(host, port, data, timeout=30):
    """Sends bytes on a fresh connection, returns everything read until close."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(data)
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        s.close()


def parse_raw(data):
    """The first response in raw bytes as an Answer."""
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = []
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers.append((k.strip(), v.strip()))
    length = int(dict((k.lower(), v) for k, v in headers).get("content-length", "0"))
    return Answer(status, headers, rest[:length])
