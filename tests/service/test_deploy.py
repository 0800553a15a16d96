"""deploy/: what can be checked without a container engine, a cluster or a Collector binary.

Validated: every YAML file parses; the tracefence configs load with ``load_config`` and name
no unknown setting; the Dockerfile's ENTRYPOINT and the Deployment's args are flags
``tracefence serve`` accepts; the files agree with each other (names, ports, paths, timeouts).
Run: the image's ENTRYPOINT command (outside a container) with the config map's config, and the
Dockerfile's HEALTHCHECK command and the readiness probe's service name against it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from otel_tracefence.core.config import ServiceSettings, TraceFenceConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
EXPECTED_FILES = {
    "README.md",
    "Dockerfile",
    "Dockerfile.dockerignore",
    "tracefence.yaml",
    "collector/single.yaml",
    "collector/loadbalancing.yaml",
    "k8s/deployment.yaml",
    "k8s/service-headless.yaml",
    "k8s/configmap.yaml",
    "k8s/postgres/kustomization.yaml",
    "k8s/postgres/deployment-patch.yaml",
    "k8s/postgres/postgres.yaml",
}


@pytest.fixture(autouse=True)
def _no_host_settings(monkeypatch):
    for name in list(os.environ):
        if name.startswith("OTEL_TRACEFENCE_"):
            monkeypatch.delenv(name)


def _yaml(relative: str) -> Any:
    docs = list(yaml.safe_load_all((DEPLOY / relative).read_text(encoding="utf-8")))
    assert len(docs) == 1, relative
    return docs[0]


def _configmap_config(tmp_path: Path) -> Path:
    cm = _yaml("k8s/configmap.yaml")
    path = tmp_path / "tracefence.yaml"
    path.write_text(cm["data"]["tracefence.yaml"], encoding="utf-8")
    return path


def _dockerfile() -> dict[str, Any]:
    """The Dockerfile's final stage: ENTRYPOINT, HEALTHCHECK CMD and EXPOSE as parsed values, ENV and USER."""
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    logical = re.sub(r"\\\n", " ", text)  # join continuation lines
    lines = [line.strip() for line in logical.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    final = lines[max(i for i, line in enumerate(lines) if line.startswith("FROM ")) :]
    out: dict[str, Any] = {"from": [line.split()[1] for line in lines if line.startswith("FROM ")], "env": {}, "copy": []}
    for line in final:
        instruction, _, rest = line.partition(" ")
        if instruction == "ENTRYPOINT":
            out["entrypoint"] = json.loads(rest)
        elif instruction == "HEALTHCHECK":
            out["healthcheck"] = json.loads(rest[rest.index("CMD ") + 4 :])
        elif instruction == "EXPOSE":
            out["expose"] = [int(p) for p in rest.split()]
        elif instruction == "USER":
            out["user"] = rest
        elif instruction == "ENV":
            out["env"].update(dict(part.split("=", 1) for part in shlex.split(rest)))
        elif instruction == "COPY":
            out["copy"].append(rest.split())
    return out


def _unknown_keys(data: Any, model: type[BaseModel], where: str = "") -> list[str]:
    """Keys of ``data`` that are not settings of ``model`` (the top level ignores unknown keys, so check)."""
    problems = []
    if not isinstance(data, dict):
        return problems
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            problems.append(f"{where}{key}")
            continue
        annotation = field.annotation
        inner = [annotation, *typing.get_args(annotation)]
        for candidate in inner:
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                items = value if isinstance(value, list) else [value]
                for i, item in enumerate(items):
                    problems += _unknown_keys(item, candidate, f"{where}{key}{f'[{i}]' if isinstance(value, list) else ''}.")
    return problems


# -- everything parses ---------------------------------------------------------------------


def test_deploy_has_the_expected_files_and_every_yaml_parses():
    present = {str(p.relative_to(DEPLOY)) for p in DEPLOY.rglob("*") if p.is_file()}
    assert EXPECTED_FILES <= present
    yamls = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))
    assert len(yamls) >= 6
    for path in yamls:
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            assert isinstance(doc, dict), path
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    for relative in present - {"README.md"}:
        assert relative in readme, f"deploy/README.md does not mention {relative}"


# -- tracefence configs --------------------------------------------------------------------


def test_example_config_names_every_setting_at_its_default():
    path = DEPLOY / "tracefence.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert _unknown_keys(raw, TraceFenceConfig) == []
    assert set(raw) == set(TraceFenceConfig.model_fields)
    assert set(raw["service"]) == set(ServiceSettings.model_fields)
    assert set(raw["limits"]) == set(TraceFenceConfig.model_fields["limits"].default_factory().model_dump())
    assert load_config(path).model_dump() == TraceFenceConfig().model_dump()


def test_configmap_config_loads_with_no_unknown_setting(tmp_path):
    path = _configmap_config(tmp_path)
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert _unknown_keys(raw, TraceFenceConfig) == []
    config = load_config(path)
    assert config.service.endpoint == "0.0.0.0:4317"
    # Loaded as a service would be: the review API on loopback, so it starts without a review token.
    from otel_tracefence.service.serve_settings import check_review_exposure

    assert config.service.review_endpoint.startswith("127.0.0.1:") and check_review_exposure(config) is None
    assert [u.endpoint for u in config.service.upstreams] == ["http://tempo.observability.svc.cluster.local:4317"]
    assert config.review_db == "/var/lib/tracefence/review.db"
    assert config.rule_for("payments.charge").effect == "write" and config.rule_for("read_invoice").effect == "read"


# -- the image -----------------------------------------------------------------------------


def _serve_help() -> str:
    done = subprocess.run([sys.executable, "-m", "otel_tracefence", "serve", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _flags(argv: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in argv if a.startswith("--")]


def test_dockerfile_entrypoint_and_deployment_args_are_serve_flags():
    from otel_tracefence.cli import build_parser

    docker = _dockerfile()
    assert docker["from"] == ["python:3.11-slim", "python:3.11-slim"]
    entrypoint = docker["entrypoint"]
    assert entrypoint[:2] == ["tracefence", "serve"]
    container = _yaml("k8s/deployment.yaml")["spec"]["template"]["spec"]["containers"][0]
    argv = entrypoint[1:] + container.get("args", [])
    help_text = _serve_help()
    for flag in _flags(argv):
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text), f"`tracefence serve --help` has no {flag}"
    args = build_parser().parse_args(argv)  # exits (SystemExit) on an unknown flag or a bad value
    assert args.command == "serve" and args.endpoint == "0.0.0.0:4317"
    assert args.review_endpoint.startswith("127.0.0.1:")  # the review API fails closed: loopback unless given a review token
    assert args.review_db.startswith("/var/lib/tracefence/")
    assert docker["expose"] == [4317]
    assert docker["user"].split(":")[0] not in ("0", "root")
    # The baked-in config is deploy/tracefence.yaml, where OTEL_TRACEFENCE_CONFIG points.
    assert ["deploy/tracefence.yaml", docker["env"]["OTEL_TRACEFENCE_CONFIG"]] in docker["copy"]
    assert docker["healthcheck"][:2] == ["python", "-c"]


# -- collector configs ---------------------------------------------------------------------


def _check_pipelines(config: dict) -> None:
    for pipeline in config["service"]["pipelines"].values():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in config[kind], f"pipeline uses undefined {kind[:-1]} {component}"
    for extension in config["service"].get("extensions", []):
        assert extension in config["extensions"]


def test_single_collector_config_sends_traces_to_one_tracefence():
    config = _yaml("collector/single.yaml")
    _check_pipelines(config)
    traces = config["service"]["pipelines"]["traces"]
    assert traces["receivers"] == ["otlp"] and "batch" in traces["processors"]
    assert traces["exporters"] == ["otlp/tracefence"]
    assert config["exporters"]["otlp/tracefence"]["endpoint"] == "tracefence:4317"


def test_loadbalancing_config_routes_by_trace_id_to_the_headless_service():
    config = _yaml("collector/loadbalancing.yaml")
    _check_pipelines(config)
    assert config["service"]["pipelines"]["traces"]["exporters"] == ["loadbalancing"]
    lb = config["exporters"]["loadbalancing"]
    assert lb["routing_key"] == "traceID"
    assert "endpoint" not in lb["protocol"]["otlp"]  # the exporter fills in each backend
    service = _yaml("k8s/service-headless.yaml")
    meta = service["metadata"]
    assert lb["resolver"]["dns"]["hostname"] == f"{meta['name']}.{meta['namespace']}.svc.cluster.local"
    assert lb["resolver"]["dns"]["port"] == service["spec"]["ports"][0]["port"] == 4317


# -- kubernetes ----------------------------------------------------------------------------


def test_kubernetes_manifests_agree(tmp_path):
    deployment = _yaml("k8s/deployment.yaml")
    service = _yaml("k8s/service-headless.yaml")
    configmap = _yaml("k8s/configmap.yaml")
    assert (deployment["kind"], service["kind"], configmap["kind"]) == ("Deployment", "Service", "ConfigMap")
    assert deployment["metadata"]["namespace"] == service["metadata"]["namespace"] == configmap["metadata"]["namespace"]
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["replicas"] > 1
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()

    # Headless, selecting these pods, on the container's named port.
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    container = pod["spec"]["containers"][0]
    port = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert port[service["spec"]["ports"][0]["targetPort"]] == 4317 == _dockerfile()["expose"][0]

    # gRPC probes on the standard health service, on the receiver port.
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == 4317, probe
    assert container["readinessProbe"]["grpc"]["service"] == "opentelemetry.proto.collector.trace.v1.TraceService"

    # The config map is mounted where OTEL_TRACEFENCE_CONFIG points.
    env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    config_volume = next(name for name, v in volumes.items() if "configMap" in v)
    assert volumes[config_volume]["configMap"]["name"] == configmap["metadata"]["name"]
    assert env["OTEL_TRACEFENCE_CONFIG"] == f"{mounts[config_volume]}/tracefence.yaml"
    assert "tracefence.yaml" in configmap["data"]

    # Each replica's review DB lives on that pod's own volume.
    config = load_config(_configmap_config(tmp_path))
    assert str(Path(config.review_db).parent) in mounts.values()
    assert mounts["data"] == str(Path(config.review_db).parent)

    # Non-root, as the image.
    uid = _dockerfile()["user"].split(":")[0]
    assert str(pod["spec"]["securityContext"]["runAsUser"]) == uid and pod["spec"]["securityContext"]["runAsNonRoot"] is True

    # Time to stop on SIGTERM: preStop sleep + drain_timeout_s (the whole of TraceFenceService.stop) + its overrun.
    from otel_tracefence.service.shutdown import STOP_OVERRUN_S

    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    needed = float(pre_stop[1]) + config.service.drain_timeout_s + STOP_OVERRUN_S
    assert pod["spec"]["terminationGracePeriodSeconds"] > needed
    # The image's own default (deploy/tracefence.yaml, baked in) fits `docker stop`'s default 10 s.
    assert load_config(DEPLOY / "tracefence.yaml").service.drain_timeout_s + STOP_OVERRUN_S <= 10


def test_postgres_overlay_points_every_replica_at_one_queue():
    """deploy/k8s/postgres: the base manifests unchanged, the Deployment patched to a PostgreSQL URL (no password
    in it: PGPASSWORD from the Secret the database uses too) that names the database's Service, user and database."""
    import urllib.parse

    from otel_tracefence.cli import build_parser
    from otel_tracefence.review import is_postgres_url

    kustomization = _yaml("k8s/postgres/kustomization.yaml")
    assert kustomization["resources"] == ["../configmap.yaml", "../service-headless.yaml", "../deployment.yaml", "postgres.yaml"]
    assert kustomization["patches"] == [{"path": "deployment-patch.yaml"}]
    base = _yaml("k8s/deployment.yaml")
    patch = _yaml("k8s/postgres/deployment-patch.yaml")
    assert (patch["kind"], patch["metadata"]) == (base["kind"], {"name": base["metadata"]["name"], "namespace": base["metadata"]["namespace"]})
    assert base["spec"]["replicas"] > 1
    container = patch["spec"]["template"]["spec"]["containers"][0]
    base_container = base["spec"]["template"]["spec"]["containers"][0]
    assert container["name"] == base_container["name"]
    assert container["args"][: len(base_container["args"])] == base_container["args"]  # the base's args, then --review-db
    args = build_parser().parse_args(_dockerfile()["entrypoint"][1:] + container["args"])
    assert is_postgres_url(args.review_db)
    url = urllib.parse.urlsplit(args.review_db)
    assert url.password is None and "password" not in url.query

    service, statefulset = yaml.safe_load_all((DEPLOY / "k8s/postgres/postgres.yaml").read_text(encoding="utf-8"))
    assert (service["kind"], statefulset["kind"]) == ("Service", "StatefulSet")
    namespace = base["metadata"]["namespace"]
    assert url.hostname == f"{service['metadata']['name']}.{namespace}.svc.cluster.local" and url.port == service["spec"]["ports"][0]["port"]
    pg_env = {e["name"]: e for e in statefulset["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert url.username == pg_env["POSTGRES_USER"]["value"] and url.path == "/" + pg_env["POSTGRES_DB"]["value"]
    tf_env = {e["name"]: e for e in container["env"]}
    assert tf_env["PGPASSWORD"]["valueFrom"] == pg_env["POSTGRES_PASSWORD"]["valueFrom"]
    assert service["spec"]["selector"].items() <= statefulset["spec"]["template"]["metadata"]["labels"].items()
    # The image carries psycopg.
    assert '"$(echo /wheels/*.whl)[postgres]"' in (DEPLOY / "Dockerfile").read_text(encoding="utf-8")


# -- run the image's command, outside a container ------------------------------------------


def _health(command: list[str], port: int) -> subprocess.CompletedProcess:
    """The Dockerfile's HEALTHCHECK command, against ``port`` instead of 4317."""
    assert command[0] == "python"
    code = command[2]
    assert "127.0.0.1:4317" in code
    return subprocess.run([sys.executable, "-c", code.replace("127.0.0.1:4317", f"127.0.0.1:{port}")], capture_output=True, text=True, timeout=30)


def test_image_entrypoint_runs_and_answers_its_health_checks(tmp_path):
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    docker = _dockerfile()
    container = _yaml("k8s/deployment.yaml")["spec"]["template"]["spec"]["containers"][0]
    script = Path(sys.executable).parent / "tracefence"
    program = [str(script)] if script.exists() else [sys.executable, "-m", "otel_tracefence"]
    # The ENTRYPOINT and the Deployment's args; later flags win, so only the addresses and the DB path change.
    command = program + docker["entrypoint"][1:] + container.get("args", []) + ["--endpoint", "127.0.0.1:0", "--review-endpoint", "127.0.0.1:0", "--http-endpoint", "127.0.0.1:0", "--review-db", str(tmp_path / "review.db")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_TRACEFENCE_")}
    env["OTEL_TRACEFENCE_CONFIG"] = str(_configmap_config(tmp_path))
    log = tmp_path / "serve.log"
    with open(log, "wb") as sink:
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)
    try:
        port = None
        deadline = time.monotonic() + 30
        while port is None and time.monotonic() < deadline and proc.poll() is None:
            for line in log.read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if entry.get("message") == "tracefence serve listening":
                        port = entry["port"]
            time.sleep(0.05)
        assert port, f"tracefence serve did not start: {log.read_text(errors='replace')}"

        healthy = _health(docker["healthcheck"], port)
        assert healthy.returncode == 0, healthy.stderr
        # The readiness probe's service name is one the server reports.
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            service = container["readinessProbe"]["grpc"]["service"]
            assert stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    assert proc.returncode == 0, log.read_text(errors="replace")
    # Stopped: the same health check now fails.
    assert _health(docker["healthcheck"], port).returncode != 0


def test_the_precedence_comment_names_every_serve_flag_that_sets_a_setting():
    """Trial defect 15: the comment left out --workers, --persistent-queue-dir and --insecure-review-api."""
    from otel_tracefence.cli import build_parser

    serve = build_parser()._subparsers._group_actions[0].choices["serve"]
    flags = {option for action in serve._actions if action.help != argparse.SUPPRESS for option in action.option_strings if option.startswith("--")}
    flags -= {"--help", "--config", "--log-format", "--log-level"}  # common to every command, or not settings: the file itself, the logs
    comment = " ".join(line.lstrip("# ") for line in (DEPLOY / "tracefence.yaml").read_text().splitlines()[:12] if line.startswith("#"))
    named = set(re.findall(r"--[a-z][a-z-]*", comment.partition("Precedence")[2].partition("then environment")[0]))
    assert named == flags
