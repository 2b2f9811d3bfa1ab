#!/usr/bin/env bash
# deploy/kubernetes (docs/deploy.md "Kubernetes") without a cluster: every
# manifest parsed and cross-checked (labels and selectors, named ports between
# containers, Services and probes, mounts and volumes, the ConfigMap and
# Secret names and keys, one image tagged with this version, the security
# context, the worker's CPU against its threads and its grace period against
# its drain), validated against the Kubernetes OpenAPI schemas by the npm
# package kubernetes-models (scripts/install-deps.sh), and then run: every
# container's command line exactly as the pod would run it -- the manifest's
# command and args, $(POD_IP) from the downward API, the ConfigMap's files and
# a token in the Secret's place, temp dirs standing in for the volumes -- with
# the built binaries, as the pod's uid/gid with no capabilities. Only
# addresses change: each pod gets a loopback IP (127.0.0.1 the dispatcher,
# 127.0.0.2.. the workers), the Service's DNS names resolve to the
# dispatcher's, and each container port is mapped to a free port. Then: the
# dispatcher prints its listening line, the workers register at their
# advertised $(POD_IP), every probe answers 200, a job with the Secret's token
# runs through them and one without it is refused, the journal is on the
# claim's volume and a dispatcher restarted on it continues, and a worker's
# SIGTERM drain ends within terminationGracePeriodSeconds. The autoscaling/
# overlay's KEDA ScaledObject targets the worker Deployment on the
# sluice_workers_wanted gauge within max_workers (test_workers_wanted.sh has a
# real Prometheus evaluate its query). A self-test breaks
# copies of the manifests and expects the checker to refuse each.
# ROOTFS=DIR (root only; the built image's root file system, docs/deploy.md
# "Kubernetes") runs the same pods inside it: the image's binaries with the
# manifests' command lines unchanged, the root read-only, the volumes bound at
# their mountPaths.
source "$(dirname "$0")/lib.sh"

KDIR="$ROOT/deploy/kubernetes"
ORACLE="${SLUICE_K8S_ORACLE:-/usr/local/lib/sluice-oracle-k8s}"
RUN_UID=65532 # checked against the manifests below (runAsUser/runAsGroup/fsGroup)
for b in sluice-dispatcher sluice-worker sluice; do
    [ -x "$BIN/$b" ] || fail "$BIN/$b not built"
done
/usr/bin/python3 -c 'import yaml' 2>/dev/null || fail "PyYAML missing: run scripts/install-deps.sh"

# ---- the checker: static checks, then (unless --static) the pods' prepared
# command lines and volumes under OUT.
cat >"$TMP/check.py" <<'PY'
import json, os, re, shlex, socket, subprocess, sys
import yaml

kdir, root, binary_dir = sys.argv[1], sys.argv[2], sys.argv[3]
out = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] != "--static" else None
errors = []


def err(msg):
    errors.append(msg)


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# --- files and the kustomization
kust = load_all(os.path.join(kdir, "kustomization.yaml"))[0]
ns = kust.get("namespace")
if kust.get("kind") != "Kustomization" or not ns:
    err("kustomization.yaml: a Kustomization with a namespace expected")
objs = []  # (file, object)
listed = kust.get("resources", [])
for f in sorted(os.listdir(kdir)):
    if not f.endswith(".yaml") or f == "kustomization.yaml":
        continue
    for d in load_all(os.path.join(kdir, f)):
        if not isinstance(d, dict) or "kind" not in d or "apiVersion" not in d:
            err(f"{f}: a document without kind/apiVersion")
            continue
        objs.append((f, d))
    if f not in listed and f != "token-secret.yaml":
        err(f"{f}: not listed in kustomization.yaml resources")
for r in listed:
    if not os.path.exists(os.path.join(kdir, r)):
        err(f"kustomization.yaml: resource {r} does not exist")
if "token-secret.yaml" in listed:
    err("token-secret.yaml must stay out of the kustomization "
        "(a re-apply would replace the real token)")


def of_kind(kind):
    return [(f, o) for f, o in objs if o["kind"] == kind]


names = {}
for f, o in objs:
    key = (o["kind"], o["metadata"]["name"])
    if key in names:
        err(f"{f}: {key} defined twice")
    names[key] = o
    if o["metadata"].get("namespace") not in (None, ns):
        err(f"{f}: {key} in namespace {o['metadata'].get('namespace')}, "
            f"the kustomization's is {ns}")
if [o["metadata"]["name"] for _, o in of_kind("Namespace")] != [ns]:
    err(f"one Namespace {ns} expected")

# --- image: one for every container, the kustomization's, this version
version = re.search(r'#define SL_VERSION "([^"]+)"',
                    open(os.path.join(root, "common/base/version.h")).read()).group(1)
images = kust.get("images", [])
dockerfile = open(os.path.join(kdir, "Dockerfile")).read()
m = re.search(r"docker build -f deploy/kubernetes/Dockerfile -t (\S+):(\S+) build/deb", dockerfile)
if not m:
    err("Dockerfile: the documented build command is missing")
elif len(images) != 1 or images[0].get("name") != m.group(1) or \
        str(images[0].get("newTag")) != m.group(2) or m.group(2) != version:
    err(f"image: the Dockerfile's {m.group(1)}:{m.group(2)}, kustomization images {images} "
        f"and version {version} disagree")
user = re.search(r"^USER (\d+):(\d+)$", dockerfile, re.M)
if not user:
    err("Dockerfile: USER uid:gid expected")

workloads = {}  # component -> (kind, object)
for kind in ("StatefulSet", "Deployment"):
    for f, o in of_kind(kind):
        workloads[o["metadata"]["name"]] = (kind, o)
if set(workloads) != {"sluice-dispatcher", "sluice-worker"}:
    err(f"workloads {sorted(workloads)}: a StatefulSet sluice-dispatcher and "
        "a Deployment sluice-worker expected")
    print("\n".join("k8s-check: " + e for e in errors), file=sys.stderr)
    sys.exit(1)
if (workloads["sluice-dispatcher"][0], workloads["sluice-worker"][0]) != \
        ("StatefulSet", "Deployment"):
    err("the dispatcher is a StatefulSet, the workers a Deployment")

help_keys = {}
for b in ("sluice-dispatcher", "sluice-worker"):
    h = subprocess.run([os.path.join(binary_dir, b), "--help"], capture_output=True,
                       text=True).stdout
    help_keys[b] = {k.replace("-", "_") for k in re.findall(r"^  --([a-z0-9-]+)", h, re.M)}


def conf_lines(text):
    kv = {}
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        k, sep, v = s.partition("=")
        if not sep:
            err(f"config line {i}: not key = value: {s!r}")
            continue
        kv[k.strip()] = v.strip()
    return kv


pods = {}
for name, (kind, w) in workloads.items():
    where = f"{kind} {name}"
    spec = w["spec"]
    tmpl = spec["template"]
    labels = tmpl["metadata"].get("labels", {})
    sel = spec["selector"].get("matchLabels", {})
    if not sel or any(labels.get(k) != v for k, v in sel.items()):
        err(f"{where}: selector {sel} does not match the template's labels {labels}")
    ps = tmpl["spec"]
    psc = ps.get("securityContext", {})
    if psc.get("runAsNonRoot") is not True or not psc.get("runAsUser"):
        err(f"{where}: runAsNonRoot and a non-zero runAsUser expected")
    if user and (str(psc.get("runAsUser")), str(psc.get("runAsGroup"))) != user.groups():
        err(f"{where}: runs as {psc.get('runAsUser')}:{psc.get('runAsGroup')}, the image's USER is "
            f"{user.group(1)}:{user.group(2)}")
    run_uid = os.environ.get("RUN_UID")
    if psc.get("fsGroup") != psc.get("runAsGroup") or str(psc.get("runAsUser")) != run_uid:
        err(f"{where}: fsGroup = runAsGroup = runAsUser = the test's uid {run_uid} expected")
    if psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
        err(f"{where}: seccompProfile RuntimeDefault expected")
    vols = {v["name"]: v for v in ps.get("volumes", [])}
    claims = {c["metadata"]["name"]: c for c in spec.get("volumeClaimTemplates", [])}
    if len(ps["containers"]) != 1:
        err(f"{where}: one container expected")
    c = ps["containers"][0]
    cwhere = f"{where} container {c['name']}"
    img = c.get("image", "")
    if not images or img != f"{images[0]['name']}:{images[0].get('newTag')}":
        err(f"{cwhere}: image {img!r} is not the kustomization's {images}")
    csc = c.get("securityContext", {})
    if csc.get("allowPrivilegeEscalation") is not False or \
            csc.get("readOnlyRootFilesystem") is not True or \
            csc.get("capabilities", {}).get("drop") != ["ALL"]:
        err(f"{cwhere}: allowPrivilegeEscalation false, readOnlyRootFilesystem true, "
            "drop ALL expected")
    cports = {}
    for p in c.get("ports", []):
        if p.get("name") in cports:
            err(f"{cwhere}: port name {p.get('name')} twice")
        cports[p.get("name")] = p["containerPort"]
    if set(cports) != {"grpc", "http"}:
        err(f"{cwhere}: ports named grpc and http expected, got {sorted(cports)}")
    probes = []
    for pk in ("startupProbe", "readinessProbe", "livenessProbe"):
        pr = c.get(pk)
        if pr is None:
            if pk != "startupProbe":
                err(f"{cwhere}: no {pk}")
            continue
        hg = pr.get("httpGet")
        if not hg or hg.get("port") not in cports:
            err(f"{cwhere}: {pk} is not an httpGet on a named port of the container")
            continue
        probes.append((pk, hg.get("path", "/"), hg["port"]))
    mounts = {}
    for vm in c.get("volumeMounts", []):
        if vm["name"] not in vols and vm["name"] not in claims:
            err(f"{cwhere}: mount {vm['name']} has no volume or claim template")
        mounts[vm["mountPath"]] = vm
    for v in list(vols) + list(claims):
        if v not in [vm["name"] for vm in mounts.values()]:
            err(f"{where}: volume {v} is mounted nowhere")
    for v in vols.values():
        if "configMap" in v:
            cm = names.get(("ConfigMap", v["configMap"]["name"]))
            if cm is None:
                err(f"{where}: ConfigMap {v['configMap']['name']} is not defined")
                continue
            for it in v["configMap"].get("items", []):
                if it["key"] not in cm.get("data", {}):
                    err(f"{where}: ConfigMap {v['configMap']['name']} has no key {it['key']}")
        if "secret" in v:
            sec = names.get(("Secret", v["secret"]["secretName"]))
            if sec is None:
                err(f"{where}: Secret {v['secret']['secretName']} is not defined "
                    "(token-secret.yaml)")
            elif v["secret"].get("defaultMode") not in (0o440, 0o400):
                err(f"{where}: the token's mode {v['secret'].get('defaultMode')} "
                    "lets others read it")
    cmd = c.get("command", [])
    binname = "sluice-dispatcher" if name == "sluice-dispatcher" else "sluice-worker"
    # make-debs installs the daemons with PREFIX=/usr.
    if cmd != [f"/usr/bin/{binname}"]:
        err(f"{cwhere}: command {cmd}, [/usr/bin/{binname}] expected (the package's path)")
    env = {}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = ("value", e["value"])
        elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP":
            env[e["name"]] = ("podIP", None)
        else:
            err(f"{cwhere}: env {e['name']}: only values and status.podIP are emulated")
    args = c.get("args", [])
    if "--config" not in args:
        err(f"{cwhere}: no --config")
        continue
    cfgpath = args[args.index("--config") + 1]
    cfgtext = None
    for mp, vm in mounts.items():
        v = vols.get(vm["name"], {})
        if cfgpath.startswith(mp + "/") and "configMap" in v:
            rel = cfgpath[len(mp) + 1:]
            cmdata = names.get(("ConfigMap", v["configMap"]["name"]), {}).get("data", {})
            items = v["configMap"].get("items") or [{"key": k, "path": k} for k in cmdata]
            for it in items:
                if it["path"] == rel:
                    cfgtext = cmdata.get(it["key"])
    if cfgtext is None:
        err(f"{cwhere}: --config {cfgpath} is not a file of a mounted ConfigMap")
        continue
    conf = conf_lines(cfgtext)
    for k in conf:
        if k not in help_keys[binname]:
            err(f"{cwhere}: config key {k} is not in {binname} --help")
    for a in args:
        if a.startswith("--") and a[2:].replace("-", "_") not in help_keys[binname] | {"config"}:
            err(f"{cwhere}: flag {a} is not in {binname} --help")
    pods[name] = dict(kind=kind, w=w, spec=spec, ps=ps, c=c, vols=vols, claims=claims,
                      mounts=mounts, cports=cports, probes=probes, env=env, args=args, conf=conf,
                      cfgpath=cfgpath, cfgtext=cfgtext, binname=binname,
                      grace=ps.get("terminationGracePeriodSeconds", 30))


def under_mount(pod, path, want_kind):
    """The mount a path lies under, if that mount's volume is of want_kind."""
    for mp, vm in pod["mounts"].items():
        if path == mp or path.startswith(mp + "/"):
            if want_kind == "claim":
                return vm["name"] in pod["claims"]
            return want_kind in pod["vols"].get(vm["name"], {})
    return False


services = {o["metadata"]["name"]: o for _, o in of_kind("Service")}
disp = pods.get("sluice-dispatcher")
work = pods.get("sluice-worker")
if disp and work:
    # Services: each selects the dispatcher; ports are the container's by name.
    dlabels = disp["spec"]["template"]["metadata"]["labels"]
    wlabels = work["spec"]["template"]["metadata"]["labels"]
    for sn, s in services.items():
        sel = s["spec"].get("selector", {})
        hits = [n for n, p in pods.items()
                if all(p["spec"]["template"]["metadata"]["labels"].get(k) == v
                       for k, v in sel.items())]
        if hits != ["sluice-dispatcher"]:
            err(f"Service {sn}: selects {hits}, the dispatcher alone expected")
        for sp in s["spec"]["ports"]:
            tp = sp.get("targetPort")
            if tp not in disp["cports"] or sp.get("name") != tp or \
                    sp["port"] != disp["cports"].get(tp):
                err(f"Service {sn}: port {sp} is not the dispatcher's named port "
                    "of the same number")
    head = services.get(disp["spec"].get("serviceName"))
    if head is None or head["spec"].get("clusterIP") != "None":
        err(f"StatefulSet: serviceName {disp['spec'].get('serviceName')} is not a headless Service")
    if disp["spec"].get("replicas") != 1:
        err("StatefulSet: replicas must be 1 (one dispatcher holds the jobs)")
    if not disp["claims"]:
        err("StatefulSet: no volumeClaimTemplates for the journal")
    journal = disp["conf"].get("journal", "")
    if not journal or not under_mount(disp, journal, "claim"):
        err(f"dispatcher: journal {journal!r} is not on the claim template's volume")
    for p in (disp, work):
        tf = p["conf"].get("token_file", "")
        if not tf or not under_mount(p, tf, "secret"):
            err(f"{p['binname']}: token_file {tf!r} is not in the mounted Secret")
        elif os.path.basename(tf) not in \
                names.get(("Secret", "sluice-token"), {}).get("stringData", {}):
            err(f"{p['binname']}: the Secret has no key {os.path.basename(tf)}")
    dr = work["conf"].get("data_root", "")
    if not dr or not under_mount(work, dr, "hostPath"):
        err(f"worker: data_root {dr!r} is not on the data volume")
    # CPU: one pipeline thread per core of the limit, requests = limits.
    res = work["c"].get("resources", {})
    threads = work["conf"].get("threads")
    cpu = {str(res.get(k, {}).get("cpu")) for k in ("requests", "limits")}
    if threads in (None, "0") or cpu != {threads}:
        err(f"worker: threads {threads} and cpu requests/limits {cpu} must be one number")
    drain_s = int(work["conf"].get("drain_ms", "5000")) / 1000
    if work["grace"] < drain_s + 5:
        err(f"worker: terminationGracePeriodSeconds {work['grace']} leaves < 5 s after drain_ms")
    # The advertised address: $(POD_IP) from the downward API, the grpc port.
    a = work["args"]
    adv = a[a.index("--advertise") + 1] if "--advertise" in a else ""
    mm = re.fullmatch(r"\$\((\w+)\):(\d+)", adv)
    if not mm or work["env"].get(mm.group(1), ("",))[0] != "podIP" or \
            int(mm.group(2)) != work["cports"]["grpc"]:
        err(f"worker: --advertise {adv!r} is not $(POD_IP):<grpc containerPort>")
    lp = work["conf"].get("listen", "").rpartition(":")[2]
    if lp != str(work["cports"]["grpc"]) or \
            work["conf"].get("http", "").rpartition(":")[2] != str(work["cports"]["http"]):
        err("worker: listen/http ports are not the container's grpc/http ports")
    if disp["conf"].get("listen", "").rpartition(":")[2] != str(disp["cports"]["grpc"]) or \
            disp["conf"].get("http", "").rpartition(":")[2] != str(disp["cports"]["http"]):
        err("dispatcher: listen/http ports are not the container's grpc/http ports")

# The DNS names of the dispatcher's Services, the worker's dispatcher address.
dns = {}
for sn, s in services.items():
    for n in (sn, f"{sn}.{ns}", f"{sn}.{ns}.svc", f"{sn}.{ns}.svc.cluster.local"):
        dns[n] = {sp["port"]: sp["targetPort"] for sp in s["spec"]["ports"]}
if disp:
    head = disp["spec"].get("serviceName")
    for n in (f"sluice-dispatcher-0.{head}.{ns}.svc.cluster.local", f"sluice-dispatcher-0.{head}"):
        dns[n] = {p: name for name, p in disp["cports"].items()}
if work:
    h, _, p = work["conf"].get("dispatcher", "").rpartition(":")
    if h not in dns or not p.isdigit() or dns[h].get(int(p)) != "grpc":
        err(f"worker: dispatcher {work['conf'].get('dispatcher')!r} is not "
            "a dispatcher Service's grpc port")

# --- autoscaling/ (docs/deploy.md "Autoscaling"): an overlay of this
# directory with a KEDA ScaledObject on the dispatcher's workers-wanted gauge
# for the worker Deployment; its query is what test_workers_wanted.sh has a
# real Prometheus evaluate.
adir = os.path.join(kdir, "autoscaling")
if not os.path.isdir(adir):
    err("autoscaling/: missing (the KEDA overlay)")
else:
    akust = load_all(os.path.join(adir, "kustomization.yaml"))[0]
    if akust.get("kind") != "Kustomization" or akust.get("namespace") != ns or \
            ".." not in akust.get("resources", []):
        err("autoscaling/kustomization.yaml: a Kustomization of '..' in the same namespace "
            "expected")
    sos = []
    for r in akust.get("resources", []):
        if r == "..":
            continue
        if not os.path.exists(os.path.join(adir, r)):
            err(f"autoscaling/kustomization.yaml: resource {r} does not exist")
            continue
        sos += [o for o in load_all(os.path.join(adir, r)) if o.get("kind") == "ScaledObject"]
    if len(sos) != 1:
        err(f"autoscaling/: one ScaledObject expected, found {len(sos)}")
    for so in sos:
        if so.get("apiVersion") != "keda.sh/v1alpha1":
            err("ScaledObject: apiVersion keda.sh/v1alpha1 expected")
        spec = so.get("spec", {})
        ref = spec.get("scaleTargetRef", {})
        deps = {o["metadata"]["name"] for _, o in of_kind("Deployment")}
        if ref.get("kind", "Deployment") != "Deployment" or ref.get("name") not in deps or \
                not (work and ref.get("name") == "sluice-worker"):
            err(f"ScaledObject: scaleTargetRef {ref} is not the worker Deployment")
        lo, hi = spec.get("minReplicaCount"), spec.get("maxReplicaCount")
        mw = int(disp["conf"].get("max_workers", "1024")) if disp else 1024
        if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi <= mw):
            err(f"ScaledObject: minReplicaCount {lo!r} / maxReplicaCount {hi!r}: "
                f"1 <= min <= max <= max_workers ({mw}) expected")
        trig = spec.get("triggers", [])
        if len(trig) != 1 or trig[0].get("type") != "prometheus":
            err("ScaledObject: one prometheus trigger expected")
        else:
            md = trig[0].get("metadata", {})
            q = md.get("query", "")
            if not re.search(r"\bsluice_workers_wanted\b", q):
                err(f"ScaledObject: query {q!r} does not read sluice_workers_wanted")
            if md.get("threshold") != "1" or trig[0].get("metricType") != "AverageValue":
                err("ScaledObject: threshold \"1\" and metricType AverageValue expected "
                    "(one replica per wanted worker)")
            if not re.match(r"https?://", md.get("serverAddress", "")):
                err("ScaledObject: serverAddress is not an http(s) URL")

if errors:
    print("\n".join("k8s-check: " + e for e in errors), file=sys.stderr)
    sys.exit(1)
print(f"k8s-check: static checks passed ({len(objs)} objects)")
if out is None:
    sys.exit(0)

# ---- the pods, prepared: loopback IPs, free ports, volumes, argv
def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


portmap = {}
for p in pods.values():
    for num in p["cports"].values():
        portmap.setdefault(num, free_port())
uid = int(os.environ["RUN_UID"])
as_root = os.geteuid() == 0
nworkers = min(int(work["spec"].get("replicas", 1)), 2)
plan = [("dispatcher", disp, "127.0.0.1")] + \
       [(f"worker{i}", work, f"127.0.0.{i + 2}") for i in range(nworkers)]
disp_ip = "127.0.0.1"


def addr(text, pod_ip):
    h, _, p = text.rpartition(":")
    if not p.isdigit():
        raise SystemExit(f"k8s-check: {text!r} is not HOST:PORT")
    if h in ("0.0.0.0", pod_ip):
        ip = pod_ip
    elif h in dns:
        ip = disp_ip
        tp = dns[h][int(p)]
        p = disp["cports"][tp] if isinstance(tp, str) else tp
    else:
        raise SystemExit(f"k8s-check: {text!r}: the host is neither the pod's nor a Service's")
    return f"{ip}:{portmap[int(p)]}"


rootfs = os.environ.get("ROOTFS", "")


def path(text, voldirs):
    for mp in sorted(voldirs, key=len, reverse=True):
        if text == mp or text.startswith(mp + "/"):
            # In the image's root file system the volumes are where the pod has them.
            return text if rootfs else voldirs[mp] + text[len(mp):]
    raise SystemExit(f"k8s-check: path {text!r} is on no volume "
                     "(the root file system is read-only)")


ADDR_KEYS = {"listen", "http", "dispatcher", "advertise"}
token = open(os.path.join(out, "token")).read()
for podname, p, ip in plan:
    pdir = os.path.join(out, podname)
    voldirs = {}
    for mp, vm in p["mounts"].items():
        v = p["vols"].get(vm["name"], {})
        d = os.path.join(pdir, "vol", vm["name"])
        if "hostPath" in v:
            # One directory for every "node": the data set is the same everywhere.
            d = os.path.join(out, "hostpath") + v["hostPath"]["path"]
        os.makedirs(d, exist_ok=True)
        voldirs[mp] = d
    for mp, vm in p["mounts"].items():
        v = p["vols"].get(vm["name"], {})
        d = voldirs[mp]
        if "configMap" in v:
            cm = names[("ConfigMap", v["configMap"]["name"])]["data"]
            for it in v["configMap"].get("items") or [{"key": k, "path": k} for k in cm]:
                # The one change to a config file: addresses and paths, key by key.
                lines = []
                for line in cm[it["key"]].splitlines():
                    k, sep, val = line.partition("=")
                    k, val = k.strip(), val.strip()
                    if sep and not k.startswith("#") and k in ADDR_KEYS:
                        line = f"{k} = {addr(val, ip)}"
                    elif sep and not k.startswith("#") and val.startswith("/"):
                        line = f"{k} = {path(val, voldirs)}"
                    lines.append(line + "\n")
                fp = os.path.join(d, it["path"])
                with open(fp, "w") as f:
                    f.write("".join(lines))
                os.chmod(fp, 0o644)
        elif "secret" in v:
            fp = os.path.join(d, "token")
            with open(fp, "w") as f:
                f.write(token)
            if as_root:
                os.chown(fp, 0, uid)
            os.chmod(fp, v["secret"]["defaultMode"])
        elif vm["name"] in p["claims"]:
            # A fresh ext4 volume: lost+found at its root, owned by root;
            # fsGroup makes the root group-writable and setgid.
            os.makedirs(os.path.join(d, "lost+found"), mode=0o700, exist_ok=True)
            if as_root:
                os.chown(d, 0, uid)
            os.chmod(d, 0o2770)
    for sub in (pdir, os.path.join(pdir, "vol")):
        os.chmod(sub, 0o755)
    argv = [p["c"]["command"][0] if rootfs else os.path.join(binary_dir, p["binname"])]
    with open(os.path.join(pdir, "mounts"), "w") as f:
        for mp, vm in p["mounts"].items():
            f.write(f"{'ro' if vm.get('readOnly') else 'rw'} {voldirs[mp]} {mp}\n")
    for a in p["args"]:
        a = re.sub(r"\$\((\w+)\)", lambda m: ip if p["env"][m.group(1)][0] == "podIP"
                   else p["env"][m.group(1)][1], a)
        if a.startswith("/"):
            a = path(a, voldirs)
        elif re.fullmatch(r"[\w.-]+:\d+", a):
            a = addr(a, ip)
        argv.append(a)
    with open(os.path.join(pdir, "argv"), "w") as f:
        f.write("\0".join(argv))
    with open(os.path.join(pdir, "env"), "w") as f:
        f.write(shlex.join(argv) + "\n")
    with open(os.path.join(pdir, "probes"), "w") as f:
        for pk, ppath, pport in p["probes"]:
            f.write(f"{pk} http://{ip}:{portmap[p['cports'][pport]]}{ppath}\n")
    facts = {"grpc": f"{ip}:{portmap[p['cports']['grpc']]}",
             "http": f"{ip}:{portmap[p['cports']['http']]}", "grace": p["grace"],
             "journal": voldirs.get(next((mp for mp, vm in p["mounts"].items()
                                          if vm["name"] in p["claims"]), ""), ""),
             "data": voldirs.get(work["conf"]["data_root"], "") if p is work else "",
             "token": next((voldirs[mp] + "/token" for mp, vm in p["mounts"].items()
                            if "secret" in p["vols"].get(vm["name"], {})), "")}
    with open(os.path.join(pdir, "facts"), "w") as f:
        for k, v in facts.items():
            f.write(f"{k}={v}\n")
with open(os.path.join(out, "pods"), "w") as f:
    f.write(" ".join(n for n, _, _ in plan) + "\n")
PY

echo "== static checks"
RUN_UID=$RUN_UID /usr/bin/python3 "$TMP/check.py" "$KDIR" "$ROOT" "$BIN" --static ||
    fail "the manifests fail the static checks"

# ---- the checker must refuse broken manifests (each one mistake).
echo "== self-test: broken copies are refused"
mutate() { # NAME FILE PYTHON-EXPR-ON-TEXT
    local d="$TMP/mut-$1"
    rm -rf "$d"
    cp -r "$KDIR" "$d"
    /usr/bin/python3 - "$d/$2" "$3" <<'PY'
import sys
path, expr = sys.argv[1], sys.argv[2]
text = open(path).read()
new = eval(expr, {"t": text})
assert new != text, "mutation changed nothing"
open(path, "w").write(new)
PY
    if RUN_UID=$RUN_UID /usr/bin/python3 "$TMP/check.py" "$d" "$ROOT" "$BIN" --static \
        2>"$TMP/mut-$1.err" >/dev/null; then
        fail "self-test $1: the checker accepted a broken copy"
    fi
    grep -q "$4" "$TMP/mut-$1.err" || { cat "$TMP/mut-$1.err" >&2; fail "self-test $1: no '$4'"; }
}
mutate selector worker.yaml "t.replace('component: worker\n    spec:', 'component: wrker\n    spec:')" \
    "selector"
mutate probe-port dispatcher.yaml "t.replace('port: http\n            periodSeconds: 5', 'port: htp\n            periodSeconds: 5')" \
    "readinessProbe"
mutate cm-key dispatcher.yaml "t.replace('key: dispatcher.conf', 'key: dispatcher.cnf')" \
    "no key dispatcher.cnf"
mutate cpu worker.yaml "t.replace('cpu: \"2\"\n              memory: 2Gi', 'cpu: \"3\"\n              memory: 2Gi')" \
    "cpu requests/limits"
mutate conf-key config.yaml "t.replace('drain_ms = 20000', 'drain_msec = 20000')" \
    "not in sluice-worker --help"
mutate journal config.yaml "t.replace('journal = /var/lib/sluice-dispatcher', 'journal = /var/lib/sluice')" \
    "not on the claim"
mutate svc-port dispatcher.yaml "t.replace('targetPort: grpc', 'targetPort: grcp', 1)" \
    "Service sluice-dispatcher-headless"
mutate image worker.yaml "t.replace('image: sluice:0.1.0', 'image: sluice:0.0.9')" "image"
mutate so-target autoscaling/worker-scaledobject.yaml "t.replace('name: sluice-worker\n  # At least', 'name: sluice-wrker\n  # At least')" \
    "scaleTargetRef"
mutate so-query autoscaling/worker-scaledobject.yaml "t.replace('query: sum(sluice_workers_wanted)', 'query: sum(sluice_workers_needed)')" \
    "does not read sluice_workers_wanted"
mutate so-max autoscaling/worker-scaledobject.yaml "t.replace('maxReplicaCount: 64', 'maxReplicaCount: 2048')" \
    "maxReplicaCount"
echo "11 broken copies refused"

# ---- the OpenAPI schemas (kubernetes-models validates types and required
# fields; it does not refuse unknown keys, which the checks above cover for
# every key the pods depend on).
echo "== schema oracle"
[ -e "$ORACLE/node_modules/kubernetes-models/package.json" ] ||
    fail "the oracle $ORACLE/node_modules/kubernetes-models is missing: run scripts/install-deps.sh"
/usr/bin/python3 - "$KDIR" >"$TMP/objects.json" <<'PY'
import json, os, sys, yaml
d = sys.argv[1]
objs = []
for f in sorted(os.listdir(d)):
    if f.endswith(".yaml") and f != "kustomization.yaml":
        objs += [[f, o] for o in yaml.safe_load_all(open(os.path.join(d, f))) if o]
json.dump(objs, sys.stdout)
PY
cat >"$TMP/validate.js" <<'JS'
const fs = require("fs");
const objs = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
let bad = 0;
for (const [file, o] of objs) {
    // "apps/v1" -> kubernetes-models/apps/v1/KIND, "v1" -> kubernetes-models/v1/KIND
    const mod = `${process.env.ORACLE}/node_modules/kubernetes-models/${o.apiVersion}/${o.kind}`;
    try {
        const Cls = require(mod)[o.kind];
        new Cls(o).validate();
        console.log(`valid ${file} ${o.kind}/${o.metadata.name}`);
    } catch (e) {
        console.log(`INVALID ${file} ${o.kind}/${o.metadata.name}: ${e.message}`);
        bad++;
    }
}
process.exit(bad ? 1 : 0);
JS
ORACLE="$ORACLE" node "$TMP/validate.js" "$TMP/objects.json" || fail "the schema oracle refused a manifest"
# ... and it refuses a wrong type (its own self-test).
/usr/bin/python3 -c 'import json,sys
o = json.load(open(sys.argv[1]))
for f, x in o:
    if x["kind"] == "Deployment":
        x["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "7500"
json.dump(o, open(sys.argv[1], "w"))' "$TMP/objects.json"
if ORACLE="$ORACLE" node "$TMP/validate.js" "$TMP/objects.json" >"$TMP/oracle-bad.out"; then
    fail "the schema oracle accepted a string containerPort"
fi
grep -q 'containerPort must be integer' "$TMP/oracle-bad.out" || fail "oracle: $(cat "$TMP/oracle-bad.out")"

# kustomize itself, where this machine has kubectl (not a Debian 12 package of
# a current version, so optional): the rendered set is the files' objects with
# the namespace and image applied.
if command -v kubectl >/dev/null 2>&1 && kubectl kustomize --help >/dev/null 2>&1; then
    kubectl kustomize "$KDIR" >"$TMP/rendered.yaml" || fail "kubectl kustomize failed"
    /usr/bin/python3 - "$TMP/rendered.yaml" <<'PY' || fail "the rendered kustomization differs"
import sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objs)
want = sorted([("Namespace", "sluice"), ("ConfigMap", "sluice-config"),
               ("Service", "sluice-dispatcher"), ("Service", "sluice-dispatcher-headless"),
               ("StatefulSet", "sluice-dispatcher"), ("Deployment", "sluice-worker")])
assert kinds == want, kinds
assert all(o["metadata"].get("namespace") == "sluice" for o in objs if o["kind"] != "Namespace")
# YAML 1.1 octal (0440) as kustomize's YAML 1.2 reads it: the same mode.
modes = [v["secret"]["defaultMode"] for o in objs if o["kind"] in ("StatefulSet", "Deployment")
         for v in o["spec"]["template"]["spec"]["volumes"] if "secret" in v]
assert modes and all(m == 0o440 for m in modes), modes
print("kustomize renders", len(objs), "objects")
PY
else
    echo "kubectl not here: kustomize rendering not checked"
fi

# ---- the pods' command lines, run.
echo "== running the containers' commands"
chmod 0711 "$TMP"
mkdir -p "$TMP/pods"
chmod 0755 "$TMP/pods"
openssl rand -hex 32 >"$TMP/pods/token"
ROOTFS="${ROOTFS:-}" RUN_UID=$RUN_UID /usr/bin/python3 "$TMP/check.py" "$KDIR" "$ROOT" "$BIN" "$TMP/pods" ||
    fail "preparing the pods failed"
chmod -R a+rX "$TMP/pods/hostpath" 2>/dev/null || true
read -r -a PODS <"$TMP/pods/pods"

# As the pod runs it: the manifest's uid/gid and fsGroup, no capabilities, no
# new privileges. Only as root (CI is); otherwise as the calling user, said so.
AS=()
if [ -n "${ROOTFS:-}" ]; then
    [ "$(id -u)" = 0 ] || fail "ROOTFS needs root (mount namespaces, chroot)"
    for b in sluice-dispatcher sluice-worker setpriv; do
        [ -x "$ROOTFS/usr/bin/$b" ] || fail "ROOTFS $ROOTFS has no /usr/bin/$b"
    done
    echo "in the image's root file system $ROOTFS"
fi
if [ "$(id -u)" = 0 ]; then
    AS=(setpriv --reuid="$RUN_UID" --regid="$RUN_UID" --groups="$RUN_UID" --inh-caps=-all
        --bounding-set=-all --no-new-privs)
else
    echo "not root: the daemons run as $(id -un), not as uid $RUN_UID"
fi
fact() { sed -n "s/^$2=//p" "$TMP/pods/$1/facts"; }
# With ROOTFS (the image's root file system, docs/deploy.md "Kubernetes"), each
# pod runs in a mount namespace of its own, chrooted into it: the root read-only,
# the volumes bound at their mountPaths (read-only where the manifest says),
# /proc, /dev and /sys as a runtime gives them, the image's own binaries.
IN_ROOTFS='set -e
R=$1 M=$2
shift 2
mount --bind "$R" "$R"
mount -o remount,bind,ro "$R"
mount -t proc proc "$R/proc"
mount --rbind /dev "$R/dev"
mount --rbind /sys "$R/sys"
while read -r mode src dst; do
    mount --bind "$src" "$R$dst"
    if [ "$mode" = ro ]; then mount -o remount,bind,ro "$R$dst"; fi
done <"$M"
exec chroot "$R" "$@"'
pod_cmd() { # POD: the container's command, as the pod runs it, into CMD
    local argv=() wrap=()
    mapfile -d '' argv <"$TMP/pods/$1/argv"
    if [ -n "${ROOTFS:-}" ]; then
        local dst
        while read -r _ _ dst; do
            mkdir -p "$ROOTFS$dst"
        done <"$TMP/pods/$1/mounts"
        wrap=(unshare -m --propagation private sh -c "$IN_ROOTFS" sh "$ROOTFS" "$TMP/pods/$1/mounts")
    fi
    CMD=("${wrap[@]}" "${AS[@]}" "${argv[@]}")
}
start_pod() { # POD
    echo "  $1: $(cat "$TMP/pods/$1/env")"
    pod_cmd "$1"
    start_daemon "$1" "${CMD[@]}"
    local g h
    g=$(eval echo "\$${1}_GRPC")
    h=$(eval echo "\$${1}_HTTP")
    [ "$g" = "$(fact "$1" grpc)" ] && [ "$h" = "$(fact "$1" http)" ] ||
        fail "$1 listens on grpc=$g http=$h, the manifest's ports map to $(fact "$1" grpc) $(fact "$1" http)"
}
probe_pod() { # POD
    local name url code
    while read -r name url; do
        code=$(curl -s -o /dev/null -w '%{http_code}' "$url")
        [ "$code" = 200 ] || fail "$1 $name $url answered $code"
        echo "  $1 $name $url: 200"
    done <"$TMP/pods/$1/probes"
}

# token-secret.yaml applied unchanged: its placeholder is refused at start.
TOKEN=$(fact dispatcher token)
cp -p "$TOKEN" "$TMP/token.real"
/usr/bin/python3 -c 'import sys, yaml
sys.stdout.write(yaml.safe_load(open(sys.argv[1]))["stringData"]["token"])' \
    "$KDIR/token-secret.yaml" >"$TOKEN"
pod_cmd dispatcher
run_rc "$TMP/placeholder.err" timeout 10 "${CMD[@]}"
[ "$RC" != 0 ] && [ "$RC" != 124 ] && grep -q 'token file.*not one line' "$TMP/placeholder.err" ||
    fail "the placeholder token was not refused (rc $RC): $(cat "$TMP/placeholder.err")"
cp -p "$TMP/token.real" "$TOKEN"
echo "  the Secret's placeholder is refused: $(grep -m 1 'token file' "$TMP/placeholder.err")"

start_pod dispatcher
probe_pod dispatcher
for p in "${PODS[@]:1}"; do
    start_pod "$p"
    probe_pod "$p"
done
NW=$((${#PODS[@]} - 1))
wait_live_workers "$dispatcher_HTTP" "$NW"
# Registered at their advertised $(POD_IP):port.
curl -sf "http://$dispatcher_HTTP/status" >"$TMP/status.json"
for p in "${PODS[@]:1}"; do
    /usr/bin/python3 -c 'import json,sys
w = [w["address"] for w in json.load(open(sys.argv[1]))["workers"] if w["state"] == "live"]
sys.exit(0 if sys.argv[2] in w else "worker " + sys.argv[2] + " not among " + str(w))' \
        "$TMP/status.json" "$(fact "$p" grpc)" || fail "$p is not registered at its advertised address"
done
echo "  $NW workers registered at their pod addresses"
# docs/deploy.md's `kubectl exec sluice-dispatcher-0 -- sluice status --dispatcher
# 127.0.0.1:7400 --token-file ...`: loopback inside the pod reaches the wildcard listen.
"$BIN/sluice" status --dispatcher "$dispatcher_GRPC" --token-file "$(fact dispatcher token)" \
    --json >"$TMP/status-cli.json" || fail "sluice status with the Secret's token failed"
grep -q '"workers_live": *'"$NW" "$TMP/status-cli.json" || fail "sluice status: not $NW live workers"

# The daemons run as the pod's uid; in ROOTFS, chrooted into it, read-only.
if [ ${#AS[@]} -gt 0 ]; then
    for p in "${PODS[@]}"; do
        pid=$(eval echo "\$${p}_PID")
        u=$(ps -o uid= -p "$pid" | tr -d ' ')
        [ "$u" = "$RUN_UID" ] || fail "$p runs as uid $u"
        if [ -n "${ROOTFS:-}" ]; then
            [ "$(readlink "/proc/$pid/root")" = "$ROOTFS" ] || fail "$p is not in $ROOTFS"
            awk '$5 == "/" { split($6, o, ","); if (o[1] != "ro") exit 1 }' "/proc/$pid/mountinfo" ||
                fail "$p: its root file system is writable"
        fi
    done
fi

# A job through them with the Secret's token (the client as a training pod
# would run it: the dispatcher Service's address, the same data set).
DATA=$(fact worker0 data)
make_images "$DATA/train" 3 8
chmod -R a+rX "$DATA"
write_train_spec "$TMP/train.json" 1
run_rc "$TMP/run-notoken.err" "$BIN/sluice" run "$TMP/train.json" --dispatcher "$dispatcher_GRPC" \
    --data-root "$DATA" --offload all --json
[ "$RC" != 0 ] && grep -qi 'unauthenticated' "$TMP/run-notoken.err" ||
    fail "a client without the token was not refused (rc $RC): $(cat "$TMP/run-notoken.err")"
"$BIN/sluice" run "$TMP/train.json" --dispatcher "$dispatcher_GRPC" --data-root "$DATA" \
    --offload all --token-file "$TOKEN" --json >"$TMP/run.json" 2>"$TMP/run.err" ||
    fail "the job failed: $(cat "$TMP/run.err")"
/usr/bin/python3 -c 'import json,sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert r["samples"] == 24 and not r.get("fallback"), r' "$TMP/run.json" ||
    fail "the job did not deliver 24 samples without fallback: $(tail -n 1 "$TMP/run.json")"
done_remote=0
for p in "${PODS[@]:1}"; do
    n=$(curl -sf "http://$(fact "$p" http)/status" |
        /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_done"])')
    done_remote=$((done_remote + n))
done
[ "$done_remote" -gt 0 ] || fail "the workers processed no sample"
echo "  a job with the token ran (24 samples, $done_remote by the workers); one without it was refused"

# The journal is on the claim's volume, written by the pod's uid.
J=$(fact dispatcher journal)
[ -s "$J/journal.log" ] || fail "no journal.log on the claim's volume $J: $(ls -la "$J")"
[ ${#AS[@]} -eq 0 ] || [ "$(stat -c %u "$J/journal.log")" = "$RUN_UID" ] || fail "journal not the pod's"

# The dispatcher restarted on the same volume (a pod rescheduled): SIGTERM ends
# it within its grace period, the same command starts again from the journal,
# and the workers register again.
t0=$(date +%s)
kill -TERM "$dispatcher_PID"
for _ in $(seq 1 $(( $(fact dispatcher grace) * 10 ))); do
    kill -0 "$dispatcher_PID" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$dispatcher_PID" 2>/dev/null && fail "the dispatcher outlived terminationGracePeriodSeconds"
wait "$dispatcher_PID" || fail "the dispatcher exited non-zero on SIGTERM"
echo "  dispatcher stopped on SIGTERM in $(( $(date +%s) - t0 )) s"
mv "$TMP/dispatcher.out" "$TMP/dispatcher.1.out"
mv "$TMP/dispatcher.err" "$TMP/dispatcher.1.err"
start_pod dispatcher
probe_pod dispatcher
grep -qi 'journal' "$TMP/dispatcher.err" || fail "the restarted dispatcher says nothing of its journal"
wait_live_workers "$dispatcher_HTTP" "$NW"
"$BIN/sluice" run "$TMP/train.json" --dispatcher "$dispatcher_GRPC" --data-root "$DATA" \
    --offload all --token-file "$TOKEN" --json >"$TMP/run2.json" 2>"$TMP/run2.err" ||
    fail "a job after the restart failed: $(cat "$TMP/run2.err")"
echo "  restarted on its journal; workers back; a second job ran"

# A worker's pod deleted: SIGTERM drains, it leaves, exits 0 within the grace.
wpid=$worker0_PID
t0=$(date +%s)
kill -TERM "$wpid"
for _ in $(seq 1 $(( $(fact worker0 grace) * 10 ))); do
    kill -0 "$wpid" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$wpid" 2>/dev/null && fail "worker0 outlived terminationGracePeriodSeconds"
wait "$wpid" || fail "worker0 exited non-zero on SIGTERM"
grep -q 'draining' "$TMP/worker0.err" && grep -q 'stopped' "$TMP/worker0.err" ||
    fail "worker0 did not drain: $(tail -n 5 "$TMP/worker0.err")"
http_grep '"state": *"left"' "http://$dispatcher_HTTP/status?workers=all" ||
    fail "the dispatcher does not list worker0 as left"
echo "  worker0 drained and left in $(( $(date +%s) - t0 )) s (grace $(fact worker0 grace) s)"
echo "PASS test_k8s_manifests"
