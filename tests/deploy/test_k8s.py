"""deploy/k8s and deploy/docker: what can be checked without a Kubernetes cluster, a GPU or Docker.

Every overlay is rendered by the real `kubectl kustomize` and every object it renders is validated:
Kubernetes objects (and the pod templates inside the RayCluster) against the Kubernetes API schemas
shipped offline in kubernetes-validate; RayCluster and RayJob against the OpenAPI schemas of KubeRay's
CRDs (../shared/schemas/kuberay). Both are strict, as the API server's strict field validation is: an
unknown field is an error, and so is a duplicate entry of a list keyed by name. A few rules that
KubeRay's operator checks beyond its schema, the references between objects, and the RayJob's command
(through flywheel's own config loader) are checked too; broken objects show that each check can fail.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import tomllib
from copy import deepcopy
from functools import cache
from pathlib import Path, PurePosixPath

import jsonschema
import kubernetes_validate
import pytest
import yaml

from flywheel.config import Config, load_config

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBERAY_CRDS = ROOT.parent / "shared" / "schemas" / "kuberay"
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
KUBERNETES_VERSION = "1.30.0"  # one of the schema sets kubernetes-validate ships
CRD_FILES = {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml"}
MAX_NAME = {"RayCluster": 53, "RayJob": 47}  # KubeRay's MaxRayClusterNameLength, MaxRayJobNameLength
DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
# (nodes, GPUs per node, model directory, trainer ranks, engine replicas) each overlay is meant to give
SHAPES = {
    "single-node": (1, 8, "/data/models/Qwen2.5-7B-Instruct", 7, 1),
    "multi-node": (2, 8, "/data/models/Qwen2.5-32B-Instruct", 8, 8),
}
# The `cluster` section (address: join a running Ray cluster; placement) is being added to flywheel's
# config on another branch; until Config has it, the loader is given the RayJob's other overrides only.
PENDING_SECTIONS = () if "cluster" in Config.model_fields else ("cluster.",)
BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


@cache
def render(overlay: str) -> tuple[dict, ...]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is missing: `make system-deps` installs it (Debian's kubernetes-client)"
    out = subprocess.run([kubectl, "kustomize", str(K8S / "overlays" / overlay)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"kubectl kustomize {overlay} failed: {out.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(out.stdout) if doc)


def one(objects, kind: str, name: str | None = None) -> dict:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_templates(cluster: dict) -> list[dict]:
    spec = cluster["spec"]
    return [spec["headGroupSpec"]["template"], *(group["template"] for group in spec.get("workerGroupSpecs", []))]


def cluster_shape(cluster: dict) -> tuple[int, int]:
    """(nodes, GPUs per node): the head plus every worker replica, all with the head's GPU limit."""
    gpus = {int(t["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]) for t in pod_templates(cluster)}
    assert len(gpus) == 1, f"nodes with different GPU counts: {gpus}"
    return 1 + sum(group["replicas"] for group in cluster["spec"].get("workerGroupSpecs", [])), gpus.pop()


def quantity(text: str | int) -> float:
    number, suffix = re.fullmatch(r"([0-9.]+)([KMGT]i)?", str(text)).groups()
    return float(number) * BINARY.get(suffix, 1)


# --- validators ---------------------------------------------------------------------------------


def kubernetes_problems(obj: dict) -> list[str]:
    """The Kubernetes API schema's objections to a built-in object (unknown fields included)."""
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{'.'.join(map(str, error.path))}: {error.message}"]
    return []


def as_pod_template(template: dict, name: str) -> dict:
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name}, "template": template}


def strict(schema: dict) -> dict:
    """A CRD schema in which every object that lists its fields rejects any other field."""
    schema = dict(schema)
    if "properties" in schema:
        schema["properties"] = {key: strict(sub) for key, sub in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
    if isinstance(schema.get("additionalProperties"), dict):
        schema["additionalProperties"] = strict(schema["additionalProperties"])
    if "items" in schema:
        schema["items"] = strict(schema["items"])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in schema:
            schema[key] = [strict(sub) for sub in schema[key]]
    return schema


@cache
def crd_schema(kind: str, api_version: str) -> dict:
    path = KUBERAY_CRDS / CRD_FILES[kind]
    assert path.is_file(), f"{path} is missing: the KubeRay CRDs come with shared/ beside the repository"
    crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    group, version = api_version.split("/")
    assert crd["spec"]["group"] == group, f"{kind} is in group {crd['spec']['group']}, not {group}"
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
    return strict(served["schema"]["openAPIV3Schema"])


def duplicates(value, schema: dict, where: str = "") -> list[str]:
    """Entries repeated in lists the schema marks x-kubernetes-list-type map (same keys) or set."""
    found = []
    if isinstance(value, dict):
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = schema.get("properties", {}).get(key, extra if isinstance(extra, dict) else None)
            found += duplicates(item, sub, f"{where}.{key}") if sub else []
    elif isinstance(value, list):
        kind, keys = schema.get("x-kubernetes-list-type"), schema.get("x-kubernetes-list-map-keys", ())
        ids = [json.dumps([v.get(k) for k in keys] if kind == "map" else v, sort_keys=True) for v in value] if kind in ("map", "set") else []
        found += [f"{where}: duplicate entry {i}" for i in sorted({i for i in ids if ids.count(i) > 1})]
        for n, item in enumerate(value):
            found += duplicates(item, schema.get("items", {}), f"{where}[{n}]")
    return found


def kuberay_problems(obj: dict) -> list[str]:
    """The KubeRay CRD schema's objections to a RayCluster or RayJob."""
    schema = crd_schema(obj["kind"], obj["apiVersion"])
    errors = jsonschema.Draft7Validator(schema).iter_errors(obj)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors] + duplicates(obj, schema)


def operator_problems(obj: dict, objects) -> list[str]:
    """Rules of KubeRay's operator (controllers/ray/utils/validation.go) that its schema does not state,
    for the fields these manifests use, plus: a RayJob's clusterSelector names a RayCluster rendered
    alongside it."""
    name, spec, problems = obj["metadata"]["name"], obj["spec"], []
    if len(name) > MAX_NAME[obj["kind"]] or not DNS1035.fullmatch(name):
        problems.append(f"{obj['kind']} name {name!r} must be a DNS-1035 label of at most {MAX_NAME[obj['kind']]} characters")
    if obj["kind"] == "RayCluster":
        for group in spec.get("workerGroupSpecs", []):
            low, replicas, high = group.get("minReplicas"), group.get("replicas"), group.get("maxReplicas")
            if not spec.get("enableInTreeAutoscaling") and (low is None or high is None):
                problems.append(f"worker group {group['groupName']} must set minReplicas and maxReplicas when autoscaling is off")
            elif not low <= replicas <= high:
                problems.append(f"worker group {group['groupName']}: replicas {replicas} outside [{low}, {high}]")
    if obj["kind"] == "RayJob":
        selector = spec.get("clusterSelector", {})
        if bool(selector) == bool(spec.get("rayClusterSpec")):
            problems.append("a RayJob sets exactly one of rayClusterSpec and clusterSelector")
        clusters = {o["metadata"]["name"] for o in objects if o["kind"] == "RayCluster"}
        if selector and selector.get("ray.io/cluster") not in clusters:
            problems.append(f"clusterSelector ray.io/cluster={selector.get('ray.io/cluster')!r} names none of the RayClusters {sorted(clusters)}")
        if selector and spec.get("suspend"):
            problems.append("the clusterSelector mode does not support suspend")
    return problems


# --- the overlays ------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", SHAPES)
def test_each_overlay_renders_the_run(overlay):
    kinds = sorted(o["kind"] for o in render(overlay))
    assert kinds == ["ConfigMap", "PersistentVolumeClaim", "RayCluster", "RayJob"]


@pytest.mark.parametrize("overlay", SHAPES)
def test_kubernetes_objects_and_ray_pods_match_the_kubernetes_schemas(overlay):
    objects = render(overlay)
    for obj in objects:
        if obj["kind"] not in CRD_FILES:
            assert kubernetes_problems(obj) == [], obj["kind"]
    for n, template in enumerate(pod_templates(one(objects, "RayCluster"))):
        assert kubernetes_problems(as_pod_template(template, f"ray-pod-{n}")) == []


@pytest.mark.parametrize("overlay", SHAPES)
def test_ray_objects_match_the_kuberay_crds_and_operator_rules(overlay):
    objects = render(overlay)
    for kind in CRD_FILES:
        obj = one(objects, kind)
        assert kuberay_problems(obj) == [], kind
        assert operator_problems(obj, objects) == [], kind


@pytest.mark.parametrize("overlay", SHAPES)
def test_every_ray_pod_has_shared_memory_the_shared_volume_and_the_image(overlay):
    objects = render(overlay)
    cluster, claims = one(objects, "RayCluster"), {o["metadata"]["name"] for o in objects if o["kind"] == "PersistentVolumeClaim"}
    images = set()
    for template in pod_templates(cluster):
        spec = template["spec"]
        [container] = spec["containers"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert {m["name"] for m in container["volumeMounts"]} <= set(volumes), "a volumeMount names no volume of its pod"
        mounted = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
        assert mounted["/dev/shm"]["emptyDir"]["medium"] == "Memory"
        assert mounted["/data"]["persistentVolumeClaim"]["claimName"] in claims
        resources = container["resources"]
        assert resources["requests"] == {k: v for k, v in resources["limits"].items() if k != "nvidia.com/gpu"}  # Guaranteed QoS
        assert quantity(mounted["/dev/shm"]["emptyDir"]["sizeLimit"]) < quantity(resources["limits"]["memory"])
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"]
        images.add(container["image"])
    [image] = images
    assert re.fullmatch(r"[^:]+/flywheel:[\w.-]+", image), f"the overlay sets a registry and tag for the image, got {image!r}"
    assert cluster["spec"]["rayVersion"] == ray_pin(), "RayCluster.spec.rayVersion must be the ray version pinned in pyproject.toml"


def ray_pin() -> str:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    [pin] = [d.split("==")[1] for d in dependencies if d.startswith("ray[") or d.startswith("ray==")]
    return pin


@pytest.mark.parametrize("overlay", SHAPES)
def test_the_job_runs_a_command_flywheel_accepts_on_the_overlays_cluster(overlay, tmp_path):
    objects = render(overlay)
    cluster, job = one(objects, "RayCluster"), one(objects, "RayJob")
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:2] == ["flywheel", "train"] and "cluster.address=auto" in argv
    # The config file is a key of a ConfigMap mounted in the head pod, where the driver runs.
    config_file, overrides = PurePosixPath(argv[2]), argv[3:]
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    [mount] = [m for m in head["containers"][0]["volumeMounts"] if m["mountPath"] == str(config_file.parent)]
    [volume] = [v for v in head["volumes"] if v["name"] == mount["name"]]
    (tmp_path / config_file.name).write_text(one(objects, "ConfigMap", volume["configMap"]["name"])["data"][config_file.name])
    # The model lives on the cluster's volume; flywheel's loader checks the rest with the tiny model.
    settings = dict(arg.split("=", 1) for arg in overrides)
    loadable = [arg for arg in overrides if not arg.startswith(PENDING_SECTIONS)]
    config = load_config(tmp_path / config_file.name, [*loadable, f"model.path={ROOT / 'assets' / 'tiny-adder'}"])

    nodes, gpus = cluster_shape(cluster)
    assert (nodes, gpus, settings["model.path"], config.trainer.ranks, config.rollout.engines) == SHAPES[overlay]
    assert fits(config.trainer.ranks, config.rollout.engines, settings.get("cluster.placement", "colocated"), nodes, gpus)
    shared = PurePosixPath("/data")
    assert shared in PurePosixPath(config.run.output_dir).parents, "run directories and checkpoints go to the shared volume"
    if nodes > 1:  # engines on other nodes than the trainer cannot read its /dev/shm
        assert config.weights.directory and shared in PurePosixPath(config.weights.directory).parents


def fits(ranks: int, engines: int, placement: str, nodes: int, gpus: int) -> bool:
    """Whether the GPUs hold the run as cluster.placement places it. Colocated: the engine replicas
    share half a GPU, and several trainer ranks take a whole GPU each (one rank shares the engines').
    Disaggregated: a whole GPU per rank and per replica, the replicas on nodes the trainer leaves free."""
    if placement == "colocated":
        return 1 + (ranks if ranks > 1 else 0) <= nodes * gpus
    return engines <= (nodes - -(-ranks // gpus)) * gpus


def test_the_overlays_differ_only_in_node_count():
    single, multi = (one(render(o), "RayCluster") for o in SHAPES)
    assert cluster_shape(single) == (1, 8) and cluster_shape(multi) == (2, 8)
    # rank 0 alone holds fp32 copies of the model on the host (loading, then gathering it to publish): 2 x 131 GB for 32B
    assert node_memory(single) == node_memory(multi) == 512 * 2**30

    def rest(cluster: dict) -> dict:
        spec = deepcopy(cluster["spec"])
        for template in pod_templates({"spec": spec}):
            template["spec"]["containers"][0].pop("resources")
        for group in spec["workerGroupSpecs"]:
            for key in ("replicas", "minReplicas", "maxReplicas"):
                group.pop(key)
        return spec

    assert rest(single) == rest(multi), "besides the node count, both overlays run the same pods"


def node_memory(cluster: dict) -> float:
    [memory] = {quantity(t["spec"]["containers"][0]["resources"]["limits"]["memory"]) for t in pod_templates(cluster)}
    return memory


# --- the validators reject broken objects ------------------------------------------------------


def _rename(obj: dict, path: str, new: str) -> None:
    *parents, leaf = path.split(".")
    for key in parents:
        obj = obj[int(key)] if key.isdigit() else obj[key]
    obj[new] = obj.pop(leaf)


def _set(obj: dict, path: str, value) -> None:
    *parents, leaf = path.split(".")
    for key in parents:
        obj = obj[int(key)] if key.isdigit() else obj[key]
    obj[int(leaf) if leaf.isdigit() else leaf] = value


HEAD_CONTAINER = "spec.headGroupSpec.template.spec.containers.0"
BROKEN = [
    ("RayJob", lambda o: _rename(o, "spec.entrypoint", "entrypont"), "'entrypont' was unexpected"),
    ("RayJob", lambda o: _set(o, "spec.shutdownAfterJobFinishes", "yes"), "'yes' is not of type 'boolean'"),
    ("RayCluster", lambda o: _set(o, "spec.workerGroupSpecs.0.replicas", "2"), "'2' is not of type 'integer'"),
    ("RayCluster", lambda o: _set(o, f"{HEAD_CONTAINER}.resources.limits.memory", "512GB"), "does not match"),
    ("RayCluster", lambda o: _rename(o, f"{HEAD_CONTAINER}.volumeMounts", "volumeMount"), "'volumeMount' was unexpected"),
    (
        "RayCluster",
        lambda o: o["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"].append({"name": "NCCL_DEBUG", "value": "INFO"}),
        "duplicate entry",
    ),
]


@pytest.mark.parametrize("kind, breaks, expected", BROKEN)
def test_the_kuberay_validator_rejects_a_broken_object(kind, breaks, expected):
    obj = deepcopy(one(render("multi-node"), kind))
    breaks(obj)
    problems = kuberay_problems(obj)
    assert any(expected in p for p in problems), problems


def test_the_kubernetes_validator_rejects_a_broken_pod_and_volume_claim():
    objects = render("single-node")
    template = deepcopy(pod_templates(one(objects, "RayCluster"))[0])
    template["spec"]["containers"][0]["volumeMount"] = template["spec"]["containers"][0].pop("volumeMounts")
    assert any("'volumeMount' was unexpected" in p for p in kubernetes_problems(as_pod_template(template, "broken")))
    claim = deepcopy(one(objects, "PersistentVolumeClaim"))
    claim["spec"]["accessModes"] = "ReadWriteMany"
    assert any("is not of type 'array'" in p for p in kubernetes_problems(claim))


def test_the_operator_rules_reject_what_kuberay_would():
    objects = render("multi-node")
    cluster, job = deepcopy(one(objects, "RayCluster")), deepcopy(one(objects, "RayJob"))
    cluster["spec"]["workerGroupSpecs"][0]["minReplicas"] = 2
    assert operator_problems(cluster, objects) == ["worker group gpu: replicas 1 outside [2, 1]"]
    job["spec"]["clusterSelector"]["ray.io/cluster"] = "flywheel-typo"
    job["metadata"]["name"] = "Flywheel_Train"
    assert len(operator_problems(job, objects)) == 2


# --- the image -----------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip()]


def test_the_dockerfile_builds_from_cuda_and_copies_only_files_of_the_repository():
    steps = dockerfile_instructions()
    args = dict(a.split("=", 1) for op, a in steps if op == "ARG" and "=" in a)
    [base] = [re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], a) for op, a in steps if op == "FROM"]
    assert base.startswith("nvidia/cuda:"), base
    copies = [shlex.split(a) for op, a in steps if op in ("COPY", "ADD")]
    assert copies
    for *sources, _ in (words for words in copies):
        for source in (s for s in sources if not s.startswith("--")):
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    assert any(op == "RUN" and "'.[gpu]'" in a for op, a in steps), "the image installs flywheel with the gpu extra"
    gpu_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    assert any(re.fullmatch(r"vllm==[\d.]+", d) for d in gpu_extra), "the gpu extra pins the vLLM the code is written against"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "runs"} <= set(ignored)
