"""helm/gpufleet rendered and linted by Helm v4 itself (its Go SDK, PyPI `helm-python-sdk`), every
object validated against the upstream Kubernetes schemas (kubernetes-validate, strict)."""

from __future__ import annotations

import json
import re
import shlex

import jsonschema
import pytest
import yaml

from infra.kube.resources import PRUNE_KINDS
from infra.manifests import ref
from infra.schemas import SchemaRegistry, _is_core_group
from tests.support.services import REPO, need_reference

from .chart import CHART, NAMESPACE, PRODUCTION_VALUES, containers, default_values, helm, lint, render

SECRET_ENV = {"SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "OIDC_RP_CLIENT_SECRET"}
OPTIONAL_SECRET_ENV = {"GPUFLEET_OPENBAO_TOKEN", "GPUFLEET_OPENBAO_ROLE_ID", "GPUFLEET_OPENBAO_SECRET_ID"}
WORKLOADS = [("Deployment", "gpufleet-web"), ("Deployment", "gpufleet-worker"), ("Deployment", "gpufleet-beat"),
             ("Job", "gpufleet-migrate-1")]
VALUE_SETS = {"default": None, "production": PRODUCTION_VALUES,
              "kubernetes-backend": {"config": {"backend": "kubernetes"}, "rbac": {"create": True},
                                     "worker": {"replicas": 2}, "gitops": {"persistence": {"enabled": False}}}}


@pytest.mark.parametrize("name", VALUE_SETS)
def test_lint_is_clean(name):
    report = lint(VALUE_SETS[name])
    assert report["errors"] == []
    # severity 2 = warning, 3 = error; only "icon is recommended" (1 = info) may remain.
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
    assert report["total_charts_linted"] == 1


def test_lint_reports_values_the_schema_refuses():
    """Lint is not vacuous: values outside values.schema.json are errors in its report.
    (Helm's lint mode turns template `fail` calls into info messages; rendering, below, refuses them.)"""
    report = lint({"config": {"extraEnv": {"SECRET_KEY": "s3cret"}}})
    assert any("SECRET_KEY" in error for error in report["errors"])
    assert any(m["severity"] == 3 for m in report["messages"])


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_object_is_a_valid_kubernetes_object(name):
    rendered = render(VALUE_SETS[name])
    assert len(rendered.objects) >= 7
    registry = SchemaRegistry(None, kubernetes_version="1.33")
    for obj in rendered.objects:
        # All core kinds: kubernetes-validate's strict schemas check them (no CRD goes unchecked here).
        assert _is_core_group(ref(obj).group), obj["kind"]
        assert registry.validate([obj]) == [], obj["metadata"]["name"]


def test_validation_catches_a_misspelled_field():
    """The check above can fail: a typo in a rendered container is reported."""
    obj = render().get("Deployment", "gpufleet-web")
    containers(obj)[0]["readinesProbe"] = containers(obj)[0]["readinessProbe"]
    assert SchemaRegistry(None, kubernetes_version="1.33").validate([obj])


def test_values_yaml_matches_its_schema_and_the_schema_is_strict():
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.Draft7Validator(schema).validate(default_values())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**default_values(), "replicas": 3}, schema)  # a misplaced key is refused


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"config": {"extraEnv": {"SECRET_KEY": "s3cret"}}}, "SECRET_KEY"),
        ({"config": {"extraEnv": {"DATABASE_URL": "postgres://u:p@db/x"}}}, "DATABASE_URL"),
        ({"config": {"backend": "kubectl"}}, "backend"),
        ({"podSecurityContext": {"runAsNonRoot": False}}, "runAsNonRoot"),
        ({"secrets": {"existingSecret": ""}}, "existingSecret"),
        ({"web": {"replica": 2}}, "replica"),
        ({"worker": {"replicas": 2}}, "single writer"),
        ({"gitops": {"push": {"enabled": True}}}, "gitops.push.url"),
    ],
)
def test_bad_values_are_refused_by_helm_naming_the_problem(values, message):
    h = helm()
    with pytest.raises(h.HelmError) as caught:
        render(values)
    assert message in str(caught.value)


def test_no_secret_values_in_configmaps_only_secret_references():
    rendered = render(PRODUCTION_VALUES)
    assert rendered.of_kind("Secret") == []
    for cm in rendered.of_kind("ConfigMap"):
        assert not set(cm["data"]) & (SECRET_ENV | OPTIONAL_SECRET_ENV)
    for kind, name in WORKLOADS:
        for container in containers(rendered.get(kind, name))[:1]:
            env = {e["name"]: e for e in container["env"]}
            for var in SECRET_ENV | OPTIONAL_SECRET_ENV:
                source = env[var]["valueFrom"]["secretKeyRef"]
                assert source["name"] == "gpufleet-prod"
                assert source.get("optional", False) is (var in OPTIONAL_SECRET_ENV)
                assert "value" not in env[var]


def test_configmap_carries_the_production_settings():
    data = render(PRODUCTION_VALUES).get("ConfigMap", "gpufleet")["data"]
    assert data["DJANGO_SETTINGS_MODULE"] == "gpufleet.settings.production"
    assert data["ALLOWED_HOSTS"] == "gpufleet.example.com"
    assert data["CSRF_TRUSTED_ORIGINS"] == "https://gpufleet.example.com"
    assert data["OIDC_OP_ISSUER"] == "https://login.example.com/realms/main"
    assert data["OIDC_RP_CLIENT_ID"] == "gpufleet"
    assert data["GPUFLEET_BACKEND"] == "gitops"
    assert data["GPUFLEET_GITOPS_REPO"] == "/var/lib/gpufleet/gitops"
    assert data["GPUFLEET_RECONCILE_ALL_SECONDS"] == "300"
    assert all(isinstance(v, str) for v in data.values())


def test_migrate_is_a_pre_install_and_pre_upgrade_hook_with_the_configmap_settings_inline():
    rendered = render(PRODUCTION_VALUES, upgrade=True, revision=7)
    job = rendered.get("Job", "gpufleet-migrate-7")
    annotations = job["metadata"]["annotations"]
    assert set(annotations["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"]
    spec = job["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["command"] + container["args"] == ["gpufleet", "migrate", "--noinput", "--lock-timeout=270"]
    # A pre-install hook runs before the ConfigMap and ServiceAccount exist: nothing may refer to them.
    assert "envFrom" not in container
    assert spec["serviceAccountName"] == "default"
    inline = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert inline == rendered.get("ConfigMap", "gpufleet")["data"]
    assert spec["restartPolicy"] == "Never"


def test_beat_is_a_single_replica_recreated_never_rolled():
    for values in (None, PRODUCTION_VALUES, {"web": {"replicas": 10}}):
        beat = render(values).get("Deployment", "gpufleet-beat")
        assert beat["spec"]["replicas"] == 1
        assert beat["spec"]["strategy"] == {"type": "Recreate"}
        assert containers(beat)[0]["command"] + containers(beat)[0]["args"][:2] == ["celery", "--app=gpufleet", "beat"]


def test_worker_is_the_single_writer_of_the_gitops_volume():
    rendered = render(PRODUCTION_VALUES)
    worker = rendered.get("Deployment", "gpufleet-worker")
    assert worker["spec"]["replicas"] == 1
    assert worker["spec"]["strategy"] == {"type": "Recreate"}
    volumes = {v["name"]: v for v in worker["spec"]["template"]["spec"]["volumes"]}
    assert volumes["state"]["persistentVolumeClaim"]["claimName"] == "gpufleet-gitops"
    pvc = rendered.get("PersistentVolumeClaim", "gpufleet-gitops")
    assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    # Only the worker mounts it writable; the push sidecar reads it; web and beat never see it.
    mounts = {c["name"]: {m["name"]: m for m in c["volumeMounts"]} for c in containers(worker)}
    assert not mounts["worker"]["state"].get("readOnly", False)
    assert mounts["gitops-push"]["state"]["readOnly"] is True
    for name in ("gpufleet-web", "gpufleet-beat"):
        spec = rendered.get("Deployment", name)["spec"]["template"]["spec"]
        assert "state" not in {v["name"] for v in spec["volumes"]}


def test_every_container_is_locked_down():
    for values in VALUE_SETS.values():
        rendered = render(values)
        for kind, name in WORKLOADS:
            spec = rendered.get(kind, name)["spec"]["template"]["spec"]
            assert spec["securityContext"]["runAsNonRoot"] is True
            assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            for container in spec["containers"]:
                context = container["securityContext"]
                assert context["readOnlyRootFilesystem"] is True
                assert context["allowPrivilegeEscalation"] is False
                assert context["capabilities"]["drop"] == ["ALL"]
                assert "resources" in container and container["resources"]["requests"]
                # A read-only root needs a writable /tmp (gunicorn heartbeats, beat's schedule, HOME).
                assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}


def test_only_the_worker_gets_an_api_token_and_only_with_the_kubernetes_backend():
    for values, worker_token in ((None, False), (VALUE_SETS["kubernetes-backend"], True)):
        rendered = render(values)
        for kind, name in WORKLOADS:
            spec = rendered.get(kind, name)["spec"]["template"]["spec"]
            assert spec["automountServiceAccountToken"] is (worker_token and name == "gpufleet-worker")


def test_web_probes_name_an_allowed_host():
    rendered = render(PRODUCTION_VALUES)
    allowed = rendered.get("ConfigMap", "gpufleet")["data"]["ALLOWED_HOSTS"].split(",")
    web = containers(rendered.get("Deployment", "gpufleet-web"))[0]
    assert web["command"] == ["gunicorn"] and web["args"][0] == "gpufleet.wsgi:application"
    for probe in ("readinessProbe", "livenessProbe"):
        headers = {h["name"]: h["value"] for h in web[probe]["httpGet"]["httpHeaders"]}
        assert headers["Host"] in allowed
    # Without an ingress the Service's own names are allowed (and the probe uses the first).
    default = render().get("ConfigMap", "gpufleet")["data"]["ALLOWED_HOSTS"].split(",")
    assert default == ["gpufleet", f"gpufleet.{NAMESPACE}.svc", f"gpufleet.{NAMESPACE}.svc.cluster.local"]


def test_web_runs_gthread_workers_one_per_cpu_and_the_image_does_the_same():
    """The worker model benchmarks/api.py chose (benchmarks/README.md, "API"): gthread, a few processes with
    threads, not many sync processes; the image's default command is the chart's."""
    web = containers(render().get("Deployment", "gpufleet-web"))[0]
    args = dict(a.split("=", 1) for a in web["args"] if a.startswith("--") and "=" in a)
    assert args["--worker-class"] == "gthread"
    assert int(args["--workers"]) <= 2 and int(args["--threads"]) >= 2
    cmd = next(line for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("CMD "))
    image = json.loads(cmd.removeprefix("CMD "))
    assert image[:2] == ["gunicorn", "gpufleet.wsgi:application"]
    assert {a for a in image if a.startswith(("--worker-class", "--workers", "--threads"))} == {
        f"{k}={v}" for k, v in args.items() if k in ("--worker-class", "--workers", "--threads")}


def test_service_and_ingress_route_to_the_web_pods():
    rendered = render(PRODUCTION_VALUES)
    service = rendered.get("Service", "gpufleet")
    web = rendered.get("Deployment", "gpufleet-web")
    assert service["spec"]["selector"] == web["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["targetPort"] == containers(web)[0]["ports"][0]["name"]
    ingress = rendered.get("Ingress", "gpufleet")
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "gpufleet", "port": {"name": "http"}}
    assert render().of_kind("Ingress") == []
    # Selectors of the components never overlap (a Service must not pick up worker pods).
    selectors = [rendered.get("Deployment", n)["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"]
                 for n in ("gpufleet-web", "gpufleet-worker", "gpufleet-beat")]
    assert len(set(selectors)) == 3


def test_a_settings_change_rolls_the_pods():
    before = render().get("Deployment", "gpufleet-web")["spec"]["template"]["metadata"]["annotations"]
    after = render({"config": {"logLevel": "DEBUG"}}).get("Deployment", "gpufleet-web")
    assert before["checksum/config"] != after["spec"]["template"]["metadata"]["annotations"]["checksum/config"]


def test_rbac_covers_every_kind_the_kubernetes_backend_applies_or_prunes():
    index = json.loads((need_reference() / "crds" / "index.json").read_text())
    plurals = {(e["group"], e["kind"]): e["plural"] for e in index}
    role = render(VALUE_SETS["kubernetes-backend"]).get("ClusterRole", "gpufleet-apply")
    granted = {(group, resource): set(rule["verbs"])
               for rule in role["rules"] for group in rule["apiGroups"] for resource in rule["resources"]}
    for api_version, kind in PRUNE_KINDS:
        group = api_version.rpartition("/")[0]
        plural = plurals.get((group, kind)) or re.sub(r"(s|y)?$", lambda m: {"s": "ses", "y": "ies"}.get(m[0], "s"),
                                                        kind.lower(), count=1)
        assert {"get", "list", "create", "patch", "delete"} <= granted.get((group, plural), set()), (group, plural)
    binding = render(VALUE_SETS["kubernetes-backend"]).get("ClusterRoleBinding", "gpufleet-apply")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpufleet", "namespace": NAMESPACE}]
    assert render().of_kind("ClusterRole") == []


def test_push_sidecar_uses_the_ssh_secret_read_only():
    worker = render(PRODUCTION_VALUES).get("Deployment", "gpufleet-worker")
    push = {c["name"]: c for c in containers(worker)}["gitops-push"]
    env = {e["name"]: e["value"] for e in push["env"]}
    assert env["GPUFLEET_PUSH_URL"] == "ssh://git@git.example.com/platform/desired-state.git"
    assert "StrictHostKeyChecking=yes" in env["GIT_SSH_COMMAND"]
    volumes = {v["name"]: v for v in worker["spec"]["template"]["spec"]["volumes"]}
    assert volumes["git-ssh"]["secret"] == {"secretName": "gpufleet-git-ssh", "defaultMode": 0o400}
    assert {c["name"] for c in containers(render().get("Deployment", "gpufleet-worker"))} == {"worker"}


def test_chart_yaml_is_helm_v2_api_and_versions_are_semver():
    meta = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert meta["apiVersion"] == "v2" and meta["type"] == "application"
    assert re.fullmatch(r"\d+\.\d+\.\d+", meta["version"])


def test_the_operator_guide_install_command_renders():
    """The `helm upgrade --install` in docs/operator-guide.md, its --set flags parsed by Helm's own parser."""
    guide = (REPO / "docs" / "operator-guide.md").read_text()
    section = guide.split("## Deploying gpufleet with Helm", 1)[1].split("### Install", 1)[1]
    command = section.split("```sh", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    words = shlex.split(command)
    assert words[:3] == ["helm", "upgrade", "--install"]
    sets = [words[i + 1] for i, word in enumerate(words) if word == "--set"]
    values = helm().parse_set_string(",".join(sets))
    rendered = render(values)
    assert rendered.get("Ingress", "gpufleet")["spec"]["tls"][0]["hosts"] == ["gpufleet.example.com"]
    assert rendered.get("ConfigMap", "gpufleet")["data"]["OIDC_OP_ISSUER"] == "https://login.example.com/realms/main"
    # Required by the production profile (validated there): the guide sets it.
    template = rendered.get("ConfigMap", "gpufleet")["data"]["GPUFLEET_VCLUSTER_URL_TEMPLATE"]
    assert template == "https://{slug}.vcluster.example.com"
    assert {c["name"] for c in containers(rendered.get("Deployment", "gpufleet-worker"))} == {"worker", "gitops-push"}
    registry = SchemaRegistry(None, kubernetes_version="1.33")
    assert [p for obj in rendered.objects for p in registry.validate([obj])] == []


def test_web_keeps_a_pod_through_node_drains():
    pdb = render(PRODUCTION_VALUES).get("PodDisruptionBudget", "gpufleet-web")
    web = render(PRODUCTION_VALUES).get("Deployment", "gpufleet-web")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == web["spec"]["selector"]["matchLabels"]
    # One replica: a PDB with minAvailable 1 would block every drain, so there is none.
    assert render({"web": {"replicas": 1}}).of_kind("PodDisruptionBudget") == []


def test_extra_volumes_reach_every_gpufleet_container_but_not_the_sidecar():
    values = {
        **PRODUCTION_VALUES,
        "extraVolumes": [{"name": "vcluster-ca", "secret": {"secretName": "vcluster-ca"}}],
        "extraVolumeMounts": [{"name": "vcluster-ca", "mountPath": "/etc/gpufleet/vcluster-ca", "readOnly": True}],
    }
    rendered = render(values)
    for kind, name in WORKLOADS:
        spec = rendered.get(kind, name)["spec"]["template"]["spec"]
        assert {"name": "vcluster-ca", "secret": {"secretName": "vcluster-ca"}} in spec["volumes"]
        for container in spec["containers"]:
            mounted = "vcluster-ca" in {m["name"] for m in container["volumeMounts"]}
            assert mounted is (container["name"] != "gitops-push"), (name, container["name"])


def test_helm_test_hook_checks_the_web_through_the_service():
    rendered = render(PRODUCTION_VALUES)
    pod = rendered.get("Pod", "gpufleet-test-web")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    service = rendered.get("Service", "gpufleet")
    assert env["GPUFLEET_CHECK_URL"] == f"http://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    assert env["GPUFLEET_CHECK_HOST"] in rendered.get("ConfigMap", "gpufleet")["data"]["ALLOWED_HOSTS"].split(",")
    assert pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize(("allowed", "probe_host"), [
    (["gpufleet.example.com", "other.example.com"], "gpufleet.example.com"),
    ([".example.com"], "example.com"),  # Django's subdomain pattern: the probe sends a name it matches
    (["*"], "localhost"),
])
def test_probe_host_is_a_concrete_name_the_allowed_hosts_match(allowed, probe_host):
    rendered = render({"config": {"allowedHosts": allowed}})
    web = containers(rendered.get("Deployment", "gpufleet-web"))[0]
    assert {h["name"]: h["value"] for h in web["readinessProbe"]["httpGet"]["httpHeaders"]} == {"Host": probe_host}
    check = rendered.get("Pod", "gpufleet-test-web")["spec"]["containers"][0]
    assert {e["name"]: e["value"] for e in check["env"]}["GPUFLEET_CHECK_HOST"] == probe_host
    assert rendered.get("ConfigMap", "gpufleet")["data"]["ALLOWED_HOSTS"] == ",".join(allowed)
