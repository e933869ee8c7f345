#!/usr/bin/env python3
"""An InfraKit instance plugin in Python (standard library only).

drover's tests drive it with drover's plugin client to prove that the
protocol, not drover's own server, is what works; docs/plugins.md walks
through it as the example of a plugin that holds its own state:

- Provision is idempotent on drover's link tag (`drover.link`): a second
  Provision for a link already made returns the same machine, so a
  client's retry after a lost answer never makes two.
- Its state is one JSON file, replaced atomically. A machine is recorded
  *before* anything is made for it, and destroyed through a tombstone:
  the tombstone is written first, the machine torn down, then both
  entries removed; a plugin restarted mid-destroy finishes the tombstones
  it finds (crash-safe), and destroying an unknown machine succeeds.
- drover's boot secrets (`Drover.BootEnv`, only sent because the
  handshake declares `Drover/0.1.0`) reach the boot script's environment
  and nothing else: never the state file, the log or argv.

A "machine" is a directory with the boot script's output; with --dockerd
it also runs a real `dockerd` (its own data-root, exec-root and API socket
in that directory, in a process group of its own), which the boot script
reaches through DOCKER_HOST and Destroy stops.

Usage: plugin.py --socket PATH --state DIR [--api 0.6.1|0.5.0] [--dockerd]
       [--no-drover] [--provision-delay SECONDS] [--fail-describe-file PATH]
"""

import argparse
import http.server
import json
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import threading
import time

LINK = "drover.link"


class NoMethod(Exception):
    """A method this plugin does not serve (gorilla/rpc answers it with a 400)."""


class State:
    """The plugin's machines and tombstones, persisted on every change."""

    def __init__(self, directory):
        self.dir = directory
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self.path = os.path.join(directory, "state.json")
        self.lock = threading.Lock()
        self.data = {"next": 1, "instances": {}, "tombstones": {}}
        if os.path.exists(self.path):
            with open(self.path) as f:
                self.data = json.load(f)
        # Destroys a crash interrupted are finished before anything else.
        for iid in list(self.data["tombstones"]):
            self.teardown(iid)

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def machine_dir(self, iid):
        return os.path.join(self.dir, iid)

    def teardown(self, iid):
        """The external destroy (idempotent), then the records go."""
        rec = self.data["instances"].get(iid) or {}
        if rec.get("pgid"):
            stop_engine(rec["pgid"])
        shutil.rmtree(self.machine_dir(iid), ignore_errors=True)
        self.data["instances"].pop(iid, None)
        self.data["tombstones"].pop(iid, None)
        self.save()


def stop_engine(pgid):
    """SIGTERM to the engine's process group, SIGKILL after 20 s."""
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + wait
        while time.time() < deadline:
            try:
                os.waitpid(pgid, os.WNOHANG)  # reaps it, when ours
            except ChildProcessError:
                pass  # started by an earlier run of the plugin
            try:
                os.kill(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def start_engine(directory, labels, log):
    """A dockerd of its own in `directory`; its endpoint once it answers."""
    sock = os.path.join(directory, "sock")
    args = ["dockerd", "--data-root", os.path.join(directory, "root"),
            "--exec-root", os.path.join(directory, "exec"),
            "--pidfile", os.path.join(directory, "pid"), "-H", "unix://" + sock,
            "--bridge=none", "--iptables=false", "--ip6tables=false",
            "--ip-masq=false", "--storage-driver=vfs"]
    for k, v in sorted(labels.items()):
        args += ["--label", "%s=%s" % (k, v)]
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    return proc, "unix://" + sock


def wait_for_engine(endpoint, within=60.0):
    path = endpoint[len("unix://"):]
    deadline = time.time() + within
    while time.time() < deadline:
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(path)
                s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
                if b"OK" in s.recv(1024):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the engine at %s did not answer within %ds" % (endpoint, within))


class Plugin:
    def __init__(self, args):
        self.args = args
        self.state = State(args.state)
        self.next_address = 10

    # -- handshakes ----------------------------------------------------

    def handshake_hello(self, params):
        if self.args.api != "0.6.1":
            raise NoMethod("Handshake.Hello")
        objects = {"Instance/0.6.1": [{"Name": ".", "ProxyFor": ""}]}
        if not self.args.no_drover:
            objects["Drover/0.1.0"] = [{"Name": ".", "ProxyFor": ""}]
        return {"Objects": objects}

    def handshake_implements(self, params):
        if self.args.api != "0.5.0":
            raise NoMethod("Handshake.Implements")
        apis = [{"Name": "Instance", "Version": "0.5.0"}]
        if not self.args.no_drover:
            apis.append({"Name": "Drover", "Version": "0.1.0"})
        return {"APIs": apis}

    # -- the instance SPI ----------------------------------------------

    def validate(self, params):
        props = params.get("Properties")
        if props is not None and not isinstance(props, dict):
            raise ValueError("Properties must be an object")
        return {"Type": params.get("Type", ""), "OK": True}

    def provision(self, params):
        spec = params["Spec"]
        tags = spec.get("Tags") or {}
        link = tags.get(LINK)
        if self.args.provision_delay:
            # A slow cloud: longer than the client waits.
            time.sleep(self.args.provision_delay)
        st = self.state
        with st.lock:
            for iid, rec in st.data["instances"].items():
                if link and rec["tags"].get(LINK) == link and iid not in st.data["tombstones"]:
                    return {"Type": params.get("Type", ""), "ID": iid}
            iid = "py-%d" % st.data["next"]
            st.data["next"] += 1
            address = "127.0.99.%d" % self.next_address
            self.next_address += 1
            # Recorded before it is made: a crash leaves a record to find.
            st.data["instances"][iid] = {
                "tags": tags,
                "logical_id": spec.get("LogicalID"),
                "address": address,
                "created_ms": int(time.time() * 1000),
            }
            st.save()
        os.makedirs(st.machine_dir(iid), mode=0o700, exist_ok=True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DROVER_ADDRESS": address}
        drover = params.get("Drover") or {}
        if self.args.dockerd:
            with open(os.path.join(st.machine_dir(iid), "engine.log"), "w") as log:
                proc, endpoint = start_engine(st.machine_dir(iid), drover.get("EngineLabels") or {}, log)
            with st.lock:
                st.data["instances"][iid]["pgid"] = proc.pid
                st.save()
            wait_for_engine(endpoint)
            env["DOCKER_HOST"] = endpoint
        env.update(drover.get("BootEnv") or {})
        with open(os.path.join(st.machine_dir(iid), "boot.log"), "w") as log:
            done = subprocess.run(
                ["sh", "-c", spec.get("Init") or "true"],
                env=env, stdout=log, stderr=subprocess.STDOUT, cwd=st.machine_dir(iid),
            )
        if done.returncode != 0:
            raise RuntimeError("boot script of %s exited with %d" % (iid, done.returncode))
        return {"Type": params.get("Type", ""), "ID": iid}

    def label(self, params):
        st = self.state
        with st.lock:
            rec = st.data["instances"].get(params["Instance"])
            if rec is None:
                raise KeyError("no such instance: %s" % params["Instance"])
            rec["tags"].update(params.get("Labels") or {})
            st.save()
        return {"Type": params.get("Type", ""), "OK": True}

    def destroy(self, params):
        iid = params["Instance"]
        reason = (params.get("Context") or {}).get("Reason", "terminate")
        st = self.state
        with st.lock:
            if iid in st.data["instances"]:
                st.data["tombstones"][iid] = reason
                st.save()
                st.teardown(iid)
        return {"Type": params.get("Type", ""), "OK": True}

    def describe(self, params):
        fail = self.args.fail_describe_file
        if fail and os.path.exists(fail):
            raise RuntimeError("the cloud's API is down")
        want = params.get("Tags") or {}
        out = []
        st = self.state
        with st.lock:
            for iid, rec in sorted(st.data["instances"].items()):
                if iid in st.data["tombstones"]:
                    continue
                if all(rec["tags"].get(k) == v for k, v in want.items()):
                    out.append({"ID": iid, "LogicalID": rec["logical_id"], "Tags": rec["tags"]})
        # Go writes an empty list as null: so does this plugin.
        return {"Type": params.get("Type", ""), "Descriptions": out or None}

    METHODS = {
        "Handshake.Hello": handshake_hello,
        "Handshake.Implements": handshake_implements,
        "Instance.Validate": validate,
        "Instance.Provision": provision,
        "Instance.Label": label,
        "Instance.Destroy": destroy,
        "Instance.DescribeInstances": describe,
    }


def handler_for(plugin):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            # Requests are never logged: Provisions carry secrets.
            pass

        def address_string(self):
            return "unix"

        def answer(self, status, body, content_type="application/json"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            req = json.loads(self.rfile.read(length))
            method = Plugin.METHODS.get(req.get("method"))
            try:
                if method is None:
                    raise NoMethod(req.get("method"))
                result = method(plugin, req.get("params") or {})
            except NoMethod as e:
                # As gorilla/rpc: an unknown method is a plain-text 400.
                self.answer(400, ("rpc: can't find method %s\n" % e).encode(), "text/plain")
                return
            except Exception as e:  # the plugin's own error
                body = {"jsonrpc": "2.0", "error": {"code": -32000, "message": str(e)}, "id": req.get("id")}
            else:
                body = {"jsonrpc": "2.0", "result": result, "id": req.get("id")}
            self.answer(200, json.dumps(body).encode())

    return Handler


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--state", required=True)
    p.add_argument("--api", default="0.6.1", choices=["0.6.1", "0.5.0"])
    p.add_argument("--no-drover", action="store_true")
    p.add_argument("--dockerd", action="store_true")
    p.add_argument("--provision-delay", type=float, default=0)
    p.add_argument("--fail-describe-file")
    args = p.parse_args()
    plugin = Plugin(args)
    server = Server(args.socket, handler_for(plugin))
    os.chmod(args.socket, 0o600)
    try:
        server.serve_forever()
    finally:
        os.remove(args.socket)


if __name__ == "__main__":
    main()
